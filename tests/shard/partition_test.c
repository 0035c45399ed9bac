/*
 * partition_test.c - the partition and ft_split: subtree sizes against a
 * brute-force count, the chosen ranges against an exhaustive optimum,
 * every key in exactly its shard with its value, shard files byte for byte
 * what the builder makes of their keys, balance, a skewed library, too few
 * first tokens, and byte budgets with their exact messages.
 */
#include "partition_util.h"

typedef struct brute {
    size_t F;
    uint32_t tok[70000];
    uint64_t nodes[70000], high[70000], keys[70000];
} brute;

static brute B;

/* brute_count sizes the first-token subtrees from the sorted keys: key i
 * adds the nodes of depths lcp(i-1, i)+1 .. len. */
static void brute_count(const su_key *k, size_t m)
{
    B.F = 0;
    for (size_t i = 0; i < m; i++) {
        uint32_t lcp = 0;
        if (i > 0) {
            while (lcp < k[i].len && lcp < k[i - 1].len &&
                   k[i].t[lcp] == k[i - 1].t[lcp])
                lcp++;
        }
        if (lcp == 0) {
            FT_CHECK(B.F < 70000);
            B.tok[B.F] = k[i].t[0];
            B.nodes[B.F] = B.high[B.F] = B.keys[B.F] = 0;
            B.F++;
        }
        size_t f = B.F - 1;
        B.nodes[f] += k[i].len - lcp;
        for (uint32_t j = lcp; j < k[i].len; j++)
            B.high[f] += k[i].t[j] >= 65536;
        B.keys[f]++;
    }
}

static uint64_t brute_cost(size_t a, size_t b, uint32_t hi_bits)
{
    uint64_t n = 0, h = 0;
    for (size_t i = a; i < b; i++) {
        n += B.nodes[i];
        h += B.high[i];
    }
    return ft_shard_trie_bytes(n, h, hi_bits);
}

/* best_max is the smallest possible largest shard over every cut of the
 * F subtrees into n non-empty contiguous ranges (dynamic programming). */
static uint64_t best_max(uint32_t n, uint32_t hi_bits)
{
    size_t F = B.F;
    uint64_t *dp = malloc((F + 1) * sizeof *dp), *nx = malloc((F + 1) * sizeof *nx);
    FT_CHECK(dp && nx);
    for (size_t j = 0; j <= F; j++)
        dp[j] = j == 0 ? 0 : UINT64_MAX;
    for (uint32_t k = 1; k <= n; k++) {
        for (size_t j = 0; j <= F; j++) {
            nx[j] = UINT64_MAX;
            for (size_t i = k - 1; i < j; i++) {
                if (dp[i] == UINT64_MAX)
                    continue;
                uint64_t c = brute_cost(i, j, hi_bits);
                uint64_t v = dp[i] > c ? dp[i] : c;
                if (v < nx[j])
                    nx[j] = v;
            }
        }
        uint64_t *t = dp;
        dp = nx;
        nx = t;
    }
    uint64_t r = dp[F];
    free(dp);
    free(nx);
    return r;
}

typedef struct walk {
    const su_key *k;
    size_t m, at;
} walk;

static int walk_cb(const uint32_t *toks, size_t n, uint64_t value, void *arg)
{
    walk *w = arg;
    FT_CHECK(w->at < w->m);
    const su_key *k = &w->k[w->at++];
    FT_CHECK_EQ_U64(n, k->len);
    FT_CHECK(memcmp(toks, k->t, n * 4) == 0);
    FT_CHECK_EQ_U64(value, k->value);
    return 0;
}

/* shard_file_same checks that a shard file is byte for byte what the
 * builder core writes for the keys of its range. */
static void shard_file_same(const char *dir, const ft_manifest_shard *s,
                            const su_key *k, size_t m)
{
    ft_tb *tb;
    FT_PASS(ft_tb_create(&tb));
    for (size_t i = 0; i < m; i++)
        if (k[i].t[0] >= s->lo && k[i].t[0] <= s->hi)
            FT_PASS(ft_tb_add(tb, k[i].t, k[i].len, k[i].value));
    ft_trie t;
    FT_PASS(ft_tb_finish(tb, SU_MAX_LEN, &t));
    ft_tb_destroy(tb);
    char path[4200], err[256];
    snprintf(path, sizeof path, "%s/expect.idx", dir);
    FT_PASS(ft_trie_write(&t, path, err, sizeof err));
    ft_trie_free(&t);
    size_t la, lb;
    unsigned char *a = pu_read(path, &la), *b = pu_read(s->path, &lb);
    FT_CHECK_EQ_U64(la, lb);
    FT_CHECK(memcmp(a, b, la) == 0);
    free(a);
    free(b);
    unlink(path);
}

/* check_split splits idx into n shards and checks everything about them. */
static void check_split(const char *dir, const ft_index *idx, const su_key *k,
                        size_t m, uint32_t n, int threads, uint64_t *s)
{
    char mpath[4200], err[1024];
    snprintf(mpath, sizeof mpath, "%s/lib.ftm", dir);
    FT_PASS(pu_split(idx, mpath, n, 0, threads, err, sizeof err));
    ft_partition p;
    FT_PASS(ft_partition_make(&p, idx, n, 0, err, sizeof err));
    FT_CHECK_EQ_U64(p.n, n);
    ft_manifest *mf;
    FT_PASS(ft_manifest_open(&mf, mpath, 0, err, sizeof err));
    FT_CHECK_EQ_U64(mf->n_shards, n);
    FT_CHECK(mf->is_manifest);
    FT_CHECK_EQ_U64(mf->keys, m);
    FT_CHECK_EQ_U64(mf->value_bits, idx->trie.value_bits);
    /* the ranges tile 0..2^32-1 in order and match the partition */
    uint64_t next = 0, keys = 0, most = 0;
    for (uint32_t i = 0; i < n; i++) {
        const ft_manifest_shard *sh = &mf->shards[i];
        FT_CHECK_EQ_U64(sh->lo, next);
        FT_CHECK(sh->hi >= sh->lo);
        next = (uint64_t)sh->hi + 1;
        FT_CHECK_EQ_U64(sh->lo, p.parts[i].lo);
        FT_CHECK_EQ_U64(sh->hi, p.parts[i].hi);
        FT_CHECK_EQ_U64(sh->keys, p.parts[i].keys);
        FT_CHECK_EQ_U64(sh->nodes, p.parts[i].nodes);
        FT_CHECK(sh->keys > 0);
        FT_CHECK(sh->trie_bytes <= p.parts[i].bytes);
        keys += sh->keys;
        most = p.parts[i].bytes > most ? p.parts[i].bytes : most;
        char want[64];
        snprintf(want, sizeof want, "lib.ftm.shard-%03u-of-%03u.idx", i, n);
        FT_CHECK_STR(sh->name, want);
        shard_file_same(dir, sh, k, m);
    }
    FT_CHECK_EQ_U64(next, 1ull << 32);
    FT_CHECK_EQ_U64(keys, m);
    /* the largest shard is as small as any cut into n ranges allows */
    if (B.F <= 400)
        FT_CHECK_EQ_U64(most, best_max(n, idx->trie.view.hi_bits));
    /* every key in exactly its shard, with its value */
    for (size_t i = 0; i < m; i++) {
        uint32_t sh = ft_shard_of_token(mf, k[i].t[0]);
        FT_CHECK(k[i].t[0] >= mf->shards[sh].lo && k[i].t[0] <= mf->shards[sh].hi);
        for (uint32_t j = 0; j < n; j++) {
            uint64_t v = ~0ull;
            int rc = ft_index_lookup(&v, mf->shards[j].idx, k[i].t, k[i].len);
            FT_CHECK_EQ_U64(rc, j == sh ? FT_OK : FT_ENOTFOUND);
            if (j == sh)
                FT_CHECK_EQ_U64(v, k[i].value);
        }
        uint64_t v = ~0ull;
        FT_PASS(ft_manifest_lookup(&v, mf, k[i].t, k[i].len));
        FT_CHECK_EQ_U64(v, k[i].value);
    }
    /* non-keys: the same answer as the unsharded index */
    for (int q = 0; q < 2000; q++) {
        const su_key *b = &k[ft_test_rand(s) % m];
        uint32_t t[SU_MAX_LEN + 1];
        uint32_t len = b->len;
        memcpy(t, b->t, len * 4);
        if (q % 3 == 0 && len < SU_MAX_LEN)
            t[len++] = (uint32_t)ft_test_rand(s);
        else if (q % 3 == 1 && len > 1)
            len--;
        else
            t[len - 1] ^= 1u << (ft_test_rand(s) % 32);
        uint64_t v1 = 1, v2 = 2;
        int r1 = ft_index_lookup(&v1, idx, t, len);
        int r2 = ft_manifest_lookup(&v2, mf, t, len);
        FT_CHECK_EQ_U64(r1, r2);
        if (r1 == FT_OK)
            FT_CHECK_EQ_U64(v1, v2);
    }
    FT_FAIL(ft_manifest_lookup(NULL, mf, k[0].t, 0), FT_ENOTFOUND);
    /* the union, in order: an empty prefix walks every shard */
    walk w = {k, m, 0};
    uint64_t seen;
    FT_PASS(ft_manifest_prefix(&seen, mf, NULL, 0, 0, walk_cb, &w));
    FT_CHECK_EQ_U64(w.at, m);
    FT_CHECK_EQ_U64(seen, m);
    /* a limit counts across shards */
    for (uint64_t lim = 1; lim <= m; lim = lim * 3 + 1) {
        walk w2 = {k, lim, 0};
        FT_PASS(ft_manifest_prefix(&seen, mf, NULL, 0, lim, walk_cb, &w2));
        FT_CHECK_EQ_U64(seen, lim);
        FT_CHECK_EQ_U64(w2.at, lim);
    }
    /* a non-empty prefix goes to its shard: the keys under k's first one */
    size_t at = ft_test_rand(s) % m, lo = at, hi = at;
    while (lo > 0 && k[lo - 1].t[0] == k[at].t[0])
        lo--;
    while (hi < m && k[hi].t[0] == k[at].t[0])
        hi++;
    walk w3 = {k + lo, hi - lo, 0};
    FT_PASS(ft_manifest_prefix(&seen, mf, k[at].t, 1, 0, walk_cb, &w3));
    FT_CHECK_EQ_U64(w3.at, hi - lo);
    /* the library's counts equal the unsharded index's */
    ft_index_info a, b;
    ft_index_info_init(&a);
    ft_index_info_init(&b);
    FT_PASS(ft_index_info_get(&a, idx));
    FT_PASS(ft_manifest_info_get(&b, mf));
    FT_CHECK_EQ_U64(a.keys, b.keys);
    FT_CHECK_EQ_U64(a.nodes, b.nodes);
    FT_CHECK_EQ_U64(a.max_depth, b.max_depth);
    FT_CHECK_EQ_U64(a.max_key_len, b.max_key_len);
    FT_CHECK_EQ_U64(a.root_fanout, b.root_fanout);
    FT_CHECK_EQ_U64(a.high_nodes, b.high_nodes);
    FT_CHECK_EQ_U64(a.leaves, b.leaves);
    FT_CHECK_EQ_U64(a.unary_nodes, b.unary_nodes);
    FT_CHECK_EQ_U64(a.label_high_bits, b.label_high_bits);
    FT_CHECK_EQ_U64(a.value_bits, b.value_bits);
    ft_manifest_close(mf);
    ft_partition_free(&p);
}

/* check_subtrees compares ft_root_subtrees with the brute-force count. */
static void check_subtrees(const ft_index *idx)
{
    ft_subtree *st;
    uint64_t F;
    FT_PASS(ft_root_subtrees(&st, &F, idx));
    FT_CHECK_EQ_U64(F, B.F);
    for (size_t i = 0; i < F; i++) {
        FT_CHECK_EQ_U64(st[i].tok, B.tok[i]);
        FT_CHECK_EQ_U64(st[i].nodes, B.nodes[i]);
        FT_CHECK_EQ_U64(st[i].high, B.high[i]);
        FT_CHECK_EQ_U64(st[i].keys, B.keys[i]);
    }
    free(st);
}

static su_key *make_lib(const char *dir, uint64_t *s, const pu_lib *lp,
                        ft_index **idx, size_t *m)
{
    su_key *k = pu_keys(s, lp);
    char path[4200];
    snprintf(path, sizeof path, "%s/whole.idx", dir);
    *m = su_build(k, lp->n, path, idx);
    brute_count(k, *m);
    check_subtrees(*idx);
    return k;
}

static void random_libraries(const char *dir)
{
    static const uint32_t ns[] = {1, 2, 3, 5, 8};
    uint64_t s = 42;
    for (int lib = 0; lib < 6; lib++) {
        pu_lib lp = {2500 + (size_t)lib * 700, 1 + (uint32_t)lib % 6,
                     lib == 3 ? 9u : 60u + (uint32_t)lib * 50u, 0, 1, 0, 0,
                     lib % 2 ? 50u : 200000u, lib % 2};
        if (lib == 4) { /* first tokens spread over the whole u32 range */
            lp.first_base = 3;
            lp.first_step = 40000000;
            lp.first_vocab = 100;
        }
        ft_index *idx;
        size_t m;
        su_key *k = make_lib(dir, &s, &lp, &idx, &m);
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
            check_split(dir, idx, k, m, ns[i], 1 + (int)(i % 3), &s);
        ft_index_close(idx);
        free(k);
    }
}

/* Uniform first tokens: the largest shard stays near the mean. */
static void balance(const char *dir)
{
    uint64_t s = 7;
    pu_lib lp = {30000, 6, 512, 100, 1, 0, 0, 1000, 0};
    ft_index *idx;
    size_t m;
    su_key *k = make_lib(dir, &s, &lp, &idx, &m);
    char mpath[4200], err[1024];
    snprintf(mpath, sizeof mpath, "%s/bal.ftm", dir);
    for (uint32_t n = 2; n <= 16; n *= 2) {
        FT_PASS(pu_split(idx, mpath, n, 0, 2, err, sizeof err));
        ft_manifest *mf;
        FT_PASS(ft_manifest_open(&mf, mpath, 0, err, sizeof err));
        uint64_t max = 0, sum = 0;
        for (uint32_t i = 0; i < n; i++) {
            sum += mf->shards[i].trie_bytes;
            max = mf->shards[i].trie_bytes > max ? mf->shards[i].trie_bytes
                                                 : max;
        }
        double r = (double)max * n / (double)sum;
        if (r > 1.1) {
            fprintf(stderr, "balance %.3f over %u shards\n", r, n);
            exit(1);
        }
        ft_manifest_close(mf);
    }
    ft_index_close(idx);
    free(k);
}

/* One first token holds most of the library. */
static void skewed(const char *dir)
{
    uint64_t s = 11;
    pu_lib lp = {12000, 6, 40, 100, 1, 70, 120, 5000, 1};
    ft_index *idx;
    size_t m;
    su_key *k = make_lib(dir, &s, &lp, &idx, &m);
    size_t g = 0;
    while (B.tok[g] != 120)
        g++;
    uint64_t giant = ft_shard_trie_bytes(B.nodes[g], B.high[g],
                                         idx->trie.view.hi_bits);
    for (uint32_t n = 2; n <= 8; n += 3)
        check_split(dir, idx, k, m, n, 2, &s);
    /* the giant is alone in its shard once there are enough shards */
    ft_partition p;
    char err[1024], mpath[4200], want[1024], a[32], b[32];
    FT_PASS(ft_partition_make(&p, idx, 4, 0, err, sizeof err));
    for (uint32_t i = 0; i < p.n; i++)
        if (p.parts[i].lo <= 120 && 120 <= p.parts[i].hi) {
            FT_CHECK_EQ_U64(p.parts[i].c1 - p.parts[i].c0, 1);
            FT_CHECK_EQ_U64(p.parts[i].bytes, giant);
        }
    ft_partition_free(&p);
    /* a budget below the giant: the exact message */
    snprintf(mpath, sizeof mpath, "%s/skew.ftm", dir);
    ft_format_bytes(a, sizeof a, giant);
    ft_format_bytes(b, sizeof b, giant - 1);
    snprintf(want, sizeof want,
             "first token 120: subtree of %s (%llu bytes) exceeds "
             "--shard-bytes %s (%llu bytes): top-level partitioning cannot "
             "split it", a, (unsigned long long)giant, b,
             (unsigned long long)giant - 1);
    FT_FAIL(pu_split(idx, mpath, 0, giant - 1, 1, err, sizeof err), FT_ELIMIT);
    FT_CHECK_STR(err, want);
    FT_CHECK(access(mpath, F_OK) != 0);
    /* exactly the giant's size fits; shards stay within the budget and no
     * two neighbours would fit together (as few shards as fit) */
    for (int round = 0; round < 2; round++) {
        uint64_t all = brute_cost(0, B.F, idx->trie.view.hi_bits);
        uint64_t budget = round == 0 ? giant : giant + (all - giant) / 2;
        FT_PASS(pu_split(idx, mpath, 0, budget, 2, err, sizeof err));
        ft_manifest *mf;
        FT_PASS(ft_manifest_open(&mf, mpath, 0, err, sizeof err));
        FT_PASS(ft_partition_make(&p, idx, 0, budget, err, sizeof err));
        FT_CHECK_EQ_U64(mf->n_shards, p.n);
        FT_CHECK(p.n >= 2);
        for (uint32_t i = 0; i < p.n; i++) {
            FT_CHECK(mf->shards[i].trie_bytes <= budget);
            FT_CHECK(p.parts[i].bytes <= budget);
            if (i + 1 < p.n)
                FT_CHECK(brute_cost(p.parts[i].c0, p.parts[i + 1].c1,
                                    idx->trie.view.hi_bits) > budget);
        }
        ft_manifest_close(mf);
        ft_partition_free(&p);
    }
    /* a budget above everything: one shard */
    FT_PASS(ft_partition_make(&p, idx, 0, 1ull << 40, err, sizeof err));
    FT_CHECK_EQ_U64(p.n, 1);
    FT_CHECK_EQ_U64(p.parts[0].lo, 0);
    FT_CHECK_EQ_U64(p.parts[0].hi, UINT32_MAX);
    ft_partition_free(&p);
    ft_index_close(idx);
    free(k);
}

/* A root with fewer children than shards asked for; extreme tokens. */
static void few_first_tokens(const char *dir)
{
    su_key k[6];
    memset(k, 0, sizeof k);
    const uint32_t firsts[6] = {9, 0, 4294967295u, 9, 0, 70000};
    for (int i = 0; i < 6; i++) {
        k[i].len = 1 + (uint32_t)i % 3;
        k[i].t[0] = firsts[i];
        k[i].t[1] = (uint32_t)i * 1000;
        k[i].t[2] = 5;
        k[i].value = (uint64_t)i;
    }
    char path[4200], err[1024], mpath[4200];
    snprintf(path, sizeof path, "%s/few.idx", dir);
    snprintf(mpath, sizeof mpath, "%s/few.ftm", dir);
    ft_index *idx;
    size_t m = su_build(k, 6, path, &idx);
    brute_count(k, m);
    check_subtrees(idx);
    FT_FAIL(pu_split(idx, mpath, 5, 0, 1, err, sizeof err), FT_ELIMIT);
    FT_CHECK_STR(err, "the root has 4 children (first tokens), fewer than "
                      "the 5 shards asked for: top-level partitioning cannot "
                      "make more shards than first tokens");
    FT_CHECK(access(mpath, F_OK) != 0);
    uint64_t s = 1;
    check_split(dir, idx, k, m, 4, 2, &s);
    ft_manifest *mf;
    snprintf(mpath, sizeof mpath, "%s/lib.ftm", dir);
    FT_PASS(ft_manifest_open(&mf, mpath, 0, err, sizeof err));
    static const uint32_t lo[4] = {0, 9, 70000, 4294967295u};
    static const uint32_t hi[4] = {8, 69999, 4294967294u, 4294967295u};
    for (int i = 0; i < 4; i++) {
        FT_CHECK_EQ_U64(mf->shards[i].lo, lo[i]);
        FT_CHECK_EQ_U64(mf->shards[i].hi, hi[i]);
    }
    FT_CHECK_EQ_U64(ft_shard_of_token(mf, 0), 0);
    FT_CHECK_EQ_U64(ft_shard_of_token(mf, 8), 0);
    FT_CHECK_EQ_U64(ft_shard_of_token(mf, 9), 1);
    FT_CHECK_EQ_U64(ft_shard_of_token(mf, 69999), 1);
    FT_CHECK_EQ_U64(ft_shard_of_token(mf, 70000), 2);
    FT_CHECK_EQ_U64(ft_shard_of_token(mf, 4294967294u), 2);
    FT_CHECK_EQ_U64(ft_shard_of_token(mf, 4294967295u), 3);
    ft_manifest_close(mf);
    FT_FAIL(ft_partition_make(&(ft_partition){0}, idx, 0, 0, err, sizeof err),
            FT_EINVAL);
    ft_index_close(idx);
}

static void format_bytes(void)
{
    char b[32];
    ft_format_bytes(b, sizeof b, 999);
    FT_CHECK_STR(b, "999 bytes");
    ft_format_bytes(b, sizeof b, 1024);
    FT_CHECK_STR(b, "1.0 KB");
    ft_format_bytes(b, sizeof b, 2147483648ull);
    FT_CHECK_STR(b, "2.0 GB");
    ft_format_bytes(b, sizeof b, 3435973837ull);
    FT_CHECK_STR(b, "3.2 GB");
}

int main(void)
{
    char dir[4096];
    pu_tmpdir(dir, sizeof dir);
    format_bytes();
    few_first_tokens(dir);
    random_libraries(dir);
    balance(dir);
    skewed(dir);
    pu_rmdir(dir);
    printf("partition_test: ok\n");
    return 0;
}
