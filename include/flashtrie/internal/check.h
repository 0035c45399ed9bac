/*
 * check.h - the one way host code checks CUDA and NCCL calls.  Ground
 * floor: uses nothing but the CUDA runtime's and NCCL's own headers and the
 * logger and error codes of flashtrie.h.
 *
 * Every check logs the failed call with the library's own message
 * (cudaGetErrorString / cudaGetErrorName, NCCL's error string), clears
 * CUDA's sticky last error so that the next call starts clean, and turns
 * the failure into the stable error code (FT_ECUDA, FT_ENCCL):
 *
 *   FT_CUDA_CHECK(cudaMemcpy(...));               returns FT_ECUDA
 *   FT_CUDA_CHECK_GOTO(cudaMalloc(...), rc, out); rc = FT_ECUDA; goto out
 *   FT_NCCL_CHECK(...), FT_NCCL_CHECK_GOTO(...)    the same with FT_ENCCL
 *
 * Include it only from files built with CUDA (FT_HAVE_CUDA); the NCCL
 * macros need FT_HAVE_NCCL as well.  NCCL is loaded at run time (dlopen)
 * by the code that uses it, so the NCCL macros name NCCL's error string
 * through FT_NCCL_ERRSTR(res), which such a file defines before including
 * this header (the default calls ncclGetErrorString directly).
 */
#ifndef FTI_CHECK_H
#define FTI_CHECK_H

#include <cuda_runtime.h>

#include "flashtrie.h"

/* FT_CUDA_FAILED logs a failed CUDA call and clears the error. */
#define FT_CUDA_FAILED(call, err_)                                            \
    do {                                                                      \
        FT_LOGF(FT_LOG_ERROR, "CUDA call %s failed: %s (%s)", #call,          \
                cudaGetErrorString(err_), cudaGetErrorName(err_));            \
        (void)cudaGetLastError();                                             \
    } while (0)

/* FT_CUDA_CHECK returns FT_ECUDA from the enclosing function when call
 * does not return cudaSuccess. */
#define FT_CUDA_CHECK(call)                                                   \
    do {                                                                      \
        cudaError_t ft_cuda_err_ = (call);                                    \
        if (ft_cuda_err_ != cudaSuccess) {                                    \
            FT_CUDA_FAILED(call, ft_cuda_err_);                               \
            return FT_ECUDA;                                                  \
        }                                                                     \
    } while (0)

/* FT_CUDA_CHECK_GOTO sets rc to FT_ECUDA and jumps to label on failure,
 * for functions that must release what they hold. */
#define FT_CUDA_CHECK_GOTO(call, rc, label)                                   \
    do {                                                                      \
        cudaError_t ft_cuda_err_ = (call);                                    \
        if (ft_cuda_err_ != cudaSuccess) {                                    \
            FT_CUDA_FAILED(call, ft_cuda_err_);                               \
            (rc) = FT_ECUDA;                                                  \
            goto label;                                                       \
        }                                                                     \
    } while (0)

#ifdef FT_HAVE_NCCL
#include <nccl.h>

#ifndef FT_NCCL_ERRSTR
#define FT_NCCL_ERRSTR(res_) ncclGetErrorString(res_)
#endif

/* FT_NCCL_FAILED logs a failed NCCL call with NCCL's message. */
#define FT_NCCL_FAILED(call, res_)                                            \
    FT_LOGF(FT_LOG_ERROR, "NCCL call %s failed: %s", #call,                   \
            FT_NCCL_ERRSTR(res_))

/* FT_NCCL_CHECK returns FT_ENCCL when call does not return ncclSuccess. */
#define FT_NCCL_CHECK(call)                                                   \
    do {                                                                      \
        ncclResult_t ft_nccl_res_ = (call);                                   \
        if (ft_nccl_res_ != ncclSuccess) {                                    \
            FT_NCCL_FAILED(call, ft_nccl_res_);                               \
            return FT_ENCCL;                                                  \
        }                                                                     \
    } while (0)

/* FT_NCCL_CHECK_GOTO sets rc to FT_ENCCL and jumps to label on failure. */
#define FT_NCCL_CHECK_GOTO(call, rc, label)                                   \
    do {                                                                      \
        ncclResult_t ft_nccl_res_ = (call);                                   \
        if (ft_nccl_res_ != ncclSuccess) {                                    \
            FT_NCCL_FAILED(call, ft_nccl_res_);                               \
            (rc) = FT_ENCCL;                                                  \
            goto label;                                                       \
        }                                                                     \
    } while (0)
#endif /* FT_HAVE_NCCL */

#endif /* FTI_CHECK_H */
