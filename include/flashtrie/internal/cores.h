/*
 * cores.h - how many CPUs this process may run on: what `threads = 0`
 * (one per core) and the daemon's defaults size themselves by.
 */
#ifndef FT_INTERNAL_CORES_H
#define FT_INTERNAL_CORES_H

#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

/* fti_usable_cores counts the CPUs of the process's affinity (as nproc
 * does: taskset, a container's cpuset, serve's `cpus` setting all narrow
 * it), else the online CPUs; at least 1.  The raw system call keeps the
 * header free of _GNU_SOURCE. */
static inline int fti_usable_cores(void)
{
    uint64_t mask[16] = {0}; /* 1024 CPUs */
    long got = syscall(SYS_sched_getaffinity, 0, sizeof mask, mask);
    if (got > 0) {
        int n = 0;
        for (long i = 0; i < got / 8; i++)
            n += __builtin_popcountll(mask[i]);
        if (n > 0)
            return n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

#endif
