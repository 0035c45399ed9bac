/*
 * cluster.h - multi-process shard groups (docs/sharding.md, "Clusters").
 *
 * One "flashtrie serve" process per GPU or host (a rank) serves a
 * contiguous block of a manifest's shards: rank r of world W over S shards
 * holds shards [r * S / W, (r + 1) * S / W).  Rank 0, the coordinator,
 * listens on cluster.coordinator (nng pair1, polyamorous); the other ranks
 * dial it and register; the coordinator checks every registration (world,
 * rank, manifest, shard block, engine) and, once all ranks are in, answers
 * each with the session (the shard-to-rank map and, for GPU ranks, the
 * NCCL unique id).
 *
 * The coordinator's searcher is the cluster: a batch runs on every rank in
 * lockstep, one decode step at a time, as a one-process shard group does
 * (group.c), with the exchanges between processes: the batch from rank 0
 * to all, every step's per-shard lists from all to all, the local hits
 * from all to rank 0, merged by the group's merge (fti_merge_parts).  Two
 * transports carry them: nng over the bootstrap connections (CPU ranks)
 * and NCCL on one communicator (GPU ranks; nng still carries the batch's
 * announcement, so idle ranks wait on a bounded receive).
 *
 * A rank that leaves or does not answer within the step timeout fails the
 * batch under way and every later one with FT_ECONN naming the rank
 * (never a partial answer); so does one that misses the idle heartbeat.
 * A rank that is down may register again (a restarted process, or the
 * same one, told to by REJOIN once it answers again): the same checks as
 * the first registration, then the session again; the cluster is up once
 * every rank is.  GPU ranks (NCCL) cannot rejoin: their communicator is
 * the whole world's.
 */
#ifndef FT_CLUSTER_H
#define FT_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "flashtrie.h"
#include "flashtrie/internal/engine.h"

/* How long the coordinator waits for every rank to register, and a rank
 * for its session, in milliseconds. */
#define FT_CLUSTER_JOIN_MS 60000u
/* How long any rank waits for one message of a running batch (a step's
 * lists, the hits) before it gives the batch up. */
#define FT_CLUSTER_STEP_MS 10000u
/* While no batch runs, rank 0 pings every rank each FT_CLUSTER_PING_MS
 * and takes a rank down that has not answered for FT_CLUSTER_PING_MISSES
 * intervals (1.5 s): a rank stopped or hung while idle is reported within
 * that, not by the next batch after the step timeout. */
#define FT_CLUSTER_PING_MS 250u
#define FT_CLUSTER_PING_MISSES 6u
/* A rank registering repeats its registration this often until answered
 * (a registration that reached rank 0 during a batch is dropped). */
#define FT_CLUSTER_REG_RETRY_MS 1000u
/* Rank 0 leaving waits this long at most for every rank to close its
 * connection after the BYE (each closes once it read it), sending the
 * BYE again each FT_CLUSTER_PING_MS: closing earlier could lose a BYE not
 * yet read, and the rank would take the closed connection for a lost
 * coordinator (exit 1). */
#define FT_CLUSTER_BYE_MS 3000u
/* The most ranks a cluster has. */
#define FT_CLUSTER_MAX_RANKS 1024u

typedef struct ft_cluster ft_cluster;

/* ft_cluster_stop_fn is polled (every 100 ms at most) while a rank waits
 * for its peers; non-zero gives the wait up. */
typedef int (*ft_cluster_stop_fn)(void *arg);

typedef struct ft_cluster_opts {
    uint32_t rank, world;
    const char *coordinator; /* nng URL of rank 0's bootstrap listener */
    const char *manifest;    /* the manifest's path (its checksum) */
    ft_engine_opts engine;   /* kind CPU or GPU (every rank the same) */
    uint32_t join_ms;        /* 0: FT_CLUSTER_JOIN_MS */
    uint32_t step_ms;        /* 0: FT_CLUSTER_STEP_MS */
    const char *secret;      /* shared secret sent in REG and checked by
                              * rank 0 (NULL or "": none) */
    ft_cluster_stop_fn stop; /* may be NULL */
    void *stop_arg;
    uint32_t test_slow_ms;   /* test hook (ranks): sleep this long after
                              * each message served, as a rank starved on
                              * a loaded machine; 0: never */
} ft_cluster_opts;

void ft_cluster_opts_init(ft_cluster_opts *o);

/* ft_cluster_block gives rank r's shards: first .. first + count - 1. */
void ft_cluster_block(uint32_t shards, uint32_t world, uint32_t r,
                      uint32_t *first, uint32_t *count);

/* ft_cluster_open_library opens the manifest at path with only rank's
 * shards (ft_library_open_part); FT_EINVAL when the world has more ranks
 * than the manifest has shards, or path is a plain index. */
int ft_cluster_open_library(ft_library **out, const char *path,
                            unsigned flags, uint32_t rank, uint32_t world,
                            char *errbuf, size_t errlen);

/* ft_cluster_open opens the engines of this rank's shards of lib (from
 * ft_cluster_open_library; it must outlive the cluster) and joins the
 * cluster: rank 0 listens and waits for every rank, the others dial and
 * register.  Errors name the rank and the reason: FT_ECONN (cannot listen
 * or dial), FT_ETIMEDOUT (ranks missing after join_ms), FT_ECONFIG (a
 * registration refused: the coordinator's message), FT_ESHUTDOWN (stop
 * said so). */
int ft_cluster_open(ft_cluster **out, const ft_library *lib,
                    const ft_cluster_opts *o, char *errbuf, size_t errlen);
/* ft_cluster_close closes the engines and the connections; the
 * coordinator first tells every rank that it leaves. */
void ft_cluster_close(ft_cluster *c);

/* ft_cluster_search_batch (rank 0) answers n requests over the whole
 * cluster, as fti_group_search_batch: each result carries its status; a
 * rank that is down makes every admitted request FT_ECONN with a message
 * naming it.  Returns FT_OK unless the local engines failed. */
int ft_cluster_search_batch(ft_cluster *c, const ft_request *reqs, size_t n,
                            ft_result *res);

/* ft_cluster_serve (ranks above 0) runs the batches the coordinator sends
 * until it leaves (FT_OK), its connection is lost (FT_ECONN) or stop says
 * so (FT_ESHUTDOWN). */
int ft_cluster_serve(ft_cluster *c);

uint32_t ft_cluster_rank(const ft_cluster *c);
uint32_t ft_cluster_world(const ft_cluster *c);
/* ft_cluster_rank_state says whether rank r is up, its shards, and (when
 * down) why, in why (whylen bytes). */
int ft_cluster_rank_state(const ft_cluster *c, uint32_t r, uint32_t *first,
                          uint32_t *count, char *why, size_t whylen);
/* ft_cluster_down is non-zero while a rank is down; why says which. */
int ft_cluster_down(const ft_cluster *c, char *why, size_t whylen);
/* ft_cluster_note is one line: ranks, shards, engines, transport. */
const char *ft_cluster_note(const ft_cluster *c);
ft_engine_kind ft_cluster_kind(const ft_cluster *c);

/* ft_searcher_open_cluster makes a searcher of a cluster (rank 0), which
 * it then owns (searcher.c). */
int ft_searcher_open_cluster(ft_searcher **out, ft_cluster *c);

#endif /* FT_CLUSTER_H */
