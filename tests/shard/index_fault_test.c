/*
 * index_fault_test.c - damaged index files never crash FlashTrie.
 *
 * A small random index (low and high labels, a few dozen 512-bit blocks)
 * is damaged one bit at a time: every bit of the header, the section table
 * and the small directories (louds_rank, louds_select0, high_rank,
 * terminal_rank), and a deterministic sample of every other section plus
 * its last words (the padding the navigation relies on).  For each flip a
 * forked child opens the file
 *  - with verification: the exact checksum error naming the section (or,
 *    for the header and table, the header error; for an alignment gap, the
 *    gap error);
 *  - without: either FT_EFORMAT with a message naming a section or the
 *    header, or an index on which info, a lookup of every key and of some
 *    non-keys, full and partial prefix walks and CPU-engine searches all
 *    return.  Wrong answers are allowed there (and counted); a signal or a
 *    hang (SIGALRM after a few seconds) fails the test with the section and
 *    the bit.
 * Then truncations at every length of the header and table and a sample
 * beyond, a trailing byte, a wrong version and a wrong byte order mark,
 * and a few structural faults with their exact messages.
 *
 * The per-section tallies printed at the end are the numbers of
 * docs/RELIABILITY.md.
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "search_util.h"
#include "trie.h"

#define NSEC FT_SEC_COUNT
#define HDR_BYTES 128u
#define TAB_BYTES (32u * NSEC)
#define SAMPLE_BITS 320u /* random bits per big section */
#define TAIL_BITS 640u   /* plus every bit of its last 10 words */
#define NREQ 4

typedef struct tab_entry {
    uint32_t id, align;
    uint64_t offset, bytes, checksum;
} tab_entry;

/* What a child reports back through shared memory. */
typedef struct outcome {
    int verified_rc;
    int unverified_rc;
    int ok; /* the child's own checks passed */
    uint64_t wrong; /* lookups that answered wrongly or not at all */
    char vmsg[256]; /* the verified open's error */
    char umsg[256]; /* the unverified open's error */
} outcome;

/* Per part of the file (sections, then header/table and gaps). */
enum { PART_HEADER = NSEC, PART_GAP, NPART };
typedef struct tally {
    uint64_t flips, refused, opened, wrong_answers;
} tally;

static const char *part_name(int p)
{
    return p < NSEC ? ft_section_names[p] : p == PART_HEADER ? "header+table"
                                                             : "gaps";
}

static const char *path;
static uint8_t *orig;
static size_t orig_len;
static tab_entry tab[NSEC];
static su_key *keys;
static size_t nkeys;
static su_case reqs[NREQ];
static outcome *shared;
static uint64_t failures;
/* stride: flip every stride-th bit where every bit is flipped (1; the
 * sanitizer builds pass --stride 3, the same kinds of damage in a third of
 * the time). */
static uint64_t stride = 1;

static void quiet_sink(ft_log_level level, const char *line, void *arg)
{
    (void)level;
    (void)line;
    (void)arg;
}

static void write_file(const uint8_t *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    FT_CHECK(fd >= 0);
    FT_CHECK(write(fd, data, len) == (ssize_t)len);
    FT_CHECK(close(fd) == 0);
}

static void flip_in_file(uint64_t bit)
{
    int fd = open(path, O_WRONLY);
    FT_CHECK(fd >= 0);
    uint8_t b = orig[bit >> 3] ^ (uint8_t)(1u << (bit & 7));
    FT_CHECK(pwrite(fd, &b, 1, (off_t)(bit >> 3)) == 1);
    FT_CHECK(close(fd) == 0);
}

static void restore_in_file(uint64_t bit)
{
    int fd = open(path, O_WRONLY);
    FT_CHECK(fd >= 0);
    FT_CHECK(pwrite(fd, &orig[bit >> 3], 1, (off_t)(bit >> 3)) == 1);
    FT_CHECK(close(fd) == 0);
}

/* part_of names the part of the file byte off lies in. */
static int part_of(uint64_t off)
{
    if (off < HDR_BYTES + TAB_BYTES)
        return PART_HEADER;
    for (int s = 0; s < NSEC; s++)
        if (off >= tab[s].offset && off < tab[s].offset + tab[s].bytes)
            return s;
    return PART_GAP;
}

static int count_key(const uint32_t *toks, size_t n, uint64_t value,
                     void *arg)
{
    (void)toks;
    (void)n;
    (void)value;
    ++*(uint64_t *)arg;
    return 0;
}

static int names_a_part(const char *msg)
{
    if (strstr(msg, "header") != NULL)
        return 1;
    for (int s = 0; s < NSEC; s++) {
        char want[40];
        snprintf(want, sizeof want, ": %s:", ft_section_names[s]);
        if (strstr(msg, want) != NULL)
            return 1;
        snprintf(want, sizeof want, "section %s:", ft_section_names[s]);
        if (strstr(msg, want) != NULL)
            return 1;
    }
    return strstr(msg, "label_lo/label_hi:") != NULL;
}

/* exercise runs every query on an unverified index; returns the number of
 * wrong lookups.  Only a crash or a hang can make it fail. */
/* check_ranges asserts what both engines (the GPU kernels included, which
 * have no mapping around their arrays) rely on: every child range and its
 * high-label part lie inside the arrays, whatever the bits say. */
static void check_ranges(const ft_index *idx)
{
    const ft_trie_view *v = &idx->trie.view;
    for (uint64_t u = 0; u < v->n_nodes; u++) {
        ft_child_range cr = ft_children(v, u);
        if (cr.deg == 0)
            continue;
        uint64_t end = cr.first + cr.deg;
        if (cr.first < 1 || end > v->n_nodes || cr.hstart < cr.first ||
            cr.hstart > end || cr.hbase + (end - cr.hstart) > v->high_nodes) {
            fprintf(stderr, "node %llu: children [%llu, %llu), high from "
                    "%llu at %llu: outside %llu nodes, %llu high\n",
                    (unsigned long long)u, (unsigned long long)cr.first,
                    (unsigned long long)end, (unsigned long long)cr.hstart,
                    (unsigned long long)cr.hbase,
                    (unsigned long long)v->n_nodes,
                    (unsigned long long)v->high_nodes);
            exit(1);
        }
    }
}

static uint64_t exercise(ft_index *idx)
{
    uint64_t wrong = 0;
    check_ranges(idx);
    ft_index_info info;
    ft_index_info_init(&info);
    FT_PASS(ft_index_info_get(&info, idx));
    for (size_t i = 0; i < nkeys; i++) {
        uint64_t v = 0;
        int rc = ft_index_lookup(&v, idx, keys[i].t, keys[i].len);
        wrong += rc != FT_OK || v != keys[i].value;
    }
    uint32_t miss[3] = {0x7fffffffu, 1u, 2u};
    uint64_t v;
    (void)ft_index_lookup(&v, idx, miss, 3);
    uint64_t seen = 0, n = 0;
    (void)ft_index_prefix(&seen, idx, NULL, 0, 0, count_key, &n);
    for (size_t i = 0; i < nkeys; i += nkeys / 16 + 1) {
        n = 0;
        (void)ft_index_prefix(&seen, idx, keys[i].t, 1, 0, count_key, &n);
        (void)ft_index_prefix(&seen, idx, keys[i].t, keys[i].len, 5,
                              count_key, &n);
    }
    ft_engine_opts o;
    ft_engine_opts_init(&o);
    o.kind = FT_ENGINE_CPU;
    o.threads = 1;
    ft_engine *eng;
    char err[256];
    FT_PASS(ft_engine_open(&eng, idx, &o, err, sizeof err));
    ft_result res;
    FT_PASS(ft_result_alloc(&res, 64, SU_MAX_LEN));
    for (int i = 0; i < NREQ; i++)
        (void)ft_engine_search(eng, &reqs[i].req, &res);
    ft_result_free(&res);
    ft_engine_close(eng);
    return wrong;
}

/* child opens the file as it is now and fills *o; never returns. */
static void child(outcome *o)
{
    alarm(10);
    ft_log_set_sink(quiet_sink, NULL);
    ft_index *idx;
    char err[256] = "";
    o->verified_rc = ft_index_open(&idx, path, 0, err, sizeof err);
    snprintf(o->vmsg, sizeof o->vmsg, "%s", err);
    if (o->verified_rc == FT_OK)
        ft_index_close(idx);
    err[0] = 0;
    o->unverified_rc = ft_index_open(&idx, path, FT_OPEN_NO_VERIFY, err,
                                     sizeof err);
    if (o->unverified_rc == FT_OK) {
        o->wrong = exercise(idx);
        ft_index_close(idx);
    } else {
        snprintf(o->umsg, sizeof o->umsg, "%s", err);
    }
    o->ok = 1;
    _exit(0);
}

/* run_child forks a child over the file as it is now; a crash or a hang
 * is reported with what and returns 0. */
static int run_child(const char *what, outcome *o)
{
    memset(shared, 0, sizeof *shared);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    FT_CHECK(pid >= 0);
    if (pid == 0)
        child(shared);
    int st;
    FT_CHECK(waitpid(pid, &st, 0) == pid);
    *o = *shared;
    if (WIFSIGNALED(st) || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || !o->ok) {
        int sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
        if (failures++ < 40)
            fprintf(stderr, "%s: %s %d (%s)\n", what,
                    sig ? "killed by signal" : "exit status",
                    sig ? sig : WEXITSTATUS(st),
                    sig == SIGALRM ? "hang" : sig ? strsignal(sig)
                                                  : "check failed");
        return 0;
    }
    return 1;
}

static void fail(const char *what, const outcome *o, const char *why)
{
    if (failures++ < 40)
        fprintf(stderr, "%s: %s (verified rc %d '%s', unverified rc %d "
                "'%s')\n", what, why, o->verified_rc, o->vmsg,
                o->unverified_rc, o->umsg);
}

static void flip_one(uint64_t bit, tally *tl)
{
    int p = part_of(bit >> 3);
    char what[96];
    snprintf(what, sizeof what, "%s: bit %llu of the file (byte %llu)",
             part_name(p), (unsigned long long)bit,
             (unsigned long long)(bit >> 3));
    flip_in_file(bit);
    outcome o;
    int ran = run_child(what, &o);
    restore_in_file(bit);
    tl[p].flips++;
    if (!ran)
        return;
    /* With verification: the exact error of the part. */
    char want[96];
    if (p < NSEC) {
        snprintf(want, sizeof want, "%s: section %s: checksum mismatch", path,
                 ft_section_names[p]);
        if (o.verified_rc != FT_ECHECKSUM || strcmp(o.vmsg, want) != 0)
            return fail(what, &o, "verified open is not the checksum error");
    } else if (p == PART_GAP) {
        if (o.verified_rc != FT_EFORMAT ||
            !strstr(o.vmsg, "of the gap before it is not zero"))
            return fail(what, &o, "verified open misses the gap");
    } else if (o.verified_rc != FT_EFORMAT && o.verified_rc != FT_EVERSION) {
        return fail(what, &o, "verified open accepts a damaged header");
    }
    /* Without: a named refusal, or an index that answered. */
    if (o.unverified_rc == FT_OK) {
        if (p >= NSEC)
            return fail(what, &o, "unverified open accepts a damaged header");
        tl[p].opened++;
        tl[p].wrong_answers += o.wrong > 0;
    } else if (o.unverified_rc == FT_EFORMAT ||
               (p == PART_HEADER && o.unverified_rc == FT_EVERSION)) {
        if (p < NSEC && !names_a_part(o.umsg))
            return fail(what, &o, "refusal names no section");
        tl[p].refused++;
    } else {
        return fail(what, &o, "unverified open: unexpected error");
    }
}

static int open_now(unsigned flags, char *err, size_t len);

/* header_flips flips every bit of the header and the section table.  The
 * header checksum covers both and is checked before any section is read,
 * so these open in this process, without a child. */
static void header_flips(tally *tl)
{
    char err[256];
    for (uint64_t b = 0; b < (HDR_BYTES + TAB_BYTES) * 8; b += stride) {
        flip_in_file(b);
        for (unsigned f = 0; f <= FT_OPEN_NO_VERIFY; f++) {
            int rc = open_now(f, err, sizeof err);
            if (rc != FT_EFORMAT && rc != FT_EVERSION && failures++ < 40)
                fprintf(stderr, "header: bit %llu: rc %d '%s'\n",
                        (unsigned long long)b, rc, err);
        }
        restore_in_file(b);
        tl[PART_HEADER].flips++;
        tl[PART_HEADER].refused++;
    }
}

static void flip_all(tally *tl)
{
    header_flips(tl);
    uint64_t seed = 99;
    for (int s = 0; s < NSEC; s++) {
        uint64_t lo = tab[s].offset * 8, nbits = tab[s].bytes * 8;
        int small = s == FT_SEC_LOUDS_RANK || s == FT_SEC_LOUDS_SEL0 ||
                    s == FT_SEC_HIGH_RANK || s == FT_SEC_TERM_RANK;
        if (small || nbits <= SAMPLE_BITS + TAIL_BITS) {
            for (uint64_t b = 0; b < nbits; b += stride)
                flip_one(lo + b, tl);
            continue;
        }
        for (uint64_t i = 0; i < SAMPLE_BITS; i++)
            flip_one(lo + ft_test_rand(&seed) % (nbits - TAIL_BITS), tl);
        for (uint64_t b = nbits - TAIL_BITS; b < nbits; b += stride)
            flip_one(lo + b, tl);
    }
    /* One bit of every alignment gap. */
    uint64_t prev = HDR_BYTES + TAB_BYTES;
    for (int s = 0; s < NSEC; s++) {
        for (uint64_t g = prev; g < tab[s].offset; g += 7)
            flip_one(g * 8 + g % 8, tl);
        prev = tab[s].offset + tab[s].bytes;
    }
}

/* multi_flips damages the unchecked sections with 2..32 bits at once (and,
 * one trial in four, anywhere past the table), unverified: no crash, no
 * hang, every range in bounds. */
static void multi_flips(void)
{
    static const int secs[] = {FT_SEC_LOUDS, FT_SEC_LABEL_LO, FT_SEC_HIGH,
                               FT_SEC_LABEL_HI, FT_SEC_FLAGS};
    uint64_t seed = 2024, opened = 0, refused = 0, trials = 300;
    uint8_t *copy = malloc(orig_len);
    for (uint64_t i = 0; i < trials; i++) {
        memcpy(copy, orig, orig_len);
        uint64_t lo, nbits;
        if (i % 4 == 3) {
            lo = (HDR_BYTES + TAB_BYTES) * 8;
            nbits = orig_len * 8 - lo;
        } else {
            int s = secs[ft_test_rand(&seed) % 5];
            lo = tab[s].offset * 8;
            nbits = tab[s].bytes * 8;
        }
        uint64_t k = 2 + ft_test_rand(&seed) % 31;
        for (uint64_t j = 0; j < k; j++) {
            uint64_t b = lo + ft_test_rand(&seed) % nbits;
            copy[b >> 3] ^= (uint8_t)(1u << (b & 7));
        }
        write_file(copy, orig_len);
        char what[64];
        snprintf(what, sizeof what, "multi-bit trial %llu (%llu bits)",
                 (unsigned long long)i, (unsigned long long)k);
        outcome o;
        if (!run_child(what, &o))
            continue;
        if (o.unverified_rc == FT_OK)
            opened++;
        else if (o.unverified_rc == FT_EFORMAT && names_a_part(o.umsg))
            refused++;
        else
            fail(what, &o, "unverified open: unexpected error");
    }
    free(copy);
    write_file(orig, orig_len);
    printf("multi-bit damage: %llu trials, %llu refused, %llu opened and "
           "answered\n", (unsigned long long)trials,
           (unsigned long long)refused, (unsigned long long)opened);
    FT_CHECK_EQ_U64(failures, 0);
}

/* open_now opens the file as it is now, in this process (no crash is
 * possible before the sections are bound), and returns the error. */
static int open_now(unsigned flags, char *err, size_t len)
{
    ft_index *idx;
    err[0] = 0;
    int rc = ft_index_open(&idx, path, flags, err, len);
    if (rc == FT_OK)
        ft_index_close(idx);
    return rc;
}

static void truncations(void)
{
    char err[256];
    uint64_t n = 0;
    for (size_t len = 0; len < orig_len; len++) {
        /* every length of header and table, then a sample and the end */
        if (len > HDR_BYTES + TAB_BYTES + 64 && len % 97 != 0 &&
            len + 64 < orig_len)
            continue;
        write_file(orig, len);
        int want = len < 8 ? FT_EFORMAT : FT_ETRUNC;
        for (unsigned f = 0; f <= FT_OPEN_NO_VERIFY; f++) {
            int rc = open_now(f, err, sizeof err);
            if (rc != want) {
                fprintf(stderr, "truncated to %zu bytes: rc %d '%s'\n", len,
                        rc, err);
                exit(1);
            }
            if (len >= 8 && strstr(err, "truncated: ") == NULL) {
                fprintf(stderr, "truncated to %zu bytes: '%s'\n", len, err);
                exit(1);
            }
        }
        n++;
    }
    /* One byte too many. */
    uint8_t *longer = malloc(orig_len + 1);
    memcpy(longer, orig, orig_len);
    longer[orig_len] = 0;
    write_file(longer, orig_len + 1);
    free(longer);
    char want[256];
    snprintf(want, sizeof want, "%s: trailing bytes: %zu bytes, the header "
             "says %zu", path, orig_len + 1, orig_len);
    FT_FAIL(open_now(FT_OPEN_NO_VERIFY, err, sizeof err), FT_EFORMAT);
    FT_CHECK_STR(err, want);
    printf("truncations: %llu lengths (all %u of header and table), each "
           "refused with and without verification\n",
           (unsigned long long)n, HDR_BYTES + TAB_BYTES);
}

/* patch writes orig with len bytes at off replaced, then opens it. */
static int open_patched(uint64_t off, const void *bytes, size_t len,
                        unsigned flags, char *err, size_t errlen)
{
    uint8_t *copy = malloc(orig_len);
    memcpy(copy, orig, orig_len);
    memcpy(copy + off, bytes, len);
    write_file(copy, orig_len);
    free(copy);
    return open_now(flags, err, errlen);
}

static void header_marks(void)
{
    char err[256], want[256];
    uint32_t version = 3;
    FT_FAIL(open_patched(8, &version, 4, FT_OPEN_NO_VERIFY, err, sizeof err),
            FT_EVERSION);
    snprintf(want, sizeof want, "%s: index format version 3, this build "
             "reads version 2", path);
    FT_CHECK_STR(err, want);
    uint32_t endian = 0x04030201u;
    FT_FAIL(open_patched(12, &endian, 4, 0, err, sizeof err), FT_EFORMAT);
    snprintf(want, sizeof want, "%s: written with another byte order", path);
    FT_CHECK_STR(err, want);
    FT_FAIL(open_patched(0, "FLSHTRIF", 8, 0, err, sizeof err), FT_EFORMAT);
    snprintf(want, sizeof want, "%s: not a FlashTrie index (bad magic)", path);
    FT_CHECK_STR(err, want);
}

/* Structural faults, unverified: the exact messages of the checks. */
static void structure_messages(const ft_index *good)
{
    const ft_trie *t = &good->trie;
    char err[256], want[256];
    /* louds_rank: make entry 2 (the high part of word 1) zero. */
    const uint64_t *lr = t->sec[FT_SEC_LOUDS_RANK];
    uint64_t before1 = ft_rank_block(lr, 1);
    FT_CHECK(before1 > 0);
    uint64_t w1 = lr[1] & 0xffffffu;
    FT_FAIL(open_patched(tab[FT_SEC_LOUDS_RANK].offset + 8, &w1, 8,
                         FT_OPEN_NO_VERIFY, err, sizeof err),
            FT_EFORMAT);
    snprintf(want, sizeof want, "%s: louds_rank: entry 2 decreases (0 after "
             "%llu)", path, (unsigned long long)before1);
    FT_CHECK_STR(err, want);
    /* louds_rank: block 0 claims 513 ones. */
    uint64_t w0 = (lr[0] & ~0xffffffull) | 513u;
    FT_FAIL(open_patched(tab[FT_SEC_LOUDS_RANK].offset, &w0, 8,
                         FT_OPEN_NO_VERIFY, err, sizeof err),
            FT_EFORMAT);
    snprintf(want, sizeof want, "%s: louds_rank: entry 1 is 513 after 0, "
             "block 0 holds at most 512 ones", path);
    FT_CHECK_STR(err, want);
    /* louds_select0: entry 1 far out of range. */
    uint32_t big = 0xffffffffu;
    uint64_t nblocks = (t->view.louds_bits + 511) / 512;
    FT_FAIL(open_patched(tab[FT_SEC_LOUDS_SEL0].offset + 4, &big, 4,
                         FT_OPEN_NO_VERIFY, err, sizeof err),
            FT_EFORMAT);
    snprintf(want, sizeof want, "%s: louds_select0: entry 1 names block "
             "4294967295, the LOUDS bits have %llu", path,
             (unsigned long long)nblocks);
    FT_CHECK_STR(err, want);
    /* terminal_rank: the last entry one short. */
    const uint64_t *tr = t->sec[FT_SEC_TERM_RANK];
    uint64_t ne = 2 * t->view.n_nodes / 512 + 2, li = (ne - 1) >> 1;
    uint64_t wl = tr[li] - (((ne - 1) & 1) ? 1u : (1ull << 24));
    FT_FAIL(open_patched(tab[FT_SEC_TERM_RANK].offset + li * 8, &wl, 8,
                         FT_OPEN_NO_VERIFY, err, sizeof err),
            FT_EFORMAT);
    snprintf(want, sizeof want, "%s: terminal_rank: last entry %llu counts "
             "%llu ones, the header implies %llu", path,
             (unsigned long long)(ne - 1),
             (unsigned long long)(t->n_keys - 1),
             (unsigned long long)t->n_keys);
    FT_CHECK_STR(err, want);
    /* The LOUDS spare block: one bit set past the last. */
    uint64_t lw = fti_bits_words(t->view.louds_bits) - 1;
    uint64_t one = 1ull << 5;
    FT_FAIL(open_patched(tab[FT_SEC_LOUDS].offset + lw * 8, &one, 8,
                         FT_OPEN_NO_VERIFY, err, sizeof err),
            FT_EFORMAT);
    snprintf(want, sizeof want, "%s: louds: bit %llu is set, past the last "
             "of %llu bits", path, (unsigned long long)(lw * 64 + 5),
             (unsigned long long)t->view.louds_bits);
    FT_CHECK_STR(err, want);
    /* With verification the checksum speaks first. */
    FT_FAIL(open_patched(tab[FT_SEC_LOUDS].offset + lw * 8, &one, 8, 0, err,
                         sizeof err),
            FT_ECHECKSUM);
    snprintf(want, sizeof want, "%s: section louds: checksum mismatch", path);
    FT_CHECK_STR(err, want);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--stride") == 0)
        stride = strtoull(argv[2], NULL, 10);
    FT_CHECK(stride >= 1 && (argc == 1 || argc == 3));
    char pbuf[64];
    snprintf(pbuf, sizeof pbuf, "/tmp/ft_fault_%d.fti", (int)getpid());
    path = pbuf;
    uint64_t s = 7;
    su_lib_params lp = {4, 3000, 6};
    uint32_t V = 200; /* tokens below 200000: two thirds need high bits */
    keys = su_rand_keys(&s, &lp, V);
    ft_index *idx;
    nkeys = su_build(keys, lp.nkeys, path, &idx);
    const ft_trie *t = &idx->trie;
    FT_CHECK(t->high_nodes > 0 && t->view.n_nodes > 8 * 512);
    for (int i = 0; i < NREQ; i++)
        su_make_request(&reqs[i], &s, keys, nkeys, &lp, V, 5, 24, 16);

    FILE *f = fopen(path, "rb");
    FT_CHECK(f != NULL);
    struct stat st;
    FT_CHECK(fstat(fileno(f), &st) == 0);
    orig_len = (size_t)st.st_size;
    orig = malloc(orig_len);
    FT_CHECK(fread(orig, 1, orig_len, f) == orig_len);
    fclose(f);
    memcpy(tab, orig + HDR_BYTES, sizeof tab);
    printf("index: %zu keys, %llu nodes (%llu high), %zu bytes\n", nkeys,
           (unsigned long long)t->view.n_nodes,
           (unsigned long long)t->high_nodes, orig_len);

    /* The intact file answers everything right (the harness is sound). */
    shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    FT_CHECK(shared != MAP_FAILED);
    outcome o;
    FT_CHECK(run_child("intact file", &o));
    FT_CHECK_EQ_U64(o.verified_rc, FT_OK);
    FT_CHECK_EQ_U64(o.unverified_rc, FT_OK);
    FT_CHECK_EQ_U64(o.wrong, 0);

    tally tl[NPART];
    memset(tl, 0, sizeof tl);
    flip_all(tl);
    printf("%-14s %7s %8s %7s %7s\n", "part", "flips", "refused", "opened",
           "wrong");
    uint64_t total = 0;
    for (int p = 0; p < NPART; p++) {
        printf("%-14s %7llu %8llu %7llu %7llu\n", part_name(p),
               (unsigned long long)tl[p].flips,
               (unsigned long long)tl[p].refused,
               (unsigned long long)tl[p].opened,
               (unsigned long long)tl[p].wrong_answers);
        total += tl[p].flips;
    }
    printf("flips: %llu, failures: %llu\n", (unsigned long long)total,
           (unsigned long long)failures);
    FT_CHECK_EQ_U64(failures, 0);

    multi_flips();
    truncations();
    header_marks();
    structure_messages(idx);

    ft_index_close(idx);
    for (int i = 0; i < NREQ; i++) {
        free(reqs[i].tok);
        free(reqs[i].lp);
    }
    free(keys);
    free(orig);
    unlink(path);
    printf("ok\n");
    return 0;
}
