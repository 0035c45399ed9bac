/*
 * ft_search.cu - the persistent cooperative beam-search kernel, and the
 * step kernel of shard groups built from the same device functions: the
 * one translation unit of the GPU engine's device code.
 *
 * One launch runs all T steps of every request of a batch.  Per step:
 *
 *   A. expansion (all warps of the grid): an item is (request, beam, 32
 *      proposals) or (request, beam, 32 children); lanes look their
 *      proposal up among the beam's sorted children (ft_find_child), or
 *      their child's label up in the position's token -> k hash table
 *      (when the beam has fewer children than passing proposals).  Both
 *      paths give the same candidate set.  Survivors are appended with
 *      warp-aggregated atomics: terminal nodes to the step's terminal
 *      buffer, nodes with children to the next buffer, keyed by
 *      ft_cand_key (sigma desc, r asc, k asc in one ascending u64).
 *   -- grid.sync --
 *   B. selection (one CTA per request and list): radix select of the best
 *      B next candidates (or n terminal ones) on the u64 key, a bitonic
 *      sort of the survivors in shared memory, then for the next list the
 *      new beams (child range, theta_sent cut, item prefix sums) and the
 *      history entry (parent rank, k); for the terminal list the scores
 *      and a merge into the request's running best n.  In the last step
 *      the terminal CTA also backtraces its results and writes them out.
 *   -- grid.sync -- (not after the last step)
 *
 * Exactness (docs/specification.md section 4): sigma only by __fadd_rn, score
 * by one __dmul_rn with F from the host, every order by the packed integer
 * keys; within one step score order equals sigma order (F > 0 is the same for
 * every candidate and distinct binary32 sigmas give distinct binary64
 * products), so the terminal list sorted by ft_cand_key is sorted by
 * (score desc, order asc) and can be merged with earlier steps by
 * (ft_score_key, step) alone.
 *
 * The device code is split by phase into the headers under
 * kernels/search/, included below in the order they depend on each other
 * (docs/gpu-engine.md has the table).  They stay one translation unit so
 * that the compiler sees every device function at once: the split moved
 * code between files, not between compilations, and left the machine
 * code as it was.  The host code that configures and launches the
 * kernels is in kernels/ft_launch.cu, the profile's host side in
 * kernels/ft_profile.cu; this file hands them the kernels through
 * gk_entry_get, its only host code.
 */

#include "search/state.cuh"    /* tunables, shared memory, list shapes */
#include "search/expand.cuh"   /* phase A: the expansion */
#include "search/tokens.cuh"   /* token -> k tables */
#include "search/rounds.cuh"   /* a step in two rounds */
#include "search/narrow.cuh"   /* radix races and the bitonic sort */
#include "search/select.cuh"   /* phase B: one CTA a list */
#include "search/terminal.cuh" /* the terminal merge */
#include "search/spread.cuh"   /* phase B spread over the grid */
#include "search/kernel.cuh"   /* the kernels' entry points */
#include "search/shard.cuh"    /* a shard's step, the step kernel */
#include "search/exchange.cuh" /* the shard kernel: steps + exchange */
#include "search/xnccl.cuh"    /* the same across GPUs: NCCL device API */
#include "search/ctab.cuh"     /* child table and map kernels */

/* The host launchers' view of this translation unit (search/entry.h):
 * the instances of the template kernel exist only here, and so do the
 * shared-memory layout and the profile's buffers. */
const gk_entry *gk_entry_get(void)
{
    static const gk_entry e = {
        {(const void *)ft_gk_search<false, false>,
         (const void *)ft_gk_search<true, false>,
         (const void *)ft_gk_search<true, true>},
        (const void *)ft_gk_step_kernel,
        (const void *)ft_gk_xstep_kernel,
#ifdef FT_GK_NSTEP
        (const void *)ft_gk_nstep_kernel,
#else
        NULL,
#endif
        sizeof(gk_smem),
        offsetof(gk_smem, sp),
#ifdef FT_GK_PROFILE
        (const void *)&gk_sub,
        (const void *)&gk_chc,
        (const void *)&gk_chw,
#else
        NULL,
        NULL,
        NULL,
#endif
    };
    return &e;
}
