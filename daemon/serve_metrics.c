/* serve_metrics.c - /metrics, /healthz, /livez and /readyz over nng's HTTP server
 * (serve_metrics.h). */
#include "serve_metrics.h"

#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <nng/supplemental/http/http.h>

#include "serve_conn.h"
#include "serve_info.h"
#include "serve_stages.h"

/* The le bounds of flashtrie_request_duration_seconds are bounds of the
 * latency table INFO reads its percentiles from (bucket i ends at
 * 2^((i+1)/4) us), so the cumulative counts are exact, not re-binned:
 * every second bound from 2^(23/4) us = 53.8 us to 2^(93/4) us = 9.98 s,
 * 36 buckets a factor sqrt(2) apart. */
#define LAT_FIRST_BOUND 23 /* bucket index + 1 of the first le */
#define LAT_LAST_BOUND 93
#define LAT_STEP 2

/* status_label names an ft_err in flashtrie_requests_total's status
 * label; the common ones are INFO's status.* keys. */
static const char *status_label(int s)
{
    static const char *const names[] = {
        [FT_OK] = "ok",             [FT_ENOMEM] = "nomem",
        [FT_EINVAL] = "invalid",    [FT_EIO] = "io",
        [FT_EPARSE] = "parse",      [FT_EFORMAT] = "format",
        [FT_ECHECKSUM] = "checksum", [FT_EVERSION] = "version",
        [FT_ETRUNC] = "truncated",  [FT_ELIMIT] = "limit",
        [FT_ENOTFOUND] = "notfound", [FT_EREQUEST] = "rejected",
        [FT_ENODEV] = "nodev",      [FT_ECUDA] = "cuda",
        [FT_ENCCL] = "nccl",        [FT_ENOTSUP] = "notsup",
        [FT_EBUSY] = "busy",        [FT_EINTERNAL] = "internal",
        [FT_ESTATE] = "state",      [FT_EPROTO] = "protocol",
        [FT_EDEADLINE] = "deadline", [FT_ETIMEDOUT] = "timedout",
        [FT_ECONN] = "conn",        [FT_EPERM] = "denied",
        [FT_ECONFIG] = "config",    [FT_ESHUTDOWN] = "shutdown",
        [FT_EMANIFEST] = "manifest",
    };
    if (s >= 0 && (size_t)s < sizeof names / sizeof names[0] && names[s])
        return names[s];
    return NULL;
}

/* always_shown: the statuses whose series exist from the first scrape on
 * (at 0), so that rate() and alerts see them before the first one
 * happens; any other status appears once it is counted. */
static int always_shown(int s)
{
    return s == FT_OK || s == FT_EREQUEST || s == FT_EBUSY ||
           s == FT_EDEADLINE || s == FT_EPROTO || s == FT_ESHUTDOWN ||
           s == FT_EPERM || s == FT_ECUDA || s == FT_EINTERNAL;
}

/* active counts the handlers running now and stopping turns new ones
 * away, so that srv_http_stop can wait until no handler reads the server
 * any more (nng's stop closes the connections but does not say that the
 * callbacks already running have returned). */
struct srv_http {
    server *srv;
    nng_http_server *hs;
    nng_url *url;
    int started;
    atomic_int active;
    atomic_int stopping;
    atomic_int loaded; /* the index is open, the queue and batcher run */
    atomic_int ready;  /* the request listeners are open */
};

static void srv_metrics_conn_take(server *srv, srv_metrics_snap *s);

void srv_metrics_take(server *srv, srv_metrics_snap *s)
{
    memset(s, 0, sizeof *s);
    s->version = FT_VERSION_STRING;
    s->uptime_s = (double)(fti_now_ns() - srv->start_ns) / 1e9;
    s->draining = atomic_load(&srv->draining);
    s->starting = srv->http != NULL && !atomic_load(&srv->http->ready);
    s->loading = srv->http != NULL && !atomic_load(&srv->http->loaded);
    s->cluster_world = srv->cfg.cluster_world;
    s->in_flight = atomic_load(&srv->inflight);
    s->connections_opened = atomic_load(&srv->pipes_added);
    s->connections_closed = atomic_load(&srv->pipes_removed);
    s->messages_json = atomic_load(&srv->json_messages);
    s->messages_frame = atomic_load(&srv->frame_messages);
    if (s->loading)
        return; /* no queue, batcher or generation yet */
    /* The sum first, then the buckets, then the statuses: srv_count adds
     * the status first, so a scrape racing a request never shows a
     * histogram count above the status total by more than the requests
     * in between. */
    s->latency_ns_sum = atomic_load(&srv->latency_ns_sum);
    for (size_t b = 0; b < SRV_HIST_BUCKETS; b++)
        s->hist[b] = atomic_load(&srv->hist[b]);
    for (size_t i = 0; i < SRV_ERR_COUNT; i++)
        s->status[i] = atomic_load(&srv->status[i]);
    size_t capacity; /* queue_depth: a config gauge, from the table */
    ft_queue_stats(&srv->queue, &s->queue_depth, &capacity,
                   &s->busy_rejections, &s->queued_total,
                   &s->queue_high_water);
    ft_queue_lane_stats(&srv->queue, &s->queue_heavy_depth, NULL,
                        &s->heavy_batches, &s->light_ahead);
    for (int i = 0; i < FT_CONFIG_NSETTINGS; i++)
        if (ft_config_rows[i].gauge)
            s->conf[i] = ft_config_number(&ft_config_rows[i], &srv->cfg);
    (void)capacity;
    ft_batcher_stats bs;
    ft_batcher_stats_get(srv->batcher, &bs);
    s->batches = bs.batches;
    s->batch_requests = bs.requests;
    s->engine_failed_requests = bs.engine_fail;
    s->failovers = bs.failovers;
    memcpy(s->batch_sizes, bs.sizes, sizeof s->batch_sizes);
    s->reloads = atomic_load(&srv->reloads);
    s->reload_failures = atomic_load(&srv->reload_failures);
    ft_gen *g = ft_batcher_current(srv->batcher);
    s->generation = g->id;
    s->index_keys = g->info.keys;
    s->index_nodes = g->info.nodes;
    s->index_bytes = g->info.file_bytes;
    s->shards = g->shards;
    s->n_eng = g->n_eng;
    if (srv->cluster) {
        ft_cluster_down(srv->cluster, s->cluster_down, sizeof s->cluster_down);
        s->cl_ranks = ft_cluster_world(srv->cluster);
        char why[240];
        for (uint32_t r = 0; r < s->cl_ranks; r++)
            s->cl_rank[r].up = ft_cluster_rank_state(
                srv->cluster, r, &s->cl_rank[r].first, &s->cl_rank[r].count,
                why, sizeof why);
    }
    for (size_t i = 0; i < g->n_eng && i < FT_SLOT_MAX_REPLICAS; i++) {
        srv_metrics_engine *e = &s->eng[i];
        /* The kind names are static strings, so they outlive g. */
        e->kind = ft_gen_kind_name(g, i);
        e->device = g->device[i];
        const char *why;
        e->up = !ft_gen_replica_failed(g, i, &why) &&
                !ft_searcher_failed(g->eng[i]);
        snprintf(e->why, sizeof e->why, "%s", why);
        e->batches = i < bs.replicas ? bs.runs[i] : 0;
        e->busy_ns = i < bs.replicas ? bs.busy_ns[i] : 0;
        /* Each GPU once, with the device's own view of its memory. */
        size_t k = 0;
        while (k < s->n_gpu && s->gpu[k].device != e->device)
            k++;
        if (e->device >= 0 && k == s->n_gpu &&
            fti_gpu_memory(&s->gpu[k].used, &s->gpu[k].total, e->device) ==
                FT_OK) {
            s->gpu[k].device = e->device;
            s->n_gpu++;
        }
    }
    ft_gen_unref(g);
    srv_metrics_conn_take(srv, s);
    srv_metrics_process_take(&s->proc);
}

/* ---- connections and the process (issues 38, 39): kept apart ---- */

static void srv_metrics_conn_take(server *srv, srv_metrics_snap *s)
{
    s->n_listeners = srv->n_socks;
    for (size_t i = 0; i < srv->n_socks; i++) {
        srv_metrics_listener *l = &s->listener[i];
        snprintf(l->url, sizeof l->url, "%s", srv->socks[i].lo.url);
        l->up = !atomic_load(&srv->socks[i].down);
        l->restarts = atomic_load(&srv->socks[i].restarts);
        l->conns = atomic_load(&srv->socks[i].conns);
    }
    s->connections_refused = atomic_load(&srv->conn_refused);
    s->connections_idle_closed = atomic_load(&srv->conn_idle_closed);
    s->memory_held = atomic_load(&srv->budget_used);
    s->memory_busy = atomic_load(&srv->budget_refused);
    uint64_t raised;
    srv_conn_rx_stats(srv, &s->receive_limit, &s->receive_reserved,
                      &s->receive_lowered, &raised);
    if (srv_listeners_ok(srv, s->listener_down, sizeof s->listener_down))
        s->listener_down[0] = 0;
}

void srv_metrics_process_take(srv_metrics_process *p)
{
    memset(p, 0, sizeof *p);
    char buf[2048];
    FILE *f = fopen("/proc/self/stat", "r");
    if (f == NULL)
        return;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    /* The command name (field 2) may hold blanks and parentheses: the
     * fields are counted from the last ')'. */
    char *q = strrchr(buf, ')');
    if (q == NULL)
        return;
    unsigned long long utime = 0, stime = 0, start = 0, vsize = 0;
    long long rss = 0;
    /* field 3 is the state; utime 14, stime 15, starttime 22, vsize 23,
     * rss 24 (pages) */
    if (sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu "
               "%*d %*d %*d %*d %*d %*d %llu %llu %lld", &utime, &stime,
               &start, &vsize, &rss) != 5)
        return;
    double tick = (double)sysconf(_SC_CLK_TCK);
    long page = sysconf(_SC_PAGESIZE);
    if (tick <= 0 || page <= 0)
        return;
    p->cpu_seconds = (double)(utime + stime) / tick;
    p->virtual_bytes = vsize;
    p->resident_bytes = rss > 0 ? (uint64_t)rss * (uint64_t)page : 0;
    unsigned long long btime = 0;
    if ((f = fopen("/proc/stat", "r")) != NULL) {
        char line[256];
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "btime %llu", &btime) == 1)
                break;
        fclose(f);
    }
    p->start_time_seconds = (double)btime + (double)start / tick;
    DIR *d = opendir("/proc/self/fd");
    if (d != NULL) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL)
            if (e->d_name[0] != '.')
                p->open_fds++;
        closedir(d);
        p->open_fds--; /* the directory stream's own */
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        p->max_fds = rl.rlim_cur == RLIM_INFINITY ? 0 : (uint64_t)rl.rlim_cur;
    p->ok = 1;
}

/* ---- rendering ---- */

/* out is the text being written; rc keeps the first failure, so the
 * writers below need no checks of their own. */
typedef struct render {
    ft_buf *out;
    int rc;
} render;

static void put(render *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void put(render *r, const char *fmt, ...)
{
    if (r->rc != FT_OK)
        return;
    va_list ap;
    va_start(ap, fmt);
    if (ft_buf_vprintf(r->out, fmt, ap) != FT_OK)
        r->rc = FT_ENOMEM;
    va_end(ap);
}

/* family writes the # HELP and # TYPE lines (help texts hold no
 * backslash or newline, which the format would need escaped). */
static void family(render *r, const char *name, const char *type,
                   const char *help)
{
    put(r, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* put_label_value writes v between quotes with the format's escapes
 * (backslash, double quote, newline). */
static void put_label_value(render *r, const char *v)
{
    put(r, "\"");
    for (const char *p = v; *p; p++) {
        if (*p == '\\')
            put(r, "\\\\");
        else if (*p == '"')
            put(r, "\\\"");
        else if (*p == '\n')
            put(r, "\\n");
        else
            put(r, "%c", *p);
    }
    put(r, "\"");
}

static void u64_sample(render *r, const char *name, uint64_t v)
{
    put(r, "%s %llu\n", name, (unsigned long long)v);
}

/* u64_family writes a family of one sample without labels: its HELP and
 * TYPE lines, then "name v". */
static void u64_family(render *r, const char *name, const char *type,
                       const char *help, uint64_t v)
{
    family(r, name, type, help);
    u64_sample(r, name, v);
}

/* u64_row is one family of one sample without labels, with its value. */
typedef struct u64_row {
    const char *name, *type, *help;
    uint64_t v;
} u64_row;

/* u64_families writes the families of rows[0..n) in order (u64_family). */
static void u64_families(render *r, const u64_row *rows, size_t n)
{
    for (size_t i = 0; i < n; i++)
        u64_family(r, rows[i].name, rows[i].type, rows[i].help, rows[i].v);
}

#define U64_FAMILIES(r, rows)                                                 \
    u64_families((r), (rows), sizeof(rows) / sizeof((rows)[0]))

/* label_sample writes name{label="value"} v; value needs no escapes. */
static void label_sample(render *r, const char *name, const char *label,
                         const char *value, uint64_t v)
{
    put(r, "%s{%s=\"%s\"} %llu\n", name, label, value, (unsigned long long)v);
}

/* listener_sample writes name{listener="URL"} v. */
static void listener_sample(render *r, const char *name, const char *url,
                            unsigned v)
{
    put(r, "%s{listener=", name);
    put_label_value(r, url);
    put(r, "} %u\n", v);
}

/* engine_series writes name{replica="R",kind="K",device="D"}, the series
 * of engine i, before its value; a CPU engine has an empty device. */
static void engine_series(render *r, const char *name, size_t i,
                          const srv_metrics_engine *e)
{
    char dev[16] = "";
    if (e->device >= 0)
        snprintf(dev, sizeof dev, "%d", e->device);
    put(r, "%s{replica=\"%zu\",kind=", name, i);
    put_label_value(r, e->kind ? e->kind : "");
    put(r, ",device=");
    put_label_value(r, dev);
    put(r, "}");
}

static void render_requests(render *r, const srv_metrics_snap *s)
{
    family(r, "flashtrie_requests_total", "counter",
           "Requests answered, by status (ok, rejected: a request breaking "
           "the rules, busy: queue full, deadline, protocol, shutdown: "
           "draining, denied, ...).");
    for (int i = 0; i < SRV_ERR_COUNT; i++) {
        const char *name = status_label(i);
        char code[24];
        if (!always_shown(i) && s->status[i] == 0)
            continue;
        if (name == NULL) {
            snprintf(code, sizeof code, "error_%d", i);
            name = code;
        }
        label_sample(r, "flashtrie_requests_total", "status", name,
                     s->status[i]);
    }

    /* Requests refused before they were queued (malformed, over a cap,
     * BUSY, draining, denied) are in flashtrie_requests_total only: their
     * instant answers would pull the percentiles down (issue 38). */
    family(r, "flashtrie_request_duration_seconds", "histogram",
           "Time from a message's arrival to its reply, per request queued "
           "for an engine (requests refused before are not in it).");
    uint64_t cum = 0;
    size_t next = 0;
    for (size_t k = LAT_FIRST_BOUND; k <= LAT_LAST_BOUND; k += LAT_STEP) {
        /* The bound 2^(k/4) us ends bucket k-1. */
        for (; next < k; next++)
            cum += s->hist[next];
        put(r, "flashtrie_request_duration_seconds_bucket{le=\"%.6g\"} "
               "%llu\n",
            srv_hist_upper_us(k - 1) / 1e6, (unsigned long long)cum);
    }
    for (; next < SRV_HIST_BUCKETS; next++)
        cum += s->hist[next];
    put(r, "flashtrie_request_duration_seconds_bucket{le=\"+Inf\"} %llu\n",
        (unsigned long long)cum);
    put(r, "flashtrie_request_duration_seconds_sum %.9f\n",
        (double)s->latency_ns_sum / 1e9);
    put(r, "flashtrie_request_duration_seconds_count %llu\n",
        (unsigned long long)cum);

    family(r, "flashtrie_messages_total", "counter",
           "Messages received, by format (json: a JSON request line, "
           "frame: a binary frame).");
    label_sample(r, "flashtrie_messages_total", "format", "json",
                 s->messages_json);
    label_sample(r, "flashtrie_messages_total", "format", "frame",
                 s->messages_frame);
    family(r, "flashtrie_in_flight_messages", "gauge",
           "Messages received and not answered yet.");
    put(r, "flashtrie_in_flight_messages %ld\n", s->in_flight);
}

/* render_config writes the config gauges: one per row of the settings
 * table that names one, in table order, where the first of them
 * (flashtrie_queue_capacity, of queue_depth) has always been. */
static void render_config(render *r, const srv_metrics_snap *s)
{
    for (int i = 0; i < FT_CONFIG_NSETTINGS; i++) {
        const ft_config_row *row = &ft_config_rows[i];
        if (row->gauge == NULL)
            continue;
        u64_family(r, row->gauge, "gauge", row->gauge_help, s->conf[i]);
    }
}

static void render_queue(render *r, const srv_metrics_snap *s)
{
    u64_family(r, "flashtrie_queue_depth", "gauge",
               "Requests waiting in the queue for a batch.",
               s->queue_depth);
    render_config(r, s);
    const u64_row rows[] = {
        {"flashtrie_queue_high_water", "gauge",
         "The most requests ever queued at once.", s->queue_high_water},
        {"flashtrie_queued_requests_total", "counter",
         "Requests ever queued.", s->queued_total},
        {"flashtrie_queue_heavy_depth", "gauge",
         "Requests waiting in the heavy lane (T x K x beam over "
         "light_request_cost).", s->queue_heavy_depth},
        {"flashtrie_heavy_batches_total", "counter",
         "Batches formed from the heavy lane.", s->heavy_batches},
        {"flashtrie_light_ahead_total", "counter",
         "Light batches that went ahead of heavy requests waiting in "
         "the queue.", s->light_ahead},
        {"flashtrie_busy_rejections_total", "counter",
         "Messages refused whole with BUSY because their requests did "
         "not fit in the queue.", s->busy_rejections},
    };
    U64_FAMILIES(r, rows);

    family(r, "flashtrie_batch_size", "histogram",
           "Requests per engine call.");
    uint64_t cum = 0;
    for (size_t b = 0; b + 1 < FT_BATCH_SIZE_BUCKETS; b++) {
        cum += s->batch_sizes[b];
        put(r, "flashtrie_batch_size_bucket{le=\"%zu\"} %llu\n",
            (size_t)1 << b, (unsigned long long)cum);
    }
    cum += s->batch_sizes[FT_BATCH_SIZE_BUCKETS - 1];
    put(r, "flashtrie_batch_size_bucket{le=\"+Inf\"} %llu\n",
        (unsigned long long)cum);
    u64_sample(r, "flashtrie_batch_size_sum", s->batch_requests);
    u64_sample(r, "flashtrie_batch_size_count", s->batches);
}

static void render_gpus(render *r, const srv_metrics_snap *s)
{
    if (s->n_gpu == 0)
        return; /* a family without samples: CPU engines only */
    family(r, "flashtrie_gpu_memory_bytes", "gauge",
           "Memory of each GPU the engines use (the device's view: every "
           "process's allocations), in use and in all.");
    for (size_t i = 0; i < s->n_gpu; i++) {
        put(r, "flashtrie_gpu_memory_bytes{device=\"%d\",state=\"used\"} "
               "%llu\n", s->gpu[i].device,
            (unsigned long long)s->gpu[i].used);
        put(r, "flashtrie_gpu_memory_bytes{device=\"%d\",state=\"total\"} "
               "%llu\n", s->gpu[i].device,
            (unsigned long long)s->gpu[i].total);
    }
}

static void render_engines(render *r, const srv_metrics_snap *s)
{
    render_gpus(r, s);
    family(r, "flashtrie_engine_up", "gauge",
           "1 while the replica's engine serves, 0 once it failed.");
    for (size_t i = 0; i < s->n_eng; i++) {
        engine_series(r, "flashtrie_engine_up", i, &s->eng[i]);
        put(r, " %d\n", s->eng[i].up ? 1 : 0);
    }
    size_t failed = 0;
    for (size_t i = 0; i < s->n_eng; i++)
        failed += !s->eng[i].up;
    const u64_row rows[] = {
        {"flashtrie_engine_failed_replicas", "gauge",
         "Replicas out of service after an engine failure.", failed},
        {"flashtrie_engine_failovers_total", "counter",
         "Batches re-run on a healthy replica after theirs failed.",
         s->failovers},
    };
    U64_FAMILIES(r, rows);
    family(r, "flashtrie_engine_batches_total", "counter",
           "Engine calls (batches) each replica ran.");
    for (size_t i = 0; i < s->n_eng; i++) {
        engine_series(r, "flashtrie_engine_batches_total", i, &s->eng[i]);
        put(r, " %llu\n", (unsigned long long)s->eng[i].batches);
    }
    family(r, "flashtrie_engine_busy_seconds_total", "counter",
           "Time each replica spent running batches.");
    for (size_t i = 0; i < s->n_eng; i++) {
        engine_series(r, "flashtrie_engine_busy_seconds_total", i, &s->eng[i]);
        put(r, " %.9f\n", (double)s->eng[i].busy_ns / 1e9);
    }
    u64_family(r, "flashtrie_engine_failed_requests_total", "counter",
               "Requests answered with an error because their engine failed.",
               s->engine_failed_requests);
}

/* render_cluster writes each rank's state on rank 0 of a cluster: a rank
 * down fails every request, and without it a scrape showed the one
 * replica up (flashtrie_engine_up 1) while /healthz and INFO said down. */
static void render_cluster(render *r, const srv_metrics_snap *s)
{
    if (s->cl_ranks == 0)
        return;
    family(r, "flashtrie_cluster_rank_up", "gauge",
           "1 while the cluster rank serves its shards, 0 while it is down "
           "(every request fails then).");
    for (uint32_t i = 0; i < s->cl_ranks; i++)
        put(r, "flashtrie_cluster_rank_up{rank=\"%u\",shards=\"%u..%u\"} "
            "%d\n", i, s->cl_rank[i].first,
            s->cl_rank[i].first + s->cl_rank[i].count - 1,
            s->cl_rank[i].up ? 1 : 0);
}

static void render_index(render *r, const srv_metrics_snap *s)
{
    const u64_row rows[] = {
        {"flashtrie_index_keys", "gauge", "Keys of the served index.",
         s->index_keys},
        {"flashtrie_index_nodes", "gauge", "Trie nodes of the served index.",
         s->index_nodes},
        {"flashtrie_index_bytes", "gauge",
         "Bytes of the served index file (all shards).", s->index_bytes},
        {"flashtrie_index_shards", "gauge",
         "Shards of the served library (1 for a plain index).", s->shards},
        {"flashtrie_index_generation", "gauge",
         "Id of the served index generation: 1 at start; every index "
         "a reload opens takes the next id, a refused one included.",
         s->generation},
    };
    U64_FAMILIES(r, rows);
    family(r, "flashtrie_reloads_total", "counter",
           "Index reloads (SIGHUP or RELOAD), by result.");
    label_sample(r, "flashtrie_reloads_total", "result", "ok", s->reloads);
    label_sample(r, "flashtrie_reloads_total", "result", "failed",
                 s->reload_failures);
}

static void render_server(render *r, const srv_metrics_snap *s)
{
    family(r, "flashtrie_build_info", "gauge",
           "Always 1; the version is in the label.");
    put(r, "flashtrie_build_info{version=");
    put_label_value(r, s->version ? s->version : "");
    put(r, "} 1\n");
    family(r, "flashtrie_uptime_seconds", "gauge",
           "Seconds since the server started.");
    put(r, "flashtrie_uptime_seconds %.3f\n", s->uptime_s);
    family(r, "flashtrie_draining", "gauge",
           "1 once SIGTERM or SIGINT started the drain.");
    put(r, "flashtrie_draining %d\n", s->draining ? 1 : 0);
    uint64_t open = s->connections_opened >= s->connections_closed
                        ? s->connections_opened - s->connections_closed
                        : 0;
    const u64_row rows[] = {
        {"flashtrie_connections", "gauge",
         "Client connections open now (all listeners).", open},
        {"flashtrie_connections_opened_total", "counter",
         "Client connections ever accepted.", s->connections_opened},
    };
    U64_FAMILIES(r, rows);
}

/* render_conn: the listeners' connections and probes (serve_conn.c). */
static void render_conn(render *r, const srv_metrics_snap *s)
{
    const u64_row rows[] = {
        {"flashtrie_connections_refused_total", "counter",
         "Connections closed at once because their listener held "
         "max_connections already.", s->connections_refused},
        {"flashtrie_connections_idle_closed_total", "counter",
         "Connections closed after idle_timeout_ms without completing a "
         "message (idle, or stuck in half a message).",
         s->connections_idle_closed},
        {"flashtrie_memory_held_bytes", "gauge",
         "Bytes the received messages and their answers hold now, receipt "
         "to reply, with what the connections may be reading "
         "(memory_budget_bytes bounds it).", s->memory_held},
        {"flashtrie_memory_busy_total", "counter",
         "Messages answered BUSY because the memory budget or "
         "max_heavy_messages had no room.", s->memory_busy},
        {"flashtrie_receive_limit_bytes", "gauge",
         "Largest message the listeners let nng read now: "
         "max_message_bytes, lowered while the connections could read "
         "more than half the memory budget between them.", s->receive_limit},
        {"flashtrie_receive_reserved_bytes", "gauge",
         "Bytes the connections may be reading now under the receive "
         "limit (counted as held).", s->receive_reserved},
        {"flashtrie_receive_limit_lowered_total", "counter",
         "Times the receive limit came down for more connections.",
         s->receive_lowered},
    };
    U64_FAMILIES(r, rows);
    if (s->n_listeners == 0)
        return;
    family(r, "flashtrie_listener_connections", "gauge",
           "Client connections open now, per listener.");
    for (size_t i = 0; i < s->n_listeners; i++)
        listener_sample(r, "flashtrie_listener_connections", s->listener[i].url,
                        s->listener[i].conns);
    family(r, "flashtrie_listener_up", "gauge",
           "1 while the listener answers the server's own PING "
           "(probe_interval_ms), 0 once it does not.");
    for (size_t i = 0; i < s->n_listeners; i++)
        listener_sample(r, "flashtrie_listener_up", s->listener[i].url,
                        s->listener[i].up ? 1u : 0u);
    family(r, "flashtrie_listener_restarts_total", "counter",
           "Times the listener was closed and opened again after "
           "probe_restart_after failed probes in a row.");
    for (size_t i = 0; i < s->n_listeners; i++)
        listener_sample(r, "flashtrie_listener_restarts_total", s->listener[i].url,
                        s->listener[i].restarts);
}

/* render_process: the process_* families of the Prometheus client
 * libraries, same names, types and units. */
static void render_process(render *r, const srv_metrics_snap *s)
{
    const srv_metrics_process *p = &s->proc;
    if (!p->ok)
        return;
    family(r, "process_cpu_seconds_total", "counter",
           "Total user and system CPU time spent in seconds.");
    put(r, "process_cpu_seconds_total %.2f\n", p->cpu_seconds);
    u64_family(r, "process_open_fds", "gauge",
               "Number of open file descriptors.",
               p->open_fds);
    if (p->max_fds)
        u64_family(r, "process_max_fds", "gauge",
                   "Maximum number of open file descriptors.", p->max_fds);
    const u64_row rows[] = {
        {"process_virtual_memory_bytes", "gauge",
         "Virtual memory size in bytes.", p->virtual_bytes},
        {"process_resident_memory_bytes", "gauge",
         "Resident memory size in bytes.", p->resident_bytes},
    };
    U64_FAMILIES(r, rows);
    family(r, "process_start_time_seconds", "gauge",
           "Start time of the process since unix epoch in seconds.");
    put(r, "process_start_time_seconds %.2f\n", p->start_time_seconds);
}

int srv_metrics_render(const srv_metrics_snap *s, ft_buf *out)
{
    render r = {out, FT_OK};
    render_requests(&r, s);
    render_queue(&r, s);
    render_engines(&r, s);
    render_cluster(&r, s);
    render_index(&r, s);
    render_server(&r, s);
    render_conn(&r, s);
    render_process(&r, s);
    return r.rc;
}

/* describe_failed writes "engine I (KIND[ device D]) failed[: why]" for
 * the first failed replica; returns how many failed. */
static size_t describe_failed(const srv_metrics_snap *s, char *out,
                              size_t len)
{
    size_t failed = 0;
    for (size_t i = 0; i < s->n_eng; i++) {
        const srv_metrics_engine *e = &s->eng[i];
        if (e->up || failed++ > 0)
            continue;
        char dev[24] = "";
        if (e->device >= 0)
            snprintf(dev, sizeof dev, " device %d", e->device);
        snprintf(out, len, "engine %zu (%s%s) failed%s%s", i, e->kind, dev,
                 e->why[0] ? ": " : "", e->why);
    }
    return failed;
}

/* loading_reason says why a server is starting before its index is open:
 * rank 0 of a cluster waits there for the other ranks too (up to
 * cluster.join_timeout_ms), which "opening the index" alone hid: an
 * operator looked at the disk, not at the ranks. */
static void loading_reason(uint32_t world, char *out, size_t len)
{
    if (world > 1)
        snprintf(out, len, "starting: opening the index and waiting for the "
                 "cluster's other ranks to join (world %u)", world);
    else
        snprintf(out, len, "starting: opening the index");
}

int srv_metrics_health(const srv_metrics_snap *s, char *reason,
                       size_t reasonlen)
{
    if (s->loading) {
        loading_reason(s->cluster_world, reason, reasonlen);
        return 503;
    }
    /* A cluster with a rank down answers no request at all. */
    if (s->cluster_down[0]) {
        snprintf(reason, reasonlen, "cluster: %s", s->cluster_down);
        return 503;
    }
    if (s->n_eng == 0) {
        snprintf(reason, reasonlen, "no engine serves");
        return 503;
    }
    char first[224] = "";
    size_t failed = describe_failed(s, first, sizeof first);
    /* A listener that does not answer its probe (the nng 1.5.2 ipc wedge)
     * leaves its clients unanswered while the rest looks fine. */
    if (failed < s->n_eng && !s->starting && !s->draining &&
        s->listener_down[0]) {
        snprintf(reason, reasonlen, "%s", s->listener_down);
        return 503;
    }
    if (failed == s->n_eng) {
        snprintf(reason, reasonlen, "no healthy replica (%zu of %zu failed): "
                 "%s", failed, s->n_eng, first);
        return 503;
    }
    if (s->starting) {
        snprintf(reason, reasonlen, "starting: the listeners are not open yet");
        return 503;
    }
    if (s->draining) {
        snprintf(reason, reasonlen, "draining: shutting down");
        return 503;
    }
    if (failed > 0) {
        snprintf(reason, reasonlen, "degraded: %zu of %zu replica%s failed: "
                 "%s", failed, s->n_eng, s->n_eng == 1 ? "" : "s", first);
        return 200;
    }
    snprintf(reason, reasonlen, "ok");
    return 200;
}

int srv_metrics_ready(const srv_metrics_snap *s, char *reason,
                      size_t reasonlen)
{
    char why[256];
    int st = srv_metrics_health(s, why, sizeof why);
    if (st != 200)
        snprintf(reason, reasonlen, "not ready: %s", why);
    else if (strcmp(why, "ok") != 0)
        snprintf(reason, reasonlen, "ready: %s", why);
    else
        snprintf(reason, reasonlen, "ready");
    return st;
}

/* ---- the HTTP listener ---- */


/* reply completes the handler's aio with a text/plain response of body;
 * on an allocation failure the aio fails and nng closes the connection. */
static void reply(nng_aio *aio, uint16_t status, const char *ctype,
                  const void *body, size_t len)
{
    nng_http_res *res = NULL;
    int rv = nng_http_res_alloc(&res);
    if (rv == 0)
        rv = nng_http_res_set_status(res, status);
    if (rv == 0)
        rv = nng_http_res_set_header(res, "Content-Type", ctype);
    if (rv == 0)
        rv = nng_http_res_copy_data(res, body, len);
    if (rv != 0) {
        FT_LOGF(FT_LOG_WARN, "metrics: cannot answer: %s", nng_strerror(rv));
        if (res)
            nng_http_res_free(res);
        nng_aio_finish(aio, rv);
        return;
    }
    nng_aio_set_output(aio, 0, res);
    nng_aio_finish(aio, 0);
}

/* handler_enter returns the listener of the request, or NULL (after
 * answering 503) when the listener is being stopped. */
static srv_http *handler_enter(nng_aio *aio)
{
    nng_http_handler *hd = nng_aio_get_input(aio, 1);
    srv_http *h = nng_http_handler_get_data(hd);
    atomic_fetch_add(&h->active, 1);
    if (atomic_load(&h->stopping)) {
        atomic_fetch_sub(&h->active, 1);
        reply(aio, 503, "text/plain; charset=utf-8", "stopping\n", 9);
        return NULL;
    }
    return h;
}

static void on_metrics(nng_aio *aio)
{
    srv_http *h = handler_enter(aio);
    if (h == NULL)
        return;
    server *srv = h->srv;
    if (!atomic_load(&h->loaded)) {
        char m[160];
        loading_reason(srv->cfg.cluster_world, m, sizeof m - 1);
        strcat(m, "\n");
        reply(aio, 503, "text/plain; charset=utf-8", m, strlen(m));
        atomic_fetch_sub(&h->active, 1);
        return;
    }
    srv_metrics_snap *s = malloc(sizeof *s);
    ft_buf out;
    ft_buf_init(&out);
    int rc = FT_ENOMEM;
    if (s != NULL) {
        srv_metrics_take(srv, s);
        rc = srv_metrics_render(s, &out);
        if (rc == FT_OK) /* the stages' families (serve_stages.c) */
            rc = srv_stages_render(srv, &out);
    }
    free(s);
    if (rc == FT_OK)
        reply(aio, 200, "text/plain; version=0.0.4; charset=utf-8", out.data,
              out.len);
    else
        reply(aio, 500, "text/plain; charset=utf-8", "out of memory\n", 14);
    ft_buf_free(&out);
    atomic_fetch_sub(&h->active, 1);
}

/* answer_health answers a probe from a fresh snapshot: which() gives the
 * status and the one-line reason. */
static void answer_health(nng_aio *aio,
                          int (*which)(const srv_metrics_snap *, char *,
                                       size_t))
{
    srv_http *h = handler_enter(aio);
    if (h == NULL)
        return;
    server *srv = h->srv;
    srv_metrics_snap *s = malloc(sizeof *s);
    if (s == NULL) {
        reply(aio, 500, "text/plain; charset=utf-8", "out of memory\n", 14);
        atomic_fetch_sub(&h->active, 1);
        return;
    }
    srv_metrics_take(srv, s);
    char reason[300];
    int st = which(s, reason, sizeof reason - 1);
    free(s);
    size_t n = strlen(reason);
    reason[n++] = '\n';
    reply(aio, (uint16_t)st, "text/plain; charset=utf-8", reason, n);
    atomic_fetch_sub(&h->active, 1);
}

static void on_healthz(nng_aio *aio) { answer_health(aio, srv_metrics_health); }
static void on_readyz(nng_aio *aio) { answer_health(aio, srv_metrics_ready); }

/* on_livez: the process runs and its HTTP thread answers, whatever the
 * index, the engines or a drain are doing: what a liveness probe wants. */
static void on_livez(nng_aio *aio)
{
    srv_http *h = handler_enter(aio);
    if (h == NULL)
        return;
    reply(aio, 200, "text/plain; charset=utf-8", "alive\n", 6);
    atomic_fetch_sub(&h->active, 1);
}

static int add_handler(srv_http *h, const char *path, void (*cb)(nng_aio *))
{
    nng_http_handler *hd;
    int rv = nng_http_handler_alloc(&hd, path, cb);
    if (rv != 0)
        return rv;
    if ((rv = nng_http_handler_set_data(hd, h, NULL)) != 0 ||
        (rv = nng_http_server_add_handler(h->hs, hd)) != 0) {
        nng_http_handler_free(hd);
        return rv;
    }
    return 0;
}

int srv_http_start(server *srv, const char *url, char *errbuf, size_t errlen)
{
    srv_http *h = calloc(1, sizeof *h);
    if (h == NULL) {
        snprintf(errbuf, errlen, "metrics %s: out of memory", url);
        return FT_ENOMEM;
    }
    h->srv = srv;
    atomic_init(&h->active, 0);
    atomic_init(&h->stopping, 0);
    atomic_init(&h->loaded, 0);
    atomic_init(&h->ready, 0);
    const char *what = "parsing the URL";
    int rv = nng_url_parse(&h->url, url);
    if (rv == 0) {
        what = "creating the HTTP server";
        rv = nng_http_server_hold(&h->hs, h->url);
    }
    if (rv == 0) {
        what = "adding the handlers";
        rv = add_handler(h, "/metrics", on_metrics);
        if (rv == 0)
            rv = add_handler(h, "/healthz", on_healthz);
        if (rv == 0)
            rv = add_handler(h, "/livez", on_livez);
        if (rv == 0)
            rv = add_handler(h, "/readyz", on_readyz);
    }
    if (rv == 0) {
        /* Set before the first request can arrive: /healthz reads its
         * ready flag. */
        srv->http = h;
        what = "listening";
        rv = nng_http_server_start(h->hs);
    }
    if (rv != 0) {
        srv->http = NULL;
        snprintf(errbuf, errlen, "metrics %s: %s failed: %s", url, what,
                 nng_strerror(rv));
        if (h->hs)
            nng_http_server_release(h->hs);
        if (h->url)
            nng_url_free(h->url);
        free(h);
        return FT_EIO;
    }
    h->started = 1;
    return FT_OK;
}

void srv_http_loaded(server *srv)
{
    if (srv->http)
        atomic_store(&srv->http->loaded, 1);
}

void srv_http_ready(server *srv)
{
    if (srv->http)
        atomic_store(&srv->http->ready, 1);
}

void srv_http_stop(server *srv)
{
    srv_http *h = srv->http;
    if (h == NULL)
        return;
    atomic_store(&h->stopping, 1);
    if (h->started)
        nng_http_server_stop(h->hs);
    /* A handler answers from memory in microseconds; the bound only keeps
     * a stuck one from hanging the exit. */
    for (int i = 0; i < 5000 && atomic_load(&h->active) > 0; i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    nng_http_server_release(h->hs);
    nng_url_free(h->url);
    free(h);
    srv->http = NULL;
}
