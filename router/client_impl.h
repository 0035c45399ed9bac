/*
 * client_impl.h - the two halves of ft_client_search around nng's round
 * trip, apart, so that ft_daemon_bench can time the client's own work on
 * a request and its answer (docs/BENCHMARKS.md, "Daemon overhead").
 */
#ifndef FT_CLIENT_IMPL_H
#define FT_CLIENT_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

#include "flashtrie_client.h"

/* fti_client_search_encode writes the SEARCH frame of n requests (id, the
 * handle's deadline) straight into a new nng message of its exact size:
 * what ft_client_search sends.  On failure *out is NULL and errbuf says
 * why, as ft_client_search does. */
int fti_client_search_encode(const ft_client *c, uint64_t id,
                             const ft_request *reqs, size_t n, nng_msg **out,
                             char *errbuf, size_t errlen);

/* fti_client_search_decode decodes the answer to that SEARCH (len bytes
 * at body, not kept) into results for n requests: what ft_client_search
 * returns, the server's ERROR as its code and message. */
int fti_client_search_decode(const void *body, size_t len, uint64_t id,
                             size_t n, ft_client_results **out, char *errbuf,
                             size_t errlen);

/* fti_client_frame_flags is the flags word of the handle's SEARCH frames
 * (FT_FRAME_F_CHECKSUM or 0, from ft_client_opts.checksum and the URL):
 * the server's answer carries the same. */
uint32_t fti_client_frame_flags(const ft_client *c);

#endif /* FT_CLIENT_IMPL_H */
