/*
 * search/profile.cuh - the search kernel's profile marks (FT_GK_PROFILE
 * builds): the device-side buffers the host reads back (gk_sub, gk_chc,
 * gk_chw) and the macros that write them.  In a build without
 * FT_GK_PROFILE every mark compiles to nothing, so the phase files read
 * without #ifdef blocks and their machine code carries no trace of them.
 *
 * The host side of these marks (reading and printing them) lives in
 * kernels/ft_profile.cu; the buffers' shapes are in search/entry.h, which
 * both sides include.
 */
#ifndef FT_SEARCH_PROFILE_CUH
#define FT_SEARCH_PROFILE_CUH

#ifdef FT_GK_PROFILE
/* Finer marks of the selection (profile builds): CTA 0's next-list
 * selection (8 per step: entry, survivors in shared memory, sorted, list
 * done, lazy ranges done, beams done) and CTA 1's terminal selection
 * (slot 6: its whole duration, slot 7: the backtrace), b = 1 only. */
__device__ uint64_t gk_sub[FT_GK_MAX_T * 12];
/* from FT_GK_MAX_T * 8: CTA 0's local narrowing (gk_local_narrow), 4 per
 * step: the first read done, the radix passes done, the survivors done,
 * the passes run */
#define GK_NSUB(t, j) gk_sub[FT_GK_MAX_T * 8 + (t) * 4 + (j)]
__device__ uint32_t gk_sub_t;
#define GK_SUB(j)                                                             \
    do {                                                                      \
        if (blockIdx.x == 0 && threadIdx.x == 0)                              \
            gk_sub[gk_sub_t * 8 + (j)] = clock64();                           \
    } while (0)
#else
#define GK_SUB(j) ((void)0)
#endif

#ifdef FT_GK_PROFILE
/* The chain profile of fused launches (profile builds): per step t and
 * CTA, clock64 at [0] the release from step t's grid barrier, [1] the
 * end of its selection of step t, [2] the end of its expansion of step t
 * (step 0: with the token tables); per step and warp (numbered as the
 * expansion numbers them), lane 0's clock64 on its first item of the
 * step: [0] entry, [1] the beam's range and cut in hand, [2] the lookups
 * (labels, flags, probes) resolved, [3] the appends' positions back, [4]
 * the new beams' ranges and cuts stored, [5] the beam's children, [6]
 * the path (1 hash, 2 proposals) | items << 8, [7] 1. */
/* (GK_CH_T, GK_CH_CTAS, GK_CH_WARPS: search/entry.h) */
__device__ unsigned long long gk_chc[GK_CH_T][GK_CH_CTAS][6];
__device__ unsigned long long gk_chw[GK_CH_T][GK_CH_WARPS][8];
#define GK_CHC(t, j)                                                          \
    do {                                                                      \
        if (threadIdx.x == 0 && (t) < GK_CH_T && blockIdx.x < GK_CH_CTAS)     \
            gk_chc[t][blockIdx.x][j] = clock64();                             \
    } while (0)
#define GK_CHS(t, j)                                                          \
    do {                                                                      \
        __syncthreads();                                                      \
        GK_CHC(t, j);                                                         \
    } while (0)
#else
#define GK_CHC(t, j) ((void)0)
#define GK_CHS(t, j) ((void)0)
#endif

#ifdef FT_GK_PROFILE
#define GK_MARK(i)                                                            \
    do {                                                                      \
        if (P.prof && blockIdx.x == 0 && threadIdx.x == 0)                    \
            P.prof[i] = clock64();                                            \
    } while (0)
#else
#define GK_MARK(i) ((void)0)
#endif

/* Profile builds: the latest (or with MIN, the earliest) %globaltimer of
 * every CTA at word w of the launch marks (FT_GK_PROF_GT).  A function,
 * not a do-while macro: after the fused instance's return the loop was
 * "not reachable" (nvcc #128-D). */
#ifdef FT_GK_PROFILE
__device__ __forceinline__ void gk_gt(const ft_gk_params &P, uint32_t w,
                                      bool min)
{
    if (P.prof && threadIdx.x == 0) {
        unsigned long long gt;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(gt));
        unsigned long long *a =
            (unsigned long long *)&P.prof[FT_GK_PROF_GT + w];
        if (min)
            atomicMin(a, gt);
        else
            atomicMax(a, gt);
    }
}
#define GK_GT(w, MIN) gk_gt(P, (w), (MIN))
#else
#define GK_GT(w, MIN) ((void)0)
#endif

/* Request 0's list lengths of step t (profile builds). */
__device__ __forceinline__ void gk_prof_len(const ft_gk_params &P, uint32_t t)
{
#ifdef FT_GK_PROFILE
    if (P.prof && blockIdx.x == 0 && threadIdx.x == 0 && t < P.reqs[0].T) {
        P.prof[FT_GK_PROF_LEN + 2 * t] = P.reqs[0].steps[t].n_next;
        P.prof[FT_GK_PROF_LEN + 2 * t + 1] = P.reqs[0].steps[t].n_term;
    }
#else
    (void)P;
    (void)t;
#endif
}

/* The phase files' marks.  Each stands for one #ifdef FT_GK_PROFILE block
 * that the phase code once held inline, with the same statements in the
 * same place, so that a profile build's machine code is what it was; in
 * any other build each is empty, or only "uses" its arguments where the
 * code would otherwise warn of unused ones.
 *
 * GK_PROF_ONLY(...) keeps a declaration or statement that only profile
 * builds need (a start clock, a pass counter, the marking thread). */
#ifdef FT_GK_PROFILE
#define GK_PROF_ONLY(...) __VA_ARGS__
#else
#define GK_PROF_ONLY(...)
#endif

/* gk_sub slot j of step t (the selection's finer marks above): v, or the
 * clock now, where cond holds. */
#ifdef FT_GK_PROFILE
#define GK_SUB_SET(cond, t, j, v)                                             \
    do {                                                                      \
        if (cond)                                                             \
            gk_sub[(t) * 8 + (j)] = (v);                                      \
    } while (0)
#define GK_SUB_AT(cond, t, j) GK_SUB_SET(cond, t, j, clock64())
/* Slots 2, 3 and 4 (sorted, list done, lazy ranges done) at one clock: a
 * spread next list is ranked rather than sorted, so they fall together. */
#define GK_SUB_RANKED(cond, t)                                                \
    do {                                                                      \
        if (cond)                                                             \
            gk_sub[(t) * 8 + 2] = gk_sub[(t) * 8 + 3] = gk_sub[(t) * 8 + 4] = \
                clock64();                                                    \
    } while (0)
/* Slot 5: the beams done, after the CTA's barrier (pc: CTA 0 marks). */
#define GK_SUB_NEXT_END(pc, t)                                                \
    do {                                                                      \
        __syncthreads();                                                      \
        if ((pc) && threadIdx.x == 0)                                         \
            gk_sub[(t) * 8 + 5] = clock64();                                  \
    } while (0)
/* Slot 6: the terminal selection's time since c0; slot 7 (its backtrace)
 * zeroed here and set by GK_SUB_BACKTRACE in a last step. */
#define GK_SUB_TERM(cond, t, c0)                                              \
    do {                                                                      \
        if (cond) {                                                           \
            gk_sub[(t) * 8 + 6] = clock64() - (c0);                           \
            gk_sub[(t) * 8 + 7] = 0;                                          \
        }                                                                     \
    } while (0)
#define GK_SUB_BACKTRACE(cond, t, c0)                                         \
    do {                                                                      \
        if (cond)                                                             \
            gk_sub[(t) * 8 + 7] = clock64() - (c0) - gk_sub[(t) * 8 + 6];     \
    } while (0)
/* The step GK_SUB's marks belong to, set after each grid selection. */
#define GK_SUB_STEP(t)                                                        \
    do {                                                                      \
        if (blockIdx.x == 0 && threadIdx.x == 0)                              \
            gk_sub_t = (t);                                                   \
    } while (0)
/* gk_local_narrow's slot j of step t (GK_NSUB) where pc holds; with the
 * passes' count npass in slot 3 beside the passes' end in slot 1. */
#define GK_NSUB_AT(pc, t, j)                                                  \
    do {                                                                      \
        if (pc)                                                               \
            GK_NSUB(t, j) = clock64();                                        \
    } while (0)
#define GK_NSUB_PASSES(pc, t, npass)                                          \
    do {                                                                      \
        if (pc) {                                                             \
            GK_NSUB(t, 1) = clock64();                                        \
            GK_NSUB(t, 3) = (npass);                                          \
        }                                                                     \
    } while (0)
#else
#define GK_SUB_SET(cond, t, j, v) ((void)0)
#define GK_SUB_AT(cond, t, j) ((void)0)
#define GK_SUB_RANKED(cond, t) ((void)0)
#define GK_SUB_NEXT_END(pc, t) ((void)(pc), (void)(t))
#define GK_SUB_TERM(cond, t, c0) ((void)0)
#define GK_SUB_BACKTRACE(cond, t, c0) ((void)0)
#define GK_SUB_STEP(t) ((void)0)
#define GK_NSUB_AT(pc, t, j) ((void)0)
#define GK_NSUB_PASSES(pc, t, npass) ((void)0)
#endif

/* The chain profile's per-warp marks in gk_expand_item (gk_chw, lane 0
 * of warp pw, fused launches only: on).  GK_PM_BEGIN declares the marks
 * and takes [0]; GK_PM(j) takes mark j; GK_PM_PATH records the lookup
 * path; GK_PM_AFTER(dep, j) takes mark j only once dep (the appends'
 * positions) has arrived, through a test the compiler cannot drop;
 * GK_PM_END writes the warp's row. */
#ifdef FT_GK_PROFILE
#define GK_PM_BEGIN(on, t, pw)                                                \
    unsigned long long pm[5] = {};                                            \
    const bool pon = (on) && (pw) >= 0 && (threadIdx.x & 31u) == 0 &&        \
                     (t) < GK_CH_T && (uint32_t)(pw) < GK_CH_WARPS;           \
    uint32_t ppath = 0;                                                       \
    GK_PM(0)
#define GK_PM(j)                                                              \
    do {                                                                      \
        if (pon)                                                              \
            pm[j] = clock64();                                                \
    } while (0)
#define GK_PM_PATH(v) (ppath = (v))
#define GK_PM_AFTER(dep, j)                                                   \
    do {                                                                      \
        if (pon) {                                                            \
            uint32_t dep_ = (dep);                                            \
            if (dep_ == 0xdeadbeefu)                                          \
                pm[0] = 0;                                                    \
            pm[j] = clock64();                                                \
        }                                                                     \
    } while (0)
#define GK_PM_END(t, pw, deg, items)                                          \
    do {                                                                      \
        if (pon) {                                                            \
            __threadfence_block();                                            \
            pm[4] = clock64();                                                \
            unsigned long long *w = gk_chw[t][pw];                            \
            for (int j = 0; j < 5; j++)                                       \
                w[j] = pm[j];                                                 \
            w[5] = (deg);                                                     \
            w[6] = ppath | (unsigned long long)(items) << 8;                   \
            w[7] = 1;                                                         \
        }                                                                     \
    } while (0)
#else
#define GK_PM_BEGIN(on, t, pw) (void)(pw)
#define GK_PM(j) ((void)0)
#define GK_PM_PATH(v) ((void)0)
#define GK_PM_AFTER(dep, j) ((void)0)
#define GK_PM_END(t, pw, deg, items) ((void)0)
#endif

#endif /* FT_SEARCH_PROFILE_CUH */
