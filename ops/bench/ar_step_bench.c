/*
 * ar_step_bench.c - per-step latency of the autoregressive step API
 * (docs/autoregressive.md, docs/BENCHMARKS.md "Autoregressive steps").
 *
 *   ar_step_bench --index INDEX [--engine gpu|cpu] [--beams 256]
 *                 [--vocab 32768] [--iters 200] [--sparse-k 64]
 *                 [--warm-steps N] [--threads N]
 *
 * Decodes from the root with random dense bf16 rows until the beam is full
 * (or 8 steps), then times, from that fixed state, each form of a step:
 * the fused step on dense bf16 rows (no normalisation, log-softmax over the
 * row, over the allowed children), the mask form, the top-k form (k = 8;
 * also after a log-softmax over the row: the normalisation nearly alone),
 * the step on sparse top-K rows, and ft_ar_walk over beams rows that
 * follow keys: 4 tokens from the root (a generate() processor's call on
 * semantic ids) and 1 token from the rows' states (TrieRows.advance).  A GPU session's calls are enqueued
 * on one stream and timed by the host clock around iters calls and one
 * wait ("stream" rows: launch costs included); with CUDA they are also
 * captured once into a CUDA graph, replayed iters times and timed by
 * events ("graph" rows), and the graph's next beams are checked equal to
 * the stream's; the fused step on dense and on sparse rows is also
 * captured GRAPH_STEPS times into one graph ("graph16" rows: a step's time
 * inside a longer graph, such as a decoder's, without a graph launch of
 * its own).  Prints one line per form: microseconds per step.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "flashtrie.h"

#ifdef FT_BENCH_CUDA
#include <cuda_runtime.h>

#include "ft_ar_kernels.h"

/* tune_from_env maps FT_AR_FUSED (0: the launches), FT_AR_CTAS (fewer
 * CTAs), FT_AR_SPLIT and FT_AR_MASK_SPLIT (live beams above which the
 * ranges are shared out), FT_AR_THREADS and FT_AR_MASK_THREADS (the
 * CTAs' size: 512, 1024) and FT_AR_FL_MINB (the whole-row kernel's CTAs
 * an SM: 1 unbounded, 5, 6, 8; else the default 7) and FT_AR_PRE (0: the
 * next beams of a long list cut by the radix passes alone; else the
 * default, the histogram cut) and FT_AR_PDL (0: the one-launch kernels
 * launched plainly; else the default, with programmatic stream
 * serialization where the GPU has it) onto the step's knobs:
 * measurements only (the library reads no environment). */
static void tune_from_env(void)
{
    ft_ark_tuning t = ft_ark_tuning_get();
    const char *v;
    if ((v = getenv("FT_AR_FUSED")) != NULL)
        t.fused = v[0] != '0';
    if ((v = getenv("FT_AR_CTAS")) != NULL && atol(v) >= 2)
        t.ctas = (uint32_t)atol(v);
    if ((v = getenv("FT_AR_SPLIT")) != NULL)
        t.split = (uint32_t)strtoul(v, NULL, 10);
    if ((v = getenv("FT_AR_MASK_SPLIT")) != NULL)
        t.mask_split = (uint32_t)strtoul(v, NULL, 10);
    if ((v = getenv("FT_AR_THREADS")) != NULL)
        t.threads = (uint32_t)strtoul(v, NULL, 10);
    if ((v = getenv("FT_AR_MASK_THREADS")) != NULL)
        t.mask_threads = (uint32_t)strtoul(v, NULL, 10);
    if ((v = getenv("FT_AR_FL_MINB")) != NULL)
        t.fl_minb = (uint32_t)strtoul(v, NULL, 10);
    if ((v = getenv("FT_AR_PRE")) != NULL)
        t.nopre = v[0] == '0';
    if ((v = getenv("FT_AR_PDL")) != NULL)
        t.nopdl = v[0] == '0';
    ft_ark_tuning_set(&t);
}
#endif

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static uint16_t bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

#define CHECK(x)                                                              \
    do {                                                                      \
        int rc_ = (x);                                                        \
        if (rc_ != FT_OK) {                                                   \
            fprintf(stderr, "ar_step_bench: %s: %s (%s)\n", #x,               \
                    ft_strerror(rc_), ar ? ft_ar_error(ar) : "");             \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

typedef struct form {
    const char *name;
    int kind; /* 0 step, 1 mask, 2 top-k, 3 walk, 4 constrain */
    ft_ar_input in;
    void *cout; /* constrain: its rows (in's shape), written apart from in */
    /* walk: rows x len ids (stride WALK_LEN) from from (NULL: the root) */
    const int64_t *ids, *from;
    uint32_t len;
} form;

#define WALK_LEN 4u
#define GRAPH_STEPS 16

static void run_form(ft_ar *ar, form *F, ft_ar_beams *cur, ft_ar_beams *out,
                     ft_ar_hits *hits, uint32_t V, void *d_mask, void *d_te,
                     void *d_tt, void *d_tl, void *stream)
{
    uint32_t B;
    if (F->kind == 0)
        CHECK(ft_ar_step(ar, cur, &F->in, out, hits, stream));
    else if (F->kind == 1)
        CHECK(ft_ar_mask(ar, cur, V, NULL, UINT32_MAX, d_mask, stream));
    else if (F->kind == 2)
        CHECK(ft_ar_topk(ar, cur, &F->in, 8, d_te, d_tt, d_tl, stream));
    else {
        ft_ar_opts o;
        ft_ar_get_opts(&o, ar);
        B = o.beam;
        if (F->kind == 4) { /* every row of the beam: dead ones all -inf */
            CHECK(ft_ar_constrain(ar, cur, &F->in, B, UINT32_MAX, d_mask,
                                  F->cout, stream));
            return;
        }
        /* the states go to out->node (B int64 entries) */
        CHECK(ft_ar_walk(ar, F->ids, B, F->len, WALK_LEN, NULL, F->from, NULL,
                         0, -1, (int64_t *)out->node, stream));
    }
}

/* walk_ids fills rows x WALK_LEN ids that follow the library's keys (a
 * random child at each level; a leaf's row ends in ids no key has). */
static void walk_ids(const ft_index *idx, int64_t *ids, uint32_t rows)
{
    for (uint32_t r = 0; r < rows; r++) {
        uint64_t u = FT_NODE_ROOT;
        for (uint32_t i = 0; i < WALK_LEN; i++) {
            ft_node_children ch;
            int64_t id = (int64_t)0xFFFFFFFFll;
            if (ft_index_children(&ch, idx, u) == FT_OK && ch.count > 0) {
                uint64_t k = next_rand() % ch.count;
                id = ft_index_child_label(idx, &ch, k);
                u = ch.first + k;
            }
            ids[(size_t)r * WALK_LEN + i] = id;
        }
    }
}

/* print_prof prints the one-launch step's phase marks (FT_GK_PROFILE
 * builds: ft_ark_prof_take), CTA 0's microseconds a launch. */
static void print_prof(const uint64_t *pm, int khz)
{
    static const char *name[8] = {"ranges", "anchor", "expand", "barrier",
                                  "cut", "refine", "keep|radix", "rank"};
    double n = (double)pm[8], sum = 0;
    printf("    phases (CTA 0, us a launch, %.0f MHz):", khz / 1e3);
    for (int i = 0; i < 8; i++) {
        double us = (double)pm[i] / n / (khz * 1e3) * 1e6;
        sum += us;
        printf(" %s %.2f", name[i], us);
    }
    printf("; sum %.2f; refine barriers %.2f, cut kept %.2f, radix %.2f a "
           "launch\n", sum, (double)pm[9] / n, (double)pm[10] / n,
           (double)pm[11] / n);
}

#ifdef FT_BENCH_CUDA
/* capture_form captures copies of form F's call on st into *ge: 0, or 1
 * with the reason printed. */
static int capture_form(ft_ar *ar, form *F, int copies, ft_ar_beams *cur,
                        ft_ar_beams *out, ft_ar_hits *hits, uint32_t V,
                        void *d_mask, void *d_te, void *d_tt, void *d_tl,
                        cudaStream_t st, cudaGraphExec_t *ge)
{
    cudaGraph_t g;
    if (cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal) != cudaSuccess)
        return 1;
    for (int k = 0; k < copies; k++)
        run_form(ar, F, cur, out, hits, V, d_mask, d_te, d_tt, d_tl, st);
    if (cudaStreamEndCapture(st, &g) != cudaSuccess ||
        cudaGraphInstantiate(ge, g, 0) != cudaSuccess) {
        fprintf(stderr, "ar_step_bench: graph capture failed: %s\n",
                cudaGetErrorString(cudaGetLastError()));
        return 1;
    }
    cudaGraphDestroy(g); /* the instance does not need it */
    return 0;
}

/* time_graph launches ge warm times, clears the phase marks (so that they
 * count the timed launches only), then times reps launches by events:
 * milliseconds. */
static float time_graph(cudaGraphExec_t ge, cudaStream_t st, int warm,
                        uint32_t reps, cudaEvent_t e0, cudaEvent_t e1)
{
    uint64_t pm[FT_ARK_PROF_N];
    int khz;
    for (int i = 0; i < warm; i++)
        cudaGraphLaunch(ge, st);
    ft_ark_prof_take(pm, &khz);
    cudaEventRecord(e0, st);
    for (uint32_t i = 0; i < reps; i++)
        cudaGraphLaunch(ge, st);
    cudaEventRecord(e1, st);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    return ms;
}
#endif

int main(int argc, char **argv)
{
    const char *index = NULL, *engine = "gpu";
    uint32_t B = 256, V = 32768, iters = 200, SK = 64, warm = 0, threads = 0;
#ifdef FT_BENCH_CUDA
    tune_from_env();
#endif
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--index"))
            index = argv[i + 1];
        else if (!strcmp(argv[i], "--engine"))
            engine = argv[i + 1];
        else if (!strcmp(argv[i], "--beams"))
            B = (uint32_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--vocab"))
            V = (uint32_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--iters"))
            iters = (uint32_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--warm-steps"))
            warm = (uint32_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--sparse-k"))
            SK = (uint32_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads"))
            threads = (uint32_t)atoi(argv[i + 1]);
        else {
            fprintf(stderr, "ar_step_bench: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (index == NULL || B == 0 || V == 0 || iters == 0 || SK == 0 || SK > V) {
        fprintf(stderr, "usage: ar_step_bench --index INDEX [--engine gpu|cpu] "
                "[--beams B] [--vocab V] [--iters N] [--sparse-k K] "
                "[--threads N]\n");
        return 2;
    }
    ft_ar *ar = NULL;
    char err[256];
    ft_index *idx;
    if (ft_index_open(&idx, index, FT_OPEN_NO_VERIFY, err, sizeof err)) {
        fprintf(stderr, "ar_step_bench: %s\n", err);
        return 1;
    }
    ft_ar_opts o;
    ft_ar_opts_init(&o);
    o.kind = strcmp(engine, "cpu") ? FT_ENGINE_GPU : FT_ENGINE_CPU;
    o.beam = B;
    o.results = B;
    o.max_width = V;
    o.threads = threads;
    int rc = ft_ar_open(&ar, idx, &o, err, sizeof err);
    if (rc != FT_OK) {
        fprintf(stderr, "ar_step_bench: %s\n", err);
        return rc == FT_ENODEV || rc == FT_ENOTSUP ? 77 : 1;
    }
    size_t cells = (size_t)B * V;
    uint16_t *h = malloc(cells * 2);
    uint32_t *sid = malloc((size_t)B * SK * 4);
    float *slp = malloc((size_t)B * SK * 4);
    if (!h || !sid || !slp)
        return 1;
    /* logits-like rows: a few large, most small */
    for (size_t i = 0; i < cells; i++) {
        double u = (double)(next_rand() >> 11) / 9007199254740992.0;
        h[i] = bf16((float)(-12.0 * u * u));
    }
    for (size_t r = 0; r < B; r++)
        for (uint32_t k = 0; k < SK; k++) {
            sid[r * SK + k] = (uint32_t)(next_rand() % V);
            slp[r * SK + k] = -(float)k * 0.1f;
        }
    void *d_rows, *d_ids, *d_lp, *d_mask, *d_te, *d_tt, *d_tl, *d_cout;
    CHECK(ft_ar_alloc(ar, &d_rows, cells * 2));
    CHECK(ft_ar_alloc(ar, &d_cout, cells * 2));
    CHECK(ft_ar_alloc(ar, &d_ids, (size_t)B * SK * 4));
    CHECK(ft_ar_alloc(ar, &d_lp, (size_t)B * SK * 4));
    CHECK(ft_ar_alloc(ar, &d_mask, (size_t)B * ((V + 31) / 32) * 4));
    CHECK(ft_ar_alloc(ar, &d_te, (size_t)B * 8 * 4));
    CHECK(ft_ar_alloc(ar, &d_tt, (size_t)B * 8 * 4));
    CHECK(ft_ar_alloc(ar, &d_tl, (size_t)B * 8 * 4));
    CHECK(ft_ar_memcpy(ar, d_rows, h, cells * 2, 1));
    CHECK(ft_ar_memcpy(ar, d_ids, sid, (size_t)B * SK * 4, 1));
    CHECK(ft_ar_memcpy(ar, d_lp, slp, (size_t)B * SK * 4, 1));
    ft_ar_beams bs[3];
    ft_ar_hits hits;
    for (int i = 0; i < 3; i++)
        CHECK(ft_ar_beams_alloc(ar, &bs[i]));
    CHECK(ft_ar_hits_alloc(ar, &hits));
    ft_ar_input dense;
    memset(&dense, 0, sizeof dense);
    dense.form = FT_AR_IN_DENSE;
    dense.dtype = FT_AR_IN_BF16;
    dense.width = V;
    dense.logp = d_rows;
    /* fill the beam */
    CHECK(ft_ar_reset(ar, &bs[0], NULL));
    uint32_t m = 1, t = 0;
    /* --warm-steps N: exactly N steps (while beams live); default: until
     * the beam is full, at most 8 */
    for (; warm ? (t < warm && m > 0) : (t < 8 && m < B); t++) {
        CHECK(ft_ar_step(ar, &bs[t & 1], &dense, &bs[(t + 1) & 1], &hits, NULL));
        CHECK(ft_ar_memcpy(ar, &m, bs[(t + 1) & 1].count, 4, 0));
    }
    ft_ar_beams *cur = &bs[t & 1], *out = &bs[2];
    ft_ar_opts got;
    ft_ar_get_opts(&got, ar);
    char thr[32] = "";
    if (ft_ar_kind(ar) == FT_ENGINE_CPU)
        snprintf(thr, sizeof thr, " (%u threads)", got.threads);
    printf("ar_step_bench: %s%s, %llu keys, %u beams live after %u steps, "
           "V %u, %u iterations\n", ft_ar_kind(ar) == FT_ENGINE_GPU ? "GPU" : "CPU",
           thr, (unsigned long long)ft_index_keys(idx), m, t, V, iters);
    /* the walk's rows: 4 tokens along keys from the root; the states
     * after 3 of them, to walk the 4th from */
    int64_t *hw = malloc((size_t)B * WALK_LEN * 8);
    void *d_walk, *d_from;
    CHECK(hw ? FT_OK : FT_ENOMEM);
    walk_ids(idx, hw, B);
    CHECK(ft_ar_alloc(ar, &d_walk, (size_t)B * WALK_LEN * 8));
    CHECK(ft_ar_alloc(ar, &d_from, (size_t)B * 8));
    CHECK(ft_ar_memcpy(ar, d_walk, hw, (size_t)B * WALK_LEN * 8, 1));
    CHECK(ft_ar_walk(ar, d_walk, B, WALK_LEN - 1, WALK_LEN, NULL, NULL, NULL, 0,
                     -1, d_from, NULL));
    form forms[10];
    memset(forms, 0, sizeof forms);
    forms[0].name = "step dense bf16";
    forms[0].in = dense;
    forms[1].name = "step dense bf16 log-softmax(row)";
    forms[1].in = dense;
    forms[1].in.norm = FT_AR_NORM_FULL;
    forms[2].name = "step dense bf16 log-softmax(allowed)";
    forms[2].in = dense;
    forms[2].in.norm = FT_AR_NORM_ALLOWED;
    forms[3].name = "mask";
    forms[3].kind = 1;
    forms[4].name = "top-8 dense bf16";
    forms[4].kind = 2;
    forms[4].in = dense;
    forms[5].name = "step sparse top-K";
    forms[5].in.form = FT_AR_IN_SPARSE;
    forms[5].in.width = SK;
    forms[5].in.ids = d_ids;
    forms[5].in.logp = d_lp;
    forms[6].name = "walk 4 tokens from the root";
    forms[6].kind = 3;
    forms[6].ids = d_walk;
    forms[6].len = WALK_LEN;
    forms[7].name = "walk 1 token from the rows' states";
    forms[7].kind = 3;
    forms[7].ids = (const int64_t *)d_walk + (WALK_LEN - 1);
    forms[7].from = d_from;
    forms[7].len = 1;
    forms[8].name = "constrain dense bf16 (mask applied)";
    forms[8].kind = 4;
    forms[8].in = dense;
    forms[8].cout = d_cout;
    /* the whole-row normalisation nearly alone: top-k of a beam's
     * children (few, mid-decode) after its lse */
    forms[9].name = "top-8 dense bf16 log-softmax(row)";
    forms[9].kind = 2;
    forms[9].in = dense;
    forms[9].in.norm = FT_AR_NORM_FULL;
    uint32_t check_m;
    for (int f = 0; f < 10; f++) {
        form *F = &forms[f];
        for (uint32_t i = 0; i < 5; i++)
            run_form(ar, F, cur, out, &hits, V, d_mask, d_te, d_tt, d_tl, NULL);
        CHECK(ft_ar_memcpy(ar, &check_m, out->count, 4, 0)); /* wait */
        double start = now_us();
        for (uint32_t i = 0; i < iters; i++)
            run_form(ar, F, cur, out, &hits, V, d_mask, d_te, d_tt, d_tl, NULL);
        CHECK(ft_ar_memcpy(ar, &check_m, out->count, 4, 0)); /* wait */
        double us = (now_us() - start) / iters;
        printf("  %-38s stream %9.2f us/step", F->name, us);
        if (F->kind == 0)
            printf("  (next beams %u)", check_m);
        printf("\n");
    }
#ifdef FT_BENCH_CUDA
    if (ft_ar_kind(ar) == FT_ENGINE_GPU) {
        cudaStream_t st;
        cudaGraphExec_t ge;
        cudaEvent_t e0, e1;
        cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
        cudaEventCreate(&e0);
        cudaEventCreate(&e1);
        uint64_t *ref = malloc((size_t)B * 8), *got = malloc((size_t)B * 8);
        for (int f = 0; f < 10; f++) {
            form *F = &forms[f];
            if (capture_form(ar, F, 1, cur, out, &hits, V, d_mask, d_te, d_tt,
                             d_tl, st, &ge))
                return 1;
            if (F->kind == 0) { /* the graph's answer equals the stream's */
                uint32_t nref, ngot;
                CHECK(ft_ar_step(ar, cur, &F->in, out, &hits, NULL));
                CHECK(ft_ar_memcpy(ar, &nref, out->count, 4, 0));
                CHECK(ft_ar_memcpy(ar, ref, out->node, (size_t)nref * 8, 0));
                cudaMemset(out->node, 0xff, (size_t)B * 8);
                cudaMemset(out->count, 0xff, 4);
                cudaDeviceSynchronize(); /* st does not wait for the legacy stream */
                cudaGraphLaunch(ge, st);
                cudaStreamSynchronize(st);
                CHECK(ft_ar_memcpy(ar, &ngot, out->count, 4, 0));
                CHECK(ft_ar_memcpy(ar, got, out->node, (size_t)ngot * 8, 0));
                /* only the first count entries are the step's */
                if (nref != ngot || memcmp(ref, got, (size_t)nref * 8)) {
                    fprintf(stderr, "ar_step_bench: graph replay differs\n");
                    return 1;
                }
            }
            float ms = time_graph(ge, st, 5, iters, e0, e1);
            printf("  %-38s graph  %9.2f us/step\n", F->name, ms * 1e3 / iters);
            uint64_t pm[FT_ARK_PROF_N];
            int khz;
            if (ft_ark_prof_take(pm, &khz) == 0 && pm[8] > 0 && khz > 0)
                print_prof(pm, khz);
            cudaGraphExecDestroy(ge);
            if (f == 0 || f == 5) {
                /* the same step GRAPH_STEPS times in one graph: a step's
                 * time inside a longer graph (a decoder's), without one
                 * graph launch a step */
                if (capture_form(ar, F, GRAPH_STEPS, cur, out, &hits, V,
                                 d_mask, d_te, d_tt, d_tl, st, &ge))
                    return 1;
                uint32_t reps = (iters + GRAPH_STEPS - 1) / GRAPH_STEPS;
                ms = time_graph(ge, st, 3, reps, e0, e1);
                printf("  %-38s graph%-2d %8.2f us/step\n", F->name,
                       GRAPH_STEPS, ms * 1e3 / (reps * GRAPH_STEPS));
                cudaGraphExecDestroy(ge);
            }
        }
        free(ref);
        free(got);
    }
#endif
    for (int i = 0; i < 3; i++)
        ft_ar_beams_free(ar, &bs[i]);
    ft_ar_hits_free(ar, &hits);
    void *p[] = {d_rows, d_ids, d_lp, d_mask, d_te, d_tt, d_tl, d_walk, d_from,
                 d_cout};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        ft_ar_free(ar, p[i]);
    free(hw);
    ft_ar_close(ar);
    ft_index_close(idx);
    free(h);
    free(sid);
    free(slp);
    return 0;
}
