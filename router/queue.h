/*
 * queue.h - the router's bounded request queue: many producers (nng's
 * threads, one per arriving message) and one consumer at a time (the
 * batcher's worker that has the pop turn, batcher.c).
 *
 * The queue holds pointers and never allocates after ft_queue_init, so
 * memory does not grow with load: a full queue refuses the push with
 * FT_EBUSY and the caller answers BUSY at once.  A message that carries
 * several requests is pushed all or nothing (ft_queue_push_n), so a batch
 * frame is never half queued.
 */
#ifndef FT_QUEUE_H
#define FT_QUEUE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ft_queue {
    pthread_mutex_t mu;
    pthread_cond_t cv;   /* signalled on push and on close */
    void **ring;
    uint64_t *born;      /* when each item was pushed (fti_now_ns) */
    size_t cap;          /* queue_depth */
    size_t head;         /* index of the oldest item */
    size_t len;          /* items queued */
    int closed;          /* ft_queue_close was called */
    int paused;          /* ft_queue_pause_if_idle: pops take nothing */
    int waiting;         /* the consumer waits in ft_queue_pop, empty-handed */
    atomic_uint events;  /* bumped by every push, resume and close: what a
                          * spinning consumer watches without the lock */
    uint64_t busy;       /* pushes refused because the queue was full */
    uint64_t pushed;     /* items ever pushed */
    size_t high_water;   /* the most items ever queued at once */
} ft_queue;

/* ft_queue_init makes an empty queue of cap slots (cap >= 1). */
int ft_queue_init(ft_queue *q, size_t cap);
void ft_queue_destroy(ft_queue *q);

/* ft_queue_push_n queues n items in order, or none of them: FT_EBUSY when
 * fewer than n slots are free (counted in q->busy), FT_ESHUTDOWN after
 * ft_queue_close, FT_EINVAL when n exceeds the capacity. */
int ft_queue_push_n(ft_queue *q, void *const *items, size_t n);

/* FT_QUEUE_SPIN_NS: how long a consumer that waits forever spins on the
 * queue before it sleeps on the condition variable (a compile-time
 * setting for benchmark builds).  A request arriving within it costs no
 * wake-up; but the spinning thread holds a core, and on the shared 2-core
 * box that cost ~100 us per b = 1 request (docs/BENCHMARKS.md), so it is
 * off unless a build sets it (-DFT_QUEUE_SPIN_NS=50000 on a host with
 * idle cores). */
#ifndef FT_QUEUE_SPIN_NS
#define FT_QUEUE_SPIN_NS 0
#endif

/* ft_queue_pop takes up to max items, oldest first.  It waits for the
 * first one until first_wait_ns passes (-1: forever, spinning for
 * FT_QUEUE_SPIN_NS first), then, once it has
 * one, for the queue to hold max until the oldest item has been queued
 * more_wait_ns (the dynamic batching window, counted from that item's
 * push, as max_wait_us promises: requests that queued behind a running
 * batch go at once; 0: take only what is there).  Returns the count taken;
 * 0 on a timeout, or when the queue is closed and empty. */
size_t ft_queue_pop(ft_queue *q, void **out, size_t max, int64_t first_wait_ns,
                    int64_t more_wait_ns);

/* ft_queue_idle is non-zero when the queue is open and holds nothing: a
 * request that arrives then may run at once, ahead of nobody. */
int ft_queue_idle(ft_queue *q);

/* ft_queue_pause_if_idle pauses the consumer when the queue is idle (as
 * ft_queue_idle), the consumer waits in ft_queue_pop having taken nothing,
 * and it is not paused yet, and returns 1: until
 * ft_queue_resume, ft_queue_pop waits (even once the queue is closed) and
 * takes nothing, while pushes go on as usual.  Returns 0 otherwise. */
int ft_queue_pause_if_idle(ft_queue *q);
void ft_queue_resume(ft_queue *q);

/* ft_queue_close wakes the consumer; later pushes fail with FT_ESHUTDOWN,
 * items already queued can still be popped. */
void ft_queue_close(ft_queue *q);

/* ft_queue_stats copies the counters under the lock. */
void ft_queue_stats(ft_queue *q, size_t *len, size_t *cap, uint64_t *busy,
                    uint64_t *pushed, size_t *high_water);

/* The clock of deadlines: fti_now_ns() (CLOCK_MONOTONIC, nanoseconds). */
#include "flashtrie/internal/clock.h"

#endif /* FT_QUEUE_H */
