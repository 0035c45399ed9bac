/* bench_run.c - "flashtrie bench": the measurements.  Per (engine, beam)
 * each request alone (b = 1) for latency percentiles, then the whole set
 * in batches of each asked size for throughput, after warm-up requests
 * that are not counted; engines are single ones (with --replicas beside
 * them), a manifest's shards as one group, or (--shards) groups over the
 * index split by first token in-process. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "flashtrie/internal/clock.h"

/* ---- statistics ---- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* pctl is the nearest-rank percentile of sorted v. */
static double pctl(const double *v, size_t n, double p)
{
    if (n == 0)
        return 0;
    size_t i = (size_t)ceil(p / 100.0 * (double)n);
    return v[i ? i - 1 : 0];
}

/* fnv1a folds n bytes into h (64-bit FNV-1a). */
static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* results_digest folds one request's answer into h: status, hit count and
 * per hit its tokens, value, score, sigma and order (not key_index, which
 * numbers keys per shard): equal digests mean equal answers, so a group
 * and the unsharded engine can be compared on the same requests. */
static uint64_t results_digest(uint64_t h, const ft_result *r)
{
    int32_t st = r->status;
    h = fnv1a(h, &st, sizeof st);
    h = fnv1a(h, &r->n, sizeof r->n);
    for (uint32_t i = 0; i < r->n && r->status == FT_OK; i++) {
        const ft_hit *x = &r->hits[i];
        h = fnv1a(h, &x->len, sizeof x->len);
        h = fnv1a(h, r->tokens + x->tok_off, x->len * sizeof *r->tokens);
        h = fnv1a(h, &x->value, sizeof x->value);
        h = fnv1a(h, &x->score, sizeof x->score);
        h = fnv1a(h, &x->sigma, sizeof x->sigma);
        h = fnv1a(h, &x->order, sizeof x->order);
    }
    return h;
}

/* What run_engine measures: one engine or one shard group. */
typedef struct searcher {
    ft_engine *eng;
    fti_group *grp;
    int timing; /* print the group's per-step split after each part */
    /* --replicas: rep[0] = eng and more engines over the same index and
     * device; the batch runs drive one each, from a thread of its own */
    ft_engine *rep[MAX_REPLICAS];
    int nrep;
} searcher;

/* One replica's thread of a batch run: takes the next chunk of bs
 * requests until none is left. */
typedef struct rep_run {
    ft_engine *eng;
    const req_set *s;
    uint32_t bs;
    atomic_size_t *next;
    ft_result *res;
    int rc;
    pthread_t th;
} rep_run;

static void *rep_main(void *arg)
{
    rep_run *r = arg;
    for (;;) {
        size_t i = atomic_fetch_add(r->next, r->bs);
        if (i >= r->s->n || r->rc)
            break;
        size_t m = r->s->n - i < r->bs ? r->s->n - i : r->bs;
        r->rc = ft_engine_search_batch(r->eng, &r->s->r[i], m, r->res);
    }
    return NULL;
}

/* run_replicas answers the set in batches of bs on every replica at once
 * (res: max_b results per replica) and returns the first error. */
static int run_replicas(const searcher *sr, const req_set *s, uint32_t bs,
                        ft_result *res, uint32_t max_b)
{
    rep_run r[MAX_REPLICAS];
    atomic_size_t next = 0;
    int started = 0, rc = FT_OK;
    for (int j = 0; j < sr->nrep; j++) {
        r[j] = (rep_run){sr->rep[j], s, bs, &next, res + (size_t)j * max_b,
                         FT_OK, 0};
        if (pthread_create(&r[j].th, NULL, rep_main, &r[j]) != 0) {
            rc = FT_ENOMEM;
            break;
        }
        started++;
    }
    for (int j = 0; j < started; j++) {
        pthread_join(r[j].th, NULL);
        if (rc == FT_OK)
            rc = r[j].rc;
    }
    return rc;
}

static void print_timing(const searcher *sr, const char *what)
{
    char buf[1024];
    if (!sr->timing || sr->grp == NULL)
        return;
    fti_group_timing_report(sr->grp, buf, sizeof buf);
    if (buf[0])
        printf("  %s: %s", what, buf);
}

/* bench_print_admission (--timing) times the host work every engine's search
 * does before the engine: validation and preparation, per request of each
 * set (the best of three passes over the set). */
void bench_print_admission(const req_set *sets, int nsets)
{
    fti_prep *p = NULL;
    if (fti_prep_create(&p) != FT_OK)
        return;
    for (int i = 0; i < nsets; i++) {
        const req_set *s = &sets[i];
        double bv = 0, bp = 0;
        char err[256];
        for (int pass = 0; pass < 3 && s->n; pass++) {
            double tv = 0, tp = 0;
            for (size_t j = 0; j < s->n; j++) {
                const fti_prepared *q;
                double t0 = fti_now();
                int rc = ft_request_validate(&s->r[j], 0, err, sizeof err);
                double t1 = fti_now();
                if (rc == FT_OK)
                    (void)fti_request_prepare(&q, p, &s->r[j]);
                tv += t1 - t0;
                tp += fti_now() - t1;
            }
            if (pass == 0 || tv < bv)
                bv = tv;
            if (pass == 0 || tp < bp)
                bp = tp;
        }
        if (s->n)
            printf("host admission, beam %u: validate %.1f us, prepare %.1f "
                   "us per request\n", s->beam, bv / (double)s->n * 1e6,
                   bp / (double)s->n * 1e6);
    }
    fti_prep_destroy(p);
}

static int search_batch(const searcher *sr, const ft_request *r, size_t n,
                        ft_result *res)
{
    if (sr->grp)
        return fti_group_search_batch(sr->grp, r, n, res);
    return ft_engine_search_batch(sr->eng, r, n, res);
}

/* progress prints a line on stderr at most every 3 s while a long run
 * goes on (long work shows progress; a short one prints nothing). */
static void progress(double *last, const req_set *s, const char *phase,
                     size_t done)
{
    double t = fti_now();
    if (*last == 0) {
        *last = t;
        return;
    }
    if (t - *last < 3.0)
        return;
    *last = t;
    fprintf(stderr, "bench: beam %u, %s: %zu of %zu requests\n",
            s->n ? s->r[0].beam : 0, phase, done, s->n);
}

static int run_engine(run_stats *rs, const searcher *eng, const req_set *s,
                      const u32_list *batches, uint32_t warmup)
{
    double last = 0;
    uint32_t max_b = 1, max_res = 1, max_t = 1;
    for (int i = 0; i < batches->n; i++)
        if (batches->v[i] > max_b)
            max_b = batches->v[i];
    for (size_t i = 0; i < s->n; i++) {
        uint32_t nr = s->r[i].results ? s->r[i].results : s->r[i].beam;
        if (nr > max_res)
            max_res = nr;
        if (s->r[i].T > max_t)
            max_t = s->r[i].T;
    }
    uint32_t nres = max_b * (uint32_t)(eng->nrep > 1 ? eng->nrep : 1);
    ft_result *res = calloc(nres, sizeof *res);
    double *lat = calloc(s->n ? s->n : 1, sizeof *lat);
    int rc = res && lat ? FT_OK : FT_ENOMEM;
    for (uint32_t i = 0; i < nres && rc == FT_OK; i++)
        rc = ft_result_alloc(&res[i], max_res, max_t);
    if (rc)
        goto out;
    for (uint32_t w = 0; w < warmup && s->n; w++) {
        rc = search_batch(eng, &s->r[w % s->n], 1, res);
        if (rc)
            goto out;
    }
    size_t hits = 0, rejected = 0;
    rs->digest = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < s->n; i++) {
        double t0 = fti_now();
        rc = search_batch(eng, &s->r[i], 1, res);
        lat[i] = (fti_now() - t0) * 1e3;
        if (rc)
            goto out;
        rs->digest = results_digest(rs->digest, &res[0]);
        if (res[0].status)
            rejected++;
        hits += res[0].n;
        progress(&last, s, "b=1", i + 1);
    }
    print_timing(eng, "b=1");
    double sum = 0;
    for (size_t i = 0; i < s->n; i++)
        sum += lat[i];
    qsort(lat, s->n, sizeof *lat, cmp_double);
    rs->n = s->n;
    rs->rejected = rejected;
    rs->hits = s->n ? (double)hits / (double)s->n : 0;
    rs->mean = s->n ? sum / (double)s->n : 0;
    rs->p50 = pctl(lat, s->n, 50);
    rs->p90 = pctl(lat, s->n, 90);
    rs->p95 = pctl(lat, s->n, 95);
    rs->p99 = pctl(lat, s->n, 99);
    for (int b = 0; b < batches->n; b++) {
        uint32_t bs = batches->v[b];
        double t0 = fti_now();
        if (eng->nrep > 1) {
            if ((rc = run_replicas(eng, s, bs, res, max_b)) != FT_OK)
                goto out;
        } else {
            for (size_t i = 0; i < s->n; i += bs) {
                size_t m = s->n - i < bs ? s->n - i : bs;
                rc = search_batch(eng, &s->r[i], m, res);
                if (rc)
                    goto out;
                char ph[32];
                snprintf(ph, sizeof ph, "b=%u", bs);
                progress(&last, s, ph, i + m);
            }
        }
        double dt = fti_now() - t0;
        rs->qps[b] = dt > 0 ? (double)s->n / dt : 0;
        char what[32];
        snprintf(what, sizeof what, "b=%u", bs);
        print_timing(eng, what);
    }
    rs->ran = 1;
out:
    if (res)
        for (uint32_t i = 0; i < nres; i++)
            ft_result_free(&res[i]);
    free(res);
    free(lat);
    return rc;
}

/* ---- in-process shards (--shards) ---- */

/* split_index splits idx by first token into ns shards with ft_split (the
 * public split of docs/sharding.md) into a temporary folder, opens them as
 * a library and removes the files (the mappings keep them alive).  The
 * shards are ft_library_shard(*lib, s). */
static int split_index(ft_library **lib, const ft_index *idx, size_t ns,
                       char *err, size_t errlen)
{
    char dir[256], man[300];
    snprintf(dir, sizeof dir, "%s/ft_bench_shards_XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (mkdtemp(dir) == NULL) {
        snprintf(err, errlen, "--shards: %s: %s", dir, strerror(errno));
        return FT_EIO;
    }
    snprintf(man, sizeof man, "%s/bench.ftm", dir);
    ft_split_opts so = {man, (uint32_t)ns, 0, 0};
    ft_split_stats st;
    int rc = ft_split(&st, idx, &so, err, errlen);
    if (rc == FT_OK)
        rc = ft_library_open(lib, man, 0, err, errlen);
    if (rc == FT_OK) {
        for (size_t s = 0; s < ft_library_shards(*lib); s++) {
            ft_library_shard_info si;
            char path[600];
            if (ft_library_shard_get(&si, *lib, s) == FT_OK) {
                snprintf(path, sizeof path, "%s/%s", dir, si.name);
                unlink(path);
            }
        }
    }
    unlink(man);
    rmdir(dir);
    return rc;
}

/* open_group opens the group of shards sh[0..nsh) with the engine options
 * eo and the group options of the command line; devs[j] is shard j's
 * device under --devices. */
static int open_group(fti_group **grp, const ft_index *const *sh, size_t nsh,
                      const ft_engine_opts *eo, const bench_opts *opt,
                      const int *devs, char *err, size_t errlen)
{
    fti_group_opts go;
    fti_group_opts_init(&go);
    go.exchange = opt->xchg;
    go.split_grid = !opt->full_grid;
    go.shared_lists = !opt->copy_lists;
    go.shard_mode = opt->shard_mode;
    go.devices = opt->devlist.n ? devs : NULL;
    return fti_group_open_ex(grp, sh, nsh, eo, &go, err, errlen);
}

void bench_run_engines(const bench_opts *opt, bench_state *bs)
{
    uint32_t max_beam = 1, max_k = 1, max_t = 1, max_b = 1;
    for (int i = 0; i < bs->nsets; i++)
        for (size_t j = 0; j < bs->sets[i].n; j++) {
            const ft_request *q = &bs->sets[i].r[j];
            max_beam = q->beam > max_beam ? q->beam : max_beam;
            max_k = q->K > max_k ? q->K : max_k;
            max_t = q->T > max_t ? q->T : max_t;
        }
    for (int b = 0; b < opt->batches.n; b++)
        max_b = opt->batches.v[b] > max_b ? opt->batches.v[b] : max_b;
    char err[512];
    int rc;
    memset(bs->st, 0, sizeof bs->st);
    bs->runs = json_array();
    bs->skipped = json_object();
    snprintf(bs->eng_names[0], sizeof bs->eng_names[0], "cpu");
    snprintf(bs->eng_names[1], sizeof bs->eng_names[1], "gpu");
    for (int j = 0; j < opt->shards.n; j++)
        snprintf(bs->eng_names[2 + j], sizeof bs->eng_names[2 + j], "%s/s%u",
                 opt->use_gpu ? "gpu" : "cpu", opt->shards.v[j]);
    if (bs->man_shards)
        for (int e = 0; e < 2; e++)
            snprintf(bs->eng_names[e], sizeof bs->eng_names[e], "%s/s%zu", e ? "gpu" : "cpu",
                     bs->man_shards);
    /* Table labels: the engine kinds, or the groups' names. */
    memcpy(bs->row_names, bs->eng_names, sizeof bs->row_names);
    for (int e = 0; e < 2 + opt->shards.n; e++) {
        if ((e == 0 && !opt->use_cpu) || (e == 1 && !opt->use_gpu))
            continue;
        ft_engine_opts eo;
        ft_engine_opts_init(&eo);
        /* Groups are of GPU engines, or of CPU engines without --engine gpu. */
        eo.kind = e == 0 || (e >= 2 && !opt->use_gpu) ? FT_ENGINE_CPU : FT_ENGINE_GPU;
        searcher sr = {NULL, NULL, opt->timing, {NULL}, 0};
        ft_library *shlib = NULL;
        eo.timing = opt->timing;
        const ft_index *sh[8];
        size_t nsh = e >= 2 ? opt->shards.v[e - 2] : 0;
        /* --devices: shard j on devlist[j % n] */
        int gdevs[8];
        for (int j = 0; j < 8; j++)
            gdevs[j] = opt->devlist.n ? (int)opt->devlist.v[j % opt->devlist.n] : opt->device;
        eo.threads = opt->threads;
        eo.device = opt->device;
        eo.max_batch = max_b;
        eo.fuse_term = opt->fuse_term;
        eo.round1 = opt->round1;
        eo.round1_items = opt->round1_items;
        eo.launch_graph = opt->launch_graph;
        eo.select_local_max = opt->local_max;
        eo.prefetch = opt->prefetch;
        eo.values_on_device = opt->values_host ? UINT32_MAX : 0;
        eo.select_local_cache = opt->local_cache;
        eo.max_beam = max_beam;
        eo.max_k = max_k;
        eo.max_t = max_t;
        err[0] = 0;
        if (bs->man_shards && e < 2) {
            nsh = bs->man_shards;
            for (size_t j = 0; j < nsh; j++)
                sh[j] = ft_library_shard(bs->lib, j);
            rc = open_group(&sr.grp, sh, nsh, &eo, opt, gdevs, err,
                            sizeof err);
        } else if (nsh) {
            double t0 = fti_now();
            rc = split_index(&shlib, bs->idx, nsh, err, sizeof err);
            if (rc) {
                fprintf(stderr, "flashtrie bench: %s\n", err);
                bs->status = 1;
                continue;
            }
            nsh = ft_library_shards(shlib) < 8 ? ft_library_shards(shlib) : 8;
            for (size_t j = 0; j < nsh; j++)
                sh[j] = ft_library_shard(shlib, j);
            printf("%s: split into %zu shards by first token in %.1f s (keys:", bs->eng_names[e],
                   nsh, fti_now() - t0);
            for (size_t j = 0; j < nsh; j++)
                printf(" %" PRIu64, ft_index_keys(sh[j]));
            printf(")\n");
            rc = open_group(&sr.grp, sh, nsh, &eo, opt, gdevs, err,
                            sizeof err);
        } else {
            rc = ft_engine_open(&sr.eng, bs->idx, &eo, err, sizeof err);
            /* --replicas: more engines beside it on the same GPU */
            sr.rep[0] = sr.eng;
            sr.nrep = 1;
            for (int j = 1; rc == FT_OK && e < 2 && j < opt->replicas; j++) {
                rc = ft_engine_open(&sr.rep[j], bs->idx, &eo, err, sizeof err);
                if (rc == FT_OK)
                    sr.nrep++;
            }
            if (rc && sr.eng) {
                for (int j = 0; j < sr.nrep; j++)
                    ft_engine_close(sr.rep[j]);
                sr.eng = NULL;
                sr.nrep = 0;
            }
        }
        if (rc && shlib) {
            ft_library_close(shlib);
            shlib = NULL;
        }
        if (rc == FT_ENODEV || rc == FT_ENOTSUP) {
            /* the engine's reason names the error itself ("no usable
             * GPU: ...") or says only why */
            const char *what = ft_strerror(rc);
            int named = !strncmp(err, what, strlen(what));
            printf("%s engine: skipped (%s%s%s)\n", bs->eng_names[e],
                   named ? "" : what, err[0] && !named ? ": " : "", err);
            json_object_set_new(bs->skipped, bs->eng_names[e], json_string(ft_strerror(rc)));
            continue;
        }
        if (rc) {
            fprintf(stderr, "flashtrie bench: opening the %s engine: %s\n", bs->eng_names[e], err);
            bs->status = 1;
            continue;
        }
        if (!nsh && sr.nrep > 1) {
            snprintf(bs->eng_names[e], sizeof bs->eng_names[e], "%s/r%d",
                     ft_engine_name(sr.eng), sr.nrep);
            snprintf(bs->row_names[e], sizeof bs->row_names[e], "%s", bs->eng_names[e]);
        }
        else if (!nsh)
            snprintf(bs->eng_names[e], sizeof bs->eng_names[e], "%s", ft_engine_name(sr.eng));
        if (sr.grp && eo.kind == FT_ENGINE_GPU) {
            /* where the shards run and how they exchange: what a
             * multi-GPU row measures (docs/sharding.md) */
            fti_exchange gx = fti_group_exchange(sr.grp);
            printf("%s: shards on GPUs", bs->eng_names[e]);
            for (size_t j = 0; j < nsh; j++)
                printf("%s%d", j ? "," : " ", fti_engine_device(fti_group_engine(sr.grp, j)));
            printf(", exchange %s\n", gx == FTI_EXCHANGE_NCCL_DEVICE ? "nccl-device"
                                      : gx == FTI_EXCHANGE_NCCL ? "nccl"
                                      : gx == FTI_EXCHANGE_DEVICE ? "device"
                                      : gx == FTI_EXCHANGE_KERNEL ? "kernel"
                                      : gx == FTI_EXCHANGE_FOREST ? "forest" : "host");
        }
        /* What the rows time, so that another harness's figure can be
         * held against them (ops/bench/daemon_bench.c's "sized" engine is
         * opened the same way). */
        printf("timed %s: b = 1, the wall time of one %s call of one "
               "request (validation, the duplicate check while the engine "
               "runs, the search, values), after %u warm-up requests, "
               "results reused; the table's mean and percentiles; engines "
               "sized to the requests: max_batch %u, beam %u, K %u, T %u\n",
               bs->row_names[e],
               sr.grp ? "fti_group_search_batch" : "ft_engine_search_batch",
               opt->warmup, eo.max_batch, eo.max_beam, eo.max_k, eo.max_t);
        for (int i = 0; i < bs->nsets; i++) {
            run_stats *rs = &bs->st[e][i];
            rs->beam = bs->sets[i].beam;
            rs->K = bs->sets[i].n ? bs->sets[i].r[0].K : 0;
            rs->T = bs->sets[i].n ? bs->sets[i].r[0].T : 0;
            rc = run_engine(rs, &sr, &bs->sets[i], &opt->batches, opt->warmup);
            if (rc) {
                fprintf(stderr, "flashtrie bench: %s engine failed: %s\n", bs->eng_names[e], ft_strerror(rc));
                bs->status = 1;
                break;
            }
            json_array_append_new(bs->runs, bench_stats_json(rs, bs->eng_names[e], &opt->batches));
        }
        if (opt->timing && !nsh && sr.eng) {
            char buf[4096];
            ft_engine_timing_report(sr.eng, buf, sizeof buf);
            printf("%s", buf);
        }
        if (nsh) {
            fti_group_close(sr.grp);
            ft_library_close(shlib);
            shlib = NULL;
        } else {
            for (int j = 1; j < sr.nrep; j++)
                ft_engine_close(sr.rep[j]);
            ft_engine_close(sr.eng);
        }
    }
}
