/*
 * nng_echo_bench.c - ft_nng_echo_bench: what nng's REQ/REP round trip
 * costs on this host, apart from FlashTrie (docs/BENCHMARKS.md, "Daemon
 * overhead": the part of the daemon's added latency that is the host's
 * and nng's, not the server's).
 *
 *   ft_nng_echo_bench [--sizes Q:R[,Q:R...]] [--calls N] [--gap-us G]
 *                     [--server-spin-us E] [--where in|x|both]
 *                     [--client-cpu C] [--server-cpu C] [--idle-spinner]
 *
 * An echo server (a REP socket; one context whose callback answers on
 * nng's thread, as flashtrie serve's contexts do) answers each request of
 * Q bytes with R bytes, after spinning E microseconds (--server-spin-us:
 * the engine's time, the server's thread busy and nng's threads idle
 * meanwhile, as in the daemon's inline run).  The server runs in this
 * process ("in": one process, as ft_daemon_bench's echo rows) and/or in a
 * child process ("x": two processes, as a client and `flashtrie serve`),
 * over ipc:// in $TMPDIR.  Calls are made as the C client makes them (a
 * REQ context, an aio, a message of Q bytes) and timed by the wall clock,
 * with three idle patterns between calls: none (back to back), a sleep of
 * G microseconds (the caller's core idles, as a client's does between
 * requests) and a spin of G microseconds (the caller's core stays busy).
 * Printed per size, place and pattern: mean, p50, p99 (us) and, with E,
 * the round trip less E.
 *
 * --client-cpu/--server-cpu pin each process (all its threads, nng's
 * included) to one CPU; --idle-spinner adds a SCHED_IDLE thread spinning
 * on that CPU, which keeps it from halting while yielding at once to any
 * other thread: a probe of how much of the round trip is the host waking
 * idle CPUs (on a VM guest without a polling cpuidle driver, each wake-up
 * of a halted vCPU goes through the hypervisor).
 *
 * A benchmark, not a test: not run by ctest.  Exit 0, or 1 with a message
 * on stderr naming what failed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include "nng_echo.h"

#define MAX_SIZES 16

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void spin_for(double us)
{
    double end = now_s() + us * 1e-6;
    while (now_s() < end)
        ;
}

/* ---- CPU placement ---- */

static void *idle_spin(void *arg)
{
    (void)arg;
    struct sched_param sp = {0};
    pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
    for (;;)
        __asm__ volatile("" ::: "memory");
    return NULL;
}

/* place pins the calling process (its threads to come inherit it) to cpu
 * (< 0: left alone) and starts the idle spinner when asked. */
static int place(int cpu, int spinner, const char *who)
{
    if (cpu < 0)
        return 0;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        fprintf(stderr, "ft_nng_echo_bench: %s: cannot pin to CPU %d: %s\n",
                who, cpu, strerror(errno));
        return -1;
    }
    if (spinner) {
        pthread_t t;
        if (pthread_create(&t, NULL, idle_spin, NULL) != 0) {
            fprintf(stderr, "ft_nng_echo_bench: %s: no spinner thread\n", who);
            return -1;
        }
        pthread_detach(t);
    }
    return 0;
}

/* ---- the client ---- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* call is one round trip (nng_echo.h echo_rt) into *us; -1 with a
 * message when it failed. */
static int call(nng_socket sock, uint32_t qs, uint32_t rs, uint32_t spin_us,
                double *us)
{
    int rv;
    *us = echo_rt(sock, qs, rs, spin_us, &rv);
    if (*us == -1) {
        fprintf(stderr, "ft_nng_echo_bench: call: %s\n", nng_strerror(rv));
        return -1;
    }
    if (*us == -2) {
        fprintf(stderr, "ft_nng_echo_bench: call: a reply not of %u bytes\n",
                rs);
        return -1;
    }
    return 0;
}

enum { GAP_NONE, GAP_SLEEP, GAP_SPIN };
static const char *gap_name[] = {"back to back", "sleep gap", "spin gap"};

static int run_case(nng_socket sock, const char *where, uint32_t qs,
                    uint32_t rs, int gap, double gap_us, uint32_t spin_us,
                    size_t calls, double *v)
{
    for (size_t i = 0; i < calls / 10 + 10; i++) /* warm-up */
        if (call(sock, qs, rs, spin_us, &v[0]) < 0)
            return -1;
    for (size_t i = 0; i < calls; i++) {
        if (gap == GAP_SLEEP) {
            struct timespec ts = {0, (long)(gap_us * 1000)};
            nanosleep(&ts, NULL);
        } else if (gap == GAP_SPIN) {
            spin_for(gap_us);
        }
        if (call(sock, qs, rs, spin_us, &v[i]) < 0)
            return -1;
    }
    qsort(v, calls, sizeof *v, cmp_double);
    double sum = 0;
    for (size_t i = 0; i < calls; i++)
        sum += v[i];
    double p50 = v[(calls - 1) / 2];
    double p99 = v[(size_t)ceil(0.99 * (double)calls) - 1];
    printf("echo %-2s %7u B out %7u B back, %-12s: mean %7.1f p50 %7.1f "
           "p99 %7.1f us", where, qs, rs, gap_name[gap], sum / (double)calls,
           p50, p99);
    if (spin_us)
        printf("; less the server's %u us: p50 %.1f", spin_us,
               p50 - (double)spin_us);
    printf("\n");
    return 0;
}

static int parse_u32(const char *opt, const char *s, uint32_t lo, uint32_t hi,
                     uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi) {
        fprintf(stderr, "ft_nng_echo_bench: %s: expected an integer %u..%u, "
                "got '%s'\n", opt, lo, hi, s);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

static int parse_sizes(const char *s, uint32_t q[], uint32_t r[], size_t *n)
{
    char buf[512];
    if (strlen(s) >= sizeof buf) {
        fprintf(stderr, "ft_nng_echo_bench: --sizes: too long\n");
        return -1;
    }
    strcpy(buf, s);
    *n = 0;
    for (char *save, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(tok, ':');
        if (*n == MAX_SIZES || colon == NULL) {
            fprintf(stderr, "ft_nng_echo_bench: --sizes: expected up to %d "
                    "Q:R pairs, got '%s'\n", MAX_SIZES, s);
            return -1;
        }
        *colon = 0;
        if (parse_u32("--sizes", tok, 1, 1u << 30, &q[*n]) ||
            parse_u32("--sizes", colon + 1, 0, 1u << 30, &r[*n]))
            return -1;
        (*n)++;
    }
    if (*n == 0) {
        fprintf(stderr, "ft_nng_echo_bench: --sizes: empty\n");
        return -1;
    }
    return 0;
}

static const char *usage_text =
    "usage: ft_nng_echo_bench [--sizes Q:R[,Q:R...]] [--calls N] [--gap-us G]\n"
    "         [--server-spin-us E] [--where in|x|both] [--client-cpu C]\n"
    "         [--server-cpu C] [--idle-spinner]\n"
    "  nng's REQ/REP echo over ipc:// (see the file's comment).  Defaults:\n"
    "  --sizes 32:32,6480:3429,64080:33386 (a PING; BW = 100 and BW = 1000\n"
    "  SEARCH/RESULT frames), --calls 500, --gap-us 200, --where both.\n";

int main(int argc, char **argv)
{
    enum { O_SIZES = 256, O_CALLS, O_GAP, O_SPIN, O_WHERE, O_CCPU, O_SCPU,
           O_IDLE, O_SERVE };
    static const struct option opts[] = {
        {"sizes", required_argument, 0, O_SIZES},
        {"calls", required_argument, 0, O_CALLS},
        {"gap-us", required_argument, 0, O_GAP},
        {"server-spin-us", required_argument, 0, O_SPIN},
        {"where", required_argument, 0, O_WHERE},
        {"client-cpu", required_argument, 0, O_CCPU},
        {"server-cpu", required_argument, 0, O_SCPU},
        {"idle-spinner", no_argument, 0, O_IDLE},
        {"serve", required_argument, 0, O_SERVE}, /* the child's role */
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    uint32_t q[MAX_SIZES], r[MAX_SIZES], calls = 500, gap = 200, spin = 0;
    size_t ns = 0;
    int where = 3, ccpu = -1, scpu = -1, idle = 0, c;
    const char *serve_url = NULL;
    if (parse_sizes("32:32,6480:3429,64080:33386", q, r, &ns))
        return 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        uint32_t v;
        switch (c) {
        case O_SIZES:
            if (parse_sizes(optarg, q, r, &ns))
                return 2;
            break;
        case O_CALLS:
            if (parse_u32("--calls", optarg, 10, 10000000, &calls))
                return 2;
            break;
        case O_GAP:
            if (parse_u32("--gap-us", optarg, 1, 1000000, &gap))
                return 2;
            break;
        case O_SPIN:
            if (parse_u32("--server-spin-us", optarg, 0, 1000000, &spin))
                return 2;
            break;
        case O_WHERE:
            if (!strcmp(optarg, "in"))
                where = 1;
            else if (!strcmp(optarg, "x"))
                where = 2;
            else if (!strcmp(optarg, "both"))
                where = 3;
            else {
                fprintf(stderr, "ft_nng_echo_bench: --where: expected in, x "
                        "or both, got '%s'\n", optarg);
                return 2;
            }
            break;
        case O_CCPU:
        case O_SCPU:
            if (parse_u32(c == O_CCPU ? "--client-cpu" : "--server-cpu",
                          optarg, 0, CPU_SETSIZE - 1, &v))
                return 2;
            *(c == O_CCPU ? &ccpu : &scpu) = (int)v;
            break;
        case O_IDLE: idle = 1; break;
        case O_SERVE: serve_url = optarg; break;
        case 'h': fputs(usage_text, stdout); return 0;
        default: fputs(usage_text, stderr); return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "ft_nng_echo_bench: unexpected argument '%s'\n",
                argv[optind]);
        return 2;
    }
    if (serve_url != NULL) {
        /* The child: serve until the parent closes our stdin. */
        echo_srv e;
        char err[512];
        if (place(scpu, idle, "server"))
            return 1;
        if (echo_srv_open(&e, serve_url, 1, err, sizeof err) != 0) {
            fprintf(stderr, "ft_nng_echo_bench: %s\n", err);
            return 1;
        }
        char ch;
        while (read(0, &ch, 1) > 0)
            ;
        echo_srv_close(&e);
        return 0;
    }
    if (place(ccpu, idle, "client"))
        return 1;
    const char *td = getenv("TMPDIR");
    char url_in[300], url_x[300];
    snprintf(url_in, sizeof url_in, "ipc://%s/ft_echo_in.%ld",
             td && *td ? td : "/tmp", (long)getpid());
    snprintf(url_x, sizeof url_x, "ipc://%s/ft_echo_x.%ld",
             td && *td ? td : "/tmp", (long)getpid());
    echo_srv in;
    nng_socket s_in = NNG_SOCKET_INITIALIZER, s_x = NNG_SOCKET_INITIALIZER;
    pid_t child = -1;
    int to_child = -1;
    char err[512];
    if ((where & 1) && echo_srv_open(&in, url_in, 1, err, sizeof err) != 0) {
        fprintf(stderr, "ft_nng_echo_bench: %s\n", err);
        return 1;
    }
    if (where & 2) {
        /* exec, not fork alone: this process's nng threads do not survive
         * a fork. */
        char scpu_s[16], *cargv[8];
        int k = 0;
        snprintf(scpu_s, sizeof scpu_s, "%d", scpu);
        cargv[k++] = argv[0];
        cargv[k++] = "--serve";
        cargv[k++] = url_x;
        if (scpu >= 0) {
            cargv[k++] = "--server-cpu";
            cargv[k++] = scpu_s;
        }
        if (idle)
            cargv[k++] = "--idle-spinner";
        cargv[k] = NULL;
        child = spawn_self(cargv, &to_child, NULL);
        if (child < 0) {
            fprintf(stderr, "ft_nng_echo_bench: cannot start the server "
                    "process: %s\n", strerror(errno));
            return 1;
        }
    }
    int rv = 0;
    if (where & 1)
        rv = echo_dial(&s_in, url_in, 1);
    if (rv == 0 && (where & 2)) {
        /* The child needs a moment to listen. */
        for (int i = 0; i < 500; i++) {
            if ((rv = echo_dial(&s_x, url_x, 1)) == 0)
                break;
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
        }
    }
    if (rv != 0) {
        fprintf(stderr, "ft_nng_echo_bench: dial: %s\n", nng_strerror(rv));
        if (child > 0)
            kill(child, SIGTERM);
        return 1;
    }
    printf("ft_nng_echo_bench: %u calls a case, gaps of %u us, the server "
           "spins %u us before each reply; client CPU %d, server CPU %d%s "
           "(-1: not pinned)\n", calls, gap, spin, ccpu, scpu,
           idle ? ", idle spinners" : "");
    double *v = malloc(calls * sizeof *v);
    int bad = v == NULL;
    for (size_t i = 0; i < ns && !bad; i++)
        for (int g = GAP_NONE; g <= GAP_SPIN && !bad; g++) {
            if ((where & 1) &&
                run_case(s_in, "in", q[i], r[i], g, gap, spin, calls, v))
                bad = 1;
            if (!bad && (where & 2) &&
                run_case(s_x, "x", q[i], r[i], g, gap, spin, calls, v))
                bad = 1;
        }
    free(v);
    if (where & 2) {
        nng_close(s_x);
        close(to_child); /* the child's stdin ends: it exits */
        int st;
        waitpid(child, &st, 0);
    }
    if (where & 1) {
        nng_close(s_in);
        echo_srv_close(&in);
    }
    return bad;
}
