/* workload_test.c - the synthetic workload generator: byte-identical
 * output for a seed whatever the threads, distinct sorted keys with the
 * documented shape, and requests that pass docs/specification.md section 3. */
#include <jansson.h>
#include <math.h>
#include <unistd.h>

#include "ft_test.h"
#include "trie.h"
#include "workload.h"

typedef struct mem {
    char *p;
    size_t len, cap;
} mem;

static int mem_sink(const void *buf, size_t len, void *arg)
{
    mem *m = arg;
    if (m->len + len > m->cap) {
        m->cap = (m->len + len) * 2;
        m->p = realloc(m->p, m->cap);
        if (m->p == NULL)
            return FT_ENOMEM;
    }
    memcpy(m->p + m->len, buf, len);
    m->len += len;
    return 0;
}

static mem gen(uint64_t n, uint64_t seed, int threads, ft_wl_format fmt,
               ft_wl_keys_stats *st)
{
    ft_wl_keys_opts o;
    ft_wl_keys_opts_init(&o);
    o.n = n;
    o.seed = seed;
    o.threads = threads;
    mem m = {0};
    FT_PASS(ft_wl_keys_write(st, &o, fmt, mem_sink, &m));
    return m;
}

static int tb_cb(const uint32_t *toks, uint32_t n, void *arg)
{
    static uint64_t v;
    return ft_tb_add(arg, toks, n, v++);
}

static void test_keys(void)
{
    ft_wl_keys_stats a, b, c;
    /* 300k keys cross the piece size, so several pieces and threads run. */
    mem t1 = gen(300000, 42, 1, FT_WL_TEXT, &a);
    mem t3 = gen(300000, 42, 3, FT_WL_TEXT, &b);
    mem t1b = gen(300000, 42, 1, FT_WL_TEXT, &c);
    FT_CHECK_EQ_U64(t1.len, t3.len);
    FT_CHECK(memcmp(t1.p, t3.p, t1.len) == 0);
    FT_CHECK(t1b.len == t1.len && memcmp(t1.p, t1b.p, t1.len) == 0);
    FT_CHECK_EQ_U64(a.nodes, b.nodes);
    FT_CHECK_EQ_U64(a.keys, 300000);
    mem other = gen(300000, 43, 2, FT_WL_TEXT, NULL);
    FT_CHECK(other.len != t1.len || memcmp(other.p, t1.p, t1.len) != 0);

    /* The binary form carries the same keys. */
    mem f2 = gen(300000, 42, 2, FT_WL_FTK, NULL);
    FT_CHECK_EQ_U64(f2.len, 4 * (a.keys + a.tokens));
    const char *tp = t1.p;
    const uint32_t *w = (const uint32_t *)f2.p;
    for (uint64_t i = 0; i < a.keys; i++) {
        uint32_t n = *w++;
        for (uint32_t j = 0; j < n; j++) {
            char *end;
            unsigned long v = strtoul(tp, &end, 10);
            FT_CHECK_EQ_U64(v, *w++);
            tp = end + 1;
        }
        FT_CHECK(tp[-1] == '\n');
    }

    /* Keys are distinct and sorted: the builder core accepts them as is,
     * and the trie has the node count the generator reports. */
    ft_tb *tb;
    FT_PASS(ft_tb_create(&tb));
    ft_wl_keys_opts o;
    ft_wl_keys_opts_init(&o);
    o.n = 300000;
    o.seed = 42;
    o.threads = 2;
    FT_PASS(ft_wl_keys_each(NULL, &o, tb_cb, tb));
    ft_trie tr;
    FT_PASS(ft_tb_finish(tb, 64, &tr));
    ft_tb_destroy(tb);
    FT_CHECK_EQ_U64(tr.n_keys, 300000);
    FT_CHECK_EQ_U64(tr.view.n_nodes, a.nodes);
    FT_CHECK_EQ_U64(tr.root_fanout, a.root_fanout);
    ft_trie_free(&tr);

    /* The documented shape (docs/workload.md). */
    double npk = (double)a.nodes / (double)a.keys;
    double hi = (double)a.high_labels / (double)(a.nodes - 1);
    double ml = (double)a.tokens / (double)a.keys;
    fprintf(stderr, "nodes/key %.3f high %.3f mean_len %.3f fanout %llu\n",
            npk, hi, ml, (unsigned long long)a.root_fanout);
    FT_CHECK(npk > 1.8 && npk < 3.2);
    FT_CHECK(hi > 0.18 && hi < 0.32);
    FT_CHECK(ml > 4.0 && ml < 5.6);
    free(t1.p);
    free(t3.p);
    free(t1b.p);
    free(other.p);
    free(f2.p);
}

static void check_request(const ft_request *r, uint32_t T, uint32_t K)
{
    char err[160];
    FT_CHECK_EQ_U64(r->T, T);
    FT_CHECK_EQ_U64(r->K, K);
    FT_PASS(ft_request_validate(r, 0, err, sizeof err));
    for (uint32_t t = 0; t < T; t++) {
        for (uint32_t k = 0; k < K; k++) {
            float lp = r->logp[t * K + k];
            FT_CHECK(isfinite(lp) && lp < 0.5f);
            if (k)
                FT_CHECK(lp <= r->logp[t * K + k - 1]);
            for (uint32_t j = 0; j < k; j++)
                FT_CHECK(r->tokens[t * K + j] != r->tokens[t * K + k]);
        }
    }
}

static int stop_cb(const uint32_t *t, size_t n, uint64_t v, void *arg)
{
    return 1;
}

static void test_requests(void)
{
    char path[] = "/tmp/ft_wl_testXXXXXX";
    int fd = mkstemp(path);
    FT_CHECK(fd >= 0);
    close(fd);
    ft_wl_keys_opts ko;
    ft_wl_keys_opts_init(&ko);
    ko.n = 50000;
    ko.seed = 5;
    char err[512];
    FT_PASS(ft_wl_build_index(NULL, &ko, path, err, sizeof err));
    ft_index *idx;
    FT_PASS(ft_index_open(&idx, path, 0, err, sizeof err));
    unlink(path);

    ft_wl_req_opts ro;
    ft_wl_req_opts_init(&ro);
    ro.n = 20;
    ro.seed = 9;
    ro.beam = 64;
    ro.K = 200;
    ro.head = 20;
    ro.head_set = 1;
    ro.has_alpha = 1;
    ro.alpha = 0.7;
    ft_wl_reqs *g, *g2;
    FT_PASS(ft_wl_reqs_open(&g, idx, &ro, err, sizeof err));
    FT_PASS(ft_wl_reqs_open(&g2, idx, &ro, err, sizeof err));
    uint64_t head_hits = 0;
    for (uint64_t i = 0; i < ro.n; i++) {
        ft_request a, b;
        FT_PASS(ft_wl_reqs_make(g, i, 0, &a));
        FT_PASS(ft_wl_reqs_make(g2, i, 1, &b));
        check_request(&a, 8, 200);
        FT_CHECK(memcmp(a.tokens, b.tokens, 8 * 200 * 4) == 0);
        FT_CHECK(memcmp(a.logp, b.logp, 8 * 200 * 4) == 0);
        FT_CHECK(a.beam == 64 && a.alpha == 0.7);
        /* The head makes the grid spell a key: some key's first token is
         * among the first 20 proposals of position 0. */
        uint64_t v;
        for (uint32_t k = 0; k < 20; k++)
            head_hits += ft_index_lookup(&v, idx, &a.tokens[k], 1) == FT_OK ||
                         ft_index_prefix(NULL, idx, &a.tokens[k], 1, 1, stop_cb, NULL) == FT_OK;
    }
    FT_CHECK(head_hits > 0);

    /* JSON Lines: every float parses back to the same binary32. */
    char jpath[] = "/tmp/ft_wl_reqXXXXXX";
    fd = mkstemp(jpath);
    FT_CHECK(fd >= 0);
    FILE *f = fdopen(fd, "w+");
    FT_PASS(ft_wl_reqs_write(g, f, err, sizeof err));
    rewind(f);
    char *line = NULL;
    size_t cap = 0;
    uint64_t i = 0;
    while (getline(&line, &cap, f) > 0) {
        json_error_t je;
        json_t *o = json_loads(line, 0, &je);
        FT_CHECK(o != NULL);
        ft_request a;
        FT_PASS(ft_wl_reqs_make(g2, i, 0, &a));
        FT_CHECK_EQ_U64(json_integer_value(json_object_get(o, "id")), i);
        json_t *toks = json_object_get(o, "tokens"), *lps = json_object_get(o, "logp");
        FT_CHECK_EQ_U64(json_array_size(toks), 8);
        for (uint32_t t = 0; t < 8; t++)
            for (uint32_t k = 0; k < 200; k++) {
                json_t *x = json_array_get(json_array_get(toks, t), k);
                json_t *y = json_array_get(json_array_get(lps, t), k);
                FT_CHECK(json_is_integer(x));
                FT_CHECK_EQ_U64(json_integer_value(x), a.tokens[t * 200 + k]);
                float lp = (float)json_number_value(y);
                FT_CHECK(memcmp(&lp, &a.logp[t * 200 + k], 4) == 0);
            }
        FT_CHECK(json_real_value(json_object_get(o, "alpha")) == 0.7);
        json_decref(o);
        i++;
    }
    FT_CHECK_EQ_U64(i, ro.n);
    free(line);
    fclose(f);
    unlink(jpath);
    ft_wl_reqs_close(g);
    ft_wl_reqs_close(g2);
    ft_index_close(idx);
}

int main(void)
{
    test_keys();
    test_requests();
    return 0;
}
