/*
 * settings.c - the settings table of "flashtrie serve" and everything that
 * reads only the table: defaults, text values (command-line overrides),
 * the cross-setting checks, the reload check, the INFO dump and the
 * Markdown documentation.  loader.c turns a libconfig file into calls of
 * the store functions below, so a file and the command line go through the
 * same bounds and the same messages.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config_impl.h"
#include "flashtrie/internal/errmsg.h"
#include "ft_config.h"

static const char *const engine_choices[] = {"auto", "cpu", "gpu", "shards",
                                             NULL};
/* The order matches ft_log_level, so the stored index is the level. */
static const char *const inline_choices[] = {"auto", "on", "off", NULL};
static const char *const dup_choices[] = {"auto", "door", "engine", NULL};
static const char *const log_choices[] = {"error", "warn", "info", "debug",
                                          NULL};

/* AT(f) says where a row's value lives in ft_config, STRMAX(f) the longest
 * string it holds; SHOWN rows appear in INFO and check-config's listing. */
#define AT(f) .off = offsetof(ft_config, f), .size = sizeof(((ft_config *)0)->f)
#define STRMAX(f) .max = sizeof(((ft_config *)0)->f) - 1
#define LAT(f)                                                                \
    .off = offsetof(ft_config_listener, f),                                   \
    .size = sizeof(((ft_config_listener *)0)->f)
#define LSTRMAX(f) .max = sizeof(((ft_config_listener *)0)->f) - 1
#define SHOWN FT_CONFIG_SHOW_INFO

/* One row per setting, in the order of FT_CONFIG_S_*: its name, type,
 * bounds or choices, default, whether it reloads, where it lives, serve's
 * flag (and whether check-config takes it), whether INFO shows it, its
 * config gauge on /metrics, its apply hook and its one-line description.
 * Each also has its paragraph in flashtrie.conf.example (config_test
 * checks both). */
const ft_config_row ft_config_rows[FT_CONFIG_NSETTINGS] = {
    [FT_CONFIG_S_INDEX] = {.name = "index", .type = FT_CONFIG_STRING,
        STRMAX(index_path), .def = "", .reloadable = 1, .must_exist = 1,
        AT(index_path), .flag = "index", .flag_arg = "PATH",
        .show = SHOWN | FT_CONFIG_SHOW_CHECK,
        .doc = "path of the index file to serve; required (here or --index); a reload reopens it"},
    [FT_CONFIG_S_LISTENERS] = {.name = "listeners", .type = FT_CONFIG_LISTENERS,
        .min = 1, .max = FT_CONFIG_MAX_LISTENERS, .def = "tcp://127.0.0.1:7710",
        AT(listeners), .count_off = offsetof(ft_config, n_listeners),
        .max_count = FT_CONFIG_MAX_LISTENERS, .flag = "listen",
        .flag_arg = "URL", .show = SHOWN | FT_CONFIG_SHOW_CHECK,
        .doc = "the nng addresses the server listens on (list of groups, see listeners[] rows)"},
    [FT_CONFIG_S_ENGINE] = {.name = "engine", .type = FT_CONFIG_ENUM,
        .def = "auto", .choices = engine_choices, AT(engine), .flag = "engine",
        .flag_arg = "auto|cpu|gpu|shards", .show = SHOWN | FT_CONFIG_SHOW_CHECK,
        .doc = "auto: GPU when one is usable, else CPU; cpu; gpu; shards: the index split over devices"},
    [FT_CONFIG_S_DEVICES] = {.name = "devices", .type = FT_CONFIG_INT_LIST,
        .min = 0, .max = 255, .def = "0", AT(devices),
        .count_off = offsetof(ft_config, n_devices),
        .max_count = FT_CONFIG_MAX_DEVICES, .flag = "devices",
        .flag_arg = "0,1,..", .show = SHOWN,
        .doc = "GPU ordinals the GPU and shards engines use"},
    [FT_CONFIG_S_REPLICAS] = {.name = "replicas", .type = FT_CONFIG_INT,
        .min = 1, .max = 64, .def = "1", AT(replicas), .flag = "replicas",
        .flag_arg = "N", .show = SHOWN,
        .doc = "engines per device group, for throughput"},
    [FT_CONFIG_S_CPU_THREADS] = {.name = "cpu_threads", .type = FT_CONFIG_INT,
        .min = 0, .max = 4096, .def = "0", AT(cpu_threads), .flag = "threads",
        .flag_arg = "N", .show = SHOWN,
        .doc = "CPU engine worker threads; 0 = one per core"},
    [FT_CONFIG_S_MAX_BATCH] = {.name = "max_batch", .type = FT_CONFIG_INT,
        .min = 1, .max = 64, .def = "32", .reloadable = 1, AT(max_batch),
        .flag = "max-batch", .flag_arg = "N", .show = SHOWN,
        .hook = FT_CONFIG_HOOK_BATCH_WINDOW,
        .doc = "most requests the batcher hands an engine at once"},
    [FT_CONFIG_S_MAX_WAIT_US] = {.name = "max_wait_us", .type = FT_CONFIG_INT,
        .min = 0, .max = 1000000, .def = "50", .reloadable = 1,
        AT(max_wait_us), .flag = "max-wait-us", .flag_arg = "N", .show = SHOWN,
        .hook = FT_CONFIG_HOOK_BATCH_WINDOW,
        .doc = "longest a request waits for its batch to fill, in microseconds"},
    [FT_CONFIG_S_INLINE_LONE] = {.name = "inline_lone", .type = FT_CONFIG_ENUM,
        .def = "auto", .choices = inline_choices, .reloadable = 1,
        AT(inline_lone), .flag = "inline-lone", .flag_arg = "auto|on|off",
        .show = SHOWN,
        .doc = "run a lone request on an idle server on the receiving thread (no hand-off); auto: on with 4 or more cores"},
    [FT_CONFIG_S_DUP_CHECK] = {.name = "dup_check", .type = FT_CONFIG_ENUM,
        .def = "auto", .choices = dup_choices, .reloadable = 1,
        AT(dup_check), .flag = "dup-check", .flag_arg = "auto|door|engine",
        .show = SHOWN,
        .doc = "where a request's duplicate tokens are checked: door (the decoder, before the queue), engine (on the engine's thread while a GPU launch runs; refused requests are answered from there); auto: engine where the engine overlaps it (GPU engines, a forest of shards), else door"},
    [FT_CONFIG_S_CPUS] = {.name = "cpus", .type = FT_CONFIG_STRING,
        STRMAX(cpus), .def = "", .url = FTI_URL_CPUS, AT(cpus),
        .flag = "cpus", .flag_arg = "LIST", .show = SHOWN,
        .doc = "CPUs every thread of the server runs on, as taskset -c writes them (\"2-5,8\"); empty = not pinned"},
    [FT_CONFIG_S_IDLE_SPIN] = {.name = "idle_spin", .type = FT_CONFIG_BOOL,
        .max = 1, .def = "false", AT(idle_spin), .flag = "idle-spin",
        .show = SHOWN,
        .doc = "one thread per CPU of the server (cpus, else all it may use) spins at idle priority (SCHED_IDLE) so that those CPUs never halt: on a VM guest whose idle vCPUs halt into the hypervisor it saves the wake-ups of every round trip; it keeps those CPUs busy"},
    [FT_CONFIG_S_QUEUE_DEPTH] = {.name = "queue_depth", .type = FT_CONFIG_INT,
        .min = 1, .max = 1000000, .def = "1024", AT(queue_depth),
        .flag = "queue-depth", .flag_arg = "N", .show = SHOWN,
        .gauge = "flashtrie_queue_capacity",
        .gauge_help = "Requests the queue holds before the server answers BUSY (queue_depth).",
        .doc = "requests queued before the server answers BUSY"},
    [FT_CONFIG_S_MAX_MESSAGE_BYTES] = {.name = "max_message_bytes",
        .type = FT_CONFIG_INT, .min = 1024, .max = 4294967295LL,
        .def = "67108864", AT(max_message_bytes), .flag = "max-message-bytes",
        .flag_arg = "N", .show = SHOWN,
        .doc = "largest request message accepted, in bytes (larger ones are refused); less while many connections are open (memory_budget_bytes)"},
    [FT_CONFIG_S_MEMORY_BUDGET_BYTES] = {.name = "memory_budget_bytes",
        .type = FT_CONFIG_INT, .min = 1048576, .max = 1099511627776LL,
        .def = "805306368", AT(memory_budget_bytes),
        .flag = "memory-budget-bytes", .flag_arg = "N", .show = SHOWN,
        .doc = "bytes all received messages, those nng may be reading and their answers may hold, from receipt to reply; a message over it is answered BUSY unread, and the receive limit comes down while the connections could read more than half of it"},
    [FT_CONFIG_S_MAX_HEAVY_MESSAGES] = {.name = "max_heavy_messages",
        .type = FT_CONFIG_INT, .min = 1, .max = 65536, .def = "4",
        AT(max_heavy_messages), .flag = "max-heavy-messages",
        .flag_arg = "N", .show = SHOWN,
        .doc = "messages over 1 MiB held at once, receipt to reply; one more is answered BUSY unread"},
    [FT_CONFIG_S_LIGHT_REQUEST_COST] = {.name = "light_request_cost",
        .type = FT_CONFIG_INT, .min = 0, .max = 1073741824LL,
        .def = "67108864", .reloadable = 1, AT(light_request_cost),
        .flag = "light-request-cost", .flag_arg = "N", .show = SHOWN,
        .doc = "requests whose T x K x beam is at most this ride the light lane, served ahead of heavier ones (which get a batch at least every 8 light ones); 0 = one lane, first come first served"},
    [FT_CONFIG_S_HEAVY_BATCH] = {.name = "heavy_batch", .type = FT_CONFIG_INT,
        .min = 1, .max = 64, .def = "1", .reloadable = 1, AT(heavy_batch),
        .flag = "heavy-batch", .flag_arg = "N", .show = SHOWN,
        .hook = FT_CONFIG_HOOK_BATCH_WINDOW,
        .doc = "most requests of the heavy lane (over light_request_cost) in one batch: a light request that comes while one runs waits for that many"},
    [FT_CONFIG_S_LIGHT_REPLICAS] = {.name = "light_replicas",
        .type = FT_CONFIG_INT, .min = 0, .max = 63, .def = "1",
        .reloadable = 1, AT(light_replicas), .flag = "light-replicas",
        .flag_arg = "N", .show = SHOWN, .hook = FT_CONFIG_HOOK_BATCH_WINDOW,
        .doc = "replicas heavy batches never take, kept for light requests (at most replicas - 1: with one replica, none); 0 = heavy batches may take them all"},
    [FT_CONFIG_S_MAX_BEAM] = {.name = "caps.max_beam", .type = FT_CONFIG_INT,
        .min = 1, .max = 4096, .def = "4096", .reloadable = 1, AT(max_beam),
        .flag = "max-beam", .flag_arg = "N", .show = SHOWN,
        .doc = "largest beam a request may ask for"},
    [FT_CONFIG_S_MAX_K] = {.name = "caps.max_k", .type = FT_CONFIG_INT,
        .min = 1, .max = 4096, .def = "4096", .reloadable = 1, AT(max_k),
        .show = SHOWN,
        .doc = "largest K (proposals per position) a request may carry"},
    [FT_CONFIG_S_MAX_T] = {.name = "caps.max_t", .type = FT_CONFIG_INT,
        .min = 1, .max = 64, .def = "64", .reloadable = 1, AT(max_t),
        .show = SHOWN,
        .doc = "largest T (positions) a request may carry"},
    [FT_CONFIG_S_MAX_RESULTS] = {.name = "caps.max_results",
        .type = FT_CONFIG_INT, .min = 1, .max = 4096, .def = "4096",
        .reloadable = 1, AT(max_results), .show = SHOWN,
        .doc = "most results a request may ask for"},
    [FT_CONFIG_S_DEFAULT_DEADLINE_MS] = {.name = "default_deadline_ms",
        .type = FT_CONFIG_INT, .min = 0, .max = 86400000, .def = "0",
        .reloadable = 1, AT(default_deadline_ms), .flag = "deadline-ms",
        .flag_arg = "N", .show = SHOWN,
        .doc = "deadline of a request that sets none, in milliseconds; 0 = none"},
    [FT_CONFIG_S_DRAIN_TIMEOUT_MS] = {.name = "drain_timeout_ms",
        .type = FT_CONFIG_INT, .min = 0, .max = 3600000, .def = "10000",
        .reloadable = 1, AT(drain_timeout_ms), .flag = "drain-timeout-ms",
        .flag_arg = "N", .show = SHOWN,
        .doc = "on shutdown, how long queued requests may still run, in milliseconds"},
    [FT_CONFIG_S_MAX_CONNECTIONS] = {.name = "max_connections",
        .type = FT_CONFIG_INT, .min = 1, .max = 1000000, .def = "1024",
        .reloadable = 1, AT(max_connections), .flag = "max-connections",
        .flag_arg = "N", .show = SHOWN,
        .gauge = "flashtrie_max_connections",
        .gauge_help = "Connections each listener holds before it refuses new ones (max_connections).",
        .doc = "most client connections open at once on each listener; more are closed at once (counted, logged)"},
    [FT_CONFIG_S_IDLE_TIMEOUT_MS] = {.name = "idle_timeout_ms",
        .type = FT_CONFIG_INT, .min = 0, .max = 86400000, .def = "60000",
        .reloadable = 1, AT(idle_timeout_ms), .flag = "idle-timeout-ms",
        .flag_arg = "N", .show = SHOWN,
        .gauge = "flashtrie_idle_timeout_ms",
        .gauge_help = "Milliseconds a connection may go without completing a message before it is closed (idle_timeout_ms; 0 = never).",
        .doc = "a connection that completes no message for this long (idle, or stuck in half a message) and awaits no reply is closed, in milliseconds; 0 = never"},
    [FT_CONFIG_S_PROBE_INTERVAL_MS] = {.name = "probe_interval_ms",
        .type = FT_CONFIG_INT, .min = 0, .max = 3600000, .def = "5000",
        AT(probe_interval_ms), .flag = "probe-interval-ms", .flag_arg = "N",
        .show = SHOWN,
        .doc = "every this many milliseconds the server PINGs each of its listeners from inside; one that does not answer turns /healthz 503; 0 = off"},
    [FT_CONFIG_S_PROBE_RESTART_AFTER] = {.name = "probe_restart_after",
        .type = FT_CONFIG_INT, .min = 0, .max = 1000, .def = "2",
        AT(probe_restart_after), .flag = "probe-restart-after",
        .flag_arg = "N", .show = SHOWN,
        .doc = "a listener that fails this many probes in a row in a way a restart mends (no answer while no new connection reaches the server: the nng 1.5.2 wedge; an ipc socket file gone) is closed and opened again (its connections are closed; clients reconnect); 0 = never"},
    [FT_CONFIG_S_IPC_MODE] = {.name = "ipc_mode", .type = FT_CONFIG_STRING,
        STRMAX(ipc_mode), .def = "0660", .url = FTI_URL_MODE, AT(ipc_mode),
        .flag = "ipc-mode", .flag_arg = "MODE", .show = SHOWN,
        .doc = "file mode of every ipc:// listener's socket, in octal; empty = what the umask leaves"},
    [FT_CONFIG_S_ADMIN_RELOAD] = {.name = "admin_reload", .type = FT_CONFIG_BOOL,
        .max = 1, .def = "false", .reloadable = 1, AT(admin_reload),
        .flag = "admin-reload", .show = SHOWN,
        .doc = "allow RELOAD over the wire, on admin listeners only"},
    [FT_CONFIG_S_LOG_LEVEL] = {.name = "log_level", .type = FT_CONFIG_ENUM,
        .def = "info", .choices = log_choices, .reloadable = 1, AT(log_level),
        .flag = "log-level", .flag_arg = "L", .show = SHOWN,
        .hook = FT_CONFIG_HOOK_LOG_LEVEL,
        .doc = "least severe message logged"},
    [FT_CONFIG_S_LOG_FILE] = {.name = "log_file", .type = FT_CONFIG_STRING,
        STRMAX(log_file), .def = "", .reloadable = 1, AT(log_file),
        .flag = "log-file", .flag_arg = "F", .show = SHOWN,
        .hook = FT_CONFIG_HOOK_LOG_FILE,
        .doc = "file the log is appended to; empty = stderr; reopened on reload (log rotation)"},
    [FT_CONFIG_S_METRICS] = {.name = "metrics", .type = FT_CONFIG_STRING,
        STRMAX(metrics), .def = "", .url = FTI_URL_HTTP, AT(metrics),
        .flag = "metrics", .flag_arg = "URL",
        .show = SHOWN | FT_CONFIG_SHOW_CHECK,
        .doc = "http:// address serving /metrics, /healthz, /livez, /readyz; empty = off"},
    /* At most FT_CLUSTER_MAX_RANKS (router/cluster.h) ranks: a larger
     * world passed every check here and was refused only at start, once
     * the manifest was open ("the world must be 2..1024"). */
    [FT_CONFIG_S_CLUSTER_RANK] = {.name = "cluster.rank", .type = FT_CONFIG_INT,
        .min = 0, .max = 1023, .def = "0", AT(cluster_rank), .show = SHOWN,
        .doc = "this process's rank in a multi-process shard group"},
    [FT_CONFIG_S_CLUSTER_WORLD] = {.name = "cluster.world",
        .type = FT_CONFIG_INT, .min = 1, .max = 1024, .def = "1",
        AT(cluster_world), .show = SHOWN,
        .doc = "number of processes in the shard group; 1 = no cluster"},
    [FT_CONFIG_S_CLUSTER_COORDINATOR] = {.name = "cluster.coordinator",
        .type = FT_CONFIG_STRING, STRMAX(cluster_coordinator), .def = "",
        .url = FTI_URL_PEER, AT(cluster_coordinator), .show = SHOWN,
        .doc = "nng address of rank 0's bootstrap listener; required when world > 1"},
    [FT_CONFIG_S_CLUSTER_JOIN_TIMEOUT_MS] = {.name = "cluster.join_timeout_ms",
        .type = FT_CONFIG_INT, .min = 100, .max = 86400000, .def = "60000",
        AT(cluster_join_timeout_ms), .show = SHOWN,
        .doc = "at start, how long rank 0 waits for every rank to register (and a rank for its session), in milliseconds"},
    [FT_CONFIG_S_CLUSTER_STEP_TIMEOUT_MS] = {.name = "cluster.step_timeout_ms",
        .type = FT_CONFIG_INT, .min = 10, .max = 600000, .def = "10000",
        AT(cluster_step_timeout_ms), .show = SHOWN,
        .doc = "how long a rank waits for one message of a running batch before the rank that owes it is down, in milliseconds"},
    [FT_CONFIG_S_CLUSTER_SECRET] = {.name = "cluster.secret",
        .type = FT_CONFIG_STRING, STRMAX(cluster_secret), .def = "",
        AT(cluster_secret),
        .doc = "shared secret every rank sends when it registers; a rank with another is refused; empty = none (travels in clear: the coordinator has no TLS)"},
};

/* The fields of one listeners element: not settings of their own (no
 * flag, gauge or hook), shown in INFO with their listener. */
const ft_config_row ft_config_listener_rows[FT_CONFIG_L_NFIELDS] = {
    [FT_CONFIG_L_URL] = {.name = "url", .type = FT_CONFIG_STRING, LSTRMAX(url),
        .def = "", .url = FTI_URL_NNG, LAT(url), .show = SHOWN,
        .doc = "tcp://HOST:PORT, tls+tcp://HOST:PORT or ipc://PATH; required"},
    [FT_CONFIG_L_ADMIN] = {.name = "admin", .type = FT_CONFIG_BOOL, .max = 1,
        .def = "false", LAT(admin), .show = SHOWN,
        .doc = "admin commands (RELOAD) are accepted on this listener"},
    [FT_CONFIG_L_TLS_CERT] = {.name = "tls.cert", .type = FT_CONFIG_STRING,
        LSTRMAX(tls_cert), .def = "", .must_exist = 1, LAT(tls_cert),
        .show = SHOWN,
        .doc = "PEM certificate (chain) of the server; required for tls+tcp://"},
    [FT_CONFIG_L_TLS_KEY] = {.name = "tls.key", .type = FT_CONFIG_STRING,
        LSTRMAX(tls_key), .def = "", .must_exist = 1, LAT(tls_key),
        .show = SHOWN,
        .doc = "PEM private key of tls.cert; required for tls+tcp://"},
    [FT_CONFIG_L_TLS_CA] = {.name = "tls.ca", .type = FT_CONFIG_STRING,
        LSTRMAX(tls_ca), .def = "", .must_exist = 1, LAT(tls_ca),
        .show = SHOWN,
        .doc = "PEM CA bundle client certificates are checked against"},
    [FT_CONFIG_L_TLS_VERIFY] = {.name = "tls.verify_client",
        .type = FT_CONFIG_BOOL, .max = 1, .def = "false", LAT(tls_verify),
        .show = SHOWN,
        .doc = "require and verify a client certificate (needs tls.ca)"},
};

void fti_cfg_errf(char *buf, size_t len, const char *fmt, ...)
{
    if (buf == NULL || len == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    fti_verrf(buf, len, fmt, ap);
    va_end(ap);
    /* Messages quote what the file said; a control character in a quoted
     * value (a newline inside a string) must not split the one line. */
    fti_oneline(buf);
}

void fti_cfg_where(const ft_config *cfg, ft_config_source src, char *out,
                   size_t outlen)
{
    switch (src.kind) {
    case FT_CONFIG_SRC_FILE:
        snprintf(out, outlen, "%s:%d", cfg->path, src.line);
        break;
    case FT_CONFIG_SRC_CLI: snprintf(out, outlen, "cli"); break;
    default: snprintf(out, outlen, "default"); break;
    }
}

/* src_text writes a source as the dump shows it: default, file:LINE, cli. */
static void src_text(ft_config_source src, char *out, size_t outlen)
{
    switch (src.kind) {
    case FT_CONFIG_SRC_FILE: snprintf(out, outlen, "file:%d", src.line); break;
    case FT_CONFIG_SRC_CLI: snprintf(out, outlen, "cli"); break;
    default: snprintf(out, outlen, "default"); break;
    }
}

/* ---- storing values ---- */

int fti_cfg_store_int(const ft_config_row *r, void *base, long long v,
                      const char *who, char *errbuf, size_t errlen)
{
    if (r->type != FT_CONFIG_INT) {
        fti_cfg_errf(errbuf, errlen, "%s: expected %s, got an integer", who,
                     r->type == FT_CONFIG_BOOL ? "true or false"
                     : r->type == FT_CONFIG_INT_LIST ? "a list of integers"
                     : r->type == FT_CONFIG_LISTENERS ? "a list of groups"
                                                      : "a string");
        return FT_ECONFIG;
    }
    if (v < r->min || v > r->max) {
        fti_cfg_errf(errbuf, errlen, "%s: must be %lld..%lld, got %lld", who,
                     r->min, r->max, v);
        return FT_ECONFIG;
    }
    unsigned char *p = (unsigned char *)base + r->off;
    if (r->size == sizeof(uint64_t))
        *(uint64_t *)p = (uint64_t)v;
    else
        *(uint32_t *)p = (uint32_t)v;
    return FT_OK;
}

int fti_cfg_store_bool(const ft_config_row *r, void *base, int v,
                       const char *who, char *errbuf, size_t errlen)
{
    if (r->type != FT_CONFIG_BOOL) {
        fti_cfg_errf(errbuf, errlen, "%s: expected %s, got a boolean", who,
                     r->type == FT_CONFIG_INT ? "an integer"
                     : r->type == FT_CONFIG_INT_LIST ? "a list of integers"
                     : r->type == FT_CONFIG_LISTENERS ? "a list of groups"
                                                      : "a string");
        return FT_ECONFIG;
    }
    *(int *)((unsigned char *)base + r->off) = v ? 1 : 0;
    return FT_OK;
}

/* port_ok says whether s (the part of a URL after its scheme) is
 * "HOST:PORT" with PORT a decimal 1..65535 and a HOST: a name or IPv4
 * address (no colon, no bracket), "*", or an IPv6 address in brackets
 * ("[::1]": hex digits, colons and dots only), as nng parses them. */
static int port_ok(const char *s, size_t n)
{
    const char *c = NULL;
    for (size_t i = 0; i < n; i++)
        if (s[i] == ':')
            c = s + i;
    if (c == NULL || c == s || c + 1 == s + n || s + n - (c + 1) > 5)
        return 0;
    if (s[0] == '[') {
        if (c[-1] != ']' || c - s < 3)
            return 0;
        for (const char *q = s + 1; q < c - 1; q++)
            if (!(*q == ':' || *q == '.' || (*q >= '0' && *q <= '9') ||
                  (*q >= 'a' && *q <= 'f') || (*q >= 'A' && *q <= 'F')))
                return 0;
    } else {
        for (const char *q = s; q < c; q++)
            if (*q == ':' || *q == '[' || *q == ']')
                return 0;
    }
    long port = 0;
    for (const char *q = c + 1; q < s + n; q++) {
        if (*q < '0' || *q > '9')
            return 0;
        port = port * 10 + (*q - '0');
    }
    return port >= 1 && port <= 65535;
}

int ft_config_cpus_parse(const char *s, unsigned char *mask, char *why,
                         size_t whylen)
{
    memset(mask, 0, FT_CONFIG_CPU_LIMIT / 8);
    int n = 0;
    const char *p = s;
    while (*p) {
        const char *item = p;
        unsigned long lo, hi;
        char *end;
        if (*p < '0' || *p > '9')
            goto bad;
        errno = 0;
        lo = strtoul(p, &end, 10);
        hi = lo;
        p = end;
        if (*p == '-') {
            p++;
            if (*p < '0' || *p > '9')
                goto bad;
            hi = strtoul(p, &end, 10);
            p = end;
        }
        if (errno || lo >= FT_CONFIG_CPU_LIMIT || hi >= FT_CONFIG_CPU_LIMIT) {
            snprintf(why, whylen, "CPU list: '%.*s' (at byte %zu of '%s'): "
                     "CPUs are 0..%d", (int)(p - item), item,
                     (size_t)(item - s) + 1, s, FT_CONFIG_CPU_LIMIT - 1);
            return -1;
        }
        if (hi < lo) {
            snprintf(why, whylen, "CPU list: '%.*s' (at byte %zu of '%s'): "
                     "a range runs from low to high", (int)(p - item), item,
                     (size_t)(item - s) + 1, s);
            return -1;
        }
        for (unsigned long c = lo; c <= hi; c++)
            if (!(mask[c / 8] & (1u << (c % 8)))) {
                mask[c / 8] |= (unsigned char)(1u << (c % 8));
                n++;
            }
        if (*p == ',' && p[1] != 0)
            p++;
        else if (*p != 0)
            goto bad;
        continue;
    bad:
        snprintf(why, whylen, "expected a CPU list such as \"0-3,8\", got "
                 "'%s' (at byte %zu)", s, (size_t)(p - s) + 1);
        return -1;
    }
    return n;
}

/* url_ok checks v as a URL of the given kind; on failure writes why. */
static int url_ok(int kind, const char *v, char *why, size_t whylen)
{
    if (kind == FTI_URL_CPUS) {
        unsigned char mask[FT_CONFIG_CPU_LIMIT / 8];
        return ft_config_cpus_parse(v, mask, why, whylen) >= 0;
    }
    if (kind == FTI_URL_MODE) {
        size_t n = strlen(v);
        int ok = n >= 3 && n <= 4;
        for (size_t i = 0; ok && i < n; i++)
            ok = v[i] >= '0' && v[i] <= '7';
        if (ok && n == 4 && v[0] != '0')
            ok = 0;
        if (!ok)
            snprintf(why, whylen, "expected an octal file mode 000..0777 "
                     "(\"0660\"), got '%s'", v);
        return ok;
    }
    if (kind == FTI_URL_HTTP) {
        if (strncmp(v, "http://", 7) == 0) {
            const char *host = v + 7;
            size_t n = strcspn(host, "/");
            if (port_ok(host, n))
                return 1;
        }
        snprintf(why, whylen, "expected http://HOST:PORT, got '%s'", v);
        return 0;
    }
    /* The command line lists listeners separated by commas, so a URL
     * holding one (or a blank, which the list trims) could not be given
     * there; no usable nng address needs either. */
    for (const char *p = v; *p; p++)
        if (*p == ',' || (unsigned char)*p <= ' ') {
            snprintf(why, whylen, "a URL holds no commas or blanks, got '%s'",
                     v);
            return 0;
        }
    if (strncmp(v, "tcp://", 6) == 0 && port_ok(v + 6, strlen(v + 6)))
        return 1;
    if (strncmp(v, "tls+tcp://", 10) == 0 && port_ok(v + 10, strlen(v + 10)))
        return 1;
    if (strncmp(v, "ipc://", 6) == 0 && v[6] != 0)
        return 1;
    snprintf(why, whylen,
             kind == FTI_URL_PEER
                 ? "expected tcp://HOST:PORT or ipc://PATH, got '%s'"
                 : "expected tcp://HOST:PORT, tls+tcp://HOST:PORT or "
                   "ipc://PATH, got '%s'",
             v);
    return 0;
}

int fti_cfg_store_string(const ft_config_row *r, void *base, const char *v,
                         const char *who, char *errbuf, size_t errlen)
{
    unsigned char *p = (unsigned char *)base + r->off;
    if (r->type == FT_CONFIG_ENUM) {
        for (int i = 0; r->choices[i] != NULL; i++)
            if (strcmp(v, r->choices[i]) == 0) {
                *(int *)p = i;
                return FT_OK;
            }
        char list[128] = "";
        for (int i = 0; r->choices[i] != NULL; i++) {
            if (i)
                strncat(list, "|", sizeof list - strlen(list) - 1);
            strncat(list, r->choices[i], sizeof list - strlen(list) - 1);
        }
        fti_cfg_errf(errbuf, errlen, "%s: must be one of %s, got '%s'", who,
                     list, v);
        return FT_ECONFIG;
    }
    if (r->type != FT_CONFIG_STRING) {
        fti_cfg_errf(errbuf, errlen, "%s: expected %s, got a string", who,
                     r->type == FT_CONFIG_INT ? "an integer"
                     : r->type == FT_CONFIG_BOOL ? "true or false"
                     : r->type == FT_CONFIG_INT_LIST ? "a list of integers"
                                                     : "a list of groups");
        return FT_ECONFIG;
    }
    size_t n = strlen(v);
    if (n > (size_t)r->max) {
        fti_cfg_errf(errbuf, errlen, "%s: longer than %lld bytes", who,
                     r->max);
        return FT_ECONFIG;
    }
    char why[384];
    /* An empty URL means "off" (metrics, coordinator); a listener without
     * one is refused by ft_config_validate, which knows the element. */
    if (r->url != FTI_URL_NONE && n > 0 && !url_ok(r->url, v, why, sizeof why)) {
        fti_cfg_errf(errbuf, errlen, "%s: %s", who, why);
        return FT_ECONFIG;
    }
    memcpy(p, v, n + 1);
    return FT_OK;
}

int fti_cfg_store_int_list(const ft_config_row *r, void *base,
                           const long long *v, size_t n, const char *who,
                           char *errbuf, size_t errlen)
{
    if (r->type != FT_CONFIG_INT_LIST) {
        fti_cfg_errf(errbuf, errlen, "%s: expected %s, got a list", who,
                     r->type == FT_CONFIG_INT ? "an integer"
                     : r->type == FT_CONFIG_BOOL ? "true or false"
                     : r->type == FT_CONFIG_LISTENERS ? "a list of groups"
                                                      : "a string");
        return FT_ECONFIG;
    }
    if (n == 0 || n > r->max_count) {
        fti_cfg_errf(errbuf, errlen, "%s: must hold 1..%zu integers, got %zu",
                     who, r->max_count, n);
        return FT_ECONFIG;
    }
    for (size_t i = 0; i < n; i++) {
        if (v[i] < r->min || v[i] > r->max) {
            fti_cfg_errf(errbuf, errlen,
                         "%s: element %zu must be %lld..%lld, got %lld", who,
                         i, r->min, r->max, v[i]);
            return FT_ECONFIG;
        }
        for (size_t j = 0; j < i; j++)
            if (v[j] == v[i]) {
                fti_cfg_errf(errbuf, errlen, "%s: %lld is listed twice", who,
                             v[i]);
                return FT_ECONFIG;
            }
    }
    uint32_t *out = (uint32_t *)((unsigned char *)base + r->off);
    for (size_t i = 0; i < n; i++)
        out[i] = (uint32_t)v[i];
    *(uint32_t *)((unsigned char *)base + r->count_off) = (uint32_t)n;
    return FT_OK;
}

/* ---- text values (defaults and the command line) ---- */

/* parse_ll parses a whole decimal integer, an optional '-' first (so that
 * "-1" is reported as out of range, not as a non-number). */
static int parse_ll(const char *s, long long *out)
{
    const char *p = s;
    int neg = 0;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    if (*p == 0)
        return -1;
    unsigned long long v = 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        unsigned d = (unsigned)(*p - '0');
        if (v > (9223372036854775807ULL - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = neg ? -(long long)v : (long long)v;
    return 0;
}

/* next_item copies the next comma-separated item of *s (spaces trimmed)
 * into item and advances *s, which is NULL after the last item (start it
 * at NULL for an empty list); 0 at the end, -1 when an item is too long.
 * A comma always has an item after it, so "a," ends with an empty item
 * (refused by the callers) rather than passing for "a". */
static int next_item(const char **s, char *item, size_t cap)
{
    const char *p = *s;
    if (p == NULL)
        return 0;
    const char *e = strchr(p, ',');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    *s = e ? e + 1 : NULL;
    while (n && (*p == ' ' || *p == '\t')) {
        p++;
        n--;
    }
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
        n--;
    if (n >= cap)
        return -1;
    memcpy(item, p, n);
    item[n] = 0;
    return 1;
}

void fti_cfg_listener_init(ft_config_listener *l, ft_config_source at)
{
    memset(l, 0, sizeof *l);
    for (int i = 0; i < FT_CONFIG_L_NFIELDS; i++)
        l->src[i] = at;
    l->at = at;
}

/* set_listeners replaces the listeners by plain ones at the URLs of the
 * comma-separated list v. */
static int set_listeners(ft_config *cfg, const char *v, ft_config_source src,
                         const char *who, char *errbuf, size_t errlen)
{
    ft_config_listener tmp[FT_CONFIG_MAX_LISTENERS];
    char item[FT_CONFIG_URL_MAX];
    const ft_config_row *ur = &ft_config_listener_rows[FT_CONFIG_L_URL];
    uint32_t n = 0;
    int rc;
    const char *s = v[0] ? v : NULL;
    while ((rc = next_item(&s, item, sizeof item)) != 0) {
        if (rc < 0) {
            fti_cfg_errf(errbuf, errlen, "%s: a URL is longer than %d bytes",
                         who, FT_CONFIG_URL_MAX - 1);
            return FT_ECONFIG;
        }
        if (n == FT_CONFIG_MAX_LISTENERS) {
            fti_cfg_errf(errbuf, errlen, "%s: more than %d listeners", who,
                         FT_CONFIG_MAX_LISTENERS);
            return FT_ECONFIG;
        }
        fti_cfg_listener_init(&tmp[n], src);
        if (item[0] == 0) {
            fti_cfg_errf(errbuf, errlen, "%s: empty URL in '%s'", who, v);
            return FT_ECONFIG;
        }
        if ((rc = fti_cfg_store_string(ur, &tmp[n], item, who, errbuf,
                                       errlen)) != FT_OK)
            return rc;
        n++;
    }
    if (n == 0) {
        fti_cfg_errf(errbuf, errlen, "%s: expected at least one URL", who);
        return FT_ECONFIG;
    }
    memcpy(cfg->listeners, tmp, n * sizeof tmp[0]);
    cfg->n_listeners = n;
    return FT_OK;
}

/* set_text stores the text form v of row r of base. */
static int set_text(ft_config *cfg, const ft_config_row *r, void *base,
                    const char *v, ft_config_source src, const char *who,
                    char *errbuf, size_t errlen)
{
    long long x;
    switch (r->type) {
    case FT_CONFIG_INT:
        if (parse_ll(v, &x)) {
            fti_cfg_errf(errbuf, errlen, "%s: expected an integer, got '%s'",
                         who, v);
            return FT_ECONFIG;
        }
        return fti_cfg_store_int(r, base, x, who, errbuf, errlen);
    case FT_CONFIG_BOOL:
        if (strcmp(v, "true") && strcmp(v, "false")) {
            fti_cfg_errf(errbuf, errlen, "%s: expected true or false, got '%s'",
                         who, v);
            return FT_ECONFIG;
        }
        return fti_cfg_store_bool(r, base, v[0] == 't', who, errbuf, errlen);
    case FT_CONFIG_STRING:
    case FT_CONFIG_ENUM:
        return fti_cfg_store_string(r, base, v, who, errbuf, errlen);
    case FT_CONFIG_INT_LIST: {
        long long vals[FT_CONFIG_MAX_DEVICES + 1];
        char item[32];
        size_t n = 0;
        int rc;
        const char *s = v[0] ? v : NULL;
        while ((rc = next_item(&s, item, sizeof item)) != 0) {
            if (rc < 0 || parse_ll(item, &x)) {
                fti_cfg_errf(errbuf, errlen,
                             "%s: expected comma-separated integers, got '%s'",
                             who, v);
                return FT_ECONFIG;
            }
            if (n == r->max_count) {
                fti_cfg_errf(errbuf, errlen,
                             "%s: must hold 1..%zu integers, got more", who,
                             r->max_count);
                return FT_ECONFIG;
            }
            vals[n++] = x;
        }
        return fti_cfg_store_int_list(r, base, vals, n, who, errbuf, errlen);
    }
    case FT_CONFIG_LISTENERS:
        return set_listeners(cfg, v, src, who, errbuf, errlen);
    }
    return FT_EINTERNAL;
}

void ft_config_init(ft_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    ft_config_source d = {FT_CONFIG_SRC_DEFAULT, 0};
    for (int i = 0; i < FT_CONFIG_NSETTINGS; i++) {
        /* The defaults are in the table and pass its own checks; a test
         * asserts that, so the result is not looked at here. */
        (void)set_text(cfg, &ft_config_rows[i], cfg, ft_config_rows[i].def, d,
                       ft_config_rows[i].name, NULL, 0);
        cfg->src[i] = d;
    }
}

const ft_config_row *ft_config_find(const char *name)
{
    for (int i = 0; i < FT_CONFIG_NSETTINGS; i++)
        if (strcmp(name, ft_config_rows[i].name) == 0)
            return &ft_config_rows[i];
    if (strncmp(name, "listeners[].", 12) == 0)
        for (int i = 0; i < FT_CONFIG_L_NFIELDS; i++)
            if (strcmp(name + 12, ft_config_listener_rows[i].name) == 0)
                return &ft_config_listener_rows[i];
    return NULL;
}

const ft_config_row *ft_config_find_flag(const char *flag)
{
    for (int i = 0; i < FT_CONFIG_NSETTINGS; i++)
        if (ft_config_rows[i].flag && strcmp(flag, ft_config_rows[i].flag) == 0)
            return &ft_config_rows[i];
    return NULL;
}

int ft_config_set(ft_config *cfg, const char *name, const char *value,
                  ft_config_source src, char *errbuf, size_t errlen)
{
    const ft_config_row *r = NULL;
    for (int i = 0; i < FT_CONFIG_NSETTINGS && r == NULL; i++)
        if (strcmp(name, ft_config_rows[i].name) == 0)
            r = &ft_config_rows[i];
    char where[FT_CONFIG_PATH_MAX + 32], who[FT_CONFIG_PATH_MAX + 128];
    fti_cfg_where(cfg, src, where, sizeof where);
    snprintf(who, sizeof who, "%s: %s", where, name);
    if (r == NULL) {
        fti_cfg_errf(errbuf, errlen, "%s: unknown setting", who);
        return FT_ECONFIG;
    }
    int rc = set_text(cfg, r, cfg, value, src, who, errbuf, errlen);
    if (rc == FT_OK)
        cfg->src[r - ft_config_rows] = src;
    return rc;
}

/* ---- formatting ---- */

int ft_config_value(const ft_config_row *r, const void *base, ft_buf *out)
{
    const unsigned char *p = (const unsigned char *)base + r->off;
    switch (r->type) {
    case FT_CONFIG_INT:
        if (r->size == sizeof(uint64_t))
            return ft_buf_printf(out, "%llu",
                                 (unsigned long long)*(const uint64_t *)p);
        return ft_buf_printf(out, "%u", *(const uint32_t *)p);
    case FT_CONFIG_BOOL:
        return ft_buf_printf(out, "%s", *(const int *)p ? "true" : "false");
    case FT_CONFIG_STRING:
        return ft_buf_printf(out, "%s", (const char *)p);
    case FT_CONFIG_ENUM:
        return ft_buf_printf(out, "%s", r->choices[*(const int *)p]);
    case FT_CONFIG_INT_LIST: {
        const uint32_t *v = (const uint32_t *)p;
        uint32_t n = *(const uint32_t *)((const unsigned char *)base + r->count_off);
        for (uint32_t i = 0; i < n; i++)
            if (ft_buf_printf(out, i ? ",%u" : "%u", v[i]))
                return FT_ENOMEM;
        return FT_OK;
    }
    case FT_CONFIG_LISTENERS: {
        const ft_config *cfg = base;
        for (uint32_t i = 0; i < cfg->n_listeners; i++)
            if (ft_buf_printf(out, i ? ",%s" : "%s", cfg->listeners[i].url))
                return FT_ENOMEM;
        return FT_OK;
    }
    }
    return FT_EINTERNAL;
}

/* dump_line appends "name: value (source)", an empty value shown as "". */
static int dump_line(ft_buf *out, const char *name, const ft_config_row *r,
                     const void *base, ft_config_source src)
{
    char s[32];
    src_text(src, s, sizeof s);
    if (ft_buf_printf(out, "%s: ", name))
        return FT_ENOMEM;
    size_t at = out->len;
    if (ft_config_value(r, base, out))
        return FT_ENOMEM;
    if (out->len == at && ft_buf_printf(out, "\"\""))
        return FT_ENOMEM;
    return ft_buf_printf(out, " (%s)\n", s);
}

int ft_config_dump(const ft_config *cfg, ft_buf *out)
{
    for (int i = 0; i < FT_CONFIG_NSETTINGS; i++) {
        const ft_config_row *r = &ft_config_rows[i];
        if (!(r->show & FT_CONFIG_SHOW_INFO))
            continue;
        if (dump_line(out, r->name, r, cfg, cfg->src[i]))
            return FT_ENOMEM;
        if (r->type != FT_CONFIG_LISTENERS)
            continue;
        for (uint32_t l = 0; l < cfg->n_listeners; l++)
            for (int f = 0; f < FT_CONFIG_L_NFIELDS; f++) {
                char name[64];
                if (!(ft_config_listener_rows[f].show & FT_CONFIG_SHOW_INFO))
                    continue;
                snprintf(name, sizeof name, "listeners[%u].%s", l,
                         ft_config_listener_rows[f].name);
                if (dump_line(out, name, &ft_config_listener_rows[f],
                              &cfg->listeners[l], cfg->listeners[l].src[f]))
                    return FT_ENOMEM;
            }
    }
    return FT_OK;
}

static int doc_row(ft_buf *out, const char *name, const ft_config_row *r)
{
    static const char *const types[] = {
        [FT_CONFIG_INT] = "integer", [FT_CONFIG_BOOL] = "bool",
        [FT_CONFIG_STRING] = "string", [FT_CONFIG_ENUM] = "enum",
        [FT_CONFIG_INT_LIST] = "list of integers",
        [FT_CONFIG_LISTENERS] = "list of groups"};
    int rc = ft_buf_printf(out, "| `%s` | %s | `%s` | ", name, types[r->type],
                           r->def[0] ? r->def : "\"\"");
    switch (r->type) {
    case FT_CONFIG_INT:
        rc |= ft_buf_printf(out, "%lld..%lld", r->min, r->max);
        break;
    case FT_CONFIG_INT_LIST:
        rc |= ft_buf_printf(out, "1..%zu distinct, each %lld..%lld",
                            r->max_count, r->min, r->max);
        break;
    case FT_CONFIG_LISTENERS:
        rc |= ft_buf_printf(out, "1..%zu, distinct URLs", r->max_count);
        break;
    case FT_CONFIG_ENUM:
        for (int i = 0; r->choices[i] != NULL; i++)
            rc |= ft_buf_printf(out, i ? " \\| `%s`" : "`%s`", r->choices[i]);
        break;
    case FT_CONFIG_STRING:
        rc |= ft_buf_printf(out, "%sat most %lld bytes",
                            r->url == FTI_URL_NNG ||
                                    r->url == FTI_URL_PEER ? "nng URL, "
                            : r->url == FTI_URL_HTTP ? "http URL, "
                            : r->url == FTI_URL_MODE ? "octal mode, "
                            : r->url == FTI_URL_CPUS ? "CPU list, "
                            : r->must_exist          ? "existing file, "
                                                     : "",
                            r->max);
        break;
    case FT_CONFIG_BOOL:
        rc |= ft_buf_printf(out, "`true` \\| `false`");
        break;
    }
    rc |= ft_buf_printf(out, " | %s | %s |\n", r->reloadable ? "yes" : "no",
                        r->doc);
    return rc ? FT_ENOMEM : FT_OK;
}

int ft_config_doc(ft_buf *out)
{
    if (ft_buf_printf(out, "| setting | type | default | bounds | reload | "
                           "description |\n|---|---|---|---|---|---|\n"))
        return FT_ENOMEM;
    for (int i = 0; i < FT_CONFIG_NSETTINGS; i++) {
        if (doc_row(out, ft_config_rows[i].name, &ft_config_rows[i]))
            return FT_ENOMEM;
        if (ft_config_rows[i].type != FT_CONFIG_LISTENERS)
            continue;
        for (int f = 0; f < FT_CONFIG_L_NFIELDS; f++) {
            char name[64];
            snprintf(name, sizeof name, "listeners[].%s",
                     ft_config_listener_rows[f].name);
            if (doc_row(out, name, &ft_config_listener_rows[f]))
                return FT_ENOMEM;
        }
    }
    return FT_OK;
}

/* ---- checks across settings ---- */

/* fail writes "WHERE: name: reason" for a value from src. */
static int fail(const ft_config *cfg, ft_config_source src, const char *name,
                char *errbuf, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static int fail(const ft_config *cfg, ft_config_source src, const char *name,
                char *errbuf, size_t errlen, const char *fmt, ...)
{
    char where[FT_CONFIG_PATH_MAX + 32], why[FT_CONFIG_PATH_MAX + 128];
    fti_cfg_where(cfg, src, where, sizeof where);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    fti_cfg_errf(errbuf, errlen, "%s: %s: %s", where, name, why);
    return FT_ECONFIG;
}

/* addr_of gives the address a URL of this server listens on: HOST:PORT
 * of tcp://, tls+tcp:// and http:// (the metrics), the path of ipc://
 * (*ipc set); NULL for anything else.  Compared as written: two spellings
 * of one address (localhost and 127.0.0.1) are not told alike. */
static const char *addr_of(const char *url, size_t *len, int *ipc)
{
    static const char *const tcp[] = {"tcp://", "tls+tcp://", "http://"};
    *ipc = strncmp(url, "ipc://", 6) == 0;
    if (*ipc) {
        *len = strlen(url + 6);
        return url + 6;
    }
    for (size_t i = 0; i < sizeof tcp / sizeof tcp[0]; i++) {
        size_t n = strlen(tcp[i]);
        if (strncmp(url, tcp[i], n) == 0) {
            *len = strcspn(url + n, "/");
            return url + n;
        }
    }
    return NULL;
}

/* same_addr says whether URLs a and b would listen on one address. */
static int same_addr(const char *a, const char *b)
{
    size_t na = 0, nb = 0; /* set where addr_of finds an address */
    int ia = 0, ib = 0;
    const char *x = addr_of(a, &na, &ia), *y = addr_of(b, &nb, &ib);
    return x && y && ia == ib && na == nb && memcmp(x, y, na) == 0;
}

int ft_config_validate(const ft_config *cfg, char *errbuf, size_t errlen)
{
    if (cfg->index_path[0] == 0) {
        /* No line to point at: the index is missing, not wrong. */
        fti_cfg_errf(errbuf, errlen,
                     "%s: index: required (set it in the file or give --index)",
                     cfg->path[0] ? cfg->path : "cli");
        return FT_ECONFIG;
    }
    if (cfg->n_listeners == 0)
        return fail(cfg, cfg->src[FT_CONFIG_S_LISTENERS], "listeners", errbuf,
                    errlen, "at least one listener is required");
    for (uint32_t i = 0; i < cfg->n_listeners; i++) {
        const ft_config_listener *l = &cfg->listeners[i];
        char name[64];
        snprintf(name, sizeof name, "listeners[%u].url", i);
        if (l->url[0] == 0)
            return fail(cfg, l->at, name, errbuf, errlen, "required");
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(cfg->listeners[j].url, l->url) == 0)
                return fail(cfg, l->src[FT_CONFIG_L_URL], name, errbuf,
                            errlen, "'%s' is also listeners[%u]'s URL",
                            l->url, j);
        int tls = strncmp(l->url, "tls+tcp://", 10) == 0;
        if (tls && l->tls_cert[0] == 0) {
            snprintf(name, sizeof name, "listeners[%u].tls.cert", i);
            return fail(cfg, l->at, name, errbuf, errlen,
                        "required for a tls+tcp:// listener");
        }
        if (tls && l->tls_key[0] == 0) {
            snprintf(name, sizeof name, "listeners[%u].tls.key", i);
            return fail(cfg, l->at, name, errbuf, errlen,
                        "required for a tls+tcp:// listener");
        }
        if (tls && l->tls_verify && l->tls_ca[0] == 0) {
            snprintf(name, sizeof name, "listeners[%u].tls.ca", i);
            return fail(cfg, l->src[FT_CONFIG_L_TLS_VERIFY], name, errbuf,
                        errlen, "required when tls.verify_client is true");
        }
        if (!tls && l->tls_given) {
            snprintf(name, sizeof name, "listeners[%u].tls", i);
            return fail(cfg, l->at, name, errbuf, errlen,
                        "only a tls+tcp:// listener takes a tls group, not '%s'",
                        l->url);
        }
    }
    /* Heavy messages (over 1 MiB) may fill 7/8 of the budget
     * (daemon/serve_budget.h): the largest message must fit there, or it
     * would always be answered BUSY. */
    if (cfg->max_message_bytes > ((uint64_t)1 << 20) &&
        cfg->memory_budget_bytes / 8 * 7 < cfg->max_message_bytes)
    {
        /* Blame the one that was set (the budget when both were). */
        int bud = cfg->src[FT_CONFIG_S_MEMORY_BUDGET_BYTES].kind !=
                  FT_CONFIG_SRC_DEFAULT;
        if (bud)
            return fail(cfg, cfg->src[FT_CONFIG_S_MEMORY_BUDGET_BYTES],
                        "memory_budget_bytes", errbuf, errlen,
                        "%llu leaves messages over 1 MiB %llu bytes (7/8 of "
                        "it), less than max_message_bytes (%llu): the "
                        "largest would always be answered BUSY",
                        (unsigned long long)cfg->memory_budget_bytes,
                        (unsigned long long)(cfg->memory_budget_bytes / 8 * 7),
                        (unsigned long long)cfg->max_message_bytes);
        return fail(cfg, cfg->src[FT_CONFIG_S_MAX_MESSAGE_BYTES],
                    "max_message_bytes", errbuf, errlen,
                    "%llu exceeds the %llu bytes (7/8 of memory_budget_bytes "
                    "%llu) messages over 1 MiB may hold: raise "
                    "memory_budget_bytes too",
                    (unsigned long long)cfg->max_message_bytes,
                    (unsigned long long)(cfg->memory_budget_bytes / 8 * 7),
                    (unsigned long long)cfg->memory_budget_bytes);
    }
    if (cfg->cluster_rank >= cfg->cluster_world)
        return fail(cfg, cfg->src[FT_CONFIG_S_CLUSTER_RANK], "cluster.rank",
                    errbuf, errlen, "must be below cluster.world (%u), got %u",
                    cfg->cluster_world, cfg->cluster_rank);
    if (cfg->cluster_world > 1 && cfg->cluster_coordinator[0] == 0)
        return fail(cfg, cfg->src[FT_CONFIG_S_CLUSTER_WORLD],
                    "cluster.coordinator", errbuf, errlen,
                    "required when cluster.world is %u", cfg->cluster_world);
    /* The cluster's socket has no TLS settings (docs/sharding.md,
     * "Security of the coordinator"): on tls+tcp:// rank 0 listened
     * without a certificate, every handshake failed unseen, and both
     * sides waited out join_timeout_ms ("never reached it"). */
    if (cfg->cluster_world > 1 &&
        strncmp(cfg->cluster_coordinator, "tls+tcp://", 10) == 0)
        return fail(cfg, cfg->src[FT_CONFIG_S_CLUSTER_COORDINATOR],
                    "cluster.coordinator", errbuf, errlen,
                    "'%s': the cluster has no TLS yet; use tcp:// on a "
                    "private network, ipc://, or a tunnel",
                    cfg->cluster_coordinator);
    /* Two sockets of this process on one address: the second failed to
     * listen ("Address in use") only once the index was open (and, for the
     * coordinator's port, once every rank had joined), naming the client
     * listener alone.  Ranks other than 0 open neither listeners nor
     * metrics, and dial the coordinator. */
    if (cfg->cluster_world > 1 && cfg->cluster_rank > 0)
        return FT_OK;
    for (uint32_t i = 0; cfg->metrics[0] && i < cfg->n_listeners; i++)
        if (same_addr(cfg->metrics, cfg->listeners[i].url))
            return fail(cfg, cfg->src[FT_CONFIG_S_METRICS], "metrics", errbuf,
                        errlen, "'%s' has the address of listeners[%u] "
                        "('%s')", cfg->metrics, i, cfg->listeners[i].url);
    if (cfg->cluster_world == 1)
        return FT_OK;
    const char *co = cfg->cluster_coordinator;
    ft_config_source cs = cfg->src[FT_CONFIG_S_CLUSTER_COORDINATOR];
    for (uint32_t i = 0; i < cfg->n_listeners; i++)
        if (same_addr(co, cfg->listeners[i].url))
            return fail(cfg, cs, "cluster.coordinator", errbuf, errlen,
                        "'%s' has the address of listeners[%u] ('%s')", co, i,
                        cfg->listeners[i].url);
    if (cfg->metrics[0] && same_addr(co, cfg->metrics))
        return fail(cfg, cs, "cluster.coordinator", errbuf, errlen,
                    "'%s' has the address of metrics ('%s')", co,
                    cfg->metrics);
    return FT_OK;
}

/* exists checks that path names an existing regular file. */
static int file_check(const ft_config *cfg, ft_config_source src,
                      const char *name, const char *path, char *errbuf,
                      size_t errlen)
{
    struct stat st;
    if (path[0] == 0)
        return FT_OK;
    if (stat(path, &st) != 0)
        return fail(cfg, src, name, errbuf, errlen, "%s %s", path,
                    errno == ENOENT ? "does not exist" : strerror(errno));
    if (!S_ISREG(st.st_mode))
        return fail(cfg, src, name, errbuf, errlen, "%s is not a regular file",
                    path);
    return FT_OK;
}

int ft_config_check_files(const ft_config *cfg, char *errbuf, size_t errlen)
{
    int rc;
    for (int i = 0; i < FT_CONFIG_NSETTINGS; i++) {
        const ft_config_row *r = &ft_config_rows[i];
        if (r->must_exist &&
            (rc = file_check(cfg, cfg->src[i], r->name,
                             (const char *)cfg + r->off, errbuf, errlen)))
            return rc;
    }
    for (uint32_t l = 0; l < cfg->n_listeners; l++)
        for (int f = 0; f < FT_CONFIG_L_NFIELDS; f++) {
            const ft_config_row *r = &ft_config_listener_rows[f];
            char name[64];
            if (!r->must_exist)
                continue;
            snprintf(name, sizeof name, "listeners[%u].%s", l, r->name);
            if ((rc = file_check(cfg, cfg->listeners[l].src[f], name,
                                 (const char *)&cfg->listeners[l] + r->off,
                                 errbuf, errlen)))
                return rc;
        }
    return FT_OK;
}

/* value_of formats row i of cfg, listener fields included for listeners,
 * so that two configurations compare by text. */
static int value_of(const ft_config *cfg, int i, ft_buf *b)
{
    b->len = 0;
    if (ft_config_value(&ft_config_rows[i], cfg, b))
        return FT_ENOMEM;
    if (ft_config_rows[i].type == FT_CONFIG_LISTENERS)
        for (uint32_t l = 0; l < cfg->n_listeners; l++)
            for (int f = 0; f < FT_CONFIG_L_NFIELDS; f++)
                if (ft_buf_printf(b, ";") ||
                    ft_config_value(&ft_config_listener_rows[f],
                                    &cfg->listeners[l], b))
                    return FT_ENOMEM;
    return ft_buf_append(b, "", 0);
}

int ft_config_reload_check(const ft_config *running, const ft_config *next,
                           char *errbuf, size_t errlen)
{
    ft_buf a, b;
    ft_buf_init(&a);
    ft_buf_init(&b);
    int rc = FT_OK;
    for (int i = 0; i < FT_CONFIG_NSETTINGS && rc == FT_OK; i++) {
        if (ft_config_rows[i].reloadable)
            continue;
        if (value_of(running, i, &a) || value_of(next, i, &b)) {
            rc = FT_ENOMEM;
            break;
        }
        if (strcmp((char *)a.data, (char *)b.data) != 0)
            rc = fail(next, next->src[i], ft_config_rows[i].name, errbuf,
                      errlen, "changed, but takes effect only on a restart");
    }
    ft_buf_free(&a);
    ft_buf_free(&b);
    return rc;
}

/* ---- the live settings ---- */

uint64_t ft_config_number(const ft_config_row *r, const ft_config *cfg)
{
    const unsigned char *p = (const unsigned char *)cfg + r->off;
    switch (r->type) {
    case FT_CONFIG_INT:
        if (r->size == sizeof(uint64_t))
            return __atomic_load_n((const uint64_t *)p, __ATOMIC_RELAXED);
        return __atomic_load_n((const uint32_t *)p, __ATOMIC_RELAXED);
    case FT_CONFIG_BOOL:
    case FT_CONFIG_ENUM:
        return (uint64_t)__atomic_load_n((const int *)p, __ATOMIC_RELAXED);
    default: return 0;
    }
}

void ft_config_take_reloadable(ft_config *live, const ft_config *next)
{
    for (int i = 0; i < FT_CONFIG_NSETTINGS; i++) {
        const ft_config_row *r = &ft_config_rows[i];
        /* The other rows keep their values (equal to next's when it passed
         * ft_config_reload_check) and take next's sources, so that the
         * dump names the lines of the file now loaded. */
        live->src[i] = next->src[i];
        if (r->type == FT_CONFIG_LISTENERS)
            for (uint32_t l = 0; l < live->n_listeners && l < next->n_listeners;
                 l++) {
                memcpy(live->listeners[l].src, next->listeners[l].src,
                       sizeof live->listeners[l].src);
                live->listeners[l].at = next->listeners[l].at;
            }
        if (!r->reloadable)
            continue;
        unsigned char *d = (unsigned char *)live + r->off;
        const unsigned char *s = (const unsigned char *)next + r->off;
        switch (r->type) {
        case FT_CONFIG_INT:
            if (r->size == sizeof(uint64_t))
                __atomic_store_n((uint64_t *)d, *(const uint64_t *)s,
                                 __ATOMIC_RELAXED);
            else
                __atomic_store_n((uint32_t *)d, *(const uint32_t *)s,
                                 __ATOMIC_RELAXED);
            break;
        case FT_CONFIG_BOOL:
        case FT_CONFIG_ENUM:
            __atomic_store_n((int *)d, *(const int *)s, __ATOMIC_RELAXED);
            break;
        default:
            /* Strings and lists: the caller keeps their readers out. */
            memcpy(d, s, r->size);
            if (r->count_off)
                memcpy((unsigned char *)live + r->count_off,
                       (const unsigned char *)next + r->count_off,
                       sizeof(uint32_t));
            break;
        }
    }
}

int ft_config_run_hooks(ft_config *live, const ft_config *old,
                        const ft_config_hook_fn hooks[FT_CONFIG_NHOOKS],
                        void *ctx, char *err, size_t errlen)
{
    int done[FT_CONFIG_NHOOKS] = {0};
    for (int i = 0; i < FT_CONFIG_NSETTINGS; i++) {
        const ft_config_row *r = &ft_config_rows[i];
        int h = r->hook;
        if (h <= FT_CONFIG_HOOK_NONE || h >= FT_CONFIG_NHOOKS || done[h] ||
            hooks[h] == NULL || (old != NULL && !r->reloadable))
            continue;
        done[h] = 1;
        int rc = hooks[h](ctx, live, old, err, errlen);
        if (rc != FT_OK)
            return rc;
    }
    return FT_OK;
}
