/*
 * ft_ar_step.cu - the GPU autoregressive step (ft_ar_kernels.h): device
 * code only.  The rules are include/flashtrie/internal/ar_rules.h's, the same code the
 * CPU step (shard/ar_step.c) runs, so both give the same bits:
 *
 *  - ark_ranges: one thread per beam, its child range and its work items
 *    (children for dense rows without a vocabulary, else row entries).
 *  - ark_fl_kernel (a whole-row normalisation): one CTA a part of
 *    ar_rules.h's 8,192 entries, the part read once into registers (its
 *    maximum, then its sums), the row's last CTA adding the parts; "The
 *    whole-row normalisation" below.
 *  - ark_lse_kernel (a normalisation over the allowed entries): one CTA
 *    per beam, the set's maximum (exact in any order) and the lane sums of
 *    ar_rules.h (thread l is lane l: entries l, l + 256, ... in ascending
 *    order, then the same pairwise tree in shared memory; a node of many
 *    children by windows of the row, a bit a column: ark_lse).
 *  - ark_flat: a grid over every beam's work items, flattened (a beam with
 *    10^4 children is spread over the grid, not one CTA): every item that
 *    passes theta_tok, theta_sent and has a child is appended to the
 *    next-beam list and/or the completed-key list (slots by warp-aggregated
 *    atomics: the order of the lists does not matter, their keys are
 *    unique and totally ordered).  The mask form runs ark_ranges and
 *    ark_flat too, after clearing the mask, setting bits by atomics.
 *  - ark_select: a grid of CTAs per list (ark_select's comment): a list
 *    of at most ARK_DIRECT entries is sorted whole by one CTA in shared
 *    memory (bitonic, on the 128-bit key); a longer one is cut by radix
 *    passes spread over the grid, then its survivors are sorted by one CTA.
 *    The first B (or n) are written out, with their key's index and value
 *    for completed keys.
 *  - ark_fused, ark_mask_fused: the common case in one launch (no
 *    normalisation or one over the whole row, ark_fl_kernel launched
 *    first; at most FT_ARK_FUSED_MAX beams; "The one-launch step" below):
 *    ranges, expansion and selection (or the mask's bits) by one
 *    co-resident grid that meets at one or two grid barriers; the
 *    launches above remain for rows normalised over the allowed children
 *    and larger sessions.
 */
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include <cooperative_groups.h>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "flashtrie/internal/ar_rules.h"
#include "flashtrie/internal/ar_walk.h"
#include "ft_ar_kernels.h"
#include "ft_ar_nav.cuh"
#include "ft_ctab.cuh"

/* The one-launch step's phase marks (ft_ark_prof_take; FT_GK_PROFILE
 * builds, empty otherwise): CTA 0's thread 0 adds the clock64 cycles since
 * its last mark into slot i (ARK_PM), or a count (ARK_PC). */
#ifdef FT_GK_PROFILE
__device__ unsigned long long g_ark_prof[FT_ARK_PROF_N];
#define ARK_PM_DECL                                                        \
    long long ark_pm_last =                                                \
        blockIdx.x == 0 && threadIdx.x == 0 ? clock64() : 0;
#define ARK_PM(i)                                                          \
    do {                                                                   \
        if (blockIdx.x == 0 && threadIdx.x == 0) {                         \
            long long ark_pm_now = clock64();                              \
            atomicAdd(&g_ark_prof[i],                                      \
                      (unsigned long long)(ark_pm_now - ark_pm_last));     \
            ark_pm_last = ark_pm_now;                                      \
        }                                                                  \
    } while (0)
#define ARK_PC(i, v)                                                       \
    do {                                                                   \
        if (blockIdx.x == 0 && threadIdx.x == 0)                           \
            atomicAdd(&g_ark_prof[i], (unsigned long long)(v));            \
    } while (0)
#else
#define ARK_PM_DECL
#define ARK_PM(i) ((void)0)
#define ARK_PC(i, v) ((void)0)
#endif

/* Programmatic dependent launch.  A one-launch kernel launched with
 * programmatic stream serialization (ft_ark_params.fused_pdl) may have
 * CTAs resident before the kernel ahead of it on the stream has finished:
 * ark_pdl_wait (griddepcontrol.wait) holds them until that kernel has
 * completed and its writes are visible, so nothing it writes is read
 * before.  ark_pdl_trigger lets a kernel launched that way after this one
 * take SMs as this one's CTAs exit (its own wait holds it until this one
 * completes).  A dependent starts only once every CTA of the kernel ahead
 * has triggered or exited, so each launch's CTAs all become resident and
 * the grid barriers' co-residency is kept.  No-ops before sm_90 and in a
 * plain launch. */
__device__ __forceinline__ void ark_pdl_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void ark_pdl_trigger()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* ark_warp_incl is lane's inclusive sum of v over lanes 0 .. lane of a
 * whole warp (every lane calls it): the scans of the histogram cuts (the
 * radix passes', ark_pre_cut's fine bins), whose callers then find the
 * first lane whose sum reaches their count. */
template <typename T>
__device__ __forceinline__ T ark_warp_incl(T v, uint32_t lane)
{
    for (uint32_t d = 1; d < 32; d <<= 1) {
        T t = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= d)
            v += t;
    }
    return v;
}

#define ARK_EXP_THREADS 256
#define ARK_SEL_THREADS 1024
/* A list of at most this many entries is sorted whole by one CTA; a longer
 * one is cut by the grid's radix passes until at most ark_limit(take)
 * survive. */
#define ARK_DIRECT 1024u
/* labels staged at once by an allowed-children normalisation */
#define ARK_LAB_CHUNK 2048u
/* an allowed-children normalisation over a node of more than width /
 * ARK_LSE_WIDE children sums by windows of the row (ark_lse): a window's
 * ARK_LSE_WIN columns, a bit each in shared memory, one word a thread */
#define ARK_LSE_WIDE 16u
#define ARK_LSE_WIN (32u * ARK_EXP_THREADS)
/* The most CTAs per list of the grid selection. */
#define ARK_SEL_CTAS 64

namespace cg = cooperative_groups;

static_assert(ARK_EXP_THREADS == FT_AR_LANES, "one thread per lane");

/* Node's child range: from the child table when the session has one. */
__device__ __forceinline__ ft_child_range ark_range(const ft_ark_params &p,
                                                    uint64_t node)
{
    return p.ctab ? ft_ctab_range(p.ctab, node) : ark_children(&p.view, node);
}

__device__ __forceinline__ uint64_t ark_stride(const ft_ark_params &p)
{
    return p.stride ? p.stride : p.width;
}

__device__ __forceinline__ uint32_t ark_tok(const ft_ark_params &p,
                                            uint32_t r, uint32_t j)
{
    if (p.form == FT_ARR_SPARSE)
        return p.ids[(uint64_t)r * ark_stride(p) + j];
    return p.vocab ? p.vocab[j] : j;
}

__device__ __forceinline__ bool ark_child_driven(const ft_ark_params &p,
                                                 const ft_child_range *cr)
{
    return p.form == FT_ARR_DENSE && p.vocab == NULL && cr->deg <= p.width;
}

/* ark_row_at is where beam r's row starts, its entries' size and dtype. */
__device__ __forceinline__ const char *ark_row_at(const ft_ark_params &p,
                                                  uint32_t r, int *dt)
{
    *dt = p.form == FT_ARR_SPARSE ? FT_ARR_F32 : p.dtype;
    size_t esz = *dt == FT_ARR_F32 ? 4 : 2;
    return (const char *)p.logp + (uint64_t)r * ark_stride(p) * esz;
}

/* ark_x is entry j of beam r's row, as a float. */
__device__ __forceinline__ float ark_x(const ft_ark_params &p, uint32_t r,
                                       uint32_t j)
{
    int dt;
    const char *base = ark_row_at(p, r, &dt);
    return ft_ar_load(base, dt, j);
}

/* ark_by_dtype calls f with the row dtype dt as a compile-time constant
 * (ark_dt<DT>::v): the whole-row passes' dtype is chosen once a row. */
template <int DT>
struct ark_dt {
    static constexpr int v = DT;
};

template <class F>
__device__ __forceinline__ auto ark_by_dtype(int dt, F f)
{
    if (dt == FT_ARR_BF16)
        return f(ark_dt<FT_ARR_BF16>());
    if (dt == FT_ARR_F16)
        return f(ark_dt<FT_ARR_F16>());
    return f(ark_dt<FT_ARR_F32>());
}

/* ark_cta_max: the maximum of the N threads' m (all N call it; NaN is
 * never one); ark_lanes_total: the FT_AR_LANES lanes' sums added pairwise,
 * neighbours first (ar_rules.h's tree; all of the CTA's threads call it,
 * lanes[0..255] written before). */
template <uint32_t N>
__device__ float ark_cta_max(float *smx, float m)
{
    uint32_t t = threadIdx.x;
    smx[t] = m;
    __syncthreads();
    for (uint32_t h = N / 2; h > 0; h >>= 1) {
        if (t < h && smx[t + h] > smx[t])
            smx[t] = smx[t + h];
        __syncthreads();
    }
    return smx[0];
}

__device__ double ark_lanes_total(double *lanes)
{
    uint32_t t = threadIdx.x;
    __syncthreads();
    for (uint32_t h = 1; h < FT_AR_LANES; h <<= 1) {
        if (t < FT_AR_LANES && (t & (2 * h - 1)) == 0)
            lanes[t] = FT_DADD(lanes[t], lanes[t + h]);
        __syncthreads();
    }
    return lanes[0];
}

/* ark_lse computes beam r's normalisation over its allowed entries
 * (FT_ARR_NORM_ALLOWED) in the calling CTA (256 threads, all of them);
 * false when no entry can be taken. */
__device__ bool ark_lse(const ft_ark_params &p, uint32_t r,
                        const ft_child_range *cr, double *lse)
{
    __shared__ float smx[ARK_EXP_THREADS];
    __shared__ double lanes[ARK_EXP_THREADS];
    /* the children's labels, a chunk at a time */
    __shared__ uint32_t slab[ARK_LAB_CHUNK];
    uint32_t l = threadIdx.x;
    bool cd = ark_child_driven(p, cr);
    float mx = -INFINITY;
    if (cd) {
        for (uint64_t i = l; i < cr->deg; i += ARK_EXP_THREADS) {
            uint32_t lab = ft_child_label(&p.view, cr, cr->first + i);
            if (lab < p.width) {
                float x = ark_x(p, r, lab);
                if (x > mx)
                    mx = x;
            }
        }
    } else {
        for (uint32_t j = l; j < p.width; j += ARK_EXP_THREADS) {
            float x = ark_x(p, r, j);
            if (x > mx && ft_find_child(&p.view, cr, ark_tok(p, r, j)) != FT_NONE)
                mx = x;
        }
    }
    mx = ark_cta_max<ARK_EXP_THREADS>(smx, mx);
    if (!(mx > -INFINITY))
        return false;
    double s = 0.0;
    static_assert(ARK_EXP_THREADS == FT_AR_LANES &&
                      ARK_LSE_WIN % FT_AR_LANES == 0,
                  "thread l is lane l; a window starts at a multiple of the "
                  "lanes");
    if (cd && cr->deg * ARK_LSE_WIDE > p.width) {
        /* lane l: its children (label % 256 == l) in ascending label, by
         * windows of the row: the threads set a bit for each child whose
         * label falls in the window (the children are in ascending label,
         * so a window's are the next ones), then lane l tests columns l,
         * l + 256, ... of the window and adds those set.  The same terms
         * in the same order as the scan below, in width / 256 tests a
         * lane rather than one look at every child (a node of 10^4
         * children: 10^4 steps a lane) */
        __shared__ uint32_t sbits[ARK_LSE_WIN / 32];
        __shared__ uint32_t sn;
        uint64_t pos = 0; /* the first child not yet in a window */
        for (uint32_t w0 = 0; w0 < p.width; w0 += ARK_LSE_WIN) {
            uint32_t w1 = (uint32_t)min((uint64_t)w0 + ARK_LSE_WIN,
                                        (uint64_t)p.width);
            __syncthreads(); /* the last window's bits and sn are read */
            sbits[l] = 0;
            if (l == 0)
                sn = 0;
            __syncthreads();
            uint32_t mine = 0;
            for (uint64_t i = pos + l; i < cr->deg; i += ARK_EXP_THREADS) {
                uint32_t lab = ft_child_label(&p.view, cr, cr->first + i);
                if (lab >= w1)
                    break; /* ascending: so are the rest */
                atomicOr(&sbits[(lab - w0) >> 5], 1u << ((lab - w0) & 31));
                mine++;
            }
            if (mine)
                atomicAdd(&sn, mine);
            __syncthreads();
            pos += sn;
            for (uint32_t c = l; c < w1 - w0; c += ARK_EXP_THREADS)
                if (sbits[c >> 5] >> (c & 31) & 1u)
                    s = FT_DADD(s, ft_ar_term(ark_x(p, r, w0 + c), mx));
        }
    } else if (cd) {
        /* lane l: its children (label % 256 == l) in ascending label; the
         * labels are staged in shared memory a chunk at a time, so each
         * lane's scan reads broadcasts, not one global load per child */
        for (uint64_t b0 = 0; b0 < cr->deg; b0 += ARK_LAB_CHUNK) {
            uint32_t cnt = (uint32_t)min((uint64_t)ARK_LAB_CHUNK, cr->deg - b0);
            __syncthreads();
            for (uint32_t i = l; i < cnt; i += ARK_EXP_THREADS)
                slab[i] = ft_child_label(&p.view, cr, cr->first + b0 + i);
            __syncthreads();
            for (uint32_t i = 0; i < cnt; i++) {
                uint32_t lab = slab[i];
                /* ascending: past the row's width, so are the rest */
                if (lab >= p.width || lab % ARK_EXP_THREADS != l)
                    continue;
                s = FT_DADD(s, ft_ar_term(ark_x(p, r, lab), mx));
            }
        }
    } else {
        for (uint32_t j = l; j < p.width; j += ARK_EXP_THREADS) {
            if (ft_find_child(&p.view, cr, ark_tok(p, r, j)) == FT_NONE)
                continue;
            s = FT_DADD(s, ft_ar_term(ark_x(p, r, j), mx));
        }
    }
    lanes[l] = s;
    *lse = ft_ar_lse(mx, ark_lanes_total(lanes));
    return true;
}

/* ark_dkey: the one-launch step's distance key of a next beam's sigma
 * ("The histogram cut" below): the order key of its distance from pmax,
 * rounded; ascending as sigma descends.  ark_pre_bin: its top 12 bits,
 * the histogram's bin. */
__device__ __forceinline__ uint32_t ark_dkey(float sig, float pmax)
{
    return ft_sigma_key(__fsub_rn(sig, pmax));
}

__device__ __forceinline__ uint32_t ark_pre_bin(float sig, float pmax)
{
    return ark_dkey(sig, pmax) >> 20;
}

__device__ __forceinline__ void ark_put(const ft_ark_params &p, int which,
                                        uint32_t slot, uint64_t k1, uint64_t k2,
                                        uint64_t u, double score, float sig,
                                        uint32_t tok, uint32_t len)
{
    const ft_ark_list &L = p.lists[which];
    if (slot >= L.cap)
        return; /* cannot happen: lists hold beams x their widest fan-out */
    L.k1[slot] = k1;
    L.k2[slot] = k2;
    L.node[slot] = u;
    if (L.score)
        L.score[slot] = score;
    L.sigma[slot] = sig;
    L.token[slot] = tok;
    L.len[slot] = len;
}

/* ark_warp_slot: the calling thread's slot of counter; the lanes of a
 * warp that call it together take theirs by one atomic (10^5 candidates
 * on one counter otherwise serialise at the L2). */
__device__ __forceinline__ uint32_t ark_warp_slot(uint32_t *counter)
{
    cg::coalesced_group g = cg::coalesced_threads();
    uint32_t base = 0;
    if (g.thread_rank() == 0)
        base = atomicAdd(counter, g.size());
    return g.shfl(base, 0) + g.thread_rank();
}

/* ark_surv_put: key (a, b), at place i of list which, into the list's
 * survivors (at most FT_ARK_SORT_MAX of them are kept). */
__device__ __forceinline__ void ark_surv_put(const ft_ark_params &p, int which,
                                             uint64_t a, uint64_t b, uint32_t i)
{
    uint32_t slot = ark_warp_slot(&p.heads[which].nsurv);
    if (slot < FT_ARK_SORT_MAX) {
        ft_ark_surv *S = &p.surv[which];
        S->k1[slot] = a;
        S->k2[slot] = b;
        S->idx[slot] = i;
    }
}

/* ark_item_beam: the beam r (of m) with off[r] <= t < off[r + 1], off
 * the beams' work items scanned into offsets. */
__device__ __forceinline__ uint32_t ark_item_beam(const unsigned long long *off,
                                                  uint32_t m, uint64_t t)
{
    uint32_t lo = 0, hi = m;
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) >> 1;
        if (off[mid] <= t)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* ark_cand is what one offer adds: a next beam (beam), a completed key
 * (done), or neither. */
struct ark_cand {
    uint64_t k2, u;
    double score;
    float sig;
    uint32_t tok, len;
    bool beam, done;
};

/* ark_eval is shard/ar_step.c's offer, up to the lists: what the entry
 * adds (c.beam, c.done). */
#define ARK_FL_UNKNOWN 0xffffffffu
__device__ __forceinline__ void ark_eval(const ft_ark_params &p,
                                         const ft_child_range *cr, uint32_t r,
                                         float s, uint32_t len, uint32_t j,
                                         uint32_t tok, float rho, uint64_t u,
                                         uint32_t fl, ark_cand *c)
{
    c->beam = c->done = false;
    uint32_t d = len + 1 < FT_ARK_F_LEN ? len + 1 : FT_ARK_F_LEN - 1;
    double f = p.h_count ? p.F[d] : 0.0; /* loaded early: no data dependence */
    if (!ft_ar_takes(rho, p.theta_tok))
        return;
    float sig = FT_FADD(s, rho);
    if (!(sig > p.theta_sent))
        return;
    if (u == FT_NONE)
        u = ft_find_child(&p.view, cr, tok);
    if (u == FT_NONE)
        return;
    if (fl == ARK_FL_UNKNOWN)
        fl = ft_node_flags(&p.view, u);
    c->k2 = ft_ar_tail(r, rho, j);
    c->u = u;
    c->sig = sig;
    c->tok = tok;
    c->len = len + 1;
    c->beam = (fl & FT_HAS_CHILD) != 0;
    c->done = (fl & FT_TERMINAL) && p.h_count;
    if (c->done)
        c->score = ft_score(sig, f);
}

/* ark_push_cand pushes what an offer adds, each list's slot by one atomic
 * a warp on its count (cnt[0] and cnt[1]: p.counts, or the one-launch
 * step's pair of the launch, ark_fused_lc). */
__device__ __forceinline__ void ark_push_cand(const ft_ark_params &p,
                                              const ark_cand &c, uint32_t *cnt)
{
    if (c.beam)
        ark_put(p, 0, ark_warp_slot(&cnt[0]), ft_sigma_key(c.sig), c.k2, c.u,
                0.0, c.sig, c.tok, c.len);
    if (c.done)
        ark_put(p, 1, ark_warp_slot(&cnt[1]), ft_score_key(c.score), c.k2, c.u,
                c.score, c.sig, c.tok, c.len);
}

/* ark_offer is shard/ar_step.c's offer: ark_eval, then the pushes. */
__device__ __forceinline__ void ark_offer(const ft_ark_params &p,
                                          const ft_child_range *cr, uint32_t r,
                                          float s, uint32_t len, uint32_t j,
                                          uint32_t tok, float rho, uint64_t u,
                                          uint32_t fl = ARK_FL_UNKNOWN)
{
    ark_cand c;
    ark_eval(p, cr, r, s, len, j, tok, rho, u, fl, &c);
    ark_push_cand(p, c, p.counts);
}

/* ark_ranges: one thread per beam row.  Finds the beam's child range
 * and its work items: for the step (mode 0) its children when it is
 * child-driven, else its row's entries (0 when it has no child); for the
 * mask (mode 1) its children, or the vocabulary's entries, and it sets
 * the EOS bit of a terminal beam (the mask was cleared before). */
__global__ void __launch_bounds__(ARK_EXP_THREADS)
ark_ranges(ft_ark_params p, int mode, uint32_t eos, uint32_t *mask)
{
    uint32_t r = blockIdx.x * ARK_EXP_THREADS + threadIdx.x;
    if (mode == 0) /* the step's counters and selection heads */
        for (uint32_t k = r; k < FT_ARK_CLEAR_BYTES / 4;
             k += gridDim.x * ARK_EXP_THREADS)
            p.counts[k] = 0;
    if (r >= p.cap_beam)
        return;
    uint32_t m = min(*p.cur_count, p.cap_beam);
    uint32_t work = 0, cd = 0;
    uint64_t node = r < m ? p.cur_node[r] : FT_NONE;
    if (r < m && node < p.view.n_nodes) {
        ft_child_range cr = ark_range(p, node);
        p.b_rng[r] = cr;
        if (mode == 0) {
            if (cr.deg > 0) {
                cd = ark_child_driven(p, &cr);
                work = cd ? (uint32_t)cr.deg : p.width;
            }
        } else {
            if (p.vocab == NULL) {
                cd = 1;
                work = (uint32_t)cr.deg;
            } else if (cr.deg > 0) {
                work = p.width;
            }
            uint32_t words = (p.width + 31) / 32;
            if (eos < p.width && node != 0 &&
                (ft_node_flags(&p.view, node) & FT_TERMINAL))
                atomicOr(&mask[(uint64_t)r * words + eos / 32], 1u << (eos % 32));
        }
    } else if (r < m && mode == 1 && eos < p.width && ft_arw_state(node)) {
        /* ft_ar_walk's FT_AR_DEAD and FT_AR_DONE: eos alone */
        uint32_t words = (p.width + 31) / 32;
        atomicOr(&mask[(uint64_t)r * words + eos / 32], 1u << (eos % 32));
    }
    p.b_work[r] = work;
    p.b_cd[r] = cd;
}

/* ---- The whole-row normalisation (FT_ARR_NORM_FULL) ----
 * ar_rules.h's parts: one CTA of ARK_FL_THREADS threads a part of
 * FT_AR_PART entries (grid: parts x rows), thread t the part's chunks t,
 * t + 256, t + 512 and t + 768 (lane t): one 16-byte load each for a bf16
 * or f16 row (two for f32) where the part is whole and the row starts on
 * 16 bytes, all four in flight at once, else one entry at a time.  The
 * part is read once: its entries stay in registers while the CTA takes
 * their maximum (NaN if one is NaN), then their terms, each chunk summed
 * pairwise in binary32 and added to the thread's binary64 lane, then the
 * lanes' pairwise tree (across the warp by shuffles, across the warps in
 * shared memory).  A bf16 or f16 part stays packed (two entries a
 * register: ark_fl_hpart).  The last of a row's CTAs to finish (a ticket,
 * left at 0 for the next launch) adds the parts (ft_ar_parts_lse's rule,
 * its tree over the CTA's threads) and writes b_lse: NaN when a part
 * holds a NaN or a +inf, -inf when the row has no maximum (nothing can be
 * taken; the step's launch also sets the beam's work to 0).  No CTA waits
 * for another, the row is read once; one launch, or two where 16-bit rows
 * on 16 bytes end in a cut part (ark_fl_launch). */
#define ARK_FL_THREADS 256
#define ARK_FL_CHUNKS 4
static_assert(ARK_FL_THREADS == FT_AR_PART_LANES, "a thread a lane");
static_assert(ARK_FL_THREADS * 8 * ARK_FL_CHUNKS == FT_AR_PART,
              "the CTA's threads hold a part");
static_assert(FT_AR_MAX_PARTS <= ARK_FL_THREADS, "a thread a part at the top");

/* ark_fl_chunk is one chunk of 8 entries of a row of dtype DT, loaded 16
 * bytes at a time; ark_fl_get decodes entry i. */
template <int DT>
struct ark_fl_chunk {
    uint4 q[DT == FT_ARR_F32 ? 2 : 1];
};

template <int DT>
__device__ __forceinline__ void ark_fl_fetch(const char *base, uint32_t j0,
                                             ark_fl_chunk<DT> &c)
{
    const uint4 *v =
        (const uint4 *)(base + (size_t)j0 * (DT == FT_ARR_F32 ? 4 : 2));
#pragma unroll
    for (int k = 0; k < (DT == FT_ARR_F32 ? 2 : 1); k++)
        c.q[k] = v[k];
}

template <int DT>
__device__ __forceinline__ float ark_fl_get(const ark_fl_chunk<DT> &c, int i)
{
    const uint4 &q = c.q[DT == FT_ARR_F32 ? i / 4 : 0];
    uint32_t w[4] = {q.x, q.y, q.z, q.w};
    if (DT == FT_ARR_F32)
        return __uint_as_float(w[i % 4]);
    return ft_ar_load(&w[i / 2], DT, i % 2);
}

/* ark_nan_max: ft_ar_nan_max (the larger, NaN if either is NaN), one
 * instruction from sm_80 on. */
__device__ __forceinline__ float ark_nan_max(float a, float b)
{
#if __CUDA_ARCH__ >= 800
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
#else
    return ft_ar_nan_max(a, b);
#endif
}

/* ark_fl_cta_nan_max: the CTA's ark_nan_max of every thread's m (all
 * threads call it, all get it). */
__device__ __forceinline__ float ark_fl_cta_nan_max(float m)
{
    __shared__ float wm[ARK_FL_THREADS / 32];
    for (int o = 16; o > 0; o >>= 1)
        m = ark_nan_max(m, __shfl_xor_sync(0xffffffffu, m, o));
    __syncthreads(); /* wm: a previous call's readers are done */
    if ((threadIdx.x & 31u) == 0)
        wm[threadIdx.x >> 5] = m;
    __syncthreads();
    m = wm[0];
#pragma unroll
    for (int w = 1; w < ARK_FL_THREADS / 32; w++)
        m = ark_nan_max(m, wm[w]);
    return m;
}

/* ark_fl_cta_tree: the pairwise tree over the CTA's threads' subtotals v
 * (neighbours first: across the warp by shuffles, then across the warps in
 * shared memory); returns the CTA's total in thread 0 (all threads call
 * it; the others' return value is not the total). */
__device__ __forceinline__ double ark_fl_cta_tree(double v)
{
    __shared__ double ws[ARK_FL_THREADS / 32];
    uint32_t t = threadIdx.x, lane = t & 31u;
    for (uint32_t h = 1; h < 32; h <<= 1) {
        double o = __shfl_down_sync(0xffffffffu, v, h);
        if ((lane & (2 * h - 1)) == 0)
            v = FT_DADD(v, o);
    }
    __syncthreads(); /* ws: a previous call's readers are done */
    if (lane == 0)
        ws[t >> 5] = v;
    __syncthreads();
    if (t == 0)
        for (uint32_t h = 1; h < ARK_FL_THREADS / 32; h <<= 1)
            for (uint32_t w = 0; w + h < ARK_FL_THREADS / 32; w += 2 * h)
                ws[w] = FT_DADD(ws[w], ws[w + h]);
    return ws[0];
}

/* ark_fl_live: whether row r is normalised (step: a beam with work;
 * top-k: one of the live beams). */
__device__ __forceinline__ bool ark_fl_live(const ft_ark_params &p, int step,
                                            uint32_t r)
{
    if (step)
        return p.b_work[r] != 0;
    return r < min(*p.cur_count, p.cap_beam);
}

/* A whole part of a bf16 or f16 row stays packed, two entries a
 * register (16 registers a thread where widened entries take 32: more
 * CTAs an SM without spilling); the thread's maximum is taken two entries
 * at a time (max.NaN on bf16x2 / f16x2: the larger of two 16-bit values
 * is the larger of their widened values, NaN if either is NaN), the terms
 * from the entries widened one at a time, in ark_fl_part's order. */
template <int DT>
__device__ __forceinline__ float ark_h_lo(uint32_t w)
{
    if (DT == FT_ARR_BF16)
        return __uint_as_float(w << 16);
    float f;
    asm("{.reg .b16 l, h; mov.b32 {l, h}, %1; cvt.f32.f16 %0, l;}"
        : "=f"(f) : "r"(w));
    return f;
}

template <int DT>
__device__ __forceinline__ float ark_h_hi(uint32_t w)
{
    if (DT == FT_ARR_BF16)
        return __uint_as_float(w & 0xffff0000u);
    float f;
    asm("{.reg .b16 l, h; mov.b32 {l, h}, %1; cvt.f32.f16 %0, h;}"
        : "=f"(f) : "r"(w));
    return f;
}

/* ark_h_max: the thread's maximum of its part's 32 entries (8 per
 * uint4), NaN if one is NaN. */
template <int DT>
__device__ __forceinline__ float ark_h_max(const uint4 *c)
{
#if __CUDA_ARCH__ >= 800
    uint32_t w[4] = {c[0].x, c[0].y, c[0].z, c[0].w};
#pragma unroll
    for (int k = 0; k < ARK_FL_CHUNKS; k++) {
        uint32_t v[4] = {c[k].x, c[k].y, c[k].z, c[k].w};
#pragma unroll
        for (int i = k == 0 ? 4 : 0; i < 4; i++) {
            if (DT == FT_ARR_BF16)
                asm("max.NaN.bf16x2 %0, %0, %1;" : "+r"(w[i & 3]) : "r"(v[i]));
            else
                asm("max.NaN.f16x2 %0, %0, %1;" : "+r"(w[i & 3]) : "r"(v[i]));
        }
    }
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < 4; i++)
        m = ark_nan_max(m, ark_nan_max(ark_h_lo<DT>(w[i]), ark_h_hi<DT>(w[i])));
    return m;
#else
    float m = -INFINITY;
#pragma unroll
    for (int k = 0; k < ARK_FL_CHUNKS; k++) {
        uint32_t v[4] = {c[k].x, c[k].y, c[k].z, c[k].w};
#pragma unroll
        for (int i = 0; i < 4; i++)
            m = ark_nan_max(m, ark_nan_max(ark_h_lo<DT>(v[i]), ark_h_hi<DT>(v[i])));
    }
    return m;
#endif
}

/* ark_fl_hpart: ark_fl_part<DT, WHOLE> of a bf16 or f16 part held packed
 * in c (thread t's chunks t, t + 256, t + 512, t + 768; entries past the
 * row's end n are -inf there, and their terms are 0). */
template <int DT, bool WHOLE>
__device__ __forceinline__ float ark_fl_hpart(const uint4 *c, uint32_t n,
                                              double *sum)
{
    const uint32_t t = threadIdx.x;
    float m = ark_fl_cta_nan_max(ark_h_max<DT>(c));
    *sum = 0.0;
    if (ft_ar_part_spoils(m) || !(m > -INFINITY))
        return m;
    double a = 0.0;
#pragma unroll
    for (int k = 0; k < ARK_FL_CHUNKS; k++) {
        uint32_t v[4] = {c[k].x, c[k].y, c[k].z, c[k].w};
        uint32_t j = 8 * (t + ARK_FL_THREADS * k);
        float e[8];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            e[2 * i] = WHOLE || j + 2 * i < n
                           ? ft_ar_row_term(ark_h_lo<DT>(v[i]), m)
                           : 0.0f;
            e[2 * i + 1] = WHOLE || j + 2 * i + 1 < n
                               ? ft_ar_row_term(ark_h_hi<DT>(v[i]), m)
                               : 0.0f;
        }
        a = FT_DADD(a, (double)ft_ar_chunk_sum(e));
    }
    *sum = ark_fl_cta_tree(a);
    return m;
}

/* ark_fl_part: part q's maximum and sum (this CTA), of a part of n entries
 * at base (WHOLE: n == FT_AR_PART and base on 16 bytes); thread 0 gets
 * them.  Entries past the row's end: -inf for the maximum, 0 terms. */
template <int DT, bool WHOLE>
__device__ __forceinline__ float ark_fl_part(const char *base, uint32_t n,
                                             double *sum)
{
    const uint32_t t = threadIdx.x;
    if (DT != FT_ARR_F32) {
        uint4 c[ARK_FL_CHUNKS];
        if (WHOLE) {
#pragma unroll
            for (int k = 0; k < ARK_FL_CHUNKS; k++)
                c[k] = ((const uint4 *)base)[t + ARK_FL_THREADS * k];
        } else {
            const uint16_t *h = (const uint16_t *)base;
            const uint32_t ninf = DT == FT_ARR_F16 ? 0xfc00u : 0xff80u;
#pragma unroll
            for (int k = 0; k < ARK_FL_CHUNKS; k++) {
                uint32_t w[4];
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    uint32_t j = 8 * (t + ARK_FL_THREADS * k) + 2 * i;
                    uint32_t lo = j < n ? h[j] : ninf;
                    uint32_t hi = j + 1 < n ? h[j + 1] : ninf;
                    w[i] = lo | hi << 16;
                }
                c[k] = make_uint4(w[0], w[1], w[2], w[3]);
            }
        }
        return ark_fl_hpart<DT, WHOLE>(c, n, sum);
    }
    float x[ARK_FL_CHUNKS][8];
    if (WHOLE) {
        ark_fl_chunk<DT> c[ARK_FL_CHUNKS];
#pragma unroll
        for (int k = 0; k < ARK_FL_CHUNKS; k++)
            ark_fl_fetch<DT>(base, 8 * (t + ARK_FL_THREADS * k), c[k]);
#pragma unroll
        for (int k = 0; k < ARK_FL_CHUNKS; k++)
#pragma unroll
            for (int i = 0; i < 8; i++)
                x[k][i] = ark_fl_get<DT>(c[k], i);
    } else {
#pragma unroll
        for (int k = 0; k < ARK_FL_CHUNKS; k++)
#pragma unroll
            for (int i = 0; i < 8; i++) {
                uint32_t j = 8 * (t + ARK_FL_THREADS * k) + i;
                x[k][i] = j < n ? ft_ar_load(base, DT, j) : -INFINITY;
            }
    }
    float m = -INFINITY;
#pragma unroll
    for (int k = 0; k < ARK_FL_CHUNKS; k++)
#pragma unroll
        for (int i = 0; i < 8; i++)
            m = ark_nan_max(m, x[k][i]);
    m = ark_fl_cta_nan_max(m);
    *sum = 0.0;
    if (ft_ar_part_spoils(m) || !(m > -INFINITY))
        return m; /* NaN, +inf or no maximum: no sum (ft_ar_parts_lse) */
    double a = 0.0;
#pragma unroll
    for (int k = 0; k < ARK_FL_CHUNKS; k++) {
        float e[8];
#pragma unroll
        for (int i = 0; i < 8; i++)
            e[i] = WHOLE || 8 * (t + ARK_FL_THREADS * k) + i < n
                       ? ft_ar_row_term(x[k][i], m)
                       : 0.0f;
        a = FT_DADD(a, (double)ft_ar_chunk_sum(e));
    }
    *sum = ark_fl_cta_tree(a);
    return m;
}

/* ark_fl_none marks row r as having no maximum: nothing can be taken. */
__device__ __forceinline__ void ark_fl_none(const ft_ark_params &p, int step,
                                            uint32_t r)
{
    p.b_lse[r] = -INFINITY;
    if (step)
        p.b_work[r] = 0;
}

/* ark_fl_top: the row's parts (this CTA, the last of the row's to
 * finish): ft_ar_parts_lse, its maximum and products a thread a part, its
 * tree over the CTA's threads (the products of the parts past the row's
 * count are 0: the same tree as over a power of two). */
__device__ __forceinline__ void ark_fl_top(const ft_ark_params &p, int step,
                                           uint32_t r, uint32_t parts)
{
    const uint32_t t = threadIdx.x;
    size_t at = (size_t)r * p.fl_stride + t;
    float mq = t < parts ? __ldcg(&p.b_fmax[at]) : -INFINITY;
    if (__syncthreads_or(ft_ar_part_spoils(mq))) {
        if (t == 0)
            p.b_lse[r] = NAN;
        return;
    }
    float M = ark_fl_cta_nan_max(mq);
    if (!(M > -INFINITY)) {
        if (t == 0)
            ark_fl_none(p, step, r);
        return;
    }
    double z = t < parts && mq > -INFINITY
                   ? FT_DMUL(__ldcg(&p.b_fsum[at]),
                             (double)ft_ar_row_term(mq, M))
                   : 0.0;
    z = ark_fl_cta_tree(z);
    if (t == 0)
        p.b_lse[r] = ft_ar_lse(M, z);
}

/* ark_fl_done: part q of row r is taken (m, sum: thread 0's); the row's
 * last part to finish adds the parts (ark_fl_top). */
__device__ __forceinline__ void ark_fl_done(const ft_ark_params &p, int step,
                                            uint32_t r, uint32_t q,
                                            uint32_t parts, float m, double sum)
{
    __shared__ int last;
    if (threadIdx.x == 0) {
        size_t at = (size_t)r * p.fl_stride + q;
        p.b_fmax[at] = m;
        p.b_fsum[at] = sum;
        __threadfence();
        last = atomicAdd(&p.b_ftick[r], 1u) == parts - 1;
    }
    __syncthreads();
    if (!last)
        return;
    __threadfence();
    ark_fl_top(p, step, r, parts);
    if (threadIdx.x == 0)
        p.b_ftick[r] = 0;
}

/* ark_fl_kernel: part q0 + blockIdx.x of row blockIdx.y; MINB, the CTAs
 * an SM must hold at once (the registers' bound: 1 none).  WHOLE: every
 * part of the grid is whole (FT_AR_PART entries, on 16 bytes: the host
 * knows), so the kernel has no path for the others (a cut part's
 * entry-by-entry loads would make the registers' bound spill); else each
 * CTA finds whether its part is. */
template <int DT, int MINB, bool WHOLE>
__global__ void __launch_bounds__(ARK_FL_THREADS, MINB)
ark_fl_kernel(ft_ark_params p, int step, uint32_t q0)
{
    const uint32_t q = q0 + blockIdx.x, r = blockIdx.y;
    const uint32_t parts = ft_ar_parts(p.width);
    /* the one-launch step after it may take SMs as these CTAs exit: it
     * finds the child ranges meanwhile, and waits for this kernel before
     * it reads an lse (ark_fused) */
    ark_pdl_trigger();
    if (!ark_fl_live(p, step, r))
        return;
    int dt;
    const char *row = ark_row_at(p, r, &dt);
    uint32_t j0 = q * FT_AR_PART;
    uint32_t n = min(p.width - j0, FT_AR_PART);
    const char *base = row + (size_t)j0 * (DT == FT_ARR_F32 ? 4 : 2);
    double sum;
    float m;
    if (WHOLE)
        m = ark_fl_part<DT, true>(base, n, &sum);
    else if (n == FT_AR_PART && ((uintptr_t)base & 15) == 0)
        m = ark_fl_part<DT, true>(base, n, &sum);
    else
        m = ark_fl_part<DT, false>(base, n, &sum);
    ark_fl_done(p, step, r, q, parts, m, sum);
}

/* ark_lse_kernel: one CTA per beam with work, its normalisation
 * (ark_lse); a beam with no entry to take gets no work. */
__global__ void __launch_bounds__(ARK_EXP_THREADS)
ark_lse_kernel(ft_ark_params p)
{
    uint32_t r = blockIdx.x;
    if (p.b_work[r] == 0)
        return;
    ft_child_range cr = p.b_rng[r];
    double lse = 0.0;
    bool ok = ark_lse(p, r, &cr, &lse);
    if (threadIdx.x == 0) {
        if (ok)
            p.b_lse[r] = lse;
        else
            p.b_work[r] = 0;
    }
}

/* ark_flat: the beams' work items, flattened: every CTA scans the work
 * counts into offsets in shared memory, then the grid strides over all
 * items, each finding its beam by a binary search; a wide beam is spread
 * over the whole grid.  Mode 0 offers each item (shard/ar_step.c's
 * offer); mode 1 sets its mask bit.  Neither depends on the order. */
__global__ void __launch_bounds__(ARK_EXP_THREADS)
ark_flat(ft_ark_params p, int mode, uint32_t *mask)
{
    typedef cub::BlockScan<unsigned long long, ARK_EXP_THREADS> Scan;
    __shared__ typename Scan::TempStorage ts;
    extern __shared__ unsigned long long off[]; /* [cap_beam + 1] */
    uint32_t m = min(*p.cur_count, p.cap_beam);
    unsigned long long carry = 0;
    for (uint32_t b = 0; b < m; b += ARK_EXP_THREADS) {
        uint32_t i = b + threadIdx.x;
        unsigned long long v = i < m ? p.b_work[i] : 0, ex, agg;
        Scan(ts).ExclusiveSum(v, ex, agg);
        if (i < m)
            off[i] = carry + ex;
        carry += agg;
        __syncthreads();
    }
    if (threadIdx.x == 0)
        off[m] = carry;
    __syncthreads();
    uint64_t total = off[m];
    uint32_t words = (p.width + 31) / 32;
    for (uint64_t t = (uint64_t)blockIdx.x * ARK_EXP_THREADS + threadIdx.x;
         t < total; t += (uint64_t)gridDim.x * ARK_EXP_THREADS) {
        uint32_t r = ark_item_beam(off, m, t);
        uint64_t i = t - off[r];
        ft_child_range cr = p.b_rng[r];
        if (mode == 1) {
            if (p.b_cd[r]) {
                uint32_t lab = ft_child_label(&p.view, &cr, cr.first + i);
                if (lab < p.width)
                    atomicOr(&mask[(uint64_t)r * words + lab / 32], 1u << (lab % 32));
            } else {
                uint32_t j = (uint32_t)i;
                if (ft_find_child(&p.view, &cr, p.vocab[j]) != FT_NONE)
                    atomicOr(&mask[(uint64_t)r * words + j / 32], 1u << (j % 32));
            }
            continue;
        }
        float s = p.cur_sigma[r];
        uint32_t len = p.cur_len[r];
        double lse = p.norm != FT_ARR_NORM_NONE ? p.b_lse[r] : 0.0;
        if (p.b_cd[r]) {
            uint64_t u = cr.first + i;
            uint32_t lab = ft_child_label(&p.view, &cr, u);
            if (lab >= p.width)
                continue;
            float x = ark_x(p, r, lab);
            float rho = p.norm ? ft_ar_norm(x, lse) : x;
            ark_offer(p, &cr, r, s, len, lab, lab, rho, u);
        } else {
            uint32_t j = (uint32_t)i;
            float x = ark_x(p, r, j);
            float rho = p.norm ? ft_ar_norm(x, lse) : x;
            ark_offer(p, &cr, r, s, len, j, ark_tok(p, r, j), rho, FT_NONE);
        }
    }
}

__device__ __forceinline__ bool ark_gt(uint64_t a1, uint64_t a2, uint64_t b1,
                                       uint64_t b2)
{
    return ft_ar_before(b1, b2, a1, a2);
}

/* ark_entry is one list entry as an output needs it (for a completed
 * key, with its key index and value looked up). */
struct ark_entry {
    uint64_t node, ki, value;
    double score;
    float sigma;
    uint32_t token, len;
};

/* ark_load_entry reads entry x of list which.  The list was written by
 * this launch or the one before: its reads skip L1. */
__device__ __forceinline__ ark_entry ark_load_entry(const ft_ark_params &p,
                                                    int which, uint32_t x)
{
    const ft_ark_list &L = p.lists[which];
    ark_entry e;
    e.node = __ldcg((const unsigned long long *)&L.node[x]);
    e.sigma = __ldcg(&L.sigma[x]);
    e.len = __ldcg((const unsigned int *)&L.len[x]);
    e.token = __ldcg((const unsigned int *)&L.token[x]);
    e.score = 0.0;
    e.ki = e.value = 0;
    if (which == 1) {
        e.score = __ldcg(&L.score[x]);
        e.ki = ark_term_rank(p.view.flags, p.term_rank, e.node);
        e.value = ft_packed_get(p.values, p.value_bits,
                                e.ki < p.n_keys ? e.ki : 0);
    }
    return e;
}

/* ark_store_entry writes output i of list which (the step's next beams or
 * completed keys) from an entry whose key's tail is k2. */
__device__ __forceinline__ void ark_store_entry(const ft_ark_params &p,
                                                int which, uint32_t i,
                                                const ark_entry &e, uint64_t k2)
{
    if (which == 0) {
        p.nx_node[i] = e.node;
        p.nx_sigma[i] = e.sigma;
        p.nx_len[i] = e.len;
        p.nx_parent[i] = ft_ar_tail_rank(k2);
        p.nx_entry[i] = ft_ar_tail_entry(k2);
        p.nx_token[i] = e.token;
    } else {
        p.h_parent[i] = ft_ar_tail_rank(k2);
        p.h_entry[i] = ft_ar_tail_entry(k2);
        p.h_token[i] = e.token;
        p.h_len[i] = e.len;
        p.h_key_index[i] = e.ki;
        p.h_value[i] = e.value;
        p.h_score[i] = e.score;
        p.h_sigma[i] = e.sigma;
    }
}

/* ark_write_one writes output i of list which from entry x of the list. */
__device__ __forceinline__ void ark_write_one(const ft_ark_params &p,
                                              int which, uint32_t i,
                                              uint32_t x, uint64_t k2)
{
    ark_store_entry(p, which, i, ark_load_entry(p, which, x), k2);
}

/* ark_sort_write sorts nsel <= FT_ARK_SORT_MAX keys in shared memory
 * (bitonic, on the 128-bit key; si is each key's place in the list) and
 * writes the first take as the step's output for list which.  All
 * ARK_SEL_THREADS threads of the CTA. */
__device__ void ark_sort_write(const ft_ark_params &p, int which,
                               uint64_t *s1, uint64_t *s2, uint32_t *si,
                               uint32_t nsel, uint32_t take)
{
    uint32_t tid = threadIdx.x;
    uint32_t P = 1;
    while (P < nsel)
        P <<= 1;
    for (uint32_t i = nsel + tid; i < P; i += ARK_SEL_THREADS) {
        s1[i] = UINT64_MAX;
        s2[i] = UINT64_MAX;
        si[i] = UINT32_MAX;
    }
    __syncthreads();
    for (uint32_t k = 2; k <= P; k <<= 1) {
        for (uint32_t j = k >> 1; j > 0; j >>= 1) {
            for (uint32_t i = tid; i < P; i += ARK_SEL_THREADS) {
                uint32_t ixj = i ^ j;
                if (ixj <= i)
                    continue;
                bool up = (i & k) == 0;
                bool gt = ark_gt(s1[i], s2[i], s1[ixj], s2[ixj]);
                if (up == gt) {
                    uint64_t a = s1[i], b = s2[i];
                    uint32_t c = si[i];
                    s1[i] = s1[ixj];
                    s2[i] = s2[ixj];
                    si[i] = si[ixj];
                    s1[ixj] = a;
                    s2[ixj] = b;
                    si[ixj] = c;
                }
            }
            __syncthreads();
        }
    }
    for (uint32_t i = tid; i < take; i += ARK_SEL_THREADS)
        ark_write_one(p, which, i, si[i], s2[i]);
    if (tid == 0)
        *(which ? p.h_count : p.nx_count) = take;
}

/* ark_grid_sync: the list's ctas CTAs meet (the b-th barrier of the step;
 * the arrivals counter is cleared before each step).  All the grid's CTAs
 * are resident (ft_ark_init sizes it), so the wait ends. */
__device__ __forceinline__ void ark_grid_sync(uint32_t *bar, uint32_t b,
                                              uint32_t ctas)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(bar, 1u);
        uint32_t target = b * ctas;
        while (*(volatile uint32_t *)bar < target)
            __nanosleep(32);
        __threadfence();
    }
    __syncthreads();
}

/* ark_select: CTAs [0, sel_ctas) select the next beams, [sel_ctas,
 * 2 sel_ctas) the completed keys.  A list of at most ARK_DIRECT entries
 * is sorted whole by its first CTA.  A longer one is cut by an exact radix
 * select of its take-th key, 8 bits a pass from the key's top: each CTA
 * histograms its share of the list (the entries that match the digits
 * decided so far) into the pass's global histogram; after a barrier every
 * CTA reads the whole histogram and decides the same digit.  Once the keys
 * below the decided prefix and the boundary digit's bucket fit
 * ark_limit(take), the CTAs compact those survivors into surv, meet once
 * more, and the first CTA sorts them and writes the outputs.  Keys are
 * unique, so the survivors, and the output, do not depend on the order of
 * the list or of the atomics. */
__device__ __forceinline__ uint32_t ark_limit(uint32_t take)
{
    return take <= ARK_DIRECT ? ARK_DIRECT : FT_ARK_SORT_MAX;
}

/* ark_radix_cut runs the grid selection's radix passes and compaction
 * over list which (n entries, take wanted, n > take) on the calling CTA,
 * number cta of the ctas that share the list (all of their threads call
 * it), and returns the survivors' count (in the list's ft_ark_surv, at
 * most ark_limit(take)) once every CTA of the list has written its own;
 * nbar0: the list's grid barriers already met this step. */
__device__ uint32_t ark_radix_cut(const ft_ark_params &p, int which,
                                  uint64_t n, uint32_t take, uint32_t cta,
                                  uint32_t ctas, uint32_t nbar0 = 0)
{
    __shared__ uint32_t hist[256];
    __shared__ uint32_t sh_need, sh_stop;
    __shared__ uint64_t pre1, pre2, msk1, msk2;
    const ft_ark_list &L = p.lists[which];
    uint32_t tid = threadIdx.x;
    ft_ark_sel_head *H = &p.heads[which];
    uint32_t limit = ark_limit(take);
    if (tid == 0) {
        pre1 = pre2 = msk1 = msk2 = 0;
        sh_need = take;
        sh_stop = 0;
    }
    __syncthreads();
    /* a beam's first key word is a 32-bit sigma key: its top 4 bytes are 0 */
    uint32_t first = which == 0 ? 4 : 0, nbar = nbar0;
    uint64_t stride = (uint64_t)ctas * blockDim.x;
    uint64_t start = (uint64_t)cta * blockDim.x + tid;
    const unsigned long long *K1 = (const unsigned long long *)L.k1;
    const unsigned long long *K2 = (const unsigned long long *)L.k2;
    for (uint32_t pass = first; pass < FT_ARK_PASSES; pass++) {
        int sh = 56 - 8 * (pass & 7);
        if (tid < 256)
            hist[tid] = 0;
        __syncthreads();
        uint64_t m1 = msk1, m2 = msk2, q1 = pre1, q2 = pre2;
        for (uint64_t i = start; i < n; i += stride) {
            uint64_t a = __ldcg(&K1[i]), b = __ldcg(&K2[i]);
            if ((a & m1) != q1 || (b & m2) != q2)
                continue;
            uint32_t dg = (uint32_t)(((pass < 8) ? a : b) >> sh) & 255u;
            atomicAdd(&hist[dg], 1u);
        }
        __syncthreads();
        if (tid < 256 && hist[tid])
            atomicAdd(&H->hist[pass][tid], hist[tid]);
        ark_grid_sync(&H->bar, ++nbar, ctas);
        if (tid < 256)
            hist[tid] = __ldcg((const unsigned int *)&H->hist[pass][tid]);
        __syncthreads();
        if (tid < 32) {
            /* warp 0: lane l holds bins 8l .. 8l + 7 */
            uint32_t c[8], tot = 0;
            for (int k = 0; k < 8; k++) {
                c[k] = hist[tid * 8 + k];
                tot += c[k];
            }
            uint32_t inc = ark_warp_incl(tot, tid);
            uint32_t need = sh_need;
            uint32_t ex = inc - tot;
            /* the first lane whose inclusive sum reaches need */
            uint32_t hit = __ballot_sync(0xffffffffu, inc >= need);
            uint32_t lane = hit ? (uint32_t)(__ffs(hit) - 1) : 31u;
            if (tid == lane) {
                uint32_t cum = ex, d = tid * 8, k = 0;
                for (; k < 7; k++) {
                    if (cum + c[k] >= need)
                        break;
                    cum += c[k];
                }
                d += k;
                uint32_t nneed = need - cum;
                if (pass < 8) {
                    pre1 |= (uint64_t)d << sh;
                    msk1 |= 255ull << sh;
                } else {
                    pre2 |= (uint64_t)d << sh;
                    msk2 |= 255ull << sh;
                }
                sh_need = nneed;
                if (take - nneed + c[k] <= limit)
                    sh_stop = 1;
            }
        }
        __syncthreads();
        if (sh_stop)
            break;
    }
    /* Every key whose decided bits are at most the prefix: the first
     * take - need keys and the bucket that holds the take-th (after every
     * pass, exactly the first take). */
    uint64_t t1 = pre1, t2 = pre2, m1 = msk1, m2 = msk2;
    for (uint64_t i = start; i < n; i += stride) {
        uint64_t a = __ldcg(&K1[i]), b = __ldcg(&K2[i]);
        if (!ark_gt(a & m1, b & m2, t1, t2))
            ark_surv_put(p, which, a, b, (uint32_t)i);
    }
    ark_grid_sync(&H->bar, ++nbar, ctas);
    uint32_t nsel = __ldcg((const unsigned int *)&H->nsurv);
    return nsel < FT_ARK_SORT_MAX ? nsel : FT_ARK_SORT_MAX;
}

__global__ void __launch_bounds__(ARK_SEL_THREADS)
ark_select(ft_ark_params p)
{
    extern __shared__ uint64_t sm[];
    uint64_t *s1 = sm, *s2 = sm + FT_ARK_SORT_MAX;
    uint32_t *si = (uint32_t *)(sm + 2 * FT_ARK_SORT_MAX);
    uint32_t ctas = p.sel_ctas;
    int which = blockIdx.x / ctas;
    uint32_t cta = blockIdx.x % ctas;
    if (which > 1 || (which == 1 && p.h_count == NULL))
        return;
    const ft_ark_list &L = p.lists[which];
    uint32_t tid = threadIdx.x;
    uint32_t want = which ? p.results : p.beam;
    uint64_t n = p.counts[which];
    if (n > L.cap)
        n = L.cap;
    uint32_t take = n < want ? (uint32_t)n : want;
    if (n <= ARK_DIRECT || take == 0) {
        if (cta != 0)
            return;
        if (take == 0)
            n = 0;
        for (uint32_t i = tid; i < n; i += ARK_SEL_THREADS) {
            s1[i] = L.k1[i];
            s2[i] = L.k2[i];
            si[i] = i;
        }
        ark_sort_write(p, which, s1, s2, si, (uint32_t)n, take);
        return;
    }
    uint32_t nsel = ark_radix_cut(p, which, n, take, cta, ctas);
    if (cta != 0)
        return;
    ft_ark_surv *S = &p.surv[which];
    for (uint32_t i = tid; i < nsel; i += ARK_SEL_THREADS) {
        s1[i] = __ldcg((const unsigned long long *)&S->k1[i]);
        s2[i] = __ldcg((const unsigned long long *)&S->k2[i]);
        si[i] = __ldcg((const unsigned int *)&S->idx[i]);
    }
    ark_sort_write(p, which, s1, s2, si, nsel, take);
}

/* ---- The one-launch step (ft_ark_step) ----
 *
 * A grid of ft_ark_init's fused_ctas CTAs, all resident at once, of 512
 * or ARK_FUSED_THREADS threads (ark_fused_nt):
 *  1. every CTA finds every live beam's child range and work (one thread
 *     per beam: the same dependent loads as ark_ranges, answered by L2
 *     after the first CTA; no barrier before the expansion) and scans the
 *     work counts into offsets in its shared memory;
 *  2. the grid expands the flattened work items as ark_flat does, into
 *     the two candidate lists;
 *  3. one grid barrier; then CTAs [0, G/2) select the next beams, [G/2, G)
 *     the completed keys: a list of at most ARK_FUSED_DIRECT entries (or
 *     the at most ARK_DIRECT survivors of ark_radix_cut's passes over a
 *     longer one) is staged in the shared memory of each CTA that owns some
 *     of its entries, and one warp per entry counts the keys before it (keys
 *     are unique: that count is its place in the sorted list); an entry
 *     placed below take writes output slot place.  No sort, no CTA-wide
 *     stages, and the completed keys' rank look-ups run one per warp in
 *     parallel;
 *  4. scratch is left ready for the next launch without a ticket on the
 *     way: the grid barrier's counter only grows; the list counts and
 *     the histogram cut's histograms are two each, taken in turn by the
 *     launches, and each launch clears the ones its predecessor used;
 *     only when the refinement, the keep pass or the radix passes ran
 *     does the last CTA to finish (a ticket) clear the heads.
 * The grid navigates with ft_ar_nav.cuh: a rank or select block's words
 * loaded at once, not one dependent load per word.
 * The outputs are those of the launches' path, bit for bit: the same
 * candidates, keys and first take in the same total order. */
#define ARK_FUSED_THREADS 1024
#define ARK_FUSED_DIRECT 2048u
/* ft_ark_init's default split thresholds (live beams) */
#define ARK_SPLIT_BEAMS 256u
#define ARK_MASK_SPLIT_BEAMS 0u

static_assert(FT_ARK_FUSED_MAX <= ARK_FUSED_THREADS,
              "one thread per beam in the largest instance");
static_assert(FT_ARK_FUSED_MAX <= ARK_DIRECT, "radix survivors fit the rank stage");

/* ark_ranges_smem: phase 1's ranges, offsets and child-driven flags, in
 * a multiple of 16 bytes */
__host__ __device__ constexpr size_t ark_ranges_smem(uint32_t cap)
{
    return ((size_t)cap * (sizeof(ft_child_range) + 4) + ((size_t)cap + 1) * 8 +
            15) / 16 * 16;
}

__host__ __device__ constexpr size_t ark_fused_smem(uint32_t cap)
{
    /* phase 1: the ranges; phase 3: staged keys */
    return ark_ranges_smem(cap) > (size_t)ARK_FUSED_DIRECT * 16
               ? ark_ranges_smem(cap)
               : (size_t)ARK_FUSED_DIRECT * 16;
}

/* ark_hold_in: whether the next beams held across the barrier (32 bytes
 * a thread of nt; ark_fused's hold) fit ark_fused_smem's space past the
 * ranges, which the staged keys take only after the held beams are read
 * (cap <= 371 at 512 threads) */
__host__ __device__ constexpr bool ark_hold_in(uint32_t cap, uint32_t nt)
{
    return ark_ranges_smem(cap) + (size_t)nt * 32 <= ark_fused_smem(cap);
}

/* ark_pre_smem: the one-launch step's shared memory for the histogram cut
 * (ark_fused with PRE, nt threads, cap beams), past ark_fused_smem's: the
 * bins, then the held next beams unless ark_hold_in */
__host__ __device__ constexpr size_t ark_pre_smem(bool pre, uint32_t nt,
                                                  uint32_t cap)
{
    return !pre ? 0
                : (size_t)FT_ARK_PRE_BINS * 4 +
                      (ark_hold_in(cap, nt) ? 0 : (size_t)nt * 32);
}

/* ark_rank_write: this CTA's share of a list's n keys (k1, k2; place in
 * the list idx[i], or i without idx) counts its place among them and
 * writes the first take to the outputs (phase 3 above). */
__device__ void ark_rank_write(const ft_ark_params &p, int which,
                               const uint64_t *k1, const uint64_t *k2,
                               const uint32_t *idx, uint32_t n, uint32_t take,
                               uint32_t cta, uint32_t ctas, uint64_t *sm)
{
    uint32_t tid = threadIdx.x, lane = tid & 31u, wid = tid >> 5;
    uint32_t warps = blockDim.x >> 5;
    if (cta == 0 && tid == 0)
        *(which ? p.h_count : p.nx_count) = take;
    if ((uint64_t)cta * warps >= n || take == 0)
        return;
    uint64_t *s1 = sm, *s2 = sm + ARK_FUSED_DIRECT;
    __syncthreads(); /* shared memory: phase 1's ranges are done with */
    for (uint32_t i = tid; i < n; i += blockDim.x) {
        s1[i] = __ldcg((const unsigned long long *)&k1[i]);
        s2[i] = __ldcg((const unsigned long long *)&k2[i]);
    }
    __syncthreads();
    for (uint32_t e = cta * warps + wid; e < n; e += ctas * warps) {
        /* lane 0 reads the entry (and a key's index and value) while the
         * warp counts: the loads overlap the count */
        ark_entry ent;
        if (lane == 0)
            ent = ark_load_entry(p, which,
                                 idx ? __ldcg((const unsigned int *)&idx[e]) : e);
        uint64_t a = s1[e], b = s2[e];
        uint32_t c = 0;
        for (uint32_t i = lane; i < n; i += 32)
            c += ft_ar_before(s1[i], s2[i], a, b) ? 1u : 0u;
        c = __reduce_add_sync(0xffffffffu, c);
        if (lane == 0 && c < take)
            ark_store_entry(p, which, c, ent, b);
    }
}

/* ark_beam_range: beam r's child range, whether it is child-driven and
 * its work items.  Mode 0: the step's work (ark_ranges mode 0); mode 1:
 * the mask's (children, or the vocabulary's entries). */
__device__ __forceinline__ void ark_beam_range(const ft_ark_params &p,
                                               int mode, uint32_t r,
                                               ft_child_range *cr,
                                               uint32_t *cd,
                                               unsigned long long *work)
{
    uint64_t node = p.cur_node[r];
    cr->first = cr->deg = cr->hstart = cr->hbase = 0;
    *cd = 0;
    *work = 0;
    if (node >= p.view.n_nodes)
        return;
    *cr = ark_range(p, node);
    if (mode == 0) {
        if (cr->deg > 0) {
            *cd = ark_child_driven(p, cr);
            *work = *cd ? cr->deg : p.width;
        }
    } else if (p.vocab == NULL) {
        *cd = 1;
        *work = cr->deg;
    } else if (cr->deg > 0) {
        *work = p.width;
    }
}

/* ark_ld_acquire: a load of a 64-bit counter with acquire semantics at
 * the GPU's scope (what the counter's releases published is visible
 * after it); ark_wait waits until the counter reaches target, thread 0 by
 * acquire loads, then the CTA's barrier (all of the launch's CTAs are
 * resident: ft_ark_init). */
__device__ __forceinline__ unsigned long long
ark_ld_acquire(const unsigned long long *a)
{
    unsigned long long v;
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];"
                 : "=l"(v)
                 : "l"(a)
                 : "memory");
    return v;
}

__device__ __forceinline__ void ark_wait(unsigned long long *bar,
                                         unsigned long long target)
{
    if (threadIdx.x == 0) {
        while (ark_ld_acquire(bar) < target)
            __nanosleep(20);
    }
    __syncthreads();
}

/* ark_arrive_mono counts the calling CTA in at a 64-bit counter that is
 * never cleared, its writes before it (thread 0's add is a release at the
 * GPU's scope, after the CTA's barrier, which orders every thread's
 * writes before it, as cooperative groups' grid barrier does), and
 * returns (in thread 0) the count that marks every CTA of this launch in,
 * for ark_wait: each launch that uses the counter adds one per CTA, so it
 * is a multiple of the grid when a launch begins, and it does not wrap.
 * No last CTA has to clear it. */
__device__ __forceinline__ unsigned long long
ark_arrive_mono(unsigned long long *bar)
{
    unsigned long long t = 0;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned long long old;
        asm volatile("atom.add.release.gpu.global.u64 %0, [%1], %2;"
                     : "=l"(old)
                     : "l"(bar), "l"(1ull)
                     : "memory");
        t = old - old % gridDim.x + gridDim.x;
    }
    return t;
}

/* ark_fused_barrier: a grid barrier of the one-launch kernels, at the
 * 64-bit counter of counts' words 2-3, which is never cleared (as
 * ark_arrive_mono's: every launch of a session has the same grid) */
__device__ __forceinline__ void ark_fused_barrier(uint32_t *counts)
{
    unsigned long long *bar = (unsigned long long *)&counts[2];
    ark_wait(bar, ark_arrive_mono(bar));
}

/* ark_fused_ranges: every live beam's child range and work items in this
 * CTA's shared memory, scanned into offsets; returns the total.  With
 * split false every CTA finds them all itself (thread r: beam r; the same
 * loads in every CTA, answered by L2 after the first: no barrier); with
 * split true the grid shares them out (beam r to CTA r % G) through the
 * per-beam scratch and one grid barrier (the launch's first), and every
 * CTA reads them back. */
template <uint32_t NT, typename TS>
__device__ uint64_t ark_fused_ranges(const ft_ark_params &p, int mode,
                                     ft_child_range *rng,
                                     unsigned long long *off, uint32_t *cdv,
                                     uint32_t m, bool split, TS &ts)
{
    typedef cub::BlockScan<unsigned long long, NT> Scan;
    uint32_t tid = threadIdx.x;
    unsigned long long work = 0;
    ft_child_range cr;
    uint32_t cd;
    if (!split) {
        if (tid < m) {
            ark_beam_range(p, mode, tid, &cr, &cd, &work);
            rng[tid] = cr;
            cdv[tid] = cd;
        }
    } else {
        for (uint32_t r = blockIdx.x + tid * gridDim.x; r < m;
             r += gridDim.x * blockDim.x) {
            unsigned long long w;
            ark_beam_range(p, mode, r, &cr, &cd, &w);
            p.b_rng[r] = cr;
            p.b_work[r] = (uint32_t)w;
            p.b_cd[r] = cd;
        }
        ark_fused_barrier(p.counts);
        if (tid < m) {
            const unsigned long long *q =
                (const unsigned long long *)&p.b_rng[tid];
            cr.first = __ldcg(q);
            cr.deg = __ldcg(q + 1);
            cr.hstart = __ldcg(q + 2);
            cr.hbase = __ldcg(q + 3);
            rng[tid] = cr;
            cdv[tid] = __ldcg((const unsigned int *)&p.b_cd[tid]);
            work = __ldcg((const unsigned int *)&p.b_work[tid]);
        }
    }
    unsigned long long ex, agg;
    Scan(ts).ExclusiveSum(work, ex, agg);
    if (tid < m)
        off[tid] = ex;
    if (tid == 0)
        off[m] = agg;
    __syncthreads();
    return off[m];
}

/* ark_fused_lc: the one-launch step's two list counts of a launch, by
 * the parity of its count of launches (gen): counts' words 0-1 or 14-15.
 * Each launch clears the other pair (its predecessor's, which has
 * completed) before its barrier, so that none has to clear its own after
 * every CTA has read it. */
__device__ __forceinline__ uint32_t *ark_fused_lc(uint32_t *counts,
                                                  uint32_t gen)
{
    return counts + ((gen & 1u) ? 14 : 0);
}

/* ark_fused_last: true in the last CTA to finish (its exit ticket). */
__device__ __forceinline__ bool ark_fused_last(uint32_t *ticket)
{
    __shared__ uint32_t sh_last;
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        sh_last = atomicAdd(ticket, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (sh_last)
        __threadfence();
    return sh_last != 0;
}

/* ---- The histogram cut (ark_fused, the next beams) ----
 *
 * A step with more work items than the rank stage takes (the early steps:
 * every beam with hundreds of children, 10^4-10^5 candidates) would cut
 * its next beams by the grid's radix passes over the 128-bit key, a grid
 * barrier each.  Instead the expansion also counts each next beam into a
 * histogram of 4,096 bins: the top 12 bits of its distance key (ark_dkey:
 * the order key of sigma - pmax, pmax ark_pre_anchor's bound on the next
 * beams' sigma, the same in every CTA), in each CTA's shared memory, added
 * into an ft_ark_surv's pre (surv[0]'s and surv[1]'s in turn, launch by
 * launch: each launch clears the other) before the step's barrier, with
 * each 64 bins' sum into 64 coarse bins past them.  After it, one warp of
 * each CTA of the list finds the bin that holds the take-th key
 * (ark_pre_cut): the coarse bins first, then the 64 bins of the one that
 * holds it, 512 bytes from the L2 where reading the whole histogram took
 * 16 KB a CTA (docs/BENCHMARKS.md "The coarse bins").  The distance key
 * is monotone in sigma, the key's first word, so a next beam in a later
 * bin has take keys before it and every one of the first take is in that
 * bin or an earlier one.  While those are more than ARK_FUSED_DIRECT,
 * ark_pre_refine decides the distance key's next digit as the radix
 * passes do (a barrier each; at most three).  Then the CTAs keep the keys
 * up to the prefix (ark_pre_keep: their keys and places), meet, and rank
 * them as the direct case does: two grid barriers in all when the 12
 * bits suffice.
 * When the grid has a thread for every item and the items are the beams'
 * children (hold, ark_fused), the expansion writes no next beam: each
 * thread keeps its own in shared memory (ark_hold_in), every CTA reads
 * the cut after the barrier, and only the beams within it are written,
 * to the list's first places, which the rank stage reads as it reads a
 * short list: no pass over the whole list and no compaction of the
 * survivors' keys and places; the next beams' CTAs wait for a count of
 * the survivors written, not for every CTA.
 * Ties in the distance key past its last digit, or a histogram that does
 * not add up to the list, leave the full key's radix passes.
 * It is ark_fused's PRE instance, the default (ft_ark_tuning's nopre
 * launches the other, the radix passes alone, for measurements); on a
 * step with few work items it costs nothing: the expansion's slots are
 * taken by one atomic a warp, as without it.  Bins are
 * 1/8 of a binade of the distance, so they are finest next to the anchor,
 * where the best keys lie. */
static_assert(FT_ARK_PRE_BINS == 4096u, "ark_pre_bin: 12 bits");

/* ark_pre_anchor: the histogram's anchor, the same in every CTA: the
 * largest s - lse over the live beams (s: thread r's beam's sigma, read
 * by the caller; lse 0 without a normalisation), a bound on every next
 * beam's sigma when the rows are log-probabilities, so that the best next
 * beams lie just below it; 0 when none is finite.  Any finite anchor
 * gives the same next beams.  One barrier (before it the caller's
 * writes to shared memory, after it the anchor): each warp's largest
 * order key (ft_f32_order; 0 for none) in shared memory, then every
 * thread takes the largest of those. */
template <uint32_t NT>
__device__ float ark_pre_anchor(const ft_ark_params &p, uint32_t m, bool full,
                                float s)
{
    __shared__ uint32_t sh_wmax[NT / 32];
    uint32_t tid = threadIdx.x, key = 0;
    if (tid < m) {
        float a = full ? (float)((double)s - p.b_lse[tid]) : s;
        if (isfinite(a))
            key = ft_f32_order(a);
    }
    key = __reduce_max_sync(0xffffffffu, key);
    if ((tid & 31u) == 0)
        sh_wmax[tid >> 5] = key;
    __syncthreads();
    key = 0;
    for (uint32_t w = 0; w < NT / 32; w++)
        key = max(key, sh_wmax[w]);
    return key ? ft_f32_of_order(key) : 0.0f;
}

/* ark_dcut is the histogram cut's state: the decided bits of the
 * distance key (ark_dkey; pre under msk), the keys before that prefix and
 * in it, and how many of the first take are still to place in it. */
struct ark_dcut {
    uint32_t pre, msk, before, bucket, need, nbar;
};

/* ark_pre_cut: the 12-bit bin of the take-th of the histogram's n keys
 * (the CTA's threads, all of them); bucket stays above ARK_FUSED_DIRECT
 * and before 0 when the histogram does not hold n keys.  With n
 * UINT32_MAX the histogram's total (at most cap) is n, and take at most
 * n.  Returns the histogram's total.  Warp 0 reads the coarse bins (gpre
 * past its FT_ARK_PRE_BINS: the sums of 64 bins each, two a lane), finds
 * the one of the take-th key, then reads that one's 64 bins: 512 bytes
 * a CTA from the L2 rather than the whole 16 KB histogram. */
template <uint32_t NT>
__device__ uint32_t ark_pre_cut(const uint32_t *gpre, uint32_t take,
                                uint32_t n, ark_dcut *dc, uint32_t cap = 0)
{
    static_assert(FT_ARK_PRE_COARSE == 64u &&
                      FT_ARK_PRE_BINS == 64u * FT_ARK_PRE_COARSE,
                  "two coarse bins a lane, two bins a lane in a coarse bin");
    __shared__ ark_dcut sh;
    __shared__ uint32_t sh_tot;
    const unsigned full = 0xffffffffu;
    uint32_t lane = threadIdx.x;
    if (lane < 32) {
        uint2 cv = __ldcg((const uint2 *)(gpre + FT_ARK_PRE_BINS) + lane);
        /* ark_warp_incl's scan, written out: its 64-bit instance
         * compiles to another instruction order (PTX compared), and this
         * form is the one timed and tested on the GPU */
        unsigned long long a = (unsigned long long)cv.x + cv.y, inc = a;
        for (uint32_t d = 1; d < 32; d <<= 1) {
            unsigned long long t = __shfl_up_sync(full, inc, d);
            if (lane >= d)
                inc += t;
        }
        unsigned long long agg = __shfl_sync(full, inc, 31);
        if (n == UINT32_MAX) {
            n = agg < cap ? (uint32_t)agg : cap;
            take = min(take, n);
        }
        ark_dcut c = {0, 0, 0, UINT32_MAX, 0, 0}; /* bucket: no cut */
        uint32_t lw = __ballot_sync(full, inc >= take);
        if (agg == n && take > 0 && lw != 0) {
            /* the coarse bin: lane L's first or second */
            uint32_t L = (uint32_t)__ffs(lw) - 1;
            unsigned long long ex = __shfl_sync(full, inc - a, L);
            uint32_t x0 = __shfl_sync(full, cv.x, L);
            uint32_t cb = 2 * L + (ex + x0 >= take ? 0u : 1u);
            uint32_t before = (uint32_t)ex + (cb & 1u ? x0 : 0u);
            uint32_t need = take - before; /* 1 .. its count */
            uint2 fv = __ldcg((const uint2 *)(gpre + 64u * cb) + lane);
            uint32_t fa = fv.x + fv.y, finc = ark_warp_incl(fa, lane);
            uint32_t fw = __ballot_sync(full, finc >= need);
            if (fw != 0) { /* else the bins do not add up: no cut */
                uint32_t F = (uint32_t)__ffs(fw) - 1;
                uint32_t fex = __shfl_sync(full, finc - fa, F);
                uint32_t f0 = __shfl_sync(full, fv.x, F);
                uint32_t f1 = __shfl_sync(full, fv.y, F);
                bool first = fex + f0 >= need;
                uint32_t k = 64u * cb + 2 * F + (first ? 0u : 1u);
                c.pre = k << 20;
                c.msk = 0xfff00000u;
                c.before = before + fex + (first ? 0u : f0);
                c.bucket = first ? f0 : f1;
                c.need = take - c.before;
            }
        }
        if (c.bucket == UINT32_MAX) { /* no cut: the whole list */
            c.bucket = n;
            c.need = take;
        }
        if (lane == 0) {
            sh = c;
            sh_tot = (uint32_t)min(agg, (unsigned long long)UINT32_MAX);
        }
    }
    __syncthreads();
    *dc = sh;
    return sh_tot;
}

/* ark_pre_refine: while the keys up to the prefix are more than
 * ARK_FUSED_DIRECT, one more digit of the distance key (bits 19-12, 11-4,
 * 3-0), as ark_radix_cut decides its digits: each CTA of the list counts
 * its share of the prefix's keys into the list's histogram row, the CTAs
 * meet, each reads the row and takes the digit of the take-th.  The
 * fallback to the full key's radix passes when ties leave too many. */
__device__ void ark_pre_refine(const ft_ark_params &p, uint32_t n, float pmax,
                               uint32_t cta, uint32_t ctas, ark_dcut *dc)
{
    __shared__ uint32_t hist[256];
    __shared__ ark_dcut sh;
    const ft_ark_list &L = p.lists[0];
    ft_ark_sel_head *H = &p.heads[0];
    uint32_t tid = threadIdx.x;
    /* rows 0-2 of the list's histogram: the radix passes of the next
     * beams' keys start at row 4 (their first word's top half is 0) */
    for (uint32_t pass = 0; pass < 3 && dc->msk != 0 &&
                            dc->before + dc->bucket > ARK_FUSED_DIRECT;
         pass++) {
        uint32_t sh_ = pass == 0 ? 12 : pass == 1 ? 4 : 0;
        uint32_t dm = pass == 2 ? 15u : 255u;
        if (tid < 256)
            hist[tid] = 0;
        __syncthreads();
        for (uint32_t i = cta * blockDim.x + tid; i < n; i += ctas * blockDim.x) {
            uint32_t k = ark_dkey(__ldcg(&L.sigma[i]), pmax);
            if ((k & dc->msk) == dc->pre)
                atomicAdd(&hist[(k >> sh_) & dm], 1u);
        }
        __syncthreads();
        if (tid < 256 && hist[tid])
            atomicAdd(&H->hist[pass][tid], hist[tid]);
        ark_grid_sync(&H->bar, ++dc->nbar, ctas);
        if (tid < 256)
            hist[tid] = __ldcg((const unsigned int *)&H->hist[pass][tid]);
        __syncthreads();
        if (tid == 0) {
            uint32_t cum = 0, d = 0;
            for (; d < dm; d++) {
                if (cum + hist[d] >= dc->need)
                    break;
                cum += hist[d];
            }
            sh = *dc;
            sh.pre |= d << sh_;
            sh.msk |= dm << sh_;
            sh.before += cum;
            sh.need -= cum;
            sh.bucket = hist[d];
        }
        __syncthreads();
        *dc = sh;
    }
}

/* ark_pre_keep: this CTA's share of the next beams whose distance key is
 * at most the prefix into the list's survivors (key, place), then the
 * list's CTAs meet. */
__device__ void ark_pre_keep(const ft_ark_params &p, uint32_t n, float pmax,
                             uint32_t cta, uint32_t ctas, ark_dcut *dc)
{
    const ft_ark_list &L = p.lists[0];
    for (uint32_t i = cta * blockDim.x + threadIdx.x; i < n;
         i += ctas * blockDim.x) {
        uint32_t k = ark_dkey(__ldcg(&L.sigma[i]), pmax);
        if ((k & dc->msk) <= dc->pre)
            ark_surv_put(p, 0, __ldcg((const unsigned long long *)&L.k1[i]),
                         __ldcg((const unsigned long long *)&L.k2[i]), i);
    }
    ark_grid_sync(&p.heads[0].bar, ++dc->nbar, ctas);
}

template <uint32_t NT, bool PRE>
__global__ void __launch_bounds__(NT, 1) ark_fused(ft_ark_params p)
{
    typedef cub::BlockScan<unsigned long long, NT> Scan;
    __shared__ typename Scan::TempStorage ts;
    extern __shared__ uint64_t fsm[];
    /* the kernel ahead: this step's whole-row normalisation (ark_fl_kernel,
     * launched plainly: the step before it has completed) when the rows
     * are normalised, so the child ranges, which read only the beams and
     * the trie, are found before the wait (the lse after it); else any
     * kernel, so the wait comes first */
    const bool early = p.fused_pdl && p.norm == FT_ARR_NORM_FULL;
    if (!early)
        ark_pdl_wait();
    ark_pdl_trigger();
    ARK_PM_DECL
    uint32_t tid = threadIdx.x, G = gridDim.x, cap = p.cap_beam;
    ft_child_range *rng = (ft_child_range *)fsm;
    unsigned long long *off = (unsigned long long *)(rng + cap);
    uint32_t *cdv = (uint32_t *)(off + cap + 1);
    uint32_t m = min(*p.cur_count, cap);
    /* the histogram's bins, in shared memory past the ranges' */
    uint32_t *ph = (uint32_t *)((char *)fsm + ark_fused_smem(cap));

    /* 1. every beam's child range and work, in this CTA (and the beam's
     * sigma, loaded with them for the anchor below; and the held next
     * beams' count of survivors written before this launch, which
     * 3. below waits past and which CTA 0 moves on only after the first
     * barrier: every CTA has read it by then) */
    float sig0 = tid < m ? p.cur_sigma[tid] : 0.0f;
    unsigned long long *hwrit = (unsigned long long *)&p.counts[8];
    unsigned long long *hbase = (unsigned long long *)&p.counts[10];
    unsigned long long wbase = tid == 0 ? __ldcg(hbase) : 0;
    /* the list counts and the histogram of this launch: one of two each,
     * by the count of the launches (counts' word 12, which CTA 0 moves on
     * after the first barrier); this launch clears the other, its
     * predecessor's, which has completed, so that none has to clear its
     * own (the kernel ahead of an early launch has started only after
     * the step before completed) */
    __shared__ uint32_t sh_gen;
    if (tid == 0) {
        uint32_t g = __ldcg((const unsigned int *)&p.counts[12]);
        sh_gen = g;
        if (blockIdx.x == 0) {
            uint32_t *o = ark_fused_lc(p.counts, g ^ 1u);
            o[0] = 0;
            o[1] = 0;
        }
    }
    bool split = m > p.fused_split;
    uint64_t total = ark_fused_ranges<NT>(p, 0, rng, off, cdv, m, split, ts);
    if (early)
        ark_pdl_wait();
    uint32_t *gpre = p.surv[PRE ? sh_gen & 1u : 0].pre;
    uint32_t *lc = ark_fused_lc(p.counts, sh_gen);
    if (PRE) {
        uint32_t *o = p.surv[(sh_gen & 1u) ^ 1u].pre;
        for (uint32_t k = blockIdx.x * NT + tid;
             k < FT_ARK_PRE_BINS + FT_ARK_PRE_COARSE; k += G * NT)
            o[k] = 0;
    }
    /* more work items than the rank stage takes: the next beams'
     * histogram, cleared, from the anchor pmax (ark_pre_anchor).  When
     * every thread of the grid has at most one item (hold), a thread keeps
     * its next beam in shared memory across the barrier and writes it
     * only once the cut is known (3. below).  Only for rows whose items
     * are the beams' children (dense rows, no vocabulary): nearly every
     * item is a next beam, so the cut is taken anyway; on rows of entries
     * (sparse rows, a vocabulary) most items are no child, the next beams
     * few, and the list is ranked whole after the one barrier, which
     * holding them would cost a second */
    const bool full = p.norm == FT_ARR_NORM_FULL;
    ARK_PM(0);
    const bool pre_on = PRE && total > ARK_FUSED_DIRECT;
    const bool kids = p.form == FT_ARR_DENSE && p.vocab == NULL;
    const bool hold = pre_on && kids && total <= (uint64_t)G * NT;
    float pmax = 0.0f;
    if (pre_on) {
        for (uint32_t k = tid; k < FT_ARK_PRE_BINS; k += NT)
            ph[k] = 0;
        pmax = ark_pre_anchor<NT>(p, m, full, sig0);
    }
    /* the held next beams, a thread's in its column of shared memory past
     * the ranges or past the histogram (ark_pre_smem): whether it holds
     * one (UINT32_MAX: none), key tail, node, sigma, token and length */
    uint32_t *h_held = ark_hold_in(cap, NT)
                           ? (uint32_t *)((char *)fsm + ark_ranges_smem(cap))
                           : ph + FT_ARK_PRE_BINS;
    uint64_t *h_k2 = (uint64_t *)(h_held + NT), *h_u = h_k2 + NT;
    float *h_sig = (float *)(h_u + NT);
    uint32_t *h_tok = (uint32_t *)(h_sig + NT), *h_len = h_tok + NT;
    if (hold)
        h_held[tid] = UINT32_MAX;

    /* 2. the work items over the grid (ark_flat, mode 0; a whole-row
     * normalisation's lse written by ark_fl_kernel, launched before: a
     * row with none (-inf) or a NaN one gives rho +inf or NaN, which
     * ft_ar_takes refuses, so such a beam offers nothing, as on the CPU),
     * NT items a CTA at a time: with the histogram cut on the CTA's
     * entries of each list take their slots by one atomic (thousands of
     * warps' atomics on one counter queue at the L2 on the early steps;
     * held next beams take none), else by one atomic a warp
     * (ark_push_cand) */
    ARK_PM(1);
    __shared__ uint32_t sh_base[2];
    for (uint64_t b0 = (uint64_t)blockIdx.x * NT; b0 < total;
         b0 += (uint64_t)G * NT) {
        uint64_t t = b0 + tid;
        ark_cand c;
        c.beam = c.done = false;
        if (t < total) {
            uint32_t r = ark_item_beam(off, m, t);
            uint64_t i = t - off[r];
            ft_child_range cr = rng[r];
            float s = p.cur_sigma[r];
            uint32_t len = p.cur_len[r];
            double lse = full ? p.b_lse[r] : 0.0;
            if (cdv[r]) {
                /* the child's flags and label together, then its row entry */
                uint64_t u = cr.first + i;
                uint32_t fl = ft_node_flags(&p.view, u);
                uint32_t lab = ft_child_label(&p.view, &cr, u);
                if (lab < p.width) {
                    float x = ark_x(p, r, lab);
                    ark_eval(p, &cr, r, s, len, lab, lab,
                             full ? ft_ar_norm(x, lse) : x, u, fl, &c);
                }
            } else {
                uint32_t j = (uint32_t)i;
                float x = ark_x(p, r, j);
                ark_eval(p, &cr, r, s, len, j, ark_tok(p, r, j),
                         full ? ft_ar_norm(x, lse) : x, FT_NONE,
                         ARK_FL_UNKNOWN, &c);
            }
        }
        if (!pre_on) {
            ark_push_cand(p, c, lc);
            continue;
        }
        if (c.beam)
            atomicAdd(&ph[ark_pre_bin(c.sig, pmax)], 1u);
        /* a held next beam takes no place now: the histogram counts them
         * all, and the cut places those written (3. below); the round
         * scans only for completed keys then, where the CTA has any */
        if (c.beam && hold) {
            h_held[tid] = 0;
            h_k2[tid] = c.k2;
            h_u[tid] = c.u;
            h_sig[tid] = c.sig;
            h_tok[tid] = c.tok;
            h_len[tid] = c.len;
        }
        if (hold && !__syncthreads_or(c.done))
            continue;
        unsigned long long two = (c.beam && !hold ? 1ull : 0ull) |
                                 (c.done ? 1ull << 32 : 0ull),
                           ex, agg;
        __syncthreads(); /* ts and sh_base: the last round is done with them */
        Scan(ts).ExclusiveSum(two, ex, agg);
        if (tid == 0) {
            uint32_t a0 = (uint32_t)agg, a1 = (uint32_t)(agg >> 32);
            sh_base[0] = a0 ? atomicAdd(&lc[0], a0) : 0;
            sh_base[1] = a1 ? atomicAdd(&lc[1], a1) : 0;
        }
        __syncthreads();
        if (c.beam && !hold) {
            ark_put(p, 0, sh_base[0] + (uint32_t)ex, ft_sigma_key(c.sig), c.k2,
                    c.u, 0.0, c.sig, c.tok, c.len);
        }
        if (c.done)
            ark_put(p, 1, sh_base[1] + (uint32_t)(ex >> 32),
                    ft_score_key(c.score), c.k2, c.u, c.score, c.sig, c.tok,
                    c.len);
    }
    if (pre_on) {
        /* the CTA's bins into the histogram: a warp adds 32 bins in a row
         * (one line of the L2 an atomic), and each CTA starts at its own
         * place (rb: 160 bins, five lines, further on from CTA to CTA, so
         * 128 CTAs in a row start on 128 different lines; all starting at
         * bin 0, the CTAs' atomics met on the same few lines, where the
         * next beams of a dense row fall).  Then their sums into the
         * coarse bins (ark_pre_cut): a thread reads PER bins in a row
         * (thread t2, turned as rb), the GR threads of a coarse bin add
         * theirs in registers, its first adds (docs/BENCHMARKS.md "The
         * coarse bins") */
        constexpr uint32_t PER = FT_ARK_PRE_BINS / NT;
        constexpr uint32_t GR = FT_ARK_PRE_BINS / FT_ARK_PRE_COARSE / PER;
        static_assert(PER % 4 == 0 && GR >= 1 && GR <= 32 &&
                          (GR & (GR - 1)) == 0 && (NT & (NT - 1)) == 0 &&
                          NT >= 32,
                      "whole uint4s a thread, a coarse bin in a warp, rt a "
                      "whole number of warps");
        __syncthreads();
        const uint32_t rb = (blockIdx.x * 160u) & (FT_ARK_PRE_BINS - 1);
        const uint32_t rt = rb & (NT - 1); /* t2's turn (NT divides the bins) */
        for (uint32_t j = 0; j < PER; j++) {
            uint32_t k = (tid + NT * j + rb) & (FT_ARK_PRE_BINS - 1);
            uint32_t v = ph[k];
            if (v)
                atomicAdd(&gpre[k], v);
        }
        const uint32_t t2 = (tid + rt) & (NT - 1);
        const uint4 *q = (const uint4 *)(ph + t2 * PER);
        uint32_t sum = 0;
        for (uint32_t k = 0; k < PER / 4; k++) {
            uint4 v = q[k];
            sum += v.x + v.y + v.z + v.w;
        }
        for (uint32_t d = 1; d < GR; d <<= 1)
            sum += __shfl_xor_sync(0xffffffffu, sum, d);
        if (t2 % GR == 0 && sum)
            atomicAdd(&gpre[FT_ARK_PRE_BINS + t2 / GR], sum);
    }

    /* 3. one grid barrier (every CTA is resident: ft_ark_init), then the
     * two selections */
    ARK_PM(2);
    ark_fused_barrier(p.counts);
    uint32_t n0 = __ldcg((const unsigned int *)&lc[0]);
    uint32_t n1 = __ldcg((const unsigned int *)&lc[1]);
    if (blockIdx.x == 0 && tid == 0)
        p.counts[12] = sh_gen + 1u; /* every CTA has read it */
    ARK_PM(3);
    ark_dcut dc, hdc;
    dc.before = 0;
    dc.bucket = ARK_FUSED_DIRECT + 1;
    dc.nbar = 0;
    /* the held next beams: every CTA finds the cut (hdc); when it leaves
     * at most ARK_FUSED_DIRECT keys (the common case), the threads whose
     * beams are within it write them to the list's first places (their
     * count is the histogram's, exact) and each such warp then adds its
     * count to the survivors written (counts' words 8-9, never cleared),
     * which the next beams' CTAs wait on: no CTA without a survivor
     * takes part; else every held beam goes to its slot (the list as
     * without hold, for the refinement or the radix passes) and the grid
     * meets (the completed keys' CTAs only arrive) at the counter of
     * counts' words 6-7, which is never cleared either */
    bool compact = false;
    unsigned long long *hbar = (unsigned long long *)&p.counts[6];
    unsigned long long htarget = 0;
    if (hold) {
        /* the next beams' count is the histogram's total */
        n0 = ark_pre_cut<NT>(gpre, p.beam, UINT32_MAX, &hdc,
                             (uint32_t)min(p.lists[0].cap, (uint64_t)UINT32_MAX));
        compact = hdc.before + hdc.bucket <= ARK_FUSED_DIRECT;
        ARK_PM(4);
        float sig = h_sig[tid];
        bool mine = h_held[tid] != UINT32_MAX &&
                    (!compact || (ark_dkey(sig, pmax) & hdc.msk) <= hdc.pre);
        /* places: the survivors' first ones, or every held beam's (the
         * list whole) from counts' word 13, which the last CTA clears */
        if (mine)
            ark_put(p, 0,
                    ark_warp_slot(compact ? &p.heads[0].nsurv : &p.counts[13]),
                    ft_sigma_key(sig), h_k2[tid], h_u[tid], 0.0, sig,
                    h_tok[tid], h_len[tid]);
        if (compact) {
            uint32_t wm = __ballot_sync(0xffffffffu, mine);
            if (wm != 0) {
                /* the warp's entries (ordered before the first lane's
                 * release by the warp's barrier) before its count */
                __syncwarp();
                if ((tid & 31u) == (uint32_t)(__ffs(wm) - 1))
                    asm volatile("red.release.gpu.global.add.u64 [%0], %1;"
                                 ::"l"(hwrit),
                                 "l"((unsigned long long)__popc(wm))
                                 : "memory");
            }
        } else {
            htarget = ark_arrive_mono(hbar);
        }
    }
    uint32_t half = G / 2;
    int which = blockIdx.x < half ? 0 : 1;
    uint32_t cta = which ? blockIdx.x - half : blockIdx.x;
    uint32_t ctas = which ? G - half : half;
    if (hold && which == 0) {
        dc = hdc; /* the next beams' cut: their CTAs' */
        if (compact) {
            /* every survivor written (each took its place before): CTA 0
             * leaves the places' counter cleared for the next launch, so
             * that no last CTA has to (4. below), and moves the
             * survivors' base on */
            uint32_t cnt = hdc.before + hdc.bucket;
            ark_wait(hwrit, wbase + cnt);
            if (cta == 0 && tid == 0) {
                p.heads[0].nsurv = 0;
                *hbase = wbase + cnt;
            }
        } else {
            ark_wait(hbar, htarget);
        }
        ARK_PM(6);
    }
    if (which == 0 || p.h_count != NULL) {
        const ft_ark_list &L = p.lists[which];
        uint32_t want = which ? p.results : p.beam;
        uint64_t n = which ? n1 : n0;
        if (n > L.cap)
            n = L.cap;
        uint32_t take = n < want ? (uint32_t)n : want;
        if (which == 0 && pre_on && !compact && take > 0 &&
            n > ARK_FUSED_DIRECT) {
            if (!hold)
                ark_pre_cut<NT>(gpre, take, (uint32_t)n, &dc);
            ARK_PM(4);
            ark_pre_refine(p, (uint32_t)n, pmax, cta, ctas, &dc);
            ARK_PM(5);
            ARK_PC(9, dc.nbar);
        }
        uint32_t cnt = dc.before + dc.bucket;
        if (which == 0 && compact) {
            ARK_PC(10, 1);
            ark_rank_write(p, 0, L.k1, L.k2, NULL, cnt, take, cta, ctas, fsm);
        } else if (take == 0 || n <= ARK_FUSED_DIRECT) {
            ark_rank_write(p, which, L.k1, L.k2, NULL, (uint32_t)n, take, cta,
                           ctas, fsm);
        } else if (cnt <= ARK_FUSED_DIRECT) {
            ark_pre_keep(p, (uint32_t)n, pmax, cta, ctas, &dc);
            ARK_PM(6);
            ARK_PC(10, 1);
            ft_ark_surv *S = &p.surv[0];
            ark_rank_write(p, 0, S->k1, S->k2, S->idx, cnt, take, cta, ctas,
                           fsm);
        } else {
            __syncthreads();
            uint32_t nsel =
                ark_radix_cut(p, which, n, take, cta, ctas, dc.nbar);
            ARK_PM(6);
            ARK_PC(11, 1);
            ft_ark_surv *S = &p.surv[which];
            ark_rank_write(p, which, S->k1, S->k2, S->idx, nsel, take, cta,
                           ctas, fsm);
        }
        ARK_PM(7);
        ARK_PC(8, 1);
    }

    /* 4. after the refinement, the keep pass or the radix passes, the
     * last CTA out leaves the heads and the held beams' places cleared
     * (the held beams' compact cut left its places' counter cleared, 3.
     * above; the next launch clears the list counts and the histogram) */
    if ((n0 <= ARK_FUSED_DIRECT || compact) && n1 <= ARK_FUSED_DIRECT)
        return;
    if (!ark_fused_last(&p.counts[4]))
        return;
    uint4 z = make_uint4(0, 0, 0, 0);
    uint4 *h = (uint4 *)p.heads;
    for (uint32_t k = tid; k < 2 * sizeof(ft_ark_sel_head) / 16; k += NT)
        h[k] = z;
    if (tid == 0) {
        p.counts[4] = 0;
        p.counts[13] = 0;
    }
}

/* ark_mask_fused: the mask form in one launch of the same grid: every CTA
 * finds every beam's range (mode 1) and clears its share of the mask; one
 * grid barrier; then the EOS bits and the flattened items' bits (ark_flat
 * mode 1), by atomics. */
template <uint32_t NT>
__global__ void __launch_bounds__(NT, 1)
ark_mask_fused(ft_ark_params p, uint32_t eos, uint32_t *mask)
{
    typedef cub::BlockScan<unsigned long long, NT> Scan;
    __shared__ typename Scan::TempStorage ts;
    extern __shared__ uint64_t fsm[];
    ark_pdl_wait();
    ark_pdl_trigger();
    uint32_t tid = threadIdx.x, G = gridDim.x, cap = p.cap_beam;
    ft_child_range *rng = (ft_child_range *)fsm;
    unsigned long long *off = (unsigned long long *)(rng + cap);
    uint32_t *cdv = (uint32_t *)(off + cap + 1);
    uint32_t m = min(*p.cur_count, cap);
    uint32_t words = (p.width + 31) / 32;
    uint64_t nw = (uint64_t)cap * words;
    for (uint64_t k = (uint64_t)blockIdx.x * NT + tid; k < nw;
         k += (uint64_t)G * NT)
        mask[k] = 0;
    /* split: the ranges' barrier also orders the clearing before the bits */
    bool split = m > p.fused_mask_split;
    uint64_t total = ark_fused_ranges<NT>(p, 1, rng, off, cdv, m, split, ts);
    if (!split)
        ark_fused_barrier(p.counts);
    if (blockIdx.x == 0 && tid < m && eos < p.width) {
        uint64_t node = p.cur_node[tid];
        if (ft_arw_state(node) ||
            (node != 0 && node < p.view.n_nodes &&
             (ft_node_flags(&p.view, node) & FT_TERMINAL)))
            atomicOr(&mask[(uint64_t)tid * words + eos / 32], 1u << (eos % 32));
    }
    for (uint64_t t = (uint64_t)blockIdx.x * NT + tid; t < total;
         t += (uint64_t)G * NT) {
        uint32_t r = ark_item_beam(off, m, t);
        uint64_t i = t - off[r];
        ft_child_range cr = rng[r];
        if (cdv[r]) {
            uint32_t lab = ft_child_label(&p.view, &cr, cr.first + i);
            if (lab < p.width)
                atomicOr(&mask[(uint64_t)r * words + lab / 32], 1u << (lab % 32));
        } else {
            uint32_t j = (uint32_t)i;
            if (ft_find_child(&p.view, &cr, p.vocab[j]) != FT_NONE)
                atomicOr(&mask[(uint64_t)r * words + j / 32], 1u << (j % 32));
        }
    }
}

__global__ void ark_reset_kernel(uint32_t *count, uint64_t *node, float *sigma,
                                 uint32_t *len, uint32_t *parent,
                                 uint32_t *entry, uint32_t *token)
{
    *count = 1;
    *node = 0;
    *sigma = 0.0f;
    *len = 0;
    *parent = 0;
    *entry = 0;
    *token = 0;
}

struct ArkMin {
    __device__ __forceinline__ unsigned long long
    operator()(unsigned long long a, unsigned long long b) const
    {
        return a < b ? a : b;
    }
};

__global__ void __launch_bounds__(ARK_EXP_THREADS)
ark_topk_kernel(ft_ark_params p, uint32_t k, uint32_t *out_entry,
                uint32_t *out_token, float *out_logp)
{
    typedef cub::BlockReduce<unsigned long long, ARK_EXP_THREADS> Reduce;
    __shared__ typename Reduce::TempStorage tmp;
    __shared__ unsigned long long best_sh;
    uint32_t r = blockIdx.x;
    for (uint32_t i = threadIdx.x; i < k; i += ARK_EXP_THREADS) {
        out_entry[(uint64_t)r * k + i] = UINT32_MAX;
        out_token[(uint64_t)r * k + i] = UINT32_MAX;
        out_logp[(uint64_t)r * k + i] = -INFINITY;
    }
    uint32_t m = min(*p.cur_count, p.cap_beam);
    if (r >= m)
        return;
    uint64_t node = p.cur_node[r];
    if (node >= p.view.n_nodes)
        return;
    ft_child_range cr = ark_range(p, node);
    if (cr.deg == 0)
        return;
    double lse = 0.0;
    if (p.norm == FT_ARR_NORM_FULL) {
        /* ark_fl_kernel's, launched before: -inf when nothing can be
         * taken (NaN: nothing passes ft_ar_takes) */
        lse = p.b_lse[r];
        if (lse == -INFINITY)
            return;
    } else if (p.norm != FT_ARR_NORM_NONE && !ark_lse(p, r, &cr, &lse)) {
        return;
    }
    float s = p.cur_sigma[r];
    unsigned long long prev = 0;
    bool cd = ark_child_driven(p, &cr);
    uint64_t nit = cd ? cr.deg : p.width;
    for (uint32_t i = 0; i < k; i++) {
        unsigned long long best = UINT64_MAX;
        for (uint64_t it = threadIdx.x; it < nit; it += ARK_EXP_THREADS) {
            uint32_t j = cd ? ft_child_label(&p.view, &cr, cr.first + it)
                            : (uint32_t)it;
            if (j >= p.width)
                continue;
            float x = ark_x(p, r, j);
            float rho = p.norm ? ft_ar_norm(x, lse) : x;
            if (!ft_ar_takes(rho, p.theta_tok) || !(FT_FADD(s, rho) > p.theta_sent))
                continue;
            unsigned long long key = ft_ar_tail(0, rho, j);
            if ((i > 0 && key <= prev) || key >= best)
                continue;
            if (!cd && ft_find_child(&p.view, &cr, ark_tok(p, r, j)) == FT_NONE)
                continue;
            best = key;
        }
        unsigned long long b = Reduce(tmp).Reduce(best, ArkMin());
        if (threadIdx.x == 0)
            best_sh = b;
        __syncthreads();
        b = best_sh;
        __syncthreads();
        if (b == UINT64_MAX)
            return;
        if (threadIdx.x == 0) {
            uint32_t j = ft_ar_tail_entry(b);
            out_entry[(uint64_t)r * k + i] = j;
            out_token[(uint64_t)r * k + i] = ark_tok(p, r, j);
            out_logp[(uint64_t)r * k + i] = ft_sigma_of_key((uint32_t)(b >> 20));
        }
        prev = b;
    }
}

extern "C" size_t ft_ark_step_smem(void)
{
    return (size_t)FT_ARK_SORT_MAX * (8 + 8 + 4);
}

static ft_ark_tuning g_tuning = {1, 0, ARK_SPLIT_BEAMS, ARK_MASK_SPLIT_BEAMS,
                                  0, 0, 0, 0, 0};

extern "C" ft_ark_tuning ft_ark_tuning_get(void)
{
    return g_tuning;
}

extern "C" void ft_ark_tuning_set(const ft_ark_tuning *t)
{
    g_tuning = *t;
}

extern "C" int ft_ark_prof_take(uint64_t out[FT_ARK_PROF_N], int *khz)
{
    memset(out, 0, FT_ARK_PROF_N * sizeof *out);
    *khz = 0;
#ifdef FT_GK_PROFILE
    static const unsigned long long zero[FT_ARK_PROF_N] = {0};
    int dev = 0;
    if (cudaDeviceSynchronize() != cudaSuccess ||
        cudaMemcpyFromSymbol(out, g_ark_prof, sizeof zero) != cudaSuccess ||
        cudaMemcpyToSymbol(g_ark_prof, zero, sizeof zero) != cudaSuccess ||
        cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(khz, cudaDevAttrClockRate, dev) != cudaSuccess)
        return -1;
    return 0;
#else
    return -1;
#endif
}

/* The one-launch kernels' instances: CTAs of 512 or 1,024 threads (one
 * thread per live beam in the ranges' scan).  ark_fused_nt picks 512 for
 * the step when the session's beams fit (its barriers and scan are
 * shorter: 9.0 against 10.8 us at 256 beams on an H200) and 1,024 for the
 * mask (its clearing is spread over every thread), unless the tuning's
 * threads / mask_threads names one. */
static uint32_t ark_fused_nt(uint32_t cap, int mask)
{
    uint32_t t = mask ? g_tuning.mask_threads : g_tuning.threads;
    uint32_t nt = t == 512 || t == 1024 ? t : mask ? 1024u : 512u;
    return nt < cap ? 1024u : nt;
}

template <uint32_t NT>
static cudaError_t ark_fused_attr(size_t fsm, long *fc)
{
    int focc = 0, mocc = 0, rocc = 0;
    cudaError_t e = cudaFuncSetAttribute(
        ark_fused<NT, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
        (int)(fsm + ark_pre_smem(true, NT, FT_ARK_FUSED_MAX)));
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(ark_fused<NT, false>,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)fsm);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(ark_mask_fused<NT>,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)fsm);
    if (e == cudaSuccess)
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &focc, ark_fused<NT, true>, NT,
            fsm + ark_pre_smem(true, NT, FT_ARK_FUSED_MAX));
    if (e == cudaSuccess)
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &rocc, ark_fused<NT, false>, NT, fsm);
    if (e == cudaSuccess)
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &mocc, ark_mask_fused<NT>, NT, fsm);
    if (e == cudaSuccess && (focc < 1 || mocc < 1 || rocc < 1))
        *fc = 0;
    return e;
}

/* ark_one_launch launches a one-launch kernel of q.fused_ctas CTAs of nt
 * threads, with programmatic stream serialization when q.fused_pdl
 * (ark_pdl_wait: its CTAs may take SMs as the kernel before it ends). */
template <typename... K, typename... A>
static void ark_one_launch(void (*k)(K...), const ft_ark_params &q,
                           uint32_t nt, size_t sm, cudaStream_t st,
                           A &&...args)
{
    if (!q.fused_pdl) {
        k<<<q.fused_ctas, nt, sm, st>>>(static_cast<A &&>(args)...);
        return;
    }
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t c = {};
    c.gridDim = dim3(q.fused_ctas);
    c.blockDim = dim3(nt);
    c.dynamicSmemBytes = sm;
    c.stream = st;
    c.attrs = at;
    c.numAttrs = 1;
    (void)cudaLaunchKernelEx(&c, k, static_cast<A &&>(args)...);
}

/* ark_fused_launch launches the one-launch step's instance of NT threads,
 * with the histogram cut (pre) or the radix passes alone. */
template <uint32_t NT>
static void ark_fused_launch(const ft_ark_params &q, bool pre, size_t sm,
                             cudaStream_t st)
{
    if (pre)
        ark_one_launch(ark_fused<NT, true>, q, NT, sm, st, q);
    else
        ark_one_launch(ark_fused<NT, false>, q, NT, sm, st, q);
}

extern "C" int ft_ark_init(uint32_t *sel_ctas, uint32_t *flat_ctas,
                           uint32_t *fused_ctas, uint32_t *split,
                           uint32_t *mask_split, uint32_t *pdl)
{
    cudaError_t e = cudaFuncSetAttribute(
        ark_select, cudaFuncAttributeMaxDynamicSharedMemorySize,
        (int)ft_ark_step_smem());
    if (e != cudaSuccess)
        return (int)e;
    int dev = 0, sms = 0, occ = 0;
    if ((e = cudaGetDevice(&dev)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount,
                                    dev)) != cudaSuccess ||
        (e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
             &occ, ark_select, ARK_SEL_THREADS, ft_ark_step_smem())) !=
            cudaSuccess)
        return (int)e;
    size_t fsm = ark_fused_smem(FT_ARK_FUSED_MAX);
    long fc = sms;
    if ((e = ark_fused_attr<512>(fsm, &fc)) != cudaSuccess ||
        (e = ark_fused_attr<1024>(fsm, &fc)) != cudaSuccess)
        return (int)e;
    /* both lists' CTAs resident at once (they meet at barriers) */
    long res = (long)sms * occ / 2;
    *sel_ctas = (uint32_t)(res < 1 ? 1 : res > ARK_SEL_CTAS ? ARK_SEL_CTAS : res);
    *flat_ctas = (uint32_t)(sms > 0 ? 4 * sms : 4);
    /* the one-launch step: one CTA per SM (an even count: two halves),
     * all resident; tuning.fused 0 keeps the launches, tuning.ctas runs
     * fewer (measurements) */
    if (g_tuning.ctas >= 2 && (long)g_tuning.ctas < fc)
        fc = (long)g_tuning.ctas;
    fc &= ~1L;
    *fused_ctas = !g_tuning.fused || fc < 2 ? 0 : (uint32_t)fc;
    /* above these live beams the grid shares the child ranges out (one
     * more barrier for the step) instead of every CTA finding them all */
    *split = g_tuning.split;
    *mask_split = g_tuning.mask_split;
    /* programmatic stream serialization: compute capability 9.0 on */
    int major = 0;
    if ((e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
                                    dev)) != cudaSuccess)
        return (int)e;
    *pdl = major >= 9 && !g_tuning.nopdl;
    return 0;
}

/* ark_fl_launch launches a whole-row normalisation of every row: one CTA
 * a part of a row (ark_fl_kernel, an instance per row dtype), its
 * registers bounded so that an SM holds ARK_FL_MINB CTAs (tuning.fl_minb:
 * 1 unbounded, 5, 6 or 8 for measurements; 7 measured best on an H100 at
 * 1,024 x 262,144 bf16 rows: 211 us a step against 236 at 5).  Where every row of a bf16 or
 * f16 input starts on 16 bytes, its whole parts are one launch of the
 * instance that has no other path, and a row's cut last part (a width
 * not a multiple of FT_AR_PART) a second launch; else one launch finds
 * each part's kind. */
#define ARK_FL_MINB 7
template <int DT, bool WHOLE>
static void ark_fl_grid(const ft_ark_params *p, int step, uint32_t q0,
                        uint32_t nq, cudaStream_t st)
{
    dim3 grid(nq, p->cap_beam);
    switch (g_tuning.fl_minb) {
    case 1:
        ark_fl_kernel<DT, 1, WHOLE><<<grid, ARK_FL_THREADS, 0, st>>>(*p, step, q0);
        break;
    case 6:
        ark_fl_kernel<DT, 6, WHOLE><<<grid, ARK_FL_THREADS, 0, st>>>(*p, step, q0);
        break;
    case 5:
        ark_fl_kernel<DT, 5, WHOLE><<<grid, ARK_FL_THREADS, 0, st>>>(*p, step, q0);
        break;
    case 8:
        ark_fl_kernel<DT, 8, WHOLE><<<grid, ARK_FL_THREADS, 0, st>>>(*p, step, q0);
        break;
    default:
        ark_fl_kernel<DT, ARK_FL_MINB, WHOLE>
            <<<grid, ARK_FL_THREADS, 0, st>>>(*p, step, q0);
    }
}

template <int DT>
static void ark_fl_launch_dt(const ft_ark_params *p, int step, cudaStream_t st)
{
    uint32_t parts = ft_ar_parts(p->width), full = p->width / FT_AR_PART;
    if constexpr (DT == FT_ARR_F32) {
        ark_fl_grid<DT, false>(p, step, 0, parts, st);
    } else {
        uint64_t stride = p->stride ? p->stride : p->width; /* ark_stride */
        bool aligned =
            ((uintptr_t)p->logp & 15) == 0 && (stride * 2) % 16 == 0;
        if (!aligned || full == 0) {
            ark_fl_grid<DT, false>(p, step, 0, parts, st);
        } else {
            ark_fl_grid<DT, true>(p, step, 0, full, st);
            if (full < parts)
                ark_fl_grid<DT, false>(p, step, full, parts - full, st);
        }
    }
}

static void ark_fl_launch(const ft_ark_params *p, int step, cudaStream_t st)
{
    int dt = p->form == FT_ARR_SPARSE ? FT_ARR_F32 : p->dtype;
    if (dt == FT_ARR_BF16)
        ark_fl_launch_dt<FT_ARR_BF16>(p, step, st);
    else if (dt == FT_ARR_F16)
        ark_fl_launch_dt<FT_ARR_F16>(p, step, st);
    else
        ark_fl_launch_dt<FT_ARR_F32>(p, step, st);
}

static size_t ark_flat_smem(const ft_ark_params *p)
{
    return ((size_t)p->cap_beam + 1) * 8;
}

extern "C" int ft_ark_step(const ft_ark_params *p, void *stream)
{
    cudaStream_t st = (cudaStream_t)stream;
    if (p->fused_ctas &&
        (p->norm == FT_ARR_NORM_NONE || p->norm == FT_ARR_NORM_FULL) &&
        p->cap_beam <= FT_ARK_FUSED_MAX && p->beam <= FT_ARK_FUSED_MAX &&
        p->results <= FT_ARK_FUSED_MAX) {
        /* a whole-row normalisation first: every live beam's lse */
        if (p->norm == FT_ARR_NORM_FULL)
            ark_fl_launch(p, 0, st);
        ft_ark_params q = *p;
        q.counts = p->fcounts;
        q.heads = p->fheads;
        bool pre = !g_tuning.nopre;
        uint32_t nt = ark_fused_nt(p->cap_beam, 0);
        size_t sm = ark_fused_smem(p->cap_beam) +
                    ark_pre_smem(pre, nt, p->cap_beam);
        if (nt == 512)
            ark_fused_launch<512>(q, pre, sm, st);
        else
            ark_fused_launch<1024>(q, pre, sm, st);
        return (int)cudaGetLastError();
    }
    /* ark_ranges clears the counters and the selection's heads */
    uint32_t rb = (p->cap_beam + ARK_EXP_THREADS - 1) / ARK_EXP_THREADS;
    ark_ranges<<<rb, ARK_EXP_THREADS, 0, st>>>(*p, 0, 0, NULL);
    if (p->norm == FT_ARR_NORM_FULL) {
        ark_fl_launch(p, 1, st);
    } else if (p->norm != FT_ARR_NORM_NONE) {
        ark_lse_kernel<<<p->cap_beam, ARK_EXP_THREADS, 0, st>>>(*p);
    }
    ark_flat<<<p->flat_ctas, ARK_EXP_THREADS, ark_flat_smem(p), st>>>(*p, 0, NULL);
    ark_select<<<2 * p->sel_ctas, ARK_SEL_THREADS, ft_ark_step_smem(), st>>>(*p);
    return (int)cudaGetLastError();
}

extern "C" int ft_ark_reset(uint32_t *count, uint64_t *node, float *sigma,
                            uint32_t *len, uint32_t *parent, uint32_t *entry,
                            uint32_t *token, void *stream)
{
    ark_reset_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(count, node, sigma, len,
                                                        parent, entry, token);
    return (int)cudaGetLastError();
}

extern "C" int ft_ark_mask(const ft_ark_params *p, uint32_t eos,
                           uint32_t *mask, void *stream)
{
    cudaStream_t st = (cudaStream_t)stream;
    uint32_t words = (p->width + 31) / 32;
    if (p->fused_ctas && p->cap_beam <= FT_ARK_FUSED_MAX) {
        ft_ark_params q = *p;
        q.counts = p->fcounts;
        q.heads = p->fheads;
        size_t sm = ark_fused_smem(p->cap_beam);
        switch (ark_fused_nt(p->cap_beam, 1)) {
        case 512:
            ark_one_launch(ark_mask_fused<512>, q, 512, sm, st, q, eos, mask);
            break;
        default:
            ark_one_launch(ark_mask_fused<1024>, q, 1024, sm, st, q, eos, mask);
        }
        return (int)cudaGetLastError();
    }
    cudaError_t e = cudaMemsetAsync(mask, 0, (size_t)p->cap_beam * words * 4, st);
    if (e != cudaSuccess)
        return (int)e;
    uint32_t rb = (p->cap_beam + ARK_EXP_THREADS - 1) / ARK_EXP_THREADS;
    ark_ranges<<<rb, ARK_EXP_THREADS, 0, st>>>(*p, 1, eos, mask);
    ark_flat<<<p->flat_ctas, ARK_EXP_THREADS, ark_flat_smem(p), st>>>(*p, 1, mask);
    return (int)cudaGetLastError();
}

extern "C" int ft_ark_topk(const ft_ark_params *p, uint32_t k,
                           uint32_t *out_entry, uint32_t *out_token,
                           float *out_logp, void *stream)
{
    cudaStream_t st = (cudaStream_t)stream;
    if (p->norm == FT_ARR_NORM_FULL)
        ark_fl_launch(p, 0, st);
    ark_topk_kernel<<<p->cap_beam, ARK_EXP_THREADS, 0, st>>>(
        *p, k, out_entry, out_token, out_logp);
    return (int)cudaGetLastError();
}

/* ark_constrain: ft_ark_constrain, T an integer type of the element's
 * size (bits are copied), neg -inf's bits. */
template <typename T>
__global__ void __launch_bounds__(ARK_EXP_THREADS)
ark_constrain(const uint32_t *mask, uint32_t width, uint64_t stride,
              const T *in, T *out, T neg)
{
    uint32_t j = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
    if (j >= width)
        return;
    uint32_t wd = mask[(size_t)r * ((width + 31) / 32) + j / 32];
    size_t at = (size_t)r * stride + j;
    if (!((wd >> (j % 32)) & 1u))
        out[at] = neg;
    else if (out != in)
        out[at] = in[at];
}

extern "C" int ft_ark_constrain(const uint32_t *mask, uint32_t rows,
                                uint32_t width, uint64_t stride, int dtype,
                                const void *in, void *out, void *stream)
{
    dim3 grid((width + ARK_EXP_THREADS - 1) / ARK_EXP_THREADS, rows);
    cudaStream_t st = (cudaStream_t)stream;
    if (dtype == FT_ARR_F32)
        ark_constrain<uint32_t><<<grid, ARK_EXP_THREADS, 0, st>>>(
            mask, width, stride, (const uint32_t *)in, (uint32_t *)out,
            0xff800000u);
    else
        ark_constrain<uint16_t><<<grid, ARK_EXP_THREADS, 0, st>>>(
            mask, width, stride, (const uint16_t *)in, (uint16_t *)out,
            (uint16_t)(dtype == FT_ARR_F16 ? 0xfc00u : 0xff80u));
    return (int)cudaGetLastError();
}

/* ark_walk: ft_ar_walk, one thread per row (ft_ar_walk_row); a row's
 * lens above len reads len. */
__global__ void __launch_bounds__(ARK_EXP_THREADS)
ark_walk(ft_trie_view view, const uint64_t *ctab, const int64_t *ids,
         uint32_t rows, uint32_t len,
         uint64_t stride, const uint32_t *lens, const int64_t *from,
         const uint32_t *vocab, uint32_t vocab_len, int64_t eos,
         int64_t *state)
{
    uint32_t r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows)
        return;
    uint32_t n = lens ? min(lens[r], len) : len;
    state[r] = ft_ar_walk_row(&view, ctab, from ? from[r] : 0,
                              ids + (size_t)r * stride, n, vocab, vocab_len,
                              eos);
}

extern "C" int ft_ark_walk(const ft_trie_view *view, const uint64_t *ctab,
                           const int64_t *ids,
                           uint32_t rows, uint32_t len, uint64_t stride,
                           const uint32_t *lens, const int64_t *from,
                           const uint32_t *vocab, uint32_t vocab_len,
                           int64_t eos, int64_t *state, void *stream)
{
    uint32_t blocks = (rows + ARK_EXP_THREADS - 1) / ARK_EXP_THREADS;
    ark_walk<<<blocks, ARK_EXP_THREADS, 0, (cudaStream_t)stream>>>(
        *view, ctab, ids, rows, len, stride, lens, from, vocab, vocab_len, eos,
        state);
    return (int)cudaGetLastError();
}
