/* serve_info.c - request statistics and the INFO text. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "serve.h"
#include "serve_conn.h"
#include "serve_info.h"
#include "serve_priv.h"
#include "serve_stages.h"

void srv_count(server *srv, int status, uint64_t ns)
{
    size_t s = status >= 0 && status < SRV_ERR_COUNT ? (size_t)status
                                                     : FT_EINTERNAL;
    atomic_fetch_add(&srv->status[s], 1);
    atomic_fetch_add(&srv->hist[srv_hist_bucket(ns)], 1);
    atomic_fetch_add(&srv->latency_ns_sum, ns);
}

void srv_count_refused(server *srv, int status)
{
    size_t s = status >= 0 && status < SRV_ERR_COUNT ? (size_t)status
                                                     : FT_EINTERNAL;
    atomic_fetch_add(&srv->status[s], 1);
}

static double percentile(const uint64_t *h, uint64_t total, double q)
{
    if (total == 0)
        return 0;
    uint64_t want = (uint64_t)ceil(q * (double)total), seen = 0;
    for (size_t b = 0; b < SRV_HIST_BUCKETS; b++) {
        seen += h[b];
        if (seen >= want)
            return srv_hist_upper_us(b);
    }
    return srv_hist_upper_us(SRV_HIST_BUCKETS - 1);
}

static const char *status_key(int s)
{
    switch (s) {
    case FT_OK: return "ok";
    case FT_EREQUEST: return "rejected";
    case FT_EBUSY: return "busy";
    case FT_EDEADLINE: return "deadline";
    case FT_EPROTO: return "protocol";
    case FT_ESHUTDOWN: return "shutdown";
    case FT_EPERM: return "denied";
    default: return NULL;
    }
}

/* info_limits writes the limits a client must keep to (every listener
 * shows them; the rest of the settings only admin listeners). */
static void info_limits(server *srv, ft_buf *o)
{
    const ft_config *c = &srv->cfg;
    ft_buf_printf(o, "\n# limits\n");
    ft_buf_printf(o, "max_message_bytes: %llu\n",
                  (unsigned long long)c->max_message_bytes);
    ft_buf_printf(o, "caps.max_beam: %u\n", FT_CONFIG_LIVE(c, max_beam));
    ft_buf_printf(o, "caps.max_k: %u\n", FT_CONFIG_LIVE(c, max_k));
    ft_buf_printf(o, "caps.max_t: %u\n", FT_CONFIG_LIVE(c, max_t));
    ft_buf_printf(o, "caps.max_results: %u\n", FT_CONFIG_LIVE(c, max_results));
    ft_buf_printf(o, "max_connections: %u\n",
                  FT_CONFIG_LIVE(c, max_connections));
    ft_buf_printf(o, "idle_timeout_ms: %u\n",
                  FT_CONFIG_LIVE(c, idle_timeout_ms));
}

int srv_info(server *srv, ft_buf *o, int admin)
{
    uint64_t now = fti_now_ns();
    ft_buf_printf(o, "# server\n");
    ft_buf_printf(o, "version: %s\n", FT_VERSION_STRING);
    /* The pid, the paths and the addresses are for admin listeners: a
     * stranger on a plain one learns nothing of the host from INFO. */
    if (admin)
        ft_buf_printf(o, "pid: %ld\n", (long)getpid());
    ft_buf_printf(o, "uptime_s: %.3f\n", (double)(now - srv->start_ns) / 1e9);
    ft_buf_printf(o, "listeners: %zu\n", srv->n_socks);
    for (size_t i = 0; admin && i < srv->n_socks; i++)
        ft_buf_printf(o, "listener.%zu: %s%s\n", i, srv->socks[i].lo.url,
                      srv->socks[i].lo.admin ? " admin" : "");
    ft_buf_printf(o, "draining: %d\n", atomic_load(&srv->draining));
    ft_buf_printf(o, "connections_opened: %llu\n",
                  (unsigned long long)atomic_load(&srv->pipes_added));
    ft_buf_printf(o, "connections_closed: %llu\n",
                  (unsigned long long)atomic_load(&srv->pipes_removed));
    ft_buf_printf(o, "connections_refused: %llu\n",
                  (unsigned long long)atomic_load(&srv->conn_refused));
    ft_buf_printf(o, "connections_idle_closed: %llu\n",
                  (unsigned long long)atomic_load(&srv->conn_idle_closed));

    ft_gen *g = ft_batcher_current(srv->batcher);
    ft_buf_printf(o, "\n# index\n");
    if (admin)
        ft_buf_printf(o, "path: %s\n", g->path);
    ft_buf_printf(o, "generation: %llu\n", (unsigned long long)g->id);
    ft_buf_printf(o, "shards: %zu\n", g->shards);
    ft_buf_printf(o, "keys: %llu\n", (unsigned long long)g->info.keys);
    ft_buf_printf(o, "nodes: %llu\n", (unsigned long long)g->info.nodes);
    ft_buf_printf(o, "max_depth: %u\n", g->info.max_depth);
    ft_buf_printf(o, "bytes: %llu\n", (unsigned long long)g->info.file_bytes);
    ft_buf_printf(o, "reloads: %llu\n",
                  (unsigned long long)atomic_load(&srv->reloads));
    ft_buf_printf(o, "reload_failures: %llu\n",
                  (unsigned long long)atomic_load(&srv->reload_failures));

    ft_batcher_stats bs;
    ft_batcher_stats_get(srv->batcher, &bs);
    ft_buf_printf(o, "\n# engines\n");
    ft_buf_printf(o, "replicas: %zu\n", g->n_eng);
    ft_buf_printf(o, "failed_replicas: %zu\n", ft_gen_failed_replicas(g));
    ft_buf_printf(o, "failovers: %llu\n", (unsigned long long)bs.failovers);
    ft_buf_printf(o, "why: %s\n", g->why);
    for (size_t i = 0; i < g->n_eng; i++) {
        ft_buf_printf(o, "engine.%zu.kind: %s\n", i, ft_gen_kind_name(g, i));
        ft_buf_printf(o, "engine.%zu.note: %s\n", i,
                      ft_searcher_note(g->eng[i]));
        if (g->device[i] >= 0)
            ft_buf_printf(o, "engine.%zu.device: %d\n", i, g->device[i]);
        const char *why;
        if (ft_gen_replica_failed(g, i, &why))
            ft_buf_printf(o, "engine.%zu.state: failed: %s\n", i, why);
        else
            ft_buf_printf(o, "engine.%zu.state: ok\n", i);
        ft_buf_printf(o, "engine.%zu.batches: %llu\n", i,
                      (unsigned long long)bs.runs[i]);
        ft_buf_printf(o, "engine.%zu.busy_s: %.6f\n", i,
                      (double)bs.busy_ns[i] / 1e9);
    }
    /* The cluster lives as long as its generation, held here. */
    if (srv->cluster) {
        ft_cluster *c = srv->cluster;
        char why[240];
        int down = ft_cluster_down(c, why, sizeof why);
        ft_buf_printf(o, "\n# cluster\n");
        ft_buf_printf(o, "world: %u\n", ft_cluster_world(c));
        ft_buf_printf(o, "state: %s\n", down ? "down" : "up");
        if (down)
            ft_buf_printf(o, "down: %s\n", why);
        for (uint32_t r = 0; r < ft_cluster_world(c); r++) {
            uint32_t f, n;
            int up = ft_cluster_rank_state(c, r, &f, &n, why, sizeof why);
            ft_buf_printf(o, "rank.%u: %s, shards %u..%u%s%s\n", r,
                          up ? "up" : "down", f, f + n - 1, up ? "" : ": ",
                          up ? "" : why);
        }
    }
    ft_gen_unref(g);

    size_t qlen, qcap, hw;
    uint64_t busy, pushed;
    ft_queue_stats(&srv->queue, &qlen, &qcap, &busy, &pushed, &hw);
    ft_buf_printf(o, "\n# queue\n");
    ft_buf_printf(o, "depth: %zu\n", qlen);
    ft_buf_printf(o, "capacity: %zu\n", qcap);
    ft_buf_printf(o, "high_water: %zu\n", hw);
    ft_buf_printf(o, "queued_total: %llu\n", (unsigned long long)pushed);
    ft_buf_printf(o, "busy_rejections: %llu\n", (unsigned long long)busy);
    size_t hlen;
    uint64_t hpushed, hpops, ahead;
    ft_queue_lane_stats(&srv->queue, &hlen, &hpushed, &hpops, &ahead);
    ft_buf_printf(o, "heavy_depth: %zu\nheavy_queued_total: %llu\n"
                  "heavy_batches: %llu\nlight_ahead: %llu\n", hlen,
                  (unsigned long long)hpushed, (unsigned long long)hpops,
                  (unsigned long long)ahead);
    ft_buf_printf(o, "batches: %llu\n", (unsigned long long)bs.batches);
    ft_buf_printf(o, "mean_batch: %.2f\n",
                  bs.batches ? (double)bs.requests / (double)bs.batches : 0.0);
    ft_buf_printf(o, "answer_threads: %zu\n", bs.answer_threads);

    uint64_t h[SRV_HIST_BUCKETS], total = 0;
    for (size_t b = 0; b < SRV_HIST_BUCKETS; b++)
        total += (h[b] = atomic_load(&srv->hist[b]));
    ft_buf_printf(o, "\n# requests\n");
    ft_buf_printf(o, "messages: %llu\n",
                  (unsigned long long)atomic_load(&srv->messages));
    ft_buf_printf(o, "messages_json: %llu\n",
                  (unsigned long long)atomic_load(&srv->json_messages));
    ft_buf_printf(o, "messages_frame: %llu\n",
                  (unsigned long long)atomic_load(&srv->frame_messages));
    ft_buf_printf(o, "in_flight: %ld\n", atomic_load(&srv->inflight));
    ft_buf_printf(o, "memory_held_bytes: %llu\nmemory_held_peak_bytes: %llu\n"
                  "memory_busy: %llu\nheavy_messages: %u\n",
                  (unsigned long long)atomic_load(&srv->budget_used),
                  (unsigned long long)atomic_load(&srv->budget_peak),
                  (unsigned long long)atomic_load(&srv->budget_refused),
                  (unsigned)atomic_load(&srv->budget_heavy));
    {
        uint64_t lim, res, low, up;
        srv_conn_rx_stats(srv, &lim, &res, &low, &up);
        ft_buf_printf(o, "receive_limit_bytes: %llu\nreceive_reserved_bytes: "
                      "%llu\nreceive_limit_lowered: %llu\n"
                      "receive_limit_raised: %llu\n",
                      (unsigned long long)lim, (unsigned long long)res,
                      (unsigned long long)low, (unsigned long long)up);
    }
    ft_buf_printf(o, "total: %llu\n", (unsigned long long)total);
    for (int s = 0; s < SRV_ERR_COUNT; s++) {
        uint64_t n = atomic_load(&srv->status[s]);
        const char *k = status_key(s);
        if (k)
            ft_buf_printf(o, "status.%s: %llu\n", k, (unsigned long long)n);
        else if (n)
            ft_buf_printf(o, "status.%d: %llu\n", s, (unsigned long long)n);
    }
    ft_buf_printf(o, "latency_p50_us: %.1f\n", percentile(h, total, 0.50));
    ft_buf_printf(o, "latency_p99_us: %.1f\n", percentile(h, total, 0.99));

    info_limits(srv, o);
    srv_stages_info(srv, o);
    if (admin) {
        ft_buf_printf(o, "\n# config\n");
        srv_config_dump(srv, o);
    }
    return o->data ? FT_OK : FT_ENOMEM;
}
