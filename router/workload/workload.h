/*
 * workload.h - seeded synthetic workloads for benchmarks and tests: keyword
 * libraries shaped like real ones and NAR-style request grids over them.
 *
 * Everything here is deterministic given the seed: the same options give
 * byte-identical output whatever the number of threads (work is cut into
 * pieces whose random streams derive from the seed and the piece's trie
 * path, never from the thread that runs it).  docs/workload.md describes
 * the processes and the statistics they produce.  This library
 * (ft_workload, router/workload/) uses only the public API of flashtrie.h
 * and the ground floor (include/flashtrie/internal/).
 */
#ifndef FT_WORKLOAD_H
#define FT_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "flashtrie.h"

#ifdef __cplusplus
extern "C" {
#endif

/* FT_WL_VOCAB is the default vocabulary: the paper's 2.2M-token model. */
#define FT_WL_VOCAB 2200000u
/* FT_WL_MAX_LEN is the longest generated key. */
#define FT_WL_MAX_LEN 8u

/* ---- small deterministic random numbers ---- */

/* ft_wl_rng is xoshiro256**, seeded through splitmix64. */
typedef struct ft_wl_rng {
    uint64_t s[4];
} ft_wl_rng;

/* ft_wl_rng_seed sets r's state from seed (four splitmix64 outputs). */
void ft_wl_rng_seed(ft_wl_rng *r, uint64_t seed);
/* ft_wl_next returns r's next 64 random bits and advances it one step. */
uint64_t ft_wl_next(ft_wl_rng *r);
/* ft_wl_u01 returns a double uniform in [0, 1). */
double ft_wl_u01(ft_wl_rng *r);
/* ft_wl_mix hashes two words into one (for per-piece seeds). */
uint64_t ft_wl_mix(uint64_t a, uint64_t b);
/* ft_wl_zipf_token draws a token rank in [0, vocab) from the continuous
 * Zipf law with exponent 1 (log-uniform rank), so that about a quarter of
 * the draws over 2.2M tokens are >= 65536. */
uint32_t ft_wl_zipf_token(ft_wl_rng *r, uint32_t vocab);
/* ft_wl_rng_jump advances r as n calls of ft_wl_next would, in time
 * independent of n (a polynomial of the linear state map). */
void ft_wl_rng_jump(ft_wl_rng *r, uint64_t n);

/* ---- key libraries ---- */

typedef enum ft_wl_format {
    FT_WL_TEXT = 0, /* docs/specification.md section 2 text: tokens
                     * separated by one space */
    FT_WL_FTK = 1   /* docs/specification.md section 2 binary: u32 n,
                     * u32 tok[n] (LE) */
} ft_wl_format;

typedef struct ft_wl_keys_opts {
    uint64_t n;      /* distinct keys to generate, >= 1 */
    uint64_t seed;
    int threads;     /* 0 = all online cores; never changes the output */
    uint32_t vocab;  /* 0 = FT_WL_VOCAB */
} ft_wl_keys_opts;

typedef struct ft_wl_keys_stats {
    uint64_t keys;
    uint64_t nodes;       /* trie nodes, root included */
    uint64_t tokens;      /* sum of key lengths */
    uint64_t root_fanout;
    uint64_t high_labels; /* nodes whose label is >= 65536 */
    uint64_t len_hist[FT_WL_MAX_LEN + 1];
    double seconds;
} ft_wl_keys_stats;

/* ft_wl_keys_opts_init sets o to the defaults: 1,000,000 keys, seed 1,
 * all online cores, the FT_WL_VOCAB vocabulary. */
void ft_wl_keys_opts_init(ft_wl_keys_opts *o);

/* ft_wl_sink receives the output bytes in order; non-zero stops the run
 * and is returned. */
typedef int (*ft_wl_sink)(const void *buf, size_t len, void *arg);

/* ft_wl_keys_write generates the library and hands it to sink in fmt.  The
 * keys come out distinct and in lexicographic order (a prefix before its
 * extensions), so they can go straight into the trie builder.  FT_ELIMIT:
 * the vocabulary has too few tokens for n distinct keys of this shape
 * (output may have reached the sink already). */
int ft_wl_keys_write(ft_wl_keys_stats *st, const ft_wl_keys_opts *o,
                     ft_wl_format fmt, ft_wl_sink sink, void *arg);

/* ft_wl_key_cb receives one key; non-zero stops the run. */
typedef int (*ft_wl_key_cb)(const uint32_t *toks, uint32_t n, void *arg);

/* ft_wl_keys_each generates the library and calls cb for every key, in
 * order, from the calling thread. */
int ft_wl_keys_each(ft_wl_keys_stats *st, const ft_wl_keys_opts *o,
                    ft_wl_key_cb cb, void *arg);

/* ft_wl_build_index generates a library and writes its index to path with
 * the public incremental builder (ft_builder; values = key number, as a
 * keys file would give them).  For tests and quick benchmarks. */
int ft_wl_build_index(ft_wl_keys_stats *st, const ft_wl_keys_opts *o,
                      const char *path, char *errbuf, size_t errlen);

/* ---- request grids ---- */

typedef struct ft_wl_req_opts {
    uint64_t n;        /* requests */
    uint64_t seed;
    uint32_t T;        /* positions, default 8 */
    uint32_t K;        /* proposals per position, 0 = beam */
    uint32_t beam;     /* default 100 */
    uint32_t head;     /* coherent head r per position, default K/10 */
    int head_set;      /* head was given explicitly */
    uint32_t results;  /* 0 = leave out (defaults to beam) */
    int has_theta_tok, has_theta_sent, has_alpha;
    float theta_tok, theta_sent;
    double alpha;
    uint32_t sample;   /* keys kept to draw heads and marginals from */
    int threads;       /* sampling the index: 0 = all online cores; never
                        * changes the output */
} ft_wl_req_opts;

/* ft_wl_req_opts_init sets o to the defaults: 1000 requests, seed 1,
 * T = 8, FT_DEFAULT_BEAM, K = beam, head K/10, a sample of 2^20 keys, all
 * online cores; no results count, thresholds or alpha in the requests. */
void ft_wl_req_opts_init(ft_wl_req_opts *o);

/* ft_wl_reqs is a source of request grids over one index. */
typedef struct ft_wl_reqs ft_wl_reqs;

/* ft_wl_reqs_open samples the library of idx (which must outlive the
 * source) once: per-position token marginals and a sample of keys, as one
 * pass over the keys in order would (o->threads walk it in parallel). */
int ft_wl_reqs_open(ft_wl_reqs **out, const ft_index *idx,
                    const ft_wl_req_opts *o, char *errbuf, size_t errlen);
/* ft_wl_reqs_open_library is ft_wl_reqs_open over a library: the keys of
 * every shard, in token order.  Over a manifest it gives the same requests,
 * byte for byte, as over the unsharded index. */
int ft_wl_reqs_open_library(ft_wl_reqs **out, const ft_library *lib,
                            const ft_wl_req_opts *o, char *errbuf,
                            size_t errlen);
/* ft_wl_reqs_derive makes a source with other grid options (n, K, beam,
 * head, results, thresholds) over src's sample, without sampling again;
 * seed, T and sample must be src's (FT_EINVAL otherwise).  src may be
 * closed first. */
int ft_wl_reqs_derive(ft_wl_reqs **out, const ft_wl_reqs *src,
                      const ft_wl_req_opts *o, char *errbuf, size_t errlen);
/* ft_wl_reqs_close frees g (NULL is a no-op); the sample it shares with
 * derived sources lives until the last of them is closed. */
void ft_wl_reqs_close(ft_wl_reqs *g);

/* ft_wl_reqs_make fills request number i (independent of the others) into
 * req, whose token and logp arrays live in g until the next call with the
 * same slot (slot < 64 lets callers hold up to 64 requests at once). */
int ft_wl_reqs_make(ft_wl_reqs *g, uint64_t i, unsigned slot,
                    ft_request *req);

/* ft_wl_reqs_write writes o->n requests as docs/specification.md section 7 JSON
 * Lines, formatted on o->threads threads (the same bytes for any count). */
int ft_wl_reqs_write(ft_wl_reqs *g, FILE *f, char *errbuf, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* FT_WORKLOAD_H */
