/*
 * search/expand.cuh - phase A, the expansion: every warp of the grid takes
 * items (request, beam, 32 proposals or 32 children), looks them up and
 * appends the survivors to the step's next and terminal lists.  Also the
 * rounds' item counts and the units' distribution over the grid.
 */
#ifndef FT_SEARCH_EXPAND_CUH
#define FT_SEARCH_EXPAND_CUH

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
    GK_PM_BEGIN(FUSE, t, pw);
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
    const int pf = (P.pf_ranges & 3u) && eager && !last &&
                   (P.ctab || P.forest);
    if (ft_gk_use_hash(t, cr.deg, kcut)) {
        GK_PM(1);
        GK_PM_PATH(1);
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
                flags[v] = gk_flags(P, u[v]);
                label[v] = gk_label(P, cr, u[v]);
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
        GK_PM_PATH(2);
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
        /* (a forest's child map is its tree's) */
        const uint64_t *cmap = P.cmap;
        uint64_t cmask = P.cmap_mask;
        uint32_t cmin = P.cmap_min;
        if (P.forest && t > 0) {
            const ft_gk_tree *T = gk_tree(cr.first);
            cmap = T->cmap;
            cmask = T->cmap_mask;
            cmin = T->cmap_min;
        }
        if (t == 0 && P.root_n) {
            /* The root's children through the label map (a forest's
             * entry names the tree and the child's id there). */
#pragma unroll
            for (uint32_t v = 0; v < U; v++) {
                uint32_t c = k[v] < kcut && tk[v] < P.root_n
                                 ? P.root_map[tk[v]] : 0u;
                if (P.forest)
                    u[v] = c ? ((uint64_t)(c >> FT_GK_ROOT_SHIFT)
                                << FT_GK_TREE_SHIFT) |
                                   (c & FT_GK_ROOT_MASK)
                             : FT_NONE;
                else
                    u[v] = c ? cr.first + (c - 1u) : FT_NONE;
            }
        } else if (t == 0 && P.forest) {
            /* a forest without a root map: its sorted root table */
#pragma unroll
            for (uint32_t v = 0; v < U; v++)
                u[v] = k[v] < kcut ? gk_root_find(P, tk[v]) : FT_NONE;
        } else if (t > 0 && cmap && cr.deg >= cmin) {
            /* The child map: every lane's first probes in flight
             * together (load <= 1/2: usually the only ones). */
            uint64_t key[FT_GK_LANE_PROPS], h[FT_GK_LANE_PROPS];
            ulonglong2 e[FT_GK_LANE_PROPS];
            const ulonglong2 *M = reinterpret_cast<const ulonglong2 *>(cmap);
#pragma unroll
            for (uint32_t v = 0; v < U; v++) {
                /* (a forest's tree bits leave the key by the shift) */
                key[v] = (cr.first << 32) | tk[v];
                h[v] = gk_cmap_hash(key[v]) & cmask;
                if (k[v] < kcut)
                    e[v] = __ldg(M + h[v]);
            }
#pragma unroll
            for (uint32_t v = 0; v < U; v++)
                if (k[v] < kcut)
                    u[v] = gk_cmap_probe(M, cmask, key[v], h[v], e[v],
                                         cr.first);
        } else {
#pragma unroll
            for (uint32_t v = 0; v < U; v++)
                if (k[v] < kcut)
                    u[v] = gk_find(P, cr, tk[v]);
        }
#pragma unroll
        for (uint32_t v = 0; v < U; v++) {
            found[v] = u[v] != FT_NONE;
            if (found[v]) {
                flags[v] = gk_flags(P, u[v]);
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
    GK_PM_AFTER(pos[0] + posn[0], 3);
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
    GK_PM_END(t, pw, cr.deg, tot);
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

#endif /* FT_SEARCH_EXPAND_CUH */
