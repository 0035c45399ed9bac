/*
 * ft_launch.cu - the host side of the search kernel: launch shapes
 * (ft_gk_config, ft_gk_step_config), the launch graphs and the launches
 * (ft_gk_launch, ft_gk_step_launch), and the synchronous builds of the
 * child table and child map.
 *
 * Host code only: the kernels are defined in kernels/ft_search.cu (one
 * translation unit for all device code), which hands this file what it
 * needs of them through search/entry.h.  Keeping the host code out of
 * that file keeps the device code's file about the device.
 */
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "ft_kernels.h"
#include "search/entry.h"

/* Dynamic shared memory a launch needs: all of gk_smem (smem, from
 * gk_config_of) when it spreads its selection, else all but sp and rq. */
static size_t gk_launch_smem(size_t smem, int spread)
{
    size_t base = gk_entry_get()->smem_base;
    return spread || smem < base ? smem : base;
}

/* Occupancy x SMs for kernel fn with the selection's shared memory. */
static int gk_config_of(const void *fn, int *grid, int *block, size_t *smem)
{
    int dev, sms = 0, per = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    size_t bytes = gk_entry_get()->smem;
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(fn,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)bytes);
    if (e == cudaSuccess)
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, fn,
                                                          FT_GK_BLOCK, bytes);
    if (e != cudaSuccess)
        return (int)e;
    if (per < 1)
        return (int)cudaErrorInvalidConfiguration;
    *grid = per * sms;
    *block = FT_GK_BLOCK;
    *smem = bytes;
    return 0;
}

extern "C" int ft_gk_step_config(int *grid, int *block, size_t *smem)
{
    return gk_config_of(gk_entry_get()->step, grid, block, smem);
}

extern "C" int ft_gk_step_launch(const ft_gk_params *p,
                                 const ft_gk_xparams *x, int grid, int block,
                                 size_t smem, void *stream)
{
    ft_gk_params cp = *p;
    ft_gk_xparams cx = *x;
    void *args[] = {&cp, &cx};
    return (int)cudaLaunchCooperativeKernel(gk_entry_get()->step,
                                            dim3(grid), dim3(block), args,
                                            gk_launch_smem(smem, 0),
                                            (cudaStream_t)stream);
}

extern "C" int ft_gk_xstep_config(int *grid, int *block, size_t *smem)
{
    return gk_config_of(gk_entry_get()->xstep, grid, block, smem);
}

extern "C" int ft_gk_xstep_launch(const ft_gk_params *p,
                                  const ft_gk_kxparams *k, int grid,
                                  int block, size_t smem, void *stream)
{
    ft_gk_params cp = *p;
    ft_gk_kxparams ck = *k;
    void *args[] = {&cp, &ck};
    return (int)cudaLaunchCooperativeKernel(gk_entry_get()->xstep,
                                            dim3(grid), dim3(block), args,
                                            gk_launch_smem(smem, k->spread),
                                            (cudaStream_t)stream);
}

/* The NCCL device-API shard kernel (search/xnccl.cuh): its shape, and
 * its launch with the grid cut to what it holds at once on this device
 * (its registers may differ from the one-GPU shard kernel's, whose grid
 * the engine was given).  The cut is made once per device. */
extern "C" int ft_gk_nstep_config(int *grid, int *block, size_t *smem)
{
    const void *fn = gk_entry_get()->nstep;
    if (fn == NULL)
        return (int)cudaErrorNotSupported;
    return gk_config_of(fn, grid, block, smem);
}

extern "C" int ft_gk_nstep_launch(const ft_gk_params *p,
                                  const ft_gk_kxparams *k,
                                  const ft_gk_nxparams *nx, int grid,
                                  int block, size_t smem, void *stream)
{
    static int most[64]; /* per device: 0 unknown, else the kernel's grid */
    const void *fn = gk_entry_get()->nstep;
    if (fn == NULL)
        return (int)cudaErrorNotSupported;
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess)
        return (int)e;
    int g = dev >= 0 && dev < 64 ? __atomic_load_n(&most[dev], __ATOMIC_RELAXED)
                                 : 0;
    if (g == 0) {
        int b;
        size_t s;
        int r = gk_config_of(fn, &g, &b, &s);
        if (r != 0)
            return r;
        if (dev >= 0 && dev < 64)
            __atomic_store_n(&most[dev], g, __ATOMIC_RELAXED);
    }
    ft_gk_params cp = *p;
    ft_gk_kxparams ck = *k;
    ft_gk_nxparams cn = *nx;
    void *args[] = {&cp, &ck, &cn};
    return (int)cudaLaunchCooperativeKernel(fn, dim3(grid < g ? grid : g),
                                            dim3(block), args,
                                            gk_launch_smem(smem, k->spread),
                                            (cudaStream_t)stream);
}

/* gk_counted runs enqueue(counter) on stream with a zeroed device
 * counter and stores the counter's final value in *out.  Synchronous. */
template <typename F>
static int gk_counted(unsigned long long *out, cudaStream_t st, F enqueue)
{
    unsigned long long *d = NULL;
    cudaError_t e = cudaMalloc((void **)&d, sizeof *d);
    if (e == cudaSuccess)
        e = cudaMemsetAsync(d, 0, sizeof *d, st);
    if (e == cudaSuccess)
        e = enqueue(d);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(out, d, sizeof *d, cudaMemcpyDeviceToHost, st);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(st);
    if (d)
        cudaFree(d);
    return (int)e;
}

extern "C" int ft_gk_cmap_count(const ft_trie_view *view,
                                const uint64_t *ctab, uint32_t min_deg,
                                unsigned long long *entries, void *stream)
{
    cudaStream_t st = (cudaStream_t)stream;
    return gk_counted(entries, st, [&](unsigned long long *d) {
        gk_cmap_count_k<<<4096, 256, 0, st>>>(*view, ctab, min_deg, d);
        return cudaGetLastError();
    });
}

extern "C" int ft_gk_cmap_build(const ft_trie_view *view,
                                const uint64_t *ctab, uint64_t *cmap,
                                uint64_t mask, uint32_t min_deg,
                                unsigned long long *bad, void *stream)
{
    cudaStream_t st = (cudaStream_t)stream;
    return gk_counted(bad, st, [&](unsigned long long *d) {
        cudaError_t e = cudaSuccess;
        for (int check = 0; check < 2 && e == cudaSuccess; check++) {
            gk_cmap_fill_k<<<4096, 256, 0, st>>>(*view, ctab, cmap, mask,
                                                 min_deg, check, d);
            e = cudaGetLastError();
        }
        return e;
    });
}

extern "C" int ft_gk_ctab_build(const ft_trie_view *view, uint64_t *ctab,
                                unsigned long long *bad, void *stream)
{
    cudaStream_t st = (cudaStream_t)stream;
    return gk_counted(bad, st, [&](unsigned long long *d) {
        gk_ctab_fill<<<4096, 256, 0, st>>>(*view, ctab);
        cudaError_t e = cudaGetLastError();
        if (e == cudaSuccess) {
            gk_ctab_check<<<4096, 256, 0, st>>>(*view, ctab, d);
            e = cudaGetLastError();
        }
        return e;
    });
}

extern "C" int ft_gk_config(int *grid, int *block, size_t *smem)
{
    const void *const *fns = gk_entry_get()->search;
    int e = gk_config_of(fns[0], grid, block, smem);
    for (int i = 1; e == 0 && i < 3; i++) {
        int g2 = 0, b2 = 0;
        size_t s2 = 0;
        e = gk_config_of(fns[i], &g2, &b2, &s2);
        if (e == 0 && g2 < *grid)
            *grid = g2; /* a grid every instance holds at once */
    }
    return e;
}

/* One graph per kernel instance (by its index in ft_gk_launch); dead:
 * a graph could not be made, launch without. */
struct ft_gk_graphs {
    int dead;
    struct {
        cudaGraph_t g;
        cudaGraphExec_t x;
        cudaGraphNode_t node;
    } e[3];
};

static cudaError_t gk_graph_make(ft_gk_graphs *gs, int i,
                                 const cudaKernelNodeParams *kp);
static const void *gk_instance(int i);

extern "C" ft_gk_graphs *ft_gk_graphs_new(int grid, int block, size_t smem)
{
    ft_gk_graphs *gs = (ft_gk_graphs *)calloc(1, sizeof(ft_gk_graphs));
    if (gs == NULL)
        return NULL;
    /* made with zeroed parameters, never launched with them */
    ft_gk_params zero;
    memset(&zero, 0, sizeof zero);
    void *args[] = {&zero};
    for (int i = 0; i < 3 && !gs->dead; i++) {
        cudaKernelNodeParams kp;
        memset(&kp, 0, sizeof kp);
        kp.func = (void *)gk_instance(i);
        kp.gridDim = dim3(grid);
        kp.blockDim = dim3(block);
        kp.sharedMemBytes = (unsigned int)gk_launch_smem(smem, i > 0);
        kp.kernelParams = args;
        if (gk_graph_make(gs, i, &kp) != cudaSuccess) {
            (void)cudaGetLastError();
            gs->dead = 1;
        }
    }
    return gs;
}

extern "C" void ft_gk_graphs_free(ft_gk_graphs *gs)
{
    if (gs == NULL)
        return;
    for (int i = 0; i < 3; i++) {
        if (gs->e[i].x)
            cudaGraphExecDestroy(gs->e[i].x);
        if (gs->e[i].g)
            cudaGraphDestroy(gs->e[i].g);
    }
    free(gs);
}

/* Instance i's graph of one cooperative kernel node with kp (its first
 * launch's parameters; each launch sets its own). */
static cudaError_t gk_graph_make(ft_gk_graphs *gs, int i,
                                 const cudaKernelNodeParams *kp)
{
    cudaError_t e = cudaGraphCreate(&gs->e[i].g, 0);
    if (e == cudaSuccess)
        e = cudaGraphAddKernelNode(&gs->e[i].node, gs->e[i].g, NULL, 0, kp);
    if (e == cudaSuccess) {
        cudaLaunchAttributeValue v;
        memset(&v, 0, sizeof v);
        v.cooperative = 1;
        e = cudaGraphKernelNodeSetAttribute(
            gs->e[i].node, cudaLaunchAttributeCooperative, &v);
    }
    if (e == cudaSuccess)
        e = cudaGraphInstantiate(&gs->e[i].x, gs->e[i].g, 0);
    if (e != cudaSuccess) {
        if (gs->e[i].g)
            cudaGraphDestroy(gs->e[i].g);
        gs->e[i].g = NULL;
        gs->e[i].x = NULL;
    }
    return e;
}

/* Kernel instance i: 0 lazy (or not spread), 1 spread, 2 fused. */
static const void *gk_instance(int i)
{
    return gk_entry_get()->search[i];
}

extern "C" int ft_gk_launch(const ft_gk_params *p, int grid, int block,
                            size_t smem, void *stream, ft_gk_graphs *gs)
{
    ft_gk_params copy = *p;
    void *args[] = {&copy};
    int i = p->fuse ? 2 : p->spread ? 1 : 0;
    size_t sm = gk_launch_smem(smem, p->spread);
    if (gs != NULL && !gs->dead) {
        cudaKernelNodeParams kp;
        memset(&kp, 0, sizeof kp);
        kp.func = (void *)gk_instance(i);
        kp.gridDim = dim3(grid);
        kp.blockDim = dim3(block);
        kp.sharedMemBytes = (unsigned int)sm;
        kp.kernelParams = args;
        cudaError_t e = cudaSuccess;
        if (gs->e[i].x == NULL) {
            e = gk_graph_make(gs, i, &kp);
            if (e != cudaSuccess) {
                /* no graphs here: every launch goes without */
                (void)cudaGetLastError();
                gs->dead = 1;
            }
        } else {
            /* (the arguments are copied into the graph) */
            e = cudaGraphExecKernelNodeSetParams(gs->e[i].x, gs->e[i].node,
                                                 &kp);
            if (e != cudaSuccess)
                return (int)e;
        }
        if (!gs->dead)
            return (int)cudaGraphLaunch(gs->e[i].x, (cudaStream_t)stream);
    }
    return (int)cudaLaunchCooperativeKernel(gk_instance(i), dim3(grid),
                                            dim3(block), args, sm,
                                            (cudaStream_t)stream);
}
