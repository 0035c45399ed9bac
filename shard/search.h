/*
 * search.h - what the CPU and GPU engines share inside shard/: the engine
 * operations table, the engine object and the result assembly.  The
 * search rules themselves (keys, order, cut, score, backtrace) are in
 * rules.h, shared with the kernels; requests arrive prepared
 * (fti_prepared, include/flashtrie.h), made by router/.
 */
#ifndef FT_SEARCH_H
#define FT_SEARCH_H

#include "flashtrie/internal/engine.h"
#include "flashtrie/internal/rules.h"
#include "trie.h"

/* fti_result_put appends one hit (tokens, score, sigma, order, key index;
 * value 0 until the public search attaches it) to res.  FT_ELIMIT when it
 * does not fit res's buffers. */
int fti_result_put(ft_result *res, uint64_t key_index, uint32_t order,
                   double score, float sigma, const uint32_t *toks,
                   uint32_t len);
/* fti_result_fail empties res and sets its status and message. */
void fti_result_fail(ft_result *res, int status, const char *msg);

/* Engine implementations plug in through this table.  run gets at most
 * FTI_ENGINE_CHUNK prepared requests and fills each result (status FT_OK,
 * or an error of that request); it returns an error only when the engine
 * itself failed.  The step operations follow include/flashtrie.h's
 * "engine steps" contract; an engine without them leaves them NULL. */
/* The kinds of step of ft_engine_ops.steps. */
enum { FTI_STEP_EXPAND = 0, FTI_STEP_KEEP = 1, FTI_STEP_FINISH = 2 };

typedef struct ft_engine_ops {
    ft_engine_kind kind; /* CPU or GPU: ft_engine_name is its name */
    int (*run)(ft_engine *eng, const fti_prepared *const *reqs,
               ft_result *const *res, size_t n);
    /* Optional: run calling check while the work is in flight (see
     * fti_engine_run_checked); NULL: the check runs first. */
    int (*run_checked)(ft_engine *eng, const fti_prepared *const *reqs,
                       ft_result *const *res, size_t n, fti_engine_check check,
                       void *arg);
    int (*step_begin)(ft_engine *eng, const fti_prepared *const *reqs, size_t n,
                      uint32_t shard, uint32_t nshards);
    int (*step_buffers)(ft_engine *eng, uint64_t **send, uint64_t **recv,
                        size_t *len);
    int (*step_expand)(ft_engine *eng, uint32_t t);
    int (*step_keep)(ft_engine *eng, uint32_t t);
    int (*step_finish)(ft_engine *eng, ft_result *const *res);
    /* Optional: one step (FTI_STEP_*) of the batch begun on eng[0..count),
     * every one an engine of these ops, together (fti_engines_step_*);
     * finish writes engine j's request i to part[j * FTI_ENGINE_CHUNK +
     * i] and calls done (may be NULL) for each request, as
     * fti_engines_step_finish says.  NULL: the engines' own steps, one
     * engine after another. */
    int (*steps)(ft_engine *const *eng, size_t count, int kind, uint32_t t,
                 ft_result *part, fti_step_done done, void *arg);
    void *(*stream)(ft_engine *eng);
    void (*timing_report)(const ft_engine *eng, char *buf, size_t len);
    void (*close)(ft_engine *eng);
} ft_engine_ops;

struct ft_engine {
    const ft_engine_ops *ops;
    const ft_index *idx;
    ft_engine_opts opts;
    void *impl;
    int failed; /* an engine error (e.g. CUDA) marks the engine failed */
    int device; /* GPU ordinal, -1 for the CPU engine */
    char note[256]; /* which engine runs and why (ft_engine_note) */
};

/* Constructors of the engines (engine.c dispatches on opts->kind). */
int ft_cpu_engine_open(ft_engine *eng, char *errbuf, size_t errlen);
int ft_gpu_engine_open(ft_engine *eng, char *errbuf, size_t errlen);

/* fti_gpu_upload_trie copies the n sections need[] of t to the current
 * GPU (each with a zeroed 64-byte tail: navigation may read one word past
 * a vector) into dsec[section], and points view (a copy of t's view) at
 * the navigation sections among them.  FT_ECUDA (logged) on failure; what
 * was allocated stays in dsec for the caller to free.  Built with CUDA
 * only (gpu_engine.c). */
int fti_gpu_upload_trie(const ft_trie *t, const int *need, size_t n,
                        void *dsec[FT_SEC_COUNT], ft_trie_view *view);

/* fti_gpu_child_table builds the child table (ft_gk_ctab_build) of a
 * trie view uploaded to the current GPU, checked there node by node, on
 * stream: the device table, or NULL (it would take more than a quarter
 * of the free memory, or the build failed or found a node that differs:
 * said at INFO / WARN under who's name); *bytes its size (0 with NULL).
 * The GPU engine and the GPU step read child ranges from it.  Built with
 * CUDA only (gpu_engine.c). */
uint64_t *fti_gpu_child_table(const ft_trie_view *view, void *stream,
                              const char *who, size_t *bytes);

#endif /* FT_SEARCH_H */
