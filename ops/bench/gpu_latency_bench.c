/*
 * gpu_latency_bench.c - a throwaway latency driver until `flashtrie bench`
 * lands: builds a random library of ~1M keys in memory (8 tokens each over
 * a 32768-token vocabulary), then times b=1 searches (and one b=32 batch
 * mode) at BW = K = 100 and 1000, T = 8, on the CPU and the GPU engine,
 * and checks that both engines answer bit for bit alike.
 *
 *   gpu_latency_bench [nkeys] [iterations] [vocabulary]
 */
#include <math.h>
#include <unistd.h>

#include "ft_test.h"

#define BL 8

static int key_cmp(const void *a, const void *b)
{
    return memcmp(a, b, 0) ? 0 : 0;
}

static int cmp_u32x8(const void *a, const void *b)
{
    const uint32_t *x = a, *y = b;
    for (int i = 0; i < BL; i++)
        if (x[i] != y[i])
            return x[i] < y[i] ? -1 : 1;
    return 0;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int same(const ft_result *x, const ft_result *y)
{
    if (x->status != y->status || x->n != y->n)
        return 0;
    for (uint32_t i = 0; i < x->n; i++) {
        const ft_hit *a = &x->hits[i], *b = &y->hits[i];
        if (a->len != b->len || a->value != b->value ||
            memcmp(&a->score, &b->score, 8) || memcmp(&a->sigma, &b->sigma, 4) ||
            memcmp(x->tokens + a->tok_off, y->tokens + b->tok_off, a->len * 4))
            return 0;
    }
    return 1;
}

/* A request that follows real keys: at each position the proposals are the
 * tokens of K/2 target keys at that position (so the beams find paths),
 * then noise, with descending log-probs. */
static void make_req(ft_request *q, uint32_t *tok, float *lp, uint64_t *s,
                     const uint32_t *keys, size_t nk, uint32_t T, uint32_t K,
                     uint32_t B)
{
    size_t ntg = K / 2 ? K / 2 : 1;
    size_t *tg = malloc(ntg * sizeof *tg);
    /* Targets share prefixes: neighbours in sorted order. */
    size_t base = ft_test_rand(s) % nk;
    for (size_t j = 0; j < ntg; j++)
        tg[j] = (base + (ft_test_rand(s) % 64 == 0 ? ft_test_rand(s) : j * 7)) %
                nk;
    for (uint32_t t = 0; t < T; t++) {
        uint32_t n = 0;
        for (size_t j = 0; n < K; j++) {
            uint32_t x = j < ntg ? keys[tg[j] * BL + t]
                                 : (uint32_t)(ft_test_rand(s) % 40000);
            int dup = 0;
            for (uint32_t i = 0; i < n && !dup; i++)
                dup = tok[t * K + i] == x;
            if (!dup)
                tok[t * K + n++] = x;
        }
        float v = 0.0f;
        for (uint32_t k = 0; k < K; k++) {
            v -= (float)(ft_test_rand(s) % 1000) / 4000.0f;
            lp[t * K + k] = v;
        }
    }
    free(tg);
    ft_request_init(q);
    q->T = T;
    q->K = K;
    q->tokens = tok;
    q->logp = lp;
    q->beam = B;
    q->results = B;
}

static void report(const char *what, double *ms, int n)
{
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += ms[i];
    qsort(ms, n, sizeof *ms, cmp_dbl);
    printf("%-34s mean %8.3f  p50 %8.3f  p99 %8.3f ms  (%d runs)\n", what,
           sum / n, ms[n / 2], ms[(int)(n * 0.99) < n ? (int)(n * 0.99) : n - 1],
           n);
}

int main(int argc, char **argv)
{
    size_t nk = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
    uint32_t V = argc > 3 ? (uint32_t)atoi(argv[3]) : 32768;
    int iters = argc > 2 ? atoi(argv[2]) : 200;
    (void)key_cmp;
    uint64_t s = 42;
    uint32_t *keys = malloc(nk * BL * 4);
    for (size_t i = 0; i < nk * BL; i++)
        keys[i] = (uint32_t)(ft_test_rand(&s) % V);
    qsort(keys, nk, BL * 4, cmp_u32x8);
    double t0 = ft_test_now();
    char err[256] = "";
    ft_builder *tb;
    FT_PASS(ft_builder_create(&tb, NULL, err, sizeof err));
    size_t m = 0;
    for (size_t i = 0; i < nk; i++) {
        if (i && memcmp(keys + i * BL, keys + (i - 1) * BL, BL * 4) == 0)
            continue;
        FT_PASS(ft_builder_add(tb, keys + i * BL, BL, i));
        m++;
    }
    char path[] = "/tmp/ft_bench_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    FT_PASS(ft_builder_finish(tb, NULL, path, err, sizeof err));
    ft_builder_destroy(tb);
    ft_index *idx;
    FT_PASS(ft_index_open(&idx, path, 0, err, sizeof err));
    unlink(path);
    printf("library: %zu keys of %d tokens over %u, built in %.2f s\n", m, BL, V, ft_test_now() - t0);

    ft_engine_opts o;
    ft_engine_opts_init(&o);
    ft_engine *cpu, *gpu;
    FT_PASS(ft_engine_open(&cpu, idx, &o, err, sizeof err));
    o.kind = FT_ENGINE_GPU;
    int orc = ft_engine_open(&gpu, idx, &o, err, sizeof err);
    if (orc != FT_OK) {
        printf("SKIP: no GPU (%s)\n", err);
        return FT_TEST_SKIP;
    }
    static const uint32_t cfg[][3] = {{100, 100, 8}, {1000, 1000, 8}};
    double *ms = malloc(sizeof(double) * (size_t)iters);
    for (int c = 0; c < 2; c++) {
        uint32_t B = cfg[c][0], K = cfg[c][1], T = cfg[c][2];
        enum { NR = 32 };
        ft_request q[NR];
        ft_result rcpu[NR], rg[NR];
        uint32_t *tok = malloc((size_t)NR * T * K * 4);
        float *lp = malloc((size_t)NR * T * K * 4);
        for (int i = 0; i < NR; i++) {
            make_req(&q[i], tok + (size_t)i * T * K, lp + (size_t)i * T * K,
                     &s, keys, nk, T, K, B);
            FT_PASS(ft_result_alloc(&rcpu[i], B, T));
            FT_PASS(ft_result_alloc(&rg[i], B, T));
        }
        /* correctness on the big library */
        int bad = 0;
        FT_PASS(ft_engine_search_batch(cpu, q, NR, rcpu));
        FT_PASS(ft_engine_search_batch(gpu, q, NR, rg));
        uint64_t hits = 0;
        for (int i = 0; i < NR; i++) {
            bad += !same(&rcpu[i], &rg[i]);
            hits += rg[i].n;
        }
        for (int i = 0; i < NR; i++) {
            FT_PASS(ft_engine_search(gpu, &q[i], &rg[i]));
            bad += !same(&rcpu[i], &rg[i]);
        }
        printf("BW=K=%u T=%u: %d requests, %llu hits, CPU vs GPU "
               "mismatches: %d\n", B, T, NR, (unsigned long long)hits, bad);
        const char *names[] = {"cpu", "gpu"};
        ft_engine *engs[] = {cpu, gpu};
        for (int e = 0; e < 2; e++) {
            for (int i = 0; i < 5; i++)
                ft_engine_search(engs[e], &q[i % NR], &rg[0]);
            int n = e == 0 && B >= 1000 ? iters / 4 : iters;
            for (int i = 0; i < n; i++) {
                double a = ft_test_now();
                FT_PASS(ft_engine_search(engs[e], &q[i % NR], &rg[0]));
                ms[i] = (ft_test_now() - a) * 1e3;
            }
            char what[80];
            snprintf(what, sizeof what, "%s b=1 BW=K=%u T=%u", names[e], B, T);
            report(what, ms, n);
            n = e == 0 && B >= 1000 ? 4 : 20;
            for (int i = 0; i < n; i++) {
                double a = ft_test_now();
                FT_PASS(ft_engine_search_batch(engs[e], q, NR, rg));
                ms[i] = (ft_test_now() - a) * 1e3;
            }
            snprintf(what, sizeof what, "%s b=32 BW=K=%u T=%u (batch)",
                     names[e], B, T);
            report(what, ms, n);
        }
        for (int i = 0; i < NR; i++) {
            ft_result_free(&rcpu[i]);
            ft_result_free(&rg[i]);
        }
        free(tok);
        free(lp);
    }
    ft_engine_close(gpu);
    ft_engine_close(cpu);
    ft_index_close(idx);
    free(keys);
    free(ms);
    return 0;
}
