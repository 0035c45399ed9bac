/*
 * builder_test.c - ft_build and "flashtrie build" against docs/specification.md
 * section 2.
 *
 * Every input error is asserted by its exact code (FT_EPARSE), line or
 * record number and reason text, for text and .ftk input; then the values
 * (first occurrence wins, default = 0-based line), skip_invalid counts,
 * stdin, the spilled-run path and thread counts (byte-identical files),
 * temp-file clean-up, damaged index files and the CLI exit codes.
 */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ft_test.h"

static char dir[256];
static char keys_path[300], ftk_path[300], idx_path[300];

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    FT_CHECK(f != NULL);
    FT_CHECK(fwrite(data, 1, n, f) == n);
    FT_CHECK(fclose(f) == 0);
}

static void *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    FT_CHECK(f != NULL);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = malloc((size_t)len + 1);
    FT_CHECK(fread(p, 1, (size_t)len, f) == (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return p;
}

static int same_file(const char *a, const char *b)
{
    size_t na, nb;
    void *pa = read_file(a, &na), *pb = read_file(b, &nb);
    int same = na == nb && memcmp(pa, pb, na) == 0;
    free(pa);
    free(pb);
    return same;
}

static int build(ft_build_stats *st, const char *in, const char *out,
                 uint32_t max_key_len, int skip, char *err, size_t errlen)
{
    ft_build_opts o;
    ft_build_opts_init(&o);
    o.input = in;
    o.output = out;
    o.max_key_len = max_key_len;
    o.skip_invalid = skip;
    o.threads = 2;
    return ft_build(st, &o, err, errlen);
}

/* expect_text_error writes text and checks the exact build error. */
static void expect_text_error(const char *text, uint32_t max_key_len,
                              unsigned line, const char *reason)
{
    char err[512], want[512];
    write_file(keys_path, text, strlen(text));
    ft_build_stats st;
    ft_build_stats_init(&st);
    FT_FAIL(build(&st, keys_path, idx_path, max_key_len, 0, err, sizeof err),
            FT_EPARSE);
    snprintf(want, sizeof want, "%s:%u: %s", keys_path, line, reason);
    FT_CHECK_STR(err, want);
    /* The same line is skipped, and counted, with skip_invalid. */
    FT_PASS(build(&st, keys_path, idx_path, max_key_len, 1, err, sizeof err));
    FT_CHECK(st.skipped >= 1);
}

static void test_text_errors(void)
{
    expect_text_error("1 2\n# c\n\n3 x 4\n", 0, 4,
                      "unexpected character 'x' in key (column 3)");
    expect_text_error("1\n4294967296\n", 0, 2,
                      "token 4294967296 out of range (max 4294967295)");
    expect_text_error("1 99999999999999999999999\n", 0, 1,
                      "token 99999999999999999999999 out of range "
                      "(max 4294967295)");
    expect_text_error("1\t18446744073709551616\n", 0, 1,
                      "value 18446744073709551616 out of range "
                      "(max 18446744073709551615)");
    expect_text_error("1 2 3\n1 2 3 4\n", 3, 2,
                      "key of 4 tokens is longer than max_key_len 3");
    expect_text_error("\t5\n", 0, 1, "empty key");
    expect_text_error("1\n   \t5\n", 0, 2, "empty key");
    expect_text_error("1 2\t\n", 0, 1, "missing value after TAB");
    expect_text_error("1 2\t  \r\n", 0, 1, "missing value after TAB");
    expect_text_error("1 -2\n", 0, 1,
                      "unexpected character '-' in key (column 3)");
    expect_text_error("1 2\tx\n", 0, 1,
                      "unexpected character 'x' in value (column 5)");
    expect_text_error("1 2\t5 6\n", 0, 1,
                      "unexpected character '6' in value (column 7)");
    expect_text_error("1\t2\t3\n", 0, 1,
                      "unexpected character '\\t' in value (column 4)");
    expect_text_error("1\r2\n", 0, 1,
                      "unexpected character '\\r' in key (column 2)");
    expect_text_error("   \n  \n1,2\n", 0, 3,
                      "unexpected character ',' in key (column 2)");
    expect_text_error("1\n2 y", 0, 2,
                      "unexpected character 'y' in key (column 3)");
    expect_text_error(" # not a comment\n", 0, 1,
                      "unexpected character '#' in key (column 2)");
    expect_text_error("1\n\xc3\xa9\n", 0, 2,
                      "unexpected character '\\xc3' in key (column 1)");

    /* max_key_len beyond the hard limit is refused before anything. */
    char err[256];
    ft_build_stats st;
    ft_build_stats_init(&st);
    FT_FAIL(build(&st, keys_path, idx_path, 256, 0, err, sizeof err),
            FT_EINVAL);
    FT_CHECK_STR(err, "max_key_len 256 exceeds the hard limit 255");
    /* A missing input is an I/O error naming the file. */
    FT_FAIL(build(&st, "/nonexistent/keys.txt", idx_path, 0, 0, err,
                  sizeof err), FT_EIO);
    FT_CHECK(strstr(err, "/nonexistent/keys.txt: cannot open") == err);
}

static void check_lookup(const char *idx_file, const uint32_t *k, size_t n,
                         int want_rc, uint64_t want_value)
{
    ft_index *idx;
    char err[256];
    FT_PASS(ft_index_open(&idx, idx_file, 0, err, sizeof err));
    uint64_t v = 0;
    FT_FAIL(ft_index_lookup(&v, idx, k, n), want_rc);
    if (want_rc == FT_OK)
        FT_CHECK_EQ_U64(v, want_value);
    ft_index_close(idx);
}

static void test_values(void)
{
    /* Lines (0-based): 0 comment, 1 empty, 2 "5 6", 3 "7 TAB 100",
     * 4 "5 6 TAB 9" (duplicate: the first value stays), 5 spaces only,
     * 6 bad (skipped), 7 "7" (duplicate), 8 " 8 " with CRLF,
     * 9 the largest token and value, 10 "5" without newline. */
    const char *text = "# header\n\n5 6\n7\t100\n5 6\t9\n   \nbad\n7\n 8 \r\n"
                       "4294967295\t18446744073709551615\n5";
    write_file(keys_path, text, strlen(text));
    ft_build_stats st;
    ft_build_stats_init(&st);
    char err[256];
    FT_FAIL(build(&st, keys_path, idx_path, 0, 0, err, sizeof err), FT_EPARSE);
    FT_PASS(build(&st, keys_path, idx_path, 0, 1, err, sizeof err));
    FT_CHECK_EQ_U64(st.lines, 11);
    FT_CHECK_EQ_U64(st.skipped, 1);
    FT_CHECK_EQ_U64(st.keys_read, 7);
    FT_CHECK_EQ_U64(st.keys, 5);
    uint32_t k56[] = {5, 6}, k7[] = {7}, k8[] = {8}, kmax[] = {4294967295u},
             k5[] = {5}, k6[] = {6}, k3b[] = {3};
    check_lookup(idx_path, k56, 2, FT_OK, 2);
    check_lookup(idx_path, k7, 1, FT_OK, 100);
    check_lookup(idx_path, k8, 1, FT_OK, 8);
    check_lookup(idx_path, kmax, 1, FT_OK, UINT64_MAX);
    check_lookup(idx_path, k5, 1, FT_OK, 10);
    check_lookup(idx_path, k6, 1, FT_ENOTFOUND, 0);

    /* CRLF: one \r before the \n is dropped, also after a value and on
     * an otherwise empty line; the last line may lack its newline. */
    const char *crlf = "1 2\t5\r\n\r\n3\r\n4 4 \t 6 \r\n9\r";
    write_file(keys_path, crlf, strlen(crlf));
    FT_PASS(build(&st, keys_path, idx_path, 0, 0, err, sizeof err));
    FT_CHECK_EQ_U64(st.lines, 5);
    uint32_t k12[] = {1, 2}, k44[] = {4, 4}, k9[] = {9};
    check_lookup(idx_path, k12, 2, FT_OK, 5);
    check_lookup(idx_path, k3b, 1, FT_OK, 2);
    check_lookup(idx_path, k44, 2, FT_OK, 6);
    check_lookup(idx_path, k9, 1, FT_OK, 4);

    /* skip_invalid counts every kind of bad line. */
    const char *bad = "1\nx\n4294967296\n\t1\n1 2 3 4 5\n2\t-1\n3\n";
    write_file(keys_path, bad, strlen(bad));
    FT_PASS(build(&st, keys_path, idx_path, 4, 1, err, sizeof err));
    FT_CHECK_EQ_U64(st.skipped, 5);
    FT_CHECK_EQ_U64(st.keys, 2);
    uint32_t k3[] = {3};
    check_lookup(idx_path, k3, 1, FT_OK, 6);

    /* A key of 255 tokens fits max_key_len 255. */
    char *line = malloc(255 * 11 + 2);
    size_t n = 0;
    for (int i = 0; i < 255; i++)
        n += (size_t)sprintf(line + n, i ? " %d" : "%d", i);
    line[n++] = '\n';
    write_file(keys_path, line, n);
    FT_PASS(build(&st, keys_path, idx_path, 255, 0, err, sizeof err));
    FT_CHECK_EQ_U64(st.keys, 1);
    free(line);

    /* An empty library is a valid, empty index. */
    write_file(keys_path, "# nothing\n", 10);
    FT_PASS(build(&st, keys_path, idx_path, 0, 0, err, sizeof err));
    FT_CHECK_EQ_U64(st.keys, 0);
    check_lookup(idx_path, k5, 1, FT_ENOTFOUND, 0);
}

/* ftk builds .ftk bytes: records of (n, toks..., [value]). */
typedef struct buf {
    unsigned char *p;
    size_t n;
} buf;

static void put(buf *b, const void *x, size_t n)
{
    b->p = realloc(b->p, b->n + n);
    memcpy(b->p + b->n, x, n);
    b->n += n;
}

static void put_rec(buf *b, uint32_t n, const uint32_t *t, int with_value,
                    uint64_t value)
{
    put(b, &n, 4);
    if (n)
        put(b, t, 4 * (size_t)n);
    if (with_value)
        put(b, &value, 8);
}

static void expect_ftk_error(buf *b, unsigned rec, const char *reason)
{
    char err[512], want[512];
    write_file(ftk_path, b->p, b->n);
    ft_build_stats st;
    ft_build_stats_init(&st);
    FT_FAIL(build(&st, ftk_path, idx_path, 0, 0, err, sizeof err), FT_EPARSE);
    snprintf(want, sizeof want, "%s:%u: %s", ftk_path, rec, reason);
    FT_CHECK_STR(err, want);
    FT_PASS(build(&st, ftk_path, idx_path, 0, 1, err, sizeof err));
    FT_CHECK_EQ_U64(st.skipped, 1);
    free(b->p);
    b->p = NULL;
    b->n = 0;
}

static void test_ftk(void)
{
    uint32_t t[300];
    for (int i = 0; i < 300; i++)
        t[i] = (uint32_t)i * 7 + 1;
    buf b = {0};

    /* Without values: the value is the 0-based record number. */
    put_rec(&b, 2, t, 0, 0);
    put_rec(&b, 1, t + 5, 0, 0);
    put_rec(&b, 2, t, 0, 0); /* duplicate */
    put_rec(&b, 3, t, 0, 0);
    write_file(ftk_path, b.p, b.n);
    ft_build_stats st;
    ft_build_stats_init(&st);
    char err[512];
    FT_PASS(build(&st, ftk_path, idx_path, 0, 0, err, sizeof err));
    FT_CHECK_EQ_U64(st.keys, 3);
    FT_CHECK_EQ_U64(st.lines, 4);
    check_lookup(idx_path, t, 2, FT_OK, 0);
    check_lookup(idx_path, t + 5, 1, FT_OK, 1);
    check_lookup(idx_path, t, 3, FT_OK, 3);
    free(b.p);
    b.p = NULL;
    b.n = 0;

    /* With the FTKEYSV1 header: explicit values. */
    put(&b, "FTKEYSV1", 8);
    put_rec(&b, 2, t, 1, 77);
    put_rec(&b, 2, t, 1, 78);
    put_rec(&b, 4, t, 1, UINT64_MAX);
    write_file(ftk_path, b.p, b.n);
    FT_PASS(build(&st, ftk_path, idx_path, 0, 0, err, sizeof err));
    FT_CHECK_EQ_U64(st.keys, 2);
    check_lookup(idx_path, t, 2, FT_OK, 77);
    check_lookup(idx_path, t, 4, FT_OK, UINT64_MAX);
    free(b.p);
    b.p = NULL;
    b.n = 0;

    /* Errors, by 1-based record number. */
    put_rec(&b, 1, t, 0, 0);
    put_rec(&b, 1, t + 1, 0, 0);
    put_rec(&b, 0, t, 0, 0);
    put_rec(&b, 1, t + 2, 0, 0);
    expect_ftk_error(&b, 3, "empty key (record of n = 0)");

    put_rec(&b, 1, t, 0, 0);
    put_rec(&b, 65, t, 0, 0);
    put_rec(&b, 1, t + 2, 0, 0);
    expect_ftk_error(&b, 2, "key of 65 tokens is longer than max_key_len 64");

    put_rec(&b, 1, t, 0, 0);
    put_rec(&b, 3, t, 0, 0);
    b.n -= 2;
    expect_ftk_error(&b, 2, "truncated record (14 bytes left, the record "
                            "needs 16)");

    put(&b, "FTKEYSV1", 8);
    put_rec(&b, 1, t, 1, 5);
    put_rec(&b, 2, t, 1, 6);
    b.n -= 8;
    expect_ftk_error(&b, 2, "truncated record (12 bytes left, the record "
                            "needs 20)");

    put(&b, "FTKEYSV1", 8);
    put_rec(&b, 300, t, 1, 5);
    put_rec(&b, 1, t, 1, 6);
    expect_ftk_error(&b, 1, "key of 300 tokens is longer than max_key_len 64");
}

/* build_stdin points fd 0 at path for the duration of one build. */
static int build_stdin(ft_build_stats *st, const char *path, int format,
                       char *err, size_t errlen)
{
    int saved = dup(0);
    int fd = open(path, O_RDONLY);
    FT_CHECK(saved >= 0 && fd >= 0);
    dup2(fd, 0);
    close(fd);
    ft_build_opts o;
    ft_build_opts_init(&o);
    o.input = "-";
    o.output = idx_path;
    o.format = format;
    int rc = ft_build(st, &o, err, errlen);
    dup2(saved, 0);
    close(saved);
    return rc;
}

static void test_stdin(void)
{
    const char *text = "# c\n3 4\t9\n3\n3 4\t10\n";
    write_file(keys_path, text, strlen(text));
    ft_build_stats st;
    ft_build_stats_init(&st);
    char err[256];
    FT_PASS(build_stdin(&st, keys_path, FT_KEYS_AUTO, err, sizeof err));
    FT_CHECK_EQ_U64(st.keys, 2);
    uint32_t k34[] = {3, 4}, k3[] = {3};
    check_lookup(idx_path, k34, 2, FT_OK, 9);
    check_lookup(idx_path, k3, 1, FT_OK, 2);
    write_file(keys_path, "1\nz\n", 4);
    FT_FAIL(build_stdin(&st, keys_path, FT_KEYS_AUTO, err, sizeof err),
            FT_EPARSE);
    FT_CHECK_STR(err, "stdin:2: unexpected character 'z' in key (column 1)");

    /* Binary on stdin: detected by the magic, or forced by the format. */
    buf b = {0};
    put(&b, "FTKEYSV1", 8);
    put_rec(&b, 2, k34, 1, 42);
    write_file(ftk_path, b.p, b.n);
    FT_PASS(build_stdin(&st, ftk_path, FT_KEYS_AUTO, err, sizeof err));
    check_lookup(idx_path, k34, 2, FT_OK, 42);
    free(b.p);
    b.p = NULL;
    b.n = 0;
    put_rec(&b, 1, k3, 0, 0);
    put_rec(&b, 2, k34, 0, 0);
    write_file(ftk_path, b.p, b.n);
    FT_PASS(build_stdin(&st, ftk_path, FT_KEYS_FTK, err, sizeof err));
    check_lookup(idx_path, k34, 2, FT_OK, 1);
    free(b.p);
}

/* A random library of n lines (Zipf-like tokens, duplicates, values on
 * some lines, comments), large enough that every thread gets work. */
static void write_random_library(const char *path, size_t n, uint64_t seed)
{
    FILE *f = fopen(path, "w");
    FT_CHECK(f != NULL);
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = ft_test_rand(&s);
        if (r % 97 == 0) {
            fputs("# comment\n", f);
            continue;
        }
        int len = 1 + (int)(r % 8);
        for (int j = 0; j < len; j++) {
            uint64_t x = ft_test_rand(&s);
            /* log-uniform over 1..2^22: a few tokens are very frequent */
            uint32_t bits = (uint32_t)(x % 23);
            uint32_t tok = (uint32_t)((x >> 8) & ((1ull << bits) - 1));
            if (x % 1000 == 0)
                tok = 4294967295u - (uint32_t)(x >> 40);
            fprintf(f, j ? " %u" : "%u", tok);
        }
        if (r % 3 == 0)
            fprintf(f, "\t%llu", (unsigned long long)(r >> 20));
        fputc('\n', f);
    }
    FT_CHECK(fclose(f) == 0);
}

static int count_runs_in(const char *d)
{
    DIR *dp = opendir(d);
    FT_CHECK(dp != NULL);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dp)) != NULL)
        if (strstr(e->d_name, "flashtrie-run") || strstr(e->d_name, ".tmp."))
            n++;
    closedir(dp);
    return n;
}

/* count_reports counts progress reports by phase; the profile report
 * must come last and carry the phase times. */
static void count_reports(const ft_build_progress *p, void *arg)
{
    uint64_t *n = arg;
    FT_CHECK(p->struct_size == sizeof *p && n[FT_BUILD_PROFILE] == 0);
    FT_CHECK(p->phase >= FT_BUILD_READING && p->phase <= FT_BUILD_PROFILE);
    if (p->phase == FT_BUILD_PROFILE)
        FT_CHECK(p->profile.total > 0 && p->profile.total >= p->profile.read);
    n[p->phase]++;
}

static void test_paths_agree(void)
{
    char lib[300], ref[300], out[300], err[256];
    snprintf(lib, sizeof lib, "%s/lib.txt", dir);
    snprintf(ref, sizeof ref, "%s/ref.idx", dir);
    snprintf(out, sizeof out, "%s/out.idx", dir);
    write_random_library(lib, 300000, 11);
    ft_build_opts o;
    ft_build_opts_init(&o);
    o.input = lib;
    o.output = ref;
    o.threads = 1;
    ft_build_stats st, st2;
    ft_build_stats_init(&st);
    ft_build_stats_init(&st2);
    FT_PASS(ft_build(&st, &o, err, sizeof err));
    FT_CHECK_EQ_U64(st.runs, 0);
    FT_CHECK(st.keys > 100000);

    int threads[] = {2, 8, 16};
    for (int i = 0; i < 3; i++) {
        o.output = out;
        o.threads = threads[i];
        FT_PASS(ft_build(&st2, &o, err, sizeof err));
        FT_CHECK(same_file(ref, out));
        FT_CHECK_EQ_U64(st2.keys, st.keys);
    }

    /* A tiny memory budget forces a run per block, and more runs than one
     * merge pass takes; the file must not change. */
    o.max_memory = 1;
    o.threads = 2;
    FT_PASS(ft_build(&st2, &o, err, sizeof err));
    FT_CHECK(st2.runs > 64);
    FT_CHECK(same_file(ref, out));
    FT_CHECK_EQ_U64(count_runs_in(dir), 0);

    /* The same through a separate tmp_dir, and from .ftk. */
    char tmpd[300];
    snprintf(tmpd, sizeof tmpd, "%s/tmp", dir);
    FT_CHECK(mkdir(tmpd, 0700) == 0);
    o.tmp_dir = tmpd;
    o.max_memory = 300000;
    uint64_t reports[3] = {0, 0, 0};
    o.progress = count_reports;
    o.progress_arg = reports;
    FT_PASS(ft_build(&st2, &o, err, sizeof err));
    o.progress = NULL;
    /* One "merging" report when the input is read, one profile at the end. */
    FT_CHECK(reports[FT_BUILD_MERGING] >= 1);
    FT_CHECK_EQ_U64(reports[FT_BUILD_PROFILE], 1);
    FT_CHECK(st2.runs > 1);
    FT_CHECK(same_file(ref, out));
    FT_CHECK_EQ_U64(count_runs_in(tmpd), 0);

    /* A bad line after several runs were spilled: no file left behind. */
    FILE *f = fopen(lib, "a");
    fputs("1 2 oops\n", f);
    fclose(f);
    o.max_memory = 1;
    unlink(out);
    FT_FAIL(ft_build(&st2, &o, err, sizeof err), FT_EPARSE);
    FT_CHECK(st2.runs == 0 && strstr(err, "unexpected character 'o'"));
    FT_CHECK_EQ_U64(count_runs_in(tmpd), 0);
    FT_CHECK_EQ_U64(count_runs_in(dir), 0);
    FT_CHECK(access(out, F_OK) != 0);
    rmdir(tmpd);
}

/* The same library as text and as .ftk (no values: both default to the
 * line or record number), with one bad line / oversized record in the
 * middle that spans several read blocks, gives the same index, in memory
 * and through runs. */
static void test_text_ftk_agree(void)
{
    char txt[300], ftk[300], a[300], b2[300], err[256];
    snprintf(txt, sizeof txt, "%s/agree.txt", dir);
    snprintf(ftk, sizeof ftk, "%s/agree.ftk", dir);
    snprintf(a, sizeof a, "%s/agree_a.idx", dir);
    snprintf(b2, sizeof b2, "%s/agree_b.idx", dir);
    FILE *ft = fopen(txt, "w"), *fb = fopen(ftk, "wb");
    FT_CHECK(ft && fb);
    uint64_t s = 99;
    uint32_t t[8];
    for (int i = 0; i < 100000; i++) {
        if (i == 50000) {
            fputs("bad line\n", ft);
            uint32_t big = 200000; /* 800 KB: longer than a read block */
            fwrite(&big, 4, 1, fb);
            for (uint32_t k = 0; k < big; k++)
                fwrite(&k, 4, 1, fb);
            continue;
        }
        uint32_t n = 1 + (uint32_t)(ft_test_rand(&s) % 6);
        for (uint32_t j = 0; j < n; j++) {
            t[j] = (uint32_t)(ft_test_rand(&s) % (j == 0 ? 50 : 100000));
            fprintf(ft, j ? " %u" : "%u", t[j]);
        }
        fputc('\n', ft);
        fwrite(&n, 4, 1, fb);
        fwrite(t, 4, n, fb);
    }
    FT_CHECK(fclose(ft) == 0 && fclose(fb) == 0);
    ft_build_opts o;
    ft_build_opts_init(&o);
    o.skip_invalid = 1;
    o.threads = 2;
    ft_build_stats st;
    ft_build_stats_init(&st);
    o.input = txt;
    o.output = a;
    FT_PASS(ft_build(&st, &o, err, sizeof err));
    FT_CHECK_EQ_U64(st.skipped, 1);
    FT_CHECK_EQ_U64(st.lines, 100000);
    o.input = ftk;
    o.output = b2;
    for (int pass = 0; pass < 2; pass++) {
        o.max_memory = pass ? 1 : 0;
        FT_PASS(ft_build(&st, &o, err, sizeof err));
        FT_CHECK_EQ_U64(st.skipped, 1);
        FT_CHECK_EQ_U64(st.lines, 100000);
        FT_CHECK(pass == 0 || st.runs > 1);
        FT_CHECK(same_file(a, b2));
    }
    /* Without skip_invalid the record is named. */
    o.skip_invalid = 0;
    FT_FAIL(ft_build(&st, &o, err, sizeof err), FT_EPARSE);
    char want[400];
    snprintf(want, sizeof want,
             "%s:50001: key of 200000 tokens is longer than max_key_len 64",
             ftk);
    FT_CHECK_STR(err, want);
    unlink(txt);
    unlink(ftk);
    unlink(a);
    unlink(b2);
}

/* ---- damaged index files ---- */

static void expect_open_error(const char *path, int code, const char *needle)
{
    ft_index *idx = NULL;
    char err[512];
    FT_FAIL(ft_index_open(&idx, path, 0, err, sizeof err), code);
    FT_CHECK(idx == NULL);
    if (strstr(err, needle) == NULL) {
        fprintf(stderr, "message '%s' lacks '%s'\n", err, needle);
        exit(1);
    }
}

static void test_damaged_index(void)
{
    char err[256], bad[300];
    write_random_library(keys_path, 5000, 3);
    ft_build_stats st;
    ft_build_stats_init(&st);
    FT_PASS(build(&st, keys_path, idx_path, 0, 0, err, sizeof err));
    size_t n;
    unsigned char *good = read_file(idx_path, &n);
    unsigned char *p = malloc(n);
    snprintf(bad, sizeof bad, "%s/bad.idx", dir);

    /* A flipped byte inside each section: that section's checksum. */
    static const char *const names[] = {
        "louds", "louds_rank", "louds_select0", "label_lo", "high_flags",
        "high_rank", "label_hi", "node_flags", "terminal_rank", "values"};
    for (int s = 0; s < 10; s++) {
        uint64_t off, bytes;
        memcpy(&off, good + 128 + 32 * s + 8, 8);
        memcpy(&bytes, good + 128 + 32 * s + 16, 8);
        if (bytes == 0)
            continue;
        memcpy(p, good, n);
        p[off + bytes / 2] ^= 0x10;
        write_file(bad, p, n);
        char want[64];
        snprintf(want, sizeof want, "section %s: checksum mismatch", names[s]);
        expect_open_error(bad, FT_ECHECKSUM, want);
    }
    /* Truncated: the last section cut short, or the table itself. */
    write_file(bad, good, n - 100);
    expect_open_error(bad, FT_ETRUNC, "truncated");
    write_file(bad, good, 200);
    expect_open_error(bad, FT_ETRUNC, "truncated");
    /* Bad magic. */
    memcpy(p, good, n);
    p[0] = 'X';
    write_file(bad, p, n);
    expect_open_error(bad, FT_EFORMAT, "bad magic");
    /* A newer format version. */
    memcpy(p, good, n);
    p[8]++;
    write_file(bad, p, n);
    expect_open_error(bad, FT_EVERSION, "version 2");
    /* A damaged header. */
    memcpy(p, good, n);
    p[40] ^= 1;
    write_file(bad, p, n);
    expect_open_error(bad, FT_EFORMAT, "header checksum");
    free(good);
    free(p);
    unlink(bad);
}

/* ---- the command line ---- */

static int run_cli(const char *args)
{
    const char *bin = getenv("FT_BIN");
    if (bin == NULL)
        return -1;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s build %s 2>%s/cli.err", bin, args, dir);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_cli(void)
{
    if (getenv("FT_BIN") == NULL)
        return;
    char args[1024], errf[300];
    snprintf(errf, sizeof errf, "%s/cli.err", dir);
    write_file(keys_path, "1 2\n3 x\n", 8);
    snprintf(args, sizeof args, "--input %s --output %s", keys_path, idx_path);
    FT_CHECK_EQ_U64(run_cli(args), 1);
    size_t n;
    char *msg = read_file(errf, &n);
    msg[n] = 0;
    char want[512];
    snprintf(want, sizeof want,
             "flashtrie: %s:2: unexpected character 'x' in key (column 3)\n",
             keys_path);
    FT_CHECK_STR(msg, want);
    free(msg);
    snprintf(args, sizeof args,
             "--input %s --output %s --skip-invalid --max-memory 1M "
             "--threads 2 --quiet", keys_path, idx_path);
    FT_CHECK_EQ_U64(run_cli(args), 0);
    snprintf(args, sizeof args, "--input %s --output %s --skip-invalid",
             keys_path, idx_path);
    FT_CHECK_EQ_U64(run_cli(args), 0);
    msg = read_file(errf, &n);
    msg[n] = 0;
    FT_CHECK(strstr(msg, "skipped 1 invalid lines") != NULL);
    free(msg);
    snprintf(args, sizeof args, "--input %s", keys_path);
    FT_CHECK_EQ_U64(run_cli(args), 2);
    snprintf(args, sizeof args, "--input %s --output %s --max-memory 12Q",
             keys_path, idx_path);
    FT_CHECK_EQ_U64(run_cli(args), 2);
    snprintf(args, sizeof args, "--input %s --output %s --max-key-len 256",
             keys_path, idx_path);
    FT_CHECK_EQ_U64(run_cli(args), 2);
    snprintf(args, sizeof args, "--input %s --output %s --threads x",
             keys_path, idx_path);
    FT_CHECK_EQ_U64(run_cli(args), 2);
    unlink(errf);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/ft_builder_XXXXXX", tmp ? tmp : "/tmp");
    FT_CHECK(mkdtemp(dir) != NULL);
    snprintf(keys_path, sizeof keys_path, "%s/keys.txt", dir);
    snprintf(ftk_path, sizeof ftk_path, "%s/keys.ftk", dir);
    snprintf(idx_path, sizeof idx_path, "%s/keys.idx", dir);
    test_text_errors();
    test_values();
    test_ftk();
    test_stdin();
    test_paths_agree();
    test_text_ftk_agree();
    test_damaged_index();
    test_cli();
    unlink(keys_path);
    unlink(ftk_path);
    unlink(idx_path);
    char p[300];
    snprintf(p, sizeof p, "%s/lib.txt", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/ref.idx", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/out.idx", dir);
    unlink(p);
    FT_CHECK(rmdir(dir) == 0);
    printf("builder_test: ok\n");
    return 0;
}
