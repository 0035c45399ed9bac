/*
 * gpu_engine.c - the host side of the GPU engine.
 *
 * At open: pick the device, copy the trie sections the search walks (not
 * the values nor terminal ranks: values stay in host memory and are
 * attached by ft_result_put_hit) to device memory once, and allocate every
 * arena a search needs, so that a search allocates nothing.
 *
 * Slots.  A batch position is a slot; each slot owns its arenas, sized from
 * the engine options:
 *   bmax = opts.max_beam (default and cap FT_MAX_BEAM; the validator
 *          rejects larger beams), kmax = opts.max_k (default FT_MAX_K),
 *          tmax = opts.max_t (default FT_MAX_T);
 *   candidates: cap = min(bmax * kmax, widest trie level) entries, for the
 *          next list (52 bytes each: key, node, child range, theta_sent
 *          cut) and for the terminal list (16 bytes each) (every
 *          candidate of one step is a distinct node of one depth, so the
 *          widest level bounds them; overflow is impossible, checked anyway);
 *   beams 48 B x bmax, history 4 B x bmax x tmax, running results
 *          2 x 32 B x 4096, hash tables 12 B x tmax x pow2(2 kmax) (the
 *          entry and its log-prob beside it).
 * With the defaults that is about 9 MB + 68 B x cap per slot, and
 * opts.max_batch (default 32) slots.  When max_k or max_t are set below the
 * the specification's maxima, one more slot sized for the maxima takes, alone,
 * the requests that do not fit the others: a valid request is never refused.
 *
 * A search: take the requests prepared by router/ (fti_prepared), pack
 * descriptors, proposal rows and zeroed step counters into one pinned
 * buffer, one copy in, one cooperative launch for the whole batch (all T
 * steps), one copy out, then assemble the results.  A CUDA error marks the
 * engine failed; its requests get FT_ECUDA, never a partial result.
 *
 * Steps (a shard group drives them, see "steps" below and
 * docs/gpu-engine.md): the same packing and assembly around one launch of
 * the step kernel per decode step, all on the engine's stream.
 */
#include "search.h"

#ifndef FT_HAVE_CUDA

int fti_engine_gpu_index_refs(const ft_engine *eng)
{
    (void)eng;
    return 0;
}

int fti_engine_values_attached(const ft_engine *eng)
{
    (void)eng;
    return 0;
}

int fti_engine_gpu_share(ft_engine *eng, uint32_t ways)
{
    (void)eng;
    (void)ways;
    return FT_ENOTSUP;
}

int fti_engine_gpu_bind_lists(ft_engine *eng, uint64_t *list0, uint64_t *list1,
                              size_t cap)
{
    (void)eng;
    (void)list0;
    (void)list1;
    (void)cap;
    return FT_ENOTSUP;
}

int fti_engine_gpu_xgrid(ft_engine *eng, int *use, int *full)
{
    (void)eng;
    *use = *full = 0;
    return FT_ENOTSUP;
}

int fti_engine_gpu_steps_all(ft_engine *eng, const fti_gpu_xbar *xb)
{
    (void)eng;
    (void)xb;
    return FT_ENOTSUP;
}

int fti_engine_gpu_nccl_kernel(ft_engine *eng, char *why, size_t len)
{
    (void)eng;
    if (len)
        snprintf(why, len, "this build has no CUDA");
    return 0;
}

int fti_engine_gpu_forest(ft_engine *eng, ft_engine *const *shards, size_t n,
                          const uint64_t *key_base, char *why, size_t len)
{
    (void)eng;
    (void)shards;
    (void)n;
    (void)key_base;
    if (len)
        snprintf(why, len, "this build has no CUDA");
    return FT_ENOTSUP;
}

int fti_gpu_memory(uint64_t *used, uint64_t *total, int device)
{
    (void)device;
    *used = *total = 0;
    return FT_ENOTSUP;
}

int ft_gpu_engine_open(ft_engine *eng, char *errbuf, size_t errlen)
{
    (void)eng;
    fti_errf(errbuf, errlen, "this build has no GPU engine (built without "
                             "CUDA)");
    return FT_ENOTSUP;
}

#else

#include <cuda_runtime.h>
#include <pthread.h>

#include "ft_kernels.h"

#include "flashtrie/internal/check.h"

#define ALIGN16(x) (((x) + 15u) & ~(size_t)15u)

typedef struct gpu_slot {
    ft_gk_slot d;
    uint32_t kmax;
} gpu_slot;

/* gpu_index is one device copy of an index's trie and its derived tables
 * (root map, child table, child map), shared by every engine of the
 * process that opens the same index on the same GPU with the same child
 * map threshold: R replicas of an engine use one copy of the index and R
 * sets of search buffers.  Counted; the last engine to close frees it.
 * The list is short (an index per generation and device) and is touched
 * only at open and close. */
typedef struct gpu_index {
    struct gpu_index *next;
    int device;
    uint64_t index_uid; /* ft_index.uid */
    uint32_t cmap_req; /* the child map threshold asked for */
    unsigned refs;
    void *dsec[FT_SEC_COUNT];
    ft_trie_view view;
    uint32_t *d_root_map;
    uint32_t root_n;
    uint64_t *d_ctab;
    size_t ctab_bytes;
    uint64_t *d_cmap;
    uint64_t cmap_mask;
    uint32_t cmap_min;
    size_t cmap_bytes;
} gpu_index;

static pthread_mutex_t gpu_index_mu = PTHREAD_MUTEX_INITIALIZER;
static gpu_index *gpu_index_list;

typedef struct gpu_engine {
    int device;
    gpu_index *xidx; /* the shared device copy of the index, or NULL while
                      * this engine still owns what it uploaded */
    cudaStream_t stream;
    ft_trie_view view;          /* device pointers */
    void *dsec[FT_SEC_COUNT];
    uint32_t nslots;            /* batch slots (max_batch) */
    uint32_t bmax, kmax, tmax;
    gpu_slot *slots;            /* nslots (+1 big slot) */
    int has_big;
    unsigned char *h_in, *d_in; /* pinned / device input region */
    unsigned char *hd_in; /* h_in as the device sees it, or NULL */
    size_t in_cap;
    size_t mapped_in_max; /* mapped_input_max in bytes (0: never) */
    uint32_t fuse_term;   /* ft_engine_opts.fuse_term (UINT32_MAX: off) */
    /* The lists a fused launch keeps its odd steps in: slot 1's (idle
     * while a launch of one request runs: launches on one engine's stream
     * never overlap), or with one slot alt's, a slot of its own (NULL: no
     * fused launches) */
    const gpu_slot *fuse_lists;
    gpu_slot alt;
    unsigned char *h_out, *d_out;
    unsigned char *hd_out; /* h_out as the device sees it: the kernels write
                            * results straight to the host (no copy out);
                            * NULL where the host memory cannot be mapped */
    size_t out_cap;
    /* The launches' completion word (ft_gk_params.done): pinned host
     * memory, as the device sees it, and the kernel's counter; NULL where
     * the host memory cannot be mapped (then the wait is a stream
     * synchronisation) */
    uint32_t *h_done, *hd_done, *d_done_ctr;
    uint32_t done_seq;
    ft_gk_graphs *graphs; /* the search kernel's launch graphs, or NULL */
    uint64_t *d_prof;
    uint32_t *d_root_map;       /* label -> 1 + root child index */
    uint64_t *d_ctab;           /* child table, or NULL (fti_gpu_child_table) */
    size_t ctab_bytes;
    uint64_t *d_cmap;           /* child map, or NULL (child_map) */
    uint64_t cmap_mask;
    uint32_t cmap_min;
    size_t cmap_bytes;
    uint32_t root_n;
    /* A forest (fti_engine_gpu_forest): its trees on the device, their
     * count, every key of them, its root map (label -> tree and child)
     * and a root range of its children's count; d_forest NULL: none. */
    ft_gk_tree *d_forest;
    uint32_t nforest;
    uint64_t forest_keys;
    int forest_values; /* every tree of the forest has its values on the
                        * device */
    uint32_t value_bits; /* the index's (values_upload) */
    int use_values;      /* ft_engine_opts.values_on_device: results take
                          * their values from the device copy, if any */
    uint32_t *d_froot_map;
    uint32_t froot_n;
    uint64_t *d_froot_tab;      /* without a map: the sorted root table */
    uint32_t froot_cnt;
    ft_child_range froot;
    /* This engine's trie is searched by another engine's forest: its
     * slots are gone, it answers nothing itself. */
    int forest_member;
    size_t hash_bytes;          /* per slot of kmax/tmax; big slot aside */
    uint32_t epoch;
    int grid, block;
    size_t smem;
    uint64_t wmax;
    /* Shard-group steps (include/flashtrie.h, "engine steps"): the step
     * kernel's launch shape, the exchange lists in device memory (send
     * max_batch x max_beam keys, recv that times the largest shard count
     * seen), and the batch in flight. */
    int sgrid, sblock, sgrid_use; /* sgrid_use: ft_gpu_engine_share */
    size_t ssmem;
    /* the shard kernel (fti_engine_gpu_steps_all): its resident CTAs
     * (0: unusable) and this engine's share of them */
    int xgrid, xblock, xgrid_use;
    size_t xsmem;
    uint64_t *d_send, *d_recv;
    size_t send_cap, recv_cap;   /* keys */
    const fti_prepared *sreq[FTI_ENGINE_CHUNK];
    size_t sn, slen, sout;
    uint32_t shard, nshards, stmax;
    uint32_t sspread;            /* the batch's ft_gk_params.spread */
    uint32_t snext;              /* the step the next expand must be */
    int skept;                   /* keep(snext - 1) was called */
    uint64_t *blist[2];          /* ft_gpu_engine_bind_lists: shared lists
                                  * of one GPU's group, by step parity */
    size_t blist_cap;            /* keys of each */
    ft_gk_params sprm;
    uint32_t gsel_min;          /* lists longer than this: grid selection */
    int gsel_forced;            /* gsel_min came from the options */
    uint32_t pair_items;        /* ft_engine_opts.expand_pair_items */
    uint32_t pf_ranges;         /* ft_engine_opts.prefetch: 6 (child table
                                 * entries to L1, the next level's lines
                                 * to L2) or 0 (off) */
    uint32_t round1;            /* ft_engine_opts.round1 (0: never) */
    uint32_t local_max;         /* ft_engine_opts.select_local_max (0:
                                 * never) */
    uint32_t local_cache;       /* ft_engine_opts.select_local_cache */
    uint32_t round1_items;      /* ft_engine_opts.round1_items, or eight
                                 * per warp of the grid for its 0 */
    uint32_t lazy_min;          /* batches this large compute child ranges
                                 * of the selected beams only */
    /* ft_engine_opts.timing: host-side phase timings of launches, per
     * (beam of the first request, requests in the launch). */
    int timing;
    /* fti_engine_run_checked: the check to call while the launch runs, and
     * whether results it failed are left alone */
    fti_engine_check check;
    void *check_arg;
    int skip_failed;
    cudaEvent_t ev[4];
    struct gpu_timing {
        uint32_t beam, n;
        uint64_t calls;
        double sum[9]; /* the phases of gpu_timing_report, in its order */
    } tm[16];
    uint32_t ntm;
#ifdef FT_GK_PROFILE
    /* [0]: launches of one request, [1]: of more */
    double prof_a[2][FT_MAX_T], prof_w[2][FT_MAX_T], prof_g[2][FT_MAX_T];
    double prof_b[2][FT_MAX_T];
    double prof_len[2][FT_MAX_T][2]; /* request 0's next / terminal lists */
    double prof_s[FT_MAX_T][8]; /* the selection's finer marks, b = 1 */
    double prof_n[FT_MAX_T][5]; /* local narrowing: read, passes,
                                 * survivors, passes run, launches */
    double prof_gt[2][5]; /* FT_GK_PROF_GT: from the first CTA's entry */
    uint64_t prof_gtn[2];
    uint64_t prof_sn;
                                /* cycles summed per step and phase */
    uint64_t prof_launches[2];
    uint32_t prof_t[2];
#endif
} gpu_engine;

static uint32_t pow2_at_least(uint32_t x)
{
    uint32_t p = 32;
    while (p < x)
        p <<= 1;
    return p;
}

/* Widest level of the trie (depth >= 1): bounds the candidates of a step. */
static uint64_t widest_level(const ft_trie *t)
{
    const ft_trie_view *v = &t->view;
    uint64_t a = 0, b = 1, w = 1;
    for (uint32_t d = 0; d <= t->max_depth + 1 && a < b; d++) {
        ft_child_range ca = ft_children(v, a);
        ft_child_range cb = ft_children(v, b - 1);
        uint64_t na = ca.first, nb = cb.first + cb.deg;
        if (nb <= na)
            break;
        if (nb - na > w)
            w = nb - na;
        a = na;
        b = nb;
    }
    return w;
}

static size_t slot_hash_entries(uint32_t kmax, uint32_t tmax)
{
    return (size_t)tmax * pow2_at_least(2 * kmax);
}

static int slot_alloc(gpu_engine *g, gpu_slot *s, uint32_t kmax,
                      uint32_t tmax)
{
    ft_gk_slot *d = &s->d;
    uint64_t cap = (uint64_t)g->bmax * kmax;
    if (cap > g->wmax)
        cap = g->wmax;
    d->cap_cand = cap;
    d->bmax = g->bmax;
    d->tmax = tmax;
    s->kmax = kmax;
    FT_CUDA_CHECK(cudaMalloc((void **)&d->cand_key, cap * 8));
    FT_CUDA_CHECK(cudaMalloc((void **)&d->cand_node, cap * 8));
    FT_CUDA_CHECK(cudaMalloc((void **)&d->cand_cr,
                             cap * sizeof(ft_child_range)));
    FT_CUDA_CHECK(cudaMalloc((void **)&d->cand_kcut, cap * 4));
    FT_CUDA_CHECK(cudaMalloc((void **)&d->term_key, cap * 8));
    FT_CUDA_CHECK(cudaMalloc((void **)&d->term_node, cap * 8));
    FT_CUDA_CHECK(cudaMalloc((void **)&d->beam_cr,
                             (size_t)g->bmax * sizeof(ft_child_range)));
    FT_CUDA_CHECK(cudaMalloc((void **)&d->beam_sigma, (size_t)g->bmax * 4));
    FT_CUDA_CHECK(cudaMalloc((void **)&d->beam_kcut, (size_t)g->bmax * 4));
    FT_CUDA_CHECK(cudaMalloc((void **)&d->beam_cstart, (size_t)g->bmax * 4));
    FT_CUDA_CHECK(cudaMalloc((void **)&d->hist, (size_t)g->bmax * tmax * 4));
    FT_CUDA_CHECK(cudaMalloc((void **)&d->beam_rank, (size_t)g->bmax * 4));
    FT_CUDA_CHECK(cudaMalloc((void **)&d->sel_idx, (size_t)g->bmax * 4));
    FT_CUDA_CHECK(cudaMalloc((void **)&d->r1_cs, ((size_t)g->bmax + 1) * 4));
    FT_CUDA_CHECK(cudaMalloc((void **)&d->r1_kc, (size_t)g->bmax * 4));
    FT_CUDA_CHECK(cudaMalloc((void **)&d->gsel, 2 * FT_GK_GSEL_WORDS * 4));
    FT_CUDA_CHECK(cudaMalloc((void **)&d->surv_key, 2 * FT_GK_LIST_MAX * 8));
    FT_CUDA_CHECK(cudaMalloc((void **)&d->surv_idx, 2 * FT_GK_LIST_MAX * 4));
    for (int i = 0; i < 2; i++)
        FT_CUDA_CHECK(cudaMalloc(&d->run[i],
                                 FT_GK_LIST_MAX * sizeof(ft_gk_hit)));
    size_t he = slot_hash_entries(kmax, tmax);
    FT_CUDA_CHECK(cudaMalloc((void **)&d->hash, he * 8));
    FT_CUDA_CHECK(cudaMemset(d->hash, 0, he * 8));
    FT_CUDA_CHECK(cudaMalloc((void **)&d->hash_lp, he * 4));
    return FT_OK;
}

static void slot_free(gpu_slot *s)
{
    ft_gk_slot *d = &s->d;
    cudaFree(d->cand_key);
    cudaFree(d->cand_node);
    cudaFree(d->cand_cr);
    cudaFree(d->cand_kcut);
    cudaFree(d->term_key);
    cudaFree(d->term_node);
    cudaFree(d->beam_cr);
    cudaFree(d->beam_sigma);
    cudaFree(d->beam_kcut);
    cudaFree(d->beam_cstart);
    cudaFree(d->hist);
    cudaFree(d->beam_rank);
    cudaFree(d->sel_idx);
    cudaFree(d->r1_cs);
    cudaFree(d->r1_kc);
    cudaFree(d->gsel);
    cudaFree(d->surv_key);
    cudaFree(d->surv_idx);
    cudaFree(d->run[0]);
    cudaFree(d->run[1]);
    cudaFree(d->hash);
    cudaFree(d->hash_lp);
    memset(d, 0, sizeof *d);
}

/* Bytes of input and output one request of a slot can need. */
static size_t req_in_bytes(uint32_t kmax, uint32_t tmax)
{
    return ALIGN16(sizeof(ft_gk_req)) + ALIGN16((size_t)tmax * kmax * 4) * 2 +
           ALIGN16((size_t)tmax * sizeof(ft_gk_step));
}

static size_t req_out_bytes(uint32_t tmax)
{
    return ALIGN16(sizeof(ft_gk_out_head) +
                   (size_t)FT_GK_LIST_MAX * sizeof(ft_gk_out_hit) +
                   (size_t)FT_GK_LIST_MAX * tmax * 4);
}

#ifdef FT_GK_PROFILE
/* A line of the kernel's chain profile, at WARN like the other profile
 * lines (ft_gk_prof_chain_print). */
static void prof_line(const char *line)
{
    FT_WARN("%s", line);
}
#endif

static void index_release(gpu_engine *g);

/* slots_release frees the device arenas of every slot (and of the fused
 * launches' second lists when the engine has its own); the engine then
 * has no slot (the slots array itself stays, for gpu_close to free). */
static void slots_release(gpu_engine *g)
{
    for (uint32_t i = 0; g->slots && i < g->nslots + (uint32_t)g->has_big;
         i++)
        slot_free(&g->slots[i]);
    if (g->fuse_lists == &g->alt)
        slot_free(&g->alt);
    g->fuse_lists = NULL;
    g->nslots = 0;
    g->has_big = 0;
}

static void gpu_close(ft_engine *eng)
{
    gpu_engine *g = eng->impl;
    if (g == NULL)
        return;
    cudaSetDevice(g->device);
    if (g->timing)
        for (int i = 0; i < 4; i++)
            cudaEventDestroy(g->ev[i]);
#ifdef FT_GK_PROFILE
    int khz = 0;
    cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, g->device);
    for (int c = 0; c < 2; c++) {
        if (!g->prof_launches[c])
            continue;
        double nl = (double)g->prof_launches[c];
        double us = khz ? 1e3 / khz / nl : 0;
        /* A profile build exists to print this: at WARN, so that the
         * default log level shows it. */
        FT_WARN("gpu profile over %llu launches of %s (us per launch, CTA "
                "0's view, clock %d MHz; lists: request 0's mean "
                "candidates):", (unsigned long long)g->prof_launches[c],
                c ? "2+ requests" : "1 request", khz / 1000);
        for (uint32_t t = 0; t < g->prof_t[c]; t++)
            FT_WARN("  step %2u: expand %.2f  wait %.2f  grid select %.2f  "
                    "select %.2f (select ends with a grid.sync)  lists "
                    "next %.0f term %.0f", t, g->prof_a[c][t] * us,
                    g->prof_w[c][t] * us, g->prof_g[c][t] * us,
                    g->prof_b[c][t] * us, g->prof_len[c][t][0] / nl,
                    g->prof_len[c][t][1] / nl);
    }
    for (int c = 0; c < 2; c++) {
        if (!g->prof_gtn[c])
            continue;
        double nl = (double)g->prof_gtn[c] * 1e3;
        FT_WARN("gpu launch profile over %llu unfused launches of %s (us "
                "from the first CTA's entry, %%globaltimer): last CTA's "
                "entry %.2f, CTA 0's first mark %.2f, last CTA's end of "
                "step 0's expansion %.2f, of its token tables %.2f, last "
                "CTA's exit %.2f", (unsigned long long)g->prof_gtn[c],
                c ? "2+ requests" : "1 request", g->prof_gt[c][0] / nl,
                g->prof_gt[c][3] / nl, g->prof_gt[c][1] / nl,
                g->prof_gt[c][2] / nl, g->prof_gt[c][4] / nl);
    }
    ft_gk_prof_chain_print(khz, prof_line);
    if (g->prof_sn) {
        double su = khz ? 1e3 / khz / (double)g->prof_sn : 0;
        FT_WARN("gpu selection profile over %llu b=1 launches (us; "
                "CTA 0 next list: load/narrow, sort, list end, lazy "
                "ranges, beams; CTA 1 terminal: merge, backtrace):",
                (unsigned long long)g->prof_sn);
        for (uint32_t t = 0; t < g->prof_t[0]; t++)
            FT_WARN("  step %2u: load %.2f  sort %.2f  end %.2f  lazy %.2f  "
                    "beams %.2f | term %.2f  backtrace %.2f", t,
                    g->prof_s[t][0] * su, g->prof_s[t][1] * su,
                    g->prof_s[t][2] * su, g->prof_s[t][3] * su,
                    g->prof_s[t][4] * su, g->prof_s[t][5] * su,
                    g->prof_s[t][6] * su);
        for (uint32_t t = 0; t < g->prof_t[0]; t++) {
            double nn = g->prof_n[t][4];
            if (nn == 0)
                continue;
            double nu = khz ? 1e3 / khz / nn : 0;
            FT_WARN("  step %2u: local narrowing in %.0f of %llu launches: "
                    "first read %.2f  passes %.2f (%.2f of them)  survivors "
                    "%.2f", t, nn, (unsigned long long)g->prof_sn,
                    g->prof_n[t][0] * nu, g->prof_n[t][1] * nu,
                    g->prof_n[t][3] / nn, g->prof_n[t][2] * nu);
        }
    }
#endif
    slots_release(g);
    free(g->slots);
    index_release(g);
    cudaFree(g->d_forest);
    cudaFree(g->d_froot_map);
    cudaFree(g->d_froot_tab);
    cudaFree(g->d_in);
    cudaFree(g->d_out);
    cudaFree(g->d_prof);
    cudaFree(g->d_send);
    cudaFree(g->d_recv);
    cudaFreeHost(g->h_in);
    cudaFreeHost(g->h_out);
    cudaFreeHost(g->h_done);
    cudaFree(g->d_done_ctr);
    ft_gk_graphs_free(g->graphs);
    if (g->stream)
        cudaStreamDestroy(g->stream);
    free(g);
    eng->impl = NULL;
}

static int gpu_run(ft_engine *eng, const fti_prepared *const *reqs,
                   ft_result *const *res, size_t n);
static cudaError_t abandon_steps(gpu_engine *g);
static void gpu_timing_report(const ft_engine *eng, char *buf, size_t len);
static int gpu_run_checked(ft_engine *eng, const fti_prepared *const *reqs,
                           ft_result *const *res, size_t n,
                           fti_engine_check check, void *arg);
static void *gpu_stream(ft_engine *eng);
static int gpu_step_begin(ft_engine *eng, const fti_prepared *const *reqs,
                          size_t n, uint32_t shard, uint32_t nshards);
static int gpu_step_buffers(ft_engine *eng, uint64_t **send, uint64_t **recv,
                            size_t *len);
static int gpu_step_expand(ft_engine *eng, uint32_t t);
static int gpu_step_keep(ft_engine *eng, uint32_t t);
static int gpu_step_finish(ft_engine *eng, ft_result *const *res);

static const ft_engine_ops gpu_ops = {
    .kind = FT_ENGINE_GPU,
    .run = gpu_run,
    .run_checked = gpu_run_checked,
    .step_begin = gpu_step_begin,
    .step_buffers = gpu_step_buffers,
    .step_expand = gpu_step_expand,
    .step_keep = gpu_step_keep,
    .step_finish = gpu_step_finish,
    .stream = gpu_stream,
    .timing_report = gpu_timing_report,
    .close = gpu_close,
};

/* ---- the shared device copy of an index (gpu_index) ------------------ */

/* index_adopt points the engine at a shared copy. */
static void index_adopt(gpu_engine *g, gpu_index *x)
{
    g->xidx = x;
    memcpy(g->dsec, x->dsec, sizeof g->dsec);
    g->view = x->view;
    g->d_root_map = x->d_root_map;
    g->root_n = x->root_n;
    g->d_ctab = x->d_ctab;
    g->ctab_bytes = x->ctab_bytes;
    g->d_cmap = x->d_cmap;
    g->cmap_mask = x->cmap_mask;
    g->cmap_min = x->cmap_min;
    g->cmap_bytes = x->cmap_bytes;
}

/* index_find takes a reference on the copy of t on g's device, or
 * returns NULL when there is none yet. */
static gpu_index *index_find(gpu_engine *g, uint64_t uid, uint32_t cmap_req)
{
    pthread_mutex_lock(&gpu_index_mu);
    gpu_index *x = gpu_index_list;
    while (x && !(x->device == g->device && x->index_uid == uid &&
                  x->cmap_req == cmap_req))
        x = x->next;
    if (x)
        x->refs++;
    pthread_mutex_unlock(&gpu_index_mu);
    return x;
}

/* index_publish hands what this engine uploaded to a new shared copy
 * (one reference: this engine's).  Without memory for the record the
 * engine keeps owning its upload, unshared. */
static void index_publish(gpu_engine *g, uint64_t uid, uint32_t cmap_req)
{
    gpu_index *x = calloc(1, sizeof *x);
    if (x == NULL)
        return;
    x->device = g->device;
    x->index_uid = uid;
    x->cmap_req = cmap_req;
    x->refs = 1;
    memcpy(x->dsec, g->dsec, sizeof x->dsec);
    x->view = g->view;
    x->d_root_map = g->d_root_map;
    x->root_n = g->root_n;
    x->d_ctab = g->d_ctab;
    x->ctab_bytes = g->ctab_bytes;
    x->d_cmap = g->d_cmap;
    x->cmap_mask = g->cmap_mask;
    x->cmap_min = g->cmap_min;
    x->cmap_bytes = g->cmap_bytes;
    pthread_mutex_lock(&gpu_index_mu);
    x->next = gpu_index_list;
    gpu_index_list = x;
    pthread_mutex_unlock(&gpu_index_mu);
    g->xidx = x;
}

/* index_free releases the device memory of an index copy (the engine's
 * own, or a shared one whose last reference is gone). */
static void index_free(void *dsec[FT_SEC_COUNT], uint32_t *root_map,
                       uint64_t *ctab, uint64_t *cmap)
{
    for (int i = 0; i < FT_SEC_COUNT; i++)
        cudaFree(dsec[i]);
    cudaFree(root_map);
    cudaFree(ctab);
    cudaFree(cmap);
}

/* index_release drops the engine's hold on its index copy. */
static void index_release(gpu_engine *g)
{
    gpu_index *x = g->xidx;
    if (x == NULL) {
        index_free(g->dsec, g->d_root_map, g->d_ctab, g->d_cmap);
        return;
    }
    pthread_mutex_lock(&gpu_index_mu);
    int last = --x->refs == 0;
    if (last) {
        gpu_index **pp = &gpu_index_list;
        while (*pp != x)
            pp = &(*pp)->next;
        *pp = x->next;
    }
    pthread_mutex_unlock(&gpu_index_mu);
    if (last) {
        index_free(x->dsec, x->d_root_map, x->d_ctab, x->d_cmap);
        free(x);
    }
    g->xidx = NULL;
}

int fti_engine_values_attached(const ft_engine *eng)
{
    if (eng == NULL || eng->ops != &gpu_ops || eng->impl == NULL)
        return 0;
    const gpu_engine *g = eng->impl;
    return g->d_forest ? g->forest_values
                       : g->use_values && g->dsec[FT_SEC_VALUES] != NULL;
}

int fti_engine_gpu_index_refs(const ft_engine *eng)
{
    if (eng == NULL || eng->ops != &gpu_ops || eng->impl == NULL)
        return 0;
    const gpu_engine *g = eng->impl;
    if (g->xidx == NULL)
        return 1;
    pthread_mutex_lock(&gpu_index_mu);
    int n = (int)g->xidx->refs;
    pthread_mutex_unlock(&gpu_index_mu);
    return n;
}

int fti_gpu_upload_trie(const ft_trie *t, const int *need, size_t n,
                        void *dsec[FT_SEC_COUNT], ft_trie_view *view)
{
    *view = t->view;
    for (size_t i = 0; i < n; i++) {
        int s = need[i];
        size_t bytes = t->sec_bytes[s];
        FT_CUDA_CHECK(cudaMalloc(&dsec[s], bytes + 64));
        FT_CUDA_CHECK(cudaMemset(dsec[s], 0, bytes + 64));
        if (bytes)
            FT_CUDA_CHECK(cudaMemcpy(dsec[s], t->sec[s], bytes,
                                     cudaMemcpyHostToDevice));
    }
    view->louds = dsec[FT_SEC_LOUDS];
    view->louds_rank = dsec[FT_SEC_LOUDS_RANK];
    view->louds_sel0 = dsec[FT_SEC_LOUDS_SEL0];
    view->label_lo = dsec[FT_SEC_LABEL_LO];
    view->high = dsec[FT_SEC_HIGH];
    view->high_rank = dsec[FT_SEC_HIGH_RANK];
    view->label_hi = dsec[FT_SEC_LABEL_HI];
    view->flags = dsec[FT_SEC_FLAGS];
    return FT_OK;
}

/* Copies the sections the kernels read and points the device view at them. */
static int copy_trie(gpu_engine *g, const ft_trie *t)
{
    static const int need[] = {FT_SEC_LOUDS,     FT_SEC_LOUDS_RANK,
                               FT_SEC_LOUDS_SEL0, FT_SEC_LABEL_LO,
                               FT_SEC_HIGH,      FT_SEC_HIGH_RANK,
                               FT_SEC_LABEL_HI,  FT_SEC_FLAGS,
                               FT_SEC_TERM_RANK};
    return fti_gpu_upload_trie(t, need, sizeof need / sizeof need[0], g->dsec,
                               &g->view);
}

/* A wide root gets a dense label -> child map on the device: step 0 then
 * finds each proposal's child with one load instead of a binary search
 * over the root's labels (~18 dependent loads for 275K children).  Built
 * when the root has >= 1024 children and its largest label is < 2^26
 * (at most 256 MB; 9 MB for a 2.2M-token vocabulary). */
static int root_map(gpu_engine *g, ft_engine *eng)
{
    const ft_trie *t = &eng->idx->trie;
    const ft_child_range *cr = &eng->idx->root;
    if (cr->deg < 1024)
        return FT_OK;
    uint32_t top = ft_child_label(&t->view, cr, cr->first + cr->deg - 1);
    if (top >= (1u << 26))
        return FT_OK;
    uint32_t n = top + 1;
    uint32_t *h = calloc(n, sizeof *h);
    if (h == NULL)
        return FT_ENOMEM;
    for (uint64_t c = 0; c < cr->deg; c++)
        h[ft_child_label(&t->view, cr, cr->first + c)] = (uint32_t)c + 1u;
    cudaError_t e = cudaMalloc((void **)&g->d_root_map, (size_t)n * 4);
    if (e == cudaSuccess)
        e = cudaMemcpy(g->d_root_map, h, (size_t)n * 4,
                       cudaMemcpyHostToDevice);
    free(h);
    if (e != cudaSuccess) {
        FT_ERROR("CUDA: root map: %s", cudaGetErrorString(e));
        (void)cudaGetLastError();
        return FT_ECUDA;
    }
    g->root_n = n;
    return FT_OK;
}

/* The derived tables (child table, child map) are built on the device
 * at open and only make the search faster.  aux_alloc allocates one if it
 * takes at most a quarter of the memory still free (else NULL, said at
 * INFO); aux_built keeps it after its build only if the build ran and
 * found nothing wrong (bad == 0; else a warning, and *p is freed and set
 * to NULL). */
static void *aux_alloc(size_t bytes, const char *who, const char *what)
{
    size_t fr = 0, tot = 0;
    void *p = NULL;
    if (cudaMemGetInfo(&fr, &tot) != cudaSuccess || bytes > fr / 4) {
        (void)cudaGetLastError();
        FT_INFO("%s: no %s (%zu MB, %zu MB free)", who, what, bytes >> 20,
                fr >> 20);
        return NULL;
    }
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    return p;
}

static int aux_built(void **p, int e, unsigned long long bad,
                     const char *who, const char *what, const char *bad_what)
{
    if (e == 0 && bad == 0)
        return 1;
    if (e != 0)
        FT_WARN("%s: %s: %s (going on without it)", who, what,
                cudaGetErrorString((cudaError_t)e));
    else
        FT_WARN("%s: %s: %llu %s (a damaged index?): going on without it",
                who, what, bad, bad_what);
    (void)cudaGetLastError();
    cudaFree(*p);
    *p = NULL;
    return 0;
}

/* fti_gpu_child_table builds the per-node child table (16 B per node:
 * first child and high labels before it) that turns a child range, the
 * chain of about six dependent select/rank misses every next beam needs,
 * into two adjacent loads.  Built on the device from the copied trie and
 * checked there against ft_children for every node; only used when it
 * takes at most a quarter of the memory still free (3 GB at 100M keys,
 * 21 GB at 800M), and dropped with a warning if any node differs (a
 * damaged index opened without verification): the search (or step) is
 * the same either way, the table only makes it faster. */
uint64_t *fti_gpu_child_table(const ft_trie_view *view, void *stream,
                              const char *who, size_t *bytes)
{
    size_t b = (size_t)(view->n_nodes + 1) * 16;
    uint64_t *t = aux_alloc(b, who, "child table");
    *bytes = 0;
    if (t == NULL)
        return NULL;
    unsigned long long bad = 0;
    int e = ft_gk_ctab_build(view, t, &bad, stream);
    if (!aux_built((void **)&t, e, bad, who, "child table",
                   "nodes differ from the trie"))
        return NULL;
    *bytes = b;
    return t;
}

/* values_upload copies the keys' values (the values section: value_bits
 * each, by key index) to the device, where the search reads each
 * result's value with its key index (ft_gk_params.values): the host then
 * attaches none (a call a result of fti_index_values_attach cost ~11-30
 * us per 1,000 hits on the host, ~1 ms a batch of 32 at BW = 1000).
 * Only where it takes at most a quarter of the memory still free, as the
 * child table; else NULL and the host attaches them as before. */
static void values_upload(gpu_engine *g, const ft_trie *t)
{
    size_t bytes = t->sec_bytes[FT_SEC_VALUES];
    g->dsec[FT_SEC_VALUES] = NULL;
    if (bytes == 0 || t->value_bits == 0 || t->sec[FT_SEC_VALUES] == NULL)
        return;
    void *p = aux_alloc(bytes + 64, "GPU engine", "values on the device");
    if (p == NULL)
        return;
    if (cudaMemset(p, 0, bytes + 64) != cudaSuccess ||
        cudaMemcpy(p, t->sec[FT_SEC_VALUES], bytes,
                   cudaMemcpyHostToDevice) != cudaSuccess) {
        FT_WARN("GPU engine: values: %s (attached on the host)",
                cudaGetErrorString(cudaGetLastError()));
        cudaFree(p);
        return;
    }
    g->dsec[FT_SEC_VALUES] = p;
}

/* Nodes with at least this many children are in the child map unless the
 * options say otherwise (docs/gpu-engine.md, "child map"). */
#ifndef FT_CMAP_MIN_DEFAULT
#define FT_CMAP_MIN_DEFAULT 256u
#endif

/* child_map builds the child map (ft_gk_cmap_build) for the nodes with at
 * least min_deg children: a proposal of such a beam is then one probe
 * (a 16-byte load) instead of a binary search over its children, a chain
 * of ~log2(deg) dependent loads, two per step above label 65535.  At
 * load <= 1/2 (1 GB at 100M keys, 8 GB at 800M); used only when it takes
 * at most a quarter of the memory still free, checked by looking every
 * child up again, and dropped with a warning if one fails (a damaged
 * index opened without verification): the search is the same either
 * way. */
static void child_map(gpu_engine *g, const ft_trie *t, uint32_t min_deg)
{
    if (min_deg == UINT32_MAX || t->view.n_nodes >= 0xffffffffull)
        return;
    unsigned long long entries = 0;
    int e = ft_gk_cmap_count(&g->view, g->d_ctab, min_deg, &entries,
                             g->stream);
    if (e != 0 || entries == 0) {
        (void)cudaGetLastError();
        return;
    }
    uint64_t size = 1;
    while (size < 2 * (uint64_t)entries)
        size <<= 1;
    size_t bytes = (size_t)size * 16;
    if ((g->d_cmap = aux_alloc(bytes, "GPU engine", "child map")) == NULL)
        return;
    unsigned long long bad = 0;
    e = cudaMemsetAsync(g->d_cmap, 0xff, bytes, g->stream);
    if (e == cudaSuccess)
        e = ft_gk_cmap_build(&g->view, g->d_ctab, g->d_cmap, size - 1,
                             min_deg, &bad, g->stream);
    if (!aux_built((void **)&g->d_cmap, e, bad, "GPU engine", "child map",
                   "children not found again"))
        return;
    g->cmap_mask = size - 1;
    g->cmap_min = min_deg;
    g->cmap_bytes = bytes;
}

static int gpu_open(gpu_engine *g, ft_engine *eng, char *errbuf,
                    size_t errlen)
{
    const ft_trie *t = &eng->idx->trie;
    const ft_engine_opts *o = &eng->opts;
    int rc;
    /* Spin while waiting for the GPU: the wake-up after the kernel is on
     * every search's path.  The flags are those of the current device's
     * primary context, so the device is selected first: before, an engine
     * on GPU 1.. set (and made) GPU 0's context and left its own at the
     * runtime's default.  Since CUDA 12 the call overwrites the flags of
     * a context already active (another engine, or the host program's
     * own CUDA work); a failure leaves them and is harmless.  A search
     * normally waits by spinning on its completion word in mapped memory
     * (wait_done), whatever the flags; they rule the stream
     * synchronisations (launch_graph = UINT32_MAX, no mapped memory,
     * timing). */
    FT_CUDA_CHECK(cudaSetDevice(g->device));
    if (cudaSetDeviceFlags(cudaDeviceScheduleSpin) != cudaSuccess)
        (void)cudaGetLastError();
    FT_CUDA_CHECK(cudaStreamCreateWithFlags(&g->stream,
                                            cudaStreamNonBlocking));
    int coop = 0;
    FT_CUDA_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch,
                                         g->device));
    FT_RETURN_ERROR_IF(!coop, FT_ENODEV,
                       "GPU %d does not support cooperative launches",
                       g->device);
    int e = ft_gk_config(&g->grid, &g->block, &g->smem);
    if (e != 0) {
        FT_ERROR("CUDA: kernel configuration failed: %s",
                 cudaGetErrorString((cudaError_t)e));
        (void)cudaGetLastError();
        fti_errf(errbuf, errlen, "GPU %d: kernel configuration failed: %s",
                 g->device, cudaGetErrorString((cudaError_t)e));
        return FT_ECUDA;
    }
    e = ft_gk_step_config(&g->sgrid, &g->sblock, &g->ssmem);
    if (e != 0) {
        FT_ERROR("CUDA: step kernel configuration failed: %s",
                 cudaGetErrorString((cudaError_t)e));
        (void)cudaGetLastError();
        fti_errf(errbuf, errlen, "GPU %d: step kernel configuration failed: "
                 "%s", g->device, cudaGetErrorString((cudaError_t)e));
        return FT_ECUDA;
    }
    g->sgrid_use = g->sgrid;
    if (ft_gk_xstep_config(&g->xgrid, &g->xblock, &g->xsmem) != 0) {
        (void)cudaGetLastError();
        g->xgrid = 0; /* groups then exchange another way */
    }
    g->xgrid_use = g->xgrid;
    /* One device copy of the index per GPU and index, whatever the
     * number of engines (replicas) on it: adopt the one there is, or
     * upload it and share it once it is whole (below). */
    uint32_t cmap_req = o->child_map_min ? o->child_map_min
                                         : FT_CMAP_MIN_DEFAULT;
    uint64_t uid = eng->idx->uid;
    gpu_index *shared = uid ? index_find(g, uid, cmap_req) : NULL;
    if (shared != NULL) {
        index_adopt(g, shared);
    } else {
        if ((rc = copy_trie(g, t)) != FT_OK)
            return rc;
        if ((rc = root_map(g, eng)) != FT_OK)
            return rc;
    }
    g->wmax = widest_level(t);
    g->nslots = fti_gpu_slots(o->max_batch);
    g->bmax = fti_gpu_max_beam(o->max_beam);
    g->kmax = o->max_k && o->max_k < FT_MAX_K ? o->max_k : FT_MAX_K;
    g->tmax = o->max_t && o->max_t < FT_MAX_T ? o->max_t : FT_MAX_T;
    g->has_big = g->kmax < FT_MAX_K || g->tmax < FT_MAX_T;
    uint32_t ns = g->nslots + (uint32_t)g->has_big;
    g->slots = calloc(ns, sizeof *g->slots);
    if (!g->slots)
        return FT_ENOMEM;
    for (uint32_t i = 0; i < g->nslots; i++) {
        if ((rc = slot_alloc(g, &g->slots[i], g->kmax, g->tmax)) != FT_OK)
            goto cuda_fail;
    }
    if (g->has_big) {
        if ((rc = slot_alloc(g, &g->slots[g->nslots], FT_MAX_K, FT_MAX_T)) !=
            FT_OK)
            goto cuda_fail;
    }
    g->in_cap = (size_t)g->nslots * req_in_bytes(g->kmax, g->tmax);
    if (g->in_cap < req_in_bytes(FT_MAX_K, FT_MAX_T))
        g->in_cap = req_in_bytes(FT_MAX_K, FT_MAX_T);
    g->out_cap = (size_t)g->nslots * req_out_bytes(g->tmax);
    if (g->out_cap < req_out_bytes(FT_MAX_T))
        g->out_cap = req_out_bytes(FT_MAX_T);
    if (cudaMallocHost((void **)&g->h_in, g->in_cap) != cudaSuccess ||
        cudaMallocHost((void **)&g->h_out, g->out_cap) != cudaSuccess ||
        cudaMalloc((void **)&g->d_in, g->in_cap) != cudaSuccess ||
        cudaMalloc((void **)&g->d_out, g->out_cap) != cudaSuccess ||
        cudaMalloc((void **)&g->d_prof, FT_GK_PROF_WORDS * 8) != cudaSuccess) {
        rc = FT_ECUDA;
        goto cuda_fail;
    }
    if (cudaHostGetDevicePointer((void **)&g->hd_out, g->h_out, 0) !=
        cudaSuccess) {
        (void)cudaGetLastError();
        g->hd_out = NULL;
    }
    if (cudaHostGetDevicePointer((void **)&g->hd_in, g->h_in, 0) !=
        cudaSuccess) {
        (void)cudaGetLastError();
        g->hd_in = NULL;
    }
    /* The completion word and its counter: without them (or without the
     * mapped output, which its wait stands for) launches end with a
     * stream synchronisation. */
    if (o->launch_graph != UINT32_MAX && g->hd_out &&
        cudaMallocHost((void **)&g->h_done, 64) == cudaSuccess &&
        cudaHostGetDevicePointer((void **)&g->hd_done, g->h_done, 0) ==
            cudaSuccess &&
        cudaMalloc((void **)&g->d_done_ctr, 4) == cudaSuccess &&
        cudaMemset(g->d_done_ctr, 0, 4) == cudaSuccess) {
        *(volatile uint32_t *)g->h_done = 0;
    } else {
        (void)cudaGetLastError();
        g->hd_done = NULL;
    }
    g->graphs = o->launch_graph != UINT32_MAX
                    ? ft_gk_graphs_new(g->grid, g->block, g->smem)
                    : NULL;
    g->fuse_term = o->fuse_term;
    g->fuse_lists = NULL;
    if (g->fuse_term != UINT32_MAX && g->nslots >= 2) {
        g->fuse_lists = &g->slots[1];
    } else if (g->fuse_term != UINT32_MAX) {
        /* One slot (max_batch 1, a latency setup): fused launches need a
         * second set of lists; without the memory they are not fused. */
        if (slot_alloc(g, &g->alt, g->kmax, g->tmax) == FT_OK) {
            g->fuse_lists = &g->alt;
        } else {
            (void)cudaGetLastError();
            slot_free(&g->alt); /* what it got before it failed */
            FT_WARN("GPU engine on device %d: no memory for a second set "
                    "of step lists: launches of one request not fused",
                    g->device);
        }
    }
    g->mapped_in_max = o->mapped_input_max == UINT32_MAX ? 0
                       : o->mapped_input_max ? o->mapped_input_max
                                             : ((size_t)1 << 20);
    /* Exchange lists for one shard; recv grows with the group's shard
     * count (at a step_begin, never per request). */
    g->send_cap = (size_t)g->nslots * g->bmax;
    g->recv_cap = g->send_cap;
    if (cudaMalloc((void **)&g->d_send, g->send_cap * 8) != cudaSuccess ||
        cudaMalloc((void **)&g->d_recv, g->recv_cap * 8) != cudaSuccess) {
        rc = FT_ECUDA;
        goto cuda_fail;
    }
    g->value_bits = t->value_bits; /* a shared copy's values too */
    g->use_values = o->values_on_device != UINT32_MAX;
    if (shared == NULL) {
        g->d_ctab = fti_gpu_child_table(&g->view, g->stream, "GPU engine",
                                        &g->ctab_bytes);
        child_map(g, t, cmap_req);
        if (g->use_values)
            values_upload(g, t);
        if (uid)
            index_publish(g, uid, cmap_req);
    }
    g->epoch = 0;
    g->timing = o->timing;
    /* Alone, a request leaves most of the grid idle: computing every next
     * candidate's child range in the expansion costs no time.  In a batch
     * the grid is busy and most of those ranges are thrown away. */
    g->lazy_min = 4;
    /* A list that fits one CTA's shared memory is sorted there whole;
     * longer ones go through the grid's radix passes.  The option sets
     * the length (tests force the grid path on small lists). */
    g->gsel_min = o->select_grid_min ? o->select_grid_min : FT_GK_LIST_MAX;
    g->gsel_forced = o->select_grid_min != 0;
    g->pair_items = o->expand_pair_items;
    /* (ft_gk_params.pf_ranges: 1 / 2 the entries to L2 / L1, 4 the next
     * level's lines; 6 measured best, docs/BENCHMARKS.md 3m) */
    g->pf_ranges = o->prefetch == UINT32_MAX ? 0u : 6u;
    /* (at most 65536: every candidate of such a list gets its child
     * range in the expansion) */
    g->local_max = o->select_local_max == 0 ? 8192u
                   : o->select_local_max == UINT32_MAX ? 0u
                   : o->select_local_max > 65536u ? 65536u
                                                  : o->select_local_max;
    g->local_cache = o->select_local_cache == 0 ? UINT32_MAX
                     : o->select_local_cache == UINT32_MAX ? 0u
                                                           : o->select_local_cache;
    g->round1 = o->round1 == 0 ? 128u
                : o->round1 == UINT32_MAX ? 0u : o->round1;
    g->round1_items = o->round1_items
                          ? o->round1_items
                          : 8u * (uint32_t)g->grid * (uint32_t)(g->block / 32);
    for (int i = 0; i < 4 && g->timing; i++)
        FT_CUDA_CHECK(cudaEventCreate(&g->ev[i]));
    size_t mem_free = 0, mem_total = 0;
    cudaMemGetInfo(&mem_free, &mem_total);
    unsigned dflags = 0;
    if (cudaGetDeviceFlags(&dflags) != cudaSuccess) {
        (void)cudaGetLastError();
        dflags = 0;
    }
    unsigned sched = dflags & cudaDeviceScheduleMask;
    const char *sync = sched == cudaDeviceScheduleSpin           ? "spin"
                       : sched == cudaDeviceScheduleYield        ? "yield"
                       : sched == cudaDeviceScheduleBlockingSync ? "blocking"
                                                                 : "auto";
    FT_INFO("GPU engine on device %d: %u slots (beam %u, K %u, T %u%s), "
            "candidate cap %llu per slot, grid %d x %d, %zu B shared, "
            "child table %zu MB, child map %zu MB (nodes of %u+ children), "
            "host wait: %s (stream sync: %s), "
            "%.1f GiB free of %.1f", g->device,
            g->nslots, g->bmax, g->kmax, g->tmax,
            g->has_big ? ", one big slot" : "",
            (unsigned long long)g->slots[0].d.cap_cand, g->grid, g->block,
            g->smem, g->ctab_bytes >> 20, g->cmap_bytes >> 20, g->cmap_min,
            g->hd_done && g->graphs ? "graph launch, spin on a mapped word"
            : g->hd_done            ? "plain launch, spin on a mapped word"
                                    : "plain launch, stream sync",
            sync, mem_free / 1073741824.0,
            mem_total / 1073741824.0);
    return FT_OK;
cuda_fail:
    (void)cudaGetLastError();
    fti_errf(errbuf, errlen, "GPU %d: allocating the search arenas failed "
             "(%u slots of beam %u, K %u, T %u): lower max_batch, max_k or "
             "max_t", g->device, g->nslots, g->bmax, g->kmax, g->tmax);
    return rc == FT_ENOMEM ? FT_ENOMEM : FT_ECUDA;
}

/* no_gpu_reason says why cudaGetDeviceCount found no GPU, in words: the
 * runtime reports a host without a driver as cudaErrorInsufficientDriver
 * ("CUDA driver version is insufficient for CUDA runtime version"), which
 * reads like an upgrade would help; cudaDriverGetVersion tells the two
 * apart (0: no driver). */
static void no_gpu_reason(cudaError_t e, char *buf, size_t len)
{
    int drv = 0, rt = 0;
    if (e == cudaSuccess || e == cudaErrorNoDevice) {
        snprintf(buf, len, "no CUDA device found (the NVIDIA driver sees "
                 "none)");
    } else if (e == cudaErrorInsufficientDriver) {
        if (cudaDriverGetVersion(&drv) != cudaSuccess)
            drv = 0;
        if (cudaRuntimeGetVersion(&rt) != cudaSuccess)
            rt = 0;
        if (drv == 0)
            snprintf(buf, len, "no NVIDIA driver found (no GPU, or its "
                     "driver is not installed)");
        else
            snprintf(buf, len, "the NVIDIA driver (CUDA %d.%d) is older than "
                     "this build's CUDA runtime (%d.%d)", drv / 1000,
                     drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
    } else {
        snprintf(buf, len, "%s", cudaGetErrorString(e));
    }
}

int ft_gpu_engine_open(ft_engine *eng, char *errbuf, size_t errlen)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        (void)cudaGetLastError();
        char why[160];
        no_gpu_reason(e, why, sizeof why);
        fti_errf(errbuf, errlen, "no usable GPU: %s", why);
        return FT_ENODEV;
    }
    FT_RETURN_ERROR_IF(eng->opts.device < 0 || eng->opts.device >= count,
                       FT_ENODEV, "device: GPU %d does not exist (%d found)",
                       eng->opts.device, count);
    gpu_engine *g = calloc(1, sizeof *g);
    if (g == NULL)
        return FT_ENOMEM;
    g->device = eng->opts.device;
    eng->device = g->device;
    eng->impl = g;
    eng->ops = &gpu_ops;
    int rc = gpu_open(g, eng, errbuf, errlen);
    if (rc != FT_OK) {
        if (errbuf && errlen && errbuf[0] == 0)
            fti_errf(errbuf, errlen, "GPU %d: opening the engine failed: %s",
                     g->device, ft_strerror(rc));
        gpu_close(eng);
        eng->ops = NULL;
        return rc;
    }
    return FT_OK;
}

/* ---- search ----------------------------------------------------------- */

/* Output bytes one prepared request takes. */
static size_t out_bytes(const fti_prepared *p)
{
    return ALIGN16(sizeof(ft_gk_out_head) +
                   (size_t)p->results * sizeof(ft_gk_out_hit) +
                   (size_t)p->results * p->T * 4);
}

/* Packs one prepared request: its descriptor into q (host side of the
 * descriptor array), its rows and step counters at *in_off; reserves its
 * output at *out_off. */
static void pack_req(gpu_engine *g, ft_gk_req *q, const fti_prepared *p,
                     const gpu_slot *slot, const ft_child_range *root,
                     size_t *in_off, size_t *out_off, int steps, uint32_t xoff)
{
    size_t off = *in_off;
    memset(q, 0, sizeof *q);
    q->T = p->T;
    q->B = p->beam;
    q->n = p->results;
    q->theta_sent = p->theta_sent;
    uint32_t rows = 0;
    uint32_t hoff = 0;
    uint32_t hstride = pow2_at_least(2 * slot->kmax);
    for (uint32_t s = 0; s < p->T; s++) {
        q->keff[s] = p->keff[s];
        q->row[s] = rows;
        rows += p->keff[s];
        q->hoff[s] = hoff;
        q->hmask[s] = pow2_at_least(2 * p->keff[s]) - 1;
        hoff += hstride;
    }
    q->row[p->T] = rows;
    q->rows_total = rows;
    for (uint32_t d = 0; d <= p->T; d++)
        q->F[d] = p->F[d];
    q->root = *root;
    /* The root's theta_sent cut, by the rule the kernels use. */
    q->kcut0 = ft_kcut(p->logp, p->keff[0], 0.0f, p->theta_sent);
    q->items0 = ft_gk_items(0, root->deg, q->kcut0);
    size_t tok_off = off;
    off += ALIGN16((size_t)rows * 4);
    size_t lp_off = off;
    off += ALIGN16((size_t)rows * 4);
    uint32_t *tok = (uint32_t *)(g->h_in + tok_off);
    float *lp = (float *)(g->h_in + lp_off);
    for (uint32_t s = 0; s < p->T; s++) {
        memcpy(tok + q->row[s], p->tok + (size_t)s * p->K, p->keff[s] * 4);
        memcpy(lp + q->row[s], p->logp + (size_t)s * p->K, p->keff[s] * 4);
    }
    size_t st_off = off;
    memset(g->h_in + off, 0, (size_t)p->T * sizeof(ft_gk_step));
    off += ALIGN16((size_t)p->T * sizeof(ft_gk_step));
    q->tok = (const uint32_t *)(g->d_in + tok_off);
    q->logp = (const float *)(g->d_in + lp_off);
    q->steps = (ft_gk_step *)(g->d_in + st_off);
    q->out = (ft_gk_out_head *)((g->hd_out ? g->hd_out : g->d_out) +
                                *out_off);
    q->slot = slot->d;
    q->xoff = xoff;
    /* The all-T kernel indexes beams by their rank: no rank map. */
    if (!steps)
        q->slot.beam_rank = NULL;
    *out_off += out_bytes(p);
    *in_off = off;
}

static void fail_all(ft_result *const *res, size_t n, int code,
                     const char *msg)
{
    for (size_t i = 0; i < n; i++)
        fti_result_fail(res[i], code, msg);
}

/* next_params starts a launch generation (clearing the hash tables when
 * it wraps) and fills the kernel parameters of an n-request batch. */
static cudaError_t next_params(gpu_engine *g, ft_gk_params *prm, size_t n)
{
    if (++g->epoch >= (1u << 20)) {
        /* The hash tables' generation wrapped: clear them once. */
        for (uint32_t s = 0; s < g->nslots + (uint32_t)g->has_big; s++) {
            cudaError_t e = cudaMemsetAsync(
                g->slots[s].d.hash, 0,
                slot_hash_entries(g->slots[s].kmax, g->slots[s].d.tmax) * 8,
                g->stream);
            if (e != cudaSuccess)
                return e;
        }
        g->epoch = 1;
    }
    memset(prm, 0, sizeof *prm);
    prm->view = g->view;
    prm->reqs = (ft_gk_req *)g->d_in;
    prm->nreq = (uint32_t)n;
    prm->epoch = g->epoch;
    prm->prof = g->d_prof;
    prm->term_rank = g->dsec[FT_SEC_TERM_RANK];
    prm->values = g->use_values ? g->dsec[FT_SEC_VALUES] : NULL;
    prm->value_bits = g->value_bits;
    prm->lazy = n >= g->lazy_min;
    /* A batch of many requests keeps every CTA busy with lists of its
     * own: only the longest go through the grid's barriers then (unless
     * the option forced a length). */
    prm->gsel_min = g->gsel_min;
    if (prm->lazy && !g->gsel_forced && prm->gsel_min < 65536)
        prm->gsel_min = 65536;
    /* 0: the passes stop at pow2(limit) survivors; a forced small
     * select_grid_min runs them down to the exact limit. */
    prm->gsel_cap = g->gsel_min < FT_GK_LIST_MAX ? g->gsel_min : 0;
    /* Eager child ranges cost one chain per next candidate: fine for a
     * few thousand, a waste of the step's bandwidth for a million (the
     * grid selection computes its survivors' instead). */
    prm->eager_max = 8192;
    /* A launch of few requests selects every list with many CTAs (no
     * sort, no one CTA per list while the grid waits): it needs every
     * short list in shared memory and every next candidate's child range
     * ready, which a select_grid_min above FT_GK_LIST_MAX would break. */
    prm->spread = !prm->lazy && prm->gsel_min <= FT_GK_LIST_MAX &&
                  prm->eager_max >= FT_GK_LIST_MAX;
    prm->root_n = g->root_n;
    prm->root_map = g->d_root_map;
    prm->ctab = g->d_ctab;
    prm->cmap = g->d_cmap;
    prm->cmap_mask = g->cmap_mask;
    prm->cmap_min = g->cmap_min;
    if (g->d_forest) {
        /* the forest's trees hold what the kernel reads of the tries */
        prm->forest = g->d_forest;
        prm->nforest = g->nforest;
        prm->root_n = g->froot_n;
        prm->root_map = g->d_froot_map;
        prm->root_tab = g->d_froot_tab;
        prm->root_cnt = g->froot_cnt;
        prm->ctab = NULL;
        prm->cmap = NULL;
        prm->term_rank = NULL;
        prm->values = NULL; /* the trees' */
    }
    prm->pair_items = g->pair_items;
    prm->pf_ranges = g->pf_ranges;
    return cudaSuccess;
}

/* fuse_params turns a spread launch of request p alone into a fused one
 * (ft_gk_params.fuse) when the option allows it (g->fuse_lists) and, by
 * default, its beam is at most FT_GPU_FUSE_MAX_BEAM: every selecting CTA
 * then ranks all of the next list's best, which at BW = 1000 costs more
 * than the barrier it saves (run S3, docs/BENCHMARKS.md 3g).  The
 * terminal CTAs: by default one for each 64 results, 4 to a quarter of
 * the grid. */
#define FT_GPU_FUSE_MAX_BEAM 512u

static void fuse_params(const gpu_engine *g, ft_gk_params *prm,
                        const fti_prepared *p)
{
    if (!prm->spread || g->fuse_lists == NULL ||
        (p->beam > FT_GPU_FUSE_MAX_BEAM && g->fuse_term == 0))
        return;
    uint32_t nt = g->fuse_term;
    if (nt == 0) {
        nt = p->results / 64;
        nt = nt < 4 ? 4 : nt;
        if (nt > (uint32_t)g->grid / 4)
            nt = (uint32_t)g->grid / 4;
    }
    if (nt < 1 || nt + 1 > (uint32_t)g->grid)
        return;
    prm->fuse = 1;
    prm->fuse_term = nt;
    /* Medium lists narrowed by each selecting CTA alone (fused launches
     * only: in the others, 66 CTAs a list, BW = 1000 measured 0.261
     * against 0.251 ms, docs/BENCHMARKS.md 3l); such a list needs every
     * candidate's child range from the expansion. */
    prm->local_max = g->local_max;
    prm->local_cache = g->local_cache;
    if (prm->local_max > prm->eager_max)
        prm->eager_max = prm->local_max;
    prm->alt = ft_gk_lists_of(&g->fuse_lists->d);
}

/* assemble turns the output region (copied back) of reqs[0..n) into
 * their results.  The kernel reports each hit's terminal rank (its key
 * index): values stay in host memory and are attached by the public
 * search. */
static void assemble(ft_engine *eng, const fti_prepared *const *reqs,
                     ft_result *const *res, size_t n)
{
    gpu_engine *g = eng->impl;
    /* (a forest's ranks are global key indexes) */
    uint64_t keys = g->d_forest ? g->forest_keys : eng->idx->trie.n_keys;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        const fti_prepared *p = reqs[i];
        const ft_gk_out_head *h = (const ft_gk_out_head *)(g->h_out + o);
        const ft_gk_out_hit *hit = (const ft_gk_out_hit *)(h + 1);
        const uint32_t *tok = (const uint32_t *)(hit + p->results);
        o += out_bytes(p);
        ft_result *r = res[i];
        if (g->skip_failed && r->status != FT_OK)
            continue; /* failed by the run's check: its answer is dropped */
        r->n = 0;
        r->status = FT_OK;
        r->error[0] = 0;
        if (h->err || h->n > p->results) {
            FT_ERROR("GPU engine: arena overflow in a request (a bug)");
            fti_result_fail(r, FT_EINTERNAL,
                            "engine: GPU arena overflow (internal error)");
            continue;
        }
        for (uint32_t j = 0; j < h->n; j++) {
            if (hit[j].rank >= keys || hit[j].len == 0 ||
                hit[j].len > p->T) {
                /* Never read past the values, never answer wrongly. */
                FT_ERROR("GPU engine: key index %llu of %llu keys (a bug)",
                         (unsigned long long)hit[j].rank,
                         (unsigned long long)keys);
                fti_result_fail(r, FT_EINTERNAL,
                                "engine: GPU returned a bad key index "
                                "(internal error)");
                break;
            }
            int rc = fti_result_put(r, hit[j].rank, hit[j].order,
                                    hit[j].score, hit[j].sigma,
                                    tok + (size_t)j * p->T, hit[j].len);
            if (rc != FT_OK) {
                fti_result_fail(r, rc, "results: do not fit the result "
                                       "buffer");
                break;
            }
            r->hits[r->n - 1].value = hit[j].value; /* 0 without values */
        }
    }
}

/* wait_done waits for the launch whose completion word (ft_gk_params.done)
 * is seq: it spins on the mapped word, which the kernel sets ~2.5 us
 * before its end reaches the stream (docs/BENCHMARKS.md 3k), and every
 * 1,024 turns asks the stream, so that a launch that failed (and never
 * sets the word) ends the wait with its error. */
static cudaError_t wait_done(gpu_engine *g, uint32_t seq)
{
    for (uint32_t spin = 1;; spin++) {
        if (__atomic_load_n(g->h_done, __ATOMIC_ACQUIRE) == seq)
            return cudaSuccess;
        if ((spin & 1023u) == 0) {
            cudaError_t e = cudaStreamQuery(g->stream);
            if (e == cudaErrorNotReady)
                continue;
            if (e != cudaSuccess)
                return e;
            /* the stream is idle: the word is set by now, or never */
            if (__atomic_load_n(g->h_done, __ATOMIC_ACQUIRE) == seq)
                return cudaSuccess;
            FT_ERROR("GPU engine on device %d: a launch ended without "
                     "setting its completion word (%u)", g->device, seq);
            return cudaErrorUnknown;
        }
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        __asm__ volatile("yield");
#endif
    }
}

/* Runs reqs[0..n) (all fitting the chosen slots) in one launch. */
static int run_launch(ft_engine *eng, const fti_prepared *const *reqs,
                      ft_result *const *res, size_t n, int big)
{
    gpu_engine *g = eng->impl;
    /* Descriptors go first, as an array; rows and counters follow. */
    size_t in_off = ALIGN16(n * sizeof(ft_gk_req));
    size_t out_off = 0;
    int timing = g->timing;
    /* start, packed, issued, checked, synchronised, assembled */
    double tk[6] = {0};
    if (timing)
        tk[0] = fti_now();
    for (size_t i = 0; i < n; i++) {
        const fti_prepared *p = reqs[i];
        gpu_slot *slot = big ? &g->slots[g->nslots] : &g->slots[i];
        pack_req(g, (ft_gk_req *)(g->h_in + i * sizeof(ft_gk_req)), p, slot,
                 g->d_forest ? &g->froot : &eng->idx->root, &in_off,
                 &out_off, 0, 0);
    }
    if (timing)
        tk[1] = fti_now();
    ft_gk_params prm;
    if (next_params(g, &prm, n) != cudaSuccess)
        goto cuda_fail;
    cudaError_t e;
    if (n == 1 && !big)
        fuse_params(g, &prm, reqs[0]);
    /* A request alone, or a lazy launch: a step of many more proposals
     * than its lists need in two rounds (ft_gk_params.r1, gk_r1_setup).
     * In a lazy launch the requests share the grid, so a request's step
     * qualifies with its share of the items (at least 2: 1, which turns
     * the proposals-mostly test off, only where asked for); the kernel
     * marks the requests of a second round in a bit map of
     * FT_GK_R1_LAZY_MAX. */
    if (n == 1 && prm.spread) {
        prm.r1 = g->round1;
        prm.r1_items = g->round1_items;
        /* A step runs in rounds only when its beams' passing proposals
         * (at most beam x keff) come to 2 x round1 x max(beam, results)
         * (gk_r1_setup): when no step can, the kernel skips the setup
         * and the check (and their block barriers) altogether -- every
         * request of K < 2 x round1 (BW = 100). */
        const fti_prepared *p = reqs[0];
        uint32_t kmax = 0;
        for (uint32_t t = 0; t < p->T; t++)
            kmax = p->keff[t] > kmax ? p->keff[t] : kmax;
        uint64_t bmax = p->beam > p->results ? p->beam : p->results;
        if ((uint64_t)p->beam * kmax < 2ull * prm.r1 * bmax)
            prm.r1 = 0;
    } else if (prm.lazy && n <= FT_GK_R1_LAZY_MAX) {
        prm.r1 = g->round1;
        uint32_t share = g->round1_items / (uint32_t)n;
        prm.r1_items = g->round1_items == 1 ? 1u : share < 2u ? 2u : share;
    }
#ifdef FT_GK_PROFILE
    /* the %globaltimer words: the earliest entry from ~0, the rest 0 */
    cudaMemsetAsync(g->d_prof + FT_GK_PROF_GT, 0xff, 8, g->stream);
    cudaMemsetAsync(g->d_prof + FT_GK_PROF_GT + 1, 0, 7 * 8, g->stream);
    if (n == 1 && prm.fuse)
        ft_gk_prof_chain_reset(g->stream);
#endif
    if (timing)
        cudaEventRecord(g->ev[0], g->stream);
    if (!prm.lazy && g->hd_in && in_off <= g->mapped_in_max) {
        /* A latency launch: the kernel reads the input itself. */
        prm.in_src = g->hd_in;
        prm.in_n16 = (uint32_t)(in_off / 16);
    } else {
        e = cudaMemcpyAsync(g->d_in, g->h_in, in_off,
                            cudaMemcpyHostToDevice, g->stream);
        if (e != cudaSuccess)
            goto cuda_fail_e;
    }
    if (timing)
        cudaEventRecord(g->ev[1], g->stream);
    if (g->hd_done) {
        if (++g->done_seq == 0)
            g->done_seq = 1; /* (0: the word's value before any launch) */
        prm.done = g->hd_done;
        prm.done_ctr = g->d_done_ctr;
        prm.done_seq = g->done_seq;
    }
    e = (cudaError_t)ft_gk_launch(&prm, g->grid, g->block, g->smem,
                                  g->stream, g->graphs);
    if (e != cudaSuccess)
        goto cuda_fail_e;
    if (timing)
        cudaEventRecord(g->ev[2], g->stream);
    if (g->hd_out == NULL)
        e = cudaMemcpyAsync(g->h_out, g->d_out, out_off,
                            cudaMemcpyDeviceToHost, g->stream);
    if (e != cudaSuccess)
        goto cuda_fail_e;
    if (timing)
        cudaEventRecord(g->ev[3], g->stream);
    if (timing)
        tk[2] = fti_now();
    if (g->check) {
        /* The host's part of the run, while the GPU works. */
        fti_engine_check c = g->check;
        g->check = NULL;
        c(g->check_arg);
    }
    if (timing)
        tk[3] = fti_now();
    /* (the results are in mapped memory when the word is set; a launch
     * that copies them out ends with the stream) */
    e = prm.done ? wait_done(g, prm.done_seq)
                 : cudaStreamSynchronize(g->stream);
    if (e != cudaSuccess)
        goto cuda_fail_e;
    if (timing)
        tk[4] = fti_now();
#ifdef FT_GK_PROFILE
    cudaStreamSynchronize(g->stream); /* the marks: the kernel's end */
    {
        uint64_t mk[FT_GK_PROF_WORDS];
        int c = n > 1;
        uint32_t tm = 0;
        for (size_t i = 0; i < n; i++)
            tm = reqs[i]->T > tm ? reqs[i]->T : tm;
        if (cudaMemcpy(mk, g->d_prof, sizeof mk, cudaMemcpyDeviceToHost) ==
            cudaSuccess) {
            for (uint32_t s = 0; s < tm; s++) {
                g->prof_a[c][s] += (double)(mk[1 + 4 * s] - mk[4 * s]);
                g->prof_w[c][s] += (double)(mk[2 + 4 * s] - mk[1 + 4 * s]);
                g->prof_g[c][s] += (double)(mk[3 + 4 * s] - mk[2 + 4 * s]);
                g->prof_b[c][s] += (double)(mk[4 + 4 * s] - mk[3 + 4 * s]);
                if (s < reqs[0]->T) {
                    const uint64_t *len = mk + FT_GK_PROF_LEN + 2 * s;
                    g->prof_len[c][s][0] += (double)len[0];
                    g->prof_len[c][s][1] += (double)len[1];
                }
            }
            g->prof_t[c] = tm > g->prof_t[c] ? tm : g->prof_t[c];
            g->prof_launches[c]++;
            const uint64_t *gt = mk + FT_GK_PROF_GT;
            if (!prm.fuse && gt[0] != UINT64_MAX && gt[5] >= gt[0]) {
                for (int j = 0; j < 5; j++)
                    g->prof_gt[c][j] += (double)(gt[j + 1] - gt[0]);
                g->prof_gtn[c]++;
            }
        }
        if (n == 1 && prm.fuse)
            ft_gk_prof_chain_take(reqs[0]->T,
                                  (uint32_t)g->grid - prm.fuse_term,
                                  (uint32_t)g->grid);
        uint64_t sub[FT_MAX_T * 12];
        if (n == 1 && ft_gk_prof_sub(sub, (size_t)FT_MAX_T * 12) == 0) {
            for (uint32_t s = 0; s + 1 < tm; s++) {
                const uint64_t *a = sub + 8 * s;
                for (int j = 0; j < 5; j++)
                    g->prof_s[s][j] += (double)(a[j + 1] - a[j]);
                g->prof_s[s][5] += (double)a[6];
                g->prof_s[s][6] += (double)a[7];
                /* this launch's narrowing of step s (marks of an earlier
                 * launch lie outside the step's interval) */
                const uint64_t *nm = sub + FT_MAX_T * 8 + 4 * s;
                if (a[0] <= nm[0] && nm[0] <= nm[1] && nm[1] <= nm[2] &&
                    nm[2] <= a[1]) {
                    g->prof_n[s][0] += (double)(nm[0] - a[0]);
                    g->prof_n[s][1] += (double)(nm[1] - nm[0]);
                    g->prof_n[s][2] += (double)(nm[2] - nm[1]);
                    g->prof_n[s][3] += (double)nm[3];
                    g->prof_n[s][4] += 1.0;
                }
            }
            g->prof_s[tm - 1][5] += (double)sub[8 * (tm - 1) + 6];
            g->prof_s[tm - 1][6] += (double)sub[8 * (tm - 1) + 7];
            g->prof_sn++;
        }
    }
#endif
    assemble(eng, reqs, res, n);
    if (timing) {
        tk[5] = fti_now();
        cudaStreamSynchronize(g->stream); /* the events */
        float ms[3] = {0, 0, 0};
        cudaEventElapsedTime(&ms[0], g->ev[0], g->ev[1]);
        cudaEventElapsedTime(&ms[1], g->ev[1], g->ev[2]);
        cudaEventElapsedTime(&ms[2], g->ev[2], g->ev[3]);
        (void)cudaGetLastError();
        uint32_t b = 0;
        while (b < g->ntm && (g->tm[b].beam != reqs[0]->beam ||
                              g->tm[b].n != (uint32_t)n))
            b++;
        if (b < sizeof g->tm / sizeof g->tm[0]) {
            if (b == g->ntm) {
                g->ntm++;
                g->tm[b].beam = reqs[0]->beam;
                g->tm[b].n = (uint32_t)n;
            }
            struct gpu_timing *m = &g->tm[b];
            m->calls++;
            for (int k = 0; k < 4; k++) /* pack, issue, check, wait */
                m->sum[k] += tk[k + 1] - tk[k];
            for (int k = 0; k < 3; k++) /* h2d, kernel, d2h by events */
                m->sum[4 + k] += ms[k] * 1e-3;
            m->sum[7] += tk[5] - tk[4]; /* assembly */
            m->sum[8] += tk[5] - tk[0];
        }
    }
    return FT_OK;
cuda_fail_e:
    FT_ERROR("CUDA: search launch failed: %s", cudaGetErrorString(e));
cuda_fail:
    (void)cudaGetLastError();
    eng->failed = 1;
    fail_all(res, n, FT_ECUDA, "engine: CUDA error, the GPU engine failed");
    return FT_ECUDA;
}

static int gpu_run_checked(ft_engine *eng, const fti_prepared *const *reqs,
                           ft_result *const *res, size_t n,
                           fti_engine_check check, void *arg)
{
    gpu_engine *g = eng->impl;
    g->check = check;
    g->check_arg = arg;
    g->skip_failed = 1;
    int rc = gpu_run(eng, reqs, res, n);
    if (g->check) { /* no launch was issued: the check still runs */
        g->check = NULL;
        check(arg);
    }
    g->skip_failed = 0;
    return rc;
}

static int gpu_run(ft_engine *eng, const fti_prepared *const *reqs,
                   ft_result *const *res, size_t n)
{
    gpu_engine *g = eng->impl;
    const fti_prepared *batch[FTI_ENGINE_CHUNK];
    ft_result *bres[FTI_ENGINE_CHUNK];
    size_t m = 0;
    if (eng->failed) {
        fail_all(res, n, FT_ECUDA, "engine: the GPU engine failed earlier");
        return FT_ECUDA;
    }
    if (g->forest_member) {
        fail_all(res, n, FT_ESTATE, "engine: its trie is searched by a "
                                    "shard group's forest");
        return FT_ESTATE;
    }
    if (cudaSetDevice(g->device) != cudaSuccess) {
        (void)cudaGetLastError();
        eng->failed = 1;
        fail_all(res, n, FT_ECUDA, "engine: cannot select the GPU");
        return FT_ECUDA;
    }
    if (g->sn != 0 && abandon_steps(g) != cudaSuccess) {
        (void)cudaGetLastError();
        eng->failed = 1;
        fail_all(res, n, FT_ECUDA, "engine: CUDA error, the GPU engine "
                                   "failed");
        return FT_ECUDA;
    }
    for (size_t i = 0; i < n; i++) {
        if (reqs[i]->K > g->kmax || reqs[i]->T > g->tmax) {
            /* Too large for the batch slots: alone, in the big slot. */
            int rc = run_launch(eng, &reqs[i], &res[i], 1, 1);
            if (rc != FT_OK)
                return rc;
            continue;
        }
        batch[m] = reqs[i];
        bres[m] = res[i];
        if (++m == g->nslots) {
            int rc = run_launch(eng, batch, bres, m, 0);
            if (rc != FT_OK)
                return rc;
            m = 0;
        }
    }
    if (m > 0)
        return run_launch(eng, batch, bres, m, 0);
    return FT_OK;
}

/* ---- steps (a shard group drives them) --------------------------------
 *
 * begin packs the batch as run_launch does (one copy in); every expand is
 * one cooperative launch of the step kernel, whose first phase keeps the
 * previous step from recv (so keep enqueues nothing: the group's exchange
 * writes recv only after the next expand is enqueued); finish copies the
 * output back, waits, and assembles as run_launch does.  Nothing waits on
 * the host between begin and finish. */

/* STEP_CHECK logs and returns err when cond holds: a misuse of the step
 * contract by the caller (the steps have no error buffer). */
#define STEP_CHECK(cond, err, ...)                                            \
    do {                                                                      \
        if (cond) {                                                           \
            FT_ERROR("GPU engine: " __VA_ARGS__);                             \
            return (err);                                                     \
        }                                                                     \
    } while (0)

/* abandon_steps waits for a step batch that was never finished (its
 * group failed half-way) before its buffers are reused. */
static cudaError_t abandon_steps(gpu_engine *g)
{
    g->sn = 0;
    return cudaStreamSynchronize(g->stream);
}

static int step_fail(ft_engine *eng, cudaError_t e, const char *what)
{
    gpu_engine *g = eng->impl;
    FT_ERROR("CUDA: %s failed: %s", what, cudaGetErrorString(e));
    (void)cudaGetLastError();
    eng->failed = 1;
    g->sn = 0;
    return FT_ECUDA;
}

static int gpu_step_begin(ft_engine *eng, const fti_prepared *const *reqs,
                          size_t n, uint32_t shard, uint32_t nshards)
{
    gpu_engine *g = eng->impl;
    if (eng->failed)
        return FT_ECUDA;
    STEP_CHECK(
        n == 0 || n > FTI_ENGINE_CHUNK || nshards == 0 || shard >= nshards,
        FT_EINVAL, "steps: %zu requests, shard %u of %u", n, shard, nshards);
    STEP_CHECK(g->d_forest != NULL, FT_ESTATE,
               "steps: the engine searches a forest of %u shards",
               g->nforest);
    STEP_CHECK(g->forest_member, FT_ESTATE,
               "steps: the engine's trie is searched by a forest");
    /* The batch rides in the slots: up to max_batch requests that fit
     * them, or one request alone in the big slot. */
    int big = 0;
    uint32_t tmax = 0;
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        if (reqs[i]->K > g->kmax || reqs[i]->T > g->tmax)
            big = 1;
        tmax = reqs[i]->T > tmax ? reqs[i]->T : tmax;
        len += reqs[i]->beam;
    }
    STEP_CHECK(big && (n > 1 || !g->has_big), FT_ELIMIT,
                       "steps: a request larger than the slots (K %u, T %u) "
                       "must come alone", g->kmax, g->tmax);
    STEP_CHECK(n > g->nslots, FT_ELIMIT,
                       "steps: %zu requests, the engine has %u slots", n,
                       g->nslots);
    if (cudaSetDevice(g->device) != cudaSuccess)
        return step_fail(eng, cudaGetLastError(), "cudaSetDevice");
    if (g->sn != 0 && abandon_steps(g) != cudaSuccess)
        return step_fail(eng, cudaGetLastError(), "cudaStreamSynchronize");
    STEP_CHECK(g->blist_cap && len * nshards > g->blist_cap, FT_ELIMIT,
               "steps: %zu x %u keys exceed the shared lists (%zu)", len,
               nshards, g->blist_cap);
    if (!g->blist_cap && len * nshards > g->recv_cap) {
        /* A larger group than before: grow once (cudaFree waits for the
         * device, so nothing in flight still reads the old one). */
        size_t cap = g->send_cap * nshards;
        cudaFree(g->d_recv);
        g->d_recv = NULL;
        g->recv_cap = 0;
        cudaError_t e = cudaMalloc((void **)&g->d_recv, cap * 8);
        if (e != cudaSuccess)
            return step_fail(eng, e, "cudaMalloc (exchange buffer)");
        g->recv_cap = cap;
    }
    size_t in_off = ALIGN16(n * sizeof(ft_gk_req));
    size_t out_off = 0;
    uint32_t xoff = 0;
    for (size_t i = 0; i < n; i++) {
        gpu_slot *slot = big ? &g->slots[g->nslots] : &g->slots[i];
        pack_req(g, (ft_gk_req *)(g->h_in + i * sizeof(ft_gk_req)), reqs[i],
                 slot, &eng->idx->root, &in_off, &out_off, 1, xoff);
        xoff += reqs[i]->beam;
        g->sreq[i] = reqs[i];
    }
    cudaError_t e = next_params(g, &g->sprm, n);
    /* The step kernel selects one CTA a list; the shard kernels spread
     * their selection where an unsharded launch would (kxparams.spread:
     * every short list within FT_GK_LIST_MAX). */
    g->sspread = g->sprm.spread;
    g->sprm.spread = 0;
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(g->d_in, g->h_in, in_off, cudaMemcpyHostToDevice,
                            g->stream);
    if (e != cudaSuccess)
        return step_fail(eng, e, "step batch copy");
    g->sn = n;
    g->slen = len;
    g->sout = out_off;
    g->shard = shard;
    g->nshards = nshards;
    g->stmax = tmax;
    g->snext = 0;
    g->skept = 0;
    return FT_OK;
}

/* ---- a forest (fti_engine_gpu_forest, issue 36) ---------------------- */

/* forest_slots makes every slot of g again for a wider level (wmax): the
 * forest's candidates of a step are those of every shard at one depth.
 * Returns FT_OK, or FT_ECUDA with the engine then failed (a slot could
 * not be made). */
static int forest_slots(gpu_engine *g, uint64_t wmax)
{
    g->wmax = wmax;
    uint32_t ns = g->nslots + (uint32_t)g->has_big;
    for (uint32_t i = 0; i < ns; i++) {
        uint32_t kmax = g->slots[i].kmax, tmax = g->slots[i].d.tmax;
        slot_free(&g->slots[i]);
        if (slot_alloc(g, &g->slots[i], kmax, tmax) != FT_OK)
            return FT_ECUDA;
    }
    if (g->fuse_lists == &g->alt) {
        uint32_t kmax = g->alt.kmax, tmax = g->alt.d.tmax;
        slot_free(&g->alt);
        if (slot_alloc(g, &g->alt, kmax, tmax) != FT_OK)
            return FT_ECUDA;
    }
    return FT_OK;
}

int fti_engine_gpu_forest(ft_engine *eng, ft_engine *const *shards, size_t n,
                          const uint64_t *key_base, char *why, size_t len)
{
    if (len)
        why[0] = 0;
    if (eng->ops != &gpu_ops) {
        snprintf(why, len, "not a GPU engine");
        return FT_ENOTSUP;
    }
    gpu_engine *g = eng->impl;
    if (n == 0 || n > FT_GK_FOREST_MAX) {
        snprintf(why, len, "%zu shards (a forest holds 1..%u)", n,
                 FT_GK_FOREST_MAX);
        return FT_ENOTSUP;
    }
    if (eng->failed || g->sn != 0 || g->forest_member) {
        snprintf(why, len, "the engine failed, has steps in flight or "
                 "lends its trie to another forest");
        return FT_ESTATE;
    }
    uint64_t wmax = 0, keys = 0, rdeg = 0;
    for (size_t s = 0; s < n; s++) {
        if (shards[s]->ops != &gpu_ops || shards[s]->failed ||
            ((gpu_engine *)shards[s]->impl)->device != g->device) {
            snprintf(why, len, "shard %zu is not a working GPU engine on "
                     "GPU %d", s, g->device);
            return FT_ENOTSUP;
        }
        const gpu_engine *gs = shards[s]->impl;
        const ft_index *x = shards[s]->idx;
        wmax += gs->wmax;
        rdeg += x->root.deg;
        uint64_t end = key_base[s] + x->trie.n_keys;
        keys = end > keys ? end : keys;
    }
    if (rdeg > UINT32_MAX) {
        snprintf(why, len, "%llu root children", (unsigned long long)rdeg);
        return FT_ENOTSUP;
    }
    /* The root children of every shard, sorted by label: two shards with
     * one first token are refused; the table is what step 0 searches
     * when the labels are too large for a map. */
    const ft_index *xs[FT_GK_FOREST_MAX];
    for (size_t s = 0; s < n; s++)
        xs[s] = shards[s]->idx;
    fti_forest_root *rt;
    size_t m;
    int mapok;
    int frc = fti_forest_roots(xs, n, &rt, &m, &mapok, why, len);
    if (frc != FT_OK)
        return frc;
    ft_gk_tree *tr = calloc(n, sizeof *tr);
    if (tr == NULL) {
        free(rt);
        snprintf(why, len, "out of memory");
        return FT_ENOMEM;
    }
    int values = 1; /* every tree's values on the device */
    for (size_t s = 0; s < n; s++) {
        const gpu_engine *gs = shards[s]->impl;
        tr[s].view = gs->view;
        tr[s].ctab = gs->d_ctab;
        tr[s].cmap = gs->d_cmap;
        tr[s].cmap_mask = gs->cmap_mask;
        tr[s].cmap_min = gs->d_cmap ? gs->cmap_min : UINT32_MAX;
        tr[s].term_rank = gs->dsec[FT_SEC_TERM_RANK];
        tr[s].key_base = key_base[s];
        tr[s].values = gs->use_values ? gs->dsec[FT_SEC_VALUES] : NULL;
        tr[s].value_bits = gs->value_bits;
        values &= tr[s].values != NULL;
    }
    /* A dense map (label -> shard and child: one load at step 0) where
     * the labels allow it, else the sorted table. */
    uint32_t mapn = mapok && m ? (uint32_t)rt[m - 1].label + 1u : 0;
    uint32_t *map = mapn ? calloc(mapn, sizeof *map) : NULL;
    if (mapn && map == NULL) {
        free(rt);
        free(tr);
        snprintf(why, len, "out of memory");
        return FT_ENOMEM;
    }
    for (size_t i = 0; mapn && i < m; i++)
        map[rt[i].label] =
            (uint32_t)((rt[i].node >> FT_GK_TREE_SHIFT) << FT_GK_ROOT_SHIFT) |
            (uint32_t)(rt[i].node & FT_GK_TREE_MASK);
    int rc = FT_OK;
    ft_gk_tree *dtr = NULL;
    uint32_t *dmap = NULL;
    uint64_t *dtab = NULL;
    if (cudaSetDevice(g->device) != cudaSuccess ||
        cudaStreamSynchronize(g->stream) != cudaSuccess ||
        cudaMalloc((void **)&dtr, n * sizeof *dtr) != cudaSuccess ||
        cudaMemcpy(dtr, tr, n * sizeof *dtr, cudaMemcpyHostToDevice) !=
            cudaSuccess ||
        (mapn && (cudaMalloc((void **)&dmap, (size_t)mapn * 4) != cudaSuccess ||
                  cudaMemcpy(dmap, map, (size_t)mapn * 4,
                             cudaMemcpyHostToDevice) != cudaSuccess)) ||
        (!mapn && m &&
         (cudaMalloc((void **)&dtab, m * sizeof *rt) != cudaSuccess ||
          cudaMemcpy(dtab, rt, m * sizeof *rt, cudaMemcpyHostToDevice) !=
              cudaSuccess))) {
        snprintf(why, len, "CUDA: %s", cudaGetErrorString(cudaGetLastError()));
        cudaFree(dtr);
        cudaFree(dmap);
        cudaFree(dtab);
        rc = FT_ECUDA;
    }
    free(map);
    free(rt);
    free(tr);
    if (rc != FT_OK)
        return rc;
    if (wmax > g->wmax && forest_slots(g, wmax) != FT_OK) {
        (void)cudaGetLastError();
        eng->failed = 1;
        cudaFree(dtr);
        cudaFree(dmap);
        cudaFree(dtab);
        snprintf(why, len, "no GPU memory for slots of the forest's widest "
                 "level (%llu candidates): the engine failed",
                 (unsigned long long)wmax);
        return FT_ECUDA;
    }
    /* The other shards' engines lend their tries and search nothing
     * themselves any more: their slots (GBs each at the default caps)
     * go back to the GPU. */
    for (size_t s = 0; s < n; s++) {
        gpu_engine *gs = shards[s]->impl;
        if (shards[s] == eng || gs->forest_member)
            continue;
        slots_release(gs);
        gs->forest_member = 1;
    }
    cudaFree(g->d_forest);
    cudaFree(g->d_froot_map);
    cudaFree(g->d_froot_tab);
    g->d_forest = dtr;
    g->nforest = (uint32_t)n;
    g->forest_keys = keys;
    g->forest_values = values;
    g->d_froot_map = dmap;
    g->froot_n = mapn;
    g->d_froot_tab = dtab;
    g->froot_cnt = (uint32_t)m;
    memset(&g->froot, 0, sizeof g->froot);
    g->froot.deg = rdeg;
    return FT_OK;
}

int fti_engine_gpu_share(ft_engine *eng, uint32_t ways)
{
    if (eng->ops != &gpu_ops)
        return FT_ENOTSUP;
    gpu_engine *g = eng->impl;
    uint32_t w = ways ? ways : 1;
    g->sgrid_use = g->sgrid / (int)w > 0 ? g->sgrid / (int)w : 1;
    g->xgrid_use = g->xgrid / (int)w;
    return FT_OK;
}

int fti_engine_gpu_xgrid(ft_engine *eng, int *use, int *full)
{
    *use = *full = 0;
    if (eng->ops != &gpu_ops)
        return FT_ENOTSUP;
    gpu_engine *g = eng->impl;
    *use = g->xgrid_use;
    *full = g->xgrid;
    return FT_OK;
}

int fti_engine_gpu_steps_all(ft_engine *eng, const fti_gpu_xbar *xb)
{
    if (eng->ops != &gpu_ops)
        return FT_ENOTSUP;
    gpu_engine *g = eng->impl;
    if (g->sn == 0 || eng->failed)
        return FT_ESTATE;
    STEP_CHECK(g->snext != 0 || !g->blist_cap || g->xgrid_use < 1, FT_ESTATE,
               "steps: the shard kernel needs a begun batch, bound lists "
               "and a grid");
    if (cudaSetDevice(g->device) != cudaSuccess)
        return step_fail(eng, cudaGetLastError(), "cudaSetDevice");
    ft_gk_kxparams k;
    memset(&k, 0, sizeof k);
    k.list[0] = g->blist[0];
    k.list[1] = g->blist[1];
    k.ctr = xb->ctr;
    k.err = xb->err;
    k.abort = xb->abort;
    k.herr = xb->herr;
    k.prof = xb->prof;
    k.base = xb->base;
    k.timeout = xb->timeout;
    k.len = g->slen;
    k.shard = g->shard;
    k.nshards = g->nshards;
    k.tmax = g->stmax;
    k.total = xb->total;
    /* the selection spread (where an unsharded launch would spread and,
     * by default, where each of the batch's lists can have
     * FT_GK_SPREAD_MIN_G CTAs) and the early beams (search/shard.cuh),
     * unless the group's mode says otherwise */
    int wide = (uint64_t)g->xgrid_use >= 2ull * FT_GK_SPREAD_MIN_G * g->sn;
    k.spread = !g->sspread || (xb->mode & FTI_SHARD_CTA) ? 0u
               : (xb->mode & FTI_SHARD_SPREAD)            ? 2u
               : wide                                     ? 1u
                                                          : 0u;
    k.early = g->sn <= FT_GK_EARLY_MAX && !(xb->mode & FTI_SHARD_NO_EARLY);
    cudaError_t e;
    if (xb->nwin != NULL) {
        /* across GPUs: the windows hold the lists and the meeting's
         * words (kernels/ft_kernels.h, ft_gk_nxparams) */
        ft_gk_nxparams nx;
        memset(&nx, 0, sizeof nx);
        nx.win = xb->nwin;
        nx.seq = xb->nseq;
        nx.inbox = xb->noff_inbox;
        nx.words = xb->noff_words;
        nx.list[0] = xb->noff_list[0];
        nx.list[1] = xb->noff_list[1];
        nx.rank = xb->nrank;
        nx.nranks = xb->nranks;
        e = (cudaError_t)ft_gk_nstep_launch(&g->sprm, &k, &nx, g->xgrid_use,
                                            g->xblock, g->xsmem, g->stream);
    } else {
        e = (cudaError_t)ft_gk_xstep_launch(&g->sprm, &k, g->xgrid_use,
                                            g->xblock, g->xsmem, g->stream);
    }
    if (e != cudaSuccess)
        return step_fail(eng, e, "shard kernel launch");
    g->snext = g->stmax;
    g->skept = 1;
    return FT_OK;
}

int fti_engine_gpu_nccl_kernel(ft_engine *eng, char *why, size_t len)
{
    if (eng->ops != &gpu_ops) {
        snprintf(why, len, "not a GPU engine");
        return 0;
    }
    gpu_engine *g = eng->impl;
    int grid = 0, block;
    size_t smem;
    if (cudaSetDevice(g->device) != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(why, len, "cudaSetDevice(%d) failed", g->device);
        return 0;
    }
    cudaError_t e = (cudaError_t)ft_gk_nstep_config(&grid, &block, &smem);
    (void)cudaGetLastError();
    if (e == cudaErrorNotSupported) {
        snprintf(why, len, "this build has no NCCL device API (nccl_device.h "
                 "of NCCL 2.28 or later was not found at build time)");
        return 0;
    }
    if (e != cudaSuccess || grid < 1 || g->xgrid_use < 1) {
        snprintf(why, len, "its shard kernel cannot be launched on GPU %d "
                 "(%s)", g->device, cudaGetErrorString(e));
        return 0;
    }
    return 1;
}

int fti_engine_gpu_bind_lists(ft_engine *eng, uint64_t *list0, uint64_t *list1,
                              size_t cap)
{
    if (eng->ops != &gpu_ops)
        return FT_ENOTSUP;
    gpu_engine *g = eng->impl;
    g->blist[0] = list0;
    g->blist[1] = list1;
    g->blist_cap = list0 && list1 ? cap : 0;
    return FT_OK;
}

/* step_lists gives the exchange buffers of step t: the own ones, or with
 * bound lists the step parity's shared one (send is this shard's slot). */
static void step_lists(const gpu_engine *g, uint32_t t, uint64_t **send,
                       uint64_t **recv)
{
    if (g->blist_cap) {
        *recv = g->blist[t & 1u];
        *send = *recv + (size_t)g->shard * g->slen;
    } else {
        *send = g->d_send;
        *recv = g->d_recv;
    }
}

static int gpu_step_buffers(ft_engine *eng, uint64_t **send, uint64_t **recv,
                            size_t *len)
{
    gpu_engine *g = eng->impl;
    if (g->sn == 0)
        return FT_ESTATE;
    /* The lists of the step expanded last. */
    step_lists(g, g->snext ? g->snext - 1 : 0, send, recv);
    *len = g->slen;
    return FT_OK;
}

static int gpu_step_expand(ft_engine *eng, uint32_t t)
{
    gpu_engine *g = eng->impl;
    if (g->sn == 0 || eng->failed)
        return FT_ESTATE;
    STEP_CHECK(t != g->snext || (t > 0 && !g->skept), FT_ESTATE,
                       "steps: expand %u out of order (expected %u%s)", t,
                       g->snext, t > 0 && !g->skept ? " after keep" : "");
    if (cudaSetDevice(g->device) != cudaSuccess)
        return step_fail(eng, cudaGetLastError(), "cudaSetDevice");
    ft_gk_xparams x;
    memset(&x, 0, sizeof x);
    uint64_t *send, *recv, *psend;
    step_lists(g, t, &send, &recv);
    x.send = send;
    if (t > 0)
        step_lists(g, t - 1, &psend, &recv); /* keep reads step t - 1's */
    x.recv = recv;
    x.len = g->slen;
    x.shard = g->shard;
    x.nshards = g->nshards;
    x.t = t;
    x.keep = t > 0;
    cudaError_t e = (cudaError_t)ft_gk_step_launch(
        &g->sprm, &x, g->sgrid_use, g->sblock, g->ssmem, g->stream);
    if (e != cudaSuccess)
        return step_fail(eng, e, "step kernel launch");
    g->snext = t + 1;
    g->skept = 0;
    return FT_OK;
}

static int gpu_step_keep(ft_engine *eng, uint32_t t)
{
    gpu_engine *g = eng->impl;
    if (g->sn == 0 || eng->failed)
        return FT_ESTATE;
    STEP_CHECK(t + 1 != g->snext || g->skept, FT_ESTATE,
                       "steps: keep %u out of order (expanded %u)", t,
                       g->snext);
    g->skept = 1; /* runs first in the next expand's launch */
    return FT_OK;
}

static int gpu_step_finish(ft_engine *eng, ft_result *const *res)
{
    gpu_engine *g = eng->impl;
    if (g->sn == 0)
        return FT_ESTATE;
    size_t n = g->sn;
    if (eng->failed) {
        g->sn = 0;
        fail_all(res, n, FT_ECUDA, "engine: CUDA error, the GPU engine "
                                   "failed");
        return FT_ECUDA;
    }
    if (g->snext < g->stmax) {
        g->sn = 0;
        FT_ERROR("GPU engine: steps: finish after %u of %u steps",
                 g->snext, g->stmax);
        fail_all(res, n, FT_ESTATE, "engine: steps finished early");
        return FT_ESTATE;
    }
    cudaError_t e = cudaSetDevice(g->device);
    if (e == cudaSuccess && g->hd_out == NULL)
        e = cudaMemcpyAsync(g->h_out, g->d_out, g->sout,
                            cudaMemcpyDeviceToHost, g->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(g->stream);
    if (e != cudaSuccess) {
        step_fail(eng, e, "step results copy");
        fail_all(res, n, FT_ECUDA, "engine: CUDA error, the GPU engine "
                                   "failed");
        return FT_ECUDA;
    }
    assemble(eng, g->sreq, res, n);
    g->sn = 0;
    return FT_OK;
}

static void *gpu_stream(ft_engine *eng)
{
    gpu_engine *g = eng->impl;
    return (void *)g->stream;
}

static void gpu_timing_report(const ft_engine *eng, char *buf, size_t len)
{
    static const char *const nm[9] = {
        "pack", "h2d+launch+d2h issue", "check while running", "wait",
        "h2d (events)", "kernel (events)", "d2h (events)", "assembly",
        "launch total"};
    const gpu_engine *g = eng->impl;
    size_t o = 0;
    buf[0] = 0;
    if (!g->timing)
        return;
    o += (size_t)snprintf(buf + o, len - o,
                          "gpu host timing (child table %zu MB, child map "
                          "%zu MB for nodes of %u+ children), us per "
                          "launch:\n", g->ctab_bytes >> 20,
                          g->cmap_bytes >> 20, g->cmap_min);
    for (uint32_t b = 0; b < g->ntm && o < len; b++) {
        o += (size_t)snprintf(buf + o, len - o,
                              "  beam %u, %u request(s), %llu launches:",
                              g->tm[b].beam, g->tm[b].n,
                              (unsigned long long)g->tm[b].calls);
        for (int i = 0; i < 9 && o < len; i++)
            o += (size_t)snprintf(buf + o, len - o, " %s %.1f;", nm[i],
                                  g->tm[b].sum[i] * 1e6 /
                                      (double)g->tm[b].calls);
        if (o < len)
            o += (size_t)snprintf(buf + o, len - o, "\n");
    }
}

int fti_gpu_memory(uint64_t *used, uint64_t *total, int device)
{
    *used = *total = 0;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || device < 0 ||
        device >= count) {
        (void)cudaGetLastError();
        return FT_ENODEV;
    }
    size_t fr = 0, tot = 0;
    if (cudaSetDevice(device) != cudaSuccess ||
        cudaMemGetInfo(&fr, &tot) != cudaSuccess) {
        (void)cudaGetLastError();
        return FT_ECUDA;
    }
    *used = (uint64_t)(tot - fr);
    *total = (uint64_t)tot;
    return FT_OK;
}

#endif /* FT_HAVE_CUDA */
