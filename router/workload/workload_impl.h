/*
 * workload_impl.h - what the files of the workload generator share
 * (private to router/workload/): the thread count, the byte buffer the
 * writers fill, the draws both generators take (rng.c) and the layout of a
 * request-grid source (sample.c makes it, requests.c draws from it).
 */
#ifndef FT_WORKLOAD_IMPL_H
#define FT_WORKLOAD_IMPL_H

#include <stdlib.h>
#include <unistd.h>

#include "flashtrie/internal/clock.h"
#include "flashtrie/internal/errmsg.h"
#include "flashtrie/internal/cores.h"
#include "workload.h"

/* wl_cores is the number of cores to use for threads = 0: those this
 * process may run on (cores.h). */
static inline int wl_cores(void)
{
    return fti_usable_cores();
}

/* ---- growable byte buffer ---- */

typedef struct wl_buf {
    char *p;
    size_t len, cap;
} wl_buf;

static inline int wl_buf_reserve(wl_buf *b, size_t n)
{
    if (b->len + n <= b->cap)
        return FT_OK;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (p == NULL)
        return FT_ENOMEM;
    b->p = p;
    b->cap = cap;
    return FT_OK;
}

/* ---- draws (rng.c) ---- */

/* wl_normal draws a standard normal deviate (Box-Muller, one of the pair). */
double wl_normal(ft_wl_rng *r);
/* wl_beta_draw draws from Beta(a, b) as a ratio of gamma draws. */
double wl_beta_draw(ft_wl_rng *r, double a, double b);

/* ---- request grids ---- */

/*
 * A request imitates a NAR model's output for a query whose answer is a
 * real key: a "coherent head" of r proposals per position follows one path
 * of the trie (a library key, extended along random children up to T
 * positions) and its siblings, and the other K - r proposals are drawn from
 * the library's per-position token marginals, as the paper's Appendix K
 * builds its NAR-style grids.  Log-probs fall like a model's:
 * logp_k = -(b + c ln(1 + k)) + noise, sorted descending.
 */

#define WL_SLOTS 64u
#define WL_MARG 262144u /* tokens kept per position for the marginals */

typedef struct wl_key {
    uint32_t len;
    uint32_t tok[FT_WL_MAX_LEN];
} wl_key;

/* wl_pool is what sampling the library gives: a reservoir of keys and one
 * of tokens per position.  Sources made by ft_wl_reqs_derive share it. */
typedef struct wl_pool {
    int refs;
    wl_key *sample;     /* reservoir of keys (lengths capped at 8) */
    uint64_t n_sample;
    uint32_t *marg[FT_MAX_T]; /* per position: reservoir of tokens */
    uint64_t n_marg[FT_MAX_T];
} wl_pool;

struct ft_wl_reqs {
    const ft_index **ix;      /* the library's shards, in token order */
    size_t n_ix;
    ft_node_children *root;   /* per shard: the root's children */
    uint64_t *root_off;       /* n_ix + 1: library-wide number of each
                               * shard's first root child */
    ft_wl_req_opts o;
    wl_pool *pool;
    uint32_t *tok[WL_SLOTS];
    float *logp[WL_SLOTS];
    uint32_t *set;      /* open-addressing token set, stamped */
    uint32_t *stamp;
    uint32_t set_cap, cur_stamp;
    uint32_t *head;
    float *lp;
};

#endif /* FT_WORKLOAD_IMPL_H */
