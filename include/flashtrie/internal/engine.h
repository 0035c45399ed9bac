/*
 * flashtrie/internal/engine.h - the library's private engine interface:
 * what flashtrie.h kept until the library was sealed (issue 34), and what
 * no program outside this tree may call.
 *
 *  - prepared requests (fti_prepared, fti_prep, fti_request_prepare),
 *  - whole runs of prepared requests (fti_engine_run, _run_checked),
 *  - the step protocol a shard group drives (fti_engine_step_*), the GPU
 *    engine's stream, grid share and shared step lists, the GPU memory
 *    probe, an engine's index and device,
 *  - shard groups (fti_group_*) and their exchange and test knobs
 *    (fti_group_opts: a forced exchange, split_grid, shared_lists),
 *  - the value prefetch hint of the public search.
 *
 * shard/ implements it, router/ (search, groups, searchers, the cluster)
 * drives it, and the daemon and the tests use parts of it.  It lives
 * here, beside the ground floor, because every one of them already sees
 * include/ (the ft_headers and ft_base targets): a single #include of
 * this header is the only change a user of these calls needed.  It is
 * never installed (only flashtrie.h, flashtrie_version.h and
 * flashtrie_client.h are), and its symbols are hidden in libflashtrie.so
 * (the library is built with -fvisibility=hidden; only FT_API
 * declarations are exported): the program and the tests link the static
 * library, where hidden symbols still resolve.
 *
 * Naming (docs/architecture.md): public symbols are ft_ / FT_ and carry
 * FT_API in flashtrie.h or flashtrie_client.h; private ones are fti_ /
 * FTI_.  Private symbols of the library's rooms that still start with
 * ft_<module>_ (ft_tb_, ft_cpu_, ft_gpu_, ...) are hidden all the same;
 * they are to be renamed fti_ in one mechanical change.
 */
#ifndef FLASHTRIE_INTERNAL_ENGINE_H
#define FLASHTRIE_INTERNAL_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "flashtrie.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Prepared requests and the engine steps ------------------------------
 *
 * Below the public search, engines see only prepared requests: validated,
 * the proposals of every position stable-sorted by logp descending (docs/specification.md
 * section 4's k) and cut to those with logp > theta_tok, with the length
 * normalisation table F.  fti_request_prepare makes them.
 *
 * Engines answer prepared requests whole (fti_engine_run: on one GPU all T
 * steps in one launch), and also one decode step at a time, which is what
 * a shard group drives (router/: every shard expands, the shards exchange
 * their local top-B candidate keys, each keeps its members of the global
 * top-B):
 *
 *   fti_engine_step_begin(eng, preps, n, shard, nshards)
 *   for t in 0 .. Tmax-1:
 *       fti_engine_step_expand(eng, t)   -> send: per request its local
 *                                           top-B keys, sorted, padded
 *       (exchange: every shard's send lands in every shard's recv, in
 *        shard order: recv[s * len .. (s + 1) * len) is shard s's send)
 *       fti_engine_step_keep(eng, t)     <- recv
 *   fti_engine_step_finish(eng, res)     -> local top-n hits per request
 *
 * Keys are docs/specification.md section 4's (sigma desc, r asc, k asc) packed in a u64
 * with r the *global* rank of the parent entry (flashtrie/internal/
 * rules.h), padded with UINT64_MAX.  Request i's list is at offset
 * off[i] = beam[0] + ... + beam[i-1] of length beam[i].  The exchange
 * buffers live in the engine's memory: host memory for the CPU engine,
 * device memory for the GPU engine (fti_engine_stream gives the stream
 * the steps are enqueued on; no host wait happens between steps).
 * Engine results (fti_engine_run and fti_engine_step_finish) carry
 * key_index and order but no value: the values are attached once, after
 * any merge, by the public search. */

typedef struct fti_prepared {
    uint32_t T, K;          /* positions; row stride of tok and logp */
    const uint32_t *tok;    /* [t * K + k], k after the stable sort */
    const float *logp;      /* [t * K + k] */
    const uint32_t *keff;   /* [t]: proposals with logp > theta_tok */
    const uint32_t *row;    /* [t] = t * K: row starts (for backtraces) */
    const double *F;        /* [d], d = 0..T: pow(6 / (5 + d), alpha) */
    uint32_t beam, results; /* B and n (n resolved: never 0) */
    float theta_tok, theta_sent;
    double alpha;
} fti_prepared;

/* fti_prep owns the buffers of one prepared request; reuse it across
 * requests (it grows to the largest grid it has seen). */
typedef struct fti_prep fti_prep;
int fti_prep_create(fti_prep **out);
void fti_prep_destroy(fti_prep *p);
/* fti_request_prepare prepares a request that ft_request_validate accepted;
 * *out points into p until p's next use, and into req's tokens and logp
 * when every row arrives sorted (no copy is made then): keep them alive
 * and unchanged while *out is used. */
int fti_request_prepare(const fti_prepared **out, fti_prep *p,
                        const ft_request *req);

/* fti_engine_run answers n prepared requests whole; each result gets
 * status, hits with tokens, score, sigma, order and key_index (no value).
 * Returns FT_OK unless the engine failed. */
int fti_engine_run(ft_engine *eng, const fti_prepared *const *reqs,
                   ft_result *const *res, size_t n);

/* The most requests one fti_engine_run or step batch takes. */
#define FTI_ENGINE_CHUNK 64

/* fti_gpu_slots is the requests one GPU engine launch holds for
 * ft_engine_opts.max_batch (0: 32), at most FTI_ENGINE_CHUNK, and
 * fti_gpu_max_beam its widest beam for max_beam (0, or past FT_MAX_BEAM:
 * FT_MAX_BEAM): what the engine sizes its buffers by, and what a batch
 * (router/steps.c) and a shard group's shared lists are fitted to. */
static inline uint32_t fti_gpu_slots(uint32_t max_batch)
{
    uint32_t n = max_batch ? max_batch : 32;
    return n < FTI_ENGINE_CHUNK ? n : FTI_ENGINE_CHUNK;
}

static inline uint32_t fti_gpu_max_beam(uint32_t max_beam)
{
    return max_beam && max_beam < FT_MAX_BEAM ? max_beam : FT_MAX_BEAM;
}

/* fti_engine_run_checked is fti_engine_run (n <= FTI_ENGINE_CHUNK) that calls
 * check(arg) once while the engine works: the GPU engine between issuing
 * its launch and waiting for it, others before their search.  A result
 * whose status check sets to an error keeps it (with check's message,
 * no hits): the search's answer to that request is dropped.  The public
 * search checks the duplicate tokens of a batch this way, on the host
 * while the GPU runs.  Every result starts with status FT_OK. */
typedef void (*fti_engine_check)(void *arg);
int fti_engine_run_checked(ft_engine *eng, const fti_prepared *const *reqs,
                           ft_result *const *res, size_t n,
                           fti_engine_check check, void *arg);

int fti_engine_step_begin(ft_engine *eng, const fti_prepared *const *reqs,
                          size_t n, uint32_t shard, uint32_t nshards);
/* fti_engine_step_buffers gives the current batch's exchange buffers: send
 * holds len keys, recv nshards * len (engine memory, see above). */
int fti_engine_step_buffers(ft_engine *eng, uint64_t **send, uint64_t **recv,
                            size_t *len);
int fti_engine_step_expand(ft_engine *eng, uint32_t t);
int fti_engine_step_keep(ft_engine *eng, uint32_t t);
/* fti_engine_step_finish writes each request's local top-n hits, sorted by
 * (score desc, order asc), key_index local to this engine's index. */
int fti_engine_step_finish(ft_engine *eng, ft_result *const *res);
/* fti_engines_step_expand, _keep and _finish are those steps of every
 * engine of eng[0..count), which hold the shards of one batch begun as
 * shards first .. first + count - 1 (engine j as first + j): CPU engines
 * run them together, every (engine, request) pair of the step in one
 * round of eng[0]'s workers (the other engines' workers stay idle), other
 * engines one after another.  A CPU engine's keep reads the lists of the
 * shards in eng[] from their engines' send buffers, and only the other
 * shards' lists from its recv: an exchange among CPU engines that are all
 * in eng[] has nothing to copy.  CPU engines that run a batch merged (one
 * piece of work per request over all of eng[], shard/cpu_engine.h) do
 * each request's keep at the start of the next expand's or the finish's
 * piece for it, not in a round of its own: recv must keep step t's lists
 * until then (the step loop writes it only in the next step's exchange).
 * finish writes engine j's hits of request i (of n) to part[j *
 * FTI_ENGINE_CHUNK + i] and then, when done is not NULL, calls done(arg,
 * i) once for each request: from the CPU engines' workers as soon as
 * every engine's part of request i is written (concurrently for distinct
 * requests), else from the calling thread after every part. */
int fti_engines_step_expand(ft_engine *const *eng, size_t count, uint32_t t);
int fti_engines_step_keep(ft_engine *const *eng, size_t count, uint32_t t);
typedef void (*fti_step_done)(void *arg, size_t i);
int fti_engines_step_finish(ft_engine *const *eng, size_t count,
                            ft_result *part, size_t n, fti_step_done done,
                            void *arg);
/* fti_engine_stream returns the cudaStream_t a GPU engine enqueues its steps
 * on, NULL for the CPU engine (its steps are done when they return). */
void *fti_engine_stream(ft_engine *eng);
/* fti_engine_gpu_share makes a GPU engine's steps use 1/ways of its
 * cooperative grid, so that the step kernels of `ways` engines sharing one
 * GPU run side by side rather than one after another (1: the whole grid).
 * FT_ENOTSUP for other engines.  Shard groups call it. */
int fti_engine_gpu_share(ft_engine *eng, uint32_t ways);
/* fti_engine_gpu_index_refs returns how many GPU engines of this process
 * use the device copy of the index that eng uses (engines opened on the
 * same index and GPU share one copy), 0 for an engine that is not a GPU
 * engine. */
int fti_engine_gpu_index_refs(const ft_engine *eng);
/* fti_engine_values_attached says whether eng's searches (fti_engine_run
 * and the forest's) give each hit its value already: a GPU engine whose
 * values are on the device (a forest's: every tree's).  0: the caller
 * attaches them from the index (fti_attach_values), as for the CPU
 * engine and the results of steps. */
int fti_engine_values_attached(const ft_engine *eng);
/* fti_engine_gpu_bind_lists makes a GPU engine's step lists live in two
 * device buffers of cap keys shared by a group on one GPU (NULL unbinds):
 * at step t shard s writes its list at list[t % 2] + s * len and keeps
 * from list[t % 2] whole, so the exchange copies nothing; the caller
 * orders the engines' streams.  FT_ENOTSUP for other engines. */
int fti_engine_gpu_bind_lists(ft_engine *eng, uint64_t *list0, uint64_t *list1,
                              size_t cap);
/* The shard kernel (issue 36): a group whose shards all share one GPU
 * can run every step of a batch in one persistent launch per shard, the
 * launches side by side, exchanging their lists in the bound lists
 * (fti_engine_gpu_bind_lists) through a device barrier instead of the
 * host.  fti_gpu_xbar is that barrier's state (device memory the group
 * owns; see kernels/ft_kernels.h, ft_gk_kxparams). */
typedef struct fti_gpu_xbar {
    unsigned long long *ctr; /* arrivals; base: its value before the batch */
    uint32_t *err;           /* set when a wait ran out */
    uint32_t *abort;         /* this shard's word */
    uint32_t *herr;          /* mapped host word (its device address): set
                              * with err, read by the host after the
                              * launches */
    unsigned long long *prof;   /* NULL, or this shard's timeline
                                 * (ft_gk_kxparams.prof) */
    unsigned long long base;
    unsigned long long timeout; /* clock64 cycles a wait may spin */
    uint32_t total;          /* CTAs of every shard's launch */
    uint32_t mode;           /* fti_group_opts.shard_mode */
    /* NULL, or the NCCL device-API exchange (FTI_EXCHANGE_NCCL_DEVICE:
     * one shard per GPU, kernels/search/xnccl.cuh): this rank's NCCL
     * window (ncclWindow_t), the byte offsets in every rank's window of
     * its inbox, words and two step lists (ft_gk_nxparams), the inbox
     * value before this batch, and this rank's place in the LSA team and
     * its size.  ctr, err, abort and total are then unused (the windows
     * hold them); herr, prof and timeout are used. */
    void *nwin;
    unsigned long long nseq;
    uint64_t noff_inbox, noff_words, noff_list[2];
    uint32_t nrank, nranks;
} fti_gpu_xbar;
/* fti_engine_gpu_xgrid gives the CTAs of this engine's shard-kernel
 * launch (its share, fti_engine_gpu_share) and how many the GPU holds at
 * once (0 when the kernel cannot be used).  FT_ENOTSUP for other
 * engines. */
int fti_engine_gpu_xgrid(ft_engine *eng, int *use, int *full);
/* fti_engine_gpu_steps_all enqueues, after fti_engine_step_begin, every
 * step of the batch in one launch of the shard kernel (the lists must be
 * bound); fti_engine_step_finish follows, with no expand or keep
 * between.  Every shard of the group must be launched before any is
 * waited for. */
int fti_engine_gpu_steps_all(ft_engine *eng, const fti_gpu_xbar *xb);
/* fti_engine_gpu_nccl_kernel says whether this build has the NCCL
 * device-API shard kernel (xb->nwin) and it can be launched on the
 * engine's GPU: 1, or 0 with the reason in why. */
int fti_engine_gpu_nccl_kernel(ft_engine *eng, char *why, size_t len);
/* fti_engine_gpu_forest makes GPU engine eng search, from now on, the
 * forest of the n shards' tries (issue 36, FTI_EXCHANGE_FOREST): every
 * shard's engine open on eng's GPU (eng may be one of them), their
 * device copies of the tries read in place by one launch of eng's search
 * kernel per batch, a node carrying its shard in its top bits
 * (kernels/ft_kernels.h, ft_gk_tree).  key_base[s] is shard s's first
 * global key index: results carry global key indexes.  The shards must
 * split the library by first token (no first token in two shards).
 * eng's slots are sized again for the forest's widest level.  FT_OK, or
 * an error with the reason in why (eng unchanged, or failed if its
 * slots could not be made again); FT_ENOTSUP for other engines and
 * builds.  eng's steps are then refused; fti_engine_run searches the
 * forest. */
int fti_engine_gpu_forest(ft_engine *eng, ft_engine *const *shards, size_t n,
                          const uint64_t *key_base, char *why, size_t len);
/* fti_gpu_memory reports a GPU's memory in use and in all (bytes, the
 * device's view: every process's allocations).  FT_ENODEV for a device
 * that does not exist, FT_ENOTSUP in a build without CUDA. */
int fti_gpu_memory(uint64_t *used, uint64_t *total, int device);

/* fti_index_bus_guard installs (once) a SIGBUS handler for the mappings
 * of the indexes ft_index_open maps: a fault inside one (the file was
 * truncated or rewritten in place while mapped) writes "flashtrie: fatal:
 * SIGBUS reading the index PATH at byte N: ..." to stderr, and to fd as
 * well when fd is not 2, then exits with FTI_EXIT_SIGBUS; a SIGBUS
 * elsewhere kills the process as before.  Calling it again only changes
 * fd.  For programs (serve): a library does not take signals by itself. */
#define FTI_EXIT_SIGBUS 74 /* EX_IOERR of sysexits.h */
void fti_index_bus_guard(int fd);

/* fti_engine_index returns the index the engine was opened over. */
const ft_index *fti_engine_index(const ft_engine *eng);
/* fti_engine_device returns the GPU ordinal of a GPU engine, -1 for CPU. */
int fti_engine_device(const ft_engine *eng);

/* ---- Shard groups -------------------------------------------------------
 *
 * A library split by first token into shards (contiguous token ranges, in
 * order; shard s holds the keys from key index base[s] on) is searched by
 * a group of engines, one per shard, all advancing one decode step at a
 * time and exchanging their local top-B keys after every step.  Results
 * are identical, bit for bit, to one engine over the unsharded index
 * (docs/specification.md section 6).  The exchange backend follows from the engines
 * (fti_exchange): host memory for CPU engines, device copies or NCCL for
 * GPU engines. */

typedef struct fti_group fti_group;

/* fti_group_open opens one engine per shard (opts for each; the shards
 * must outlive the group and be given in token order). */
int fti_group_open(fti_group **out, const ft_index *const *shards,
                   size_t nshards, const ft_engine_opts *opts, char *errbuf,
                   size_t errlen);
void fti_group_close(fti_group *g);
/* How a group's shards exchange their candidate lists after each step. */
typedef enum fti_exchange {
    FTI_EXCHANGE_AUTO = 0, /* from the engines: host for CPU engines, the
                           * forest for GPU engines on one GPU (else the
                           * shard kernel, FTI_EXCHANGE_KERNEL, when it
                           * fits, else device copies), NCCL for GPU
                           * engines on distinct GPUs (device copies when
                           * built without NCCL) */
    FTI_EXCHANGE_HOST,     /* CPU engines: each reads the others' lists
                           * where they were written (they step together,
                           * fti_engines_step_keep) */
    FTI_EXCHANGE_DEVICE,   /* GPU engines: device copies on a group stream,
                           * ordered by events, no host wait */
    FTI_EXCHANGE_NCCL,     /* GPU engines, one per GPU: ncclAllGather */
    FTI_EXCHANGE_KERNEL,   /* GPU engines all on one GPU: one persistent
                           * launch per shard for all steps, the lists
                           * exchanged in device memory (AUTO's choice
                           * there when the launches fit side by side;
                           * otherwise, and after a wait that ran out,
                           * device copies) */
    FTI_EXCHANGE_FOREST,   /* GPU engines all on one GPU: one launch of the
                           * search kernel over every shard's trie at once
                           * (fti_engine_gpu_forest: shard 0's engine reads
                           * the others' device copies), every step's
                           * candidates of all shards in one list, so no
                           * exchange at all (AUTO's first choice there;
                           * where it cannot be set up, e.g. shards that
                           * share a first token, FTI_EXCHANGE_KERNEL) */
    FTI_EXCHANGE_NCCL_DEVICE /* GPU engines, one per GPU of one host: one
                           * persistent launch per GPU for all steps, the
                           * lists written into every peer's NCCL symmetric
                           * window and met at a device-side barrier (NCCL
                           * 2.28's device API, kernels/search/xnccl.cuh);
                           * where that cannot be set up (older NCCL, no
                           * P2P/symmetric memory, a build without
                           * nccl_device.h) FTI_EXCHANGE_NCCL, logged; after
                           * a wait that ran out, FTI_EXCHANGE_NCCL too */
} fti_exchange;

typedef struct fti_group_opts {
    fti_exchange exchange; /* FTI_EXCHANGE_AUTO, or force one (tests) */
    const int *devices;   /* [nshards]: GPU of each shard's engine; NULL:
                           * opts->device for every shard */
    int split_grid;       /* GPU engines sharing a GPU split its grid, so
                           * that their step kernels run side by side (1,
                           * the default) or each takes the whole grid and
                           * they run in turn (0) */
    int shared_lists;     /* device exchange, one GPU: the shards write one
                           * list buffer (two, by step parity) and nothing
                           * is copied (1, the default), or each has its
                           * own recv filled by device copies (0) */
    uint64_t kernel_timeout; /* FTI_EXCHANGE_KERNEL, _NCCL_DEVICE: clock64
                           * cycles a wait may spin (0: about 2 s); tests
                           * make it tiny to take the fallback */
    int nccl_device;      /* FTI_EXCHANGE_AUTO over one GPU per shard:
                           * 1 tries the NCCL device API first
                           * (FTI_EXCHANGE_NCCL_DEVICE), 0 (the default
                           * until it is measured on several GPUs) takes
                           * ncclAllGather */
    int nccl_device_deny; /* tests: act as if the device API could not be
                           * set up (the fallback and its log line) */
    uint32_t shard_mode;  /* the shard kernels' selection and keep
                           * (kernels/search/shard.cuh), FTI_SHARD_*
                           * bits; 0 (the default): each list spread over
                           * its shard's CTAs where that is cheaper, the
                           * beams built before the meeting in batches of
                           * up to 3 requests.  Tests and benchmarks. */
} fti_group_opts;

#define FTI_SHARD_CTA 1u      /* one CTA a list, never spread */
#define FTI_SHARD_SPREAD 2u   /* every list spread where it may be */
#define FTI_SHARD_NO_EARLY 4u /* the keep by one CTA a request, then a
                               * grid barrier (no early beams) */

void fti_group_opts_init(fti_group_opts *gopts);
/* fti_group_open_ex is fti_group_open with group options (gopts may be
 * NULL).  A forced exchange the engines or the build cannot use is
 * FT_ENOTSUP, with the reason in errbuf. */
int fti_group_open_ex(fti_group **out, const ft_index *const *shards,
                      size_t nshards, const ft_engine_opts *opts,
                      const fti_group_opts *gopts, char *errbuf, size_t errlen);
/* fti_group_exchange says which exchange the group uses. */
fti_exchange fti_group_exchange(const fti_group *g);
/* fti_group_timing_report writes, for GPU groups with device copies opened
 * with opts.timing, the per-step split (kernels, exchange, wait for the
 * next launch, by CUDA events), and for the kernel exchange the shards'
 * timelines (the barrier, the wait for the slowest shard, the work before
 * it, the launches' spread), since the last report, as text, and starts
 * new sums; an empty string otherwise. */
void fti_group_timing_report(fti_group *g, char *buf, size_t len);
/* fti_group_search_batch is ft_engine_search_batch over the group. */
int fti_group_search_batch(fti_group *g, const ft_request *reqs, size_t n,
                           ft_result *res);
/* fti_group_search_batch_mode admits the requests as mode says
 * (router/search_impl.h's FTI_ADMIT_*): a forest checks duplicate tokens
 * while its launch runs, other groups at admission. */
int fti_group_search_batch_mode(fti_group *g, const ft_request *reqs,
                                size_t n, ft_result *res, int mode);
/* fti_group_engine returns the engine of shard s. */
ft_engine *fti_group_engine(fti_group *g, size_t s);
size_t fti_group_shards(const fti_group *g);


/* fti_index_values_attach sets the value of hits[0..n) from their key
 * indexes, each value's word prefetched a few dozen hits ahead so that
 * the misses overlap; FT_ENOTFOUND, with *bad the first hit whose key
 * index is past the index's keys, leaves the hits from there on as they
 * were.  One call a result: per hit, a load and a few shifts (a call
 * each for the value and its prefetch cost ~77 instructions a hit). */
int fti_index_values_attach(const ft_index *idx, ft_hit *hits, uint32_t n,
                            uint32_t *bad);
/* fti_index_values_attach_shards is the same for hits whose key indexes
 * are global over shards idx[0..ns) (shard s holding the indexes from
 * base[s] on, base ascending): each hit's shard is the last with base <=
 * its index, its value read from there, the values' words prefetched
 * ahead as above (a shard group's or a forest's results; one call a
 * hit of ft_index_value_at took a miss after another).  The key indexes
 * stay global.  FT_ENOTFOUND, *bad: a hit past its shard's keys. */
int fti_index_values_attach_shards(const ft_index *const *idx,
                                   const uint64_t *base, size_t ns,
                                   ft_hit *hits, uint32_t n, uint32_t *bad);
#ifdef __cplusplus
}
#endif

#endif /* FLASHTRIE_INTERNAL_ENGINE_H */
