/*
 * search/entry.h - what the host code of the search kernel knows of its
 * device translation unit (kernels/ft_search.cu), and the one header both
 * sides include.
 *
 * The host launchers (kernels/ft_launch.cu, kernels/ft_profile.cu) live in
 * translation units of their own so that the file with the device code
 * holds no host code but this accessor.  What they cannot see from there
 * -- the template kernels' instances, the size of the shared-memory
 * layout, the profile's device buffers -- ft_search.cu hands them through
 * gk_entry_get; the plain kernels of the child table they launch through
 * the declarations below, whose host stubs ft_search.cu defines.
 */
#ifndef FT_SEARCH_ENTRY_H
#define FT_SEARCH_ENTRY_H

#include <stddef.h>
#include <stdint.h>

#include "ft_kernels.h"

/* Threads of a CTA of the search and step kernels: the device code sizes
 * its shared memory by it, the host launches with it. */
#define FT_GK_BLOCK 512

/* The chain profile's shape (profile builds): steps, CTAs and warps the
 * device marks (gk_chc, gk_chw) and the host reads back. */
#define GK_CH_T 16u
#define GK_CH_CTAS 256u
#define GK_CH_WARPS (GK_CH_CTAS * 16u)

/* The device translation unit's entry points and sizes. */
struct gk_entry {
    /* The search kernel's instances: 0 lazy (or not spread), 1 spread,
     * 2 fused (the index ft_gk_launch uses). */
    const void *search[3];
    const void *step;  /* ft_gk_step_kernel */
    const void *xstep; /* ft_gk_xstep_kernel (search/exchange.cuh) */
    const void *nstep; /* ft_gk_nstep_kernel (search/xnccl.cuh); NULL in a
                        * build without NCCL's device API */
    size_t smem;       /* sizeof(gk_smem): a spreading launch's shared memory */
    size_t smem_base;  /* offsetof(gk_smem, sp): any other launch's */
    /* The profile's device buffers (gk_sub, gk_chc, gk_chw) as symbols
     * for cudaMemcpyFromSymbol; NULL in a build without FT_GK_PROFILE. */
    const void *sub, *chc, *chw;
};

const gk_entry *gk_entry_get(void);

/* The child table's and child map's kernels (search/ctab.cuh). */
__global__ void gk_ctab_fill(const ft_trie_view V, uint64_t *T);
__global__ void gk_ctab_check(const ft_trie_view V, const uint64_t *T,
                              unsigned long long *bad);
__global__ void gk_cmap_count_k(const ft_trie_view V, const uint64_t *T,
                                uint32_t min_deg, unsigned long long *out);
__global__ void gk_cmap_fill_k(const ft_trie_view V, const uint64_t *T,
                               uint64_t *M, uint64_t mask, uint32_t min_deg,
                               int check, unsigned long long *bad);

#endif /* FT_SEARCH_ENTRY_H */
