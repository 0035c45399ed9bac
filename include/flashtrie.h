/*
 * flashtrie.h - the public C API of the FlashTrie library.
 *
 * FlashTrie keeps a library of integer-token keys as a succinct LOUDS trie
 * and runs trie-constrained beam search over model output grids, on a
 * multi-threaded CPU engine or on a GPU.  Semantics follow SPEC.md.
 *
 * Conventions (see docs/architecture.md):
 *  - Every public symbol starts with ft_; functions return an int error code
 *    (FT_OK = 0) and hand results back through out-pointers given first.
 *  - Functions that can fail for reasons a user must read take an error
 *    buffer (errbuf, errlen) that receives one line naming what is wrong and
 *    where.  The buffer may be NULL.
 *  - Library code never exits and never prints except through the logger.
 */
#ifndef FLASHTRIE_H
#define FLASHTRIE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FT_VERSION_STRING "0.1.0"

/* ft_err is the stable list of error codes.  Values never change. */
typedef enum ft_err {
    FT_OK = 0,
    FT_ENOMEM = 1,     /* out of host memory */
    FT_EINVAL = 2,     /* invalid argument (programming or usage error) */
    FT_EIO = 3,        /* read, write, open, mmap or rename failed */
    FT_EPARSE = 4,     /* library input (keys file) is malformed */
    FT_EFORMAT = 5,    /* an index file is not a FlashTrie index or is damaged */
    FT_ECHECKSUM = 6,  /* an index section does not match its checksum */
    FT_EVERSION = 7,   /* an index file has an unsupported format version */
    FT_ETRUNC = 8,     /* an index file is shorter than its header says */
    FT_ELIMIT = 9,     /* a size limit was exceeded */
    FT_ENOTFOUND = 10, /* a key or prefix is not in the index */
    FT_EREQUEST = 11,  /* a search request breaks a rule of SPEC section 3 */
    FT_ENODEV = 12,    /* no usable GPU */
    FT_ECUDA = 13,     /* a CUDA call failed */
    FT_ENCCL = 14,     /* an NCCL call failed */
    FT_ENOTSUP = 15,   /* not supported by this build or engine */
    FT_EBUSY = 16,     /* a bounded queue is full */
    FT_EINTERNAL = 17, /* an internal invariant broke (a bug) */
    FT_ESTATE = 18,    /* an object is not in a state that allows the call */
    FT_EPROTO = 19,    /* a wire message (frame or line) is malformed */
    FT_EDEADLINE = 20, /* a request's deadline passed before it ran */
    FT_ETIMEDOUT = 21, /* a client call timed out */
    FT_ECONN = 22,     /* connecting to, or talking with, a peer failed */
    FT_EPERM = 23,     /* the operation is not allowed here (admin only) */
    FT_ECONFIG = 24,   /* a configuration file or setting is invalid */
    FT_ESHUTDOWN = 25, /* the server is draining and takes no new work */
    FT_EMANIFEST = 26  /* a shard manifest is malformed or its shards
                        * do not match it */
} ft_err;

/* ft_strerror returns a short, static, English description of err. */
const char *ft_strerror(int err);

/* ---- Logging ---------------------------------------------------------- */

typedef enum ft_log_level {
    FT_LOG_ERROR = 0,
    FT_LOG_WARN = 1,
    FT_LOG_INFO = 2,
    FT_LOG_DEBUG = 3
} ft_log_level;

/* ft_log_set_level sets the most verbose level that is printed (to stderr,
 * or to the sink given to ft_log_set_sink).  The default is FT_LOG_WARN. */
void ft_log_set_level(ft_log_level level);
ft_log_level ft_log_get_level(void);
typedef void (*ft_log_sink)(ft_log_level level, const char *line, void *arg);
/* ft_log_set_sink redirects log lines; NULL restores stderr. */
void ft_log_set_sink(ft_log_sink sink, void *arg);
/* ft_log_write formats and emits one log line (timestamp, level, file:line,
 * message) to the sink.  Use FT_LOGF, which checks the level first. */
void ft_log_write(ft_log_level level, const char *file, int line,
                  const char *fmt, ...) __attribute__((format(printf, 4, 5)));
#define FT_LOGF(level, ...)                                                   \
    do {                                                                      \
        if ((level) <= ft_log_get_level())                                    \
            ft_log_write((level), __FILE__, __LINE__, __VA_ARGS__);           \
    } while (0)

/* ---- Limits (SPEC sections 1 and 3) ------------------------------------ */

#define FT_MAX_KEY_LEN_DEFAULT 64u
#define FT_MAX_KEY_LEN_LIMIT 255u
#define FT_MAX_T 64u
#define FT_MAX_K 4096u
#define FT_MAX_BEAM 4096u
#define FT_MAX_RESULTS 4096u
#define FT_DEFAULT_BEAM 100u

/* ---- Building an index ------------------------------------------------- */

typedef struct ft_build_opts {
    const char *input;     /* keys file (text or .ftk), "-" for stdin */
    const char *output;    /* index file; written aside and renamed */
    uint32_t max_key_len;  /* 0 means FT_MAX_KEY_LEN_DEFAULT */
    int skip_invalid;      /* skip bad lines and count them */
    uint64_t max_memory;   /* bytes for parsing and sorting; 0 = default */
    int threads;           /* 0 = all online cores */
    int progress;          /* print a progress line on stderr */
    const char *tmp_dir;   /* for sorted runs; NULL = dir of output */
    int format;            /* FT_KEYS_AUTO, FT_KEYS_TEXT or FT_KEYS_FTK */
} ft_build_opts;

/* Input formats.  FT_KEYS_AUTO reads a path ending in ".ftk" as binary and
 * anything else as text, except that stdin (or a text path) whose first
 * 8 bytes are the "FTKEYSV1" magic is read as binary with values. */
#define FT_KEYS_AUTO 0
#define FT_KEYS_TEXT 1
#define FT_KEYS_FTK 2

typedef struct ft_build_stats {
    uint64_t lines;        /* lines (records) read, skipped ones included */
    uint64_t keys_read;    /* valid keys read, duplicates included */
    uint64_t keys;         /* distinct keys in the index */
    uint64_t skipped;      /* invalid lines skipped (skip_invalid) */
    uint64_t nodes;        /* trie nodes, root included */
    uint64_t runs;         /* sorted runs spilled to disk */
    double seconds;        /* wall time of the whole build */
    uint64_t index_bytes;  /* size of the written file */
} ft_build_stats;

/* ft_build_opts_init fills opts with the defaults. */
void ft_build_opts_init(ft_build_opts *opts);

/* ft_build builds an index file from a keys file (SPEC section 2).  On a bad
 * line it fails with FT_EPARSE and errbuf names the file, the line (or
 * record) number counted from 1 and the reason. */
int ft_build(ft_build_stats *stats, const ft_build_opts *opts, char *errbuf,
             size_t errlen);

/* ---- Opening and inspecting an index ----------------------------------- */

typedef struct ft_index ft_index;

#define FT_OPEN_NO_VERIFY 1u /* skip section checksums (huge files) */

/* ft_index_open maps an index file read-only and checks its header, section
 * table and (unless FT_OPEN_NO_VERIFY) every section's checksum. */
int ft_index_open(ft_index **out, const char *path, unsigned flags,
                  char *errbuf, size_t errlen);
void ft_index_close(ft_index *idx);

#define FT_INFO_MAX_SECTIONS 16

typedef struct ft_index_info {
    uint64_t keys;
    uint64_t nodes;          /* root included */
    uint32_t max_depth;      /* longest key */
    uint32_t max_key_len;    /* build option recorded in the file */
    uint64_t root_fanout;
    uint64_t high_nodes;     /* nodes whose label needs more than 16 bits */
    uint64_t unary_nodes;    /* non-terminal nodes with exactly one child:
                              * what Patricia compression would fold */
    uint64_t leaves;         /* nodes without children */
    uint32_t label_high_bits;/* width of the packed high label part */
    uint32_t value_bits;     /* width of the packed values */
    uint64_t file_bytes;
    uint64_t trie_bytes;     /* all sections but the values */
    uint64_t value_bytes;    /* value section */
    uint32_t n_sections;
    struct {
        char name[24];
        uint64_t bytes;
    } sections[FT_INFO_MAX_SECTIONS];
} ft_index_info;

int ft_index_info_get(ft_index_info *info, const ft_index *idx);

/* ft_index_lookup finds a whole key; FT_ENOTFOUND when it is not a key. */
int ft_index_lookup(uint64_t *value, const ft_index *idx, const uint32_t *toks,
                    size_t n);

/* ft_prefix_cb receives one key under a prefix; return non-zero to stop. */
typedef int (*ft_prefix_cb)(const uint32_t *toks, size_t n, uint64_t value,
                            void *arg);

/* ft_index_prefix walks, in lexicographic order, the keys that start with
 * prefix (n may be 0: all keys), at most limit of them (0 = no limit).
 * FT_ENOTFOUND when no node spells the prefix. */
int ft_index_prefix(uint64_t *visited, const ft_index *idx,
                    const uint32_t *prefix, size_t n, uint64_t limit,
                    ft_prefix_cb cb, void *arg);

/* ---- Libraries: an index or a sharded manifest --------------------------
 *
 * A library is what the search runs over: one index file, or a manifest
 * naming one index per shard (contiguous ranges of first tokens;
 * docs/sharding.md).  Everything that takes an index path takes a manifest
 * path too: ft_library_open tells them apart by their magic.  A library is
 * read-only once open and may be shared by any number of threads. */

typedef struct ft_manifest ft_library;

int ft_library_open(ft_library **out, const char *path, unsigned flags,
                    char *errbuf, size_t errlen);
void ft_library_close(ft_library *lib);
/* ft_library_shards is 1 for a plain index. */
size_t ft_library_shards(const ft_library *lib);
/* ft_library_shard returns shard s's index (in token order). */
const ft_index *ft_library_shard(const ft_library *lib, size_t s);
/* ft_library_is_manifest is non-zero when the library came from a
 * manifest (even one of one shard). */
int ft_library_is_manifest(const ft_library *lib);
/* ft_library_info_get, _lookup and _prefix are the ft_index_ calls over
 * the whole library (counts summed, lookups routed by first token). */
int ft_library_info_get(ft_index_info *info, const ft_library *lib);
int ft_library_lookup(uint64_t *value, const ft_library *lib,
                      const uint32_t *toks, size_t n);
int ft_library_prefix(uint64_t *visited, const ft_library *lib,
                      const uint32_t *prefix, size_t n, uint64_t limit,
                      ft_prefix_cb cb, void *arg);

/* ---- Search requests and results (SPEC sections 3 to 5) ---------------- */

typedef struct ft_request {
    uint32_t T;             /* positions, 1..64 */
    uint32_t K;             /* proposals per position, 1..4096 */
    const uint32_t *tokens; /* T*K, row-major: tokens[t*K + k] */
    const float *logp;      /* T*K, row-major, finite */
    uint32_t beam;          /* B, 1..4096 */
    uint32_t results;       /* n, 1..4096 */
    float theta_tok;        /* default -inf */
    float theta_sent;       /* default -inf */
    double alpha;           /* 0..10, default 1.0 */
} ft_request;

/* ft_request_init fills the defaults of SPEC section 3 (results = 0 means
 * "as many as beam" until ft_request_validate resolves it). */
void ft_request_init(ft_request *req);

/* ft_request_validate checks every rule of SPEC section 3.  On a fault it
 * returns FT_EREQUEST and writes "<field>: <reason>" (with the position for
 * grid faults) into errbuf.  max_beam caps beam (0 = FT_MAX_BEAM). */
int ft_request_validate(const ft_request *req, uint32_t max_beam, char *errbuf,
                        size_t errlen);

typedef struct ft_hit {
    uint32_t len;     /* tokens in the key */
    uint32_t tok_off; /* offset of the key's tokens in ft_result.tokens */
    uint64_t value;
    double score;
    float sigma;
    uint32_t order;     /* SPEC section 4's order (t, r, k), packed as
                         * t << 24 | r << 12 | k: breaks score ties */
    uint64_t key_index; /* the key's number in the library: its place in
                         * the value table of its shard (the trie's
                         * terminal order) plus the keys of the shards
                         * before it */
} ft_hit;

/* ft_result holds one request's answer in caller-owned buffers, sized once
 * by ft_result_alloc and reused across searches. */
typedef struct ft_result {
    uint32_t n;          /* hits filled in */
    uint32_t cap_hits;   /* capacity of hits */
    uint32_t cap_tokens; /* capacity of tokens */
    ft_hit *hits;
    uint32_t *tokens;
    int status;          /* FT_OK or the error of this request */
    char error[160];     /* "<field>: <reason>" when status != FT_OK */
} ft_result;

int ft_result_alloc(ft_result *res, uint32_t max_hits, uint32_t max_len);
void ft_result_free(ft_result *res);

/* ---- Engines ----------------------------------------------------------- */

typedef enum ft_engine_kind {
    FT_ENGINE_CPU = 0,
    FT_ENGINE_GPU = 1,
    FT_ENGINE_AUTO = 2 /* the GPU engine when one is usable, else the CPU
                        * engine; ft_engine_note says which and why */
} ft_engine_kind;

typedef struct ft_engine_opts {
    ft_engine_kind kind;
    int threads;        /* CPU engine workers, 0 = all online cores */
    int device;         /* GPU ordinal */
    uint32_t max_batch; /* GPU: requests per launch, 0 = 32 */
    uint32_t max_beam;  /* GPU: arena sizing, 0 = FT_MAX_BEAM */
    uint32_t max_k;     /* GPU: arena sizing, 0 = FT_MAX_K */
    uint32_t max_t;     /* GPU: arena sizing, 0 = FT_MAX_T */
    long spin_us;       /* CPU: how long a waiting worker spins before it
                         * sleeps; -1 = the engine's choice */
    int timing;         /* GPU: keep host-side phase timings per call
                         * (ft_engine_timing_report) */
} ft_engine_opts;

typedef struct ft_engine ft_engine;

void ft_engine_opts_init(ft_engine_opts *opts);

/* ft_engine_open creates an engine over idx (which must outlive it).  The
 * GPU engine returns FT_ENODEV when no GPU is usable, FT_ENOTSUP when the
 * library was built without CUDA.  An engine serves one caller at a time:
 * calls on one engine must not overlap (use one engine per thread, or a
 * lock); different engines over one index may run at once. */
int ft_engine_open(ft_engine **out, const ft_index *idx,
                   const ft_engine_opts *opts, char *errbuf, size_t errlen);
void ft_engine_close(ft_engine *eng);
const char *ft_engine_name(const ft_engine *eng);
/* ft_engine_note says in one line which engine runs and why (for
 * FT_ENGINE_AUTO: the GPU's name, or why no GPU engine could start). */
const char *ft_engine_note(const ft_engine *eng);
/* ft_engine_get_opts copies the options the engine was opened with (with
 * its defaults resolved where it resolves them). */
void ft_engine_get_opts(ft_engine_opts *opts, const ft_engine *eng);
/* ft_engine_failed is non-zero once an engine error (a CUDA error) took the
 * engine out of service; it then answers every call with FT_ESTATE. */
int ft_engine_failed(const ft_engine *eng);
/* ft_engine_timing_report writes the engine's host-side phase timings (opened
 * with opts.timing) as text into buf; an empty string when it keeps none. */
void ft_engine_timing_report(const ft_engine *eng, char *buf, size_t len);

/* ft_engine_search validates and answers one request.  A rejected request
 * returns FT_EREQUEST with res->error set; res->n is then 0. */
int ft_engine_search(ft_engine *eng, const ft_request *req, ft_result *res);

/* ft_engine_search_batch answers n requests: validates each, runs the
 * valid ones and attaches the values of the hits.  Each result carries its
 * own status.  Returns FT_OK unless the engine itself failed. */
int ft_engine_search_batch(ft_engine *eng, const ft_request *reqs, size_t n,
                           ft_result *res);

/* ---- Prepared requests and the engine steps ------------------------------
 *
 * Below the public search, engines see only prepared requests: validated,
 * the proposals of every position stable-sorted by logp descending (SPEC
 * section 4's k) and cut to those with logp > theta_tok, with the length
 * normalisation table F.  ft_request_prepare makes them.
 *
 * Engines answer prepared requests whole (ft_engine_run: on one GPU all T
 * steps in one launch), and also one decode step at a time, which is what
 * a shard group drives (router/: every shard expands, the shards exchange
 * their local top-B candidate keys, each keeps its members of the global
 * top-B):
 *
 *   ft_engine_step_begin(eng, preps, n, shard, nshards)
 *   for t in 0 .. Tmax-1:
 *       ft_engine_step_expand(eng, t)   -> send: per request its local
 *                                          top-B keys, sorted, padded
 *       (exchange: every shard's send lands in every shard's recv, in
 *        shard order: recv[s * len .. (s + 1) * len) is shard s's send)
 *       ft_engine_step_keep(eng, t)     <- recv
 *   ft_engine_step_finish(eng, res)     -> local top-n hits per request
 *
 * Keys are SPEC section 4's (sigma desc, r asc, k asc) packed in a u64
 * with r the *global* rank of the parent entry (shard/rules.h), padded with
 * UINT64_MAX.  Request i's list is at offset off[i] = beam[0] + ... +
 * beam[i-1] of length beam[i].  The exchange buffers live in the engine's
 * memory: host memory for the CPU engine, device memory for the GPU engine
 * (ft_engine_stream gives the stream the steps are enqueued on; no host
 * wait happens between steps).  Engine results (ft_engine_run and
 * ft_engine_step_finish) carry key_index and order but no value: the
 * values are attached once, after any merge, by the public search. */

typedef struct ft_prepared {
    uint32_t T, K;          /* positions; row stride of tok and logp */
    const uint32_t *tok;    /* [t * K + k], k after the stable sort */
    const float *logp;      /* [t * K + k] */
    const uint32_t *keff;   /* [t]: proposals with logp > theta_tok */
    const uint32_t *row;    /* [t] = t * K: row starts (for backtraces) */
    const double *F;        /* [d], d = 0..T: pow(6 / (5 + d), alpha) */
    uint32_t beam, results; /* B and n (n resolved: never 0) */
    float theta_tok, theta_sent;
    double alpha;
} ft_prepared;

/* ft_prep owns the buffers of one prepared request; reuse it across
 * requests (it grows to the largest grid it has seen). */
typedef struct ft_prep ft_prep;
int ft_prep_create(ft_prep **out);
void ft_prep_destroy(ft_prep *p);
/* ft_request_prepare prepares a request that ft_request_validate accepted;
 * *out points into p until p's next use. */
int ft_request_prepare(const ft_prepared **out, ft_prep *p,
                       const ft_request *req);

/* ft_engine_run answers n prepared requests whole; each result gets
 * status, hits with tokens, score, sigma, order and key_index (no value).
 * Returns FT_OK unless the engine failed. */
int ft_engine_run(ft_engine *eng, const ft_prepared *const *reqs,
                  ft_result *const *res, size_t n);

/* The most requests one ft_engine_run or step batch takes. */
#define FT_ENGINE_CHUNK 64

int ft_engine_step_begin(ft_engine *eng, const ft_prepared *const *reqs,
                         size_t n, uint32_t shard, uint32_t nshards);
/* ft_engine_step_buffers gives the current batch's exchange buffers: send
 * holds len keys, recv nshards * len (engine memory, see above). */
int ft_engine_step_buffers(ft_engine *eng, uint64_t **send, uint64_t **recv,
                           size_t *len);
int ft_engine_step_expand(ft_engine *eng, uint32_t t);
int ft_engine_step_keep(ft_engine *eng, uint32_t t);
/* ft_engine_step_finish writes each request's local top-n hits, sorted by
 * (score desc, order asc), key_index local to this engine's index. */
int ft_engine_step_finish(ft_engine *eng, ft_result *const *res);
/* ft_engine_stream returns the cudaStream_t a GPU engine enqueues its steps
 * on, NULL for the CPU engine (its steps are done when they return). */
void *ft_engine_stream(ft_engine *eng);
/* ft_engine_index returns the index the engine was opened over. */
const ft_index *ft_engine_index(const ft_engine *eng);
/* ft_engine_device returns the GPU ordinal of a GPU engine, -1 for CPU. */
int ft_engine_device(const ft_engine *eng);

/* ---- Shard groups -------------------------------------------------------
 *
 * A library split by first token into shards (contiguous token ranges, in
 * order; shard s holds the keys from key index base[s] on) is searched by
 * a group of engines, one per shard, all advancing one decode step at a
 * time and exchanging their local top-B keys after every step.  Results
 * are identical, bit for bit, to one engine over the unsharded index
 * (SPEC section 6).  The exchange backend follows from the engines: host
 * memory for CPU engines. */

typedef struct ft_group ft_group;

/* ft_group_open opens one engine per shard (opts for each; the shards
 * must outlive the group and be given in token order). */
int ft_group_open(ft_group **out, const ft_index *const *shards,
                  size_t nshards, const ft_engine_opts *opts, char *errbuf,
                  size_t errlen);
void ft_group_close(ft_group *g);
/* ft_group_search_batch is ft_engine_search_batch over the group. */
int ft_group_search_batch(ft_group *g, const ft_request *reqs, size_t n,
                          ft_result *res);
/* ft_group_engine returns the engine of shard s. */
ft_engine *ft_group_engine(ft_group *g, size_t s);
size_t ft_group_shards(const ft_group *g);

/* ---- Searchers: the search over a whole library --------------------------
 *
 * A searcher is what serves a library: one engine for a plain index, a
 * shard group for a manifest of several shards.  Like an engine it serves
 * one caller at a time. */

typedef struct ft_searcher ft_searcher;

typedef struct ft_searcher_opts {
    ft_engine_opts engine; /* kind FT_ENGINE_AUTO, CPU or GPU; every shard
                            * gets an engine of the same kind */
} ft_searcher_opts;

void ft_searcher_opts_init(ft_searcher_opts *o);
/* ft_searcher_open opens the engine(s) over lib (which must outlive the
 * searcher).  With FT_ENGINE_AUTO the GPU is taken when its engine opens,
 * else the CPU; ft_searcher_note says which and why. */
int ft_searcher_open(ft_searcher **out, const ft_library *lib,
                     const ft_searcher_opts *o, char *errbuf, size_t errlen);
void ft_searcher_close(ft_searcher *s);
/* ft_searcher_search_batch is ft_engine_search_batch over the library. */
int ft_searcher_search_batch(ft_searcher *s, const ft_request *reqs, size_t n,
                             ft_result *res);
const char *ft_searcher_note(const ft_searcher *s);
/* ft_searcher_failed is non-zero once an engine of the searcher failed. */
int ft_searcher_failed(const ft_searcher *s);
/* ft_searcher_kind is the engine kind the searcher runs (CPU or GPU). */
ft_engine_kind ft_searcher_kind(const ft_searcher *s);

/* ft_index_value_at gives the value of the key with the given key index
 * (ft_hit.key_index within this index); FT_ENOTFOUND past the end. */
int ft_index_value_at(uint64_t *value, const ft_index *idx,
                      uint64_t key_index);
/* ft_index_keys is the number of keys of idx. */
uint64_t ft_index_keys(const ft_index *idx);

#ifdef __cplusplus
}
#endif

#endif /* FLASHTRIE_H */
