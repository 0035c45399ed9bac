/*
 * serve_ctx.c - one nng context's life: receive a message, decode it,
 * validate, queue its requests, and reply when the last one is answered.
 *
 * Every socket runs many contexts, each an aio state machine:
 *   RECV  nng_ctx_recv completed: decode; answer at once (errors, INFO,
 *         PING, RELOAD, BUSY) or queue the requests and go to WAIT
 *   WAIT  the batcher's workers answer the jobs; the last one encodes the
 *         reply and sends it
 *   SEND  nng_ctx_send completed: receive the next message
 * A context handles one message at a time, so its buffers (parsed
 * request, results, reply) are reused without locks, and a bad message
 * only ever costs its own context one error reply.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include "serve_ctx.h"
#include "serve_info.h"
#include "serve_priv.h"
#include "serve_wire.h"

enum { CTX_RECV, CTX_WAIT, CTX_SEND };

#ifdef FT_SERVE_TRACE
/* A benchmark build (-DFT_SERVE_TRACE) sums, over single-request
 * messages, the time from a message's arrival to its decoded jobs, to its
 * answer, and to its reply handed to nng, and logs the means at exit:
 * where the daemon's own share of a b = 1 request goes. */
static atomic_uint_fast64_t tr_n, tr_decode, tr_answer, tr_encode, tr_inline;
#endif

typedef struct srv_ctx {
    srv_socket *s;
    nng_ctx ctx;
    nng_aio *aio;
    int state;
    atomic_int closing; /* set by the closing thread, read in nng callbacks */
    nng_msg *msg;
    uint64_t t0;
#ifdef FT_SERVE_TRACE
    uint64_t t_dec;
    int inl;
#endif
    srv_wire w;            /* the decoded message and its jobs */
    atomic_size_t pending; /* jobs queued and not yet answered */
    ft_buf out;
    nng_pipe pipe;         /* the connection the message came on */
} srv_ctx;

/* A reply that cannot be handed to its connection within this time means
 * the peer stopped reading: its connection is closed, so that it holds no
 * context (every other client would wait on it) and cannot stall a
 * drain.  Its unread replies are lost with it; a client that reads again
 * retries on a new connection. */
#define SEND_TIMEOUT_MS 1000

/* ctx_recv waits for the next message, with no timeout (a send before it
 * set one on the same aio). */
static void ctx_recv(srv_ctx *c)
{
    nng_aio_set_timeout(c->aio, NNG_DURATION_INFINITE);
    nng_ctx_recv(c->ctx, c->aio);
}

static void ctx_send(srv_ctx *c)
{
    server *srv = c->s->srv;
    nng_msg_clear(c->msg);
    if (nng_msg_append(c->msg, c->out.data, c->out.len) != 0) {
        /* Out of memory for the reply: the client's request times out,
         * which beats a truncated answer. */
        FT_LOGF(FT_LOG_ERROR, "reply of %zu bytes: out of memory; dropped", c->out.len);
        nng_msg_free(c->msg);
        c->msg = NULL;
        atomic_fetch_sub(&srv->inflight, 1);
        c->state = CTX_RECV;
        ctx_recv(c);
        return;
    }
    FT_LOGF(FT_LOG_DEBUG, "context %p: reply of %zu bytes", (void *)c, c->out.len);
    nng_aio_set_msg(c->aio, c->msg);
    c->msg = NULL;
    c->state = CTX_SEND;
    nng_aio_set_timeout(c->aio, SEND_TIMEOUT_MS);
    nng_ctx_send(c->ctx, c->aio);
}

/* job_done runs on a replica worker when one of this context's jobs is
 * answered; the last one encodes and sends the reply. */
static void job_done(ft_job *j)
{
    srv_ctx *c = j->arg;
    if (atomic_fetch_sub(&c->pending, 1) != 1)
        return;
    server *srv = c->s->srv;
    uint64_t ns = fti_now_ns() - c->t0;
    for (size_t i = 0; i < c->w.n_jobs; i++)
        srv_count(srv, c->w.res[i].status, ns);
    c->out.len = 0;
    srv_wire_encode_results(&c->w, &c->out);
#ifdef FT_SERVE_TRACE
    if (c->w.n_jobs == 1) {
        uint64_t t = fti_now_ns();
        atomic_fetch_add(&tr_n, 1);
        atomic_fetch_add(&tr_decode, c->t_dec - c->t0);
        atomic_fetch_add(&tr_answer, c->t0 + ns - c->t_dec);
        atomic_fetch_add(&tr_encode, t - (c->t0 + ns));
        atomic_fetch_add(&tr_inline, (uint64_t)c->inl);
    }
#endif
    ctx_send(c);
}

/* ctx_reply_later sends the reply that a thread which took the message
 * over (SRV_WIRE_LATER) has written into c->out. */
static void ctx_reply_later(void *arg)
{
    ctx_send(arg);
}

static void handle(srv_ctx *c)
{
    server *srv = c->s->srv;
    const unsigned char *p = nng_msg_body(c->msg);
    size_t len = nng_msg_len(c->msg);
    c->out.len = 0;
    atomic_fetch_add(&srv->messages, 1);
    srv_wire_ctx wc = {srv, c->s->lo.admin, ctx_reply_later, c};
    int act = srv_wire_decode(&c->w, &wc, p, len, &c->out);
    if (act == SRV_WIRE_LATER)
        return; /* c is the other thread's until ctx_reply_later */
    if (act == SRV_WIRE_REPLY) {
        ctx_send(c);
        return;
    }
    /* SRV_WIRE_QUEUE: the jobs are ready.  Set WAIT and the count before
     * the push, as a worker may answer them at once. */
    size_t n = c->w.n_jobs;
    for (size_t i = 0; i < n; i++) {
        c->w.jobs[i].done = job_done;
        c->w.jobs[i].arg = c;
        c->w.items[i] = &c->w.jobs[i];
    }
    c->state = CTX_WAIT;
    atomic_store(&c->pending, n);
#ifdef FT_SERVE_TRACE
    c->t_dec = fti_now_ns();
    c->inl = 1;
#endif
#ifdef FT_SERVE_INLINE
    /* A lone request on an idle server runs here, on nng's thread: no
     * hand-off to the batcher and back; job_done has then replied.  Off by
     * default: on the 2-core box it added ~100 us at b = 1 against the
     * batcher's own thread (docs/BENCHMARKS.md, "Daemon overhead"); a
     * benchmark build can try it on other hosts. */
    if (n == 1 && ft_batcher_run_inline(srv->batcher, &c->w.jobs[0]))
        return;
#endif
#ifdef FT_SERVE_TRACE
    c->inl = 0; /* job_done has not run: the job is not queued yet */
#endif
    int rc = ft_queue_push_n(&srv->queue, c->w.items, n);
    FT_LOGF(FT_LOG_DEBUG, "context %p: %zu requests queued: %s", (void *)c, n,
             ft_strerror(rc));
    if (rc == FT_OK)
        return;
    c->state = CTX_RECV;
    size_t qcap = srv->queue.cap;
    for (size_t i = 0; i < n; i++)
        srv_count(srv, rc, fti_now_ns() - c->t0);
    c->out.len = 0;
    if (rc == FT_EBUSY)
        srv_wire_encode_error(&c->w, &c->out, FT_EBUSY,
                              "queue: full (%zu requests waiting); retry later",
                              qcap);
    else
        srv_wire_encode_error(&c->w, &c->out, FT_ESHUTDOWN,
                              "server: draining; no new requests taken");
    ctx_send(c);
}

static void ctx_cb(void *arg)
{
    srv_ctx *c = arg;
    server *srv = c->s->srv;
    int rv = nng_aio_result(c->aio);
    switch (c->state) {
    case CTX_RECV:
        if (rv != 0) {
            if (rv == NNG_ECLOSED || c->closing)
                return;
            ctx_recv(c);
            return;
        }
        c->msg = nng_aio_get_msg(c->aio);
        c->pipe = nng_msg_get_pipe(c->msg);
        c->t0 = fti_now_ns();
        FT_LOGF(FT_LOG_DEBUG, "context %p: message of %zu bytes", (void *)c,
                 nng_msg_len(c->msg));
        atomic_fetch_add(&srv->inflight, 1);
        handle(c);
        break;
    case CTX_SEND:
        FT_LOGF(FT_LOG_DEBUG, "context %p: reply sent: %s", (void *)c,
                 rv ? nng_strerror(rv) : "ok");
        if (rv != 0) {
            /* The peer went away, or stopped reading: nng hands the
             * message back to us. */
            nng_msg *m = nng_aio_get_msg(c->aio);
            if (m)
                nng_msg_free(m);
            if (rv == NNG_ETIMEDOUT && nng_pipe_id(c->pipe) > 0) {
                FT_LOGF(FT_LOG_WARN, "closing connection %d: its peer has "
                        "not read a reply for %d ms", nng_pipe_id(c->pipe),
                        SEND_TIMEOUT_MS);
                nng_pipe_close(c->pipe);
            }
        }
        atomic_fetch_sub(&srv->inflight, 1);
        if (rv == NNG_ECLOSED || c->closing)
            return;
        c->state = CTX_RECV;
        ctx_recv(c);
        break;
    default:
        break;
    }
}

static void pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
    server *srv = arg;
    /* Draining stops new connections here; the ones already open keep
     * their replies coming. */
    if (ev == NNG_PIPE_EV_ADD_PRE && atomic_load(&srv->draining))
        nng_pipe_close(p);
    else if (ev == NNG_PIPE_EV_ADD_POST)
        atomic_fetch_add(&srv->pipes_added, 1);
    else if (ev == NNG_PIPE_EV_REM_POST)
        atomic_fetch_add(&srv->pipes_removed, 1);
}

/* read_pem reads a whole PEM file into a NUL-terminated string. */
static char *read_pem(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    ft_buf b;
    ft_buf_init(&b);
    char chunk[4096];
    size_t k;
    int ok = 1;
    while (ok && (k = fread(chunk, 1, sizeof chunk, f)) > 0)
        ok = ft_buf_append(&b, chunk, k) == FT_OK;
    ok = ok && !ferror(f) && ft_buf_put_u8(&b, 0) == FT_OK;
    fclose(f);
    if (!ok) {
        ft_buf_free(&b);
        return NULL;
    }
    return (char *)b.data;
}

static int tls_setup(srv_socket *s, char *err, size_t errlen)
{
    const ft_config_listener *lo = &s->lo;
    if (!lo->tls_cert[0] || !lo->tls_key[0]) {
        snprintf(err, errlen, "%s: a TLS listener needs a certificate and a "
                 "key", lo->url);
        return FT_ECONFIG;
    }
    int rv = nng_tls_config_alloc(&s->tls, NNG_TLS_MODE_SERVER);
    if (rv != 0) {
        snprintf(err, errlen, "%s: TLS: %s", lo->url, nng_strerror(rv));
        return FT_ECONN;
    }
    char *cert = read_pem(lo->tls_cert), *key = read_pem(lo->tls_key);
    if (cert == NULL || key == NULL) {
        snprintf(err, errlen, "%s: TLS: cannot read %s", lo->url,
                 cert == NULL ? lo->tls_cert : lo->tls_key);
        free(cert);
        free(key);
        return FT_EIO;
    }
    rv = nng_tls_config_own_cert(s->tls, cert, key, NULL);
    free(cert);
    free(key);
    if (rv != 0) {
        snprintf(err, errlen, "%s: TLS certificate %s with key %s: %s",
                 lo->url, lo->tls_cert, lo->tls_key, nng_strerror(rv));
        return FT_ECONFIG;
    }
    if (lo->tls_ca[0] && (rv = nng_tls_config_ca_file(s->tls, lo->tls_ca))) {
        snprintf(err, errlen, "%s: TLS CA %s: %s", lo->url, lo->tls_ca,
                 nng_strerror(rv));
        return FT_ECONFIG;
    }
    rv = nng_tls_config_auth_mode(s->tls, lo->tls_verify
                                              ? NNG_TLS_AUTH_MODE_REQUIRED
                                              : NNG_TLS_AUTH_MODE_NONE);
    if (rv == 0)
        rv = nng_listener_set_ptr(s->lst, NNG_OPT_TLS_CONFIG, s->tls);
    if (rv != 0) {
        snprintf(err, errlen, "%s: TLS: %s", lo->url, nng_strerror(rv));
        return FT_ECONFIG;
    }
    return FT_OK;
}

int srv_socket_start(srv_socket *s, char *err, size_t errlen)
{
    server *srv = s->srv;
    int rv = nng_rep0_open(&s->sock);
    if (rv != 0) {
        snprintf(err, errlen, "%s: socket: %s", s->lo.url, nng_strerror(rv));
        return FT_ECONN;
    }
    s->open = 1;
    nng_socket_set_size(s->sock, NNG_OPT_RECVMAXSZ,
                        (size_t)srv->cfg.max_message_bytes);
    nng_pipe_notify(s->sock, NNG_PIPE_EV_ADD_PRE, pipe_cb, srv);
    nng_pipe_notify(s->sock, NNG_PIPE_EV_ADD_POST, pipe_cb, srv);
    nng_pipe_notify(s->sock, NNG_PIPE_EV_REM_POST, pipe_cb, srv);
    rv = nng_listener_create(&s->lst, s->sock, s->lo.url);
    if (rv != 0) {
        snprintf(err, errlen, "%s: %s", s->lo.url, nng_strerror(rv));
        return FT_ECONFIG;
    }
    nng_listener_set_size(s->lst, NNG_OPT_RECVMAXSZ,
                          (size_t)srv->cfg.max_message_bytes);
    if (!strncmp(s->lo.url, "tls+", 4)) {
        int rc = tls_setup(s, err, errlen);
        if (rc != FT_OK)
            return rc;
    }
    rv = nng_listener_start(s->lst, 0);
    if (rv != 0) {
        snprintf(err, errlen, "%s: %s", s->lo.url, nng_strerror(rv));
        return FT_ECONN;
    }
    s->n_ctx = srv->contexts ? srv->contexts : 1;
    s->ctx = calloc(s->n_ctx, sizeof *s->ctx);
    if (s->ctx == NULL) {
        snprintf(err, errlen, "%s: out of memory", s->lo.url);
        return FT_ENOMEM;
    }
    for (size_t i = 0; i < s->n_ctx; i++) {
        srv_ctx *c = calloc(1, sizeof *c);
        if (c == NULL) {
            snprintf(err, errlen, "%s: out of memory", s->lo.url);
            return FT_ENOMEM;
        }
        s->ctx[i] = c;
        c->s = s;
        srv_wire_init(&c->w);
        ft_buf_init(&c->out);
        if ((rv = nng_aio_alloc(&c->aio, ctx_cb, c)) != 0 ||
            (rv = nng_ctx_open(&c->ctx, s->sock)) != 0) {
            snprintf(err, errlen, "%s: context: %s", s->lo.url,
                     nng_strerror(rv));
            return FT_ENOMEM;
        }
    }
    for (size_t i = 0; i < s->n_ctx; i++) {
        s->ctx[i]->state = CTX_RECV;
        nng_ctx_recv(s->ctx[i]->ctx, s->ctx[i]->aio);
    }
    return FT_OK;
}

void srv_socket_stop_listening(srv_socket *s)
{
    if (s->open)
        nng_listener_close(s->lst);
}

void srv_socket_quiesce(srv_socket *s)
{
    if (!s->open)
        return;
    nng_listener_close(s->lst);
    for (size_t i = 0; i < s->n_ctx; i++)
        if (s->ctx[i]) {
            s->ctx[i]->closing = 1;
            nng_ctx_close(s->ctx[i]->ctx);
        }
}

void srv_socket_close(srv_socket *s)
{
    if (!s->open)
        return;
#ifdef FT_SERVE_TRACE
    uint64_t n = atomic_exchange(&tr_n, 0);
    if (n > 0)
        FT_LOGF(FT_LOG_INFO, "trace: %llu single-request messages: arrival to "
                "queued %.1f us, to answered %.1f us, encoded %.1f us; %.0f%% inline",
                (unsigned long long)n, (double)atomic_load(&tr_decode) / n / 1e3,
                (double)atomic_load(&tr_answer) / n / 1e3,
                (double)atomic_load(&tr_encode) / n / 1e3,
                100.0 * (double)atomic_load(&tr_inline) / n);
#endif
    for (size_t i = 0; i < s->n_ctx; i++)
        if (s->ctx[i])
            s->ctx[i]->closing = 1;
    nng_close(s->sock);
    for (size_t i = 0; i < s->n_ctx; i++) {
        srv_ctx *c = s->ctx[i];
        if (c == NULL)
            continue;
        if (c->aio) {
            nng_aio_stop(c->aio);
            nng_aio_free(c->aio);
        }
        if (c->msg)
            nng_msg_free(c->msg);
        srv_wire_free(&c->w);
        ft_buf_free(&c->out);
        free(c);
    }
    free(s->ctx);
    s->ctx = NULL;
    if (s->tls)
        nng_tls_config_free(s->tls);
    s->tls = NULL;
    s->open = 0;
}
