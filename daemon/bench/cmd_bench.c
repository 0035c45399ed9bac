/*
 * cmd_bench.c - "flashtrie bench": latency and throughput of the engines
 * over a request set, per beam width, with a JSON report.
 *
 * Per (engine, beam) it measures each request alone (b = 1) for latency
 * percentiles, then the whole set in batches of each asked size for
 * throughput.  Warm-up requests run first and are not counted.
 *
 * --shards N,...: also a shard group of N GPU engines per count, over the
 * index split by first token into N shards by ft_split (balanced trie
 * bytes; temporary files), exchanging on the one GPU (or as --exchange
 * says); --devices D,... puts shard j's engine on GPU D[j % n] (the
 * manifest's groups too), so that N shards run on N GPUs.
 *
 * The parts are bench.h's: the options (bench_parse.c), the index and
 * the request sets (bench_input.c), the runs (bench_run.c), the table and
 * the report (bench_report.c).
 */
#include <string.h>

#include "bench.h"
#include "commands.h"

int cmd_bench(int argc, char **argv)
{
    bench_opts opt;
    int rc = bench_parse(&opt, argc, argv);
    if (rc >= 0)
        return rc;
    /* static: the run statistics of every row and set are large */
    static bench_state bs;
    memset(&bs, 0, sizeof bs);
    if ((rc = bench_report_open(&opt, &bs)) == 0 &&
        (rc = bench_open_index(&opt, &bs)) == 0 &&
        (rc = bench_make_requests(&opt, &bs)) == 0) {
        if (opt.timing)
            bench_print_admission(bs.sets, bs.nsets);
        bench_run_engines(&opt, &bs);
        bench_print_table(&opt, &bs);
        bench_write_report(&opt, &bs);
        rc = bs.status;
    }
    bench_state_free(&bs);
    return rc;
}
