/*
 * search/spread.cuh - the selection spread over the grid, for launches of
 * few requests (P.spread) and the fused launch: the owned survivors'
 * counting ranks, the bucket ranking of next lists, one CTA's narrowing
 * of a medium list (gk_local_narrow) and the spread terminal merge.
 */
#ifndef FT_SEARCH_SPREAD_CUH
#define FT_SEARCH_SPREAD_CUH

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
    GK_SUB_AT(g == 0 && P.nreq == 1 && threadIdx.x == 0, t, 1);
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
        GK_SUB_RANKED(g == 0 && P.nreq == 1 && threadIdx.x == 0, t);
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
    GK_SUB_RANKED(g == 0 && P.nreq == 1 && threadIdx.x == 0, t);
}

/* Profile builds: CTA 0 (pc) marks the end of step t's next list. */
__device__ __forceinline__ void gk_mark_next_end(int pc, uint32_t t)
{
    GK_SUB_NEXT_END(pc, t);
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
    GK_PROF_ONLY(const int pc =
                     blockIdx.x == 0 && P.nreq == 1 && threadIdx.x == 0;
                 uint32_t npass = 1;)
    GK_NSUB_AT(pc, t, 0);
    gk_narrow_passes(
        sm, q, 1u,
        [&](uint64_t prefix, uint64_t pmask, uint32_t sh) {
            GK_PROF_ONLY(npass++;)
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
    GK_NSUB_PASSES(pc, t, npass);
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
    GK_NSUB_AT(pc, t, 2);
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
    GK_PROF_ONLY(uint64_t c0 = clock64(); int pc = g == 0 && P.nreq == 1;)
    GK_SUB_SET(pc && !term && threadIdx.x == 0, t, 0, c0);
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
        GK_SUB_AT(pc && threadIdx.x == 0, t, 1);
        uint32_t no = gk_spread_rank(sm, s, g, G, 1);
        GK_SUB_RANKED(pc && threadIdx.x == 0, t);
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
    GK_SUB_TERM(pc && threadIdx.x == 0, t, c0);
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

#endif /* FT_SEARCH_SPREAD_CUH */
