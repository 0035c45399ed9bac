/*
 * search/state.cuh - what every phase of the search kernel shares: the
 * tunables, the shared-memory layout (gk_smem), the list shapes and child
 * lookups that every phase must agree on, and the warp-aggregated appends.
 *
 * The phase headers under kernels/search/ are not standalone: they are
 * parts of one translation unit, kernels/ft_search.cu, which includes them
 * in a fixed order (each may use what the earlier ones define).  Keeping
 * the device code in one translation unit keeps its machine code what it
 * was before the split: the compiler sees every device function, inlines
 * as before and needs no relocatable device code.
 */
#ifndef FT_SEARCH_STATE_CUH
#define FT_SEARCH_STATE_CUH

#include <cooperative_groups.h>
#include <cub/block/block_scan.cuh>
#include <cub/warp/warp_scan.cuh>
#include <cub/warp/warp_reduce.cuh>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft_ctab.cuh"
#include "ft_kernels.h"
#include "flashtrie/internal/rules.h"

namespace cg = cooperative_groups;

#include "search/entry.h"
#include "search/profile.cuh"

/* (FT_GK_BLOCK, the threads of a CTA: search/entry.h) */
#ifndef FT_GK_MINB
#define FT_GK_MINB 1 /* one CTA of 512 per SM, up to 128 registers: on the
                      * H200 faster than two of 64 registers (which spill),
                      * at b = 1 by 10-20% (docs/gpu-engine.md) */
#endif
#define FT_GK_WARPS (FT_GK_BLOCK / 32)
#define FT_GK_SORT_MAX FT_GK_LIST_MAX
#define FT_GK_GRID_LISTS 64u /* lists one round of the grid select takes */
#ifndef FT_GK_BUCKETS
#define FT_GK_BUCKETS 1 /* 0: next lists narrowed, then ranked by counting */
#endif
#ifndef FT_GK_BUCKET_MIN
#define FT_GK_BUCKET_MIN 256u /* next lists this long rank by buckets */
#endif
#ifndef FT_GK_LOAD_U
#define FT_GK_LOAD_U 4u /* list entries a thread loads at once (spread) */
#endif
#ifndef FT_GK_TERM_CUT
#define FT_GK_TERM_CUT 1 /* 0: every terminal candidate is appended */
#endif

/* gk_gstate is the grid selection's state of one long list, kept (the
 * same) by every CTA: the keys still in the race are those whose bits
 * under pmask equal prefix; need of them still belong to the best lim. */
struct gk_gstate {
    uint64_t prefix, pmask;
    uint32_t need, lim, m, sh; /* sh: lowest bit of the next 8-bit digit */
    uint32_t done, list;       /* list = 2 * request + (1: terminal) */
    uint32_t cap, off;         /* off: where the list starts among the
                                * round's lists laid end to end */
};

/* The counting ranks of gk_spread_rank and the terminal merge: owned
 * survivors (their place in key), their ranks, their first items (next
 * list) or the running results' shifts (terminal). */
struct gk_rank_smem {
    uint32_t ocs[FT_GK_SORT_MAX];
    uint16_t own[FT_GK_SORT_MAX];
    uint16_t orank[FT_GK_SORT_MAX];
};

/* A next list ranked by buckets (gk_spread_next): per bucket of a 10-bit
 * digit its count, its first item and its first place (after the scan),
 * the scatter's cursor, and the list's places grouped by bucket; the
 * warps' key bounds. */
#define GK_NB 1024u
struct gk_bucket_smem {
    uint32_t cnt[GK_NB];
    uint32_t isum[GK_NB];
    uint32_t st[GK_NB];
    uint32_t cur[GK_NB];
    uint16_t pos[FT_GK_SORT_MAX];
    uint64_t wmin[FT_GK_WARPS], wmax[FT_GK_WARPS];
    /* here, not beside gk_smem's scan: a launch that does not spread
     * leaves sp out of its shared memory, and 4 KB less of it is 4 KB
     * more L1 */
    cub::BlockScan<uint64_t, FT_GK_BLOCK>::TempStorage scan64;
};

/* A fused launch's beams of the next step, as every selecting CTA keeps
 * them (gk_spread_next<true>): beam r is the next candidate at place p[r]
 * of sm.key / sm.idx, its first expansion item cs[r]; n beams, tot items
 * in all. */
struct gk_local_beams {
    uint32_t cs[FT_GK_SORT_MAX];
    uint16_t p[FT_GK_SORT_MAX];
    uint32_t n, tot;
};

/* A step's first round (gk_r1_setup): when the whole step would examine
 * many more candidates than its lists need, it first expands only those
 * whose sigma is above theta (each beam's cut from theta, kc, its first
 * item in that numbering, cs), and a second round only runs if that did
 * not find enough (gk_r1_check).  Per beam also its sigma and its child
 * count (capped), from which the cuts and items are computed. */
#define GK_R1_MAX 2048u
struct gk_r1_smem {
    uint32_t cs[GK_R1_MAX];
    float sig[GK_R1_MAX];
    uint32_t deg[GK_R1_MAX];
    uint16_t kc[GK_R1_MAX];
    uint32_t tot, on;
    uint32_t rc; /* gk_r1_check: the first round found enough */
    float th[FT_GK_WARPS];     /* gk_r1_setup's probes: theta, */
    uint32_t est[FT_GK_WARPS]; /* and the proposals above it */
};

/* The spread selection's shared memory (gk_spread_list): survivors'
 * expansion items (or the running results' score keys), then the
 * counting ranks or the buckets.  Last in gk_smem: a launch that does
 * not spread (lazy, and the step kernel) leaves it out of its dynamic
 * shared memory, which leaves the SM that much more L1 (b = 32: 5-10% of
 * the kernel). */
struct gk_spread_smem {
    union {
        uint32_t items[FT_GK_SORT_MAX];
        uint64_t pk[FT_GK_SORT_MAX / 2]; /* terminal: running score keys */
    };
    union {
        gk_rank_smem r;   /* gk_spread_rank and the terminal merge */
        gk_bucket_smem b; /* gk_spread_next */
        gk_r1_smem r1;    /* the expansion's first round (gk_r1_setup) */
    } u;
    gk_local_beams lb; /* fused launches */
};

/* Shared memory of the selection phase. */
/* Requests of a launch that spreads its selection: at most 3 (the engine's
 * lazy_min is 4), their descriptors in shared memory (gk_smem.rq). */
#define GK_RQ_MAX 3u

struct gk_smem {
    uint64_t key[FT_GK_SORT_MAX];
    uint32_t idx[FT_GK_SORT_MAX];
    uint32_t hist[256];
    /* CUB's block and warp scans (the same algorithms as a hand-written
     * shuffle scan, and no slower) */
    cub::BlockScan<uint32_t, FT_GK_BLOCK>::TempStorage scan;
    cub::WarpScan<uint32_t>::TempStorage wscan[FT_GK_WARPS];
    uint32_t count;
    uint32_t need;
    uint32_t bucket;
    uint32_t done;
    gk_gstate gs[FT_GK_GRID_LISTS];
    gk_gstate loc;  /* gk_smem_narrow's race */
    uint64_t kmin, kmax;
    uint32_t laid; /* gk_end_to_end's total */
    uint32_t glen[2]; /* a fused launch's list lengths (gk_grid_select) */
    uint64_t tcut;    /* a fused launch's terminal cut of the next step */
    gk_spread_smem sp; /* last but rq (gk_launch_smem) */
    /* The request descriptors of a spread (or fused) launch, copied from
     * P.reqs once at its start (ft_gk_search): a descriptor is read-only
     * in the kernel, and every grid barrier's fence empties the L1, so
     * each chain of loads that starts at a descriptor field (a list's
     * pointer, a row, the step counters' address) paid an L2 round trip
     * at every step. */
    ft_gk_req rq[GK_RQ_MAX];
};

/* Request i of the launch: a spread (or fused) launch's from its copy in
 * shared memory (gk_smem.rq, which only those launches have), any other
 * from P.reqs. */
template <bool FUSE>
__device__ __forceinline__ ft_gk_req *gk_req(const ft_gk_params &P,
                                             gk_smem *sm, uint32_t i)
{
    if (FUSE)
        return &sm->rq[0];
    return P.spread && i < GK_RQ_MAX ? &sm->rq[i] : &P.reqs[i];
}

/* ---- list shapes, shared by every phase so that all agree ------------- */

/* Eager child ranges: in a launch of few requests (!lazy) the first
 * eager_max next candidates of a step get their child range and cut
 * during the expansion, by the whole grid, the chains overlapping while
 * the grid is mostly idle.  Candidates after them (a step of a million)
 * get theirs only if they survive a grid selection (gk_grid_select), or
 * from the selecting CTA (gk_build_beams), like every candidate of a
 * lazy launch. */
__device__ __forceinline__ int gk_eager(const ft_gk_params &P, uint32_t c)
{
    return !P.lazy && c < P.eager_max;
}

/* Step t's candidate lists and grid-selection counters: the slot's, or
 * in a fused launch (FUSE) alt's when t is odd (ft_gk_lists). */
template <bool FUSE>
__device__ __forceinline__ ft_gk_lists gk_lists(const ft_gk_params &P,
                                                const ft_gk_req *q,
                                                uint32_t t)
{
    return FUSE && (t & 1u) ? P.alt : ft_gk_lists_of(&q->slot);
}

/* Candidates of request q's list (0: next, 1: terminal) at step t, capped
 * at the arena (an overflow is reported through steps[0].err). */
__device__ __forceinline__ uint32_t gk_list_len(const ft_gk_req *q,
                                                uint32_t t, uint32_t term)
{
    uint32_t m = term ? q->steps[t].n_term : q->steps[t].n_next;
    return m > q->slot.cap_cand ? (uint32_t)q->slot.cap_cand : m;
}

/* Node u's child range: from the child table T (kernels/ft_ctab.cuh)
 * when there is one, else from the trie V. */
__device__ __forceinline__ ft_child_range gk_range_of(const ft_trie_view &V,
                                                    const uint64_t *T,
                                                    uint64_t u)
{
    return T ? ft_ctab_range(T, u) : ft_children(&V, u);
}

/* ---- a forest (ft_gk_tree: a shard group's tries, one launch) ----------
 * Every read of the trie goes through these: without a forest (P.forest
 * NULL, every launch but a forest's) they are the plain reads of P.view;
 * with one, node u belongs to tree u >> FT_GK_TREE_SHIFT and is read
 * there at its own id, and what comes back carries the tree's bits. */
/* The trees, copied into every CTA's shared memory when its launch
 * starts (gk_forest_load): read at every step of every chain of loads,
 * they would otherwise go back and forth between L1 and L2 with the
 * expansion's data (the launches without a forest never touch them). */
__shared__ ft_gk_tree gk_forest_sm[FT_GK_FOREST_MAX];

__device__ __forceinline__ void gk_forest_load(const ft_gk_params &P)
{
    const uint64_t *src = reinterpret_cast<const uint64_t *>(P.forest);
    uint64_t *dst = reinterpret_cast<uint64_t *>(gk_forest_sm);
    uint32_t n = P.nforest < FT_GK_FOREST_MAX ? P.nforest : FT_GK_FOREST_MAX;
    for (uint32_t i = threadIdx.x; i < n * (sizeof(ft_gk_tree) / 8);
         i += blockDim.x)
        dst[i] = __ldg(src + i);
    __syncthreads();
}

/* The tree of node u (or of a range whose first child is u). */
__device__ __forceinline__ const ft_gk_tree *gk_tree(uint64_t u)
{
    return &gk_forest_sm[u >> FT_GK_TREE_SHIFT];
}

__device__ __forceinline__ ft_child_range gk_local(const ft_child_range &cr)
{
    ft_child_range l = cr;
    l.first &= FT_GK_TREE_MASK;
    l.hstart &= FT_GK_TREE_MASK;
    return l;
}

__device__ __forceinline__ uint32_t gk_flags(const ft_gk_params &P,
                                             uint64_t u)
{
    if (P.forest)
        return ft_node_flags(&gk_tree(u)->view, u & FT_GK_TREE_MASK);
    return ft_node_flags(&P.view, u);
}

/* The label of child u of range cr. */
__device__ __forceinline__ uint32_t gk_label(const ft_gk_params &P,
                                             const ft_child_range &cr,
                                             uint64_t u)
{
    if (P.forest) {
        ft_child_range l = gk_local(cr);
        return ft_child_label(&gk_tree(u)->view, &l,
                              u & FT_GK_TREE_MASK);
    }
    return ft_child_label(&P.view, &cr, u);
}

/* A forest's root child labelled tok from its sorted root table
 * (P.root_tab: a forest without a root map), or FT_NONE. */
__device__ __forceinline__ uint64_t gk_root_find(const ft_gk_params &P,
                                                 uint32_t tok)
{
    uint32_t lo = 0, hi = P.root_cnt; /* [lo, hi) */
    while (lo < hi) {
        uint32_t mid = lo + ((hi - lo) >> 1);
        if (P.root_tab[2 * (uint64_t)mid] < tok)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < P.root_cnt && P.root_tab[2 * (uint64_t)lo] == tok
               ? P.root_tab[2 * (uint64_t)lo + 1]
               : FT_NONE;
}

/* The child of range cr labelled tok (a binary search), or FT_NONE. */
__device__ __forceinline__ uint64_t gk_find(const ft_gk_params &P,
                                           const ft_child_range &cr,
                                           uint32_t tok)
{
    if (P.forest) {
        ft_child_range l = gk_local(cr);
        uint64_t c = ft_find_child(&gk_tree(cr.first)->view, &l, tok);
        return c == FT_NONE ? FT_NONE : c | (cr.first & ~FT_GK_TREE_MASK);
    }
    return ft_find_child(&P.view, &cr, tok);
}

/* Node u's child table entries (gk_range_of's two) on their way to L2
 * (P.pf_ranges 1) or to this SM's L1 (2) while the expansion's other
 * loads of u are in flight: the new beam's range (gk_children, after the
 * append) then costs a hit, not a miss. */
__device__ __forceinline__ void gk_pf_range(const ft_gk_params &P, int on,
                                            uint64_t u)
{
    if (!on)
        return;
    const uint64_t *a;
    if (P.forest) {
        const uint64_t *T = gk_tree(u)->ctab;
        if (T == NULL)
            return;
        a = T + 2 * (u & FT_GK_TREE_MASK);
    } else {
        a = P.ctab + 2 * u;
    }
    if ((P.pf_ranges & 3u) == 1u) {
        asm volatile("prefetch.global.L2 [%0];" ::"l"(a));
        asm volatile("prefetch.global.L2 [%0];" ::"l"(a + 2));
    } else {
        asm volatile("prefetch.global.L1 [%0];" ::"l"(a));
        asm volatile("prefetch.global.L1 [%0];" ::"l"(a + 2));
    }
}

/* A new next candidate's children (range cr): the first lines of their
 * labels and flags on their way to L2 (P.pf_ranges & 4), which the next
 * step's expansion reads if it becomes a beam. */
__device__ __forceinline__ void gk_pf_next(const ft_gk_params &P,
                                           const ft_child_range &cr)
{
    if (!(P.pf_ranges & 4u) || cr.deg == 0)
        return;
    const ft_trie_view *V = P.forest ? &gk_tree(cr.first)->view : &P.view;
    uint64_t f = cr.first & FT_GK_TREE_MASK;
    asm volatile("prefetch.global.L2 [%0];" ::"l"(V->label_lo + f));
    asm volatile("prefetch.global.L2 [%0];" ::"l"(V->flags + (f >> 5)));
}

__device__ __forceinline__ ft_child_range gk_children(const ft_gk_params &P,
                                                      uint64_t u)
{
    if (P.forest) {
        const ft_gk_tree *T = gk_tree(u);
        uint64_t hi = u & ~FT_GK_TREE_MASK;
        ft_child_range cr = gk_range_of(T->view, T->ctab,
                                        u & FT_GK_TREE_MASK);
        cr.first |= hi;
        cr.hstart |= hi;
        return cr;
    }
    return gk_range_of(P.view, P.ctab, u);
}

/* ---- the child map (ft_gk_cmap_build) ---------------------------------- */

__device__ __forceinline__ uint64_t gk_cmap_hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    return k;
}

/* The child map's probe for key from entry h, already loaded as e (the
 * expansion issues every lane's first loads together): the child of
 * first's range it maps to, or FT_NONE. */
__device__ __forceinline__ uint64_t gk_cmap_probe(const ulonglong2 *E,
                                                  uint64_t mask, uint64_t key,
                                                  uint64_t h, ulonglong2 e,
                                                  uint64_t first)
{
    for (;;) {
        if (e.x == key)
            return first + e.y;
        if (e.x == ~0ull)
            return FT_NONE;
        h = (h + 1) & mask;
        e = __ldg(E + h);
    }
}

/* The child of the range labelled tok through the map (the range's node
 * has at least cmap_min children), or FT_NONE: one 16-byte load for the
 * usual first probe. */
__device__ __forceinline__ uint64_t gk_cmap_find(const uint64_t *M,
                                                 uint64_t mask,
                                                 const ft_child_range &cr,
                                                 uint32_t tok)
{
    uint64_t key = (cr.first << 32) | tok;
    uint64_t h = gk_cmap_hash(key) & mask;
    const ulonglong2 *E = reinterpret_cast<const ulonglong2 *>(M);
    return gk_cmap_probe(E, mask, key, h, __ldg(E + h), cr.first);
}

/* A list the whole grid narrows before its CTA sorts the survivors. */
__device__ __forceinline__ int gk_list_long(const ft_gk_params &P,
                                            uint32_t m, uint32_t lim)
{
    return m > lim && m > P.gsel_min;
}

/* A long next list (not terminal) of a fused launch short enough
 * (P.local_max, at most P.eager_max: every candidate's child range is
 * ready; 0 in the other launches) that each CTA selecting it narrows it
 * alone (gk_local_narrow) instead of the grid with a barrier a pass.  A
 * terminal list keeps the grid: its few merging CTAs (fuse_term) would
 * each read it whole while the next step waits for them. */
__device__ __forceinline__ int gk_list_medium(const ft_gk_params &P,
                                              uint32_t m, uint32_t term)
{
    return P.spread && !term && m <= P.local_max;
}

__device__ __forceinline__ uint32_t gk_hash(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x85ebca6bu;
    x ^= x >> 13;
    x *= 0xc2b2ae35u;
    x ^= x >> 16;
    return x;
}

/* Warp-aggregated appends of every lane's FT_GK_LANE_PROPS elements to
 * the terminal (wt) and the next (wn) list at once: one atomic per list
 * and warp, both in flight together; pt / pn get this lane's slots.  The
 * whole warp calls it. */
__device__ __forceinline__ void gk_append_lanes(uint32_t *ct, const int *wt,
                                                uint32_t *cn, const int *wn,
                                                uint32_t *pt, uint32_t *pn)
{
    const uint32_t U = FT_GK_LANE_PROPS;
    uint32_t mt[FT_GK_LANE_PROPS], mn[FT_GK_LANE_PROPS];
    uint32_t st = 0, sn = 0;
#pragma unroll
    for (uint32_t v = 0; v < U; v++) {
        mt[v] = __ballot_sync(0xffffffffu, wt[v]);
        mn[v] = __ballot_sync(0xffffffffu, wn[v]);
        st += (uint32_t)__popc(mt[v]);
        sn += (uint32_t)__popc(mn[v]);
    }
    uint32_t lane = threadIdx.x & 31u;
    uint32_t bt = 0, bn = 0;
    if (lane == 0) {
        if (st)
            bt = atomicAdd(ct, st);
        if (sn)
            bn = atomicAdd(cn, sn);
    }
    bt = __shfl_sync(0xffffffffu, bt, 0);
    bn = __shfl_sync(0xffffffffu, bn, 0);
    uint32_t below = (1u << lane) - 1u;
#pragma unroll
    for (uint32_t v = 0; v < U; v++) {
        pt[v] = bt + (uint32_t)__popc(mt[v] & below);
        pn[v] = bn + (uint32_t)__popc(mn[v] & below);
        bt += (uint32_t)__popc(mt[v]);
        bn += (uint32_t)__popc(mn[v]);
    }
}

/* Warp-aggregated append: returns the slot of this lane (if want). */
__device__ __forceinline__ uint32_t gk_append(uint32_t *ctr, int want)
{
    uint32_t mask = __ballot_sync(0xffffffffu, want);
    uint32_t lane = threadIdx.x & 31u;
    uint32_t base = 0;
    if (mask) {
        int leader = __ffs(mask) - 1;
        if ((int)lane == leader)
            base = atomicAdd(ctr, (uint32_t)__popc(mask));
        base = __shfl_sync(0xffffffffu, base, leader);
    }
    return base + (uint32_t)__popc(mask & ((1u << lane) - 1u));
}

#endif /* FT_SEARCH_STATE_CUH */
