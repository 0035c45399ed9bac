/*
 * serve_conn.h - the connections of "flashtrie serve" (serve_conn.c):
 * how many each listener holds (max_connections, refused at
 * NNG_PIPE_EV_ADD_PRE), when one has been idle too long (idle_timeout_ms),
 * and whether each listener still answers (the internal probe, every
 * probe_interval_ms).
 *
 * nng 1.5.2 has no receive timeout per connection (NNG_OPT_RECVTIMEO is
 * the socket's, for nng_recv) and says nothing of a message begun and not
 * finished, so "idle" is measured from the last message a connection
 * completed, or the last reply it was sent, or its handshake: a
 * connection that sent half a frame and stopped is closed like one that
 * sent nothing.  Connections that never finish nng's 8-byte handshake are
 * no pipes yet; nng's transports close them after 10 s themselves.
 */
#ifndef FT_SERVE_CONN_H
#define FT_SERVE_CONN_H

#include <stddef.h>

#include "serve_priv.h"

/* srv_conn_pipe_cb is the socket's pipe notification (nng_pipe_notify,
 * arg: the srv_socket) for ADD_PRE, ADD_POST and REM_POST. */
void srv_conn_pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg);

/* srv_conn_received notes that a message arrived on p (a reply is now
 * owed to it); srv_conn_replied that its reply was sent or dropped. */
void srv_conn_received(server *srv, nng_pipe p);
void srv_conn_replied(server *srv, nng_pipe p);

/* srv_conn_start starts the thread that closes idle connections, logs the
 * end of a burst of refusals and probes the listeners; srv_conn_stop
 * stops it (before the sockets close). */
int srv_conn_start(server *srv, char *err, size_t errlen);
void srv_conn_stop(server *srv);
/* srv_conn_free frees the table, once the sockets are closed. */
void srv_conn_free(server *srv);

/* srv_listeners_ok is 1 while every listener answered its last probe;
 * else 0, with "listener URL does not answer: WHY" in why (may be NULL).
 * The health endpoints call it. */
int srv_listeners_ok(server *srv, char *why, size_t whylen);

/* The receive limit (serve_conn.c, issue 39): what every listener lets
 * nng read of one message now (NNG_OPT_RECVMAXSZ), lowered while the
 * connections could read more than half the memory budget between them.
 * srv_conn_reserved is what the connections may be reading now (the sum
 * of their potentials), which the budget counts as held;
 * srv_conn_listener_started gives a listener just created the limit in
 * force; srv_conn_rx_stats reads the limit, the reserve and how often the
 * limit came down and went back up. */
uint64_t srv_conn_reserved(server *srv);
void srv_conn_listener_started(srv_socket *s);
void srv_conn_rx_stats(server *srv, uint64_t *lim, uint64_t *reserved,
                       uint64_t *lowered, uint64_t *raised);

/* srv_conn_probe_url writes the URL the probe dials for a listener's:
 * wildcard hosts (0.0.0.0, *, [::], empty) become loopback. */
void srv_conn_probe_url(const char *url, char *out, size_t outlen);

/* srv_listener_open creates, sets up (receive maximum, ipc_mode, TLS) and
 * starts s's listener on s->lo.url; s->tls, once made, is reused. */
int srv_listener_open(srv_socket *s, char *err, size_t errlen);
/* srv_socket_relisten closes s's listener and opens it again on the same
 * address (the probe's remedy: probe_restart_after); the connections it
 * had accepted are closed.  Not while the socket quiesces. */
int srv_socket_relisten(srv_socket *s, char *err, size_t errlen);

#endif /* FT_SERVE_CONN_H */
