/*
 * cmd_query.c - "flashtrie query": answers a JSON Lines file of requests
 * through a running server, the way "flashtrie search" answers it offline.
 *
 * Lines are parsed here with the same codec as search, so a line search
 * rejects gets the same error line without a round trip; the requests are
 * sent as binary SEARCH frames of up to --batch requests, --concurrency of
 * them at a time, and every answer is printed with the same encoder.  The
 * output is therefore byte-identical to search's on the same index: one
 * line per input line, in input order.  A request the server could not
 * take (it stayed busy, timed out) gets an error line naming why, never a
 * gap; the exit status is then 1.  A lost connection (or a server that
 * drains) stops the run: the lines before the first one it left
 * unanswered are printed, then one line on stderr names the error and
 * that input line, and the exit status is 1.
 */
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "flashtrie/internal/buf.h"
#include "commands.h"
#include "flashtrie_client.h"
#include "jsonl.h"

static const char *usage_text =
    "usage: flashtrie query --url URL [--batch N] [--concurrency C]\n"
    "         [--timeout-ms N] [--deadline-ms N] [--tls-ca F]\n"
    "         [--tls-cert F] [--tls-server-name NAME] [--tls-insecure]\n"
    "         [--checksum auto|on|off] < requests.jsonl > results.jsonl\n"
    "       flashtrie query --url URL --ping | --info | --reload [PATH]\n"
    "  sends one JSON request per input line to a flashtrie server and\n"
    "  prints one result line per input line, in input order, as\n"
    "  'flashtrie search' would.  --batch requests go in one frame\n"
    "  (default 1), --concurrency frames are in flight at once (default 4).\n"
    "  --ping waits (up to --timeout-ms) until the server answers and exits\n"
    "  0; --info prints the server's INFO; --reload asks an admin listener\n"
    "  to reload the index (PATH, or the configured one).  A lost\n"
    "  connection stops the run (exit 1) after the lines answered before it.\n"
    "  tls+tcp:// verifies the server with --tls-ca; --tls-insecure connects\n"
    "  without verifying it (a warning says so).  --checksum: XXH32 over\n"
    "  each request frame and its answer; auto (default) on tcp:// and\n"
    "  tls+tcp://, off on ipc:// and inproc://.\n";

typedef struct line {
    ft_jsonl_req q;
    int ok;             /* parsed: it goes to the server */
    int lost;           /* its batch failed on a lost connection or a
                         * draining server */
    char error[512];    /* the error line's message when it fails */
    const ft_result *res;
} line;

typedef struct chunk {
    ft_client *cl;
    line *lines;
    size_t n;
    size_t *todo;       /* indexes of the lines that go to the server */
    size_t n_todo;
    size_t batch;
    size_t next;        /* next batch to take (under mu) */
    pthread_mutex_t mu;
    ft_client_results **held; /* one per batch, freed after printing */
    int failed;
    int stop;           /* the connection was lost or the server drains:
                         * take no more batches */
    char stop_err[512]; /* the first such error */
} chunk;

/* run_batches takes batches until none is left.  A BUSY answer means the
 * server's queue is full right now: back off and try again, a bounded
 * number of times. */
static void *run_batches(void *arg)
{
    chunk *ch = arg;
    ft_request reqs[1024];
    for (;;) {
        pthread_mutex_lock(&ch->mu);
        size_t b = ch->next++;
        int stop = ch->stop;
        pthread_mutex_unlock(&ch->mu);
        size_t first = b * ch->batch;
        if (stop || first >= ch->n_todo)
            break;
        size_t m = ch->n_todo - first < ch->batch ? ch->n_todo - first
                                                  : ch->batch;
        for (size_t i = 0; i < m; i++)
            reqs[i] = ch->lines[ch->todo[first + i]].q.req;
        char err[512];
        ft_client_results *r = NULL;
        int rc = FT_EBUSY;
        long backoff_us = 200;
        for (int attempt = 0; attempt < 200 && rc == FT_EBUSY; attempt++) {
            rc = ft_client_search(ch->cl, reqs, m, &r, err, sizeof err);
            if (rc == FT_EBUSY) {
                struct timespec ts = {0, backoff_us * 1000};
                nanosleep(&ts, NULL);
                if (backoff_us < 50000)
                    backoff_us *= 2;
            }
        }
        ch->held[b] = r;
        for (size_t i = 0; i < m; i++) {
            line *l = &ch->lines[ch->todo[first + i]];
            if (rc == FT_OK) {
                l->res = ft_client_results_get(r, i);
            } else if (rc == FT_ECONN || rc == FT_ESHUTDOWN) {
                l->lost = 1;
            } else {
                l->ok = 0;
                snprintf(l->error, sizeof l->error, "%s", err);
            }
        }
        if (rc != FT_OK) {
            pthread_mutex_lock(&ch->mu);
            ch->failed = 1;
            if ((rc == FT_ECONN || rc == FT_ESHUTDOWN) && !ch->stop) {
                ch->stop = 1;
                snprintf(ch->stop_err, sizeof ch->stop_err, "%s", err);
            }
            pthread_mutex_unlock(&ch->mu);
        }
    }
    return NULL;
}

static int admin_call(ft_client *cl, int ping, int info, int reload,
                      const char *path)
{
    char err[1024];
    int rc;
    if (ping) {
        rc = ft_client_ping(cl, err, sizeof err);
        if (rc != FT_OK) {
            fprintf(stderr, "flashtrie query: ping: %s\n", err);
            return 1;
        }
        return 0;
    }
    if (info) {
        char *text;
        rc = ft_client_info(cl, &text, err, sizeof err);
        if (rc != FT_OK) {
            fprintf(stderr, "flashtrie query: info: %s\n", err);
            return 1;
        }
        fputs(text, stdout);
        free(text);
        return fflush(stdout) ? 1 : 0;
    }
    (void)reload;
    rc = ft_client_reload(cl, path, err, sizeof err);
    if (rc != FT_OK) {
        /* The server's messages name the operation already ("reload:
         * not allowed ..."); the client's own do not. */
        fprintf(stderr, "flashtrie query: %s%s (%s)\n",
                strncmp(err, "reload: ", 8) ? "reload: " : "", err,
                ft_strerror(rc));
        return 1;
    }
    printf("%s\n", err);
    return 0;
}

int cmd_query(int argc, char **argv)
{
    enum { O_URL = 256, O_BATCH, O_CONC, O_TIMEOUT, O_DEADLINE, O_PING,
           O_INFO, O_RELOAD, O_CA, O_CERT, O_NAME, O_INSECURE, O_CHECKSUM };
    static const struct option opts[] = {
        {"url", required_argument, 0, O_URL},
        {"batch", required_argument, 0, O_BATCH},
        {"concurrency", required_argument, 0, O_CONC},
        {"timeout-ms", required_argument, 0, O_TIMEOUT},
        {"deadline-ms", required_argument, 0, O_DEADLINE},
        {"ping", no_argument, 0, O_PING},
        {"info", no_argument, 0, O_INFO},
        {"reload", optional_argument, 0, O_RELOAD},
        {"tls-ca", required_argument, 0, O_CA},
        {"tls-cert", required_argument, 0, O_CERT},
        {"tls-server-name", required_argument, 0, O_NAME},
        {"tls-insecure", no_argument, 0, O_INSECURE},
        {"checksum", required_argument, 0, O_CHECKSUM},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    const char *url = NULL, *reload_path = NULL;
    uint32_t batch = 1, conc = 4, timeout = 10000, deadline = 0;
    int ping = 0, info = 0, reload = 0, c;
    ft_client_opts co;
    ft_client_opts_init(&co);
    /* --batch is how many requests a frame carries: the threads'
     * frames are not merged (coalesce 0) */
    co.coalesce = 0;
    optind = 1;
    opterr = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case O_URL: url = optarg; break;
        case O_BATCH:
            if (ft_cli_parse_u32("flashtrie query",
                                 "--batch", optarg, 1, 1024, &batch))
                return 2;
            break;
        case O_CONC:
            if (ft_cli_parse_u32("flashtrie query",
                                 "--concurrency", optarg, 1, 1024, &conc))
                return 2;
            break;
        case O_TIMEOUT:
            if (ft_cli_parse_u32("flashtrie query",
                                 "--timeout-ms", optarg, 1, 86400000, &timeout))
                return 2;
            break;
        case O_DEADLINE:
            if (ft_cli_parse_u32("flashtrie query",
                                 "--deadline-ms", optarg, 0, 86400000,
                                 &deadline))
                return 2;
            break;
        case O_PING: ping = 1; break;
        case O_INFO: info = 1; break;
        case O_RELOAD: reload = 1; reload_path = optarg; break;
        case O_CA: co.tls_ca = optarg; break;
        case O_CERT: co.tls_cert = co.tls_key = optarg; break;
        case O_NAME: co.tls_server_name = optarg; break;
        case O_INSECURE: co.tls_insecure = 1; break;
        case O_CHECKSUM:
            if (strcmp(optarg, "auto") == 0)
                co.checksum = 0;
            else if (strcmp(optarg, "on") == 0)
                co.checksum = 1;
            else if (strcmp(optarg, "off") == 0)
                co.checksum = -1;
            else {
                fprintf(stderr, "flashtrie query: --checksum: expected auto, "
                        "on or off, got '%s'\n", optarg);
                return 2;
            }
            break;
        case 'h': fputs(usage_text, stdout); return 0;
        default: fputs(usage_text, stderr); return 2;
        }
    }
    /* "--reload PATH": getopt takes an optional argument only as
     * "--reload=PATH", and leaves PATH (moved to the end) as an operand. */
    if (reload && reload_path == NULL && optind == argc - 1)
        reload_path = argv[optind++];
    if (optind != argc) {
        fprintf(stderr, "flashtrie query: unexpected argument '%s'\n",
                argv[optind]);
        return 2;
    }
    if (url == NULL) {
        fprintf(stderr, "flashtrie query: --url is required\n");
        fputs(usage_text, stderr);
        return 2;
    }
    if (ping + info + reload > 1) {
        fprintf(stderr, "flashtrie query: --ping, --info and --reload "
                "exclude each other\n");
        return 2;
    }
    if (!strncmp(url, "tls+", 4) && co.tls_ca == NULL) {
        if (!co.tls_insecure) {
            fprintf(stderr, "flashtrie query: %s: give --tls-ca F to verify "
                    "the server, or --tls-insecure to connect without "
                    "verifying it\n", url);
            return 2;
        }
        fprintf(stderr, "flashtrie query: warning: --tls-insecure: the "
                "server's certificate is not verified\n");
    }
    co.timeout_ms = (int)timeout;
    co.deadline_ms = deadline;
    /* --ping is what scripts wait on: keep dialing until the server is
     * up, within the timeout, instead of failing at the first refusal. */
    co.connect_wait_ms = ping ? (int)timeout : 0;
    char err[1024];
    ft_client *cl;
    int crc = ft_client_connect(&cl, url, &co, err, sizeof err);
    if (crc != FT_OK) {
        fprintf(stderr, "flashtrie query: %s\n", err);
        return crc == FT_EINVAL ? 2 : 1; /* a URL nng cannot dial: 2 */
    }
    if (ping || info || reload) {
        int st = admin_call(cl, ping, info, reload, reload_path);
        ft_client_close(cl);
        return st;
    }

    /* Work in chunks, so that memory stays bounded whatever the input. */
    size_t cap = (size_t)batch * conc * 4;
    if (cap < 256)
        cap = 256;
    chunk ch;
    memset(&ch, 0, sizeof ch);
    ch.cl = cl;
    ch.batch = batch;
    ch.lines = calloc(cap, sizeof *ch.lines);
    ch.todo = calloc(cap, sizeof *ch.todo);
    ch.held = calloc(cap / batch + 1, sizeof *ch.held);
    pthread_t *th = calloc(conc, sizeof *th);
    if (!ch.lines || !ch.todo || !ch.held || !th) {
        fprintf(stderr, "flashtrie query: out of memory\n");
        return 1;
    }
    pthread_mutex_init(&ch.mu, NULL);
    for (size_t i = 0; i < cap; i++)
        ft_jsonl_req_init(&ch.lines[i].q);
    ft_buf out;
    ft_buf_init(&out);
    char *buf = NULL;
    size_t bcap = 0;
    int eof = 0, status = 0, read_errno = 0;
    size_t done = 0;    /* input lines of the chunks before this one */
    while (!eof && status == 0) {
        ch.n = ch.n_todo = ch.next = 0;
        while (ch.n < cap) {
            /* a read error is never taken for the end of the input:
             * the lines read so far are answered, then exit 1 */
            ssize_t len = ft_cli_getline(&buf, &bcap, stdin, &read_errno);
            if (len < 0) {
                eof = 1;
                break;
            }
            while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
                buf[--len] = 0;
            line *l = &ch.lines[ch.n];
            l->res = NULL;
            l->lost = 0;
            int rc = ft_jsonl_parse(&l->q, buf, (size_t)len, l->error,
                                    sizeof l->error);
            l->ok = rc == FT_OK;
            if (l->ok)
                ch.todo[ch.n_todo++] = ch.n;
            ch.n++;
        }
        size_t nb = (ch.n_todo + batch - 1) / batch;
        size_t nt = conc < nb ? conc : nb;
        for (size_t i = 0; i < nb; i++)
            ch.held[i] = NULL;
        for (size_t i = 0; i < nt; i++)
            pthread_create(&th[i], NULL, run_batches, &ch);
        for (size_t i = 0; i < nt; i++)
            pthread_join(th[i], NULL);
        out.len = 0;
        for (size_t i = 0; i < ch.n; i++) {
            line *l = &ch.lines[i];
            if (ch.stop && l->ok && l->res == NULL) {
                /* Lost, or never sent: stop at the first such line. */
                fprintf(stderr, "flashtrie query: %s; stopped at input line "
                        "%zu (the lines before it are answered)\n",
                        ch.stop_err, done + i + 1);
                status = 1;
                break;
            }
            int rc = l->ok && l->res
                         ? ft_jsonl_encode_result(&out, &l->q, l->res)
                         : ft_jsonl_encode_error(&out, &l->q, l->error);
            if (rc != FT_OK) {
                fprintf(stderr, "flashtrie query: out of memory\n");
                status = 1;
                break;
            }
        }
        if (out.len && fwrite(out.data, 1, out.len, stdout) != out.len) {
            fprintf(stderr, "flashtrie query: cannot write the output\n");
            status = 1;
        }
        for (size_t i = 0; i < nb; i++)
            ft_client_results_free(ch.held[i]);
        done += ch.n;
    }
    if (fflush(stdout) != 0 && status == 0) {
        fprintf(stderr, "flashtrie query: cannot write the output\n");
        status = 1;
    }
    if (read_errno && status == 0) {
        fprintf(stderr, "flashtrie query: cannot read the input: %s\n",
                strerror(read_errno));
        status = 1;
    }
    if (ch.failed && status == 0) {
        fprintf(stderr, "flashtrie query: some requests were not answered by "
                "the server (their lines say why)\n");
        status = 1;
    }
    free(buf);
    ft_buf_free(&out);
    for (size_t i = 0; i < cap; i++)
        ft_jsonl_req_free(&ch.lines[i].q);
    free(ch.lines);
    free(ch.todo);
    free(ch.held);
    free(th);
    pthread_mutex_destroy(&ch.mu);
    ft_client_close(cl);
    return status;
}
