/*
 * serve.h - the internals of "flashtrie serve", shared by its files:
 * serve.c (options, start-up, signals, reload, drain), serve_ctx.c (the
 * per-context receive -> decode -> queue -> reply state machine) and
 * serve_info.c (statistics and the INFO text), serve_metrics.c (the
 * Prometheus text of /metrics, /healthz and their HTTP listener).
 */
#ifndef FT_SERVE_H
#define FT_SERVE_H

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/supplemental/tls/tls.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "batcher.h"
#include "flashtrie/internal/buf.h"
#include "cluster.h"
#include "flashtrie.h"
#include "jsonl.h"
#include "queue.h"
#include "slot.h"

#define SRV_MAX_LISTENERS 16
#define SRV_ERR_COUNT 32      /* status counters: ft_err values 0..31 */
#define SRV_HIST_BUCKETS 128  /* latency buckets: 2^(i/4) microseconds */

typedef struct srv_listener_opts {
    char url[512];
    int admin;             /* RELOAD allowed here (with admin_reload on) */
    char tls_cert[512];    /* PEM certificate chain (tls+tcp://) */
    char tls_key[512];     /* PEM private key */
    char tls_ca[512];      /* CA to verify clients with ("" = none) */
    int tls_verify;        /* require a client certificate */
} srv_listener_opts;

/* srv_opts are the settings the server runs with, from the command line or
 * from a config file. */
typedef struct srv_opts {
    char config_path[1024]; /* "" when started without a config file */
    char index[1024];
    srv_listener_opts ls[SRV_MAX_LISTENERS];
    size_t n_ls;
    ft_slot_opts slot;
    uint32_t max_batch;
    uint32_t max_wait_us;
    uint32_t queue_depth;
    uint64_t max_message_bytes;
    /* Reloadable and read by nng's threads while a SIGHUP rewrites them:
     * atomic, so a request sees each one either old or new. */
    _Atomic uint32_t cap_beam, cap_k, cap_t, cap_results;
    _Atomic uint32_t default_deadline_ms; /* 0 = requests have no deadline */
    _Atomic uint32_t drain_timeout_ms;
    atomic_int admin_reload;
    uint32_t contexts;            /* nng contexts per socket */
    uint32_t test_delay_us;       /* test hook: slow every batch */
    /* test hook (--test-fault R:N): replica R's engine fails, as on a CUDA
     * error, from its N-th batch call on; 0 = never. */
    uint64_t test_fault[FT_SLOT_MAX_REPLICAS];
    int log_level;
    int no_verify;                /* skip index checksums */
    uint32_t cl_rank, cl_world;   /* cluster: this rank, the ranks (1: none) */
    char cl_coordinator[512];
    uint32_t cl_join_ms, cl_step_ms;
    /* INFO's config section: replaced on reload under dump_mu (serve.c),
     * read by INFO under it. */
    char *config_dump;
} srv_opts;

typedef struct server server;

typedef struct srv_socket {
    server *srv;
    srv_listener_opts lo;
    nng_socket sock;
    nng_listener lst;
    nng_tls_config *tls;
    int open;
    struct srv_ctx **ctx;
    size_t n_ctx;
} srv_socket;

struct server {
    srv_opts o;
    ft_queue queue;
    ft_batcher *batcher;
    srv_socket socks[SRV_MAX_LISTENERS];
    size_t n_socks;
    uint64_t start_ns;
    pthread_mutex_t reload_mu; /* one reload at a time */
    atomic_uint_fast64_t next_gen;
    atomic_int draining;
    atomic_long inflight;      /* messages received, reply not yet sent */
    /* statistics */
    atomic_uint_fast64_t messages, json_messages, frame_messages;
    atomic_uint_fast64_t status[SRV_ERR_COUNT]; /* per request */
    atomic_uint_fast64_t hist[SRV_HIST_BUCKETS];
    atomic_uint_fast64_t latency_ns_sum; /* the histogram's sum */
    atomic_uint_fast64_t reloads, reload_failures;
    atomic_uint_fast64_t pipes_added, pipes_removed;
    struct srv_http *http;     /* the metrics listener (NULL: none) */
    ft_cluster *cluster;       /* rank 0 of a cluster: its searcher's */
};

/* srv_ctx_* run the contexts of one socket (serve_ctx.c). */
int srv_socket_start(srv_socket *s, char *err, size_t errlen);
void srv_socket_stop_listening(srv_socket *s);
void srv_socket_close(srv_socket *s);

/* srv_reload opens the index again (and the reloadable settings of the
 * config file), swaps it in on success; errbuf says why not otherwise. */
int srv_reload(server *srv, const char *path, char *errbuf, size_t errlen);

/* srv_config_dump appends INFO's config section to out. */
int srv_config_dump(ft_buf *out);

/* srv_reload_config re-reads the config file, with the command line's
 * overrides, and applies its reloadable settings (serve.c). */
void srv_reload_config(server *srv);

/* srv_count records one answered request: its status and its latency. */
void srv_count(server *srv, int status, uint64_t ns);
/* srv_hist_upper_us is the upper bound of latency bucket b, in
 * microseconds: bucket b counts the latencies below it (and at or above
 * bucket b-1's). */
static inline double srv_hist_upper_us(size_t b)
{
    return pow(2.0, (double)(b + 1) / 4.0);
}
/* srv_info writes the INFO text. */
int srv_info(server *srv, ft_buf *out);

#endif /* FT_SERVE_H */
