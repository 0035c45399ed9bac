/* cmd_search_ar.c - "flashtrie search --ar": answers docs/specification.md section 7
 * requests by driving the autoregressive step API (include/flashtrie.h,
 * "Autoregressive steps") one step at a time, as a decoder would: at step
 * t every live beam is given row t of its request's grid, sparse (the
 * row's tokens and log-probs as they arrive) or dense (a row of K columns
 * whose vocabulary is row t's tokens).  The completed keys of every step
 * are merged by (score desc, step asc, place in the step) and their tokens
 * traced back through the steps' parents.  The answers must be
 * byte-identical to plain "flashtrie search": tests/e2e/ar_search_test.sh
 * checks it, and so the step API against docs/specification.md section 4. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "flashtrie.h"

/* ar_hit is one completed key of one step. */
typedef struct ar_hit {
    uint32_t t, pos; /* step, place in the step's list */
    uint32_t parent, token, len;
    uint64_t key_index, value;
    double score;
    float sigma;
} ar_hit;

struct ft_cli_ar {
    ft_ar *ar;
    int dense;
    ft_ar_beams b[2];
    ft_ar_hits hits;
    uint32_t cap;            /* the session's beam and results */
    uint32_t *h_ids;         /* [cap * FT_MAX_K] a step's rows, host */
    float *h_lp;
    uint32_t *d_ids, *d_vocab; /* the same in the session's memory */
    float *d_lp;
    uint32_t *par, *tok;     /* [FT_MAX_T * cap]: each step's beams */
    ar_hit *all;             /* [FT_MAX_T * cap]: every step's hits */
    /* one step's hits, host copies */
    uint32_t *hp, *hl, *ht;
    uint64_t *hk, *hv;
    double *hs;
    float *hg;
    char note[256];
};

void ft_cli_ar_close(ft_cli_ar *a)
{
    if (a == NULL)
        return;
    if (a->ar) {
        ft_ar_beams_free(a->ar, &a->b[0]);
        ft_ar_beams_free(a->ar, &a->b[1]);
        ft_ar_hits_free(a->ar, &a->hits);
        ft_ar_free(a->ar, a->d_ids);
        ft_ar_free(a->ar, a->d_vocab);
        ft_ar_free(a->ar, a->d_lp);
    }
    ft_ar_close(a->ar);
    free(a->h_ids);
    free(a->h_lp);
    free(a->par);
    free(a->tok);
    free(a->all);
    free(a->hp);
    free(a->hl);
    free(a->ht);
    free(a->hk);
    free(a->hv);
    free(a->hs);
    free(a->hg);
    free(a);
}

int ft_cli_ar_open(ft_cli_ar **out, const ft_index *idx, int dense,
                   ft_engine_kind kind, uint32_t threads, char *err,
                   size_t errlen)
{
    *out = NULL;
    ft_cli_ar *a = calloc(1, sizeof *a);
    if (a == NULL)
        return FT_ENOMEM;
    a->dense = dense;
    /* results may exceed a capped beam: size for the specification maxima */
    a->cap = FT_MAX_BEAM > FT_MAX_RESULTS ? FT_MAX_BEAM : FT_MAX_RESULTS;
    ft_ar_opts o;
    ft_ar_opts_init(&o);
    o.kind = kind;
    o.beam = a->cap;
    o.results = a->cap;
    o.max_width = FT_MAX_K;
    o.threads = threads; /* a CPU session's; 0 = the usable cores */
    int rc = ft_ar_open(&a->ar, idx, &o, err, errlen);
    if (rc != FT_OK) {
        free(a);
        return rc;
    }
    size_t rows = (size_t)a->cap * FT_MAX_K, steps = (size_t)FT_MAX_T * a->cap;
    a->h_ids = malloc(rows * 4);
    a->h_lp = malloc(rows * 4);
    a->par = malloc(steps * 4);
    a->tok = malloc(steps * 4);
    a->all = malloc(steps * sizeof *a->all);
    a->hp = malloc(a->cap * 4);
    a->hl = malloc(a->cap * 4);
    a->ht = malloc(a->cap * 4);
    a->hk = malloc(a->cap * 8);
    a->hv = malloc(a->cap * 8);
    a->hs = malloc(a->cap * 8);
    a->hg = malloc(a->cap * 4);
    if (!a->h_ids || !a->h_lp || !a->par || !a->tok || !a->all || !a->hp ||
        !a->hl || !a->ht || !a->hk || !a->hv || !a->hs || !a->hg) {
        ft_cli_ar_close(a);
        return FT_ENOMEM;
    }
    if ((rc = ft_ar_beams_alloc(a->ar, &a->b[0])) ||
        (rc = ft_ar_beams_alloc(a->ar, &a->b[1])) ||
        (rc = ft_ar_hits_alloc(a->ar, &a->hits)) ||
        (rc = ft_ar_alloc(a->ar, (void **)&a->d_ids, rows * 4)) ||
        (rc = ft_ar_alloc(a->ar, (void **)&a->d_lp, rows * 4)) ||
        (rc = ft_ar_alloc(a->ar, (void **)&a->d_vocab, FT_MAX_K * 4))) {
        snprintf(err, errlen, "AR session buffers: %s", ft_strerror(rc));
        ft_cli_ar_close(a);
        return rc;
    }
    snprintf(a->note, sizeof a->note, "ar step (%s rows) on the %s",
             dense ? "dense" : "sparse",
             ft_ar_kind(a->ar) == FT_ENGINE_GPU ? "GPU" : "CPU");
    *out = a;
    return FT_OK;
}

const char *ft_cli_ar_note(const ft_cli_ar *a) { return a->note; }

static int hit_cmp(const void *x, const void *y)
{
    const ar_hit *a = x, *b = y;
    /* score desc (no NaN: sigma is finite or the key was not taken) */
    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    if (a->t != b->t)
        return a->t < b->t ? -1 : 1;
    return a->pos < b->pos ? -1 : a->pos > b->pos;
}

/* run_steps decodes one request; *nall gets its hits, all steps. */
static int run_steps(ft_cli_ar *a, const ft_request *req, size_t *nall)
{
    ft_ar *ar = a->ar;
    uint32_t K = req->T ? req->K : 0, B = req->beam;
    int rc = ft_ar_configure(ar, B, req->results ? req->results : B,
                             req->theta_tok, req->theta_sent, req->alpha);
    if (rc == FT_OK)
        rc = ft_ar_reset(ar, &a->b[0], NULL);
    if (rc != FT_OK)
        return rc;
    uint32_t m = 1;
    size_t na = 0;
    for (uint32_t t = 0; t < req->T && m > 0; t++) {
        const uint32_t *trow = req->tokens + (size_t)t * K;
        const float *lrow = req->logp + (size_t)t * K;
        /* Every live beam reads row t. */
        for (uint32_t r = 0; r < m; r++) {
            if (!a->dense)
                memcpy(a->h_ids + (size_t)r * K, trow, (size_t)K * 4);
            memcpy(a->h_lp + (size_t)r * K, lrow, (size_t)K * 4);
        }
        if ((!a->dense &&
             (rc = ft_ar_memcpy(ar, a->d_ids, a->h_ids, (size_t)m * K * 4, 1))) ||
            (a->dense && (rc = ft_ar_memcpy(ar, a->d_vocab, trow, (size_t)K * 4, 1))) ||
            (rc = ft_ar_memcpy(ar, a->d_lp, a->h_lp, (size_t)m * K * 4, 1)))
            return rc;
        ft_ar_input in;
        memset(&in, 0, sizeof in);
        in.form = a->dense ? FT_AR_IN_DENSE : FT_AR_IN_SPARSE;
        in.dtype = FT_AR_IN_F32;
        in.norm = FT_AR_NORM_NONE;
        in.width = K;
        in.ids = a->dense ? NULL : a->d_ids;
        in.vocab = a->dense ? a->d_vocab : NULL;
        in.logp = a->d_lp;
        ft_ar_beams *cur = &a->b[t & 1], *nxt = &a->b[(t + 1) & 1];
        rc = ft_ar_step(ar, cur, &in, nxt, &a->hits, NULL);
        if (rc != FT_OK)
            return rc;
        uint32_t nh;
        if ((rc = ft_ar_memcpy(ar, &m, nxt->count, 4, 0)) ||
            (rc = ft_ar_memcpy(ar, &nh, a->hits.count, 4, 0)) ||
            (rc = ft_ar_memcpy(ar, a->par + (size_t)t * a->cap, nxt->parent,
                               (size_t)m * 4, 0)) ||
            (rc = ft_ar_memcpy(ar, a->tok + (size_t)t * a->cap, nxt->token,
                               (size_t)m * 4, 0)) ||
            (rc = ft_ar_memcpy(ar, a->hp, a->hits.parent, (size_t)nh * 4, 0)) ||
            (rc = ft_ar_memcpy(ar, a->ht, a->hits.token, (size_t)nh * 4, 0)) ||
            (rc = ft_ar_memcpy(ar, a->hl, a->hits.len, (size_t)nh * 4, 0)) ||
            (rc = ft_ar_memcpy(ar, a->hk, a->hits.key_index, (size_t)nh * 8, 0)) ||
            (rc = ft_ar_memcpy(ar, a->hv, a->hits.value, (size_t)nh * 8, 0)) ||
            (rc = ft_ar_memcpy(ar, a->hs, a->hits.score, (size_t)nh * 8, 0)) ||
            (rc = ft_ar_memcpy(ar, a->hg, a->hits.sigma, (size_t)nh * 4, 0)))
            return rc;
        for (uint32_t i = 0; i < nh; i++) {
            ar_hit *h = &a->all[na++];
            h->t = t;
            h->pos = i;
            h->parent = a->hp[i];
            h->token = a->ht[i];
            h->len = a->hl[i];
            h->key_index = a->hk[i];
            h->value = a->hv[i];
            h->score = a->hs[i];
            h->sigma = a->hg[i];
        }
    }
    *nall = na;
    return FT_OK;
}

int ft_cli_ar_search(ft_cli_ar *a, const ft_request *req, uint32_t max_beam,
                     ft_result *res)
{
    res->n = 0;
    res->status = FT_OK;
    res->error[0] = 0;
    int rc = ft_request_validate(req, max_beam, res->error, sizeof res->error);
    if (rc != FT_OK) {
        res->status = rc;
        return FT_OK;
    }
    size_t na = 0;
    rc = run_steps(a, req, &na);
    if (rc != FT_OK) {
        snprintf(res->error, sizeof res->error, "ar step: %s (%s)",
                 ft_strerror(rc), ft_ar_error(a->ar));
        res->status = rc;
        return rc == FT_EINVAL ? FT_OK : rc;
    }
    qsort(a->all, na, sizeof *a->all, hit_cmp);
    uint32_t n = req->results ? req->results : req->beam;
    uint32_t used = 0;
    for (size_t i = 0; i < na && res->n < n; i++) {
        const ar_hit *h = &a->all[i];
        if (res->n >= res->cap_hits || used + h->t + 1 > res->cap_tokens)
            return FT_ELIMIT;
        uint32_t *tk = res->tokens + used;
        /* Trace the key back: beam p after step s took token tok[s][p]. */
        tk[h->t] = h->token;
        uint32_t p = h->parent;
        for (uint32_t s = h->t; s > 0; s--) {
            tk[s - 1] = a->tok[(size_t)(s - 1) * a->cap + p];
            p = a->par[(size_t)(s - 1) * a->cap + p];
        }
        ft_hit *o = &res->hits[res->n++];
        o->len = h->t + 1;
        o->tok_off = used;
        o->value = h->value;
        o->score = h->score;
        o->sigma = h->sigma;
        o->order = (h->t << 24) | (h->pos & 0xffffffu); /* step, place */
        o->key_index = h->key_index;
        used += h->t + 1;
    }
    return FT_OK;
}
