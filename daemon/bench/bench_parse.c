/* bench_parse.c - "flashtrie bench": its options and usage (bench.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "gen.h"

static int parse_list(const char *opt, const char *s, uint32_t lo, uint32_t hi,
                      u32_list *out)
{
    out->n = 0;
    char buf[256];
    if (strlen(s) >= sizeof buf) {
        /* cut short, the last value would change silently */
        fprintf(stderr, "flashtrie bench: %s: list longer than %zu characters\n",
                opt, sizeof buf - 1);
        return -1;
    }
    snprintf(buf, sizeof buf, "%s", s);
    /* every item given: "10,,20" or "10," is a mistake, not "10,20" */
    size_t len = strlen(buf);
    if (len > 0 && (buf[0] == ',' || buf[len - 1] == ',' || strstr(buf, ",,"))) {
        fprintf(stderr, "flashtrie bench: %s: an empty item in '%s'\n", opt, s);
        return -1;
    }
    for (char *save, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (out->n == MAX_LIST) {
            fprintf(stderr, "flashtrie bench: %s: at most %d values\n", opt, MAX_LIST);
            return -1;
        }
        if (ft_cli_parse_u32("flashtrie bench",
                             opt, tok, lo, hi, &out->v[out->n]))
            return -1;
        out->n++;
    }
    if (out->n == 0) {
        fprintf(stderr, "flashtrie bench: %s: empty list\n", opt);
        return -1;
    }
    return 0;
}

/* An "N|off" option: off is UINT32_MAX (ft_engine_opts' "never"), else
 * an integer in lo..hi; non-zero after a message naming the option. */
static int bench_n_or_off(const char *opt, const char *arg, uint32_t lo,
                          uint32_t hi, uint32_t *out)
{
    if (strcmp(arg, "off") == 0) {
        *out = UINT32_MAX;
        return 0;
    }
    return ft_cli_parse_u32("flashtrie bench", opt, arg, lo, hi, out);
}

/* A two-way option's value: 0 for a, 1 for b, else -1 after a message
 * naming the option. */
static int bench_choice(const char *opt, const char *arg, const char *a,
                        const char *b)
{
    if (strcmp(arg, a) == 0)
        return 0;
    if (strcmp(arg, b) == 0)
        return 1;
    fprintf(stderr, "flashtrie bench: %s: expected %s or %s, got '%s'\n", opt,
            a, b, arg);
    return -1;
}

int bench_parse(bench_opts *opt, int argc, char **argv)
{
    static const struct option opts[] = {
        {"index", required_argument, 0, 'i'},    {"keys", required_argument, 0, 'k'},
        {"gen-keys", required_argument, 0, 'g'}, {"seed", required_argument, 0, 's'},
        {"requests", required_argument, 0, 'q'}, {"n-requests", required_argument, 0, 'n'},
        {"T", required_argument, 0, 'T'},        {"K", required_argument, 0, 'K'},
        {"beam", required_argument, 0, 'B'},     {"head", required_argument, 0, 'H'},
        {"results", required_argument, 0, 'R'},  {"theta-tok", required_argument, 0, 'a'},
        {"theta-sent", required_argument, 0, 'b'}, {"alpha", required_argument, 0, 'A'},
        {"engine", required_argument, 0, 'e'},   {"threads", required_argument, 0, 't'},
        {"batch", required_argument, 0, 'c'},    {"warmup", required_argument, 0, 'w'},
        {"device", required_argument, 0, 'd'},   {"report", required_argument, 0, 'r'},
        {"shards", required_argument, 0, 'S'},   {"exchange", required_argument, 0, 'X'},
        {"full-grid", no_argument, 0, 'F'},   {"timing", no_argument, 0, 'M'},
        {"replicas", required_argument, 0, 'P'}, {"fuse-term", required_argument, 0, 'U'},
        {"round1", required_argument, 0, 'Q'},
        {"round1-items", required_argument, 0, 'I'},
        {"select-local", required_argument, 0, 'Y'},
        {"prefetch", required_argument, 0, 'W'},
        {"select-local-cache", required_argument, 0, 'V'},
        {"launch", required_argument, 0, 'L'},
        {"values", required_argument, 0, 'J'},
        {"copy-lists", no_argument, 0, 'C'},   {"devices", required_argument, 0, 'G'},
        {"shard-mode", required_argument, 0, 'Z'},
        {"help", no_argument, 0, 'h'},           {0, 0, 0, 0}};
    const char *use =
        "usage: flashtrie bench (--index INDEX|MANIFEST | --keys FILE | --gen-keys N [--seed S])\n"
        "         [--requests FILE.jsonl | --n-requests N [--T 8] [--beam 100,200,500,1000]\n"
        "          [--K K] [--head r] [--results n] [--theta-tok x] [--theta-sent x]\n"
        "          [--alpha a]] [--engine cpu,gpu] [--threads N] [--device D]\n"
        "         [--batch 1,4,8,16,32] [--warmup N] [--report FILE.json | DIR/]\n"
        "         [--shards 2,4,8 [--exchange forest|kernel|device|nccl|nccl-device] [--full-grid] [--copy-lists]\n"
        "          [--shard-mode N]\n"
        "          [--devices 0,1,..]]\n"
        "         [--timing] [--replicas R] [--fuse-term N|off] [--round1 N|off]\n"
        "         [--round1-items N] [--launch graph|plain] [--select-local N|off]\n"
        "         [--prefetch on|off] [--select-local-cache N|off]\n"
        "         [--values device|host]\n"
        "  per engine and beam: latency (mean/p50/p90/p95/p99 ms) of requests run\n"
        "  one at a time, and throughput (q/s) in batches of each size; GPU/CPU\n"
        "  ratios when both ran.  K defaults to the beam.  --keys/--gen-keys build\n"
        "  an index first (into a temporary file) and report the build rate.\n"
        "  --index MANIFEST: its shards run as one group per engine (rows cpu/sN,\n"
        "  gpu/sN), requests drawn over the whole library (the same as over the\n"
        "  unsharded index); --shards is refused there.  Generated requests\n"
        "  sample the library once, on --threads cores.  After the table, one\n"
        "  'results' line per row: a digest of its b=1 answers (equal digests,\n"
        "  equal answers).\n"
        "  --shards: also a group of N GPU engines (N = 1..8; CPU engines without\n"
        "  gpu in --engine) per count, over the index split by first token\n"
        "  in-process (rows gpu/sN, and sN/gpu: the group over the unsharded engine);\n"
        "  --full-grid: engines sharing the GPU each launch on all of it;\n"
        "  --copy-lists: device copies into every shard's recv, not shared lists.\n"
        "  --shard-mode N: the shard kernels' selection and keep, a sum of 1 (one CTA\n"
        "  a list), 2 (every list spread over its shard's CTAs) and 4 (no beams built\n"
        "  before the exchange); 0, the default: spread where cheaper, early beams.\n"
        "  --devices D,...: shard j's engine on GPU D[j % n] (groups of --shards and of\n"
        "  a manifest; default all on --device); --exchange auto takes NCCL when every\n"
        "  shard has a GPU of its own, and on one GPU the forest (forest: one launch\n"
        "  a batch over every shard's trie, no exchange), else the shard kernel\n"
        "  (kernel: one launch per shard for all steps, lists exchanged inside the\n"
        "  kernels) when the shards' launches fit the GPU side by side; nccl-device: one shard per\n"
        "  GPU, one persistent launch per GPU exchanging through NCCL's device API\n"
        "  (ncclAllGather where it cannot be set up, logged).  --timing:\n"
        "  validation and preparation per request, the GPU engine's host/event\n"
        "  timings per launch size, and the groups' per-step split (kernels,\n"
        "  exchange, wait) by CUDA events.  --replicas R (1..8): the cpu and gpu\n"
        "  rows run R engines each (the GPU ones on --device; rows cpu/rR, gpu/rR),\n"
        "  their batch runs driving them from R threads at once, as serve's\n"
        "  replicas = R does; latency stays on one.  --fuse-term N|off: the GPU\n"
        "  engine's launches of one request with N terminal CTAs, or not fused\n"
        "  (ft_engine_opts.fuse_term; default the engine's choice).  --round1\n"
        "  N|off: a step of a request alone first expands its best ~N x beam\n"
        "  proposals, or always the whole step (ft_engine_opts.round1; default 128).\n"
        "  --round1-items N: only a step of at least N expansion items (1: any,\n"
        "  even one mostly of children) is tried in two rounds\n"
        "  (ft_engine_opts.round1_items; default eight a warp of the grid).\n"
        "  --launch graph|plain: the GPU engine's launches through a CUDA graph ended\n"
        "  by a completion word (default), or plain cooperative launches ended by a\n"
        "  stream synchronisation (ft_engine_opts.launch_graph).  --select-local\n"
        "  N|off: a fused launch narrows a next list of 4097..N candidates in each\n"
        "  CTA that selects it, or always over the whole grid\n"
        "  (ft_engine_opts.select_local_max; default 8192, at most 65536).\n"
        "  --prefetch on|off: the GPU expansion's prefetches of the new beams'\n"
        "  child table entries and next-level lines (ft_engine_opts.prefetch;\n"
        "  default on).  --select-local-cache N|off: each CTA that narrows a list\n"
        "  on its own (--select-local) keeps its first N places (by default as\n"
        "  many as fit, 7,170) or none in shared memory for the radix passes\n"
        "  (ft_engine_opts.select_local_cache).  --values device|host: the\n"
        "  GPU search writes each result's value from a device copy of the\n"
        "  values, or the host attaches them after the launch\n"
        "  (ft_engine_opts.values_on_device; default device).\n"
        "  --report DIR/ (or an existing folder): DIR/results.json, and with\n"
        "  gnuplot DIR/plots.gp drawn\n"
        "  into latency, throughput, speedup and shards PNGs.\n";
    memset(opt, 0, sizeof *opt);
    opt->argc = argc;
    opt->argv = argv;
    opt->seed = 1;
    ft_wl_req_opts_init(&opt->ro);
    opt->ro.n = 200;
    opt->beams = (u32_list){{100, 200, 500, 1000}, 4};
    opt->batches = (u32_list){{1, 4, 8, 16, 32}, 5};
    opt->xchg = FTI_EXCHANGE_AUTO;
    opt->replicas = 1;
    opt->use_cpu = opt->use_gpu = 1;
    opt->warmup = 10;
    int c;
    unsigned long long v;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        int r = ft_cli_req_opt("flashtrie bench", c, optarg, &opt->ro);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        switch (c) {
        case 'i': opt->index = optarg; break;
        case 'k': opt->keys = optarg; break;
        case 'q': opt->requests = optarg; break;
        case 'r': opt->report = optarg; break;
        case 'g':
        case 'n':
        case 's':
            if (ft_cli_parse_count("flashtrie bench",
                                   c == 'g' ? "--gen-keys" : c == 'n' ? "--n-requests" : "--seed",
                                   optarg, c != 's', &v))
                return 2;
            if (c == 'g')
                opt->gen_keys = v;
            else if (c == 'n')
                opt->ro.n = v;
            else
                opt->seed = v;
            break;
        case 'B':
            if (parse_list("--beam", optarg, 1, FT_MAX_BEAM, &opt->beams))
                return 2;
            break;
        case 'c':
            if (parse_list("--batch", optarg, 1, 4096, &opt->batches))
                return 2;
            break;
        case 'S':
            if (parse_list("--shards", optarg, 1, 8, &opt->shards))
                return 2;
            break;
        case 'G':
            if (parse_list("--devices", optarg, 0, 255, &opt->devlist))
                return 2;
            break;
        case 'F': opt->full_grid = 1; break;
        case 'M': opt->timing = 1; break;
        case 'P':
            if (ft_cli_parse_count("flashtrie bench", "--replicas", optarg, 1,
                                   &v))
                return 2;
            if (v > MAX_REPLICAS) {
                fprintf(stderr, "flashtrie bench: --replicas: at most %d, "
                        "got %llu\n", MAX_REPLICAS, v);
                return 2;
            }
            opt->replicas = (int)v;
            break;
        case 'U':
            if (bench_n_or_off("--fuse-term", optarg, 1, 1024, &opt->fuse_term))
                return 2;
            break;
        case 'Q':
            if (bench_n_or_off("--round1", optarg, 1, 4096, &opt->round1))
                return 2;
            break;
        case 'J': {
            int v = bench_choice("--values", optarg, "device", "host");
            if (v < 0)
                return 2;
            opt->values_host = v; /* host: ft_engine_opts' UINT32_MAX */
            break;
        }
        case 'W': {
            int v = bench_choice("--prefetch", optarg, "on", "off");
            if (v < 0)
                return 2;
            opt->prefetch = v ? UINT32_MAX : 0; /* off: ft_engine_opts' UINT32_MAX */
            break;
        }
        case 'V':
            if (bench_n_or_off("--select-local-cache", optarg, 1, 65536,
                               &opt->local_cache))
                return 2;
            break;
        case 'I':
            if (ft_cli_parse_u32("flashtrie bench",
                                 "--round1-items", optarg, 1, 1u << 24,
                                 &opt->round1_items))
                return 2;
            break;
        case 'L': {
            int v = bench_choice("--launch", optarg, "graph", "plain");
            if (v < 0)
                return 2;
            opt->launch_graph = v ? UINT32_MAX : 0; /* plain: UINT32_MAX */
            break;
        }
        case 'Y':
            if (bench_n_or_off("--select-local", optarg, 1, 65536, &opt->local_max))
                return 2;
            break;
        case 'C': opt->copy_lists = 1; break;
        case 'Z': {
            char *end;
            unsigned long v = strtoul(optarg, &end, 10);
            if (*optarg == 0 || *end != 0 || v > 7) {
                fprintf(stderr, "flashtrie bench: --shard-mode: 0..7\n");
                return 2;
            }
            opt->shard_mode = (uint32_t)v;
            break;
        }
        case 'X':
            if (!strcmp(optarg, "device"))
                opt->xchg = FTI_EXCHANGE_DEVICE;
            else if (!strcmp(optarg, "kernel"))
                opt->xchg = FTI_EXCHANGE_KERNEL;
            else if (!strcmp(optarg, "nccl"))
                opt->xchg = FTI_EXCHANGE_NCCL;
            else if (!strcmp(optarg, "nccl-device"))
                opt->xchg = FTI_EXCHANGE_NCCL_DEVICE;
            else if (!strcmp(optarg, "forest"))
                opt->xchg = FTI_EXCHANGE_FOREST;
            else {
                fprintf(stderr, "flashtrie bench: --exchange: expected forest, kernel, device, nccl or nccl-device, got '%s'\n", optarg);
                return 2;
            }
            break;
        case 'e': {
            /* Read in place: a copy into a fixed buffer cut long values
             * short, and an empty list ("" or ",") ran no engine at all
             * and exited 0. */
            opt->use_cpu = opt->use_gpu = 0;
            /* every item, the empty ones too ("", "cpu,", ",gpu"): each
             * must name an engine, so at least one is named */
            for (const char *t = optarg;; t++) {
                size_t n = strcspn(t, ",");
                if (n == 3 && !strncmp(t, "cpu", 3))
                    opt->use_cpu = 1;
                else if (n == 3 && !strncmp(t, "gpu", 3))
                    opt->use_gpu = 1;
                else {
                    fprintf(stderr, "flashtrie bench: --engine: expected cpu, gpu or cpu,gpu, got '%s'\n", optarg);
                    return 2;
                }
                t += n;
                if (*t == 0)
                    break;
            }
            break;
        }
        case 't': {
            uint32_t t;
            if (ft_cli_parse_u32("flashtrie bench",
                                 "--threads", optarg, 0, 1024, &t))
                return 2;
            opt->threads = (int)t;
            break;
        }
        case 'd': {
            uint32_t d;
            if (ft_cli_parse_u32("flashtrie bench",
                                 "--device", optarg, 0, 255, &d))
                return 2;
            opt->device = (int)d;
            break;
        }
        case 'w':
            if (ft_cli_parse_u32("flashtrie bench",
                                 "--warmup", optarg, 0, 1000000, &opt->warmup))
                return 2;
            break;
        case 'h': fputs(use, stdout); return 0;
        default: fputs(use, stderr); return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "flashtrie bench: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if ((opt->index != NULL) + (opt->keys != NULL) + (opt->gen_keys != 0) != 1) {
        fprintf(stderr, "flashtrie bench: give exactly one of --index, --keys and --gen-keys\n");
        fputs(use, stderr);
        return 2;
    }
    opt->ro.seed = opt->seed;
    return -1;
}
