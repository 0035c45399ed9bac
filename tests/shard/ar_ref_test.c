/*
 * ar_ref_test.c - the autoregressive step against the independent
 * reference search (tests/support: docs/specification.md section 4 over a pointer trie) on
 * the randomized reference cases of search_ref_test: every request is
 * decoded one step at a time through ft_ar_step, every live beam given row
 * t of the grid at step t (sparse rows as they arrive, or dense rows over
 * the row's tokens, case by case), the steps' completed keys merged by
 * (score desc, step asc, place), and the result must equal the reference
 * bit for bit (tokens, values, scores, sigmas, order).  Vocabularies from
 * tiny to full 32-bit (high labels), thresholds, alphas, ties: whatever
 * su_make_request draws.
 *
 * Without arguments on the CPU step; with --gpu on the GPU step (exit 77
 * without a GPU).
 */
#include <math.h>
#include <unistd.h>

#include "search_util.h"

typedef struct ahit {
    uint32_t t, pos, parent, token;
    uint64_t value;
    double score;
    float sigma;
} ahit;

static int ahit_cmp(const void *a, const void *b)
{
    const ahit *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

typedef struct drv {
    ft_ar *ar;
    uint32_t cap, width;
    ft_ar_beams b[2];
    ft_ar_hits h;
    void *d_ids, *d_lp, *d_vocab;
    uint32_t *ids;
    float *lp;
    uint32_t *par, *tok;   /* [FT_MAX_T * cap] */
    ahit *all;
    size_t all_cap;
} drv;

static void drv_open(drv *d, const ft_index *idx, ft_engine_kind kind,
                     uint32_t cap, uint32_t width)
{
    memset(d, 0, sizeof *d);
    ft_ar_opts o;
    ft_ar_opts_init(&o);
    o.kind = kind;
    o.beam = cap;
    o.results = FT_MAX_RESULTS;
    o.max_width = width;
    char err[256];
    int rc = ft_ar_open(&d->ar, idx, &o, err, sizeof err);
    if (rc)
        fprintf(stderr, "ft_ar_open: %s\n", err);
    FT_PASS(rc);
    d->cap = cap;
    d->width = width;
    FT_PASS(ft_ar_beams_alloc(d->ar, &d->b[0]));
    FT_PASS(ft_ar_beams_alloc(d->ar, &d->b[1]));
    FT_PASS(ft_ar_hits_alloc(d->ar, &d->h));
    size_t cells = (size_t)cap * width;
    FT_PASS(ft_ar_alloc(d->ar, &d->d_ids, cells * 4));
    FT_PASS(ft_ar_alloc(d->ar, &d->d_lp, cells * 4));
    FT_PASS(ft_ar_alloc(d->ar, &d->d_vocab, (size_t)width * 4));
    d->ids = malloc(cells * 4);
    d->lp = malloc(cells * 4);
    d->par = malloc((size_t)FT_MAX_T * cap * 4);
    d->tok = malloc((size_t)FT_MAX_T * cap * 4);
    d->all_cap = (size_t)FT_MAX_T * FT_MAX_RESULTS;
    d->all = malloc(d->all_cap * sizeof *d->all);
    FT_CHECK(d->ids && d->lp && d->par && d->tok && d->all);
}

static void drv_close(drv *d)
{
    ft_ar_beams_free(d->ar, &d->b[0]);
    ft_ar_beams_free(d->ar, &d->b[1]);
    ft_ar_hits_free(d->ar, &d->h);
    ft_ar_free(d->ar, d->d_ids);
    ft_ar_free(d->ar, d->d_lp);
    ft_ar_free(d->ar, d->d_vocab);
    ft_ar_close(d->ar);
    free(d->ids);
    free(d->lp);
    free(d->par);
    free(d->tok);
    free(d->all);
}

#define GET(dst, src, bytes) FT_PASS(ft_ar_memcpy(d->ar, (dst), (src), (bytes), 0))

/* decode answers req through the step API into res. */
static void decode(drv *d, const ft_request *req, int dense, ft_result *res)
{
    uint32_t B = req->beam, n = req->results ? req->results : B, K = req->K;
    FT_PASS(ft_ar_configure(d->ar, B, n, req->theta_tok, req->theta_sent,
                            req->alpha));
    FT_PASS(ft_ar_reset(d->ar, &d->b[0], NULL));
    uint32_t m = 1;
    size_t na = 0;
    uint32_t hp[FT_MAX_RESULTS], ht[FT_MAX_RESULTS];
    uint64_t hv[FT_MAX_RESULTS];
    double hs[FT_MAX_RESULTS];
    float hg[FT_MAX_RESULTS];
    for (uint32_t t = 0; t < req->T && m > 0; t++) {
        for (uint32_t r = 0; r < m; r++) {
            memcpy(d->ids + (size_t)r * K, req->tokens + (size_t)t * K, K * 4);
            memcpy(d->lp + (size_t)r * K, req->logp + (size_t)t * K, K * 4);
        }
        ft_ar_input in;
        memset(&in, 0, sizeof in);
        in.form = dense ? FT_AR_IN_DENSE : FT_AR_IN_SPARSE;
        in.width = K;
        in.logp = d->d_lp;
        FT_PASS(ft_ar_memcpy(d->ar, d->d_lp, d->lp, (size_t)m * K * 4, 1));
        if (dense) {
            FT_PASS(ft_ar_memcpy(d->ar, d->d_vocab, req->tokens + (size_t)t * K,
                                 (size_t)K * 4, 1));
            in.vocab = d->d_vocab;
        } else {
            FT_PASS(ft_ar_memcpy(d->ar, d->d_ids, d->ids, (size_t)m * K * 4, 1));
            in.ids = d->d_ids;
        }
        ft_ar_beams *cur = &d->b[t & 1], *nxt = &d->b[(t + 1) & 1];
        int rc = ft_ar_step(d->ar, cur, &in, nxt, &d->h, NULL);
        if (rc)
            fprintf(stderr, "step: %s\n", ft_ar_error(d->ar));
        FT_PASS(rc);
        uint32_t nh;
        GET(&m, nxt->count, 4);
        GET(&nh, d->h.count, 4);
        FT_CHECK(m <= B && nh <= n);
        GET(d->par + (size_t)t * d->cap, nxt->parent, (size_t)m * 4);
        GET(d->tok + (size_t)t * d->cap, nxt->token, (size_t)m * 4);
        GET(hp, d->h.parent, (size_t)nh * 4);
        GET(ht, d->h.token, (size_t)nh * 4);
        GET(hv, d->h.value, (size_t)nh * 8);
        GET(hs, d->h.score, (size_t)nh * 8);
        GET(hg, d->h.sigma, (size_t)nh * 4);
        for (uint32_t i = 0; i < nh; i++) {
            FT_CHECK(na < d->all_cap);
            ahit *a = &d->all[na++];
            *a = (ahit){t, i, hp[i], ht[i], hv[i], hs[i], hg[i]};
        }
    }
    qsort(d->all, na, sizeof *d->all, ahit_cmp);
    res->n = 0;
    res->status = FT_OK;
    uint32_t used = 0;
    for (size_t i = 0; i < na && res->n < n; i++) {
        const ahit *a = &d->all[i];
        uint32_t *tk = res->tokens + used, p = a->parent;
        tk[a->t] = a->token;
        for (uint32_t s = a->t; s > 0; s--) {
            tk[s - 1] = d->tok[(size_t)(s - 1) * d->cap + p];
            p = d->par[(size_t)(s - 1) * d->cap + p];
        }
        ft_hit *o = &res->hits[res->n++];
        o->len = a->t + 1;
        o->tok_off = used;
        o->value = a->value;
        o->score = a->score;
        o->sigma = a->sigma;
        used += a->t + 1;
    }
}

int main(int argc, char **argv)
{
    int gpu = argc > 1 && strcmp(argv[1], "--gpu") == 0;
    static const su_lib_params libs[] = {
        {0, 200, 6}, {1, 1500, 8}, {2, 3000, 10}, {3, 800, 8}, {4, 4000, 12},
    };
    const uint32_t maxT = 9, maxK = 48, maxB = 40, nreq = 40;
    uint64_t cases = 0, hits = 0;
    for (size_t li = 0; li < sizeof libs / sizeof libs[0]; li++) {
        char path[] = "/tmp/ar_ref_test_XXXXXX";
        int fd = mkstemp(path);
        FT_CHECK(fd >= 0);
        close(fd);
        uint64_t s = 0x5eed0000ull + li;
        su_cases c;
        su_cases_make(&c, &s, &libs[li], nreq, maxT, maxK, maxB, path, 1);
        unlink(path);
        if (gpu && li == 0) {
            ft_ar_opts o;
            ft_ar_opts_init(&o);
            o.kind = FT_ENGINE_GPU;
            ft_ar *probe;
            char err[256];
            int rc = ft_ar_open(&probe, c.idx, &o, err, sizeof err);
            if (rc == FT_ENODEV || rc == FT_ENOTSUP) {
                printf("SKIP: no GPU step: %s\n", err);
                su_cases_free(&c);
                return FT_TEST_SKIP;
            }
            FT_PASS(rc);
            ft_ar_close(probe);
        }
        drv d;
        drv_open(&d, c.idx, gpu ? FT_ENGINE_GPU : FT_ENGINE_CPU, maxB, maxK);
        for (uint32_t i = 0; i < c.n; i++) {
            int dense = (int)((i + li) % 2);
            decode(&d, &c.cs[i].req, dense, &c.res[i]);
            char what[128];
            snprintf(what, sizeof what, "library %zu request %u (%s, T %u K %u "
                     "beam %u)", li, i, dense ? "dense" : "sparse",
                     c.cs[i].req.T, c.cs[i].req.K, c.cs[i].req.beam);
            if (!su_same_result(&c.res[i], c.cs[i].ref, c.cs[i].nref, what))
                return 1;
            cases++;
            hits += c.cs[i].nref;
        }
        drv_close(&d);
        su_cases_free(&c);
    }
    printf("ar_ref_test: %llu requests, %llu hits equal to the reference "
           "(%s step)\n", (unsigned long long)cases, (unsigned long long)hits,
           gpu ? "GPU" : "CPU");
    return 0;
}
