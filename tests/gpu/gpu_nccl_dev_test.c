/*
 * gpu_nccl_dev_test.c - the NCCL device-API exchange of shard groups
 * (FTI_EXCHANGE_NCCL_DEVICE, kernels/search/xnccl.cuh, issue 36) on the
 * GPUs there are, one rank per GPU; on one GPU a communicator of one rank
 * (its own window, a meeting of one rank's CTAs):
 *
 *   - the choice at open and its log lines: the device API forced (used,
 *     and logged so), forced where it cannot be set up (a test knob:
 *     ncclAllGather instead, and the WARN line with the reason), auto
 *     with and without nccl_device (two GPUs or more), the errors of
 *     forcing it on CPU engines or on two shards of one GPU;
 *   - randomized cases (libraries of every vocabulary, requests with many
 *     exact ties, default and small slots, batches of 1, 3 and all): the
 *     group with the device API against the unsharded GPU engine (equal
 *     to the CPU engine), the CPU group over the same shards (key indexes
 *     too), the brute-force reference, and the same group through
 *     ncclAllGather, bit for bit;
 *   - a wait that runs out (a timeout of one cycle): the batch is redone
 *     through ncclAllGather, exactly, the group keeps to it, and the WARN
 *     line says so.
 *
 *   gpu_nccl_dev_test            the full run
 *   gpu_nccl_dev_test --quick    a small run
 *
 * Exits 77 ("SKIP: ...") without a usable GPU engine, in a build without
 * NCCL, or without libnccl.so.2, and where the host's NCCL cannot give
 * the device API (the reason is printed: a libnccl outside 2.28.3 up to
 * the headers' release, or a communicator without symmetric memory, as
 * on the one-H200 host with NCCL_NVLS_ENABLE=0: "Communicator does not
 * support symmetric memory"), unless FT_TEST_NCCL_DEVICE_REQUIRED=1,
 * which turns that into a failure (a host known to have it).
 */
#include "search_util.h"

static uint64_t n_cases, n_runs;
static int ndev = 1;

/* ---- the log ------------------------------------------------------------ */

static char logbuf[65536];
static size_t loglen;

static void sink(ft_log_level level, const char *line, void *arg)
{
    (void)arg;
    static const char *names[] = {"ERROR", "WARN", "INFO", "DEBUG"};
    int n = snprintf(logbuf + loglen, sizeof logbuf - loglen, "%s %s\n",
                     names[level & 3], line);
    if (n > 0 && loglen + (size_t)n < sizeof logbuf)
        loglen += (size_t)n;
}

static void log_clear(void)
{
    loglen = 0;
    logbuf[0] = 0;
}

/* log_has says whether a logged line of level lv holds text. */
static int log_has(const char *lv, const char *text)
{
    const char *p = logbuf;
    while (*p) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char line[2048];
        snprintf(line, sizeof line, "%.*s", (int)n, p);
        if (strncmp(line, lv, strlen(lv)) == 0 && strstr(line, text))
            return 1;
        p += n + (e != NULL);
    }
    return 0;
}

/* ---- groups ------------------------------------------------------------- */

static fti_group *open_group(ft_index **sh, size_t ns, int small,
                             fti_exchange x, uint64_t timeout, int deny)
{
    ft_engine_opts o;
    su_gpu_opts(&o, small);
    fti_group_opts go;
    fti_group_opts_init(&go);
    go.exchange = x;
    go.kernel_timeout = timeout;
    go.nccl_device_deny = deny;
    int devs[8];
    for (size_t j = 0; j < ns; j++)
        devs[j] = (int)j;
    go.devices = devs;
    fti_group *g;
    char err[256] = "";
    int rc = fti_group_open_ex(&g, (const ft_index *const *)sh, ns, &o, &go,
                               err, sizeof err);
    if (rc != FT_OK) {
        fprintf(stderr, "group of %zu shards (exchange %d): %s: %s\n", ns,
                (int)x, ft_strerror(rc), err);
        exit(1);
    }
    return g;
}

/* run_lib: one library, its random requests, the groups of 1 .. ndev
 * shards with the device API and with ncclAllGather. */
static void run_lib(uint64_t seed, const su_lib_params *lp, uint32_t nreq,
                    const char *dir)
{
    uint64_t s = seed;
    char path[512];
    snprintf(path, sizeof path, "%s/all.idx", dir);
    su_cases c;
    su_cases_make(&c, &s, lp, nreq, 8, 24, 12, path, 1);
    n_cases += nreq;
    su_cases_cpu(&c);
    ft_result *one = su_gpu_answers(&c, 0, seed);
    ft_result *dev = su_results_new(&c);
    ft_result *ag = su_results_new(&c);
    for (size_t ns = 1; ns <= 8 && ns <= (size_t)ndev; ns *= 2) {
        ft_index *sh[8];
        su_split_build(&s, c.keys, c.m, ns, dir, sh);
        ft_result *cg = su_cpu_group(sh, ns, c.batch, nreq);
        int small = (int)(ft_test_rand(&s) % 3 == 0);
        static const uint32_t widths[] = {1, 3, 1u << 30};
        uint32_t w = widths[ft_test_rand(&s) % 3];
        fti_group *gd = open_group(sh, ns, small, FTI_EXCHANGE_NCCL_DEVICE, 0,
                                   0);
        FT_CHECK(fti_group_exchange(gd) == FTI_EXCHANGE_NCCL_DEVICE);
        su_run_widths(NULL, gd, c.batch, nreq, w, dev);
        /* no wait ran out: still the device API */
        FT_CHECK(fti_group_exchange(gd) == FTI_EXCHANGE_NCCL_DEVICE);
        fti_group *ga = open_group(sh, ns, small, FTI_EXCHANGE_NCCL, 0, 0);
        FT_CHECK(fti_group_exchange(ga) == FTI_EXCHANGE_NCCL);
        su_run_widths(NULL, ga, c.batch, nreq, w, ag);
        for (uint32_t i = 0; i < nreq; i++) {
            char what[240];
            snprintf(what, sizeof what, "seed %llu case %u shards %zu "
                     "nccl-device small %d batch %u (T=%u K=%u B=%u n=%u)",
                     (unsigned long long)seed, i, ns, small, w,
                     c.batch[i].T, c.batch[i].K, c.batch[i].beam,
                     c.batch[i].results);
            su_check_group(&dev[i], &cg[i], &one[i], &c.cs[i], what);
            snprintf(what, sizeof what, "seed %llu case %u shards %zu "
                     "nccl small %d batch %u", (unsigned long long)seed, i,
                     ns, small, w);
            su_check_group(&ag[i], &cg[i], &one[i], &c.cs[i], what);
            if (!su_same_full(&dev[i], &ag[i], 1)) {
                fprintf(stderr, "seed %llu case %u shards %zu: the device "
                        "API and ncclAllGather differ\n",
                        (unsigned long long)seed, i, ns);
                exit(1);
            }
            n_runs += 2;
        }
        fti_group_close(ga);
        /* a wait that runs out (one cycle): the batch is redone through
         * ncclAllGather, exactly, and the group keeps to it; only a batch
         * with a step to meet at (T >= 2) meets */
        if (ns == 1 || seed % 3 == 0) {
            fti_group_close(gd);
            gd = open_group(sh, ns, small, FTI_EXCHANGE_NCCL_DEVICE, 1, 0);
            FT_CHECK(fti_group_exchange(gd) == FTI_EXCHANGE_NCCL_DEVICE);
            uint32_t tmax = 0;
            for (uint32_t i = 0; i < nreq; i++)
                tmax = c.batch[i].T > tmax ? c.batch[i].T : tmax;
            log_clear();
            su_run_widths(NULL, gd, c.batch, nreq, 1u << 30, dev);
            if (tmax >= 2) {
                FT_CHECK(fti_group_exchange(gd) == FTI_EXCHANGE_NCCL);
                FT_CHECK(log_has("WARN", "shard group: the NCCL device "
                                         "exchange of") &&
                         log_has("WARN", "exchanges by ncclAllGather from "
                                         "now on"));
            }
            for (uint32_t i = 0; i < nreq; i++) {
                char what[200];
                snprintf(what, sizeof what, "seed %llu case %u shards %zu "
                         "nccl-device timed out", (unsigned long long)seed, i,
                         ns);
                su_check_group(&dev[i], &cg[i], &one[i], &c.cs[i], what);
                n_runs++;
            }
            su_run_widths(NULL, gd, c.batch, nreq, 1, dev);
            for (uint32_t i = 0; i < nreq; i++)
                FT_CHECK(su_same_full(&dev[i], &ag[i], 1));
        }
        fti_group_close(gd);
        su_results_free(cg, nreq);
        for (size_t j = 0; j < ns; j++)
            ft_index_close(sh[j]);
    }
    su_results_free(one, nreq);
    su_results_free(dev, nreq);
    su_results_free(ag, nreq);
    su_cases_free(&c);
}

/* choice checks the choice at open, its log lines and the errors; returns
 * 0 when the device API cannot be set up here (reason printed). */
static int choice(const char *dir)
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
    FT_CHECK(go.nccl_device == 0 && go.nccl_device_deny == 0);
    fti_group *g;
    char err[256] = "";
    /* forced, one rank */
    go.exchange = FTI_EXCHANGE_NCCL_DEVICE;
    log_clear();
    FT_PASS(fti_group_open_ex(&g, (const ft_index *const *)sh, 1, &o, &go,
                              err, sizeof err));
    if (fti_group_exchange(g) != FTI_EXCHANGE_NCCL_DEVICE) {
        FT_CHECK(fti_group_exchange(g) == FTI_EXCHANGE_NCCL);
        FT_CHECK(log_has("WARN", "shard group: NCCL device API not used, "
                                 "ncclAllGather instead: "));
        fputs(logbuf, stdout);
        fti_group_close(g);
        ft_index_close(sh[0]);
        ft_index_close(sh[1]);
        return 0;
    }
    FT_CHECK(log_has("INFO", "shard group: 1 GPUs exchange their lists "
                             "inside the kernel through NCCL's device API"));
    fputs(logbuf, stdout);
    fti_group_close(g);
    /* forced where it cannot be set up: ncclAllGather, and the line */
    go.nccl_device_deny = 1;
    log_clear();
    FT_PASS(fti_group_open_ex(&g, (const ft_index *const *)sh, 1, &o, &go,
                              err, sizeof err));
    FT_CHECK(fti_group_exchange(g) == FTI_EXCHANGE_NCCL);
    FT_CHECK(log_has("WARN", "shard group: NCCL device API not used, "
                             "ncclAllGather instead: turned off for a test "
                             "(nccl_device_deny)"));
    fti_group_close(g);
    go.nccl_device_deny = 0;
    /* errors: CPU engines, two shards on one GPU */
    ft_engine_opts c;
    ft_engine_opts_init(&c);
    FT_FAIL(fti_group_open_ex(&g, (const ft_index *const *)sh, 2, &c, &go,
                              err, sizeof err),
            FT_ENOTSUP);
    FT_CHECK_STR(err, "exchange: nccl-device needs GPU engines");
    FT_FAIL(fti_group_open_ex(&g, (const ft_index *const *)sh, 2, &o, &go,
                              err, sizeof err),
            FT_ENOTSUP);
    FT_CHECK_STR(err, "exchange: nccl-device needs one shard per GPU");
    /* auto over two GPUs: ncclAllGather by default, the device API with
     * nccl_device, and, denied, ncclAllGather with an INFO line */
    if (ndev >= 2) {
        int devs[2] = {0, 1};
        go.devices = devs;
        go.exchange = FTI_EXCHANGE_AUTO;
        FT_PASS(fti_group_open_ex(&g, (const ft_index *const *)sh, 2, &o, &go,
                                  err, sizeof err));
        FT_CHECK(fti_group_exchange(g) == FTI_EXCHANGE_NCCL);
        fti_group_close(g);
        go.nccl_device = 1;
        FT_PASS(fti_group_open_ex(&g, (const ft_index *const *)sh, 2, &o, &go,
                                  err, sizeof err));
        FT_CHECK(fti_group_exchange(g) == FTI_EXCHANGE_NCCL_DEVICE);
        fti_group_close(g);
        go.nccl_device_deny = 1;
        log_clear();
        FT_PASS(fti_group_open_ex(&g, (const ft_index *const *)sh, 2, &o, &go,
                                  err, sizeof err));
        FT_CHECK(fti_group_exchange(g) == FTI_EXCHANGE_NCCL);
        FT_CHECK(log_has("INFO", "shard group: NCCL device API not used, "
                                 "ncclAllGather instead: turned off"));
        fti_group_close(g);
    }
    ft_index_close(sh[0]);
    ft_index_close(sh[1]);
    return 1;
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    char dir[] = "/tmp/ft_gpu_nccl_dev_XXXXXX";
    FT_CHECK(mkdtemp(dir) != NULL);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    char err[256] = "";
    ndev = su_gpu_count(dir, err, sizeof err);
    if (ndev == 0)
        printf("SKIP: no GPU (%s)\n", err);
    else if (!su_nccl_probe(dir, err, sizeof err)) {
        printf("SKIP: no NCCL group here (%s)\n", err);
        ndev = 0;
    }
    if (ndev == 0) {
        FT_CHECK(system(cmd) == 0);
        return FT_TEST_SKIP;
    }
    ft_log_set_sink(sink, NULL);
    ft_log_set_level(FT_LOG_INFO);
    double t0 = ft_test_now();
    if (!choice(dir)) {
        const char *req = getenv("FT_TEST_NCCL_DEVICE_REQUIRED");
        ft_log_set_sink(NULL, NULL);
        FT_CHECK(system(cmd) == 0);
        if (req && strcmp(req, "1") == 0) {
            fprintf(stderr, "FAIL: the NCCL device API cannot be set up on "
                    "this GPU (the line above says why) and "
                    "FT_TEST_NCCL_DEVICE_REQUIRED=1\n");
            return 1;
        }
        printf("SKIP: the NCCL device API cannot be set up here (the line "
               "above says why; FT_TEST_NCCL_DEVICE_REQUIRED=1 makes this a "
               "failure)\n");
        return FT_TEST_SKIP;
    }
    uint64_t seed = 36000;
    int nlib = quick ? 3 : 24;
    for (int i = 0; i < nlib; i++) {
        su_lib_params lp = {i % 5, 1 + (size_t)(i * 53 % 500), 1 + i % 7};
        run_lib(seed++, &lp, quick ? 6 : 12, dir);
    }
    ft_log_set_sink(NULL, NULL);
    FT_CHECK(system(cmd) == 0);
    printf("gpu_nccl_dev_test: %d GPU(s), %llu cases, %llu group answers "
           "equal (device API, ncclAllGather, unsharded GPU, CPU group, "
           "reference) in %.1f s\n", ndev, (unsigned long long)n_cases,
           (unsigned long long)n_runs, ft_test_now() - t0);
    return 0;
}
