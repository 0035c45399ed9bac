/*
 * flashtrie.h - the public C API of the FlashTrie library.
 *
 * FlashTrie keeps a library of integer-token keys as a succinct LOUDS trie
 * and runs trie-constrained beam search over model output grids, on a
 * multi-threaded CPU engine or on a GPU.  Semantics follow
 * docs/specification.md.
 *
 * Conventions (see docs/architecture.md):
 *  - Every public symbol starts with ft_ (macros FT_) and every public
 *    function is declared here (or in flashtrie_client.h) with FT_API:
 *    libflashtrie.so exports those and nothing else.  The library's own
 *    private calls start with fti_ and are not part of this API.
 *  - Functions return an int error code (FT_OK = 0) and hand results back
 *    through out-pointers given first.
 *  - Functions that can fail for reasons a user must read take an error
 *    buffer (errbuf, errlen) that receives one line naming what is wrong and
 *    where.  The buffer may be NULL.
 *  - Library code never exits and never prints except through the logger
 *    (ft_log_set_sink) and the callbacks a caller hands it.
 *  - A pointer argument may be NULL only where its comment says so.  The
 *    open and create calls (their out, path, index or library), the
 *    searches (requests and results), the index and library queries
 *    (keys, prefixes, callbacks) and the AR calls (beams, inputs, outputs)
 *    check theirs and return FT_EINVAL, named in errbuf (or ft_ar_error)
 *    where the call has one.
 *  - A NULL object handle (ft_builder, ft_index, ft_library, ft_engine,
 *    ft_searcher, ft_ar; ft_client and ft_client_results in
 *    flashtrie_client.h) is refused by every call that takes one: a call
 *    that returns a status returns FT_EINVAL (errbuf, where the call has
 *    one, names it: "engine: index is NULL"; ft_ar_error(NULL) and
 *    ft_builder_error(NULL) say "ar: NULL" and "builder: NULL"), the
 *    close, destroy and free calls do nothing (as free(NULL) does), and
 *    the getters return the neutral value their comment gives (0, NULL,
 *    "", or FT_ENGINE_AUTO for a kind), writing nothing through their
 *    out-pointers.
 *  - What no call can check: a closed or freed (dangling) handle, which
 *    cannot be told from a live one (using one is undefined: it may
 *    crash), an options struct not filled by its *_init function beyond
 *    the fields it validates, arrays shorter than their stated counts, and
 *    (AR) host pointers given to a GPU session or device pointers to a CPU
 *    session.
 *
 * Thread safety:
 *  - An opened ft_index is immutable: any number of threads may look up,
 *    walk, navigate it and run engines over it at the same time.
 *  - An ft_engine serves one caller at a time (its own worker threads are
 *    internal); use one engine per calling thread, or serialise the calls.
 *  - An ft_builder is used by one thread at a time.
 *  - ft_build, ft_version*, ft_strerror, ft_err_name, ft_engine_kind_*
 *    and the *_init functions are safe from any thread.  The logger's
 *    level and sink are process-wide: set them before other threads use
 *    the library.  Callbacks (log sink, build progress) may run on a
 *    library thread, one call at a time.
 *
 * Ownership and lifetimes:
 *  - Every object the library creates (ft_index, ft_engine, ft_builder)
 *    is freed by its own close/destroy function, which accepts NULL.
 *  - An index must outlive every engine (and every other object, such as
 *    a request generator) opened over it.
 *  - Pointers handed in (paths, token and logp arrays, option strings) are
 *    only read during the call, unless stated otherwise; strings handed
 *    back (ft_strerror, ft_version_string, ft_engine_name) are static or
 *    live as long as their object.
 *  - ft_result buffers belong to the caller (ft_result_alloc/free).
 *
 * Growing structs: ft_build_opts, ft_build_stats and ft_index_info start
 * with a struct_size that their *_init function sets to the size the
 * caller was compiled with.  The library checks it (FT_EINVAL when it is
 * smaller than the first published layout or absurdly large), reads or
 * writes only the first struct_size bytes, and treats the fields beyond
 * them as defaults, so fields can be added at the end without breaking
 * programs built against an older header.  Always call the *_init function
 * before filling or passing such a struct.
 */
#ifndef FLASHTRIE_H
#define FLASHTRIE_H

#include <stddef.h>
#include <stdint.h>

/* FT_API marks the library's public functions: the library is built with
 * hidden visibility, so only these are exported from the shared library. */
#ifndef FT_API
#if defined(__GNUC__) || defined(__clang__)
#define FT_API __attribute__((visibility("default")))
#else
#define FT_API
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* FT_VERSION_MAJOR, _MINOR, _PATCH and FT_VERSION_STRING: the version
 * of this header, generated from the project version. */
#include "flashtrie_version.h"

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
    FT_EREQUEST = 11,  /* a search request breaks a rule of docs/specification.md section 3 */
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
FT_API const char *ft_strerror(int err);
/* ft_err_name returns the name of err's constant ("FT_EINVAL"), static;
 * NULL for a value that is no ft_err. */
FT_API const char *ft_err_name(int err);

/* ft_version reports the version of the library that is linked (which can
 * differ from FT_VERSION_STRING of the header a program was built with,
 * for a shared library).  Any pointer may be NULL. */
FT_API void ft_version(int *major, int *minor, int *patch);
/* ft_version_string returns the linked library's version, "0.1.0". */
FT_API const char *ft_version_string(void);

/* ---- Logging ---------------------------------------------------------- */

typedef enum ft_log_level {
    FT_LOG_ERROR = 0,
    FT_LOG_WARN = 1,
    FT_LOG_INFO = 2,
    FT_LOG_DEBUG = 3
} ft_log_level;

/* ft_log_set_level sets the most verbose level that is printed (to stderr,
 * or to the sink given to ft_log_set_sink).  The default is FT_LOG_WARN.
 * The value is taken as it is: below FT_LOG_ERROR prints nothing at all. */
FT_API void ft_log_set_level(ft_log_level level);
FT_API ft_log_level ft_log_get_level(void);
typedef void (*ft_log_sink)(ft_log_level level, const char *line, void *arg);
/* ft_log_set_sink redirects log lines; NULL restores stderr. */
FT_API void ft_log_set_sink(ft_log_sink sink, void *arg);
/* ft_log_write formats and emits one log line (timestamp, level, file:line,
 * message) to the sink.  Use FT_LOGF, which checks the level first.  A
 * level that is no ft_log_level is written as "levelN", a NULL file as
 * "?". */
FT_API void ft_log_write(ft_log_level level, const char *file, int line,
                         const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define FT_LOGF(level, ...)                                                   \
    do {                                                                      \
        if ((level) <= ft_log_get_level())                                    \
            ft_log_write((level), __FILE__, __LINE__, __VA_ARGS__);           \
    } while (0)

/* ---- Limits (docs/specification.md sections 1 and 3) ------------------------------------ */

#define FT_MAX_KEY_LEN_DEFAULT 64u
#define FT_MAX_KEY_LEN_LIMIT 255u
#define FT_MAX_T 64u
#define FT_MAX_K 4096u
#define FT_MAX_BEAM 4096u
#define FT_MAX_RESULTS 4096u
#define FT_DEFAULT_BEAM 100u

/* ---- Building an index ------------------------------------------------- */

/* Build phases reported to ft_build_opts.progress. */
typedef enum ft_build_phase {
    FT_BUILD_READING = 0, /* parsing and sorting input (keys being added) */
    FT_BUILD_MERGING = 1, /* merging sorted chunks or runs into the trie */
    FT_BUILD_PROFILE = 2  /* the end: phase times in .profile (opts.profile) */
} ft_build_phase;

/* ft_build_progress is one progress report.  Counters are cumulative. */
typedef struct ft_build_progress {
    uint32_t struct_size;
    ft_build_phase phase;
    uint64_t lines;       /* lines (records, added keys) so far */
    uint64_t keys_read;   /* valid keys so far, duplicates included */
    uint64_t skipped;     /* invalid lines skipped so far */
    uint64_t bytes_read;  /* input bytes read (0 for ft_builder) */
    uint64_t runs;        /* sorted runs spilled so far */
    double seconds;       /* since the build started */
    int threads;          /* threads the build uses */
    /* Wall seconds per phase, filled for FT_BUILD_PROFILE only: read,
     * parse and sort of the input, spills, the final merge (and its
     * slowest and fastest part), the trie finish (scan, alloc, pack,
     * rank), checksums, write and fsync. */
    struct {
        double read, parse, sort, spill, merge, part_min, part_max;
        double fin_scan, fin_alloc, fin_pack, fin_rank;
        double checksum, write, fsync, total;
    } profile;
} ft_build_progress;

/* ft_build_progress_fn receives a report; it runs on a build thread (one
 * call at a time), at most every 2 seconds plus once per phase change. */
typedef void (*ft_build_progress_fn)(const ft_build_progress *p, void *arg);

/* ft_build_progress_format writes the one-line English form of a report
 * (no newline), the line "flashtrie build --progress" prints. */
FT_API int ft_build_progress_format(char *buf, size_t len,
                                    const ft_build_progress *p);

typedef struct ft_build_opts {
    uint32_t struct_size;  /* set by ft_build_opts_init */
    const char *input;     /* keys file (text or .ftk), "-" for stdin;
                            * ft_build only */
    const char *output;    /* index file; written aside and renamed;
                            * ft_build only (ft_builder_finish takes it) */
    uint32_t max_key_len;  /* 0 means FT_MAX_KEY_LEN_DEFAULT */
    int skip_invalid;      /* skip bad lines (keys) and count them */
    uint64_t max_memory;   /* bytes for parsing and sorting; 0 = default */
    int threads;           /* 0 = all online cores */
    ft_build_progress_fn progress; /* NULL: no progress reports */
    void *progress_arg;
    const char *tmp_dir;   /* for sorted runs; NULL = dir of output (for
                            * ft_builder: of opts.output if set, else /tmp) */
    int format;            /* FT_KEYS_AUTO, FT_KEYS_TEXT or FT_KEYS_FTK */
    int profile;           /* time every phase and report the times through
                            * progress (phase FT_BUILD_PROFILE) at the end */
} ft_build_opts;

/* Input formats.  FT_KEYS_AUTO reads a path ending in ".ftk" as binary and
 * anything else as text, except that stdin (or a text path) whose first
 * 8 bytes are the "FTKEYSV1" magic is read as binary with values. */
#define FT_KEYS_AUTO 0
#define FT_KEYS_TEXT 1
#define FT_KEYS_FTK 2

typedef struct ft_build_stats {
    uint32_t struct_size;  /* set by ft_build_stats_init */
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
FT_API void ft_build_opts_init(ft_build_opts *opts);
/* ft_build_stats_init zeroes stats and sets its struct_size. */
FT_API void ft_build_stats_init(ft_build_stats *stats);

/* ft_build builds an index file from a keys file (docs/specification.md section 2).  On a bad
 * line it fails with FT_EPARSE and errbuf names the file, the line (or
 * record) number counted from 1 and the reason.  stats may be NULL. */
FT_API int ft_build(ft_build_stats *stats, const ft_build_opts *opts,
                    char *errbuf, size_t errlen);

/* ft_build_clean removes what builds killed before they could clean up
 * (SIGKILL, a crash, power loss) left behind: OUTPUT.tmp.<pid> and the
 * shards' OUTPUT.shard-*.new.<pid> beside output, and the sorted runs
 * .flashtrie-run-<pid>-* in tmp_dir (NULL: the output's directory), of
 * pids that no process has any more.  Each file removed is logged at
 * FT_LOG_WARN and counted in *removed (may be NULL).  output may be NULL
 * (runs only).  ft_build and ft_builder_create do this themselves first.
 * FT_EIO when a directory cannot be read or a file removed. */
FT_API int ft_build_clean(uint64_t *removed, const char *output,
                          const char *tmp_dir, char *errbuf, size_t errlen);

/* ft_builder builds an index from keys handed over one at a time, in any
 * order, with the same rules as a keys file (docs/specification.md section 2): a key given
 * twice keeps its first value, an empty key or one longer than
 * max_key_len is rejected (or skipped and counted with skip_invalid), and
 * the index depends only on the distinct keys and their first values. */
typedef struct ft_builder ft_builder;

/* ft_builder_create starts a build; opts may be NULL (the defaults).  Only
 * max_key_len, skip_invalid, max_memory, threads, progress, tmp_dir,
 * output (for the tmp_dir default) and profile are used.  opts is copied;
 * its strings must stay valid until ft_builder_destroy. */
FT_API int ft_builder_create(ft_builder **out, const ft_build_opts *opts,
                             char *errbuf, size_t errlen);

/* ft_builder_add adds key number i (0-based: the number of earlier add
 * calls, rejected keys included) with value.  An empty key or one longer
 * than max_key_len returns FT_EPARSE, and ft_builder_error says
 * "key <i+1>: <reason>" (counted from 1, as keys file lines are); the
 * builder stays usable.  With skip_invalid such a key is counted in
 * stats.skipped and FT_OK is returned.  FT_ENOMEM and FT_EIO (a run could
 * not be spilled) are final: the builder can then only be destroyed. */
FT_API int ft_builder_add(ft_builder *b, const uint32_t *toks, size_t n,
                          uint64_t value);
/* ft_builder_add_auto adds a key whose value is its own 0-based number, as
 * a keys file line without a value gets the line number. */
FT_API int ft_builder_add_auto(ft_builder *b, const uint32_t *toks, size_t n);

/* ft_builder_error returns the message of the last failed call ("" if
 * none); it lives until the next call on b.  "builder: NULL" for a NULL
 * b (static). */
FT_API const char *ft_builder_error(const ft_builder *b);

/* ft_builder_finish writes the index to output (aside, then renamed).
 * stats may be NULL.  Afterwards the builder can only be destroyed
 * (FT_ESTATE otherwise). */
FT_API int ft_builder_finish(ft_builder *b, ft_build_stats *stats,
                             const char *output, char *errbuf, size_t errlen);

/* ft_builder_destroy frees b and removes any sorted run it left. */
FT_API void ft_builder_destroy(ft_builder *b);

/* ---- Opening and inspecting an index ----------------------------------- */

typedef struct ft_index ft_index;

#define FT_OPEN_NO_VERIFY 1u /* skip section checksums (huge files) */

/* ft_index_open maps an index file read-only and checks its header, section
 * table and (unless FT_OPEN_NO_VERIFY) every section's checksum. */
FT_API int ft_index_open(ft_index **out, const char *path, unsigned flags,
                         char *errbuf, size_t errlen);
FT_API void ft_index_close(ft_index *idx);

#define FT_INFO_MAX_SECTIONS 16

typedef struct ft_index_info {
    uint32_t struct_size;    /* set by ft_index_info_init */
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

/* ft_index_info_init zeroes info and sets its struct_size. */
FT_API void ft_index_info_init(ft_index_info *info);
/* ft_index_info_get describes idx; info must have been initialised with
 * ft_index_info_init (FT_EINVAL otherwise). */
FT_API int ft_index_info_get(ft_index_info *info, const ft_index *idx);

/* ft_index_lookup finds a whole key; FT_ENOTFOUND when it is not a key
 * (or n is 0).  value may be NULL (is it a key?); toks may be NULL only
 * when n is 0 (FT_EINVAL otherwise).
 * FT_EFORMAT (here and in ft_index_prefix) when the index is found damaged
 * on the way, which only an open with FT_OPEN_NO_VERIFY lets happen. */
FT_API int ft_index_lookup(uint64_t *value, const ft_index *idx,
                           const uint32_t *toks, size_t n);

/* ft_prefix_cb receives one key under a prefix; return non-zero to stop. */
typedef int (*ft_prefix_cb)(const uint32_t *toks, size_t n, uint64_t value,
                            void *arg);

/* ft_index_prefix walks, in lexicographic order, the keys that start with
 * prefix (n may be 0: all keys; prefix may be NULL then), at most limit of
 * them (0 = no limit).  FT_ENOTFOUND when no node spells the prefix;
 * FT_EINVAL for a NULL cb.  visited (may be NULL) counts the keys handed
 * to cb. */
FT_API int ft_index_prefix(uint64_t *visited, const ft_index *idx,
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

FT_API int ft_library_open(ft_library **out, const char *path, unsigned flags,
                           char *errbuf, size_t errlen);
FT_API void ft_library_close(ft_library *lib);
/* ft_library_open_part opens a manifest (never a plain index) but only
 * its shards first .. first + count - 1, checked as ft_library_open checks
 * them (count 0: none, only the manifest's entries): what a rank of a
 * multi-process cluster serves (docs/sharding.md).
 * ft_library_shard is NULL for the others; the info call gives the
 * manifest's counts (keys, nodes, bytes) for the whole library.  A
 * lookup or prefix walk that needs a shard the part does not hold
 * returns FT_ESTATE, and ft_searcher_open refuses a part (FT_EINVAL). */
FT_API int ft_library_open_part(ft_library **out, const char *path,
                                unsigned flags, uint32_t first, uint32_t count,
                                char *errbuf, size_t errlen);
/* ft_library_shards is 1 for a plain index (0 for a NULL lib). */
FT_API size_t ft_library_shards(const ft_library *lib);
/* ft_library_shard returns shard s's index (in token order); NULL past
 * the end or for a NULL lib. */
FT_API const ft_index *ft_library_shard(const ft_library *lib, size_t s);
/* ft_library_is_manifest is non-zero when the library came from a
 * manifest (even one of one shard); 0 for a NULL lib. */
FT_API int ft_library_is_manifest(const ft_library *lib);
/* ft_library_info_get, _lookup and _prefix are the ft_index_ calls over
 * the whole library (counts summed, lookups routed by first token). */
FT_API int ft_library_info_get(ft_index_info *info, const ft_library *lib);
FT_API int ft_library_lookup(uint64_t *value, const ft_library *lib,
                             const uint32_t *toks, size_t n);
FT_API int ft_library_prefix(uint64_t *visited, const ft_library *lib,
                             const uint32_t *prefix, size_t n, uint64_t limit,
                             ft_prefix_cb cb, void *arg);

/* ---- Navigating an index ------------------------------------------------ */

/* Nodes of an opened index are numbered 0 (the root, FT_NODE_ROOT) to
 * nodes - 1 in breadth-first order; a node's children have consecutive
 * numbers, in increasing label order. */
#define FT_NODE_ROOT 0u

/* ft_node_children is one node's children: nodes first .. first+count-1.
 * The remaining fields are private (they speed up the label calls). */
typedef struct ft_node_children {
    uint64_t node;
    uint64_t first;
    uint64_t count;
    uint64_t priv_[2];
} ft_node_children;

/* ft_index_children fills ch for node; FT_EINVAL if node is out of range. */
FT_API int ft_index_children(ft_node_children *ch, const ft_index *idx,
                             uint64_t node);

/* ft_index_child_label returns the label (token) of child i (0-based,
 * i < ch->count) of ch.  Neither i nor the contents of ch (which
 * ft_index_children must have filled, over this idx) are checked: it
 * returns no error.  A NULL idx or ch gives 0 (a label like any other:
 * do not pass them). */
FT_API uint32_t ft_index_child_label(const ft_index *idx,
                                     const ft_node_children *ch, uint64_t i);

/* ft_index_child_find sets *i (may be NULL) to the position of the child
 * labelled tok; FT_ENOTFOUND when there is none, FT_EINVAL for a NULL idx
 * or ch. */
FT_API int ft_index_child_find(uint64_t *i, const ft_index *idx,
                               const ft_node_children *ch, uint32_t tok);

/* ft_index_node_value gives the value of node when it ends a key;
 * FT_ENOTFOUND when it does not, FT_EINVAL when node is out of range. */
FT_API int ft_index_node_value(uint64_t *value, const ft_index *idx,
                               uint64_t node);

/* The most shards a manifest holds. */
#define FT_MAX_SHARDS 65536u

/* ft_library_shard_info is what a manifest records for one shard. */
typedef struct ft_library_shard_info {
    uint32_t lo, hi;     /* first-token range, both included */
    uint64_t keys;
    uint64_t nodes;      /* root included */
    uint64_t trie_bytes; /* what a GPU holds for the shard */
    uint64_t file_bytes;
    const char *name;    /* the shard file, relative to the manifest */
} ft_library_shard_info;

/* ft_library_shard_get fills out for shard s; FT_EINVAL past the end or
 * for a NULL out or lib. */
FT_API int ft_library_shard_get(ft_library_shard_info *out,
                                const ft_library *lib, size_t s);

/* ---- Splitting an index into shards (docs/sharding.md) ------------------ */

typedef struct ft_split_opts {
    const char *output;   /* the manifest; shard files land beside it */
    uint32_t shards;      /* exactly this many shards, or 0 */
    uint64_t shard_bytes; /* or as few as fit this many trie bytes each */
    int threads;          /* shards built at once; 0 = online cores */
} ft_split_opts;

typedef struct ft_split_stats {
    uint32_t shards;
    uint64_t keys;
    uint64_t max_bytes;   /* trie bytes of the largest shard */
    uint64_t total_bytes; /* trie bytes of all shards */
    double seconds;
} ft_split_stats;

/* ft_split writes idx as shards of contiguous first-token ranges
 * (exactly o->shards, or as few as fit o->shard_bytes each; see
 * docs/sharding.md): OUTPUT.shard-III-of-NNN.idx for shard III of NNN
 * (three digits at least), each built from the index's keys in order
 * (values kept), written aside, then all renamed into place, then the
 * manifest at OUTPUT, so a failed build leaves neither a half shard nor a
 * manifest naming one (only a failing rename can leave some new shards in
 * place, which an old manifest then refuses by their checksums).  Each
 * shard written is logged at FT_LOG_INFO.  FT_EINVAL for a NULL o (or no
 * output) or idx ("split: index is NULL"). */
FT_API int ft_split(ft_split_stats *st, const ft_index *idx,
                    const ft_split_opts *o, char *errbuf, size_t errlen);

/* ---- Search requests and results (docs/specification.md sections 3 to 5) ---------------- */

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

/* ft_request_init fills the defaults of docs/specification.md section 3 (results = 0 means
 * "as many as beam" until ft_request_validate resolves it). */
FT_API void ft_request_init(ft_request *req);

/* ft_request_validate checks every rule of docs/specification.md section 3.  On a fault it
 * returns FT_EREQUEST and writes "<field>: <reason>" (with the position for
 * grid faults) into errbuf.  max_beam caps beam (0 = FT_MAX_BEAM). */
FT_API int ft_request_validate(const ft_request *req, uint32_t max_beam,
                               char *errbuf, size_t errlen);

typedef struct ft_hit {
    uint32_t len;     /* tokens in the key */
    uint32_t tok_off; /* offset of the key's tokens in ft_result.tokens */
    uint64_t value;
    double score;
    float sigma;
    uint32_t order;     /* docs/specification.md section 4's order (t, r, k), packed as
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

/* ft_result_alloc sizes res for max_hits hits (0 = 1) of up to max_len
 * tokens each (0 = FT_MAX_T): FT_ELIMIT, with res->error saying so, when
 * max_hits * max_len exceeds the uint32_t cap_tokens; FT_EINVAL for a
 * NULL res.  ft_result_free frees the buffers and zeroes res (NULL is
 * fine; a freed result can be freed again). */
FT_API int ft_result_alloc(ft_result *res, uint32_t max_hits, uint32_t max_len);
FT_API void ft_result_free(ft_result *res);

/* ---- Engines ----------------------------------------------------------- */

typedef enum ft_engine_kind {
    FT_ENGINE_CPU = 0,
    FT_ENGINE_GPU = 1,
    FT_ENGINE_AUTO = 2 /* the GPU engine when one is usable, else the CPU
                        * engine; ft_engine_note says which and why */
} ft_engine_kind;

/* ft_engine_kind_name returns "cpu", "gpu" or "auto" (static), the names
 * the command line and the configuration use; NULL for a value that is no
 * ft_engine_kind. */
FT_API const char *ft_engine_kind_name(ft_engine_kind kind);
/* ft_engine_kind_parse reads one of those names (exactly, lower case) into
 * *kind; FT_EINVAL, *kind untouched, for anything else. */
FT_API int ft_engine_kind_parse(const char *name, ft_engine_kind *kind);

typedef struct ft_engine_opts {
    ft_engine_kind kind;
    int threads;        /* CPU engine workers, 0 = all online cores;
                         * more than 1024 run as 1024 */
    int device;         /* GPU ordinal */
    uint32_t max_batch; /* GPU: requests per launch, 0 = 32 */
    uint32_t max_beam;  /* GPU: arena sizing, 0 = FT_MAX_BEAM */
    uint32_t max_k;     /* GPU: arena sizing, 0 = FT_MAX_K */
    uint32_t max_t;     /* GPU: arena sizing, 0 = FT_MAX_T */
    long spin_us;       /* CPU: how long a waiting worker spins before it
                         * sleeps; -1 = the engine's choice */
    int timing;         /* GPU: keep host-side phase timings per call
                         * (ft_engine_timing_report) */
    uint32_t select_grid_min; /* GPU: a step's candidate list longer than
                         * this (and than its beam or result count) is
                         * narrowed by the whole grid before one CTA sorts
                         * it; 0 = 4096 (what one CTA's shared memory
                         * holds), UINT32_MAX = never.  Below 4096 the
                         * radix passes also run down to the exact limit
                         * (tests use it to put small lists through the
                         * grid path). */
    uint32_t child_map_min; /* GPU: nodes with at least this many children
                         * get their children in a hash table on the
                         * device (a proposal is one probe instead of a
                         * binary search); 0 = 256, UINT32_MAX = no table
                         * (tests use small values to put every node
                         * through it). */
    uint32_t expand_pair_items; /* GPU: a step with at least this many
                         * expansion items (32 proposals or children of
                         * a beam each) has each warp take two at a time,
                         * a lane's two lookups in flight together; 0 =
                         * one item per warp of the grid, UINT32_MAX =
                         * never (tests use 1 to put every step through
                         * it). */
    uint32_t mapped_input_max; /* GPU: a launch of 1..3 requests whose
                         * input region (descriptors and proposal rows)
                         * has at most this many bytes is read by the
                         * kernel itself from pinned host memory, with no
                         * copy before the launch; 0 = 1 MiB, UINT32_MAX
                         * = never (always the copy). */
    uint32_t fuse_term; /* GPU: a launch of one request runs fused steps,
                         * one grid barrier a step: this many CTAs merge
                         * each step's terminal list into the results
                         * while every other CTA selects the next list on
                         * its own and expands the next step from it;
                         * 0 = the engine's choice (from the result
                         * count), UINT32_MAX = no fused steps (two
                         * barriers a step, one beam table for all). */
    uint32_t round1;    /* GPU: in a launch of one request, a step whose
                         * beams' passing proposals come to at least
                         * twice round1 x max(beam, results) first
                         * expands only the best ~round1 x max(beam,
                         * results) of them by sigma, and the rest only if
                         * those did not find enough; 0 = 128, UINT32_MAX
                         * = never (every step whole). */
    uint32_t round1_items; /* GPU: only a step of at least this many
                         * expansion items runs in rounds (round1); 0 =
                         * eight per warp of the grid (tests use 1). */
    uint32_t launch_graph; /* GPU: 0 = the search kernel goes through a
                         * CUDA graph (its parameters set per launch) and
                         * the host waits on a completion word the kernel
                         * writes to mapped memory; UINT32_MAX = plain
                         * cooperative launches ended by a stream
                         * synchronisation.  The same results either
                         * way; the default is ~5 us sooner a launch. */
    uint32_t select_local_max; /* GPU: in a fused launch (fuse_term), a
                         * next list longer than select_grid_min and at most
                         * this long is narrowed by each CTA that selects
                         * it on its own (the list read through L2 once a
                         * radix pass) instead of by the whole grid with a
                         * barrier a pass; 0 = 8192, at most 65536,
                         * UINT32_MAX = never.  The same results either
                         * way. */
    uint32_t prefetch;  /* GPU: 0 = where the expansion computes the new
                         * beams' child ranges (launches of 1..3
                         * requests), it prefetches each examined child's
                         * child table entries to L1 with the child's
                         * flags, and each new beam's first label and flag
                         * lines to L2 for the next step; UINT32_MAX = no
                         * prefetch.  The same results either way. */
    uint32_t select_local_cache; /* GPU: of such a list (select_local_max),
                         * each CTA keeps the first this many places in
                         * shared memory after its first read, for the
                         * radix passes and the survivors; 0 = as many as
                         * fit (7,170), UINT32_MAX = none (every pass
                         * reads the list through L2).  The same results
                         * either way (tests mix the two). */
    uint32_t values_on_device; /* GPU: 0 = the keys' values are copied to
                         * the device (where they take at most a quarter
                         * of its free memory) and the search writes each
                         * result's value with its key; UINT32_MAX = the
                         * host attaches them after the launch (a value a
                         * hit from the index in host memory).  Engines of
                         * one process on the same index and GPU share one
                         * device copy of it, made by the first to open:
                         * its choice holds for the others while it lives.
                         * The same results either way. */
} ft_engine_opts;

typedef struct ft_engine ft_engine;

FT_API void ft_engine_opts_init(ft_engine_opts *opts);

/* ft_engine_open creates an engine over idx (which must outlive it; NULL
 * is FT_EINVAL, "engine: index is NULL").  The GPU engine returns
 * FT_ENODEV when no GPU is usable, FT_ENOTSUP when the library was built
 * without CUDA.  An engine serves one caller at a time: calls on one
 * engine must not overlap (use one engine per thread, or a lock);
 * different engines over one index may run at once. */
FT_API int ft_engine_open(ft_engine **out, const ft_index *idx,
                          const ft_engine_opts *opts, char *errbuf,
                          size_t errlen);
FT_API void ft_engine_close(ft_engine *eng);
/* ft_engine_name is the engine's kind name ("cpu" or "gpu"); "" for a
 * NULL eng. */
FT_API const char *ft_engine_name(const ft_engine *eng);
/* ft_engine_note says in one line which engine runs and why (for
 * FT_ENGINE_AUTO: the GPU's name, or why no GPU engine could start); ""
 * for a NULL eng. */
FT_API const char *ft_engine_note(const ft_engine *eng);
/* ft_engine_get_opts copies the options the engine was opened with (with
 * its defaults resolved where it resolves them); nothing for a NULL opts
 * or eng. */
FT_API void ft_engine_get_opts(ft_engine_opts *opts, const ft_engine *eng);
/* ft_engine_failed is non-zero once an engine error (a CUDA error) took the
 * engine out of service; it then answers every call with FT_ESTATE.  0
 * for a NULL eng. */
FT_API int ft_engine_failed(const ft_engine *eng);
/* ft_engine_timing_report writes the engine's host-side phase timings (opened
 * with opts.timing) as text into buf; an empty string when it keeps none
 * (or eng is NULL), nothing when buf is NULL or len 0. */
FT_API void ft_engine_timing_report(const ft_engine *eng, char *buf,
                                    size_t len);

/* ft_engine_search validates and answers one request.  A rejected request
 * returns FT_EREQUEST with res->error set; res->n is then 0. */
FT_API int ft_engine_search(ft_engine *eng, const ft_request *req,
                            ft_result *res);

/* ft_engine_search_batch answers n requests: validates each, runs the
 * valid ones and attaches the values of the hits.  Each result carries its
 * own status.  Returns FT_OK unless the engine itself failed. */
FT_API int ft_engine_search_batch(ft_engine *eng, const ft_request *reqs,
                                  size_t n, ft_result *res);

/* ---- Searchers: the search over a whole library --------------------------
 *
 * A searcher is what serves a library: one engine for a plain index, a
 * shard group for a manifest of several shards.  Like an engine it serves
 * one caller at a time. */

typedef struct ft_searcher ft_searcher;

typedef struct ft_searcher_opts {
    ft_engine_opts engine; /* kind FT_ENGINE_AUTO, CPU or GPU; every shard
                            * gets an engine of the same kind */
    const int *devices;    /* GPU shard groups: shard i's engine on
                            * devices[i % n_devices]; NULL: all on
                            * engine.device */
    size_t n_devices;
} ft_searcher_opts;

FT_API void ft_searcher_opts_init(ft_searcher_opts *o);
/* ft_searcher_open opens the engine(s) over lib (which must outlive the
 * searcher).  With FT_ENGINE_AUTO the GPU is taken when its engine opens,
 * else the CPU; ft_searcher_note says which and why. */
FT_API int ft_searcher_open(ft_searcher **out, const ft_library *lib,
                            const ft_searcher_opts *o, char *errbuf,
                            size_t errlen);
FT_API void ft_searcher_close(ft_searcher *s);
/* ft_searcher_search_batch is ft_engine_search_batch over the library. */
FT_API int ft_searcher_search_batch(ft_searcher *s, const ft_request *reqs,
                                    size_t n, ft_result *res);
/* ft_searcher_note is ft_engine_note for the searcher; "" for a NULL s. */
FT_API const char *ft_searcher_note(const ft_searcher *s);
/* ft_searcher_failed is non-zero once an engine of the searcher failed
 * (0 for a NULL s). */
FT_API int ft_searcher_failed(const ft_searcher *s);
/* ft_searcher_kind is the engine kind the searcher runs (CPU or GPU);
 * FT_ENGINE_AUTO, which no searcher runs, for a NULL s. */
FT_API ft_engine_kind ft_searcher_kind(const ft_searcher *s);

/* ft_index_value_at gives the value of the key with the given key index
 * (ft_hit.key_index within this index); FT_ENOTFOUND past the end.  value
 * may be NULL. */
FT_API int ft_index_value_at(uint64_t *value, const ft_index *idx,
                             uint64_t key_index);
/* ft_index_keys is the number of keys of idx (0 for a NULL idx). */
FT_API uint64_t ft_index_keys(const ft_index *idx);

/* ---- Autoregressive steps (docs/autoregressive.md) ----------------------
 *
 * An autoregressive decoder produces, at every step, one log-prob row per
 * live beam.  An ft_ar session keeps each beam inside the library: one
 * ft_ar_step turns the current beams and their rows into the next beams,
 * pruned to B by docs/specification.md section 4's order and thresholds, and the keys that
 * the step completed.  A GPU session works on the caller's CUDA stream with
 * device pointers in and out, never waits on the host and allocates
 * nothing per step, so steps can be captured in a CUDA graph; a CPU
 * session (the reference) takes host pointers and is done when it returns.
 * CPU and GPU steps give the same bits.
 *
 * Beams are kept sorted (index = rank r).  Beam r reads row r of the step's
 * input.  A row is either sparse (width entries: library token ids and
 * log-probs, f32) or dense (width columns of f32, f16 or bf16; column j
 * stands for library token vocab[j], or j when vocab is NULL).  Entry j of
 * a row with log-prob rho (after the optional normalisation) extends beam r
 * to child u of its node labelled by the entry's token when rho >
 * theta_tok and sigma + rho > theta_sent (binary32 addition).  Candidates
 * are ordered by (sigma desc, r asc, rho desc, j asc) - the specification's (sigma desc,
 * r asc, k asc) when all beams read the same row - and the first B with
 * children become the next beams; a terminal u is a completed key with
 * score (double)sigma * F[len], F[d] = pow(6 / (5 + d), alpha), and the
 * step keeps its first n completed keys by (score desc, r asc, rho desc,
 * j asc).  Decoding row t of a NAR grid at every step t and merging the
 * steps' keys by (score desc, t asc, place in the step) gives the specification's
 * search of that grid, bit for bit (flashtrie search --ar checks it).
 * Entries that are NaN, -inf or +inf are never taken (a row normalised
 * over a +inf entry has a NaN log-sum-exp and takes nothing, as torch's
 * log_softmax gives NaN there); a token twice in one sparse row gives
 * two candidates.
 *
 * A session serves one caller at a time (like an engine); sessions over
 * one index may run at once.  Steps of a GPU session are ordered by the
 * stream they are given: the caller orders the streams of consecutive
 * steps if it changes them. */

typedef struct ft_ar ft_ar;

typedef struct ft_ar_opts {
    uint32_t struct_size; /* set by ft_ar_opts_init */
    ft_engine_kind kind;  /* CPU, GPU or AUTO (GPU when usable) */
    int device;           /* GPU ordinal */
    uint32_t beam;        /* B, 1..4096; default 100: the most beams a
                           * step keeps (buffers are sized by it) */
    uint32_t results;     /* n: completed keys kept per step, 1..4096;
                           * 0 = beam */
    float theta_tok;      /* default -inf */
    float theta_sent;     /* default -inf */
    double alpha;         /* 0..10, default 1.0 */
    uint32_t max_width;   /* widest row a step takes, 1..FT_AR_WIDTH_MAX;
                           * 0 = 4096 */
    uint32_t threads;     /* CPU sessions: threads a step's beams are
                           * shared over, 1..256 (the caller's and
                           * threads - 1 the session starts at its first
                           * large step); 0 = the usable cores, at most
                           * 64.  A GPU session ignores it. */
} ft_ar_opts;

#define FT_AR_WIDTH_MAX (1u << 20)

FT_API void ft_ar_opts_init(ft_ar_opts *o);

/* ft_ar_open starts a session over idx (which must outlive it).  A GPU
 * session copies the trie and the values to the device once; FT_ENODEV
 * without a usable GPU, FT_ENOTSUP in a build without CUDA.  Bad options
 * are FT_EINVAL naming the field.
 *
 * Every call below given a NULL ar refuses it as the conventions at the
 * top say: FT_EINVAL (ft_ar_error(NULL) is "ar: NULL"), a free that
 * does nothing (a buffer handed to ft_ar_free or the _free calls with a
 * NULL ar stays allocated), FT_ENGINE_AUTO from ft_ar_kind. */
FT_API int ft_ar_open(ft_ar **out, const ft_index *idx, const ft_ar_opts *o,
               char *errbuf, size_t errlen);
FT_API void ft_ar_close(ft_ar *ar);
/* ft_ar_kind is the engine kind the session runs (CPU or GPU);
 * FT_ENGINE_AUTO, which no session runs, for a NULL ar. */
FT_API ft_engine_kind ft_ar_kind(const ft_ar *ar);
/* ft_ar_get_opts copies the session's options, defaults resolved (nothing
 * for a NULL o or ar). */
FT_API void ft_ar_get_opts(ft_ar_opts *o, const ft_ar *ar);
/* ft_ar_configure changes the search parameters between decodes: beam
 * and results at most the opened ones (buffers keep their size),
 * thresholds and alpha as in ft_ar_opts.  A GPU session waits for the
 * device here (its F table is copied): not a call for the step path. */
FT_API int ft_ar_configure(ft_ar *ar, uint32_t beam, uint32_t results,
                    float theta_tok, float theta_sent, double alpha);
/* ft_ar_memcpy copies bytes between host memory and the session's memory
 * (to_session non-zero: src is host memory, dst the session's), and
 * waits for it: a convenience for drivers and tests (memcpy on the CPU).
 * 0 bytes copy nothing; otherwise a NULL dst or src is FT_EINVAL. */
FT_API int ft_ar_memcpy(ft_ar *ar, void *dst, const void *src, size_t bytes,
                 int to_session);
/* ft_ar_error returns the message of the session's last failed call, one
 * line naming the field ("input.width: ..."); "" if none, "ar: NULL"
 * (static) for a NULL ar. */
FT_API const char *ft_ar_error(const ft_ar *ar);

/* ft_ar_beams is the state of up to B beams, structure of arrays, in the
 * session's memory (host for CPU sessions, device for GPU sessions).
 * count[0] is the number of live beams; entries 0 .. count-1 are valid. */
typedef struct ft_ar_beams {
    uint32_t *count;  /* [1] */
    uint64_t *node;   /* [B] trie node */
    float *sigma;     /* [B] */
    uint32_t *len;    /* [B] tokens so far */
    uint32_t *parent; /* [B] rank of the beam it extends (step output) */
    uint32_t *entry;  /* [B] entry j of the parent's row it took */
    uint32_t *token;  /* [B] library token of that entry */
} ft_ar_beams;

/* ft_ar_hits is the keys completed at one step, best first (ascending
 * step order), at most n; count[0] says how many. */
typedef struct ft_ar_hits {
    uint32_t *count;     /* [1] */
    uint32_t *parent;    /* [n] rank of the beam the key extends */
    uint32_t *entry;     /* [n] entry of that beam's row */
    uint32_t *token;     /* [n] its token: the key's last */
    uint32_t *len;       /* [n] key length */
    uint64_t *key_index; /* [n] the key's number in the index */
    uint64_t *value;     /* [n] the key's value */
    double *score;       /* [n] */
    float *sigma;        /* [n] */
} ft_ar_hits;

/* ft_ar_input is one step's rows; beam r reads row r (rows must hold the
 * live beams: at least count[0] rows). */
typedef struct ft_ar_input {
    int form;            /* FT_AR_IN_SPARSE or FT_AR_IN_DENSE */
    int dtype;           /* dense: FT_AR_IN_F32, _F16 or _BF16 */
    int norm;            /* FT_AR_NORM_NONE, _FULL (log-softmax over the
                          * row) or _ALLOWED (over the entries that label
                          * a child of the beam's node) */
    uint32_t width;      /* entries (sparse) or columns (dense) per row */
    uint64_t stride;     /* elements from one row to the next; 0 = width */
    const uint32_t *ids; /* sparse: [row * stride + j] library tokens */
    const void *logp;    /* [row * stride + j]: f32 for sparse */
    const uint32_t *vocab; /* dense: [width] column -> library token, NULL:
                          * column j is token j */
} ft_ar_input;

#define FT_AR_IN_SPARSE 0
#define FT_AR_IN_DENSE 1
#define FT_AR_IN_F32 0
#define FT_AR_IN_F16 1
#define FT_AR_IN_BF16 2
#define FT_AR_NORM_NONE 0
#define FT_AR_NORM_FULL 1
#define FT_AR_NORM_ALLOWED 2

/* ft_ar_beams_alloc allocates a beam state of B entries (and
 * ft_ar_hits_alloc one of n hits) in the session's memory; the _free calls
 * release them and zero the struct.  A new state holds no beam (count 0:
 * a step on it finds nothing) until ft_ar_reset puts one at the root.  A
 * NULL b or h is FT_EINVAL ("b: NULL", "h: NULL"); a NULL b or h is
 * nothing to free.  Callers may use their own buffers instead. */
FT_API int ft_ar_beams_alloc(ft_ar *ar, ft_ar_beams *b);
FT_API void ft_ar_beams_free(ft_ar *ar, ft_ar_beams *b);
FT_API int ft_ar_hits_alloc(ft_ar *ar, ft_ar_hits *h);
FT_API void ft_ar_hits_free(ft_ar *ar, ft_ar_hits *h);

/* ft_ar_alloc allocates bytes of the session's memory (device memory for
 * a GPU session, zeroed host memory for a CPU session); ft_ar_free frees
 * it (NULL is fine).  A NULL p is FT_EINVAL; with a NULL ar *p is set to
 * NULL. */
FT_API int ft_ar_alloc(ft_ar *ar, void **p, size_t bytes);
FT_API void ft_ar_free(ft_ar *ar, void *p);

/* ft_ar_reset makes b one beam at the root (count 1, sigma 0, len 0);
 * FT_EINVAL ("b: NULL array") when b or one of its arrays is NULL. */
FT_API int ft_ar_reset(ft_ar *ar, ft_ar_beams *b, void *stream);

/* ft_ar_step expands cur by in into next and writes the step's completed
 * keys to hits (may be NULL).  No array it writes (next's, counted at the
 * configured beam; hits', at the configured results) may share a byte
 * with one of cur or with another it writes: FT_EINVAL naming both.  stream is the
 * cudaStream_t of a GPU session (NULL: the default stream), ignored by a
 * CPU session.  FT_EINVAL for a bad input description (naming the field),
 * FT_ECUDA when a launch failed (the session is then failed). */
FT_API int ft_ar_step(ft_ar *ar, const ft_ar_beams *cur, const ft_ar_input *in,
               ft_ar_beams *next, ft_ar_hits *hits, void *stream);

/* ft_ar_mask writes, for engines that choose beams themselves, the tokens
 * each live beam may take: bit j of mask[r * words + j / 32] (words =
 * (width + 31) / 32) is set when column j's token (vocab[j], or j) labels a
 * child of beam r's node, and bit eos is set when the node ends a key (eos
 * >= width: no such bit).  A beam whose node is one of ft_ar_walk's
 * states FT_AR_DEAD or FT_AR_DONE (as uint64) allows eos alone, so walk
 * states can be a mask's nodes as they are; any other node past the
 * index's is FT_EINVAL on a CPU session (naming the beam) and allows
 * nothing on a GPU session.  Rows of dead beams (r >= count, r < B) are
 * zeroed: mask holds B * words words (B: the opened beam), none of them
 * in an array of cur (FT_EINVAL naming both). */
FT_API int ft_ar_mask(ft_ar *ar, const ft_ar_beams *cur, uint32_t width,
               const uint32_t *vocab, uint32_t eos, uint32_t *mask,
               void *stream);

/* ft_ar_constrain applies the mask to dense rows, for engines that sample
 * or select from the logits themselves: it writes ft_ar_mask(cur,
 * in->width, in->vocab, eos) into mask (B * words words, as there), then
 * for each row r < rows and column j < in->width sets out[r * stride + j]
 * to in->logp's element when bit j of mask row r is set and to -inf when
 * it is not (rows of dead beams, r >= count: every column).  in is dense
 * (f32, f16 or bf16; norm FT_AR_NORM_NONE; width up to FT_AR_WIDTH_MAX,
 * whatever max_width) and out has its dtype and stride; elements are
 * copied as bits, and nothing past a row's width is touched.  out may be
 * in->logp (in place: only the -inf are written) or lie apart from it
 * (the bytes from row 0 to the end of row rows - 1 of each do not meet);
 * mask meets neither of them nor cur's arrays; rows is 1..B.  One launch
 * after the mask's on a GPU (no host wait). */
FT_API int ft_ar_constrain(ft_ar *ar, const ft_ar_beams *cur,
                           const ft_ar_input *in, uint32_t rows, uint32_t eos,
                           uint32_t *mask, void *out, void *stream);

/* ft_ar_walk moves rows down the trie by the model ids they took, for
 * engines that choose tokens themselves: from the root, for those that
 * hand over whole sequences instead of beams and their parents
 * (Hugging Face's generate gives a logits processor input_ids), or from
 * each row's state, by the tokens it took since (vLLM, SGLang).  Row r's
 * tokens are ids[r * stride + i], i < lens[r] (lens NULL: len for every
 * row; stride 0 = len), int64 model ids, each read through vocab (token
 * vocab[id] for 0 <= id < vocab_len; other ids label nothing) or, vocab
 * NULL, taken as library tokens (0 .. 0xFFFFFFFF).  Row r starts at
 * from[r] (from NULL: the root), a state as written here.  state[r]:
 * FT_AR_DONE when from[r] is, or one of the row's ids is eos (eos >= 0);
 * else FT_AR_DEAD when from[r] is, or a token labels no child of the node
 * before it; else the node reached, the ft_ar_beams node of the row.
 * from may be state (each row reads its own entry first).  ids, lens,
 * from, vocab and state are in the session's memory.  A CPU session
 * refuses a from that is no state and a lens[r] above len, naming the
 * row; a GPU session (one launch on stream, no host wait) cannot report
 * them and makes such a row FT_AR_DEAD (a lens[r] above len reads len). */
#define FT_AR_DEAD (-1)
#define FT_AR_DONE (-2)
FT_API int ft_ar_walk(ft_ar *ar, const int64_t *ids, uint32_t rows,
                      uint32_t len, uint64_t stride, const uint32_t *lens,
                      const int64_t *from, const uint32_t *vocab,
                      uint32_t vocab_len, int64_t eos, int64_t *state,
                      void *stream);

/* ft_ar_topk writes each beam's best k allowed entries (after the
 * normalisation, rho > theta_tok and sigma + rho > theta_sent), ordered
 * by (rho desc, j asc): out_entry[r * k + i], out_token, out_logp (the
 * normalised rho, -0 as +0), r < B; missing places and dead beams get entry
 * and token UINT32_MAX and logp -inf.  k is 1..64.  The three outputs
 * (B * k entries each) share no byte with each other or with cur's arrays
 * (FT_EINVAL naming both). */
FT_API int ft_ar_topk(ft_ar *ar, const ft_ar_beams *cur, const ft_ar_input *in,
               uint32_t k, uint32_t *out_entry, uint32_t *out_token,
               float *out_logp, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* FLASHTRIE_H */
