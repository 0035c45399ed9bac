/* loadtest_setup.c - "flashtrie loadtest": its set-up (loadtest.h): the
 * loopback check, the mix, the server's INFO and RSS, and the pool of
 * requests with the answers they must get. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gen.h"
#include "loadtest.h"

/* Bad JSON lines: each is parsed (and validated) here too, so what it
 * must get back is computed, not written down twice. */
static const char *bad_json[] = {
    "{\"tokens\": [[1]], \"logp\": [[-1]], \"bogus\": 1}",
    "{\"tokens\": [[1, 2]], \"logp\": [[-1]]}",
    "{\"tokens\": [[1]], \"logp\": [[-1]], \"beam\": 0}",
    "{\"tokens\": [[1]], \"logp\": [[-1]",
    "{\"id\": 5, \"tokens\": [[1.5]], \"logp\": [[-1]]}",
    "{\"id\": \"dup\", \"tokens\": [[3, 3]], \"logp\": [[-1, -2]]}",
    "{\"tokens\": [[1]], \"logp\": [[-1]], \"alpha\": 11}",
    "{\"tokens\": [[1]]}",
    "{\"tokens\": [[1]], \"logp\": [[-1]], \"beam\": 4, \"beam\": 5}",
    "{\"id\": 9, \"tokens\": [[4294967296]], \"logp\": [[-1]]}",
    "{\"tokens\": [], \"logp\": []}",
    "{}",
};
_Static_assert(sizeof bad_json / sizeof bad_json[0] == N_BAD_JSON,
               "N_BAD_JSON counts the bad JSON lines");

/* ---- set-up ---- */

/* lt_loopback_url accepts ipc://, and tcp:// or tls+tcp:// whose host is
 * localhost or in 127.0.0.0/8. */
int lt_loopback_url(const char *url)
{
    if (strncmp(url, "ipc://", 6) == 0)
        return url[6] != 0;
    const char *h;
    if (strncmp(url, "tcp://", 6) == 0)
        h = url + 6;
    else if (strncmp(url, "tls+tcp://", 10) == 0)
        h = url + 10;
    else
        return 0;
    const char *colon = strrchr(h, ':');
    if (colon == NULL || colon == h || colon[1] == 0)
        return 0;
    char host[256];
    size_t n = (size_t)(colon - h);
    if (n >= sizeof host)
        return 0;
    memcpy(host, h, n);
    host[n] = 0;
    if (strcmp(host, "localhost") == 0)
        return 1;
    struct in_addr a;
    if (inet_pton(AF_INET, host, &a) != 1)
        return 0;
    return (ntohl(a.s_addr) >> 24) == 127;
}

int lt_parse_mix(const char *s, unsigned *wt)
{
    unsigned good = 0, bad = 0, over = 0, maxsz = 0, half = 0, idle = 0;
    char *dup = strdup(s), *save = NULL;
    if (dup == NULL)
        return -1;
    for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(t, ':');
        unsigned v = 0;
        if (colon) {
            *colon = 0;
            char *end;
            unsigned long x = strtoul(colon + 1, &end, 10);
            if (*end || end == colon + 1 || x == 0 || x > 1000000) {
                fprintf(stderr, "flashtrie loadtest: --mix: bad weight '%s' "
                        "for %s (1..1000000)\n", colon + 1, t);
                free(dup);
                return -1;
            }
            v = (unsigned)x;
        }
        if (!strcmp(t, "good"))
            good = v ? v : 90;
        else if (!strcmp(t, "bad"))
            bad = v ? v : 9;
        else if (!strcmp(t, "oversize"))
            over = v ? v : 1;
        else if (!strcmp(t, "maxsize"))
            maxsz = v ? v : 1;
        else if (!strcmp(t, "half"))
            half = v ? v : 1;
        else if (!strcmp(t, "idle"))
            idle = v ? v : 1;
        else if (!strcmp(t, "hostile"))
            maxsz = half = idle = v ? v : 1;
        else {
            fprintf(stderr, "flashtrie loadtest: --mix: unknown kind '%s' "
                    "(good, bad, oversize, maxsize, half, idle, hostile)\n",
                    t);
            free(dup);
            return -1;
        }
    }
    free(dup);
    if (good + bad + over + maxsz + half + idle == 0) {
        fprintf(stderr, "flashtrie loadtest: --mix: no kind given\n");
        return -1;
    }
    /* Good traffic: 60% single frames, 20% batches, 20% JSON lines (in
     * units of 5 so that the split is exact). */
    memset(wt, 0, K_COUNT * sizeof *wt);
    wt[K_GOOD_FRAME] = good * 3;
    wt[K_GOOD_BATCH] = good;
    wt[K_GOOD_JSON] = good;
    /* Bad traffic: the same share for each bad kind. */
    for (int k = FIRST_BAD; k < FIRST_BAD + N_BAD; k++)
        wt[k] = bad * 5;
    /* N_BAD kinds share bad's weight: scale the others to match. */
    for (int k = 0; k < 3; k++)
        wt[k] *= N_BAD;
    wt[K_OVERSIZE] = over * 5 * N_BAD;
    wt[K_MAXSIZE] = maxsz * 5 * N_BAD;
    wt[K_HALF] = half * 5 * N_BAD;
    wt[K_IDLE] = idle * 5 * N_BAD;
    return 0;
}

/* lt_info_value finds "key: VALUE" at the start of a line of the INFO text. */
int lt_info_value(const char *info, const char *key, long long *v)
{
    size_t kl = strlen(key);
    for (const char *p = info; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, key, kl) == 0 && p[kl] == ':') {
            *v = strtoll(p + kl + 1, NULL, 10);
            return 1;
        }
    }
    return 0;
}

static long status_kb(long pid, const char *key)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    long kb = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0)
            kb = strtol(line + kl, NULL, 10);
    fclose(f);
    return kb;
}

long lt_rss_kb(long pid) { return status_kb(pid, "VmRSS:"); }
long lt_hwm_kb(long pid) { return status_kb(pid, "VmHWM:"); }

int lt_fetch_info(ft_client *cl, char **info)
{
    char err[512];
    int rc = ft_client_info(cl, info, err, sizeof err);
    if (rc != FT_OK)
        fprintf(stderr, "flashtrie loadtest: info: %s\n", err);
    return rc;
}

/* lt_load_pool fills the pool of good requests: the lines of path, or n
 * generated from the index (the "gen requests" generator, same options). */
int lt_load_pool(shared *sh, const char *path, const ft_library *lib,
                 ft_wl_req_opts *wo)
{
    char *text = NULL;
    size_t tlen = 0;
    if (path == NULL) {
        if (ft_library_is_manifest(lib)) {
            fprintf(stderr, "flashtrie loadtest: INDEX is a manifest: give "
                    "--requests (requests are generated from one index)\n");
            return 2;
        }
        FILE *mf = open_memstream(&text, &tlen);
        if (mf == NULL)
            return 1;
        ft_wl_reqs *g;
        char err[512];
        int rc = ft_wl_reqs_open(&g, ft_library_shard(lib, 0), wo, err,
                                 sizeof err);
        if (rc == FT_OK) {
            rc = ft_wl_reqs_write(g, mf, err, sizeof err);
            ft_wl_reqs_close(g);
        }
        fclose(mf);
        if (rc != FT_OK) {
            fprintf(stderr, "flashtrie loadtest: generating requests: %s\n",
                    err);
            free(text);
            return 1;
        }
    } else {
        FILE *f = fopen(path, "r");
        if (f == NULL) {
            fprintf(stderr, "flashtrie loadtest: %s: %s\n", path,
                    strerror(errno));
            return 1;
        }
        FILE *mf = open_memstream(&text, &tlen);
        char buf[65536];
        size_t n;
        while (mf && (n = fread(buf, 1, sizeof buf, f)) > 0)
            fwrite(buf, 1, n, mf);
        fclose(f);
        if (mf)
            fclose(mf);
        if (text == NULL)
            return 1;
    }
    size_t lines = 0;
    for (size_t i = 0; i < tlen; i++)
        lines += text[i] == '\n';
    sh->pool = calloc(lines + 1, sizeof *sh->pool);
    if (sh->pool == NULL) {
        free(text);
        return 1;
    }
    size_t skipped = 0;
    char *p = text, *end = text + tlen;
    while (p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        good *g = &sh->pool[sh->n_pool];
        ft_jsonl_req_init(&g->q);
        char err[256];
        /* Only lines the server will take as JSON (a '{' first) and that
         * parse are good requests; the others are left out. */
        if (len > 0 && p[0] == '{' &&
            ft_jsonl_parse(&g->q, p, len, err, sizeof err) == FT_OK &&
            (g->line = malloc(len + 1)) != NULL) {
            memcpy(g->line, p, len);
            g->line[len] = 0;
            g->line_len = len;
            sh->n_pool++;
        } else {
            ft_jsonl_req_free(&g->q);
            skipped++;
        }
        p += len + 1;
    }
    free(text);
    if (skipped)
        fprintf(stderr, "flashtrie loadtest: %zu lines of %s left out (not "
                "a request the parser takes)\n", skipped,
                path ? path : "the generated requests");
    if (sh->n_pool == 0) {
        fprintf(stderr, "flashtrie loadtest: no good request to send\n");
        return 1;
    }
    return 0;
}

/* lt_expect computes every expected answer with the engine, here. */
int lt_expect(shared *sh, ft_searcher *eng, uint32_t max_beam)
{
    ft_buf out;
    ft_buf_init(&out);
    for (size_t i = 0; i < sh->n_pool; i++) {
        good *g = &sh->pool[i];
        uint32_t n = g->q.req.results ? g->q.req.results : g->q.req.beam;
        if (n > FT_MAX_BEAM)
            n = FT_MAX_BEAM;
        if (ft_result_alloc(&g->res, n ? n : 1, FT_MAX_T) != FT_OK)
            return 1;
        int rc = ft_searcher_search_batch(eng, &g->q.req, 1, &g->res);
        if (rc != FT_OK) {
            fprintf(stderr, "flashtrie loadtest: %s failed: %s\n",
                    ft_searcher_note(eng), ft_strerror(rc));
            return 1;
        }
        char verr[sizeof g->res.error];
        if (g->res.status == FT_OK &&
            ft_request_validate(&g->q.req, max_beam, verr, sizeof verr)) {
            /* The server's beam cap is lower than the engine's: its
             * answer is the validator's refusal under that cap. */
            g->res.status = FT_EREQUEST;
            g->res.n = 0;
            snprintf(g->res.error, sizeof g->res.error, "%s", verr);
        }
        out.len = 0;
        if (ft_jsonl_encode_result(&out, &g->q, &g->res) != FT_OK ||
            (g->want_line = malloc(out.len)) == NULL)
            return 1;
        memcpy(g->want_line, out.data, out.len);
        g->want_len = out.len;
    }
    /* Bad JSON lines: the error line "flashtrie search" prints. */
    ft_jsonl_req q;
    ft_jsonl_req_init(&q);
    ft_result r;
    memset(&r, 0, sizeof r);
    if (ft_result_alloc(&r, 16, FT_MAX_T) != FT_OK)
        return 1;
    for (size_t i = 0; i < N_BAD_JSON; i++) {
        char err[256];
        const char *line = bad_json[i];
        out.len = 0;
        int rc = ft_jsonl_parse(&q, line, strlen(line), err, sizeof err);
        if (rc == FT_OK) {
            if (ft_searcher_search_batch(eng, &q.req, 1, &r) != FT_OK)
                return 1;
            rc = ft_jsonl_encode_result(&out, &q, &r);
        } else {
            rc = ft_jsonl_encode_error(&out, &q, err);
        }
        if (rc != FT_OK || (sh->bl[i].want = malloc(out.len)) == NULL)
            return 1;
        sh->bl[i].line = line;
        memcpy(sh->bl[i].want, out.data, out.len);
        sh->bl[i].want_len = out.len;
    }
    ft_result_free(&r);
    ft_jsonl_req_free(&q);
    ft_buf_free(&out);

    /* docs/specification.md section 3 violations built from the first good request. */
    const ft_request *base = &sh->pool[0].q.req;
    size_t cells = (size_t)base->T * base->K;
    enum { NB = 7 };
    sh->br = calloc(NB, sizeof *sh->br);
    if (sh->br == NULL)
        return 1;
    for (size_t i = 0; i < NB; i++) {
        bad_req *b = &sh->br[i];
        b->tok = malloc(cells * sizeof *b->tok);
        b->lp = malloc(cells * sizeof *b->lp);
        if (!b->tok || !b->lp)
            return 1;
        memcpy(b->tok, base->tokens, cells * sizeof *b->tok);
        memcpy(b->lp, base->logp, cells * sizeof *b->lp);
        b->r = *base;
        b->r.tokens = b->tok;
        b->r.logp = b->lp;
        switch (i) {
        case 0: b->r.beam = 0; break;
        case 1: b->r.beam = FT_MAX_BEAM + 1; break;
        case 2: b->r.results = FT_MAX_BEAM + 1; break;
        case 3: b->r.alpha = -0.5; break;
        case 4: b->r.alpha = 10.5; break;
        case 5: b->lp[cells / 2] = NAN; break;
        case 6:
            if (base->K > 1)
                b->tok[cells - 1] = b->tok[cells - 2];
            else
                b->lp[0] = INFINITY;
            break;
        }
        if (ft_request_validate(&b->r, max_beam, b->want, sizeof b->want) !=
            FT_EREQUEST) {
            fprintf(stderr, "flashtrie loadtest: bad request %zu passes the "
                    "validator\n", i);
            return 1;
        }
    }
    sh->n_br = NB;
    return 0;
}
