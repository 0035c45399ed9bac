/*
 * partition_util.h - helpers of the shard tests: random libraries with a
 * chosen first-token shape, a temporary folder, whole-file reads.
 */
#ifndef FT_PARTITION_UTIL_H
#define FT_PARTITION_UTIL_H

#include <sys/stat.h>
#include <unistd.h>

#include "partition.h"
#include "search_util.h"

/* pu_lib describes a random library: n keys of 1..maxlen tokens; the first
 * token is drawn from first_vocab values (first_base + i * first_step),
 * with probability giant_pct percent the single value giant_tok; later
 * tokens from vocab values, some above 65536 so high labels occur.
 * line_values gives every key its input index as value (the default of
 * docs/specification.md section 2), else a random 40-bit value. */
typedef struct pu_lib {
    size_t n;
    uint32_t maxlen;
    uint32_t first_vocab, first_base, first_step;
    uint32_t giant_pct, giant_tok;
    uint32_t vocab;
    int line_values;
} pu_lib;

__attribute__((unused)) static su_key *pu_keys(uint64_t *s, const pu_lib *lp)
{
    su_key *k = calloc(lp->n, sizeof *k);
    FT_CHECK(k != NULL);
    for (size_t i = 0; i < lp->n; i++) {
        k[i].len = 1 + (uint32_t)(ft_test_rand(s) % lp->maxlen);
        if (lp->giant_pct && ft_test_rand(s) % 100 < lp->giant_pct)
            k[i].t[0] = lp->giant_tok;
        else
            k[i].t[0] = lp->first_base +
                        (uint32_t)(ft_test_rand(s) % lp->first_vocab) *
                            lp->first_step;
        for (uint32_t j = 1; j < k[i].len; j++) {
            uint32_t x = (uint32_t)(ft_test_rand(s) % lp->vocab);
            /* a quarter of the tokens straddle 2^16 */
            k[i].t[j] = ft_test_rand(s) % 4 == 0 ? 65530u + x : x;
        }
        k[i].value = lp->line_values ? i : ft_test_rand(s) >> 24;
    }
    return k;
}

/* pu_tmpdir makes a fresh folder under TMPDIR. */
static void pu_tmpdir(char *dir, size_t len)
{
    const char *t = getenv("TMPDIR");
    snprintf(dir, len, "%s/ft_shard_test_XXXXXX", t ? t : "/tmp");
    FT_CHECK(mkdtemp(dir) != NULL);
}

/* pu_rmdir removes the folder's files and the folder (one level). */
static void pu_rmdir(const char *dir)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    FT_CHECK(system(cmd) == 0);
}

__attribute__((unused)) static unsigned char *pu_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    FT_CHECK(f != NULL);
    FT_CHECK(fseek(f, 0, SEEK_END) == 0);
    long n = ftell(f);
    FT_CHECK(n >= 0);
    rewind(f);
    unsigned char *b = malloc((size_t)n + 1);
    FT_CHECK(b != NULL);
    FT_CHECK(fread(b, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

__attribute__((unused)) static void pu_write(const char *path, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    FT_CHECK(f != NULL);
    FT_CHECK(fwrite(buf, 1, len, f) == len);
    FT_CHECK(fclose(f) == 0);
}

/* pu_split splits idx into a manifest at path (n shards, or budget). */
static int pu_split(const ft_index *idx, const char *path, uint32_t n,
                    uint64_t budget, int threads, char *err, size_t errlen)
{
    ft_split_opts o = {path, n, budget, threads};
    err[0] = 0;
    return ft_split(NULL, idx, &o, err, errlen);
}

#endif
