/*
 * group.c - the shard group: one engine per shard, driven one decode step
 * at a time (include/flashtrie.h, "Prepared requests and the engine
 * steps").
 *
 * Per step every shard expands its own beams and reports its local top-B
 * keys (SPEC section 4's order with global parent ranks); the exchange
 * puts every shard's list in every shard's receive buffer; every shard
 * then keeps exactly its members of the global top-B.  That is exact: the
 * global top-B is a subset of the union of the local top-Bs, since a key
 * that B keys of its own shard beat is beaten by B keys globally.  At the
 * end every shard reports its local top-n hits (tokens backtraced by the
 * owning shard: a key's ancestors all live in its shard), the group merges
 * them by (score desc, order asc), which is a total order across shards
 * (orders hold global ranks), and attaches the values once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashtrie.h"
#include "rules.h"
#include "search_impl.h"

struct ft_group {
    size_t n;                  /* shards */
    ft_engine **eng;           /* [n] */
    const ft_index **idx;      /* [n] */
    uint64_t *base;            /* [n]: key index of each shard's first key */
    uint32_t max_beam;
    ft_result *part;           /* [n * FT_ENGINE_CHUNK] local hits */
};

ft_engine *ft_group_engine(ft_group *g, size_t s)
{
    return s < g->n ? g->eng[s] : NULL;
}

size_t ft_group_shards(const ft_group *g) { return g->n; }

void ft_group_close(ft_group *g)
{
    if (g == NULL)
        return;
    for (size_t s = 0; s < g->n; s++)
        ft_engine_close(g->eng ? g->eng[s] : NULL);
    if (g->part)
        for (size_t i = 0; i < g->n * FT_ENGINE_CHUNK; i++)
            ft_result_free(&g->part[i]);
    free(g->part);
    free(g->eng);
    free(g->idx);
    free(g->base);
    free(g);
}

int ft_group_open(ft_group **out, const ft_index *const *shards,
                  size_t nshards, const ft_engine_opts *opts, char *errbuf,
                  size_t errlen)
{
    *out = NULL;
    if (nshards == 0 || nshards > 4096) {
        if (errbuf && errlen)
            snprintf(errbuf, errlen, "shards: a group needs 1..4096 shards, "
                                     "got %zu", nshards);
        return FT_EINVAL;
    }
    ft_group *g = calloc(1, sizeof *g);
    if (g == NULL)
        return FT_ENOMEM;
    g->n = nshards;
    g->eng = calloc(nshards, sizeof *g->eng);
    g->idx = calloc(nshards, sizeof *g->idx);
    g->base = calloc(nshards, sizeof *g->base);
    g->part = calloc(nshards * FT_ENGINE_CHUNK, sizeof *g->part);
    if (!g->eng || !g->idx || !g->base || !g->part) {
        ft_group_close(g);
        return FT_ENOMEM;
    }
    ft_engine_opts o;
    if (opts)
        o = *opts;
    else
        ft_engine_opts_init(&o);
    /* The host exchange runs the shards one after another: idle pools
     * would spin on the cores the running one needs. */
    if (nshards > 1 && o.kind == FT_ENGINE_CPU && o.spin_us < 0)
        o.spin_us = 0;
    g->max_beam = o.max_beam;
    uint64_t base = 0;
    for (size_t s = 0; s < nshards; s++) {
        g->idx[s] = shards[s];
        g->base[s] = base;
        base += ft_index_keys(shards[s]);
        char e[256] = "";
        int rc = ft_engine_open(&g->eng[s], shards[s], &o, e, sizeof e);
        if (rc != FT_OK) {
            if (errbuf && errlen)
                snprintf(errbuf, errlen, "shard %zu: %s", s, e);
            ft_group_close(g);
            return rc;
        }
    }
    *out = g;
    return FT_OK;
}

/* exchange_host copies every shard's send list into every shard's recv
 * buffer at the sender's place. */
static int exchange_host(ft_group *g)
{
    for (size_t s = 0; s < g->n; s++) {
        uint64_t *send, *recv;
        size_t len;
        int rc = ft_engine_step_buffers(g->eng[s], &send, &recv, &len);
        if (rc != FT_OK)
            return rc;
        for (size_t d = 0; d < g->n; d++) {
            uint64_t *dsend, *drecv;
            size_t dlen;
            rc = ft_engine_step_buffers(g->eng[d], &dsend, &drecv, &dlen);
            if (rc != FT_OK)
                return rc;
            if (dlen != len)
                return FT_EINTERNAL;
            memcpy(drecv + s * len, send, len * sizeof *send);
        }
    }
    return FT_OK;
}

/* part_ready sizes shard s's local result for request i. */
static int part_ready(ft_group *g, size_t s, size_t i, const ft_prepared *p)
{
    ft_result *r = &g->part[s * FT_ENGINE_CHUNK + i];
    if (r->cap_hits >= p->results && r->cap_tokens / FT_MAX_T >= p->results)
        return FT_OK;
    ft_result_free(r);
    return ft_result_alloc(r, p->results, FT_MAX_T);
}

/* merge_parts merges the shards' local hits of request i into res: the
 * first n by (score desc, order asc), key indexes made global. */
static int merge_parts(ft_group *g, size_t i, const ft_prepared *p,
                       ft_result *res)
{
    size_t pos[4096];
    size_t *at = g->n <= 4096 ? pos : NULL;
    if (at == NULL)
        return FT_EINTERNAL;
    for (size_t s = 0; s < g->n; s++) {
        const ft_result *r = &g->part[s * FT_ENGINE_CHUNK + i];
        if (r->status != FT_OK) {
            res->n = 0;
            res->status = r->status;
            snprintf(res->error, sizeof res->error, "%s", r->error);
            return r->status;
        }
        at[s] = 0;
    }
    res->n = 0;
    res->status = FT_OK;
    res->error[0] = 0;
    uint32_t off = 0;
    while (res->n < p->results) {
        size_t best = g->n;
        uint64_t bk = 0;
        uint32_t bo = 0;
        for (size_t s = 0; s < g->n; s++) {
            const ft_result *r = &g->part[s * FT_ENGINE_CHUNK + i];
            if (at[s] >= r->n)
                continue;
            const ft_hit *h = &r->hits[at[s]];
            uint64_t k = ft_score_key(h->score);
            if (best == g->n || ft_hit_before(k, h->order, bk, bo)) {
                best = s;
                bk = k;
                bo = h->order;
            }
        }
        if (best == g->n)
            break;
        const ft_result *r = &g->part[best * FT_ENGINE_CHUNK + i];
        const ft_hit *h = &r->hits[at[best]++];
        if (res->n >= res->cap_hits || off + h->len > res->cap_tokens) {
            res->n = 0;
            res->status = FT_ELIMIT;
            snprintf(res->error, sizeof res->error,
                     "results: do not fit the result buffer");
            return FT_ELIMIT;
        }
        ft_hit *o = &res->hits[res->n++];
        *o = *h;
        o->tok_off = off;
        o->key_index = h->key_index + g->base[best];
        memcpy(res->tokens + off, r->tokens + h->tok_off,
               h->len * sizeof *res->tokens);
        off += h->len;
    }
    return fti_attach_values(res, g->idx, g->base, g->n);
}

/* run_chunk runs prepared requests reqs[0..m) over the group. */
static int run_chunk(ft_group *g, const ft_prepared *const *reqs,
                     ft_result *const *res, size_t m)
{
    uint32_t tmax = 0;
    for (size_t i = 0; i < m; i++)
        tmax = reqs[i]->T > tmax ? reqs[i]->T : tmax;
    ft_result *part[FT_ENGINE_CHUNK];
    int rc = FT_OK;
    for (size_t s = 0; s < g->n && rc == FT_OK; s++) {
        for (size_t i = 0; i < m && rc == FT_OK; i++)
            rc = part_ready(g, s, i, reqs[i]);
        if (rc == FT_OK)
            rc = ft_engine_step_begin(g->eng[s], reqs, m, (uint32_t)s,
                                      (uint32_t)g->n);
    }
    for (uint32_t t = 0; t < tmax && rc == FT_OK; t++) {
        for (size_t s = 0; s < g->n && rc == FT_OK; s++)
            rc = ft_engine_step_expand(g->eng[s], t);
        if (rc == FT_OK)
            rc = exchange_host(g);
        for (size_t s = 0; s < g->n && rc == FT_OK; s++)
            rc = ft_engine_step_keep(g->eng[s], t);
    }
    for (size_t s = 0; s < g->n && rc == FT_OK; s++) {
        for (size_t i = 0; i < m; i++)
            part[i] = &g->part[s * FT_ENGINE_CHUNK + i];
        rc = ft_engine_step_finish(g->eng[s], part);
    }
    if (rc != FT_OK) {
        for (size_t i = 0; i < m; i++) {
            res[i]->n = 0;
            res[i]->status = rc;
            snprintf(res[i]->error, sizeof res[i]->error,
                     "engine: shard group failed: %s", ft_strerror(rc));
        }
        return rc == FT_ENOMEM ? FT_OK : rc;
    }
    for (size_t i = 0; i < m; i++)
        merge_parts(g, i, reqs[i], res[i]);
    return FT_OK;
}

int ft_group_search_batch(ft_group *g, const ft_request *reqs, size_t n,
                          ft_result *res)
{
    const ft_prepared *vp[FT_ENGINE_CHUNK];
    ft_result *vres[FT_ENGINE_CHUNK];
    for (size_t s = 0; s < g->n; s++)
        if (ft_engine_failed(g->eng[s]))
            return FT_ESTATE;
    ft_prep **pool = fti_prep_pool();
    if (pool == NULL)
        return FT_ENOMEM;
    size_t i = 0;
    while (i < n) {
        size_t m = fti_admit_chunk(pool, reqs, n, &i, g->max_beam, res, vp,
                                   vres);
        if (m == 0)
            continue;
        int rc = run_chunk(g, vp, vres, m);
        if (rc != FT_OK)
            return rc;
    }
    return FT_OK;
}
