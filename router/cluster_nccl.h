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
    /* the device API's host side (NCCL 2.28 or later; NULL where the
     * library lacks it): symmetric memory and windows, typed from nccl.h;
     * ncclDevCommCreate / ncclDevCommDestroy from nccl_device/core.h,
     * which a C file cannot include whole (its ncclDevComm is C++): the
     * same calls with the requirements and the device communicator as
     * opaque memory (ncclDevCommRequirements_t const *, ncclDevComm_t *;
     * group.c passes zeroed requirements and a buffer larger than the
     * struct, and checks the fields it reads, rank and nRanks first). */
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= 22800
#define FTI_NCCL_DEVAPI 1
    __typeof__(&ncclGetVersion) get_version;
    __typeof__(&ncclMemAlloc) mem_alloc;
    __typeof__(&ncclMemFree) mem_free;
    __typeof__(&ncclCommWindowRegister) win_register;
    __typeof__(&ncclCommWindowDeregister) win_deregister;
    ncclResult_t (*devcomm_create)(ncclComm_t comm, const void *reqs,
                                   void *out_devcomm);
    ncclResult_t (*devcomm_destroy)(ncclComm_t comm, const void *devcomm);
#endif
} fti_nccl_api;

/* fti_nccl returns the loaded API with its multi-process calls, NULL when
 * libnccl.so.2 cannot be loaded or lacks them (group.c). */
const fti_nccl_api *fti_nccl(void);
#endif

#endif /* FT_CLUSTER_NCCL_H */
