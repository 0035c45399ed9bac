/*
 * close_within.h - nng_close with a bound on the wait (close_within.c).
 *
 * nng 1.5.2 tears every pipe and dialer of a process down on one thread
 * (its reaper).  Once any nng socket of the process has a connection
 * closed while its transport is part way through writing or reading a
 * message, that thread waits for good, and from then on nng_close of
 * every socket of the process never returns (docs/daemon.md, "Closing a
 * handle").  Every nng_close whose hang would hang a client, a tool or a
 * cluster rank goes through fti_nng_close_within; the server's own
 * shutdown has its watchdog instead (daemon/serve.c).
 *
 * Compiled into the client library and into ft_cluster (as shard/error.c
 * is into both libraries): private (fti_), hidden in the shared library.
 */
#ifndef FTI_CLOSE_WITHIN_H
#define FTI_CLOSE_WITHIN_H

#include <nng/nng.h>

/* How long the callers wait for nng_close before they give it up. */
#define FTI_NNG_CLOSE_WAIT_MS 1000
/* ... and once one close of the process was given up (the reaper is
 * stalled for good), how long every later one waits at most. */
#define FTI_NNG_CLOSE_STALLED_MS 50

/* fti_nng_close_within runs nng_close(s) on a thread of its own and waits
 * up to FTI_NNG_CLOSE_WAIT_MS for it (FTI_NNG_CLOSE_STALLED_MS once a
 * close of the process has been given up).  Returns 1 when it returned
 * in time: done(arg) has then run, on the caller's thread, before this
 * returns.  Returns 0
 * when it did not: the close goes on in the background, and done(arg)
 * runs on its thread if nng_close ever returns (never, while nng's reaper
 * is stalled).  done frees what the socket's callbacks (pipe
 * notifications, a dialer's TLS configuration) use, so whoever finishes
 * last frees it, and the caller must not touch that memory after the
 * call.  done may be NULL.  Without a thread to spare (no memory) the
 * close is nng's own, unbounded, and returns 1.  Saying that a close was
 * given up is the caller's: the client library stays silent, the tools
 * and the cluster say so once. */
int fti_nng_close_within(nng_socket s, void (*done)(void *), void *arg);

#endif /* FTI_CLOSE_WITHIN_H */
