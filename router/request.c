/*
 * request.c - the one request validator (docs/specification.md section 3) and
 * request preparation (docs/specification.md section 4's proposal order, the
 * theta_tok cut and the F table): what turns a request into the
 * fti_prepared an engine searches.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashtrie.h"
#include "rt_impl.h"
#include "flashtrie/internal/rules.h"
#include "search_impl.h"


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
 * smallest power of two >= 16 K slots, at most DUP_SLOTS (8 bytes each:
 * 128 KiB, the L2 cache's): the branch that finds a slot taken is then
 * rarely taken (load <= 1/16 for K <= 1024), where at 4 K slots (the L1
 * cache's 32 KiB) its mispredictions cost more than the L1 misses (K =
 * 1000, 8 rows of real request tokens, 2-core box: 15.4 us at 4 K slots,
 * 10.2 us at 16 K; issue 35).  A duplicate's first index is found by a
 * scan, on the error path only. */
#define DUP_SLOTS 16384u
typedef struct dup_slot {
    uint32_t tok;
    uint32_t stamp;
} dup_slot;
static _Thread_local dup_slot dup_tab[DUP_SLOTS];
static _Thread_local uint32_t dup_stamp;

/* The first k of tk[0..K) whose token an earlier k holds, or K.  The
 * position-independent build computes a thread-local address with a
 * __tls_get_addr call (relaxed by the linker, but the registers it
 * clobbers are spilled anyway), and the compiler put it inside the loop,
 * with the loop's state on the stack (~5 ns a token): the table's address
 * is taken once and hidden from the optimiser (the empty asm), so the
 * loop runs in registers. */
static uint32_t dup_first(const uint32_t *tk, uint32_t K, uint32_t mask,
                          uint32_t shift, uint32_t stamp)
{
    dup_slot *tab = dup_tab;
    __asm__("" : "+r"(tab));
    for (uint32_t k = 0; k < K; k++) {
        uint32_t tok = tk[k];
        uint32_t h = (tok * 0x9e3779b1u) >> shift; /* the table's bits */
        for (;;) {
            dup_slot *s = &tab[h & mask];
            if (s->stamp != stamp) {
                s->stamp = stamp;
                s->tok = tok;
                break;
            }
            if (s->tok == tok)
                return k;
            h++;
        }
    }
    return K;
}

/* The rules of one request's fields and of its rows but the duplicate
 * tokens (docs/specification.md section 3, in its order: fields, then row by
 * row). */
static int validate_fields(const ft_request *req, uint32_t max_beam,
                           char *errbuf, size_t errlen)
{
    uint32_t cap = max_beam && max_beam < FT_MAX_BEAM ? max_beam : FT_MAX_BEAM;
    RT_RETURN_ERROR_IF(req->T < 1 || req->T > FT_MAX_T, FT_EREQUEST,
                       "tokens: the grid must have 1..%u positions, got %u",
                       FT_MAX_T, req->T);
    RT_RETURN_ERROR_IF(req->K < 1 || req->K > FT_MAX_K, FT_EREQUEST,
                       "tokens: each position must have 1..%u proposals, got %u",
                       FT_MAX_K, req->K);
    RT_RETURN_ERROR_IF(req->tokens == NULL, FT_EREQUEST, "tokens: missing");
    RT_RETURN_ERROR_IF(req->logp == NULL, FT_EREQUEST, "logp: missing");
    RT_RETURN_ERROR_IF(req->beam < 1 || req->beam > FT_MAX_BEAM, FT_EREQUEST,
                       "beam: must be 1..%u, got %u", FT_MAX_BEAM, req->beam);
    RT_RETURN_ERROR_IF(req->beam > cap, FT_EREQUEST,
                       "beam: %u exceeds this server's cap of %u", req->beam,
                       cap);
    RT_RETURN_ERROR_IF(req->results > FT_MAX_RESULTS, FT_EREQUEST,
                       "results: must be 1..%u, got %u", FT_MAX_RESULTS,
                       req->results);
    RT_RETURN_ERROR_IF(isnan(req->theta_tok), FT_EREQUEST,
                       "theta_tok: not a number");
    RT_RETURN_ERROR_IF(isnan(req->theta_sent), FT_EREQUEST,
                       "theta_sent: not a number");
    RT_RETURN_ERROR_IF(!(req->alpha >= 0.0 && req->alpha <= 10.0), FT_EREQUEST,
                       "alpha: must be 0..10, got %.17g", req->alpha);
    return FT_OK;
}

/* Rows are scanned in blocks of LANES floats, each lane OR-ed into its own
 * accumulator, then the rest one by one: gcc -O2's cost model ("very
 * cheap") leaves a loop of unknown trip count scalar, but vectorises a
 * block of a known count.  The row scans below cost ~9 instructions a
 * float as plain loops and ~1.5 in blocks (callgrind, the server's
 * T = 8, K = 100 request: validate_finite 7.4k -> 1.7k, the sort check
 * in preparation 7.5k -> 1.8k; 2-core box, K = 100: 130 -> 20 ns and
 * 90 -> 21 ns a row; issue 35). */
#define LANES 8

/* any_nonfinite says whether lp[0..n) holds an inf or a nan: their
 * exponent bits are all ones, and only all ones carry into the sign bit
 * when its lowest bit is added. */
static int any_nonfinite(const float *lp, size_t n)
{
    uint32_t acc[LANES] = {0}, bad = 0;
    const float *p = lp, *end = lp + (n - n % LANES);
    for (; p < end; p += LANES)
        for (int j = 0; j < LANES; j++) {
            uint32_t b;
            memcpy(&b, &p[j], 4);
            acc[j] |= (b & 0x7f800000u) + 0x00800000u;
        }
    for (; p < lp + n; p++) {
        uint32_t b;
        memcpy(&b, p, 4);
        bad |= (b & 0x7f800000u) + 0x00800000u;
    }
    for (int j = 0; j < LANES; j++)
        bad |= acc[j];
    return (bad & 0x80000000u) != 0;
}

/* Row t's log-probs: a branch-free scan, the exact message only on
 * failure. */
static int validate_finite(const ft_request *req, uint32_t t, char *errbuf,
                           size_t errlen)
{
    const float *lp = req->logp + (size_t)t * req->K;
    if (any_nonfinite(lp, req->K))
        for (uint32_t k = 0; k < req->K; k++)
            RT_RETURN_ERROR_IF(!isfinite(lp[k]), FT_EREQUEST,
                               "logp: position %u, proposal %u: not finite",
                               t, k);
    return FT_OK;
}

/* Row t's tokens: no token twice. */
static int validate_distinct(const ft_request *req, uint32_t t, char *errbuf,
                             size_t errlen)
{
    uint32_t size = 64, shift = 26;
    while (size < 16 * req->K && size < DUP_SLOTS) {
        size <<= 1; /* K <= 4096: load <= 1/4 at DUP_SLOTS */
        shift--;
    }
    uint32_t mask = size - 1;
    const uint32_t *tk = req->tokens + (size_t)t * req->K;
    if (++dup_stamp == 0) { /* wrapped: reset the stamps once */
        memset(dup_tab, 0, sizeof dup_tab);
        dup_stamp = 1;
    }
    uint32_t k = dup_first(tk, req->K, mask, shift, dup_stamp);
    if (k == req->K)
        return FT_OK;
    uint32_t first = 0;
    while (tk[first] != tk[k])
        first++;
    RT_RETURN_ERROR_IF(1, FT_EREQUEST,
                       "tokens: position %u: token %u appears twice "
                       "(proposals %u and %u)", t, tk[k], first, k);
    return FT_OK;
}

static atomic_uint_fast64_t n_validations;

uint64_t fti_request_validations(void)
{
    return atomic_load_explicit(&n_validations, memory_order_relaxed);
}

static void count_validation(void)
{
    atomic_fetch_add_explicit(&n_validations, 1, memory_order_relaxed);
}

int ft_request_validate(const ft_request *req, uint32_t max_beam, char *errbuf,
                        size_t errlen)
{
    RT_RETURN_ERROR_IF(req == NULL, FT_EINVAL, "request: NULL");
    count_validation();
    int rc = validate_fields(req, max_beam, errbuf, errlen);
    for (uint32_t t = 0; rc == FT_OK && t < req->T; t++) {
        rc = validate_finite(req, t, errbuf, errlen);
        if (rc == FT_OK)
            rc = validate_distinct(req, t, errbuf, errlen);
    }
    return rc;
}

int fti_request_validate_early(const ft_request *req, uint32_t max_beam,
                               char *errbuf, size_t errlen)
{
    count_validation();
    int rc = validate_fields(req, max_beam, errbuf, errlen);
    for (uint32_t t = 0; rc == FT_OK && t < req->T; t++)
        rc = validate_finite(req, t, errbuf, errlen);
    if (rc != FT_OK)
        /* The one message ft_request_validate gives (a row fault: an
         * earlier row's duplicate comes first). */
        rc = ft_request_validate(req, max_beam, errbuf, errlen);
    return rc;
}

int fti_request_validate_fields(const ft_request *req, uint32_t max_beam,
                                char *errbuf, size_t errlen)
{
    return validate_fields(req, max_beam, errbuf, errlen);
}

int fti_request_validate_late(const ft_request *req, char *errbuf,
                              size_t errlen)
{
    count_validation();
    int rc = FT_OK;
    for (uint32_t t = 0; rc == FT_OK && t < req->T; t++)
        rc = validate_distinct(req, t, errbuf, errlen);
    return rc;
}

/* ---- preparation ---- */

struct fti_prep {
    fti_prepared pub;
    uint32_t cap; /* elements of tok and logp */
    uint32_t *tok;
    float *logp;
    uint32_t keff[FT_MAX_T];
    uint32_t row[FT_MAX_T];
    double F[FT_MAX_T + 1];
    uint64_t *keys; /* sort keys, FT_MAX_K */
};

int fti_prep_create(fti_prep **out)
{
    *out = NULL;
    fti_prep *p = calloc(1, sizeof *p);
    if (p == NULL)
        return FT_ENOMEM;
    p->keys = malloc(FT_MAX_K * sizeof *p->keys);
    if (p->keys == NULL) {
        free(p);
        return FT_ENOMEM;
    }
    *out = p;
    return FT_OK;
}

void fti_prep_destroy(fti_prep *p)
{
    if (p == NULL)
        return;
    free(p->tok);
    free(p->logp);
    free(p->keys);
    free(p);
}

/* No proposal better than the one before it (branch-free, in blocks as
 * any_nonfinite). */
static int row_sorted(const float *lp, uint32_t K)
{
    int acc[LANES] = {0}, bad = 0;
    size_t k = 1;
    for (; k + LANES <= K; k += LANES)
        for (int j = 0; j < LANES; j++)
            acc[j] |= lp[k + j] > lp[k + j - 1];
    for (; k < K; k++)
        bad |= lp[k] > lp[k - 1];
    for (int j = 0; j < LANES; j++)
        bad |= acc[j];
    return !bad;
}

static int u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int fti_request_prepare(const fti_prepared **out, fti_prep *p,
                        const ft_request *req)
{
    uint32_t T = req->T, K = req->K;
    if (T < 1 || T > FT_MAX_T || K < 1 || K > FT_MAX_K)
        return FT_EINVAL;
    fti_prepared *q = &p->pub;
    q->T = T;
    q->K = K;
    q->keff = p->keff;
    q->row = p->row;
    q->F = p->F;
    q->beam = req->beam;
    q->results = req->results ? req->results : req->beam;
    q->theta_tok = req->theta_tok;
    q->theta_sent = req->theta_sent;
    q->alpha = req->alpha;
    /* Model output usually arrives sorted: then the rows are used where
     * they are, no copy.  Else every row is copied into p (sorted if need
     * be; rows before the first unsorted one are known sorted): the key
     * (descending logp, then input index) makes the sort stable. */
    uint32_t first = 0; /* the first unsorted row, T if none */
    while (first < T && row_sorted(req->logp + (size_t)first * K, K))
        first++;
    q->tok = req->tokens;
    q->logp = req->logp;
    if (first < T) {
        if ((size_t)T * K > p->cap) {
            uint32_t *a = realloc(p->tok, (size_t)T * K * sizeof *a);
            if (a == NULL)
                return FT_ENOMEM;
            p->tok = a;
            float *b = realloc(p->logp, (size_t)T * K * sizeof *b);
            if (b == NULL)
                return FT_ENOMEM;
            p->logp = b;
            p->cap = T * K;
        }
        q->tok = p->tok;
        q->logp = p->logp;
    }
    for (uint32_t t = 0; t < T && first < T; t++) {
        const float *lp = req->logp + (size_t)t * K;
        const uint32_t *tk = req->tokens + (size_t)t * K;
        uint32_t *otk = p->tok + (size_t)t * K;
        float *olp = p->logp + (size_t)t * K;
        if (t < first || (t > first && row_sorted(lp, K))) {
            memcpy(otk, tk, K * sizeof *tk);
            memcpy(olp, lp, K * sizeof *lp);
        } else {
            for (uint32_t k = 0; k < K; k++)
                p->keys[k] = ((uint64_t)ft_sigma_key(lp[k]) << 32) | k;
            qsort(p->keys, K, sizeof *p->keys, u64_cmp);
            for (uint32_t k = 0; k < K; k++) {
                uint32_t src = (uint32_t)p->keys[k];
                otk[k] = tk[src];
                olp[k] = lp[src];
            }
        }
    }
    for (uint32_t t = 0; t < T; t++) {
        /* keff: the rows are sorted descending, so the proposals with
         * logp > theta_tok are a prefix, found by binary search. */
        const float *olp = q->logp + (size_t)t * K;
        uint32_t lo = 0, hi = K; /* olp[< lo] pass, olp[>= hi] do not */
        if (req->theta_tok == -INFINITY)
            lo = K;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (olp[mid] > req->theta_tok)
                lo = mid + 1;
            else
                hi = mid;
        }
        p->keff[t] = lo;
        p->row[t] = t * K;
    }
    p->F[0] = 1.0;
    for (uint32_t d = 1; d <= T; d++) {
        /* At the default alpha = 1, pow(x, 1) is x itself (glibc's pow
         * is within 0.52 ulp, and x is a double): T calls of pow saved,
         * a sixth of what the server spent on preparing a T = 8 request. */
        double x = 6.0 / (5.0 + (double)d);
        p->F[d] = req->alpha == 1.0 ? x : pow(x, req->alpha);
    }
    *out = q;
    return FT_OK;
}
