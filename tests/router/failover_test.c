/*
 * failover_test.c - replica failover in the router (slot + batcher +
 * searcher), with CPU engines and the test-only fault hook
 * (ft_searcher_fault_arm), which fails an engine call the way a CUDA error
 * fails the GPU engine (FT_ECUDA):
 *
 *   hook       the hook itself: the armed call and every later one fail,
 *              the searcher reports itself failed, a failed replica runs
 *              nothing and names its reason
 *   mid        2 and 3 replicas under load from two producer threads; one
 *              replica (then two of three) fails mid-load: every request
 *              is answered once, with exactly the offline engine's answer;
 *              the failed replica is marked once, logged in one line and
 *              given no later batch
 *   all        every replica failed: every request of every batch gets
 *              FT_ECUDA "engine: no healthy replica left (N of N failed):
 *              CUDA error", none is lost, the batcher still stops at once
 *   whole      one batch of mixed valid and invalid requests meets the
 *              fault: re-run whole on the healthy replica (each request its
 *              offline answer, the invalid ones their own rejection), or,
 *              with no healthy replica, every request the error: never a
 *              request left unanswered or half answered
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "batcher.h"
#include "gen_util.h"
#include "queue.h"
#include "search_util.h"
#include "slot.h"

static char g_dir[256];
static char g_path[300];
static su_cases g_c;

/* ---- captured log lines ---- */

static pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_log[64][512];
static size_t g_nlog;

static void sink(ft_log_level level, const char *line, void *arg)
{
    (void)arg;
    if (level > FT_LOG_ERROR)
        return;
    pthread_mutex_lock(&g_log_mu);
    if (g_nlog < 64)
        snprintf(g_log[g_nlog++], sizeof g_log[0], "%s", line);
    pthread_mutex_unlock(&g_log_mu);
}

/* log_count counts the captured error lines that contain s. */
static size_t log_count(const char *s)
{
    size_t n = 0;
    pthread_mutex_lock(&g_log_mu);
    for (size_t i = 0; i < g_nlog; i++)
        n += strstr(g_log[i], s) != NULL;
    pthread_mutex_unlock(&g_log_mu);
    return n;
}

static void log_reset(void)
{
    pthread_mutex_lock(&g_log_mu);
    g_nlog = 0;
    pthread_mutex_unlock(&g_log_mu);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- jobs ---- */

typedef struct run {
    ft_job *jobs;
    ft_result *res;
    atomic_int *answers; /* per job: done calls */
    atomic_size_t done;
    size_t n;
} run;

static void on_done(ft_job *j)
{
    run *r = j->arg;
    atomic_fetch_add(&r->answers[j - r->jobs], 1);
    atomic_fetch_add(&r->done, 1);
}

static void run_init(run *r, const ft_request *reqs, size_t n)
{
    memset(r, 0, sizeof *r);
    r->n = n;
    r->jobs = calloc(n, sizeof *r->jobs);
    r->res = calloc(n, sizeof *r->res);
    r->answers = calloc(n, sizeof *r->answers);
    FT_CHECK(r->jobs && r->res && r->answers);
    atomic_init(&r->done, 0);
    for (size_t i = 0; i < n; i++) {
        atomic_init(&r->answers[i], 0);
        FT_PASS(ft_result_alloc(&r->res[i], FT_MAX_RESULTS, FT_MAX_T));
        r->jobs[i].req = reqs[i];
        r->jobs[i].res = &r->res[i];
        r->jobs[i].done = on_done;
        r->jobs[i].arg = r;
    }
}

static void run_free(run *r)
{
    for (size_t i = 0; i < r->n; i++)
        ft_result_free(&r->res[i]);
    free(r->jobs);
    free(r->res);
    free((void *)r->answers);
}

typedef struct producer {
    ft_queue *q;
    run *r;
    size_t from, step; /* pushes jobs from, from + step, ... */
} producer;

static void *produce(void *arg)
{
    producer *p = arg;
    for (size_t i = p->from; i < p->r->n; i += p->step) {
        void *it = &p->r->jobs[i];
        int rc;
        /* The queue is bounded: a full one is waited out, as a client
         * told BUSY would retry. */
        for (int tries = 0; (rc = ft_queue_push_n(p->q, &it, 1)) == FT_EBUSY;
             tries++) {
            FT_CHECK(tries < 20000);
            sleep_ms(1);
        }
        FT_PASS(rc);
    }
    return NULL;
}

/* wait_done waits (at most 60 s) until every job of r is answered. */
static void wait_done(run *r)
{
    for (int i = 0; atomic_load(&r->done) < r->n; i++) {
        FT_CHECK(i < 60000);
        sleep_ms(1);
    }
}

/* check_once: every job answered exactly once. */
static void check_once(run *r)
{
    FT_CHECK_EQ_U64(atomic_load(&r->done), r->n);
    for (size_t i = 0; i < r->n; i++)
        if (atomic_load(&r->answers[i]) != 1) {
            fprintf(stderr, "job %zu answered %d times\n", i,
                    atomic_load(&r->answers[i]));
            exit(1);
        }
}

/* check_offline: every answer is the offline engine's, bit for bit. */
static void check_offline(run *r, const ft_result *want, const char *what)
{
    for (size_t i = 0; i < r->n; i++)
        if (!su_same_results(&r->res[i], &want[i])) {
            fprintf(stderr, "%s: request %zu: got status %d n %u '%s', want "
                    "status %d n %u '%s'\n", what, i, r->res[i].status,
                    r->res[i].n, r->res[i].error, want[i].status, want[i].n,
                    want[i].error);
            exit(1);
        }
}

static ft_gen *open_gen(int replicas)
{
    ft_gen *g = gen_util_open(g_path, replicas);
    FT_CHECK_EQ_U64(g->n_eng, (uint64_t)replicas);
    return g;
}

/* ---- hook ---- */

static void case_hook(void)
{
    ft_gen *g = open_gen(1);
    ft_searcher *s = g->eng[0];
    ft_result *res = calloc(4, sizeof *res);
    FT_CHECK(res != NULL);
    for (int i = 0; i < 4; i++)
        FT_PASS(ft_result_alloc(&res[i], FT_MAX_RESULTS, FT_MAX_T));
    FT_CHECK_STR(ft_strerror(FT_ECUDA), "CUDA error");
    ft_searcher_fault_arm(s, 2);
    FT_PASS(ft_searcher_search_batch(s, g_c.batch, 4, res));
    FT_PASS(ft_searcher_search_batch(s, g_c.batch, 4, res));
    for (int i = 0; i < 4; i++)
        FT_CHECK(su_same_results(&res[i], &g_c.res[i]));
    FT_CHECK(!ft_searcher_failed(s));
    FT_FAIL(ft_searcher_search_batch(s, g_c.batch, 4, res), FT_ECUDA);
    FT_CHECK(ft_searcher_failed(s));
    for (int i = 0; i < 4; i++) {
        FT_CHECK_EQ_U64(res[i].status, FT_ECUDA);
        FT_CHECK_EQ_U64(res[i].n, 0);
        FT_CHECK_STR(res[i].error,
                     "engine: CUDA error, the GPU engine failed (injected "
                     "fault)");
    }
    /* A failed engine stays failed, as the GPU engine does. */
    FT_FAIL(ft_searcher_search_batch(s, g_c.batch, 2, res), FT_ECUDA);
    FT_CHECK_STR(res[1].error,
                 "engine: the GPU engine failed earlier (injected fault)");

    /* Through the slot: the first device error marks the replica failed,
     * once, with one log line; then it runs nothing. */
    ft_gen *g2 = open_gen(2);
    log_reset();
    FT_CHECK(ft_gen_replica_failed(g2, 1, NULL) == FT_OK);
    ft_searcher_fault_arm(g2->eng[1], 0);
    FT_FAIL(ft_slot_search(g2, 1, g_c.batch, 3, res), FT_ECUDA);
    const char *why;
    FT_CHECK_EQ_U64(ft_gen_replica_failed(g2, 1, &why), FT_ECUDA);
    FT_CHECK_STR(why, "CUDA error: engine: CUDA error, the GPU engine failed "
                      "(injected fault)");
    FT_CHECK_EQ_U64(ft_gen_failed_replicas(g2), 1);
    FT_CHECK(ft_gen_replica_failed(g2, 0, NULL) == FT_OK);
    FT_FAIL(ft_slot_search(g2, 1, g_c.batch, 3, res), FT_ECUDA);
    FT_CHECK_STR(res[2].error,
                 "engine: replica 1 (cpu) failed earlier: CUDA error: engine: "
                 "CUDA error, the GPU engine failed (injected fault)");
    FT_CHECK_EQ_U64(log_count("replica 1 (cpu) of generation 1 failed: CUDA "
                              "error: engine: CUDA error, the GPU engine "
                              "failed (injected fault); out of service, 1 of "
                              "2 replicas serve"), 1);
    FT_CHECK_EQ_U64(log_count("of generation 1 failed"), 1);
    /* Marking twice is a no-op. */
    FT_CHECK(ft_gen_fail_replica(g2, 1, FT_ECUDA, "again") == 0);
    FT_CHECK_STR(why, "CUDA error: engine: CUDA error, the GPU engine failed "
                      "(injected fault)");
    /* The healthy replica answers as the offline engine. */
    FT_PASS(ft_slot_search(g2, 0, g_c.batch, 3, res));
    for (int i = 0; i < 3; i++)
        FT_CHECK(su_same_results(&res[i], &g_c.res[i]));
    /* A request error is no device error. */
    FT_CHECK(!ft_slot_is_device_error(g2, 0, FT_OK));
    FT_CHECK(!ft_slot_is_device_error(g2, 0, FT_ENOMEM));
    FT_CHECK(ft_slot_is_device_error(g2, 0, FT_ENCCL));
    FT_CHECK(ft_slot_is_device_error(g2, 1, FT_ESTATE));
    for (int i = 0; i < 4; i++)
        ft_result_free(&res[i]);
    free(res);
    ft_gen_unref(g2);
    ft_gen_unref(g);
}

/* ---- mid-load ---- */

/* load runs every case of g_c through a batcher over gen from two
 * producer threads; once `after` requests are answered, the replicas in
 * fail[] are armed to fail their next call.  Returns the number of rounds
 * of all cases it ran (see below) and the stats. */
static size_t load(ft_gen *gen, const size_t *fail, size_t nfail,
                   size_t after, ft_batcher_stats *st, const char *what)
{
    ft_queue q;
    FT_PASS(ft_queue_init(&q, 64));
    ft_batcher *b;
    ft_gen_ref(gen);
    FT_PASS(ft_batcher_start(&b, &q, gen, 8, 300, 0));
    run r;
    run_init(&r, g_c.batch, g_c.n);
    producer p[2] = {{&q, &r, 0, 2}, {&q, &r, 1, 2}};
    pthread_t th[2];
    /* An armed replica fails at its next batch; on a loaded machine the
     * rest of the first round can end before every armed replica got one.
     * More rounds of the same requests (each checked the same way) until
     * each did, bounded. */
    size_t rounds = 0;
    do {
        if (rounds > 0) {
            run_free(&r);
            run_init(&r, g_c.batch, g_c.n);
        }
        for (int i = 0; i < 2; i++)
            FT_CHECK(pthread_create(&th[i], NULL, produce, &p[i]) == 0);
        if (rounds == 0) {
            for (int i = 0; atomic_load(&r.done) < after; i++) {
                FT_CHECK(i < 60000);
                sleep_ms(1);
            }
            for (size_t i = 0; i < nfail; i++)
                ft_searcher_fault_arm(gen->eng[fail[i]], 0);
        }
        for (int i = 0; i < 2; i++)
            pthread_join(th[i], NULL);
        wait_done(&r);
        check_once(&r);
        check_offline(&r, g_c.res, what);
        rounds++;
    } while (rounds < 100 && ft_gen_failed_replicas(gen) < nfail);
    ft_queue_close(&q);
    ft_batcher_stats_get(b, st);
    ft_batcher_stop(b);
    ft_queue_destroy(&q);
    run_free(&r);
    return rounds;
}

static void case_mid(void)
{
    static const struct {
        int replicas;
        size_t nfail;
        size_t fail[2];
    } cs[] = {{2, 1, {1, 0}}, {2, 1, {0, 0}}, {3, 1, {2, 0}}, {3, 2, {0, 2}}};
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        char what[96];
        snprintf(what, sizeof what, "%d replicas, %zu failing", cs[k].replicas,
                 cs[k].nfail);
        ft_gen *g = open_gen(cs[k].replicas);
        log_reset();
        ft_batcher_stats st;
        size_t rounds = load(g, cs[k].fail, cs[k].nfail, g_c.n / 4, &st,
                             what);
        /* Each armed replica failed (it had batches left to take: the
         * least-run idle replica takes the next one), once, and is logged
         * once; the others serve. */
        FT_CHECK_EQ_U64(ft_gen_failed_replicas(g), cs[k].nfail);
        for (size_t i = 0; i < cs[k].nfail; i++) {
            const char *why;
            FT_CHECK_EQ_U64(ft_gen_replica_failed(g, cs[k].fail[i], &why),
                            FT_ECUDA);
            FT_CHECK_STR(why, "CUDA error: engine: CUDA error, the GPU engine "
                              "failed (injected fault)");
            char line[160];
            snprintf(line, sizeof line, "replica %zu (cpu) of generation 1 "
                     "failed: ", cs[k].fail[i]);
            FT_CHECK_EQ_U64(log_count(line), 1);
        }
        FT_CHECK_EQ_U64(log_count("of generation 1 failed: "), cs[k].nfail);
        FT_CHECK(st.failovers >= cs[k].nfail);
        FT_CHECK_EQ_U64(st.engine_fail, 0);
        FT_CHECK_EQ_U64(st.requests, g_c.n * rounds);

        /* A second run on the same generation: the failed replicas take no
         * batch at all, and the answers are still exact. */
        ft_batcher_stats st2;
        load(g, NULL, 0, 0, &st2, what);
        for (size_t i = 0; i < cs[k].nfail; i++)
            FT_CHECK_EQ_U64(st2.runs[cs[k].fail[i]], 0);
        FT_CHECK_EQ_U64(st2.failovers, 0);
        FT_CHECK_EQ_U64(st2.requests, g_c.n);
        ft_gen_unref(g);
        printf("mid: %s: %llu failovers, answers exact\n", what,
               (unsigned long long)st.failovers);
    }
}

/* ---- all failed ---- */

static void check_all_error(run *r, size_t replicas)
{
    char want[160];
    snprintf(want, sizeof want, "engine: no healthy replica left (%zu of %zu "
             "failed): CUDA error", replicas, replicas);
    for (size_t i = 0; i < r->n; i++) {
        if (r->res[i].status != FT_ECUDA || r->res[i].n != 0 ||
            strcmp(r->res[i].error, want)) {
            fprintf(stderr, "request %zu: got %d n %u '%s', want %d '%s'\n",
                    i, r->res[i].status, r->res[i].n, r->res[i].error,
                    FT_ECUDA, want);
            exit(1);
        }
    }
}

static void case_all(void)
{
    for (int replicas = 1; replicas <= 3; replicas++) {
        ft_gen *g = open_gen(replicas);
        ft_queue q;
        FT_PASS(ft_queue_init(&q, 64));
        ft_batcher *b;
        ft_gen_ref(g);
        FT_PASS(ft_batcher_start(&b, &q, g, 8, 300, 0));
        for (int i = 0; i < replicas; i++)
            ft_searcher_fault_arm(g->eng[i], 0);
        run r;
        run_init(&r, g_c.batch, g_c.n);
        producer p[2] = {{&q, &r, 0, 2}, {&q, &r, 1, 2}};
        pthread_t th[2];
        for (int i = 0; i < 2; i++)
            FT_CHECK(pthread_create(&th[i], NULL, produce, &p[i]) == 0);
        for (int i = 0; i < 2; i++)
            pthread_join(th[i], NULL);
        wait_done(&r);
        check_once(&r);
        check_all_error(&r, (size_t)replicas);
        FT_CHECK_EQ_U64(ft_gen_failed_replicas(g), (uint64_t)replicas);
        /* A lone request run inline gets the same answer. */
        run one;
        run_init(&one, g_c.batch, 1);
        if (!ft_batcher_run_inline(b, &one.jobs[0])) {
            void *it = &one.jobs[0];
            FT_PASS(ft_queue_push_n(&q, &it, 1));
        }
        wait_done(&one);
        check_once(&one);
        check_all_error(&one, (size_t)replicas);
        ft_batcher_stats st;
        ft_batcher_stats_get(b, &st);
        FT_CHECK_EQ_U64(st.engine_fail, g_c.n + 1);
        /* Stopping takes no longer than with healthy replicas. */
        double t0 = ft_test_now();
        ft_queue_close(&q);
        ft_batcher_stop(b);
        FT_CHECK(ft_test_now() - t0 < 5.0);
        ft_queue_destroy(&q);
        run_free(&r);
        run_free(&one);
        ft_gen_unref(g);
        printf("all: %d replicas failed, %u requests got the error\n",
               replicas, g_c.n + 1);
    }
}

/* ---- one batch, whole ---- */

static void case_whole(void)
{
    /* Eight requests, three of them invalid (beam 0, K 0, T above
     * FT_MAX_T), which a re-run must reject exactly as the first run. */
    enum { N = 8 };
    ft_request reqs[N];
    for (int i = 0; i < N; i++)
        reqs[i] = g_c.batch[i];
    reqs[1].beam = 0;
    reqs[4].K = 0;
    reqs[6].T = FT_MAX_T + 1;
    ft_result *want = calloc(N, sizeof *want);
    FT_CHECK(want != NULL);
    ft_engine_opts eo;
    ft_engine_opts_init(&eo);
    ft_engine *eng;
    char err[256];
    FT_PASS(ft_engine_open(&eng, g_c.idx, &eo, err, sizeof err));
    for (int i = 0; i < N; i++)
        FT_PASS(ft_result_alloc(&want[i], FT_MAX_RESULTS, FT_MAX_T));
    FT_PASS(ft_engine_search_batch(eng, reqs, N, want));
    ft_engine_close(eng);
    FT_CHECK_EQ_U64(want[1].status, FT_EREQUEST);
    FT_CHECK_EQ_U64(want[4].status, FT_EREQUEST);
    FT_CHECK_EQ_U64(want[6].status, FT_EREQUEST);
    FT_CHECK_EQ_U64(want[0].status, FT_OK);

    for (int healthy = 1; healthy >= 0; healthy--) {
        ft_gen *g = open_gen(2);
        ft_queue q;
        FT_PASS(ft_queue_init(&q, 64));
        run r;
        run_init(&r, reqs, N);
        /* All eight are queued before the batcher starts, so they form
         * one batch; the least-run idle replica (0) takes it. */
        void *items[N];
        for (int i = 0; i < N; i++)
            items[i] = &r.jobs[i];
        FT_PASS(ft_queue_push_n(&q, items, N));
        ft_searcher_fault_arm(g->eng[0], 0);
        if (!healthy)
            ft_searcher_fault_arm(g->eng[1], 0);
        ft_batcher *b;
        ft_gen_ref(g);
        FT_PASS(ft_batcher_start(&b, &q, g, N, 300, 0));
        wait_done(&r);
        check_once(&r);
        ft_batcher_stats st;
        ft_batcher_stats_get(b, &st);
        FT_CHECK_EQ_U64(st.batches, 1);
        FT_CHECK_EQ_U64(st.sizes[ft_batch_size_bucket(N)], 1);
        if (healthy) {
            check_offline(&r, want, "whole batch re-run");
            FT_CHECK_EQ_U64(st.failovers, 1);
            FT_CHECK_EQ_U64(st.runs[1], 1);
            FT_CHECK_EQ_U64(ft_gen_failed_replicas(g), 1);
        } else {
            check_all_error(&r, 2);
            FT_CHECK_EQ_U64(st.engine_fail, N);
        }
        ft_queue_close(&q);
        ft_batcher_stop(b);
        ft_queue_destroy(&q);
        run_free(&r);
        ft_gen_unref(g);
    }
    for (int i = 0; i < N; i++)
        ft_result_free(&want[i]);
    free(want);
    printf("whole: a batch of %d re-ran whole, or got the error whole\n", N);
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "all";
    ft_test_tmpdir(g_dir, sizeof g_dir, "failover_test");
    snprintf(g_path, sizeof g_path, "%s/lib.idx", g_dir);
    ft_log_set_sink(sink, NULL);
    uint64_t seed = 0xfa11;
    su_lib_params lp = {1, 3000, 8};
    su_cases_make(&g_c, &seed, &lp, 400, 6, 8, 8, g_path, 0);
    su_cases_cpu(&g_c);
    int any = 0;
    if (!strcmp(which, "hook") || !strcmp(which, "all"))
        case_hook(), any = 1;
    if (!strcmp(which, "mid") || !strcmp(which, "all"))
        case_mid(), any = 1;
    if (!strcmp(which, "whole") || !strcmp(which, "all"))
        case_whole(), any = 1;
    if (!strcmp(which, "failed") || !strcmp(which, "all"))
        case_all(), any = 1;
    FT_CHECK(any);
    su_cases_free(&g_c);
    ft_log_set_sink(NULL, NULL);
    return 0;
}
