/* test_net.c - the daemon tests' network helpers (test_net.h). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/http/http.h>

#include "flashtrie_client.h"
#include "ft_test.h"
#include "serve_harness.h"
#include "test_net.h"

/* ---- ports and HTTP ---- */

int tn_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    FT_CHECK(fd >= 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    FT_CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
    socklen_t len = sizeof a;
    FT_CHECK(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
    close(fd);
    return ntohs(a.sin_port);
}

int tn_http_try(const char *base, const char *path, char **body,
                size_t *len, char *ctype, size_t ctlen)
{
    char u[256];
    snprintf(u, sizeof u, "%s%s", base, path);
    nng_url *url;
    nng_http_client *cli;
    nng_http_req *req;
    nng_http_res *res;
    nng_aio *aio;
    FT_CHECK(nng_url_parse(&url, u) == 0);
    FT_CHECK(nng_http_client_alloc(&cli, url) == 0);
    FT_CHECK(nng_http_req_alloc(&req, url) == 0);
    FT_CHECK(nng_http_res_alloc(&res) == 0);
    FT_CHECK(nng_aio_alloc(&aio, NULL, NULL) == 0);
    nng_aio_set_timeout(aio, 5000);
    nng_http_client_transact(cli, req, res, aio);
    nng_aio_wait(aio);
    int rv = nng_aio_result(aio);
    int status = -rv;
    *body = NULL;
    if (len)
        *len = 0;
    if (ctype && ctlen)
        ctype[0] = '\0';
    if (rv == 0) {
        status = nng_http_res_get_status(res);
        void *data;
        size_t n;
        nng_http_res_get_data(res, &data, &n);
        *body = malloc(n + 1);
        FT_CHECK(*body != NULL);
        memcpy(*body, data, n);
        (*body)[n] = '\0';
        if (len)
            *len = n;
        if (ctype) {
            const char *ct = nng_http_res_get_header(res, "Content-Type");
            snprintf(ctype, ctlen, "%s", ct ? ct : "");
        }
    }
    nng_aio_free(aio);
    nng_http_res_free(res);
    nng_http_req_free(req);
    nng_http_client_free(cli);
    nng_url_free(url);
    return status;
}

int tn_http_get(const char *base, const char *path, char **body,
                size_t *len, char *ctype, size_t ctlen)
{
    int status = tn_http_try(base, path, body, len, ctype, ctlen);
    if (status < 0) {
        fprintf(stderr, "GET %s%s: %s\n", base, path, nng_strerror(-status));
        exit(1);
    }
    return status;
}

int tn_http_text(const char *base, const char *path, char *body, size_t len)
{
    char *b;
    size_t n;
    int status = tn_http_try(base, path, &b, &n, NULL, 0);
    body[0] = '\0';
    if (status < 0)
        return -1;
    if (n >= len)
        n = len - 1;
    memcpy(body, b, n);
    body[n] = '\0';
    free(b);
    return status;
}

double tn_metric(const char *base, const char *sample)
{
    static char body[1 << 18];
    FT_CHECK_EQ_U64(tn_http_text(base, "/metrics", body, sizeof body), 200);
    size_t n = strlen(sample);
    for (char *l = body; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (!strncmp(l, sample, n) && l[n] == ' ')
            return strtod(l + n + 1, NULL);
    return -1;
}

/* ---- clients and INFO ---- */

ft_client *tn_connect_opts(const char *url, const ft_client_opts *o)
{
    ft_client *c;
    char err[256];
    if (ft_client_connect(&c, url, o, err, sizeof err) != FT_OK) {
        fprintf(stderr, "connect %s: %s\n", url, err);
        exit(1);
    }
    return c;
}

ft_client *tn_connect(const char *url, int timeout_ms, int connect_wait_ms)
{
    ft_client_opts o;
    ft_client_opts_init(&o);
    o.timeout_ms = timeout_ms;
    o.connect_wait_ms = connect_wait_ms;
    return tn_connect_opts(url, &o);
}

char *tn_info(const char *url, int timeout_ms, int tries)
{
    ft_client *c;
    ft_client_opts o;
    ft_client_opts_init(&o);
    o.timeout_ms = timeout_ms;
    char *info = NULL;
    int rc = FT_ECONN;
    for (int t = 0; t < tries && rc == FT_ECONN; t++) {
        if (t > 0)
            th_sleep_ms(50);
        /* a listener not open yet (a server still starting) is retried
         * as a refused connection is */
        rc = ft_client_connect(&c, url, &o, NULL, 0);
        if (rc == FT_ECONN)
            continue;
        FT_PASS(rc);
        rc = ft_client_info(c, &info, NULL, 0);
        ft_client_close(c);
    }
    FT_PASS(rc);
    return info;
}

long long tn_info_value(const char *text, const char *pat)
{
    const char *p = strstr(text, pat);
    if (p == NULL) {
        fprintf(stderr, "INFO has no '%s'\n", pat);
        exit(1);
    }
    return strtoll(p + strlen(pat), NULL, 10);
}

long long tn_info_num(const char *url, const char *key, int timeout_ms,
                      int tries)
{
    char *info = tn_info(url, timeout_ms, tries);
    char pat[64];
    snprintf(pat, sizeof pat, "\n%s: ", key);
    long long v = tn_info_value(info, pat);
    free(info);
    return v;
}

/* ---- raw sockets ---- */

nng_socket tn_req_dial(const char *url, int timeout_ms, int unlimited)
{
    nng_socket s;
    FT_CHECK(nng_req0_open(&s) == 0);
    nng_socket_set_ms(s, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
    nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, timeout_ms);
    nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, timeout_ms);
    if (unlimited)
        nng_socket_set_size(s, NNG_OPT_RECVMAXSZ, 0);
    FT_CHECK(nng_dial(s, url, NULL, 0) == 0);
    return s;
}

int tn_ipc_connect(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    FT_CHECK(fd >= 0);
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    FT_CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    /* 0, 'S', 'P', version 0, protocol 0x30 (REQ v0) big-endian, 0, 0 */
    static const unsigned char hs[8] = {0, 'S', 'P', 0, 0, 0x30, 0, 0};
    FT_CHECK(write(fd, hs, 8) == 8);
    unsigned char peer[8];
    FT_CHECK(read(fd, peer, 8) == 8);
    FT_CHECK(peer[5] == 0x31); /* the server is REP v0 */
    return fd;
}

int tn_ipc_req(int fd, uint32_t rid, const void *body, size_t body_len,
               size_t all_len)
{
    unsigned char h[13];
    uint64_t len = all_len + 4;
    h[0] = 1;
    for (int i = 0; i < 8; i++)
        h[1 + i] = (unsigned char)(len >> (56 - 8 * i));
    rid |= 0x80000000u;
    h[9] = (unsigned char)(rid >> 24);
    h[10] = (unsigned char)(rid >> 16);
    h[11] = (unsigned char)(rid >> 8);
    h[12] = (unsigned char)rid;
    if (write(fd, h, 13) != 13)
        return -1;
    return write(fd, body, body_len) == (ssize_t)body_len ? 0 : -1;
}

void tn_set_timeouts(int fd, int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

int tn_closed_within(int fd, int ms, double *at)
{
    tn_set_timeouts(fd, ms);
    unsigned char b[64];
    ssize_t n = read(fd, b, sizeof b);
    if (at)
        *at = ft_test_now();
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}
