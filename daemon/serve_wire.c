/* serve_wire.c - decoding requests and encoding replies (serve_wire.h). */
#include "serve_wire.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include "frame.h"
#include "serve_budget.h"
#include "serve_frame.h"
#include "serve_info.h"
#include "serve_priv.h"
#include "search_impl.h"

void srv_wire_init(srv_wire *w)
{
    memset(w, 0, sizeof *w);
    ft_jsonl_req_init(&w->jq);
}

void srv_wire_free(srv_wire *w)
{
    ft_jsonl_req_free(&w->jq);
    for (size_t i = 0; i < w->cap_jobs; i++)
        ft_result_free(&w->res[i]);
    free(w->jobs);
    free(w->res);
    free(w->items);
    free(w->heavy);
    srv_frame_state_free(w);
    memset(w, 0, sizeof *w);
}

void srv_wire_trim(srv_wire *w, size_t keep)
{
    for (size_t i = 0; i < w->cap_jobs; i++) {
        ft_result *r = &w->res[i];
        if ((size_t)r->cap_hits * sizeof *r->hits +
                (size_t)r->cap_tokens * sizeof *r->tokens > keep)
            ft_result_free(r);
    }
    if (w->cap_jobs * (sizeof *w->jobs + sizeof *w->res) > keep) {
        for (size_t i = 0; i < w->cap_jobs; i++)
            ft_result_free(&w->res[i]);
        free(w->jobs);
        free(w->res);
        free(w->items);
        free(w->heavy);
        w->jobs = NULL;
        w->res = NULL;
        w->items = NULL;
        w->heavy = NULL;
        w->cap_jobs = 0;
        w->n_jobs = 0;
    }
    srv_frame_state_trim(w, keep);
}

size_t srv_wire_result_bytes(const ft_request *r)
{
    size_t n = r->results ? r->results : r->beam;
    /* the hits and their tokens, then the same again encoded in the reply
     * (a hit's fixed part, its tokens) */
    return n * (sizeof(ft_hit) + (size_t)r->T * 4) +
           n * (24 + (size_t)r->T * 4);
}

/* srv_wire_reserve makes room for n jobs; the result buffers are kept
 * across messages, so a context allocates only when a request needs more
 * than any before it. */
int srv_wire_reserve(srv_wire *w, size_t n)
{
    if (n <= w->cap_jobs)
        return FT_OK;
    ft_job *jobs = realloc(w->jobs, n * sizeof *jobs);
    if (jobs == NULL)
        return FT_ENOMEM;
    w->jobs = jobs;
    void **items = realloc(w->items, n * sizeof *items);
    if (items == NULL)
        return FT_ENOMEM;
    w->items = items;
    unsigned char *heavy = realloc(w->heavy, n);
    if (heavy == NULL)
        return FT_ENOMEM;
    w->heavy = heavy;
    ft_result *res = realloc(w->res, n * sizeof *res);
    if (res == NULL)
        return FT_ENOMEM;
    memset(res + w->cap_jobs, 0, (n - w->cap_jobs) * sizeof *res);
    w->res = res;
    w->cap_jobs = n;
    return FT_OK;
}

/* srv_wire_result_fit makes res hold the hits of a request. */
static int result_fit(ft_result *res, const ft_request *r)
{
    uint32_t n = r->results ? r->results : r->beam;
    if (res->hits != NULL && res->cap_hits >= n &&
        res->cap_tokens >= (uint64_t)n * r->T)
        return FT_OK;
    /* Size for this request's T, not FT_MAX_T: a context's buffers then
     * stay near what its largest request needed. */
    uint32_t hits = res->cap_hits > n ? res->cap_hits : n;
    uint32_t T = r->T > res->cap_tokens / (hits ? hits : 1)
                     ? r->T
                     : res->cap_tokens / (hits ? hits : 1);
    ft_result_free(res);
    return ft_result_alloc(res, hits, T ? T : 1);
}

int srv_wire_door(server *srv)
{
    int v = FT_CONFIG_LIVE(&srv->cfg, dup_check);
    if (v == FT_CONFIG_DUP_AUTO)
        return atomic_load_explicit(&srv->gen_overlaps, memory_order_relaxed)
                   ? FT_DOOR_EARLY
                   : FT_DOOR_ALL;
    return v == FT_CONFIG_DUP_ENGINE ? FT_DOOR_EARLY : FT_DOOR_ALL;
}

int srv_wire_check(struct server *srv, const srv_wire *w, const ft_request *r,
                   char *err, size_t errlen)
{
    const ft_config *c = &srv->cfg;
    uint32_t max_beam = FT_CONFIG_LIVE(c, max_beam);
    /* The fields and the caps first, in O(1): a request over a cap is
     * refused without the O(T x K) checks of its rows (on a heavy frame's
     * 31 requests of 64 x 4096 those took a fifth of the server's CPU
     * under a flood the caps refuse, on nng's threads, beside the small
     * requests).  A fault of the fields gives the validator's message, as
     * before; the rows are checked last. */
    int rc = fti_request_validate_fields(r, max_beam, err, errlen);
    if (rc != FT_OK)
        return rc;
    uint32_t nres = r->results ? r->results : r->beam;
    uint32_t cap_k = FT_CONFIG_LIVE(c, max_k), cap_t = FT_CONFIG_LIVE(c, max_t);
    uint32_t cap_results = FT_CONFIG_LIVE(c, max_results);
    if (cap_k && r->K > cap_k) {
        snprintf(err, errlen, "K: %u exceeds this server's cap of %u", r->K,
                 cap_k);
        return FT_EREQUEST;
    }
    if (cap_t && r->T > cap_t) {
        snprintf(err, errlen, "T: %u exceeds this server's cap of %u", r->T,
                 cap_t);
        return FT_EREQUEST;
    }
    if (cap_results && nres > cap_results) {
        snprintf(err, errlen, "results: %u exceeds this server's cap of %u",
                 nres, cap_results);
        return FT_EREQUEST;
    }
    /* dup_check = engine: the duplicate tokens are checked on the
     * engine's thread while its launch runs (fti_request_validate_late),
     * off this one's path; every other rule here, with the message
     * ft_request_validate gives. */
    return w->door == FT_DOOR_EARLY
               ? fti_request_validate_early(r, max_beam, err, errlen)
               : ft_request_validate(r, max_beam, err, errlen);
}

/* srv_wire_add_job appends a validated request as a job. */
int srv_wire_add_job(srv_wire *w, const ft_request *r, uint64_t deadline_ns)
{
    int rc = srv_wire_reserve(w, w->n_jobs + 1);
    if (rc != FT_OK)
        return rc;
    ft_result *res = &w->res[w->n_jobs];
    if ((rc = result_fit(res, r)) != FT_OK)
        return rc;
    ft_job *j = &w->jobs[w->n_jobs++];
    memset(j, 0, sizeof *j);
    j->req = *r;
    j->res = res;
    j->deadline_ns = deadline_ns;
    /* srv_wire_check validated it as far as w->door says: the engine
     * trusts that much. */
    j->validated = w->door;
    return FT_OK;
}

uint64_t srv_wire_deadline(struct server *srv, uint32_t ms)
{
    if (ms == 0)
        ms = FT_CONFIG_LIVE(&srv->cfg, default_deadline_ms);
    return ms ? fti_now_ns() + (uint64_t)ms * 1000000u : 0;
}

static int decode_json(srv_wire *w, const srv_wire_ctx *wc,
                       const unsigned char *p, size_t len, ft_buf *out)
{
    server *srv = wc->srv;
    char err[192];
    atomic_fetch_add(&srv->json_messages, 1);
    w->mode = SRV_MODE_JSON;
    int rc = ft_jsonl_parse(&w->jq, (const char *)p, len, err, sizeof err);
    if (rc == FT_OK)
        rc = srv_wire_check(srv, w, &w->jq.req, err, sizeof err);
    if (rc == FT_OK && atomic_load(&srv->draining)) {
        rc = FT_ESHUTDOWN;
        snprintf(err, sizeof err, "server: draining; no new requests taken");
    }
    if (rc == FT_OK) {
        size_t need = srv_wire_result_bytes(&w->jq.req);
        /* a heavy line's results fill the heavy share only, as a frame's */
        int kind = w->charged > SRV_HEAVY_BYTES ? SRV_BUDGET_HEAVY_MORE
                                                : SRV_BUDGET_LIGHT;
        rc = srv_budget_take(srv, need, kind, err, sizeof err);
        if (rc == FT_OK)
            w->charged += need;
    }
    if (rc == FT_OK) {
        rc = srv_wire_add_job(w, &w->jq.req, srv_wire_deadline(srv, 0));
        if (rc != FT_OK)
            snprintf(err, sizeof err, "request: out of memory");
    }
    if (rc == FT_OK)
        return SRV_WIRE_QUEUE;
    srv_count_refused(srv, rc);
    ft_jsonl_encode_error(out, &w->jq, err);
    return SRV_WIRE_REPLY;
}

int srv_wire_decode(srv_wire *w, const srv_wire_ctx *wc,
                    const unsigned char *p, size_t len, ft_buf *out)
{
    w->n_jobs = 0;
    w->door = srv_wire_door(wc->srv);
    /* The first byte decides (docs/protocol.md, "Frame or JSON line?"):
     * 'F', the magic's first byte, which no JSON text starts with, is a
     * frame; anything else (empty messages, blank lines, other JSON
     * values, garbage) is a JSON line and gets a JSON answer line, as
     * busy_unread answers it too. */
    if (!ft_frame_is_binary(p, len))
        return decode_json(w, wc, p, len, out);
    return srv_frame_decode(w, wc, p, len, out);
}

void srv_wire_encode_results(srv_wire *w, ft_buf *out)
{
    if (w->mode == SRV_MODE_FRAME) {
        srv_frame_encode_results(w, out);
        return;
    }
    if (ft_jsonl_encode_result(out, &w->jq, &w->res[0]) != FT_OK) {
        out->len = 0;
        ft_jsonl_encode_error(out, &w->jq, "result: out of memory");
    }
}

int srv_wire_reply_msg(srv_wire *w, nng_msg *msg)
{
    if (w->mode == SRV_MODE_FRAME)
        return srv_frame_reply_msg(w, msg);
    return FT_ENOTSUP; /* JSON lines: through the buffer */
}

void srv_wire_encode_error(srv_wire *w, ft_buf *out, int code,
                           const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (w->mode == SRV_MODE_FRAME)
        srv_frame_encode_error(w, out, code, msg);
    else
        ft_jsonl_encode_error(out, &w->jq, msg);
}
