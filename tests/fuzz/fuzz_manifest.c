/*
 * fuzz_manifest.c - a sharded library (a manifest and its shard files)
 * through ft_library_open with verification, from one input that packs
 * the files:
 *
 *   repeated: u8 name length, name, u32 LE data length, data
 *
 * The first file is the manifest (written as "m" whatever its name); the
 * others are written under their names (bytes outside [A-Za-z0-9._-]
 * become '_', a leading '.' too) in a private temporary folder, so the
 * manifest's name table can point at them, at missing files or at each
 * other.  The manifest's file-size and checksum fields, and each entry's
 * shard size and identity hash, are tried both as given and made to agree
 * with the files (otherwise almost every mutation stops at the checksum),
 * so mutations reach the entry, range and shard cross-checks.  A refusal
 * is one of the manifest and index errors with a message naming a file;
 * an accepted library must agree with itself: the shard keys sum to the
 * library's, and every key walked looks up to the value the walk gave.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "flashtrie.h"
#include "fuzz.h"

#define MAXF 6

static char g_dir[64];
static char g_written[MAXF][300];
static int g_nw;

typedef struct file {
    char name[256];
    const uint8_t *p;
    size_t n;
} file;

static uint32_t ld32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static uint64_t ld64(const uint8_t *p)
{
    return (uint64_t)ld32(p) | (uint64_t)ld32(p + 4) << 32;
}

static void st64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put(const char *name, const uint8_t *p, size_t n)
{
    if (g_nw == MAXF)
        return;
    snprintf(g_written[g_nw], sizeof g_written[g_nw], "%s/%s", g_dir, name);
    FILE *f = fopen(g_written[g_nw], "wb");
    if (f == NULL)
        return; /* e.g. a name too long: the manifest will miss it */
    fwrite(p, 1, n, f);
    fclose(f);
    g_nw++;
}

static void clear(void)
{
    for (int i = 0; i < g_nw; i++)
        unlink(g_written[i]);
    g_nw = 0;
}

typedef struct walk {
    const ft_library *lib;
    uint64_t n;
    int bad;
} walk;

static int check_key(const uint32_t *t, size_t n, uint64_t v, void *arg)
{
    walk *w = arg;
    uint64_t got;
    if (ft_library_lookup(&got, w->lib, t, n) != FT_OK || got != v)
        w->bad = 1;
    w->n++;
    return 0;
}

static void try_open(void)
{
    char path[128], err[1024] = "";
    snprintf(path, sizeof path, "%s/m", g_dir);
    ft_library *lib;
    int rc = ft_library_open(&lib, path, 0, err, sizeof err);
    if (rc != FT_OK) {
        if ((rc != FT_EMANIFEST && rc != FT_EFORMAT && rc != FT_ETRUNC &&
             rc != FT_ECHECKSUM && rc != FT_EVERSION && rc != FT_EIO) ||
            strstr(err, g_dir) == NULL) {
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
    walk w = {lib, 0, 0};
    uint64_t seen;
    if (sum != info.keys ||
        ft_library_prefix(&seen, lib, NULL, 0, LIMIT, check_key, &w) != FT_OK ||
        w.bad || (info.keys <= LIMIT && w.n != info.keys))
        abort();
    ft_library_close(lib);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (g_dir[0] == 0) {
        snprintf(g_dir, sizeof g_dir, "/tmp/ft_fuzz_manifest_XXXXXX");
        if (mkdtemp(g_dir) == NULL)
            abort();
        ft_log_set_level(FT_LOG_ERROR);
    }
    file fs[MAXF];
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
        at += n;
        if (nf > 0 && (nl == 0 || strcmp(f->name, "m") == 0))
            continue; /* no name, or the manifest's own */
        nf++;
    }
    if (nf == 0)
        return 0;
    put("m", fs[0].p, fs[0].n);
    for (int i = 1; i < nf; i++)
        put(fs[i].name, fs[i].p, fs[i].n);
    try_open();

    /* Again with the sizes and hashes made right, if it has the shape of a
     * manifest: a 64-byte header and entries of 64 bytes. */
    size_t mn = fs[0].n;
    if (mn >= 64 && ld32(fs[0].p + 56) == 64) {
        uint8_t *m = malloc(mn);
        if (m == NULL)
            abort();
        memcpy(m, fs[0].p, mn);
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
        if (ld64(m + 48) != ld64(fs[0].p + 48) || memcmp(m, fs[0].p, mn)) {
            clear();
            put("m", m, mn);
            for (int i = 1; i < nf; i++)
                put(fs[i].name, fs[i].p, fs[i].n);
            try_open();
        }
        free(m);
    }
    clear();
    return 0;
}
