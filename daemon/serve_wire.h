/*
 * serve_wire.h - the server's protocol layer: a received message (a binary
 * frame, or a docs/specification.md section 7 JSON line when its first byte is
 * '{') becomes either an immediate reply (errors, INFO, PING, RELOAD) or jobs
 * for the queue; answered jobs become the reply in the message's own dialect.
 */
#ifndef FT_SERVE_WIRE_H
#define FT_SERVE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

#include "batcher.h"
#include "flashtrie/internal/buf.h"
#include "jsonl.h"

struct server;

/* SRV_WIRE_LATER: another thread took the message over (a RELOAD waits
 * for the reload worker); it writes the reply into the decode's out and
 * then calls the srv_wire_ctx's later(later_arg), once. */
enum { SRV_WIRE_REPLY = 0, SRV_WIRE_QUEUE = 1, SRV_WIRE_LATER = 2 };
enum { SRV_MODE_JSON = 0, SRV_MODE_FRAME = 1 };

typedef struct srv_wire {
    int mode;
    ft_jsonl_req jq;     /* the JSON request (mode JSON) */
    uint64_t req_id;     /* the frame's request id (mode FRAME) */
    void *frame;         /* the frame decoder's state (serve_wire.c) */
    size_t n_jobs, cap_jobs;
    ft_job *jobs;
    ft_result *res;      /* res[i] is jobs[i]'s answer */
    void **items;        /* queue pointers to jobs[] */
    unsigned char *heavy; /* heavy[i]: jobs[i] rides the heavy lane */
    size_t charged;      /* bytes taken from the memory budget for the
                          * message being answered (serve_budget.h) */
    int door;            /* FT_DOOR_ALL or FT_DOOR_EARLY: how much of the
                          * message's requests the decoder validates
                          * (dup_check, srv_wire_door) */
} srv_wire;

typedef struct srv_wire_ctx {
    struct server *srv;
    int admin;           /* the listener is marked admin */
    void (*later)(void *arg); /* sends a reply written later (LATER) */
    void *later_arg;
} srv_wire_ctx;

void srv_wire_init(srv_wire *w);
void srv_wire_free(srv_wire *w);

/* srv_wire_trim gives back the buffers a large message made w grow beyond
 * keep bytes each (results, job arrays, the frame decoder's storage). */
void srv_wire_trim(srv_wire *w, size_t keep);

/* srv_wire_result_bytes is what answering r takes: its result buffer and
 * its share of the reply. */
size_t srv_wire_result_bytes(const ft_request *r);

/* srv_wire_decode decodes one message of len bytes.  SRV_WIRE_REPLY: out
 * holds the reply; SRV_WIRE_QUEUE: w->jobs[0..n_jobs) are ready to queue
 * (their done and arg still to be set by the caller). */
int srv_wire_decode(srv_wire *w, const srv_wire_ctx *wc,
                    const unsigned char *p, size_t len, ft_buf *out);

/* srv_wire_encode_results writes the reply for the answered jobs. */
void srv_wire_encode_results(srv_wire *w, ft_buf *out);

/* srv_wire_reply_msg writes the reply for the answered jobs straight into
 * msg (the context's message, cleared and sized exactly): binary frames
 * only.  FT_OK: msg is the reply; else the caller encodes with
 * srv_wire_encode_results (JSON lines, or an error of the frame's
 * encoder, which that answers with an ERROR). */
int srv_wire_reply_msg(srv_wire *w, nng_msg *msg);

/* srv_wire_encode_error writes an error reply for the whole message: an
 * ERROR frame, or one {"error": ...} line per JSON request. */
void srv_wire_encode_error(srv_wire *w, ft_buf *out, int code,
                           const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* What the binary half (serve_frame.h) uses of this one. */
/* srv_wire_reserve makes room for n jobs. */
int srv_wire_reserve(srv_wire *w, size_t n);
/* srv_wire_check checks a request against the server's caps and
 * validates it: whole with w->door FT_DOOR_ALL, all but its duplicate
 * tokens with FT_DOOR_EARLY (the engine's thread checks those). */
int srv_wire_check(struct server *srv, const srv_wire *w, const ft_request *r,
                   char *err, size_t errlen);
/* srv_wire_door is how much of a request the decoder validates now
 * (FT_DOOR_ALL or FT_DOOR_EARLY), by the dup_check setting and whether
 * the generation served overlaps the check with its engine
 * (server.gen_overlaps). */
int srv_wire_door(struct server *srv);
/* srv_wire_add_job appends a validated request as a job, as far
 * validated as w->door says. */
int srv_wire_add_job(srv_wire *w, const ft_request *r, uint64_t deadline_ns);
/* srv_wire_deadline is the deadline of a request arriving now that asks
 * for ms milliseconds (0: the server's default_deadline_ms). */
uint64_t srv_wire_deadline(struct server *srv, uint32_t ms);

#endif /* FT_SERVE_WIRE_H */
