/*
 * launch_bench.cu - what one launch of the GPU engine's shape costs with
 * nothing in it (docs/BENCHMARKS.md, "GPU launch floor"): the round trip
 * from the host's launch call to the host seeing the kernel's completion
 * word in mapped memory, for an empty cooperative kernel of one 512-thread CTA per SM
 * and 200 KB of dynamic shared memory, launched
 *   - plainly (cudaLaunchCooperativeKernel),
 *   - through a graph whose kernel node's parameters are set every time
 *     (what the engine does, ft_gk_launch),
 *   - through a graph launched as it is,
 *   - and as one persistent kernel that polls a word in mapped memory;
 * each without and with a 9 KB input read from mapped memory followed by
 * a grid barrier (the engine's mapped input).  Prints microseconds per
 * round trip (mean over the iterations after 100 warm-up ones) and the
 * launch API's share.
 *
 *   ft_launch_bench [iterations]      (default 3000, at least 200)
 *
 * Exit 0, or 77 with a message where no GPU is found, 1 on a CUDA error.
 */
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

namespace cg = cooperative_groups;

#define CK(x)                                                                \
    do {                                                                     \
        cudaError_t e_ = (x);                                                \
        if (e_ != cudaSuccess) {                                             \
            fprintf(stderr, "ft_launch_bench: %s: %s\n", #x,                 \
                    cudaGetErrorString(e_));                                 \
            exit(1);                                                         \
        }                                                                    \
    } while (0)

/* The engine's parameters are ~500 B: the same size here. */
struct lb_params {
    unsigned *done; /* mapped completion word */
    unsigned *ctr;  /* CTAs counted out */
    unsigned seq;
    unsigned n16;         /* input 16-byte words (0: no input) */
    const uint4 *in;      /* mapped input */
    uint4 *dst;           /* its device copy */
    char pad[464];
};

/* The engine's completion: each CTA counts itself out after a system
 * fence; the last one sets the word (gk_done). */
__device__ __forceinline__ void lb_done(const lb_params &p, unsigned seq)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence_system();
        if (atomicInc(p.ctr, gridDim.x - 1u) == gridDim.x - 1u) {
            __threadfence_system();
            *(volatile unsigned *)p.done = seq;
        }
    }
}

__device__ __forceinline__ void lb_input(const lb_params &p,
                                         cg::grid_group &g)
{
    if (p.n16 == 0)
        return;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < p.n16;
         i += gridDim.x * blockDim.x)
        p.dst[i] = __ldcv(p.in + i);
    g.sync();
}

__global__ void __launch_bounds__(512, 1) lb_once(const lb_params p)
{
    cg::grid_group g = cg::this_grid();
    lb_input(p, g);
    lb_done(p, p.seq);
}

__global__ void __launch_bounds__(512, 1)
    lb_persistent(const lb_params p, const volatile unsigned *go, int n)
{
    cg::grid_group g = cg::this_grid();
    for (int it = 1; it <= n; it++) {
        if (blockIdx.x == 0 && threadIdx.x == 0)
            while (*go != (unsigned)it)
                ;
        g.sync();
        lb_input(p, g);
        lb_done(p, (unsigned)it);
    }
}

static double lb_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void lb_spin(const volatile unsigned *w, unsigned v)
{
    while (*w != v)
        __builtin_ia32_pause();
}

/* n round trips, printed as one row (the mean of those after warm): each
 * runs prep() untimed, then launch(), which returns the value the
 * completion word will take, timed as the API's share, then waits for
 * the word. */
template <typename Prep, typename Launch>
static void lb_trips(const char *in_s, const char *name, int n, int warm,
                     const volatile unsigned *done, Prep prep, Launch launch)
{
    double trip = 0, api = 0;
    for (int i = 0; i < n; i++) {
        prep();
        double a = lb_now();
        unsigned want = launch();
        double b = lb_now();
        lb_spin(done, want);
        if (i >= warm) {
            trip += lb_now() - a;
            api += b - a;
        }
    }
    printf("%-6s %-26s %10.2f %10.2f\n", in_s, name,
           trip / (n - warm) * 1e6, api / (n - warm) * 1e6);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 3000;
    if (n < 200) {
        fprintf(stderr, "usage: ft_launch_bench [iterations >= 200]\n");
        return 2;
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("SKIP: no GPU (%s)\n", cudaGetErrorString(cudaGetLastError()));
        return 77;
    }
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const size_t smem = 200 * 1024;
    CK(cudaFuncSetAttribute(lb_once,
                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                            (int)smem));
    CK(cudaFuncSetAttribute(lb_persistent,
                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                            (int)smem));
    unsigned *h_done, *d_done, *ctr;
    CK(cudaHostAlloc((void **)&h_done, 4096, cudaHostAllocMapped));
    memset(h_done, 0, 4096);
    CK(cudaHostGetDevicePointer((void **)&d_done, h_done, 0));
    CK(cudaMalloc((void **)&ctr, 4));
    CK(cudaMemset(ctr, 0, 4));
    char *h_in;
    uint4 *d_in, *dst;
    CK(cudaHostAlloc((void **)&h_in, 16384, cudaHostAllocMapped));
    memset(h_in, 1, 16384);
    CK(cudaHostGetDevicePointer((void **)&d_in, h_in, 0));
    CK(cudaMalloc((void **)&dst, 16384));
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("%s, %d SMs: %d CTAs x 512 threads, %zu KB shared memory, %d "
           "round trips each (100 warm-up)\n",
           prop.name, sms, sms, smem / 1024, n);
    printf("%-6s %-26s %10s %10s\n", "input", "launch", "trip_us", "api_us");
    const int warm = 100;
    unsigned seq = 0;
    for (int with_in = 0; with_in < 2; with_in++) {
        lb_params p;
        memset(&p, 0, sizeof p);
        p.done = d_done;
        p.ctr = ctr;
        p.in = d_in;
        p.dst = dst;
        p.n16 = with_in ? 9216 / 16 : 0;
        void *args[] = {&p};
        const char *in_s = with_in ? "9 KB" : "none";
        auto none = [] {};
        lb_trips(in_s, "cooperative, plain", n, warm, h_done, none, [&] {
            p.seq = ++seq;
            CK(cudaLaunchCooperativeKernel((void *)lb_once, sms, 512, args,
                                           smem, st));
            return p.seq;
        });
        cudaGraph_t gr;
        cudaGraphExec_t gx;
        cudaGraphNode_t nd;
        cudaKernelNodeParams kp;
        memset(&kp, 0, sizeof kp);
        kp.func = (void *)lb_once;
        kp.gridDim = dim3(sms);
        kp.blockDim = dim3(512);
        kp.sharedMemBytes = (unsigned)smem;
        kp.kernelParams = args;
        CK(cudaGraphCreate(&gr, 0));
        CK(cudaGraphAddKernelNode(&nd, gr, NULL, 0, &kp));
        cudaLaunchAttributeValue v;
        memset(&v, 0, sizeof v);
        v.cooperative = 1;
        CK(cudaGraphKernelNodeSetAttribute(nd, cudaLaunchAttributeCooperative,
                                           &v));
        CK(cudaGraphInstantiate(&gx, gr, 0));
        lb_trips(in_s, "graph, parameters set", n, warm, h_done, none, [&] {
            p.seq = ++seq;
            CK(cudaGraphExecKernelNodeSetParams(gx, nd, &kp));
            CK(cudaGraphLaunch(gx, st));
            return p.seq;
        });
        /* as it is: one sequence number, the word reset by the host */
        p.seq = ++seq;
        CK(cudaGraphExecKernelNodeSetParams(gx, nd, &kp));
        lb_trips(
            in_s, "graph, as it is", n, warm, h_done,
            [&] { __atomic_store_n(h_done, 0u, __ATOMIC_SEQ_CST); },
            [&] {
                CK(cudaGraphLaunch(gx, st));
                return p.seq;
            });
        CK(cudaStreamSynchronize(st));
        CK(cudaGraphExecDestroy(gx));
        CK(cudaGraphDestroy(gr));
        /* persistent: the go word beside the done word (other lines) */
        unsigned *h_go = h_done + 64, *d_go;
        CK(cudaHostGetDevicePointer((void **)&d_go, h_go, 0));
        *h_done = 0;
        *h_go = 0;
        const volatile unsigned *gop = d_go;
        int iters = n;
        void *pargs[] = {&p, (void *)&gop, &iters};
        CK(cudaLaunchCooperativeKernel((void *)lb_persistent, sms, 512,
                                       pargs, smem, st));
        double trip = 0;
        for (int i = 1; i <= n; i++) {
            double a = lb_now();
            __atomic_store_n(h_go, (unsigned)i, __ATOMIC_SEQ_CST);
            lb_spin(h_done, (unsigned)i);
            if (i > warm)
                trip += lb_now() - a;
        }
        CK(cudaStreamSynchronize(st));
        printf("%-6s %-26s %10.2f %10s\n", in_s, "persistent, polling",
               trip / (n - warm) * 1e6, "-");
        seq = 0;
        *h_done = 0;
    }
    CK(cudaGetLastError());
    return 0;
}
