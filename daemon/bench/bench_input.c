/* bench_input.c - "flashtrie bench": what it measures on: the index
 * (opened, or built from --keys / --gen-keys first) and the request sets,
 * one per beam (read from --requests or generated over the library). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "flashtrie/internal/clock.h"
#include "gen.h"
#include "jsonl.h"

static void req_set_free(req_set *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->mem[i]);
    free(s->mem);
    free(s->r);
    memset(s, 0, sizeof *s);
}

static int req_set_add(req_set *s, const ft_request *q)
{
    if ((s->n & (s->n - 1)) == 0) { /* grow at powers of two */
        size_t cap = s->n ? 2 * s->n : 1;
        ft_request *r = realloc(s->r, cap * sizeof *r);
        if (r == NULL)
            return FT_ENOMEM;
        s->r = r;
        void **m = realloc(s->mem, cap * sizeof *m);
        if (m == NULL)
            return FT_ENOMEM;
        s->mem = m;
    }
    size_t cells = (size_t)q->T * q->K;
    void *m = malloc(cells * (sizeof(uint32_t) + sizeof(float)));
    if (m == NULL)
        return FT_ENOMEM;
    memcpy(m, q->tokens, cells * sizeof(uint32_t));
    memcpy((char *)m + cells * sizeof(uint32_t), q->logp, cells * sizeof(float));
    ft_request c = *q;
    c.tokens = m;
    c.logp = (const float *)((char *)m + cells * sizeof(uint32_t));
    s->r[s->n] = c;
    s->mem[s->n] = m;
    s->n++;
    return FT_OK;
}

/* load_requests reads a docs/specification.md section 7 request file into sets by beam.  It
 * uses the router's JSON Lines parser, the one every tool shares. */
static int load_requests(req_set *sets, int *nsets, const char *path,
                         char *errbuf, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        snprintf(errbuf, errlen, "--requests: %s: %s", path, strerror(errno));
        return FT_EINVAL;
    }
    ft_jsonl_req q;
    ft_jsonl_req_init(&q);
    char *line = NULL, perr[192];
    size_t cap = 0, lineno = 0, bad = 0;
    ssize_t len;
    int rc = FT_OK;
    while (rc == FT_OK && (len = getline(&line, &cap, f)) > 0) {
        lineno++;
        if (ft_jsonl_parse(&q, line, (size_t)len, perr, sizeof perr) != FT_OK) {
            if (bad++ < 3)
                fprintf(stderr, "flashtrie bench: %s:%zu: %s (skipped)\n", path,
                        lineno, perr);
            continue;
        }
        int i = 0;
        while (i < *nsets && sets[i].beam != q.req.beam)
            i++;
        if (i == *nsets) {
            if (*nsets == MAX_LIST) {
                snprintf(errbuf, errlen, "--requests: more than %d distinct beams", MAX_LIST);
                rc = FT_ELIMIT;
                break;
            }
            sets[(*nsets)++].beam = q.req.beam;
        }
        rc = req_set_add(&sets[i], &q.req);
    }
    free(line);
    ft_jsonl_req_free(&q);
    fclose(f);
    if (rc == FT_OK && *nsets == 0) {
        snprintf(errbuf, errlen, "--requests: %s holds no usable request", path);
        rc = FT_EINVAL;
    }
    if (bad)
        fprintf(stderr, "flashtrie bench: %zu of %zu request lines skipped\n", bad, lineno);
    return rc;
}

int bench_open_index(const bench_opts *opt, bench_state *bs)
{
    const char *index = opt->index;
    char err[512], tmp[256] = "";
    if (opt->keys != NULL || opt->gen_keys) {
        char ktmp[256] = "";
        const char *src = opt->keys;
        ft_wl_keys_stats gst;
        memset(&gst, 0, sizeof gst);
        if (opt->gen_keys) {
            /* Generate a .ftk file, then build it as 'flashtrie build'
             * would, so the reported rate is the real builder's. */
            snprintf(ktmp, sizeof ktmp, "%s/ft_bench_keys_XXXXXX.ftk",
                     getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
            int fd = mkstemps(ktmp, 4);
            FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
            if (f == NULL) {
                fprintf(stderr, "flashtrie bench: %s: %s\n", ktmp, strerror(errno));
                return 1;
            }
            ft_wl_keys_opts ko;
            ft_wl_keys_opts_init(&ko);
            ko.n = opt->gen_keys;
            ko.seed = opt->seed;
            int rc = ft_wl_keys_write(&gst, &ko, FT_WL_FTK, ft_cli_file_sink, f);
            if (fclose(f) || rc) {
                fprintf(stderr, "flashtrie bench: generating keys failed: %s\n", ft_strerror(rc ? rc : FT_EIO));
                unlink(ktmp);
                return 1;
            }
            printf("generated %" PRIu64 " keys in %.3f s (%.0f keys/s), %.3f nodes/key\n",
                   gst.keys, gst.seconds, (double)gst.keys / gst.seconds,
                   (double)gst.nodes / (double)gst.keys);
            src = ktmp;
        }
        ft_build_stats bst;
        ft_build_stats_init(&bst);
        int rc = ft_cli_build_temp(tmp, sizeof tmp, src, &bst, err, sizeof err);
        const char *how = "ft_build";
        if (rc == FT_ENOTSUP && opt->gen_keys) {
            /* No keys-file builder in this build: hand the generated,
             * already sorted stream to ft_builder instead. */
            snprintf(tmp, sizeof tmp, "%s/ft_bench_index_XXXXXX",
                     getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
            int fd = mkstemp(tmp);
            if (fd >= 0)
                close(fd);
            ft_wl_keys_opts ko;
            ft_wl_keys_opts_init(&ko);
            ko.n = opt->gen_keys;
            ko.seed = opt->seed;
            double t0 = fti_now();
            rc = ft_wl_build_index(NULL, &ko, tmp, err, sizeof err);
            bst.seconds = fti_now() - t0;
            bst.keys = opt->gen_keys;
            how = "ft_builder, sorted stream (generation included)";
        }
        if (ktmp[0])
            unlink(ktmp);
        if (rc) {
            if (tmp[0])
                unlink(tmp);
            fprintf(stderr, "flashtrie bench: %s\n", err);
            return rc == FT_EINVAL || rc == FT_ENOTSUP ? 2 : 1;
        }
        printf("built %" PRIu64 " keys in %.3f s (%.0f keys/s) with %s\n", bst.keys,
               bst.seconds, (double)bst.keys / bst.seconds, how);
        bs->build = json_object();
        json_object_set_new(bs->build, "method", json_string(how));
        json_object_set_new(bs->build, "keys", json_integer((json_int_t)bst.keys));
        json_object_set_new(bs->build, "seconds", json_real(bst.seconds));
        json_object_set_new(bs->build, "keys_per_s", json_real((double)bst.keys / bst.seconds));
        index = tmp;
    }
    int rc = ft_library_open(&bs->lib, index, 0, err, sizeof err);
    if (tmp[0])
        unlink(tmp); /* the mapping keeps it alive */
    if (rc) {
        fprintf(stderr, "flashtrie bench: %s\n", err);
        return 1;
    }
    /* A manifest's shards run as one group per engine (rows cpu/sN,
     * gpu/sN); --shards splits a single index and has nothing to split
     * here. */
    bs->man_shards = ft_library_is_manifest(bs->lib) ? ft_library_shards(bs->lib) : 0;
    if (bs->man_shards && opt->shards.n) {
        fprintf(stderr, "flashtrie bench: --shards: %s is a manifest of %zu shards "
                        "already (its shards run as a group); --shards splits a "
                        "single index\n", index, bs->man_shards);
        return 2;
    }
    if (bs->man_shards && opt->replicas > 1) {
        fprintf(stderr, "flashtrie bench: --replicas: %s is a manifest (its "
                        "shards run as one group); replicas are of a single "
                        "index's engines\n", index);
        return 2;
    }
    if (bs->man_shards > 8) {
        fprintf(stderr, "flashtrie bench: %s: a manifest of %zu shards; a group "
                        "holds at most 8\n", index, bs->man_shards);
        return 2;
    }
    bs->idx = ft_library_shard(bs->lib, 0);
    ft_index_info_init(&bs->info);
    ft_library_info_get(&bs->info, bs->lib);
    printf("index: %" PRIu64 " keys, %" PRIu64 " nodes, %.3f trie bytes/key", bs->info.keys,
           bs->info.nodes, (double)bs->info.trie_bytes / (double)(bs->info.keys ? bs->info.keys : 1));
    if (bs->man_shards)
        printf(", manifest of %zu shards", bs->man_shards);
    printf("\n");
    return 0;
}

int bench_make_requests(const bench_opts *opt, bench_state *bs)
{
    char err[512] = "";
    int rc;
    if (opt->requests != NULL) {
        rc = load_requests(bs->sets, &bs->nsets, opt->requests, err, sizeof err);
    } else {
        /* The library is sampled once (in parallel) for every beam: the
         * sample depends on the seed and T only. */
        ft_wl_reqs *src = NULL;
        ft_wl_req_opts ro = opt->ro;
        ro.threads = opt->threads;
        double t0 = fti_now();
        rc = ft_wl_reqs_open_library(&src, bs->lib, &ro, err, sizeof err);
        for (int b = 0; b < opt->beams.n && rc == FT_OK; b++) {
            ft_wl_req_opts o = ro;
            o.beam = opt->beams.v[b];
            ft_wl_reqs *g;
            rc = ft_wl_reqs_derive(&g, src, &o, err, sizeof err);
            if (rc)
                break;
            bs->sets[bs->nsets].beam = o.beam;
            for (uint64_t i = 0; i < o.n && rc == FT_OK; i++) {
                ft_request q;
                rc = ft_wl_reqs_make(g, i, 0, &q);
                if (rc == FT_OK)
                    rc = req_set_add(&bs->sets[bs->nsets], &q);
            }
            ft_wl_reqs_close(g);
            bs->nsets++;
        }
        ft_wl_reqs_close(src);
        if (rc == FT_OK)
            printf("requests: %" PRIu64 " per beam for %d beams, made in %.3f s\n", ro.n,
                   bs->nsets, fti_now() - t0);
        if (rc && !err[0])
            snprintf(err, sizeof err, "making requests: %s", ft_strerror(rc));
    }
    if (rc) {
        fprintf(stderr, "flashtrie bench: %s\n", err);
        return rc == FT_EINVAL || rc == FT_ENOTSUP ? 2 : 1;
    }
    return 0;
}

void bench_state_free(bench_state *bs)
{
    json_decref(bs->runs);
    json_decref(bs->skipped);
    json_decref(bs->ratios);
    json_decref(bs->build);
    for (int i = 0; i < bs->nsets; i++)
        req_set_free(&bs->sets[i]);
    ft_library_close(bs->lib);
}
