/*
 * serve.c - "flashtrie serve": the long-lived server.
 *
 * The main thread starts everything, then only waits for signals (read
 * from a signalfd: the handlers do no work) and runs what they ask for:
 * SIGHUP reloads the index, SIGTERM and SIGINT drain and exit.  nng's
 * threads receive and reply (serve_ctx.c), the batcher and one worker per
 * replica run the searches (router/batcher.c).
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "frame.h"
#include "ft_config.h"

#include "serve.h"
#include "serve_cluster.h"
#include "serve_metrics.h"


static const char *usage_text =
    "usage: flashtrie serve --config FILE\n"
    "       flashtrie serve --index PATH [--listen URL]... [--admin-listen URL]...\n"
    "         [--engine auto|cpu|gpu] [--devices 0,1,..] [--replicas N]\n"
    "         [--threads N] [--max-batch N] [--max-wait-us N]\n"
    "         [--queue-depth N] [--max-message-bytes N] [--contexts N]\n"
    "         [--deadline-ms N] [--drain-timeout-ms N] [--admin-reload]\n"
    "         [--tls-cert F --tls-key F [--tls-ca F] [--tls-verify]]\n"
    "         [--max-beam N] [--metrics URL] [--no-verify]\n"
    "         [--log-level L] [--log-file F]\n"
    "  serves searches over nng (tcp://, ipc://, tls+tcp://) in the\n"
    "  foreground (default listener: the config table's).  Binary frames\n"
    "  (docs/protocol.md) and JSON lines (docs/specification.md section 7)\n"
    "  are both answered.  --log-file appends the log to F (reopened on\n"
    "  SIGHUP) instead of stderr.\n"
    "  SIGHUP reloads the index; SIGTERM or SIGINT drains and exits.\n"
    "  docs/daemon.md describes every option.\n";

/* The flags of serve that override a setting of the table; the rest of
 * the options (admin listeners, TLS files for command-line listeners,
 * contexts, the test hook) shape the listeners or the server itself. */
static const struct {
    const char *flag, *setting;
    int is_bool;
} flag_rows[] = {
    {"index", "index", 0},
    {"engine", "engine", 0},
    {"devices", "devices", 0},
    {"replicas", "replicas", 0},
    {"threads", "cpu_threads", 0},
    {"max-batch", "max_batch", 0},
    {"max-wait-us", "max_wait_us", 0},
    {"queue-depth", "queue_depth", 0},
    {"max-message-bytes", "max_message_bytes", 0},
    {"max-beam", "caps.max_beam", 0},
    {"deadline-ms", "default_deadline_ms", 0},
    {"drain-timeout-ms", "drain_timeout_ms", 0},
    {"admin-reload", "admin_reload", 1},
    {"metrics", "metrics", 0},
    {"log-level", "log_level", 0},
    {"log-file", "log_file", 0},
};
#define N_FLAG_ROWS (sizeof flag_rows / sizeof flag_rows[0])

/* srv_args is what the command line said, kept for a SIGHUP that reloads
 * the config file: the flags override the file again. */
typedef struct srv_args {
    const char *set_name[64], *set_value[64];
    int nset;
    char listen[4096];   /* --listen URLs, comma-separated */
    const char *admin_listen[SRV_MAX_LISTENERS];
    int n_admin;
    const char *cert, *key, *ca;
    int verify;
} srv_args;

static srv_args g_args;
static FILE *g_log_file;

static void log_to_file(ft_log_level level, const char *line, void *arg)
{
    fprintf(arg, "%s\n", line);
    fflush(arg);
}

/* open_log points the logger at cfg's log_file (stderr when empty);
 * reopening on reload is what log rotation needs. */
static int open_log(const char *path, char *err, size_t errlen)
{
    if (!path[0]) {
        ft_log_set_sink(NULL, NULL);
        if (g_log_file)
            fclose(g_log_file);
        g_log_file = NULL;
        return FT_OK;
    }
    FILE *f = fopen(path, "a");
    if (f == NULL) {
        snprintf(err, errlen, "log_file: cannot open %s: %s", path,
                 strerror(errno));
        return FT_EIO;
    }
    ft_log_set_sink(log_to_file, f);
    if (g_log_file)
        fclose(g_log_file);
    g_log_file = f;
    return FT_OK;
}

/* build_config loads the file (if any) and applies the command line. */
static int build_config(ft_config *cfg, const char *path, const srv_args *a,
                        char *err, size_t errlen, int *is_arg)
{
    *is_arg = 0;
    int rc = path && path[0] ? ft_config_load(cfg, path, err, errlen)
                             : (ft_config_init(cfg), FT_OK);
    if (rc != FT_OK)
        return rc;
    *is_arg = 1;
    char who[64];
    for (int i = 0; i < a->nset; i++)
        if ((rc = ft_config_set(cfg, a->set_name[i], a->set_value[i],
                                FT_CONFIG_SRC_CLI_AT, who, sizeof who)) !=
            FT_OK) {
            snprintf(err, errlen, "--%s: %s", a->set_name[i], who);
            return rc;
        }
    if (a->listen[0] &&
        (rc = ft_config_set(cfg, "listeners", a->listen, FT_CONFIG_SRC_CLI_AT,
                            err, errlen)) != FT_OK)
        return rc;
    for (int i = 0; i < a->n_admin; i++) {
        if (cfg->n_listeners == FT_CONFIG_MAX_LISTENERS) {
            snprintf(err, errlen, "--admin-listen: more than %d listeners",
                     FT_CONFIG_MAX_LISTENERS);
            return FT_ECONFIG;
        }
        ft_config_listener *l = &cfg->listeners[cfg->n_listeners++];
        memset(l, 0, sizeof *l);
        snprintf(l->url, sizeof l->url, "%s", a->admin_listen[i]);
        l->admin = 1;
        for (int f = 0; f < FT_CONFIG_L_NFIELDS; f++)
            l->src[f] = FT_CONFIG_SRC_CLI_AT;
        l->at = FT_CONFIG_SRC_CLI_AT;
    }
    for (uint32_t i = 0; i < cfg->n_listeners && a->cert; i++) {
        ft_config_listener *l = &cfg->listeners[i];
        if (strncmp(l->url, "tls+", 4) != 0 || l->tls_given)
            continue;
        snprintf(l->tls_cert, sizeof l->tls_cert, "%s", a->cert);
        snprintf(l->tls_key, sizeof l->tls_key, "%s", a->key ? a->key : "");
        snprintf(l->tls_ca, sizeof l->tls_ca, "%s", a->ca ? a->ca : "");
        l->tls_verify = a->verify;
        l->tls_given = 1;
    }
    *is_arg = 0;
    if ((rc = ft_config_validate(cfg, err, errlen)) != FT_OK)
        return rc;
    return ft_config_check_files(cfg, err, errlen);
}

static pthread_mutex_t g_dump_mu = PTHREAD_MUTEX_INITIALIZER;
static srv_opts *g_dump_opts;

int srv_config_dump(ft_buf *out)
{
    pthread_mutex_lock(&g_dump_mu);
    int rc = ft_buf_printf(out, "%s",
                           g_dump_opts && g_dump_opts->config_dump
                               ? g_dump_opts->config_dump
                               : "");
    pthread_mutex_unlock(&g_dump_mu);
    return rc;
}

/* apply_config copies the settings the server runs with into o; full is 0
 * on a reload, which changes only the reloadable ones. */
static int apply_config(srv_opts *o, const ft_config *cfg, int full,
                        char *err, size_t errlen)
{
    if (full) {
        o->cl_rank = cfg->cluster_rank;
        o->cl_world = cfg->cluster_world;
        snprintf(o->cl_coordinator, sizeof o->cl_coordinator, "%s",
                 cfg->cluster_coordinator);
        o->cl_join_ms = cfg->cluster_join_timeout_ms;
        o->cl_step_ms = cfg->cluster_step_timeout_ms;
        ft_slot_opts_init(&o->slot);
        /* engine = shards: the manifest's shards spread over the listed
         * GPUs (one group per replica), or a CPU group without a GPU. */
        o->slot.spread = cfg->engine == FT_CONFIG_ENGINE_SHARDS;
        o->slot.engine = cfg->engine == FT_CONFIG_ENGINE_CPU   ? FT_SLOT_CPU
                         : cfg->engine == FT_CONFIG_ENGINE_GPU ? FT_SLOT_GPU
                                                               : FT_SLOT_AUTO;
        if (cfg->n_devices > FT_SLOT_MAX_REPLICAS) {
            snprintf(err, errlen, "devices: at most %d GPUs are served",
                     FT_SLOT_MAX_REPLICAS);
            return FT_ECONFIG;
        }
        o->slot.n_devices = cfg->n_devices;
        for (uint32_t i = 0; i < cfg->n_devices; i++)
            o->slot.devices[i] = (int)cfg->devices[i];
        o->slot.replicas = (int)cfg->replicas;
        if (o->slot.replicas > FT_SLOT_MAX_REPLICAS)
            o->slot.replicas = FT_SLOT_MAX_REPLICAS;
        o->slot.cpu_threads = (int)cfg->cpu_threads;
        o->queue_depth = cfg->queue_depth;
        o->max_message_bytes = cfg->max_message_bytes;
        o->n_ls = 0;
        for (uint32_t i = 0; i < cfg->n_listeners; i++) {
            const ft_config_listener *l = &cfg->listeners[i];
            srv_listener_opts *d = &o->ls[o->n_ls++];
            memset(d, 0, sizeof *d);
            snprintf(d->url, sizeof d->url, "%s", l->url);
            d->admin = l->admin;
            snprintf(d->tls_cert, sizeof d->tls_cert, "%s", l->tls_cert);
            snprintf(d->tls_key, sizeof d->tls_key, "%s", l->tls_key);
            snprintf(d->tls_ca, sizeof d->tls_ca, "%s", l->tls_ca);
            d->tls_verify = l->tls_verify;
        }
        o->max_batch = cfg->max_batch;
        if (o->max_batch > o->queue_depth)
            o->max_batch = o->queue_depth;
        o->slot.max_batch = o->max_batch;
        /* GPU arenas are sized for the caps at start; a request beyond
         * them after a reload raised a cap takes the engine's big slot. */
        o->slot.max_beam = cfg->max_beam;
        o->slot.max_k = cfg->max_k;
        o->slot.max_t = cfg->max_t;
    }
    snprintf(o->index, sizeof o->index, "%s", cfg->index_path);
    o->max_wait_us = cfg->max_wait_us;
    o->cap_beam = cfg->max_beam;
    o->cap_k = cfg->max_k;
    o->cap_t = cfg->max_t;
    o->cap_results = cfg->max_results;
    o->default_deadline_ms = cfg->default_deadline_ms;
    o->drain_timeout_ms = cfg->drain_timeout_ms;
    o->admin_reload = cfg->admin_reload;
    o->log_level = cfg->log_level;
    ft_buf b;
    ft_buf_init(&b);
    int rc = ft_config_dump(cfg, &b);
    if (rc == FT_OK && o->test_delay_us)
        rc = ft_buf_printf(&b, "test_delay_us: %u (cli, test hook)\n",
                           o->test_delay_us);
    if (rc == FT_OK)
        rc = ft_buf_printf(&b, "contexts: %u (cli)\n", o->contexts);
    if (rc != FT_OK) {
        ft_buf_free(&b);
        snprintf(err, errlen, "config: out of memory");
        return rc;
    }
    pthread_mutex_lock(&g_dump_mu);
    free(o->config_dump);
    o->config_dump = (char *)b.data; /* NUL-terminated by ft_buf_printf */
    pthread_mutex_unlock(&g_dump_mu);
    return FT_OK;
}

static int parse_uint(const char *opt, const char *s, unsigned long long lo,
                      unsigned long long hi, unsigned long long *out)
{
    if (ft_cli_parse_u64(s, out) || *out < lo || *out > hi) {
        fprintf(stderr, "flashtrie serve: %s: expected %llu..%llu, got '%s'\n",
                opt, lo, hi, s);
        return -1;
    }
    return 0;
}

/* parse_args reads the command line and the config file into o; returns
 * -1 to go on, else the exit status. */
static int parse_args(srv_opts *o, ft_config *cfg, int argc, char **argv)
{
    enum { O_ROW = 256, O_CONFIG, O_LISTEN, O_ADMIN, O_CERT, O_KEY, O_CA,
           O_VERIFY, O_CTX, O_NOVERIFY, O_DELAY, O_FAULT, O_HELP };
    static const struct option opts[] = {
        {"config", required_argument, 0, O_CONFIG},
        {"listen", required_argument, 0, O_LISTEN},
        {"admin-listen", required_argument, 0, O_ADMIN},
        {"tls-cert", required_argument, 0, O_CERT},
        {"tls-key", required_argument, 0, O_KEY},
        {"tls-ca", required_argument, 0, O_CA},
        {"tls-verify", no_argument, 0, O_VERIFY},
        {"contexts", required_argument, 0, O_CTX},
        {"no-verify", no_argument, 0, O_NOVERIFY},
        /* A test hook, not for production: every batch sleeps this long
         * before it runs, standing in for a slow engine (docs/daemon.md). */
        {"test-delay-us", required_argument, 0, O_DELAY},
        /* A test hook, not for production: replica R fails from its N-th
         * engine call on, as on a CUDA error (the failover tests). */
        {"test-fault", required_argument, 0, O_FAULT},
        {"foreground", no_argument, 0, 'f'},
        {"help", no_argument, 0, O_HELP},
        {"index", required_argument, 0, O_ROW},
        {"engine", required_argument, 0, O_ROW},
        {"devices", required_argument, 0, O_ROW},
        {"replicas", required_argument, 0, O_ROW},
        {"threads", required_argument, 0, O_ROW},
        {"max-batch", required_argument, 0, O_ROW},
        {"max-wait-us", required_argument, 0, O_ROW},
        {"queue-depth", required_argument, 0, O_ROW},
        {"max-message-bytes", required_argument, 0, O_ROW},
        {"max-beam", required_argument, 0, O_ROW},
        {"deadline-ms", required_argument, 0, O_ROW},
        {"drain-timeout-ms", required_argument, 0, O_ROW},
        {"admin-reload", no_argument, 0, O_ROW},
        {"metrics", required_argument, 0, O_ROW},
        {"log-level", required_argument, 0, O_ROW},
        {"log-file", required_argument, 0, O_ROW},
        {0, 0, 0, 0}};
    srv_args *a = &g_args;
    memset(a, 0, sizeof *a);
    const char *config = NULL;
    unsigned long long v;
    int c, li;
    optind = 1;
    opterr = 1;
    while ((c = getopt_long(argc, argv, "h", opts, &li)) != -1) {
        switch (c) {
        case O_ROW:
            for (size_t i = 0; i < N_FLAG_ROWS; i++)
                if (!strcmp(opts[li].name, flag_rows[i].flag)) {
                    if (a->nset == 64) {
                        fprintf(stderr, "flashtrie serve: too many flags\n");
                        return 2;
                    }
                    a->set_name[a->nset] = flag_rows[i].setting;
                    a->set_value[a->nset++] =
                        flag_rows[i].is_bool ? "true" : optarg;
                }
            break;
        case O_CONFIG: config = optarg; break;
        case O_LISTEN: {
            size_t n = strlen(a->listen);
            if (n + strlen(optarg) + 2 > sizeof a->listen) {
                fprintf(stderr, "flashtrie serve: --listen: too many URLs\n");
                return 2;
            }
            snprintf(a->listen + n, sizeof a->listen - n, "%s%s",
                     n ? "," : "", optarg);
            break;
        }
        case O_ADMIN:
            if (a->n_admin == SRV_MAX_LISTENERS) {
                fprintf(stderr, "flashtrie serve: too many --admin-listen\n");
                return 2;
            }
            a->admin_listen[a->n_admin++] = optarg;
            break;
        case O_CERT: a->cert = optarg; break;
        case O_KEY: a->key = optarg; break;
        case O_CA: a->ca = optarg; break;
        case O_VERIFY: a->verify = 1; break;
        case O_CTX:
            if (parse_uint("--contexts", optarg, 1, 4096, &v))
                return 2;
            o->contexts = (uint32_t)v;
            break;
        case O_NOVERIFY: o->no_verify = 1; break;
        case O_DELAY:
            if (parse_uint("--test-delay-us", optarg, 0, 60000000, &v))
                return 2;
            o->test_delay_us = (uint32_t)v;
            break;
        case O_FAULT: {
            unsigned long long rr, nn;
            const char *colon = strchr(optarg, ':');
            char rs[24];
            if (colon == NULL || (size_t)(colon - optarg) >= sizeof rs) {
                fprintf(stderr, "flashtrie serve: --test-fault: expected "
                        "REPLICA:CALL, got '%s'\n", optarg);
                return 2;
            }
            snprintf(rs, sizeof rs, "%.*s", (int)(colon - optarg), optarg);
            if (parse_uint("--test-fault replica", rs, 0,
                           FT_SLOT_MAX_REPLICAS - 1, &rr) ||
                parse_uint("--test-fault call", colon + 1, 1, 1ull << 40, &nn))
                return 2;
            o->test_fault[rr] = nn;
            break;
        }
        case 'f': break;
        case 'h':
        case O_HELP: fputs(usage_text, stdout); return 0;
        default: fputs(usage_text, stderr); return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "flashtrie serve: unexpected argument '%s'\n",
                argv[optind]);
        fputs(usage_text, stderr);
        return 2;
    }
    int has_index = 0;
    for (int i = 0; i < a->nset; i++)
        has_index |= !strcmp(a->set_name[i], "index");
    if (!config && !has_index) {
        fprintf(stderr, "flashtrie serve: --index (or --config) is required\n");
        fputs(usage_text, stderr);
        return 2;
    }
    if (config)
        snprintf(o->config_path, sizeof o->config_path, "%s", config);
    char err[2048];
    int is_arg;
    if (build_config(cfg, config, a, err, sizeof err, &is_arg) != FT_OK) {
        fprintf(stderr, "flashtrie serve: %s\n", err);
        return is_arg ? 2 : 1;
    }
    if (apply_config(o, cfg, 1, err, sizeof err) != FT_OK) {
        fprintf(stderr, "flashtrie serve: %s\n", err);
        return 1;
    }
    o->slot.no_verify = o->no_verify;
    if (open_log(cfg->log_file, err, sizeof err) != FT_OK) {
        fprintf(stderr, "flashtrie serve: %s\n", err);
        return 1;
    }
    return -1;
}

static ft_config g_cfg; /* the running configuration (60 KiB: not stack) */

int srv_metrics_configured(const server *srv)
{
    (void)srv;
    return g_cfg.metrics[0] != 0;
}

void srv_reload_config(server *srv)
{
    static ft_config next;
    char err[2048];
    int is_arg;
    int rc = build_config(&next, srv->o.config_path, &g_args, err, sizeof err,
                          &is_arg);
    if (rc == FT_OK)
        rc = ft_config_reload_check(&g_cfg, &next, err, sizeof err);
    if (rc != FT_OK) {
        FT_LOGF(FT_LOG_ERROR, "reload: config %s refused: %s; the running settings stay",
                 srv->o.config_path, err);
        return;
    }
    if (strcmp(next.log_file, g_cfg.log_file) != 0 || next.log_file[0]) {
        if (open_log(next.log_file, err, sizeof err) != FT_OK) {
            FT_LOGF(FT_LOG_ERROR, "reload: %s; logging stays where it was", err);
            snprintf(next.log_file, sizeof next.log_file, "%s",
                     g_cfg.log_file);
        }
    }
    pthread_mutex_lock(&srv->reload_mu);
    apply_config(&srv->o, &next, 0, err, sizeof err);
    pthread_mutex_unlock(&srv->reload_mu);
    ft_log_set_level((ft_log_level)srv->o.log_level);
    ft_batcher_set_window(srv->batcher, next.max_batch, next.max_wait_us);
    g_cfg = next;
    FT_LOGF(FT_LOG_INFO, "reload: settings of %s applied", srv->o.config_path);
}

/* The opening of an index (reading, verifying, and for the GPU engine
 * copying it to every device) can take minutes for a large one; a ticker
 * thread logs every OPEN_TICK_S seconds that it is still under way, so a
 * slow start is told apart from a hung one.  The engines report no
 * progress of their own, so the line says how long, not how far. */
#define OPEN_TICK_S 5

typedef struct open_ticker {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    const char *path;
    uint64_t t0;
} open_ticker;

static void *open_tick_main(void *arg)
{
    open_ticker *t = arg;
    struct stat st;
    long long bytes = stat(t->path, &st) == 0 ? (long long)st.st_size : -1;
    pthread_mutex_lock(&t->mu);
    while (!t->done) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += OPEN_TICK_S;
        if (pthread_cond_timedwait(&t->cv, &t->mu, &ts) == 0 || t->done)
            continue;
        FT_LOGF(FT_LOG_INFO, "still opening %s (%lld bytes): %.0f s so far "
                "(verifying it, opening the engines, copying it to each GPU)",
                t->path, bytes, (double)(fti_now_ns() - t->t0) / 1e9);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

/* gen_open is ft_gen_open with the ticker running alongside. */
static int gen_open(ft_gen **out, const char *path, const ft_slot_opts *o,
                    uint64_t id, char *errbuf, size_t errlen)
{
    open_ticker t = {.path = path, .t0 = fti_now_ns()};
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&t.mu, NULL);
    pthread_cond_init(&t.cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_t th;
    int ticking = pthread_create(&th, NULL, open_tick_main, &t) == 0;
    int rc = ft_gen_open(out, path, o, id, errbuf, errlen);
    if (ticking) {
        pthread_mutex_lock(&t.mu);
        t.done = 1;
        pthread_cond_signal(&t.cv);
        pthread_mutex_unlock(&t.mu);
        pthread_join(th, NULL);
    }
    pthread_cond_destroy(&t.cv);
    pthread_mutex_destroy(&t.mu);
    if (rc == FT_OK && fti_now_ns() - t.t0 >= (uint64_t)OPEN_TICK_S * 1000000000u)
        FT_LOGF(FT_LOG_INFO, "opened %s in %.1f s", path,
                (double)(fti_now_ns() - t.t0) / 1e9);
    return rc;
}

int srv_reload(server *srv, const char *path, char *errbuf, size_t errlen)
{
    if (srv->cluster) {
        /* Every rank holds its part of one manifest: a new one needs a
         * new session, so the ranks are restarted instead. */
        snprintf(errbuf, errlen, "reload: refused: a cluster does not "
                 "reload its index (restart every rank)");
        FT_LOGF(FT_LOG_ERROR, "%s", errbuf);
        atomic_fetch_add(&srv->reload_failures, 1);
        return FT_ENOTSUP;
    }
    pthread_mutex_lock(&srv->reload_mu);
    char p[sizeof srv->o.index];
    snprintf(p, sizeof p, "%s", path && *path ? path : srv->o.index);
    ft_gen *cur = ft_batcher_current(srv->batcher);
    uint64_t id = atomic_fetch_add(&srv->next_gen, 1);
    char err[1400];
    ft_gen *g = NULL;
    int rc = gen_open(&g, p, &srv->o.slot, id, err, sizeof err);
    if (rc == FT_OK && g->n_eng != cur->n_eng) {
        snprintf(err, sizeof err, "%s: opened %zu engines where %zu serve",
                 p, g->n_eng, cur->n_eng);
        ft_gen_unref(g);
        rc = FT_ESTATE;
    }
    if (rc != FT_OK) {
        atomic_fetch_add(&srv->reload_failures, 1);
        FT_LOGF(FT_LOG_ERROR, "reload refused: %s; still serving generation %llu (%s)",
                 err, (unsigned long long)cur->id, cur->path);
        snprintf(errbuf, errlen, "reload: refused: %s", err);
        ft_gen_unref(cur);
        pthread_mutex_unlock(&srv->reload_mu);
        return rc;
    }
    ft_gen *old = ft_batcher_swap(srv->batcher, g);
    snprintf(srv->o.index, sizeof srv->o.index, "%s", p);
    atomic_fetch_add(&srv->reloads, 1);
    FT_LOGF(FT_LOG_INFO, "reloaded: now serving generation %llu: %s (%llu keys, %llu "
            "nodes); generation %llu closes after its last request",
            (unsigned long long)g->id, p, (unsigned long long)g->info.keys,
            (unsigned long long)g->info.nodes, (unsigned long long)old->id);
    snprintf(errbuf, errlen, "reloaded %s: generation %llu, %llu keys", p,
             (unsigned long long)g->id, (unsigned long long)g->info.keys);
    ft_gen_unref(old);
    ft_gen_unref(cur);
    pthread_mutex_unlock(&srv->reload_mu);
    return FT_OK;
}

/* drain stops taking work, waits for every message to be answered and
 * returns the exit status: 0 when all were, 1 when the timeout cut some. */
static int drain(server *srv)
{
    atomic_store(&srv->draining, 1);
    long n0 = atomic_load(&srv->inflight);
    FT_LOGF(FT_LOG_INFO, "draining: no new connections or requests; %ld in flight, up to "
            "%u ms", n0, srv->o.drain_timeout_ms);
    uint64_t until = fti_now_ns() + (uint64_t)srv->o.drain_timeout_ms * 1000000u;
    while (atomic_load(&srv->inflight) > 0 && fti_now_ns() < until) {
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    long left = atomic_load(&srv->inflight);
    if (left > 0) {
        FT_LOGF(FT_LOG_ERROR, "drain timed out after %u ms: %ld requests cut unanswered",
                 srv->o.drain_timeout_ms, left);
        return 1;
    }
    FT_LOGF(FT_LOG_INFO, "drained: every request answered");
    return 0;
}

/* The teardown after a complete drain closes nng sockets, the HTTP
 * server and the batcher's threads.  Every request has been answered by
 * then, but nng_close can hang under load (a closing pipe of a peer that
 * stopped reading; seen once in CI as a server that did not exit within
 * 15 s of SIGTERM): a watchdog then logs the phase it is stuck in and
 * exits with the status the server would have returned instead of
 * hanging the process. */
#define TEARDOWN_LIMIT_MS 5000
static _Atomic(const char *) g_teardown_phase;
static atomic_int g_teardown_done, g_teardown_status;

static void *teardown_watchdog(void *arg)
{
    (void)arg;
    for (int waited = 0; waited < TEARDOWN_LIMIT_MS; waited += 10) {
        if (atomic_load(&g_teardown_done))
            return NULL;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    if (atomic_load(&g_teardown_done))
        return NULL;
    FT_LOGF(FT_LOG_ERROR, "shutdown: %s has not returned after %d ms (every "
            "request was answered); exiting without the rest of the teardown",
            atomic_load(&g_teardown_phase), TEARDOWN_LIMIT_MS);
    fflush(stderr);
    _exit(atomic_load(&g_teardown_status));
    return NULL;
}

static void teardown_phase(const char *what)
{
    atomic_store(&g_teardown_phase, what);
}

int cmd_serve(int argc, char **argv)
{
    server *srv = calloc(1, sizeof *srv);
    if (srv == NULL) {
        fprintf(stderr, "flashtrie serve: out of memory\n");
        return 1;
    }
    srv->o.contexts = 64;
    g_dump_opts = &srv->o;
    ft_log_set_level(FT_LOG_INFO);
    int st = parse_args(&srv->o, &g_cfg, argc, argv);
    if (st >= 0) {
        g_dump_opts = NULL;
        free(srv->o.config_dump);
        free(srv);
        return st;
    }
    ft_log_set_level((ft_log_level)srv->o.log_level);

    /* Block the signals before any thread starts (engines and nng start
     * threads), so that every thread inherits the mask and they arrive
     * only through the signalfd read below. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC);
    if (sfd < 0) {
        fprintf(stderr, "flashtrie serve: signalfd: %s\n", strerror(errno));
        g_dump_opts = NULL;
        free(srv->o.config_dump);
        free(srv);
        return 1;
    }

    srv->start_ns = fti_now_ns();
    pthread_mutex_init(&srv->reload_mu, NULL);
    atomic_init(&srv->next_gen, 2);
    char err[512];
    ft_gen *g = NULL;
    srv->o.slot.max_batch = srv->o.max_batch;
    if (srv->o.cl_world > 1 && srv->o.cl_rank > 0) {
        /* A worker rank: no listeners, no queue; its shards serve the
         * coordinator. */
        st = srv_cluster_worker(srv, sfd);
        close(sfd);
        g_dump_opts = NULL;
        free(srv->o.config_dump);
        free(srv);
        return st;
    }
    int rc = srv->o.cl_world > 1
                 ? srv_cluster_gen(srv, sfd, &g, err, sizeof err)
                 : gen_open(&g, srv->o.index, &srv->o.slot, 1, err, sizeof err);
    if (rc != FT_OK) {
        FT_LOGF(FT_LOG_ERROR, "cannot serve: %s", err);
        close(sfd);
        g_dump_opts = NULL;
        free(srv->o.config_dump);
        free(srv);
        return 1;
    }
    FT_LOGF(FT_LOG_INFO, "index %s (%zu shard%s): %llu keys, %llu nodes, %llu bytes",
            g->path, g->shards, g->shards == 1 ? "" : "s",
            (unsigned long long)g->info.keys, (unsigned long long)g->info.nodes,
            (unsigned long long)g->info.file_bytes);
    FT_LOGF(FT_LOG_INFO, "engine %s x%zu: %s", ft_gen_kind_name(g, 0), g->n_eng, g->why);
    for (size_t i = 0; i < g->n_eng; i++)
        FT_LOGF(FT_LOG_INFO, "replica %zu: %s", i, ft_searcher_note(g->eng[i]));
    if (srv->o.test_delay_us)
        FT_LOGF(FT_LOG_WARN, "test hook: every batch waits %u us before it runs",
                srv->o.test_delay_us);
    for (size_t i = 0; i < FT_SLOT_MAX_REPLICAS; i++) {
        if (srv->o.test_fault[i] == 0)
            continue;
        if (i >= g->n_eng) {
            FT_LOGF(FT_LOG_ERROR, "cannot serve: --test-fault: replica %zu: "
                    "there are %zu replicas", i, g->n_eng);
            ft_gen_unref(g);
            close(sfd);
            free(srv);
            return 1;
        }
        ft_searcher_fault_arm(g->eng[i], srv->o.test_fault[i] - 1);
        FT_LOGF(FT_LOG_WARN, "test hook: replica %zu fails from its engine "
                "call %llu on (injected fault)", i,
                (unsigned long long)srv->o.test_fault[i]);
    }
    if (ft_queue_init(&srv->queue, srv->o.queue_depth) != FT_OK ||
        ft_batcher_start(&srv->batcher, &srv->queue, g, srv->o.max_batch,
                         srv->o.max_wait_us, srv->o.test_delay_us) != FT_OK) {
        FT_LOGF(FT_LOG_ERROR, "cannot serve: out of memory for the queue or the batcher");
        ft_gen_unref(g);
        close(sfd);
        free(srv);
        return 1;
    }
    st = 0;
    /* The metrics listener opens first, so that a client that can reach
     * the server can also scrape it; /healthz says "starting" until the
     * request listeners below are open. */
    if (g_cfg.metrics[0]) {
        if (srv_http_start(srv, g_cfg.metrics, err, sizeof err) != FT_OK) {
            FT_LOGF(FT_LOG_ERROR, "cannot listen: %s", err);
            st = 1;
        } else {
            FT_LOGF(FT_LOG_INFO, "metrics on %s (/metrics, /healthz)", g_cfg.metrics);
        }
    }
    for (size_t i = 0; st == 0 && i < srv->o.n_ls; i++) {
        srv_socket *s = &srv->socks[srv->n_socks++];
        s->srv = srv;
        s->lo = srv->o.ls[i];
        if (srv_socket_start(s, err, sizeof err) != FT_OK) {
            FT_LOGF(FT_LOG_ERROR, "cannot listen: %s", err);
            st = 1;
            break;
        }
        FT_LOGF(FT_LOG_INFO, "listening on %s%s (%u contexts, messages up to %llu bytes)",
                s->lo.url, s->lo.admin ? " (admin)" : "", srv->o.contexts,
                (unsigned long long)srv->o.max_message_bytes);
    }
    if (st == 0)
        srv_http_ready(srv);
    if (st == 0) {
        FT_LOGF(FT_LOG_INFO, "flashtrie %s serving (pid %ld); SIGHUP reloads, SIGTERM "
                "drains", FT_VERSION_STRING, (long)getpid());
        for (;;) {
            struct pollfd pfd = {sfd, POLLIN, 0};
            int pr = poll(&pfd, 1, 1000);
            if (pr <= 0)
                continue;
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof si) != (ssize_t)sizeof si)
                continue;
            if (si.ssi_signo == SIGHUP) {
                /* A RELOAD frame rewrites the path on an nng thread,
                 * under reload_mu: read it under the lock too. */
                char cur[sizeof srv->o.index];
                pthread_mutex_lock(&srv->reload_mu);
                snprintf(cur, sizeof cur, "%s", srv->o.index);
                pthread_mutex_unlock(&srv->reload_mu);
                FT_LOGF(FT_LOG_INFO, "SIGHUP: reloading %s", cur);
                if (srv->o.config_path[0])
                    srv_reload_config(srv);
                char msg[512];
                srv_reload(srv, NULL, msg, sizeof msg);
                continue;
            }
            FT_LOGF(FT_LOG_INFO, "%s: shutting down", si.ssi_signo == SIGTERM ? "SIGTERM"
                                                                 : "SIGINT");
            break;
        }
        st = drain(srv);
        if (st != 0) {
            /* Threads still hold requests that will never be answered:
             * leave without tearing down what they use. */
            fflush(stderr);
            _exit(1);
        }
    }
    pthread_t wd;
    atomic_store(&g_teardown_status, st);
    int wd_on = pthread_create(&wd, NULL, teardown_watchdog, NULL) == 0;
    /* The HTTP handlers read the queue and the batcher: stop them first. */
    teardown_phase("stopping the HTTP server");
    srv_http_stop(srv);
    teardown_phase("stopping the batcher");
    ft_queue_close(&srv->queue);
    ft_batcher_stop(srv->batcher);
    teardown_phase("closing the nng sockets (nng_close)");
    for (size_t i = 0; i < srv->n_socks; i++)
        srv_socket_close(&srv->socks[i]);
    ft_queue_destroy(&srv->queue);
    close(sfd);
    atomic_store(&g_teardown_done, 1);
    if (wd_on)
        pthread_join(wd, NULL);
    FT_LOGF(FT_LOG_INFO, "stopped");
    pthread_mutex_lock(&g_dump_mu);
    g_dump_opts = NULL;
    free(srv->o.config_dump);
    pthread_mutex_unlock(&g_dump_mu);
    free(srv);
    return st;
}
