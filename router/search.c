/*
 * search.c - the public search: validate every request with the one
 * validator, prepare the valid ones, run them on an engine and attach the
 * values of the hits (values stay in host memory; engines report each
 * hit's key index).  This is the single place where values are attached.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashtrie.h"
#include "search_impl.h"

/* Each calling thread keeps its own prepared-request buffers (an engine
 * serves one caller at a time, but callers of different engines run at
 * once), made on first use and freed when the thread ends. */
typedef struct prep_pool {
    fti_prep *p[FTI_ENGINE_CHUNK];
} prep_pool;

static pthread_key_t pool_key;
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

static void pool_free(void *arg)
{
    prep_pool *pp = arg;
    for (int i = 0; i < FTI_ENGINE_CHUNK; i++)
        fti_prep_destroy(pp->p[i]);
    free(pp);
}

static void pool_init(void) { (void)pthread_key_create(&pool_key, pool_free); }

fti_prep **fti_prep_pool(void)
{
    pthread_once(&pool_once, pool_init);
    prep_pool *pp = pthread_getspecific(pool_key);
    if (pp == NULL) {
        pp = calloc(1, sizeof *pp);
        if (pp == NULL || pthread_setspecific(pool_key, pp) != 0) {
            free(pp);
            return NULL;
        }
    }
    return pp->p;
}

int fti_search_admit(fti_prep **slot, const fti_prepared **out,
                     const ft_request *req, uint32_t max_beam, ft_result *res,
                     int mode)
{
    int late = mode == FTI_ADMIT_LATE || mode == FTI_ADMIT_DOOR;
    res->n = 0;
    res->error[0] = 0;
    res->status =
        mode == FTI_ADMIT_TRUSTED || mode == FTI_ADMIT_DOOR
            ? fti_request_validate_fields(req, max_beam, res->error,
                                          sizeof res->error)
        : late ? fti_request_validate_early(req, max_beam, res->error,
                                            sizeof res->error)
               : ft_request_validate(req, max_beam, res->error,
                                     sizeof res->error);
    if (res->status != FT_OK)
        return res->status;
    uint32_t nres = req->results ? req->results : req->beam;
    if (res->cap_hits < nres || res->cap_tokens / req->T < nres) {
        /* A request fault is said before this one. */
        if (late && (res->status = fti_request_validate_late(
                         req, res->error, sizeof res->error)) != FT_OK)
            return res->status;
        res->status = FT_ELIMIT;
        snprintf(res->error, sizeof res->error,
                 "results: %u results of up to %u tokens do not fit the "
                 "result buffer", nres, req->T);
        return res->status;
    }
    int rc = *slot ? FT_OK : fti_prep_create(slot);
    if (rc == FT_OK)
        rc = fti_request_prepare(out, *slot, req);
    if (rc != FT_OK) {
        res->status = rc;
        snprintf(res->error, sizeof res->error,
                 "engine: out of memory preparing the request");
    }
    return rc;
}

size_t fti_admit_chunk(fti_prep **pool, const ft_request *reqs, size_t n,
                       size_t *i, uint32_t max_beam, ft_result *res,
                       const fti_prepared **vp, ft_result **vres,
                       const ft_request **vreq, int mode)
{
    size_t m = 0;
    if (mode == FTI_ADMIT_LATE && vreq == NULL)
        mode = FTI_ADMIT_FULL;
    int late = mode == FTI_ADMIT_LATE || mode == FTI_ADMIT_DOOR;
    for (; *i < n && m < FTI_ENGINE_CHUNK; (*i)++) {
        ft_result *r = &res[*i];
        if (fti_search_admit(&pool[m], &vp[m], &reqs[*i], max_beam, r,
                             mode) != FT_OK)
            continue;
        if (late && vreq == NULL &&
            (r->status = fti_request_validate_late(&reqs[*i], r->error,
                                                   sizeof r->error)) != FT_OK)
            continue; /* FTI_ADMIT_DOOR, no caller to check: here */
        if (late && vreq)
            vreq[m] = &reqs[*i];
        vres[m++] = r;
    }
    return m;
}

/* The late part of admission (duplicate tokens), run by the engine while
 * it works: a request that fails gets its error, and the engine drops its
 * answer. */
typedef struct late_check {
    const ft_request **reqs;
    ft_result **res;
    size_t n;
} late_check;

static void check_late(void *arg)
{
    late_check *c = arg;
    for (size_t j = 0; j < c->n; j++) {
        ft_result *r = c->res[j];
        int st = fti_request_validate_late(c->reqs[j], r->error,
                                           sizeof r->error);
        if (st != FT_OK) {
            r->n = 0;
            r->status = st;
        }
    }
}

int fti_engine_run_late(ft_engine *eng, const fti_prepared *const *vp,
                        ft_result **vres, const ft_request **vreq, size_t m)
{
    late_check lc = {vreq, vres, m};
    return fti_engine_run_checked(eng, vp, vres, m,
                                  vreq ? check_late : NULL, &lc);
}

/* bad_key_index fails res for hit j's key index, past its shard's keys. */
static int bad_key_index(ft_result *res, uint32_t j)
{
    /* Never read past the values, never answer wrongly. */
    FT_LOGF(FT_LOG_ERROR, "search: key index %llu out of range (a damaged "
            "unverified index, or a bug)",
            (unsigned long long)res->hits[j].key_index);
    res->n = 0;
    res->status = FT_EINTERNAL;
    snprintf(res->error, sizeof res->error,
             "engine: bad key index (internal error)");
    return FT_EINTERNAL;
}

int fti_attach_values(ft_result *res, const ft_index *const *shards,
                      const uint64_t *key_base, size_t nshards)
{
    uint32_t bad;
    int rc = nshards == 1 && key_base[0] == 0 /* the common case */
                 ? fti_index_values_attach(shards[0], res->hits, res->n,
                                           &bad)
                 : fti_index_values_attach_shards(shards, key_base, nshards,
                                                  res->hits, res->n, &bad);
    return rc == FT_OK ? FT_OK : bad_key_index(res, bad);
}

int ft_engine_search(ft_engine *eng, const ft_request *req, ft_result *res)
{
    if (eng == NULL || req == NULL || res == NULL)
        return FT_EINVAL;
    int rc = ft_engine_search_batch(eng, req, 1, res);
    return rc != FT_OK ? rc : res->status;
}

int ft_engine_search_batch(ft_engine *eng, const ft_request *reqs, size_t n,
                           ft_result *res)
{
    /* The public search is a door: it validates, the duplicate tokens
     * while the engine runs (on a GPU they overlap the launch). */
    if (eng == NULL || (n > 0 && (reqs == NULL || res == NULL)))
        return FT_EINVAL;
    return fti_engine_search_batch(eng, reqs, n, res, FTI_ADMIT_LATE);
}

int fti_engine_search_batch(ft_engine *eng, const ft_request *reqs, size_t n,
                            ft_result *res, int mode)
{
    const fti_prepared *vp[FTI_ENGINE_CHUNK];
    ft_result *vres[FTI_ENGINE_CHUNK];
    const ft_request *vreq[FTI_ENGINE_CHUNK];
    if (ft_engine_failed(eng))
        return FT_ESTATE;
    fti_prep **pool = fti_prep_pool();
    if (pool == NULL)
        return FT_ENOMEM;
    ft_engine_opts o;
    ft_engine_get_opts(&o, eng);
    const ft_index *idx = fti_engine_index(eng);
    uint64_t base0 = 0;
    size_t i = 0;
    while (i < n) {
        size_t m = fti_admit_chunk(pool, reqs, n, &i, o.max_beam, res, vp,
                                   vres, vreq, mode);
        if (m == 0)
            continue;
        int late = mode == FTI_ADMIT_LATE || mode == FTI_ADMIT_DOOR;
        int rc = fti_engine_run_late(eng, vp, vres, late ? vreq : NULL, m);
        if (rc != FT_OK)
            return rc;
        /* A GPU engine with the values on the device gave them already */
        if (!fti_engine_values_attached(eng))
            for (size_t j = 0; j < m; j++)
                if (vres[j]->status == FT_OK)
                    fti_attach_values(vres[j], &idx, &base0, 1);
    }
    return FT_OK;
}
