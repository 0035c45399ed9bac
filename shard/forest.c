/*
 * forest.c - the root children of a forest (include/flashtrie/internal/
 * forest.h): what the GPU engine's forest (gpu_engine.c,
 * fti_engine_gpu_forest) maps its step 0 with, and where it finds that
 * two shards share a first token.  Host code only: a CPU build and its
 * tests have it too.
 */
#include <stdio.h>
#include <stdlib.h>

#include "flashtrie/internal/forest.h"
#include "trie.h"

static int root_cmp(const void *a, const void *b)
{
    const fti_forest_root *x = a, *y = b;
    if (x->label != y->label)
        return x->label < y->label ? -1 : 1;
    return x->node < y->node ? -1 : x->node > y->node;
}

int fti_forest_roots(const ft_index *const *idx, size_t n,
                     fti_forest_root **out, size_t *count, int *mapok,
                     char *why, size_t len)
{
    *out = NULL;
    *count = 0;
    *mapok = 0;
    if (len)
        why[0] = 0;
    if (n == 0 || n > FT_FOREST_MAX) {
        snprintf(why, len, "%zu shards (a forest holds 1..%u)", n,
                 FT_FOREST_MAX);
        return FT_EINVAL;
    }
    uint64_t m = 0;
    for (size_t s = 0; s < n; s++)
        m += idx[s]->root.deg;
    fti_forest_root *rt = malloc((m ? m : 1) * sizeof *rt);
    if (rt == NULL) {
        snprintf(why, len, "out of memory (%llu root children)",
                 (unsigned long long)m);
        return FT_ENOMEM;
    }
    size_t k = 0;
    int ok = 1;
    for (size_t s = 0; s < n; s++) {
        const ft_index *x = idx[s];
        const ft_child_range *cr = &x->root;
        for (uint64_t c = 0; c < cr->deg; c++) {
            uint64_t u = cr->first + c;
            rt[k].label = ft_child_label(&x->trie.view, cr, u);
            rt[k].node = ((uint64_t)s << FT_FOREST_TREE_SHIFT) | u;
            ok &= rt[k].label < FT_FOREST_MAP_LABELS &&
                  u <= FT_FOREST_ROOT_MASK;
            k++;
        }
    }
    qsort(rt, k, sizeof *rt, root_cmp);
    for (size_t i = 1; i < k; i++)
        if (rt[i].label == rt[i - 1].label) {
            snprintf(why, len, "first token %llu is in shards %llu and %llu "
                     "(not a split by first token)",
                     (unsigned long long)rt[i].label,
                     (unsigned long long)(rt[i - 1].node >>
                                          FT_FOREST_TREE_SHIFT),
                     (unsigned long long)(rt[i].node >> FT_FOREST_TREE_SHIFT));
            free(rt);
            return FT_ENOTSUP;
        }
    *out = rt;
    *count = k;
    *mapok = ok;
    return FT_OK;
}

/* (the GPU engine copies the sorted list to the device as is: two words
 * an entry, label then node, which gk_root_find reads) */
_Static_assert(sizeof(fti_forest_root) == 16, "fti_forest_root layout");
