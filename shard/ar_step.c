/*
 * ar_step.c - autoregressive step sessions: options, state buffers and the
 * CPU step, the reference the GPU step (gpu_ar_step.c, kernels/ft_ar_step.cu)
 * matches bit for bit.  The rules (keys, normalisation) are ar_rules.h's,
 * shared with the kernels; docs/specification.md section 4's are rules.h's.
 *
 * The CPU step keeps the next beams and the completed keys in bounded
 * buffers of twice what it keeps: a full buffer is sorted and cut back,
 * and its last kept key becomes a cut-off that later candidates must beat.
 * Keys are unique (r and j differ), so the result does not depend on the
 * order candidates arrive in.
 */
#include <math.h>

#include "ar_step.h"

_Static_assert(FT_AR_IN_SPARSE == FT_ARR_SPARSE && FT_AR_IN_DENSE == FT_ARR_DENSE,
               "input forms");
_Static_assert(FT_AR_IN_F32 == FT_ARR_F32 && FT_AR_IN_F16 == FT_ARR_F16 &&
                   FT_AR_IN_BF16 == FT_ARR_BF16,
               "dtypes");
_Static_assert(FT_AR_NORM_NONE == FT_ARR_NORM_NONE &&
                   FT_AR_NORM_FULL == FT_ARR_NORM_FULL &&
                   FT_AR_NORM_ALLOWED == FT_ARR_NORM_ALLOWED,
               "normalisations");
_Static_assert(FT_AR_WIDTH_MAX == FT_AR_MAX_WIDTH, "row width");

void ft_ar_opts_init(ft_ar_opts *o)
{
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->kind = FT_ENGINE_CPU;
    o->beam = FT_DEFAULT_BEAM;
    o->theta_tok = -INFINITY;
    o->theta_sent = -INFINITY;
    o->alpha = 1.0;
}

static void fill_F(ft_ar *ar);

static int check_opts(ft_ar_opts *o, char *errbuf, size_t errlen)
{
    FT_RETURN_ERROR_IF(o->struct_size != sizeof *o, FT_EINVAL,
                       "ft_ar_opts: struct_size %u, expected %zu (call "
                       "ft_ar_opts_init)", o->struct_size, sizeof *o);
    FT_RETURN_ERROR_IF(o->kind != FT_ENGINE_CPU && o->kind != FT_ENGINE_GPU &&
                           o->kind != FT_ENGINE_AUTO,
                       FT_EINVAL, "kind: unknown engine kind %d", (int)o->kind);
    FT_RETURN_ERROR_IF(o->beam < 1 || o->beam > FT_MAX_BEAM, FT_EINVAL,
                       "beam: must be 1..%u, got %u", FT_MAX_BEAM, o->beam);
    if (o->results == 0)
        o->results = o->beam;
    FT_RETURN_ERROR_IF(o->results > FT_MAX_RESULTS, FT_EINVAL,
                       "results: must be 1..%u, got %u", FT_MAX_RESULTS,
                       o->results);
    FT_RETURN_ERROR_IF(isnan(o->theta_tok), FT_EINVAL, "theta_tok: NaN");
    FT_RETURN_ERROR_IF(isnan(o->theta_sent), FT_EINVAL, "theta_sent: NaN");
    FT_RETURN_ERROR_IF(!(o->alpha >= 0.0 && o->alpha <= 10.0), FT_EINVAL,
                       "alpha: must be 0..10, got %g", o->alpha);
    if (o->max_width == 0)
        o->max_width = 4096;
    FT_RETURN_ERROR_IF(o->max_width > FT_AR_WIDTH_MAX, FT_EINVAL,
                       "max_width: must be 1..%u, got %u", FT_AR_WIDTH_MAX,
                       o->max_width);
    return FT_OK;
}

int ft_ar_open(ft_ar **out, const ft_index *idx, const ft_ar_opts *opts,
               char *errbuf, size_t errlen)
{
    *out = NULL;
    FT_RETURN_ERROR_IF(idx == NULL, FT_EINVAL, "ft_ar_open: index is NULL");
    ft_ar *ar = calloc(1, sizeof *ar);
    if (ar == NULL)
        return FT_ENOMEM;
    ar->idx = idx;
    if (opts)
        ar->o = *opts;
    else
        ft_ar_opts_init(&ar->o);
    int rc = check_opts(&ar->o, errbuf, errlen);
    if (rc != FT_OK) {
        free(ar);
        return rc;
    }
    fill_F(ar);
    ar->cap_beam = ar->o.beam;
    ar->cap_results = ar->o.results;
    if (ar->o.kind != FT_ENGINE_CPU) {
        char why[200] = "";
        rc = ft_gpu_ar_open(ar, why, sizeof why);
        if (rc != FT_OK && ar->o.kind == FT_ENGINE_GPU) {
            fti_errf(errbuf, errlen, "%s", why);
            free(ar);
            return rc;
        }
        if (rc != FT_OK)
            FT_INFO("ar: CPU step (no GPU step: %s)", why);
        ar->o.kind = rc == FT_OK ? FT_ENGINE_GPU : FT_ENGINE_CPU;
    }
    if (ar->o.kind == FT_ENGINE_CPU) {
        ar->nb = malloc(2 * (size_t)ar->cap_beam * sizeof *ar->nb);
        ar->hb = malloc(2 * (size_t)ar->cap_results * sizeof *ar->hb);
        ar->lanes = malloc(FT_AR_LANES * sizeof *ar->lanes);
        if (!ar->nb || !ar->hb || !ar->lanes) {
            ft_ar_close(ar);
            return FT_ENOMEM;
        }
    }
    *out = ar;
    return FT_OK;
}

void ft_ar_close(ft_ar *ar)
{
    if (ar == NULL)
        return;
    if (ar->gpu)
        ft_gpu_ar_close(ar);
    free(ar->nb);
    free(ar->hb);
    free(ar->lanes);
    free(ar);
}

static void fill_F(ft_ar *ar)
{
    for (uint32_t d = 0; d < FT_AR_F_LEN; d++)
        ar->F[d] = pow(6.0 / (5.0 + (double)d), ar->o.alpha);
}

int ft_ar_configure(ft_ar *ar, uint32_t beam, uint32_t results,
                    float theta_tok, float theta_sent, double alpha)
{
    if (ar->failed)
        return FT_ESTATE;
    char *errbuf = ar->err;
    size_t errlen = sizeof ar->err;
    FT_RETURN_ERROR_IF(beam < 1 || beam > ar->cap_beam, FT_EINVAL,
                       "beam: must be 1..%u (the opened beam), got %u",
                       ar->cap_beam, beam);
    if (results == 0)
        results = beam;
    FT_RETURN_ERROR_IF(results > ar->cap_results, FT_EINVAL,
                       "results: must be 1..%u (the opened results), got %u",
                       ar->cap_results, results);
    FT_RETURN_ERROR_IF(isnan(theta_tok), FT_EINVAL, "theta_tok: NaN");
    FT_RETURN_ERROR_IF(isnan(theta_sent), FT_EINVAL, "theta_sent: NaN");
    FT_RETURN_ERROR_IF(!(alpha >= 0.0 && alpha <= 10.0), FT_EINVAL,
                       "alpha: must be 0..10, got %g", alpha);
    ar->o.beam = beam;
    ar->o.results = results;
    ar->o.theta_tok = theta_tok;
    ar->o.theta_sent = theta_sent;
    int same_alpha = ar->o.alpha == alpha;
    ar->o.alpha = alpha;
    if (!same_alpha)
        fill_F(ar);
    if (ar->gpu)
        return ft_gpu_ar_params(ar);
    return FT_OK;
}

int ft_ar_memcpy(ft_ar *ar, void *dst, const void *src, size_t bytes,
                 int to_session)
{
    if (ar->gpu)
        return ft_gpu_ar_memcpy(ar, dst, src, bytes, to_session);
    memmove(dst, src, bytes);
    return FT_OK;
}

ft_engine_kind ft_ar_kind(const ft_ar *ar) { return ar->o.kind; }

void ft_ar_get_opts(ft_ar_opts *o, const ft_ar *ar) { *o = ar->o; }

const char *ft_ar_error(const ft_ar *ar) { return ar ? ar->err : "ar: NULL"; }

/* ---- state buffers ---------------------------------------------------- */

static int mem_alloc(ft_ar *ar, void **p, size_t bytes)
{
    if (ar->gpu)
        return ft_gpu_ar_alloc(ar, p, bytes);
    *p = calloc(1, bytes);
    return *p ? FT_OK : FT_ENOMEM;
}

static void mem_free(ft_ar *ar, void *p)
{
    if (ar->gpu)
        ft_gpu_ar_free(ar, p);
    else
        free(p);
}

int ft_ar_alloc(ft_ar *ar, void **p, size_t bytes)
{
    return mem_alloc(ar, p, bytes);
}

void ft_ar_free(ft_ar *ar, void *p)
{
    if (p)
        mem_free(ar, p);
}

int ft_ar_beams_alloc(ft_ar *ar, ft_ar_beams *b)
{
    memset(b, 0, sizeof *b);
    size_t B = ar->cap_beam;
    if (mem_alloc(ar, (void **)&b->count, 4) ||
        mem_alloc(ar, (void **)&b->node, B * 8) ||
        mem_alloc(ar, (void **)&b->sigma, B * 4) ||
        mem_alloc(ar, (void **)&b->len, B * 4) ||
        mem_alloc(ar, (void **)&b->parent, B * 4) ||
        mem_alloc(ar, (void **)&b->entry, B * 4) ||
        mem_alloc(ar, (void **)&b->token, B * 4)) {
        ft_ar_beams_free(ar, b);
        return ar->gpu ? FT_ECUDA : FT_ENOMEM;
    }
    return FT_OK;
}

void ft_ar_beams_free(ft_ar *ar, ft_ar_beams *b)
{
    void *p[] = {b->count, b->node, b->sigma, b->len,
                 b->parent, b->entry, b->token};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        if (p[i])
            mem_free(ar, p[i]);
    memset(b, 0, sizeof *b);
}

int ft_ar_hits_alloc(ft_ar *ar, ft_ar_hits *h)
{
    memset(h, 0, sizeof *h);
    size_t n = ar->cap_results;
    if (mem_alloc(ar, (void **)&h->count, 4) ||
        mem_alloc(ar, (void **)&h->parent, n * 4) ||
        mem_alloc(ar, (void **)&h->entry, n * 4) ||
        mem_alloc(ar, (void **)&h->token, n * 4) ||
        mem_alloc(ar, (void **)&h->len, n * 4) ||
        mem_alloc(ar, (void **)&h->key_index, n * 8) ||
        mem_alloc(ar, (void **)&h->value, n * 8) ||
        mem_alloc(ar, (void **)&h->score, n * 8) ||
        mem_alloc(ar, (void **)&h->sigma, n * 4)) {
        ft_ar_hits_free(ar, h);
        return ar->gpu ? FT_ECUDA : FT_ENOMEM;
    }
    return FT_OK;
}

void ft_ar_hits_free(ft_ar *ar, ft_ar_hits *h)
{
    void *p[] = {h->count, h->parent, h->entry,  h->token, h->len,
                 h->key_index, h->value, h->score, h->sigma};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        if (p[i])
            mem_free(ar, p[i]);
    memset(h, 0, sizeof *h);
}

int ft_ar_reset(ft_ar *ar, ft_ar_beams *b, void *stream)
{
    if (ar->failed)
        return FT_ESTATE;
    if (ar->gpu)
        return ft_gpu_ar_reset(ar, b, stream);
    b->count[0] = 1;
    b->node[0] = FT_NODE_ROOT;
    b->sigma[0] = 0.0f;
    b->len[0] = 0;
    b->parent[0] = 0;
    b->entry[0] = 0;
    b->token[0] = 0;
    return FT_OK;
}

/* ---- input checks ----------------------------------------------------- */

static int check_input(ft_ar *ar, const ft_ar_input *in, int need_rows)
{
    char *errbuf = ar->err;
    size_t errlen = sizeof ar->err;
    FT_RETURN_ERROR_IF(in == NULL, FT_EINVAL, "input: NULL");
    FT_RETURN_ERROR_IF(in->form != FT_AR_IN_SPARSE && in->form != FT_AR_IN_DENSE,
                       FT_EINVAL, "input.form: unknown form %d", in->form);
    FT_RETURN_ERROR_IF(in->form == FT_AR_IN_DENSE && in->dtype != FT_AR_IN_F32 &&
                           in->dtype != FT_AR_IN_F16 && in->dtype != FT_AR_IN_BF16,
                       FT_EINVAL, "input.dtype: unknown dtype %d", in->dtype);
    FT_RETURN_ERROR_IF(in->form == FT_AR_IN_SPARSE && in->dtype != FT_AR_IN_F32,
                       FT_EINVAL, "input.dtype: sparse rows are f32, got %d",
                       in->dtype);
    FT_RETURN_ERROR_IF(in->norm != FT_AR_NORM_NONE &&
                           in->norm != FT_AR_NORM_FULL &&
                           in->norm != FT_AR_NORM_ALLOWED,
                       FT_EINVAL, "input.norm: unknown normalisation %d",
                       in->norm);
    FT_RETURN_ERROR_IF(in->width < 1 || in->width > ar->o.max_width, FT_EINVAL,
                       "input.width: must be 1..%u (max_width), got %u",
                       ar->o.max_width, in->width);
    FT_RETURN_ERROR_IF(in->stride != 0 && in->stride < in->width, FT_EINVAL,
                       "input.stride: %llu is less than width %u",
                       (unsigned long long)in->stride, in->width);
    FT_RETURN_ERROR_IF(need_rows && in->logp == NULL, FT_EINVAL,
                       "input.logp: NULL");
    FT_RETURN_ERROR_IF(in->form == FT_AR_IN_SPARSE && in->ids == NULL,
                       FT_EINVAL, "input.ids: NULL for sparse rows");
    FT_RETURN_ERROR_IF(in->form == FT_AR_IN_SPARSE && in->vocab != NULL,
                       FT_EINVAL, "input.vocab: only for dense rows");
    return FT_OK;
}

static int check_beams(ft_ar *ar, const ft_ar_beams *b, const char *what)
{
    char *errbuf = ar->err;
    size_t errlen = sizeof ar->err;
    FT_RETURN_ERROR_IF(b == NULL || !b->count || !b->node || !b->sigma ||
                           !b->len || !b->parent || !b->entry || !b->token,
                       FT_EINVAL, "%s: NULL array", what);
    return FT_OK;
}

/* ---- the CPU step ----------------------------------------------------- */

/* row is one beam's row as the CPU step reads it. */
typedef struct row {
    const ft_ar_input *in;
    const uint32_t *ids;
    const float *lp;   /* sparse */
    const void *dense; /* dense */
} row;

static row row_of(const ft_ar_input *in, uint32_t r)
{
    row w = {in, NULL, NULL, NULL};
    uint64_t stride = in->stride ? in->stride : in->width;
    uint64_t off = (uint64_t)r * stride;
    if (in->form == FT_AR_IN_SPARSE) {
        w.ids = in->ids + off;
        w.lp = (const float *)in->logp + off;
    } else {
        size_t esz = in->dtype == FT_AR_IN_F32 ? 4 : 2;
        w.dense = (const char *)in->logp + off * esz;
    }
    return w;
}

static inline uint32_t row_tok(const row *w, uint32_t j)
{
    if (w->ids)
        return w->ids[j];
    return w->in->vocab ? w->in->vocab[j] : j;
}

static inline float row_x(const row *w, uint32_t j)
{
    return w->lp ? w->lp[j] : ft_ar_load(w->dense, w->in->dtype, j);
}

/* row_lse computes a beam's normalisation (ar_rules.h); 0 = no entry can
 * be taken (no maximum). */
/* child_driven says whether a beam's entries are found from its children
 * (dense rows without a vocabulary: child label = column) rather than
 * from its row; both give the same entries, the GPU chooses alike. */
static int child_driven(const ft_ar_input *in, const ft_child_range *cr)
{
    return in->form == FT_AR_IN_DENSE && in->vocab == NULL &&
           cr->deg <= in->width;
}

static int row_lse(ft_ar *ar, const row *w, const ft_trie_view *v,
                   const ft_child_range *cr, double *lse)
{
    const ft_ar_input *in = w->in;
    int allowed = in->norm == FT_AR_NORM_ALLOWED;
    double *p = ar->lanes;
    float mx = -INFINITY;
    if (allowed && child_driven(in, cr)) {
        /* the same sums: a lane's children come in ascending label */
        uint64_t end = cr->first + cr->deg;
        for (uint64_t u = cr->first; u < end; u++) {
            uint32_t lab = ft_child_label(v, cr, u);
            if (lab >= in->width)
                break;
            float x = row_x(w, lab);
            if (x > mx)
                mx = x;
        }
        if (!(mx > -INFINITY))
            return 0;
        for (uint32_t l = 0; l < FT_AR_LANES; l++)
            p[l] = 0.0;
        for (uint64_t u = cr->first; u < end; u++) {
            uint32_t lab = ft_child_label(v, cr, u);
            if (lab >= in->width)
                break;
            double *s = &p[lab % FT_AR_LANES];
            *s = FT_DADD(*s, ft_ar_exp(FT_DSUB((double)row_x(w, lab), (double)mx)));
        }
        *lse = ft_ar_lse(mx, ft_ar_lanes_sum(p));
        return 1;
    }
    for (uint32_t j = 0; j < in->width; j++) {
        float x = row_x(w, j);
        if (x > mx && (!allowed || ft_find_child(v, cr, row_tok(w, j)) != FT_NONE))
            mx = x;
    }
    if (!(mx > -INFINITY))
        return 0;
    for (uint32_t l = 0; l < FT_AR_LANES; l++) {
        double s = 0.0;
        for (uint32_t j = l; j < in->width; j += FT_AR_LANES) {
            if (allowed && ft_find_child(v, cr, row_tok(w, j)) == FT_NONE)
                continue;
            s = FT_DADD(s, ft_ar_exp(FT_DSUB((double)row_x(w, j), (double)mx)));
        }
        p[l] = s;
    }
    *lse = ft_ar_lse(mx, ft_ar_lanes_sum(p));
    return 1;
}

static int cand_cmp(const void *a, const void *b)
{
    const ft_ar_cand *x = a, *y = b;
    if (x->k1 != y->k1)
        return x->k1 < y->k1 ? -1 : 1;
    return x->k2 < y->k2 ? -1 : x->k2 > y->k2;
}

/* bounded is a buffer of up to 2 * keep candidates with a cut-off. */
typedef struct bounded {
    ft_ar_cand *a;
    size_t len, keep;
    uint64_t cut1, cut2; /* keys at or after (cut1, cut2) are out */
    int cut;
} bounded;

static void bounded_push(bounded *b, const ft_ar_cand *c)
{
    if (b->cut && !ft_ar_before(c->k1, c->k2, b->cut1, b->cut2))
        return;
    if (b->len == 2 * b->keep) {
        qsort(b->a, b->len, sizeof *b->a, cand_cmp);
        b->len = b->keep;
        b->cut = 1;
        b->cut1 = b->a[b->keep - 1].k1;
        b->cut2 = b->a[b->keep - 1].k2;
        if (!ft_ar_before(c->k1, c->k2, b->cut1, b->cut2))
            return;
    }
    b->a[b->len++] = *c;
}

static size_t bounded_finish(bounded *b)
{
    qsort(b->a, b->len, sizeof *b->a, cand_cmp);
    return b->len < b->keep ? b->len : b->keep;
}

/* offer makes entry j of beam r (token tok, normalised rho) a candidate
 * when it passes the thresholds and labels a child. */
static void offer(ft_ar *ar, bounded *nb, bounded *hb, const ft_trie_view *v,
                  const ft_child_range *cr, uint32_t r, float s, uint32_t len,
                  uint32_t j, uint32_t tok, float rho, uint64_t u)
{
    if (!(rho > ar->o.theta_tok))
        return;
    float sig = FT_FADD(s, rho);
    if (!(sig > ar->o.theta_sent))
        return;
    if (u == FT_NONE)
        u = ft_find_child(v, cr, tok);
    if (u == FT_NONE)
        return;
    uint32_t fl = ft_node_flags(v, u);
    uint32_t d = len + 1 < FT_AR_F_LEN ? len + 1 : FT_AR_F_LEN - 1;
    ft_ar_cand c = {0, ft_ar_tail(r, rho, j), u, 0.0, sig, tok, len + 1};
    if (fl & FT_HAS_CHILD) {
        c.k1 = ft_sigma_key(sig);
        bounded_push(nb, &c);
    }
    if ((fl & FT_TERMINAL) && hb) {
        c.score = ft_score(sig, ar->F[d]);
        c.k1 = ft_score_key(c.score);
        bounded_push(hb, &c);
    }
}

static int cpu_step(ft_ar *ar, const ft_ar_beams *cur, const ft_ar_input *in,
                    ft_ar_beams *next, ft_ar_hits *hits)
{
    const ft_trie *t = &ar->idx->trie;
    const ft_trie_view *v = &t->view;
    uint32_t m = cur->count[0];
    if (m > ar->cap_beam) {
        fti_errf(ar->err, sizeof ar->err, "cur.count: %u beams, more than "
                 "beam %u", m, ar->cap_beam);
        return FT_EINVAL;
    }
    bounded nb = {ar->nb, 0, ar->o.beam, 0, 0, 0};
    bounded hb = {ar->hb, 0, ar->o.results, 0, 0, 0};
    for (uint32_t r = 0; r < m; r++) {
        uint64_t node = cur->node[r];
        if (node >= v->n_nodes) {
            fti_errf(ar->err, sizeof ar->err, "cur.node[%u]: %llu is no node "
                     "(the index has %llu)", r, (unsigned long long)node,
                     (unsigned long long)v->n_nodes);
            return FT_EINVAL;
        }
        ft_child_range cr = ft_children(v, node);
        if (cr.deg == 0)
            continue;
        row w = row_of(in, r);
        double lse = 0.0;
        if (in->norm != FT_AR_NORM_NONE && !row_lse(ar, &w, v, &cr, &lse))
            continue;
        float s = cur->sigma[r];
        uint32_t len = cur->len[r];
        if (child_driven(in, &cr)) {
            /* Labels ascend: those below width are a prefix. */
            for (uint64_t u = cr.first; u < cr.first + cr.deg; u++) {
                uint32_t lab = ft_child_label(v, &cr, u);
                if (lab >= in->width)
                    break;
                float x = row_x(&w, lab);
                float rho = in->norm ? ft_ar_norm(x, lse) : x;
                offer(ar, &nb, hits ? &hb : NULL, v, &cr, r, s, len, lab, lab,
                      rho, u);
            }
            continue;
        }
        for (uint32_t j = 0; j < in->width; j++) {
            float x = row_x(&w, j);
            float rho = in->norm ? ft_ar_norm(x, lse) : x;
            offer(ar, &nb, hits ? &hb : NULL, v, &cr, r, s, len, j,
                  row_tok(&w, j), rho, FT_NONE);
        }
    }
    size_t nn = bounded_finish(&nb);
    for (size_t i = 0; i < nn; i++) {
        const ft_ar_cand *c = &nb.a[i];
        next->node[i] = c->node;
        next->sigma[i] = c->sigma;
        next->len[i] = c->len;
        next->parent[i] = ft_ar_tail_rank(c->k2);
        next->entry[i] = ft_ar_tail_entry(c->k2);
        next->token[i] = c->token;
    }
    next->count[0] = (uint32_t)nn;
    if (hits) {
        size_t nh = bounded_finish(&hb);
        for (size_t i = 0; i < nh; i++) {
            const ft_ar_cand *c = &hb.a[i];
            uint64_t ki = ft_trie_term_rank(t, c->node);
            hits->parent[i] = ft_ar_tail_rank(c->k2);
            hits->entry[i] = ft_ar_tail_entry(c->k2);
            hits->token[i] = c->token;
            hits->len[i] = c->len;
            hits->key_index[i] = ki;
            hits->value[i] = ft_packed_get(t->values, t->value_bits,
                                           ki < t->n_keys ? ki : 0);
            hits->score[i] = c->score;
            hits->sigma[i] = c->sigma;
        }
        hits->count[0] = (uint32_t)nh;
    }
    return FT_OK;
}

int ft_ar_step(ft_ar *ar, const ft_ar_beams *cur, const ft_ar_input *in,
               ft_ar_beams *next, ft_ar_hits *hits, void *stream)
{
    if (ar->failed)
        return FT_ESTATE;
    int rc = check_input(ar, in, 1);
    if (rc == FT_OK)
        rc = check_beams(ar, cur, "cur");
    if (rc == FT_OK)
        rc = check_beams(ar, next, "next");
    if (rc != FT_OK)
        return rc;
    if (cur == next || cur->node == next->node) {
        fti_errf(ar->err, sizeof ar->err, "next: must not be cur");
        return FT_EINVAL;
    }
    if (hits && (!hits->count || !hits->parent || !hits->entry ||
                 !hits->token || !hits->len || !hits->key_index ||
                 !hits->value || !hits->score || !hits->sigma)) {
        fti_errf(ar->err, sizeof ar->err, "hits: NULL array");
        return FT_EINVAL;
    }
    if (ar->gpu)
        return ft_gpu_ar_step(ar, cur, in, next, hits, stream);
    return cpu_step(ar, cur, in, next, hits);
}

/* ---- mask and top-k forms --------------------------------------------- */

int ft_ar_mask(ft_ar *ar, const ft_ar_beams *cur, uint32_t width,
               const uint32_t *vocab, uint32_t eos, uint32_t *mask,
               void *stream)
{
    if (ar->failed)
        return FT_ESTATE;
    char *errbuf = ar->err;
    size_t errlen = sizeof ar->err;
    int rc = check_beams(ar, cur, "cur");
    if (rc != FT_OK)
        return rc;
    FT_RETURN_ERROR_IF(width < 1 || width > FT_AR_WIDTH_MAX, FT_EINVAL,
                       "width: must be 1..%u, got %u", FT_AR_WIDTH_MAX, width);
    FT_RETURN_ERROR_IF(mask == NULL, FT_EINVAL, "mask: NULL");
    if (ar->gpu)
        return ft_gpu_ar_mask(ar, cur, width, vocab, eos, mask, stream);
    const ft_trie_view *v = &ar->idx->trie.view;
    uint32_t words = (width + 31) / 32, m = cur->count[0];
    FT_RETURN_ERROR_IF(m > ar->cap_beam, FT_EINVAL,
                       "cur.count: %u beams, more than beam %u", m, ar->cap_beam);
    memset(mask, 0, (size_t)ar->cap_beam * words * 4);
    for (uint32_t r = 0; r < m; r++) {
        uint32_t *row = mask + (size_t)r * words;
        uint64_t node = cur->node[r];
        FT_RETURN_ERROR_IF(node >= v->n_nodes, FT_EINVAL,
                           "cur.node[%u]: %llu is no node", r,
                           (unsigned long long)node);
        ft_child_range cr = ft_children(v, node);
        if (vocab == NULL) {
            for (uint64_t u = cr.first; u < cr.first + cr.deg; u++) {
                uint32_t lab = ft_child_label(v, &cr, u);
                if (lab >= width)
                    break;
                row[lab / 32] |= 1u << (lab % 32);
            }
        } else if (cr.deg > 0) {
            for (uint32_t j = 0; j < width; j++)
                if (ft_find_child(v, &cr, vocab[j]) != FT_NONE)
                    row[j / 32] |= 1u << (j % 32);
        }
        if (eos < width && (ft_node_flags(v, node) & FT_TERMINAL) && node != 0)
            row[eos / 32] |= 1u << (eos % 32);
    }
    return FT_OK;
}

int ft_ar_topk(ft_ar *ar, const ft_ar_beams *cur, const ft_ar_input *in,
               uint32_t k, uint32_t *out_entry, uint32_t *out_token,
               float *out_logp, void *stream)
{
    if (ar->failed)
        return FT_ESTATE;
    char *errbuf = ar->err;
    size_t errlen = sizeof ar->err;
    int rc = check_input(ar, in, 1);
    if (rc == FT_OK)
        rc = check_beams(ar, cur, "cur");
    if (rc != FT_OK)
        return rc;
    FT_RETURN_ERROR_IF(k < 1 || k > 64, FT_EINVAL, "k: must be 1..64, got %u",
                       k);
    FT_RETURN_ERROR_IF(!out_entry || !out_token || !out_logp, FT_EINVAL,
                       "topk outputs: NULL array");
    if (ar->gpu)
        return ft_gpu_ar_topk(ar, cur, in, k, out_entry, out_token, out_logp,
                              stream);
    const ft_trie_view *v = &ar->idx->trie.view;
    uint32_t m = cur->count[0];
    FT_RETURN_ERROR_IF(m > ar->cap_beam, FT_EINVAL,
                       "cur.count: %u beams, more than beam %u", m, ar->cap_beam);
    for (uint32_t r = 0; r < ar->cap_beam; r++) {
        uint64_t keys[64];
        uint32_t nk = 0;
        uint64_t node = r < m ? cur->node[r] : FT_NONE;
        FT_RETURN_ERROR_IF(r < m && node >= v->n_nodes, FT_EINVAL,
                           "cur.node[%u]: %llu is no node", r,
                           (unsigned long long)node);
        ft_child_range cr = {0, 0, 0, 0};
        if (r < m)
            cr = ft_children(v, node);
        row w = row_of(in, r);
        double lse = 0.0;
        int live = r < m && cr.deg > 0 &&
                   (in->norm == FT_AR_NORM_NONE || row_lse(ar, &w, v, &cr, &lse));
        int cd = live && child_driven(in, &cr);
        uint64_t nit = !live ? 0 : cd ? cr.deg : in->width;
        for (uint64_t it = 0; it < nit; it++) {
            uint32_t j;
            if (cd) { /* children in label order: those below width */
                j = ft_child_label(v, &cr, cr.first + it);
                if (j >= in->width)
                    break;
            } else {
                j = (uint32_t)it;
            }
            float x = row_x(&w, j);
            float rho = in->norm ? ft_ar_norm(x, lse) : x;
            if (!(rho > ar->o.theta_tok) ||
                !(FT_FADD(cur->sigma[r], rho) > ar->o.theta_sent) ||
                (!cd && ft_find_child(v, &cr, row_tok(&w, j)) == FT_NONE))
                continue;
            uint64_t key = ft_ar_tail(0, rho, j);
            /* insertion into the sorted best k (a full list drops its last) */
            if (nk == k && key >= keys[k - 1])
                continue;
            uint32_t i = nk < k ? nk++ : k - 1;
            while (i > 0 && keys[i - 1] > key) {
                keys[i] = keys[i - 1];
                i--;
            }
            keys[i] = key;
        }
        for (uint32_t i = 0; i < k; i++) {
            size_t o = (size_t)r * k + i;
            if (i < nk) {
                uint32_t j = ft_ar_tail_entry(keys[i]);
                out_entry[o] = j;
                out_token[o] = row_tok(&w, j);
                out_logp[o] = ft_sigma_of_key((uint32_t)(keys[i] >> 20));
            } else {
                out_entry[o] = UINT32_MAX;
                out_token[o] = UINT32_MAX;
                out_logp[o] = -INFINITY;
            }
        }
    }
    return FT_OK;
}
