/*
 * answer_test.c - the batcher's answer threads (ft_batcher_answer_threads):
 * a batch's answers are shared out between the worker that ran it and the
 * answer threads, each job answered exactly once with the engine's answer;
 * a batch of one is answered by its worker; without answer threads every
 * answer stays on the worker; ft_batcher_stop returns only once every job
 * queued before it is answered.  One CPU replica (one worker, no spare),
 * batches of 8 held 20 ms each by the delay hook, so that they are full.
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

enum { MAXJ = 64 };

/* What done saw of each job: how often it ran and on which thread. */
static atomic_int g_calls[MAXJ];
static pthread_t g_thread[MAXJ];
static atomic_size_t g_done;
static ft_job g_jobs[MAXJ];

static void on_done(ft_job *j)
{
    size_t i = (size_t)(j - g_jobs);
    g_thread[i] = pthread_self();
    /* Slow enough that a worker cannot empty the ring of its batch alone
     * before the woken answer threads take their share. */
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
    atomic_fetch_add(&g_calls[i], 1);
    atomic_fetch_add(&g_done, 1);
}

/* distinct counts the distinct threads among g_thread[from..to). */
static size_t distinct(size_t from, size_t to)
{
    size_t n = 0;
    for (size_t i = from; i < to; i++) {
        size_t k = from;
        while (k < i && !pthread_equal(g_thread[k], g_thread[i]))
            k++;
        n += k == i;
    }
    return n;
}

/* run answers n jobs (the first n cases) through a batcher of `threads`
 * answer threads: all queued at once before the start (so that batches
 * are full), then one more alone once they are answered; stop_early
 * closes the queue at once and stops, which must answer them all. */
static void run(uint32_t threads, size_t n, int stop_early)
{
    FT_CHECK(n + 1 <= MAXJ && n + 1 <= g_c.n);
    size_t alloc = n + 1;
    ft_result res[MAXJ];
    void *items[MAXJ];
    memset(g_jobs, 0, sizeof g_jobs);
    for (size_t i = 0; i <= n; i++) {
        FT_PASS(ft_result_alloc(&res[i], FT_MAX_RESULTS, FT_MAX_T));
        g_jobs[i].req = g_c.batch[i];
        g_jobs[i].res = &res[i];
        g_jobs[i].done = on_done;
        g_jobs[i].validated = 1;
        items[i] = &g_jobs[i];
        atomic_store(&g_calls[i], 0);
    }
    atomic_store(&g_done, 0);
    ft_gen *g = gen_util_open(g_path, 1);
    ft_queue q;
    FT_PASS(ft_queue_init(&q, MAXJ));
    FT_PASS(ft_queue_push_n(&q, items, n));
    ft_batcher *b;
    FT_PASS(ft_batcher_start(&b, &q, g, 8, 200, 20000));
    FT_PASS(ft_batcher_answer_threads(b, threads));
    ft_batcher_stats st;
    ft_batcher_stats_get(b, &st);
    FT_CHECK_EQ_U64(st.answer_threads, threads);
    if (stop_early) {
        ft_queue_close(&q);
        ft_batcher_stop(b);
        FT_CHECK_EQ_U64(atomic_load(&g_done), n);
    } else {
        for (int t = 0; atomic_load(&g_done) < n; t++) {
            FT_CHECK(t < 60000);
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
        /* A batch of one: its worker answers it, no hand-off. */
        FT_PASS(ft_queue_push_n(&q, &items[n], 1));
        for (int t = 0; atomic_load(&g_done) < n + 1; t++) {
            FT_CHECK(t < 60000);
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
        /* One worker: job 0 of every batch (0, 8, 16, ...) is its. */
        FT_CHECK(pthread_equal(g_thread[n], g_thread[0]));
        for (size_t i = 8; i < n; i += 8)
            FT_CHECK(pthread_equal(g_thread[i], g_thread[0]));
        ft_queue_close(&q);
        ft_batcher_stop(b);
        n++;
    }
    for (size_t i = 0; i < n; i++)
        FT_CHECK_EQ_U64(atomic_load(&g_calls[i]), 1);
    for (size_t i = 0; i < n; i++)
        if (!su_same_results(&res[i], &g_c.res[i])) {
            fprintf(stderr, "answer threads %u: request %zu: status %d n "
                    "%u, want status %d n %u\n", threads, i, res[i].status,
                    res[i].n, g_c.res[i].status, g_c.res[i].n);
            exit(1);
        }
    size_t d = distinct(0, n);
    if (threads == 0)
        FT_CHECK_EQ_U64(d, 1);
    else
        FT_CHECK(d >= 2 && d <= 1 + threads);
    printf("answer threads %u: %zu jobs answered once each, on %zu "
           "threads%s\n", threads, n, d, stop_early ? " (stopped at once)"
                                                     : "");
    ft_queue_destroy(&q);
    for (size_t i = 0; i < alloc; i++)
        ft_result_free(&res[i]);
}

int main(void)
{
    ft_test_tmpdir(g_dir, sizeof g_dir, "answer_test");
    snprintf(g_path, sizeof g_path, "%s/lib.idx", g_dir);
    uint64_t seed = 0xa115;
    su_lib_params lp = {1, 3000, 8};
    su_cases_make(&g_c, &seed, &lp, 60, 6, 8, 8, g_path, 0);
    su_cases_cpu(&g_c);
    run(0, 32, 0);
    run(3, 32, 0);
    run(3, 40, 1);
    su_cases_free(&g_c);
    return 0;
}
