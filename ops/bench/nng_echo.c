/* nng_echo.c - nng alone: the benchmarks' REQ/REP echo (nng_echo.h). */
#include "nng_echo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

struct echo_ctx {
    nng_ctx ctx;
    nng_aio *aio;
    int sending;
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint32_t ld32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static void st32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v, p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16), p[3] = (unsigned char)(v >> 24);
}

static void echo_cb(void *arg)
{
    echo_ctx *e = arg;
    int rv = nng_aio_result(e->aio);
    if (e->sending) {
        e->sending = 0;
        if (rv != 0)
            nng_msg_free(nng_aio_get_msg(e->aio));
        if (rv == NNG_ECLOSED)
            return;
        nng_ctx_recv(e->ctx, e->aio);
        return;
    }
    if (rv != 0) {
        if (rv != NNG_ECLOSED)
            nng_ctx_recv(e->ctx, e->aio);
        return;
    }
    nng_msg *m = nng_aio_get_msg(e->aio);
    const unsigned char *b = nng_msg_body(m);
    uint32_t rs = 0, spin = 0;
    if (nng_msg_len(m) >= ECHO_HDR && ld32(b + 8) == ECHO_MAGIC) {
        rs = ld32(b);
        spin = ld32(b + 4);
    }
    if (spin) {
        double end = now_s() + spin * 1e-6;
        while (now_s() < end)
            ;
    }
    nng_msg_clear(m);
    if (rs > ECHO_MAX_REPLY || nng_msg_realloc(m, rs) != 0) {
        nng_msg_free(m);
        nng_ctx_recv(e->ctx, e->aio);
        return;
    }
    e->sending = 1;
    nng_aio_set_msg(e->aio, m);
    nng_ctx_send(e->ctx, e->aio);
}

int echo_srv_open(echo_srv *e, const char *url, int n, char *errbuf,
                  size_t errlen)
{
    memset(e, 0, sizeof *e);
    int rv;
    if (n < 1)
        n = 1;
    if ((rv = nng_rep0_open(&e->sock)) != 0 ||
        (rv = nng_socket_set_size(e->sock, NNG_OPT_RECVMAXSZ, 0)) != 0 ||
        (rv = nng_listen(e->sock, url, NULL, 0)) != 0) {
        snprintf(errbuf, errlen, "echo server on %s: %s", url,
                 nng_strerror(rv));
        return -1;
    }
    e->up = 1;
    if ((e->ctx = calloc((size_t)n, sizeof *e->ctx)) == NULL) {
        snprintf(errbuf, errlen, "echo server on %s: out of memory", url);
        echo_srv_close(e);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if ((rv = nng_ctx_open(&e->ctx[i].ctx, e->sock)) != 0 ||
            (rv = nng_aio_alloc(&e->ctx[i].aio, echo_cb, &e->ctx[i])) != 0) {
            snprintf(errbuf, errlen, "echo server on %s: context: %s", url,
                     nng_strerror(rv));
            echo_srv_close(e);
            return -1;
        }
        e->n = i + 1;
    }
    for (int i = 0; i < n; i++)
        nng_ctx_recv(e->ctx[i].ctx, e->ctx[i].aio);
    return 0;
}

void echo_srv_close(echo_srv *e)
{
    if (!e->up)
        return;
    nng_close(e->sock);
    for (int i = 0; i < e->n; i++) {
        nng_aio_stop(e->ctx[i].aio);
        nng_aio_free(e->ctx[i].aio);
    }
    free(e->ctx);
    e->ctx = NULL;
    e->n = 0;
    e->up = 0;
}

int echo_dial(nng_socket *s, const char *url, int conns)
{
    int rv = nng_req0_open(s);
    if (rv != 0)
        return rv;
    nng_socket_set_size(*s, NNG_OPT_RECVMAXSZ, 0);
    nng_socket_set_ms(*s, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
    for (int i = 0; i < conns && rv == 0; i++)
        rv = nng_dial(*s, url, NULL, 0);
    if (rv != 0)
        nng_close(*s);
    return rv;
}

double echo_rt(nng_socket s, size_t qs, size_t rs, uint32_t spin_us, int *rvp)
{
    nng_ctx ctx;
    nng_aio *aio;
    nng_msg *m;
    int dummy;
    int *rv = rvp ? rvp : &dummy;
    double t0 = now_s();
    if ((*rv = nng_ctx_open(&ctx, s)) != 0)
        return -1;
    if ((*rv = nng_aio_alloc(&aio, NULL, NULL)) != 0) {
        nng_ctx_close(ctx);
        return -1;
    }
    int short_reply = 0;
    *rv = nng_msg_alloc(&m, qs < ECHO_HDR ? ECHO_HDR : qs);
    if (*rv == 0) {
        unsigned char *b = nng_msg_body(m);
        st32(b, (uint32_t)rs);
        st32(b + 4, spin_us);
        st32(b + 8, ECHO_MAGIC);
        nng_aio_set_timeout(aio, 10000);
        nng_aio_set_msg(aio, m);
        nng_ctx_send(ctx, aio);
        nng_aio_wait(aio);
        if ((*rv = nng_aio_result(aio)) != 0) {
            nng_msg_free(nng_aio_get_msg(aio));
        } else {
            nng_ctx_recv(ctx, aio);
            nng_aio_wait(aio);
            if ((*rv = nng_aio_result(aio)) == 0) {
                m = nng_aio_get_msg(aio);
                short_reply = nng_msg_len(m) != rs;
                nng_msg_free(m);
            }
        }
    }
    double t = (now_s() - t0) * 1e6;
    nng_aio_free(aio);
    nng_ctx_close(ctx);
    return *rv != 0 ? -1 : short_reply ? -2 : t;
}

pid_t spawn_self(char *const argv[], int *to, int *from)
{
    int in[2], out[2] = {-1, -1};
    if (pipe(in) != 0)
        return -1;
    if (from != NULL && pipe(out) != 0) {
        close(in[0]);
        close(in[1]);
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(in[0], 0);
        if (from != NULL)
            dup2(out[1], 1);
        close(in[0]);
        close(in[1]);
        if (from != NULL) {
            close(out[0]);
            close(out[1]);
        }
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    close(in[0]);
    if (from != NULL)
        close(out[1]);
    if (pid < 0) {
        close(in[1]);
        if (from != NULL)
            close(out[0]);
        return -1;
    }
    *to = in[1];
    if (from != NULL)
        *from = out[0];
    return pid;
}
