/*
 * gpu_multi_test.c - shard groups spread over several GPUs of one process
 * (issue 12, run mode (a): router/group.c with fti_group_opts.devices),
 * against one unsharded GPU engine, the CPU engine, a CPU group over the
 * same shards and the brute-force reference of docs/specification.md section 4
 * (search_util.h), bit for bit (tokens, values, score and sigma bits,
 * order; key indexes against the CPU group):
 *
 *   - NCCL exchange forced, one shard per GPU, 2 shards, min(8, GPUs)
 *     shards and (full run) a count between drawn per library, every count
 *     from 2 to 8 over the run on 8 GPUs, placed on GPUs 0..n-1 and on a
 *     rotated set of GPUs (shard j on GPU (j + r) % GPUs), so that rank 0
 *     is not always GPU 0; the automatic exchange over distinct GPUs must
 *     choose NCCL where libnccl.so.2 loads;
 *   - several shards per GPU over 2 (and all) GPUs: shard j on GPU
 *     j % GPUs, up to 8 shards; the automatic exchange is then the device
 *     exchange (peer copies between the GPUs), and forcing NCCL is refused
 *     with FT_ENOTSUP "exchange: nccl needs one shard per GPU";
 *   - the unsharded GPU engine on the last GPU equals the one on GPU 0;
 *   - random libraries with ties, prefix keys and vocabularies from tiny
 *     to 32-bit, split by first token at random cut points (empty and
 *     one-key shards), engines with the default or small slots, each group
 *     in batches of 1 and in batches of 3 or all requests at once.
 *
 *   gpu_multi_test            the full run
 *   gpu_multi_test --quick    a small run
 *
 * Exits 77 ("SKIP: ...") where fewer than 2 GPUs are usable.  Without
 * libnccl.so.2 the NCCL groups are skipped with a NOTE line and the
 * device-exchange groups across GPUs still run.
 */
#include "search_util.h"

static uint64_t n_cases, n_runs, n_nccl, n_dev;
static int ndev;
static int have_nccl = 1;

/* run_group answers batch[0..nreq) over ns shards of keys[0..m), shard j
 * on GPU devs[j], with exchange x (FTI_EXCHANGE_AUTO: want_x is what the
 * group must choose), and checks every result against the CPU group over
 * the same shards, want[] (the unsharded GPU engine) and the reference. */
static void run_group(uint64_t *s, const su_key *keys, size_t m, size_t ns,
                      const int *devs, fti_exchange x, fti_exchange want_x,
                      int small, const ft_request *batch, uint32_t nreq,
                      su_case *cs, const ft_result *want, ft_result *got,
                      const char *dir, uint64_t seed)
{
    ft_index *sh[8];
    su_split_build(s, keys, m, ns, dir, sh);
    ft_result *cg = su_cpu_group(sh, ns, batch, nreq);
    fti_group *g;
    char err[256] = "";

    ft_engine_opts o;
    su_gpu_opts(&o, small);
    fti_group_opts go;
    fti_group_opts_init(&go);
    go.exchange = x;
    go.devices = devs;
    char place[64] = "";
    for (size_t j = 0; j < ns; j++)
        snprintf(place + strlen(place), sizeof place - strlen(place), "%s%d",
                 j ? "," : "", devs[j]);
    int rc = fti_group_open_ex(&g, (const ft_index *const *)sh, ns, &o, &go,
                               err, sizeof err);
    if (rc != FT_OK) {
        fprintf(stderr, "seed %llu: group of %zu shards on GPUs %s "
                "(exchange %d): %s: %s\n", (unsigned long long)seed, ns,
                place, (int)x, ft_strerror(rc), err);
        exit(1);
    }
    if (fti_group_exchange(g) != want_x) {
        fprintf(stderr,
                "seed %llu: group of %zu shards on GPUs %s: exchange "
                "%d, want %d\n",
                (unsigned long long)seed, ns, place, (int)fti_group_exchange(g),
                (int)want_x);
        exit(1);
    }
    for (size_t j = 0; j < ns; j++)
        FT_CHECK(fti_engine_device(fti_group_engine(g, j)) == devs[j]);
    /* batches of 1, then of 3 or of all requests: the per-step lists of
     * every batch width cross the GPUs */
    uint32_t widths[2] = {1, ft_test_rand(s) % 2 ? 3 : 1u << 30};
    for (int wi = 0; wi < 2; wi++) {
        uint32_t w = widths[wi];
        su_run_widths(NULL, g, batch, nreq, w, got);
        for (uint32_t i = 0; i < nreq; i++) {
            char what[300];
            snprintf(what, sizeof what,
                     "seed %llu case %u shards %zu GPUs %s exchange %d small "
                     "%d batch %u (T=%u K=%u B=%u n=%u)",
                     (unsigned long long)seed, i, ns, place,
                     (int)fti_group_exchange(g), small, w, batch[i].T,
                     batch[i].K, batch[i].beam, batch[i].results);
            su_check_group(&got[i], &cg[i], &want[i], &cs[i], what);
            n_runs++;
        }
    }
    if (fti_group_exchange(g) == FTI_EXCHANGE_NCCL)
        n_nccl++;
    else
        n_dev++;
    fti_group_close(g);
    for (size_t j = 0; j < ns; j++)
        ft_index_close(sh[j]);
    su_results_free(cg, nreq);
}

/* refuse_nccl checks that NCCL is refused for shards sharing a GPU. */
static void refuse_nccl(const char *dir, const int *devs, size_t ns)
{
    su_key k[8];
    ft_index *sh[8];
    for (size_t j = 0; j < ns; j++) {
        k[j] = (su_key){1, {(uint32_t)(10 * j + 1)}, (uint64_t)j};
        char path[512];
        snprintf(path, sizeof path, "%s/r%zu.idx", dir, j);
        su_build(&k[j], 1, path, &sh[j]);
    }
    ft_engine_opts o;
    su_gpu_opts(&o, 1);
    fti_group_opts go;
    fti_group_opts_init(&go);
    go.exchange = FTI_EXCHANGE_NCCL;
    go.devices = devs;
    fti_group *g;
    char err[256] = "";
    FT_FAIL(fti_group_open_ex(&g, (const ft_index *const *)sh, ns, &o, &go, err,
                              sizeof err),
            FT_ENOTSUP);
    FT_CHECK_STR(err, "exchange: nccl needs one shard per GPU");
    for (size_t j = 0; j < ns; j++)
        ft_index_close(sh[j]);
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
    su_cases_cpu(&c);
    /* the unsharded GPU engine on GPU 0 and on the last GPU, each equal
     * to the CPU engine */
    ft_result *one = su_gpu_answers(&c, 0, seed);
    ft_result *last = su_gpu_answers(&c, ndev - 1, seed);
    ft_result *got = su_results_new(&c);
    char what[120];
    snprintf(what, sizeof what, "seed %llu unsharded GPU",
             (unsigned long long)seed);
    su_check_all(&c, one, NULL, what);

    int devs[8];
    /* One shard per GPU, NCCL forced, on GPUs 0..n-1 and on a rotation
     * of them: 2 shards, all GPUs (up to 8) and, in the full run, one
     * count between drawn per library (every communicator costs an
     * ncclCommInitAll, a second or so on 8 GPUs). */
    int top = ndev < 8 ? ndev : 8;
    int mid = top > 3 ? 3 + (int)(ft_test_rand(&s) % (uint64_t)(top - 3)) : 2;
    for (int ns = 2; have_nccl && ns <= top; ns++) {
        if (ns != 2 && ns != top && (quick || ns != mid))
            continue;
        int small = (int)(ft_test_rand(&s) % 3 == 0);
        int rot = (int)(ft_test_rand(&s) % (uint64_t)ndev);
        for (int j = 0; j < ns; j++)
            devs[j] = j;
        run_group(&s, c.keys, c.m, (size_t)ns, devs, FTI_EXCHANGE_NCCL,
                  FTI_EXCHANGE_NCCL, small, c.batch, nreq, c.cs, one, got, dir,
                  seed);
        for (int j = 0; j < ns; j++)
            devs[j] = (j + rot) % ndev;
        /* the automatic choice over distinct GPUs is NCCL */
        run_group(&s, c.keys, c.m, (size_t)ns, devs,
                  seed % 2 ? FTI_EXCHANGE_AUTO : FTI_EXCHANGE_NCCL,
                  FTI_EXCHANGE_NCCL, small, c.batch, nreq, c.cs, one, got, dir,
                  seed);
    }
    /* Several shards per GPU: 2 GPUs, and all of them (up to 8 shards),
     * shard j on GPU j % g; the device exchange copies between GPUs. */
    int gs[2] = {2, ndev};
    for (int gi = 0; gi < (ndev > 2 ? 2 : 1); gi++) {
        int ng = gs[gi];
        int ns = 2 * ng <= 8 ? 2 * ng : 8;
        if (ns <= ng)
            continue;
        for (int j = 0; j < ns; j++)
            devs[j] = j % ng;
        int small = (int)(ft_test_rand(&s) % 3 == 0);
        run_group(&s, c.keys, c.m, (size_t)ns, devs,
                  seed % 2 ? FTI_EXCHANGE_AUTO : FTI_EXCHANGE_DEVICE,
                  FTI_EXCHANGE_DEVICE, small, c.batch, nreq, c.cs, one, got,
                  dir, seed);
    }
    /* One shard per GPU over the device exchange too: the same lists by
     * peer copies, what NCCL must equal. */
    if (!quick || !have_nccl) {
        int ns = ndev < 8 ? ndev : 8;
        for (int j = 0; j < ns; j++)
            devs[j] = j;
        run_group(&s, c.keys, c.m, (size_t)ns, devs, FTI_EXCHANGE_DEVICE,
                  FTI_EXCHANGE_DEVICE, 0, c.batch, nreq, c.cs, one, got, dir,
                  seed);
    }
    su_results_free(one, nreq);
    su_results_free(last, nreq);
    su_results_free(got, nreq);
    su_cases_free(&c);
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    char dir[] = "/tmp/ft_gpu_multi_XXXXXX";
    FT_CHECK(mkdtemp(dir) != NULL);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    char err[256] = "";
    ndev = su_gpu_count(dir, err, sizeof err);
    if (ndev < 2) {
        if (ndev == 0)
            printf("SKIP: no GPU (%s)\n", err);
        else
            printf("SKIP: 1 GPU usable (GPU 1: %s); this test needs 2 or "
                   "more\n", err);
        FT_CHECK(system(cmd) == 0);
        return FT_TEST_SKIP;
    }
    double t0 = ft_test_now();
    have_nccl = su_nccl_probe(dir, err, sizeof err);
    if (!have_nccl)
        printf("NOTE: %s: the NCCL groups are not tested\n", err);
    int devs[8];
    for (int j = 0; j < 4; j++)
        devs[j] = j % 2;
    refuse_nccl(dir, devs, 4);
    uint64_t seed = 12000;
    int nlib = quick ? 3 : 30;
    for (int i = 0; i < nlib; i++) {
        su_lib_params lp = {i % 5, 1 + (size_t)(i * 97 % 900), 1 + i % 7};
        run_lib(seed++, &lp, quick ? 5 : 10, 8, 24, 12, dir, quick);
    }
    for (int i = 0; i < (quick ? 1 : 4); i++) {
        su_lib_params lp = {1 + i % 4, 3000, 6};
        run_lib(seed++, &lp, 4, 6, 64, 500, dir, quick);
    }
    if (!quick) {
        su_lib_params lp = {4, 30000, 4};
        run_lib(seed++, &lp, 3, 4, 4096, 4096, dir, quick);
        lp = (su_lib_params){0, 3000, 64};
        run_lib(seed++, &lp, 3, 64, 8, 2000, dir, quick);
    }
    FT_CHECK(system(cmd) == 0);
    printf("gpu_multi_test: ok, %d GPUs, %llu cases, %llu group runs "
           "(%llu NCCL groups, %llu device-exchange groups across GPUs), "
           "%.1f s\n", ndev, (unsigned long long)n_cases,
           (unsigned long long)n_runs, (unsigned long long)n_nccl,
           (unsigned long long)n_dev, ft_test_now() - t0);
    return 0;
}
