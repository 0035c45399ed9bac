/*
 * flashtrie_client.h - the C client of the FlashTrie daemon ("flashtrie
 * serve"), in its own small library (libflashtrie_client, static and
 * shared).  It speaks the binary protocol of docs/protocol.md over nng:
 * tcp://, ipc:// and tls+tcp://.
 *
 * One ft_client is one connection handle, usable from many threads at
 * once: every call runs on its own nng REQ context, so calls never wait
 * for each other on the client side.  Calls return an ft_err code; when
 * the server answers with an ERROR frame the code is the server's and
 * errbuf holds its message ("<field>: <reason>").  FT_ETIMEDOUT when no
 * answer came within the timeout, FT_ECONN when the peer cannot be
 * reached or the connection broke.
 *
 * Lost connections: the handle follows its connection.  When it breaks
 * (the server exited, drained, was restarted), every call in flight fails
 * at once with FT_ECONN ("URL: connection lost: no answer to SEARCH"):
 * the request may or may not have run, and the client never resends one
 * (a request that had not gone out yet is sent once reconnected).  The
 * handle keeps dialing in the background (every 10 to 200 ms); a call
 * made while it is not connected waits up to reconnect_wait_ms (default
 * 1000, within its timeout) for the server to come back, then fails with
 * FT_ECONN ("URL: connection lost: SEARCH not sent (no server for N
 * ms)"); an asynchronous call does not block its caller for it: its
 * callback gets that error.  Once the server is back, calls succeed again
 * on the same handle, so a restart costs about its own downtime.  A
 * request over 64 KiB whose connection is lost gets a hint in errbuf
 * ("(the request was N bytes: a server closes the connection of a
 * message over its receive limit, ...)"): a server closes, unread, the
 * connection of a message over its receive limit, which is its
 * max_message_bytes, or less while many connections are open (the
 * server's INFO gives receive_limit_bytes); the call fails with FT_ECONN
 * like any lost connection, and so do the others in flight on it.
 *
 * TLS: tls+tcp:// verifies the server against tls_ca; without one the
 * handle is refused (FT_EINVAL) unless tls_insecure says to connect
 * without verifying.  A failed handshake (a certificate that is not
 * accepted, a peer that does not speak TLS) is FT_ECONN "URL: TLS
 * handshake with HOST:PORT failed ...", from ft_client_connect, or from a
 * call of a connect_wait handle as soon as nng reports it.
 *
 * The request and result types are those of flashtrie.h (ft_request,
 * ft_result, ft_hit); results are owned by an ft_client_results that the
 * caller frees.  A NULL handle (ft_client, ft_client_results,
 * ft_client_grid_call), url, request array, out-pointer or callback is
 * FT_EINVAL, named in errbuf where the call has one ("ping: the client is
 * NULL"); the close and free calls do nothing with NULL, and the results
 * getters give 0 or NULL.  A closed handle or freed results cannot be
 * told from live ones (do not use them: that may crash).  The client
 * library also carries four calls of flashtrie.h, so that a client
 * program needs nothing of libflashtrie: ft_strerror, ft_err_name,
 * ft_request_init and ft_request_validate.  It exports those and the
 * FT_API functions below, nothing else.
 *
 * Installed: libflashtrie_client.a and .so, this header (beside
 * flashtrie.h), flashtrie_client.pc, and the CMake targets
 * flashtrie::flashtrie_client and flashtrie::flashtrie_client_static.
 */
#ifndef FLASHTRIE_CLIENT_H
#define FLASHTRIE_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "flashtrie.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ft_client ft_client;
typedef struct ft_client_results ft_client_results;

typedef struct ft_client_opts {
    int timeout_ms;          /* per call, send to answer; 0 (or below) = 10000 */
    int connect_wait_ms;     /* 0: connect now and fail at once when the
                              * server is not there; > 0: keep dialing in
                              * the background, each call waiting up to
                              * its timeout (for scripts that wait on a
                              * starting server) */
    uint32_t deadline_ms;    /* deadline sent with SEARCH; 0 = server's */
    const char *tls_ca;      /* PEM CA to verify the server (tls+tcp://);
                              * NULL: refused, unless tls_insecure */
    const char *tls_cert;    /* PEM client certificate, with tls_key */
    const char *tls_key;
    const char *tls_server_name; /* name checked in the server's
                                  * certificate; NULL = the URL's host */
    int tls_insecure;        /* 1: tls+tcp:// without tls_ca connects and
                              * accepts any server certificate (tests,
                              * trusted networks only); 0 (default):
                              * without tls_ca ft_client_connect fails
                              * with FT_EINVAL */
    int reconnect_wait_ms;   /* how long a call made while the connection
                              * is lost waits for it to come back before
                              * failing with FT_ECONN; 0 = 1000, < 0 =
                              * fail at once */
    size_t recv_max_bytes;   /* largest reply accepted; a larger one drops
                              * the connection (its call fails with
                              * FT_ECONN).  0 = the largest reply protocol
                              * version 1 allows (1024 results of 4096
                              * hits of 64 tokens: 1 174 584 352 bytes) */
    int checksum;            /* XXH32 over each request frame (and the
                              * server's answer, which mirrors it):
                              * 0 (default) = auto: on for tcp:// and
                              * tls+tcp://, off for ipc:// and inproc://,
                              * where the bytes never leave the kernel;
                              * 1 = always; -1 = never */
    int connections;         /* connections the handle opens to the
                              * server, 1 .. FT_CLIENT_MAX_CONNECTIONS;
                              * 0 = 1.  Calls made at once from several
                              * threads go out on whichever connection is
                              * not busy writing one: nng moves one
                              * message at a time through a connection,
                              * each end's messages one after another, so
                              * one connection shared by many threads
                              * caps their rate (docs/BENCHMARKS.md,
                              * "Daemon overhead").  Losing one of them
                              * fails the calls it carried (nng sends no
                              * request twice: resends are off). */
    int coalesce;            /* FT_CLIENT_DEFAULT_COALESCE (16, what
                              * ft_client_opts_init sets): calls of
                              * ft_client_search made at once from several
                              * threads on this handle share frames once
                              * that many are in flight: at most N frames
                              * of them out, and the calls that come while
                              * all N are out wait and leave together, in
                              * order, in the next frame (up to 1024
                              * requests and a frame of
                              * FT_CLIENT_COALESCE_BYTES).  A call of over
                              * half that, which no other could join, goes
                              * alone at once and is not counted among the
                              * N.  A lone call, or one of fewer than N at
                              * once, leaves at once in a frame of its own,
                              * as with 0.  Each call gets its own results;
                              * a frame the server refuses fails every call
                              * in it (each with that error).  A call's
                              * timeout_ms counts from when it was made,
                              * its wait for a frame included (a frame has
                              * its oldest call's time).  Fewer, larger
                              * messages: many threads on one connection
                              * come nearer the server's batching rate
                              * (docs/BENCHMARKS.md).  0: off, each call
                              * its own frame whatever is in flight.  Up
                              * to FT_CLIENT_MAX_COALESCE. */
} ft_client_opts;

/* FT_CLIENT_MAX_COALESCE bounds ft_client_opts.coalesce and
 * FT_CLIENT_DEFAULT_COALESCE is its default (64 threads on one handle at
 * T = 8, K = 100: 3.5 calls a frame, 80-89% of the engine's batch-32
 * rate against one replica, 93-103% against two; 8 or 32 carried less:
 * docs/BENCHMARKS.md, "Coalesced calls" and the sections after it);
 * FT_CLIENT_COALESCE_BYTES is the largest frame that calls share: the
 * receive limit a server keeps for every connection however many are
 * open (it lowers the limit toward this floor, never below, as
 * connections come: a larger frame could be closed unread).  At T = 8
 * and K = 100 (6.4 KB a request) about ten requests; at K = 1000 (64
 * KB) each goes alone. */
#define FT_CLIENT_MAX_COALESCE 64
#define FT_CLIENT_DEFAULT_COALESCE 16
#define FT_CLIENT_COALESCE_BYTES (64u << 10)

/* FT_CLIENT_MAX_CONNECTIONS is the largest ft_client_opts.connections. */
#define FT_CLIENT_MAX_CONNECTIONS 64

/* ft_client_opts_init fills opts with the defaults. */
FT_API void ft_client_opts_init(ft_client_opts *opts);

/* ft_client_connect opens a handle to the server at url.  opts may be
 * NULL (defaults).  A url nng cannot dial (an unsupported scheme, a
 * malformed address) is FT_EINVAL ("URL: unsupported URL scheme
 * (expected tcp://, tls+tcp:// or ipc://)"). */
FT_API int ft_client_connect(ft_client **out, const char *url,
                             const ft_client_opts *opts, char *errbuf,
                             size_t errlen);
/* ft_client_close closes the handle: calls still waiting fail with
 * FT_ECONN (their callbacks run), so close only after the last of them.
 * It returns once nng has closed the handle's socket, or after 1 s if nng
 * has not (nng 1.5.2 can stall every close of a process for good: the
 * handle is then freed in the background if nng ever finishes;
 * docs/daemon.md, "Closing a handle"). */
FT_API void ft_client_close(ft_client *c);

/* ft_client_search sends n >= 1 requests in one SEARCH frame and waits
 * for the answer: *out holds one ft_result per request, in order, each
 * with its own status (a request the server rejected has status
 * FT_EREQUEST and its message in error; FT_EDEADLINE when its deadline
 * passed before it ran).  The call itself fails only when the whole
 * message was refused (FT_EBUSY: the server's queue is full; FT_EPROTO;
 * FT_ESHUTDOWN: the server is draining) or never answered. */
FT_API int ft_client_search(ft_client *c, const ft_request *reqs, size_t n,
                            ft_client_results **out, char *errbuf,
                            size_t errlen);

/* ft_client_cb receives the outcome of an asynchronous search: status as
 * ft_client_search would return it, the results on FT_OK (the callback
 * owns them: ft_client_results_free), error the message otherwise.  It
 * runs on one of nng's threads; it must not block for long. */
typedef void (*ft_client_cb)(int status, ft_client_results *res,
                             const char *error, void *arg);

/* ft_client_search_async encodes the requests at once (the caller may
 * reuse them when it returns) and calls cb exactly once, unless it fails
 * itself (then cb is not called).  cb must not be NULL (FT_EINVAL). */
FT_API int ft_client_search_async(ft_client *c, const ft_request *reqs,
                                  size_t n, ft_client_cb cb, void *arg,
                                  char *errbuf, size_t errlen);

/* ft_client_results_count is the number of results (0 for a NULL r). */
FT_API size_t ft_client_results_count(const ft_client_results *r);
/* ft_client_results_get returns result i (valid until the results are
 * freed): its hits, tokens, status and error; NULL past the end or for a
 * NULL r. */
FT_API const ft_result *ft_client_results_get(const ft_client_results *r,
                                              size_t i);
FT_API void ft_client_results_free(ft_client_results *r);

/* ---- The array form: one grid block in, columns out -------------------
 *
 * For callers that hold their grids as one (n, T, K) array and want their
 * answers as arrays (the Python client: one call across the FFI where
 * ft_request structs and per-hit reads would take many). */

/* ft_client_search_grids sends n >= 1 requests of one shape and one set of
 * parameters in one SEARCH frame, as ft_client_search would send n copies
 * of *grids with request i's grid at grids->tokens + i*T*K and
 * grids->logp + i*T*K: the n grids back to back, a C-contiguous (n, T, K)
 * array.  T above FT_MAX_T or K above FT_MAX_K is FT_ELIMIT (naming it);
 * the rest of the request is the server's to check, as for
 * ft_client_search. */
FT_API int ft_client_search_grids(ft_client *c, const ft_request *grids,
                                  size_t n, ft_client_results **out,
                                  char *errbuf, size_t errlen);

/* ft_client_results_shape measures results first .. first+count-1 (those
 * of them that exist): *max_hits gets the most hits of any of them and
 * *max_len the most tokens of any of their hits, the rows and width that
 * ft_client_results_columns needs (0 and 0 when they hold no hit; a
 * result whose status is not FT_OK counts no hit).  Either pointer may be
 * NULL.  Returns how many results it measured: count, less where the
 * range passes the last result (0, with 0 and 0, for a NULL r). */
FT_API size_t ft_client_results_shape(const ft_client_results *r,
                                      size_t first, size_t count,
                                      uint32_t *max_hits, uint32_t *max_len);

/* ft_client_columns says where ft_client_results_columns writes: rows hit
 * slots per result and width token slots per hit.  Slot j of the k-th
 * result written (result first + k) is at  base + (k*rows + j) * stride
 * in each column, where stride is that column's *_stride in bytes (0: the
 * packed size, 4*width for tokens and the element's size for the others),
 * so the columns can be separate C-contiguous (count, rows[, width])
 * arrays or the fields of one array of structs; a NULL column is not
 * written.  Elements need no alignment (they are copied bytewise). */
typedef struct ft_client_columns {
    uint32_t rows;         /* hit slots per result: >= its hits */
    uint32_t width;        /* token slots per hit: >= its key's length */
    uint32_t *n;           /* [count]: hits of each result, 0 for a result
                            * whose status is not FT_OK */
    int32_t *status;       /* [count]: each result's status */
    void *tokens;          /* uint32 [width] per slot, zero past the key */
    void *len;             /* uint32: the key's length */
    void *value;           /* uint64 */
    void *score;           /* double */
    void *sigma;           /* float */
    size_t tokens_stride;
    size_t len_stride;
    size_t value_stride;
    size_t score_stride;
    size_t sigma_stride;
} ft_client_columns;

/* ft_client_results_columns copies results first .. first+count-1 into
 * the columns of cols: each result's hits, best first, in its first slots,
 * and zeros in every slot past them (a failed result's slots are all
 * zero; its message stays in ft_client_results_get's error).  Nothing is
 * written and FT_EINVAL names the fault when the range passes the results,
 * a given column's stride is below its element's size (4*width for
 * tokens), a result has more hits than rows, or (tokens given) a key is
 * longer than width. */
FT_API int ft_client_results_columns(const ft_client_results *r,
                                     size_t first, size_t count,
                                     const ft_client_columns *cols,
                                     char *errbuf, size_t errlen);

/* ---- The array form in two calls of one argument each -----------------
 *
 * For callers through an FFI, where every call and every argument crossing
 * it costs (ctypes: about 0.1 us a call and as much again an argument):
 * ft_client_search_grids, _results_shape, _results_columns and
 * _results_free in two calls, each taking one struct that the caller
 * keeps and reuses between calls. */

typedef struct ft_client_grid_call {
    /* in */
    ft_client *client;
    ft_request grids;            /* as ft_client_search_grids's *grids */
    size_t n;                    /* requests, 1 .. FT_FRAME_MAX_BATCH */
    char *errbuf;                /* may be NULL */
    size_t errlen;
    ft_client_columns cols;      /* for ft_client_grid_columns */
    /* out, from ft_client_grid_search */
    ft_client_results *results;  /* the n results; NULL when the search
                                  * failed or once freed */
    uint32_t max_hits;           /* ft_client_results_shape of all n */
    uint32_t max_len;
    uint32_t failed;             /* results whose status is not FT_OK */
    uint32_t first_status;       /* results[0]'s status (as uint32) */
} ft_client_grid_call;

/* ft_client_grid_search is ft_client_search_grids(call->client,
 * &call->grids, call->n, &call->results, call->errbuf, call->errlen)
 * followed, on FT_OK, by ft_client_results_shape of all n results into
 * max_hits and max_len, and the count of failed results.  On an error
 * results is NULL and max_hits, max_len, failed and first_status are 0.
 * The caller frees the results (ft_client_results_free, or
 * ft_client_grid_columns). */
FT_API int ft_client_grid_search(ft_client_grid_call *call);

/* ft_client_grid_columns is ft_client_results_columns(call->results, 0,
 * call->n, &call->cols, call->errbuf, call->errlen) followed by
 * ft_client_results_free(call->results) whatever it returned; results is
 * then NULL.  With results NULL it is FT_EINVAL and writes nothing. */
FT_API int ft_client_grid_columns(ft_client_grid_call *call);

/* ft_client_ping succeeds when the server answers a PING. */
FT_API int ft_client_ping(ft_client *c, char *errbuf, size_t errlen);

/* ft_client_info fetches the server's INFO text: sectioned "key: value"
 * lines, NUL-terminated, in *text (free() it). */
FT_API int ft_client_info(ft_client *c, char **text, char *errbuf,
                          size_t errlen);
/* ft_client_text_free frees a text the library returned (INFO's), for
 * callers that cannot reach this library's free() (bindings through an
 * FFI).  NULL is ignored. */
FT_API void ft_client_text_free(char *text);

/* ft_client_reload asks the server to reload its index (path NULL or "":
 * the configured one).  Allowed only on a listener marked admin of a
 * server with admin_reload on (else FT_EPERM); errbuf gets the server's
 * message either way. */
FT_API int ft_client_reload(ft_client *c, const char *path, char *errbuf,
                            size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* FLASHTRIE_CLIENT_H */
