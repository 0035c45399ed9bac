/*
 * gpu_replica_test.c - GPU engines opened on the same index and GPU share
 * one device copy of it (issue 36: R replicas use one index copy plus R
 * sets of search buffers), and every one of them still answers exactly as
 * the CPU engine does, also after the engine that uploaded the copy has
 * closed; an engine on another index, or with another child map
 * threshold, gets a copy of its own.
 *
 * Exits 77 ("SKIP: no GPU ...") when the GPU engine reports FT_ENODEV or
 * the build has no GPU engine.
 */
#include "search_util.h"

static void open_gpu(ft_engine **eng, ft_index *idx, uint32_t cmap_min)
{
    ft_engine_opts o;
    ft_engine_opts_init(&o);
    o.kind = FT_ENGINE_GPU;
    o.child_map_min = cmap_min;
    char err[256] = "";
    int rc = ft_engine_open(eng, idx, &o, err, sizeof err);
    if (rc == FT_ENODEV || rc == FT_ENOTSUP) {
        printf("SKIP: no GPU (%s)\n", err);
        exit(FT_TEST_SKIP);
    }
    if (rc != FT_OK) {
        fprintf(stderr, "GPU engine open failed: %s: %s\n", ft_strerror(rc),
                err);
        exit(1);
    }
}

/* answer runs c's batch on eng and checks every result against the CPU
 * engine's (cpu). */
static void answer(ft_engine *eng, su_cases *c, const ft_result *cpu,
                   const char *what)
{
    ft_result *got = calloc(c->n, sizeof *got);
    for (uint32_t i = 0; i < c->n; i++)
        FT_PASS(ft_result_alloc(&got[i], FT_MAX_RESULTS, c->cs[i].req.T));
    FT_PASS(ft_engine_search_batch(eng, c->batch, c->n, got));
    for (uint32_t i = 0; i < c->n; i++) {
        if (!su_same_results(&got[i], &cpu[i])) {
            fprintf(stderr, "%s: request %u: GPU and CPU results differ\n",
                    what, i);
            exit(1);
        }
    }
    su_results_free(got, c->n);
}

int main(void)
{
    char p1[] = "/tmp/ft_gpu_replica_XXXXXX", p2[] = "/tmp/ft_gpu_replica_XXXXXX";
    int fd = mkstemp(p1);
    FT_CHECK(fd >= 0);
    close(fd);
    fd = mkstemp(p2);
    FT_CHECK(fd >= 0);
    close(fd);
    uint64_t s = 36;
    su_cases a, b;
    su_lib_params la = {1, 3000, 6}, lb = {2, 500, 4};
    su_cases_make(&a, &s, &la, 24, 6, 40, 64, p1, 0);
    su_cases_make(&b, &s, &lb, 12, 5, 20, 16, p2, 0);
    su_cases_cpu(&a);
    su_cases_cpu(&b);

    ft_engine *e[3], *other, *diff;
    uint64_t used0 = 0, used1 = 0, used3 = 0, total = 0;
    open_gpu(&e[0], a.idx, 0);
    FT_PASS(fti_gpu_memory(&used1, &total, 0));
    FT_CHECK(fti_engine_gpu_index_refs(e[0]) == 1);
    open_gpu(&e[1], a.idx, 0);
    open_gpu(&e[2], a.idx, 0);
    FT_PASS(fti_gpu_memory(&used3, &total, 0));
    for (int i = 0; i < 3; i++)
        FT_CHECK(fti_engine_gpu_index_refs(e[i]) == 3);
    /* Another index, and another child map threshold: copies of their
     * own, the shared one untouched. */
    open_gpu(&other, b.idx, 0);
    FT_CHECK(fti_engine_gpu_index_refs(other) == 1);
    open_gpu(&diff, a.idx, 1);
    FT_CHECK(fti_engine_gpu_index_refs(diff) == 1);
    FT_CHECK(fti_engine_gpu_index_refs(e[0]) == 3);
    for (int i = 0; i < 3; i++)
        answer(e[i], &a, a.res, "replica");
    answer(other, &b, b.res, "other index");
    answer(diff, &a, a.res, "child map 1");
    /* The engine that uploaded the copy goes first; the others keep it. */
    ft_engine_close(e[0]);
    FT_CHECK(fti_engine_gpu_index_refs(e[1]) == 2);
    answer(e[1], &a, a.res, "replica after the first closed");
    ft_engine_close(e[1]);
    FT_CHECK(fti_engine_gpu_index_refs(e[2]) == 1);
    answer(e[2], &a, a.res, "last replica");
    /* A new engine after all but one closed adopts the survivor's copy. */
    open_gpu(&e[0], a.idx, 0);
    FT_CHECK(fti_engine_gpu_index_refs(e[0]) == 2);
    answer(e[0], &a, a.res, "reopened replica");
    ft_engine_close(e[0]);
    ft_engine_close(e[2]);
    ft_engine_close(other);
    ft_engine_close(diff);
    FT_PASS(fti_gpu_memory(&used0, &total, 0));
    printf("gpu_replica_test: 3 engines on one index share one copy; device "
           "memory used %.1f MiB with 1 engine, %.1f MiB with 3, %.1f MiB "
           "after closing all\n", used1 / 1048576.0, used3 / 1048576.0,
           used0 / 1048576.0);
    su_cases_free(&a);
    su_cases_free(&b);
    unlink(p1);
    unlink(p2);
    printf("gpu_replica_test: ok\n");
    return 0;
}
