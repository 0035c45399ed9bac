/*
 * manifest_test.c - the manifest file and its checks: every way a manifest
 * or its shards can be wrong, each with its exact code and message, edited
 * byte by byte at the offsets docs/sharding.md gives and re-sealed with the
 * checksum where the point is what lies behind it; the library opener on
 * indexes, manifests and other files.
 */
#include <xxhash.h>

#include "partition_util.h"

static char D[1024], M[1100], S[3][1200];
static unsigned char *orig;
static size_t orig_len;

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static uint64_t get64(const unsigned char *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

/* reseal recomputes the checksum at byte 48: XXH3-64 of the file with
 * those 8 bytes read as zero. */
static void reseal(unsigned char *b, size_t len)
{
    put64(b + 48, 0);
    put64(b + 48, XXH3_64bits(b, len));
}

static unsigned char *entry(unsigned char *b, int i) { return b + 64 + 64 * i; }

/* expect writes buf as the manifest and checks the open's code and
 * message (msg NULL: only the code). */
static void expect(const unsigned char *buf, size_t len, int code,
                   const char *msg)
{
    pu_write(M, buf, len);
    ft_manifest *m = (ft_manifest *)1;
    char err[1024] = "";
    int rc = ft_manifest_open(&m, M, 0, err, sizeof err);
    if (rc != code) {
        fprintf(stderr, "open returned %d (%s: %s), want %d\n", rc,
                ft_strerror(rc), err, code);
        exit(1);
    }
    FT_CHECK(m == NULL);
    if (msg)
        FT_CHECK_STR(err, msg);
    pu_write(M, orig, orig_len);
}

static unsigned char *copy(void)
{
    unsigned char *b = malloc(orig_len + 16);
    FT_CHECK(b != NULL);
    memcpy(b, orig, orig_len);
    return b;
}

typedef struct rekey {
    ft_tb *tb;
    int first;
} rekey;

static int rekey_cb(const uint32_t *t, size_t n, uint64_t v, void *arg)
{
    rekey *r = arg;
    FT_PASS(ft_tb_add(r->tb, t, (uint32_t)n, r->first ? v ^ 1 : v));
    r->first = 0;
    return 0;
}

static void shard_problems(void)
{
    char err[1024], want[8192];
    ft_manifest *m;
    /* a missing shard file */
    char aside[1300];
    snprintf(aside, sizeof aside, "%s.aside", S[1]);
    FT_CHECK(rename(S[1], aside) == 0);
    snprintf(want, sizeof want,
             "%s: shard 1: %s: cannot open: No such file or directory", M,
             S[1]);
    FT_FAIL(ft_manifest_open(&m, M, 0, err, sizeof err), FT_EMANIFEST);
    FT_CHECK_STR(err, want);
    FT_CHECK(rename(aside, S[1]) == 0);

    /* another file of the same shape: the same keys, one value changed */
    size_t slen;
    unsigned char *keep = pu_read(S[1], &slen);
    ft_index *si;
    FT_PASS(ft_index_open(&si, S[1], 0, err, sizeof err));
    rekey r = {NULL, 1};
    FT_PASS(ft_tb_create(&r.tb));
    FT_PASS(ft_index_prefix(NULL, si, NULL, 0, 0, rekey_cb, &r));
    ft_index_close(si);
    ft_trie t;
    FT_PASS(ft_tb_finish(r.tb, SU_MAX_LEN, &t));
    ft_tb_destroy(r.tb);
    FT_PASS(ft_trie_write(&t, S[1], err, sizeof err));
    ft_trie_free(&t);
    size_t nlen;
    free(pu_read(S[1], &nlen));
    FT_CHECK_EQ_U64(nlen, slen);
    snprintf(want, sizeof want,
             "%s: shard 1 (%s): checksum mismatch: the file is not the one "
             "the manifest was written with", M, S[1]);
    FT_FAIL(ft_manifest_open(&m, M, 0, err, sizeof err), FT_EMANIFEST);
    FT_CHECK_STR(err, want);
    pu_write(S[1], keep, slen);

    /* a damaged section behind an intact header: the index's own check */
    unsigned char *bad = malloc(slen);
    memcpy(bad, keep, slen);
    bad[slen - 9] ^= 0x10; /* inside the last section, the values */
    pu_write(S[1], bad, slen);
    snprintf(want, sizeof want,
             "%s: shard 1: %s: section values: checksum mismatch", M, S[1]);
    FT_FAIL(ft_manifest_open(&m, M, 0, err, sizeof err), FT_EMANIFEST);
    FT_CHECK_STR(err, want);
    /* FT_OPEN_NO_VERIFY skips section checksums, the header still matches */
    FT_PASS(ft_manifest_open(&m, M, FT_OPEN_NO_VERIFY, err, sizeof err));
    ft_manifest_close(m);
    pu_write(S[1], keep, slen);
    free(bad);
    free(keep);

    /* a shard file that is not an index at all */
    keep = pu_read(S[2], &slen);
    pu_write(S[2], "not an index", 12);
    snprintf(want, sizeof want,
             "%s: shard 2: %s: not a FlashTrie index (bad magic)", M, S[2]);
    FT_FAIL(ft_manifest_open(&m, M, 0, err, sizeof err), FT_EMANIFEST);
    FT_CHECK_STR(err, want);
    pu_write(S[2], keep, slen);
    free(keep);
    FT_PASS(ft_manifest_open(&m, M, 0, err, sizeof err));
    ft_manifest_close(m);
}

static void entry_problems(void)
{
    char want[8192];
    unsigned char *b;
    ft_manifest *good;
    char err[1024];
    FT_PASS(ft_manifest_open(&good, M, 0, err, sizeof err));
    uint32_t hi0 = good->shards[0].hi, lo1 = good->shards[1].lo,
             hi1 = good->shards[1].hi;
    uint64_t k0 = good->shards[0].keys, n0 = good->shards[0].nodes;
    uint64_t tb0 = good->shards[0].trie_bytes, fb0 = good->shards[0].file_bytes;
    uint64_t keys = good->keys;
    const ft_index *i1 = good->shards[1].idx;
    uint32_t first1 = ft_child_label(&i1->trie.view, &i1->root, i1->root.first);
    uint32_t last1 = ft_child_label(&i1->trie.view, &i1->root,
                                    i1->root.first + i1->root.deg - 1);
    FT_CHECK_EQ_U64(first1, lo1);

    /* counts */
    b = copy();
    put64(entry(b, 0) + 16, n0 + 1);
    reseal(b, orig_len);
    snprintf(want, sizeof want,
             "%s: shard 0 (%s): %llu nodes, the manifest says %llu", M, S[0],
             (unsigned long long)n0, (unsigned long long)n0 + 1);
    expect(b, orig_len, FT_EMANIFEST, want);
    memcpy(b, orig, orig_len);
    put64(entry(b, 0) + 8, k0 + 1);
    put64(b + 24, keys + 1);
    reseal(b, orig_len);
    snprintf(want, sizeof want,
             "%s: shard 0 (%s): %llu keys, the manifest says %llu", M, S[0],
             (unsigned long long)k0, (unsigned long long)k0 + 1);
    expect(b, orig_len, FT_EMANIFEST, want);
    memcpy(b, orig, orig_len);
    put64(b + 24, keys + 1);
    reseal(b, orig_len);
    snprintf(want, sizeof want, "%s: the shards hold %llu keys, the library "
             "%llu", M, (unsigned long long)keys, (unsigned long long)keys + 1);
    expect(b, orig_len, FT_EMANIFEST, want);
    memcpy(b, orig, orig_len);
    put64(entry(b, 0) + 24, tb0 - 8);
    reseal(b, orig_len);
    snprintf(want, sizeof want,
             "%s: shard 0 (%s): %llu trie bytes in a file of %llu, the "
             "manifest says %llu in %llu", M, S[0], (unsigned long long)tb0,
             (unsigned long long)fb0, (unsigned long long)tb0 - 8,
             (unsigned long long)fb0);
    expect(b, orig_len, FT_EMANIFEST, want);
    memcpy(b, orig, orig_len);
    put32(b + 36, 63); /* max_key_len */
    reseal(b, orig_len);
    snprintf(want, sizeof want,
             "%s: shard 0 (%s): max_key_len 64 and value width %u, the "
             "library has 63 and %u", M, S[0],
             good->shards[0].idx->trie.value_bits, good->value_bits);
    expect(b, orig_len, FT_EMANIFEST, want);

    /* ranges */
    memcpy(b, orig, orig_len);
    put32(entry(b, 1) + 0, hi0);
    reseal(b, orig_len);
    snprintf(want, sizeof want,
             "%s: shard 1: range [%u, %u] overlaps shard 0 [0, %u]", M, hi0,
             hi1, hi0);
    expect(b, orig_len, FT_EMANIFEST, want);
    memcpy(b, orig, orig_len);
    put32(entry(b, 1) + 0, hi0 + 2);
    reseal(b, orig_len);
    snprintf(want, sizeof want,
             "%s: shard 1: range [%u, %u] leaves a gap after shard 0 [0, %u] "
             "(tokens %u..%u belong to no shard)", M, hi0 + 2, hi1, hi0,
             hi0 + 1, hi0 + 1);
    expect(b, orig_len, FT_EMANIFEST, want);
    memcpy(b, orig, orig_len);
    put32(entry(b, 0) + 0, 1);
    reseal(b, orig_len);
    snprintf(want, sizeof want,
             "%s: shard 0: range [1, %u] does not start at token 0", M, hi0);
    expect(b, orig_len, FT_EMANIFEST, want);
    memcpy(b, orig, orig_len);
    put32(entry(b, 2) + 4, 4294967294u);
    reseal(b, orig_len);
    snprintf(want, sizeof want,
             "%s: shard 2: range [%u, 4294967294] does not end at token "
             "4294967295 (the later tokens belong to no shard)", M, hi1 + 1);
    expect(b, orig_len, FT_EMANIFEST, want);
    memcpy(b, orig, orig_len);
    put32(entry(b, 1) + 4, lo1 - 1);
    reseal(b, orig_len);
    snprintf(want, sizeof want, "%s: shard 1: empty range [%u, %u]", M, lo1,
             lo1 - 1);
    expect(b, orig_len, FT_EMANIFEST, want);
    /* a tiling whose cut misses the keys: shard 1's first token moves */
    memcpy(b, orig, orig_len);
    put32(entry(b, 0) + 4, hi0 + 1);
    put32(entry(b, 1) + 0, lo1 + 1);
    reseal(b, orig_len);
    snprintf(want, sizeof want,
             "%s: shard 1 (%s): holds first tokens %u..%u, outside its range "
             "[%u, %u]", M, S[1], first1, last1, lo1 + 1, hi1);
    expect(b, orig_len, FT_EMANIFEST, want);

    /* names */
    memcpy(b, orig, orig_len);
    uint32_t off = get32(entry(b, 0) + 48);
    b[64 + 64 * 3 + off] = '/';
    reseal(b, orig_len);
    snprintf(want, sizeof want, "%s: shard 0: absolute file name", M);
    expect(b, orig_len, FT_EFORMAT, want);
    memcpy(b, orig, orig_len);
    memcpy(b + 64 + 64 * 3 + off, "../", 3);
    reseal(b, orig_len);
    snprintf(want, sizeof want,
             "%s: shard 0: file name leaves the manifest's folder (\"..\")", M);
    expect(b, orig_len, FT_EFORMAT, want);
    memcpy(b, orig, orig_len);
    memcpy(b + 64 + 64 * 3 + off + 1, "/../", 4);
    reseal(b, orig_len);
    expect(b, orig_len, FT_EFORMAT, want);
    memcpy(b, orig, orig_len);
    put32(entry(b, 2) + 52, 1000);
    reseal(b, orig_len);
    snprintf(want, sizeof want,
             "%s: shard 2: file name outside the name table", M);
    expect(b, orig_len, FT_EFORMAT, want);
    memcpy(b, orig, orig_len);
    put64(entry(b, 2) + 56, 1);
    reseal(b, orig_len);
    snprintf(want, sizeof want, "%s: shard 2: reserved field not zero", M);
    expect(b, orig_len, FT_EFORMAT, want);
    free(b);
    ft_manifest_close(good);
}

static void file_problems(void)
{
    char want[8192];
    unsigned char *b = copy();
    /* version */
    put32(b + 8, 2);
    reseal(b, orig_len);
    snprintf(want, sizeof want,
             "%s: manifest format version 2, this build reads version 1", M);
    expect(b, orig_len, FT_EVERSION, want);
    /* byte order */
    memcpy(b, orig, orig_len);
    put32(b + 12, 0x04030201u);
    reseal(b, orig_len);
    snprintf(want, sizeof want, "%s: written with another byte order", M);
    expect(b, orig_len, FT_EFORMAT, want);
    /* truncated */
    snprintf(want, sizeof want, "%s: truncated: %zu bytes, the header says %zu",
             M, orig_len - 10, orig_len);
    expect(orig, orig_len - 10, FT_ETRUNC, want);
    snprintf(want, sizeof want,
             "%s: truncated: 30 bytes, the header alone needs 64", M);
    expect(orig, 30, FT_ETRUNC, want);
    snprintf(want, sizeof want, "%s: not a FlashTrie shard manifest (bad "
             "magic)", M);
    expect(orig, 0, FT_EFORMAT, want);
    /* trailing bytes */
    memcpy(b, orig, orig_len);
    b[orig_len] = 0;
    snprintf(want, sizeof want,
             "%s: trailing bytes: %zu bytes, the header says %zu", M,
             orig_len + 1, orig_len);
    expect(b, orig_len + 1, FT_EFORMAT, want);
    /* a bad shard count, sealed */
    memcpy(b, orig, orig_len);
    put32(b + 20, 0);
    reseal(b, orig_len);
    snprintf(want, sizeof want, "%s: 0 shards (1 to 65536 allowed)", M);
    expect(b, orig_len, FT_EFORMAT, want);
    memcpy(b, orig, orig_len);
    put32(b + 20, 50);
    reseal(b, orig_len);
    snprintf(want, sizeof want,
             "%s: 50 shard entries need 3264 bytes, the file has %zu", M,
             orig_len);
    expect(b, orig_len, FT_EFORMAT, want);
    /* every single-bit flip anywhere is refused */
    for (size_t i = 0; i < orig_len; i++) {
        for (int bit = 0; bit < 8; bit += 3) {
            memcpy(b, orig, orig_len);
            b[i] ^= (unsigned char)(1u << bit);
            pu_write(M, b, orig_len);
            ft_manifest *m;
            char err[1024];
            int rc = ft_manifest_open(&m, M, 0, err, sizeof err);
            int want_rc = i < 8 ? FT_EFORMAT
                          : i >= 8 && i < 12 ? FT_EVERSION
                          : i >= 40 && i < 48 ? -1 /* the size: either */
                                              : FT_EFORMAT;
            if (want_rc == -1)
                FT_CHECK(rc == FT_ETRUNC || rc == FT_EFORMAT);
            else
                FT_CHECK_EQ_U64(rc, want_rc);
            if (i >= 64) {
                snprintf(want, sizeof want,
                         "%s: checksum mismatch (damaged manifest)", M);
                FT_CHECK_STR(err, want);
            }
        }
    }
    pu_write(M, orig, orig_len);
    free(b);
}

static void writer_and_opener(const ft_index *idx, const char *ipath)
{
    char err[1024], want[8192], p[1200];
    ft_manifest *m;
    FT_PASS(ft_manifest_open(&m, M, 0, err, sizeof err));
    /* the writer refuses what the reader would */
    snprintf(p, sizeof p, "%s/bad.ftm", D);
    uint32_t keep = m->shards[1].lo;
    m->shards[1].lo = m->shards[0].hi + 2;
    snprintf(want, sizeof want,
             "%s: shard 1: range [%u, %u] leaves a gap after shard 0 [0, %u] "
             "(tokens %u..%u belong to no shard)", p, m->shards[1].lo,
             m->shards[1].hi, m->shards[0].hi, m->shards[0].hi + 1,
             m->shards[0].hi + 1);
    FT_FAIL(ft_manifest_write(m, p, err, sizeof err), FT_EINVAL);
    FT_CHECK_STR(err, want);
    m->shards[1].lo = keep;
    char *name = m->shards[2].name;
    m->shards[2].name = "";
    FT_FAIL(ft_manifest_write(m, p, err, sizeof err), FT_EINVAL);
    snprintf(want, sizeof want, "%s: shard 2: empty file name", p);
    FT_CHECK_STR(err, want);
    m->shards[2].name = name;
    FT_CHECK(access(p, F_OK) != 0);
    /* written again, the same bytes */
    FT_PASS(ft_manifest_write(m, p, err, sizeof err));
    size_t len;
    unsigned char *again = pu_read(p, &len);
    FT_CHECK_EQ_U64(len, orig_len);
    FT_CHECK(memcmp(again, orig, len) == 0);
    free(again);
    ft_manifest_close(m);

    /* the library opener: a manifest, an index, neither */
    FT_PASS(ft_library_open(&m, M, 0, err, sizeof err));
    FT_CHECK(m->is_manifest);
    FT_CHECK_EQ_U64(m->n_shards, 3);
    ft_manifest_close(m);
    FT_PASS(ft_library_open(&m, ipath, 0, err, sizeof err));
    FT_CHECK(!m->is_manifest);
    FT_CHECK_EQ_U64(m->n_shards, 1);
    FT_CHECK_EQ_U64(m->shards[0].lo, 0);
    FT_CHECK_EQ_U64(m->shards[0].hi, UINT32_MAX);
    FT_CHECK_EQ_U64(m->keys, idx->trie.n_keys);
    FT_CHECK_EQ_U64(m->shards[0].checksum, ft_index_head_checksum(m->shards[0].idx));
    ft_manifest_close(m);
    snprintf(p, sizeof p, "%s/other.txt", D);
    pu_write(p, "hello, world", 12);
    snprintf(want, sizeof want,
             "%s: neither a FlashTrie index nor a shard manifest (bad magic)",
             p);
    FT_FAIL(ft_library_open(&m, p, 0, err, sizeof err), FT_EFORMAT);
    FT_CHECK_STR(err, want);
    pu_write(p, "FLSH", 4);
    snprintf(want, sizeof want, "%s: not a FlashTrie index (file of 4 bytes)",
             p);
    FT_FAIL(ft_library_open(&m, p, 0, err, sizeof err), FT_EFORMAT);
    FT_CHECK_STR(err, want);
    snprintf(p, sizeof p, "%s/missing.ftm", D);
    snprintf(want, sizeof want, "%s: cannot open: No such file or directory",
             p);
    FT_FAIL(ft_library_open(&m, p, 0, err, sizeof err), FT_EIO);
    FT_CHECK_STR(err, want);
    FT_FAIL(ft_manifest_open(&m, p, 0, err, sizeof err), FT_EIO);
    FT_CHECK_STR(err, want);
}

int main(void)
{
    pu_tmpdir(D, sizeof D);
    uint64_t s = 5;
    pu_lib lp = {3000, 4, 90, 10, 3, 0, 0, 100000, 0};
    su_key *k = pu_keys(&s, &lp);
    char ipath[1200], err[1024];
    snprintf(ipath, sizeof ipath, "%s/whole.idx", D);
    ft_index *idx;
    su_build(k, lp.n, ipath, &idx);
    snprintf(M, sizeof M, "%s/lib.ftm", D);
    for (int i = 0; i < 3; i++)
        snprintf(S[i], sizeof S[i], "%s.shard-%03d-of-003.idx", M, i);
    FT_PASS(pu_split(idx, M, 3, 0, 2, err, sizeof err));
    orig = pu_read(M, &orig_len);
    FT_CHECK_EQ_U64(orig_len, 64 + 3 * 64 + 3 * (strlen("lib.ftm.shard-000-of-003.idx") + 1));
    FT_CHECK(memcmp(orig, "FTSHARDS", 8) == 0);
    FT_CHECK_EQ_U64(get32(orig + 8), 1);
    FT_CHECK_EQ_U64(get64(orig + 40), orig_len);
    unsigned char *b = copy();
    reseal(b, orig_len);
    FT_CHECK(memcmp(b, orig, orig_len) == 0); /* the checksum is as documented */
    free(b);
    shard_problems();
    entry_problems();
    file_problems();
    writer_and_opener(idx, ipath);
    ft_index_close(idx);
    free(k);
    free(orig);
    pu_rmdir(D);
    printf("manifest_test: ok\n");
    return 0;
}
