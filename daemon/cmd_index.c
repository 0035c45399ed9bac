/* cmd_index.c - "flashtrie info" and "flashtrie lookup". */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "flashtrie.h"

/* open_library opens an index or a shard manifest (told apart by magic). */
static int open_library(const char *path, int no_verify, ft_library **m)
{
    char err[1024];
    int rc = ft_library_open(m, path, no_verify ? FT_OPEN_NO_VERIFY : 0, err,
                             sizeof err);
    if (rc != FT_OK) {
        fprintf(stderr, "flashtrie: %s\n", err);
        return 1;
    }
    return 0;
}

int cmd_info(int argc, char **argv)
{
    static const struct option opts[] = {{"no-verify", no_argument, 0, 'n'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int no_verify = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'n')
            no_verify = 1;
        else if (c == 'h') {
            printf("usage: flashtrie info [--no-verify] INDEX|MANIFEST\n");
            return 0;
        } else
            return 2;
    }
    if (optind != argc - 1) {
        fprintf(stderr, "usage: flashtrie info [--no-verify] INDEX|MANIFEST\n");
        return 2;
    }
    ft_library *m;
    if (open_library(argv[optind], no_verify, &m))
        return 1;
    ft_index_info in;
    ft_index_info_init(&in);
    ft_library_info_get(&in, m);
    double keys = in.keys ? (double)in.keys : 1.0;
    printf("keys: %" PRIu64 "\n", in.keys);
    printf("nodes: %" PRIu64 "\n", in.nodes);
    printf("max_depth: %u\n", in.max_depth);
    printf("max_key_len: %u\n", in.max_key_len);
    printf("root_fanout: %" PRIu64 "\n", in.root_fanout);
    printf("high_label_nodes: %" PRIu64 "\n", in.high_nodes);
    printf("label_high_bits: %u\n", in.label_high_bits);
    printf("leaves: %" PRIu64 "\n", in.leaves);
    printf("unary_nodes: %" PRIu64 "\n", in.unary_nodes);
    printf("value_bits: %u\n", in.value_bits);
    printf("file_bytes: %" PRIu64 "\n", in.file_bytes);
    printf("trie_bytes: %" PRIu64 "\n", in.trie_bytes);
    printf("value_bytes: %" PRIu64 "\n", in.value_bytes);
    printf("trie_bytes_per_key: %.3f\n", (double)in.trie_bytes / keys);
    printf("trie_bytes_per_node: %.3f\n", (double)in.trie_bytes / (double)in.nodes);
    printf("value_bytes_per_key: %.3f\n", (double)in.value_bytes / keys);
    for (uint32_t s = 0; s < in.n_sections; s++)
        printf("section.%s: %" PRIu64 "\n", in.sections[s].name,
               in.sections[s].bytes);
    if (ft_library_is_manifest(m)) {
        /* Per shard: its range, counts and the bytes a GPU holds for it;
         * the balance is the largest shard's trie bytes over the mean. */
        uint64_t max = 0, sum = 0;
        size_t ns = ft_library_shards(m);
        printf("shards: %zu\n", ns);
        for (uint32_t i = 0; i < ns; i++) {
            ft_library_shard_info si, *s = &si;
            ft_library_shard_get(&si, m, i);
            printf("shard.%u: tokens %u..%u keys %" PRIu64 " nodes %" PRIu64
                   " trie_bytes %" PRIu64 " file_bytes %" PRIu64 " file %s\n",
                   i, s->lo, s->hi, s->keys, s->nodes, s->trie_bytes,
                   s->file_bytes, s->name);
            sum += s->trie_bytes;
            max = s->trie_bytes > max ? s->trie_bytes : max;
        }
        double mean = (double)sum / (double)ns;
        printf("shard_trie_bytes_max: %" PRIu64 "\n", max);
        printf("shard_trie_bytes_mean: %.1f\n", mean);
        printf("shard_balance: %.3f\n", mean > 0 ? (double)max / mean : 1.0);
    }
    ft_library_close(m);
    return 0;
}

static int print_key(const uint32_t *toks, size_t n, uint64_t value, void *arg)
{
    (void)arg;
    for (size_t i = 0; i < n; i++)
        printf(i ? " %u" : "%u", toks[i]);
    printf("\t%" PRIu64 "\n", value);
    return 0;
}

int cmd_lookup(int argc, char **argv)
{
    static const struct option opts[] = {{"prefix", no_argument, 0, 'p'},
                                         {"limit", required_argument, 0, 'l'},
                                         {"no-verify", no_argument, 0, 'n'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *use = "usage: flashtrie lookup [--prefix [--limit N]] "
                      "[--no-verify] INDEX|MANIFEST < keys\n"
                      "  each input line is a key (tokens separated by spaces);\n"
                      "  prints its value or \"not found\"; with --prefix, lists\n"
                      "  the keys under it (TAB value), at most N (default 100;\n"
                      "  0: all of them).\n"
                      "  exit 0; 1 when the index cannot be opened, a line is\n"
                      "  no key (\"error: line N: ...\" in its place, the other\n"
                      "  lines answered) or the input cannot be read; 2 bad\n"
                      "  arguments.\n";
    int prefix = 0, no_verify = 0, limit_given = 0, c;
    unsigned long long limit = 100;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'p': prefix = 1; break;
        case 'n': no_verify = 1; break;
        case 'l':
            if (ft_cli_parse_u64(optarg, &limit)) {
                fprintf(stderr, "flashtrie lookup: --limit: not a number: '%s'\n",
                        optarg);
                return 2;
            }
            limit_given = 1;
            break;
        case 'h': fputs(use, stdout); return 0;
        default: fputs(use, stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        fputs(use, stderr);
        return 2;
    }
    if (limit_given && !prefix) {
        /* a whole-key lookup prints one line a key: no limit to apply */
        fprintf(stderr, "flashtrie lookup: --limit applies only with --prefix\n");
        return 2;
    }
    ft_library *m;
    if (open_library(argv[optind], no_verify, &m))
        return 1;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    unsigned toks[FT_MAX_KEY_LEN_LIMIT + 1];
    unsigned long long lineno = 0;
    int status = 0, read_errno;
    while ((len = ft_cli_getline(&line, &cap, stdin, &read_errno)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = 0;
        /* a NUL byte would end the string early: "5\0 9" is no key 5 */
        int n = strlen(line) != (size_t)len
                    ? -1 : ft_cli_parse_tokens(line, toks, FT_MAX_KEY_LEN_LIMIT + 1);
        if (n < 0) {
            printf("error: line %llu: %s\n", lineno,
                   n == -1 ? "not a list of u32 tokens" : "key longer than 255");
            status = 1;
            continue;
        }
        if (prefix) {
            uint64_t seen;
            int rc = ft_library_prefix(&seen, m, (const uint32_t *)toks,
                                        (size_t)n, limit, print_key, NULL);
            if (rc == FT_ENOTFOUND)
                printf("not found\n");
            printf("\n");
        } else {
            uint64_t v;
            if (n > 0 && ft_library_lookup(&v, m, (const uint32_t *)toks,
                                            (size_t)n) == FT_OK)
                printf("%" PRIu64 "\n", v);
            else
                printf("not found\n");
        }
    }
    if (read_errno) { /* never taken for the end of the input */
        fprintf(stderr, "flashtrie lookup: cannot read the input: %s\n",
                strerror(read_errno));
        status = 1;
    }
    free(line);
    ft_library_close(m);
    return status;
}
