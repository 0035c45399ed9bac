/*
 * cmd_bench.c - "flashtrie bench": latency and throughput of the engines
 * over a request set, per beam width, with a JSON report.
 *
 * Per (engine, beam) it measures each request alone (b = 1) for latency
 * percentiles, then the whole set in batches of each asked size for
 * throughput.  Warm-up requests run first and are not counted.
 *
 * --shards N,...: also a shard group of N GPU engines per count, over the
 * index split by first token into N shards by ft_split (balanced trie
 * bytes; temporary files), exchanging on the one GPU (or as --exchange
 * says); --devices D,... puts shard j's engine on GPU D[j % n] (the
 * manifest's groups too), so that N shards run on N GPUs.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "flashtrie.h"
#include "jsonl.h"
#include "gen.h"
#include "workload.h"

#define MAX_LIST 16
#define MAX_REPLICAS 8

typedef struct u32_list {
    uint32_t v[MAX_LIST];
    int n;
} u32_list;

static int parse_list(const char *opt, const char *s, uint32_t lo, uint32_t hi,
                      u32_list *out)
{
    out->n = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (out->n == MAX_LIST) {
            fprintf(stderr, "flashtrie bench: %s: at most %d values\n", opt, MAX_LIST);
            return -1;
        }
        if (ft_cli_parse_u32(opt, tok, lo, hi, &out->v[out->n]))
            return -1;
        out->n++;
    }
    if (out->n == 0) {
        fprintf(stderr, "flashtrie bench: %s: empty list\n", opt);
        return -1;
    }
    return 0;
}

/* An "N|off" option: off is UINT32_MAX (ft_engine_opts' "never"), else
 * an integer in lo..hi; non-zero after a message naming the option. */
static int bench_n_or_off(const char *opt, const char *arg, uint32_t lo,
                          uint32_t hi, uint32_t *out)
{
    if (strcmp(arg, "off") == 0) {
        *out = UINT32_MAX;
        return 0;
    }
    return ft_cli_parse_u32(opt, arg, lo, hi, out);
}

/* A two-way option's value: 0 for a, 1 for b, else -1 after a message
 * naming the option. */
static int bench_choice(const char *opt, const char *arg, const char *a,
                        const char *b)
{
    if (strcmp(arg, a) == 0)
        return 0;
    if (strcmp(arg, b) == 0)
        return 1;
    fprintf(stderr, "flashtrie bench: %s: expected %s or %s, got '%s'\n", opt,
            a, b, arg);
    return -1;
}

/* A request set that owns its grids. */
typedef struct req_set {
    uint32_t beam; /* the beam every request of the set asks for */
    size_t n;
    ft_request *r;
    void **mem;    /* owned grid memory per request */
} req_set;

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

/* ---- machine facts for the report ---- */

static void cpu_model(char *out, size_t len)
{
    snprintf(out, len, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "model name", 10)) {
            char *p = strchr(line, ':');
            if (p) {
                p += 1 + (p[1] == ' ');
                p[strcspn(p, "\n")] = 0;
                p[len - 1 < 200 ? len - 1 : 200] = 0;
                memcpy(out, p, strlen(p) + 1);
            }
            break;
        }
    }
    fclose(f);
}

/* gpu_model reads the first GPU's name from the NVIDIA driver's /proc
 * files, so the report names the GPU even in a build without CUDA. */
static void gpu_model(char *out, size_t len)
{
    out[0] = 0;
    FILE *p = popen("cat /proc/driver/nvidia/gpus/*/information 2>/dev/null", "r");
    if (p == NULL)
        return;
    char line[512];
    while (fgets(line, sizeof line, p)) {
        if (!strncmp(line, "Model:", 6) && !out[0]) {
            char *s = line + 6;
            while (*s == ' ' || *s == '\t')
                s++;
            s[strcspn(s, "\n")] = 0;
            snprintf(out, len, "%.200s", s);
        }
    }
    pclose(p);
}

/* ---- statistics ---- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

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

typedef struct run_stats {
    int ran;
    uint32_t beam, K, T;
    size_t n, rejected;
    double mean, p50, p90, p95, p99, hits;
    double qps[MAX_LIST];
    uint64_t digest; /* FNV-1a of the b=1 results (results_digest) */
} run_stats;

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
    ft_group *grp;
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
    ft_group_timing_report(sr->grp, buf, sizeof buf);
    if (buf[0])
        printf("  %s: %s", what, buf);
}

/* print_admission (--timing) times the host work every engine's search
 * does before the engine: validation and preparation, per request of each
 * set (the best of three passes over the set). */
static void print_admission(const req_set *sets, int nsets)
{
    ft_prep *p = NULL;
    if (ft_prep_create(&p) != FT_OK)
        return;
    for (int i = 0; i < nsets; i++) {
        const req_set *s = &sets[i];
        double bv = 0, bp = 0;
        char err[256];
        for (int pass = 0; pass < 3 && s->n; pass++) {
            double tv = 0, tp = 0;
            for (size_t j = 0; j < s->n; j++) {
                const ft_prepared *q;
                double t0 = now_s();
                int rc = ft_request_validate(&s->r[j], 0, err, sizeof err);
                double t1 = now_s();
                if (rc == FT_OK)
                    (void)ft_request_prepare(&q, p, &s->r[j]);
                tv += t1 - t0;
                tp += now_s() - t1;
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
    ft_prep_destroy(p);
}

static int search_batch(const searcher *sr, const ft_request *r, size_t n,
                        ft_result *res)
{
    if (sr->grp)
        return ft_group_search_batch(sr->grp, r, n, res);
    return ft_engine_search_batch(sr->eng, r, n, res);
}

/* progress prints a line on stderr at most every 3 s while a long run
 * goes on (long work shows progress; a short one prints nothing). */
static void progress(double *last, const req_set *s, const char *phase,
                     size_t done)
{
    double t = now_s();
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
        double t0 = now_s();
        rc = search_batch(eng, &s->r[i], 1, res);
        lat[i] = (now_s() - t0) * 1e3;
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
        double t0 = now_s();
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
        double dt = now_s() - t0;
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

/* load_requests reads a SPEC section 7 request file into sets by beam.  It
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

static json_t *stats_json(const run_stats *r, const char *engine,
                          const u32_list *batches)
{
    json_t *o = json_object();
    json_object_set_new(o, "engine", json_string(engine));
    json_object_set_new(o, "beam", json_integer(r->beam));
    json_object_set_new(o, "K", json_integer(r->K));
    json_object_set_new(o, "T", json_integer(r->T));
    json_object_set_new(o, "requests", json_integer((json_int_t)r->n));
    json_object_set_new(o, "rejected", json_integer((json_int_t)r->rejected));
    json_object_set_new(o, "hits_per_request", json_real(r->hits));
    json_t *l = json_object();
    json_object_set_new(l, "mean", json_real(r->mean));
    json_object_set_new(l, "p50", json_real(r->p50));
    json_object_set_new(l, "p90", json_real(r->p90));
    json_object_set_new(l, "p95", json_real(r->p95));
    json_object_set_new(l, "p99", json_real(r->p99));
    json_object_set_new(o, "latency_ms_b1", l);
    json_t *q = json_object();
    for (int b = 0; b < batches->n; b++) {
        char k[16];
        snprintf(k, sizeof k, "%u", batches->v[b]);
        json_object_set_new(q, k, json_real(r->qps[b]));
    }
    json_object_set_new(o, "throughput_qps", q);
    char d[24];
    snprintf(d, sizeof d, "%016" PRIx64, r->digest);
    json_object_set_new(o, "results_fnv1a64", json_string(d));
    return o;
}

/* ---- the report folder (--report DIR/) ---- */

/* report_is_dir tells what --report names: a path ending in ".json" is the
 * report file itself (the original form, kept as it was); an existing
 * folder, or a path ending in '/', is a folder that gets results.json, a
 * gnuplot script and the plots.  Any other path stays a file, as before. */
static int report_is_dir(const char *r)
{
    size_t n = strlen(r);
    struct stat sb;
    if (n >= 5 && !strcmp(r + n - 5, ".json"))
        return 0;
    if (stat(r, &sb) == 0)
        return S_ISDIR(sb.st_mode);
    return n > 0 && r[n - 1] == '/';
}

/* gp_str writes s as a gnuplot single-quoted string.  Inside those quotes
 * gnuplot knows one escape only, '' for a quote, so doubling quotes makes
 * any path safe; control characters (which would end the line) become
 * spaces, and report_prepare refuses a folder name holding any. */
static void gp_str(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputc('\'', f);
        fputc((unsigned char)*s < 0x20 || *s == 0x7f ? ' ' : *s, f);
    }
    fputc('\'', f);
}

/* The plots see the run as st[row][set]: rows 0 cpu, 1 gpu, 2 + j the
 * group of shards->v[j] engines. */
typedef struct plot_in {
    const char *dir;
    run_stats (*st)[MAX_LIST];
    int nsets;
    const u32_list *batches, *shards;
    int shard_gpu; /* the groups are of GPU engines */
    size_t man_shards; /* rows 0 and 1 are groups over a manifest's shards */
    uint64_t keys, trie_bytes;
    const char *cpu, *gpu;
    long cores;
} plot_in;

/* gp_axis sets a log scale on an axis whose values span more than 20x
 * (a decade and more reads better on a log axis), else a linear one from
 * zero. */
static void gp_axis(FILE *f, const char *ax, double lo, double hi)
{
    if (lo > 0 && hi / lo > 20)
        fprintf(f, "set logscale %s\nset %srange [*:*]\n", ax, ax);
    else
        fprintf(f, "unset logscale %s\nset %srange [0:*]\n", ax, ax);
}

/* gp_beam_axis puts the x axis on the beam widths that ran, with a log
 * scale when they span 8x or more (100..1000 are then evenly spread). */
static void gp_beam_axis(FILE *f, const plot_in *p)
{
    uint32_t lo = UINT32_MAX, hi = 0;
    fprintf(f, "set xlabel 'beam width (hypotheses kept per step)'\nset xtics (");
    for (int i = 0; i < p->nsets; i++) {
        uint32_t b = p->st[0][i].ran ? p->st[0][i].beam : p->st[1][i].beam;
        for (int e = 0; e < 2 + p->shards->n && !b; e++)
            b = p->st[e][i].beam;
        fprintf(f, "%s%u", i ? ", " : "", b);
        lo = b < lo ? b : lo;
        hi = b > hi ? b : hi;
    }
    fprintf(f, ")\n");
    if (lo > 0 && hi >= 8 * lo)
        fprintf(f, "set logscale x\nset xrange [%g:%g]\n", lo / 1.15, hi * 1.15);
    else
        fprintf(f, "unset logscale x\nset xrange [%g:%g]\n", lo * 0.9, hi * 1.1);
}

enum { PLOT_SPEEDUP = 1, PLOT_SHARDS = 2 };

static const char *row_title(const plot_in *p, int e, char *buf, size_t len)
{
    if (e < 2 && p->man_shards)
        snprintf(buf, len, "%zu %s shards", p->man_shards, e ? "GPU" : "CPU");
    else if (e < 2)
        snprintf(buf, len, "%s", e ? "GPU" : "CPU");
    else
        snprintf(buf, len, "%u %s shards", p->shards->v[e - 2], p->shard_gpu ? "GPU" : "CPU");
    return buf;
}

/* write_plot_script writes DIR/plots.gp: the numbers as inline data blocks
 * and one plot per PNG, so that 'gnuplot DIR/plots.gp' redraws them
 * without flashtrie.  *drawn gets PLOT_SPEEDUP and PLOT_SHARDS for the
 * optional plots it holds.  Returns 0, or -1 with errno set. */
static int write_plot_script(const plot_in *p, const char *path, int *drawn)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    char t[64];
    *drawn = 0;
    fprintf(f, "# plots.gp - the plots of a 'flashtrie bench --report' folder.\n"
               "# Redraw: gnuplot plots.gp (or gnuplot -e \"dir='OTHER'\" plots.gp\n"
               "# after moving the folder).  The data are the numbers of results.json.\n"
               "if (!exists(\"dir\")) dir = ");
    gp_str(f, p->dir);
    fprintf(f, "\nif (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
               "    set terminal pngcairo size 900,520 font 'sans,10' noenhanced\n"
               "} else {\n"
               "    set terminal png size 900,520 noenhanced\n"
               "}\n"
               "set grid\nset key outside right top box Left reverse width 2\nset pointsize 1.2\n");
    fprintf(f, "sub = ");
    char sub[700], keys[32];
    if (p->keys >= 1000000)
        snprintf(keys, sizeof keys, "%.3gM", (double)p->keys / 1e6);
    else if (p->keys >= 1000)
        snprintf(keys, sizeof keys, "%.3gk", (double)p->keys / 1e3);
    else
        snprintf(keys, sizeof keys, "%" PRIu64, p->keys);
    snprintf(sub, sizeof sub, "index: %s keys, %.1f MB trie | %ld cores, %s | GPU: %s",
             keys, (double)p->trie_bytes / 1e6, p->cores, p->cpu,
             p->gpu[0] ? p->gpu : "none");
    gp_str(f, sub);
    fprintf(f, "\n\n");

    /* Latency per row: beam mean p99. */
    double lo = 0, hi = 0;
    for (int e = 0; e < 2 + p->shards->n; e++) {
        int any = 0;
        for (int i = 0; i < p->nsets; i++)
            any |= p->st[e][i].ran;
        if (!any)
            continue;
        fprintf(f, "$lat%d << EOD\n# beam mean_ms p99_ms\n", e);
        for (int i = 0; i < p->nsets; i++) {
            const run_stats *r = &p->st[e][i];
            if (!r->ran)
                continue;
            fprintf(f, "%u %.6g %.6g\n", r->beam, r->mean, r->p99);
            if (e < 2) {
                lo = lo == 0 || r->mean < lo ? r->mean : lo;
                hi = r->p99 > hi ? r->p99 : hi;
            }
        }
        fprintf(f, "EOD\n");
    }
    fprintf(f, "\nset output dir.'/latency.png'\n"
               "set title \"Latency of one request (batch 1) vs beam width\\n\".sub\n"
               "set ylabel 'latency (ms)'\n");
    gp_beam_axis(f, p);
    gp_axis(f, "y", lo, hi);
    fprintf(f, "plot");
    int first = 1;
    for (int e = 0; e < 2; e++) {
        if (!p->st[e][0].ran && !(p->nsets > 1 && p->st[e][1].ran))
            continue;
        row_title(p, e, t, sizeof t);
        fprintf(f, "%s $lat%d using 1:2 with linespoints lt %d pt 7 title '%s mean', \\\n"
                   "     $lat%d using 1:3 with linespoints lt %d dt 2 pt 6 title '%s p99'",
                first ? "" : ", \\\n    ", e, e + 1, t, e, e + 1, t);
        first = 0;
    }
    fprintf(f, "%s\n", first ? " NaN notitle" : "");

    /* GPU/CPU speed-up: beam mean p99 qps-at-each-batch. */
    int nr = 0;
    for (int i = 0; i < p->nsets; i++)
        nr += p->st[0][i].ran && p->st[1][i].ran && p->st[1][i].mean > 0;
    if (nr) {
        *drawn |= PLOT_SPEEDUP;
        fprintf(f, "\n$speedup << EOD\n# beam mean p99 qps ratio per batch size\n");
        for (int i = 0; i < p->nsets; i++) {
            const run_stats *c = &p->st[0][i], *g = &p->st[1][i];
            if (!c->ran || !g->ran || g->mean <= 0)
                continue;
            fprintf(f, "%u %.6g %.6g", c->beam, c->mean / g->mean,
                    g->p99 > 0 ? c->p99 / g->p99 : 0);
            for (int b = 0; b < p->batches->n; b++)
                fprintf(f, " %.6g", c->qps[b] > 0 ? g->qps[b] / c->qps[b] : 0);
            fprintf(f, "\n");
        }
        fprintf(f, "EOD\nset output dir.'/speedup.png'\n"
                   "set title \"GPU speed-up over the CPU engine vs beam width\\n\".sub\n"
                   "set ylabel 'speed-up (CPU time / GPU time)'\n");
        gp_beam_axis(f, p);
        fprintf(f, "unset logscale y\nset yrange [0:*]\n"
                   "plot $speedup using 1:2 with linespoints lt 1 pt 7 title 'latency, mean', \\\n"
                   "     $speedup using 1:3 with linespoints lt 1 dt 2 pt 6 title 'latency, p99'");
        for (int b = 0; b < p->batches->n; b++)
            fprintf(f, ", \\\n     $speedup using 1:%d with linespoints lt %d pt 5 title 'throughput, batch %u'",
                    4 + b, b + 2, p->batches->v[b]);
        fprintf(f, ", \\\n     1 with lines lt -1 dt 3 title 'break-even'\n");
    }

    /* Throughput: batch qps, one block per row and beam. */
    lo = hi = 0;
    fprintf(f, "\n");
    for (int e = 0; e < 2; e++)
        for (int i = 0; i < p->nsets; i++) {
            const run_stats *r = &p->st[e][i];
            if (!r->ran)
                continue;
            fprintf(f, "$tp%d_%d << EOD\n# batch qps\n", e, i);
            for (int b = 0; b < p->batches->n; b++) {
                fprintf(f, "%u %.6g\n", p->batches->v[b], r->qps[b]);
                if (r->qps[b] > 0) {
                    lo = lo == 0 || r->qps[b] < lo ? r->qps[b] : lo;
                    hi = r->qps[b] > hi ? r->qps[b] : hi;
                }
            }
            fprintf(f, "EOD\n");
        }
    uint32_t bmin = UINT32_MAX, bmax = 0;
    fprintf(f, "set output dir.'/throughput.png'\n"
               "set title \"Throughput vs batch size, per engine and beam width\\n\".sub\n"
               "set xlabel 'batch size (requests per call)'\nset ylabel 'throughput (queries/s)'\n"
               "set xtics (");
    for (int b = 0; b < p->batches->n; b++) {
        uint32_t v = p->batches->v[b];
        fprintf(f, "%s%u", b ? ", " : "", v);
        bmin = v < bmin ? v : bmin;
        bmax = v > bmax ? v : bmax;
    }
    fprintf(f, ")\n");
    if (bmax >= 4 * bmin)
        fprintf(f, "set logscale x 2\nset xrange [%g:%g]\n", bmin / 1.2, bmax * 1.2);
    else
        fprintf(f, "unset logscale x\nset xrange [%g:%g]\n", bmin - 0.5, bmax + 0.5);
    gp_axis(f, "y", lo, hi);
    fprintf(f, "plot");
    first = 1;
    for (int e = 0; e < 2; e++)
        for (int i = 0; i < p->nsets; i++) {
            const run_stats *r = &p->st[e][i];
            if (!r->ran)
                continue;
            row_title(p, e, t, sizeof t);
            fprintf(f, "%s $tp%d_%d using 1:2 with linespoints lt %d dt %d pt %d title '%s, beam %u'",
                    first ? "" : ", \\\n    ", e, i, i + 1, e ? 2 : 1, e ? 9 : 7, t, r->beam);
            first = 0;
        }
    fprintf(f, "%s\n", first ? " NaN notitle" : "");

    /* Shards: per beam, shard-count mean p99. */
    int shards_ran = 0;
    for (int j = 0; j < p->shards->n; j++)
        for (int i = 0; i < p->nsets; i++)
            shards_ran |= p->st[2 + j][i].ran;
    if (shards_ran) {
        *drawn |= PLOT_SHARDS;
        lo = hi = 0;
        fprintf(f, "\n");
        for (int i = 0; i < p->nsets; i++) {
            /* The unsharded engine of the same kind is the point at 1. */
            const run_stats *u = &p->st[p->shard_gpu ? 1 : 0][i];
            fprintf(f, "$sh%d << EOD\n# shards mean_ms p99_ms (1: the unsharded engine)\n", i);
            if (u->ran)
                fprintf(f, "1 %.6g %.6g\n", u->mean, u->p99);
            for (int j = 0; j < p->shards->n; j++) {
                const run_stats *r = &p->st[2 + j][i];
                if (!r->ran)
                    continue;
                fprintf(f, "%u %.6g %.6g\n", p->shards->v[j], r->mean, r->p99);
                lo = lo == 0 || r->mean < lo ? r->mean : lo;
                hi = r->p99 > hi ? r->p99 : hi;
            }
            fprintf(f, "EOD\n");
        }
        fprintf(f, "set output dir.'/shards.png'\n"
                   "set title \"Latency of one request vs shard count (%s engines, one process)\\n\".sub\n"
                   "set xlabel 'shards (engines in the group)'\nset ylabel 'latency (ms)'\n"
                   "unset logscale x\nset xtics ('1 (unsharded)' 1",
                p->shard_gpu ? "GPU" : "CPU");
        uint32_t smax = 1;
        for (int j = 0; j < p->shards->n; j++) {
            fprintf(f, ", %u", p->shards->v[j]);
            smax = p->shards->v[j] > smax ? p->shards->v[j] : smax;
        }
        fprintf(f, ")\nset xrange [0.5:%u.5]\n", smax);
        gp_axis(f, "y", lo, hi);
        fprintf(f, "plot");
        for (int i = 0; i < p->nsets; i++) {
            uint32_t beam = 0;
            for (int e = 0; e < 2 + p->shards->n && !beam; e++)
                beam = p->st[e][i].beam;
            fprintf(f, "%s $sh%d using 1:2 with linespoints lt %d pt 7 title 'beam %u mean', \\\n"
                       "     $sh%d using 1:3 with linespoints lt %d dt 2 pt 6 title 'beam %u p99'",
                    i ? ", \\\n    " : "", i, i + 1, beam, i, i + 1, beam);
        }
        fprintf(f, "\n");
    }
    fprintf(f, "unset output\n");
    return fclose(f) ? -1 : 0;
}

/* run_gnuplot runs "gnuplot SCRIPT" as a child, from an argument vector
 * (no shell sees the path).  Returns 0 when it drew, 1 when gnuplot is
 * not installed (a warning: the report stands without plots), -1 when it
 * failed. */
static int run_gnuplot(const char *script)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        char *av[] = {"gnuplot", (char *)script, NULL};
        execvp(av[0], av);
        _exit(errno == ENOENT ? 127 : 126);
    }
    int ws;
    while (waitpid(pid, &ws, 0) < 0)
        if (errno != EINTR)
            return -1;
    if (WIFEXITED(ws) && WEXITSTATUS(ws) == 127)
        return 1;
    return WIFEXITED(ws) && WEXITSTATUS(ws) == 0 ? 0 : -1;
}

/* report_plots writes DIR/plots.gp and draws it: latency.png,
 * throughput.png, speedup.png (CPU and GPU both ran) and shards.png
 * (--shards).  Returns 0, or 1 after printing what failed. */
static int report_plots(const plot_in *p)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/plots.gp", p->dir);
    int drawn;
    if (write_plot_script(p, path, &drawn)) {
        fprintf(stderr, "flashtrie bench: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    int rc = run_gnuplot(path);
    if (rc == 1) {
        fprintf(stderr, "flashtrie bench: warning: gnuplot not found (Debian: gnuplot-nox); "
                        "%s/results.json and %s are written, the plots are not drawn\n",
                p->dir, path);
        return 0;
    }
    if (rc) {
        fprintf(stderr, "flashtrie bench: gnuplot %s failed\n", path);
        return 1;
    }
    printf("plots: %s/{latency,throughput%s%s}.png (script %s)\n", p->dir,
           drawn & PLOT_SPEEDUP ? ",speedup" : "", drawn & PLOT_SHARDS ? ",shards" : "", path);
    return 0;
}

int cmd_bench(int argc, char **argv)
{
    static const struct option opts[] = {
        {"index", required_argument, 0, 'i'},    {"keys", required_argument, 0, 'k'},
        {"gen-keys", required_argument, 0, 'g'}, {"seed", required_argument, 0, 's'},
        {"requests", required_argument, 0, 'q'}, {"n-requests", required_argument, 0, 'n'},
        {"T", required_argument, 0, 'T'},        {"K", required_argument, 0, 'K'},
        {"beam", required_argument, 0, 'B'},     {"head", required_argument, 0, 'H'},
        {"results", required_argument, 0, 'R'},  {"theta-tok", required_argument, 0, 'a'},
        {"theta-sent", required_argument, 0, 'b'}, {"alpha", required_argument, 0, 'A'},
        {"engine", required_argument, 0, 'e'},   {"threads", required_argument, 0, 't'},
        {"batch", required_argument, 0, 'c'},    {"warmup", required_argument, 0, 'w'},
        {"device", required_argument, 0, 'd'},   {"report", required_argument, 0, 'r'},
        {"shards", required_argument, 0, 'S'},   {"exchange", required_argument, 0, 'X'},
        {"full-grid", no_argument, 0, 'F'},   {"timing", no_argument, 0, 'M'},
        {"replicas", required_argument, 0, 'P'}, {"fuse-term", required_argument, 0, 'U'},
        {"round1", required_argument, 0, 'Q'},
        {"round1-items", required_argument, 0, 'I'},
        {"select-local", required_argument, 0, 'Y'},
        {"prefetch", required_argument, 0, 'W'},
        {"select-local-cache", required_argument, 0, 'V'},
        {"launch", required_argument, 0, 'L'},
        {"copy-lists", no_argument, 0, 'C'},   {"devices", required_argument, 0, 'G'},
        {"help", no_argument, 0, 'h'},           {0, 0, 0, 0}};
    const char *use =
        "usage: flashtrie bench (--index INDEX|MANIFEST | --keys FILE | --gen-keys N [--seed S])\n"
        "         [--requests FILE.jsonl | --n-requests N [--T 8] [--beam 100,200,500,1000]\n"
        "          [--K K] [--head r] [--results n] [--theta-tok x] [--theta-sent x]\n"
        "          [--alpha a]] [--engine cpu,gpu] [--threads N] [--device D]\n"
        "         [--batch 1,4,8,16,32] [--warmup N] [--report FILE.json | DIR/]\n"
        "         [--shards 2,4,8 [--exchange device|nccl] [--full-grid] [--copy-lists]\n"
        "          [--devices 0,1,..]]\n"
        "         [--timing] [--replicas R] [--fuse-term N|off] [--round1 N|off]\n"
        "         [--round1-items N] [--launch graph|plain] [--select-local N|off]\n"
        "         [--prefetch on|off] [--select-local-cache N|off]\n"
        "  per engine and beam: latency (mean/p50/p90/p95/p99 ms) of requests run\n"
        "  one at a time, and throughput (q/s) in batches of each size; GPU/CPU\n"
        "  ratios when both ran.  K defaults to the beam.  --keys/--gen-keys build\n"
        "  an index first (into a temporary file) and report the build rate.\n"
        "  --index MANIFEST: its shards run as one group per engine (rows cpu/sN,\n"
        "  gpu/sN), requests drawn over the whole library (the same as over the\n"
        "  unsharded index); --shards is refused there.  Generated requests\n"
        "  sample the library once, on --threads cores.  After the table, one\n"
        "  'results' line per row: a digest of its b=1 answers (equal digests,\n"
        "  equal answers).\n"
        "  --shards: also a group of N GPU engines (N = 1..8; CPU engines without\n"
        "  gpu in --engine) per count, over the index split by first token\n"
        "  in-process (rows gpu/sN, and sN/gpu: the group over the unsharded engine);\n"
        "  --full-grid: engines sharing the GPU each launch on all of it;\n"
        "  --copy-lists: device copies into every shard's recv, not shared lists.\n"
        "  --devices D,...: shard j's engine on GPU D[j % n] (groups of --shards and of\n"
        "  a manifest; default all on --device); --exchange auto takes NCCL when every\n"
        "  shard has a GPU of its own.  --timing:\n"
        "  validation and preparation per request, the GPU engine's host/event\n"
        "  timings per launch size, and the groups' per-step split (kernels,\n"
        "  exchange, wait) by CUDA events.  --replicas R (1..8): the cpu and gpu\n"
        "  rows run R engines each (the GPU ones on --device; rows cpu/rR, gpu/rR),\n"
        "  their batch runs driving them from R threads at once, as serve's\n"
        "  replicas = R does; latency stays on one.  --fuse-term N|off: the GPU\n"
        "  engine's launches of one request with N terminal CTAs, or not fused\n"
        "  (ft_engine_opts.fuse_term; default the engine's choice).  --round1\n"
        "  N|off: a step of a request alone first expands its best ~N x beam\n"
        "  proposals, or always the whole step (ft_engine_opts.round1; default 128).\n"
        "  --round1-items N: only a step of at least N expansion items (1: any,\n"
        "  even one mostly of children) is tried in two rounds\n"
        "  (ft_engine_opts.round1_items; default eight a warp of the grid).\n"
        "  --launch graph|plain: the GPU engine's launches through a CUDA graph ended\n"
        "  by a completion word (default), or plain cooperative launches ended by a\n"
        "  stream synchronisation (ft_engine_opts.launch_graph).  --select-local\n"
        "  N|off: a fused launch narrows a next list of 4097..N candidates in each\n"
        "  CTA that selects it, or always over the whole grid\n"
        "  (ft_engine_opts.select_local_max; default 8192, at most 65536).\n"
        "  --prefetch on|off: the GPU expansion's prefetches of the new beams'\n"
        "  child table entries and next-level lines (ft_engine_opts.prefetch;\n"
        "  default on).  --select-local-cache N|off: each CTA that narrows a list\n"
        "  on its own (--select-local) keeps its first N places (by default as\n"
        "  many as fit, 7,170) or none in shared memory for the radix passes\n"
        "  (ft_engine_opts.select_local_cache).\n"
        "  --report DIR/ (or an existing folder): DIR/results.json, and with\n"
        "  gnuplot DIR/plots.gp drawn\n"
        "  into latency, throughput, speedup and shards PNGs.\n";
    const char *index = NULL, *keys = NULL, *requests = NULL, *report = NULL;
    uint32_t fuse_term = 0, round1 = 0, launch_graph = 0, local_max = 0;
    uint32_t round1_items = 0, prefetch = 0, local_cache = 0;
    uint64_t gen_keys = 0, seed = 1;
    ft_wl_req_opts ro;
    ft_wl_req_opts_init(&ro);
    ro.n = 200;
    u32_list beams = {{100, 200, 500, 1000}, 4};
    u32_list batches = {{1, 4, 8, 16, 32}, 5};
    u32_list shards = {{0}, 0};
    u32_list devlist = {{0}, 0};
    ft_exchange xchg = FT_EXCHANGE_AUTO;
    int full_grid = 0, timing = 0, copy_lists = 0, replicas = 1;
    int use_cpu = 1, use_gpu = 1, threads = 0, device = 0, c;
    uint32_t warmup = 10;
    unsigned long long v;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        int r = ft_cli_req_opt(c, optarg, &ro);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        switch (c) {
        case 'i': index = optarg; break;
        case 'k': keys = optarg; break;
        case 'q': requests = optarg; break;
        case 'r': report = optarg; break;
        case 'g':
        case 'n':
        case 's':
            if (ft_cli_parse_count("flashtrie bench",
                                   c == 'g' ? "--gen-keys" : c == 'n' ? "--n-requests" : "--seed",
                                   optarg, c != 's', &v))
                return 2;
            if (c == 'g')
                gen_keys = v;
            else if (c == 'n')
                ro.n = v;
            else
                seed = v;
            break;
        case 'B':
            if (parse_list("--beam", optarg, 1, FT_MAX_BEAM, &beams))
                return 2;
            break;
        case 'c':
            if (parse_list("--batch", optarg, 1, 4096, &batches))
                return 2;
            break;
        case 'S':
            if (parse_list("--shards", optarg, 1, 8, &shards))
                return 2;
            break;
        case 'G':
            if (parse_list("--devices", optarg, 0, 255, &devlist))
                return 2;
            break;
        case 'F': full_grid = 1; break;
        case 'M': timing = 1; break;
        case 'P':
            if (ft_cli_parse_count("flashtrie bench", "--replicas", optarg, 1,
                                   &v))
                return 2;
            if (v > MAX_REPLICAS) {
                fprintf(stderr, "flashtrie bench: --replicas: at most %d, "
                        "got %llu\n", MAX_REPLICAS, v);
                return 2;
            }
            replicas = (int)v;
            break;
        case 'U':
            if (bench_n_or_off("--fuse-term", optarg, 1, 1024, &fuse_term))
                return 2;
            break;
        case 'Q':
            if (bench_n_or_off("--round1", optarg, 1, 4096, &round1))
                return 2;
            break;
        case 'W': {
            int v = bench_choice("--prefetch", optarg, "on", "off");
            if (v < 0)
                return 2;
            prefetch = v ? UINT32_MAX : 0; /* off: ft_engine_opts' UINT32_MAX */
            break;
        }
        case 'V':
            if (bench_n_or_off("--select-local-cache", optarg, 1, 65536,
                               &local_cache))
                return 2;
            break;
        case 'I':
            if (ft_cli_parse_u32("--round1-items", optarg, 1, 1u << 24,
                                 &round1_items))
                return 2;
            break;
        case 'L': {
            int v = bench_choice("--launch", optarg, "graph", "plain");
            if (v < 0)
                return 2;
            launch_graph = v ? UINT32_MAX : 0; /* plain: UINT32_MAX */
            break;
        }
        case 'Y':
            if (bench_n_or_off("--select-local", optarg, 1, 65536, &local_max))
                return 2;
            break;
        case 'C': copy_lists = 1; break;
        case 'X':
            if (!strcmp(optarg, "device"))
                xchg = FT_EXCHANGE_DEVICE;
            else if (!strcmp(optarg, "nccl"))
                xchg = FT_EXCHANGE_NCCL;
            else {
                fprintf(stderr, "flashtrie bench: --exchange: expected device or nccl, got '%s'\n", optarg);
                return 2;
            }
            break;
        case 'e': {
            use_cpu = use_gpu = 0;
            char buf[64];
            snprintf(buf, sizeof buf, "%s", optarg);
            for (char *sv, *t = strtok_r(buf, ",", &sv); t; t = strtok_r(NULL, ",", &sv)) {
                if (!strcmp(t, "cpu"))
                    use_cpu = 1;
                else if (!strcmp(t, "gpu"))
                    use_gpu = 1;
                else {
                    fprintf(stderr, "flashtrie bench: --engine: expected cpu, gpu or cpu,gpu, got '%s'\n", optarg);
                    return 2;
                }
            }
            break;
        }
        case 't': {
            uint32_t t;
            if (ft_cli_parse_u32("--threads", optarg, 0, 1024, &t))
                return 2;
            threads = (int)t;
            break;
        }
        case 'd': {
            uint32_t d;
            if (ft_cli_parse_u32("--device", optarg, 0, 255, &d))
                return 2;
            device = (int)d;
            break;
        }
        case 'w':
            if (ft_cli_parse_u32("--warmup", optarg, 0, 1000000, &warmup))
                return 2;
            break;
        case 'h': fputs(use, stdout); return 0;
        default: fputs(use, stderr); return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "flashtrie bench: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if ((index != NULL) + (keys != NULL) + (gen_keys != 0) != 1) {
        fprintf(stderr, "flashtrie bench: give exactly one of --index, --keys and --gen-keys\n");
        fputs(use, stderr);
        return 2;
    }
    ro.seed = seed;

    /* The report folder, made before the run so that a bad path fails
     * before minutes of measuring. */
    int report_dir = report != NULL && report_is_dir(report);
    char report_file[4200];
    if (report != NULL) {
        for (const char *q = report; *q; q++)
            if ((unsigned char)*q < 0x20 || *q == 0x7f) {
                fprintf(stderr, "flashtrie bench: --report: the path holds a control character\n");
                return 2;
            }
        if (strlen(report) > 4000) {
            fprintf(stderr, "flashtrie bench: --report: path longer than 4000 bytes\n");
            return 2;
        }
        snprintf(report_file, sizeof report_file, "%s", report);
        if (report_dir) {
            if (mkdir(report, 0777) && errno != EEXIST) {
                fprintf(stderr, "flashtrie bench: --report: cannot make the folder %s: %s\n",
                        report, strerror(errno));
                return 1;
            }
            size_t n = strlen(report);
            snprintf(report_file, sizeof report_file, "%s%sresults.json", report,
                     report[n - 1] == '/' ? "" : "/");
        }
    }

    /* 1. The index. */
    char err[512], tmp[256] = "";
    json_t *build = NULL;
    if (keys != NULL || gen_keys) {
        char ktmp[256] = "";
        const char *src = keys;
        ft_wl_keys_stats gst;
        memset(&gst, 0, sizeof gst);
        if (gen_keys) {
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
            ko.n = gen_keys;
            ko.seed = seed;
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
        if (rc == FT_ENOTSUP && gen_keys) {
            /* No keys-file builder in this build: hand the generated,
             * already sorted stream to ft_builder instead. */
            snprintf(tmp, sizeof tmp, "%s/ft_bench_index_XXXXXX",
                     getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
            int fd = mkstemp(tmp);
            if (fd >= 0)
                close(fd);
            ft_wl_keys_opts ko;
            ft_wl_keys_opts_init(&ko);
            ko.n = gen_keys;
            ko.seed = seed;
            double t0 = now_s();
            rc = ft_wl_build_index(NULL, &ko, tmp, err, sizeof err);
            bst.seconds = now_s() - t0;
            bst.keys = gen_keys;
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
        build = json_object();
        json_object_set_new(build, "method", json_string(how));
        json_object_set_new(build, "keys", json_integer((json_int_t)bst.keys));
        json_object_set_new(build, "seconds", json_real(bst.seconds));
        json_object_set_new(build, "keys_per_s", json_real((double)bst.keys / bst.seconds));
        index = tmp;
    }
    ft_library *lib;
    int rc = ft_library_open(&lib, index, 0, err, sizeof err);
    if (tmp[0])
        unlink(tmp); /* the mapping keeps it alive */
    if (rc) {
        fprintf(stderr, "flashtrie bench: %s\n", err);
        json_decref(build);
        return 1;
    }
    /* A manifest's shards run as one group per engine (rows cpu/sN,
     * gpu/sN); --shards splits a single index and has nothing to split
     * here. */
    size_t man_shards = ft_library_is_manifest(lib) ? ft_library_shards(lib) : 0;
    if (man_shards && shards.n) {
        fprintf(stderr, "flashtrie bench: --shards: %s is a manifest of %zu shards "
                        "already (its shards run as a group); --shards splits a "
                        "single index\n", index, man_shards);
        ft_library_close(lib);
        json_decref(build);
        return 2;
    }
    if (man_shards && replicas > 1) {
        fprintf(stderr, "flashtrie bench: --replicas: %s is a manifest (its "
                        "shards run as one group); replicas are of a single "
                        "index's engines\n", index);
        ft_library_close(lib);
        json_decref(build);
        return 2;
    }
    if (man_shards > 8) {
        fprintf(stderr, "flashtrie bench: %s: a manifest of %zu shards; a group "
                        "holds at most 8\n", index, man_shards);
        ft_library_close(lib);
        json_decref(build);
        return 2;
    }
    const ft_index *idx = ft_library_shard(lib, 0);
    ft_index_info info;
    ft_index_info_init(&info);
    ft_library_info_get(&info, lib);
    printf("index: %" PRIu64 " keys, %" PRIu64 " nodes, %.3f trie bytes/key", info.keys,
           info.nodes, (double)info.trie_bytes / (double)(info.keys ? info.keys : 1));
    if (man_shards)
        printf(", manifest of %zu shards", man_shards);
    printf("\n");

    /* 2. The requests, one set per beam. */
    req_set sets[MAX_LIST];
    int nsets = 0;
    memset(sets, 0, sizeof sets);
    if (requests != NULL) {
        rc = load_requests(sets, &nsets, requests, err, sizeof err);
    } else {
        /* The library is sampled once (in parallel) for every beam: the
         * sample depends on the seed and T only. */
        ft_wl_reqs *src = NULL;
        ro.threads = threads;
        double t0 = now_s();
        rc = ft_wl_reqs_open_library(&src, lib, &ro, err, sizeof err);
        for (int b = 0; b < beams.n && rc == FT_OK; b++) {
            ft_wl_req_opts o = ro;
            o.beam = beams.v[b];
            ft_wl_reqs *g;
            rc = ft_wl_reqs_derive(&g, src, &o, err, sizeof err);
            if (rc)
                break;
            sets[nsets].beam = o.beam;
            for (uint64_t i = 0; i < o.n && rc == FT_OK; i++) {
                ft_request q;
                rc = ft_wl_reqs_make(g, i, 0, &q);
                if (rc == FT_OK)
                    rc = req_set_add(&sets[nsets], &q);
            }
            ft_wl_reqs_close(g);
            nsets++;
        }
        ft_wl_reqs_close(src);
        if (rc == FT_OK)
            printf("requests: %" PRIu64 " per beam for %d beams, made in %.3f s\n", ro.n,
                   nsets, now_s() - t0);
        if (rc && !err[0])
            snprintf(err, sizeof err, "making requests: %s", ft_strerror(rc));
    }
    if (rc) {
        fprintf(stderr, "flashtrie bench: %s\n", err);
        for (int i = 0; i < nsets; i++)
            req_set_free(&sets[i]);
        ft_library_close(lib);
        json_decref(build);
        return rc == FT_EINVAL || rc == FT_ENOTSUP ? 2 : 1;
    }

    if (timing)
        print_admission(sets, nsets);

    /* 3. Every engine over every set. */
    uint32_t max_beam = 1, max_k = 1, max_t = 1, max_b = 1;
    for (int i = 0; i < nsets; i++)
        for (size_t j = 0; j < sets[i].n; j++) {
            const ft_request *q = &sets[i].r[j];
            max_beam = q->beam > max_beam ? q->beam : max_beam;
            max_k = q->K > max_k ? q->K : max_k;
            max_t = q->T > max_t ? q->T : max_t;
        }
    for (int b = 0; b < batches.n; b++)
        max_b = batches.v[b] > max_b ? batches.v[b] : max_b;
    /* Rows: 0 cpu, 1 gpu, 2 + j the group of shards.v[j] GPU engines. */
    enum { NROWS = 2 + MAX_LIST };
    static run_stats st[NROWS][MAX_LIST];
    memset(st, 0, sizeof st);
    json_t *runs = json_array(), *skipped = json_object();
    char eng_names[NROWS][64] = {"cpu", "gpu"};
    for (int j = 0; j < shards.n; j++)
        snprintf(eng_names[2 + j], sizeof eng_names[2 + j], "%s/s%u",
                 use_gpu ? "gpu" : "cpu", shards.v[j]);
    if (man_shards)
        for (int e = 0; e < 2; e++)
            snprintf(eng_names[e], sizeof eng_names[e], "%s/s%zu", e ? "gpu" : "cpu",
                     man_shards);
    /* Table labels: the engine kinds, or the groups' names. */
    char row_names[NROWS][64];
    memcpy(row_names, eng_names, sizeof row_names);
    int status = 0;
    for (int e = 0; e < 2 + shards.n; e++) {
        if ((e == 0 && !use_cpu) || (e == 1 && !use_gpu))
            continue;
        ft_engine_opts eo;
        ft_engine_opts_init(&eo);
        /* Groups are of GPU engines, or of CPU engines without --engine gpu. */
        eo.kind = e == 0 || (e >= 2 && !use_gpu) ? FT_ENGINE_CPU : FT_ENGINE_GPU;
        searcher sr = {NULL, NULL, timing, {NULL}, 0};
        ft_library *shlib = NULL;
        eo.timing = timing;
        const ft_index *sh[8];
        size_t nsh = e >= 2 ? shards.v[e - 2] : 0;
        /* --devices: shard j on devlist[j % n] */
        int gdevs[8];
        for (int j = 0; j < 8; j++)
            gdevs[j] = devlist.n ? (int)devlist.v[j % devlist.n] : device;
        eo.threads = threads;
        eo.device = device;
        eo.max_batch = max_b;
        eo.fuse_term = fuse_term;
        eo.round1 = round1;
        eo.round1_items = round1_items;
        eo.launch_graph = launch_graph;
        eo.select_local_max = local_max;
        eo.prefetch = prefetch;
        eo.select_local_cache = local_cache;
        eo.max_beam = max_beam;
        eo.max_k = max_k;
        eo.max_t = max_t;
        err[0] = 0;
        if (man_shards && e < 2) {
            nsh = man_shards;
            for (size_t j = 0; j < nsh; j++)
                sh[j] = ft_library_shard(lib, j);
            ft_group_opts go;
            ft_group_opts_init(&go);
            go.exchange = xchg;
            go.split_grid = !full_grid;
            go.shared_lists = !copy_lists;
            go.devices = devlist.n ? gdevs : NULL;
            rc = ft_group_open_ex(&sr.grp, sh, nsh, &eo, &go, err, sizeof err);
        } else if (nsh) {
            double t0 = now_s();
            rc = split_index(&shlib, idx, nsh, err, sizeof err);
            if (rc) {
                fprintf(stderr, "flashtrie bench: %s\n", err);
                status = 1;
                continue;
            }
            nsh = ft_library_shards(shlib) < 8 ? ft_library_shards(shlib) : 8;
            for (size_t j = 0; j < nsh; j++)
                sh[j] = ft_library_shard(shlib, j);
            printf("%s: split into %zu shards by first token in %.1f s (keys:", eng_names[e],
                   nsh, now_s() - t0);
            for (size_t j = 0; j < nsh; j++)
                printf(" %" PRIu64, ft_index_keys(sh[j]));
            printf(")\n");
            ft_group_opts go;
            ft_group_opts_init(&go);
            go.exchange = xchg;
            go.split_grid = !full_grid;
            go.shared_lists = !copy_lists;
            go.devices = devlist.n ? gdevs : NULL;
            rc = ft_group_open_ex(&sr.grp, sh, nsh, &eo, &go, err,
                                  sizeof err);
        } else {
            rc = ft_engine_open(&sr.eng, idx, &eo, err, sizeof err);
            /* --replicas: more engines beside it on the same GPU */
            sr.rep[0] = sr.eng;
            sr.nrep = 1;
            for (int j = 1; rc == FT_OK && e < 2 && j < replicas; j++) {
                rc = ft_engine_open(&sr.rep[j], idx, &eo, err, sizeof err);
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
            printf("%s engine: skipped (%s%s%s)\n", eng_names[e], ft_strerror(rc),
                   err[0] ? ": " : "", err[0] ? err : "");
            json_object_set_new(skipped, eng_names[e], json_string(ft_strerror(rc)));
            continue;
        }
        if (rc) {
            fprintf(stderr, "flashtrie bench: opening the %s engine: %s\n", eng_names[e], err);
            status = 1;
            continue;
        }
        if (!nsh && sr.nrep > 1) {
            snprintf(eng_names[e], sizeof eng_names[e], "%s/r%d",
                     ft_engine_name(sr.eng), sr.nrep);
            snprintf(row_names[e], sizeof row_names[e], "%s", eng_names[e]);
        }
        else if (!nsh)
            snprintf(eng_names[e], sizeof eng_names[e], "%s", ft_engine_name(sr.eng));
        if (sr.grp && eo.kind == FT_ENGINE_GPU) {
            /* where the shards run and how they exchange: what a
             * multi-GPU row measures (docs/sharding.md) */
            ft_exchange gx = ft_group_exchange(sr.grp);
            printf("%s: shards on GPUs", eng_names[e]);
            for (size_t j = 0; j < nsh; j++)
                printf("%s%d", j ? "," : " ", ft_engine_device(ft_group_engine(sr.grp, j)));
            printf(", exchange %s\n", gx == FT_EXCHANGE_NCCL ? "nccl"
                                      : gx == FT_EXCHANGE_DEVICE ? "device" : "host");
        }
        for (int i = 0; i < nsets; i++) {
            run_stats *rs = &st[e][i];
            rs->beam = sets[i].beam;
            rs->K = sets[i].n ? sets[i].r[0].K : 0;
            rs->T = sets[i].n ? sets[i].r[0].T : 0;
            rc = run_engine(rs, &sr, &sets[i], &batches, warmup);
            if (rc) {
                fprintf(stderr, "flashtrie bench: %s engine failed: %s\n", eng_names[e], ft_strerror(rc));
                status = 1;
                break;
            }
            json_array_append_new(runs, stats_json(rs, eng_names[e], &batches));
        }
        if (timing && !nsh && sr.eng) {
            char buf[4096];
            ft_engine_timing_report(sr.eng, buf, sizeof buf);
            printf("%s", buf);
        }
        if (nsh) {
            ft_group_close(sr.grp);
            ft_library_close(shlib);
            shlib = NULL;
        } else {
            for (int j = 1; j < sr.nrep; j++)
                ft_engine_close(sr.rep[j]);
            ft_engine_close(sr.eng);
        }
    }

    /* 4. The table. */
    printf("\n%-6s %5s %5s %6s %9s %9s %9s %9s %9s", "engine", "beam", "K", "reqs",
           "mean_ms", "p50_ms", "p90_ms", "p95_ms", "p99_ms");
    for (int b = 0; b < batches.n; b++) {
        char h[24];
        snprintf(h, sizeof h, "qps@b%u", batches.v[b]);
        printf(" %10s", h);
    }
    printf("\n");
    json_t *ratios = json_array();
    for (int i = 0; i < nsets; i++) {
        for (int e = 0; e < 2 + shards.n; e++) {
            const run_stats *r = &st[e][i];
            if (!r->ran)
                continue;
            printf("%-6s %5u %5u %6zu %9.3f %9.3f %9.3f %9.3f %9.3f", row_names[e],
                   r->beam, r->K, r->n, r->mean, r->p50, r->p90, r->p95, r->p99);
            for (int b = 0; b < batches.n; b++)
                printf(" %10.1f", r->qps[b]);
            printf("%s\n", r->rejected ? "  (some requests rejected)" : "");
        }
        const run_stats *cr = &st[0][i], *gr = &st[1][i];
        if (cr->ran && gr->ran && gr->mean > 0 && cr->qps[0] > 0) {
            printf("%-6s %5u %5u %6s %9.2fx %9.2fx %8s %9.2fx %9.2fx", "cpu/gpu", cr->beam, cr->K, "",
                   cr->mean / gr->mean, cr->p50 / gr->p50, "", cr->p95 / gr->p95,
                   cr->p99 / gr->p99);
            json_t *o = json_object();
            json_object_set_new(o, "beam", json_integer(cr->beam));
            json_object_set_new(o, "latency_speedup_mean", json_real(cr->mean / gr->mean));
            json_object_set_new(o, "latency_speedup_p50", json_real(cr->p50 / gr->p50));
            json_object_set_new(o, "latency_speedup_p95", json_real(cr->p95 / gr->p95));
            json_object_set_new(o, "latency_speedup_p99", json_real(cr->p99 / gr->p99));
            json_t *q = json_object();
            for (int b = 0; b < batches.n; b++) {
                char k[16];
                snprintf(k, sizeof k, "%u", batches.v[b]);
                double x = cr->qps[b] > 0 ? gr->qps[b] / cr->qps[b] : 0;
                printf(" %9.2fx", x);
                json_object_set_new(q, k, json_real(x));
            }
            json_object_set_new(o, "throughput_gpu_over_cpu", q);
            json_array_append_new(ratios, o);
            printf("\n");
        }
        /* A group against the same run's unsharded GPU engine: > 1 means
         * the group is slower (latency) or faster (throughput). */
        for (int e = 2; e < 2 + shards.n; e++) {
            const run_stats *sr = &st[e][i];
            const run_stats *ur = use_gpu ? gr : cr;
            if (!sr->ran || !ur->ran || ur->mean <= 0)
                continue;
            char nm[32];
            snprintf(nm, sizeof nm, "s%u/%s", shards.v[e - 2], use_gpu ? "gpu" : "cpu");
            printf("%-6s %5u %5u %6s %9.2fx %9.2fx %8s %9.2fx %9.2fx", nm, sr->beam, sr->K, "",
                   sr->mean / ur->mean, sr->p50 / ur->p50, "", sr->p95 / ur->p95,
                   sr->p99 / ur->p99);
            for (int b = 0; b < batches.n; b++)
                printf(" %9.2fx", ur->qps[b] > 0 ? sr->qps[b] / ur->qps[b] : 0);
            printf("\n");
        }
    }

    /* The answers' digests (FNV-1a of every b=1 result): rows that answer
     * alike, a group and its unsharded engine among them, print the same. */
    printf("\n");
    for (int i = 0; i < nsets; i++)
        for (int e = 0; e < 2 + shards.n; e++)
            if (st[e][i].ran)
                printf("results %-6s beam %5u: fnv1a64 %016" PRIx64 "\n", row_names[e],
                       st[e][i].beam, st[e][i].digest);

    /* 5. The report. */
    if (report != NULL) {
        json_t *rep = json_object();
        json_t *cmd = json_array();
        json_array_append_new(cmd, json_string("flashtrie"));
        for (int i = 0; i < argc; i++)
            json_array_append_new(cmd, json_string(argv[i]));
        json_object_set_new(rep, "command", cmd);
        char cpu[256], gpu[256];
        cpu_model(cpu, sizeof cpu);
        gpu_model(gpu, sizeof gpu);
        json_t *m = json_object();
        json_object_set_new(m, "cores", json_integer(sysconf(_SC_NPROCESSORS_ONLN)));
        json_object_set_new(m, "cpu_model", json_string(cpu));
        json_object_set_new(m, "gpu", gpu[0] ? json_string(gpu) : json_null());
        json_object_set_new(m, "flashtrie_version", json_string(FT_VERSION_STRING));
        json_object_set_new(rep, "machine", m);
        json_t *ix = json_object();
        json_object_set_new(ix, "path", json_string(keys || gen_keys ? "(temporary)" : index));
        json_object_set_new(ix, "keys", json_integer((json_int_t)info.keys));
        json_object_set_new(ix, "nodes", json_integer((json_int_t)info.nodes));
        json_object_set_new(ix, "trie_bytes", json_integer((json_int_t)info.trie_bytes));
        json_object_set_new(ix, "value_bytes", json_integer((json_int_t)info.value_bytes));
        if (man_shards)
            json_object_set_new(ix, "manifest_shards", json_integer((json_int_t)man_shards));
        json_object_set_new(ix, "trie_bytes_per_key",
                            json_real((double)info.trie_bytes / (double)(info.keys ? info.keys : 1)));
        if (build)
            json_object_set_new(ix, "build", build);
        build = NULL;
        json_object_set_new(rep, "index", ix);
        json_t *wl = json_object();
        json_object_set_new(wl, "source", json_string(requests ? requests : "generated"));
        if (!requests) {
            json_object_set_new(wl, "seed", json_integer((json_int_t)seed));
            json_object_set_new(wl, "requests_per_beam", json_integer((json_int_t)ro.n));
            json_object_set_new(wl, "T", json_integer(ro.T));
            json_object_set_new(wl, "head", ro.head_set ? json_integer(ro.head) : json_string("K/10"));
        }
        json_object_set_new(wl, "warmup", json_integer(warmup));
        json_object_set_new(wl, "threads", json_integer(threads));
        json_object_set_new(rep, "workload", wl);
        json_object_set_new(rep, "runs", runs);
        json_object_set_new(rep, "skipped", skipped);
        json_object_set_new(rep, "ratios", ratios);
        runs = skipped = ratios = NULL;
        if (json_dump_file(rep, report_file, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6))) {
            fprintf(stderr, "flashtrie bench: cannot write %s\n", report_file);
            status = 1;
        }
        json_decref(rep);
        if (report_dir && status == 0) {
            /* The folder name without its trailing slashes, for DIR/name. */
            char dir[4200];
            snprintf(dir, sizeof dir, "%s", report);
            for (size_t n = strlen(dir); n > 1 && dir[n - 1] == '/'; n--)
                dir[n - 1] = 0;
            plot_in pin = {dir, st, nsets, &batches, &shards, use_gpu,
                           man_shards, info.keys, info.trie_bytes, cpu, gpu,
                           sysconf(_SC_NPROCESSORS_ONLN)};
            status = report_plots(&pin);
        }
    }
    json_decref(runs);
    json_decref(skipped);
    json_decref(ratios);
    json_decref(build);
    for (int i = 0; i < nsets; i++)
        req_set_free(&sets[i]);
    ft_library_close(lib);
    return status;
}
