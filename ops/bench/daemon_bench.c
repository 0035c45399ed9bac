/*
 * daemon_bench.c - ft_daemon_bench: what the daemon adds to the engine.
 *
 *   ft_daemon_bench --index F --url URL[,URL...] --requests R.jsonl
 *                   [--engine cpu|gpu]
 *                   [--threads N] [--rounds N] [--clients C] [--batch B]
 *                   [--seconds S] [--serve-max-batch M] [--connections P]
 *                   [--procs P] [--kinds search,ping,echo]
 *
 * On the same requests, in the same run, against a running
 * `flashtrie serve` on the same index (several URLs: the server's
 * listeners; the first serves every step, step 6's own and procs
 * clients are shared out over all of them) (ops/bench/daemon_bench.sh and
 * ops/bench/engine_gap.sh start one).  Every timed loop runs back to back
 * on its own, each call of it timed by the wall clock; figures are mean,
 * p50 and p99 in microseconds:
 *   1. the daemon alone (one request per SEARCH frame) before this
 *      process opens an engine: with a GPU engine, the daemon's context
 *      is then the only one on the GPU, as in production;
 *   2. three engines in this process, each alone, on the same requests:
 *      "public": ft_engine_search (validation, the duplicate check under
 *        the launch, values) on an engine of ft_engine_opts' defaults
 *        (32 slots sized for beam 4096, K 4096, T 64: the sizes serve's
 *        default settings give);
 *      "served": the daemon's own call, ft_slot_search_validated on
 *        replica 0 of a generation opened by ft_gen_open with the options
 *        serve builds (max_batch --serve-max-batch, default serve's 32;
 *        caps from the server's INFO), the requests validated before the
 *        clock as serve's door does: the span of the daemon's engine stage
 *        (router/batcher.c run_batch);
 *      "sized": ft_engine_search on an engine sized to these requests as
 *        `flashtrie bench` sizes it (max_batch 32, its largest --batch by
 *        default; beam, K and T the requests' largest: a big slot beside
 *        small ones): what `flashtrie bench --requests R.jsonl --batch
 *        1,32`'s b = 1 row times (it reports the mean);
 *   3. the daemon alone again, this process's engines open and idle;
 *      then, in this process, the C client's own work on these requests
 *      (router/client_impl.h, the code ft_client_search runs): its encode
 *      of each request into the nng message it sends and its decode of
 *      each answer's RESULT frame (the reference answer's, encoded as the
 *      server encodes it; every decoded answer checked); and nng alone: a
 *      REQ/REP echo over ipc:// in this process (a REP context answering
 *      on nng's callback thread, as the server's do, with a reply of the
 *      RESULT frames' mean size and no decode; REQ calls made as the
 *      client makes them), at a PING's 32 bytes and at these requests'
 *      frame sizes, call by call in turns; with them the split of what
 *      lies outside the server (nng echo + client encode + client decode
 *      + the rest);
 *   4. the engine ("public") and the daemon pair by pair, each request on
 *      one and then the other, then a PING: load from other jobs on a
 *      shared machine hits both alike, but on one GPU each call also pays
 *      the switch from the other process's GPU context (both sides' times
 *      rise by about the same);
 *   5. the engine alone in batches of B (--batch 0: skipped);
 *   6. C client threads for S seconds each (--clients 0: skipped), one
 *      request per frame, in four layouts (one shared handle, one handle
 *      of --connections P, a handle per thread, handles in --procs client
 *      processes) and three kinds of call (SEARCH, PING, nng alone: an
 *      echo server in a child process at the frames' sizes); for each
 *      SEARCH row the server's stages and where a call's time went
 *      (Little's law: the server's stages against the rest).
 * After 1, 3, 4 and 6 it prints the server's own account of where the
 * time of that loop's messages went (INFO's `# stages`: decode, queue
 * wait, engine, encode, send; means by the daemon's clock) and, for the
 * b = 1 loops, what lies outside the server: the client's mean round trip
 * less decode, queue, engine and encode (nng's transport both ways, the
 * client's encoding and decoding).
 * Every answer of the daemon and of the three engines is compared with the
 * public engine's, hit by hit, bit for bit; a difference is reported and
 * makes the exit status 1.
 * This is a benchmark, not a test: it is not run by ctest.
 */
#include <getopt.h>
#include <sys/wait.h>
#include <math.h>
#include <unistd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include "client_impl.h"
#include "flashtrie.h"
#include "flashtrie/internal/buf.h"
#include "flashtrie/internal/clock.h"
#include "flashtrie_client.h"
#include "frame.h"
#include "jsonl.h"
#include "nng_echo.h"

#define MAX_URLS 16 /* --url's list: the server's listeners */
#include "slot.h"

typedef struct bench {
    ft_request *reqs;
    ft_jsonl_req *jq;
    size_t n;
    ft_result *ref;       /* the engine's answers */
    ft_client *cli;
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

/* lat is one loop's latencies, us. */
typedef struct lat {
    double mean, p50, p99;
} lat;

static lat summarize(double *v, size_t n)
{
    lat l = {0, 0, 0};
    for (size_t i = 0; i < n; i++)
        l.mean += v[i];
    l.mean /= (double)(n ? n : 1);
    l.p50 = pct(v, n, .5);
    l.p99 = pct(v, n, .99);
    return l;
}

static void print_lat(const char *key, lat l, const char *what)
{
    printf("%s: mean %.1f p50 %.1f p99 %.1f (%s)\n", key, l.mean, l.p50,
           l.p99, what);
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
    double decode, queue, engine, answer, encode, send; /* sums, us */
    double send_call; /* of send: nng_ctx_send's own call */
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
        s.answer = info_num(sec, "answer_us") * s.requests;
        s.encode = info_num(sec, "encode_us") * s.messages;
        s.send = info_num(sec, "send_us") * s.sends;
        s.send_call = info_num(sec, "send_call_us") * s.sends;
    }
    ft_client_text_free(info);
    return s;
}

/* print_stages prints the mean of each stage between two accounts and,
 * given the client's mean round trip of those messages (rt_us > 0, one
 * request each), what of it lies outside the server. */
static void print_stages(const char *what, const stages *a, const stages *b,
                         double rt_us, const char *span)
{
    if (!a->ok || !b->ok) {
        printf("%s.stages_us: (the server's INFO has no stages)\n", what);
        return;
    }
    double m = b->messages - a->messages, r = b->requests - a->requests,
           s = b->sends - a->sends;
    double dec = m > 0 ? (b->decode - a->decode) / m : 0,
           que = r > 0 ? (b->queue - a->queue) / r : 0,
           eng = r > 0 ? (b->engine - a->engine) / r : 0,
           ans = r > 0 ? (b->answer - a->answer) / r : 0,
           enc = m > 0 ? (b->encode - a->encode) / m : 0,
           snd = s > 0 ? (b->send - a->send) / s : 0,
           sc = s > 0 ? (b->send_call - a->send_call) / s : 0;
    printf("%s.stages_us: decode %.1f queue %.1f engine %.1f answer %.1f "
           "encode %.1f send %.1f (of it nng_ctx_send's call %.1f) (the "
           "server's clock, means over %.0f messages; %s)\n", what, dec,
           que, eng, ans, enc, snd, sc, m, span);
    if (rt_us > 0)
        printf("%s.outside_server_us: %.1f (the client's mean round trip "
               "%.1f - decode - queue - engine - answer - encode: nng both "
               "ways, the client's encoding and decoding)\n",
               what, rt_us - dec - que - eng - ans - enc, rt_us);
}

/* info_get reads one "key: value" number of the server's INFO (any
 * section), or def when it is not there. */
static double info_get(ft_client *c, const char *key, double def)
{
    char *info = NULL;
    if (ft_client_info(c, &info, NULL, 0) != FT_OK)
        return def;
    char k[64];
    snprintf(k, sizeof k, "\n%s: ", key);
    const char *p = strstr(info, k);
    double v = p ? strtod(p + strlen(k), NULL) : def;
    ft_client_text_free(info);
    return v;
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

/* daemon_loop runs the set `rounds` times through the daemon, one request
 * a call, back to back, into v (us); answers differing from b->ref are
 * counted (when b->ref is set) and failures said once. */
static void daemon_loop(bench *b, size_t m, double *v, const int have_ref,
                        unsigned long *mismatch, unsigned long *failed)
{
    char err[512];
    for (size_t k = 0; k < m; k++) {
        size_t i = k % b->n;
        double t0 = fti_now();
        ft_client_results *res;
        int rc = ft_client_search(b->cli, &b->reqs[i], 1, &res, err,
                                  sizeof err);
        v[k] = (fti_now() - t0) * 1e6;
        if (rc != FT_OK) {
            if ((*failed)++ == 0)
                fprintf(stderr, "ft_daemon_bench: search: %s\n", err);
            continue;
        }
        if (have_ref)
            *mismatch += !same_result(ft_client_results_get(res, 0),
                                      &b->ref[i]);
        ft_client_results_free(res);
    }
}

/* ---- nng alone: a REQ/REP echo in this process ----------------------
 * A REP socket answers every request with a reply of rep_size bytes, no
 * decode: the received message is resized into the reply, as the server
 * does (serve_frame.c srv_frame_reply_msg), on nng's callback thread, as
 * the server's contexts do.  The REQ side makes each call as the C client
 * does (a context and an aio per call, a message of the request's size):
 * what nng itself costs for these sizes. */
typedef struct echo {
    echo_srv srv;
    nng_socket req;
    int up;
} echo;

static int echo_open(echo *e, const char *url, char *err, size_t errlen)
{
    memset(e, 0, sizeof *e);
    if (echo_srv_open(&e->srv, url, 1, err, errlen) != 0)
        return -1;
    int rv = echo_dial(&e->req, url, 1);
    if (rv != 0) {
        snprintf(err, errlen, "echo on %s: %s", url, nng_strerror(rv));
        echo_srv_close(&e->srv);
        return -1;
    }
    e->up = 1;
    return 0;
}

static void echo_close(echo *e)
{
    if (!e->up)
        return;
    nng_close(e->req);
    echo_srv_close(&e->srv);
    e->up = 0;
}

/* echo_call is one round trip: req_size bytes out, rep_size back; the
 * call's time (us), or -1 on failure. */
static double echo_call(echo *e, size_t req_size, size_t rep_size)
{
    double t = echo_rt(e->req, req_size, rep_size, 0, NULL);
    return t < 0 ? -1 : t;
}

/* ---- C clients at once: the daemon and nng alone, by layout ---------
 * Step 6 runs C client threads for S seconds in three layouts:
 *   shared: one ft_client handle (one REQ socket, one connection) for
 *           all threads, each call on a context of its own: every
 *           message of every thread crosses the one connection;
 *   conns:  one handle with --connections P connections (one REQ socket
 *           dialed P times): nng sends each request on a connection that
 *           is not sending, and its answer comes back on it;
 *   own:    a handle per thread (a socket and a connection each), as C
 *           separate client processes would connect;
 *   procs:  the own layout in --procs P client processes (see below);
 * (these four with coalesce 0: each call its own message)
 *   coalesced: one handle, one connection, ft_client_opts coalesce
 *           N, a row for each N of --coalesce N[,N...] (8,16; 16 is a
 *           handle of ft_client_opts_init's defaults): calls made
 *           while N frames are out leave together in the next (SEARCH
 *           only: PING and echo have no frames to share);
 * and three kinds of call: SEARCH (one request a frame, every answer
 * checked against the engine's), PING (answered on the server's nng
 * thread, no queue, no engine) and nng alone: an echo REP server in a
 * child process (this program run with --echo-serve) answering each
 * request with a reply of the size the request asks for, on nng's
 * callback thread, from as many contexts as the server has, at the
 * SEARCH and RESULT frames' mean sizes (every reply's length checked):
 * the ceiling nng itself allows these clients. */
enum { LOAD_SEARCH, LOAD_PING, LOAD_ECHO };
enum { LAY_SHARED, LAY_CONNS, LAY_OWN, LAY_PROCS, LAY_COALESCED, LAY_COUNT };
static const char *const lay_name[LAY_COUNT] = {"shared", "conns", "own",
                                                "procs", "coalesced"};

typedef struct load {
    bench *b;
    int kind;
    ft_client **cli;   /* [C]: the same handle, or one per thread */
    nng_socket *esock; /* [C]: echo sockets, the same or one per thread */
    size_t qs, rs;     /* echo: bytes out and back */
    atomic_int next_thread;
    atomic_size_t next;
    atomic_ulong done, bad, failed;
    atomic_int stop;
} load;

static void *load_main(void *arg)
{
    load *L = arg;
    bench *b = L->b;
    int t = atomic_fetch_add(&L->next_thread, 1);
    char err[512];
    while (!atomic_load(&L->stop)) {
        int bad = 0, rc;
        if (L->kind == LOAD_ECHO) {
            double t_us = echo_rt(L->esock[t], L->qs, L->rs, 0, NULL);
            bad = t_us == -2;
            rc = t_us == -1 ? FT_ECONN : FT_OK;
            if (rc != FT_OK)
                snprintf(err, sizeof err, "echo failed");
        } else if (L->kind == LOAD_PING) {
            rc = ft_client_ping(L->cli[t], err, sizeof err);
        } else {
            size_t i = atomic_fetch_add(&L->next, 1) % b->n;
            ft_client_results *res;
            rc = ft_client_search(L->cli[t], &b->reqs[i], 1, &res, err,
                                  sizeof err);
            if (rc == FT_OK) {
                bad = !same_result(ft_client_results_get(res, 0), &b->ref[i]);
                ft_client_results_free(res);
            }
        }
        if (rc != FT_OK) {
            if (atomic_fetch_add(&L->failed, 1) == 0)
                fprintf(stderr, "ft_daemon_bench: clients: %s\n", err);
            continue;
        }
        atomic_fetch_add(&L->bad, (unsigned long)bad);
        atomic_fetch_add(&L->done, 1);
    }
    return NULL;
}

/* load_run runs L with C threads for S seconds; the calls a second. */
static double load_run(load *L, int clients, double seconds)
{
    pthread_t *th = calloc((size_t)clients, sizeof *th);
    atomic_store(&L->next_thread, 0);
    atomic_store(&L->stop, 0);
    atomic_store(&L->done, 0);
    double c0 = fti_now();
    for (int i = 0; i < clients; i++)
        pthread_create(&th[i], NULL, load_main, L);
    struct timespec ts = {(time_t)seconds,
                          (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
    atomic_store(&L->stop, 1);
    for (int i = 0; i < clients; i++)
        pthread_join(th[i], NULL);
    double q = (double)atomic_load(&L->done) / (fti_now() - c0);
    free(th);
    return q;
}

/* ---- the echo server (--echo-serve URL): a child process ------------ */

/* echo_serve is the child's whole life: the echo server on url with n
 * contexts (nng_echo.h), until its standard input (the parent's pipe)
 * closes. */
static int echo_serve(const char *url, int n)
{
    echo_srv e;
    char err[512];
    if (echo_srv_open(&e, url, n, err, sizeof err) != 0) {
        fprintf(stderr, "ft_daemon_bench: %s\n", err);
        return 1;
    }
    /* ready: the parent reads this line before it dials */
    printf("ready\n");
    fflush(stdout);
    char buf[64];
    while (read(0, buf, sizeof buf) > 0)
        ;
    echo_srv_close(&e);
    return 0;
}

/* echo_child starts this program as the echo server on url with n
 * contexts; *to is the pipe whose closing stops it.  Returns its pid, or
 * -1. */
static pid_t echo_child(const char *url, int n, int *to)
{
    char ns[16];
    snprintf(ns, sizeof ns, "%d", n);
    char *argv[] = {"ft_daemon_bench", "--echo-serve", (char *)url,
                    "--echo-contexts", ns, NULL};
    int from;
    pid_t pid = spawn_self(argv, to, &from);
    if (pid < 0)
        return -1;
    char line[16] = {0};
    ssize_t r = read(from, line, sizeof line - 1);
    close(from);
    if (r <= 0 || strncmp(line, "ready", 5) != 0) {
        close(*to);
        waitpid(pid, NULL, 0);
        return -1;
    }
    return pid;
}

/* ---- the procs layout: client processes -----------------------------
 * One process's nng serves all its connections with one poller thread
 * and one pool of task threads; C clients of a deployment are C
 * processes, each with its own.  The procs layout runs the C client
 * threads in P processes (this program run with --client-proc), C / P
 * threads each, a handle (or echo socket) per thread: the same load
 * without the one client process's nng in the way.  The parent hands
 * them the reference answers as RESULT frames in a file (u64 length,
 * bytes; the frames step 3 encodes, id 7), starts them together and sums
 * what they report. */

/* client_proc is the child's whole life (--client-proc
 * KIND:THREADS:SECONDS:QS:RS:BASE with --url, --requests, --refs):
 * connect thread i to URL (BASE + i) mod the URLs given,
 * say "ready", wait for the go byte on stdin, run, print "done N bad B
 * failed F secs S". */
static int client_proc(const char *spec, const char *const *urls,
                       int n_urls, const char *reqs, const char *refs)
{
    int kind, threads, base;
    double seconds;
    size_t qs, rs;
    if (sscanf(spec, "%d:%d:%lf:%zu:%zu:%d", &kind, &threads, &seconds, &qs,
               &rs, &base) != 6 || threads < 1 || base < 0 || n_urls < 1) {
        fprintf(stderr, "ft_daemon_bench: --client-proc %s: bad\n", spec);
        return 2;
    }
    bench b;
    memset(&b, 0, sizeof b);
    ft_client_results **keep = NULL;
    if (kind == LOAD_SEARCH) {
        if (reqs == NULL || refs == NULL || load_requests(&b, reqs) != 0)
            return 1;
        FILE *f = fopen(refs, "rb");
        keep = calloc(b.n, sizeof *keep);
        for (size_t i = 0; f != NULL && i < b.n; i++) {
            uint64_t len;
            char err[256];
            void *p = NULL;
            if (fread(&len, 8, 1, f) != 1 || (p = malloc(len)) == NULL ||
                fread(p, 1, len, f) != len ||
                fti_client_search_decode(p, len, 7, 1, &keep[i], err,
                                         sizeof err) != FT_OK) {
                fprintf(stderr, "ft_daemon_bench: %s: answer %zu unread\n",
                        refs, i + 1);
                return 1;
            }
            free(p);
            ft_result_free(&b.ref[i]);
            b.ref[i] = *ft_client_results_get(keep[i], 0);
        }
        if (f == NULL)
            return 1;
        fclose(f);
    }
    load L;
    memset(&L, 0, sizeof L);
    L.b = &b;
    L.kind = kind;
    L.qs = qs;
    L.rs = rs;
    L.cli = calloc((size_t)threads, sizeof *L.cli);
    L.esock = calloc((size_t)threads, sizeof *L.esock);
    ft_client_opts co;
    ft_client_opts_init(&co);
    co.timeout_ms = 30000;
    co.coalesce = 0; /* one thread a handle: nothing to share anyway */
    char err[512];
    for (int i = 0; i < threads; i++) {
        /* thread base + i of all the processes' threads: its listener */
        const char *url = urls[(base + i) % n_urls];
        int rv = kind == LOAD_ECHO
                     ? echo_dial(&L.esock[i], url, 1)
                     : ft_client_connect(&L.cli[i], url, &co, err, sizeof err);
        if (rv != 0) {
            fprintf(stderr, "ft_daemon_bench: client process: connect %s "
                    "failed\n", url);
            return 1;
        }
    }
    printf("ready\n");
    fflush(stdout);
    char go;
    if (read(0, &go, 1) != 1)
        return 1;
    double t0 = fti_now();
    load_run(&L, threads, seconds);
    double el = fti_now() - t0;
    printf("done %lu bad %lu failed %lu secs %.6f\n",
           (unsigned long)atomic_load(&L.done),
           (unsigned long)atomic_load(&L.bad),
           (unsigned long)atomic_load(&L.failed), el);
    fflush(stdout);
    for (int i = 0; i < threads; i++) {
        if (kind == LOAD_ECHO)
            nng_close(L.esock[i]);
        else
            ft_client_close(L.cli[i]);
    }
    return 0;
}

/* procs_run runs kind in P client processes of C / P threads (the
 * remainder spread) against url for S seconds; the calls a second (the
 * sum of each process's rate), wrong and failed calls added to *bad and
 * *failed; -1 when a process could not start. */
static double procs_run(int kind, int procs, int clients, double seconds,
                        const char *url, const char *reqs, const char *refs,
                        size_t qs, size_t rs, unsigned long *bad,
                        unsigned long *failed)
{
    pid_t *pid = calloc((size_t)procs, sizeof *pid);
    int *to = calloc((size_t)procs, sizeof *to);
    int base = 0; /* the first thread's number in the next process */
    FILE **from = calloc((size_t)procs, sizeof *from);
    int ok = 1;
    for (int p = 0; p < procs; p++)
        to[p] = -1;
    for (int p = 0; p < procs && ok; p++) {
        int t = clients / procs + (p < clients % procs);
        char spec[128];
        snprintf(spec, sizeof spec, "%d:%d:%.3f:%zu:%zu:%d", kind, t, seconds,
                 qs, rs, base);
        base += t;
        char *argv[] = {"ft_daemon_bench", "--client-proc", spec, "--url",
                        (char *)url, "--requests", (char *)reqs, "--refs",
                        (char *)refs, NULL};
        int fd;
        pid[p] = spawn_self(argv, &to[p], &fd);
        if (pid[p] < 0)
            ok = 0;
        else if ((from[p] = fdopen(fd, "r")) == NULL) {
            close(fd);
            ok = 0;
        }
    }
    char line[256];
    for (int p = 0; ok && p < procs; p++)
        ok = fgets(line, sizeof line, from[p]) != NULL &&
             strncmp(line, "ready", 5) == 0;
    double q = -1;
    if (ok) {
        q = 0;
        for (int p = 0; p < procs; p++)
            if (write(to[p], "g", 1) != 1)
                ok = 0;
        for (int p = 0; p < procs; p++) {
            unsigned long d = 0, bb = 0, f = 0;
            double secs = 0;
            if (fgets(line, sizeof line, from[p]) == NULL ||
                sscanf(line, "done %lu bad %lu failed %lu secs %lf", &d, &bb,
                       &f, &secs) != 4 || secs <= 0) {
                ok = 0;
                continue;
            }
            q += (double)d / secs;
            *bad += bb;
            *failed += f;
        }
        if (!ok)
            q = -1;
    }
    for (int p = 0; p < procs; p++) {
        if (to[p] >= 0)
            close(to[p]);
        if (from[p] != NULL)
            fclose(from[p]);
        if (pid[p] > 0)
            waitpid(pid[p], NULL, 0);
    }
    free(pid);
    free(to);
    free(from);
    return q;
}

/* report_load prints one row of step 6: the rate, for SEARCH its share
 * of the engine's batch rate, the mean batch of the batches run
 * meanwhile, the server's stages, and where a call's time went: of the
 * C / rate a call takes, the server's stages (decode, queue, engine,
 * answer, encode, send: each call is one message of one request) and
 * the rest, outside them (nng's transport both ways, the client's own
 * work): by Little's law the calls in flight split the same way. */
static void report_load(const char *kind, int lay, int co, int clients,
                        double q,
                        double eng_qps, int batch, const stages *sa,
                        const stages *sb, double batches, unsigned long bad,
                        unsigned long nf)
{
    char key[64];
    snprintf(key, sizeof key, "clients%d.%s.%s", clients, kind,
             lay_name[lay]);
    if (co > 0)
        snprintf(key + strlen(key), sizeof key - strlen(key), "%d", co);
    if (q < 0) {
        printf("%s_qps: (the client processes failed)\n", key);
        return;
    }
    int search = !strcmp(kind, "search");
    printf("%s_qps: %.0f", key, q);
    if (search && eng_qps > 0)
        printf(" (%.0f%% of the engine's batch %d)", 100 * q / eng_qps, batch);
    double r = sb->requests - sa->requests, m = sb->messages - sa->messages,
           s = sb->sends - sa->sends;
    if (search && batches > 0)
        printf("; mean batch %.2f", r / batches);
    if (search && lay == LAY_COALESCED && m > 0)
        printf("; %.2f requests a message", r / m);
    printf("; %lu wrong, %lu failed\n", bad, nf);
    /* (the split below: a call meets its message's decode, encode and
     * send and its request's queue, engine and answer; in a coalesced
     * row it also waits, outside the stages, for a frame to leave in) */
    if (!search || r <= 0 || m <= 0 || q <= 0)
        return;
    print_stages(key, sa, sb, 0, "engine: a batch's call, per request of it");
    double in = (sb->decode - sa->decode + sb->encode - sa->encode) / m +
                (sb->queue - sa->queue + sb->engine - sa->engine +
                 sb->answer - sa->answer) / r +
                (s > 0 ? (sb->send - sa->send) / s : 0);
    double call = (double)clients / q * 1e6;
    printf("%s.where_us: a call %.0f (%d calls in flight / %.0f a second) = "
           "%.0f in the server's stages + %.0f outside them (nng's "
           "receive and transport both ways, the client's work); calls in "
           "flight: %.1f in the stages, %.1f outside\n", key, call,
           clients, q, in, call - in, q * in / 1e6,
           (double)clients - q * in / 1e6);
}

/* The in-process engines of step 2. */
enum { E_PUBLIC, E_SERVED, E_SIZED, E_COUNT };

typedef struct engines {
    ft_engine *eng[E_COUNT]; /* [E_SERVED]: NULL, the generation's */
    ft_gen *gen;
} engines;

static int engine_call(engines *e, int which, const ft_request *r,
                       ft_result *res)
{
    if (which == E_SERVED)
        return ft_slot_search_validated(e->gen, 0, r, 1, res);
    return ft_engine_search(e->eng[which], r, res);
}

int main(int argc, char **argv)
{
    const char *index = NULL, *url = NULL, *reqpath = NULL;
    const char *url_list = NULL;
    int threads = 1, rounds = 3, clients = 64, batch = 32, gpu = 0;
    int serve_max_batch = 32, conns = 8, echo_ctx = 64, procs = 8;
    int co_n[4] = {8, 16}, n_co = 2; /* --coalesce: the coalesced rows' N */
    int kinds_on = 7; /* step 6's kinds: bits 1 << LOAD_* */
    const char *echo_url = NULL, *client_spec = NULL, *refs = NULL;
    double seconds = 5;
    static const struct option lo[] = {
        {"index", 1, 0, 'i'},   {"url", 1, 0, 'u'},     {"requests", 1, 0, 'r'},
        {"threads", 1, 0, 't'}, {"rounds", 1, 0, 'n'},  {"clients", 1, 0, 'c'},
        {"batch", 1, 0, 'b'},   {"seconds", 1, 0, 's'}, {"engine", 1, 0, 'e'},
        {"serve-max-batch", 1, 0, 'm'}, {"connections", 1, 0, 'p'},
        {"echo-serve", 1, 0, 'E'},      {"echo-contexts", 1, 0, 'X'},
        {"procs", 1, 0, 'P'},           {"client-proc", 1, 0, 'C'},
        {"refs", 1, 0, 'R'},            {"kinds", 1, 0, 'K'},
        {"coalesce", 1, 0, 'O'},
        {0, 0, 0, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (ch) {
        case 'i': index = optarg; break;
        case 'u': url_list = optarg; break;
        case 'r': reqpath = optarg; break;
        case 't': threads = atoi(optarg); break;
        case 'n': rounds = atoi(optarg); break;
        case 'c': clients = atoi(optarg); break;
        case 'b': batch = atoi(optarg); break;
        case 's': seconds = atof(optarg); break;
        case 'm': serve_max_batch = atoi(optarg); break;
        case 'p': conns = atoi(optarg); break;
        case 'E': echo_url = optarg; break;
        case 'X': echo_ctx = atoi(optarg); break;
        case 'P': procs = atoi(optarg); break;
        case 'C': client_spec = optarg; break;
        case 'R': refs = optarg; break;
        case 'O': {
            char *e = optarg;
            for (n_co = 0; n_co < 4 && *e;) {
                co_n[n_co++] = (int)strtol(e, &e, 10);
                if (*e == ',')
                    e++;
            }
            break;
        }
        case 'K':
            kinds_on = (strstr(optarg, "search") ? 1 << LOAD_SEARCH : 0) |
                       (strstr(optarg, "ping") ? 1 << LOAD_PING : 0) |
                       (strstr(optarg, "echo") ? 1 << LOAD_ECHO : 0);
            break;
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
    /* --url URL[,URL...]: the first for everything, the others (the
     * server's other listeners) shared out among step 6's own and procs
     * clients. */
    char url_buf[2048], *urls[MAX_URLS];
    int n_urls = 0;
    if (url_list != NULL) {
        if (strlen(url_list) >= sizeof url_buf) {
            fprintf(stderr, "ft_daemon_bench: --url: too long\n");
            return 2;
        }
        strcpy(url_buf, url_list);
        for (char *save, *t = strtok_r(url_buf, ",", &save); t != NULL;
             t = strtok_r(NULL, ",", &save)) {
            if (n_urls == MAX_URLS) {
                fprintf(stderr, "ft_daemon_bench: --url: more than %d URLs\n",
                        MAX_URLS);
                return 2;
            }
            urls[n_urls++] = t;
        }
        url = n_urls > 0 ? urls[0] : NULL;
    }
    if (echo_url != NULL) /* the child of step 6 */
        return echo_serve(echo_url, echo_ctx > 0 ? echo_ctx : 64);
    if (client_spec != NULL) /* a child of the procs layout */
        return client_proc(client_spec, (const char *const *)urls, n_urls,
                           reqpath, refs);
    if (!index || !url || !reqpath || rounds < 1 || clients < 0 ||
        batch < 0 || serve_max_batch < 1 || serve_max_batch > 64 ||
        conns < 1 || conns > FT_CLIENT_MAX_CONNECTIONS || procs < 1 ||
        (clients > 0 && procs > clients)) {
        fprintf(stderr, "usage: ft_daemon_bench --index F --url URL[,URL...] --requests "
                        "R.jsonl [--engine cpu|gpu] [--threads N] [--rounds N] "
                        "[--clients C (0: skip)] [--batch B (0: skip)] "
                        "[--seconds S] [--serve-max-batch M (1..64, serve's "
                        "max_batch: 32)] [--connections P (1..%d: the conns "
                        "layout's, 8)] [--procs P (the procs layout's client "
                        "processes, 8)] [--coalesce N[,N...] (1..%d: the "
                        "coalesced rows' frames out, up to 4 rows: 8,16)] "
                        "[--kinds search,ping,echo "
                        "(step 6's calls: all)]\n", FT_CLIENT_MAX_CONNECTIONS,
                        FT_CLIENT_MAX_COALESCE);
        return 2;
    }
    /* Whole lines on stdout, whatever the engines log on stderr
     * meanwhile (the two often go to one file). */
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* The engines' open lines (slots, how the host waits) on stderr. */
    ft_log_set_level(FT_LOG_INFO);
    bench b;
    memset(&b, 0, sizeof b);
    if (load_requests(&b, reqpath) != 0)
        return 1;
    char err[512];
    ft_library *lib;
    if (ft_library_open(&lib, index, 0, err, sizeof err) != FT_OK) {
        fprintf(stderr, "ft_daemon_bench: %s\n", err);
        return 1;
    }
    ft_client_opts co;
    ft_client_opts_init(&co);
    co.timeout_ms = 30000;
    /* The shared, conns and own layouts send each call as its own
     * message (coalesce 0); the default handle's coalescing (16) is the
     * coalesced16 row. */
    co.coalesce = 0;
    if (ft_client_connect(&b.cli, url, &co, err, sizeof err) != FT_OK ||
        ft_client_ping(b.cli, err, sizeof err) != FT_OK) {
        fprintf(stderr, "ft_daemon_bench: %s\n", err);
        return 1;
    }
    size_t m = b.n * (size_t)rounds;
    unsigned long mismatch = 0, failed = 0;
    double *v = malloc(m * sizeof *v);

    /* 1. The daemon alone, before this process has an engine (and, with a
     * GPU engine, a CUDA context): after a warm-up pass; its answers are
     * kept for the check once the reference engine is open. */
    ft_client_results **first = calloc(b.n, sizeof *first);
    for (size_t i = 0; i < b.n; i++)
        if (ft_client_search(b.cli, &b.reqs[i], 1, &first[i], err,
                             sizeof err) != FT_OK) {
            first[i] = NULL;
            if (failed++ == 0)
                fprintf(stderr, "ft_daemon_bench: search: %s\n", err);
        }
    stages s0 = get_stages(b.cli);
    daemon_loop(&b, m, v, 0, &mismatch, &failed);
    stages s1 = get_stages(b.cli);
    lat dnc = summarize(v, m);

    /* 2. The engines of this process. */
    engines E;
    memset(&E, 0, sizeof E);
    ft_engine_opts eo;
    ft_engine_opts_init(&eo);
    eo.kind = gpu ? FT_ENGINE_GPU : FT_ENGINE_CPU;
    eo.threads = threads;
    if (ft_engine_open(&E.eng[E_PUBLIC], ft_library_shard(lib, 0), &eo, err,
                       sizeof err) != FT_OK) {
        fprintf(stderr, "ft_daemon_bench: engine: %s\n", err);
        return 1;
    }
    /* As `flashtrie bench` sizes it (daemon/bench/bench_run.c,
     * bench_run_engines): its largest batch, the requests' largest beam,
     * K and T. */
    ft_engine_opts es = eo;
    es.max_batch = 32;
    for (size_t i = 0; i < b.n; i++) {
        const ft_request *q = &b.reqs[i];
        es.max_beam = q->beam > es.max_beam ? q->beam : es.max_beam;
        es.max_k = q->K > es.max_k ? q->K : es.max_k;
        es.max_t = q->T > es.max_t ? q->T : es.max_t;
    }
    if (ft_engine_open(&E.eng[E_SIZED], ft_library_shard(lib, 0), &es, err,
                       sizeof err) != FT_OK) {
        fprintf(stderr, "ft_daemon_bench: sized engine: %s\n", err);
        return 1;
    }
    /* As serve opens it (daemon/serve.c start_config, router/slot.c
     * open_one): its caps from the server's INFO (`# limits`). */
    ft_slot_opts so;
    ft_slot_opts_init(&so);
    so.engine = gpu ? FT_SLOT_GPU : FT_SLOT_CPU;
    so.cpu_threads = threads;
    so.max_batch = (uint32_t)serve_max_batch;
    so.max_beam = (uint32_t)info_get(b.cli, "caps.max_beam", FT_MAX_BEAM);
    so.max_k = (uint32_t)info_get(b.cli, "caps.max_k", FT_MAX_K);
    so.max_t = (uint32_t)info_get(b.cli, "caps.max_t", FT_MAX_T);
    if (ft_gen_open(&E.gen, index, &so, 1, err, sizeof err) != FT_OK) {
        fprintf(stderr, "ft_daemon_bench: served engine: %s\n", err);
        return 1;
    }
    printf("requests: %zu, rounds: %d, engine: %s\n", b.n, rounds,
           ft_engine_note(E.eng[E_PUBLIC]));
    printf("engines in this process: public = ft_engine_search, defaults "
           "(32 slots, beam/K/T 4096/4096/64); served = "
           "ft_slot_search_validated, opened as serve opens it (max_batch "
           "%u, caps %u/%u/%u), requests validated before the clock; sized "
           "= ft_engine_search, sized as flashtrie bench sizes it (max_batch "
           "32, beam/K/T %u/%u/%u)\n", so.max_batch, so.max_beam, so.max_k,
           so.max_t, es.max_beam, es.max_k, es.max_t);
    /* The reference answers (public), checked against the daemon's. */
    for (size_t i = 0; i < b.n; i++) {
        ft_engine_search(E.eng[E_PUBLIC], &b.reqs[i], &b.ref[i]);
        if (first[i] != NULL) {
            mismatch += !same_result(ft_client_results_get(first[i], 0),
                                     &b.ref[i]);
            ft_client_results_free(first[i]);
        }
    }
    free(first);
    for (size_t i = 0; i < b.n; i++)
        if (ft_request_validate(&b.reqs[i], so.max_beam, err, sizeof err) !=
            FT_OK) {
            fprintf(stderr, "ft_daemon_bench: request %zu: %s (the served "
                    "engine takes validated requests only)\n", i + 1, err);
            return 1;
        }
    ft_result tmp;
    ft_result_alloc(&tmp, FT_MAX_BEAM, FT_MAX_T);
    lat el[E_COUNT];
    for (int e = 0; e < E_COUNT; e++) {
        /* a warm-up pass (answers checked), then the timed loop */
        for (size_t i = 0; i < b.n; i++) {
            engine_call(&E, e, &b.reqs[i], &tmp);
            mismatch += !same_result(&tmp, &b.ref[i]);
        }
        for (size_t k = 0; k < m; k++) {
            double t0 = fti_now();
            engine_call(&E, e, &b.reqs[k % b.n], &tmp);
            v[k] = (fti_now() - t0) * 1e6;
        }
        el[e] = summarize(v, m);
    }

    /* 3. The daemon alone again, with this process's engines open, idle. */
    stages s2 = get_stages(b.cli);
    daemon_loop(&b, m, v, 1, &mismatch, &failed);
    stages s3 = get_stages(b.cli);
    lat dal = summarize(v, m);

    /* 3b. The client's own work on these requests, in this process: its
     * encode of each request (into the nng message it sends) and its
     * decode of each answer (the RESULT frame the server sends for the
     * reference answer), timed call by call; every decoded answer is
     * checked.  Then nng alone at these sizes (see echo above) and at a
     * PING's, call by call in turns, on ipc:// in this process. */
    double *vc = malloc(m * sizeof *vc);
    double req_bytes = 0, rep_bytes = 0;
    ft_buf *rframes = calloc(b.n, sizeof *rframes);
    /* The answers as the server frames them for this client: with a
     * checksum exactly when the client's SEARCH carries one. */
    uint32_t rflags = fti_client_frame_flags(b.cli);
    for (size_t i = 0; i < b.n; i++) {
        ft_buf_init(&rframes[i]);
        size_t rsz;
        if (ft_frame_result_size(&b.ref[i], 1, &rsz) != FT_OK ||
            ft_buf_reserve(&rframes[i], rsz) != FT_OK ||
            ft_frame_encode_result_to(rframes[i].data, rsz, 7, rflags,
                                      &b.ref[i], 1) != FT_OK) {
            fprintf(stderr, "ft_daemon_bench: cannot encode answer %zu\n",
                    i + 1);
            return 1;
        }
        rframes[i].len = rsz;
        rep_bytes += (double)rframes[i].len;
    }
    rep_bytes /= (double)b.n;
    for (size_t k = 0; k < m; k++) {
        size_t i = k % b.n;
        nng_msg *msg;
        double t0 = fti_now();
        int rc = fti_client_search_encode(b.cli, 7, &b.reqs[i], 1, &msg, err,
                                          sizeof err);
        v[k] = (fti_now() - t0) * 1e6;
        if (rc != FT_OK) {
            fprintf(stderr, "ft_daemon_bench: client encode: %s\n", err);
            return 1;
        }
        if (k < b.n)
            req_bytes += (double)nng_msg_len(msg);
        nng_msg_free(msg);
        ft_client_results *res;
        t0 = fti_now();
        rc = fti_client_search_decode(rframes[i].data, rframes[i].len, 7, 1,
                                      &res, err, sizeof err);
        vc[k] = (fti_now() - t0) * 1e6;
        if (rc != FT_OK) {
            fprintf(stderr, "ft_daemon_bench: client decode: %s\n", err);
            return 1;
        }
        mismatch += !same_result(ft_client_results_get(res, 0), &b.ref[i]);
        ft_client_results_free(res);
    }
    req_bytes /= (double)b.n;
    lat cenc = summarize(v, m), cdec = summarize(vc, m);
    /* The reference answers for the procs layout's processes. */
    char refpath[256];
    {
        const char *td = getenv("TMPDIR");
        snprintf(refpath, sizeof refpath, "%s/ft_daemon_bench_refs.%ld",
                 td && *td ? td : "/tmp", (long)getpid());
        FILE *rf = fopen(refpath, "wb");
        for (size_t i = 0; rf != NULL && i < b.n; i++) {
            uint64_t len = rframes[i].len;
            fwrite(&len, 8, 1, rf);
            fwrite(rframes[i].data, 1, rframes[i].len, rf);
        }
        if (rf == NULL || fclose(rf) != 0)
            refpath[0] = 0;
    }
    for (size_t i = 0; i < b.n; i++)
        ft_buf_free(&rframes[i]);
    free(rframes);
    /* nng alone */
    lat esmall = {0, 0, 0}, ebig = {0, 0, 0};
    int echo_ok = 0;
    {
        char eurl[256];
        const char *td = getenv("TMPDIR");
        snprintf(eurl, sizeof eurl, "ipc://%s/ft_daemon_bench_echo.%ld",
                 td && *td ? td : "/tmp", (long)getpid());
        echo e;
        if (echo_open(&e, eurl, err, sizeof err) != 0) {
            fprintf(stderr, "ft_daemon_bench: %s (no nng echo rows)\n",
                    err);
        } else {
            size_t qs = (size_t)(req_bytes + .5), rs = (size_t)(rep_bytes + .5);
            echo_ok = 1;
            for (size_t k = 0; k < b.n && echo_ok; k++) /* warm-up */
                echo_ok = echo_call(&e, 32, 32) >= 0 &&
                          echo_call(&e, qs, rs) >= 0;
            for (size_t k = 0; k < m && echo_ok; k++) {
                v[k] = echo_call(&e, 32, 32);
                vc[k] = echo_call(&e, qs, rs);
                echo_ok = v[k] >= 0 && vc[k] >= 0;
            }
            if (echo_ok) {
                esmall = summarize(v, m);
                ebig = summarize(vc, m);
            } else {
                fprintf(stderr, "ft_daemon_bench: nng echo failed\n");
            }
            echo_close(&e);
        }
    }
    free(vc);

    print_lat("b1.daemon_alone_first_us", dnc,
              gpu ? "back to back, before this process opened an engine: "
                    "the server's CUDA context alone on the GPU"
                  : "back to back, before this process opened an engine");
    print_stages("b1.daemon_alone_first", &s0, &s1, dnc.mean,
                 "that loop");
    print_lat("b1.engine_alone_us", el[E_PUBLIC],
              "public: ft_engine_search, back to back; the server idle");
    print_lat("b1.engine_served_us", el[E_SERVED],
              "served: the daemon's engine call as serve opens and calls "
              "it, back to back: compare with the engine stage");
    print_lat("b1.engine_sized_us", el[E_SIZED],
              "sized: as flashtrie bench opens and times it (its table: "
              "the mean, in ms)");
    print_lat("b1.daemon_alone_us", dal,
              "back to back, this process's engines open and idle");
    print_stages("b1.daemon_alone", &s2, &s3, dal.mean, "that loop");
    printf("b1.added_alone_us: p50 %.1f mean %.1f (daemon alone - engine "
           "served: what the daemon adds around its engine call, with "
           "the engine to itself)\n", dal.p50 - el[E_SERVED].p50,
           dal.mean - el[E_SERVED].mean);
    print_lat("b1.client_encode_us", cenc,
              "in this process: the C client's encode of one request, "
              "straight into the nng message it sends");
    print_lat("b1.client_decode_us", cdec,
              "in this process: the C client's decode of one answer (its "
              "RESULT frame) into the results it returns");
    printf("b1.frame_bytes: request %.0f, reply %.0f (means of these "
           "requests' SEARCH and RESULT frames)\n", req_bytes, rep_bytes);
    if (echo_ok) {
        print_lat("nng.echo_ping_size_us", esmall,
                  "nng alone: REQ/REP over ipc:// in this process, 32 B "
                  "each way, no decode; in turns with the next row");
        char what[160];
        snprintf(what, sizeof what, "nng alone: the same echo, %.0f B out "
                 "and %.0f B back (these requests' frames), no decode",
                 req_bytes, rep_bytes);
        print_lat("nng.echo_frame_size_us", ebig, what);
        if (s2.ok && s3.ok) {
            double mm = s3.messages - s2.messages,
                   rr = s3.requests - s2.requests;
            double srv = mm > 0 && rr > 0
                             ? ((s3.decode - s2.decode) +
                                (s3.encode - s2.encode)) / mm +
                                   ((s3.queue - s2.queue) +
                                    (s3.engine - s2.engine) +
                                    (s3.answer - s2.answer)) / rr
                             : 0;
            double out = dal.mean - srv;
            printf("b1.outside_split_us: %.1f outside the server = nng echo "
                   "%.1f + client encode %.1f + client decode %.1f + rest "
                   "%.1f (means; rest: the server's receive and send "
                   "around its stages, and what a second process and the "
                   "real server add to nng's echo)\n", out, ebig.mean,
                   cenc.mean, cdec.mean,
                   out - ebig.mean - cenc.mean - cdec.mean);
        }
    }

    /* 4. Paired. */
    double *le = malloc(m * sizeof *le), *ld = malloc(m * sizeof *ld),
           *dd = malloc(m * sizeof *dd), *lp = malloc(m * sizeof *lp);
    stages st0 = get_stages(b.cli);
    for (size_t k = 0; k < m; k++) {
        size_t i = k % b.n;
        double t0 = fti_now();
        ft_engine_search(E.eng[E_PUBLIC], &b.reqs[i], &tmp);
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
    stages st1 = get_stages(b.cli);
    lat pe = summarize(le, m), pd = summarize(ld, m), pp = summarize(lp, m);
    double a50 = pct(dd, m, .5);
    print_lat("b1.engine_us", pe, "public, paired: each call follows a "
              "daemon call and a PING");
    print_lat("b1.daemon_us", pd, "paired: each call follows an engine "
              "call of this process");
    printf("b1.added_us: p50 %.1f (paired; p50 difference %.1f)\n", a50,
           pd.p50 - pe.p50);
    print_lat("ping_us", pp, "nng's round trip, no queue");
    print_stages("b1.paired", &st0, &st1, pd.mean,
                 gpu ? "the paired loop: each of the server's engine calls "
                       "follows one of this process's on the same GPU and "
                       "pays the switch between the two processes' CUDA "
                       "contexts, as b1.engine_us does"
                     : "the paired loop");

    /* 5. The engine alone in batches. */
    double eng_qps = 0;
    if (batch > 0) {
        ft_result *bres = calloc((size_t)batch, sizeof *bres);
        for (int i = 0; i < batch; i++)
            ft_result_alloc(&bres[i], FT_MAX_BEAM, FT_MAX_T);
        size_t total = 0;
        double t0 = fti_now();
        for (int r = 0; r < rounds || fti_now() - t0 < 1.0; r++)
            for (size_t i = 0; i < b.n; i += (size_t)batch) {
                size_t k = b.n - i < (size_t)batch ? b.n - i : (size_t)batch;
                ft_engine_search_batch(E.eng[E_PUBLIC], &b.reqs[i], k, bres);
                total += k;
            }
        eng_qps = (double)total / (fti_now() - t0);
        printf("engine.batch%d_qps: %.0f\n", batch, eng_qps);
        for (int i = 0; i < batch; i++)
            ft_result_free(&bres[i]);
        free(bres);
    }

    /* 6. C clients at once: nng alone, PING and SEARCH, each in the
     * three layouts (see load above). */
    if (clients > 0) {
        ft_client **cl = calloc((size_t)clients, sizeof *cl);
        ft_client **own = calloc((size_t)clients, sizeof *own);
        nng_socket *es = calloc((size_t)clients, sizeof *es);
        ft_client *pc = NULL, *cc[4] = {NULL, NULL, NULL, NULL};
        ft_client_opts po = co;
        po.connections = conns;
        int ok = cl && own && es;
        if (ok && ft_client_connect(&pc, url, &po, err, sizeof err) != FT_OK) {
            fprintf(stderr, "ft_daemon_bench: %d connections: %s\n", conns,
                    err);
            ok = 0;
        }
        for (int k = 0; ok && k < n_co; k++) {
            po = co;
            po.coalesce = co_n[k];
            if (ft_client_connect(&cc[k], url, &po, err, sizeof err) !=
                FT_OK) {
                fprintf(stderr, "ft_daemon_bench: coalesce %d: %s\n",
                        co_n[k], err);
                ok = 0;
            }
        }
        for (int i = 0; ok && i < clients; i++)
            if (ft_client_connect(&own[i], urls[i % n_urls], &co, err,
                                  sizeof err) != FT_OK) {
                fprintf(stderr, "ft_daemon_bench: client %d: %s\n", i, err);
                ok = 0;
            }
        /* The echo server: as many contexts as the daemon has. */
        int ectx = (int)info_get(b.cli, "contexts", 64);
        char eurl[256];
        const char *td = getenv("TMPDIR");
        snprintf(eurl, sizeof eurl, "ipc://%s/ft_daemon_bench_echoc.%ld",
                 td && *td ? td : "/tmp", (long)getpid());
        int eto = -1;
        pid_t epid = ok && (kinds_on & 1 << LOAD_ECHO)
                         ? echo_child(eurl, ectx, &eto) : -1;
        if (ok && epid < 0 && (kinds_on & 1 << LOAD_ECHO))
            fprintf(stderr, "ft_daemon_bench: no echo server (no nng "
                    "rows for %d clients)\n", clients);
        printf("clients: %d threads, %.1f s a row; layouts: shared = one "
               "handle (one connection) for all, conns = one handle of %d "
               "connections, own = a handle (a connection) per thread, "
               "procs = own in %d client processes, coalescedN = one handle "
               "(one connection) of coalesce N; echo = nng alone (a "
               "REP server in a child process, %d contexts, %zu B out and "
               "%zu B back)\n", clients, seconds, conns, procs, ectx,
               (size_t)(req_bytes + .5), (size_t)(rep_bytes + .5));
        static const char *const kind_name[] = {"search", "ping", "echo"};
        static const int kinds[] = {LOAD_ECHO, LOAD_PING, LOAD_SEARCH};
        for (int ki = 0; ok && ki < 3; ki++) {
            int kind = kinds[ki];
            if ((kind == LOAD_ECHO && epid < 0) || !(kinds_on & 1 << kind))
                continue;
            for (int li = 0; li < LAY_COALESCED + n_co; li++) {
                int lay = li < LAY_COALESCED ? li : LAY_COALESCED;
                int co_i = li - LAY_COALESCED;
                load L;
                memset(&L, 0, sizeof L);
                L.b = &b;
                L.kind = kind;
                L.cli = cl;
                L.esock = es;
                L.qs = (size_t)(req_bytes + .5);
                L.rs = (size_t)(rep_bytes + .5);
                int eopen = 0;
                if (lay == LAY_COALESCED && kind != LOAD_SEARCH)
                    continue;
                if (lay == LAY_PROCS) {
                    if (kind == LOAD_SEARCH && refpath[0] == 0)
                        continue;
                    stages sa = get_stages(b.cli);
                    double ba = info_get(b.cli, "batches", 0);
                    unsigned long bad = 0, nf = 0;
                    double q = procs_run(kind, procs, clients, seconds,
                                         kind == LOAD_ECHO ? eurl : url_list,
                                         reqpath, refpath, L.qs, L.rs, &bad,
                                         &nf);
                    stages sb = get_stages(b.cli);
                    double bb = info_get(b.cli, "batches", 0);
                    report_load(kind_name[kind], lay, 0, clients, q, eng_qps,
                                batch, &sa, &sb, bb - ba, bad, nf);
                    mismatch += bad;
                    failed += nf + (q < 0);
                    continue;
                }
                for (int i = 0; i < clients; i++)
                    cl[i] = lay == LAY_SHARED    ? b.cli
                            : lay == LAY_CONNS     ? pc
                            : lay == LAY_COALESCED ? cc[co_i]
                                                   : own[i];
                if (kind == LOAD_ECHO) {
                    int rv = 0;
                    if (lay == LAY_OWN) {
                        for (int i = 0; i < clients && rv == 0; i++)
                            if ((rv = echo_dial(&es[i], eurl, 1)) == 0)
                                eopen = i + 1;
                    } else {
                        rv = echo_dial(&es[0], eurl,
                                       lay == LAY_CONNS ? conns : 1);
                        eopen = rv == 0;
                        for (int i = 1; i < clients; i++)
                            es[i] = es[0];
                    }
                    if (rv != 0) {
                        fprintf(stderr, "ft_daemon_bench: echo dial: %s\n",
                                nng_strerror(rv));
                        for (int i = 0; i < eopen; i++)
                            nng_close(es[i]);
                        continue;
                    }
                }
                stages sa = get_stages(b.cli);
                double ba = info_get(b.cli, "batches", 0);
                double q = load_run(&L, clients, seconds);
                stages sb = get_stages(b.cli);
                double bb = info_get(b.cli, "batches", 0);
                for (int i = 0; i < eopen; i++)
                    nng_close(es[i]);
                unsigned long bad = atomic_load(&L.bad),
                              nf = atomic_load(&L.failed);
                report_load(kind_name[kind], lay,
                            lay == LAY_COALESCED ? co_n[co_i] : 0, clients, q,
                            eng_qps, batch, &sa, &sb, bb - ba, bad, nf);
                /* the row earlier runs printed */
                if (kind == LOAD_SEARCH && lay == LAY_SHARED) {
                    if (eng_qps > 0)
                        printf("daemon.clients%d_qps: %.0f (%.0f%% of the "
                               "engine's batch %d)\n", clients, q,
                               100 * q / eng_qps, batch);
                    print_stages("clients", &sa, &sb, 0,
                                 "engine: a batch's call, per request of it");
                }
                mismatch += bad;
                failed += nf;
            }
        }
        if (epid > 0) {
            close(eto);
            waitpid(epid, NULL, 0);
        }
        for (int i = 0; i < clients; i++)
            ft_client_close(own[i]);
        ft_client_close(pc);
        for (int k = 0; k < n_co; k++)
            ft_client_close(cc[k]);
        if (refpath[0])
            unlink(refpath);
        free(own);
        free(cl);
        free(es);
    }
    printf("answers: %s (%lu differ from the engine's, %lu failed)\n",
           mismatch || failed ? "DIFFER" : "identical", mismatch, failed);

    ft_result_free(&tmp);
    free(v);
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
    ft_gen_unref(E.gen);
    ft_engine_close(E.eng[E_SIZED]);
    ft_engine_close(E.eng[E_PUBLIC]);
    ft_library_close(lib);
    return mismatch || failed ? 1 : 0;
}
