/*
 * bench.h - "flashtrie bench" in its parts (private to daemon/bench/):
 * bench_parse.c reads the options, bench_input.c opens the index and makes
 * the request sets, bench_run.c measures every engine over every set and
 * bench_report.c prints the table and writes the report; cmd_bench.c
 * runs them in that order.
 */
#ifndef FT_BENCH_H
#define FT_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "flashtrie.h"
#include "flashtrie/internal/engine.h"
#include "workload.h"

#define MAX_LIST 16
#define MAX_REPLICAS 8

/* An option's comma-separated list of integers (--beam, --batch, ...). */
typedef struct u32_list {
    uint32_t v[MAX_LIST];
    int n;
} u32_list;

/* A request set that owns its grids. */
typedef struct req_set {
    uint32_t beam; /* the beam every request of the set asks for */
    size_t n;
    ft_request *r;
    void **mem;    /* owned grid memory per request */
} req_set;

/* What one (engine, set) run measured. */
typedef struct run_stats {
    int ran;
    uint32_t beam, K, T;
    size_t n, rejected;
    double mean, p50, p90, p95, p99, hits;
    double qps[MAX_LIST];
    uint64_t digest; /* FNV-1a of the b=1 results (results_digest) */
} run_stats;

/* The options of one bench run, as given (bench_parse). */
typedef struct bench_opts {
    int argc;                 /* the command line, for the report */
    char **argv;
    const char *index, *keys, *requests, *report;
    uint32_t fuse_term, round1, launch_graph, local_max;
    uint32_t round1_items, prefetch, local_cache;
    int values_host; /* --values host */
    uint64_t gen_keys, seed;
    ft_wl_req_opts ro;        /* generated requests (ro.seed = seed) */
    u32_list beams, batches, shards, devlist;
    fti_exchange xchg;
    int full_grid, timing, copy_lists, replicas;
    uint32_t shard_mode; /* --shard-mode: fti_group_opts.shard_mode */
    int use_cpu, use_gpu, threads, device;
    uint32_t warmup;
} bench_opts;

/* Rows: 0 cpu, 1 gpu, 2 + j the group of shards.v[j] engines. */
enum { BENCH_ROWS = 2 + MAX_LIST };

/* What a bench run holds from step to step. */
typedef struct bench_state {
    /* the report (bench_report_open) */
    int report_dir;
    char report_file[4200];
    /* the index (bench_open_index) */
    json_t *build;            /* the build's facts when one ran, else NULL */
    ft_library *lib;
    const ft_index *idx;      /* shard 0 of lib */
    ft_index_info info;
    size_t man_shards;        /* lib is a manifest of that many shards, or 0 */
    /* the requests (bench_make_requests), one set per beam */
    req_set sets[MAX_LIST];
    int nsets;
    /* the runs (bench_run_engines) */
    run_stats st[BENCH_ROWS][MAX_LIST];
    char eng_names[BENCH_ROWS][64]; /* the report's engine names */
    char row_names[BENCH_ROWS][64]; /* the table's labels */
    json_t *runs, *skipped;
    json_t *ratios;           /* bench_print_table's cpu/gpu ratios */
    int status;               /* the exit status so far */
} bench_state;

/* ---- bench_parse.c ---- */

/* bench_parse reads the command line into o; returns -1 to go on, else
 * the exit status (0 after --help, 2 after a message on a bad option). */
int bench_parse(bench_opts *o, int argc, char **argv);

/* ---- bench_input.c ---- */

/* bench_open_index opens --index, or builds --keys / --gen-keys into a
 * temporary index first, and prints its shape; 0, or the exit status
 * after a message. */
int bench_open_index(const bench_opts *o, bench_state *s);
/* bench_make_requests reads --requests, or generates one set per beam over
 * the library; 0, or the exit status after a message. */
int bench_make_requests(const bench_opts *o, bench_state *s);
/* bench_state_free releases everything s holds. */
void bench_state_free(bench_state *s);

/* ---- bench_run.c ---- */

/* bench_print_admission (--timing) prints the host work of validating and
 * preparing each set's requests, per request. */
void bench_print_admission(const req_set *sets, int nsets);
/* bench_run_engines runs every engine (and group) over every set into
 * s->st and s->runs; a failure sets s->status to 1 and goes on. */
void bench_run_engines(const bench_opts *o, bench_state *s);

/* ---- bench_report.c ---- */

/* bench_report_open checks --report and makes its folder, before the run,
 * so that a bad path fails before minutes of measuring; 0, or the exit
 * status after a message. */
int bench_report_open(const bench_opts *o, bench_state *s);
/* bench_stats_json is one run as the report's "runs" hold it. */
json_t *bench_stats_json(const run_stats *r, const char *engine,
                         const u32_list *batches);
/* bench_print_table prints the table, the ratios and the results digests. */
void bench_print_table(const bench_opts *o, bench_state *s);
/* bench_write_report writes --report (and its plots into a folder);
 * failures set s->status. */
void bench_write_report(const bench_opts *o, bench_state *s);

#endif /* FT_BENCH_H */
