/*
 * serve_info.h - request statistics and the INFO text of "flashtrie
 * serve" (serve_info.c).
 */
#ifndef FT_SERVE_INFO_H
#define FT_SERVE_INFO_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "flashtrie/internal/buf.h"
#include "serve_priv.h"

/* srv_count records one request that was queued for an engine and
 * answered: its status and its latency (the histogram /metrics and INFO's
 * percentiles read).  srv_count_refused records one refused before it
 * was queued (malformed, over a cap, BUSY, draining, denied): its status
 * only, so that instant refusals do not pull the latency percentiles
 * down. */
void srv_count(server *srv, int status, uint64_t ns);
void srv_count_refused(server *srv, int status);
/* srv_hist_upper_us is the upper bound of latency bucket b, in
 * microseconds: bucket b counts the latencies below it (and at or above
 * bucket b-1's). */
static inline double srv_hist_upper_us(size_t b)
{
    return pow(2.0, (double)(b + 1) / 4.0);
}
/* srv_hist_bucket maps a latency to its bucket: bucket b holds latencies
 * below 2^((b+1)/4) microseconds, so p50/p99 are read to within 19%, from
 * a fixed table that never allocates; the last one holds the rest. */
static inline size_t srv_hist_bucket(uint64_t ns)
{
    double us = (double)ns / 1000.0;
    if (us < 1.0)
        return 0;
    size_t b = (size_t)(log2(us) * 4.0);
    return b < SRV_HIST_BUCKETS ? b : SRV_HIST_BUCKETS - 1;
}
/* srv_info writes the INFO text: the operational sections and the
 * limits a client keeps to on every listener; the pid, the paths (index,
 * listeners) and the config section only when admin (an admin listener
 * asks). */
int srv_info(server *srv, ft_buf *out, int admin);

#endif /* FT_SERVE_INFO_H */
