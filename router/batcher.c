/* batcher.c - the workers that form batches from the queue, run them on
 * the replicas and answer them (batcher.h). */
#include "batcher.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt_impl.h"

/* A replica is one engine of the generation (slot.h): taken by one batch
 * at a time. */
typedef struct replica {
    size_t index;
    /* busy: the replica is taken: by a worker for the batch it formed (or
     * is forming: the reserved one), by a lone request run inline, or by a
     * failover */
    int busy;
    uint64_t busy_ns, runs;
} replica;

/* A batch being run: its replica, its generation (a reference) and the
 * arrays of its jobs.  Workers own one each; a lone request run inline
 * has one of a single job on its caller's stack. */
typedef struct batch {
    struct ft_batcher *b;
    replica *r;
    ft_gen *gen;
    size_t n;
    ft_job **jobs;
    ft_request *reqs;
    ft_result *res;
    ft_job **run;  /* jobs that are run (deadline not passed) */
    int validated; /* FT_DOOR_*: the least of its jobs' (slot.h) */
} batch;

typedef struct worker {
    batch bt;
    pthread_t th;
    int started;
} worker;

struct ft_batcher {
    ft_queue *q;
    uint32_t cap_batch; /* max_batch at start: the arrays' size */
    uint32_t max_batch, max_wait_us, delay_us;
    pthread_mutex_t mu;
    /* cv: a replica became idle, the pop turn is free, the generation
     * changed, or stop (signalled only while idle_waiters > 0) */
    pthread_cond_t cv;
    ft_gen *gen;
    int stopping;      /* a worker has seen the closed queue */
    size_t n_rep;
    replica rep[FT_SLOT_MAX_REPLICAS];
    size_t n_wrk;
    worker *wrk;
    int popping;       /* a worker forms a batch (waits in ft_queue_pop) */
    replica *reserved; /* the replica that worker forms it for */
    size_t last;       /* requests in the previous batch */
    int idle_waiters;  /* threads waiting on cv */
    size_t inline_n;   /* lone requests running inline now */
    uint64_t batches, requests, deadline, engine_fail, inline_runs;
    uint64_t failovers; /* batches re-run on another replica */
    uint64_t sizes[FT_BATCH_SIZE_BUCKETS];
    /* The answer threads (ft_batcher_answer_threads) and the ring of jobs
     * the workers leave them, under amu; acv is signalled per job left
     * while some wait, and at stop. */
    pthread_mutex_t amu;
    pthread_cond_t acv;
    size_t n_ans, ans_idle;
    pthread_t *ans;
    ft_job **ring;
    size_t ring_cap, ring_head, ring_len;
    int ans_stop;
};

static int search(ft_gen *g, size_t index, batch *bt, size_t m);

static void finish(ft_job *j)
{
    j->done(j);
}

/* ring_take takes the oldest job left for the answer threads (b->amu
 * held), NULL when none is. */
static ft_job *ring_take(ft_batcher *b)
{
    if (b->ring_len == 0)
        return NULL;
    ft_job *j = b->ring[b->ring_head];
    b->ring_head = (b->ring_head + 1) % b->ring_cap;
    b->ring_len--;
    return j;
}

/* answer calls the n jobs' done callbacks: all on this thread without
 * answer threads or for a batch of one; else jobs 1..n-1 go to the ring
 * (waking as many idle answer threads, at most one per job), this thread
 * answers job 0 and then takes from the ring what is left, so that no
 * job waits while this thread could answer it.  The ring holds every job
 * a worker leaves: each worker leaves at most cap_batch - 1 at a time and
 * empties the ring before it forms its next batch. */
static void answer(ft_batcher *b, ft_job **jobs, size_t n)
{
    if (b->n_ans == 0 || n < 2) {
        for (size_t i = 0; i < n; i++)
            finish(jobs[i]);
        return;
    }
    pthread_mutex_lock(&b->amu);
    if (b->ring_len + n - 1 > b->ring_cap) {
        /* Never, by the bound above; but a full ring must not lose jobs. */
        pthread_mutex_unlock(&b->amu);
        for (size_t i = 0; i < n; i++)
            finish(jobs[i]);
        return;
    }
    for (size_t i = 1; i < n; i++)
        b->ring[(b->ring_head + b->ring_len++) % b->ring_cap] = jobs[i];
    size_t wake = n - 1 < b->ans_idle ? n - 1 : b->ans_idle;
    for (size_t i = 0; i < wake; i++)
        pthread_cond_signal(&b->acv);
    pthread_mutex_unlock(&b->amu);
    finish(jobs[0]);
    for (;;) {
        pthread_mutex_lock(&b->amu);
        ft_job *j = ring_take(b);
        pthread_mutex_unlock(&b->amu);
        if (j == NULL)
            break;
        finish(j);
    }
}

static void *answer_main(void *arg)
{
    ft_batcher *b = arg;
    pthread_mutex_lock(&b->amu);
    for (;;) {
        ft_job *j = ring_take(b);
        if (j == NULL) {
            if (b->ans_stop)
                break;
            b->ans_idle++;
            pthread_cond_wait(&b->acv, &b->amu);
            b->ans_idle--;
            continue;
        }
        pthread_mutex_unlock(&b->amu);
        finish(j);
        pthread_mutex_lock(&b->amu);
    }
    pthread_mutex_unlock(&b->amu);
    return NULL;
}

/* stop_answerers joins the answer threads once the ring is empty. */
static void stop_answerers(ft_batcher *b)
{
    pthread_mutex_lock(&b->amu);
    b->ans_stop = 1;
    pthread_cond_broadcast(&b->acv);
    pthread_mutex_unlock(&b->amu);
    for (size_t i = 0; i < b->n_ans; i++)
        pthread_join(b->ans[i], NULL);
    free(b->ans);
    free(b->ring);
    b->ans = NULL;
    b->ring = NULL;
    b->n_ans = 0;
}

int ft_batcher_answer_threads(ft_batcher *b, uint32_t n)
{
    if (n == 0 || b->n_ans > 0)
        return FT_OK;
    if (n > FT_BATCHER_MAX_ANSWER_THREADS)
        n = FT_BATCHER_MAX_ANSWER_THREADS;
    b->ring_cap = b->n_wrk * b->cap_batch;
    b->ring = calloc(b->ring_cap, sizeof *b->ring);
    b->ans = calloc(n, sizeof *b->ans);
    if (b->ring == NULL || b->ans == NULL) {
        free(b->ring);
        free(b->ans);
        b->ring = NULL;
        b->ans = NULL;
        return FT_ENOMEM;
    }
    b->ans_stop = 0;
    for (size_t i = 0; i < n; i++) {
        if (pthread_create(&b->ans[i], NULL, answer_main, b) != 0) {
            stop_answerers(b);
            return FT_ENOMEM;
        }
        b->n_ans = i + 1;
    }
    return FT_OK;
}

/* wake_idle wakes whoever waits (b->mu held): workers waiting for the
 * pop turn and an idle replica, a failover, or the stop path.  Nobody
 * else is woken, so a replica that goes idle costs no wake-up when nobody
 * waits (a lone client on one replica). */
static void wake_idle(ft_batcher *b)
{
    if (b->idle_waiters > 0)
        pthread_cond_broadcast(&b->cv);
}

/* take_healthy takes a replica of g other than the failed one the batch
 * came from, for the batch to re-run on: an idle healthy one, or the one
 * reserved by the worker that waits for requests (borrowed with the
 * queue paused, as ft_batcher_run_inline does; *borrowed is set then).
 * While every healthy replica is busy it waits for one, polling every
 * millisecond (the reservation is not announced on b->cv).
 * Returns NULL when no replica of g is healthy. */
static replica *take_healthy(ft_batcher *b, ft_gen *g, int *borrowed)
{
    *borrowed = 0;
    pthread_mutex_lock(&b->mu);
    for (;;) {
        replica *h = NULL;
        int any = 0;
        for (size_t i = 0; i < b->n_rep; i++) {
            if (ft_gen_replica_failed(g, i, NULL))
                continue;
            any = 1;
            if (!b->rep[i].busy &&
                (h == NULL || b->rep[i].runs < h->runs))
                h = &b->rep[i];
        }
        if (!any) {
            pthread_mutex_unlock(&b->mu);
            return NULL;
        }
        if (h == NULL && b->reserved != NULL &&
            !ft_gen_replica_failed(g, b->reserved->index, NULL) &&
            ft_queue_pause_if_idle(b->q)) {
            h = b->reserved;
            *borrowed = 1;
        }
        if (h != NULL) {
            if (!*borrowed)
                h->busy = 1;
            pthread_mutex_unlock(&b->mu);
            return h;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 1000000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        b->idle_waiters++;
        pthread_cond_timedwait(&b->cv, &b->mu, &ts);
        b->idle_waiters--;
    }
}

/* failover re-runs the m requests of bt, which failed with rc on its
 * failed replica, on healthy replicas of the same generation until one
 * answers it or none is left; returns the last engine status.  The
 * results are reset from the jobs' own buffers before each run, so a
 * re-run answers exactly what a healthy first run would have. */
static int failover(batch *bt, size_t m, int rc)
{
    ft_batcher *b = bt->b;
    ft_gen *g = bt->gen;
    for (size_t tries = 0; tries < b->n_rep; tries++) {
        int borrowed;
        replica *h = take_healthy(b, g, &borrowed);
        if (h == NULL)
            break;
        for (size_t i = 0; i < m; i++)
            bt->res[i] = *bt->run[i]->res;
        uint64_t t0 = fti_now_ns();
        rc = search(g, h->index, bt, m);
        uint64_t t1 = fti_now_ns();
        pthread_mutex_lock(&b->mu);
        h->busy_ns += t1 - t0;
        h->runs++;
        b->failovers++;
        if (!borrowed)
            h->busy = 0;
        wake_idle(b);
        pthread_mutex_unlock(&b->mu);
        if (borrowed)
            ft_queue_resume(b->q);
        FT_LOGF(FT_LOG_WARN, "a batch of %zu failed on replica %zu re-ran on "
                "replica %zu: %s", m, bt->r->index, h->index, ft_strerror(rc));
        if (rc == FT_OK || !ft_gen_replica_failed(g, h->index, NULL))
            return rc;
    }
    return rc;
}

/* search runs the m requests of bt on replica index of g: trusted as
 * far as a door validated every one of them. */
static int search(ft_gen *g, size_t index, batch *bt, size_t m)
{
    return ft_slot_search_at(g, index, bt->reqs, m, bt->res, bt->validated);
}

/* door_least is how far a batch holding a job checked as far as a and
 * one checked as far as b is checked (FT_DOOR_*). */
static int door_least(int a, int b)
{
    if (a == FT_DOOR_NONE || b == FT_DOOR_NONE)
        return FT_DOOR_NONE;
    return a == FT_DOOR_EARLY || b == FT_DOOR_EARLY ? FT_DOOR_EARLY
                                                    : FT_DOOR_ALL;
}

static void run_batch(batch *bt)
{
    ft_batcher *b = bt->b;
    replica *r = bt->r;
    if (b->delay_us > 0) {
        /* The test hook stands in for a slow engine: the batch is formed
         * and holds its requests for delay_us before it runs. */
        struct timespec ts = {b->delay_us / 1000000,
                              (long)(b->delay_us % 1000000) * 1000};
        nanosleep(&ts, NULL);
    }
    uint64_t now = fti_now_ns();
    size_t m = 0;
    uint64_t late = 0;
    bt->validated = FT_DOOR_ALL;
    for (size_t i = 0; i < bt->n; i++) {
        ft_job *j = bt->jobs[i];
        if (j->deadline_ns != 0 && now >= j->deadline_ns) {
            j->res->n = 0;
            j->res->status = FT_EDEADLINE;
            snprintf(j->res->error, sizeof j->res->error,
                     "deadline: passed %.3f ms before the request could run",
                     (double)(now - j->deadline_ns) / 1e6);
            late++;
            continue;
        }
        bt->validated = door_least(bt->validated, j->validated);
        j->run_ns = now;
        bt->run[m] = j;
        bt->reqs[m] = j->req;
        bt->res[m] = *j->res;
        m++;
    }
    int rc = FT_OK, device = 0;
    /* With every replica failed each batch lands on a failed one and gets
     * the error at once: that is logged once per replica (slot.c), not
     * per batch. */
    int known = ft_gen_replica_failed(bt->gen, r->index, NULL) != FT_OK;
    uint64_t t1 = now;
    if (m > 0) {
        rc = search(bt->gen, r->index, bt, m);
        t1 = fti_now_ns();
        /* A device error took the replica out of service (ft_slot_search
         * marked it): the batch goes to a healthy replica, whole. */
        device = rc != FT_OK && ft_gen_replica_failed(bt->gen, r->index, NULL);
        if (device)
            rc = failover(bt, m, rc);
    }
    uint64_t t2 = m > 0 ? fti_now_ns() : now;
    for (size_t i = 0; i < m; i++) {
        ft_job *j = bt->run[i];
        *j->res = bt->res[i];
        j->gen_id = bt->gen->id;
        j->ran_ns = t2;
        if (rc == FT_OK)
            continue;
        /* Every request of a failed batch gets the error, none a partial
         * answer; the message is the same whichever replicas it met. */
        j->res->n = 0;
        j->res->status = rc;
        if (device)
            snprintf(j->res->error, sizeof j->res->error,
                     "engine: no healthy replica left (%zu of %zu failed): "
                     "%s", ft_gen_failed_replicas(bt->gen), bt->gen->n_eng,
                     ft_strerror(rc));
        else
            snprintf(j->res->error, sizeof j->res->error,
                     "engine: %s engine failed: %s",
                     ft_gen_kind_name(bt->gen, r->index), ft_strerror(rc));
    }
    if (rc != FT_OK)
        FT_LOGF(known ? FT_LOG_DEBUG : FT_LOG_ERROR,
                "replica %zu (%s engine) failed a batch of %zu: %s",
                 r->index, ft_gen_kind_name(bt->gen, r->index), m,
                 ft_strerror(rc));
    pthread_mutex_lock(&b->mu);
    r->busy_ns += t1 - now;
    r->runs += m > 0;
    b->batches += m > 0;
    b->requests += m;
    b->sizes[ft_batch_size_bucket(m)] += m > 0;
    b->deadline += late;
    if (rc != FT_OK)
        b->engine_fail += m;
    pthread_mutex_unlock(&b->mu);
    FT_LOGF(FT_LOG_DEBUG, "replica %zu ran %zu of %zu in %.3f ms: %s", r->index, m, bt->n,
             (double)(t1 - now) / 1e6, ft_strerror(rc));
    /* The caller answers the jobs, after the counters above, so that a
     * client that reads INFO after its answer sees its request counted. */
}

/* idle_replica is the idle healthy replica that has run least (b->mu
 * held).  Failed replicas get no batch while one replica of the current
 * generation serves; once none does, any idle replica takes the batch,
 * whose requests it answers with the error at once (ft_slot_search runs
 * nothing on a failed replica), so requests never wait for a replica that
 * cannot come back. */
static replica *idle_replica(ft_batcher *b)
{
    replica *r = NULL;
    int serving = ft_gen_failed_replicas(b->gen) < b->n_rep;
    for (size_t i = 0; i < b->n_rep; i++) {
        if (b->rep[i].busy)
            continue;
        if (serving && ft_gen_replica_failed(b->gen, i, NULL))
            continue;
        if (r == NULL || b->rep[i].runs < r->runs)
            r = &b->rep[i];
    }
    return r;
}

/* worker_main: each worker forms its own batch and answers it.  One
 * worker at a time has the pop turn: it takes an idle replica first (so
 * that while every replica is busy the queue grows and the next batch
 * takes more of it), waits in ft_queue_pop for the batch, gives the turn
 * to the next worker, runs the batch on that replica, gives the replica
 * back and answers the jobs itself: a request that finds a worker waiting
 * is run and answered on that worker's thread, with no other hand-off.
 * With one spare worker per GPU replica, a batch's replies are written
 * while the next batch runs on the device. */
static void *worker_main(void *arg)
{
    worker *w = arg;
    batch *bt = &w->bt;
    ft_batcher *b = bt->b;
    pthread_mutex_lock(&b->mu);
    for (;;) {
        replica *r = NULL;
        while (!b->stopping && (b->popping || (r = idle_replica(b)) == NULL)) {
            b->idle_waiters++;
            pthread_cond_wait(&b->cv, &b->mu);
            b->idle_waiters--;
        }
        if (b->stopping)
            break;
        b->popping = 1;
        r->busy = 1;
        b->reserved = r;
        uint32_t max = b->max_batch, wait_us = b->max_wait_us;
        /* The batching window is worth its wait only under load: after a
         * batch of one (a lone client, a quiet server) the next request
         * runs at once; once batches grow, the window opens, and while the
         * replicas are busy requests gather in the queue anyway.  A lone
         * request may borrow the reserved replica meanwhile
         * (ft_batcher_run_inline): it pauses the queue, so this pop takes
         * nothing until the replica is back. */
        int64_t window = b->last > 1 ? (int64_t)wait_us * 1000 : 0;
        pthread_mutex_unlock(&b->mu);

        int lane;
        size_t n = ft_queue_pop_lane(b->q, (void **)bt->jobs, max, -1, window,
                                     &lane);
        pthread_mutex_lock(&b->mu);
        b->reserved = NULL;
        b->popping = 0;
        if (n == 0) {
            /* closed and empty: every worker stops once its batch is
             * answered */
            r->busy = 0;
            b->stopping = 1;
            pthread_cond_broadcast(&b->cv);
            break;
        }
        FT_LOGF(FT_LOG_DEBUG, "batch of %zu for replica %zu (window %lld ns)",
                n, r->index, (long long)window);
        b->last = n;
        bt->r = r;
        bt->gen = b->gen;
        ft_gen_ref(bt->gen);
        bt->n = n;
        /* The pop turn is free: a waiting worker can use it only with an
         * idle replica (a spare worker of a single GPU replica sleeps on
         * until this batch gives its replica back). */
        if (idle_replica(b) != NULL)
            wake_idle(b);
        pthread_mutex_unlock(&b->mu);

        run_batch(bt);
        /* The replica is given back before the answers go out: another
         * worker (a spare one, a lone request inline) may start the next
         * batch on it meanwhile. */
        pthread_mutex_lock(&b->mu);
        r->busy = 0;
        wake_idle(b);
        pthread_mutex_unlock(&b->mu);
        answer(b, bt->jobs, n);
        /* A heavy batch ended, its answers written: another may start
         * (heavy_limit).  Counted until here, so that a worker writing a
         * heavy frame's reply (megabytes) is not the one a light request
         * waits for while the other replica runs the next heavy batch.
         * (A heavy batch of one, heavy_batch's default, is answered by
         * this worker; of more, answer threads may still be writing the
         * last of its replies.) */
        if (lane == FT_QUEUE_HEAVY)
            ft_queue_heavy_done(b->q);
        ft_gen *g = bt->gen;
        bt->gen = NULL;
        ft_gen_unref(g);
        pthread_mutex_lock(&b->mu);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

int ft_batcher_run_inline(ft_batcher *b, ft_job *j)
{
    pthread_mutex_lock(&b->mu);
    if (b->stopping) {
        pthread_mutex_unlock(&b->mu);
        return 0;
    }
    /* Only when nobody waits (the queue is empty): an idle replica, or
     * else the one reserved by the worker that waits for requests,
     * borrowed with the queue paused so that requests arriving meanwhile
     * wait (and meet the queue bound) exactly as behind a running batch. */
    int borrowed = 0;
    replica *r = idle_replica(b);
    if (r != NULL && !ft_queue_idle(b->q))
        r = NULL;
    if (r == NULL && b->reserved != NULL && ft_queue_pause_if_idle(b->q)) {
        r = b->reserved;
        borrowed = 1;
    }
    if (r == NULL) {
        pthread_mutex_unlock(&b->mu);
        return 0;
    }
    r->busy = 1;
    b->inline_n++;
    b->inline_runs++;
    ft_job *jobs[1] = {j}, *run[1];
    ft_request reqs[1];
    ft_result res[1];
    batch bt = {.b = b, .r = r, .gen = b->gen, .n = 1, .jobs = jobs,
                .reqs = reqs, .res = res, .run = run};
    ft_gen_ref(bt.gen);
    pthread_mutex_unlock(&b->mu);
    run_batch(&bt);
    /* The answer goes out first: the server was idle, so no request
     * waits for the replica, and giving it back wakes the worker that
     * sleeps on it (a futex wake, 5-9 us that would otherwise sit
     * between the engine call and the answer).  The stop path waits for
     * inline_n, after which r is not touched here again (and b->q is read
     * below while the borrowed replica's worker still waits on it).  A
     * borrowed replica stays reserved (busy) for the worker. */
    finish(j);
    ft_gen_unref(bt.gen);
    pthread_mutex_lock(&b->mu);
    if (!borrowed)
        r->busy = 0;
    b->inline_n--;
    wake_idle(b);
    pthread_mutex_unlock(&b->mu);
    if (borrowed)
        ft_queue_resume(b->q);
    return 1;
}

static void free_batch(batch *bt)
{
    free(bt->jobs);
    free(bt->reqs);
    free(bt->res);
    free(bt->run);
}

static void log_sizes(ft_batcher *b)
{
    char line[512];
    size_t o = 0;
    for (size_t k = 0; k < FT_BATCH_SIZE_BUCKETS && o < sizeof line; k++) {
        if (b->sizes[k] == 0)
            continue;
        /* ft_batch_size_bucket: bucket k holds 2^(k-1)+1 .. 2^k */
        size_t hi = (size_t)1 << k, lo = k ? (hi >> 1) + 1 : 1;
        if (lo == hi)
            o += (size_t)snprintf(line + o, sizeof line - o, " %zu: %llu;", lo,
                                  (unsigned long long)b->sizes[k]);
        else
            o += (size_t)snprintf(line + o, sizeof line - o, " %zu-%zu: %llu;",
                                  lo, hi, (unsigned long long)b->sizes[k]);
    }
    FT_LOGF(FT_LOG_INFO, "batches by size:%s %llu lone requests ran inline",
            o ? line : " none;", (unsigned long long)b->inline_runs);
}

/* stop_workers stops and joins the workers started (after a start that
 * failed half way, or once the queue is closed and empty) and frees
 * their arrays. */
static void stop_workers(ft_batcher *b, int force)
{
    if (force) {
        pthread_mutex_lock(&b->mu);
        b->stopping = 1;
        pthread_cond_broadcast(&b->cv);
        pthread_mutex_unlock(&b->mu);
    }
    for (size_t i = 0; i < b->n_wrk; i++) {
        if (b->wrk[i].started)
            pthread_join(b->wrk[i].th, NULL);
        free_batch(&b->wrk[i].bt);
    }
    free(b->wrk);
    b->wrk = NULL;
}

int ft_batcher_start(ft_batcher **out, ft_queue *q, ft_gen *gen,
                     uint32_t max_batch, uint32_t max_wait_us,
                     uint32_t delay_us)
{
    *out = NULL;
    if (max_batch == 0)
        max_batch = 1;
    ft_batcher *b = calloc(1, sizeof *b);
    if (b == NULL)
        return FT_ENOMEM;
    b->q = q;
    b->cap_batch = b->max_batch = max_batch;
    b->max_wait_us = max_wait_us;
    b->delay_us = delay_us;
    b->gen = gen;
    b->n_rep = gen->n_eng;
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    pthread_mutex_init(&b->amu, NULL);
    pthread_cond_init(&b->acv, NULL);
    for (size_t i = 0; i < b->n_rep; i++)
        b->rep[i].index = i;
    /* One worker per replica, and a spare one per GPU replica when
     * batches can grow: it forms and runs the next batch while the first
     * writes its replies (the device would idle meanwhile).  On a CPU
     * replica the cores are the bottleneck: its worker answers between
     * batches. */
    size_t spare = 0;
    for (size_t i = 0; i < b->n_rep && max_batch > 1; i++) {
        int gpu = gen->kind[i] == FT_ENGINE_GPU;
#ifdef FT_BATCHER_ANSWER_CPU
        gpu = 1; /* a test build: spare workers for CPU replicas too */
#endif
        spare += gpu;
    }
    b->n_wrk = b->n_rep + spare;
    int rc = FT_OK;
    b->wrk = calloc(b->n_wrk, sizeof *b->wrk);
    if (b->wrk == NULL)
        rc = FT_ENOMEM;
    for (size_t i = 0; b->wrk != NULL && i < b->n_wrk; i++) {
        batch *bt = &b->wrk[i].bt;
        bt->b = b;
        bt->jobs = calloc(max_batch, sizeof *bt->jobs);
        bt->run = calloc(max_batch, sizeof *bt->run);
        bt->reqs = calloc(max_batch, sizeof *bt->reqs);
        bt->res = calloc(max_batch, sizeof *bt->res);
        if (!bt->jobs || !bt->run || !bt->reqs || !bt->res)
            rc = FT_ENOMEM;
    }
    for (size_t i = 0; rc == FT_OK && i < b->n_wrk; i++) {
        if (pthread_create(&b->wrk[i].th, NULL, worker_main, &b->wrk[i]) != 0)
            rc = FT_ENOMEM;
        else
            b->wrk[i].started = 1;
    }
    if (rc != FT_OK) {
        if (b->wrk != NULL)
            stop_workers(b, 1);
        pthread_cond_destroy(&b->acv);
        pthread_mutex_destroy(&b->amu);
        pthread_cond_destroy(&b->cv);
        pthread_mutex_destroy(&b->mu);
        free(b);
        return rc;
    }
    *out = b;
    return FT_OK;
}

ft_gen *ft_batcher_swap(ft_batcher *b, ft_gen *gen)
{
    pthread_mutex_lock(&b->mu);
    ft_gen *old = b->gen;
    b->gen = gen;
    /* A replica failed in the old generation serves in the new one: a
     * worker waiting for an idle one may take it now. */
    wake_idle(b);
    pthread_mutex_unlock(&b->mu);
    return old;
}

ft_gen *ft_batcher_current(ft_batcher *b)
{
    pthread_mutex_lock(&b->mu);
    ft_gen *g = b->gen;
    ft_gen_ref(g);
    pthread_mutex_unlock(&b->mu);
    return g;
}

void ft_batcher_set_window(ft_batcher *b, uint32_t max_batch,
                           uint32_t max_wait_us)
{
    pthread_mutex_lock(&b->mu);
    if (max_batch == 0)
        max_batch = 1;
    b->max_batch = max_batch < b->cap_batch ? max_batch : b->cap_batch;
    b->max_wait_us = max_wait_us;
    pthread_mutex_unlock(&b->mu);
}

void ft_batcher_stop(ft_batcher *b)
{
    if (b == NULL)
        return;
    /* The queue is closed: the worker that finds it empty stops them all,
     * each once its batch is answered. */
    stop_workers(b, 0);
    /* The workers have left their last answers in the ring: the answer
     * threads finish them, then stop. */
    stop_answerers(b);
    /* No lone request starts inline any more (stopping is set); wait for
     * those still running before their replicas go. */
    pthread_mutex_lock(&b->mu);
    while (b->inline_n > 0) {
        b->idle_waiters++;
        pthread_cond_wait(&b->cv, &b->mu);
        b->idle_waiters--;
    }
    pthread_mutex_unlock(&b->mu);
    log_sizes(b);
    ft_gen_unref(b->gen);
    pthread_cond_destroy(&b->acv);
    pthread_mutex_destroy(&b->amu);
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

void ft_batcher_stats_get(ft_batcher *b, ft_batcher_stats *st)
{
    memset(st, 0, sizeof *st);
    pthread_mutex_lock(&b->mu);
    st->batches = b->batches;
    st->requests = b->requests;
    st->deadline = b->deadline;
    st->engine_fail = b->engine_fail;
    st->failovers = b->failovers;
    memcpy(st->sizes, b->sizes, sizeof st->sizes);
    st->replicas = b->n_rep;
    st->inline_runs = b->inline_runs;
    st->answer_threads = b->n_ans;
    for (size_t i = 0; i < b->n_rep; i++) {
        st->busy_ns[i] = b->rep[i].busy_ns;
        st->runs[i] = b->rep[i].runs;
    }
    pthread_mutex_unlock(&b->mu);
}
