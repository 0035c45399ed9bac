/*
 * search/exchange.cuh - the shard kernel (issue 36): a shard group on one
 * GPU without host round trips between steps.
 *
 * Every shard of the group runs one persistent cooperative launch
 * (ft_gk_xstep_kernel) on its engine's stream, on its share of the GPU's
 * CTAs, and all of them run at the same time.  Each does, for t = 0 ..
 * tmax - 1, what the step kernel (kernel.cuh, ft_gk_step_kernel) does in
 * the launch of step t -- keep step t - 1, expand, select the local best
 * B into the list and merge the terminal candidates -- with the same
 * device functions in the same order, so the answers are the step
 * kernel's, bit for bit.  Between the selection of step t and the keep of
 * step t the host exchange is replaced by a barrier across the shards'
 * grids (gk_xbar): each shard writes its list straight into the shared
 * list of step t's parity (ft_gk_kxparams.list[t & 1], at shard * len),
 * every CTA fences and arrives at one counter, and waits until every CTA
 * of every shard has arrived; then every shard reads every list.  Two
 * lists suffice: shard s writes list[t & 1] again at step t + 2 only after
 * the barrier of step t + 1, which every shard reaches only after its
 * keep of step t, the last read of that list.
 *
 * The counter is never reset between batches: the host keeps its value
 * before the batch (base), and step t's barrier waits for base + (t + 1)
 * * total.  A wait is bounded (clock64 cycles, K.timeout): the launches
 * may fail to run side by side (another kernel holds CTAs), and a bug
 * must not hang the GPU.  A wait that runs out sets *err; every other
 * wait sees *err and gives up too.  Giving up must leave no CTA in a grid
 * barrier whose peers left: a CTA that gave up marks its shard's abort
 * word, carries on to the grid barrier after the next keep (which every
 * CTA of the shard reaches: each passed the cross barrier one way or the
 * other), and there every CTA of the shard reads the same abort word and
 * leaves together.  The lists a giving-up shard kept from may be
 * incomplete: the batch's answers are then discarded by the host, which
 * redoes it through the step kernels.
 */
#ifndef FT_SEARCH_EXCHANGE_CUH
#define FT_SEARCH_EXCHANGE_CUH

__device__ __forceinline__ unsigned long long
gk_ld_acquire(const unsigned long long *p)
{
    unsigned long long v;
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];"
                 : "=l"(v)
                 : "l"(p)
                 : "memory");
    return v;
}

__device__ __forceinline__ unsigned long long gk_gtime(void)
{
    unsigned long long v;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(v));
    return v;
}

/* gk_xbar: this CTA's writes (the list, n_sel, sel_idx, the terminal
 * merge) are made visible to the GPU, then it arrives and waits until
 * target CTAs have.  A wait that gives up sets *err (and *herr) and the
 * shard's abort word, which the kernel reads after its next grid barrier
 * (every CTA of the shard the same word there). */
__device__ __forceinline__ void gk_xbar(const ft_gk_kxparams &K,
                                        unsigned long long target, uint32_t t)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        uint32_t b = 0;
        if (K.prof != NULL && blockIdx.x == 0)
            K.prof[1 + 2 * t] = gk_gtime();
        __threadfence();
        atomicAdd(K.ctr, 1ull);
        long long t0 = clock64();
        while (gk_ld_acquire(K.ctr) < target) {
            if (*(volatile uint32_t *)K.err != 0u) {
                b = 1;
                break;
            }
            if ((unsigned long long)(clock64() - t0) > K.timeout) {
                atomicExch(K.err, 1u);
                if (K.herr != NULL) {
                    *(volatile uint32_t *)K.herr = 1u;
                    __threadfence_system();
                }
                b = 1;
                break;
            }
            __nanosleep(20);
        }
        if (b)
            atomicOr(K.abort, 1u);
        __threadfence();
        if (K.prof != NULL && blockIdx.x == 0)
            K.prof[2 + 2 * t] = gk_gtime();
    }
    __syncthreads();
}

__global__ void __launch_bounds__(FT_GK_BLOCK, FT_GK_MINB)
    ft_gk_xstep_kernel(const ft_gk_params P, const ft_gk_kxparams K)
{
    extern __shared__ __align__(16) unsigned char gk_raw[];
    gk_smem &sm = *reinterpret_cast<gk_smem *>(gk_raw);
    cg::grid_group grid = cg::this_grid();
    ft_gk_xparams X;
    X.len = K.len;
    X.shard = K.shard;
    X.nshards = K.nshards;
    X.keep = 0;
    if (K.prof != NULL && blockIdx.x == 0 && threadIdx.x == 0)
        K.prof[0] = gk_gtime();
    for (uint32_t t = 0; t < K.tmax; t++) {
        X.t = t;
        if (t > 0) {
            /* keep step t - 1 from its list (the step kernel's first
             * phase with X.keep) */
            X.recv = K.list[(t - 1) & 1u];
            for (uint32_t i = blockIdx.x; i < P.nreq; i += gridDim.x) {
                gk_keep(P, sm, X, &P.reqs[i], t - 1);
                __syncthreads();
            }
            grid.sync();
            /* the same word for every CTA of the shard (all wrote it, if
             * at all, before the barrier) */
            if (*(volatile uint32_t *)K.abort != 0u)
                return;
        }
        X.send = K.list[t & 1u] + (uint64_t)K.shard * K.len;
        gk_expand<false, true>(P, t, gridDim.x, &sm);
        if (t == 0)
            gk_build_hash(P, P.lazy ? &sm : NULL);
        grid.sync();
        gk_grid_select<false>(P, sm, grid, t);
        for (uint32_t it = blockIdx.x; it < 2 * P.nreq; it += gridDim.x) {
            ft_gk_req *q = &P.reqs[it >> 1];
            if (it & 1u) {
                if (t < q->T)
                    gk_select_term(P, sm, q, t);
            } else {
                gk_select_local(P, sm, X, q, t);
            }
            __syncthreads();
        }
        if (t + 1 < K.tmax)
            gk_xbar(K, K.base + (unsigned long long)(t + 1) * K.total, t);
    }
}

#endif /* FT_SEARCH_EXCHANGE_CUH */
