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
void srv_socket_close(srv_socket *s);

#endif /* FT_SERVE_CTX_H */
