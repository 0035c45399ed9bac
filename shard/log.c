/* log.c - the leveled logger.  Levels are checked before formatting. */
#include "ft_impl.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

/* g_level is read by every thread that logs and set by a reload (the
 * daemon's SIGHUP applies log_level): atomic, so a reader sees the old or
 * the new level (ThreadSanitizer found the plain variable). */
static _Atomic int g_level = FT_LOG_WARN;
static ft_log_sink g_sink;
static void *g_sink_arg;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

void ft_log_set_level(ft_log_level level)
{
    atomic_store_explicit(&g_level, (int)level, memory_order_relaxed);
}

ft_log_level ft_log_get_level(void)
{
    return (ft_log_level)atomic_load_explicit(&g_level, memory_order_relaxed);
}

void ft_log_set_sink(ft_log_sink sink, void *arg)
{
    pthread_mutex_lock(&g_lock);
    g_sink = sink;
    g_sink_arg = arg;
    pthread_mutex_unlock(&g_lock);
}

void ft_log_write(ft_log_level lvl, const char *file, int line,
                  const char *fmt, ...)
{
    static const char *names[] = {"error", "warn", "info", "debug"};
    /* A level outside ft_log_level (a cast int) is printed by number, and
     * a NULL file as "?": never read past names or through NULL. */
    char lvl_name[16];
    if ((unsigned)lvl < sizeof names / sizeof names[0])
        snprintf(lvl_name, sizeof lvl_name, "%s", names[lvl]);
    else
        snprintf(lvl_name, sizeof lvl_name, "level%d", (int)lvl);
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt ? fmt : "", ap);
    va_end(ap);
    if (file == NULL)
        file = "?";
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    char out[1200];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    snprintf(out, sizeof out, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s %s:%d %s",
             tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
             tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, lvl_name, base,
             line, msg);
    pthread_mutex_lock(&g_lock);
    if (g_sink)
        g_sink(lvl, out, g_sink_arg);
    else
        fprintf(stderr, "%s\n", out);
    pthread_mutex_unlock(&g_lock);
}
