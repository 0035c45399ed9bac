/*
 * api_misuse_test.c - the public API used as a careless user would: NULL
 * pointers where the header allows none, a NULL object handle given to
 * every call of flashtrie.h and flashtrie_client.h that takes one, a
 * result buffer too large for its counters, a part of a manifest used as
 * a whole library, log levels that are no ft_log_level.  Each call must
 * come back with the code (and the message, where the call has an error
 * buffer) that the headers document, never crash or read past its data.
 * Only public calls.
 */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "flashtrie_client.h"
#include "ft_test.h"

static char g_dir[] = "/tmp/ft_misuse.XXXXXX";
static char g_idx[300];

static void cleanup(void)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "api_misuse_test: cannot remove %s\n", g_dir);
}

/* make_index builds the test's library: keys (i % 7, i, 3i) of 1..3
 * tokens, i < 50, each valued its number (a key given twice keeps the
 * first). */
static void make_index(void)
{
    FT_CHECK(mkdtemp(g_dir) != NULL);
    atexit(cleanup);
    snprintf(g_idx, sizeof g_idx, "%s/a.fti", g_dir);
    ft_builder *b;
    char err[256];
    FT_PASS(ft_builder_create(&b, NULL, err, sizeof err));
    for (uint32_t i = 0; i < 50; i++) {
        uint32_t k[3] = {i % 7, i, i * 3};
        FT_PASS(ft_builder_add_auto(b, k, 1 + i % 3));
    }
    FT_PASS(ft_builder_finish(b, NULL, g_idx, err, sizeof err));
    ft_builder_destroy(b);
}

/* ---- the logger ---- */

static char g_line[1400];
static int g_lines;

static void keep_sink(ft_log_level level, const char *line, void *arg)
{
    (void)level;
    (void)arg;
    snprintf(g_line, sizeof g_line, "%s", line);
    g_lines++;
}

static void test_log(void)
{
    ft_log_set_sink(keep_sink, NULL);
    /* a level that is no ft_log_level (names[] has four) and a NULL file */
    ft_log_write((ft_log_level)99, "dir/x.c", 7, "hello %d", 1);
    FT_CHECK_EQ_U64(g_lines, 1);
    FT_CHECK(strstr(g_line, " level99 x.c:7 hello 1") != NULL);
    ft_log_write((ft_log_level)-1, "x.c", 8, "neg");
    FT_CHECK(strstr(g_line, " level-1 x.c:8 neg") != NULL);
    ft_log_write(FT_LOG_WARN, NULL, 9, "nofile");
    FT_CHECK(strstr(g_line, " warn ?:9 nofile") != NULL);
    ft_log_set_sink(NULL, NULL);
}

/* ---- results ---- */

static void test_result(void)
{
    ft_result r;
    /* (2^24 + 1) * 256 tokens wrap cap_tokens (a uint32_t) to 256 */
    FT_FAIL(ft_result_alloc(&r, (1u << 24) + 1, 256), FT_ELIMIT);
    FT_CHECK(r.hits == NULL && r.tokens == NULL && r.cap_tokens == 0);
    FT_CHECK_STR(r.error, "result: 16777217 hits of 256 tokens exceed "
                          "4294967295 token slots");
    FT_FAIL(ft_result_alloc(&r, UINT32_MAX, UINT32_MAX), FT_ELIMIT);
    FT_FAIL(ft_result_alloc(NULL, 1, 1), FT_EINVAL);
    FT_PASS(ft_result_alloc(&r, 4, 3));
    FT_CHECK_EQ_U64(r.cap_tokens, 12);
    ft_result_free(&r);
    ft_result_free(&r); /* freed and zeroed: again is fine */
    ft_result_free(NULL);
}

/* ---- opening ---- */

static void test_open(const ft_index *idx, const ft_library *lib)
{
    char err[256];
    ft_index *x;
    FT_FAIL(ft_index_open(NULL, g_idx, 0, err, sizeof err), FT_EINVAL);
    FT_CHECK_STR(err, "index: out is NULL");
    FT_FAIL(ft_index_open(&x, NULL, 0, err, sizeof err), FT_EINVAL);
    FT_CHECK_STR(err, "index: path is NULL");
    ft_library *l;
    FT_FAIL(ft_library_open(NULL, g_idx, 0, err, sizeof err), FT_EINVAL);
    FT_CHECK_STR(err, "library: out is NULL");
    FT_FAIL(ft_library_open(&l, NULL, 0, err, sizeof err), FT_EINVAL);
    FT_CHECK_STR(err, "library: path is NULL");
    FT_FAIL(ft_library_open_part(&l, NULL, 0, 0, 1, err, sizeof err),
            FT_EINVAL);
    FT_CHECK_STR(err, "library: path is NULL");
    FT_FAIL(ft_engine_open(NULL, idx, NULL, err, sizeof err), FT_EINVAL);
    FT_CHECK_STR(err, "engine: out is NULL");
    ft_searcher *s;
    FT_FAIL(ft_searcher_open(NULL, lib, NULL, err, sizeof err), FT_EINVAL);
    FT_CHECK_STR(err, "searcher: out is NULL");
    FT_FAIL(ft_searcher_open(&s, NULL, NULL, err, sizeof err), FT_EINVAL);
    FT_CHECK_STR(err, "searcher: library is NULL");
    FT_FAIL(ft_ar_open(NULL, idx, NULL, err, sizeof err), FT_EINVAL);
    FT_CHECK_STR(err, "ft_ar_open: out is NULL");
    /* error buffers of 1 byte get the NUL only, of 0 nothing */
    char tiny[2] = {'X', 'Y'};
    FT_FAIL(ft_index_open(&x, NULL, 0, tiny, 1), FT_EINVAL);
    FT_CHECK(tiny[0] == 0 && tiny[1] == 'Y');
    tiny[0] = 'X';
    FT_FAIL(ft_index_open(&x, NULL, 0, tiny, 0), FT_EINVAL);
    FT_CHECK(tiny[0] == 'X');
}

/* ---- queries ---- */

static int count_cb(const uint32_t *toks, size_t n, uint64_t value, void *arg)
{
    (void)toks;
    (void)n;
    (void)value;
    (*(int *)arg)++;
    return 0;
}

static void test_queries(const ft_index *idx, const ft_library *lib)
{
    uint64_t v = 99, seen = 99;
    const uint32_t key[2] = {0, 7}; /* i = 7: (0, 7) */
    FT_FAIL(ft_index_lookup(&v, idx, NULL, 2), FT_EINVAL);
    FT_FAIL(ft_library_lookup(&v, lib, NULL, 2), FT_EINVAL);
    FT_FAIL(ft_index_lookup(&v, idx, NULL, 0), FT_ENOTFOUND);
    FT_PASS(ft_index_lookup(NULL, idx, key, 2)); /* is it a key? */
    FT_PASS(ft_index_lookup(&v, idx, key, 2));
    FT_CHECK_EQ_U64(v, 7);
    int calls = 0;
    FT_FAIL(ft_index_prefix(&seen, idx, NULL, 1, 0, count_cb, &calls),
            FT_EINVAL);
    FT_FAIL(ft_library_prefix(&seen, lib, NULL, 1, 0, count_cb, &calls),
            FT_EINVAL);
    FT_FAIL(ft_index_prefix(&seen, idx, key, 1, 0, NULL, NULL), FT_EINVAL);
    FT_CHECK_EQ_U64(seen, 0);
    FT_FAIL(ft_library_prefix(&seen, lib, NULL, 0, 0, NULL, NULL), FT_EINVAL);
    FT_CHECK_EQ_U64(calls, 0);
    FT_PASS(ft_index_prefix(NULL, idx, NULL, 0, 0, count_cb, &calls));
    FT_CHECK_EQ_U64(calls, ft_index_keys(idx));
    FT_PASS(ft_index_value_at(NULL, idx, 3));
    FT_FAIL(ft_index_value_at(NULL, idx, ft_index_keys(idx)), FT_ENOTFOUND);
}

/* ---- a part of a manifest ---- */

static void test_part(const ft_index *idx)
{
    char err[256], man[320];
    snprintf(man, sizeof man, "%s/m.ftm", g_dir);
    ft_split_opts so;
    memset(&so, 0, sizeof so);
    so.output = man;
    so.shards = 3;
    ft_split_stats st;
    FT_PASS(ft_split(&st, idx, &so, err, sizeof err));
    ft_library *part;
    FT_PASS(ft_library_open_part(&part, man, 0, 0, 1, err, sizeof err));
    FT_CHECK_EQ_U64(ft_library_shards(part), 3);
    FT_CHECK(ft_library_shard(part, 0) != NULL);
    FT_CHECK(ft_library_shard(part, 2) == NULL);
    ft_library_shard_info si;
    FT_PASS(ft_library_shard_get(&si, part, 2));
    /* a key of the part's shard is found; one of a shard it lacks cannot
     * be looked up (it was a NULL index read) */
    uint32_t have[1] = {0}, lack[2] = {si.lo, si.lo};
    uint64_t v;
    FT_PASS(ft_library_lookup(&v, part, have, 1));
    FT_FAIL(ft_library_lookup(&v, part, lack, 1), FT_ESTATE);
    int calls = 0;
    uint64_t seen = 99;
    FT_FAIL(ft_library_prefix(&seen, part, lack, 1, 0, count_cb, &calls),
            FT_ESTATE);
    FT_FAIL(ft_library_prefix(&seen, part, NULL, 0, 0, count_cb, &calls),
            FT_ESTATE);
    FT_CHECK_EQ_U64(calls, 0);
    FT_CHECK_EQ_U64(seen, 0);
    FT_PASS(ft_library_prefix(&seen, part, have, 1, 0, count_cb, &calls));
    FT_CHECK(calls > 0 && seen == (uint64_t)calls);
    /* a searcher needs every shard */
    ft_searcher *s = NULL;
    FT_FAIL(ft_searcher_open(&s, part, NULL, err, sizeof err), FT_EINVAL);
    FT_CHECK_STR(err, "searcher: shard 1 of the library is not open (a part "
                      "from ft_library_open_part)");
    FT_CHECK(s == NULL);
    ft_library_close(part);
    /* the whole manifest's info takes a longer ft_index_info (a caller
     * built with a newer header) as the index's does, and keeps its
     * struct_size and the bytes past this build's fields; a shorter one
     * is refused (it was refused unless exactly this size) */
    ft_library *lib;
    FT_PASS(ft_library_open(&lib, man, 0, err, sizeof err));
    for (int whole = 0; whole < 2; whole++) {
        ft_library *l = lib;
        if (!whole)
            FT_PASS(ft_library_open_part(&l, man, 0, 0, 1, err, sizeof err));
        struct {
            ft_index_info info;
            unsigned char tail[16];
        } big;
        memset(&big, 0xab, sizeof big);
        big.info.struct_size = sizeof big;
        FT_PASS(ft_library_info_get(&big.info, l));
        FT_CHECK_EQ_U64(big.info.struct_size, sizeof big);
        FT_CHECK_EQ_U64(big.info.keys, ft_index_keys(idx));
        for (size_t i = 0; i < sizeof big.tail; i++)
            FT_CHECK(big.tail[i] == 0xab);
        ft_index_info small;
        ft_index_info_init(&small);
        small.struct_size -= 8;
        FT_FAIL(ft_library_info_get(&small, l), FT_EINVAL);
        FT_FAIL(ft_library_info_get(NULL, l), FT_EINVAL);
        if (!whole)
            ft_library_close(l);
    }
    ft_library_close(lib);
}

/* ---- searches ---- */

static void test_search(const ft_index *idx, const ft_library *lib)
{
    char err[256];
    ft_engine *eng;
    FT_PASS(ft_engine_open(&eng, idx, NULL, err, sizeof err));
    ft_request q;
    ft_request_init(&q);
    uint32_t tk[2] = {0, 1};
    float lp[2] = {-1.0f, -2.0f};
    q.T = 1;
    q.K = 2;
    q.tokens = tk;
    q.logp = lp;
    ft_result r;
    FT_PASS(ft_result_alloc(&r, 100, 64));
    FT_FAIL(ft_engine_search(eng, NULL, &r), FT_EINVAL);
    FT_FAIL(ft_engine_search(eng, &q, NULL), FT_EINVAL);
    FT_FAIL(ft_engine_search_batch(eng, NULL, 1, &r), FT_EINVAL);
    FT_FAIL(ft_engine_search_batch(eng, &q, 1, NULL), FT_EINVAL);
    FT_PASS(ft_engine_search_batch(eng, NULL, 0, NULL)); /* nothing to do */
    FT_PASS(ft_engine_search(eng, &q, &r));
    FT_FAIL(ft_request_validate(NULL, 0, err, sizeof err), FT_EINVAL);
    FT_CHECK_STR(err, "request: NULL");
    ft_searcher *s;
    FT_PASS(ft_searcher_open(&s, lib, NULL, err, sizeof err));
    FT_FAIL(ft_searcher_search_batch(s, NULL, 1, &r), FT_EINVAL);
    FT_FAIL(ft_searcher_search_batch(s, &q, 1, NULL), FT_EINVAL);
    FT_PASS(ft_searcher_search_batch(s, &q, 1, &r));
    ft_searcher_close(s);
    ft_result_free(&r);
    ft_engine_close(eng);
}

/* ---- the AR step API ---- */

/* small_ar opens a CPU step session of beam 4 on one thread. */
static ft_ar *small_ar(const ft_index *idx)
{
    char err[256];
    ft_ar_opts o;
    ft_ar_opts_init(&o);
    o.beam = 4;
    o.threads = 1;
    ft_ar *ar;
    FT_PASS(ft_ar_open(&ar, idx, &o, err, sizeof err));
    return ar;
}

static void test_ar(const ft_index *idx)
{
    ft_ar *ar = small_ar(idx);
    FT_FAIL(ft_ar_reset(ar, NULL, NULL), FT_EINVAL);
    FT_CHECK_STR(ft_ar_error(ar), "b: NULL array");
    ft_ar_beams b;
    memset(&b, 0, sizeof b); /* never allocated */
    FT_FAIL(ft_ar_reset(ar, &b, NULL), FT_EINVAL);
    FT_CHECK_STR(ft_ar_error(ar), "b: NULL array");
    FT_PASS(ft_ar_beams_alloc(ar, &b));
    FT_PASS(ft_ar_reset(ar, &b, NULL));
    FT_CHECK_EQ_U64(b.count[0], 1);
    FT_FAIL(ft_ar_alloc(ar, NULL, 16), FT_EINVAL);
    FT_CHECK_STR(ft_ar_error(ar), "alloc: p is NULL");
    FT_PASS(ft_ar_memcpy(ar, NULL, NULL, 0, 1)); /* nothing to copy */
    uint32_t x = 5;
    FT_FAIL(ft_ar_memcpy(ar, NULL, &x, 4, 1), FT_EINVAL);
    FT_CHECK_STR(ft_ar_error(ar), "memcpy: dst is NULL");
    FT_PASS(ft_ar_memcpy(ar, b.count, &x, 4, 1));
    FT_CHECK_EQ_U64(b.count[0], 5);
    ft_ar_beams_free(ar, &b);
    ft_ar_beams_free(ar, &b); /* zeroed: again is fine */
    ft_ar_close(ar);
}

/* ---- NULL handles (flashtrie.h's conventions) ---- */

static void untouched(const void *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        FT_CHECK(((const unsigned char *)p)[i] == 0xab);
}

static void test_null_index(const ft_index *idx, const ft_library *lib)
{
    char err[256];
    const uint32_t tok[1] = {0};
    uint64_t v = 99, seen = 99, at = 99;
    int calls = 0;
    /* a builder */
    FT_FAIL(ft_builder_add(NULL, tok, 1, 0), FT_EINVAL);
    FT_FAIL(ft_builder_add_auto(NULL, tok, 1), FT_EINVAL);
    FT_CHECK_STR(ft_builder_error(NULL), "builder: NULL");
    FT_FAIL(ft_builder_finish(NULL, NULL, g_idx, err, sizeof err), FT_EINVAL);
    FT_CHECK_STR(err, "builder: the builder is NULL");
    ft_builder_destroy(NULL);
    /* an index */
    ft_index_close(NULL);
    ft_index_info info;
    ft_index_info_init(&info);
    FT_FAIL(ft_index_info_get(&info, NULL), FT_EINVAL);
    FT_FAIL(ft_index_lookup(&v, NULL, tok, 1), FT_EINVAL);
    FT_FAIL(ft_index_prefix(&seen, NULL, NULL, 0, 0, count_cb, &calls),
            FT_EINVAL);
    FT_CHECK_EQ_U64(seen, 0);
    ft_node_children ch;
    FT_PASS(ft_index_children(&ch, idx, FT_NODE_ROOT));
    FT_FAIL(ft_index_children(&ch, NULL, FT_NODE_ROOT), FT_EINVAL);
    FT_CHECK_EQ_U64(ft_index_child_label(NULL, &ch, 0), 0);
    FT_CHECK_EQ_U64(ft_index_child_label(idx, NULL, 0), 0);
    FT_FAIL(ft_index_child_find(&at, NULL, &ch, 0), FT_EINVAL);
    FT_FAIL(ft_index_child_find(&at, idx, NULL, 0), FT_EINVAL);
    FT_FAIL(ft_index_node_value(&v, NULL, 1), FT_EINVAL);
    FT_FAIL(ft_index_value_at(&v, NULL, 0), FT_EINVAL);
    FT_CHECK_EQ_U64(ft_index_keys(NULL), 0);
    FT_CHECK(v == 99 && at == 99 && calls == 0);
    ft_split_opts so;
    memset(&so, 0, sizeof so);
    so.output = "/nonexistent/m.ftm";
    so.shards = 2;
    ft_split_stats st;
    FT_FAIL(ft_split(&st, NULL, &so, err, sizeof err), FT_EINVAL);
    FT_CHECK_STR(err, "split: index is NULL");
    /* a library */
    ft_library_close(NULL);
    FT_CHECK_EQ_U64(ft_library_shards(NULL), 0);
    FT_CHECK(ft_library_shard(NULL, 0) == NULL);
    FT_CHECK_EQ_U64(ft_library_is_manifest(NULL), 0);
    FT_FAIL(ft_library_info_get(&info, NULL), FT_EINVAL);
    FT_FAIL(ft_library_lookup(&v, NULL, tok, 1), FT_EINVAL);
    seen = 99;
    FT_FAIL(ft_library_prefix(&seen, NULL, NULL, 0, 0, count_cb, &calls),
            FT_EINVAL);
    FT_CHECK_EQ_U64(seen, 0);
    ft_library_shard_info si;
    memset(&si, 0xab, sizeof si);
    FT_FAIL(ft_library_shard_get(&si, NULL, 0), FT_EINVAL);
    untouched(&si, sizeof si);
    FT_FAIL(ft_library_shard_get(NULL, lib, 0), FT_EINVAL);
    FT_CHECK(v == 99 && calls == 0);
}

static void test_null_search(void)
{
    char err[256];
    ft_request q;
    ft_request_init(&q);
    ft_result r;
    memset(&r, 0, sizeof r);
    /* an engine: every kind refuses a NULL index before it starts */
    ft_engine_kind kinds[3] = {FT_ENGINE_CPU, FT_ENGINE_GPU, FT_ENGINE_AUTO};
    for (int i = 0; i < 3; i++) {
        ft_engine_opts o;
        ft_engine_opts_init(&o);
        o.kind = kinds[i];
        ft_engine *e = (ft_engine *)&o; /* must become NULL */
        FT_FAIL(ft_engine_open(&e, NULL, &o, err, sizeof err), FT_EINVAL);
        FT_CHECK_STR(err, "engine: index is NULL");
        FT_CHECK(e == NULL);
    }
    ft_engine_close(NULL);
    FT_CHECK_STR(ft_engine_name(NULL), "");
    FT_CHECK_STR(ft_engine_note(NULL), "");
    ft_engine_opts eo;
    memset(&eo, 0xab, sizeof eo);
    ft_engine_get_opts(&eo, NULL);
    untouched(&eo, sizeof eo);
    FT_CHECK_EQ_U64(ft_engine_failed(NULL), 0);
    char buf[8] = "x";
    ft_engine_timing_report(NULL, buf, sizeof buf);
    FT_CHECK_STR(buf, "");
    ft_engine_timing_report(NULL, NULL, sizeof buf);
    FT_FAIL(ft_engine_search(NULL, &q, &r), FT_EINVAL);
    FT_FAIL(ft_engine_search_batch(NULL, &q, 1, &r), FT_EINVAL);
    FT_FAIL(ft_engine_search_batch(NULL, NULL, 0, NULL), FT_EINVAL);
    /* a searcher */
    ft_searcher_close(NULL);
    FT_FAIL(ft_searcher_search_batch(NULL, &q, 1, &r), FT_EINVAL);
    FT_FAIL(ft_searcher_search_batch(NULL, NULL, 0, NULL), FT_EINVAL);
    FT_CHECK_STR(ft_searcher_note(NULL), "");
    FT_CHECK_EQ_U64(ft_searcher_failed(NULL), 0);
    FT_CHECK(ft_searcher_kind(NULL) == FT_ENGINE_AUTO);
    FT_CHECK(r.n == 0 && r.status == FT_OK && r.error[0] == 0);
}

static void test_null_ar(const ft_index *idx)
{
    char err[256];
    ft_ar *a = (ft_ar *)err; /* must become NULL */
    FT_FAIL(ft_ar_open(&a, NULL, NULL, err, sizeof err), FT_EINVAL);
    FT_CHECK_STR(err, "ft_ar_open: index is NULL");
    FT_CHECK(a == NULL);
    ft_ar_close(NULL);
    FT_CHECK(ft_ar_kind(NULL) == FT_ENGINE_AUTO);
    ft_ar_opts ao;
    memset(&ao, 0xab, sizeof ao);
    ft_ar_get_opts(&ao, NULL);
    untouched(&ao, sizeof ao);
    FT_CHECK_STR(ft_ar_error(NULL), "ar: NULL");
    FT_FAIL(ft_ar_configure(NULL, 1, 1, -INFINITY, -INFINITY, 1.0),
            FT_EINVAL);
    uint32_t x = 5, y = 6;
    FT_FAIL(ft_ar_memcpy(NULL, &y, &x, 4, 1), FT_EINVAL);
    FT_FAIL(ft_ar_memcpy(NULL, NULL, NULL, 0, 1), FT_EINVAL);
    FT_CHECK_EQ_U64(y, 6);
    ft_ar_beams b, b2;
    memset(&b, 0xab, sizeof b);
    FT_FAIL(ft_ar_beams_alloc(NULL, &b), FT_EINVAL);
    FT_CHECK(b.count == NULL && b.node == NULL && b.token == NULL);
    ft_ar_hits h;
    memset(&h, 0xab, sizeof h);
    FT_FAIL(ft_ar_hits_alloc(NULL, &h), FT_EINVAL);
    FT_CHECK(h.count == NULL && h.sigma == NULL);
    FT_FAIL(ft_ar_beams_alloc(NULL, NULL), FT_EINVAL);
    FT_FAIL(ft_ar_hits_alloc(NULL, NULL), FT_EINVAL);
    /* memory the library never gave out: freeing it with no session must
     * leave it alone */
    b.count = &x;
    h.count = &x;
    ft_ar_beams_free(NULL, &b);
    ft_ar_hits_free(NULL, &h);
    ft_ar_beams_free(NULL, NULL);
    ft_ar_hits_free(NULL, NULL);
    FT_CHECK(b.count == &x && h.count == &x);
    ft_ar_free(NULL, &x);
    ft_ar_free(NULL, NULL);
    void *p = &x;
    FT_FAIL(ft_ar_alloc(NULL, &p, 16), FT_EINVAL);
    FT_CHECK(p == NULL);
    FT_FAIL(ft_ar_alloc(NULL, NULL, 16), FT_EINVAL);
    memset(&b, 0, sizeof b);
    memset(&b2, 0, sizeof b2);
    memset(&h, 0, sizeof h);
    ft_ar_input in;
    memset(&in, 0, sizeof in);
    uint32_t mask[4], entry[4], token[4];
    float logp[4];
    int64_t ids[2] = {0, 0}, state[2];
    FT_FAIL(ft_ar_reset(NULL, &b, NULL), FT_EINVAL);
    FT_FAIL(ft_ar_step(NULL, &b, &in, &b2, &h, NULL), FT_EINVAL);
    FT_FAIL(ft_ar_mask(NULL, &b, 4, NULL, 0, mask, NULL), FT_EINVAL);
    FT_FAIL(ft_ar_constrain(NULL, &b, &in, 1, 0, mask, logp, NULL), FT_EINVAL);
    FT_FAIL(ft_ar_walk(NULL, ids, 2, 1, 0, NULL, NULL, NULL, 0, -1, state,
                       NULL),
            FT_EINVAL);
    FT_FAIL(ft_ar_walk(NULL, NULL, 0, 0, 0, NULL, NULL, NULL, 0, -1, NULL,
                       NULL),
            FT_EINVAL);
    FT_FAIL(ft_ar_topk(NULL, &b, &in, 1, entry, token, logp, NULL),
            FT_EINVAL);
    /* a live session and NULL state structs */
    ft_ar *ar = small_ar(idx);
    FT_FAIL(ft_ar_beams_alloc(ar, NULL), FT_EINVAL);
    FT_CHECK_STR(ft_ar_error(ar), "b: NULL");
    FT_FAIL(ft_ar_hits_alloc(ar, NULL), FT_EINVAL);
    FT_CHECK_STR(ft_ar_error(ar), "h: NULL");
    ft_ar_beams_free(ar, NULL);
    ft_ar_hits_free(ar, NULL);
    ft_ar_get_opts(NULL, ar);
    ft_ar_close(ar);
}

static void null_cb(int status, ft_client_results *res, const char *error,
                    void *arg)
{
    (void)status;
    (void)res;
    (void)error;
    (*(int *)arg)++;
}

static void test_null_client(void)
{
    char err[256];
    ft_request q;
    ft_request_init(&q);
    ft_client_results *out = (ft_client_results *)err;
    ft_client_close(NULL);
    FT_FAIL(ft_client_search(NULL, &q, 1, &out, err, sizeof err), FT_EINVAL);
    FT_CHECK_STR(err, "search: the client is NULL");
    int calls = 0;
    FT_FAIL(ft_client_search_async(NULL, &q, 1, null_cb, &calls, err,
                                   sizeof err),
            FT_EINVAL);
    FT_CHECK_STR(err, "search: the client is NULL");
    FT_CHECK_EQ_U64(calls, 0);
    FT_FAIL(ft_client_search_grids(NULL, &q, 1, &out, err, sizeof err),
            FT_EINVAL);
    FT_CHECK_STR(err, "search: the client is NULL");
    FT_CHECK_EQ_U64(ft_client_results_count(NULL), 0);
    FT_CHECK(ft_client_results_get(NULL, 0) == NULL);
    ft_client_results_free(NULL);
    uint32_t mh = 9, ml = 9;
    FT_CHECK_EQ_U64(ft_client_results_shape(NULL, 0, 5, &mh, &ml), 0);
    FT_CHECK(mh == 0 && ml == 0);
    ft_client_columns cols;
    memset(&cols, 0, sizeof cols);
    FT_FAIL(ft_client_results_columns(NULL, 0, 0, &cols, err, sizeof err),
            FT_EINVAL);
    FT_CHECK_STR(err, "columns: results is NULL");
    FT_FAIL(ft_client_grid_search(NULL), FT_EINVAL);
    FT_FAIL(ft_client_grid_columns(NULL), FT_EINVAL);
    ft_client_grid_call call;
    memset(&call, 0, sizeof call);
    call.grids = q;
    call.n = 1;
    call.errbuf = err;
    call.errlen = sizeof err;
    call.max_hits = call.failed = 7;
    FT_FAIL(ft_client_grid_search(&call), FT_EINVAL);
    FT_CHECK_STR(err, "search: the client is NULL");
    FT_CHECK(call.results == NULL && call.max_hits == 0 && call.failed == 0);
    FT_FAIL(ft_client_grid_columns(&call), FT_EINVAL);
    FT_CHECK_STR(err, "columns: results is NULL");
    FT_FAIL(ft_client_ping(NULL, err, sizeof err), FT_EINVAL);
    FT_CHECK_STR(err, "ping: the client is NULL");
    char *text = err;
    FT_FAIL(ft_client_info(NULL, &text, err, sizeof err), FT_EINVAL);
    FT_CHECK_STR(err, "info: the client is NULL");
    FT_FAIL(ft_client_reload(NULL, NULL, err, sizeof err), FT_EINVAL);
    FT_CHECK_STR(err, "reload: the client is NULL");
    ft_client_text_free(NULL);
}

/* api_misuse_test [CASE]: every case, or only the one named (log,
 * result, open, queries, part, search, ar, null). */
int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : NULL;
#define RUN(name, call)                                                       \
    do {                                                                      \
        if (only == NULL || strcmp(only, name) == 0)                          \
            call;                                                             \
    } while (0)
    make_index();
    char err[256];
    ft_index *idx;
    ft_library *lib;
    FT_PASS(ft_index_open(&idx, g_idx, 0, err, sizeof err));
    FT_PASS(ft_library_open(&lib, g_idx, 0, err, sizeof err));
    RUN("log", test_log());
    RUN("result", test_result());
    RUN("open", test_open(idx, lib));
    RUN("queries", test_queries(idx, lib));
    RUN("part", test_part(idx));
    RUN("search", test_search(idx, lib));
    RUN("ar", test_ar(idx));
    RUN("null", test_null_index(idx, lib));
    RUN("null", test_null_search());
    RUN("null", test_null_ar(idx));
    RUN("null", test_null_client());
    ft_library_close(lib);
    ft_index_close(idx);
    printf("api_misuse_test: ok\n");
    return 0;
}
