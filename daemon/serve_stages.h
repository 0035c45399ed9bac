/*
 * serve_stages.h - where a request's time goes in "flashtrie serve", by
 * the daemon's own clock (fti_now_ns): receipt -> decoded jobs (decode),
 * jobs ready -> their batch's engine call (queue: the batching window,
 * the wait for a replica; what Triton calls the queue duration), the
 * engine call (engine), the engine call's end -> its message's last
 * answer taken up by the thread that replies (answer: the wait behind
 * the replies to the batch's earlier messages), the last answer -> the
 * reply message ready (encode), the reply handed to nng -> nng done
 * sending it (send).
 *
 * INFO shows the means in its `# stages` section; /metrics the queue
 * wait as a histogram beside the request duration
 * (flashtrie_request_queue_seconds) and every stage's sum and count
 * (flashtrie_request_stage_seconds_total, _events_total{stage=...}).
 */
#ifndef FT_SERVE_STAGES_H
#define FT_SERVE_STAGES_H

#include <stdint.h>

#include "flashtrie/internal/buf.h"
#include "serve_priv.h"

/* srv_stages_job records one job that ran: its queue wait (ready_ns, when
 * its message's jobs were ready, to the engine call), engine time, and
 * the wait from the engine call's end to answered_ns (its message's last
 * answer taken up). */
void srv_stages_job(server *srv, uint64_t ready_ns, uint64_t answered_ns,
                    const ft_job *j);
/* srv_stages_message records a SEARCH message whose jobs ran: decode and
 * encode times. */
void srv_stages_message(server *srv, uint64_t decode_ns, uint64_t encode_ns);
/* srv_stages_send_call records how long nng_ctx_send took to take a
 * SEARCH reply (on the thread that replies: part of send). */
void srv_stages_send_call(server *srv, uint64_t ns);
/* srv_stages_send records a reply nng finished sending. */
void srv_stages_send(server *srv, uint64_t send_ns);

/* srv_stages_info writes INFO's `# stages` section. */
void srv_stages_info(server *srv, ft_buf *o);
/* srv_stages_render appends the stage families to a /metrics page. */
int srv_stages_render(server *srv, ft_buf *o);

#endif /* FT_SERVE_STAGES_H */
