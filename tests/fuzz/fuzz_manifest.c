/*
 * fuzz_manifest.c - a sharded library (a manifest and its shard files)
 * through ft_library_open with verification, from one input that packs
 * the files:
 *
 *   repeated: u8 name length, name, u32 LE data length, data
 *
 * The first file is the manifest (named "m" whatever its name); the
 * others go under their names (bytes outside [A-Za-z0-9._-] become '_', a
 * leading '.' too) in a folder "fuzzlib" that exists only in memory, so
 * the manifest's name table can point at them, at missing files or at
 * each other.  The library is opened with ft_library_open_mem, which runs
 * ft_library_open's checks with every index opened through a callback:
 * here ft_index_open_mem over the file's bytes (a copy of exactly its
 * size, aligned as a mapping is), or the refusal open(2) gives a missing
 * file.  No input costs a file or a mapping.  The manifest's file-size and checksum fields, and each entry's
 * shard size and identity hash, are tried both as given and made to agree
 * with the files (otherwise almost every mutation stops at the checksum),
 * so mutations reach the entry, range and shard cross-checks.  A refusal
 * is one of the manifest and index errors with a message naming a file;
 * an accepted library must agree with itself: the shard keys sum to the
 * library's, and every key walked looks up to the value the walk gave.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "flashtrie.h"
#include "fuzz.h"
#include "manifest.h"

#define MAXF 6
#define LIBDIR "fuzzlib"

typedef struct file {
    char name[256];
    const uint8_t *p;
    size_t n;
    void *copy; /* p's bytes, 64-byte aligned, exactly n of them */
} file;

static file g_fs[MAXF];
static int g_nf;

static uint32_t ld32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static void st64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* open_shard is the ft_index_opener over the files of the input: path is
 * LIBDIR "/" and a name of the manifest's table (or LIBDIR "/m" for a library
 * that is not a manifest). */
static int open_shard(ft_index **out, const char *path, unsigned flags,
                      char *errbuf, size_t errlen, void *arg)
{
    (void)arg;
    const char *name = path + strlen(LIBDIR "/");
    if (strncmp(path, LIBDIR "/", strlen(LIBDIR "/")) != 0)
        abort(); /* the library joins names to the manifest's folder */
    /* The last file of a name, as if each had been written over the one
     * before. */
    for (int i = g_nf - 1; i >= 0; i--) {
        file *f = &g_fs[i];
        if (strcmp(f->name, name) != 0)
            continue;
        if (f->copy == NULL) {
            if (posix_memalign(&f->copy, 64, f->n ? f->n : 1) != 0)
                abort();
            memcpy(f->copy, f->p, f->n);
        }
        return ft_index_open_mem(out, f->copy, f->n, path, flags, errbuf,
                                 errlen);
    }
    snprintf(errbuf, errlen, "%s: cannot open: %s", path, strerror(ENOENT));
    return FT_EIO;
}

static void try_open(const uint8_t *m, size_t mn)
{
    /* The file "m" holds these bytes now, for a table that names it and
     * for a library that is a single index. */
    free(g_fs[0].copy);
    g_fs[0].copy = NULL;
    g_fs[0].p = m;
    g_fs[0].n = mn;
    char err[1024] = "";
    ft_library *lib;
    int rc = ft_library_open_mem(&lib, LIBDIR "/m", m, mn, 0, open_shard, NULL,
                                 err, sizeof err);
    if (rc != FT_OK) {
        if ((rc != FT_EMANIFEST && rc != FT_EFORMAT && rc != FT_ETRUNC &&
             rc != FT_ECHECKSUM && rc != FT_EVERSION && rc != FT_EIO) ||
            strncmp(err, LIBDIR "/", strlen(LIBDIR "/")) != 0) {
            fprintf(stderr, "bad refusal %d: %s\n", rc, err);
            abort();
        }
        return;
    }
    enum { LIMIT = 100000 };
    ft_index_info info, si;
    ft_index_info_init(&info);
    if (ft_library_info_get(&info, lib) != FT_OK)
        abort();
    uint64_t sum = 0;
    for (size_t s = 0; s < ft_library_shards(lib); s++) {
        ft_library_shard_info sh;
        ft_index_info_init(&si);
        if (ft_index_info_get(&si, ft_library_shard(lib, s)) != FT_OK)
            abort();
        if (ft_library_is_manifest(lib) &&
            (ft_library_shard_get(&sh, lib, s) != FT_OK || sh.keys != si.keys))
            abort();
        sum += si.keys;
    }
    fuzz_walk w = {NULL, lib, 0, 0};
    uint64_t seen;
    if (sum != info.keys ||
        ft_library_prefix(&seen, lib, NULL, 0, LIMIT, fuzz_check_key,
                          &w) != FT_OK ||
        w.bad || (info.keys <= LIMIT && w.n != info.keys))
        abort();
    ft_library_close(lib);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    if (!ready) {
        ft_log_set_level(FT_LOG_ERROR);
        ready = 1;
    }
    file *fs = g_fs;
    int nf = 0;
    size_t at = 0;
    while (nf < MAXF && at < size) {
        size_t nl = data[at++];
        if (nl > size - at)
            break;
        file *f = &fs[nf];
        for (size_t i = 0; i < nl; i++) {
            char c = (char)data[at + i];
            int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                     (c >= '0' && c <= '9') || c == '-' || c == '_' ||
                     (c == '.' && i > 0);
            f->name[i] = ok ? c : '_';
        }
        f->name[nl] = 0;
        at += nl;
        if (size - at < 4)
            break;
        size_t n = ld32(data + at);
        at += 4;
        if (n > size - at)
            n = size - at;
        f->p = data + at;
        f->n = n;
        f->copy = NULL;
        at += n;
        if (nf > 0 && (nl == 0 || strcmp(f->name, "m") == 0))
            continue; /* no name, or the manifest's own */
        nf++;
    }
    if (nf == 0)
        return 0;
    /* The manifest is read into a buffer of its size, as from its file. */
    strcpy(fs[0].name, "m");
    g_nf = nf;
    const uint8_t *orig = fs[0].p;
    size_t mn = fs[0].n;
    uint8_t *m = malloc(mn ? mn : 1);
    if (m == NULL)
        abort();
    memcpy(m, orig, mn);
    try_open(m, mn);

    /* Again with the sizes and hashes made right, if it has the shape of a
     * manifest: a 64-byte header and entries of 64 bytes. */
    if (mn >= 64 && ld32(orig + 56) == 64) {
        uint64_t shards = ld32(m + 20);
        for (uint64_t s = 0; s < shards && 64 + 64 * (s + 1) <= mn; s++) {
            uint8_t *e = m + 64 + 64 * s;
            uint64_t off = ld32(e + 48), len = ld32(e + 52);
            size_t tab = 64 + 64 * (size_t)shards;
            if (tab > mn || off + len > mn - tab)
                continue;
            for (int i = 1; i < nf; i++)
                if (strlen(fs[i].name) == len &&
                    memcmp(fs[i].name, m + tab + off, len) == 0) {
                    st64(e + 32, fs[i].n);
                    if (fs[i].n >= 448)
                        st64(e + 40, XXH3_64bits(fs[i].p, 448));
                }
        }
        st64(m + 40, mn);
        st64(m + 48, 0);
        st64(m + 48, XXH3_64bits(m, mn));
        if (memcmp(m, orig, mn) != 0)
            try_open(m, mn);
    }
    free(m);
    for (int i = 0; i < nf; i++)
        free(fs[i].copy);
    g_nf = 0;
    return 0;
}
