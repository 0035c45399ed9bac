/*
 * search_impl.h - what router/'s search files share: per-thread prepared
 * request buffers, admission (validate + prepare) and value attachment.
 */
#ifndef FT_SEARCH_IMPL_H
#define FT_SEARCH_IMPL_H

#include "flashtrie.h"
#include "flashtrie/internal/engine.h"

/* fti_prep_pool returns the calling thread's FTI_ENGINE_CHUNK prep slots
 * (NULL entries are created on first use); NULL when out of memory. */
fti_prep **fti_prep_pool(void);

/* ft_request_validate in two parts (request.c): _early is every rule
 * but the duplicate tokens (on a fault, the message ft_request_validate
 * gives), _late the duplicate tokens, for a request _early passed.
 * Together they accept and refuse what ft_request_validate does, with
 * its messages. */
int fti_request_validate_early(const ft_request *req, uint32_t max_beam,
                               char *errbuf, size_t errlen);
int fti_request_validate_late(const ft_request *req, char *errbuf,
                              size_t errlen);
/* fti_request_validate_fields is the O(1) part of ft_request_validate:
 * the fields (T, K, grids given, beam within max_beam, results, thetas,
 * alpha), none of the rows.  What an engine checks of a request a door
 * validated (FTI_ADMIT_TRUSTED): its own bounds, e.g. a beam cap that a
 * reload raised on the server but not in the engine's arenas.  Not
 * counted by fti_request_validations. */
int fti_request_validate_fields(const ft_request *req, uint32_t max_beam,
                                char *errbuf, size_t errlen);

/* How a request is admitted to an engine (fti_search_admit):
 *   FTI_ADMIT_FULL     ft_request_validate here (the public search);
 *   FTI_ADMIT_LATE     fti_request_validate_early here, the caller checks
 *                      the duplicate tokens (fti_request_validate_late)
 *                      while the engine runs, before it answers;
 *   FTI_ADMIT_TRUSTED  nothing of the request's rows is checked again: a
 *                      door (the server's decoder) ran ft_request_validate
 *                      on it already.  Only what is the engine's own bound
 *                      (fti_request_validate_fields: T, K, beam
 *                      within its max_beam; the answer within res) is
 *                      checked, in O(1);
 *   FTI_ADMIT_DOOR     a door ran fti_request_validate_early on it (every
 *                      rule but the duplicate tokens): the engine's own
 *                      bounds are checked here as with FTI_ADMIT_TRUSTED,
 *                      and the duplicate tokens by the caller while the
 *                      engine runs (fti_request_validate_late), or here
 *                      when the caller cannot (fti_admit_chunk without
 *                      vreq).  Between them every rule is checked once:
 *                      the server's dup_check = engine (docs/config.md). */
enum {
    FTI_ADMIT_FULL = 0,
    FTI_ADMIT_LATE = 1,
    FTI_ADMIT_TRUSTED = 2,
    FTI_ADMIT_DOOR = 3
};

/* fti_search_admit validates req (beam capped at max_beam, 0 = the
 * specification's) as mode says, checks that its answer fits res and
 * prepares it in *slot (created if NULL).  On a fault res carries the
 * status and message, which it returns. */
int fti_search_admit(fti_prep **slot, const fti_prepared **out,
                     const ft_request *req, uint32_t max_beam, ft_result *res,
                     int mode);

/* fti_request_validations counts the validations of a request's rows
 * (ft_request_validate, fti_request_validate_early and _late, one each
 * per call) since the process started: a test reads it to see that a
 * request the server accepted is not validated again on the engine's side
 * (FTI_ADMIT_TRUSTED).  One relaxed atomic add per call. */
uint64_t fti_request_validations(void);

/* fti_admit_chunk admits the requests from *i on into vp/vres until
 * FTI_ENGINE_CHUNK are admitted or none is left (rejected ones get their
 * status in res), advancing *i; returns how many were admitted.  mode is
 * fti_search_admit's; with FTI_ADMIT_LATE or FTI_ADMIT_DOOR vreq gets the
 * admitted requests, whose duplicate tokens the caller then checks
 * (fti_engine_run_late); vreq NULL: they are checked here, before the
 * request is admitted. */
size_t fti_admit_chunk(fti_prep **pool, const ft_request *reqs, size_t n,
                       size_t *i, uint32_t max_beam, ft_result *res,
                       const fti_prepared **vp, ft_result **vres,
                       const ft_request **vreq, int mode);

/* fti_engine_run_late runs vp[0..m) (m <= FTI_ENGINE_CHUNK) admitted by
 * fti_admit_chunk with FTI_ADMIT_LATE: their duplicate tokens (vreq)
 * are checked while the engine works (a GPU's launch), a request that
 * fails gets its error and its answer is dropped.  vreq NULL: no check
 * (the requests were admitted whole). */
int fti_engine_run_late(ft_engine *eng, const fti_prepared *const *vp,
                        ft_result **vres, const ft_request **vreq, size_t m);

/* fti_engine_search_batch is ft_engine_search_batch (mode FTI_ADMIT_FULL,
 * with the duplicate check overlapping the engine: FTI_ADMIT_LATE) or,
 * with FTI_ADMIT_TRUSTED, the same search of requests a door validated
 * (with FTI_ADMIT_DOOR: all but their duplicate tokens, which are checked
 * while the engine runs). */
int fti_engine_search_batch(ft_engine *eng, const ft_request *reqs, size_t n,
                            ft_result *res, int mode);

/* fti_searcher_search_validated is ft_searcher_search_batch for requests
 * that ft_request_validate accepted already (the server's decoder, the
 * door): nothing of them is validated again (FTI_ADMIT_TRUSTED).  The
 * engine slot (slot.c) is its one caller; the public searches validate. */
int fti_searcher_search_validated(ft_searcher *s, const ft_request *reqs,
                                  size_t n, ft_result *res);
/* fti_searcher_search_door is the same for requests a door validated all
 * but the duplicate tokens of (fti_request_validate_early): those are
 * checked beside the engine (FTI_ADMIT_DOOR), once.  A searcher of ops
 * (a cluster) runs its validating search on them. */
int fti_searcher_search_door(ft_searcher *s, const ft_request *reqs, size_t n,
                             ft_result *res);
/* fti_searcher_overlaps_check says whether s checks a batch's duplicate
 * tokens on the host while its engine works (a GPU engine, or a forest
 * of shards on one GPU): where the door's dup_check = auto leaves that
 * check to the engine. */
int fti_searcher_overlaps_check(const ft_searcher *s);

/* fti_attach_values replaces every hit's value by the value of its key:
 * the key index is global over shards[0..nshards), shard s holding the
 * indexes from key_base[s] on. */
int fti_attach_values(ft_result *res, const ft_index *const *shards,
                      const uint64_t *key_base, size_t nshards);

/* fti_merge_parts merges n shards' local hits of one request (each sorted
 * by (score desc, order asc), key indexes local to its shard) into res:
 * the first `results` by that order, which is total across shards since
 * orders hold global ranks; key indexes become global (shard s's first
 * key is base[s]); values are copied as the parts carry them.  A part
 * with an error status makes res that error.  Shard groups in one process
 * (group.c) and across processes (cluster.c) both merge with it. */
int fti_merge_parts(ft_result *res, const ft_result *const *parts,
                    const uint64_t *base, size_t n, uint32_t results);

/* ft_searcher_ops make a searcher of something else than the engines of
 * one process (a multi-process cluster, router/cluster.c, which lives
 * outside libflashtrie): the searcher calls them and owns arg. */
typedef struct ft_searcher_ops {
    int (*search)(void *arg, const ft_request *reqs, size_t n,
                  ft_result *res);

    int (*failed)(void *arg);
    const char *(*note)(void *arg);
    void (*close)(void *arg);
    /* search_validated (NULL: search) is search for requests a door
     * validated (fti_searcher_search_validated). */
    int (*search_validated)(void *arg, const ft_request *reqs, size_t n,
                            ft_result *res);
} ft_searcher_ops;

int ft_searcher_open_ops(ft_searcher **out, const ft_searcher_ops *ops,
                         void *arg, ft_engine_kind kind);

#endif /* FT_SEARCH_IMPL_H */
