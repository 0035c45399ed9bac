/*
 * serve_cpus.c - the server's CPUs: pinning (`cpus`) and the idle
 * spinners (`idle_spin`).
 *
 * Why spinners: on a VM guest whose idle vCPUs halt into the hypervisor
 * (cpuidle driver "none"), every hand-off of a request between sleeping
 * threads (nng's poller, its task threads, ours) first wakes a halted
 * vCPU.  On the H200 host that cost ~100 us of a round trip that follows
 * an idle wait (docs/BENCHMARKS.md, "Daemon overhead").  A spinner at
 * SCHED_IDLE keeps its CPU running without taking time from any other
 * thread: the scheduler runs a SCHED_IDLE thread only when nothing else
 * wants the CPU, and preempts it at once when something does.
 */
#define _GNU_SOURCE
#include "serve_cpus.h"

#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "flashtrie.h"
#include "ft_config.h"

/* list_of writes set as a CPU list ("0-3,8") into buf. */
static void list_of(const cpu_set_t *set, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = 0;
    for (int c = 0; c < CPU_SETSIZE && o + 24 < len; c++) {
        if (!CPU_ISSET(c, set))
            continue;
        int e = c;
        while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, set))
            e++;
        o += (size_t)snprintf(buf + o, len - o, o ? ",%d" : "%d", c);
        if (e > c)
            o += (size_t)snprintf(buf + o, len - o, "-%d", e);
        c = e;
    }
}

/* pin_all sets set as the affinity of every thread of this process. */
static int pin_all(const cpu_set_t *set, char *err, size_t errlen)
{
    DIR *d = opendir("/proc/self/task");
    if (d == NULL) {
        /* No /proc: the calling thread alone (the others, if any, are
         * left as they are); threads made later inherit it. */
        if (sched_setaffinity(0, sizeof *set, set) != 0) {
            snprintf(err, errlen, "cpus: cannot pin: %s", strerror(errno));
            return FT_ECONFIG;
        }
        return FT_OK;
    }
    struct dirent *e;
    int rc = FT_OK;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        pid_t tid = (pid_t)atoi(e->d_name);
        if (sched_setaffinity(tid, sizeof *set, set) != 0 && errno != ESRCH) {
            snprintf(err, errlen, "cpus: cannot pin thread %d: %s", (int)tid,
                     strerror(errno));
            rc = FT_ECONFIG;
            break;
        }
    }
    closedir(d);
    return rc;
}

typedef struct spin_arg {
    srv_cpus *c;
    int cpu;
} spin_arg;

static void *spin_main(void *arg)
{
    spin_arg a = *(spin_arg *)arg;
    free(arg);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(a.cpu, &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    struct sched_param sp = {0};
    pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
    while (!atomic_load_explicit(&a.c->stop, memory_order_relaxed)) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#else
        __asm__ volatile("" ::: "memory");
#endif
    }
    return NULL;
}

int srv_cpus_start(srv_cpus *c, const char *list, int idle_spin, char *err,
                   size_t errlen)
{
    memset(c, 0, sizeof *c);
    atomic_init(&c->stop, 0);
    cpu_set_t set;
    CPU_ZERO(&set);
    if (list != NULL && list[0] != 0) {
        unsigned char mask[FT_CONFIG_CPU_LIMIT / 8];
        char why[256];
        if (ft_config_cpus_parse(list, mask, why, sizeof why) < 0) {
            snprintf(err, errlen, "cpus: %s", why);
            return FT_ECONFIG;
        }
        for (int cpu = 0; cpu < FT_CONFIG_CPU_LIMIT && cpu < CPU_SETSIZE;
             cpu++)
            if (mask[cpu / 8] & (1u << (cpu % 8)))
                CPU_SET(cpu, &set);
        /* The kernel keeps of a mask only the CPUs the process's cpuset
         * allows (and refuses one with none of them): read back what it
         * kept, and refuse a list it cut. */
        cpu_set_t got;
        CPU_ZERO(&got);
        if (sched_setaffinity(0, sizeof set, &set) != 0) {
            snprintf(err, errlen, "cpus: cannot run on '%s': %s", list,
                     strerror(errno));
            return FT_ECONFIG;
        }
        if (sched_getaffinity(0, sizeof got, &got) != 0 ||
            !CPU_EQUAL(&got, &set)) {
            cpu_set_t lost;
            CPU_XOR(&lost, &set, &got);
            char ls[128], gs[128];
            list_of(&lost, ls, sizeof ls);
            list_of(&got, gs, sizeof gs);
            snprintf(err, errlen, "cpus: CPUs %s of '%s' are not available "
                     "to this process (it was given %s)", ls, list, gs);
            return FT_ECONFIG;
        }
        int rc = pin_all(&set, err, errlen);
        if (rc != FT_OK)
            return rc;
    } else if (sched_getaffinity(0, sizeof set, &set) != 0) {
        snprintf(err, errlen, "idle_spin: cannot read the process's CPUs: %s",
                 strerror(errno));
        return FT_ECONFIG;
    }
    list_of(&set, c->pinned, sizeof c->pinned);
    if (!idle_spin) {
        if (list != NULL && list[0] != 0)
            FT_LOGF(FT_LOG_INFO, "threads pinned to CPUs %s", c->pinned);
        return FT_OK;
    }
    size_t n = (size_t)CPU_COUNT(&set);
    c->spinners = calloc(n, sizeof *c->spinners);
    if (c->spinners == NULL) {
        snprintf(err, errlen, "idle_spin: out of memory");
        return FT_ENOMEM;
    }
    for (int cpu = 0; cpu < CPU_SETSIZE && c->n_spinners < n; cpu++) {
        if (!CPU_ISSET(cpu, &set))
            continue;
        spin_arg *a = malloc(sizeof *a);
        if (a != NULL) {
            a->c = c;
            a->cpu = cpu;
        }
        if (a == NULL ||
            pthread_create(&c->spinners[c->n_spinners], NULL, spin_main,
                           a) != 0) {
            free(a);
            snprintf(err, errlen, "idle_spin: cannot start the spinner of "
                     "CPU %d", cpu);
            srv_cpus_stop(c);
            return FT_ENOMEM;
        }
        c->n_spinners++;
    }
    FT_LOGF(FT_LOG_INFO, "threads on CPUs %s; %zu idle spinners keep them "
            "from halting (idle_spin)", c->pinned, c->n_spinners);
    return FT_OK;
}

void srv_cpus_stop(srv_cpus *c)
{
    atomic_store(&c->stop, 1);
    for (size_t i = 0; i < c->n_spinners; i++)
        pthread_join(c->spinners[i], NULL);
    free(c->spinners);
    c->spinners = NULL;
    c->n_spinners = 0;
}
