/*
 * cpu_engine.h - knobs of the CPU engine that tests and benchmarks use to
 * reach code paths a heuristic would otherwise choose for them.
 */
#ifndef FT_CPU_ENGINE_H
#define FT_CPU_ENGINE_H

#include "search.h"

/* How a beam entry matches the proposals of a step against its children. */
typedef enum ft_cpu_match {
    FT_CPU_MATCH_AUTO = 0,   /* per beam entry, by degree vs proposals */
    FT_CPU_MATCH_BSEARCH = 1,/* one binary search per proposal */
    FT_CPU_MATCH_MERGE = 2   /* two-pointer merge over token-sorted lists */
} ft_cpu_match;

/* How the workers share a batch.  The joint steps of a shard group
 * (fti_engines_step_*) follow the split of the group's first engine:
 * AUTO one piece of work per request (merged over the shards) when the
 * batch has at least as many requests as workers, else one per (shard,
 * request); REQUESTS always per request; BEAMS and GROUPS always per
 * (shard, request). */
typedef enum ft_cpu_split {
    FT_CPU_SPLIT_AUTO = 0,     /* rounds of one request per worker, the rest
                                  at once in groups; small requests alone */
    FT_CPU_SPLIT_BEAMS = 1,    /* every request, beams of a step in parallel */
    FT_CPU_SPLIT_REQUESTS = 2, /* one request per worker at a time */
    FT_CPU_SPLIT_GROUPS = 3    /* as AUTO, but even small requests share */
} ft_cpu_split;

/* ft_cpu_engine_tune sets the knobs of a CPU engine (FT_EINVAL when eng is
 * not a CPU engine).  Results never depend on them; only speed does. */
int ft_cpu_engine_tune(ft_engine *eng, ft_cpu_match match, ft_cpu_split split);

#endif /* FT_CPU_ENGINE_H */
