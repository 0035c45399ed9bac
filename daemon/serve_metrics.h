/*
 * serve_metrics.h - what "flashtrie serve" answers over HTTP on its
 * `metrics` listener: GET /metrics, the Prometheus text exposition format
 * (version 0.0.4); GET /livez: 200 "alive" while the process runs (a
 * liveness probe: also while the index loads and while draining); GET
 * /readyz: 200 "ready" once it can answer requests (a readiness probe);
 * and GET /healthz: 200 "ok" while every engine serves,
 * 200 "degraded: ..." while some replica failed and another serves, 503
 * with a one-line reason when none serves (or while starting, draining).
 *
 * The numbers are the ones INFO shows (serve_info.c, the queue's and the
 * batcher's counters): nothing is counted twice.  A scrape first copies
 * them into a srv_metrics_snap (srv_metrics_take), then renders that copy
 * (srv_metrics_render, srv_metrics_health), so the rendering is a pure
 * function a unit test can feed any state, a failed engine included.
 */
#ifndef FT_SERVE_METRICS_H
#define FT_SERVE_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "batcher.h"
#include "flashtrie/internal/buf.h"
#include "flashtrie/internal/engine.h"
#include "ft_config.h"
#include "serve_priv.h"
#include "slot.h"

/* srv_metrics_engine is one replica's state. */
typedef struct srv_metrics_engine {
    const char *kind; /* "cpu" or "gpu" */
    int device;       /* GPU ordinal, -1 for a CPU engine */
    int up;           /* 0 once the replica failed (ft_gen_replica_failed) */
    uint64_t batches; /* engine calls it ran */
    uint64_t busy_ns; /* time it ran them */
    char why[160];    /* why it failed ("" while up or unknown) */
} srv_metrics_engine;

/* srv_metrics_process is the process's own resources, as the Prometheus
 * client libraries export them (process_*): from /proc/self/stat,
 * /proc/self/fd and getrlimit.  ok is 0 where /proc could not be read
 * (the families are then left out). */
typedef struct srv_metrics_process {
    int ok;
    double cpu_seconds;        /* user + system */
    double start_time_seconds; /* since the Unix epoch */
    uint64_t resident_bytes, virtual_bytes;
    uint64_t open_fds, max_fds;
} srv_metrics_process;

/* srv_metrics_listener is one listener's connections and probe state. */
typedef struct srv_metrics_listener {
    char url[FT_CONFIG_URL_MAX];
    int up;            /* 0 once its probe failed (serve_conn.c) */
    uint32_t conns;    /* connections open on it now */
    uint32_t restarts; /* closed and opened again by the probe */
} srv_metrics_listener;

/* srv_metrics_process_take reads the process's resources into p. */
void srv_metrics_process_take(srv_metrics_process *p);

/* srv_metrics_snap is one consistent-enough copy of the counters: each is
 * read atomically, not all of them at one instant. */
typedef struct srv_metrics_snap {
    const char *version;
    double uptime_s;
    int draining;
    int starting;                    /* the request listeners are not open */
    uint32_t cluster_world;          /* cluster.world: while loading, rank 0
                                      * also waits for the other ranks */
    int loading;                     /* the index is not open yet: only the
                                        fields above are filled */
    long in_flight;                  /* messages not answered yet */
    uint64_t connections_opened, connections_closed;
    uint64_t messages_json, messages_frame;
    uint64_t status[SRV_ERR_COUNT];  /* answered requests by ft_err */
    uint64_t hist[SRV_HIST_BUCKETS]; /* their latencies (serve_info.c) */
    uint64_t latency_ns_sum;
    size_t queue_depth, queue_high_water;
    /* The config gauges: conf[i] is the value of ft_config_rows[i] when
     * that row names a gauge (ft_config_number), else 0. */
    uint64_t conf[FT_CONFIG_NSETTINGS];
    uint64_t queued_total, busy_rejections;
    /* the heavy lane (light_request_cost): requests in it now, batches of
     * it, light batches that went ahead of waiting heavy requests */
    size_t queue_heavy_depth;
    uint64_t heavy_batches, light_ahead;
    uint64_t batches, batch_requests, engine_failed_requests;
    uint64_t failovers;              /* batches re-run on another replica */
    uint64_t batch_sizes[FT_BATCH_SIZE_BUCKETS];
    uint64_t reloads, reload_failures;
    uint64_t generation, index_keys, index_nodes, index_bytes, shards;
    size_t n_eng;
    srv_metrics_engine eng[FT_SLOT_MAX_REPLICAS];
    size_t n_gpu;                     /* distinct GPUs the engines use */
    struct {
        int device;
        uint64_t used, total;         /* bytes (fti_gpu_memory) */
    } gpu[FT_SLOT_MAX_REPLICAS];
    char cluster_down[240];           /* a cluster rank is down: why */
    /* rank 0 of a cluster: every rank's state, as INFO's # cluster has
     * it (flashtrie_cluster_rank_up); cl_ranks is 0 without a cluster */
    uint32_t cl_ranks;
    struct {
        uint32_t first, count; /* its shards */
        int up;
    } cl_rank[FT_CLUSTER_MAX_RANKS];
    /* Connections (serve_conn.c) and the process (issue 38, 39). */
    size_t n_listeners;
    srv_metrics_listener listener[FT_CONFIG_MAX_LISTENERS];
    uint64_t connections_refused, connections_idle_closed;
    /* the memory budget (serve_budget.c) and the receive limit
     * (serve_conn.c), issue 39 */
    uint64_t memory_held, memory_busy;
    uint64_t receive_limit, receive_reserved, receive_lowered;
    char listener_down[480];          /* a listener does not answer: why */
    srv_metrics_process proc;
} srv_metrics_snap;

/* srv_metrics_take fills s from the running server. */
void srv_metrics_take(server *srv, srv_metrics_snap *s);

/* srv_metrics_render appends the Prometheus text of s to out: every family
 * with its # HELP and # TYPE lines.  FT_ENOMEM when out could not grow. */
int srv_metrics_render(const srv_metrics_snap *s, ft_buf *out);

/* srv_metrics_health returns 503 while a listener does not answer its
 * probe ("listener URL does not answer: ...", srv_listeners_ok), while no
 * replica serves ("no healthy
 * replica (2 of 2 failed): engine 0 (gpu device 0) failed: <why>", "no
 * engine serves"), is starting or draining ("starting: ...", "draining:
 * shutting down"); 200 "degraded: 1 of 2 replicas failed: engine 1 (gpu
 * device 1) failed: <why>" while some replica failed and another serves
 * (the server answers every request right: a load balancer keeps it,
 * an alert should not); else 200 "ok".  The reason is written without a
 * newline. */
int srv_metrics_health(const srv_metrics_snap *s, char *reason,
                       size_t reasonlen);

/* srv_metrics_ready is /readyz: srv_metrics_health's decision (the index
 * is open, the listeners are, some replica serves, no drain), worded for
 * a readiness probe: 200 "ready" (or "ready: degraded: ..."), 503 "not
 * ready: <health's reason>". */
int srv_metrics_ready(const srv_metrics_snap *s, char *reason,
                      size_t reasonlen);

typedef struct srv_http srv_http;

/* srv_http_start serves /metrics and /healthz at url (http://HOST:PORT)
 * on nng's HTTP server; errbuf names the URL and nng's reason. */
int srv_http_start(server *srv, const char *url, char *errbuf,
                   size_t errlen);
/* srv_http_loaded tells the handlers that the index is open and the
 * queue and the batcher run: until then /metrics, /healthz and /readyz
 * answer 503 "starting: opening the index" (and read neither). */
void srv_http_loaded(server *srv);
/* srv_http_ready tells /healthz that the request listeners are open:
 * until then it answers 503 "starting: ...". */
void srv_http_ready(server *srv);
/* srv_http_stop stops the listener and frees it (srv->http may be NULL). */
void srv_http_stop(server *srv);

#endif /* FT_SERVE_METRICS_H */
