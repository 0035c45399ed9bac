/*
 * serve_harness.h - what the daemon tests share to run a server: start
 * "flashtrie serve" with its log in the test's folder and wait until it
 * answers a ping, stop it with a signal, kill it and remove the folder.
 */
#ifndef FT_SERVE_HARNESS_H
#define FT_SERVE_HARNESS_H

#include <sys/types.h>

/* th_sleep_ms sleeps ms milliseconds. */
void th_sleep_ms(long ms);

/* th_start runs "BIN serve ARGS..." with its stderr in DIR/log, stores its
 * pid in *pid (at once, so that a failing check still kills it) and waits
 * until url answers a ping.  A server that exits first has its log shown
 * and ends the test (exit 1). */
void th_start(pid_t *pid, const char *bin, const char *dir, const char *url,
              const char *const *args);

/* th_spawn runs "BIN serve ARGS..." with its stderr in DIR/LOGNAME and
 * stores its pid in *pid, without waiting for anything (a cluster rank
 * that opens no listener). */
void th_spawn(pid_t *pid, const char *bin, const char *dir,
              const char *logname, const char *const *args);

/* th_stop sends sig and returns the exit status (128 + the signal for a
 * killed server); *ms (may be NULL) gets how long it took.  A server still
 * there after limit_ms ends the test (exit 1). */
int th_stop(pid_t *pid, int sig, long limit_ms, double *ms);

/* th_kill kills a server still running (SIGKILL) and removes dir; who
 * names the test in the message when it cannot. */
void th_kill(pid_t *pid, const char *dir, const char *who);

#endif /* FT_SERVE_HARNESS_H */
