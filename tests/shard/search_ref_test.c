/*
 * search_ref_test.c - the CPU engine against the brute-force reference of
 * SPEC section 4 (search_util.h), bit for bit, on thousands of random
 * cases built to tie: quantised log-probs, tiny vocabularies, -0, positive
 * log-probs, thresholds, keys that are prefixes of others, beams wider than
 * the candidates, results fewer and more than the beam.  Every case runs on
 * engines with 1, 2, 3, 4 and 8 threads, both matching strategies and every
 * way of splitting work, and in batches of 1, 3 and all requests shuffled with
 * the requests of other cases (SPEC section 6).
 */
#include "cpu_engine.h"
#include "search_util.h"

#define NENG 9
typedef struct eng_cfg {
    int threads;
    ft_cpu_match match;
    ft_cpu_split split;
} eng_cfg;
static const eng_cfg cfgs[NENG] = {
    {1, FT_CPU_MATCH_AUTO, FT_CPU_SPLIT_AUTO},
    {1, FT_CPU_MATCH_BSEARCH, FT_CPU_SPLIT_AUTO},
    {1, FT_CPU_MATCH_MERGE, FT_CPU_SPLIT_AUTO},
    {2, FT_CPU_MATCH_AUTO, FT_CPU_SPLIT_BEAMS},
    {8, FT_CPU_MATCH_MERGE, FT_CPU_SPLIT_BEAMS},
    {8, FT_CPU_MATCH_AUTO, FT_CPU_SPLIT_REQUESTS},
    /* groups of uneven sizes: 3 requests on 8 workers are groups of 3, 3
     * and 2; on 3 workers 16 are 5 rounds and a group of all 3; on 4,
     * AUTO gives a small request one worker and a large one the rest */
    {8, FT_CPU_MATCH_AUTO, FT_CPU_SPLIT_GROUPS},
    {3, FT_CPU_MATCH_MERGE, FT_CPU_SPLIT_GROUPS},
    {4, FT_CPU_MATCH_AUTO, FT_CPU_SPLIT_AUTO},
};

static uint64_t n_cases, n_hits;

/* run_lib builds one library, makes nreq requests and checks them all. */
static void run_lib(uint64_t seed, const su_lib_params *lp, uint32_t nreq,
                    uint32_t maxT, uint32_t maxK, uint32_t maxB,
                    const char *path)
{
    uint64_t s = seed;
    uint32_t V = 2 + (uint32_t)(ft_test_rand(&s) % 6);
    su_key *keys = su_rand_keys(&s, lp, V);
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
        char err[160];
        FT_PASS(ft_request_validate(&cs[i].req, 0, err, sizeof err));
        cs[i].ref = malloc(FT_MAX_RESULTS * sizeof *cs[i].ref);
        cs[i].nref = su_search(root, &cs[i].req, cs[i].ref);
        n_hits += cs[i].nref;
    }
    n_cases += nreq;

    ft_result *res = calloc(nreq, sizeof *res);
    for (uint32_t i = 0; i < nreq; i++)
        FT_PASS(ft_result_alloc(&res[i], FT_MAX_RESULTS, cs[i].req.T));
    ft_request *batch = calloc(nreq, sizeof *batch);
    uint32_t *perm = calloc(nreq, sizeof *perm);
    for (int e = 0; e < NENG; e++) {
        ft_engine_opts o;
        ft_engine_opts_init(&o);
        o.threads = cfgs[e].threads;
        ft_engine *eng;
        char err[256];
        FT_PASS(ft_engine_open(&eng, idx, &o, err, sizeof err));
        FT_PASS(ft_cpu_engine_tune(eng, cfgs[e].match, cfgs[e].split));
        /* batches of 1, 3 and all, in a shuffled order */
        static const uint32_t widths[] = {1, 3, 1u << 30};
        uint32_t wi = (uint32_t)(e % 3);
        su_rand_perm(&s, perm, nreq);
        for (int round = 0; round < 2; round++, wi = (wi + 1) % 3) {
            for (uint32_t i = 0; i < nreq; i++)
                batch[i] = cs[perm[i]].req;
            /* results land in res[perm[i]] order: use a pointer shuffle */
            ft_result *tmp = calloc(nreq, sizeof *tmp);
            for (uint32_t i = 0; i < nreq; i++)
                tmp[i] = res[perm[i]];
            for (uint32_t i = 0; i < nreq; i += widths[wi]) {
                uint32_t w = nreq - i < widths[wi] ? nreq - i : widths[wi];
                FT_PASS(ft_engine_search_batch(eng, batch + i, w, tmp + i));
            }
            for (uint32_t i = 0; i < nreq; i++) {
                char what[160];
                snprintf(what, sizeof what,
                         "seed %llu case %u engine %d batch %u (T=%u K=%u "
                         "B=%u n=%u)",
                         (unsigned long long)seed, perm[i], e, widths[wi],
                         cs[perm[i]].req.T, cs[perm[i]].req.K,
                         cs[perm[i]].req.beam, cs[perm[i]].req.results);
                if (!su_same_result(&tmp[i], cs[perm[i]].ref,
                                    cs[perm[i]].nref, what))
                    exit(1);
            }
            free(tmp);
        }
        ft_engine_close(eng);
    }
    for (uint32_t i = 0; i < nreq; i++) {
        ft_result_free(&res[i]);
        free(cs[i].tok);
        free(cs[i].lp);
        free(cs[i].ref);
    }
    free(res);
    free(batch);
    free(perm);
    free(cs);
    su_free(root);
    ft_index_close(idx);
    free(keys);
}

int main(void)
{
    char path[] = "/tmp/ft_search_ref_XXXXXX";
    int fd = mkstemp(path);
    FT_CHECK(fd >= 0);
    close(fd);
    uint64_t seed = 1;
    /* many small cases: tiny vocabularies tie a lot */
    for (int i = 0; i < 240; i++) {
        su_lib_params lp = {i % 4, 1 + (size_t)(i * 37 % 400), 1 + i % 8};
        run_lib(seed++, &lp, 16, 9, 24, 12, path);
    }
    /* wider beams, beam > candidates */
    for (int i = 0; i < 24; i++) {
        su_lib_params lp = {i % 4, 2000, 6};
        run_lib(seed++, &lp, 6, 7, 64, 600, path);
    }
    /* empty and one-key libraries */
    {
        su_lib_params lp = {0, 0, 3};
        run_lib(seed++, &lp, 8, 4, 8, 8, path);
        lp.nkeys = 1;
        run_lib(seed++, &lp, 8, 4, 8, 8, path);
    }
    /* a few big ones: T = 64, K = 4096, beam 4096 */
    {
        su_lib_params lp = {0, 3000, 64};
        run_lib(seed++, &lp, 2, 64, 8, 4096, path);
        lp = (su_lib_params){1, 20000, 3};
        run_lib(seed++, &lp, 2, 3, 4096, 300, path);
        lp = (su_lib_params){3, 20000, 4};
        run_lib(seed++, &lp, 1, 4, 4096, 4096, path);
    }
    unlink(path);
    printf("search_ref_test: ok, %llu cases x %d engines x 2 batchings, "
           "%llu reference hits\n",
           (unsigned long long)n_cases, NENG, (unsigned long long)n_hits);
    return 0;
}
