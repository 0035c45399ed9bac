/*
 * engine.c - the engine API of the shard layer: opens the engine of the
 * asked kind and dispatches prepared requests, whole or step by step, to
 * its operations.  Validation, preparation and values are router/'s
 * (router/search.c): an engine sees only prepared requests.
 */
#include "search.h"

/* ft_gpu_engine_open lives in gpu_engine.c, which every build compiles (it
 * answers FT_ENOTSUP without CUDA).  No weak default here: in a static
 * library a weak definition in engine.o satisfies the reference, so the
 * linker would never pull gpu_engine.o out of the archive. */

/* The one map between engine kinds and their names (the command line's
 * --engine, the configuration's engine, INFO, metrics and logs). */
static const char *const kind_names[] = {
    [FT_ENGINE_CPU] = "cpu",
    [FT_ENGINE_GPU] = "gpu",
    [FT_ENGINE_AUTO] = "auto",
};

const char *ft_engine_kind_name(ft_engine_kind kind)
{
    if ((unsigned)kind >= sizeof kind_names / sizeof kind_names[0])
        return NULL;
    return kind_names[kind];
}

int ft_engine_kind_parse(const char *name, ft_engine_kind *kind)
{
    if (name == NULL || kind == NULL)
        return FT_EINVAL;
    for (size_t i = 0; i < sizeof kind_names / sizeof kind_names[0]; i++)
        if (strcmp(name, kind_names[i]) == 0) {
            *kind = (ft_engine_kind)i;
            return FT_OK;
        }
    return FT_EINVAL;
}

void ft_engine_opts_init(ft_engine_opts *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->kind = FT_ENGINE_CPU;
    opts->spin_us = -1;
}

int ft_engine_open(ft_engine **out, const ft_index *idx,
                   const ft_engine_opts *opts, char *errbuf, size_t errlen)
{
    FT_RETURN_ERROR_IF(out == NULL, FT_EINVAL, "engine: out is NULL");
    *out = NULL;
    FT_RETURN_ERROR_IF(idx == NULL, FT_EINVAL, "engine: index is NULL");
    ft_engine *eng = calloc(1, sizeof *eng);
    if (eng == NULL)
        return FT_ENOMEM;
    eng->idx = idx;
    eng->device = -1;
    if (opts)
        eng->opts = *opts;
    else
        ft_engine_opts_init(&eng->opts);
    int rc;
    switch (eng->opts.kind) {
    case FT_ENGINE_CPU: rc = ft_cpu_engine_open(eng, errbuf, errlen); break;
    case FT_ENGINE_GPU: rc = ft_gpu_engine_open(eng, errbuf, errlen); break;
    case FT_ENGINE_AUTO: {
        char why[200] = "";
        eng->opts.kind = FT_ENGINE_GPU;
        rc = ft_gpu_engine_open(eng, why, sizeof why);
        if (rc == FT_OK)
            break;
        eng->opts.kind = FT_ENGINE_CPU;
        eng->device = -1;
        rc = ft_cpu_engine_open(eng, errbuf, errlen);
        if (rc == FT_OK)
            snprintf(eng->note, sizeof eng->note,
                     "cpu engine: the GPU engine could not start (%s)", why);
        break;
    }
    default:
        fti_errf(errbuf, errlen, "unknown engine kind %d", (int)eng->opts.kind);
        rc = FT_EINVAL;
    }
    if (rc != FT_OK) {
        free(eng);
        return rc;
    }
    if (eng->note[0] == 0 && eng->device >= 0)
        snprintf(eng->note, sizeof eng->note, "gpu engine on device %d",
                 eng->device);
    else if (eng->note[0] == 0)
        snprintf(eng->note, sizeof eng->note, "cpu engine");
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

const char *ft_engine_name(const ft_engine *eng)
{
    return eng ? ft_engine_kind_name(eng->ops->kind) : "";
}

const char *ft_engine_note(const ft_engine *eng)
{
    return eng ? eng->note : "";
}

void ft_engine_get_opts(ft_engine_opts *opts, const ft_engine *eng)
{
    if (opts && eng)
        *opts = eng->opts;
}

int ft_engine_failed(const ft_engine *eng) { return eng ? eng->failed : 0; }

int fti_engine_device(const ft_engine *eng) { return eng->device; }

void ft_engine_timing_report(const ft_engine *eng, char *buf, size_t len)
{
    if (buf == NULL || len == 0)
        return;
    buf[0] = 0;
    if (eng && eng->ops->timing_report)
        eng->ops->timing_report(eng, buf, len);
}

int fti_engine_run(ft_engine *eng, const fti_prepared *const *reqs,
                   ft_result *const *res, size_t n)
{
    if (eng->failed)
        return FT_ESTATE;
    for (size_t i = 0; i < n; i += FTI_ENGINE_CHUNK) {
        size_t m = n - i < FTI_ENGINE_CHUNK ? n - i : FTI_ENGINE_CHUNK;
        int rc = eng->ops->run(eng, reqs + i, res + i, m);
        if (rc != FT_OK)
            return rc;
    }
    return FT_OK;
}

int fti_engine_run_checked(ft_engine *eng, const fti_prepared *const *reqs,
                           ft_result *const *res, size_t n,
                           fti_engine_check check, void *arg)
{
    if (eng->failed)
        return FT_ESTATE;
    if (n > FTI_ENGINE_CHUNK)
        return FT_EINVAL;
    for (size_t i = 0; i < n; i++) {
        res[i]->status = FT_OK;
        res[i]->n = 0;
        res[i]->error[0] = 0;
    }
    if (check == NULL)
        return fti_engine_run(eng, reqs, res, n);
    if (eng->ops->run_checked)
        return eng->ops->run_checked(eng, reqs, res, n, check, arg);
    check(arg);
    const fti_prepared *vp[FTI_ENGINE_CHUNK];
    ft_result *vr[FTI_ENGINE_CHUNK];
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (res[i]->status == FT_OK) {
            vp[m] = reqs[i];
            vr[m++] = res[i];
        }
    return m ? fti_engine_run(eng, vp, vr, m) : FT_OK;
}

int fti_engine_step_begin(ft_engine *eng, const fti_prepared *const *reqs,
                          size_t n, uint32_t shard, uint32_t nshards)
{
    if (eng->failed)
        return FT_ESTATE;
    if (eng->ops->step_begin == NULL)
        return FT_ENOTSUP;
    if (n == 0 || n > FTI_ENGINE_CHUNK || nshards == 0 || shard >= nshards)
        return FT_EINVAL;
    return eng->ops->step_begin(eng, reqs, n, shard, nshards);
}

int fti_engine_step_buffers(ft_engine *eng, uint64_t **send, uint64_t **recv,
                            size_t *len)
{
    if (eng->ops->step_buffers == NULL)
        return FT_ENOTSUP;
    return eng->ops->step_buffers(eng, send, recv, len);
}

int fti_engine_step_expand(ft_engine *eng, uint32_t t)
{
    if (eng->failed)
        return FT_ESTATE;
    if (eng->ops->step_expand == NULL)
        return FT_ENOTSUP;
    return eng->ops->step_expand(eng, t);
}

int fti_engine_step_keep(ft_engine *eng, uint32_t t)
{
    if (eng->failed)
        return FT_ESTATE;
    if (eng->ops->step_keep == NULL)
        return FT_ENOTSUP;
    return eng->ops->step_keep(eng, t);
}

int fti_engine_step_finish(ft_engine *eng, ft_result *const *res)
{
    if (eng->failed)
        return FT_ESTATE;
    if (eng->ops->step_finish == NULL)
        return FT_ENOTSUP;
    return eng->ops->step_finish(eng, res);
}

/* engines_step runs one step of kind (FTI_STEP_*) on eng[0..count):
 * together when they are engines of one kind with joint steps, else one
 * engine after another. */
static int engines_step(ft_engine *const *eng, size_t count, int kind,
                        uint32_t t, ft_result *part, size_t n,
                        fti_step_done done, void *arg)
{
    if (count == 0 || (kind == FTI_STEP_FINISH && part == NULL))
        return FT_EINVAL;
    const ft_engine_ops *ops = eng[0]->ops;
    int joint = ops->steps != NULL;
    for (size_t j = 0; j < count; j++) {
        if (eng[j]->failed)
            return FT_ESTATE;
        joint = joint && eng[j]->ops == ops;
    }
    if (joint)
        return ops->steps(eng, count, kind, t, part, done, arg);
    int rc = FT_OK;
    ft_result *p[FTI_ENGINE_CHUNK];
    for (size_t j = 0; j < count && rc == FT_OK; j++) {
        if (kind == FTI_STEP_EXPAND) {
            rc = fti_engine_step_expand(eng[j], t);
        } else if (kind == FTI_STEP_KEEP) {
            rc = fti_engine_step_keep(eng[j], t);
        } else {
            for (size_t i = 0; i < n && i < FTI_ENGINE_CHUNK; i++)
                p[i] = &part[j * FTI_ENGINE_CHUNK + i];
            rc = fti_engine_step_finish(eng[j], p);
        }
    }
    for (size_t i = 0; i < n && rc == FT_OK && done; i++)
        done(arg, i);
    return rc;
}

int fti_engines_step_expand(ft_engine *const *eng, size_t count, uint32_t t)
{
    return engines_step(eng, count, FTI_STEP_EXPAND, t, NULL, 0, NULL, NULL);
}

int fti_engines_step_keep(ft_engine *const *eng, size_t count, uint32_t t)
{
    return engines_step(eng, count, FTI_STEP_KEEP, t, NULL, 0, NULL, NULL);
}

int fti_engines_step_finish(ft_engine *const *eng, size_t count,
                            ft_result *part, size_t n, fti_step_done done,
                            void *arg)
{
    if (n > FTI_ENGINE_CHUNK)
        return FT_EINVAL;
    return engines_step(eng, count, FTI_STEP_FINISH, 0, part, n, done, arg);
}

void *fti_engine_stream(ft_engine *eng)
{
    return eng->ops->stream ? eng->ops->stream(eng) : NULL;
}

const ft_index *fti_engine_index(const ft_engine *eng) { return eng->idx; }
