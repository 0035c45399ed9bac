/* serve_budget.c - the server's memory budget (serve_budget.h). */
#include "serve_budget.h"

#include <stdio.h>

#include "serve_conn.h"

int srv_budget_take(server *srv, size_t bytes, int heavy, char *why,
                    size_t whylen)
{
    uint64_t budget = srv->cfg.memory_budget_bytes;
    if (heavy == SRV_BUDGET_HEAVY_MORE) {
        /* a heavy message's results: the heavy share again, so that
         * light messages keep theirs */
        budget = budget / 8 * SRV_HEAVY_SHARE;
        heavy = 0;
    } else if (heavy) {
        unsigned max = srv->cfg.max_heavy_messages;
        unsigned h = atomic_fetch_add(&srv->budget_heavy, 1);
        if (h >= max) {
            atomic_fetch_sub(&srv->budget_heavy, 1);
            atomic_fetch_add(&srv->budget_refused, 1);
            snprintf(why, whylen, "memory: %u messages over %zu bytes "
                     "already in progress (max_heavy_messages %u); retry "
                     "later", h, SRV_HEAVY_BYTES, max);
            return FT_EBUSY;
        }
        budget = budget / 8 * SRV_HEAVY_SHARE;
    }
    /* What the connections may be reading now (each one message of up
     * to the receive limit in force, serve_conn.c) counts as held: nng
     * has it, or will, before any context of ours sees it. */
    uint64_t reserved = srv_conn_reserved(srv);
    /* (past half the budget only when so many connections are open that
     * each has the floor, SRV_RX_FLOOR: small messages keep half) */
    if (reserved > srv->cfg.memory_budget_bytes / 2)
        reserved = srv->cfg.memory_budget_bytes / 2;
    uint64_t used = atomic_fetch_add(&srv->budget_used, bytes);
    if (used + bytes + reserved > budget) {
        atomic_fetch_sub(&srv->budget_used, bytes);
        if (heavy)
            atomic_fetch_sub(&srv->budget_heavy, 1);
        atomic_fetch_add(&srv->budget_refused, 1);
        snprintf(why, whylen, "memory: %zu bytes more would exceed the "
                 "budget (%llu held and %llu reserved for messages being "
                 "read, of %llu bytes); retry later", bytes,
                 (unsigned long long)used, (unsigned long long)reserved,
                 (unsigned long long)srv->cfg.memory_budget_bytes);
        return FT_EBUSY;
    }
    /* The peak, for INFO and the tests. */
    uint64_t peak = atomic_load(&srv->budget_peak);
    while (used + bytes > peak &&
           !atomic_compare_exchange_weak(&srv->budget_peak, &peak,
                                         used + bytes))
        ;
    return FT_OK;
}

void srv_budget_give(server *srv, size_t bytes, int heavy)
{
    if (bytes)
        atomic_fetch_sub(&srv->budget_used, bytes);
    if (heavy)
        atomic_fetch_sub(&srv->budget_heavy, 1);
}
