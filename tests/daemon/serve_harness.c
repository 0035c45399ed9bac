/* serve_harness.c - the daemon tests' server harness (serve_harness.h). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
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
            char cmd[400];
            snprintf(cmd, sizeof cmd, "cat '%s' >&2", log);
            if (system(cmd)) {
            }
            exit(1);
        }
    }
    FT_PASS(rc);
    ft_client_close(c);
}

int th_stop(pid_t *pid, int sig, long limit_ms, double *ms)
{
    double t0 = ft_test_now();
    kill(*pid, sig);
    for (long waited = 0; waited <= limit_ms; waited += 10) {
        int st;
        if (waitpid(*pid, &st, WNOHANG) == *pid) {
            *pid = 0;
            if (ms)
                *ms = (ft_test_now() - t0) * 1000.0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        th_sleep_ms(10);
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
