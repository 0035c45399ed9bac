/*
 * validate_once_test.c - a request is validated once, at the door: jobs
 * that the server's decoder validated (ft_job.validated) run on the
 * engine's trusted entry (ft_slot_search_validated ->
 * fti_searcher_search_validated), which scans none of their rows again
 * (fti_request_validations does not move), with the same answers as the
 * validating public search; jobs not marked validated (and the public
 * searches, the door of `flashtrie search`) are validated as before, and
 * a trusted call still refuses what breaks the engine's own O(1) bounds.
 * That a request the door refuses never reaches the engine is checked on
 * a live server (daemon_test validate).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "batcher.h"
#include "gen_util.h"
#include "queue.h"
#include "search_impl.h"
#include "search_util.h"
#include "slot.h"

static char g_dir[256];
static char g_path[300];
static su_cases g_c;

static atomic_size_t g_done;

static void on_done(ft_job *j)
{
    (void)j;
    atomic_fetch_add(&g_done, 1);
}

static void alloc_results(ft_result *res, size_t n)
{
    for (size_t i = 0; i < n; i++)
        FT_PASS(ft_result_alloc(&res[i], FT_MAX_RESULTS, FT_MAX_T));
}

static void free_results(ft_result *res, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ft_result_free(&res[i]);
}

static void check_same(const ft_result *got, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (!su_same_results(&got[i], &g_c.res[i])) {
            fprintf(stderr, "%s: request %zu: status %d n %u '%s', want "
                    "status %d n %u\n", what, i, got[i].status, got[i].n,
                    got[i].error, g_c.res[i].status, g_c.res[i].n);
            exit(1);
        }
}

/* The slot: the trusted entry validates nothing, the plain one each
 * request at least once; the answers are the same. */
static void case_slot(void)
{
    size_t n = g_c.n;
    ft_result *res = calloc(n, sizeof *res);
    FT_CHECK(res != NULL);
    alloc_results(res, n);
    ft_gen *g = gen_util_open(g_path, 1);

    uint64_t v0 = fti_request_validations();
    FT_PASS(ft_slot_search_validated(g, 0, g_c.batch, n, res));
    FT_CHECK_EQ_U64(fti_request_validations() - v0, 0);
    check_same(res, n, "trusted slot");

    v0 = fti_request_validations();
    FT_PASS(ft_slot_search(g, 0, g_c.batch, n, res));
    FT_CHECK(fti_request_validations() - v0 >= n);
    check_same(res, n, "validating slot");

    /* The public search is a door: it validates. */
    v0 = fti_request_validations();
    FT_PASS(ft_searcher_search_batch(g->eng[0], g_c.batch, n, res));
    FT_CHECK(fti_request_validations() - v0 >= n);
    check_same(res, n, "public search");

    /* A trusted call still keeps the engine's own bounds: the O(1) field
     * checks refuse what would break the engine (never a crash), though
     * the rows are not scanned. */
    ft_request bad[3] = {g_c.batch[0], g_c.batch[1], g_c.batch[2]};
    bad[0].beam = 0;
    bad[1].T = FT_MAX_T + 1;
    v0 = fti_request_validations();
    FT_PASS(ft_slot_search_validated(g, 0, bad, 3, res));
    FT_CHECK_EQ_U64(fti_request_validations() - v0, 0);
    FT_CHECK_EQ_U64(res[0].status, FT_EREQUEST);
    FT_CHECK_EQ_U64(res[1].status, FT_EREQUEST);
    FT_CHECK_EQ_U64(res[2].status, FT_OK);
    FT_CHECK(su_same_results(&res[2], &g_c.res[2]));

    ft_gen_unref(g);
    free_results(res, n);
    free(res);
    printf("slot: %zu requests trusted, validated 0 times on the engine's "
           "side\n", n);
}

/* The batcher: a batch of jobs the door validated runs trusted; one job
 * not marked validated makes its batch validate. */
static void case_batcher(void)
{
    size_t n = g_c.n;
    for (int marked = 1; marked >= 0; marked--) {
        ft_result *res = calloc(n, sizeof *res);
        ft_job *jobs = calloc(n, sizeof *jobs);
        void **items = calloc(n, sizeof *items);
        FT_CHECK(res && jobs && items);
        alloc_results(res, n);
        for (size_t i = 0; i < n; i++) {
            jobs[i].req = g_c.batch[i];
            jobs[i].res = &res[i];
            jobs[i].done = on_done;
            jobs[i].validated = marked;
            items[i] = &jobs[i];
        }
        ft_gen *g = gen_util_open(g_path, 2);
        ft_queue q;
        FT_PASS(ft_queue_init(&q, n));
        ft_batcher *b;
        atomic_store(&g_done, 0);
        uint64_t v0 = fti_request_validations();
        FT_PASS(ft_batcher_start(&b, &q, g, 8, 200, 0));
        for (size_t i = 0; i < n; i += 5)
            FT_PASS(ft_queue_push_n(&q, &items[i], n - i < 5 ? n - i : 5));
        for (int t = 0; atomic_load(&g_done) < n; t++) {
            FT_CHECK(t < 60000);
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
        ft_queue_close(&q);
        ft_batcher_stop(b);
        uint64_t dv = fti_request_validations() - v0;
        if (marked)
            FT_CHECK_EQ_U64(dv, 0);
        else
            FT_CHECK(dv >= n);
        check_same(res, n, marked ? "trusted batches" : "validated batches");
        ft_queue_destroy(&q);
        free_results(res, n);
        free(res);
        free(jobs);
        free(items);
    }
    printf("batcher: jobs validated at the door are not validated again\n");
}

int main(void)
{
    ft_test_tmpdir(g_dir, sizeof g_dir, "validate_once_test");
    snprintf(g_path, sizeof g_path, "%s/lib.idx", g_dir);
    uint64_t seed = 0x0dd1;
    su_lib_params lp = {1, 3000, 8};
    su_cases_make(&g_c, &seed, &lp, 60, 6, 8, 8, g_path, 0);
    su_cases_cpu(&g_c);
    case_slot();
    case_batcher();
    su_cases_free(&g_c);
    return 0;
}
