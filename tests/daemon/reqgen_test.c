/*
 * reqgen_test.c - request generation (router/workload/) made parallel:
 * the jumped random stream equals stepping; sampling an index with 1, 2
 * or 5 threads gives the requests the serial sampler gave (digests taken
 * from that sampler before it was replaced); a manifest of the same keys
 * gives the same requests; derived sources equal fresh ones.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flashtrie.h"
#include "workload.h"

#define CHECK(c)                                                              \
    do {                                                                      \
        if (!(c)) {                                                           \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__,  \
                    #c);                                                      \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

/* Digests of 40 requests (seed 9, sample 5000, T 8) over the 400,000-key
 * library of seed 3, from the serial sampler (one ft_index_prefix pass
 * with one random stream) that the parallel one replaced.  The sample of
 * 5000 keys makes the key reservoir draw, 400,000 keys make every
 * position's token reservoir draw. */
#define GOLD_B16 0xc2e48511b7a8d0d3ull
#define GOLD_B32 0x39d1390a4f6d0a72ull

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t digest(ft_wl_reqs *g, uint64_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint64_t i = 0; i < n; i++) {
        ft_request q;
        CHECK(ft_wl_reqs_make(g, i, 0, &q) == FT_OK);
        size_t cells = (size_t)q.T * q.K;
        h = fnv(h, &q.T, sizeof q.T);
        h = fnv(h, &q.K, sizeof q.K);
        h = fnv(h, &q.beam, sizeof q.beam);
        h = fnv(h, &q.results, sizeof q.results);
        h = fnv(h, q.tokens, cells * sizeof *q.tokens);
        h = fnv(h, q.logp, cells * sizeof *q.logp);
    }
    return h;
}

static void test_jump(void)
{
    static const uint64_t ns[] = {0, 1, 2, 511, 512, 513, 1000, 77777,
                                  (1u << 20) + 5};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        ft_wl_rng a, b;
        ft_wl_rng_seed(&a, 42 + i);
        b = a;
        for (uint64_t k = 0; k < ns[i]; k++)
            ft_wl_next(&a);
        ft_wl_rng_jump(&b, ns[i]);
        CHECK(memcmp(a.s, b.s, sizeof a.s) == 0);
        CHECK(ft_wl_next(&a) == ft_wl_next(&b));
    }
    /* Far jumps compose: 10^12 + 12345 at once, or in two. */
    ft_wl_rng a, b;
    ft_wl_rng_seed(&a, 7);
    b = a;
    ft_wl_rng_jump(&a, 1000000000000ull + 12345);
    ft_wl_rng_jump(&b, 1000000000000ull);
    ft_wl_rng_jump(&b, 12345);
    CHECK(memcmp(a.s, b.s, sizeof a.s) == 0);
    ft_wl_rng c;
    ft_wl_rng_seed(&c, 7);
    CHECK(memcmp(a.s, c.s, sizeof a.s) != 0);
}

static void opts(ft_wl_req_opts *o, uint32_t beam, int threads)
{
    ft_wl_req_opts_init(o);
    o->n = 40;
    o->beam = beam;
    o->seed = 9;
    o->sample = 5000;
    o->threads = threads;
}

static void test_sampling(const char *dir)
{
    char path[512], man[512], err[256];
    snprintf(path, sizeof path, "%s/g.fti", dir);
    ft_wl_keys_opts ko;
    ft_wl_keys_opts_init(&ko);
    ko.n = 400000;
    ko.seed = 3;
    CHECK(ft_wl_build_index(NULL, &ko, path, err, sizeof err) == FT_OK);
    ft_index *idx;
    CHECK(ft_index_open(&idx, path, 0, err, sizeof err) == FT_OK);

    /* Any thread count: the serial sampler's requests. */
    static const int threads[] = {1, 2, 5};
    ft_wl_reqs *first = NULL;
    for (size_t i = 0; i < 3; i++) {
        ft_wl_req_opts o;
        opts(&o, 16, threads[i]);
        ft_wl_reqs *g;
        CHECK(ft_wl_reqs_open(&g, idx, &o, err, sizeof err) == FT_OK);
        uint64_t h = digest(g, o.n);
        if (h != GOLD_B16)
            fprintf(stderr, "threads %d: digest %016" PRIx64 "\n", threads[i], h);
        CHECK(h == GOLD_B16);
        if (first == NULL)
            first = g;
        else
            ft_wl_reqs_close(g);
    }

    /* A derived source (beam 32) equals a fresh one, and the sample
     * outlives the source it came from. */
    ft_wl_req_opts o;
    opts(&o, 32, 2);
    ft_wl_reqs *d;
    CHECK(ft_wl_reqs_derive(&d, first, &o, err, sizeof err) == FT_OK);
    ft_wl_reqs_close(first);
    CHECK(digest(d, o.n) == GOLD_B32);
    ft_wl_req_opts bad = o;
    bad.seed = 10;
    ft_wl_reqs *x;
    CHECK(ft_wl_reqs_derive(&x, d, &bad, err, sizeof err) == FT_EINVAL);
    CHECK(strstr(err, "seed, T and sample") != NULL);
    ft_wl_reqs_close(d);

    /* Writing: 1 and 3 threads (rounds of 32 requests per thread, so
     * several rounds and a short last one) give the same file. */
    char *text[2] = {NULL, NULL};
    size_t len[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        opts(&o, 16, k ? 3 : 1);
        o.n = 201;
        ft_wl_reqs *g;
        CHECK(ft_wl_reqs_open(&g, idx, &o, err, sizeof err) == FT_OK);
        FILE *f = open_memstream(&text[k], &len[k]);
        CHECK(f != NULL);
        CHECK(ft_wl_reqs_write(g, f, err, sizeof err) == FT_OK);
        CHECK(fclose(f) == 0);
        ft_wl_reqs_close(g);
    }
    CHECK(len[0] > 0 && len[0] == len[1] && memcmp(text[0], text[1], len[0]) == 0);
    size_t lines = 0;
    for (size_t i = 0; i < len[0]; i++)
        lines += text[0][i] == '\n';
    CHECK(lines == 201);
    CHECK(strncmp(text[0], "{\"id\":0,", 8) == 0);
    free(text[0]);
    free(text[1]);

    /* A manifest of three shards: the same requests as the index. */
    snprintf(man, sizeof man, "%s/g.ftm", dir);
    ft_split_opts so = {man, 3, 0, 0};
    ft_split_stats st;
    CHECK(ft_split(&st, idx, &so, err, sizeof err) == FT_OK);
    ft_library *lib;
    CHECK(ft_library_open(&lib, man, 0, err, sizeof err) == FT_OK);
    CHECK(ft_library_shards(lib) == 3);
    for (int t = 1; t <= 3; t += 2) {
        opts(&o, 16, t);
        ft_wl_reqs *g;
        CHECK(ft_wl_reqs_open_library(&g, lib, &o, err, sizeof err) == FT_OK);
        CHECK(digest(g, o.n) == GOLD_B16);
        ft_wl_reqs_close(g);
    }
    for (size_t s = 0; s < ft_library_shards(lib); s++) {
        ft_library_shard_info si;
        CHECK(ft_library_shard_get(&si, lib, s) == FT_OK);
        snprintf(path, sizeof path, "%s/%s", dir, si.name);
        unlink(path);
    }
    ft_library_close(lib);
    unlink(man);
    ft_index_close(idx);
    snprintf(path, sizeof path, "%s/g.fti", dir);
    unlink(path);
}

int main(void)
{
    char dir[] = "/tmp/ft_reqgen_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    test_jump();
    test_sampling(dir);
    rmdir(dir);
    printf("ok\n");
    return 0;
}
