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

/* srv_count records one answered request: its status and its latency. */
void srv_count(server *srv, int status, uint64_t ns);
/* srv_hist_upper_us is the upper bound of latency bucket b, in
 * microseconds: bucket b counts the latencies below it (and at or above
 * bucket b-1's). */
static inline double srv_hist_upper_us(size_t b)
{
    return pow(2.0, (double)(b + 1) / 4.0);
}
/* srv_info writes the INFO text. */
int srv_info(server *srv, ft_buf *out);

#endif /* FT_SERVE_INFO_H */
