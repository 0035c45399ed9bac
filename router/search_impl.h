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

/* fti_search_admit validates req (beam capped at max_beam, 0 = the
 * specification's), checks that its answer fits res and prepares it in *slot
 * (created if NULL).  On a fault res carries the status and message, which it
 * returns.  late: only fti_request_validate_early here, the caller
 * checks the rest (fti_request_validate_late) before it answers. */
int fti_search_admit(fti_prep **slot, const fti_prepared **out,
                     const ft_request *req, uint32_t max_beam, ft_result *res,
                     int late);

/* fti_admit_chunk admits the requests from *i on into vp/vres until
 * FTI_ENGINE_CHUNK are admitted or none is left (rejected ones get their
 * status in res), advancing *i; returns how many were admitted.  vreq
 * (NULL: fully validated here) gets the admitted requests, whose
 * duplicate tokens the caller then checks (fti_search_admit's late). */
size_t fti_admit_chunk(fti_prep **pool, const ft_request *reqs, size_t n,
                       size_t *i, uint32_t max_beam, ft_result *res,
                       const fti_prepared **vp, ft_result **vres,
                       const ft_request **vreq);

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
} ft_searcher_ops;

int ft_searcher_open_ops(ft_searcher **out, const ft_searcher_ops *ops,
                         void *arg, ft_engine_kind kind);

#endif /* FT_SEARCH_IMPL_H */
