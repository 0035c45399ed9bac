/* serve_budget.c - the server's memory budget (serve_budget.h). */
#include "serve_budget.h"

#include <stdio.h>

int srv_budget_take(server *srv, size_t bytes, int heavy, char *why,
                    size_t whylen)
{
    uint64_t budget = srv->cfg.memory_budget_bytes;
    if (heavy) {
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
    uint64_t used = atomic_fetch_add(&srv->budget_used, bytes);
    if (used + bytes > budget) {
        atomic_fetch_sub(&srv->budget_used, bytes);
        if (heavy)
            atomic_fetch_sub(&srv->budget_heavy, 1);
        atomic_fetch_add(&srv->budget_refused, 1);
        snprintf(why, whylen, "memory: %zu bytes more would exceed the "
                 "budget (%llu of %llu bytes held); retry later", bytes,
                 (unsigned long long)used,
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
