/* cmd_gen.c - "flashtrie gen keys" and "flashtrie gen requests": seeded
 * synthetic libraries and request grids (router/workload/workload.h). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "flashtrie.h"
#include "gen.h"
#include "workload.h"

/* keys_opt parses one option that "gen keys" and "gen index" share (--n,
 * --seed, --threads, --stats); returns 1 when c was one, -1 on a bad value,
 * 0 otherwise. */
static int keys_opt(const char *cmd, int c, const char *arg,
                    ft_wl_keys_opts *o, int *have_n, int *stats)
{
    unsigned long long v;
    uint32_t t;
    switch (c) {
    case 'n':
        if (ft_cli_parse_count(cmd, "--n", arg, 1, &v))
            return -1;
        o->n = v;
        *have_n = 1;
        return 1;
    case 's':
        if (ft_cli_parse_count(cmd, "--seed", arg, 0, &v))
            return -1;
        o->seed = v;
        return 1;
    case 't':
        if (ft_cli_parse_u32(cmd, "--threads", arg, 0, 256, &t))
            return -1;
        o->threads = (int)t;
        return 1;
    case 'S': *stats = 1; return 1;
    default: return 0;
    }
}

int ft_cli_file_sink(const void *buf, size_t len, void *arg)
{
    return fwrite(buf, 1, len, (FILE *)arg) == len ? 0 : FT_EIO;
}

void ft_cli_print_key_stats(FILE *f, const ft_wl_keys_stats *st)
{
    double k = st->keys ? (double)st->keys : 1.0;
    fprintf(f, "keys: %" PRIu64 "\n", st->keys);
    fprintf(f, "nodes: %" PRIu64 " (%.3f per key)\n", st->nodes,
            (double)st->nodes / k);
    fprintf(f, "root_fanout: %" PRIu64 "\n", st->root_fanout);
    fprintf(f, "mean_len: %.3f\n", (double)st->tokens / k);
    fprintf(f, "len_hist:");
    for (uint32_t i = 1; i <= FT_WL_MAX_LEN; i++)
        fprintf(f, " %u:%.3f", i, (double)st->len_hist[i] / k);
    fprintf(f, "\n");
    fprintf(f, "high_label_share: %.3f\n",
            st->nodes > 1 ? (double)st->high_labels / (double)(st->nodes - 1)
                          : 0.0);
    fprintf(f, "seconds: %.3f (%.0f keys/s)\n", st->seconds,
            st->seconds > 0 ? (double)st->keys / st->seconds : 0.0);
}

int ft_cli_build_temp(char *path, size_t pathlen, const char *keys,
                      ft_build_stats *st, char *errbuf, size_t errlen)
{
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(path, pathlen, "%s/flashtrie_tmp_XXXXXX", dir);
    int fd = mkstemp(path);
    if (fd < 0) {
        snprintf(errbuf, errlen, "%s: %s", path, strerror(errno));
        path[0] = 0;
        return FT_EIO;
    }
    close(fd);
    ft_build_opts bo;
    ft_build_opts_init(&bo);
    bo.input = keys;
    bo.output = path;
    bo.tmp_dir = dir;
    ft_build_stats local;
    ft_build_stats_init(&local);
    if (st)
        ft_build_stats_init(st);
    int rc = ft_build(st ? st : &local, &bo, errbuf, errlen);
    if (rc) {
        unlink(path);
        path[0] = 0;
    }
    return rc;
}

static int gen_keys(int argc, char **argv)
{
    static const struct option opts[] = {
        {"n", required_argument, 0, 'n'},      {"seed", required_argument, 0, 's'},
        {"format", required_argument, 0, 'f'}, {"output", required_argument, 0, 'o'},
        {"threads", required_argument, 0, 't'}, {"vocab", required_argument, 0, 'v'},
        {"stats", no_argument, 0, 'S'},        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    const char *use =
        "usage: flashtrie gen keys --n N [--seed S] [--format text|ftk]\n"
        "                          [--output FILE|-] [--threads T] [--vocab V] [--stats]\n"
        "  writes N distinct keys (docs/specification.md section 2), sorted, deterministic in S;\n"
        "  --format defaults to ftk for a FILE ending in .ftk, else text;\n"
        "  --stats prints nodes/key, fan-out and lengths on stderr.\n";
    ft_wl_keys_opts o;
    ft_wl_keys_opts_init(&o);
    const char *out = "-", *format = NULL;
    int stats = 0, have_n = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        int r = keys_opt("flashtrie gen keys", c, optarg, &o, &have_n, &stats);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        switch (c) {
        case 'f': format = optarg; break;
        case 'o': out = optarg; break;
        case 'v':
            if (ft_cli_parse_u32("flashtrie gen keys",
                                 "--vocab", optarg, 2, UINT32_MAX, &o.vocab))
                return 2;
            break;
        case 'h': fputs(use, stdout); return 0;
        default: fputs(use, stderr); return 2;
        }
    }
    if (optind != argc || !have_n) {
        fprintf(stderr, "flashtrie gen keys: %s\n",
                have_n ? "unexpected argument" : "--n is required");
        fputs(use, stderr);
        return 2;
    }
    ft_wl_format fmt = FT_WL_TEXT;
    if (format == NULL) {
        size_t l = strlen(out);
        if (l > 4 && !strcmp(out + l - 4, ".ftk"))
            fmt = FT_WL_FTK;
    } else if (!strcmp(format, "ftk")) {
        fmt = FT_WL_FTK;
    } else if (strcmp(format, "text")) {
        fprintf(stderr, "flashtrie gen keys: --format: expected text or ftk, got '%s'\n", format);
        return 2;
    }
    ft_cli_out fo;
    if (ft_cli_out_open(&fo, out, "wb") != 0) {
        fprintf(stderr, "flashtrie gen keys: %s: %s\n", out, strerror(errno));
        return 1;
    }
    FILE *f = fo.f;
    static char iobuf[1 << 20];
    setvbuf(f, iobuf, _IOFBF, sizeof iobuf);
    ft_wl_keys_stats st;
    int rc = ft_wl_keys_write(&st, &o, fmt, ft_cli_file_sink, f);
    /* a failed run leaves no partial file under the name */
    int crc = ft_cli_out_close(&fo, rc == FT_OK);
    if (rc == FT_ELIMIT) {
        /* not "out of memory": the shape needs more distinct tokens */
        fprintf(stderr, "flashtrie gen keys: a vocabulary of %" PRIu32 " tokens is "
                "too small for %" PRIu64 " distinct keys; give a larger --vocab\n",
                o.vocab ? o.vocab : (uint32_t)FT_WL_VOCAB, o.n);
        return 1;
    }
    if (rc || crc) {
        fprintf(stderr, "flashtrie gen keys: %s\n",
                rc ? ft_strerror(rc) : "writing the output failed");
        return 1;
    }
    if (stats)
        ft_cli_print_key_stats(stderr, &st);
    return 0;
}

/* ft_cli_req_opt parses one request-shaping option shared by "gen
 * requests" and "bench"; returns 1 when c was one of them, -1 on a bad
 * value (message printed), 0 when c is not a request option. */
int ft_cli_req_opt(const char *cmd, int c, const char *arg,
                   ft_wl_req_opts *o)
{
    double d;
    switch (c) {
    case 'T': return ft_cli_parse_u32(cmd, "--T", arg, 1, FT_MAX_T, &o->T) ? -1 : 1;
    case 'K': return ft_cli_parse_u32(cmd, "--K", arg, 1, FT_MAX_K, &o->K) ? -1 : 1;
    case 'H':
        o->head_set = 1;
        return ft_cli_parse_u32(cmd,
                                "--head", arg, 0, FT_MAX_K, &o->head) ? -1 : 1;
    case 'R':
        return ft_cli_parse_u32(cmd,
                                "--results", arg, 1, FT_MAX_RESULTS,
                                &o->results) ? -1 : 1;
    case 'a':
    case 'b':
    case 'A':
        if (ft_cli_parse_f64(arg, &d) || (c != 'A' && !isfinite((float)d) && d != -INFINITY) ||
            (c == 'A' && !(d >= 0 && d <= 10))) {
            fprintf(stderr, "%s: --%s: bad value '%s'\n", cmd,
                    c == 'a' ? "theta-tok" : c == 'b' ? "theta-sent" : "alpha", arg);
            return -1;
        }
        if (c == 'a') {
            o->theta_tok = (float)d;
            o->has_theta_tok = 1;
        } else if (c == 'b') {
            o->theta_sent = (float)d;
            o->has_theta_sent = 1;
        } else {
            o->alpha = d;
            o->has_alpha = 1;
        }
        return 1;
    }
    return 0;
}

static int gen_requests(int argc, char **argv)
{
    static const struct option opts[] = {
        {"index", required_argument, 0, 'i'}, {"keys", required_argument, 0, 'k'},
        {"n", required_argument, 0, 'n'},     {"seed", required_argument, 0, 's'},
        {"T", required_argument, 0, 'T'},     {"K", required_argument, 0, 'K'},
        {"beam", required_argument, 0, 'B'},  {"head", required_argument, 0, 'H'},
        {"results", required_argument, 0, 'R'}, {"theta-tok", required_argument, 0, 'a'},
        {"theta-sent", required_argument, 0, 'b'}, {"alpha", required_argument, 0, 'A'},
        {"output", required_argument, 0, 'o'}, {"threads", required_argument, 0, 't'},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    const char *use =
        "usage: flashtrie gen requests (--index INDEX|MANIFEST | --keys FILE) [--n N]\n"
        "         [--T 8] [--K K] [--beam B] [--head r] [--seed S] [--results n]\n"
        "         [--theta-tok x] [--theta-sent x] [--alpha a] [--output FILE|-]\n"
        "         [--threads T]\n"
        "  writes N NAR-style request grids (docs/specification.md section 7 JSON Lines): per\n"
        "  position r head proposals follow a library key and its siblings, the\n"
        "  other K-r come from the library's per-position token marginals;\n"
        "  K defaults to B, r to K/10.  --threads (default: all cores) sample\n"
        "  the library in parallel; the output is the same for any T, and the\n"
        "  same over a manifest as over the unsharded index.\n";
    ft_wl_req_opts o;
    ft_wl_req_opts_init(&o);
    const char *index = NULL, *keys = NULL, *out = "-";
    int c;
    unsigned long long v;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        int r = ft_cli_req_opt("flashtrie gen requests", c, optarg, &o);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        switch (c) {
        case 'i': index = optarg; break;
        case 'k': keys = optarg; break;
        case 'o': out = optarg; break;
        case 't': {
            uint32_t t;
            if (ft_cli_parse_u32("flashtrie gen requests",
                                 "--threads", optarg, 0, 256, &t))
                return 2;
            o.threads = (int)t;
            break;
        }
        case 'n':
            if (ft_cli_parse_count("flashtrie gen requests", "--n", optarg, 1, &v))
                return 2;
            o.n = v;
            break;
        case 's':
            if (ft_cli_parse_count("flashtrie gen requests", "--seed", optarg, 0, &v))
                return 2;
            o.seed = v;
            break;
        case 'B':
            if (ft_cli_parse_u32("flashtrie gen requests",
                                 "--beam", optarg, 1, FT_MAX_BEAM, &o.beam))
                return 2;
            break;
        case 'h': fputs(use, stdout); return 0;
        default: fputs(use, stderr); return 2;
        }
    }
    if (optind != argc || (index == NULL) == (keys == NULL)) {
        fprintf(stderr, "flashtrie gen requests: give exactly one of --index and --keys\n");
        fputs(use, stderr);
        return 2;
    }
    char err[512], tmp[256] = "";
    ft_library *lib = NULL;
    if (keys != NULL) {
        int rc = ft_cli_build_temp(tmp, sizeof tmp, keys, NULL, err, sizeof err);
        if (rc) {
            fprintf(stderr, "flashtrie gen requests: %s\n", err);
            return rc == FT_EINVAL ? 2 : 1;
        }
        index = tmp;
    }
    int rc = ft_library_open(&lib, index, FT_OPEN_NO_VERIFY, err, sizeof err);
    if (tmp[0])
        unlink(tmp); /* the mapping keeps the file alive */
    if (rc) {
        fprintf(stderr, "flashtrie gen requests: %s\n", err);
        return 1;
    }
    ft_wl_reqs *g;
    rc = ft_wl_reqs_open_library(&g, lib, &o, err, sizeof err);
    if (rc) {
        fprintf(stderr, "flashtrie gen requests: %s\n", err);
        ft_library_close(lib);
        return rc == FT_EINVAL ? 2 : 1;
    }
    ft_cli_out fo;
    if (ft_cli_out_open(&fo, out, "w") != 0) {
        fprintf(stderr, "flashtrie gen requests: %s: %s\n", out, strerror(errno));
        ft_wl_reqs_close(g);
        ft_library_close(lib);
        return 1;
    }
    rc = ft_wl_reqs_write(g, fo.f, err, sizeof err);
    int crc = ft_cli_out_close(&fo, rc == FT_OK);
    ft_wl_reqs_close(g);
    ft_library_close(lib);
    if (rc || crc) {
        fprintf(stderr, "flashtrie gen requests: %s\n", rc ? err : "writing failed");
        return 1;
    }
    return 0;
}

static int gen_index(int argc, char **argv)
{
    static const struct option opts[] = {
        {"n", required_argument, 0, 'n'},      {"seed", required_argument, 0, 's'},
        {"output", required_argument, 0, 'o'}, {"threads", required_argument, 0, 't'},
        {"stats", no_argument, 0, 'S'},        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    const char *use =
        "usage: flashtrie gen index --n N [--seed S] --output INDEX [--threads T] [--stats]\n"
        "  builds the index of the library 'gen keys --n N --seed S' writes,\n"
        "  straight from the sorted generator (no keys file); values are the\n"
        "  keys' line numbers, as 'flashtrie build' would give them.\n";
    ft_wl_keys_opts o;
    ft_wl_keys_opts_init(&o);
    const char *out = NULL;
    int stats = 0, have_n = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        int r = keys_opt("flashtrie gen index", c, optarg, &o, &have_n, &stats);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        switch (c) {
        case 'o': out = optarg; break;
        case 'h': fputs(use, stdout); return 0;
        default: fputs(use, stderr); return 2;
        }
    }
    if (optind != argc || !have_n || out == NULL) {
        fprintf(stderr, "flashtrie gen index: --n and --output are required\n");
        fputs(use, stderr);
        return 2;
    }
    char err[512];
    ft_wl_keys_stats st;
    int rc = ft_wl_build_index(&st, &o, out, err, sizeof err);
    if (rc) {
        fprintf(stderr, "flashtrie gen index: %s\n", err);
        return 1;
    }
    if (stats)
        ft_cli_print_key_stats(stderr, &st);
    return 0;
}

int cmd_gen(int argc, char **argv)
{
    const char *use = "usage: flashtrie gen keys|index|requests [options]  (--help for each)\n";
    if (argc < 2) {
        fputs(use, stderr);
        return 2;
    }
    if (!strcmp(argv[1], "keys"))
        return gen_keys(argc - 1, argv + 1);
    if (!strcmp(argv[1], "index"))
        return gen_index(argc - 1, argv + 1);
    if (!strcmp(argv[1], "requests"))
        return gen_requests(argc - 1, argv + 1);
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(use, stdout);
        return 0;
    }
    fprintf(stderr, "flashtrie gen: unknown kind '%s'\n", argv[1]);
    fputs(use, stderr);
    return 2;
}
