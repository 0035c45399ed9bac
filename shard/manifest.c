/*
 * manifest.c - the shard manifest: write aside and rename, read and check,
 * open the shard indexes, route keys by first token.
 *
 * The file is small (64 bytes per shard plus the names), so it is read
 * whole and every integer is decoded explicitly little-endian; the layout
 * is in docs/sharding.md.  Nothing of a shard is trusted until its index
 * opened and matched its entry: a manifest either opens whole or not at
 * all.
 */
#include "manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define MF_ENDIAN_PROBE 0x01020304u
#define MF_MAX_NAME 4096u

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
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* file_sum is the XXH3-64 of the whole file with the checksum field read
 * as zero. */
static uint64_t file_sum(const unsigned char *buf, size_t len)
{
    static const unsigned char zero[8];
    XXH3_state_t *st = XXH3_createState();
    if (st == NULL)
        return 0;
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, buf, FT_MANIFEST_CHECKSUM_OFF);
    XXH3_64bits_update(st, zero, 8);
    XXH3_64bits_update(st, buf + FT_MANIFEST_CHECKSUM_OFF + 8,
                       len - FT_MANIFEST_CHECKSUM_OFF - 8);
    uint64_t h = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    return h;
}

uint64_t ft_index_head_checksum(const ft_index *idx)
{
    return XXH3_64bits(idx->map, FT_INDEX_HEAD_BYTES);
}

uint64_t ft_trie_bytes_of(const ft_trie *t)
{
    uint64_t b = 0;
    for (int s = 0; s < FT_SEC_COUNT; s++)
        if (s != FT_SEC_VALUES && s != FT_SEC_TERM_RANK)
            b += t->sec_bytes[s];
    return b;
}

uint64_t ft_index_trie_bytes(const ft_index *idx)
{
    return ft_trie_bytes_of(&idx->trie);
}

/* name_problem says what is wrong with a shard file name (which must be
 * relative to the manifest's folder), NULL when nothing is. */
static const char *name_problem(const char *name, size_t len)
{
    if (len == 0)
        return "empty file name";
    if (len > MF_MAX_NAME)
        return "file name too long";
    if (name[0] == '/')
        return "absolute file name";
    if (memchr(name, 0, len) != NULL)
        return "NUL in file name";
    /* A ".." component would let a manifest name any file of the host
     * (docs/sharding.md: shard files live in the manifest's folder or
     * below it). */
    for (size_t i = 0; i < len;) {
        size_t j = i;
        while (j < len && name[j] != '/')
            j++;
        if (j - i == 2 && name[i] == '.' && name[i + 1] == '.')
            return "file name leaves the manifest's folder (\"..\")";
        i = j + 1;
    }
    return NULL;
}

/* ranges_problem checks that the shards tile 0..2^32-1 in order; on a
 * fault it writes the message and returns 1. */
static int ranges_problem(const ft_manifest_shard *s, uint32_t n,
                          const char *what, char *errbuf, size_t errlen)
{
    for (uint32_t i = 0; i < n; i++) {
        if (s[i].lo > s[i].hi) {
            fti_errf(errbuf, errlen, "%s: shard %u: empty range [%u, %u]",
                     what, i, s[i].lo, s[i].hi);
            return 1;
        }
        uint64_t want = i == 0 ? 0 : (uint64_t)s[i - 1].hi + 1;
        if (i == 0 && s[0].lo != 0) {
            fti_errf(errbuf, errlen,
                     "%s: shard 0: range [%u, %u] does not start at token 0",
                     what, s[0].lo, s[0].hi);
            return 1;
        }
        if (i > 0 && s[i].lo < want) {
            fti_errf(errbuf, errlen,
                     "%s: shard %u: range [%u, %u] overlaps shard %u [%u, %u]",
                     what, i, s[i].lo, s[i].hi, i - 1, s[i - 1].lo,
                     s[i - 1].hi);
            return 1;
        }
        if (i > 0 && s[i].lo > want) {
            fti_errf(errbuf, errlen,
                     "%s: shard %u: range [%u, %u] leaves a gap after shard "
                     "%u [%u, %u] (tokens %llu..%u belong to no shard)",
                     what, i, s[i].lo, s[i].hi, i - 1, s[i - 1].lo,
                     s[i - 1].hi, (unsigned long long)want, s[i].lo - 1);
            return 1;
        }
    }
    if (n > 0 && s[n - 1].hi != UINT32_MAX) {
        fti_errf(errbuf, errlen,
                 "%s: shard %u: range [%u, %u] does not end at token "
                 "4294967295 (the later tokens belong to no shard)",
                 what, n - 1, s[n - 1].lo, s[n - 1].hi);
        return 1;
    }
    return 0;
}

int ft_manifest_write(const ft_manifest *m, const char *path, char *errbuf,
                      size_t errlen)
{
    FT_RETURN_ERROR_IF(m->n_shards == 0 ||
                           m->n_shards > FT_MANIFEST_MAX_SHARDS,
                       FT_EINVAL, "%s: %u shards (1 to %u allowed)", path,
                       m->n_shards, FT_MANIFEST_MAX_SHARDS);
    if (ranges_problem(m->shards, m->n_shards, path, errbuf, errlen))
        return FT_EINVAL;
    uint64_t names = 0;
    for (uint32_t i = 0; i < m->n_shards; i++) {
        const char *nm = m->shards[i].name;
        size_t len = nm ? strlen(nm) : 0;
        const char *why = nm ? name_problem(nm, len) : "no file name";
        FT_RETURN_ERROR_IF(why != NULL, FT_EINVAL, "%s: shard %u: %s", path, i,
                           why);
        names += len + 1;
    }
    size_t total = FT_MANIFEST_HEADER_BYTES +
                   (size_t)m->n_shards * FT_MANIFEST_ENTRY_BYTES +
                   (size_t)names;
    unsigned char *buf = calloc(1, total);
    if (buf == NULL)
        return FT_ENOMEM;
    memcpy(buf, FT_MANIFEST_MAGIC, 8);
    put32(buf + 8, FT_MANIFEST_VERSION);
    put32(buf + 12, MF_ENDIAN_PROBE);
    put32(buf + 16, FT_MANIFEST_HEADER_BYTES);
    put32(buf + 20, m->n_shards);
    put64(buf + 24, m->keys);
    put32(buf + 32, m->value_bits);
    put32(buf + 36, m->max_key_len);
    put64(buf + 40, total);
    put32(buf + 56, FT_MANIFEST_ENTRY_BYTES);
    unsigned char *names_at =
        buf + FT_MANIFEST_HEADER_BYTES +
        (size_t)m->n_shards * FT_MANIFEST_ENTRY_BYTES;
    uint32_t off = 0;
    for (uint32_t i = 0; i < m->n_shards; i++) {
        const ft_manifest_shard *s = &m->shards[i];
        unsigned char *e = buf + FT_MANIFEST_HEADER_BYTES +
                           (size_t)i * FT_MANIFEST_ENTRY_BYTES;
        uint32_t len = (uint32_t)strlen(s->name);
        put32(e + 0, s->lo);
        put32(e + 4, s->hi);
        put64(e + 8, s->keys);
        put64(e + 16, s->nodes);
        put64(e + 24, s->trie_bytes);
        put64(e + 32, s->file_bytes);
        put64(e + 40, s->checksum);
        put32(e + 48, off);
        put32(e + 52, len);
        memcpy(names_at + off, s->name, len);
        off += len + 1;
    }
    put64(buf + FT_MANIFEST_CHECKSUM_OFF, file_sum(buf, total));

    int fd;
    char *tmp;
    int rc = fti_tmp_create(&fd, &tmp, path, errbuf, errlen);
    if (rc != FT_OK) {
        free(buf);
        return rc;
    }
    int bad = fti_write_all(fd, buf, total) != 0;
    rc = fti_tmp_commit(fd, bad, tmp, path, "manifest", errbuf, errlen);
    free(buf);
    return rc;
}

void ft_manifest_close(ft_manifest *m)
{
    if (m == NULL)
        return;
    for (uint32_t i = 0; m->shards && i < m->n_shards; i++) {
        ft_index_close(m->shards[i].idx);
        free(m->shards[i].name);
        free(m->shards[i].path);
    }
    free(m->shards);
    free(m->path);
    free(m);
}

/* read_whole reads a whole manifest file (refusing one far larger than
 * any manifest). */
static int read_whole(const char *path, unsigned char **out, size_t *len,
                      char *errbuf, size_t errlen)
{
    int fd;
    struct stat st;
    int rc = fti_open_read(&fd, &st, path, errbuf, errlen);
    if (rc != FT_OK)
        return rc;
    /* 64 bytes per shard and the names: anything far larger is not ours. */
    const uint64_t cap = FT_MANIFEST_HEADER_BYTES +
                         (uint64_t)FT_MANIFEST_MAX_SHARDS *
                             (FT_MANIFEST_ENTRY_BYTES + MF_MAX_NAME + 1);
    if ((uint64_t)st.st_size > cap) {
        fti_errf(errbuf, errlen, "%s: not a FlashTrie shard manifest (%llu "
                 "bytes, more than any manifest)", path,
                 (unsigned long long)st.st_size);
        close(fd);
        return FT_EFORMAT;
    }
    size_t n = (size_t)st.st_size;
    unsigned char *buf = malloc(n ? n : 1);
    if (buf == NULL) {
        close(fd);
        return FT_ENOMEM;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            fti_errf(errbuf, errlen, "%s: read failed: %s", path,
                     r < 0 ? strerror(errno) : "file shrank");
            close(fd);
            free(buf);
            return FT_EIO;
        }
        got += (size_t)r;
    }
    close(fd);
    *out = buf;
    *len = n;
    return FT_OK;
}

/* join_dir puts name in the folder of the manifest at mpath. */
static char *join_dir(const char *mpath, const char *name)
{
    const char *slash = strrchr(mpath, '/');
    size_t dl = slash ? (size_t)(slash - mpath) + 1 : 0;
    size_t nl = strlen(name);
    char *p = malloc(dl + nl + 1);
    if (p == NULL)
        return NULL;
    memcpy(p, mpath, dl);
    memcpy(p + dl, name, nl + 1);
    return p;
}

/* parse decodes and checks the manifest file itself (not its shards). */
static int parse(ft_manifest *m, const char *path, const unsigned char *buf,
                 size_t len, char *errbuf, size_t errlen)
{
    FT_RETURN_ERROR_IF(len < 8 || memcmp(buf, FT_MANIFEST_MAGIC, 8) != 0,
                       FT_EFORMAT,
                       "%s: not a FlashTrie shard manifest (bad magic)", path);
    FT_RETURN_ERROR_IF(len < FT_MANIFEST_HEADER_BYTES, FT_ETRUNC,
                       "%s: truncated: %zu bytes, the header alone needs %u",
                       path, len, FT_MANIFEST_HEADER_BYTES);
    FT_RETURN_ERROR_IF(get32(buf + 12) != MF_ENDIAN_PROBE, FT_EFORMAT,
                       "%s: written with another byte order", path);
    uint32_t version = get32(buf + 8);
    FT_RETURN_ERROR_IF(version != FT_MANIFEST_VERSION, FT_EVERSION,
                       "%s: manifest format version %u, this build reads "
                       "version %u", path, version, FT_MANIFEST_VERSION);
    uint32_t hb = get32(buf + 16), eb = get32(buf + 56);
    FT_RETURN_ERROR_IF(hb != FT_MANIFEST_HEADER_BYTES ||
                           eb != FT_MANIFEST_ENTRY_BYTES || get32(buf + 60),
                       FT_EFORMAT,
                       "%s: bad header (header %u bytes, entries %u bytes)",
                       path, hb, eb);
    uint64_t fb = get64(buf + 40);
    FT_RETURN_ERROR_IF(len < fb, FT_ETRUNC,
                       "%s: truncated: %zu bytes, the header says %llu", path,
                       len, (unsigned long long)fb);
    FT_RETURN_ERROR_IF(len > fb, FT_EFORMAT,
                       "%s: trailing bytes: %zu bytes, the header says %llu",
                       path, len, (unsigned long long)fb);
    FT_RETURN_ERROR_IF(file_sum(buf, len) != get64(buf + FT_MANIFEST_CHECKSUM_OFF),
                       FT_EFORMAT, "%s: checksum mismatch (damaged manifest)",
                       path);
    uint32_t n = get32(buf + 20);
    FT_RETURN_ERROR_IF(n == 0 || n > FT_MANIFEST_MAX_SHARDS, FT_EFORMAT,
                       "%s: %u shards (1 to %u allowed)", path, n,
                       FT_MANIFEST_MAX_SHARDS);
    uint64_t table_end = FT_MANIFEST_HEADER_BYTES +
                         (uint64_t)n * FT_MANIFEST_ENTRY_BYTES;
    FT_RETURN_ERROR_IF(table_end > len, FT_EFORMAT,
                       "%s: %u shard entries need %llu bytes, the file has %zu",
                       path, n, (unsigned long long)table_end, len);
    m->n_shards = n;
    m->keys = get64(buf + 24);
    m->value_bits = get32(buf + 32);
    m->max_key_len = get32(buf + 36);
    FT_RETURN_ERROR_IF(m->value_bits > 64 ||
                           m->max_key_len == 0 ||
                           m->max_key_len > FT_MAX_KEY_LEN_LIMIT,
                       FT_EFORMAT,
                       "%s: bad header (value width %u, max_key_len %u)", path,
                       m->value_bits, m->max_key_len);
    m->shards = calloc(n, sizeof *m->shards);
    if (m->shards == NULL)
        return FT_ENOMEM;
    const unsigned char *names = buf + table_end;
    uint64_t names_len = len - table_end;
    uint64_t keys = 0;
    for (uint32_t i = 0; i < n; i++) {
        const unsigned char *e = buf + FT_MANIFEST_HEADER_BYTES +
                                 (size_t)i * FT_MANIFEST_ENTRY_BYTES;
        ft_manifest_shard *s = &m->shards[i];
        s->lo = get32(e + 0);
        s->hi = get32(e + 4);
        s->keys = get64(e + 8);
        s->nodes = get64(e + 16);
        s->trie_bytes = get64(e + 24);
        s->file_bytes = get64(e + 32);
        s->checksum = get64(e + 40);
        uint32_t off = get32(e + 48), nl = get32(e + 52);
        FT_RETURN_ERROR_IF(get64(e + 56) != 0, FT_EFORMAT,
                           "%s: shard %u: reserved field not zero", path, i);
        FT_RETURN_ERROR_IF((uint64_t)off + nl + 1 > names_len ||
                               names[off + nl] != 0,
                           FT_EFORMAT,
                           "%s: shard %u: file name outside the name table",
                           path, i);
        const char *why = name_problem((const char *)names + off, nl);
        FT_RETURN_ERROR_IF(why != NULL, FT_EFORMAT, "%s: shard %u: %s", path,
                           i, why);
        s->name = strndup((const char *)names + off, nl);
        s->path = s->name ? join_dir(path, s->name) : NULL;
        if (s->path == NULL)
            return FT_ENOMEM;
        keys += s->keys;
    }
    if (ranges_problem(m->shards, n, path, errbuf, errlen))
        return FT_EMANIFEST;
    FT_RETURN_ERROR_IF(keys != m->keys, FT_EMANIFEST,
                       "%s: the shards hold %llu keys, the library %llu",
                       path, (unsigned long long)keys,
                       (unsigned long long)m->keys);
    return FT_OK;
}

/* check_shard matches an opened shard index against its entry. */
static int check_shard(const ft_manifest *m, uint32_t i, char *errbuf,
                       size_t errlen)
{
    const ft_manifest_shard *s = &m->shards[i];
    const ft_trie *t = &s->idx->trie;
    const char *mp = m->path;
    uint64_t sum = ft_index_head_checksum(s->idx);
    FT_RETURN_ERROR_IF(sum != s->checksum, FT_EMANIFEST,
                       "%s: shard %u (%s): checksum mismatch: the file is "
                       "not the one the manifest was written with", mp, i,
                       s->path);
    uint64_t trie_bytes = ft_index_trie_bytes(s->idx);
    uint64_t file_bytes = s->idx->map_len;
    FT_RETURN_ERROR_IF(t->n_keys != s->keys, FT_EMANIFEST,
                       "%s: shard %u (%s): %llu keys, the manifest says %llu",
                       mp, i, s->path, (unsigned long long)t->n_keys,
                       (unsigned long long)s->keys);
    FT_RETURN_ERROR_IF(t->view.n_nodes != s->nodes, FT_EMANIFEST,
                       "%s: shard %u (%s): %llu nodes, the manifest says %llu",
                       mp, i, s->path, (unsigned long long)t->view.n_nodes,
                       (unsigned long long)s->nodes);
    FT_RETURN_ERROR_IF(trie_bytes != s->trie_bytes ||
                           file_bytes != s->file_bytes,
                       FT_EMANIFEST,
                       "%s: shard %u (%s): %llu trie bytes in a file of %llu, "
                       "the manifest says %llu in %llu", mp, i, s->path,
                       (unsigned long long)trie_bytes,
                       (unsigned long long)file_bytes,
                       (unsigned long long)s->trie_bytes,
                       (unsigned long long)s->file_bytes);
    FT_RETURN_ERROR_IF(t->max_key_len != m->max_key_len ||
                           t->value_bits > m->value_bits,
                       FT_EMANIFEST,
                       "%s: shard %u (%s): max_key_len %u and value width %u, "
                       "the library has %u and %u", mp, i, s->path,
                       t->max_key_len, t->value_bits, m->max_key_len,
                       m->value_bits);
    /* Its keys must lie in its range: the first and last root labels. */
    const ft_child_range *r = &s->idx->root;
    FT_RETURN_ERROR_IF(r->deg == 0, FT_EMANIFEST,
                       "%s: shard %u (%s): the shard is empty", mp, i,
                       s->path);
    uint32_t first = ft_child_label(&t->view, r, r->first);
    uint32_t last = ft_child_label(&t->view, r, r->first + r->deg - 1);
    FT_RETURN_ERROR_IF(first < s->lo || last > s->hi, FT_EMANIFEST,
                       "%s: shard %u (%s): holds first tokens %u..%u, outside "
                       "its range [%u, %u]", mp, i, s->path, first, last,
                       s->lo, s->hi);
    return FT_OK;
}

/* open_file is the ft_index_opener of the file opens. */
static int open_file(ft_index **out, const char *path, unsigned flags,
                     char *errbuf, size_t errlen, void *arg)
{
    (void)arg;
    return ft_index_open(out, path, flags, errbuf, errlen);
}

/* manifest_from checks the manifest whose bytes are buf (read from path)
 * and opens its shards through open_index: all of them, or with count !=
 * UINT32_MAX only shards first .. first + count - 1 (a cluster rank's
 * part; count 0: none, the entries alone). */
static int manifest_from(ft_manifest **out, const char *path,
                         const unsigned char *buf, size_t len, unsigned flags,
                         uint32_t first, uint32_t count,
                         ft_index_opener open_index, void *arg, char *errbuf,
                         size_t errlen)
{
    ft_manifest *m = calloc(1, sizeof *m);
    if (m == NULL || (m->path = strdup(path)) == NULL) {
        free(m);
        return FT_ENOMEM;
    }
    m->is_manifest = 1;
    int rc = parse(m, path, buf, len, errbuf, errlen);
    if (rc == FT_OK && count != UINT32_MAX && count > 0 &&
        (first >= m->n_shards || count > m->n_shards - first)) {
        fti_errf(errbuf, errlen, "%s: shards %u..%u asked for, the manifest "
                 "has %u", path, first, first + count - 1, m->n_shards);
        rc = FT_EINVAL;
    }
    for (uint32_t i = 0; rc == FT_OK && i < m->n_shards; i++) {
        ft_manifest_shard *s = &m->shards[i];
        /* A part opens only its shards; the others keep their entries. */
        if (count != UINT32_MAX && (i < first || i - first >= count))
            continue;
        char ierr[512];
        ierr[0] = 0;
        rc = open_index(&s->idx, s->path, flags, ierr, sizeof ierr, arg);
        if (rc == FT_ENOMEM)
            break;
        if (rc != FT_OK) {
            /* Missing or damaged, the shard does not match the manifest;
             * the index's own message says how. */
            fti_errf(errbuf, errlen, "%s: shard %u: %s", path, i,
                     ierr[0] ? ierr : ft_strerror(rc));
            rc = FT_EMANIFEST;
            break;
        }
        rc = check_shard(m, i, errbuf, errlen);
    }
    if (rc == FT_ENOMEM && errbuf && errlen)
        fti_errf(errbuf, errlen, "%s: out of memory", path);
    if (rc) {
        ft_manifest_close(m);
        return rc;
    }
    *out = m;
    return FT_OK;
}

int ft_manifest_open(ft_manifest **out, const char *path, unsigned flags,
                     char *errbuf, size_t errlen)
{
    return ft_manifest_open_part(out, path, flags, 0, UINT32_MAX, errbuf,
                                 errlen);
}

int ft_manifest_open_part(ft_manifest **out, const char *path, unsigned flags,
                          uint32_t first, uint32_t count, char *errbuf,
                          size_t errlen)
{
    *out = NULL;
    unsigned char *buf;
    size_t len;
    int rc = read_whole(path, &buf, &len, errbuf, errlen);
    if (rc)
        return rc;
    rc = manifest_from(out, path, buf, len, flags, first, count, open_file,
                       NULL, errbuf, errlen);
    free(buf);
    return rc;
}

uint32_t ft_shard_of_token(const ft_manifest *m, uint32_t tok)
{
    /* The last shard whose lo is <= tok; shard 0 starts at 0. */
    uint32_t lo = 0, hi = m->n_shards - 1;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo + 1) / 2;
        if (m->shards[mid].lo <= tok)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* library_of_index opens path as a single index through open_index: a
 * library of one shard [0, 2^32-1]. */
static int library_of_index(ft_manifest **out, const char *path,
                            unsigned flags, ft_index_opener open_index,
                            void *arg, char *errbuf, size_t errlen)
{
    ft_manifest *m = calloc(1, sizeof *m);
    ft_manifest_shard *s = m ? calloc(1, sizeof *s) : NULL;
    if (s == NULL || (m->path = strdup(path)) == NULL ||
        (s->path = strdup(path)) == NULL) {
        free(s);
        ft_manifest_close(m);
        return FT_ENOMEM;
    }
    m->shards = s;
    m->n_shards = 1;
    int rc = open_index(&s->idx, path, flags, errbuf, errlen, arg);
    if (rc) {
        ft_manifest_close(m);
        return rc;
    }
    const ft_trie *t = &s->idx->trie;
    s->lo = 0;
    s->hi = UINT32_MAX;
    s->keys = m->keys = t->n_keys;
    s->nodes = t->view.n_nodes;
    s->trie_bytes = ft_index_trie_bytes(s->idx);
    s->file_bytes = s->idx->map_len;
    s->checksum = ft_index_head_checksum(s->idx);
    m->value_bits = t->value_bits;
    m->max_key_len = t->max_key_len;
    *out = m;
    return FT_OK;
}

/* neither says that a file is neither an index nor a manifest. */
static int neither(const char *path, char *errbuf, size_t errlen)
{
    fti_errf(errbuf, errlen,
             "%s: neither a FlashTrie index nor a shard manifest (bad "
             "magic)", path);
    return FT_EFORMAT;
}

int ft_library_open(ft_manifest **out, const char *path, unsigned flags,
                    char *errbuf, size_t errlen)
{
    FT_RETURN_ERROR_IF(out == NULL || path == NULL, FT_EINVAL,
                       "library: %s is NULL", out == NULL ? "out" : "path");
    *out = NULL;
    int fd;
    struct stat st;
    int rc = fti_open_read(&fd, &st, path, errbuf, errlen);
    if (rc != FT_OK)
        return rc; /* a FIFO, a directory...: refused before any read */
    char magic[8];
    ssize_t got;
    do
        got = read(fd, magic, sizeof magic);
    while (got < 0 && errno == EINTR);
    close(fd);
    if (got == 8 && memcmp(magic, FT_MANIFEST_MAGIC, 8) == 0)
        return ft_manifest_open(out, path, flags, errbuf, errlen);
    if (got == 8 && memcmp(magic, "FLSHTRIE", 8) != 0)
        return neither(path, errbuf, errlen);
    return library_of_index(out, path, flags, open_file, NULL, errbuf, errlen);
}

int ft_library_open_mem(ft_manifest **out, const char *path,
                        const void *data, size_t len, unsigned flags,
                        ft_index_opener open_index, void *arg, char *errbuf,
                        size_t errlen)
{
    *out = NULL;
    if (len >= 8 && memcmp(data, FT_MANIFEST_MAGIC, 8) == 0)
        return manifest_from(out, path, data, len, flags, 0, UINT32_MAX,
                             open_index, arg, errbuf, errlen);
    if (len >= 8 && memcmp(data, "FLSHTRIE", 8) != 0)
        return neither(path, errbuf, errlen);
    return library_of_index(out, path, flags, open_index, arg, errbuf, errlen);
}

int ft_manifest_lookup(uint64_t *value, const ft_manifest *m,
                       const uint32_t *toks, size_t n)
{
    if (m == NULL || (n > 0 && toks == NULL))
        return FT_EINVAL;
    if (n == 0)
        return FT_ENOTFOUND;
    const ft_index *idx = m->shards[ft_shard_of_token(m, toks[0])].idx;
    /* a part (ft_library_open_part) without the key's shard */
    if (idx == NULL)
        return FT_ESTATE;
    return ft_index_lookup(value, idx, toks, n);
}

/* A walk over several shards must know whether the callback, not the
 * limit, ended a shard's walk. */
typedef struct walk_ctx {
    ft_prefix_cb cb;
    void *arg;
    int stopped;
} walk_ctx;

static int walk_cb(const uint32_t *toks, size_t n, uint64_t value, void *arg)
{
    walk_ctx *w = arg;
    if (w->cb(toks, n, value, w->arg)) {
        w->stopped = 1;
        return 1;
    }
    return 0;
}

int ft_manifest_prefix(uint64_t *visited, const ft_manifest *m,
                       const uint32_t *prefix, size_t n, uint64_t limit,
                       ft_prefix_cb cb, void *arg)
{
    if (visited)
        *visited = 0;
    if (m == NULL || cb == NULL || (n > 0 && prefix == NULL))
        return FT_EINVAL;
    /* A part (ft_library_open_part) walks no shard it does not hold: the
     * prefix's shard, or (n = 0) every shard, must be open. */
    if (n > 0) {
        const ft_index *idx = m->shards[ft_shard_of_token(m, prefix[0])].idx;
        if (idx == NULL)
            return FT_ESTATE;
        return ft_index_prefix(visited, idx, prefix, n, limit, cb, arg);
    }
    for (uint32_t i = 0; i < m->n_shards; i++)
        if (m->shards[i].idx == NULL)
            return FT_ESTATE;
    walk_ctx w = {cb, arg, 0};
    uint64_t total = 0;
    for (uint32_t i = 0; i < m->n_shards && !w.stopped; i++) {
        if (limit && total >= limit)
            break;
        uint64_t seen = 0;
        int rc = ft_index_prefix(&seen, m->shards[i].idx, NULL, 0,
                                 limit ? limit - total : 0, walk_cb, &w);
        total += seen;
        if (rc != FT_OK) {
            if (visited)
                *visited = total;
            return rc;
        }
    }
    if (visited)
        *visited = total;
    return FT_OK;
}

static int manifest_info(ft_index_info *info, const ft_manifest *m);

/* ft_manifest_info_get takes what ft_index_info_get takes (a struct_size
 * of at least this build's, from a caller built with a newer, longer
 * ft_index_info) and writes the fields it knows, keeping struct_size. */
int ft_manifest_info_get(ft_index_info *info, const ft_manifest *m)
{
    if (info == NULL || m == NULL || info->struct_size < sizeof *info ||
        info->struct_size > 65536u)
        return FT_EINVAL;
    uint32_t size = info->struct_size;
    ft_index_info full;
    ft_index_info_init(&full);
    int rc = manifest_info(&full, m);
    if (rc != FT_OK)
        return rc;
    memcpy(info, &full, sizeof full);
    info->struct_size = size;
    return FT_OK;
}

static int manifest_info(ft_index_info *info, const ft_manifest *m)
{
    for (uint32_t i = 0; i < m->n_shards; i++)
        if (m->shards[i].idx == NULL) {
            /* A part (ft_library_open_part): only the manifest's counts
             * are known for the whole library. */
            memset(info, 0, sizeof *info);
            info->struct_size = sizeof *info;
            info->keys = m->keys;
            info->max_key_len = m->max_key_len;
            info->value_bits = m->value_bits;
            for (uint32_t j = 0; j < m->n_shards; j++) {
                info->nodes += m->shards[j].nodes - 1;
                info->file_bytes += m->shards[j].file_bytes;
                info->trie_bytes += m->shards[j].trie_bytes;
            }
            info->nodes += 1;
            return FT_OK;
        }
    if (m->n_shards == 1)
        return ft_index_info_get(info, m->shards[0].idx);
    memset(info, 0, sizeof *info);
    uint64_t fanout = 0;
    for (uint32_t i = 0; i < m->n_shards; i++) {
        ft_index_info s;
        ft_index_info_init(&s);
        int rc = ft_index_info_get(&s, m->shards[i].idx);
        if (rc)
            return rc;
        /* Every shard has its own root; the library has one. */
        info->keys += s.keys;
        info->nodes += s.nodes - 1;
        info->max_depth = s.max_depth > info->max_depth ? s.max_depth
                                                         : info->max_depth;
        info->max_key_len = s.max_key_len;
        info->root_fanout += s.root_fanout;
        info->high_nodes += s.high_nodes;
        info->leaves += s.leaves;
        /* A shard root of one child counts as unary there, never in the
         * library (unless the library's root has one child). */
        info->unary_nodes += s.unary_nodes - (s.root_fanout == 1);
        info->label_high_bits = s.label_high_bits > info->label_high_bits
                                    ? s.label_high_bits
                                    : info->label_high_bits;
        info->value_bits =
            s.value_bits > info->value_bits ? s.value_bits : info->value_bits;
        info->file_bytes += s.file_bytes;
        info->trie_bytes += s.trie_bytes;
        info->value_bytes += s.value_bytes;
        fanout += s.root_fanout;
    }
    info->nodes += 1;
    info->unary_nodes += fanout == 1;
    return FT_OK;
}

/* ---- the public library calls (include/flashtrie.h) ---- */

void ft_library_close(ft_library *lib) { ft_manifest_close(lib); }

size_t ft_library_shards(const ft_library *lib)
{
    return lib ? lib->n_shards : 0;
}

const ft_index *ft_library_shard(const ft_library *lib, size_t s)
{
    return lib && s < lib->n_shards ? lib->shards[s].idx : NULL;
}

int ft_library_is_manifest(const ft_library *lib)
{
    return lib ? lib->is_manifest : 0;
}

int ft_library_open_part(ft_library **out, const char *path, unsigned flags,
                         uint32_t first, uint32_t count, char *errbuf,
                         size_t errlen)
{
    FT_RETURN_ERROR_IF(out == NULL || path == NULL, FT_EINVAL,
                       "library: %s is NULL", out == NULL ? "out" : "path");
    return ft_manifest_open_part(out, path, flags, first, count, errbuf,
                                 errlen);
}

int ft_library_info_get(ft_index_info *info, const ft_library *lib)
{
    if (lib == NULL)
        return FT_EINVAL;
    if (!lib->is_manifest)
        return ft_index_info_get(info, lib->shards[0].idx);
    return ft_manifest_info_get(info, lib);
}

int ft_library_lookup(uint64_t *value, const ft_library *lib,
                      const uint32_t *toks, size_t n)
{
    return ft_manifest_lookup(value, lib, toks, n);
}

int ft_library_prefix(uint64_t *visited, const ft_library *lib,
                      const uint32_t *prefix, size_t n, uint64_t limit,
                      ft_prefix_cb cb, void *arg)
{
    return ft_manifest_prefix(visited, lib, prefix, n, limit, cb, arg);
}

int ft_library_shard_get(ft_library_shard_info *out, const ft_library *lib,
                         size_t s)
{
    if (out == NULL || lib == NULL || s >= lib->n_shards)
        return FT_EINVAL;
    const ft_manifest_shard *m = &lib->shards[s];
    out->lo = m->lo;
    out->hi = m->hi;
    out->keys = m->keys;
    out->nodes = m->nodes;
    out->trie_bytes = m->trie_bytes;
    out->file_bytes = m->file_bytes;
    out->name = m->name ? m->name : "";
    return FT_OK;
}
