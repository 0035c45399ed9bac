/*
 * config_test.c - the settings table and the loader: defaults, the example
 * file, every kind of error with its exact line and message, command-line
 * overrides, the reload rules, the dump format and the generated docs.
 *
 * Arguments: the example config file and docs/config.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flashtrie/internal/buf.h"
#include "ft_config.h"
#include "ft_test.h"

static ft_config cfg, cfg2; /* about 60 KiB each: not on the stack */
static char err[2048];

/* bad asserts that text (named t.conf) fails to load with code want and
 * exactly the message msg. */
static void bad_load(int line, const char *text, int want, const char *msg)
{
    err[0] = 0;
    int rc = ft_config_load_string(&cfg, text, "t.conf", err, sizeof err);
    if (rc != want || strcmp(err, msg) != 0) {
        fprintf(stderr, "%s:%d: loading\n%s\ngave %d '%s'\nwant %d '%s'\n",
                __FILE__, line, text, rc, err, want, msg);
        exit(1);
    }
}
#define BAD(text, msg) bad_load(__LINE__, text, FT_ECONFIG, msg)

/* bad_valid asserts that text loads but fails ft_config_validate. */
static void bad_valid(int line, const char *text, const char *msg)
{
    err[0] = 0;
    int rc = ft_config_load_string(&cfg, text, "t.conf", err, sizeof err);
    if (rc != FT_OK) {
        fprintf(stderr, "%s:%d: load failed: %s\n", __FILE__, line, err);
        exit(1);
    }
    rc = ft_config_validate(&cfg, err, sizeof err);
    if (rc != FT_ECONFIG || strcmp(err, msg) != 0) {
        fprintf(stderr, "%s:%d: validating\n%s\ngave %d '%s'\nwant '%s'\n",
                __FILE__, line, text, rc, err, msg);
        exit(1);
    }
}
#define BAD_VALID(text, msg) bad_valid(__LINE__, text, msg)

static void load_ok(const char *text)
{
    int rc = ft_config_load_string(&cfg, text, "t.conf", err, sizeof err);
    if (rc != FT_OK) {
        fprintf(stderr, "loading\n%s\nfailed: %s\n", text, err);
        exit(1);
    }
    FT_PASS(ft_config_validate(&cfg, err, sizeof err));
}

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    FT_CHECK(f != NULL);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strdup(buf);
}

/* line_of returns the 1-based line of the first occurrence of s in text. */
static int line_of(const char *text, const char *s)
{
    const char *p = strstr(text, s);
    FT_CHECK(p != NULL);
    int line = 1;
    for (const char *q = text; q < p; q++)
        line += *q == '\n';
    return line;
}

static const char *dumped(const ft_config *c)
{
    static ft_buf b;
    ft_buf_free(&b);
    FT_PASS(ft_config_dump(c, &b));
    return (const char *)b.data;
}

/* has_line asserts the dump of c holds the whole line l. */
static void has_line(int line, const ft_config *c, const char *l)
{
    const char *d = dumped(c);
    size_t n = strlen(l);
    for (const char *p = d; (p = strstr(p, l)) != NULL; p++)
        if ((p == d || p[-1] == '\n') && p[n] == '\n')
            return;
    fprintf(stderr, "%s:%d: dump lacks line '%s':\n%s", __FILE__, line, l, d);
    exit(1);
}
#define HAS_LINE(c, l) has_line(__LINE__, c, l)

static void test_defaults(void)
{
    ft_config_init(&cfg);
    FT_CHECK_STR(cfg.index_path, "");
    FT_CHECK_EQ_U64(cfg.n_listeners, 1);
    FT_CHECK_STR(cfg.listeners[0].url, "tcp://127.0.0.1:7710");
    FT_CHECK_EQ_U64(cfg.listeners[0].admin, 0);
    FT_CHECK_EQ_U64(cfg.engine, FT_CONFIG_ENGINE_AUTO);
    FT_CHECK_EQ_U64(cfg.n_devices, 1);
    FT_CHECK_EQ_U64(cfg.devices[0], 0);
    FT_CHECK_EQ_U64(cfg.replicas, 1);
    FT_CHECK_EQ_U64(cfg.cpu_threads, 0);
    FT_CHECK_EQ_U64(cfg.max_batch, 32);
    FT_CHECK_EQ_U64(cfg.max_wait_us, 50);
    FT_CHECK_EQ_U64(cfg.queue_depth, 1024);
    FT_CHECK_EQ_U64(cfg.max_message_bytes, 64u << 20);
    FT_CHECK_EQ_U64(cfg.max_beam, 4096);
    FT_CHECK_EQ_U64(cfg.max_k, 4096);
    FT_CHECK_EQ_U64(cfg.max_t, 64);
    FT_CHECK_EQ_U64(cfg.max_results, 4096);
    FT_CHECK_EQ_U64(cfg.default_deadline_ms, 0);
    FT_CHECK_EQ_U64(cfg.drain_timeout_ms, 10000);
    FT_CHECK_EQ_U64(cfg.admin_reload, 0);
    FT_CHECK_EQ_U64(cfg.log_level, FT_LOG_INFO);
    FT_CHECK_STR(cfg.log_file, "");
    FT_CHECK_STR(cfg.metrics, "");
    FT_CHECK_EQ_U64(cfg.cluster_rank, 0);
    FT_CHECK_EQ_U64(cfg.cluster_world, 1);
    FT_CHECK_STR(cfg.cluster_coordinator, "");
    FT_CHECK_EQ_U64(cfg.cluster_join_timeout_ms, 60000);
    FT_CHECK_EQ_U64(cfg.cluster_step_timeout_ms, 10000);
    for (int i = 0; i < FT_CONFIG_NSETTINGS; i++)
        FT_CHECK_EQ_U64(cfg.src[i].kind, FT_CONFIG_SRC_DEFAULT);
    /* Every default passes its own row's checks, and reads back as the
     * table writes it. */
    for (int i = 0; i < FT_CONFIG_NSETTINGS; i++) {
        const ft_config_row *r = &ft_config_rows[i];
        FT_PASS(ft_config_set(&cfg, r->name, r->def, FT_CONFIG_SRC_CLI_AT,
                              err, sizeof err));
        ft_buf b;
        ft_buf_init(&b);
        FT_PASS(ft_config_value(r, &cfg, &b));
        FT_PASS(ft_buf_append(&b, "", 0));
        FT_CHECK_STR((const char *)b.data, r->def);
        ft_buf_free(&b);
        FT_CHECK(ft_config_find(r->name) == r);
    }
    FT_CHECK(ft_config_find("listeners[].tls.cert") ==
             &ft_config_listener_rows[FT_CONFIG_L_TLS_CERT]);
    FT_CHECK(ft_config_find("tls.cert") == NULL);
    /* Without a file or an index the configuration is not usable. */
    ft_config_init(&cfg);
    FT_FAIL(ft_config_validate(&cfg, err, sizeof err), FT_ECONFIG);
    FT_CHECK_STR(err, "cli: index: required (set it in the file or give --index)");
}

static void test_dump_format(void)
{
    ft_config_init(&cfg);
    FT_CHECK_STR(dumped(&cfg),
                 "index: \"\" (default)\n"
                 "listeners: tcp://127.0.0.1:7710 (default)\n"
                 "listeners[0].url: tcp://127.0.0.1:7710 (default)\n"
                 "listeners[0].admin: false (default)\n"
                 "listeners[0].tls.cert: \"\" (default)\n"
                 "listeners[0].tls.key: \"\" (default)\n"
                 "listeners[0].tls.ca: \"\" (default)\n"
                 "listeners[0].tls.verify_client: false (default)\n"
                 "engine: auto (default)\n"
                 "devices: 0 (default)\n"
                 "replicas: 1 (default)\n"
                 "cpu_threads: 0 (default)\n"
                 "max_batch: 32 (default)\n"
                 "max_wait_us: 50 (default)\n"
                 "inline_lone: auto (default)\n"
                 "dup_check: auto (default)\n"
                 "cpus: \"\" (default)\n"
                 "idle_spin: false (default)\n"
                 "queue_depth: 1024 (default)\n"
                 "max_message_bytes: 67108864 (default)\n"
                 "memory_budget_bytes: 805306368 (default)\n"
                 "max_heavy_messages: 4 (default)\n"
                 "light_request_cost: 67108864 (default)\n"
                 "heavy_batch: 1 (default)\n"
                 "light_replicas: 1 (default)\n"
                 "caps.max_beam: 4096 (default)\n"
                 "caps.max_k: 4096 (default)\n"
                 "caps.max_t: 64 (default)\n"
                 "caps.max_results: 4096 (default)\n"
                 "default_deadline_ms: 0 (default)\n"
                 "drain_timeout_ms: 10000 (default)\n"
                 "max_connections: 1024 (default)\n"
                 "idle_timeout_ms: 60000 (default)\n"
                 "probe_interval_ms: 5000 (default)\n"
                 "probe_restart_after: 2 (default)\n"
                 "ipc_mode: 0660 (default)\n"
                 "admin_reload: false (default)\n"
                 "log_level: info (default)\n"
                 "log_file: \"\" (default)\n"
                 "metrics: \"\" (default)\n"
                 "cluster.rank: 0 (default)\n"
                 "cluster.world: 1 (default)\n"
                 "cluster.coordinator: \"\" (default)\n"
                 "cluster.join_timeout_ms: 60000 (default)\n"
                 "cluster.step_timeout_ms: 10000 (default)\n");

    load_ok("index = \"/srv/lib.fti\";\n"
            "listeners = (\n"
            "  { url = \"ipc:///tmp/ft.ipc\"; admin = true; },\n"
            "  { url = \"tls+tcp://127.0.0.1:9443\";\n"
            "    tls = { cert = \"c.pem\"; key = \"k.pem\"; }; }\n"
            ");\n"
            "devices = [3, 1];\n"
            "caps = { max_t = 8; };\n"
            "engine = \"shards\";\n");
    FT_CHECK_STR(cfg.index_path, "/srv/lib.fti");
    FT_CHECK_EQ_U64(cfg.n_listeners, 2);
    FT_CHECK_STR(cfg.listeners[1].tls_cert, "c.pem");
    FT_CHECK_STR(cfg.listeners[1].tls_key, "k.pem");
    FT_CHECK_EQ_U64(cfg.listeners[1].tls_verify, 0);
    FT_CHECK_EQ_U64(cfg.n_devices, 2);
    FT_CHECK_EQ_U64(cfg.devices[0], 3);
    FT_CHECK_EQ_U64(cfg.devices[1], 1);
    FT_CHECK_EQ_U64(cfg.engine, FT_CONFIG_ENGINE_SHARDS);
    FT_CHECK_EQ_U64(cfg.max_t, 8);
    FT_CHECK_EQ_U64(cfg.max_beam, 4096);
    HAS_LINE(&cfg, "index: /srv/lib.fti (file:1)");
    HAS_LINE(&cfg, "listeners: ipc:///tmp/ft.ipc,tls+tcp://127.0.0.1:9443 (file:2)");
    HAS_LINE(&cfg, "listeners[0].url: ipc:///tmp/ft.ipc (file:3)");
    HAS_LINE(&cfg, "listeners[0].admin: true (file:3)");
    HAS_LINE(&cfg, "listeners[0].tls.cert: \"\" (default)");
    HAS_LINE(&cfg, "listeners[1].url: tls+tcp://127.0.0.1:9443 (file:4)");
    HAS_LINE(&cfg, "listeners[1].admin: false (default)");
    HAS_LINE(&cfg, "listeners[1].tls.key: k.pem (file:5)");
    HAS_LINE(&cfg, "devices: 3,1 (file:7)");
    HAS_LINE(&cfg, "caps.max_t: 8 (file:8)");
    HAS_LINE(&cfg, "caps.max_k: 4096 (default)");
    HAS_LINE(&cfg, "engine: shards (file:9)");
}

static void test_cli(void)
{
    load_ok("index = \"/srv/a.fti\";\nmax_batch = 8;\n");
    ft_config_source cli = FT_CONFIG_SRC_CLI_AT;
    FT_PASS(ft_config_set(&cfg, "index", "/srv/b.fti", cli, err, sizeof err));
    FT_CHECK_STR(cfg.index_path, "/srv/b.fti");
    FT_CHECK_EQ_U64(cfg.src[FT_CONFIG_S_INDEX].kind, FT_CONFIG_SRC_CLI);
    HAS_LINE(&cfg, "index: /srv/b.fti (cli)");
    HAS_LINE(&cfg, "max_batch: 8 (file:2)");
    FT_PASS(ft_config_set(&cfg, "listeners", "tcp://127.0.0.1:1, ipc:///tmp/x",
                          cli, err, sizeof err));
    FT_CHECK_EQ_U64(cfg.n_listeners, 2);
    FT_CHECK_STR(cfg.listeners[1].url, "ipc:///tmp/x");
    HAS_LINE(&cfg, "listeners: tcp://127.0.0.1:1,ipc:///tmp/x (cli)");
    HAS_LINE(&cfg, "listeners[1].url: ipc:///tmp/x (cli)");
    HAS_LINE(&cfg, "listeners[1].admin: false (cli)");
    FT_PASS(ft_config_set(&cfg, "engine", "gpu", cli, err, sizeof err));
    FT_CHECK_EQ_U64(cfg.engine, FT_CONFIG_ENGINE_GPU);
    FT_PASS(ft_config_set(&cfg, "metrics", "http://127.0.0.1:9100", cli, err,
                          sizeof err));
    HAS_LINE(&cfg, "metrics: http://127.0.0.1:9100 (cli)");
    FT_PASS(ft_config_set(&cfg, "devices", "0, 1,2", cli, err, sizeof err));
    HAS_LINE(&cfg, "devices: 0,1,2 (cli)");
    FT_PASS(ft_config_set(&cfg, "admin_reload", "true", cli, err, sizeof err));
    FT_CHECK_EQ_U64(cfg.admin_reload, 1);
    FT_PASS(ft_config_validate(&cfg, err, sizeof err));

    /* The flags of serve map onto settings; check-config takes four. */
    int n = 0;
    for (int i = 0; i < FT_CONFIG_NSETTINGS; i++)
        if (ft_config_rows[i].flag) {
            FT_CHECK(ft_config_find_flag(ft_config_rows[i].flag) ==
                     &ft_config_rows[i]);
            n += (ft_config_rows[i].show & FT_CONFIG_SHOW_CHECK) != 0;
        }
    FT_CHECK_EQ_U64(n, 4);

    struct {
        const char *name, *value, *msg;
    } bad[] = {
        {"max_batch", "0", "cli: max_batch: must be 1..64, got 0"},
        {"max_batch", "x", "cli: max_batch: expected an integer, got 'x'"},
        {"max_batch", "", "cli: max_batch: expected an integer, got ''"},
        {"max_batch", "-1", "cli: max_batch: must be 1..64, got -1"},
        {"max_batch", "99999999999999999999",
         "cli: max_batch: expected an integer, got '99999999999999999999'"},
        {"bogus", "1", "cli: bogus: unknown setting"},
        {"caps", "1", "cli: caps: unknown setting"},
        {"engine", "fpga", "cli: engine: must be one of auto|cpu|gpu|shards, got 'fpga'"},
        {"admin_reload", "yes", "cli: admin_reload: expected true or false, got 'yes'"},
        {"devices", "0,0", "cli: devices: 0 is listed twice"},
        {"devices", "", "cli: devices: must hold 1..64 integers, got 0"},
        {"devices", "0,a", "cli: devices: expected comma-separated integers, got '0,a'"},
        {"devices", "256", "cli: devices: element 0 must be 0..255, got 256"},
        {"listeners", "", "cli: listeners: expected at least one URL"},
        {"listeners", "tcp://127.0.0.1:1,,ipc:///a",
         "cli: listeners: empty URL in 'tcp://127.0.0.1:1,,ipc:///a'"},
        /* a trailing comma is an empty item, not the end of the list */
        {"listeners", "tcp://127.0.0.1:1,",
         "cli: listeners: empty URL in 'tcp://127.0.0.1:1,'"},
        {"listeners", "tcp://127.0.0.1:1, ",
         "cli: listeners: empty URL in 'tcp://127.0.0.1:1, '"},
        {"devices", "0,", "cli: devices: expected comma-separated integers, got '0,'"},
        {"listeners", "udp://x:1",
         "cli: listeners: expected tcp://HOST:PORT, tls+tcp://HOST:PORT or ipc://PATH, got 'udp://x:1'"},
        {"listeners", "tcp://127.0.0.1:99999",
         "cli: listeners: expected tcp://HOST:PORT, tls+tcp://HOST:PORT or ipc://PATH, got 'tcp://127.0.0.1:99999'"},
        {"metrics", "tcp://127.0.0.1:1",
         "cli: metrics: expected http://HOST:PORT, got 'tcp://127.0.0.1:1'"},
        /* Issue 39: hosts nng cannot parse were taken, then serve refused
         * them at start. */
        {"metrics", "http://[::1:80",
         "cli: metrics: expected http://HOST:PORT, got 'http://[::1:80'"},
        {"metrics", "http://::1:80",
         "cli: metrics: expected http://HOST:PORT, got 'http://::1:80'"},
        {"metrics", "http://[x]:80",
         "cli: metrics: expected http://HOST:PORT, got 'http://[x]:80'"},
        {"listeners", "tcp://[::1:80",
         "cli: listeners: expected tcp://HOST:PORT, tls+tcp://HOST:PORT or ipc://PATH, got 'tcp://[::1:80'"},
        {"ipc_mode", "0888",
         "cli: ipc_mode: expected an octal file mode 000..0777 (\"0660\"), got '0888'"},
        {"ipc_mode", "1777",
         "cli: ipc_mode: expected an octal file mode 000..0777 (\"0660\"), got '1777'"},
        {"max_connections", "0", "cli: max_connections: must be 1..1000000, got 0"},
        {"cpus", "1024",
         "cli: cpus: CPU list: '1024' (at byte 1 of '1024'): CPUs are 0..1023"},
        {"cpus", "0,5-2",
         "cli: cpus: CPU list: '5-2' (at byte 3 of '0,5-2'): a range runs from low to high"},
        {"cpus", "0, 1",
         "cli: cpus: expected a CPU list such as \"0-3,8\", got '0, 1' (at byte 3)"},
        {"cpus", "1-",
         "cli: cpus: expected a CPU list such as \"0-3,8\", got '1-' (at byte 3)"},
        {"cpus", "2,",
         "cli: cpus: expected a CPU list such as \"0-3,8\", got '2,' (at byte 2)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ft_config before = cfg;
        FT_FAIL(ft_config_set(&cfg, bad[i].name, bad[i].value, cli, err,
                              sizeof err), FT_ECONFIG);
        FT_CHECK_STR(err, bad[i].msg);
        /* A refused value leaves the configuration as it was. */
        FT_CHECK(memcmp(&before, &cfg, sizeof cfg) == 0);
    }
    /* IPv6 hosts in brackets are taken. */
    FT_PASS(ft_config_set(&cfg, "metrics", "http://[::1]:80", cli, err,
                          sizeof err));
    FT_PASS(ft_config_set(&cfg, "ipc_mode", "0600", cli, err, sizeof err));
    FT_CHECK_STR(cfg.ipc_mode, "0600");
    /* CPU lists: ranges, single CPUs, overlaps counted once. */
    {
        unsigned char m[FT_CONFIG_CPU_LIMIT / 8];
        FT_CHECK(ft_config_cpus_parse("", m, err, sizeof err) == 0);
        FT_CHECK(ft_config_cpus_parse("0-3,8,2-5,1023", m, err, sizeof err) ==
                 8);
        FT_CHECK_EQ_U64(m[0], 0x3f);
        FT_CHECK_EQ_U64(m[1], 0x01);
        FT_CHECK_EQ_U64(m[127], 0x80);
        FT_PASS(ft_config_set(&cfg, "cpus", "2-5,8", cli, err, sizeof err));
        FT_CHECK_STR(cfg.cpus, "2-5,8");
        FT_PASS(ft_config_set(&cfg, "cpus", "", cli, err, sizeof err));
    }
    char longpath[FT_CONFIG_PATH_MAX + 1];
    memset(longpath, 'a', sizeof longpath - 1);
    longpath[sizeof longpath - 1] = 0;
    FT_FAIL(ft_config_set(&cfg, "index", longpath, cli, err, sizeof err),
            FT_ECONFIG);
    FT_CHECK_STR(err, "cli: index: longer than 1023 bytes");
}

static void test_errors(void)
{
    /* Unknown keys, at every level. */
    BAD("max_batch = 4;\nbogus = 1;\n", "t.conf:2: bogus: unknown setting");
    BAD("caps = {\n  max_beam = 4;\n  max_depth = 3;\n};\n",
        "t.conf:3: caps.max_depth: unknown setting");
    BAD("cluster = { rank = 0; nodes = 3; };\n",
        "t.conf:1: cluster.nodes: unknown setting");
    BAD("listeners = (\n { url = \"tcp://127.0.0.1:1\";\n   port = 5; }\n);\n",
        "t.conf:3: listeners[0].port: unknown setting");
    BAD("listeners = ( { url = \"tcp://127.0.0.1:1\"; },\n"
        " { url = \"tls+tcp://127.0.0.1:2\";\n"
        "   tls = { cert = \"c\"; key = \"k\";\n"
        "           pin = \"x\"; }; } );\n",
        "t.conf:4: listeners[1].tls.pin: unknown setting");
    BAD("max_beam = 5;\n", "t.conf:1: max_beam: unknown setting");
    BAD("caps = { caps = { max_t = 1; }; };\n",
        "t.conf:1: caps.caps: unknown setting");

    /* Wrong types. */
    BAD("\nmax_batch = \"32\";\n",
        "t.conf:2: max_batch: expected an integer, got a string");
    BAD("max_batch = 1.5;\n", "t.conf:1: max_batch: expected an integer, got a float");
    BAD("admin_reload = 1;\n",
        "t.conf:1: admin_reload: expected true or false, got an integer");
    BAD("index = 3;\n", "t.conf:1: index: expected a string, got an integer");
    BAD("engine = true;\n", "t.conf:1: engine: expected a string, got a boolean");
    BAD("caps = 5;\n", "t.conf:1: caps: expected a group, got an integer");
    BAD("cluster = ( 1 );\n", "t.conf:1: cluster: expected a group, got a list");
    BAD("devices = 0;\n",
        "t.conf:1: devices: expected a list of integers like [0, 1], got an integer");
    BAD("devices = [\"a\"];\n",
        "t.conf:1: devices: element 0: expected an integer, got a string");
    BAD("devices = ( 0, \"a\" );\n",
        "t.conf:1: devices: element 1: expected an integer, got a string");
    BAD("listeners = \"tcp://127.0.0.1:1\";\n",
        "t.conf:1: listeners: expected a list of groups like ( { url = ...; } ), got a string");
    BAD("listeners = ( \"tcp://127.0.0.1:1\" );\n",
        "t.conf:1: listeners[0]: expected a group, got a string");
    BAD("listeners = ( { url = \"tcp://127.0.0.1:1\"; admin = \"yes\"; } );\n",
        "t.conf:1: listeners[0].admin: expected true or false, got a string");
    BAD("listeners = ( { url = \"tcp://127.0.0.1:1\"; tls = 1; } );\n",
        "t.conf:1: listeners[0].tls: expected a group, got an integer");

    /* Out of range. */
    BAD("max_batch = 65;\n", "t.conf:1: max_batch: must be 1..64, got 65");
    BAD("max_batch = 0;\n", "t.conf:1: max_batch: must be 1..64, got 0");
    BAD("max_wait_us = -1;\n", "t.conf:1: max_wait_us: must be 0..1000000, got -1");
    BAD("max_wait_us = 1000001;\n",
        "t.conf:1: max_wait_us: must be 0..1000000, got 1000001");
    BAD("queue_depth = 0;\n", "t.conf:1: queue_depth: must be 1..1000000, got 0");
    BAD("max_message_bytes = 1023;\n",
        "t.conf:1: max_message_bytes: must be 1024..4294967295, got 1023");
    BAD("caps = {\n max_t = 65;\n};\n", "t.conf:2: caps.max_t: must be 1..64, got 65");
    BAD("caps = { max_beam = 4097; };\n",
        "t.conf:1: caps.max_beam: must be 1..4096, got 4097");
    BAD("caps = { max_k = 0; };\n", "t.conf:1: caps.max_k: must be 1..4096, got 0");
    BAD("caps = { max_results = 5000; };\n",
        "t.conf:1: caps.max_results: must be 1..4096, got 5000");
    BAD("cluster = { world = 0; };\n",
        "t.conf:1: cluster.world: must be 1..1024, got 0");
    /* A cluster holds at most 1024 ranks (router/cluster.h): more is
     * refused here, not only once serve has opened the manifest. */
    BAD("cluster = { world = 1025; coordinator = \"ipc:///x\"; };\n",
        "t.conf:1: cluster.world: must be 1..1024, got 1025");
    BAD("cluster = { rank = 1024; };\n",
        "t.conf:1: cluster.rank: must be 0..1023, got 1024");
    BAD("replicas = 0;\n", "t.conf:1: replicas: must be 1..64, got 0");
    BAD("devices = [0, 0];\n", "t.conf:1: devices: 0 is listed twice");
    BAD("devices = [];\n", "t.conf:1: devices: must hold 1..64 integers, got 0");
    BAD("devices = [1, 300];\n",
        "t.conf:1: devices: element 1 must be 0..255, got 300");
    BAD("listeners = ();\n", "t.conf:1: listeners: must hold 1..16 listeners, got 0");
    /* libconfig 1.5 wraps an integer without L to 32 bits; the loader
     * refuses the literal as written instead of the wrapped value. */
    BAD("queue_depth = 5000000000;\n",
        "t.conf:1: queue_depth: must be 1..1000000, got 5000000000");
    BAD("max_wait_us = -5000000000;\n",
        "t.conf:1: max_wait_us: must be 0..1000000, got -5000000000");
    BAD("queue_depth = 0x100000000;\n",
        "t.conf:1: queue_depth: must be 1..1000000, got 0x100000000");
    BAD("max_message_bytes = 4294967295;\n",
        "t.conf:1: max_message_bytes: write 4294967295 as 4294967295L: "
        "without L libconfig reads a 32-bit integer");
    BAD("devices = [1,\n 99999999999];\n",
        "t.conf:1: devices: elements must be 0..255, got 99999999999");
    load_ok("index = \"x\"; # 99999999999 in a comment\n"
            "log_file = \"/tmp/99999999999\";\n"
            "max_message_bytes = 4294967295L;\n"
            "memory_budget_bytes = 5000000000L;\n");
    FT_CHECK_EQ_U64(cfg.max_message_bytes, 4294967295ULL);
    FT_CHECK_EQ_U64(cfg.memory_budget_bytes, 5000000000ULL);
    /* The largest message must fit in the budget's share for heavy
     * messages (7/8), or it would always be BUSY. */
    BAD_VALID("index = \"i\";\nmax_message_bytes = 1073741824;\n",
        "t.conf:2: max_message_bytes: 1073741824 exceeds the 704643072 "
        "bytes (7/8 of memory_budget_bytes 805306368) messages over 1 MiB "
        "may hold: raise memory_budget_bytes too");
    BAD_VALID("index = \"i\";\nmemory_budget_bytes = 8388608;\n"
              "max_message_bytes = 8388608;\n",
        "t.conf:2: memory_budget_bytes: 8388608 leaves messages over 1 MiB "
        "7340032 bytes (7/8 of it), less than max_message_bytes (8388608): "
        "the largest would always be answered BUSY");

    /* Bad enum strings. */
    BAD("engine = \"fpga\";\n",
        "t.conf:1: engine: must be one of auto|cpu|gpu|shards, got 'fpga'");
    BAD("log_level = \"INFO\";\n",
        "t.conf:1: log_level: must be one of error|warn|info|debug, got 'INFO'");

    /* Bad URLs. */
    BAD("listeners = ( { url = \"http://127.0.0.1:1\"; } );\n",
        "t.conf:1: listeners[0].url: expected tcp://HOST:PORT, tls+tcp://HOST:PORT "
        "or ipc://PATH, got 'http://127.0.0.1:1'");
    BAD("metrics = \"http://localhost\";\n",
        "t.conf:1: metrics: expected http://HOST:PORT, got 'http://localhost'");
    BAD("cluster = { coordinator = \"tcp://host\"; };\n",
        "t.conf:1: cluster.coordinator: expected tcp://HOST:PORT or ipc://PATH, "
        "got 'tcp://host'");

    /* Syntax errors and names given twice (libconfig's own words, then
     * the line they are on, or the end of the file a group runs into). */
    BAD("max_batch = 4;\nmax_wait_us = ;\n",
        "t.conf:2: syntax error, at 'max_wait_us = ;'");
    BAD("caps = {\n max_t = 1;\n", "t.conf:3: syntax error, at the end of the file");
    BAD("max_batch = 4;\n\n\tmax_batch = 5;  \n",
        "t.conf:3: duplicate setting name, at 'max_batch = 5;'");
    BAD("devices = [0, 1.5];\n",
        "t.conf:1: mismatched element type in array (the values of an array "
        "[...] must all be of one type), at 'devices = [0, 1.5];'");
    BAD("max_batch = 4; max_wait_us = 5; queue_depth = 10; max_batch = 9; # x\n",
        "t.conf:1: duplicate setting name, at 'max_batch = 4; max_wait_us = 5; "
        "queue_depth = 10; max_batch ...'");
    /* a cut never splits a UTF-8 character: 59 ASCII bytes, then a
     * two-byte e-acute across the 60th */
    BAD("max_batch = 4; max_batch = 5; # aaaaaaaaaaaaaaaaaaaaaaaaaaa\xc3\xa9xyz\n",
        "t.conf:1: duplicate setting name, at 'max_batch = 4; max_batch = 5; # "
        "aaaaaaaaaaaaaaaaaaaaaaaaaaa...'");
    /* libconfig ends an unclosed comment at the end of the file without a
     * word: the settings after it would vanish silently. */
    BAD("max_batch = 4;\n/* max_wait_us = 5;\nqueue_depth = 0;\n",
        "t.conf:2: syntax error: a /* comment is never closed");
    BAD("index = \"/* not a comment\"; # /* nor this\n// /* nor this\n"
        "max_batch = 4; /* closed */ /* open\n",
        "t.conf:3: syntax error: a /* comment is never closed");

    /* A missing file is an I/O error, not a config error. */
    FT_FAIL(ft_config_load(&cfg, "/nonexistent/ft.conf", err, sizeof err), FT_EIO);
    FT_CHECK_STR(err, "/nonexistent/ft.conf: cannot open: No such file or directory");
}

static void test_validate(void)
{
    BAD_VALID("max_batch = 4;\n",
              "t.conf: index: required (set it in the file or give --index)");
    BAD_VALID("index = \"i\";\nlisteners = (\n"
              "  { url = \"tcp://127.0.0.1:1\"; },\n"
              "  { url = \"ipc:///tmp/a\"; },\n"
              "  { admin = true;\n"
              "    url = \"tcp://127.0.0.1:1\"; }\n);\n",
              "t.conf:6: listeners[2].url: 'tcp://127.0.0.1:1' is also listeners[0]'s URL");
    BAD_VALID("index = \"i\";\nlisteners = (\n"
              "  { url = \"tcp://127.0.0.1:1\"; },\n"
              "  { url = \"tls+tcp://127.0.0.1:2\"; }\n);\n",
              "t.conf:4: listeners[1].tls.cert: required for a tls+tcp:// listener");
    BAD_VALID("index = \"i\";\nlisteners = (\n"
              "  { url = \"tls+tcp://127.0.0.1:2\";\n"
              "    tls = { cert = \"c\"; }; }\n);\n",
              "t.conf:3: listeners[0].tls.key: required for a tls+tcp:// listener");
    BAD_VALID("index = \"i\";\nlisteners = (\n"
              "  { url = \"tls+tcp://127.0.0.1:2\";\n"
              "    tls = { cert = \"c\"; key = \"k\";\n"
              "            verify_client = true; }; }\n);\n",
              "t.conf:5: listeners[0].tls.ca: required when tls.verify_client is true");
    BAD_VALID("index = \"i\";\nlisteners = (\n"
              "  { url = \"tcp://127.0.0.1:2\";\n"
              "    tls = { cert = \"c\"; key = \"k\"; }; }\n);\n",
              "t.conf:3: listeners[0].tls: only a tls+tcp:// listener takes a tls "
              "group, not 'tcp://127.0.0.1:2'");
    BAD("index = \"i\";\nlisteners = ( { admin = true; } );\n",
        "t.conf:2: listeners[0].url: required");
    BAD("index = \"i\";\nlisteners = ( { url = \"\"; } );\n",
        "t.conf:2: listeners[0].url: required");
    BAD_VALID("index = \"i\";\ncluster = {\n  world = 2;\n  rank = 2;\n"
              "  coordinator = \"tcp://10.0.0.1:7710\";\n};\n",
              "t.conf:4: cluster.rank: must be below cluster.world (2), got 2");
    BAD_VALID("index = \"i\";\ncluster = {\n  world = 2;\n};\n",
              "t.conf:3: cluster.coordinator: required when cluster.world is 2");
    /* One address for two sockets of a server: refused here, not once
     * the index is open and (the coordinator) every rank joined. */
    BAD_VALID("index = \"i\";\nlisteners = ( { url = \"ipc:///tmp/c\"; } );\n"
              "cluster = {\n  world = 2;\n  coordinator = \"ipc:///tmp/c\";\n};\n",
              "t.conf:5: cluster.coordinator: 'ipc:///tmp/c' has the address "
              "of listeners[0] ('ipc:///tmp/c')");
    /* the default listener counts too */
    BAD_VALID("index = \"i\";\n"
              "cluster = { world = 2; coordinator = \"tcp://127.0.0.1:7710\"; };\n",
              "t.conf:2: cluster.coordinator: 'tcp://127.0.0.1:7710' has the "
              "address of listeners[0] ('tcp://127.0.0.1:7710')");
    BAD_VALID("index = \"i\";\nmetrics = \"http://127.0.0.1:9700\";\n"
              "cluster = { world = 2; coordinator = \"tcp://127.0.0.1:9700\"; };\n",
              "t.conf:3: cluster.coordinator: 'tcp://127.0.0.1:9700' has the "
              "address of metrics ('http://127.0.0.1:9700')");
    BAD_VALID("index = \"i\";\nlisteners = ( { url = \"ipc:///tmp/a\"; },\n"
              "  { url = \"tls+tcp://127.0.0.1:9700\"; tls = { cert = \"c\"; "
              "key = \"k\"; }; } );\nmetrics = \"http://127.0.0.1:9700/\";\n",
              "t.conf:4: metrics: 'http://127.0.0.1:9700/' has the address of "
              "listeners[1] ('tls+tcp://127.0.0.1:9700')");
    /* The cluster has no TLS settings: a tls+tcp:// coordinator could
     * never be reached. */
    BAD_VALID("index = \"i\";\ncluster = { world = 2; rank = 1;\n"
              "  coordinator = \"tls+tcp://10.0.0.1:7711\"; };\n",
              "t.conf:3: cluster.coordinator: 'tls+tcp://10.0.0.1:7711': the "
              "cluster has no TLS yet; use tcp:// on a private network, "
              "ipc://, or a tunnel");
    /* A rank other than 0 dials the coordinator and opens no listener. */
    load_ok("index = \"i\";\ncluster = { world = 2; rank = 1;"
            " coordinator = \"tcp://127.0.0.1:7710\"; };\n");
    load_ok("index = \"i\";\ncluster = { world = 2; rank = 1;"
            " coordinator = \"tcp://10.0.0.1:7710\"; };\n");
    FT_CHECK_EQ_U64(cfg.cluster_rank, 1);
    FT_CHECK_EQ_U64(cfg.cluster_world, 2);
}

static void test_files(void)
{
    char dir[] = "/tmp/ft_config_test.XXXXXX";
    FT_CHECK(mkdtemp(dir) != NULL);
    char idx[128], cert[128], text[1024];
    snprintf(idx, sizeof idx, "%s/lib.fti", dir);
    snprintf(cert, sizeof cert, "%s/c.pem", dir);
    FILE *f = fopen(idx, "w");
    FT_CHECK(f != NULL);
    fclose(f);
    snprintf(text, sizeof text,
             "index = \"%s\";\nlisteners = (\n"
             "  { url = \"tls+tcp://127.0.0.1:2\";\n"
             "    tls = { cert = \"%s\";\n"
             "            key = \"%s\"; }; }\n);\n", idx, cert, idx);
    load_ok(text);
    FT_FAIL(ft_config_check_files(&cfg, err, sizeof err), FT_ECONFIG);
    char want[512];
    snprintf(want, sizeof want, "t.conf:4: listeners[0].tls.cert: %s does not exist",
             cert);
    FT_CHECK_STR(err, want);
    f = fopen(cert, "w");
    FT_CHECK(f != NULL);
    fclose(f);
    FT_PASS(ft_config_check_files(&cfg, err, sizeof err));
    FT_PASS(ft_config_set(&cfg, "index", dir, FT_CONFIG_SRC_CLI_AT, err, sizeof err));
    FT_FAIL(ft_config_check_files(&cfg, err, sizeof err), FT_ECONFIG);
    snprintf(want, sizeof want, "cli: index: %s is not a regular file", dir);
    FT_CHECK_STR(err, want);

    /* The same configuration read from a real file. */
    char path[128];
    snprintf(path, sizeof path, "%s/t.conf", dir);
    f = fopen(path, "w");
    FT_CHECK(f != NULL);
    fputs("max_batch = 7;\n\nbogus = 1;\n", f);
    fclose(f);
    FT_FAIL(ft_config_load(&cfg, path, err, sizeof err), FT_ECONFIG);
    snprintf(want, sizeof want, "%s:3: bogus: unknown setting", path);
    FT_CHECK_STR(err, want);
    f = fopen(path, "w");
    fputs("max_batch = 7;\n", f);
    fclose(f);
    FT_PASS(ft_config_load(&cfg, path, err, sizeof err));
    FT_CHECK_EQ_U64(cfg.max_batch, 7);
    FT_CHECK_STR(cfg.path, path);
    unlink(path);
    unlink(cert);
    unlink(idx);
    rmdir(dir);
}

static void test_reload(void)
{
    static const char *yes[] = {"index", "caps.max_beam", "caps.max_k",
                                "caps.max_t", "caps.max_results", "max_wait_us",
                                "max_batch", "inline_lone", "dup_check", "log_level",
                                "default_deadline_ms",
                                "drain_timeout_ms", "admin_reload", "log_file",
                                "max_connections", "idle_timeout_ms",
                                "light_request_cost", "heavy_batch",
                                "light_replicas"};
    static const char *no[] = {"listeners", "engine", "devices", "cluster.rank",
                               "cluster.world", "cluster.coordinator",
                               "cluster.join_timeout_ms",
                               "cluster.step_timeout_ms", "replicas",
                               "cpu_threads", "queue_depth", "max_message_bytes",
                               "probe_interval_ms", "probe_restart_after", "ipc_mode",
                               "memory_budget_bytes", "max_heavy_messages",
                               "cluster.secret", "metrics", "cpus",
                               "idle_spin"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        FT_CHECK(ft_config_find(yes[i])->reloadable == 1);
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        FT_CHECK(ft_config_find(no[i])->reloadable == 0);
    FT_CHECK_EQ_U64(sizeof yes / sizeof yes[0] + sizeof no / sizeof no[0],
                    FT_CONFIG_NSETTINGS);
    for (int i = 0; i < FT_CONFIG_L_NFIELDS; i++)
        FT_CHECK(ft_config_listener_rows[i].reloadable == 0);

    const char *base = "index = \"a\";\nengine = \"cpu\";\n"
                       "listeners = ( { url = \"ipc:///tmp/a\"; } );\n";
    load_ok(base);
    cfg2 = cfg;
    load_ok("index = \"b\";\nengine = \"cpu\";\nmax_batch = 4;\n"
            "caps = { max_beam = 10; };\nlog_level = \"debug\";\n"
            "listeners = ( { url = \"ipc:///tmp/a\"; } );\n");
    FT_PASS(ft_config_reload_check(&cfg2, &cfg, err, sizeof err));
    load_ok("index = \"a\";\n\nengine = \"gpu\";\n"
            "listeners = ( { url = \"ipc:///tmp/a\"; } );\n");
    FT_FAIL(ft_config_reload_check(&cfg2, &cfg, err, sizeof err), FT_ECONFIG);
    FT_CHECK_STR(err, "t.conf:3: engine: changed, but takes effect only on a restart");
    load_ok("index = \"a\";\nengine = \"cpu\";\n"
            "listeners = ( { url = \"ipc:///tmp/a\"; admin = true; } );\n");
    FT_FAIL(ft_config_reload_check(&cfg2, &cfg, err, sizeof err), FT_ECONFIG);
    FT_CHECK_STR(err, "t.conf:3: listeners: changed, but takes effect only on a restart");
    load_ok("index = \"a\";\nengine = \"cpu\";\ndevices = [0, 1];\n"
            "listeners = ( { url = \"ipc:///tmp/a\"; } );\n");
    FT_FAIL(ft_config_reload_check(&cfg2, &cfg, err, sizeof err), FT_ECONFIG);
    FT_CHECK_STR(err, "t.conf:3: devices: changed, but takes effect only on a restart");
}

static void test_example(const char *path)
{
    char *text = read_all(path);
    FT_PASS(ft_config_load(&cfg, path, err, sizeof err));
    FT_PASS(ft_config_validate(&cfg, err, sizeof err));
    /* Every setting is written out in the example... */
    for (int i = 0; i < FT_CONFIG_NSETTINGS; i++)
        if (cfg.src[i].kind != FT_CONFIG_SRC_FILE) {
            fprintf(stderr, "%s does not set %s\n", path, ft_config_rows[i].name);
            exit(1);
        }
    /* ...and every listener field in at least one listener. */
    for (int f = 0; f < FT_CONFIG_L_NFIELDS; f++) {
        int found = 0;
        for (uint32_t l = 0; l < cfg.n_listeners; l++)
            found |= cfg.listeners[l].src[f].kind == FT_CONFIG_SRC_FILE;
        if (!found) {
            fprintf(stderr, "%s sets no listeners[].%s\n", path,
                    ft_config_listener_rows[f].name);
            exit(1);
        }
    }
    /* Each setting has its paragraph: a comment naming it right above. */
    for (int i = 0; i < FT_CONFIG_NSETTINGS; i++) {
        const char *dot = strrchr(ft_config_rows[i].name, '.');
        const char *leaf = dot ? dot + 1 : ft_config_rows[i].name;
        char pat[96];
        snprintf(pat, sizeof pat, "# %s: ", leaf);
        const char *para = strstr(text, pat);
        if (para == NULL) {
            fprintf(stderr, "%s has no paragraph '%s'\n", path, pat);
            exit(1);
        }
        /* ...followed by the setting itself, after only comment lines. */
        const char *p = para;
        for (;;) {
            p = strchr(p, '\n');
            FT_CHECK(p != NULL);
            p += strspn(p, "\n ");
            if (*p != '#')
                break;
        }
        snprintf(pat, sizeof pat, "%s = ", leaf);
        if (strncmp(p, pat, strlen(pat)) != 0) {
            fprintf(stderr, "%s: the paragraph of %s is not right above it\n",
                    path, ft_config_rows[i].name);
            exit(1);
        }
    }
    /* The index it names does not exist here: check-config says so. */
    FT_FAIL(ft_config_check_files(&cfg, err, sizeof err), FT_ECONFIG);
    char want[2048];
    snprintf(want, sizeof want, "%s:%d: index: %s does not exist", path,
             line_of(text, "\nindex = ") + 1, cfg.index_path);
    FT_CHECK_STR(err, want);
    free(text);
}

/* test_table walks the rows for what the daemon relies on: serve's flags
 * are distinct, a bool switch is the only flag without an argument, a
 * config gauge is a Prometheus gauge name with its help, a number, and a
 * hook is one the daemon supplies. */
static void test_table(void)
{
    for (int i = 0; i < FT_CONFIG_NSETTINGS; i++) {
        const ft_config_row *r = &ft_config_rows[i];
        FT_CHECK(r->name != NULL && r->name[0] && r->doc && r->doc[0]);
        FT_CHECK(r->def != NULL);
        FT_CHECK(r->hook >= FT_CONFIG_HOOK_NONE && r->hook < FT_CONFIG_NHOOKS);
        if (r->flag) {
            FT_CHECK(r->flag[0] != '-' && r->flag[0] != 0);
            FT_CHECK((r->flag_arg == NULL) == (r->type == FT_CONFIG_BOOL));
            for (int j = 0; j < i; j++)
                FT_CHECK(ft_config_rows[j].flag == NULL ||
                         strcmp(ft_config_rows[j].flag, r->flag) != 0);
        } else {
            FT_CHECK(!(r->show & FT_CONFIG_SHOW_CHECK));
        }
        if (r->gauge) {
            FT_CHECK(strncmp(r->gauge, "flashtrie_", 10) == 0);
            FT_CHECK(strspn(r->gauge, "abcdefghijklmnopqrstuvwxyz_") ==
                     strlen(r->gauge));
            FT_CHECK(r->gauge_help && r->gauge_help[0]);
            FT_CHECK(strpbrk(r->gauge_help, "\\\n") == NULL);
            FT_CHECK(r->type == FT_CONFIG_INT || r->type == FT_CONFIG_BOOL ||
                     r->type == FT_CONFIG_ENUM);
        }
    }
    /* Every hook is some row's. */
    for (int h = FT_CONFIG_HOOK_NONE + 1; h < FT_CONFIG_NHOOKS; h++) {
        int used = 0;
        for (int i = 0; i < FT_CONFIG_NSETTINGS; i++)
            used |= ft_config_rows[i].hook == h;
        FT_CHECK(used);
    }
}

/* A hook that counts its calls and what it saw. */
static int g_calls[FT_CONFIG_NHOOKS], g_saw_old;
static int count_batch(void *ctx, ft_config *live, const ft_config *old,
                       char *e, size_t el)
{
    (void)ctx, (void)live, (void)e, (void)el;
    g_calls[FT_CONFIG_HOOK_BATCH_WINDOW]++;
    g_saw_old = old != NULL;
    return FT_OK;
}
static int count_level(void *ctx, ft_config *live, const ft_config *old,
                       char *e, size_t el)
{
    (void)ctx, (void)live, (void)old, (void)e, (void)el;
    g_calls[FT_CONFIG_HOOK_LOG_LEVEL]++;
    return FT_OK;
}
static int fail_file(void *ctx, ft_config *live, const ft_config *old,
                     char *e, size_t el)
{
    (void)ctx, (void)live, (void)old;
    g_calls[FT_CONFIG_HOOK_LOG_FILE]++;
    snprintf(e, el, "log_file: no");
    return FT_EIO;
}

/* test_live: a reload takes the reloadable values (and every source) into
 * the live settings and leaves the others; each hook runs once, however
 * many of its rows there are; a failing hook stops the run. */
static void test_live(void)
{
    load_ok("index = \"a\";\nmax_batch = 4;\nqueue_depth = 9;\n");
    cfg2 = cfg;
    load_ok("\nindex = \"b\";\nmax_batch = 8;\nmax_wait_us = 5;\n"
            "queue_depth = 9;\nlog_level = \"debug\";\n");
    FT_PASS(ft_config_reload_check(&cfg2, &cfg, err, sizeof err));
    ft_config_take_reloadable(&cfg2, &cfg);
    FT_CHECK_STR(cfg2.index_path, "b");
    FT_CHECK_EQ_U64(cfg2.max_batch, 8);
    FT_CHECK_EQ_U64(FT_CONFIG_LIVE(&cfg2, max_wait_us), 5);
    FT_CHECK_EQ_U64(cfg2.log_level, 3);
    FT_CHECK_EQ_U64(cfg2.queue_depth, 9);
    FT_CHECK_EQ_U64(cfg2.src[FT_CONFIG_S_QUEUE_DEPTH].line, 5);
    FT_CHECK_EQ_U64(ft_config_number(&ft_config_rows[FT_CONFIG_S_MAX_BATCH],
                                     &cfg2), 8);
    FT_CHECK_EQ_U64(ft_config_number(&ft_config_rows[FT_CONFIG_S_LOG_LEVEL],
                                     &cfg2), 3);
    ft_config_hook_fn hooks[FT_CONFIG_NHOOKS] = {
        [FT_CONFIG_HOOK_BATCH_WINDOW] = count_batch,
        [FT_CONFIG_HOOK_LOG_LEVEL] = count_level};
    FT_PASS(ft_config_run_hooks(&cfg2, &cfg, hooks, NULL, err, sizeof err));
    FT_CHECK_EQ_U64(g_calls[FT_CONFIG_HOOK_BATCH_WINDOW], 1);
    FT_CHECK_EQ_U64(g_calls[FT_CONFIG_HOOK_LOG_LEVEL], 1);
    FT_CHECK(g_saw_old);
    hooks[FT_CONFIG_HOOK_LOG_FILE] = fail_file;
    FT_FAIL(ft_config_run_hooks(&cfg2, NULL, hooks, NULL, err, sizeof err),
            FT_EIO);
    FT_CHECK_STR(err, "log_file: no");
    FT_CHECK_EQ_U64(g_calls[FT_CONFIG_HOOK_BATCH_WINDOW], 2);
    FT_CHECK(!g_saw_old);
}

/* test_doc checks that docs/config.md holds the generated table as is. */
static void test_doc(const char *path)
{
    ft_buf b;
    ft_buf_init(&b);
    FT_PASS(ft_config_doc(&b));
    char *md = read_all(path);
    if (strstr(md, (const char *)b.data) == NULL) {
        fprintf(stderr, "%s does not hold the output of "
                        "'flashtrie check-config --doc':\n%s", path, b.data);
        exit(1);
    }
    for (int i = 0; i < FT_CONFIG_NSETTINGS; i++) {
        char pat[96];
        snprintf(pat, sizeof pat, "| `%s` |", ft_config_rows[i].name);
        FT_CHECK(strstr((const char *)b.data, pat) != NULL);
    }
    free(md);
    ft_buf_free(&b);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: config_test EXAMPLE_CONF CONFIG_MD\n");
        return 2;
    }
    test_defaults();
    test_dump_format();
    test_cli();
    test_errors();
    test_validate();
    test_files();
    test_reload();
    test_table();
    test_live();
    test_example(argv[1]);
    test_doc(argv[2]);
    printf("config_test: ok\n");
    return 0;
}
