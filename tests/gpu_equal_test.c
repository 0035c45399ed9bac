/*
 * gpu_equal_test.c - the GPU engine against the CPU engine and against the
 * brute-force reference of SPEC section 4 (search_util.h), bit for bit:
 * tokens, values, score and sigma bits, order.
 *
 * Random libraries are built in memory-sized index files with the builder
 * core: tiny vocabularies and quantised log-probs make exact ties frequent;
 * thresholds, alpha, prefix keys, beams 1..4096, K up to 4096, T up to 64.
 * Every request runs alone and inside mixed batches of 1..64 requests
 * (SPEC section 6: the batch must not matter), on an engine with the
 * default arenas and on one with small slots plus the big slot.
 *
 *   gpu_equal_test            the full run (thousands of cases)
 *   gpu_equal_test --quick    a small representative run, for
 *                             compute-sanitizer memcheck and racecheck
 *
 * Exits 77 ("SKIP: no GPU ...") when the GPU engine reports FT_ENODEV or
 * the build has no GPU engine.
 */
#include "search_util.h"

typedef struct lib_params {
    int vocab;       /* 0 tiny, 1 small, 2 straddles 2^16, 3 full 32-bit */
    size_t nkeys;
    uint32_t maxlen;
} lib_params;

static uint32_t rand_tok(uint64_t *s, int vocab, uint32_t V)
{
    uint64_t r = ft_test_rand(s);
    switch (vocab) {
    case 0: return (uint32_t)(r % V);
    case 1: return (uint32_t)(r % (V * 8));
    case 2: return 65536u - 6u + (uint32_t)(r % 12);
    case 4: return (uint32_t)(r % (V * 1000));
    default: return (uint32_t)r;
    }
}

typedef struct tcase {
    ft_request req;
    uint32_t *tok;
    float *lp;
    su_hit *ref;
    uint32_t nref;
} tcase;

static float rand_logp(uint64_t *s, int mode)
{
    uint64_t r = ft_test_rand(s);
    switch (mode) {
    case 0: return -(float)(r % 8) * 0.5f;
    case 1: {
        static const float v[] = {0.0f, -0.0f, -1.0f, -0.5f, 0.25f};
        return v[r % 5];
    }
    case 2: return -(float)(r % 100000) / 1000.0f;
    default: return (float)((double)(int64_t)(r % 2000001) - 1000000.0) /
                    3.0f;
    }
}

static void make_request(tcase *c, uint64_t *s, const su_key *keys, size_t m,
                         const lib_params *lp, uint32_t V, uint32_t T,
                         uint32_t K, uint32_t B)
{
    ft_request *q = &c->req;
    ft_request_init(q);
    c->tok = malloc((size_t)T * K * sizeof *c->tok);
    c->lp = malloc((size_t)T * K * sizeof *c->lp);
    int lmode = (int)(ft_test_rand(s) % 4);
    uint32_t *pool = malloc((size_t)4 * K * sizeof *pool + 64);
    for (uint32_t t = 0; t < T; t++) {
        uint32_t np = 0;
        for (uint32_t i = 0; i < 4 * K; i++) {
            uint64_t r = ft_test_rand(s);
            const su_key *k = m ? &keys[r % m] : NULL;
            if (k && k->len > t && (r >> 40) % 4 != 0)
                pool[np++] = k->t[t];
            else
                pool[np++] = rand_tok(s, lp->vocab, V);
        }
        uint32_t nd = 0;
        for (uint32_t gap = np / 2; gap > 0; gap /= 2)
            for (uint32_t i = gap; i < np; i++)
                for (uint32_t j = i; j >= gap && pool[j - gap] > pool[j];
                     j -= gap) {
                    uint32_t x = pool[j];
                    pool[j] = pool[j - gap];
                    pool[j - gap] = x;
                }
        for (uint32_t i = 0; i < np; i++)
            if (nd == 0 || pool[nd - 1] != pool[i])
                pool[nd++] = pool[i];
        for (uint32_t i = nd; i > 1; i--) {
            uint32_t j = (uint32_t)(ft_test_rand(s) % i);
            uint32_t x = pool[i - 1];
            pool[i - 1] = pool[j];
            pool[j] = x;
        }
        for (uint32_t k = 0; k < K; k++) {
            c->tok[(size_t)t * K + k] = k < nd ? pool[k] : 0x7fff0000u + k;
            c->lp[(size_t)t * K + k] = rand_logp(s, lmode);
        }
        if (ft_test_rand(s) % 3 == 0) {
            float *row = c->lp + (size_t)t * K;
            for (uint32_t i = 1; i < K; i++)
                for (uint32_t j = i; j > 0 && row[j] > row[j - 1]; j--) {
                    float x = row[j];
                    row[j] = row[j - 1];
                    row[j - 1] = x;
                }
        }
    }
    free(pool);
    q->T = T;
    q->K = K;
    q->tokens = c->tok;
    q->logp = c->lp;
    q->beam = B;
    uint64_t r = ft_test_rand(s);
    switch (r % 4) {
    case 0: q->results = 0; break;
    case 1: q->results = 1 + (uint32_t)((r >> 8) % B); break;
    case 2: q->results = B + (uint32_t)((r >> 8) % (B + 8)); break;
    default: q->results = 1 + (uint32_t)((r >> 8) % 4); break;
    }
    if (q->results > FT_MAX_RESULTS)
        q->results = FT_MAX_RESULTS;
    if (ft_test_rand(s) % 3 == 0)
        q->theta_tok = rand_logp(s, lmode);
    if (ft_test_rand(s) % 3 == 0)
        q->theta_sent = rand_logp(s, lmode) * (float)(1 + ft_test_rand(s) % 4);
    static const double alphas[] = {0, 0.5, 1, 2.5, 10};
    q->alpha = alphas[ft_test_rand(s) % 5];
}

static uint64_t n_cases, n_runs, n_hits, n_ref;
static int with_ref = 1;

static void check_one(const ft_result *got, const ft_result *cpu,
                      const tcase *c, const char *what)
{
    if (!su_same_results(got, cpu)) {
        fprintf(stderr, "%s: GPU and CPU results differ (status %d/%d, "
                "n %u/%u)\n", what, got->status, cpu->status, got->n, cpu->n);
        if (c->ref)
            su_same_result(got, c->ref, c->nref, what);
        exit(1);
    }
    if (c->ref && !su_same_result(got, c->ref, c->nref, what))
        exit(1);
    n_runs++;
}

/* run_lib builds one library, makes nreq requests and checks them. */
static void run_lib(uint64_t seed, const lib_params *lp, uint32_t nreq,
                    uint32_t maxT, uint32_t maxK, uint32_t maxB,
                    const char *path)
{
    uint64_t s = seed;
    uint32_t V = 2 + (uint32_t)(ft_test_rand(&s) % 6);
    su_key *keys = calloc(lp->nkeys + 1, sizeof *keys);
    for (size_t i = 0; i < lp->nkeys; i++) {
        su_key *k = &keys[i];
        if (i > 0 && ft_test_rand(&s) % 4 == 0) {
            *k = keys[ft_test_rand(&s) % i];
            if (ft_test_rand(&s) % 2 && k->len > 1)
                k->len = 1 + (uint32_t)(ft_test_rand(&s) % (k->len - 1));
            else if (k->len < lp->maxlen)
                k->t[k->len++] = rand_tok(&s, lp->vocab, V);
        } else {
            k->len = 1 + (uint32_t)(ft_test_rand(&s) % lp->maxlen);
            for (uint32_t j = 0; j < k->len; j++)
                k->t[j] = rand_tok(&s, lp->vocab, V);
        }
        k->value = i * 3 + 7;
    }
    ft_index *idx;
    size_t m = su_build(keys, lp->nkeys, path, &idx);
    su_node *root = NULL;
    if (with_ref) {
        root = su_node_new();
        for (size_t i = 0; i < m; i++)
            su_insert(root, &keys[i]);
    }
    tcase *cs = calloc(nreq, sizeof *cs);
    for (uint32_t i = 0; i < nreq; i++) {
        uint32_t T = 1 + (uint32_t)(ft_test_rand(&s) % maxT);
        uint32_t K = 1 + (uint32_t)(ft_test_rand(&s) % maxK);
        uint32_t B = 1 + (uint32_t)(ft_test_rand(&s) % maxB);
        make_request(&cs[i], &s, keys, m, lp, V, T, K, B);
        char err[160];
        FT_PASS(ft_request_validate(&cs[i].req, 0, err, sizeof err));
        if (with_ref) {
            cs[i].ref = malloc(FT_MAX_RESULTS * sizeof *cs[i].ref);
            cs[i].nref = su_search(root, &cs[i].req, cs[i].ref);
            n_ref++;
        }
    }
    n_cases += nreq;

    ft_result *cpu = calloc(nreq, sizeof *cpu);
    ft_result *got = calloc(nreq, sizeof *got);
    ft_request *batch = calloc(nreq, sizeof *batch);
    uint32_t *perm = calloc(nreq, sizeof *perm);
    for (uint32_t i = 0; i < nreq; i++) {
        FT_PASS(ft_result_alloc(&cpu[i], FT_MAX_RESULTS, cs[i].req.T));
        FT_PASS(ft_result_alloc(&got[i], FT_MAX_RESULTS, cs[i].req.T));
    }
    ft_engine_opts o;
    ft_engine_opts_init(&o);
    ft_engine *ceng;
    char err[256];
    FT_PASS(ft_engine_open(&ceng, idx, &o, err, sizeof err));
    for (uint32_t i = 0; i < nreq; i++)
        batch[i] = cs[i].req;
    FT_PASS(ft_engine_search_batch(ceng, batch, nreq, cpu));
    ft_engine_close(ceng);
    for (uint32_t i = 0; i < nreq; i++)
        n_hits += cpu[i].n;

    /* Engine 0: default arenas.  Engine 1: small slots (K 64, T 8, three
     * slots) so larger requests take the big slot and batches split. */
    for (int e = 0; e < 2; e++) {
        ft_engine_opts_init(&o);
        o.kind = FT_ENGINE_GPU;
        if (e == 1) {
            o.max_batch = 3;
            o.max_k = 64;
            o.max_t = 8;
        }
        ft_engine *geng;
        FT_PASS(ft_engine_open(&geng, idx, &o, err, sizeof err));
        /* alone */
        for (uint32_t i = 0; i < nreq; i++) {
            FT_PASS(ft_engine_search_batch(geng, &cs[i].req, 1, &got[i]));
            char what[200];
            snprintf(what, sizeof what,
                     "seed %llu case %u engine %d alone (T=%u K=%u B=%u "
                     "n=%u)", (unsigned long long)seed, i, e, cs[i].req.T,
                     cs[i].req.K, cs[i].req.beam, cs[i].req.results);
            check_one(&got[i], &cpu[i], &cs[i], what);
        }
        /* shuffled, in batches of random widths 1..64 */
        for (int round = 0; round < 2; round++) {
            for (uint32_t i = 0; i < nreq; i++)
                perm[i] = i;
            for (uint32_t i = nreq; i > 1; i--) {
                uint32_t j = (uint32_t)(ft_test_rand(&s) % i), x = perm[i - 1];
                perm[i - 1] = perm[j];
                perm[j] = x;
            }
            ft_result *tmp = calloc(nreq, sizeof *tmp);
            for (uint32_t i = 0; i < nreq; i++) {
                batch[i] = cs[perm[i]].req;
                tmp[i] = got[perm[i]];
            }
            for (uint32_t i = 0; i < nreq;) {
                uint32_t w = 1 + (uint32_t)(ft_test_rand(&s) % 64);
                if (round == 1)
                    w = 64;
                if (w > nreq - i)
                    w = nreq - i;
                FT_PASS(ft_engine_search_batch(geng, batch + i, w, tmp + i));
                for (uint32_t j = i; j < i + w; j++) {
                    char what[200];
                    snprintf(what, sizeof what,
                             "seed %llu case %u engine %d batch of %u (T=%u "
                             "K=%u B=%u n=%u)", (unsigned long long)seed,
                             perm[j], e, w, batch[j].T, batch[j].K,
                             batch[j].beam, batch[j].results);
                    check_one(&tmp[j], &cpu[perm[j]], &cs[perm[j]], what);
                }
                i += w;
            }
            free(tmp);
        }
        ft_engine_close(geng);
    }
    for (uint32_t i = 0; i < nreq; i++) {
        ft_result_free(&cpu[i]);
        ft_result_free(&got[i]);
        free(cs[i].tok);
        free(cs[i].lp);
        free(cs[i].ref);
    }
    free(cpu);
    free(got);
    free(batch);
    free(perm);
    free(cs);
    if (root)
        su_free(root);
    ft_index_close(idx);
    free(keys);
}

/* gpu_available opens a GPU engine over a one-key library; prints SKIP and
 * returns 0 when there is no usable GPU. */
static int gpu_available(const char *path)
{
    su_key k = {1, {5}, 0};
    ft_index *idx;
    su_build(&k, 1, path, &idx);
    ft_engine_opts o;
    ft_engine_opts_init(&o);
    o.kind = FT_ENGINE_GPU;
    o.max_batch = 1;
    o.max_k = 8;
    o.max_t = 2;
    ft_engine *eng;
    char err[256] = "";
    int rc = ft_engine_open(&eng, idx, &o, err, sizeof err);
    ft_index_close(idx);
    if (rc == FT_ENODEV || rc == FT_ENOTSUP) {
        printf("SKIP: no GPU (%s)\n", err);
        return 0;
    }
    if (rc != FT_OK) {
        fprintf(stderr, "GPU engine open failed: %s: %s\n", ft_strerror(rc),
                err);
        exit(1);
    }
    ft_engine_close(eng);
    return 1;
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    char path[] = "/tmp/ft_gpu_equal_XXXXXX";
    int fd = mkstemp(path);
    FT_CHECK(fd >= 0);
    close(fd);
    if (!gpu_available(path)) {
        unlink(path);
        return FT_TEST_SKIP;
    }
    double t0 = fti_now();
    uint64_t seed = 1000;
    if (quick) {
        for (int i = 0; i < 4; i++) {
            lib_params lp = {i % 4, 50 + (size_t)i * 60, 2 + i};
            run_lib(seed++, &lp, 6, 6, 20, 40, path);
        }
    } else {
        for (int i = 0; i < 200; i++) {
            lib_params lp = {i % 4, 1 + (size_t)(i * 37 % 400), 1 + i % 8};
            run_lib(seed++, &lp, 24, 9, 24, 12, path);
        }
        for (int i = 0; i < 30; i++) {
            lib_params lp = {i % 5, 3000, 6};
            run_lib(seed++, &lp, 40, 7, 200, 700, path);
        }
        {
            lib_params lp = {0, 0, 3};
            run_lib(seed++, &lp, 8, 4, 8, 8, path);
            lp.nkeys = 1;
            run_lib(seed++, &lp, 8, 4, 8, 8, path);
        }
        {
            lib_params lp = {0, 3000, 64};
            run_lib(seed++, &lp, 4, 64, 8, 4096, path);
            lp = (lib_params){1, 20000, 3};
            run_lib(seed++, &lp, 3, 3, 4096, 300, path);
            lp = (lib_params){4, 30000, 4};
            run_lib(seed++, &lp, 3, 4, 4096, 4096, path);
            /* big ones without the (slow) brute-force reference */
            with_ref = 0;
            lp = (lib_params){4, 200000, 6};
            run_lib(seed++, &lp, 4, 6, 4096, 4096, path);
            lp = (lib_params){0, 50000, 64};
            run_lib(seed++, &lp, 4, 64, 6, 4096, path);
            with_ref = 1;
        }
    }
    unlink(path);
    printf("gpu_equal_test: ok, %llu cases, %llu GPU runs passed (alone and "
           "in batches of 1..64, 2 engine configs), %llu checked against the "
           "reference too, %llu CPU hits, %.1f s\n",
           (unsigned long long)n_cases, (unsigned long long)n_runs,
           (unsigned long long)n_ref, (unsigned long long)n_hits,
           fti_now() - t0);
    return 0;
}
