/*
 * serve_priv.h - the server struct that the files of "flashtrie serve"
 * share, private to them: the live settings (ft_config, the table's
 * struct: nothing copies them), what serve's own flags set, the sockets,
 * the queue and the batcher, and the statistics INFO and /metrics read.
 *
 * Each serve_*.h declares what its serve_*.c provides and includes this
 * header at most; none includes another's, except serve_frame.h the wire
 * layer it is half of.
 */
#ifndef FT_SERVE_PRIV_H
#define FT_SERVE_PRIV_H

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/supplemental/tls/tls.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "batcher.h"
#include "cluster.h"
#include "flashtrie.h"
#include "ft_config.h"
#include "queue.h"
#include "slot.h"

#define SRV_ERR_COUNT 32      /* status counters: ft_err values 0..31 */
#define SRV_HIST_BUCKETS 128  /* latency buckets: 2^(i/4) microseconds */

typedef struct server server;

/* srv_stages: where the time of SEARCH messages goes, by the daemon's own
 * clock (serve_stages.c): sums in nanoseconds and their counts, and the
 * queue wait's histogram (latency buckets, as hist). */
typedef struct srv_stages {
    atomic_uint_fast64_t messages;  /* SEARCH messages whose jobs ran */
    atomic_uint_fast64_t requests;  /* jobs that ran */
    atomic_uint_fast64_t sends;     /* their replies nng finished sending */
    atomic_uint_fast64_t decode_ns; /* receipt -> jobs ready (per message) */
    atomic_uint_fast64_t queue_ns;  /* jobs ready -> engine call (per job) */
    atomic_uint_fast64_t engine_ns; /* the engine call (per job) */
    atomic_uint_fast64_t answer_ns; /* engine call's end -> its message's
                                     * last answer taken up (per job) */
    atomic_uint_fast64_t encode_ns; /* last answer -> reply ready (message) */
    atomic_uint_fast64_t send_ns;   /* reply handed to nng -> sent */
    atomic_uint_fast64_t send_call_ns; /* of it: nng_ctx_send's own call */
    atomic_uint_fast64_t queue_hist[SRV_HIST_BUCKETS];
} srv_stages;

typedef struct srv_socket {
    server *srv;
    ft_config_listener lo;     /* its listeners element */
    nng_socket sock;
    nng_listener lst;
    nng_tls_config *tls;
    int open;
    struct srv_ctx **ctx;
    size_t n_ctx;
    /* serve_conn.c: connections open now (admitted at ADD_PRE), and the
     * internal probe's verdict (0 until a probe fails). */
    atomic_uint conns;
    atomic_int down;
    /* the probe's failures in a row that a restart would mend, the
     * restarts they caused, and connections seen at ADD_PRE */
    unsigned probe_fails;
    atomic_uint adds;
    atomic_uint restarts;
} srv_socket;

struct server {
    /* The live settings: read where they are used; a reload rewrites the
     * reloadable ones (ft_config_take_reloadable under reload_mu), so
     * threads other than the main one read those with FT_CONFIG_LIVE. */
    ft_config cfg;
    /* What serve's own flags set: they are no settings (no file key, no
     * reload). */
    uint32_t contexts;            /* nng contexts per socket */
    int answer_threads;           /* --answer-threads; -1: auto */
    uint32_t test_delay_us;       /* test hook: slow every batch */
    /* test hook (--test-fault R:N): replica R's engine fails, as on a CUDA
     * error, from its N-th batch call on; 0 = never. */
    uint64_t test_fault[FT_SLOT_MAX_REPLICAS];
    int no_verify;                /* skip index checksums */
    /* What the server made of them. */
    ft_slot_opts slot;            /* the engines' options, from cfg */
    char index[FT_CONFIG_PATH_MAX]; /* the index served now (a RELOAD may
                                       name another): under reload_mu */
    uint32_t test_open_delay_ms;  /* test hook: every index open waits */
    char *config_dump;            /* INFO's config section (serve.c) */
    ft_queue queue;
    ft_batcher *batcher;
    srv_socket socks[FT_CONFIG_MAX_LISTENERS];
    size_t n_socks;
    uint64_t start_ns;
    /* The reload worker (serve.c): one reload at a time, on a thread of
     * its own, never on the signal thread or nng's.  reload_mu guards
     * the fields below and index, and is held only briefly (never while
     * a file is opened); the swap of a reload happens under it. */
    pthread_mutex_t reload_mu;
    pthread_cond_t reload_cv;
    pthread_t reload_th;
    int reload_th_on;          /* the worker was started */
    int reload_busy;           /* a reload runs now */
    int reload_stop;           /* shutting down: no reload starts or swaps */
    int reload_hup;            /* a SIGHUP waits for the worker */
    struct srv_reload_req *reload_req; /* a RELOAD waiting (or running) */
    char reload_path[FT_CONFIG_PATH_MAX]; /* what the running one opens */
    uint64_t reload_t0;        /* when it started (fti_now_ns) */
    atomic_uint_fast64_t next_gen;
    /* The generation served checks a batch's duplicate tokens while its
     * engine works (fti_searcher_overlaps_check of every replica): where
     * dup_check = auto leaves that check to the engine.  Set at start and
     * at each swap. */
    atomic_int gen_overlaps;
    atomic_int draining;
    atomic_long inflight;      /* messages received, reply not yet sent */
    atomic_long inflight_reqs; /* their requests queued for an engine */
    /* the memory budget (serve_budget.c) */
    atomic_uint_fast64_t budget_used, budget_peak, budget_refused;
    atomic_uint budget_heavy;  /* heavy messages held */
    /* statistics */
    atomic_uint_fast64_t messages, json_messages, frame_messages;
    atomic_uint_fast64_t status[SRV_ERR_COUNT]; /* per request */
    atomic_uint_fast64_t hist[SRV_HIST_BUCKETS];
    atomic_uint_fast64_t latency_ns_sum; /* the histogram's sum */
    srv_stages stages;
    atomic_uint_fast64_t reloads, reload_failures;
    atomic_uint_fast64_t pipes_added, pipes_removed;
    /* serve_conn.c: connections refused (max_connections), closed for
     * idling (idle_timeout_ms); its table and thread. */
    atomic_uint_fast64_t conn_refused, conn_idle_closed;
    struct srv_conn *conn;
    struct srv_http *http;     /* the metrics listener (NULL: none) */
    ft_cluster *cluster;       /* rank 0 of a cluster: its searcher's */
};

#endif /* FT_SERVE_PRIV_H */
