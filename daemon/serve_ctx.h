/*
 * serve_ctx.h - the sockets of "flashtrie serve" and their contexts'
 * receive -> decode -> queue -> reply state machine (serve_ctx.c).
 */
#ifndef FT_SERVE_CTX_H
#define FT_SERVE_CTX_H

#include <stddef.h>

#include "serve_priv.h"

/* srv_socket_start opens s (its lo set) and starts its contexts. */
int srv_socket_start(srv_socket *s, char *err, size_t errlen);
void srv_socket_stop_listening(srv_socket *s);
/* srv_socket_quiesce stops a socket before it is closed: its listener
 * closes (no new connections) and its contexts close, so that nng reads
 * and writes no more messages on its connections.  nng 1.5's transports
 * can hang nng_close (a pipe's teardown waits forever on a receive) when
 * a connection is closed while a read of it is completing, which under
 * load (clients sending all the time) happened at every shutdown; once
 * no context receives, every connection's reads stop within a moment. */
void srv_socket_quiesce(srv_socket *s);
void srv_socket_close(srv_socket *s);

/* srv_heavy_decoder_stop stops the thread that decodes messages over
 * SRV_HEAVY_BYTES (started with the first socket), once every socket is
 * closed. */
void srv_heavy_decoder_stop(void);

#endif /* FT_SERVE_CTX_H */
