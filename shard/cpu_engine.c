/*
 * cpu_engine.c - the multi-threaded CPU engine (docs/specification.md section
 * 4).
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
 *  - A fixed pool of workers, created at open, takes a batch in rounds of
 *    one request per worker; the rest (fewer requests than workers) runs at
 *    once in groups: a group of workers shares the beam entries of each step
 *    of its request, its leader driving the steps with its own barrier (a
 *    small request gets a group of one).  A lone request is one group of
 *    all workers.  Results are identical however the work is split.
 *  - Waits (pool and group barriers) spin, then yield, then sleep: a step
 *    of a small request is shorter than a sleep and a wake-up.
 *  - Every buffer lives in the engine and only grows, on the first request
 *    of a larger shape.
 *
 * Floating point: sigma is one binary32 addition per token, score one
 * binary64 multiplication.  This file is compiled with -ffp-contract=off
 * (shard/CMakeLists.txt), and the project never uses -ffast-math.
 */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#include "flashtrie/internal/cores.h"
#include "flashtrie/internal/sorted.h"
#include "cpu_engine.h"

typedef unsigned __int128 u128;

/* How long a thread waiting for its pool or group spins before it sleeps
 * (when the workers do not outnumber the cores; FT_CPU_SPIN_US overrides). */
#define CPU_SPIN_NS 200000L

/* cand is a candidate for the next beam: key = ft_cand_key(sigma, r, k). */
typedef struct cand {
    uint64_t key;
    uint64_t node;
    float sigma; /* kept as computed: the key folds -0 into +0 */
    uint32_t tag; /* the buffer's tag when it came (wbuf.tag) */
} cand;

/* selc is a terminal candidate: key = score key << 32 | order. */
typedef struct selc {
    u128 key;
    uint64_t node;
    double score;
    float sigma;
    uint32_t tag;
} selc;

/* bent is one entry of a beam. */
typedef struct bent {
    uint64_t node;
    float sigma;
    uint32_t rank; /* the entry's rank in the global beam (all shards) */
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
    uint32_t tag; /* given to every candidate pushed (0; the merged
                   * steps: the shard's engine, step_expand_merged) */
} wbuf;

/* rctx is the state of the request one thread drives. */
typedef struct rctx {
    _Alignas(128) char pad_;
    const fti_prepared *prep;
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
} rctx;

typedef struct cpu_engine cpu_engine;

/* sreq is one request of a step-wise batch: its own context and buffers
 * (its terminal candidates accumulate over the steps, whichever worker
 * runs a step), the candidates of its current step in the specification's
 * order, and the offset of its list in the exchange buffers. */
typedef struct sreq {
    rctx c;
    wbuf wb;
    const fti_prepared *p;
    size_t off;
    cand *pend;      /* this step's local best, sorted (points into wb) */
    size_t npend;
    atomic_uint ready; /* t + 1 once step t's list is in send (the joint
                        * expand's seeds, see step_seed) */
    u128 sbound;       /* with ready: wb's result cut-off after step t */
} sreq;

/* mreq is one request of a joint batch that runs merged (steps_merged):
 * one candidate buffer for the shards of every engine of the step, its
 * candidates tagged with their engine, and the request's beam entries by
 * global rank, to expand in that order. */
typedef struct mreq {
    wbuf wb;
    uint64_t *at;    /* [g]: engine << 32 | entry of global rank g */
    size_t at_alloc;
} mreq;

/* job is what the pool runs: one call of fn per worker. */
typedef void (*job_fn)(cpu_engine *ce, int w);

/* spinw is a word that threads wait on to change: a short spin, then a
 * sleep on a condition variable.  Wakers pay for the mutex only when some
 * waiter sleeps (sleepers is counted under the mutex; both sides use
 * sequentially consistent operations, so a waiter either sees the new value
 * or is seen as a sleeper). */
typedef struct spinw {
    _Alignas(128) atomic_uint val;
    atomic_int sleepers;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} spinw;

/* grp is a group of workers w0..w0+nw-1 that runs one request, its leader
 * w0 driving the steps and all of them sharing each step's beam entries.
 * go counts the leader's calls (a step or the end), done the members that
 * finished the current step. */
typedef struct grp {
    _Alignas(128) atomic_uint next; /* next rank to take in this step */
    spinw go, done;
    _Alignas(128) rctx *c; /* the step: context, step and ranks per grab */
    uint32_t t, chunk;
    int stop;
    int w0, nw;
    const fti_prepared *req;
    ft_result *res;
} grp;

struct cpu_engine {
    ft_engine *eng;
    const ft_trie_view *view;
    ft_child_range root;
    int nthreads;
    ft_cpu_match match;
    ft_cpu_split split;
    long spin_ns; /* how long a waiting thread spins before it sleeps */
    uint32_t small_work; /* beam x K below which a request runs alone */
    rctx *ctx;  /* one per thread */
    wbuf *wb;   /* one per thread */
    grp *grp;   /* up to one per thread */
    int *wgrp;  /* the group of each worker in the current job */
    /* pool */
    pthread_t *th;
    int nstarted;
    int nsw;         /* spinw objects initialised (pool's two, then groups') */
    spinw pgo;       /* job generation */
    spinw pdone;     /* workers done with the job */
    int stop;
    job_fn fn;
    /* current job's arguments */
    atomic_uint jnext;   /* next request to take */
    const fti_prepared *const *jreqs;
    ft_result *const *jres;
    size_t jn;
    /* step-wise batch (a shard group drives it) */
    sreq *sr;          /* one per request of the batch */
    size_t sr_alloc;   /* sr entries whose buffers exist */
    size_t sn;         /* requests in the batch */
    uint32_t shard, nshards;
    uint64_t *send, *recv;
    size_t slen, send_alloc, recv_alloc;
    uint32_t jt;       /* the step the pool is running */
    int jkind;         /* FTI_STEP_EXPAND, _KEEP or _FINISH */
    /* the engines of the joint step (cpu_steps): jeng[0] is this one */
    ft_engine *const *jeng;
    size_t jcount;
    ft_result *jpart;  /* finish: [j * FTI_ENGINE_CHUNK + i], */
    ft_result *const *jfres; /* or (one engine) [i] */
    fti_step_done jdone; /* finish: called for each request once written */
    void *jdarg;
    int jmerged;       /* the joint step runs merged (steps_merged) */
    uint32_t jkeep;    /* merged: t + 1 of step t's keep, not done yet: the
                        * next round's pieces do it first */
    mreq *mr;          /* the merged steps' requests (this engine drives) */
    size_t mr_alloc;   /* mr entries whose buffers exist */
    int mr_ready;      /* mr is ready for the current batch */
};

/* A seed in a candidate buffer (step_seed): another shard's key, which
 * tightens the buffer's cut-off but is never a candidate of this one. */
#define CPU_SEED UINT64_MAX

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

/* DEFINE_TOP defines name(a, n, m), which keeps the m smallest of
 * a[0..n) in a[0..m) and returns the largest kept key (the new cut-off). */
#define DEFINE_TOP(name, type, ktype, select)                                 \
    static ktype name(type *a, size_t n, size_t m)                            \
    {                                                                         \
        select(a, n, m);                                                      \
        ktype mx = 0;                                                         \
        for (size_t i = 0; i < m; i++)                                        \
            if (a[i].key > mx)                                                \
                mx = a[i].key;                                                \
        return mx;                                                            \
    }

DEFINE_TOP(top_cand, cand, uint64_t, select_cand)
DEFINE_TOP(top_selc, selc, u128, select_selc)

/* DEFINE_BEST defines name(gat, wb, nw, lim, n): it merges the candidates
 * wb[w].buf[0..len) of the workers wb[0..nw) (into gat; one worker's stay
 * where they are) and returns the first min(lim, all) of them in the
 * specification's order (*n of them). */
#define DEFINE_BEST(name, type, buf, len, top, cmp)                           \
    static type *name(type *gat, wbuf *wb, int nw, size_t lim, size_t *n)     \
    {                                                                         \
        type *all = gat;                                                      \
        size_t m = 0;                                                         \
        if (nw == 1) {                                                        \
            all = wb[0].buf;                                                  \
            m = wb[0].len;                                                    \
        } else {                                                              \
            for (int w = 0; w < nw; w++) {                                    \
                memcpy(all + m, wb[w].buf, wb[w].len * sizeof *all);          \
                m += wb[w].len;                                               \
            }                                                                 \
        }                                                                     \
        if (m > lim) {                                                        \
            top(all, m, lim);                                                 \
            m = lim;                                                          \
        }                                                                     \
        qsort(all, m, sizeof *all, cmp);                                      \
        *n = m;                                                               \
        return all;                                                           \
    }

/* step_best: the step's surviving beam candidates, the first B of them
 * (gat is the request's rctx.gat).  best_results: the terminal ones, the
 * first of them to be the results (gat is rctx.sgat). */
DEFINE_BEST(step_best, cand, nb, nb_len, top_cand, cand_cmp)
DEFINE_BEST(best_results, selc, sb, sb_len, top_selc, selc_cmp)

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
    c->tag = wb->tag;
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
    c->tag = wb->tag;
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

static int rctx_ready(rctx *c, const fti_prepared *req, size_t nw)
{
    size_t B = req->beam;
    size_t n = req->results;
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
    const fti_prepared *p = c->prep;
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

/* sel_key is a terminal candidate's key: docs/specification.md section 4's
 * result order (score desc, order asc) in one ascending integer. */
static inline u128 sel_key(double score, uint32_t t, uint32_t r, uint32_t k)
{
    return ((u128)ft_score_key(score) << 32) | ft_order(t, r, k);
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
    const fti_prepared *p = c->prep;
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
    const double F = p->F[t + 1];
    /* sigma + rho does not increase with k: the passing k are a prefix. */
    uint32_t kcut = ft_kcut(lp, ke, s, p->theta_sent);
    if (kcut == 0)
        return;
    int merge;
    if (ce->match == FT_CPU_MATCH_AUTO)
        merge = (uint64_t)ke + cr.deg <
                (uint64_t)kcut * (1u + ilog2_plus1(cr.deg));
    else
        merge = ce->match == FT_CPU_MATCH_MERGE;
    const uint32_t rank = b->rank;
    if (!merge) {
        for (uint32_t k = 0; k < kcut; k++) {
            float sg = FT_FADD(s, lp[k]);
            double score = ft_score(sg, F);
            uint64_t ck = ft_cand_key(sg, rank, k);
            u128 sk = sel_key(score, t, rank, k);
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
        float sg = FT_FADD(s, lp[k]);
        double score = ft_score(sg, F);
        uint64_t ck = ft_cand_key(sg, rank, k);
        u128 sk = sel_key(score, t, rank, k);
        if (ck < wb->nb_cut || sk < wb->sb_cut)
            offer(v, wb, u, ck, sk, score, sg);
    }
}

/* ---- waiting ------------------------------------------------------- */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}


static int spinw_init(spinw *s)
{
    atomic_init(&s->val, 0);
    atomic_init(&s->sleepers, 0);
    if (pthread_mutex_init(&s->mu, NULL))
        return -1;
    if (pthread_cond_init(&s->cv, NULL)) {
        pthread_mutex_destroy(&s->mu);
        return -1;
    }
    return 0;
}

static void spinw_destroy(spinw *s)
{
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
}

/* spinw_wait waits until s->val != old and returns the value it saw: a few
 * pauses, then yields (a spinner must not keep a shared core from the
 * thread it waits for: on 2 loaded cores pure pausing made a split request
 * 4x slower), then, after spin_ns, a sleep. */
static unsigned spinw_wait(spinw *s, unsigned old, long spin_ns)
{
    unsigned v = atomic_load_explicit(&s->val, memory_order_acquire);
    if (v != old)
        return v;
    if (spin_ns > 0) {
        long t0 = (long)fti_now_ns();
        for (uint32_t i = 1;; i++) {
            if (i < 256u)
                cpu_relax();
            else
                sched_yield(); /* a shared core: let the others run */
            v = atomic_load_explicit(&s->val, memory_order_acquire);
            if (v != old)
                return v;
            if ((i & 63u) == 0 && (long)fti_now_ns() - t0 > spin_ns)
                break;
        }
    }
    pthread_mutex_lock(&s->mu);
    atomic_fetch_add(&s->sleepers, 1);
    while ((v = atomic_load(&s->val)) == old)
        pthread_cond_wait(&s->cv, &s->mu);
    atomic_fetch_sub(&s->sleepers, 1);
    pthread_mutex_unlock(&s->mu);
    return v;
}

/* spinw_wait_for waits until s->val == want. */
static void spinw_wait_for(spinw *s, unsigned want, long spin_ns)
{
    unsigned v;
    while ((v = atomic_load_explicit(&s->val, memory_order_acquire)) != want)
        spinw_wait(s, v, spin_ns);
}

/* spinw_add adds x to s->val and wakes the sleepers. */
static void spinw_add(spinw *s, unsigned x)
{
    atomic_fetch_add(&s->val, x);
    if (atomic_load(&s->sleepers) > 0) {
        pthread_mutex_lock(&s->mu);
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
    }
}

/* ---- the pool -------------------------------------------------------- */

/* pool_run calls fn(ce, w) on every worker w (the calling thread is worker
 * 0) and returns when all have returned. */
static void pool_run(cpu_engine *ce, job_fn fn)
{
    ce->fn = fn;
    atomic_store(&ce->pdone.val, 0);
    spinw_add(&ce->pgo, 1);
    fn(ce, 0);
    spinw_wait_for(&ce->pdone, (unsigned)ce->nstarted, ce->spin_ns);
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
    unsigned seen = 0;
    for (;;) {
        seen = spinw_wait(&ce->pgo, seen, ce->spin_ns);
        if (ce->stop)
            break;
        ce->fn(ce, w);
        spinw_add(&ce->pdone, 1);
    }
    return NULL;
}

/* req_ready sizes c and wb[0..nw) for p and puts the root in the beam. */
static int req_ready(rctx *c, wbuf *wb, int nw, const fti_prepared *p,
                     ft_result *res)
{
    int rc = rctx_ready(c, p, (size_t)nw);
    for (int w = 0; w < nw && rc == FT_OK; w++)
        rc = wbuf_ready(&wb[w], p->beam, p->results);
    if (rc != FT_OK) {
        res->status = rc;
        snprintf(res->error, sizeof res->error,
                 "engine: out of memory for beam %u", p->beam);
        return rc;
    }
    c->prep = p;
    for (int w = 0; w < nw; w++)
        wbuf_start_request(&wb[w], p->results);
    c->cur[0].node = 0;
    c->cur[0].sigma = 0.0f;
    c->cur[0].rank = 0;
    c->ncur = 1;
    return FT_OK;
}

/* emit_results merges the terminal candidates of wb[0..nw), takes the
 * first n in the specification's order and writes them with their backtraced
 * tokens and key indexes (values are attached by the public search). */
static int emit_hits(const cpu_engine *ce, const rctx *c, const selc *all,
                     size_t m, ft_result *res);

static int emit_results(cpu_engine *ce, rctx *c, wbuf *wb, int nw,
                        ft_result *res)
{
    size_t m;
    selc *all = best_results(c->sgat, wb, nw, c->prep->results, &m);
    return emit_hits(ce, c, all, m, res);
}

/* emit_hits writes the terminal candidates all[0..m), in the
 * specification's order, as the hits of res. */
static int emit_hits(const cpu_engine *ce, const rctx *c, const selc *all,
                     size_t m, ft_result *res)
{
    const fti_prepared *p = c->prep;
    res->n = 0;
    const ft_trie *trie = &ce->eng->idx->trie;
    uint32_t toks[FT_MAX_T];
    for (size_t i = 0; i < m; i++) {
        uint32_t order = (uint32_t)all[i].key;
        uint32_t len = ft_backtrace(toks, order, c->hist, c->bcap, p->tok,
                                    p->row);
        int rc = fti_result_put(res, ft_trie_term_rank(trie, all[i].node),
                                order, all[i].score, all[i].sigma, toks, len);
        if (rc != FT_OK) {
            fti_result_fail(res, rc, "results: do not fit the result buffer");
            return rc;
        }
    }
    res->status = FT_OK;
    res->error[0] = 0;
    return FT_OK;
}

/* ---- one request ----------------------------------------------------- */

/* grp_expand takes chunks of the group's current step until none is left. */
static void grp_expand(const cpu_engine *ce, grp *g, wbuf *wb)
{
    const rctx *c = g->c;
    uint32_t n = c->ncur, chunk = g->chunk, t = g->t;
    for (;;) {
        uint32_t r0 = atomic_fetch_add_explicit(&g->next, chunk,
                                                memory_order_relaxed);
        if (r0 >= n)
            break;
        uint32_t r1 = r0 + chunk < n ? r0 + chunk : n;
        for (uint32_t r = r0; r < r1; r++)
            expand_entry(ce, c, wb, t, r);
    }
}

/* grp_member is a member's part: every step the leader starts, until the
 * leader says stop. */
static void grp_member(cpu_engine *ce, grp *g, int w)
{
    unsigned seen = 0;
    for (;;) {
        seen = spinw_wait(&g->go, seen, ce->spin_ns);
        if (g->stop)
            break;
        grp_expand(ce, g, &ce->wb[w]);
        spinw_add(&g->done, 1);
    }
}

/* run_request answers one validated request with context c, using workers
 * wb[0..nw): alone when nw == 1, else as the leader of group g (whose
 * members wait in grp_member). */
static int run_request(cpu_engine *ce, rctx *c, wbuf *wb, int nw, grp *g,
                       const fti_prepared *p, ft_result *res)
{
    int rc = req_ready(c, wb, nw, p, res);
    if (rc != FT_OK)
        return rc;
    for (uint32_t t = 0; t < p->T && c->ncur > 0; t++) {
        for (int w = 0; w < nw; w++)
            wbuf_start_step(&wb[w], p->beam);
        if (p->keff[t] == 0) {
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
            g->c = c;
            g->t = t;
            uint32_t chunk = c->ncur / ((uint32_t)nw * 8u);
            g->chunk = chunk ? chunk : 1;
            atomic_store_explicit(&g->next, 0, memory_order_relaxed);
            atomic_store_explicit(&g->done.val, 0, memory_order_relaxed);
            spinw_add(&g->go, 1); /* publishes the step to the members */
            grp_expand(ce, g, wb);
            spinw_wait_for(&g->done, (unsigned)nw - 1, ce->spin_ns);
        }
        size_t m;
        cand *all = step_best(c->gat, wb, nw, p->beam, &m);
        /* Alone, an entry's rank in its own beam is its global rank. */
        uint32_t *h = c->hist + (size_t)t * c->bcap; /* row for beam t+1 */
        for (size_t i = 0; i < m; i++) {
            c->nxt[i].node = all[i].node;
            c->nxt[i].sigma = all[i].sigma;
            c->nxt[i].rank = (uint32_t)i;
            h[i] = ft_hist_entry(all[i].key);
        }
        bent *x = c->cur;
        c->cur = c->nxt;
        c->nxt = x;
        c->ncur = (uint32_t)m;
    }
    return emit_results(ce, c, wb, nw, res);
}

static void job_requests(cpu_engine *ce, int w)
{
    for (;;) {
        unsigned i = atomic_fetch_add_explicit(&ce->jnext, 1,
                                               memory_order_relaxed);
        if (i >= ce->jn)
            break;
        run_request(ce, &ce->ctx[w], &ce->wb[w], 1, NULL, ce->jreqs[i],
                    ce->jres[i]);
    }
}

static void job_groups(cpu_engine *ce, int w)
{
    if (ce->wgrp[w] < 0)
        return;
    grp *g = &ce->grp[ce->wgrp[w]];
    if (w != g->w0) {
        grp_member(ce, g, w);
        return;
    }
    run_request(ce, &ce->ctx[w], &ce->wb[w], g->nw, g->nw > 1 ? g : NULL,
                g->req, g->res);
    if (g->nw > 1) {
        g->stop = 1;
        spinw_add(&g->go, 1);
    }
}

/* A request whose step (beam x K) is below the engine's small_work is not
 * worth splitting: it runs on one worker.  Measured on 2 (shared) cores, K
 * = BW = 100 gained nothing from two workers, with sleeping or with
 * spinning waits, up to 65536; with more workers each one's share of a
 * step shrinks, so the cut-off falls with their number (131072 / workers,
 * at least 4096).  On the 16-core H200 host (2026-12-01, 10M keys, b=1)
 * the earlier fixed cut-off of 65536 made BW=200 (3.77 ms) slower than
 * BW=500; 16384 still left BW=100 alone at 0.876 ms while a split BW=200
 * took 0.634 ms. */
static uint32_t small_work_for(int nthreads)
{
    uint32_t w = 131072u / (uint32_t)(nthreads > 0 ? nthreads : 1);
    return w < 4096u ? 4096u : w;
}

static int is_small(const cpu_engine *ce, const fti_prepared *r)
{
    return (uint64_t)r->beam * r->K < ce->small_work;
}

/* run_requests runs reqs[0..n) one per worker. */
static void run_requests(cpu_engine *ce, const fti_prepared *const *reqs,
                         ft_result *const *res, size_t n)
{
    if (n == 1) {
        run_request(ce, &ce->ctx[0], ce->wb, 1, NULL, reqs[0], res[0]);
        return;
    }
    ce->jreqs = reqs;
    ce->jres = res;
    ce->jn = n;
    atomic_store(&ce->jnext, 0);
    pool_run(ce, job_requests);
}

/* run_groups runs reqs[0..n), n <= nthreads, at once: request i on the
 * workers of group i, whose size is size[i] (sizes sum to at most
 * nthreads; workers left over idle). */
static void run_groups(cpu_engine *ce, const fti_prepared *const *reqs,
                       ft_result *const *res, size_t n, const int *size)
{
    int w = 0;
    for (size_t i = 0; i < n; i++) {
        grp *g = &ce->grp[i];
        g->w0 = w;
        g->nw = size[i];
        g->req = reqs[i];
        g->res = res[i];
        g->stop = 0;
        atomic_store(&g->go.val, 0);
        for (int j = 0; j < size[i]; j++)
            ce->wgrp[w++] = (int)i;
    }
    for (; w < ce->nthreads; w++)
        ce->wgrp[w] = -1; /* idle in this job */
    pool_run(ce, job_groups);
}

static int cpu_run(ft_engine *eng, const fti_prepared *const *reqs,
                   ft_result *const *res, size_t n)
{
    cpu_engine *ce = eng->impl;
    int nw = ce->nthreads;
    if (nw == 1) {
        for (size_t i = 0; i < n; i++)
            run_request(ce, &ce->ctx[0], ce->wb, 1, NULL, reqs[i], res[i]);
        return FT_OK;
    }
    int size[FTI_ENGINE_CHUNK];
    if (ce->split == FT_CPU_SPLIT_REQUESTS) {
        run_requests(ce, reqs, res, n);
        return FT_OK;
    }
    if (ce->split == FT_CPU_SPLIT_BEAMS) {
        /* every request in turn on all workers */
        size[0] = nw;
        for (size_t i = 0; i < n; i++)
            run_groups(ce, reqs + i, res + i, 1, size);
        return FT_OK;
    }
    /* Whole rounds of nthreads requests one per worker, then the rest r <
     * nthreads at once in groups: a small request gets one worker, the
     * others share the remaining workers evenly (FT_CPU_SPLIT_GROUPS treats
     * every request as large). */
    size_t full = n - n % (size_t)nw, r = n - full;
    int small_ok = ce->split != FT_CPU_SPLIT_GROUPS;
    int nsmall = 0;
    for (size_t i = full; i < n; i++)
        nsmall += small_ok && is_small(ce, reqs[i]);
    int nbig = (int)r - nsmall;
    if (nbig == 0) { /* every request on one worker */
        run_requests(ce, reqs, res, n);
        return FT_OK;
    }
    if (full > 0)
        run_requests(ce, reqs, res, full);
    int spare = nw - nsmall, each = spare / nbig, extra = spare % nbig;
    for (size_t i = full; i < n; i++) {
        if (small_ok && is_small(ce, reqs[i]))
            size[i - full] = 1;
        else
            size[i - full] = each + (extra-- > 0);
    }
    run_groups(ce, reqs + full, res + full, r, size);
    /* Out of memory is the request's status, not an engine failure. */
    return FT_OK;
}

/* ---- steps (a shard group drives them) ------------------------------- */

/* A batch's steps run jointly over the engines of the shards that one
 * process holds (cpu_steps: engine.h's fti_engines_step_*): one round of
 * the first engine's workers takes every (engine, request) pair of the
 * step, shard by shard, so that the shards' work of a step runs in
 * parallel instead of one engine's round after another's.  A pair's state
 * (its request's context and candidate buffers) is its own, so any worker
 * may take any pair; the engine's own steps are the joint steps of one. */

/* How many mates step_seed looks at for seeds. */
#define CPU_SEED_MATES 8u

/* step_mate is engine j of the joint step that drv drives. */
static cpu_engine *step_mate(const cpu_engine *drv, size_t j)
{
    return drv->jeng[j]->impl;
}

/* step_seed starts the candidate buffer of request i on mate je at step t
 * with the lists of the (up to CPU_SEED_MATES) mates before it that have
 * finished theirs (ready == t + 1): their keys tighten the cut-off as the
 * unsharded engine's one buffer would, so that the shard offers and keeps
 * fewer candidates that cannot make the global beam.  Exact: a key is
 * dropped only when B candidate keys of this step (seeds among them, each
 * a real candidate of its shard) are below it, so it is no member of the
 * global top-B; the seeds are then taken out of the shard's list
 * (step_expand_one), whose members of the global top-B are the same with
 * or without them.  The same holds for the results: a mate's result
 * cut-off (n terminal candidates of the request are below it) becomes
 * this shard's where lower.  Both also end an entry's expansion sooner
 * (expand_entry stops at the first proposal that can enter neither
 * buffer).  Which mates are ready depends on timing; the results do
 * not. */
static void step_seed(const cpu_engine *drv, size_t je, size_t i, uint32_t t)
{
    cpu_engine *ce = step_mate(drv, je);
    wbuf *wb = &ce->sr[i].wb;
    uint32_t B = ce->sr[i].p->beam;
    size_t look = drv->jcount - 1;
    look = look < CPU_SEED_MATES ? look : CPU_SEED_MATES;
    for (size_t d = 1; d <= look; d++) {
        const cpu_engine *m =
            step_mate(drv, (je + drv->jcount - d) % drv->jcount);
        if (atomic_load_explicit(&m->sr[i].ready, memory_order_acquire) !=
            t + 1)
            continue;
        const uint64_t *l = m->send + m->sr[i].off;
        /* sorted, padded with FT_KEY_NONE (never below a cut-off) */
        for (uint32_t k = 0; k < B && l[k] < wb->nb_cut; k++)
            push_cand(wb, l[k], CPU_SEED, 0.0f);
        if (m->sr[i].sbound < wb->sb_cut)
            wb->sb_cut = m->sr[i].sbound;
    }
    if (wb->nb_len >= wb->nb_keep) {
        wb->nb_cut = top_cand(wb->nb, wb->nb_len, wb->nb_keep);
        wb->nb_len = wb->nb_keep;
    }
}

/* step_expand_one expands request i's beam on mate je at step t and writes
 * its local best B candidate keys, sorted and padded, to its part of the
 * mate's send. */
static void step_expand_one(const cpu_engine *drv, size_t je, size_t i,
                            uint32_t t)
{
    cpu_engine *ce = step_mate(drv, je);
    sreq *q = &ce->sr[i];
    const fti_prepared *p = q->p;
    uint64_t *out = ce->send + q->off;
    q->npend = 0;
    if (t < p->T && q->c.ncur > 0 && p->keff[t] > 0) {
        wbuf_start_step(&q->wb, p->beam);
        if (drv->jcount > 1)
            step_seed(drv, je, i, t);
        if (ce->match != FT_CPU_MATCH_BSEARCH)
            sort_by_token(&q->c, t);
        for (uint32_t r = 0; r < q->c.ncur; r++)
            expand_entry(ce, &q->c, &q->wb, t, r);
        size_t m, n = 0;
        cand *all = step_best(q->c.gat, &q->wb, 1, p->beam, &m);
        for (size_t j = 0; j < m; j++)
            if (all[j].node != CPU_SEED)
                all[n++] = all[j];
        q->pend = all;
        q->npend = n;
    } else {
        q->c.ncur = 0;
    }
    for (size_t j = 0; j < q->npend; j++)
        out[j] = q->pend[j].key;
    for (size_t j = q->npend; j < p->beam; j++)
        out[j] = FT_KEY_NONE;
    if (drv->jcount > 1) {
        /* the result cut-off for the mates' seeds: as tight as the
         * candidates so far allow (the cut a full buffer would make) */
        wbuf *wb = &q->wb;
        if (wb->sb_len >= wb->sb_keep && wb->sb_len > 0) {
            wb->sb_cut = top_selc(wb->sb, wb->sb_len, wb->sb_keep);
            wb->sb_len = wb->sb_keep;
        }
        q->sbound = wb->sb_cut;
    }
    atomic_store_explicit(&q->ready, t + 1, memory_order_release);
}

/* step_keep_one keeps request i's members of the global top-B on mate je:
 * entry j of the local list has global rank j + (keys of the other shards'
 * lists below it); the local list is sorted, so the kept ones are a
 * prefix.  The lists of the joint step's mates are read where they were
 * written (their send), only the other shards' from recv; after a merged
 * expansion the mates' keys below an entry are known (its place in the
 * merged list), and only the other shards' are counted. */
static void step_keep_one(const cpu_engine *drv, size_t je, size_t i,
                          uint32_t t)
{
    cpu_engine *ce = step_mate(drv, je);
    sreq *q = &ce->sr[i];
    const fti_prepared *p = q->p;
    rctx *c = &q->c;
    uint32_t B = p->beam;
    uint32_t *h = c->hist + (size_t)t * c->bcap;
    uint32_t kept = 0;
    /* merged: an entry's tag is its place among every mate's lists */
    int merged = drv->jmerged;
    uint32_t others = merged && drv->jcount == ce->nshards ? 0 : ce->nshards;
    for (size_t j = 0; j < q->npend; j++) {
        uint64_t key = q->pend[j].key;
        size_t g = merged ? q->pend[j].tag : j;
        for (uint32_t s = 0; s < others && g < B; s++) {
            if (s == ce->shard)
                continue;
            size_t js = (size_t)(s - drv->shard); /* wraps below first */
            if (js < drv->jcount && merged)
                continue;
            const uint64_t *l = js < drv->jcount
                                    ? step_mate(drv, js)->send + q->off
                                    : ce->recv + s * ce->slen + q->off;
            g += fti_lower_bound_u64(l, B, key);
        }
        if (g >= B)
            break;
        c->nxt[kept].node = q->pend[j].node;
        c->nxt[kept].sigma = q->pend[j].sigma;
        c->nxt[kept].rank = (uint32_t)g;
        h[g] = ft_hist_entry(key);
        kept++;
    }
    bent *x = c->cur;
    c->cur = c->nxt;
    c->nxt = x;
    c->ncur = kept;
}

/* ---- merged steps ----
 *
 * With at least as many requests as workers, a request's step over every
 * mate is one piece of work instead of one per mate: one worker expands
 * the beam entries of all the mates in global rank order into one
 * candidate buffer (each candidate tagged with its mate), as the
 * unsharded engine expands its one beam, so that the cut-offs are the
 * unsharded engine's and no mate offers or keeps more candidates than
 * that engine would; each mate's list is then its members of the first B
 * (a mate's members of the global top-B are among them: exact as
 * step_seed's seeds are), and at the end each mate's hits its members of
 * the first n terminal candidates.  The keep is the same pair by pair. */

/* steps_merged says whether the joint step of count engines driven by ce
 * runs merged: the same answer for every step of a batch.  The driver's
 * split (ft_cpu_engine_tune) forces it: FT_CPU_SPLIT_REQUESTS merged,
 * _BEAMS and _GROUPS by pairs. */
static int steps_merged(const cpu_engine *ce, size_t count)
{
    if (count <= 1)
        return 0;
    if (ce->split == FT_CPU_SPLIT_REQUESTS)
        return 1;
    if (ce->split != FT_CPU_SPLIT_AUTO)
        return 0;
    return ce->sn >= (size_t)ce->nthreads;
}

/* merged_ready sizes the merged requests for the batch and starts their
 * results (before the first step of a batch that runs merged). */
static int merged_ready(cpu_engine *ce)
{
    if (ce->mr == NULL) {
        ce->mr = aligned_alloc(128, FTI_ENGINE_CHUNK * sizeof *ce->mr);
        if (ce->mr == NULL)
            return FT_ENOMEM;
        memset(ce->mr, 0, FTI_ENGINE_CHUNK * sizeof *ce->mr);
    }
    for (size_t i = 0; i < ce->sn; i++) {
        mreq *m = &ce->mr[i];
        const fti_prepared *p = ce->sr[i].p;
        if (i >= ce->mr_alloc)
            ce->mr_alloc = i + 1;
        if (wbuf_ready(&m->wb, p->beam, p->results) ||
            grow((void **)&m->at, &m->at_alloc, p->beam, sizeof *m->at))
            return FT_ENOMEM;
        wbuf_start_request(&m->wb, p->results);
    }
    ce->mr_ready = 1;
    return FT_OK;
}

/* step_expand_merged expands request i at step t on every mate and writes
 * each mate's list to its send. */
static void step_expand_merged(const cpu_engine *drv, size_t i, uint32_t t)
{
    mreq *mq = &drv->mr[i];
    wbuf *wb = &mq->wb;
    const fti_prepared *p = drv->sr[i].p;
    uint32_t B = p->beam;
    int go = t < p->T && p->keff[t] > 0;
    size_t live = 0;
    const rctx *sorted = NULL; /* the step's proposals by token, once */
    for (size_t j = 0; j < drv->jcount; j++) {
        cpu_engine *m = step_mate(drv, j);
        sreq *q = &m->sr[i];
        q->npend = 0;
        q->pend = q->wb.nb;
        if (!go)
            q->c.ncur = 0;
        if (q->c.ncur > 0 && m->match != FT_CPU_MATCH_BSEARCH) {
            if (sorted == NULL) {
                sort_by_token(&q->c, t);
                sorted = &q->c;
            } else {
                memcpy(q->c.bytok, sorted->bytok,
                       p->keff[t] * sizeof *q->c.bytok);
            }
        }
        live += q->c.ncur;
    }
    if (live > 0) {
        wbuf_start_step(wb, B);
        if (t == 0) {
            /* every mate's beam is its root, of rank 0 */
            for (size_t j = 0; j < drv->jcount; j++) {
                cpu_engine *m = step_mate(drv, j);
                wb->tag = (uint32_t)j;
                for (uint32_t r = 0; r < m->sr[i].c.ncur; r++)
                    expand_entry(m, &m->sr[i].c, wb, t, r);
            }
        } else {
            /* global ranks are distinct and below B */
            uint64_t *at = mq->at;
            for (uint32_t g = 0; g < B; g++)
                at[g] = UINT64_MAX;
            for (size_t j = 0; j < drv->jcount; j++) {
                const rctx *c = &step_mate(drv, j)->sr[i].c;
                for (uint32_t r = 0; r < c->ncur; r++)
                    at[c->cur[r].rank] = (uint64_t)j << 32 | r;
            }
            for (uint32_t g = 0; g < B; g++) {
                if (at[g] == UINT64_MAX)
                    continue;
                uint32_t j = (uint32_t)(at[g] >> 32);
                cpu_engine *m = step_mate(drv, j);
                wb->tag = j;
                expand_entry(m, &m->sr[i].c, wb, t, (uint32_t)at[g]);
            }
        }
        size_t n;
        cand *all = step_best(NULL, wb, 1, B, &n);
        for (size_t k = 0; k < n; k++) {
            sreq *q = &step_mate(drv, all[k].tag)->sr[i];
            q->pend[q->npend] = all[k];
            q->pend[q->npend++].tag = (uint32_t)k; /* its place (the keep) */
        }
    }
    for (size_t j = 0; j < drv->jcount; j++) {
        cpu_engine *m = step_mate(drv, j);
        sreq *q = &m->sr[i];
        uint64_t *out = m->send + q->off;
        for (size_t k = 0; k < q->npend; k++)
            out[k] = q->pend[k].key;
        for (size_t k = q->npend; k < B; k++)
            out[k] = FT_KEY_NONE;
    }
}

/* step_finish_merged writes request i's hits on every mate: its members
 * of the first n terminal candidates of them all. */
static void step_finish_merged(const cpu_engine *drv, size_t i)
{
    wbuf *wb = &drv->mr[i].wb;
    size_t n;
    selc *all = best_results(NULL, wb, 1, drv->sr[i].p->results, &n);
    for (size_t j = 0; j < drv->jcount; j++)
        step_mate(drv, j)->sr[i].wb.sb_len = 0;
    for (size_t k = 0; k < n; k++) {
        wbuf *mw = &step_mate(drv, all[k].tag)->sr[i].wb;
        mw->sb[mw->sb_len++] = all[k];
    }
    for (size_t j = 0; j < drv->jcount; j++) {
        cpu_engine *m = step_mate(drv, j);
        const wbuf *mw = &m->sr[i].wb; /* in order already */
        emit_hits(m, &m->sr[i].c, mw->sb, mw->sb_len,
                  &drv->jpart[j * FTI_ENGINE_CHUNK + i]);
    }
}

/* job_steps takes the pieces of the joint step: requests (merged), or
 * pairs (mate j, request i) shard by shard: a mate's lists are then
 * mostly done before the next mate's expansion of the same request
 * starts, in time to seed it. */
static void job_steps(cpu_engine *ce, int w)
{
    (void)w;
    int whole = ce->jmerged;
    size_t items = ce->sn * (whole ? 1 : ce->jcount);
    for (;;) {
        unsigned x = atomic_fetch_add_explicit(&ce->jnext, 1,
                                               memory_order_relaxed);
        if (x >= items)
            break;
        size_t j = x / ce->sn, i = x % ce->sn;
        if (whole && ce->jkeep)
            for (size_t m = 0; m < ce->jcount; m++)
                step_keep_one(ce, m, i, ce->jkeep - 1);
        if (whole && ce->jkind == FTI_STEP_EXPAND) {
            step_expand_merged(ce, i, ce->jt);
        } else if (whole) {
            step_finish_merged(ce, i);
            if (ce->jdone)
                ce->jdone(ce->jdarg, i);
        } else if (ce->jkind == FTI_STEP_EXPAND) {
            step_expand_one(ce, j, i, ce->jt);
        } else if (ce->jkind == FTI_STEP_KEEP) {
            step_keep_one(ce, j, i, ce->jt);
        } else {
            cpu_engine *m = step_mate(ce, j);
            ft_result *r = ce->jfres ? ce->jfres[i]
                                    : &ce->jpart[j * FTI_ENGINE_CHUNK + i];
            emit_results(m, &m->sr[i].c, &m->sr[i].wb, 1, r);
        }
    }
}

/* steps_run runs one kind of step (FTI_STEP_*) of the batch begun on
 * eng[0..count) (the shards from eng[0]'s on, one batch) on eng[0]'s
 * workers: a piece per request (merged) or per (engine, request) pair.
 * finish writes engine j's request i to part[j * FTI_ENGINE_CHUNK + i],
 * or (one engine) to res[i], and calls done (may be NULL) for each
 * request.  FT_EINVAL when the engines did not begin one batch as
 * consecutive shards. */
static int steps_run(ft_engine *const *eng, size_t count, int kind,
                     uint32_t t, ft_result *part, ft_result *const *res,
                     fti_step_done done, void *arg)
{
    cpu_engine *ce = eng[0]->impl;
    if (ce->sn == 0)
        return FT_ESTATE;
    for (size_t j = 1; j < count; j++) {
        const cpu_engine *m = eng[j]->impl;
        if (m->sn != ce->sn || m->slen != ce->slen ||
            m->nshards != ce->nshards || m->shard != ce->shard + j)
            return FT_EINVAL;
        for (size_t i = 0; i < ce->sn; i++)
            if (m->sr[i].p != ce->sr[i].p)
                return FT_EINVAL;
    }
    ce->jeng = eng;
    ce->jcount = count;
    ce->jpart = part;
    ce->jfres = res;
    ce->jdone = done;
    ce->jdarg = arg;
    ce->jkind = kind;
    ce->jt = t;
    ce->jmerged = steps_merged(ce, count);
    if (ce->jmerged && !ce->mr_ready) {
        if (kind != FTI_STEP_EXPAND)
            return FT_ESTATE; /* the batch's steps began with another count */
        int rc = merged_ready(ce);
        if (rc != FT_OK)
            return rc;
    }
    if (ce->jmerged && kind == FTI_STEP_KEEP) {
        /* A round of its own would cost a meeting of the workers for
         * little work: each request's keep is done by the piece of the
         * next round (expand or finish) that takes the request, first.
         * It reads recv, which holds step t's lists until the next
         * step's exchange, after that round. */
        ce->jkeep = t + 1;
        return FT_OK;
    }
    atomic_store(&ce->jnext, 0);
    size_t items = ce->sn * (ce->jmerged ? 1 : count);
    if (ce->nthreads == 1 || items == 1)
        job_steps(ce, 0);
    else
        pool_run(ce, job_steps);
    ce->jkeep = 0;
    if (kind == FTI_STEP_FINISH && done && !ce->jmerged)
        for (size_t i = 0; i < ce->sn; i++)
            done(arg, i); /* pairs: request i's parts are known now */
    if (kind == FTI_STEP_FINISH)
        for (size_t j = 0; j < count; j++)
            ((cpu_engine *)eng[j]->impl)->sn = 0;
    return FT_OK;
}

static int cpu_steps(ft_engine *const *eng, size_t count, int kind,
                     uint32_t t, ft_result *part, fti_step_done done,
                     void *arg)
{
    return steps_run(eng, count, kind, t, part, NULL, done, arg);
}

static int cpu_step_begin(ft_engine *eng, const fti_prepared *const *reqs,
                          size_t n, uint32_t shard, uint32_t nshards)
{
    cpu_engine *ce = eng->impl;
    ce->sn = 0;
    if (ce->sr == NULL) {
        ce->sr = aligned_alloc(128, FTI_ENGINE_CHUNK * sizeof *ce->sr);
        if (ce->sr == NULL)
            return FT_ENOMEM;
        memset(ce->sr, 0, FTI_ENGINE_CHUNK * sizeof *ce->sr);
    }
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        sreq *q = &ce->sr[i];
        q->p = reqs[i];
        q->off = len;
        q->npend = 0;
        atomic_store_explicit(&q->ready, 0, memory_order_relaxed);
        len += reqs[i]->beam;
        ft_result dummy;
        if (req_ready(&q->c, &q->wb, 1, reqs[i], &dummy) != FT_OK)
            return FT_ENOMEM;
        if (i >= ce->sr_alloc)
            ce->sr_alloc = i + 1;
    }
    if (grow((void **)&ce->send, &ce->send_alloc, len, sizeof(uint64_t)) ||
        grow((void **)&ce->recv, &ce->recv_alloc, len * nshards,
             sizeof(uint64_t)))
        return FT_ENOMEM;
    ce->sn = n;
    ce->slen = len;
    ce->shard = shard;
    ce->nshards = nshards;
    ce->mr_ready = 0;
    ce->jkeep = 0;
    return FT_OK;
}

static int cpu_step_buffers(ft_engine *eng, uint64_t **send, uint64_t **recv,
                            size_t *len)
{
    cpu_engine *ce = eng->impl;
    if (ce->sn == 0)
        return FT_ESTATE;
    *send = ce->send;
    *recv = ce->recv;
    *len = ce->slen;
    return FT_OK;
}

static int cpu_step_expand(ft_engine *eng, uint32_t t)
{
    return steps_run(&eng, 1, FTI_STEP_EXPAND, t, NULL, NULL, NULL, NULL);
}

static int cpu_step_keep(ft_engine *eng, uint32_t t)
{
    return steps_run(&eng, 1, FTI_STEP_KEEP, t, NULL, NULL, NULL, NULL);
}

static int cpu_step_finish(ft_engine *eng, ft_result *const *res)
{
    return steps_run(&eng, 1, FTI_STEP_FINISH, 0, NULL, res, NULL, NULL);
}

/* ---- open / close ---------------------------------------------------- */

static void cpu_close(ft_engine *eng)
{
    cpu_engine *ce = eng->impl;
    if (ce == NULL)
        return;
    if (ce->th) {
        if (ce->nstarted > 0) {
            ce->stop = 1;
            spinw_add(&ce->pgo, 1);
        }
        for (int i = 0; i < ce->nstarted; i++)
            pthread_join(ce->th[i], NULL);
        free(ce->th);
    }
    /* spinw objects: the pool's go and done, then each group's go, done */
    for (int i = 0; i < ce->nsw; i++) {
        spinw *x = i == 0   ? &ce->pgo
                   : i == 1 ? &ce->pdone
                   : (i & 1) ? &ce->grp[(i - 2) / 2].done
                             : &ce->grp[(i - 2) / 2].go;
        spinw_destroy(x);
    }
    free(ce->grp);
    free(ce->wgrp);
    for (int i = 0; i < ce->nthreads; i++) {
        if (ce->ctx)
            rctx_free(&ce->ctx[i]);
        if (ce->wb)
            wbuf_free(&ce->wb[i]);
    }
    free(ce->ctx);
    free(ce->wb);
    for (size_t i = 0; i < ce->sr_alloc; i++) {
        rctx_free(&ce->sr[i].c);
        wbuf_free(&ce->sr[i].wb);
    }
    free(ce->sr);
    for (size_t i = 0; i < ce->mr_alloc; i++) {
        wbuf_free(&ce->mr[i].wb);
        free(ce->mr[i].at);
    }
    free(ce->mr);
    free(ce->send);
    free(ce->recv);
    free(ce);
    eng->impl = NULL;
}

static const ft_engine_ops cpu_ops = {
    .kind = FT_ENGINE_CPU,
    .run = cpu_run,
    .step_begin = cpu_step_begin,
    .step_buffers = cpu_step_buffers,
    .step_expand = cpu_step_expand,
    .step_keep = cpu_step_keep,
    .step_finish = cpu_step_finish,
    .steps = cpu_steps,
    .close = cpu_close,
};

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
    int nt = eng->opts.threads ? eng->opts.threads : fti_usable_cores();
    if (nt < 1)
        nt = 1;
    if (nt > 1024)
        nt = 1024;
    ce->nthreads = nt;
    ce->small_work = small_work_for(nt);
    /* Waiting threads spin a while before they sleep: a step's serial part
     * (the merge) is short next to a sleep and a wake-up.  Not when the
     * workers outnumber the cores: there a spinner takes the core that the
     * thread it waits for needs. */
    ce->spin_ns = nt <= fti_usable_cores() ? CPU_SPIN_NS : 0;
    if (eng->opts.spin_us >= 0)
        ce->spin_ns = eng->opts.spin_us * 1000L;
    eng->impl = ce;
    eng->ops = &cpu_ops;
    ce->ctx = aligned_alloc(128, (size_t)nt * sizeof *ce->ctx);
    ce->wb = aligned_alloc(128, (size_t)nt * sizeof *ce->wb);
    if (ce->ctx)
        memset(ce->ctx, 0, (size_t)nt * sizeof *ce->ctx);
    if (ce->wb)
        memset(ce->wb, 0, (size_t)nt * sizeof *ce->wb);
    ce->th = calloc((size_t)nt, sizeof *ce->th);
    ce->grp = aligned_alloc(128, (size_t)nt * sizeof *ce->grp);
    ce->wgrp = calloc((size_t)nt, sizeof *ce->wgrp);
    if (ce->grp)
        memset(ce->grp, 0, (size_t)nt * sizeof *ce->grp);
    if (!ce->ctx || !ce->wb || !ce->th || !ce->grp || !ce->wgrp) {
        cpu_close(eng);
        FT_RETURN_ERROR_IF(1, FT_ENOMEM, "engine: out of memory");
    }
    for (int i = 0; i < 2 + 2 * nt; i++) {
        spinw *x = i == 0   ? &ce->pgo
                   : i == 1 ? &ce->pdone
                   : (i & 1) ? &ce->grp[(i - 2) / 2].done
                             : &ce->grp[(i - 2) / 2].go;
        if (spinw_init(x)) {
            cpu_close(eng);
            FT_RETURN_ERROR_IF(1, FT_ENOMEM, "engine: out of memory");
        }
        ce->nsw++;
    }
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
