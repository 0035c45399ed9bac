/*
 * ft_search.cu - the persistent cooperative beam-search kernel, and the
 * step kernel of shard groups built from the same device functions (at
 * the end of this file).
 *
 * One launch runs all T steps of every request of a batch.  Per step:
 *
 *   A. expansion (all warps of the grid): an item is (request, beam, 32
 *      proposals) or (request, beam, 32 children); lanes look their
 *      proposal up among the beam's sorted children (ft_find_child), or
 *      their child's label up in the position's token -> k hash table
 *      (when the beam has fewer children than passing proposals).  Both
 *      paths give the same candidate set.  Survivors are appended with
 *      warp-aggregated atomics: terminal nodes to the step's terminal
 *      buffer, nodes with children to the next buffer, keyed by
 *      ft_cand_key (sigma desc, r asc, k asc in one ascending u64).
 *   -- grid.sync --
 *   B. selection (one CTA per request and list): radix select of the best
 *      B next candidates (or n terminal ones) on the u64 key, a bitonic
 *      sort of the survivors in shared memory, then for the next list the
 *      new beams (child range, theta_sent cut, item prefix sums) and the
 *      history entry (parent rank, k); for the terminal list the scores
 *      and a merge into the request's running best n.  In the last step
 *      the terminal CTA also backtraces its results and writes them out.
 *   -- grid.sync -- (not after the last step)
 *
 * Exactness (docs/specification.md section 4): sigma only by __fadd_rn, score
 * by one __dmul_rn with F from the host, every order by the packed integer
 * keys; within one step score order equals sigma order (F > 0 is the same for
 * every candidate and distinct binary32 sigmas give distinct binary64
 * products), so the terminal list sorted by ft_cand_key is sorted by
 * (score desc, order asc) and can be merged with earlier steps by
 * (ft_score_key, step) alone.
 */
#include <cooperative_groups.h>
#include <cub/block/block_scan.cuh>
#include <cub/warp/warp_scan.cuh>
#include <cub/warp/warp_reduce.cuh>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft_kernels.h"
#include "flashtrie/internal/rules.h"

namespace cg = cooperative_groups;

#ifdef FT_GK_PROFILE
/* Finer marks of the selection (profile builds): CTA 0's next-list
 * selection (8 per step: entry, survivors in shared memory, sorted, list
 * done, lazy ranges done, beams done) and CTA 1's terminal selection
 * (slot 6: its whole duration, slot 7: the backtrace), b = 1 only. */
__device__ uint64_t gk_sub[FT_GK_MAX_T * 12];
/* from FT_GK_MAX_T * 8: CTA 0's local narrowing (gk_local_narrow), 4 per
 * step: the first read done, the radix passes done, the survivors done,
 * the passes run */
#define GK_NSUB(t, j) gk_sub[FT_GK_MAX_T * 8 + (t) * 4 + (j)]
__device__ uint32_t gk_sub_t;
#define GK_SUB(j)                                                             \
    do {                                                                      \
        if (blockIdx.x == 0 && threadIdx.x == 0)                              \
            gk_sub[gk_sub_t * 8 + (j)] = clock64();                           \
    } while (0)
#else
#define GK_SUB(j) ((void)0)
#endif

#ifdef FT_GK_PROFILE
/* The chain profile of fused launches (profile builds): per step t and
 * CTA, clock64 at [0] the release from step t's grid barrier, [1] the
 * end of its selection of step t, [2] the end of its expansion of step t
 * (step 0: with the token tables); per step and warp (numbered as the
 * expansion numbers them), lane 0's clock64 on its first item of the
 * step: [0] entry, [1] the beam's range and cut in hand, [2] the lookups
 * (labels, flags, probes) resolved, [3] the appends' positions back, [4]
 * the new beams' ranges and cuts stored, [5] the beam's children, [6]
 * the path (1 hash, 2 proposals) | items << 8, [7] 1. */
#define GK_CH_T 16u
#define GK_CH_CTAS 256u
#define GK_CH_WARPS (GK_CH_CTAS * 16u)
__device__ unsigned long long gk_chc[GK_CH_T][GK_CH_CTAS][6];
__device__ unsigned long long gk_chw[GK_CH_T][GK_CH_WARPS][8];
#define GK_CHC(t, j)                                                          \
    do {                                                                      \
        if (threadIdx.x == 0 && (t) < GK_CH_T && blockIdx.x < GK_CH_CTAS)     \
            gk_chc[t][blockIdx.x][j] = clock64();                             \
    } while (0)
#define GK_CHS(t, j)                                                          \
    do {                                                                      \
        __syncthreads();                                                      \
        GK_CHC(t, j);                                                         \
    } while (0)
#else
#define GK_CHC(t, j) ((void)0)
#define GK_CHS(t, j) ((void)0)
#endif

#define FT_GK_BLOCK 512
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

/* Dynamic shared memory a launch needs: all of gk_smem (smem, from
 * gk_config_of) when it spreads its selection, else all but sp and rq. */
static size_t gk_launch_smem(size_t smem, int spread)
{
    size_t base = offsetof(gk_smem, sp);
    return spread || smem < base ? smem : base;
}

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

/* Node u's child range from the child table (entries u and u + 1, one
 * 32-byte sector apart at most): the same range ft_children computes,
 * which the engine checked for every node when it built the table. */
__device__ __forceinline__ ft_child_range gk_ctab_range(const uint64_t *T,
                                                        uint64_t u)
{
    ulonglong2 a = *reinterpret_cast<const ulonglong2 *>(T + 2 * u);
    ulonglong2 b = *reinterpret_cast<const ulonglong2 *>(T + 2 * u + 2);
    ft_child_range cr;
    cr.first = a.x;
    cr.deg = b.x - a.x;
    if (cr.deg == 0) {
        cr.hstart = cr.first;
        cr.hbase = 0;
    } else {
        cr.hstart = cr.first + cr.deg - (b.y - a.y);
        cr.hbase = a.y;
    }
    return cr;
}

/* Node u's child table entries (gk_ctab_range's two) on their way to L2
 * (P.pf_ranges 1) or to this SM's L1 (2) while the expansion's other
 * loads of u are in flight: the new beam's range (gk_children, after the
 * append) then costs a hit, not a miss. */
__device__ __forceinline__ void gk_pf_range(const ft_gk_params &P, int on,
                                            uint64_t u)
{
    if (!on)
        return;
    const uint64_t *a = P.ctab + 2 * u;
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
    asm volatile("prefetch.global.L2 [%0];" ::"l"(P.view.label_lo + cr.first));
    asm volatile("prefetch.global.L2 [%0];" ::"l"(P.view.flags +
                                                   (cr.first >> 5)));
}

__device__ __forceinline__ ft_child_range gk_children(const ft_gk_params &P,
                                                      uint64_t u)
{
    return P.ctab ? gk_ctab_range(P.ctab, u) : ft_children(&P.view, u);
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

/* ---- phase A ---------------------------------------------------------- */

/* The beam of expansion item `item`: the last r with cstart[r] <= item
 * of nb beams, a 32-way search by the warp: log32(nb) dependent loads
 * instead of log2(nb).  Invariant: cstart[lo] <= item, and hi == nb or
 * cstart[hi] > item.  The whole warp calls it. */
__device__ __forceinline__ uint32_t gk_beam_of(const uint32_t *cstart,
                                               uint32_t nb, uint32_t item)
{
    uint32_t lane = threadIdx.x & 31u;
    uint32_t lo = 0, hi = nb;
    while (hi - lo > 1) {
        uint32_t step = (hi - lo + 31u) >> 5;
        uint32_t idx = lo + lane * step;
        int ok = idx < hi && cstart[idx] <= item;
        uint32_t b = __ballot_sync(0xffffffffu, ok);
        lo += (31u - (uint32_t)__clz(b)) * step;
        hi = lo + step < hi ? lo + step : hi;
    }
    return lo;
}

/* Expands item (and, with pair, item + 1 too when it is the same beam's
 * next chunk: then each lane takes two elements, 32 apart, their loads
 * in flight together).  Returns the items done (1 or 2).  The whole warp
 * calls it.  round (gk_r1_setup): 0 the whole step; 1 its first round,
 * items numbered by the beams' cuts from theta (sm->sp.u.r1); 2 the rest
 * of the step after a first round, the usual items, each beam's
 * proposals below the first round's cut left out. */
template <bool FUSE, uint32_t ROUND>
__device__ uint32_t gk_expand_item(const ft_gk_params &P, ft_gk_req *q,
                                   uint32_t t, uint32_t item, uint32_t tot,
                                   int pair, uint32_t last, int eager,
                                   uint64_t tcut, const gk_smem *sm,
                                   int pw = -1)
{
    const uint32_t round = ROUND;
#ifdef FT_GK_PROFILE
    unsigned long long pm[5] = {};
    const bool pon = FUSE && pw >= 0 && (threadIdx.x & 31u) == 0 &&
                     t < GK_CH_T && (uint32_t)pw < GK_CH_WARPS;
    uint32_t ppath = 0;
#define GK_PM(j)                                                              \
    do {                                                                      \
        if (pon)                                                              \
            pm[j] = clock64();                                                \
    } while (0)
    GK_PM(0);
#else
#define GK_PM(j) ((void)0)
    (void)pw;
#endif
    const ft_gk_slot &S = q->slot;
    uint32_t lane = threadIdx.x & 31u;
    uint32_t r, chunk, kcut, two, kmin = 0;
    float sigma;
    ft_child_range cr;
    if (t == 0) {
        r = 0;
        chunk = item;
        sigma = 0.0f;
        cr = q->root;
        kcut = q->kcut0;
        two = pair && item + 1 < tot;
    } else if (FUSE) {
        /* The beams this CTA selected (gk_spread_next<true>): the same
         * 32-way search over their first items, in shared memory, then
         * the candidate's range and cut from step t - 1's lists. */
        const gk_local_beams &lb = sm->sp.lb;
        const gk_r1_smem &R1 = sm->sp.u.r1;
        uint32_t nb = lb.n;
        const uint32_t *cs = round == 1 ? R1.cs : lb.cs;
        r = gk_beam_of(cs, nb, item);
        chunk = item - cs[r];
        uint32_t end = r + 1 < nb ? cs[r + 1] : tot;
        uint32_t p = lb.p[r], c = sm->idx[p];
        sigma = ft_cand_sigma(sm->key[p]);
        const ft_gk_lists Lp = gk_lists<FUSE>(P, q, t - 1);
        cr = Lp.cand_cr[c];
        kcut = round == 1 ? R1.kc[r] : Lp.cand_kcut[c];
        kmin = round == 2 ? R1.kc[r] : 0u;
        two = pair && item + 1 < end;
    } else {
        /* A lazy launch's first round sits in the slot (one per request,
         * gk_r1_setup<false, true>), a request alone's in shared memory. */
        uint32_t nb = q->steps[t].n_beam;
        const uint32_t *cs = round != 1 ? S.beam_cstart
                             : P.lazy ? S.r1_cs : sm->sp.u.r1.cs;
        r = gk_beam_of(cs, nb, item);
        chunk = item - cs[r];
        uint32_t end = r + 1 < nb ? cs[r + 1] : tot;
        sigma = S.beam_sigma[r];
        cr = S.beam_cr[r];
        uint32_t kc1 = round == 0 ? 0u
                       : P.lazy ? S.r1_kc[r] : (uint32_t)sm->sp.u.r1.kc[r];
        kcut = round == 1 ? kc1 : S.beam_kcut[r];
        kmin = round == 2 ? kc1 : 0u;
        two = pair && item + 1 < end;
    }
    const uint32_t *tok = q->tok + q->row[t];
    const float *lp = q->logp + q->row[t];
    /* Keys carry the entry's global rank (a shard group's beams are
     * indexed locally); alone, rank and index are the same. */
    uint32_t rk = (t > 0 && S.beam_rank) ? S.beam_rank[r] : r;
    /* Each lane takes one element of each of the 1 + two chunks, 32
     * apart, and every phase below issues their loads together: the
     * chains of dependent misses of one lane overlap instead of adding
     * up. */
    const uint32_t U = FT_GK_LANE_PROPS;
    uint32_t ub = 1u + two;
    int found[FT_GK_LANE_PROPS];
    uint32_t k[FT_GK_LANE_PROPS], flags[FT_GK_LANE_PROPS];
    float lpk[FT_GK_LANE_PROPS]; /* proposal k's log-prob */
    uint64_t u[FT_GK_LANE_PROPS];
    uint64_t e0 = (uint64_t)chunk * FT_GK_WARP_ITEM + lane;
    /* the new beams' ranges are computed below: their child table entries
     * prefetched with the flags (gk_pf_range) */
    const int pf = (P.pf_ranges & 3u) && eager && !last && P.ctab;
    if (ft_gk_use_hash(t, cr.deg, kcut)) {
        GK_PM(1);
#ifdef FT_GK_PROFILE
        ppath = 1;
#endif
        uint32_t label[FT_GK_LANE_PROPS] = {};
        const uint64_t *tab = S.hash + q->hoff[t];
        uint32_t mask = q->hmask[t];
#pragma unroll
        for (uint32_t v = 0; v < U; v++) {
            uint64_t j = e0 + 32u * v;
            found[v] = 0;
            k[v] = 0;
            flags[v] = 0;
            u[v] = v < ub && j < cr.deg ? cr.first + j : FT_NONE;
            if (u[v] != FT_NONE) {
                /* u is known now: its flags load overlaps the label's. */
                flags[v] = ft_node_flags(&P.view, u[v]);
                label[v] = ft_child_label(&P.view, &cr, u[v]);
                gk_pf_range(P, pf, u[v]);
            }
        }
        const float *tlp = S.hash_lp + q->hoff[t];
        uint64_t e[FT_GK_LANE_PROPS];
        uint32_t h[FT_GK_LANE_PROPS];
        /* the entry's log-prob is loaded with it: one dependent load
         * fewer in the lane's chain (it is read only on a match, which
         * its inserter wrote before the grid barrier) */
#pragma unroll
        for (uint32_t v = 0; v < U; v++) {
            h[v] = gk_hash(label[v]) & mask;
            e[v] = u[v] != FT_NONE ? tab[h[v]] : 0;
            lpk[v] = u[v] != FT_NONE ? tlp[h[v]] : 0.0f;
        }
#pragma unroll
        for (uint32_t v = 0; v < U; v++) {
            if (u[v] == FT_NONE)
                continue;
            for (;;) {
                if ((uint32_t)((e[v] >> 12) & 0xfffffu) != P.epoch)
                    break;
                if ((uint32_t)(e[v] >> 32) == label[v]) {
                    k[v] = (uint32_t)(e[v] & 0xfffu);
                    found[v] = k[v] < kcut && k[v] >= kmin;
                    break;
                }
                h[v] = (h[v] + 1) & mask;
                e[v] = tab[h[v]];
                lpk[v] = tlp[h[v]];
            }
        }
    } else {
        GK_PM(1);
#ifdef FT_GK_PROFILE
        ppath = 2;
#endif
        uint32_t tk[FT_GK_LANE_PROPS];
#pragma unroll
        for (uint32_t v = 0; v < U; v++) {
            k[v] = v < ub ? (uint32_t)(e0 + 32u * v) : kcut;
            if (k[v] < kmin) /* the first round's */
                k[v] = kcut;
            u[v] = FT_NONE;
            flags[v] = 0;
            tk[v] = k[v] < kcut ? tok[k[v]] : 0u;
            lpk[v] = k[v] < kcut ? lp[k[v]] : 0.0f;
        }
        if (t == 0 && P.root_n) {
            /* The root's children through the label map. */
#pragma unroll
            for (uint32_t v = 0; v < U; v++) {
                uint32_t c = k[v] < kcut && tk[v] < P.root_n
                                 ? P.root_map[tk[v]] : 0u;
                u[v] = c ? cr.first + (c - 1u) : FT_NONE;
            }
        } else if (t > 0 && P.cmap && cr.deg >= P.cmap_min) {
            /* The child map: every lane's first probes in flight
             * together (load <= 1/2: usually the only ones). */
            uint64_t key[FT_GK_LANE_PROPS], h[FT_GK_LANE_PROPS];
            ulonglong2 e[FT_GK_LANE_PROPS];
            const ulonglong2 *M = reinterpret_cast<const ulonglong2 *>(P.cmap);
#pragma unroll
            for (uint32_t v = 0; v < U; v++) {
                key[v] = (cr.first << 32) | tk[v];
                h[v] = gk_cmap_hash(key[v]) & P.cmap_mask;
                if (k[v] < kcut)
                    e[v] = __ldg(M + h[v]);
            }
#pragma unroll
            for (uint32_t v = 0; v < U; v++)
                if (k[v] < kcut)
                    u[v] = gk_cmap_probe(M, P.cmap_mask, key[v], h[v], e[v],
                                         cr.first);
        } else {
#pragma unroll
            for (uint32_t v = 0; v < U; v++)
                if (k[v] < kcut)
                    u[v] = ft_find_child(&P.view, &cr, tk[v]);
        }
#pragma unroll
        for (uint32_t v = 0; v < U; v++) {
            found[v] = u[v] != FT_NONE;
            if (found[v]) {
                flags[v] = ft_node_flags(&P.view, u[v]);
                gk_pf_range(P, pf, u[v]);
            }
        }
    }
    uint64_t key[FT_GK_LANE_PROPS];
    int term[FT_GK_LANE_PROPS], nxt[FT_GK_LANE_PROPS];
    float sig[FT_GK_LANE_PROPS];
#pragma unroll
    for (uint32_t v = 0; v < U; v++) {
        sig[v] = 0.0f;
        if (found[v])
            sig[v] = FT_FADD(sigma, lpk[v]);
        else
            flags[v] = 0;
        key[v] = ft_cand_key(sig[v], rk, k[v]);
        term[v] = found[v] && (flags[v] & FT_TERMINAL);
        /* A terminal candidate whose score key is not below the worst
         * of n running results cannot enter them (earlier steps win
         * ties): it is not appended (gk_expand). */
        if (term[v] && tcut != ~0ull)
            term[v] = ft_score_key(ft_score(sig[v], q->F[t + 1])) < tcut;
        nxt[v] = !last && found[v] && (flags[v] & FT_HAS_CHILD);
    }
    GK_PM(2);
    /* The new beams' child ranges and theta_sent cuts are computed here,
     * by all warps of the grid, rather than by the selecting CTA: their
     * chains of dependent loads then overlap instead of adding up.  Their
     * loads go out before the appends' atomics (whose positions only say
     * whether a candidate is among the first eager_max), so that the two
     * round trips overlap too. */
    ft_child_range ncr[FT_GK_LANE_PROPS];
    uint32_t nkc[FT_GK_LANE_PROPS];
    if (!last && eager) {
#pragma unroll
        for (uint32_t v = 0; v < U; v++)
            if (nxt[v]) {
                ncr[v] = gk_children(P, u[v]);
                nkc[v] = ft_kcut(q->logp + q->row[t + 1], q->keff[t + 1],
                                 sig[v], q->theta_sent);
            }
    }
    ft_gk_step *st = &q->steps[t];
    uint32_t pos[FT_GK_LANE_PROPS], posn[FT_GK_LANE_PROPS];
    gk_append_lanes(&st->n_term, term, &st->n_next, nxt, pos, posn);
#ifdef FT_GK_PROFILE
    if (pon) {
        uint32_t dep = pos[0] + posn[0];
        if (dep == 0xdeadbeefu)
            pm[0] = 0;
        pm[3] = clock64();
    }
#endif
#pragma unroll
    for (uint32_t v = 0; v < U; v++) {
        if (!term[v])
            continue;
        if (pos[v] < S.cap_cand) {
            const ft_gk_lists L = gk_lists<FUSE>(P, q, t);
            L.term_key[pos[v]] = key[v];
            L.term_node[pos[v]] = u[v];
        } else {
            atomicOr(&q->steps[0].err, 1u);
        }
    }
    if (last)
        return ub;
    int ea[FT_GK_LANE_PROPS];
#pragma unroll
    for (uint32_t v = 0; v < U; v++)
        ea[v] = nxt[v] && posn[v] < S.cap_cand && eager &&
                gk_eager(P, posn[v]);
#pragma unroll
    for (uint32_t v = 0; v < U; v++) {
        if (!nxt[v])
            continue;
        if (posn[v] >= S.cap_cand) {
            atomicOr(&q->steps[0].err, 1u);
            continue;
        }
        const ft_gk_lists L = gk_lists<FUSE>(P, q, t);
        L.cand_key[posn[v]] = key[v];
        L.cand_node[posn[v]] = u[v];
        if (ea[v]) {
            gk_pf_next(P, ncr[v]);
            L.cand_cr[posn[v]] = ncr[v];
            L.cand_kcut[posn[v]] = nkc[v];
        }
    }
#ifdef FT_GK_PROFILE
    if (pon) {
        __threadfence_block();
        pm[4] = clock64();
        unsigned long long *w = gk_chw[t][pw];
        for (int j = 0; j < 5; j++)
            w[j] = pm[j];
        w[5] = cr.deg;
        w[6] = ppath | (unsigned long long)tot << 8;
        w[7] = 1;
    }
#endif
#undef GK_PM
    return ub;
}

/* The round request q's step t takes in this pass: in a launch whose
 * rounds are per request (LZ: lazy, gk_r1_setup<false, true>) the first
 * pass (ROUND 0) is round 1 for the requests whose step has one, the
 * second (ROUND 2) only for those that the check marked in need (bits of
 * sm->hist, gk_r1_check_lazy); 3: none. */
template <uint32_t ROUND, bool LZ>
__device__ __forceinline__ uint32_t gk_round_of(const ft_gk_params &P,
                                                const ft_gk_req *q,
                                                uint32_t i, uint32_t t,
                                                const gk_smem *sm)
{
    if (!LZ || !P.lazy || !P.r1 || t == 0 || t >= q->T)
        return ROUND;
    int on = __ldcg(&q->steps[t].r1) != 0u;
    if (ROUND == 0)
        return on ? 1u : 0u;
    return on && ((sm->hist[i >> 5] >> (i & 31u)) & 1u) ? ROUND : 3u;
}

/* Items of request q's step t in round rq. */
__device__ __forceinline__ uint32_t gk_round_items(const ft_gk_params &P,
                                                   const ft_gk_req *q,
                                                   uint32_t t, uint32_t rq,
                                                   bool fuse,
                                                   const gk_smem *sm)
{
    if (t == 0)
        return q->items0;
    if (rq == 3)
        return 0;
    if (rq == 1)
        return P.lazy ? __ldcg(&q->slot.r1_cs[__ldcg(&q->steps[t].n_beam)])
                      : sm->sp.u.r1.tot;
    return fuse ? sm->sp.lb.tot : q->steps[t].n_items;
}

/* Staged launches (many requests): request i's first unit, acc mod m
 * (acc: the units of the requests before it), written by warp 0 to
 * out[i] for i < n, the units of request i being unit(i); the other warps
 * then start their loops at (g - out[i]) mod m without a 64-bit modulo a
 * request (b = 32: ~200 instructions a request in every warp or thread,
 * a step's 10-25 us on the SM's four schedulers).  Warp 0 calls it. */
template <typename U>
__device__ __forceinline__ void gk_first_units(uint32_t n, uint32_t m,
                                               uint32_t *out, U unit)
{
    typedef cub::WarpScan<unsigned long long> scan_t;
    __shared__ typename scan_t::TempStorage ts;
    uint32_t lane = threadIdx.x & 31u;
    unsigned long long carry = 0;
    for (uint32_t b = 0; b < n; b += 32) {
        uint32_t i = b + lane;
        unsigned long long u = i < n ? unit(i) : 0ull, ex, tot;
        scan_t(ts).ExclusiveSum(u, ex, tot);
        if (i < n)
            out[i] = (uint32_t)((carry + ex) % m);
        carry += tot;
    }
}

/* The first of units g, g + m, ... that lands in a request whose first
 * unit is a (a < m, g < m): (g - a) mod m. */
__device__ __forceinline__ uint32_t gk_first_of(uint32_t g, uint32_t a,
                                                uint32_t m)
{
    return g >= a ? g - a : g + m - a;
}

/* The grid selection's histograms and counters of request q's step t
 * start at zero, cleared by threads gt < 2 x FT_GK_GSEL_WORDS of the nt
 * expanding ones (the last step's selection is over: a grid barrier lies
 * between). */
template <bool FUSE>
__device__ __forceinline__ void gk_gsel_clear(const ft_gk_params &P,
                                              ft_gk_req *q, uint32_t t,
                                              uint32_t gt, uint32_t nt)
{
    if (gt < 2 * FT_GK_GSEL_WORDS) {
        uint32_t *gsel = gk_lists<FUSE>(P, q, t).gsel;
        for (uint32_t w = gt; w < 2 * FT_GK_GSEL_WORDS; w += nt)
            gsel[w] = 0;
    }
}

/* Request q's units first, first + nw, .. below units of step t (pair:
 * a unit is two items), for gk_expand_r.  The fused instance has one call
 * site of the item, whose code is the step's largest: a pair whose second
 * item starts another beam takes it alone, as the loop's second turn,
 * instead of a second inlined copy -- another stretch of code to fetch
 * once pairs run (a fused step's warps wait on instruction fetch more
 * than on any load, ncu, docs/BENCHMARKS.md 3q), and with it the
 * instance spilled 8 bytes.  pw: the profile's warp number for the first
 * unit of request 0. */
template <bool FUSE, uint32_t ROUND>
__device__ __forceinline__ void gk_expand_units(const ft_gk_params &P,
                                                ft_gk_req *q, uint32_t t,
                                                uint32_t first,
                                                uint32_t units, uint32_t nw,
                                                uint32_t tot, int pair,
                                                uint32_t last, uint64_t tcut,
                                                gk_smem *sm, int pw)
{
    for (uint32_t un = first; un < units; un += nw) {
        uint32_t it = pair ? 2u * un : un;
        if (!FUSE) {
            /* (the other instances keep both call sites: one spilled 4
             * bytes more each way) */
            uint32_t done = gk_expand_item<FUSE, ROUND>(
                P, q, t, it, tot, pair, last, !P.lazy, tcut, sm, pw);
            if (done < 1u + (uint32_t)pair && it + 1 < tot)
                gk_expand_item<FUSE, ROUND>(P, q, t, it + 1, tot, 0, last,
                                            !P.lazy, tcut, sm);
            pw = -1;
            continue;
        }
        int pp = pair;
#pragma unroll 1
        for (;;) {
            uint32_t done = gk_expand_item<FUSE, ROUND>(
                P, q, t, it, tot, pp, last, !P.lazy, tcut, sm, pw);
            if (!pp || done >= 2u || it + 1 >= tot)
                break;
            it++;
            pp = 0;
            pw = -1;
        }
        pw = -1;
    }
}

/* Step t's expansion by CTAs 0 .. ncta - 1 (all but the terminal ones
 * in a fused launch past step 0; there sm holds the beams, each CTA's
 * own copy).  ROUND: gk_expand_item's (1 and 2 in a launch of one
 * request, whose first round sm->sp.u.r1 holds; with LZ, a lazy launch,
 * pass 0 also takes round 1 for the requests whose step has one, and
 * pass 2 the second rounds of those gk_r1_check_lazy marked). */
template <bool FUSE, uint32_t ROUND, bool LZ>
__device__ void gk_expand_r(const ft_gk_params &P, uint32_t t,
                            uint32_t ncta, gk_smem *sm)
{
    /* Warps numbered across the CTAs first: a step of fewer units than
     * warps (BW = 100: ~400 of 2,112) spreads them over every SM instead
     * of filling the first CTAs' SMs (run S3: b = 32 +1-10%, b = 1 the
     * same or better). */
    uint32_t nw = ncta * FT_GK_WARPS;
    uint32_t gw = (threadIdx.x >> 5) * ncta + blockIdx.x;
    uint32_t nt = ncta * blockDim.x;
    uint32_t gt = blockIdx.x * blockDim.x + threadIdx.x;
    if (FUSE) {
        /* A fused launch: one request, its descriptor in shared memory,
         * its round ROUND; no loops over requests, no offsets (every
         * warp of an expanding CTA runs this before its item, and the
         * general form's code was one more stretch to fetch, ncu) --
         * the same as the general form below with nreq = 1. */
        ft_gk_req *q = &sm->rq[0];
        gk_gsel_clear<FUSE>(P, q, t, gt, nt);
        if (t >= q->T)
            return;
        uint32_t tot = gk_round_items(P, q, t, ROUND, true, sm);
        int pair = tot >= (P.pair_items ? P.pair_items : nw);
        uint32_t units = pair ? (tot + 1u) >> 1 : tot;
        /* The terminal cut (below): a fused launch merges step t - 1's
         * terminal list while step t expands, so its cut is the worst of
         * step t - 2's results (no tighter, and as exact: a candidate it
         * lets in that cannot enter lands at n or later), loaded during
         * the selection (gk_fused). */
        uint64_t tcut = FT_GK_TERM_CUT && t >= 2u ? sm->tcut : ~0ull;
        GK_CHC(t, 5);
        gk_expand_units<FUSE, ROUND>(P, q, t, gw, units, nw, tot, pair,
                                     t + 1 == q->T, tcut, sm, (int)gw);
        return;
    }
    uint64_t acc = 0; /* units of the requests before this one */
    /* A lazy launch (LZ: its instance and the step kernel): every
     * request's round and items of this pass are read once, by the CTA's
     * threads together, into sm->idx (free between the selections), as
     * tot | round << 30 (round 3: nothing this pass, or no step t),
     * instead of a chain of dependent loads a request in every warp's
     * loops below; then warp 0 decides pairs and every request's first
     * unit.  sm->idx: [0, nreq) each request's items and round, [H, H +
     * nreq) its first unit mod nw (gk_first_units), [H - 1] pair. */
    const uint32_t H = FT_GK_SORT_MAX / 2;
    const bool stage = LZ && P.lazy && P.nreq + 1 < H;
    if (stage) {
        for (uint32_t i = threadIdx.x; i < P.nreq; i += blockDim.x) {
            const ft_gk_req *q = gk_req<FUSE>(P, sm, i);
            uint32_t rq = 3u, tot = 0;
            if (t < q->T) {
                rq = gk_round_of<ROUND, LZ>(P, q, i, t, sm);
                tot = gk_round_items(P, q, t, rq, FUSE, sm);
            }
            sm->idx[i] = tot | rq << 30;
        }
        __syncthreads();
        if (threadIdx.x < 32) {
            unsigned long long a = 0;
            for (uint32_t i = threadIdx.x; i < P.nreq; i += 32)
                a += sm->idx[i] & 0x3fffffffu;
            typedef cub::WarpReduce<unsigned long long> red_t;
            __shared__ typename red_t::TempStorage rts;
            a = red_t(rts).Sum(a);
            a = __shfl_sync(0xffffffffu, a, 0);
            uint32_t pr =
                a >= (P.pair_items ? (uint64_t)P.pair_items : nw);
            gk_first_units(P.nreq, nw, sm->idx + H, [&](uint32_t i) {
                uint32_t tot = sm->idx[i] & 0x3fffffffu;
                return (unsigned long long)(pr ? (tot + 1u) >> 1 : tot);
            });
            if (threadIdx.x == 0)
                sm->idx[H - 1] = pr;
        }
        __syncthreads();
    }
    /* A launch of many items per warp takes them in pairs (a lane then
     * has two elements' chains in flight); one of few items one at a
     * time (each warp's chain is the step's latency then, and pairs
     * would halve the warps at work). */
    int pair;
    if (stage) {
        pair = (int)sm->idx[H - 1];
    } else {
        uint64_t all = 0;
        for (uint32_t i = 0; i < P.nreq; i++) {
            const ft_gk_req *q = gk_req<FUSE>(P, sm, i);
            if (t < q->T)
                all += gk_round_items(
                    P, q, t, gk_round_of<ROUND, LZ>(P, q, i, t, sm), FUSE,
                    sm);
        }
        pair = all >= (P.pair_items ? (uint64_t)P.pair_items : nw);
    }
    for (uint32_t i = 0; i < P.nreq; i++) {
        ft_gk_req *q = gk_req<FUSE>(P, sm, i);
        gk_gsel_clear<FUSE>(P, q, t, gt, nt);
        if (stage ? sm->idx[i] >> 30 == 3u : t >= q->T)
            continue; /* (staged: no step t, or no items this pass) */
        uint32_t rq = stage ? sm->idx[i] >> 30
                            : gk_round_of<ROUND, LZ>(P, q, i, t, sm);
        uint32_t tot = stage ? sm->idx[i] & 0x3fffffffu
                             : gk_round_items(P, q, t, rq, FUSE, sm);
        uint32_t units = pair ? (tot + 1u) >> 1 : tot;
        /* (a 32-bit modulo while acc fits: the one warp that runs an
         * item computes it serially before its first load) */
        uint32_t first =
            stage ? gk_first_of(gw, sm->idx[H + i], nw)
            : acc < 0x100000000ull
                ? gk_first_of(gw, (uint32_t)acc % nw, nw)
                : (uint32_t)((gw + nw - (acc % nw)) % nw);
        uint32_t last = t + 1 == q->T;
        /* Once n results run, a terminal candidate must beat the worst
         * of them: the others would land at n or later in the merge
         * (gk_select_term, gk_spread_list), so the lists only hold
         * candidates that can enter (and every rank among them, and
         * every running result's place, stays what it was).  (A fused
         * launch's cut lags a step more: above.) */
        uint64_t tcut = ~0ull;
        if (FT_GK_TERM_CUT && t >= 1u && units > first &&
            q->steps[t - 1].n_run >= q->n)
            tcut = ((const ft_gk_hit *)q->slot.run[(t - 1) & 1u])[q->n - 1]
                       .skey;
        if (LZ && ROUND == 0 && rq == 1) {
            gk_expand_units<FUSE, 1>(P, q, t, first, units, nw, tot, pair,
                                     last, tcut, sm, -1);
        } else {
            gk_expand_units<FUSE, ROUND>(P, q, t, first, units, nw, tot,
                                         pair, last, tcut, sm,
                                         i == 0 ? (int)gw : -1);
        }
        acc += units;
    }
}

/* gk_expand_r by round (each its own code: the rounds' extra loads and
 * bounds stay out of the plain expansion's registers). */
template <bool FUSE, bool LZ = false>
__device__ __forceinline__ void gk_expand(const ft_gk_params &P,
                                          uint32_t t, uint32_t ncta,
                                          gk_smem *sm, uint32_t round = 0)
{
    if (round == 1 && !LZ)
        gk_expand_r<FUSE, 1, LZ>(P, t, ncta, sm);
    else if (round == 2)
        gk_expand_r<FUSE, 2, LZ>(P, t, ncta, sm);
    else
        gk_expand_r<FUSE, 0, LZ>(P, t, ncta, sm);
}

/* Builds the token -> k tables of positions 1..T-1 (during step 0).
 * Entries go to the threads in an order that puts every CTA's warp 0
 * last and interleaves the CTAs: step 0's expansion units (numbered
 * across the CTAs first) sit in warp 0 of the first CTAs, so an insert
 * no longer waits behind a unit in the same warp (BW = 1000: the tables
 * ended 4.4 us after the expansion), and the inserts spread over every
 * SM. */
__device__ void gk_build_hash(const ft_gk_params &P, gk_smem *sm)
{
    uint32_t nt = gridDim.x * blockDim.x;
    /* this thread's place in its CTA with warp 0 rotated to the end */
    uint32_t r = threadIdx.x >= 32u ? threadIdx.x - 32u
                                    : threadIdx.x + blockDim.x - 32u;
    uint32_t gt = r * gridDim.x + blockIdx.x;
    uint64_t acc = 0;
    /* Many requests (sm: a lazy launch): each one's first row and row
     * count read once, by the CTA's threads together, into sm->idx
     * (after the expansion's own use of it), instead of a chain of
     * dependent loads a request in every thread, and each one's first
     * entry by warp 0.  sm->idx: [0, n) first rows, [n, 2n) row counts,
     * [2n, 3n) each request's first entry mod nt (gk_first_units). */
    const uint32_t n = P.nreq;
    const bool stage = sm != NULL && n > 1 && 3 * n <= FT_GK_SORT_MAX;
    if (stage) {
        __syncthreads();
        for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
            const ft_gk_req *q = &P.reqs[i];
            uint32_t base = q->row[1 < q->T ? 1 : q->T];
            sm->idx[i] = base;
            sm->idx[n + i] = q->rows_total - base;
        }
        __syncthreads();
        if (threadIdx.x < 32)
            gk_first_units(n, nt, sm->idx + 2 * n, [&](uint32_t i) {
                return (unsigned long long)sm->idx[n + i];
            });
        __syncthreads();
    }
    for (uint32_t i = 0; i < P.nreq; i++) {
        ft_gk_req *q = &P.reqs[i];
        uint32_t base = stage ? sm->idx[i] : q->row[1 < q->T ? 1 : q->T];
        uint32_t tot = stage ? sm->idx[n + i] : q->rows_total - base;
        if (tot == 0)
            continue;
        uint32_t first = stage ? gk_first_of(gt, sm->idx[2 * n + i], nt)
                               : (uint32_t)((gt + nt - (acc % nt)) % nt);
        for (uint32_t e = first; e < tot; e += nt) {
            uint32_t g = base + e;
            uint32_t lo = 1, hi = q->T; /* last t with row[t] <= g */
            while (hi - lo > 1) {
                uint32_t mid = (lo + hi) >> 1;
                if (q->row[mid] <= g)
                    lo = mid;
                else
                    hi = mid;
            }
            uint32_t t = lo, k = g - q->row[t];
            uint32_t tok = q->tok[g];
            float lpg = q->logp[g];
            uint64_t *tab = q->slot.hash + q->hoff[t];
            uint32_t mask = q->hmask[t];
            uint32_t h = gk_hash(tok) & mask;
            unsigned long long nv = ((unsigned long long)tok << 32) |
                                    ((unsigned long long)P.epoch << 12) | k;
            /* A failed CAS re-examines the value it returned, never a
             * reload (which the SM's L1 could answer with a stale line). */
            unsigned long long e0 = tab[h];
            for (;;) {
                if ((uint32_t)((e0 >> 12) & 0xfffffu) != P.epoch) {
                    unsigned long long old = atomicCAS(
                        (unsigned long long *)&tab[h], e0, nv);
                    if (old == e0) {
                        /* read with the entry (gk_expand_item) */
                        q->slot.hash_lp[q->hoff[t] + h] = lpg;
                        break;
                    }
                    e0 = old; /* someone took it: look again */
                    continue;
                }
                h = (h + 1) & mask;
                e0 = tab[h];
            }
        }
        acc += tot;
    }
}

/* ---- phase B ---------------------------------------------------------- */

/* Terminal nodes before node u (ft_trie_term_rank on the device): the
 * index of u's value, which the host looks up. */
__device__ __forceinline__ uint64_t gk_term_rank(const ft_gk_params &P,
                                                 uint64_t u)
{
    return ft_term_rank(P.view.flags, P.term_rank, u);
}

/* Block-wide exclusive scan of one value per thread; returns the total.
 * The whole CTA calls it; sm.scan is free again when it returns. */
__device__ uint32_t gk_scan(gk_smem &sm, uint32_t v, uint32_t *excl)
{
    uint32_t total;
    cub::BlockScan<uint32_t, FT_GK_BLOCK>(sm.scan).ExclusiveSum(v, *excl,
                                                                total);
    __syncthreads();
    return total;
}

/* ---- a step in two rounds (launches of one request) ------------------
 *
 * Step t examines every beam's passing proposals (or children): at BW =
 * 1000, step 1 is 1000 root children x 1000 proposals, 10^6 lookups
 * for 215,000 next candidates of which 1000 are kept.  A step whose
 * beams' cuts come to many more proposals than its lists need first
 * expands only the candidates whose sigma is above theta, chosen so that
 * about P.r1 x max(B, n) proposals pass (gk_r1_setup); when that found B
 * next candidates and enough terminal ones (gk_r1_check), every
 * candidate it left out is beaten by those and the step is complete; else
 * a second round expands the rest.  Exact either way: both rounds
 * together are the whole step, and what the first alone keeps is what
 * the whole step keeps (docs/gpu-engine.md, Search 6.). */

/* The first round of step t (t >= 1) of request q, the launch's only one,
 * by every CTA that expands it (each computes the same): a step of at
 * least P.r1_items items whose proposals (at most nb x keff) may come to
 * 2C, C = P.r1 x max(B, n), loads the beams' sigma, child counts and cuts
 * (from this CTA's own beams in a fused launch); when their proposals do
 * come to 2C, a 17-way search on sampled beams estimates the highest
 * theta with C proposals above it; then each beam's exact cut at theta
 * (kc) and its first item in the numbering by those cuts (cs).  The round
 * runs (R.on) when it takes at most a quarter of the step's items; CTA 0
 * then records theta for gk_r1_check (steps[t].r1).  The whole CTA calls
 * it. */
template <bool FUSE, bool GLB = false>
__device__ void gk_r1_setup(const ft_gk_params &P, gk_smem &sm,
                            ft_gk_req *q, uint32_t t, uint32_t gnb = 0,
                            uint32_t gitems = 0)
{
    gk_r1_smem &R = sm.sp.u.r1; /* (never touched with GLB: a lazy
                                 * launch's shared memory lacks sp) */
    const ft_gk_slot &S = q->slot;
    uint32_t tid = threadIdx.x;
    /* GLB: gnb beams of gitems items, just built by this CTA */
    uint32_t nb = GLB ? gnb
                  : FUSE ? sm.sp.lb.n : __ldcg(&q->steps[t].n_beam);
    uint32_t B = q->B > q->n ? q->B : q->n;
    uint64_t C = (uint64_t)P.r1 * B;
    /* Only a step of at least r1_items items (by default 8 a warp of the
     * grid: BW = 1000's step 1 has 32,000), whose proposals (at most nb x
     * keff) may come to 2C, and (but with r1_items 1, for tests) whose
     * items are mostly proposals, not children (the hash path's items a
     * first round does not shorten: BW = 1000's step 2 cost 4.7 us more
     * for nothing without this): the others cost no loads here. */
    uint32_t items_all = GLB ? gitems
                         : FUSE ? sm.sp.lb.tot : __ldcg(&q->steps[t].n_items);
    uint64_t prop_items = (uint64_t)nb * ((q->keff[t] + 31u) >> 5);
    if (t == 0 || t >= q->T || nb == 0 || (!GLB && nb > GK_R1_MAX) ||
        (uint64_t)nb * q->keff[t] < 2 * C || items_all < P.r1_items ||
        (P.r1_items > 1 && 4 * (uint64_t)items_all < 3 * prop_items)) {
        if (!GLB) {
            if (tid == 0)
                R.on = 0;
            __syncthreads();
        }
        return;
    }
    if (GLB)
        __syncthreads(); /* gk_build_beams's ranges and cuts */
    /* A lazy launch's selecting CTA (GLB) has the beams' sigma in sm.key
     * (gk_build_beams, sorted) and writes the round to the slot. */
    uint32_t per = (nb + blockDim.x - 1) / blockDim.x, j0 = tid * per;
    uint32_t cells = 0, items = 0;
    for (uint32_t j = j0; j < j0 + per && j < nb; j++) {
        float sg;
        uint64_t deg;
        uint32_t kc;
        if (FUSE) {
            uint32_t p = sm.sp.lb.p[j], c = sm.idx[p];
            const ft_gk_lists Lp = gk_lists<FUSE>(P, q, t - 1);
            sg = ft_cand_sigma(sm.key[p]);
            deg = __ldcg((const unsigned long long *)&Lp.cand_cr[c].deg);
            kc = __ldcg(&Lp.cand_kcut[c]);
        } else {
            sg = GLB ? ft_cand_sigma(sm.key[j]) : __ldcg(&S.beam_sigma[j]);
            deg = __ldcg((const unsigned long long *)&S.beam_cr[j].deg);
            kc = __ldcg(&S.beam_kcut[j]);
        }
        if (!GLB) {
            R.sig[j] = sg;
            R.deg[j] = deg > 0xffffffffull ? 0xffffffffu : (uint32_t)deg;
        }
        cells += kc;
        items += ft_gk_items(t, deg, kc);
    }
    uint32_t ex;
    uint32_t call = gk_scan(sm, cells, &ex);
    uint32_t iall = gk_scan(sm, items, &ex);
    const float *lp = q->logp + q->row[t];
    uint32_t keff = q->keff[t];
    float th0 = q->theta_sent;
    int on = (uint64_t)call >= 2 * C;
    float lo = th0;
    /* the probes' counts and thetas (sm.hist is free in a lazy launch's
     * selection once the beams are built) */
    uint32_t *est = GLB ? sm.hist : R.est;
    float *thp = GLB ? reinterpret_cast<float *>(sm.hist + FT_GK_WARPS)
                     : R.th;
    if (on) {
        /* theta by three rounds of a 17-way search between the least
         * candidate's sigma (or theta_sent) and the greatest's: warp w
         * probes the w + 1-th of 16 inner points, its lanes over 128
         * beams spread over the list (all beams when fewer), the count
         * scaled to all; the next bracket is between the highest probe
         * counting at least C and the one above.  An estimate: the cuts
         * below are exact, and theta only decides how much the first
         * round takes. */
        uint32_t lane = tid & 31u, warp = tid >> 5;
        float s0 = GLB ? ft_cand_sigma(sm.key[0]) : R.sig[0];
        float sl = GLB ? ft_cand_sigma(sm.key[nb - 1]) : R.sig[nb - 1];
        float hi = FT_FADD(s0, lp[0]);
        float least = FT_FADD(sl, lp[keff - 1]);
        if (least > lo)
            lo = least;
        /* 128 beams, the middles of 128 equal strata (all when fewer) */
        uint32_t ns = nb < 128u ? nb : 128u;
        uint32_t rl[4];
#pragma unroll
        for (uint32_t v = 0; v < 4; v++) {
            uint32_t i = lane + 32u * v;
            rl[v] = i >= ns ? nb
                    : nb < 128u ? i
                    : (uint32_t)(((uint64_t)(2 * i + 1) * nb) / 256u);
        }
        for (uint32_t it = 0; it < 3; it++) {
            float th = __fadd_rn(lo, __fmul_rn(__fadd_rn(hi, -lo),
                                               (float)(warp + 1) / 17.0f));
            if (!(th > lo))
                th = lo;
            uint32_t j = 0;
#pragma unroll
            for (uint32_t v = 0; v < 4; v++) {
                if (rl[v] >= nb)
                    continue;
                float sg = GLB ? ft_cand_sigma(sm.key[rl[v]]) : R.sig[rl[v]];
                j += ft_kcut(lp, keff, sg, th);
            }
            j = __reduce_add_sync(0xffffffffu, j);
            if (lane == 0) {
                uint64_t e = (uint64_t)j * nb / ns;
                est[warp] = e > 0xffffffffull ? 0xffffffffu : (uint32_t)e;
                thp[warp] = th;
            }
            __syncthreads();
            float nlo = lo, nhi = hi;
            for (uint32_t w = 0; w < FT_GK_WARPS; w++) {
                if (est[w] >= C) {
                    nlo = thp[w];
                } else {
                    nhi = thp[w];
                    break;
                }
            }
            lo = nlo;
            hi = nhi;
            __syncthreads();
        }
    }
    uint32_t tot = 0;
    if (on) {
        uint32_t mine = 0;
        for (uint32_t j = j0; j < j0 + per && j < nb; j++) {
            uint32_t c;
            if (GLB) {
                uint32_t kc = ft_kcut(lp, keff, ft_cand_sigma(sm.key[j]), lo);
                S.r1_kc[j] = kc;
                c = ft_gk_items(
                    t, __ldcg((const unsigned long long *)&S.beam_cr[j].deg),
                    kc);
                S.r1_cs[j] = c;
            } else {
                uint32_t kc = ft_kcut(lp, keff, R.sig[j], lo);
                R.kc[j] = (uint16_t)kc;
                c = ft_gk_items(t, R.deg[j], kc);
                R.cs[j] = c;
            }
            mine += c;
        }
        tot = gk_scan(sm, mine, &ex);
        for (uint32_t j = j0; j < j0 + per && j < nb; j++) {
            uint32_t *cs = GLB ? S.r1_cs : R.cs;
            uint32_t c = cs[j];
            cs[j] = ex;
            ex += c;
        }
        on = lo > th0 && (uint64_t)tot * 4 <= iall;
        if (!GLB && tid == 0)
            R.tot = tot;
    }
    if (tid == 0) {
        if (GLB) {
            /* the round's items past the last beam's first; steps[t].r1
             * (zeroed by the host) says the round runs */
            S.r1_cs[nb] = tot;
            if (on)
                q->steps[t].r1 = ft_sigma_key(lo);
        } else {
            R.on = (uint32_t)on;
            if (on && blockIdx.x == 0)
                q->steps[t].r1 = ft_sigma_key(lo);
        }
    }
    __syncthreads();
}

/* gk_r1_setup for a lazy launch's selecting CTA, out of line (its
 * registers apart from the selection's). */
__device__ __noinline__ void gk_r1_setup_lazy(const ft_gk_params &P,
                                              gk_smem &sm, ft_gk_req *q,
                                              uint32_t t, uint32_t nb,
                                              uint32_t items)
{
    gk_r1_setup<false, true>(P, sm, q, t, nb, items);
}

/* Running results i < n (sorted by score key) whose score key is at most
 * sk: a 32-way search by the warp (the whole warp calls it). */
__device__ __forceinline__ uint32_t gk_hits_le(const ft_gk_hit *h,
                                               uint32_t n, uint64_t sk)
{
    uint32_t lane = threadIdx.x & 31u;
    uint32_t lo = 0, hi = n; /* entries < lo are <= sk, entries >= hi not */
    while (lo < hi) {
        uint32_t step = (hi - lo + 31u) >> 5;
        uint32_t idx = lo + lane * step;
        int ok = idx < hi &&
                 __ldcg((const unsigned long long *)&h[idx].skey) <= sk;
        uint32_t m = (uint32_t)__popc(__ballot_sync(0xffffffffu, ok));
        if (m == 0)
            break;
        uint32_t nhi = lo + m * step;
        lo = lo + (m - 1u) * step + 1u;
        hi = nhi < hi ? nhi : hi;
    }
    return lo;
}

/* Whether request q's first round of step t (theta's key: key) found
 * enough: B next candidates (or t is its last step), and n terminal ones
 * counting the running results of step t - 1 whose score is at least
 * theta x F[t + 1].  The whole warp calls it; every lane gets the
 * answer. */
__device__ __forceinline__ int gk_r1_enough(const ft_gk_req *q, uint32_t t,
                                            uint32_t key)
{
    uint32_t nn = __ldcg(&q->steps[t].n_next);
    uint32_t nt = __ldcg(&q->steps[t].n_term);
    int ok = t + 1 == q->T || nn >= q->B;
    if (ok && nt < q->n) {
        uint32_t nr = __ldcg(&q->steps[t - 1].n_run);
        uint64_t sk =
            ft_score_key(ft_score(ft_sigma_of_key(key), q->F[t + 1]));
        uint32_t c = gk_hits_le(
            (const ft_gk_hit *)q->slot.run[(t - 1) & 1u], nr, sk);
        ok = nt + c >= q->n;
    }
    return ok;
}

/* gk_r1_check for a lazy launch, whose requests had their first rounds
 * on their own (gk_r1_setup<false, true>): every CTA checks every request
 * whose step t had one (warp w the requests w, w + 16, ...), marks those
 * that need the rest in bits of sm.hist, and when any does, the whole
 * grid expands their second rounds and one more grid barrier follows.
 * Every CTA reads the same counts, so all decide alike. */
static_assert(FT_GK_R1_LAZY_MAX <= 32u * sizeof(((gk_smem *)0)->hist) / 4u,
              "the lazy check's bit map outgrows sm.hist");
__device__ void gk_r1_check_lazy(const ft_gk_params &P, gk_smem &sm,
                                 cg::grid_group &grid, uint32_t t)
{
    if (!P.lazy || !P.r1 || t == 0 || P.nreq > FT_GK_R1_LAZY_MAX)
        return;
    uint32_t lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    uint32_t words = (P.nreq + 31u) >> 5;
    for (uint32_t w = threadIdx.x; w < words; w += blockDim.x)
        sm.hist[w] = 0;
    __syncthreads();
    int need = 0;
    for (uint32_t i = warp; i < P.nreq; i += FT_GK_WARPS) {
        ft_gk_req *q = &P.reqs[i];
        if (t >= q->T)
            continue;
        uint32_t key = __ldcg(&q->steps[t].r1);
        if (!key)
            continue;
        if (!gk_r1_enough(q, t, key)) {
            need = 1;
            if (lane == 0)
                atomicOr(&sm.hist[i >> 5], 1u << (i & 31u));
        }
    }
    if (!__syncthreads_or(need))
        return;
    gk_expand<false, true>(P, t, gridDim.x, &sm, 2);
    grid.sync();
}

/* After step t's first round and the grid barrier, every CTA: the step
 * is complete when the round found B next candidates (all above theta,
 * so every one left out ranks after them) and, with the running results
 * of step t - 1 whose score is at least theta's (a terminal candidate
 * left out has sigma <= theta, so no higher a score, and loses ties to
 * earlier steps), n terminal ones or more (those it found have a higher
 * sigma than any it left out, so a higher score).  Else the CTAs that
 * expanded it run the second round (ncta of them), and one more grid
 * barrier.  Every CTA reads the same counts, so all decide alike. */
template <bool FUSE>
__device__ void gk_r1_check(const ft_gk_params &P, gk_smem &sm,
                            cg::grid_group &grid, uint32_t t, uint32_t ncta)
{
    if (!P.r1 || P.nreq != 1 || t == 0)
        return;
    ft_gk_req *q = gk_req<FUSE>(P, &sm, 0);
    if (t >= q->T)
        return;
    /* An expanding CTA of a fused launch knows from its own gk_r1_setup
     * whether step t ran a first round (every one decides alike, and CTA
     * 0 wrote steps[t].r1 from the same decision): no round trip to ask. */
    if (FUSE && blockIdx.x < ncta && !sm.sp.u.r1.on)
        return;
    uint32_t key = __ldcg(&q->steps[t].r1);
    if (!key)
        return;
    if (threadIdx.x < 32) {
        int ok = gk_r1_enough(q, t, key);
        if (threadIdx.x == 0)
            sm.sp.u.r1.rc = (uint32_t)ok;
    }
    __syncthreads();
    if (sm.sp.u.r1.rc)
        return;
    if (!FUSE || blockIdx.x < ncta)
        gk_expand<FUSE>(P, t, ncta, &sm, 2);
    grid.sync();
}

/* Adds keys[lo, hi) to sm.hist: the 8-bit digit at bit sh of every key
 * whose bits under pmask equal prefix, U independent loads in flight per
 * thread (the passes are bound by L2 latency, not bandwidth).  sm.hist is
 * zeroed by the caller; the whole CTA calls it. */
template <int U>
__device__ void gk_hist_slice(gk_smem &sm, const uint64_t *keys, uint32_t lo,
                              uint32_t hi, uint64_t prefix, uint64_t pmask,
                              uint32_t sh)
{
    uint32_t n = hi - lo, nr = (n + 31u) & ~31u;
    for (uint32_t i0 = threadIdx.x; i0 < nr; i0 += (uint32_t)U * blockDim.x) {
        uint64_t kk[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            uint32_t i = i0 + (uint32_t)u * blockDim.x;
            kk[u] = i < n ? keys[lo + i] : ~0ull;
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            uint32_t i = i0 + (uint32_t)u * blockDim.x;
            if (i >= nr) /* uniform per warp: nr % 32 == 0 */
                break;
            uint32_t b = 256u; /* no bucket */
            if (i < n && (kk[u] & pmask) == prefix)
                b = (uint32_t)(kk[u] >> sh) & 255u;
            /* Candidates cluster in few buckets (close sigmas share their
             * high bits): one shared atomic per bucket and warp, not per
             * key, else lanes serialise on one counter. */
            uint32_t peers = __match_any_sync(0xffffffffu, b);
            if (b < 256u &&
                (threadIdx.x & 31u) == (uint32_t)(__ffs(peers) - 1))
                atomicAdd(&sm.hist[b], (uint32_t)__popc(peers));
        }
    }
}

/* One warp picks list st's next digit from the pass's histogram h (G:
 * the grid's, in global memory, complete after the grid barrier and read
 * through L2; else shared memory): the bucket where the running count
 * reaches need.  Every CTA computes the same. */
template <bool G>
__device__ void gk_gdecide(gk_gstate &st, const uint32_t *h, ft_gk_req *q,
                           cub::WarpScan<uint32_t>::TempStorage &ts)
{
    uint32_t lane = threadIdx.x & 31u;
    uint32_t c[8], s = 0;
#pragma unroll
    for (int j = 0; j < 8; j++) {
        c[j] = G ? __ldcg(&h[lane * 8 + j]) : h[lane * 8 + j];
        s += c[j];
    }
    uint32_t incl;
    cub::WarpScan<uint32_t>(ts).InclusiveSum(s, incl);
    uint32_t need = st.need;
    /* Every lane reads need before the one winner rewrites st. */
    __syncwarp();
    uint32_t before = incl - s;
    uint32_t bal = __ballot_sync(0xffffffffu, before < need && need <= incl);
    if (bal == 0) {
        /* The keys in the race are fewer than need: cannot happen (they
         * are the list's, counted once each); never a wrong answer. */
        if (lane == 0) {
            st.done = 1;
            if (q)
                atomicOr(&q->steps[0].err, 2u);
        }
        __syncwarp();
        return;
    }
    if (lane == (uint32_t)(__ffs(bal) - 1)) {
        uint32_t run = before, bucket = 0, cb = 0;
        for (int j = 0; j < 8; j++) {
            if (run + c[j] >= need) {
                bucket = lane * 8 + (uint32_t)j;
                cb = c[j];
                break;
            }
            run += c[j];
        }
        uint32_t need2 = need - run;
        st.prefix |= (uint64_t)bucket << st.sh;
        st.pmask |= 255ull << st.sh;
        st.need = need2;
        /* In the race now: the lim - need2 keys below the prefix and the
         * cb keys on it; at sh == 0 every bit is fixed. */
        uint32_t surv = st.lim - need2 + cb;
        st.done = cb == need2 || surv <= st.cap || st.sh == 0;
        st.sh = st.sh >= 8u ? st.sh - 8u : 0u;
    }
    __syncwarp();
}

/* gk_gstate_init starts the race over m keys for the best lim, all of
 * them between lo and hi: the bits above the highest one in which lo and
 * hi differ are one prefix of every key, so the first digit starts
 * there.  The passes stop once at most cap keys are left in the race. */
__device__ void gk_gstate_init(gk_gstate &g, uint64_t lo, uint64_t hi,
                               uint32_t m, uint32_t lim, uint32_t cap,
                               uint32_t list)
{
    uint64_t diff = lo ^ hi;
    uint32_t hb = diff ? 63u - (uint32_t)__clzll(diff) : 0u;
    g.pmask = hb >= 63u ? 0ull : ~((2ull << hb) - 1ull);
    g.prefix = lo & g.pmask;
    g.sh = hb >= 7u ? hb - 7u : 0u;
    g.need = lim;
    g.lim = lim;
    g.m = m;
    g.list = list;
    g.cap = cap > lim ? cap : lim;
    g.done = m <= g.cap;
    g.off = 0;
}

/* gk_end_to_end lays the round's n lists (racing: only those still in the
 * race) end to end, setting each one's off, and returns their total
 * length.  The whole CTA calls it; every thread has read the total before
 * thread 0 may lay them out again. */
__device__ uint32_t gk_end_to_end(gk_smem &sm, uint32_t n, int racing)
{
    if (threadIdx.x == 0) {
        uint32_t a = 0;
        for (uint32_t j = 0; j < n; j++) {
            sm.gs[j].off = a;
            a += racing && sm.gs[j].done ? 0u : sm.gs[j].m;
        }
        sm.laid = a;
    }
    __syncthreads();
    uint32_t M = sm.laid;
    __syncthreads();
    return M;
}

/* This CTA's slice [*lo, *hi) of a list at off..off+m of lists of M keys
 * laid end to end: the grid shares all lists' keys evenly, whatever their
 * count and lengths. */
__device__ __forceinline__ void gk_slice(uint64_t M, uint32_t off, uint32_t m,
                                         uint32_t *lo, uint32_t *hi)
{
    uint64_t a = M * blockIdx.x / gridDim.x;
    uint64_t b = M * (blockIdx.x + 1) / gridDim.x;
    uint64_t s = a > off ? a : off;
    uint64_t e = b < (uint64_t)off + m ? b : (uint64_t)off + m;
    *lo = s < e ? (uint32_t)(s - off) : 0u;
    *hi = s < e ? (uint32_t)(e - off) : 0u;
}

/* The smallest power of two >= x. */
__device__ __forceinline__ uint32_t gk_pow2(uint32_t x)
{
    uint32_t p = 1;
    while (p < x)
        p <<= 1;
    return p;
}

/* The warp's least and greatest of every lane's mn and mx, in every
 * lane. */
__device__ __forceinline__ void gk_warp_minmax(uint64_t &mn, uint64_t &mx)
{
    for (int o = 16; o > 0; o >>= 1) {
        uint64_t a = __shfl_xor_sync(0xffffffffu, mn, o);
        uint64_t b = __shfl_xor_sync(0xffffffffu, mx, o);
        mn = a < mn ? a : mn;
        mx = b > mx ? b : mx;
    }
}

/* The CTA's least of every thread's mn and greatest of its mx, in
 * sm.kmin / sm.kmax for every thread after it.  The whole CTA calls it. */
__device__ void gk_block_minmax(gk_smem &sm, uint64_t mn, uint64_t mx)
{
    gk_warp_minmax(mn, mx);
    if (threadIdx.x == 0) {
        sm.kmin = ~0ull;
        sm.kmax = 0;
    }
    __syncthreads();
    if ((threadIdx.x & 31u) == 0) {
        atomicMin((unsigned long long *)&sm.kmin, (unsigned long long)mn);
        atomicMax((unsigned long long *)&sm.kmax, (unsigned long long)mx);
    }
    __syncthreads();
}

/* The passes of a race whose state sm.loc holds (every thread past a
 * block barrier since it was written). */
template <typename H>
__device__ void gk_narrow_passes(gk_smem &sm, ft_gk_req *q, uint32_t p0,
                                 H hist)
{
    for (uint32_t p = p0; p < FT_GK_GSEL_PASSES && !sm.loc.done; p++) {
        uint64_t prefix = sm.loc.prefix, pmask = sm.loc.pmask;
        uint32_t sh = sm.loc.sh;
        for (uint32_t b = threadIdx.x; b < 256; b += blockDim.x)
            sm.hist[b] = 0;
        __syncthreads();
        hist(prefix, pmask, sh);
        __syncthreads();
        if (threadIdx.x < 32)
            gk_gdecide<false>(sm.loc, sm.hist, q, sm.wscan[0]);
        __syncthreads();
    }
}

/* One CTA's race for the best lim of m keys (sm.loc), every thread's
 * least and greatest key in mn / mx: the first digit from the CTA's
 * bounds, then a pass a digit, hist(prefix, pmask, sh) adding the digit
 * at sh of every key whose bits under pmask equal prefix to the zeroed
 * sm.hist, until at most max(lim, cap) keys are left (q: where an
 * impossible state is reported, or NULL).  The whole CTA calls it. */
template <typename H>
__device__ void gk_narrow_race(gk_smem &sm, ft_gk_req *q, uint64_t mn,
                               uint64_t mx, uint32_t m, uint32_t lim,
                               uint32_t cap, uint32_t list, H hist)
{
    gk_block_minmax(sm, mn, mx);
    if (threadIdx.x == 0)
        gk_gstate_init(sm.loc, sm.kmin, sm.kmax, m, lim, cap, list);
    __syncthreads();
    gk_narrow_passes(sm, q, 0, hist);
}

/* gk_smem_narrow: of the m keys in sm.key / sm.idx (lim < m <= 4096),
 * keeps at most pow2(lim) that hold the best lim, compacted to the front
 * (radix passes over shared memory), and returns how many: the bitonic
 * sort after it then sorts ~lim keys instead of 4096.  ITEMS: sm.sp.items
 * moves with them. */
template <bool ITEMS>
__device__ uint32_t gk_smem_narrow(gk_smem &sm, uint32_t m, uint32_t lim)
{
    uint32_t tid = threadIdx.x;
    uint32_t cap = gk_pow2(lim);
    if (m <= cap)
        return m;
    uint64_t mn = ~0ull, mx = 0;
    for (uint32_t i = tid; i < m; i += blockDim.x) {
        uint64_t k = sm.key[i];
        mn = k < mn ? k : mn;
        mx = k > mx ? k : mx;
    }
    /* One shared atomic a key: over up to 4096 keys of one CTA no slower
     * than aggregating each warp's equal buckets with __match_any_sync,
     * and 0.2-0.9 us faster a terminal merge (docs/gpu-engine.md); the
     * grid selection's slices, a few keys a thread, keep the
     * aggregation. */
    gk_narrow_race(sm, NULL, mn, mx, m, lim, cap, 0,
                   [&](uint64_t prefix, uint64_t pmask, uint32_t sh) {
                       for (uint32_t i = tid; i < m; i += blockDim.x) {
                           uint64_t k = sm.key[i];
                           if ((k & pmask) == prefix)
                               atomicAdd(
                                   &sm.hist[(uint32_t)(k >> sh) & 255u], 1u);
                       }
                   });
    /* In place: every thread holds its (at most 8) entries first. */
    uint64_t kk[FT_GK_SORT_MAX / FT_GK_BLOCK];
    uint32_t ii[FT_GK_SORT_MAX / FT_GK_BLOCK];
    uint32_t tt[ITEMS ? FT_GK_SORT_MAX / FT_GK_BLOCK : 1];
    uint64_t prefix = sm.loc.prefix, pmask = sm.loc.pmask;
#pragma unroll
    for (uint32_t u = 0; u < FT_GK_SORT_MAX / FT_GK_BLOCK; u++) {
        uint32_t i = tid + u * FT_GK_BLOCK;
        kk[u] = i < m ? sm.key[i] : ~0ull;
        ii[u] = i < m ? sm.idx[i] : 0u;
        if (ITEMS)
            tt[ITEMS ? u : 0] = i < m ? sm.sp.items[i] : 0u;
    }
    if (tid == 0)
        sm.count = 0;
    __syncthreads();
#pragma unroll
    for (uint32_t u = 0; u < FT_GK_SORT_MAX / FT_GK_BLOCK; u++) {
        uint32_t i = tid + u * FT_GK_BLOCK;
        int want = i < m && (kk[u] & pmask) <= prefix;
        uint32_t p = gk_append(&sm.count, want); /* whole warps: i < 4096 */
        if (want) {
            sm.key[p] = kk[u];
            sm.idx[p] = ii[u];
            if (ITEMS)
                sm.sp.items[p] = tt[ITEMS ? u : 0];
        }
    }
    __syncthreads();
    uint32_t ns = sm.count;
    __syncthreads();
    return ns;
}

/* Leaves the best min(m, lim) keys of keys[0, m) sorted ascending in
 * sm.key (with their index in sm.idx); returns how many. */
/* ---- the bitonic sort of a selection's survivors ---------------------
 *
 * n keys in sm.key (with their indexes in sm.idx) are sorted ascending,
 * padded with ~0 up to np = pow2(n), at least 64.  A warp owns blocks of 64
 * consecutive elements, lane l holding elements l and l + 32 of a block in
 * registers: the compare-exchanges of stride 32 are within a thread and
 * those of strides 16..1 are shuffles, so only strides of 64 and more go
 * through shared memory with a block barrier.  1024 keys: 15 barriers
 * instead of 55. */

/* One compare-exchange of stride s < 32 on element e held in (k, i): its
 * partner e ^ s is in lane ^ s, same register. */
__device__ __forceinline__ void gk_cx_lane(uint64_t &k, uint32_t &i,
                                           uint32_t e, uint32_t s,
                                           uint32_t size)
{
    uint64_t kp = __shfl_xor_sync(0xffffffffu, k, s);
    uint32_t ip = __shfl_xor_sync(0xffffffffu, i, s);
    bool keep_min = ((e & s) == 0) == ((e & size) == 0);
    if (keep_min ? kp < k : kp > k) {
        k = kp;
        i = ip;
    }
}

/* Every warp's blocks through bitonic sizes lo..hi (powers of two); for a
 * size above 64 only its strides 32..1, in registers. */
__device__ void gk_sort_regs(gk_smem &sm, uint32_t np, uint32_t lo,
                             uint32_t hi)
{
    uint32_t lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    for (uint32_t b = warp; b < np / 64u; b += FT_GK_WARPS) {
        uint32_t e0 = b * 64u + lane, e1 = e0 + 32u;
        uint64_t k0 = sm.key[e0], k1 = sm.key[e1];
        uint32_t i0 = sm.idx[e0], i1 = sm.idx[e1];
        for (uint32_t size = lo; size <= hi; size <<= 1) {
            uint32_t st = size >> 1;
            if (st >= 32u) {
                bool up = (e0 & size) == 0;
                if ((k0 > k1) == up) {
                    uint64_t tk = k0;
                    k0 = k1;
                    k1 = tk;
                    uint32_t ti = i0;
                    i0 = i1;
                    i1 = ti;
                }
                st = 16u;
            }
            for (; st > 0; st >>= 1) {
                gk_cx_lane(k0, i0, e0, st, size);
                gk_cx_lane(k1, i1, e1, st, size);
            }
        }
        sm.key[e0] = k0;
        sm.key[e1] = k1;
        sm.idx[e0] = i0;
        sm.idx[e1] = i1;
    }
    __syncthreads();
}

__device__ void gk_sort(gk_smem &sm, uint32_t n)
{
    if (n <= 1)
        return;
    uint32_t np = 64;
    while (np < n)
        np <<= 1;
    for (uint32_t i = n + threadIdx.x; i < np; i += blockDim.x) {
        sm.key[i] = ~0ull;
        sm.idx[i] = 0;
    }
    __syncthreads();
    gk_sort_regs(sm, np, 2, 64);
    for (uint32_t size = 128; size <= np; size <<= 1) {
        for (uint32_t stride = size >> 1; stride >= 64u; stride >>= 1) {
            for (uint32_t i = threadIdx.x; i < np / 2; i += blockDim.x) {
                /* stride is a power of two: no division */
                uint32_t lo = ((i & ~(stride - 1u)) << 1) | (i & (stride - 1u));
                uint32_t hi = lo + stride;
                bool up = (lo & size) == 0;
                uint64_t a = sm.key[lo], b = sm.key[hi];
                if ((a > b) == up) {
                    sm.key[lo] = b;
                    sm.key[hi] = a;
                    uint32_t ti = sm.idx[lo];
                    sm.idx[lo] = sm.idx[hi];
                    sm.idx[hi] = ti;
                }
            }
            __syncthreads();
        }
        gk_sort_regs(sm, np, size, size);
    }
}

__device__ uint32_t gk_select_sorted(gk_smem &sm, const uint64_t *keys,
                                     uint32_t m, uint32_t lim)
{
    uint32_t tid = threadIdx.x;
    uint64_t prefix = 0, pmask = 0;
    uint32_t x = m < lim ? m : lim;
    GK_SUB(0);
    /* A list that fits shared memory is sorted whole: one coalesced load
     * and a bitonic sort beat the radix passes (each a round trip to L2
     * and three block barriers).  Keys are distinct (they hold r and k),
     * so the first x of the sorted list are the best x. */
    uint32_t full = m > lim && m <= FT_GK_SORT_MAX;
    if (m > lim && !full) {
        if (tid == 0) {
            sm.need = lim;
            sm.done = 0;
        }
        for (int d = 7; d >= 0; d--) {
            for (uint32_t b = tid; b < 256; b += blockDim.x)
                sm.hist[b] = 0;
            __syncthreads();
            uint32_t sh = (uint32_t)d * 8u;
            gk_hist_slice<8>(sm, keys, 0, m, prefix, pmask, sh);
            __syncthreads();
            if (tid < 32) {
                /* Find the bucket where the running count reaches need. */
                uint32_t c[8], s = 0;
                for (int j = 0; j < 8; j++) {
                    c[j] = sm.hist[tid * 8 + j];
                    s += c[j];
                }
                uint32_t incl = s;
                for (int o = 1; o < 32; o <<= 1) {
                    uint32_t y = __shfl_up_sync(0xffffffffu, incl, o);
                    if ((int)tid >= o)
                        incl += y;
                }
                uint32_t need = sm.need;
                /* Every lane reads need before the one winner rewrites it. */
                __syncwarp();
                uint32_t before = incl - s;
                if (before < need && need <= incl) {
                    uint32_t run = before;
                    for (int j = 0; j < 8; j++) {
                        if (run + c[j] >= need) {
                            sm.bucket = tid * 8 + j;
                            sm.need = need - run;
                            sm.done = c[j] == need - run;
                            break;
                        }
                        run += c[j];
                    }
                }
            }
            __syncthreads();
            prefix |= (uint64_t)sm.bucket << sh;
            pmask |= 255ull << sh;
            if (sm.done)
                break;
            __syncthreads();
        }
        __syncthreads();
    }
    uint32_t nfull = m;
    if (full) {
#pragma unroll 4
        for (uint32_t i = tid; i < m; i += blockDim.x) {
            sm.key[i] = keys[i];
            sm.idx[i] = i;
        }
        __syncthreads();
        nfull = gk_smem_narrow<false>(sm, m, lim);
    }
    if (tid == 0)
        sm.count = 0;
    __syncthreads();
    if (!full && m <= lim) {
        /* Every key is kept: copied in place, no counter. */
#pragma unroll 4
        for (uint32_t i = tid; i < m; i += blockDim.x) {
            sm.key[i] = keys[i];
            sm.idx[i] = i;
        }
    }
    uint32_t mr = (m + 31u) & ~31u;
    for (uint32_t i0 = tid; !full && m > lim && i0 < mr;
         i0 += 4u * blockDim.x) {
        uint64_t kk[4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            uint32_t i = i0 + (uint32_t)u * blockDim.x;
            kk[u] = i < m ? keys[i] : ~0ull;
        }
#pragma unroll
        for (int u = 0; u < 4; u++) {
            uint32_t i = i0 + (uint32_t)u * blockDim.x;
            if (i >= mr) /* uniform per warp */
                break;
            int want = i < m && (kk[u] & pmask) <= prefix;
            uint32_t p = gk_append(&sm.count, want);
            if (want && p < FT_GK_SORT_MAX) {
                sm.key[p] = kk[u];
                sm.idx[p] = i;
            }
        }
    }
    __syncthreads();
    GK_SUB(1);
    gk_sort(sm, full ? nfull : x);
    GK_SUB(2);
    return x;
}

/* ---- grid selection of long lists ------------------------------------ */


/* Bounds every candidate key of request q's step t lies within, from
 * its beams' best and worst sigma (smax, smin; 0 at step 0): a
 * candidate's sigma lies between the worst beam's plus the row's worst
 * passing log-prob and the best beam's plus its best (binary32 addition
 * rounds monotonically), and the key's order is the sigma's, descending.
 * The grid selection takes them from the slot's beams, a fused CTA's
 * local narrowing from its own (gk_local_narrow). */
__device__ __forceinline__ void gk_key_bounds(const ft_gk_req *q,
                                              uint32_t t, float smax,
                                              float smin, uint64_t &lo,
                                              uint64_t &hi)
{
    const float *lp = q->logp + q->row[t];
    uint32_t ke = q->keff[t];
    lo = ft_cand_key(FT_FADD(smax, lp[0]), 0, 0);
    hi = ft_cand_key(FT_FADD(smin, lp[ke > 0 ? ke - 1 : 0]), 0xffffu,
                     0xffffu);
}

/* gk_grid_select narrows every long list of step t (gk_list_long) with
 * the whole grid: MSB radix passes over 8-bit digits, each CTA adding its
 * slice of the list to a global histogram (one grid barrier per pass;
 * then every CTA picks the same digit from it), until at most max(lim,
 * gsel_cap) keys can be among the best lim; then every CTA appends its
 * slice's survivors to the list's survivor buffer (computing the child
 * ranges of next candidates the expansion left lazy), and one more
 * barrier.  The selecting CTA then sorts the survivors (gk_select_list).
 * One CTA alone streams a list at ~50 GB/s; the grid reads it from L2
 * at ~7 TB/s (shared/H200-FACTS.md: top-1000 of 10^6 keys 17 us against
 * 339 us).
 *
 * The first digit starts at the highest bit in which two keys of the list
 * can differ: every candidate's sigma lies between best beam + best
 * proposal and worst beam + worst passing proposal (binary32 addition
 * rounds monotonically; beams are sorted), so the bits above are one
 * prefix and need no pass.  Lists are taken FT_GK_GRID_LISTS list indexes
 * at a time; a round without a long list costs no barrier.  Every branch
 * depends only on what all CTAs read after the same barrier, so all take
 * the same barriers. */
template <bool FUSE>
__device__ void gk_grid_select(const ft_gk_params &P, gk_smem &sm,
                               cg::grid_group &grid, uint32_t t)
{
    uint32_t tid = threadIdx.x, warp = tid >> 5;
    uint32_t nl = 2 * P.nreq;
    for (uint32_t L0 = 0; L0 < nl; L0 += FT_GK_GRID_LISTS) {
        uint32_t mine = 0;
        gk_gstate g;
        if (tid < FT_GK_GRID_LISTS && L0 + tid < nl) {
            uint32_t L = L0 + tid, term = L & 1u;
            ft_gk_req *q = gk_req<FUSE>(P, &sm, L >> 1);
            if (t < q->T && (term || t + 1 < q->T)) {
                uint32_t lim = term ? q->n : q->B;
                uint32_t m = gk_list_len(q, t, term);
                if (FUSE)
                    sm.glen[term] = m; /* one request: L = term */
                if (gk_list_long(P, m, lim) &&
                    !gk_list_medium(P, m, term)) {
                    float smax = 0.0f, smin = 0.0f;
                    if (t > 0) {
                        uint32_t nb = q->steps[t].n_beam;
                        smax = q->slot.beam_sigma[0];
                        smin = q->slot.beam_sigma[nb - 1];
                    }
                    uint64_t lo, hi;
                    gk_key_bounds(q, t, smax, smin, lo, hi);
                    /* Survivors: about lim, so that their sort is
                     * short (tests: exactly lim). */
                    gk_gstate_init(g, lo, hi, m, lim,
                                   P.gsel_cap ? P.gsel_cap : gk_pow2(lim), L);
                    mine = 1;
                }
            }
        }
        /* Mostly no list is long: one barrier says so, no scan. */
        if (!__syncthreads_or(mine))
            continue;
        uint32_t at;
        uint32_t n = gk_scan(sm, mine, &at);
        if (mine)
            sm.gs[at] = g;
        __syncthreads();
        for (uint32_t p = 0; p < FT_GK_GSEL_PASSES; p++) {
            uint32_t M = gk_end_to_end(sm, n, 1);
            if (M == 0)
                break;
            for (uint32_t j = 0; j < n; j++) {
                const gk_gstate &st = sm.gs[j];
                if (st.done)
                    continue;
                uint32_t lo, hi;
                gk_slice(M, st.off, st.m, &lo, &hi);
                if (lo == hi)
                    continue;
                ft_gk_req *q = gk_req<FUSE>(P, &sm, st.list >> 1);
                uint32_t term = st.list & 1u;
                const ft_gk_lists L = gk_lists<FUSE>(P, q, t);
                for (uint32_t b = tid; b < 256; b += blockDim.x)
                    sm.hist[b] = 0;
                __syncthreads();
                gk_hist_slice<4>(sm, term ? L.term_key : L.cand_key, lo, hi,
                                 st.prefix, st.pmask, st.sh);
                __syncthreads();
                uint32_t *gh = L.gsel + term * FT_GK_GSEL_WORDS + p * 256u;
                for (uint32_t b = tid; b < 256; b += blockDim.x)
                    if (sm.hist[b])
                        atomicAdd(&gh[b], sm.hist[b]);
                __syncthreads();
            }
            grid.sync();
            for (uint32_t j = warp; j < n; j += FT_GK_WARPS) {
                gk_gstate &st = sm.gs[j];
                if (st.done)
                    continue;
                ft_gk_req *q = gk_req<FUSE>(P, &sm, st.list >> 1);
                uint32_t term = st.list & 1u;
                gk_gdecide<true>(st,
                                 gk_lists<FUSE>(P, q, t).gsel +
                                     term * FT_GK_GSEL_WORDS + p * 256u,
                                 q, sm.wscan[warp]);
            }
            __syncthreads();
        }
        /* Survivors: this CTA's slice of every long list. */
        uint32_t M = gk_end_to_end(sm, n, 0);
        for (uint32_t j = 0; j < n; j++) {
            const gk_gstate &st = sm.gs[j];
            ft_gk_req *q = gk_req<FUSE>(P, &sm, st.list >> 1);
            const ft_gk_slot &S = q->slot;
            const ft_gk_lists L = gk_lists<FUSE>(P, q, t);
            uint32_t term = st.list & 1u;
            if (!st.done && tid == 0)
                atomicOr(&q->steps[0].err, 2u); /* cannot happen */
            const uint64_t *keys = term ? L.term_key : L.cand_key;
            int ranges = !term;
            uint32_t *ns = L.gsel + term * FT_GK_GSEL_WORDS + FT_GK_GSEL_NSURV;
            uint64_t *sk = S.surv_key + term * FT_GK_LIST_MAX;
            uint32_t *si = S.surv_idx + term * FT_GK_LIST_MAX;
            uint32_t lo, hi;
            gk_slice(M, st.off, st.m, &lo, &hi);
            uint32_t cnt = hi - lo, nr = (cnt + 31u) & ~31u;
            for (uint32_t i0 = tid; i0 < nr; i0 += 4u * blockDim.x) {
                uint64_t kk[4];
#pragma unroll
                for (int u = 0; u < 4; u++) {
                    uint32_t i = i0 + (uint32_t)u * blockDim.x;
                    kk[u] = i < cnt ? keys[lo + i] : ~0ull;
                }
#pragma unroll
                for (int u = 0; u < 4; u++) {
                    uint32_t i = i0 + (uint32_t)u * blockDim.x;
                    if (i >= nr) /* uniform per warp */
                        break;
                    int want = i < cnt && (kk[u] & st.pmask) <= st.prefix;
                    uint32_t pos = gk_append(ns, want);
                    if (!want)
                        continue;
                    if (pos >= FT_GK_SORT_MAX) {
                        atomicOr(&q->steps[0].err, 2u); /* cannot happen */
                        continue;
                    }
                    uint32_t c = lo + i;
                    sk[pos] = kk[u];
                    si[pos] = c;
                    if (ranges && !gk_eager(P, c)) {
                        /* Only the survivors' ranges: a few thousand
                         * chains side by side over the grid instead of
                         * one per candidate in the expansion. */
                        L.cand_cr[c] = gk_children(P, L.cand_node[c]);
                        L.cand_kcut[c] = ft_kcut(
                            q->logp + q->row[t + 1], q->keff[t + 1],
                            ft_cand_sigma(kk[u]), q->theta_sent);
                    }
                }
            }
        }
        grid.sync();
    }
}

/* What a selection reads of request q's list (0: next, 1: terminal) at
 * step t: the list itself, or a long list's survivors of the grid
 * selection (si: their candidate indexes).  n: at most 4096 survivors (an
 * overflow is reported by gk_grid_select); a short list has at most
 * select_grid_min keys (so at most 4096 in a spread launch). */
struct gk_src {
    const uint64_t *keys;
    const uint32_t *si;
    uint32_t n;
    int medium; /* the whole list, to narrow first (gk_local_narrow) */
};

template <bool FUSE>
__device__ __forceinline__ gk_src gk_list_src(const ft_gk_params &P,
                                              const gk_smem &sm,
                                              const ft_gk_req *q, uint32_t t,
                                              uint32_t term, uint32_t lim)
{
    const ft_gk_slot &S = q->slot;
    const ft_gk_lists L = gk_lists<FUSE>(P, q, t);
    gk_src r;
    /* (a fused launch's grid selection read it already) */
    r.n = FUSE ? sm.glen[term] : gk_list_len(q, t, term);
    r.keys = term ? L.term_key : L.cand_key;
    r.si = NULL;
    /* a long list: the grid selection's survivors, or whole when
     * medium */
    r.medium = gk_list_long(P, r.n, lim) && gk_list_medium(P, r.n, term);
    if (gk_list_long(P, r.n, lim) && !r.medium) {
        r.n = __ldcg(&L.gsel[term * FT_GK_GSEL_WORDS + FT_GK_GSEL_NSURV]);
        r.keys = S.surv_key + term * FT_GK_LIST_MAX;
        r.si = S.surv_idx + term * FT_GK_LIST_MAX;
        if (r.n > FT_GK_SORT_MAX)
            r.n = FT_GK_SORT_MAX;
    }
    return r;
}

/* The best min(m, lim) of request q's list (0: next, 1: terminal) at step
 * t, sorted ascending in sm.key with their candidate indexes in sm.idx;
 * returns how many.  A long list is sorted from the grid selection's
 * survivors. */
__device__ uint32_t gk_select_list(const ft_gk_params &P, gk_smem &sm,
                                   ft_gk_req *q, uint32_t t, uint32_t term,
                                   uint32_t lim)
{
    gk_src src = gk_list_src<false>(P, sm, q, t, term, lim);
    uint32_t x = gk_select_sorted(sm, src.keys, src.n, lim);
    if (src.si == NULL)
        return x;
    for (uint32_t j = threadIdx.x; j < x; j += blockDim.x)
        sm.idx[j] = src.si[sm.idx[j]];
    __syncthreads();
    GK_SUB(3);
    return x;
}

/* The beams of step t+1 from the x selected next candidates in sm.key
 * (sorted) and sm.idx (their candidate indexes): child ranges, cuts, item
 * prefix sums, and the history entry at the entry's global rank
 * (rank[j], or j when rank is NULL). */
__device__ uint32_t gk_build_beams(const ft_gk_params &P, gk_smem &sm,
                                   ft_gk_req *q, uint32_t t, uint32_t x,
                                   const uint32_t *rank)
{
    const ft_gk_slot &S = q->slot;
    uint32_t t1 = t + 1;
    /* A selected candidate's child range is ready if it was eager or
     * survived a grid selection (gk_eager, gk_grid_select); the others'
     * are computed here, strided so that a thread's chains are few. */
    int longl = gk_list_long(P, gk_list_len(q, t, 0), q->B);
    int any = 0;
    if (!longl) {
        for (uint32_t j = threadIdx.x; j < x; j += blockDim.x) {
            if (gk_eager(P, sm.idx[j]))
                continue;
            uint64_t key = sm.key[j];
            float sigma = ft_cand_sigma(key);
            S.beam_cr[j] = gk_children(P, S.cand_node[sm.idx[j]]);
            S.beam_kcut[j] = ft_kcut(q->logp + q->row[t1], q->keff[t1],
                                     sigma, q->theta_sent);
        }
        any = 1;
        __syncthreads();
    }
    GK_SUB(4);
    /* Each thread handles up to 8 consecutive beams (x <= 4096). */
    uint32_t per = (x + blockDim.x - 1) / blockDim.x;
    uint32_t j0 = threadIdx.x * per;
    uint32_t mine = 0;
    for (uint32_t j = j0; j < j0 + per && j < x; j++) {
        uint64_t key = sm.key[j];
        float sigma = ft_cand_sigma(key);
        ft_child_range cr;
        uint32_t kcut;
        if (any && !gk_eager(P, sm.idx[j])) {
            cr = S.beam_cr[j];
            kcut = S.beam_kcut[j];
        } else {
            cr = S.cand_cr[sm.idx[j]];
            kcut = S.cand_kcut[sm.idx[j]];
            S.beam_cr[j] = cr;
            S.beam_kcut[j] = kcut;
        }
        S.beam_sigma[j] = sigma;
        S.hist[(size_t)t * S.bmax + (rank ? rank[j] : j)] =
            ft_hist_entry(key);
        uint32_t c = ft_gk_items(t1, cr.deg, kcut);
        S.beam_cstart[j] = c; /* per-beam count for now */
        mine += c;
    }
    uint32_t excl;
    uint32_t total = gk_scan(sm, mine, &excl);
    for (uint32_t j = j0; j < j0 + per && j < x; j++) {
        uint32_t c = S.beam_cstart[j];
        S.beam_cstart[j] = excl;
        excl += c;
    }
    if (threadIdx.x == 0) {
        q->steps[t1].n_beam = x;
        q->steps[t1].n_items = total;
    }
    GK_SUB(5);
    return total;
}

/* The next list: new beams of step t+1. */
__device__ void gk_select_next(const ft_gk_params &P, gk_smem &sm,
                               ft_gk_req *q, uint32_t t)
{
    uint32_t x = gk_select_list(P, sm, q, t, 0, q->B);
    uint32_t items = gk_build_beams(P, sm, q, t, x, NULL);
    /* A lazy launch: the first round of step t + 1, if it has one, from
     * the beams just built (every request's on its own, by the CTA that
     * selected them: no barrier of its own). */
    if (P.lazy && P.r1)
        gk_r1_setup_lazy(P, sm, q, t + 1, x, items);
}

/* ---- terminal entries, shared by both selections ------------------- */

/* Running entries (sorted by score key) with a score key <= skey: where a
 * new entry lands among them (earlier steps win ties).  pk: their keys in
 * shared memory, or NULL to read them from prev. */
__device__ __forceinline__ uint32_t gk_prev_le(const uint64_t *pk,
                                               const ft_gk_hit *prev,
                                               uint32_t nprev, uint64_t skey)
{
    uint32_t lo = 0, hi = nprev;
    while (lo < hi) {
        uint32_t mid = (lo + hi) >> 1;
        if ((pk ? pk[mid] : prev[mid].skey) <= skey)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The kept entry of terminal candidate key (node u) at step t. */
__device__ __forceinline__ ft_gk_hit gk_new_hit(uint64_t key, uint64_t u,
                                                double score, uint32_t t)
{
    ft_gk_hit h;
    h.skey = ft_score_key(score);
    h.node = u;
    h.score = score;
    h.sigma = ft_cand_sigma(key);
    h.order = ft_order(t, ft_cand_rank(key), ft_cand_k(key));
    return h;
}

/* Writes result j of request q (its tokens backtraced through the
 * history) to the output. */
__device__ __forceinline__ void gk_write_result(const ft_gk_params &P,
                                                ft_gk_req *q, uint32_t j,
                                                const ft_gk_hit &h)
{
    ft_gk_out_hit *oh = (ft_gk_out_hit *)(q->out + 1);
    uint32_t *otok = (uint32_t *)(oh + q->n);
    ft_gk_out_hit o;
    o.len = ft_backtrace(otok + (size_t)j * q->T, h.order, q->slot.hist,
                         q->slot.bmax, q->tok, q->row);
    o.rank = gk_term_rank(P, h.node);
    o.score = h.score;
    o.sigma = h.sigma;
    o.order = h.order;
    o.pad_ = 0;
    oh[j] = o;
}

/* The terminal list: merge into the running best n; in the last step
 * write the results. */
__device__ void gk_select_term(const ft_gk_params &P, gk_smem &sm,
                               ft_gk_req *q, uint32_t t)
{
    const ft_gk_slot &S = q->slot;
#ifdef FT_GK_PROFILE
    uint64_t c0 = clock64();
#endif
    uint32_t x = gk_select_list(P, sm, q, t, 1, q->n);
    const ft_gk_hit *prev = (const ft_gk_hit *)S.run[(t & 1u) ^ 1u];
    ft_gk_hit *dst = (ft_gk_hit *)S.run[t & 1u];
    uint32_t nprev = t ? q->steps[t - 1].n_run : 0;
    double F = q->F[t + 1];
    /* The running results' score keys go to shared memory behind the new
     * entries when they fit (one coalesced load instead of a chain of
     * dependent L2 loads per binary-search step and entry). */
    int staged = x + nprev <= FT_GK_SORT_MAX;
    uint64_t *pk = sm.key + x;
    if (staged)
        for (uint32_t i = threadIdx.x; i < nprev; i += blockDim.x)
            pk[i] = prev[i].skey;
    __syncthreads();
    for (uint32_t j = threadIdx.x; j < x; j += blockDim.x) {
        uint64_t key = sm.key[j];
        double score = ft_score(ft_cand_sigma(key), F);
        uint64_t skey = ft_score_key(score);
        uint32_t pos = j + gk_prev_le(staged ? pk : NULL, prev, nprev, skey);
        /* Only this thread reads sm.key[j]: it becomes the score key
         * the other side's searches need. */
        sm.key[j] = skey;
        if (pos < q->n)
            dst[pos] = gk_new_hit(key, S.term_node[sm.idx[j]], score, t);
    }
    __syncthreads();
    for (uint32_t i = threadIdx.x; i < nprev; i += blockDim.x) {
        ft_gk_hit h = prev[i];
        uint32_t lo = 0, hi = x; /* new entries strictly better */
        while (lo < hi) {
            uint32_t mid = (lo + hi) >> 1;
            if (sm.key[mid] < h.skey)
                lo = mid + 1;
            else
                hi = mid;
        }
        uint32_t pos = i + lo;
        if (pos < q->n)
            dst[pos] = h;
    }
    uint32_t nrun = nprev + x < q->n ? nprev + x : q->n;
    if (threadIdx.x == 0)
        q->steps[t].n_run = nrun;
#ifdef FT_GK_PROFILE
    if (blockIdx.x == 1 && threadIdx.x == 0) {
        gk_sub[t * 8 + 6] = clock64() - c0;
        gk_sub[t * 8 + 7] = 0;
    }
#endif
    if (t + 1 < q->T)
        return;
    __syncthreads();
    /* Last step: backtrace and write the results. */
    ft_gk_out_head *head = q->out;
    for (uint32_t j = threadIdx.x; j < nrun; j += blockDim.x)
        gk_write_result(P, q, j, dst[j]);
    if (threadIdx.x == 0) {
        head->n = nrun;
        head->err = q->steps[0].err;
    }
#ifdef FT_GK_PROFILE
    if (blockIdx.x == 1 && threadIdx.x == 0)
        gk_sub[t * 8 + 7] = clock64() - c0 - gk_sub[t * 8 + 6];
#endif
}

/* ---- the selection spread over the grid (launches of few requests) ----
 *
 * With few requests one CTA per list leaves the grid idle while it sorts
 * (~17 us a step at B = 1000, the sort alone 7.5).  Here every active list
 * (request, next or terminal) gets every nl-th CTA of the grid instead.
 * Each CTA of a list loads its keys (a long list's grid-selection
 * survivors) into shared memory and takes its share of them (by a hash of
 * their candidate index).  A next list of more than FT_GK_BUCKET_MIN
 * keys ranks its share by buckets (gk_spread_next); a terminal list, or a
 * short next list, is first narrowed to at most pow2(lim) keys that hold
 * the best lim (gk_smem_narrow: the same set in every CTA, in another
 * order) and ranks each by counting (gk_spread_rank).  Either way a key's
 * rank is the number of keys below it (keys are distinct), and a beam's
 * first expansion item is the sum of the items of the keys below it (the
 * selected are the best, so these are exactly the beams before it).  No
 * sort: every beam, result and history entry is written at its rank
 * directly.  The terminal list merges into
 * the running results the same way: a new entry of rank r lands at r +
 * (running entries with a score key <= its own), a running entry i at i +
 * min(x, survivors with a smaller score key) -- the survivors with a
 * smaller score key are a prefix of the key order, so at most x of them
 * are selected.  In the last step each result is backtraced where it is
 * written.  Requires every list to fit shared memory and every next
 * candidate's child range to be ready (P.spread: the host sets it for a
 * launch that is not lazy and whose short lists hold at most
 * FT_GK_LIST_MAX candidates). */

/* Member g of G owns the survivors whose candidate index hashes to g: the
 * best candidates of a step cluster in index (they are appended by the
 * warps of the best beams), so a range of indexes would give one CTA
 * most of the work. */
__device__ __forceinline__ int gk_spread_owns(uint32_t c, uint32_t g,
                                              uint32_t G)
{
    return (uint32_t)(((uint64_t)(c * 0x9e3779b1u) * G) >> 32) == g;
}

/* Ranks the survivors this CTA owns (gk_spread_owns) among the s
 * survivors in sm.key: sm.sp.u.r.orank[o] for own entry o, and for a next
 * list (items) sm.sp.u.r.ocs[o], the items of the survivors before it.
 * Returns how many it owns. */
__device__ uint32_t gk_spread_rank(gk_smem &sm, uint32_t s, uint32_t g,
                                   uint32_t G, int items)
{
    uint32_t tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
    if (tid == 0)
        sm.count = 0;
    __syncthreads();
    uint32_t sr = (s + 31u) & ~31u;
    for (uint32_t p = tid; p < sr; p += blockDim.x) {
        int want = p < s && gk_spread_owns(sm.idx[p], g, G);
        uint32_t o = gk_append(&sm.count, want); /* whole warps */
        if (want)
            sm.sp.u.r.own[o] = (uint16_t)p;
    }
    __syncthreads();
    uint32_t no = sm.count;
    /* One warp an owned survivor, its lanes over all s. */
    for (uint32_t o = warp; o < no; o += FT_GK_WARPS) {
        uint64_t k = sm.key[sm.sp.u.r.own[o]];
        uint32_t r = 0, c = 0;
        for (uint32_t j = lane; j < s; j += 32u) {
            int lt = sm.key[j] < k;
            r += (uint32_t)lt;
            if (items && lt)
                c += sm.sp.items[j];
        }
        r = __reduce_add_sync(0xffffffffu, r);
        if (items)
            c = __reduce_add_sync(0xffffffffu, c);
        if (lane == 0) {
            sm.sp.u.r.orank[o] = (uint16_t)r;
            sm.sp.u.r.ocs[o] = c;
        }
    }
    __syncthreads();
    return no;
}

/* Beam r (of x) of step t + 1 from the next candidate at place p of the
 * spread selection's shared memory, its first expansion item cs: child
 * range and cut (from the expansion or the grid selection), sigma, the
 * history entry; the last beam also sets the step's counts. */
template <bool FUSE>
__device__ __forceinline__ void gk_spread_beam(const gk_smem &sm,
                                               ft_gk_req *q, uint32_t t,
                                               uint32_t p, uint32_t r,
                                               uint32_t x, uint32_t cs)
{
    const ft_gk_slot &S = q->slot;
    uint64_t key = sm.key[p];
    if (!FUSE) {
        /* (a fused launch's expansion reads its CTA's own beams; the
         * grid selection only their sigma) */
        uint32_t c = sm.idx[p];
        S.beam_cr[r] = S.cand_cr[c];
        S.beam_kcut[r] = S.cand_kcut[c];
        S.beam_cstart[r] = cs;
    }
    S.beam_sigma[r] = ft_cand_sigma(key);
    S.hist[(size_t)t * S.bmax + r] = ft_hist_entry(key);
    if (r + 1 == x) {
        q->steps[t + 1].n_beam = x;
        q->steps[t + 1].n_items = cs + sm.sp.items[p];
    }
}

/* Key k's bucket: its 10-bit digit from bit sh. */
__device__ __forceinline__ uint32_t gk_bucket(uint64_t k, uint32_t sh)
{
    return (uint32_t)(k >> sh) & (GK_NB - 1u);
}

/* Beam r of a fused launch's next step: this CTA's copy (gk_local_beams),
 * and the global entries (gk_spread_beam) if this CTA owns it. */
__device__ __forceinline__ void gk_local_beam(gk_smem &sm, ft_gk_req *q,
                                              uint32_t t, uint32_t p,
                                              uint32_t r, uint32_t x,
                                              uint32_t cs, uint32_t g,
                                              uint32_t G)
{
    sm.sp.lb.cs[r] = cs;
    sm.sp.lb.p[r] = (uint16_t)p;
    if (r + 1 == x)
        sm.sp.lb.tot = cs + sm.sp.items[p];
    if (gk_spread_owns(sm.idx[p], g, G))
        gk_spread_beam<true>(sm, q, t, p, r, x, cs);
}

/* gk_spread_next: member g of G of the CTAs that select request q's next
 * list of step t, its s keys in sm.key (their candidates in sm.idx, their
 * items at step t + 1 in sm.sp.items, every warp's key bounds in
 * sm.sp.u.b), keeping the best x.  A key's rank is the number of keys
 * below it, its first item the items of those: every key shares the bits
 * above the highest one in which the list's least and greatest key
 * differ, so the 10-bit digit from there is monotone in the key; counted
 * and scanned per bucket, the keys below one are those of the buckets
 * before its own plus those below it in its own, which the warp ranking
 * it counts (the keys are grouped by bucket first).  No narrowing, no
 * pass over all s keys per ranked key.  LOCAL (a fused launch): every
 * member ranks every key of those buckets, one lane a key, and keeps all
 * x beams (gk_local_beam); the owners also write the global ones. */
template <bool LOCAL>
__device__ void gk_spread_next(const ft_gk_params &P, gk_smem &sm,
                               ft_gk_req *q, uint32_t t, uint32_t s,
                               uint32_t x, uint32_t g, uint32_t G)
{
    gk_bucket_smem &B = sm.sp.u.b;
    uint32_t tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
    uint64_t mn = B.wmin[0], mx = B.wmax[0];
    for (uint32_t w = 1; w < FT_GK_WARPS; w++) {
        mn = B.wmin[w] < mn ? B.wmin[w] : mn;
        mx = B.wmax[w] > mx ? B.wmax[w] : mx;
    }
    uint64_t diff = mn ^ mx;
    uint32_t hb = diff ? 63u - (uint32_t)__clzll(diff) : 0u;
    uint32_t sh = hb >= 9u ? hb - 9u : 0u;
    /* Step 0: every candidate is a child of the root (r = 0), one per
     * proposal k, and a row is sorted by log-prob descending, so the keys'
     * order is the order of k (equal log-probs: k breaks the tie in the
     * key as well).  With every k below GK_NB, bucket k then holds one key
     * and a rank needs no count within its bucket (the sigma digit put the
     * tail's close log-probs in few buckets: step 0's ranking took 1.9 us
     * at BW = 100, docs/BENCHMARKS.md 3n). */
    const bool byk = t == 0 && q->kcut0 <= GK_NB;
    auto bkt = [&](uint64_t key) -> uint32_t {
        return byk ? (uint32_t)key & 0xffffu : gk_bucket(key, sh);
    };
    for (uint32_t i = tid; i < s; i += blockDim.x) {
        uint32_t b = bkt(sm.key[i]);
        atomicAdd(&B.cnt[b], 1u);
        atomicAdd(&B.isum[b], sm.sp.items[i]);
    }
    __syncthreads();
    {
        /* count << 32 | items per bucket: one scan for both (a step's
         * items fit 32 bits, n_items) */
        uint64_t v[GK_NB / FT_GK_BLOCK], e[GK_NB / FT_GK_BLOCK];
#pragma unroll
        for (uint32_t j = 0; j < GK_NB / FT_GK_BLOCK; j++) {
            uint32_t b = tid * (GK_NB / FT_GK_BLOCK) + j;
            v[j] = (uint64_t)B.cnt[b] << 32 | B.isum[b];
        }
        cub::BlockScan<uint64_t, FT_GK_BLOCK>(B.scan64).ExclusiveSum(v, e);
#pragma unroll
        for (uint32_t j = 0; j < GK_NB / FT_GK_BLOCK; j++) {
            uint32_t b = tid * (GK_NB / FT_GK_BLOCK) + j;
            B.st[b] = B.cur[b] = (uint32_t)(e[j] >> 32);
            B.isum[b] = (uint32_t)e[j];
        }
    }
    if (LOCAL && tid == 0)
        sm.count = s; /* the keys grouped below: those of buckets that
                       * start below x */
    __syncthreads();
    if (LOCAL)
        for (uint32_t b = tid; b < GK_NB; b += blockDim.x)
            if (B.st[b] >= x && (b == 0 || B.st[b - 1] < x))
                sm.count = B.st[b];
    /* Grouped by bucket: only buckets that start below x (the others'
     * keys all rank x or later, and none is counted for a kept one). */
    for (uint32_t i = tid; i < s; i += blockDim.x) {
        uint32_t b = bkt(sm.key[i]);
        if (B.st[b] < x)
            B.pos[atomicAdd(&B.cur[b], 1u)] = (uint16_t)i;
    }
    __syncthreads();
#ifdef FT_GK_PROFILE
    if (g == 0 && P.nreq == 1 && threadIdx.x == 0)
        gk_sub[t * 8 + 1] = clock64();
#endif
    if (LOCAL) {
        /* Every CTA ranks every key of a bucket that starts below x (it
         * keeps all x beams): a lane a key, in bucket order, so that a
         * warp's lanes mostly count over one bucket, reading the same
         * places (broadcasts). */
        if (tid == 0) {
            sm.sp.lb.n = x;
            if (x == 0)
                sm.sp.lb.tot = 0;
        }
        uint32_t m = sm.count;
        for (uint32_t j = tid; j < m; j += blockDim.x) {
            uint32_t i = B.pos[j];
            uint64_t k = sm.key[i];
            uint32_t b = bkt(k);
            uint32_t lo = B.st[b], end = lo + B.cnt[b];
            uint32_t r = lo, c = B.isum[b];
            for (uint32_t jj = lo; jj < end; jj++) {
                uint32_t o = B.pos[jj];
                if (sm.key[o] < k) {
                    r++;
                    c += sm.sp.items[o];
                }
            }
            if (r < x)
                gk_local_beam(sm, q, t, i, r, x, c, g, G);
        }
        __syncthreads(); /* the beams, for this CTA's expansion */
#ifdef FT_GK_PROFILE
        if (g == 0 && P.nreq == 1 && threadIdx.x == 0)
            gk_sub[t * 8 + 2] = gk_sub[t * 8 + 3] = gk_sub[t * 8 + 4] =
                clock64();
#endif
        return;
    }
    /* A warp takes 32 places at a time and ranks the ones this CTA owns
     * in buckets that start below x, one after the other, all lanes over
     * the key's bucket; each owner lane then writes its beam. */
    uint32_t sr = (s + 31u) & ~31u;
    for (uint32_t p0 = warp * 32u; p0 < sr; p0 += FT_GK_BLOCK) {
        uint32_t p = p0 + lane;
        int own = p < s && B.st[bkt(sm.key[p])] < x &&
                  gk_spread_owns(sm.idx[p], g, G);
        uint32_t bal = __ballot_sync(0xffffffffu, own);
        uint32_t myr = 0, myc = 0;
        while (bal) {
            uint32_t l = (uint32_t)__ffs(bal) - 1u;
            bal &= bal - 1u;
            uint64_t k = sm.key[p0 + l];
            uint32_t b = bkt(k);
            uint32_t lo = B.st[b], end = lo + B.cnt[b];
            uint32_t r = 0, c = 0;
            for (uint32_t j = lo + lane; j < end; j += 32u) {
                uint32_t o = B.pos[j];
                if (sm.key[o] < k) {
                    r++;
                    c += sm.sp.items[o];
                }
            }
            r = __reduce_add_sync(0xffffffffu, r);
            c = __reduce_add_sync(0xffffffffu, c);
            if (lane == l) {
                myr = lo + r;
                myc = B.isum[b] + c;
            }
        }
        if (own && myr < x)
            gk_spread_beam<false>(sm, q, t, p, myr, x, myc);
    }
#ifdef FT_GK_PROFILE
    if (g == 0 && P.nreq == 1 && threadIdx.x == 0)
        gk_sub[t * 8 + 2] = gk_sub[t * 8 + 3] = gk_sub[t * 8 + 4] =
            clock64();
#endif
}

/* Profile builds: CTA 0 (pc) marks the end of step t's next list. */
__device__ __forceinline__ void gk_mark_next_end(int pc, uint32_t t)
{
#ifdef FT_GK_PROFILE
    __syncthreads();
    if (pc && threadIdx.x == 0)
        gk_sub[t * 8 + 5] = clock64();
#else
    (void)pc;
    (void)t;
#endif
}

/* Place i of a list of m read by member g of G of its selecting CTAs in
 * gk_local_narrow's passes: each member starts at its own offset (a
 * multiple of 32 places), so that the members do not all ask L2 for the
 * same lines at once (docs/BENCHMARKS.md 3l: step 1 of BW = 1000 17.7
 * -> 15.8 us; the short lists' one load, 1..4096 keys, was 0.2 us slower
 * a step that way and reads in place). */
__device__ __forceinline__ uint32_t gk_rot(uint32_t i, uint32_t off,
                                           uint32_t m)
{
    uint32_t j = i + off;
    return j >= m ? j - m : j;
}

__device__ __forceinline__ uint32_t gk_rot_off(uint32_t m, uint32_t g,
                                               uint32_t G)
{
    return G > 1 ? (uint32_t)((uint64_t)m * g / G) & ~31u : 0u;
}

/* gk_local_narrow's copy of the list's first places in shared memory:
 * the spread selection's arrays from sp.u on (the ranks or buckets, the
 * first round's, this CTA's beams) are free while it runs -- the beams
 * were expanded before the barrier and are rebuilt after it -- and
 * hold GK_LCACHE keys. */
#define GK_LCACHE                                                            \
    ((uint32_t)((sizeof(gk_spread_smem) - offsetof(gk_spread_smem, u)) /   \
                sizeof(uint64_t)))

__device__ __forceinline__ uint64_t *gk_lcache(gk_smem &sm)
{
    return reinterpret_cast<uint64_t *>(&sm.sp.u);
}

/* Places i0, i0 + blockDim.x, .. (U of them) of a list of m keys: those
 * below nc from the copy c, the others read from offset off (gk_rot); a
 * place past m reads as fill. */
template <uint32_t U>
__device__ __forceinline__ void gk_load_cached(uint64_t (&k)[U],
                                               const uint64_t *c,
                                               uint32_t nc,
                                               const uint64_t *keys,
                                               uint32_t i0, uint32_t m,
                                               uint32_t off, uint64_t fill)
{
#pragma unroll
    for (uint32_t u = 0; u < U; u++) {
        uint32_t i = i0 + u * blockDim.x;
        k[u] = i >= m   ? fill
               : i < nc ? c[i]
                        : __ldcg(keys + gk_rot(i, off, m));
    }
}

/* A medium next list (gk_list_medium), m keys, narrowed by this CTA alone,
 * with no grid barrier: every CTA that selects it reads the whole list
 * through L2 -- its least and greatest key, then the grid selection's
 * 8-bit radix passes into a shared histogram (gk_gdecide; every CTA
 * computes the same digits from the same keys), then the survivors (at
 * most max(lim, cap) keys: those on or below the prefix) appended to
 * sm.key / sm.idx, and their expansion items at step t + 1 to
 * sm.sp.items, as a short list's are loaded.  mn / mx: this
 * thread's bounds of what it appended.  Returns the survivors.  The
 * first digit's bounds come from this CTA's own beams (gk_key_bounds),
 * not from the slot's as in the grid selection: with no barrier after
 * it, another CTA may already be writing the next step's beams.  The
 * whole CTA calls it. */
template <bool FUSE>
__device__ uint32_t gk_local_narrow(const ft_gk_params &P, gk_smem &sm,
                                    ft_gk_req *q, uint32_t t,
                                    const uint64_t *keys, uint32_t m,
                                    uint32_t lim, uint32_t off, uint64_t &mn,
                                    uint64_t &mx)
{
    uint32_t tid = threadIdx.x;
    const uint32_t U = FT_GK_LOAD_U;
    if (tid == 0)
        sm.count = 0;
    /* The first read (the bounds) keeps the first GK_LCACHE places in
     * shared memory for the passes and the survivors: one read of the
     * list through L2 instead of three or four (128 CTAs read the same
     * lines at once, ~23 GB/s each). */
    uint64_t *lc = gk_lcache(sm);
    const uint32_t nc = P.local_cache < GK_LCACHE ? P.local_cache : GK_LCACHE;
    /* The race's first digit comes from bounds every key of the list lies
     * within, so that the first read also counts it (one pass over the
     * copy fewer): step t's beams are this CTA's (gk_local_beams, in rank
     * order, their sigma in sm.key, both untouched since they were
     * expanded and read here before the copy overwrites sp). */
    {
        float smax = 0.0f, smin = 0.0f;
        if (t > 0) {
            const gk_local_beams &lb = sm.sp.lb;
            uint32_t nb = lb.n;
            smax = ft_cand_sigma(sm.key[lb.p[0]]);
            smin = ft_cand_sigma(sm.key[lb.p[nb > 0 ? nb - 1 : 0]]);
        }
        uint64_t lo, hi;
        gk_key_bounds(q, t, smax, smin, lo, hi);
        for (uint32_t b = tid; b < 256; b += blockDim.x)
            sm.hist[b] = 0;
        if (tid == 0)
            gk_gstate_init(sm.loc, lo, hi, m, lim,
                           P.gsel_cap ? P.gsel_cap : gk_pow2(lim), 0);
        __syncthreads();
    }
    {
        uint64_t prefix = sm.loc.prefix, pmask = sm.loc.pmask;
        uint32_t sh = sm.loc.sh;
        int out = 0;
        for (uint32_t i0 = tid; i0 < m; i0 += U * blockDim.x) {
            uint64_t k[U];
            gk_load_cached<U>(k, lc, 0u, keys, i0, m, off, 0ull);
#pragma unroll
            for (uint32_t u = 0; u < U; u++) {
                uint32_t i = i0 + u * blockDim.x;
                if (i < m) {
                    if (i < nc)
                        lc[i] = k[u];
                    if ((k[u] & pmask) == prefix)
                        atomicAdd(&sm.hist[(uint32_t)(k[u] >> sh) & 255u],
                                  1u);
                    else
                        out = 1;
                }
            }
        }
        if (out)
            atomicOr(&q->steps[0].err, 2u); /* cannot happen */
        __syncthreads();
        if (!sm.loc.done && tid < 32)
            gk_gdecide<false>(sm.loc, sm.hist, q, sm.wscan[0]);
        __syncthreads();
    }
#ifdef FT_GK_PROFILE
    const int pc = blockIdx.x == 0 && P.nreq == 1 && threadIdx.x == 0;
    uint32_t npass = 1;
    if (pc)
        GK_NSUB(t, 0) = clock64();
#endif
    gk_narrow_passes(
        sm, q, 1u,
        [&](uint64_t prefix, uint64_t pmask, uint32_t sh) {
#ifdef FT_GK_PROFILE
            npass++;
#endif
            /* (one shared atomic a key: with a warp's equal digits
             * aggregated by __match_any_sync, as gk_hist_slice does over
             * L2, together with a wider first read and the survivors'
             * items gathered after their pass, BW = 100's narrowing took
             * 9.0 us against 7.0, docs/BENCHMARKS.md 3n) */
            for (uint32_t i0 = tid; i0 < m; i0 += U * blockDim.x) {
                uint64_t k[U];
                gk_load_cached<U>(k, lc, nc, keys, i0, m, off, 0ull);
#pragma unroll
                for (uint32_t u = 0; u < U; u++)
                    if (i0 + u * blockDim.x < m && (k[u] & pmask) == prefix)
                        atomicAdd(&sm.hist[(uint32_t)(k[u] >> sh) & 255u],
                                  1u);
            }
        });
    if (!sm.loc.done && tid == 0)
        atomicOr(&q->steps[0].err, 2u); /* cannot happen */
#ifdef FT_GK_PROFILE
    if (pc) {
        GK_NSUB(t, 1) = clock64();
        GK_NSUB(t, 3) = npass;
    }
#endif
    uint64_t prefix = sm.loc.prefix, pmask = sm.loc.pmask;
    const ft_gk_lists L = gk_lists<FUSE>(P, q, t);
    uint32_t mr = (m + 31u) & ~31u;
    mn = ~0ull;
    mx = 0;
    for (uint32_t i0 = tid; i0 < mr; i0 += U * blockDim.x) {
        uint64_t k[U];
        gk_load_cached<U>(k, lc, nc, keys, i0, m, off, ~0ull);
#pragma unroll
        for (uint32_t u = 0; u < U; u++) {
            uint32_t i = i0 + u * blockDim.x;
            if (i >= mr) /* uniform per warp: mr % 32 == 0 */
                break;
            int want = i < m && (k[u] & pmask) <= prefix;
            uint32_t pos = gk_append(&sm.count, want);
            if (!want)
                continue;
            if (pos >= FT_GK_SORT_MAX) {
                atomicOr(&q->steps[0].err, 2u); /* cannot happen */
                continue;
            }
            uint32_t c = gk_rot(i, off, m);
            sm.key[pos] = k[u];
            sm.idx[pos] = c;
            mn = k[u] < mn ? k[u] : mn;
            mx = k[u] > mx ? k[u] : mx;
            sm.sp.items[pos] =
                ft_gk_items(t + 1, L.cand_cr[c].deg, L.cand_kcut[c]);
        }
    }
    __syncthreads();
#ifdef FT_GK_PROFILE
    if (pc)
        GK_NSUB(t, 2) = clock64();
#endif
    uint32_t s = sm.count;
    return s < FT_GK_SORT_MAX ? s : FT_GK_SORT_MAX;
}

/* Member g of G of the CTAs that select request q's list (0: next, 1:
 * terminal) at step t.  FUSE: a fused launch's lists (gk_lists), and a
 * next list selected whole by every member for its own expansion
 * (gk_spread_next<true>). */
template <bool FUSE>
__device__ void gk_spread_list(const ft_gk_params &P, gk_smem &sm,
                               ft_gk_req *q, uint32_t t, uint32_t term,
                               uint32_t g, uint32_t G)
{
    const ft_gk_slot &S = q->slot;
    uint32_t tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
    uint32_t lim = term ? q->n : q->B;
#ifdef FT_GK_PROFILE
    uint64_t c0 = clock64();
    int pc = g == 0 && P.nreq == 1;
    if (pc && !term && threadIdx.x == 0)
        gk_sub[t * 8 + 0] = c0;
#endif
    /* The source: the list, or a long list's survivors (P.spread: a
     * short list is within FT_GK_LIST_MAX). */
    gk_src src = gk_list_src<FUSE>(P, sm, q, t, term, lim);
    const uint64_t *keys = src.keys;
    const uint32_t *si = src.si;
    uint64_t mn = ~0ull, mx = 0;
    uint32_t ns = src.n < FT_GK_SORT_MAX ? src.n : FT_GK_SORT_MAX;
    if (FUSE && src.medium)
        ns = gk_local_narrow<FUSE>(P, sm, q, t, keys, src.n, lim,
                                   gk_rot_off(src.n, g, G), mn, mx);
    /* Terminal list: the running results' score keys go to shared memory
     * too when they fit, their loads beside the list's. */
    const ft_gk_hit *prev = (const ft_gk_hit *)S.run[(t & 1u) ^ 1u];
    uint32_t nprev = term && t ? q->steps[t - 1].n_run : 0;
    int staged = nprev <= FT_GK_SORT_MAX / 2;
    if (term && staged)
        for (uint32_t i = tid; i < nprev; i += blockDim.x)
            sm.sp.pk[i] = prev[i].skey;
    /* A next list's survivors carry their expansion items at step t + 1
     * (the child range came from the expansion or the grid selection),
     * gathered beside the keys. */
    int bk = !term && (FUSE || (FT_GK_BUCKETS && ns > FT_GK_BUCKET_MIN));
    if (bk) /* the bucket counts start at 0 */
        for (uint32_t b = tid; b < GK_NB; b += blockDim.x) {
            sm.sp.u.b.cnt[b] = 0;
            sm.sp.u.b.isum[b] = 0;
        }
    /* FT_GK_LOAD_U entries a thread in flight at once (L2 round trips,
     * not bandwidth, bound this). */
    const uint32_t U = FT_GK_LOAD_U;
    for (uint32_t i0 = tid; !(FUSE && src.medium) && i0 < ns;
         i0 += U * blockDim.x) {
        uint32_t c[U], kc[U];
        uint64_t k[U], deg[U];
#pragma unroll
        for (uint32_t u = 0; u < U; u++) {
            uint32_t i = i0 + u * blockDim.x;
            c[u] = i < ns ? (si ? si[i] : i) : 0u;
            k[u] = i < ns ? keys[i] : 0ull;
        }
        if (!term) {
            const ft_gk_lists L = gk_lists<FUSE>(P, q, t);
#pragma unroll
            for (uint32_t u = 0; u < U; u++) {
                uint32_t i = i0 + u * blockDim.x;
                deg[u] = i < ns ? L.cand_cr[c[u]].deg : 0ull;
                kc[u] = i < ns ? L.cand_kcut[c[u]] : 0u;
            }
        }
#pragma unroll
        for (uint32_t u = 0; u < U; u++) {
            uint32_t i = i0 + u * blockDim.x;
            if (i >= ns)
                break;
            sm.key[i] = k[u];
            sm.idx[i] = c[u];
            mn = k[u] < mn ? k[u] : mn;
            mx = k[u] > mx ? k[u] : mx;
            if (!term)
                sm.sp.items[i] = ft_gk_items(t + 1, deg[u], kc[u]);
        }
    }
    if (bk) {
        gk_warp_minmax(mn, mx);
        if (lane == 0) {
            sm.sp.u.b.wmin[warp] = mn;
            sm.sp.u.b.wmax[warp] = mx;
        }
    }
    __syncthreads();
    if (bk) {
        gk_spread_next<FUSE>(P, sm, q, t, ns, ns < lim ? ns : lim, g, G);
        gk_mark_next_end(g == 0 && P.nreq == 1, t);
        return;
    }
    uint32_t s = term ? gk_smem_narrow<false>(sm, ns, lim)
                      : gk_smem_narrow<true>(sm, ns, lim);
    uint32_t x = s < lim ? s : lim;
    if (!term) {
#ifdef FT_GK_PROFILE
        if (pc && threadIdx.x == 0)
            gk_sub[t * 8 + 1] = clock64();
#endif
        uint32_t no = gk_spread_rank(sm, s, g, G, 1);
#ifdef FT_GK_PROFILE
        if (pc && threadIdx.x == 0)
            gk_sub[t * 8 + 2] = gk_sub[t * 8 + 3] = gk_sub[t * 8 + 4] =
                clock64();
#endif
        for (uint32_t o = tid; o < no; o += blockDim.x) {
            uint32_t r = sm.sp.u.r.orank[o];
            if (r < x)
                gk_spread_beam<false>(sm, q, t, sm.sp.u.r.own[o], r, x,
                                      sm.sp.u.r.ocs[o]);
        }
        gk_mark_next_end(g == 0 && P.nreq == 1, t);
        return;
    }
    /* Terminal list. */
    ft_gk_hit *dst = (ft_gk_hit *)S.run[t & 1u];
    uint32_t nrun = nprev + x < q->n ? nprev + x : q->n;
    double F = q->F[t + 1];
    int last = t + 1 == q->T;
    const uint64_t *pk = sm.sp.pk;
    uint32_t no = gk_spread_rank(sm, s, g, G, 0);
    for (uint32_t o = tid; o < no; o += blockDim.x) {
        uint32_t r = sm.sp.u.r.orank[o];
        if (r >= x)
            continue;
        uint32_t p = sm.sp.u.r.own[o];
        uint64_t key = sm.key[p];
        double score = ft_score(ft_cand_sigma(key), F);
        uint32_t pos = r + gk_prev_le(staged ? pk : NULL, prev, nprev,
                                      ft_score_key(score));
        if (pos >= q->n)
            continue;
        ft_gk_hit h = gk_new_hit(
            key, gk_lists<FUSE>(P, q, t).term_node[sm.idx[p]], score, t);
        dst[pos] = h;
        if (last)
            gk_write_result(P, q, pos, h);
    }
    __syncthreads();
    /* The survivors' score keys, for this CTA's share of the running
     * results: i lands at i + min(x, survivors with a smaller one). */
    for (uint32_t j = tid; j < s; j += blockDim.x)
        sm.key[j] = ft_score_key(ft_score(ft_cand_sigma(sm.key[j]), F));
    __syncthreads();
    uint32_t pa = (uint32_t)((uint64_t)nprev * g / G);
    uint32_t pb = (uint32_t)((uint64_t)nprev * (g + 1) / G);
    for (uint32_t i = pa + warp; i < pb; i += FT_GK_WARPS) {
        uint64_t k = staged ? pk[i] : prev[i].skey;
        uint32_t c = 0;
        for (uint32_t j = lane; j < s; j += 32u)
            c += (uint32_t)(sm.key[j] < k);
        c = __reduce_add_sync(0xffffffffu, c);
        if (lane == 0)
            sm.sp.u.r.ocs[i - pa] = c < x ? c : x;
    }
    __syncthreads();
    for (uint32_t i = pa + tid; i < pb; i += blockDim.x) {
        uint32_t pos = i + sm.sp.u.r.ocs[i - pa];
        if (pos >= q->n)
            continue;
        ft_gk_hit h = prev[i];
        dst[pos] = h;
        if (last)
            gk_write_result(P, q, pos, h);
    }
    if (g == 0 && tid == 0) {
        q->steps[t].n_run = nrun;
        if (last) {
            q->out->n = nrun;
            q->out->err = q->steps[0].err;
        }
    }
#ifdef FT_GK_PROFILE
    if (pc && threadIdx.x == 0) {
        gk_sub[t * 8 + 6] = clock64() - c0;
        gk_sub[t * 8 + 7] = 0;
    }
#endif
}

/* Selection of step t with the lists spread over the grid (P.spread). */
__device__ void gk_select_spread(const ft_gk_params &P, gk_smem &sm,
                                 uint32_t t)
{
    uint32_t nl = 0;
    for (uint32_t i = 0; i < P.nreq; i++) {
        uint32_t T = gk_req<false>(P, &sm, i)->T;
        nl += (t < T) + (t + 1 < T);
    }
    if (nl == 0)
        return;
    /* Units: at least one per list, list u % nl, member u / nl. */
    uint32_t W = gridDim.x > nl ? gridDim.x : nl;
    for (uint32_t u = blockIdx.x; u < W; u += gridDim.x) {
        uint32_t L = u % nl, g = u / nl, G = (W - L + nl - 1) / nl;
        for (uint32_t i = 0; i < P.nreq; i++) {
            ft_gk_req *q = gk_req<false>(P, &sm, i);
            uint32_t c = (t < q->T) + (t + 1 < q->T);
            if (L < c) {
                /* the next list first, then the terminal one */
                uint32_t term = c == 1 || L == 1;
                gk_spread_list<false>(P, sm, q, t, term, g, G);
                break;
            }
            L -= c;
        }
        __syncthreads();
    }
}

/* ---- the kernel ------------------------------------------------------- */

#ifdef FT_GK_PROFILE
#define GK_MARK(i)                                                            \
    do {                                                                      \
        if (P.prof && blockIdx.x == 0 && threadIdx.x == 0)                    \
            P.prof[i] = clock64();                                            \
    } while (0)
#else
#define GK_MARK(i) ((void)0)
#endif

/* Profile builds: the latest (or with MIN, the earliest) %globaltimer of
 * every CTA at word w of the launch marks (FT_GK_PROF_GT).  A function,
 * not a do-while macro: after the fused instance's return the loop was
 * "not reachable" (nvcc #128-D). */
#ifdef FT_GK_PROFILE
__device__ __forceinline__ void gk_gt(const ft_gk_params &P, uint32_t w,
                                      bool min)
{
    if (P.prof && threadIdx.x == 0) {
        unsigned long long gt;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(gt));
        unsigned long long *a =
            (unsigned long long *)&P.prof[FT_GK_PROF_GT + w];
        if (min)
            atomicMin(a, gt);
        else
            atomicMax(a, gt);
    }
}
#define GK_GT(w, MIN) gk_gt(P, (w), (MIN))
#else
#define GK_GT(w, MIN) ((void)0)
#endif

/* Request 0's list lengths of step t (profile builds). */
__device__ __forceinline__ void gk_prof_len(const ft_gk_params &P, uint32_t t)
{
#ifdef FT_GK_PROFILE
    if (P.prof && blockIdx.x == 0 && threadIdx.x == 0 && t < P.reqs[0].T) {
        P.prof[FT_GK_PROF_LEN + 2 * t] = P.reqs[0].steps[t].n_next;
        P.prof[FT_GK_PROF_LEN + 2 * t + 1] = P.reqs[0].steps[t].n_term;
    }
#else
    (void)P;
    (void)t;
#endif
}

/* The grid barrier after step t's expansion (and its second round, if
 * its first was not enough: R1, the instances that spread), then the grid
 * selection of its long lists (the step's profile marks 2 and 3). */
template <bool FUSE, bool R1>
__device__ __forceinline__ void gk_after_expand(const ft_gk_params &P,
                                                gk_smem &sm,
                                                cg::grid_group &grid,
                                                uint32_t t)
{
    grid.sync();
    if (FUSE)
        GK_CHC(t, 0);
    if (R1)
        gk_r1_check<FUSE>(P, sm, grid, t,
                          FUSE ? gridDim.x - P.fuse_term : gridDim.x);
    else
        gk_r1_check_lazy(P, sm, grid, t);
    GK_MARK(2 + 4 * t);
    gk_prof_len(P, t);
    gk_grid_select<FUSE>(P, sm, grid, t);
    GK_MARK(3 + 4 * t);
#ifdef FT_GK_PROFILE
    if (blockIdx.x == 0 && threadIdx.x == 0)
        gk_sub_t = t;
#endif
}

/* The steps of a fused launch (P.fuse: one request, spread): one grid
 * barrier a step.  After step t's expansion and its grid selection, CTAs
 * 0 .. ne - 1 each select the whole next list (every one the same beams,
 * in its own shared memory) and expand step t + 1 from them, no barrier
 * and no global beam table between, while the last fuse_term CTAs merge
 * step t's terminal list into the running results.  Step t's lists sit
 * in the slot or in P.alt by t's parity (gk_lists), so that step t + 1's
 * appends never meet a CTA still reading step t's. */
__device__ __forceinline__ void gk_fused(const ft_gk_params &P,
                                         gk_smem &sm, cg::grid_group &grid)
{
    ft_gk_req *q = &sm.rq[0];
    uint32_t T = q->T;
    uint32_t ne = gridDim.x - P.fuse_term;
    GK_MARK(0);
    gk_expand<true>(P, 0, gridDim.x, &sm);
    gk_build_hash(P, NULL);
    GK_MARK(1);
    GK_CHS(0, 2);
    for (uint32_t t = 0; t < T; t++) {
        gk_after_expand<true, true>(P, sm, grid, t);
        if (t + 1 == T) {
            /* the last terminal list, by the whole grid */
            gk_spread_list<true>(P, sm, q, t, 1, blockIdx.x, gridDim.x);
            GK_MARK(4 + 4 * t);
            GK_CHS(t, 1);
        } else if (blockIdx.x < ne) {
            /* Step t + 1's terminal cut (gk_expand_r): the worst of step
             * t - 1's results, final since this step's barrier; loaded
             * now, with the entry read whether or not it is used, so
             * that its round trip overlaps the selection instead of
             * preceding the expansion. */
            uint32_t tc_run = 0;
            uint64_t tc_key = ~0ull;
            if (FT_GK_TERM_CUT && t >= 1 && threadIdx.x == 0) {
                tc_run = __ldcg(&q->steps[t - 1].n_run);
                tc_key = __ldcg(&((const ft_gk_hit *)
                                      q->slot.run[(t - 1) & 1u])[q->n - 1]
                                     .skey);
            }
            gk_spread_list<true>(P, sm, q, t, 0, blockIdx.x, ne);
            GK_MARK(4 + 4 * t);
            GK_CHS(t, 1);
            if (threadIdx.x == 0)
                sm.tcut = tc_run >= q->n ? tc_key : ~0ull;
            __syncthreads();
            GK_CHC(t + 1, 3);
            uint32_t round = 0;
            if (P.r1) {
                gk_r1_setup<true>(P, sm, q, t + 1);
                round = sm.sp.u.r1.on;
            }
            GK_CHC(t + 1, 4);
            gk_expand<true>(P, t + 1, ne, &sm, round);
            GK_MARK(1 + 4 * (t + 1));
            GK_CHS(t + 1, 2);
        } else {
            gk_spread_list<true>(P, sm, q, t, 1, blockIdx.x - ne,
                                 gridDim.x - ne);
            GK_CHS(t, 1);
        }
    }
}

/* The launch's completion word (ft_gk_params.done): every CTA, once its
 * writes are done, counts itself out (thread 0, after the block barrier
 * and a system-scope fence, the pattern of the grid barrier itself);
 * the last one, fenced after every other's count, sets the word.  The
 * counter wraps to 0 at the last count (atomicInc), ready for the next
 * launch. */
__device__ __forceinline__ void gk_done(const ft_gk_params &P)
{
    if (P.done == NULL)
        return;
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence_system();
        if (atomicInc(P.done_ctr, gridDim.x - 1u) == gridDim.x - 1u) {
            __threadfence_system();
            *(volatile uint32_t *)P.done = P.done_seq;
        }
    }
}

/* Three instances: SPREAD for launches of 1..3 requests (P.spread, the
 * selection spread over the grid), SPREAD and FUSE for those of one
 * request (P.fuse, gk_fused), the other for lazy launches and for
 * launches with the spread selection off.  Each gets its own register
 * allocation: the spread selection's code does not weigh on the batch
 * kernel's expansion, nor the one-CTA selection on the latency kernel. */
template <bool SPREAD, bool FUSE>
__global__ void __launch_bounds__(FT_GK_BLOCK, FT_GK_MINB)
    ft_gk_search(const ft_gk_params P)
{
    extern __shared__ __align__(16) unsigned char gk_raw[];
    gk_smem &sm = *reinterpret_cast<gk_smem *>(gk_raw);
    cg::grid_group grid = cg::this_grid();
    if (P.in_src) {
        /* The input region from mapped host memory: one PCIe round trip
         * spread over the grid and one barrier instead of a copy that the
         * launch waits for (and its API call). */
        const uint4 *src = (const uint4 *)P.in_src;
        uint4 *dst = (uint4 *)P.reqs;
        uint32_t n = P.in_n16, stride = gridDim.x * blockDim.x;
        for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
             i += stride)
            dst[i] = __ldcv(src + i); /* never a stale line */
        grid.sync();
    }
    if (SPREAD) {
        /* The descriptors into shared memory (gk_smem.rq), read from L2
         * (the grid barrier after the input's copy lies before). */
        uint32_t nq = P.nreq < GK_RQ_MAX ? P.nreq : GK_RQ_MAX;
        const uint2 *src = reinterpret_cast<const uint2 *>(P.reqs);
        uint2 *dst = reinterpret_cast<uint2 *>(sm.rq);
        for (uint32_t i = threadIdx.x; i < nq * (sizeof(ft_gk_req) / 8);
             i += blockDim.x)
            dst[i] = __ldcg(src + i);
        __syncthreads();
    }
    if (FUSE) {
        gk_fused(P, sm, grid);
        gk_done(P);
        return;
    }
    GK_GT(0, 1);
    GK_GT(1, 0);
    uint32_t tmax = 0;
    for (uint32_t i = 0; i < P.nreq; i++)
        tmax = P.reqs[i].T > tmax ? P.reqs[i].T : tmax;
    GK_MARK(0);
    if (blockIdx.x == 0)
        GK_GT(4, 0);
    for (uint32_t t = 0; t < tmax; t++) {
        /* (a launch of one request: the step's first round, maybe) */
        uint32_t round = 0;
        if (SPREAD && P.r1 && P.nreq == 1 && t > 0 && t < sm.rq[0].T) {
            gk_r1_setup<false>(P, sm, &sm.rq[0], t);
            round = sm.sp.u.r1.on;
        }
        gk_expand<false, !SPREAD>(P, t, gridDim.x, &sm, round);
        if (t == 0) {
            GK_GT(2, 0);
            gk_build_hash(P, P.lazy ? &sm : NULL);
            GK_GT(3, 0);
        }
        GK_MARK(1 + 4 * t);
        gk_after_expand<false, SPREAD>(P, sm, grid, t);
        /* Selection: every list over many CTAs (few requests), or one
         * CTA a list (items (request, list) spread over the CTAs). */
        if (SPREAD) {
            gk_select_spread(P, sm, t);
        } else {
            for (uint32_t it = blockIdx.x; it < 2 * P.nreq;
                 it += gridDim.x) {
                ft_gk_req *q = &P.reqs[it >> 1];
                if (t >= q->T)
                    continue;
                if (it & 1u)
                    gk_select_term(P, sm, q, t);
                else if (t + 1 < q->T)
                    gk_select_next(P, sm, q, t);
                __syncthreads();
            }
        }
        GK_MARK(4 + 4 * t);
        if (t + 1 < tmax)
            grid.sync();
    }
    GK_GT(5, 0);
    gk_done(P);
}

/* ---- the step kernel (shard groups) ------------------------------------
 *
 * One launch per decode step, built from the same device functions as the
 * all-T kernel.  Keep (of step t - 1, before the expansion of step t: the
 * exchange of step t - 1 has landed in recv by then) -- grid.sync --
 * expansion -- grid.sync -- selection, where the next list's local best B
 * go to send (sorted, padded) instead of becoming beams. */

/* Writes request q's local best B next keys of step t to send (sorted,
 * padded with FT_KEY_NONE) and their candidate indexes to sel_idx.  An
 * empty, all-padding list when the request has no step t + 1. */
__device__ void gk_select_local(const ft_gk_params &P, gk_smem &sm,
                                const ft_gk_xparams &X, ft_gk_req *q,
                                uint32_t t)
{
    const ft_gk_slot &S = q->slot;
    uint64_t *out = X.send + q->xoff;
    uint32_t x = 0;
    if (t + 1 < q->T) {
        x = gk_select_list(P, sm, q, t, 0, q->B);
        for (uint32_t j = threadIdx.x; j < x; j += blockDim.x) {
            out[j] = sm.key[j];
            S.sel_idx[j] = sm.idx[j];
        }
        if (threadIdx.x == 0)
            q->steps[t].n_sel = x;
    }
    for (uint32_t j = x + threadIdx.x; j < q->B; j += blockDim.x)
        out[j] = FT_KEY_NONE;
}

/* Keys of the sorted list a[0, n) below key. */
__device__ __forceinline__ uint32_t gk_lower_bound(const uint64_t *a,
                                                   uint32_t n, uint64_t key)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) >> 1;
        if (a[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Keeps request q's members of step t's global best B: local entry j has
 * global rank j + (keys of the other shards' lists below it), and is kept
 * iff that is below B.  The local list is sorted, so the kept entries are
 * a prefix; they become the beams of step t + 1 with their global ranks. */
__device__ void gk_keep(const ft_gk_params &P, gk_smem &sm,
                        const ft_gk_xparams &X, ft_gk_req *q, uint32_t t)
{
    if (t + 1 >= q->T)
        return;
    const ft_gk_slot &S = q->slot;
    uint32_t B = q->B;
    uint32_t x = q->steps[t].n_sel;
    /* The own list, as the exchange delivered it (recv holds every
     * shard's, this one's too; send may already be another buffer). */
    const uint64_t *mine = X.recv + (uint64_t)X.shard * X.len + q->xoff;
    if (threadIdx.x == 0)
        sm.count = x;
    __syncthreads();
    for (uint32_t j = threadIdx.x; j < x; j += blockDim.x) {
        uint64_t key = mine[j];
        uint32_t g = j;
        for (uint32_t s = 0; s < X.nshards && g < B; s++)
            if (s != X.shard)
                g += gk_lower_bound(X.recv + (uint64_t)s * X.len + q->xoff,
                                    B, key);
        sm.key[j] = key;
        sm.idx[j] = S.sel_idx[j];
        if (g < B)
            S.beam_rank[j] = g;
        else
            atomicMin(&sm.count, j);
    }
    __syncthreads();
    uint32_t kept = sm.count;
    __syncthreads();
    gk_build_beams(P, sm, q, t, kept, S.beam_rank);
}

__global__ void __launch_bounds__(FT_GK_BLOCK, FT_GK_MINB)
    ft_gk_step_kernel(const ft_gk_params P, const ft_gk_xparams X)
{
    extern __shared__ __align__(16) unsigned char gk_raw[];
    gk_smem &sm = *reinterpret_cast<gk_smem *>(gk_raw);
    cg::grid_group grid = cg::this_grid();
    uint32_t t = X.t;
    if (X.keep) {
        for (uint32_t i = blockIdx.x; i < P.nreq; i += gridDim.x) {
            gk_keep(P, sm, X, &P.reqs[i], t - 1);
            __syncthreads();
        }
        grid.sync();
    }
    gk_expand<false, true>(P, t, gridDim.x, &sm);
    if (t == 0)
        gk_build_hash(P, P.lazy ? &sm : NULL);
    grid.sync();
    gk_grid_select<false>(P, sm, grid, t);
    for (uint32_t it = blockIdx.x; it < 2 * P.nreq; it += gridDim.x) {
        ft_gk_req *q = &P.reqs[it >> 1];
        if (it & 1u) {
            if (t < q->T)
                gk_select_term(P, sm, q, t);
        } else {
            gk_select_local(P, sm, X, q, t);
        }
        __syncthreads();
    }
}

/* Occupancy x SMs for kernel fn with the selection's shared memory. */
static int gk_config_of(const void *fn, int *grid, int *block, size_t *smem)
{
    int dev, sms = 0, per = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    size_t bytes = sizeof(gk_smem);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(fn,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)bytes);
    if (e == cudaSuccess)
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, fn,
                                                          FT_GK_BLOCK, bytes);
    if (e != cudaSuccess)
        return (int)e;
    if (per < 1)
        return (int)cudaErrorInvalidConfiguration;
    *grid = per * sms;
    *block = FT_GK_BLOCK;
    *smem = bytes;
    return 0;
}

extern "C" int ft_gk_step_config(int *grid, int *block, size_t *smem)
{
    return gk_config_of((const void *)ft_gk_step_kernel, grid, block, smem);
}

extern "C" int ft_gk_step_launch(const ft_gk_params *p,
                                 const ft_gk_xparams *x, int grid, int block,
                                 size_t smem, void *stream)
{
    ft_gk_params cp = *p;
    ft_gk_xparams cx = *x;
    void *args[] = {&cp, &cx};
    return (int)cudaLaunchCooperativeKernel((const void *)ft_gk_step_kernel,
                                            dim3(grid), dim3(block), args,
                                            gk_launch_smem(smem, 0),
                                            (cudaStream_t)stream);
}

/* ---- the child table --------------------------------------------------- */

__global__ void gk_ctab_fill(const ft_trie_view V, uint64_t *T)
{
    uint64_t n = V.n_nodes;
    for (uint64_t u = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; u <= n;
         u += (uint64_t)gridDim.x * blockDim.x) {
        /* Past the last node: its children end at n (the high labels
         * before n likewise), which closes the last node's range. */
        uint64_t first = u < n ? ft_children(&V, u).first : n;
        T[2 * u] = first;
        T[2 * u + 1] = ft_rank1(V.high, V.high_rank, first);
    }
}

__global__ void gk_ctab_check(const ft_trie_view V, const uint64_t *T,
                              unsigned long long *bad)
{
    uint64_t n = V.n_nodes;
    unsigned long long mine = 0;
    for (uint64_t u = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; u < n;
         u += (uint64_t)gridDim.x * blockDim.x) {
        ft_child_range a = ft_children(&V, u), b = gk_ctab_range(T, u);
        mine += a.first != b.first || a.deg != b.deg ||
                a.hstart != b.hstart || a.hbase != b.hbase;
    }
    if (mine)
        atomicAdd(bad, mine);
}

__device__ __forceinline__ ft_child_range gk_range_of(const ft_trie_view &V,
                                                    const uint64_t *T,
                                                    uint64_t u)
{
    return T ? gk_ctab_range(T, u) : ft_children(&V, u);
}

__global__ void gk_cmap_count_k(const ft_trie_view V, const uint64_t *T,
                                uint32_t min_deg, unsigned long long *out)
{
    uint64_t n = V.n_nodes;
    unsigned long long mine = 0;
    for (uint64_t u = 1 + blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
         u < n; u += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t d = gk_range_of(V, T, u).deg;
        mine += d >= min_deg ? d : 0;
    }
    if (mine)
        atomicAdd(out, mine);
}

/* check = 0: insert every child of the nodes in the map (a warp a node);
 * check = 1: look each up again and count those not found where they
 * belong, and (when filling) keys met twice: labels of one node repeat
 * only in a damaged trie. */
__global__ void gk_cmap_fill_k(const ft_trie_view V, const uint64_t *T,
                               uint64_t *M, uint64_t mask, uint32_t min_deg,
                               int check, unsigned long long *bad)
{
    uint64_t n = V.n_nodes;
    uint32_t lane = threadIdx.x & 31u;
    uint64_t nw = (uint64_t)gridDim.x * (blockDim.x >> 5);
    unsigned long long mine = 0;
    for (uint64_t u = 1 + (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / 32;
         u < n; u += nw) {
        ft_child_range cr = gk_range_of(V, T, u);
        if (cr.deg < min_deg)
            continue;
        for (uint64_t j = lane; j < cr.deg; j += 32) {
            uint32_t label = ft_child_label(&V, &cr, cr.first + j);
            uint64_t key = (cr.first << 32) | label;
            if (check) {
                mine += gk_cmap_find(M, mask, cr, label) != cr.first + j;
                continue;
            }
            uint64_t h = gk_cmap_hash(key) & mask;
            for (;;) {
                unsigned long long old = atomicCAS(
                    (unsigned long long *)&M[2 * h], ~0ull,
                    (unsigned long long)key);
                if (old == ~0ull) {
                    M[2 * h + 1] = j;
                    break;
                }
                if (old == key) {
                    mine++;
                    break;
                }
                h = (h + 1) & mask;
            }
        }
    }
    if (mine)
        atomicAdd(bad, mine);
}

/* gk_counted runs enqueue(counter) on stream with a zeroed device
 * counter and stores the counter's final value in *out.  Synchronous. */
template <typename F>
static int gk_counted(unsigned long long *out, cudaStream_t st, F enqueue)
{
    unsigned long long *d = NULL;
    cudaError_t e = cudaMalloc((void **)&d, sizeof *d);
    if (e == cudaSuccess)
        e = cudaMemsetAsync(d, 0, sizeof *d, st);
    if (e == cudaSuccess)
        e = enqueue(d);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(out, d, sizeof *d, cudaMemcpyDeviceToHost, st);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(st);
    if (d)
        cudaFree(d);
    return (int)e;
}

extern "C" int ft_gk_cmap_count(const ft_trie_view *view,
                                const uint64_t *ctab, uint32_t min_deg,
                                unsigned long long *entries, void *stream)
{
    cudaStream_t st = (cudaStream_t)stream;
    return gk_counted(entries, st, [&](unsigned long long *d) {
        gk_cmap_count_k<<<4096, 256, 0, st>>>(*view, ctab, min_deg, d);
        return cudaGetLastError();
    });
}

extern "C" int ft_gk_cmap_build(const ft_trie_view *view,
                                const uint64_t *ctab, uint64_t *cmap,
                                uint64_t mask, uint32_t min_deg,
                                unsigned long long *bad, void *stream)
{
    cudaStream_t st = (cudaStream_t)stream;
    return gk_counted(bad, st, [&](unsigned long long *d) {
        cudaError_t e = cudaSuccess;
        for (int check = 0; check < 2 && e == cudaSuccess; check++) {
            gk_cmap_fill_k<<<4096, 256, 0, st>>>(*view, ctab, cmap, mask,
                                                 min_deg, check, d);
            e = cudaGetLastError();
        }
        return e;
    });
}

extern "C" int ft_gk_ctab_build(const ft_trie_view *view, uint64_t *ctab,
                                unsigned long long *bad, void *stream)
{
    cudaStream_t st = (cudaStream_t)stream;
    return gk_counted(bad, st, [&](unsigned long long *d) {
        gk_ctab_fill<<<4096, 256, 0, st>>>(*view, ctab);
        cudaError_t e = cudaGetLastError();
        if (e == cudaSuccess) {
            gk_ctab_check<<<4096, 256, 0, st>>>(*view, ctab, d);
            e = cudaGetLastError();
        }
        return e;
    });
}

#ifdef FT_GK_PROFILE
extern "C" int ft_gk_prof_sub(uint64_t *out, size_t n)
{
    if (n > FT_GK_MAX_T * 12)
        n = FT_GK_MAX_T * 12;
    return (int)cudaMemcpyFromSymbol(out, gk_sub, n * sizeof *out);
}
#endif

extern "C" int ft_gk_config(int *grid, int *block, size_t *smem)
{
    const void *fns[] = {(const void *)ft_gk_search<false, false>,
                         (const void *)ft_gk_search<true, false>,
                         (const void *)ft_gk_search<true, true>};
    int e = gk_config_of(fns[0], grid, block, smem);
    for (int i = 1; e == 0 && i < 3; i++) {
        int g2 = 0, b2 = 0;
        size_t s2 = 0;
        e = gk_config_of(fns[i], &g2, &b2, &s2);
        if (e == 0 && g2 < *grid)
            *grid = g2; /* a grid every instance holds at once */
    }
    return e;
}

/* One graph per kernel instance (by its index in ft_gk_launch); dead:
 * a graph could not be made, launch without. */
struct ft_gk_graphs {
    int dead;
    struct {
        cudaGraph_t g;
        cudaGraphExec_t x;
        cudaGraphNode_t node;
    } e[3];
};

static cudaError_t gk_graph_make(ft_gk_graphs *gs, int i,
                                 const cudaKernelNodeParams *kp);
static const void *gk_instance(int i);

extern "C" ft_gk_graphs *ft_gk_graphs_new(int grid, int block, size_t smem)
{
    ft_gk_graphs *gs = (ft_gk_graphs *)calloc(1, sizeof(ft_gk_graphs));
    if (gs == NULL)
        return NULL;
    /* made with zeroed parameters, never launched with them */
    ft_gk_params zero;
    memset(&zero, 0, sizeof zero);
    void *args[] = {&zero};
    for (int i = 0; i < 3 && !gs->dead; i++) {
        cudaKernelNodeParams kp;
        memset(&kp, 0, sizeof kp);
        kp.func = (void *)gk_instance(i);
        kp.gridDim = dim3(grid);
        kp.blockDim = dim3(block);
        kp.sharedMemBytes = (unsigned int)gk_launch_smem(smem, i > 0);
        kp.kernelParams = args;
        if (gk_graph_make(gs, i, &kp) != cudaSuccess) {
            (void)cudaGetLastError();
            gs->dead = 1;
        }
    }
    return gs;
}

extern "C" void ft_gk_graphs_free(ft_gk_graphs *gs)
{
    if (gs == NULL)
        return;
    for (int i = 0; i < 3; i++) {
        if (gs->e[i].x)
            cudaGraphExecDestroy(gs->e[i].x);
        if (gs->e[i].g)
            cudaGraphDestroy(gs->e[i].g);
    }
    free(gs);
}

/* Instance i's graph of one cooperative kernel node with kp (its first
 * launch's parameters; each launch sets its own). */
static cudaError_t gk_graph_make(ft_gk_graphs *gs, int i,
                                 const cudaKernelNodeParams *kp)
{
    cudaError_t e = cudaGraphCreate(&gs->e[i].g, 0);
    if (e == cudaSuccess)
        e = cudaGraphAddKernelNode(&gs->e[i].node, gs->e[i].g, NULL, 0, kp);
    if (e == cudaSuccess) {
        cudaLaunchAttributeValue v;
        memset(&v, 0, sizeof v);
        v.cooperative = 1;
        e = cudaGraphKernelNodeSetAttribute(
            gs->e[i].node, cudaLaunchAttributeCooperative, &v);
    }
    if (e == cudaSuccess)
        e = cudaGraphInstantiate(&gs->e[i].x, gs->e[i].g, 0);
    if (e != cudaSuccess) {
        if (gs->e[i].g)
            cudaGraphDestroy(gs->e[i].g);
        gs->e[i].g = NULL;
        gs->e[i].x = NULL;
    }
    return e;
}

/* Kernel instance i: 0 lazy (or not spread), 1 spread, 2 fused. */
static const void *gk_instance(int i)
{
    return i == 2   ? (const void *)ft_gk_search<true, true>
           : i == 1 ? (const void *)ft_gk_search<true, false>
                    : (const void *)ft_gk_search<false, false>;
}

extern "C" int ft_gk_launch(const ft_gk_params *p, int grid, int block,
                            size_t smem, void *stream, ft_gk_graphs *gs)
{
    ft_gk_params copy = *p;
    void *args[] = {&copy};
    int i = p->fuse ? 2 : p->spread ? 1 : 0;
    size_t sm = gk_launch_smem(smem, p->spread);
    if (gs != NULL && !gs->dead) {
        cudaKernelNodeParams kp;
        memset(&kp, 0, sizeof kp);
        kp.func = (void *)gk_instance(i);
        kp.gridDim = dim3(grid);
        kp.blockDim = dim3(block);
        kp.sharedMemBytes = (unsigned int)sm;
        kp.kernelParams = args;
        cudaError_t e = cudaSuccess;
        if (gs->e[i].x == NULL) {
            e = gk_graph_make(gs, i, &kp);
            if (e != cudaSuccess) {
                /* no graphs here: every launch goes without */
                (void)cudaGetLastError();
                gs->dead = 1;
            }
        } else {
            /* (the arguments are copied into the graph) */
            e = cudaGraphExecKernelNodeSetParams(gs->e[i].x, gs->e[i].node,
                                                 &kp);
            if (e != cudaSuccess)
                return (int)e;
        }
        if (!gs->dead)
            return (int)cudaGraphLaunch(gs->e[i].x, (cudaStream_t)stream);
    }
    return (int)cudaLaunchCooperativeKernel(gk_instance(i), dim3(grid),
                                            dim3(block), args, sm,
                                            (cudaStream_t)stream);
}

#ifdef FT_GK_PROFILE
/* ---- the chain profile's host side (profile builds) ------------------- */

#define GK_CHS_N 24
static double gk_chs_sum[GK_CH_T][GK_CHS_N];
static double gk_chs_cnt[GK_CH_T];
static unsigned gk_chs_slow[GK_CH_T][GK_CH_CTAS];
static double gk_chs_pre[GK_CH_T][4]; /* selection end -> cut stored,
                                       * -> r1 setup, -> the items' loop */
static double gk_chs_pp[GK_CH_T][4]; /* warps' start after the CTA's
                                      * selection: median, max; the CTA's
                                      * end after the warp's: median */

extern "C" int ft_gk_prof_chain_reset(void *stream)
{
    void *a, *b;
    if (cudaGetSymbolAddress(&a, gk_chc) != cudaSuccess ||
        cudaGetSymbolAddress(&b, gk_chw) != cudaSuccess)
        return 1;
    cudaMemsetAsync(a, 0, sizeof gk_chc, (cudaStream_t)stream);
    cudaMemsetAsync(b, 0, sizeof gk_chw, (cudaStream_t)stream);
    return 0;
}

static int gk_cmp_d(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static double gk_med(double *v, size_t n)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof *v, gk_cmp_d);
    return v[n / 2];
}

static double gk_max(const double *v, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

/* After a fused launch of T steps on grid CTAs, ne of them expanding. */
extern "C" int ft_gk_prof_chain_take(uint32_t T, uint32_t ne, uint32_t grid)
{
    static unsigned long long c[GK_CH_T][GK_CH_CTAS][6];
    static unsigned long long w[GK_CH_T][GK_CH_WARPS][8];
    if (cudaMemcpyFromSymbol(c, gk_chc, sizeof c) != cudaSuccess ||
        cudaMemcpyFromSymbol(w, gk_chw, sizeof w) != cudaSuccess)
        return 1;
    if (grid > GK_CH_CTAS)
        grid = GK_CH_CTAS;
    if (T > GK_CH_T)
        T = GK_CH_T;
    static double v[6][GK_CH_WARPS];
    for (uint32_t t = 0; t < T; t++) {
        double *S = gk_chs_sum[t];
        size_t n = 0, nt = 0;
        double tmax = 0, twmin = 1e30;
        uint32_t slow = 0;
        double slowv = -1;
        for (uint32_t i = 0; i < grid; i++) {
            double A = (double)c[t][i][0];
            double C = (double)c[t][i][2];
            if (t == 0) {
                if (C == 0 || A == 0)
                    continue;
                v[3][n++] = A - C;
                continue;
            }
            double A0 = (double)c[t - 1][i][0], B0 = (double)c[t - 1][i][1];
            if (i < ne) {
                if (A0 == 0 || B0 == 0 || C == 0 || A == 0)
                    continue;
                v[0][n] = B0 - A0;
                v[1][n] = C - B0;
                v[2][n] = C - A0;
                v[3][n] = A - C;
                if (C - A0 > slowv) {
                    slowv = C - A0;
                    slow = i;
                }
                n++;
            } else {
                if (A0 == 0 || B0 == 0 || A == 0)
                    continue;
                tmax = B0 - A0 > tmax ? B0 - A0 : tmax;
                twmin = A - B0 < twmin ? A - B0 : twmin;
                nt++;
            }
        }
        if (n == 0)
            continue;
        gk_chs_cnt[t] += 1;
        if (t > 0) {
            S[0] += gk_max(v[0], n);
            S[1] += gk_med(v[0], n);
            S[2] += gk_max(v[1], n);
            S[3] += gk_med(v[1], n);
            S[4] += gk_max(v[2], n);
            S[5] += gk_med(v[2], n);
            gk_chs_slow[t][slow]++;
        }
        double wmin = 1e30;
        for (size_t i = 0; i < n; i++)
            wmin = v[3][i] < wmin ? v[3][i] : wmin;
        S[6] += wmin;
        S[7] += gk_med(v[3], n);
        S[8] += nt ? tmax : 0;
        S[9] += nt ? twmin : 0;
        /* warps */
        size_t m = 0;
        double best = -1;
        uint32_t bw = 0;
        static double pre[GK_CH_WARPS], post[GK_CH_WARPS];
        size_t npp = 0;
        for (uint32_t j = 0; j < GK_CH_WARPS; j++) {
            const unsigned long long *x = w[t][j];
            if (x[7] != 1)
                continue;
            uint32_t ct = t == 0 ? j % grid : j % ne;
            if (t > 0 && ct < grid && c[t - 1][ct][1] && c[t][ct][2] &&
                x[0] >= c[t - 1][ct][1] && c[t][ct][2] >= x[4]) {
                pre[npp] = (double)(x[0] - c[t - 1][ct][1]);
                post[npp++] = (double)(c[t][ct][2] - x[4]);
            }
            for (int k = 0; k < 4; k++)
                v[k][m] = (double)(x[k + 1] - x[k]);
            v[4][m] = (double)(x[4] - x[0]);
            if (v[4][m] > best) {
                best = v[4][m];
                bw = j;
            }
            m++;
        }
        S[10] += (double)m;
        if (m) {
            const unsigned long long *x = w[t][bw];
            for (int k = 0; k < 4; k++)
                S[16 + k] += (double)(x[k + 1] - x[k]);
            S[20] += (double)x[5];
            S[21] += (double)(x[6] & 0xffu);
            static double mx[5], md[5];
            for (int k = 0; k < 5; k++) {
                mx[k] = gk_max(v[k], m);
                md[k] = gk_med(v[k], m);
            }
            /* medians 11..15 (range, lookup, append, store, total); the
             * maxima of each phase in the second half of the row */
            for (int k = 0; k < 5; k++)
                S[11 + k] += md[k];
            S[22] += mx[4];
            S[23] += mx[2];
        }
        if (t > 0) {
            size_t k3 = 0;
            for (uint32_t i = 0; i < ne && i < grid; i++) {
                unsigned long long b0 = c[t - 1][i][1], m3 = c[t][i][3],
                                   m4 = c[t][i][4], m5 = c[t][i][5];
                if (!b0 || !m3 || !m4 || !m5 || m3 < b0 || m4 < m3 || m5 < m4)
                    continue;
                v[0][k3] = (double)(m3 - b0);
                v[1][k3] = (double)(m4 - m3);
                v[2][k3] = (double)(m5 - m4);
                k3++;
            }
            if (k3) {
                gk_chs_pre[t][0] += gk_med(v[0], k3);
                gk_chs_pre[t][1] += gk_med(v[1], k3);
                gk_chs_pre[t][2] += gk_med(v[2], k3);
                gk_chs_pre[t][3] += 1;
            }
        }
        if (npp) {
            gk_chs_pp[t][0] += gk_med(pre, npp);
            gk_chs_pp[t][1] += gk_max(pre, npp);
            gk_chs_pp[t][2] += gk_med(post, npp);
            gk_chs_pp[t][3] += 1;
        }
    }
    return 0;
}

extern "C" void ft_gk_prof_chain_print(int khz, void (*emit)(const char *line))
{
    double us = khz ? 1e3 / khz : 0;
    char line[512];
    snprintf(line, sizeof line,
             "gpu chain profile of fused launches (us, clock64 at %d MHz; "
             "CTA = expanding CTAs; per launch, then mean):",
             khz / 1000);
    emit(line);
    for (uint32_t t = 0; t < GK_CH_T; t++) {
        double n = gk_chs_cnt[t];
        if (n == 0)
            continue;
        const double *S = gk_chs_sum[t];
        unsigned bs = 0, bc = 0;
        for (uint32_t i = 0; i < GK_CH_CTAS; i++)
            if (gk_chs_slow[t][i] > bc) {
                bc = gk_chs_slow[t][i];
                bs = i;
            }
        double u = us / n;
        snprintf(line, sizeof line,
                 "  step %2u: CTA sel max %.2f med %.2f | exp max %.2f med "
                 "%.2f | sel+exp max %.2f med %.2f (slowest most often CTA "
                 "%u, %u of %.0f) | wait min %.2f med %.2f | term merge max "
                 "%.2f, its wait min %.2f",
                 t, S[0] * u, S[1] * u, S[2] * u, S[3] * u, S[4] * u, S[5] * u,
                 bs, bc, n, S[6] * u, S[7] * u, S[8] * u, S[9] * u);
        emit(line);
        snprintf(line, sizeof line,
                 "           warps %.0f: median range %.2f lookup %.2f "
                 "append %.2f store %.2f total %.2f | max total %.2f, max "
                 "append %.2f | slowest warp: range %.2f lookup %.2f append "
                 "%.2f store %.2f (children %.0f, path %.2f)",
                 S[10] / n, S[11] * u, S[12] * u, S[13] * u, S[14] * u,
                 S[15] * u, S[22] * u, S[23] * u, S[16] * u, S[17] * u,
                 S[18] * u, S[19] * u, S[20] / n, S[21] / n);
        emit(line);
        if (gk_chs_pp[t][3] > 0) {
            double pu = us / gk_chs_pp[t][3];
            snprintf(line, sizeof line,
                     "           a warp's first item starts after its CTA's "
                     "selection: median %.2f max %.2f; the CTA's expansion "
                     "ends after the item: median %.2f",
                     gk_chs_pp[t][0] * pu, gk_chs_pp[t][1] * pu,
                     gk_chs_pp[t][2] * pu);
            emit(line);
        }
        if (gk_chs_pre[t][3] > 0) {
            double pu = us / gk_chs_pre[t][3];
            snprintf(line, sizeof line,
                     "           after the selection (median CTA): cut "
                     "stored %.2f, r1 setup %.2f, to the items' loop %.2f",
                     gk_chs_pre[t][0] * pu, gk_chs_pre[t][1] * pu,
                     gk_chs_pre[t][2] * pu);
            emit(line);
        }
    }
}
#endif
