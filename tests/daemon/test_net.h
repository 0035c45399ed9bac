/*
 * test_net.h - what the daemon tests share to talk to a running "flashtrie
 * serve": free loopback ports, HTTP GETs of /metrics and the probes,
 * client connections and INFO with its fields, raw nng REQ sockets, and
 * hand-made ipc connections that speak the SP protocol byte by byte (to
 * send what no nng client would).  Running the server is serve_harness.h's.
 */
#ifndef FT_TEST_NET_H
#define FT_TEST_NET_H

#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

#include "flashtrie_client.h"

/* ---- ports and HTTP ---- */

/* tn_free_port asks the kernel for a free 127.0.0.1 TCP port (bound and
 * let go: another process could take it in between, which this box's
 * tests do not do). */
int tn_free_port(void);

/* tn_http_try GETs base+path (base "http://127.0.0.1:PORT") with nng's
 * HTTP client, waiting at most 5 s, and returns the HTTP status; the nng
 * error, negated (< 0), when nothing answered (yet).  *body gets the body,
 * NUL-terminated (free it; NULL when nothing answered); len (may be NULL)
 * its length; ctype (ctlen bytes, may be NULL) the Content-Type header,
 * "" when there is none. */
int tn_http_try(const char *base, const char *path, char **body,
                size_t *len, char *ctype, size_t ctlen);

/* tn_http_get is tn_http_try for a server that must answer: a GET that
 * gets no answer ends the test ("GET URL: the nng error", exit 1). */
int tn_http_get(const char *base, const char *path, char **body,
                size_t *len, char *ctype, size_t ctlen);

/* tn_http_text is tn_http_try into the caller's buffer: body (len bytes)
 * gets the body NUL-terminated, cut to len - 1 bytes ("" when nothing
 * answered); returns the status, or -1 when nothing answered (yet). */
int tn_http_text(const char *base, const char *path, char *body, size_t len);

/* tn_metric scrapes base's /metrics (which must answer 200) and returns
 * the value of the sample line "SAMPLE VALUE", sample written as the
 * exposition writes it, labels included ("name{result=\"ok\"}"); -1 when
 * there is no such line.  No check of the format: metrics_test's own
 * parser does that. */
double tn_metric(const char *base, const char *sample);

/* ---- clients and INFO ---- */

/* tn_connect_opts connects a client to url with o; a failure is shown
 * ("connect URL: why") and ends the test (exit 1). */
ft_client *tn_connect_opts(const char *url, const ft_client_opts *o);

/* tn_connect is tn_connect_opts with the default options but timeout_ms
 * (each call's limit) and connect_wait_ms (0: connect now; else how long
 * the first call waits for a server to come). */
ft_client *tn_connect(const char *url, int timeout_ms, int connect_wait_ms);

/* tn_info fetches INFO's text over a connection of its own (timeout_ms a
 * call) and returns it (free it).  A connection the server refuses
 * (FT_ECONN: a listener at its max_connections that has not yet seen an
 * earlier one close) is tried again, up to tries times in all, 50 ms
 * apart, as a client of such a server would; any other failure, or the
 * last refusal, fails the test. */
char *tn_info(const char *url, int timeout_ms, int tries);

/* tn_info_value returns the number that follows the first occurrence of
 * pat in INFO's text (pat "\nkey: " for a top-level key; a field of a
 * section is found by passing the section's text); text without pat is
 * shown ("INFO has no 'PAT'") and ends the test (exit 1). */
long long tn_info_value(const char *text, const char *pat);

/* tn_info_num fetches INFO (tn_info: timeout_ms, tries) and returns its
 * top-level field key (the line "key: N"). */
long long tn_info_num(const char *url, const char *key, int timeout_ms,
                      int tries);

/* ---- raw sockets ---- */

/* tn_req_dial opens a raw nng REQ socket dialed to url: sends and receives
 * wait at most timeout_ms, a request is never sent again (no resend
 * timer), and with unlimited set nng's receive limit is off
 * (NNG_OPT_RECVMAXSZ 0, for replies of many MiB).  Close it with
 * nng_close. */
nng_socket tn_req_dial(const char *url, int timeout_ms, int unlimited);

/* tn_ipc_connect connects to the ipc socket at path (a file path, no
 * "ipc://") and does the SP handshake of a REQ v0 peer by hand, checking
 * that the server is REP v0; returns the descriptor, so that the bytes
 * after the handshake can be anything (half a message, nothing, requests
 * never read back).  Close it with close. */
int tn_ipc_connect(const char *path);

/* tn_ipc_req writes the start of one REQ message at the ipc transport: the
 * 9-byte header (type 1, a 64-bit big-endian length), the 32-bit request
 * id nng's REQ puts before the body (high bit set), and body_len bytes of
 * the body; the header's length counts all_len body bytes, so that
 * body_len < all_len leaves the message half sent.  0 when everything was
 * written, -1 when a write failed or timed out. */
int tn_ipc_req(int fd, uint32_t rid, const void *body, size_t body_len,
               size_t all_len);

/* tn_set_timeouts gives fd's reads and writes a limit of ms (SO_RCVTIMEO
 * and SO_SNDTIMEO). */
void tn_set_timeouts(int fd, int ms);

/* tn_closed_within says whether the server closes fd within ms: one read
 * (limit ms) gives 0, or an error other than a timeout; a read that gets
 * bytes says no (up to 64 of them are read and thrown away).  *at (may be
 * NULL) gets when the read returned, in ft_test_now() seconds. */
int tn_closed_within(int fd, int ms, double *at);

#endif /* FT_TEST_NET_H */
