/*
 * cluster_test.c - multi-process shard groups (docs/sharding.md,
 * "Clusters"): "flashtrie serve" ranks on one machine, bootstrapped over
 * ipc://, queried through the coordinator with the client library.  One
 * case per argument:
 *   equal      a world of 2 over 3 shards (max_batch 1, one request per
 *              message) and a world of 3 over 5 shards (max_batch 16, all
 *              requests in one message, one of them rejected): every
 *              answer equal, bit for bit,
 *              to the unsharded CPU engine's (what `flashtrie search
 *              --index INDEX` answers) and to the specification's reference
 *              search, on a random library with ties; rank 0's start line
 *              says what SIGHUP does for a cluster, and a SIGHUP is
 *              refused (logged in its log_file); then SIGTERM: every rank
 *              exits 0
 *   kill       a world of 3: rank 2 killed with SIGKILL; the next requests
 *              get FT_ECONN "cluster: rank 2: the connection was lost", INFO
 *              says which rank is down, /healthz answers 503 saying so, /metrics has
 *              flashtrie_cluster_rank_up 0 for it (1 again after the rejoin);
 *              rank 2 restarted with the same config rejoins: INFO and
 *              /healthz up again, every answer equal to the unsharded
 *              index's; a second rank 2 is refused as a duplicate (exit
 *              1, exact message); the coordinator exits 0 on SIGTERM
 *              (ranks 1 and 2 too, told so)
 *   stall      a rank stopped (SIGSTOP) while idle is down by the
 *              heartbeat within its bound, no request sent (INFO and
 *              /healthz say so); resumed (SIGCONT) it is told to register
 *              again and does: up, answers equal; stopped during a batch
 *              it is down after the step timeout: FT_ECONN "... stopped
 *              answering ...", no hang; resumed, it rejoins the same way;
 *              SIGTERM ends both with exit 0
 *   bootstrap  an unsharded index refused by rank 0 and rank 1, saying a
 *              cluster needs a shard manifest (exit 1);
 *              refused registrations, each with its exact message in the
 *              refused rank's log and exit 1: a different manifest, a
 *              duplicate rank, a wrong world; a frame without the magic
 *              dropped, a registration cut short refused (FT_EPROTO); the cluster then starts with
 *              the right rank and answers (a rank whose file names no
 *              listener does not warn of listeners, one that names some
 *              does; only rank 0 logs that any peer may register); a
 *              coordinator missing a rank
 *              gives up on SIGTERM (exit 1, saying how many are missing)
 *   leave      how a rank learns the coordinator went, with the orderings
 *              a loaded machine gives: a rank slowed down (the test hook
 *              FT_CLUSTER_TEST_SLOW_MS) whose connection closes after a
 *              BYE it has not read yet still sees the BYE (exit 0, "the
 *              coordinator left"); a rank stopped (SIGSTOP) when rank 0
 *              gets SIGTERM: rank 0 waits for it to close its connection,
 *              and resumed it reads the BYE (both exit 0); rank 0 killed
 *              (SIGKILL): the rank's "connection was lost", exit 1
 * Everything listens on ipc:// in a temporary folder (and /healthz on
 * 127.0.0.1); every process is stopped by the case, or killed at exit.
 * FT_KEEP=1 keeps the folder (the logs) for a look afterwards.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/pair1/pair.h>
#include <xxhash.h>

#include "flashtrie_client.h"
#include "search_util.h"
#include "serve_harness.h"
#include "test_net.h"

#define MAX_PROCS 6

static char g_dir[256];
static pid_t g_pid[MAX_PROCS];
static const char *g_bin;

static void cleanup(void)
{
    for (int i = 1; i < MAX_PROCS; i++)
        th_kill(&g_pid[i], "", "cluster_test");
    th_kill(&g_pid[0], getenv("FT_KEEP") ? "" : g_dir, "cluster_test");
}

/* file_has says whether DIR/name holds the line fragment s. */
static int file_has(const char *name, const char *s)
{
    return th_count_lines(g_dir, name, s) > 0;
}

/* log_within says whether DIR/name holds s, looking up to tries times,
 * 10 ms apart. */
static int log_within(const char *name, const char *s, int tries)
{
    int seen = 0;
    for (int i = 0; i < tries && !seen; i++) {
        seen = file_has(name, s);
        if (!seen)
            th_sleep_ms(10);
    }
    return seen;
}

static void expect_log(const char *name, const char *s)
{
    /* A line may follow the state it reports by a moment (the daemon
     * sets the cluster's state, then logs it): up to 5 s for it. */
    if (log_within(name, s, 500))
        return;
    fprintf(stderr, "%s/%s lacks \"%s\"; it holds:\n", g_dir, name, s);
    th_show_file(g_dir, name, 0);
    exit(1);
}

/* split cuts DIR/lib.idx into n shards: DIR/m<n>.ftm. */
static void split(int n)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' split '%s/lib.idx' --shards %d --output "
             "'%s/m%d.ftm' --quiet > /dev/null", g_bin, g_dir, n, g_dir, n);
    FT_CHECK(system(cmd) == 0);
}

/* write_conf writes DIR/name: a CPU rank of the cluster. */
static void write_conf_x(const char *name, const char *manifest, int rank,
                         int world, int max_batch, const char *metrics,
                         const char *extra)
{
    char path[300];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "w");
    FT_CHECK(f != NULL);
    fprintf(f, "index = \"%s/%s\";\n", g_dir, manifest);
    fprintf(f, "listeners = ( { url = \"ipc://%s/c.sock\"; } );\n", g_dir);
    fprintf(f, "engine = \"cpu\";\ncpu_threads = 1;\nmax_batch = %d;\n",
            max_batch);
    fprintf(f, "max_wait_us = 2000;\n");
    if (metrics)
        fprintf(f, "metrics = \"%s\";\n", metrics);
    fprintf(f, "cluster = { rank = %d; world = %d; coordinator = "
            "\"ipc://%s/boot.sock\"; %s};\n", rank, world, g_dir,
            extra ? extra : "");
    fclose(f);
}

static void write_conf(const char *name, const char *manifest, int rank,
                       int world, int max_batch, const char *metrics)
{
    write_conf_x(name, manifest, rank, world, max_batch, metrics, NULL);
}

/* start_rank starts rank r with config DIR/conf; rank 0 is waited for
 * until it answers a ping (after every rank joined). */
static void start_rank(int slot, int r, const char *conf)
{
    char path[300], log[64], url[300];
    snprintf(path, sizeof path, "%s/%s", g_dir, conf);
    const char *args[] = {"--config", path, NULL};
    if (r == 0) {
        snprintf(url, sizeof url, "ipc://%s/c.sock", g_dir);
        th_start(&g_pid[slot], g_bin, g_dir, url, args);
    } else {
        snprintf(log, sizeof log, "log%d", slot);
        th_spawn(&g_pid[slot], g_bin, g_dir, log, args);
    }
}

/* spawn_coord starts rank 0 with DIR/c0.conf and its log in DIR/logname,
 * without waiting: it opens its listener once every rank joined. */
static void spawn_coord(const char *logname)
{
    char path[300];
    snprintf(path, sizeof path, "%s/c0.conf", g_dir);
    const char *args0[] = {"--config", path, NULL};
    th_spawn(&g_pid[0], g_bin, g_dir, logname, args0);
}

/* wait_exit waits (limit_ms) for the process in slot to exit by itself
 * and returns its status. */
static int wait_exit(int slot, long limit_ms)
{
    int st = th_wait_exit(&g_pid[slot], limit_ms);
    if (st >= 0)
        return st;
    fprintf(stderr, "process %d did not exit within %ld ms\n", slot,
            limit_ms);
    exit(1);
}

static ft_client *connect_coord(void)
{
    char url[300];
    snprintf(url, sizeof url, "ipc://%s/c.sock", g_dir);
    return tn_connect(url, 30000, 0);
}

static char *info(ft_client *c)
{
    char *text;
    FT_PASS(ft_client_info(c, &text, NULL, 0));
    return text;
}

/* wait_info polls INFO (limit_ms) until it holds s; returns the seconds
 * it took, or exits when it never does. */
static double wait_info(ft_client *c, const char *s, long limit_ms)
{
    double t0 = ft_test_now();
    for (long t = 0; t <= limit_ms; t += 20) {
        char *text = info(c);
        int seen = strstr(text, s) != NULL;
        if (!seen && t + 20 > limit_ms) {
            fprintf(stderr, "INFO never held \"%s\" within %ld ms; it "
                    "holds:\n%s\n", s, limit_ms, text);
            exit(1);
        }
        ft_client_text_free(text);
        if (seen)
            return ft_test_now() - t0;
        th_sleep_ms(20);
    }
    exit(1);
}

/* ---- the library ---- */

static su_cases g_cs;

static void make_lib(void)
{
    uint64_t s = 20261201;
    su_lib_params lp = {1, 2000, 6};
    char path[300];
    snprintf(path, sizeof path, "%s/lib.idx", g_dir);
    su_cases_make(&g_cs, &s, &lp, 48, 6, 24, 24, path, 1);
    su_cases_cpu(&g_cs); /* the unsharded index's answers */
    for (uint32_t i = 0; i < g_cs.n; i++)
        FT_CHECK(su_same_result(&g_cs.res[i], g_cs.cs[i].ref,
                                g_cs.cs[i].nref, "unsharded"));
}

/* check_answers sends every case, per message of `per` requests, and
 * checks each answer bit for bit against the unsharded index's. */
static void check_answers(ft_client *c, uint32_t per, const char *what)
{
    for (uint32_t i = 0; i < g_cs.n; i += per) {
        uint32_t n = g_cs.n - i < per ? g_cs.n - i : per;
        ft_client_results *res;
        char err[256] = "";
        int rc = ft_client_search(c, &g_cs.batch[i], n, &res, err, sizeof err);
        if (rc != FT_OK) {
            fprintf(stderr, "%s: requests %u..: %s\n", what, i, err);
            exit(1);
        }
        FT_CHECK_EQ_U64(ft_client_results_count(res), n);
        for (uint32_t j = 0; j < n; j++) {
            const ft_result *got = ft_client_results_get(res, j);
            if (!su_same_results(got, &g_cs.res[i + j]) ||
                !su_same_result(got, g_cs.cs[i + j].ref, g_cs.cs[i + j].nref,
                                what)) {
                fprintf(stderr, "%s: request %u differs from the unsharded "
                        "index (status %d, %u hits, want %u)\n", what, i + j,
                        got->status, got->n, g_cs.res[i + j].n);
                exit(1);
            }
        }
        ft_client_results_free(res);
    }
}

static void case_equal(void)
{
    char path_a0[300];
    make_lib();
    split(3);
    split(5);
    uint64_t hits = 0;
    for (uint32_t i = 0; i < g_cs.n; i++)
        hits += g_cs.res[i].n;
    FT_CHECK(hits > g_cs.n); /* the cases find keys */
    /* world 2 over 3 shards: rank 0 holds shard 0, rank 1 shards 1..2;
     * one request per batch. */
    write_conf("a0.conf", "m3.ftm", 0, 2, 1, NULL);
    write_conf("a1.conf", "m3.ftm", 1, 2, 1, NULL);
    char line[600];
    snprintf(line, sizeof line, "log_file = \"%s/a0.log\";\n", g_dir);
    snprintf(path_a0, sizeof path_a0, "%s/a0.conf", g_dir);
    th_write_file(path_a0, line, "a");
    start_rank(1, 1, "a1.conf");
    start_rank(0, 0, "a0.conf");
    ft_client *c = connect_coord();
    check_answers(c, 1, "world 2, 3 shards, batch 1");
    /* Rank 0's start line says what SIGHUP does for a cluster (it said
     * "SIGHUP reloads"): with a log file, reopen it and refuse. */
    snprintf(line, sizeof line, "serving (pid %ld); SIGHUP reopens the log "
             "file only (a cluster does not reload), SIGTERM drains",
             (long)g_pid[0]);
    expect_log("a0.log", line);
    FT_CHECK(kill(g_pid[0], SIGHUP) == 0);
    expect_log("a0.log", "reload refused: a cluster does not reload its "
                         "index (restart every rank)");
    check_answers(c, 1, "world 2 after SIGHUP");
    char *t = info(c);
    FT_CHECK(strstr(t, "# cluster\nworld: 2\nstate: up\n"
                       "rank.0: up, shards 0..0\n"
                       "rank.1: up, shards 1..2\n") != NULL);
    ft_client_text_free(t);
    ft_client_close(c);
    FT_CHECK_EQ_U64(th_stop(&g_pid[0], SIGTERM, 20000, NULL), 0);
    FT_CHECK_EQ_U64(wait_exit(1, 10000), 0);
    expect_log("log1", "cluster: rank 1: the coordinator left");

    /* world 3 over 5 shards: blocks 0..0, 1..2, 3..4; batches up to 16
     * of all the requests in one message. */
    write_conf("b0.conf", "m5.ftm", 0, 3, 16, NULL);
    write_conf("b1.conf", "m5.ftm", 1, 3, 16, NULL);
    write_conf("b2.conf", "m5.ftm", 2, 3, 16, NULL);
    start_rank(1, 1, "b1.conf");
    start_rank(2, 2, "b2.conf");
    start_rank(0, 0, "b0.conf");
    c = connect_coord();
    check_answers(c, g_cs.n, "world 3, 5 shards, one message");
    /* A request the validator rejects rides in a batch of good ones: its
     * error is the unsharded index's, the others are answered. */
    {
        ft_request q[3] = {g_cs.batch[0], g_cs.batch[1], g_cs.batch[2]};
        q[1].beam = 0;
        ft_result want;
        FT_PASS(ft_result_alloc(&want, 4096, FT_MAX_T));
        FT_FAIL(ft_request_validate(&q[1], 0, want.error, sizeof want.error),
                FT_EREQUEST);
        ft_client_results *res;
        FT_PASS(ft_client_search(c, q, 3, &res, NULL, 0));
        FT_CHECK(su_same_results(ft_client_results_get(res, 0), &g_cs.res[0]));
        FT_CHECK(su_same_results(ft_client_results_get(res, 2), &g_cs.res[2]));
        const ft_result *bad = ft_client_results_get(res, 1);
        FT_CHECK_EQ_U64(bad->status, FT_EREQUEST);
        FT_CHECK_STR(bad->error, want.error);
        ft_client_results_free(res);
        ft_result_free(&want);
    }
    check_answers(c, 5, "world 3, 5 shards, 5 per message");
    t = info(c);
    FT_CHECK(strstr(t, "rank.0: up, shards 0..0\nrank.1: up, shards 1..2\n"
                       "rank.2: up, shards 3..4\n") != NULL);
    ft_client_text_free(t);
    ft_client_close(c);
    FT_CHECK_EQ_U64(th_stop(&g_pid[0], SIGTERM, 20000, NULL), 0);
    FT_CHECK_EQ_U64(wait_exit(1, 10000), 0);
    FT_CHECK_EQ_U64(wait_exit(2, 10000), 0);
    expect_log("log", "drained: every request answered");
    su_cases_free(&g_cs);
}

/* healthz GETs /healthz; *body gets its text (free it). */
static int healthz(const char *base, char **body)
{
    return tn_http_get(base, "/healthz", body, NULL, NULL, 0);
}

/* expect_ranks scrapes /metrics and checks that it holds the cluster's
 * family as want (the TYPE line and every rank's sample). */
static void expect_ranks(const char *base, const char *want)
{
    char *body;
    FT_CHECK_EQ_U64(tn_http_get(base, "/metrics", &body, NULL, NULL, 0), 200);
    if (strstr(body, want) == NULL) {
        fprintf(stderr, "/metrics lacks\n%s\nit holds:\n%s\n", want, body);
        exit(1);
    }
    free(body);
}

static void case_kill(void)
{
    make_lib();
    split(4);
    char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%d", tn_free_port());
    write_conf("k0.conf", "m4.ftm", 0, 3, 8, base);
    write_conf("k1.conf", "m4.ftm", 1, 3, 8, NULL);
    write_conf("k2.conf", "m4.ftm", 2, 3, 8, NULL);
    start_rank(1, 1, "k1.conf");
    start_rank(2, 2, "k2.conf");
    start_rank(0, 0, "k0.conf");
    ft_client *c = connect_coord();
    check_answers(c, 8, "world 3, 4 shards");
    char *body;
    FT_CHECK_EQ_U64(healthz(base, &body), 200);
    FT_CHECK_STR(body, "ok\n");
    free(body);

    /* Rank 2 dies: its connection closes, the coordinator marks it down
     * (the pipe event comes from nng's thread: wait for INFO to say so). */
    kill(g_pid[2], SIGKILL);
    FT_CHECK_EQ_U64(wait_exit(2, 5000), 128 + SIGKILL);
    const char *down = "rank.2: down, shards 2..3: rank 2: the connection "
                       "was lost\n";
    int seen = 0;
    for (int i = 0; i < 200 && !seen; i++) {
        char *t = info(c);
        seen = strstr(t, down) != NULL;
        ft_client_text_free(t);
        if (!seen)
            th_sleep_ms(10);
    }
    FT_CHECK(seen);
    char *t = info(c);
    FT_CHECK(strstr(t, "# cluster\nworld: 3\nstate: down\n"
                       "down: rank 2: the connection was lost\n"
                       "rank.0: up, shards 0..0\n"
                       "rank.1: up, shards 1..1\n") != NULL);
    ft_client_text_free(t);
    /* Every later request: the error, never a partial answer. */
    for (int round = 0; round < 2; round++) {
        ft_client_results *res;
        FT_PASS(ft_client_search(c, g_cs.batch, 6, &res, NULL, 0));
        FT_CHECK_EQ_U64(ft_client_results_count(res), 6);
        for (size_t j = 0; j < 6; j++) {
            const ft_result *r = ft_client_results_get(res, j);
            FT_CHECK_EQ_U64(r->status, FT_ECONN);
            FT_CHECK_EQ_U64(r->n, 0);
            FT_CHECK_STR(r->error, "cluster: rank 2: the connection was lost");
        }
        ft_client_results_free(res);
    }
    FT_CHECK_EQ_U64(healthz(base, &body), 503);
    FT_CHECK_STR(body, "cluster: rank 2: the connection was lost\n");
    free(body);
    expect_ranks(base, "# TYPE flashtrie_cluster_rank_up gauge\n"
                       "flashtrie_cluster_rank_up{rank=\"0\",shards=\"0..0\"} 1\n"
                       "flashtrie_cluster_rank_up{rank=\"1\",shards=\"1..1\"} 1\n"
                       "flashtrie_cluster_rank_up{rank=\"2\",shards=\"2..3\"} 0\n");

    /* Rank 2 restarted with the same config: it registers, passes the
     * same checks, gets the session again; the cluster is up again and
     * answers as before, bit for bit. */
    start_rank(2, 2, "k2.conf");
    wait_info(c, "# cluster\nworld: 3\nstate: up\n"
                 "rank.0: up, shards 0..0\n"
                 "rank.1: up, shards 1..1\n"
                 "rank.2: up, shards 2..3\n", 10000);
    expect_log("log", "cluster: rank 2 joined again (shards 2..3); every "
                      "rank is up");
    FT_CHECK_EQ_U64(healthz(base, &body), 200);
    FT_CHECK_STR(body, "ok\n");
    free(body);
    expect_ranks(base, "flashtrie_cluster_rank_up{rank=\"2\",shards=\"2..3\"} 1\n");
    check_answers(c, 8, "world 3 after rank 2 rejoined");
    check_answers(c, 5, "world 3 after rank 2 rejoined, 5 per message");
    /* A second process claiming rank 2, which is up: refused. */
    start_rank(3, 2, "k2.conf");
    FT_CHECK_EQ_U64(wait_exit(3, 10000), 1);
    expect_log("log3", "cannot serve: cluster: the coordinator refused rank "
                       "2: duplicate rank: rank 2 is already registered");
    check_answers(c, 8, "world 3 after a duplicate was refused");
    ft_client_close(c);
    double ms;
    FT_CHECK_EQ_U64(th_stop(&g_pid[0], SIGTERM, 20000, &ms), 0);
    FT_CHECK(ms < 15000);
    FT_CHECK_EQ_U64(wait_exit(1, 10000), 0);
    FT_CHECK_EQ_U64(wait_exit(2, 10000), 0);
    expect_log("log", "cluster: rank 2: the connection was lost");
    expect_log("log2", "cluster: rank 2: the coordinator left");
    su_cases_free(&g_cs);
}

/* stall_resume resumes rank 1 (stopped and down) and waits for it to be
 * told to register again and be up. */
static void stall_resume(ft_client *c, const char *base, int times)
{
    kill(g_pid[1], SIGCONT);
    wait_info(c, "# cluster\nworld: 2\nstate: up\n"
                 "rank.0: up, shards 0..0\nrank.1: up, shards 1..2\n", 10000);
    char *body;
    FT_CHECK_EQ_U64(healthz(base, &body), 200);
    FT_CHECK_STR(body, "ok\n");
    free(body);
    /* Each resume: one "took it out" and one "serving again" in its log. */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "test $(grep -c 'cluster: rank 1: the "
             "coordinator took it out; registering again' '%s/log1') -eq %d "
             "&& test $(grep -c 'cluster: rank 1: serving again' '%s/log1') "
             "-eq %d", g_dir, times, g_dir, times);
    FT_CHECK(system(cmd) == 0);
    expect_log("log", "cluster: rank 1 joined again (shards 1..2); every "
                      "rank is up");
    check_answers(c, 8, "world 2 after rank 1 rejoined");
}

/* case_stall: a rank that stops answering (SIGSTOP) is down: while idle
 * by the heartbeat, during a batch after the step timeout; its requests
 * fail, never hang; resumed, it is told to register again and rejoins;
 * SIGTERM ends both ranks with exit 0. */
static void case_stall(void)
{
    make_lib();
    split(3);
    char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%d", tn_free_port());
    const char *x = "step_timeout_ms = 300; ";
    write_conf_x("s0.conf", "m3.ftm", 0, 2, 8, base, x);
    write_conf_x("s1.conf", "m3.ftm", 1, 2, 8, NULL, x);
    start_rank(1, 1, "s1.conf");
    start_rank(0, 0, "s0.conf");
    ft_client *c = connect_coord();
    check_answers(c, 8, "world 2 before the stall");

    /* Stopped while idle: no request is sent; the heartbeat (a ping each
     * 250 ms, down after 1.5 s without an answer) reports it. */
    th_sleep_ms(300);
    kill(g_pid[1], SIGSTOP);
    const char *hb = "rank 1: stopped answering: no heartbeat within 1500 ms";
    char line[200];
    snprintf(line, sizeof line, "rank.1: down, shards 1..2: %s\n", hb);
    double took = wait_info(c, line, 5000);
    FT_CHECK(took >= 1.0 && took < 4.0);
    char *body, want[200];
    FT_CHECK_EQ_U64(healthz(base, &body), 503);
    snprintf(want, sizeof want, "cluster: %s\n", hb);
    FT_CHECK_STR(body, want);
    free(body);
    /* A request now fails at once with the reason (the heartbeat's, not
     * a step timeout's: no batch ran). */
    ft_client_results *res;
    double t0 = ft_test_now();
    FT_PASS(ft_client_search(c, g_cs.batch, 2, &res, NULL, 0));
    FT_CHECK(ft_test_now() - t0 < 1.0);
    snprintf(want, sizeof want, "cluster: %s", hb);
    for (size_t j = 0; j < 2; j++) {
        FT_CHECK_EQ_U64(ft_client_results_get(res, j)->status, FT_ECONN);
        FT_CHECK_EQ_U64(ft_client_results_get(res, j)->n, 0);
        FT_CHECK_STR(ft_client_results_get(res, j)->error, want);
    }
    ft_client_results_free(res);
    /* Resumed, it answers the pings again: the coordinator tells it to
     * register again (REJOIN), it does, and is up. */
    stall_resume(c, base, 1);

    /* Stopped during a batch: the batch fails after the step timeout. */
    kill(g_pid[1], SIGSTOP);
    const char *why = "cluster: rank 1: stopped answering: no LISTS within "
                      "300 ms (step 0)";
    t0 = ft_test_now();
    FT_PASS(ft_client_search(c, g_cs.batch, 3, &res, NULL, 0));
    double waited = ft_test_now() - t0;
    FT_CHECK(waited >= 0.29 && waited < 5.0);
    for (size_t j = 0; j < 3; j++) {
        const ft_result *r = ft_client_results_get(res, j);
        FT_CHECK_EQ_U64(r->status, FT_ECONN);
        FT_CHECK_EQ_U64(r->n, 0);
        FT_CHECK_STR(r->error, why);
    }
    ft_client_results_free(res);
    char *t = info(c);
    FT_CHECK(strstr(t, "rank.1: down, shards 1..2: rank 1: stopped "
                       "answering: no LISTS within 300 ms (step 0)\n") != NULL);
    ft_client_text_free(t);
    FT_PASS(ft_client_search(c, g_cs.batch, 1, &res, NULL, 0));
    FT_CHECK_STR(ft_client_results_get(res, 0)->error, why);
    ft_client_results_free(res);
    stall_resume(c, base, 2);
    ft_client_close(c);
    FT_CHECK_EQ_U64(th_stop(&g_pid[0], SIGTERM, 20000, NULL), 0);
    FT_CHECK_EQ_U64(wait_exit(1, 10000), 0);
    expect_log("log1", "cluster: rank 1: the coordinator left");
    su_cases_free(&g_cs);
}

static uint64_t file_sum(const char *name)
{
    char path[300];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "rb");
    FT_CHECK(f != NULL);
    static unsigned char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    FT_CHECK(n < sizeof buf);
    uint64_t h = XXH3_64bits(buf, n);
    return h ? h : 1;
}

/* join_last starts the last rank, 2 of 3 (c2.conf), in slot, waits until
 * the coordinator answers a ping (the session started), checks every
 * answer (what names the step), and stops the cluster: the coordinator
 * and ranks 1 and 2 exit 0. */
static void join_last(int slot, const char *what)
{
    start_rank(slot, 2, "c2.conf");
    char url[300];
    snprintf(url, sizeof url, "ipc://%s/c.sock", g_dir);
    ft_client *c = tn_connect(url, 500, 1);
    int rc = FT_ETIMEDOUT;
    for (int i = 0; i < 60 && rc != FT_OK; i++)
        rc = ft_client_ping(c, NULL, 0);
    FT_PASS(rc);
    ft_client_close(c);
    c = connect_coord();
    check_answers(c, 16, what);
    ft_client_close(c);
    FT_CHECK_EQ_U64(th_stop(&g_pid[0], SIGTERM, 20000, NULL), 0);
    FT_CHECK_EQ_U64(wait_exit(1, 10000), 0);
    FT_CHECK_EQ_U64(wait_exit(slot, 10000), 0);
}

/* drop_listeners rewrites DIR/name without its listeners line: a rank's
 * file as ops/config/cluster-rank1.conf has it. */
static void drop_listeners(const char *name)
{
    char path[300], line[1024], text[4096] = "";
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "r");
    FT_CHECK(f != NULL);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "listeners", 9) != 0) {
            FT_CHECK(strlen(text) + strlen(line) < sizeof text);
            strcat(text, line);
        }
    fclose(f);
    th_write_file(path, text, "w");
}

static void case_bootstrap(void)
{
    make_lib();
    split(3);
    split(5);
    write_conf("c0.conf", "m3.ftm", 0, 3, 8, NULL);
    write_conf("c1.conf", "m3.ftm", 1, 3, 8, NULL);
    write_conf("c2.conf", "m3.ftm", 2, 3, 8, NULL);
    drop_listeners("c2.conf");
    write_conf("bad_manifest.conf", "m5.ftm", 2, 3, 8, NULL);
    write_conf("bad_world.conf", "m3.ftm", 1, 2, 8, NULL);
    /* An unsharded index: rank 0 and the others say a cluster needs a
     * shard manifest (they said "not a FlashTrie shard manifest (bad
     * magic)"). */
    write_conf("idx0.conf", "lib.idx", 0, 2, 8, NULL);
    write_conf("idx1.conf", "lib.idx", 1, 2, 8, NULL);
    for (int r = 0; r < 2; r++) {
        char conf[16], log[16], path[300], want[512];
        snprintf(conf, sizeof conf, "idx%d.conf", r);
        snprintf(log, sizeof log, "log_idx%d", r);
        snprintf(path, sizeof path, "%s/%s", g_dir, conf);
        const char *args[] = {"--config", path, NULL};
        th_spawn(&g_pid[1], g_bin, g_dir, log, args);
        FT_CHECK_EQ_U64(wait_exit(1, 10000), 1);
        snprintf(want, sizeof want, "cannot serve: %s/lib.idx: an unsharded "
                 "FlashTrie index: a cluster of world 2 needs a shard "
                 "manifest (made by `flashtrie split`)", g_dir);
        expect_log(log, want);
    }
    spawn_coord("log");
    start_rank(1, 1, "c1.conf");
    /* Rank 1 registers; wait until the coordinator says so. */
    FT_CHECK(log_within("log", "cluster: rank 1 joined (shards 1..1)", 500));

    /* A second rank 1. */
    start_rank(2, 1, "c1.conf");
    FT_CHECK_EQ_U64(wait_exit(2, 10000), 1);
    expect_log("log2", "cannot serve: cluster: the coordinator refused rank "
                       "1: duplicate rank: rank 1 is already registered");
    /* Rank 2 over another manifest. */
    char want[512];
    snprintf(want, sizeof want, "cannot serve: cluster: the coordinator "
             "refused rank 2: different manifest: 5 shards, checksum "
             "%016" PRIx64 "; the coordinator's: 3 shards, checksum %016"
             PRIx64, file_sum("m5.ftm"), file_sum("m3.ftm"));
    start_rank(3, 2, "bad_manifest.conf");
    FT_CHECK_EQ_U64(wait_exit(3, 10000), 1);
    expect_log("log3", want);
    /* A rank that counts another world. */
    start_rank(4, 1, "bad_world.conf");
    FT_CHECK_EQ_U64(wait_exit(4, 10000), 1);
    expect_log("log4", "cannot serve: cluster: the coordinator refused rank "
                       "1: wrong world: it has 2 ranks, the coordinator 3");
    expect_log("log", "cluster: registration refused: rank 1: duplicate "
                      "rank: rank 1 is already registered");

    /* Frames that are not registrations: one without the magic is
     * dropped (logged); a registration cut short is refused as
     * malformed, with FT_EPROTO. */
    {
        nng_socket sk;
        FT_CHECK(nng_pair1_open(&sk) == 0);
        nng_socket_set_ms(sk, NNG_OPT_RECVTIMEO, 5000);
        nng_socket_set_ms(sk, NNG_OPT_SENDTIMEO, 5000);
        char boot[300];
        snprintf(boot, sizeof boot, "ipc://%s/boot.sock", g_dir);
        FT_CHECK(nng_dial(sk, boot, NULL, 0) == 0);
        FT_CHECK(nng_send(sk, "not a cluster message", 21, 0) == 0);
        /* header: FTCL, REG (1), rank 2, seq 0; then 2 of 10 fields */
        unsigned char reg[24] = {'F', 'T', 'C', 'L', 1, 0, 0, 0, 2, 0, 0, 0,
                                 0, 0, 0, 0, 3, 0, 0, 0, 3, 0, 0, 0};
        FT_CHECK(nng_send(sk, reg, sizeof reg, 0) == 0);
        void *ans;
        size_t alen;
        FT_CHECK(nng_recv(sk, &ans, &alen, NNG_FLAG_ALLOC) == 0);
        const unsigned char *a = ans;
        const char *want_msg = "rank 2: malformed registration";
        FT_CHECK_EQ_U64(alen, 24 + strlen(want_msg));
        FT_CHECK(memcmp(a, "FTCL", 4) == 0);
        FT_CHECK_EQ_U64(a[4], 3); /* REFUSE */
        FT_CHECK_EQ_U64(a[16] | a[17] << 8, FT_EPROTO);
        FT_CHECK_EQ_U64(a[20], strlen(want_msg));
        FT_CHECK(memcmp(a + 24, want_msg, strlen(want_msg)) == 0);
        nng_free(ans, alen);
        nng_close(sk);
        expect_log("log", "cluster: dropped a message that is not a cluster "
                          "message (21 bytes)");
    }

    /* The right rank 2: the session starts and answers. */
    join_last(5, "world 3 after refusals");
    /* A rank warns of listeners its file names (rank 1), and of none
     * when the file has none (rank 2: the default one is no choice). */
    expect_log("log1", "cluster rank 1: listeners and metrics are rank 0's; "
                       "this rank opens none");
    expect_log("log5", "cluster rank 2 of 3 serving");
    FT_CHECK(!file_has("log5", "listeners and metrics are rank 0's"));
    /* Only rank 0, which takes registrations, says that any peer may
     * register (every rank said it); the others say how they register. */
    expect_log("log", "; no cluster secret: any peer may register)");
    expect_log("log1", "; registering without a cluster secret)");
    FT_CHECK(!file_has("log1", "any peer may register"));
    FT_CHECK(!file_has("log5", "any peer may register"));
    /* Without a log file, rank 0's SIGHUP is refused and nothing else. */
    expect_log("log", "); SIGHUP is refused (a cluster does not reload), "
                      "SIGTERM drains");
    FT_CHECK(!file_has("log", "SIGHUP reloads"));

    /* A coordinator whose ranks never come gives up on SIGTERM.  Until
     * then its probes say it waits for the ranks, not only for its index
     * (which is open). */
    char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%d", tn_free_port());
    write_conf("c0.conf", "m3.ftm", 0, 3, 8, base);
    spawn_coord("log_alone");
    FT_CHECK(log_within("log_alone", "waiting for the ranks on", 500));
    const char *wait = "starting: opening the index and waiting for the "
                       "cluster's other ranks to join (world 3)\n";
    char *body;
    FT_CHECK_EQ_U64(healthz(base, &body), 503);
    FT_CHECK_STR(body, wait);
    free(body);
    FT_CHECK_EQ_U64(tn_http_get(base, "/metrics", &body, NULL, NULL, 0), 503);
    FT_CHECK_STR(body, wait);
    free(body);
    double ms;
    FT_CHECK_EQ_U64(th_stop(&g_pid[0], SIGTERM, 5000, &ms), 1);
    expect_log("log_alone", "cannot serve: cluster: start given up (a signal) "
                      "with 2 ranks missing");
    /* One rank missing is one rank (it said "1 ranks"). */
    write_conf("c0.conf", "m3.ftm", 0, 2, 8, NULL);
    spawn_coord("log_alone2");
    FT_CHECK(log_within("log_alone2", "waiting for the ranks on", 500));
    FT_CHECK_EQ_U64(th_stop(&g_pid[0], SIGTERM, 5000, &ms), 1);
    expect_log("log_alone2", "cannot serve: cluster: start given up (a "
                             "signal) with 1 rank missing");
    su_cases_free(&g_cs);
}

/* append_caps adds small caps to DIR/name (every rank the same): the
 * coordinator's message bound is then small. */
static void append_caps(const char *name)
{
    char path[300];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    th_write_file(path, "caps = { max_beam = 32; max_t = 8; max_k = 64; };\n",
                  "a");
}

/* case_secret: a cluster with a secret: ranks with a wrong one or none are
 * refused (FT_EPERM, named, logged by both); a peer that sends the
 * coordinator a message larger than the largest legitimate one loses its
 * connection before the message is read (the coordinator's memory does not
 * grow by it); the right ranks then join and answer. */
static void case_secret(void)
{
    make_lib();
    split(3);
    const char *sec = "secret = \"s3cret-shared\"; ";
    write_conf_x("c0.conf", "m3.ftm", 0, 3, 8, NULL, sec);
    write_conf_x("c1.conf", "m3.ftm", 1, 3, 8, NULL, sec);
    write_conf_x("c2.conf", "m3.ftm", 2, 3, 8, NULL, sec);
    write_conf_x("wrong.conf", "m3.ftm", 2, 3, 8, NULL,
                 "secret = \"s3cret-sharee\"; ");
    write_conf_x("none.conf", "m3.ftm", 2, 3, 8, NULL, NULL);
    const char *confs[] = {"c0.conf", "c1.conf", "c2.conf", "wrong.conf",
                           "none.conf"};
    for (int i = 0; i < 5; i++)
        append_caps(confs[i]);
    spawn_coord("log");
    start_rank(1, 1, "c1.conf");
    FT_CHECK(log_within("log", "cluster: rank 1 joined (shards 1..1)", 1000));
    /* rank 0 bounds what it reads: 1 shard per rank x 64 requests x
     * max(32 x 8 list bytes, 8 + 32 x (36 + 8 x 4) hit bytes) + 64 KiB */
    size_t bound = 64 * (8 + 32 * (36 + 8 * 4)) + 65536;
    char want[512];
    snprintf(want, sizeof want, "(messages up to %zu bytes; ranks "
             "authenticated by the cluster secret)", bound);
    expect_log("log", want);
    expect_log("log1", "; registering with the cluster secret)");

    start_rank(2, 2, "wrong.conf");
    FT_CHECK_EQ_U64(wait_exit(2, 10000), 1);
    expect_log("log2", "cannot serve: cluster: the coordinator refused rank "
                       "2: wrong cluster secret (it differs from rank 0's)");
    start_rank(3, 2, "none.conf");
    FT_CHECK_EQ_U64(wait_exit(3, 10000), 1);
    expect_log("log3", "cannot serve: cluster: the coordinator refused rank "
                       "2: wrong cluster secret (it sent none)");
    expect_log("log", "cluster: registration refused: rank 2: wrong cluster "
                      "secret (it sent none)");

    /* An oversize message: 64 MiB from a peer that never registered. */
    {
        long before = th_proc_kb(g_pid[0], "VmRSS");
        nng_socket sk;
        FT_CHECK(nng_pair1_open(&sk) == 0);
        nng_socket_set_ms(sk, NNG_OPT_SENDTIMEO, 5000);
        char boot[300];
        snprintf(boot, sizeof boot, "ipc://%s/boot.sock", g_dir);
        FT_CHECK(nng_dial(sk, boot, NULL, 0) == 0);
        size_t big = (size_t)64 << 20;
        unsigned char *junk = malloc(big);
        FT_CHECK(junk != NULL);
        memset(junk, 0x5a, big);
        memcpy(junk, "FTCL", 4);
        junk[4] = 1; /* REG */
        nng_send(sk, junk, big, 0);
        th_sleep_ms(500);
        nng_close(sk);
        free(junk);
        long hwm = th_proc_kb(g_pid[0], "VmHWM");
        fprintf(stderr, "coordinator: VmRSS %ld KiB before the 64 MiB "
                "message, VmHWM %ld KiB after\n", before, hwm);
        FT_CHECK(hwm - before < 16 * 1024);
    }

    join_last(4, "world 3 with a secret");
    su_cases_free(&g_cs);
}

/* put_head writes a cluster message header: FTCL, type, rank 0, seq 0. */
static void put_head(unsigned char *b, int type)
{
    memset(b, 0, 16);
    memcpy(b, "FTCL", 4);
    b[4] = (unsigned char)type;
}

/* recv_type receives on sk until a message of type comes (a rank repeats
 * its registration until answered); exits after 10 s. */
static void recv_type(nng_socket sk, int type)
{
    double t0 = ft_test_now();
    while (ft_test_now() - t0 < 10.0) {
        void *m;
        size_t len;
        if (nng_recv(sk, &m, &len, NNG_FLAG_ALLOC) != 0)
            continue;
        int t = len >= 16 && !memcmp(m, "FTCL", 4) ? ((unsigned char *)m)[4]
                                                    : -1;
        nng_free(m, len);
        if (t == type)
            return;
    }
    fprintf(stderr, "no message of type %d within 10 s\n", type);
    exit(1);
}

static void case_leave(void)
{
    make_lib();
    split(3);
    write_conf("l0.conf", "m3.ftm", 0, 2, 8, NULL);
    write_conf("l1.conf", "m3.ftm", 1, 2, 8, NULL);

    /* The test is the coordinator of rank 1 of 2 (shards 1..2), which
     * sleeps 1 s after each message it serves.  It answers a PING (it now
     * sleeps), gets a BYE, and the connection closes 200 ms later: by the
     * time it looks, its transport read the BYE and saw the close. */
    {
        nng_socket sk;
        FT_CHECK(nng_pair1_open(&sk) == 0);
        nng_socket_set_ms(sk, NNG_OPT_RECVTIMEO, 500);
        nng_socket_set_ms(sk, NNG_OPT_SENDTIMEO, 5000);
        char boot[300];
        snprintf(boot, sizeof boot, "ipc://%s/boot.sock", g_dir);
        FT_CHECK(nng_listen(sk, boot, NULL, 0) == 0);
        setenv("FT_CLUSTER_TEST_SLOW_MS", "1000", 1);
        start_rank(1, 1, "l1.conf");
        unsetenv("FT_CLUSTER_TEST_SLOW_MS");
        recv_type(sk, 1); /* REG */
        /* SESSION: world 2, 3 shards, blocks 0..0 and 1..2, no NCCL id */
        unsigned char ses[16 + 4 * 6 + 1] = {0};
        put_head(ses, 2);
        ses[16] = 2;
        ses[20] = 3;
        ses[28] = 1; /* rank 0: first 0, count 1 */
        ses[32] = 1;
        ses[36] = 2; /* rank 1: first 1, count 2 */
        FT_CHECK(nng_send(sk, ses, sizeof ses, 0) == 0);
        expect_log("log1", "cluster: rank 1: session started");
        unsigned char h[16];
        put_head(h, 11); /* PING */
        FT_CHECK(nng_send(sk, h, sizeof h, 0) == 0);
        recv_type(sk, 12); /* PONG: it sleeps now */
        put_head(h, 10); /* BYE */
        FT_CHECK(nng_send(sk, h, sizeof h, 0) == 0);
        th_sleep_ms(200);
        nng_close(sk);
        FT_CHECK_EQ_U64(wait_exit(1, 10000), 0);
        expect_log("log1", "cluster: rank 1: the coordinator left");
        FT_CHECK(!file_has("log1", "connection was lost"));
    }

    /* Rank 1 stopped (as a rank starved of CPU) when rank 0 gets SIGTERM:
     * rank 0 does not close while rank 1 holds its connection; resumed,
     * rank 1 reads the BYE and leaves, then rank 0 exits, both 0. */
    start_rank(1, 1, "l1.conf");
    start_rank(0, 0, "l0.conf");
    ft_client *c = connect_coord();
    check_answers(c, 8, "world 2 before the leave");
    ft_client_close(c);
    kill(g_pid[1], SIGSTOP);
    kill(g_pid[0], SIGTERM);
    FT_CHECK(th_wait_exit(&g_pid[0], 700) == -1);
    kill(g_pid[1], SIGCONT);
    FT_CHECK_EQ_U64(wait_exit(1, 10000), 0);
    FT_CHECK_EQ_U64(wait_exit(0, 10000), 0);
    expect_log("log1", "cluster: rank 1: the coordinator left");
    FT_CHECK(!file_has("log1", "connection was lost"));
    FT_CHECK(!file_has("log", "after the BYE; closing anyway"));

    /* Rank 0 killed: no BYE; the connection was lost, exit 1. */
    start_rank(1, 1, "l1.conf");
    start_rank(0, 0, "l0.conf");
    c = connect_coord();
    check_answers(c, 8, "world 2 before the kill");
    ft_client_close(c);
    kill(g_pid[0], SIGKILL);
    FT_CHECK_EQ_U64(wait_exit(0, 5000), 128 + SIGKILL);
    FT_CHECK_EQ_U64(wait_exit(1, 10000), 1);
    expect_log("log1", "cluster: rank 1: the coordinator's connection was "
                       "lost");
    expect_log("log1", "cluster rank 1 stopped: ");
    su_cases_free(&g_cs);
}

int main(int argc, char **argv)
{
    g_bin = getenv("FT_BIN");
    if (argc != 2 || g_bin == NULL) {
        fprintf(stderr, "usage: FT_BIN=flashtrie cluster_test "
                "equal|kill|stall|bootstrap|secret|leave\n");
        return 2;
    }
    snprintf(g_dir, sizeof g_dir, "/tmp/ft_cluster_%ld", (long)getpid());
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", g_dir, g_dir);
    FT_CHECK(system(cmd) == 0);
    atexit(cleanup);
    if (!strcmp(argv[1], "equal"))
        case_equal();
    else if (!strcmp(argv[1], "kill"))
        case_kill();
    else if (!strcmp(argv[1], "stall"))
        case_stall();
    else if (!strcmp(argv[1], "bootstrap"))
        case_bootstrap();
    else if (!strcmp(argv[1], "secret"))
        case_secret();
    else if (!strcmp(argv[1], "leave"))
        case_leave();
    else {
        fprintf(stderr, "cluster_test: unknown case %s\n", argv[1]);
        return 2;
    }
    printf("cluster_test %s: ok\n", argv[1]);
    return 0;
}
