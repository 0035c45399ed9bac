/*
 * cpu_engine.c - the multi-threaded CPU engine (SPEC section 4).
 *
 * Design (a MARISA-Opt-style engine, paper appendix B.2, and a bit more):
 *  - State is carried across steps: a beam entry holds its trie node and
 *    sigma; its child range is computed once, by the worker that expands it.
 *    Every candidate costs one child search (binary search per proposal, or
 *    a two-pointer merge of the token-sorted proposals against the sorted
 *    children, chosen per entry by degree versus proposals; both give the
 *    same candidates).
 *  - Thresholds apply during expansion.  Proposals are sorted by logp
 *    descending and binary32 addition is monotone, so sigma + rho does not
 *    increase with k: the first k that fails theta_sent ends the entry.  The
 *    same argument lets an entry stop as soon as a candidate could enter
 *    neither the next beam nor the results (its keys only grow with k).
 *  - Top-B and top-n use bounded buffers per worker with a running cut-off
 *    (keep 2x, quickselect down to x when full); the buffers of the workers
 *    are merged after each step (beam) or at the end (results).  Keys are
 *    unique total orders, so no choice depends on which worker saw what.
 *  - A fixed pool of workers, created at open, shares either the beam
 *    entries of each step (one request at a time) or whole requests of a
 *    batch (one worker per request); results are identical either way.
 *  - Every buffer lives in the engine and only grows, on the first request
 *    of a larger shape.
 *
 * Floating point: sigma is one binary32 addition per token, score one
 * binary64 multiplication.  This file is compiled with -ffp-contract=off
 * (shard/CMakeLists.txt), and the project never uses -ffast-math.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>

#include "cpu_engine.h"

typedef unsigned __int128 u128;

/* cand is a candidate for the next beam: key = ft_cand_key(sigma, r, k). */
typedef struct cand {
    uint64_t key;
    uint64_t node;
    float sigma; /* kept as computed: the key folds -0 into +0 */
} cand;

/* selc is a terminal candidate: key = score key << 32 | order. */
typedef struct selc {
    u128 key;
    uint64_t node;
    double score;
    float sigma;
} selc;

/* bent is one entry of a beam. */
typedef struct bent {
    uint64_t node;
    float sigma;
} bent;

/* wbuf holds one worker's bounded candidate buffers.  Workers write their
 * lengths and cut-offs constantly: keep each on its own cache lines. */
typedef struct wbuf {
    _Alignas(128) char pad_;
    cand *nb;
    size_t nb_len, nb_keep, nb_lim, nb_alloc; /* cut when nb_len == nb_lim */
    uint64_t nb_cut; /* keys >= nb_cut cannot make the next beam */
    selc *sb;
    size_t sb_len, sb_keep, sb_lim, sb_alloc;
    u128 sb_cut; /* keys >= sb_cut cannot make the results */
} wbuf;

/* rctx is the state of the request one thread drives. */
typedef struct rctx {
    _Alignas(128) char pad_;
    ft_prep prep;
    bent *cur, *nxt;
    uint32_t ncur;
    size_t bcap;     /* capacity of cur, nxt and each history row */
    uint32_t *hist;  /* [(T) * bcap]: row t+1 = (parent rank << 16 | k) */
    size_t hist_alloc;
    uint64_t *bytok; /* step's proposals (tok << 32 | k) sorted by token */
    uint64_t *tmp;   /* radix sort scratch */
    cand *gat;       /* merged beam candidates */
    size_t gat_alloc;
    selc *sgat;      /* merged terminal candidates */
    size_t sgat_alloc;
    int ready;       /* prep initialised */
} rctx;

typedef struct cpu_engine cpu_engine;

/* job is what the pool runs: one call of fn per worker. */
typedef void (*job_fn)(cpu_engine *ce, int w);

struct cpu_engine {
    ft_engine *eng;
    const ft_trie_view *view;
    ft_child_range root;
    int nthreads;
    ft_cpu_match match;
    ft_cpu_split split;
    rctx *ctx;  /* one per thread */
    wbuf *wb;   /* one per thread */
    /* pool */
    pthread_t *th;
    int nstarted;
    pthread_mutex_t mu;
    pthread_cond_t cv_go, cv_done;
    uint64_t gen;
    int pending;
    int stop;
    job_fn fn;
    /* current job's arguments */
    rctx *jctx;          /* beams: the request's context */
    uint32_t jt;         /* beams: the step */
    uint32_t jchunk;     /* beams: ranks per grab */
    atomic_uint jnext;   /* next rank or next request to take */
    const ft_request *const *jreqs;
    ft_result *const *jres;
    size_t jn;
};

/* ---- selection helpers --------------------------------------------- */

/* Quickselect: after name(a, n, m), 0 < m <= n, the m smallest keys are in
 * a[0..m).  Keys are unique, which the partition below relies on. */
#define DEFINE_SELECT(name, type)                                             \
    static void name(type *a, size_t n, size_t m)                             \
    {                                                                         \
        size_t lo = 0, hi = n, q = m - 1; /* place the q-th element */       \
        while (hi - lo > 1) {                                                 \
            size_t mid = lo + (hi - lo) / 2;                                  \
            /* sort a[lo], a[mid], a[hi-1]: the median is the pivot */        \
            if (a[mid].key < a[lo].key) {                                     \
                type x = a[mid]; a[mid] = a[lo]; a[lo] = x;                   \
            }                                                                 \
            if (a[hi - 1].key < a[lo].key) {                                  \
                type x = a[hi - 1]; a[hi - 1] = a[lo]; a[lo] = x;             \
            }                                                                 \
            if (a[hi - 1].key < a[mid].key) {                                 \
                type x = a[hi - 1]; a[hi - 1] = a[mid]; a[mid] = x;           \
            }                                                                 \
            if (hi - lo <= 3)                                                 \
                break; /* those three were the whole range */                 \
            /* a[lo] < pivot < a[hi-1] act as sentinels, so both scans stop */\
            type piv = a[mid];                                                \
            size_t i = lo, j = hi - 1;                                        \
            for (;;) {                                                        \
                while (a[i].key < piv.key) i++;                               \
                while (piv.key < a[j].key) j--;                               \
                if (i >= j) break;                                            \
                type x = a[i]; a[i] = a[j]; a[j] = x;                         \
                i++; j--;                                                     \
            }                                                                 \
            /* [lo, j] <= pivot <= [j+1, hi), both parts non-empty */         \
            if (q <= j)                                                       \
                hi = j + 1;                                                   \
            else                                                              \
                lo = j + 1;                                                   \
        }                                                                     \
    }

DEFINE_SELECT(select_cand, cand)
DEFINE_SELECT(select_selc, selc)

static int cand_cmp(const void *a, const void *b)
{
    uint64_t x = ((const cand *)a)->key, y = ((const cand *)b)->key;
    return x < y ? -1 : x > y;
}

static int selc_cmp(const void *a, const void *b)
{
    u128 x = ((const selc *)a)->key, y = ((const selc *)b)->key;
    return x < y ? -1 : x > y;
}

/* top_cand keeps the m smallest of a[0..n) in a[0..m) and returns the
 * largest kept key (the new cut-off). */
static uint64_t top_cand(cand *a, size_t n, size_t m)
{
    select_cand(a, n, m);
    uint64_t mx = 0;
    for (size_t i = 0; i < m; i++)
        if (a[i].key > mx)
            mx = a[i].key;
    return mx;
}

static u128 top_selc(selc *a, size_t n, size_t m)
{
    select_selc(a, n, m);
    u128 mx = 0;
    for (size_t i = 0; i < m; i++)
        if (a[i].key > mx)
            mx = a[i].key;
    return mx;
}

/* Push into a bounded buffer: a full buffer (2x keep) is cut to keep. */
static inline void push_cand(wbuf *wb, uint64_t key, uint64_t node, float sg)
{
    if (wb->nb_len == wb->nb_lim) {
        wb->nb_cut = top_cand(wb->nb, wb->nb_len, wb->nb_keep);
        wb->nb_len = wb->nb_keep;
        if (key >= wb->nb_cut)
            return;
    }
    cand *c = &wb->nb[wb->nb_len++];
    c->key = key;
    c->node = node;
    c->sigma = sg;
}

static inline void push_selc(wbuf *wb, u128 key, uint64_t node, double score,
                             float sg)
{
    if (wb->sb_len == wb->sb_lim) {
        wb->sb_cut = top_selc(wb->sb, wb->sb_len, wb->sb_keep);
        wb->sb_len = wb->sb_keep;
        if (key >= wb->sb_cut)
            return;
    }
    selc *c = &wb->sb[wb->sb_len++];
    c->key = key;
    c->node = node;
    c->score = score;
    c->sigma = sg;
}

/* ---- buffers --------------------------------------------------------- */

static int grow(void **p, size_t *alloc, size_t need, size_t esz)
{
    if (*alloc >= need)
        return FT_OK;
    size_t n = *alloc ? *alloc : 64;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, n * esz);
    if (q == NULL)
        return FT_ENOMEM;
    *p = q;
    *alloc = n;
    return FT_OK;
}

/* wbuf_ready sizes a worker's buffers for beam B and n results.  The
 * buffers hold 2x what is kept so that a cut happens at most every keep
 * pushes (amortised linear). */
static int wbuf_ready(wbuf *wb, size_t B, size_t n)
{
    if (grow((void **)&wb->nb, &wb->nb_alloc, 2 * B, sizeof(cand)) ||
        grow((void **)&wb->sb, &wb->sb_alloc, 2 * n, sizeof(selc)))
        return FT_ENOMEM;
    return FT_OK;
}

static void wbuf_start_step(wbuf *wb, size_t B)
{
    wb->nb_len = 0;
    wb->nb_keep = B;
    wb->nb_lim = 2 * B;
    wb->nb_cut = UINT64_MAX;
}

static void wbuf_start_request(wbuf *wb, size_t n)
{
    wb->sb_len = 0;
    wb->sb_keep = n;
    wb->sb_lim = 2 * n;
    wb->sb_cut = ~(u128)0;
}

static void wbuf_free(wbuf *wb)
{
    free(wb->nb);
    free(wb->sb);
    memset(wb, 0, sizeof *wb);
}

static int rctx_ready(rctx *c, const ft_request *req, size_t nw)
{
    if (!c->ready) {
        if (ft_prep_init(&c->prep, FT_MAX_T, FT_MAX_K))
            return FT_ENOMEM;
        c->ready = 1;
    }
    size_t B = req->beam;
    size_t n = req->results ? req->results : req->beam;
    if (c->bcap < B) {
        size_t nc = c->bcap ? c->bcap : 64;
        while (nc < B)
            nc *= 2;
        bent *a = realloc(c->cur, nc * sizeof *a);
        if (a == NULL)
            return FT_ENOMEM;
        c->cur = a;
        bent *b = realloc(c->nxt, nc * sizeof *b);
        if (b == NULL)
            return FT_ENOMEM;
        c->nxt = b;
        c->bcap = nc;
    }
    if (grow((void **)&c->hist, &c->hist_alloc, (size_t)FT_MAX_T * c->bcap,
             sizeof(uint32_t)))
        return FT_ENOMEM;
    if (c->bytok == NULL) {
        c->bytok = malloc(FT_MAX_K * sizeof *c->bytok);
        c->tmp = malloc(FT_MAX_K * sizeof *c->tmp);
        if (c->bytok == NULL || c->tmp == NULL)
            return FT_ENOMEM;
    }
    if (nw > 1 &&
        (grow((void **)&c->gat, &c->gat_alloc, 2 * B * nw, sizeof(cand)) ||
         grow((void **)&c->sgat, &c->sgat_alloc, 2 * n * nw, sizeof(selc))))
        return FT_ENOMEM;
    return FT_OK;
}

static void rctx_free(rctx *c)
{
    if (c->ready)
        ft_prep_free(&c->prep);
    free(c->cur);
    free(c->nxt);
    free(c->hist);
    free(c->bytok);
    free(c->tmp);
    free(c->gat);
    free(c->sgat);
    memset(c, 0, sizeof *c);
}

/* ---- expansion ------------------------------------------------------- */

/* sort_by_token fills c->bytok with the step's first ke proposals as
 * (token << 32 | k), ascending by token: an LSD radix sort over the four
 * token bytes (stable, so it is well defined even with equal tokens, which
 * validation excludes anyway). */
static void sort_by_token(rctx *c, uint32_t t)
{
    const ft_prep *p = &c->prep;
    uint32_t ke = p->keff[t];
    const uint32_t *tk = p->tok + (size_t)t * p->K;
    uint64_t *a = c->bytok, *b = c->tmp;
    uint32_t all_or = 0;
    for (uint32_t k = 0; k < ke; k++) {
        a[k] = ((uint64_t)tk[k] << 32) | k;
        all_or |= tk[k];
    }
    for (int pass = 0; pass < 4; pass++) {
        uint32_t shift = 32 + 8 * pass;
        if (((all_or >> (8 * pass)) & 0xffu) == 0)
            continue; /* every token has a zero byte here: already sorted */
        uint32_t cnt[256] = {0};
        for (uint32_t k = 0; k < ke; k++)
            cnt[(a[k] >> shift) & 0xffu]++;
        uint32_t sum = 0;
        for (int i = 0; i < 256; i++) {
            uint32_t x = cnt[i];
            cnt[i] = sum;
            sum += x;
        }
        for (uint32_t k = 0; k < ke; k++)
            b[cnt[(a[k] >> shift) & 0xffu]++] = a[k];
        uint64_t *x = a;
        a = b;
        b = x;
    }
    if (a != c->bytok)
        memcpy(c->bytok, a, ke * sizeof *a);
}

static inline uint32_t ilog2_plus1(uint64_t x)
{
    return x ? 64u - (uint32_t)__builtin_clzll(x) : 0u;
}

/* offer hands one matched candidate (child u of entry r via proposal k) to
 * the worker's buffers.  Returns nothing: the caller has checked the
 * thresholds. */
static inline void offer(const ft_trie_view *v, wbuf *wb, uint64_t u,
                         uint64_t ck, u128 sk, double score, float sg)
{
    uint32_t fl = ft_node_flags(v, u);
    if ((fl & FT_TERMINAL) && sk < wb->sb_cut)
        push_selc(wb, sk, u, score, sg);
    if ((fl & FT_HAS_CHILD) && ck < wb->nb_cut)
        push_cand(wb, ck, u, sg);
}

/* expand_entry expands entry r of the current beam at step t. */
static void expand_entry(const cpu_engine *ce, const rctx *c, wbuf *wb,
                         uint32_t t, uint32_t r)
{
    const ft_trie_view *v = ce->view;
    const ft_prep *p = &c->prep;
    const bent *b = &c->cur[r];
    uint32_t ke = p->keff[t];
    if (ke == 0)
        return;
    ft_child_range cr = t == 0 ? ce->root : ft_children(v, b->node);
    if (cr.deg == 0)
        return;
    const float *lp = p->logp + (size_t)t * p->K;
    const uint32_t *tk = p->tok + (size_t)t * p->K;
    const float s = b->sigma;
    const float ts = p->theta_sent;
    const double F = p->F[t + 1];
    /* sigma + rho does not increase with k: find the first failing k. */
    uint32_t lo = 0, hi = ke;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        float sg = s + lp[mid];
        if (sg > ts)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint32_t kcut = lo;
    if (kcut == 0)
        return;
    int merge;
    if (ce->match == FT_CPU_MATCH_AUTO)
        merge = (uint64_t)ke + cr.deg <
                (uint64_t)kcut * (1u + ilog2_plus1(cr.deg));
    else
        merge = ce->match == FT_CPU_MATCH_MERGE;
    const uint64_t rbits = (uint64_t)r << 16;
    const u128 obits = ((u128)t << 24) | ((u128)r << 12);
    if (!merge) {
        for (uint32_t k = 0; k < kcut; k++) {
            float sg = s + lp[k];
            double score = (double)sg * F;
            uint64_t ck = ((uint64_t)ft_sigma_key(sg) << 32) | rbits | k;
            u128 sk = ((u128)ft_score_key(score) << 32) | obits | k;
            /* Both keys grow with k and the cut-offs only shrink: once a
             * candidate can enter neither buffer, no later one can. */
            if (ck >= wb->nb_cut && sk >= wb->sb_cut)
                break;
            uint64_t u = ft_find_child(v, &cr, tk[k]);
            if (u != FT_NONE)
                offer(v, wb, u, ck, sk, score, sg);
        }
        return;
    }
    /* Merge the token-sorted proposals with the label-sorted children. */
    const uint64_t *P = c->bytok;
    uint32_t i = 0;
    uint64_t j = cr.first, lend = cr.hstart, end = cr.first + cr.deg;
    const uint16_t *lab = v->label_lo;
    for (;;) {
        if (i == ke)
            return;
        uint32_t pt = (uint32_t)(P[i] >> 32);
        uint64_t u;
        if (j < lend) {
            if (pt >= 65536u) {
                j = lend; /* no low child can match any more */
                continue;
            }
            uint32_t l = lab[j];
            if (pt < l) {
                i++;
                continue;
            }
            if (pt > l) {
                j++;
                continue;
            }
            u = j++;
        } else if (j < end) {
            uint32_t l = ft_child_label(v, &cr, j);
            if (pt < l) {
                i++;
                continue;
            }
            if (pt > l) {
                j++;
                continue;
            }
            u = j++;
        } else {
            return;
        }
        uint32_t k = (uint32_t)P[i++];
        if (k >= kcut)
            continue;
        float sg = s + lp[k];
        double score = (double)sg * F;
        uint64_t ck = ((uint64_t)ft_sigma_key(sg) << 32) | rbits | k;
        u128 sk = ((u128)ft_score_key(score) << 32) | obits | k;
        if (ck < wb->nb_cut || sk < wb->sb_cut)
            offer(v, wb, u, ck, sk, score, sg);
    }
}

/* ---- the pool -------------------------------------------------------- */

static void pool_run(cpu_engine *ce, job_fn fn)
{
    pthread_mutex_lock(&ce->mu);
    ce->fn = fn;
    ce->pending = ce->nstarted;
    ce->gen++;
    pthread_cond_broadcast(&ce->cv_go);
    pthread_mutex_unlock(&ce->mu);
    fn(ce, 0); /* the calling thread is worker 0 */
    pthread_mutex_lock(&ce->mu);
    while (ce->pending > 0)
        pthread_cond_wait(&ce->cv_done, &ce->mu);
    pthread_mutex_unlock(&ce->mu);
}

typedef struct worker_arg {
    cpu_engine *ce;
    int w;
} worker_arg;

static void *worker_main(void *arg)
{
    cpu_engine *ce = ((worker_arg *)arg)->ce;
    int w = ((worker_arg *)arg)->w;
    free(arg);
    uint64_t seen = 0;
    pthread_mutex_lock(&ce->mu);
    for (;;) {
        while (ce->gen == seen && !ce->stop)
            pthread_cond_wait(&ce->cv_go, &ce->mu);
        if (ce->stop)
            break;
        seen = ce->gen;
        job_fn fn = ce->fn;
        pthread_mutex_unlock(&ce->mu);
        fn(ce, w);
        pthread_mutex_lock(&ce->mu);
        if (--ce->pending == 0)
            pthread_cond_signal(&ce->cv_done);
    }
    pthread_mutex_unlock(&ce->mu);
    return NULL;
}

/* ---- one request ----------------------------------------------------- */

static void job_expand(cpu_engine *ce, int w)
{
    rctx *c = ce->jctx;
    wbuf *wb = &ce->wb[w];
    uint32_t n = c->ncur, chunk = ce->jchunk, t = ce->jt;
    for (;;) {
        uint32_t r0 = atomic_fetch_add_explicit(&ce->jnext, chunk,
                                                memory_order_relaxed);
        if (r0 >= n)
            break;
        uint32_t r1 = r0 + chunk < n ? r0 + chunk : n;
        for (uint32_t r = r0; r < r1; r++)
            expand_entry(ce, c, wb, t, r);
    }
}

/* run_request answers one validated request with context c, using workers
 * wb[0..nw) (nw > 1 only from the calling thread, through the pool). */
static int run_request(cpu_engine *ce, rctx *c, wbuf *wb, int nw,
                       const ft_request *req, ft_result *res)
{
    int rc = rctx_ready(c, req, (size_t)nw);
    size_t B = req->beam, n = req->results ? req->results : req->beam;
    for (int w = 0; w < nw && rc == FT_OK; w++)
        rc = wbuf_ready(&wb[w], B, n);
    if (rc != FT_OK) {
        res->status = rc;
        snprintf(res->error, sizeof res->error,
                 "engine: out of memory for beam %zu", B);
        return rc;
    }
    ft_prep *p = &c->prep;
    rc = ft_prep_fill(p, req);
    if (rc != FT_OK) {
        res->status = rc;
        snprintf(res->error, sizeof res->error, "engine: request too large");
        return rc;
    }
    for (int w = 0; w < nw; w++)
        wbuf_start_request(&wb[w], n);
    c->cur[0].node = 0;
    c->cur[0].sigma = 0.0f;
    c->ncur = 1;
    for (uint32_t t = 0; t < p->T && c->ncur > 0; t++) {
        uint32_t ke = p->keff[t];
        for (int w = 0; w < nw; w++)
            wbuf_start_step(&wb[w], B);
        if (ke == 0) {
            c->ncur = 0;
            break;
        }
        /* The merge needs the token order; it costs O(ke) next to the
         * O(beam * ke) of the step, so build it whenever merge may run. */
        if (ce->match != FT_CPU_MATCH_BSEARCH)
            sort_by_token(c, t);
        if (nw == 1) {
            for (uint32_t r = 0; r < c->ncur; r++)
                expand_entry(ce, c, wb, t, r);
        } else {
            ce->jctx = c;
            ce->jt = t;
            uint32_t chunk = c->ncur / ((uint32_t)nw * 8u);
            ce->jchunk = chunk ? chunk : 1;
            atomic_store(&ce->jnext, 0);
            pool_run(ce, job_expand);
        }
        /* Merge the workers' survivors and take the first B in order. */
        cand *all;
        size_t m = 0;
        if (nw == 1) {
            all = wb[0].nb;
            m = wb[0].nb_len;
        } else {
            all = c->gat;
            for (int w = 0; w < nw; w++) {
                memcpy(all + m, wb[w].nb, wb[w].nb_len * sizeof *all);
                m += wb[w].nb_len;
            }
        }
        if (m > B) {
            top_cand(all, m, B);
            m = B;
        }
        qsort(all, m, sizeof *all, cand_cmp);
        uint32_t *h = c->hist + (size_t)t * c->bcap; /* row for beam t+1 */
        for (size_t i = 0; i < m; i++) {
            c->nxt[i].node = all[i].node;
            c->nxt[i].sigma = all[i].sigma;
            h[i] = (uint32_t)all[i].key; /* r << 16 | k */
        }
        bent *x = c->cur;
        c->cur = c->nxt;
        c->nxt = x;
        c->ncur = (uint32_t)m;
    }
    /* Results: merge the terminal candidates, first n in order. */
    selc *all;
    size_t m = 0;
    if (nw == 1) {
        all = wb[0].sb;
        m = wb[0].sb_len;
    } else {
        all = c->sgat;
        for (int w = 0; w < nw; w++) {
            memcpy(all + m, wb[w].sb, wb[w].sb_len * sizeof *all);
            m += wb[w].sb_len;
        }
    }
    if (m > n) {
        top_selc(all, m, n);
        m = n;
    }
    qsort(all, m, sizeof *all, selc_cmp);
    res->n = 0;
    const ft_trie *trie = &ce->eng->idx->trie;
    uint32_t toks[FT_MAX_T];
    for (size_t i = 0; i < m; i++) {
        uint32_t order = (uint32_t)all[i].key;
        uint32_t t = order >> 24, r = (order >> 12) & 0xfffu, k = order & 0xfffu;
        toks[t] = p->tok[(size_t)t * p->K + k];
        /* Walk the beam history back: row tt-1 holds beam tt's parents. */
        for (uint32_t tt = t; tt > 0; tt--) {
            uint32_t hv = c->hist[(size_t)(tt - 1) * c->bcap + r];
            r = hv >> 16;
            toks[tt - 1] = p->tok[(size_t)(tt - 1) * p->K + (hv & 0xffffu)];
        }
        ft_sel s = {all[i].node, all[i].score, all[i].sigma, order};
        rc = ft_result_put_hit(res, trie, &s, toks, t + 1);
        if (rc != FT_OK) {
            res->n = 0;
            res->status = rc;
            snprintf(res->error, sizeof res->error,
                     "results: do not fit the result buffer");
            return rc;
        }
    }
    res->status = FT_OK;
    res->error[0] = 0;
    return FT_OK;
}

static void job_requests(cpu_engine *ce, int w)
{
    for (;;) {
        unsigned i = atomic_fetch_add_explicit(&ce->jnext, 1,
                                               memory_order_relaxed);
        if (i >= ce->jn)
            break;
        run_request(ce, &ce->ctx[w], &ce->wb[w], 1, ce->jreqs[i],
                    ce->jres[i]);
    }
}

/* A request whose step (beam x K) is this small is not worth waking the
 * pool for: measured on 2 cores, K = BW = 100 ran slower split by beams. */
#define SMALL_STEP_WORK 65536u

static int cpu_search_batch(ft_engine *eng, const ft_request *const *reqs,
                            ft_result *const *res, size_t n)
{
    cpu_engine *ce = eng->impl;
    int nw = ce->nthreads;
    int by_requests;
    if (nw == 1 || ce->split == FT_CPU_SPLIT_BEAMS)
        by_requests = 0;
    else if (ce->split == FT_CPU_SPLIT_REQUESTS)
        by_requests = 1;
    else
        by_requests = n >= (size_t)nw;
    if (by_requests) {
        ce->jreqs = reqs;
        ce->jres = res;
        ce->jn = n;
        atomic_store(&ce->jnext, 0);
        pool_run(ce, job_requests);
        return FT_OK;
    }
    for (size_t i = 0; i < n; i++) {
        int small = ce->split != FT_CPU_SPLIT_BEAMS &&
                    (uint64_t)reqs[i]->beam * reqs[i]->K < SMALL_STEP_WORK;
        run_request(ce, &ce->ctx[0], ce->wb, small ? 1 : nw, reqs[i], res[i]);
    }
    /* Out of memory is the request's status, not an engine failure. */
    return FT_OK;
}

/* ---- open / close ---------------------------------------------------- */

static void cpu_close(ft_engine *eng)
{
    cpu_engine *ce = eng->impl;
    if (ce == NULL)
        return;
    if (ce->th) {
        pthread_mutex_lock(&ce->mu);
        ce->stop = 1;
        pthread_cond_broadcast(&ce->cv_go);
        pthread_mutex_unlock(&ce->mu);
        for (int i = 0; i < ce->nstarted; i++)
            pthread_join(ce->th[i], NULL);
        free(ce->th);
    }
    pthread_mutex_destroy(&ce->mu);
    pthread_cond_destroy(&ce->cv_go);
    pthread_cond_destroy(&ce->cv_done);
    for (int i = 0; i < ce->nthreads; i++) {
        if (ce->ctx)
            rctx_free(&ce->ctx[i]);
        if (ce->wb)
            wbuf_free(&ce->wb[i]);
    }
    free(ce->ctx);
    free(ce->wb);
    free(ce);
    eng->impl = NULL;
}

static const ft_engine_ops cpu_ops = {"cpu", cpu_search_batch, cpu_close};

int ft_cpu_engine_open(ft_engine *eng, char *errbuf, size_t errlen)
{
    FT_RETURN_ERROR_IF(eng->idx == NULL, FT_EINVAL, "engine: no index");
    FT_RETURN_ERROR_IF(eng->opts.threads < 0, FT_EINVAL,
                       "threads: must be >= 0, got %d", eng->opts.threads);
    cpu_engine *ce = calloc(1, sizeof *ce);
    FT_RETURN_ERROR_IF(ce == NULL, FT_ENOMEM, "engine: out of memory");
    ce->eng = eng;
    ce->view = &eng->idx->trie.view;
    ce->root = eng->idx->root;
    int nt = eng->opts.threads ? eng->opts.threads : fti_online_cores();
    if (nt < 1)
        nt = 1;
    if (nt > 1024)
        nt = 1024;
    ce->nthreads = nt;
    pthread_mutex_init(&ce->mu, NULL);
    pthread_cond_init(&ce->cv_go, NULL);
    pthread_cond_init(&ce->cv_done, NULL);
    eng->impl = ce;
    eng->ops = &cpu_ops;
    ce->ctx = aligned_alloc(128, (size_t)nt * sizeof *ce->ctx);
    ce->wb = aligned_alloc(128, (size_t)nt * sizeof *ce->wb);
    if (ce->ctx)
        memset(ce->ctx, 0, (size_t)nt * sizeof *ce->ctx);
    if (ce->wb)
        memset(ce->wb, 0, (size_t)nt * sizeof *ce->wb);
    ce->th = calloc((size_t)nt, sizeof *ce->th);
    if (!ce->ctx || !ce->wb || !ce->th) {
        cpu_close(eng);
        FT_RETURN_ERROR_IF(1, FT_ENOMEM, "engine: out of memory");
    }
    /* The calling thread's context is sized now; workers' on first use. */
    if (ft_prep_init(&ce->ctx[0].prep, FT_MAX_T, FT_MAX_K) != FT_OK) {
        cpu_close(eng);
        FT_RETURN_ERROR_IF(1, FT_ENOMEM, "engine: out of memory");
    }
    ce->ctx[0].ready = 1;
    for (int i = 1; i < nt; i++) {
        worker_arg *a = malloc(sizeof *a);
        if (a != NULL) {
            a->ce = ce;
            a->w = i;
        }
        if (a == NULL || pthread_create(&ce->th[i - 1], NULL, worker_main, a)) {
            free(a);
            cpu_close(eng);
            FT_RETURN_ERROR_IF(1, FT_ENOMEM, "engine: cannot start worker %d",
                               i);
        }
        ce->nstarted++;
    }
    return FT_OK;
}

int ft_cpu_engine_tune(ft_engine *eng, ft_cpu_match match, ft_cpu_split split)
{
    if (eng == NULL || eng->ops != &cpu_ops)
        return FT_EINVAL;
    cpu_engine *ce = eng->impl;
    ce->match = match;
    ce->split = split;
    return FT_OK;
}
