/*
 * forest_roots_test.c - the root children of a forest (shard/forest.c,
 * fti_forest_roots): what the GPU engine's forest maps its first step
 * with (issue 36).  Shards split by first token give every root child,
 * sorted by label, each with its shard in the node's top bits and its id
 * in that shard; labels of 2^26 or more turn the dense map off; a first
 * token in two shards is refused by name; empty shards add nothing.
 */
#include "search_util.h"
#include "trie.h"
#include "flashtrie/internal/forest.h"

static ft_index *build(su_key *k, size_t n, const char *dir, int i)
{
    char path[512];
    ft_index *x = NULL;
    snprintf(path, sizeof path, "%s/f%d.idx", dir, i);
    FT_CHECK(su_build(k, n, path, &x) == n);
    return x;
}

int main(void)
{
    char dir[] = "/tmp/ft_forest_roots_XXXXXX";
    FT_CHECK(mkdtemp(dir) != NULL);
    /* shard 0: first tokens 1 and 5; shard 1: 9 and 2; shard 2: empty;
     * shard 3: 3 */
    su_key a[3] = {{2, {5, 1}, 10}, {1, {1}, 11}, {3, {5, 2, 2}, 12}};
    su_key b[2] = {{1, {9}, 20}, {2, {2, 4}, 21}};
    su_key d[1] = {{1, {3}, 30}};
    ft_index *x[4];
    x[0] = build(a, 3, dir, 0);
    x[1] = build(b, 2, dir, 1);
    x[2] = build(NULL, 0, dir, 2);
    x[3] = build(d, 1, dir, 3);
    fti_forest_root *r;
    size_t n;
    int mapok;
    char why[200];
    FT_PASS(fti_forest_roots((const ft_index *const *)x, 4, &r, &n, &mapok,
                             why, sizeof why));
    FT_CHECK(n == 5 && mapok == 1 && why[0] == 0);
    static const uint64_t lab[5] = {1, 2, 3, 5, 9};
    static const uint64_t sh[5] = {0, 1, 3, 0, 1};
    for (size_t i = 0; i < n; i++) {
        FT_CHECK(r[i].label == lab[i]);
        uint64_t s = r[i].node >> FT_FOREST_TREE_SHIFT;
        uint64_t u = r[i].node & FT_FOREST_TREE_MASK;
        FT_CHECK(s == sh[i]);
        /* the node is shard s's root child of that label */
        const ft_child_range *cr = &x[s]->root;
        FT_CHECK(u >= cr->first && u < cr->first + cr->deg);
        FT_CHECK(ft_child_label(&x[s]->trie.view, cr, u) == lab[i]);
    }
    free(r);

    /* a first token of 2^26 or more: no dense map, the same sorted list */
    su_key e[2] = {{1, {FT_FOREST_MAP_LABELS}, 40}, {1, {4000000000u}, 41}};
    ft_index *y[2] = {x[0], build(e, 2, dir, 4)};
    FT_PASS(fti_forest_roots((const ft_index *const *)y, 2, &r, &n, &mapok,
                             why, sizeof why));
    FT_CHECK(n == 4 && mapok == 0);
    FT_CHECK(r[2].label == FT_FOREST_MAP_LABELS && r[3].label == 4000000000u);
    FT_CHECK(r[3].node >> FT_FOREST_TREE_SHIFT == 1);
    free(r);
    /* just below: the map again */
    su_key f[1] = {{1, {FT_FOREST_MAP_LABELS - 1}, 50}};
    ft_index *z[2] = {x[1], build(f, 1, dir, 5)};
    FT_PASS(fti_forest_roots((const ft_index *const *)z, 2, &r, &n, &mapok,
                             why, sizeof why));
    FT_CHECK(n == 3 && mapok == 1);
    free(r);

    /* first token 5 in shards 0 and 2: refused by name, nothing kept */
    su_key g[1] = {{2, {5, 9}, 60}};
    ft_index *w[3] = {x[0], x[1], build(g, 1, dir, 6)};
    r = (fti_forest_root *)1;
    FT_FAIL(fti_forest_roots((const ft_index *const *)w, 3, &r, &n, &mapok,
                             why, sizeof why),
            FT_ENOTSUP);
    FT_CHECK(r == NULL && n == 0);
    FT_CHECK_STR(why, "first token 5 is in shards 0 and 2 (not a split by "
                      "first token)");
    /* shard counts a forest cannot hold */
    FT_FAIL(fti_forest_roots((const ft_index *const *)w, 0, &r, &n, &mapok,
                             why, sizeof why),
            FT_EINVAL);
    FT_CHECK_STR(why, "0 shards (a forest holds 1..16)");
    ft_index *many[17];
    for (int i = 0; i < 17; i++)
        many[i] = x[2];
    FT_FAIL(fti_forest_roots((const ft_index *const *)many, 17, &r, &n,
                             &mapok, why, sizeof why),
            FT_EINVAL);
    FT_CHECK_STR(why, "17 shards (a forest holds 1..16)");
    /* sixteen empty shards: a forest with no root child */
    FT_PASS(fti_forest_roots((const ft_index *const *)many, 16, &r, &n,
                             &mapok, why, sizeof why));
    FT_CHECK(n == 0 && mapok == 1);
    free(r);

    ft_index_close(w[2]);
    ft_index_close(z[1]);
    ft_index_close(y[1]);
    for (int i = 0; i < 4; i++)
        ft_index_close(x[i]);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    FT_CHECK(system(cmd) == 0);
    printf("forest_roots_test: ok\n");
    return 0;
}
