/* cli.c - what the subcommands share: the parsers of their option values
 * and the split that "flashtrie split" and "flashtrie build --shards" both
 * run (cli.h). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dirent.h>
#include <libgen.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "flashtrie/internal/filemagic.h"

int ft_cli_parse_u64(const char *s, unsigned long long *out)
{
    if (s == NULL || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

int ft_cli_parse_tokens(const char *s, unsigned *toks, int cap)
{
    int n = 0;
    while (*s) {
        while (*s == ' ' || *s == '\t')
            s++;
        if (!*s)
            break;
        if (*s < '0' || *s > '9')
            return -1;
        unsigned long long v = 0;
        while (*s >= '0' && *s <= '9') {
            v = v * 10 + (unsigned)(*s - '0');
            if (v > 4294967295ull)
                return -1;
            s++;
        }
        if (*s && *s != ' ' && *s != '\t')
            return -1;
        if (n == cap)
            return -2;
        toks[n++] = (unsigned)v;
    }
    return n;
}

int ft_cli_parse_bytes(const char *s, unsigned long long *out)
{
    size_t n = strlen(s);
    unsigned shift = 0;
    if (n > 0) {
        switch (s[n - 1]) {
        case 'k': case 'K': shift = 10; break;
        case 'm': case 'M': shift = 20; break;
        case 'g': case 'G': shift = 30; break;
        default: break;
        }
    }
    char num[64];
    if (n == 0 || n >= sizeof num)
        return -1;
    memcpy(num, s, n + 1);
    if (shift)
        num[n - 1] = 0;
    unsigned long long v;
    if (ft_cli_parse_u64(num, &v) || (shift && v > (~0ull >> shift)))
        return -1;
    *out = v << shift;
    return 0;
}

int ft_cli_parse_f64(const char *s, double *out)
{
    if (s == NULL || *s == '\0')
        return -1;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || *end || isnan(v))
        return -1;
    *out = v;
    return 0;
}

int ft_cli_parse_u32(const char *cmd, const char *opt, const char *s,
                     uint32_t lo, uint32_t hi, uint32_t *out)
{
    unsigned long long v;
    if (ft_cli_parse_u64(s, &v) || v < lo || v > hi) {
        fprintf(stderr, "%s: %s: expected an integer in %u..%u, got '%s'\n",
                cmd, opt, lo, hi, s);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

int ft_cli_parse_count(const char *cmd, const char *opt, const char *s,
                       int positive, unsigned long long *out)
{
    unsigned long long v;
    if (ft_cli_parse_u64(s, &v) || (positive && v == 0)) {
        fprintf(stderr, "%s: %s: expected %s, got '%s'\n", cmd, opt,
                positive ? "a positive integer" : "an integer", s);
        return -1;
    }
    *out = v;
    return 0;
}

ssize_t ft_cli_getline(char **buf, size_t *cap, FILE *f, int *err)
{
    errno = 0;
    ssize_t n = getline(buf, cap, f);
    *err = 0;
    if (n < 0 && (ferror(f) || errno == ENOMEM))
        *err = errno ? errno : EIO;
    return n;
}

/* is_manifest says whether the file at path starts with a shard
 * manifest's magic (FT_MANIFEST_MAGIC, shard/manifest.h). */
static int is_manifest(const char *path)
{
    return fti_file_has_magic(path, "FTSHARDS");
}

/* remove_stale_shards removes the shard files an earlier split into
 * another count left beside output (OUTPUT.shard-III-of-NNN.idx, NNN not
 * n): the manifest that named them has just been replaced, so nothing
 * can open them any more.  Says each one unless quiet. */
static void remove_stale_shards(const char *cmd, const char *output,
                                uint32_t n, int quiet)
{
    char dbuf[4096], bbuf[4096];
    if (strlen(output) >= sizeof dbuf)
        return;
    snprintf(dbuf, sizeof dbuf, "%s", output);
    snprintf(bbuf, sizeof bbuf, "%s", output);
    const char *dir = dirname(dbuf), *base = basename(bbuf);
    size_t bl = strlen(base);
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *nm = e->d_name;
        unsigned i, of;
        int end = -1;
        if (strncmp(nm, base, bl) != 0 ||
            sscanf(nm + bl, ".shard-%3u-of-%3u.idx%n", &i, &of, &end) != 2 ||
            end < 0 || nm[bl + (size_t)end] != 0 || of == n ||
            strlen(nm + bl) != strlen(".shard-000-of-000.idx"))
            continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, nm);
        if (unlink(path) == 0 && !quiet)
            fprintf(stderr, "flashtrie %s: removed %s (shard %u of an earlier "
                    "split into %u)\n", cmd, path, i, of);
    }
    closedir(d);
}

int ft_cli_split(const char *cmd, const char *index_path, const char *output,
                 uint32_t shards, uint64_t shard_bytes, int threads,
                 int no_verify, int quiet)
{
    char err[1024];
    ft_index *idx;
    int rc = ft_index_open(&idx, index_path, no_verify ? FT_OPEN_NO_VERIFY : 0,
                           err, sizeof err);
    /* A manifest fails as "bad magic": say what it is (the file was
     * opened as a regular file, so reading its magic cannot block). */
    if (rc == FT_EFORMAT && is_manifest(index_path)) {
        fprintf(stderr, "flashtrie %s: %s is a shard manifest; %s takes an "
                "unsharded index\n", cmd, index_path, cmd);
        return 2;
    }
    if (rc != FT_OK) {
        fprintf(stderr, "flashtrie %s: %s\n", cmd, err);
        return 1;
    }
    ft_split_opts o = {output, shards, shard_bytes, threads};
    ft_split_stats st;
    err[0] = 0;
    rc = ft_split(&st, idx, &o, err, sizeof err);
    ft_index_close(idx);
    if (rc != FT_OK) {
        fprintf(stderr, "flashtrie %s: %s\n", cmd,
                err[0] ? err : ft_strerror(rc));
        return rc == FT_EINVAL ? 2 : 1;
    }
    remove_stale_shards(cmd, output, st.shards, quiet);
    if (!quiet) {
        double mean = (double)st.total_bytes / (double)st.shards;
        fprintf(stderr,
                "flashtrie %s: %u shards, %" PRIu64 " keys, trie bytes max %"
                PRIu64 " mean %.0f (balance %.3f), %.2f s -> %s\n",
                cmd, st.shards, st.keys, st.max_bytes, mean,
                mean > 0 ? (double)st.max_bytes / mean : 1.0, st.seconds,
                output);
    }
    return 0;
}

int ft_cli_out_open(ft_cli_out *o, const char *path, const char *mode)
{
    o->path = path;
    o->tmp[0] = 0;
    if (strcmp(path, "-") == 0) {
        o->f = stdout;
        return 0;
    }
    struct stat st;
    int aside = stat(path, &st) != 0 ? errno == ENOENT : S_ISREG(st.st_mode);
    if (aside && (size_t)snprintf(o->tmp, sizeof o->tmp, "%s.tmp.%ld", path,
                                  (long)getpid()) >= sizeof o->tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    o->f = fopen(aside ? o->tmp : path, mode);
    if (o->f == NULL) {
        int e = errno;
        o->tmp[0] = 0;
        errno = e;
        return -1;
    }
    return 0;
}

int ft_cli_out_close(ft_cli_out *o, int ok)
{
    int rc = 0;
    if (o->f == stdout) {
        rc = fflush(stdout) != 0 || ferror(stdout) ? -1 : 0;
    } else if (o->f != NULL) {
        int bad = ferror(o->f);
        rc = fclose(o->f) != 0 || bad ? -1 : 0;
        if (o->tmp[0]) {
            int e = errno;
            if (ok && rc == 0 && rename(o->tmp, o->path) != 0)
                rc = -1, e = errno;
            if (!ok || rc != 0)
                unlink(o->tmp);
            errno = e;
        }
    }
    o->f = NULL;
    return ok ? rc : 0;
}
