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
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flashtrie/internal/cores.h"
#include "serve_conn.h"
#include "frame.h"
#include "serve_budget.h"
#include "serve_ctx.h"
#include "serve_info.h"
#include "serve_priv.h"
#include "serve_stages.h"
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
    uint64_t t_ready;      /* the jobs were ready to queue (stages) */
    uint64_t t_send;       /* a SEARCH reply was handed to nng; 0: other */
#ifdef FT_SERVE_TRACE
    uint64_t t_dec;
    int inl;
#endif
    srv_wire w;            /* the decoded message and its jobs */
    atomic_size_t pending; /* jobs queued and not yet answered */
    ft_buf out;
    nng_pipe pipe;         /* the connection the message came on */
    size_t rxlen;          /* the received message's bytes */
    size_t nreq;           /* its requests counted in srv->inflight_reqs */
    int heavy;             /* it holds a heavy slot (serve_budget.h) */
    struct srv_ctx *next;  /* in the heavy decoder's list */
} srv_ctx;

/* The heavy decoder: a message over SRV_HEAVY_BYTES is decoded, checked
 * and queued on a thread of its own instead of nng's.  Its rows (31
 * requests of 64 x 4096 proposals: tens of milliseconds of validation)
 * would otherwise hold one of nng's few task threads (two per core),
 * which every small message's callback needs too: small requests waited
 * for heavy ones before they even reached the queue.  At most
 * max_heavy_messages wait here (the budget admits no more), one decoded
 * at a time. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    srv_ctx *head, *tail;
    int on, stop;
    pthread_t th;
} g_dec = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL,
           0, 0, 0};

static void handle(srv_ctx *c);

static void *heavy_decoder_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&g_dec.mu);
    for (;;) {
        while (g_dec.head == NULL && !g_dec.stop)
            pthread_cond_wait(&g_dec.cv, &g_dec.mu);
        srv_ctx *c = g_dec.head;
        if (c == NULL)
            break; /* stopped, and nothing is left */
        g_dec.head = c->next;
        if (g_dec.head == NULL)
            g_dec.tail = NULL;
        pthread_mutex_unlock(&g_dec.mu);
        handle(c);
        pthread_mutex_lock(&g_dec.mu);
    }
    pthread_mutex_unlock(&g_dec.mu);
    return NULL;
}

/* heavy_decoder_start starts the thread once; 0 when there is none (the
 * messages are then decoded on nng's thread, as before). */
static int heavy_decoder_start(void)
{
    pthread_mutex_lock(&g_dec.mu);
    if (!g_dec.on && !g_dec.stop &&
        pthread_create(&g_dec.th, NULL, heavy_decoder_main, NULL) == 0)
        g_dec.on = 1;
    int on = g_dec.on;
    pthread_mutex_unlock(&g_dec.mu);
    return on;
}

/* heavy_decode hands c, whose message is heavy, to the decoder; 0 when
 * there is none. */
static int heavy_decode(srv_ctx *c)
{
    pthread_mutex_lock(&g_dec.mu);
    int on = g_dec.on && !g_dec.stop;
    if (on) {
        c->next = NULL;
        if (g_dec.tail)
            g_dec.tail->next = c;
        else
            g_dec.head = c;
        g_dec.tail = c;
        pthread_cond_signal(&g_dec.cv);
    }
    pthread_mutex_unlock(&g_dec.mu);
    return on;
}

void srv_heavy_decoder_stop(void)
{
    pthread_mutex_lock(&g_dec.mu);
    int on = g_dec.on;
    g_dec.stop = 1;
    g_dec.on = 0;
    pthread_cond_broadcast(&g_dec.cv);
    pthread_mutex_unlock(&g_dec.mu);
    if (on)
        pthread_join(g_dec.th, NULL);
}

/* g_cores: the cores the server may use (cores.h), read once at the first
 * socket's start: inline_lone = auto runs lone requests inline on 4 or
 * more. */
static atomic_int g_cores;

/* inline_lone says whether a lone request on an idle server runs on the
 * thread that received it (the inline_lone setting, reloadable). */
static int inline_lone(server *srv)
{
    int v = FT_CONFIG_LIVE(&srv->cfg, inline_lone);
    if (v == FT_CONFIG_INLINE_AUTO)
        return atomic_load_explicit(&g_cores, memory_order_relaxed) >= 4;
    return v == FT_CONFIG_INLINE_ON;
}

/* A reply that cannot be handed to its connection within this time means
 * the peer stopped reading: its connection is closed, so that it holds no
 * context (every other client would wait on it) and cannot stall a
 * drain.  Its unread replies are lost with it; a client that reads again
 * retries on a new connection. */
#define SEND_TIMEOUT_MS 1000

static void ctx_send(srv_ctx *c);

/* ctx_recv waits for the next message, with no timeout (a send before it
 * set one on the same aio). */
static void ctx_recv(srv_ctx *c)
{
    nng_aio_set_timeout(c->aio, NNG_DURATION_INFINITE);
    nng_ctx_recv(c->ctx, c->aio);
}

/* ctx_release gives back, once the reply is gone, the budget the message
 * took and the buffers a large one made the context grow. */
static void ctx_release(srv_ctx *c)
{
    srv_budget_give(c->s->srv, c->w.charged, c->heavy);
    c->w.charged = 0;
    atomic_fetch_sub(&c->s->srv->inflight_reqs, (long)c->nreq);
    c->nreq = 0;
    c->heavy = 0;
    if (c->out.cap > SRV_KEEP_BYTES)
        ft_buf_free(&c->out);
    srv_wire_trim(&c->w, SRV_KEEP_BYTES);
}

/* busy_unread answers BUSY to a message the budget refused, without
 * decoding it (a frame's id read from its header, a JSON line's not at
 * all), and frees it at once. */
static void busy_unread(srv_ctx *c, const char *why)
{
    const unsigned char *p = nng_msg_body(c->msg);
    size_t len = nng_msg_len(c->msg);
    c->out.len = 0;
    srv_count_refused(c->s->srv, FT_EBUSY);
    if (ft_frame_is_binary(p, len)) {
        uint64_t id = 0;
        if (len >= 24 && memcmp(p, FT_FRAME_MAGIC, 4) == 0)
            for (int i = 7; i >= 0; i--)
                id = id << 8 | p[16 + i];
        c->w.mode = SRV_MODE_FRAME;
        c->w.req_id = id;
        if (ft_frame_encode_error(&c->out, id, FT_EBUSY, why) != FT_OK)
            c->out.len = 0;
    } else {
        ft_jsonl_req q;
        ft_jsonl_req_init(&q);
        ft_jsonl_encode_error(&c->out, &q, why);
        ft_jsonl_req_free(&q);
    }
    FT_LOGF(FT_LOG_DEBUG, "context %p: message of %zu bytes: %s", (void *)c,
            len, why);
    ctx_send(c);
}

/* ctx_send_msg sends c->msg, which holds the reply. */
static void ctx_send_msg(srv_ctx *c)
{
    FT_LOGF(FT_LOG_DEBUG, "context %p: reply of %zu bytes", (void *)c,
            nng_msg_len(c->msg));
    nng_aio_set_msg(c->aio, c->msg);
    c->msg = NULL;
    c->state = CTX_SEND;
    nng_aio_set_timeout(c->aio, SEND_TIMEOUT_MS);
    uint64_t t = c->t_send;
    nng_ctx_send(c->ctx, c->aio);
    /* c may be receiving again by now: only the time read before. */
    if (t != 0)
        srv_stages_send_call(c->s->srv, fti_now_ns() - t);
}

/* ctx_send sends the reply encoded in c->out (errors, INFO, PING, JSON
 * lines), copied into c->msg. */
static void ctx_send(srv_ctx *c)
{
    server *srv = c->s->srv;
    /* nng_msg_clear keeps a message's storage: a reply to a large request
     * gets a message of its own size, and the request's goes back now. */
    if (c->rxlen > SRV_KEEP_BYTES) {
        nng_msg_free(c->msg);
        c->msg = NULL;
        if (nng_msg_alloc(&c->msg, 0) != 0)
            c->msg = NULL;
    } else {
        nng_msg_clear(c->msg);
    }
    if (c->msg == NULL || nng_msg_append(c->msg, c->out.data, c->out.len) != 0) {
        /* Out of memory for the reply: the client's request times out,
         * which beats a truncated answer. */
        FT_LOGF(FT_LOG_ERROR, "reply of %zu bytes: out of memory; dropped", c->out.len);
        if (c->msg)
            nng_msg_free(c->msg);
        c->msg = NULL;
        srv_conn_replied(srv, c->pipe);
        c->t_send = 0;
        ctx_release(c);
        atomic_fetch_sub(&srv->inflight, 1);
        c->state = CTX_RECV;
        ctx_recv(c);
        return;
    }
    ctx_send_msg(c);
}

/* job_done runs on a replica worker when one of this context's jobs is
 * answered; the last one encodes and sends the reply. */
static void job_done(ft_job *j)
{
    srv_ctx *c = j->arg;
    if (atomic_fetch_sub(&c->pending, 1) != 1)
        return;
    server *srv = c->s->srv;
    uint64_t t_answered = fti_now_ns();
    uint64_t ns = t_answered - c->t0;
    int ran = 0; /* a job ran (not all were past their deadline) */
    for (size_t i = 0; i < c->w.n_jobs; i++) {
        srv_count(srv, c->w.res[i].status, ns);
        srv_stages_job(srv, c->t_ready, t_answered, &c->w.jobs[i]);
        ran |= c->w.jobs[i].run_ns != 0;
    }
    /* A RESULT frame is written straight into the message it goes out
     * in; JSON lines (and an encoder's error) through c->out. */
    int direct = srv_wire_reply_msg(&c->w, c->msg) == FT_OK;
    if (!direct) {
        c->out.len = 0;
        srv_wire_encode_results(&c->w, &c->out);
    }
    uint64_t t_encoded = fti_now_ns();
    c->t_send = 0;
    if (ran) {
        srv_stages_message(srv, c->t_ready - c->t0, t_encoded - t_answered);
        c->t_send = t_encoded;
    }
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
    if (direct)
        ctx_send_msg(c);
    else
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
    /* The lanes: each request by its cost, T x K x beam (what its search
     * may expand), against light_request_cost; 0 puts all in one lane. */
    uint64_t light = FT_CONFIG_LIVE(&srv->cfg, light_request_cost);
    for (size_t i = 0; i < n; i++) {
        const ft_request *r = &c->w.jobs[i].req;
        c->w.jobs[i].done = job_done;
        c->w.jobs[i].arg = c;
        c->w.jobs[i].run_ns = c->w.jobs[i].ran_ns = 0;
        c->w.items[i] = &c->w.jobs[i];
        c->w.heavy[i] = light > 0 && (uint64_t)r->T * r->K * r->beam > light;
    }
    c->state = CTX_WAIT;
    atomic_store(&c->pending, n);
    /* Counted until the reply is gone (ctx_release), for the drain's
     * count of what a timeout cuts. */
    c->nreq = n;
    atomic_fetch_add(&srv->inflight_reqs, (long)n);
    c->t_ready = fti_now_ns();
#ifdef FT_SERVE_TRACE
    c->t_dec = fti_now_ns();
    c->inl = 1;
#endif
    /* A lone request on an idle server runs here, on nng's thread: no
     * hand-off to a worker; job_done has then replied.  inline_lone =
     * auto: on hosts of 4 or more cores (on the 2-core box it added ~100
     * us at b = 1 against a worker's own thread, docs/BENCHMARKS.md,
     * "Daemon overhead").  Lone means the only message in flight: under
     * load (64 clients) a request that found the queue empty for a moment
     * took the replica for a batch of one (2,028 of 9,646 batches on the
     * H200 host), and the batch after it opened no window either.  A
     * heavy request never runs inline: it goes through its lane, which
     * keeps light_replicas from it. */
    if (n == 1 && !c->w.heavy[0] && atomic_load(&srv->inflight) <= 1 &&
        inline_lone(srv) &&
        ft_batcher_run_inline(srv->batcher, &c->w.jobs[0]))
        return;
#ifdef FT_SERVE_TRACE
    c->inl = 0; /* job_done has not run: the job is not queued yet */
#endif
    int rc = ft_queue_push_lanes(&srv->queue, c->w.items, c->w.heavy, n);
    FT_LOGF(FT_LOG_DEBUG, "context %p: %zu requests queued: %s", (void *)c, n,
             ft_strerror(rc));
    if (rc == FT_OK)
        return;
    atomic_fetch_sub(&srv->inflight_reqs, (long)n);
    c->nreq = 0;
    c->state = CTX_RECV;
    size_t qcap = srv->queue.cap;
    for (size_t i = 0; i < n; i++)
        srv_count_refused(srv, rc);
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
        srv_conn_received(srv, c->pipe);
        FT_LOGF(FT_LOG_DEBUG, "context %p: message of %zu bytes", (void *)c,
                 nng_msg_len(c->msg));
        atomic_fetch_add(&srv->inflight, 1);
        c->rxlen = nng_msg_len(c->msg);
        {
            char why[192];
            int heavy = c->rxlen > SRV_HEAVY_BYTES;
            if (srv_budget_take(srv, c->rxlen, heavy, why, sizeof why) !=
                FT_OK) {
                busy_unread(c, why);
                break;
            }
            c->w.charged = c->rxlen;
            c->heavy = heavy;
            if (heavy && heavy_decode(c))
                break; /* c is the heavy decoder's until handle() */
        }
        handle(c);
        break;
    case CTX_SEND:
        FT_LOGF(FT_LOG_DEBUG, "context %p: reply sent: %s", (void *)c,
                 rv ? nng_strerror(rv) : "ok");
        if (c->t_send != 0 && rv == 0)
            srv_stages_send(srv, fti_now_ns() - c->t_send);
        c->t_send = 0;
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
        srv_conn_replied(srv, c->pipe);
        ctx_release(c);
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

int srv_socket_start(srv_socket *s, char *err, size_t errlen)
{
    server *srv = s->srv;
    if (atomic_load(&g_cores) == 0) {
        atomic_store(&g_cores, fti_usable_cores());
    }
    heavy_decoder_start();
    int rv = nng_rep0_open(&s->sock);
    if (rv != 0) {
        snprintf(err, errlen, "%s: socket: %s", s->lo.url, nng_strerror(rv));
        return FT_ECONN;
    }
    s->open = 1;
    nng_socket_set_size(s->sock, NNG_OPT_RECVMAXSZ,
                        (size_t)srv->cfg.max_message_bytes);
    /* Connections: counted, limited, timed out (serve_conn.c). */
    nng_pipe_notify(s->sock, NNG_PIPE_EV_ADD_PRE, srv_conn_pipe_cb, s);
    nng_pipe_notify(s->sock, NNG_PIPE_EV_REM_POST, srv_conn_pipe_cb, s);
    int rc = srv_listener_open(s, err, errlen);
    if (rc != FT_OK)
        return rc;
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
