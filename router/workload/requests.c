/*
 * requests.c - making NAR-style requests from a sampled source (see
 * workload.h and docs/workload.md): request i alone from its own stream,
 * and the docs/specification.md section 7 JSON Lines of n requests formatted in parallel.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "workload_impl.h"

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
            g->lp[k] = (float)(-(b + c * log(1.0 + k)) + 0.1 * wl_normal(&rng));
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
    rc = wl_buf_reserve(out, n + 1);
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
                fti_errf(errbuf, errlen, "writing requests failed");
                rc = FT_EIO;
            }
        }
        if (rc && rc != FT_EIO)
            fti_errf(errbuf, errlen, "request %llu: %s", (unsigned long long)fail_at,
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
        fti_errf(errbuf, errlen, "out of memory");
    return rc;
}
