/*
 * gen_util.h - the generation the batcher tests (failover, validate_once,
 * answer) run their jobs on.  Header-only: those tests link the router's
 * internals (slot.h) themselves.
 */
#ifndef FT_TEST_GEN_UTIL_H
#define FT_TEST_GEN_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#include "slot.h"

/* gen_util_open opens the index at path as a generation of CPU engines,
 * replicas of them with one thread each; a failure ends the test. */
static inline ft_gen *gen_util_open(const char *path, int replicas)
{
    ft_slot_opts o;
    ft_slot_opts_init(&o);
    o.engine = FT_SLOT_CPU;
    o.replicas = replicas;
    o.cpu_threads = 1;
    ft_gen *g;
    char err[512] = "";
    if (ft_gen_open(&g, path, &o, 1, err, sizeof err) != FT_OK) {
        fprintf(stderr, "ft_gen_open: %s\n", err);
        exit(1);
    }
    return g;
}

#endif
