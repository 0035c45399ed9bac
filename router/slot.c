/* slot.c - generations of index + engines, and the one engine call. */
#include "slot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_impl.h"
#include "queue.h"
#include "search_impl.h"

void ft_slot_opts_init(ft_slot_opts *o)
{
    memset(o, 0, sizeof *o);
    o->engine = FT_SLOT_AUTO;
    o->replicas = 1;
}

const char *ft_slot_engine_str(ft_slot_engine e)
{
    return ft_engine_kind_name(e == FT_SLOT_CPU   ? FT_ENGINE_CPU
                               : e == FT_SLOT_GPU ? FT_ENGINE_GPU
                                                  : FT_ENGINE_AUTO);
}

static void gen_close(ft_gen *g)
{
    for (size_t i = 0; i < g->n_eng; i++)
        ft_searcher_close(g->eng[i]);
    ft_library_close(g->lib);
    free(g);
}

const char *ft_gen_kind_name(const ft_gen *g, size_t r)
{
    return ft_engine_kind_name((ft_engine_kind)g->kind[r]);
}

/* open_one opens the searcher of one replica. */
static int open_one(ft_gen *g, size_t i, ft_engine_kind kind, int device,
                    const ft_slot_opts *o, char *err, size_t errlen)
{
    ft_searcher_opts so;
    ft_searcher_opts_init(&so);
    if (o->spread && o->n_devices > 0) {
        so.devices = o->devices;
        so.n_devices = o->n_devices;
    }
    so.engine.kind = kind;
    so.engine.device = device;
    so.engine.threads = o->cpu_threads;
    so.engine.max_batch = o->max_batch;
    so.engine.max_beam = o->max_beam;
    so.engine.max_k = o->max_k;
    so.engine.max_t = o->max_t;
    int rc = ft_searcher_open(&g->eng[i], g->lib, &so, err, errlen);
    if (rc == FT_OK) {
        g->kind[i] = ft_searcher_kind(g->eng[i]);
        g->device[i] = g->kind[i] == FT_ENGINE_GPU ? device : -1;
    }
    return rc;
}

/* open_gpus opens `replicas` GPU replicas on each listed device (all or
 * none): several engines on one GPU overlap one batch's host work with
 * another's kernel. */
static int open_gpus(ft_gen *g, const ft_slot_opts *o, char *err,
                     size_t errlen)
{
    size_t per = o->replicas > 0 ? (size_t)o->replicas : 1;
    /* Spread: every replica is one group over all the devices. */
    size_t ndev = o->spread ? 1 : o->n_devices ? o->n_devices : 1;
    size_t nd = ndev * per;
    if (nd > FT_SLOT_MAX_REPLICAS) {
        snprintf(err, errlen, "%zu devices x %zu replicas: at most %d "
                 "replicas", ndev, per, FT_SLOT_MAX_REPLICAS);
        return FT_ELIMIT;
    }
    for (size_t i = 0; i < nd; i++) {
        int dev = o->n_devices ? o->devices[o->spread ? 0 : i / per] : 0;
        char e2[160];
        int rc = open_one(g, i, FT_ENGINE_GPU, dev, o, e2, sizeof e2);
        if (rc != FT_OK) {
            snprintf(err, errlen, "GPU engine on device %d: %s", dev, e2);
            while (i-- > 0)
                ft_searcher_close(g->eng[i]);
            return rc;
        }
    }
    g->n_eng = nd;
    return FT_OK;
}

static int open_cpus(ft_gen *g, const ft_slot_opts *o, char *err,
                     size_t errlen)
{
    int n = o->replicas > 0 ? o->replicas : 1;
    if (n > FT_SLOT_MAX_REPLICAS)
        n = FT_SLOT_MAX_REPLICAS;
    for (int i = 0; i < n; i++) {
        char e2[256];
        int rc = open_one(g, (size_t)i, FT_ENGINE_CPU, 0, o, e2, sizeof e2);
        if (rc != FT_OK) {
            snprintf(err, errlen, "CPU engine: %s", e2);
            while (i-- > 0)
                ft_searcher_close(g->eng[i]);
            return rc;
        }
    }
    g->n_eng = (size_t)n;
    return FT_OK;
}

int ft_gen_open(ft_gen **out, const char *path, const ft_slot_opts *o,
                uint64_t id, char *errbuf, size_t errlen)
{
    char tmp[1];
    if (errbuf == NULL) {
        errbuf = tmp;
        errlen = sizeof tmp;
    }
    *out = NULL;
    if (strlen(path) >= sizeof ((ft_gen *)0)->path) {
        snprintf(errbuf, errlen, "%.64s...: path too long", path);
        return FT_EINVAL;
    }
    ft_gen *g = calloc(1, sizeof *g);
    if (g == NULL) {
        snprintf(errbuf, errlen, "%s: out of memory", path);
        return FT_ENOMEM;
    }
    atomic_init(&g->refs, 1);
    for (size_t i = 0; i < FT_SLOT_MAX_REPLICAS; i++) {
        atomic_init(&g->claimed[i], 0);
        atomic_init(&g->failed[i], 0);
    }
    g->id = id;
    strcpy(g->path, path);
    int rc = ft_library_open(&g->lib, path,
                             o->no_verify ? FT_OPEN_NO_VERIFY : 0, errbuf,
                             errlen);
    if (rc != FT_OK) {
        free(g);
        return rc;
    }
    ft_index_info_init(&g->info);
    ft_library_info_get(&g->info, g->lib);
    g->shards = ft_library_shards(g->lib);
    char why[200] = "";
    if (o->engine == FT_SLOT_CPU) {
        rc = open_cpus(g, o, errbuf, errlen);
        snprintf(g->why, sizeof g->why, "cpu: asked for (engine = cpu)");
    } else {
        rc = open_gpus(g, o, why, sizeof why);
        /* engine = shards is auto with the shards spread (serve.c) */
        const char *asked = o->spread ? "shards" : ft_slot_engine_str(o->engine);
        if (rc == FT_OK) {
            snprintf(g->why, sizeof g->why, "gpu: %s (engine = %s)",
                     o->engine == FT_SLOT_AUTO ? "a GPU is usable" : "asked for",
                     asked);
        } else if (o->engine == FT_SLOT_GPU) {
            snprintf(errbuf, errlen, "%s", why);
        } else {
            rc = open_cpus(g, o, errbuf, errlen);
            snprintf(g->why, sizeof g->why,
                     "cpu: no usable GPU (engine = %s; %s)", asked, why);
        }
    }
    if (rc != FT_OK) {
        ft_library_close(g->lib);
        free(g);
        return rc;
    }
    g->opened_ns = fti_now_ns();
    *out = g;
    return FT_OK;
}

int ft_gen_wrap(ft_gen **out, const char *path, ft_library *lib,
                ft_searcher *s, uint64_t id, const char *why)
{
    *out = NULL;
    ft_gen *g = calloc(1, sizeof *g);
    if (g == NULL)
        return FT_ENOMEM;
    atomic_init(&g->refs, 1);
    g->id = id;
    snprintf(g->path, sizeof g->path, "%s", path);
    snprintf(g->why, sizeof g->why, "%s", why);
    g->lib = lib;
    ft_index_info_init(&g->info);
    ft_library_info_get(&g->info, lib);
    g->shards = ft_library_shards(lib);
    g->n_eng = 1;
    g->eng[0] = s;
    g->kind[0] = ft_searcher_kind(s);
    g->device[0] = -1;
    g->opened_ns = fti_now_ns();
    *out = g;
    return FT_OK;
}

void ft_gen_ref(ft_gen *g)
{
    atomic_fetch_add(&g->refs, 1);
}

void ft_gen_unref(ft_gen *g)
{
    if (g != NULL && atomic_fetch_sub(&g->refs, 1) == 1) {
        FT_LOGF(FT_LOG_INFO, "index generation %llu (%s) closed: its last request is "
                "answered", (unsigned long long)g->id, g->path);
        gen_close(g);
    }
}

void ft_gen_replica_name(const ft_gen *g, size_t r, char *out, size_t len)
{
    if (g->kind[r] == FT_ENGINE_GPU)
        snprintf(out, len, "gpu device %d", g->device[r]);
    else
        snprintf(out, len, "cpu");
}

int ft_gen_replica_failed(const ft_gen *g, size_t r, const char **why)
{
    int rc = atomic_load(&g->failed[r]);
    if (why != NULL)
        *why = rc ? g->fail_why[r] : "";
    return rc;
}

size_t ft_gen_failed_replicas(const ft_gen *g)
{
    size_t n = 0;
    for (size_t i = 0; i < g->n_eng; i++)
        n += atomic_load(&g->failed[i]) != 0;
    return n;
}

int ft_gen_fail_replica(ft_gen *g, size_t r, int rc, const char *why)
{
    int no = 0;
    if (!atomic_compare_exchange_strong(&g->claimed[r], &no, 1))
        return 0;
    snprintf(g->fail_why[r], sizeof g->fail_why[r], "%s", why);
    atomic_store(&g->failed[r], rc != FT_OK ? rc : FT_EINTERNAL);
    char name[48];
    ft_gen_replica_name(g, r, name, sizeof name);
    size_t bad = ft_gen_failed_replicas(g);
    FT_LOGF(FT_LOG_ERROR, "replica %zu (%s) of generation %llu failed: %s; "
            "out of service, %zu of %zu replicas serve", r, name,
            (unsigned long long)g->id, why, g->n_eng - bad, g->n_eng);
    return 1;
}

int ft_slot_is_device_error(const ft_gen *g, size_t r, int rc)
{
    return rc == FT_ECUDA || rc == FT_ENCCL ||
           (rc != FT_OK && ft_searcher_failed(g->eng[r]));
}

int ft_slot_search(ft_gen *g, size_t r, const ft_request *reqs, size_t n,
                   ft_result *res)
{
    return ft_slot_search_at(g, r, reqs, n, res, FT_DOOR_NONE);
}

int ft_slot_search_validated(ft_gen *g, size_t r, const ft_request *reqs,
                             size_t n, ft_result *res)
{
    return ft_slot_search_at(g, r, reqs, n, res, FT_DOOR_ALL);
}

int ft_slot_search_door(ft_gen *g, size_t r, const ft_request *reqs, size_t n,
                        ft_result *res)
{
    return ft_slot_search_at(g, r, reqs, n, res, FT_DOOR_EARLY);
}

int ft_slot_search_at(ft_gen *g, size_t r, const ft_request *reqs, size_t n,
                      ft_result *res, int door)
{
    const char *why;
    int rc = ft_gen_replica_failed(g, r, &why);
    if (rc != FT_OK) {
        char name[48];
        ft_gen_replica_name(g, r, name, sizeof name);
        for (size_t i = 0; i < n; i++) {
            res[i].n = 0;
            res[i].status = rc;
            snprintf(res[i].error, sizeof res[i].error,
                     "engine: replica %zu (%s) failed earlier: %s", r, name,
                     why);
        }
        return rc;
    }
    /* A door (the server's decoder) validated the requests: the engine
     * trusts it and validates nothing of their rows again (but their
     * duplicate tokens where the door left those to it). */
    rc = door == FT_DOOR_ALL
             ? fti_searcher_search_validated(g->eng[r], reqs, n, res)
         : door == FT_DOOR_EARLY
             ? fti_searcher_search_door(g->eng[r], reqs, n, res)
             : ft_searcher_search_batch(g->eng[r], reqs, n, res);
    if (ft_slot_is_device_error(g, r, rc)) {
        /* The reason: the error and what the engine said about it (the
         * first request's message, which every request of a failed call
         * carries). */
        char reason[320];
        const char *said = "";
        for (size_t i = 0; i < n && !said[0]; i++)
            if (res[i].status != FT_OK)
                said = res[i].error;
        snprintf(reason, sizeof reason, "%s%s%s", ft_strerror(rc),
                 said[0] ? ": " : "", said);
        ft_gen_fail_replica(g, r, rc, reason);
    }
    return rc;
}
