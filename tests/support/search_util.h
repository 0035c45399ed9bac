/*
 * search_util.h - helpers for the search tests: random libraries written as
 * index files with the public builder (ft_builder), and a brute-force
 * reference search that follows SPEC section 4's pseudo-code literally over
 * a plain pointer trie.  Compiled once, in ft_test_support (search_util.c).
 *
 * The reference is written for clarity, not speed: full candidate lists,
 * full sorts with comparators on the floats themselves, parent pointers.
 */
#ifndef FT_SEARCH_UTIL_H
#define FT_SEARCH_UTIL_H

#include <math.h>
#include <unistd.h>

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


/* su_search runs SPEC section 4 on a valid request; returns the hit count
 * written to hits (capacity FT_MAX_RESULTS). */
uint32_t su_search(const su_node *root, const ft_request *req,
                   su_hit *hits);

/* su_same_result checks an engine result against reference hits, bit for
 * bit; what names the case in the failure message. */
int su_same_result(const ft_result *res, const su_hit *hits, uint32_t m,
                   const char *what);

/* su_same_results compares two engine results bit for bit. */
int su_same_results(const ft_result *x, const ft_result *y);

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

#endif /* FT_SEARCH_UTIL_H */
