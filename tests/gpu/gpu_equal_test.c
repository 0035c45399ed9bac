/*
 * gpu_equal_test.c - the GPU engine against the CPU engine and against the
 * brute-force reference of docs/specification.md section 4 (search_util.h), bit
 * for bit: tokens, values, score and sigma bits, order.
 *
 * Random libraries are built in memory-sized index files with the builder
 * core: tiny vocabularies and quantised log-probs make exact ties frequent;
 * thresholds, alpha, prefix keys, beams 1..4096, K up to 4096, T up to 64.
 * Every request runs alone and inside mixed batches of 1..64 requests
 * (docs/specification.md section 6: the batch must not matter), on an engine
 * with the default arenas, on one with small slots plus the big slot, and on
 * one that puts every list through the grid-wide selection.
 *
 *   gpu_equal_test            the full run (thousands of cases)
 *   gpu_equal_test --quick    a small representative run, for
 *                             compute-sanitizer memcheck and racecheck
 *
 * Exits 77 ("SKIP: no GPU ...") when the GPU engine reports FT_ENODEV or
 * the build has no GPU engine.
 */
#include "search_util.h"

static uint64_t n_cases, n_runs, n_hits, n_ref;
static int with_ref = 1;

static void check_one(const ft_result *got, const ft_result *cpu,
                      const su_case *c, const char *what)
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
static uint64_t n_dups;

/* Every third request of the cases gets a copy with one token repeated
 * (checked on the host while the kernel runs, the GPU's answer dropped):
 * in batches with the others, each copy must be refused with exactly
 * ft_request_validate's message, and every other request answered as
 * the CPU engine did. */
static void run_dups(su_cases *c, uint64_t *s, uint64_t seed)
{
    uint32_t nreq = c->n, nb = 0;
    ft_request *batch = calloc(2 * nreq, sizeof *batch);
    int *dup = calloc(2 * nreq, sizeof *dup);
    uint32_t *src = calloc(2 * nreq, sizeof *src);
    uint32_t **mem = calloc(nreq, sizeof *mem);
    ft_result *res = calloc(2 * nreq, sizeof *res);
    for (uint32_t i = 0; i < nreq; i++) {
        ft_request q = c->cs[i].req;
        src[nb] = i;
        batch[nb++] = q;
        if (i % 3 != 0 || q.K < 2)
            continue;
        size_t sz = (size_t)q.T * q.K;
        mem[i] = malloc(sz * sizeof *mem[i]);
        memcpy(mem[i], q.tokens, sz * sizeof *mem[i]);
        uint32_t t = (uint32_t)(ft_test_rand(s) % q.T);
        uint32_t k2 = 1 + (uint32_t)(ft_test_rand(s) % (q.K - 1));
        uint32_t k1 = (uint32_t)(ft_test_rand(s) % k2);
        mem[i][(size_t)t * q.K + k2] = mem[i][(size_t)t * q.K + k1];
        q.tokens = mem[i];
        src[nb] = i;
        dup[nb] = 1;
        batch[nb++] = q;
    }
    for (uint32_t i = 0; i < nb; i++)
        FT_PASS(ft_result_alloc(&res[i], FT_MAX_RESULTS, batch[i].T));
    ft_engine_opts o;
    ft_engine_opts_init(&o);
    o.kind = FT_ENGINE_GPU;
    char err[256];
    ft_engine *geng;
    FT_PASS(ft_engine_open(&geng, c->idx, &o, err, sizeof err));
    for (uint32_t i = 0; i < nb;) {
        uint32_t w = 1 + (uint32_t)(ft_test_rand(s) % 64);
        if (w > nb - i)
            w = nb - i;
        FT_PASS(ft_engine_search_batch(geng, batch + i, w, res + i));
        for (uint32_t j = i; j < i + w; j++) {
            char what[200];
            snprintf(what, sizeof what, "seed %llu case %u %s, batch of %u",
                     (unsigned long long)seed, src[j],
                     dup[j] ? "with a duplicate token" : "beside them", w);
            if (!dup[j]) {
                check_one(&res[j], &c->res[src[j]], &c->cs[src[j]], what);
                continue;
            }
            char want[sizeof res[j].error];
            FT_FAIL(ft_request_validate(&batch[j], 0, want, sizeof want),
                    FT_EREQUEST);
            if (res[j].status != FT_EREQUEST || res[j].n != 0 ||
                strcmp(res[j].error, want) != 0) {
                fprintf(stderr, "%s: got status %d, %u hits, '%s'; want "
                        "'%s'\n", what, res[j].status, res[j].n,
                        res[j].error, want);
                exit(1);
            }
            n_dups++;
        }
        i += w;
    }
    ft_engine_close(geng);
    for (uint32_t i = 0; i < nb; i++)
        ft_result_free(&res[i]);
    for (uint32_t i = 0; i < nreq; i++)
        free(mem[i]);
    free(mem);
    free(res);
    free(src);
    free(dup);
    free(batch);
}

static void run_lib(uint64_t seed, const su_lib_params *lp, uint32_t nreq,
                    uint32_t maxT, uint32_t maxK, uint32_t maxB,
                    const char *path)
{
    uint64_t s = seed;
    su_cases c;
    su_cases_make(&c, &s, lp, nreq, maxT, maxK, maxB, path, with_ref);
    if (with_ref)
        n_ref += nreq;
    n_cases += nreq;

    /* c.res holds the CPU engine's answers, got the GPU engine's */
    ft_result *cpu = c.res;
    ft_result *got = calloc(nreq, sizeof *got);
    ft_request *batch = calloc(nreq, sizeof *batch);
    uint32_t *perm = calloc(nreq, sizeof *perm);
    for (uint32_t i = 0; i < nreq; i++)
        FT_PASS(ft_result_alloc(&got[i], FT_MAX_RESULTS, c.cs[i].req.T));
    su_cases_cpu(&c);
    ft_engine_opts o;
    char err[256];
    for (uint32_t i = 0; i < nreq; i++)
        n_hits += cpu[i].n;

    /* Engine 0: default arenas.  Engine 1: small slots (K 64, T 8, three
     * slots) so larger requests take the big slot and batches split.
     * Engine 2: every list longer than its limit goes through the grid
     * selection (radix passes over the whole grid down to the exact
     * limit, the survivors sorted by one CTA), which by default only
     * lists over 4096 candidates take, and every proposal of a beam is
     * looked up in the child map, which by default only nodes of 256 or
     * more children are in, and every step's expansion items are taken
     * two at a time, which by default only a step of at least one item
     * per warp of the grid does.  Engine 3: no grid selection at all, which
     * also turns the spread selection of launches of 1..3 requests off
     * (every list then goes to one CTA, as in a lazy launch), and the
     * input always copied to the device before the launch (the others
     * have launches of 1..3 requests read it from mapped host memory),
     * and plain cooperative launches ended by a stream synchronisation
     * (the others go through launch graphs and wait on the kernel's
     * completion word in mapped memory), and its results' values attached
     * by the host (values_on_device off; the others' kernels write them
     * from the device's copy).
     * Engines 0-2 run a request alone with fused steps (one barrier a
     * step, every CTA its own copy of the beams, step lists by parity in
     * two slots; engine 2 with one terminal CTA), engine 4 without.
     * Engines 1, 2 and 4 run a request alone's steps in two rounds
     * whenever its proposals come to twice max(B, n) (round1 1 or 2, by
     * default 128): a first round over the best ~max(B, n) by sigma,
     * often too few, so the second round runs too.  Engines 2 and 4 do
     * the same in lazy launches (batches of 4 or more), every request's
     * step on its own: some requests of a launch then take a second
     * round and others not.  Engine 1 narrows every next list over its
     * limit (select_grid_min 2) in its fused launches in each selecting
     * CTA alone (select_local_max, by default 8192: every list of these
     * tries), down to the limit (select_grid_min below 4096 runs the
     * passes that far); engine 2 with select_local_max off sends every
     * such list through the grid selection instead, as engine 4 (not
     * fused, select_grid_min 1) does.  Engine 2 also runs without the
     * expansion's prefetches (the others with them).  Engine 1 keeps
     * only the first 40 places of such a list in shared memory
     * (select_local_cache), so that longer ones mix the copy with reads
     * through L2. */
    for (int e = 0; e < 5; e++) {
        ft_engine_opts_init(&o);
        o.kind = FT_ENGINE_GPU;
        if (e == 1) {
            o.round1 = 1;
            o.round1_items = 1;
            o.max_batch = 3;
            o.max_k = 64;
            o.max_t = 8;
            o.select_grid_min = 2;
            o.select_local_cache = 40; /* longer lists: part from L2 */
        }
        if (e == 2) {
            o.select_grid_min = 1;
            o.child_map_min = 1; /* every inner node's children mapped */
            o.expand_pair_items = 1; /* every step's items in pairs */
            o.fuse_term = 1; /* one CTA merges a fused launch's results */
            o.round1 = 2;
            o.round1_items = 1;
            o.select_local_max = UINT32_MAX; /* the grid's passes */
            o.prefetch = UINT32_MAX; /* no prefetches */
        }
        if (e == 3) {
            o.select_grid_min = UINT32_MAX;
            o.mapped_input_max = UINT32_MAX; /* the input copied in */
            o.launch_graph = UINT32_MAX; /* plain launches, stream sync */
            o.values_on_device = UINT32_MAX; /* values attached by the host */
        }
        if (e == 4) {
            o.fuse_term = UINT32_MAX; /* requests alone: two barriers a
                                       * step, as launches of 2..3 */
            o.round1 = 1;
            o.round1_items = 1;
            o.select_grid_min = 1;
        }
        ft_engine *geng;
        FT_PASS(ft_engine_open(&geng, c.idx, &o, err, sizeof err));
        /* alone */
        for (uint32_t i = 0; i < nreq; i++) {
            FT_PASS(ft_engine_search_batch(geng, &c.cs[i].req, 1, &got[i]));
            char what[200];
            snprintf(what, sizeof what,
                     "seed %llu case %u engine %d alone (T=%u K=%u B=%u "
                     "n=%u)", (unsigned long long)seed, i, e, c.cs[i].req.T,
                     c.cs[i].req.K, c.cs[i].req.beam, c.cs[i].req.results);
            check_one(&got[i], &cpu[i], &c.cs[i], what);
        }
        /* shuffled, in batches of random widths 1..64 */
        for (int round = 0; round < 2; round++) {
            su_rand_perm(&s, perm, nreq);
            ft_result *tmp = calloc(nreq, sizeof *tmp);
            for (uint32_t i = 0; i < nreq; i++) {
                batch[i] = c.cs[perm[i]].req;
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
                    check_one(&tmp[j], &cpu[perm[j]], &c.cs[perm[j]], what);
                }
                i += w;
            }
            free(tmp);
        }
        ft_engine_close(geng);
    }
    run_dups(&c, &s, seed);
    for (uint32_t i = 0; i < nreq; i++)
        ft_result_free(&got[i]);
    free(got);
    free(batch);
    free(perm);
    su_cases_free(&c);
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
    double t0 = ft_test_now();
    uint64_t seed = 1000;
    if (quick) {
        for (int i = 0; i < 4; i++) {
            su_lib_params lp = {i % 4, 50 + (size_t)i * 60, 2 + i};
            run_lib(seed++, &lp, 6, 6, 20, 40, path);
        }
    } else {
        for (int i = 0; i < 200; i++) {
            su_lib_params lp = {i % 4, 1 + (size_t)(i * 37 % 400), 1 + i % 8};
            run_lib(seed++, &lp, 24, 9, 24, 12, path);
        }
        for (int i = 0; i < 30; i++) {
            su_lib_params lp = {i % 5, 3000, 6};
            run_lib(seed++, &lp, 40, 7, 200, 700, path);
        }
        {
            su_lib_params lp = {0, 0, 3};
            run_lib(seed++, &lp, 8, 4, 8, 8, path);
            lp.nkeys = 1;
            run_lib(seed++, &lp, 8, 4, 8, 8, path);
        }
        {
            su_lib_params lp = {0, 3000, 64};
            run_lib(seed++, &lp, 4, 64, 8, 4096, path);
            lp = (su_lib_params){1, 20000, 3};
            run_lib(seed++, &lp, 3, 3, 4096, 300, path);
            lp = (su_lib_params){4, 30000, 4};
            run_lib(seed++, &lp, 3, 4, 4096, 4096, path);
            /* big ones without the (slow) brute-force reference */
            with_ref = 0;
            lp = (su_lib_params){4, 200000, 6};
            run_lib(seed++, &lp, 4, 6, 4096, 4096, path);
            lp = (su_lib_params){0, 50000, 64};
            run_lib(seed++, &lp, 4, 64, 6, 4096, path);
            with_ref = 1;
        }
    }
    unlink(path);
    printf("gpu_equal_test: ok, %llu cases, %llu GPU runs passed (alone and "
           "in batches of 1..64, 5 engine configs), %llu checked against the "
           "reference too, %llu CPU hits, %llu requests with a duplicate "
           "token refused in batches, %.1f s\n",
           (unsigned long long)n_cases, (unsigned long long)n_runs,
           (unsigned long long)n_ref, (unsigned long long)n_hits,
           (unsigned long long)n_dups, ft_test_now() - t0);
    return 0;
}
