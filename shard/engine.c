/*
 * engine.c - the public engine API: opens the engine of the asked kind,
 * validates every request with the one validator, and hands valid ones to
 * the engine in chunks.
 */
#include "search.h"

/* ft_gpu_engine_open lives in gpu_engine.c, which every build compiles (it
 * answers FT_ENOTSUP without CUDA).  No weak default here: in a static
 * library a weak definition in engine.o satisfies the reference, so the
 * linker would never pull gpu_engine.o out of the archive. */

void ft_engine_opts_init(ft_engine_opts *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->kind = FT_ENGINE_CPU;
}

int ft_engine_open(ft_engine **out, const ft_index *idx,
                   const ft_engine_opts *opts, char *errbuf, size_t errlen)
{
    *out = NULL;
    ft_engine *eng = calloc(1, sizeof *eng);
    if (eng == NULL)
        return FT_ENOMEM;
    eng->idx = idx;
    if (opts)
        eng->opts = *opts;
    else
        ft_engine_opts_init(&eng->opts);
    int rc;
    switch (eng->opts.kind) {
    case FT_ENGINE_CPU: rc = ft_cpu_engine_open(eng, errbuf, errlen); break;
    case FT_ENGINE_GPU: rc = ft_gpu_engine_open(eng, errbuf, errlen); break;
    default:
        fti_errf(errbuf, errlen, "unknown engine kind %d", (int)eng->opts.kind);
        rc = FT_EINVAL;
    }
    if (rc != FT_OK) {
        free(eng);
        return rc;
    }
    *out = eng;
    return FT_OK;
}

void ft_engine_close(ft_engine *eng)
{
    if (eng == NULL)
        return;
    if (eng->ops && eng->ops->close)
        eng->ops->close(eng);
    free(eng);
}

const char *ft_engine_name(const ft_engine *eng) { return eng->ops->name; }

int ft_engine_search(ft_engine *eng, const ft_request *req, ft_result *res)
{
    int rc = ft_engine_search_batch(eng, req, 1, res);
    return rc != FT_OK ? rc : res->status;
}

int ft_engine_search_batch(ft_engine *eng, const ft_request *reqs, size_t n,
                           ft_result *res)
{
    const ft_request *vr[FT_ENGINE_CHUNK];
    ft_result *vres[FT_ENGINE_CHUNK];
    if (eng->failed)
        return FT_ESTATE;
    size_t i = 0;
    while (i < n) {
        size_t m = 0;
        double tv = eng->timing ? fti_now() : 0;
        for (; i < n && m < FT_ENGINE_CHUNK; i++) {
            res[i].n = 0;
            res[i].error[0] = 0;
            res[i].status = ft_request_validate(&reqs[i], eng->opts.max_beam,
                                                res[i].error,
                                                sizeof res[i].error);
            if (res[i].status != FT_OK)
                continue;
            uint32_t nres = reqs[i].results ? reqs[i].results : reqs[i].beam;
            if (res[i].cap_hits < nres ||
                res[i].cap_tokens < nres * reqs[i].T) {
                res[i].status = FT_ELIMIT;
                snprintf(res[i].error, sizeof res[i].error,
                         "results: %u results of up to %u tokens do not fit "
                         "the result buffer", nres, reqs[i].T);
                continue;
            }
            vr[m] = &reqs[i];
            vres[m] = &res[i];
            m++;
        }
        if (eng->timing)
            eng->t_validate += fti_now() - tv;
        if (m > 0) {
            int rc = eng->ops->search_batch(eng, vr, vres, m);
            if (rc != FT_OK)
                return rc;
        }
    }
    return FT_OK;
}
