/* main.c - a program outside the tree: links an installed FlashTrie, checks
 * its version and builds, opens, reads and searches a tiny index (on a
 * CPU engine: the engine code pulls the GPU engine's objects, C++ in a
 * CUDA build, into a static link too). */
#include <stdio.h>
#include <string.h>

#include <flashtrie.h>

int main(int argc, char **argv)
{
    int major, minor, patch;
    ft_version(&major, &minor, &patch);
    if (argc < 3 || strcmp(ft_version_string(), argv[2]) != 0 ||
        strcmp(FT_VERSION_STRING, argv[2]) != 0)
        return fprintf(stderr, "version %s, want %s\n", ft_version_string(),
                       argc > 2 ? argv[2] : "?"), 1;
    char err[256];
    ft_builder *b;
    const uint32_t k1[] = {4, 2}, k2[] = {1};
    if (ft_builder_create(&b, NULL, err, sizeof err) ||
        ft_builder_add(b, k1, 2, 42) || ft_builder_add_auto(b, k2, 1) ||
        ft_builder_finish(b, NULL, argv[1], err, sizeof err))
        return fprintf(stderr, "build: %s\n", err), 1;
    ft_builder_destroy(b);
    ft_index *idx;
    uint64_t v1 = 0, v2 = 9;
    if (ft_index_open(&idx, argv[1], 0, err, sizeof err))
        return fprintf(stderr, "open: %s\n", err), 1;
    int bad = ft_index_lookup(&v1, idx, k1, 2) || ft_index_lookup(&v2, idx, k2, 1);
    if (bad || v1 != 42 || v2 != 1)
        return fprintf(stderr, "lookup: %d %llu %llu\n", bad,
                       (unsigned long long)v1, (unsigned long long)v2), 1;
    ft_engine_opts eo;
    ft_engine_opts_init(&eo);
    eo.kind = FT_ENGINE_CPU;
    eo.threads = 1;
    ft_engine *eng;
    if (ft_engine_open(&eng, idx, &eo, err, sizeof err))
        return fprintf(stderr, "engine: %s\n", err), 1;
    const float logp[] = {-0.5f, -0.25f};
    ft_request req;
    ft_request_init(&req);
    req.T = 2;
    req.K = 1;
    req.tokens = k1;
    req.logp = logp;
    req.beam = 4;
    ft_result res;
    if (ft_result_alloc(&res, 4, 2) || ft_engine_search(eng, &req, &res))
        return fprintf(stderr, "search: %s\n", res.error), 1;
    bad = res.n != 1 || res.hits[0].value != 42 ||
          strcmp(ft_engine_name(eng), "cpu") != 0;
    ft_result_free(&res);
    ft_engine_close(eng);
    ft_index_close(idx);
    if (bad)
        return fprintf(stderr, "search: not the hit 4 2 -> 42\n"), 1;
    printf("flashtrie %d.%d.%d ok\n", major, minor, patch);
    return 0;
}
