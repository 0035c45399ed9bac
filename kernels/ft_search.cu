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
 * Exactness (SPEC section 4): sigma only by __fadd_rn, score by one
 * __dmul_rn with F from the host, every order by the packed integer keys;
 * within one step score order equals sigma order (F > 0 is the same for
 * every candidate and distinct binary32 sigmas give distinct binary64
 * products), so the terminal list sorted by ft_cand_key is sorted by
 * (score desc, order asc) and can be merged with earlier steps by
 * (ft_score_key, step) alone.
 */
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include "ft_kernels.h"
#include "rules.h"

namespace cg = cooperative_groups;

#define FT_GK_BLOCK 512
#define FT_GK_WARPS (FT_GK_BLOCK / 32)
#define FT_GK_SORT_MAX FT_GK_LIST_MAX

/* Shared memory of the selection phase. */
struct gk_smem {
    uint64_t key[FT_GK_SORT_MAX];
    uint32_t idx[FT_GK_SORT_MAX];
    uint32_t hist[256];
    uint32_t wsum[FT_GK_WARPS];
    uint32_t count;
    uint32_t need;
    uint32_t bucket;
    uint32_t done;
};

__device__ __forceinline__ uint32_t gk_hash(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x85ebca6bu;
    x ^= x >> 13;
    x *= 0xc2b2ae35u;
    x ^= x >> 16;
    return x;
}

/* Two warp-aggregated appends at once (the two atomics are in flight
 * together): slots of this lane in the terminal and the next list.  The
 * whole warp calls it. */
__device__ __forceinline__ void gk_append2(uint32_t *ct, int wt, uint32_t *cn,
                                           int wn, uint32_t *pt, uint32_t *pn)
{
    uint32_t mt = __ballot_sync(0xffffffffu, wt);
    uint32_t mn = __ballot_sync(0xffffffffu, wn);
    uint32_t lane = threadIdx.x & 31u;
    uint32_t bt = 0, bn = 0;
    if (lane == 0) {
        if (mt)
            bt = atomicAdd(ct, (uint32_t)__popc(mt));
        if (mn)
            bn = atomicAdd(cn, (uint32_t)__popc(mn));
    }
    bt = __shfl_sync(0xffffffffu, bt, 0);
    bn = __shfl_sync(0xffffffffu, bn, 0);
    uint32_t below = (1u << lane) - 1u;
    *pt = bt + (uint32_t)__popc(mt & below);
    *pn = bn + (uint32_t)__popc(mn & below);
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

__device__ void gk_expand_item(const ft_gk_params &P, ft_gk_req *q,
                               uint32_t t, uint32_t item, uint32_t last)
{
    const ft_gk_slot &S = q->slot;
    uint32_t lane = threadIdx.x & 31u;
    uint32_t r, chunk, kcut;
    float sigma;
    ft_child_range cr;
    if (t == 0) {
        r = 0;
        chunk = item;
        sigma = 0.0f;
        cr = q->root;
        kcut = q->kcut0;
    } else {
        uint32_t nb = q->steps[t].n_beam;
        /* Last r with cstart[r] <= item, a 32-way search by the warp:
         * log32(nb) dependent loads instead of log2(nb).  Invariant:
         * cstart[lo] <= item, and hi == nb or cstart[hi] > item. */
        uint32_t lo = 0, hi = nb;
        while (hi - lo > 1) {
            uint32_t step = (hi - lo + 31u) >> 5;
            uint32_t idx = lo + lane * step;
            int ok = idx < hi && S.beam_cstart[idx] <= item;
            uint32_t b = __ballot_sync(0xffffffffu, ok);
            lo += (31u - (uint32_t)__clz(b)) * step;
            hi = lo + step < hi ? lo + step : hi;
        }
        r = lo;
        chunk = item - S.beam_cstart[r];
        sigma = S.beam_sigma[r];
        cr = S.beam_cr[r];
        kcut = S.beam_kcut[r];
    }
    const uint32_t *tok = q->tok + q->row[t];
    const float *lp = q->logp + q->row[t];
    /* Keys carry the entry's global rank (a shard group's beams are
     * indexed locally); alone, rank and index are the same. */
    uint32_t rk = (t > 0 && S.beam_rank) ? S.beam_rank[r] : r;
    int found = 0;
    uint32_t k = 0;
    uint32_t flags = 0;
    uint64_t u = FT_NONE;
    if (ft_gk_use_hash(t, cr.deg, kcut)) {
        uint64_t j = (uint64_t)chunk * FT_GK_WARP_ITEM + lane;
        if (j < cr.deg) {
            u = cr.first + j;
            /* u is known now: its flags load overlaps the label's. */
            flags = ft_node_flags(&P.view, u);
            uint32_t label = ft_child_label(&P.view, &cr, u);
            const uint64_t *tab = S.hash + q->hoff[t];
            uint32_t mask = q->hmask[t];
            uint32_t h = gk_hash(label) & mask;
            for (;;) {
                uint64_t e = tab[h];
                if ((uint32_t)((e >> 12) & 0xfffffu) != P.epoch)
                    break;
                if ((uint32_t)(e >> 32) == label) {
                    k = (uint32_t)(e & 0xfffu);
                    found = k < kcut;
                    break;
                }
                h = (h + 1) & mask;
            }
        }
    } else {
        k = chunk * FT_GK_WARP_ITEM + lane;
        if (k < kcut) {
            uint32_t tk = tok[k];
            if (t == 0 && P.root_n) {
                /* The root's children through the label map. */
                uint32_t c = tk < P.root_n ? P.root_map[tk] : 0u;
                u = c ? cr.first + (c - 1u) : FT_NONE;
            } else {
                u = ft_find_child(&P.view, &cr, tk);
            }
            found = u != FT_NONE;
            if (found)
                flags = ft_node_flags(&P.view, u);
        }
    }
    float sig = 0.0f;
    if (found)
        sig = FT_FADD(sigma, lp[k]);
    else
        flags = 0;
    uint64_t key = ft_cand_key(sig, rk, k);
    ft_gk_step *st = &q->steps[t];
    int term = found && (flags & FT_TERMINAL);
    int nxt = !last && found && (flags & FT_HAS_CHILD);
    uint32_t pos, posn;
    gk_append2(&st->n_term, term, &st->n_next, nxt, &pos, &posn);
    if (term) {
        if (pos < S.cap_cand) {
            S.term_key[pos] = key;
            S.term_node[pos] = u;
        } else {
            atomicOr(&q->steps[0].err, 1u);
        }
    }
    if (!last) {
        pos = posn;
        if (nxt) {
            if (pos < S.cap_cand) {
                /* The new beam's child range and theta_sent cut are
                 * computed here, by all warps of the grid, rather than by
                 * the one selecting CTA: their chains of dependent loads
                 * then overlap instead of adding up. */
                S.cand_key[pos] = key;
                S.cand_node[pos] = u;
                if (!P.lazy) {
                    S.cand_cr[pos] = ft_children(&P.view, u);
                    S.cand_kcut[pos] = ft_kcut(q->logp + q->row[t + 1],
                                               q->keff[t + 1], sig,
                                               q->theta_sent);
                }
            } else {
                atomicOr(&q->steps[0].err, 1u);
            }
        }
    }
}

__device__ void gk_expand(const ft_gk_params &P, uint32_t t)
{
    uint32_t nw = gridDim.x * FT_GK_WARPS;
    uint32_t gw = blockIdx.x * FT_GK_WARPS + (threadIdx.x >> 5);
    uint64_t acc = 0; /* items of the requests before this one */
    for (uint32_t i = 0; i < P.nreq; i++) {
        ft_gk_req *q = &P.reqs[i];
        if (t >= q->T)
            continue;
        uint32_t tot = t == 0 ? q->items0 : q->steps[t].n_items;
        uint32_t first = (uint32_t)((gw + nw - (acc % nw)) % nw);
        uint32_t last = t + 1 == q->T;
        for (uint32_t it = first; it < tot; it += nw)
            gk_expand_item(P, q, t, it, last);
        acc += tot;
    }
}

/* Builds the token -> k tables of positions 1..T-1 (during step 0). */
__device__ void gk_build_hash(const ft_gk_params &P)
{
    uint32_t nt = gridDim.x * blockDim.x;
    uint32_t gt = blockIdx.x * blockDim.x + threadIdx.x;
    uint64_t acc = 0;
    for (uint32_t i = 0; i < P.nreq; i++) {
        ft_gk_req *q = &P.reqs[i];
        uint32_t base = q->row[1 < q->T ? 1 : q->T];
        uint32_t tot = q->rows_total - base;
        uint32_t first = (uint32_t)((gt + nt - (acc % nt)) % nt);
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
                    if (old == e0)
                        break;
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

/* Block-wide exclusive scan of one value per thread; returns the total. */
__device__ uint32_t gk_scan(gk_smem &sm, uint32_t v, uint32_t *excl)
{
    uint32_t lane = threadIdx.x & 31u, w = threadIdx.x >> 5;
    uint32_t x = v;
    for (int o = 1; o < 32; o <<= 1) {
        uint32_t y = __shfl_up_sync(0xffffffffu, x, o);
        if ((int)lane >= o)
            x += y;
    }
    if (lane == 31)
        sm.wsum[w] = x;
    __syncthreads();
    if (w == 0) {
        uint32_t s = lane < FT_GK_WARPS ? sm.wsum[lane] : 0;
        for (int o = 1; o < 32; o <<= 1) {
            uint32_t y = __shfl_up_sync(0xffffffffu, s, o);
            if ((int)lane >= o)
                s += y;
        }
        if (lane < FT_GK_WARPS)
            sm.wsum[lane] = s; /* inclusive */
    }
    __syncthreads();
    uint32_t wbase = w ? sm.wsum[w - 1] : 0;
    *excl = wbase + x - v;
    uint32_t total = sm.wsum[FT_GK_WARPS - 1];
    __syncthreads();
    return total;
}

/* Leaves the best min(m, lim) keys of keys[0, m) sorted ascending in
 * sm.key (with their index in sm.idx); returns how many. */
__device__ uint32_t gk_select_sorted(gk_smem &sm, const uint64_t *keys,
                                     uint32_t m, uint32_t lim)
{
    uint32_t tid = threadIdx.x;
    uint64_t prefix = 0, pmask = 0;
    uint32_t x = m < lim ? m : lim;
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
            /* Candidates cluster in few buckets (close sigmas share their
             * high bits): aggregate equal buckets per warp before the
             * shared-memory atomic, else lanes serialise on one counter. */
            /* Eight independent loads in flight per thread: the pass is
             * bound by L2 latency, not bandwidth. */
            uint32_t mr = (m + 31u) & ~31u;
            for (uint32_t i0 = tid; i0 < mr; i0 += 8u * blockDim.x) {
                uint64_t kk[8];
#pragma unroll
                for (int u = 0; u < 8; u++) {
                    uint32_t i = i0 + (uint32_t)u * blockDim.x;
                    kk[u] = i < m ? keys[i] : ~0ull;
                }
#pragma unroll
                for (int u = 0; u < 8; u++) {
                    uint32_t i = i0 + (uint32_t)u * blockDim.x;
                    if (i >= mr) /* uniform per warp: mr % 32 == 0 */
                        break;
                    uint32_t b = 256u; /* no bucket */
                    if (i < m && (kk[u] & pmask) == prefix)
                        b = (uint32_t)(kk[u] >> sh) & 255u;
                    uint32_t peers = __match_any_sync(0xffffffffu, b);
                    if (b < 256u &&
                        (tid & 31u) == (uint32_t)(__ffs(peers) - 1))
                        atomicAdd(&sm.hist[b], (uint32_t)__popc(peers));
                }
            }
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
    if (full) {
#pragma unroll 4
        for (uint32_t i = tid; i < m; i += blockDim.x) {
            sm.key[i] = keys[i];
            sm.idx[i] = i;
        }
    }
    if (tid == 0)
        sm.count = 0;
    __syncthreads();
    for (uint32_t i0 = tid; !full && i0 < m; i0 += 4u * blockDim.x) {
        uint64_t kk[4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            uint32_t i = i0 + (uint32_t)u * blockDim.x;
            kk[u] = i < m ? keys[i] : ~0ull;
        }
#pragma unroll
        for (int u = 0; u < 4; u++) {
            uint32_t i = i0 + (uint32_t)u * blockDim.x;
            if (i < m && (m <= lim || (kk[u] & pmask) <= prefix)) {
                uint32_t p = atomicAdd(&sm.count, 1u);
                if (p < FT_GK_SORT_MAX) {
                    sm.key[p] = kk[u];
                    sm.idx[p] = i;
                }
            }
        }
    }
    __syncthreads();
    /* Bitonic sort of the survivors, padded to a power of two. */
    uint32_t ns = full ? m : x;
    uint32_t np = 1;
    while (np < ns)
        np <<= 1;
    for (uint32_t i = ns + tid; i < np; i += blockDim.x) {
        sm.key[i] = ~0ull;
        sm.idx[i] = 0;
    }
    __syncthreads();
    for (uint32_t size = 2; size <= np; size <<= 1) {
        for (uint32_t stride = size >> 1; stride > 0; stride >>= 1) {
            for (uint32_t i = tid; i < np / 2; i += blockDim.x) {
                uint32_t lo = 2 * stride * (i / stride) + (i % stride);
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
    }
    return x;
}

/* The beams of step t+1 from the x selected next candidates in sm.key
 * (sorted) and sm.idx (their candidate indexes): child ranges, cuts, item
 * prefix sums, and the history entry at the entry's global rank
 * (rank[j], or j when rank is NULL). */
__device__ void gk_build_beams(const ft_gk_params &P, gk_smem &sm,
                               ft_gk_req *q, uint32_t t, uint32_t x,
                               const uint32_t *rank)
{
    const ft_gk_slot &S = q->slot;
    uint32_t t1 = t + 1;
    if (P.lazy) {
        /* Child ranges and cuts of the selected beams only, strided so
         * that a thread's chains are few. */
        for (uint32_t j = threadIdx.x; j < x; j += blockDim.x) {
            uint64_t key = sm.key[j];
            float sigma = ft_cand_sigma(key);
            S.beam_cr[j] = ft_children(&P.view, S.cand_node[sm.idx[j]]);
            S.beam_kcut[j] = ft_kcut(q->logp + q->row[t1], q->keff[t1],
                                     sigma, q->theta_sent);
        }
        __syncthreads();
    }
    /* Each thread handles up to 8 consecutive beams (x <= 4096). */
    uint32_t per = (x + blockDim.x - 1) / blockDim.x;
    uint32_t j0 = threadIdx.x * per;
    uint32_t mine = 0;
    for (uint32_t j = j0; j < j0 + per && j < x; j++) {
        uint64_t key = sm.key[j];
        float sigma = ft_cand_sigma(key);
        ft_child_range cr;
        uint32_t kcut;
        if (P.lazy) {
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
}

/* The next list: new beams of step t+1. */
__device__ void gk_select_next(const ft_gk_params &P, gk_smem &sm,
                               ft_gk_req *q, uint32_t t)
{
    const ft_gk_slot &S = q->slot;
    uint32_t m = q->steps[t].n_next;
    if (m > S.cap_cand)
        m = (uint32_t)S.cap_cand;
    uint32_t x = gk_select_sorted(sm, S.cand_key, m, q->B);
    gk_build_beams(P, sm, q, t, x, NULL);
}

/* The terminal list: merge into the running best n; in the last step
 * write the results. */
__device__ void gk_select_term(const ft_gk_params &P, gk_smem &sm,
                               ft_gk_req *q, uint32_t t)
{
    const ft_gk_slot &S = q->slot;
    uint32_t m = q->steps[t].n_term;
    if (m > S.cap_cand)
        m = (uint32_t)S.cap_cand;
    uint32_t x = gk_select_sorted(sm, S.term_key, m, q->n);
    const ft_gk_hit *prev = (const ft_gk_hit *)S.run[(t & 1u) ^ 1u];
    ft_gk_hit *dst = (ft_gk_hit *)S.run[t & 1u];
    uint32_t nprev = t ? q->steps[t - 1].n_run : 0;
    double F = q->F[t + 1];
    for (uint32_t j = threadIdx.x; j < x; j += blockDim.x) {
        uint64_t key = sm.key[j];
        float sigma = ft_cand_sigma(key);
        double score = ft_score(sigma, F);
        uint64_t skey = ft_score_key(score);
        /* Earlier steps win ties: count prev entries with skey <= ours. */
        uint32_t lo = 0, hi = nprev;
        while (lo < hi) {
            uint32_t mid = (lo + hi) >> 1;
            if (prev[mid].skey <= skey)
                lo = mid + 1;
            else
                hi = mid;
        }
        uint32_t pos = j + lo;
        if (pos < q->n) {
            ft_gk_hit h;
            h.skey = skey;
            h.node = S.term_node[sm.idx[j]];
            h.score = score;
            h.sigma = sigma;
            h.order = ft_order(t, ft_cand_rank(key), ft_cand_k(key));
            dst[pos] = h;
        }
    }
    __syncthreads();
    /* Turn sm.key into score keys for the other side's searches. */
    for (uint32_t j = threadIdx.x; j < x; j += blockDim.x)
        sm.key[j] = ft_score_key(ft_score(ft_cand_sigma(sm.key[j]), F));
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
    if (t + 1 < q->T)
        return;
    __syncthreads();
    /* Last step: backtrace and write the results. */
    ft_gk_out_head *head = q->out;
    ft_gk_out_hit *oh = (ft_gk_out_hit *)(head + 1);
    uint32_t *otok = (uint32_t *)(oh + q->n);
    for (uint32_t j = threadIdx.x; j < nrun; j += blockDim.x) {
        ft_gk_hit h = dst[j];
        uint32_t len = ft_backtrace(otok + (size_t)j * q->T, h.order, S.hist,
                                    S.bmax, q->tok, q->row);
        ft_gk_out_hit o;
        o.rank = gk_term_rank(P, h.node);
        o.score = h.score;
        o.sigma = h.sigma;
        o.order = h.order;
        o.len = len;
        o.pad_ = 0;
        oh[j] = o;
    }
    if (threadIdx.x == 0) {
        head->n = nrun;
        head->err = q->steps[0].err;
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

__global__ void __launch_bounds__(FT_GK_BLOCK)
    ft_gk_search(const ft_gk_params P)
{
    extern __shared__ __align__(16) unsigned char gk_raw[];
    gk_smem &sm = *reinterpret_cast<gk_smem *>(gk_raw);
    cg::grid_group grid = cg::this_grid();
    uint32_t tmax = 0;
    for (uint32_t i = 0; i < P.nreq; i++)
        tmax = P.reqs[i].T > tmax ? P.reqs[i].T : tmax;
    GK_MARK(0);
    for (uint32_t t = 0; t < tmax; t++) {
        gk_expand(P, t);
        if (t == 0)
            gk_build_hash(P);
        GK_MARK(1 + 2 * t);
        grid.sync();
        /* Selection: items (request, list) spread over the CTAs. */
        for (uint32_t it = blockIdx.x; it < 2 * P.nreq; it += gridDim.x) {
            ft_gk_req *q = &P.reqs[it >> 1];
            if (t >= q->T)
                continue;
            if (it & 1u)
                gk_select_term(P, sm, q, t);
            else if (t + 1 < q->T)
                gk_select_next(P, sm, q, t);
            __syncthreads();
        }
        GK_MARK(2 + 2 * t);
        if (t + 1 < tmax)
            grid.sync();
    }
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
__device__ void gk_select_local(gk_smem &sm, const ft_gk_xparams &X,
                                ft_gk_req *q, uint32_t t)
{
    const ft_gk_slot &S = q->slot;
    uint64_t *out = X.send + q->xoff;
    uint32_t x = 0;
    if (t + 1 < q->T) {
        uint32_t m = q->steps[t].n_next;
        if (m > S.cap_cand)
            m = (uint32_t)S.cap_cand;
        x = gk_select_sorted(sm, S.cand_key, m, q->B);
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

__global__ void __launch_bounds__(FT_GK_BLOCK)
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
    gk_expand(P, t);
    if (t == 0)
        gk_build_hash(P);
    grid.sync();
    for (uint32_t it = blockIdx.x; it < 2 * P.nreq; it += gridDim.x) {
        ft_gk_req *q = &P.reqs[it >> 1];
        if (it & 1u) {
            if (t < q->T)
                gk_select_term(P, sm, q, t);
        } else {
            gk_select_local(sm, X, q, t);
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
                                            smem, (cudaStream_t)stream);
}

extern "C" int ft_gk_config(int *grid, int *block, size_t *smem)
{
    return gk_config_of((const void *)ft_gk_search, grid, block, smem);
}

extern "C" int ft_gk_launch(const ft_gk_params *p, int grid, int block,
                            size_t smem, void *stream)
{
    ft_gk_params copy = *p;
    void *args[] = {&copy};
    return (int)cudaLaunchCooperativeKernel((const void *)ft_gk_search,
                                            dim3(grid), dim3(block), args,
                                            smem, (cudaStream_t)stream);
}
