/*
 * serve_frame.h - the binary half of the server's protocol layer
 * (serve_frame.c): the frames of router/frame.h decoded into jobs or an
 * immediate reply, and answered jobs encoded as frames.
 */
#ifndef FT_SERVE_FRAME_H
#define FT_SERVE_FRAME_H

#include <stddef.h>

#include <nng/nng.h>

#include "flashtrie/internal/buf.h"
#include "serve_wire.h"

int srv_frame_decode(srv_wire *w, const srv_wire_ctx *wc,
                     const unsigned char *p, size_t len, ft_buf *out);
void srv_frame_encode_results(srv_wire *w, ft_buf *out);
/* srv_frame_reply_msg writes the RESULT frame of the answered jobs
 * straight into msg (cleared and sized to the frame's exact bytes): no
 * intermediate buffer, no copy.  On an error msg is left empty and the
 * caller answers through srv_frame_encode_results. */
int srv_frame_reply_msg(srv_wire *w, nng_msg *msg);
void srv_frame_encode_error(srv_wire *w, ft_buf *out, int code,
                            const char *msg);
void srv_frame_state_free(srv_wire *w);
/* srv_frame_state_trim gives back what a large frame made the state grow
 * beyond keep bytes per array. */
void srv_frame_state_trim(srv_wire *w, size_t keep);

#endif /* FT_SERVE_FRAME_H */
