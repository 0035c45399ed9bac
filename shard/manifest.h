/*
 * manifest.h - a sharded library: one manifest file naming one index file
 * per shard, each shard holding the keys of a contiguous range of first
 * tokens (docs/sharding.md has the format byte by byte).
 *
 * Private for now (module prefix ft_manifest_ / ft_library_ / ft_shard_);
 * the router gets what it needs through include/flashtrie.h later.
 */
#ifndef FT_MANIFEST_H
#define FT_MANIFEST_H

#include "trie.h"

#define FT_MANIFEST_MAGIC "FTSHARDS"
#define FT_MANIFEST_VERSION 1u
#define FT_MANIFEST_HEADER_BYTES 64u
#define FT_MANIFEST_ENTRY_BYTES 64u
/* Offset of the header's checksum field (docs/sharding.md). */
#define FT_MANIFEST_CHECKSUM_OFF 48u
/* A shard file's identity: the XXH3-64 of its header and section table,
 * which hold every section's checksum, so it changes with any content. */
#define FT_INDEX_HEAD_BYTES (128u + 32u * FT_SEC_COUNT)
#define FT_MANIFEST_MAX_SHARDS FT_MAX_SHARDS

/* ft_manifest_shard is one shard: its first-token range [lo, hi] (both
 * included), the counts recorded for it, and, once opened, its index. */
typedef struct ft_manifest_shard {
    uint32_t lo, hi;
    uint64_t keys;
    uint64_t nodes;      /* root included */
    uint64_t trie_bytes; /* ft_index_info.trie_bytes of the shard file */
    uint64_t file_bytes;
    uint64_t checksum;   /* XXH3-64 of the file's first FT_INDEX_HEAD_BYTES */
    char *name;          /* file name, relative to the manifest's folder */
    char *path;          /* name joined to that folder (opened shards) */
    ft_index *idx;       /* NULL until opened */
} ft_manifest_shard;

/* ft_manifest is a whole library.  A plain index opened through
 * ft_library_open is a manifest of one shard [0, 2^32-1] with is_manifest
 * 0, so callers handle both the same way. */
typedef struct ft_manifest {
    uint32_t n_shards;
    int is_manifest;
    uint64_t keys;
    uint32_t value_bits;
    uint32_t max_key_len;
    ft_manifest_shard *shards;
    char *path;
} ft_manifest;

/* ft_manifest_write writes m's library fields and shard entries (ranges,
 * counts, checksums, names; idx and path are not read) to path, aside and
 * renamed as index files are.  FT_EINVAL when the ranges do not tile
 * 0..2^32-1 in order or a name is empty, absolute or too long. */
int ft_manifest_write(const ft_manifest *m, const char *path, char *errbuf,
                      size_t errlen);

/* ft_manifest_open reads a manifest, opens every shard index (flags as for
 * ft_index_open) and checks each against its entry.  Errors: FT_EFORMAT
 * (not a manifest, byte order, damaged: header size or checksum, bad
 * table), FT_EVERSION, FT_ETRUNC (shorter than its header says),
 * FT_EMANIFEST (ranges that overlap, leave a gap or do not cover the token
 * space; a shard file that is missing, damaged or does not match its
 * entry: checksum, counts, max_key_len, keys outside its range; shard
 * counts that do not add up), each message naming the manifest, the shard
 * and the problem. */
int ft_manifest_open(ft_manifest **out, const char *path, unsigned flags,
                     char *errbuf, size_t errlen);
void ft_manifest_close(ft_manifest *m);
/* ft_manifest_open_part is ft_manifest_open opening and checking only
 * shards first .. first + count - 1 (count UINT32_MAX: all); the others
 * keep their entries and a NULL idx. */
int ft_manifest_open_part(ft_manifest **out, const char *path, unsigned flags,
                          uint32_t first, uint32_t count, char *errbuf,
                          size_t errlen);

/* ft_shard_of_token returns the shard whose range holds tok. */
uint32_t ft_shard_of_token(const ft_manifest *m, uint32_t tok);

/* ft_library_open opens path as a manifest or as a single index, telling
 * them apart by their magic; anything else is FT_EFORMAT. */
int ft_library_open(ft_manifest **out, const char *path, unsigned flags,
                    char *errbuf, size_t errlen);

/* ft_index_opener opens the index file at path (a shard's path: the
 * manifest's folder joined to its name) as ft_index_open does; arg is the
 * caller's. */
typedef int (*ft_index_opener)(ft_index **out, const char *path,
                               unsigned flags, char *errbuf, size_t errlen,
                               void *arg);

/* ft_library_open_mem is ft_library_open of the file at path whose bytes
 * are the len at data, with every index (the shards, or path itself when
 * data is not a manifest) opened through open_index: the fuzz targets
 * hand it files from memory (ft_index_open_mem).  The same checks and
 * messages as ft_library_open, less the size cap of a manifest file read
 * from disk. */
int ft_library_open_mem(ft_manifest **out, const char *path,
                        const void *data, size_t len, unsigned flags,
                        ft_index_opener open_index, void *arg, char *errbuf,
                        size_t errlen);

/* ft_manifest_lookup is ft_index_lookup routed by the first token. */
int ft_manifest_lookup(uint64_t *value, const ft_manifest *m,
                       const uint32_t *toks, size_t n);
/* ft_manifest_prefix is ft_index_prefix over the library: a non-empty
 * prefix goes to its first token's shard, an empty one walks the shards in
 * order (so all keys come in lexicographic order), limit counting across
 * them. */
int ft_manifest_prefix(uint64_t *visited, const ft_manifest *m,
                       const uint32_t *prefix, size_t n, uint64_t limit,
                       ft_prefix_cb cb, void *arg);

/* ft_manifest_info_get fills info for the whole library: the counts of
 * the unsharded index (keys, nodes, max_depth, root_fanout, high nodes,
 * leaves, unary nodes, widths), and byte counts summed over the shards
 * (n_sections is 0: sections are per shard). */
int ft_manifest_info_get(ft_index_info *info, const ft_manifest *m);

/* ft_index_head_checksum is the identity of an open index file that a
 * manifest records. */
uint64_t ft_index_head_checksum(const ft_index *idx);
/* ft_trie_bytes_of is ft_index_info.trie_bytes of t (every section but the
 * values and the terminal rank: what the GPU engine copies), computed from
 * the section sizes alone; ft_index_trie_bytes is it for an open index. */
uint64_t ft_trie_bytes_of(const ft_trie *t);
uint64_t ft_index_trie_bytes(const ft_index *idx);

#endif /* FT_MANIFEST_H */
