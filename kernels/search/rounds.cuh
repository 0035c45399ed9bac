/*
 * search/rounds.cuh - the start of phase B and a step in two rounds: the
 * terminal rank and block scan the selections use, and the first round of
 * a step (gk_r1_setup), which expands only candidates above a cut theta,
 * with its check after the grid barrier (gk_r1_check, gk_r1_check_lazy).
 */
#ifndef FT_SEARCH_ROUNDS_CUH
#define FT_SEARCH_ROUNDS_CUH

/* ---- phase B ---------------------------------------------------------- */

/* Terminal nodes before node u (ft_trie_term_rank on the device): the
 * index of u's value, which the host looks up. */
__device__ __forceinline__ uint64_t gk_term_rank(const ft_gk_params &P,
                                                 uint64_t u)
{
    if (P.forest) {
        /* a forest's: the global key index (its tree's key base on) */
        const ft_gk_tree *T = gk_tree(u);
        return T->key_base + ft_term_rank(T->view.flags, T->term_rank,
                                          u & FT_GK_TREE_MASK);
    }
    return ft_term_rank(P.view.flags, P.term_rank, u);
}

/* The value of the key of terminal node u, whose key index gk_term_rank
 * gave as rank (a forest's: global), read where the launch has the values
 * on the device; else 0 (the host attaches it). */
__device__ __forceinline__ uint64_t gk_value(const ft_gk_params &P,
                                             uint64_t u, uint64_t rank)
{
    if (P.forest) {
        const ft_gk_tree *T = gk_tree(u);
        return T->values ? ft_packed_get(T->values, T->value_bits,
                                         rank - T->key_base)
                         : 0;
    }
    return P.values ? ft_packed_get(P.values, P.value_bits, rank) : 0;
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

#endif /* FT_SEARCH_ROUNDS_CUH */
