/*
 * queue.h - the router's bounded request queue: many producers (nng's
 * threads, one per arriving message) and one consumer (the batcher).
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
#include <stddef.h>
#include <stdint.h>

typedef struct ft_queue {
    pthread_mutex_t mu;
    pthread_cond_t cv;   /* signalled on push and on close */
    void **ring;
    size_t cap;          /* queue_depth */
    size_t head;         /* index of the oldest item */
    size_t len;          /* items queued */
    int closed;          /* ft_queue_close was called */
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

/* ft_queue_pop takes up to max items, oldest first.  It waits for the
 * first one until first_wait_ns passes (-1: forever), then, once it has
 * one, for up to more_wait_ns for the queue to hold max (the dynamic
 * batching window; 0: take only what is there).  Returns the count taken;
 * 0 on a timeout, or when the queue is closed and empty. */
size_t ft_queue_pop(ft_queue *q, void **out, size_t max, int64_t first_wait_ns,
                    int64_t more_wait_ns);

/* ft_queue_close wakes the consumer; later pushes fail with FT_ESHUTDOWN,
 * items already queued can still be popped. */
void ft_queue_close(ft_queue *q);

/* ft_queue_stats copies the counters under the lock. */
void ft_queue_stats(ft_queue *q, size_t *len, size_t *cap, uint64_t *busy,
                    uint64_t *pushed, size_t *high_water);

/* ft_now_ns is CLOCK_MONOTONIC in nanoseconds: the clock of deadlines. */
uint64_t ft_now_ns(void);

#endif /* FT_QUEUE_H */
