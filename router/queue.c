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


static void free_lanes(ft_queue *q)
{
    for (int l = 0; l < FT_QUEUE_LANES; l++) {
        free(q->lane[l].ring);
        free(q->lane[l].born);
        q->lane[l].ring = NULL;
        q->lane[l].born = NULL;
    }
}

int ft_queue_init(ft_queue *q, size_t cap)
{
    if (cap == 0)
        return FT_EINVAL;
    int ok = 1;
    for (int l = 0; l < FT_QUEUE_LANES; l++) {
        ft_queue_lane *ln = &q->lane[l];
        ln->ring = calloc(cap, sizeof *ln->ring);
        ln->born = calloc(cap, sizeof *ln->born);
        ln->head = ln->len = 0;
        ok &= ln->ring != NULL && ln->born != NULL;
    }
    if (!ok) {
        free_lanes(q);
        return FT_ENOMEM;
    }
    if (pthread_mutex_init(&q->mu, NULL) != 0) {
        free_lanes(q);
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
        free_lanes(q);
        return FT_ENOMEM;
    }
    q->cap = cap;
    q->len = 0;
    q->closed = 0;
    q->paused = q->waiting = 0;
    atomic_init(&q->events, 0);
    q->busy = q->pushed = 0;
    q->high_water = 0;
    q->heavy_batch = FT_QUEUE_HEAVY_BATCH;
    q->heavy_every = FT_QUEUE_HEAVY_EVERY;
    q->light_run = 0;
    q->heavy_pushed = q->light_ahead = q->heavy_pops = 0;
    q->heavy_limit = q->heavy_running = 0;
    return FT_OK;
}

void ft_queue_set_lanes(ft_queue *q, size_t heavy_batch, unsigned heavy_every)
{
    pthread_mutex_lock(&q->mu);
    q->heavy_batch = heavy_batch;
    q->heavy_every = heavy_every ? heavy_every : 1;
    pthread_mutex_unlock(&q->mu);
}

void ft_queue_set_heavy_limit(ft_queue *q, size_t limit)
{
    pthread_mutex_lock(&q->mu);
    q->heavy_limit = limit;
    atomic_fetch_add_explicit(&q->events, 1, memory_order_release);
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

void ft_queue_heavy_done(ft_queue *q)
{
    pthread_mutex_lock(&q->mu);
    if (q->heavy_running > 0)
        q->heavy_running--;
    /* a pop that waits because heavy_limit heavy pops ran may take one */
    atomic_fetch_add_explicit(&q->events, 1, memory_order_release);
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

void ft_queue_destroy(ft_queue *q)
{
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    free_lanes(q);
}

int ft_queue_push_lanes(ft_queue *q, void *const *items,
                        const unsigned char *heavy, size_t n)
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
        int l = heavy != NULL && heavy[i] ? FT_QUEUE_HEAVY : FT_QUEUE_LIGHT;
        ft_queue_lane *ln = &q->lane[l];
        size_t at = (ln->head + ln->len) % q->cap;
        ln->ring[at] = items[i];
        ln->born[at] = now;
        ln->len++;
        q->heavy_pushed += l == FT_QUEUE_HEAVY;
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

int ft_queue_push_n(ft_queue *q, void *const *items, size_t n)
{
    return ft_queue_push_lanes(q, items, NULL, n);
}

/* heavy_ok: a pop may take heavy items now (q->mu held): some wait, and
 * fewer than heavy_limit heavy pops run (a closed queue drains them all). */
static int heavy_ok(const ft_queue *q)
{
    return q->lane[FT_QUEUE_HEAVY].len > 0 &&
           (q->heavy_limit == 0 || q->heavy_running < q->heavy_limit ||
            q->closed);
}

/* usable: a pop would take something now (q->mu held). */
static int usable(const ft_queue *q)
{
    return q->lane[FT_QUEUE_LIGHT].len > 0 || heavy_ok(q);
}

/* pick_lane is the lane the next pop takes from (q->mu held): the light
 * one, unless it is empty or heavy_every light pops in a row have passed
 * heavy items that wait; never the heavy one while heavy_limit heavy pops
 * run. */
static int pick_lane(const ft_queue *q)
{
    if (!heavy_ok(q))
        return FT_QUEUE_LIGHT;
    if (q->lane[FT_QUEUE_LIGHT].len == 0 || q->light_run >= q->heavy_every)
        return FT_QUEUE_HEAVY;
    return FT_QUEUE_LIGHT;
}

/* lane_max is the most items a pop of max may take from lane l. */
static size_t lane_max(const ft_queue *q, int l, size_t max)
{
    if (l == FT_QUEUE_HEAVY && q->heavy_batch > 0 && q->heavy_batch < max)
        return q->heavy_batch;
    return max;
}

size_t ft_queue_pop(ft_queue *q, void **out, size_t max, int64_t first_wait_ns,
                    int64_t more_wait_ns)
{
    int lane;
    size_t n = ft_queue_pop_lane(q, out, max, first_wait_ns, more_wait_ns,
                                 &lane);
    if (n > 0 && lane == FT_QUEUE_HEAVY)
        ft_queue_heavy_done(q);
    return n;
}

size_t ft_queue_pop_lane(ft_queue *q, void **out, size_t max,
                         int64_t first_wait_ns, int64_t more_wait_ns,
                         int *lane)
{
    *lane = FT_QUEUE_LIGHT;
    if (max == 0)
        return 0;
    pthread_mutex_lock(&q->mu);
    /* A pause outlasts the close: the paused consumer's replica is lent
     * out, and the close must not hand it a batch before it is back. */
    while (q->paused)
        pthread_cond_wait(&q->cv, &q->mu);
    if (!usable(q) && !q->closed && first_wait_ns < 0 && FT_QUEUE_SPIN_NS > 0) {
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
    if (!usable(q) && !q->closed && first_wait_ns != 0) {
        struct timespec until = fti_abs_after(first_wait_ns > 0 ? first_wait_ns : 0);
        /* Only while the consumer waits here with nothing taken may it be
         * paused (ft_queue_pause_if_idle). */
        q->waiting = 1;
        while ((!usable(q) && !q->closed) || q->paused) {
            if (first_wait_ns < 0)
                pthread_cond_wait(&q->cv, &q->mu);
            else if (pthread_cond_timedwait(&q->cv, &q->mu, &until) ==
                     ETIMEDOUT)
                break;
        }
        q->waiting = 0;
    }
    int l = pick_lane(q);
    size_t lmax = lane_max(q, l, max);
    if (q->lane[l].len > 0 && q->lane[l].len < lmax && more_wait_ns > 0 &&
        !q->closed) {
        /* The batching window opens with the oldest request's push: wait
         * for the batch to fill until it has waited more_wait_ns.  Under
         * load the requests queued behind the running batch have waited
         * that long already and go at once (a window counted from here
         * left the replica idle for it: about half the time with 64
         * clients on the H200).  A light request that comes while a heavy
         * batch waits to fill ends the wait: it goes first. */
        ft_queue_lane *ln = &q->lane[l];
        uint64_t now = fti_now_ns(), due = ln->born[ln->head] +
                                           (uint64_t)more_wait_ns;
        if (due > now) {
            struct timespec until = fti_abs_after((int64_t)(due - now));
            while (ln->len < lmax && !q->closed &&
                   (l == FT_QUEUE_LIGHT || q->lane[FT_QUEUE_LIGHT].len == 0))
                if (pthread_cond_timedwait(&q->cv, &q->mu, &until) ==
                    ETIMEDOUT)
                    break;
        }
        l = pick_lane(q);
        lmax = lane_max(q, l, max);
    }
    ft_queue_lane *ln = &q->lane[l];
    size_t n = q->paused ? 0 : ln->len < lmax ? ln->len : lmax;
    for (size_t i = 0; i < n; i++)
        out[i] = ln->ring[(ln->head + i) % q->cap];
    ln->head = (ln->head + n) % q->cap;
    ln->len -= n;
    q->len -= n;
    if (n > 0 && l == FT_QUEUE_HEAVY) {
        q->light_run = 0;
        q->heavy_pops++;
        q->heavy_running++;
        *lane = FT_QUEUE_HEAVY;
    } else if (n > 0 && q->lane[FT_QUEUE_HEAVY].len > 0) {
        /* a light pop passed heavy items that wait */
        q->light_run++;
        q->light_ahead++;
    } else if (n > 0) {
        q->light_run = 0;
    }
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

void ft_queue_lane_stats(ft_queue *q, size_t *heavy_len,
                         uint64_t *heavy_pushed, uint64_t *heavy_pops,
                         uint64_t *light_ahead)
{
    pthread_mutex_lock(&q->mu);
    if (heavy_len)
        *heavy_len = q->lane[FT_QUEUE_HEAVY].len;
    if (heavy_pushed)
        *heavy_pushed = q->heavy_pushed;
    if (heavy_pops)
        *heavy_pops = q->heavy_pops;
    if (light_ahead)
        *light_ahead = q->light_ahead;
    pthread_mutex_unlock(&q->mu);
}
