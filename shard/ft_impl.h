/*
 * ft_impl.h - the umbrella private header of the FlashTrie library.
 *
 * Naming rule: public symbols start with ft_ (include/flashtrie.h); private
 * ones shared between files of the library start with fti_ or ft_ followed
 * by a module prefix (ft_tb_ trie builder, ft_fmt_ file format, ft_cpu_
 * CPU engine, ft_gpu_ GPU engine host side, ft_req_ request preparation).
 * Static helpers inside one file carry no prefix requirement.
 */
#ifndef FT_IMPL_H
#define FT_IMPL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashtrie.h"
#include "flashtrie/internal/nav.h"
#include "flashtrie/internal/clock.h"
#include "flashtrie/internal/errmsg.h"

/* ---- logging ---- */
#define FT_LOG(lvl, ...) FT_LOGF(lvl, __VA_ARGS__)
#define FT_ERROR(...) FT_LOG(FT_LOG_ERROR, __VA_ARGS__)
#define FT_WARN(...) FT_LOG(FT_LOG_WARN, __VA_ARGS__)
#define FT_INFO(...) FT_LOG(FT_LOG_INFO, __VA_ARGS__)
#define FT_DEBUG(...) FT_LOG(FT_LOG_DEBUG, __VA_ARGS__)

struct stat;

/* fti_open_read opens path read-only and stats it: FT_EIO with a message
 * naming the file and the failing call, the descriptor closed again when
 * fstat fails. */
int fti_open_read(int *fd, struct stat *st, const char *path, char *errbuf,
                  size_t errlen);

/* fti_tmp_create opens PATH.tmp.PID for writing a file that fti_tmp_commit
 * then puts at path (build aside, then swap): *fd the descriptor, *tmp its
 * name (malloc'ed).  FT_ENOMEM, or FT_EIO with "TMP: cannot create: ..."
 * in errbuf. */
int fti_tmp_create(int *fd, char **tmp, const char *path, char *errbuf,
                   size_t errlen);

/* fti_write_all writes the n bytes at buf to fd, again after EINTR and
 * short writes: 0, or -1 with errno set. */
int fti_write_all(int fd, const void *buf, size_t n);

/* fti_tmp_commit finishes the file written through fd at tmp
 * (fti_tmp_create): fsync (unless bad says a write failed already), close,
 * and rename over path; it frees tmp.  FT_OK when path now holds the file;
 * else FT_EIO with "PATH: cannot write WHAT: ..." in errbuf (the errno of
 * the failed step, the failed write's when bad came in set) and tmp
 * removed. */
int fti_tmp_commit(int fd, int bad, char *tmp, const char *path,
                   const char *what, char *errbuf, size_t errlen);

/* fti_errf and FT_RETURN_ERROR_IF: the ground floor's errmsg.h. */

/* ---- growable arrays ---- */
typedef struct fti_vec {
    void *data;
    size_t len; /* elements */
    size_t cap; /* elements */
} fti_vec;

/* fti_vec_reserve makes room for at least n more elements of size esz. */
int fti_vec_reserve(fti_vec *v, size_t esz, size_t n);
void fti_vec_free(fti_vec *v);
#define FTI_VEC_PUSH(vec, type, val)                                          \
    (fti_vec_reserve((vec), sizeof(type), 1) ? FT_ENOMEM                      \
                                             : (((type *)(vec)->data)         \
                                                    [(vec)->len++] = (val),   \
                                                FT_OK))

/* ---- bit vectors under construction ---- */
typedef struct fti_bits {
    uint64_t *words;
    uint64_t n;     /* bits */
    uint64_t cap;   /* words */
} fti_bits;

int fti_bits_push(fti_bits *b, uint32_t bit);
int fti_bits_push_run(fti_bits *b, uint32_t bit, uint64_t count);
/* fti_bits_append appends all bits of src to dst. */
int fti_bits_append(fti_bits *dst, const fti_bits *src);
void fti_bits_free(fti_bits *b);

/* Sizes, in u64 words, of the arrays a bit vector of n bits needs.  Bit
 * arrays are padded to whole 512-bit blocks plus one spare block, so the
 * navigation code may read one word past the last bit. */
uint64_t fti_bits_words(uint64_t nbits);
uint64_t fti_rank_entries(uint64_t nbits); /* 512-bit blocks, incl. spare */
uint64_t fti_rank_words(uint64_t nbits);   /* u64 words of the directory */
/* fti_rank_set stores the ones before block b (see nav.h's layout); blocks
 * must be set in ascending order starting from an even block. */
void fti_rank_set(uint64_t *rank, uint64_t b, uint64_t acc);
#define FTI_RANK_MAX_BITS (1ull << 40)
uint64_t fti_sel0_entries(uint64_t nzeros);

/* fti_rank_build fills rank (fti_rank_words(nbits) words). mask selects
 * which bits of each word count (all ones for plain bit vectors). */
void fti_rank_build(uint64_t *rank, const uint64_t *words, uint64_t nbits,
                    uint64_t mask);
/* fti_sel0_build fills the select0 hints of a bit vector. */
void fti_sel0_build(uint32_t *sel, const uint64_t *words,
                    const uint64_t *rank, uint64_t nbits, uint64_t nzeros);

/* ---- packed integer arrays ---- */
uint32_t fti_bits_needed(uint64_t maxval); /* 0 for maxval == 0 */
uint64_t fti_packed_words(uint64_t n, uint32_t width); /* incl. spare word */
void fti_packed_set(uint64_t *words, uint32_t width, uint64_t i, uint64_t v);


#endif /* FT_IMPL_H */
