/*
 * serve_budget.h - the server's memory budget (serve_budget.c): the bytes
 * every received message holds from its receipt until its reply is sent
 * (the message, its requests' result buffers, the reply), summed over the
 * whole server and bounded by memory_budget_bytes; and the heavy messages
 * (over SRV_HEAVY_BYTES) held at once, bounded by max_heavy_messages.  A
 * message over either is answered BUSY before it is decoded, and freed.
 */
#ifndef FT_SERVE_BUDGET_H
#define FT_SERVE_BUDGET_H

#include <stddef.h>

#include "serve_priv.h"

enum { SRV_BUDGET_LIGHT = 0, SRV_BUDGET_HEAVY = 1, SRV_BUDGET_HEAVY_MORE = 2 };

/* A message larger than this is heavy. */
#define SRV_HEAVY_BYTES ((size_t)1 << 20)
/* Heavy messages may fill the budget up to this share (in eighths): the
 * rest stays for small ones, so heavy frames cannot starve them. */
#define SRV_HEAVY_SHARE 7
/* The receive limit never goes below this (or max_message_bytes when
 * smaller), however many connections are open (serve_conn.c). */
#define SRV_RX_FLOOR ((size_t)64 << 10)
/* What a context keeps of its buffers between messages (per buffer). */
#define SRV_KEEP_BYTES ((size_t)1 << 20)

/* srv_budget_take charges bytes for a message of the given kind
 * (SRV_BUDGET_HEAVY: a received message over SRV_HEAVY_BYTES, which also
 * takes a heavy slot; SRV_BUDGET_HEAVY_MORE: more bytes for such a
 * message, its results, within the heavy share again; 0: anything else,
 * or more bytes for a light message already admitted).
 * FT_OK, or FT_EBUSY with the reason in why (nothing charged). */
int srv_budget_take(server *srv, size_t bytes, int heavy, char *why,
                    size_t whylen);
/* srv_budget_give gives back what srv_budget_take charged. */
void srv_budget_give(server *srv, size_t bytes, int heavy);

#endif /* FT_SERVE_BUDGET_H */
