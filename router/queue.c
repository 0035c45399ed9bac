/* queue.c - the bounded MPSC request queue (see queue.h). */
#include "queue.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "flashtrie.h"

uint64_t ft_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int ft_queue_init(ft_queue *q, size_t cap)
{
    if (cap == 0)
        return FT_EINVAL;
    q->ring = calloc(cap, sizeof *q->ring);
    if (q->ring == NULL)
        return FT_ENOMEM;
    if (pthread_mutex_init(&q->mu, NULL) != 0) {
        free(q->ring);
        return FT_ENOMEM;
    }
    /* The condition variable waits on CLOCK_MONOTONIC, like deadlines, so
     * a wall-clock step never stretches or cuts a batching window. */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&q->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (rc != 0) {
        pthread_mutex_destroy(&q->mu);
        free(q->ring);
        return FT_ENOMEM;
    }
    q->cap = cap;
    q->head = q->len = 0;
    q->closed = 0;
    q->busy = q->pushed = 0;
    q->high_water = 0;
    return FT_OK;
}

void ft_queue_destroy(ft_queue *q)
{
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    free(q->ring);
    q->ring = NULL;
}

int ft_queue_push_n(ft_queue *q, void *const *items, size_t n)
{
    if (n > q->cap)
        return FT_EINVAL;
    pthread_mutex_lock(&q->mu);
    if (q->closed) {
        pthread_mutex_unlock(&q->mu);
        return FT_ESHUTDOWN;
    }
    if (q->cap - q->len < n) {
        q->busy++;
        pthread_mutex_unlock(&q->mu);
        return FT_EBUSY;
    }
    for (size_t i = 0; i < n; i++)
        q->ring[(q->head + q->len + i) % q->cap] = items[i];
    q->len += n;
    q->pushed += n;
    if (q->len > q->high_water)
        q->high_water = q->len;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
    return FT_OK;
}

/* abs_after returns the CLOCK_MONOTONIC time ns from now. */
static struct timespec abs_after(int64_t ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ns / 1000000000;
    ts.tv_nsec += ns % 1000000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    return ts;
}

size_t ft_queue_pop(ft_queue *q, void **out, size_t max, int64_t first_wait_ns,
                    int64_t more_wait_ns)
{
    if (max == 0)
        return 0;
    pthread_mutex_lock(&q->mu);
    if (q->len == 0 && !q->closed && first_wait_ns != 0) {
        struct timespec until = abs_after(first_wait_ns > 0 ? first_wait_ns : 0);
        while (q->len == 0 && !q->closed) {
            if (first_wait_ns < 0)
                pthread_cond_wait(&q->cv, &q->mu);
            else if (pthread_cond_timedwait(&q->cv, &q->mu, &until) ==
                     ETIMEDOUT)
                break;
        }
    }
    if (q->len > 0 && q->len < max && more_wait_ns > 0 && !q->closed) {
        /* The batching window opens with the first request: wait for the
         * batch to fill, but never longer than more_wait_ns. */
        struct timespec until = abs_after(more_wait_ns);
        while (q->len < max && !q->closed)
            if (pthread_cond_timedwait(&q->cv, &q->mu, &until) == ETIMEDOUT)
                break;
    }
    size_t n = q->len < max ? q->len : max;
    for (size_t i = 0; i < n; i++)
        out[i] = q->ring[(q->head + i) % q->cap];
    q->head = (q->head + n) % q->cap;
    q->len -= n;
    pthread_mutex_unlock(&q->mu);
    return n;
}

void ft_queue_close(ft_queue *q)
{
    pthread_mutex_lock(&q->mu);
    q->closed = 1;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

void ft_queue_stats(ft_queue *q, size_t *len, size_t *cap, uint64_t *busy,
                    uint64_t *pushed, size_t *high_water)
{
    pthread_mutex_lock(&q->mu);
    if (len)
        *len = q->len;
    if (cap)
        *cap = q->cap;
    if (busy)
        *busy = q->busy;
    if (pushed)
        *pushed = q->pushed;
    if (high_water)
        *high_water = q->high_water;
    pthread_mutex_unlock(&q->mu);
}
