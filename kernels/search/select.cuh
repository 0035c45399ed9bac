/*
 * search/select.cuh - the selection of one CTA a list: the grid's
 * narrowing of long lists (gk_grid_select), where a selection reads its
 * list (gk_list_src), and the next list's new beams (gk_build_beams,
 * gk_select_next).
 */
#ifndef FT_SEARCH_SELECT_CUH
#define FT_SEARCH_SELECT_CUH

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
 * (rank[j], or j when rank is NULL).  PRE (a shard's local list before
 * the exchange, search/shard.cuh): no history entries and no step
 * counts, which the keep writes once the global ranks are known. */
template <bool PRE = false>
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
        if (!PRE)
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
    if (!PRE && threadIdx.x == 0) {
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

#endif /* FT_SEARCH_SELECT_CUH */
