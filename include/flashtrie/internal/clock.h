/*
 * clock.h - the one clock of the code base.  Ground floor: header-only,
 * uses nothing but libc.
 *
 * fti_now() is monotonic seconds (durations, deadlines, latencies);
 * fti_now_ns() / fti_now_ms() the same clock in nanoseconds / milliseconds;
 * fti_abs_after(ns) a deadline on it for timed waits; fti_wall_now() wall-clock
 * seconds since the epoch (log stamps, INFO's start time, absolute
 * timeouts of pthread_cond_timedwait).
 */
#ifndef FTI_CLOCK_H
#define FTI_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline double fti_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline uint64_t fti_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t fti_now_ms(void) { return fti_now_ns() / 1000000u; }

/* fti_abs_after returns the CLOCK_MONOTONIC time ns from now, for
 * pthread_cond_timedwait on a condition variable created with
 * pthread_condattr_setclock(CLOCK_MONOTONIC). */
static inline struct timespec fti_abs_after(int64_t ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ns / 1000000000;
    ts.tv_nsec += ns % 1000000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    return ts;
}

static inline double fti_wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif /* FTI_CLOCK_H */
