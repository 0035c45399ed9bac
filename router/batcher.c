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
    /* The batch handed over by the batcher; busy while it runs. */
    int busy;
    ft_gen *gen;
    size_t n;
    ft_job **jobs;
    ft_request *reqs;
    ft_result *res;
    ft_job **run; /* jobs that are run (deadline not passed) */
    uint64_t busy_ns, runs;
} replica;

struct ft_batcher {
    ft_queue *q;
    uint32_t cap_batch; /* max_batch at start: the arrays' size */
    uint32_t max_batch, max_wait_us, delay_us;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* a replica became idle, or work arrived */
    ft_gen *gen;
    int stopping;      /* the batcher thread has seen the closed queue */
    size_t n_rep;
    replica rep[FT_SLOT_MAX_REPLICAS];
    pthread_t th;
    uint64_t batches, requests, deadline, engine_fail;
    uint64_t sizes[FT_BATCH_SIZE_BUCKETS];
};

static void finish(ft_job *j)
{
    j->done(j);
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
    uint64_t now = ft_now_ns();
    size_t m = 0;
    uint64_t late = 0;
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
        r->run[m] = j;
        r->reqs[m] = j->req;
        r->res[m] = *j->res;
        m++;
    }
    int rc = FT_OK;
    if (m > 0)
        rc = ft_slot_search(r->gen, r->index, r->reqs, m, r->res);
    uint64_t t1 = ft_now_ns();
    for (size_t i = 0; i < m; i++) {
        ft_job *j = r->run[i];
        *j->res = r->res[i];
        j->gen_id = r->gen->id;
        if (rc != FT_OK) {
            j->res->n = 0;
            j->res->status = rc;
            snprintf(j->res->error, sizeof j->res->error,
                     "engine: %s engine failed: %s",
                     ft_gen_kind_name(r->gen, r->index), ft_strerror(rc));
        }
    }
    if (rc != FT_OK)
        FT_LOGF(FT_LOG_ERROR, "replica %zu (%s engine) failed a batch of %zu: %s",
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
    /* Answer after the counters, so that a client that reads INFO after
     * its answer sees its request counted. */
    for (size_t i = 0; i < r->n; i++)
        finish(r->jobs[i]);
}

static void *replica_main(void *arg)
{
    replica *r = arg;
    ft_batcher *b = r->b;
    pthread_mutex_lock(&b->mu);
    for (;;) {
        while (!r->busy && !b->stopping)
            pthread_cond_wait(&b->cv, &b->mu);
        if (!r->busy)
            break;
        pthread_mutex_unlock(&b->mu);
        run_batch(r);
        ft_gen *g = r->gen;
        r->gen = NULL;
        ft_gen_unref(g);
        pthread_mutex_lock(&b->mu);
        r->busy = 0;
        pthread_cond_broadcast(&b->cv);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

static void *batcher_main(void *arg)
{
    ft_batcher *b = arg;
    size_t last = 0; /* requests in the previous batch */
    for (;;) {
        /* Wait for an idle replica first: while all are busy the queue
         * grows, and the batch formed next takes more of it. */
        pthread_mutex_lock(&b->mu);
        replica *r = NULL;
        for (;;) {
            for (size_t i = 0; i < b->n_rep && r == NULL; i++)
                if (!b->rep[i].busy)
                    r = &b->rep[i];
            if (r != NULL)
                break;
            pthread_cond_wait(&b->cv, &b->mu);
        }
        uint32_t max = b->max_batch, wait_us = b->max_wait_us;
        pthread_mutex_unlock(&b->mu);

        /* The batching window is worth its wait only under load: after a
         * batch of one (a lone client, a quiet server) the next request
         * runs at once; once batches grow, the window opens, and while the
         * replicas are busy requests gather in the queue anyway. */
        int64_t window = last > 1 ? (int64_t)wait_us * 1000 : 0;
        size_t n = ft_queue_pop(b->q, (void **)r->jobs, max, -1, window);
        if (n == 0)
            break; /* closed and empty */
        FT_LOGF(FT_LOG_DEBUG, "batch of %zu for replica %zu (window %lld ns)", n,
                 r->index, (long long)window);
        last = n;
        pthread_mutex_lock(&b->mu);
        r->gen = b->gen;
        ft_gen_ref(r->gen);
        r->n = n;
        if (b->n_rep == 1) {
            /* One replica: run the batch on this thread, which saves a
             * wake-up per batch; nothing could overlap with it anyway. */
            pthread_mutex_unlock(&b->mu);
            run_batch(r);
            ft_gen *g = r->gen;
            r->gen = NULL;
            ft_gen_unref(g);
            continue;
        }
        r->busy = 1;
        pthread_cond_broadcast(&b->cv);
        pthread_mutex_unlock(&b->mu);
    }
    pthread_mutex_lock(&b->mu);
    b->stopping = 1;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

static void free_rep(replica *r)
{
    free(r->jobs);
    free(r->reqs);
    free(r->res);
    free(r->run);
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
    int rc = FT_OK;
    for (size_t i = 0; i < b->n_rep; i++) {
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
        pthread_cond_broadcast(&b->cv);
        pthread_mutex_unlock(&b->mu);
        for (size_t i = 0; i < b->n_rep; i++) {
            if (b->rep[i].started)
                pthread_join(b->rep[i].th, NULL);
            free_rep(&b->rep[i]);
        }
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
    for (size_t i = 0; i < b->n_rep; i++) {
        pthread_join(b->rep[i].th, NULL);
        free_rep(&b->rep[i]);
    }
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
    memcpy(st->sizes, b->sizes, sizeof st->sizes);
    st->replicas = b->n_rep;
    for (size_t i = 0; i < b->n_rep; i++) {
        st->busy_ns[i] = b->rep[i].busy_ns;
        st->runs[i] = b->rep[i].runs;
    }
    pthread_mutex_unlock(&b->mu);
}
