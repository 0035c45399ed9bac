/*
 * slot.h - the engine slot: what answers a batch of requests.
 *
 * A generation (ft_gen) is one opened library (an index, or a manifest of
 * shards) with its searchers: one per replica (one per listed GPU, or N
 * CPU ones).  A searcher is one engine for an index and a shard group for
 * a manifest, so the slot serves both the same way.  The daemon holds
 * the current generation; a reload opens and verifies a new one aside and
 * swaps it in (ft_gen_swap) while batches still running keep a reference
 * to the old one, which is closed when its last batch is answered.
 *
 * ft_slot_search is the only place in the daemon that runs a search, so
 * when the search entry moves or is renamed this is a one-line change.
 *
 * Replica health: an engine call that fails with a device error (FT_ECUDA,
 * FT_ENCCL, or any error once the searcher reports itself failed) marks
 * that replica of the generation failed, once, with the reason, and logs
 * one line.  A failed replica does not heal: the batcher gives it no more
 * batches and re-runs the one that hit the fault on a healthy replica
 * (batcher.c).  A reload opens fresh engines, so a new generation starts
 * with every replica healthy.
 */
#ifndef FT_SLOT_H
#define FT_SLOT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "flashtrie.h"

#define FT_SLOT_MAX_REPLICAS 16

typedef enum ft_slot_engine {
    FT_SLOT_AUTO = 0, /* the GPU engine when one opens, else the CPU */
    FT_SLOT_CPU = 1,
    FT_SLOT_GPU = 2
} ft_slot_engine;

typedef struct ft_slot_opts {
    ft_slot_engine engine;
    int devices[FT_SLOT_MAX_REPLICAS]; /* GPU ordinals: one replica each */
    size_t n_devices;                  /* 0: device 0 alone */
    int replicas;                      /* engines per device for the GPU,
                                        * CPU engines for the CPU (0 = 1) */
    int cpu_threads;                   /* workers per CPU engine, 0 = all */
    uint32_t max_batch;                /* GPU launch size (0 = 32) */
    uint32_t max_beam, max_k, max_t;   /* GPU arena sizing (0 = the
                                        * specification's maxima) */
    int no_verify;                     /* skip section checksums */
    int spread;                        /* engine = shards: each replica is
                                        * one shard group whose shards are
                                        * spread over all listed devices */
} ft_slot_opts;

void ft_slot_opts_init(ft_slot_opts *o);

/* ft_slot_engine_str is the engine's name (ft_engine_kind_name). */
const char *ft_slot_engine_str(ft_slot_engine e);

typedef struct ft_gen {
    atomic_int refs;
    uint64_t id;            /* 1 for the first index, +1 per reload */
    char path[1024];
    ft_library *lib;
    ft_index_info info;
    size_t shards;          /* 1 for a plain index */
    size_t n_eng;           /* replicas */
    ft_searcher *eng[FT_SLOT_MAX_REPLICAS];
    int kind[FT_SLOT_MAX_REPLICAS];   /* ft_engine_kind: CPU or GPU */
    int device[FT_SLOT_MAX_REPLICAS]; /* GPU ordinal, -1 for CPU */
    char why[384];          /* why this engine: logged and shown in INFO */
    uint64_t opened_ns;
    /* Replica health (ft_gen_fail_replica): claimed is set by the one
     * thread that marks the replica, which then writes fail_why and last
     * stores the error code in failed (0 while the replica serves), so a
     * reader that sees failed != 0 sees the whole reason. */
    atomic_int claimed[FT_SLOT_MAX_REPLICAS];
    atomic_int failed[FT_SLOT_MAX_REPLICAS];
    char fail_why[FT_SLOT_MAX_REPLICAS][320];
} ft_gen;

/* ft_gen_kind_name is "cpu" or "gpu" for replica r. */
const char *ft_gen_kind_name(const ft_gen *g, size_t r);

/* ft_gen_open opens and verifies the library at path and its searchers; the
 * generation starts with one reference.  On failure errbuf names the file
 * and the reason, and nothing is left open. */
int ft_gen_open(ft_gen **out, const char *path, const ft_slot_opts *o,
                uint64_t id, char *errbuf, size_t errlen);
/* ft_gen_wrap makes a generation of one replica from an opened library
 * and searcher (a cluster's), which it then owns; why says what serves. */
int ft_gen_wrap(ft_gen **out, const char *path, ft_library *lib,
                ft_searcher *s, uint64_t id, const char *why);
void ft_gen_ref(ft_gen *g);
/* ft_gen_unref drops a reference; the last one closes the engines and the
 * index (in whichever thread drops it). */
void ft_gen_unref(ft_gen *g);

/* ft_slot_search answers n requests on replica r of g; each result carries
 * its own status.  Returns FT_OK unless the engine itself failed; a device
 * error marks the replica failed (ft_gen_fail_replica).  On a replica
 * already failed it runs nothing and answers every request with the error
 * the replica failed with. */
int ft_slot_search(ft_gen *g, size_t r, const ft_request *reqs, size_t n,
                   ft_result *res);
/* ft_slot_search_validated is ft_slot_search for requests that
 * ft_request_validate (with the server's caps) accepted already: the
 * server validates once, at the door (its decoder), and the engine
 * trusts it (fti_searcher_search_validated: no row is scanned again). */
int ft_slot_search_validated(ft_gen *g, size_t r, const ft_request *reqs,
                             size_t n, ft_result *res);
/* ft_slot_search_door is ft_slot_search for requests the door validated
 * all but the duplicate tokens of (fti_request_validate_early: the
 * server's dup_check = engine): those are checked on the host while the
 * engine works (fti_searcher_search_door), each rule once. */
int ft_slot_search_door(ft_gen *g, size_t r, const ft_request *reqs, size_t n,
                        ft_result *res);

/* How much of a request its producer (the server's decoder: the door)
 * validated: nothing, all of it (ft_request_validate), or all but the
 * duplicate tokens (fti_request_validate_early).  ft_job.validated holds
 * one; a batch runs at the least of its jobs' (ft_slot_search_at). */
enum { FT_DOOR_NONE = 0, FT_DOOR_ALL = 1, FT_DOOR_EARLY = 2 };
int ft_slot_search_at(ft_gen *g, size_t r, const ft_request *reqs, size_t n,
                      ft_result *res, int door);

/* ft_slot_is_device_error: rc, returned by replica r's engine, means the
 * engine (the device under it) is out of service, not that one request was
 * bad: FT_ECUDA, FT_ENCCL, or any error once the searcher says it failed. */
int ft_slot_is_device_error(const ft_gen *g, size_t r, int rc);

/* ft_gen_replica_failed is 0 while replica r serves, else the ft_err it
 * failed with; *why (when why is not NULL) is then its reason, e.g. "CUDA
 * error: engine: CUDA error, the GPU engine failed". */
int ft_gen_replica_failed(const ft_gen *g, size_t r, const char **why);
/* ft_gen_failed_replicas counts the failed replicas of g. */
size_t ft_gen_failed_replicas(const ft_gen *g);
/* ft_gen_replica_name writes "gpu device D" or "cpu" for replica r. */
void ft_gen_replica_name(const ft_gen *g, size_t r, char *out, size_t len);
/* ft_gen_fail_replica marks replica r failed with rc and the reason, and
 * logs one line (replica, device, error) when this call is the one that
 * marked it: returns 1 then, 0 when it was marked before. */
int ft_gen_fail_replica(ft_gen *g, size_t r, int rc, const char *why);

/* ---- test-only hooks (never set by a configuration) ---------------------
 * ft_searcher_fault_arm makes searcher s fail, from its next `after`+1-th
 * batch call on (after = 0: the next call), the way the GPU engine fails on
 * a CUDA error: that call and every later one answer each request
 * FT_ECUDA with FT_SEARCHER_FAULT_MSG (later calls: _AGAIN) and return
 * FT_ECUDA, and ft_searcher_failed reports it.  CPU engines included, so
 * failover is tested without a GPU.  Safe to call while s is searching. */
#define FT_SEARCHER_FAULT_MSG                                                 \
    "engine: CUDA error, the GPU engine failed (injected fault)"
#define FT_SEARCHER_FAULT_AGAIN                                               \
    "engine: the GPU engine failed earlier (injected fault)"
void ft_searcher_fault_arm(ft_searcher *s, uint64_t after);

#endif /* FT_SLOT_H */
