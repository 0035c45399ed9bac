/*
 * trie.h - the in-memory trie, its builder core and its file format.
 *
 * ft_trie holds every array of one index, either owned (just built) or
 * pointing into a read-only mapping of an index file.  ft_tb turns keys
 * given in strictly increasing order into an ft_trie in one pass (see
 * docs/index-format.md for why BFS order falls out of sorted order).
 */
#ifndef FT_TRIE_H
#define FT_TRIE_H

#include "ft_impl.h"

/* Section ids of the index file, in file order. */
enum ft_section_id {
    FT_SEC_LOUDS = 0,
    FT_SEC_LOUDS_RANK,
    FT_SEC_LOUDS_SEL0,
    FT_SEC_LABEL_LO,
    FT_SEC_HIGH,
    FT_SEC_HIGH_RANK,
    FT_SEC_LABEL_HI,
    FT_SEC_FLAGS,
    FT_SEC_TERM_RANK,
    FT_SEC_VALUES,
    FT_SEC_COUNT
};

extern const char *const ft_section_names[FT_SEC_COUNT];

typedef struct ft_trie {
    ft_trie_view view;
    const uint64_t *term_rank; /* terminal flags before each 256 nodes */
    const uint64_t *values;    /* packed, value_bits wide, by terminal rank */
    uint64_t n_keys;
    uint64_t high_nodes;
    uint64_t root_fanout;
    uint64_t louds_zeros;
    uint32_t max_depth;
    uint32_t max_key_len;
    uint32_t value_bits;
    const void *sec[FT_SEC_COUNT]; /* section base pointers */
    uint64_t sec_bytes[FT_SEC_COUNT];
    void *owned[FT_SEC_COUNT];     /* non-NULL when built in memory */
} ft_trie;

/* ft_trie_section_sizes fills the byte size every section must have for
 * the counts already set in t (n_nodes, louds_bits, high_nodes, hi_bits,
 * n_keys, value_bits, louds_zeros). */
void ft_trie_section_sizes(ft_trie *t);
void ft_trie_free(ft_trie *t);
/* ft_trie_bind_sections points view, term_rank and values at the sections
 * in sec[]. */
void ft_trie_bind_sections(ft_trie *t);
/* ft_trie_term_rank counts terminal nodes before node u. */
uint64_t ft_trie_term_rank(const ft_trie *t, uint64_t u);
/* ft_trie_value returns the value of terminal node u. */
uint64_t ft_trie_value(const ft_trie *t, uint64_t u);
/* ft_trie_root_children is the root's child range (cached by callers). */

/* ---- builder core ---- */
typedef struct ft_tb ft_tb;

int ft_tb_create(ft_tb **out);
void ft_tb_destroy(ft_tb *tb);
/* ft_tb_add appends the next key; keys must strictly increase
 * (lexicographic on u32, a prefix before its extensions): FT_EINVAL if not. */
int ft_tb_add(ft_tb *tb, const uint32_t *toks, uint32_t len, uint64_t value);
/* ft_tb_append moves every key of src (whose first key must sort after the
 * last key of dst and start with a different first token) to the end of
 * dst, leaving src empty.  Lets chunks of a sorted key stream be built in
 * parallel. */
int ft_tb_append(ft_tb *dst, ft_tb *src);
uint64_t ft_tb_keys(const ft_tb *tb);
/* ft_tb_finish builds the trie arrays; tb stays valid only for destroy. */
int ft_tb_finish(ft_tb *tb, uint32_t max_key_len, ft_trie *out);

/* Phase timers (wall seconds) that ft_tb_finish_parts and ft_trie_write_mt
 * add to when given a profile array of FT_PROF_COUNT doubles. */
enum ft_prof_id {
    FT_PROF_FIN_SCAN = 0, /* close open nodes, count high labels, maxima */
    FT_PROF_FIN_ALLOC,    /* section allocation */
    FT_PROF_FIN_PACK,     /* LOUDS, labels, flags, values into place */
    FT_PROF_FIN_RANK,     /* rank directories and select hints */
    FT_PROF_CHECKSUM,     /* XXH3 of the sections */
    FT_PROF_WRITE,        /* write(2) of the file */
    FT_PROF_FSYNC,        /* fsync and rename */
    FT_PROF_COUNT
};

/* ft_tb_finish_parts is ft_tb_finish over the concatenation of parts[0..np)
 * (each starting under a later root child than the one before, as for
 * ft_tb_append) without joining them first: every part knows where its
 * nodes of each depth land, so up to threads threads pack them in place.
 * The result is byte for byte what ft_tb_append + ft_tb_finish give.  The
 * parts stay valid only for destroy.  prof may be NULL. */
int ft_tb_finish_parts(ft_tb *const *parts, size_t np, uint32_t max_key_len,
                       int threads, ft_trie *out, double *prof);

/* ---- file format ---- */
int ft_trie_write(const ft_trie *t, const char *path, char *errbuf,
                  size_t errlen);
/* ft_trie_write_mt is ft_trie_write with the section checksums computed in
 * up to threads threads; prof (may be NULL) gets the checksum and write
 * times. */
int ft_trie_write_mt(const ft_trie *t, const char *path, int threads,
                     double *prof, char *errbuf, size_t errlen);

struct ft_index {
    ft_trie trie;
    void *map;           /* the file's bytes */
    size_t map_len;
    ft_child_range root; /* cached root child range */
    int borrowed;        /* map is ft_index_open_mem's buffer, not unmapped */
    uint64_t uid;        /* unique in the process: the GPU engines' shared
                          * device copies are keyed by it, never by an
                          * address a later index may reuse */
};

/* ft_index_open_mem is ft_index_open over size bytes at data instead of a
 * file, for the fuzz targets: the same checks and messages (name stands
 * for the file's path in them), without a file and a mapping per input.
 * data must be 64-byte aligned (a mapping is) and outlive the index;
 * FT_EINVAL when it is not aligned. */
int ft_index_open_mem(ft_index **out, const void *data, size_t size,
                      const char *name, unsigned flags, char *errbuf,
                      size_t errlen);

#endif /* FT_TRIE_H */
