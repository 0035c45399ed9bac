/*
 * nng_echo.h - nng alone: the REQ/REP echo the benchmarks measure FlashTrie
 * against (ft_daemon_bench's echo rows and 64-client echo layouts,
 * ft_nng_echo_bench).
 *
 * The server is a REP socket with n contexts whose callbacks answer on
 * nng's threads, as `flashtrie serve`'s contexts do: the received message
 * is resized into the reply (as serve_frame.c srv_frame_reply_msg does).
 * Each request starts with a 12-byte header: u32 the reply's size, u32
 * microseconds to spin before answering (the engine's time: the answering
 * thread busy, nng's other threads idle), u32 ECHO_MAGIC.  A call is made
 * as the C client makes one: a context and an aio of its own, a message of
 * the request's size.
 */
#ifndef FT_BENCH_NNG_ECHO_H
#define FT_BENCH_NNG_ECHO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <nng/nng.h>

#define ECHO_HDR 12
#define ECHO_MAGIC 0x45434831u
#define ECHO_MAX_REPLY (64u << 20)

typedef struct echo_ctx echo_ctx;

typedef struct echo_srv {
    nng_socket sock;
    echo_ctx *ctx;
    int n;
    int up;
} echo_srv;

/* echo_srv_open listens on url with n >= 1 contexts; 0, or -1 with errbuf
 * saying what failed. */
int echo_srv_open(echo_srv *e, const char *url, int n, char *errbuf,
                  size_t errlen);
void echo_srv_close(echo_srv *e);

/* echo_dial opens a REQ socket (no resends, no receive limit) dialed conns
 * times to url; 0 or nng's error. */
int echo_dial(nng_socket *s, const char *url, int conns);

/* echo_rt is one round trip on s: qs bytes out (at least ECHO_HDR), rs
 * back after the server spins spin_us.  Returns the call's time in
 * microseconds; -1 when nng failed (*rv its error), -2 when the reply was
 * not rs bytes long. */
double echo_rt(nng_socket s, size_t qs, size_t rs, uint32_t spin_us, int *rv);

/* spawn_self runs this program again (/proc/self/exe: exec, not a bare
 * fork, as the parent's nng threads do not survive a fork) with argv, in
 * a child whose standard input is a pipe the parent writes (*to; closing
 * it is how the benchmarks stop their children) and, with from, whose
 * standard output is a pipe the parent reads (*from), else the parent's.
 * Returns the child's pid, or -1 (nothing left open). */
pid_t spawn_self(char *const argv[], int *to, int *from);

#endif
