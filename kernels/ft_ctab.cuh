/*
 * ft_ctab.cuh - a node's child range from the child table
 * (ft_gk_ctab_build, kernels/ft_kernels.h): entries u and u + 1 (first
 * child, high labels before it), one 32-byte sector apart at most, the
 * same range ft_children computes, which the builder checked for every
 * node.  Device code, shared by the search kernels (kernels/search/) and
 * the autoregressive step (kernels/ft_ar_step.cu).
 */
#ifndef FT_CTAB_CUH
#define FT_CTAB_CUH

#include <stdint.h>

#include "flashtrie/internal/nav.h"

__device__ __forceinline__ ft_child_range ft_ctab_range(const uint64_t *T,
                                                        uint64_t u)
{
    ulonglong2 a = *reinterpret_cast<const ulonglong2 *>(T + 2 * u);
    ulonglong2 b = *reinterpret_cast<const ulonglong2 *>(T + 2 * u + 2);
    return ft_ctab_decode(a.x, a.y, b.x, b.y);
}

#endif /* FT_CTAB_CUH */
