/*
 * keys.c - the seeded key-library generator (see workload.h and
 * docs/workload.md).
 *
 * The library is grown top-down as a random trie.  A node at depth d that
 * holds n keys in its subtree first decides whether it ends a key itself
 * (with the hazard of the target length distribution), then splits the
 * rest among children by Pitman-Yor stick-breaking, which gives the
 * power-law subtree sizes that real keyword libraries show (a few huge
 * first words, a long tail of rare ones).  Children get distinct tokens
 * drawn from a Zipf(1) law over the vocabulary; the drawn tokens are sorted
 * and the largest subtrees (stick-breaking hands them out first, in
 * expectation) get the most popular tokens.  A subtree of one key is a
 * chain whose length follows the same hazard.
 *
 * Because siblings get distinct tokens, the keys come out distinct; walking
 * children in token order emits them sorted.  The top of the trie is split
 * serially into pieces of at most a fixed share of n; each piece has its
 * own random stream (seeded by the seed and the piece's path), so the output
 * does not depend on the threads that generate the pieces.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "workload_impl.h"

/* ---- the shape of the library ---- */

/* Key-length hazard source (lengths 1..8, mean 3.8).  Keys that share a
 * node with others cannot end there (a node ends at most one key), so the
 * lengths that come out are about half a token longer (mean 5.0 at 1M
 * keys): 3-6 token phrases dominate, as in keyword libraries. */
static const double len_pmf[FT_WL_MAX_LEN + 1] = {
    0, 0.02, 0.16, 0.26, 0.24, 0.15, 0.09, 0.05, 0.03};

/* Pitman-Yor discount and concentration of the split at each depth: the
 * root's fan-out grows like n^0.6 and its subtrees follow a power law;
 * depth-1 and depth-2 nodes split almost per key, so keys share their
 * first one or two tokens with many others and then go their own way
 * (about 2.1-2.4 nodes per key at 1M-10M keys). */
static const double py_disc[FT_WL_MAX_LEN] = {0.60, 0.80, 0.70, 0.60,
                                              0.50, 0.50, 0.50, 0.50};
static const double py_theta[FT_WL_MAX_LEN] = {5.0, 2.0, 1.0, 1.0,
                                               1.0, 1.0, 1.0, 1.0};

typedef struct wl_shape {
    double hazard[FT_WL_MAX_LEN + 1]; /* P(a key ends at d | it reached d) */
    uint32_t vocab;
} wl_shape;

static void shape_init(wl_shape *sh, uint32_t vocab)
{
    double tail = 1.0;
    for (uint32_t d = 1; d <= FT_WL_MAX_LEN; d++) {
        sh->hazard[d] = tail > 0 ? len_pmf[d] / tail : 1.0;
        tail -= len_pmf[d];
    }
    sh->hazard[FT_WL_MAX_LEN] = 1.0;
    sh->vocab = vocab;
}

/* ---- one generator context (a thread's scratch) ---- */

typedef struct wl_level {
    uint64_t *sizes;
    uint32_t *toks;
    uint32_t *set;   /* open-addressing set of drawn tokens, UINT32_MAX free */
    size_t cap, set_cap;
} wl_level;

typedef struct wl_ctx {
    const wl_shape *sh;
    ft_wl_format fmt;
    ft_wl_rng rng;
    wl_level lv[FT_WL_MAX_LEN];
    wl_buf out;
    ft_wl_keys_stats st;
    int err;
} wl_ctx;

static void ctx_free(wl_ctx *c)
{
    for (uint32_t d = 0; d < FT_WL_MAX_LEN; d++) {
        free(c->lv[d].sizes);
        free(c->lv[d].toks);
        free(c->lv[d].set);
    }
    free(c->out.p);
}

static int level_reserve(wl_level *l, size_t n)
{
    if (n <= l->cap)
        return FT_OK;
    size_t cap = l->cap ? l->cap : 64;
    while (cap < n)
        cap *= 2;
    uint64_t *s = realloc(l->sizes, cap * sizeof *s);
    if (s == NULL)
        return FT_ENOMEM;
    l->sizes = s;
    uint32_t *t = realloc(l->toks, cap * sizeof *t);
    if (t == NULL)
        return FT_ENOMEM;
    l->toks = t;
    l->cap = cap;
    return FT_OK;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* draw_distinct fills l->toks[0..k) with k distinct Zipf tokens, sorted. */
static int draw_distinct(wl_ctx *c, wl_level *l, size_t k)
{
    uint32_t V = c->sh->vocab;
    if (k == 1) {
        l->toks[0] = ft_wl_zipf_token(&c->rng, V);
        return FT_OK;
    }
    if (k <= 8) {
        for (size_t i = 0; i < k;) {
            uint32_t t = ft_wl_zipf_token(&c->rng, V);
            size_t j = 0;
            while (j < i && l->toks[j] != t)
                j++;
            if (j == i)
                l->toks[i++] = t;
        }
    } else {
        size_t cap = 16;
        while (cap < 2 * k)
            cap *= 2;
        if (cap > l->set_cap) {
            uint32_t *s = realloc(l->set, cap * sizeof *s);
            if (s == NULL)
                return FT_ENOMEM;
            l->set = s;
            l->set_cap = cap;
        }
        memset(l->set, 0xff, cap * sizeof *l->set);
        for (size_t i = 0; i < k;) {
            uint32_t t = ft_wl_zipf_token(&c->rng, V);
            size_t h = (size_t)(ft_wl_mix(t, 0) & (cap - 1));
            while (l->set[h] != UINT32_MAX && l->set[h] != t)
                h = (h + 1) & (cap - 1);
            if (l->set[h] == t)
                continue;
            l->set[h] = t;
            l->toks[i++] = t;
        }
    }
    qsort(l->toks, k, sizeof *l->toks, cmp_u32);
    return FT_OK;
}

/* split shares r keys among the children of a node at depth d; returns
 * the number of children (sizes and tokens in c->lv[d]) or 0 on error:
 * FT_ELIMIT in c->err when the vocabulary has too few tokens for them,
 * else out of memory. */
static size_t split(wl_ctx *c, uint32_t d, uint64_t r)
{
    wl_level *l = &c->lv[d];
    size_t k = 0;
    /* No child may hold more keys than tokens exist, and a vocabulary
     * half used up makes distinct draws slow: cap the fan-out there. */
    size_t kmax = c->sh->vocab / 2;
    if (d + 1 == FT_WL_MAX_LEN) {
        /* Children at the deepest level can hold one key each. */
        if (r > kmax) {
            c->err = FT_ELIMIT;
            return 0;
        }
        if (level_reserve(l, r))
            return 0;
        for (; k < r; k++)
            l->sizes[k] = 1;
    } else if (r == 1) {
        if (level_reserve(l, 1))
            return 0;
        l->sizes[k++] = 1;
    } else {
        double a = py_disc[d], th = py_theta[d];
        while (r > 0) {
            if (level_reserve(l, k + 1))
                return 0;
            uint64_t s;
            if (k + 1 >= kmax) {
                s = r;
            } else {
                double v = wl_beta_draw(&c->rng, 1.0 - a, th + (double)(k + 1) * a);
                s = 1 + (uint64_t)((double)(r - 1) * v + ft_wl_u01(&c->rng));
                if (s > r)
                    s = r;
            }
            l->sizes[k++] = s;
            r -= s;
        }
    }
    if (draw_distinct(c, l, k))
        return 0;
    return k;
}

static int emit(wl_ctx *c, const uint32_t *toks, uint32_t n)
{
    c->st.keys++;
    c->st.tokens += n;
    c->st.len_hist[n]++;
    if (c->fmt == FT_WL_FTK) {
        if (wl_buf_reserve(&c->out, 4 * (n + 1)))
            return FT_ENOMEM;
        uint32_t rec[FT_WL_MAX_LEN + 1];
        rec[0] = n;
        memcpy(rec + 1, toks, n * sizeof *toks);
        /* The .ftk format is little-endian, as is every host we build on. */
        memcpy(c->out.p + c->out.len, rec, 4 * (n + 1));
        c->out.len += 4 * (n + 1);
        return FT_OK;
    }
    if (wl_buf_reserve(&c->out, 11 * n + 1))
        return FT_ENOMEM;
    char *p = c->out.p + c->out.len;
    for (uint32_t i = 0; i < n; i++) {
        char tmp[10];
        int j = 0;
        uint32_t v = toks[i];
        do {
            tmp[j++] = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        if (i)
            *p++ = ' ';
        while (j)
            *p++ = tmp[--j];
    }
    *p++ = '\n';
    c->out.len = (size_t)(p - c->out.p);
    return FT_OK;
}

/* node_begin counts a node at depth d and decides whether it ends a key
 * (*ended); returns the keys left for its children. */
static uint64_t node_begin(wl_ctx *c, const uint32_t *prefix, uint32_t d,
                           uint64_t n, int *ended)
{
    *ended = 0;
    if (d == 0)
        return n;
    c->st.nodes++;
    if (prefix[d - 1] >= 65536u)
        c->st.high_labels++;
    *ended = d == FT_WL_MAX_LEN || ft_wl_u01(&c->rng) < c->sh->hazard[d];
    return n - (uint64_t)*ended;
}

/* gen grows the whole subtree of a node at depth d holding n keys. */
static void gen(wl_ctx *c, uint32_t *prefix, uint32_t d, uint64_t n)
{
    int ended;
    uint64_t r = node_begin(c, prefix, d, n, &ended);
    if (ended && emit(c, prefix, d))
        c->err = FT_ENOMEM;
    if (r == 0 || c->err)
        return;
    size_t k = split(c, d, r);
    if (k == 0) {
        if (!c->err)
            c->err = FT_ENOMEM;
        return;
    }
    if (d == 0)
        c->st.root_fanout = k;
    wl_level *l = &c->lv[d];
    for (size_t i = 0; i < k && !c->err; i++) {
        prefix[d] = l->toks[i];
        gen(c, prefix, d + 1, l->sizes[i]);
    }
}

/* ---- pieces and threads ---- */

/* A root is the top of one subtree the workers grow (n keys), or, with
 * n == 0, a key ended by a node the serial top part expanded. */
typedef struct wl_root {
    uint32_t prefix[FT_WL_MAX_LEN];
    uint32_t d;
    uint64_t n;
    uint64_t seed;
} wl_root;

/* A piece is a run of consecutive roots holding about thr keys: the unit
 * of work of one thread and of one hand-over to the sink. */
typedef struct wl_piece {
    size_t first, end; /* roots [first, end) */
    uint64_t keys;
    wl_buf out;
    ft_wl_keys_stats st;
    int done;
} wl_piece;

typedef struct wl_plan {
    wl_root *r;
    size_t nr, rcap;
    wl_piece *p;
    size_t n, cap;
    uint64_t thr;
    wl_ctx top;       /* serial expansion of the top of the trie */
    int err;
} wl_plan;

/* plan_add appends a root, to the last piece unless that one is full. */
static void plan_add(wl_plan *pl, const uint32_t *prefix, uint32_t d,
                     uint64_t n, uint64_t seed)
{
    if (pl->nr == pl->rcap) {
        size_t cap = pl->rcap ? 2 * pl->rcap : 1024;
        wl_root *r = realloc(pl->r, cap * sizeof *r);
        if (r == NULL) {
            pl->err = FT_ENOMEM;
            return;
        }
        pl->r = r;
        pl->rcap = cap;
    }
    wl_root *q = &pl->r[pl->nr++];
    memset(q, 0, sizeof *q);
    memcpy(q->prefix, prefix, d * sizeof *prefix);
    q->d = d;
    q->n = n;
    q->seed = seed;
    uint64_t keys = n ? n : 1;
    if (pl->n == 0 || pl->p[pl->n - 1].keys + keys > pl->thr) {
        if (pl->n == pl->cap) {
            size_t cap = pl->cap ? 2 * pl->cap : 1024;
            wl_piece *p = realloc(pl->p, cap * sizeof *p);
            if (p == NULL) {
                pl->err = FT_ENOMEM;
                return;
            }
            pl->p = p;
            pl->cap = cap;
        }
        wl_piece *p = &pl->p[pl->n++];
        memset(p, 0, sizeof *p);
        p->first = pl->nr - 1;
    }
    wl_piece *p = &pl->p[pl->n - 1];
    p->end = pl->nr;
    p->keys += keys;
}

/* expand splits big subtrees serially until every root holds at most
 * thr keys.  A key ended by an expanded node becomes a root of its own,
 * so the roots, in order, emit the keys in order. */
static void expand(wl_plan *pl, uint32_t *prefix, uint32_t d, uint64_t n,
                   uint64_t seed)
{
    if (pl->err)
        return;
    if (n <= pl->thr || d + 1 >= FT_WL_MAX_LEN) {
        plan_add(pl, prefix, d, n, seed);
        return;
    }
    wl_ctx *c = &pl->top;
    ft_wl_rng_seed(&c->rng, seed);
    int ended;
    uint64_t r = node_begin(c, prefix, d, n, &ended);
    if (ended)
        plan_add(pl, prefix, d, 0, 0);
    size_t k = split(c, d, r);
    if (k == 0) {
        pl->err = c->err ? c->err : FT_ENOMEM;
        return;
    }
    if (d == 0)
        c->st.root_fanout = k;
    /* The children recurse into deeper levels' scratch only, so this
     * level's sizes and tokens stay valid across the loop. */
    wl_level *l = &c->lv[d];
    for (size_t i = 0; i < k && !pl->err; i++) {
        prefix[d] = l->toks[i];
        expand(pl, prefix, d + 1, l->sizes[i], ft_wl_mix(seed, l->toks[i]));
    }
}

typedef struct wl_run {
    wl_plan *pl;
    const wl_shape *sh;
    ft_wl_format fmt;
    size_t next;      /* next piece to generate */
    size_t written;   /* pieces handed to the sink */
    size_t window;    /* pieces generated ahead of the sink at most */
    int err;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} wl_run;

static void *worker(void *arg)
{
    wl_run *run = arg;
    wl_ctx c;
    memset(&c, 0, sizeof c);
    c.sh = run->sh;
    c.fmt = run->fmt;
    pthread_mutex_lock(&run->mu);
    for (;;) {
        while (!run->err && run->next < run->pl->n &&
               run->next >= run->written + run->window)
            pthread_cond_wait(&run->cv, &run->mu);
        if (run->err || run->next >= run->pl->n)
            break;
        wl_piece *q = &run->pl->p[run->next++];
        pthread_mutex_unlock(&run->mu);
        memset(&c.st, 0, sizeof c.st);
        c.out = q->out;
        c.err = FT_OK;
        for (size_t i = q->first; i < q->end && !c.err; i++) {
            const wl_root *rt = &run->pl->r[i];
            uint32_t prefix[FT_WL_MAX_LEN];
            memcpy(prefix, rt->prefix, sizeof prefix);
            if (rt->n == 0) {
                if (emit(&c, prefix, rt->d))
                    c.err = FT_ENOMEM;
                continue;
            }
            ft_wl_rng_seed(&c.rng, rt->seed);
            gen(&c, prefix, rt->d, rt->n);
        }
        q->out = c.out;
        q->st = c.st;
        int err = c.err;
        c.out.p = NULL;
        c.out.len = c.out.cap = 0;
        pthread_mutex_lock(&run->mu);
        q->done = 1;
        if (err)
            run->err = err;
        pthread_cond_broadcast(&run->cv);
    }
    pthread_mutex_unlock(&run->mu);
    ctx_free(&c);
    return NULL;
}

static void stats_add(ft_wl_keys_stats *a, const ft_wl_keys_stats *b)
{
    a->keys += b->keys;
    a->nodes += b->nodes;
    a->tokens += b->tokens;
    a->high_labels += b->high_labels;
    if (b->root_fanout)
        a->root_fanout = b->root_fanout;
    for (uint32_t i = 0; i <= FT_WL_MAX_LEN; i++)
        a->len_hist[i] += b->len_hist[i];
}

void ft_wl_keys_opts_init(ft_wl_keys_opts *o)
{
    memset(o, 0, sizeof *o);
    o->n = 1000000;
    o->seed = 1;
}

int ft_wl_keys_write(ft_wl_keys_stats *st, const ft_wl_keys_opts *o,
                     ft_wl_format fmt, ft_wl_sink sink, void *arg)
{
    if (o->n == 0)
        return FT_EINVAL;
    double t0 = fti_now();
    wl_shape sh;
    shape_init(&sh, o->vocab ? o->vocab : FT_WL_VOCAB);
    if (sh.vocab < 2)
        return FT_EINVAL;
    if (o->n > (uint64_t)sh.vocab * 1000000ull)
        return FT_ELIMIT;
    wl_plan pl;
    memset(&pl, 0, sizeof pl);
    /* The piece size depends on n only, never on threads, so the random
     * streams (one per piece) and hence the output are thread-proof. */
    pl.thr = o->n / 4096;
    if (pl.thr < 20000)
        pl.thr = 20000;
    pl.top.sh = &sh;
    pl.top.fmt = fmt;
    uint32_t prefix[FT_WL_MAX_LEN];
    expand(&pl, prefix, 0, o->n, ft_wl_mix(o->seed, 0x6b657973ull));
    int err = pl.err;

    wl_run run;
    memset(&run, 0, sizeof run);
    run.pl = &pl;
    run.sh = &sh;
    run.fmt = fmt;
    int threads = o->threads > 0 ? o->threads : wl_cores();
    if (threads > 256)
        threads = 256;
    run.window = 4 * (size_t)threads + 4;
    pthread_mutex_init(&run.mu, NULL);
    pthread_cond_init(&run.cv, NULL);
    pthread_t tid[256];
    int started = 0;
    if (!err) {
        for (; started < threads; started++)
            if (pthread_create(&tid[started], NULL, worker, &run))
                break;
        if (started == 0)
            err = FT_ENOMEM;
    }
    ft_wl_keys_stats total;
    memset(&total, 0, sizeof total);
    stats_add(&total, &pl.top.st);
    /* The calling thread hands finished pieces to the sink in order. */
    pthread_mutex_lock(&run.mu);
    while (!err && run.written < pl.n) {
        wl_piece *q = &pl.p[run.written];
        while (!q->done && !run.err)
            pthread_cond_wait(&run.cv, &run.mu);
        if (run.err) {
            err = run.err;
            break;
        }
        pthread_mutex_unlock(&run.mu);
        int rc = q->out.len ? sink(q->out.p, q->out.len, arg) : 0;
        stats_add(&total, &q->st);
        free(q->out.p);
        q->out.p = NULL;
        pthread_mutex_lock(&run.mu);
        if (rc) {
            err = rc;
            run.err = rc;
        }
        run.written++;
        pthread_cond_broadcast(&run.cv);
    }
    if (err)
        run.err = err;
    pthread_cond_broadcast(&run.cv);
    pthread_mutex_unlock(&run.mu);
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    pthread_mutex_destroy(&run.mu);
    pthread_cond_destroy(&run.cv);
    for (size_t i = 0; i < pl.n; i++)
        free(pl.p[i].out.p);
    free(pl.p);
    free(pl.r);
    ctx_free(&pl.top);
    total.nodes += 1; /* the root */
    total.seconds = fti_now() - t0;
    if (st)
        *st = total;
    if (!err && total.keys != o->n)
        err = FT_EINTERNAL;
    return err;
}

typedef struct each_arg {
    ft_wl_key_cb cb;
    void *arg;
} each_arg;

static int each_sink(const void *buf, size_t len, void *arg)
{
    each_arg *ea = arg;
    const uint32_t *w = buf;
    size_t n = len / 4, i = 0;
    while (i < n) {
        uint32_t k = w[i];
        int rc = ea->cb(w + i + 1, k, ea->arg);
        if (rc)
            return rc;
        i += 1 + k;
    }
    return 0;
}

int ft_wl_keys_each(ft_wl_keys_stats *st, const ft_wl_keys_opts *o,
                    ft_wl_key_cb cb, void *arg)
{
    each_arg ea = {cb, arg};
    return ft_wl_keys_write(st, o, FT_WL_FTK, each_sink, &ea);
}

static int build_cb(const uint32_t *toks, uint32_t n, void *arg)
{
    return ft_builder_add_auto(arg, toks, n);
}

int ft_wl_build_index(ft_wl_keys_stats *st, const ft_wl_keys_opts *o,
                      const char *path, char *errbuf, size_t errlen)
{
    ft_build_opts bo;
    ft_build_opts_init(&bo);
    bo.threads = o->threads;
    ft_builder *b;
    int rc = ft_builder_create(&b, &bo, errbuf, errlen);
    if (rc)
        return rc;
    rc = ft_wl_keys_each(st, o, build_cb, b);
    if (rc) {
        fti_errf(errbuf, errlen, "generating keys: %s%s%s", ft_strerror(rc),
                ft_builder_error(b)[0] ? ": " : "", ft_builder_error(b));
        ft_builder_destroy(b);
        return rc;
    }
    rc = ft_builder_finish(b, NULL, path, errbuf, errlen);
    ft_builder_destroy(b);
    return rc;
}
