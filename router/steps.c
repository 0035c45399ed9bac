/*
 * steps.c - the shard step loop and the batch fitting, written once for
 * groups (group.c) and clusters (cluster.c); see steps.h.
 */
#include "steps.h"

#include "flashtrie.h"

/* part_ready sizes one local result for `results` hits. */
static int part_ready(ft_result *r, uint32_t results)
{
    if (r->cap_hits >= results && r->cap_tokens / FT_MAX_T >= results)
        return FT_OK;
    ft_result_free(r);
    return ft_result_alloc(r, results, FT_MAX_T);
}

uint32_t fti_steps_tmax(const fti_prepared *const *reqs, size_t m)
{
    uint32_t tmax = 0;
    for (size_t i = 0; i < m; i++)
        tmax = reqs[i]->T > tmax ? reqs[i]->T : tmax;
    return tmax;
}

int fti_steps_run(ft_engine *const *eng, size_t count, uint32_t first,
                  uint32_t nshards, const fti_prepared *const *reqs, size_t m,
                  ft_result *part, const fti_steps_xchg *x, int *engine_rc)
{
    int erc = FT_OK, rc = FT_OK;
    uint32_t tmax = fti_steps_tmax(reqs, m);
    int fused = x->fused != NULL;
again:
    for (size_t j = 0; j < count && erc == FT_OK; j++) {
        for (size_t i = 0; i < m && erc == FT_OK; i++)
            erc = part_ready(&part[j * FTI_ENGINE_CHUNK + i],
                             reqs[i]->results);
        if (erc == FT_OK)
            erc = fti_engine_step_begin(eng[j], reqs, m, first + (uint32_t)j,
                                        nshards);
    }
    uint32_t steps = tmax;
    if (fused && erc == FT_OK) {
        rc = x->fused(x->arg, tmax);
        steps = 0; /* enqueued */
    }
    for (uint32_t t = 0; t < steps && erc == FT_OK && rc == FT_OK; t++) {
        if (x->step)
            rc = x->step(x->arg, t);
        if (erc == FT_OK && rc == FT_OK)
            erc = fti_engines_step_expand(eng, count, t);
        if (erc != FT_OK || rc != FT_OK)
            break;
        uint64_t *send, *recv;
        size_t len;
        erc = fti_engine_step_buffers(eng[0], &send, &recv, &len);
        if (erc == FT_OK)
            rc = x->exchange(x->arg, t, len);
        if (erc == FT_OK && rc == FT_OK)
            erc = fti_engines_step_keep(eng, count, t);
    }
    if (erc == FT_OK && rc == FT_OK && x->settle)
        rc = x->settle(x->arg);
    /* done goes with the finish, except where a fused run may still be
     * void (fused_done): then it follows that */
    if (erc == FT_OK && rc == FT_OK)
        erc = fti_engines_step_finish(eng, count, part, m,
                                      fused ? NULL : x->done, x->arg);
    if (fused && erc == FT_OK && rc == FT_OK && x->fused_done &&
        x->fused_done(x->arg) == FTI_STEPS_REDO) {
        fused = 0;
        goto again;
    }
    if (fused && erc == FT_OK && rc == FT_OK && x->done)
        for (size_t i = 0; i < m; i++)
            x->done(x->arg, i);
    if (engine_rc)
        *engine_rc = erc;
    return erc != FT_OK ? erc : rc;
}

int fti_steps_fit(const ft_engine_opts *o, const fti_prepared *const *reqs,
                  size_t m, fti_steps_batch run, void *arg)
{
    size_t ix[FTI_ENGINE_CHUNK];
    if (m > FTI_ENGINE_CHUNK)
        return FT_EINTERNAL;
    if (o->kind != FT_ENGINE_GPU) {
        for (size_t i = 0; i < m; i++)
            ix[i] = i;
        return m ? run(arg, ix, m) : FT_OK;
    }
    size_t slots = fti_gpu_slots(o->max_batch);
    uint32_t kmax = o->max_k ? o->max_k : FT_MAX_K;
    uint32_t tmax = o->max_t ? o->max_t : FT_MAX_T;
    size_t k = 0;
    int rc;
    for (size_t i = 0; i < m; i++) {
        if (reqs[i]->K > kmax || reqs[i]->T > tmax) {
            size_t one = i;
            if ((rc = run(arg, &one, 1)) != FT_OK)
                return rc;
            continue;
        }
        ix[k++] = i;
        if (k == slots) {
            if ((rc = run(arg, ix, k)) != FT_OK)
                return rc;
            k = 0;
        }
    }
    return k > 0 ? run(arg, ix, k) : FT_OK;
}
