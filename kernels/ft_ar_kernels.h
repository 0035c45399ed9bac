/*
 * ft_ar_kernels.h - the contract between the GPU autoregressive step's host
 * side (shard/gpu_ar_step.c, C11) and its device code
 * (kernels/ft_ar_step.cu): plain structs and C-callable launchers that
 * enqueue on the caller's stream and never wait.
 *
 * A step without a normalisation, within FT_ARK_FUSED_MAX beams, is one
 * launch (ft_ark_step's comment); otherwise it is three or four launches:
 * one thread per beam (the counters
 * cleared first) finds its child range and its work (children, or row entries);
 * with a normalisation, one CTA per beam computes it; a grid of CTAs
 * expands every beam's work items, flattened (a wide beam is spread over
 * many CTAs), into two candidate lists (next beams, completed keys) in
 * scratch (thresholds, child search); a grid of CTAs per list
 * selects its first B (or n) by ar_rules.h's keys (radix passes over the
 * whole list, spread over the grid, down to at most FT_ARK_SORT_MAX
 * survivors), and one CTA per list sorts them and writes the outputs.  The rules are ar_rules.h's, shared with the CPU step.
 */
#ifndef FT_AR_KERNELS_H
#define FT_AR_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "flashtrie/internal/nav.h"

#ifdef __cplusplus
#define FT_ARK_STATIC_ASSERT(c, m) static_assert(c, m)
extern "C" {
#else
#define FT_ARK_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif

/* The most entries one selection sorts in shared memory (a list's B or n
 * is at most this). */
#define FT_ARK_SORT_MAX 4096u
#define FT_ARK_F_LEN 256u

/* ft_ark_list is one candidate list in device scratch (structure of
 * arrays); count lives in the step's counter pair. */
typedef struct ft_ark_list {
    uint64_t *k1, *k2;  /* key: ar_rules.h */
    uint64_t *node;
    double *score;      /* completed keys only (NULL for beams) */
    float *sigma;
    uint32_t *token;
    uint32_t *len;
    uint64_t cap;       /* entries */
} ft_ark_list;

FT_ARK_STATIC_ASSERT(sizeof(ft_ark_list) == 64, "ft_ark_list layout");

/* The grid selection's state per list, cleared with the counters before
 * each step (ft_ark_clear_bytes): one 256-bin histogram per radix pass (16
 * passes of 8 bits over the 128-bit key), the CTAs' barrier arrivals and
 * the survivors' count. */
#define FT_ARK_PASSES 16u
typedef struct ft_ark_sel_head {
    uint32_t hist[FT_ARK_PASSES][256];
    uint32_t bar, nsurv, pad[14];
} ft_ark_sel_head;

/* ft_ark_surv holds a list's survivors of the radix passes or of the
 * one-launch step's histogram cut (at most FT_ARK_SORT_MAX): key and place
 * in the list; pre is the one-launch step's histogram of the next beams
 * (12 bits of the distance from the best beam, ft_ar_step.cu "The
 * histogram cut"), then its coarse bins (the sums of 64 bins each):
 * cleared at open, then by the launch after the one that counted in it. */
#define FT_ARK_PRE_BINS 4096u
#define FT_ARK_PRE_COARSE 64u /* coarse bins, each the sum of 64 bins */
typedef struct ft_ark_surv {
    uint64_t k1[FT_ARK_SORT_MAX], k2[FT_ARK_SORT_MAX];
    uint32_t idx[FT_ARK_SORT_MAX];
    uint32_t pre[FT_ARK_PRE_BINS + FT_ARK_PRE_COARSE];
} ft_ark_surv;

/* The scratch a step clears first (in its first kernel): the counters (64
 * bytes), then the two heads, contiguous (counts == (uint32_t *)heads - 16). */
#define FT_ARK_CLEAR_BYTES (64u + 2u * (uint32_t)sizeof(ft_ark_sel_head))

/* ft_ark_params is everything one step (or a mask or top-k launch) reads
 * and writes; device pointers. */
typedef struct ft_ark_params {
    ft_trie_view view;
    const uint64_t *term_rank;
    const uint64_t *values;
    uint64_t n_keys;
    uint32_t value_bits;
    uint32_t cap_beam;     /* rows of the state arrays */
    const double *F;       /* [FT_ARK_F_LEN] */
    /* search parameters */
    uint32_t beam, results;
    float theta_tok, theta_sent;
    /* input */
    int32_t form, dtype, norm;
    uint32_t width;
    uint64_t stride;
    const uint32_t *ids;
    const void *logp;
    const uint32_t *vocab;
    /* current beams */
    const uint32_t *cur_count;
    const uint64_t *cur_node;
    const float *cur_sigma;
    const uint32_t *cur_len;
    /* next beams */
    uint32_t *nx_count;
    uint64_t *nx_node;
    float *nx_sigma;
    uint32_t *nx_len, *nx_parent, *nx_entry, *nx_token;
    /* completed keys (h_count NULL: none wanted) */
    uint32_t *h_count;
    uint32_t *h_parent, *h_entry, *h_token, *h_len;
    uint64_t *h_key_index, *h_value;
    double *h_score;
    float *h_sigma;
    /* scratch */
    uint32_t *counts;      /* [2]: entries in lists[0] (beams), [1] (keys) */
    ft_ark_list lists[2];
    ft_ark_sel_head *heads; /* [2]: the grid selection's per-list state */
    ft_ark_surv *surv;      /* [2]: its survivors */
    uint32_t sel_ctas;      /* CTAs per list of the selection */
    uint32_t flat_ctas;     /* CTAs of the flattened expansion */
    /* The one-launch step (ft_ark_step's comment): its CTAs (0: never
     * used) and its own counters and heads (FT_ARK_CLEAR_BYTES; the
     * counters' words 0-1 and 14-15 the two list counts, a pair per
     * launch by the parity of word 12, the count of launches (which also
     * picks the histogram, surv[0].pre or surv[1].pre), each pair cleared
     * by the launch after the one that used it; words 2-3 the 64-bit grid
     * barrier, 6-7 the 64-bit barrier of the next beams it holds across
     * the first, 8-9 and 10-11 the 64-bit count of those beams written
     * and its value before the launch: never cleared; word 4 the exit
     * ticket and 13 the held beams' places when they are all written,
     * left cleared by the last CTA). */
    uint32_t fused_ctas;
    uint32_t fused_split, fused_mask_split; /* ft_ark_init's thresholds */
    uint32_t fused_pdl;     /* ft_ark_init's: launched with programmatic
                             * stream serialization */
    uint32_t *fcounts;
    ft_ark_sel_head *fheads;
    /* per beam (cap_beam rows): its child range, normalisation, work items
     * (children or row entries; 0: nothing to expand) and whether it is
     * driven by its children */
    ft_child_range *b_rng;
    double *b_lse;
    uint32_t *b_work, *b_cd;
    /* a whole-row normalisation's, fl_stride per beam (the parts of the
     * widest row, ft_ar_parts(max_width)): its parts' maxima and sums,
     * and per beam the ticket of its last CTA (0 between launches: zeroed
     * at open, left 0 by each launch) */
    float *b_fmax;
    double *b_fsum;
    uint32_t *b_ftick;
    uint32_t fl_stride, fl_pad_;
    /* the trie's child table (ft_gk_ctab_build), or NULL: a beam's child
     * range is then two adjacent loads, not a chain of select and rank
     * misses */
    const uint64_t *ctab;
} ft_ark_params;

/* ft_ark_step_smem is the dynamic shared memory one selection CTA needs
 * (the host raises the kernel's limit to it once, ft_ark_init). */
size_t ft_ark_step_smem(void);

/* ft_ark_tuning: the one-launch step's knobs, for measurements (the
 * library reads no environment: ar_step_bench maps FT_AR_FUSED,
 * FT_AR_CTAS, FT_AR_SPLIT and FT_AR_MASK_SPLIT onto it).  fused 0 keeps
 * the launches; ctas (>= 2, below the grid's) runs fewer CTAs; split and
 * mask_split: the live beams above which the ranges are shared out;
 * threads and mask_threads (512 or 1024; fewer than the session's beams
 * means 1024): the CTAs' size for the step and the mask; nopre 1 cuts the
 * next beams of a long list by the radix passes alone, without the
 * histogram cut (ft_ar_step.cu, "The histogram cut"); nopdl 1 launches
 * the one-launch kernels plainly (ft_ar_step.cu, "Programmatic
 * dependent launch"). */
typedef struct ft_ark_tuning {
    int fused;             /* default 1 */
    uint32_t ctas;         /* default 0: one per SM */
    uint32_t split;        /* default 256 */
    uint32_t mask_split;   /* default 0 */
    uint32_t threads;      /* default 0: 512 when the beams fit */
    uint32_t mask_threads; /* default 0: 1024 */
    uint32_t fl_minb;      /* default 0: the whole-row kernel's registers
                              bound to 7 CTAs an SM; 1 unbounded, 5, 6, 8 */
    uint32_t nopre;        /* default 0: the histogram cut */
    uint32_t nopdl;        /* default 0: the one-launch kernels launched
                              with programmatic stream serialization on
                              compute capability 9.0 and later */
} ft_ark_tuning;

/* ft_ark_tuning_get returns the knobs in force (the defaults until
 * ft_ark_tuning_set); ft_ark_tuning_set changes them for the sessions
 * opened after it (not thread-safe against ft_ar_open). */
ft_ark_tuning ft_ark_tuning_get(void);
void ft_ark_tuning_set(const ft_ark_tuning *t);

/* ft_ark_prof_take: the one-launch step's phase marks (FT_GK_PROFILE
 * builds: CTA 0's clock64 between marks, summed over launches since the
 * last take), copied into out and cleared: out[0..7] the cycles of its
 * ranges, anchor, expansion, barrier, histogram cut, refinement, keep (or
 * the radix passes) and rank stages, out[8] the launches, out[9] the
 * refinement's barriers, out[10] / out[11] the launches that kept the
 * cut's keys / ran the radix passes; *khz the SM clock.  Returns 0; -1
 * in other builds (out cleared). */
#define FT_ARK_PROF_N 12
int ft_ark_prof_take(uint64_t out[FT_ARK_PROF_N], int *khz);

/* ft_ark_init sets the kernels' attributes (shared memory) and returns in
 * *sel_ctas the CTAs per list the grid selection may use (all of its CTAs
 * resident at once: they meet at grid barriers), in *fused_ctas those of
 * the one-launch step (0 when it cannot run: no co-resident grid, or
 * ft_ark_tuning's fused 0), and in *split and *mask_split the live beams
 * above which that step and the one-launch mask share the beams' child
 * ranges out over the grid, and in *pdl whether the one-launch kernels
 * are launched with programmatic stream serialization (compute
 * capability 9.0 on, unless ft_ark_tuning's nopdl); once per device,
 * before any launch.  Returns a cudaError_t as int. */
int ft_ark_init(uint32_t *sel_ctas, uint32_t *flat_ctas, uint32_t *fused_ctas,
                uint32_t *split, uint32_t *mask_split, uint32_t *pdl);

/* FT_ARK_FUSED_MAX is the most beams (cap_beam, beam, results) the
 * one-launch step takes; a larger session, or a normalised row, runs the
 * three or four launches. */
#define FT_ARK_FUSED_MAX 1024u

/* ft_ark_step enqueues one step: without a normalisation, and within
 * FT_ARK_FUSED_MAX, as one launch of a co-resident grid (every CTA finds
 * every beam's child range itself, or above fused_split live beams the
 * grid shares them out and meets; the grid expands the work items; one
 * grid barrier; then each list is selected by half the grid); else as
 * the launches above.  Returns the launch's cudaError_t. */
int ft_ark_step(const ft_ark_params *p, void *stream);

/* ft_ark_reset writes the root beam (count 1, node 0, sigma 0, len 0). */
int ft_ark_reset(uint32_t *count, uint64_t *node, float *sigma, uint32_t *len,
                 uint32_t *parent, uint32_t *entry, uint32_t *token,
                 void *stream);

/* ft_ark_mask enqueues the mask form (include/flashtrie.h ft_ar_mask):
 * p's view, cap_beam and cur_* are read; width, vocab from p.  Within
 * FT_ARK_FUSED_MAX beams it is one launch of the step's grid (clear,
 * ranges, one barrier, bits); else a memset and two launches. */
int ft_ark_mask(const ft_ark_params *p, uint32_t eos, uint32_t *mask,
                void *stream);

/* ft_ark_constrain enqueues ft_ar_constrain's rows (include/flashtrie.h)
 * after their mask: out[r * stride + j] = in's element where bit j of
 * mask row r ((width + 31) / 32 words a row) is set, else -inf of dtype
 * (FT_ARR_F32, _F16, _BF16), for r < rows, j < width; in place (out ==
 * in) it writes only the -inf.  One thread a column, a CTA's columns in
 * one row.  Returns the launch's cudaError_t. */
int ft_ark_constrain(const uint32_t *mask, uint32_t rows, uint32_t width,
                     uint64_t stride, int dtype, const void *in, void *out,
                     void *stream);

/* ft_ark_topk enqueues the top-k form (ft_ar_topk). */
int ft_ark_topk(const ft_ark_params *p, uint32_t k, uint32_t *out_entry,
                uint32_t *out_token, float *out_logp, void *stream);

/* ft_ark_walk enqueues ft_ar_walk (include/flashtrie.h) over rows >= 1:
 * one thread per row.  Returns the launch's cudaError_t. */
int ft_ark_walk(const ft_trie_view *view, const uint64_t *ctab,
                const int64_t *ids, uint32_t rows,
                uint32_t len, uint64_t stride, const uint32_t *lens,
                const int64_t *from, const uint32_t *vocab, uint32_t vocab_len,
                int64_t eos, int64_t *state, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* FT_AR_KERNELS_H */
