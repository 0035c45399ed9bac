/*
 * search/terminal.cuh - the terminal merge: the kept entry of a terminal
 * candidate, the merge of a step's terminal list into the request's
 * running best n (gk_select_term) and, in the last step, the backtrace of
 * the results into the output region.
 */
#ifndef FT_SEARCH_TERMINAL_CUH
#define FT_SEARCH_TERMINAL_CUH

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
    o.value = gk_value(P, h.node, o.rank);
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
    GK_PROF_ONLY(uint64_t c0 = clock64();)
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
    GK_SUB_TERM(blockIdx.x == 1 && threadIdx.x == 0, t, c0);
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
    GK_SUB_BACKTRACE(blockIdx.x == 1 && threadIdx.x == 0, t, c0);
}

#endif /* FT_SEARCH_TERMINAL_CUH */
