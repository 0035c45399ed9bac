/* serve_harness.c - the daemon tests' server harness (serve_harness.h). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "flashtrie_client.h"
#include "ft_test.h"
#include "serve_harness.h"

void th_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

const char *th_setup(const char *who, char *dir, size_t dirlen,
                     void (*cleanup)(void))
{
    const char *bin = getenv("FT_BIN");
    if (bin == NULL) {
        fprintf(stderr, "%s: FT_BIN is not set\n", who);
        exit(2);
    }
    signal(SIGPIPE, SIG_IGN);
    snprintf(dir, dirlen, "/tmp/ft_%s.XXXXXX", who);
    FT_CHECK(mkdtemp(dir) != NULL);
    atexit(cleanup);
    return bin;
}

/* ---- servers ---- */

void th_spawn(pid_t *pid, const char *bin, const char *dir,
              const char *logname, const char *const *args)
{
    char log[300];
    snprintf(log, sizeof log, "%s/%s", dir, logname);
    const char *argv[64];
    int n = 0;
    argv[n++] = bin;
    argv[n++] = "serve";
    for (int i = 0; args[i] && n < 63; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    pid_t p = fork();
    FT_CHECK(p >= 0);
    if (p == 0) {
        if (freopen(log, "w", stderr) == NULL)
            _exit(126);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    *pid = p;
}

void th_start(pid_t *pid, const char *bin, const char *dir, const char *url,
              const char *const *args)
{
    char log[300];
    snprintf(log, sizeof log, "%s/log", dir);
    th_spawn(pid, bin, dir, "log", args);
    pid_t p = *pid;
    ft_client_opts o;
    ft_client_opts_init(&o);
    o.connect_wait_ms = 1;
    o.timeout_ms = 200;
    o.tls_insecure = 1; /* a ping on tls+tcp:// needs no verified server */
    ft_client *c;
    FT_PASS(ft_client_connect(&c, url, &o, NULL, 0));
    int rc = FT_ETIMEDOUT;
    for (int i = 0; i < 100 && rc != FT_OK; i++) {
        rc = ft_client_ping(c, NULL, 0);
        if (rc != FT_OK && waitpid(p, NULL, WNOHANG) == p) {
            *pid = 0;
            fprintf(stderr, "server exited early; its log (%s):\n", log);
            th_show_file(NULL, log, 0);
            exit(1);
        }
    }
    FT_PASS(rc);
    ft_client_close(c);
}

int th_wait_exit(pid_t *pid, long limit_ms)
{
    for (long waited = 0; waited <= limit_ms; waited += 10) {
        int st;
        if (waitpid(*pid, &st, WNOHANG) == *pid) {
            *pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        th_sleep_ms(10);
    }
    return -1;
}

int th_stop(pid_t *pid, int sig, long limit_ms, double *ms)
{
    double t0 = ft_test_now();
    kill(*pid, sig);
    int st = th_wait_exit(pid, limit_ms);
    if (st >= 0) {
        if (ms)
            *ms = (ft_test_now() - t0) * 1000.0;
        return st;
    }
    fprintf(stderr, "server did not stop within %ld ms of signal %d\n",
            limit_ms, sig);
    exit(1);
}

void th_kill(pid_t *pid, const char *dir, const char *who)
{
    if (*pid > 0) {
        kill(*pid, SIGKILL);
        waitpid(*pid, NULL, 0);
        *pid = 0;
    }
    if (dir[0]) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "%s: cannot remove %s\n", who, dir);
    }
}

/* ---- the program's other commands ---- */

pid_t th_launch(const char *bin, const char *const *args, const char *out,
                int err_too)
{
    pid_t pid = fork();
    FT_CHECK(pid >= 0);
    if (pid == 0) {
        const char *argv[64];
        int n = 0;
        argv[n++] = bin;
        for (int i = 0; args[i] && n < 63; i++)
            argv[n++] = args[i];
        argv[n] = NULL;
        if (out && (!freopen(out, "w", stdout) ||
                    (err_too && !freopen(out, "a", stderr))))
            _exit(126);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

int th_run(const char *bin, const char *const *args, const char *out)
{
    pid_t pid = th_launch(bin, args, out, 0);
    int st;
    FT_CHECK(waitpid(pid, &st, 0) == pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* ---- indexes ---- */

void th_make_index(const char *dir, const char *name, uint64_t base,
                   char *path, size_t len)
{
    static const char *keys[] = {"1 2 3", "1 2", "1 2 4", "1 5", "7",
                                 "7 8 9 10", "70000 1", "2 2", "2 3 1",
                                 "3 1", "5 5 5", "1 7"};
    char kp[300];
    snprintf(kp, sizeof kp, "%s/%s.keys", dir, name);
    FILE *f = fopen(kp, "w");
    FT_CHECK(f != NULL);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        fprintf(f, "%s\t%llu\n", keys[i], (unsigned long long)(base + i));
    fclose(f);
    snprintf(path, len, "%s/%s.fti", dir, name);
    ft_build_opts bo;
    ft_build_opts_init(&bo);
    bo.input = kp;
    bo.output = path;
    bo.threads = 1;
    ft_build_stats st;
    ft_build_stats_init(&st);
    char err[256];
    if (ft_build(&st, &bo, err, sizeof err) != FT_OK) {
        fprintf(stderr, "build: %s\n", err);
        exit(1);
    }
}

void th_make_library(const char *bin, const char *dir, unsigned n, char *idx,
                     size_t len)
{
    char keys[300], nbuf[32];
    snprintf(keys, sizeof keys, "%s/keys.txt", dir);
    snprintf(idx, len, "%s/lib.fti", dir);
    snprintf(nbuf, sizeof nbuf, "%u", n);
    const char *gen[] = {"gen", "keys", "--n", nbuf, "--seed", "7",
                         "--output", keys, NULL};
    FT_CHECK_EQ_U64(th_run(bin, gen, "/dev/null"), 0);
    const char *build[] = {"build", "--input", keys, "--output", idx, NULL};
    FT_CHECK_EQ_U64(th_run(bin, build, "/dev/null"), 0);
}

int th_same_result(const ft_result *got, const ft_result *want, int sigma)
{
    if (got->status != want->status || got->n != want->n)
        return 0;
    for (uint32_t i = 0; i < got->n; i++) {
        const ft_hit *a = &got->hits[i], *b = &want->hits[i];
        if (a->len != b->len || a->value != b->value ||
            memcmp(&a->score, &b->score, sizeof a->score) ||
            (sigma && memcmp(&a->sigma, &b->sigma, sizeof a->sigma)) ||
            memcmp(got->tokens + a->tok_off, want->tokens + b->tok_off,
                   a->len * sizeof(uint32_t)))
            return 0;
    }
    return 1;
}

/* ---- files and logs ---- */

int th_count_lines(const char *dir, const char *name, const char *s)
{
    char path[600];
    snprintf(path, sizeof path, "%s%s%s", dir ? dir : "", dir ? "/" : "",
             name);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strstr(line, s) != NULL;
    fclose(f);
    return n;
}

int th_show_file(const char *dir, const char *name, int tail)
{
    char path[600], cmd[700];
    snprintf(path, sizeof path, "%s%s%s", dir ? dir : "", dir ? "/" : "",
             name);
    if (tail > 0)
        snprintf(cmd, sizeof cmd, "tail -n %d '%s' >&2", tail, path);
    else
        snprintf(cmd, sizeof cmd, "cat '%s' >&2", path);
    return system(cmd);
}

void th_write_file(const char *path, const char *text, const char *mode)
{
    FILE *f = fopen(path, mode);
    FT_CHECK(f != NULL);
    fputs(text, f);
    fclose(f);
}

void th_want_has(const char *what, const char *text, const char *s)
{
    if (strstr(text, s) == NULL) {
        fprintf(stderr, "%s lacks '%s':\n%s\n", what, s, text);
        exit(1);
    }
}

long th_proc_kb(pid_t pid, const char *key)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    long v = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl) && line[kl] == ':')
            v = strtol(line + kl + 1, NULL, 10);
    fclose(f);
    return v;
}

char *th_leaks_off(void)
{
    const char *o = getenv("ASAN_OPTIONS");
    char *prev = o ? strdup(o) : NULL;
    char opts[1024];
    snprintf(opts, sizeof opts, "%s%sdetect_leaks=0", o ? o : "",
             o && *o ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
    return prev;
}

void th_leaks_restore(char *prev)
{
    if (prev)
        setenv("ASAN_OPTIONS", prev, 1);
    else
        unsetenv("ASAN_OPTIONS");
    free(prev);
}

int th_ping_until(ft_client *c, int tries, long gap_ms)
{
    int rc = FT_ETIMEDOUT;
    for (int i = 0; i < tries && rc != FT_OK; i++) {
        rc = ft_client_ping(c, NULL, 0);
        if (rc != FT_OK && gap_ms > 0)
            th_sleep_ms(gap_ms);
    }
    return rc;
}
