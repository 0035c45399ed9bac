/*
 * index_file.c - the index file: write aside and rename, map, verify,
 * and the host-side queries (info, lookup, prefix walk).
 *
 * File layout: a 128-byte header, a section table (32 bytes per section),
 * then the sections, each at a 64-byte aligned offset.  All integers are
 * little-endian; the header records an endianness probe.  Every section
 * carries an XXH3-64 checksum, and the header and table carry one more.
 */
#include "trie.h"
#include "flashtrie/internal/engine.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define FT_MAGIC "FLSHTRIE"
#define FT_FORMAT_VERSION 2u
#define FT_ENDIAN_PROBE 0x01020304u
#define FT_ALIGN 64u

const char *const ft_section_names[FT_SEC_COUNT] = {
    "louds", "louds_rank", "louds_select0", "label_lo", "high_flags",
    "high_rank", "label_hi", "node_flags", "terminal_rank", "values"};

typedef struct ft_file_header {
    char magic[8];
    uint32_t version;
    uint32_t endian;
    uint32_t header_bytes;
    uint32_t n_sections;
    uint64_t n_keys;
    uint64_t n_nodes;
    uint64_t louds_bits;
    uint64_t louds_zeros;
    uint64_t high_nodes;
    uint64_t root_fanout;
    uint32_t max_depth;
    uint32_t max_key_len;
    uint32_t hi_bits;
    uint32_t value_bits;
    uint64_t file_bytes;
    uint64_t checksum; /* XXH3 of header (this field 0) and table */
    uint8_t reserved[24];
} ft_file_header;

typedef struct ft_file_section {
    uint32_t id;
    uint32_t align;
    uint64_t offset;
    uint64_t bytes;
    uint64_t checksum;
} ft_file_section;

_Static_assert(sizeof(ft_file_header) == 128, "header layout");
_Static_assert(sizeof(ft_file_section) == 32, "section layout");

void ft_trie_section_sizes(ft_trie *t)
{
    uint64_t n = t->view.n_nodes;
    t->sec_bytes[FT_SEC_LOUDS] = fti_bits_words(t->view.louds_bits) * 8;
    t->sec_bytes[FT_SEC_LOUDS_RANK] = fti_rank_words(t->view.louds_bits) * 8;
    t->sec_bytes[FT_SEC_LOUDS_SEL0] = fti_sel0_entries(t->louds_zeros) * 4;
    t->sec_bytes[FT_SEC_LABEL_LO] = n * 2;
    t->sec_bytes[FT_SEC_HIGH] = fti_bits_words(n) * 8;
    t->sec_bytes[FT_SEC_HIGH_RANK] = fti_rank_words(n) * 8;
    t->sec_bytes[FT_SEC_LABEL_HI] =
        fti_packed_words(t->high_nodes, t->view.hi_bits) * 8;
    t->sec_bytes[FT_SEC_FLAGS] = fti_bits_words(2 * n) * 8;
    t->sec_bytes[FT_SEC_TERM_RANK] = fti_rank_words(2 * n) * 8;
    t->sec_bytes[FT_SEC_VALUES] = fti_packed_words(t->n_keys, t->value_bits) * 8;
}

void ft_trie_free(ft_trie *t)
{
    for (int s = 0; s < FT_SEC_COUNT; s++) {
        free(t->owned[s]);
        t->owned[s] = NULL;
    }
}

uint64_t ft_trie_term_rank(const ft_trie *t, uint64_t u)
{
    return ft_term_rank(t->view.flags, t->term_rank, u);
}

uint64_t ft_trie_value(const ft_trie *t, uint64_t u)
{
    uint64_t r = ft_trie_term_rank(t, u);
    if (r >= t->n_keys) /* damaged, unverified file: stay inside values */
        r = 0;
    return ft_packed_get(t->values, t->value_bits, r);
}

/* value_of is ft_trie_value for the host queries: FT_EFORMAT when node u's
 * terminal rank is no key number, which only a damaged file opened without
 * verification can give. */
static int value_of(uint64_t *value, const ft_trie *t, uint64_t u)
{
    uint64_t r = ft_trie_term_rank(t, u);
    if (r >= t->n_keys)
        return FT_EFORMAT;
    *value = ft_packed_get(t->values, t->value_bits, r);
    return FT_OK;
}

int fti_write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* A checksum worker takes the next section from a list ordered by size,
 * largest first, so the biggest section starts at once and the small ones
 * fill the other threads. */
typedef struct sum_job {
    const ft_trie *t;
    const int *order;
    uint64_t *sums;
    int next; /* taken with __atomic_fetch_add */
} sum_job;

static void *sum_worker(void *arg)
{
    sum_job *j = arg;
    for (;;) {
        int k = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
        if (k >= FT_SEC_COUNT)
            return NULL;
        int s = j->order[k];
        j->sums[s] = XXH3_64bits(j->t->sec[s], j->t->sec_bytes[s]);
    }
}

static void section_sums(const ft_trie *t, int threads, uint64_t *sums)
{
    int order[FT_SEC_COUNT];
    for (int s = 0; s < FT_SEC_COUNT; s++) {
        int k = s;
        while (k > 0 && t->sec_bytes[order[k - 1]] < t->sec_bytes[s]) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = s;
    }
    sum_job j = {t, order, sums, 0};
    if (threads > FT_SEC_COUNT)
        threads = FT_SEC_COUNT;
    pthread_t th[FT_SEC_COUNT];
    int started = 0;
    for (int i = 1; i < threads; i++) {
        if (pthread_create(&th[started], NULL, sum_worker, &j) != 0)
            break; /* the calling thread does what is left */
        started++;
    }
    sum_worker(&j);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
}

int ft_trie_write(const ft_trie *t, const char *path, char *errbuf,
                  size_t errlen)
{
    return ft_trie_write_mt(t, path, 1, NULL, errbuf, errlen);
}

int ft_trie_write_mt(const ft_trie *t, const char *path, int threads,
                     double *prof, char *errbuf, size_t errlen)
{
    double t0 = fti_now();
    uint64_t sums[FT_SEC_COUNT];
    section_sums(t, threads, sums);
    ft_file_header h;
    ft_file_section tab[FT_SEC_COUNT];
    memset(&h, 0, sizeof h);
    memset(tab, 0, sizeof tab);
    memcpy(h.magic, FT_MAGIC, 8);
    h.version = FT_FORMAT_VERSION;
    h.endian = FT_ENDIAN_PROBE;
    h.header_bytes = sizeof h;
    h.n_sections = FT_SEC_COUNT;
    h.n_keys = t->n_keys;
    h.n_nodes = t->view.n_nodes;
    h.louds_bits = t->view.louds_bits;
    h.louds_zeros = t->louds_zeros;
    h.high_nodes = t->high_nodes;
    h.root_fanout = t->root_fanout;
    h.max_depth = t->max_depth;
    h.max_key_len = t->max_key_len;
    h.hi_bits = t->view.hi_bits;
    h.value_bits = t->value_bits;
    uint64_t off = sizeof h + sizeof tab;
    for (int s = 0; s < FT_SEC_COUNT; s++) {
        off = (off + FT_ALIGN - 1) / FT_ALIGN * FT_ALIGN;
        tab[s].id = (uint32_t)s;
        tab[s].align = FT_ALIGN;
        tab[s].offset = off;
        tab[s].bytes = t->sec_bytes[s];
        tab[s].checksum = sums[s];
        off += t->sec_bytes[s];
    }
    h.file_bytes = off;
    XXH3_state_t *st = XXH3_createState();
    if (st == NULL)
        return FT_ENOMEM;
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, &h, sizeof h);
    XXH3_64bits_update(st, tab, sizeof tab);
    h.checksum = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    double t1 = fti_now();
    if (prof)
        prof[FT_PROF_CHECKSUM] += t1 - t0;

    int fd;
    char *tmp;
    int rc = fti_tmp_create(&fd, &tmp, path, errbuf, errlen);
    if (rc != FT_OK)
        return rc;
    static const char zeros[FT_ALIGN];
    int bad = fti_write_all(fd, &h, sizeof h) ||
              fti_write_all(fd, tab, sizeof tab);
    uint64_t pos = sizeof h + sizeof tab;
    for (int s = 0; s < FT_SEC_COUNT && !bad; s++) {
        bad = fti_write_all(fd, zeros, tab[s].offset - pos) ||
              fti_write_all(fd, t->sec[s], t->sec_bytes[s]);
        pos = tab[s].offset + tab[s].bytes;
    }
    double t2 = fti_now();
    if (prof)
        prof[FT_PROF_WRITE] += t2 - t1;
    rc = fti_tmp_commit(fd, bad, tmp, path, "index", errbuf, errlen);
    if (prof)
        prof[FT_PROF_FSYNC] += fti_now() - t2;
    return rc;
}

/* ---- structural checks ----
 *
 * These run on every open, also with FT_OPEN_NO_VERIFY, after the checksums
 * (so a verified open names the damaged section's checksum first).  They
 * read the small directories once and a few words at the ends of the bit
 * vectors, never the vectors themselves: the bounds in nav.h rely on them
 * (hints name real blocks, a rank never passes its total, the spare block
 * after each vector is zero) and catch most damage to the directories. */

static unsigned long long ull(uint64_t x) { return (unsigned long long)x; }

/* check_header checks that the header's counts describe a trie this build
 * can navigate: LOUDS sizes follow from the node count, the other counts
 * fit inside it, the widths fit their fields. */
static int check_header(const ft_file_header *h, const char *path,
                        char *errbuf, size_t errlen)
{
    uint64_t n = h->n_nodes;
    FT_RETURN_ERROR_IF(n == 0, FT_EFORMAT, "%s: header: no nodes (the root "
                       "is always there)", path);
    FT_RETURN_ERROR_IF(n > FTI_RANK_MAX_BITS / 4 - 1, FT_EFORMAT,
                       "%s: header: %llu nodes, at most %llu fit the rank "
                       "directories", path, ull(n),
                       ull(FTI_RANK_MAX_BITS / 4 - 1));
    FT_RETURN_ERROR_IF(h->louds_bits != 2 * n + 1, FT_EFORMAT,
                       "%s: header: %llu LOUDS bits for %llu nodes, want "
                       "%llu", path, ull(h->louds_bits), ull(n),
                       ull(2 * n + 1));
    FT_RETURN_ERROR_IF(h->louds_zeros != n + 1, FT_EFORMAT,
                       "%s: header: %llu LOUDS zeros for %llu nodes, want "
                       "%llu", path, ull(h->louds_zeros), ull(n), ull(n + 1));
    /* Every node but the root may end a key; a trie of more than the root
     * has leaves, and leaves end keys. */
    FT_RETURN_ERROR_IF(h->n_keys >= n + (n == 1) || (n > 1 && h->n_keys == 0),
                       FT_EFORMAT, "%s: header: %llu keys for %llu nodes",
                       path, ull(h->n_keys), ull(n));
    FT_RETURN_ERROR_IF(h->root_fanout >= n + (n == 1) ||
                           (n > 1 && h->root_fanout == 0),
                       FT_EFORMAT, "%s: header: root fan-out %llu for %llu "
                       "nodes", path, ull(h->root_fanout), ull(n));
    FT_RETURN_ERROR_IF(h->high_nodes >= n, FT_EFORMAT,
                       "%s: header: %llu high-label nodes for %llu nodes",
                       path, ull(h->high_nodes), ull(n));
    FT_RETURN_ERROR_IF(h->hi_bits > 16 || (h->hi_bits == 0) !=
                                              (h->high_nodes == 0),
                       FT_EFORMAT, "%s: header: high label width %u for "
                       "%llu high-label nodes", path, h->hi_bits,
                       ull(h->high_nodes));
    FT_RETURN_ERROR_IF(h->value_bits > 64, FT_EFORMAT,
                       "%s: header: value width %u (at most 64)", path,
                       h->value_bits);
    FT_RETURN_ERROR_IF(h->max_key_len > FT_MAX_KEY_LEN_LIMIT ||
                           h->max_depth > h->max_key_len,
                       FT_EFORMAT, "%s: header: max depth %u, max key length "
                       "%u (at most %u)", path, h->max_depth, h->max_key_len,
                       FT_MAX_KEY_LEN_LIMIT);
    return FT_OK;
}

/* check_rank checks a rank directory over nbits bits (of which every
 * stride-th counts) against itself and the header: no ones before block
 * 0, each block adds no more ones than it has counted bits, the entry past
 * the last bit is total, and the unused half of the last word is zero. */
static int check_rank(const ft_trie *t, int sec, uint64_t nbits,
                      uint64_t stride, uint64_t total, const char *path,
                      char *errbuf, size_t errlen)
{
    const uint64_t *rank = t->sec[sec];
    const char *name = ft_section_names[sec];
    uint64_t ne = fti_rank_entries(nbits);
    uint64_t prev = ft_rank_block(rank, 0);
    FT_RETURN_ERROR_IF(prev != 0, FT_EFORMAT,
                       "%s: %s: entry 0 is %llu, must be 0", path, name,
                       ull(prev));
    for (uint64_t b = 1; b < ne; b++) {
        uint64_t cur = ft_rank_block(rank, b);
        FT_RETURN_ERROR_IF(cur < prev, FT_EFORMAT,
                           "%s: %s: entry %llu decreases (%llu after %llu)",
                           path, name, ull(b), ull(cur), ull(prev));
        uint64_t lo = (b - 1) * FT_BLOCK_BITS;
        uint64_t len = lo >= nbits ? 0
                       : nbits - lo < FT_BLOCK_BITS ? nbits - lo
                                                    : FT_BLOCK_BITS;
        uint64_t cap = (len + stride - 1) / stride;
        FT_RETURN_ERROR_IF(cur - prev > cap, FT_EFORMAT,
                           "%s: %s: entry %llu is %llu after %llu, block "
                           "%llu holds at most %llu ones",
                           path, name, ull(b), ull(cur), ull(prev),
                           ull(b - 1), ull(cap));
        prev = cur;
    }
    FT_RETURN_ERROR_IF(prev != total, FT_EFORMAT,
                       "%s: %s: last entry %llu counts %llu ones, the header "
                       "implies %llu", path, name, ull(ne - 1), ull(prev),
                       ull(total));
    FT_RETURN_ERROR_IF((ne & 1) && (rank[ne >> 1] & 0xffffffu) != 0,
                       FT_EFORMAT, "%s: %s: unused half of word %llu is not "
                       "zero", path, name, ull(ne >> 1));
    return FT_OK;
}

/* check_sel0 checks every select0 hint against the (checked) rank
 * directory: hint j must be exactly the last block with at most j*512
 * zeros before it, the final hint the last block. */
static int check_sel0(const ft_trie *t, const char *path, char *errbuf,
                      size_t errlen)
{
    const uint32_t *sel = t->sec[FT_SEC_LOUDS_SEL0];
    const uint64_t *rank = t->sec[FT_SEC_LOUDS_RANK];
    const char *name = ft_section_names[FT_SEC_LOUDS_SEL0];
    uint64_t nblocks = (t->view.louds_bits + FT_BLOCK_BITS - 1) / FT_BLOCK_BITS;
    uint64_t nh = fti_sel0_entries(t->louds_zeros) - 1;
    for (uint64_t j = 0; j < nh; j++) {
        uint64_t b = sel[j], target = j * FT_SELECT_SAMPLE;
        FT_RETURN_ERROR_IF(b >= nblocks, FT_EFORMAT,
                           "%s: %s: entry %llu names block %llu, the LOUDS "
                           "bits have %llu", path, name, ull(j), ull(b),
                           ull(nblocks));
        FT_RETURN_ERROR_IF(j > 0 && b < sel[j - 1], FT_EFORMAT,
                           "%s: %s: entry %llu decreases (%llu after %u)",
                           path, name, ull(j), ull(b), sel[j - 1]);
        /* The rank check bounds every block's ones by its size, so the
         * zero counts below do not wrap. */
        uint64_t zb = b * FT_BLOCK_BITS - ft_rank_block(rank, b);
        FT_RETURN_ERROR_IF(zb > target, FT_EFORMAT,
                           "%s: %s: entry %llu names block %llu, which "
                           "louds_rank puts after zero %llu (%llu zeros "
                           "before it)", path, name, ull(j), ull(b),
                           ull(target), ull(zb));
        if (b + 1 < nblocks) {
            uint64_t zn = (b + 1) * FT_BLOCK_BITS - ft_rank_block(rank, b + 1);
            FT_RETURN_ERROR_IF(zn <= target, FT_EFORMAT,
                               "%s: %s: entry %llu names block %llu, but "
                               "louds_rank puts zero %llu in a later block "
                               "(%llu zeros before block %llu)", path, name,
                               ull(j), ull(b), ull(target), ull(zn),
                               ull(b + 1));
        }
    }
    FT_RETURN_ERROR_IF(sel[nh] != nblocks - 1, FT_EFORMAT,
                       "%s: %s: last entry %u, the last LOUDS block is %llu",
                       path, name, sel[nh], ull(nblocks - 1));
    return FT_OK;
}

/* check_tail checks that the bits of section sec past its first nbits are
 * zero (the writer's padding; the navigation's zero scans end there). */
static int check_tail(const ft_trie *t, int sec, uint64_t nbits,
                      const char *path, char *errbuf, size_t errlen)
{
    const uint64_t *w = t->sec[sec];
    uint64_t nw = t->sec_bytes[sec] / 8;
    for (uint64_t i = nbits >> 6; i < nw; i++) {
        uint64_t x = w[i];
        if (i == nbits >> 6)
            x &= ~0ull << (nbits & 63u);
        FT_RETURN_ERROR_IF(x != 0, FT_EFORMAT,
                           "%s: %s: bit %llu is set, past the last of %llu "
                           "bits", path, ft_section_names[sec],
                           ull(i * 64 + ft_ctz64(x)), ull(nbits));
    }
    return FT_OK;
}

/* check_root checks the LOUDS ends and the root against the header: the
 * super root's "10" opens the bits and a zero closes them, the root has
 * root_fanout children in strictly increasing label order (the GPU engine
 * indexes a table by the largest) and the root's flags match. */
static int check_root(const ft_index *idx, const char *path, char *errbuf,
                      size_t errlen)
{
    const ft_trie *t = &idx->trie;
    const ft_trie_view *v = &t->view;
    FT_RETURN_ERROR_IF(ft_bit_get(v->louds, 0) != 1 ||
                           ft_bit_get(v->louds, 1) != 0,
                       FT_EFORMAT, "%s: louds: does not open with the super "
                       "root's 10", path);
    FT_RETURN_ERROR_IF(ft_bit_get(v->louds, v->louds_bits - 1) != 0,
                       FT_EFORMAT, "%s: louds: last bit %llu is not a zero",
                       path, ull(v->louds_bits - 1));
    const ft_child_range *cr = &idx->root;
    FT_RETURN_ERROR_IF(cr->first != 1 || cr->deg != t->root_fanout,
                       FT_EFORMAT, "%s: louds: the root has %llu children "
                       "from node %llu, the header says %llu from node 1",
                       path, ull(cr->deg), ull(cr->first),
                       ull(t->root_fanout));
    uint32_t f = ft_node_flags(v, 0), want = cr->deg ? FT_HAS_CHILD : 0;
    FT_RETURN_ERROR_IF(f != want, FT_EFORMAT,
                       "%s: node_flags: the root's flags are %u, want %u",
                       path, f, want);
    for (uint64_t c = 1; c < cr->deg; c++) {
        uint32_t a = ft_child_label(v, cr, cr->first + c - 1);
        uint32_t b = ft_child_label(v, cr, cr->first + c);
        FT_RETURN_ERROR_IF(a >= b, FT_EFORMAT,
                           "%s: label_lo/label_hi: the root's children %llu and "
                           "%llu are out of order (labels %u, %u)", path,
                           ull(cr->first + c - 1), ull(cr->first + c), a, b);
    }
    return FT_OK;
}

/* check_structure runs the checks above in dependency order. */
static int check_structure(const ft_index *idx, const char *path,
                           char *errbuf, size_t errlen)
{
    const ft_trie *t = &idx->trie;
    uint64_t n = t->view.n_nodes;
    int rc;
    if ((rc = check_rank(t, FT_SEC_LOUDS_RANK, t->view.louds_bits, 1, n, path,
                         errbuf, errlen)) != FT_OK ||
        (rc = check_sel0(t, path, errbuf, errlen)) != FT_OK ||
        (rc = check_rank(t, FT_SEC_HIGH_RANK, n, 1, t->high_nodes, path,
                         errbuf, errlen)) != FT_OK ||
        (rc = check_rank(t, FT_SEC_TERM_RANK, 2 * n, 2, t->n_keys, path,
                         errbuf, errlen)) != FT_OK ||
        (rc = check_tail(t, FT_SEC_LOUDS, t->view.louds_bits, path, errbuf,
                         errlen)) != FT_OK ||
        (rc = check_tail(t, FT_SEC_HIGH, n, path, errbuf, errlen)) != FT_OK ||
        (rc = check_tail(t, FT_SEC_FLAGS, 2 * n, path, errbuf, errlen)) !=
            FT_OK ||
        (rc = check_tail(t, FT_SEC_LABEL_HI, t->high_nodes * t->view.hi_bits,
                         path, errbuf, errlen)) != FT_OK ||
        (rc = check_tail(t, FT_SEC_VALUES, t->n_keys * t->value_bits, path,
                         errbuf, errlen)) != FT_OK)
        return rc;
    return FT_OK;
}

int fti_tmp_create(int *fd, char **tmp, const char *path, char *errbuf,
                   size_t errlen)
{
    size_t plen = strlen(path);
    char *t = malloc(plen + 32);
    if (t == NULL)
        return FT_ENOMEM;
    snprintf(t, plen + 32, "%s.tmp.%ld", path, (long)getpid());
    *fd = open(t, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (*fd < 0) {
        fti_errf(errbuf, errlen, "%s: cannot create: %s", t, strerror(errno));
        free(t);
        return FT_EIO;
    }
    *tmp = t;
    return FT_OK;
}

int fti_tmp_commit(int fd, int bad, char *tmp, const char *path,
                   const char *what, char *errbuf, size_t errlen)
{
    if (!bad)
        bad = fsync(fd) != 0;
    int e = errno;
    if (close(fd) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (!bad && rename(tmp, path) != 0) {
        bad = 1;
        e = errno;
    }
    if (bad) {
        fti_errf(errbuf, errlen, "%s: cannot write %s: %s", path, what,
                 strerror(e));
        unlink(tmp);
    }
    free(tmp);
    return bad ? FT_EIO : FT_OK;
}

/* file_kind names what a path is when it is no regular file. */
static const char *file_kind(mode_t m)
{
    return S_ISDIR(m)    ? "a directory"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISSOCK(m) ? "a socket"
                         : "not a regular file";
}

int fti_open_read(int *fd, struct stat *st, const char *path, char *errbuf,
                  size_t errlen)
{
    /* O_NONBLOCK: a FIFO opens at once instead of waiting for a writer
     * (it is then refused below); it changes nothing for a regular
     * file's reads. */
    *fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (*fd < 0) {
        fti_errf(errbuf, errlen, "%s: cannot open: %s", path, strerror(errno));
        return FT_EIO;
    }
    if (fstat(*fd, st) != 0) {
        fti_errf(errbuf, errlen, "%s: cannot stat: %s", path, strerror(errno));
        close(*fd);
        *fd = -1;
        return FT_EIO;
    }
    if (!S_ISREG(st->st_mode)) {
        fti_errf(errbuf, errlen, "%s: not a regular file (%s); an index or "
                 "a manifest is a regular file", path,
                 file_kind(st->st_mode));
        close(*fd);
        *fd = -1;
        return FT_EIO;
    }
    return FT_OK;
}

/* ---- the SIGBUS guard ----
 *
 * A mapped file that is truncated (or rewritten through O_TRUNC) under the
 * mapping makes every read of the lost pages raise SIGBUS.  The mappings
 * are registered here, each with its message formatted when mapped, so
 * that the handler only compares addresses and calls write(2) and _exit
 * (async-signal-safe). */
#define BUS_SLOTS 256
#define BUS_MSG 1400

typedef struct bus_slot {
    _Atomic(uintptr_t) base; /* 0: free */
    size_t len;
    size_t msg_len;
    char msg[BUS_MSG]; /* "...the index PATH at byte " */
} bus_slot;

static bus_slot g_bus[BUS_SLOTS];
static pthread_mutex_t g_bus_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int g_bus_fd = 2;
static atomic_int g_bus_installed;
static struct sigaction g_bus_prev;

static void bus_write(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

static void bus_handler(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    uintptr_t a = (uintptr_t)si->si_addr;
    for (size_t i = 0; i < BUS_SLOTS; i++) {
        uintptr_t b = atomic_load(&g_bus[i].base);
        if (b == 0 || a < b || a - b >= g_bus[i].len)
            continue;
        char num[24];
        size_t k = sizeof num;
        uint64_t off = a - b;
        do
            num[--k] = (char)('0' + off % 10);
        while ((off /= 10) > 0 && k > 0);
        static const char tail[] =
            ": the file was truncated or rewritten in place while served "
            "(install a new index under a new name and rename it over the "
            "old one, or RELOAD it); exiting\n";
        int fds[2] = {2, atomic_load(&g_bus_fd)};
        for (int f = 0; f < (fds[1] == 2 ? 1 : 2); f++) {
            bus_write(fds[f], g_bus[i].msg, g_bus[i].msg_len);
            bus_write(fds[f], num + k, sizeof num - k);
            bus_write(fds[f], tail, sizeof tail - 1);
        }
        _exit(FTI_EXIT_SIGBUS);
    }
    /* Not an index: what would have happened without the guard. */
    if (g_bus_prev.sa_flags & SA_SIGINFO && g_bus_prev.sa_sigaction) {
        g_bus_prev.sa_sigaction(sig, si, uc);
        return;
    }
    if (g_bus_prev.sa_handler != SIG_DFL && g_bus_prev.sa_handler != SIG_IGN &&
        g_bus_prev.sa_handler != NULL) {
        g_bus_prev.sa_handler(sig);
        return;
    }
    signal(SIGBUS, SIG_DFL); /* the fault repeats on return, and kills */
}

void fti_index_bus_guard(int fd)
{
    atomic_store(&g_bus_fd, fd);
    if (atomic_exchange(&g_bus_installed, 1))
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = bus_handler;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &g_bus_prev);
}

/* bus_register notes a mapping of path (the slot taken, or -1 when all
 * are: that mapping then faults unguarded). */
static int bus_register(const void *base, size_t len, const char *path)
{
    pthread_mutex_lock(&g_bus_mu);
    int slot = -1;
    for (int i = 0; i < BUS_SLOTS && slot < 0; i++)
        if (atomic_load(&g_bus[i].base) == 0)
            slot = i;
    if (slot >= 0) {
        bus_slot *b = &g_bus[slot];
        int n = snprintf(b->msg, sizeof b->msg, "flashtrie: fatal: SIGBUS "
                         "reading the index %s at byte ", path);
        b->msg_len = n < 0 ? 0 : (size_t)n < sizeof b->msg ? (size_t)n
                                                             : sizeof b->msg - 1;
        b->len = len;
        atomic_store(&b->base, (uintptr_t)base);
    }
    pthread_mutex_unlock(&g_bus_mu);
    return slot;
}

static void bus_unregister(const void *base)
{
    pthread_mutex_lock(&g_bus_mu);
    for (int i = 0; i < BUS_SLOTS; i++)
        if (atomic_load(&g_bus[i].base) == (uintptr_t)base)
            atomic_store(&g_bus[i].base, 0);
    pthread_mutex_unlock(&g_bus_mu);
}

/* unmap releases what an open holds on the file's bytes. */
static void unmap(ft_index *idx)
{
    if (idx->map && !idx->borrowed) {
        bus_unregister(idx->map);
        munmap(idx->map, idx->map_len);
    }
}

static int fail_open(ft_index *idx, int err)
{
    unmap(idx);
    free(idx);
    return err;
}

/* parse checks the whole file at base (size bytes, FT_ALIGN-aligned: a
 * mapping or ft_index_open_mem's buffer) and sets up idx->trie over it.
 * Both opens run exactly this, so a file is accepted or refused the same
 * way, with the same message, whichever way its bytes came in. */
static int parse(ft_index *idx, const unsigned char *base, size_t size,
                 const char *path, unsigned flags, char *errbuf,
                 size_t errlen)
{
    int rc;
    if (size < 8) {
        fti_errf(errbuf, errlen, "%s: not a FlashTrie index (file of %zu bytes)",
                 path, size);
        return FT_EFORMAT;
    }
    if (memcmp(base, FT_MAGIC, 8) != 0) {
        fti_errf(errbuf, errlen, "%s: not a FlashTrie index (bad magic)", path);
        return FT_EFORMAT;
    }
    ft_file_header h;
    ft_file_section tab[FT_SEC_COUNT];
    if (size < sizeof h + sizeof tab) {
        fti_errf(errbuf, errlen,
                 "%s: truncated: %zu bytes, the header and section table "
                 "alone need %zu", path, size, sizeof h + sizeof tab);
        return FT_ETRUNC;
    }
    memcpy(&h, base, sizeof h);
    if (h.endian != FT_ENDIAN_PROBE) {
        fti_errf(errbuf, errlen, "%s: written with another byte order", path);
        return FT_EFORMAT;
    }
    if (h.version != FT_FORMAT_VERSION) {
        fti_errf(errbuf, errlen,
                 "%s: index format version %u, this build reads version %u",
                 path, h.version, FT_FORMAT_VERSION);
        return FT_EVERSION;
    }
    if (h.header_bytes != sizeof h || h.n_sections != FT_SEC_COUNT) {
        fti_errf(errbuf, errlen, "%s: bad header (size %u, %u sections)", path,
                 h.header_bytes, h.n_sections);
        return FT_EFORMAT;
    }
    memcpy(tab, base + sizeof h, sizeof tab);
    uint64_t want = h.checksum;
    h.checksum = 0;
    XXH3_state_t *st = XXH3_createState();
    if (st == NULL)
        return FT_ENOMEM;
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, &h, sizeof h);
    XXH3_64bits_update(st, tab, sizeof tab);
    uint64_t got = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    if (got != want) {
        fti_errf(errbuf, errlen, "%s: header checksum mismatch (damaged header)",
                 path);
        return FT_EFORMAT;
    }
    if (h.file_bytes != size) {
        int trunc = size < h.file_bytes;
        fti_errf(errbuf, errlen, "%s: %s: %zu bytes, the header says %llu",
                 path, trunc ? "truncated" : "trailing bytes", size,
                 (unsigned long long)h.file_bytes);
        return trunc ? FT_ETRUNC : FT_EFORMAT;
    }
    rc = check_header(&h, path, errbuf, errlen);
    if (rc != FT_OK)
        return rc;
    ft_trie *t = &idx->trie;
    t->view.n_nodes = h.n_nodes;
    t->view.louds_bits = h.louds_bits;
    t->view.hi_bits = h.hi_bits;
    t->louds_zeros = h.louds_zeros;
    t->n_keys = h.n_keys;
    t->high_nodes = h.high_nodes;
    t->root_fanout = h.root_fanout;
    t->max_depth = h.max_depth;
    t->max_key_len = h.max_key_len;
    t->value_bits = h.value_bits;
    ft_trie_section_sizes(t);
    uint64_t prev_end = sizeof h + sizeof tab;
    for (int s = 0; s < FT_SEC_COUNT; s++) {
        const ft_file_section *e = &tab[s];
        if (e->id != (uint32_t)s || e->offset % FT_ALIGN != 0 ||
            e->offset < prev_end || e->offset > size ||
            e->bytes > size - e->offset) {
            fti_errf(errbuf, errlen, "%s: section %s: bad table entry "
                     "(id %u, offset %llu, %llu bytes)", path,
                     ft_section_names[s], e->id, ull(e->offset),
                     ull(e->bytes));
            return FT_EFORMAT;
        }
        if (e->bytes != t->sec_bytes[s]) {
            fti_errf(errbuf, errlen,
                     "%s: section %s: %llu bytes, the counts need %llu", path,
                     ft_section_names[s], (unsigned long long)e->bytes,
                     (unsigned long long)t->sec_bytes[s]);
            return FT_EFORMAT;
        }
        /* The alignment gap carries no checksum: the writer's zeros are
         * checked instead, so that no byte of a file goes unseen. */
        for (uint64_t g = prev_end; g < e->offset; g++) {
            if (base[g] != 0) {
                fti_errf(errbuf, errlen,
                         "%s: section %s: byte %llu of the gap before it is "
                         "not zero", path, ft_section_names[s], ull(g));
                return FT_EFORMAT;
            }
        }
        t->sec[s] = base + e->offset;
        prev_end = e->offset + e->bytes;
        if (!(flags & FT_OPEN_NO_VERIFY) &&
            XXH3_64bits(t->sec[s], e->bytes) != e->checksum) {
            fti_errf(errbuf, errlen, "%s: section %s: checksum mismatch", path,
                     ft_section_names[s]);
            return FT_ECHECKSUM;
        }
    }
    ft_trie_bind_sections(t);
    rc = check_structure(idx, path, errbuf, errlen);
    if (rc != FT_OK)
        return rc;
    /* ft_children is bounded (nav.h), so the root walk is safe on any
     * bits the checks above let through. */
    idx->root = ft_children(&t->view, 0);
    rc = check_root(idx, path, errbuf, errlen);
    if (rc != FT_OK)
        return rc;
    return FT_OK;
}

/* index_uid numbers the indexes a process opens, from 1. */
static uint64_t index_uid(void)
{
    static atomic_uint_fast64_t next = 1;
    return (uint64_t)atomic_fetch_add(&next, 1);
}

int ft_index_open(ft_index **out, const char *path, unsigned flags,
                  char *errbuf, size_t errlen)
{
    FT_RETURN_ERROR_IF(out == NULL || path == NULL, FT_EINVAL,
                       "index: %s is NULL", out == NULL ? "out" : "path");
    *out = NULL;
    int fd;
    struct stat stt;
    int rc = fti_open_read(&fd, &stt, path, errbuf, errlen);
    if (rc != FT_OK)
        return rc;
    size_t size = (size_t)stt.st_size;
    ft_index *idx = calloc(1, sizeof *idx);
    if (idx != NULL)
        idx->uid = index_uid();
    if (idx == NULL) {
        close(fd);
        return FT_ENOMEM;
    }
    /* A file too short for the magic is refused by parse, unmapped. */
    if (size >= 8) {
        void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            fti_errf(errbuf, errlen, "%s: cannot map: %s", path,
                     strerror(errno));
            close(fd);
            return fail_open(idx, FT_EIO);
        }
        idx->map = map;
        idx->map_len = size;
        bus_register(map, size, path);
    }
    close(fd);
    rc = parse(idx, idx->map, size, path, flags, errbuf, errlen);
    if (rc != FT_OK)
        return fail_open(idx, rc);
    *out = idx;
    return FT_OK;
}

int ft_index_open_mem(ft_index **out, const void *data, size_t size,
                      const char *name, unsigned flags, char *errbuf,
                      size_t errlen)
{
    *out = NULL;
    FT_RETURN_ERROR_IF((uintptr_t)data % FT_ALIGN != 0, FT_EINVAL,
                       "%s: buffer at %p is not %u-byte aligned", name, data,
                       FT_ALIGN);
    ft_index *idx = calloc(1, sizeof *idx);
    if (idx != NULL)
        idx->uid = index_uid();
    if (idx == NULL)
        return FT_ENOMEM;
    idx->map = (void *)data;
    idx->map_len = size;
    idx->borrowed = 1;
    int rc = parse(idx, data, size, name, flags, errbuf, errlen);
    if (rc != FT_OK)
        return fail_open(idx, rc);
    *out = idx;
    return FT_OK;
}

void ft_trie_bind_sections(ft_trie *t)
{
    t->view.louds = t->sec[FT_SEC_LOUDS];
    t->view.louds_rank = t->sec[FT_SEC_LOUDS_RANK];
    t->view.louds_sel0 = t->sec[FT_SEC_LOUDS_SEL0];
    t->view.label_lo = t->sec[FT_SEC_LABEL_LO];
    t->view.high = t->sec[FT_SEC_HIGH];
    t->view.high_rank = t->sec[FT_SEC_HIGH_RANK];
    t->view.label_hi = t->sec[FT_SEC_LABEL_HI];
    t->view.flags = t->sec[FT_SEC_FLAGS];
    t->view.high_nodes = t->high_nodes;
    t->term_rank = t->sec[FT_SEC_TERM_RANK];
    t->values = t->sec[FT_SEC_VALUES];
}

void ft_index_close(ft_index *idx)
{
    if (idx == NULL)
        return;
    unmap(idx);
    ft_trie_free(&idx->trie);
    free(idx);
}

/* info_fill describes idx in a whole ft_index_info of this library. */
static void info_fill(ft_index_info *info, const ft_index *idx)
{
    const ft_trie *t = &idx->trie;
    memset(info, 0, sizeof *info);
    info->keys = t->n_keys;
    info->nodes = t->view.n_nodes;
    info->max_depth = t->max_depth;
    info->max_key_len = t->max_key_len;
    info->root_fanout = t->root_fanout;
    info->high_nodes = t->high_nodes;
    info->label_high_bits = t->view.hi_bits;
    info->value_bits = t->value_bits;
    info->file_bytes = idx->map_len;
    /* One pass over the LOUDS bits: node v's block is the run of ones
     * before its zero (the first zero closes the super root). */
    const ft_trie_view *v = &t->view;
    uint64_t deg = 0, node = 0, zeros = 0;
    for (uint64_t w = 0; w * 64 < v->louds_bits; w++) {
        uint64_t word = v->louds[w];
        uint64_t nb = v->louds_bits - w * 64 < 64 ? v->louds_bits - w * 64 : 64;
        if (nb == 64 && word == ~0ull) {
            deg += 64;
            continue;
        }
        for (uint64_t b = 0; b < nb; b++) {
            if ((word >> b) & 1) {
                deg++;
                continue;
            }
            if (zeros++ > 0) {
                /* node < n_nodes: damaged bits may hold more zeros than
                 * the header's count, and the flags end at n_nodes. */
                if (deg == 0)
                    info->leaves++;
                else if (deg == 1 && node < v->n_nodes &&
                         !(ft_node_flags(v, node) & FT_TERMINAL))
                    info->unary_nodes++;
                node++;
            }
            deg = 0;
        }
    }
    info->n_sections = FT_SEC_COUNT;
    for (int s = 0; s < FT_SEC_COUNT; s++) {
        snprintf(info->sections[s].name, sizeof info->sections[s].name, "%s",
                 ft_section_names[s]);
        info->sections[s].bytes = t->sec_bytes[s];
        if (s == FT_SEC_VALUES || s == FT_SEC_TERM_RANK)
            info->value_bytes += t->sec_bytes[s];
        else
            info->trie_bytes += t->sec_bytes[s];
    }
}

void ft_index_info_init(ft_index_info *info)
{
    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
}

/* ft_index_info_get writes only the first struct_size bytes, so callers
 * built against an older (shorter) ft_index_info keep working. */
int ft_index_info_get(ft_index_info *info, const ft_index *idx)
{
    if (info == NULL || idx == NULL || info->struct_size < sizeof *info ||
        info->struct_size > 65536u)
        return FT_EINVAL;
    uint32_t size = info->struct_size;
    ft_index_info full;
    info_fill(&full, idx);
    memcpy(info, &full, size < sizeof full ? size : sizeof full);
    info->struct_size = size;
    return FT_OK;
}

/* walk follows toks from the root; FT_NONE when some edge is missing. */
static uint64_t walk(const ft_index *idx, const uint32_t *toks, size_t n)
{
    const ft_trie_view *v = &idx->trie.view;
    uint64_t u = 0;
    for (size_t i = 0; i < n; i++) {
        ft_child_range cr = u == 0 ? idx->root : ft_children(v, u);
        if (cr.deg == 0)
            return FT_NONE;
        u = ft_find_child(v, &cr, toks[i]);
        if (u == FT_NONE)
            return FT_NONE;
    }
    return u;
}

int ft_index_lookup(uint64_t *value, const ft_index *idx, const uint32_t *toks,
                    size_t n)
{
    if (idx == NULL || (n > 0 && toks == NULL))
        return FT_EINVAL;
    if (n == 0 || n > FT_MAX_KEY_LEN_LIMIT)
        return FT_ENOTFOUND;
    uint64_t u = walk(idx, toks, n);
    if (u == FT_NONE || !(ft_node_flags(&idx->trie.view, u) & FT_TERMINAL))
        return FT_ENOTFOUND;
    uint64_t val;
    int rc = value_of(&val, &idx->trie, u);
    if (rc == FT_OK && value)
        *value = val;
    return rc;
}

int ft_index_prefix(uint64_t *visited, const ft_index *idx,
                    const uint32_t *prefix, size_t n, uint64_t limit,
                    ft_prefix_cb cb, void *arg)
{
    if (visited)
        *visited = 0;
    if (idx == NULL || cb == NULL || (n > 0 && prefix == NULL))
        return FT_EINVAL;
    const ft_trie *t = &idx->trie;
    const ft_trie_view *v = &t->view;
    if (n > FT_MAX_KEY_LEN_LIMIT)
        return FT_ENOTFOUND;
    uint64_t u = walk(idx, prefix, n);
    if (u == FT_NONE)
        return FT_ENOTFOUND;
    uint32_t key[FT_MAX_KEY_LEN_LIMIT];
    ft_child_range stack[FT_MAX_KEY_LEN_LIMIT + 1];
    uint64_t next[FT_MAX_KEY_LEN_LIMIT + 1];
    if (n > 0)
        memcpy(key, prefix, n * sizeof *key);
    uint64_t count = 0, val;
    int rc = FT_OK;
    if (n > 0 && (ft_node_flags(v, u) & FT_TERMINAL)) {
        count++;
        if ((rc = value_of(&val, t, u)) != FT_OK)
            goto done;
        if (cb(key, n, val, arg) || (limit && count >= limit))
            goto done;
    }
    /* A sane trie shows each node once; damaged LOUDS bits (unverified
     * open) can make child ranges overlap, and the walk would revisit
     * subtrees without end in sight.  Visits are counted against the
     * node count instead. */
    uint64_t visits = 0;
    size_t sp = 0;
    stack[0] = u == 0 ? idx->root : ft_children(v, u);
    next[0] = stack[0].first;
    while (1) {
        ft_child_range *cr = &stack[sp];
        if (next[sp] >= cr->first + cr->deg) {
            if (sp == 0)
                break;
            sp--;
            continue;
        }
        uint64_t c = next[sp]++;
        if (++visits >= v->n_nodes) {
            rc = FT_EFORMAT;
            break;
        }
        size_t depth = n + sp;
        key[depth] = ft_child_label(v, cr, c);
        uint32_t f = ft_node_flags(v, c);
        if (f & FT_TERMINAL) {
            count++;
            if ((rc = value_of(&val, t, c)) != FT_OK)
                break;
            if (cb(key, depth + 1, val, arg) || (limit && count >= limit))
                break;
        }
        if ((f & FT_HAS_CHILD) && depth + 1 < FT_MAX_KEY_LEN_LIMIT) {
            sp++;
            stack[sp] = ft_children(v, c);
            next[sp] = stack[sp].first;
        }
    }
done:
    if (visited)
        *visited = count;
    return rc;
}

int ft_index_value_at(uint64_t *value, const ft_index *idx,
                      uint64_t key_index)
{
    if (idx == NULL)
        return FT_EINVAL;
    const ft_trie *t = &idx->trie;
    if (key_index >= t->n_keys)
        return FT_ENOTFOUND;
    if (value)
        *value = ft_packed_get(t->values, t->value_bits, key_index);
    return FT_OK;
}

/* How many hits ahead fti_index_values_attach prefetches a value: enough
 * misses in flight to cover the memory latency, few enough for the line
 * fill buffers. */
#define VALUE_AHEAD 24u

int fti_index_values_attach(const ft_index *idx, ft_hit *hits, uint32_t n,
                            uint32_t *bad)
{
    const ft_trie *t = &idx->trie;
    const uint64_t *vals = t->values;
    uint32_t bits = t->value_bits;
    uint64_t nk = t->n_keys;
    for (uint32_t j = 0; j < n && j < VALUE_AHEAD; j++)
        if (hits[j].key_index < nk)
            __builtin_prefetch(vals + (hits[j].key_index * bits) / 64u);
    for (uint32_t j = 0; j < n; j++) {
        if (j + VALUE_AHEAD < n && hits[j + VALUE_AHEAD].key_index < nk)
            __builtin_prefetch(vals +
                               (hits[j + VALUE_AHEAD].key_index * bits) / 64u);
        if (hits[j].key_index >= nk) {
            *bad = j;
            return FT_ENOTFOUND;
        }
        hits[j].value = ft_packed_get(vals, bits, hits[j].key_index);
    }
    return FT_OK;
}

/* shard_of is the last s of base[0..ns) with base[s] <= key (0 when
 * none): a binary search without branches on the data (a select a
 * step), since a result's hits fall in the shards at random and a
 * mispredicted branch a step cost more than the lookup (1,000 hits of 4
 * shards: 20-32 us with branches, against 11 us for one shard). */
static inline uint32_t shard_of(const uint64_t *base, size_t ns, uint64_t key)
{
    size_t lo = 0, len = ns;
    while (len > 1) {
        size_t half = len / 2;
        lo = base[lo + half] <= key ? lo + half : lo;
        len -= half;
    }
    return (uint32_t)lo;
}

/* A shard's values as the attach reads them, copied out of its index
 * once a call (a hit then loads them from this array, not through the
 * index's pointer). */
typedef struct value_src {
    const uint64_t *vals;
    uint64_t base, n;
    uint32_t bits;
} value_src;

/* The most shards whose sources fit the stack; more read them each hit. */
#define VALUE_SRCS 64u

/* A ring of the shards of the hits from j to j + VALUE_AHEAD. */
#define SHARD_RING 32u
_Static_assert(SHARD_RING > VALUE_AHEAD &&
                   (SHARD_RING & (SHARD_RING - 1)) == 0,
               "the ring holds the hits in flight");

static inline value_src value_src_of(const ft_index *const *idx,
                                     const uint64_t *base, uint32_t s)
{
    const ft_trie *t = &idx[s]->trie;
    value_src v = {t->values, base[s], t->n_keys, t->value_bits};
    return v;
}

int fti_index_values_attach_shards(const ft_index *const *idx,
                                   const uint64_t *base, size_t ns,
                                   ft_hit *hits, uint32_t n, uint32_t *bad)
{
    value_src src[VALUE_SRCS];
    int local = ns <= VALUE_SRCS;
    for (uint32_t s = 0; local && s < ns; s++)
        src[s] = value_src_of(idx, base, s);
    uint32_t ring[SHARD_RING];
    for (uint32_t j = 0; j < n + VALUE_AHEAD; j++) {
        uint32_t a = j;
        if (a < n) { /* hit a's shard, its value's word on its way */
            uint32_t sa = shard_of(base, ns, hits[a].key_index);
            ring[a % SHARD_RING] = sa;
            value_src v = local ? src[sa] : value_src_of(idx, base, sa);
            uint64_t l = hits[a].key_index - v.base;
            if (l < v.n)
                __builtin_prefetch(v.vals + (l * v.bits) / 64u);
        }
        if (j < VALUE_AHEAD)
            continue;
        uint32_t h = j - VALUE_AHEAD; /* hit h's value, read now */
        uint32_t sh = ring[h % SHARD_RING];
        value_src v = local ? src[sh] : value_src_of(idx, base, sh);
        uint64_t l = hits[h].key_index - v.base;
        if (l >= v.n) {
            *bad = h;
            return FT_ENOTFOUND;
        }
        hits[h].value = ft_packed_get(v.vals, v.bits, l);
    }
    return FT_OK;
}

uint64_t ft_index_keys(const ft_index *idx)
{
    return idx ? idx->trie.n_keys : 0;
}
