/*
 * searcher.c - the search over a whole library: one engine for a plain
 * index, a shard group for a manifest of several shards.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashtrie.h"
#include "rt_impl.h"
#include "slot.h"
#include "search_impl.h"

struct ft_searcher {
    ft_engine *eng;  /* one shard */
    fti_group *grp;  /* several shards */
    ft_engine_kind kind;
    char note[320];
    /* The fault hook (ft_searcher_fault_arm, tests only): calls counts the
     * batch calls, fault_at is the call number that fails (0: none), and
     * faulted stays set once it did, as the GPU engine's failed flag. */
    atomic_uint_fast64_t calls, fault_at;
    atomic_int faulted;
    const ft_searcher_ops *ops; /* set: a searcher of ops (search_impl.h) */
    void *ops_arg;
};

int ft_searcher_open_ops(ft_searcher **out, const ft_searcher_ops *ops,
                         void *arg, ft_engine_kind kind)
{
    *out = calloc(1, sizeof **out);
    if (*out == NULL)
        return FT_ENOMEM;
    (*out)->ops = ops;
    (*out)->ops_arg = arg;
    (*out)->kind = kind;
    return FT_OK;
}

void ft_searcher_opts_init(ft_searcher_opts *o)
{
    memset(o, 0, sizeof *o);
    ft_engine_opts_init(&o->engine);
    o->engine.kind = FT_ENGINE_AUTO;
}

/* open_group opens a group of the given kind over every shard of lib. */
static int open_group(ft_searcher *s, const ft_library *lib,
                      const ft_engine_opts *eo, const ft_searcher_opts *o,
                      char *errbuf, size_t errlen)
{
    size_t n = ft_library_shards(lib);
    const ft_index **sh = calloc(n, sizeof *sh);
    int *dev = calloc(n, sizeof *dev);
    if (sh == NULL || dev == NULL) {
        free(sh);
        free(dev);
        return FT_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        sh[i] = ft_library_shard(lib, i);
        dev[i] = o->n_devices ? o->devices[i % o->n_devices] : eo->device;
    }
    fti_group_opts go;
    fti_group_opts_init(&go);
    go.devices = eo->kind == FT_ENGINE_GPU ? dev : NULL;
    int rc = fti_group_open_ex(&s->grp, sh, n, eo, &go, errbuf, errlen);
    free(sh);
    free(dev);
    return rc;
}

/* describe_devices writes the devices a GPU group spreads over. */
static void describe_devices(char *out, size_t len, const ft_searcher_opts *o,
                             int device)
{
    if (o->n_devices <= 1) {
        snprintf(out, len, "device %d",
                 o->n_devices ? o->devices[0] : device);
        return;
    }
    size_t w = (size_t)snprintf(out, len, "devices");
    for (size_t i = 0; i < o->n_devices && w < len; i++)
        w += (size_t)snprintf(out + w, len - w, "%s%d", i ? "," : " ",
                              o->devices[i]);
}

int ft_searcher_open(ft_searcher **out, const ft_library *lib,
                     const ft_searcher_opts *o, char *errbuf, size_t errlen)
{
    RT_RETURN_ERROR_IF(out == NULL || lib == NULL, FT_EINVAL,
                       "searcher: %s is NULL", out == NULL ? "out" : "library");
    *out = NULL;
    /* A part (ft_library_open_part) lacks the other shards' indexes: what
     * a cluster rank serves through ft_cluster, never a searcher. */
    for (size_t i = 0; i < ft_library_shards(lib); i++)
        RT_RETURN_ERROR_IF(ft_library_shard(lib, i) == NULL, FT_EINVAL,
                           "searcher: shard %zu of the library is not open "
                           "(a part from ft_library_open_part)", i);
    ft_searcher_opts d;
    if (o == NULL) {
        ft_searcher_opts_init(&d);
        o = &d;
    }
    ft_searcher *s = calloc(1, sizeof *s);
    if (s == NULL)
        return FT_ENOMEM;
    size_t n = ft_library_shards(lib);
    int rc;
    if (n == 1) {
        rc = ft_engine_open(&s->eng, ft_library_shard(lib, 0), &o->engine,
                            errbuf, errlen);
        if (rc == FT_OK) {
            ft_engine_opts eo;
            ft_engine_get_opts(&eo, s->eng);
            s->kind = eo.kind;
            snprintf(s->note, sizeof s->note, "%s", ft_engine_note(s->eng));
        }
    } else {
        ft_engine_opts eo = o->engine;
        char why[256] = "";
        rc = FT_ENODEV;
        if (eo.kind != FT_ENGINE_CPU) {
            eo.kind = FT_ENGINE_GPU;
            rc = open_group(s, lib, &eo, o, why, sizeof why);
            if (rc != FT_OK && o->engine.kind == FT_ENGINE_GPU) {
                if (errbuf && errlen)
                    snprintf(errbuf, errlen, "%s", why);
                free(s);
                return rc;
            }
        }
        if (rc != FT_OK) {
            eo.kind = FT_ENGINE_CPU;
            rc = open_group(s, lib, &eo, o, errbuf, errlen);
        }
        if (rc == FT_OK) {
            s->kind = eo.kind;
            char devs[128];
            describe_devices(devs, sizeof devs, o, eo.device);
            if (eo.kind == FT_ENGINE_GPU)
                snprintf(s->note, sizeof s->note,
                         "shard group of %zu gpu engines on %s", n, devs);
            else if (o->engine.kind == FT_ENGINE_AUTO)
                snprintf(s->note, sizeof s->note,
                         "shard group of %zu cpu engines: the GPU engine "
                         "could not start (%s)", n, why);
            else
                snprintf(s->note, sizeof s->note,
                         "shard group of %zu cpu engines", n);
        }
    }
    if (rc != FT_OK) {
        free(s);
        return rc;
    }
    *out = s;
    return FT_OK;
}

void ft_searcher_close(ft_searcher *s)
{
    if (s == NULL)
        return;
    if (s->ops)
        s->ops->close(s->ops_arg);
    ft_engine_close(s->eng);
    fti_group_close(s->grp);
    free(s);
}

void ft_searcher_fault_arm(ft_searcher *s, uint64_t after)
{
    atomic_store(&s->fault_at, atomic_load(&s->calls) + after + 1);
}

/* fault_all answers every request of a faulted call the way the GPU
 * engine answers a CUDA error (gpu_engine.c fail_all): no hit, the status,
 * the message. */
static void fault_all(ft_result *res, size_t n, const char *msg)
{
    for (size_t i = 0; i < n; i++) {
        res[i].n = 0;
        res[i].status = FT_ECUDA;
        snprintf(res[i].error, sizeof res[i].error, "%s", msg);
    }
}

static int searcher_search(ft_searcher *s, const ft_request *reqs, size_t n,
                           ft_result *res, int door);

int ft_searcher_search_batch(ft_searcher *s, const ft_request *reqs, size_t n,
                             ft_result *res)
{
    if (s == NULL || (n > 0 && (reqs == NULL || res == NULL)))
        return FT_EINVAL;
    return searcher_search(s, reqs, n, res, FT_DOOR_NONE);
}

int fti_searcher_search_validated(ft_searcher *s, const ft_request *reqs,
                                  size_t n, ft_result *res)
{
    return searcher_search(s, reqs, n, res, FT_DOOR_ALL);
}

int fti_searcher_search_door(ft_searcher *s, const ft_request *reqs, size_t n,
                             ft_result *res)
{
    return searcher_search(s, reqs, n, res, FT_DOOR_EARLY);
}

int fti_searcher_overlaps_check(const ft_searcher *s)
{
    if (s->ops != NULL)
        return 0;
    if (s->eng != NULL)
        return s->kind == FT_ENGINE_GPU;
    return fti_group_exchange(s->grp) == FTI_EXCHANGE_FOREST;
}

static int searcher_search(ft_searcher *s, const ft_request *reqs, size_t n,
                           ft_result *res, int door)
{
    int mode = door == FT_DOOR_ALL     ? FTI_ADMIT_TRUSTED
               : door == FT_DOOR_EARLY ? FTI_ADMIT_DOOR
                                    : FTI_ADMIT_FULL;
    uint64_t k = atomic_fetch_add(&s->calls, 1) + 1;
    uint64_t at = atomic_load(&s->fault_at);
    if (atomic_load(&s->faulted)) {
        fault_all(res, n, FT_SEARCHER_FAULT_AGAIN);
        return FT_ECUDA;
    }
    if (at != 0 && k >= at) {
        atomic_store(&s->faulted, 1);
        fault_all(res, n, FT_SEARCHER_FAULT_MSG);
        return FT_ECUDA;
    }
    if (s->ops)
        return door == FT_DOOR_ALL && s->ops->search_validated
                   ? s->ops->search_validated(s->ops_arg, reqs, n, res)
                   : s->ops->search(s->ops_arg, reqs, n, res);
    if (s->eng)
        return mode == FTI_ADMIT_FULL
                   ? ft_engine_search_batch(s->eng, reqs, n, res)
                   : fti_engine_search_batch(s->eng, reqs, n, res, mode);
    return fti_group_search_batch_mode(s->grp, reqs, n, res, mode);
}

const char *ft_searcher_note(const ft_searcher *s)
{
    if (s == NULL)
        return "";
    return s->ops ? s->ops->note(s->ops_arg) : s->note;
}

int ft_searcher_failed(const ft_searcher *s)
{
    if (s == NULL)
        return 0;
    if (atomic_load(&s->faulted))
        return 1;
    if (s->ops)
        return s->ops->failed(s->ops_arg);
    if (s->eng)
        return ft_engine_failed(s->eng);
    for (size_t i = 0; i < fti_group_shards(s->grp); i++)
        if (ft_engine_failed(fti_group_engine(s->grp, i)))
            return 1;
    return 0;
}

ft_engine_kind ft_searcher_kind(const ft_searcher *s)
{
    return s ? s->kind : FT_ENGINE_AUTO;
}
