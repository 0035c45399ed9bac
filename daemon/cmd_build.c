/* cmd_build.c - "flashtrie build": a keys file in, an index file out. */
#include <getopt.h>
#include <sys/stat.h>
#include <unistd.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "flashtrie.h"

static const char build_usage[] =
    "usage: flashtrie build --input KEYS --output INDEX [--max-key-len N]\n"
    "         [--skip-invalid] [--max-memory BYTES[K|M|G]] [--threads N]\n"
    "         [--tmp-dir DIR] [--format auto|text|ftk] [--progress|--quiet]\n"
    "         [--shards N | --shard-bytes B[K|M|G]] [--clean]\n"
    "  KEYS is a text keys file, a .ftk binary file, or - for stdin\n"
    "  (binary when it starts with the FTKEYSV1 magic, or with --format ftk).\n"
    "  With --shards or --shard-bytes, INDEX is a manifest and the shards\n"
    "  are written beside it (see flashtrie split).\n"
    "  --clean removes what killed builds left (INDEX.tmp.<pid>, sorted runs\n"
    "  in the tmp dir) first; without --input it only cleans.\n";

/* print_progress prints the library's progress reports (and, at the end,
 * its phase profile) on stderr, one line each. */
static void print_progress(const ft_build_progress *p, void *arg)
{
    char line[512];
    (void)arg;
    if (ft_build_progress_format(line, sizeof line, p) == FT_OK)
        fprintf(stderr, "%s\n", line);
}

/* print_profile_only prints the phase profile alone (FT_BUILD_PROFILE). */
static void print_profile_only(const ft_build_progress *p, void *arg)
{
    if (p->phase == FT_BUILD_PROFILE)
        print_progress(p, arg);
}

int cmd_build(int argc, char **argv)
{
    static const struct option opts[] = {
        {"input", required_argument, 0, 'i'},
        {"output", required_argument, 0, 'o'},
        {"max-key-len", required_argument, 0, 'L'},
        {"skip-invalid", no_argument, 0, 's'},
        {"max-memory", required_argument, 0, 'm'},
        {"threads", required_argument, 0, 't'},
        {"tmp-dir", required_argument, 0, 'T'},
        {"format", required_argument, 0, 'f'},
        {"progress", no_argument, 0, 'p'},
        {"quiet", no_argument, 0, 'q'},
        {"shards", required_argument, 0, 'n'},
        {"shard-bytes", required_argument, 0, 'b'},
        {"clean", no_argument, 0, 'C'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    unsigned long long shards = 0, shard_bytes = 0;
    ft_build_opts o;
    ft_build_opts_init(&o);
    int quiet = 0, clean = 0, c;
    unsigned long long v;
    optind = 1;
    opterr = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'i': o.input = optarg; break;
        case 'o': o.output = optarg; break;
        case 's': o.skip_invalid = 1; break;
        case 'T': o.tmp_dir = optarg; break;
        case 'p': o.progress = print_progress; quiet = 0; break;
        case 'q': quiet = 1; o.progress = NULL; break;
        case 'C': clean = 1; break;
        case 'L':
            if (ft_cli_parse_u64(optarg, &v) || v == 0 ||
                v > FT_MAX_KEY_LEN_LIMIT) {
                fprintf(stderr,
                        "flashtrie build: --max-key-len: '%s' is not a "
                        "number from 1 to %u\n", optarg, FT_MAX_KEY_LEN_LIMIT);
                return 2;
            }
            o.max_key_len = (uint32_t)v;
            break;
        case 'm':
            if (ft_cli_parse_bytes(optarg, &v) || v == 0) {
                fprintf(stderr,
                        "flashtrie build: --max-memory: '%s' is not a byte "
                        "count (e.g. 4G, 512M)\n", optarg);
                return 2;
            }
            o.max_memory = v;
            break;
        case 't':
            if (ft_cli_parse_u64(optarg, &v) || v > 1024) {
                fprintf(stderr,
                        "flashtrie build: --threads: '%s' is not a number "
                        "from 0 (all cores) to 1024\n", optarg);
                return 2;
            }
            o.threads = (int)v;
            break;
        case 'f':
            if (!strcmp(optarg, "auto"))
                o.format = FT_KEYS_AUTO;
            else if (!strcmp(optarg, "text"))
                o.format = FT_KEYS_TEXT;
            else if (!strcmp(optarg, "ftk"))
                o.format = FT_KEYS_FTK;
            else {
                fprintf(stderr, "flashtrie build: --format: '%s' is not "
                                "auto, text or ftk\n", optarg);
                return 2;
            }
            break;
        case 'n':
            if (ft_cli_parse_u64(optarg, &shards) || shards == 0 ||
                shards > 65536) {
                fprintf(stderr, "flashtrie build: --shards: '%s' is not a "
                        "number from 1 to 65536\n", optarg);
                return 2;
            }
            break;
        case 'b':
            if (ft_cli_parse_bytes(optarg, &shard_bytes) || shard_bytes == 0) {
                fprintf(stderr, "flashtrie build: --shard-bytes: '%s' is not "
                        "a byte count (e.g. 2G, 512M)\n", optarg);
                return 2;
            }
            break;
        case 'h': fputs(build_usage, stdout); return 0;
        default: fputs(build_usage, stderr); return 2;
        }
    }
    if (clean && optind == argc && o.output != NULL) {
        /* Builds clean up after killed ones by themselves; --clean does it
         * now (and, without --input, only that), and says what it did. */
        uint64_t n = 0;
        char cerr[1024];
        if (ft_log_get_level() < FT_LOG_WARN)
            ft_log_set_level(FT_LOG_WARN);
        if (ft_build_clean(&n, o.output, o.tmp_dir, cerr, sizeof cerr) != FT_OK) {
            fprintf(stderr, "flashtrie build: --clean: %s\n", cerr);
            return 1;
        }
        if (!quiet)
            fprintf(stderr, "flashtrie build: removed %" PRIu64
                            " stale temporary files\n", n);
        if (o.input == NULL)
            return 0;
    }
    if (optind != argc || o.input == NULL || o.output == NULL) {
        if (optind != argc)
            fprintf(stderr, "flashtrie build: unexpected argument '%s'\n",
                    argv[optind]);
        else
            fprintf(stderr, "flashtrie build: --input and --output are "
                            "required\n");
        fputs(build_usage, stderr);
        return 2;
    }
    if (shards && shard_bytes) {
        fprintf(stderr, "flashtrie build: give one of --shards and "
                        "--shard-bytes\n");
        return 2;
    }
    /* The index is renamed onto --output when it is written: were that
     * the keys file, the keys would be gone. */
    struct stat si, so;
    if (strcmp(o.input, "-") != 0 && stat(o.input, &si) == 0 &&
        stat(o.output, &so) == 0 && si.st_dev == so.st_dev &&
        si.st_ino == so.st_ino) {
        fprintf(stderr, "flashtrie build: --output %s is the input file: the "
                        "index would replace the keys; give another path\n",
                o.output);
        return 2;
    }
    /* A sharded build writes the whole index aside first, then splits it:
     * the shards are the unsharded index's keys, by construction. */
    const char *manifest = o.output;
    char whole[4096];
    if (shards || shard_bytes) {
        if ((size_t)snprintf(whole, sizeof whole, "%s.whole.%ld", manifest,
                             (long)getpid()) >= sizeof whole) {
            fprintf(stderr, "flashtrie build: --output path too long\n");
            return 2;
        }
        o.output = whole;
        /* The library cleans up after killed builds of o.output; those of
         * the manifest's name (its whole index and shards) are ours. */
        char cerr[1024];
        if (ft_build_clean(NULL, manifest, o.tmp_dir, cerr, sizeof cerr) != FT_OK)
            fprintf(stderr, "flashtrie build: %s\n", cerr);
        if (o.progress && ft_log_get_level() < FT_LOG_INFO)
            ft_log_set_level(FT_LOG_INFO);
    }
    /* FT_BUILD_PROFILE=1 prints the phase profile (the library itself
     * reads no environment). */
    const char *pe = getenv("FT_BUILD_PROFILE");
    if (pe != NULL && pe[0] && strcmp(pe, "0")) {
        o.profile = 1;
        if (o.progress == NULL)
            o.progress = print_profile_only;
    }
    ft_build_stats st;
    ft_build_stats_init(&st);
    char err[1024];
    int rc = ft_build(&st, &o, err, sizeof err);
    if (rc != FT_OK) {
        fprintf(stderr, "flashtrie: %s\n", err[0] ? err : ft_strerror(rc));
        if (o.output != manifest)
            unlink(whole);
        return rc == FT_EINVAL ? 2 : 1;
    }
    if (!quiet) {
        fprintf(stderr,
                "flashtrie build: %" PRIu64 " keys (%" PRIu64 " read), %" PRIu64
                " nodes, %" PRIu64 " skipped, %" PRIu64 " runs, %.2f s, %" PRIu64
                " bytes -> %s\n",
                st.keys, st.keys_read, st.nodes, st.skipped, st.runs,
                st.seconds, st.index_bytes, o.output);
        if (st.skipped)
            fprintf(stderr, "flashtrie build: skipped %" PRIu64
                            " invalid lines\n", st.skipped);
    }
    if (o.output != manifest) {
        /* The index was just written and checked as it was built. */
        int status = ft_cli_split("build", whole, manifest, (uint32_t)shards,
                                  shard_bytes, o.threads, 1, quiet);
        unlink(whole);
        return status;
    }
    return 0;
}
