/*
 * group.c - the shard group: one engine per shard, driven one decode step
 * at a time (include/flashtrie.h, "Prepared requests and the engine
 * steps").
 *
 * Per step every shard expands its own beams and reports its local top-B
 * keys (docs/specification.md section 4's order with global parent ranks); the
 * exchange puts every shard's list in every shard's receive buffer; every shard
 * then keeps exactly its members of the global top-B.  That is exact: the
 * global top-B is a subset of the union of the local top-Bs, since a key
 * that B keys of its own shard beat is beaten by B keys globally.  At the
 * end every shard reports its local top-n hits (tokens backtraced by the
 * owning shard: a key's ancestors all live in its shard), the group merges
 * them by (score desc, order asc), which is a total order across shards
 * (orders hold global ranks), and attaches the values once.
 *
 * Exchanges (fti_exchange): CPU engines' lists are host memory, which the
 * engines, stepping together on shard 0's workers, read from each other
 * (nothing is copied).  GPU engines' lists are device memory and their
 * steps are enqueued on their streams; the exchange is enqueued too, so
 * nothing waits on the host until the results: either device copies on a
 * group stream (every engine's expand -> event -> the group stream gathers
 * all send lists into shard 0's recv and copies that to the others ->
 * event -> every engine's next launch), or one ncclAllGather per engine
 * (one rank per GPU), which puts rank s's list at recv + s * len as the
 * contract wants.
 *
 * GPU engines all on one GPU are searched by default as one forest
 * (FTI_EXCHANGE_FOREST, fti_engine_gpu_forest): shard 0's engine runs its
 * whole-batch launch over every shard's trie, each step's candidates of
 * all shards in one list and one selection (which is the merge above,
 * done once), so none of the steps, exchanges or merges below run; the
 * results carry global key indexes and get their values here
 * (forest_run).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "flashtrie.h"
#include "rt_impl.h"
#include "flashtrie/internal/clock.h"
#include "flashtrie/internal/rules.h"
#include "search_impl.h"
#include "steps.h"

#ifdef FT_HAVE_NCCL
#include <dlfcn.h>
#include <nccl.h>
#include <pthread.h>

#include "cluster_nccl.h"
/* NCCL is loaded at run time: its error string comes through the table. */
#define FT_NCCL_ERRSTR(r_) N.error_string(r_)
#endif
#ifdef FT_HAVE_CUDA
#include "flashtrie/internal/check.h"
#endif

/* How long a wait of the shard kernel may spin (clock64 cycles, about
 * two seconds at 2 GHz): far longer than any step, short enough that a
 * group whose launches cannot run side by side falls back soon. */
#define FTI_XKERNEL_TIMEOUT_CYCLES 4000000000ull
#define XPROF (1 + 4 * FT_MAX_T)

struct fti_group {
    size_t n;                  /* shards */
    ft_engine **eng;           /* [n] */
    const ft_index **idx;      /* [n] */
    uint64_t *base;            /* [n]: key index of each shard's first key */
    uint32_t max_beam;
    ft_engine_opts o;          /* every engine's options */
    ft_result *part;           /* [n * FTI_ENGINE_CHUNK] local hits */
    fti_exchange xk;           /* the exchange in use */
    const fti_prepared *const *creqs; /* run_chunk's requests (x_done) */
    ft_result *const *cres;
#ifdef FT_HAVE_CUDA
    int xdev;                  /* device of the group stream */
    cudaStream_t xs;           /* FTI_EXCHANGE_DEVICE: the copies */
    cudaEvent_t *ev;           /* [n]: engine s's expand done */
    cudaEvent_t xdone;         /* the copies done */
    uint64_t *lists[2];        /* shared lists (fti_group_opts.shared_lists) */
    /* opts.timing with device copies: per step, events at shard 0's
     * launch (A), at the last expand's end (B) and at the copies' end (C)
     * on the group stream; sums of B-A (kernels), C-B (exchange) and
     * A(t+1)-C(t) (waiting for the next launch) over all steps. */
    cudaEvent_t *tev;          /* [3 * FT_MAX_T] */
    double tsum[4];            /* kernels, exchange, gap, host per batch */
    uint64_t tsteps, tbatches;
    /* FTI_EXCHANGE_KERNEL: the shard kernel's barrier (fti_gpu_xbar):
     * xmem holds the arrival counter, the timeout word and the shards'
     * abort words; hxerr the mapped host word set with the timeout word;
     * xbase the counter's value before the next batch; xtotal the CTAs
     * of all shards' launches. */
    void *xmem;
    uint32_t *hxerr, *dhxerr;
    unsigned long long xbase;
    uint32_t xtotal;
    int xwarned;
    unsigned long long xtimeout; /* clock64 cycles */
    uint32_t xmode;              /* fti_group_opts.shard_mode */
    /* opts.timing with the kernel exchange: every shard's timeline
     * (ft_gk_kxparams.prof, XPROF words each) on the device and its
     * copy; sums of, per exchanged step, the last arrival to the last
     * departure (the barrier), the first arrival to the last (waiting
     * for the slowest shard), the work before the arrival (mean over
     * shards), and per batch the spread of the launches' starts; then
     * the work's parts (keep, expansion, selection: means over shards)
     * and the slowest shard's work */
    unsigned long long *dprof, *hprof;
    double xsum[8];
    uint64_t xsteps, xbatches;
    uint32_t xtmax; /* the last batch's steps */
#endif
#ifdef FT_HAVE_NCCL
    ncclComm_t *comm;          /* [n]: rank s = shard s */
#ifdef FTI_NCCL_DEVAPI
    /* FTI_EXCHANGE_NCCL_DEVICE (kernels/search/xnccl.cuh): per rank its
     * window's memory (ncclMemAlloc, nbytes each, the same layout on
     * every rank: the inbox at 0, the words at nwords, the step lists at
     * nlist[0] and nlist[1]), its window, its device communicator (opaque:
     * see cluster_nccl.h) and its LSA rank; nseq: every inbox word's
     * value before the next batch.  hxerr (above) is the mapped host word
     * a wait that ran out sets. */
    void **nbuf;
    ncclWindow_t *nwin;
    struct fti_ndc *ndc;
    uint32_t *nlsa;
    int nmade;                 /* windows registered (2: and devcomms) */
    size_t nbytes, nhdr;
    uint64_t nwords, nlist[2];
    unsigned long long nseq;
    int nwarned;
    int nver;                  /* libnccl's NCCL_VERSION_CODE */
#endif
#endif
};

#ifdef FTI_NCCL_DEVAPI
/* An ncclDevComm, opaque (cluster_nccl.h): room for it (NCCL 2.28.9's is
 * 200 bytes), and the stable fields at its head that the group reads
 * (NCCL's docs: rank, nRanks, lsaRank, lsaSize are stable). */
struct fti_ndc {
    _Alignas(64) unsigned char b[4096];
};
struct fti_ndc_head {
    int rank, nRanks;
    uint32_t nRanks_rcp32;
    int lsaRank, lsaSize;
};
#endif

#ifdef FT_HAVE_NCCL
/* NCCL is loaded at run time (libnccl.so.2), not linked: programs then
 * run, and package, where NCCL is absent or is not a system package (it
 * ships with the CUDA toolkit here); a group asking for it there gets
 * FT_ENOTSUP.  Only nccl.h is needed at build time. */
static fti_nccl_api N;
static int N_ok, N_mp; /* the group calls; the multi-process ones too */
#ifdef FTI_NCCL_DEVAPI
static int N_dev; /* the device API's host calls (NCCL 2.28 or later) */
#endif
static pthread_once_t nccl_once = PTHREAD_ONCE_INIT;

static void nccl_load(void)
{
    void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
        return;
    *(void **)&N.init_all = dlsym(h, "ncclCommInitAll");
    *(void **)&N.destroy = dlsym(h, "ncclCommDestroy");
    *(void **)&N.all_gather = dlsym(h, "ncclAllGather");
    *(void **)&N.group_start = dlsym(h, "ncclGroupStart");
    *(void **)&N.group_end = dlsym(h, "ncclGroupEnd");
    *(void **)&N.error_string = dlsym(h, "ncclGetErrorString");
    *(void **)&N.get_unique_id = dlsym(h, "ncclGetUniqueId");
    *(void **)&N.init_rank_config = dlsym(h, "ncclCommInitRankConfig");
    *(void **)&N.abort = dlsym(h, "ncclCommAbort");
    *(void **)&N.async_error = dlsym(h, "ncclCommGetAsyncError");
    *(void **)&N.broadcast = dlsym(h, "ncclBroadcast");
    *(void **)&N.send = dlsym(h, "ncclSend");
    *(void **)&N.recv = dlsym(h, "ncclRecv");
#ifdef FTI_NCCL_DEVAPI
    *(void **)&N.get_version = dlsym(h, "ncclGetVersion");
    *(void **)&N.mem_alloc = dlsym(h, "ncclMemAlloc");
    *(void **)&N.mem_free = dlsym(h, "ncclMemFree");
    *(void **)&N.win_register = dlsym(h, "ncclCommWindowRegister");
    *(void **)&N.win_deregister = dlsym(h, "ncclCommWindowDeregister");
    *(void **)&N.devcomm_create = dlsym(h, "ncclDevCommCreate");
    *(void **)&N.devcomm_destroy = dlsym(h, "ncclDevCommDestroy");
    N_dev = N.get_version && N.mem_alloc && N.mem_free && N.win_register &&
            N.win_deregister && N.devcomm_create && N.devcomm_destroy;
#endif
    N_ok = N.init_all && N.destroy && N.all_gather && N.group_start &&
           N.group_end && N.error_string;
    N_mp = N_ok && N.get_unique_id && N.init_rank_config && N.abort &&
           N.async_error && N.broadcast && N.send && N.recv;
}

static int nccl_available(void)
{
    pthread_once(&nccl_once, nccl_load);
    return N_ok;
}

const fti_nccl_api *fti_nccl(void)
{
    pthread_once(&nccl_once, nccl_load);
    return N_mp ? &N : NULL;
}
#endif

#ifdef FTI_NCCL_DEVAPI
/* ndev_teardown undoes ndev_setup (what of it was made): the device
 * communicators and the windows (collective calls: one NCCL group over
 * every rank), the memory, the lists bound to the engines. */
static void ndev_teardown(fti_group *g)
{
    if (g->nbuf == NULL)
        return;
    if (g->nmade >= 2) {
        N.group_start();
        for (size_t s = 0; s < g->n; s++)
            N.devcomm_destroy(g->comm[s], g->ndc[s].b);
        N.group_end();
    }
    if (g->nmade >= 1) {
        N.group_start();
        for (size_t s = 0; s < g->n; s++)
            if (g->nwin[s])
                N.win_deregister(g->comm[s], g->nwin[s]);
        N.group_end();
    }
    for (size_t s = 0; s < g->n; s++) {
        if (g->eng && g->eng[s])
            fti_engine_gpu_bind_lists(g->eng[s], NULL, NULL, 0);
        if (g->nbuf[s]) {
            cudaSetDevice(fti_engine_device(g->eng[s]));
            N.mem_free(g->nbuf[s]);
        }
    }
    (void)cudaGetLastError();
    free(g->nbuf);
    free(g->nwin);
    free(g->ndc);
    free(g->nlsa);
    if (g->hxerr && g->xs == NULL) { /* made by ndev_setup */
        cudaFreeHost(g->hxerr);
        g->hxerr = g->dhxerr = NULL;
    }
    g->nbuf = NULL;
    g->nwin = NULL;
    g->ndc = NULL;
    g->nlsa = NULL;
    g->nmade = 0;
}

/* vmm_note writes whether GPU dev offers CUDA's virtual memory management
 * (cuMemCreate and its family: NCCL's symmetric memory, which its device
 * API needs, is built on it), for
 * the reason a device communicator could not be made.  The driver's
 * attribute comes through the runtime's entry point (no libcuda link). */
static void vmm_note(int dev, char *buf, size_t len)
{
    typedef int (*get_fn)(int *, int);
    typedef int (*attr_fn)(int *, int, int);
    void *pg = NULL, *pa = NULL;
    enum cudaDriverEntryPointQueryResult qg, qa;
    int cu = 0, vmm = -1;
    if (cudaGetDriverEntryPointByVersion("cuDeviceGet", &pg, 12000,
                                         cudaEnableDefault, &qg) ==
            cudaSuccess &&
        cudaGetDriverEntryPointByVersion("cuDeviceGetAttribute", &pa, 12000,
                                         cudaEnableDefault, &qa) ==
            cudaSuccess &&
        qg == cudaDriverEntryPointSuccess &&
        qa == cudaDriverEntryPointSuccess && pg && pa &&
        ((get_fn)pg)(&cu, dev) == 0 &&
        /* CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED */
        ((attr_fn)pa)(&vmm, 102, cu) != 0)
        vmm = -1;
    (void)cudaGetLastError();
    snprintf(buf, len, "CUDA virtual memory management on GPU %d: %s", dev,
             vmm < 0 ? "unknown" : vmm ? "yes" : "no (NCCL has no symmetric "
             "memory without it)");
}

/* lists_cap is the candidates of one step's shared lists: a full batch
 * (max_batch, at most a chunk) of full beams from every shard. */
static size_t lists_cap(const fti_group *g)
{
    return g->n * fti_gpu_slots(g->o.max_batch) *
           (size_t)fti_gpu_max_beam(g->o.max_beam);
}

/* ndev_setup makes the NCCL device-API exchange over the group's
 * communicators (one rank per GPU, g->comm made): checks what it needs
 * (the library's device API and version, this build's kernel, P2P
 * between every pair of GPUs), allocates every rank's window memory
 * (ncclMemAlloc), registers the windows (ncclCommWindowRegister,
 * NCCL_WIN_COLL_SYMMETRIC) and creates the device communicators
 * (ncclDevCommCreate, no extra resources: the kernel's meeting lives in
 * the windows), checks that every rank is in the one LSA team, and binds
 * the step lists in the windows to the engines.  Returns 1, or 0 with
 * the reason in why (everything undone). */
static int ndev_setup(fti_group *g, int deny, char *why, size_t len)
{
    char w[200];
    if (deny) {
        snprintf(why, len, "turned off for a test (nccl_device_deny)");
        return 0;
    }
    if (!N_dev) {
        snprintf(why, len, "libnccl.so.2 has no device API "
                 "(ncclDevCommCreate, ncclCommWindowRegister: NCCL 2.28 or "
                 "later)");
        return 0;
    }
    /* The kernel reads only the head of the device communicator (rank,
     * nRanks, lsaRank, lsaSize) and of the window (lsaFlatBase, stride4G,
     * through ncclGetLsaPointer), and the requirements go in zeroed.
     * Those fields sit at the same offsets from 2.28.3, the first release
     * with the device API, to 2.28.9 (compared in NCCL's sources at tags
     * v2.28.3-1 and v2.28.9-1: later 2.28 releases only appended fields),
     * and room is kept for the largest communicator of the headers built
     * with: any 2.28 from 2.28.3 on is taken; another minor is not. */
    int v = 0;
    if (N.get_version(&v) != ncclSuccess || v < 22803 ||
        v / 100 != NCCL_VERSION_CODE / 100 || v > NCCL_VERSION_CODE) {
        snprintf(why, len, "libnccl.so.2 is %d.%d.%d and this build's "
                 "device-API kernel takes 2.28.3 to %d.%d.%d (the device "
                 "communicator's layout follows the version)",
                 v / 10000, v / 100 % 100, v % 100, NCCL_MAJOR, NCCL_MINOR,
                 NCCL_PATCH);
        return 0;
    }
    g->nver = v;
    for (size_t s = 0; s < g->n; s++)
        if (!fti_engine_gpu_nccl_kernel(g->eng[s], w, sizeof w)) {
            snprintf(why, len, "shard %zu: %s", s, w);
            return 0;
        }
    for (size_t a = 0; a < g->n; a++)
        for (size_t b = 0; b < g->n; b++) {
            int da = fti_engine_device(g->eng[a]);
            int db = fti_engine_device(g->eng[b]), ok = 0;
            if (a == b)
                continue;
            if (cudaDeviceCanAccessPeer(&ok, da, db) != cudaSuccess || !ok) {
                (void)cudaGetLastError();
                snprintf(why, len, "GPU %d cannot load from and store to GPU "
                         "%d's memory (no P2P)", da, db);
                return 0;
            }
        }
    g->nbuf = calloc(g->n, sizeof *g->nbuf);
    g->nwin = calloc(g->n, sizeof *g->nwin);
    g->ndc = calloc(g->n, sizeof *g->ndc);
    g->nlsa = calloc(g->n, sizeof *g->nlsa);
    if (!g->nbuf || !g->nwin || !g->ndc || !g->nlsa) {
        snprintf(why, len, "out of memory");
        goto fail;
    }
    /* The layout (ft_gk_nxparams): the inbox, the words, the two lists,
     * each as large as the one-GPU group's shared lists. */
    size_t cap = lists_cap(g);
    g->nwords = 8 * g->n;
    g->nhdr = (g->nwords + 16 + 4095) & ~(size_t)4095;
    g->nlist[0] = g->nhdr;
    g->nlist[1] = g->nhdr + ((cap * 8 + 4095) & ~(size_t)4095);
    g->nbytes = g->nlist[1] + ((cap * 8 + 4095) & ~(size_t)4095);
    /* whole pages of the VMM granularity (2 MiB on these GPUs) */
    g->nbytes = (g->nbytes + ((size_t)2 << 20) - 1) & ~(((size_t)2 << 20) - 1);
    for (size_t s = 0; s < g->n; s++) {
        int d = fti_engine_device(g->eng[s]);
        ncclResult_t r = ncclSuccess;
        if (cudaSetDevice(d) != cudaSuccess ||
            (r = N.mem_alloc(&g->nbuf[s], g->nbytes)) != ncclSuccess ||
            cudaMemset(g->nbuf[s], 0, g->nhdr) != cudaSuccess ||
            cudaDeviceSynchronize() != cudaSuccess) {
            (void)cudaGetLastError();
            snprintf(why, len, "ncclMemAlloc of %zu bytes on GPU %d failed: "
                     "%s", g->nbytes, d, r != ncclSuccess ? N.error_string(r)
                                                          : "a CUDA error");
            goto fail;
        }
    }
    ncclResult_t r = N.group_start(), e;
    for (size_t s = 0; s < g->n && r == ncclSuccess; s++)
        r = N.win_register(g->comm[s], g->nbuf[s], g->nbytes, &g->nwin[s],
                           NCCL_WIN_COLL_SYMMETRIC);
    e = N.group_end();
    g->nmade = 1;
    if (r != ncclSuccess || e != ncclSuccess) {
        snprintf(why, len, "ncclCommWindowRegister failed: %s (symmetric "
                 "memory needs CUDA VMM, NCCL_CUMEM_ENABLE, and P2P)",
                 N.error_string(r != ncclSuccess ? r : e));
        goto fail;
    }
    for (size_t s = 0; s < g->n; s++)
        if (g->nwin[s] == NULL) {
            /* (NCCL registers nothing, and says success, where the
             * communicator has no symmetric memory support) */
            snprintf(why, len, "ncclCommWindowRegister gave rank %zu no "
                     "window: the communicator has no symmetric memory "
                     "(NCCL_WIN_ENABLE, NCCL_CUMEM_ENABLE, direct P2P "
                     "between every pair of GPUs)", s);
            goto fail;
        }
    /* no requirements: zeroed (ncclDevCommRequirements_t is 56 bytes in
     * 2.28; the room is larger) */
    static const _Alignas(64) unsigned char zreq[1024];
    r = N.group_start();
    for (size_t s = 0; s < g->n && r == ncclSuccess; s++)
        r = N.devcomm_create(g->comm[s], zreq, g->ndc[s].b);
    e = N.group_end();
    if (r != ncclSuccess || e != ncclSuccess) {
        vmm_note(fti_engine_device(g->eng[0]), w, sizeof w);
        /* NCCL before 2.28.7 makes symmetric memory depend on its P2P
         * check among local ranks, which one rank alone fails (read in
         * NCCL's sources, tags v2.28.3-1 and v2.28.7-1) */
        snprintf(why, len, "ncclDevCommCreate failed: %.40s (it needs a "
                 "communicator with symmetric memory%s; %.120s)",
                 N.error_string(r != ncclSuccess ? r : e),
                 g->n == 1 && g->nver < 22807
                     ? ", which NCCL before 2.28.7 gives no one-rank "
                       "communicator"
                     : "",
                 w);
        goto fail;
    }
    g->nmade = 2;
    for (size_t s = 0; s < g->n; s++) {
        struct fti_ndc_head h;
        memcpy(&h, g->ndc[s].b, sizeof h);
        if (h.rank != (int)s || h.nRanks != (int)g->n) {
            snprintf(why, len, "the device communicator of rank %zu says "
                     "rank %d of %d: not the layout of NCCL %d.%d's", s,
                     h.rank, h.nRanks, NCCL_MAJOR, NCCL_MINOR);
            goto fail;
        }
        if (h.lsaSize != (int)g->n || h.lsaRank < 0 ||
            h.lsaRank >= (int)g->n) {
            snprintf(why, len, "the LSA team of rank %zu holds %d of the "
                     "%zu ranks (GPUs without load/store access to each "
                     "other)", s, h.lsaSize, g->n);
            goto fail;
        }
        g->nlsa[s] = (uint32_t)h.lsaRank;
    }
    if (g->hxerr == NULL) {
        if (cudaHostAlloc((void **)&g->hxerr, 4,
                          cudaHostAllocMapped | cudaHostAllocPortable) !=
                cudaSuccess ||
            cudaHostGetDevicePointer((void **)&g->dhxerr, g->hxerr, 0) !=
                cudaSuccess) {
            (void)cudaGetLastError();
            snprintf(why, len, "the mapped host word cannot be made");
            goto fail;
        }
        *(volatile uint32_t *)g->hxerr = 0;
    }
    for (size_t s = 0; s < g->n; s++) {
        unsigned char *m = g->nbuf[s];
        fti_engine_gpu_bind_lists(g->eng[s], (uint64_t *)(m + g->nlist[0]),
                                  (uint64_t *)(m + g->nlist[1]), cap);
    }
    g->nseq = 0;
    return 1;
fail:
    ndev_teardown(g);
    return 0;
}

/* ndev_reset zeroes every window's inbox and words after a batch that
 * gave up (every launch has ended: the engines finished or were waited
 * for). */
static void ndev_reset(fti_group *g)
{
    for (size_t s = 0; s < g->n; s++) {
        cudaSetDevice(fti_engine_device(g->eng[s]));
        cudaStreamSynchronize((cudaStream_t)fti_engine_stream(g->eng[s]));
    }
    for (size_t s = 0; s < g->n; s++) {
        cudaSetDevice(fti_engine_device(g->eng[s]));
        cudaMemset(g->nbuf[s], 0, g->nhdr);
        cudaDeviceSynchronize();
    }
    (void)cudaGetLastError();
    *(volatile uint32_t *)g->hxerr = 0;
    g->nseq = 0;
}
#endif

void fti_group_opts_init(fti_group_opts *gopts)
{
    memset(gopts, 0, sizeof *gopts);
    gopts->exchange = FTI_EXCHANGE_AUTO;
    gopts->split_grid = 1;
    gopts->shared_lists = 1;
    gopts->nccl_device = 0; /* until measured on several GPUs (issue 36) */
}

fti_exchange fti_group_exchange(const fti_group *g) { return g->xk; }

void fti_group_timing_report(fti_group *g, char *buf, size_t len)
{
    if (len)
        buf[0] = 0;
#ifdef FT_HAVE_CUDA
    if (g->dprof && g->xbatches && len) {
        double st = g->xsteps ? 1e6 / (double)g->xsteps : 0;
        int o = snprintf(buf, len, "group of %zu (kernel exchange), %llu "
                         "batches, %llu exchanged steps, us per step: "
                         "barrier (last arrival to last departure, CTA 0 "
                         "of each shard) %.2f, waiting for the slowest "
                         "shard %.2f, work before the barrier %.1f (keep "
                         "%.1f, expansion %.1f, selection %.1f; the "
                         "slowest shard's %.1f); spread of the launches' "
                         "starts %.1f us per batch\n",
                         g->n, (unsigned long long)g->xbatches,
                         (unsigned long long)g->xsteps, g->xsum[0] * st,
                         g->xsum[1] * st, g->xsum[2] * st, g->xsum[4] * st,
                         g->xsum[5] * st, g->xsum[6] * st, g->xsum[7] * st,
                         g->xsum[3] * 1e6 / (double)g->xbatches);
        memset(g->xsum, 0, sizeof g->xsum);
        g->xsteps = g->xbatches = 0;
        if (o < 0 || (size_t)o >= len)
            return;
        buf += o;
        len -= (size_t)o;
    }
    if (g->tev == NULL || g->tsteps == 0 || len == 0)
        return;
    double st = 1e6 / (double)g->tsteps;
    snprintf(buf, len, "group of %zu (device exchange, %s), %llu batches, "
             "%llu steps, us per step: kernels %.1f, exchange %.1f, to the "
             "next launch %.1f; host per batch %.1f us\n", g->n,
             g->lists[0] ? "shared lists" : "copies",
             (unsigned long long)g->tbatches, (unsigned long long)g->tsteps,
             g->tsum[0] * st, g->tsum[1] * st, g->tsum[2] * st,
             g->tsum[3] * 1e6 / (double)g->tbatches);
    memset(g->tsum, 0, sizeof g->tsum); /* the sums restart */
    g->tsteps = g->tbatches = 0;
#else
    (void)g;
#endif
}

ft_engine *fti_group_engine(fti_group *g, size_t s)
{
    return s < g->n ? g->eng[s] : NULL;
}

size_t fti_group_shards(const fti_group *g) { return g->n; }

void fti_group_close(fti_group *g)
{
    if (g == NULL)
        return;
#ifdef FTI_NCCL_DEVAPI
    ndev_teardown(g);
#endif
#ifdef FT_HAVE_NCCL
    if (g->comm)
        for (size_t s = 0; s < g->n; s++)
            if (g->comm[s])
                N.destroy(g->comm[s]);
    free(g->comm);
#endif
#ifdef FT_HAVE_CUDA
    if (g->xs || g->ev) {
        for (size_t s = 0; g->ev && s < g->n; s++)
            if (g->ev[s]) {
                cudaSetDevice(fti_engine_device(g->eng[s]));
                cudaEventDestroy(g->ev[s]);
            }
        cudaSetDevice(g->xdev);
        for (int i = 0; g->tev && i < 3 * (int)FT_MAX_T; i++)
            if (g->tev[i])
                cudaEventDestroy(g->tev[i]);
        free(g->tev);
        cudaFree(g->lists[0]);
        cudaFree(g->lists[1]);
        cudaFree(g->xmem);
        cudaFree(g->dprof);
        free(g->hprof);
        if (g->hxerr)
            cudaFreeHost(g->hxerr);
        if (g->xdone)
            cudaEventDestroy(g->xdone);
        if (g->xs)
            cudaStreamDestroy(g->xs);
        free(g->ev);
    }
#endif
    for (size_t s = 0; s < g->n; s++)
        ft_engine_close(g->eng ? g->eng[s] : NULL);
    if (g->part)
        for (size_t i = 0; i < g->n * FTI_ENGINE_CHUNK; i++)
            ft_result_free(&g->part[i]);
    free(g->part);
    free(g->eng);
    free(g->idx);
    free(g->base);
    free(g);
}

/* kernel_fits says whether the shard kernel (FTI_EXCHANGE_KERNEL) can
 * run this group: GPU engines on one GPU whose launches, each on its
 * share of the grid, fit the GPU's resident CTAs together (or they could
 * wait for each other forever: the waits are bounded, but the batch would
 * be lost time), and lists shared, not copied.  It logs once per process
 * why not (for a forced kernel exchange: always). */
static int kernel_fits(fti_group *g, int shared, fti_exchange want)
{
#ifdef FT_HAVE_CUDA
    static int logged;
    char why[160] = "";
    uint64_t total = 0;
    int full = 0;
    for (size_t s = 0; s < g->n && !why[0]; s++) {
        int use, f;
        if (fti_engine_gpu_xgrid(g->eng[s], &use, &f) != FT_OK || f < 1)
            snprintf(why, sizeof why, "the shard kernel cannot be launched");
        else if (use < 1)
            snprintf(why, sizeof why, "%zu shards outnumber the GPU's %d "
                     "resident CTAs", g->n, f);
        total += (uint64_t)use;
        full = f;
    }
    if (!why[0] && total > (uint64_t)full)
        snprintf(why, sizeof why, "the shards' grids (%llu CTAs) exceed the "
                 "GPU's %d resident CTAs (split_grid off?)",
                 (unsigned long long)total, full);
    if (!why[0] && !shared)
        snprintf(why, sizeof why, "the lists are copied (shared_lists off)");
    if (!why[0])
        return 1;
    if (want == FTI_EXCHANGE_KERNEL || !logged) {
        logged = 1;
        FT_LOGF(FT_LOG_INFO, "shard group: exchange kernel not used, device "
                "copies instead: %s", why);
    }
    return 0;
#else
    (void)g;
    (void)shared;
    (void)want;
    return 0;
#endif
}

/* exchange_setup chooses (or checks the forced) exchange and makes what
 * it needs: streams and events, or the NCCL communicators. */
static int exchange_setup(fti_group *g, fti_exchange want, int shared,
                          const fti_group_opts *gopts, char *errbuf,
                          size_t errlen)
{
    size_t ngpu = 0, distinct = 1;
    for (size_t s = 0; s < g->n; s++) {
        int d = fti_engine_device(g->eng[s]);
        ngpu += d >= 0;
        for (size_t r = 0; r < s; r++)
            if (fti_engine_device(g->eng[r]) == d)
                distinct = 0;
    }
    int same = 1;
    for (size_t s = 1; s < g->n; s++)
        same &= fti_engine_device(g->eng[s]) == fti_engine_device(g->eng[0]);
    RT_RETURN_ERROR_IF(ngpu != 0 && ngpu != g->n, FT_ENOTSUP,
                       "shards: a group cannot mix CPU and GPU engines");
    fti_exchange x = want;
    RT_RETURN_ERROR_IF(x == FTI_EXCHANGE_KERNEL && (ngpu == 0 || !same),
                       FT_ENOTSUP, "exchange: kernel needs GPU engines on "
                       "one GPU");
    RT_RETURN_ERROR_IF(x == FTI_EXCHANGE_FOREST && (ngpu == 0 || !same),
                       FT_ENOTSUP, "exchange: forest needs GPU engines on "
                       "one GPU");
    if ((x == FTI_EXCHANGE_FOREST || x == FTI_EXCHANGE_AUTO) && ngpu != 0 &&
        same) {
        /* One launch over every shard's trie: no exchange to make. */
        char why[200] = "";
        int rc = fti_engine_gpu_forest(g->eng[0], g->eng, g->n, g->base, why,
                                       sizeof why);
        if (rc == FT_OK) {
            g->xk = FTI_EXCHANGE_FOREST;
            FT_LOGF(FT_LOG_INFO, "shard group: %zu shards on GPU %d searched "
                    "as one forest (one launch a batch, no exchange)", g->n,
                    fti_engine_device(g->eng[0]));
            return FT_OK;
        }
        RT_RETURN_ERROR_IF(x == FTI_EXCHANGE_FOREST ||
                               ft_engine_failed(g->eng[0]),
                           rc == FT_ENOMEM ? FT_ENOMEM
                           : rc == FT_ECUDA ? FT_ECUDA
                                            : FT_ENOTSUP,
                           "exchange: forest: %s", why);
        FT_LOGF(FT_LOG_INFO, "shard group: no forest (%s): the shard "
                "kernel or device copies instead", why);
    }
    if (x == FTI_EXCHANGE_AUTO && ngpu != 0 && same)
        x = FTI_EXCHANGE_KERNEL;
    if (x == FTI_EXCHANGE_KERNEL && !kernel_fits(g, shared, want))
        x = FTI_EXCHANGE_DEVICE;
    if (x == FTI_EXCHANGE_AUTO) {
        if (ngpu == 0)
            x = FTI_EXCHANGE_HOST;
        else if (same)
            x = FTI_EXCHANGE_DEVICE;
        else {
#ifdef FT_HAVE_NCCL
            x = distinct && nccl_available()
                    ? (gopts && gopts->nccl_device ? FTI_EXCHANGE_NCCL_DEVICE
                                                   : FTI_EXCHANGE_NCCL)
                    : FTI_EXCHANGE_DEVICE;
#else
            x = FTI_EXCHANGE_DEVICE;
#endif
        }
    }
    RT_RETURN_ERROR_IF(x == FTI_EXCHANGE_HOST && ngpu > 0, FT_ENOTSUP,
                       "exchange: host needs CPU engines (GPU lists are in "
                       "device memory)");
    int nccl = x == FTI_EXCHANGE_NCCL || x == FTI_EXCHANGE_NCCL_DEVICE;
    const char *xname = x == FTI_EXCHANGE_NCCL          ? "nccl"
                        : x == FTI_EXCHANGE_NCCL_DEVICE ? "nccl-device"
                                                        : "device";
    RT_RETURN_ERROR_IF(x != FTI_EXCHANGE_HOST && ngpu == 0, FT_ENOTSUP,
                       "exchange: %s needs GPU engines", xname);
#ifndef FT_HAVE_NCCL
    RT_RETURN_ERROR_IF(nccl, FT_ENOTSUP,
                       "exchange: %s: this build has no NCCL", xname);
#endif
    RT_RETURN_ERROR_IF(nccl && !distinct, FT_ENOTSUP,
                       "exchange: %s needs one shard per GPU", xname);
#ifdef FT_HAVE_NCCL
    RT_RETURN_ERROR_IF(nccl && !nccl_available(), FT_ENOTSUP,
                       "exchange: %s: libnccl.so.2 cannot be loaded", xname);
#endif
    g->xk = x;
    if (x == FTI_EXCHANGE_HOST)
        return FT_OK;
#ifdef FT_HAVE_CUDA
    int rc = FT_OK;
    g->xdev = fti_engine_device(g->eng[0]);
    if (x == FTI_EXCHANGE_DEVICE || x == FTI_EXCHANGE_KERNEL) {
        g->ev = calloc(g->n, sizeof *g->ev);
        if (g->ev == NULL)
            return FT_ENOMEM;
        for (size_t s = 0; s < g->n; s++) {
            FT_CUDA_CHECK_GOTO(cudaSetDevice(fti_engine_device(g->eng[s])), rc,
                               fail);
            FT_CUDA_CHECK_GOTO(cudaEventCreateWithFlags(
                                   &g->ev[s], cudaEventDisableTiming), rc,
                               fail);
        }
        FT_CUDA_CHECK_GOTO(cudaSetDevice(g->xdev), rc, fail);
        FT_CUDA_CHECK_GOTO(cudaStreamCreateWithFlags(&g->xs,
                                                     cudaStreamNonBlocking), rc,
                           fail);
        FT_CUDA_CHECK_GOTO(cudaEventCreateWithFlags(&g->xdone,
                                                    cudaEventDisableTiming), rc,
                           fail);
        if ((shared && same) || x == FTI_EXCHANGE_KERNEL) {
            /* One list buffer per step parity for all shards: room for a
             * full batch of full beams from every shard. */
            size_t cap = lists_cap(g);
            for (int i = 0; i < 2; i++)
                FT_CUDA_CHECK_GOTO(cudaMalloc((void **)&g->lists[i], cap * 8), rc,
                                   fail);
            for (size_t s = 0; s < g->n; s++)
                fti_engine_gpu_bind_lists(g->eng[s], g->lists[0], g->lists[1],
                                          cap);
        }
        if (x == FTI_EXCHANGE_KERNEL) {
            /* the barrier's words, zeroed; the host's copy of the
             * timeout word */
            size_t bytes = 16 + 4 * g->n;
            FT_CUDA_CHECK_GOTO(cudaMalloc(&g->xmem, bytes), rc, fail);
            FT_CUDA_CHECK_GOTO(cudaMemset(g->xmem, 0, bytes), rc, fail);
            FT_CUDA_CHECK_GOTO(cudaHostAlloc((void **)&g->hxerr, 4,
                                             cudaHostAllocMapped), rc, fail);
            *(volatile uint32_t *)g->hxerr = 0;
            FT_CUDA_CHECK_GOTO(cudaHostGetDevicePointer((void **)&g->dhxerr,
                                                        g->hxerr, 0), rc, fail);
            FT_CUDA_CHECK_GOTO(cudaDeviceSynchronize(), rc, fail);
            g->xtotal = 0;
            for (size_t s = 0; s < g->n; s++) {
                int use, full;
                fti_engine_gpu_xgrid(g->eng[s], &use, &full);
                g->xtotal += (uint32_t)use;
            }
            if (g->o.timing) {
                g->hprof = calloc(g->n * XPROF, sizeof *g->hprof);
                if (g->hprof == NULL)
                    return FT_ENOMEM;
                FT_CUDA_CHECK_GOTO(cudaMalloc((void **)&g->dprof,
                                              g->n * XPROF * 8), rc, fail);
            }
        }
        if (g->o.timing) {
            g->tev = calloc(3 * FT_MAX_T, sizeof *g->tev);
            if (g->tev == NULL)
                return FT_ENOMEM;
            for (int i = 0; i < 3 * (int)FT_MAX_T; i++)
                FT_CUDA_CHECK_GOTO(cudaEventCreate(&g->tev[i]), rc, fail);
        }
    }
#endif
#ifdef FT_HAVE_NCCL
    if (nccl) {
        int *devs = calloc(g->n, sizeof *devs);
        g->comm = calloc(g->n, sizeof *g->comm);
        if (devs == NULL || g->comm == NULL) {
            free(devs);
            return FT_ENOMEM;
        }
        for (size_t s = 0; s < g->n; s++)
            devs[s] = fti_engine_device(g->eng[s]);
        ncclResult_t r = N.init_all(g->comm, (int)g->n, devs);
        free(devs);
        if (r != ncclSuccess) {
            free(g->comm);
            g->comm = NULL;
            RT_RETURN_ERROR_IF(1, FT_ECUDA, "exchange: nccl: "
                               "ncclCommInitAll over %zu GPUs failed: %s",
                               g->n, N.error_string(r));
        }
    }
    if (x == FTI_EXCHANGE_NCCL_DEVICE) {
        /* The device API where it can be set up, else the host-driven
         * all-gather over the same communicators: chosen here, logged. */
        char why[320] = "";
#ifdef FTI_NCCL_DEVAPI
        int ok = ndev_setup(g, gopts ? gopts->nccl_device_deny : 0, why,
                            sizeof why);
#else
        int ok = 0;
        snprintf(why, sizeof why, "this build's nccl.h (%d.%d.%d) is older "
                 "than 2.28 (no device API)", NCCL_MAJOR, NCCL_MINOR,
                 NCCL_PATCH);
#endif
        if (ok) {
#ifdef FTI_NCCL_DEVAPI
            FT_LOGF(FT_LOG_INFO, "shard group: %zu GPUs exchange their lists "
                    "inside the kernel through NCCL's device API (NCCL "
                    "%d.%d.%d; symmetric windows of %zu bytes, LSA stores, a "
                    "device barrier)", g->n, g->nver / 10000,
                    g->nver / 100 % 100, g->nver % 100, g->nbytes);
#endif
        } else {
            FT_LOGF(want == FTI_EXCHANGE_NCCL_DEVICE ? FT_LOG_WARN
                                                     : FT_LOG_INFO,
                    "shard group: NCCL device API not used, ncclAllGather "
                    "instead: %s", why);
            g->xk = x = FTI_EXCHANGE_NCCL;
        }
    }
#endif
    return FT_OK;
#ifdef FT_HAVE_CUDA
fail:
    RT_ERRF(errbuf, errlen, "exchange: creating the group's CUDA stream and "
                            "events failed");
    return rc;
#endif
}

int fti_group_open(fti_group **out, const ft_index *const *shards,
                   size_t nshards, const ft_engine_opts *opts, char *errbuf,
                   size_t errlen)
{
    return fti_group_open_ex(out, shards, nshards, opts, NULL, errbuf, errlen);
}

int fti_group_open_ex(fti_group **out, const ft_index *const *shards,
                      size_t nshards, const ft_engine_opts *opts,
                      const fti_group_opts *gopts, char *errbuf, size_t errlen)
{
    *out = NULL;
    if (nshards == 0 || nshards > 4096) {
        if (errbuf && errlen)
            snprintf(errbuf, errlen, "shards: a group needs 1..4096 shards, "
                                     "got %zu", nshards);
        return FT_EINVAL;
    }
    fti_group *g = calloc(1, sizeof *g);
    if (g == NULL)
        return FT_ENOMEM;
    g->n = nshards;
    g->eng = calloc(nshards, sizeof *g->eng);
    g->idx = calloc(nshards, sizeof *g->idx);
    g->base = calloc(nshards, sizeof *g->base);
    g->part = calloc(nshards * FTI_ENGINE_CHUNK, sizeof *g->part);
    if (!g->eng || !g->idx || !g->base || !g->part) {
        fti_group_close(g);
        return FT_ENOMEM;
    }
    ft_engine_opts o;
    if (opts)
        o = *opts;
    else
        ft_engine_opts_init(&o);
    g->max_beam = o.max_beam;
    uint64_t base = 0;
    for (size_t s = 0; s < nshards; s++) {
        g->idx[s] = shards[s];
        g->base[s] = base;
        base += ft_index_keys(shards[s]);
        char e[256] = "";
        ft_engine_opts os = o;
        if (gopts && gopts->devices)
            os.device = gopts->devices[s];
        /* CPU engines step together on shard 0's workers
         * (fti_engines_step_*): the others need none. */
        if (s > 0 && o.kind == FT_ENGINE_CPU)
            os.threads = 1;
        int rc = ft_engine_open(&g->eng[s], shards[s], &os, e, sizeof e);
        if (rc != FT_OK) {
            if (errbuf && errlen)
                snprintf(errbuf, errlen, "shard %zu: %s", s, e);
            fti_group_close(g);
            return rc;
        }
    }
    g->o = o;
    if (o.kind == FT_ENGINE_GPU && (gopts == NULL || gopts->split_grid)) {
        /* Engines that share a GPU share its grid (see fti_group_opts). */
        for (size_t s = 0; s < nshards; s++) {
            uint32_t ways = 0;
            for (size_t r = 0; r < nshards; r++)
                ways += fti_engine_device(g->eng[r]) ==
                        fti_engine_device(g->eng[s]);
            fti_engine_gpu_share(g->eng[s], ways);
        }
    }
#ifdef FT_HAVE_CUDA
    g->xtimeout = gopts && gopts->kernel_timeout ? gopts->kernel_timeout
                                                 : FTI_XKERNEL_TIMEOUT_CYCLES;
    g->xmode = gopts ? gopts->shard_mode : 0;
#endif
    int rc = exchange_setup(g, gopts ? gopts->exchange : FTI_EXCHANGE_AUTO,
                            gopts ? gopts->shared_lists : 1, gopts, errbuf,
                            errlen);
    if (rc != FT_OK) {
        fti_group_close(g);
        return rc;
    }
    *out = g;
    return FT_OK;
}

/* exchange_host has nothing to copy: the group's CPU engines step
 * together (fti_engines_step_keep), each reading the others' lists where
 * they were written. */
static int exchange_host(fti_group *g)
{
    (void)g;
    return FT_OK;
}

#ifdef FT_HAVE_CUDA
/* exchange_device enqueues the exchange on the group stream: it waits for
 * every engine's expand, then (own recv buffers) gathers every send list
 * into shard 0's recv (n copies) and copies that whole to the other
 * shards' recv (n - 1 copies, instead of n * (n - 1) small ones), or
 * (shared lists) copies nothing: each shard wrote its list into the
 * step's shared buffer.  Every engine's stream waits for the group stream
 * before its next launch, which keeps from recv and then writes send:
 * with shared lists the other parity's buffer, which nobody reads any
 * more, since every shard's keep from it ran in the launch the group
 * stream waited for. */
static int exchange_device(fti_group *g, uint32_t t)
{
    int rc = FT_OK;
    uint64_t *send, *recv, *recv0 = NULL;
    size_t len = 0, l;
    for (size_t s = 0; s < g->n; s++) {
        if ((rc = fti_engine_step_buffers(g->eng[s], &send, &recv, &l)) !=
            FT_OK)
            return rc;
        if (s == 0) {
            len = l;
            recv0 = recv;
        } else if (l != len) {
            return FT_EINTERNAL;
        }
        FT_CUDA_CHECK_GOTO(cudaSetDevice(fti_engine_device(g->eng[s])), rc,
                           fail);
        FT_CUDA_CHECK_GOTO(
            cudaEventRecord(g->ev[s],
                            (cudaStream_t)fti_engine_stream(g->eng[s])),
            rc, fail);
    }
    FT_CUDA_CHECK_GOTO(cudaSetDevice(g->xdev), rc, fail);
    for (size_t s = 0; s < g->n; s++)
        FT_CUDA_CHECK_GOTO(cudaStreamWaitEvent(g->xs, g->ev[s], 0), rc, fail);
    if (g->tev)
        FT_CUDA_CHECK_GOTO(cudaEventRecord(g->tev[3 * t + 1], g->xs), rc, fail);
    /* Shared lists: every shard already wrote its list where all read it;
     * the group stream only orders the streams. */
    for (size_t s = 0; s < g->n && g->lists[0] == NULL; s++) {
        fti_engine_step_buffers(g->eng[s], &send, &recv, &l);
        FT_CUDA_CHECK_GOTO(cudaMemcpyAsync(recv0 + s * len, send, len * 8,
                                           cudaMemcpyDefault, g->xs), rc,
                           fail);
    }
    for (size_t d = 1; d < g->n && g->lists[0] == NULL; d++) {
        fti_engine_step_buffers(g->eng[d], &send, &recv, &l);
        FT_CUDA_CHECK_GOTO(cudaMemcpyAsync(recv, recv0, g->n * len * 8,
                                           cudaMemcpyDefault, g->xs), rc,
                           fail);
    }
    if (g->tev)
        FT_CUDA_CHECK_GOTO(cudaEventRecord(g->tev[3 * t + 2], g->xs), rc, fail);
    FT_CUDA_CHECK_GOTO(cudaEventRecord(g->xdone, g->xs), rc, fail);
    for (size_t d = 0; d < g->n; d++) {
        FT_CUDA_CHECK_GOTO(cudaSetDevice(fti_engine_device(g->eng[d])), rc,
                           fail);
        FT_CUDA_CHECK_GOTO(
            cudaStreamWaitEvent((cudaStream_t)fti_engine_stream(g->eng[d]),
                                g->xdone, 0),
            rc, fail);
    }
fail:
    return rc;
}
#endif

#ifdef FT_HAVE_NCCL
/* exchange_nccl enqueues one all-gather per rank on its engine's stream,
 * in one NCCL group (one thread drives every rank). */
static int exchange_nccl(fti_group *g)
{
    int rc = FT_OK;
    FT_NCCL_CHECK_GOTO(N.group_start(), rc, fail);
    for (size_t s = 0; s < g->n; s++) {
        uint64_t *send, *recv;
        size_t len;
        if ((rc = fti_engine_step_buffers(g->eng[s], &send, &recv, &len)) !=
            FT_OK) {
            N.group_end();
            return rc;
        }
        FT_NCCL_CHECK_GOTO(
            N.all_gather(send, recv, len, ncclUint64, g->comm[s],
                         (cudaStream_t)fti_engine_stream(g->eng[s])),
            rc, end);
    }
    FT_NCCL_CHECK_GOTO(N.group_end(), rc, fail);
    return FT_OK;
end:
    N.group_end();
fail:
    return rc;
}
#endif

static int exchange(fti_group *g, uint32_t t)
{
    switch (g->xk) {
#ifdef FT_HAVE_CUDA
    case FTI_EXCHANGE_DEVICE:
    case FTI_EXCHANGE_KERNEL: /* a batch redone by the step kernels */
        return exchange_device(g, t);
#endif
#ifdef FT_HAVE_NCCL
    case FTI_EXCHANGE_NCCL:
    case FTI_EXCHANGE_NCCL_DEVICE: /* (its batches are fused) */
        return exchange_nccl(g);
#endif
    case FTI_EXCHANGE_HOST:
        return exchange_host(g);
    default:
        return FT_EINTERNAL;
    }
}

int fti_merge_parts(ft_result *res, const ft_result *const *parts,
                    const uint64_t *base, size_t n, uint32_t results)
{
    size_t at[4096];
    if (n > 4096)
        return FT_EINTERNAL;
    for (size_t s = 0; s < n; s++) {
        const ft_result *r = parts[s];
        if (r->status != FT_OK) {
            res->n = 0;
            res->status = r->status;
            snprintf(res->error, sizeof res->error, "%s", r->error);
            return r->status;
        }
        at[s] = 0;
    }
    res->n = 0;
    res->status = FT_OK;
    res->error[0] = 0;
    uint32_t off = 0;
    while (res->n < results) {
        size_t best = n;
        uint64_t bk = 0;
        uint32_t bo = 0;
        for (size_t s = 0; s < n; s++) {
            const ft_result *r = parts[s];
            if (at[s] >= r->n)
                continue;
            const ft_hit *h = &r->hits[at[s]];
            uint64_t k = ft_score_key(h->score);
            if (best == n || ft_hit_before(k, h->order, bk, bo)) {
                best = s;
                bk = k;
                bo = h->order;
            }
        }
        if (best == n)
            break;
        const ft_result *r = parts[best];
        const ft_hit *h = &r->hits[at[best]++];
        if (res->n >= res->cap_hits || off + h->len > res->cap_tokens) {
            res->n = 0;
            res->status = FT_ELIMIT;
            snprintf(res->error, sizeof res->error,
                     "results: do not fit the result buffer");
            return FT_ELIMIT;
        }
        ft_hit *o = &res->hits[res->n++];
        *o = *h;
        o->tok_off = off;
        o->key_index = h->key_index + base[best];
        memcpy(res->tokens + off, r->tokens + h->tok_off,
               h->len * sizeof *res->tokens);
        off += h->len;
    }
    return FT_OK;
}

/* merge_parts merges the shards' local hits of request i into res (the
 * merge every group shares, fti_merge_parts) and attaches the values. */
static int merge_parts(fti_group *g, size_t i, const fti_prepared *p,
                       ft_result *res)
{
    const ft_result *parts[4096];
    if (g->n > 4096)
        return FT_EINTERNAL;
    for (size_t s = 0; s < g->n; s++)
        parts[s] = &g->part[s * FTI_ENGINE_CHUNK + i];
    int rc = fti_merge_parts(res, parts, g->base, g->n, p->results);
    if (rc != FT_OK)
        return rc;
    return fti_attach_values(res, g->idx, g->base, g->n);
}

/* x_done merges request i of the chunk that run_chunk runs (steps.h's
 * done: maybe on an engine's worker, one request each). */
static void x_done(void *arg, size_t i)
{
    fti_group *g = arg;
    merge_parts(g, i, g->creqs[i], g->cres[i]);
}

/* The group's exchange as the step loop's callback (steps.h). */
static int x_exchange(void *arg, uint32_t t, size_t len)
{
    (void)len;
    return exchange(arg, t);
}

#ifdef FT_HAVE_CUDA
/* x_step records step t's first timing event (shard 0's launch). */
static int x_step(void *arg, uint32_t t)
{
    fti_group *g = arg;
    cudaSetDevice(g->xdev);
    if (cudaEventRecord(g->tev[3 * t],
                        (cudaStream_t)fti_engine_stream(g->eng[0])) !=
        cudaSuccess)
        return FT_ECUDA;
    return FT_OK;
}
#endif

#ifdef FT_HAVE_CUDA
/* x_reset zeroes the shard kernel's barrier after a batch that gave up
 * (every launch has ended: the engines finished or were waited for). */
static void x_reset(fti_group *g)
{
#ifdef FTI_NCCL_DEVAPI
    if (g->nbuf) {
        ndev_reset(g);
        return;
    }
#endif
    cudaSetDevice(g->xdev);
    for (size_t s = 0; s < g->n; s++)
        cudaStreamSynchronize((cudaStream_t)fti_engine_stream(g->eng[s]));
    cudaMemset(g->xmem, 0, 16 + 4 * g->n);
    cudaDeviceSynchronize();
    (void)cudaGetLastError();
    *(volatile uint32_t *)g->hxerr = 0;
    g->xbase = 0;
}

/* x_fused enqueues every shard's launch of the shard kernel (steps.h's
 * fused): all of them before any wait. */
static int x_fused(void *arg, uint32_t tmax)
{
    fti_group *g = arg;
#ifdef FTI_NCCL_DEVAPI
    if (g->xk == FTI_EXCHANGE_NCCL_DEVICE) {
        /* one launch per GPU, every one enqueued before any is waited
         * for (fti_engine_gpu_steps_all sets each engine's device) */
        fti_gpu_xbar nb;
        memset(&nb, 0, sizeof nb);
        nb.herr = g->dhxerr;
        nb.timeout = g->xtimeout;
        nb.mode = g->xmode;
        nb.nseq = g->nseq;
        nb.noff_inbox = 0;
        nb.noff_words = g->nwords;
        nb.noff_list[0] = g->nlist[0];
        nb.noff_list[1] = g->nlist[1];
        nb.nranks = (uint32_t)g->n;
        for (size_t s = 0; s < g->n; s++) {
            nb.nwin = g->nwin[s];
            nb.nrank = g->nlsa[s];
            int rc = fti_engine_gpu_steps_all(g->eng[s], &nb);
            if (rc != FT_OK) {
                x_reset(g);
                return rc;
            }
        }
        if (tmax > 1)
            g->nseq += tmax - 1;
        g->xtmax = tmax;
        return FT_OK;
    }
#endif
    unsigned char *m = g->xmem;
    fti_gpu_xbar xb = {.ctr = (unsigned long long *)m,
                       .err = (uint32_t *)(m + 8),
                       .herr = g->dhxerr,
                       .base = g->xbase,
                       .timeout = g->xtimeout,
                       .total = g->xtotal,
                       .mode = g->xmode};
    for (size_t s = 0; s < g->n; s++) {
        xb.abort = (uint32_t *)(m + 16) + s;
        xb.prof = g->dprof ? g->dprof + s * XPROF : NULL;
        int rc = fti_engine_gpu_steps_all(g->eng[s], &xb);
        if (rc != FT_OK) {
            /* the shards launched so far wait for this one until their
             * waits run out */
            x_reset(g);
            return rc;
        }
    }
    if (tmax > 1)
        g->xbase += (unsigned long long)(tmax - 1) * g->xtotal;
    g->xtmax = tmax;
    return FT_OK;
}

/* x_prof_take adds the last batch's timelines to the sums (the
 * engines finished: every launch has ended). */
static void x_prof_take(fti_group *g)
{
    uint32_t tmax = g->xtmax;
    if (cudaMemcpy(g->hprof, g->dprof, g->n * XPROF * 8,
                   cudaMemcpyDeviceToHost) != cudaSuccess) {
        (void)cudaGetLastError();
        return;
    }
    const unsigned long long *P = g->hprof;
    unsigned long long s0 = ~0ull, s1 = 0;
    for (size_t s = 0; s < g->n; s++) {
        s0 = P[s * XPROF] < s0 ? P[s * XPROF] : s0;
        s1 = P[s * XPROF] > s1 ? P[s * XPROF] : s1;
    }
    g->xsum[3] += (double)(s1 - s0) * 1e-9;
    for (uint32_t t = 0; t + 1 < tmax; t++) {
        unsigned long long a0 = ~0ull, a1 = 0, d1 = 0, wmax = 0;
        double work = 0, keep = 0, exp = 0, sel = 0;
        for (size_t s = 0; s < g->n; s++) {
            const unsigned long long *q = P + s * XPROF;
            unsigned long long a = q[1 + 4 * t], d = q[2 + 4 * t];
            unsigned long long from = t ? q[4 * t - 2] : q[0];
            /* the keep's end (step 0 has none) and the expansion's */
            unsigned long long k = t ? q[3 + 4 * t] : from, e = q[4 + 4 * t];
            a0 = a < a0 ? a : a0;
            a1 = a > a1 ? a : a1;
            d1 = d > d1 ? d : d1;
            wmax = a - from > wmax ? a - from : wmax;
            work += (double)(a - from);
            keep += (double)(k - from);
            exp += (double)(e - k);
            sel += (double)(a - e);
        }
        g->xsum[0] += (double)(d1 - a1) * 1e-9;
        g->xsum[1] += (double)(a1 - a0) * 1e-9;
        g->xsum[2] += work / (double)g->n * 1e-9;
        g->xsum[4] += keep / (double)g->n * 1e-9;
        g->xsum[5] += exp / (double)g->n * 1e-9;
        g->xsum[6] += sel / (double)g->n * 1e-9;
        g->xsum[7] += (double)wmax * 1e-9;
        g->xsteps++;
    }
    g->xbatches++;
}

/* x_fused_done: a wait that ran out voids the batch; the group then uses
 * the step kernels (device copies' loop) from now on. */
static int x_fused_done(void *arg)
{
    fti_group *g = arg;
    if (*(volatile uint32_t *)g->hxerr == 0) {
        if (g->dprof && g->xk == FTI_EXCHANGE_KERNEL)
            x_prof_take(g);
        return FT_OK;
    }
    x_reset(g);
#ifdef FTI_NCCL_DEVAPI
    if (g->xk == FTI_EXCHANGE_NCCL_DEVICE) {
        if (!g->nwarned) {
            g->nwarned = 1;
            FT_LOGF(FT_LOG_WARN, "shard group: the NCCL device exchange of "
                    "%zu GPUs gave up (a wait ran out): the batch is redone, "
                    "and the group exchanges by ncclAllGather from now on",
                    g->n);
        }
        for (size_t s = 0; s < g->n; s++)
            fti_engine_gpu_bind_lists(g->eng[s], NULL, NULL, 0);
        g->xk = FTI_EXCHANGE_NCCL;
        return FTI_STEPS_REDO;
    }
#endif
    if (!g->xwarned) {
        g->xwarned = 1;
        FT_LOGF(FT_LOG_WARN, "shard group: the shard kernels of %zu shards "
                "did not run side by side (a wait ran out): the batch is "
                "redone, and the group exchanges by device copies from now "
                "on", g->n);
    }
    g->xk = FTI_EXCHANGE_DEVICE;
    return FTI_STEPS_REDO;
}
#endif

/* run_chunk runs prepared requests reqs[0..m) over the group. */
static int run_chunk(fti_group *g, const fti_prepared *const *reqs,
                     ft_result *const *res, size_t m)
{
    uint32_t tmax = fti_steps_tmax(reqs, m);
    fti_steps_xchg x = {.exchange = x_exchange, .done = x_done, .arg = g};
    g->creqs = reqs;
    g->cres = res;
#ifdef FT_HAVE_CUDA
    double h0 = g->tev ? fti_now() : 0;
    if (g->xk == FTI_EXCHANGE_KERNEL || g->xk == FTI_EXCHANGE_NCCL_DEVICE) {
        x.fused = x_fused;
        x.fused_done = x_fused_done;
    } else if (g->tev) {
        x.step = x_step;
    }
#endif
    int rc = fti_steps_run(g->eng, g->n, 0, (uint32_t)g->n, reqs, m, g->part,
                           &x, NULL);
#ifdef FT_HAVE_CUDA
    if (g->tev && x.step && rc == FT_OK &&
        cudaStreamSynchronize(g->xs) == cudaSuccess) {
        float ms;
        for (uint32_t t = 0; t < tmax; t++) {
            if (cudaEventElapsedTime(&ms, g->tev[3 * t], g->tev[3 * t + 1]) ==
                cudaSuccess)
                g->tsum[0] += ms * 1e-3;
            if (cudaEventElapsedTime(&ms, g->tev[3 * t + 1],
                                     g->tev[3 * t + 2]) == cudaSuccess)
                g->tsum[1] += ms * 1e-3;
            if (t + 1 < tmax &&
                cudaEventElapsedTime(&ms, g->tev[3 * t + 2],
                                     g->tev[3 * t + 3]) == cudaSuccess)
                g->tsum[2] += ms * 1e-3;
        }
        (void)cudaGetLastError();
        g->tsum[3] += fti_now() - h0;
        g->tsteps += tmax;
        g->tbatches++;
    }
#else
    (void)tmax;
#endif
    if (rc != FT_OK) {
        for (size_t i = 0; i < m; i++) {
            res[i]->n = 0;
            res[i]->status = rc;
            snprintf(res[i]->error, sizeof res[i]->error,
                     "engine: shard group failed: %s", ft_strerror(rc));
        }
        return rc == FT_ENOMEM ? FT_OK : rc;
    }
    return FT_OK; /* x_done merged every request */
}

/* run_fit runs reqs[0..m) in the batches the engines take (steps.h). */
struct fit_arg {
    fti_group *g;
    const fti_prepared *const *reqs;
    ft_result *const *res;
};

static int fit_one(void *arg, const size_t *ix, size_t k)
{
    struct fit_arg *a = arg;
    /* zeroed: gcc -O2 cannot see that k >= 1 (-Wmaybe-uninitialized) */
    const fti_prepared *b[FTI_ENGINE_CHUNK] = {NULL};
    ft_result *br[FTI_ENGINE_CHUNK];
    for (size_t j = 0; j < k; j++) {
        b[j] = a->reqs[ix[j]];
        br[j] = a->res[ix[j]];
    }
    return run_chunk(a->g, b, br, k);
}

static int run_fit(fti_group *g, const fti_prepared *const *reqs,
                   ft_result *const *res, size_t m)
{
    struct fit_arg a = {g, reqs, res};
    return fti_steps_fit(&g->o, reqs, m, fit_one, &a);
}

int fti_group_search_batch(fti_group *g, const ft_request *reqs, size_t n,
                           ft_result *res)
{
    return fti_group_search_batch_mode(g, reqs, n, res, FTI_ADMIT_FULL);
}

/* forest_run answers reqs[0..m) by the forest's one launch a batch
 * (FTI_EXCHANGE_FOREST): shard 0's engine searches every shard's trie,
 * its results carry global key indexes; the values are attached here
 * unless every tree has them on the device (the kernel wrote them). */
static int forest_run(fti_group *g, const fti_prepared *const *reqs,
                      ft_result **res, const ft_request **vreq, size_t m)
{
    int rc = fti_engine_run_late(g->eng[0], reqs, res, vreq, m);
    if (rc != FT_OK || fti_engine_values_attached(g->eng[0]))
        return rc; /* (with every tree's values on the device: given) */
    for (size_t i = 0; i < m; i++)
        if (res[i]->status == FT_OK)
            fti_attach_values(res[i], g->idx, g->base, g->n);
    return FT_OK;
}

int fti_group_search_batch_mode(fti_group *g, const ft_request *reqs,
                                size_t n, ft_result *res, int mode)
{
    const fti_prepared *vp[FTI_ENGINE_CHUNK];
    ft_result *vres[FTI_ENGINE_CHUNK];
    const ft_request *vreq[FTI_ENGINE_CHUNK];
    for (size_t s = 0; s < g->n; s++)
        if (ft_engine_failed(g->eng[s]))
            return FT_ESTATE;
    /* A forest is one engine's launch: a public search checks the
     * duplicate tokens while it runs, as the unsharded engine's does. */
    int forest = g->xk == FTI_EXCHANGE_FOREST;
    if (forest && mode == FTI_ADMIT_FULL)
        mode = FTI_ADMIT_LATE;
    /* Shards searched step by step have no launch to overlap: admission
     * checks the duplicate tokens (vreq NULL). */
    int late = forest && (mode == FTI_ADMIT_LATE || mode == FTI_ADMIT_DOOR);
    fti_prep **pool = fti_prep_pool();
    if (pool == NULL)
        return FT_ENOMEM;
    size_t i = 0;
    while (i < n) {
        size_t m = fti_admit_chunk(pool, reqs, n, &i, g->max_beam, res, vp,
                                   vres, late ? vreq : NULL, mode);
        if (m == 0)
            continue;
        int rc = forest ? forest_run(g, vp, vres, late ? vreq : NULL, m)
                        : run_fit(g, vp, vres, m);
        if (rc != FT_OK)
            return rc;
    }
    return FT_OK;
}
