/* serve_stages.c - the time of SEARCH messages by stage (serve_stages.h). */
#include "serve_stages.h"

#include <stdio.h>

#include "serve_info.h"

#define ADD(field, v) atomic_fetch_add_explicit(&(field), (v), memory_order_relaxed)
#define GET(field) atomic_load_explicit(&(field), memory_order_relaxed)

void srv_stages_job(server *srv, uint64_t ready_ns, uint64_t answered_ns,
                    const ft_job *j)
{
    srv_stages *st = &srv->stages;
    if (j->run_ns == 0 || j->ran_ns < j->run_ns)
        return; /* not run (deadline) */
    uint64_t q = j->run_ns > ready_ns ? j->run_ns - ready_ns : 0;
    ADD(st->requests, 1);
    ADD(st->queue_ns, q);
    ADD(st->engine_ns, j->ran_ns - j->run_ns);
    ADD(st->answer_ns, answered_ns > j->ran_ns ? answered_ns - j->ran_ns : 0);
    ADD(st->queue_hist[srv_hist_bucket(q)], 1);
}

void srv_stages_message(server *srv, uint64_t decode_ns, uint64_t encode_ns)
{
    srv_stages *st = &srv->stages;
    ADD(st->messages, 1);
    ADD(st->decode_ns, decode_ns);
    ADD(st->encode_ns, encode_ns);
}

void srv_stages_send_call(server *srv, uint64_t ns)
{
    ADD(srv->stages.send_call_ns, ns);
}

void srv_stages_send(server *srv, uint64_t send_ns)
{
    ADD(srv->stages.sends, 1);
    ADD(srv->stages.send_ns, send_ns);
}

static double mean_us(uint64_t ns, uint64_t n)
{
    return n ? (double)ns / (double)n / 1e3 : 0.0;
}

void srv_stages_info(server *srv, ft_buf *o)
{
    srv_stages *st = &srv->stages;
    uint64_t m = GET(st->messages), r = GET(st->requests), s = GET(st->sends);
    ft_buf_printf(o, "\n# stages\n");
    ft_buf_printf(o, "messages: %llu\n", (unsigned long long)m);
    ft_buf_printf(o, "requests: %llu\n", (unsigned long long)r);
    ft_buf_printf(o, "sends: %llu\n", (unsigned long long)s);
    ft_buf_printf(o, "decode_us: %.2f\n", mean_us(GET(st->decode_ns), m));
    ft_buf_printf(o, "queue_us: %.2f\n", mean_us(GET(st->queue_ns), r));
    ft_buf_printf(o, "engine_us: %.2f\n", mean_us(GET(st->engine_ns), r));
    ft_buf_printf(o, "answer_us: %.2f\n", mean_us(GET(st->answer_ns), r));
    ft_buf_printf(o, "encode_us: %.2f\n", mean_us(GET(st->encode_ns), m));
    ft_buf_printf(o, "send_us: %.2f\n", mean_us(GET(st->send_ns), s));
    ft_buf_printf(o, "send_call_us: %.2f\n",
                  mean_us(GET(st->send_call_ns), s));
}

/* The le bounds of flashtrie_request_duration_seconds (serve_metrics.c):
 * every other bucket edge from 2^(23/4) us (~54 us... 5.3 ms) on. */
#define FIRST_BOUND 23
#define LAST_BOUND 93
#define STEP 2

static void histogram(ft_buf *o, const char *name, const char *help,
                      const atomic_uint_fast64_t *hist, uint64_t sum_ns)
{
    ft_buf_printf(o, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    size_t next = 0;
    for (size_t k = FIRST_BOUND; k <= LAST_BOUND; k += STEP) {
        for (; next < k; next++)
            cum += hist ? GET(hist[next]) : 0;
        ft_buf_printf(o, "%s_bucket{le=\"%.6g\"} %llu\n", name,
                      srv_hist_upper_us(k - 1) / 1e6, (unsigned long long)cum);
    }
    for (; next < SRV_HIST_BUCKETS; next++)
        cum += hist ? GET(hist[next]) : 0;
    ft_buf_printf(o, "%s_bucket{le=\"+Inf\"} %llu\n", name,
                  (unsigned long long)cum);
    ft_buf_printf(o, "%s_sum %.9f\n", name, (double)sum_ns / 1e9);
    ft_buf_printf(o, "%s_count %llu\n", name, (unsigned long long)cum);
}

int srv_stages_render(server *srv, ft_buf *o)
{
    srv_stages *st = &srv->stages;
    histogram(o, "flashtrie_request_queue_seconds",
              "Time a request waited from its decoding to its batch's "
              "engine call (batching window, wait for a replica), per "
              "request run.", st->queue_hist, GET(st->queue_ns));
    ft_buf_printf(o, "# HELP flashtrie_request_stage_seconds_total Time spent "
                  "in each stage of SEARCH messages (decode, queue, engine, "
                  "answer, encode, send), by the daemon's clock.\n"
                  "# TYPE flashtrie_request_stage_seconds_total counter\n");
    static const char *const names[] = {"decode", "queue", "engine", "answer",
                                        "encode", "send"};
    const uint64_t sums[] = {GET(st->decode_ns), GET(st->queue_ns),
                             GET(st->engine_ns), GET(st->answer_ns),
                             GET(st->encode_ns), GET(st->send_ns)};
    for (size_t i = 0; i < 6; i++)
        ft_buf_printf(o, "flashtrie_request_stage_seconds_total{stage=\"%s\"} "
                      "%.9f\n", names[i], (double)sums[i] / 1e9);
    ft_buf_printf(o, "# HELP flashtrie_request_stage_events_total What each "
                  "stage sum counts: messages (decode, encode), requests "
                  "run (queue, engine, answer), replies sent (send).\n"
                  "# TYPE flashtrie_request_stage_events_total counter\n");
    const uint64_t counts[] = {GET(st->messages), GET(st->requests),
                               GET(st->requests), GET(st->requests),
                               GET(st->messages), GET(st->sends)};
    for (size_t i = 0; i < 6; i++)
        ft_buf_printf(o, "flashtrie_request_stage_events_total{stage=\"%s\"} "
                      "%llu\n", names[i], (unsigned long long)counts[i]);
    return o->data ? FT_OK : FT_ENOMEM;
}
