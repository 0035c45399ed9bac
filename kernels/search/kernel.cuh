/*
 * search/kernel.cuh - setup and launch entry points: the search kernel's
 * instances (ft_gk_search), its step loop and the fused launch's chain
 * (gk_fused) and the completion word (the shard kernels are in
 * search/shard.cuh).  The host code
 * that configures and launches them lives in kernels/ft_launch.cu.
 */
#ifndef FT_SEARCH_KERNEL_CUH
#define FT_SEARCH_KERNEL_CUH

/* ---- the kernel ------------------------------------------------------- */

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
    GK_SUB_STEP(t);
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
    if (P.forest)
        gk_forest_load(P);
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

#endif /* FT_SEARCH_KERNEL_CUH */
