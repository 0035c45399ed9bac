/*
 * search_util.h - helpers for the search tests: random libraries written as
 * index files with the public builder (ft_builder), and a brute-force
 * reference search that follows docs/specification.md section 4's pseudo-code
 * literally over a plain pointer trie.  Compiled once, in ft_test_support
 * (search_util.c).
 *
 * The reference is written for clarity, not speed: full candidate lists,
 * full sorts with comparators on the floats themselves, parent pointers.
 */
#ifndef FT_SEARCH_UTIL_H
#define FT_SEARCH_UTIL_H

#include <math.h>
#include <unistd.h>

#include "flashtrie/internal/engine.h"
#include "ft_test.h"

#define SU_MAX_LEN 64

typedef struct su_key {
    uint32_t len;
    uint32_t t[SU_MAX_LEN];
    uint64_t value;
} su_key;

int su_key_cmp(const void *a, const void *b);

/* su_build sorts keys, keeps the first value of duplicates (the smallest
 * value, as values are given in input order), writes an index to path and
 * opens it.  Returns the number of distinct keys left in keys[]. */
size_t su_build(su_key *keys, size_t n, const char *path,
                ft_index **idx);

/* ---- the pointer trie ---- */

typedef struct su_node {
    uint32_t n, cap;
    uint32_t *labels;          /* sorted */
    struct su_node **kids;
    int terminal;
    uint64_t value;
} su_node;

su_node *su_node_new(void);

su_node *su_child(const su_node *u, uint32_t tok);

void su_insert(su_node *root, const su_key *k);

void su_free(su_node *u);

/* ---- the reference search ---- */

typedef struct su_cand {
    const su_node *node;
    float sigma;
    uint32_t len, t, r, k;
    uint32_t tok;
    const struct su_cand *parent; /* NULL for the root */
    double score;
} su_cand;

typedef struct su_hit {
    uint32_t len;
    uint32_t toks[SU_MAX_LEN];
    uint64_t value;
    double score;
    float sigma;
} su_hit;

int su_beam_cmp(const void *a, const void *b);

int su_sel_cmp(const void *a, const void *b);

typedef struct su_prop {
    uint32_t tok;
    float logp;
    uint32_t in; /* input index, for the stable sort */
} su_prop;

int su_prop_cmp(const void *a, const void *b);


/* su_search runs docs/specification.md section 4 on a valid request; returns
 * the hit count written to hits (capacity FT_MAX_RESULTS). */
uint32_t su_search(const su_node *root, const ft_request *req,
                   su_hit *hits);

/* su_same_result checks an engine result against reference hits, bit for
 * bit; what names the case in the failure message. */
int su_same_result(const ft_result *res, const su_hit *hits, uint32_t m,
                   const char *what);

/* su_same_results compares two engine results bit for bit. */
int su_same_results(const ft_result *x, const ft_result *y);
/* su_same_full is su_same_results plus the orders, and the key indexes
 * when both results number the keys alike (key indexes are terminal ranks
 * in level order: a group's, shard base + the shard's own, differ from
 * one index's over the same keys). */
int su_same_full(const ft_result *x, const ft_result *y, int key_index);
/* su_gpu_opts sets o to a GPU engine's options: the defaults, or (small)
 * small slots (max_batch 3, K 64, T 8, so that larger requests take the
 * big slot) with every list longer than its limit through the grid
 * selection's radix passes, down to the exact limit, and every node of
 * two or more children in the child map. */
void su_gpu_opts(ft_engine_opts *o, int small);

/* ---- random cases (search_ref_test, gpu_equal_test) ---- */

typedef struct su_lib_params {
    int vocab;       /* 0 tiny, 1 small, 2 straddles 2^16, 3 full 32-bit,
                        4 medium (V * 1000) */
    size_t nkeys;
    uint32_t maxlen;
} su_lib_params;

uint32_t su_rand_tok(uint64_t *s, int vocab, uint32_t V);

typedef struct su_case {
    ft_request req;
    uint32_t *tok;
    float *lp;
    su_hit *ref;
    uint32_t nref;
} su_case;

float su_rand_logp(uint64_t *s, int mode);

void su_make_request(su_case *c, uint64_t *s, const su_key *keys, size_t m,
                     const su_lib_params *lp, uint32_t V, uint32_t T,
                     uint32_t K, uint32_t B);

/* su_rand_keys makes lp->nkeys random keys over a vocabulary of size V
 * (calloc'd, one spare slot), a quarter of them prefixes or extensions of
 * earlier keys; values are i * 3 + 7. */
su_key *su_rand_keys(uint64_t *s, const su_lib_params *lp, uint32_t V);

/* su_rand_perm fills perm with a random permutation of 0..n-1. */
void su_rand_perm(uint64_t *s, uint32_t *perm, uint32_t n);

/* ---- a library with random requests and their reference results ---- */

/* su_cases is one random library (an index file and, for the reference, a
 * pointer trie) with n random requests, their reference hits, the requests
 * again in order as one batch, and a result per request allocated for
 * FT_MAX_RESULTS hits. */
typedef struct su_cases {
    su_key *keys;
    size_t m;           /* distinct keys in keys[] and idx */
    uint32_t V;
    ft_index *idx;
    su_node *root;      /* NULL when made without the reference */
    uint32_t n;
    su_case *cs;        /* cs[i].ref is NULL without the reference */
    ft_request *batch;  /* batch[i] = cs[i].req */
    ft_result *res;
    uint64_t nhits;     /* reference hits over all cases */
} su_cases;

/* su_cases_make draws the vocabulary, the keys and n requests (T, K and
 * beam uniform in 1..maxT, 1..maxK, 1..maxB) from *s in that order, so one
 * seed gives the same cases wherever it is used; every request must pass
 * ft_request_validate.  The index is written to path.  Without with_ref no
 * trie is built and no reference run. */
void su_cases_make(su_cases *c, uint64_t *s, const su_lib_params *lp,
                   uint32_t n, uint32_t maxT, uint32_t maxK, uint32_t maxB,
                   const char *path, int with_ref);

void su_cases_free(su_cases *c);

/* su_cases_cpu answers c->batch into c->res with one CPU engine of the
 * default options, in one batch. */
void su_cases_cpu(su_cases *c);

/* su_split_build cuts the sorted distinct keys[0..m) into ns <= 8 shards at
 * random points between first tokens drawn from *s (or at either end, for
 * empty shards), writes shard j to dir/shard<j>.idx and opens it as sh[j]. */
void su_split_build(uint64_t *s, const su_key *keys, size_t m, size_t ns,
                    const char *dir, ft_index **sh);

/* su_run_widths answers reqs[0..n) into res[0..n) in batches of w (the last
 * may be shorter), through eng or, when eng is NULL, through g. */
void su_run_widths(ft_engine *eng, fti_group *g, const ft_request *reqs,
                   uint32_t n, uint32_t w, ft_result *res);

/* su_cpu_group answers batch[0..n) with a group of one-thread CPU engines
 * over sh[0..ns) into a new array of n results (su_results_free frees
 * it): what a GPU group over the same shards must equal, key indexes
 * too. */
ft_result *su_cpu_group(ft_index *const *sh, size_t ns,
                        const ft_request *batch, uint32_t n);
void su_results_free(ft_result *res, uint32_t n);

/* su_check_group checks a GPU group's result got against the CPU group's
 * (cg, key indexes too), the unsharded GPU engine's (want) and the
 * reference of case c, and exits on the first difference, naming what. */
void su_check_group(const ft_result *got, const ft_result *cg,
                    const ft_result *want, const su_case *c,
                    const char *what);

/* su_check_all checks res[i] against the reference of case perm[i] (case i
 * when perm is NULL) for i < c->n and exits on the first difference; the
 * failure names the case after prefix. */
void su_check_all(const su_cases *c, const ft_result *res,
                  const uint32_t *perm, const char *prefix);

/* ---- the GPU tests' set-up (gpu_group_test, gpu_multi_test,
 * gpu_nccl_dev_test) ---- */

/* su_gpu_count opens a GPU engine over a one-key library (dir/probe.idx)
 * on GPUs 0, 1, ... (up to 8) and returns how many open; 0 when none does
 * (err says why).  An open of GPU 0 that fails otherwise than FT_ENODEV
 * or FT_ENOTSUP exits. */
int su_gpu_count(const char *dir, char *err, size_t errlen);

/* su_nccl_probe says whether a one-rank NCCL group opens on GPU 0
 * (dir/nccl.idx): the build has NCCL and libnccl.so.2 loads; err says
 * why not. */
int su_nccl_probe(const char *dir, char *err, size_t errlen);

/* su_results_new allocates a result per case of c (FT_MAX_RESULTS hits of
 * the case's T); su_results_free frees them. */
ft_result *su_results_new(const su_cases *c);

/* su_gpu_answers answers c->batch with one unsharded GPU engine of the
 * default options on GPU device, in one batch, into a new array of
 * results (su_results_new), and exits unless every answer equals the CPU
 * engine's (c->res, su_cases_cpu; key indexes too), naming seed. */
ft_result *su_gpu_answers(const su_cases *c, int device, uint64_t seed);

#endif /* FT_SEARCH_UTIL_H */
