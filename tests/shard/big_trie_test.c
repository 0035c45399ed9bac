/*
 * big_trie_test.c - a trie whose LOUDS has more than 2^32 bits.
 *
 * 2^25 keys of 64 tokens with distinct first tokens share no prefix, so the
 * trie has 2^31 + 1 nodes and 2^32 + 3 LOUDS bits: every position, rank and
 * select past bit 2^32 must be 64-bit clean.  The keys go straight into the
 * builder core (no file); sampled keys are then looked up with the same
 * navigation code the engines use, their values checked, and children
 * enumerated.  The count is a power of two so that the builder's per-depth
 * arrays, which grow by doubling, end up exactly full.
 *
 * Peak RSS, measured on the 2-core dev box: 12.0 GiB (the builder's
 * per-depth arrays, 5 bytes a node, plus the finished LOUDS; the big
 * sections are calloc'ed and filled while the per-depth arrays are freed,
 * so they never coexist in full); 111 s there.  The test skips when
 * MemAvailable is below FT_BIG_NEED_KB, the peak plus 1 GiB of margin.
 */
#include <unistd.h>

#include "ft_test.h"
#include "trie.h"

#define NKEYS (1u << 25)
#define LEN 64u
#define FT_BIG_NEED_KB (13ull << 20) /* 13 GiB */

static uint32_t tok(uint32_t i, uint32_t j)
{
    /* tok0 = i keeps the keys sorted; the rest stay below 2^16, except a
     * few, so the label_hi section is exercised without growing huge. */
    if (j == 0)
        return i;
    uint32_t h = (i * 2654435761u) ^ (j * 40503u);
    return (j == LEN - 1 && (i & 1023) == 0) ? h | 0x10000u : h & 0xffffu;
}

static uint64_t value_of(uint32_t i) { return (uint64_t)i * 3 + 1; }

static unsigned long long meminfo_kb(const char *key)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long v = 0;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':')
            v = strtoull(line + n + 1, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

static unsigned long long peak_rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long v = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6))
            v = strtoull(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

/* lookup walks a key from the root; FT_NONE when an edge is missing. */
static uint64_t lookup(const ft_trie *t, const uint32_t *k, uint32_t n)
{
    uint64_t u = 0;
    for (uint32_t d = 0; d < n; d++) {
        ft_child_range cr = ft_children(&t->view, u);
        if (cr.deg == 0)
            return FT_NONE;
        u = ft_find_child(&t->view, &cr, k[d]);
        if (u == FT_NONE)
            return FT_NONE;
    }
    return u;
}

int main(void)
{
    unsigned long long avail = meminfo_kb("MemAvailable");
    if (avail < FT_BIG_NEED_KB) {
        printf("skipped: needs %llu MiB of MemAvailable, %llu MiB free\n",
               FT_BIG_NEED_KB >> 10, avail >> 10);
        return FT_TEST_SKIP;
    }
    double t0 = fti_now();
    ft_tb *tb;
    FT_PASS(ft_tb_create(&tb));
    uint32_t k[LEN];
    for (uint32_t i = 0; i < NKEYS; i++) {
        for (uint32_t j = 0; j < LEN; j++)
            k[j] = tok(i, j);
        FT_PASS(ft_tb_add(tb, k, LEN, value_of(i)));
    }
    double t1 = fti_now();
    ft_trie t;
    FT_PASS(ft_tb_finish(tb, LEN, &t));
    ft_tb_destroy(tb);
    double t2 = fti_now();
    FT_CHECK_EQ_U64(t.view.n_nodes, (1ull << 31) + 1);
    FT_CHECK(t.view.louds_bits > (1ull << 32));
    FT_CHECK_EQ_U64(t.n_keys, NKEYS);
    FT_CHECK_EQ_U64(t.root_fanout, NKEYS);

    /* The root's children: every first token, in order. */
    ft_child_range root = ft_children(&t.view, 0);
    FT_CHECK_EQ_U64(root.deg, NKEYS);
    FT_CHECK_EQ_U64(root.first, 1);
    uint64_t s = 7;
    for (int q = 0; q < 2000; q++) {
        uint32_t i = (uint32_t)(ft_test_rand(&s) % NKEYS);
        if (q < 4) /* the ends, where the bits past 2^32 live */
            i = q < 2 ? (uint32_t)q : NKEYS - 1 - (uint32_t)(q - 2);
        FT_CHECK_EQ_U64(ft_child_label(&t.view, &root, root.first + i), i);
        for (uint32_t j = 0; j < LEN; j++)
            k[j] = tok(i, j);
        uint64_t u = lookup(&t, k, LEN);
        FT_CHECK(u != FT_NONE);
        FT_CHECK_EQ_U64(ft_node_flags(&t.view, u), FT_TERMINAL);
        FT_CHECK_EQ_U64(ft_trie_value(&t, u), value_of(i));
        /* Every inner node of the path has exactly one child, the next
         * token; the leaf has none. */
        uint64_t v = 0;
        for (uint32_t d = 1; d < LEN; d++) {
            ft_child_range cr = ft_children(&t.view, v);
            uint64_t c = ft_find_child(&t.view, &cr, k[d - 1]);
            FT_CHECK(c != FT_NONE);
            ft_child_range cc = ft_children(&t.view, c);
            FT_CHECK_EQ_U64(cc.deg, 1);
            FT_CHECK_EQ_U64(ft_child_label(&t.view, &cc, cc.first), k[d]);
            FT_CHECK_EQ_U64(ft_node_flags(&t.view, c), FT_HAS_CHILD);
            v = c;
        }
        FT_CHECK_EQ_U64(ft_children(&t.view, u).deg, 0);
        /* Not keys: a prefix, and a changed last token. */
        FT_CHECK(!(ft_node_flags(&t.view, lookup(&t, k, LEN - 1)) &
                   FT_TERMINAL));
        k[LEN - 1] ^= 0x20000u;
        FT_CHECK(lookup(&t, k, LEN) == FT_NONE);
    }
    /* The last node is the leaf of the last key. */
    for (uint32_t j = 0; j < LEN; j++)
        k[j] = tok(NKEYS - 1, j);
    FT_CHECK_EQ_U64(lookup(&t, k, LEN), t.view.n_nodes - 1);
    FT_CHECK_EQ_U64(ft_trie_term_rank(&t, t.view.n_nodes - 1), NKEYS - 1);
    ft_trie_free(&t);
    printf("big trie: %llu nodes, add %.1f s, finish %.1f s, check %.1f s, "
           "peak RSS %llu MiB\n", (1ull << 31) + 1, t1 - t0, t2 - t1,
           fti_now() - t2, peak_rss_kb() >> 10);
    return 0;
}
