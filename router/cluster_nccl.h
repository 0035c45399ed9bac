/*
 * cluster_nccl.h - the NCCL calls the multi-process transport needs, from
 * the library group.c loads at run time (builds with FT_HAVE_NCCL only).
 */
#ifndef FT_CLUSTER_NCCL_H
#define FT_CLUSTER_NCCL_H

#ifdef FT_HAVE_NCCL
#include <nccl.h>

/* fti_nccl_api holds libnccl.so.2's entry points, typed from nccl.h's
 * declarations (a mismatch does not compile). */
typedef struct fti_nccl_api {
    __typeof__(&ncclCommInitAll) init_all;
    __typeof__(&ncclCommDestroy) destroy;
    __typeof__(&ncclAllGather) all_gather;
    __typeof__(&ncclGroupStart) group_start;
    __typeof__(&ncclGroupEnd) group_end;
    __typeof__(&ncclGetErrorString) error_string;
    /* multi-process (NCCL 2.14 or later) */
    __typeof__(&ncclGetUniqueId) get_unique_id;
    __typeof__(&ncclCommInitRankConfig) init_rank_config;
    __typeof__(&ncclCommAbort) abort;
    __typeof__(&ncclCommGetAsyncError) async_error;
    __typeof__(&ncclBroadcast) broadcast;
    __typeof__(&ncclSend) send;
    __typeof__(&ncclRecv) recv;
} fti_nccl_api;

/* fti_nccl returns the loaded API with its multi-process calls, NULL when
 * libnccl.so.2 cannot be loaded or lacks them (group.c). */
const fti_nccl_api *fti_nccl(void);
#endif

#endif /* FT_CLUSTER_NCCL_H */
