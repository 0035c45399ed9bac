/* queue.c - the bounded MPSC request queue (see queue.h). */
#include "queue.h"

#include <errno.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ volatile("yield")
#else
#define CPU_RELAX() ((void)0)
#endif
#include <stdlib.h>
#include <time.h>

#include "flashtrie.h"
#include "flashtrie/internal/clock.h"


int ft_queue_init(ft_queue *q, size_t cap)
{
    if (cap == 0)
        return FT_EINVAL;
    q->ring = calloc(cap, sizeof *q->ring);
    q->born = calloc(cap, sizeof *q->born);
    if (q->ring == NULL || q->born == NULL) {
        free(q->ring);
        free(q->born);
        return FT_ENOMEM;
    }
    if (pthread_mutex_init(&q->mu, NULL) != 0) {
        free(q->ring);
        free(q->born);
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
        free(q->born);
        return FT_ENOMEM;
    }
    q->cap = cap;
    q->head = q->len = 0;
    q->closed = 0;
    q->paused = q->waiting = 0;
    atomic_init(&q->events, 0);
    q->busy = q->pushed = 0;
    q->high_water = 0;
    return FT_OK;
}

void ft_queue_destroy(ft_queue *q)
{
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    free(q->ring);
    free(q->born);
    q->ring = NULL;
    q->born = NULL;
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
    uint64_t now = fti_now_ns();
    for (size_t i = 0; i < n; i++) {
        size_t at = (q->head + q->len + i) % q->cap;
        q->ring[at] = items[i];
        q->born[at] = now;
    }
    q->len += n;
    q->pushed += n;
    atomic_fetch_add_explicit(&q->events, 1, memory_order_release);
    if (q->len > q->high_water)
        q->high_water = q->len;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
    return FT_OK;
}


size_t ft_queue_pop(ft_queue *q, void **out, size_t max, int64_t first_wait_ns,
                    int64_t more_wait_ns)
{
    if (max == 0)
        return 0;
    pthread_mutex_lock(&q->mu);
    /* A pause outlasts the close: the paused consumer's replica is lent
     * out, and the close must not hand it a batch before it is back. */
    while (q->paused)
        pthread_cond_wait(&q->cv, &q->mu);
    if (q->len == 0 && !q->closed && first_wait_ns < 0 && FT_QUEUE_SPIN_NS > 0) {
        /* Spin a little before sleeping: watch the event count, not the
         * ring, so the lock is not taken while spinning. */
        unsigned ev = atomic_load_explicit(&q->events, memory_order_acquire);
        pthread_mutex_unlock(&q->mu);
        uint64_t until = fti_now_ns() + FT_QUEUE_SPIN_NS;
        for (unsigned i = 0;; i++) {
            if (atomic_load_explicit(&q->events, memory_order_acquire) != ev)
                break;
            if ((i & 63) == 63 && fti_now_ns() >= until)
                break;
            CPU_RELAX();
        }
        pthread_mutex_lock(&q->mu);
        while (q->paused)
            pthread_cond_wait(&q->cv, &q->mu);
    }
    if (q->len == 0 && !q->closed && first_wait_ns != 0) {
        struct timespec until = fti_abs_after(first_wait_ns > 0 ? first_wait_ns : 0);
        /* Only while the consumer waits here with nothing taken may it be
         * paused (ft_queue_pause_if_idle). */
        q->waiting = 1;
        while ((q->len == 0 && !q->closed) || q->paused) {
            if (first_wait_ns < 0)
                pthread_cond_wait(&q->cv, &q->mu);
            else if (pthread_cond_timedwait(&q->cv, &q->mu, &until) ==
                     ETIMEDOUT)
                break;
        }
        q->waiting = 0;
    }
    if (q->len > 0 && q->len < max && more_wait_ns > 0 && !q->closed) {
        /* The batching window opens with the oldest request's push: wait
         * for the batch to fill until it has waited more_wait_ns.  Under
         * load the requests queued behind the running batch have waited
         * that long already and go at once (a window counted from here
         * left the replica idle for it: about half the time with 64
         * clients on the H200). */
        uint64_t now = fti_now_ns(), due = q->born[q->head] +
                                           (uint64_t)more_wait_ns;
        if (due > now) {
            struct timespec until = fti_abs_after((int64_t)(due - now));
            while (q->len < max && !q->closed)
                if (pthread_cond_timedwait(&q->cv, &q->mu, &until) ==
                    ETIMEDOUT)
                    break;
        }
    }
    size_t n = q->paused ? 0 : q->len < max ? q->len : max;
    for (size_t i = 0; i < n; i++)
        out[i] = q->ring[(q->head + i) % q->cap];
    q->head = (q->head + n) % q->cap;
    q->len -= n;
    pthread_mutex_unlock(&q->mu);
    return n;
}

int ft_queue_idle(ft_queue *q)
{
    pthread_mutex_lock(&q->mu);
    int idle = q->len == 0 && !q->closed;
    pthread_mutex_unlock(&q->mu);
    return idle;
}

int ft_queue_pause_if_idle(ft_queue *q)
{
    pthread_mutex_lock(&q->mu);
    int ok = q->len == 0 && !q->closed && !q->paused && q->waiting;
    if (ok)
        q->paused = 1;
    pthread_mutex_unlock(&q->mu);
    return ok;
}

void ft_queue_resume(ft_queue *q)
{
    pthread_mutex_lock(&q->mu);
    q->paused = 0;
    atomic_fetch_add_explicit(&q->events, 1, memory_order_release);
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

void ft_queue_close(ft_queue *q)
{
    pthread_mutex_lock(&q->mu);
    q->closed = 1;
    atomic_fetch_add_explicit(&q->events, 1, memory_order_release);
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
