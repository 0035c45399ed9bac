/*
 * serve_cpus.h - where the server's threads run: the `cpus` setting (every
 * thread pinned to a CPU list) and `idle_spin` (a SCHED_IDLE spinner per
 * CPU, so that those CPUs never halt; docs/config.md).
 */
#ifndef FT_SERVE_CPUS_H
#define FT_SERVE_CPUS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

typedef struct srv_cpus {
    pthread_t *spinners;
    size_t n_spinners;
    atomic_int stop;
    char pinned[256]; /* the CPU list the threads run on, for the log */
} srv_cpus;

/* srv_cpus_start pins every thread of the process (those running now
 * and, through inheritance, those to come) to list (empty: left alone),
 * then, with idle_spin, starts one spinner on each CPU the process may
 * use.  FT_OK, or FT_ECONFIG with err naming the CPU the process may not
 * use (and those it may). */
int srv_cpus_start(srv_cpus *c, const char *list, int idle_spin, char *err,
                   size_t errlen);
/* srv_cpus_stop stops and joins the spinners. */
void srv_cpus_stop(srv_cpus *c);

#endif
