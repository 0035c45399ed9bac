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

#else
#include "cluster_nccl_on.c.inc"
#endif
