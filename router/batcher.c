/* batcher.c - the batcher thread and the replica workers (batcher.h). */
#include "batcher.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt_impl.h"

typedef struct replica {
    struct ft_batcher *b;
    size_t index;
    pthread_t th;
    int started;
    /* busy: the replica is taken (by the batcher for a batch, or by a
     * lone request run inline); handed: the batcher gave this replica's
     * worker thread a batch to run. */
    int busy;
    int handed;
    pthread_cond_t cv; /* signalled when a batch is handed, and at stop */
    ft_gen *gen;
    size_t n;
    ft_job **jobs;
    ft_request *reqs;
    ft_result *res;
    ft_job **run; /* jobs that are run (deadline not passed) */
    int validated; /* every job run was validated at the door */
    uint64_t busy_ns, runs;
} replica;

struct ft_batcher {
    ft_queue *q;
    uint32_t cap_batch; /* max_batch at start: the arrays' size */
    uint32_t max_batch, max_wait_us, delay_us;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* a replica became idle (idle_waiters), or stop */
    ft_gen *gen;
    int stopping;      /* the batcher thread has seen the closed queue */
    size_t n_rep;
    replica rep[FT_SLOT_MAX_REPLICAS];
    pthread_t th;
    replica *reserved; /* the replica the batcher waits in the queue for */
    int idle_waiters;  /* threads waiting on cv for an idle replica */
    size_t inline_n;   /* lone requests running inline now */
    uint64_t batches, requests, deadline, engine_fail, inline_runs;
    uint64_t failovers; /* batches re-run on another replica */
    uint64_t sizes[FT_BATCH_SIZE_BUCKETS];
    /* The answerer: replies of batches are encoded and sent on its
     * thread, so the replica starts its next batch while they go out
     * (a GPU would otherwise idle while 32 replies are written).  A
     * bounded ring; when it is full the replica answers by itself. */
    pthread_mutex_t fmu;
    pthread_cond_t fcv;
    ft_job **fring;
    size_t fcap, fhead, flen;
    int fstop, fstarted;
    pthread_t fth;
};

static int search(ft_gen *g, size_t index, replica *r, size_t m);

static void finish(ft_job *j)
{
    j->done(j);
}

static void *answer_main(void *arg)
{
    ft_batcher *b = arg;
    pthread_mutex_lock(&b->fmu);
    for (;;) {
        while (b->flen == 0 && !b->fstop)
            pthread_cond_wait(&b->fcv, &b->fmu);
        if (b->flen == 0)
            break;
        ft_job *j = b->fring[b->fhead];
        b->fhead = (b->fhead + 1) % b->fcap;
        b->flen--;
        pthread_mutex_unlock(&b->fmu);
        finish(j);
        pthread_mutex_lock(&b->fmu);
    }
    pthread_mutex_unlock(&b->fmu);
    return NULL;
}

/* answer_batch answers the n jobs of a batch: through the answerer when
 * it has room for all of them, else on this thread. */
static void answer_batch(ft_batcher *b, ft_job **jobs, size_t n)
{
    if (n > 1 && b->fstarted) {
        pthread_mutex_lock(&b->fmu);
        int room = b->fcap - b->flen >= n;
        if (room) {
            for (size_t i = 0; i < n; i++)
                b->fring[(b->fhead + b->flen + i) % b->fcap] = jobs[i];
            b->flen += n;
            pthread_cond_signal(&b->fcv);
        }
        pthread_mutex_unlock(&b->fmu);
        if (room)
            return;
    }
    for (size_t i = 0; i < n; i++)
        finish(jobs[i]);
}

/* wake_idle wakes whoever waits for an idle replica (b->mu held): the
 * batcher, a failover, or the stop path.  Nobody else is woken, so a
 * replica that goes idle costs no wake-up when nobody waits (a lone
 * client). */
static void wake_idle(ft_batcher *b)
{
    if (b->idle_waiters > 0)
        pthread_cond_broadcast(&b->cv);
}

/* take_healthy takes a replica of g other than the failed one the batch
 * came from, for the batch to re-run on: an idle healthy one, or the one
 * the batcher has reserved while it waits for requests (borrowed with the
 * queue paused, as ft_batcher_run_inline does; *borrowed is set then).
 * While every healthy replica is busy it waits for one, polling every
 * millisecond (the batcher's reservation is not announced on b->cv).
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

/* failover re-runs the m requests of r's batch, which failed with rc on
 * r's failed replica, on healthy replicas of the same generation until
 * one answers it or none is left; returns the last engine status.  The
 * results are reset from the jobs' own buffers before each run, so a
 * re-run answers exactly what a healthy first run would have. */
static int failover(replica *r, size_t m, int rc)
{
    ft_batcher *b = r->b;
    ft_gen *g = r->gen;
    for (size_t tries = 0; tries < b->n_rep; tries++) {
        int borrowed;
        replica *h = take_healthy(b, g, &borrowed);
        if (h == NULL)
            break;
        for (size_t i = 0; i < m; i++)
            r->res[i] = *r->run[i]->res;
        uint64_t t0 = fti_now_ns();
        rc = search(g, h->index, r, m);
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
                "replica %zu: %s", m, r->index, h->index, ft_strerror(rc));
        if (rc == FT_OK || !ft_gen_replica_failed(g, h->index, NULL))
            return rc;
    }
    return rc;
}

/* search runs the m requests of r's batch on replica index of g: trusted
 * when a door validated every one of them. */
static int search(ft_gen *g, size_t index, replica *r, size_t m)
{
    return r->validated
               ? ft_slot_search_validated(g, index, r->reqs, m, r->res)
               : ft_slot_search(g, index, r->reqs, m, r->res);
}

static void run_batch(replica *r)
{
    ft_batcher *b = r->b;
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
    r->validated = 1;
    for (size_t i = 0; i < r->n; i++) {
        ft_job *j = r->jobs[i];
        if (j->deadline_ns != 0 && now >= j->deadline_ns) {
            j->res->n = 0;
            j->res->status = FT_EDEADLINE;
            snprintf(j->res->error, sizeof j->res->error,
                     "deadline: passed %.3f ms before the request could run",
                     (double)(now - j->deadline_ns) / 1e6);
            late++;
            continue;
        }
        r->validated &= j->validated != 0;
        r->run[m] = j;
        r->reqs[m] = j->req;
        r->res[m] = *j->res;
        m++;
    }
    int rc = FT_OK, device = 0;
    /* With every replica failed each batch lands on a failed one and gets
     * the error at once: that is logged once per replica (slot.c), not
     * per batch. */
    int known = ft_gen_replica_failed(r->gen, r->index, NULL) != FT_OK;
    uint64_t t1 = now;
    if (m > 0) {
        rc = search(r->gen, r->index, r, m);
        t1 = fti_now_ns();
        /* A device error took the replica out of service (ft_slot_search
         * marked it): the batch goes to a healthy replica, whole. */
        device = rc != FT_OK && ft_gen_replica_failed(r->gen, r->index, NULL);
        if (device)
            rc = failover(r, m, rc);
    }
    for (size_t i = 0; i < m; i++) {
        ft_job *j = r->run[i];
        *j->res = r->res[i];
        j->gen_id = r->gen->id;
        if (rc == FT_OK)
            continue;
        /* Every request of a failed batch gets the error, none a partial
         * answer; the message is the same whichever replicas it met. */
        j->res->n = 0;
        j->res->status = rc;
        if (device)
            snprintf(j->res->error, sizeof j->res->error,
                     "engine: no healthy replica left (%zu of %zu failed): "
                     "%s", ft_gen_failed_replicas(r->gen), r->gen->n_eng,
                     ft_strerror(rc));
        else
            snprintf(j->res->error, sizeof j->res->error,
                     "engine: %s engine failed: %s",
                     ft_gen_kind_name(r->gen, r->index), ft_strerror(rc));
    }
    if (rc != FT_OK)
        FT_LOGF(known ? FT_LOG_DEBUG : FT_LOG_ERROR,
                "replica %zu (%s engine) failed a batch of %zu: %s",
                 r->index, ft_gen_kind_name(r->gen, r->index), m,
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
    FT_LOGF(FT_LOG_DEBUG, "replica %zu ran %zu of %zu in %.3f ms: %s", r->index, m, r->n,
             (double)(t1 - now) / 1e6, ft_strerror(rc));
    /* The caller answers the jobs, after the counters above, so that a
     * client that reads INFO after its answer sees its request counted. */
}

/* release_and_answer answers the batch the replica ran and gives the
 * replica back (its gen reference dropped).  A lone request is answered
 * first: its reply is what a client waits for.  A batch on a GPU replica
 * goes to the answerer, so the replica is free for the next batch while
 * the replies are written (the device would idle meanwhile); on a CPU
 * replica the cores are the bottleneck, and answering here is cheapest. */
static void release_and_answer(replica *r)
{
    ft_batcher *b = r->b;
    size_t n = r->n;
    ft_gen *g = r->gen;
    int gpu = g->kind[r->index] == FT_ENGINE_GPU;
#ifdef FT_BATCHER_ANSWER_CPU
    gpu = 1; /* a test build: the answerer for CPU replicas too */
#endif
    if (n > 1 && gpu)
        answer_batch(b, r->jobs, n);
    else
        for (size_t i = 0; i < n; i++)
            finish(r->jobs[i]);
    r->gen = NULL;
    ft_gen_unref(g);
    pthread_mutex_lock(&b->mu);
    r->busy = 0;
    wake_idle(b);
    pthread_mutex_unlock(&b->mu);
}

static void *replica_main(void *arg)
{
    replica *r = arg;
    ft_batcher *b = r->b;
    pthread_mutex_lock(&b->mu);
    for (;;) {
        while (!r->handed && !b->stopping)
            pthread_cond_wait(&r->cv, &b->mu);
        if (!r->handed)
            break;
        r->handed = 0;
        pthread_mutex_unlock(&b->mu);
        run_batch(r);
        release_and_answer(r);
        pthread_mutex_lock(&b->mu);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
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

static void *batcher_main(void *arg)
{
    ft_batcher *b = arg;
    size_t last = 0; /* requests in the previous batch */
    for (;;) {
        /* Wait for an idle replica first: while all are busy the queue
         * grows, and the batch formed next takes more of it.  The replica
         * is reserved for the batch while this thread waits for one. */
        pthread_mutex_lock(&b->mu);
        replica *r;
        while ((r = idle_replica(b)) == NULL) {
            b->idle_waiters++;
            pthread_cond_wait(&b->cv, &b->mu);
            b->idle_waiters--;
        }
        r->busy = 1;
        b->reserved = r;
        uint32_t max = b->max_batch, wait_us = b->max_wait_us;
        pthread_mutex_unlock(&b->mu);

        /* The batching window is worth its wait only under load: after a
         * batch of one (a lone client, a quiet server) the next request
         * runs at once; once batches grow, the window opens, and while the
         * replicas are busy requests gather in the queue anyway.  A lone
         * request may borrow the reserved replica meanwhile
         * (ft_batcher_run_inline): it pauses the queue, so this pop takes
         * nothing until the replica is back. */
        int64_t window = last > 1 ? (int64_t)wait_us * 1000 : 0;
        size_t n = ft_queue_pop(b->q, (void **)r->jobs, max, -1, window);
        pthread_mutex_lock(&b->mu);
        b->reserved = NULL;
        if (n == 0) {
            r->busy = 0;
            pthread_mutex_unlock(&b->mu);
            break; /* closed and empty */
        }
        FT_LOGF(FT_LOG_DEBUG, "batch of %zu for replica %zu (window %lld ns)", n,
                 r->index, (long long)window);
        last = n;
        r->gen = b->gen;
        ft_gen_ref(r->gen);
        r->n = n;
        if (b->n_rep == 1) {
            /* One replica: run the batch on this thread, which saves a
             * wake-up per batch; nothing could overlap with it anyway. */
            pthread_mutex_unlock(&b->mu);
            run_batch(r);
            release_and_answer(r);
            continue;
        }
        r->handed = 1;
        pthread_cond_signal(&r->cv);
        pthread_mutex_unlock(&b->mu);
    }
    pthread_mutex_lock(&b->mu);
    b->stopping = 1;
    for (size_t i = 0; i < b->n_rep; i++)
        pthread_cond_signal(&b->rep[i].cv);
    pthread_cond_broadcast(&b->cv);
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
     * else the one the batcher has reserved while it waits for requests,
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
    r->gen = b->gen;
    ft_gen_ref(r->gen);
    r->n = 1;
    r->jobs[0] = j;
    pthread_mutex_unlock(&b->mu);
    run_batch(r);
    ft_gen *g = r->gen;
    r->gen = NULL;
    ft_gen_unref(g);
    /* The replica is given back before the answer goes out; the stop path
     * waits for inline_n, after which r is not touched here again.  A
     * borrowed replica stays reserved (busy) for the batcher. */
    pthread_mutex_lock(&b->mu);
    if (!borrowed)
        r->busy = 0;
    b->inline_n--;
    wake_idle(b);
    pthread_mutex_unlock(&b->mu);
    if (borrowed)
        ft_queue_resume(b->q);
    finish(j);
    return 1;
}

/* stop_answerer lets the answerer send what it holds, then joins it. */
static void stop_answerer(ft_batcher *b)
{
    if (b->fstarted) {
        pthread_mutex_lock(&b->fmu);
        b->fstop = 1;
        pthread_cond_signal(&b->fcv);
        pthread_mutex_unlock(&b->fmu);
        pthread_join(b->fth, NULL);
        b->fstarted = 0;
    }
    free(b->fring);
    pthread_cond_destroy(&b->fcv);
    pthread_mutex_destroy(&b->fmu);
}

static void free_rep(replica *r)
{
    pthread_cond_destroy(&r->cv);
    free(r->jobs);
    free(r->reqs);
    free(r->res);
    free(r->run);
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
    pthread_mutex_init(&b->fmu, NULL);
    pthread_cond_init(&b->fcv, NULL);
    for (size_t i = 0; i < b->n_rep; i++)
        pthread_cond_init(&b->rep[i].cv, NULL);
    int rc = FT_OK;
    /* Room for two batches per replica: the answerer keeps up unless the
     * host is starved, and then the replicas answer by themselves. */
    b->fcap = 2 * (size_t)max_batch * b->n_rep;
    b->fring = calloc(b->fcap, sizeof *b->fring);
    if (b->fring == NULL)
        rc = FT_ENOMEM;
    if (rc == FT_OK && max_batch > 1) {
        if (pthread_create(&b->fth, NULL, answer_main, b) != 0)
            rc = FT_ENOMEM;
        else
            b->fstarted = 1;
    }
    for (size_t i = 0; i < b->n_rep && rc == FT_OK; i++) {
        replica *r = &b->rep[i];
        r->b = b;
        r->index = i;
        r->jobs = calloc(max_batch, sizeof *r->jobs);
        r->run = calloc(max_batch, sizeof *r->run);
        r->reqs = calloc(max_batch, sizeof *r->reqs);
        r->res = calloc(max_batch, sizeof *r->res);
        if (!r->jobs || !r->run || !r->reqs || !r->res) {
            rc = FT_ENOMEM;
            break;
        }
        if (pthread_create(&r->th, NULL, replica_main, r) != 0) {
            rc = FT_ENOMEM;
            break;
        }
        r->started = 1;
    }
    if (rc == FT_OK && pthread_create(&b->th, NULL, batcher_main, b) != 0)
        rc = FT_ENOMEM;
    if (rc != FT_OK) {
        pthread_mutex_lock(&b->mu);
        b->stopping = 1;
        for (size_t i = 0; i < b->n_rep; i++)
            pthread_cond_signal(&b->rep[i].cv);
        pthread_mutex_unlock(&b->mu);
        for (size_t i = 0; i < b->n_rep; i++) {
            if (b->rep[i].started)
                pthread_join(b->rep[i].th, NULL);
            free_rep(&b->rep[i]);
        }
        stop_answerer(b);
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
    pthread_join(b->th, NULL);
    /* The queue is closed, so no lone request starts inline any more;
     * wait for those still running before their replicas go. */
    pthread_mutex_lock(&b->mu);
    while (b->inline_n > 0) {
        b->idle_waiters++;
        pthread_cond_wait(&b->cv, &b->mu);
        b->idle_waiters--;
    }
    pthread_mutex_unlock(&b->mu);
    for (size_t i = 0; i < b->n_rep; i++) {
        pthread_join(b->rep[i].th, NULL);
        free_rep(&b->rep[i]);
    }
    stop_answerer(b);
    log_sizes(b);
    ft_gen_unref(b->gen);
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
    for (size_t i = 0; i < b->n_rep; i++) {
        st->busy_ns[i] = b->rep[i].busy_ns;
        st->runs[i] = b->rep[i].runs;
    }
    pthread_mutex_unlock(&b->mu);
}
