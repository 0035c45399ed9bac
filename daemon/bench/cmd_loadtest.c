/*
 * cmd_loadtest.c - "flashtrie loadtest": many concurrent clients against a
 * running server on this machine, with a mix of good, malformed and
 * oversize messages, every answer checked.
 *
 * The expected answers are computed here first, in process, on the same
 * index (ft_library_open + ft_searcher, the code "flashtrie search" runs),
 * for a fixed pool of requests: the generated ones of "gen requests" or
 * the lines of --requests.  During the run every good answer is compared
 * with its expected one bit for bit (frames: every hit's tokens, value,
 * score and sigma; JSON lines: the whole answer line, byte for byte), and
 * every bad message with the answer it must get: a malformed frame an
 * ERROR with FT_EPROTO and the decoder's own message (the same decoder
 * runs here on the same bytes), a bad JSON line the error line "flashtrie
 * search" prints for it, a request breaking SPEC section 3 its RESULT
 * entry FT_EREQUEST with the validator's message, an oversize message a
 * closed connection.  A BUSY answer (the server's queue was full) is
 * counted apart: it is a right answer to overload, not a wrong one.
 *
 * Only loopback servers are accepted (ipc://, and tcp:// or tls+tcp:// on
 * 127.0.0.0/8 or localhost): this is a tool to hammer one's own server,
 * never someone else's.  The run stops by itself after --seconds.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/tls/tls.h>

#include "flashtrie/internal/buf.h"
#include "commands.h"
#include "flashtrie_client.h"
#include "frame.h"
#include "jsonl.h"
#include "gen.h"
#include "workload.h"

static const char *usage_text =
    "usage: flashtrie loadtest --url URL --index INDEX [--clients 64]\n"
    "         [--seconds 60] [--mix good,bad,oversize] [--requests FILE]\n"
    "         [--seed S] [--pool N] [--server-pid PID]\n"
    "         [--max-message-bytes N] [--max-rss-growth PCT]\n"
    "         [--timeout-ms N] [--tls-ca F] [--T T] [--K K] [--beam B] ...\n"
    "  runs --clients threads against the server at URL (loopback only:\n"
    "  ipc://, tcp:// or tls+tcp:// on 127.0.0.0/8 or localhost) for\n"
    "  --seconds, each sending a mix of good requests (--requests FILE, or\n"
    "  --pool requests generated from INDEX as 'gen requests' does),\n"
    "  malformed ones (bad frames, bad JSON lines, requests breaking SPEC\n"
    "  section 3) and oversize ones (above the server's max_message_bytes,\n"
    "  read from INFO unless given).  --mix takes kinds with optional\n"
    "  weights (good:90,bad:9,oversize:1 is what good,bad,oversize means).\n"
    "  Every good answer is checked bit for bit against INDEX searched here,\n"
    "  every bad one against its expected error.  It prints q/s, latency\n"
    "  percentiles, answers by kind and the server's RSS (--server-pid, or\n"
    "  the pid INFO gives) before, after the warm-up and at the end.\n"
    "  Exit 0 when every answer was right (and the RSS grew less than\n"
    "  --max-rss-growth percent after the warm-up, when given), 1 otherwise,\n"
    "  2 for unusable arguments.\n";

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
    K_BAD_SPEC,     /* a frame with requests breaking SPEC section 3 */
    K_BAD_RESULTS0, /* results given as 0 (wire form only) */
    K_OVERSIZE,
    K_COUNT
};

static const char *kind_name[K_COUNT] = {
    "good.frame", "good.batch", "good.json", "bad.magic", "bad.version",
    "bad.type", "bad.truncated", "bad.short_header", "bad.trailing",
    "bad.checksum", "bad.garbage", "bad.reply_type", "bad.json",
    "bad.spec", "bad.results0", "oversize"};

#define FIRST_BAD K_BAD_MAGIC
#define N_BAD (K_OVERSIZE - K_BAD_MAGIC)

/* Bad JSON lines: each is parsed (and validated) here too, so what it
 * must get back is computed, not written down twice. */
static const char *bad_json[] = {
    "{\"tokens\": [[1]], \"logp\": [[-1]], \"bogus\": 1}",
    "{\"tokens\": [[1, 2]], \"logp\": [[-1]]}",
    "{\"tokens\": [[1]], \"logp\": [[-1]], \"beam\": 0}",
    "{\"tokens\": [[1]], \"logp\": [[-1]",
    "{\"id\": 5, \"tokens\": [[1.5]], \"logp\": [[-1]]}",
    "{\"id\": \"dup\", \"tokens\": [[3, 3]], \"logp\": [[-1, -2]]}",
    "{\"tokens\": [[1]], \"logp\": [[-1]], \"alpha\": 11}",
    "{\"tokens\": [[1]]}",
    "{\"tokens\": [[1]], \"logp\": [[-1]], \"beam\": 4, \"beam\": 5}",
    "{\"id\": 9, \"tokens\": [[4294967296]], \"logp\": [[-1]]}",
    "{\"tokens\": [], \"logp\": []}",
    "{}",
};
#define N_BAD_JSON (sizeof bad_json / sizeof bad_json[0])

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

/* a SPEC section 3 violation made from a good request */
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
    unsigned weights[K_COUNT];
    unsigned wsum;
    uint64_t seed;
    double t_end;
    int timeout_ms;
    const char *tls_ca;
    ft_client_opts co;
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
    counts c;
    lat lat_good, lat_all;
    ft_frame_msg m, local;
    ft_buf b;
    unsigned char *scratch;
    size_t scratch_cap;
    uint64_t next_id;
    uint64_t conn_errors;
} worker;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void lat_add(lat *l, double s)
{
    /* Bounded: past 16M samples a run is long enough; the rest are not
     * recorded (the counts still are). */
    if (l->n == l->cap) {
        if (l->cap >= (16u << 20))
            return;
        size_t nc = l->cap ? l->cap * 2 : 4096;
        uint32_t *p = realloc(l->us, nc * sizeof *p);
        if (p == NULL)
            return;
        l->us = p;
        l->cap = nc;
    }
    double us = s * 1e6;
    l->us[l->n++] = us > 4e9 ? 4000000000u : (uint32_t)us;
}

static void lat_merge(lat *to, const lat *from)
{
    for (size_t i = 0; i < from->n; i++)
        lat_add(to, (double)from->us[i] / 1e6);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static void lat_print(FILE *f, const char *what, lat *l)
{
    if (l->n == 0) {
        fprintf(f, "latency %s: no samples\n", what);
        return;
    }
    qsort(l->us, l->n, sizeof *l->us, cmp_u32);
    size_t n = l->n;
#define PCT(q) l->us[(size_t)ceil((q) * (double)n) - 1]
    fprintf(f, "latency %s (us, %zu messages): p50 %u  p90 %u  p99 %u  "
            "max %u\n", what, n, PCT(0.50), PCT(0.90), PCT(0.99),
            l->us[n - 1]);
#undef PCT
}

/* report_wrong prints the first few wrong answers in full; the rest are
 * only counted. */
static void report_wrong(worker *w, int kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void report_wrong(worker *w, int kind, const char *fmt, ...)
{
    w->c.wrong[kind]++;
    if (atomic_fetch_add(&w->sh->wrong_printed, 1) >= 20)
        return;
    va_list ap;
    va_start(ap, fmt);
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "flashtrie loadtest: client %u: wrong answer to %s: %s\n",
            w->id, kind_name[kind], msg);
}

/* same_result compares a served result with the engine's, in every field
 * the wire carries: status, hits, and each hit's tokens, value, score and
 * sigma bit for bit. */
static int same_result(const ft_result *got, const ft_result *want,
                       char *why, size_t len)
{
    if (got->status != want->status) {
        snprintf(why, len, "status %d (%s), want %d", got->status,
                 got->error, want->status);
        return 0;
    }
    if (got->status != FT_OK) {
        if (strcmp(got->error, want->error) != 0) {
            snprintf(why, len, "error '%s', want '%s'", got->error,
                     want->error);
            return 0;
        }
        return 1;
    }
    if (got->n != want->n) {
        snprintf(why, len, "%u hits, want %u", got->n, want->n);
        return 0;
    }
    for (uint32_t i = 0; i < got->n; i++) {
        const ft_hit *a = &got->hits[i], *b = &want->hits[i];
        if (a->len != b->len || a->value != b->value ||
            memcmp(&a->score, &b->score, sizeof a->score) != 0 ||
            memcmp(&a->sigma, &b->sigma, sizeof a->sigma) != 0 ||
            memcmp(got->tokens + a->tok_off, want->tokens + b->tok_off,
                   a->len * sizeof(uint32_t)) != 0) {
            snprintf(why, len, "hit %u differs (value %llu score %.17g, "
                     "want value %llu score %.17g)", i,
                     (unsigned long long)a->value, a->score,
                     (unsigned long long)b->value, b->score);
            return 0;
        }
    }
    return 1;
}

/* ---- raw messages ---- */

static int raw_open(worker *w)
{
    if (w->raw_open)
        return 0;
    int rv = nng_req0_open(&w->raw);
    if (rv != 0)
        return rv;
    /* The server cannot tell a resend from a new request, and an oversize
     * message must fail, not be sent again on the next connection. */
    nng_socket_set_ms(w->raw, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
    nng_socket_set_ms(w->raw, NNG_OPT_RECVTIMEO, w->sh->timeout_ms);
    nng_socket_set_ms(w->raw, NNG_OPT_SENDTIMEO, w->sh->timeout_ms);
    nng_socket_set_ms(w->raw, NNG_OPT_RECONNMINT, 10);
    nng_socket_set_ms(w->raw, NNG_OPT_RECONNMAXT, 100);
    nng_socket_set_size(w->raw, NNG_OPT_RECVMAXSZ, 0);
    nng_dialer d;
    if ((rv = nng_dialer_create(&d, w->raw, w->sh->url)) != 0)
        goto fail;
    if (strncmp(w->sh->url, "tls+tcp://", 10) == 0) {
        if ((rv = nng_tls_config_alloc(&w->tls, NNG_TLS_MODE_CLIENT)) != 0)
            goto fail;
        if (w->sh->tls_ca) {
            if ((rv = nng_tls_config_ca_file(w->tls, w->sh->tls_ca)) != 0)
                goto fail;
            nng_tls_config_auth_mode(w->tls, NNG_TLS_AUTH_MODE_REQUIRED);
        } else {
            nng_tls_config_auth_mode(w->tls, NNG_TLS_AUTH_MODE_NONE);
        }
        if ((rv = nng_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, w->tls)) != 0)
            goto fail;
    }
    if ((rv = nng_dialer_start(d, 0)) != 0)
        goto fail;
    w->raw_open = 1;
    return 0;
fail:
    nng_close(w->raw);
    return rv;
}

/* raw_call sends len bytes and waits for the answer: 0 and the message,
 * or the nng error. */
static int raw_call(worker *w, const void *p, size_t len, nng_msg **out)
{
    int rv = raw_open(w);
    if (rv != 0)
        return rv;
    nng_msg *msg;
    if ((rv = nng_msg_alloc(&msg, 0)) != 0)
        return rv;
    if ((rv = nng_msg_append(msg, p, len)) != 0 ||
        (rv = nng_sendmsg(w->raw, msg, 0)) != 0) {
        nng_msg_free(msg);
        return rv;
    }
    return nng_recvmsg(w->raw, out, 0);
}

static uint64_t rnd(worker *w, uint64_t n)
{
    return ft_wl_next(&w->rng) % n;
}

/* ---- one message of each kind ---- */

static void do_good_frame(worker *w, int kind)
{
    shared *sh = w->sh;
    size_t n = kind == K_GOOD_BATCH ? 2 + rnd(w, 7) : 1;
    ft_request reqs[8];
    size_t pick[8];
    for (size_t i = 0; i < n; i++) {
        pick[i] = rnd(w, sh->n_pool);
        reqs[i] = sh->pool[pick[i]].q.req;
    }
    ft_client_results *res = NULL;
    char err[512];
    double t0 = now_s();
    int rc = ft_client_search(w->cl, reqs, n, &res, err, sizeof err);
    double dt = now_s() - t0;
    lat_add(&w->lat_all, dt);
    if (rc == FT_EBUSY) {
        w->c.busy[kind]++;
        return;
    }
    if (rc != FT_OK) {
        if (rc == FT_ECONN)
            w->conn_errors++;
        report_wrong(w, kind, "the call failed: %s (%s)", err,
                     ft_strerror(rc));
        return;
    }
    lat_add(&w->lat_good, dt);
    if (ft_client_results_count(res) != n) {
        report_wrong(w, kind, "%zu results for %zu requests",
                     ft_client_results_count(res), n);
    } else {
        int ok = 1;
        for (size_t i = 0; i < n && ok; i++) {
            char why[400];
            if (!same_result(ft_client_results_get(res, i),
                             &sh->pool[pick[i]].res, why, sizeof why)) {
                report_wrong(w, kind, "request %zu of the frame (pool %zu): "
                             "%s", i, pick[i], why);
                ok = 0;
            }
        }
        if (ok) {
            w->c.right[kind]++;
            w->c.good_reqs += n;
        }
    }
    ft_client_results_free(res);
}

/* check_json sends a JSON line and compares the answer with want. */
static void check_json(worker *w, int kind, const char *line, size_t len,
                       const char *want, size_t want_len)
{
    nng_msg *msg = NULL;
    double t0 = now_s();
    int rv = raw_call(w, line, len, &msg);
    double dt = now_s() - t0;
    lat_add(&w->lat_all, dt);
    if (rv != 0) {
        report_wrong(w, kind, "no answer: %s", nng_strerror(rv));
        return;
    }
    const char *body = nng_msg_body(msg);
    size_t bl = nng_msg_len(msg);
    static const char busy[] = "{\"error\": \"queue: full";
    if (bl == want_len && memcmp(body, want, bl) == 0) {
        w->c.right[kind]++;
        if (kind == K_GOOD_JSON) {
            lat_add(&w->lat_good, dt);
            w->c.good_reqs++;
        }
    } else if (bl >= sizeof busy - 1 && memcmp(body, busy, sizeof busy - 1) == 0) {
        w->c.busy[kind]++;
    } else {
        report_wrong(w, kind, "for '%.80s' got '%.*s', want '%.*s'", line,
                     (int)(bl > 300 ? 300 : bl), body,
                     (int)(want_len > 300 ? 300 : want_len), want);
    }
    nng_msg_free(msg);
}

/* check_error sends a malformed frame; the answer must be an ERROR with
 * code and message (and the id the decoder read), as decoded here. */
static void check_error(worker *w, int kind, const void *p, size_t len,
                        int code, const char *want, uint64_t want_id)
{
    nng_msg *msg = NULL;
    double t0 = now_s();
    int rv = raw_call(w, p, len, &msg);
    lat_add(&w->lat_all, now_s() - t0);
    if (rv != 0) {
        report_wrong(w, kind, "no answer: %s", nng_strerror(rv));
        return;
    }
    char err[256];
    int rc = ft_frame_decode(&w->m, nng_msg_body(msg), nng_msg_len(msg), 0,
                             err, sizeof err);
    nng_msg_free(msg);
    if (rc != FT_OK)
        report_wrong(w, kind, "the answer does not decode: %s", err);
    else if (w->m.hdr.type != FT_FRAME_ERROR)
        report_wrong(w, kind, "a %s frame, want ERROR",
                     ft_frame_type_name(w->m.hdr.type));
    else if (w->m.status != code || strcmp(w->m.text, want) != 0 ||
             w->m.hdr.id != want_id)
        report_wrong(w, kind, "ERROR %d '%s' id %llu, want %d '%s' id %llu",
                     w->m.status, w->m.text,
                     (unsigned long long)w->m.hdr.id, code, want,
                     (unsigned long long)want_id);
    else
        w->c.right[kind]++;
}

static unsigned char *scratch(worker *w, size_t n)
{
    if (w->scratch_cap < n) {
        unsigned char *p = realloc(w->scratch, n);
        if (p == NULL)
            return NULL;
        w->scratch = p;
        w->scratch_cap = n;
    }
    return w->scratch;
}

static void do_bad_frame(worker *w, int kind)
{
    shared *sh = w->sh;
    const ft_request *r = &sh->pool[rnd(w, sh->n_pool)].q.req;
    w->b.len = 0;
    uint64_t id = ++w->next_id;
    if (kind == K_BAD_REPLY_TYPE) {
        if (ft_frame_encode_pong(&w->b, id) != FT_OK)
            return;
        char want[96];
        snprintf(want, sizeof want, "type: %s (0x%04x) is not a request",
                 ft_frame_type_name(FT_FRAME_PONG), FT_FRAME_PONG);
        check_error(w, kind, w->b.data, w->b.len, FT_EPROTO, want, id);
        return;
    }
    if (ft_frame_encode_search(&w->b, id, 0, r, NULL, 1) != FT_OK)
        return;
    size_t len = w->b.len;
    unsigned char *p = scratch(w, len + 64);
    if (p == NULL)
        return;
    memcpy(p, w->b.data, len);
    switch (kind) {
    case K_BAD_MAGIC: p[1] = 'X'; break;
    case K_BAD_VERSION: p[4] = (unsigned char)(2 + rnd(w, 200)); break;
    case K_BAD_TYPE: p[6] = (unsigned char)(0x10 + rnd(w, 0x60)); break;
    case K_BAD_TRUNCATED: len -= 1 + rnd(w, len - FT_FRAME_HDR_SIZE); break;
    case K_BAD_SHORT: len = 1 + rnd(w, FT_FRAME_HDR_SIZE - 1); break;
    case K_BAD_TRAILING: {
        size_t extra = 1 + rnd(w, 63);
        memset(p + len, 0, extra);
        len += extra;
        break;
    }
    case K_BAD_CHECKSUM: {
        size_t at = FT_FRAME_HDR_SIZE + rnd(w, len - FT_FRAME_HDR_SIZE);
        p[at] ^= (unsigned char)(1u << rnd(w, 8));
        break;
    }
    case K_BAD_GARBAGE: {
        len = 1 + rnd(w, 200);
        for (size_t i = 0; i < len; i++)
            p[i] = (unsigned char)ft_wl_next(&w->rng);
        /* A '{' would make it a JSON line: this kind is about frames. */
        if (p[0] == '{')
            p[0] = 'F';
        break;
    }
    }
    /* The decoder here says what the server's must say about the bytes. */
    char want[256];
    int rc = ft_frame_decode(&w->local, p, len, 0, want, sizeof want);
    if (rc != FT_EPROTO) {
        /* A flip that still decodes (cannot happen with the checksum on,
         * but garbage is random): not a bad frame, do not count it. */
        return;
    }
    check_error(w, kind, p, len, FT_EPROTO, want, w->local.hdr.id);
}

static void do_bad_spec(worker *w, int kind)
{
    shared *sh = w->sh;
    /* The bad request rides between good ones: they must still be
     * answered right, it must be refused alone. */
    size_t bi = rnd(w, sh->n_br);
    size_t g1 = rnd(w, sh->n_pool), g2 = rnd(w, sh->n_pool);
    ft_request reqs[3] = {sh->pool[g1].q.req, sh->br[bi].r,
                          sh->pool[g2].q.req};
    ft_client_results *res = NULL;
    char err[512];
    double t0 = now_s();
    int rc = ft_client_search(w->cl, reqs, 3, &res, err, sizeof err);
    lat_add(&w->lat_all, now_s() - t0);
    if (rc == FT_EBUSY) {
        w->c.busy[kind]++;
        return;
    }
    if (rc != FT_OK) {
        if (rc == FT_ECONN)
            w->conn_errors++;
        report_wrong(w, kind, "the call failed: %s (%s)", err,
                     ft_strerror(rc));
        return;
    }
    char why[400];
    const ft_result *b = ft_client_results_get(res, 1);
    if (ft_client_results_count(res) != 3)
        report_wrong(w, kind, "%zu results for 3 requests",
                     ft_client_results_count(res));
    else if (!same_result(ft_client_results_get(res, 0), &sh->pool[g1].res,
                          why, sizeof why) ||
             !same_result(ft_client_results_get(res, 2), &sh->pool[g2].res,
                          why, sizeof why))
        report_wrong(w, kind, "a good request next to a bad one: %s", why);
    else if (b->status != FT_EREQUEST || strcmp(b->error, sh->br[bi].want))
        report_wrong(w, kind, "status %d '%s', want %d '%s'", b->status,
                     b->error, FT_EREQUEST, sh->br[bi].want);
    else {
        w->c.right[kind]++;
        w->c.good_reqs += 2;
    }
    ft_client_results_free(res);
}

static void do_results0(worker *w, int kind)
{
    shared *sh = w->sh;
    ft_request r = sh->pool[rnd(w, sh->n_pool)].q.req;
    r.results = 0;
    uint32_t mask = ft_frame_mask_of(&r) | FT_FRAME_HAS_RESULTS;
    w->b.len = 0;
    uint64_t id = ++w->next_id;
    if (ft_frame_encode_search(&w->b, id, 0, &r, &mask, 1) != FT_OK)
        return;
    nng_msg *msg = NULL;
    double t0 = now_s();
    int rv = raw_call(w, w->b.data, w->b.len, &msg);
    lat_add(&w->lat_all, now_s() - t0);
    if (rv != 0) {
        report_wrong(w, kind, "no answer: %s", nng_strerror(rv));
        return;
    }
    char err[256];
    int rc = ft_frame_decode(&w->m, nng_msg_body(msg), nng_msg_len(msg), 0,
                             err, sizeof err);
    nng_msg_free(msg);
    static const char want[] = "results: must be 1..4096, got 0";
    if (rc == FT_OK && w->m.hdr.type == FT_FRAME_ERROR &&
        w->m.status == FT_EBUSY)
        w->c.busy[kind]++;
    else if (rc != FT_OK || w->m.hdr.type != FT_FRAME_RESULT ||
             w->m.count != 1 || w->m.hdr.id != id)
        report_wrong(w, kind, "not a RESULT of 1 for id %llu (%s)",
                     (unsigned long long)id, rc ? err : "");
    else if (w->m.res[0].status != FT_EREQUEST ||
             strcmp(w->m.res[0].error, want) != 0)
        report_wrong(w, kind, "status %d '%s', want %d '%s'",
                     w->m.res[0].status, w->m.res[0].error, FT_EREQUEST,
                     want);
    else
        w->c.right[kind]++;
}

/* stream_connect opens a plain socket to the server of url (ipc:// or
 * tcp:// on loopback) and does the SP handshake of a REQ peer by hand;
 * -1 when that fails.  Sends and receives time out after ms. */
static int stream_connect(const char *url, int ms)
{
    int fd = -1;
    if (strncmp(url, "ipc://", 6) == 0) {
        struct sockaddr_un a;
        memset(&a, 0, sizeof a);
        a.sun_family = AF_UNIX;
        if (strlen(url + 6) >= sizeof a.sun_path)
            return -1;
        strcpy(a.sun_path, url + 6);
        fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
            goto fail;
    } else {
        const char *h = url + 6, *colon = strrchr(h, ':');
        char host[256];
        size_t n = (size_t)(colon - h);
        if (n >= sizeof host)
            return -1;
        memcpy(host, h, n);
        host[n] = 0;
        struct sockaddr_in a;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_port = htons((uint16_t)atoi(colon + 1));
        if (inet_pton(AF_INET, strcmp(host, "localhost") ? host : "127.0.0.1",
                      &a.sin_addr) != 1)
            return -1;
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
            goto fail;
    }
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    /* 0 'S' 'P' 0, protocol 0x0030 (REQ v0) big-endian, 0 0 */
    static const unsigned char hs[8] = {0, 'S', 'P', 0, 0, 0x30, 0, 0};
    unsigned char peer[8];
    if (send(fd, hs, 8, MSG_NOSIGNAL) != 8 || recv(fd, peer, 8, MSG_WAITALL) != 8)
        goto fail;
    return fd;
fail:
    if (fd >= 0)
        close(fd);
    return -1;
}

/* do_oversize sends a message above max_message_bytes: the server must
 * drop it unread and close the connection, so the only right outcome is
 * that connection closing (never an answer, never a hang).  It is
 * written by hand on a plain socket of its own: the framing is that of
 * nng's ipc and tcp transports (type byte on ipc, a 64-bit big-endian
 * length, the REQ request id, the body), and no nng client state can hide
 * or delay what the server does with it. */
static void do_oversize(worker *w, int kind)
{
    shared *sh = w->sh;
    double t0 = now_s();
    int fd = stream_connect(sh->url, sh->timeout_ms);
    if (fd < 0) {
        lat_add(&w->lat_all, now_s() - t0);
        report_wrong(w, kind, "cannot connect: %s", strerror(errno));
        return;
    }
    unsigned char h[13];
    size_t hl = 0;
    if (strncmp(sh->url, "ipc://", 6) == 0)
        h[hl++] = 1;
    uint64_t len = (uint64_t)sh->big_len + 4;
    for (int i = 0; i < 8; i++)
        h[hl++] = (unsigned char)(len >> (56 - 8 * i));
    uint32_t rid = 0x80000000u | (uint32_t)(++w->next_id & 0x7fffffff);
    for (int i = 0; i < 4; i++)
        h[hl++] = (unsigned char)(rid >> (24 - 8 * i));
    /* The server may close while the body is still going out: a failed
     * send is then the expected end, not a fault. */
    ssize_t k = send(fd, h, hl, MSG_NOSIGNAL);
    size_t off = 0;
    while (k > 0 && off < sh->big_len) {
        k = send(fd, sh->big + off, sh->big_len - off, MSG_NOSIGNAL);
        if (k > 0)
            off += (size_t)k;
    }
    int send_err = k < 0 ? errno : 0;
    char buf[256];
    ssize_t r = recv(fd, buf, sizeof buf, 0);
    int recv_err = r < 0 ? errno : 0;
    close(fd);
    lat_add(&w->lat_all, now_s() - t0);
    if (r > 0)
        report_wrong(w, kind, "an answer (%zd bytes) to a message of %zu "
                     "bytes", r, sh->big_len);
    else if (r < 0 && (recv_err == EAGAIN || recv_err == EWOULDBLOCK))
        report_wrong(w, kind, "the connection stayed open %d ms after a "
                     "message of %zu bytes (%zu sent%s%s)", sh->timeout_ms,
                     sh->big_len, off, send_err ? ": " : "",
                     send_err ? strerror(send_err) : "");
    else
        w->c.right[kind]++;
}

static int pick_kind(worker *w)
{
    shared *sh = w->sh;
    unsigned x = (unsigned)rnd(w, sh->wsum);
    for (int k = 0; k < K_COUNT; k++) {
        if (x < sh->weights[k])
            return k;
        x -= sh->weights[k];
    }
    return K_GOOD_FRAME;
}

static void *run_worker(void *arg)
{
    worker *w = arg;
    shared *sh = w->sh;
    while (now_s() < sh->t_end) {
        int k = pick_kind(w);
        w->c.sent[k]++;
        switch (k) {
        case K_GOOD_FRAME:
        case K_GOOD_BATCH:
            do_good_frame(w, k);
            break;
        case K_GOOD_JSON: {
            const good *g = &sh->pool[rnd(w, sh->n_pool)];
            check_json(w, k, g->line, g->line_len, g->want_line, g->want_len);
            break;
        }
        case K_BAD_JSON: {
            const bad_line *b = &sh->bl[rnd(w, N_BAD_JSON)];
            check_json(w, k, b->line, strlen(b->line), b->want, b->want_len);
            break;
        }
        case K_BAD_SPEC: do_bad_spec(w, k); break;
        case K_BAD_RESULTS0: do_results0(w, k); break;
        case K_OVERSIZE: do_oversize(w, k); break;
        default: do_bad_frame(w, k); break;
        }
    }
    return NULL;
}

/* ---- set-up ---- */

/* loopback_url accepts ipc://, and tcp:// or tls+tcp:// whose host is
 * localhost or in 127.0.0.0/8. */
static int loopback_url(const char *url)
{
    if (strncmp(url, "ipc://", 6) == 0)
        return url[6] != 0;
    const char *h;
    if (strncmp(url, "tcp://", 6) == 0)
        h = url + 6;
    else if (strncmp(url, "tls+tcp://", 10) == 0)
        h = url + 10;
    else
        return 0;
    const char *colon = strrchr(h, ':');
    if (colon == NULL || colon == h || colon[1] == 0)
        return 0;
    char host[256];
    size_t n = (size_t)(colon - h);
    if (n >= sizeof host)
        return 0;
    memcpy(host, h, n);
    host[n] = 0;
    if (strcmp(host, "localhost") == 0)
        return 1;
    struct in_addr a;
    if (inet_pton(AF_INET, host, &a) != 1)
        return 0;
    return (ntohl(a.s_addr) >> 24) == 127;
}

static int parse_mix(const char *s, unsigned *wt)
{
    unsigned good = 0, bad = 0, over = 0;
    char *dup = strdup(s), *save = NULL;
    if (dup == NULL)
        return -1;
    for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(t, ':');
        unsigned v = 0;
        if (colon) {
            *colon = 0;
            char *end;
            unsigned long x = strtoul(colon + 1, &end, 10);
            if (*end || end == colon + 1 || x == 0 || x > 1000000) {
                fprintf(stderr, "flashtrie loadtest: --mix: bad weight '%s' "
                        "for %s (1..1000000)\n", colon + 1, t);
                free(dup);
                return -1;
            }
            v = (unsigned)x;
        }
        if (!strcmp(t, "good"))
            good = v ? v : 90;
        else if (!strcmp(t, "bad"))
            bad = v ? v : 9;
        else if (!strcmp(t, "oversize"))
            over = v ? v : 1;
        else {
            fprintf(stderr, "flashtrie loadtest: --mix: unknown kind '%s' "
                    "(good, bad, oversize)\n", t);
            free(dup);
            return -1;
        }
    }
    free(dup);
    if (good + bad + over == 0) {
        fprintf(stderr, "flashtrie loadtest: --mix: no kind given\n");
        return -1;
    }
    /* Good traffic: 60% single frames, 20% batches, 20% JSON lines (in
     * units of 5 so that the split is exact). */
    memset(wt, 0, K_COUNT * sizeof *wt);
    wt[K_GOOD_FRAME] = good * 3;
    wt[K_GOOD_BATCH] = good;
    wt[K_GOOD_JSON] = good;
    /* Bad traffic: the same share for each bad kind. */
    for (int k = FIRST_BAD; k < FIRST_BAD + N_BAD; k++)
        wt[k] = bad * 5;
    /* N_BAD kinds share bad's weight: scale the others to match. */
    for (int k = 0; k < 3; k++)
        wt[k] *= N_BAD;
    wt[K_OVERSIZE] = over * 5 * N_BAD;
    return 0;
}

/* info_value finds "key: VALUE" at the start of a line of the INFO text. */
static int info_value(const char *info, const char *key, long long *v)
{
    size_t kl = strlen(key);
    for (const char *p = info; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, key, kl) == 0 && p[kl] == ':') {
            *v = strtoll(p + kl + 1, NULL, 10);
            return 1;
        }
    }
    return 0;
}

static long rss_kb(long pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kb = strtol(line + 6, NULL, 10);
    fclose(f);
    return kb;
}

static int fetch_info(ft_client *cl, char **info)
{
    char err[512];
    int rc = ft_client_info(cl, info, err, sizeof err);
    if (rc != FT_OK)
        fprintf(stderr, "flashtrie loadtest: info: %s\n", err);
    return rc;
}

/* load_pool fills the pool of good requests: the lines of path, or n
 * generated from the index (the "gen requests" generator, same options). */
static int load_pool(shared *sh, const char *path, const ft_library *lib,
                     ft_wl_req_opts *wo)
{
    char *text = NULL;
    size_t tlen = 0;
    if (path == NULL) {
        if (ft_library_is_manifest(lib)) {
            fprintf(stderr, "flashtrie loadtest: INDEX is a manifest: give "
                    "--requests (requests are generated from one index)\n");
            return 2;
        }
        FILE *mf = open_memstream(&text, &tlen);
        if (mf == NULL)
            return 1;
        ft_wl_reqs *g;
        char err[512];
        int rc = ft_wl_reqs_open(&g, ft_library_shard(lib, 0), wo, err,
                                 sizeof err);
        if (rc == FT_OK) {
            rc = ft_wl_reqs_write(g, mf, err, sizeof err);
            ft_wl_reqs_close(g);
        }
        fclose(mf);
        if (rc != FT_OK) {
            fprintf(stderr, "flashtrie loadtest: generating requests: %s\n",
                    err);
            free(text);
            return 1;
        }
    } else {
        FILE *f = fopen(path, "r");
        if (f == NULL) {
            fprintf(stderr, "flashtrie loadtest: %s: %s\n", path,
                    strerror(errno));
            return 1;
        }
        FILE *mf = open_memstream(&text, &tlen);
        char buf[65536];
        size_t n;
        while (mf && (n = fread(buf, 1, sizeof buf, f)) > 0)
            fwrite(buf, 1, n, mf);
        fclose(f);
        if (mf)
            fclose(mf);
        if (text == NULL)
            return 1;
    }
    size_t lines = 0;
    for (size_t i = 0; i < tlen; i++)
        lines += text[i] == '\n';
    sh->pool = calloc(lines + 1, sizeof *sh->pool);
    if (sh->pool == NULL) {
        free(text);
        return 1;
    }
    size_t skipped = 0;
    char *p = text, *end = text + tlen;
    while (p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        good *g = &sh->pool[sh->n_pool];
        ft_jsonl_req_init(&g->q);
        char err[256];
        /* Only lines the server will take as JSON (a '{' first) and that
         * parse are good requests; the others are left out. */
        if (len > 0 && p[0] == '{' &&
            ft_jsonl_parse(&g->q, p, len, err, sizeof err) == FT_OK &&
            (g->line = malloc(len + 1)) != NULL) {
            memcpy(g->line, p, len);
            g->line[len] = 0;
            g->line_len = len;
            sh->n_pool++;
        } else {
            ft_jsonl_req_free(&g->q);
            skipped++;
        }
        p += len + 1;
    }
    free(text);
    if (skipped)
        fprintf(stderr, "flashtrie loadtest: %zu lines of %s left out (not "
                "a request the parser takes)\n", skipped,
                path ? path : "the generated requests");
    if (sh->n_pool == 0) {
        fprintf(stderr, "flashtrie loadtest: no good request to send\n");
        return 1;
    }
    return 0;
}

/* expect computes every expected answer with the engine, here. */
static int expect(shared *sh, ft_searcher *eng, uint32_t max_beam)
{
    ft_buf out;
    ft_buf_init(&out);
    for (size_t i = 0; i < sh->n_pool; i++) {
        good *g = &sh->pool[i];
        uint32_t n = g->q.req.results ? g->q.req.results : g->q.req.beam;
        if (n > FT_MAX_BEAM)
            n = FT_MAX_BEAM;
        if (ft_result_alloc(&g->res, n ? n : 1, FT_MAX_T) != FT_OK)
            return 1;
        int rc = ft_searcher_search_batch(eng, &g->q.req, 1, &g->res);
        if (rc != FT_OK) {
            fprintf(stderr, "flashtrie loadtest: %s failed: %s\n",
                    ft_searcher_note(eng), ft_strerror(rc));
            return 1;
        }
        char verr[sizeof g->res.error];
        if (g->res.status == FT_OK &&
            ft_request_validate(&g->q.req, max_beam, verr, sizeof verr)) {
            /* The server's beam cap is lower than the engine's: its
             * answer is the validator's refusal under that cap. */
            g->res.status = FT_EREQUEST;
            g->res.n = 0;
            snprintf(g->res.error, sizeof g->res.error, "%s", verr);
        }
        out.len = 0;
        if (ft_jsonl_encode_result(&out, &g->q, &g->res) != FT_OK ||
            (g->want_line = malloc(out.len)) == NULL)
            return 1;
        memcpy(g->want_line, out.data, out.len);
        g->want_len = out.len;
    }
    /* Bad JSON lines: the error line "flashtrie search" prints. */
    ft_jsonl_req q;
    ft_jsonl_req_init(&q);
    ft_result r;
    memset(&r, 0, sizeof r);
    if (ft_result_alloc(&r, 16, FT_MAX_T) != FT_OK)
        return 1;
    for (size_t i = 0; i < N_BAD_JSON; i++) {
        char err[256];
        const char *line = bad_json[i];
        out.len = 0;
        int rc = ft_jsonl_parse(&q, line, strlen(line), err, sizeof err);
        if (rc == FT_OK) {
            if (ft_searcher_search_batch(eng, &q.req, 1, &r) != FT_OK)
                return 1;
            rc = ft_jsonl_encode_result(&out, &q, &r);
        } else {
            rc = ft_jsonl_encode_error(&out, &q, err);
        }
        if (rc != FT_OK || (sh->bl[i].want = malloc(out.len)) == NULL)
            return 1;
        sh->bl[i].line = line;
        memcpy(sh->bl[i].want, out.data, out.len);
        sh->bl[i].want_len = out.len;
    }
    ft_result_free(&r);
    ft_jsonl_req_free(&q);
    ft_buf_free(&out);

    /* SPEC section 3 violations built from the first good request. */
    const ft_request *base = &sh->pool[0].q.req;
    size_t cells = (size_t)base->T * base->K;
    enum { NB = 7 };
    sh->br = calloc(NB, sizeof *sh->br);
    if (sh->br == NULL)
        return 1;
    for (size_t i = 0; i < NB; i++) {
        bad_req *b = &sh->br[i];
        b->tok = malloc(cells * sizeof *b->tok);
        b->lp = malloc(cells * sizeof *b->lp);
        if (!b->tok || !b->lp)
            return 1;
        memcpy(b->tok, base->tokens, cells * sizeof *b->tok);
        memcpy(b->lp, base->logp, cells * sizeof *b->lp);
        b->r = *base;
        b->r.tokens = b->tok;
        b->r.logp = b->lp;
        switch (i) {
        case 0: b->r.beam = 0; break;
        case 1: b->r.beam = FT_MAX_BEAM + 1; break;
        case 2: b->r.results = FT_MAX_BEAM + 1; break;
        case 3: b->r.alpha = -0.5; break;
        case 4: b->r.alpha = 10.5; break;
        case 5: b->lp[cells / 2] = NAN; break;
        case 6:
            if (base->K > 1)
                b->tok[cells - 1] = b->tok[cells - 2];
            else
                b->lp[0] = INFINITY;
            break;
        }
        if (ft_request_validate(&b->r, max_beam, b->want, sizeof b->want) !=
            FT_EREQUEST) {
            fprintf(stderr, "flashtrie loadtest: bad request %zu passes the "
                    "validator\n", i);
            return 1;
        }
    }
    sh->n_br = NB;
    return 0;
}

int cmd_loadtest(int argc, char **argv)
{
    enum { O_URL = 256, O_INDEX, O_CLIENTS, O_SECONDS, O_MIX, O_REQUESTS,
           O_SEED, O_POOL, O_PID, O_MAXMSG, O_RSS, O_TIMEOUT, O_CA };
    static const struct option opts[] = {
        {"url", required_argument, 0, O_URL},
        {"index", required_argument, 0, O_INDEX},
        {"clients", required_argument, 0, O_CLIENTS},
        {"seconds", required_argument, 0, O_SECONDS},
        {"mix", required_argument, 0, O_MIX},
        {"requests", required_argument, 0, O_REQUESTS},
        {"seed", required_argument, 0, O_SEED},
        {"pool", required_argument, 0, O_POOL},
        {"server-pid", required_argument, 0, O_PID},
        {"max-message-bytes", required_argument, 0, O_MAXMSG},
        {"max-rss-growth", required_argument, 0, O_RSS},
        {"timeout-ms", required_argument, 0, O_TIMEOUT},
        {"tls-ca", required_argument, 0, O_CA},
        {"T", required_argument, 0, 'T'}, {"K", required_argument, 0, 'K'},
        {"head", required_argument, 0, 'H'},
        {"results", required_argument, 0, 'R'},
        {"theta-tok", required_argument, 0, 'a'},
        {"theta-sent", required_argument, 0, 'b'},
        {"alpha", required_argument, 0, 'A'},
        {"beam", required_argument, 0, 'B'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    const char *url = NULL, *index = NULL, *mix = "good,bad,oversize",
               *requests = NULL, *tls_ca = NULL;
    uint32_t clients = 64, seconds = 60, pool = 256, timeout = 10000;
    unsigned long long seed = 1, pid = 0, maxmsg = 0;
    double rss_growth = -1;
    ft_wl_req_opts wo;
    ft_wl_req_opts_init(&wo);
    int c;
    optind = 1;
    opterr = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        int r = ft_cli_req_opt(c, optarg, &wo);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        switch (c) {
        case O_URL: url = optarg; break;
        case O_INDEX: index = optarg; break;
        case O_MIX: mix = optarg; break;
        case O_REQUESTS: requests = optarg; break;
        case O_CA: tls_ca = optarg; break;
        case O_CLIENTS:
            if (ft_cli_parse_u32("--clients", optarg, 1, 1024, &clients))
                return 2;
            break;
        case O_SECONDS:
            if (ft_cli_parse_u32("--seconds", optarg, 1, 86400, &seconds))
                return 2;
            break;
        case O_POOL:
            if (ft_cli_parse_u32("--pool", optarg, 1, 100000, &pool))
                return 2;
            break;
        case O_TIMEOUT:
            if (ft_cli_parse_u32("--timeout-ms", optarg, 1, 600000, &timeout))
                return 2;
            break;
        case O_SEED:
            if (ft_cli_parse_count("flashtrie loadtest", "--seed", optarg, 0,
                                   &seed))
                return 2;
            break;
        case O_PID:
            if (ft_cli_parse_count("flashtrie loadtest", "--server-pid",
                                   optarg, 1, &pid))
                return 2;
            break;
        case O_MAXMSG:
            if (ft_cli_parse_bytes(optarg, &maxmsg) || maxmsg == 0 ||
                maxmsg > (1ull << 32)) {
                fprintf(stderr, "flashtrie loadtest: --max-message-bytes: "
                        "expected a byte count 1..4G, got '%s'\n", optarg);
                return 2;
            }
            break;
        case O_RSS:
            if (ft_cli_parse_f64(optarg, &rss_growth) || !(rss_growth >= 0)) {
                fprintf(stderr, "flashtrie loadtest: --max-rss-growth: "
                        "expected a percentage >= 0, got '%s'\n", optarg);
                return 2;
            }
            break;
        case 'B':
            if (ft_cli_parse_u32("--beam", optarg, 1, FT_MAX_BEAM, &wo.beam))
                return 2;
            break;
        case 'h': fputs(usage_text, stdout); return 0;
        default: fputs(usage_text, stderr); return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "flashtrie loadtest: unexpected argument '%s'\n",
                argv[optind]);
        return 2;
    }
    if (url == NULL || index == NULL) {
        fprintf(stderr, "flashtrie loadtest: --url and --index are "
                "required\n");
        fputs(usage_text, stderr);
        return 2;
    }
    if (!loopback_url(url)) {
        fprintf(stderr, "flashtrie loadtest: --url: '%s' is not a loopback "
                "server (ipc://PATH, or tcp:// or tls+tcp:// on localhost or "
                "127.0.0.0/8)\n", url);
        return 2;
    }
    static shared sh;
    memset(&sh, 0, sizeof sh);
    if (parse_mix(mix, sh.weights))
        return 2;
    for (int k = 0; k < K_COUNT; k++)
        sh.wsum += sh.weights[k];
    sh.url = url;
    sh.seed = seed;
    sh.timeout_ms = (int)timeout;
    sh.tls_ca = tls_ca;
    wo.n = pool;
    wo.seed = seed;

    char err[512];
    ft_library *lib;
    if (ft_library_open(&lib, index, 0, err, sizeof err) != FT_OK) {
        fprintf(stderr, "flashtrie loadtest: %s\n", err);
        return 1;
    }
    int st = load_pool(&sh, requests, lib, &wo);
    if (st != 0) {
        ft_library_close(lib);
        return st;
    }

    ft_client_opts_init(&sh.co);
    sh.co.timeout_ms = (int)timeout;
    sh.co.tls_ca = tls_ca;
    ft_client *admin;
    if (ft_client_connect(&admin, url, &sh.co, err, sizeof err) != FT_OK) {
        fprintf(stderr, "flashtrie loadtest: %s\n", err);
        ft_library_close(lib);
        return 1;
    }
    char *info = NULL;
    if (fetch_info(admin, &info) != FT_OK) {
        ft_client_close(admin);
        ft_library_close(lib);
        return 1;
    }
    long long v;
    if (pid == 0 && info_value(info, "pid", &v) && v > 0)
        pid = (unsigned long long)v;
    if (maxmsg == 0 && info_value(info, "max_message_bytes", &v) && v > 0)
        maxmsg = (unsigned long long)v;
    uint32_t max_beam = 0;
    if (info_value(info, "caps.max_beam", &v) && v > 0 && v <= FT_MAX_BEAM)
        max_beam = (uint32_t)v;
    free(info);
    if (sh.weights[K_OVERSIZE] && strncmp(url, "tls+tcp://", 10) == 0) {
        fprintf(stderr, "flashtrie loadtest: --mix oversize is written by "
                "hand on a plain socket: ipc:// and tcp:// only\n");
        ft_client_close(admin);
        ft_library_close(lib);
        return 2;
    }
    if (maxmsg == 0 && sh.weights[K_OVERSIZE]) {
        fprintf(stderr, "flashtrie loadtest: the server's INFO gives no "
                "max_message_bytes: give --max-message-bytes\n");
        ft_client_close(admin);
        ft_library_close(lib);
        return 2;
    }

    ft_searcher_opts so;
    ft_searcher_opts_init(&so);
    so.engine.kind = FT_ENGINE_CPU;
    so.engine.threads = 1;
    ft_searcher *eng = NULL;
    if (ft_searcher_open(&eng, lib, &so, err, sizeof err) != FT_OK) {
        fprintf(stderr, "flashtrie loadtest: engine: %s\n", err);
        ft_client_close(admin);
        ft_library_close(lib);
        return 1;
    }
    st = expect(&sh, eng, max_beam);
    ft_searcher_close(eng);
    if (st != 0) {
        fprintf(stderr, "flashtrie loadtest: cannot compute the expected "
                "answers\n");
        ft_client_close(admin);
        ft_library_close(lib);
        return 1;
    }

    /* The oversize message: a SEARCH header claiming the rest as payload,
     * one byte over the cap (and a little more, varied by the seed). */
    if (sh.weights[K_OVERSIZE]) {
        sh.big_len = (size_t)maxmsg + 1 + (size_t)(seed % 4096);
        sh.big = calloc(1, sh.big_len);
        if (sh.big == NULL) {
            fprintf(stderr, "flashtrie loadtest: out of memory\n");
            return 1;
        }
        ft_buf hb;
        ft_buf_init(&hb);
        ft_frame_encode_ping(&hb, 1);
        memcpy(sh.big, hb.data, hb.len < sh.big_len ? hb.len : sh.big_len);
        ft_buf_free(&hb);
    }

    long rss0 = pid ? rss_kb((long)pid) : -1;
    worker *ws = calloc(clients, sizeof *ws);
    pthread_t *th = calloc(clients, sizeof *th);
    if (!ws || !th) {
        fprintf(stderr, "flashtrie loadtest: out of memory\n");
        return 1;
    }
    for (uint32_t i = 0; i < clients; i++) {
        worker *w = &ws[i];
        w->sh = &sh;
        w->id = i;
        ft_wl_rng_seed(&w->rng, ft_wl_mix(seed, i));
        ft_frame_msg_init(&w->m);
        ft_frame_msg_init(&w->local);
        ft_buf_init(&w->b);
        w->next_id = (uint64_t)i << 40;
        if (ft_client_connect(&w->cl, url, &sh.co, err, sizeof err) != FT_OK) {
            fprintf(stderr, "flashtrie loadtest: client %u: %s\n", i, err);
            return 1;
        }
    }
    fprintf(stderr, "flashtrie loadtest: %u clients for %u s against %s "
            "(%zu good requests in the pool, server pid %llu, "
            "max_message_bytes %llu)\n", clients, seconds, url, sh.n_pool,
            pid, maxmsg);
    double t0 = now_s();
    sh.t_end = t0 + seconds;
    for (uint32_t i = 0; i < clients; i++)
        pthread_create(&th[i], NULL, run_worker, &ws[i]);
    /* The RSS after the warm-up (a fifth of the run, at most 10 s): what
     * the server holds once every context and buffer has been used, the
     * base against which growth means a leak. */
    double warm = seconds / 5.0 > 10 ? 10 : seconds / 5.0;
    while (now_s() < t0 + warm) {
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
    }
    long rss_warm = pid ? rss_kb((long)pid) : -1;
    for (uint32_t i = 0; i < clients; i++)
        pthread_join(th[i], NULL);
    double elapsed = now_s() - t0;

    counts tot;
    memset(&tot, 0, sizeof tot);
    lat lg = {0}, la = {0};
    uint64_t conn_errors = 0;
    for (uint32_t i = 0; i < clients; i++) {
        worker *w = &ws[i];
        for (int k = 0; k < K_COUNT; k++) {
            tot.sent[k] += w->c.sent[k];
            tot.right[k] += w->c.right[k];
            tot.wrong[k] += w->c.wrong[k];
            tot.busy[k] += w->c.busy[k];
        }
        tot.good_reqs += w->c.good_reqs;
        lat_merge(&lg, &w->lat_good);
        lat_merge(&la, &w->lat_all);
        conn_errors += w->conn_errors;
        free(w->lat_good.us);
        free(w->lat_all.us);
        ft_client_close(w->cl);
        if (w->raw_open)
            nng_close(w->raw);
        if (w->tls)
            nng_tls_config_free(w->tls);
        ft_frame_msg_free(&w->m);
        ft_frame_msg_free(&w->local);
        ft_buf_free(&w->b);
        free(w->scratch);
    }

    /* Every message was answered; the server must have none left in
     * flight (give its last replies a moment to be counted).  INFO's
     * in_flight counts the INFO message itself, being answered: 1 is an
     * idle server. */
    long long inflight = -1;
    for (int i = 0; i < 50; i++) {
        if (fetch_info(admin, &info) != FT_OK)
            break;
        int have = info_value(info, "in_flight", &inflight);
        free(info);
        if (have)
            inflight--;
        if (!have || inflight == 0)
            break;
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
    }
    long rss1 = pid ? rss_kb((long)pid) : -1;
    ft_client_close(admin);

    uint64_t sent = 0, right = 0, wrong = 0, busy = 0, good_ok = 0;
    for (int k = 0; k < K_COUNT; k++) {
        sent += tot.sent[k];
        right += tot.right[k];
        wrong += tot.wrong[k];
        busy += tot.busy[k];
    }
    good_ok = tot.right[K_GOOD_FRAME] + tot.right[K_GOOD_BATCH] +
              tot.right[K_GOOD_JSON];
    printf("loadtest: %u clients, %.1f s, %s, mix %s\n", clients, elapsed,
           url, mix);
    printf("messages: %llu sent, %llu right, %llu wrong, %llu busy "
           "(%.0f messages/s)\n", (unsigned long long)sent,
           (unsigned long long)right, (unsigned long long)wrong,
           (unsigned long long)busy, (double)sent / elapsed);
    printf("good requests answered right: %llu, %.0f q/s (in frames of 1, "
           "batches of 2..8, JSON lines, and beside bad requests)\n",
           (unsigned long long)tot.good_reqs, (double)tot.good_reqs / elapsed);
    printf("%-18s %10s %10s %8s %8s\n", "kind", "sent", "right", "wrong",
           "busy");
    for (int k = 0; k < K_COUNT; k++)
        if (tot.sent[k])
            printf("%-18s %10llu %10llu %8llu %8llu\n", kind_name[k],
                   (unsigned long long)tot.sent[k],
                   (unsigned long long)tot.right[k],
                   (unsigned long long)tot.wrong[k],
                   (unsigned long long)tot.busy[k]);
    lat_print(stdout, "good", &lg);
    lat_print(stdout, "all", &la);
    if (conn_errors)
        printf("connection errors on good calls: %llu\n",
               (unsigned long long)conn_errors);
    printf("server in_flight after the run: %lld (not counting the INFO "
           "asking)\n", inflight);
    int status = wrong == 0 && good_ok > 0 && inflight == 0 ? 0 : 1;
    if (pid) {
        printf("server rss (kB): start %ld, after warm-up (%.1f s) %ld, "
               "end %ld", rss0, warm, rss_warm, rss1);
        if (rss_warm > 0 && rss1 > 0) {
            double g = 100.0 * (double)(rss1 - rss_warm) / (double)rss_warm;
            printf(" (%+.1f%% after the warm-up)", g);
            if (rss_growth >= 0 && g > rss_growth) {
                printf(": more than --max-rss-growth %.1f%%", rss_growth);
                status = 1;
            }
        } else if (rss_growth >= 0) {
            printf(": cannot read /proc/%llu/status", pid);
            status = 1;
        }
        printf("\n");
    } else if (rss_growth >= 0) {
        printf("server rss: unknown (no pid)\n");
        status = 1;
    }
    if (good_ok == 0)
        printf("no good request was answered right\n");
    printf("result: %s\n", status == 0 ? "every answer right" : "FAILED");
    fflush(stdout);

    free(lg.us);
    free(la.us);
    free(ws);
    free(th);
    for (size_t i = 0; i < sh.n_pool; i++) {
        ft_jsonl_req_free(&sh.pool[i].q);
        ft_result_free(&sh.pool[i].res);
        free(sh.pool[i].line);
        free(sh.pool[i].want_line);
    }
    free(sh.pool);
    for (size_t i = 0; i < N_BAD_JSON; i++)
        free(sh.bl[i].want);
    for (size_t i = 0; i < sh.n_br; i++) {
        free(sh.br[i].tok);
        free(sh.br[i].lp);
    }
    free(sh.br);
    free(sh.big);
    ft_library_close(lib);
    return status;
}
