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
 *
 * Two lanes (issue 39): the producer says of each item whether it is
 * heavy (the server: a request whose T x K x beam is over
 * light_request_cost).  A pop takes from one lane only, the light one
 * first: a light item pushed after N heavy ones goes before them, and a
 * batch never holds a light item behind heavy ones.  The heavy lane's
 * share is bounded below, so it never starves: after heavy_every light
 * pops in a row while heavy items wait, the next pop is heavy.  A heavy
 * pop takes at most heavy_batch items, so a light item that arrives while
 * one runs waits for that many heavy requests, not for max_batch of them.
 * Both lanes share the one bound (cap) and each is oldest first.
 * With heavy_limit set, at most that many heavy batches run at once (the
 * consumer says when one ends, ft_queue_heavy_done): with several
 * replicas, one stays free for light requests, which then never wait for
 * a heavy batch at all.
 */
#ifndef FT_QUEUE_H
#define FT_QUEUE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* FT_QUEUE_LIGHT, FT_QUEUE_HEAVY: the lanes. */
enum { FT_QUEUE_LIGHT = 0, FT_QUEUE_HEAVY = 1, FT_QUEUE_LANES = 2 };

/* ft_queue_lane is one lane's ring: cap slots, oldest at head. */
typedef struct ft_queue_lane {
    void **ring;
    uint64_t *born;      /* when each item was pushed (fti_now_ns) */
    size_t head;         /* index of the oldest item */
    size_t len;          /* items queued in this lane */
} ft_queue_lane;

typedef struct ft_queue {
    pthread_mutex_t mu;
    pthread_cond_t cv;   /* signalled on push and on close */
    ft_queue_lane lane[FT_QUEUE_LANES];
    size_t cap;          /* queue_depth: both lanes together */
    size_t len;          /* items queued, both lanes */
    size_t heavy_batch;  /* the most items a heavy pop takes (>= 1) */
    unsigned heavy_every; /* light pops in a row while heavy items wait
                           * before a heavy pop is due (>= 1) */
    unsigned light_run;  /* light pops in a row while heavy items waited */
    size_t heavy_limit;  /* heavy pops running at once; 0: no limit */
    size_t heavy_running; /* heavy pops taken and not yet done */
    uint64_t heavy_pushed;  /* items ever pushed to the heavy lane */
    uint64_t light_ahead;   /* light pops taken while heavy items waited */
    uint64_t heavy_pops;    /* pops from the heavy lane */
    int closed;          /* ft_queue_close was called */
    int paused;          /* ft_queue_pause_if_idle: pops take nothing */
    int waiting;         /* the consumer waits in ft_queue_pop, empty-handed */
    atomic_uint events;  /* bumped by every push, resume and close: what a
                          * spinning consumer watches without the lock */
    uint64_t busy;       /* pushes refused because the queue was full */
    uint64_t pushed;     /* items ever pushed */
    size_t high_water;   /* the most items ever queued at once */
} ft_queue;

/* ft_queue_init makes an empty queue of cap slots (cap >= 1), heavy
 * pops of up to FT_QUEUE_HEAVY_BATCH items, one due after
 * FT_QUEUE_HEAVY_EVERY light pops (ft_queue_set_lanes changes both). */
int ft_queue_init(ft_queue *q, size_t cap);

#define FT_QUEUE_HEAVY_BATCH 1
#define FT_QUEUE_HEAVY_EVERY 8

/* ft_queue_set_lanes sets the most items a heavy pop takes (0: no bound
 * but the pop's max) and how many light pops in a row may pass heavy
 * items that wait (at least 1). */
void ft_queue_set_lanes(ft_queue *q, size_t heavy_batch, unsigned heavy_every);
void ft_queue_destroy(ft_queue *q);

/* ft_queue_set_heavy_limit sets how many heavy pops (ft_queue_pop_lane)
 * may be running at once; 0: no limit.  A closed queue ignores it, so a
 * drain empties both lanes. */
void ft_queue_set_heavy_limit(ft_queue *q, size_t limit);

/* ft_queue_push_n queues n items in order, or none of them: FT_EBUSY when
 * fewer than n slots are free (counted in q->busy), FT_ESHUTDOWN after
 * ft_queue_close, FT_EINVAL when n exceeds the capacity. */
int ft_queue_push_n(ft_queue *q, void *const *items, size_t n);

/* ft_queue_push_lanes is ft_queue_push_n with each item's lane: heavy[i]
 * non-zero puts items[i] in the heavy lane (heavy NULL: all light).  All
 * or none, against the one bound, as ft_queue_push_n. */
int ft_queue_push_lanes(ft_queue *q, void *const *items,
                        const unsigned char *heavy, size_t n);

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

/* ft_queue_pop takes up to max items of one lane, oldest first: the
 * light lane's unless it is empty or a heavy pop is due (see the top of
 * this file); a heavy pop takes at most heavy_batch.  It waits for the
 * first one until first_wait_ns passes (-1: forever, spinning for
 * FT_QUEUE_SPIN_NS first), then, once it has
 * one, for the queue to hold max until the oldest item has been queued
 * more_wait_ns (the dynamic batching window, counted from that item's
 * push, as max_wait_us promises: requests that queued behind a running
 * batch go at once; 0: take only what is there).  A light item pushed
 * while a heavy batch waits to fill ends that wait, and goes instead.  Returns the count taken;
 * 0 on a timeout, or when the queue is closed and empty. */
size_t ft_queue_pop(ft_queue *q, void **out, size_t max, int64_t first_wait_ns,
                    int64_t more_wait_ns);

/* ft_queue_idle is non-zero when the queue is open and holds nothing: a
 * request that arrives then may run at once, ahead of nobody. */
int ft_queue_idle(ft_queue *q);

/* ft_queue_pop_lane is ft_queue_pop that says which lane it took from
 * (*lane); a heavy pop counts as running, against heavy_limit, until the
 * caller calls ft_queue_heavy_done.  While heavy_limit heavy pops run,
 * heavy items are not taken (a pop waits for a light one, or for a heavy
 * one to be done).  ft_queue_pop itself counts nothing. */
size_t ft_queue_pop_lane(ft_queue *q, void **out, size_t max,
                         int64_t first_wait_ns, int64_t more_wait_ns,
                         int *lane);
void ft_queue_heavy_done(ft_queue *q);

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

/* ft_queue_lane_stats copies the lanes' counters under the lock: items in
 * the heavy lane now, ever pushed to it, heavy pops, and light pops taken
 * while heavy items waited (any may be NULL). */
void ft_queue_lane_stats(ft_queue *q, size_t *heavy_len,
                         uint64_t *heavy_pushed, uint64_t *heavy_pops,
                         uint64_t *light_ahead);

/* The clock of deadlines: fti_now_ns() (CLOCK_MONOTONIC, nanoseconds). */
#include "flashtrie/internal/clock.h"

#endif /* FT_QUEUE_H */
