/*
 * search/xnccl.cuh - the shard kernel across GPUs (issue 36): a shard
 * group with one shard per GPU of one host, every step's lists exchanged
 * from inside one persistent launch per GPU through NCCL's device API
 * (NCCL 2.28: symmetric memory windows and LSA load/store over NVLink or
 * PCIe P2P).
 *
 * The steps are the one-GPU shard kernel's (search/shard.cuh,
 * gk_shard_run): for t = 0 .. tmax - 1 keep step t - 1, expand, select
 * the local best B into the list and merge the terminal candidates, so
 * the answers are the step kernel's, bit for bit.  What differs is where the
 * lists live and how the shards meet (ft_gk_nxparams, ft_kernels.h):
 *
 *   - every rank's lists live in its own NCCL window; every key of a
 *     list goes into the own window and into every peer's at the same
 *     place (gk_xc_nccl::put; ncclGetLsaPointer: plain stores over
 *     NVLink/P2P);
 *   - the meeting (gk_nbar) replaces the one-GPU counter: every CTA fences
 *     at system scope and counts itself at its rank's counter (atomicInc
 *     modulo the grid: it is back at 0 after every step); the last one of
 *     the rank fences again and stores seq + t + 1 into its word of every
 *     rank's inbox with a release store at system scope; every CTA then
 *     waits until every word of its own inbox holds seq + t + 1 (acquire
 *     loads at system scope), which NCCL's LSA barrier does too
 *     (ncclLsaBarrierSession: an epoch stored into every peer's inbox),
 *     except that this wait is bounded (ncclLsaBarrierSession::wait spins
 *     without end, and a batch whose launches do not all run must fall
 *     back, not hang the GPUs).
 *
 * Two lists suffice for the reason of exchange.cuh: rank p writes
 * list[t & 1] of rank q again at step t + 2 only after the meeting of
 * step t + 1, which needs q's signal of step t + 1, which q sends only
 * after its keep of step t, the last read of that list.  Batches do not
 * overlap: the host finishes every rank's batch before it launches the
 * next.  A wait that runs out (timeout clock64 cycles) sets the abandon
 * word of every rank (and the mapped host word herr); every other wait
 * sees its own and gives up too; a CTA that gave up sets its rank's abort
 * word and the launch ends at the grid barrier after its next keep, as
 * in exchange.cuh, and the host redoes the batch through ncclAllGather.
 *
 * A one-rank communicator is the same code with no peer: the window is
 * its own, the inbox one word, the meeting a barrier of one rank's CTAs.
 *
 * Compiled only with NCCL's device headers of 2.28 or later
 * (FT_HAVE_NCCL_DEVICE, kernels/CMakeLists.txt); FT_GK_NSTEP says so.
 */
#ifndef FT_SEARCH_XNCCL_CUH
#define FT_SEARCH_XNCCL_CUH

#ifdef FT_HAVE_NCCL_DEVICE
#include <nccl.h>
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= 22800
#include <nccl_device.h>
#define FT_GK_NSTEP 1
#endif
#endif

#ifdef FT_GK_NSTEP

#include <type_traits>

/* router/group.c is C and cannot include nccl_device.h (its ncclDevComm
 * is C++): it calls ncclDevCommCreate / ncclDevCommDestroy through
 * pointers that take the requirements and the device communicator as
 * opaque memory (router/cluster_nccl.h), passes zeroed requirements of up
 * to 1024 bytes, keeps the communicator in 4096 bytes aligned to 64, and
 * reads rank, nRanks, lsaRank and lsaSize at its head (fti_ndc_head).
 * The same headers are checked here, at build time. */
static_assert(std::is_same<decltype(&ncclDevCommCreate),
                           ncclResult_t (*)(ncclComm_t,
                                            ncclDevCommRequirements_t const *,
                                            ncclDevComm_t *)>::value,
              "ncclDevCommCreate: router/cluster_nccl.h's devcomm_create");
static_assert(std::is_same<decltype(&ncclDevCommDestroy),
                           ncclResult_t (*)(ncclComm_t,
                                            ncclDevComm_t const *)>::value,
              "ncclDevCommDestroy: router/cluster_nccl.h's devcomm_destroy");
static_assert(sizeof(ncclDevCommRequirements_t) <= 1024,
              "router/group.c's zeroed requirements");
static_assert(sizeof(ncclDevComm) <= 4096 && alignof(ncclDevComm) <= 64,
              "router/group.c's struct fti_ndc");
static_assert(offsetof(ncclDevComm, rank) == 0 &&
                  offsetof(ncclDevComm, nRanks) == 4 &&
                  offsetof(ncclDevComm, lsaRank) == 12 &&
                  offsetof(ncclDevComm, lsaSize) == 16,
              "router/group.c's struct fti_ndc_head");

/* gk_nptr: byte offset off of rank peer's window (peer: its LSA rank). */
template <typename T>
__device__ __forceinline__ T *gk_nptr(const ft_gk_nxparams &N, uint64_t off,
                                      uint32_t peer)
{
    return reinterpret_cast<T *>(
        ncclGetLsaPointer(reinterpret_cast<ncclWindow_t>(N.win), off,
                          (int)peer));
}

typedef cuda::atomic_ref<unsigned long long, cuda::thread_scope_system>
    gk_sys_u64;

/* gk_nbar: the meeting of step t across the ranks (see above).  A wait
 * that gives up sets the abandon word of every rank, the mapped host
 * word and this rank's abort word, which the kernel reads after its next
 * grid barrier. */
__device__ __forceinline__ void gk_nbar(const ft_gk_kxparams &K,
                                        const ft_gk_nxparams &N, uint32_t t)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        uint32_t b = 0;
        unsigned long long want = N.seq + t + 1ull;
        if (K.prof != NULL && blockIdx.x == 0)
            K.prof[1 + 4 * t] = gk_gtime();
        /* this CTA's list writes (own window and peers') before its
         * count */
        __threadfence_system();
        uint32_t *ctr = gk_nptr<uint32_t>(N, N.words + 4, N.rank);
        if (atomicInc(ctr, gridDim.x - 1u) == gridDim.x - 1u) {
            /* the rank's last CTA: every CTA's writes before the signal */
            __threadfence_system();
            for (uint32_t p = 0; p < N.nranks; p++) {
                gk_sys_u64 in(*gk_nptr<unsigned long long>(
                    N, N.inbox + 8ull * N.rank, p));
                in.store(want, cuda::memory_order_release);
            }
        }
        const uint32_t *err = gk_nptr<uint32_t>(N, N.words, N.rank);
        long long t0 = clock64();
        uint32_t p = 0;
        while (p < N.nranks) {
            gk_sys_u64 in(*gk_nptr<unsigned long long>(N, N.inbox + 8ull * p,
                                                      N.rank));
            if (in.load(cuda::memory_order_acquire) >= want) {
                p++;
                continue;
            }
            if (*(volatile const uint32_t *)err != 0u) {
                b = 1;
                break;
            }
            if ((unsigned long long)(clock64() - t0) > K.timeout) {
                for (uint32_t r = 0; r < N.nranks; r++)
                    *(volatile uint32_t *)gk_nptr<uint32_t>(N, N.words, r) =
                        1u;
                if (K.herr != NULL)
                    *(volatile uint32_t *)K.herr = 1u;
                __threadfence_system();
                b = 1;
                break;
            }
            __nanosleep(20);
        }
        if (b)
            atomicOr(gk_nptr<uint32_t>(N, N.words + 8, N.rank), 1u);
        __threadfence();
        if (K.prof != NULL && blockIdx.x == 0)
            K.prof[2 + 4 * t] = gk_gtime();
    }
    __syncthreads();
}

/* The exchange across GPUs (search/shard.cuh's XC): step t's lists in
 * every rank's window at N.list[t & 1]; a key put into this rank's
 * window goes to every peer's at the same place as well (plain stores
 * over NVLink/P2P, made visible by gk_nbar's system-scope fences). */
struct gk_xc_nccl {
    const ft_gk_kxparams &K;
    const ft_gk_nxparams &N;
    __device__ __forceinline__ uint64_t *send(uint32_t t) const
    {
        return gk_nptr<uint64_t>(N, N.list[t & 1u], N.rank) +
               (uint64_t)K.shard * K.len;
    }
    __device__ __forceinline__ const uint64_t *recv(uint32_t t) const
    {
        return gk_nptr<uint64_t>(N, N.list[t & 1u], N.rank);
    }
    __device__ __forceinline__ void put(const ft_gk_xparams &X,
                                        const ft_gk_req *q, uint32_t t,
                                        uint32_t j, uint64_t key) const
    {
        X.send[q->xoff + j] = key;
        uint64_t off = N.list[t & 1u] +
                       8ull * ((uint64_t)K.shard * K.len + q->xoff + j);
        for (uint32_t p = 0; p < N.nranks; p++)
            if (p != N.rank)
                *gk_nptr<uint64_t>(N, off, p) = key;
    }
    __device__ __forceinline__ bool aborted() const
    {
        return *(volatile const uint32_t *)gk_nptr<uint32_t>(
                   N, N.words + 8, N.rank) != 0u;
    }
    __device__ __forceinline__ void meet(uint32_t t) const
    {
        gk_nbar(K, N, t);
    }
    __device__ __forceinline__ uint32_t spread() const { return K.spread; }
    __device__ __forceinline__ bool early() const { return K.early != 0; }
    __device__ __forceinline__ void mark(uint32_t i) const
    {
        gk_xmark(K, i);
    }
};

__global__ void __launch_bounds__(FT_GK_BLOCK, FT_GK_MINB)
    ft_gk_nstep_kernel(const ft_gk_params P, const ft_gk_kxparams K,
                       const ft_gk_nxparams N)
{
    gk_shard_run(P, K, gk_xc_nccl{K, N});
}

#endif /* FT_GK_NSTEP */

#endif /* FT_SEARCH_XNCCL_CUH */
