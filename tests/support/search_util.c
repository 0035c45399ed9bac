/*
 * search_util.c - the search test helpers of search_util.h: random
 * libraries, the pointer trie and the reference search of docs/specification.md
 * section 4 (compiled with -ffp-contract=off, like the engines).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "search_util.h"

int su_key_cmp(const void *a, const void *b)
{
    const su_key *x = a, *y = b;
    int c = ft_test_toks_cmp(x->t, x->len, y->t, y->len);
    if (c)
        return c;
    return x->value < y->value ? -1 : x->value > y->value;
}

size_t su_build(su_key *keys, size_t n, const char *path, ft_index **idx)
{
    /* qsort and memcpy want non-NULL pointers even for length 0. */
    if (n > 1)
        qsort(keys, n, sizeof *keys, su_key_cmp);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m > 0 && keys[m - 1].len == keys[i].len &&
            memcmp(keys[m - 1].t, keys[i].t, keys[i].len * 4) == 0)
            continue;
        keys[m++] = keys[i];
    }
    ft_build_opts o;
    ft_build_opts_init(&o);
    o.max_key_len = SU_MAX_LEN;
    o.threads = 2;
    char err[256] = "";
    ft_builder *b;
    FT_PASS(ft_builder_create(&b, &o, err, sizeof err));
    for (size_t i = 0; i < m; i++)
        FT_PASS(ft_builder_add(b, keys[i].t, keys[i].len, keys[i].value));
    FT_PASS(ft_builder_finish(b, NULL, path, err, sizeof err));
    ft_builder_destroy(b);
    FT_PASS(ft_index_open(idx, path, 0, err, sizeof err));
    return m;
}

su_node *su_node_new(void)
{
    su_node *u = calloc(1, sizeof *u);
    FT_CHECK(u != NULL);
    return u;
}

su_node *su_child(const su_node *u, uint32_t tok)
{
    uint32_t lo = 0, hi = u->n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (u->labels[mid] < tok)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < u->n && u->labels[lo] == tok ? u->kids[lo] : NULL;
}

void su_insert(su_node *root, const su_key *k)
{
    su_node *u = root;
    for (uint32_t i = 0; i < k->len; i++) {
        su_node *c = su_child(u, k->t[i]);
        if (c == NULL) {
            if (u->n == u->cap) {
                u->cap = u->cap ? 2 * u->cap : 4;
                u->labels = realloc(u->labels, u->cap * sizeof *u->labels);
                u->kids = realloc(u->kids, u->cap * sizeof *u->kids);
            }
            uint32_t p = u->n;
            while (p > 0 && u->labels[p - 1] > k->t[i]) {
                u->labels[p] = u->labels[p - 1];
                u->kids[p] = u->kids[p - 1];
                p--;
            }
            c = su_node_new();
            u->labels[p] = k->t[i];
            u->kids[p] = c;
            u->n++;
        }
        u = c;
    }
    if (!u->terminal) { /* the first occurrence keeps its value */
        u->terminal = 1;
        u->value = k->value;
    }
}

void su_free(su_node *u)
{
    for (uint32_t i = 0; i < u->n; i++)
        su_free(u->kids[i]);
    free(u->labels);
    free(u->kids);
    free(u);
}

int su_beam_cmp(const void *a, const void *b)
{
    const su_cand *x = *(su_cand *const *)a, *y = *(su_cand *const *)b;
    if (x->sigma != y->sigma)
        return x->sigma > y->sigma ? -1 : 1; /* sigma desc */
    if (x->r != y->r)
        return x->r < y->r ? -1 : 1;
    return x->k < y->k ? -1 : x->k > y->k;
}

int su_sel_cmp(const void *a, const void *b)
{
    const su_cand *x = *(su_cand *const *)a, *y = *(su_cand *const *)b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1; /* score desc */
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    if (x->r != y->r)
        return x->r < y->r ? -1 : 1;
    return x->k < y->k ? -1 : x->k > y->k;
}

int su_prop_cmp(const void *a, const void *b)
{
    const su_prop *x = a, *y = b;
    if (x->logp != y->logp)
        return x->logp > y->logp ? -1 : 1;
    return x->in < y->in ? -1 : x->in > y->in;
}

/* su_fadd is the specification's fp32_add: volatile keeps it one rounded
 * binary32 add. */
static float su_fadd(float a, float b)
{
    volatile float s = a + b;
    return s;
}

uint32_t su_search(const su_node *root, const ft_request *req,
                   su_hit *hits)
{
    uint32_t T = req->T, K = req->K, B = req->beam;
    uint32_t n = req->results ? req->results : req->beam;
    su_prop *props = malloc((size_t)T * K * sizeof *props);
    for (uint32_t t = 0; t < T; t++) {
        for (uint32_t k = 0; k < K; k++) {
            su_prop *p = &props[(size_t)t * K + k];
            p->tok = req->tokens[(size_t)t * K + k];
            p->logp = req->logp[(size_t)t * K + k];
            p->in = k;
        }
        qsort(props + (size_t)t * K, K, sizeof *props, su_prop_cmp);
    }
    double F[FT_MAX_T + 1];
    for (uint32_t d = 0; d <= T; d++)
        F[d] = pow(6.0 / (5.0 + d), req->alpha);
    /* all candidates ever made live in one arena (parents must survive) */
    size_t cap = 1024, used = 0;
    su_cand **arenas = NULL;
    size_t narenas = 0;
    su_cand root_c = {root, 0.0f, 0, 0, 0, 0, 0, NULL, 0};
    su_cand **cur = malloc(sizeof *cur), **next = NULL;
    size_t ncur = 1, nnext = 0, capnext = 0;
    cur[0] = &root_c;
    su_cand **sel = NULL;
    size_t nsel = 0, capsel = 0;
    su_cand *arena = NULL;
    for (uint32_t t = 0; t < T; t++) {
        nnext = 0;
        for (size_t r = 0; r < ncur; r++) {
            const su_cand *s = cur[r];
            for (uint32_t k = 0; k < K; k++) {
                const su_prop *p = &props[(size_t)t * K + k];
                float rho = p->logp;
                if (!(rho > req->theta_tok))
                    continue;
                float sig = su_fadd(s->sigma, rho);
                if (!(sig > req->theta_sent))
                    continue;
                const su_node *u = su_child(s->node, p->tok);
                if (u == NULL)
                    continue;
                if (arena == NULL || used == cap) {
                    arena = malloc(cap * sizeof *arena);
                    arenas = realloc(arenas, (narenas + 1) * sizeof *arenas);
                    arenas[narenas++] = arena;
                    used = 0;
                }
                su_cand *c = &arena[used++];
                c->node = u;
                c->sigma = sig;
                c->len = t + 1;
                c->t = t;
                c->r = (uint32_t)r;
                c->k = k;
                c->tok = p->tok;
                c->parent = s;
                c->score = (double)sig * F[t + 1];
                if (u->terminal) {
                    if (nsel == capsel) {
                        capsel = capsel ? 2 * capsel : 64;
                        sel = realloc(sel, capsel * sizeof *sel);
                    }
                    sel[nsel++] = c;
                }
                if (u->n > 0) {
                    if (nnext == capnext) {
                        capnext = capnext ? 2 * capnext : 64;
                        next = realloc(next, capnext * sizeof *next);
                    }
                    next[nnext++] = c;
                }
            }
        }
        if (nnext > 1)
            qsort(next, nnext, sizeof *next, su_beam_cmp);
        ncur = nnext < B ? nnext : B;
        cur = realloc(cur, (ncur ? ncur : 1) * sizeof *cur);
        if (ncur)
            memcpy(cur, next, ncur * sizeof *cur);
    }
    if (nsel > 1)
        qsort(sel, nsel, sizeof *sel, su_sel_cmp);
    uint32_t m = nsel < n ? (uint32_t)nsel : n;
    for (uint32_t i = 0; i < m; i++) {
        const su_cand *c = sel[i];
        su_hit *h = &hits[i];
        h->len = c->len;
        h->value = c->node->value;
        h->score = c->score;
        h->sigma = c->sigma;
        for (const su_cand *x = c; x->parent; x = x->parent)
            h->toks[x->len - 1] = x->tok;
    }
    for (size_t i = 0; i < narenas; i++)
        free(arenas[i]);
    free(arenas);
    free(cur);
    free(next);
    free(sel);
    free(props);
    return m;
}

int su_same_result(const ft_result *res, const su_hit *hits, uint32_t m,
                   const char *what)
{
    if (res->status != FT_OK) {
        fprintf(stderr, "%s: status %d (%s)\n", what, res->status, res->error);
        return 0;
    }
    if (res->n != m) {
        fprintf(stderr, "%s: %u hits, reference %u\n", what, res->n, m);
        return 0;
    }
    for (uint32_t i = 0; i < m; i++) {
        const ft_hit *h = &res->hits[i];
        uint64_t a, b;
        uint32_t fa, fb;
        memcpy(&a, &h->score, 8);
        memcpy(&b, &hits[i].score, 8);
        memcpy(&fa, &h->sigma, 4);
        memcpy(&fb, &hits[i].sigma, 4);
        if (h->len != hits[i].len || h->value != hits[i].value || a != b ||
            fa != fb ||
            memcmp(res->tokens + h->tok_off, hits[i].toks, h->len * 4) != 0) {
            fprintf(stderr,
                    "%s: hit %u differs: len %u/%u value %llu/%llu score "
                    "%.17g/%.17g sigma %.9g/%.9g\n",
                    what, i, h->len, hits[i].len,
                    (unsigned long long)h->value,
                    (unsigned long long)hits[i].value, h->score,
                    hits[i].score, h->sigma, hits[i].sigma);
            return 0;
        }
    }
    return 1;
}

uint32_t su_rand_tok(uint64_t *s, int vocab, uint32_t V)
{
    uint64_t r = ft_test_rand(s);
    switch (vocab) {
    case 0: return (uint32_t)(r % V);
    case 1: return (uint32_t)(r % (V * 8));
    case 2: return 65536u - 6u + (uint32_t)(r % 12);
    case 4: return (uint32_t)(r % (V * 1000));
    default: return (uint32_t)r;
    }
}

float su_rand_logp(uint64_t *s, int mode)
{
    uint64_t r = ft_test_rand(s);
    switch (mode) {
    case 0: return -(float)(r % 8) * 0.5f;           /* many exact ties */
    case 1: {                                        /* zeros of both signs */
        static const float v[] = {0.0f, -0.0f, -1.0f, -0.5f, 0.25f};
        return v[r % 5];
    }
    case 2: return -(float)(r % 100000) / 1000.0f;   /* rounding matters */
    default: return (float)((double)(int64_t)(r % 2000001) - 1000000.0) /
                    3.0f; /* large, positive and negative */
    }
}

void su_make_request(su_case *c, uint64_t *s, const su_key *keys, size_t m,
                     const su_lib_params *lp, uint32_t V, uint32_t T,
                     uint32_t K, uint32_t B)
{
    ft_request *q = &c->req;
    ft_request_init(q);
    c->tok = malloc((size_t)T * K * sizeof *c->tok);
    c->lp = malloc((size_t)T * K * sizeof *c->lp);
    int lmode = (int)(ft_test_rand(s) % 4);
    uint32_t *pool = malloc((size_t)4 * K * sizeof *pool + 64);
    for (uint32_t t = 0; t < T; t++) {
        /* tokens: labels seen at depth t in the library plus noise,
         * distinct, in random order */
        uint32_t np = 0;
        for (uint32_t i = 0; i < 4 * K; i++) {
            uint64_t r = ft_test_rand(s);
            const su_key *k = m ? &keys[r % m] : NULL;
            if (k && k->len > t && (r >> 40) % 4 != 0)
                pool[np++] = k->t[t];
            else
                pool[np++] = su_rand_tok(s, lp->vocab, V);
        }
        /* dedupe by sorting (shell sort), then shuffle */
        uint32_t nd = 0;
        {
            for (uint32_t gap = np / 2; gap > 0; gap /= 2)
                for (uint32_t i = gap; i < np; i++)
                    for (uint32_t j = i; j >= gap && pool[j - gap] > pool[j];
                         j -= gap) {
                        uint32_t x = pool[j];
                        pool[j] = pool[j - gap];
                        pool[j - gap] = x;
                    }
            for (uint32_t i = 0; i < np; i++)
                if (nd == 0 || pool[nd - 1] != pool[i])
                    pool[nd++] = pool[i];
        }
        for (uint32_t i = nd; i > 1; i--) {
            uint32_t j = (uint32_t)(ft_test_rand(s) % i);
            uint32_t x = pool[i - 1];
            pool[i - 1] = pool[j];
            pool[j] = x;
        }
        for (uint32_t k = 0; k < K; k++) {
            /* a grid needs K distinct tokens: past the pool, count up from a
             * token no library uses */
            c->tok[(size_t)t * K + k] = k < nd ? pool[k] : 0x7fff0000u + k;
            c->lp[(size_t)t * K + k] = su_rand_logp(s, lmode);
        }
        /* sometimes sorted input (the prep's fast path) */
        if (ft_test_rand(s) % 3 == 0) {
            float *row = c->lp + (size_t)t * K;
            for (uint32_t i = 1; i < K; i++)
                for (uint32_t j = i; j > 0 && row[j] > row[j - 1]; j--) {
                    float x = row[j];
                    row[j] = row[j - 1];
                    row[j - 1] = x;
                }
        }
    }
    free(pool);
    q->T = T;
    q->K = K;
    q->tokens = c->tok;
    q->logp = c->lp;
    q->beam = B;
    uint64_t r = ft_test_rand(s);
    switch (r % 4) {
    case 0: q->results = 0; break;
    case 1: q->results = 1 + (uint32_t)((r >> 8) % B); break;
    case 2: q->results = B + (uint32_t)((r >> 8) % (B + 8)); break;
    default: q->results = 1 + (uint32_t)((r >> 8) % 4); break;
    }
    if (q->results > FT_MAX_RESULTS)
        q->results = FT_MAX_RESULTS;
    if (ft_test_rand(s) % 3 == 0)
        q->theta_tok = su_rand_logp(s, lmode);
    if (ft_test_rand(s) % 3 == 0)
        q->theta_sent = su_rand_logp(s, lmode) * (float)(1 + ft_test_rand(s) % 4);
    static const double alphas[] = {0, 0.5, 1, 2.5, 10};
    q->alpha = alphas[ft_test_rand(s) % 5];
}

su_key *su_rand_keys(uint64_t *s, const su_lib_params *lp, uint32_t V)
{
    su_key *keys = calloc(lp->nkeys + 1, sizeof *keys);
    for (size_t i = 0; i < lp->nkeys; i++) {
        su_key *k = &keys[i];
        if (i > 0 && ft_test_rand(s) % 4 == 0) {
            /* a prefix or an extension of an earlier key */
            *k = keys[ft_test_rand(s) % i];
            if (ft_test_rand(s) % 2 && k->len > 1)
                k->len = 1 + (uint32_t)(ft_test_rand(s) % (k->len - 1));
            else if (k->len < lp->maxlen)
                k->t[k->len++] = su_rand_tok(s, lp->vocab, V);
        } else {
            k->len = 1 + (uint32_t)(ft_test_rand(s) % lp->maxlen);
            for (uint32_t j = 0; j < k->len; j++)
                k->t[j] = su_rand_tok(s, lp->vocab, V);
        }
        k->value = i * 3 + 7;
    }
    return keys;
}

void su_rand_perm(uint64_t *s, uint32_t *perm, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        perm[i] = i;
    for (uint32_t i = n; i > 1; i--) {
        uint32_t j = (uint32_t)(ft_test_rand(s) % i), x = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = x;
    }
}

/* su_same_results compares two engine results bit for bit. */
int su_same_results(const ft_result *x, const ft_result *y)
{
    if (x->status != y->status || x->n != y->n)
        return 0;
    if (x->status != FT_OK)
        return strcmp(x->error, y->error) == 0;
    for (uint32_t i = 0; i < x->n; i++) {
        const ft_hit *a = &x->hits[i], *b = &y->hits[i];
        if (a->len != b->len || a->value != b->value ||
            memcmp(&a->score, &b->score, 8) || memcmp(&a->sigma, &b->sigma, 4) ||
            memcmp(x->tokens + a->tok_off, y->tokens + b->tok_off, a->len * 4))
            return 0;
    }
    return 1;
}

int su_same_full(const ft_result *x, const ft_result *y, int key_index)
{
    if (!su_same_results(x, y))
        return 0;
    for (uint32_t i = 0; i < x->n && x->status == FT_OK; i++)
        if (x->hits[i].order != y->hits[i].order ||
            (key_index && x->hits[i].key_index != y->hits[i].key_index))
            return 0;
    return 1;
}

ft_result *su_cpu_group(ft_index *const *sh, size_t ns,
                        const ft_request *batch, uint32_t n)
{
    ft_engine_opts co;
    ft_engine_opts_init(&co);
    co.threads = 1;
    ft_result *cg = calloc(n, sizeof *cg);
    FT_CHECK(cg != NULL);
    for (uint32_t i = 0; i < n; i++)
        FT_PASS(ft_result_alloc(&cg[i], FT_MAX_RESULTS, batch[i].T));
    fti_group *g;
    char err[256] = "";
    FT_PASS(fti_group_open(&g, (const ft_index *const *)sh, ns, &co, err,
                           sizeof err));
    FT_PASS(fti_group_search_batch(g, batch, n, cg));
    fti_group_close(g);
    return cg;
}

void su_results_free(ft_result *res, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        ft_result_free(&res[i]);
    free(res);
}

void su_check_group(const ft_result *got, const ft_result *cg,
                    const ft_result *want, const su_case *c,
                    const char *what)
{
    if (!su_same_full(got, cg, 1)) {
        fprintf(stderr, "%s: GPU and CPU groups differ\n", what);
        exit(1);
    }
    if (!su_same_full(got, want, 0)) {
        fprintf(stderr, "%s: group and unsharded GPU engine differ "
                "(status %d/%d, n %u/%u)\n", what, got->status,
                want->status, got->n, want->n);
        su_same_result(got, c->ref, c->nref, what);
        exit(1);
    }
    if (!su_same_result(got, c->ref, c->nref, what))
        exit(1);
}

void su_gpu_opts(ft_engine_opts *o, int small)
{
    ft_engine_opts_init(o);
    o->kind = FT_ENGINE_GPU;
    if (small) {
        o->max_batch = 3;
        o->max_k = 64;
        o->max_t = 8;
        o->select_grid_min = 1;
        o->child_map_min = 2;
        o->expand_pair_items = 1;
    }
}

void su_cases_make(su_cases *c, uint64_t *s, const su_lib_params *lp,
                   uint32_t n, uint32_t maxT, uint32_t maxK, uint32_t maxB,
                   const char *path, int with_ref)
{
    memset(c, 0, sizeof *c);
    c->V = 2 + (uint32_t)(ft_test_rand(s) % 6);
    c->keys = su_rand_keys(s, lp, c->V);
    c->m = su_build(c->keys, lp->nkeys, path, &c->idx);
    if (with_ref) {
        c->root = su_node_new();
        for (size_t i = 0; i < c->m; i++)
            su_insert(c->root, &c->keys[i]);
    }
    c->n = n;
    c->cs = calloc(n, sizeof *c->cs);
    c->batch = calloc(n, sizeof *c->batch);
    c->res = calloc(n, sizeof *c->res);
    FT_CHECK(c->cs && c->batch && c->res);
    for (uint32_t i = 0; i < n; i++) {
        su_case *k = &c->cs[i];
        uint32_t T = 1 + (uint32_t)(ft_test_rand(s) % maxT);
        uint32_t K = 1 + (uint32_t)(ft_test_rand(s) % maxK);
        uint32_t B = 1 + (uint32_t)(ft_test_rand(s) % maxB);
        su_make_request(k, s, c->keys, c->m, lp, c->V, T, K, B);
        char err[160];
        FT_PASS(ft_request_validate(&k->req, 0, err, sizeof err));
        if (with_ref) {
            k->ref = malloc(FT_MAX_RESULTS * sizeof *k->ref);
            FT_CHECK(k->ref != NULL);
            k->nref = su_search(c->root, &k->req, k->ref);
            c->nhits += k->nref;
        }
        c->batch[i] = k->req;
        FT_PASS(ft_result_alloc(&c->res[i], FT_MAX_RESULTS, k->req.T));
    }
}

void su_cases_free(su_cases *c)
{
    for (uint32_t i = 0; i < c->n; i++) {
        ft_result_free(&c->res[i]);
        free(c->cs[i].tok);
        free(c->cs[i].lp);
        free(c->cs[i].ref);
    }
    free(c->res);
    free(c->batch);
    free(c->cs);
    if (c->root)
        su_free(c->root);
    ft_index_close(c->idx);
    free(c->keys);
    memset(c, 0, sizeof *c);
}

void su_cases_cpu(su_cases *c)
{
    ft_engine_opts o;
    ft_engine_opts_init(&o);
    ft_engine *eng;
    char err[256];
    FT_PASS(ft_engine_open(&eng, c->idx, &o, err, sizeof err));
    FT_PASS(ft_engine_search_batch(eng, c->batch, c->n, c->res));
    ft_engine_close(eng);
}

void su_split_build(uint64_t *s, const su_key *keys, size_t m, size_t ns,
                    const char *dir, ft_index **sh)
{
    /* candidate cut points: where the first token changes */
    size_t *chg = malloc((m + 1) * sizeof *chg), nc = 0, cut[9];
    FT_CHECK(chg != NULL && ns >= 1 && ns <= 8);
    for (size_t i = 1; i < m; i++)
        if (keys[i].t[0] != keys[i - 1].t[0])
            chg[nc++] = i;
    cut[0] = 0;
    for (size_t j = 1; j < ns; j++) {
        uint64_t r = ft_test_rand(s);
        if (nc == 0 || r % 7 == 0)
            cut[j] = r % 2 ? m : 0; /* an empty shard at either end */
        else
            cut[j] = chg[(r >> 8) % nc];
    }
    cut[ns] = m;
    /* sort the cut points (a tiny insertion sort) */
    for (size_t j = 1; j < ns; j++)
        for (size_t k = j; k > 0 && cut[k] < cut[k - 1]; k--) {
            size_t x = cut[k];
            cut[k] = cut[k - 1];
            cut[k - 1] = x;
        }
    free(chg);
    for (size_t j = 0; j < ns; j++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/shard%zu.idx", dir, j);
        size_t c = cut[j + 1] - cut[j];
        su_key *part = calloc(c + 1, sizeof *part);
        FT_CHECK(part != NULL);
        memcpy(part, keys + cut[j], c * sizeof *part);
        FT_CHECK(su_build(part, c, path, &sh[j]) == c);
        free(part);
    }
}

void su_run_widths(ft_engine *eng, fti_group *g, const ft_request *reqs,
                   uint32_t n, uint32_t w, ft_result *res)
{
    for (uint32_t i = 0; i < n; i += w) {
        uint32_t k = n - i < w ? n - i : w;
        if (eng)
            FT_PASS(ft_engine_search_batch(eng, reqs + i, k, res + i));
        else
            FT_PASS(fti_group_search_batch(g, reqs + i, k, res + i));
    }
}

void su_check_all(const su_cases *c, const ft_result *res,
                  const uint32_t *perm, const char *prefix)
{
    for (uint32_t i = 0; i < c->n; i++) {
        const su_case *k = &c->cs[perm ? perm[i] : i];
        char what[300];
        snprintf(what, sizeof what, "%s case %u (T=%u K=%u B=%u n=%u)",
                 prefix, perm ? perm[i] : i, k->req.T, k->req.K, k->req.beam,
                 k->req.results);
        if (!su_same_result(&res[i], k->ref, k->nref, what))
            exit(1);
    }
}

/* ---- the GPU tests' set-up ---- */

/* A one-key library at dir/name, opened, and small-slot GPU options. */
static ft_index *probe_lib(const char *dir, const char *name,
                           ft_engine_opts *o)
{
    su_key k = {1, {5}, 0};
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ft_index *idx;
    su_build(&k, 1, path, &idx);
    su_gpu_opts(o, 1);
    return idx;
}

int su_gpu_count(const char *dir, char *err, size_t errlen)
{
    ft_engine_opts o;
    ft_index *idx = probe_lib(dir, "probe.idx", &o);
    int n = 0;
    ft_engine *eng;
    while (n < 8) {
        o.device = n;
        int rc = ft_engine_open(&eng, idx, &o, err, errlen);
        if (rc != FT_OK) {
            if (n == 0 && rc != FT_ENODEV && rc != FT_ENOTSUP) {
                fprintf(stderr, "GPU engine open failed: %s: %s\n",
                        ft_strerror(rc), err);
                exit(1);
            }
            break;
        }
        ft_engine_close(eng);
        n++;
    }
    ft_index_close(idx);
    return n;
}

int su_nccl_probe(const char *dir, char *err, size_t errlen)
{
    ft_engine_opts o;
    ft_index *idx = probe_lib(dir, "nccl.idx", &o);
    fti_group_opts go;
    fti_group_opts_init(&go);
    go.exchange = FTI_EXCHANGE_NCCL;
    fti_group *g;
    const ft_index *sh[1] = {idx};
    int rc = fti_group_open_ex(&g, sh, 1, &o, &go, err, errlen);
    ft_index_close(idx);
    if (rc != FT_OK)
        return 0;
    fti_group_close(g);
    return 1;
}

ft_result *su_results_new(const su_cases *c)
{
    ft_result *r = calloc(c->n, sizeof *r);
    FT_CHECK(r != NULL);
    for (uint32_t i = 0; i < c->n; i++)
        FT_PASS(ft_result_alloc(&r[i], FT_MAX_RESULTS, c->cs[i].req.T));
    return r;
}

ft_result *su_gpu_answers(const su_cases *c, int device, uint64_t seed)
{
    ft_result *one = su_results_new(c);
    ft_engine_opts o;
    ft_engine *eng;
    char err[256] = "";
    su_gpu_opts(&o, 0);
    o.device = device;
    FT_PASS(ft_engine_open(&eng, c->idx, &o, err, sizeof err));
    FT_PASS(ft_engine_search_batch(eng, c->batch, c->n, one));
    ft_engine_close(eng);
    for (uint32_t i = 0; i < c->n; i++)
        if (!su_same_full(&one[i], &c->res[i], 1)) {
            fprintf(stderr, "seed %llu case %u: the unsharded GPU engine "
                    "(GPU %d) and the CPU engine differ\n",
                    (unsigned long long)seed, i, device);
            exit(1);
        }
    return one;
}
