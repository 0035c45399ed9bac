/* cmd_split.c - "flashtrie split": an index in, shard indexes and their
 * manifest out (docs/sharding.md). */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "flashtrie.h"

static const char split_usage[] =
    "usage: flashtrie split INDEX --output MANIFEST (--shards N | "
    "--shard-bytes B[K|M|G])\n"
    "         [--threads N] [--no-verify] [--progress|--quiet]\n"
    "  cuts INDEX by first token into N shards of balanced trie bytes, or\n"
    "  into as few shards as fit B trie bytes each; writes the shards as\n"
    "  MANIFEST.shard-III-of-NNN.idx beside the manifest (the shard files\n"
    "  of an earlier split into another count, which the manifest named\n"
    "  before it was replaced, are removed).\n";

int cmd_split(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, 0, 'o'},
        {"shards", required_argument, 0, 'n'},
        {"shard-bytes", required_argument, 0, 'b'},
        {"threads", required_argument, 0, 't'},
        {"no-verify", no_argument, 0, 'V'},
        {"progress", no_argument, 0, 'p'},
        {"quiet", no_argument, 0, 'q'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    const char *output = NULL;
    unsigned long long shards = 0, bytes = 0, threads = 0;
    int quiet = 0, progress = 0, no_verify = 0, c;
    optind = 1;
    opterr = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'o': output = optarg; break;
        case 'V': no_verify = 1; break;
        case 'p': progress = 1; quiet = 0; break;
        case 'q': quiet = 1; progress = 0; break;
        case 'n':
            if (ft_cli_parse_u64(optarg, &shards) || shards == 0 ||
                shards > FT_MAX_SHARDS) {
                fprintf(stderr, "flashtrie split: --shards: '%s' is not a "
                        "number from 1 to %u\n", optarg,
                        FT_MAX_SHARDS);
                return 2;
            }
            break;
        case 'b':
            if (ft_cli_parse_bytes(optarg, &bytes) || bytes == 0) {
                fprintf(stderr, "flashtrie split: --shard-bytes: '%s' is not "
                        "a byte count (e.g. 2G, 512M)\n", optarg);
                return 2;
            }
            break;
        case 't':
            if (ft_cli_parse_u64(optarg, &threads) || threads > 1024) {
                fprintf(stderr, "flashtrie split: --threads: '%s' is not a "
                        "number from 0 (all cores) to 1024\n", optarg);
                return 2;
            }
            break;
        case 'h': fputs(split_usage, stdout); return 0;
        default: fputs(split_usage, stderr); return 2;
        }
    }
    const char *why = NULL;
    if (optind != argc - 1)
        why = optind < argc ? "give exactly one INDEX" : "INDEX is required";
    else if (output == NULL)
        why = "--output is required";
    else if ((shards == 0) == (bytes == 0))
        why = "give one of --shards and --shard-bytes";
    if (why) {
        fprintf(stderr, "flashtrie split: %s\n", why);
        fputs(split_usage, stderr);
        return 2;
    }
    if (progress && ft_log_get_level() < FT_LOG_INFO)
        ft_log_set_level(FT_LOG_INFO);
    return ft_cli_split("split", argv[optind], output, (uint32_t)shards,
                        bytes, (int)threads, no_verify, quiet);
}
