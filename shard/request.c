/*
 * request.c - the one request validator (SPEC section 3), request
 * preparation shared by the engines (SPEC section 4's proposal order and
 * F table) and result buffers.
 */
#include <math.h>

#include "search.h"

void ft_request_init(ft_request *req)
{
    memset(req, 0, sizeof *req);
    req->beam = FT_DEFAULT_BEAM;
    req->results = 0; /* resolved to beam */
    req->theta_tok = -INFINITY;
    req->theta_sent = -INFINITY;
    req->alpha = 1.0;
}

/* Duplicate detection: an open-addressing set with generation stamps, so
 * nothing is cleared or allocated per request.  The table used is the
 * smallest power of two >= 4 K slots (8 bytes each, load <= 1/4: few
 * probes, few mispredicted branches), so that for K <= 1024 it fits the L1
 * cache; a duplicate's first index is found by a scan,
 * on the error path only. */
#define DUP_SLOTS 16384u
typedef struct dup_slot {
    uint32_t tok;
    uint32_t stamp;
} dup_slot;
static _Thread_local dup_slot dup_tab[DUP_SLOTS];
static _Thread_local uint32_t dup_stamp;

static inline int dup_insert(uint32_t tok, uint32_t mask, uint32_t shift,
                             uint32_t stamp)
{
    uint32_t h = (tok * 0x9e3779b1u) >> shift; /* the table's bits */
    for (;;) {
        dup_slot *s = &dup_tab[h & mask];
        if (s->stamp != stamp) {
            s->stamp = stamp;
            s->tok = tok;
            return 0;
        }
        if (s->tok == tok)
            return 1;
        h++;
    }
}

int ft_request_validate(const ft_request *req, uint32_t max_beam, char *errbuf,
                        size_t errlen)
{
    uint32_t cap = max_beam && max_beam < FT_MAX_BEAM ? max_beam : FT_MAX_BEAM;
    FT_RETURN_ERROR_IF(req->T < 1 || req->T > FT_MAX_T, FT_EREQUEST,
                       "tokens: the grid must have 1..%u positions, got %u",
                       FT_MAX_T, req->T);
    FT_RETURN_ERROR_IF(req->K < 1 || req->K > FT_MAX_K, FT_EREQUEST,
                       "tokens: each position must have 1..%u proposals, got %u",
                       FT_MAX_K, req->K);
    FT_RETURN_ERROR_IF(req->tokens == NULL, FT_EREQUEST, "tokens: missing");
    FT_RETURN_ERROR_IF(req->logp == NULL, FT_EREQUEST, "logp: missing");
    FT_RETURN_ERROR_IF(req->beam < 1 || req->beam > FT_MAX_BEAM, FT_EREQUEST,
                       "beam: must be 1..%u, got %u", FT_MAX_BEAM, req->beam);
    FT_RETURN_ERROR_IF(req->beam > cap, FT_EREQUEST,
                       "beam: %u exceeds this server's cap of %u", req->beam,
                       cap);
    FT_RETURN_ERROR_IF(req->results > FT_MAX_RESULTS, FT_EREQUEST,
                       "results: must be 1..%u, got %u", FT_MAX_RESULTS,
                       req->results);
    FT_RETURN_ERROR_IF(isnan(req->theta_tok), FT_EREQUEST,
                       "theta_tok: not a number");
    FT_RETURN_ERROR_IF(isnan(req->theta_sent), FT_EREQUEST,
                       "theta_sent: not a number");
    FT_RETURN_ERROR_IF(!(req->alpha >= 0.0 && req->alpha <= 10.0), FT_EREQUEST,
                       "alpha: must be 0..10, got %.17g", req->alpha);
    uint32_t size = 64, shift = 26;
    while (size < 4 * req->K) {
        size <<= 1; /* K <= 4096: at most DUP_SLOTS */
        shift--;
    }
    uint32_t mask = size - 1;
    for (uint32_t t = 0; t < req->T; t++) {
        const float *lp = req->logp + (size_t)t * req->K;
        const uint32_t *tk = req->tokens + (size_t)t * req->K;
        /* Exponent bits all ones = inf or nan; a branch-free OR over the
         * row (vectorised), the exact message only on failure. */
        uint32_t bad = 0;
        for (uint32_t k = 0; k < req->K; k++) {
            uint32_t b;
            memcpy(&b, &lp[k], 4);
            bad |= (b & 0x7f800000u) == 0x7f800000u;
        }
        if (bad)
            for (uint32_t k = 0; k < req->K; k++)
                FT_RETURN_ERROR_IF(!isfinite(lp[k]), FT_EREQUEST,
                                   "logp: position %u, proposal %u: not "
                                   "finite", t, k);
        if (++dup_stamp == 0) { /* wrapped: reset the stamps once */
            memset(dup_tab, 0, sizeof dup_tab);
            dup_stamp = 1;
        }
        uint32_t stamp = dup_stamp;
        for (uint32_t k = 0; k < req->K; k++) {
            if (!dup_insert(tk[k], mask, shift, stamp))
                continue;
            uint32_t first = 0;
            while (tk[first] != tk[k])
                first++;
            FT_RETURN_ERROR_IF(1, FT_EREQUEST,
                               "tokens: position %u: token %u appears twice "
                               "(proposals %u and %u)", t, tk[k], first, k);
        }
    }
    return FT_OK;
}

int ft_result_alloc(ft_result *res, uint32_t max_hits, uint32_t max_len)
{
    memset(res, 0, sizeof *res);
    if (max_hits == 0)
        max_hits = 1;
    if (max_len == 0)
        max_len = FT_MAX_T;
    res->hits = calloc(max_hits, sizeof *res->hits);
    res->tokens = calloc((size_t)max_hits * max_len, sizeof *res->tokens);
    if (res->hits == NULL || res->tokens == NULL) {
        ft_result_free(res);
        return FT_ENOMEM;
    }
    res->cap_hits = max_hits;
    res->cap_tokens = max_hits * max_len;
    return FT_OK;
}

void ft_result_free(ft_result *res)
{
    free(res->hits);
    free(res->tokens);
    memset(res, 0, sizeof *res);
}

int ft_result_put_value(ft_result *res, uint64_t value, const ft_sel *s,
                        const uint32_t *toks, uint32_t len)
{
    uint32_t off = res->n ? res->hits[res->n - 1].tok_off +
                                res->hits[res->n - 1].len
                          : 0;
    if (res->n >= res->cap_hits || off + len > res->cap_tokens)
        return FT_ELIMIT;
    ft_hit *h = &res->hits[res->n++];
    h->len = len;
    h->tok_off = off;
    h->value = value;
    h->score = s->score;
    h->sigma = s->sigma;
    memcpy(res->tokens + off, toks, len * sizeof *toks);
    return FT_OK;
}

int ft_result_put_hit(ft_result *res, const ft_trie *t, const ft_sel *s,
                      const uint32_t *toks, uint32_t len)
{
    return ft_result_put_value(res, ft_trie_value(t, s->node), s, toks, len);
}

/* ---- preparation ---- */

typedef struct prep_scratch {
    uint64_t *keys; /* cap_k sort keys */
} prep_scratch;

int ft_prep_init(ft_prep *p, uint32_t max_t, uint32_t max_k)
{
    memset(p, 0, sizeof *p);
    if (max_t == 0 || max_t > FT_MAX_T)
        max_t = FT_MAX_T;
    if (max_k == 0 || max_k > FT_MAX_K)
        max_k = FT_MAX_K;
    p->cap_t = max_t;
    p->cap_k = max_k;
    p->tok = malloc((size_t)max_t * max_k * sizeof *p->tok);
    p->logp = malloc((size_t)max_t * max_k * sizeof *p->logp);
    p->keff = malloc(max_t * sizeof *p->keff);
    prep_scratch *sc = calloc(1, sizeof *sc);
    if (sc)
        sc->keys = malloc(max_k * sizeof *sc->keys);
    p->scratch = sc;
    if (!p->tok || !p->logp || !p->keff || !sc || !sc->keys) {
        ft_prep_free(p);
        return FT_ENOMEM;
    }
    return FT_OK;
}

void ft_prep_free(ft_prep *p)
{
    prep_scratch *sc = p->scratch;
    if (sc)
        free(sc->keys);
    free(sc);
    free(p->tok);
    free(p->logp);
    free(p->keff);
    memset(p, 0, sizeof *p);
}

static int u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int ft_prep_fill(ft_prep *p, const ft_request *req)
{
    if (req->T > p->cap_t || req->K > p->cap_k)
        return FT_ELIMIT;
    prep_scratch *sc = p->scratch;
    uint32_t T = req->T, K = req->K;
    p->T = T;
    p->K = K;
    p->beam = req->beam;
    p->results = req->results ? req->results : req->beam;
    p->theta_tok = req->theta_tok;
    p->theta_sent = req->theta_sent;
    p->alpha = req->alpha;
    for (uint32_t t = 0; t < T; t++) {
        const float *lp = req->logp + (size_t)t * K;
        const uint32_t *tk = req->tokens + (size_t)t * K;
        uint32_t *otk = p->tok + (size_t)t * K;
        float *olp = p->logp + (size_t)t * K;
        /* Model output usually arrives sorted: check before sorting.  The
         * key (descending logp, then input index) makes the sort stable. */
        int sorted = 1;
        for (uint32_t k = 1; k < K && sorted; k++)
            sorted = !(lp[k] > lp[k - 1]);
        if (sorted) {
            memcpy(otk, tk, K * sizeof *tk);
            memcpy(olp, lp, K * sizeof *lp);
        } else {
            for (uint32_t k = 0; k < K; k++)
                sc->keys[k] = ((uint64_t)ft_sigma_key(lp[k]) << 32) | k;
            qsort(sc->keys, K, sizeof *sc->keys, u64_cmp);
            for (uint32_t k = 0; k < K; k++) {
                uint32_t src = (uint32_t)sc->keys[k];
                otk[k] = tk[src];
                olp[k] = lp[src];
            }
        }
        uint32_t ke = 0;
        while (ke < K && olp[ke] > req->theta_tok)
            ke++;
        p->keff[t] = ke;
    }
    p->F[0] = 1.0;
    for (uint32_t d = 1; d <= T; d++)
        p->F[d] = pow(6.0 / (5.0 + (double)d), req->alpha);
    return FT_OK;
}
