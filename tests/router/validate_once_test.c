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
#include <sys/stat.h>
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

/* run_batcher runs the n jobs of items through a batcher over a new
 * generation of two replicas (the batcher takes its reference), pushed
 * five at a time, until every one is done; returns the validations it
 * took. */
static uint64_t run_batcher(void **items, size_t n)
{
    ft_queue q;
    FT_PASS(ft_queue_init(&q, n));
    ft_batcher *b;
    atomic_store(&g_done, 0);
    uint64_t v0 = fti_request_validations();
    FT_PASS(ft_batcher_start(&b, &q, gen_util_open(g_path, 2), 8, 200, 0));
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
    ft_queue_destroy(&q);
    return dv;
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
        uint64_t dv = run_batcher(items, n);
        if (marked)
            FT_CHECK_EQ_U64(dv, 0);
        else
            FT_CHECK(dv >= n);
        check_same(res, n, marked ? "trusted batches" : "validated batches");
        free_results(res, n);
        free(res);
        free(jobs);
        free(items);
    }
    printf("batcher: jobs validated at the door are not validated again\n");
}

/* dup_copy gives a copy of batch[0..n) in which every third request
 * with K >= 2 has a token twice (row T - 1, proposal K - 1 = proposal 0),
 * its token arrays in *keep (freed by the caller); want[i] gets
 * ft_request_validate's verdict and message for request i. */
static ft_request *dup_copy(const ft_request *batch, size_t n,
                            uint32_t ***keep, ft_result *want, size_t *ndup)
{
    ft_request *q = malloc(n * sizeof *q);
    uint32_t **tk = calloc(n, sizeof *tk);
    FT_CHECK(q != NULL && tk != NULL);
    *ndup = 0;
    for (size_t i = 0; i < n; i++) {
        q[i] = batch[i];
        if (i % 3 == 1 && q[i].K >= 2) {
            size_t m = (size_t)q[i].T * q[i].K;
            tk[i] = malloc(m * sizeof *tk[i]);
            FT_CHECK(tk[i] != NULL);
            memcpy(tk[i], q[i].tokens, m * sizeof *tk[i]);
            size_t row = (size_t)(q[i].T - 1) * q[i].K;
            tk[i][row + q[i].K - 1] = tk[i][row];
            q[i].tokens = tk[i];
            (*ndup)++;
        }
        want[i].error[0] = 0;
        want[i].status = ft_request_validate(&q[i], 0, want[i].error,
                                             sizeof want[i].error);
        FT_CHECK_EQ_U64(want[i].status, tk[i] ? FT_EREQUEST : FT_OK);
    }
    *keep = tk;
    return q;
}

static void dup_free(ft_request *q, uint32_t **tk, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(tk[i]);
    free(tk);
    free(q);
}

/* check_dups: got answers q as the validating search would: the requests
 * with a token twice refused with ft_request_validate's message (want),
 * the others as the reference answers (ref). */
static void check_dups(const ft_result *got, const ft_result *want,
                       const ft_result *ref, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        if (want[i].status != FT_OK) {
            if (got[i].status != want[i].status || got[i].n != 0 ||
                strcmp(got[i].error, want[i].error) != 0) {
                fprintf(stderr, "%s: request %zu: status %d n %u '%s', "
                        "want status %d '%s'\n", what, i, got[i].status,
                        got[i].n, got[i].error, want[i].status,
                        want[i].error);
                exit(1);
            }
        } else if (!su_same_full(&got[i], &ref[i], 1)) {
            fprintf(stderr, "%s: request %zu differs\n", what, i);
            exit(1);
        }
    }
}

/* dup_check = engine (FT_DOOR_EARLY): the door checked every rule but
 * the duplicate tokens; the engine's side checks those once per request
 * (one fti_request_validate_late each: the validation count moves by n),
 * while it works, and refuses a request with a token twice with the
 * message the door would have given; the others are answered as ever.
 * The same through the batcher, and through a shard group that has no
 * launch to overlap (its admission checks them). */
static void case_door(void)
{
    size_t n = g_c.n, ndup;
    ft_result *res = calloc(n, sizeof *res), *want = calloc(n, sizeof *want);
    FT_CHECK(res != NULL && want != NULL);
    alloc_results(res, n);
    ft_gen *g = gen_util_open(g_path, 1);

    uint64_t v0 = fti_request_validations();
    FT_PASS(ft_slot_search_door(g, 0, g_c.batch, n, res));
    FT_CHECK_EQ_U64(fti_request_validations() - v0, n);
    check_same(res, n, "door slot");

    uint32_t **tk;
    ft_request *q = dup_copy(g_c.batch, n, &tk, want, &ndup);
    FT_CHECK(ndup >= 5);
    v0 = fti_request_validations();
    FT_PASS(ft_slot_search_door(g, 0, q, n, res));
    FT_CHECK_EQ_U64(fti_request_validations() - v0, n);
    check_dups(res, want, g_c.res, n, "door slot, tokens twice");
    /* A trusted call is what dup_check = door gives after the door's
     * full check: nothing checked, so the door must have refused them. */
    FT_PASS(ft_slot_search_at(g, 0, q, n, res, FT_DOOR_NONE));
    check_dups(res, want, g_c.res, n, "validating slot, tokens twice");

    /* The batcher: jobs of FT_DOOR_EARLY, and mixed with FT_DOOR_ALL
     * ones (a batch of both checks every job's duplicates: none is
     * trusted further than its door went). */
    for (int mixed = 0; mixed < 2; mixed++) {
        ft_job *jobs = calloc(n, sizeof *jobs);
        void **items = calloc(n, sizeof *items);
        FT_CHECK(jobs && items);
        for (size_t i = 0; i < n; i++) {
            jobs[i].req = q[i];
            jobs[i].res = &res[i];
            jobs[i].done = on_done;
            jobs[i].validated =
                mixed && want[i].status == FT_OK && i % 2 ? FT_DOOR_ALL
                                                          : FT_DOOR_EARLY;
            items[i] = &jobs[i];
        }
        uint64_t dv = run_batcher(items, n);
        if (mixed)
            FT_CHECK(dv >= n / 2 && dv <= n);
        else
            FT_CHECK_EQ_U64(dv, n);
        check_dups(res, want, g_c.res, n, mixed ? "door batches, mixed"
                                                 : "door batches");
        free(jobs);
        free(items);
    }
    ft_gen_unref(g);

    /* A shard group of CPU engines (steps, no launch): the admission
     * checks the duplicates; the answers are the validating group's. */
    char dir[300];
    snprintf(dir, sizeof dir, "%s/shards", g_dir);
    FT_CHECK(mkdir(dir, 0755) == 0);
    ft_index *sh[3];
    uint64_t seed = 0x5eed;
    su_split_build(&seed, g_c.keys, g_c.m, 3, dir, sh);
    ft_result *cg = su_cpu_group(sh, 3, q, (uint32_t)n);
    check_dups(cg, want, cg, n, "validating group, tokens twice");
    ft_engine_opts co;
    ft_engine_opts_init(&co);
    co.threads = 1;
    fti_group *grp;
    char err[256] = "";
    FT_PASS(fti_group_open(&grp, (const ft_index *const *)sh, 3, &co, err,
                           sizeof err));
    v0 = fti_request_validations();
    FT_PASS(fti_group_search_batch_mode(grp, q, n, res, FTI_ADMIT_DOOR));
    FT_CHECK_EQ_U64(fti_request_validations() - v0, n);
    check_dups(res, want, cg, n, "door group");
    fti_group_close(grp);
    su_results_free(cg, (uint32_t)n);
    for (int j = 0; j < 3; j++)
        ft_index_close(sh[j]);

    dup_free(q, tk, n);
    free_results(res, n);
    free(res);
    free(want);
    printf("door: %zu requests (%zu with a token twice) checked once, the "
           "duplicates beside the engine\n", n, ndup);
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
    case_door();
    su_cases_free(&g_c);
    return 0;
}
