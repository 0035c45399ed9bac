/*
 * search/exchange.cuh - the shard kernel (issue 36): a shard group on one
 * GPU without host round trips between steps.
 *
 * Every shard of the group runs one persistent cooperative launch
 * (ft_gk_xstep_kernel) on its engine's stream, on its share of the GPU's
 * CTAs, and all of them run at the same time.  Each does, for t = 0 ..
 * tmax - 1, what the step kernel does in the launch of step t -- keep
 * step t - 1, expand, select the local best B into the list and merge
 * the terminal candidates -- through the same step (search/shard.cuh,
 * gk_shard_step, with this file's exchange gk_xc_dev), so the answers
 * are the step kernel's, bit for bit.  Between the selection of step t and the keep of
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

/* Timeline word i (ft_gk_kxparams.prof): CTA 0's thread 0, once the
 * block is there. */
__device__ __forceinline__ void gk_xmark(const ft_gk_kxparams &K, uint32_t i)
{
    if (K.prof != NULL && blockIdx.x == 0 && threadIdx.x == 0)
        K.prof[i] = gk_gtime();
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
            K.prof[1 + 4 * t] = gk_gtime();
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
            K.prof[2 + 4 * t] = gk_gtime();
    }
    __syncthreads();
}

/* The exchange of the one-GPU shard kernel (search/shard.cuh's XC): the
 * shared lists of step t's parity, this shard's at shard * len. */
struct gk_xc_dev {
    const ft_gk_kxparams &K;
    __device__ __forceinline__ uint64_t *send(uint32_t t) const
    {
        return K.list[t & 1u] + (uint64_t)K.shard * K.len;
    }
    __device__ __forceinline__ const uint64_t *recv(uint32_t t) const
    {
        return K.list[t & 1u];
    }
    __device__ __forceinline__ void put(const ft_gk_xparams &X,
                                        const ft_gk_req *q, uint32_t,
                                        uint32_t j, uint64_t key) const
    {
        X.send[q->xoff + j] = key;
    }
    __device__ __forceinline__ bool aborted() const
    {
        return *(volatile uint32_t *)K.abort != 0u;
    }
    __device__ __forceinline__ void meet(uint32_t t) const
    {
        gk_xbar(K, K.base + (unsigned long long)(t + 1) * K.total, t);
    }
    __device__ __forceinline__ uint32_t spread() const { return K.spread; }
    __device__ __forceinline__ bool early() const { return K.early != 0; }
    __device__ __forceinline__ void mark(uint32_t i) const
    {
        gk_xmark(K, i);
    }
};

__global__ void __launch_bounds__(FT_GK_BLOCK, FT_GK_MINB)
    ft_gk_xstep_kernel(const ft_gk_params P, const ft_gk_kxparams K)
{
    gk_shard_run(P, K, gk_xc_dev{K});
}

#endif /* FT_SEARCH_EXCHANGE_CUH */
