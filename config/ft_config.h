/*
 * ft_config.h - the settings of "flashtrie serve": one typed table
 * (ft_config_rows) drives parsing a libconfig file, the command-line
 * overrides and serve's flags, the checks, the generated documentation,
 * INFO's config section and the config gauges of /metrics, and each row
 * names the apply hook its value needs, the way valkey's static_configs[]
 * does.  Adding a setting is one row (settings.c) and one paragraph in
 * flashtrie.conf.example (docs/config.md, "Adding a setting").  Public to
 * daemon/ only: nothing below daemon/ reads a configuration file.
 *
 * The life of a configuration:
 *
 *     ft_config c;
 *     ft_config_load(&c, path, err, sizeof err);   // or ft_config_init(&c)
 *     ft_config_set(&c, "index", optarg, FT_CONFIG_SRC_CLI_AT, err, ...);
 *     ft_config_validate(&c, err, sizeof err);     // cross-setting rules
 *     ft_config_check_files(&c, err, sizeof err);  // named files exist
 *
 * Every failing call returns FT_ECONFIG (FT_ENOMEM, FT_EIO where said) and
 * writes one line "WHERE: <setting>: <reason>" into the error buffer, where
 * WHERE is "FILE:LINE" for a value read from a file and "cli" for one set
 * from the command line.  The struct holds plain fixed-size fields, so it
 * can be copied by assignment (a reload loads a new one and swaps).
 */
#ifndef FT_CONFIG_H
#define FT_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "flashtrie/internal/buf.h"
#include "flashtrie.h"

#define FT_CONFIG_PATH_MAX 1024    /* bytes of a path, NUL included */
#define FT_CONFIG_URL_MAX 256      /* bytes of a URL, NUL included */
#define FT_CONFIG_MAX_LISTENERS 16
#define FT_CONFIG_MAX_DEVICES 64

/* ft_config_src_kind says where a setting's value came from. */
typedef enum ft_config_src_kind {
    FT_CONFIG_SRC_DEFAULT = 0,
    FT_CONFIG_SRC_FILE = 1, /* line holds the line number in cfg->path */
    FT_CONFIG_SRC_CLI = 2
} ft_config_src_kind;

typedef struct ft_config_source {
    int kind; /* ft_config_src_kind */
    int line; /* FT_CONFIG_SRC_FILE: 1-based line of the setting */
} ft_config_source;

/* FT_CONFIG_SRC_CLI_AT is the source to hand ft_config_set for a value
 * given on the command line. */
#define FT_CONFIG_SRC_CLI_AT ((ft_config_source){FT_CONFIG_SRC_CLI, 0})

/* Listener fields, in the order of ft_config_listener_rows. */
enum {
    FT_CONFIG_L_URL,
    FT_CONFIG_L_ADMIN,
    FT_CONFIG_L_TLS_CERT,
    FT_CONFIG_L_TLS_KEY,
    FT_CONFIG_L_TLS_CA,
    FT_CONFIG_L_TLS_VERIFY,
    FT_CONFIG_L_NFIELDS
};

/* ft_config_listener is one element of the listeners list. */
typedef struct ft_config_listener {
    char url[FT_CONFIG_URL_MAX];         /* tcp://, tls+tcp:// or ipc:// */
    int admin;                           /* RELOAD etc. allowed here */
    char tls_cert[FT_CONFIG_PATH_MAX];   /* PEM certificate chain */
    char tls_key[FT_CONFIG_PATH_MAX];    /* PEM private key */
    char tls_ca[FT_CONFIG_PATH_MAX];     /* PEM CA bundle for clients */
    int tls_verify;                      /* require a client certificate */
    int tls_given;                       /* a tls group was written */
    ft_config_source src[FT_CONFIG_L_NFIELDS];
    ft_config_source at;                 /* where the element starts */
} ft_config_listener;

/* The engine setting; the order is that of the enum's strings. */
typedef enum ft_config_engine {
    FT_CONFIG_ENGINE_AUTO = 0,
    FT_CONFIG_ENGINE_CPU = 1,
    FT_CONFIG_ENGINE_GPU = 2,
    FT_CONFIG_ENGINE_SHARDS = 3
} ft_config_engine;

/* inline_lone: whether a lone request on an idle server runs on the
 * thread that received it (ft_batcher_run_inline). */
typedef enum ft_config_inline {
    FT_CONFIG_INLINE_AUTO = 0, /* on where the host has 4 or more cores */
    FT_CONFIG_INLINE_ON = 1,
    FT_CONFIG_INLINE_OFF = 2
} ft_config_inline;

/* dup_check: where the server checks a request's duplicate tokens (the
 * one rule whose check reads every token: ~17 instructions a token). */
typedef enum ft_config_dup_check {
    FT_CONFIG_DUP_AUTO = 0,   /* engine where the engine overlaps it (GPU) */
    FT_CONFIG_DUP_DOOR = 1,   /* in the decoder, before the queue */
    FT_CONFIG_DUP_ENGINE = 2  /* beside the engine's work, on its thread */
} ft_config_dup_check;

/* cpus: a CPU list as taskset -c and cpuset files write it ("0-3,8"),
 * CPUs 0..FT_CONFIG_CPU_LIMIT - 1. */
#define FT_CONFIG_CPUS_MAX 256
#define FT_CONFIG_CPU_LIMIT 1024

/* ft_config_cpus_parse reads a CPU list into mask (FT_CONFIG_CPU_LIMIT
 * bits, bit c of byte c / 8 for CPU c, cleared first): its number of CPUs
 * (0 for ""), or -1 with why saying what is wrong and where. */
int ft_config_cpus_parse(const char *s, unsigned char *mask, char *why,
                         size_t whylen);

/* Settings, in the order of ft_config_rows (src[] is indexed by these). */
enum {
    FT_CONFIG_S_INDEX,
    FT_CONFIG_S_LISTENERS,
    FT_CONFIG_S_ENGINE,
    FT_CONFIG_S_DEVICES,
    FT_CONFIG_S_REPLICAS,
    FT_CONFIG_S_CPU_THREADS,
    FT_CONFIG_S_MAX_BATCH,
    FT_CONFIG_S_MAX_WAIT_US,
    FT_CONFIG_S_INLINE_LONE,
    FT_CONFIG_S_DUP_CHECK,
    FT_CONFIG_S_CPUS,
    FT_CONFIG_S_IDLE_SPIN,
    FT_CONFIG_S_QUEUE_DEPTH,
    FT_CONFIG_S_MAX_MESSAGE_BYTES,
    FT_CONFIG_S_MEMORY_BUDGET_BYTES,
    FT_CONFIG_S_MAX_HEAVY_MESSAGES,
    FT_CONFIG_S_LIGHT_REQUEST_COST,
    FT_CONFIG_S_HEAVY_BATCH,
    FT_CONFIG_S_LIGHT_REPLICAS,
    FT_CONFIG_S_MAX_BEAM,
    FT_CONFIG_S_MAX_K,
    FT_CONFIG_S_MAX_T,
    FT_CONFIG_S_MAX_RESULTS,
    FT_CONFIG_S_DEFAULT_DEADLINE_MS,
    FT_CONFIG_S_DRAIN_TIMEOUT_MS,
    FT_CONFIG_S_MAX_CONNECTIONS,
    FT_CONFIG_S_IDLE_TIMEOUT_MS,
    FT_CONFIG_S_PROBE_INTERVAL_MS,
    FT_CONFIG_S_PROBE_RESTART_AFTER,
    FT_CONFIG_S_IPC_MODE,
    FT_CONFIG_S_ADMIN_RELOAD,
    FT_CONFIG_S_LOG_LEVEL,
    FT_CONFIG_S_LOG_FILE,
    FT_CONFIG_S_METRICS,
    FT_CONFIG_S_CLUSTER_RANK,
    FT_CONFIG_S_CLUSTER_WORLD,
    FT_CONFIG_S_CLUSTER_COORDINATOR,
    FT_CONFIG_S_CLUSTER_JOIN_TIMEOUT_MS,
    FT_CONFIG_S_CLUSTER_STEP_TIMEOUT_MS,
    FT_CONFIG_S_CLUSTER_SECRET,
    FT_CONFIG_NSETTINGS
};

/* ft_config is the typed result the daemon reads, and the daemon's live
 * settings: the server reads each value here (reloadable scalars with
 * FT_CONFIG_LIVE), nowhere else.  Strings are never NULL (an unset string
 * is ""). */
typedef struct ft_config {
    char index_path[FT_CONFIG_PATH_MAX];
    ft_config_listener listeners[FT_CONFIG_MAX_LISTENERS];
    uint32_t n_listeners;
    int engine;                          /* ft_config_engine */
    uint32_t devices[FT_CONFIG_MAX_DEVICES];
    uint32_t n_devices;
    uint32_t replicas;
    uint32_t cpu_threads;                /* 0: all cores */
    uint32_t max_batch;
    uint32_t max_wait_us;
    int inline_lone;                     /* ft_config_inline */
    int dup_check;                       /* ft_config_dup_check */
    char cpus[FT_CONFIG_CPUS_MAX];       /* "2-5,8"; "": not pinned */
    int idle_spin;                       /* a SCHED_IDLE spinner per CPU */
    uint32_t queue_depth;
    uint64_t max_message_bytes;
    uint64_t memory_budget_bytes;        /* messages held, receipt to reply */
    uint32_t max_heavy_messages;         /* messages > 1 MiB held at once */
    uint64_t light_request_cost;         /* T x K x beam of the light lane;
                                          * 0: one lane */
    uint32_t heavy_batch;                /* heavy requests per batch */
    uint32_t light_replicas;             /* replicas kept from heavy
                                          * batches (of replicas >= 2) */
    uint32_t max_beam, max_k, max_t, max_results; /* the caps group */
    uint32_t default_deadline_ms;        /* 0: none */
    uint32_t drain_timeout_ms;
    uint32_t max_connections;            /* per listener */
    uint32_t idle_timeout_ms;            /* 0: connections never idle out */
    uint32_t probe_interval_ms;          /* 0: no listener probe */
    uint32_t probe_restart_after;        /* failed probes; 0: never */
    char ipc_mode[8];                    /* octal, "0660"; "": the umask's */
    int admin_reload;
    int log_level;                       /* ft_log_level */
    char log_file[FT_CONFIG_PATH_MAX];   /* "": stderr */
    char metrics[FT_CONFIG_URL_MAX];     /* "": no HTTP listener */
    uint32_t cluster_rank, cluster_world;
    char cluster_coordinator[FT_CONFIG_URL_MAX];
    uint32_t cluster_join_timeout_ms, cluster_step_timeout_ms;
    char cluster_secret[FT_CONFIG_URL_MAX]; /* "": ranks not authenticated */
    char path[FT_CONFIG_PATH_MAX];       /* the file loaded; "" when none */
    ft_config_source src[FT_CONFIG_NSETTINGS];
} ft_config;

/* ft_config_type is the kind of value a row holds. */
typedef enum ft_config_type {
    FT_CONFIG_INT,       /* unsigned integer in min..max */
    FT_CONFIG_BOOL,      /* true or false */
    FT_CONFIG_STRING,    /* at most max bytes (NUL excluded) */
    FT_CONFIG_ENUM,      /* one of choices; stored as its index */
    FT_CONFIG_INT_LIST,  /* 1..max_count distinct integers in min..max */
    FT_CONFIG_LISTENERS  /* list of listener groups */
} ft_config_type;

/* ft_config_hook names what a setting's new value must do to the running
 * server beyond being read (reopen the log, resize the batch window).  The
 * daemon supplies one function per hook (ft_config_hook_fn); several rows
 * may share one, which then runs once. */
typedef enum ft_config_hook {
    FT_CONFIG_HOOK_NONE = 0,     /* the server reads the value where it uses it */
    FT_CONFIG_HOOK_BATCH_WINDOW, /* max_batch, max_wait_us: the batcher's window */
    FT_CONFIG_HOOK_LOG_LEVEL,    /* log_level */
    FT_CONFIG_HOOK_LOG_FILE,     /* log_file: (re)open the log */
    FT_CONFIG_NHOOKS
} ft_config_hook;

/* What a row is shown in or taken by, besides files and serve's flag. */
enum {
    FT_CONFIG_SHOW_INFO = 1,   /* INFO's "# config" and check-config's listing */
    FT_CONFIG_SHOW_CHECK = 2   /* check-config takes its flag too */
};

/* ft_config_row is one setting of the table: everything that reads,
 * writes, shows or applies a setting goes through its row. */
typedef struct ft_config_row {
    const char *name;            /* dotted path: "caps.max_beam" */
    ft_config_type type;
    long long min, max;          /* INT and INT_LIST bounds; STRING: max length */
    const char *def;             /* default, as text ft_config_set takes */
    const char *const *choices;  /* ENUM: NULL-terminated */
    int reloadable;              /* takes effect on SIGHUP / RELOAD */
    int must_exist;              /* STRING naming a file that must exist */
    int url;                     /* STRING: kind of URL checked (settings.c) */
    size_t off, size;            /* where the value lives in ft_config */
    size_t count_off;            /* INT_LIST, LISTENERS: the count field */
    size_t max_count;            /* INT_LIST, LISTENERS: capacity */
    const char *doc;             /* one line */
    const char *flag;            /* serve's --FLAG (no dashes); NULL: none */
    const char *flag_arg;        /* its argument in serve --help ("N");
                                    NULL: a bool switch that sets true */
    unsigned show;               /* FT_CONFIG_SHOW_* bits */
    const char *gauge;           /* /metrics config gauge; NULL: none */
    const char *gauge_help;      /* its # HELP text */
    int hook;                    /* ft_config_hook, run on start and reload */
} ft_config_row;

/* ft_config_rows is the settings table; ft_config_listener_rows the fields
 * of one listeners element (names relative to it: "tls.cert"). */
extern const ft_config_row ft_config_rows[FT_CONFIG_NSETTINGS];
extern const ft_config_row ft_config_listener_rows[FT_CONFIG_L_NFIELDS];

/* ft_config_find returns the row named name (either table: "listeners[].url"
 * names a listener field), or NULL. */
const ft_config_row *ft_config_find(const char *name);

/* ft_config_find_flag returns the row whose serve flag is flag (without
 * dashes), or NULL. */
const ft_config_row *ft_config_find_flag(const char *flag);

/* FT_CONFIG_LIVE reads a scalar of the live settings that a reload may
 * rewrite (ft_config_take_reloadable) while another thread reads it. */
#define FT_CONFIG_LIVE(cfg, field) __atomic_load_n(&(cfg)->field, __ATOMIC_RELAXED)

/* ft_config_take_reloadable copies the values of the reloadable rows of
 * next (one that passed ft_config_reload_check against live) into live,
 * and every row's source; scalars are stored atomically, so a reader
 * using FT_CONFIG_LIVE sees each one old or new.  The caller serialises
 * writers and the readers of strings. */
void ft_config_take_reloadable(ft_config *live, const ft_config *next);

/* ft_config_hook_fn applies a hook's settings to the running server: ctx
 * is the caller's, live the settings now in force, old those before a
 * reload (NULL on start).  A failure on start stops the server (err says
 * why); on a reload the hook logs it and may put the old value back. */
typedef int (*ft_config_hook_fn)(void *ctx, ft_config *live,
                                 const ft_config *old, char *err,
                                 size_t errlen);

/* ft_config_run_hooks runs, in table order and once each, the hooks of the
 * rows (of the reloadable rows when old is not NULL); hooks[h] may be NULL.
 * Stops at the first failure and returns it. */
int ft_config_run_hooks(ft_config *live, const ft_config *old,
                        const ft_config_hook_fn hooks[FT_CONFIG_NHOOKS],
                        void *ctx, char *err, size_t errlen);

/* ft_config_number is the value of an INT, BOOL or ENUM row of cfg as a
 * number (a bool 0 or 1, an enum its index), read as FT_CONFIG_LIVE does;
 * 0 for other types. */
uint64_t ft_config_number(const ft_config_row *row, const ft_config *cfg);

/* ft_config_init sets every setting to its default, source "default". */
void ft_config_init(ft_config *cfg);

/* ft_config_load initialises cfg and then applies the libconfig file at
 * path.  FT_EIO when it cannot be read; FT_ECONFIG for a syntax error, an
 * unknown setting, a wrong type, an out-of-range value or a bad enum
 * string, with "FILE:LINE: <setting>: <reason>" in errbuf.  It does not
 * run ft_config_validate: command-line overrides come first. */
int ft_config_load(ft_config *cfg, const char *path, char *errbuf,
                   size_t errlen);

/* ft_config_load_string is ft_config_load over text in memory; name is
 * what error messages call the file. */
int ft_config_load_string(ft_config *cfg, const char *text, const char *name,
                          char *errbuf, size_t errlen);

/* ft_config_set sets the setting called name from its text form, as the
 * command line gives it: integers in decimal, bools true|false, lists
 * comma-separated ("0,1,2"); listeners are comma-separated URLs, each a
 * plain (not admin, no TLS) listener.  src says where it came from. */
int ft_config_set(ft_config *cfg, const char *name, const char *value,
                  ft_config_source src, char *errbuf, size_t errlen);

/* ft_config_validate checks the rules across settings: an index is named,
 * listener URLs are distinct, a tls+tcp:// listener has tls.cert and
 * tls.key (and tls.ca when it verifies clients), only tls+tcp:// listeners
 * have a tls group, cluster.rank < cluster.world, and a cluster of more
 * than one process names its coordinator. */
int ft_config_validate(const ft_config *cfg, char *errbuf, size_t errlen);

/* ft_config_check_files checks that every file a setting names (index,
 * TLS files) exists: "FILE:LINE: index: /x does not exist". */
int ft_config_check_files(const ft_config *cfg, char *errbuf, size_t errlen);

/* ft_config_reload_check compares a configuration loaded for a reload with
 * the running one; FT_ECONFIG naming the first setting that changed but
 * takes effect only on restart. */
int ft_config_reload_check(const ft_config *running, const ft_config *next,
                           char *errbuf, size_t errlen);

/* ft_config_dump appends one line "name: value (source)" per setting shown
 * in INFO (FT_CONFIG_SHOW_INFO), in table order, source being default,
 * file:LINE or cli; a listener's fields follow as
 * "listeners[i].field: value (source)". */
int ft_config_dump(const ft_config *cfg, ft_buf *out);

/* ft_config_doc appends the table as Markdown (setting, type, default,
 * bounds, reload, description), for docs/config.md. */
int ft_config_doc(ft_buf *out);

/* ft_config_value formats the value of row (of ft_config_rows, or of
 * ft_config_listener_rows with base a listener) as ft_config_set reads it. */
int ft_config_value(const ft_config_row *row, const void *base, ft_buf *out);

#endif /* FT_CONFIG_H */
