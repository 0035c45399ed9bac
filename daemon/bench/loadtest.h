/*
 * loadtest.h - "flashtrie loadtest" in its parts (private to
 * daemon/bench/): cmd_loadtest.c reads the options and runs the clients,
 * loadtest_setup.c checks the URL, reads the mix and the server's INFO and
 * makes the pool of requests with their expected answers,
 * loadtest_run.c is one client: the messages of each kind and their
 * checks.
 */
#ifndef FT_LOADTEST_H
#define FT_LOADTEST_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>

#include "flashtrie/internal/buf.h"
#include "flashtrie.h"
#include "flashtrie_client.h"
#include "frame.h"
#include "jsonl.h"
#include "workload.h"

/* ---- the kinds of messages sent ---- */

enum {
    K_GOOD_FRAME,   /* one request in a SEARCH frame */
    K_GOOD_BATCH,   /* 2..8 requests in one SEARCH frame */
    K_GOOD_JSON,    /* one request as a JSON line */
    K_BAD_MAGIC,
    K_BAD_VERSION,
    K_BAD_TYPE,
    K_BAD_TRUNCATED,
    K_BAD_SHORT,
    K_BAD_TRAILING,
    K_BAD_CHECKSUM,
    K_BAD_GARBAGE,
    K_BAD_REPLY_TYPE,
    K_BAD_JSON,     /* a JSON line the parser or validator rejects */
    K_BAD_SPEC,     /* a frame with requests breaking docs/specification.md section 3 */
    K_BAD_RESULTS0, /* results given as 0 (wire form only) */
    K_OVERSIZE,
    K_MAXSIZE,      /* a message of about max_message_bytes: ERROR */
    K_HALF,         /* half a message, then silence: the server closes */
    K_IDLE,         /* a handshake, then silence: the server closes */
    K_COUNT
};

/* LT_NNG_SPARE: the bytes a maxsize frame leaves under the receive limit,
 * for nng's own header (the limit counts it). */
#define LT_NNG_SPARE 64

/* lt_kind_name is each kind's name in the report (loadtest_run.c). */
extern const char *lt_kind_name[K_COUNT];

#define FIRST_BAD K_BAD_MAGIC
#define N_BAD (K_OVERSIZE - K_BAD_MAGIC)
/* N_BAD_JSON is the number of bad JSON lines (loadtest_setup.c). */
#define N_BAD_JSON 12

/* ---- the pool of good requests and their answers ---- */

typedef struct good {
    ft_jsonl_req q;      /* the parsed request (its grid owned by q) */
    char *line;          /* the JSON line as sent */
    size_t line_len;
    ft_result res;       /* the engine's answer */
    char *want_line;     /* the answer line "flashtrie search" prints */
    size_t want_len;
} good;

typedef struct bad_line {
    const char *line;
    char *want;
    size_t want_len;
} bad_line;

/* a docs/specification.md section 3 violation made from a good request */
typedef struct bad_req {
    ft_request r;
    uint32_t *tok;
    float *lp;
    char want[160];
} bad_req;

typedef struct lat {
    uint32_t *us;
    size_t n, cap;
} lat;

typedef struct counts {
    uint64_t sent[K_COUNT], right[K_COUNT], wrong[K_COUNT], busy[K_COUNT];
    uint64_t good_reqs; /* good requests answered right, batch members
                         * and the good neighbours of bad.spec included */
    uint64_t maxsz_cut;  /* maxsize frames cut to the receive limit in force */
    uint64_t maxsz_over; /* maxsize frames closed unread over the receive
                          * limit in force (counted right too) */
} counts;

typedef struct shared {
    const char *url;
    good *pool;
    size_t n_pool;
    bad_line bl[N_BAD_JSON];
    bad_req *br;
    size_t n_br;
    unsigned char *big; /* the oversize message */
    size_t big_len;
    unsigned char *maxsz; /* the max-size message, its ERROR and id */
    size_t maxsz_len;
    size_t maxsz_min;   /* the shortest cut of it (the request and 128) */
    char maxsz_want[256];
    uint64_t maxsz_id;
    uint32_t idle_ms;   /* the server's idle_timeout_ms (half, idle) */
    int max_silent;     /* half and idle connections a worker keeps open
                         * at once: within the server's max_connections
                         * beside every worker's others (lt_max_silent) */
    unsigned weights[K_COUNT];
    unsigned wsum;
    uint64_t seed;
    double t_end;
    int timeout_ms;
    const char *tls_ca;
    ft_client_opts co;
    ft_client *co_cl; /* --coalesce N: the one handle (coalesce N) every
                       * worker's searches share; NULL: each its own */
    atomic_int wrong_printed;
} shared;

typedef struct worker {
    shared *sh;
    unsigned id;
    ft_wl_rng rng;
    ft_client *cl;
    nng_socket raw;
    int raw_open;
    nng_tls_config *tls;
    unsigned raw_unclosed; /* closes of raw given up (lt_raw_close) */
    counts c;
    lat lat_good, lat_all;
    ft_frame_msg m, local;
    ft_buf b;
    unsigned char *scratch;
    size_t scratch_cap;
    uint64_t next_id;
    uint64_t conn_errors;
    /* half and idle connections waiting for the server to close them,
     * watched between the other messages */
    struct silent {
        int fd, kind;
        double t0;
    } silent[16];
    int n_silent;
} worker;

/* ---- loadtest_run.c ---- */

/* lt_lat_merge adds from's samples to to. */
void lt_lat_merge(lat *to, const lat *from);
/* lt_lat_print prints l's percentiles (sorting its samples) as "latency
 * what ...". */
void lt_lat_print(FILE *f, const char *what, lat *l);
/* lt_raw_open opens w's raw request socket (for the malformed messages);
 * 0, or nng's error. */
int lt_raw_open(worker *w);
/* lt_raw_close closes w's raw socket, if open, within
 * FTI_NNG_CLOSE_WAIT_MS (close_within.h); a close given up (nng's
 * teardown thread stalled) counts in w->raw_unclosed. */
void lt_raw_close(worker *w);
/* lt_run_worker is one client's thread (arg: its worker) until the run's
 * end. */
void *lt_run_worker(void *arg);

/* ---- loadtest_setup.c ---- */

/* lt_loopback_url accepts ipc://, and tcp:// or tls+tcp:// whose host is
 * localhost or in 127.0.0.0/8. */
int lt_loopback_url(const char *url);
/* lt_parse_mix reads --mix into per-kind weights; 0, or -1 after a
 * message. */
int lt_parse_mix(const char *s, unsigned *wt);
/* lt_info_value finds "key: VALUE" at the start of a line of the INFO
 * text; 1 when found. */
int lt_info_value(const char *info, const char *key, long long *v);
/* lt_rss_kb is process pid's resident set in KiB, or -1; lt_hwm_kb its
 * peak (VmHWM). */
long lt_rss_kb(long pid);
long lt_hwm_kb(long pid);
/* lt_fetch_info asks the server for its INFO text (*info: malloc'd); an
 * ft_err code, after a message when not FT_OK. */
int lt_fetch_info(ft_client *cl, char **info);
/* lt_load_pool fills the pool of good requests: the lines of path, or
 * requests generated from lib's index with wo (the "gen requests"
 * generator, same options); 0, or the exit status after a message. */
int lt_load_pool(shared *sh, const char *path, const ft_library *lib,
                 ft_wl_req_opts *wo);
/* lt_expect computes every expected answer with the engine, here, and
 * the bad lines and requests with theirs; 0, or 1. */
int lt_expect(shared *sh, ft_searcher *eng, uint32_t max_beam);

#endif /* FT_LOADTEST_H */
