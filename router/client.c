/*
 * client.c - the C client library (include/flashtrie_client.h).
 *
 * Every call opens its own REQ context on the handle's one socket, so any
 * number of threads can call at once and nng matches each answer to its
 * context.  Frames are built and read by router/frame.c, the codec the
 * server uses too.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/tls/tls.h>

#include "flashtrie/internal/errmsg.h"
#include "flashtrie/internal/buf.h"
#include "flashtrie_client.h"
#include "frame.h"

struct ft_client {
    nng_socket sock;
    nng_dialer dialer;
    nng_tls_config *tls;
    int timeout_ms;
    uint32_t deadline_ms;
    atomic_uint_fast64_t next_id;
    char url[512];
};

struct ft_client_results {
    ft_frame_msg m;
};


void ft_client_opts_init(ft_client_opts *o)
{
    memset(o, 0, sizeof *o);
    o->timeout_ms = 10000;
}

static int tls_client(ft_client *c, const char *url, const ft_client_opts *o,
                      char *errbuf, size_t errlen)
{
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
    if (rv == 0)
        rv = nng_dialer_set_ptr(c->dialer, NNG_OPT_TLS_CONFIG, c->tls);
    if (rv != 0) {
        fti_errf(errbuf, errlen, "%s: TLS setup: %s", url, nng_strerror(rv));
        return FT_ECONN;
    }
    return FT_OK;
}

int ft_client_connect(ft_client **out, const char *url,
                      const ft_client_opts *opts, char *errbuf, size_t errlen)
{
    *out = NULL;
    ft_client_opts def;
    if (opts == NULL) {
        ft_client_opts_init(&def);
        opts = &def;
    }
    ft_client *c = calloc(1, sizeof *c);
    if (c == NULL) {
        fti_errf(errbuf, errlen, "client: out of memory");
        return FT_ENOMEM;
    }
    c->timeout_ms = opts->timeout_ms > 0 ? opts->timeout_ms : 10000;
    c->deadline_ms = opts->deadline_ms;
    atomic_init(&c->next_id, 1);
    snprintf(c->url, sizeof c->url, "%s", url);
    int rv = nng_req0_open(&c->sock);
    if (rv != 0) {
        fti_errf(errbuf, errlen, "%s: socket: %s", url, nng_strerror(rv));
        free(c);
        return FT_ECONN;
    }
    /* Answers may be large (a batch of 4096-hit results), and a request
     * must never be sent twice: the server has no way to tell a resend
     * from a new request, so a timeout is the caller's to handle. */
    nng_socket_set_size(c->sock, NNG_OPT_RECVMAXSZ, 0);
    nng_socket_set_ms(c->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
    nng_socket_set_ms(c->sock, NNG_OPT_RECONNMINT, 10);
    nng_socket_set_ms(c->sock, NNG_OPT_RECONNMAXT, 200);
    int rc = FT_OK;
    rv = nng_dialer_create(&c->dialer, c->sock, url);
    if (rv != 0) {
        fti_errf(errbuf, errlen, "%s: %s", url, nng_strerror(rv));
        rc = FT_EINVAL;
    }
    if (rc == FT_OK && !strncmp(url, "tls+", 4))
        rc = tls_client(c, url, opts, errbuf, errlen);
    if (rc == FT_OK) {
        rv = nng_dialer_start(c->dialer,
                              opts->connect_wait_ms > 0 ? NNG_FLAG_NONBLOCK : 0);
        if (rv != 0) {
            fti_errf(errbuf, errlen, "%s: cannot connect: %s", url,
                 nng_strerror(rv));
            rc = FT_ECONN;
        }
    }
    if (rc != FT_OK) {
        nng_close(c->sock);
        if (c->tls)
            nng_tls_config_free(c->tls);
        free(c);
        return rc;
    }
    *out = c;
    return FT_OK;
}

void ft_client_close(ft_client *c)
{
    if (c == NULL)
        return;
    nng_close(c->sock);
    if (c->tls)
        nng_tls_config_free(c->tls);
    free(c);
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
    fti_errf(errbuf, errlen, "%s: %s: %s", c->url, what, nng_strerror(rv));
    return FT_ECONN;
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

/* roundtrip sends the frame in req on a context of its own and decodes
 * the answer into m. */
static int roundtrip(ft_client *c, const ft_buf *req, uint64_t id,
                     uint16_t want, ft_frame_msg *m, char *errbuf,
                     size_t errlen)
{
    nng_ctx ctx;
    nng_aio *aio = NULL;
    nng_msg *msg = NULL;
    int rv = nng_ctx_open(&ctx, c->sock);
    if (rv != 0)
        return nng_err(rv, c, "context", errbuf, errlen);
    if ((rv = nng_aio_alloc(&aio, NULL, NULL)) != 0 ||
        (rv = nng_msg_alloc(&msg, 0)) != 0 ||
        (rv = nng_msg_append(msg, req->data, req->len)) != 0) {
        if (msg)
            nng_msg_free(msg);
        if (aio)
            nng_aio_free(aio);
        nng_ctx_close(ctx);
        return nng_err(rv, c, "request", errbuf, errlen);
    }
    nng_aio_set_timeout(aio, c->timeout_ms);
    nng_aio_set_msg(aio, msg);
    nng_ctx_send(ctx, aio);
    nng_aio_wait(aio);
    if ((rv = nng_aio_result(aio)) != 0) {
        nng_msg_free(nng_aio_get_msg(aio));
        nng_aio_free(aio);
        nng_ctx_close(ctx);
        return nng_err(rv, c, ft_frame_type_name(want & 0x7fff), errbuf,
                       errlen);
    }
    nng_ctx_recv(ctx, aio);
    nng_aio_wait(aio);
    rv = nng_aio_result(aio);
    msg = rv == 0 ? nng_aio_get_msg(aio) : NULL;
    nng_aio_free(aio);
    nng_ctx_close(ctx);
    if (rv != 0)
        return nng_err(rv, c, ft_frame_type_name(want & 0x7fff), errbuf,
                       errlen);
    char err[256];
    int rc = ft_frame_decode(m, nng_msg_body(msg), nng_msg_len(msg), 0, err,
                             sizeof err);
    nng_msg_free(msg);
    if (rc != FT_OK) {
        fti_errf(errbuf, errlen, "reply: %s", err);
        return rc;
    }
    return check_reply(m, id, want, errbuf, errlen);
}

static int encode_search(ft_client *c, ft_buf *b, uint64_t id,
                         const ft_request *reqs, size_t n, char *errbuf,
                         size_t errlen)
{
    if (n == 0 || n > FT_FRAME_MAX_BATCH) {
        fti_errf(errbuf, errlen, "search: expected 1..%u requests, got %zu",
             FT_FRAME_MAX_BATCH, n);
        return FT_EINVAL;
    }
    int rc = ft_frame_encode_search(b, id, c->deadline_ms, reqs, NULL, n);
    if (rc != FT_OK)
        fti_errf(errbuf, errlen, "search: cannot encode the request (%s)",
             ft_strerror(rc));
    return rc;
}

int ft_client_search(ft_client *c, const ft_request *reqs, size_t n,
                     ft_client_results **out, char *errbuf, size_t errlen)
{
    *out = NULL;
    uint64_t id = atomic_fetch_add(&c->next_id, 1);
    ft_buf b;
    ft_buf_init(&b);
    int rc = encode_search(c, &b, id, reqs, n, errbuf, errlen);
    if (rc != FT_OK) {
        ft_buf_free(&b);
        return rc;
    }
    ft_client_results *r = calloc(1, sizeof *r);
    if (r == NULL) {
        ft_buf_free(&b);
        fti_errf(errbuf, errlen, "search: out of memory");
        return FT_ENOMEM;
    }
    ft_frame_msg_init(&r->m);
    rc = roundtrip(c, &b, id, FT_FRAME_RESULT, &r->m, errbuf, errlen);
    ft_buf_free(&b);
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

size_t ft_client_results_count(const ft_client_results *r)
{
    return r ? r->m.count : 0;
}

const ft_result *ft_client_results_get(const ft_client_results *r, size_t i)
{
    return r && i < r->m.count ? &r->m.res[i] : NULL;
}

void ft_client_results_free(ft_client_results *r)
{
    if (r == NULL)
        return;
    ft_frame_msg_free(&r->m);
    free(r);
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
} acall;

static void acall_finish(acall *a, int rc, ft_client_results *r,
                         const char *err)
{
    ft_client_cb cb = a->cb;
    void *arg = a->arg;
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
    char err[512];
    int rv = nng_aio_result(a->aio);
    if (rv != 0) {
        if (!a->sent)
            nng_msg_free(nng_aio_get_msg(a->aio));
        int rc = nng_err(rv, a->c, "SEARCH", err, sizeof err);
        acall_finish(a, rc, NULL, err);
        return;
    }
    if (!a->sent) {
        a->sent = 1;
        nng_ctx_recv(a->ctx, a->aio);
        return;
    }
    nng_msg *msg = nng_aio_get_msg(a->aio);
    ft_client_results *r = calloc(1, sizeof *r);
    int rc = FT_ENOMEM;
    snprintf(err, sizeof err, "search: out of memory");
    if (r != NULL) {
        ft_frame_msg_init(&r->m);
        char e2[256];
        rc = ft_frame_decode(&r->m, nng_msg_body(msg), nng_msg_len(msg), 0,
                             e2, sizeof e2);
        if (rc != FT_OK)
            snprintf(err, sizeof err, "reply: %s", e2);
        else
            rc = check_reply(&r->m, a->id, FT_FRAME_RESULT, err, sizeof err);
        if (rc == FT_OK && r->m.count != a->n) {
            snprintf(err, sizeof err, "reply: %u results for %zu requests",
                     r->m.count, a->n);
            rc = FT_EPROTO;
        }
    }
    nng_msg_free(msg);
    if (rc != FT_OK) {
        ft_client_results_free(r);
        r = NULL;
    }
    acall_finish(a, rc, r, rc == FT_OK ? NULL : err);
}

int ft_client_search_async(ft_client *c, const ft_request *reqs, size_t n,
                           ft_client_cb cb, void *arg, char *errbuf,
                           size_t errlen)
{
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
    ft_buf b;
    ft_buf_init(&b);
    int rc = encode_search(c, &b, a->id, reqs, n, errbuf, errlen);
    nng_msg *msg = NULL;
    int rv = 0;
    if (rc == FT_OK &&
        ((rv = nng_msg_alloc(&msg, 0)) != 0 ||
         (rv = nng_msg_append(msg, b.data, b.len)) != 0 ||
         (rv = nng_ctx_open(&a->ctx, c->sock)) != 0 ||
         (rv = nng_aio_alloc(&a->aio, acall_cb, a)) != 0))
        rc = nng_err(rv, c, "SEARCH", errbuf, errlen);
    ft_buf_free(&b);
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
    nng_aio_set_timeout(a->aio, c->timeout_ms);
    nng_aio_set_msg(a->aio, msg);
    nng_ctx_send(a->ctx, a->aio);
    return FT_OK;
}

/* ---- admin and health ---- */

int ft_client_ping(ft_client *c, char *errbuf, size_t errlen)
{
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
