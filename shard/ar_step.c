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
 * order candidates arrive in.  That is also what lets a large step share
 * its beams over threads (ft_ar_opts.threads): each thread keeps its own
 * best in its own buffers, and the union of the threads' kept candidates,
 * sorted and cut, is the one thread's answer, bit for bit.
 */
#include <math.h>
#include <stddef.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "ar_step.h"
#include "ar_vexp.h"
#include "flashtrie/internal/ar_walk.h"
#include "flashtrie/internal/cores.h"
#include "flashtrie/internal/sorted.h"

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
_Static_assert(FT_AR_DEAD == FT_ARW_DEAD && FT_AR_DONE == FT_ARW_DONE,
               "walk states");

/* ---- threads of a CPU step ----------------------------------------- */

#define AR_MAX_THREADS 256u
/* A step shares its beams out when it has at least 2 beams and about
 * this many row entries to read (below, waking the workers costs more
 * than they save); beams are taken AR_CHUNK at a time. */
#define AR_PAR_WORK 32768u
#define AR_CHUNK 2u

/* A normalisation's partial sums: FT_AR_LANES lanes over the allowed
 * entries, a whole row part's FT_AR_PART_LANES, or its parts'
 * FT_AR_MAX_PARTS products (full_lse). */
#define AR_LANES_CAP 256u
_Static_assert(AR_LANES_CAP >= FT_AR_LANES && AR_LANES_CAP >= FT_AR_PART_LANES &&
                   AR_LANES_CAP >= FT_AR_MAX_PARTS,
               "the lanes' scratch holds every shape");

/* ar_scr is one thread's scratch. */
typedef struct ar_scr {
    ft_ar_cand *nb, *hb;
    double *lanes;     /* AR_LANES_CAP: a normalisation's partial sums */
    size_t n_nb, n_hb; /* kept by the thread's last share of a step */
    uint64_t *allow;   /* a beam's allowed columns, a bit each */
    uint32_t allow_words;
} ar_scr;

typedef void ar_job(ft_ar *ar, uint32_t w, void *ctx);

typedef struct ar_worker {
    struct ar_pool *p;
    uint32_t id;
} ar_worker;

/* ar_pool: workers 1..n wait for a generation; ar_par runs a job on all
 * of them and on the caller (thread 0) and returns when all are done. */
typedef struct ar_pool {
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    uint64_t gen;
    uint32_t busy;
    int stop;
    ar_job *job;
    void *ctx;
    ft_ar *ar;
    pid_t pid;  /* the process the workers run in (fork() leaves them) */
    uint32_t n; /* workers started */
    pthread_t th[AR_MAX_THREADS];
    ar_worker w[AR_MAX_THREADS];
} ar_pool;

static void *ar_worker_main(void *arg)
{
    ar_worker *w = arg;
    ar_pool *p = w->p;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->gen == seen)
            pthread_cond_wait(&p->go, &p->mu);
        if (p->stop)
            break;
        seen = p->gen;
        pthread_mutex_unlock(&p->mu);
        p->job(p->ar, w->id, p->ctx);
        pthread_mutex_lock(&p->mu);
        if (--p->busy == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static int scr_alloc(ft_ar *ar, ar_scr *s)
{
    if (s->nb && s->hb && s->lanes) /* a pool's before a fork() */
        return FT_OK;
    free(s->nb);
    free(s->hb);
    free(s->lanes);
    s->nb = malloc(2 * (size_t)ar->cap_beam * sizeof *s->nb);
    s->hb = malloc(2 * (size_t)ar->cap_results * sizeof *s->hb);
    s->lanes = malloc(AR_LANES_CAP * sizeof *s->lanes);
    return s->nb && s->hb && s->lanes ? FT_OK : FT_ENOMEM;
}

static void scr_free(ar_scr *s)
{
    free(s->nb);
    free(s->hb);
    free(s->lanes);
    free(s->allow);
}

/* ar_threads returns how many threads a step of work row entries over m
 * beams runs on: 1, or, once the workers and their scratch are there
 * (started here at the first such step; should that fail, the step runs
 * on the caller's thread alone), all of them. */
static uint32_t ar_threads(ft_ar *ar, uint64_t work, uint32_t m)
{
    if (ar->o.threads < 2 || m < 2 || work < ar->par_work)
        return 1;
    if (ar->pool && ar->pool->pid != getpid()) {
        /* a child of fork(): the workers stayed in the parent; their pool
         * is the parent's copy (never locked here) and is dropped */
        free(ar->pool);
        ar->pool = NULL;
    }
    if (ar->pool)
        return ar->pool->n + 1;
    if (ar->merge == NULL) {
        size_t cap = ar->cap_beam > ar->cap_results ? ar->cap_beam
                                                    : ar->cap_results;
        ar->merge = malloc((size_t)ar->o.threads * cap * sizeof *ar->merge);
        if (ar->merge == NULL)
            return 1;
    }
    ar_pool *p = calloc(1, sizeof *p);
    if (p == NULL)
        return 1;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    p->ar = ar;
    p->pid = getpid();
    for (uint32_t i = 1; i < ar->o.threads; i++) {
        if (scr_alloc(ar, &ar->scr[i]) != FT_OK)
            break;
        p->w[i] = (ar_worker){p, i};
        if (pthread_create(&p->th[i], NULL, ar_worker_main, &p->w[i]) != 0)
            break;
        p->n = i;
    }
    ar->pool = p;
    if (p->n == 0)
        FT_INFO("ar: CPU steps on one thread (no worker thread could be "
                "started)");
    return p->n + 1;
}

static void ar_par(ft_ar *ar, ar_job *job, void *ctx)
{
    ar_pool *p = ar->pool;
    pthread_mutex_lock(&p->mu);
    p->job = job;
    p->ctx = ctx;
    p->busy = p->n;
    p->gen++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    job(ar, 0, ctx);
    pthread_mutex_lock(&p->mu);
    while (p->busy)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

static void ar_pool_stop(ft_ar *ar)
{
    ar_pool *p = ar->pool;
    if (p == NULL)
        return;
    ar->pool = NULL;
    if (p->pid != getpid()) { /* closed in a child of fork(): no workers */
        free(p);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (uint32_t i = 1; i <= p->n; i++)
        pthread_join(p->th[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    free(p);
}

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
    FT_RETURN_ERROR_IF(o->threads > AR_MAX_THREADS, FT_EINVAL,
                       "threads: must be 0..%u, got %u", AR_MAX_THREADS,
                       o->threads);
    if (o->threads == 0) {
        int n = fti_usable_cores();
        o->threads = n < 1 ? 1 : n > 64 ? 64 : (uint32_t)n;
    }
    return FT_OK;
}

int ft_ar_open(ft_ar **out, const ft_index *idx, const ft_ar_opts *opts,
               char *errbuf, size_t errlen)
{
    FT_RETURN_ERROR_IF(out == NULL, FT_EINVAL, "ft_ar_open: out is NULL");
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
    ar->par_work = AR_PAR_WORK;
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
        ar->scr = calloc(ar->o.threads, sizeof *ar->scr);
        ar->cr = malloc((size_t)ar->cap_beam * sizeof *ar->cr);
        if (!ar->scr || !ar->cr || scr_alloc(ar, &ar->scr[0]) != FT_OK) {
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
    ar_pool_stop(ar);
    if (ar->scr)
        for (uint32_t i = 0; i < ar->o.threads; i++)
            scr_free(&ar->scr[i]);
    free(ar->scr);
    free(ar->cr);
    free(ar->merge);
    free(ar->inv);
    free(ar->inv_vocab);
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
    if (ar == NULL)
        return FT_EINVAL;
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
    if (ar == NULL)
        return FT_EINVAL;
    if (bytes == 0)
        return FT_OK;
    if (dst == NULL || src == NULL) {
        fti_errf(ar->err, sizeof ar->err, "memcpy: %s is NULL",
                 dst == NULL ? "dst" : "src");
        return FT_EINVAL;
    }
    if (ar->gpu)
        return ft_gpu_ar_memcpy(ar, dst, src, bytes, to_session);
    memmove(dst, src, bytes);
    return FT_OK;
}

ft_engine_kind ft_ar_kind(const ft_ar *ar)
{
    return ar ? ar->o.kind : FT_ENGINE_AUTO;
}

void ft_ar_get_opts(ft_ar_opts *o, const ft_ar *ar)
{
    if (o && ar)
        *o = ar->o;
}

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
    if (ar == NULL) {
        if (p)
            *p = NULL;
        return FT_EINVAL;
    }
    if (p == NULL) {
        fti_errf(ar->err, sizeof ar->err, "alloc: p is NULL");
        return FT_EINVAL;
    }
    return mem_alloc(ar, p, bytes);
}

void ft_ar_free(ft_ar *ar, void *p)
{
    if (ar && p)
        mem_free(ar, p);
}

/* A beams' or hits' structure of arrays, as a table: each array's place
 * in the structure, its element size and whether it holds one element
 * (the count) or one a slot. */
typedef struct {
    size_t off, esz;
    int one;
} ar_arr;

#define AR_ARR(T, f, esz, one) {offsetof(T, f), esz, one}
static const ar_arr beams_arrs[] = {
    AR_ARR(ft_ar_beams, count, 4, 1),  AR_ARR(ft_ar_beams, node, 8, 0),
    AR_ARR(ft_ar_beams, sigma, 4, 0),  AR_ARR(ft_ar_beams, len, 4, 0),
    AR_ARR(ft_ar_beams, parent, 4, 0), AR_ARR(ft_ar_beams, entry, 4, 0),
    AR_ARR(ft_ar_beams, token, 4, 0)};
static const ar_arr hits_arrs[] = {
    AR_ARR(ft_ar_hits, count, 4, 1),     AR_ARR(ft_ar_hits, parent, 4, 0),
    AR_ARR(ft_ar_hits, entry, 4, 0),     AR_ARR(ft_ar_hits, token, 4, 0),
    AR_ARR(ft_ar_hits, len, 4, 0),       AR_ARR(ft_ar_hits, key_index, 8, 0),
    AR_ARR(ft_ar_hits, value, 8, 0),     AR_ARR(ft_ar_hits, score, 8, 0),
    AR_ARR(ft_ar_hits, sigma, 4, 0)};
#undef AR_ARR

/* arrs_free frees the n arrays of a (those allocated) and zeroes the
 * structure s of size bytes. */
static void arrs_free(ft_ar *ar, void *s, size_t size, const ar_arr *a,
                      size_t n)
{
    for (size_t i = 0; i < n; i++) {
        void **q = (void **)((char *)s + a[i].off);
        if (*q)
            mem_free(ar, *q);
    }
    memset(s, 0, size);
}

/* arrs_alloc zeroes s (size bytes) and allocates its n arrays of cap
 * slots (name: the argument, for the NULL error); all or none. */
static int arrs_alloc(ft_ar *ar, void *s, size_t size, const char *name,
                      const ar_arr *a, size_t n, size_t cap)
{
    if (s == NULL) {
        if (ar)
            fti_errf(ar->err, sizeof ar->err, "%s: NULL", name);
        return FT_EINVAL;
    }
    memset(s, 0, size);
    if (ar == NULL)
        return FT_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (mem_alloc(ar, (void **)((char *)s + a[i].off),
                      a[i].esz * (a[i].one ? 1 : cap))) {
            arrs_free(ar, s, size, a, n);
            return ar->gpu ? FT_ECUDA : FT_ENOMEM;
        }
    return FT_OK;
}

int ft_ar_beams_alloc(ft_ar *ar, ft_ar_beams *b)
{
    return arrs_alloc(ar, b, sizeof *b, "b", beams_arrs,
                      sizeof beams_arrs / sizeof beams_arrs[0],
                      ar ? ar->cap_beam : 0);
}

void ft_ar_beams_free(ft_ar *ar, ft_ar_beams *b)
{
    if (ar && b)
        arrs_free(ar, b, sizeof *b, beams_arrs,
                  sizeof beams_arrs / sizeof beams_arrs[0]);
}

int ft_ar_hits_alloc(ft_ar *ar, ft_ar_hits *h)
{
    return arrs_alloc(ar, h, sizeof *h, "h", hits_arrs,
                      sizeof hits_arrs / sizeof hits_arrs[0],
                      ar ? ar->cap_results : 0);
}

void ft_ar_hits_free(ft_ar *ar, ft_ar_hits *h)
{
    if (ar && h)
        arrs_free(ar, h, sizeof *h, hits_arrs,
                  sizeof hits_arrs / sizeof hits_arrs[0]);
}

static int check_beams(ft_ar *ar, const ft_ar_beams *b, const char *what);

int ft_ar_reset(ft_ar *ar, ft_ar_beams *b, void *stream)
{
    if (ar == NULL)
        return FT_EINVAL;
    if (ar->failed)
        return FT_ESTATE;
    int rc = check_beams(ar, b, "b");
    if (rc != FT_OK)
        return rc;
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

/* check_input checks an input's description, its width against 1..max_w
 * (bound names max_w in the message: " (max_width)", or ""). */
static int check_input(ft_ar *ar, const ft_ar_input *in, uint32_t max_w,
                       const char *bound)
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
    FT_RETURN_ERROR_IF(in->width < 1 || in->width > max_w, FT_EINVAL,
                       "input.width: must be 1..%u%s, got %u", max_w, bound,
                       in->width);
    FT_RETURN_ERROR_IF(in->stride != 0 && in->stride < in->width, FT_EINVAL,
                       "input.stride: %llu is less than width %u",
                       (unsigned long long)in->stride, in->width);
    FT_RETURN_ERROR_IF(in->logp == NULL, FT_EINVAL, "input.logp: NULL");
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

/* row_rho is entry j's log-prob after the row's normalisation (lse). */
static inline float row_rho(const row *w, uint32_t j, double lse)
{
    float x = row_x(w, j);
    return w->in->norm ? ft_ar_norm(x, lse) : x;
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

static int u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* vocab_inverse makes ar->inv the vocabulary's columns by token: (token
 * << 32 | column), sorted; kept while the vocabulary holds the same
 * tokens (compared with the session's copy: a memcmp of 4 bytes a column,
 * exact), so a decode that passes one vocabulary each step sorts it once. */
static int vocab_inverse(ft_ar *ar, const uint32_t *vocab, uint32_t width)
{
    if (ar->inv && ar->inv_width == width &&
        memcmp(ar->inv_vocab, vocab, (size_t)width * 4) == 0)
        return FT_OK;
    uint64_t *inv = malloc((size_t)width * sizeof *inv);
    uint32_t *copy = malloc((size_t)width * 4);
    if (inv == NULL || copy == NULL) {
        free(inv);
        free(copy);
        return FT_ENOMEM;
    }
    for (uint32_t j = 0; j < width; j++)
        inv[j] = (uint64_t)vocab[j] << 32 | j;
    qsort(inv, width, sizeof *inv, u64_cmp);
    memcpy(copy, vocab, (size_t)width * 4);
    free(ar->inv);
    free(ar->inv_vocab);
    ar->inv = inv;
    ar->inv_vocab = copy;
    ar->inv_width = width;
    return FT_OK;
}

/* inv_walk visits the columns j < width whose token labels a child of a
 * beam's node, child by child, through ar->inv (labels ascend, so each
 * child's columns lie past the last child's):
 *     inv_walk_init(&it, ar, &cr, width);
 *     while (inv_walk_next(&it, v, &j, &u)) ...
 * gives each such column j with its child u. */
typedef struct inv_walk {
    const uint64_t *inv;
    const ft_child_range *cr;
    size_t at, n;      /* the next place in inv; width */
    uint64_t u, end;   /* the next child to look up; past the last */
    uint32_t lab;      /* the label whose columns are being visited */
    int cur;           /* a label is being visited */
} inv_walk;

static void inv_walk_init(inv_walk *it, const ft_ar *ar,
                          const ft_child_range *cr, uint32_t width)
{
    *it = (inv_walk){ar->inv, cr, 0, width, cr->first, cr->first + cr->deg,
                     0, 0};
}

static int inv_walk_next(inv_walk *it, const ft_trie_view *v, uint32_t *j,
                         uint64_t *u)
{
    for (;;) {
        if (it->cur && it->at < it->n &&
            (uint32_t)(it->inv[it->at] >> 32) == it->lab) {
            *j = (uint32_t)it->inv[it->at++];
            *u = it->u - 1;
            return 1;
        }
        if (it->u >= it->end || it->at >= it->n)
            return 0;
        it->lab = ft_child_label(v, it->cr, it->u++);
        it->at += fti_lower_bound_u64(it->inv + it->at, it->n - it->at,
                                      (uint64_t)it->lab << 32);
        it->cur = 1;
    }
}

/* row_load8 is entries j .. j + 7 of w (row_x of each, the same bits):
 * f32 rows and bf16 rows (a shift) without a call an entry. */
static inline __attribute__((always_inline)) ft_v8f row_load8(const row *w,
                                                              uint32_t j)
{
    ft_v8f x;
    if (w->lp) {
        memcpy(&x, w->lp + j, sizeof x);
    } else if (w->in->dtype == FT_AR_IN_F32) {
        memcpy(&x, (const float *)w->dense + j, sizeof x);
    } else if (w->in->dtype == FT_AR_IN_BF16) {
        uint16_t h[8];
        memcpy(h, (const uint16_t *)w->dense + j, sizeof h);
        ft_v8i u = {h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]};
        x = ft_v8f_of(u << 16);
    } else {
        for (int i = 0; i < 8; i++)
            x[i] = row_x(w, j + (uint32_t)i);
    }
    return x;
}

/* part_max8 is the maximum of entries j0 .. j0 + n - 1 of w (a part of
 * a whole row: ar_rules.h), NaN when one of them is NaN, -inf when every
 * one is -inf; eight running maxima at a time (exact in any order). */
static inline __attribute__((always_inline)) float
part_max8(const row *w, uint32_t j0, uint32_t n)
{
    const ft_v8f ninf = {-INFINITY, -INFINITY, -INFINITY, -INFINITY,
                         -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    ft_v8f m = ninf;
    ft_v8i nan = {0, 0, 0, 0, 0, 0, 0, 0};
    uint32_t j = 0;
    for (; j + 8 <= n; j += 8) {
        ft_v8f x = row_load8(w, j0 + j);
        nan |= x != x;
        ft_v8i gt = x > m;
        m = ft_v8f_of((ft_v8i_of(x) & gt) | (ft_v8i_of(m) & ~gt));
    }
    float mx = -INFINITY;
    int isnan = 0;
    for (int i = 0; i < 8; i++) {
        isnan |= nan[i] != 0;
        if (m[i] > mx)
            mx = m[i];
    }
    for (; j < n; j++) {
        float x = row_x(w, j0 + j);
        isnan |= x != x;
        if (x > mx)
            mx = x;
    }
    return isnan ? NAN : mx;
}

/* lanes_pairs is the sums of the four neighbouring pairs of 8 lanes (a
 * lanes 0-3, b lanes 4-7): 0 + 1, 2 + 3, 4 + 5, 6 + 7, one vector add. */
static inline __attribute__((always_inline)) ft_v4d lanes_pairs(ft_v4d a,
                                                                ft_v4d b)
{
    return __builtin_shufflevector(a, b, 0, 2, 4, 6) +
           __builtin_shufflevector(a, b, 1, 3, 5, 7);
}

/* lanes_tree is ft_ar_lanes_sum(q, n) (n a power of two), a level at a
 * time into the front of q: level by level each pair of neighbours is
 * added (q[i] = q[2i] + q[2i + 1], lanes_pairs), the same additions as the
 * tree in place. */
static inline __attribute__((always_inline)) double lanes_tree(double *q,
                                                               uint32_t n)
{
    for (; n >= 8; n /= 2)
        for (uint32_t i = 0; i < n; i += 8) {
            ft_v4d a, b;
            memcpy(&a, q + i, sizeof a);
            memcpy(&b, q + i + 4, sizeof b);
            ft_v4d s = lanes_pairs(a, b);
            memcpy(q + i / 2, &s, sizeof s);
        }
    return ft_ar_lanes_sum(q, n);
}

/* part_total is the sum of a part's terms (entries j0 .. j0 + n - 1 of
 * w, n <= FT_AR_PART, maximum m finite) in ar_rules.h's shape: eight
 * chunks (64 entries) at a time, their 64 terms in eight vectors, the
 * chunks' pairwise sums as one vector (ft_ar_chunk_sums8), widened into
 * lanes c % 256 of p (FT_AR_PART_LANES doubles) in ascending chunk c;
 * the chunks past the last whole group of eight one at a time; then the
 * lanes' tree. */
static inline __attribute__((always_inline)) double
part_total(double *p, const row *w, uint32_t j0, uint32_t n, float m)
{
    const uint32_t L = FT_AR_PART_LANES;
    for (uint32_t l = 0; l < L; l++)
        p[l] = 0.0;
    uint32_t c = 0;
    for (; 8 * (c + 8) <= n; c += 8) {
        ft_v8f e[8];
        for (int k = 0; k < 8; k++)
            e[k] = ft_ar_row_terms8(row_load8(w, j0 + 8 * (c + k)), m);
        ft_v8f cs = ft_ar_chunk_sums8(e);
        ft_v4f a = {cs[0], cs[1], cs[2], cs[3]}, b = {cs[4], cs[5], cs[6], cs[7]};
        ft_v4d lo, hi;
        memcpy(&lo, p + c % L, sizeof lo);
        memcpy(&hi, p + c % L + 4, sizeof hi);
        lo += __builtin_convertvector(a, ft_v4d);
        hi += __builtin_convertvector(b, ft_v4d);
        memcpy(p + c % L, &lo, sizeof lo);
        memcpy(p + c % L + 4, &hi, sizeof hi);
    }
    for (; 8 * c < n; c++) {
        float e[8];
        for (uint32_t i = 0; i < 8; i++)
            e[i] = 8 * c + i < n ? ft_ar_row_term(row_x(w, j0 + 8 * c + i), m)
                                 : 0.0f;
        p[c % L] = FT_DADD(p[c % L], (double)ft_ar_chunk_sum(e));
    }
    return lanes_tree(p, L);
}

/* full_lse is a whole row's normalisation (ar_rules.h's parts, each read
 * twice while it sits in the cache: its maximum, then its sum); 0 when no
 * entry can be taken (no maximum). */
static inline __attribute__((always_inline)) int
full_lse(double *p, const row *w, uint32_t width, double *lse)
{
    float m[FT_AR_MAX_PARTS];
    double s[FT_AR_MAX_PARTS];
    uint32_t n = ft_ar_parts(width);
    for (uint32_t q = 0; q < n; q++) {
        uint32_t j0 = q * FT_AR_PART;
        uint32_t np = width - j0 < FT_AR_PART ? width - j0 : FT_AR_PART;
        m[q] = part_max8(w, j0, np);
        s[q] = 0.0;
        if (ft_ar_part_spoils(m[q])) {
            n = q + 1; /* the row's lse is NaN: the rest cannot change it */
            break;
        }
        if (m[q] > -INFINITY)
            s[q] = part_total(p, w, j0, np, m[q]);
    }
    return ft_ar_parts_lse(m, s, n, p, lse);
}

/* allowed_lse is row_lse's sums over the allowed entries of a dense row
 * through a vocabulary, found through the inverted vocabulary: the
 * columns set in a bitmap, then each lane's in ascending j (the same sums
 * as asking every column); 0 when the bitmap cannot be had (the caller
 * asks every column). */
static inline __attribute__((always_inline)) int
allowed_lse(const ft_ar *ar, ar_scr *sc, const row *w,
                       const ft_trie_view *v, const ft_child_range *cr,
                       double *lse, int *ok)
{
    uint32_t width = w->in->width, words = (width + 63) / 64;
    *ok = 0;
    if (sc->allow_words < words) {
        uint64_t *a = realloc(sc->allow, (size_t)words * 8);
        if (a == NULL)
            return 0;
        sc->allow = a;
        sc->allow_words = words;
    }
    *ok = 1;
    uint64_t *bit = sc->allow;
    memset(bit, 0, (size_t)words * 8);
    float mx = -INFINITY;
    inv_walk it;
    uint32_t j;
    uint64_t u;
    inv_walk_init(&it, ar, cr, width);
    while (inv_walk_next(&it, v, &j, &u)) {
        bit[j / 64] |= 1ull << (j % 64);
        float x = row_x(w, j);
        if (x > mx)
            mx = x;
    }
    if (!(mx > -INFINITY))
        return 0;
    double *p = sc->lanes;
    for (uint32_t l = 0; l < FT_AR_LANES; l++) {
        double s = 0.0;
        for (j = l; j < width; j += FT_AR_LANES)
            if ((bit[j / 64] >> (j % 64)) & 1u)
                s = FT_DADD(s, ft_ar_term(row_x(w, j), mx));
        p[l] = s;
    }
    *lse = ft_ar_lse(mx, ft_ar_lanes_sum(p, FT_AR_LANES));
    return 1;
}

static inline __attribute__((always_inline)) int
row_lse(double *p, const row *w, const ft_trie_view *v,
        const ft_child_range *cr, double *lse)
{
    const ft_ar_input *in = w->in;
    int allowed = in->norm == FT_AR_NORM_ALLOWED;
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
            *s = FT_DADD(*s, ft_ar_term(row_x(w, lab), mx));
        }
        *lse = ft_ar_lse(mx, ft_ar_lanes_sum(p, FT_AR_LANES));
        return 1;
    }
    if (!allowed)
        return full_lse(p, w, in->width, lse);
    for (uint32_t j = 0; j < in->width; j++) {
        float x = row_x(w, j);
        if (x > mx && ft_find_child(v, cr, row_tok(w, j)) != FT_NONE)
            mx = x;
    }
    if (!(mx > -INFINITY))
        return 0;
    for (uint32_t l = 0; l < FT_AR_LANES; l++) {
        double s = 0.0;
        for (uint32_t j = l; j < in->width; j += FT_AR_LANES) {
            if (ft_find_child(v, cr, row_tok(w, j)) == FT_NONE)
                continue;
            s = FT_DADD(s, ft_ar_term(row_x(w, j), mx));
        }
        p[l] = s;
    }
    *lse = ft_ar_lse(mx, ft_ar_lanes_sum(p, FT_AR_LANES));
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
    if (!ft_ar_takes(rho, ar->o.theta_tok))
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

/* beams_check checks cur's count and nodes (the first bad one is named;
 * a mask's beam may also be a walk state, ft_arw_state: no children),
 * stores each beam's child range in ar->cr and returns the row entries a
 * step or top-k of input in will read, or the children a mask (in NULL)
 * visits: the work that decides a call's threads. */
static int beams_check(ft_ar *ar, const ft_ar_beams *cur,
                       const ft_ar_input *in, uint64_t *work)
{
    const ft_trie_view *v = &ar->idx->trie.view;
    uint32_t m = cur->count[0];
    if (m > ar->cap_beam) {
        fti_errf(ar->err, sizeof ar->err, "cur.count: %u beams, more than "
                 "beam %u", m, ar->cap_beam);
        return FT_EINVAL;
    }
    uint64_t w = 0;
    for (uint32_t r = 0; r < m; r++) {
        uint64_t node = cur->node[r];
        if (in == NULL && ft_arw_state(node)) { /* a mask: eos alone */
            ar->cr[r] = (ft_child_range){0};
            continue;
        }
        if (node >= v->n_nodes) {
            fti_errf(ar->err, sizeof ar->err, "cur.node[%u]: %llu is no node "
                     "(the index has %llu)", r, (unsigned long long)node,
                     (unsigned long long)v->n_nodes);
            return FT_EINVAL;
        }
        ft_child_range cr = ft_children(v, node);
        ar->cr[r] = cr;
        if (in == NULL) /* a mask: each child's columns */
            w += cr.deg;
        else if (cr.deg > 0) {
            uint64_t items = child_driven(in, &cr) ? cr.deg : in->width;
            /* a whole-row normalisation reads the whole row twice (its
             * maximum, its terms), however few the children; one over the
             * allowed entries reads them twice */
            w += in->norm == FT_AR_NORM_FULL      ? items + 2 * (uint64_t)in->width
                 : in->norm == FT_AR_NORM_ALLOWED ? 2 * items
                                                  : items;
        }
    }
    *work = w;
    return FT_OK;
}

/* One call's beams (step, mask or top-k), shared out AR_CHUNK at a
 * time. */
typedef struct step_ctx {
    const ft_ar_beams *cur;
    const ft_ar_input *in; /* step, top-k */
    int hits;
    uint32_t k; /* top-k: per beam, and its outputs */
    uint32_t *out_entry, *out_token;
    float *out_logp;
    uint32_t width, eos; /* mask, and its vocabulary and output */
    const uint32_t *vocab;
    uint32_t *mask;
    void *cout; /* constrain: the rows written (in's dtype and stride) */
    int inv;    /* dense rows through a vocabulary: ar->inv is theirs */
    uint32_t n; /* beams (rows) to do */
    _Atomic uint32_t next;
} step_ctx;

/* rows_inverse inverts a dense input's vocabulary (when there is one)
 * for the call's beams to find their columns child by child. */
static int rows_inverse(ft_ar *ar, const ft_ar_input *in, step_ctx *c)
{
    c->inv = 0;
    if (in->form != FT_AR_IN_DENSE || in->vocab == NULL || ar->inv_off)
        return FT_OK;
    int rc = vocab_inverse(ar, in->vocab, in->width);
    c->inv = rc == FT_OK;
    return rc;
}

/* beam_lse is a beam's normalisation (row_lse), through the inverted
 * vocabulary where the call has one and the sums are over the allowed
 * entries. */
static inline __attribute__((always_inline)) int
beam_lse_body(const ft_ar *ar, ar_scr *sc, const step_ctx *c, const row *w,
              const ft_child_range *cr, double *lse)
{
    const ft_trie_view *v = &ar->idx->trie.view;
    if (c->inv && w->in->norm == FT_AR_NORM_ALLOWED &&
        cr->deg <= w->in->width) {
        int ok, rc = allowed_lse(ar, sc, w, v, cr, lse, &ok);
        if (ok)
            return rc;
    }
    return row_lse(sc->lanes, w, v, cr, lse);
}

/* ar_fma says whether ar's CPU normalisations run in beam_lse's clone for
 * AVX2 and FMA (a read of libgcc's CPU model; never with ar->no_fma):
 * there ar_rules.h's fused multiply-adds are instructions; in the other
 * clone they are fmaf calls (the same bits, slower). */
static int ar_fma(const ft_ar *ar)
{
    return !ar->no_fma && __builtin_cpu_supports("avx2") &&
           __builtin_cpu_supports("fma");
}

/* beam_lse's clones: with AVX2 and FMA, and without (ar_fma). */
__attribute__((target("avx2,fma"))) static int
beam_lse_fma(const ft_ar *ar, ar_scr *sc, const step_ctx *c, const row *w,
             const ft_child_range *cr, double *lse)
{
    return beam_lse_body(ar, sc, c, w, cr, lse);
}

static int beam_lse_base(const ft_ar *ar, ar_scr *sc, const step_ctx *c,
                         const row *w, const ft_child_range *cr, double *lse)
{
    return beam_lse_body(ar, sc, c, w, cr, lse);
}

static int beam_lse(const ft_ar *ar, ar_scr *sc, const step_ctx *c,
                    const row *w, const ft_child_range *cr, double *lse)
{
    if (ar_fma(ar))
        return beam_lse_fma(ar, sc, c, w, cr, lse);
    return beam_lse_base(ar, sc, c, w, cr, lse);
}

/* step_beam offers beam r's entries to the thread's buffers. */
static void step_beam(ft_ar *ar, ar_scr *sc, bounded *nb, bounded *hb,
                      const step_ctx *c, uint32_t r)
{
    const ft_trie_view *v = &ar->idx->trie.view;
    const ft_ar_input *in = c->in;
    ft_child_range cr = ar->cr[r];
    if (cr.deg == 0)
        return;
    row w = row_of(in, r);
    double lse = 0.0;
    if (in->norm != FT_AR_NORM_NONE && !beam_lse(ar, sc, c, &w, &cr, &lse))
        return;
    float s = c->cur->sigma[r];
    uint32_t len = c->cur->len[r];
    if (child_driven(in, &cr)) {
        /* Labels ascend: those below width are a prefix. */
        for (uint64_t u = cr.first; u < cr.first + cr.deg; u++) {
            uint32_t lab = ft_child_label(v, &cr, u);
            if (lab >= in->width)
                break;
            float x = row_x(&w, lab);
            float rho = in->norm ? ft_ar_norm(x, lse) : x;
            offer(ar, nb, hb, v, &cr, r, s, len, lab, lab, rho, u);
        }
        return;
    }
    if (c->inv && cr.deg <= in->width) {
        /* the columns whose token labels a child, child by child (the
         * vocabulary inverted): the same candidates as every column */
        inv_walk it;
        uint32_t j;
        uint64_t u;
        inv_walk_init(&it, ar, &cr, in->width);
        while (inv_walk_next(&it, v, &j, &u))
            offer(ar, nb, hb, v, &cr, r, s, len, j, it.lab,
                  row_rho(&w, j, lse), u);
        return;
    }
    for (uint32_t j = 0; j < in->width; j++) {
        float x = row_x(&w, j);
        float rho = in->norm ? ft_ar_norm(x, lse) : x;
        offer(ar, nb, hb, v, &cr, r, s, len, j, row_tok(&w, j), rho, FT_NONE);
    }
}

/* ctx_take returns the first of the next AR_CHUNK rows, >= c->n when
 * none is left. */
static uint32_t ctx_take(step_ctx *c)
{
    return atomic_fetch_add_explicit(&c->next, AR_CHUNK, memory_order_relaxed);
}

static void step_job(ft_ar *ar, uint32_t wid, void *ctx)
{
    step_ctx *c = ctx;
    ar_scr *sc = &ar->scr[wid];
    bounded nb = {sc->nb, 0, ar->o.beam, 0, 0, 0};
    bounded hb = {sc->hb, 0, ar->o.results, 0, 0, 0};
    for (uint32_t r0; (r0 = ctx_take(c)) < c->n;)
        for (uint32_t r = r0; r < c->n && r < r0 + AR_CHUNK; r++)
            step_beam(ar, sc, &nb, c->hits ? &hb : NULL, c, r);
    sc->n_nb = bounded_finish(&nb);
    sc->n_hb = c->hits ? bounded_finish(&hb) : 0;
}

/* kept returns the step's best keep candidates in order (*n of them):
 * the one thread's buffer, or the threads' kept ones merged (into
 * ar->merge) and cut. */
static const ft_ar_cand *kept(ft_ar *ar, uint32_t nt, int term, size_t keep,
                              size_t *n)
{
    ar_scr *sc = ar->scr;
    if (nt == 1) {
        *n = term ? sc[0].n_hb : sc[0].n_nb;
        return term ? sc[0].hb : sc[0].nb;
    }
    size_t m = 0;
    for (uint32_t t = 0; t < nt; t++) {
        size_t k = term ? sc[t].n_hb : sc[t].n_nb;
        memcpy(ar->merge + m, term ? sc[t].hb : sc[t].nb, k * sizeof *ar->merge);
        m += k;
    }
    qsort(ar->merge, m, sizeof *ar->merge, cand_cmp);
    *n = m < keep ? m : keep;
    return ar->merge;
}

static int cpu_step(ft_ar *ar, const ft_ar_beams *cur, const ft_ar_input *in,
                    ft_ar_beams *next, ft_ar_hits *hits)
{
    const ft_trie *t = &ar->idx->trie;
    uint64_t work = 0;
    int rc = beams_check(ar, cur, in, &work);
    if (rc != FT_OK)
        return rc;
    step_ctx c = {.cur = cur, .in = in, .hits = hits != NULL,
                  .n = cur->count[0]};
    atomic_init(&c.next, 0);
    if ((rc = rows_inverse(ar, in, &c)) != FT_OK)
        return rc;
    uint32_t nt = ar_threads(ar, work, c.n);
    if (nt > 1)
        ar_par(ar, step_job, &c);
    else
        step_job(ar, 0, &c);
    size_t nn;
    const ft_ar_cand *a = kept(ar, nt, 0, ar->o.beam, &nn);
    for (size_t i = 0; i < nn; i++) {
        const ft_ar_cand *k = &a[i];
        next->node[i] = k->node;
        next->sigma[i] = k->sigma;
        next->len[i] = k->len;
        next->parent[i] = ft_ar_tail_rank(k->k2);
        next->entry[i] = ft_ar_tail_entry(k->k2);
        next->token[i] = k->token;
    }
    next->count[0] = (uint32_t)nn;
    if (hits) {
        size_t nh;
        a = kept(ar, nt, 1, ar->o.results, &nh);
        for (size_t i = 0; i < nh; i++) {
            const ft_ar_cand *k = &a[i];
            uint64_t ki = ft_trie_term_rank(t, k->node);
            hits->parent[i] = ft_ar_tail_rank(k->k2);
            hits->entry[i] = ft_ar_tail_entry(k->k2);
            hits->token[i] = k->token;
            hits->len[i] = k->len;
            hits->key_index[i] = ki;
            hits->value[i] = ft_packed_get(t->values, t->value_bits,
                                           ki < t->n_keys ? ki : 0);
            hits->score[i] = k->score;
            hits->sigma[i] = k->sigma;
        }
        hits->count[0] = (uint32_t)nh;
    }
    return FT_OK;
}

/* An array a call reads or writes: its group ("cur", "next", "hits",
 * "mask", ...), its name in the group ("" when the group is the array)
 * and its bytes. */
typedef struct {
    const char *group, *name;
    uintptr_t p;
    size_t n;
} ar_span;

static size_t beam_spans(ar_span *s, const char *group, const ft_ar_beams *b,
                         uint32_t cap)
{
    static const char *const nm[7] = {"count", "node", "sigma", "len",
                                       "parent", "entry", "token"};
    const void *p[7] = {b->count, b->node, b->sigma, b->len,
                        b->parent, b->entry, b->token};
    size_t sz[7] = {4, (size_t)cap * 8, (size_t)cap * 4, (size_t)cap * 4,
                    (size_t)cap * 4, (size_t)cap * 4, (size_t)cap * 4};
    for (int i = 0; i < 7; i++)
        s[i] = (ar_span){group, nm[i], (uintptr_t)p[i], sz[i]};
    return 7;
}

static size_t hit_spans(ar_span *s, const ft_ar_hits *h, uint32_t cap)
{
    static const char *const nm[9] = {"count", "parent", "entry", "token",
                                       "len", "key_index", "value", "score",
                                       "sigma"};
    const void *p[9] = {h->count, h->parent, h->entry, h->token, h->len,
                        h->key_index, h->value, h->score, h->sigma};
    size_t sz[9] = {4, (size_t)cap * 4, (size_t)cap * 4, (size_t)cap * 4,
                    (size_t)cap * 4, (size_t)cap * 8, (size_t)cap * 8,
                    (size_t)cap * 8, (size_t)cap * 4};
    for (int i = 0; i < 9; i++)
        s[i] = (ar_span){"hits", nm[i], (uintptr_t)p[i], sz[i]};
    return 9;
}

static int spans_meet(const ar_span *x, const ar_span *y)
{
    return x->p < y->p + y->n && y->p < x->p + x->n;
}

/* span_name writes a span's full name ("next.sigma", "mask"). */
static void span_name(const ar_span *x, char *out, size_t len)
{
    snprintf(out, len, "%s%s%s", x->group, x->name[0] ? "." : "", x->name);
}

/* writes_clash names in why the first array a call (what: "a step")
 * writes, wr[i], that shares bytes with one of cur's it reads (rd, 7
 * spans) or with another it writes; 0 when none does. */
static int writes_clash(const ar_span *rd, const ar_span *wr, size_t nw,
                        const char *what, char *why, size_t len)
{
    char a[48], b[48];
    for (size_t i = 0; i < nw; i++) {
        span_name(&wr[i], a, sizeof a);
        for (size_t j = 0; j < 7; j++)
            if (spans_meet(&wr[i], &rd[j])) {
                snprintf(why, len, "%s overlaps cur.%s: %s reads cur while "
                         "it writes %s", a, rd[j].name, what, wr[i].group);
                return 1;
            }
        for (size_t j = 0; j < i; j++)
            if (spans_meet(&wr[i], &wr[j])) {
                span_name(&wr[j], b, sizeof b);
                snprintf(why, len, "%s overlaps %s: %s writes both", a, b,
                         what);
                return 1;
            }
    }
    return 0;
}

/* step_overlap: writes_clash for a step (next's arrays at the configured
 * beam, then hits' at the configured results). */
static int step_overlap(const ft_ar *ar, const ft_ar_beams *cur,
                        const ft_ar_beams *next, const ft_ar_hits *hits,
                        char *why, size_t len)
{
    ar_span rd[7], wr[16];
    beam_spans(rd, "cur", cur, ar->o.beam);
    size_t nw = beam_spans(wr, "next", next, ar->o.beam);
    if (hits)
        nw += hit_spans(wr + nw, hits, ar->o.results);
    return writes_clash(rd, wr, nw, "a step", why, len);
}

int ft_ar_step(ft_ar *ar, const ft_ar_beams *cur, const ft_ar_input *in,
               ft_ar_beams *next, ft_ar_hits *hits, void *stream)
{
    if (ar == NULL)
        return FT_EINVAL;
    if (ar->failed)
        return FT_ESTATE;
    int rc = check_input(ar, in, ar->o.max_width, " (max_width)");
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
    if (step_overlap(ar, cur, next, hits, ar->err, sizeof ar->err))
        return FT_EINVAL;
    if (ar->gpu)
        return ft_gpu_ar_step(ar, cur, in, next, hits, stream);
    return cpu_step(ar, cur, in, next, hits);
}

/* ---- mask and top-k forms --------------------------------------------- */

static void mask_beam(ft_ar *ar, const step_ctx *c, uint32_t r)
{
    const ft_trie_view *v = &ar->idx->trie.view;
    uint32_t width = c->width, *row = c->mask + (size_t)r * ((width + 31) / 32);
    ft_child_range cr = ar->cr[r];
    if (c->inv && cr.deg > 0 && cr.deg <= width) {
        /* the columns of each child's label, from the inverse: the same
         * bits as asking every column's token (labels are distinct) */
        inv_walk it;
        uint32_t j;
        uint64_t u;
        inv_walk_init(&it, ar, &cr, width);
        while (inv_walk_next(&it, v, &j, &u))
            row[j / 32] |= 1u << (j % 32);
    } else if (c->vocab == NULL) {
        for (uint64_t u = cr.first; u < cr.first + cr.deg; u++) {
            uint32_t lab = ft_child_label(v, &cr, u);
            if (lab >= width)
                break;
            row[lab / 32] |= 1u << (lab % 32);
        }
    } else if (cr.deg > 0) {
        for (uint32_t j = 0; j < width; j++)
            if (ft_find_child(v, &cr, c->vocab[j]) != FT_NONE)
                row[j / 32] |= 1u << (j % 32);
    }
    uint64_t node = c->cur->node[r];
    if (c->eos < width &&
        (ft_arw_state(node) ||
         (node != 0 && (ft_node_flags(v, node) & FT_TERMINAL))))
        row[c->eos / 32] |= 1u << (c->eos % 32);
}

static void mask_job(ft_ar *ar, uint32_t wid, void *ctx)
{
    (void)wid;
    step_ctx *c = ctx;
    for (uint32_t r0; (r0 = ctx_take(c)) < c->n;)
        for (uint32_t r = r0; r < c->n && r < r0 + AR_CHUNK; r++)
            mask_beam(ar, c, r);
}

int ft_ar_mask(ft_ar *ar, const ft_ar_beams *cur, uint32_t width,
               const uint32_t *vocab, uint32_t eos, uint32_t *mask,
               void *stream)
{
    if (ar == NULL)
        return FT_EINVAL;
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
    {
        ar_span rd[7], wr[1] = {{"mask", "", (uintptr_t)mask,
                                 (size_t)ar->cap_beam * ((width + 31) / 32) * 4}};
        beam_spans(rd, "cur", cur, ar->o.beam);
        if (writes_clash(rd, wr, 1, "ft_ar_mask", errbuf, errlen))
            return FT_EINVAL;
    }
    if (ar->gpu)
        return ft_gpu_ar_mask(ar, cur, width, vocab, eos, mask, stream);
    uint64_t work = 0;
    rc = beams_check(ar, cur, NULL, &work);
    if (rc != FT_OK)
        return rc;
    uint32_t m = cur->count[0];
    step_ctx c = {.width = width, .vocab = vocab, .eos = eos, .mask = mask,
                  .cur = cur, .n = m};
    atomic_init(&c.next, 0);
    memset(mask, 0, (size_t)ar->cap_beam * ((width + 31) / 32) * 4);
    if (vocab && !ar->inv_off) {
        if ((rc = vocab_inverse(ar, vocab, width)) != FT_OK)
            return rc;
        c.inv = 1;
    }
    uint32_t nt = ar_threads(ar, work, m);
    if (nt > 1)
        ar_par(ar, mask_job, &c);
    else
        mask_job(ar, 0, &c);
    return FT_OK;
}

/* ---- constrain: the mask applied to dense rows ------------------------ */

/* CONSTRAIN_ROW(T) is a row of width elements of T (an integer type of
 * the element's size: bits are copied, never converted): out[j] = in[j]
 * where bit j of m is set, else neg (-inf's bits); in place (out == in)
 * only the -inf are written.  Whole words in loops of 32 (the compiler
 * makes vector code of them), the last part-word alone. */
#define CONSTRAIN_ROW(T)                                                   \
    static void constrain_row_##T(const T *in, T *out, const uint32_t *m,  \
                                  uint32_t width, T neg)                   \
    {                                                                      \
        uint32_t full = width / 32;                                        \
        for (uint32_t k = 0; k < full; k++) {                              \
            uint32_t wd = m[k];                                            \
            const T *a = in + (size_t)k * 32;                              \
            T *b = out + (size_t)k * 32;                                   \
            if (wd == 0)                                                   \
                for (uint32_t i = 0; i < 32; i++)                          \
                    b[i] = neg;                                            \
            else if (in != out || wd != UINT32_MAX)                        \
                for (uint32_t i = 0; i < 32; i++)                          \
                    b[i] = (wd >> i) & 1u ? a[i] : neg;                    \
        }                                                                  \
        for (uint32_t j = full * 32; j < width; j++)                       \
            out[j] = (m[full] >> (j % 32)) & 1u ? in[j] : neg;             \
    }
CONSTRAIN_ROW(uint32_t)
CONSTRAIN_ROW(uint16_t)
#undef CONSTRAIN_ROW

static void constrain_job(ft_ar *ar, uint32_t wid, void *ctx)
{
    (void)ar, (void)wid;
    step_ctx *c = ctx;
    const ft_ar_input *in = c->in;
    uint32_t width = in->width, words = (width + 31) / 32;
    size_t stride = in->stride ? in->stride : width;
    for (uint32_t r0; (r0 = ctx_take(c)) < c->n;)
        for (uint32_t r = r0; r < c->n && r < r0 + AR_CHUNK; r++) {
            const uint32_t *m = c->mask + (size_t)r * words;
            size_t at = (size_t)r * stride;
            if (in->dtype == FT_AR_IN_F32)
                constrain_row_uint32_t((const uint32_t *)in->logp + at,
                                       (uint32_t *)c->cout + at, m, width,
                                       0xff800000u);
            else
                constrain_row_uint16_t((const uint16_t *)in->logp + at,
                                       (uint16_t *)c->cout + at, m, width,
                                       in->dtype == FT_AR_IN_F16 ? 0xfc00u
                                                                 : 0xff80u);
        }
}

/* constrain_check refuses what ft_ar_constrain cannot take, naming it. */
static int constrain_check(ft_ar *ar, const ft_ar_beams *cur,
                           const ft_ar_input *in, uint32_t rows,
                           const uint32_t *mask, const void *out)
{
    char *errbuf = ar->err;
    size_t errlen = sizeof ar->err;
    /* any width the mask takes, not only max_width's */
    int rc = check_input(ar, in, FT_AR_WIDTH_MAX, "");
    if (rc != FT_OK)
        return rc;
    FT_RETURN_ERROR_IF(in->form != FT_AR_IN_DENSE, FT_EINVAL,
                       "input.form: ft_ar_constrain takes dense rows, got "
                       "form %d", in->form);
    FT_RETURN_ERROR_IF(in->norm != FT_AR_NORM_NONE, FT_EINVAL,
                       "input.norm: ft_ar_constrain normalises nothing, got "
                       "%d", in->norm);
    FT_RETURN_ERROR_IF(out == NULL, FT_EINVAL, "out: NULL");
    FT_RETURN_ERROR_IF(mask == NULL, FT_EINVAL, "mask: NULL");
    FT_RETURN_ERROR_IF(rows < 1 || rows > ar->cap_beam, FT_EINVAL,
                       "rows: must be 1..%u (beam), got %u", ar->cap_beam,
                       rows);
    size_t esz = in->dtype == FT_AR_IN_F32 ? 4 : 2;
    size_t stride = in->stride ? in->stride : in->width;
    size_t span = ((rows - 1) * stride + in->width) * esz;
    ar_span lp = {"input.logp", "", (uintptr_t)in->logp, span};
    ar_span o = {"out", "", (uintptr_t)out, span};
    ar_span mk = {"mask", "", (uintptr_t)mask,
                  (size_t)ar->cap_beam * ((in->width + 31) / 32) * 4};
    ar_span rd[7];
    beam_spans(rd, "cur", cur, ar->o.beam);
    if (writes_clash(rd, &o, 1, "ft_ar_constrain", errbuf, errlen))
        return FT_EINVAL;
    FT_RETURN_ERROR_IF(o.p != lp.p && spans_meet(&o, &lp), FT_EINVAL,
                       "out overlaps input.logp: it must be input.logp (in "
                       "place) or share no byte with it");
    FT_RETURN_ERROR_IF(spans_meet(&mk, &lp) || spans_meet(&mk, &o), FT_EINVAL,
                       "mask overlaps %s: ft_ar_constrain writes the mask "
                       "before it reads the rows",
                       spans_meet(&mk, &lp) ? "input.logp" : "out");
    return FT_OK;
}

int ft_ar_constrain(ft_ar *ar, const ft_ar_beams *cur, const ft_ar_input *in,
                    uint32_t rows, uint32_t eos, uint32_t *mask, void *out,
                    void *stream)
{
    if (ar == NULL)
        return FT_EINVAL;
    if (ar->failed)
        return FT_ESTATE;
    int rc = check_beams(ar, cur, "cur");
    if (rc == FT_OK)
        rc = constrain_check(ar, cur, in, rows, mask, out);
    if (rc == FT_OK)
        rc = ft_ar_mask(ar, cur, in->width, in->vocab, eos, mask, stream);
    if (rc != FT_OK)
        return rc;
    if (ar->gpu)
        return ft_gpu_ar_constrain(ar, in, rows, mask, out, stream);
    step_ctx c = {.in = in, .mask = mask, .cout = out, .n = rows};
    atomic_init(&c.next, 0);
    /* a row's element (~0.1 ns on the 2-core machine) costs a small
     * fraction of a step's entry: large calls only are shared out */
    uint64_t work = (uint64_t)rows * in->width / 32;
    if (ar_threads(ar, work, rows) > 1)
        ar_par(ar, constrain_job, &c);
    else
        constrain_job(ar, 0, &c);
    return FT_OK;
}

/* ---- walk ------------------------------------------------------------- */

/* A row's child lookup costs about as much as this many row entries of a
 * step (ar_threads' unit of work). */
#define AR_WALK_COST 16u

typedef struct walk_ctx {
    const int64_t *ids, *from;
    const uint32_t *lens, *vocab;
    uint64_t stride;
    uint32_t len, vocab_len, n;
    int64_t eos;
    int64_t *state;
    _Atomic uint32_t next;
} walk_ctx;

static void walk_job(ft_ar *ar, uint32_t wid, void *ctx)
{
    (void)wid;
    walk_ctx *c = ctx;
    const ft_trie_view *v = &ar->idx->trie.view;
    for (uint32_t r0; (r0 = atomic_fetch_add_explicit(
                           &c->next, 64u, memory_order_relaxed)) < c->n;)
        for (uint32_t r = r0; r < c->n && r < r0 + 64u; r++)
            c->state[r] = ft_ar_walk_row(
                v, NULL, c->from ? c->from[r] : 0,
                c->ids ? c->ids + (size_t)r * c->stride : NULL, /* len 0 */
                c->lens ? c->lens[r] : c->len, c->vocab, c->vocab_len, c->eos);
}

int ft_ar_walk(ft_ar *ar, const int64_t *ids, uint32_t rows, uint32_t len,
               uint64_t stride, const uint32_t *lens, const int64_t *from,
               const uint32_t *vocab, uint32_t vocab_len, int64_t eos,
               int64_t *state, void *stream)
{
    if (ar == NULL)
        return FT_EINVAL;
    if (ar->failed)
        return FT_ESTATE;
    char *errbuf = ar->err;
    size_t errlen = sizeof ar->err;
    if (stride == 0)
        stride = len;
    FT_RETURN_ERROR_IF(stride < len, FT_EINVAL,
                       "stride: %llu is below len %u",
                       (unsigned long long)stride, len);
    FT_RETURN_ERROR_IF(rows > 0 && state == NULL, FT_EINVAL, "state: NULL");
    FT_RETURN_ERROR_IF(rows > 0 && len > 0 && ids == NULL, FT_EINVAL,
                       "ids: NULL");
    FT_RETURN_ERROR_IF(vocab == NULL && vocab_len != 0, FT_EINVAL,
                       "vocab: NULL with vocab_len %u", vocab_len);
    if (rows == 0)
        return FT_OK;
    if (ar->gpu)
        return ft_gpu_ar_walk(ar, ids, rows, len, stride, lens, from, vocab,
                              vocab_len, eos, state, stream);
    uint64_t n_nodes = ar->idx->trie.view.n_nodes, steps = 0;
    for (uint32_t r = 0; r < rows; r++) {
        FT_RETURN_ERROR_IF(lens && lens[r] > len, FT_EINVAL,
                           "lens[%u]: %u exceeds len %u", r, lens[r], len);
        FT_RETURN_ERROR_IF(from && from[r] != FT_AR_DEAD &&
                               from[r] != FT_AR_DONE &&
                               (from[r] < 0 || (uint64_t)from[r] >= n_nodes),
                           FT_EINVAL,
                           "from[%u]: %lld is no state (a node below %llu, "
                           "FT_AR_DEAD or FT_AR_DONE)", r,
                           (long long)from[r], (unsigned long long)n_nodes);
        steps += lens ? lens[r] : len;
    }
    walk_ctx c = {.ids = ids, .from = from, .lens = lens, .vocab = vocab,
                  .stride = stride, .len = len, .vocab_len = vocab_len,
                  .n = rows, .eos = eos, .state = state};
    atomic_init(&c.next, 0);
    uint64_t work = (steps > rows ? steps : rows) * AR_WALK_COST;
    if (ar_threads(ar, work, rows) > 1)
        ar_par(ar, walk_job, &c);
    else
        walk_job(ar, 0, &c);
    return FT_OK;
}

/* topk_insert puts key into the sorted best k of keys[0..*nk) (a full
 * list drops its last). */
static inline void topk_insert(uint64_t *keys, uint32_t *nk, uint32_t k,
                               uint64_t key)
{
    if (*nk == k && key >= keys[k - 1])
        return;
    uint32_t i = *nk < k ? (*nk)++ : k - 1;
    while (i > 0 && keys[i - 1] > key) {
        keys[i] = keys[i - 1];
        i--;
    }
    keys[i] = key;
}

/* topk_beam writes row r's constrained top k (rows past the beams:
 * none). */
static void topk_beam(ft_ar *ar, ar_scr *sc, const step_ctx *c, uint32_t r)
{
    const ft_trie_view *v = &ar->idx->trie.view;
    const ft_ar_input *in = c->in;
    uint32_t m = c->cur->count[0], k = c->k;
    uint32_t *out_entry = c->out_entry, *out_token = c->out_token;
    float *out_logp = c->out_logp;
    uint64_t keys[64];
    uint32_t nk = 0;
    ft_child_range cr = {0, 0, 0, 0};
    if (r < m)
        cr = ar->cr[r];
    row w = row_of(in, r);
    double lse = 0.0;
    int live = r < m && cr.deg > 0 &&
               (in->norm == FT_AR_NORM_NONE || beam_lse(ar, sc, c, &w, &cr, &lse));
    int cd = live && child_driven(in, &cr);
    uint64_t nit = !live ? 0 : cd ? cr.deg : in->width;
    if (live && !cd && c->inv && cr.deg <= in->width) {
        /* through the inverted vocabulary: the columns of each child */
        inv_walk it;
        uint32_t j;
        uint64_t u;
        inv_walk_init(&it, ar, &cr, in->width);
        while (inv_walk_next(&it, v, &j, &u)) {
            float rho = row_rho(&w, j, lse);
            if (ft_ar_takes(rho, ar->o.theta_tok) &&
                FT_FADD(c->cur->sigma[r], rho) > ar->o.theta_sent)
                topk_insert(keys, &nk, k, ft_ar_tail(0, rho, j));
        }
        nit = 0;
    }
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
        if (!ft_ar_takes(rho, ar->o.theta_tok) ||
            !(FT_FADD(c->cur->sigma[r], rho) > ar->o.theta_sent) ||
            (!cd && ft_find_child(v, &cr, row_tok(&w, j)) == FT_NONE))
            continue;
        topk_insert(keys, &nk, k, ft_ar_tail(0, rho, j));
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

static void topk_job(ft_ar *ar, uint32_t wid, void *ctx)
{
    step_ctx *c = ctx;
    for (uint32_t r0; (r0 = ctx_take(c)) < c->n;)
        for (uint32_t r = r0; r < c->n && r < r0 + AR_CHUNK; r++)
            topk_beam(ar, &ar->scr[wid], c, r);
}

int ft_ar_topk(ft_ar *ar, const ft_ar_beams *cur, const ft_ar_input *in,
               uint32_t k, uint32_t *out_entry, uint32_t *out_token,
               float *out_logp, void *stream)
{
    if (ar == NULL)
        return FT_EINVAL;
    if (ar->failed)
        return FT_ESTATE;
    char *errbuf = ar->err;
    size_t errlen = sizeof ar->err;
    int rc = check_input(ar, in, ar->o.max_width, " (max_width)");
    if (rc == FT_OK)
        rc = check_beams(ar, cur, "cur");
    if (rc != FT_OK)
        return rc;
    FT_RETURN_ERROR_IF(k < 1 || k > 64, FT_EINVAL, "k: must be 1..64, got %u",
                       k);
    FT_RETURN_ERROR_IF(!out_entry || !out_token || !out_logp, FT_EINVAL,
                       "topk outputs: NULL array");
    {
        size_t n = (size_t)ar->cap_beam * k * 4;
        ar_span rd[7], wr[3] = {{"out_entry", "", (uintptr_t)out_entry, n},
                                {"out_token", "", (uintptr_t)out_token, n},
                                {"out_logp", "", (uintptr_t)out_logp, n}};
        beam_spans(rd, "cur", cur, ar->o.beam);
        if (writes_clash(rd, wr, 3, "ft_ar_topk", errbuf, errlen))
            return FT_EINVAL;
    }
    if (ar->gpu)
        return ft_gpu_ar_topk(ar, cur, in, k, out_entry, out_token, out_logp,
                              stream);
    uint64_t work = 0;
    rc = beams_check(ar, cur, in, &work);
    if (rc != FT_OK)
        return rc;
    step_ctx c = {.cur = cur, .in = in, .k = k, .out_entry = out_entry,
                  .out_token = out_token, .out_logp = out_logp,
                  .n = ar->cap_beam};
    atomic_init(&c.next, 0);
    if ((rc = rows_inverse(ar, in, &c)) != FT_OK)
        return rc;
    uint32_t nt = ar_threads(ar, work, cur->count[0]);
    if (nt > 1)
        ar_par(ar, topk_job, &c);
    else
        topk_job(ar, 0, &c);
    return FT_OK;
}
