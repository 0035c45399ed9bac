/*
 * daemon_bench.c - ft_daemon_bench: what the daemon adds to the engine.
 *
 *   ft_daemon_bench --index F --url URL --requests R.jsonl [--engine cpu|gpu]
 *                   [--threads N] [--rounds N] [--clients C] [--batch B]
 *                   [--seconds S]
 *
 * On the same requests, in the same run, against a running
 * `flashtrie serve` on the same index (ops/bench/daemon_bench.sh starts
 * one):
 *   1. latency at b = 1: each request is run on an in-process engine
 *      and then through the daemon (one request per SEARCH frame), pair by
 *      pair, so load from other jobs on a shared machine hits both sides
 *      alike; p50/p99 of each and the p50 of the per-pair difference;
 *   2. the engine alone in batches of B (ft_engine_search_batch);
 *   3. C client threads sharing one ft_client handle, each sending one
 *      request per frame, for S seconds: requests per second.
 * After 1 and 3 it prints the server's own account of where the time of
 * those messages went (INFO's `# stages`: decode, queue wait, engine,
 * encode, send; means by the daemon's clock).
 * Every daemon answer is compared with the engine's, hit by hit, bit for
 * bit; a difference is reported and makes the exit status 1.
 * This is a benchmark, not a test: it is not run by ctest.
 */
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "flashtrie.h"
#include "flashtrie/internal/clock.h"
#include "flashtrie_client.h"
#include "jsonl.h"

typedef struct bench {
    ft_request *reqs;
    ft_jsonl_req *jq;
    size_t n;
    ft_result *ref;       /* the engine's answers */
    ft_client *cli;
    double seconds;
    atomic_size_t next;
    atomic_ulong done, mismatch, failed;
    atomic_int stop;
} bench;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(double *v, size_t n, double p)
{
    qsort(v, n, sizeof *v, cmp_double);
    size_t i = (size_t)ceil(p * (double)n) - 1;
    return v[i < n ? i : n - 1];
}

/* same_result compares two answers bit for bit (scores by their bytes):
 * what the wire carries (tokens, value, score, sigma). */
static int same_result(const ft_result *a, const ft_result *b)
{
    if (a->status != b->status || a->n != b->n)
        return 0;
    for (uint32_t i = 0; i < a->n; i++) {
        const ft_hit *x = &a->hits[i], *y = &b->hits[i];
        if (x->len != y->len || x->value != y->value ||
            memcmp(&x->score, &y->score, sizeof x->score) ||
            memcmp(&x->sigma, &y->sigma, sizeof x->sigma) ||
            memcmp(a->tokens + x->tok_off, b->tokens + y->tok_off,
                   x->len * sizeof *a->tokens))
            return 0;
    }
    return 1;
}

/* stages is the server's account of its SEARCH messages (INFO's
 * `# stages`, serve_stages.c): counts and the sums behind its means. */
typedef struct stages {
    double messages, requests, sends;
    double decode, queue, engine, encode, send; /* sums, us */
    int ok;
} stages;

static double info_num(const char *sec, const char *key)
{
    char k[48];
    snprintf(k, sizeof k, "\n%s: ", key);
    const char *p = strstr(sec, k);
    return p ? strtod(p + strlen(k), NULL) : 0.0;
}

static stages get_stages(ft_client *c)
{
    stages s = {0};
    char *info = NULL;
    if (ft_client_info(c, &info, NULL, 0) != FT_OK)
        return s;
    const char *sec = strstr(info, "\n# stages\n");
    if (sec != NULL) {
        s.ok = 1;
        s.messages = info_num(sec, "messages");
        s.requests = info_num(sec, "requests");
        s.sends = info_num(sec, "sends");
        s.decode = info_num(sec, "decode_us") * s.messages;
        s.queue = info_num(sec, "queue_us") * s.requests;
        s.engine = info_num(sec, "engine_us") * s.requests;
        s.encode = info_num(sec, "encode_us") * s.messages;
        s.send = info_num(sec, "send_us") * s.sends;
    }
    ft_client_text_free(info);
    return s;
}

/* print_stages prints the mean of each stage between two accounts. */
static void print_stages(const char *what, const stages *a, const stages *b)
{
    if (!a->ok || !b->ok) {
        printf("%s.stages_us: (the server's INFO has no stages)\n", what);
        return;
    }
    double m = b->messages - a->messages, r = b->requests - a->requests,
           s = b->sends - a->sends;
    printf("%s.stages_us: decode %.1f queue %.1f engine %.1f encode %.1f "
           "send %.1f (the server's clock, means over %.0f messages)\n",
           what, m > 0 ? (b->decode - a->decode) / m : 0,
           r > 0 ? (b->queue - a->queue) / r : 0,
           r > 0 ? (b->engine - a->engine) / r : 0,
           m > 0 ? (b->encode - a->encode) / m : 0,
           s > 0 ? (b->send - a->send) / s : 0, m);
}

static void *client_main(void *arg)
{
    bench *b = arg;
    char err[512];
    while (!atomic_load(&b->stop)) {
        size_t i = atomic_fetch_add(&b->next, 1) % b->n;
        ft_client_results *res;
        int rc = ft_client_search(b->cli, &b->reqs[i], 1, &res, err, sizeof err);
        if (rc != FT_OK) {
            if (atomic_fetch_add(&b->failed, 1) == 0)
                fprintf(stderr, "ft_daemon_bench: search: %s\n", err);
            continue;
        }
        if (!same_result(ft_client_results_get(res, 0), &b->ref[i]))
            atomic_fetch_add(&b->mismatch, 1);
        ft_client_results_free(res);
        atomic_fetch_add(&b->done, 1);
    }
    return NULL;
}

static int load_requests(bench *b, const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "ft_daemon_bench: %s: cannot open\n", path);
        return -1;
    }
    char *line = NULL;
    size_t cap = 0, alloc = 0;
    ssize_t len;
    int rc = 0;
    while ((len = getline(&line, &cap, f)) > 0) {
        if (b->n == alloc) {
            alloc = alloc ? 2 * alloc : 256;
            b->jq = realloc(b->jq, alloc * sizeof *b->jq);
        }
        ft_jsonl_req *q = &b->jq[b->n];
        ft_jsonl_req_init(q);
        char err[192];
        if (ft_jsonl_parse(q, line, (size_t)len, err, sizeof err) != FT_OK) {
            fprintf(stderr, "ft_daemon_bench: %s:%zu: %s\n", path, b->n + 1, err);
            rc = -1;
            break;
        }
        b->n++;
    }
    free(line);
    fclose(f);
    if (rc == 0 && b->n == 0) {
        fprintf(stderr, "ft_daemon_bench: %s: no requests\n", path);
        rc = -1;
    }
    if (rc != 0)
        return rc;
    b->reqs = calloc(b->n, sizeof *b->reqs);
    b->ref = calloc(b->n, sizeof *b->ref);
    for (size_t i = 0; i < b->n; i++) {
        b->reqs[i] = b->jq[i].req;
        uint32_t nres = b->reqs[i].results ? b->reqs[i].results : b->reqs[i].beam;
        ft_result_alloc(&b->ref[i], nres, b->reqs[i].T);
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *index = NULL, *url = NULL, *reqpath = NULL;
    int threads = 1, rounds = 3, clients = 64, batch = 32, gpu = 0;
    double seconds = 5;
    static const struct option lo[] = {
        {"index", 1, 0, 'i'},   {"url", 1, 0, 'u'},     {"requests", 1, 0, 'r'},
        {"threads", 1, 0, 't'}, {"rounds", 1, 0, 'n'},  {"clients", 1, 0, 'c'},
        {"batch", 1, 0, 'b'},   {"seconds", 1, 0, 's'}, {"engine", 1, 0, 'e'},
        {0, 0, 0, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (ch) {
        case 'i': index = optarg; break;
        case 'u': url = optarg; break;
        case 'r': reqpath = optarg; break;
        case 't': threads = atoi(optarg); break;
        case 'n': rounds = atoi(optarg); break;
        case 'c': clients = atoi(optarg); break;
        case 'b': batch = atoi(optarg); break;
        case 's': seconds = atof(optarg); break;
        case 'e':
            if (strcmp(optarg, "cpu") && strcmp(optarg, "gpu")) {
                fprintf(stderr, "ft_daemon_bench: --engine: cpu or gpu, got %s\n", optarg);
                return 2;
            }
            gpu = !strcmp(optarg, "gpu");
            break;
        default: return 2;
        }
    }
    if (!index || !url || !reqpath || rounds < 1 || clients < 1 || batch < 1) {
        fprintf(stderr, "usage: ft_daemon_bench --index F --url URL --requests "
                        "R.jsonl [--engine cpu|gpu] [--threads N] [--rounds N] "
                        "[--clients C] [--batch B] [--seconds S]\n");
        return 2;
    }
    bench b;
    memset(&b, 0, sizeof b);
    b.seconds = seconds;
    if (load_requests(&b, reqpath) != 0)
        return 1;
    char err[512];
    ft_library *lib;
    if (ft_library_open(&lib, index, 0, err, sizeof err) != FT_OK) {
        fprintf(stderr, "ft_daemon_bench: %s\n", err);
        return 1;
    }
    ft_engine_opts eo;
    ft_engine_opts_init(&eo);
    eo.kind = gpu ? FT_ENGINE_GPU : FT_ENGINE_CPU;
    eo.threads = threads;
    ft_engine *eng;
    if (ft_engine_open(&eng, ft_library_shard(lib, 0), &eo, err, sizeof err) != FT_OK) {
        fprintf(stderr, "ft_daemon_bench: engine: %s\n", err);
        return 1;
    }
    ft_client_opts co;
    ft_client_opts_init(&co);
    co.timeout_ms = 30000;
    if (ft_client_connect(&b.cli, url, &co, err, sizeof err) != FT_OK ||
        ft_client_ping(b.cli, err, sizeof err) != FT_OK) {
        fprintf(stderr, "ft_daemon_bench: %s\n", err);
        return 1;
    }
    /* Warm-up: every request once on each side (the reference answers). */
    for (size_t i = 0; i < b.n; i++) {
        ft_engine_search(eng, &b.reqs[i], &b.ref[i]);
        ft_client_results *res;
        if (ft_client_search(b.cli, &b.reqs[i], 1, &res, err, sizeof err) == FT_OK)
            ft_client_results_free(res);
    }

    size_t m = b.n * (size_t)rounds;
    /* The engine alone, back to back (what `flashtrie bench` times): the
     * paired loop below interleaves each engine call with a call to the
     * server, whose engine runs on the same GPU in another process, so
     * its engine figure also pays the GPU's switch between the two
     * processes' contexts and the caches the other one left. */
    double *la = malloc(m * sizeof *la);
    ft_result tmp0;
    ft_result_alloc(&tmp0, FT_MAX_BEAM, FT_MAX_T);
    for (size_t k = 0; k < m; k++) {
        double t0 = fti_now();
        ft_engine_search(eng, &b.reqs[k % b.n], &tmp0);
        la[k] = (fti_now() - t0) * 1e6;
    }
    ft_result_free(&tmp0);
    /* The daemon alone, back to back: with the paired loop's alternation
     * gone, daemon_alone - engine_alone is what the daemon adds when it
     * has the GPU to itself, as in production. */
    double *lda = malloc(m * sizeof *lda);
    for (size_t k = 0; k < m; k++) {
        double t0 = fti_now();
        ft_client_results *res;
        if (ft_client_search(b.cli, &b.reqs[k % b.n], 1, &res, err,
                             sizeof err) == FT_OK)
            ft_client_results_free(res);
        lda[k] = (fti_now() - t0) * 1e6;
    }
    double *le = malloc(m * sizeof *le), *ld = malloc(m * sizeof *ld),
           *dd = malloc(m * sizeof *dd), *lp = malloc(m * sizeof *lp);
    ft_result tmp;
    ft_result_alloc(&tmp, FT_MAX_BEAM, FT_MAX_T);
    unsigned long mismatch = 0, failed = 0;
    stages st0 = get_stages(b.cli);
    for (size_t k = 0; k < m; k++) {
        size_t i = k % b.n;
        double t0 = fti_now();
        ft_engine_search(eng, &b.reqs[i], &tmp);
        double t1 = fti_now();
        ft_client_results *res;
        int rc = ft_client_search(b.cli, &b.reqs[i], 1, &res, err, sizeof err);
        double t2 = fti_now();
        /* A PING is answered on nng's thread without the queue: nng's
         * round trip and the client's call alone. */
        ft_client_ping(b.cli, err, sizeof err);
        lp[k] = (fti_now() - t2) * 1e6;
        if (rc != FT_OK) {
            if (failed++ == 0)
                fprintf(stderr, "ft_daemon_bench: search: %s\n", err);
        } else {
            mismatch += !same_result(ft_client_results_get(res, 0), &b.ref[i]);
            ft_client_results_free(res);
        }
        le[k] = (t1 - t0) * 1e6;
        ld[k] = (t2 - t1) * 1e6;
        dd[k] = ld[k] - le[k];
    }
    double e50 = pct(le, m, .5), e99 = pct(le, m, .99);
    double d50 = pct(ld, m, .5), d99 = pct(ld, m, .99);
    double a50 = pct(dd, m, .5), p50 = pct(lp, m, .5), p99 = pct(lp, m, .99);
    printf("requests: %zu, rounds: %d, engine: %s\n", b.n, rounds, ft_engine_note(eng));
    double ea50 = pct(la, m, .5), da50 = pct(lda, m, .5);
    printf("b1.engine_alone_us: p50 %.0f p99 %.0f (back to back, as "
           "flashtrie bench times it)\n", ea50, pct(la, m, .99));
    printf("b1.daemon_alone_us: p50 %.0f p99 %.0f (back to back)\n", da50,
           pct(lda, m, .99));
    printf("b1.added_alone_us: p50 difference %.0f (daemon alone - engine "
           "alone: what the daemon adds with the GPU to itself)\n",
           da50 - ea50);
    printf("b1.engine_us: p50 %.0f p99 %.0f (paired with the daemon's "
           "call)\n", e50, e99);
    printf("b1.daemon_us: p50 %.0f p99 %.0f\n", d50, d99);
    printf("b1.added_us: p50 %.0f (paired; p50 difference %.0f)\n", a50, d50 - e50);
    printf("ping_us: p50 %.0f p99 %.0f (nng's round trip, no queue)\n", p50, p99);
    stages st1 = get_stages(b.cli);
    print_stages("b1", &st0, &st1);

    /* The engine alone in batches. */
    ft_result *bres = calloc((size_t)batch, sizeof *bres);
    for (int i = 0; i < batch; i++)
        ft_result_alloc(&bres[i], FT_MAX_BEAM, FT_MAX_T);
    size_t total = 0;
    double t0 = fti_now();
    for (int r = 0; r < rounds || fti_now() - t0 < 1.0; r++)
        for (size_t i = 0; i < b.n; i += (size_t)batch) {
            size_t k = b.n - i < (size_t)batch ? b.n - i : (size_t)batch;
            ft_engine_search_batch(eng, &b.reqs[i], k, bres);
            total += k;
        }
    double eng_qps = (double)total / (fti_now() - t0);
    printf("engine.batch%d_qps: %.0f\n", batch, eng_qps);

    /* C clients on one handle. */
    pthread_t *th = calloc((size_t)clients, sizeof *th);
    double c0 = fti_now();
    for (int i = 0; i < clients; i++)
        pthread_create(&th[i], NULL, client_main, &b);
    struct timespec ts = {(time_t)seconds,
                          (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
    atomic_store(&b.stop, 1);
    for (int i = 0; i < clients; i++)
        pthread_join(th[i], NULL);
    double cq = (double)atomic_load(&b.done) / (fti_now() - c0);
    printf("daemon.clients%d_qps: %.0f (%.0f%% of the engine's batch %d)\n",
           clients, cq, 100 * cq / eng_qps, batch);
    stages st2 = get_stages(b.cli);
    print_stages("clients", &st1, &st2);
    mismatch += atomic_load(&b.mismatch);
    failed += atomic_load(&b.failed);
    printf("answers: %s (%lu differ from the engine's, %lu failed)\n",
           mismatch || failed ? "DIFFER" : "identical", mismatch, failed);

    for (int i = 0; i < batch; i++)
        ft_result_free(&bres[i]);
    free(bres);
    free(th);
    ft_result_free(&tmp);
    free(la);
    free(lda);
    free(le);
    free(ld);
    free(dd);
    free(lp);
    for (size_t i = 0; i < b.n; i++) {
        ft_result_free(&b.ref[i]);
        ft_jsonl_req_free(&b.jq[i]);
    }
    free(b.ref);
    free(b.reqs);
    free(b.jq);
    ft_client_close(b.cli);
    ft_engine_close(eng);
    ft_library_close(lib);
    return mismatch || failed ? 1 : 0;
}
