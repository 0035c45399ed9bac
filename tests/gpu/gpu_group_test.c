/*
 * gpu_group_test.c - shard groups of GPU engines against one unsharded GPU
 * engine, the CPU engine and the brute-force reference of docs/specification.md
 * section 4 (search_util.h), bit for bit (tokens, values, score and sigma bits,
 * order; key indexes against the unsharded engine):
 *
 *   - device exchange, 1, 2, 4 and 8 shards on one GPU, split by first
 *     token at random cut points (empty shards, one-key shards), with
 *     shared lists (no copies) and with device copies into each recv;
 *   - the shard kernel (FTI_EXCHANGE_KERNEL: one persistent launch per
 *     shard, the lists exchanged in the kernels), the same splits;
 *   - the forest (FTI_EXCHANGE_FOREST: one launch of the search kernel
 *     over every shard's trie, no exchange), the same splits, and its
 *     refusals (shards that share a first token, CPU engines; its
 *     engine's steps);
 *   - skewed shards: every beam in one shard, a shard without candidates
 *     at a step while others go on, empty shards, batched alone and mixed,
 *     through the shard kernel in every mode of its selection and keep
 *     (fti_group_opts.shard_mode: spread lists, one CTA a list, early
 *     beams or not; the random cases draw one per group);
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
    /* the shard kernels' selection and keep (fti_group_opts.shard_mode):
     * the default, one CTA a list, spread everywhere, each without the
     * early beams */
    static const uint32_t modes[] = {0, 0, FTI_SHARD_CTA, FTI_SHARD_SPREAD,
                                     FTI_SHARD_NO_EARLY,
                                     FTI_SHARD_CTA | FTI_SHARD_NO_EARLY,
                                     FTI_SHARD_SPREAD | FTI_SHARD_NO_EARLY};
    uint32_t mode = modes[ft_test_rand(s) % 7];
    ft_index *sh[8];
    su_split_build(s, keys, m, ns, dir, sh);
    ft_engine_opts o;
    su_gpu_opts(&o, small);
    fti_group_opts go;
    fti_group_opts_init(&go);
    go.exchange = x;
    go.shared_lists = shared;
    go.shard_mode = mode;
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
    /* the shard kernel never gave up (no fallback to device copies) */
    FT_CHECK(fti_group_exchange(g) == x);
    for (uint32_t i = 0; i < nreq; i++) {
        char what[240];
        snprintf(what, sizeof what,
                 "seed %llu case %u shards %zu exchange %d mode %u small %d "
                 "shared %d batch %u (T=%u K=%u B=%u n=%u)",
                 (unsigned long long)seed, i, ns, (int)x, mode, small, shared,
                 w, batch[i].T, batch[i].K, batch[i].beam, batch[i].results);
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
     * engine's (equal to them), got the groups' */
    su_cases_cpu(&c);
    ft_result *one = su_gpu_answers(&c, 0, seed);
    ft_result *got = su_results_new(&c);
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
        /* the shard kernel: every step in one launch per shard */
        small = (int)(ft_test_rand(&s) % 3 == 0);
        run_group(&s, c.keys, c.m, counts[ci], FTI_EXCHANGE_KERNEL, small, 1,
                  c.batch, nreq, c.cs, one, got, dir, seed);
        /* the forest: one launch a batch over every shard's trie */
        small = (int)(ft_test_rand(&s) % 3 == 0);
        run_group(&s, c.keys, c.m, counts[ci], FTI_EXCHANGE_FOREST, small, 1,
                  c.batch, nreq, c.cs, one, got, dir, seed);
    }
    if (have_nccl && (!quick || seed % 2 == 0))
        run_group(&s, c.keys, c.m, 1, FTI_EXCHANGE_NCCL, 0, 0, c.batch, nreq,
                  c.cs, one, got, dir, seed);
    for (size_t ns = 2; have_nccl && ns <= 8 && ns <= (size_t)ndev; ns *= 2)
        run_group(&s, c.keys, c.m, ns, FTI_EXCHANGE_NCCL, 0, 0, c.batch, nreq,
                  c.cs, one, got, dir, seed);
    su_results_free(one, nreq);
    su_results_free(got, nreq);
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
    /* auto: one GPU, the forest; its engine takes no steps */
    FT_PASS(fti_group_open_ex(&g, (const ft_index *const *)sh, 2, &o, &go, err,
                              sizeof err));
    FT_CHECK(fti_group_exchange(g) == FTI_EXCHANGE_FOREST);
    {
        uint32_t tk[2] = {5, 6};
        float lq[2] = {-1.0f, -2.0f};
        ft_request r1;
        ft_request_init(&r1);
        r1.T = 1;
        r1.K = 2;
        r1.tokens = tk;
        r1.logp = lq;
        fti_prep *pq;
        const fti_prepared *q;
        FT_PASS(fti_prep_create(&pq));
        FT_PASS(fti_request_prepare(&q, pq, &r1));
        FT_FAIL(fti_engine_step_begin(fti_group_engine(g, 0), &q, 1, 0, 2),
                FT_ESTATE);
        /* shard 1's engine lent its trie (its slots are gone) */
        FT_FAIL(fti_engine_step_begin(fti_group_engine(g, 1), &q, 1, 1, 2),
                FT_ESTATE);
        fti_prep_destroy(pq);
        /* the forest answers: key 5 (shard 0, value 9) beats 6's node,
         * which has no key of length 1 */
        ft_result res;
        FT_PASS(ft_result_alloc(&res, 100, 1));
        FT_PASS(fti_group_search_batch(g, &r1, 1, &res));
        if (!(res.status == FT_OK && res.n == 1 && res.hits[0].value == 9 &&
              res.hits[0].key_index == 0)) {
            fprintf(stderr, "forest contract: status %d (%s) n %u value "
                    "%llu key %llu\n", res.status, res.error, res.n,
                    res.n ? (unsigned long long)res.hits[0].value : 0ull,
                    res.n ? (unsigned long long)res.hits[0].key_index : 0ull);
            exit(1);
        }
        /* a duplicate token, found while the forest's launch runs: the
         * validator's own error, and nothing else of the request */
        uint32_t td[2] = {5, 5};
        r1.tokens = td;
        ft_result_free(&res);
        FT_PASS(ft_result_alloc(&res, 100, 1));
        char want[200];
        int vrc = ft_request_validate(&r1, 0, want, sizeof want);
        FT_CHECK(vrc != FT_OK);
        FT_PASS(fti_group_search_batch(g, &r1, 1, &res));
        FT_CHECK(res.status == vrc && res.n == 0);
        FT_CHECK_STR(res.error, want);
        ft_result_free(&res);
    }
    fti_group_close(g);
    /* the shard kernel when asked for (it fits: two shards) */
    go.exchange = FTI_EXCHANGE_KERNEL;
    FT_PASS(fti_group_open_ex(&g, (const ft_index *const *)sh, 2, &o, &go, err,
                              sizeof err));
    FT_CHECK(fti_group_exchange(g) == FTI_EXCHANGE_KERNEL);
    fti_group_close(g);
    /* without shared lists, or with whole grids each, it does not fit:
     * device copies */
    go.shared_lists = 0;
    FT_PASS(fti_group_open_ex(&g, (const ft_index *const *)sh, 2, &o, &go, err,
                              sizeof err));
    FT_CHECK(fti_group_exchange(g) == FTI_EXCHANGE_DEVICE);
    fti_group_close(g);
    go.shared_lists = 1;
    go.split_grid = 0;
    go.exchange = FTI_EXCHANGE_KERNEL;
    FT_PASS(fti_group_open_ex(&g, (const ft_index *const *)sh, 2, &o, &go, err,
                              sizeof err));
    FT_CHECK(fti_group_exchange(g) == FTI_EXCHANGE_DEVICE);
    fti_group_close(g);
    go.split_grid = 1;
    go.exchange = FTI_EXCHANGE_KERNEL;
    ft_engine_opts cpuo;
    ft_engine_opts_init(&cpuo);
    FT_FAIL(fti_group_open_ex(&g, (const ft_index *const *)sh, 2, &cpuo, &go,
                              err, sizeof err),
            FT_ENOTSUP);
    FT_CHECK_STR(err, "exchange: kernel needs GPU engines on one GPU");
    go.exchange = FTI_EXCHANGE_FOREST;
    FT_FAIL(fti_group_open_ex(&g, (const ft_index *const *)sh, 2, &cpuo, &go,
                              err, sizeof err),
            FT_ENOTSUP);
    FT_CHECK_STR(err, "exchange: forest needs GPU engines on one GPU");
    {
        /* shards that share a first token (5): no forest; auto takes the
         * shard kernel instead */
        su_key k2[1] = {{2, {5, 1}, 3}};
        ft_index *sx[2] = {sh[0], NULL};
        snprintf(path, sizeof path, "%s/c2.idx", dir);
        su_build(k2, 1, path, &sx[1]);
        FT_FAIL(fti_group_open_ex(&g, (const ft_index *const *)sx, 2, &o, &go,
                                  err, sizeof err),
                FT_ENOTSUP);
        FT_CHECK_STR(err, "exchange: forest: first token 5 is in shards 0 "
                          "and 1 (not a split by first token)");
        go.exchange = FTI_EXCHANGE_AUTO;
        FT_PASS(fti_group_open_ex(&g, (const ft_index *const *)sx, 2, &o, &go,
                                  err, sizeof err));
        FT_CHECK(fti_group_exchange(g) == FTI_EXCHANGE_KERNEL);
        fti_group_close(g);
        ft_index_close(sx[1]);
    }
    go.exchange = FTI_EXCHANGE_AUTO;
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

/* ---- skewed shards (issue 36) -------------------------------------------
 *
 * A library whose first tokens fall in three groups (10: 100 keys of 3
 * tokens, 50: 12 keys of 3, 90: 5 keys of 2), cut so that some shards are
 * empty, and requests where every beam lives in one shard (R0), where a
 * shard runs out of candidates at a later step while others go on (R1:
 * the keys under 90 end at t = 1, under 50 at t = 2), and where only one
 * shard has candidates after the first step (R2); batched alone and
 * mixed.  Every exchange must answer what the unsharded GPU engine and a
 * CPU group over the same shards answer. */

static void sk_row(uint32_t *tok, float *lp, uint32_t K, const uint32_t *t,
                   const float *l, uint32_t n, uint32_t fill)
{
    for (uint32_t k = 0; k < K; k++) {
        tok[k] = k < n ? t[k] : fill + k; /* fillers match no key */
        lp[k] = k < n ? l[k] : -20.0f - 0.01f * (float)k;
    }
}

static void skewed(const char *dir, uint64_t seed)
{
    enum { K = 24, T = 3, NR = 3 };
    su_key keys[160];
    size_t m = 0;
    for (uint32_t a = 1; a <= 20; a++)
        for (uint32_t b = 1; b <= 5; b++, m++)
            keys[m] = (su_key){3, {10, a, b}, 7 * m + 1};
    for (uint32_t a = 1; a <= 4; a++)
        for (uint32_t b = 1; b <= 3; b++, m++)
            keys[m] = (su_key){3, {50, a, b}, 7 * m + 1};
    for (uint32_t a = 1; a <= 5; a++, m++)
        keys[m] = (su_key){2, {90, a}, 7 * m + 1};
    /* the requests */
    static uint32_t tok[NR][T * K];
    static float lp[NR][T * K];
    uint32_t t1[20], t2[5];
    float l1[20], l2[5];
    for (uint32_t a = 0; a < 20; a++) {
        t1[a] = a + 1;
        l1[a] = -0.3f - 0.17f * (float)((a * 7) % 20);
    }
    for (uint32_t b = 0; b < 5; b++) {
        t2[b] = b + 1;
        l2[b] = -0.2f - 0.31f * (float)b;
    }
    uint32_t r0[1] = {10}, rall[3] = {50, 90, 10}, t1hi[4] = {6, 7, 8, 9};
    float l0[1] = {-0.1f}, lall[3] = {-0.5f, -0.7f, -1.0f},
          l1hi[4] = {-0.4f, -0.9f, -1.3f, -2.0f};
    /* R0: only 10 at t = 0 */
    sk_row(tok[0], lp[0], K, r0, l0, 1, 1000);
    sk_row(tok[0] + K, lp[0] + K, K, t1, l1, 20, 1000);
    sk_row(tok[0] + 2 * K, lp[0] + 2 * K, K, t2, l2, 5, 1000);
    /* R1: every group at t = 0, a <= 4 at t = 1 (all three), b at t = 2
     * (none under 90) */
    sk_row(tok[1], lp[1], K, rall, lall, 3, 1000);
    sk_row(tok[1] + K, lp[1] + K, K, t1, l1, 4, 1000);
    sk_row(tok[1] + 2 * K, lp[1] + 2 * K, K, t2, l2, 3, 1000);
    /* R2: every group at t = 0, only a in 6..9 at t = 1 (only under 10) */
    sk_row(tok[2], lp[2], K, rall, lall, 3, 1000);
    sk_row(tok[2] + K, lp[2] + K, K, t1hi, l1hi, 4, 1000);
    sk_row(tok[2] + 2 * K, lp[2] + 2 * K, K, t2, l2, 5, 1000);
    ft_request req[NR];
    static const uint32_t beams[NR] = {8, 3, 5};
    for (int i = 0; i < NR; i++) {
        ft_request_init(&req[i]);
        req[i].T = T;
        req[i].K = K;
        req[i].tokens = tok[i];
        req[i].logp = lp[i];
        req[i].beam = beams[i];
        req[i].results = 6;
    }
    /* the unsharded answers: GPU, equal to CPU */
    char path[512];
    snprintf(path, sizeof path, "%s/skew_all.idx", dir);
    su_key all[160];
    memcpy(all, keys, m * sizeof *keys);
    ft_index *idx;
    FT_CHECK(su_build(all, m, path, &idx) == m);
    ft_result one[NR], cpu[NR], got[NR];
    for (int i = 0; i < NR; i++) {
        FT_PASS(ft_result_alloc(&one[i], 6, T));
        FT_PASS(ft_result_alloc(&cpu[i], 6, T));
        FT_PASS(ft_result_alloc(&got[i], 6, T));
    }
    ft_engine_opts o, c;
    su_gpu_opts(&o, 0);
    ft_engine_opts_init(&c);
    ft_engine *eng;
    char err[256] = "";
    FT_PASS(ft_engine_open(&eng, idx, &o, err, sizeof err));
    FT_PASS(ft_engine_search_batch(eng, req, NR, one));
    ft_engine_close(eng);
    FT_PASS(ft_engine_open(&eng, idx, &c, err, sizeof err));
    FT_PASS(ft_engine_search_batch(eng, req, NR, cpu));
    ft_engine_close(eng);
    for (int i = 0; i < NR; i++) {
        FT_CHECK(one[i].status == FT_OK && one[i].n > 0);
        FT_CHECK(su_same_full(&one[i], &cpu[i], 1));
    }
    ft_index_close(idx);
    /* the splits: by first-token group, with empty shards; g[j] is the
     * group (0: 10, 1: 50, 2: 90) a shard starts at, 3 for empty */
    static const int splits[3][8] = {
        {0, 1, 3, 2},             /* 4: 10 | 50 | empty | 90 */
        {0, 1},                   /* 2: 10 | 50 + 90 */
        {3, 0, 3, 1, 3, 3, 2, 3}, /* 8: empties around each group */
    };
    static const size_t nsplit[3] = {4, 2, 8};
    const size_t gstart[4] = {0, 100, 112, 117};
    for (int sp = 0; sp < 3; sp++) {
        size_t ns = nsplit[sp];
        ft_index *sh[8];
        size_t at = 0;
        for (size_t j = 0; j < ns; j++) {
            int gj = splits[sp][j];
            size_t end = at;
            if (gj != 3) {
                /* up to the next non-empty shard's group, or the end */
                end = m;
                for (size_t r = j + 1; r < ns; r++)
                    if (splits[sp][r] != 3) {
                        end = gstart[splits[sp][r]];
                        break;
                    }
            }
            su_key part[160];
            memcpy(part, keys + at, (end - at) * sizeof *keys);
            snprintf(path, sizeof path, "%s/skew%zu.idx", dir, j);
            FT_CHECK(su_build(part, end - at, path, &sh[j]) == end - at);
            at = end;
        }
        FT_CHECK(at == m);
        ft_result *cg = su_cpu_group(sh, ns, req, NR);
        /* the shard kernel in every mode of its selection and keep:
         * lists spread (where cheaper, everywhere) or one CTA a list,
         * with and without early beams */
        static const fti_exchange xs[8] = {
            FTI_EXCHANGE_DEVICE, FTI_EXCHANGE_DEVICE, FTI_EXCHANGE_KERNEL,
            FTI_EXCHANGE_KERNEL, FTI_EXCHANGE_KERNEL, FTI_EXCHANGE_KERNEL,
            FTI_EXCHANGE_KERNEL, FTI_EXCHANGE_FOREST};
        static const uint32_t xm[8] = {
            0, 0, 0, FTI_SHARD_SPREAD, FTI_SHARD_CTA, FTI_SHARD_NO_EARLY,
            FTI_SHARD_SPREAD | FTI_SHARD_NO_EARLY, 0};
        for (int xi = 0; xi < 8; xi++) {
            fti_group_opts go;
            fti_group_opts_init(&go);
            go.exchange = xs[xi];
            go.shard_mode = xm[xi];
            go.shared_lists = xi != 0;
            fti_group *g;
            FT_PASS(fti_group_open_ex(&g, (const ft_index *const *)sh, ns, &o,
                                      &go, err, sizeof err));
            FT_CHECK(fti_group_exchange(g) == xs[xi]);
            for (uint32_t w = 1; w <= NR; w += 2) { /* alone, mixed */
                su_run_widths(NULL, g, req, NR, w, got);
                FT_CHECK(fti_group_exchange(g) == xs[xi]);
                for (int i = 0; i < NR; i++) {
                    if (!su_same_full(&got[i], &one[i], 0) ||
                        !su_same_full(&got[i], &cg[i], 1)) {
                        fprintf(stderr, "seed %llu skewed R%d: %zu shards, "
                                "exchange %d mode %u shared %d batch %u "
                                "differ\n", (unsigned long long)seed, i, ns,
                                (int)xs[xi], xm[xi], go.shared_lists, w);
                        exit(1);
                    }
                    n_runs++;
                }
            }
            fti_group_close(g);
        }
        /* a wait that runs out (a timeout of a few cycles): every launch
         * gives up, the batch is redone by the step kernels, exactly, and
         * the group keeps to device copies */
        fti_group_opts go;
        fti_group_opts_init(&go);
        go.exchange = FTI_EXCHANGE_KERNEL;
        go.kernel_timeout = 1;
        fti_group *g;
        FT_PASS(fti_group_open_ex(&g, (const ft_index *const *)sh, ns, &o, &go,
                                  err, sizeof err));
        FT_CHECK(fti_group_exchange(g) == FTI_EXCHANGE_KERNEL);
        su_run_widths(NULL, g, req, NR, NR, got);
        FT_CHECK(fti_group_exchange(g) == FTI_EXCHANGE_DEVICE);
        for (int i = 0; i < NR; i++)
            FT_CHECK(su_same_full(&got[i], &one[i], 0) &&
                     su_same_full(&got[i], &cg[i], 1));
        su_run_widths(NULL, g, req, NR, 1, got);
        for (int i = 0; i < NR; i++)
            FT_CHECK(su_same_full(&got[i], &one[i], 0));
        fti_group_close(g);
        su_results_free(cg, NR);
        for (size_t j = 0; j < ns; j++)
            ft_index_close(sh[j]);
    }
    for (int i = 0; i < NR; i++) {
        ft_result_free(&one[i]);
        ft_result_free(&cpu[i]);
        ft_result_free(&got[i]);
    }
    n_cases += NR;
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    char dir[] = "/tmp/ft_gpu_group_XXXXXX";
    FT_CHECK(mkdtemp(dir) != NULL);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    char err[256] = "";
    ndev = su_gpu_count(dir, err, sizeof err);
    if (ndev == 0) {
        printf("SKIP: no GPU (%s)\n", err);
        FT_CHECK(system(cmd) == 0);
        return FT_TEST_SKIP;
    }
    double t0 = ft_test_now();
    contract(dir);
    skewed(dir, 0);
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
           "device copies, shard kernel, forest, NCCL, %d GPU%s), %.1f s\n",
           (unsigned long long)n_cases, (unsigned long long)n_runs, ndev,
           ndev > 1 ? "s" : "", ft_test_now() - t0);
    return 0;
}
