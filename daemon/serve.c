/*
 * serve.c - "flashtrie serve": the long-lived server.
 *
 * The main thread starts everything, then only waits for signals (read
 * from a signalfd: the handlers do no work) and runs what they ask for:
 * SIGHUP reloads the index, SIGTERM and SIGINT drain and exit.  nng's
 * threads receive and reply (serve_ctx.c), the batcher and one worker per
 * replica run the searches (router/batcher.c).
 *
 * The settings are the table's (config/settings.c): its rows give serve
 * its flags, and the server reads the one live ft_config (srv->cfg) that
 * the file and the flags fill; what a new value must do to the running
 * server is an apply hook here (hooks[]), run on start and on reload.
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
#include <stdarg.h>
#include <stddef.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "frame.h"
#include "ft_config.h"

#include "serve.h"
#include "serve_cluster.h"
#include "serve_conn.h"
#include "serve_cpus.h"
#include "flashtrie/internal/cores.h"
#include "serve_ctx.h"
#include "serve_metrics.h"
#include "serve_priv.h"
#include "serve_wire.h"
#include "search_impl.h"

/* The flags of serve that are no settings: they shape the listeners given
 * by flags, or the server itself (contexts, checksums; the test hooks are
 * left out of the usage). */
static const char *const own_flags[] = {
    "[--admin-listen URL]...",
    "[--tls-cert F --tls-key F [--tls-ca F] [--tls-verify]]",
    "[--contexts N]", "[--answer-threads N]", "[--no-verify]"};

static const char *const usage_tail =
    "  serves searches over nng (tcp://, ipc://, tls+tcp://) in the\n"
    "  foreground (default listener: the config table's).  Binary frames\n"
    "  (docs/protocol.md) and JSON lines (docs/specification.md section 7)\n"
    "  are both answered.  --log-file appends the log to F (reopened on\n"
    "  SIGHUP) instead of stderr.\n"
    "  SIGHUP reloads the index; SIGTERM or SIGINT drains and exits.\n"
    "  docs/daemon.md describes every option.\n";

/* usage writes serve's usage: the settings' flags from the table, then
 * its own, wrapped at 78 columns. */
static void usage(FILE *f)
{
    fputs("usage: flashtrie serve --config FILE\n"
          "       flashtrie serve", f);
    size_t col = 22, n_own = sizeof own_flags / sizeof own_flags[0];
    for (size_t i = 0; i < FT_CONFIG_NSETTINGS + n_own; i++) {
        char item[160];
        const ft_config_row *r =
            i < FT_CONFIG_NSETTINGS ? &ft_config_rows[i] : NULL;
        if (r == NULL)
            snprintf(item, sizeof item, "%s", own_flags[i - FT_CONFIG_NSETTINGS]);
        else if (r->flag == NULL)
            continue;
        else if (r->flag_arg == NULL)
            snprintf(item, sizeof item, "[--%s]", r->flag);
        else
            snprintf(item, sizeof item, "[--%s %s]%s", r->flag, r->flag_arg,
                     r->type == FT_CONFIG_LISTENERS ? "..." : "");
        if (col + 1 + strlen(item) > 78) {
            fputs("\n        ", f);
            col = 8;
        }
        fprintf(f, " %s", item);
        col += 1 + strlen(item);
    }
    fputs("\n", f);
    fputs(usage_tail, f);
}

/* srv_args is what the command line said, kept for a SIGHUP that reloads
 * the config file: the flags override the file again. */
typedef struct srv_args {
    const char *set_name[64], *set_value[64]; /* row names, values */
    int nset;
    char listen[4096];   /* the LISTENERS row's flag: URLs, comma-separated */
    int n_listen;        /* how many times it was given ("" counts) */
    const char *admin_listen[FT_CONFIG_MAX_LISTENERS];
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
        fti_index_bus_guard(2);
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
    fti_index_bus_guard(fileno(f));
    if (g_log_file)
        fclose(g_log_file);
    g_log_file = f;
    return FT_OK;
}

/* ---- the apply hooks of the settings table (ft_config_hook) ---- */

/* heavy_limit is how many heavy batches may run at once on n replicas:
 * n less light_replicas, one at least; 0 (no limit) when nothing is
 * kept. */
static size_t heavy_limit(const ft_config *cfg, size_t n)
{
    size_t keep = cfg->light_replicas;
    if (keep == 0 || n < 2)
        return 0;
    return keep < n ? n - keep : 1;
}

static int hook_batch_window(void *ctx, ft_config *live, const ft_config *old,
                             char *err, size_t errlen)
{
    server *srv = ctx;
    (void)old, (void)err, (void)errlen;
    /* On start the batcher does not run yet: it starts with these. */
    if (srv->batcher) {
        ft_batcher_set_window(srv->batcher, live->max_batch,
                              live->max_wait_us);
        ft_queue_set_lanes(&srv->queue, live->heavy_batch,
                           FT_QUEUE_HEAVY_EVERY);
        ft_gen *g = ft_batcher_current(srv->batcher);
        ft_queue_set_heavy_limit(&srv->queue, heavy_limit(live, g->n_eng));
        ft_gen_unref(g);
    }
    return FT_OK;
}

static int hook_log_level(void *ctx, ft_config *live, const ft_config *old,
                          char *err, size_t errlen)
{
    (void)ctx, (void)old, (void)err, (void)errlen;
    ft_log_set_level((ft_log_level)live->log_level);
    return FT_OK;
}

/* hook_log_file opens the log on start (a failure stops the server) and
 * reopens it on a reload that names one or changes it; one that cannot be
 * opened then leaves the log where it was. */
static int hook_log_file(void *ctx, ft_config *live, const ft_config *old,
                         char *err, size_t errlen)
{
    (void)ctx;
    if (old == NULL)
        return open_log(live->log_file, err, errlen);
    if (strcmp(live->log_file, old->log_file) == 0 && !live->log_file[0])
        return FT_OK;
    char why[FT_CONFIG_PATH_MAX + 128];
    if (open_log(live->log_file, why, sizeof why) != FT_OK) {
        FT_LOGF(FT_LOG_ERROR, "reload: %s; logging stays where it was", why);
        snprintf(live->log_file, sizeof live->log_file, "%s", old->log_file);
    }
    return FT_OK;
}

static const ft_config_hook_fn hooks[FT_CONFIG_NHOOKS] = {
    [FT_CONFIG_HOOK_BATCH_WINDOW] = hook_batch_window,
    [FT_CONFIG_HOOK_LOG_LEVEL] = hook_log_level,
    [FT_CONFIG_HOOK_LOG_FILE] = hook_log_file,
};

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
    char who[512]; /* the setting's whole message (64 bytes cut them) */
    for (int i = 0; i < a->nset; i++)
        if ((rc = ft_config_set(cfg, a->set_name[i], a->set_value[i],
                                FT_CONFIG_SRC_CLI_AT, who, sizeof who)) !=
            FT_OK) {
            /* the flag as typed (--max-batch), not the row's name */
            const ft_config_row *r = ft_config_find(a->set_name[i]);
            snprintf(err, errlen, "--%s: %s",
                     r && r->flag ? r->flag : a->set_name[i], who);
            return rc;
        }
    if (a->n_listen &&
        (rc = ft_config_set(cfg, ft_config_rows[FT_CONFIG_S_LISTENERS].name,
                            a->listen, FT_CONFIG_SRC_CLI_AT, err, errlen)) !=
            FT_OK)
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

int srv_config_dump(server *srv, ft_buf *out)
{
    pthread_mutex_lock(&g_dump_mu);
    int rc = ft_buf_printf(out, "%s",
                           srv->config_dump ? srv->config_dump : "");
    pthread_mutex_unlock(&g_dump_mu);
    return rc;
}

/* make_dump renders INFO's config section from the live settings: the
 * table's rows, then what serve's own flags set. */
static int make_dump(server *srv, char *err, size_t errlen)
{
    ft_buf b;
    ft_buf_init(&b);
    int rc = ft_config_dump(&srv->cfg, &b);
    if (rc == FT_OK && srv->test_delay_us)
        rc = ft_buf_printf(&b, "test_delay_us: %u (cli, test hook)\n",
                           srv->test_delay_us);
    if (rc == FT_OK)
        rc = ft_buf_printf(&b, "contexts: %u (cli)\n", srv->contexts);
    if (rc == FT_OK && srv->answer_threads >= 0)
        rc = ft_buf_printf(&b, "answer_threads: %d (cli)\n",
                           srv->answer_threads);
    if (rc != FT_OK) {
        ft_buf_free(&b);
        snprintf(err, errlen, "config: out of memory");
        return rc;
    }
    pthread_mutex_lock(&g_dump_mu);
    free(srv->config_dump);
    srv->config_dump = (char *)b.data; /* NUL-terminated by ft_buf_printf */
    pthread_mutex_unlock(&g_dump_mu);
    return FT_OK;
}

/* batch_cap is the most requests of a batch: max_batch, within the
 * queue. */
/* answer_threads is how many threads share the batches' replies with the
 * workers (ft_batcher_answer_threads): --answer-threads, else, with a GPU
 * replica, half the cores the server may use up to 8 (a batch of 32 answered by one
 * thread kept the H200's replica idle, docs/BENCHMARKS.md, "Daemon
 * overhead"), and none for CPU replicas, whose workers already keep the
 * cores busy. */
static uint32_t answer_threads(const server *srv, const ft_gen *g)
{
    if (srv->answer_threads >= 0)
        return (uint32_t)srv->answer_threads;
    int gpu = 0;
    for (size_t i = 0; i < g->n_eng; i++)
        gpu |= g->kind[i] == FT_ENGINE_GPU;
    long cores = fti_usable_cores(); /* of the affinity: cpus narrows it */
    long n = cores / 2 < 8 ? cores / 2 : 8;
    return gpu && n > 0 ? (uint32_t)n : 0;
}

/* note_overlap records whether every replica of g checks a batch's
 * duplicate tokens while its engine works (server.gen_overlaps: where
 * dup_check = auto moves that check off the decoder). */
static void note_overlap(server *srv, const ft_gen *g)
{
    int all = g->n_eng > 0;
    for (size_t i = 0; i < g->n_eng; i++)
        all &= fti_searcher_overlaps_check(g->eng[i]) != 0;
    atomic_store(&srv->gen_overlaps, all);
}

static uint32_t batch_cap(const ft_config *c)
{
    return c->max_batch < c->queue_depth ? c->max_batch : c->queue_depth;
}

/* start_config makes, from the live settings, the engines' options (the
 * slot's: ft_slot_opts is the router's own shape of them) and INFO's
 * section, and runs every apply hook. */
static int start_config(server *srv, char *err, size_t errlen)
{
    const ft_config *cfg = &srv->cfg;
    ft_slot_opts *so = &srv->slot;
    ft_slot_opts_init(so);
    /* engine = shards: the manifest's shards spread over the listed GPUs
     * (one group per replica), or a CPU group without a GPU. */
    so->spread = cfg->engine == FT_CONFIG_ENGINE_SHARDS;
    so->engine = cfg->engine == FT_CONFIG_ENGINE_CPU   ? FT_SLOT_CPU
                 : cfg->engine == FT_CONFIG_ENGINE_GPU ? FT_SLOT_GPU
                                                       : FT_SLOT_AUTO;
    if (cfg->n_devices > FT_SLOT_MAX_REPLICAS) {
        snprintf(err, errlen, "devices: at most %d GPUs are served",
                 FT_SLOT_MAX_REPLICAS);
        return FT_ECONFIG;
    }
    so->n_devices = cfg->n_devices;
    for (uint32_t i = 0; i < cfg->n_devices; i++)
        so->devices[i] = (int)cfg->devices[i];
    so->replicas = (int)cfg->replicas;
    if (so->replicas > FT_SLOT_MAX_REPLICAS)
        so->replicas = FT_SLOT_MAX_REPLICAS;
    so->cpu_threads = (int)cfg->cpu_threads;
    so->max_batch = batch_cap(cfg);
    /* GPU arenas are sized for the caps at start; a request beyond them
     * after a reload raised a cap takes the engine's big slot. */
    so->max_beam = cfg->max_beam;
    so->max_k = cfg->max_k;
    so->max_t = cfg->max_t;
    so->no_verify = srv->no_verify;
    snprintf(srv->index, sizeof srv->index, "%s", cfg->index_path);
    int rc = make_dump(srv, err, errlen);
    if (rc != FT_OK)
        return rc;
    return ft_config_run_hooks(&srv->cfg, NULL, hooks, srv, err, errlen);
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

/* parse_args reads the command line and the config file into srv->cfg;
 * returns -1 to go on, else the exit status. */
static int parse_args(server *srv, int argc, char **argv)
{
    enum { O_ROW = 256, O_CONFIG, O_ADMIN, O_CERT, O_KEY, O_CA,
           O_VERIFY, O_CTX, O_NOVERIFY, O_DELAY, O_FAULT, O_ODELAY, O_HELP,
           O_ANSWER };
    /* serve's own flags, then one per row of the table with a flag. */
    struct option opts[16 + FT_CONFIG_NSETTINGS] = {
        {"config", required_argument, 0, O_CONFIG},
        {"admin-listen", required_argument, 0, O_ADMIN},
        {"tls-cert", required_argument, 0, O_CERT},
        {"tls-key", required_argument, 0, O_KEY},
        {"tls-ca", required_argument, 0, O_CA},
        {"tls-verify", no_argument, 0, O_VERIFY},
        {"contexts", required_argument, 0, O_CTX},
        {"answer-threads", required_argument, 0, O_ANSWER},
        {"no-verify", no_argument, 0, O_NOVERIFY},
        /* A test hook, not for production: every batch sleeps this long
         * before it runs, standing in for a slow engine (docs/daemon.md). */
        {"test-delay-us", required_argument, 0, O_DELAY},
        /* A test hook, not for production: replica R fails from its N-th
         * engine call on, as on a CUDA error (the failover tests). */
        {"test-fault", required_argument, 0, O_FAULT},
        /* A test hook, not for production: every open of an index waits
         * this long first, standing in for a slow disk (the lifecycle
         * tests). */
        {"test-open-delay-ms", required_argument, 0, O_ODELAY},
        {"foreground", no_argument, 0, 'f'},
        {"help", no_argument, 0, O_HELP}};
    int nopt = 0;
    while (opts[nopt].name != NULL)
        nopt++;
    for (int i = 0; i < FT_CONFIG_NSETTINGS; i++)
        if (ft_config_rows[i].flag)
            opts[nopt++] = (struct option){
                ft_config_rows[i].flag,
                ft_config_rows[i].flag_arg ? required_argument : no_argument,
                0, O_ROW};
    opts[nopt] = (struct option){0, 0, 0, 0};
    srv_args *a = &g_args;
    memset(a, 0, sizeof *a);
    const char *config = NULL;
    unsigned long long v;
    int c, li;
    optind = 1;
    opterr = 1;
    while ((c = getopt_long(argc, argv, "h", opts, &li)) != -1) {
        switch (c) {
        case O_ROW: {
            const ft_config_row *r = ft_config_find_flag(opts[li].name);
            if (r->type == FT_CONFIG_LISTENERS) {
                /* Repeatable: the URLs add up to one list. */
                size_t n = strlen(a->listen);
                if (n + strlen(optarg) + 2 > sizeof a->listen) {
                    fprintf(stderr, "flashtrie serve: --%s: too many URLs\n",
                            r->flag);
                    return 2;
                }
                snprintf(a->listen + n, sizeof a->listen - n, "%s%s",
                         a->n_listen ? "," : "", optarg);
                a->n_listen++;
                break;
            }
            if (a->nset == 64) {
                fprintf(stderr, "flashtrie serve: too many flags\n");
                return 2;
            }
            a->set_name[a->nset] = r->name;
            a->set_value[a->nset++] = r->flag_arg ? optarg : "true";
            break;
        }
        case O_CONFIG: config = optarg; break;
        case O_ADMIN:
            if (a->n_admin == FT_CONFIG_MAX_LISTENERS) {
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
            srv->contexts = (uint32_t)v;
            break;
        case O_ANSWER:
            if (parse_uint("--answer-threads", optarg, 0,
                           FT_BATCHER_MAX_ANSWER_THREADS, &v))
                return 2;
            srv->answer_threads = (int)v;
            break;
        case O_NOVERIFY: srv->no_verify = 1; break;
        case O_DELAY:
            if (parse_uint("--test-delay-us", optarg, 0, 60000000, &v))
                return 2;
            srv->test_delay_us = (uint32_t)v;
            break;
        case O_ODELAY:
            if (parse_uint("--test-open-delay-ms", optarg, 0, 3600000, &v))
                return 2;
            srv->test_open_delay_ms = (uint32_t)v;
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
            srv->test_fault[rr] = nn;
            break;
        }
        case 'f': break;
        case 'h':
        case O_HELP: usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "flashtrie serve: unexpected argument '%s'\n",
                argv[optind]);
        usage(stderr);
        return 2;
    }
    int has_index = 0;
    for (int i = 0; i < a->nset; i++)
        has_index |= !strcmp(a->set_name[i],
                             ft_config_rows[FT_CONFIG_S_INDEX].name);
    if (!config && !has_index) {
        fprintf(stderr, "flashtrie serve: --index (or --config) is required\n");
        usage(stderr);
        return 2;
    }
    char err[2048];
    int is_arg;
    if (build_config(&srv->cfg, config, a, err, sizeof err, &is_arg) !=
        FT_OK) {
        fprintf(stderr, "flashtrie serve: %s\n", err);
        return is_arg ? 2 : 1;
    }
    if (start_config(srv, err, sizeof err) != FT_OK) {
        fprintf(stderr, "flashtrie serve: %s\n", err);
        return 1;
    }
    return -1;
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

/* ---- the reload worker ----
 *
 * A reload (SIGHUP, or a RELOAD frame) runs on a thread of its own: the
 * signal thread stays free for SIGTERM and nng's threads for the
 * listeners, however long an open takes (a large index verified, a file
 * on a hung network mount).  One runs at a time; a RELOAD frame that
 * comes meanwhile is answered BUSY, a SIGHUP waits for its turn.  A
 * reload is all or nothing: the new settings (SIGHUP with a config file)
 * and the index they name are both checked before either is applied, so
 * a refused one leaves the settings, the generation, INFO and the
 * metrics as they were, and counts as result="failed". */

/* sd_notify: the readiness protocol of systemd (sd_notify(3)): one
 * datagram "KEY=VALUE\n..." to the unix socket named by NOTIFY_SOCKET
 * ('@' for the abstract namespace).  A dozen lines here instead of a
 * dependency on libsystemd: it is all serve needs of it, and it works the
 * same outside systemd (no NOTIFY_SOCKET: nothing is sent). */
static void notify(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void notify(const char *fmt, ...)
{
    const char *e = getenv("NOTIFY_SOCKET");
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = e ? strlen(e) : 0;
    if (n < 2 || n >= sizeof sa.sun_path || (e[0] != '/' && e[0] != '@'))
        return;
    memcpy(sa.sun_path, e, n);
    if (e[0] == '@')
        sa.sun_path[0] = '\0';
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (len < 0 || (size_t)len >= sizeof msg)
        return;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return;
    if (sendto(fd, msg, (size_t)len, MSG_NOSIGNAL, (struct sockaddr *)&sa,
               (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)) < 0)
        FT_LOGF(FT_LOG_DEBUG, "sd_notify: %s: %s", e, strerror(errno));
    close(fd);
}

static unsigned long long monotonic_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000ull +
           (unsigned long long)ts.tv_nsec / 1000u;
}

/* open_delay is the test hook --test-open-delay-ms: every open of an
 * index (at start and on reload) waits that long first, as a slow disk or
 * a large index would make it. */
static void open_delay(const server *srv)
{
    if (srv->test_open_delay_ms == 0)
        return;
    FT_LOGF(FT_LOG_WARN, "test hook: waiting %u ms before opening the index",
            srv->test_open_delay_ms);
    struct timespec ts = {srv->test_open_delay_ms / 1000,
                          (long)(srv->test_open_delay_ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* open_index opens path as the next generation, checked against the one
 * served (as many engines); *out on FT_OK. */
static int open_index(server *srv, const char *path, ft_gen **out, char *err,
                      size_t errlen)
{
    uint64_t id = atomic_fetch_add(&srv->next_gen, 1);
    open_delay(srv);
    ft_gen *g = NULL;
    int rc = gen_open(&g, path, &srv->slot, id, err, errlen);
    if (rc != FT_OK)
        return rc;
    ft_gen *cur = ft_batcher_current(srv->batcher);
    if (g->n_eng != cur->n_eng) {
        snprintf(err, errlen, "%s: opened %zu engines where %zu serve", path,
                 g->n_eng, cur->n_eng);
        ft_gen_unref(g);
        rc = FT_ESTATE;
    }
    ft_gen_unref(cur);
    *out = rc == FT_OK ? g : NULL;
    return rc;
}

/* refused counts and logs a refused reload: nothing changed. */
static void refused(server *srv, const char *why, char *msg, size_t msglen)
{
    atomic_fetch_add(&srv->reload_failures, 1);
    ft_gen *cur = ft_batcher_current(srv->batcher);
    FT_LOGF(FT_LOG_ERROR, "reload refused: %s; still serving generation %llu "
            "(%s), the settings unchanged", why, (unsigned long long)cur->id,
            cur->path);
    ft_gen_unref(cur);
    snprintf(msg, msglen, "reload: refused: %s", why);
}

/* do_reload runs one reload on the worker: the settings of the config
 * file first when hup (and a file was given), then the index (path, or
 * the one the new settings name, or the one served); g_next holds the
 * new settings until both are checked. */
static ft_config g_next, g_old; /* 60 KiB each: not on the stack */

static int do_reload(server *srv, int hup, const char *path, char *msg,
                     size_t msglen)
{
    char err[2048], p[FT_CONFIG_PATH_MAX];
    int rc, with_cfg = hup && srv->cfg.path[0];
    if (hup && srv->cfg.log_file[0] &&
        open_log(srv->cfg.log_file, err, sizeof err) != FT_OK)
        /* Log rotation needs the reopen whatever becomes of the reload. */
        FT_LOGF(FT_LOG_ERROR, "SIGHUP: %s; logging stays where it was", err);
    if (srv->cluster) {
        /* Every rank holds its part of one manifest: a new one needs a
         * new session, so the ranks are restarted instead (settings
         * included: a cluster's are checked equal at start). */
        refused(srv, "a cluster does not reload its index (restart every "
                "rank)", msg, msglen);
        return FT_ENOTSUP;
    }
    if (with_cfg) {
        int is_arg;
        rc = build_config(&g_next, srv->cfg.path, &g_args, err, sizeof err,
                          &is_arg);
        if (rc == FT_OK)
            rc = ft_config_reload_check(&srv->cfg, &g_next, err, sizeof err);
        if (rc != FT_OK) {
            char why[FT_CONFIG_PATH_MAX + 2100];
            snprintf(why, sizeof why, "config %s refused: %s", srv->cfg.path,
                     err);
            refused(srv, why, msg, msglen);
            return rc;
        }
        snprintf(p, sizeof p, "%s", g_next.index_path);
    } else {
        pthread_mutex_lock(&srv->reload_mu);
        snprintf(p, sizeof p, "%s", path && *path ? path : srv->index);
        pthread_mutex_unlock(&srv->reload_mu);
    }
    pthread_mutex_lock(&srv->reload_mu);
    snprintf(srv->reload_path, sizeof srv->reload_path, "%s", p);
    pthread_mutex_unlock(&srv->reload_mu);
    FT_LOGF(FT_LOG_INFO, "%s: reloading %s%s%s", hup ? "SIGHUP" : "RELOAD", p,
            with_cfg ? " with the settings of " : "",
            with_cfg ? srv->cfg.path : "");
    ft_gen *g = NULL;
    rc = open_index(srv, p, &g, err, sizeof err);
    if (rc != FT_OK) {
        refused(srv, err, msg, msglen);
        return rc;
    }
    pthread_mutex_lock(&srv->reload_mu);
    if (srv->reload_stop) {
        /* SIGTERM won: the server drains what it serves; g is dropped. */
        pthread_mutex_unlock(&srv->reload_mu);
        FT_LOGF(FT_LOG_INFO, "reload: %s opened after the shutdown began; "
                "not swapped in", p);
        ft_gen_unref(g);
        snprintf(msg, msglen, "reload: abandoned: the server is shutting "
                 "down");
        return FT_ESHUTDOWN;
    }
    if (with_cfg) {
        g_old = srv->cfg; /* only this thread writes srv->cfg */
        ft_config_take_reloadable(&srv->cfg, &g_next);
        ft_config_run_hooks(&srv->cfg, &g_old, hooks, srv, err, sizeof err);
    }
    note_overlap(srv, g);
    ft_gen *old = ft_batcher_swap(srv->batcher, g);
    snprintf(srv->index, sizeof srv->index, "%s", p);
    atomic_fetch_add(&srv->reloads, 1);
    if (with_cfg && make_dump(srv, err, sizeof err) != FT_OK)
        FT_LOGF(FT_LOG_ERROR, "reload: %s", err);
    pthread_mutex_unlock(&srv->reload_mu);
    if (with_cfg)
        FT_LOGF(FT_LOG_INFO, "reload: settings of %s applied", srv->cfg.path);
    FT_LOGF(FT_LOG_INFO, "reloaded: now serving generation %llu: %s (%llu keys, %llu "
            "nodes); generation %llu closes after its last request",
            (unsigned long long)g->id, p, (unsigned long long)g->info.keys,
            (unsigned long long)g->info.nodes, (unsigned long long)old->id);
    snprintf(msg, msglen, "reloaded %s: generation %llu, %llu keys", p,
             (unsigned long long)g->id, (unsigned long long)g->info.keys);
    ft_gen_unref(old);
    return FT_OK;
}

static void *reload_main(void *arg)
{
    server *srv = arg;
    pthread_mutex_lock(&srv->reload_mu);
    for (;;) {
        while (!srv->reload_stop && !srv->reload_hup && !srv->reload_req)
            pthread_cond_wait(&srv->reload_cv, &srv->reload_mu);
        if (srv->reload_stop)
            break;
        int hup = srv->reload_hup && srv->reload_req == NULL;
        char path[FT_CONFIG_PATH_MAX] = "";
        if (hup)
            srv->reload_hup = 0;
        else
            snprintf(path, sizeof path, "%s", srv->reload_req->path);
        srv->reload_busy = 1;
        srv->reload_t0 = fti_now_ns();
        snprintf(srv->reload_path, sizeof srv->reload_path, "%s",
                 hup ? "SIGHUP: the config's index" : path);
        pthread_mutex_unlock(&srv->reload_mu);

        notify("RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading\n",
               monotonic_us());
        char msg[FT_CONFIG_PATH_MAX + 2400];
        int rc = do_reload(srv, hup, path, msg, sizeof msg);

        pthread_mutex_lock(&srv->reload_mu);
        srv->reload_busy = 0;
        srv_reload_req *rq = hup ? NULL : srv->reload_req;
        if (!hup)
            srv->reload_req = NULL; /* NULL already when the drain answered */
        int stop = srv->reload_stop;
        pthread_cond_broadcast(&srv->reload_cv);
        pthread_mutex_unlock(&srv->reload_mu);
        if (!stop)
            notify("READY=1\nSTATUS=serving\n");
        if (rq)
            rq->done(rq, rc, msg);
        pthread_mutex_lock(&srv->reload_mu);
    }
    pthread_mutex_unlock(&srv->reload_mu);
    return NULL;
}

int srv_reload_start(server *srv, srv_reload_req *rq, char *errbuf,
                     size_t errlen)
{
    if (srv->cluster) {
        snprintf(errbuf, errlen, "reload: refused: a cluster does not "
                 "reload its index (restart every rank)");
        FT_LOGF(FT_LOG_ERROR, "%s", errbuf);
        atomic_fetch_add(&srv->reload_failures, 1);
        return FT_ENOTSUP;
    }
    pthread_mutex_lock(&srv->reload_mu);
    int rc = FT_OK;
    if (srv->reload_stop || !srv->reload_th_on) {
        snprintf(errbuf, errlen, "reload: refused: the server is shutting "
                 "down");
        rc = FT_ESHUTDOWN;
    } else if (srv->reload_busy || srv->reload_req || srv->reload_hup) {
        snprintf(errbuf, errlen, "reload: one already running (%s, %.1f s "
                 "so far); retry when it ends",
                 srv->reload_busy ? srv->reload_path : "SIGHUP",
                 srv->reload_busy
                     ? (double)(fti_now_ns() - srv->reload_t0) / 1e9 : 0.0);
        rc = FT_EBUSY;
    } else {
        srv->reload_req = rq;
        pthread_cond_broadcast(&srv->reload_cv);
    }
    pthread_mutex_unlock(&srv->reload_mu);
    if (rc != FT_OK)
        FT_LOGF(FT_LOG_WARN, "RELOAD %s: %s", rq->path[0] ? rq->path
                                                        : "(the served index)",
                errbuf);
    return rc;
}

/* reload_stop tells the worker that the server shuts down: nothing starts
 * or swaps from now on, and a RELOAD waiting on the running reload is
 * answered at once, so that the drain does not wait for it.  Returns
 * whether a reload is still running. */
static int reload_stop(server *srv)
{
    pthread_mutex_lock(&srv->reload_mu);
    srv->reload_stop = 1;
    srv_reload_req *rq = srv->reload_req;
    srv->reload_req = NULL;
    int busy = srv->reload_busy;
    pthread_cond_broadcast(&srv->reload_cv);
    pthread_mutex_unlock(&srv->reload_mu);
    if (rq)
        rq->done(rq, FT_ESHUTDOWN, "reload: abandoned: the server is "
                 "shutting down");
    return busy;
}

/* drain stops taking work, waits for every message to be answered and
 * returns the exit status: 0 when all were, 1 when the timeout cut some. */
static int drain(server *srv)
{
    atomic_store(&srv->draining, 1);
    long n0 = atomic_load(&srv->inflight);
    FT_LOGF(FT_LOG_INFO, "draining: no new connections or requests; %ld in flight, up to "
            "%u ms", n0, FT_CONFIG_LIVE(&srv->cfg, drain_timeout_ms));
    uint64_t until = fti_now_ns() + (uint64_t)FT_CONFIG_LIVE(&srv->cfg, drain_timeout_ms) * 1000000u;
    while (atomic_load(&srv->inflight) > 0 && fti_now_ns() < until) {
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    long left = atomic_load(&srv->inflight);
    if (left > 0) {
        /* The requests, not the messages: a batch frame holds many. */
        FT_LOGF(FT_LOG_ERROR, "drain timed out after %u ms: %ld requests cut "
                "unanswered (%ld messages)",
                FT_CONFIG_LIVE(&srv->cfg, drain_timeout_ms),
                atomic_load(&srv->inflight_reqs), left);
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
#define QUIESCE_MS 100
#define CLOSE_LIMIT_MS 1000
static _Atomic(const char *) g_teardown_phase;
static atomic_int g_teardown_done, g_teardown_status;
/* 1 + the watchdog's 10 ms ticks since nng_close began; 0 before. */
static atomic_int g_close_ticks;

static void *teardown_watchdog(void *arg)
{
    (void)arg;
    for (int waited = 0; waited < TEARDOWN_LIMIT_MS; waited += 10) {
        if (atomic_load(&g_teardown_done))
            return NULL;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
        int ticks = atomic_load(&g_close_ticks);
        if (ticks > 0 && ticks++ >= CLOSE_LIMIT_MS / 10) {
            /* nng_close of a quiesced socket takes milliseconds; past
             * that it is nng 1.5's hang (serve_ctx.h): every request
             * was answered, the connections close with the process. */
            if (atomic_load(&g_teardown_done))
                return NULL;
            FT_LOGF(FT_LOG_WARN, "shutdown: nng_close has not returned "
                    "after %d ms (every request was answered); exiting "
                    "without the rest of the teardown", CLOSE_LIMIT_MS);
            fflush(stderr);
            _exit(atomic_load(&g_teardown_status));
        }
        if (ticks > 0)
            atomic_store(&g_close_ticks, ticks);
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

/* The server's CPUs and idle spinners (serve_cpus.h): outside srv, which
 * an early exit frees while the spinners still run. */
static srv_cpus g_cpus;

int cmd_serve(int argc, char **argv)
{
    server *srv = calloc(1, sizeof *srv);
    if (srv == NULL) {
        fprintf(stderr, "flashtrie serve: out of memory\n");
        return 1;
    }
    srv->contexts = 64;
    srv->answer_threads = -1;
    ft_log_set_level(FT_LOG_INFO);
    int st = parse_args(srv, argc, argv);
    if (st >= 0) {
        free(srv->config_dump);
        free(srv);
        return st;
    }

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
        free(srv->config_dump);
        free(srv);
        return 1;
    }

    /* Pinned (cpus) before the engines and nng start their threads, which
     * inherit it; the idle spinners (idle_spin) start here too. */
    {
        char cerr[512];
        if (srv_cpus_start(&g_cpus, srv->cfg.cpus, srv->cfg.idle_spin, cerr,
                           sizeof cerr) != FT_OK) {
            FT_LOGF(FT_LOG_ERROR, "cannot serve: %s", cerr);
            close(sfd);
            free(srv->config_dump);
            free(srv);
            return 1;
        }
    }
    srv->start_ns = fti_now_ns();
    pthread_mutex_init(&srv->reload_mu, NULL);
    pthread_cond_init(&srv->reload_cv, NULL);
    atomic_init(&srv->next_gen, 2);
    /* A served index rewritten in place faults its mapping (SIGBUS): say
     * which file and exit, instead of dying without a word. */
    fti_index_bus_guard(g_log_file ? fileno(g_log_file) : 2);
    char err[512];
    ft_gen *g = NULL;
    if (srv->cfg.cluster_world > 1 && srv->cfg.cluster_rank > 0) {
        /* A worker rank: no listeners, no queue; its shards serve the
         * coordinator. */
        st = srv_cluster_worker(srv, sfd);
        close(sfd);
        free(srv->config_dump);
        free(srv);
        return st;
    }
    /* The metrics listener opens first, before the index: /livez answers
     * while a large index loads (a liveness probe must not restart a
     * server that is starting), /healthz and /readyz say "starting" until
     * the request listeners are open. */
    if (srv->cfg.metrics[0]) {
        if (srv_http_start(srv, srv->cfg.metrics, err, sizeof err) != FT_OK) {
            FT_LOGF(FT_LOG_ERROR, "cannot listen: %s", err);
            close(sfd);
            free(srv->config_dump);
            free(srv);
            return 1;
        }
        FT_LOGF(FT_LOG_INFO, "metrics on %s (/metrics, /healthz, /livez, "
                "/readyz)", srv->cfg.metrics);
    }
    notify("STATUS=opening the index %s\n", srv->index);
    open_delay(srv);
    int rc = srv->cfg.cluster_world > 1
                 ? srv_cluster_gen(srv, sfd, &g, err, sizeof err)
                 : gen_open(&g, srv->index, &srv->slot, 1, err, sizeof err);
    if (rc != FT_OK) {
        FT_LOGF(FT_LOG_ERROR, "cannot serve: %s", err);
        srv_http_stop(srv);
        close(sfd);
        free(srv->config_dump);
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
    if (srv->test_delay_us)
        FT_LOGF(FT_LOG_WARN, "test hook: every batch waits %u us before it runs",
                srv->test_delay_us);
    for (size_t i = 0; i < FT_SLOT_MAX_REPLICAS; i++) {
        if (srv->test_fault[i] == 0)
            continue;
        if (i >= g->n_eng) {
            FT_LOGF(FT_LOG_ERROR, "cannot serve: --test-fault: replica %zu: "
                    "there are %zu replicas", i, g->n_eng);
            ft_gen_unref(g);
            srv_http_stop(srv);
            close(sfd);
            free(srv);
            return 1;
        }
        ft_searcher_fault_arm(g->eng[i], srv->test_fault[i] - 1);
        FT_LOGF(FT_LOG_WARN, "test hook: replica %zu fails from its engine "
                "call %llu on (injected fault)", i,
                (unsigned long long)srv->test_fault[i]);
    }
    note_overlap(srv, g);
    {
        int door = srv_wire_door(srv);
        FT_LOGF(FT_LOG_INFO, "duplicate tokens: checked %s (dup_check = %s)",
                door == FT_DOOR_EARLY
                    ? "on the engine's thread, beside its work"
                    : "by the decoder, before the queue",
                srv->cfg.dup_check == FT_CONFIG_DUP_AUTO     ? "auto"
                : srv->cfg.dup_check == FT_CONFIG_DUP_ENGINE ? "engine"
                                                              : "door");
    }
    if (ft_queue_init(&srv->queue, srv->cfg.queue_depth) != FT_OK ||
        ft_batcher_start(&srv->batcher, &srv->queue, g, batch_cap(&srv->cfg),
                         srv->cfg.max_wait_us, srv->test_delay_us) != FT_OK) {
        FT_LOGF(FT_LOG_ERROR, "cannot serve: out of memory for the queue or the batcher");
        ft_gen_unref(g);
        srv_http_stop(srv);
        close(sfd);
        free(srv);
        return 1;
    }
    {
        uint32_t na = answer_threads(srv, g);
        if (ft_batcher_answer_threads(srv->batcher, na) != FT_OK)
            FT_LOGF(FT_LOG_WARN, "cannot start %u answer threads: the workers "
                    "answer every request themselves", na);
        else if (na > 0)
            FT_LOGF(FT_LOG_INFO, "%u answer threads share each batch's "
                    "replies with the workers", na);
    }
    ft_queue_set_lanes(&srv->queue, srv->cfg.heavy_batch, FT_QUEUE_HEAVY_EVERY);
    ft_queue_set_heavy_limit(&srv->queue, heavy_limit(&srv->cfg, g->n_eng));
    /* From here on the HTTP handlers may read the queue and the batcher. */
    srv_http_loaded(srv);
    st = 0;
    if (pthread_create(&srv->reload_th, NULL, reload_main, srv) == 0) {
        srv->reload_th_on = 1;
    } else {
        FT_LOGF(FT_LOG_ERROR, "cannot serve: cannot start the reload thread");
        st = 1;
    }
    for (size_t i = 0; st == 0 && i < srv->cfg.n_listeners; i++) {
        srv_socket *s = &srv->socks[srv->n_socks++];
        s->srv = srv;
        s->lo = srv->cfg.listeners[i];
        if (srv_socket_start(s, err, sizeof err) != FT_OK) {
            FT_LOGF(FT_LOG_ERROR, "cannot listen: %s", err);
            st = 1;
            break;
        }
        FT_LOGF(FT_LOG_INFO, "listening on %s%s (%u contexts, messages up to %llu bytes)",
                s->lo.url, s->lo.admin ? " (admin)" : "", srv->contexts,
                (unsigned long long)srv->cfg.max_message_bytes);
    }
    if (st == 0 && srv_conn_start(srv, err, sizeof err) != FT_OK) {
        FT_LOGF(FT_LOG_ERROR, "cannot serve: %s", err);
        st = 1;
    }
    if (st == 0)
        srv_http_ready(srv);
    int reload_running = 0;
    if (st == 0) {
        /* A cluster refuses reloads (do_reload): its SIGHUP reopens the
         * log file at most. */
        const char *hup = !srv->cluster ? "reloads"
                          : srv->cfg.log_file[0]
                              ? "reopens the log file only (a cluster does "
                                "not reload)"
                              : "is refused (a cluster does not reload)";
        FT_LOGF(FT_LOG_INFO, "flashtrie %s serving (pid %ld); SIGHUP %s, "
                "SIGTERM drains", FT_VERSION_STRING, (long)getpid(), hup);
        notify("READY=1\nSTATUS=serving\nMAINPID=%ld\n", (long)getpid());
        for (;;) {
            struct pollfd pfd = {sfd, POLLIN, 0};
            int pr = poll(&pfd, 1, 1000);
            if (pr <= 0)
                continue;
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof si) != (ssize_t)sizeof si)
                continue;
            if (si.ssi_signo == SIGHUP) {
                /* The reload worker reads the config and opens the index:
                 * this thread stays free for SIGTERM. */
                pthread_mutex_lock(&srv->reload_mu);
                int queued = srv->reload_hup, busy = srv->reload_busy;
                char cur[sizeof srv->reload_path];
                snprintf(cur, sizeof cur, "%s", srv->reload_path);
                srv->reload_hup = 1;
                pthread_cond_broadcast(&srv->reload_cv);
                pthread_mutex_unlock(&srv->reload_mu);
                if (queued)
                    FT_LOGF(FT_LOG_INFO, "SIGHUP: a reload already waits; "
                            "this one joins it");
                else if (busy)
                    FT_LOGF(FT_LOG_INFO, "SIGHUP: the reload of %s runs "
                            "still; this one follows it", cur);
                continue;
            }
            FT_LOGF(FT_LOG_INFO, "%s: shutting down", si.ssi_signo == SIGTERM ? "SIGTERM"
                                                                 : "SIGINT");
            break;
        }
        notify("STOPPING=1\nSTATUS=draining\n");
        /* SIGTERM wins over a reload: none starts or swaps from now on,
         * and a RELOAD waiting for one is answered now. */
        reload_stop(srv);
        st = drain(srv);
        if (st != 0) {
            /* Threads still hold requests that will never be answered:
             * leave without tearing down what they use. */
            fflush(stderr);
            _exit(1);
        }
    } else if (srv->reload_th_on) {
        reload_stop(srv);
    }
    if (srv->reload_th_on) {
        pthread_mutex_lock(&srv->reload_mu);
        reload_running = srv->reload_busy;
        char cur[sizeof srv->reload_path];
        snprintf(cur, sizeof cur, "%s", srv->reload_path);
        double secs = (double)(fti_now_ns() - srv->reload_t0) / 1e9;
        pthread_mutex_unlock(&srv->reload_mu);
        if (reload_running) {
            /* It may never return (a file on a hung mount): every request
             * is answered and it swaps nothing in any more, so leave it. */
            FT_LOGF(FT_LOG_WARN, "shutdown: the reload of %s still runs "
                    "(%.1f s); exiting without waiting for it", cur, secs);
            FT_LOGF(FT_LOG_INFO, "stopped");
            fflush(stderr);
            _exit(st);
        }
        pthread_join(srv->reload_th, NULL);
    }
    pthread_t wd;
    atomic_store(&g_teardown_status, st);
    int wd_on = pthread_create(&wd, NULL, teardown_watchdog, NULL) == 0;
    /* The HTTP handlers read the queue and the batcher: stop them first. */
    teardown_phase("stopping the HTTP server");
    srv_http_stop(srv);
    teardown_phase("stopping the connections' thread");
    srv_conn_stop(srv);
    teardown_phase("stopping the batcher");
    ft_queue_close(&srv->queue);
    ft_batcher_stop(srv->batcher);
    /* Quiesce before closing (serve_ctx.h): no context receives any
     * more, then a moment for the reads and writes under way to end, so
     * that nng_close does not close a connection in the middle of one
     * (with 64 clients sending, every shutdown hung there 5 s). */
    teardown_phase("stopping the nng contexts");
    for (size_t i = 0; i < srv->n_socks; i++)
        srv_socket_quiesce(&srv->socks[i]);
    if (srv->n_socks > 0) {
        struct timespec ts = {0, QUIESCE_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
    teardown_phase("closing the nng sockets (nng_close)");
    atomic_store(&g_close_ticks, 1);
    for (size_t i = 0; i < srv->n_socks; i++)
        srv_socket_close(&srv->socks[i]);
    srv_heavy_decoder_stop();
    srv_conn_free(srv);
    ft_queue_destroy(&srv->queue);
    close(sfd);
    atomic_store(&g_teardown_done, 1);
    if (wd_on)
        pthread_join(wd, NULL);
    srv_cpus_stop(&g_cpus);
    FT_LOGF(FT_LOG_INFO, "stopped");
    pthread_mutex_lock(&g_dump_mu);
    free(srv->config_dump);
    srv->config_dump = NULL;
    pthread_mutex_unlock(&g_dump_mu);
    free(srv);
    return st;
}
