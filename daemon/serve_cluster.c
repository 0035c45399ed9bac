/*
 * serve_cluster.c - "flashtrie serve" as a rank of a multi-process shard
 * group (cluster.world > 1; docs/sharding.md, "Clusters"): rank 0 is the
 * coordinator, whose searcher is the cluster and which serves clients as
 * any server does; the other ranks open no listeners and serve their
 * shards to it until it leaves or they get SIGTERM.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "flashtrie/internal/engine.h"
#include "serve_cluster.h"
#include "serve_priv.h"

typedef struct sig_watch {
    int sfd;
    int stop; /* SIGTERM or SIGINT came */
} sig_watch;

/* sig_stop reads the signals that came while a rank waits: SIGTERM and
 * SIGINT end the wait (and the rank), SIGHUP is refused (a rank does not
 * reload). */
static int sig_stop(void *arg)
{
    sig_watch *w = arg;
    while (!w->stop) {
        struct pollfd pfd = {w->sfd, POLLIN, 0};
        if (poll(&pfd, 1, 0) <= 0)
            break;
        struct signalfd_siginfo si;
        if (read(w->sfd, &si, sizeof si) != (ssize_t)sizeof si)
            break;
        if (si.ssi_signo == SIGHUP) {
            FT_LOGF(FT_LOG_WARN, "SIGHUP: a cluster rank does not reload "
                    "(restart every rank for a new index)");
            continue;
        }
        FT_LOGF(FT_LOG_INFO, "%s: leaving the cluster",
                si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
        w->stop = 1;
    }
    return w->stop;
}

/* cluster_opts fills the cluster's options from the settings and the
 * engines every rank runs from the slot options:
 * engine = cpu gives CPU ranks, gpu and shards GPU ranks (the first
 * listed device), auto a GPU rank when the device is usable. */
static void cluster_opts(ft_cluster_opts *co, const server *srv)
{
    ft_cluster_opts_init(co);
    co->rank = srv->cfg.cluster_rank;
    co->world = srv->cfg.cluster_world;
    co->coordinator = srv->cfg.cluster_coordinator;
    co->manifest = srv->index;
    co->join_ms = srv->cfg.cluster_join_timeout_ms;
    co->step_ms = srv->cfg.cluster_step_timeout_ms;
    co->secret = srv->cfg.cluster_secret;
    /* A test hook (tests/daemon/cluster_test.c, case leave): the server
     * reads it, the library reads no environment. */
    const char *slow = getenv("FT_CLUSTER_TEST_SLOW_MS");
    if (slow)
        co->test_slow_ms = (uint32_t)strtoul(slow, NULL, 10);
    ft_engine_opts *e = &co->engine;
    e->device = srv->slot.n_devices ? srv->slot.devices[0] : 0;
    uint64_t used, total;
    if (srv->slot.engine == FT_SLOT_CPU)
        e->kind = FT_ENGINE_CPU;
    else if (srv->slot.engine == FT_SLOT_GPU || srv->slot.spread)
        e->kind = FT_ENGINE_GPU;
    else
        e->kind = fti_gpu_memory(&used, &total, e->device) == FT_OK
                      ? FT_ENGINE_GPU
                      : FT_ENGINE_CPU;
    e->threads = srv->slot.cpu_threads;
    e->max_batch = srv->slot.max_batch;
    e->max_beam = srv->slot.max_beam;
    e->max_k = srv->slot.max_k;
    e->max_t = srv->slot.max_t;
}

/* open_rank opens this rank's shards and joins the cluster. */
static int open_rank(server *srv, sig_watch *w, ft_library **lib,
                     ft_cluster **c, char *err, size_t errlen)
{
    ft_cluster_opts co;
    cluster_opts(&co, srv);
    co.stop = sig_stop;
    co.stop_arg = w;
    int rc = ft_cluster_open_library(lib, srv->index,
                                     srv->no_verify ? FT_OPEN_NO_VERIFY : 0,
                                     co.rank, co.world, err, errlen);
    if (rc != FT_OK)
        return rc;
    rc = ft_cluster_open(c, *lib, &co, err, errlen);
    if (rc != FT_OK) {
        ft_library_close(*lib);
        *lib = NULL;
    }
    return rc;
}

int srv_cluster_gen(server *srv, int sfd, ft_gen **out, char *err,
                    size_t errlen)
{
    sig_watch w = {sfd, 0};
    ft_library *lib;
    ft_cluster *c;
    int rc = open_rank(srv, &w, &lib, &c, err, errlen);
    if (rc != FT_OK)
        return rc;
    ft_searcher *s;
    if ((rc = ft_searcher_open_cluster(&s, c)) != FT_OK) {
        ft_cluster_close(c);
        ft_library_close(lib);
        snprintf(err, errlen, "cluster: out of memory");
        return rc;
    }
    char why[200];
    snprintf(why, sizeof why, "%s: cluster rank 0 of %u",
             ft_cluster_kind(c) == FT_ENGINE_GPU ? "gpu" : "cpu",
             ft_cluster_world(c));
    if ((rc = ft_gen_wrap(out, srv->index, lib, s, 1, why)) != FT_OK) {
        ft_searcher_close(s);
        ft_library_close(lib);
        snprintf(err, errlen, "cluster: out of memory");
        return rc;
    }
    srv->cluster = c;
    return FT_OK;
}

int srv_cluster_worker(server *srv, int sfd)
{
    sig_watch w = {sfd, 0};
    /* Only listeners the file or the flags name: without any, the
     * settings hold the default one (tcp://127.0.0.1:7710), which no
     * operator asked for, and a rank configured right was warned too. */
    int given = srv->cfg.metrics[0] != 0;
    for (uint32_t i = 0; i < srv->cfg.n_listeners; i++)
        if (srv->cfg.listeners[i].at.kind != FT_CONFIG_SRC_DEFAULT)
            given = 1;
    if (given)
        FT_LOGF(FT_LOG_WARN, "cluster rank %u: listeners and metrics are "
                "rank 0's; this rank opens none", srv->cfg.cluster_rank);
    ft_library *lib;
    ft_cluster *c;
    char err[1024];
    int rc = open_rank(srv, &w, &lib, &c, err, sizeof err);
    if (rc != FT_OK) {
        FT_LOGF(FT_LOG_ERROR, "cannot serve: %s", err);
        return w.stop ? 0 : 1;
    }
    FT_LOGF(FT_LOG_INFO, "flashtrie %s cluster rank %u of %u serving (pid "
            "%ld); SIGTERM leaves", FT_VERSION_STRING, srv->cfg.cluster_rank,
            srv->cfg.cluster_world, (long)getpid());
    rc = ft_cluster_serve(c);
    ft_cluster_close(c);
    ft_library_close(lib);
    if (rc == FT_OK || rc == FT_ESHUTDOWN) {
        FT_LOGF(FT_LOG_INFO, "stopped");
        return 0;
    }
    FT_LOGF(FT_LOG_ERROR, "cluster rank %u stopped: %s", srv->cfg.cluster_rank,
            ft_strerror(rc));
    return 1;
}
