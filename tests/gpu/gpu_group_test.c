/*
 * gpu_group_test.c - shard groups of GPU engines against one unsharded GPU
 * engine, the CPU engine and the brute-force reference of docs/specification.md
 * section 4 (search_util.h), bit for bit (tokens, values, score and sigma bits,
 * order; key indexes against the unsharded engine):
 *
 *   - device exchange, 1, 2, 4 and 8 shards on one GPU, split by first
 *     token at random cut points (empty shards, one-key shards), with
 *     shared lists (no copies) and with device copies into each recv;
 *   - NCCL exchange with a one-rank communicator (1 shard), and with one
 *     shard per GPU when the machine has several;
 *   - engines with the default slots and with small slots (max_batch 3,
 *     K 64, T 8) so that the group cuts batches and uses the big slot;
 *   - batches of 1, 3 and all requests (docs/specification.md section 6);
 *   - the step contract: out-of-order steps are FT_ESTATE, a batch larger
 *     than the slots FT_ELIMIT, forced exchanges the engines cannot use
 *     FT_ENOTSUP with their message.
 *
 *   gpu_group_test            the full run
 *   gpu_group_test --quick    a small run (compute-sanitizer)
 *
 * Exits 77 ("SKIP: no GPU ...") without a usable GPU engine.
 */
#include "search_util.h"

static uint64_t n_cases, n_runs;
static int ndev = 1;
static int have_nccl = 1; /* the build has NCCL (found by contract()) */

/* run_group answers batch[0..nreq) over ns shards of keys[0..m) with the
 * given exchange and checks every result against want[] (the unsharded
 * GPU engine, itself equal to the CPU engine), the reference, and a group
 * of CPU engines over the same shards (key indexes too). */
static void run_group(uint64_t *s, const su_key *keys, size_t m, size_t ns,
                      fti_exchange x, int small, int shared,
                      const ft_request *batch, uint32_t nreq, su_case *cs,
                      const ft_result *want, ft_result *got, const char *dir,
                      uint64_t seed)
{
    ft_index *sh[8];
    su_split_build(s, keys, m, ns, dir, sh);
    ft_engine_opts o;
    su_gpu_opts(&o, small);
    fti_group_opts go;
    fti_group_opts_init(&go);
    go.exchange = x;
    go.shared_lists = shared;
    int devs[8];
    if (x == FTI_EXCHANGE_NCCL) {
        for (size_t j = 0; j < ns; j++)
            devs[j] = (int)j;
        go.devices = devs;
    }
    fti_group *g;
    char err[256] = "";
    ft_result *cg = su_cpu_group(sh, ns, batch, nreq);
    int rc = fti_group_open_ex(&g, (const ft_index *const *)sh, ns, &o, &go,
                               err, sizeof err);
    if (rc != FT_OK) {
        fprintf(stderr, "group of %zu shards (exchange %d): %s: %s\n", ns,
                (int)x, ft_strerror(rc), err);
        exit(1);
    }
    FT_CHECK(fti_group_exchange(g) == x);
    static const uint32_t widths[] = {1, 3, 1u << 30};
    uint32_t w = widths[ft_test_rand(s) % 3];
    su_run_widths(NULL, g, batch, nreq, w, got);
    for (uint32_t i = 0; i < nreq; i++) {
        char what[240];
        snprintf(what, sizeof what,
                 "seed %llu case %u shards %zu exchange %d small %d shared %d "
                 "batch %u (T=%u K=%u B=%u n=%u)", (unsigned long long)seed, i,
                 ns, (int)x, small, shared, w, batch[i].T, batch[i].K, batch[i].beam,
                 batch[i].results);
        su_check_group(&got[i], &cg[i], &want[i], &cs[i], what);
        n_runs++;
    }
    fti_group_close(g);
    for (size_t j = 0; j < ns; j++)
        ft_index_close(sh[j]);
    su_results_free(cg, nreq);
}

static void run_lib(uint64_t seed, const su_lib_params *lp, uint32_t nreq,
                    uint32_t maxT, uint32_t maxK, uint32_t maxB,
                    const char *dir, int quick)
{
    uint64_t s = seed;
    char path[512];
    snprintf(path, sizeof path, "%s/all.idx", dir);
    su_cases c;
    su_cases_make(&c, &s, lp, nreq, maxT, maxK, maxB, path, 1);
    n_cases += nreq;
    /* c.res holds the CPU engine's answers, one the unsharded GPU
     * engine's, got the groups' */
    ft_result *cpu = c.res;
    ft_result *one = calloc(nreq, sizeof *one);
    ft_result *got = calloc(nreq, sizeof *got);
    for (uint32_t i = 0; i < nreq; i++) {
        FT_PASS(ft_result_alloc(&one[i], FT_MAX_RESULTS, c.cs[i].req.T));
        FT_PASS(ft_result_alloc(&got[i], FT_MAX_RESULTS, c.cs[i].req.T));
    }
    su_cases_cpu(&c);
    ft_engine_opts o;
    ft_engine *eng;
    char err[256];
    su_gpu_opts(&o, 0);
    FT_PASS(ft_engine_open(&eng, c.idx, &o, err, sizeof err));
    FT_PASS(ft_engine_search_batch(eng, c.batch, nreq, one));
    ft_engine_close(eng);
    for (uint32_t i = 0; i < nreq; i++)
        if (!su_same_full(&one[i], &cpu[i], 1)) {
            fprintf(stderr, "seed %llu case %u unsharded GPU: GPU and CPU "
                    "engines differ\n", (unsigned long long)seed, i);
            exit(1);
        }
    char what[120];
    snprintf(what, sizeof what, "seed %llu unsharded GPU",
             (unsigned long long)seed);
    su_check_all(&c, one, NULL, what);
    static const size_t counts[] = {1, 2, 4, 8};
    for (size_t ci = 0; ci < 4; ci++) {
        int small = (int)(ft_test_rand(&s) % 3 == 0);
        int shared = (int)((ci + seed) % 2);
        run_group(&s, c.keys, c.m, counts[ci], FTI_EXCHANGE_DEVICE, small,
                  shared, c.batch, nreq, c.cs, one, got, dir, seed);
    }
    if (have_nccl && (!quick || seed % 2 == 0))
        run_group(&s, c.keys, c.m, 1, FTI_EXCHANGE_NCCL, 0, 0, c.batch, nreq,
                  c.cs, one, got, dir, seed);
    for (size_t ns = 2; have_nccl && ns <= 8 && ns <= (size_t)ndev; ns *= 2)
        run_group(&s, c.keys, c.m, ns, FTI_EXCHANGE_NCCL, 0, 0, c.batch, nreq,
                  c.cs, one, got, dir, seed);
    for (uint32_t i = 0; i < nreq; i++) {
        ft_result_free(&one[i]);
        ft_result_free(&got[i]);
    }
    free(one);
    free(got);
    su_cases_free(&c);
}

/* contract checks the step contract's errors and the exchange choices. */
static void contract(const char *dir)
{
    su_key k[3] = {{1, {5}, 9}, {2, {6, 7}, 11}, {1, {8}, 4}};
    char path[512];
    ft_index *sh[2];
    snprintf(path, sizeof path, "%s/c0.idx", dir);
    su_build(&k[0], 1, path, &sh[0]);
    snprintf(path, sizeof path, "%s/c1.idx", dir);
    su_build(&k[1], 2, path, &sh[1]);
    ft_engine_opts o;
    su_gpu_opts(&o, 1);
    fti_group_opts go;
    fti_group_opts_init(&go);
    fti_group *g;
    char err[256] = "";
    int rc;
    /* auto: one GPU, device exchange */
    FT_PASS(fti_group_open_ex(&g, (const ft_index *const *)sh, 2, &o, &go, err,
                              sizeof err));
    FT_CHECK(fti_group_exchange(g) == FTI_EXCHANGE_DEVICE);
    fti_group_close(g);
    go.exchange = FTI_EXCHANGE_HOST;
    FT_FAIL(fti_group_open_ex(&g, (const ft_index *const *)sh, 2, &o, &go, err,
                              sizeof err),
            FT_ENOTSUP);
    FT_CHECK_STR(err, "exchange: host needs CPU engines (GPU lists are in "
                      "device memory)");
    go.exchange = FTI_EXCHANGE_NCCL;
    FT_FAIL(fti_group_open_ex(&g, (const ft_index *const *)sh, 2, &o, &go, err,
                              sizeof err),
            FT_ENOTSUP);
    if (strcmp(err, "exchange: nccl: this build has no NCCL") == 0) {
        have_nccl = 0;
        printf("NOTE: this build has no NCCL: NCCL groups not tested\n");
    } else {
        FT_CHECK_STR(err, "exchange: nccl needs one shard per GPU");
        /* NCCL is loaded at run time: a host without it answers so. */
        rc = fti_group_open_ex(&g, (const ft_index *const *)sh, 1, &o, &go, err,
                               sizeof err);
        if (rc == FT_OK) {
            FT_CHECK(fti_group_exchange(g) == FTI_EXCHANGE_NCCL);
            fti_group_close(g);
        } else {
            FT_CHECK(rc == FT_ENOTSUP);
            FT_CHECK_STR(err, "exchange: nccl: libnccl.so.2 cannot be "
                              "loaded");
            have_nccl = 0;
            printf("NOTE: no libnccl.so.2 here: NCCL groups not tested\n");
        }
    }
    ft_engine_opts c;
    ft_engine_opts_init(&c);
    go.exchange = FTI_EXCHANGE_DEVICE;
    FT_FAIL(fti_group_open_ex(&g, (const ft_index *const *)sh, 2, &c, &go, err,
                              sizeof err),
            FT_ENOTSUP);
    FT_CHECK_STR(err, "exchange: device needs GPU engines");

    /* The steps of one engine, driven by hand: out of order is
     * FT_ESTATE, more requests than slots FT_ELIMIT. */
    ft_engine *eng;
    FT_PASS(ft_engine_open(&eng, sh[1], &o, err, sizeof err));
    uint32_t toks[4] = {6, 8, 7, 9};
    float lps[4] = {-1.0f, -2.0f, -0.5f, -3.0f};
    ft_request r;
    ft_request_init(&r);
    r.T = 2;
    r.K = 2;
    r.tokens = toks;
    r.logp = lps;
    fti_prep *pp[4];
    const fti_prepared *p[4];
    for (int i = 0; i < 4; i++) {
        FT_PASS(fti_prep_create(&pp[i]));
        FT_PASS(fti_request_prepare(&p[i], pp[i], &r));
    }
    FT_FAIL(fti_engine_step_begin(eng, p, 4, 0, 1), FT_ELIMIT);
    FT_PASS(fti_engine_step_begin(eng, p, 2, 0, 1));
    FT_FAIL(fti_engine_step_keep(eng, 0), FT_ESTATE);
    FT_FAIL(fti_engine_step_expand(eng, 1), FT_ESTATE);
    FT_PASS(fti_engine_step_expand(eng, 0));
    FT_FAIL(fti_engine_step_expand(eng, 1), FT_ESTATE);
    uint64_t *send, *recv;
    size_t len;
    FT_PASS(fti_engine_step_buffers(eng, &send, &recv, &len));
    FT_CHECK(len == (size_t)p[0]->beam + p[1]->beam);
    ft_engine_close(eng);
    for (int i = 0; i < 4; i++)
        fti_prep_destroy(pp[i]);
    ft_index_close(sh[0]);
    ft_index_close(sh[1]);
}

/* gpu_count opens a GPU engine over a one-key library; prints SKIP and
 * returns 0 when there is no usable GPU, else the number of GPUs. */
static int gpu_count(const char *dir)
{
    su_key k = {1, {5}, 0};
    char path[512];
    snprintf(path, sizeof path, "%s/probe.idx", dir);
    ft_index *idx;
    su_build(&k, 1, path, &idx);
    ft_engine_opts o;
    su_gpu_opts(&o, 1);
    ft_engine *eng;
    char err[256] = "";
    int rc = ft_engine_open(&eng, idx, &o, err, sizeof err);
    if (rc == FT_ENODEV || rc == FT_ENOTSUP) {
        printf("SKIP: no GPU (%s)\n", err);
        ft_index_close(idx);
        return 0;
    }
    if (rc != FT_OK) {
        fprintf(stderr, "GPU engine open failed: %s: %s\n", ft_strerror(rc),
                err);
        exit(1);
    }
    ft_engine_close(eng);
    int n = 1;
    o.device = 1;
    while (n < 8 && ft_engine_open(&eng, idx, &o, err, sizeof err) == FT_OK) {
        ft_engine_close(eng);
        o.device = ++n;
    }
    ft_index_close(idx);
    return n;
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    char dir[] = "/tmp/ft_gpu_group_XXXXXX";
    FT_CHECK(mkdtemp(dir) != NULL);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ndev = gpu_count(dir);
    if (ndev == 0) {
        FT_CHECK(system(cmd) == 0);
        return FT_TEST_SKIP;
    }
    double t0 = ft_test_now();
    contract(dir);
    uint64_t seed = 5000;
    int nlib = quick ? 4 : 60;
    for (int i = 0; i < nlib; i++) {
        su_lib_params lp = {i % 5, 1 + (size_t)(i * 53 % 500), 1 + i % 7};
        run_lib(seed++, &lp, quick ? 5 : 12, 8, 24, 12, dir, quick);
    }
    for (int i = 0; i < (quick ? 1 : 6); i++) {
        su_lib_params lp = {1 + i % 4, 3000, 6};
        run_lib(seed++, &lp, 4, 6, 64, 500, dir, quick);
    }
    if (!quick) {
        su_lib_params lp = {0, 4000, 10};
        run_lib(seed++, &lp, 6, 10, 16, 300, dir, quick);
        lp = (su_lib_params){4, 30000, 4};
        run_lib(seed++, &lp, 3, 4, 4096, 4096, dir, quick);
        lp = (su_lib_params){0, 3000, 64};
        run_lib(seed++, &lp, 3, 64, 8, 2000, dir, quick);
    }
    FT_CHECK(system(cmd) == 0);
    printf("gpu_group_test: ok, %llu cases, %llu group runs (1/2/4/8 shards "
           "device copies, NCCL, %d GPU%s), %.1f s\n",
           (unsigned long long)n_cases, (unsigned long long)n_runs, ndev,
           ndev > 1 ? "s" : "", ft_test_now() - t0);
    return 0;
}
