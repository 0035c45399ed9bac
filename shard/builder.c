/*
 * builder.c - ft_build: keys file in, index file out (docs/specification.md
 * section 2).
 *
 * The pipeline, per batch of input that fits the memory budget:
 *
 *  1. read a large block (text: cut after its last newline; .ftk: cut at a
 *     record boundary, the rest carried to the next block);
 *  2. parse: text blocks are split at newlines into one piece per thread,
 *     each parsed into its own chunk (one token pool plus fixed-size
 *     records, so there is no allocation per key) with piece-local line
 *     numbers, which step 3 shifts once the line counts of the earlier
 *     pieces are known;
 *  3. sort each chunk in its own thread (introsort on a record whose first
 *     two tokens are cached in one u64, so most comparisons never touch the
 *     token pool; ties are broken by line so the first occurrence wins);
 *  4. when the chunks held exceed the budget, k-way merge them (dropping
 *     duplicates) into a sorted run file in tmp_dir.
 *
 * At the end, without runs, the key space is cut into one range of first
 * tokens per thread; each thread merges its slice of every chunk into its
 * own ft_tb, and the builders are concatenated with ft_tb_append (legal
 * because the ranges start under different root children).  With runs,
 * the runs are merged (in passes of at most FANIN) into one ft_tb.  Either
 * way the trie, and so the file, depends only on the set of distinct keys
 * and their first values, never on threads or memory.
 *
 * ft_builder takes keys one call at a time into the same chunks (a batch
 * of one chunk per thread is sorted once it holds about one read block)
 * and ends like ft_build.  Nothing here prints: progress and the phase
 * profile go to the caller's callback (or the logger).
 */
#define _GNU_SOURCE /* memrchr */
#include "flashtrie/internal/cores.h"
#include "trie.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#define BK_MAGIC "FTKEYSV1"
#define BK_FANIN 64            /* runs merged at once */
#define BK_MIN_BLOCK (64u << 10)
#define BK_MAX_BLOCK (256u << 20)
#define BK_PROGRESS_S 2.0

/* bk_rec is one parsed key.  offlen packs the pool offset (bits 9..63), a
 * flag saying the value is the default line number (bit 8, so the shift in
 * step 3 moves it too) and the length (bits 0..7; 255 is the hard limit). */
typedef struct bk_rec {
    uint64_t k01;    /* tok0 << 32 | tok1 (0 when the key has one token) */
    uint64_t offlen;
    uint64_t line;   /* 0-based line (record) number */
    uint64_t value;
} bk_rec;

#define REC_LEN(r) ((uint32_t)((r)->offlen & 0xffu))
#define REC_OFF(r) ((r)->offlen >> 9)
#define REC_DEFAULTED 256u

typedef struct bk_chunk {
    fti_vec recs; /* bk_rec */
    fti_vec pool; /* u32 tokens */
} bk_chunk;

/* A parse job covers one piece of a text block, or one share of a binary
 * block (already parsed by the reader; the job then only sorts). */
typedef struct bk_job {
    const struct bk_build *b;
    const char *p, *end; /* text piece; every line ends with '\n' */
    bk_chunk *chunk;
    uint64_t base;       /* added to every line number in step 3 */
    uint64_t lines;
    uint64_t keys;
    uint64_t skipped;
    int rc;
    uint64_t err_line;   /* piece-local, 0-based */
    char reason[256];
} bk_job;

typedef struct bk_build {
    const ft_build_opts *o; /* the caller's options, defaults filled in */
    const char *name;    /* input name in messages */
    const char *output;  /* index file */
    uint32_t maxlen;
    int threads;
    int fd;
    int binary, has_values;
    char *buf;
    size_t len, cap;
    char *nbuf;           /* the block the reader thread fills meanwhile */
    size_t ncap;
    int eof;
    uint64_t bytes_read;
    /* binary reader state */
    uint64_t skip_bytes;  /* rest of an oversized record being skipped */
    /* chunks held in memory */
    bk_chunk *chunks;
    size_t nchunks, capchunks;
    uint64_t chunk_bytes;
    uint64_t budget;      /* spill when chunk_bytes exceeds it */
    /* runs on disk */
    char **runs;
    size_t nruns, capruns, runs_made;
    char *tmp_dir;
    ft_build_stats *st;
    double t0, last_progress;
    /* opts.profile or a progress callback: wall seconds per phase,
     * reported at the end, so a run on a big host shows what does not
     * scale. */
    int profile;
    double prof[FT_PROF_COUNT];
    double t_read, t_parse, t_sort, t_spill, t_merge, t_part_min, t_part_max;
    char *errbuf;
    size_t errlen;
} bk_build;

/* ---- threads ---------------------------------------------------------- */

typedef void *(*bk_fn)(void *);

/* run_jobs runs fn over n jobs of size esz, one thread each (inline when
 * there is only one, which also keeps small builds free of thread costs). */
static int run_jobs(bk_fn fn, void *jobs, size_t esz, int n)
{
    if (n == 1) {
        fn(jobs);
        return FT_OK;
    }
    pthread_t th[n];
    int ok[n];
    for (int i = 0; i < n; i++) {
        ok[i] = pthread_create(&th[i], NULL, fn,
                               (char *)jobs + (size_t)i * esz) == 0;
        /* Run here what could not get a thread, so results stay whole. */
        if (!ok[i])
            fn((char *)jobs + (size_t)i * esz);
    }
    for (int i = 0; i < n; i++)
        if (ok[i])
            pthread_join(th[i], NULL);
    return FT_OK;
}

/* ---- comparing keys ---------------------------------------------------- */

/* key_cmp orders two keys whose first two tokens (k01) are equal:
 * lexicographic from the second token on, a prefix before its extensions. */
static inline int key_cmp_tail(const uint32_t *a, uint32_t la,
                               const uint32_t *b, uint32_t lb)
{
    uint32_t n = la < lb ? la : lb;
    for (uint32_t i = 1; i < n; i++)
        if (a[i] != b[i])
            return a[i] < b[i] ? -1 : 1;
    return la < lb ? -1 : la > lb;
}

static inline int rec_less(const bk_rec *x, const bk_rec *y,
                           const uint32_t *pool)
{
    if (x->k01 != y->k01)
        return x->k01 < y->k01;
    int c = key_cmp_tail(pool + REC_OFF(x), REC_LEN(x), pool + REC_OFF(y),
                         REC_LEN(y));
    if (c)
        return c < 0;
    return x->line < y->line;
}

static void rec_swap(bk_rec *a, bk_rec *b)
{
    bk_rec t = *a;
    *a = *b;
    *b = t;
}

static void rec_heapsort(bk_rec *a, size_t n, const uint32_t *pool)
{
    for (size_t k = n / 2; k-- > 0;) {
        for (size_t i = k;;) {
            size_t c = 2 * i + 1;
            if (c >= n)
                break;
            if (c + 1 < n && rec_less(&a[c], &a[c + 1], pool))
                c++;
            if (!rec_less(&a[i], &a[c], pool))
                break;
            rec_swap(&a[i], &a[c]);
            i = c;
        }
    }
    for (size_t m = n; m-- > 1;) {
        rec_swap(&a[0], &a[m]);
        for (size_t i = 0;;) {
            size_t c = 2 * i + 1;
            if (c >= m)
                break;
            if (c + 1 < m && rec_less(&a[c], &a[c + 1], pool))
                c++;
            if (!rec_less(&a[i], &a[c], pool))
                break;
            rec_swap(&a[i], &a[c]);
            i = c;
        }
    }
}

/* rec_sort is an introsort: quicksort with a median of three, insertion
 * sort for short ranges, heapsort when the recursion gets too deep.  All
 * records differ (line numbers are unique), so there are no equal runs. */
static void rec_sort(bk_rec *a, size_t n, const uint32_t *pool, int depth)
{
    while (n > 16) {
        if (depth-- == 0) {
            rec_heapsort(a, n, pool);
            return;
        }
        bk_rec *m = a + n / 2, *l = a + n - 1;
        if (rec_less(m, a, pool))
            rec_swap(m, a);
        if (rec_less(l, m, pool)) {
            rec_swap(l, m);
            if (rec_less(m, a, pool))
                rec_swap(m, a);
        }
        bk_rec piv = *m;
        size_t i = 0, j = n - 1;
        for (;;) {
            while (rec_less(&a[i], &piv, pool))
                i++;
            while (rec_less(&piv, &a[j], pool))
                j--;
            if (i >= j)
                break;
            rec_swap(&a[i], &a[j]);
            i++;
            j--;
        }
        /* a[0..j] <= piv <= a[j+1..n-1]; recurse on the smaller side. */
        size_t nl = j + 1, nr = n - j - 1;
        if (nl < nr) {
            rec_sort(a, nl, pool, depth);
            a += nl;
            n = nr;
        } else {
            rec_sort(a + nl, nr, pool, depth);
            n = nl;
        }
    }
    for (size_t i = 1; i < n; i++) {
        bk_rec v = a[i];
        size_t j = i;
        while (j > 0 && rec_less(&v, &a[j - 1], pool)) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = v;
    }
}

/* ---- text parsing ------------------------------------------------------ */

static void char_desc(char *out, size_t n, unsigned char c)
{
    if (c == '\t')
        snprintf(out, n, "'\\t'");
    else if (c == '\r')
        snprintf(out, n, "'\\r'");
    else if (c >= 0x20 && c < 0x7f)
        snprintf(out, n, "'%c'", c);
    else
        snprintf(out, n, "'\\x%02x'", c);
}

/* digits_desc copies a run of digits for a message, shortened if huge. */
static void digits_desc(char *out, size_t n, const char *p)
{
    size_t k = 0;
    while ((unsigned)(p[k] - '0') <= 9)
        k++;
    if (k > 40)
        snprintf(out, n, "%.40s... (%zu digits)", p, k);
    else
        snprintf(out, n, "%.*s", (int)k, p);
}

/* parse_piece parses the lines of [p, end), every one ending in '\n'.
 * It stops at the first bad line unless skip_invalid. */
static void *parse_piece(void *arg)
{
    bk_job *j = arg;
    const bk_build *b = j->b;
    const uint32_t maxlen = b->maxlen;
    const int skip = b->o->skip_invalid;
    const char *p = j->p, *end = j->end;
    bk_chunk *ch = j->chunk;
    uint64_t line = 0;
    char what[96], cd[16];
    /* A rough first guess of the sizes (about 6 bytes per token and 4
     * tokens per key in typical libraries) saves most reallocations. */
    size_t guess = (size_t)(end - p) / 24 + 16;
    if (fti_vec_reserve(&ch->recs, sizeof(bk_rec), guess) ||
        fti_vec_reserve(&ch->pool, sizeof(uint32_t), guess * 4 + maxlen + 1))
        goto nomem;
    while (p < end) {
        const char *ls = p;
        if (*p == '\n' || (*p == '\r' && p[1] == '\n')) {
            p += *p == '\r' ? 2 : 1;
            line++;
            continue;
        }
        if (*p == '#') {
            p = memchr(p, '\n', (size_t)(end - p));
            p++;
            line++;
            continue;
        }
        if (ch->pool.cap - ch->pool.len < maxlen + 1 &&
            fti_vec_reserve(&ch->pool, sizeof(uint32_t), maxlen + 1))
            goto nomem;
        if (ch->recs.len == ch->recs.cap &&
            fti_vec_reserve(&ch->recs, sizeof(bk_rec), 1))
            goto nomem;
        uint32_t *out = (uint32_t *)ch->pool.data + ch->pool.len;
        uint32_t n = 0;
        int has_val = 0;
        uint64_t val = 0;
        unsigned c;
        for (;;) {
            while (*p == ' ')
                p++;
            if (*p == '\n' || (*p == '\r' && p[1] == '\n') || *p == '\t')
                break;
            c = (unsigned)(unsigned char)*p - '0';
            if (c > 9) {
                char_desc(cd, sizeof cd, (unsigned char)*p);
                snprintf(j->reason, sizeof j->reason,
                         "unexpected character %s in key (column %zu)", cd,
                         (size_t)(p - ls) + 1);
                goto bad;
            }
            const char *ds = p;
            uint64_t v = c;
            p++;
            while ((c = (unsigned)(unsigned char)*p - '0') <= 9) {
                v = v * 10 + c;
                p++;
                if (v > 0xffffffffull) {
                    digits_desc(what, sizeof what, ds);
                    snprintf(j->reason, sizeof j->reason,
                             "token %s out of range (max 4294967295)", what);
                    goto bad;
                }
            }
            if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
                char_desc(cd, sizeof cd, (unsigned char)*p);
                snprintf(j->reason, sizeof j->reason,
                         "unexpected character %s in key (column %zu)", cd,
                         (size_t)(p - ls) + 1);
                goto bad;
            }
            if (n < maxlen)
                out[n] = (uint32_t)v;
            n++;
        }
        if (*p == '\t') {
            if (n == 0) {
                snprintf(j->reason, sizeof j->reason, "empty key");
                goto bad;
            }
            p++;
            while (*p == ' ')
                p++;
            c = (unsigned)(unsigned char)*p - '0';
            if (c > 9) {
                if (*p == '\n' || (*p == '\r' && p[1] == '\n')) {
                    snprintf(j->reason, sizeof j->reason,
                             "missing value after TAB");
                } else {
                    char_desc(cd, sizeof cd, (unsigned char)*p);
                    snprintf(j->reason, sizeof j->reason,
                             "unexpected character %s in value (column %zu)",
                             cd, (size_t)(p - ls) + 1);
                }
                goto bad;
            }
            const char *ds = p;
            while ((c = (unsigned)(unsigned char)*p - '0') <= 9) {
                if (val > (UINT64_MAX - c) / 10) {
                    digits_desc(what, sizeof what, ds);
                    snprintf(j->reason, sizeof j->reason,
                             "value %s out of range (max "
                             "18446744073709551615)", what);
                    goto bad;
                }
                val = val * 10 + c;
                p++;
            }
            has_val = 1;
            while (*p == ' ')
                p++;
            if (*p != '\n' && !(*p == '\r' && p[1] == '\n')) {
                char_desc(cd, sizeof cd, (unsigned char)*p);
                snprintf(j->reason, sizeof j->reason,
                         "unexpected character %s in value (column %zu)", cd,
                         (size_t)(p - ls) + 1);
                goto bad;
            }
        }
        if (n == 0) { /* only spaces: an empty line */
            p = memchr(p, '\n', (size_t)(end - p)) + 1;
            line++;
            continue;
        }
        if (n > maxlen) {
            snprintf(j->reason, sizeof j->reason,
                     "key of %u tokens is longer than max_key_len %u", n,
                     maxlen);
            goto bad;
        }
        {
            bk_rec *r = (bk_rec *)ch->recs.data + ch->recs.len++;
            r->k01 = (uint64_t)out[0] << 32 | (n > 1 ? out[1] : 0);
            r->offlen = (uint64_t)ch->pool.len << 9 |
                        (has_val ? 0 : REC_DEFAULTED) | n;
            r->line = line;
            r->value = has_val ? val : line;
            ch->pool.len += n;
            j->keys++;
        }
        p = memchr(p, '\n', (size_t)(end - p)) + 1;
        line++;
        continue;
    bad:
        if (!skip) {
            j->rc = FT_EPARSE;
            j->err_line = line;
            j->lines = line + 1;
            return NULL;
        }
        j->skipped++;
        p = memchr(p, '\n', (size_t)(end - p)) + 1;
        line++;
    }
    j->lines = line;
    return NULL;
nomem:
    j->rc = FT_ENOMEM;
    return NULL;
}

static int sort_depth(size_t n)
{
    int depth = 2;
    for (size_t m = n; m > 1; m >>= 1)
        depth += 2;
    return depth;
}

/* rec_radix_sort sorts by k01 with an LSD radix sort of 11-bit digits
 * (skipping digits that are equal in every record, such as the zero high
 * bits of typical tokens), which moves each record a few times instead of
 * log2(n) times; only runs of equal k01 then need the full comparator.
 * It falls back to the introsort when the scratch copy cannot be had. */
static void rec_radix_sort(bk_rec *a, size_t n, const uint32_t *pool)
{
    enum { BITS = 11, NB = 1 << BITS, ND = 6 };
    bk_rec *tmp = n >= 1024 ? malloc(n * sizeof *tmp) : NULL;
    size_t(*hist)[NB] = tmp ? calloc(ND, sizeof *hist) : NULL;
    if (hist == NULL) {
        free(tmp);
        rec_sort(a, n, pool, sort_depth(n));
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t k = a[i].k01;
        for (int d = 0; d < ND; d++)
            hist[d][(k >> (d * BITS)) & (NB - 1)]++;
    }
    bk_rec *src = a, *dst = tmp;
    for (int d = 0; d < ND; d++) {
        size_t *h = hist[d], sum = 0;
        if (h[(a[0].k01 >> (d * BITS)) & (NB - 1)] == n)
            continue; /* every record has this digit */
        for (int v = 0; v < NB; v++) {
            size_t c = h[v];
            h[v] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++)
            dst[h[(src[i].k01 >> (d * BITS)) & (NB - 1)]++] = src[i];
        bk_rec *t = src;
        src = dst;
        dst = t;
    }
    if (src != a)
        memcpy(a, src, n * sizeof *a);
    free(hist);
    free(tmp);
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && a[j].k01 == a[i].k01)
            j++;
        if (j - i > 1)
            rec_sort(a + i, j - i, pool, sort_depth(j - i));
        i = j;
    }
}

/* fix_and_sort shifts a piece's line numbers by its base and sorts it. */
static void *fix_and_sort(void *arg)
{
    bk_job *j = arg;
    bk_chunk *ch = j->chunk;
    bk_rec *r = ch->recs.data;
    size_t n = ch->recs.len;
    if (j->base) {
        for (size_t i = 0; i < n; i++) {
            r[i].line += j->base;
            if (r[i].offlen & REC_DEFAULTED)
                r[i].value += j->base;
        }
    }
    /* Keys handed to ft_builder often come sorted already (generated
     * libraries, exports of another index): one pass proves it. */
    size_t i = 1;
    while (i < n && rec_less(&r[i - 1], &r[i], ch->pool.data))
        i++;
    if (i < n)
        rec_radix_sort(r, n, ch->pool.data);
    return NULL;
}

/* ---- merging ----------------------------------------------------------- */

/* A merge cursor walks a sorted slice of a chunk or a run file. */
typedef struct bk_cur {
    uint64_t k01;
    const uint32_t *toks;
    uint32_t len;
    uint64_t line, value;
    const bk_rec *r, *rend;
    const uint32_t *pool;
    FILE *f;
    uint32_t buf[FT_MAX_KEY_LEN_LIMIT];
} bk_cur;

/* cur_next loads the next key: 1 when there is one, 0 at the end,
 * FT_EIO (negated) when a run file cannot be read. */
static int cur_next(bk_cur *c)
{
    if (c->f == NULL) {
        if (c->r == c->rend)
            return 0;
        /* Sorted records point all over the pool: fetch the tokens of a
         * record a few steps ahead so they arrive before they are read. */
        if (c->rend - c->r > 8)
            __builtin_prefetch(c->pool + REC_OFF(c->r + 8));
        c->k01 = c->r->k01;
        c->toks = c->pool + REC_OFF(c->r);
        c->len = REC_LEN(c->r);
        c->line = c->r->line;
        c->value = c->r->value;
        c->r++;
        return 1;
    }
    unsigned char h[20];
    size_t got = fread(h, 1, sizeof h, c->f);
    if (got == 0 && feof(c->f))
        return 0;
    if (got != sizeof h)
        return -FT_EIO;
    uint32_t len;
    memcpy(&len, h, 4);
    memcpy(&c->line, h + 4, 8);
    memcpy(&c->value, h + 12, 8);
    if (len == 0 || len > FT_MAX_KEY_LEN_LIMIT ||
        fread(c->buf, 4, len, c->f) != len)
        return -FT_EIO;
    c->len = len;
    c->toks = c->buf;
    c->k01 = (uint64_t)c->buf[0] << 32 | (len > 1 ? c->buf[1] : 0);
    return 1;
}

static inline int cur_less(const bk_cur *x, const bk_cur *y)
{
    if (x->k01 != y->k01)
        return x->k01 < y->k01;
    int c = key_cmp_tail(x->toks, x->len, y->toks, y->len);
    if (c)
        return c < 0;
    return x->line < y->line;
}

static void heap_down(bk_cur **h, size_t n, size_t i)
{
    bk_cur *v = h[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && cur_less(h[c + 1], h[c]))
            c++;
        if (!cur_less(h[c], v))
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = v;
}

typedef int (*bk_emit)(void *arg, const uint32_t *toks, uint32_t len,
                       uint64_t line, uint64_t value);

/* merge emits the keys of all cursors in order, each distinct key once
 * with the value of its smallest line.  *n_out counts emitted keys. */
static int merge(bk_cur **h, size_t n, bk_emit emit, void *arg)
{
    size_t live = 0;
    for (size_t i = 0; i < n; i++) {
        int r = cur_next(h[i]);
        if (r < 0)
            return -r;
        if (r)
            h[live++] = h[i];
    }
    for (size_t i = live / 2; i-- > 0;)
        heap_down(h, live, i);
    uint32_t last[FT_MAX_KEY_LEN_LIMIT];
    uint32_t last_len = 0;
    while (live > 0) {
        bk_cur *c = h[0];
        if (c->len != last_len ||
            memcmp(c->toks, last, c->len * sizeof(uint32_t)) != 0) {
            int rc = emit(arg, c->toks, c->len, c->line, c->value);
            if (rc)
                return rc;
            memcpy(last, c->toks, c->len * sizeof(uint32_t));
            last_len = c->len;
        }
        int r = cur_next(c);
        if (r < 0)
            return -r;
        if (r == 0)
            h[0] = h[--live];
        if (live > 0)
            heap_down(h, live, 0);
    }
    return FT_OK;
}

static void progress(bk_build *b, int force);

/* bk_sink feeds the trie builder; the one that reports (the only thread
 * merging, or the first of the parallel ones) prints progress on the way. */
typedef struct bk_sink {
    bk_build *b;     /* NULL: do not report */
    ft_tb *tb;
} bk_sink;

static int emit_tb(void *arg, const uint32_t *toks, uint32_t len,
                   uint64_t line, uint64_t value)
{
    bk_sink *s = arg;
    (void)line;
    if (s->b && (ft_tb_keys(s->tb) & 0xfffff) == 0xfffff)
        progress(s->b, 0);
    return ft_tb_add(s->tb, toks, len, value);
}

static int emit_run(void *arg, const uint32_t *toks, uint32_t len,
                    uint64_t line, uint64_t value)
{
    unsigned char h[20];
    memcpy(h, &len, 4);
    memcpy(h + 4, &line, 8);
    memcpy(h + 12, &value, 8);
    if (fwrite(h, 1, sizeof h, arg) != sizeof h ||
        fwrite(toks, 4, len, arg) != len)
        return FT_EIO;
    return FT_OK;
}

/* ---- runs on disk ------------------------------------------------------ */

/* ---- Leftovers of killed builds ---------------------------------------- */

/* A build writes two kinds of temporary files, each named with its pid:
 * sorted runs BK_RUN_PREFIX "<pid>-XXXXXX" in tmp_dir, and the index (or
 * manifest, or shard) being written, OUTPUT.tmp.<pid>, OUTPUT.whole.<pid>
 * and OUTPUT.shard-....new.<pid> (a sharded build), beside the output.  A
 * build that exits removes its own; one killed (SIGKILL, power loss)
 * cannot, so the next build removes those whose process is gone.  A pid that is alive again (reused) keeps its
 * files: the clean errs on the side of keeping. */
#define BK_RUN_PREFIX ".flashtrie-run-"

/* bk_pid_gone is non-zero when no process has this pid (other users'
 * processes count as alive: kill says EPERM for them). */
static int bk_pid_gone(long pid)
{
    if (pid <= 0 || pid == (long)getpid() || pid > 0x7fffffffL)
        return 0;
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* bk_digits parses s[0..n) as a pid: digits only; -1 when it is not. */
static long bk_digits(const char *s, size_t n)
{
    if (n == 0 || n > 10)
        return -1;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

/* bk_run_pid is the pid in a sorted run's name, or -1 if it is not one. */
static long bk_run_pid(const char *name)
{
    size_t pl = sizeof BK_RUN_PREFIX - 1;
    if (strncmp(name, BK_RUN_PREFIX, pl) != 0)
        return -1;
    const char *dash = strchr(name + pl, '-');
    if (dash == NULL || strlen(dash + 1) != 6)
        return -1;
    return bk_digits(name + pl, (size_t)(dash - name - pl));
}

/* bk_out_pid is the pid in a temporary output file's name for output
 * base name `base`: base.tmp.<pid>, or base.whole.<...> and
 * base.shard-<...> (a sharded build's whole index and shards) ending in
 * .tmp.<pid>, .new.<pid> or .whole.<pid>; -1 if name is none of them. */
static long bk_out_pid(const char *name, const char *base)
{
    static const char *const tails[] = {".tmp", ".new", ".whole"};
    size_t bl = strlen(base);
    if (strncmp(name, base, bl) != 0)
        return -1;
    const char *r = name + bl;
    const char *dot = strrchr(r, '.');
    if (dot == NULL)
        return -1;
    long pid = bk_digits(dot + 1, strlen(dot + 1));
    if (pid < 0)
        return -1;
    int tail = 0;
    for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
        size_t tl = strlen(tails[i]);
        if ((size_t)(dot - r) >= tl && strncmp(dot - tl, tails[i], tl) == 0)
            tail = 1;
    }
    if (!tail)
        return -1;
    if (strncmp(r, ".tmp.", 5) == 0)
        return r + 4 == dot ? pid : -1;
    return strncmp(r, ".whole.", 7) == 0 || strncmp(r, ".shard-", 7) == 0
               ? pid : -1;
}

/* bk_clean_dir removes the files of dir whose name gives a dead pid
 * (through run names, or output names for base when base is set). */
static int bk_clean_dir(uint64_t *removed, const char *dir, const char *base,
                        char *errbuf, size_t errlen)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        fti_errf(errbuf, errlen, "%s: cannot read the directory: %s", dir,
                 strerror(errno));
        return FT_EIO;
    }
    int rc = FT_OK;
    struct dirent *e;
    size_t dl = strlen(dir);
    while ((e = readdir(d)) != NULL) {
        long pid = base ? bk_out_pid(e->d_name, base) : bk_run_pid(e->d_name);
        if (pid < 0 || !bk_pid_gone(pid))
            continue;
        size_t n = dl + strlen(e->d_name) + 2;
        char *path = malloc(n);
        if (path == NULL) {
            rc = FT_ENOMEM;
            break;
        }
        snprintf(path, n, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) {
            free(path);
            continue;
        }
        if (unlink(path) == 0) {
            FT_WARN("%s: removed what a killed build (pid %ld) left behind, "
                    "%llu bytes", path, pid, (unsigned long long)sb.st_size);
            ++*removed;
        } else if (errno != ENOENT) {
            fti_errf(errbuf, errlen, "%s: cannot remove: %s", path,
                     strerror(errno));
            rc = FT_EIO;
        }
        free(path);
    }
    closedir(d);
    return rc;
}

int ft_build_clean(uint64_t *removed, const char *output, const char *tmp_dir,
                   char *errbuf, size_t errlen)
{
    uint64_t n = 0;
    if (errbuf && errlen)
        errbuf[0] = 0;
    if (removed)
        *removed = 0;
    FT_RETURN_ERROR_IF(output == NULL && tmp_dir == NULL, FT_EINVAL,
                       "build clean: give an output or a tmp dir");
    char *odir = NULL;
    const char *base = NULL;
    if (output) {
        const char *slash = strrchr(output, '/');
        base = slash ? slash + 1 : output;
        odir = slash ? strndup(output, (size_t)(slash - output) +
                                           (slash == output))
                     : strdup(".");
        FT_RETURN_ERROR_IF(odir == NULL, FT_ENOMEM, "out of memory");
        if (*base == 0) {
            free(odir);
            fti_errf(errbuf, errlen, "%s: the output names a directory",
                     output);
            return FT_EINVAL;
        }
    }
    int rc = FT_OK;
    if (odir)
        rc = bk_clean_dir(&n, odir, base, errbuf, errlen);
    if (rc == FT_OK)
        rc = bk_clean_dir(&n, tmp_dir ? tmp_dir : odir, NULL, errbuf, errlen);
    free(odir);
    if (removed)
        *removed = n;
    return rc;
}

/* bk_clean_stale is the clean at the start of every build: what it cannot
 * read or remove is only a warning, the build goes on. */
static void bk_clean_stale(const char *output, const char *tmp_dir)
{
    char err[512];
    uint64_t n;
    if (ft_build_clean(&n, output, tmp_dir, err, sizeof err) != FT_OK)
        FT_WARN("build: stale temporary files not removed: %s", err);
}

/* new_run creates an empty run file and records its name for removal. */
static int new_run(bk_build *b, FILE **out)
{
    if (b->nruns == b->capruns) {
        size_t cap = b->capruns ? 2 * b->capruns : 16;
        char **p = realloc(b->runs, cap * sizeof *p);
        if (p == NULL)
            return FT_ENOMEM;
        b->runs = p;
        b->capruns = cap;
    }
    size_t n = strlen(b->tmp_dir) + 64;
    char *path = malloc(n);
    if (path == NULL)
        return FT_ENOMEM;
    /* The pid in the name lets a later build (or ft_build_clean) tell the
     * runs of a killed build from those of a live one. */
    snprintf(path, n, "%s/" BK_RUN_PREFIX "%ld-XXXXXX", b->tmp_dir,
             (long)getpid());
    int fd = mkstemp(path);
    if (fd < 0) {
        fti_errf(b->errbuf, b->errlen, "%s: cannot create a sorted run: %s",
                 b->tmp_dir, strerror(errno));
        free(path);
        return FT_EIO;
    }
    FILE *f = fdopen(fd, "wb");
    if (f == NULL) {
        close(fd);
        unlink(path);
        free(path);
        return FT_EIO;
    }
    setvbuf(f, NULL, _IOFBF, 1 << 20);
    b->runs[b->nruns++] = path;
    b->runs_made++;
    *out = f;
    return FT_OK;
}

static int close_run(bk_build *b, FILE *f, int rc)
{
    if (fclose(f) != 0 && rc == FT_OK)
        rc = FT_EIO;
    if (rc == FT_EIO)
        fti_errf(b->errbuf, b->errlen, "%s: cannot write a sorted run: %s",
                 b->tmp_dir, strerror(errno));
    return rc;
}

static void free_chunks(bk_build *b)
{
    for (size_t i = 0; i < b->nchunks; i++) {
        fti_vec_free(&b->chunks[i].recs);
        fti_vec_free(&b->chunks[i].pool);
    }
    b->nchunks = 0;
    b->chunk_bytes = 0;
}

static void chunk_cursor(bk_cur *c, const bk_chunk *ch, size_t lo, size_t hi)
{
    memset(c, 0, offsetof(bk_cur, buf));
    /* An empty chunk has no array at all: NULL + 0 is undefined in C. */
    if (ch->recs.data == NULL)
        return;
    c->r = (const bk_rec *)ch->recs.data + lo;
    c->rend = (const bk_rec *)ch->recs.data + hi;
    c->pool = ch->pool.data;
}

/* spill merges every chunk held into one new run and frees them. */
static int spill(bk_build *b)
{
    if (b->nchunks == 0)
        return FT_OK;
    bk_cur *cs = malloc(b->nchunks * sizeof *cs);
    bk_cur **h = malloc(b->nchunks * sizeof *h);
    FILE *f = NULL;
    int rc = cs && h ? new_run(b, &f) : FT_ENOMEM;
    if (rc == FT_OK) {
        for (size_t i = 0; i < b->nchunks; i++) {
            chunk_cursor(&cs[i], &b->chunks[i], 0, b->chunks[i].recs.len);
            h[i] = &cs[i];
        }
        rc = close_run(b, f, merge(h, b->nchunks, emit_run, f));
    }
    free(cs);
    free(h);
    free_chunks(b);
    return rc;
}

/* merge_runs merges runs [0, n) into emit, then removes them. */
static int merge_runs(bk_build *b, size_t n, bk_emit emit, void *arg)
{
    bk_cur *cs = calloc(n, sizeof *cs);
    bk_cur **h = malloc(n * sizeof *h);
    int rc = cs && h ? FT_OK : FT_ENOMEM;
    for (size_t i = 0; i < n && rc == FT_OK; i++) {
        cs[i].f = fopen(b->runs[i], "rb");
        if (cs[i].f == NULL) {
            rc = FT_EIO;
            break;
        }
        setvbuf(cs[i].f, NULL, _IOFBF, 1 << 20);
        h[i] = &cs[i];
    }
    if (rc == FT_OK)
        rc = merge(h, n, emit, arg);
    if (rc == FT_EIO)
        fti_errf(b->errbuf, b->errlen, "%s: cannot read a sorted run",
                 b->tmp_dir);
    for (size_t i = 0; cs && i < n; i++)
        if (cs[i].f)
            fclose(cs[i].f);
    free(cs);
    free(h);
    if (rc == FT_OK) {
        for (size_t i = 0; i < n; i++) {
            unlink(b->runs[i]);
            free(b->runs[i]);
        }
        memmove(b->runs, b->runs + n, (b->nruns - n) * sizeof *b->runs);
        b->nruns -= n;
    }
    return rc;
}

/* ---- the final in-memory build ---------------------------------------- */

typedef struct bk_part {
    bk_build *b;
    uint64_t lo, hi; /* first tokens in [lo, hi) */
    ft_tb *tb;
    int rc;
    double seconds;  /* wall time of this part's merge */
} bk_part;

static size_t lower_tok0(const bk_chunk *ch, uint64_t tok0)
{
    const bk_rec *r = ch->recs.data;
    size_t lo = 0, hi = ch->recs.len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((r[mid].k01 >> 32) < tok0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void *build_part(void *arg)
{
    bk_part *p = arg;
    bk_build *b = p->b;
    double t0 = fti_now();
    bk_cur *cs = malloc((b->nchunks + 1) * sizeof *cs);
    bk_cur **h = malloc((b->nchunks + 1) * sizeof *h);
    p->rc = cs && h ? ft_tb_create(&p->tb) : FT_ENOMEM;
    if (p->rc == FT_OK) {
        for (size_t i = 0; i < b->nchunks; i++) {
            const bk_chunk *ch = &b->chunks[i];
            size_t lo = lower_tok0(ch, p->lo);
            size_t hi = p->hi > 0xffffffffull ? ch->recs.len
                                              : lower_tok0(ch, p->hi);
            chunk_cursor(&cs[i], ch, lo, hi);
            h[i] = &cs[i];
        }
        bk_sink sink = {p->lo == 0 ? b : NULL, p->tb};
        p->rc = merge(h, b->nchunks, emit_tb, &sink);
    }
    free(cs);
    free(h);
    p->seconds = fti_now() - t0;
    return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* build_in_memory cuts the first-token space at sampled quantiles so the
 * threads get similar shares, even under Zipf-skewed first tokens (a very
 * frequent first token simply makes one share larger).  The parts are not
 * joined: ft_tb_finish_parts packs each one straight into place, so no
 * thread waits on copying the streams of the others. */
static int build_in_memory(bk_build *b, ft_tb ***out, int *nout)
{
    int np = b->threads;
    uint64_t total = 0;
    for (size_t i = 0; i < b->nchunks; i++)
        total += b->chunks[i].recs.len;
    if (total < 4096)
        np = 1;
    bk_part *parts = calloc((size_t)np, sizeof *parts);
    uint32_t *samples = NULL;
    size_t ns = 0;
    if (parts == NULL)
        return FT_ENOMEM;
    if (np > 1) {
        samples = malloc(b->nchunks * 256 * sizeof *samples);
        if (samples == NULL) {
            free(parts);
            return FT_ENOMEM;
        }
        for (size_t i = 0; i < b->nchunks; i++) {
            const bk_rec *r = b->chunks[i].recs.data;
            size_t n = b->chunks[i].recs.len;
            for (size_t k = 0; k < 256 && n > 0; k++)
                samples[ns++] = (uint32_t)(r[(n - 1) * k / 255].k01 >> 32);
        }
        qsort(samples, ns, sizeof *samples, cmp_u32);
    }
    uint64_t prev = 0;
    for (int p = 0; p < np; p++) {
        parts[p].b = b;
        parts[p].lo = prev;
        parts[p].hi = p == np - 1 ? 1ull << 32
                                  : (uint64_t)samples[ns * (size_t)(p + 1) /
                                                      (size_t)np];
        if (parts[p].hi < prev)
            parts[p].hi = prev;
        prev = parts[p].hi;
    }
    free(samples);
    double t0 = fti_now();
    int rc = run_jobs(build_part, parts, sizeof *parts, np);
    b->t_merge += fti_now() - t0;
    b->t_part_min = b->t_part_max = parts[0].seconds;
    for (int p = 0; p < np; p++) {
        if (parts[p].seconds < b->t_part_min)
            b->t_part_min = parts[p].seconds;
        if (parts[p].seconds > b->t_part_max)
            b->t_part_max = parts[p].seconds;
    }
    for (int p = 0; p < np && rc == FT_OK; p++)
        rc = parts[p].rc;
    ft_tb **tbs = rc == FT_OK ? malloc((size_t)np * sizeof *tbs) : NULL;
    if (rc == FT_OK && tbs == NULL)
        rc = FT_ENOMEM;
    for (int p = 0; p < np; p++) {
        if (rc == FT_OK)
            tbs[p] = parts[p].tb;
        else
            ft_tb_destroy(parts[p].tb);
    }
    if (rc == FT_OK) {
        *out = tbs;
        *nout = np;
    }
    free(parts);
    return rc;
}

/* ---- reading ----------------------------------------------------------- */

static int fill_block(bk_build *b);

static int fill(bk_build *b)
{
    double t0 = fti_now();
    int rc = fill_block(b);
    b->t_read += fti_now() - t0;
    return rc;
}

static int fill_block(bk_build *b)
{
    while (!b->eof && b->len < b->cap) {
        ssize_t r = read(b->fd, b->buf + b->len, b->cap - b->len);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            fti_errf(b->errbuf, b->errlen, "%s: read failed: %s", b->name,
                     strerror(errno));
            return FT_EIO;
        }
        if (r == 0)
            b->eof = 1;
        b->len += (size_t)r;
        b->bytes_read += (uint64_t)r;
    }
    return FT_OK;
}

static int grow_buf(bk_build *b, size_t cap)
{
    char *p = realloc(b->buf, cap + 1);
    if (p == NULL)
        return FT_ENOMEM;
    b->buf = p;
    b->cap = cap;
    return FT_OK;
}

static int add_chunks(bk_build *b, size_t n)
{
    if (b->nchunks + n <= b->capchunks)
        return FT_OK;
    size_t cap = b->capchunks ? b->capchunks : 16;
    while (cap < b->nchunks + n)
        cap *= 2;
    bk_chunk *p = realloc(b->chunks, cap * sizeof *p);
    if (p == NULL)
        return FT_ENOMEM;
    b->chunks = p;
    b->capchunks = cap;
    return FT_OK;
}

static void progress_fill(const bk_build *b, ft_build_progress *p,
                          ft_build_phase phase, double now)
{
    memset(p, 0, sizeof *p);
    p->struct_size = sizeof *p;
    p->phase = phase;
    p->lines = b->st->lines;
    p->keys_read = b->st->keys_read;
    p->skipped = b->st->skipped;
    p->bytes_read = b->bytes_read;
    p->runs = b->runs_made;
    p->seconds = now - b->t0;
    p->threads = b->threads;
}

/* progress reports the counters through the caller's callback, at most
 * every BK_PROGRESS_S seconds unless forced.  The library never prints. */
static void progress(bk_build *b, int force)
{
    if (b->o->progress == NULL)
        return;
    double now = fti_now();
    if (!force && now - b->last_progress < BK_PROGRESS_S)
        return;
    b->last_progress = now;
    ft_build_progress p;
    progress_fill(b, &p, b->eof ? FT_BUILD_MERGING : FT_BUILD_READING, now);
    b->o->progress(&p, b->o->progress_arg);
}

/* after_batch sorts the new chunks and spills when over the budget. */
static int after_batch(bk_build *b, bk_job *jobs, int n)
{
    double t0 = fti_now();
    int rc = run_jobs(fix_and_sort, jobs, sizeof *jobs, n);
    b->t_sort += fti_now() - t0;
    if (rc)
        return rc;
    for (int i = 0; i < n; i++)
        b->chunk_bytes += jobs[i].chunk->recs.cap * sizeof(bk_rec) +
                          jobs[i].chunk->pool.cap * sizeof(uint32_t);
    b->nchunks += (size_t)n;
    if (b->chunk_bytes > b->budget) {
        t0 = fti_now();
        rc = spill(b);
        b->t_spill += fti_now() - t0;
    }
    progress(b, 0);
    return rc;
}

/* text_batch parses buf[0, n) (whole lines, the last one ending in '\n'). */
static int text_batch(bk_build *b, size_t n)
{
    int T = b->threads;
    if (n < ((size_t)1 << 16))
        T = 1;
    bk_job jobs[T];
    int rc = add_chunks(b, (size_t)T);
    if (rc)
        return rc;
    memset(jobs, 0, sizeof jobs);
    const char *p = b->buf, *end = b->buf + n;
    for (int i = 0; i < T; i++) {
        const char *q = i == T - 1 ? end : b->buf + n / (size_t)T * (size_t)(i + 1);
        if (q < p)
            q = p;
        if (q < end) {
            q = memchr(q, '\n', (size_t)(end - q));
            q = q ? q + 1 : end;
        }
        jobs[i].b = b;
        jobs[i].p = p;
        jobs[i].end = q;
        jobs[i].chunk = &b->chunks[b->nchunks + (size_t)i];
        memset(jobs[i].chunk, 0, sizeof *jobs[i].chunk);
        p = q;
    }
    double t0 = fti_now();
    rc = run_jobs(parse_piece, jobs, sizeof *jobs, T);
    b->t_parse += fti_now() - t0;
    uint64_t base = b->st->lines;
    for (int i = 0; i < T && rc == FT_OK; i++) {
        if (jobs[i].rc == FT_EPARSE) {
            fti_errf(b->errbuf, b->errlen, "%s:%llu: %s", b->name,
                     (unsigned long long)(base + jobs[i].err_line + 1),
                     jobs[i].reason);
            rc = FT_EPARSE;
        } else if (jobs[i].rc) {
            rc = jobs[i].rc;
        }
        jobs[i].base = base;
        base += jobs[i].lines;
        b->st->keys_read += jobs[i].keys;
        b->st->skipped += jobs[i].skipped;
    }
    if (rc) {
        for (int i = 0; i < T; i++) {
            fti_vec_free(&jobs[i].chunk->recs);
            fti_vec_free(&jobs[i].chunk->pool);
        }
        return rc;
    }
    b->st->lines = base;
    return after_batch(b, jobs, T);
}

/* bk_reader fills the next text block in its own thread while the current
 * one is parsed and sorted, so reading is off the critical path. */
typedef struct bk_reader {
    int fd;
    char *buf;
    size_t len, cap;
    int eof;
    int err;        /* errno of a failed read, 0 if none */
    uint64_t bytes;
} bk_reader;

static void *reader_main(void *arg)
{
    bk_reader *r = arg;
    while (!r->eof && r->len < r->cap) {
        ssize_t k = read(r->fd, r->buf + r->len, r->cap - r->len);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            r->err = errno;
            break;
        }
        if (k == 0)
            r->eof = 1;
        r->len += (size_t)k;
        r->bytes += (uint64_t)k;
    }
    return NULL;
}

/* text_batch_ahead parses buf[0, n) while a reader thread moves the rest
 * of the block to the spare buffer and fills it; then the buffers swap.
 * *done stays 0 when no thread or spare buffer could be had: the caller
 * then reads serially. */
static int text_batch_ahead(bk_build *b, size_t n, int *done)
{
    *done = 0;
    if (b->ncap != b->cap) {
        char *p = realloc(b->nbuf, b->cap + 1);
        if (p == NULL)
            return FT_OK; /* go serial */
        b->nbuf = p;
        b->ncap = b->cap;
    }
    bk_reader r = {b->fd, b->nbuf, b->len - n, b->cap, 0, 0, 0};
    memcpy(b->nbuf, b->buf + n, b->len - n);
    pthread_t th;
    if (pthread_create(&th, NULL, reader_main, &r) != 0)
        return FT_OK; /* go serial */
    int rc = text_batch(b, n);
    double t0 = fti_now();
    pthread_join(th, NULL);
    b->t_read += fti_now() - t0;
    char *t = b->buf;
    b->buf = b->nbuf;
    b->nbuf = t;
    b->len = r.len;
    b->eof = r.eof;
    b->bytes_read += r.bytes;
    if (rc == FT_OK && r.err) {
        fti_errf(b->errbuf, b->errlen, "%s: read failed: %s", b->name,
                 strerror(r.err));
        rc = FT_EIO;
    }
    *done = 1;
    return rc;
}

static int read_text(bk_build *b)
{
    for (;;) {
        int rc = fill(b);
        if (rc)
            return rc;
        size_t n = b->len;
        if (!b->eof) {
            const char *nl = memrchr(b->buf, '\n', b->len);
            if (nl == NULL) { /* one line longer than the block */
                if ((rc = grow_buf(b, b->cap * 2)))
                    return rc;
                continue;
            }
            n = (size_t)(nl - b->buf) + 1;
        } else if (n > 0 && b->buf[n - 1] != '\n') {
            b->buf[n++] = '\n'; /* the spare byte: close the last line */
            b->len = n;
        }
        if (n > 0 && !b->eof && b->threads > 1) {
            int done;
            if ((rc = text_batch_ahead(b, n, &done)))
                return rc;
            if (done)
                continue;
        }
        if (n > 0 && (rc = text_batch(b, n)))
            return rc;
        memmove(b->buf, b->buf + n, b->len - n);
        b->len -= n;
        if (b->eof)
            return FT_OK;
    }
}

/* binary_batch parses the whole records in buf into one chunk per thread
 * (split by bytes); returns the bytes consumed in *used. */
static int binary_batch(bk_build *b, size_t *used)
{
    int T = b->threads;
    if (b->len < ((size_t)1 << 16))
        T = 1;
    int rc = add_chunks(b, (size_t)T);
    if (rc)
        return rc;
    bk_job jobs[T];
    memset(jobs, 0, sizeof jobs);
    for (int i = 0; i < T; i++) {
        jobs[i].chunk = &b->chunks[b->nchunks + (size_t)i];
        memset(jobs[i].chunk, 0, sizeof *jobs[i].chunk);
    }
    const unsigned char *buf = (const unsigned char *)b->buf;
    size_t pos = 0, vb = b->has_values ? 8 : 0;
    const size_t share = b->len / (size_t)T + 1;
    while (rc == FT_OK) {
        if (b->skip_bytes > 0) {
            size_t k = b->len - pos < b->skip_bytes ? b->len - pos
                                                     : (size_t)b->skip_bytes;
            pos += k;
            b->skip_bytes -= k;
            if (b->skip_bytes > 0)
                break;
            continue;
        }
        size_t left = b->len - pos;
        if (left == 0)
            break;
        uint64_t rec = b->st->lines; /* 0-based record number */
        uint32_t n = 0;
        if (left >= 4)
            memcpy(&n, buf + pos, 4);
        uint64_t need = 4 + 4ull * n + vb;
        const char *why = NULL;
        char reason[160];
        if (left >= 4 && n == 0) {
            why = reason;
            snprintf(reason, sizeof reason, "empty key (record of n = 0)");
        } else if (left >= 4 && n > b->maxlen) {
            why = reason;
            snprintf(reason, sizeof reason,
                     "key of %u tokens is longer than max_key_len %u", n,
                     b->maxlen);
        } else if (left < need) {
            if (!b->eof)
                break; /* the rest comes with the next block */
            why = reason;
            snprintf(reason, sizeof reason,
                     "truncated record (%zu bytes left, the record needs "
                     "%llu)", left, (unsigned long long)(left < 4 ? 4 : need));
        }
        if (why) {
            if (!b->o->skip_invalid) {
                fti_errf(b->errbuf, b->errlen, "%s:%llu: %s", b->name,
                         (unsigned long long)rec + 1, why);
                rc = FT_EPARSE;
                break;
            }
            b->st->skipped++;
            b->st->lines++;
            if (left < need) {
                /* An oversized or cut record is skipped to its end, which
                 * may lie in later blocks or past the end of the file. */
                b->skip_bytes = need - left;
                pos = b->len;
                if (b->eof)
                    b->skip_bytes = 0;
            } else {
                pos += need;
            }
            continue;
        }
        bk_chunk *ch = jobs[pos / share].chunk;
        if (fti_vec_reserve(&ch->recs, sizeof(bk_rec), 1) ||
            fti_vec_reserve(&ch->pool, sizeof(uint32_t), n)) {
            rc = FT_ENOMEM;
            break;
        }
        uint32_t *out = (uint32_t *)ch->pool.data + ch->pool.len;
        memcpy(out, buf + pos + 4, 4ull * n);
        bk_rec *r = (bk_rec *)ch->recs.data + ch->recs.len++;
        r->k01 = (uint64_t)out[0] << 32 | (n > 1 ? out[1] : 0);
        r->offlen = (uint64_t)ch->pool.len << 9 | n;
        r->line = rec;
        if (vb)
            memcpy(&r->value, buf + pos + 4 + 4ull * n, 8);
        else
            r->value = rec;
        ch->pool.len += n;
        b->st->keys_read++;
        b->st->lines++;
        pos += need;
    }
    *used = pos;
    if (rc) {
        for (int i = 0; i < T; i++) {
            fti_vec_free(&jobs[i].chunk->recs);
            fti_vec_free(&jobs[i].chunk->pool);
        }
        return rc;
    }
    return after_batch(b, jobs, T);
}

static int read_binary(bk_build *b)
{
    for (;;) {
        int rc = fill(b);
        if (rc)
            return rc;
        size_t used = 0;
        double t0 = fti_now(), s0 = b->t_sort + b->t_spill;
        rc = binary_batch(b, &used);
        /* binary_batch sorts and spills too (timed there); the rest is the
         * parse, which runs in this thread. */
        b->t_parse += fti_now() - t0 - (b->t_sort + b->t_spill - s0);
        if (rc)
            return rc;
        memmove(b->buf, b->buf + used, b->len - used);
        b->len -= used;
        if (b->eof)
            return FT_OK;
        if (used == 0 && b->len == b->cap && (rc = grow_buf(b, b->cap * 2)))
            return rc;
    }
}

/* ---- the whole build --------------------------------------------------- */

static uint64_t default_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    uint64_t half = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz / 2
                                         : (uint64_t)1 << 30;
    return half < ((uint64_t)64 << 20) ? (uint64_t)64 << 20 : half;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* report_profile hands the phase times to the progress callback, or,
 * without one, to the logger at FT_LOG_INFO; parse and sort are wall
 * times of the parallel steps, the others run on one thread unless
 * noted. */
static void report_profile(const bk_build *b)
{
    if (!b->profile)
        return;
    const double *p = b->prof;
    ft_build_progress r;
    double now = fti_now();
    progress_fill(b, &r, FT_BUILD_PROFILE, now);
    r.profile.read = b->t_read;
    r.profile.parse = b->t_parse;
    r.profile.sort = b->t_sort;
    r.profile.spill = b->t_spill;
    r.profile.merge = b->t_merge;
    r.profile.part_min = b->t_part_min;
    r.profile.part_max = b->t_part_max;
    r.profile.fin_scan = p[FT_PROF_FIN_SCAN];
    r.profile.fin_alloc = p[FT_PROF_FIN_ALLOC];
    r.profile.fin_pack = p[FT_PROF_FIN_PACK];
    r.profile.fin_rank = p[FT_PROF_FIN_RANK];
    r.profile.checksum = p[FT_PROF_CHECKSUM];
    r.profile.write = p[FT_PROF_WRITE];
    r.profile.fsync = p[FT_PROF_FSYNC];
    r.profile.total = now - b->t0;
    if (b->o->progress) {
        b->o->progress(&r, b->o->progress_arg);
    } else {
        char line[512];
        ft_build_progress_format(line, sizeof line, &r);
        FT_INFO("%s", line);
    }
}

int ft_build_progress_format(char *buf, size_t len, const ft_build_progress *p)
{
    if (buf == NULL || len == 0 || p == NULL)
        return FT_EINVAL;
    if (p->phase == FT_BUILD_PROFILE) {
        snprintf(buf, len,
                 "flashtrie build profile (s, %d threads): read %.3f | parse "
                 "%.3f | sort %.3f | spill %.3f | merge %.3f (parts "
                 "%.3f..%.3f) | finish: scan %.3f alloc %.3f pack %.3f rank "
                 "%.3f | checksum %.3f | write %.3f | fsync %.3f | total %.3f",
                 p->threads, p->profile.read, p->profile.parse,
                 p->profile.sort, p->profile.spill, p->profile.merge,
                 p->profile.part_min, p->profile.part_max,
                 p->profile.fin_scan, p->profile.fin_alloc,
                 p->profile.fin_pack, p->profile.fin_rank,
                 p->profile.checksum, p->profile.write, p->profile.fsync,
                 p->profile.total);
        return FT_OK;
    }
    double dt = p->seconds > 1e-9 ? p->seconds : 1e-9;
    snprintf(buf, len,
             "flashtrie build: %s %llu lines, %llu keys, %llu skipped, "
             "%.1f MB/s, %llu runs, %.1f s",
             p->phase == FT_BUILD_MERGING ? "merging;" : "reading;",
             (unsigned long long)p->lines, (unsigned long long)p->keys_read,
             (unsigned long long)p->skipped, (double)p->bytes_read / 1e6 / dt,
             (unsigned long long)p->runs, p->seconds);
    return FT_OK;
}

/* build_finish turns the sorted chunks (or spilled runs) into the trie and
 * writes it to b->output: the common end of ft_build and ft_builder. */
static int build_finish(bk_build *b)
{
    char *errbuf = b->errbuf;
    size_t errlen = b->errlen;
    int rc;
    ft_tb *tb = NULL, **tbs = NULL;
    int ntb = 0;
    if (b->nruns == 0) {
        rc = build_in_memory(b, &tbs, &ntb);
        free_chunks(b);
    } else {
        if ((rc = spill(b)))
            return rc;
        /* Merge in passes of BK_FANIN runs so the open files stay few. */
        while (rc == FT_OK && b->nruns > BK_FANIN) {
            FILE *f;
            if ((rc = new_run(b, &f)))
                break;
            b->runs_made--; /* a pass output is not an input run */
            rc = close_run(b, f, merge_runs(b, BK_FANIN, emit_run, f));
        }
        double t0 = fti_now();
        if (rc == FT_OK && (rc = ft_tb_create(&tb)) == FT_OK) {
            bk_sink sink = {b, tb};
            rc = merge_runs(b, b->nruns, emit_tb, &sink);
        }
        b->t_merge += fti_now() - t0;
        if (tb != NULL) {
            tbs = malloc(sizeof *tbs);
            if (tbs == NULL) {
                ft_tb_destroy(tb);
                rc = rc ? rc : FT_ENOMEM;
            } else {
                tbs[0] = tb;
                ntb = 1;
            }
        }
    }
    if (rc) {
        for (int i = 0; i < ntb; i++)
            ft_tb_destroy(tbs[i]);
        free(tbs);
        FT_RETURN_ERROR_IF(rc == FT_ENOMEM, rc, "%s: out of memory", b->name);
        if (errbuf && errlen && !errbuf[0])
            fti_errf(errbuf, errlen, "%s: %s", b->name, ft_strerror(rc));
        return rc;
    }
    b->st->runs = b->runs_made;
    b->st->keys = 0;
    for (int i = 0; i < ntb; i++)
        b->st->keys += ft_tb_keys(tbs[i]);
    ft_trie t;
    rc = ft_tb_finish_parts(tbs, (size_t)ntb, b->maxlen, b->threads, &t,
                            b->prof);
    for (int i = 0; i < ntb; i++)
        ft_tb_destroy(tbs[i]);
    free(tbs);
    if (rc == FT_EINVAL)
        rc = FT_EINTERNAL; /* the parts are ordered by construction */
    FT_RETURN_ERROR_IF(rc, rc, "%s: cannot build the trie: %s", b->output,
                       ft_strerror(rc));
    b->st->nodes = t.view.n_nodes;
    rc = ft_trie_write_mt(&t, b->output, b->threads, b->prof, errbuf, errlen);
    ft_trie_free(&t);
    report_profile(b);
    if (rc)
        return rc;
    struct stat sb;
    if (stat(b->output, &sb) == 0)
        b->st->index_bytes = (uint64_t)sb.st_size;
    return FT_OK;
}

static int build_main(bk_build *b)
{
    const ft_build_opts *o = b->o;
    int rc;

    /* The first block decides the format: the magic is in its 8 bytes. */
    if ((rc = fill(b)))
        return rc;
    int magic = b->len >= 8 && memcmp(b->buf, BK_MAGIC, 8) == 0;
    b->binary = o->format == FT_KEYS_FTK ||
                (o->format == FT_KEYS_AUTO &&
                 (magic || ends_with(o->input, ".ftk")));
    if (b->binary && magic) {
        b->has_values = 1;
        memmove(b->buf, b->buf + 8, b->len - 8);
        b->len -= 8;
    }
    rc = b->binary ? read_binary(b) : read_text(b);
    if (rc)
        return rc;
    free(b->buf);
    b->buf = NULL;
    free(b->nbuf);
    b->nbuf = NULL;
    progress(b, 1);
    return build_finish(b);
}

/* The first published layouts of the growing structs: a caller's
 * struct_size must be at least this (and sane). */
#define BK_OPTS_V1 sizeof(ft_build_opts)
#define BK_STATS_V1 sizeof(ft_build_stats)
#define BK_STRUCT_MAX 65536u

/* opts_load copies the caller's options over the defaults, reading only
 * the fields the caller's struct_size covers. */
static int opts_load(ft_build_opts *dst, const ft_build_opts *src,
                     char *errbuf, size_t errlen)
{
    ft_build_opts_init(dst);
    if (src == NULL)
        return FT_OK;
    FT_RETURN_ERROR_IF(src->struct_size < BK_OPTS_V1 ||
                           src->struct_size > BK_STRUCT_MAX,
                       FT_EINVAL,
                       "build options: struct_size %u is not the size of an "
                       "ft_build_opts (call ft_build_opts_init first)",
                       src->struct_size);
    size_t n = src->struct_size < sizeof *dst ? src->struct_size
                                               : sizeof *dst;
    memcpy(dst, src, n);
    dst->struct_size = sizeof *dst;
    return FT_OK;
}

static int stats_check(const ft_build_stats *st, char *errbuf, size_t errlen)
{
    FT_RETURN_ERROR_IF(st != NULL && (st->struct_size < BK_STATS_V1 ||
                                      st->struct_size > BK_STRUCT_MAX),
                       FT_EINVAL,
                       "build stats: struct_size %u is not the size of an "
                       "ft_build_stats (call ft_build_stats_init first)",
                       st->struct_size);
    return FT_OK;
}

/* stats_store copies the stats out, as far as the caller's struct goes. */
static void stats_store(ft_build_stats *dst, const ft_build_stats *src)
{
    if (dst == NULL)
        return;
    uint32_t size = dst->struct_size;
    memcpy(dst, src, size < sizeof *src ? size : sizeof *src);
    dst->struct_size = size;
}

/* bk_setup checks the options and fills what ft_build and ft_builder
 * share: threads, memory budget, tmp_dir. */
static int bk_setup(bk_build *b, const ft_build_opts *opts, char *errbuf,
                    size_t errlen, size_t *block)
{
    FT_RETURN_ERROR_IF(opts->max_key_len > FT_MAX_KEY_LEN_LIMIT, FT_EINVAL,
                       "max_key_len %u exceeds the hard limit %u",
                       opts->max_key_len, FT_MAX_KEY_LEN_LIMIT);
    FT_RETURN_ERROR_IF(opts->threads < 0, FT_EINVAL,
                       "threads %d is negative", opts->threads);
    FT_RETURN_ERROR_IF(opts->format < FT_KEYS_AUTO ||
                           opts->format > FT_KEYS_FTK,
                       FT_EINVAL, "unknown input format %d", opts->format);
    b->o = opts;
    b->t0 = b->last_progress = fti_now();
    b->profile = opts->profile || opts->progress != NULL;
    b->maxlen = opts->max_key_len ? opts->max_key_len : FT_MAX_KEY_LEN_DEFAULT;
    b->threads = opts->threads ? opts->threads : fti_usable_cores();
    if (b->threads > 256)
        b->threads = 256;

    /* The memory budget: one read block (an eighth of it) plus the sorted
     * chunks (the rest, less room for the next block's parse output). */
    uint64_t mem = opts->max_memory ? opts->max_memory : default_memory();
    uint64_t blk = mem / 8;
    if (blk < BK_MIN_BLOCK)
        blk = BK_MIN_BLOCK;
    if (blk > BK_MAX_BLOCK)
        blk = BK_MAX_BLOCK;
    b->budget = mem > 4 * blk ? mem - 4 * blk : 0;
    *block = (size_t)blk;

    /* tmp_dir defaults to the output's directory, so runs land on the
     * disk that must hold the index anyway. */
    if (opts->tmp_dir) {
        b->tmp_dir = strdup(opts->tmp_dir);
    } else if (opts->output) {
        const char *slash = strrchr(opts->output, '/');
        b->tmp_dir = slash ? strndup(opts->output,
                                     (size_t)(slash - opts->output) +
                                         (slash == opts->output))
                           : strdup(".");
    } else {
        b->tmp_dir = strdup("/tmp");
    }
    FT_RETURN_ERROR_IF(b->tmp_dir == NULL, FT_ENOMEM, "out of memory");
    bk_clean_stale(opts->output, b->tmp_dir);
    return FT_OK;
}

/* bk_cleanup frees everything a build holds; temporary files never
 * outlive the build, whatever happened. */
static void bk_cleanup(bk_build *b)
{
    for (size_t i = 0; i < b->nruns; i++) {
        unlink(b->runs[i]);
        free(b->runs[i]);
    }
    free(b->runs);
    b->runs = NULL;
    b->nruns = 0;
    free_chunks(b);
    free(b->chunks);
    b->chunks = NULL;
    free(b->buf);
    b->buf = NULL;
    free(b->nbuf);
    b->nbuf = NULL;
    free(b->tmp_dir);
    b->tmp_dir = NULL;
}

void ft_build_opts_init(ft_build_opts *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->struct_size = sizeof *opts;
    opts->max_key_len = FT_MAX_KEY_LEN_DEFAULT;
}

void ft_build_stats_init(ft_build_stats *stats)
{
    memset(stats, 0, sizeof *stats);
    stats->struct_size = sizeof *stats;
}

int ft_build(ft_build_stats *stats, const ft_build_opts *opts, char *errbuf,
             size_t errlen)
{
    ft_build_stats st;
    ft_build_stats_init(&st);
    if (errbuf && errlen)
        errbuf[0] = 0;
    int rc = stats_check(stats, errbuf, errlen);
    if (rc)
        return rc;
    ft_build_opts o;
    if ((rc = opts_load(&o, opts, errbuf, errlen))) {
        stats_store(stats, &st);
        return rc;
    }
    if (opts == NULL || o.input == NULL || o.output == NULL) {
        stats_store(stats, &st);
        fti_errf(errbuf, errlen, "build: input and output are required");
        return FT_EINVAL;
    }

    bk_build b;
    memset(&b, 0, sizeof b);
    b.st = &st;
    b.errbuf = errbuf;
    b.errlen = errlen;
    int is_stdin = strcmp(o.input, "-") == 0;
    b.name = is_stdin ? "stdin" : o.input;
    b.output = o.output;
    size_t blk = 0;
    rc = bk_setup(&b, &o, errbuf, errlen, &blk);
    if (rc == FT_OK && grow_buf(&b, blk) != FT_OK)
        rc = FT_ENOMEM;
    if (rc == FT_OK) {
        b.fd = is_stdin ? 0 : open(o.input, O_RDONLY);
        if (b.fd < 0) {
            fti_errf(errbuf, errlen, "%s: cannot open: %s", o.input,
                     strerror(errno));
            rc = FT_EIO;
        }
        if (rc == FT_OK) {
            rc = build_main(&b);
            if (!is_stdin)
                close(b.fd);
        }
    }
    if (rc == FT_ENOMEM && errbuf && errlen && !errbuf[0])
        fti_errf(errbuf, errlen, "%s: out of memory", o.input);
    bk_cleanup(&b);
    st.seconds = b.t0 > 0 ? fti_now() - b.t0 : 0;
    stats_store(stats, &st);
    return rc;
}

/* ---- ft_builder: keys handed over one at a time ------------------------ */

#define BK_MAX_PENDING 256

struct ft_builder {
    bk_build b;
    ft_build_opts o;
    ft_build_stats st;
    bk_chunk pend[BK_MAX_PENDING]; /* filled, not yet sorted; the last
                                    * one is being filled */
    int npend;
    size_t chunk_bytes;  /* a chunk is closed at this size */
    int state;           /* 0 adding, else the final error (or FT_ESTATE
                          * after a finish) */
    char err[512];
};

int ft_builder_create(ft_builder **out, const ft_build_opts *opts,
                      char *errbuf, size_t errlen)
{
    if (errbuf && errlen)
        errbuf[0] = 0;
    FT_RETURN_ERROR_IF(out == NULL, FT_EINVAL, "builder: out is NULL");
    *out = NULL;
    ft_builder *bl = calloc(1, sizeof *bl);
    FT_RETURN_ERROR_IF(bl == NULL, FT_ENOMEM, "out of memory");
    int rc = opts_load(&bl->o, opts, errbuf, errlen);
    bl->o.format = FT_KEYS_AUTO; /* no input file to read */
    ft_build_stats_init(&bl->st);
    bk_build *b = &bl->b;
    b->st = &bl->st;
    b->errbuf = bl->err;
    b->errlen = sizeof bl->err;
    b->name = "builder";
    size_t blk = 0;
    if (rc == FT_OK)
        rc = bk_setup(b, &bl->o, errbuf, errlen, &blk);
    if (rc) {
        bk_cleanup(b);
        free(bl);
        return rc;
    }
    /* One batch of chunks (one per thread) is about one read block of
     * ft_build, so both paths sort and spill at the same sizes. */
    bl->chunk_bytes = blk / (size_t)b->threads;
    if (bl->chunk_bytes < BK_MIN_BLOCK)
        bl->chunk_bytes = BK_MIN_BLOCK;
    bl->npend = 1;
    *out = bl;
    return FT_OK;
}

/* flush_pending sorts the filled chunks in parallel (spilling when the
 * budget is passed) and leaves one empty chunk to fill. */
static int flush_pending(ft_builder *bl)
{
    bk_build *b = &bl->b;
    int n = bl->npend;
    if (bl->pend[n - 1].recs.len == 0) {
        fti_vec_free(&bl->pend[n - 1].recs);
        fti_vec_free(&bl->pend[n - 1].pool);
        n--;
    }
    int rc = FT_OK;
    if (n > 0 && (rc = add_chunks(b, (size_t)n)) == FT_OK) {
        bk_job jobs[n];
        memset(jobs, 0, sizeof jobs);
        for (int i = 0; i < n; i++) {
            b->chunks[b->nchunks + (size_t)i] = bl->pend[i];
            jobs[i].b = b;
            jobs[i].chunk = &b->chunks[b->nchunks + (size_t)i];
        }
        memset(bl->pend, 0, (size_t)n * sizeof *bl->pend);
        rc = after_batch(b, jobs, n);
    }
    bl->npend = 1;
    return rc;
}

int ft_builder_add(ft_builder *bl, const uint32_t *toks, size_t n,
                   uint64_t value)
{
    if (bl == NULL)
        return FT_EINVAL;
    bl->err[0] = 0;
    if (bl->state) {
        fti_errf(bl->err, sizeof bl->err, "builder: %s",
                 bl->state == FT_ESTATE ? "already finished"
                                        : "an earlier call failed");
        return FT_ESTATE;
    }
    bk_build *b = &bl->b;
    uint64_t num = bl->st.lines++;
    const char *why = NULL;
    char reason[128];
    if (n == 0) {
        why = "empty key";
    } else if (n > b->maxlen) {
        snprintf(reason, sizeof reason,
                 "key of %zu tokens is longer than max_key_len %u", n,
                 b->maxlen);
        why = reason;
    } else if (toks == NULL) {
        fti_errf(bl->err, sizeof bl->err, "key %llu: toks is NULL",
                 (unsigned long long)num + 1);
        return FT_EINVAL;
    }
    if (why) {
        if (bl->o.skip_invalid) {
            bl->st.skipped++;
            return FT_OK;
        }
        fti_errf(bl->err, sizeof bl->err, "key %llu: %s",
                 (unsigned long long)num + 1, why);
        return FT_EPARSE;
    }
    bk_chunk *ch = &bl->pend[bl->npend - 1];
    if (fti_vec_reserve(&ch->recs, sizeof(bk_rec), 1) ||
        fti_vec_reserve(&ch->pool, sizeof(uint32_t), n)) {
        bl->state = FT_ENOMEM;
        fti_errf(bl->err, sizeof bl->err, "key %llu: out of memory",
                 (unsigned long long)num + 1);
        return FT_ENOMEM;
    }
    uint32_t *dst = (uint32_t *)ch->pool.data + ch->pool.len;
    memcpy(dst, toks, n * sizeof *toks);
    bk_rec *r = (bk_rec *)ch->recs.data + ch->recs.len++;
    r->k01 = (uint64_t)dst[0] << 32 | (n > 1 ? dst[1] : 0);
    r->offlen = (uint64_t)ch->pool.len << 9 | (uint64_t)n;
    r->line = num;
    r->value = value;
    ch->pool.len += n;
    bl->st.keys_read++;
    if (ch->recs.len * sizeof(bk_rec) + ch->pool.len * sizeof(uint32_t) <
        bl->chunk_bytes)
        return FT_OK;
    if (bl->npend < b->threads && bl->npend < BK_MAX_PENDING) {
        bl->npend++;
        return FT_OK;
    }
    int rc = flush_pending(bl);
    if (rc) {
        bl->state = rc;
        if (!bl->err[0])
            fti_errf(bl->err, sizeof bl->err, "key %llu: %s",
                     (unsigned long long)num + 1, ft_strerror(rc));
    }
    return rc;
}

int ft_builder_add_auto(ft_builder *bl, const uint32_t *toks, size_t n)
{
    return ft_builder_add(bl, toks, n, bl ? bl->st.lines : 0);
}

const char *ft_builder_error(const ft_builder *bl)
{
    return bl ? bl->err : "builder: NULL";
}

int ft_builder_finish(ft_builder *bl, ft_build_stats *stats,
                      const char *output, char *errbuf, size_t errlen)
{
    if (errbuf && errlen)
        errbuf[0] = 0;
    FT_RETURN_ERROR_IF(bl == NULL || output == NULL, FT_EINVAL,
                       "builder: %s is NULL",
                       bl == NULL ? "the builder" : "output");
    int rc = stats_check(stats, errbuf, errlen);
    if (rc)
        return rc;
    bl->err[0] = 0;
    if (bl->state) {
        rc = FT_ESTATE;
        fti_errf(bl->err, sizeof bl->err, "builder: %s",
                 bl->state == FT_ESTATE ? "already finished"
                                        : "an earlier call failed");
    } else {
        bk_build *b = &bl->b;
        b->output = output;
        rc = flush_pending(bl);
        b->eof = 1; /* progress reports say "merging" from here */
        if (rc == FT_OK) {
            progress(b, 1);
            rc = build_finish(b);
        }
        if (rc == FT_ENOMEM && !bl->err[0])
            fti_errf(bl->err, sizeof bl->err, "%s: out of memory", output);
        bl->state = FT_ESTATE;
        bl->st.seconds = fti_now() - b->t0;
    }
    if (errbuf && errlen)
        fti_errf(errbuf, errlen, "%s", bl->err);
    stats_store(stats, &bl->st);
    return rc;
}

void ft_builder_destroy(ft_builder *bl)
{
    if (bl == NULL)
        return;
    for (int i = 0; i < BK_MAX_PENDING; i++) {
        fti_vec_free(&bl->pend[i].recs);
        fti_vec_free(&bl->pend[i].pool);
    }
    bk_cleanup(&bl->b);
    free(bl);
}
