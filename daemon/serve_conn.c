/*
 * serve_conn.c - the listeners (opened, probed, restarted), connection
 * limits and idle timeouts of "flashtrie serve" (serve_conn.h).
 *
 * Every admitted connection (pipe) has an entry in a table keyed by its
 * pipe id: its listener, when it last completed a message or was sent a
 * reply, and how many replies it is owed.  One thread (conn_main) wakes
 * every CONN_TICK_MS: it closes the connections that owe nothing and
 * have been quiet for idle_timeout_ms, logs the end of a burst of refused
 * connections, and every probe_interval_ms dials each listener afresh and
 * sends a PING (a listener whose new connections are never served, as in
 * the nng 1.5.2 ipc wedge, then reads as down).  The probe is written
 * by hand on a plain socket: its connection and PING are counted like a
 * client's (connections_opened, messages).
 *
 * The receive limit (issue 39).  nng 1.5.2 reads a whole message per
 * connection before any context of ours sees it: its transports allocate
 * the length a message's header announces (ipc.c ipc_pipe_recv_cb,
 * tcp.c tcptran_pipe_recv_cb), and rep0 re-arms a connection's read as
 * soon as a context takes its previous message (rep.c rep0_ctx_recv,
 * rep0_pipe_recv_cb), so every connection may be reading one message of
 * up to the receive limit at any time, whatever the server answers.  The
 * one control the API gives is that limit (NNG_OPT_RECVMAXSZ on the
 * listener), which nng applies live to every pipe of the listener
 * (ipc_ep_set_recv_max_sz, tcptran_ep_set_recvmaxsz walk them) and checks
 * at each message's length header, before it allocates; a message over
 * it closes its connection unread.  So each connection is given a share
 * (its "potential": the highest limit in force since its last message
 * was taken, what it may be reading now), their sum is held under half
 * the memory budget and under what the heavy share (7/8) leaves beside
 * what the server holds, and the limit follows the connections:
 *   limit = max_message_bytes, or less while connections x limit would
 *   pass half the budget (budget / 2 / (connections + 1)), never below
 *   min(64 KiB, max_message_bytes).
 * A new connection lowers it at once (at ADD_PRE, before nng reads a
 * byte of it); the tick raises it again once the potentials allow; the
 * budget (serve_budget.c) counts the potentials as held, so what nng may
 * be reading plus what the server holds stays within the budget.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "flashtrie_client.h"
#include "frame.h"
#include "serve_budget.h"
#include "serve_conn.h"
#include "serve_priv.h"

/* The client library sizes its shared frames by this floor (a frame of
 * coalesced calls is never closed unread) and hints at it for a larger
 * request that loses its connection. */
_Static_assert(SRV_RX_FLOOR == FT_CLIENT_COALESCE_BYTES,
               "the client's FT_CLIENT_COALESCE_BYTES is the server's "
               "receive-limit floor");

#define CONN_TICK_MS 100
#define CONN_BUCKETS 4096   /* hash chains; entries are malloc'd */
#define BURST_QUIET_NS (10ull * 1000000000ull) /* a burst ends after 10 s */
#define PROBE_TIMEOUT_MS 1000

typedef struct conn_ent {
    uint32_t id;
    uint32_t sock;          /* index in srv->socks */
    uint64_t last_ns;       /* handshake, last message or last reply */
    uint32_t owed;          /* messages received, reply not yet gone */
    uint64_t pot;           /* what it may be reading now (bytes) */
    struct conn_ent *next;
} conn_ent;

struct srv_conn {
    pthread_mutex_t mu;
    conn_ent *bucket[CONN_BUCKETS];
    /* refusals of the burst under way: logged at its first and its end */
    uint64_t burst_n, burst_last_ns;
    pthread_mutex_t stop_mu;
    pthread_cond_t stop_cv;
    int stopping, running;
    pthread_t th;
    char down_why[FT_CONFIG_MAX_LISTENERS][400]; /* under mu */
    /* set while the probe dials a listener: one connection over
     * max_connections is let in, so that a full listener still reads as
     * up (it serves its connections); whoever comes first takes it. */
    atomic_int slack[FT_CONFIG_MAX_LISTENERS];
    /* the receive limit: every listener's NNG_OPT_RECVMAXSZ, and the sum
     * of the entries' potentials (written under mu) */
    pthread_mutex_t rx_mu;  /* serialises changes of the limit */
    uint32_t rx_ready;      /* listeners started (bit i: socks[i]), rx_mu */
    atomic_uint_fast64_t rxmax, pot_sum;
    atomic_uint_fast64_t rx_lowered, rx_raised;
};

/* conn_of returns the table, made at first use (the first ADD_PRE may come
 * before srv_conn_start: the listener starts first). */
static struct srv_conn *conn_of(server *srv)
{
    static pthread_mutex_t make_mu = PTHREAD_MUTEX_INITIALIZER;
    struct srv_conn *c = __atomic_load_n(&srv->conn, __ATOMIC_ACQUIRE);
    if (c)
        return c;
    pthread_mutex_lock(&make_mu);
    if ((c = srv->conn) == NULL && (c = calloc(1, sizeof *c)) != NULL) {
        pthread_mutex_init(&c->mu, NULL);
        pthread_mutex_init(&c->stop_mu, NULL);
        pthread_mutex_init(&c->rx_mu, NULL);
        atomic_store(&c->rxmax, srv->cfg.max_message_bytes);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&c->stop_cv, &ca);
        pthread_condattr_destroy(&ca);
        __atomic_store_n(&srv->conn, c, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&make_mu);
    return c;
}

static conn_ent **slot_of(struct srv_conn *c, uint32_t id)
{
    conn_ent **pp = &c->bucket[(id * 2654435761u) % CONN_BUCKETS];
    while (*pp && (*pp)->id != id)
        pp = &(*pp)->next;
    return pp;
}

static uint32_t sock_index(server *srv, srv_socket *s)
{
    return (uint32_t)(s - srv->socks);
}

/* ---- the receive limit ---- */

static uint64_t rx_ceiling(server *srv) { return srv->cfg.max_message_bytes; }

static uint64_t rx_floor(server *srv)
{
    uint64_t m = srv->cfg.max_message_bytes;
    return m < SRV_RX_FLOOR ? m : SRV_RX_FLOOR;
}

/* rx_share: what the connections' potentials may sum to. */
static uint64_t rx_share(server *srv)
{
    return srv->cfg.memory_budget_bytes / 2;
}

/* rx_room: what the potentials may sum to now: half the budget, and no
 * more than the heavy share (7/8) leaves beside what the server holds,
 * so that light messages keep their eighth whatever the heavy ones and
 * the connections hold. */
static uint64_t rx_room(server *srv)
{
    uint64_t heavy = srv->cfg.memory_budget_bytes / 8 * SRV_HEAVY_SHARE;
    uint64_t used = atomic_load(&srv->budget_used);
    uint64_t r = used < heavy ? heavy - used : 0;
    return r < rx_share(srv) ? r : rx_share(srv);
}

/* rx_target is the limit for n connections, a spare one included. */
static uint64_t rx_target(server *srv, uint64_t n)
{
    uint64_t t = rx_share(srv) / (n + 1), lo = rx_floor(srv);
    if (t > rx_ceiling(srv))
        t = rx_ceiling(srv);
    return t < lo ? lo : t;
}

static uint64_t conns_total(server *srv)
{
    uint64_t n = 0;
    for (size_t i = 0; i < srv->n_socks; i++)
        n += atomic_load(&srv->socks[i].conns);
    return n;
}

/* rx_apply sets every listener's receive limit (under rx_mu).  nng
 * copies it into every pipe of the listener at once. */
static void rx_apply(server *srv, struct srv_conn *c, uint64_t lim)
{
    for (size_t i = 0; i < srv->n_socks; i++)
        if (c->rx_ready & (1u << i))
            nng_listener_set_size(srv->socks[i].lst, NNG_OPT_RECVMAXSZ,
                                  (size_t)lim);
    atomic_store(&c->rxmax, lim);
}

/* rx_raise raises the limit toward its target once the potentials allow
 * it: every connection may then read up to it, so the sum of
 * max(potential, limit) must fit the share (tick, conn_main). */
static void rx_raise(server *srv, struct srv_conn *c)
{
    pthread_mutex_lock(&c->rx_mu);
    uint64_t cur = atomic_load(&c->rxmax);
    uint64_t want = rx_target(srv, conns_total(srv));
    pthread_mutex_lock(&c->mu);
    while (want > cur) {
        uint64_t sum = 0;
        for (size_t b = 0; b < CONN_BUCKETS; b++)
            for (conn_ent *e = c->bucket[b]; e; e = e->next)
                sum += e->pot > want ? e->pot : want;
        if (sum + want <= rx_room(srv)) {
            rx_apply(srv, c, want);
            for (size_t b = 0; b < CONN_BUCKETS; b++)
                for (conn_ent *e = c->bucket[b]; e; e = e->next)
                    if (e->pot < want)
                        e->pot = want;
            atomic_store(&c->pot_sum, sum);
            atomic_fetch_add(&c->rx_raised, 1);
            break;
        }
        /* halfway, down to the limit in force */
        uint64_t next = cur + (want - cur) / 2;
        if (next == want || next <= cur)
            break;
        want = next;
    }
    pthread_mutex_unlock(&c->mu);
    pthread_mutex_unlock(&c->rx_mu);
}

uint64_t srv_conn_reserved(server *srv)
{
    struct srv_conn *c = __atomic_load_n(&srv->conn, __ATOMIC_ACQUIRE);
    return c ? atomic_load(&c->pot_sum) : 0;
}

void srv_conn_listener_started(srv_socket *s)
{
    server *srv = s->srv;
    struct srv_conn *c = conn_of(srv);
    if (c == NULL) {
        nng_listener_set_size(s->lst, NNG_OPT_RECVMAXSZ,
                              (size_t)srv->cfg.max_message_bytes);
        return;
    }
    pthread_mutex_lock(&c->rx_mu);
    nng_listener_set_size(s->lst, NNG_OPT_RECVMAXSZ,
                          (size_t)atomic_load(&c->rxmax));
    /* from now on rx_apply sets it too (s->lst is written) */
    c->rx_ready |= 1u << sock_index(srv, s);
    pthread_mutex_unlock(&c->rx_mu);
}

void srv_conn_rx_stats(server *srv, uint64_t *lim, uint64_t *reserved,
                       uint64_t *lowered, uint64_t *raised)
{
    struct srv_conn *c = conn_of(srv);
    *lim = c ? atomic_load(&c->rxmax) : srv->cfg.max_message_bytes;
    *reserved = c ? atomic_load(&c->pot_sum) : 0;
    *lowered = c ? atomic_load(&c->rx_lowered) : 0;
    *raised = c ? atomic_load(&c->rx_raised) : 0;
}

/* admit: ADD_PRE.  Returns 0 when the connection must be refused. */
static int admit(srv_socket *s, nng_pipe p)
{
    server *srv = s->srv;
    struct srv_conn *c = conn_of(srv);
    uint32_t max = FT_CONFIG_LIVE(&srv->cfg, max_connections);
    uint64_t now = fti_now_ns();
    if (c == NULL)
        return 0;
    uint32_t i = sock_index(srv, s);
    conn_ent *e = malloc(sizeof *e);
    pthread_mutex_lock(&c->mu);
    if (e == NULL || (atomic_load(&s->conns) >= max &&
                      !atomic_exchange(&c->slack[i], 0))) {
        uint64_t n = ++c->burst_n;
        c->burst_last_ns = now;
        pthread_mutex_unlock(&c->mu);
        free(e);
        atomic_fetch_add(&srv->conn_refused, 1);
        if (n == 1)
            FT_LOGF(FT_LOG_WARN, "%s: %u connections open, max_connections "
                    "is %u: refusing new connections (one line per burst; "
                    "flashtrie_connections_refused_total counts them)",
                    s->lo.url, atomic_load(&s->conns), max);
        return 0;
    }
    e->id = (uint32_t)nng_pipe_id(p);
    e->sock = i;
    e->last_ns = now;
    e->owed = 0;
    e->pot = 0;
    conn_ent **pp = slot_of(c, e->id);
    int added = 0;
    if (*pp == NULL) {
        e->next = NULL;
        *pp = e;
        atomic_fetch_add(&s->conns, 1);
        atomic_fetch_add(&srv->pipes_added, 1);
        added = 1;
    }
    pthread_mutex_unlock(&c->mu);
    if (!added) {
        free(e); /* an id seen twice: nng reuses none while a pipe lives */
        return 1;
    }
    /* Its share of the receive limit, before nng reads a byte of it (the
     * read starts after ADD_PRE): the limit comes down for every pipe
     * when the connections' potentials and this one's would pass the
     * share.  Pipes already reading keep their (higher) potentials. */
    pthread_mutex_lock(&c->rx_mu);
    uint64_t cur = atomic_load(&c->rxmax);
    uint64_t others = atomic_load(&c->pot_sum);
    uint64_t lim = rx_target(srv, conns_total(srv));
    uint64_t free_ = rx_room(srv);
    uint64_t room = free_ > others ? free_ - others : 0;
    if (lim > room)
        lim = room < rx_floor(srv) ? rx_floor(srv) : room;
    if (lim < cur) {
        rx_apply(srv, c, lim);
        atomic_fetch_add(&c->rx_lowered, 1);
    } else {
        lim = cur;
    }
    pthread_mutex_lock(&c->mu);
    conn_ent *me = *slot_of(c, (uint32_t)nng_pipe_id(p));
    if (me) {
        me->pot = lim;
        atomic_fetch_add(&c->pot_sum, lim);
    }
    pthread_mutex_unlock(&c->mu);
    pthread_mutex_unlock(&c->rx_mu);
    return 1;
}

static void forget(srv_socket *s, nng_pipe p)
{
    server *srv = s->srv;
    struct srv_conn *c = conn_of(srv);
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    conn_ent **pp = slot_of(c, (uint32_t)nng_pipe_id(p)), *e = *pp;
    if (e) {
        *pp = e->next;
        atomic_fetch_sub(&c->pot_sum, e->pot);
    }
    pthread_mutex_unlock(&c->mu);
    if (e) {
        atomic_fetch_sub(&srv->socks[e->sock].conns, 1);
        atomic_fetch_add(&srv->pipes_removed, 1);
        free(e);
    }
}

void srv_conn_pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
    srv_socket *s = arg;
    server *srv = s->srv;
    /* Draining stops new connections here; the ones already open keep
     * their replies coming. */
    if (ev == NNG_PIPE_EV_ADD_PRE) {
        atomic_fetch_add(&s->adds, 1);
        if (atomic_load(&srv->draining) || !admit(s, p))
            nng_pipe_close(p);
    } else if (ev == NNG_PIPE_EV_REM_POST) {
        forget(s, p);
    }
}

static void touch(server *srv, nng_pipe p, int owed)
{
    struct srv_conn *c = srv->conn;
    if (c == NULL || nng_pipe_id(p) <= 0)
        return;
    pthread_mutex_lock(&c->mu);
    conn_ent *e = *slot_of(c, (uint32_t)nng_pipe_id(p));
    if (e) {
        e->last_ns = fti_now_ns();
        if (owed > 0) {
            e->owed++;
            /* Its message was taken: rep0 has re-armed its read under
             * the limit in force now, and the message is the budget's. */
            uint64_t lim = atomic_load(&c->rxmax);
            if (e->pot > lim) {
                atomic_fetch_sub(&c->pot_sum, e->pot - lim);
                e->pot = lim;
            }
        } else if (e->owed > 0) {
            e->owed--;
        }
    }
    pthread_mutex_unlock(&c->mu);
}

void srv_conn_received(server *srv, nng_pipe p) { touch(srv, p, 1); }
void srv_conn_replied(server *srv, nng_pipe p) { touch(srv, p, -1); }

/* reap closes the connections idle for idle_timeout_ms. */
static void reap(server *srv, struct srv_conn *c, uint64_t now)
{
    uint32_t idle_ms = FT_CONFIG_LIVE(&srv->cfg, idle_timeout_ms);
    if (idle_ms == 0)
        return;
    uint64_t limit = (uint64_t)idle_ms * 1000000u;
    enum { BATCH = 256 };
    uint32_t ids[BATCH];
    size_t n = 0;
    pthread_mutex_lock(&c->mu);
    for (size_t b = 0; b < CONN_BUCKETS && n < BATCH; b++)
        for (conn_ent *e = c->bucket[b]; e && n < BATCH; e = e->next)
            /* last_ns may be later than now: a message completed
             * after now was read and before the lock was taken (the
             * unsigned difference would wrap, and close it) */
            if (e->owed == 0 && e->last_ns < now &&
                now - e->last_ns >= limit) {
                ids[n++] = e->id;
                e->last_ns = now; /* closed once; REM_POST removes it */
            }
    pthread_mutex_unlock(&c->mu);
    size_t closed = 0;
    for (size_t i = 0; i < n; i++) {
        nng_pipe p = {.id = ids[i]};
        closed += nng_pipe_close(p) == 0;
    }
    if (closed) {
        atomic_fetch_add(&srv->conn_idle_closed, closed);
        FT_LOGF(FT_LOG_INFO, "closed %zu connection%s that completed no "
                "message for %u ms (idle_timeout_ms)", closed,
                closed == 1 ? "" : "s", idle_ms);
    }
}

/* burst_end logs the end of a burst of refused connections. */
static void burst_end(struct srv_conn *c, uint64_t now)
{
    pthread_mutex_lock(&c->mu);
    uint64_t n = 0;
    if (c->burst_n && now - c->burst_last_ns >= BURST_QUIET_NS) {
        n = c->burst_n;
        c->burst_n = 0;
    }
    pthread_mutex_unlock(&c->mu);
    if (n)
        FT_LOGF(FT_LOG_WARN, "max_connections: %llu connection%s refused in "
                "the last burst (none for 10 s now)", (unsigned long long)n,
                n == 1 ? "" : "s");
}

void srv_conn_probe_url(const char *url, char *out, size_t outlen)
{
    const char *wild[] = {"0.0.0.0:", "*:", "[::]:", ":"};
    const char *host = strstr(url, "://");
    if (host && strncmp(url, "ipc://", 6) != 0) {
        host += 3;
        for (size_t i = 0; i < sizeof wild / sizeof wild[0]; i++)
            if (strncmp(host, wild[i], strlen(wild[i])) == 0) {
                snprintf(out, outlen, "%.*s%s%s", (int)(host - url), url,
                         i == 2 ? "[::1]" : "127.0.0.1",
                         host + strlen(wild[i]) - 1);
                return;
            }
    }
    snprintf(out, outlen, "%s", url);
}

/* probe_connect opens a plain socket to url (ipc://PATH, tcp:// or
 * tls+tcp://HOST:PORT, numeric or localhost); -1 with why. */
static int probe_connect(const char *url, int ms, char *why, size_t len)
{
    int fd = -1;
    if (strncmp(url, "ipc://", 6) == 0) {
        struct sockaddr_un a;
        memset(&a, 0, sizeof a);
        a.sun_family = AF_UNIX;
        size_t pl = strlen(url + 6);
        if (pl >= sizeof a.sun_path) {
            snprintf(why, len, "%s: the path is too long", url);
            return -1;
        }
        memcpy(a.sun_path, url + 6, pl + 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0)
            goto done;
    } else {
        const char *h = strstr(url, "://") + 3, *colon = strrchr(h, ':');
        char host[256], port[8];
        snprintf(host, sizeof host, "%.*s", (int)(colon - h), h);
        snprintf(port, sizeof port, "%s", colon + 1);
        size_t hl = strlen(host);
        if (hl >= 2 && host[0] == '[') { /* [::1] */
            memmove(host, host + 1, hl - 2);
            host[hl - 2] = 0;
        }
        struct addrinfo hints, *res = NULL;
        memset(&hints, 0, sizeof hints);
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_NUMERICSERV;
        int g = getaddrinfo(host, port, &hints, &res);
        if (g != 0) {
            snprintf(why, len, "%s: %s", url, gai_strerror(g));
            return -1;
        }
        fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int ok = fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0;
        freeaddrinfo(res);
        if (ok)
            goto done;
    }
    int e = errno;
    snprintf(why, len, "%s: connect: %s", url, strerror(e));
    if (fd >= 0)
        close(fd);
    errno = e; /* the caller reads it */
    return -1;
done:;
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

/* read_all reads n bytes before the deadline; 0, or -1. */
static int read_all(int fd, void *p, size_t n, uint64_t deadline)
{
    size_t got = 0;
    while (got < n && fti_now_ns() < deadline) {
        ssize_t k = recv(fd, (char *)p + got, n - got, 0);
        if (k <= 0)
            return -1;
        got += (size_t)k;
    }
    return got == n ? 0 : -1;
}

/* probe connects to s afresh, as a REQ peer at the transport (the SP
 * handshake and a PING in nng's ipc or tcp framing, written by hand: no
 * nng socket in the server to open and close every few seconds, whose
 * nng_close can hang in nng 1.5.2), and waits for the PONG; 1 when it
 * came, else 0 with why.  A tls+tcp:// listener is only connected to
 * (its handshake would need the TLS library here). */
static int probe(srv_socket *s, uint32_t timeout_ms, char *why, size_t len,
                 int *mendable)
{
    char url[FT_CONFIG_URL_MAX + 16];
    srv_conn_probe_url(s->lo.url, url, sizeof url);
    uint64_t deadline = fti_now_ns() + (uint64_t)timeout_ms * 1000000u;
    unsigned adds0 = atomic_load(&s->adds);
    *mendable = 0;
    int fd = probe_connect(url, (int)timeout_ms, why, len);
    if (fd < 0) {
        /* an ipc socket file gone, or left behind by a closed listener:
         * a new listener makes it again */
        *mendable = strncmp(url, "ipc://", 6) == 0 &&
                    (errno == ENOENT || errno == ECONNREFUSED);
        return 0;
    }
    if (strncmp(url, "tls+", 4) == 0) {
        close(fd);
        return 1;
    }
    int ipc = strncmp(url, "ipc://", 6) == 0, ok = 0;
    const char *what = "the handshake";
    static const unsigned char hs[8] = {0, 'S', 'P', 0, 0, 0x30, 0, 0};
    unsigned char peer[8];
    ft_buf b;
    ft_buf_init(&b);
    uint64_t id = fti_now_ns();
    if (send(fd, hs, 8, MSG_NOSIGNAL) == 8 &&
        read_all(fd, peer, 8, deadline) == 0 && peer[1] == 'S' &&
        peer[2] == 'P') {
        what = "sending the PING";
        unsigned char h[13];
        size_t hl = 0;
        if (ft_frame_encode_ping(&b, id) == FT_OK) {
            if (ipc)
                h[hl++] = 1;
            uint64_t n = b.len + 4;
            for (int i = 0; i < 8; i++)
                h[hl++] = (unsigned char)(n >> (56 - 8 * i));
            uint32_t rid = 0x80000001u;
            for (int i = 0; i < 4; i++)
                h[hl++] = (unsigned char)(rid >> (24 - 8 * i));
            if (send(fd, h, hl, MSG_NOSIGNAL) == (ssize_t)hl &&
                send(fd, b.data, b.len, MSG_NOSIGNAL) == (ssize_t)b.len) {
                what = "waiting for the PONG";
                unsigned char rh[9 + 4], body[64];
                size_t rl = ipc ? 9 : 8;
                if (read_all(fd, rh, rl + 4, deadline) == 0) {
                    uint64_t n = 0;
                    for (size_t i = ipc; i < rl; i++)
                        n = n << 8 | rh[i];
                    ft_frame_hdr fh;
                    char err[160];
                    if (n >= 4 && n - 4 <= sizeof body &&
                        read_all(fd, body, (size_t)n - 4, deadline) == 0 &&
                        ft_frame_decode_header(&fh, body, (size_t)n - 4, err,
                                               sizeof err) == FT_OK &&
                        fh.type == FT_FRAME_PONG && fh.id == id)
                        ok = 1;
                    else
                        what = "reading the PONG";
                }
            }
        }
    }
    if (!ok) {
        int timed_out = fti_now_ns() >= deadline;
        snprintf(why, len, "%s: %s: %s", url, what,
                 timed_out ? "no answer within the timeout"
                           : "the connection failed");
        /* The wedge's mark: connected, no answer, and no connection at all
         * reached the server's notification (ADD_PRE) meanwhile, where a
         * busy or full listener still admits or refuses it there. */
        *mendable = timed_out && atomic_load(&s->adds) == adds0;
    }
    close(fd);
    ft_buf_free(&b);
    return ok;
}

/* restart closes a listener that failed its probe `after` times in a row
 * and opens it again: what mends nng 1.5.2's wedge (its bug #1518: a
 * client gone in the middle of the handshake leaves the listener reading
 * no new connection's handshake, for good) and an ipc socket file
 * deleted under the server.  The next probe says whether it worked. */
static void restart(srv_socket *s, uint32_t after)
{
    char err[400];
    unsigned conns = atomic_load(&s->conns);
    s->probe_fails = 0;
    atomic_fetch_add(&s->restarts, 1);
    if (srv_socket_relisten(s, err, sizeof err) == FT_OK)
        FT_LOGF(FT_LOG_WARN, "listener %s restarted after %u failed probes "
                "in a row (probe_restart_after); its %u connection%s closed",
                s->lo.url, after, conns, conns == 1 ? " was" : "s were");
    else
        FT_LOGF(FT_LOG_ERROR, "listener %s: restart after %u failed probes "
                "failed: %s; tried again after %u more", s->lo.url, after,
                err, after);
}

static void probe_all(server *srv, struct srv_conn *c, uint32_t interval_ms)
{
    uint32_t timeout = interval_ms < PROBE_TIMEOUT_MS ? interval_ms
                                                      : PROBE_TIMEOUT_MS;
    for (size_t i = 0; i < srv->n_socks; i++) {
        srv_socket *s = &srv->socks[i];
        if (!s->open || atomic_load(&srv->draining))
            continue;
        /* A listener that wants client certificates cannot be dialed
         * without one: it is not probed (it counts as up). */
        if (s->lo.tls_verify)
            continue;
        char why[400] = "";
        atomic_store(&c->slack[i], 1);
        int mendable;
        int up = probe(s, timeout, why, sizeof why, &mendable);
        atomic_store(&c->slack[i], 0);
        if (atomic_load(&srv->draining))
            return;
        int was = !atomic_exchange(&s->down, !up);
        pthread_mutex_lock(&c->mu);
        snprintf(c->down_why[i], sizeof c->down_why[i], "%s", up ? "" : why);
        pthread_mutex_unlock(&c->mu);
        if (was && !up)
            FT_LOGF(FT_LOG_ERROR, "listener %s does not answer its probe: %s; "
                    "/healthz says 503 until it does", s->lo.url, why);
        else if (!was && up)
            FT_LOGF(FT_LOG_INFO, "listener %s answers its probe again",
                    s->lo.url);
        /* failed probes in a row that a restart would mend */
        s->probe_fails = up || !mendable ? 0 : s->probe_fails + 1;
        uint32_t after = srv->cfg.probe_restart_after;
        if (!up && after && s->probe_fails >= after)
            restart(s, after);
    }
}

static void *conn_main(void *arg)
{
    server *srv = arg;
    struct srv_conn *c = srv->conn;
    uint64_t next_probe = fti_now_ns() +
                          (uint64_t)srv->cfg.probe_interval_ms * 1000000u;
    pthread_mutex_lock(&c->stop_mu);
    while (!c->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += CONN_TICK_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&c->stop_cv, &c->stop_mu, &ts);
        if (c->stopping)
            break;
        pthread_mutex_unlock(&c->stop_mu);
        uint64_t now = fti_now_ns();
        reap(srv, c, now);
        burst_end(c, now);
        rx_raise(srv, c);
        if (srv->cfg.probe_interval_ms && now >= next_probe) {
            probe_all(srv, c, srv->cfg.probe_interval_ms);
            next_probe = fti_now_ns() +
                         (uint64_t)srv->cfg.probe_interval_ms * 1000000u;
        }
        pthread_mutex_lock(&c->stop_mu);
    }
    pthread_mutex_unlock(&c->stop_mu);
    return NULL;
}

int srv_conn_start(server *srv, char *err, size_t errlen)
{
    struct srv_conn *c = conn_of(srv);
    if (c == NULL) {
        snprintf(err, errlen, "connections: out of memory");
        return FT_ENOMEM;
    }
    int rv = pthread_create(&c->th, NULL, conn_main, srv);
    if (rv != 0) {
        snprintf(err, errlen, "connections: cannot start its thread: %s",
                 strerror(rv));
        return FT_ENOMEM;
    }
    c->running = 1;
    return FT_OK;
}

void srv_conn_stop(server *srv)
{
    struct srv_conn *c = srv->conn;
    if (c == NULL || !c->running)
        return;
    pthread_mutex_lock(&c->stop_mu);
    c->stopping = 1;
    pthread_cond_signal(&c->stop_cv);
    pthread_mutex_unlock(&c->stop_mu);
    pthread_join(c->th, NULL);
    c->running = 0;
    /* The table stays: the sockets close after this and their REM_POST
     * notifications still find it (srv_conn_free, after them). */
}

void srv_conn_free(server *srv)
{
    struct srv_conn *c = srv->conn;
    if (c == NULL)
        return;
    for (size_t b = 0; b < CONN_BUCKETS; b++)
        while (c->bucket[b]) {
            conn_ent *e = c->bucket[b];
            c->bucket[b] = e->next;
            free(e);
        }
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->stop_mu);
    pthread_mutex_destroy(&c->rx_mu);
    pthread_cond_destroy(&c->stop_cv);
    free(c);
    srv->conn = NULL;
}

int srv_listeners_ok(server *srv, char *why, size_t whylen)
{
    for (size_t i = 0; i < srv->n_socks; i++) {
        if (!atomic_load(&srv->socks[i].down))
            continue;
        if (why && whylen) {
            struct srv_conn *c = srv->conn;
            char w[400] = "";
            if (c) {
                pthread_mutex_lock(&c->mu);
                snprintf(w, sizeof w, "%s", c->down_why[i]);
                pthread_mutex_unlock(&c->mu);
            }
            snprintf(why, whylen, "listener %s does not answer: %s",
                     srv->socks[i].lo.url, w);
        }
        return 0;
    }
    return 1;
}

/* ---- the listeners: opened, and opened again (srv_socket_relisten) ---- */

/* read_pem reads a whole PEM file into a NUL-terminated string. */
static char *read_pem(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    ft_buf b;
    ft_buf_init(&b);
    char chunk[4096];
    size_t k;
    int ok = 1;
    while (ok && (k = fread(chunk, 1, sizeof chunk, f)) > 0)
        ok = ft_buf_append(&b, chunk, k) == FT_OK;
    ok = ok && !ferror(f) && ft_buf_put_u8(&b, 0) == FT_OK;
    fclose(f);
    if (!ok) {
        ft_buf_free(&b);
        return NULL;
    }
    return (char *)b.data;
}

static int tls_setup(srv_socket *s, char *err, size_t errlen)
{
    const ft_config_listener *lo = &s->lo;
    if (!lo->tls_cert[0] || !lo->tls_key[0]) {
        snprintf(err, errlen, "%s: a TLS listener needs a certificate and a "
                 "key", lo->url);
        return FT_ECONFIG;
    }
    int rv = nng_tls_config_alloc(&s->tls, NNG_TLS_MODE_SERVER);
    if (rv != 0) {
        snprintf(err, errlen, "%s: TLS: %s", lo->url, nng_strerror(rv));
        return FT_ECONN;
    }
    char *cert = read_pem(lo->tls_cert), *key = read_pem(lo->tls_key);
    if (cert == NULL || key == NULL) {
        snprintf(err, errlen, "%s: TLS: cannot read %s", lo->url,
                 cert == NULL ? lo->tls_cert : lo->tls_key);
        free(cert);
        free(key);
        return FT_EIO;
    }
    rv = nng_tls_config_own_cert(s->tls, cert, key, NULL);
    free(cert);
    free(key);
    if (rv != 0) {
        snprintf(err, errlen, "%s: TLS certificate %s with key %s: %s",
                 lo->url, lo->tls_cert, lo->tls_key, nng_strerror(rv));
        return FT_ECONFIG;
    }
    if (lo->tls_ca[0] && (rv = nng_tls_config_ca_file(s->tls, lo->tls_ca))) {
        snprintf(err, errlen, "%s: TLS CA %s: %s", lo->url, lo->tls_ca,
                 nng_strerror(rv));
        return FT_ECONFIG;
    }
    rv = nng_tls_config_auth_mode(s->tls, lo->tls_verify
                                              ? NNG_TLS_AUTH_MODE_REQUIRED
                                              : NNG_TLS_AUTH_MODE_NONE);
    if (rv == 0)
        rv = nng_listener_set_ptr(s->lst, NNG_OPT_TLS_CONFIG, s->tls);
    if (rv != 0) {
        snprintf(err, errlen, "%s: TLS: %s", lo->url, nng_strerror(rv));
        return FT_ECONFIG;
    }
    return FT_OK;
}

int srv_listener_open(srv_socket *s, char *err, size_t errlen)
{
    server *srv = s->srv;
    int rv = nng_listener_create(&s->lst, s->sock, s->lo.url);
    if (rv != 0) {
        snprintf(err, errlen, "%s: %s", s->lo.url, nng_strerror(rv));
        return FT_ECONFIG;
    }
    /* max_message_bytes, or the lower receive limit in force now: nng
     * applies it to every pipe of the listener. */
    srv_conn_listener_started(s);
    if (!strncmp(s->lo.url, "ipc://", 6) && srv->cfg.ipc_mode[0]) {
        /* The socket's mode from the config, not the umask (a unit's
         * UMask=0027 would leave the group unable to connect). */
        int mode = (int)strtol(srv->cfg.ipc_mode, NULL, 8);
        rv = nng_listener_set_int(s->lst, NNG_OPT_IPC_PERMISSIONS, mode);
        if (rv != 0) {
            snprintf(err, errlen, "%s: ipc_mode %s: %s", s->lo.url,
                     srv->cfg.ipc_mode, nng_strerror(rv));
            return FT_ECONFIG;
        }
    }
    if (s->tls) {
        rv = nng_listener_set_ptr(s->lst, NNG_OPT_TLS_CONFIG, s->tls);
        if (rv != 0) {
            snprintf(err, errlen, "%s: TLS: %s", s->lo.url, nng_strerror(rv));
            return FT_ECONFIG;
        }
    } else if (!strncmp(s->lo.url, "tls+", 4)) {
        int rc = tls_setup(s, err, errlen);
        if (rc != FT_OK)
            return rc;
    }
    rv = nng_listener_start(s->lst, 0);
    if (rv != 0) {
        snprintf(err, errlen, "%s: %s", s->lo.url, nng_strerror(rv));
        return FT_ECONN;
    }
    return FT_OK;
}

int srv_socket_relisten(srv_socket *s, char *err, size_t errlen)
{
    /* Closing the listener closes the connections it accepted (nng), the
     * ones stuck in its handshake too; an ipc listener also removes its
     * socket file, so that the new one can bind the path again. */
    struct srv_conn *c = conn_of(s->srv);
    if (c != NULL) { /* rx_apply leaves it alone until it is open again */
        pthread_mutex_lock(&c->rx_mu);
        c->rx_ready &= ~(1u << sock_index(s->srv, s));
        pthread_mutex_unlock(&c->rx_mu);
    }
    nng_listener_close(s->lst);
    return srv_listener_open(s, err, errlen);
}
