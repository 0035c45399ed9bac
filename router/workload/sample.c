/*
 * sample.c - request-grid sources (see workload.h and docs/workload.md):
 * the options' defaults, sampling a library once (in parallel, the same
 * reservoirs as one serial pass) and opening, deriving and closing the
 * sources that requests.c draws requests from.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "workload_impl.h"

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
        fti_errf(errbuf, errlen, "the index holds no keys to build requests on");
    else if (rc)
        fti_errf(errbuf, errlen, "sampling the index: %s", ft_strerror(rc));
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
    FT_RETURN_ERROR_IF(o->T < 1 || o->T > FT_MAX_T, FT_EINVAL,
                       "--T: must be 1..%u", FT_MAX_T);
    FT_RETURN_ERROR_IF(o->beam < 1 || o->beam > FT_MAX_BEAM, FT_EINVAL,
                       "--beam: must be 1..%u", FT_MAX_BEAM);
    uint32_t K = o->K ? o->K : o->beam;
    FT_RETURN_ERROR_IF(K < 1 || K > FT_MAX_K, FT_EINVAL,
                       "--K: must be 1..%u", FT_MAX_K);
    FT_RETURN_ERROR_IF(o->sample < 1, FT_EINVAL, "sample: must be >= 1");
    FT_RETURN_ERROR_IF(n_ix < 1, FT_EINVAL, "the library has no shards");
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
        fti_errf(errbuf, errlen, "%s", rc == FT_ENOMEM ? "out of memory" : ft_strerror(rc));
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
        fti_errf(errbuf, errlen, "out of memory");
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
    FT_RETURN_ERROR_IF(o->seed != src->o.seed || o->T != src->o.T ||
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
