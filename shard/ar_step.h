/*
 * ar_step.h - the autoregressive step session (include/flashtrie.h,
 * "Autoregressive steps") inside shard/: the session object, shared by the
 * CPU step (ar_step.c) and the GPU step's host side (gpu_ar_step.c).
 */
#ifndef FT_AR_STEP_H
#define FT_AR_STEP_H

#include "flashtrie/internal/ar_rules.h"
#include "search.h"

/* The F table covers every key length (the specification: at most 255 tokens). */
#define FT_AR_F_LEN (FT_MAX_KEY_LEN_LIMIT + 1u)

/* arc is a candidate of the CPU step: the next beam's entry or a completed
 * key (k1 = sigma key or score key, k2 = ft_ar_tail). */
typedef struct ft_ar_cand {
    uint64_t k1, k2;
    uint64_t node;
    double score;
    float sigma;
    uint32_t token;
    uint32_t len;
} ft_ar_cand;

struct ft_ar {
    const ft_index *idx;
    ft_ar_opts o;        /* the active parameters (ft_ar_configure) */
    uint32_t cap_beam;   /* the opened beam and results: buffer sizes */
    uint32_t cap_results;
    double F[FT_AR_F_LEN];
    int failed;
    char err[256];
    /* CPU step scratch: per thread, bounded candidate buffers (2x what
     * is kept) and the normalisation's lanes (scr[0]: the caller's);
     * each beam's child range; the threads' kept candidates, merged. */
    struct ar_scr *scr;
    ft_child_range *cr;
    ft_ar_cand *merge;
    struct ar_pool *pool; /* threads - 1 workers, started at the first
                           * step large enough to share (NULL until) */
    uint64_t par_work;    /* row entries from which a call is shared out
                           * (AR_PAR_WORK; tests lower it) */
    /* the last vocabulary a CPU call took (a copy of its inv_width
     * tokens) and its inverse: (token << 32 | column), sorted */
    uint32_t *inv_vocab;
    uint32_t inv_width;
    uint64_t *inv;
    int inv_off;          /* tests: every column asked, no inverse */
    int no_fma;           /* tests: the normalisations' clones without
                           * FMA instructions (fmaf calls), as on a CPU
                           * without AVX2 and FMA */
    void *gpu; /* the GPU step's state (gpu_ar_step.c), NULL on the CPU */
};

/* ft_gpu_ar_open copies the trie and values to the device and sizes the
 * step's scratch; FT_ENODEV / FT_ENOTSUP as ft_ar_open says. */
int ft_gpu_ar_open(ft_ar *ar, char *errbuf, size_t errlen);
void ft_gpu_ar_close(ft_ar *ar);
/* ft_gpu_ar_params copies the active parameters (F) to the device. */
int ft_gpu_ar_params(ft_ar *ar);
int ft_gpu_ar_memcpy(ft_ar *ar, void *dst, const void *src, size_t bytes,
                     int to_session);
int ft_gpu_ar_alloc(ft_ar *ar, void **p, size_t bytes);
void ft_gpu_ar_free(ft_ar *ar, void *p);
int ft_gpu_ar_reset(ft_ar *ar, ft_ar_beams *b, void *stream);
int ft_gpu_ar_step(ft_ar *ar, const ft_ar_beams *cur, const ft_ar_input *in,
                   ft_ar_beams *next, ft_ar_hits *hits, void *stream);
int ft_gpu_ar_mask(ft_ar *ar, const ft_ar_beams *cur, uint32_t width,
                   const uint32_t *vocab, uint32_t eos, uint32_t *mask,
                   void *stream);
/* ft_gpu_ar_constrain enqueues ft_ar_constrain's rows (its mask already
 * enqueued). */
int ft_gpu_ar_constrain(ft_ar *ar, const ft_ar_input *in, uint32_t rows,
                        const uint32_t *mask, void *out, void *stream);
int ft_gpu_ar_walk(ft_ar *ar, const int64_t *ids, uint32_t rows, uint32_t len,
                   uint64_t stride, const uint32_t *lens, const int64_t *from,
                   const uint32_t *vocab, uint32_t vocab_len, int64_t eos,
                   int64_t *state, void *stream);
int ft_gpu_ar_topk(ft_ar *ar, const ft_ar_beams *cur, const ft_ar_input *in,
                   uint32_t k, uint32_t *out_entry, uint32_t *out_token,
                   float *out_logp, void *stream);

#endif /* FT_AR_STEP_H */
