/* loadtest_run.c - "flashtrie loadtest": one client (loadtest.h): its
 * latencies, the messages of each kind (good frames, batches and JSON
 * lines, malformed frames, bad JSON lines, specification violations, oversize
 * messages) and the check of every answer against the expected one. */
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

#include "close_within.h"
#include "flashtrie/internal/clock.h"
#include "loadtest.h"

const char *lt_kind_name[K_COUNT] = {
    "good.frame", "good.batch", "good.json", "bad.magic", "bad.version",
    "bad.type", "bad.truncated", "bad.short_header", "bad.trailing",
    "bad.checksum", "bad.garbage", "bad.reply_type", "bad.json",
    "bad.spec", "bad.results0", "oversize", "maxsize", "half", "idle"};

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

void lt_lat_merge(lat *to, const lat *from)
{
    for (size_t i = 0; i < from->n; i++)
        lat_add(to, (double)from->us[i] / 1e6);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

void lt_lat_print(FILE *f, const char *what, lat *l)
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
            w->id, lt_kind_name[kind], msg);
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

static void tls_free(void *tls) { nng_tls_config_free(tls); }

void lt_raw_close(worker *w)
{
    if (!w->raw_open)
        return;
    nng_tls_config *tls = w->tls;
    w->raw_open = 0;
    w->tls = NULL;
    /* The dialer's TLS configuration is freed once nng is done with it. */
    if (!fti_nng_close_within(w->raw, tls ? tls_free : NULL, tls))
        w->raw_unclosed++;
}

int lt_raw_open(worker *w)
{
    if (w->raw_open)
        return 0;
    int rv = nng_req0_open(&w->raw);
    if (rv != 0)
        return rv;
    w->raw_open = 1; /* a failure below closes it (lt_raw_close) */
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
    return 0;
fail:
    lt_raw_close(w);
    return rv;
}

/* raw_send_recv sends len bytes and waits for the answer: 0 and the
 * message, or the nng error. */
static int raw_send_recv(worker *w, const void *p, size_t len, nng_msg **out)
{
    int rv = lt_raw_open(w);
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

/* raw_call is raw_send_recv timed: its wall time goes to lat_all (and
 * *dt, when given). */
static int raw_call(worker *w, const void *p, size_t len, nng_msg **out,
                    double *dt)
{
    double t0 = fti_now();
    int rv = raw_send_recv(w, p, len, out);
    double d = fti_now() - t0;
    lat_add(&w->lat_all, d);
    if (dt)
        *dt = d;
    return rv;
}

static uint64_t rnd(worker *w, uint64_t n)
{
    return ft_wl_next(&w->rng) % n;
}

/* ---- one message of each kind ---- */

/* client_search sends reqs[0..n) as one message through the worker's
 * client (with --coalesce, the handle all workers share, where calls made
 * at once share frames) and adds its latency (*dt) to lat_all: 0 when it
 * was answered (*res); -1 after counting a BUSY, or counting and
 * reporting a failure. */
static int client_search(worker *w, int kind, const ft_request *reqs,
                         size_t n, ft_client_results **res, double *dt)
{
    char err[512];
    double t0 = fti_now();
    ft_client *cl = w->cl ? w->cl : w->sh->co_cl;
    int rc = ft_client_search(cl, reqs, n, res, err, sizeof err);
    *dt = fti_now() - t0;
    lat_add(&w->lat_all, *dt);
    if (rc == FT_EBUSY) {
        w->c.busy[kind]++;
        return -1;
    }
    if (rc != FT_OK) {
        if (rc == FT_ECONN)
            w->conn_errors++;
        report_wrong(w, kind, "the call failed: %s (%s)", err,
                     ft_strerror(rc));
        return -1;
    }
    return 0;
}

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
    double dt;
    if (client_search(w, kind, reqs, n, &res, &dt) != 0)
        return;
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
    double dt;
    int rv = raw_call(w, line, len, &msg, &dt);
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

/* check_answer checks the answer to a malformed message (rv: raw_call's
 * result; msg freed here): an ERROR frame with code and message (and the
 * id the decoder read), as decoded here. */
static void check_answer(worker *w, int kind, int rv, nng_msg *msg, int code,
                         const char *want, uint64_t want_id)
{
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

/* check_error sends p (len bytes) on the worker's raw socket and checks
 * that the answer is an ERROR frame of code, want and want_id. */
static void check_error(worker *w, int kind, const void *p, size_t len,
                        int code, const char *want, uint64_t want_id)
{
    nng_msg *msg = NULL;
    int rv = raw_call(w, p, len, &msg, NULL);
    check_answer(w, kind, rv, msg, code, want, want_id);
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
        /* Only 'F' makes a frame (anything else is a JSON line): this
         * kind is about frames. */
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
    double dt;
    if (client_search(w, kind, reqs, 3, &res, &dt) != 0)
        return;
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
    int rv = raw_call(w, w->b.data, w->b.len, &msg, NULL);
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
    double t0 = fti_now();
    int fd = stream_connect(sh->url, sh->timeout_ms);
    if (fd < 0) {
        lat_add(&w->lat_all, fti_now() - t0);
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
    lat_add(&w->lat_all, fti_now() - t0);
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

/* rx_state reads the server's receive limit in force and how many times
 * it was lowered, from INFO on the worker's own connection (with
 * --coalesce, the shared handle's; no new connection, which would lower
 * it): 1 when the server gives both. */
static int rx_state(worker *w, long long *lim, long long *lowered)
{
    char *info = NULL, err[256];
    if (ft_client_info(w->cl ? w->cl : w->sh->co_cl, &info, err,
                       sizeof err) != FT_OK)
        return 0;
    int ok = lt_info_value(info, "receive_limit_bytes", lim) &&
             lt_info_value(info, "receive_limit_lowered", lowered);
    free(info);
    return ok;
}

/* do_maxsize sends a frame of about max_message_bytes (a SEARCH padded
 * with zeros): under the limit, so the server reads it whole and answers
 * ERROR, the decoder's message for the trailing bytes.  The server lowers
 * its receive limit while many connections are open (docs/config.md,
 * memory_budget_bytes), so the frame is cut to the limit in force (INFO's
 * receive_limit_bytes, read just before; maxsz_cut counts those).  The
 * limit may come down again while the frame is on its way: closed
 * unread, as documented, counts as right (maxsz_over) when the limit was
 * under the frame's size after it was closed or was lowered in between
 * (receive_limit_lowered, read on either side; otherwise it only rises).
 * Closed while the limit stayed above the frame is wrong. */
static void do_maxsize(worker *w, int kind)
{
    shared *sh = w->sh;
    long long lim0 = 0, low0 = 0, lim1 = 0, low1 = 0;
    int have0 = rx_state(w, &lim0, &low0);
    size_t len = sh->maxsz_len;
    const char *want = sh->maxsz_want;
    char cut_want[256];
    /* nng's own header counts against the limit */
    long long room = lim0 - LT_NNG_SPARE;
    if (have0 && room < (long long)len) {
        len = room > (long long)sh->maxsz_min ? (size_t)room : sh->maxsz_min;
        if (ft_frame_decode(&w->local, sh->maxsz, len, 0, cut_want,
                            sizeof cut_want) != FT_EPROTO) {
            report_wrong(w, kind, "the frame cut to %zu bytes decodes", len);
            return;
        }
        want = cut_want;
        w->c.maxsz_cut++;
    }
    nng_msg *msg = NULL;
    int rv = raw_call(w, sh->maxsz, len, &msg, NULL);
    long long need = (long long)len + LT_NNG_SPARE;
    if (rv != 0 && have0 && rx_state(w, &lim1, &low1)) {
        if (lim0 < need || lim1 < need || low1 != low0) {
            w->c.right[kind]++;
            w->c.maxsz_over++;
        } else {
            report_wrong(w, kind, "no answer: %s (the server's receive "
                         "limit stayed %lld bytes, over the frame's %zu, "
                         "never lowered meanwhile)", nng_strerror(rv), lim0,
                         len);
        }
        return;
    }
    check_answer(w, kind, rv, msg, FT_EPROTO, want, sh->maxsz_id);
}

/* silent_check looks at w's silent connections (waiting, when wait, until
 * each is resolved): closed by the server is right; an answer, or open
 * past the server's idle_timeout_ms and --timeout-ms, is wrong. */
static void silent_check(worker *w, int wait)
{
    shared *sh = w->sh;
    for (int i = 0; i < w->n_silent;) {
        struct silent *q = &w->silent[i];
        char buf[64];
        ssize_t r;
        for (;;) {
            r = recv(q->fd, buf, sizeof buf, MSG_DONTWAIT);
            double age = fti_now() - q->t0;
            if (r >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
                break;
            if (age * 1000.0 > (double)sh->idle_ms + sh->timeout_ms) {
                r = -2;
                break;
            }
            if (!wait)
                break;
            struct timespec ts = {0, 5000000};
            nanosleep(&ts, NULL);
        }
        if (r == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            i++; /* still open, still in time */
            continue;
        }
        double dt = fti_now() - q->t0;
        const char *what = q->kind == K_HALF ? "half a message" : "nothing";
        if (r > 0)
            report_wrong(w, q->kind, "an answer (%zd bytes) to %s", r, what);
        else if (r == -2)
            report_wrong(w, q->kind, "the connection stayed open %.1f s after "
                         "%s (the server's idle_timeout_ms is %u)", dt, what,
                         sh->idle_ms);
        else
            w->c.right[q->kind]++;
        lat_add(&w->lat_all, dt);
        close(q->fd);
        *q = w->silent[--w->n_silent];
    }
}

/* do_silent opens a plain connection that sends half a message (half) or
 * nothing after the handshake, and leaves it to silent_check: the server
 * must close it after its idle_timeout_ms, without an answer.  The worker
 * goes on with other messages meanwhile (its other connections are not
 * left idle alongside). */
static void do_silent(worker *w, int kind, int half)
{
    shared *sh = w->sh;
    if (w->n_silent >= sh->max_silent) {
        /* Full (its share of the server's max_connections, at most the
         * 16 it can follow): a good message instead of waiting (a worker
         * that waited would leave its own connections idle as long). */
        w->c.sent[kind]--;
        w->c.sent[K_GOOD_FRAME]++;
        do_good_frame(w, K_GOOD_FRAME);
        return;
    }
    double t0 = fti_now();
    int fd = stream_connect(sh->url, sh->timeout_ms);
    if (fd < 0) {
        report_wrong(w, kind, "cannot connect: %s", strerror(errno));
        return;
    }
    if (half) {
        /* A header saying 1000 bytes, then 500 of them. */
        unsigned char h[13 + 500];
        size_t hl = 0;
        memset(h, 0, sizeof h);
        if (strncmp(sh->url, "ipc://", 6) == 0)
            h[hl++] = 1;
        uint64_t len = 1000 + 4;
        for (int i = 0; i < 8; i++)
            h[hl++] = (unsigned char)(len >> (56 - 8 * i));
        uint32_t rid = 0x80000000u | (uint32_t)(++w->next_id & 0x7fffffff);
        for (int i = 0; i < 4; i++)
            h[hl++] = (unsigned char)(rid >> (24 - 8 * i));
        if (send(fd, h, hl + 500, MSG_NOSIGNAL) != (ssize_t)(hl + 500)) {
            close(fd);
            report_wrong(w, kind, "cannot send half a message: %s",
                         strerror(errno));
            return;
        }
    }
    w->silent[w->n_silent++] = (struct silent){fd, kind, t0};
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

void *lt_run_worker(void *arg)
{
    worker *w = arg;
    shared *sh = w->sh;
    while (fti_now() < sh->t_end) {
        if (w->n_silent)
            silent_check(w, 0);
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
        case K_MAXSIZE: do_maxsize(w, k); break;
        case K_HALF: do_silent(w, k, 1); break;
        case K_IDLE: do_silent(w, k, 0); break;
        default: do_bad_frame(w, k); break;
        }
    }
    silent_check(w, 1);
    return NULL;
}
