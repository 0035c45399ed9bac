/*
 * forest.h - a forest: the tries of a shard group whose shards share one
 * GPU, searched by one launch of the search kernel (issue 36,
 * FTI_EXCHANGE_FOREST; docs/gpu-engine.md "Exchanges").  The encoding of
 * a node and of a root-map entry, shared by the kernels (kernels/
 * ft_kernels.h names them FT_GK_*) and the host, and the host's list of a
 * forest's root children (shard/forest.c).
 */
#ifndef FT_INTERNAL_FOREST_H
#define FT_INTERNAL_FOREST_H

#include <stddef.h>
#include <stdint.h>

/* A node of shard s travels as (s << FT_FOREST_TREE_SHIFT) | its node id
 * in shard s. */
#define FT_FOREST_TREE_SHIFT 56u
#define FT_FOREST_TREE_MASK ((1ull << FT_FOREST_TREE_SHIFT) - 1u)
#define FT_FOREST_MAX 16u
/* The root map's entry of a label: (shard << FT_FOREST_ROOT_SHIFT) | the
 * child's node id in its shard (> 0: the root is node 0), 0 if none; the
 * map is used when every first token is below FT_FOREST_MAP_LABELS and
 * every child id at most FT_FOREST_ROOT_MASK. */
#define FT_FOREST_ROOT_SHIFT 27u
#define FT_FOREST_ROOT_MASK ((1u << FT_FOREST_ROOT_SHIFT) - 1u)
#define FT_FOREST_MAP_LABELS (1u << 26)

#ifndef __CUDACC__
#include "flashtrie.h"

#ifdef __cplusplus
extern "C" {
#endif

/* fti_forest_root is one root child of a forest: its label (the first
 * token) and its node, the shard's bits on. */
typedef struct fti_forest_root {
    uint64_t label, node;
} fti_forest_root;

/* fti_forest_roots lists the root children of shards idx[0..n) (n at
 * most FT_FOREST_MAX) sorted by label into *out (malloc'ed, *count
 * entries; free() it) and sets *mapok when the root map can hold them.
 * FT_ENOTSUP with why naming the first token two shards share (then
 * nothing is allocated), FT_EINVAL for n out of range, FT_ENOMEM. */
int fti_forest_roots(const ft_index *const *idx, size_t n,
                     fti_forest_root **out, size_t *count, int *mapok,
                     char *why, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* __CUDACC__ */

#endif /* FT_INTERNAL_FOREST_H */
