/*
 * values_bench.c - attaching values to a result's hits: one shard's
 * (fti_index_values_attach, the unsharded engine's) against a sharded
 * result's (fti_attach_values over the shards: each hit's shard, its
 * value's word prefetched ahead), and, as the baseline, what shard groups
 * did before: ft_index_value_at a hit after a binary search for its shard
 * (docs/BENCHMARKS.md, "Values of a sharded result").
 *
 *   ft_values_bench INDEX MANIFEST [HITS [REPS [SPAN]]]
 *
 * INDEX and MANIFEST hold the same keys (MANIFEST from `flashtrie split
 * INDEX`).  Each rep draws HITS (1000) key indexes at random over the
 * whole library, or within SPAN keys of a random one (SPAN > 0: hits
 * that sit near each other, as a beam's often do), evicts the caches (64
 * MiB written), and times the three ways on the same hits; means over
 * REPS (300), µs.  A key index is global in either layout but names other
 * keys in each (LOUDS order), so the two sharded ways are compared with
 * each other (their sums must agree) and the unsharded one is timed on
 * the same indexes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashtrie.h"
#include "flashtrie/internal/clock.h"
#include "flashtrie/internal/engine.h"
#include "search_impl.h"
#include "workload.h"


/* The baseline: a call of ft_index_value_at a hit. */
static int per_hit(ft_hit *h, uint32_t n, const ft_index *const *sh,
                   const uint64_t *base, size_t ns)
{
    for (uint32_t j = 0; j < n; j++) {
        size_t lo = 0, hi = ns;
        while (hi - lo > 1) {
            size_t mid = (lo + hi) / 2;
            if (base[mid] <= h[j].key_index)
                lo = mid;
            else
                hi = mid;
        }
        uint64_t v;
        if (ft_index_value_at(&v, sh[lo], h[j].key_index - base[lo]) != FT_OK)
            return -1;
        h[j].value = v;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: ft_values_bench INDEX MANIFEST [HITS [REPS "
                "[SPAN]]]\n");
        return 2;
    }
    uint32_t n = argc > 3 ? (uint32_t)atoi(argv[3]) : 1000;
    int reps = argc > 4 ? atoi(argv[4]) : 300;
    uint64_t span = argc > 5 ? strtoull(argv[5], NULL, 10) : 0;
    if (n == 0 || n > 4096 || reps <= 0) {
        fprintf(stderr, "ft_values_bench: HITS 1..4096, REPS >= 1\n");
        return 2;
    }
    char err[512];
    ft_library *one, *many;
    if (ft_library_open(&one, argv[1], 0, err, sizeof err) != FT_OK ||
        ft_library_open(&many, argv[2], 0, err, sizeof err) != FT_OK) {
        fprintf(stderr, "ft_values_bench: %s\n", err);
        return 1;
    }
    size_t ns = ft_library_shards(many);
    const ft_index **sh = calloc(ns, sizeof *sh);
    uint64_t *base = calloc(ns, sizeof *base), keys = 0;
    const ft_index *full = ft_library_shard(one, 0);
    for (size_t s = 0; s < ns; s++) {
        sh[s] = ft_library_shard(many, s);
        base[s] = keys;
        keys += ft_index_keys(sh[s]);
    }
    if (keys != ft_index_keys(full) || ft_library_shards(one) != 1) {
        fprintf(stderr, "ft_values_bench: %s is not one index of the %llu "
                "keys of %s\n", argv[1], (unsigned long long)keys, argv[2]);
        return 1;
    }
    ft_result r;
    if (ft_result_alloc(&r, n, 1) != FT_OK)
        return 1;
    uint64_t *ki = malloc(n * sizeof *ki);
    size_t evict = (size_t)64 << 20;
    char *ev = malloc(evict);
    double t[3] = {0, 0, 0};
    ft_wl_rng rng;
    ft_wl_rng_seed(&rng, 1);
    uint64_t sum[2] = {0, 0};
    for (int rep = 0; rep < reps; rep++) {
        uint64_t c = ft_wl_next(&rng) % keys;
        for (uint32_t j = 0; j < n; j++)
            ki[j] = span ? (c + ft_wl_next(&rng) % span) % keys
                         : ft_wl_next(&rng) % keys;
        for (int m = 0; m < 3; m++) {
            memset(ev, rep + m, evict);
            for (uint32_t j = 0; j < n; j++)
                r.hits[j].key_index = ki[j];
            r.n = n;
            r.status = FT_OK;
            double t0 = (double)fti_now_ns();
            int rc = m == 0 ? per_hit(r.hits, n, sh, base, ns)
                     : m == 1 ? fti_attach_values(&r, sh, base, ns)
                              : fti_attach_values(&r, &full, base, 1);
            t[m] += (double)fti_now_ns() - t0;
            if (rc != 0) {
                fprintf(stderr, "ft_values_bench: way %d failed\n", m);
                return 1;
            }
            for (uint32_t j = 0; m < 2 && j < n; j++)
                sum[m] += r.hits[j].value * (j + 1);
        }
    }
    printf("values of %u hits (%s), %zu shards of %llu keys, %d reps, means:"
           " per hit (ft_index_value_at) %.1f us, sharded "
           "(fti_attach_values) %.1f us, unsharded %.1f us; sums %s\n",
           n, span ? "near each other" : "random", ns,
           (unsigned long long)keys, reps, t[0] / reps / 1e3,
           t[1] / reps / 1e3, t[2] / reps / 1e3,
           sum[0] == sum[1] ? "equal" : "DIFFER");
    return sum[0] == sum[1] ? 0 : 1;
}
