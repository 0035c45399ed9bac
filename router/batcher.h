/*
 * batcher.h - dynamic batching in front of the engine slot.
 *
 * Workers (one per replica, and a spare one per GPU replica) take
 * requests from the bounded queue themselves and form batches: one worker
 * at a time, as soon as a replica is idle, reserves it, takes the oldest
 * request, waits up to max_wait_us for the batch to fill to max_batch,
 * gives the pop turn to the next worker, runs the batch on that replica,
 * gives the replica back and answers the jobs on its own thread.  A batch
 * is of one lane of the queue (queue.h): light requests first, heavy ones
 * at most heavy_batch at a time and on at most heavy_limit replicas at
 * once, counted until their answers are written.  While
 * every replica is busy, requests wait in the queue, so the next batch
 * grows with the load (and the queue bound, not memory, absorbs bursts).
 * A request that finds a worker waiting is run and answered by that
 * worker: one hand-off (the producer's push) from arrival to answer, and
 * none at all for a lone request run inline (ft_batcher_run_inline).
 *
 * On a GPU replica the spare worker forms and runs the next batch while
 * the first one's replies are written, so the device does not idle
 * meanwhile.  A replica that goes idle wakes only a thread that waits.
 * With answer threads (ft_batcher_answer_threads), a worker shares a
 * batch's answers out: it takes the first itself and the others go to
 * those threads as each is free, so a batch's last reply leaves after
 * about n / (threads + 1) answers' time, not n: handing one reply to nng
 * costs tens of microseconds of the answering thread's time (a send, the
 * wake-ups of nng's own threads), which one thread pays batch after batch
 * (docs/BENCHMARKS.md, "Daemon overhead").
 *
 * A replica whose engine fails with a device error (slot.h) gets no more
 * batches; the batch that met the fault re-runs, whole, on a healthy
 * replica of its generation, and only when none is left does every request
 * of it get the error (FT_ECUDA: "engine: no healthy replica left (N of N
 * failed): CUDA error").  No request is lost, cut short or answered twice.
 *
 * A request whose deadline has passed when its batch is about to run is
 * answered FT_EDEADLINE and not run.  Answers do not depend on the batch a
 * request rides in (docs/specification.md section 6): the slot runs the same
 * engine call as `flashtrie search`.
 */
#ifndef FT_BATCHER_H
#define FT_BATCHER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "flashtrie.h"
#include "queue.h"
#include "slot.h"

/* ft_job is one request in the router.  The producer owns it and its
 * result buffers (sized for the request's results and T) and keeps them
 * alive until done is called; done runs on a worker thread, once. */
typedef struct ft_job {
    ft_request req;
    ft_result *res;
    uint64_t deadline_ns; /* fti_now_ns() clock; 0 = none */
    uint64_t gen_id;      /* the generation that answered (0: not run) */
    /* validated: how much of req the producer (the server's decoder:
     * the door) validated, FT_DOOR_* (slot.h): FT_DOOR_ALL, the engine
     * validates nothing again; FT_DOOR_EARLY, only the duplicate tokens,
     * beside its work; FT_DOOR_NONE (0), everything.  A batch runs at the
     * least of its jobs' (none < all-but-duplicates < all). */
    int validated;
    /* The engine call of the job's batch began and ended (fti_now_ns; a
     * failover's re-runs included): the producer's clock of its queue
     * wait and engine time.  0: the job did not run (its deadline passed,
     * or it is not answered yet). */
    uint64_t run_ns, ran_ns;
    void (*done)(struct ft_job *job);
    void *arg;
} ft_job;

/* FT_BATCH_SIZE_BUCKETS: batch sizes are counted in power-of-two buckets,
 * bucket b holding the batches of 2^(b-1)+1 .. 2^b requests (bucket 0: one
 * request); the last bucket holds every larger batch. */
#define FT_BATCH_SIZE_BUCKETS 12

/* ft_batch_size_bucket is the bucket of a batch of n >= 1 requests. */
static inline size_t ft_batch_size_bucket(size_t n)
{
    size_t b = 0;
    while (b + 1 < FT_BATCH_SIZE_BUCKETS && ((size_t)1 << b) < n)
        b++;
    return b;
}

typedef struct ft_batcher_stats {
    uint64_t batches;     /* engine calls */
    uint64_t requests;    /* requests run */
    uint64_t deadline;    /* answered FT_EDEADLINE without running */
    uint64_t engine_fail; /* requests failed because an engine failed */
    uint64_t failovers;   /* batches re-run on another replica after a
                           * device error took theirs out of service */
    uint64_t inline_runs; /* lone requests run on the caller's thread */
    size_t answer_threads; /* ft_batcher_answer_threads' threads */
    uint64_t sizes[FT_BATCH_SIZE_BUCKETS]; /* engine calls by batch size */
    size_t replicas;
    uint64_t busy_ns[FT_SLOT_MAX_REPLICAS]; /* time each replica ran */
    uint64_t runs[FT_SLOT_MAX_REPLICAS];    /* batches each replica ran */
} ft_batcher_stats;

typedef struct ft_batcher ft_batcher;

/* ft_batcher_start starts the workers over the replicas of gen (which
 * the caller keeps: ft_batcher_swap takes over the references).
 * delay_us is a test hook: each batch sleeps that long before it runs. */
int ft_batcher_start(ft_batcher **out, ft_queue *q, ft_gen *gen,
                     uint32_t max_batch, uint32_t max_wait_us,
                     uint32_t delay_us);

/* ft_batcher_answer_threads starts n threads (at most
 * FT_BATCHER_MAX_ANSWER_THREADS) that take a share of each batch's
 * answers (the done callbacks) from the workers: a batch of one is still
 * answered by its worker, with no hand-off.  Call it once, after
 * ft_batcher_start and before the first request; 0 (the default) keeps
 * every answer on its worker.  FT_ENOMEM when a thread cannot start (none
 * runs then). */
#define FT_BATCHER_MAX_ANSWER_THREADS 64
int ft_batcher_answer_threads(ft_batcher *b, uint32_t n);

/* ft_batcher_run_inline runs a lone request at once on the calling
 * thread when nothing waits (the queue is empty) and a replica is idle (or
 * the one reserved by the worker waiting for requests, borrowed with the
 * queue paused): it skips the hand-off to a worker at b = 1.  The server
 * calls it when its inline_lone setting is on (by default on hosts of 4
 * or more cores: on the 2-core box running the engine on nng's callback
 * thread measured slower than the hand-off it saves).
 * Returns 1 when it ran the job (done has been called, on this thread),
 * 0 when the caller must queue it.  Under load the queue is never empty,
 * so requests keep forming batches. */
int ft_batcher_run_inline(ft_batcher *b, ft_job *j);

/* ft_batcher_swap makes gen current for the batches formed from now on and
 * returns the previous one (whose reference the caller drops; batches
 * already formed keep their own).  gen must have as many replicas. */
ft_gen *ft_batcher_swap(ft_batcher *b, ft_gen *gen);
/* ft_batcher_current returns the current generation with a reference. */
ft_gen *ft_batcher_current(ft_batcher *b);

/* ft_batcher_set_window changes max_batch (clamped to the start value) and
 * max_wait_us (reloadable settings). */
void ft_batcher_set_window(ft_batcher *b, uint32_t max_batch,
                           uint32_t max_wait_us);

/* ft_batcher_stop waits until the queue (which the caller has closed) is
 * empty and every batch is answered, then joins the workers and the
 * answer threads and drops the current generation. */
void ft_batcher_stop(ft_batcher *b);

void ft_batcher_stats_get(ft_batcher *b, ft_batcher_stats *st);

#endif /* FT_BATCHER_H */
