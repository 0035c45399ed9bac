/*
 * group_test.c - shard groups against the unsharded engine and the
 * brute-force reference of docs/specification.md section 4 (search_util.h), bit
 * for bit: random libraries with ties split by first token into 1, 2, 3, 5 and
 * 8 shards at random cut points (shards with one key, empty shards, one
 * giant first-token subtree, requests whose beams all fall in one shard or
 * that leave a shard without a beam at some step), requests in batches of
 * 1, 3 and all (docs/specification.md section 6).
 */
#include <string.h>
#include <unistd.h>

#include "search_impl.h"
#include "search_util.h"

static uint64_t n_cases, n_runs;

/* attach_check: fti_attach_values over shards sh[0..ns) gives every hit
 * of res (global key indexes) the value its shard holds, the values
 * written anew over zeros (a run of hits longer than the prefetch ring
 * included); a hit one past the last key makes it FT_EINTERNAL with its
 * message, the hits before it written. */
/* The log lines of the bad key index (one a refusal), kept here. */
static char g_logged[512];
static unsigned g_nlogged;

static void log_keep(ft_log_level level, const char *line, void *arg)
{
    (void)arg;
    if (level == FT_LOG_ERROR)
        snprintf(g_logged, sizeof g_logged, "%s", line);
    g_nlogged++;
}

static void attach_check(ft_index *const *sh, size_t ns, const ft_result *res,
                         uint32_t nres)
{
    uint64_t base[8], b = 0;
    for (size_t j = 0; j < ns; j++) {
        base[j] = b;
        b += ft_index_keys(sh[j]);
    }
    ft_result r;
    FT_PASS(ft_result_alloc(&r, 4096, 1));
    r.n = 0;
    for (uint32_t i = 0; i < nres && r.n < 4000; i++)
        for (uint32_t j = 0; j < res[i].n && r.n < 4000; j++)
            r.hits[r.n++] = res[i].hits[j];
    for (uint32_t j = 0; j < r.n; j++)
        r.hits[j].value = 0;
    r.status = FT_OK;
    FT_PASS(fti_attach_values(&r, (const ft_index *const *)sh, base, ns));
    uint32_t k = 0;
    uint64_t *want = malloc((r.n + 1) * sizeof *want);
    FT_CHECK(want != NULL);
    for (uint32_t i = 0; i < nres && k < r.n; i++)
        for (uint32_t j = 0; j < res[i].n && k < r.n; j++, k++) {
            FT_CHECK_EQ_U64(r.hits[k].value, res[i].hits[j].value);
            want[k] = r.hits[k].value;
        }
    if (r.n >= 2) {
        uint32_t at = r.n / 2;
        for (uint32_t j = 0; j < r.n; j++)
            r.hits[j].value = 0;
        uint32_t cnt = r.n;
        r.hits[at].key_index = b; /* past the last shard's keys */
        g_nlogged = 0;
        ft_log_set_sink(log_keep, NULL);
        FT_FAIL(fti_attach_values(&r, (const ft_index *const *)sh, base, ns),
                FT_EINTERNAL);
        ft_log_set_sink(NULL, NULL);
        char line[128];
        snprintf(line, sizeof line, "search: key index %llu out of range",
                 (unsigned long long)b);
        FT_CHECK_EQ_U64(g_nlogged, 1);
        FT_CHECK(strstr(g_logged, line) != NULL);
        FT_CHECK_EQ_U64(r.status, FT_EINTERNAL);
        FT_CHECK_EQ_U64(r.n, 0);
        FT_CHECK_STR(r.error, "engine: bad key index (internal error)");
        /* the hits before it have their values; it and the rest as
         * they were (zero) */
        for (uint32_t j = 0; j < cnt; j++)
            FT_CHECK_EQ_U64(r.hits[j].value, (j < at ? want[j] : 0));
    }
    free(want);
    ft_result_free(&r);
}

static void run_lib(uint64_t seed, const su_lib_params *lp, uint32_t nreq,
                    uint32_t maxT, uint32_t maxK, uint32_t maxB,
                    const char *dir)
{
    uint64_t s = seed;
    char path[512];
    snprintf(path, sizeof path, "%s/all.idx", dir);
    su_cases c;
    su_cases_make(&c, &s, lp, nreq, maxT, maxK, maxB, path, 1);
    n_cases += nreq;

    static const size_t counts[] = {1, 2, 3, 5, 8};
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
        size_t ns = counts[ci];
        ft_index *sh[8];
        su_split_build(&s, c.keys, c.m, ns, dir, sh);
        ft_engine_opts o;
        ft_engine_opts_init(&o);
        o.threads = 1 + (int)(ft_test_rand(&s) % 3);
        fti_group *g;
        char err[256] = "";
        FT_PASS(fti_group_open(&g, (const ft_index *const *)sh, ns, &o, err,
                               sizeof err));
        FT_CHECK(fti_group_shards(g) == ns);
        static const uint32_t widths[] = {1, 3, 1u << 30};
        uint32_t w = widths[ft_test_rand(&s) % 3];
        su_run_widths(NULL, g, c.batch, nreq, w, c.res);
        char what[120];
        snprintf(what, sizeof what, "seed %llu shards %zu batch %u",
                 (unsigned long long)seed, ns, w);
        su_check_all(&c, c.res, NULL, what);
        /* key indexes are global (shard base + the shard's own index) and
         * name distinct keys */
        for (uint32_t i = 0; i < nreq; i++)
            for (uint32_t j = 0; j < c.res[i].n; j++) {
                FT_CHECK(c.res[i].hits[j].key_index < c.m);
                for (uint32_t l = 0; l < j; l++)
                    FT_CHECK(c.res[i].hits[l].key_index !=
                             c.res[i].hits[j].key_index);
            }
        n_runs += nreq;
        attach_check(sh, ns, c.res, nreq);
        fti_group_close(g);
        for (size_t j = 0; j < ns; j++)
            ft_index_close(sh[j]);
    }
    su_cases_free(&c);
}

/* A request that breaks docs/specification.md section 3 is refused by the group
 * with the validator's message, and the other requests of its batch are
 * answered. */
static void bad_request(const char *dir)
{
    su_key k[2] = {{1, {5}, 9}, {2, {6, 7}, 11}};
    char path[512];
    ft_index *sh[2];
    snprintf(path, sizeof path, "%s/bad0.idx", dir);
    su_build(&k[0], 1, path, &sh[0]);
    snprintf(path, sizeof path, "%s/bad1.idx", dir);
    su_build(&k[1], 1, path, &sh[1]);
    fti_group *g;
    FT_PASS(fti_group_open(&g, (const ft_index *const *)sh, 2, NULL, NULL, 0));
    uint32_t tok[2] = {6, 5};
    float lp[2] = {-1.0f, -2.0f};
    uint32_t tok2[2] = {7, 7};
    ft_request r[2];
    ft_request_init(&r[0]);
    r[0].T = 1;
    r[0].K = 2;
    r[0].tokens = tok;
    r[0].logp = lp;
    r[1] = r[0];
    r[1].tokens = tok2;
    ft_result res[2];
    FT_PASS(ft_result_alloc(&res[0], 100, 1));
    FT_PASS(ft_result_alloc(&res[1], 100, 1));
    FT_PASS(fti_group_search_batch(g, r, 2, res));
    FT_CHECK(res[0].status == FT_OK && res[0].n == 1);
    FT_CHECK(res[0].hits[0].value == 9 && res[0].tokens[0] == 5);
    FT_CHECK(res[1].status == FT_EREQUEST);
    FT_CHECK_STR(res[1].error,
                 "tokens: position 0: token 7 appears twice (proposals 0 "
                 "and 1)");
    ft_result_free(&res[0]);
    ft_result_free(&res[1]);
    fti_group_close(g);
    ft_index_close(sh[0]);
    ft_index_close(sh[1]);
    FT_FAIL(fti_group_open(&g, NULL, 0, NULL, NULL, 0), FT_EINVAL);
}

int main(void)
{
    char dir[] = "/tmp/ft_group_XXXXXX";
    FT_CHECK(mkdtemp(dir) != NULL);
    bad_request(dir);
    uint64_t seed = 1000;
    for (int i = 0; i < 120; i++) {
        su_lib_params lp = {i % 5, 1 + (size_t)(i * 53 % 500), 1 + i % 7};
        run_lib(seed++, &lp, 12, 8, 24, 12, dir);
    }
    for (int i = 0; i < 8; i++) {
        su_lib_params lp = {1 + i % 4, 3000, 6};
        run_lib(seed++, &lp, 4, 6, 64, 500, dir);
    }
    {
        /* one giant first-token subtree: a tiny vocabulary at depth 0 */
        su_lib_params lp = {0, 4000, 10};
        run_lib(seed++, &lp, 6, 10, 16, 300, dir);
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    FT_CHECK(system(cmd) == 0);
    printf("group_test: ok, %llu cases, %llu shard-group runs\n",
           (unsigned long long)n_cases, (unsigned long long)n_runs);
    return 0;
}
