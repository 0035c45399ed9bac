/*
 * fault_test.c - "flashtrie serve" under load and under misbehaving
 * clients.  One executable, one case per argument:
 *   load_ipc   flashtrie loadtest over ipc:// for 5 s, 16 clients, good,
 *              bad and oversize messages: exit 0 (every answer right), RSS
 *              growth after the warm-up under 20%, nothing left in flight
 *   load_tcp   the same over tcp://127.0.0.1
 *   load_coalesce the same over ipc://, every client's searches through
 *              one handle of coalesce 4 (good and bad requests of
 *              different clients sharing frames)
 *   faults     clients that disconnect mid-request or send half a
 *              message (at the transport: a length prefix, then less than
 *              it says), a truncated frame: meanwhile and afterwards
 *              another client gets every answer right and in time, INFO
 *              shows nothing in flight, and SIGTERM exits 0 within the
 *              drain timeout
 *   slow_reader  the same checks around readers that send 200 requests
 *              each and read nothing for 2 s (expected to fail today:
 *              they stall every other client while connected, and the
 *              server then hangs in nng_close at SIGTERM; see
 *              docs/RELIABILITY.md)
 * Servers listen on ipc:// in a temporary folder or on 127.0.0.1 at a port
 * derived from the pid, and are stopped by the case (killed at exit when a
 * check failed first).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>

#include "flashtrie/internal/buf.h"
#include "flashtrie_client.h"
#include "frame.h"
#include "ft_test.h"
#include "serve_harness.h"
#include "test_net.h"

static char g_dir[256];
static pid_t g_pid;
static const char *g_bin;

static void cleanup(void) { th_kill(&g_pid, g_dir, "fault_test"); }

static void start_server(const char *url, const char *const *args)
{
    th_start(&g_pid, g_bin, g_dir, url, args);
}

/* stop_server sends SIGTERM and returns the exit status; *ms gets how
 * long the server took to exit.  15 s is past every drain timeout the
 * cases set (5 s, and the default 10 s): a server still there has hung. */
static int stop_server(double *ms)
{
    return th_stop(&g_pid, SIGTERM, 15000, ms);
}

/* file_has says whether a line of the file at path holds s. */
static int file_has(const char *path, const char *s)
{
    return th_count_lines(NULL, path, s) > 0;
}

/* log_count counts the lines of the server's log that hold s. */
static int log_count(const char *s)
{
    return th_count_lines(g_dir, "log", s);
}

/* info_num reads INFO's field key at url: a connection refused at
 * max_connections (before the server saw an earlier one close) is tried
 * again for up to 2 s, as a client of such a server would. */
static long long info_num(const char *url, const char *key)
{
    return tn_info_num(url, key, 5000, 40);
}

/* run_loadtest runs "flashtrie loadtest ..." (lt) with its report in out:
 * it must exit 0 with every answer right, none wrong and nothing left in
 * flight on the server; else its report is shown and the test fails. */
static void run_loadtest(const char *const *lt, const char *out)
{
    int rc = th_run(g_bin, lt, out);
    if (rc != 0 || !file_has(out, "result: every answer right") ||
        !file_has(out, " 0 wrong, ") ||
        !file_has(out, "server in_flight after the run: 0")) {
        fprintf(stderr, "loadtest exited %d:\n", rc);
        th_show_file(NULL, out, 0);
        exit(1);
    }
}

/* ---- load ---- */

/* case_load: good, bad and oversize traffic from 16 clients over ipc://
 * or tcp:// (tcp), or over ipc:// with every client's searches through
 * one coalescing handle (coalesce: good and bad requests of different
 * clients sharing frames), every answer right. */
static void case_load(int tcp, int coalesce)
{
    char idx[300], url[300], out[300], pidbuf[32];
    th_make_library(g_bin, g_dir, 5000, idx, sizeof idx);
    if (tcp)
        snprintf(url, sizeof url, "tcp://127.0.0.1:%d",
                 20000 + (int)(getpid() % 20000));
    else
        snprintf(url, sizeof url, "ipc://%s/sock", g_dir);
    const char *args[] = {"--index", idx, "--listen", url, "--engine", "cpu",
                          "--threads", "1", "--max-message-bytes", "65536",
                          NULL};
    start_server(url, args);
    snprintf(out, sizeof out, "%s/loadtest.out", g_dir);
    snprintf(pidbuf, sizeof pidbuf, "%ld", (long)g_pid);
    /* Under AddressSanitizer the server's RSS measures ASan's quarantine of
     * freed memory (up to 256 MB), not the server: LeakSanitizer checks
     * the leaks there, and the RSS bound applies to normal builds. */
#if defined(__SANITIZE_ADDRESS__)
    const char *growth = "100000";
#else
    const char *growth = "20";
#endif
    const char *lt[] = {"loadtest", "--url", url, "--index", idx,
                        "--clients", "16", "--seconds", "5", "--beam", "16",
                        "--mix", "good,bad,oversize",
                        "--server-pid", pidbuf, "--max-rss-growth", growth,
                        "--seed", "11", coalesce ? "--coalesce" : NULL, "4",
                        NULL};
    run_loadtest(lt, out);
    FT_CHECK(file_has(out, "oversize "));
    FT_CHECK(file_has(out, "bad.results0 "));
    if (coalesce)
        FT_CHECK(file_has(out, "searches through one handle of coalesce 4"));
    double ms;
    FT_CHECK_EQ_U64(stop_server(&ms), 0);
}

/* kind_row reads "KIND sent right wrong busy" from the loadtest's
 * table. */
static void kind_row(const char *path, const char *kind, long long v[4])
{
    FILE *f = fopen(path, "r");
    FT_CHECK(f != NULL);
    char line[512], name[64];
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = sscanf(line, "%63s %lld %lld %lld %lld", name, &v[0], &v[1],
                       &v[2], &v[3]) == 5 && !strcmp(name, kind);
    fclose(f);
    FT_CHECK(found);
}

/* case_hostile: the loadtest's hostile mix (issue 39): frames of about
 * max_message_bytes, half messages and idle connections beside the good
 * and bad traffic; every good answer right, every half and idle
 * connection closed by the server (idle_timeout_ms 2000), none answered.
 * The timeout is well above the good clients' pauses even on a loaded
 * host: a request sent as its idle connection is closed is lost with it.
 * The mix can leave the ipc listener in nng 1.5.2's wedge (its bug
 * #1518): the server probes it every second and restarts it after two
 * failed probes, and the loadtest asks its INFO after the run again
 * until it is answered (up to 20 s).
 * The server's peak RSS (VmHWM) stays under 64 MiB (measured 23-31 MiB;
 * the bound is the loadtest's --max-peak-rss-mb, not checked under
 * AddressSanitizer, whose quarantine is no measure of the server). */
static void case_hostile(int maxconn)
{
    char idx[300], url[300], out[300], pidbuf[32];
    th_make_library(g_bin, g_dir, 5000, idx, sizeof idx);
    snprintf(url, sizeof url, "ipc://%s/sock", g_dir);
    /* maxconn: a server of 48 connections; the 8 clients keep their half
     * and idle connections within it (2 each beside their 3 others), so
     * the server refuses none (a refusal closes a connection at once: a
     * half message being written would fail) */
    const char *args[] = {"--index", idx, "--listen", url, "--engine", "cpu",
                          "--threads", "1", "--max-message-bytes", "65536",
                          "--idle-timeout-ms", "2000",
                          "--probe-interval-ms", "1000",
                          maxconn ? "--max-connections" : NULL, "48", NULL};
    start_server(url, args);
    snprintf(out, sizeof out, "%s/loadtest.out", g_dir);
    snprintf(pidbuf, sizeof pidbuf, "%ld", (long)g_pid);
    const char *lt[] = {"loadtest", "--url", url, "--index", idx,
                        "--clients", "8", "--seconds", "4", "--beam", "16",
                        "--mix", "good,bad,oversize,hostile",
                        "--server-pid", pidbuf, "--seed", "12",
#if !defined(__SANITIZE_ADDRESS__)
                        "--max-peak-rss-mb", "64",
#endif
                        NULL};
    /* The hostile mix can meet nng 1.5.2's ipc wedge (a client that hangs
     * up in the handshake): a loadtest client stranded by it is a pipe
     * nng never frees, so the loadtest runs without the leak check (its
     * other cases keep it). */
    char *leaks = th_leaks_off();
    run_loadtest(lt, out);
    th_leaks_restore(leaks);
    FT_CHECK(file_has(out, "server peak rss (VmHWM, kB): "));
    long long half[4], idle[4], maxsz[4];
    kind_row(out, "half", half);
    kind_row(out, "idle", idle);
    kind_row(out, "maxsize", maxsz);
    FT_CHECK(half[0] > 0 && idle[0] > 0 && maxsz[0] > 0);
    FT_CHECK(half[1] == half[0] && idle[1] == idle[0] && maxsz[1] == maxsz[0]);
    /* The server closed them (its count; the loadtest's own connections
     * may idle out too, so at least). */
    FT_CHECK(info_num(url, "connections_idle_closed") >= half[0] + idle[0]);
    FT_CHECK_EQ_U64(info_num(url, "connections_refused"), 0);
    double ms;
    FT_CHECK_EQ_U64(stop_server(&ms), 0);
}

/* case_maxsize_lowered: the maxsize kind against a server whose receive
 * limit comes down for its connections (memory_budget_bytes 8 MiB: half
 * of it shared by ~17-34 connections, ~120-230 KiB each, under the 1 MiB
 * max_message_bytes).  The loadtest cuts its frames to the limit in force
 * (INFO's receive_limit_bytes): every one is read whole and answered
 * ERROR, or closed unread as the limit came down further; none is wrong
 * (before the cut, every one was closed unread and counted wrong). */
static void case_maxsize_lowered(void)
{
    char idx[300], url[300], out[300];
    th_make_library(g_bin, g_dir, 5000, idx, sizeof idx);
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", tn_free_port());
    const char *args[] = {"--index", idx, "--listen", url, "--engine", "cpu",
                          "--threads", "1", "--max-message-bytes", "1048576",
                          "--memory-budget-bytes", "8388608", NULL};
    start_server(url, args);
    snprintf(out, sizeof out, "%s/loadtest.out", g_dir);
    const char *lt[] = {"loadtest", "--url", url, "--index", idx,
                        "--clients", "16", "--seconds", "3", "--beam", "16",
                        "--mix", "good:4,maxsize:1", "--seed", "13", NULL};
    run_loadtest(lt, out);
    long long mx[4];
    kind_row(out, "maxsize", mx);
    FT_CHECK(mx[0] > 0 && mx[1] == mx[0] && mx[2] == 0 && mx[3] == 0);
    /* "maxsize: CUT of SENT cut to the receive limit ..., OVER closed
     * unread as it came down further" */
    FILE *f = fopen(out, "r");
    FT_CHECK(f != NULL);
    char line[512];
    long long cut = -1, of = -1, over = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "maxsize: %lld of %lld cut to the receive limit",
                   &cut, &of) == 2) {
            char *c = strstr(line, "), ");
            FT_CHECK(c != NULL && sscanf(c, "), %lld closed unread", &over) == 1);
            break;
        }
    fclose(f);
    FT_CHECK_EQ_U64(of, mx[0]);
    FT_CHECK(cut > 0 && cut <= of && over >= 0 && over <= of);
    FT_CHECK(info_num(url, "receive_limit_lowered") > 0);
    FT_CHECK(info_num(url, "status.protocol") >= mx[0] - over);

    /* A client's request over the lowered limit (24 other connections
     * open: ~170 KiB each; the request 512 KiB, under max_message_bytes)
     * is closed unread, and the client's error says why that may be. */
    enum { OTHERS = 24, BT = 16, BK = 4096 };
    ft_client *others[OTHERS], *big;
    char err[1024];
    for (int i = 0; i < OTHERS; i++)
        FT_CHECK(ft_client_connect(&others[i], url, NULL, err, sizeof err) ==
                 FT_OK);
    FT_CHECK(ft_client_connect(&big, url, NULL, err, sizeof err) == FT_OK);
    for (int t = 0; t < 100 && info_num(url, "receive_limit_bytes") >=
                                   (long long)BT * BK * 8; t++)
        th_sleep_ms(10);
    FT_CHECK(info_num(url, "receive_limit_bytes") < (long long)BT * BK * 8);
    uint32_t *tok = malloc(sizeof(uint32_t) * BT * BK);
    float *lp = malloc(sizeof(float) * BT * BK);
    FT_CHECK(tok != NULL && lp != NULL);
    for (int i = 0; i < BT * BK; i++) {
        tok[i] = (uint32_t)(i % BK);
        lp[i] = -(float)(i % BK) / 1024.0f;
    }
    ft_request q;
    ft_request_init(&q);
    q.T = BT;
    q.K = BK;
    q.tokens = tok;
    q.logp = lp;
    q.beam = 8;
    ft_client_results *res = NULL;
    err[0] = 0;
    int rc = ft_client_search(big, &q, 1, &res, err, sizeof err);
    if (rc != FT_ECONN || strstr(err, "connection lost: no answer to SEARCH "
                                      "(the request was ") == NULL ||
        strstr(err, "receive_limit_bytes)") == NULL) {
        fprintf(stderr, "big request: rc %d, '%s'\n", rc, err);
        exit(1);
    }
    /* The others were not hurt: one of them still searches. */
    q.T = 2;
    q.K = 4;
    FT_CHECK(ft_client_search(others[0], &q, 1, &res, err, sizeof err) ==
             FT_OK);
    FT_CHECK_EQ_U64(ft_client_results_count(res), 1);
    FT_CHECK_EQ_U64(ft_client_results_get(res, 0)->status, FT_OK);
    ft_client_results_free(res);
    free(tok);
    free(lp);
    ft_client_close(big);
    for (int i = 0; i < OTHERS; i++)
        ft_client_close(others[i]);
    double ms;
    FT_CHECK_EQ_U64(stop_server(&ms), 0);
}

/* ---- faults ---- */

typedef struct checker {
    const char *url;
    ft_request reqs[8];
    ft_result want[8];
    atomic_int stop;
    atomic_int phase; /* which fault goes on: the worst call per phase */
    int calls, wrong;
    double worst_s, worst_phase[4];
} checker;

/* same: an answer is the engine's here, bit for bit (sigma too). */
static int same(const ft_result *a, const ft_result *b)
{
    return th_same_result(a, b, 1);
}

/* checker_main is the well-behaved client: it searches all the time the
 * faults go on, every answer checked, and keeps the slowest call. */
static void *checker_main(void *arg)
{
    checker *ck = arg;
    ft_client_opts o;
    ft_client_opts_init(&o);
    o.timeout_ms = 5000;
    ft_client *c;
    FT_PASS(ft_client_connect(&c, ck->url, &o, NULL, 0));
    for (int i = 0; !atomic_load(&ck->stop) && i < 100000; i++) {
        int k = i % 8;
        ft_client_results *r;
        char err[256];
        double t0 = ft_test_now();
        int rc = ft_client_search(c, &ck->reqs[k], 1, &r, err, sizeof err);
        double dt = ft_test_now() - t0;
        if (dt > ck->worst_s)
            ck->worst_s = dt;
        int ph = atomic_load(&ck->phase);
        if (dt > ck->worst_phase[ph])
            ck->worst_phase[ph] = dt;
        ck->calls++;
        if (rc != FT_OK) {
            fprintf(stderr, "checker: %s\n", err);
            ck->wrong++;
            continue;
        }
        if (!same(ft_client_results_get(r, 0), &ck->want[k]))
            ck->wrong++;
        ft_client_results_free(r);
    }
    ft_client_close(c);
    return NULL;
}

/* ask sends the first len bytes of b on the raw REQ socket s and decodes
 * the reply into m; the send, the receive and the decoding must succeed. */
static void ask(nng_socket s, const ft_buf *b, size_t len, ft_frame_msg *m)
{
    FT_CHECK(nng_send(s, b->data, len, 0) == 0);
    char *r;
    size_t rl;
    FT_CHECK(nng_recv(s, &r, &rl, NNG_FLAG_ALLOC) == 0);
    char err[256];
    FT_PASS(ft_frame_decode(m, r, rl, 0, err, sizeof err));
    nng_free(r, rl);
}

static void case_faults(int strict)
{
    char idx[300], url[320], path[300];
    th_make_library(g_bin, g_dir, 5000, idx, sizeof idx);
    snprintf(path, sizeof path, "%s/sock", g_dir);
    snprintf(url, sizeof url, "ipc://%s", path);
    /* A slow engine (2 ms a batch) keeps requests in flight long enough
     * for the clients below to leave in the middle of them. */
    const char *args[] = {"--index", idx, "--listen", url, "--engine", "cpu",
                          "--threads", "1", "--test-delay-us", "2000",
                          "--drain-timeout-ms", "5000", "--contexts", "16",
                          NULL};
    start_server(url, args);

    /* The good requests and their answers, from the engine here. */
    ft_library *lib;
    FT_PASS(ft_library_open(&lib, idx, 0, NULL, 0));
    ft_searcher_opts so;
    ft_searcher_opts_init(&so);
    so.engine.kind = FT_ENGINE_CPU;
    so.engine.threads = 1;
    ft_searcher *eng;
    FT_PASS(ft_searcher_open(&eng, lib, &so, NULL, 0));
    static checker ck;
    ck.url = url;
    static uint32_t tok[8][4 * 64];
    static float lp[8][4 * 64];
    uint64_t seed = 3;
    for (int k = 0; k < 8; k++) {
        ft_request *r = &ck.reqs[k];
        ft_request_init(r);
        r->T = 4;
        r->K = 64;
        r->beam = 32;
        for (uint32_t i = 0; i < r->T * r->K; i++) {
            /* Distinct tokens per position: the library's small tokens
             * (its keys start with low Zipf ranks) plus a random offset. */
            tok[k][i] = (i % r->K) + (uint32_t)(ft_test_rand(&seed) % 4) *
                                         r->K;
            lp[k][i] = -(float)(ft_test_rand(&seed) % 1000) / 100.0f;
        }
        /* Keep the tokens of a position distinct. */
        for (uint32_t t = 0; t < r->T; t++)
            for (uint32_t i = 0; i < r->K; i++)
                tok[k][t * r->K + i] = i * 4 + (uint32_t)(k % 4);
        r->tokens = tok[k];
        r->logp = lp[k];
        FT_PASS(ft_result_alloc(&ck.want[k], 32, 64));
        FT_PASS(ft_searcher_search_batch(eng, r, 1, &ck.want[k]));
        FT_PASS(ck.want[k].status);
    }
    int hits = 0;
    for (int k = 0; k < 8; k++)
        hits += (int)ck.want[k].n;
    FT_CHECK(hits > 0); /* the checks below compare real answers */

    pthread_t th;
    FT_CHECK(pthread_create(&th, NULL, checker_main, &ck) == 0);
    ft_buf good;
    ft_buf_init(&good);
    FT_PASS(ft_frame_encode_search(&good, 1, 0, &ck.reqs[0], NULL, 1));

    /* FT_FAULT_PHASES (a bit mask, default all) runs some of the faults
     * only: to find which one a failure comes from. */
    const char *pe = getenv("FT_FAULT_PHASES");
    unsigned phases = pe ? (unsigned)strtoul(pe, NULL, 0) : strict ? 4u : 3u;
    /* 1. Clients that send a request and close before the answer. */
    for (int i = 0; i < 40 && (phases & 1); i++) {
        nng_socket s = tn_req_dial(url, 5000, 0);
        FT_CHECK(nng_send(s, good.data, good.len, 0) == 0);
        if (i % 2)
            th_sleep_ms(1);
        nng_close(s);
    }
    /* ...and the same at the transport: the whole request written, the
     * socket closed at once. */
    for (int i = 0; i < 20 && (phases & 1); i++) {
        int fd = tn_ipc_connect(path);
        FT_CHECK(tn_ipc_req(fd, (uint32_t)i, good.data, good.len,
                            good.len) == 0);
        close(fd);
    }

    atomic_store(&ck.phase, 1);
    /* 2. Half a message: the length prefix says more than comes, and the
     * connection then stays open, silent, for a second; eight at once. */
    int half[8], n_half = phases & 2 ? 8 : 0;
    for (int i = 0; i < n_half; i++) {
        half[i] = tn_ipc_connect(path);
        FT_CHECK(tn_ipc_req(half[i], (uint32_t)i, good.data, good.len / 2,
                            good.len) == 0);
    }
    /* A truncated frame in a whole message gets its ERROR, and the socket
     * still works. */
    {
        nng_socket s = tn_req_dial(url, 5000, 0);
        char want[256];
        ft_frame_msg m, l;
        ft_frame_msg_init(&m);
        ft_frame_msg_init(&l);
        FT_FAIL(ft_frame_decode(&l, good.data, good.len - 7, 0, want,
                                sizeof want), FT_EPROTO);
        ask(s, &good, good.len - 7, &m);
        FT_CHECK_EQ_U64(m.hdr.type, FT_FRAME_ERROR);
        FT_CHECK_EQ_U64(m.status, FT_EPROTO);
        FT_CHECK_STR(m.text, want);
        ask(s, &good, good.len, &m);
        FT_CHECK_EQ_U64(m.hdr.type, FT_FRAME_RESULT);
        FT_CHECK(same(&m.res[0], &ck.want[0]));
        ft_frame_msg_free(&m);
        ft_frame_msg_free(&l);
        nng_close(s);
    }
    th_sleep_ms(1000);
    for (int i = 0; i < n_half; i++)
        close(half[i]);

    atomic_store(&ck.phase, 2);
    /* 3. Slow readers: 4 connections each send 200 requests back to back
     * (far more than the server's 16 contexts) and read nothing for two
     * seconds, while the answers pile up towards them. */
    int slow[4];
    int sent = 0, n_slow = phases & 4 ? 4 : 0;
    for (int i = 0; i < n_slow; i++) {
        slow[i] = tn_ipc_connect(path);
        /* The writes stop when the server stops reading (its answers
         * unread): a timeout, not a hang, then the rest is not sent. */
        tn_set_timeouts(slow[i], 300);
        for (int j = 0; j < 200; j++) {
            if (tn_ipc_req(slow[i], (uint32_t)(i * 1000 + j), good.data,
                        good.len, good.len) != 0)
                break;
            sent++;
        }
    }
    fprintf(stderr, "slow readers: %d requests written\n", sent);
    FT_CHECK(n_slow == 0 || sent >= 16);
    th_sleep_ms(n_slow ? 2000 : 0);
    /* Read back what came for one of them, to see the server answered
     * it at all; then close them all. */
    if (n_slow) {
        char buf[65536];
        tn_set_timeouts(slow[0], 2000);
        ssize_t got = read(slow[0], buf, sizeof buf);
        FT_CHECK(got > 13);
        FT_CHECK_EQ_U64((unsigned char)buf[0], 1);
    }
    for (int i = 0; i < n_slow; i++)
        close(slow[i]);

    /* The well-behaved client kept being answered right, in time. */
    atomic_store(&ck.phase, 3);
    th_sleep_ms(500);
    atomic_store(&ck.stop, 1);
    pthread_join(th, NULL);
    fprintf(stderr, "checker: %d calls, %d wrong, slowest %.1f ms (while "
            "clients left mid-request %.1f, sent half messages %.1f, read "
            "nothing %.1f, after %.1f)\n", ck.calls, ck.wrong,
            ck.worst_s * 1000.0, ck.worst_phase[0] * 1000.0,
            ck.worst_phase[1] * 1000.0, ck.worst_phase[2] * 1000.0,
            ck.worst_phase[3] * 1000.0);
    FT_CHECK(ck.calls > 50);
    FT_CHECK_EQ_U64(ck.wrong, 0);
    /* Leaving mid-request and half messages hold nothing: the other
     * client is never kept waiting long. */
    FT_CHECK(ck.worst_phase[0] < 2.0);
    FT_CHECK(ck.worst_phase[1] < 2.0);
    /* Readers that never read would hold the contexts their answers
     * wait on (4 x 200 requests, 16 contexts); the server closes a
     * connection whose reply waits a second, so nobody else waits. */
    FT_CHECK(ck.worst_phase[2] < 2.0 && ck.worst_phase[3] < 2.0);

    /* Nothing is left in flight (INFO counts itself), and a new client
     * is answered right. */
    long long inflight = -1;
    for (int i = 0; i < 100; i++) {
        inflight = info_num(url, "in_flight");
        if (inflight == 1)
            break;
        th_sleep_ms(20);
    }
    FT_CHECK_EQ_U64(inflight, 1);
    FT_CHECK_EQ_U64(info_num(url, "draining"), 0);
    {
        ft_client *c;
        FT_PASS(ft_client_connect(&c, url, NULL, NULL, 0));
        for (int k = 0; k < 8; k++) {
            ft_client_results *r;
            FT_PASS(ft_client_search(c, &ck.reqs[k], 1, &r, NULL, 0));
            FT_CHECK(same(ft_client_results_get(r, 0), &ck.want[k]));
            ft_client_results_free(r);
        }
        ft_client_close(c);
    }
    double ms;
    FT_CHECK_EQ_U64(stop_server(&ms), 0);
    fprintf(stderr, "drained and exited in %.0f ms\n", ms);
    FT_CHECK(ms < 5000 + 1000);
    for (int k = 0; k < 8; k++)
        ft_result_free(&ck.want[k]);
    ft_buf_free(&good);
    ft_searcher_close(eng);
    ft_library_close(lib);
}

/* ---- connections: max_connections, idle_timeout_ms, ipc_mode ---- */

/* info_open is connections_opened - connections_closed of one INFO: the
 * connections open besides the INFO's own, plus one. */
static long long info_open(const char *url)
{
    /* refused at max_connections: retried, as info_num */
    char *info = tn_info(url, 5000, 40);
    long long v = tn_info_value(info, "\nconnections_opened: ") -
                  tn_info_value(info, "\nconnections_closed: ");
    free(info);
    return v;
}

static void case_conns(void)
{
    char idx[300], url[320], path[300], aurl[320];
    th_make_library(g_bin, g_dir, 500, idx, sizeof idx);
    snprintf(path, sizeof path, "%s/sock", g_dir);
    snprintf(url, sizeof url, "ipc://%s", path);
    /* A second listener for the test's INFOs: max_connections counts per
     * listener, so they never take one of the first's 3. */
    snprintf(aurl, sizeof aurl, "ipc://%s/info", g_dir);
    /* 3 connections, 1.5 s of idling, batches held 2 s (longer than that:
     * a connection waiting for its answer is not idle). */
    const char *args[] = {"--index", idx, "--listen", url, "--listen", aurl,
                          "--engine", "cpu",
                          "--threads", "1", "--max-connections", "3",
                          "--idle-timeout-ms", "1500",
                          "--probe-interval-ms", "0", NULL};
    /* The unit's UMask=0027 took the group's write permission away, so
     * it could not connect: ipc_mode (default 0660) sets the mode. */
    mode_t old = umask(027);
    start_server(url, args);
    umask(old);
    struct stat st;
    FT_CHECK(stat(path, &st) == 0);
    FT_CHECK_EQ_U64(st.st_mode & 0777, 0660);
    /* The start-up ping's connection and the INFOs' are gone. */
    long long open_now = 0;
    for (int t = 0; t < 200 && (open_now = info_open(aurl)) != 1; t++)
        th_sleep_ms(10);
    FT_CHECK_EQ_U64(open_now, 1);
    th_sleep_ms(500); /* the INFO's own: its close reaches the server */

    double t0 = ft_test_now();
    int held[3];
    held[0] = tn_ipc_connect(path); /* handshake, then nothing */
    held[1] = tn_ipc_connect(path);
    held[2] = tn_ipc_connect(path); /* half a message */
    FT_CHECK(tn_ipc_req(held[2], 1, "0123456789", 10, 100) == 0);
    /* All three admitted (nng's ADD_PRE ran for each: the order in which
     * it handles their handshakes is its own) before any more come. */
    for (int t = 0; t < 500 && (open_now = info_open(aurl)) != 4; t++)
        th_sleep_ms(10);
    FT_CHECK_EQ_U64(open_now, 4);
    /* Three more: each closed at once, no answer; one log line. */
    for (int i = 0; i < 3; i++) {
        int fd = tn_ipc_connect(path);
        if (!tn_closed_within(fd, 3000, NULL)) {
            fprintf(stderr, "extra connection %d not closed (refused %lld, "
                    "held 2 open: %d); the log:\n", i,
                    info_num(aurl, "connections_refused"),
                    !tn_closed_within(held[2], 10, NULL));
            th_show_file(g_dir, "log", 0);
            exit(1);
        }
        close(fd);
    }
    FT_CHECK_EQ_U64(log_count("max_connections is 3: refusing new "
                              "connections (one line per burst"), 1);
    /* The held ones: closed after 1.5 s without a message, not before. */
    for (int i = 0; i < 3; i++) {
        double at;
        FT_CHECK(tn_closed_within(held[i], 7000, &at));
        fprintf(stderr, "held connection %d closed after %.2f s\n", i,
                at - t0);
        FT_CHECK(at - t0 >= 1.4);
        FT_CHECK(at - t0 < 7.0); /* the extra connections above may take up to 3 s on a loaded host */
        close(held[i]);
    }
    /* The line follows the closes. */
    for (int t = 0; t < 100 && !log_count("that completed no message "
                                          "for 1500 ms (idle_timeout_ms)");
         t++)
        th_sleep_ms(10);
    FT_CHECK(log_count("that completed no message for 1500 ms "
                       "(idle_timeout_ms)") >= 1);
    FT_CHECK_EQ_U64(info_num(aurl, "connections_refused"), 3);
    FT_CHECK_EQ_U64(info_num(aurl, "connections_idle_closed"), 3);
    /* A client whose pauses between messages are shorter than the idle
     * timeout keeps its connection, however long it lives. */
    ft_client *c;
    ft_client_opts o;
    ft_client_opts_init(&o);
    o.timeout_ms = 10000;
    FT_PASS(ft_client_connect(&c, url, &o, NULL, 0));
    FT_PASS(ft_client_ping(c, NULL, 0));
    th_sleep_ms(700);
    FT_PASS(ft_client_ping(c, NULL, 0));
    th_sleep_ms(1000); /* 1.7 s since the first, 1.0 s since the last */
    FT_PASS(ft_client_ping(c, NULL, 0));
    FT_CHECK_EQ_U64(info_num(aurl, "connections_idle_closed"), 3);
    ft_client_close(c);
    double ms;
    FT_CHECK_EQ_U64(stop_server(&ms), 0);
}

/* case_slow_answer: an answer that takes longer than idle_timeout_ms (a
 * batch held 1.2 s by the test hook, idle after 0.5 s) does not cost the
 * connection waiting for it. */
static void case_slow_answer(void)
{
    char idx[300], url[320], path[300];
    th_make_library(g_bin, g_dir, 500, idx, sizeof idx);
    snprintf(path, sizeof path, "%s/sock", g_dir);
    snprintf(url, sizeof url, "ipc://%s", path);
    const char *args[] = {"--index", idx, "--listen", url, "--engine", "cpu",
                          "--threads", "1", "--idle-timeout-ms", "500",
                          "--test-delay-us", "1200000",
                          "--probe-interval-ms", "0", NULL};
    start_server(url, args);
    int fd = tn_ipc_connect(path);
    ft_buf b;
    ft_buf_init(&b);
    const char *line = "{\"tokens\": [[1]], \"logp\": [[-1]]}";
    FT_CHECK(tn_ipc_req(fd, 7, line, strlen(line), strlen(line)) == 0);
    tn_set_timeouts(fd, 5000);
    unsigned char ans[512];
    ssize_t n = read(fd, ans, sizeof ans);
    FT_CHECK(n > 13);     /* the answer came: header, id, a JSON line */
    FT_CHECK(ans[0] == 1);
    FT_CHECK(memchr(ans + 13, '{', (size_t)n - 13) != NULL);
    FT_CHECK_EQ_U64(info_num(url, "connections_idle_closed"), 0);
    /* Then, owed nothing, it idles out. */
    FT_CHECK(tn_closed_within(fd, 3000, NULL));
    close(fd);
    /* The count follows the close. */
    for (int t = 0; t < 100 && info_num(url, "connections_idle_closed") != 1;
         t++)
        th_sleep_ms(10);
    FT_CHECK_EQ_U64(info_num(url, "connections_idle_closed"), 1);
    ft_buf_free(&b);
    double ms;
    FT_CHECK_EQ_U64(stop_server(&ms), 0);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: fault_test load_ipc|load_tcp|load_coalesce|faults|slow_reader\n");
        return 2;
    }
    g_bin = th_setup("fault_test", g_dir, sizeof g_dir, cleanup);
    if (!strcmp(argv[1], "load_ipc")) case_load(0, 0);
    else if (!strcmp(argv[1], "load_tcp")) case_load(1, 0);
    else if (!strcmp(argv[1], "load_coalesce")) case_load(0, 1);
    else if (!strcmp(argv[1], "faults")) case_faults(0);
    else if (!strcmp(argv[1], "slow_reader")) case_faults(1);
    else if (!strcmp(argv[1], "conns")) case_conns();
    else if (!strcmp(argv[1], "load_hostile")) case_hostile(0);
    else if (!strcmp(argv[1], "load_hostile_maxconn")) case_hostile(1);
    else if (!strcmp(argv[1], "maxsize_lowered")) case_maxsize_lowered();
    else if (!strcmp(argv[1], "slow_answer")) case_slow_answer();
    else {
        fprintf(stderr, "fault_test: unknown case %s\n", argv[1]);
        return 2;
    }
    printf("fault_test %s: ok\n", argv[1]);
    return 0;
}
