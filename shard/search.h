/*
 * search.h - what the CPU and GPU engines share: the prepared request, the
 * packed ordering keys of SPEC section 4, the result assembly and the engine
 * operations table.
 */
#ifndef FT_SEARCH_H
#define FT_SEARCH_H

#include "trie.h"

/* ft_prep is a validated request in the form both engines search: per
 * position the proposals stable-sorted by logp descending, cut to those
 * with logp > theta_tok (keff[t] of them, a prefix after the sort), and
 * the length-normalisation table F[d] = pow(6/(5+d), alpha), d = 0..T.
 * Buffers are sized once (ft_prep_init) and reused. */
typedef struct ft_prep {
    uint32_t T, K;
    uint32_t *tok;   /* [t*K + k], k after the sort */
    float *logp;     /* [t*K + k] */
    uint32_t *keff;  /* [t] */
    double F[FT_MAX_T + 1];
    uint32_t beam, results;
    float theta_tok, theta_sent;
    double alpha;
    uint32_t cap_t, cap_k;
    void *scratch;   /* sort scratch */
} ft_prep;

int ft_prep_init(ft_prep *p, uint32_t max_t, uint32_t max_k);
void ft_prep_free(ft_prep *p);
/* ft_prep_fill prepares a request that ft_request_validate accepted. */
int ft_prep_fill(ft_prep *p, const ft_request *req);

/* ft_sigma_key maps a binary32 sigma to a u32 that sorts ascending when
 * sigma sorts descending (+0 and -0 map alike). */
FT_HD uint32_t ft_sigma_key(float sigma)
{
    union {
        float f;
        uint32_t u;
    } c;
    c.f = sigma + 0.0f; /* -0 becomes +0 */
    uint32_t u = c.u;
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u); /* ascending for asc */
    return ~u;                                       /* ascending for desc */
}

/* ft_cand_key packs SPEC section 4's beam order (sigma desc, r asc, k asc)
 * into one u64 that sorts ascending: sigma key (32) | r (16) | k (16). */
FT_HD uint64_t ft_cand_key(float sigma, uint32_t r, uint32_t k)
{
    return ((uint64_t)ft_sigma_key(sigma) << 32) | ((uint64_t)r << 16) | k;
}

/* ft_score_key maps a binary64 score to a u64 ascending for descending
 * score; the final order is (score desc, order asc) with order =
 * (t << 24) | (r << 12) | k packed into 30 bits (t < 64, r, k < 4096). */
FT_HD uint64_t ft_score_key(double score)
{
    union {
        double d;
        uint64_t u;
    } c;
    c.d = score + 0.0;
    uint64_t u = c.u;
    u = (u & 0x8000000000000000ull) ? ~u : (u | 0x8000000000000000ull);
    return ~u;
}

FT_HD uint32_t ft_order(uint32_t t, uint32_t r, uint32_t k)
{
    return (t << 24) | (r << 12) | k;
}

/* ft_sel is one terminal candidate as the engines report it: enough to
 * rebuild its key (by walking the engine's beam history) and its value. */
typedef struct ft_sel {
    uint64_t node;   /* terminal trie node */
    double score;
    float sigma;
    uint32_t order;  /* ft_order(t, r, k) */
} ft_sel;

/* ft_result_put_hit appends one hit with its tokens to res and looks up its
 * value in the index (values stay in host memory). */
int ft_result_put_hit(ft_result *res, const ft_trie *t, const ft_sel *s,
                      const uint32_t *toks, uint32_t len);
/* ft_result_put_value is ft_result_put_hit with the value already looked
 * up (s->node is not read). */
int ft_result_put_value(ft_result *res, uint64_t value, const ft_sel *s,
                        const uint32_t *toks, uint32_t len);

/* Engine implementations plug in through this table. */
/* Engine implementations plug in through this table.  search_batch gets
 * requests that ft_request_validate accepted (at most FT_ENGINE_CHUNK of
 * them) and fills each result (status FT_OK, or an engine error). */
#define FT_ENGINE_CHUNK 64
typedef struct ft_engine_ops {
    const char *name;
    int (*search_batch)(ft_engine *eng, const ft_request *const *reqs,
                        ft_result *const *res, size_t n);
    void (*close)(ft_engine *eng);
} ft_engine_ops;

struct ft_engine {
    const ft_engine_ops *ops;
    const ft_index *idx;
    ft_engine_opts opts;
    void *impl;
    int failed; /* an engine error (e.g. CUDA) marks the engine failed */
    int timing; /* FT_GPU_TIMING set: engine.c times validation */
    double t_validate; /* seconds in ft_request_validate (timing only) */
};

/* Constructors of the engines (engine.c dispatches on opts->kind). */
int ft_cpu_engine_open(ft_engine *eng, char *errbuf, size_t errlen);
int ft_gpu_engine_open(ft_engine *eng, char *errbuf, size_t errlen);

#endif /* FT_SEARCH_H */
