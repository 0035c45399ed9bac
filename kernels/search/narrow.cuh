/*
 * search/narrow.cuh - the selection's building blocks: the radix
 * histograms and digit decisions of a race for the best lim keys, one
 * CTA's narrowing in shared memory, and the bitonic sort of the
 * survivors (gk_select_sorted).
 */
#ifndef FT_SEARCH_NARROW_CUH
#define FT_SEARCH_NARROW_CUH

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

#endif /* FT_SEARCH_NARROW_CUH */
