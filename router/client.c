/*
 * client.c - the C client library (include/flashtrie_client.h).
 *
 * Every call opens its own REQ context on the handle's one socket, so any
 * number of threads can call at once and nng matches each answer to its
 * context.  Frames are built and read by router/frame.c, the codec the
 * server uses too.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/tls/tls.h>

#include "flashtrie/internal/buf.h"
#include "flashtrie/internal/clock.h"
#include "flashtrie/internal/errmsg.h"
#include "flashtrie_client.h"
#include "client_impl.h"
#include "close_within.h"
#include "frame.h"

/* pending is one call in flight: registered while its aio may be
 * waiting on the connection, so that losing the connection can fail it
 * at once. */
typedef struct pending {
    nng_aio *aio;
    struct pending *prev, *next;
} pending;

/* Pipes followed: one per connection, and room for a reconnection whose
 * new pipe comes before the old one's removal is seen. */
#define CLIENT_MAX_PIPES (FT_CLIENT_MAX_CONNECTIONS + 8)

/* co_call is one ft_client_search call of a coalescing handle, on its
 * caller's stack while it waits: queued (next), then sent in a frame by
 * whichever call leads that frame, which fills rc, out and err, sets done
 * under co_mu and signals cv. */
typedef struct co_call {
    const ft_request *reqs;
    size_t n;
    size_t bytes; /* what its requests add to a frame (co_bytes) */
    uint64_t t0;  /* when the call began (fti_now_ms): its timeout's start */
    ft_client_results *out;
    int rc;
    int done;
    pthread_cond_t cv;
    struct co_call *next;
    char err[512];
} co_call;

struct ft_client {
    nng_socket sock;
    nng_dialer dialer[FT_CLIENT_MAX_CONNECTIONS]; /* one per connection */
    int n_dialers;
    nng_tls_config *tls;
    int timeout_ms;
    int reconnect_wait_ms;   /* how long a call waits for a lost
                              * connection to come back */
    int wait_first;          /* connect_wait: calls wait (up to their
                              * timeout) for the first connection */
    uint32_t deadline_ms;
    uint32_t frame_flags; /* FT_FRAME_F_CHECKSUM or 0: opts.checksum */
    atomic_uint_fast64_t next_id;
    /* The connection's state, kept by the pipe notifications (pipe_cb)
     * under mu; cv is signalled when a pipe comes. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int npipes;
    uint32_t pipes[CLIENT_MAX_PIPES]; /* ids of the connected pipes */
    int ever;                /* a pipe was connected once */
    uint64_t lost_ms;        /* when the last pipe went (fti_now_ms) */
    pending calls;           /* list head of the calls in flight */
    /* coalescing (opts.coalesce): the calls waiting for a frame, in
     * order, and the frames of them out, at most co_max */
    int co_max;
    int co_out;
    co_call *co_head, *co_tail;
    pthread_mutex_t co_mu;
    char url[512];
    char host[256];          /* HOST:PORT of a tls+tcp:// url */
};

/* ft_client_results is a decoded answer (m: res[count] and the storage
 * behind them), or a coalesced call's share of one: whole the answer of
 * the frame it went in (alive while any share of it is: refs), res and
 * count its own requests' results within it. */
struct ft_client_results {
    ft_frame_msg m;
    struct ft_client_results *whole;
    atomic_int refs; /* of an answer: the shares of it alive */
    const ft_result *res;
    size_t count;
};

/* res_n and res_at: a results' count and list, of an answer or a share */
static inline size_t res_n(const ft_client_results *r)
{
    return r->whole ? r->count : r->m.count;
}

static inline const ft_result *res_at(const ft_client_results *r)
{
    return r->whole ? r->res : r->m.res;
}


/* The largest reply protocol version 1 allows: a RESULT of
 * FT_FRAME_MAX_BATCH entries, each with its longest message and
 * FT_MAX_RESULTS hits of FT_MAX_T tokens (INFO's text is smaller).  The
 * default bound of what the client receives. */
#define CLIENT_RECV_MAX_DEFAULT                                               \
    ((size_t)FT_FRAME_HDR_SIZE +                                              \
     (size_t)FT_FRAME_MAX_BATCH *                                             \
         ((size_t)FT_FRAME_RESULT_REQ_SIZE + FT_FRAME_MAX_RESULT_MSG +        \
          (size_t)FT_MAX_RESULTS * (FT_FRAME_HIT_SIZE + 4u * FT_MAX_T)))
#define CLIENT_RECONNECT_WAIT_DEFAULT 1000

void ft_client_opts_init(ft_client_opts *o)
{
    memset(o, 0, sizeof *o);
    o->timeout_ms = 10000;
    o->coalesce = FT_CLIENT_DEFAULT_COALESCE;
}

/* dialer_auth_errors returns how many TLS handshakes of the dialers failed
 * (nng counts them in its "auth" statistic: a certificate that was not
 * accepted, or a peer that does not speak TLS); 0 without statistics. */
static uint64_t dialer_auth_errors(ft_client *c)
{
    nng_stat *all;
    if (nng_stats_get(&all) != 0)
        return 0;
    uint64_t n = 0;
    for (int i = 0; i < c->n_dialers; i++) {
        nng_stat *d = nng_stat_find_dialer(all, c->dialer[i]);
        nng_stat *a = d ? nng_stat_find(d, "auth") : NULL;
        if (a != NULL)
            n += nng_stat_value(a);
    }
    nng_stats_free(all);
    return n;
}

static void tls_failed(const ft_client *c, int rv, char *errbuf, size_t errlen)
{
    fti_errf(errbuf, errlen,
             "%s: TLS handshake with %s failed%s%s (the server's certificate "
             "was not accepted, or the peer does not speak TLS)",
             c->url, c->host, rv ? ": " : "", rv ? nng_strerror(rv) : "");
}

/* pipe_cb follows the connection: a pipe that comes wakes the calls that
 * wait for one; when the last one goes, every call in flight is failed at
 * once (nng would keep a request that was not on the wire yet until the
 * dialer reconnects, and the one on the wire can no longer be answered). */
static void pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
    ft_client *c = arg;
    uint32_t id = (uint32_t)nng_pipe_id(p);
    pthread_mutex_lock(&c->mu);
    if (ev == NNG_PIPE_EV_ADD_POST) {
        if (c->npipes < CLIENT_MAX_PIPES) {
            c->pipes[c->npipes++] = id;
            c->ever = 1;
            pthread_cond_broadcast(&c->cv);
        }
    } else {
        int i = 0;
        while (i < c->npipes && c->pipes[i] != id)
            i++;
        if (i < c->npipes) {
            c->pipes[i] = c->pipes[--c->npipes];
            if (c->npipes == 0) {
                c->lost_ms = fti_now_ms();
                for (pending *q = c->calls.next; q != &c->calls; q = q->next)
                    nng_aio_abort(q->aio, NNG_ECONNRESET);
            }
        }
    }
    pthread_mutex_unlock(&c->mu);
}

/* wait_pipe returns, with mu held, once a pipe is connected: at once when
 * one is; else it waits up to the call's time left (*left_ms, reduced by
 * the wait) for the first connection of a connect_wait handle, or up to
 * reconnect_wait_ms for a lost one to come back.  A TLS handshake that
 * failed meanwhile ends the wait with its own error. */
static int wait_pipe(ft_client *c, const char *what, int *left_ms,
                     char *errbuf, size_t errlen)
{
    if (c->npipes > 0)
        return FT_OK;
    int first = !c->ever && c->wait_first;
    int limit = *left_ms;
    if (!first && c->reconnect_wait_ms < limit)
        limit = c->reconnect_wait_ms;
    uint64_t t0 = fti_now_ms();
    uint64_t auth0 = c->tls ? dialer_auth_errors(c) : 0;
    int tls_bad = 0;
    for (;;) {
        uint64_t el = fti_now_ms() - t0;
        if (c->npipes > 0 || el >= (uint64_t)limit)
            break;
        uint64_t slice = (uint64_t)limit - el;
        /* A failed handshake is seen in nng's statistics only: look at
         * them every 50 ms (the dialer retries within 200 ms). */
        if (c->tls && slice > 50)
            slice = 50;
        struct timespec ts = fti_abs_after((int64_t)slice * 1000000);
        pthread_cond_timedwait(&c->cv, &c->mu, &ts);
        if (c->tls && c->npipes == 0 && dialer_auth_errors(c) > auth0) {
            tls_bad = 1;
            break;
        }
    }
    uint64_t now = fti_now_ms();
    *left_ms -= (int)(now - t0);
    if (*left_ms < 1)
        *left_ms = 1;
    if (c->npipes > 0)
        return FT_OK;
    if (tls_bad) {
        tls_failed(c, 0, errbuf, errlen);
        return FT_ECONN;
    }
    if (first) {
        fti_errf(errbuf, errlen, "%s: no answer to %s within %d ms", c->url,
                 what, c->timeout_ms);
        return FT_ETIMEDOUT;
    }
    fti_errf(errbuf, errlen,
             "%s: connection lost: %s not sent (no server for %llu ms)",
             c->url, what, (unsigned long long)(now - c->lost_ms));
    return FT_ECONN;
}

/* start_send sends msg on ctx through aio, the call registered in
 * c->calls (p) so that losing the connection fails it.  A blocking call
 * (block) first waits for a pipe (wait_pipe).  An asynchronous one never
 * waits here: while the connection is lost its send is queued with the
 * reconnect wait as its timeout (*queued set: a send that times out was
 * never sent), or fails at once when that wait is 0.  The send starts
 * under mu, so that no loss goes unseen between the check and the send.
 * On failure msg is still the caller's. */
static int start_send(ft_client *c, pending *p, nng_ctx ctx, nng_aio *aio,
                      nng_msg *msg, const char *what, int left, int block,
                      int *queued, char *errbuf, size_t errlen)
{
    int rc = FT_OK;
    pthread_mutex_lock(&c->mu);
    if (block) {
        rc = wait_pipe(c, what, &left, errbuf, errlen);
    } else if (c->npipes == 0 && (c->ever || !c->wait_first)) {
        if (c->reconnect_wait_ms == 0) {
            fti_errf(errbuf, errlen, "%s: connection lost: %s not sent (no "
                     "server for %llu ms)", c->url, what,
                     (unsigned long long)(fti_now_ms() - c->lost_ms));
            rc = FT_ECONN;
        } else {
            if (c->reconnect_wait_ms < left)
                left = c->reconnect_wait_ms;
            *queued = 1;
        }
    }
    if (rc == FT_OK) {
        p->aio = aio;
        p->next = c->calls.next;
        p->prev = &c->calls;
        c->calls.next->prev = p;
        c->calls.next = p;
        nng_aio_set_timeout(aio, left);
        nng_aio_set_msg(aio, msg);
        nng_ctx_send(ctx, aio);
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* end_call unregisters a call that start_send registered. */
static void end_call(ft_client *c, pending *p)
{
    pthread_mutex_lock(&c->mu);
    p->prev->next = p->next;
    p->next->prev = p->prev;
    p->next = p->prev = p;
    pthread_mutex_unlock(&c->mu);
}

static int tls_client(ft_client *c, const char *url, const ft_client_opts *o,
                      char *errbuf, size_t errlen)
{
    if (o->tls_ca == NULL && !o->tls_insecure) {
        fti_errf(errbuf, errlen, "%s: TLS: no CA to verify the server with: "
                 "give tls_ca, or set tls_insecure to connect without "
                 "verifying the server", url);
        return FT_EINVAL;
    }
    /* HOST:PORT, for the messages. */
    const char *h = strstr(url, "://");
    h = h ? h + 3 : url;
    snprintf(c->host, sizeof c->host, "%.*s", (int)strcspn(h, "/"), h);
    int rv = nng_tls_config_alloc(&c->tls, NNG_TLS_MODE_CLIENT);
    if (rv == 0 && o->tls_ca)
        rv = nng_tls_config_ca_file(c->tls, o->tls_ca);
    if (rv == 0)
        rv = nng_tls_config_auth_mode(c->tls, o->tls_ca
                                                  ? NNG_TLS_AUTH_MODE_REQUIRED
                                                  : NNG_TLS_AUTH_MODE_NONE);
    if (rv == 0 && o->tls_cert) {
        /* nng reads one PEM holding both the certificate and the key. */
        if (o->tls_key && strcmp(o->tls_key, o->tls_cert) != 0) {
            fti_errf(errbuf, errlen, "%s: TLS: give the client certificate and "
                 "key in one PEM file (tls_cert = tls_key)", url);
            return FT_EINVAL;
        }
        rv = nng_tls_config_cert_key_file(c->tls, o->tls_cert, NULL);
    }
    if (rv == 0 && o->tls_server_name)
        rv = nng_tls_config_server_name(c->tls, o->tls_server_name);
    for (int i = 0; rv == 0 && i < c->n_dialers; i++)
        rv = nng_dialer_set_ptr(c->dialer[i], NNG_OPT_TLS_CONFIG, c->tls);
    if (rv != 0) {
        fti_errf(errbuf, errlen, "%s: TLS setup: %s", url, nng_strerror(rv));
        return FT_ECONN;
    }
    return FT_OK;
}

/* frame_flags_for is the SEARCH frames' flags for opts.checksum: auto
 * (0) sets the checksum on tcp:// and tls+tcp:// and leaves it out on
 * ipc:// and inproc://, where the frame is copied by the kernel (or in
 * memory) and never meets a wire; 1 always, -1 never. */
static uint32_t frame_flags_for(const char *url, int checksum)
{
    if (checksum > 0)
        return FT_FRAME_F_CHECKSUM;
    if (checksum < 0)
        return 0;
    if (strncmp(url, "ipc://", 6) == 0 || strncmp(url, "inproc://", 9) == 0)
        return 0;
    return FT_FRAME_F_CHECKSUM;
}

int ft_client_connect(ft_client **out, const char *url,
                      const ft_client_opts *opts, char *errbuf, size_t errlen)
{
    if (out == NULL || url == NULL) {
        fti_errf(errbuf, errlen, "connect: %s is NULL",
                 out == NULL ? "out" : "url");
        return FT_EINVAL;
    }
    *out = NULL;
    if (url[0] == 0) {
        fti_errf(errbuf, errlen, "connect: url is empty (expected tcp://, "
                 "tls+tcp:// or ipc://)");
        return FT_EINVAL;
    }
    ft_client_opts def;
    if (opts == NULL) {
        ft_client_opts_init(&def);
        opts = &def;
    }
    if (opts->connections < 0 ||
        opts->connections > FT_CLIENT_MAX_CONNECTIONS) {
        fti_errf(errbuf, errlen, "%s: connections: expected 1..%d (0: 1), "
                 "got %d", url, FT_CLIENT_MAX_CONNECTIONS, opts->connections);
        return FT_EINVAL;
    }
    if (opts->coalesce < 0 || opts->coalesce > FT_CLIENT_MAX_COALESCE) {
        fti_errf(errbuf, errlen, "%s: coalesce: expected 0..%d (0: off), "
                 "got %d", url, FT_CLIENT_MAX_COALESCE, opts->coalesce);
        return FT_EINVAL;
    }
    ft_client *c = calloc(1, sizeof *c);
    if (c == NULL) {
        fti_errf(errbuf, errlen, "client: out of memory");
        return FT_ENOMEM;
    }
    c->n_dialers = opts->connections > 0 ? opts->connections : 1;
    c->co_max = opts->coalesce;
    c->timeout_ms = opts->timeout_ms > 0 ? opts->timeout_ms : 10000;
    c->reconnect_wait_ms = opts->reconnect_wait_ms > 0
                               ? opts->reconnect_wait_ms
                           : opts->reconnect_wait_ms < 0
                               ? 0
                               : CLIENT_RECONNECT_WAIT_DEFAULT;
    c->wait_first = opts->connect_wait_ms > 0;
    c->deadline_ms = opts->deadline_ms;
    c->frame_flags = frame_flags_for(url, opts->checksum);
    atomic_init(&c->next_id, 1);
    snprintf(c->url, sizeof c->url, "%s", url);
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->co_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cv, &ca);
    pthread_condattr_destroy(&ca);
    c->calls.next = c->calls.prev = &c->calls;
    int rv = nng_req0_open(&c->sock);
    if (rv != 0) {
        fti_errf(errbuf, errlen, "%s: socket: %s", url, nng_strerror(rv));
        pthread_cond_destroy(&c->cv);
        pthread_mutex_destroy(&c->mu);
        pthread_mutex_destroy(&c->co_mu);
        free(c);
        return FT_ECONN;
    }
    /* A request must never be sent twice: the server has no way to tell a
     * resend from a new request, so a timeout is the caller's to handle,
     * and a request the lost connection held fails (pipe_cb). */
    size_t recv_max = opts->recv_max_bytes ? opts->recv_max_bytes
                                           : CLIENT_RECV_MAX_DEFAULT;
    nng_socket_set_size(c->sock, NNG_OPT_RECVMAXSZ, recv_max);
    nng_socket_set_ms(c->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
    nng_socket_set_ms(c->sock, NNG_OPT_RECONNMINT, 10);
    nng_socket_set_ms(c->sock, NNG_OPT_RECONNMAXT, 200);
    nng_pipe_notify(c->sock, NNG_PIPE_EV_ADD_POST, pipe_cb, c);
    nng_pipe_notify(c->sock, NNG_PIPE_EV_REM_POST, pipe_cb, c);
    /* One dialer per connection, all to url: nng's REQ socket sends each
     * request on a connection that is not busy sending (in the order the
     * calls were made) and reads its answer from the same one; with
     * resends off (above), a connection that goes fails only the calls
     * it carried, and the others keep serving. */
    int rc = FT_OK;
    for (int i = 0; rc == FT_OK && i < c->n_dialers; i++) {
        rv = nng_dialer_create(&c->dialer[i], c->sock, url);
        if (rv == NNG_ENOTSUP) {
            fti_errf(errbuf, errlen, "%s: unsupported URL scheme (expected "
                     "tcp://, tls+tcp:// or ipc://)", url);
            rc = FT_EINVAL;
        } else if (rv != 0) {
            fti_errf(errbuf, errlen, "%s: %s", url, nng_strerror(rv));
            rc = FT_EINVAL;
        } else {
            nng_dialer_set_size(c->dialer[i], NNG_OPT_RECVMAXSZ, recv_max);
        }
    }
    if (rc == FT_OK && !strncmp(url, "tls+", 4))
        rc = tls_client(c, url, opts, errbuf, errlen);
    /* Each connection is made before the call returns (unless
     * connect_wait_ms asks for a background dial): a server that cannot
     * be reached fails the connect at once, as with one. */
    for (int i = 0; rc == FT_OK && i < c->n_dialers; i++) {
        rv = nng_dialer_start(c->dialer[i],
                              opts->connect_wait_ms > 0 ? NNG_FLAG_NONBLOCK : 0);
        if (rv == NNG_ECRYPTO || rv == NNG_EPEERAUTH) {
            tls_failed(c, rv, errbuf, errlen);
            rc = FT_ECONN;
        } else if (rv == NNG_EADDRINVAL) {
            /* the URL names no address (a port past 65535, say): the
             * caller's mistake, not the network's */
            fti_errf(errbuf, errlen, "%s: not a valid address: %s", url,
                     nng_strerror(rv));
            rc = FT_EINVAL;
        } else if (rv != 0) {
            fti_errf(errbuf, errlen, "%s: cannot connect: %s", url,
                 nng_strerror(rv));
            rc = FT_ECONN;
        }
    }
    if (rc != FT_OK) {
        ft_client_close(c); /* its dialers too are torn down by nng's reaper */
        return rc;
    }
    /* "Lost" since now, should the first pipe be refused (a peer that does
     * not speak REP) or go before a call. */
    pthread_mutex_lock(&c->mu);
    c->lost_ms = fti_now_ms();
    pthread_mutex_unlock(&c->mu);
    *out = c;
    return FT_OK;
}

static void client_free(void *arg)
{
    ft_client *c = arg;
    if (c->tls)
        nng_tls_config_free(c->tls);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->co_mu);
    free(c);
}

/* nng_close returns once the last pipe notification has run and every
 * pipe of the socket is torn down, which nng 1.5.2 can stop doing for
 * good (close_within.h; docs/daemon.md, "Closing a handle"): the close
 * returns within FTI_NNG_CLOSE_WAIT_MS, and the handle (which the pipe
 * notifications use) is freed once nng returns, if ever. */
void ft_client_close(ft_client *c)
{
    if (c == NULL)
        return;
    fti_nng_close_within(c->sock, client_free, c);
}

static int nng_err(int rv, const ft_client *c, const char *what,
                   char *errbuf, size_t errlen)
{
    if (rv == NNG_ETIMEDOUT) {
        fti_errf(errbuf, errlen, "%s: no answer to %s within %d ms", c->url, what,
             c->timeout_ms);
        return FT_ETIMEDOUT;
    }
    if (rv == NNG_ENOMEM) {
        fti_errf(errbuf, errlen, "%s: out of memory", what);
        return FT_ENOMEM;
    }
    if (rv == NNG_ECONNRESET) {
        fti_errf(errbuf, errlen, "%s: connection lost: no answer to %s",
                 c->url, what);
        return FT_ECONN;
    }
    fti_errf(errbuf, errlen, "%s: %s: %s", c->url, what, nng_strerror(rv));
    return FT_ECONN;
}

/* A request over this many bytes that loses its connection gets a hint:
 * a server closes, unread, the connection of a message over its receive
 * limit, which it lowers while many connections are open, never below
 * this floor (FT_CLIENT_COALESCE_BYTES: SRV_RX_FLOOR in
 * daemon/serve_budget.h, which daemon/serve_conn.c asserts). */
#define CLIENT_BIG_REQUEST ((size_t)FT_CLIENT_COALESCE_BYTES)

/* big_hint adds that hint to errbuf for a request of len bytes. */
static void big_hint(char *errbuf, size_t errlen, size_t len)
{
    size_t at = errbuf ? strnlen(errbuf, errlen) : 0;
    if (errbuf == NULL || len <= CLIENT_BIG_REQUEST || at + 1 >= errlen)
        return;
    snprintf(errbuf + at, errlen - at, " (the request was %zu bytes: a "
             "server closes the connection of a message over its receive "
             "limit, max_message_bytes or, while many connections are "
             "open, less: its INFO's receive_limit_bytes)", len);
}

/* check_reply turns a decoded answer into the call's status: an ERROR
 * frame gives the server's code and message, a frame of another type
 * than want (or for another id) is a protocol fault. */
static int check_reply(const ft_frame_msg *m, uint64_t id, uint16_t want,
                       char *errbuf, size_t errlen)
{
    if (m->hdr.type == FT_FRAME_ERROR) {
        fti_errf(errbuf, errlen, "%s", m->text);
        return m->status ? m->status : FT_EPROTO;
    }
    if (m->hdr.id != id) {
        fti_errf(errbuf, errlen, "reply: id %llu answers another request (%llu)",
             (unsigned long long)m->hdr.id, (unsigned long long)id);
        return FT_EPROTO;
    }
    if (m->hdr.type != want) {
        fti_errf(errbuf, errlen, "reply: a %s frame where %s was expected",
             ft_frame_type_name(m->hdr.type), ft_frame_type_name(want));
        return FT_EPROTO;
    }
    return FT_OK;
}

/* exchange sends msg (the call's: freed here whatever happens) on a
 * context of its own and sets *reply to the answer (the caller frees
 * it), within the handle's timeout from t0 (fti_now_ms: when the call
 * began; a coalesced frame's, when its oldest call did). */
static int exchange(ft_client *c, nng_msg *msg, uint16_t want, uint64_t t0,
                    nng_msg **reply, char *errbuf, size_t errlen)
{
    const char *what = ft_frame_type_name(want & 0x7fff);
    const size_t len = nng_msg_len(msg);
    nng_ctx ctx;
    nng_aio *aio = NULL;
    *reply = NULL;
    int rv = nng_ctx_open(&ctx, c->sock);
    if (rv != 0) {
        nng_msg_free(msg);
        return nng_err(rv, c, "context", errbuf, errlen);
    }
    if ((rv = nng_aio_alloc(&aio, NULL, NULL)) != 0) {
        nng_msg_free(msg);
        nng_ctx_close(ctx);
        return nng_err(rv, c, "request", errbuf, errlen);
    }
    pending p;
    int rc;
    for (;;) {
        int left = c->timeout_ms - (int)(fti_now_ms() - t0);
        rc = start_send(c, &p, ctx, aio, msg, what, left > 1 ? left : 1, 1,
                        NULL, errbuf, errlen);
        if (rc != FT_OK) {
            nng_msg_free(msg);
            nng_aio_free(aio);
            nng_ctx_close(ctx);
            return rc;
        }
        nng_aio_wait(aio);
        rv = nng_aio_result(aio);
        if (rv != NNG_ECONNRESET)
            break;
        /* The connection went before the request was handed to it (only
         * pipe_cb fails a send so): it was never sent, and the message is
         * ours again: send it once connected again. */
        msg = nng_aio_get_msg(aio);
        nng_aio_set_msg(aio, NULL);
        end_call(c, &p);
    }
    if (rv == 0) {
        nng_ctx_recv(ctx, aio);
        nng_aio_wait(aio);
        rv = nng_aio_result(aio);
        msg = rv == 0 ? nng_aio_get_msg(aio) : NULL;
    } else {
        nng_msg_free(nng_aio_get_msg(aio));
        msg = NULL;
    }
    end_call(c, &p);
    nng_aio_free(aio);
    nng_ctx_close(ctx);
    if (rv != 0) {
        int rc = nng_err(rv, c, what, errbuf, errlen);
        if (rv == NNG_ECONNRESET)
            big_hint(errbuf, errlen, len);
        return rc;
    }
    *reply = msg;
    return FT_OK;
}

/* decode_reply decodes an answer into m and checks it is the one
 * expected. */
static int decode_reply(const void *body, size_t len, uint64_t id,
                        uint16_t want, ft_frame_msg *m, char *errbuf,
                        size_t errlen)
{
    char err[256];
    int rc = ft_frame_decode(m, body, len, 0, err, sizeof err);
    if (rc != FT_OK) {
        fti_errf(errbuf, errlen, "reply: %s", err);
        return rc;
    }
    return check_reply(m, id, want, errbuf, errlen);
}

/* roundtrip sends the frame in req on a context of its own and decodes
 * the answer into m. */
static int roundtrip(ft_client *c, const ft_buf *req, uint64_t id,
                     uint16_t want, ft_frame_msg *m, char *errbuf,
                     size_t errlen)
{
    nng_msg *msg = NULL, *reply;
    int rv;
    if ((rv = nng_msg_alloc(&msg, 0)) != 0 ||
        (rv = nng_msg_append(msg, req->data, req->len)) != 0) {
        if (msg)
            nng_msg_free(msg);
        return nng_err(rv, c, "request", errbuf, errlen);
    }
    int rc = exchange(c, msg, want, fti_now_ms(), &reply, errbuf, errlen);
    if (rc != FT_OK)
        return rc;
    rc = decode_reply(nng_msg_body(reply), nng_msg_len(reply), id, want, m,
                      errbuf, errlen);
    nng_msg_free(reply);
    return rc;
}

/* bad_request names the first request of reqs that no SEARCH frame can
 * carry, and why (the error path of fti_client_search_encode). */
static void bad_request(const ft_request *reqs, size_t n, int rc,
                        char *errbuf, size_t errlen)
{
    if (reqs == NULL) {
        fti_errf(errbuf, errlen, "search: reqs is NULL");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const ft_request *q = &reqs[i];
        if (q->T > FT_MAX_T || q->K > FT_MAX_K) {
            fti_errf(errbuf, errlen, "search: request %zu: %s = %u, at most "
                     "%u", i, q->T > FT_MAX_T ? "T" : "K",
                     q->T > FT_MAX_T ? q->T : q->K,
                     q->T > FT_MAX_T ? FT_MAX_T : FT_MAX_K);
            return;
        }
        if ((size_t)q->T * q->K > 0 && (q->tokens == NULL || q->logp == NULL)) {
            fti_errf(errbuf, errlen, "search: request %zu: %s is NULL (T = "
                     "%u, K = %u)", i, q->tokens == NULL ? "tokens" : "logp",
                     q->T, q->K);
            return;
        }
    }
    fti_errf(errbuf, errlen, "search: cannot encode the request (%s%s)",
             ft_strerror(rc), rc == FT_ELIMIT ? ": the frame would pass 4 GiB"
                                              : "");
}

int fti_client_search_encode(const ft_client *c, uint64_t id,
                             const ft_request *reqs, size_t n, nng_msg **out,
                             char *errbuf, size_t errlen)
{
    *out = NULL;
    if (n == 0 || n > FT_FRAME_MAX_BATCH) {
        fti_errf(errbuf, errlen, "search: expected 1..%u requests, got %zu",
             FT_FRAME_MAX_BATCH, n);
        return FT_EINVAL;
    }
    /* Measured, then written straight into the message that is sent: no
     * buffer of our own to grow and copy from. */
    size_t size;
    int rc = ft_frame_search_size(reqs, NULL, n, &size);
    if (rc != FT_OK) {
        bad_request(reqs, n, rc, errbuf, errlen);
        return rc;
    }
    nng_msg *msg;
    int rv = nng_msg_alloc(&msg, size);
    if (rv != 0)
        return nng_err(rv, c, "SEARCH", errbuf, errlen);
    rc = ft_frame_encode_search_to(nng_msg_body(msg), size, id,
                                   c->deadline_ms, c->frame_flags, reqs, NULL,
                                   n);
    if (rc != FT_OK) {
        nng_msg_free(msg);
        fti_errf(errbuf, errlen, "search: cannot encode the request (%s)",
             ft_strerror(rc));
        return rc;
    }
    *out = msg;
    return FT_OK;
}

uint32_t fti_client_frame_flags(const ft_client *c)
{
    return c->frame_flags;
}

int fti_client_search_decode(const void *body, size_t len, uint64_t id,
                             size_t n, ft_client_results **out, char *errbuf,
                             size_t errlen)
{
    *out = NULL;
    ft_client_results *r = calloc(1, sizeof *r);
    if (r == NULL) {
        fti_errf(errbuf, errlen, "search: out of memory");
        return FT_ENOMEM;
    }
    ft_frame_msg_init(&r->m);
    int rc = decode_reply(body, len, id, FT_FRAME_RESULT, &r->m, errbuf,
                          errlen);
    if (rc == FT_OK && r->m.count != n) {
        fti_errf(errbuf, errlen, "reply: %u results for %zu requests",
             r->m.count, n);
        rc = FT_EPROTO;
    }
    if (rc != FT_OK) {
        ft_client_results_free(r);
        return rc;
    }
    *out = r;
    return FT_OK;
}

/* search_frame is one SEARCH frame of n requests and its answer, within
 * the handle's timeout from t0 (exchange). */
static int search_frame(ft_client *c, const ft_request *reqs, size_t n,
                        uint64_t t0, ft_client_results **out, char *errbuf,
                        size_t errlen)
{
    uint64_t id = atomic_fetch_add(&c->next_id, 1);
    nng_msg *msg, *reply;
    int rc = fti_client_search_encode(c, id, reqs, n, &msg, errbuf, errlen);
    if (rc != FT_OK)
        return rc;
    rc = exchange(c, msg, FT_FRAME_RESULT, t0, &reply, errbuf, errlen);
    if (rc != FT_OK)
        return rc;
    rc = fti_client_search_decode(nng_msg_body(reply), nng_msg_len(reply),
                                  id, n, out, errbuf, errlen);
    nng_msg_free(reply);
    return rc;
}

/* co_bytes is the bytes a call's requests add to a SEARCH frame (its own
 * frame's, less the header); a call whose frame cannot be sized (too
 * many requests, a limit broken) is past any shared frame: it goes alone
 * and its own frame says what is wrong. */
static size_t co_bytes(const ft_request *reqs, size_t n)
{
    size_t size;
    if (n == 0 || n > FT_FRAME_MAX_BATCH ||
        ft_frame_search_size(reqs, NULL, n, &size) != FT_OK)
        return (size_t)FT_CLIENT_COALESCE_BYTES + 1;
    return size - FT_FRAME_HDR_SIZE;
}

/* co_lead sends the calls first .. (next NULL) in one frame of n
 * requests (a lone call: its own requests as they are) and fills each
 * call's rc, out (its share of the answer) and err; co_mu not held. */
static void co_lead(ft_client *c, co_call *first, size_t n)
{
    char err[512] = "";
    ft_client_results *whole = NULL;
    int rc;
    if (first->next == NULL) {
        first->rc = search_frame(c, first->reqs, first->n, first->t0,
                                 &first->out, first->err, sizeof first->err);
        return;
    }
    ft_request *all = malloc(n * sizeof *all);
    if (all == NULL) {
        fti_errf(err, sizeof err, "search: out of memory");
        rc = FT_ENOMEM;
    } else {
        size_t k = 0;
        for (co_call *q = first; q; q = q->next) {
            memcpy(all + k, q->reqs, q->n * sizeof *all);
            k += q->n;
        }
        /* the oldest call's timeout: none waits past its own */
        rc = search_frame(c, all, n, first->t0, &whole, err, sizeof err);
        free(all);
    }
    int shares = 0;
    size_t off = 0;
    for (co_call *q = first; q; q = q->next) {
        q->out = NULL;
        if (rc == FT_OK && (q->out = calloc(1, sizeof *q->out)) != NULL) {
            ft_frame_msg_init(&q->out->m);
            q->out->whole = whole;
            q->out->res = whole->m.res + off;
            q->out->count = q->n;
            shares++;
            q->rc = FT_OK;
        } else if (rc == FT_OK) {
            q->rc = FT_ENOMEM;
            fti_errf(q->err, sizeof q->err, "search: out of memory");
        } else {
            q->rc = rc;
            snprintf(q->err, sizeof q->err, "%s", err);
        }
        off += q->n;
    }
    if (whole != NULL) {
        if (shares == 0) {
            ft_client_results_free(whole);
        } else {
            atomic_store(&whole->refs, shares);
        }
    }
}

/* co_search is ft_client_search on a coalescing handle: a call too
 * large to share a frame goes alone, at once; another joins the queue;
 * while fewer than co_max frames are out, a call takes the queue's head
 * calls (in order, up to FT_FRAME_MAX_BATCH requests and a
 * frame of FT_CLIENT_COALESCE_BYTES, at least one call) into a frame,
 * then wakes the calls it carried and, the queue not empty, its head to
 * lead the next.  Every call waits on its own condition variable: one
 * wake-up a call. */
static int co_search(ft_client *c, const ft_request *reqs, size_t n,
                     ft_client_results **out, char *errbuf, size_t errlen)
{
    size_t bytes = co_bytes(reqs, n);
    if (bytes > (FT_CLIENT_COALESCE_BYTES - FT_FRAME_HDR_SIZE) / 2)
        /* no call as large could join it: alone, at once, outside the N
         * frames (a handle of large calls keeps all of them in flight) */
        return search_frame(c, reqs, n, fti_now_ms(), out, errbuf, errlen);
    co_call me;
    memset(&me, 0, sizeof me);
    me.reqs = reqs;
    me.n = n;
    me.bytes = bytes;
    me.t0 = fti_now_ms();
    pthread_cond_init(&me.cv, NULL);
    pthread_mutex_lock(&c->co_mu);
    if (c->co_tail)
        c->co_tail->next = &me;
    else
        c->co_head = &me;
    c->co_tail = &me;
    while (!me.done) {
        if (c->co_out >= c->co_max || c->co_head == NULL) {
            pthread_cond_wait(&me.cv, &c->co_mu);
            continue;
        }
        co_call *first = c->co_head, *last = first;
        size_t nreq = first->n, bytes = FT_FRAME_HDR_SIZE + first->bytes;
        while (last->next && nreq + last->next->n <= FT_FRAME_MAX_BATCH &&
               bytes + last->next->bytes <= FT_CLIENT_COALESCE_BYTES) {
            last = last->next;
            nreq += last->n;
            bytes += last->bytes;
        }
        c->co_head = last->next;
        if (c->co_head == NULL)
            c->co_tail = NULL;
        last->next = NULL;
        c->co_out++;
        /* calls left behind (the frame full) and a frame free: the next
         * head leads one beside this */
        if (c->co_head && c->co_out < c->co_max)
            pthread_cond_signal(&c->co_head->cv);
        pthread_mutex_unlock(&c->co_mu);
        co_lead(c, first, nreq);
        pthread_mutex_lock(&c->co_mu);
        c->co_out--;
        for (co_call *q = first, *nx; q; q = nx) {
            nx = q->next; /* q may return (and go) once done is set */
            q->done = 1;
            if (q != &me)
                pthread_cond_signal(&q->cv);
        }
        if (c->co_head && !me.done)
            continue; /* this thread leads again */
        if (c->co_head)
            pthread_cond_signal(&c->co_head->cv);
    }
    pthread_mutex_unlock(&c->co_mu);
    pthread_cond_destroy(&me.cv);
    *out = me.out;
    if (me.rc != FT_OK)
        fti_errf(errbuf, errlen, "%s", me.err);
    return me.rc;
}

int ft_client_search(ft_client *c, const ft_request *reqs, size_t n,
                     ft_client_results **out, char *errbuf, size_t errlen)
{
    if (c == NULL || reqs == NULL || out == NULL) {
        fti_errf(errbuf, errlen, "search: %s is NULL",
                 c == NULL ? "the client" : reqs == NULL ? "reqs" : "out");
        return FT_EINVAL;
    }
    *out = NULL;
    if (c->co_max > 0)
        return co_search(c, reqs, n, out, errbuf, errlen);
    return search_frame(c, reqs, n, fti_now_ms(), out, errbuf, errlen);
}

size_t ft_client_results_count(const ft_client_results *r)
{
    return r ? res_n(r) : 0;
}

const ft_result *ft_client_results_get(const ft_client_results *r, size_t i)
{
    return r && i < res_n(r) ? &res_at(r)[i] : NULL;
}

void ft_client_results_free(ft_client_results *r)
{
    if (r == NULL)
        return;
    ft_client_results *w = r->whole;
    if (w != NULL) { /* a share: the answer goes with its last share */
        free(r);
        if (atomic_fetch_sub(&w->refs, 1) != 1)
            return;
        r = w;
    }
    ft_frame_msg_free(&r->m);
    free(r);
}

/* ---- the array form: grid blocks in, columns out ---- */

/* Requests of a grid block built on the stack up to this many. */
#define GRIDS_ON_STACK 16

int ft_client_search_grids(ft_client *c, const ft_request *g, size_t n,
                           ft_client_results **out, char *errbuf,
                           size_t errlen)
{
    if (c == NULL || g == NULL || out == NULL) {
        fti_errf(errbuf, errlen, "search: %s is NULL",
                 c == NULL ? "the client" : g == NULL ? "grids" : "out");
        return FT_EINVAL;
    }
    *out = NULL;
    if (n == 0 || n > FT_FRAME_MAX_BATCH) {
        fti_errf(errbuf, errlen, "search: expected 1..%u requests, got %zu",
                 FT_FRAME_MAX_BATCH, n);
        return FT_EINVAL;
    }
    /* Checked before the grids are addressed: i*T*K stays in range. */
    if (g->T > FT_MAX_T || g->K > FT_MAX_K) {
        fti_errf(errbuf, errlen, "search: grids: %s %u exceeds %u",
                 g->T > FT_MAX_T ? "T" : "K",
                 g->T > FT_MAX_T ? g->T : g->K,
                 g->T > FT_MAX_T ? FT_MAX_T : FT_MAX_K);
        return FT_ELIMIT;
    }
    ft_request stack[GRIDS_ON_STACK];
    ft_request *reqs = stack;
    if (n > GRIDS_ON_STACK && (reqs = malloc(n * sizeof *reqs)) == NULL) {
        fti_errf(errbuf, errlen, "search: out of memory");
        return FT_ENOMEM;
    }
    size_t elems = (size_t)g->T * g->K;
    for (size_t i = 0; i < n; i++) {
        reqs[i] = *g;
        if (g->tokens != NULL)
            reqs[i].tokens = g->tokens + i * elems;
        if (g->logp != NULL)
            reqs[i].logp = g->logp + i * elems;
    }
    int rc = ft_client_search(c, reqs, n, out, errbuf, errlen);
    if (reqs != stack)
        free(reqs);
    return rc;
}

size_t ft_client_results_shape(const ft_client_results *r, size_t first,
                               size_t count, uint32_t *max_hits,
                               uint32_t *max_len)
{
    uint32_t mh = 0, ml = 0;
    size_t have = r ? res_n(r) : 0;
    if (first >= have)
        count = 0;
    else if (count > have - first)
        count = have - first;
    for (size_t i = first; i < first + count; i++) {
        const ft_result *x = &res_at(r)[i];
        if (x->status != FT_OK)
            continue;
        if (x->n > mh)
            mh = x->n;
        for (uint32_t j = 0; j < x->n; j++)
            if (x->hits[j].len > ml)
                ml = x->hits[j].len;
    }
    if (max_hits)
        *max_hits = mh;
    if (max_len)
        *max_len = ml;
    return count;
}

/* col_put copies size bytes of v into slot j of the k-th result of a
 * column (rows slots per result, stride bytes apart). */
static inline void col_put(void *base, size_t stride, size_t rows, size_t k,
                           size_t j, const void *v, size_t size)
{
    memcpy((unsigned char *)base + (k * rows + j) * stride, v, size);
}

/* col_zero zeroes slots from..rows-1 of the k-th result of a column. */
static void col_zero(void *base, size_t stride, size_t rows, size_t k,
                     size_t from, size_t size)
{
    unsigned char *p = (unsigned char *)base + (k * rows + from) * stride;
    if (stride == size) {
        memset(p, 0, (rows - from) * size);
        return;
    }
    for (size_t j = from; j < rows; j++, p += stride)
        memset(p, 0, size);
}

/* stride_ok says whether a given column's stride (0: packed) holds its
 * element of size bytes; if not, errbuf names it. */
static int stride_ok(const void *col, size_t stride, size_t size,
                     const char *name, char *errbuf, size_t errlen)
{
    if (col == NULL || stride == 0 || stride >= size)
        return 1;
    fti_errf(errbuf, errlen, "columns: %s_stride %zu is less than its "
             "element's %zu bytes", name, stride, size);
    return 0;
}

int ft_client_results_columns(const ft_client_results *r, size_t first,
                              size_t count, const ft_client_columns *cols,
                              char *errbuf, size_t errlen)
{
    if (r == NULL || cols == NULL) {
        fti_errf(errbuf, errlen, "columns: %s is NULL",
                 r == NULL ? "results" : "cols");
        return FT_EINVAL;
    }
    size_t have = res_n(r);
    if (first > have || count > have - first) {
        fti_errf(errbuf, errlen,
                 "columns: results %zu..%zu asked, %zu held", first,
                 first + count, have);
        return FT_EINVAL;
    }
    /* A stride below its element's size would have slots overlap and the
     * last one run past count*rows strides. */
    if (!stride_ok(cols->tokens, cols->tokens_stride, 4 * (size_t)cols->width,
                   "tokens", errbuf, errlen) ||
        !stride_ok(cols->len, cols->len_stride, 4, "len", errbuf, errlen) ||
        !stride_ok(cols->value, cols->value_stride, 8, "value", errbuf,
                   errlen) ||
        !stride_ok(cols->score, cols->score_stride, 8, "score", errbuf,
                   errlen) ||
        !stride_ok(cols->sigma, cols->sigma_stride, 4, "sigma", errbuf,
                   errlen))
        return FT_EINVAL;
    /* Every fault is found before anything is written. */
    for (size_t k = 0; k < count; k++) {
        const ft_result *x = &res_at(r)[first + k];
        if (x->status != FT_OK)
            continue;
        if (x->n > cols->rows) {
            fti_errf(errbuf, errlen,
                     "columns: result %zu has %u hits, rows holds %u",
                     first + k, x->n, cols->rows);
            return FT_EINVAL;
        }
        if (cols->tokens == NULL)
            continue;
        for (uint32_t j = 0; j < x->n; j++)
            if (x->hits[j].len > cols->width) {
                fti_errf(errbuf, errlen,
                         "columns: result %zu, hit %u: a key of %u "
                         "tokens, width holds %u",
                         first + k, j, x->hits[j].len, cols->width);
                return FT_EINVAL;
            }
    }
    size_t rows = cols->rows, width = cols->width;
    size_t tw = 4 * width;
    size_t ts = cols->tokens_stride ? cols->tokens_stride : tw;
    size_t ls = cols->len_stride ? cols->len_stride : 4;
    size_t vs = cols->value_stride ? cols->value_stride : 8;
    size_t ss = cols->score_stride ? cols->score_stride : 8;
    size_t gs = cols->sigma_stride ? cols->sigma_stride : 4;
    for (size_t k = 0; k < count; k++) {
        const ft_result *x = &res_at(r)[first + k];
        uint32_t n = x->status == FT_OK ? x->n : 0;
        if (cols->n)
            cols->n[k] = n;
        if (cols->status)
            cols->status[k] = (int32_t)x->status;
        for (uint32_t j = 0; j < n; j++) {
            const ft_hit *h = &x->hits[j];
            if (cols->tokens) {
                unsigned char *p = (unsigned char *)cols->tokens +
                                   (k * rows + j) * ts;
                memcpy(p, x->tokens + h->tok_off, (size_t)h->len * 4);
                memset(p + (size_t)h->len * 4, 0,
                       tw - (size_t)h->len * 4);
            }
            if (cols->len)
                col_put(cols->len, ls, rows, k, j, &h->len, 4);
            if (cols->value)
                col_put(cols->value, vs, rows, k, j, &h->value, 8);
            if (cols->score)
                col_put(cols->score, ss, rows, k, j, &h->score, 8);
            if (cols->sigma)
                col_put(cols->sigma, gs, rows, k, j, &h->sigma, 4);
        }
        if (n == rows)
            continue;
        if (cols->tokens)
            col_zero(cols->tokens, ts, rows, k, n, tw);
        if (cols->len)
            col_zero(cols->len, ls, rows, k, n, 4);
        if (cols->value)
            col_zero(cols->value, vs, rows, k, n, 8);
        if (cols->score)
            col_zero(cols->score, ss, rows, k, n, 8);
        if (cols->sigma)
            col_zero(cols->sigma, gs, rows, k, n, 4);
    }
    return FT_OK;
}

/* ---- the array form in two calls of one argument ---- */

int ft_client_grid_search(ft_client_grid_call *call)
{
    if (call == NULL)
        return FT_EINVAL;
    call->max_hits = call->max_len = call->failed = call->first_status = 0;
    int rc = ft_client_search_grids(call->client, &call->grids, call->n,
                                    &call->results, call->errbuf,
                                    call->errlen);
    if (rc != FT_OK)
        return rc;
    const ft_client_results *r = call->results;
    ft_client_results_shape(r, 0, call->n, &call->max_hits,
                            &call->max_len);
    uint32_t failed = 0;
    for (size_t i = 0; i < res_n(r); i++)
        failed += res_at(r)[i].status != FT_OK;
    call->failed = failed;
    call->first_status = (uint32_t)res_at(r)[0].status;
    return FT_OK;
}

int ft_client_grid_columns(ft_client_grid_call *call)
{
    if (call == NULL)
        return FT_EINVAL;
    if (call->results == NULL) {
        fti_errf(call->errbuf, call->errlen, "columns: results is NULL");
        return FT_EINVAL;
    }
    int rc = ft_client_results_columns(call->results, 0, call->n,
                                       &call->cols, call->errbuf,
                                       call->errlen);
    ft_client_results_free(call->results);
    call->results = NULL;
    return rc;
}

/* ---- asynchronous search ---- */

typedef struct acall {
    ft_client *c;
    nng_ctx ctx;
    nng_aio *aio;
    int sent;
    uint64_t id;
    size_t n;
    ft_client_cb cb;
    void *arg;
    pending p;
    int queued;         /* sent while the connection was lost */
    size_t len;         /* the request's bytes (big_hint) */
    uint64_t t0_ms;     /* when the call was made */
} acall;

static void acall_finish(acall *a, int rc, ft_client_results *r,
                         const char *err)
{
    ft_client_cb cb = a->cb;
    void *arg = a->arg;
    end_call(a->c, &a->p);
    nng_ctx_close(a->ctx);
    /* The aio cannot be freed from its own callback (nng_aio_free waits
     * for it); nng_aio_reap frees it once the callback has returned. */
    nng_aio_reap(a->aio);
    free(a);
    cb(rc, r, err, arg);
}

static void acall_cb(void *arg)
{
    acall *a = arg;
    char err[1024];
    int rv = nng_aio_result(a->aio);
    if (rv != 0) {
        if (!a->sent)
            nng_msg_free(nng_aio_get_msg(a->aio));
        int rc = nng_err(rv, a->c, "SEARCH", err, sizeof err);
        if (!a->sent && rv == NNG_ECONNRESET) {
            snprintf(err, sizeof err, "%s: connection lost: SEARCH not sent",
                     a->c->url);
        } else if (!a->sent && rv == NNG_ETIMEDOUT && a->queued) {
            /* Its send waited for a reconnect that did not come. */
            pthread_mutex_lock(&a->c->mu);
            uint64_t lost = a->c->lost_ms;
            pthread_mutex_unlock(&a->c->mu);
            snprintf(err, sizeof err, "%s: connection lost: SEARCH not sent "
                     "(no server for %llu ms)", a->c->url,
                     (unsigned long long)(fti_now_ms() - lost));
            rc = FT_ECONN;
        } else if (a->sent && rv == NNG_ECONNRESET) {
            big_hint(err, sizeof err, a->len);
        }
        acall_finish(a, rc, NULL, err);
        return;
    }
    if (!a->sent) {
        a->sent = 1;
        /* The answer gets what is left of the timeout. */
        int left = a->c->timeout_ms - (int)(fti_now_ms() - a->t0_ms);
        nng_aio_set_timeout(a->aio, left > 1 ? left : 1);
        nng_ctx_recv(a->ctx, a->aio);
        return;
    }
    nng_msg *msg = nng_aio_get_msg(a->aio);
    ft_client_results *r;
    int rc = fti_client_search_decode(nng_msg_body(msg), nng_msg_len(msg),
                                      a->id, a->n, &r, err, sizeof err);
    nng_msg_free(msg);
    acall_finish(a, rc, r, rc == FT_OK ? NULL : err);
}

int ft_client_search_async(ft_client *c, const ft_request *reqs, size_t n,
                           ft_client_cb cb, void *arg, char *errbuf,
                           size_t errlen)
{
    /* cb is called exactly once, on one of nng's threads: without one the
     * call would fail there, long after it returned FT_OK. */
    if (c == NULL || reqs == NULL || cb == NULL) {
        fti_errf(errbuf, errlen, "search: %s is NULL",
                 c == NULL ? "the client" : reqs == NULL ? "reqs" : "cb");
        return FT_EINVAL;
    }
    acall *a = calloc(1, sizeof *a);
    if (a == NULL) {
        fti_errf(errbuf, errlen, "search: out of memory");
        return FT_ENOMEM;
    }
    a->c = c;
    a->cb = cb;
    a->arg = arg;
    a->n = n;
    a->id = atomic_fetch_add(&c->next_id, 1);
    nng_msg *msg = NULL;
    int rc = fti_client_search_encode(c, a->id, reqs, n, &msg, errbuf,
                                      errlen);
    int rv = 0;
    if (rc == FT_OK &&
        ((rv = nng_ctx_open(&a->ctx, c->sock)) != 0 ||
         (rv = nng_aio_alloc(&a->aio, acall_cb, a)) != 0))
        rc = nng_err(rv, c, "SEARCH", errbuf, errlen);
    if (rc != FT_OK) {
        if (msg)
            nng_msg_free(msg);
        if (a->aio)
            nng_aio_free(a->aio);
        if (a->ctx.id)
            nng_ctx_close(a->ctx);
        free(a);
        return rc;
    }
    a->t0_ms = fti_now_ms();
    a->len = nng_msg_len(msg);
    rc = start_send(c, &a->p, a->ctx, a->aio, msg, "SEARCH", c->timeout_ms,
                    0, &a->queued, errbuf, errlen);
    if (rc != FT_OK) {
        nng_msg_free(msg);
        nng_aio_free(a->aio);
        nng_ctx_close(a->ctx);
        free(a);
    }
    return rc;
}

/* ---- admin and health ---- */

int ft_client_ping(ft_client *c, char *errbuf, size_t errlen)
{
    if (c == NULL) {
        fti_errf(errbuf, errlen, "ping: the client is NULL");
        return FT_EINVAL;
    }
    uint64_t id = atomic_fetch_add(&c->next_id, 1);
    ft_buf b;
    ft_buf_init(&b);
    ft_frame_msg m;
    ft_frame_msg_init(&m);
    int rc = ft_frame_encode_ping(&b, id);
    if (rc == FT_OK)
        rc = roundtrip(c, &b, id, FT_FRAME_PONG, &m, errbuf, errlen);
    else
        fti_errf(errbuf, errlen, "ping: out of memory");
    ft_frame_msg_free(&m);
    ft_buf_free(&b);
    return rc;
}

int ft_client_info(ft_client *c, char **text, char *errbuf, size_t errlen)
{
    if (c == NULL || text == NULL) {
        fti_errf(errbuf, errlen, "info: %s is NULL",
                 c == NULL ? "the client" : "text");
        return FT_EINVAL;
    }
    *text = NULL;
    uint64_t id = atomic_fetch_add(&c->next_id, 1);
    ft_buf b;
    ft_buf_init(&b);
    ft_frame_msg m;
    ft_frame_msg_init(&m);
    int rc = ft_frame_encode_info(&b, id);
    if (rc == FT_OK)
        rc = roundtrip(c, &b, id, FT_FRAME_INFO_REPLY, &m, errbuf, errlen);
    else
        fti_errf(errbuf, errlen, "info: out of memory");
    if (rc == FT_OK) {
        *text = strdup(m.text);
        if (*text == NULL) {
            fti_errf(errbuf, errlen, "info: out of memory");
            rc = FT_ENOMEM;
        }
    }
    ft_frame_msg_free(&m);
    ft_buf_free(&b);
    return rc;
}

void ft_client_text_free(char *text)
{
    free(text);
}

int ft_client_reload(ft_client *c, const char *path, char *errbuf,
                     size_t errlen)
{
    if (c == NULL) {
        fti_errf(errbuf, errlen, "reload: the client is NULL");
        return FT_EINVAL;
    }
    uint64_t id = atomic_fetch_add(&c->next_id, 1);
    ft_buf b;
    ft_buf_init(&b);
    ft_frame_msg m;
    ft_frame_msg_init(&m);
    int rc = ft_frame_encode_reload(&b, id, path);
    if (rc == FT_OK)
        rc = roundtrip(c, &b, id, FT_FRAME_RELOAD_REPLY, &m, errbuf, errlen);
    else
        fti_errf(errbuf, errlen, "reload: cannot encode the request (%s)",
             ft_strerror(rc));
    if (rc == FT_OK) {
        fti_errf(errbuf, errlen, "%s", m.text);
        rc = m.status;
    }
    ft_frame_msg_free(&m);
    ft_buf_free(&b);
    return rc;
}
