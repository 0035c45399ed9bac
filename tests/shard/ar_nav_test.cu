/*
 * ar_nav_test.cu - kernels/ft_ar_nav.cuh (the GPU step's navigation, a
 * block's words loaded together) gives nav.h's answers: every node's child
 * range, every select0 and rank the step asks, every node's terminal rank,
 * on the host, over libraries with low and high labels and wide nodes
 * (built with FT_BIN, the flashtrie binary ctest names).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flashtrie.h"
#include "ft_ar_nav.cuh"
#include "trie.h"

static int fails;

#define EXPECT(c, ...)                                                        \
    do {                                                                      \
        if (!(c) && fails++ < 10) {                                           \
            fprintf(stderr, "ar_nav_test: " __VA_ARGS__);                     \
            fputc('\n', stderr);                                              \
        }                                                                     \
    } while (0)

static int check(const char *bin, const char *dir, const char *spec)
{
    char cmd[1024], path[512];
    snprintf(path, sizeof path, "%s/lib.ft", dir);
    snprintf(cmd, sizeof cmd,
             "%s gen keys %s --output %s/keys.txt && "
             "%s build --input %s/keys.txt --output %s --quiet",
             bin, spec, dir, bin, dir, path);
    if (system(cmd) != 0) {
        fprintf(stderr, "ar_nav_test: %s failed\n", cmd);
        return 1;
    }
    ft_index *idx;
    char err[256];
    if (ft_index_open(&idx, path, 0, err, sizeof err) != FT_OK) {
        fprintf(stderr, "ar_nav_test: %s\n", err);
        return 1;
    }
    const ft_trie_view *v = &idx->trie.view;
    const uint64_t *tr = (const uint64_t *)idx->trie.sec[FT_SEC_TERM_RANK];
    uint64_t n = v->n_nodes, wide = 0;
    for (uint64_t u = 0; u < n; u++) {
        ft_child_range a = ft_children(v, u), b = ark_children(v, u);
        EXPECT(a.first == b.first && a.deg == b.deg && a.hstart == b.hstart &&
                   a.hbase == b.hbase,
               "%s: node %llu: children differ", spec, (unsigned long long)u);
        EXPECT(ft_select0(v, u) == ark_select0(v, u), "%s: select0(%llu)",
               spec, (unsigned long long)u);
        EXPECT(ft_term_rank(v->flags, tr, u) == ark_term_rank(v->flags, tr, u),
               "%s: term rank of %llu", spec, (unsigned long long)u);
        EXPECT(ft_rank1(v->high, v->high_rank, u) ==
                   ark_rank1(v->high, v->high_rank, u, ~0ull),
               "%s: high rank at %llu", spec, (unsigned long long)u);
        if (a.deg > 100)
            wide++;
    }
    /* the last node's end, and select0 of the extra zero */
    EXPECT(ft_select0(v, n) == ark_select0(v, n), "%s: select0(n)", spec);
    printf("ar_nav_test: %s: %llu nodes (%llu with > 100 children) equal\n",
           spec, (unsigned long long)n, (unsigned long long)wide);
    ft_index_close(idx);
    return 0;
}

int main(void)
{
    const char *bin = getenv("FT_BIN");
    if (bin == NULL) {
        printf("SKIP: FT_BIN not set (ctest sets it)\n");
        return 77;
    }
    char dir[] = "/tmp/ar_nav_test_XXXXXX";
    if (mkdtemp(dir) == NULL)
        return 1;
    int rc = check(bin, dir, "--n 20000 --vocab 300 --seed 1") ||
             check(bin, dir, "--n 20000 --vocab 6000 --seed 3") ||
             check(bin, dir, "--n 20000 --vocab 200000 --seed 5") ||
             check(bin, dir, "--n 3000 --vocab 40 --seed 2");
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        rc = 1;
    if (rc || fails) {
        fprintf(stderr, "ar_nav_test: %d differences\n", fails);
        return 1;
    }
    return 0;
}
