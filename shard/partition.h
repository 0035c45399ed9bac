/*
 * partition.h - cutting a library into shards by first token.
 *
 * A shard is a contiguous range of the root's children (first tokens).
 * The partitioner sizes every root child's subtree in one pass over the
 * LOUDS levels, then chooses the ranges: exactly N shards with the largest
 * as small as possible, or as few shards as fit a byte budget each.
 * ft_split then writes one index file per shard and the manifest
 * (docs/sharding.md).
 */
#ifndef FT_PARTITION_H
#define FT_PARTITION_H

#include "manifest.h"

/* ft_subtree is one root child: its label (first token) and what its
 * subtree holds (the child itself included). */
typedef struct ft_subtree {
    uint32_t tok;
    uint64_t nodes;
    uint64_t high; /* nodes whose label needs high bits */
    uint64_t keys;
} ft_subtree;

/* ft_root_subtrees sizes every root child's subtree: per depth, the nodes
 * under one root child form one contiguous range, and the next depth's
 * range is the children of this one, [first_child(a), first_child(b)), so
 * one select per range boundary and depth suffices.  *out (n of them, the
 * root's fan-out) is the caller's to free. */
int ft_root_subtrees(ft_subtree **out, uint64_t *n, const ft_index *idx);

/* ft_shard_trie_bytes is the trie bytes (ft_trie_bytes_of) of an index of
 * nodes non-root nodes, high of them with high labels, at the label width
 * hi_bits: what a shard of those subtrees takes at most (its own label
 * width may be smaller). */
uint64_t ft_shard_trie_bytes(uint64_t nodes, uint64_t high, uint32_t hi_bits);

typedef struct ft_part {
    uint64_t c0, c1;   /* root children [c0, c1), 0-based */
    uint32_t lo, hi;   /* first-token range, both included */
    uint64_t keys;
    uint64_t nodes;    /* root included */
    uint64_t bytes;    /* ft_shard_trie_bytes, an upper bound */
} ft_part;

typedef struct ft_partition {
    uint32_t n;
    ft_part *parts;
} ft_partition;

/* ft_partition_make chooses the shards of idx: with nshards > 0, exactly
 * that many (minimising the largest shard's bytes), else as few as fit
 * budget bytes each.  FT_ELIMIT when the root has fewer children than
 * nshards, or when one first token's subtree alone exceeds budget (the
 * message names the token and the sizes); FT_EINVAL for nshards and budget
 * both 0, or nshards above FT_MANIFEST_MAX_SHARDS. */
int ft_partition_make(ft_partition *p, const ft_index *idx, uint32_t nshards,
                      uint64_t budget, char *errbuf, size_t errlen);
void ft_partition_free(ft_partition *p);

/* ft_format_bytes writes n as "3.2 GB" style text (powers of 1000, as
 * sizes are printed in messages), or "123 bytes" below 1000. */
void ft_format_bytes(char *out, size_t len, uint64_t n);

/* ft_split_opts, ft_split_stats and ft_split are public (flashtrie.h). */

#endif /* FT_PARTITION_H */
