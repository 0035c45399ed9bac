/*
 * ar_step_test.c - the autoregressive step API (include/flashtrie.h,
 * "Autoregressive steps").
 *
 * Without arguments (CPU): exact error codes and messages for bad options
 * and inputs; one decode gives the same transcript (every step's beams,
 * completed keys, masks and top-k lists, byte for byte) whichever way its
 * rows arrive: dense f32 by identity, dense with a vocabulary, sparse,
 * dense bf16 and f16 of the same (representable) values, under each
 * normalisation; masks and top-k lists equal brute force over the trie;
 * the step's own exp and log are within a few ulps of libm's; a session
 * of 1 thread and sessions of 2, 3 and 5 that share out every call give
 * byte-identical transcripts.
 *
 * With --gpu: the same decodes on a CPU session and a GPU session give
 * byte-identical transcripts (lists long enough for the GPU's radix
 * select, high labels, every form, dtype and normalisation).  Exits 77
 * without a GPU.
 */
#include <math.h>

#include <sys/wait.h>
#include <unistd.h>

#include "ar_step.h"
#include "ar_vexp.h"
#include "flashtrie/internal/ar_rules.h"
#include "search_util.h"
#ifdef FT_HAVE_CUDA
#include "ft_ar_kernels.h" /* ft_ark_tuning: the whole-row kernel's settings */
#endif

#define V 96        /* dense width: tokens 0..V-1 (the keys go to 119) */
#define NKEYS 3000

static uint64_t seed = 12345;

typedef struct tbuf { /* a transcript */
    unsigned char *p;
    size_t len, cap;
} tbuf;

static void put(tbuf *t, const void *x, size_t n)
{
    if (t->len + n > t->cap) {
        t->cap = (t->len + n) * 2;
        t->p = realloc(t->p, t->cap);
        FT_CHECK(t->p != NULL);
    }
    memcpy(t->p + t->len, x, n);
    t->len += n;
}

/* rows fills m rows of width w (values on a coarse grid with -inf holes,
 * ties everywhere, or wide floats; a rare +inf or NaN, which no step may
 * take: in about half the rows, however wide, so that whole-row
 * normalisations of wide rows still take entries), deterministic in (s,
 * step). */
static void rows(float *x, uint32_t m, uint32_t w, uint64_t s, int coarse)
{
    uint64_t sp = w > 128 ? 331u * (uint64_t)(w / 128) : 331u;
    for (size_t i = 0; i < (size_t)m * w; i++) {
        uint64_t r = ft_test_rand(&s);
        if (r % 10 == 0)
            x[i] = -INFINITY;
        else if (r % sp == 1)
            x[i] = INFINITY;
        else if (r % sp == 2)
            x[i] = NAN;
        else if (coarse)
            x[i] = -(float)((r >> 8) % 33) * 0.25f;
        else
            x[i] = -(float)((r >> 8) % 1000000) * 1e-5f - (float)((r >> 40) % 3);
    }
}

static uint16_t to_bf16(float f) /* exact for the coarse values */
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

static uint16_t to_f16(float f) /* exact for 0, -inf and k/4, k <= 32 */
{
    if (f == 0.0f)
        return signbit(f) ? 0x8000u : 0;
    if (isnan(f))
        return 0x7e00u;
    if (isinf(f))
        return f > 0 ? 0x7c00u : 0xfc00u;
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t e = ((u >> 23) & 0xffu) - 127u + 15u, m = (u >> 13) & 0x3ffu;
    return (uint16_t)(0x8000u | (e << 10) | m);
}

enum form { F_DENSE_ID, F_DENSE_VOCAB, F_SPARSE, F_BF16, F_F16, F_SPARSE_WIDE };

typedef struct dec {
    ft_ar *ar;
    ft_ar_beams b[2];
    ft_ar_hits h;
    void *d_lp, *d_ids, *d_vocab, *d_mask, *d_te, *d_tt, *d_tl;
    void *d_cm, *d_out; /* constrain_check's two masks and its rows */
} dec;

/* dec_open's CPU threads (0: the default) and whether every call of 2+
 * beams is shared out over them (the session's size rule lowered). */
static uint32_t g_threads;
static int g_share_all;
/* decode's vocabulary for F_DENSE_VOCAB: 0 identity; else a random map
 * (columns sharing tokens, tokens no key has) of this seed */
static uint64_t g_vocab_seed;
/* decode's width of dense rows (V: the mask's and the sparse rows'
 * width; wider rows exercise the whole-row normalisation's parts of
 * 8,192 entries, loaded 16 bytes at a time where a row starts on 16
 * bytes) */
static uint32_t g_dense_w = V;

static void dec_open(dec *d, const ft_index *idx, ft_engine_kind kind,
                     uint32_t beam, uint32_t results, uint32_t width)
{
    ft_ar_opts o;
    ft_ar_opts_init(&o);
    o.kind = kind;
    o.threads = g_threads;
    o.beam = beam;
    o.results = results;
    o.max_width = width;
    char err[256];
    int rc = ft_ar_open(&d->ar, idx, &o, err, sizeof err);
    if (rc != FT_OK)
        fprintf(stderr, "ft_ar_open: %s\n", err);
    FT_PASS(rc);
    if (g_share_all)
        d->ar->par_work = 0;
    FT_PASS(ft_ar_beams_alloc(d->ar, &d->b[0]));
    FT_PASS(ft_ar_beams_alloc(d->ar, &d->b[1]));
    FT_PASS(ft_ar_hits_alloc(d->ar, &d->h));
    size_t cells = (size_t)beam * width;
    FT_PASS(ft_ar_alloc(d->ar, &d->d_lp, cells * 4));
    FT_PASS(ft_ar_alloc(d->ar, &d->d_ids, cells * 4));
    FT_PASS(ft_ar_alloc(d->ar, &d->d_vocab, (size_t)width * 4));
    /* masks are always V columns wide */
    FT_PASS(ft_ar_alloc(d->ar, &d->d_mask, (size_t)beam * ((V + 31) / 32) * 4));
    FT_PASS(ft_ar_alloc(d->ar, &d->d_te, (size_t)beam * 8 * 4));
    FT_PASS(ft_ar_alloc(d->ar, &d->d_tt, (size_t)beam * 8 * 4));
    FT_PASS(ft_ar_alloc(d->ar, &d->d_tl, (size_t)beam * 8 * 4));
    FT_PASS(ft_ar_alloc(d->ar, &d->d_cm, (size_t)beam * ((width + 31) / 32) * 8));
    FT_PASS(ft_ar_alloc(d->ar, &d->d_out, cells * 4));
}

static void dec_close(dec *d)
{
    ft_ar_beams_free(d->ar, &d->b[0]);
    ft_ar_beams_free(d->ar, &d->b[1]);
    ft_ar_hits_free(d->ar, &d->h);
    void *p[] = {d->d_lp, d->d_ids, d->d_vocab, d->d_mask, d->d_te, d->d_tt,
                 d->d_tl, d->d_cm, d->d_out};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        ft_ar_free(d->ar, p[i]);
    ft_ar_close(d->ar);
}

/* get copies n bytes of session memory into the transcript. */
static void get(dec *d, tbuf *t, const void *src, size_t n)
{
    unsigned char buf[1 << 16];
    FT_CHECK(n <= sizeof buf);
    FT_PASS(ft_ar_memcpy(d->ar, buf, src, n, 0));
    put(t, buf, n);
}

/* decode runs steps of beam B reading rows of form f and writes the
 * transcript; fn runs each step. */
typedef int (*step_fn)(dec *d, ft_ar_beams *cur, const ft_ar_input *in,
                       ft_ar_beams *nxt);

static int plain_step(dec *d, ft_ar_beams *cur, const ft_ar_input *in,
                      ft_ar_beams *nxt)
{
    return ft_ar_step(d->ar, cur, in, nxt, &d->h, NULL);
}

/* taken_finite checks that every beam and hit of a step, and every
 * top-k entry of the step's rows, came from a finite entry of its beam's
 * row x (w wide): +inf and NaN are never taken. */
static void taken_finite(dec *d, const ft_ar_beams *nxt, const float *x,
                         uint32_t w, uint32_t m, uint32_t nh, uint32_t cap)
{
    size_t n = (size_t)m + nh + (size_t)cap * 8;
    uint32_t *pa = malloc(n * 8 + 8), *en = pa + n;
    FT_CHECK(pa != NULL);
    FT_PASS(ft_ar_memcpy(d->ar, pa, nxt->parent, (size_t)m * 4, 0));
    FT_PASS(ft_ar_memcpy(d->ar, en, nxt->entry, (size_t)m * 4, 0));
    FT_PASS(ft_ar_memcpy(d->ar, pa + m, d->h.parent, (size_t)nh * 4, 0));
    FT_PASS(ft_ar_memcpy(d->ar, en + m, d->h.entry, (size_t)nh * 4, 0));
    FT_PASS(ft_ar_memcpy(d->ar, en + m + nh, d->d_te, (size_t)cap * 32, 0));
    for (size_t i = 0; i < n; i++) {
        if (i >= (size_t)m + nh) { /* top-k: rank r, slot (i - m - nh) % 8 */
            pa[i] = (uint32_t)((i - m - nh) / 8);
            if (en[i] == UINT32_MAX)
                continue;
        }
        FT_CHECK(pa[i] < cap && en[i] < w);
        float v = x[(size_t)pa[i] * w + en[i]];
        if (!isfinite(v)) {
            fprintf(stderr, "%s %zu took entry %u of row %u: %g\n",
                    i < m ? "beam" : i < (size_t)m + nh ? "hit" : "top-k",
                    i, en[i], pa[i], (double)v);
            exit(1);
        }
    }
    free(pa);
}

/* masked writes the rows of host (rows of w elements of esz bytes) with
 * every column whose bit in mask (rows of (w + 31) / 32 words) is clear
 * set to -inf's bits of dtype. */
static void masked(unsigned char *out, const unsigned char *host,
                   const uint32_t *mask, uint32_t rows, uint32_t w, int dtype)
{
    size_t esz = dtype == FT_AR_IN_F32 ? 4 : 2, words = (w + 31) / 32;
    uint32_t n32 = 0xff800000u;
    uint16_t n16 = dtype == FT_AR_IN_F16 ? 0xfc00u : 0xff80u;
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < w; j++) {
            size_t at = (r * w + j) * esz;
            if ((mask[r * words + j / 32] >> (j % 32)) & 1u)
                memcpy(out + at, host + at, esz);
            else
                memcpy(out + at, esz == 4 ? (const void *)&n32 : &n16, esz);
        }
}

/* constrain_check: ft_ar_constrain of the dense rows in (host: the same
 * rows in host memory) over cur is the mask of their width and
 * vocabulary (ft_ar_mask's, bit for bit) applied to them: out of place
 * over all cap rows (dead beams' rows all -inf), and in place over the
 * live beams' rows, the rows after them untouched. */
static void constrain_check(dec *d, const ft_ar_beams *cur,
                            const ft_ar_input *in, const void *host,
                            uint32_t cap)
{
    uint32_t w = in->width, words = (w + 31) / 32, eos = w - 2, m;
    size_t esz = in->dtype == FT_AR_IN_F32 ? 4 : 2, bytes = (size_t)cap * w * esz;
    size_t mb = (size_t)cap * words * 4;
    unsigned char *got = malloc(bytes), *want = malloc(bytes);
    uint32_t *m1 = malloc(mb), *m2 = malloc(mb), *d_m2 = (uint32_t *)d->d_cm + cap * words;
    FT_CHECK(got && want && m1 && m2);
    FT_PASS(ft_ar_constrain(d->ar, cur, in, cap, eos, d->d_cm, d->d_out, NULL));
    FT_PASS(ft_ar_memcpy(d->ar, got, d->d_out, bytes, 0));
    FT_PASS(ft_ar_memcpy(d->ar, m1, d->d_cm, mb, 0));
    FT_PASS(ft_ar_mask(d->ar, cur, w, in->vocab, eos, d_m2, NULL));
    FT_PASS(ft_ar_memcpy(d->ar, m2, d_m2, mb, 0));
    FT_CHECK(memcmp(m1, m2, mb) == 0);
    masked(want, host, m2, cap, w, in->dtype);
    FT_CHECK(memcmp(got, want, bytes) == 0);
    FT_PASS(ft_ar_memcpy(d->ar, &m, cur->count, 4, 0));
    if (m > 0) {
        ft_ar_input ip = *in;
        ip.logp = d->d_out;
        FT_PASS(ft_ar_memcpy(d->ar, d->d_out, host, bytes, 1));
        FT_PASS(ft_ar_constrain(d->ar, cur, &ip, m, eos, d->d_cm, d->d_out, NULL));
        FT_PASS(ft_ar_memcpy(d->ar, got, d->d_out, bytes, 0));
        size_t live = (size_t)m * w * esz;
        FT_CHECK(memcmp(got, want, live) == 0);
        FT_CHECK(memcmp(got + live, (const unsigned char *)host + live,
                        bytes - live) == 0);
    }
    free(got);
    free(want);
    free(m1);
    free(m2);
}

static void decode(dec *d, tbuf *t, int f, int norm, uint32_t B, uint32_t n,
                   uint32_t steps, uint64_t s0, int coarse, step_fn fn,
                   const uint32_t *wide_ids, uint32_t wide_n)
{
    ft_ar_opts o;
    ft_ar_get_opts(&o, d->ar);
    FT_PASS(ft_ar_configure(d->ar, B, n, f == F_SPARSE_WIDE ? -6.0f : -INFINITY,
                            coarse ? -30.0f : -INFINITY, 1.5));
    FT_PASS(ft_ar_reset(d->ar, &d->b[0], NULL));
    uint32_t w = V, cap = o.beam;
    if (f == F_SPARSE_WIDE)
        w = wide_n;
    else if (f != F_SPARSE)
        w = g_dense_w;
    float *x = malloc((size_t)cap * w * 4);
    uint32_t *ids = malloc((size_t)cap * w * 4);
    uint16_t *h16 = malloc((size_t)cap * w * 2);
    uint32_t *voc = malloc((size_t)w * 4);
    FT_CHECK(x && ids && h16 && voc);
    uint64_t vs = g_vocab_seed;
    for (uint32_t j = 0; j < w; j++) {
        voc[j] = j;
        if (vs) {
            vs ^= vs << 13;
            vs ^= vs >> 7;
            vs ^= vs << 17;
            voc[j] = vs % 5 == 0 ? 0xFFFFFFFFu : (uint32_t)(vs >> 24) % 130u;
        }
    }
    for (uint32_t step = 0; step < steps; step++) {
        ft_ar_beams *cur = &d->b[step & 1], *nxt = &d->b[(step + 1) & 1];
        rows(x, cap, w, s0 * 1000 + step, coarse);
        ft_ar_input in;
        memset(&in, 0, sizeof in);
        in.form = FT_AR_IN_DENSE;
        in.dtype = FT_AR_IN_F32;
        in.norm = norm;
        in.width = w;
        in.logp = d->d_lp;
        size_t cells = (size_t)cap * w;
        if (f == F_BF16 || f == F_F16) {
            for (size_t i = 0; i < cells; i++)
                h16[i] = f == F_BF16 ? to_bf16(x[i]) : to_f16(x[i]);
            in.dtype = f == F_BF16 ? FT_AR_IN_BF16 : FT_AR_IN_F16;
            FT_PASS(ft_ar_memcpy(d->ar, d->d_lp, h16, cells * 2, 1));
        } else {
            FT_PASS(ft_ar_memcpy(d->ar, d->d_lp, x, cells * 4, 1));
        }
        if (f == F_DENSE_VOCAB) {
            FT_PASS(ft_ar_memcpy(d->ar, d->d_vocab, voc, (size_t)w * 4, 1));
            in.vocab = d->d_vocab;
        }
        if (f == F_SPARSE || f == F_SPARSE_WIDE) {
            for (size_t i = 0; i < cells; i++)
                ids[i] = f == F_SPARSE ? (uint32_t)(i % w) : wide_ids[i % w];
            FT_PASS(ft_ar_memcpy(d->ar, d->d_ids, ids, cells * 4, 1));
            in.form = FT_AR_IN_SPARSE;
            in.ids = d->d_ids;
        }
        /* the mask and top-k forms of the current beams */
        uint32_t words = (V + 31) / 32;
        FT_PASS(ft_ar_mask(d->ar, cur, V, f == F_DENSE_VOCAB ? d->d_vocab : NULL,
                           V - 1, d->d_mask, NULL));
        get(d, t, d->d_mask, (size_t)cap * words * 4);
        FT_PASS(ft_ar_topk(d->ar, cur, &in, 8, d->d_te, d->d_tt, d->d_tl, NULL));
        get(d, t, d->d_te, (size_t)cap * 8 * 4);
        get(d, t, d->d_tt, (size_t)cap * 8 * 4);
        get(d, t, d->d_tl, (size_t)cap * 8 * 4);
        if (in.form == FT_AR_IN_DENSE && norm == FT_AR_NORM_NONE)
            constrain_check(d, cur, &in, in.dtype == FT_AR_IN_F32
                                             ? (const void *)x : h16, cap);
        FT_PASS(fn(d, cur, &in, nxt));
        uint32_t m, nh;
        FT_PASS(ft_ar_memcpy(d->ar, &m, nxt->count, 4, 0));
        FT_PASS(ft_ar_memcpy(d->ar, &nh, d->h.count, 4, 0));
        put(t, &m, 4);
        put(t, &nh, 4);
        get(d, t, nxt->node, (size_t)m * 8);
        get(d, t, nxt->sigma, (size_t)m * 4);
        get(d, t, nxt->len, (size_t)m * 4);
        get(d, t, nxt->parent, (size_t)m * 4);
        get(d, t, nxt->entry, (size_t)m * 4);
        get(d, t, nxt->token, (size_t)m * 4);
        get(d, t, d->h.parent, (size_t)nh * 4);
        get(d, t, d->h.entry, (size_t)nh * 4);
        get(d, t, d->h.token, (size_t)nh * 4);
        get(d, t, d->h.len, (size_t)nh * 4);
        get(d, t, d->h.key_index, (size_t)nh * 8);
        get(d, t, d->h.value, (size_t)nh * 8);
        get(d, t, d->h.score, (size_t)nh * 8);
        get(d, t, d->h.sigma, (size_t)nh * 4);
        taken_finite(d, nxt, x, w, m, nh, cap);
        if (m == 0)
            break;
    }
    free(x);
    free(ids);
    free(h16);
    free(voc);
}

static void same(const tbuf *a, const tbuf *b, const char *what)
{
    if (a->len != b->len || memcmp(a->p, b->p, a->len) != 0) {
        size_t i = 0;
        while (i < a->len && i < b->len && a->p[i] == b->p[i])
            i++;
        fprintf(stderr, "%s: transcripts differ (lengths %zu, %zu; first "
                "difference at byte %zu)\n", what, a->len, b->len, i);
        exit(1);
    }
}

static ft_index *make_index(const char *path, uint32_t *wide, uint32_t *nwide)
{
    su_key *keys = calloc(NKEYS, sizeof *keys);
    FT_CHECK(keys != NULL);
    for (size_t i = 0; i < NKEYS; i++) {
        su_key *k = &keys[i];
        k->len = 1 + (uint32_t)(ft_test_rand(&seed) % 6);
        for (uint32_t j = 0; j < k->len; j++) {
            uint64_t r = ft_test_rand(&seed);
            /* mostly small labels, some past V, a few high (>= 65536) */
            k->t[j] = r % 50 == 0 ? 70000u + (uint32_t)(r >> 8) % 20
                                  : (uint32_t)((r >> 8) % (j == 0 ? 120 : 24));
        }
        k->value = 1000 + i;
    }
    ft_index *idx;
    su_build(keys, NKEYS, path, &idx);
    *nwide = 0;
    for (uint32_t tk = 0; tk < 24; tk++)
        wide[(*nwide)++] = tk;
    for (uint32_t tk = 70000; tk < 70020; tk++)
        wide[(*nwide)++] = tk;
    free(keys);
    return idx;
}

static void test_errors(const ft_index *idx)
{
    ft_ar_opts o;
    ft_ar_opts_init(&o);
    char err[256];
    ft_ar *ar;
    o.beam = 0;
    FT_FAIL(ft_ar_open(&ar, idx, &o, err, sizeof err), FT_EINVAL);
    FT_CHECK_STR(err, "beam: must be 1..4096, got 0");
    ft_ar_opts_init(&o);
    o.max_width = FT_AR_WIDTH_MAX + 1;
    FT_FAIL(ft_ar_open(&ar, idx, &o, err, sizeof err), FT_EINVAL);
    FT_CHECK_STR(err, "max_width: must be 1..1048576, got 1048577");
    ft_ar_opts_init(&o);
    o.alpha = 11;
    FT_FAIL(ft_ar_open(&ar, idx, &o, err, sizeof err), FT_EINVAL);
    FT_CHECK_STR(err, "alpha: must be 0..10, got 11");
    ft_ar_opts_init(&o);
    o.threads = 257;
    FT_FAIL(ft_ar_open(&ar, idx, &o, err, sizeof err), FT_EINVAL);
    FT_CHECK_STR(err, "threads: must be 0..256, got 257");
    ft_ar_opts_init(&o);
    o.beam = 4;
    o.max_width = 16;
    FT_PASS(ft_ar_open(&ar, idx, &o, err, sizeof err));
    FT_FAIL(ft_ar_configure(ar, 5, 0, 0, 0, 1), FT_EINVAL);
    FT_CHECK_STR(ft_ar_error(ar), "beam: must be 1..4 (the opened beam), got 5");
    ft_ar_beams a, b;
    FT_PASS(ft_ar_beams_alloc(ar, &a));
    FT_PASS(ft_ar_beams_alloc(ar, &b));
    FT_PASS(ft_ar_reset(ar, &a, NULL));
    float lp[64] = {0};
    uint32_t ids[64] = {0};
    ft_ar_input in;
    memset(&in, 0, sizeof in);
    in.form = FT_AR_IN_SPARSE;
    in.width = 17;
    in.ids = ids;
    in.logp = lp;
    FT_FAIL(ft_ar_step(ar, &a, &in, &b, NULL, NULL), FT_EINVAL);
    FT_CHECK_STR(ft_ar_error(ar), "input.width: must be 1..16 (max_width), got 17");
    in.width = 4;
    in.stride = 3;
    FT_FAIL(ft_ar_step(ar, &a, &in, &b, NULL, NULL), FT_EINVAL);
    FT_CHECK_STR(ft_ar_error(ar), "input.stride: 3 is less than width 4");
    in.stride = 0;
    in.form = 7;
    FT_FAIL(ft_ar_step(ar, &a, &in, &b, NULL, NULL), FT_EINVAL);
    FT_CHECK_STR(ft_ar_error(ar), "input.form: unknown form 7");
    in.form = FT_AR_IN_SPARSE;
    in.vocab = ids;
    FT_FAIL(ft_ar_step(ar, &a, &in, &b, NULL, NULL), FT_EINVAL);
    FT_CHECK_STR(ft_ar_error(ar), "input.vocab: only for dense rows");
    in.vocab = NULL;
    in.norm = 3;
    FT_FAIL(ft_ar_step(ar, &a, &in, &b, NULL, NULL), FT_EINVAL);
    FT_CHECK_STR(ft_ar_error(ar), "input.norm: unknown normalisation 3");
    in.norm = 0;
    FT_FAIL(ft_ar_step(ar, &a, &in, &a, NULL, NULL), FT_EINVAL);
    FT_CHECK_STR(ft_ar_error(ar), "next: must not be cur");
    {
        /* next's arrays must not share bytes with cur's (only next == cur
         * was caught): an array of next inside one of cur, or one
         * running into it */
        ft_ar_beams c = b;
        c.sigma = (float *)a.node + 1;
        FT_FAIL(ft_ar_step(ar, &a, &in, &c, NULL, NULL), FT_EINVAL);
        FT_CHECK_STR(ft_ar_error(ar), "next.sigma overlaps cur.node: a step "
                                      "reads cur while it writes next");
        c = b;
        c.token = a.len - 1;
        FT_FAIL(ft_ar_step(ar, &a, &in, &c, NULL, NULL), FT_EINVAL);
        FT_CHECK_STR(ft_ar_error(ar), "next.token overlaps cur.len: a step "
                                      "reads cur while it writes next");
        /* hits' arrays: not in cur's, not in next's, not in each other */
        ft_ar_hits h;
        FT_PASS(ft_ar_hits_alloc(ar, &h));
        ft_ar_hits g = h;
        g.score = (double *)a.sigma;
        FT_FAIL(ft_ar_step(ar, &a, &in, &b, &g, NULL), FT_EINVAL);
        FT_CHECK_STR(ft_ar_error(ar), "hits.score overlaps cur.sigma: a step "
                                      "reads cur while it writes hits");
        g = h;
        g.count = b.count;
        FT_FAIL(ft_ar_step(ar, &a, &in, &b, &g, NULL), FT_EINVAL);
        FT_CHECK_STR(ft_ar_error(ar), "hits.count overlaps next.count: a step "
                                      "writes both");
        g = h;
        g.key_index = h.value + 1;
        FT_FAIL(ft_ar_step(ar, &a, &in, &b, &g, NULL), FT_EINVAL);
        FT_CHECK_STR(ft_ar_error(ar), "hits.value overlaps hits.key_index: a "
                                      "step writes both");
        c = b;
        c.len = c.parent;
        FT_FAIL(ft_ar_step(ar, &a, &in, &c, NULL, NULL), FT_EINVAL);
        FT_CHECK_STR(ft_ar_error(ar), "next.parent overlaps next.len: a step "
                                      "writes both");
        FT_PASS(ft_ar_step(ar, &a, &in, &b, &h, NULL));
        ft_ar_hits_free(ar, &h);
    }
    a.count[0] = 5;
    FT_FAIL(ft_ar_step(ar, &a, &in, &b, NULL, NULL), FT_EINVAL);
    FT_CHECK_STR(ft_ar_error(ar), "cur.count: 5 beams, more than beam 4");
    a.count[0] = 1;
    a.node[0] = 1u << 30;
    FT_FAIL(ft_ar_step(ar, &a, &in, &b, NULL, NULL), FT_EINVAL);
    FT_CHECK(strncmp(ft_ar_error(ar), "cur.node[0]: 1073741824 is no node", 34) == 0);
    FT_FAIL(ft_ar_topk(ar, &a, &in, 65, ids, ids, lp, NULL), FT_EINVAL);
    FT_CHECK_STR(ft_ar_error(ar), "k: must be 1..64, got 65");
    FT_FAIL(ft_ar_mask(ar, &a, 0, NULL, 0, ids, NULL), FT_EINVAL);
    FT_CHECK_STR(ft_ar_error(ar), "width: must be 1..1048576, got 0");
    /* the mask's and top-k's outputs: not in cur's arrays, not in each
     * other (top-k: beam 4 x k 2 entries each) */
    FT_FAIL(ft_ar_mask(ar, &a, 16, NULL, 0, a.len, NULL), FT_EINVAL);
    FT_CHECK_STR(ft_ar_error(ar), "mask overlaps cur.len: ft_ar_mask reads "
                                  "cur while it writes mask");
    FT_FAIL(ft_ar_topk(ar, &a, &in, 2, ids, ids + 4, lp, NULL), FT_EINVAL);
    FT_CHECK_STR(ft_ar_error(ar), "out_token overlaps out_entry: ft_ar_topk "
                                  "writes both");
    FT_FAIL(ft_ar_topk(ar, &a, &in, 2, ids, ids + 8, a.sigma, NULL), FT_EINVAL);
    FT_CHECK_STR(ft_ar_error(ar), "out_logp overlaps cur.sigma: ft_ar_topk "
                                  "reads cur while it writes out_logp");
    /* ft_ar_constrain: dense rows without a normalisation, rows 1..B, out
     * in place or apart from the rows, the mask apart from both; any width
     * (not bound by max_width), strided rows with their gaps untouched */
    FT_PASS(ft_ar_reset(ar, &a, NULL));
    {
        float cl[4 * 24], co[4 * 24];
        uint32_t cm[4];
        ft_ar_input ci;
        memset(&ci, 0, sizeof ci);
        ci.form = FT_AR_IN_SPARSE;
        ci.ids = ids;
        ci.width = 20;
        ci.stride = 24;
        ci.logp = cl;
        FT_FAIL(ft_ar_constrain(ar, &a, &ci, 4, 2, cm, co, NULL), FT_EINVAL);
        FT_CHECK_STR(ft_ar_error(ar), "input.form: ft_ar_constrain takes dense "
                                      "rows, got form 0");
        ci.form = FT_AR_IN_DENSE;
        ci.norm = FT_AR_NORM_FULL;
        FT_FAIL(ft_ar_constrain(ar, &a, &ci, 4, 2, cm, co, NULL), FT_EINVAL);
        FT_CHECK_STR(ft_ar_error(ar), "input.norm: ft_ar_constrain normalises "
                                      "nothing, got 1");
        ci.norm = FT_AR_NORM_NONE;
        FT_FAIL(ft_ar_constrain(ar, &a, &ci, 0, 2, cm, co, NULL), FT_EINVAL);
        FT_CHECK_STR(ft_ar_error(ar), "rows: must be 1..4 (beam), got 0");
        FT_FAIL(ft_ar_constrain(ar, &a, &ci, 5, 2, cm, co, NULL), FT_EINVAL);
        FT_CHECK_STR(ft_ar_error(ar), "rows: must be 1..4 (beam), got 5");
        FT_FAIL(ft_ar_constrain(ar, &a, &ci, 4, 2, cm, NULL, NULL), FT_EINVAL);
        FT_CHECK_STR(ft_ar_error(ar), "out: NULL");
        FT_FAIL(ft_ar_constrain(ar, &a, &ci, 4, 2, NULL, co, NULL), FT_EINVAL);
        FT_CHECK_STR(ft_ar_error(ar), "mask: NULL");
        FT_FAIL(ft_ar_constrain(ar, &a, &ci, 4, 2, cm, cl + 1, NULL), FT_EINVAL);
        FT_CHECK_STR(ft_ar_error(ar), "out overlaps input.logp: it must be "
                                      "input.logp (in place) or share no byte "
                                      "with it");
        FT_FAIL(ft_ar_constrain(ar, &a, &ci, 4, 2, (uint32_t *)cl + 90, co,
                                NULL), FT_EINVAL);
        FT_CHECK_STR(ft_ar_error(ar), "mask overlaps input.logp: "
                                      "ft_ar_constrain writes the mask before "
                                      "it reads the rows");
        FT_FAIL(ft_ar_constrain(ar, &a, &ci, 4, 2, (uint32_t *)co, co, NULL),
                FT_EINVAL);
        FT_CHECK_STR(ft_ar_error(ar), "mask overlaps out: ft_ar_constrain "
                                      "writes the mask before it reads the "
                                      "rows");
        FT_FAIL(ft_ar_constrain(ar, &a, &ci, 4, 2, a.len, co, NULL), FT_EINVAL);
        FT_CHECK_STR(ft_ar_error(ar), "mask overlaps cur.len: ft_ar_mask reads "
                                      "cur while it writes mask");
        ci.width = 4; /* one row of 4: cur.sigma's 16 bytes exactly */
        FT_FAIL(ft_ar_constrain(ar, &a, &ci, 1, 2, cm, a.sigma, NULL),
                FT_EINVAL);
        FT_CHECK_STR(ft_ar_error(ar), "out overlaps cur.sigma: "
                                      "ft_ar_constrain reads cur while it "
                                      "writes out");
        ci.width = 20;
        for (int i = 0; i < 4 * 24; i++) {
            cl[i] = (float)i + 0.5f;
            co[i] = -7.0f;
        }
        FT_PASS(ft_ar_constrain(ar, &a, &ci, 4, 2, cm, co, NULL));
        ft_node_children ch;
        FT_PASS(ft_index_children(&ch, idx, FT_NODE_ROOT));
        int kept = 0;
        for (uint32_t r = 0; r < 4; r++)
            for (uint32_t j = 0; j < 24; j++) {
                uint64_t pos;
                float x = co[r * 24 + j];
                if (j >= 20)
                    FT_CHECK(x == -7.0f); /* the gap */
                else if (r == 0 &&
                         ft_index_child_find(&pos, idx, &ch, j) == FT_OK)
                    FT_CHECK(x == cl[j] && ++kept);
                else
                    FT_CHECK(x == -INFINITY);
            }
        FT_CHECK(kept > 10);
        /* in place: the same, the gaps as they were */
        FT_PASS(ft_ar_constrain(ar, &a, &ci, 4, 2, cm, cl, NULL));
        for (uint32_t i = 0; i < 4 * 24; i++)
            FT_CHECK(i % 24 >= 20 ? cl[i] == (float)i + 0.5f
                                  : memcmp(&cl[i], &co[i], 4) == 0);
    }
    ft_ar_beams_free(ar, &a);
    ft_ar_beams_free(ar, &b);
    ft_ar_close(ar);
}

/* test_brute checks one CPU mask and top-k against the trie walked with
 * the public navigation calls. */
static void test_brute(const ft_index *idx)
{
    dec d;
    dec_open(&d, idx, FT_ENGINE_CPU, 16, 16, V);
    FT_PASS(ft_ar_reset(d.ar, &d.b[0], NULL));
    float x[16 * V];
    rows(x, 16, V, 99, 0);
    ft_ar_input in;
    memset(&in, 0, sizeof in);
    in.form = FT_AR_IN_DENSE;
    in.width = V;
    in.logp = x;
    FT_PASS(ft_ar_step(d.ar, &d.b[0], &in, &d.b[1], &d.h, NULL));
    uint32_t m = d.b[1].count[0];
    FT_CHECK(m == 16);
    uint32_t mask[16 * 3], te[16 * 8], tt[16 * 8];
    float tl[16 * 8];
    FT_PASS(ft_ar_mask(d.ar, &d.b[1], V, NULL, 2, mask, NULL));
    rows(x, 16, V, 100, 0);
    FT_PASS(ft_ar_topk(d.ar, &d.b[1], &in, 8, te, tt, tl, NULL));
    for (uint32_t r = 0; r < m; r++) {
        ft_node_children ch;
        FT_PASS(ft_index_children(&ch, idx, d.b[1].node[r]));
        uint32_t want[3] = {0, 0, 0};
        for (uint64_t i = 0; i < ch.count; i++) {
            uint32_t lab = ft_index_child_label(idx, &ch, i);
            if (lab < V)
                want[lab / 32] |= 1u << (lab % 32);
        }
        uint64_t val;
        if (ft_index_node_value(&val, idx, d.b[1].node[r]) == FT_OK)
            want[0] |= 4u;
        FT_CHECK(memcmp(want, mask + r * 3, sizeof want) == 0);
        /* top-k: the best allowed entries by (logp desc, j asc) */
        uint32_t got = 0;
        for (uint32_t i = 0; i < 8; i++) {
            float best = -INFINITY;
            uint32_t bj = UINT32_MAX;
            for (uint32_t j = 0; j < V; j++) {
                float v = x[r * V + j];
                uint64_t pos;
                if (!isfinite(v) ||
                    ft_index_child_find(&pos, idx, &ch, j) != FT_OK)
                    continue;
                int taken = 0;
                for (uint32_t q = 0; q < i; q++)
                    taken |= te[r * 8 + q] == j;
                if (!taken && (bj == UINT32_MAX || v > best)) {
                    best = v;
                    bj = j;
                }
            }
            FT_CHECK_EQ_U64(te[r * 8 + i], bj);
            if (bj != UINT32_MAX) {
                FT_CHECK(tt[r * 8 + i] == bj && tl[r * 8 + i] == best);
                got++;
            } else {
                FT_CHECK(tt[r * 8 + i] == UINT32_MAX && isinf(tl[r * 8 + i]));
            }
        }
        (void)got;
    }
    /* masks through a vocabulary (columns -> tokens): columns sharing a
     * token, tokens no key holds, 0xFFFFFFFF, tokens past V; the same
     * array changed in place between calls, and other widths (the
     * session keeps the last vocabulary inverted while it is the same) */
    uint32_t voc[V + 40];
    uint64_t sd = 4242;
    for (int round = 0; round < 6; round++) {
        uint32_t width = round < 3 ? V : V + 40 - 7 * round;
        for (uint32_t j = 0; j < width; j++) {
            sd ^= sd << 13;
            sd ^= sd >> 7;
            sd ^= sd << 17;
            uint32_t k = (uint32_t)(sd % 10);
            voc[j] = k == 0 ? 0xFFFFFFFFu : k == 1 ? 70000u + (uint32_t)(sd % 30)
                   : k == 2 ? voc[sd % (j + 1)] : (uint32_t)(sd >> 20) % 125u;
        }
        if (round == 1)
            voc[5] = voc[6]; /* in place: the same array, new contents */
        uint32_t words = (width + 31) / 32;
        uint32_t *vm = calloc((size_t)16 * words, 4);
        FT_CHECK(vm != NULL);
        FT_PASS(ft_ar_mask(d.ar, &d.b[1], width, voc, 3, vm, NULL));
        for (uint32_t r = 0; r < m; r++) {
            ft_node_children ch;
            FT_PASS(ft_index_children(&ch, idx, d.b[1].node[r]));
            uint64_t val;
            int term = ft_index_node_value(&val, idx, d.b[1].node[r]) == FT_OK;
            for (uint32_t j = 0; j < width; j++) {
                uint64_t pos;
                int want = ft_index_child_find(&pos, idx, &ch, voc[j]) == FT_OK ||
                           (j == 3 && term);
                int got = (vm[r * words + j / 32] >> (j % 32)) & 1u;
                if (want != got) {
                    fprintf(stderr, "vocabulary mask round %d, beam %u, column "
                            "%u (token %u): %d, brute force %d\n", round, r, j,
                            voc[j], got, want);
                    exit(1);
                }
            }
        }
        free(vm);
    }
    dec_close(&d);
}

/* rowterms8_same: ft_ar_row_terms8 of eight values (each <= m), bit for
 * bit ft_ar_row_term of each; and ft_ar_chunk_sums8 of eight such chunks
 * (the values rotated), ft_ar_chunk_sum's of each. */
static void rowterms8_same(const float *x, float m)
{
    ft_v8f v = {x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]};
    ft_v8f e = ft_ar_row_terms8(v, m);
    ft_v8f ch[8];
    float want[8];
    for (int i = 0; i < 8; i++) {
        float a = e[i], b = ft_ar_row_term(x[i], m);
        if (memcmp(&a, &b, 4) != 0) {
            fprintf(stderr, "ft_ar_row_terms8(%.9g, %.9g) = %.9g, "
                    "ft_ar_row_term: %.9g\n", x[i], m, a, b);
            exit(1);
        }
        float c[8];
        for (int k = 0; k < 8; k++)
            c[k] = ch[i][k] = e[(i + k) % 8] * (float)(1 + ((i * k) & 3));
        want[i] = ft_ar_chunk_sum(c);
    }
    ft_v8f cs = ft_ar_chunk_sums8(ch);
    for (int i = 0; i < 8; i++) {
        float a = cs[i];
        if (memcmp(&a, &want[i], 4) != 0) {
            fprintf(stderr, "ft_ar_chunk_sums8: chunk %d %.9g, want %.9g\n",
                    i, a, want[i]);
            exit(1);
        }
    }
}

/* ulps_apart counts the binary32 values between a and b (both >= 0). */
static int64_t ulps_apart(float a, float b)
{
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    return ia > ib ? (int64_t)ia - ib : (int64_t)ib - ia;
}

static void test_math(void)
{
    /* the eight-wide terms of the CPU step's whole-row normalisation:
     * the scalar's bits, on the edges (-inf, the -86 clamp, zeros, ties
     * of the rounding to n) and on random values */
    float edge[] = {-INFINITY, -86.0f, nextafterf(-86.0f, 0.0f),
                    nextafterf(-86.0f, -1000.0f), -0.0f, 0.0f, -1e-38f,
                    -0.34657359f, -0.3465736f, -1.03972077f, -0.693147181f,
                    -745.0f, -85.9999924f, -1.5f * 0.693147181f,
                    -2.5f * 0.693147181f, -1e-30f, -70.5f, -3.0e38f};
    size_t ne = sizeof edge / sizeof edge[0];
    for (size_t i = 0; i + 8 <= ne; i++) {
        rowterms8_same(edge + i, 0.0f);
        rowterms8_same(edge + i, -0.0f);
        rowterms8_same(edge + i, 2.5f);
        rowterms8_same(edge + i, 3.0e38f);
    }
    uint64_t x = 99991;
    for (int i = 0; i < 200000; i++) {
        float d[8];
        for (int k = 0; k < 8; k++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            double u = (double)(x >> 11) / 9007199254740992.0;
            d[k] = (float)(-u * (i % 3 == 0 ? 100.0 : i % 3 == 1 ? 30.0 : 1.0));
        }
        rowterms8_same(d, i % 5 == 0 ? 1.75f : 0.0f);
    }
    /* ar_rules.h's exps within 2 ulp (ft_ar_expf) and 1 ulp (ft_ar_expr)
     * of the true value (libm's exp in binary64, rounded) over every
     * binary32 in [-86, 0] a stride apart; ft_ar_expf is 0 below */
    int64_t worst = 0, worst_r = 0;
    for (float d = -86.0f; d <= 0.0f; d = nextafterf(d, 1.0f)) {
        float a = ft_ar_expf(d), b = (float)exp((double)d);
        float r = ft_ar_expr(d);
        int64_t u = ulps_apart(a, b), ur = ulps_apart(r, b);
        if (u > worst)
            worst = u;
        if (ur > worst_r)
            worst_r = ur;
        if (u > 2 || ur > 1) {
            fprintf(stderr, "ft_ar_expf(%.9g) = %.9g, ft_ar_expr %.9g, exp: "
                    "%.9g (%lld, %lld ulp)\n", d, a, r, b, (long long)u,
                    (long long)ur);
            exit(1);
        }
        /* every 31st float: 34M of the 2.1G in the range */
        for (int k = 0; k < 30 && d < 0.0f; k++)
            d = nextafterf(d, 1.0f);
    }
    FT_CHECK(worst >= 1 && worst_r >= 1);
    printf("ar_step_test: ft_ar_expf within %lld ulp, ft_ar_expr within %lld "
           "ulp of exp on [-86, 0]\n", (long long)worst, (long long)worst_r);
    FT_CHECK(ft_ar_expr(0.0f) == 1.0f && ft_ar_row_term(5.0f, 5.0f) == 1.0f);
    FT_CHECK(ft_ar_row_term(-INFINITY, 0.0f) == ft_ar_expr(-86.0f));
    FT_CHECK(ft_ar_expr(-86.0f) > 0.0f && ft_ar_expr(-86.0f) < 4.5e-38f);
    /* ft_f16_to_f32 (branch-free) on every binary16, against its value
     * (-1)^s 2^(e-15) (1 + m/1024), or 2^-14 m/1024 for e = 0, in
     * binary64; inf and NaN by their bits */
    for (uint32_t h = 0; h < 65536; h++) {
        uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
        float got = ft_f16_to_f32((uint16_t)h);
        uint32_t gb;
        memcpy(&gb, &got, 4);
        if (e == 0x1fu) {
            FT_CHECK(gb == (((h & 0x8000u) << 16) | 0x7f800000u | (m << 13)));
            continue;
        }
        double v = e ? ldexp(1.0 + m / 1024.0, (int)e - 15) : ldexp(m / 1024.0, -14);
        if (h & 0x8000u)
            v = -v;
        if ((double)got != v || !!signbit(got) != !!(h & 0x8000u)) {
            fprintf(stderr, "ft_f16_to_f32(0x%04x) = %.9g, want %.9g\n", h,
                    got, v);
            exit(1);
        }
    }
    FT_CHECK(ft_ar_expf(nextafterf(-86.0f, -100.0f)) == 0.0f);
    FT_CHECK(ft_ar_expf(-INFINITY) == 0.0f);
    FT_CHECK(ft_ar_expf(0.0f) == 1.0f);
    FT_CHECK(isnan(ft_ar_expf(NAN)));
    for (int i = 0; i <= 20000; i++) {
        double s = 1.0 + i * 0.37;
        double la = ft_ar_log(s), lb = log(s);
        FT_CHECK(fabs(la - lb) <= 4e-16 * (lb > 1 ? lb : 1));
    }
}

/* test_threads: every form and normalisation, a session of one thread
 * against sessions whose calls (step, mask, top-k) are all shared out
 * over 2, 3 and 5 threads: byte-identical transcripts. */
static void test_threads(const ft_index *idx, const uint32_t *wide,
                         uint32_t nwide)
{
    int forms[] = {F_DENSE_ID, F_DENSE_VOCAB, F_SPARSE, F_BF16, F_F16,
                   F_SPARSE_WIDE};
    uint32_t beams[] = {7, 64, 300}, threads[] = {2, 3, 5};
    int cases = 0;
    for (int fi = 0; fi < 6; fi++)
        for (int norm = 0; norm < 3; norm++)
            for (int bi = 0; bi < 3; bi++) {
                int coarse = (fi + norm + bi) % 2 || fi == F_BF16 || fi == F_F16;
                uint32_t B = beams[bi], n = bi == 2 ? 1000 : B + 3;
                uint32_t w = fi == F_SPARSE_WIDE ? nwide : V;
                tbuf ref = {0};
                dec d;
                g_threads = 1;
                g_share_all = 0;
                dec_open(&d, idx, FT_ENGINE_CPU, B, n, w);
                decode(&d, &ref, forms[fi], norm, B, n, 6, 7 + bi, coarse,
                       plain_step, wide, nwide);
                dec_close(&d);
                for (int ti = 0; ti < 3; ti++) {
                    tbuf t = {0};
                    g_threads = threads[ti];
                    g_share_all = 1;
                    dec_open(&d, idx, FT_ENGINE_CPU, B, n, w);
                    FT_CHECK_EQ_U64(d.ar->o.threads, threads[ti]);
                    decode(&d, &t, forms[fi], norm, B, n, 6, 7 + bi, coarse,
                           plain_step, wide, nwide);
                    /* the calls of 2+ beams were shared out */
                    FT_CHECK(d.ar->pool != NULL);
                    char what[96];
                    snprintf(what, sizeof what, "1 vs %u threads (form %d, "
                             "norm %d, beam %u)", threads[ti], fi, norm, B);
                    same(&ref, &t, what);
                    dec_close(&d);
                    free(t.p);
                    cases++;
                }
                free(ref.p);
            }
    g_threads = 0;
    g_share_all = 0;
    printf("ar_step_test: threads: %d decodes equal one thread's\n", cases);
}

/* test_inverse: decodes through random vocabularies, every call of a
 * session finding its columns through the inverted vocabulary against a
 * session asking every column's token: identical transcripts (step,
 * mask and top-k; 1 and 3 threads). */
/* cpu_vs_gpu decodes the same rows (form f, normalisation norm, beam B,
 * n results, w wide, seed s0) on a CPU and a GPU session and checks the
 * transcripts byte for byte. */
static void cpu_vs_gpu(const ft_index *idx, int f, int norm, uint32_t B,
                       uint32_t n, uint32_t w, uint64_t s0, int coarse,
                       const uint32_t *wide, uint32_t nwide)
{
    dec c, g;
    dec_open(&c, idx, FT_ENGINE_CPU, B, n, w);
    dec_open(&g, idx, FT_ENGINE_GPU, B, n, w);
    tbuf tc = {0}, tg = {0};
    decode(&c, &tc, f, norm, B, n, 6, s0, coarse, plain_step, wide, nwide);
    decode(&g, &tg, f, norm, B, n, 6, s0, coarse, plain_step, wide, nwide);
    char what[128];
    snprintf(what, sizeof what, "CPU vs GPU (form %d, norm %d, beam %u, "
             "%u wide)", f, norm, B, w);
    same(&tc, &tg, what);
    free(tc.p);
    free(tg.p);
    dec_close(&c);
    dec_close(&g);
}

/* cpu_open opens a CPU session of beam beams and results, threads
 * threads and rows up to width wide, with two beam sets, a reset to the
 * root; cpu_close frees them. */
static ft_ar *cpu_open(const ft_index *idx, uint32_t beam, uint32_t threads,
                       uint32_t width, ft_ar_beams *a, ft_ar_beams *b)
{
    ft_ar_opts o;
    ft_ar_opts_init(&o);
    o.kind = FT_ENGINE_CPU;
    o.beam = beam;
    o.results = beam;
    o.threads = threads;
    o.max_width = width;
    ft_ar *ar;
    char err[256];
    FT_PASS(ft_ar_open(&ar, idx, &o, err, sizeof err));
    FT_PASS(ft_ar_beams_alloc(ar, a));
    FT_PASS(ft_ar_beams_alloc(ar, b));
    FT_PASS(ft_ar_reset(ar, a, NULL));
    return ar;
}

static void cpu_close(ft_ar *ar, ft_ar_beams *a, ft_ar_beams *b)
{
    ft_ar_beams_free(ar, a);
    ft_ar_beams_free(ar, b);
    ft_ar_close(ar);
}

/* full_lse_def is a whole row's lse (x: f32 values, w wide) from ar_rules.h's
 * definition, one entry at a time (the CPU step loads, takes maxima and
 * exps eight at a time, and sums eight chunks at once): per part of
 * 8,192 its maximum, its chunks' pairwise binary32 sums into 256 lanes in
 * ascending chunk, the lanes' tree; then the parts' products and their
 * tree.  0 when the row has no maximum. */
static int full_lse_def(const float *x, uint32_t w, double *lse)
{
    float m[FT_AR_MAX_PARTS];
    double s[FT_AR_MAX_PARTS], z[FT_AR_MAX_PARTS], lanes[FT_AR_PART_LANES];
    uint32_t n = (w + 8191) / 8192;
    int bad = 0;
    for (uint32_t q = 0; q < n; q++) {
        uint32_t j0 = q * 8192, np = w - j0 < 8192 ? w - j0 : 8192;
        m[q] = -INFINITY;
        for (uint32_t j = 0; j < np; j++) {
            if (isnan(x[j0 + j]) || x[j0 + j] == INFINITY)
                bad = 1;
            if (x[j0 + j] > m[q])
                m[q] = x[j0 + j];
        }
        s[q] = 0.0;
        if (bad || m[q] == -INFINITY)
            continue;
        for (uint32_t l = 0; l < 256; l++)
            lanes[l] = 0.0;
        for (uint32_t c = 0; 8 * c < np; c++) {
            float e[8];
            for (uint32_t i = 0; i < 8; i++) {
                float d = 8 * c + i < np ? x[j0 + 8 * c + i] - m[q] : 0.0f;
                e[i] = 8 * c + i >= np ? 0.0f : ft_ar_expr(d < -86.0f ? -86.0f : d);
            }
            float cs = ((e[0] + e[1]) + (e[2] + e[3])) + ((e[4] + e[5]) + (e[6] + e[7]));
            lanes[c % 256] += (double)cs;
        }
        s[q] = ft_ar_lanes_sum(lanes, 256);
    }
    if (bad) {
        *lse = NAN;
        return 1;
    }
    float mx = -INFINITY;
    for (uint32_t q = 0; q < n; q++)
        if (m[q] > mx)
            mx = m[q];
    if (mx == -INFINITY)
        return 0;
    for (uint32_t q = 0; q < FT_AR_MAX_PARTS; q++) {
        float d = q < n ? m[q] - mx : 0.0f;
        z[q] = q < n && m[q] > -INFINITY
                   ? s[q] * (double)ft_ar_expr(d < -86.0f ? -86.0f : d)
                   : 0.0;
    }
    *lse = (double)mx + ft_ar_log(ft_ar_lanes_sum(z, FT_AR_MAX_PARTS));
    return 1;
}

/* full_norm_check takes one step of ar from a over the dense row logp
 * (width W, dtype dt) normalised over the whole row, and checks every next
 * beam's sigma against (float)((double)x - lse), x the row as floats;
 * what names the case in a failure.  Returns the next beams' count. */
static uint32_t full_norm_check(ft_ar *ar, ft_ar_beams *a, ft_ar_beams *b,
                                int dt, uint32_t W, const void *logp,
                                const float *x, double lse, const char *what)
{
    ft_ar_input in;
    memset(&in, 0, sizeof in);
    in.form = FT_AR_IN_DENSE;
    in.dtype = dt;
    in.norm = FT_AR_NORM_FULL;
    in.width = W;
    in.logp = logp;
    FT_PASS(ft_ar_step(ar, a, &in, b, NULL, NULL));
    for (uint32_t i = 0; i < b->count[0]; i++) {
        float want = ft_ar_norm(x[b->token[i]], lse);
        if (memcmp(&want, &b->sigma[i], 4) != 0) {
            fprintf(stderr, "%s%s: beam %u (token %u): sigma %.9g, want "
                    "%.9g\n", what, ar->no_fma ? " without FMA" : "", i,
                    b->token[i], (double)b->sigma[i], (double)want);
            exit(1);
        }
    }
    return b->count[0];
}

/* test_full_norm_ref: one step from the root over a whole-row
 * normalisation (f32 and bf16 rows, widths that are and are not a
 * multiple of 8, one and several parts, -inf holes, a part of -inf only,
 * a NaN or a +inf in the last part): every next beam's sigma is
 * (float)((double)x - lse) with lse computed by full_lse_def, with the
 * clones for AVX2 and FMA and without them (no_fma: fmaf calls, as on a
 * CPU without); rows with a NaN or +inf, or with no maximum, take
 * nothing. */
static void test_full_norm_ref(const ft_index *idx)
{
    uint32_t widths[] = {3000, 4099, 17, 8, 8203, 20000, 16384, 24576 + 70};
    for (int k = 0; k < 48; k++) {
        int wi = k % 8, bf = k / 8 % 2, nf = k / 16 % 3 == 1,
            kind = k / 16 % 3; /* 1: no FMA; 2: holes, NaN, +inf */
        uint32_t W = widths[wi];
        ft_ar_beams a, b;
        ft_ar *ar = cpu_open(idx, 16, 0, W, &a, &b);
        ar->no_fma = nf;
        float *x = malloc((size_t)W * 4);
        uint16_t *h = malloc((size_t)W * 2);
        FT_CHECK(x && h);
        uint64_t sd = 4242 + W * 2 + (uint64_t)bf;
        for (uint32_t j = 0; j < W; j++) {
            uint64_t r = ft_test_rand(&sd);
            x[j] = r % 7 == 0 ? -INFINITY
                              : -(float)((r >> 8) % 1000000) * 3e-5f +
                                    (float)(j / 8192) * 7.5f;
        }
        int special = kind == 2 ? wi % 4 : 0; /* 1 -inf part, 2 NaN, 3 +inf */
        if (special == 1 && W > 8192) /* the second part */
            for (uint32_t j = 8192; j < W && j < 16384; j++)
                x[j] = -INFINITY;
        else if (special == 1)
            for (uint32_t j = 0; j < W; j++)
                x[j] = -INFINITY;
        if (special >= 2)
            x[W - 1 - W / 3] = special == 2 ? NAN : INFINITY;
        if (bf)
            for (uint32_t j = 0; j < W; j++) {
                h[j] = to_bf16(x[j]);
                x[j] = ft_bf16_to_f32(h[j]);
            }
        double lse = 0.0;
        int has = full_lse_def(x, W, &lse);
        char what[64];
        snprintf(what, sizeof what, "width %u %s", W, bf ? "bf16" : "f32");
        uint32_t got = full_norm_check(
            ar, &a, &b, bf ? FT_AR_IN_BF16 : FT_AR_IN_F32, W,
            bf ? (const void *)h : (const void *)x, x, lse, what);
        if (!has || isnan(lse)) {
            FT_CHECK(special == 1 ? !has && W <= 8192 : special >= 2);
            FT_CHECK(got == 0);
        } else {
            FT_CHECK(special == 0 || (special == 1 && W > 8192));
            FT_CHECK(got > 0);
        }
        free(x);
        free(h);
        cpu_close(ar, &a, &b);
    }
}

/* test_full_norm_random: the same against full_lse_def on random widths
 * (1 to 40,000), dtypes (f32, bf16, f16: f16 rows of random negative
 * normal values and -inf holes, by their bits) and offsets of the row in
 * its buffer (rows that do not start on 16 bytes), with the FMA clones
 * and without. */
static void test_full_norm_random(const ft_index *idx)
{
    uint64_t sd = 777;
    uint32_t checked = 0;
    for (int k = 0; k < 40; k++) {
        uint32_t W = 1 + (uint32_t)(ft_test_rand(&sd) % 40000);
        int dt = (int)(ft_test_rand(&sd) % 3), nf = k % 2;
        uint32_t off = (uint32_t)(ft_test_rand(&sd) % 8);
        ft_ar_beams a, b;
        ft_ar *ar = cpu_open(idx, 16, 0, W, &a, &b);
        ar->no_fma = nf;
        float *x = malloc((size_t)W * 4), *xs = malloc(((size_t)W + 8) * 4);
        uint16_t *h = malloc(((size_t)W + 8) * 2);
        FT_CHECK(x && xs && h);
        for (uint32_t j = 0; j < W; j++) {
            uint64_t r = ft_test_rand(&sd);
            uint16_t hb = 0;
            if (dt == 2) { /* f16: -(2^(e-15)) (1 + m/1024), e 8..18 */
                hb = r % 7 == 0 ? 0xfc00u
                                : (uint16_t)(0x8000u | ((8 + (r >> 8) % 11) << 10) |
                                             ((r >> 16) & 0x3ffu));
                x[j] = ft_f16_to_f32(hb);
            } else {
                x[j] = r % 7 == 0 ? -INFINITY
                                  : -(float)((r >> 8) % 1000000) * 2e-5f +
                                        (float)((r >> 40) % 5);
                if (dt == 1) {
                    hb = to_bf16(x[j]);
                    x[j] = ft_bf16_to_f32(hb);
                }
            }
            h[off + j] = hb;
            xs[off + j] = x[j];
        }
        double lse = 0.0;
        int has = full_lse_def(x, W, &lse);
        FT_CHECK(has && !isnan(lse));
        char what[64];
        snprintf(what, sizeof what, "random width %u dtype %d offset %u", W,
                 dt, off);
        checked += full_norm_check(
            ar, &a, &b,
            dt == 0 ? FT_AR_IN_F32 : dt == 1 ? FT_AR_IN_BF16 : FT_AR_IN_F16, W,
            dt == 0 ? (const void *)(xs + off) : (const void *)(h + off), x,
            lse, what);
        free(x);
        free(xs);
        free(h);
        cpu_close(ar, &a, &b);
    }
    FT_CHECK(checked >= 40 * 8);
    printf("ar_step_test: whole-row normalisation = its definition on 40 "
           "random rows (%u beams)\n", checked);
}

/* test_par_full: a whole-row normalisation reads the whole row, however
 * few children a beam has, so a call of few children but wide rows is
 * shared over the session's threads (its workers start), while the same
 * call without a normalisation stays on one thread. */
static void test_par_full(const ft_index *idx)
{
    const uint32_t W = 9000, B = 4;
    ft_ar_beams a, b;
    ft_ar *ar = cpu_open(idx, B, 2, W, &a, &b);
    /* a row per beam (B rows of W) */
    float *x = malloc((size_t)B * W * 4);
    FT_CHECK(x != NULL);
    for (uint32_t j = 0; j < B * W; j++)
        x[j] = -(float)(j % 97) * 0.01f;
    ft_ar_input in;
    memset(&in, 0, sizeof in);
    in.form = FT_AR_IN_DENSE;
    in.dtype = FT_AR_IN_F32;
    in.norm = FT_AR_NORM_NONE;
    in.width = W;
    in.logp = x;
    FT_PASS(ft_ar_step(ar, &a, &in, &b, NULL, NULL));
    FT_CHECK(b.count[0] >= 2);
    FT_PASS(ft_ar_step(ar, &b, &in, &a, NULL, NULL));
    FT_CHECK(ar->pool == NULL); /* children only: one thread */
    in.norm = FT_AR_NORM_FULL;
    FT_PASS(ft_ar_step(ar, &b, &in, &a, NULL, NULL));
    FT_CHECK(ar->pool != NULL); /* whole rows: shared out */
    free(x);
    cpu_close(ar, &a, &b);
}

static void test_inverse(const ft_index *idx)
{
    int cases = 0;
    for (int norm = 0; norm < 3; norm++)
        for (uint32_t thr = 1; thr <= 3; thr += 2)
            for (uint64_t seed = 1; seed <= 3; seed++) {
                dec a, b;
                tbuf ta = {0}, tb = {0};
                g_threads = thr;
                g_share_all = thr > 1;
                g_vocab_seed = seed * 7919;
                dec_open(&a, idx, FT_ENGINE_CPU, 40, 50, V);
                dec_open(&b, idx, FT_ENGINE_CPU, 40, 50, V);
                b.ar->inv_off = 1;
                decode(&a, &ta, F_DENSE_VOCAB, norm, 40, 50, 6, seed, 0,
                       plain_step, NULL, 0);
                decode(&b, &tb, F_DENSE_VOCAB, norm, 40, 50, 6, seed, 0,
                       plain_step, NULL, 0);
                char what[96];
                snprintf(what, sizeof what, "vocabulary inverted vs asked "
                         "(norm %d, threads %u, seed %llu)", norm, thr,
                         (unsigned long long)seed);
                same(&ta, &tb, what);
                FT_CHECK(ta.len > 1000);
                dec_close(&a);
                dec_close(&b);
                free(ta.p);
                free(tb.p);
                cases++;
            }
    g_threads = 0;
    g_share_all = 0;
    g_vocab_seed = 0;
    printf("ar_step_test: %d decodes through random vocabularies equal\n",
           cases);
}

/* test_fork: a session whose workers started, used in a child of fork()
 * (which has none of them): the child's steps start workers of its own
 * and give the parent's transcript; then the parent's session still
 * runs, and both close.  A hang is bounded by alarm(). */
static void test_fork(const ft_index *idx)
{
    dec d;
    g_threads = 3;
    g_share_all = 1;
    dec_open(&d, idx, FT_ENGINE_CPU, 64, 67, V);
    tbuf ref = {0};
    decode(&d, &ref, F_DENSE_ID, 1, 64, 67, 6, 5, 0, plain_step, NULL, 0);
    FT_CHECK(d.ar->pool != NULL);
    fflush(NULL);
    pid_t pid = fork();
    FT_CHECK(pid >= 0);
    if (pid == 0) {
        alarm(60);
        tbuf t = {0};
        decode(&d, &t, F_DENSE_ID, 1, 64, 67, 6, 5, 0, plain_step, NULL, 0);
        int ok = t.len == ref.len && memcmp(t.p, ref.p, t.len) == 0 &&
                 d.ar->pool != NULL;
        dec_close(&d);
        _exit(ok ? 0 : 1);
    }
    int st = 0;
    FT_CHECK(waitpid(pid, &st, 0) == pid);
    FT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    tbuf t = {0};
    decode(&d, &t, F_DENSE_ID, 1, 64, 67, 6, 5, 0, plain_step, NULL, 0);
    same(&ref, &t, "the parent after a fork");
    dec_close(&d);
    free(ref.p);
    free(t.p);
    g_threads = 0;
    g_share_all = 0;
    printf("ar_step_test: a session's workers after fork(): ok\n");
}

/* ---- walk ---------------------------------------------------------------- */

/* ref_walk is ft_ar_walk's rule for one row that was at from, through the
 * public index calls, each child found by scanning the labels in order. */
static int64_t ref_walk(const ft_index *idx, int64_t from, const int64_t *ids,
                        uint32_t len, const uint32_t *vocab, uint32_t vl,
                        int64_t eos)
{
    if (from == FT_AR_DONE)
        return FT_AR_DONE;
    for (uint32_t i = 0; i < len; i++)
        if (eos >= 0 && ids[i] == eos)
            return FT_AR_DONE;
    if (from == FT_AR_DEAD)
        return FT_AR_DEAD;
    uint64_t u = (uint64_t)from;
    for (uint32_t i = 0; i < len; i++) {
        int64_t id = ids[i];
        uint64_t tok;
        if (vocab)
            tok = id >= 0 && id < (int64_t)vl ? vocab[id] : UINT64_MAX;
        else
            tok = id >= 0 && id <= 0xFFFFFFFFll ? (uint64_t)id : UINT64_MAX;
        if (tok == UINT64_MAX)
            return FT_AR_DEAD;
        ft_node_children ch;
        FT_PASS(ft_index_children(&ch, idx, u));
        uint64_t c = UINT64_MAX;
        for (uint64_t k = 0; k < ch.count; k++)
            if (ft_index_child_label(idx, &ch, k) == tok)
                c = ch.first + k;
        if (c == UINT64_MAX)
            return FT_AR_DEAD;
        u = c;
    }
    return (int64_t)u;
}

/* walk_rows fills rows x stride ids: from each row's start (from[r], a
 * node, or the root when it is none), mostly paths of the trie (model ids
 * of child labels, through the vocabulary's first id of a token), mixed
 * with ids no key continues, ids outside the vocabulary or 32 bits,
 * negative ids and eos. */
static void walk_rows(const ft_index *idx, int64_t *ids, uint32_t rows,
                      uint32_t len, uint64_t stride, const int64_t *from,
                      const uint32_t *vocab, uint32_t vl, int64_t eos,
                      uint64_t *s)
{
    for (uint32_t r = 0; r < rows; r++) {
        uint64_t u = from && from[r] >= 0 ? (uint64_t)from[r] : FT_NODE_ROOT;
        int off = 0;
        for (uint64_t i = 0; i < stride; i++) {
            int64_t *x = &ids[(size_t)r * stride + i];
            uint64_t q = ft_test_rand(s) % 100;
            ft_node_children ch;
            FT_PASS(ft_index_children(&ch, idx, u));
            *x = (int64_t)(ft_test_rand(s) % 300) - 20;
            if (i >= len) {
                *x = eos; /* past the row: never read */
            } else if (q < 3 && eos >= 0) {
                *x = eos;
            } else if (q < 6) {
                *x = q == 3 ? INT64_MIN : q == 4 ? (int64_t)1 << 33 : -2;
            } else if (!off && ch.count > 0 && q < 94) {
                uint64_t k = ft_test_rand(s) % ch.count;
                uint32_t tok = ft_index_child_label(idx, &ch, k);
                int64_t id = -1;
                if (vocab == NULL)
                    id = tok;
                else
                    for (uint32_t j = 0; j < vl && id < 0; j++)
                        if (vocab[j] == tok)
                            id = j;
                if (id >= 0 && id != eos) {
                    *x = id;
                    u = ch.first + k;
                    continue;
                }
            }
            off = 1;
        }
    }
}

/* One ft_ar_walk call's arguments, in host memory (lens, from NULL: not
 * passed). */
typedef struct walk_args {
    const int64_t *ids, *from;
    const uint32_t *lens, *vocab;
    uint32_t rows, len, vl;
    uint64_t stride;
    int stride0; /* pass stride 0 (rows packed len apart) */
    int64_t eos;
} walk_args;

/* put_session copies n bytes of host memory into new session memory
 * (NULL for NULL). */
static void *put_session(ft_ar *ar, const void *src, size_t n)
{
    if (src == NULL)
        return NULL;
    void *d = NULL;
    FT_PASS(ft_ar_alloc(ar, &d, n + 8));
    if (n)
        FT_PASS(ft_ar_memcpy(ar, d, src, n, 1));
    return d;
}

/* walk_on runs ft_ar_walk through session memory and returns the states
 * (host memory, rows entries); with in_place, state is the copy of from. */
static int64_t *walk_on(ft_ar *ar, const walk_args *a, int in_place)
{
    size_t rows = a->rows;
    void *d_ids = put_session(ar, a->ids, rows * a->stride * 8);
    void *d_lens = put_session(ar, a->lens, rows * 4);
    void *d_from = put_session(ar, a->from, rows * 8);
    void *d_vocab = put_session(ar, a->vocab, (size_t)a->vl * 4);
    void *d_state = in_place && d_from ? d_from : NULL;
    if (d_state == NULL)
        FT_PASS(ft_ar_alloc(ar, &d_state, rows * 8 + 8));
    FT_PASS(ft_ar_walk(ar, d_ids, a->rows, a->len, a->stride0 ? 0 : a->stride,
                       d_lens, d_from, d_vocab, a->vl, a->eos, d_state, NULL));
    int64_t *st = malloc(rows * 8 + 8);
    FT_CHECK(st != NULL);
    if (rows)
        FT_PASS(ft_ar_memcpy(ar, st, d_state, rows * 8, 0));
    if (d_state != d_from)
        ft_ar_free(ar, d_state);
    void *p[] = {d_ids, d_lens, d_from, d_vocab};
    for (size_t i = 0; i < 4; i++)
        ft_ar_free(ar, p[i]);
    return st;
}

/* test_walk: ft_ar_walk of a session of kind (CPU: against ref_walk;
 * GPU: against a CPU session's) over random rows, every stride,
 * vocabulary and eos, from the root and from earlier states (nodes,
 * DEAD, DONE) with rows of their own lengths, state written over from;
 * a CPU session's threads give the same states; bad arguments are
 * refused by name. */
/* ft_ar_mask and ft_ar_constrain take ft_ar_walk's states as nodes: a
 * beam at FT_AR_DEAD or FT_AR_DONE allows eos alone (nothing when eos is
 * past the width), a node past the index's is refused by a CPU session
 * naming the beam. */
static void test_mask_states(const ft_index *idx, ft_engine_kind kind)
{
    ft_ar *ar;
    ft_ar_opts o;
    ft_ar_opts_init(&o);
    o.beam = 6;
    o.kind = kind;
    char err[256];
    FT_PASS(ft_ar_open(&ar, idx, &o, err, sizeof err));
    enum { W = 130, WORDS = (W + 31) / 32 };
    ft_node_children root;
    FT_PASS(ft_index_children(&root, idx, FT_NODE_ROOT));
    /* a node that ends a key and one that does not (besides the root) */
    uint64_t term = FT_NONE, inner = FT_NONE;
    for (uint64_t c = root.first; c < root.first + root.count; c++) {
        uint64_t v;
        int end = ft_index_node_value(&v, idx, c) == FT_OK;
        if (end && term == FT_NONE)
            term = c;
        if (!end && inner == FT_NONE)
            inner = c;
    }
    FT_CHECK(term != FT_NONE && inner != FT_NONE);
    uint64_t nodes[6] = {(uint64_t)(int64_t)FT_AR_DEAD,
                         (uint64_t)(int64_t)FT_AR_DONE, FT_NODE_ROOT, term,
                         inner, (uint64_t)(int64_t)FT_AR_DONE};
    ft_ar_beams b;
    FT_PASS(ft_ar_beams_alloc(ar, &b));
    uint32_t count = 6;
    FT_PASS(ft_ar_memcpy(ar, b.node, nodes, sizeof nodes, 1));
    FT_PASS(ft_ar_memcpy(ar, b.count, &count, 4, 1));
    uint32_t *d_mask, mask[6 * WORDS], want[6 * WORDS];
    float *d_x, x[6 * W];
    FT_PASS(ft_ar_alloc(ar, (void **)&d_mask, sizeof mask));
    FT_PASS(ft_ar_alloc(ar, (void **)&d_x, sizeof x));
    for (int ei = 0; ei < 2; ei++) {
        uint32_t eos = ei == 0 ? 121 : W; /* W: no eos column */
        memset(want, 0, sizeof want);
        for (int r = 0; r < 6; r++) {
            if (nodes[r] < (uint64_t)(int64_t)FT_AR_DONE) {
                ft_node_children ch;
                FT_PASS(ft_index_children(&ch, idx, nodes[r]));
                for (uint64_t i = 0; i < ch.count; i++) {
                    uint32_t lab = ft_index_child_label(idx, &ch, i);
                    if (lab < W)
                        want[r * WORDS + lab / 32] |= 1u << (lab % 32);
                }
            }
            int eos_ok = nodes[r] >= (uint64_t)(int64_t)FT_AR_DONE ||
                         nodes[r] == term;
            if (eos < W && eos_ok)
                want[r * WORDS + eos / 32] |= 1u << (eos % 32);
        }
        FT_PASS(ft_ar_mask(ar, &b, W, NULL, eos, d_mask, NULL));
        FT_PASS(ft_ar_memcpy(ar, mask, d_mask, sizeof mask, 0));
        FT_CHECK(memcmp(mask, want, sizeof mask) == 0);
        /* the walk states' rows: eos alone, or nothing */
        for (int r = 0; r < 2; r++)
            for (uint32_t w = 0; w < WORDS; w++)
                FT_CHECK(mask[r * WORDS + w] ==
                         (eos < W && w == eos / 32 ? 1u << (eos % 32) : 0u));
        /* constrain: the same bits over rows of ones */
        for (int i = 0; i < 6 * W; i++)
            x[i] = 1.0f;
        FT_PASS(ft_ar_memcpy(ar, d_x, x, sizeof x, 1));
        ft_ar_input in;
        memset(&in, 0, sizeof in);
        in.form = FT_AR_IN_DENSE;
        in.dtype = FT_AR_IN_F32;
        in.width = W;
        in.logp = d_x;
        FT_PASS(ft_ar_constrain(ar, &b, &in, 6, eos, d_mask, d_x, NULL));
        FT_PASS(ft_ar_memcpy(ar, x, d_x, sizeof x, 0));
        for (int r = 0; r < 6; r++)
            for (uint32_t j = 0; j < W; j++) {
                int bit = (want[r * WORDS + j / 32] >> (j % 32)) & 1;
                FT_CHECK(bit ? x[r * W + j] == 1.0f : isinf(x[r * W + j]));
            }
    }
    if (kind == FT_ENGINE_CPU) { /* other nodes past the index's: refused */
        uint64_t bad[2] = {ar->idx->trie.view.n_nodes,
                           (uint64_t)(int64_t)-3};
        for (int i = 0; i < 2; i++) {
            nodes[4] = bad[i];
            FT_PASS(ft_ar_memcpy(ar, b.node, nodes, sizeof nodes, 1));
            FT_FAIL(ft_ar_mask(ar, &b, W, NULL, 121, d_mask, NULL), FT_EINVAL);
            char msg[160];
            snprintf(msg, sizeof msg, "cur.node[4]: %llu is no node (the "
                     "index has %llu)", (unsigned long long)bad[i],
                     (unsigned long long)ar->idx->trie.view.n_nodes);
            FT_CHECK_STR(ft_ar_error(ar), msg);
        }
    }
    ft_ar_free(ar, d_mask);
    ft_ar_free(ar, d_x);
    ft_ar_beams_free(ar, &b);
    ft_ar_close(ar);
}

static void test_walk(const ft_index *idx, ft_engine_kind kind)
{
    ft_ar *ar, *cpu, *par;
    ft_ar_opts o;
    ft_ar_opts_init(&o);
    o.beam = 8;
    char err[256];
    o.kind = FT_ENGINE_CPU;
    o.threads = 1;
    FT_PASS(ft_ar_open(&cpu, idx, &o, err, sizeof err));
    o.threads = 3;
    FT_PASS(ft_ar_open(&par, idx, &o, err, sizeof err));
    par->par_work = 0;
    o.kind = kind;
    o.threads = 0;
    FT_PASS(ft_ar_open(&ar, idx, &o, err, sizeof err));
    uint64_t s = 99;
    uint32_t vl = 150, vocab[150];
    for (uint32_t j = 0; j < vl; j++) /* tokens 0..129: some no key has */
        vocab[j] = j < 100 ? (j * 7u) % 130u : (uint32_t)(ft_test_rand(&s) % 130);
    vocab[5] = 70003; /* a high label */
    uint32_t rows_c[] = {0, 1, 7, 300, 2000};
    uint32_t lens_c[] = {0, 1, 3, 9};
    int64_t eoss[] = {-1, 2, 121};
    int cases = 0, live = 0, dead = 0, done = 0, moved = 0;
    for (int ri = 0; ri < 5; ri++)
        for (int li = 0; li < 4; li++)
            for (int pad = 0; pad < 2; pad++)
                for (int vi = 0; vi < 2; vi++)
                    for (int ei = 0; ei < 3; ei++)
                        for (int fi = 0; fi < 2; fi++) {
                            uint32_t rows = rows_c[ri], len = lens_c[li];
                            walk_args a = {.rows = rows, .len = len,
                                           .stride = len + (pad ? 3u : 0u),
                                           .stride0 = !pad,
                                           .vocab = vi ? vocab : NULL,
                                           .vl = vi ? vl : 0,
                                           .eos = eoss[ei]};
                            int64_t *ids = malloc((size_t)rows * a.stride * 8 + 8);
                            int64_t *from = NULL;
                            uint32_t *lens = NULL;
                            FT_CHECK(ids != NULL);
                            if (fi) { /* from the states of a walk before */
                                walk_args b = a;
                                b.len = b.stride = 4;
                                b.stride0 = 0;
                                int64_t *pre = malloc((size_t)rows * 32 + 8);
                                FT_CHECK(pre != NULL);
                                walk_rows(idx, pre, rows, 4, 4, NULL, b.vocab,
                                          b.vl, b.eos, &s);
                                b.ids = pre;
                                from = walk_on(cpu, &b, 0);
                                free(pre);
                                lens = malloc((size_t)rows * 4 + 4);
                                FT_CHECK(lens != NULL);
                                for (uint32_t r = 0; r < rows; r++)
                                    lens[r] = (uint32_t)(ft_test_rand(&s) % (len + 1));
                                a.from = from;
                                a.lens = lens;
                            }
                            walk_rows(idx, ids, rows, len, a.stride, from,
                                      a.vocab, a.vl, a.eos, &s);
                            a.ids = ids;
                            int64_t *got = walk_on(ar, &a, fi && ri % 2);
                            int64_t *want = walk_on(kind == FT_ENGINE_GPU ? cpu : par,
                                                    &a, 0);
                            for (uint32_t r = 0; r < rows; r++) {
                                int64_t f = from ? from[r] : 0;
                                uint32_t n = lens ? lens[r] : len;
                                int64_t ref = kind == FT_ENGINE_GPU
                                                  ? want[r]
                                                  : ref_walk(idx, f, ids + (size_t)r * a.stride,
                                                             n, a.vocab, a.vl, a.eos);
                                if (got[r] != ref || want[r] != ref) {
                                    fprintf(stderr, "walk: rows %u len %u stride "
                                            "%llu vocab %d eos %lld from %d: row "
                                            "%u got %lld / %lld, want %lld\n",
                                            rows, len,
                                            (unsigned long long)a.stride, vi,
                                            (long long)a.eos, fi, r,
                                            (long long)got[r], (long long)want[r],
                                            (long long)ref);
                                    FT_CHECK(0);
                                }
                                live += ref >= 0;
                                dead += ref == FT_AR_DEAD;
                                done += ref == FT_AR_DONE;
                                moved += fi && f >= 0 && ref >= 0 && ref != f;
                            }
                            free(ids);
                            free(from);
                            free(lens);
                            free(got);
                            free(want);
                            cases++;
                        }
    /* every kind of state was reached, and rows moved on from nodes */
    FT_CHECK(live > 10000 && dead > 1000 && done > 1000 && moved > 1000);
    if (kind == FT_ENGINE_CPU) {
        int64_t ids[4] = {1, 2, 3, 4}, st[2], bad_from[1] = {-3};
        int64_t far[1] = {(int64_t)idx->trie.view.n_nodes};
        uint32_t long_lens[1] = {4};
        char far_msg[128], neg_msg[128];
        unsigned long long nn = idx->trie.view.n_nodes;
        snprintf(far_msg, sizeof far_msg, "from[0]: %llu is no state (a node "
                 "below %llu, FT_AR_DEAD or FT_AR_DONE)", nn, nn);
        snprintf(neg_msg, sizeof neg_msg, "from[0]: -3 is no state (a node "
                 "below %llu, FT_AR_DEAD or FT_AR_DONE)", nn);
        const struct {
            int ids, state;
            uint64_t stride;
            uint32_t vocab_len;
            const uint32_t *lens;
            const int64_t *from;
            const char *msg;
        } bad[] = {
            {1, 1, 2, 0, NULL, NULL, "stride: 2 is below len 3"},
            {1, 0, 0, 0, NULL, NULL, "state: NULL"},
            {0, 1, 0, 0, NULL, NULL, "ids: NULL"},
            {1, 1, 0, 5, NULL, NULL, "vocab: NULL with vocab_len 5"},
            {1, 1, 0, 0, long_lens, NULL, "lens[0]: 4 exceeds len 3"},
            {1, 1, 0, 0, NULL, bad_from, neg_msg},
            {1, 1, 0, 0, NULL, far, far_msg},
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            FT_CHECK(ft_ar_walk(ar, bad[i].ids ? ids : NULL, 1, 3,
                                bad[i].stride, bad[i].lens, bad[i].from, NULL,
                                bad[i].vocab_len, -1,
                                bad[i].state ? st : NULL, NULL) == FT_EINVAL);
            FT_CHECK(strcmp(ft_ar_error(ar), bad[i].msg) == 0);
        }
        /* no rows: nothing read or written */
        FT_PASS(ft_ar_walk(ar, NULL, 0, 3, 0, NULL, NULL, NULL, 0, -1, NULL,
                           NULL));
        /* len 0: the root, or from as it was */
        st[0] = 77;
        FT_PASS(ft_ar_walk(ar, NULL, 1, 0, 0, NULL, NULL, NULL, 0, -1, st,
                           NULL));
        FT_CHECK(st[0] == 0);
        st[0] = 5;
        FT_PASS(ft_ar_walk(ar, NULL, 1, 0, 0, NULL, st, NULL, 0, -1, st,
                           NULL));
        FT_CHECK(st[0] == 5);
        /* rows of no tokens with a stride, and no ids: none is read */
        st[0] = st[1] = 9;
        FT_PASS(ft_ar_walk(ar, NULL, 2, 0, 3, NULL, NULL, NULL, 0, -1, st,
                           NULL));
        FT_CHECK(st[0] == 0 && st[1] == 0);
    }
    ft_ar_close(ar);
    ft_ar_close(cpu);
    ft_ar_close(par);
    printf("ar_step_test: walk (%s) on %d cases: %d live, %d dead, %d done "
           "rows, %d moved on from a node\n",
           kind == FT_ENGINE_GPU ? "GPU = CPU" : "CPU = reference", cases,
           live, dead, done, moved);
}

int main(int argc, char **argv)
{
    int gpu = argc > 1 && strcmp(argv[1], "--gpu") == 0;
    char path[] = "/tmp/ar_step_test_XXXXXX";
    int fd = mkstemp(path);
    FT_CHECK(fd >= 0);
    close(fd);
    uint32_t wide[64], nwide;
    ft_index *idx = make_index(path, wide, &nwide);
    unlink(path);
    if (!gpu) {
        test_errors(idx);
        test_math();
        test_brute(idx);
        test_threads(idx, wide, nwide);
        test_inverse(idx);
        test_full_norm_ref(idx);
        test_full_norm_random(idx);
        test_par_full(idx);
        test_fork(idx);
        test_walk(idx, FT_ENGINE_CPU);
        test_mask_states(idx, FT_ENGINE_CPU);
        /* one decode, every way its rows can arrive */
        for (int norm = 0; norm < 3; norm++) {
            for (int coarse = 0; coarse < 2; coarse++) {
                tbuf ref = {0}, t = {0};
                dec d;
                dec_open(&d, idx, FT_ENGINE_CPU, 32, 20, V);
                decode(&d, &ref, F_DENSE_ID, norm, 32, 20, 7, 1 + norm, coarse,
                       plain_step, NULL, 0);
                int forms[] = {F_DENSE_VOCAB, F_SPARSE, F_BF16, F_F16};
                for (int fi = 0; fi < (coarse ? 4 : 2); fi++) {
                    t.len = 0;
                    decode(&d, &t, forms[fi], norm, 32, 20, 7, 1 + norm, coarse,
                           plain_step, NULL, 0);
                    same(&ref, &t, "dense identity vs other forms");
                }
                if (getenv("AR_TEST_VERBOSE"))
                    printf("norm %d coarse %d: transcript %zu bytes\n", norm,
                           coarse, ref.len);
                dec_close(&d);
                free(ref.p);
                free(t.p);
            }
        }
        /* rows wider than a whole-row part (the --gpu run compares
         * such rows with the GPU's): the dense forms agree */
        g_dense_w = 2 * 16 * 256 + 809;
        for (int norm = 1; norm < 3; norm++) {
            tbuf ref = {0}, t = {0};
            dec d;
            dec_open(&d, idx, FT_ENGINE_CPU, 16, 20, g_dense_w);
            decode(&d, &ref, F_DENSE_ID, norm, 16, 20, 6, 5, 1, plain_step,
                   NULL, 0);
            int forms[] = {F_DENSE_VOCAB, F_BF16, F_F16};
            for (int fi = 0; fi < 3; fi++) {
                t.len = 0;
                decode(&d, &t, forms[fi], norm, 16, 20, 6, 5, 1, plain_step,
                       NULL, 0);
                same(&ref, &t, "wide dense identity vs other forms");
            }
            /* the normalisations' clones without FMA instructions (a CPU
             * without AVX2 and FMA): the same transcript */
            d.ar->no_fma = 1;
            for (int fi = 0; fi < 2; fi++) {
                t.len = 0;
                decode(&d, &t, fi ? F_DENSE_VOCAB : F_DENSE_ID, norm, 16, 20,
                       6, 5, 1, plain_step, NULL, 0);
                same(&ref, &t, "wide dense with FMA vs without");
            }
            d.ar->no_fma = 0;
            dec_close(&d);
            free(ref.p);
            free(t.p);
        }
        g_dense_w = V;
        ft_index_close(idx);
        printf("ar_step_test: CPU ok\n");
        return 0;
    }
    ft_ar_opts o;
    ft_ar_opts_init(&o);
    o.kind = FT_ENGINE_GPU;
    o.beam = 4;
    ft_ar *probe;
    char err[256];
    int rc = ft_ar_open(&probe, idx, &o, err, sizeof err);
    if (rc == FT_ENODEV || rc == FT_ENOTSUP) {
        printf("SKIP: no GPU step: %s\n", err);
        ft_index_close(idx);
        return FT_TEST_SKIP;
    }
    FT_PASS(rc);
    ft_ar_close(probe);
    test_walk(idx, FT_ENGINE_GPU);
    test_mask_states(idx, FT_ENGINE_GPU);
    /* CPU = GPU, byte for byte: beams up to 300 (lists > 4096 entries
     * take the radix select), every form, dtype and normalisation */
    int forms[] = {F_DENSE_ID, F_DENSE_VOCAB, F_SPARSE, F_BF16, F_F16,
                   F_SPARSE_WIDE};
    uint32_t beams[] = {1, 7, 64, 300};
    int cases = 0;
    for (int fi = 0; fi < 6; fi++)
        for (int norm = 0; norm < 3; norm++)
            for (int bi = 0; bi < 4; bi++) {
                int coarse = (fi + norm + bi) % 2 || fi == F_BF16 || fi == F_F16;
                uint32_t B = beams[bi], n = bi == 3 ? 1000 : B + 3;
                uint32_t w = fi == F_SPARSE_WIDE ? nwide : V;
                cpu_vs_gpu(idx, forms[fi], norm, B, n, w, 7 + bi, coarse,
                           wide, nwide);
                cases++;
            }
    /* the one-launch kernels come in CTAs of 512 threads (beams 1-512:
     * the cases above) and 1,024 (here): the larger instance against the
     * CPU too, without a normalisation (the step's one launch); and a
     * whole-row normalisation from 512 beams up runs one CTA a row */
    for (int fi = 0; fi < 3; fi++) {
        cpu_vs_gpu(idx, forms[fi], 0, 700, 1000, V, 31 + fi, fi == 1, wide,
                   nwide);
        cases++;
    }
    cpu_vs_gpu(idx, F_DENSE_ID, 1, 700, 1000, V, 34, 0, wide, nwide);
    cases++;
    /* rows of several whole-row parts (8,192 entries each), every dense
     * form, both normalisations, a random vocabulary too: 19,241 entries
     * are two parts and 2,857 more (the last part cut inside a chunk),
     * 24,361 two and 7,977, 43,961 (the whole row only) five and 3,001,
     * 16,384 exactly two; rows that start on 16 bytes (every 8th
     * bf16/f16 row, every 4th f32 row) take 16-byte loads in their whole
     * parts, the others one entry at a time */
    int dforms[] = {F_DENSE_ID, F_DENSE_VOCAB, F_BF16, F_F16};
    uint32_t widths[] = {9 * 2048 + 809, 11 * 2048 + 1024 + 809,
                         5 * 8192 + 3001, 2 * 8192};
    for (int wi = 0; wi < 4; wi++)
        for (int fi = 0; fi < 4; fi++)
            for (int norm = 1; norm < 3 - (wi == 2); norm++)
                for (uint32_t B = 7; B <= 64; B += 57) {
                    g_dense_w = widths[wi];
                    g_vocab_seed =
                        dforms[fi] == F_DENSE_VOCAB && B == 64 ? 77 : 0;
                    cpu_vs_gpu(idx, dforms[fi], norm, B, B + 3, g_dense_w,
                               91 + B + wi, 0, NULL, 0);
                    cases++;
                }
    /* the widest rows, many of them (520 beams: 3,120 parts); 43,960
     * entries: every bf16 / f16 row on 16 bytes, so its five whole parts
     * are one launch and its cut part (3,000 entries) another */
    uint32_t wides[] = {widths[2], 5 * 8192 + 3000};
    for (int wi = 0; wi < 2; wi++)
        for (int fi = 2; fi < 4; fi++) {
            g_dense_w = wides[wi];
            cpu_vs_gpu(idx, dforms[fi], 1, 520, 523, g_dense_w, 97 + fi + wi,
                       0, NULL, 0);
            cases++;
        }
#ifdef FT_HAVE_CUDA
    /* bf16 and f16 rows' whole-row kernel in its other register bounds
     * (the default above: 7 CTAs an SM): unbounded (1), 5, 6 and 8; whole
     * parts on 16 bytes (16,384), whole parts and a cut one (43,960),
     * cut parts and unaligned rows (43,961), few rows and many */
    ft_ark_tuning t0 = ft_ark_tuning_get();
    uint32_t minbs[] = {1, 5, 6, 8};
    for (int pi = 0; pi < 4; pi++) {
        ft_ark_tuning t = t0;
        t.fl_minb = minbs[pi];
        ft_ark_tuning_set(&t);
        for (int fi = 2; fi < 4; fi++)
            for (int wi = 0; wi < 3; wi++)
                for (uint32_t B = 7; B <= 520; B += 513) {
                    g_dense_w = wi == 0 ? widths[3] : wi == 1 ? wides[1] : widths[2];
                    cpu_vs_gpu(idx, dforms[fi], 1, B, B + 3, g_dense_w,
                               101 + pi + fi + wi + B, 0, NULL, 0);
                    cases++;
                }
    }
    /* the long lists' next beams by the histogram cut (the default) and by
     * the radix passes alone (nopre), and the one-launch kernels launched
     * plainly (nopdl: without programmatic stream serialization): 300 and
     * 700 beams, ties (coarse: the cut's fallback to the radix passes) and
     * not */
    for (int v = 0; v < 3; v++) {
        ft_ark_tuning t = t0;
        t.nopre = v == 1;
        t.nopdl = v == 2;
        ft_ark_tuning_set(&t);
        g_dense_w = V;
        for (int fi = 0; fi < 3; fi++)
            for (int coarse = 0; coarse < 2; coarse++) {
                cpu_vs_gpu(idx, forms[fi], 0, 300, 1000, V, 41 + fi, coarse,
                           wide, nwide);
                cpu_vs_gpu(idx, forms[fi], 1, 700, 1000, V, 44 + fi, coarse,
                           wide, nwide);
                cases += 2;
            }
    }
    ft_ark_tuning_set(&t0);
#endif
    g_dense_w = V;
    g_vocab_seed = 0;
    ft_index_close(idx);
    printf("ar_step_test: CPU = GPU on %d decodes\n", cases);
    return 0;
}
