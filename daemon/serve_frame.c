/* serve_frame.c - the binary frames of router/frame.h in the server:
 * SEARCH (one request or a batch), INFO, PING and RELOAD; every fault is
 * answered with a typed ERROR frame and the context keeps serving. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"

#include "serve.h"
#include "serve_budget.h"
#include "serve_frame.h"
#include "serve_info.h"
#include "serve_priv.h"

/* frame_state is what a context keeps for frames: the decoded message
 * (whose storage the queued requests point into) and, for a batch with
 * rejected requests, where each request's answer is. */
typedef struct frame_state {
    ft_frame_msg m;
    uint32_t cap;
    int *job_of;         /* request i -> its job, or -1 when rejected */
    ft_result *rejected; /* answers of rejected requests (no hits) */
    ft_result *all;      /* all answers in request order, for the encoder */
} frame_state;

static frame_state *state_of(srv_wire *w)
{
    if (w->frame == NULL) {
        frame_state *f = calloc(1, sizeof *f);
        if (f == NULL)
            return NULL;
        ft_frame_msg_init(&f->m);
        w->frame = f;
    }
    return w->frame;
}

void srv_frame_state_free(srv_wire *w)
{
    frame_state *f = w->frame;
    if (f == NULL)
        return;
    ft_frame_msg_free(&f->m);
    free(f->job_of);
    free(f->rejected);
    free(f->all);
    free(f);
    w->frame = NULL;
}

void srv_frame_state_trim(srv_wire *w, size_t keep)
{
    frame_state *f = w->frame;
    if (f == NULL)
        return;
    ft_frame_msg_trim(&f->m, keep);
    if ((size_t)f->cap * (sizeof *f->rejected + sizeof *f->all) > keep) {
        free(f->job_of);
        free(f->rejected);
        free(f->all);
        f->job_of = NULL;
        f->rejected = NULL;
        f->all = NULL;
        f->cap = 0;
    }
}

static int state_reserve(frame_state *f, uint32_t n)
{
    if (n <= f->cap)
        return FT_OK;
    int *jo = realloc(f->job_of, n * sizeof *jo);
    if (jo == NULL)
        return FT_ENOMEM;
    f->job_of = jo;
    ft_result *r = realloc(f->rejected, n * sizeof *r);
    if (r == NULL)
        return FT_ENOMEM;
    f->rejected = r;
    ft_result *a = realloc(f->all, n * sizeof *a);
    if (a == NULL)
        return FT_ENOMEM;
    f->all = a;
    f->cap = n;
    return FT_OK;
}

static int reply_error(ft_buf *out, uint64_t id, int code, const char *msg)
{
    if (ft_frame_encode_error(out, id, code, msg) != FT_OK) {
        out->len = 0;
        ft_frame_encode_error(out, id, FT_ENOMEM, "reply: out of memory");
    }
    return SRV_WIRE_REPLY;
}

static int do_search(srv_wire *w, frame_state *f, server *srv, ft_buf *out)
{
    ft_frame_msg *m = &f->m;
    if (atomic_load(&srv->draining)) {
        for (uint32_t i = 0; i < m->count; i++)
            srv_count_refused(srv, FT_ESHUTDOWN);
        return reply_error(out, m->hdr.id, FT_ESHUTDOWN,
                           "server: draining; no new requests taken");
    }
    if (m->count > srv->queue.cap) {
        char msg[160];
        snprintf(msg, sizeof msg,
                 "count: %u requests in one frame exceed the queue depth %zu",
                 m->count, srv->queue.cap);
        return reply_error(out, m->hdr.id, FT_ELIMIT, msg);
    }
    if (state_reserve(f, m->count) != FT_OK ||
        srv_wire_reserve(w, m->count) != FT_OK)
        return reply_error(out, m->hdr.id, FT_ENOMEM,
                           "request: out of memory");
    uint64_t deadline = srv_wire_deadline(srv, m->hdr.deadline_ms);
    /* First every request against the caps, from its fields alone: a
     * refused one never sizes a result.  Then the accepted ones' result
     * buffers and reply against the memory budget, the whole frame at
     * once, before any is allocated. */
    size_t need = 0;
    for (uint32_t i = 0; i < m->count; i++) {
        ft_result *rj = &f->rejected[i];
        memset(rj, 0, sizeof *rj);
        int rc = ft_frame_search_fault(m, i, rj->error, sizeof rj->error);
        if (rc == FT_OK)
            rc = srv_wire_check(srv, w, &m->reqs[i], rj->error,
                                sizeof rj->error);
        rj->status = rc;
        f->job_of[i] = rc == FT_OK ? 0 : -1;
        if (rc == FT_OK)
            need += srv_wire_result_bytes(&m->reqs[i]);
    }
    if (need > 0) {
        char why[192];
        /* the results of a heavy frame fill the heavy share only */
        int kind = w->charged > SRV_HEAVY_BYTES ? SRV_BUDGET_HEAVY_MORE
                                                : SRV_BUDGET_LIGHT;
        if (srv_budget_take(srv, need, kind, why, sizeof why) != FT_OK) {
            for (uint32_t i = 0; i < m->count; i++)
                srv_count_refused(srv, FT_EBUSY);
            return reply_error(out, m->hdr.id, FT_EBUSY, why);
        }
        w->charged += need;
    }
    for (uint32_t i = 0; i < m->count; i++) {
        ft_result *rj = &f->rejected[i];
        int rc = rj->status;
        if (rc == FT_OK) {
            f->job_of[i] = (int)w->n_jobs;
            rc = srv_wire_add_job(w, &m->reqs[i], deadline);
            if (rc != FT_OK)
                snprintf(rj->error, sizeof rj->error,
                         "request: out of memory");
        }
        if (rc != FT_OK) {
            f->job_of[i] = -1;
            rj->status = rc;
            srv_count_refused(srv, rc);
        }
    }
    if (w->n_jobs > 0)
        return SRV_WIRE_QUEUE;
    srv_frame_encode_results(w, out);
    return SRV_WIRE_REPLY;
}

/* A RELOAD waits for the reload worker (serve.c) without holding an nng
 * thread: the context is answered when the reload ends. */
typedef struct frame_reload {
    srv_reload_req rq; /* first: done() gets it back */
    ft_buf *out;
    uint64_t id;
    void (*later)(void *arg);
    void *later_arg;
} frame_reload;

static void reload_done(srv_reload_req *rq, int rc, const char *msg)
{
    frame_reload *fr = (frame_reload *)rq;
    fr->out->len = 0;
    if (ft_frame_encode_reload_reply(fr->out, fr->id, rc, msg) != FT_OK)
        reply_error(fr->out, fr->id, FT_ENOMEM, "out of memory");
    void (*later)(void *) = fr->later;
    void *arg = fr->later_arg;
    free(fr);
    later(arg);
}

static int do_reload(const srv_wire_ctx *wc, ft_frame_msg *m, ft_buf *out)
{
    uint64_t id = m->hdr.id;
    frame_reload *fr = calloc(1, sizeof *fr);
    if (fr == NULL)
        return reply_error(out, id, FT_ENOMEM, "reload: out of memory");
    char msg[FT_CONFIG_PATH_MAX + 160];
    int rc = FT_ELIMIT;
    if (m->text_len >= sizeof fr->rq.path) {
        snprintf(msg, sizeof msg, "reload: refused: the path is %zu bytes, "
                 "more than %zu", m->text_len, sizeof fr->rq.path - 1);
    } else {
        memcpy(fr->rq.path, m->text, m->text_len + 1);
        fr->rq.done = reload_done;
        fr->out = out;
        fr->id = id;
        fr->later = wc->later;
        fr->later_arg = wc->later_arg;
        rc = srv_reload_start(wc->srv, &fr->rq, msg, sizeof msg);
        if (rc == FT_OK)
            return SRV_WIRE_LATER;
    }
    free(fr);
    if (ft_frame_encode_reload_reply(out, id, rc, msg) != FT_OK)
        return reply_error(out, id, FT_ENOMEM, "out of memory");
    return SRV_WIRE_REPLY;
}

int srv_frame_decode(srv_wire *w, const srv_wire_ctx *wc,
                     const unsigned char *p, size_t len, ft_buf *out)
{
    server *srv = wc->srv;
    w->mode = SRV_MODE_FRAME;
    atomic_fetch_add(&srv->frame_messages, 1);
    frame_state *f = state_of(w);
    if (f == NULL)
        return reply_error(out, 0, FT_ENOMEM, "frame: out of memory");
    char err[256];
    int rc = ft_frame_decode(&f->m, p, len, 0, err, sizeof err);
    w->req_id = f->m.hdr.id;
    if (rc != FT_OK) {
        srv_count_refused(srv, rc);
        return reply_error(out, rc == FT_EPROTO ? f->m.hdr.id : 0, rc, err);
    }
    ft_frame_msg *m = &f->m;
    switch (m->hdr.type) {
    case FT_FRAME_SEARCH:
        return do_search(w, f, srv, out);
    case FT_FRAME_PING:
        if (ft_frame_encode_pong(out, m->hdr.id) != FT_OK)
            return reply_error(out, m->hdr.id, FT_ENOMEM, "out of memory");
        return SRV_WIRE_REPLY;
    case FT_FRAME_INFO: {
        ft_buf text;
        ft_buf_init(&text);
        rc = srv_info(srv, &text, wc->admin);
        if (rc == FT_OK)
            rc = ft_frame_encode_info_reply(out, m->hdr.id,
                                            (const char *)text.data,
                                            text.len);
        ft_buf_free(&text);
        if (rc != FT_OK)
            return reply_error(out, m->hdr.id, rc, "info: out of memory");
        return SRV_WIRE_REPLY;
    }
    case FT_FRAME_RELOAD: {
        if (!FT_CONFIG_LIVE(&srv->cfg, admin_reload) || !wc->admin) {
            srv_count_refused(srv, FT_EPERM);
            return reply_error(
                out, m->hdr.id, FT_EPERM,
                !FT_CONFIG_LIVE(&srv->cfg, admin_reload)
                    ? "reload: not allowed (admin_reload is off)"
                    : "reload: not allowed on this listener (not admin)");
        }
        return do_reload(wc, m, out);
    }
    default: {
        char msg[96];
        srv_count_refused(srv, FT_EPROTO);
        snprintf(msg, sizeof msg, "type: %s (0x%04x) is not a request",
                 ft_frame_type_name(m->hdr.type), m->hdr.type);
        return reply_error(out, m->hdr.id, FT_EPROTO, msg);
    }
    }
}

void srv_frame_encode_results(srv_wire *w, ft_buf *out)
{
    frame_state *f = w->frame;
    ft_frame_msg *m = &f->m;
    for (uint32_t i = 0; i < m->count; i++)
        f->all[i] = f->job_of[i] >= 0 ? w->res[f->job_of[i]] : f->rejected[i];
    int rc = ft_frame_encode_result(out, m->hdr.id, f->all, m->count);
    if (rc != FT_OK) {
        out->len = 0;
        char msg[96];
        snprintf(msg, sizeof msg, "result: cannot encode the answer (%s)",
                 ft_strerror(rc));
        reply_error(out, m->hdr.id, rc, msg);
    }
    /* Answered: a context keeps at most 1 MiB per array of what a large
     * frame made it allocate (grids decoded in place take none). */
    ft_frame_msg_trim(m, (size_t)1 << 20);
}

int srv_frame_reply_msg(srv_wire *w, nng_msg *msg)
{
    frame_state *f = w->frame;
    ft_frame_msg *m = &f->m;
    for (uint32_t i = 0; i < m->count; i++)
        f->all[i] = f->job_of[i] >= 0 ? w->res[f->job_of[i]] : f->rejected[i];
    size_t size;
    int rc = ft_frame_result_size(f->all, m->count, &size);
    if (rc != FT_OK)
        return rc;
    /* The received message's body (which the requests' grids pointed
     * into, all answered now) becomes the reply's: nng_msg_realloc keeps
     * its buffer when the reply fits, and the frame is written there. */
    nng_msg_clear(msg);
    if (nng_msg_realloc(msg, size) != 0)
        return FT_ENOMEM;
    /* The answer carries a checksum when its request did (a client on
     * ipc:// sends none: docs/protocol.md). */
    rc = ft_frame_encode_result_sized(nng_msg_body(msg), size, m->hdr.id,
                                      m->hdr.flags & FT_FRAME_F_CHECKSUM,
                                      f->all, m->count);
    if (rc != FT_OK) {
        nng_msg_clear(msg);
        return rc;
    }
    ft_frame_msg_trim(m, (size_t)1 << 20);
    return FT_OK;
}

void srv_frame_encode_error(srv_wire *w, ft_buf *out, int code,
                            const char *msg)
{
    reply_error(out, w->req_id, code, msg);
}
