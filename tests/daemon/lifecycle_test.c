/*
 * lifecycle_test.c - "flashtrie serve" from start to exit: reloads,
 * probes, systemd's notifications, signals.  One executable, one case per
 * argument:
 *   hup       SIGHUP with a config file is all or nothing: a refused
 *             config (an unknown setting appended) and a refused index
 *             change nothing (no "reloaded:", result="failed" counted,
 *             INFO's config section and generation as before), the log
 *             names the index about to be loaded; a good one applies both
 *   probes    /livez answers 200 while the index loads (the test hook
 *             --test-open-delay-ms), /readyz and /healthz 503 with their
 *             reasons; then ready; during a drain /livez 200, /readyz 503.
 *             NOTIFY_SOCKET (a datagram socket read here) gets STATUS,
 *             READY=1, RELOADING=1 with MONOTONIC_USEC, READY=1, STOPPING=1
 *   block     a RELOAD of a FIFO or a directory is refused naming the path;
 *             during a slow reload both listeners answer PING at once and a
 *             second RELOAD gets BUSY; SIGTERM during a reload that has
 *             not finished exits 0 at once, the RELOAD answered SHUTDOWN
 *   sigbus    the served index truncated in place: the next search faults
 *             its mapping, the server logs the file and exits 74
 *   drain_load  SIGTERM under 64 loadtest clients, twice: exit 0 within
 *             3 s, the 5 s teardown watchdog never fires
 * Servers listen on ipc:// in a temporary folder (the HTTP listener on a
 * free 127.0.0.1 port) and are stopped by the case, or killed at exit.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "flashtrie_client.h"
#include "ft_test.h"
#include "serve_harness.h"
#include "test_net.h"

static char g_dir[256];
static pid_t g_pid, g_lt_pid;
static const char *g_bin;

static void cleanup(void)
{
    if (g_lt_pid > 0) {
        kill(g_lt_pid, SIGKILL);
        waitpid(g_lt_pid, NULL, 0);
    }
    th_kill(&g_pid, g_dir, "lifecycle_test");
}

static void show_log(void) { th_show_file(g_dir, "log", 40); }

#define CHECK_LOG(cond)                                                      \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "%s:%d: %s; the server's log:\n", __FILE__,      \
                    __LINE__, #cond);                                        \
            show_log();                                                      \
            exit(1);                                                         \
        }                                                                    \
    } while (0)

/* log_count counts the lines of the server's log that hold s. */
static int log_count(const char *s)
{
    return th_count_lines(g_dir, "log", s);
}

/* client connects with timeout_ms a call, waiting up to 5 s for the
 * server. */
static ft_client *client(const char *url, int timeout_ms)
{
    return tn_connect(url, timeout_ms, 5000);
}

/* wait_ping waits (at most limit_ms) until url answers a ping; a server
 * that exits first ends the test. */
static void wait_ping(const char *url, long limit_ms)
{
    ft_client *c = tn_connect(url, 200, 1);
    double t0 = ft_test_now();
    while (ft_client_ping(c, NULL, 0) != FT_OK) {
        if (waitpid(g_pid, NULL, WNOHANG) == g_pid) {
            g_pid = 0;
            fprintf(stderr, "server exited early\n");
            show_log();
            exit(1);
        }
        CHECK_LOG((ft_test_now() - t0) * 1000 < limit_ms);
        th_sleep_ms(20);
    }
    ft_client_close(c);
}

static char *info(const char *url)
{
    ft_client *c = client(url, 5000);
    char *text;
    FT_PASS(ft_client_info(c, &text, NULL, 0));
    ft_client_close(c);
    return text;
}

/* info_line checks that INFO holds the whole line. */
static void info_line(const char *text, const char *line)
{
    char want[1400];
    snprintf(want, sizeof want, "\n%s\n", line);
    if (strstr(text, want) == NULL) {
        fprintf(stderr, "INFO has no line '%s':\n%s\n", line, text);
        exit(1);
    }
}

static void spawn(const char *const *args)
{
    th_spawn(&g_pid, g_bin, g_dir, "log", args);
}

/* ---- hup: a refused SIGHUP changes nothing ---- */

/* write_conf writes the config file conf: index, one admin listener at
 * url, the CPU engine with one thread, max_batch and the HTTP listener
 * base; the index on line 1, max_batch on line 5. */
static void write_conf(const char *conf, const char *index, const char *url,
                       int max_batch, const char *base)
{
    char body[2048];
    snprintf(body, sizeof body,
             "index = \"%s\";\nlisteners = ( { url = \"%s\"; admin = true; } );\n"
             "engine = \"cpu\";\ncpu_threads = 1;\nmax_batch = %d;\n"
             "metrics = \"%s\";\n", index, url, max_batch, base);
    th_write_file(conf, body, "w");
}

/* hup_wait sends SIGHUP and waits until the failed or ok count reaches
 * want. */
static void hup_wait(const char *base, const char *sample, double want)
{
    kill(g_pid, SIGHUP);
    for (int t = 0; tn_metric(base, sample) != want; t++) {
        CHECK_LOG(t < 1000);
        th_sleep_ms(10);
    }
}

static void case_hup(void)
{
    char a[300], b[300], bad[300], url[300], conf[300], base[64], text[4096];
    th_make_index(g_dir, "a", 100, a, sizeof a);
    th_make_index(g_dir, "b", 5000, b, sizeof b);
    snprintf(bad, sizeof bad, "%s/bad.fti", g_dir);
    th_write_file(bad, "not an index\n", "w");
    snprintf(url, sizeof url, "ipc://%s/sock", g_dir);
    snprintf(conf, sizeof conf, "%s/flashtrie.conf", g_dir);
    snprintf(base, sizeof base, "http://127.0.0.1:%d", tn_free_port());
    /* Line 1 the index, line 5 max_batch: INFO names both by line. */
    write_conf(conf, a, url, 4, base);
    const char *args[] = {"serve", "--config", conf, NULL};
    spawn(args + 1);
    wait_ping(url, 20000);
    char line[1400];
    snprintf(line, sizeof line, "index: %s (file:1)", a);

    /* A setting the table does not know: refused, counted as failed, the
     * index not reopened. */
    th_write_file(conf, "max_bach = 8;\n", "a");
    hup_wait(base, "flashtrie_reloads_total{result=\"failed\"}", 1);
    FT_CHECK_EQ_U64(
        tn_metric(base, "flashtrie_reloads_total{result=\"ok\"}"), 0);
    FT_CHECK_EQ_U64(tn_metric(base, "flashtrie_index_generation"), 1);
    snprintf(text, sizeof text, "reload refused: config %s refused: %s:7: "
             "max_bach: unknown setting; still serving generation 1 (%s), "
             "the settings unchanged", conf, conf, a);
    CHECK_LOG(log_count(text) == 1);
    CHECK_LOG(log_count("reloaded: now serving") == 0);
    CHECK_LOG(log_count("SIGHUP: reloading") == 0);
    char *in = info(url);
    info_line(in, line);
    info_line(in, "max_batch: 4 (file:5)");
    info_line(in, "generation: 1");
    info_line(in, "reloads: 0");
    info_line(in, "reload_failures: 1");
    ft_client_text_free(in);

    /* A config that names an index that cannot be opened: neither the
     * settings nor the index change, and the log names the new index. */
    write_conf(conf, bad, url, 8, base);
    hup_wait(base, "flashtrie_reloads_total{result=\"failed\"}", 2);
    snprintf(text, sizeof text, "SIGHUP: reloading %s with the settings of "
             "%s", bad, conf);
    CHECK_LOG(log_count(text) == 1);
    CHECK_LOG(log_count("reloaded: now serving") == 0);
    FT_CHECK_EQ_U64(
        tn_metric(base, "flashtrie_reloads_total{result=\"ok\"}"), 0);
    FT_CHECK_EQ_U64(tn_metric(base, "flashtrie_index_generation"), 1);
    in = info(url);
    info_line(in, line);
    info_line(in, "max_batch: 4 (file:5)");
    snprintf(text, sizeof text, "path: %s", a);
    info_line(in, text);
    ft_client_text_free(in);

    /* A good one: both apply. */
    write_conf(conf, b, url, 8, base);
    hup_wait(base, "flashtrie_reloads_total{result=\"ok\"}", 1);
    FT_CHECK_EQ_U64(
        tn_metric(base, "flashtrie_reloads_total{result=\"failed\"}"), 2);
    /* Generation 2 was the refused open of bad.fti. */
    FT_CHECK_EQ_U64(tn_metric(base, "flashtrie_index_generation"), 3);
    snprintf(text, sizeof text, "SIGHUP: reloading %s with the settings of "
             "%s", b, conf);
    CHECK_LOG(log_count(text) == 1);
    snprintf(text, sizeof text, "reloaded: now serving generation 3: %s", b);
    CHECK_LOG(log_count(text) == 1);
    in = info(url);
    snprintf(line, sizeof line, "index: %s (file:1)", b);
    info_line(in, line);
    info_line(in, "max_batch: 8 (file:5)");
    snprintf(text, sizeof text, "path: %s", b);
    info_line(in, text);
    ft_client_text_free(in);
    FT_CHECK_EQ_U64(th_stop(&g_pid, SIGTERM, 15000, NULL), 0);
}

/* ---- probes and sd_notify ---- */

static int g_notify = -1;

static void notify_open(void)
{
    char path[300];
    snprintf(path, sizeof path, "%s/notify", g_dir);
    g_notify = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    FT_CHECK(g_notify >= 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    FT_CHECK(strlen(path) < sizeof sa.sun_path);
    strcpy(sa.sun_path, path);
    FT_CHECK(bind(g_notify, (struct sockaddr *)&sa, sizeof sa) == 0);
    FT_CHECK(setenv("NOTIFY_SOCKET", path, 1) == 0);
}

/* notify_next returns the next message (waiting at most 20 s). */
static const char *notify_next(void)
{
    static char msg[1024];
    struct timeval tv = {20, 0};
    FT_CHECK(setsockopt(g_notify, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) ==
             0);
    ssize_t n = recv(g_notify, msg, sizeof msg - 1, 0);
    CHECK_LOG(n > 0);
    msg[n] = '\0';
    return msg;
}

/* count_answer counts the good answers of async searches. */
static void count_answer(int status, ft_client_results *res,
                         const char *error, void *arg)
{
    (void)error;
    if (status == FT_OK && ft_client_results_get(res, 0)->status == FT_OK)
        atomic_fetch_add((atomic_int *)arg, 1);
    if (res)
        ft_client_results_free(res);
}

static void case_probes(void)
{
    char a[300], url[300], base[64], body[512], want[400];
    th_make_index(g_dir, "a", 100, a, sizeof a);
    snprintf(url, sizeof url, "ipc://%s/sock", g_dir);
    snprintf(base, sizeof base, "http://127.0.0.1:%d", tn_free_port());
    notify_open();
    /* Every open of the index waits 1.5 s (the test hook); every batch
     * 300 ms. */
    const char *args[] = {"--index", a, "--listen", url, "--engine", "cpu",
                          "--threads", "1", "--metrics", base,
                          "--test-open-delay-ms", "1500",
                          "--test-delay-us", "300000", NULL};
    spawn(args);
    snprintf(want, sizeof want, "STATUS=opening the index %s\n", a);
    FT_CHECK_STR(notify_next(), want);
    /* While the index loads: alive, not ready. */
    int st;
    for (int t = 0;
         (st = tn_http_text(base, "/livez", body, sizeof body)) < 0; t++) {
        CHECK_LOG(t < 500);
        th_sleep_ms(10);
    }
    FT_CHECK_EQ_U64(st, 200);
    FT_CHECK_STR(body, "alive\n");
    FT_CHECK_EQ_U64(tn_http_text(base, "/readyz", body, sizeof body), 503);
    FT_CHECK_STR(body, "not ready: starting: opening the index\n");
    FT_CHECK_EQ_U64(tn_http_text(base, "/healthz", body, sizeof body), 503);
    FT_CHECK_STR(body, "starting: opening the index\n");
    FT_CHECK_EQ_U64(tn_http_text(base, "/metrics", body, sizeof body), 503);
    FT_CHECK_STR(body, "starting: opening the index\n");
    /* Then ready, and systemd is told so. */
    snprintf(want, sizeof want, "READY=1\nSTATUS=serving\nMAINPID=%ld\n",
             (long)g_pid);
    FT_CHECK_STR(notify_next(), want);
    FT_CHECK_EQ_U64(tn_http_text(base, "/readyz", body, sizeof body), 200);
    FT_CHECK_STR(body, "ready\n");
    FT_CHECK_EQ_U64(tn_http_text(base, "/healthz", body, sizeof body), 200);
    FT_CHECK_STR(body, "ok\n");
    wait_ping(url, 5000);

    /* A reload: RELOADING=1 with the monotonic clock, then READY=1; the
     * server stays ready while it runs. */
    kill(g_pid, SIGHUP);
    const char *m = notify_next();
    FT_CHECK(!strncmp(m, "RELOADING=1\nMONOTONIC_USEC=", 27));
    char *end;
    unsigned long long us = strtoull(m + 27, &end, 10);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    FT_CHECK(us > 0 && us <= (unsigned long long)ts.tv_sec * 1000000ull +
                                 (unsigned long long)ts.tv_nsec / 1000);
    FT_CHECK_STR(end, "\nSTATUS=reloading\n");
    FT_CHECK_EQ_U64(tn_http_text(base, "/readyz", body, sizeof body), 200);
    FT_CHECK_STR(notify_next(), "READY=1\nSTATUS=serving\n");
    FT_CHECK_EQ_U64(
        tn_metric(base, "flashtrie_reloads_total{result=\"ok\"}"), 1);

    /* A drain of two requests held 300 ms each: STOPPING=1; alive but not
     * ready while it lasts. */
    ft_client *c = client(url, 10000);
    ft_request r;
    ft_request_init(&r);
    uint32_t tok[2] = {1, 7};
    float lp[2] = {-0.5f, -1.0f};
    r.T = 1;
    r.K = 2;
    r.tokens = tok;
    r.logp = lp;
    r.beam = 4;
    pid_t pid = g_pid;
    static atomic_int answered;
    for (int i = 0; i < 2; i++)
        FT_PASS(ft_client_search_async(c, &r, 1, count_answer, &answered,
                                       NULL, 0));
    th_sleep_ms(50);
    kill(pid, SIGTERM);
    FT_CHECK_STR(notify_next(), "STOPPING=1\nSTATUS=draining\n");
    int seen = 0;
    for (int t = 0; t < 200 && !seen; t++) {
        st = tn_http_text(base, "/readyz", body, sizeof body);
        if (st == 503) {
            FT_CHECK_STR(body, "not ready: draining: shutting down\n");
            FT_CHECK_EQ_U64(tn_http_text(base, "/livez", body, sizeof body),
                            200);
            FT_CHECK_STR(body, "alive\n");
            seen = 1;
        }
        th_sleep_ms(5);
    }
    FT_CHECK(seen);
    FT_CHECK_EQ_U64(th_stop(&g_pid, SIGTERM, 15000, NULL), 0);
    FT_CHECK_EQ_U64(atomic_load(&answered), 2);
    ft_client_close(c);
}

/* ---- block: reloads that do not block anything ---- */

typedef struct reload_call {
    const char *url, *path;
    int rc;
    char msg[1400];
    double ms;
} reload_call;

static void *reload_main(void *arg)
{
    reload_call *rc = arg;
    ft_client *c = client(rc->url, 30000);
    double t0 = ft_test_now();
    rc->rc = ft_client_reload(c, rc->path, rc->msg, sizeof rc->msg);
    rc->ms = (ft_test_now() - t0) * 1000;
    ft_client_close(c);
    return NULL;
}

static void reload_now(reload_call *rc)
{
    reload_main(rc);
}

static void case_block(void)
{
    char a[300], b[300], cpath[300], url[300], admin[300], fifo[300],
        want[1400];
    th_make_index(g_dir, "a", 100, a, sizeof a);
    th_make_index(g_dir, "b", 5000, b, sizeof b);
    th_make_index(g_dir, "c", 90000, cpath, sizeof cpath);
    snprintf(url, sizeof url, "ipc://%s/sock", g_dir);
    snprintf(admin, sizeof admin, "ipc://%s/admin", g_dir);
    snprintf(fifo, sizeof fifo, "%s/fifo", g_dir);
    FT_CHECK(mkfifo(fifo, 0600) == 0);
    const char *args[] = {"--index", a, "--listen", url, "--admin-listen",
                          admin, "--admin-reload", "--engine", "cpu",
                          "--threads", "1", "--test-open-delay-ms", "1500",
                          "--drain-timeout-ms", "5000", NULL};
    spawn(args);
    wait_ping(url, 20000);

    /* A FIFO (nobody writes it) and a directory are refused by name. */
    reload_call rc = {admin, fifo, -1, "", 0};
    reload_now(&rc);
    FT_CHECK_EQ_U64(rc.rc, FT_EIO);
    snprintf(want, sizeof want, "reload: refused: %s: not a regular file (a "
             "FIFO); an index or a manifest is a regular file", fifo);
    FT_CHECK_STR(rc.msg, want);
    rc = (reload_call){admin, g_dir, -1, "", 0};
    reload_now(&rc);
    FT_CHECK_EQ_U64(rc.rc, FT_EIO);
    snprintf(want, sizeof want, "reload: refused: %s: not a regular file (a "
             "directory); an index or a manifest is a regular file", g_dir);
    FT_CHECK_STR(rc.msg, want);
    CHECK_LOG(log_count("reload refused: ") == 2);

    /* A slow reload: the listeners answer meanwhile, a second RELOAD is
     * BUSY, and the first is answered when it ends. */
    reload_call slow = {admin, b, -1, "", 0};
    pthread_t th;
    FT_CHECK(pthread_create(&th, NULL, reload_main, &slow) == 0);
    th_sleep_ms(300);
    const char *urls[2] = {url, admin};
    for (int u = 0; u < 2; u++) {
        ft_client *c = client(urls[u], 5000);
        for (int i = 0; i < 5; i++) {
            double t0 = ft_test_now();
            FT_PASS(ft_client_ping(c, NULL, 0));
            FT_CHECK((ft_test_now() - t0) * 1000 < 300);
        }
        ft_client_close(c);
    }
    rc = (reload_call){admin, cpath, -1, "", 0};
    reload_now(&rc);
    FT_CHECK_EQ_U64(rc.rc, FT_EBUSY);
    snprintf(want, sizeof want, "reload: one already running (%s, ", b);
    FT_CHECK(!strncmp(rc.msg, want, strlen(want)));
    FT_CHECK(strstr(rc.msg, " s so far); retry when it ends") != NULL);
    pthread_join(th, NULL);
    FT_CHECK_EQ_U64(slow.rc, FT_OK);
    /* Generations 2 and 3 were the refused FIFO and directory. */
    snprintf(want, sizeof want, "reloaded %s: generation 4, 12 keys", b);
    FT_CHECK_STR(slow.msg, want);
    FT_CHECK(slow.ms >= 1400);

    /* SIGTERM while a reload has not finished: the drain does not wait for
     * it, the RELOAD is answered SHUTDOWN, the server exits 0 at once. */
    reload_call stuck = {admin, cpath, -1, "", 0};
    FT_CHECK(pthread_create(&th, NULL, reload_main, &stuck) == 0);
    th_sleep_ms(300);
    double ms;
    FT_CHECK_EQ_U64(th_stop(&g_pid, SIGTERM, 15000, &ms), 0);
    FT_CHECK(ms < 1000); /* the open would have taken 1.2 s more */
    pthread_join(th, NULL);
    FT_CHECK_EQ_U64(stuck.rc, FT_ESHUTDOWN);
    FT_CHECK_STR(stuck.msg, "reload: abandoned: the server is shutting down");
    snprintf(want, sizeof want, "shutdown: the reload of %s still runs", cpath);
    CHECK_LOG(log_count(want) == 1);
    CHECK_LOG(log_count("reloaded: now serving generation 5") == 0);
}

/* ---- sigbus: the served file rewritten in place ---- */

static int search_once(const char *url)
{
    ft_client *c = client(url, 5000);
    ft_request r;
    ft_request_init(&r);
    uint32_t tok[3] = {1, 2, 3};
    float lp[3] = {-0.5f, -0.5f, -0.5f};
    r.T = 3;
    r.K = 1;
    r.tokens = tok;
    r.logp = lp;
    r.beam = 2;
    r.results = 1;
    ft_client_results *res = NULL;
    int rc = ft_client_search(c, &r, 1, &res, NULL, 0);
    if (rc == FT_OK) {
        rc = ft_client_results_get(res, 0)->status;
        ft_client_results_free(res);
    }
    ft_client_close(c);
    return rc;
}

static void case_sigbus(void)
{
    char a[300], served[300], url[300], want[600];
    th_make_index(g_dir, "a", 100, a, sizeof a);
    snprintf(served, sizeof served, "%s/served.fti", g_dir);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", a, served);
    FT_CHECK(system(cmd) == 0);
    snprintf(url, sizeof url, "ipc://%s/sock", g_dir);
    const char *args[] = {"--index", served, "--listen", url, "--engine",
                          "cpu", "--threads", "1", NULL};
    spawn(args);
    wait_ping(url, 20000);
    FT_PASS(search_once(url));
    /* Rewritten in place: truncated under the mapping. */
    int fd = open(served, O_WRONLY | O_TRUNC);
    FT_CHECK(fd >= 0);
    close(fd);
    FT_CHECK(search_once(url) != FT_OK);
    int st = th_wait_exit(&g_pid, 10000);
    CHECK_LOG(st >= 0); /* exited */
    CHECK_LOG(st == 74);
    snprintf(want, sizeof want, "flashtrie: fatal: SIGBUS reading the index "
             "%s at byte ", served);
    CHECK_LOG(log_count(want) == 1);
    CHECK_LOG(log_count(": the file was truncated or rewritten in place "
                        "while served") == 1);
}

/* ---- drain_load: a prompt exit under load ---- */

static void case_drain_load(void)
{
    char idx[300], url[300], out[300];
    th_make_library(g_bin, g_dir, 5000, idx, sizeof idx);
    snprintf(url, sizeof url, "ipc://%s/sock", g_dir);
    for (int round = 0; round < 2; round++) {
        const char *args[] = {"--index", idx, "--listen", url, "--engine",
                              "cpu", "--threads", "1", NULL};
        char log[300];
        snprintf(log, sizeof log, "%s/log", g_dir);
        unlink(log); /* each round's own */
        spawn(args);
        wait_ping(url, 20000);
        const char *lt[] = {"loadtest", "--url", url, "--index", idx,
                            "--clients", "64", "--seconds", "30", "--mix",
                            "good", "--seed", "3", NULL};
        snprintf(out, sizeof out, "%s/loadtest.%d.out", g_dir, round);
        g_lt_pid = th_launch(g_bin, lt, out, 1);
        th_sleep_ms(2500);
        double ms;
        FT_CHECK_EQ_U64(th_stop(&g_pid, SIGTERM, 15000, &ms), 0);
        /* The 5 s watchdog must not have fired; nng_close's own 1 s
         * limit may, on a loaded host (said, not failed). */
        if (ms >= 3000 || log_count("has not returned after 5000 ms") != 0) {
            fprintf(stderr, "round %d: exit took %.0f ms\n", round, ms);
            show_log();
            exit(1);
        }
        if (log_count("nng_close has not returned after") != 0)
            fprintf(stderr, "round %d: nng_close hung; the 1 s limit "
                    "ended it (exit after %.0f ms)\n", round, ms);
        kill(g_lt_pid, SIGKILL);
        waitpid(g_lt_pid, NULL, 0);
        g_lt_pid = 0;
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: FT_BIN=flashtrie lifecycle_test CASE\n");
        return 2;
    }
    g_bin = th_setup("lifecycle_test", g_dir, sizeof g_dir, cleanup);
    if (!strcmp(argv[1], "hup")) case_hup();
    else if (!strcmp(argv[1], "probes")) case_probes();
    else if (!strcmp(argv[1], "block")) case_block();
    else if (!strcmp(argv[1], "sigbus")) case_sigbus();
    else if (!strcmp(argv[1], "drain_load")) case_drain_load();
    else {
        fprintf(stderr, "lifecycle_test: unknown case '%s'\n", argv[1]);
        return 2;
    }
    printf("lifecycle_test %s: ok\n", argv[1]);
    return 0;
}
