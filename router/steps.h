/*
 * steps.h - the shard step loop, written once (issue 36).
 *
 * A shard group in one process (group.c) and the ranks of a cluster
 * (cluster.c) drive their engines the same way (include/flashtrie/
 * internal/engine.h, "Prepared requests and the engine steps"):
 *
 *   every engine: begin
 *   for t in 0 .. Tmax-1:
 *       every engine: expand(t)
 *       exchange(t)            <- the caller's, through fti_steps_xchg
 *       every engine: keep(t)
 *   settle (optional)          <- e.g. wait for the last NCCL exchange
 *   every engine: finish       -> its local hits
 *
 * and cut a batch of prepared requests into what fits the GPU engines'
 * slots the same way (fti_steps_fit).  Only the exchange differs (host
 * copies, device copies on a group stream, NCCL all-gathers, the
 * cluster's transports): it is a callback.
 */
#ifndef FT_ROUTER_STEPS_H
#define FT_ROUTER_STEPS_H

#include <stddef.h>
#include <stdint.h>

#include "flashtrie.h"
#include "flashtrie/internal/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* fti_steps_xchg is one exchange of a step loop.  exchange runs after
 * every engine's expand of step t, with len the length of each engine's
 * send list (engine 0's): it must leave every shard's list in every
 * engine's recv, in shard order.  step (optional) runs at the start of
 * step t, before any expand (the group's timing events).  settle
 * (optional) runs after the last step, before the engines finish. */
typedef struct fti_steps_xchg {
    int (*exchange)(void *arg, uint32_t t, size_t len);
    int (*step)(void *arg, uint32_t t);
    int (*settle)(void *arg);
    /* fused (optional): enqueues all tmax steps at once, exchange
     * included (the shard kernel, FTI_EXCHANGE_KERNEL), instead of the
     * loop; fused_done runs after the engines finished and returns FT_OK,
     * or FTI_STEPS_REDO: the answers are void, and the batch is begun
     * again and run by the loop (exchange then must work). */
    int (*fused)(void *arg, uint32_t tmax);
    int (*fused_done)(void *arg);
    /* done (optional): every engine's part of request i is final, called
     * once per request of a batch that finished: from the CPU engines'
     * workers as each request's parts are written (concurrently for
     * distinct requests; fti_engines_step_finish), else from the calling
     * thread at the end.  The group merges a request's parts there. */
    void (*done)(void *arg, size_t i);
    void *arg;
} fti_steps_xchg;

#define FTI_STEPS_REDO 1

/* fti_steps_run runs reqs[0..m) over count engines that hold shards
 * first .. first + count - 1 of nshards: begin, the steps, finish.
 * part[j * FTI_ENGINE_CHUNK + i] receives engine j's local hits of
 * request i (sized here to reqs[i]->results hits of up to FT_MAX_T
 * tokens).  Returns FT_OK or the first error; *engine_rc (may be NULL)
 * is set to that error when an engine call (or a part's allocation) made
 * it, FT_OK when the exchange did. */
int fti_steps_run(ft_engine *const *eng, size_t count, uint32_t first,
                  uint32_t nshards, const fti_prepared *const *reqs, size_t m,
                  ft_result *part, const fti_steps_xchg *x, int *engine_rc);

/* fti_steps_tmax is the batch's longest request (its step count). */
uint32_t fti_steps_tmax(const fti_prepared *const *reqs, size_t m);

/* fti_steps_fit cuts reqs[0..m) (m <= FTI_ENGINE_CHUNK) into the batches
 * the engines take and calls run(arg, ix, k) for each, ix[0..k) the
 * requests' positions in reqs: a GPU engine (o->kind) takes up to
 * max_batch requests within max_k and max_t, or one larger request alone
 * in its big slot (shard/gpu_engine.c's slot rules); CPU engines take
 * the whole batch.  Stops at, and returns, the first error of run. */
typedef int (*fti_steps_batch)(void *arg, const size_t *ix, size_t k);
int fti_steps_fit(const ft_engine_opts *o, const fti_prepared *const *reqs,
                  size_t m, fti_steps_batch run, void *arg);

#ifdef __cplusplus
}
#endif

#endif /* FT_ROUTER_STEPS_H */
