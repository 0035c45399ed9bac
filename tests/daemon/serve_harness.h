/*
 * serve_harness.h - what the daemon tests share to run a server and the
 * files around it: start "flashtrie serve" with its log in the test's
 * folder and wait until it answers a ping, stop it with a signal, kill it
 * and remove the folder; run the program's other commands; build the
 * tests' indexes; read the logs.  Talking to a running server (HTTP, INFO,
 * raw sockets) is test_net.h's.
 */
#ifndef FT_SERVE_HARNESS_H
#define FT_SERVE_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "flashtrie.h"
#include "flashtrie_client.h"

/* th_sleep_ms sleeps ms milliseconds. */
void th_sleep_ms(long ms);

/* th_setup readies a test that runs the program and returns FT_BIN, the
 * program (a test run without it ends with status 2).  It makes a fresh
 * folder /tmp/ft_WHO.XXXXXX into dir (dirlen bytes), registers cleanup to
 * run at exit (it kills the servers and removes the folder), and ignores
 * SIGPIPE, so that a write to a closed connection fails, not the test. */
const char *th_setup(const char *who, char *dir, size_t dirlen,
                     void (*cleanup)(void));

/* ---- servers ---- */

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

/* th_wait_exit waits up to limit_ms, polling every 10 ms, for *pid to exit
 * by itself, and returns its exit status (128 + the signal for a killed
 * process) with *pid set to 0; -1 when it still runs then (*pid kept, so
 * that th_kill at exit still ends it). */
int th_wait_exit(pid_t *pid, long limit_ms);

/* th_stop sends sig and returns the exit status (128 + the signal for a
 * killed server); *ms (may be NULL) gets how long it took.  A server still
 * there after limit_ms ends the test (exit 1). */
int th_stop(pid_t *pid, int sig, long limit_ms, double *ms);

/* th_kill kills a server still running (SIGKILL) and removes dir (none
 * when dir is ""); who names the test in the message when it cannot. */
void th_kill(pid_t *pid, const char *dir, const char *who);

/* ---- the program's other commands ---- */

/* th_launch runs "BIN ARGS..." (args NULL-terminated) in a child and
 * returns its pid at once.  With out, the child's stdout goes to that
 * file (created or truncated), and its stderr is appended there too when
 * err_too is set; without, both are the test's. */
pid_t th_launch(const char *bin, const char *const *args, const char *out,
                int err_too);

/* th_run runs "BIN ARGS..." as th_launch (stdout to out when out is not
 * NULL, stderr the test's) and returns its exit status once it ends
 * (128 + the signal for a killed one). */
int th_run(const char *bin, const char *const *args, const char *out);

/* ---- indexes ---- */

/* th_make_index writes the tests' library of 12 small keys ("1 2 3",
 * "1 2", ... "1 7", in that order) to DIR/NAME.keys, each key's value
 * base + its line number (from 0), and builds DIR/NAME.fti with one
 * thread; path (len bytes) gets the index's path.  A failed build is
 * shown ("build: ...") and ends the test (exit 1). */
void th_make_index(const char *dir, const char *name, uint64_t base,
                   char *path, size_t len);

/* th_make_library makes a library of n generated keys with the program
 * itself ("BIN gen keys --n N --seed 7" into DIR/keys.txt, then "BIN
 * build" into DIR/lib.fti, their stdout thrown away); idx (len bytes) gets
 * the index's path.  Either command failing fails the test. */
void th_make_library(const char *bin, const char *dir, unsigned n, char *idx,
                     size_t len);

/* th_same_result says whether got is want bit for bit: status, hit count
 * and every hit's length, value, score, tokens, and its sigma too when
 * sigma is set (mem_test compares without it).  The error texts are not
 * compared. */
int th_same_result(const ft_result *got, const ft_result *want, int sigma);

/* ---- files and logs ---- */

/* th_count_lines counts the lines of DIR/NAME (of NAME alone when dir is
 * NULL) that hold s, each line read in pieces of at most 4095 bytes; 0
 * when the file cannot be opened (a server that has not written it yet). */
int th_count_lines(const char *dir, const char *name, const char *s);

/* th_show_file copies DIR/NAME (NAME alone when dir is NULL) to stderr,
 * only its last tail lines when tail > 0, for a failure's message; returns
 * system()'s status (not 0: the file could not be shown). */
int th_show_file(const char *dir, const char *name, int tail);

/* th_write_file writes text to path, opened with mode ("w" replaces the
 * file, "a" appends); a file that cannot be opened fails the test. */
void th_write_file(const char *path, const char *text, const char *mode);

/* th_want_has fails the test (exit 1) when text lacks s, showing "WHAT
 * lacks 'S':" and the whole text. */
void th_want_has(const char *what, const char *text, const char *s);

/* th_proc_kb reads the "KEY:" line of /proc/PID/status (VmRSS, VmHWM...),
 * in KiB; -1 when the process or the line is not there. */
long th_proc_kb(pid_t pid, const char *key);

/* th_ping_until pings c up to tries times, gap_ms apart, until one is
 * answered; returns the last ping's code (FT_OK once one was). */
int th_ping_until(ft_client *c, int tries, long gap_ms);

/* th_leaks_off makes the programs this test starts from now on run
 * without LeakSanitizer's leak check (ASAN_OPTIONS gains detect_leaks=0)
 * and returns what ASAN_OPTIONS was (NULL: unset), for th_leaks_restore.
 * For the processes nng 1.5.2 leaks in: a client or server whose
 * connection its ipc wedge stranded never frees that pipe
 * (docs/RELIABILITY.md), and that leak is nng's, not ours. */
char *th_leaks_off(void);
void th_leaks_restore(char *prev);

#endif /* FT_SERVE_HARNESS_H */
