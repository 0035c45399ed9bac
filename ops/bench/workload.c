/*
 * workload.c - the seeded key-library generator (see workload.h and
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
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "workload.h"

/* ---- small helpers (the library's own stay private to it) ---- */

static double wl_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int wl_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

__attribute__((format(printf, 3, 4)))
static void wl_errf(char *buf, size_t len, const char *fmt, ...)
{
    if (buf == NULL || len == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}

/* WL_FAIL_IF returns err (after writing the message to errbuf) when cond
 * holds.  Expects errbuf/errlen in scope. */
#define WL_FAIL_IF(cond, err, ...)                                            \
    do {                                                                      \
        if (cond) {                                                           \
            wl_errf(errbuf, errlen, __VA_ARGS__);                             \
            return (err);                                                     \
        }                                                                     \
    } while (0)

/* ---- random numbers ---- */

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void ft_wl_rng_seed(ft_wl_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix(&x);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t ft_wl_next(ft_wl_rng *r)
{
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

double ft_wl_u01(ft_wl_rng *r)
{
    return (double)(ft_wl_next(r) >> 11) * 0x1.0p-53;
}

uint64_t ft_wl_mix(uint64_t a, uint64_t b)
{
    uint64_t x = a ^ (b * 0xd6e8feb86659fd93ull);
    return splitmix(&x);
}

uint32_t ft_wl_zipf_token(ft_wl_rng *r, uint32_t vocab)
{
    /* P(rank >= x) = 1 - ln(1+x)/ln(1+V): the density of Zipf(1). */
    double x = exp(ft_wl_u01(r) * log((double)vocab + 1.0)) - 1.0;
    uint32_t t = (uint32_t)x;
    return t < vocab ? t : vocab - 1;
}

static double normal(ft_wl_rng *r)
{
    double u1 = ft_wl_u01(r), u2 = ft_wl_u01(r);
    return sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2);
}

/* gamma_draw is Marsaglia and Tsang's method, boosted for shape < 1. */
static double gamma_draw(ft_wl_rng *r, double shape)
{
    double boost = 1.0;
    if (shape < 1.0) {
        boost = pow(1.0 - ft_wl_u01(r), 1.0 / shape);
        shape += 1.0;
    }
    double d = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x = normal(r), v = 1.0 + c * x;
        if (v <= 0)
            continue;
        v = v * v * v;
        double u = 1.0 - ft_wl_u01(r);
        if (log(u) < 0.5 * x * x + d - d * v + d * log(v))
            return d * v * boost;
    }
}

static double beta_draw(ft_wl_rng *r, double a, double b)
{
    double x = gamma_draw(r, a), y = gamma_draw(r, b);
    return x + y > 0 ? x / (x + y) : 0.0;
}

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

/* ---- growable byte buffer ---- */

typedef struct wl_buf {
    char *p;
    size_t len, cap;
} wl_buf;

static int buf_reserve(wl_buf *b, size_t n)
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
 * the number of children (sizes and tokens in c->lv[d]) or 0 on error. */
static size_t split(wl_ctx *c, uint32_t d, uint64_t r)
{
    wl_level *l = &c->lv[d];
    size_t k = 0;
    /* No child may hold more keys than tokens exist, and a vocabulary
     * half used up makes distinct draws slow: cap the fan-out there. */
    size_t kmax = c->sh->vocab / 2;
    if (d + 1 == FT_WL_MAX_LEN) {
        /* Children at the deepest level can hold one key each. */
        if (r > kmax || level_reserve(l, r))
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
                double v = beta_draw(&c->rng, 1.0 - a, th + (double)(k + 1) * a);
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
        if (buf_reserve(&c->out, 4 * (n + 1)))
            return FT_ENOMEM;
        uint32_t rec[FT_WL_MAX_LEN + 1];
        rec[0] = n;
        memcpy(rec + 1, toks, n * sizeof *toks);
        /* The .ftk format is little-endian, as is every host we build on. */
        memcpy(c->out.p + c->out.len, rec, 4 * (n + 1));
        c->out.len += 4 * (n + 1);
        return FT_OK;
    }
    if (buf_reserve(&c->out, 11 * n + 1))
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
        pl->err = FT_ENOMEM;
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
    double t0 = wl_now();
    wl_shape sh;
    shape_init(&sh, o->vocab ? o->vocab : FT_WL_VOCAB);
    if (sh.vocab < 2 || o->n > (uint64_t)sh.vocab * 1000000ull)
        return FT_EINVAL;
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
    total.seconds = wl_now() - t0;
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
        wl_errf(errbuf, errlen, "generating keys: %s%s%s", ft_strerror(rc),
                ft_builder_error(b)[0] ? ": " : "", ft_builder_error(b));
        ft_builder_destroy(b);
        return rc;
    }
    rc = ft_builder_finish(b, NULL, path, errbuf, errlen);
    ft_builder_destroy(b);
    return rc;
}

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

void ft_wl_req_opts_init(ft_wl_req_opts *o)
{
    memset(o, 0, sizeof *o);
    o->n = 1000;
    o->seed = 1;
    o->T = 8;
    o->beam = FT_DEFAULT_BEAM;
    o->sample = 1u << 20;
    o->alpha = 1.0;
}

/* ---- jumping a random stream ahead ----
 *
 * The state transition of xoshiro256 is linear over GF(2), so n steps are
 * a polynomial in the one-step map: x^n reduced modulo the map's
 * characteristic polynomial P (degree 256), applied to the state.  P is
 * found once by Berlekamp-Massey from 512 bits of one state bit's
 * sequence (P is primitive, so the minimal polynomial of any one bit's
 * non-zero sequence is all of P).  A jump then costs 256 steps and at
 * most 64 products of polynomials, whatever n. */

typedef struct wl_poly {
    uint64_t w[4]; /* coefficients of x^0 .. x^255 */
} wl_poly;

static wl_poly jp_low;     /* P without its x^256 term */
static wl_poly jp_pow[64]; /* x^(2^i) mod P */
static int jp_ok;          /* P was found (else jumps step one by one) */
static pthread_once_t jp_once = PTHREAD_ONCE_INIT;

static void xo_step(uint64_t *s)
{
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
}

static void poly_mulx(wl_poly *a)
{
    uint64_t top = a->w[3] >> 63;
    a->w[3] = a->w[3] << 1 | a->w[2] >> 63;
    a->w[2] = a->w[2] << 1 | a->w[1] >> 63;
    a->w[1] = a->w[1] << 1 | a->w[0] >> 63;
    a->w[0] <<= 1;
    if (top)
        for (int k = 0; k < 4; k++)
            a->w[k] ^= jp_low.w[k];
}

static wl_poly poly_mulmod(const wl_poly *a, const wl_poly *b)
{
    wl_poly r = {{0, 0, 0, 0}};
    for (int i = 255; i >= 0; i--) {
        poly_mulx(&r);
        if (b->w[i >> 6] >> (i & 63) & 1)
            for (int k = 0; k < 4; k++)
                r.w[k] ^= a->w[k];
    }
    return r;
}

static void jp_init(void)
{
    enum { N = 512 };
    uint8_t seq[N], c[N + 1], b[N + 1], tmp[N + 1];
    uint64_t s[4] = {1, 2, 3, 4};
    for (int k = 0; k < N; k++) {
        seq[k] = (uint8_t)(s[0] & 1);
        xo_step(s);
    }
    memset(c, 0, sizeof c);
    memset(b, 0, sizeof b);
    c[0] = b[0] = 1;
    int L = 0, m = 1;
    for (int n = 0; n < N; n++) {
        uint8_t d = seq[n];
        for (int i = 1; i <= L; i++)
            d ^= c[i] & seq[n - i];
        if (!d) {
            m++;
            continue;
        }
        memcpy(tmp, c, sizeof c);
        for (int i = 0; i + m <= N; i++)
            c[i + m] ^= b[i];
        if (2 * L <= n) {
            L = n + 1 - L;
            memcpy(b, tmp, sizeof b);
            m = 1;
        } else {
            m++;
        }
    }
    if (L != 256)
        return;
    /* s_n = sum c_i s_(n-i): P(x) = x^256 + sum c_i x^(256-i). */
    for (int i = 1; i <= 256; i++)
        if (c[i])
            jp_low.w[(256 - i) >> 6] |= 1ull << ((256 - i) & 63);
    memset(&jp_pow[0], 0, sizeof jp_pow[0]);
    jp_pow[0].w[0] = 2; /* x */
    for (int i = 1; i < 64; i++)
        jp_pow[i] = poly_mulmod(&jp_pow[i - 1], &jp_pow[i - 1]);
    jp_ok = 1;
}

void ft_wl_rng_jump(ft_wl_rng *r, uint64_t n)
{
    pthread_once(&jp_once, jp_init);
    if (n < 512 || !jp_ok) {
        while (n--)
            xo_step(r->s);
        return;
    }
    wl_poly p = {{1, 0, 0, 0}};
    for (int i = 0; n; i++, n >>= 1)
        if (n & 1)
            p = poly_mulmod(&p, &jp_pow[i]);
    uint64_t acc[4] = {0, 0, 0, 0}, cur[4];
    memcpy(cur, r->s, sizeof cur);
    for (int i = 0; i < 256; i++) {
        if (p.w[i >> 6] >> (i & 63) & 1)
            for (int k = 0; k < 4; k++)
                acc[k] ^= cur[k];
        xo_step(cur);
    }
    memcpy(r->s, acc, sizeof acc);
}

/* ---- sampling the library ----
 *
 * The reservoirs are filled as one pass over every key in lexicographic
 * order with one random stream would fill them (the output of the serial
 * sampler this replaced, byte for byte), but in parallel: the keys are cut
 * into units (runs of first-level subtrees, or runs of second-level
 * subtrees under one big first-level node), a first parallel pass counts
 * each unit's keys by length from the breadth-first node ranges, which
 * says how many keys and position tokens come before every unit and so how
 * many random draws; a second pass walks each unit with its own stream,
 * jumped to that many draws, and logs the unit's reservoir writes.  The
 * logs are applied in unit order (by whichever worker finds the next one
 * complete), so every slot ends with the write of the latest key in walk
 * order, as in the serial pass, and the hot loop takes no lock. */

typedef struct wl_unit {
    uint32_t shard;
    uint32_t depth;   /* depth of nodes a .. b-1: 1 or 2 */
    uint32_t label1;  /* depth 2: the parent's label */
    int self;         /* depth 2: the parent's own key comes first */
    uint64_t parent;  /* depth 2: the parent node */
    uint64_t a, b;
    uint64_t nodes;   /* counted: nodes below depth 1 (a walk's bound) */
    uint64_t keys;    /* counted: keys, and keys longer than t */
    uint64_t deep[FT_MAX_T];
    uint64_t j0, s0[FT_MAX_T], draws0; /* what comes before the unit */
} wl_unit;

/* wl_log is one unit's reservoir writes, in walk order. */
typedef struct wl_key_put {
    uint32_t slot;
    wl_key key;
} wl_key_put;

typedef struct wl_tok_put {
    uint32_t slot_t; /* slot << 6 | t (t < FT_MAX_T = 64) */
    uint32_t tok;
} wl_tok_put;

typedef struct wl_log {
    wl_key_put *k;
    size_t nk, ck;
    wl_tok_put *m;
    size_t nm, cm;
    int done;
} wl_log;

typedef struct wl_job {
    ft_wl_reqs *g;
    wl_unit *u;
    size_t n_u;
    size_t *piece;          /* phase 2's work: units piece[i] .. piece[i+1]-1 */
    size_t n_p;
    size_t n_items;         /* units (phase 1) or pieces (phase 2) */
    int phase;              /* 1 count, 2 sample */
    int rc;
    uint32_t max_len;       /* deepest key + 1: walk stacks */
    ft_wl_rng base;
    pthread_mutex_t mu;     /* guards what follows */
    size_t next;            /* next unit to take */
    wl_log *log;            /* phase 2: per piece */
    size_t applied;         /* pieces whose logs are applied */
    int merging;            /* a worker is applying logs */
} wl_job;

/* wl_cursor is one worker's place in the serial pass. */
typedef struct wl_cursor {
    ft_wl_rng rng;
    uint64_t j, s[FT_MAX_T];
    wl_log *log;            /* the unit's writes */
    int rc;                 /* FT_ENOMEM when a log could not grow */
    uint32_t *toks;
    ft_node_children *ch;
    uint64_t *nx;
} wl_cursor;

static void put_key(wl_cursor *cu, uint64_t slot, const uint32_t *toks,
                    size_t n)
{
    wl_log *l = cu->log;
    if (l->nk == l->ck) {
        size_t c = l->ck ? 2 * l->ck : 64;
        wl_key_put *p = realloc(l->k, c * sizeof *p);
        if (p == NULL) {
            cu->rc = FT_ENOMEM;
            return;
        }
        l->k = p;
        l->ck = c;
    }
    wl_key_put *k = &l->k[l->nk++];
    memset(k, 0, sizeof *k);
    k->slot = (uint32_t)slot;
    k->key.len = n < FT_WL_MAX_LEN ? (uint32_t)n : FT_WL_MAX_LEN;
    memcpy(k->key.tok, toks, k->key.len * sizeof *toks);
}

static void put_marg(wl_cursor *cu, uint32_t t, uint64_t slot, uint32_t tok)
{
    wl_log *l = cu->log;
    if (l->nm == l->cm) {
        size_t c = l->cm ? 2 * l->cm : 256;
        wl_tok_put *p = realloc(l->m, c * sizeof *p);
        if (p == NULL) {
            cu->rc = FT_ENOMEM;
            return;
        }
        l->m = p;
        l->cm = c;
    }
    l->m[l->nm].slot_t = (uint32_t)(slot << 6 | t);
    l->m[l->nm++].tok = tok;
}

/* emit is one key of the serial pass: one draw for the key reservoir once
 * it is full, then one per position token once that position's is. */
static void sample_emit(wl_job *jb, wl_cursor *cu, const uint32_t *toks, size_t n)
{
    uint64_t cap = jb->g->o.sample;
    uint64_t j = cu->j++;
    if (j < cap) {
        put_key(cu, j, toks, n);
    } else {
        uint64_t x = ft_wl_next(&cu->rng) % (j + 1);
        if (x < cap)
            put_key(cu, x, toks, n);
    }
    for (size_t t = 0; t < n && t < jb->g->o.T; t++) {
        uint64_t s = cu->s[t]++;
        if (s < WL_MARG) {
            put_marg(cu, (uint32_t)t, s, toks[t]);
        } else {
            uint64_t x = ft_wl_next(&cu->rng) % (s + 1);
            if (x < WL_MARG)
                put_marg(cu, (uint32_t)t, x, toks[t]);
        }
    }
}

/* walk_from emits the keys of node's subtree in order; cu->toks[0 .. d-1]
 * spell node (at depth d). */
static int walk_from(wl_job *jb, wl_cursor *cu, const ft_index *idx,
                     uint64_t node, uint32_t d, uint64_t budget)
{
    uint64_t visits = 0;
    int rc = ft_index_node_value(NULL, idx, node);
    if (rc == FT_OK)
        sample_emit(jb, cu, cu->toks, d);
    else if (rc != FT_ENOTFOUND)
        return rc;
    uint32_t sp = d;
    if ((rc = ft_index_children(&cu->ch[sp], idx, node)) != FT_OK)
        return rc;
    cu->nx[sp] = 0;
    while (sp >= d) {
        if (cu->nx[sp] == cu->ch[sp].count) {
            sp--;
            continue;
        }
        uint64_t i = cu->nx[sp]++;
        uint64_t c = cu->ch[sp].first + i;
        if (sp >= jb->max_len)
            return FT_EFORMAT; /* deeper than the index says it goes */
        cu->toks[sp] = ft_index_child_label(idx, &cu->ch[sp], i);
        if (++visits > budget)
            return FT_EFORMAT; /* damaged: ranges overlap */
        rc = ft_index_node_value(NULL, idx, c);
        if (rc == FT_OK)
            sample_emit(jb, cu, cu->toks, sp + 1);
        else if (rc != FT_ENOTFOUND)
            return rc;
        sp++;
        if ((rc = ft_index_children(&cu->ch[sp], idx, c)) != FT_OK)
            return rc;
        cu->nx[sp] = 0;
    }
    return FT_OK;
}

/* count_unit counts u's keys by length over its breadth-first ranges: the
 * descendants of a run of nodes at one depth are a run at the next. */
static int count_unit(wl_job *jb, wl_unit *u)
{
    const ft_index *idx = jb->g->ix[u->shard];
    uint64_t len[FT_MAX_KEY_LEN_LIMIT + 2];
    memset(len, 0, sizeof len);
    int rc;
    u->nodes = 0;
    if (u->self) {
        rc = ft_index_node_value(NULL, idx, u->parent);
        if (rc == FT_OK)
            len[1]++;
        else if (rc != FT_ENOTFOUND)
            return rc;
    }
    uint64_t a = u->a, b = u->b;
    for (uint32_t d = u->depth; a < b; d++) {
        if (d > FT_MAX_KEY_LEN_LIMIT)
            return FT_EFORMAT;
        u->nodes += b - a;
        for (uint64_t x = a; x < b; x++) {
            rc = ft_index_node_value(NULL, idx, x);
            if (rc == FT_OK)
                len[d]++;
            else if (rc != FT_ENOTFOUND)
                return rc;
        }
        ft_node_children ca, cb;
        if ((rc = ft_index_children(&ca, idx, a)) != FT_OK ||
            (rc = ft_index_children(&cb, idx, b - 1)) != FT_OK)
            return rc;
        a = ca.first;
        b = cb.first + cb.count;
    }
    u->keys = 0;
    for (uint32_t d = 1; d <= FT_MAX_KEY_LEN_LIMIT; d++)
        u->keys += len[d];
    for (uint32_t t = 0; t < jb->g->o.T; t++) {
        u->deep[t] = 0;
        for (uint32_t d = t + 1; d <= FT_MAX_KEY_LEN_LIMIT; d++)
            u->deep[t] += len[d];
    }
    return FT_OK;
}

/* sample_unit walks unit u; the cursor is where u starts (jumped there, or
 * left there by the unit before it in the same piece). */
static int sample_unit(wl_job *jb, wl_cursor *cu, const wl_unit *u)
{
    const ft_index *idx = jb->g->ix[u->shard];
    int rc;
    if (u->depth == 2) {
        cu->toks[0] = u->label1;
        if (u->self) {
            rc = ft_index_node_value(NULL, idx, u->parent);
            if (rc == FT_OK)
                sample_emit(jb, cu, cu->toks, 1);
            else if (rc != FT_ENOTFOUND)
                return rc;
        }
        if (u->b > u->a) {
            ft_node_children pc;
            if ((rc = ft_index_children(&pc, idx, u->parent)) != FT_OK)
                return rc;
            for (uint64_t x = u->a; x < u->b; x++) {
                cu->toks[1] = ft_index_child_label(idx, &pc, x - pc.first);
                if ((rc = walk_from(jb, cu, idx, x, 2, u->nodes)) != FT_OK)
                    return rc;
            }
        }
        return FT_OK;
    }
    const ft_node_children *rc0 = &jb->g->root[u->shard];
    for (uint64_t x = u->a; x < u->b; x++) {
        cu->toks[0] = ft_index_child_label(idx, rc0, x - rc0->first);
        if ((rc = walk_from(jb, cu, idx, x, 1, u->nodes)) != FT_OK)
            return rc;
    }
    return FT_OK;
}

/* apply writes one unit's log into the reservoirs and frees it. */
static void apply(wl_job *jb, wl_log *l)
{
    wl_pool *p = jb->g->pool;
    for (size_t i = 0; i < l->nk; i++)
        p->sample[l->k[i].slot] = l->k[i].key;
    for (size_t i = 0; i < l->nm; i++)
        p->marg[l->m[i].slot_t & 63u][l->m[i].slot_t >> 6] = l->m[i].tok;
    free(l->k);
    free(l->m);
    l->k = NULL;
    l->m = NULL;
}

/* merge applies, in unit order, every log whose predecessors are applied;
 * called with mu held, it lets go of mu while it copies. */
static void merge(wl_job *jb)
{
    if (jb->merging)
        return; /* the worker merging sees the new log before it stops */
    jb->merging = 1;
    while (jb->applied < jb->n_p && jb->log[jb->applied].done) {
        wl_log *l = &jb->log[jb->applied++];
        pthread_mutex_unlock(&jb->mu);
        apply(jb, l);
        pthread_mutex_lock(&jb->mu);
    }
    jb->merging = 0;
}

static void *sample_worker(void *arg)
{
    wl_job *jb = arg;
    wl_cursor cu;
    memset(&cu, 0, sizeof cu);
    int rc = FT_OK;
    if (jb->phase == 2) {
        cu.toks = malloc(jb->max_len * sizeof *cu.toks);
        cu.ch = malloc((jb->max_len + 1) * sizeof *cu.ch);
        cu.nx = malloc((jb->max_len + 1) * sizeof *cu.nx);
        if (!cu.toks || !cu.ch || !cu.nx)
            rc = FT_ENOMEM;
    }
    for (;;) {
        pthread_mutex_lock(&jb->mu);
        if (rc != FT_OK && jb->rc == FT_OK)
            jb->rc = rc;
        size_t i = jb->rc == FT_OK ? jb->next++ : jb->n_items;
        pthread_mutex_unlock(&jb->mu);
        if (i >= jb->n_items)
            break;
        if (jb->phase == 1) {
            rc = count_unit(jb, &jb->u[i]);
            continue;
        }
        const wl_unit *u0 = &jb->u[jb->piece[i]];
        cu.log = &jb->log[i];
        cu.rc = FT_OK;
        cu.rng = jb->base;
        ft_wl_rng_jump(&cu.rng, u0->draws0);
        cu.j = u0->j0;
        memcpy(cu.s, u0->s0, sizeof cu.s);
        for (size_t k = jb->piece[i]; k < jb->piece[i + 1] && rc == FT_OK; k++)
            if ((rc = sample_unit(jb, &cu, &jb->u[k])) == FT_OK)
                rc = cu.rc;
        pthread_mutex_lock(&jb->mu);
        jb->log[i].done = 1;
        merge(jb);
        pthread_mutex_unlock(&jb->mu);
    }
    free(cu.toks);
    free(cu.ch);
    free(cu.nx);
    return NULL;
}

static int run_phase(wl_job *jb, int phase, int threads)
{
    jb->phase = phase;
    jb->next = 0;
    jb->n_items = phase == 1 ? jb->n_u : jb->n_p;
    if ((size_t)threads > jb->n_items)
        threads = (int)jb->n_items;
    pthread_t th[256];
    int started = 0;
    for (int i = 1; i < threads && i < 256; i++) {
        if (pthread_create(&th[started], NULL, sample_worker, jb) != 0)
            break; /* fewer threads: the output is the same */
        started++;
    }
    sample_worker(jb);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    return jb->rc;
}

/* add_unit appends a unit, growing the array. */
static int add_unit(wl_unit **u, size_t *n, size_t *cap, const wl_unit *x)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 256;
        wl_unit *p = realloc(*u, c * sizeof *p);
        if (p == NULL)
            return FT_ENOMEM;
        *u = p;
        *cap = c;
    }
    (*u)[(*n)++] = *x;
    return FT_OK;
}

/* make_units cuts the library into units of about w first- and
 * second-level nodes each. */
static int make_units(ft_wl_reqs *g, wl_unit **out, size_t *n_out)
{
    uint64_t total = 0;
    int rc = FT_OK;
    for (size_t s = 0; s < g->n_ix && rc == FT_OK; s++)
        for (uint64_t i = 0; i < g->root[s].count && rc == FT_OK; i++) {
            ft_node_children ch;
            rc = ft_index_children(&ch, g->ix[s], g->root[s].first + i);
            total += 1 + ch.count;
        }
    if (rc)
        return rc;
    /* Units are small (counting them costs little per unit); the walk
     * takes them in pieces of about equal key counts (sample_library). */
    uint64_t w = total / 16384 > 256 ? total / 16384 : 256;
    wl_unit *u = NULL, cur;
    size_t n = 0, cap = 0;
    for (size_t s = 0; s < g->n_ix && rc == FT_OK; s++) {
        const ft_node_children *r = &g->root[s];
        uint64_t acc = 0;
        memset(&cur, 0, sizeof cur);
        for (uint64_t i = 0; i < r->count && rc == FT_OK; i++) {
            uint64_t node = r->first + i;
            ft_node_children ch;
            if ((rc = ft_index_children(&ch, g->ix[s], node)) != FT_OK)
                break;
            if (1 + ch.count <= w) {
                if (acc == 0) {
                    memset(&cur, 0, sizeof cur);
                    cur.shard = (uint32_t)s;
                    cur.depth = 1;
                    cur.a = node;
                }
                cur.b = node + 1;
                acc += 1 + ch.count;
                if (acc >= w) {
                    rc = add_unit(&u, &n, &cap, &cur);
                    acc = 0;
                }
                continue;
            }
            if (acc > 0) {
                if ((rc = add_unit(&u, &n, &cap, &cur)) != FT_OK)
                    break;
                acc = 0;
            }
            /* A big first-level subtree: its children in runs of w. */
            for (uint64_t k = 0; k < ch.count && rc == FT_OK; k += w) {
                memset(&cur, 0, sizeof cur);
                cur.shard = (uint32_t)s;
                cur.depth = 2;
                cur.label1 = ft_index_child_label(g->ix[s], r, i);
                cur.self = k == 0;
                cur.parent = node;
                cur.a = ch.first + k;
                cur.b = ch.first + (ch.count - k < w ? ch.count : k + w);
                rc = add_unit(&u, &n, &cap, &cur);
            }
        }
        if (rc == FT_OK && acc > 0)
            rc = add_unit(&u, &n, &cap, &cur);
    }
    if (rc) {
        free(u);
        return rc;
    }
    *out = u;
    *n_out = n;
    return FT_OK;
}

/* over counts the draws of a reservoir of cap slots over items start ..
 * start + n - 1: one per item past the first cap. */
static uint64_t over(uint64_t start, uint64_t n, uint64_t cap)
{
    uint64_t lo = start > cap ? start : cap;
    return start + n > lo ? start + n - lo : 0;
}

static int sample_library(ft_wl_reqs *g, char *errbuf, size_t errlen)
{
    wl_pool *p = g->pool;
    uint32_t T = g->o.T;
    wl_job *jb = calloc(1, sizeof *jb);
    if (jb == NULL)
        return FT_ENOMEM;
    jb->g = g;
    pthread_mutex_init(&jb->mu, NULL);
    /* No key is longer than the format allows (ft_index_info's max_depth
     * would say less, but computing it walks the whole index). */
    jb->max_len = FT_MAX_KEY_LEN_LIMIT;
    int threads = g->o.threads > 0 ? g->o.threads : wl_cores();
    int rc = make_units(g, &jb->u, &jb->n_u);
    if (rc == FT_OK)
        rc = run_phase(jb, 1, threads);
    uint64_t j = 0, s[FT_MAX_T], draws = 0;
    memset(s, 0, sizeof s);
    for (size_t i = 0; i < jb->n_u && rc == FT_OK; i++) {
        wl_unit *u = &jb->u[i];
        u->j0 = j;
        memcpy(u->s0, s, sizeof s);
        u->draws0 = draws;
        draws += over(j, u->keys, g->o.sample);
        j += u->keys;
        for (uint32_t t = 0; t < T; t++) {
            draws += over(s[t], u->deep[t], WL_MARG);
            s[t] += u->deep[t];
        }
    }
    if (rc == FT_OK && j == 0)
        rc = FT_EINVAL;
    /* Pieces: runs of consecutive units of about j / 2048 keys, so the
     * walkers share the keys evenly and a piece's stream is jumped once. */
    if (rc == FT_OK) {
        jb->piece = malloc((jb->n_u + 1) * sizeof *jb->piece);
        rc = jb->piece ? FT_OK : FT_ENOMEM;
    }
    if (rc == FT_OK) {
        uint64_t want = j / 2048 > 4096 ? j / 2048 : 4096, acc = 0;
        jb->n_p = 0;
        for (size_t i = 0; i < jb->n_u; i++) {
            if (acc == 0)
                jb->piece[jb->n_p++] = i;
            acc += jb->u[i].keys;
            if (acc >= want)
                acc = 0;
        }
        jb->piece[jb->n_p] = jb->n_u;
        jb->log = calloc(jb->n_p, sizeof *jb->log);
        rc = jb->log ? FT_OK : FT_ENOMEM;
    }
    if (rc == FT_OK) {
        ft_wl_rng_seed(&jb->base, ft_wl_mix(g->o.seed, 0x73616d70ull));
        rc = run_phase(jb, 2, threads);
    }
    if (rc == FT_OK) {
        p->n_sample = j < g->o.sample ? j : g->o.sample;
        for (uint32_t t = 0; t < T; t++)
            p->n_marg[t] = s[t] < WL_MARG ? s[t] : WL_MARG;
    }
    for (size_t i = 0; jb->log && i < jb->n_p; i++) {
        free(jb->log[i].k); /* left by a failed run */
        free(jb->log[i].m);
    }
    free(jb->log);
    free(jb->piece);
    free(jb->u);
    pthread_mutex_destroy(&jb->mu);
    free(jb);
    if (rc == FT_EINVAL)
        wl_errf(errbuf, errlen, "the index holds no keys to build requests on");
    else if (rc)
        wl_errf(errbuf, errlen, "sampling the index: %s", ft_strerror(rc));
    return rc;
}

static void pool_unref(wl_pool *p)
{
    if (p == NULL || --p->refs > 0)
        return;
    free(p->sample);
    for (uint32_t t = 0; t < FT_MAX_T; t++)
        free(p->marg[t]);
    free(p);
}

void ft_wl_reqs_close(ft_wl_reqs *g)
{
    if (g == NULL)
        return;
    pool_unref(g->pool);
    free(g->ix);
    free(g->root);
    free(g->root_off);
    for (uint32_t s = 0; s < WL_SLOTS; s++) {
        free(g->tok[s]);
        free(g->logp[s]);
    }
    free(g->set);
    free(g->stamp);
    free(g->head);
    free(g->lp);
    free(g);
}

/* reqs_new makes a source over shards ix (its options checked) without a
 * pool. */
static int reqs_new(ft_wl_reqs **out, const ft_index *const *ix, size_t n_ix,
                    const ft_wl_req_opts *o, char *errbuf, size_t errlen)
{
    WL_FAIL_IF(o->T < 1 || o->T > FT_MAX_T, FT_EINVAL,
                       "--T: must be 1..%u", FT_MAX_T);
    WL_FAIL_IF(o->beam < 1 || o->beam > FT_MAX_BEAM, FT_EINVAL,
                       "--beam: must be 1..%u", FT_MAX_BEAM);
    uint32_t K = o->K ? o->K : o->beam;
    WL_FAIL_IF(K < 1 || K > FT_MAX_K, FT_EINVAL,
                       "--K: must be 1..%u", FT_MAX_K);
    WL_FAIL_IF(o->sample < 1, FT_EINVAL, "sample: must be >= 1");
    WL_FAIL_IF(n_ix < 1, FT_EINVAL, "the library has no shards");
    ft_wl_reqs *g = calloc(1, sizeof *g);
    if (g == NULL)
        return FT_ENOMEM;
    g->o = *o;
    g->o.K = K;
    if (!o->head_set)
        g->o.head = K / 10 ? K / 10 : 1;
    if (g->o.head > K)
        g->o.head = K;
    g->set_cap = 16;
    while (g->set_cap < 2 * K)
        g->set_cap *= 2;
    g->n_ix = n_ix;
    g->ix = calloc(n_ix, sizeof *g->ix);
    g->root = calloc(n_ix, sizeof *g->root);
    g->root_off = calloc(n_ix + 1, sizeof *g->root_off);
    g->set = calloc(g->set_cap, sizeof *g->set);
    g->stamp = calloc(g->set_cap, sizeof *g->stamp);
    g->head = calloc(K, sizeof *g->head);
    g->lp = calloc(K, sizeof *g->lp);
    int rc = !g->ix || !g->root || !g->root_off || !g->set || !g->stamp ||
             !g->head || !g->lp ? FT_ENOMEM : FT_OK;
    for (size_t s = 0; s < n_ix && rc == FT_OK; s++) {
        g->ix[s] = ix[s];
        rc = ft_index_children(&g->root[s], ix[s], FT_NODE_ROOT);
        g->root_off[s + 1] = g->root_off[s] + g->root[s].count;
    }
    if (rc) {
        ft_wl_reqs_close(g);
        wl_errf(errbuf, errlen, "%s", rc == FT_ENOMEM ? "out of memory" : ft_strerror(rc));
        return rc;
    }
    *out = g;
    return FT_OK;
}

static int reqs_open(ft_wl_reqs **out, const ft_index *const *ix, size_t n_ix,
                     const ft_wl_req_opts *o, char *errbuf, size_t errlen)
{
    ft_wl_reqs *g;
    int rc = reqs_new(&g, ix, n_ix, o, errbuf, errlen);
    if (rc)
        return rc;
    wl_pool *p = calloc(1, sizeof *p);
    g->pool = p;
    if (p != NULL) {
        p->refs = 1;
        p->sample = calloc(o->sample, sizeof *p->sample);
    }
    int bad = p == NULL || p->sample == NULL;
    for (uint32_t t = 0; t < o->T && !bad; t++)
        bad = (p->marg[t] = malloc(WL_MARG * sizeof(uint32_t))) == NULL;
    if (bad) {
        ft_wl_reqs_close(g);
        wl_errf(errbuf, errlen, "out of memory");
        return FT_ENOMEM;
    }
    if ((rc = sample_library(g, errbuf, errlen)) != FT_OK) {
        ft_wl_reqs_close(g);
        return rc;
    }
    *out = g;
    return FT_OK;
}

int ft_wl_reqs_open(ft_wl_reqs **out, const ft_index *idx,
                    const ft_wl_req_opts *o, char *errbuf, size_t errlen)
{
    return reqs_open(out, &idx, 1, o, errbuf, errlen);
}

int ft_wl_reqs_open_library(ft_wl_reqs **out, const ft_library *lib,
                            const ft_wl_req_opts *o, char *errbuf,
                            size_t errlen)
{
    size_t n = ft_library_shards(lib);
    const ft_index **ix = calloc(n ? n : 1, sizeof *ix);
    if (ix == NULL)
        return FT_ENOMEM;
    for (size_t s = 0; s < n; s++)
        ix[s] = ft_library_shard(lib, s);
    int rc = reqs_open(out, ix, n, o, errbuf, errlen);
    free(ix);
    return rc;
}

int ft_wl_reqs_derive(ft_wl_reqs **out, const ft_wl_reqs *src,
                      const ft_wl_req_opts *o, char *errbuf, size_t errlen)
{
    WL_FAIL_IF(o->seed != src->o.seed || o->T != src->o.T ||
                   o->sample != src->o.sample,
               FT_EINVAL, "derived requests must keep the seed, T and sample "
                          "of their source");
    ft_wl_reqs *g;
    int rc = reqs_new(&g, src->ix, src->n_ix, o, errbuf, errlen);
    if (rc)
        return rc;
    g->pool = src->pool;
    g->pool->refs++;
    *out = g;
    return FT_OK;
}

/* set_add inserts t into the current position's token set; 0 when it was
 * already there. */
static int set_add(ft_wl_reqs *g, uint32_t t)
{
    uint32_t m = g->set_cap - 1;
    uint32_t h = (uint32_t)ft_wl_mix(t, 1) & m;
    while (g->stamp[h] == g->cur_stamp) {
        if (g->set[h] == t)
            return 0;
        h = (h + 1) & m;
    }
    g->stamp[h] = g->cur_stamp;
    g->set[h] = t;
    return 1;
}

static void new_set(ft_wl_reqs *g)
{
    if (++g->cur_stamp == 0) {
        memset(g->stamp, 0, g->set_cap * sizeof *g->stamp);
        g->cur_stamp = 1;
    }
}

static int cmp_desc_f32(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* req_defaults fills docs/specification.md section 3's defaults (the library's
 * ft_request_init may not be linked into every tool that generates). */
static void req_defaults(ft_request *req)
{
    memset(req, 0, sizeof *req);
    req->beam = FT_DEFAULT_BEAM;
    req->theta_tok = -INFINITY;
    req->theta_sent = -INFINITY;
    req->alpha = 1.0;
}

/* root_locate maps a library-wide root child number to its shard and
 * its number there (c < root_off[n_ix]). */
static void root_locate(const ft_wl_reqs *g, uint64_t c, size_t *sh,
                        uint64_t *local)
{
    size_t lo = 0, hi = g->n_ix; /* root_off[lo] <= c < root_off[hi] */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (g->root_off[mid] <= c)
            lo = mid;
        else
            hi = mid;
    }
    *sh = lo;
    *local = c - g->root_off[lo];
}

/* root_find finds the root child labelled tok in whichever shard has it. */
static int root_find(const ft_wl_reqs *g, uint32_t tok, size_t *sh,
                     uint64_t *c)
{
    for (size_t s = 0; s < g->n_ix; s++)
        if (g->root[s].count &&
            ft_index_child_find(c, g->ix[s], &g->root[s], tok) == FT_OK) {
            *sh = s;
            return FT_OK;
        }
    return FT_ENOTFOUND;
}

int ft_wl_reqs_make(ft_wl_reqs *g, uint64_t i, unsigned slot, ft_request *req)
{
    if (slot >= WL_SLOTS)
        return FT_EINVAL;
    uint32_t T = g->o.T, K = g->o.K, r = g->o.head;
    if (g->tok[slot] == NULL) {
        g->tok[slot] = malloc((size_t)T * K * sizeof(uint32_t));
        g->logp[slot] = malloc((size_t)T * K * sizeof(float));
        if (!g->tok[slot] || !g->logp[slot])
            return FT_ENOMEM;
    }
    uint32_t *tok = g->tok[slot];
    float *logp = g->logp[slot];
    ft_wl_rng rng;
    ft_wl_rng_seed(&rng, ft_wl_mix(g->o.seed, i + 1));

    /* The coherent path: a library key, extended along random children
     * (it may stop early at a leaf).  The root's children are those of
     * every shard, in token order, as in the unsharded index. */
    const wl_pool *p = g->pool;
    const wl_key *key = &p->sample[ft_wl_next(&rng) % p->n_sample];
    uint32_t path[FT_MAX_T];
    uint64_t node[FT_MAX_T + 1]; /* node[t]: the path's node at depth t */
    ft_node_children kids[FT_MAX_T];  /* kids[t]: node[t]'s children */
    const ft_index *idx = g->ix[0];
    uint32_t plen = 0;
    node[0] = FT_NODE_ROOT;
    while (plen < T) {
        ft_node_children *cr = &kids[plen];
        uint64_t c;
        if (plen == 0) {
            uint64_t all = g->root_off[g->n_ix];
            if (all == 0)
                break;
            size_t sh;
            if (key->len > 0) {
                if (root_find(g, key->tok[0], &sh, &c) != FT_OK)
                    break; /* cannot happen for a key of this library */
            } else {
                root_locate(g, ft_wl_next(&rng) % all, &sh, &c);
            }
            idx = g->ix[sh];
            *cr = g->root[sh];
        } else {
            if (ft_index_children(cr, idx, node[plen]) != FT_OK ||
                cr->count == 0)
                break;
            if (plen < key->len) {
                if (ft_index_child_find(&c, idx, cr, key->tok[plen]) != FT_OK)
                    break; /* cannot happen for a key of this index */
            } else {
                c = ft_wl_next(&rng) % cr->count;
            }
        }
        path[plen] = ft_index_child_label(idx, cr, c);
        node[++plen] = cr->first + c;
    }

    for (uint32_t t = 0; t < T; t++) {
        new_set(g);
        uint32_t nh = 0;
        if (t < plen) {
            g->head[nh++] = path[t];
            set_add(g, path[t]);
            /* Siblings of the path's token: other keys under the same
             * prefix, as a model that has the query's gist proposes. */
            const ft_node_children *cr = &kids[t];
            uint64_t count = t == 0 ? g->root_off[g->n_ix] : cr->count;
            uint32_t want = r < count ? r : (uint32_t)count;
            for (uint32_t tries = 0; nh < want && tries < 4 * r + 16; tries++) {
                uint64_t c = ft_wl_next(&rng) % count;
                uint32_t lab;
                if (t == 0) {
                    size_t sh;
                    root_locate(g, c, &sh, &c);
                    lab = ft_index_child_label(g->ix[sh], &g->root[sh], c);
                } else {
                    lab = ft_index_child_label(idx, cr, c);
                }
                if (set_add(g, lab))
                    g->head[nh++] = lab;
            }
        }
        /* The rest of the head, then the tail, from the marginals. */
        uint64_t nm = p->n_marg[t];
        uint32_t filled = nh;
        uint32_t *row = tok + (size_t)t * K;
        /* Head tokens take random ranks among the first r. */
        uint32_t hr = r > nh ? r : nh;
        for (uint32_t j = 0; j < K; j++)
            row[j] = UINT32_MAX;
        for (uint32_t j = 0; j < nh; j++) {
            uint32_t pos;
            do
                pos = (uint32_t)(ft_wl_next(&rng) % hr);
            while (row[pos] != UINT32_MAX);
            row[pos] = g->head[j];
        }
        uint32_t tries = 0;
        for (uint32_t j = 0; j < K; j++) {
            if (row[j] != UINT32_MAX)
                continue;
            uint32_t cand;
            for (;;) {
                if (nm > 0 && tries < 64u * K)
                    cand = p->marg[t][ft_wl_next(&rng) % nm];
                else
                    cand = ft_wl_zipf_token(&rng, FT_WL_VOCAB);
                tries++;
                if (set_add(g, cand))
                    break;
            }
            row[j] = cand;
            filled++;
        }
        (void)filled;
        /* Log-probs: one model-like decaying curve per position. */
        double b = 0.05 + 0.95 * ft_wl_u01(&rng);
        double c = 0.8 + 0.7 * ft_wl_u01(&rng);
        for (uint32_t k = 0; k < K; k++)
            g->lp[k] = (float)(-(b + c * log(1.0 + k)) + 0.1 * normal(&rng));
        qsort(g->lp, K, sizeof *g->lp, cmp_desc_f32);
        memcpy(logp + (size_t)t * K, g->lp, K * sizeof *g->lp);
    }
    req_defaults(req);
    req->T = T;
    req->K = K;
    req->tokens = tok;
    req->logp = logp;
    req->beam = g->o.beam;
    req->results = g->o.results ? g->o.results : g->o.beam;
    if (g->o.has_theta_tok)
        req->theta_tok = g->o.theta_tok;
    if (g->o.has_theta_sent)
        req->theta_sent = g->o.theta_sent;
    if (g->o.has_alpha)
        req->alpha = g->o.alpha;
    return FT_OK;
}

/* req_line appends request i as one JSON line to out. */
static int req_line(ft_wl_reqs *g, uint64_t i, wl_buf *out)
{
    ft_request req;
    int rc = ft_wl_reqs_make(g, i, 0, &req);
    if (rc)
        return rc;
    json_t *o = json_object(), *toks = json_array(), *lps = json_array();
    if (o == NULL || toks == NULL || lps == NULL) {
        json_decref(o);
        json_decref(toks);
        json_decref(lps);
        return FT_ENOMEM;
    }
    for (uint32_t t = 0; t < req.T; t++) {
        json_t *a = json_array(), *b = json_array();
        for (uint32_t k = 0; k < req.K; k++) {
            json_array_append_new(a, json_integer(req.tokens[t * req.K + k]));
            json_array_append_new(b, json_real(req.logp[t * req.K + k]));
        }
        json_array_append_new(toks, a);
        json_array_append_new(lps, b);
    }
    json_object_set_new(o, "id", json_integer((json_int_t)i));
    json_object_set_new(o, "tokens", toks);
    json_object_set_new(o, "logp", lps);
    json_object_set_new(o, "beam", json_integer(req.beam));
    if (g->o.results)
        json_object_set_new(o, "results", json_integer(req.results));
    if (g->o.has_theta_tok)
        json_object_set_new(o, "theta_tok", json_real(req.theta_tok));
    if (g->o.has_theta_sent)
        json_object_set_new(o, "theta_sent", json_real(req.theta_sent));
    if (g->o.has_alpha)
        json_object_set_new(o, "alpha", json_real(req.alpha));
    /* %.9g (JSON_REAL_PRECISION(9)) prints every f32 so that it parses
     * back, through binary64, to the same binary32; alpha is binary64
     * and gets 17 digits from a separate dump below if it is set. */
    size_t flags = JSON_COMPACT | JSON_PRESERVE_ORDER;
    char *line = json_dumps(o, flags | (g->o.has_alpha ? 0 : JSON_REAL_PRECISION(9)));
    json_decref(o);
    if (line == NULL)
        return FT_ENOMEM;
    size_t n = strlen(line);
    rc = buf_reserve(out, n + 1);
    if (rc == FT_OK) {
        memcpy(out->p + out->len, line, n);
        out->p[out->len + n] = '\n';
        out->len += n + 1;
    }
    free(line);
    return rc;
}

/* A writer's share of one round: requests lo .. hi-1 into out. */
typedef struct wl_wpart {
    ft_wl_reqs *g; /* the worker's own source (its own scratch) */
    uint64_t lo, hi;
    wl_buf out;
    int rc;
} wl_wpart;

static void *write_worker(void *arg)
{
    wl_wpart *w = arg;
    w->out.len = 0;
    for (uint64_t i = w->lo; i < w->hi && w->rc == FT_OK; i++)
        w->rc = req_line(w->g, i, &w->out);
    return NULL;
}

/* WL_WCHUNK is the requests a writer formats per round: enough to pay
 * for a thread start, few enough to keep the buffers small. */
#define WL_WCHUNK 32u

int ft_wl_reqs_write(ft_wl_reqs *g, FILE *f, char *errbuf, size_t errlen)
{
    /* Requests are independent: rounds of them are formatted by every
     * thread (each with a source of its own over the shared sample) and
     * written in order, so the file is the same for any thread count. */
    int threads = g->o.threads > 0 ? g->o.threads : wl_cores();
    if ((uint64_t)threads > (g->o.n + WL_WCHUNK - 1) / WL_WCHUNK)
        threads = (int)((g->o.n + WL_WCHUNK - 1) / WL_WCHUNK);
    if (threads > 256)
        threads = 256;
    if (threads < 1)
        threads = 1;
    wl_wpart *w = calloc((size_t)threads, sizeof *w);
    pthread_t *th = calloc((size_t)threads, sizeof *th);
    int rc = w && th ? FT_OK : FT_ENOMEM;
    for (int t = 0; t < threads && rc == FT_OK; t++) {
        if (t == 0)
            w[t].g = g;
        else
            rc = ft_wl_reqs_derive(&w[t].g, g, &g->o, errbuf, errlen);
    }
    uint64_t fail_at = 0;
    for (uint64_t base = 0; base < g->o.n && rc == FT_OK;
         base += (uint64_t)threads * WL_WCHUNK) {
        int started = 0;
        for (int t = 0; t < threads; t++) {
            uint64_t lo = base + (uint64_t)t * WL_WCHUNK;
            w[t].lo = lo < g->o.n ? lo : g->o.n;
            w[t].hi = lo + WL_WCHUNK < g->o.n ? lo + WL_WCHUNK : g->o.n;
            w[t].rc = FT_OK;
        }
        for (int t = 1; t < threads; t++) {
            if (pthread_create(&th[t], NULL, write_worker, &w[t]) != 0)
                break; /* the rest run on this thread below */
            started = t;
        }
        write_worker(&w[0]);
        for (int t = 1; t <= started; t++)
            pthread_join(th[t], NULL);
        for (int t = started + 1; t < threads; t++)
            write_worker(&w[t]);
        for (int t = 0; t < threads && rc == FT_OK; t++) {
            if (w[t].rc) {
                rc = w[t].rc;
                fail_at = w[t].lo;
                break;
            }
            if (w[t].out.len && fwrite(w[t].out.p, 1, w[t].out.len, f) != w[t].out.len) {
                wl_errf(errbuf, errlen, "writing requests failed");
                rc = FT_EIO;
            }
        }
        if (rc && rc != FT_EIO)
            wl_errf(errbuf, errlen, "request %llu: %s", (unsigned long long)fail_at,
                    ft_strerror(rc));
    }
    for (int t = 0; w && t < threads; t++) {
        if (t > 0)
            ft_wl_reqs_close(w[t].g);
        free(w[t].out.p);
    }
    free(w);
    free(th);
    if (rc == FT_ENOMEM && !(errbuf && errbuf[0]))
        wl_errf(errbuf, errlen, "out of memory");
    return rc;
}
