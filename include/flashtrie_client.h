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
 * The request and result types are those of flashtrie.h (ft_request,
 * ft_result, ft_hit); results are owned by an ft_client_results that the
 * caller frees.  The client library also carries four calls of
 * flashtrie.h, so that a client program needs nothing of libflashtrie:
 * ft_strerror, ft_err_name, ft_request_init and ft_request_validate.  It
 * exports those and the FT_API functions below, nothing else.
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
    int timeout_ms;          /* per call, send to answer; 0 = 10000 */
    int connect_wait_ms;     /* 0: connect now and fail at once when the
                              * server is not there; > 0: keep dialing in
                              * the background, each call waiting up to
                              * its timeout (for scripts that wait on a
                              * starting server) */
    uint32_t deadline_ms;    /* deadline sent with SEARCH; 0 = server's */
    const char *tls_ca;      /* PEM CA to verify the server (tls+tcp://);
                              * NULL = do not verify */
    const char *tls_cert;    /* PEM client certificate, with tls_key */
    const char *tls_key;
    const char *tls_server_name; /* name checked in the server's
                                  * certificate; NULL = the URL's host */
} ft_client_opts;

/* ft_client_opts_init fills opts with the defaults. */
FT_API void ft_client_opts_init(ft_client_opts *opts);

/* ft_client_connect opens a handle to the server at url.  opts may be
 * NULL (defaults). */
FT_API int ft_client_connect(ft_client **out, const char *url,
                             const ft_client_opts *opts, char *errbuf,
                             size_t errlen);
/* ft_client_close closes the handle: calls still waiting fail with
 * FT_ECONN (their callbacks run), so close only after the last of them. */
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
 * itself (then cb is not called). */
FT_API int ft_client_search_async(ft_client *c, const ft_request *reqs,
                                  size_t n, ft_client_cb cb, void *arg,
                                  char *errbuf, size_t errlen);

FT_API size_t ft_client_results_count(const ft_client_results *r);
/* ft_client_results_get returns result i (valid until the results are
 * freed): its hits, tokens, status and error. */
FT_API const ft_result *ft_client_results_get(const ft_client_results *r,
                                              size_t i);
FT_API void ft_client_results_free(ft_client_results *r);

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
