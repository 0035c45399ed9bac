/*
 * close_within.c - nng_close with a bound on the wait (close_within.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include <nng/nng.h>

#include "flashtrie/internal/clock.h"
#include "close_within.h"

/* Set once a close of this process has been given up: nng's reaper is
 * then stalled for good, so later closes wait only
 * FTI_NNG_CLOSE_STALLED_MS (a tool closing 64 sockets one after another
 * ends in about a second, not a minute). */
static int g_stalled;

/* closer: one close under way, shared by the caller and the thread that
 * runs nng_close; whoever comes last frees it (and runs done). */
typedef struct closer {
    nng_socket s;
    void (*done)(void *);
    void *arg;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
    int closed;        /* nng_close has returned */
    int abandoned;     /* the caller stopped waiting for it */
} closer;

static void closer_free(closer *k)
{
    pthread_cond_destroy(&k->cv);
    pthread_mutex_destroy(&k->mu);
    free(k);
}

static void *closer_main(void *arg)
{
    closer *k = arg;
    nng_close(k->s);
    pthread_mutex_lock(&k->mu);
    k->closed = 1;
    int abandoned = k->abandoned;
    pthread_cond_broadcast(&k->cv);
    pthread_mutex_unlock(&k->mu);
    /* Not abandoned: the caller joins this thread and finishes. */
    if (abandoned) {
        if (k->done)
            k->done(k->arg);
        closer_free(k);
    }
    return NULL;
}

/* closer_new makes k and its thread (*th); NULL when either cannot be
 * had. */
static closer *closer_new(nng_socket s, void (*done)(void *), void *arg,
                          pthread_t *th)
{
    closer *k = calloc(1, sizeof *k);
    if (k == NULL)
        return NULL;
    k->s = s;
    k->done = done;
    k->arg = arg;
    pthread_condattr_t ca;
    int ok = pthread_condattr_init(&ca) == 0;
    ok = ok && pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
         pthread_cond_init(&k->cv, &ca) == 0;
    if (ok)
        pthread_condattr_destroy(&ca);
    if (!ok) {
        free(k);
        return NULL;
    }
    pthread_mutex_init(&k->mu, NULL);
    if (pthread_create(th, NULL, closer_main, k) != 0) {
        closer_free(k);
        return NULL;
    }
    return k;
}

int fti_nng_close_within(nng_socket s, void (*done)(void *), void *arg)
{
    pthread_t th;
    closer *k = closer_new(s, done, arg, &th);
    if (k == NULL) {
        nng_close(s); /* no thread to spare: unbounded */
        if (done)
            done(arg);
        return 1;
    }
    int wait_ms = __atomic_load_n(&g_stalled, __ATOMIC_RELAXED)
                      ? FTI_NNG_CLOSE_STALLED_MS
                      : FTI_NNG_CLOSE_WAIT_MS;
    struct timespec until = fti_abs_after((int64_t)wait_ms * 1000000);
    pthread_mutex_lock(&k->mu);
    while (!k->closed &&
           pthread_cond_timedwait(&k->cv, &k->mu, &until) != ETIMEDOUT)
        ;
    int closed = k->closed;
    if (!closed)
        k->abandoned = 1; /* closer_main finishes, if nng ever returns */
    pthread_mutex_unlock(&k->mu);
    if (!closed) {
        __atomic_store_n(&g_stalled, 1, __ATOMIC_RELAXED);
        pthread_detach(th);
        return 0;
    }
    pthread_join(th, NULL);
    closer_free(k);
    if (done)
        done(arg);
    return 1;
}
