/*
 * search/shard.cuh - a shard's step, written once for the three kernels
 * of shard groups: the step kernel (one launch a step, the host
 * exchanges; ft_gk_step_kernel below), the one-GPU shard kernel
 * (search/exchange.cuh: every step in one persistent launch, the lists
 * exchanged in device memory) and the NCCL device-API shard kernel
 * (search/xnccl.cuh: the same across GPUs through NCCL windows).
 *
 * A step t: keep step t - 1 from the exchanged lists (gk_keep) -- grid
 * barrier -- expansion -- grid barrier -- the grid's narrowing of long
 * lists -- selection, where the next list's local best B go to the
 * shard's list (sorted, padded with FT_KEY_NONE) instead of becoming
 * beams, and the terminal list merges into the running results.  What
 * differs between the kernels is the exchange, a policy class XC:
 *
 *   send(t), recv(t)   where step t's list of this shard goes, and where
 *                      every shard's list of step t is read;
 *   put(X, q, t, j, k) key k at place j of request q's list of step t
 *                      (across GPUs: into every peer's window as well);
 *   aborted()          after the grid barrier that follows the keep: the
 *                      launch stops;
 *   meet(t)            the barrier across the shards after step t;
 *   spread()           0: one CTA a list; 1: lists over many CTAs where
 *                      that is cheaper (gk_spread_wide); 2: always;
 *   early()            the beams built before the meeting (below);
 *   mark(i)            the timeline (ft_gk_kxparams.prof) word i.
 *
 * The selection either takes one CTA a list (gk_select_local,
 * gk_select_term) or, in a launch of few requests whose lists all fit
 * shared memory (ft_gk_kxparams.spread, the condition of the unsharded
 * engine's spread launches), every list over many CTAs
 * (gk_shard_select_spread): the next list's keys ranked by counting among
 * the list's survivors (gk_spread_rank), each written at its rank by the
 * CTA that owns it, and the terminal list merged as the unsharded spread
 * launch merges it (gk_spread_list).  Keys are distinct, so both ways
 * give the same sorted best B and the same results.
 *
 * Early beams (ft_gk_kxparams.early, a launch of at most FT_GK_EARLY_MAX
 * requests): the kept entries of a local list are a prefix of it, and
 * local entry j, if kept, is beam j of the next step.  So the selection
 * builds the beams of every entry of the local list before the meeting
 * (child range, cut, sigma, first expansion item: gk_build_beams<true>,
 * or the spread selection's owners), and after it every CTA of the shard
 * finds the kept prefix itself (gk_keep<true>: the entries' global ranks,
 * the history entries by one CTA) and expands on: no CTA waits for one
 * keeping CTA, and no grid barrier between the keep and the expansion.
 * The beams, counts and ranks are those gk_keep builds, bit for bit.
 */
#ifndef FT_SEARCH_SHARD_CUH
#define FT_SEARCH_SHARD_CUH

/* Writes request q's local best B next keys of step t to its list
 * (xc.put: sorted, padded with FT_KEY_NONE) and their candidate indexes
 * to sel_idx.  An empty, all-padding list when the request has no step
 * t + 1. */
template <class XC>
__device__ void gk_select_local(const ft_gk_params &P, gk_smem &sm,
                                const ft_gk_xparams &X, const XC &xc,
                                ft_gk_req *q, uint32_t t)
{
    const ft_gk_slot &S = q->slot;
    uint32_t x = 0;
    if (t + 1 < q->T) {
        x = gk_select_list(P, sm, q, t, 0, q->B);
        for (uint32_t j = threadIdx.x; j < x; j += blockDim.x) {
            xc.put(X, q, t, j, sm.key[j]);
            S.sel_idx[j] = sm.idx[j];
        }
        if (threadIdx.x == 0)
            q->steps[t].n_sel = x;
        /* early beams: every entry's, kept or not */
        if (xc.early())
            gk_build_beams<true>(P, sm, q, t, x, NULL);
    }
    for (uint32_t j = x + threadIdx.x; j < q->B; j += blockDim.x)
        xc.put(X, q, t, j, FT_KEY_NONE);
}

/* Member g of G of the CTAs that select request q's next list of step t
 * (t + 1 < q->T) into its list: the list (or a long list's survivors of
 * the grid selection) into shared memory, narrowed to at most pow2(B)
 * keys that hold the best B (gk_smem_narrow), each key this CTA owns
 * (gk_spread_owns) ranked by counting the keys below it, and written at
 * its rank if that is below B; member 0 sets n_sel, the members share
 * the padding.  The list holds at most FT_GK_SORT_MAX keys (the caller's
 * condition). */
template <class XC>
__device__ void gk_spread_local(const ft_gk_params &P, gk_smem &sm,
                                const ft_gk_xparams &X, const XC &xc,
                                ft_gk_req *q, uint32_t t, uint32_t g,
                                uint32_t G)
{
    const ft_gk_slot &S = q->slot;
    uint32_t tid = threadIdx.x, B = q->B;
    const bool early = xc.early();
    gk_src src = gk_list_src<false>(P, sm, q, t, 0, B);
    uint32_t ns = src.n < FT_GK_SORT_MAX ? src.n : FT_GK_SORT_MAX;
    for (uint32_t i = tid; i < ns; i += blockDim.x) {
        uint32_t c = src.si ? src.si[i] : i;
        sm.key[i] = src.keys[i];
        sm.idx[i] = c;
        /* early beams: the expansion items at step t + 1 (every next
         * candidate's child range is ready in a spread launch: eager,
         * or from the grid selection) */
        if (early)
            sm.sp.items[i] = ft_gk_items(t + 1, S.cand_cr[c].deg,
                                         S.cand_kcut[c]);
    }
    __syncthreads();
    uint32_t s = early ? gk_smem_narrow<true>(sm, ns, B)
                       : gk_smem_narrow<false>(sm, ns, B);
    uint32_t x = s < B ? s : B;
    uint32_t no = gk_spread_rank(sm, s, g, G, early);
    for (uint32_t o = tid; o < no; o += blockDim.x) {
        uint32_t r = sm.sp.u.r.orank[o];
        if (r < x) {
            uint32_t p = sm.sp.u.r.own[o];
            uint32_t c = sm.idx[p];
            xc.put(X, q, t, r, sm.key[p]);
            S.sel_idx[r] = c;
            if (early) {
                /* beam r of step t + 1, as gk_build_beams<true> builds
                 * it: its first item the items of the keys below */
                S.beam_cr[r] = S.cand_cr[c];
                S.beam_kcut[r] = S.cand_kcut[c];
                S.beam_cstart[r] = sm.sp.u.r.ocs[o];
                S.beam_sigma[r] = ft_cand_sigma(sm.key[p]);
            }
        }
    }
    for (uint32_t j = x + g * blockDim.x + tid; j < B; j += G * blockDim.x)
        xc.put(X, q, t, j, FT_KEY_NONE);
    if (g == 0 && tid == 0)
        q->steps[t].n_sel = x;
    __syncthreads();
}

/* Whether G CTAs select a list of limit lim together (spread() 1): each
 * member reads and narrows the whole list, and each of its warps counts
 * over the ~pow2(lim) survivors for ~pow2(lim) / (16 G) keys, which beats
 * one CTA's sort only with many members and short counts (H200, 6M keys,
 * b = 1: at 2 shards, G = 33, spread was faster at BW = 100 and 1000; at
 * 4 and 8 shards, G = 16 and 8, one CTA a list was; docs/BENCHMARKS.md).
 * The host leaves spread() 0 where no list could have FT_GK_SPREAD_MIN_G
 * members (fti_engine_gpu_steps_all). */
__device__ __forceinline__ bool gk_spread_wide(uint32_t mode, uint32_t lim,
                                               uint32_t G)
{
    uint32_t p = gk_pow2(lim);
    return mode == 2u || (G >= FT_GK_SPREAD_MIN_G && p * p <= 65536u * G);
}

/* The selection of step t spread over the shard's CTAs (see above): the
 * units of gk_select_spread (every active list gets every nl-th CTA),
 * and the lists of requests without a step t + 1 padded by one CTA
 * each.  A list too long for its members to rank (gk_spread_wide) is
 * selected by its first member alone. */
template <class XC>
__device__ void gk_shard_select_spread(const ft_gk_params &P, gk_smem &sm,
                                       const ft_gk_xparams &X, const XC &xc,
                                       uint32_t t)
{
    uint32_t nl = 0;
    for (uint32_t i = 0; i < P.nreq; i++) {
        const ft_gk_req *q = &P.reqs[i];
        nl += (t < q->T) + (t + 1 < q->T);
        if (t + 1 >= q->T && i % gridDim.x == blockIdx.x)
            for (uint32_t j = threadIdx.x; j < q->B; j += blockDim.x)
                xc.put(X, q, t, j, FT_KEY_NONE);
    }
    if (nl == 0)
        return;
    uint32_t W = gridDim.x > nl ? gridDim.x : nl;
    for (uint32_t u = blockIdx.x; u < W; u += gridDim.x) {
        uint32_t L = u % nl, g = u / nl, G = (W - L + nl - 1) / nl;
        for (uint32_t i = 0; i < P.nreq; i++) {
            ft_gk_req *q = &P.reqs[i];
            uint32_t c = (t < q->T) + (t + 1 < q->T);
            if (L < c) {
                /* the next list first, then the terminal one */
                uint32_t term = c == 1 || L == 1;
                if (gk_spread_wide(xc.spread(), term ? q->n : q->B, G)) {
                    if (term)
                        gk_spread_list<false>(P, sm, q, t, 1, g, G);
                    else
                        gk_spread_local(P, sm, X, xc, q, t, g, G);
                } else if (g == 0) {
                    if (term)
                        gk_select_term(P, sm, q, t);
                    else
                        gk_select_local(P, sm, X, xc, q, t);
                }
                break;
            }
            L -= c;
        }
        __syncthreads();
    }
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

/* The global rank of key, local entry j of request q's list: j + the
 * keys of the other shards' lists below it; once it reaches B it may stop
 * short (the entry is not kept either way).  !SIDE: the lists one after
 * the other, stopping at B, where most entries of a long local list stop
 * after one or two searches.  SIDE (the early keep: every CTA all of a
 * few requests' entries): GK_KEEP_LANES lists at a time, their binary
 * searches (without branches: every search of B keys takes the same
 * steps) step by step side by side, so that their loads are in flight
 * together instead of one chain of dependent loads per list; it never
 * stops short below GK_KEEP_LANES shards (with it in the one-CTA keep
 * too, batches of 32 at BW = 1000 ran 4-15% slower on the H200:
 * docs/BENCHMARKS.md). */
#define GK_KEEP_LANES 8u
template <bool SIDE>
__device__ __forceinline__ uint32_t gk_global_rank(const ft_gk_xparams &X,
                                                   const ft_gk_req *q,
                                                   uint64_t key, uint32_t j)
{
    uint32_t B = q->B, g = j;
    for (uint32_t s = 0; !SIDE && s < X.nshards && g < B; s++)
        if (s != X.shard)
            g += gk_lower_bound(X.recv + (uint64_t)s * X.len + q->xoff, B,
                                key);
    for (uint32_t s0 = 0; SIDE && s0 < X.nshards && g < B;
         s0 += GK_KEEP_LANES) {
        /* lane l: shard s0 + l (off: the own list, or past the group) */
        const uint64_t *a[GK_KEEP_LANES];
        uint32_t lo[GK_KEEP_LANES];
        bool on[GK_KEEP_LANES];
#pragma unroll
        for (uint32_t l = 0; l < GK_KEEP_LANES; l++) {
            uint32_t s = s0 + l;
            on[l] = s < X.nshards && s != X.shard;
            a[l] = X.recv + (uint64_t)(on[l] ? s : X.shard) * X.len +
                   q->xoff;
            lo[l] = 0;
        }
        for (uint32_t n = B; n > 1;) {
            uint32_t h = n >> 1;
#pragma unroll
            for (uint32_t l = 0; l < GK_KEEP_LANES; l++)
                if (on[l] && a[l][lo[l] + h] < key)
                    lo[l] += h;
            n -= h;
        }
#pragma unroll
        for (uint32_t l = 0; l < GK_KEEP_LANES; l++)
            if (on[l])
                g += lo[l] + (a[l][lo[l]] < key);
    }
    return g;
}

/* Keeps request q's members of step t's global best B: local entry j has
 * global rank gk_global_rank, and is kept iff that is below B.  The local
 * list is sorted, so the kept entries are a prefix; they become the beams
 * of step t + 1 with their global ranks.
 *
 * !EARLY: one CTA a request; the beams built here (gk_build_beams).
 * EARLY (see above): every CTA of the shard, every request; the beams
 * were built before the meeting, so only every kept beam's global rank
 * (each CTA writes them, the same values, before its own expansion reads
 * them), the step counts (likewise) and, by the CTA told so (hist), the
 * history entries. */
template <bool EARLY>
__device__ void gk_keep(const ft_gk_params &P, gk_smem &sm,
                        const ft_gk_xparams &X, ft_gk_req *q, uint32_t t,
                        bool hist)
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
        uint32_t g = gk_global_rank<EARLY>(X, q, key, j);
        if (!EARLY) {
            sm.key[j] = key;
            sm.idx[j] = S.sel_idx[j];
        }
        if (g < B) {
            S.beam_rank[j] = g;
            if (EARLY && hist)
                S.hist[(size_t)t * S.bmax + g] = ft_hist_entry(key);
        } else {
            atomicMin(&sm.count, j);
        }
    }
    __syncthreads();
    uint32_t kept = sm.count;
    __syncthreads();
    if (!EARLY) {
        gk_build_beams(P, sm, q, t, kept, S.beam_rank);
        return;
    }
    if (threadIdx.x == 0) {
        uint32_t items = 0;
        if (kept > 0)
            items = S.beam_cstart[kept - 1] +
                    ft_gk_items(t + 1, S.beam_cr[kept - 1].deg,
                                S.beam_kcut[kept - 1]);
        q->steps[t + 1].n_beam = kept;
        q->steps[t + 1].n_items = items;
    }
    __syncthreads();
}

/* Step t of a shard (see above), after the keep of step t - 1 if keep;
 * false if the launch stops (xc.aborted). */
template <class XC>
__device__ __forceinline__ bool gk_shard_step(const ft_gk_params &P,
                                              gk_smem &sm,
                                              cg::grid_group &grid,
                                              ft_gk_xparams &X, const XC &xc,
                                              uint32_t t, bool keep)
{
    X.t = t;
    if (keep && xc.early()) {
        X.recv = xc.recv(t - 1);
        for (uint32_t i = 0; i < P.nreq; i++)
            gk_keep<true>(P, sm, X, &P.reqs[i], t - 1,
                          i % gridDim.x == blockIdx.x);
        xc.mark(3 + 4 * t);
    } else if (keep) {
        X.recv = xc.recv(t - 1);
        for (uint32_t i = blockIdx.x; i < P.nreq; i += gridDim.x) {
            gk_keep<false>(P, sm, X, &P.reqs[i], t - 1, false);
            __syncthreads();
        }
        grid.sync();
        /* the same word for every CTA of the shard (all wrote it, if at
         * all, before the barrier) */
        if (xc.aborted())
            return false;
        xc.mark(3 + 4 * t);
    }
    X.send = xc.send(t);
    gk_expand<false, true>(P, t, gridDim.x, &sm);
    if (t == 0)
        gk_build_hash(P, P.lazy ? &sm : NULL);
    grid.sync();
    /* (early beams: the first grid barrier after the meeting; a launch
     * that gave up expanded from lists that may be incomplete, within
     * the beams built before it, and its answers are discarded) */
    if (keep && xc.early() && xc.aborted())
        return false;
    xc.mark(4 + 4 * t);
    gk_grid_select<false>(P, sm, grid, t);
    if (xc.spread()) {
        gk_shard_select_spread(P, sm, X, xc, t);
        return true;
    }
    for (uint32_t it = blockIdx.x; it < 2 * P.nreq; it += gridDim.x) {
        ft_gk_req *q = &P.reqs[it >> 1];
        if (it & 1u) {
            if (t < q->T)
                gk_select_term(P, sm, q, t);
        } else {
            gk_select_local(P, sm, X, xc, q, t);
        }
        __syncthreads();
    }
    return true;
}

/* Every step of a batch in one persistent launch (the shard kernels):
 * step t, then the meeting of the shards after it. */
template <class XC>
__device__ __forceinline__ void gk_shard_run(const ft_gk_params &P,
                                             const ft_gk_kxparams &K,
                                             const XC &xc)
{
    extern __shared__ __align__(16) unsigned char gk_raw[];
    gk_smem &sm = *reinterpret_cast<gk_smem *>(gk_raw);
    cg::grid_group grid = cg::this_grid();
    ft_gk_xparams X;
    X.len = K.len;
    X.shard = K.shard;
    X.nshards = K.nshards;
    X.keep = 0;
    xc.mark(0);
    for (uint32_t t = 0; t < K.tmax; t++) {
        if (!gk_shard_step(P, sm, grid, X, xc, t, t > 0))
            return;
        if (t + 1 < K.tmax)
            xc.meet(t);
    }
}

/* ---- the step kernel (one launch a step) --------------------------------
 *
 * The host exchanges between launches: X.send and X.recv are the
 * engine's buffers, nothing to meet, no timeline. */
struct gk_xc_step {
    uint64_t *s;
    const uint64_t *r;
    __device__ __forceinline__ uint64_t *send(uint32_t) const { return s; }
    __device__ __forceinline__ const uint64_t *recv(uint32_t) const
    {
        return r;
    }
    __device__ __forceinline__ void put(const ft_gk_xparams &X,
                                        const ft_gk_req *q, uint32_t,
                                        uint32_t j, uint64_t key) const
    {
        X.send[q->xoff + j] = key;
    }
    __device__ __forceinline__ bool aborted() const { return false; }
    __device__ __forceinline__ void meet(uint32_t) const {}
    __device__ __forceinline__ uint32_t spread() const { return 0; }
    __device__ __forceinline__ bool early() const { return false; }
    __device__ __forceinline__ void mark(uint32_t) const {}
};

__global__ void __launch_bounds__(FT_GK_BLOCK, FT_GK_MINB)
    ft_gk_step_kernel(const ft_gk_params P, const ft_gk_xparams X0)
{
    extern __shared__ __align__(16) unsigned char gk_raw[];
    gk_smem &sm = *reinterpret_cast<gk_smem *>(gk_raw);
    cg::grid_group grid = cg::this_grid();
    ft_gk_xparams X = X0;
    gk_xc_step xc;
    xc.s = X0.send;
    xc.r = X0.recv;
    gk_shard_step(P, sm, grid, X, xc, X0.t, X0.keep != 0);
}

#endif /* FT_SEARCH_SHARD_CUH */
