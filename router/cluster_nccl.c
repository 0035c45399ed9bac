/*
 * cluster_nccl.c - the NCCL transport of a cluster (GPU ranks, one NCCL
 * rank per process, every shard of a rank on its one GPU).
 *
 * nng still carries each batch's announcement (so an idle rank waits on a
 * bounded receive, never on a collective); the batch payload follows by
 * ncclBroadcast from rank 0, each step's lists by one ncclAllGather of
 * every rank's lists (padded to the largest shard block), and the local
 * hits by an all-gather of their sizes and ncclSend/ncclRecv to rank 0.
 * The steps are enqueued without host waits; cl_nccl_settle waits, with
 * the step timeout, for the last exchange, and aborts the communicator
 * when a peer never comes, which fails the batch and takes the cluster
 * down (a communicator cannot lose a rank and go on).
 *
 * libnccl.so.2 is loaded at run time through group.c's loader
 * (fti_nccl_api), as the one-process groups load it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashtrie/internal/clock.h"
#include "cluster_impl.h"
#include "rt_impl.h"

#ifndef FT_HAVE_NCCL

int cl_nccl_session_id(ft_cluster *c, char *errbuf, size_t errlen)
{
    RT_RETURN_ERROR_IF(c->eo.kind == FT_ENGINE_GPU, FT_ENOTSUP,
                       "cluster: GPU ranks exchange through NCCL, and this "
                       "build has no NCCL");
    return FT_OK;
}

int cl_nccl_open(ft_cluster *c, char *errbuf, size_t errlen)
{
    return cl_nccl_session_id(c, errbuf, errlen);
}

void cl_nccl_close(ft_cluster *c) { (void)c; }
int cl_nccl_settle(ft_cluster *c)
{
    (void)c;
    return FT_OK;
}

int cl_nccl_batch_recv(ft_cluster *c, uint32_t bytes, ft_buf *out)
{
    (void)c;
    (void)bytes;
    (void)out;
    return FT_ENOTSUP;
}

const cl_xport *cl_nccl_transport(void) { return NULL; }

#else /* FT_HAVE_NCCL */

#include <time.h>

#include <cuda_runtime.h>

#include "cluster_nccl.h"

_Static_assert(sizeof(ncclUniqueId) == 128, "ncclUniqueId is 128 bytes");

typedef struct nx {
    const fti_nccl_api *N;
    ncclComm_t comm;
    int dev;
    cudaStream_t xs;       /* every exchange, in order */
    cudaEvent_t *ev;       /* [count]: engine j's step done */
    cudaEvent_t xdone;     /* the last exchange done */
    uint64_t *dsend, *drecv;
    size_t cap_send, cap_recv;   /* keys */
    unsigned char *dbytes;       /* batch payloads and hits */
    size_t cap_bytes;
    uint64_t *dsz;               /* [1 + world]: hit sizes */
    uint32_t cmax;               /* the largest shard block */
    int broken;                  /* aborted: nothing more is enqueued */
} nx;


/* broken aborts the communicator once: a peer that is gone leaves the
 * collectives hanging on the GPU, and an abort is what ends them. */
static int broken(ft_cluster *c, const char *what)
{
    nx *x = c->nx;
    if (!x->broken) {
        x->broken = 1;
        x->N->abort(x->comm);
        x->comm = NULL;
        pthread_mutex_lock(&c->mu);
        snprintf(c->xdown, sizeof c->xdown, "nccl: %s; the communicator is "
                 "aborted (restart every rank)", what);
        pthread_mutex_unlock(&c->mu);
        FT_LOGF(FT_LOG_ERROR, "cluster: rank %u: %s", c->rank, c->xdown);
    }
    return FT_ECONN;
}

/* settle_call waits until a call on the non-blocking communicator is
 * done (ncclInProgress turns into ncclSuccess), ms at most. */
static int settle_call(ft_cluster *c, ncclResult_t r, uint32_t ms,
                       const char *what)
{
    nx *x = c->nx;
    uint64_t until = fti_now_ms() + ms;
    while (r == ncclInProgress) {
        if (fti_now_ms() >= until) {
            char w[160];
            snprintf(w, sizeof w, "%s did not complete within %u ms", what,
                     ms);
            return broken(c, w);
        }
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
        if (x->N->async_error(x->comm, &r) != ncclSuccess)
            r = ncclInternalError;
    }
    if (r != ncclSuccess) {
        char w[200];
        snprintf(w, sizeof w, "%s failed: %s", what, x->N->error_string(r));
        return broken(c, w);
    }
    return FT_OK;
}

/* wait_stream waits (step_ms at most) until everything enqueued on the
 * exchange stream so far has run, watching the communicator's errors. */
static int wait_stream(ft_cluster *c, const char *what)
{
    nx *x = c->nx;
    if (cudaEventRecord(x->xdone, x->xs) != cudaSuccess)
        return broken(c, "cudaEventRecord failed");
    uint64_t until = fti_now_ms() + c->step_ms;
    for (;;) {
        cudaError_t e = cudaEventQuery(x->xdone);
        if (e == cudaSuccess)
            return FT_OK;
        if (e != cudaErrorNotReady) {
            (void)cudaGetLastError();
            return broken(c, cudaGetErrorString(e));
        }
        ncclResult_t r;
        if (x->N->async_error(x->comm, &r) == ncclSuccess &&
            r != ncclSuccess && r != ncclInProgress) {
            char w[200];
            snprintf(w, sizeof w, "%s: %s", what, x->N->error_string(r));
            return broken(c, w);
        }
        if (fti_now_ms() >= until) {
            char w[200];
            snprintf(w, sizeof w, "%s did not complete within %u ms (a rank "
                     "is gone or stalled)", what, c->step_ms);
            return broken(c, w);
        }
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

/* grow makes a device buffer hold n elements of size sz (only between
 * batches or at a batch's first step: nothing in flight uses it). */
static int grow(void **p, size_t *cap, size_t n, size_t sz)
{
    if (n <= *cap)
        return FT_OK;
    cudaFree(*p);
    *p = NULL;
    *cap = 0;
    if (cudaMalloc(p, n * sz) != cudaSuccess) {
        (void)cudaGetLastError();
        return FT_ENOMEM;
    }
    *cap = n;
    return FT_OK;
}

int cl_nccl_session_id(ft_cluster *c, char *errbuf, size_t errlen)
{
    if (c->eo.kind != FT_ENGINE_GPU)
        return FT_OK;
    const fti_nccl_api *N = fti_nccl();
    RT_RETURN_ERROR_IF(N == NULL, FT_ENOTSUP,
                       "cluster: GPU ranks exchange through NCCL, and "
                       "libnccl.so.2 (2.14 or later) cannot be loaded");
    if (c->rank != 0)
        return FT_OK;
    ncclUniqueId id;
    ncclResult_t r = N->get_unique_id(&id);
    RT_RETURN_ERROR_IF(r != ncclSuccess, FT_ENCCL,
                       "cluster: ncclGetUniqueId failed: %s",
                       N->error_string(r));
    memcpy(c->nccl_id, &id, sizeof id);
    c->has_id = 1;
    return FT_OK;
}

int cl_nccl_open(ft_cluster *c, char *errbuf, size_t errlen)
{
    if (c->eo.kind != FT_ENGINE_GPU)
        return FT_OK;
    int rc = cl_nccl_session_id(c, errbuf, errlen);
    if (rc != FT_OK)
        return rc;
    RT_RETURN_ERROR_IF(!c->has_id, FT_EPROTO, "cluster: rank %u: the "
                       "session carries no NCCL id", c->rank);
    nx *x = calloc(1, sizeof *x);
    if (x == NULL)
        return FT_ENOMEM;
    c->nx = x;
    x->N = fti_nccl();
    x->dev = c->eo.device;
    x->ev = calloc(c->count, sizeof *x->ev);
    x->dsz = NULL;
    for (uint32_t r = 0; r < c->world; r++)
        x->cmax = c->r[r].count > x->cmax ? c->r[r].count : x->cmax;
    RT_RETURN_ERROR_IF(x->ev == NULL, FT_ENOMEM, "cluster: out of memory");
    RT_RETURN_ERROR_IF(cudaSetDevice(x->dev) != cudaSuccess ||
                           cudaStreamCreateWithFlags(
                               &x->xs, cudaStreamNonBlocking) != cudaSuccess ||
                           cudaEventCreateWithFlags(
                               &x->xdone, cudaEventDisableTiming) !=
                               cudaSuccess ||
                           cudaMalloc((void **)&x->dsz,
                                      (1 + c->world) * sizeof *x->dsz) !=
                               cudaSuccess,
                       FT_ECUDA, "cluster: rank %u: device %d: cannot make "
                       "the exchange stream", c->rank, x->dev);
    for (uint32_t j = 0; j < c->count; j++)
        RT_RETURN_ERROR_IF(cudaEventCreateWithFlags(&x->ev[j],
                                                    cudaEventDisableTiming) !=
                               cudaSuccess,
                           FT_ECUDA, "cluster: rank %u: cannot make events",
                           c->rank);
    /* Non-blocking: the join is bounded, and so is every later call. */
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclUniqueId id;
    memcpy(&id, c->nccl_id, sizeof id);
    ncclResult_t r = x->N->init_rank_config(&x->comm, (int)c->world, id,
                                            (int)c->rank, &cfg);
    if (r != ncclSuccess && r != ncclInProgress) {
        RT_ERRF(errbuf, errlen, "cluster: rank %u: ncclCommInitRankConfig "
                "failed: %s", c->rank, x->N->error_string(r));
        return FT_ENCCL;
    }
    if (settle_call(c, r, c->join_ms, "ncclCommInitRankConfig") != FT_OK) {
        RT_ERRF(errbuf, errlen, "cluster: rank %u: %s", c->rank, c->xdown);
        return FT_ENCCL;
    }
    c->nccl = 1;
    return FT_OK;
}

void cl_nccl_close(ft_cluster *c)
{
    nx *x = c->nx;
    if (x == NULL)
        return;
    cudaSetDevice(x->dev);
    /* Abort, not destroy: a destroy waits for peers that may be gone. */
    if (x->comm)
        x->N->abort(x->comm);
    for (uint32_t j = 0; x->ev && j < c->count; j++)
        if (x->ev[j])
            cudaEventDestroy(x->ev[j]);
    if (x->xdone)
        cudaEventDestroy(x->xdone);
    if (x->xs)
        cudaStreamDestroy(x->xs);
    cudaFree(x->dsend);
    cudaFree(x->drecv);
    cudaFree(x->dbytes);
    cudaFree(x->dsz);
    free(x->ev);
    free(x);
    c->nx = NULL;
}

int cl_nccl_settle(ft_cluster *c)
{
    if (!c->nccl)
        return FT_OK;
    if (((nx *)c->nx)->broken)
        return FT_ECONN;
    return wait_stream(c, "the step exchange");
}

/* bcast_bytes broadcasts n bytes at x->dbytes from rank 0 (bounded). */
static int bcast_bytes(ft_cluster *c, size_t n)
{
    nx *x = c->nx;
    ncclResult_t r = x->N->broadcast(x->dbytes, x->dbytes, n, ncclUint8, 0,
                                     x->comm, x->xs);
    int rc = settle_call(c, r, c->step_ms, "ncclBroadcast");
    return rc != FT_OK ? rc : wait_stream(c, "the batch broadcast");
}

static int nccl_batch(ft_cluster *c, uint32_t seq, size_t m,
                      const ft_buf *payload)
{
    nx *x = c->nx;
    if (x->broken)
        return FT_ECONN;
    /* The announcement over nng: idle ranks wait there, bounded. */
    ft_buf *b = &c->msg;
    cl_head(b, CL_BATCH, 0, seq);
    ft_buf_put_u32(b, (uint32_t)m);
    ft_buf_put_u32(b, (uint32_t)payload->len);
    ft_buf_put_u8(b, 0);
    for (uint32_t r = 1; r < c->world; r++)
        if (cl_send(c, r, b) != FT_OK) {
            cl_mark_down(c, r, "cannot send it the batch");
            return FT_ECONN;
        }
    cudaSetDevice(x->dev);
    if (grow((void **)&x->dbytes, &x->cap_bytes, payload->len, 1) != FT_OK)
        return FT_ENOMEM;
    if (cudaMemcpyAsync(x->dbytes, payload->data, payload->len,
                        cudaMemcpyHostToDevice, x->xs) != cudaSuccess)
        return broken(c, "copying the batch to the device failed");
    return bcast_bytes(c, payload->len);
}

int cl_nccl_batch_recv(ft_cluster *c, uint32_t bytes, ft_buf *out)
{
    nx *x = c->nx;
    if (x == NULL || x->broken)
        return FT_ECONN;
    cudaSetDevice(x->dev);
    if (grow((void **)&x->dbytes, &x->cap_bytes, bytes, 1) != FT_OK ||
        ft_buf_reserve(out, bytes) != FT_OK)
        return FT_ENOMEM;
    int rc = bcast_bytes(c, bytes);
    if (rc != FT_OK)
        return rc;
    if (cudaMemcpyAsync(out->data, x->dbytes, bytes, cudaMemcpyDeviceToHost,
                        x->xs) != cudaSuccess ||
        cudaStreamSynchronize(x->xs) != cudaSuccess)
        return broken(c, "copying the batch from the device failed");
    out->len = bytes;
    return FT_OK;
}

/* nccl_lists: every engine's step ends -> the exchange stream packs this
 * rank's lists, all-gathers every rank's (cmax lists each, padded), and
 * copies each shard's list into every local engine's recv at its shard's
 * place -> every engine's next launch waits for it.  Nothing waits on the
 * host: cl_nccl_settle does, once, before the results. */
static int nccl_lists(ft_cluster *c, uint32_t seq, uint32_t t, size_t len)
{
    (void)seq;
    nx *x = c->nx;
    if (x->broken)
        return FT_ECONN;
    cudaSetDevice(x->dev);
    size_t ns = (size_t)x->cmax * len, nr = (size_t)c->world * ns;
    if (t == 0 && (grow((void **)&x->dsend, &x->cap_send, ns, 8) != FT_OK ||
                   grow((void **)&x->drecv, &x->cap_recv, nr, 8) != FT_OK))
        return FT_ENOMEM;
    if (ns > x->cap_send || nr > x->cap_recv)
        return FT_EINTERNAL; /* len changed within a batch */
    for (uint32_t j = 0; j < c->count; j++) {
        uint64_t *send, *recv;
        size_t l;
        fti_engine_step_buffers(c->eng[j], &send, &recv, &l);
        cudaStream_t es = (cudaStream_t)fti_engine_stream(c->eng[j]);
        if (cudaEventRecord(x->ev[j], es) != cudaSuccess ||
            cudaStreamWaitEvent(x->xs, x->ev[j], 0) != cudaSuccess ||
            cudaMemcpyAsync(x->dsend + (size_t)j * len, send, len * 8,
                            cudaMemcpyDeviceToDevice, x->xs) != cudaSuccess)
            return broken(c, "packing the step lists failed");
    }
    ncclResult_t r = x->N->all_gather(x->dsend, x->drecv, ns, ncclUint64,
                                      x->comm, x->xs);
    int rc = settle_call(c, r, c->step_ms, "ncclAllGather");
    if (rc != FT_OK)
        return rc;
    for (uint32_t o = 0; o < c->world; o++)
        for (uint32_t j = 0; j < c->r[o].count; j++) {
            size_t s = c->r[o].first + j;
            const uint64_t *src = x->drecv + ((size_t)o * x->cmax + j) * len;
            for (uint32_t k = 0; k < c->count; k++) {
                uint64_t *send, *recv;
                size_t l;
                fti_engine_step_buffers(c->eng[k], &send, &recv, &l);
                if (cudaMemcpyAsync(recv + s * len, src, len * 8,
                                    cudaMemcpyDeviceToDevice, x->xs) !=
                    cudaSuccess)
                    return broken(c, "unpacking the step lists failed");
            }
        }
    if (cudaEventRecord(x->xdone, x->xs) != cudaSuccess)
        return broken(c, "cudaEventRecord failed");
    for (uint32_t k = 0; k < c->count; k++)
        if (cudaStreamWaitEvent((cudaStream_t)fti_engine_stream(c->eng[k]),
                                x->xdone, 0) != cudaSuccess)
            return broken(c, "ordering the engines after the exchange failed");
    return FT_OK;
}

/* nccl_hits: every rank's encoded hits reach rank 0: an all-gather of
 * their sizes, then one ncclSend per rank and ncclRecv per peer into one
 * staging buffer, in one NCCL group. */
static int nccl_hits(ft_cluster *c, uint32_t seq,
                     const fti_prepared *const *reqs, size_t m)
{
    nx *x = c->nx;
    if (x->broken)
        return FT_ECONN;
    cudaSetDevice(x->dev);
    ft_buf *b = &c->msg;
    b->len = 0;
    if (c->rank != 0 && cl_put_hits(c, b, m) != FT_OK)
        return FT_ENOMEM;
    uint64_t mine = b->len, sz[FT_CLUSTER_MAX_RANKS];
    if (cudaMemcpyAsync(x->dsz, &mine, 8, cudaMemcpyHostToDevice, x->xs) !=
        cudaSuccess)
        return broken(c, "copying the hit size failed");
    ncclResult_t r = x->N->all_gather(x->dsz, x->dsz + 1, 1, ncclUint64,
                                      x->comm, x->xs);
    int rc = settle_call(c, r, c->step_ms, "ncclAllGather (hit sizes)");
    if (rc == FT_OK)
        rc = wait_stream(c, "the hit sizes");
    if (rc != FT_OK)
        return rc;
    if (cudaMemcpy(sz, x->dsz + 1, c->world * 8, cudaMemcpyDeviceToHost) !=
        cudaSuccess)
        return broken(c, "reading the hit sizes failed");
    size_t total = 0, off[FT_CLUSTER_MAX_RANKS];
    for (uint32_t o = 0; o < c->world; o++) {
        off[o] = total;
        total += sz[o];
    }
    if (grow((void **)&x->dbytes, &x->cap_bytes, total ? total : 1, 1) !=
        FT_OK)
        return FT_ENOMEM;
    if (c->rank != 0 &&
        cudaMemcpyAsync(x->dbytes, b->data, mine, cudaMemcpyHostToDevice,
                        x->xs) != cudaSuccess)
        return broken(c, "copying the hits to the device failed");
    r = x->N->group_start();
    for (uint32_t o = 1; r == ncclSuccess && o < c->world; o++) {
        if (c->rank == 0)
            r = x->N->recv(x->dbytes + off[o], sz[o], ncclUint8, (int)o,
                           x->comm, x->xs);
        else if (o == c->rank)
            r = x->N->send(x->dbytes, mine, ncclUint8, 0, x->comm, x->xs);
    }
    ncclResult_t e = x->N->group_end();
    rc = settle_call(c, r != ncclSuccess ? r : e, c->step_ms,
                     "ncclSend/ncclRecv (hits)");
    if (rc == FT_OK)
        rc = wait_stream(c, "the hits");
    if (rc != FT_OK || c->rank != 0)
        return rc;
    b->len = 0;
    if (ft_buf_reserve(b, total) != FT_OK)
        return FT_ENOMEM;
    if (total && cudaMemcpy(b->data, x->dbytes, total,
                            cudaMemcpyDeviceToHost) != cudaSuccess)
        return broken(c, "reading the hits failed");
    for (uint32_t o = 1; o < c->world; o++) {
        cl_rd rd = {b->data + off[o], sz[o], 0, 0};
        rc = cl_get_hits(c, o, &rd, reqs, m);
        if (rc == FT_EPROTO) {
            cl_mark_down(c, o, "sent malformed hits");
            return FT_ECONN;
        }
        if (rc != FT_OK)
            return rc;
    }
    (void)seq;
    return FT_OK;
}

static const cl_xport nccl_xport = {"nccl", nccl_batch, nccl_lists,
                                    nccl_hits};

const cl_xport *cl_nccl_transport(void) { return &nccl_xport; }

#endif /* FT_HAVE_NCCL */
