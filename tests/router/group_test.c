/*
 * group_test.c - shard groups against the unsharded engine and the
 * brute-force reference of SPEC section 4 (search_util.h), bit for bit:
 * random libraries with ties split by first token into 1, 2, 3, 5 and 8
 * shards at random cut points (shards with one key, empty shards, one
 * giant first-token subtree, requests whose beams all fall in one shard or
 * that leave a shard without a beam at some step), requests in batches of
 * 1, 3 and all (SPEC section 6).
 */
#include <unistd.h>

#include "search_util.h"

static uint64_t n_cases, n_runs;

/* split_keys cuts the sorted distinct keys[0..m) into ns shards at cut
 * points between first tokens; cut[s] is the first key of shard s. */
static void split_keys(uint64_t *s, const su_key *keys, size_t m, size_t ns,
                       size_t *cut)
{
    /* candidate cut points: where the first token changes */
    size_t *chg = malloc((m + 1) * sizeof *chg), nc = 0;
    for (size_t i = 1; i < m; i++)
        if (keys[i].t[0] != keys[i - 1].t[0])
            chg[nc++] = i;
    cut[0] = 0;
    for (size_t j = 1; j < ns; j++) {
        uint64_t r = ft_test_rand(s);
        if (nc == 0 || r % 7 == 0)
            cut[j] = r % 2 ? m : 0; /* an empty shard at either end */
        else
            cut[j] = chg[(r >> 8) % nc];
    }
    cut[ns] = m;
    /* sort the cut points (a tiny insertion sort) */
    for (size_t j = 1; j < ns; j++)
        for (size_t k = j; k > 0 && cut[k] < cut[k - 1]; k--) {
            size_t x = cut[k];
            cut[k] = cut[k - 1];
            cut[k - 1] = x;
        }
    free(chg);
}

static void run_lib(uint64_t seed, const su_lib_params *lp, uint32_t nreq,
                    uint32_t maxT, uint32_t maxK, uint32_t maxB,
                    const char *dir)
{
    uint64_t s = seed;
    uint32_t V = 2 + (uint32_t)(ft_test_rand(&s) % 6);
    su_key *keys = su_rand_keys(&s, lp, V);
    char path[512];
    snprintf(path, sizeof path, "%s/all.idx", dir);
    ft_index *idx;
    size_t m = su_build(keys, lp->nkeys, path, &idx);
    su_node *root = su_node_new();
    for (size_t i = 0; i < m; i++)
        su_insert(root, &keys[i]);
    su_case *cs = calloc(nreq, sizeof *cs);
    for (uint32_t i = 0; i < nreq; i++) {
        uint32_t T = 1 + (uint32_t)(ft_test_rand(&s) % maxT);
        uint32_t K = 1 + (uint32_t)(ft_test_rand(&s) % maxK);
        uint32_t B = 1 + (uint32_t)(ft_test_rand(&s) % maxB);
        su_make_request(&cs[i], &s, keys, m, lp, V, T, K, B);
        cs[i].ref = malloc(FT_MAX_RESULTS * sizeof *cs[i].ref);
        cs[i].nref = su_search(root, &cs[i].req, cs[i].ref);
    }
    n_cases += nreq;
    ft_result *res = calloc(nreq, sizeof *res);
    for (uint32_t i = 0; i < nreq; i++)
        FT_PASS(ft_result_alloc(&res[i], FT_MAX_RESULTS, cs[i].req.T));
    ft_request *batch = calloc(nreq, sizeof *batch);
    for (uint32_t i = 0; i < nreq; i++)
        batch[i] = cs[i].req;

    static const size_t counts[] = {1, 2, 3, 5, 8};
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
        size_t ns = counts[ci], cut[9];
        split_keys(&s, keys, m, ns, cut);
        ft_index *sh[8];
        for (size_t j = 0; j < ns; j++) {
            snprintf(path, sizeof path, "%s/shard%zu.idx", dir, j);
            su_key *part = calloc(cut[j + 1] - cut[j] + 1, sizeof *part);
            memcpy(part, keys + cut[j], (cut[j + 1] - cut[j]) * sizeof *part);
            FT_CHECK(su_build(part, cut[j + 1] - cut[j], path, &sh[j]) ==
                     cut[j + 1] - cut[j]);
            free(part);
        }
        ft_engine_opts o;
        ft_engine_opts_init(&o);
        o.threads = 1 + (int)(ft_test_rand(&s) % 3);
        ft_group *g;
        char err[256] = "";
        FT_PASS(ft_group_open(&g, (const ft_index *const *)sh, ns, &o, err,
                              sizeof err));
        FT_CHECK(ft_group_shards(g) == ns);
        static const uint32_t widths[] = {1, 3, 1u << 30};
        uint32_t w = widths[ft_test_rand(&s) % 3];
        for (uint32_t i = 0; i < nreq; i += w) {
            uint32_t k = nreq - i < w ? nreq - i : w;
            FT_PASS(ft_group_search_batch(g, batch + i, k, res + i));
        }
        for (uint32_t i = 0; i < nreq; i++) {
            char what[200];
            snprintf(what, sizeof what,
                     "seed %llu case %u shards %zu batch %u (T=%u K=%u B=%u "
                     "n=%u)",
                     (unsigned long long)seed, i, ns, w, cs[i].req.T,
                     cs[i].req.K, cs[i].req.beam, cs[i].req.results);
            if (!su_same_result(&res[i], cs[i].ref, cs[i].nref, what))
                exit(1);
            /* key indexes are global (shard base + the shard's own index)
             * and name distinct keys */
            for (uint32_t j = 0; j < res[i].n; j++) {
                FT_CHECK(res[i].hits[j].key_index < m);
                for (uint32_t l = 0; l < j; l++)
                    FT_CHECK(res[i].hits[l].key_index !=
                             res[i].hits[j].key_index);
            }
        }
        n_runs += nreq;
        ft_group_close(g);
        for (size_t j = 0; j < ns; j++)
            ft_index_close(sh[j]);
    }
    for (uint32_t i = 0; i < nreq; i++) {
        ft_result_free(&res[i]);
        free(cs[i].tok);
        free(cs[i].lp);
        free(cs[i].ref);
    }
    free(res);
    free(batch);
    free(cs);
    su_free(root);
    ft_index_close(idx);
    free(keys);
}

/* A request that breaks SPEC section 3 is refused by the group with the
 * validator's message, and the other requests of its batch are answered. */
static void bad_request(const char *dir)
{
    su_key k[2] = {{1, {5}, 9}, {2, {6, 7}, 11}};
    char path[512];
    ft_index *sh[2];
    snprintf(path, sizeof path, "%s/bad0.idx", dir);
    su_build(&k[0], 1, path, &sh[0]);
    snprintf(path, sizeof path, "%s/bad1.idx", dir);
    su_build(&k[1], 1, path, &sh[1]);
    ft_group *g;
    FT_PASS(ft_group_open(&g, (const ft_index *const *)sh, 2, NULL, NULL, 0));
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
    FT_PASS(ft_group_search_batch(g, r, 2, res));
    FT_CHECK(res[0].status == FT_OK && res[0].n == 1);
    FT_CHECK(res[0].hits[0].value == 9 && res[0].tokens[0] == 5);
    FT_CHECK(res[1].status == FT_EREQUEST);
    FT_CHECK_STR(res[1].error,
                 "tokens: position 0: token 7 appears twice (proposals 0 "
                 "and 1)");
    ft_result_free(&res[0]);
    ft_result_free(&res[1]);
    ft_group_close(g);
    ft_index_close(sh[0]);
    ft_index_close(sh[1]);
    FT_FAIL(ft_group_open(&g, NULL, 0, NULL, NULL, 0), FT_EINVAL);
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
