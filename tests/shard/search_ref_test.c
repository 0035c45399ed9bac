/*
 * search_ref_test.c - the CPU engine against the brute-force reference of
 * docs/specification.md section 4 (search_util.h), bit for bit, on thousands of
 * random cases built to tie: quantised log-probs, tiny vocabularies, -0,
 * positive log-probs, thresholds, keys that are prefixes of others, beams wider
 * than the candidates, results fewer and more than the beam.  Every case runs
 * on engines with 1, 2, 3, 4 and 8 threads, both matching strategies and every
 * way of splitting work, and in batches of 1, 3 and all requests shuffled with
 * the requests of other cases (docs/specification.md section 6).
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
    su_cases c;
    su_cases_make(&c, &s, lp, nreq, maxT, maxK, maxB, path, 1);
    n_hits += c.nhits;
    n_cases += nreq;

    ft_request *batch = calloc(nreq, sizeof *batch);
    ft_result *tmp = calloc(nreq, sizeof *tmp);
    uint32_t *perm = calloc(nreq, sizeof *perm);
    for (int e = 0; e < NENG; e++) {
        ft_engine_opts o;
        ft_engine_opts_init(&o);
        o.threads = cfgs[e].threads;
        ft_engine *eng;
        char err[256];
        FT_PASS(ft_engine_open(&eng, c.idx, &o, err, sizeof err));
        FT_PASS(ft_cpu_engine_tune(eng, cfgs[e].match, cfgs[e].split));
        /* batches of 1, 3 and all, in a shuffled order */
        static const uint32_t widths[] = {1, 3, 1u << 30};
        uint32_t wi = (uint32_t)(e % 3);
        su_rand_perm(&s, perm, nreq);
        for (int round = 0; round < 2; round++, wi = (wi + 1) % 3) {
            /* results land in res[perm[i]] order: use a pointer shuffle */
            for (uint32_t i = 0; i < nreq; i++) {
                batch[i] = c.batch[perm[i]];
                tmp[i] = c.res[perm[i]];
            }
            su_run_widths(eng, NULL, batch, nreq, widths[wi], tmp);
            char what[120];
            snprintf(what, sizeof what, "seed %llu engine %d batch %u",
                     (unsigned long long)seed, e, widths[wi]);
            su_check_all(&c, tmp, perm, what);
        }
        ft_engine_close(eng);
    }
    free(batch);
    free(tmp);
    free(perm);
    su_cases_free(&c);
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
