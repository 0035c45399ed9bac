/*
 * trie_core_test.c - the LOUDS trie against a naive sorted set.
 *
 * Random libraries (tiny and large vocabularies, tokens 0 and 4294967295,
 * prefixes of other keys, duplicates) are built with the builder core,
 * written, mapped back and checked: every key found with its value,
 * non-keys not found, every node's children equal to the naive set's.
 */
#include <unistd.h>

#include "ft_test.h"
#include "trie.h"

typedef struct key {
    uint32_t len;
    uint32_t t[12];
    uint64_t value;
} key;

static int key_cmp(const void *a, const void *b)
{
    const key *x = a, *y = b;
    return ft_test_toks_cmp(x->t, x->len, y->t, y->len);
}

static uint32_t rand_tok(uint64_t *s, int vocab)
{
    uint64_t r = ft_test_rand(s);
    switch (vocab) {
    case 0: return (uint32_t)(r % 3);                  /* tiny */
    case 1: return (uint32_t)(r % 70000);              /* straddles 2^16 */
    case 2: {                                          /* extremes */
        static const uint32_t ex[] = {0, 1, 65535, 65536, 4294967295u,
                                      4294967294u, 1u << 31};
        return ex[r % 7];
    }
    default: return (uint32_t)r;                       /* full 32-bit */
    }
}

typedef struct walk_ctx {
    const key *keys;
    size_t n, i;
} walk_ctx;

static int check_walk(const uint32_t *toks, size_t n, uint64_t value, void *arg)
{
    walk_ctx *w = arg;
    FT_CHECK(w->i < w->n);
    const key *k = &w->keys[w->i++];
    FT_CHECK_EQ_U64(n, k->len);
    FT_CHECK(memcmp(toks, k->t, n * 4) == 0);
    FT_CHECK_EQ_U64(value, k->value);
    return 0;
}

/* check_parts builds keys[0, m) split at first-token boundaries into np
 * builders (some empty) and finishes them with ft_tb_finish_parts on
 * several threads: every section must equal the one-builder trie ref. */
static void check_parts(const key *keys, size_t m, int np, int threads,
                        uint64_t *s, const ft_trie *ref)
{
    ft_tb *tbs[16];
    FT_CHECK(np <= 16);
    for (int p = 0; p < np; p++)
        FT_PASS(ft_tb_create(&tbs[p]));
    int p = 0;
    for (size_t i = 0; i < m; i++) {
        /* Move on to a later part only where the first token changes. */
        if (i > 0 && keys[i].t[0] != keys[i - 1].t[0] && p < np - 1 &&
            ft_test_rand(s) % 3 == 0)
            p += 1 + (int)(ft_test_rand(s) % 2); /* sometimes skip one */
        if (p > np - 1)
            p = np - 1;
        FT_PASS(ft_tb_add(tbs[p], keys[i].t, keys[i].len, keys[i].value));
    }
    ft_trie t;
    FT_PASS(ft_tb_finish_parts(tbs, (size_t)np, 64, threads, &t, NULL));
    for (int q = 0; q < np; q++)
        ft_tb_destroy(tbs[q]);
    FT_CHECK_EQ_U64(t.view.n_nodes, ref->view.n_nodes);
    FT_CHECK_EQ_U64(t.n_keys, ref->n_keys);
    FT_CHECK_EQ_U64(t.root_fanout, ref->root_fanout);
    FT_CHECK_EQ_U64(t.max_depth, ref->max_depth);
    FT_CHECK_EQ_U64(t.value_bits, ref->value_bits);
    FT_CHECK_EQ_U64(t.view.hi_bits, ref->view.hi_bits);
    for (int sec = 0; sec < FT_SEC_COUNT; sec++) {
        FT_CHECK_EQ_U64(t.sec_bytes[sec], ref->sec_bytes[sec]);
        FT_CHECK(memcmp(t.sec[sec], ref->sec[sec], t.sec_bytes[sec]) == 0);
    }
    ft_trie_free(&t);
}

static void run_case(uint64_t seed, size_t nkeys, int vocab, const char *path)
{
    uint64_t s = seed;
    key *keys = calloc(nkeys + 1, sizeof *keys);
    for (size_t i = 0; i < nkeys; i++) {
        if (i > 0 && ft_test_rand(&s) % 5 == 0) {
            /* a prefix or an extension of an earlier key, or a duplicate */
            key *o = &keys[ft_test_rand(&s) % i];
            keys[i] = *o;
            uint32_t mode = (uint32_t)(ft_test_rand(&s) % 3);
            if (mode == 0 && o->len > 1)
                keys[i].len = 1 + (uint32_t)(ft_test_rand(&s) % (o->len - 1));
            else if (mode == 1 && o->len < 12)
                keys[i].t[keys[i].len++] = rand_tok(&s, vocab);
        } else {
            keys[i].len = 1 + (uint32_t)(ft_test_rand(&s) % 12);
            for (uint32_t j = 0; j < keys[i].len; j++)
                keys[i].t[j] = rand_tok(&s, vocab);
        }
        keys[i].value = i;
    }
    /* stable by key, then value: the first occurrence wins */
    qsort(keys, nkeys, sizeof *keys, key_cmp); /* values tie-break below */
    size_t m = 0;
    for (size_t i = 0; i < nkeys; i++) {
        if (m > 0 && key_cmp(&keys[m - 1], &keys[i]) == 0) {
            if (keys[i].value < keys[m - 1].value)
                keys[m - 1].value = keys[i].value;
            continue;
        }
        keys[m++] = keys[i];
    }
    ft_tb *tb;
    FT_PASS(ft_tb_create(&tb));
    for (size_t i = 0; i < m; i++)
        FT_PASS(ft_tb_add(tb, keys[i].t, keys[i].len, keys[i].value));
    if (m > 0)
        FT_FAIL(ft_tb_add(tb, keys[m - 1].t, keys[m - 1].len, 0), FT_EINVAL);
    ft_trie t;
    FT_PASS(ft_tb_finish(tb, 64, &t));
    ft_tb_destroy(tb);
    check_parts(keys, m, 1, 1, &s, &t);
    check_parts(keys, m, 5, 3, &s, &t);
    check_parts(keys, m, 16, 16, &s, &t);
    char err[256] = "";
    FT_PASS(ft_trie_write(&t, path, err, sizeof err));
    ft_trie_free(&t);
    ft_index *idx;
    FT_PASS(ft_index_open(&idx, path, 0, err, sizeof err));
    ft_index_info info;
    ft_index_info_init(&info);
    FT_PASS(ft_index_info_get(&info, idx));
    FT_CHECK_EQ_U64(info.keys, m);
    /* a key is a leaf unless the next key in sorted order extends it */
    uint64_t leaves = 0;
    for (size_t i = 0; i < m; i++)
        leaves += !(i + 1 < m && keys[i + 1].len > keys[i].len &&
                    memcmp(keys[i + 1].t, keys[i].t, keys[i].len * 4) == 0);
    FT_CHECK_EQ_U64(info.leaves, leaves + (m == 0)); /* a lone root is a leaf */
    for (size_t i = 0; i < m; i++) {
        uint64_t v = ~0ull;
        FT_PASS(ft_index_lookup(&v, idx, keys[i].t, keys[i].len));
        FT_CHECK_EQ_U64(v, keys[i].value);
    }
    /* non-keys: random probes absent from the naive set */
    for (int i = 0; i < 2000; i++) {
        key probe = {0};
        probe.len = 1 + (uint32_t)(ft_test_rand(&s) % 12);
        for (uint32_t j = 0; j < probe.len; j++)
            probe.t[j] = rand_tok(&s, vocab);
        int present = bsearch(&probe, keys, m, sizeof *keys, key_cmp) != NULL;
        uint64_t v;
        FT_FAIL(ft_index_lookup(&v, idx, probe.t, probe.len),
                present ? FT_OK : FT_ENOTFOUND);
    }
    /* full enumeration equals the naive sorted set (child order, labels,
     * terminal flags and values at once) */
    walk_ctx w = {keys, m, 0};
    uint64_t seen;
    FT_PASS(ft_index_prefix(&seen, idx, NULL, 0, 0, check_walk, &w));
    FT_CHECK_EQ_U64(seen, m);
    /* prefix enumeration for the prefixes of some keys */
    for (int i = 0; i < 50 && m > 0; i++) {
        const key *k = &keys[ft_test_rand(&s) % m];
        uint32_t plen = 1 + (uint32_t)(ft_test_rand(&s) % k->len);
        size_t lo = 0;
        key p = *k;
        p.len = plen;
        while (lo < m && key_cmp(&keys[lo], &p) < 0)
            lo++;
        size_t hi = lo;
        while (hi < m && keys[hi].len >= plen &&
               memcmp(keys[hi].t, p.t, plen * 4) == 0)
            hi++;
        walk_ctx pw = {keys + lo, hi - lo, 0};
        FT_PASS(ft_index_prefix(&seen, idx, p.t, plen, 0, check_walk, &pw));
        FT_CHECK_EQ_U64(seen, hi - lo);
        if (hi - lo > 2) {
            walk_ctx lw = {keys + lo, 2, 0};
            FT_PASS(ft_index_prefix(&seen, idx, p.t, plen, 2, check_walk, &lw));
            FT_CHECK_EQ_U64(seen, 2);
        }
    }
    ft_index_close(idx);
    free(keys);
}

int main(void)
{
    char path[] = "/tmp/ft_trie_core_XXXXXX";
    int fd = mkstemp(path);
    FT_CHECK(fd >= 0);
    close(fd);
    static const size_t sizes[] = {0, 1, 2, 10, 100, 1000, 20000, 200000};
    uint64_t seed = 1;
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (int vocab = 0; vocab < 4; vocab++)
            run_case(seed++, sizes[si], vocab, path);
    unlink(path);
    printf("trie_core_test: ok\n");
    return 0;
}
