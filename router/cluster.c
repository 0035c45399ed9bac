/*
 * cluster.c - multi-process shard groups: the bootstrap, the lockstep
 * batch and the nng transport (cluster.h; the NCCL transport is in
 * cluster_nccl.c).
 *
 * Wire messages (little-endian, one nng message each) start with a
 * 16-byte header: u32 magic "FTCL", u8 type, 3 zero bytes, u32 the
 * sender's rank, u32 the batch sequence number (0 outside batches).
 * Bodies, by type:
 *   REG      rank -> 0: world, shards, first, count, engine kind,
 *            max_batch, max_beam, max_k, max_t, u64 manifest checksum,
 *            u32 length and the bytes of the cluster secret (at most 255)
 *   SESSION  0 -> rank: world, shards, then per rank first, count; u8 has
 *            NCCL id, then the 128-byte ncclUniqueId when it has one
 *   REFUSE   0 -> rank: u32 error code, u32 length, the message
 *   BATCH    0 -> rank: u32 requests, u32 payload bytes, u8 inline; when
 *            inline the payload follows (nng), else it follows by NCCL
 *            broadcast.  Payload, per request: T, K, beam, results, f32
 *            theta_tok, f32 theta_sent, f64 alpha, T*K u32 tokens, T*K
 *            f32 logp
 *   LISTS    rank -> 0: u32 step, u32 len, count * len u64 keys (nng)
 *   ALL      0 -> rank: u32 step, u32 len, shards * len u64 keys (nng)
 *   HITS     rank -> 0: per shard of the rank, per request: u32 status,
 *            u32 hits, per hit u32 len, u32 order, u64 key index (in the
 *            shard), u64 value, f64 score, f32 sigma, len u32 tokens
 *   FAIL     rank -> 0: u32 error code, u32 length, the message
 *   ABORT    0 -> rank: the batch of this sequence number is given up
 *   BYE      0 -> rank: the coordinator leaves
 *   PING     0 -> rank: the idle heartbeat (no body)
 *   PONG     rank -> 0: its answer (no body)
 *   REJOIN   0 -> rank: it is down (it did not answer in time, or its
 *            batch failed); it registers again on the same connection
 * A message of another sequence number than the batch under way is stale
 * (a batch given up) and dropped.
 *
 * The coordinator's socket is pair1 in polyamorous mode (one socket, a
 * pipe per rank, messages addressed by pipe).  That mode drops a message
 * when the rank's pipe already queues two, rather than block the others;
 * the protocol never has more than one message outstanding per rank (each
 * BATCH and ALL waits for the rank's answer), so only an ABORT or BYE to a
 * rank that stopped reading can be lost, and the rank then ends on its own
 * timeout or on the closed connection (the BYE is repeated while rank 0
 * waits for the ranks to leave, leave_ranks).  (The mode is deprecated
 * after nng 1.x; per-rank sockets would replace it.)
 */
#include "flashtrie/internal/bits.h"
#include "flashtrie/internal/clock.h"
#include "flashtrie/internal/filemagic.h"
#include "cluster.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/protocol/pair1/pair.h>
#include <nng/supplemental/util/platform.h>
#include <xxhash.h>

#include "flashtrie/internal/buf.h"
#include "close_within.h"
#include "cluster_impl.h"
#include "rt_impl.h"
#include "search_impl.h"
#include "steps.h"

#define CL_MAGIC 0x4c435446u /* "FTCL" */
#define CL_HEAD 16u
#define CL_POLL_MS 100

static int ops_failed(void *arg);


void ft_cluster_opts_init(ft_cluster_opts *o)
{
    memset(o, 0, sizeof *o);
    ft_engine_opts_init(&o->engine);
    o->world = 1;
}

void ft_cluster_block(uint32_t shards, uint32_t world, uint32_t r,
                      uint32_t *first, uint32_t *count)
{
    uint64_t a = (uint64_t)r * shards / world;
    uint64_t b = (uint64_t)(r + 1) * shards / world;
    *first = (uint32_t)a;
    *count = (uint32_t)(b - a);
}

const char *cl_type_name(int t)
{
    static const char *n[] = {"?",     "REG",  "SESSION", "REFUSE",
                              "BATCH", "LISTS", "ALL",    "HITS",
                              "FAIL",  "ABORT", "BYE",    "PING",
                              "PONG",  "REJOIN"};
    return t > 0 && t <= CL_LAST ? n[t] : "?";
}

/* ---- reading messages ---- */

int cl_get(cl_rd *r, void *p, size_t n)
{
    if (r->bad || r->len - r->pos < n) {
        r->bad = 1;
        memset(p, 0, n);
        return -1;
    }
    memcpy(p, r->p + r->pos, n);
    r->pos += n;
    return 0;
}

uint32_t cl_u32(cl_rd *r)
{
    unsigned char b[4];
    cl_get(r, b, 4);
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
           (uint32_t)b[3] << 24;
}

uint64_t cl_u64(cl_rd *r)
{
    uint64_t lo = cl_u32(r);
    return lo | (uint64_t)cl_u32(r) << 32;
}

static float cl_f32(cl_rd *r)
{
    return fti_u2f(cl_u32(r));
}

static double cl_f64(cl_rd *r)
{
    return fti_u2d(cl_u64(r));
}

void cl_head(ft_buf *b, int type, uint32_t rank, uint32_t seq)
{
    b->len = 0;
    ft_buf_put_u32(b, CL_MAGIC);
    ft_buf_put_u8(b, (uint8_t)type);
    ft_buf_put_u8(b, 0);
    ft_buf_put_u16(b, 0);
    ft_buf_put_u32(b, rank);
    ft_buf_put_u32(b, seq);
}

/* ---- the connections ---- */

/* on_pipe marks a rank down when its connection goes (coordinator), or
 * the coordinator lost (ranks).  While closing it is our own close, or
 * (coordinator) the ranks leaving after the BYE, which leave_ranks waits
 * for. */
static void on_pipe(nng_pipe p, nng_pipe_ev ev, void *arg)
{
    ft_cluster *c = arg;
    if (ev != NNG_PIPE_EV_REM_POST)
        return;
    pthread_mutex_lock(&c->mu);
    if (c->rank != 0) {
        if (!c->closing)
            c->lost = 1;
    } else {
        for (uint32_t r = 1; r < c->world; r++)
            if (c->r[r].joined && nng_pipe_id(c->r[r].pipe) == nng_pipe_id(p)) {
                if (!c->closing && c->running && c->r[r].up) {
                    c->r[r].up = 0;
                    snprintf(c->r[r].why, sizeof c->r[r].why,
                             "rank %u: the connection was lost", r);
                    FT_LOGF(FT_LOG_ERROR, "cluster: %s", c->r[r].why);
                }
                /* Its rank may register again: before the session, or
                 * (a restarted process) to rejoin a running cluster. */
                c->r[r].joined = 0;
                c->r[r].pipe = (nng_pipe)NNG_PIPE_INITIALIZER;
            }
    }
    pthread_mutex_unlock(&c->mu);
}

/* is_lost (ranks) says whether the coordinator's connection went. */
static int is_lost(ft_cluster *c)
{
    pthread_mutex_lock(&c->mu);
    int l = c->lost;
    pthread_mutex_unlock(&c->mu);
    return l;
}

/* cl_send sends b to rank r (the coordinator) or to the coordinator. */
int cl_send(ft_cluster *c, uint32_t r, const ft_buf *b)
{
    nng_msg *m;
    if (nng_msg_alloc(&m, 0) != 0)
        return FT_ENOMEM;
    if (nng_msg_append(m, b->data, b->len) != 0) {
        nng_msg_free(m);
        return FT_ENOMEM;
    }
    if (c->rank == 0) {
        /* nng's pipe events and the keeper change it (under mu) */
        pthread_mutex_lock(&c->mu);
        nng_msg_set_pipe(m, c->r[r].pipe);
        pthread_mutex_unlock(&c->mu);
    }
    int rv = nng_sendmsg(c->sock, m, 0);
    if (rv != 0) {
        nng_msg_free(m);
        return FT_ECONN;
    }
    return FT_OK;
}

/* recv_x is cl_recv; flags NNG_FLAG_NONBLOCK does not wait. */
static int recv_x(ft_cluster *c, nng_msg **out, int *type, uint32_t *from,
                  uint32_t *seq, cl_rd *rd, int flags)
{
    nng_msg *m;
    int rv = nng_recvmsg(c->sock, &m, flags);
    if (rv == NNG_ETIMEDOUT || rv == NNG_EAGAIN)
        return FT_ETIMEDOUT;
    if (rv != 0)
        return FT_ECONN;
    rd->p = nng_msg_body(m);
    rd->len = nng_msg_len(m);
    rd->pos = 0;
    rd->bad = 0;
    uint32_t magic = cl_u32(rd);
    unsigned char t[4];
    cl_get(rd, t, 4);
    *from = cl_u32(rd);
    *seq = cl_u32(rd);
    if (rd->bad || magic != CL_MAGIC || t[0] == 0 || t[0] > CL_LAST) {
        FT_LOGF(FT_LOG_WARN, "cluster: dropped a message that is not a "
                "cluster message (%zu bytes)", rd->len);
        nng_msg_free(m);
        return FT_EPROTO;
    }
    *type = t[0];
    if (c->rank == 0) {
        /* The sender is who its connection registered as, whatever the
         * message says (REG names itself). */
        nng_pipe p = nng_msg_get_pipe(m);
        uint32_t who = 0;
        pthread_mutex_lock(&c->mu);
        for (uint32_t r = 1; r < c->world; r++)
            if (c->r[r].joined && nng_pipe_id(c->r[r].pipe) == nng_pipe_id(p))
                who = r;
        pthread_mutex_unlock(&c->mu);
        if (*type != CL_REG && who == 0) {
            nng_msg_free(m);
            return FT_EPROTO;
        }
        if (*type != CL_REG)
            *from = who;
    }
    *out = m;
    return FT_OK;
}

/* cl_recv waits up to CL_POLL_MS for one message; FT_ETIMEDOUT when none
 * came.  *from is the sender's rank (the coordinator: from its pipe). */
int cl_recv(ft_cluster *c, nng_msg **out, int *type, uint32_t *from,
            uint32_t *seq, cl_rd *rd)
{
    return recv_x(c, out, type, from, seq, rd, 0);
}

/* bye_queued (ranks, the connection gone) reads what the coordinator sent
 * before it went and says whether a BYE is among it: nng reports the
 * closed connection from its own threads, so a rank can see it before it
 * reads the BYE received ahead of it (a rank slowed down, a loaded
 * machine); the coordinator then left, it was not lost. */
static int bye_queued(ft_cluster *c)
{
    int bye = 0, rc;
    for (;;) {
        nng_msg *m;
        int type;
        uint32_t from, seq;
        cl_rd rd;
        rc = recv_x(c, &m, &type, &from, &seq, &rd, NNG_FLAG_NONBLOCK);
        if (rc == FT_EPROTO)
            continue;
        if (rc != FT_OK)
            return bye;
        bye |= type == CL_BYE;
        nng_msg_free(m);
    }
}

/* ---- the bootstrap ---- */

static uint64_t manifest_sum(const char *path, char *errbuf, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        RT_ERRF(errbuf, errlen, "%s: cannot read the manifest", path);
        return 0;
    }
    XXH3_state_t *st = XXH3_createState();
    XXH3_64bits_reset(st);
    unsigned char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        XXH3_64bits_update(st, buf, n);
    fclose(f);
    uint64_t h = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    return h ? h : 1;
}

/* is_index says whether the file at path starts with an index's magic
 * (shard/index_file.c). */
static int is_index(const char *path)
{
    return fti_file_has_magic(path, "FLSHTRIE");
}

int ft_cluster_open_library(ft_library **out, const char *path,
                            unsigned flags, uint32_t rank, uint32_t world,
                            char *errbuf, size_t errlen)
{
    *out = NULL;
    ft_library *m;
    int rc = ft_library_open_part(&m, path, flags, 0, 0, errbuf, errlen);
    /* The manifest's own words ("not a FlashTrie shard manifest (bad
     * magic)", or for a large index "(N bytes, more than any
     * manifest)") do not say what a cluster wants instead: FT_EINVAL,
     * as cluster.h says, the file being no damaged manifest. */
    RT_RETURN_ERROR_IF(rc == FT_EFORMAT && is_index(path), FT_EINVAL,
                       "%s: an unsharded FlashTrie index: a cluster of "
                       "world %u needs a shard manifest (made by `flashtrie "
                       "split`)", path, world);
    if (rc != FT_OK)
        return rc;
    uint32_t s = (uint32_t)ft_library_shards(m);
    ft_library_close(m);
    RT_RETURN_ERROR_IF(world > s, FT_EINVAL,
                       "cluster.world: %u ranks for the %u shards of %s: "
                       "every rank needs a shard", world, s, path);
    uint32_t first, count;
    ft_cluster_block(s, world, rank, &first, &count);
    return ft_library_open_part(out, path, flags, first, count, errbuf,
                                errlen);
}

static void put_reg(ft_cluster *c, ft_buf *b)
{
    cl_head(b, CL_REG, c->rank, 0);
    ft_buf_put_u32(b, c->world);
    ft_buf_put_u32(b, c->S);
    ft_buf_put_u32(b, c->first);
    ft_buf_put_u32(b, c->count);
    ft_buf_put_u32(b, (uint32_t)c->eo.kind);
    ft_buf_put_u32(b, c->eo.max_batch);
    ft_buf_put_u32(b, c->eo.max_beam);
    ft_buf_put_u32(b, c->eo.max_k);
    ft_buf_put_u32(b, c->eo.max_t);
    ft_buf_put_u64(b, c->msum);
    size_t sl = strlen(c->secret);
    ft_buf_put_u32(b, (uint32_t)sl);
    ft_buf_append(b, c->secret, sl);
}

/* secret_same compares the secret a rank sent (n bytes at p) with ours in
 * a time that depends on neither's contents nor length. */
static int secret_same(const ft_cluster *c, const unsigned char *p,
                       size_t n)
{
    size_t ours = strlen(c->secret);
    unsigned d = (unsigned)(n != ours);
    for (size_t i = 0; i < sizeof c->secret - 1; i++) {
        unsigned char a = i < ours ? (unsigned char)c->secret[i] : 0;
        unsigned char b = i < n ? p[i] : 0;
        d |= (unsigned)(a ^ b);
    }
    return d == 0;
}

static const char *kind_name(uint32_t k)
{
    const char *n = ft_engine_kind_name((ft_engine_kind)k);
    return n ? n : "?";
}

/* check_reg says why a registration is refused ("" when it is not). */
static int check_reg(ft_cluster *c, cl_rd *rd, uint32_t rank, char *why,
                     size_t len)
{
    uint32_t world = cl_u32(rd), S = cl_u32(rd), first = cl_u32(rd),
             count = cl_u32(rd), kind = cl_u32(rd), mb = cl_u32(rd),
             beam = cl_u32(rd), k = cl_u32(rd), t = cl_u32(rd);
    uint64_t sum = cl_u64(rd);
    uint32_t sl = cl_u32(rd);
    why[0] = 0;
    if (rd->bad || sl > sizeof c->secret - 1 || rd->len - rd->pos != sl) {
        snprintf(why, len, "rank %u: malformed registration", rank);
        return FT_EPROTO;
    }
    /* The secret first: nothing else is told to a peer without it. */
    if (!secret_same(c, rd->p + rd->pos, sl)) {
        snprintf(why, len, "rank %u: wrong cluster secret (%s)", rank,
                 sl == 0 ? "it sent none" : "it differs from rank 0's");
        return FT_EPERM;
    }
    if (world != c->world) {
        snprintf(why, len, "rank %u: wrong world: it has %u ranks, the "
                 "coordinator %u", rank, world, c->world);
        return FT_ECONFIG;
    }
    if (rank == 0 || rank >= c->world) {
        snprintf(why, len, "rank %u: out of range: the ranks that register "
                 "are 1..%u", rank, c->world - 1);
        return FT_ECONFIG;
    }
    /* Before the session a rank registers once; in a running cluster a
     * rank that is down may be replaced (a restarted process), one that
     * is up may not. */
    if (c->r[rank].joined && (c->r[rank].up || !c->running)) {
        snprintf(why, len, "rank %u: duplicate rank: rank %u is already "
                 "registered", rank, rank);
        return FT_ECONFIG;
    }
    if (sum != c->msum || S != c->S) {
        snprintf(why, len, "rank %u: different manifest: %u shards, "
                 "checksum %016" PRIx64 "; the coordinator's: %u shards, "
                 "checksum %016" PRIx64, rank, S, sum, c->S, c->msum);
        return FT_ECONFIG;
    }
    if (first != c->r[rank].first || count != c->r[rank].count) {
        snprintf(why, len, "rank %u: serves shards %u..%u, the session gives "
                 "it %u..%u (shards not covered or covered twice)", rank,
                 first, first + count - 1, c->r[rank].first,
                 c->r[rank].first + c->r[rank].count - 1);
        return FT_ECONFIG;
    }
    if (kind != (uint32_t)c->eo.kind || mb != c->eo.max_batch ||
        beam != c->eo.max_beam || k != c->eo.max_k || t != c->eo.max_t) {
        snprintf(why, len, "rank %u: different engines: %s, max_batch %u, "
                 "caps %u/%u/%u; the coordinator's: %s, %u, %u/%u/%u", rank,
                 kind_name(kind), mb, beam, k, t, kind_name(c->eo.kind),
                 c->eo.max_batch, c->eo.max_beam, c->eo.max_k, c->eo.max_t);
        return FT_ECONFIG;
    }
    if (c->running && (c->nccl || c->eo.kind == FT_ENGINE_GPU)) {
        /* The NCCL communicator is made once for the whole world; a new
         * one would need every rank to re-initialise. */
        snprintf(why, len, "rank %u: cannot rejoin: GPU ranks share one "
                 "NCCL communicator, made at the start; restart every rank "
                 "to bring the cluster back", rank);
        return FT_ECONFIG;
    }
    return FT_OK;
}

/* send_refuse answers a registration refused on the connection p. */
static void send_refuse(ft_cluster *c, nng_pipe p, int crc, const char *why)
{
    ft_buf b;
    ft_buf_init(&b);
    cl_head(&b, CL_REFUSE, 0, 0);
    ft_buf_put_u32(&b, (uint32_t)crc);
    ft_buf_put_u32(&b, (uint32_t)strlen(why));
    ft_buf_append(&b, why, strlen(why));
    nng_msg *rm;
    if (b.data && nng_msg_alloc(&rm, 0) == 0) {
        nng_msg_append(rm, b.data, b.len);
        nng_msg_set_pipe(rm, p);
        if (nng_sendmsg(c->sock, rm, 0) != 0)
            nng_msg_free(rm);
    }
    ft_buf_free(&b);
}

/* put_session builds the SESSION message. */
static void put_session(ft_cluster *c, ft_buf *b)
{
    cl_head(b, CL_SESSION, 0, 0);
    ft_buf_put_u32(b, c->world);
    ft_buf_put_u32(b, c->S);
    for (uint32_t r = 0; r < c->world; r++) {
        ft_buf_put_u32(b, c->r[r].first);
        ft_buf_put_u32(b, c->r[r].count);
    }
    ft_buf_put_u8(b, (uint8_t)c->has_id);
    if (c->has_id)
        ft_buf_append(b, c->nccl_id, sizeof c->nccl_id);
}

static int stop_asked(const ft_cluster *c)
{
    return c->stop && c->stop(c->stop_arg);
}

/* join_coordinator waits for every rank to register, then sends each the
 * session. */
static int join_coordinator(ft_cluster *c, char *errbuf, size_t errlen)
{
    uint64_t until = fti_now_ms() + c->join_ms;
    char last[256] = "";
    ft_buf b;
    ft_buf_init(&b);
    int rc = FT_OK;
    for (;;) {
        uint32_t missing = 0, first_missing = 0;
        pthread_mutex_lock(&c->mu);
        for (uint32_t r = c->world; r-- > 1;)
            if (!c->r[r].joined) {
                missing++;
                first_missing = r;
            }
        pthread_mutex_unlock(&c->mu);
        if (missing == 0)
            break;
        if (stop_asked(c)) {
            RT_ERRF(errbuf, errlen, "cluster: start given up (a signal) "
                    "with %u rank%s missing", missing,
                    missing == 1 ? "" : "s");
            rc = FT_ESHUTDOWN;
            goto out;
        }
        if (fti_now_ms() >= until) {
            RT_ERRF(errbuf, errlen, "cluster: %u of %u ranks did not join "
                    "within %u ms (rank %u first)%s%s", missing,
                    c->world - 1, c->join_ms, first_missing,
                    last[0] ? "; last refusal: " : "", last);
            rc = FT_ETIMEDOUT;
            goto out;
        }
        nng_msg *m;
        int type;
        uint32_t from, seq;
        cl_rd rd;
        if (cl_recv(c, &m, &type, &from, &seq, &rd) != FT_OK)
            continue;
        if (type != CL_REG) {
            nng_msg_free(m);
            continue;
        }
        nng_pipe p = nng_msg_get_pipe(m);
        char why[256];
        pthread_mutex_lock(&c->mu);
        if (from > 0 && from < c->world && c->r[from].joined &&
            nng_pipe_id(c->r[from].pipe) == nng_pipe_id(p)) {
            /* Its registration repeated (ranks repeat it until answered). */
            pthread_mutex_unlock(&c->mu);
            nng_msg_free(m);
            continue;
        }
        int crc = check_reg(c, &rd, from, why, sizeof why);
        if (crc == FT_OK) {
            c->r[from].joined = 1;
            c->r[from].pipe = p;
        }
        pthread_mutex_unlock(&c->mu);
        nng_msg_free(m);
        if (crc == FT_OK) {
            FT_LOGF(FT_LOG_INFO, "cluster: rank %u joined (shards %u..%u)",
                    from, c->r[from].first,
                    c->r[from].first + c->r[from].count - 1);
            continue;
        }
        FT_LOGF(FT_LOG_ERROR, "cluster: registration refused: %s", why);
        snprintf(last, sizeof last, "%s", why);
        /* Answer on the connection it came from. */
        send_refuse(c, p, crc, why);
    }
    /* Everyone is in: the session. */
    if ((rc = cl_nccl_session_id(c, errbuf, errlen)) != FT_OK)
        goto out;
    put_session(c, &b);
    pthread_mutex_lock(&c->mu);
    c->running = 1;
    for (uint32_t r = 1; r < c->world; r++) {
        c->r[r].up = 1;
        c->r[r].seen_ms = fti_now_ms();
    }
    pthread_mutex_unlock(&c->mu);
    for (uint32_t r = 1; r < c->world && rc == FT_OK; r++)
        if (cl_send(c, r, &b) != FT_OK) {
            RT_ERRF(errbuf, errlen, "cluster: rank %u: cannot send the "
                    "session", r);
            rc = FT_ECONN;
        }
out:
    ft_buf_free(&b);
    return rc;
}

/* join_rank registers with the coordinator and waits for the session. */
static int join_rank(ft_cluster *c, char *errbuf, size_t errlen)
{
    ft_buf b;
    ft_buf_init(&b);
    put_reg(c, &b);
    uint64_t until = fti_now_ms() + c->join_ms, sent_ms = 0;
    int rc = FT_ETIMEDOUT, sent = 0;
    while (rc == FT_ETIMEDOUT) {
        if (c->running && is_lost(c)) {
            if (bye_queued(c)) {
                RT_ERRF(errbuf, errlen, "cluster: rank %u: the coordinator "
                        "left while it registered again", c->rank);
                rc = FT_ESHUTDOWN;
                break;
            }
            RT_ERRF(errbuf, errlen, "cluster: rank %u: the coordinator's "
                    "connection was lost while registering again", c->rank);
            rc = FT_ECONN;
            break;
        }
        if (stop_asked(c)) {
            RT_ERRF(errbuf, errlen, "cluster: rank %u: start given up (a "
                    "signal)", c->rank);
            rc = FT_ESHUTDOWN;
            break;
        }
        if (fti_now_ms() >= until) {
            RT_ERRF(errbuf, errlen, "cluster: rank %u: no session from the "
                    "coordinator %s within %u ms (%s)", c->rank, c->url,
                    c->join_ms, sent ? "registered" : "never reached it");
            break;
        }
        if (!sent || fti_now_ms() - sent_ms >= FT_CLUSTER_REG_RETRY_MS) {
            /* pair1 holds a message until a peer is there: a send that
             * times out means the coordinator is not up yet.  A sent
             * registration is repeated until answered: the coordinator
             * drops one that comes during a batch. */
            if (cl_send(c, 0, &b) == FT_OK) {
                sent = 1;
                sent_ms = fti_now_ms();
            } else if (!sent) {
                continue;
            }
        }
        nng_msg *m;
        int type;
        uint32_t from, seq;
        cl_rd rd;
        if (cl_recv(c, &m, &type, &from, &seq, &rd) != FT_OK)
            continue;
        if (type == CL_REFUSE) {
            int code = (int)cl_u32(&rd);
            uint32_t n = cl_u32(&rd);
            char why[256] = "";
            if (n < sizeof why)
                cl_get(&rd, why, n);
            RT_ERRF(errbuf, errlen, "cluster: the coordinator refused %s",
                    why);
            rc = code == FT_EPROTO ? FT_EPROTO : FT_ECONFIG;
        } else if (type == CL_BYE && c->running) {
            RT_ERRF(errbuf, errlen, "cluster: rank %u: the coordinator left "
                    "while it registered again", c->rank);
            rc = FT_ESHUTDOWN;
        } else if (type == CL_SESSION) {
            uint32_t world = cl_u32(&rd), S = cl_u32(&rd);
            int ok = world == c->world && S == c->S;
            for (uint32_t r = 0; r < c->world && ok; r++) {
                c->r[r].first = cl_u32(&rd);
                c->r[r].count = cl_u32(&rd);
            }
            c->has_id = cl_u8(&rd);
            if (c->has_id)
                cl_get(&rd, c->nccl_id, sizeof c->nccl_id);
            if (!ok || rd.bad) {
                RT_ERRF(errbuf, errlen, "cluster: rank %u: malformed "
                        "session from the coordinator", c->rank);
                rc = FT_EPROTO;
            } else {
                rc = FT_OK;
            }
        }
        nng_msg_free(m);
    }
    ft_buf_free(&b);
    return rc;
}

/* ---- rank 0 while idle: the heartbeat and rejoins ---- */

/* How often the keeper looks at the socket while idle: short, since a
 * batch waits for the keeper to let go of it (a drain takes microseconds,
 * the keeper never waits for a message). */
#define CL_KEEP_MS 10

static void send_head(ft_cluster *c, uint32_t r, int type)
{
    ft_buf b;
    ft_buf_init(&b);
    cl_head(&b, type, 0, 0);
    if (b.data)
        cl_send(c, r, &b);
    ft_buf_free(&b);
}

/* keeper_reg takes a registration while the cluster runs: a rank that is
 * down (restarted, or the same process told to by REJOIN) comes back
 * after the same checks as at the start, and gets the session again. */
static void keeper_reg(ft_cluster *c, nng_msg *m, cl_rd *rd, uint32_t from)
{
    nng_pipe p = nng_msg_get_pipe(m), old = NNG_PIPE_INITIALIZER;
    char why[256];
    int crc = FT_OK, again = 0;
    pthread_mutex_lock(&c->mu);
    if (from > 0 && from < c->world && c->r[from].joined &&
        c->r[from].up && nng_pipe_id(c->r[from].pipe) == nng_pipe_id(p)) {
        again = 1; /* repeated before the session reached it */
    } else {
        crc = check_reg(c, rd, from, why, sizeof why);
        if (crc == FT_OK) {
            if (c->r[from].joined &&
                nng_pipe_id(c->r[from].pipe) != nng_pipe_id(p))
                old = c->r[from].pipe; /* the process it replaces */
            c->r[from].joined = 1;
            c->r[from].up = 1;
            c->r[from].pipe = p;
            c->r[from].why[0] = 0;
            c->r[from].seen_ms = fti_now_ms();
        }
    }
    uint32_t down = 0;
    for (uint32_t r = 1; r < c->world; r++)
        down += !c->r[r].up;
    pthread_mutex_unlock(&c->mu);
    if (crc != FT_OK) {
        FT_LOGF(FT_LOG_ERROR, "cluster: registration refused: %s", why);
        send_refuse(c, p, crc, why);
        return;
    }
    if (nng_pipe_id(old) > 0)
        nng_pipe_close(old);
    ft_buf b;
    ft_buf_init(&b);
    put_session(c, &b);
    if (b.data == NULL || cl_send(c, from, &b) != FT_OK)
        cl_mark_down(c, from, "cannot send it the session");
    ft_buf_free(&b);
    if (again)
        return;
    FT_LOGF(FT_LOG_INFO, "cluster: rank %u joined again (shards %u..%u)%s",
            from, c->r[from].first, c->r[from].first + c->r[from].count - 1,
            down == 0 && !c->local_failed ? "; every rank is up" : "");
}

/* keeper_drain handles what came while idle: registrations, heartbeat
 * answers, and anything from a rank that is down but still connected
 * (it answers again): that rank is told to register again. */
static void keeper_drain(ft_cluster *c)
{
    for (int i = 0; i < 256; i++) {
        nng_msg *m;
        int type;
        uint32_t from, seq;
        cl_rd rd;
        int rc = recv_x(c, &m, &type, &from, &seq, &rd, NNG_FLAG_NONBLOCK);
        if (rc == FT_ETIMEDOUT || rc == FT_ECONN)
            return;
        if (rc != FT_OK)
            continue;
        if (type == CL_REG) {
            keeper_reg(c, m, &rd, from);
            nng_msg_free(m);
            continue;
        }
        nng_msg_free(m);
        uint64_t now = fti_now_ms();
        int tell = 0;
        pthread_mutex_lock(&c->mu);
        if (c->r[from].up) {
            c->r[from].seen_ms = now;
        } else if (c->r[from].joined &&
                   now - c->r[from].seen_ms >= FT_CLUSTER_REG_RETRY_MS) {
            /* seen_ms of a rank that is down: when it was last told */
            c->r[from].seen_ms = now;
            tell = 1;
        }
        pthread_mutex_unlock(&c->mu);
        if (tell) {
            FT_LOGF(FT_LOG_INFO, "cluster: rank %u answers again (%s): told "
                    "to register again", from, cl_type_name(type));
            send_head(c, from, CL_REJOIN);
        }
    }
}

/* keeper_ping takes down the ranks that missed the heartbeat and pings
 * every rank still connected. */
static void keeper_ping(ft_cluster *c)
{
    const uint64_t limit = (uint64_t)FT_CLUSTER_PING_MS * FT_CLUSTER_PING_MISSES;
    for (uint32_t r = 1; r < c->world; r++) {
        uint64_t now = fti_now_ms();
        pthread_mutex_lock(&c->mu);
        int joined = c->r[r].joined;
        int late = c->r[r].up && now - c->r[r].seen_ms > limit;
        pthread_mutex_unlock(&c->mu);
        if (late) {
            cl_mark_down(c, r, "stopped answering: no heartbeat within %u ms",
                         (unsigned)limit);
            pthread_mutex_lock(&c->mu);
            c->r[r].seen_ms = 0; /* it may be told to rejoin at once */
            pthread_mutex_unlock(&c->mu);
        }
        if (joined)
            send_head(c, r, CL_PING);
    }
}

static void *keeper_main(void *arg)
{
    ft_cluster *c = arg;
    uint64_t next = 0;
    for (;;) {
        pthread_mutex_lock(&c->mu);
        int closing = c->closing;
        pthread_mutex_unlock(&c->mu);
        if (closing)
            return NULL;
        if (pthread_mutex_trylock(&c->run_mu) == 0) {
            keeper_drain(c);
            if (fti_now_ms() >= next) {
                keeper_ping(c);
                next = fti_now_ms() + FT_CLUSTER_PING_MS;
            }
            pthread_mutex_unlock(&c->run_mu);
        }
        nng_msleep(CL_KEEP_MS);
    }
}

uint8_t cl_u8(cl_rd *r)
{
    uint8_t v;
    cl_get(r, &v, 1);
    return v;
}

/* max_msg is the largest message a legitimate peer sends this rank, from
 * the caps every rank shares (checked at registration) and the shard
 * blocks: rank 0 receives a rank's LISTS and HITS, the others a BATCH and
 * the ALL lists; 64 KiB more for the header and the small messages (REG,
 * SESSION, REFUSE, FAIL).  Anything larger makes nng drop the connection
 * before the message is read whole. */
static size_t max_msg(const ft_cluster *c)
{
    size_t m = FTI_ENGINE_CHUNK;
    size_t beam = c->eo.max_beam ? c->eo.max_beam : FT_MAX_BEAM;
    size_t k = c->eo.max_k ? c->eo.max_k : FT_MAX_K;
    size_t t = c->eo.max_t ? c->eo.max_t : FT_MAX_T;
    size_t most = 0, cnt = 0;
    for (uint32_t r = 0; r < c->world; r++)
        if (c->r[r].count > cnt)
            cnt = c->r[r].count;
    if (c->rank == 0) {
        size_t lists = cnt * m * beam * 8;
        size_t hits = cnt * m * (8 + beam * (36 + t * 4));
        most = lists > hits ? lists : hits;
    } else {
        size_t batch = m * (40 + t * k * 8);
        size_t all = (size_t)c->S * m * beam * 8;
        most = batch > all ? batch : all;
    }
    return most + 65536;
}

int ft_cluster_open(ft_cluster **out, const ft_library *lib,
                    const ft_cluster_opts *o, char *errbuf, size_t errlen)
{
    *out = NULL;
    RT_RETURN_ERROR_IF(o->world < 2 || o->world > FT_CLUSTER_MAX_RANKS ||
                           o->rank >= o->world,
                       FT_EINVAL, "cluster: rank %u of world %u: the world "
                       "must be 2..%u and the rank below it", o->rank,
                       o->world, FT_CLUSTER_MAX_RANKS);
    RT_RETURN_ERROR_IF(!ft_library_is_manifest(lib), FT_EINVAL,
                       "cluster: the index must be a shard manifest");
    ft_cluster *c = calloc(1, sizeof *c);
    if (c == NULL)
        return FT_ENOMEM;
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->run_mu, NULL);
    c->rank = o->rank;
    c->world = o->world;
    c->lib = lib;
    c->S = (uint32_t)ft_library_shards(lib);
    c->eo = o->engine;
    c->join_ms = o->join_ms ? o->join_ms : FT_CLUSTER_JOIN_MS;
    c->step_ms = o->step_ms ? o->step_ms : FT_CLUSTER_STEP_MS;
    c->stop = o->stop;
    c->stop_arg = o->stop_arg;
    if (c->rank != 0)
        c->slow_ms = o->test_slow_ms;
    snprintf(c->url, sizeof c->url, "%s", o->coordinator);
    snprintf(c->secret, sizeof c->secret, "%s", o->secret ? o->secret : "");
    int rc = FT_ENOMEM;
    RT_ERRF(errbuf, errlen, "cluster: rank %u: out of memory", c->rank);
    c->r = calloc(c->world, sizeof *c->r);
    c->base = calloc(c->S, sizeof *c->base);
    c->part = calloc((size_t)c->S * FTI_ENGINE_CHUNK, sizeof *c->part);
    if (c->r == NULL || c->base == NULL || c->part == NULL)
        goto fail;
    for (uint32_t r = 0; r < c->world; r++)
        ft_cluster_block(c->S, c->world, r, &c->r[r].first, &c->r[r].count);
    c->first = c->r[c->rank].first;
    c->count = c->r[c->rank].count;
    uint64_t base = 0;
    for (uint32_t s = 0; s < c->S; s++) {
        ft_library_shard_info si;
        ft_library_shard_get(&si, lib, s);
        c->base[s] = base;
        base += si.keys;
    }
    char e[512] = "";
    c->msum = 0;
    {
        c->msum = manifest_sum(o->manifest, errbuf, errlen);
        if (c->msum == 0) {
            rc = FT_EIO;
            goto fail;
        }
    }
    /* The engines of this rank's shards. */
    c->eng = calloc(c->count, sizeof *c->eng);
    c->idx = calloc(c->count, sizeof *c->idx);
    if (c->eng == NULL || c->idx == NULL)
        goto fail;
    for (uint32_t j = 0; j < c->count; j++) {
        ft_engine_opts eo = c->eo;
        /* as group.c: CPU engines step together on the first one's
         * workers (fti_engines_step_*) */
        if (j > 0 && eo.kind == FT_ENGINE_CPU)
            eo.threads = 1;
        c->idx[j] = ft_library_shard(lib, c->first + j);
        if (c->idx[j] == NULL) {
            RT_ERRF(errbuf, errlen, "cluster: rank %u: shard %u is not open",
                    c->rank, c->first + j);
            rc = FT_EINVAL;
            goto fail;
        }
        rc = ft_engine_open(&c->eng[j], c->idx[j], &eo, e, sizeof e);
        if (rc != FT_OK) {
            RT_ERRF(errbuf, errlen, "cluster: rank %u: shard %u: %s",
                    c->rank, c->first + j, e);
            goto fail;
        }
        if (eo.kind == FT_ENGINE_GPU)
            fti_engine_gpu_share(c->eng[j], c->count);
    }
    /* The bootstrap socket. */
    int rv = nng_pair1_open_poly(&c->sock);
    if (rv == 0) {
        c->sock_open = 1;
        nng_socket_set_ms(c->sock, NNG_OPT_RECVTIMEO, CL_POLL_MS);
        nng_socket_set_ms(c->sock, NNG_OPT_SENDTIMEO, c->rank == 0
                                                          ? (int)c->step_ms
                                                          : CL_POLL_MS * 5);
        /* Lists of a full batch of full beams are tens of megabytes, but
         * anyone who can reach the coordinator can send: nothing larger
         * than the largest legitimate message is read. */
        c->max_msg = max_msg(c);
        nng_socket_set_size(c->sock, NNG_OPT_RECVMAXSZ, c->max_msg);
        nng_socket_set_ms(c->sock, NNG_OPT_RECONNMINT, 50);
        nng_socket_set_ms(c->sock, NNG_OPT_RECONNMAXT, 500);
        nng_pipe_notify(c->sock, NNG_PIPE_EV_REM_POST, on_pipe, c);
        if (c->rank == 0)
            rv = nng_listen(c->sock, c->url, NULL, 0);
        else
            rv = nng_dial(c->sock, c->url, NULL, NNG_FLAG_NONBLOCK);
    }
    if (rv != 0) {
        RT_ERRF(errbuf, errlen, "cluster: rank %u: cannot %s %s: %s",
                c->rank, c->rank == 0 ? "listen on" : "dial", c->url,
                nng_strerror(rv));
        rc = FT_ECONN;
        goto fail;
    }
    /* Only rank 0 accepts registrations: what the secret means to it
     * differs from what it means to a rank that registers. */
    const char *auth =
        c->rank == 0 ? (c->secret[0] ? "ranks authenticated by the cluster "
                                       "secret"
                                     : "no cluster secret: any peer may "
                                       "register")
                     : (c->secret[0] ? "registering with the cluster secret"
                                     : "registering without a cluster "
                                       "secret");
    FT_LOGF(FT_LOG_INFO, "cluster: rank %u of %u, shards %u..%u of %u; %s "
            "%s (messages up to %zu bytes; %s)", c->rank, c->world, c->first,
            c->first + c->count - 1, c->S,
            c->rank == 0 ? "waiting for the ranks on" : "joining", c->url,
            c->max_msg, auth);
    rc = c->rank == 0 ? join_coordinator(c, errbuf, errlen)
                      : join_rank(c, errbuf, errlen);
    if (rc == FT_OK)
        rc = cl_nccl_open(c, errbuf, errlen);
    if (rc != FT_OK)
        goto fail;
    pthread_mutex_lock(&c->mu);
    c->running = 1;
    pthread_mutex_unlock(&c->mu);
    snprintf(c->note, sizeof c->note, "cluster of %u ranks (%u shards, "
             "rank 0 serves %u..%u), %s engines, %s transport", c->world,
             c->S, c->r[0].first, c->r[0].first + c->r[0].count - 1,
             kind_name(c->eo.kind), c->nccl ? "nccl" : "nng");
    FT_LOGF(FT_LOG_INFO, "cluster: rank %u: session started: %s", c->rank,
            c->note);
    if (c->rank == 0) {
        if (pthread_create(&c->keeper, NULL, keeper_main, c) != 0) {
            RT_ERRF(errbuf, errlen, "cluster: rank 0: cannot start the "
                    "heartbeat thread");
            rc = FT_ENOMEM;
            goto fail;
        }
        c->keeper_on = 1;
    }
    *out = c;
    return FT_OK;
fail:
    c->bye_sent = 1; /* nobody to tell */
    ft_cluster_close(c);
    return rc;
}

/* leave_ranks (rank 0) tells every rank still connected that it leaves
 * (BYE) and waits, FT_CLUSTER_BYE_MS at most, for their connections to
 * close.  A fixed pause was not enough: nng sends from its own threads,
 * and a rank's transport that sees the connection closed drops what it
 * has not read yet, so on a loaded machine a rank could lose the BYE and
 * take the close for a lost coordinator (exit 1).  Ranks taken down for a
 * timeout may still be there: they are told too.  The BYE goes again each
 * FT_CLUSTER_PING_MS to those still there: pair1's polyamorous mode drops
 * a message to a rank whose queue is full. */
static void leave_ranks(ft_cluster *c)
{
    ft_buf b;
    ft_buf_init(&b);
    cl_head(&b, CL_BYE, 0, 0);
    uint64_t t0 = fti_now_ms(), sent_ms = 0;
    uint32_t left = 0;
    for (int first = 1;; first = 0) {
        uint64_t now = fti_now_ms();
        int send = first || now - sent_ms >= FT_CLUSTER_PING_MS;
        left = 0;
        for (uint32_t r = 1; r < c->world; r++) {
            pthread_mutex_lock(&c->mu);
            int joined = c->r[r].joined;
            pthread_mutex_unlock(&c->mu);
            if (!joined)
                continue;
            left++;
            if (send && b.data)
                cl_send(c, r, &b);
        }
        if (send)
            sent_ms = now;
        if (left == 0 || now - t0 >= FT_CLUSTER_BYE_MS)
            break;
        nng_msleep(CL_KEEP_MS);
    }
    if (left > 0)
        FT_LOGF(FT_LOG_WARN, "cluster: %u rank(s) still connected %u ms "
                "after the BYE; closing anyway", left, FT_CLUSTER_BYE_MS);
    ft_buf_free(&b);
}

/* cluster_free frees what nng's pipe notifications (on_pipe) use: the
 * ranks, the locks and c itself, once the socket is closed. */
static void cluster_free(void *arg)
{
    ft_cluster *c = arg;
    free(c->r);
    pthread_mutex_destroy(&c->run_mu);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

void ft_cluster_close(ft_cluster *c)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    c->closing = 1;
    pthread_mutex_unlock(&c->mu);
    if (c->keeper_on)
        pthread_join(c->keeper, NULL);
    if (c->sock_open && c->rank == 0 && c->running && !c->bye_sent)
        leave_ranks(c);
    cl_nccl_close(c);
    if (c->pending)
        nng_msg_free(c->pending);
    for (uint32_t j = 0; c->eng && j < c->count; j++)
        ft_engine_close(c->eng[j]);
    for (size_t i = 0; c->part && i < (size_t)c->S * FTI_ENGINE_CHUNK; i++)
        ft_result_free(&c->part[i]);
    free(c->part);
    free(c->eng);
    free(c->idx);
    free(c->base);
    free(c->all);
    ft_buf_free(&c->msg);
    ft_buf_free(&c->reqbuf);
    free(c->rq);
    if (!c->sock_open) {
        cluster_free(c);
        return;
    }
    /* The socket last: nng 1.5.2 may never finish closing it
     * (close_within.h), and its pipe notifications use c until it does. */
    uint32_t rank = c->rank;
    char url[sizeof c->url];
    memcpy(url, c->url, sizeof url);
    if (!fti_nng_close_within(c->sock, cluster_free, c))
        FT_LOGF(FT_LOG_WARN, "cluster: rank %u: the socket of %s is not "
                "closed in time (close given up): nng 1.5.2's teardown "
                "thread (its reaper) is stalled in this process; left to "
                "close in the background", rank, url);
}

uint32_t ft_cluster_rank(const ft_cluster *c) { return c->rank; }
uint32_t ft_cluster_world(const ft_cluster *c) { return c->world; }
const char *ft_cluster_note(const ft_cluster *c) { return c->note; }
ft_engine_kind ft_cluster_kind(const ft_cluster *c) { return c->eo.kind; }

int ft_cluster_rank_state(const ft_cluster *c, uint32_t r, uint32_t *first,
                          uint32_t *count, char *why, size_t whylen)
{
    if (r >= c->world)
        return -1;
    ft_cluster *m = (ft_cluster *)c;
    pthread_mutex_lock(&m->mu);
    int up = r == 0 ? !c->local_failed : c->r[r].up;
    *first = c->r[r].first;
    *count = c->r[r].count;
    if (whylen)
        snprintf(why, whylen, "%s", up ? "" : r == 0 ? "rank 0: its engines "
                 "failed" : c->r[r].why);
    pthread_mutex_unlock(&m->mu);
    return up;
}

int ft_cluster_down(const ft_cluster *c, char *why, size_t whylen)
{
    ft_cluster *m = (ft_cluster *)c;
    pthread_mutex_lock(&m->mu);
    int x = c->xdown[0] != 0;
    if (x && whylen)
        snprintf(why, whylen, "%s", c->xdown);
    pthread_mutex_unlock(&m->mu);
    if (x)
        return 1;
    for (uint32_t r = 0; r < c->world; r++) {
        uint32_t f, n;
        if (ft_cluster_rank_state(c, r, &f, &n, why, whylen) == 0)
            return 1;
    }
    if (whylen)
        why[0] = 0;
    return 0;
}

/* cl_mark_down takes rank r out of the cluster with the reason. */
void cl_mark_down(ft_cluster *c, uint32_t r, const char *fmt, ...)
{
    va_list ap;
    pthread_mutex_lock(&c->mu);
    if (r < c->world && r > 0 && c->r[r].up) {
        c->r[r].up = 0;
        int n = snprintf(c->r[r].why, sizeof c->r[r].why, "rank %u: ", r);
        va_start(ap, fmt);
        vsnprintf(c->r[r].why + n, sizeof c->r[r].why - (size_t)n, fmt, ap);
        va_end(ap);
        FT_LOGF(FT_LOG_ERROR, "cluster: %s", c->r[r].why);
    }
    pthread_mutex_unlock(&c->mu);
}

/* ---- the batch: encoding the requests ---- */

static void put_f32(ft_buf *b, float f) { ft_buf_put_f32(b, f); }

static int put_requests(ft_buf *b, const ft_request *const *rq, size_t m)
{
    for (size_t i = 0; i < m; i++) {
        const ft_request *q = rq[i];
        ft_buf_put_u32(b, q->T);
        ft_buf_put_u32(b, q->K);
        ft_buf_put_u32(b, q->beam);
        ft_buf_put_u32(b, q->results);
        put_f32(b, q->theta_tok);
        put_f32(b, q->theta_sent);
        ft_buf_put_f64(b, q->alpha);
        size_t n = (size_t)q->T * q->K;
        if (ft_buf_reserve(b, n * 8) != FT_OK)
            return FT_ENOMEM;
        for (size_t k = 0; k < n; k++)
            ft_buf_put_u32(b, q->tokens[k]);
        for (size_t k = 0; k < n; k++)
            put_f32(b, q->logp[k]);
    }
    return FT_OK;
}

/* get_requests decodes m requests of a payload into c->rq (pointing into
 * c->reqbuf, which holds a copy of the payload's grids). */
static int get_requests(ft_cluster *c, const unsigned char *p, size_t len,
                        size_t m)
{
    if (m == 0 || m > FTI_ENGINE_CHUNK)
        return FT_EPROTO;
    free(c->rq);
    c->rq = calloc(m, sizeof *c->rq);
    if (c->rq == NULL)
        return FT_ENOMEM;
    c->reqbuf.len = 0;
    if (ft_buf_reserve(&c->reqbuf, len) != FT_OK)
        return FT_ENOMEM;
    /* The grids are read into aligned arrays in reqbuf. */
    cl_rd rd = {p, len, 0, 0};
    size_t off[FTI_ENGINE_CHUNK];
    for (size_t i = 0; i < m; i++) {
        ft_request *q = &c->rq[i];
        ft_request_init(q);
        q->T = cl_u32(&rd);
        q->K = cl_u32(&rd);
        q->beam = cl_u32(&rd);
        q->results = cl_u32(&rd);
        q->theta_tok = cl_f32(&rd);
        q->theta_sent = cl_f32(&rd);
        q->alpha = cl_f64(&rd);
        size_t n = (size_t)q->T * q->K;
        if (rd.bad || q->T == 0 || q->T > FT_MAX_T || q->K == 0 ||
            q->K > FT_MAX_K || rd.len - rd.pos < n * 8)
            return FT_EPROTO;
        off[i] = c->reqbuf.len;
        for (size_t k = 0; k < n; k++) {
            uint32_t v = cl_u32(&rd);
            ft_buf_append(&c->reqbuf, &v, 4);
        }
        for (size_t k = 0; k < n; k++) {
            float v = cl_f32(&rd);
            ft_buf_append(&c->reqbuf, &v, 4);
        }
    }
    if (rd.bad || rd.pos != rd.len)
        return FT_EPROTO;
    for (size_t i = 0; i < m; i++) {
        size_t n = (size_t)c->rq[i].T * c->rq[i].K;
        c->rq[i].tokens = (const uint32_t *)(c->reqbuf.data + off[i]);
        c->rq[i].logp = (const float *)(c->reqbuf.data + off[i] + n * 4);
    }
    return FT_OK;
}

/* ---- the batch: hits ---- */

static int part_ready(ft_result *r, uint32_t results)
{
    if (r->cap_hits >= results && r->cap_tokens / FT_MAX_T >= results)
        return FT_OK;
    ft_result_free(r);
    return ft_result_alloc(r, results, FT_MAX_T);
}

int cl_put_hits(ft_cluster *c, ft_buf *b, size_t m)
{
    for (uint32_t j = 0; j < c->count; j++)
        for (size_t i = 0; i < m; i++) {
            const ft_result *r =
                &c->part[(c->first + j) * FTI_ENGINE_CHUNK + i];
            ft_buf_put_u32(b, (uint32_t)r->status);
            ft_buf_put_u32(b, r->status == FT_OK ? r->n : 0);
            for (uint32_t h = 0; r->status == FT_OK && h < r->n; h++) {
                const ft_hit *x = &r->hits[h];
                ft_buf_put_u32(b, x->len);
                ft_buf_put_u32(b, x->order);
                ft_buf_put_u64(b, x->key_index);
                ft_buf_put_u64(b, x->value);
                ft_buf_put_f64(b, x->score);
                put_f32(b, x->sigma);
                for (uint32_t k = 0; k < x->len; k++)
                    ft_buf_put_u32(b, r->tokens[x->tok_off + k]);
            }
        }
    return b->data ? FT_OK : FT_ENOMEM;
}

int cl_get_hits(ft_cluster *c, uint32_t r, cl_rd *rd,
                const fti_prepared *const *reqs, size_t m)
{
    for (uint32_t j = 0; j < c->r[r].count; j++)
        for (size_t i = 0; i < m; i++) {
            ft_result *res =
                &c->part[(c->r[r].first + j) * FTI_ENGINE_CHUNK + i];
            if (part_ready(res, reqs[i]->results) != FT_OK)
                return FT_ENOMEM;
            res->status = (int)cl_u32(rd);
            res->n = cl_u32(rd);
            res->error[0] = 0;
            if (res->status != FT_OK)
                snprintf(res->error, sizeof res->error, "cluster: rank %u, "
                         "shard %u: %s", r, c->r[r].first + j,
                         ft_strerror(res->status));
            if (res->n > reqs[i]->results)
                return FT_EPROTO;
            uint32_t off = 0;
            for (uint32_t h = 0; h < res->n; h++) {
                ft_hit *x = &res->hits[h];
                x->len = cl_u32(rd);
                x->order = cl_u32(rd);
                x->key_index = cl_u64(rd);
                x->value = cl_u64(rd);
                x->score = cl_f64(rd);
                x->sigma = cl_f32(rd);
                x->tok_off = off;
                if (rd->bad || x->len > FT_MAX_T)
                    return FT_EPROTO;
                for (uint32_t k = 0; k < x->len; k++)
                    res->tokens[off + k] = cl_u32(rd);
                off += x->len;
            }
            if (rd->bad)
                return FT_EPROTO;
        }
    return rd->pos == rd->len ? FT_OK : FT_EPROTO;
}

/* ---- the nng transport ---- */

/* wait_msg waits (step_ms at most) for a message of type want and the
 * batch's seq from rank r (the coordinator) or from the coordinator. */
static int wait_msg(ft_cluster *c, uint32_t r, int want, uint32_t seq,
                    nng_msg **out, cl_rd *rd, char *why, size_t whylen)
{
    uint64_t until = fti_now_ms() + c->step_ms;
    for (;;) {
        if (c->rank == 0) {
            pthread_mutex_lock(&c->mu);
            int up = c->r[r].up;
            pthread_mutex_unlock(&c->mu);
            if (!up) {
                snprintf(why, whylen, "down");
                return FT_ECONN;
            }
        } else if (is_lost(c)) {
            if (bye_queued(c)) {
                snprintf(why, whylen, "the coordinator left");
                return FT_ESHUTDOWN;
            }
            snprintf(why, whylen, "the coordinator's connection was lost");
            return FT_ECONN;
        }
        if (fti_now_ms() >= until) {
            snprintf(why, whylen, "no %s within %u ms", cl_type_name(want),
                     c->step_ms);
            return FT_ETIMEDOUT;
        }
        nng_msg *m;
        int type;
        uint32_t from, s;
        if (cl_recv(c, &m, &type, &from, &s, rd) != FT_OK)
            continue;
        if (c->rank != 0 && type == CL_REJOIN) {
            nng_msg_free(m);
            c->rejoin = 1;
            snprintf(why, whylen, "the coordinator took this rank out");
            return FT_ECONN;
        }
        if (c->rank != 0 && type == CL_BATCH && s != seq) {
            /* Rank 0 gave this batch up and began the next (its ABORT
             * was lost): that one is served next, this one dropped. */
            if (c->pending)
                nng_msg_free(c->pending);
            c->pending = m;
            snprintf(why, whylen, "the coordinator began batch %u", s);
            return FT_ECONN;
        }
        if (c->rank != 0 && (type == CL_BYE || (type == CL_ABORT && s == seq))) {
            nng_msg_free(m);
            snprintf(why, whylen, "%s", type == CL_BYE ? "the coordinator "
                     "left" : "the coordinator gave the batch up");
            return type == CL_BYE ? FT_ESHUTDOWN : FT_ECONN;
        }
        if (c->rank == 0 && type == CL_FAIL && s == seq) {
            int code = (int)cl_u32(rd);
            uint32_t n = cl_u32(rd);
            char msg[200] = "";
            if (n < sizeof msg)
                cl_get(rd, msg, n);
            nng_msg_free(m);
            cl_mark_down(c, from, "failed the batch: %s (%s)", msg,
                         ft_strerror(code));
            if (from == r) {
                snprintf(why, whylen, "failed");
                return FT_ECONN;
            }
            continue;
        }
        if (type != want || s != seq || (c->rank == 0 && from != r)) {
            /* A stale message of a batch given up, or one of another rank
             * that comes earlier than its turn: the latter cannot happen,
             * since ranks answer only what they were sent, in order. */
            nng_msg_free(m);
            continue;
        }
        *out = m;
        return FT_OK;
    }
}

/* gather_msgs (rank 0) waits, step_ms at most, for one message of type
 * want and batch seq from every other rank, in whatever order they come:
 * got[r] and rd[r] for r = 1..world-1.  A rank that is down or does not
 * answer in time fails the gather (it is marked down, FT_ECONN). */
static int gather_msgs(ft_cluster *c, int want, uint32_t seq, nng_msg **got,
                       cl_rd *rd, uint32_t t)
{
    uint64_t until = fti_now_ms() + c->step_ms;
    uint32_t left = c->world - 1;
    for (uint32_t r = 0; r < c->world; r++)
        got[r] = NULL;
    int rc = FT_OK;
    while (left > 0) {
        for (uint32_t r = 1; r < c->world; r++) {
            pthread_mutex_lock(&c->mu);
            int up = c->r[r].up;
            pthread_mutex_unlock(&c->mu);
            if (!up) {
                rc = FT_ECONN;
                goto out;
            }
        }
        if (fti_now_ms() >= until) {
            for (uint32_t r = 1; r < c->world; r++)
                if (got[r] == NULL)
                    cl_mark_down(c, r, "stopped answering: no %s within %u "
                                 "ms (step %u)", cl_type_name(want),
                                 c->step_ms, t);
            rc = FT_ECONN;
            goto out;
        }
        nng_msg *m;
        int type;
        uint32_t from, s;
        cl_rd x;
        if (cl_recv(c, &m, &type, &from, &s, &x) != FT_OK)
            continue;
        if (type == CL_FAIL && s == seq) {
            int code = (int)cl_u32(&x);
            uint32_t n = cl_u32(&x);
            char msg[160] = "";
            if (n < sizeof msg)
                cl_get(&x, msg, n);
            nng_msg_free(m);
            cl_mark_down(c, from, "failed the batch: %s (%s)", msg,
                         ft_strerror(code));
            rc = FT_ECONN;
            goto out;
        }
        if (type != want || s != seq || got[from] != NULL) {
            nng_msg_free(m); /* stale: a batch given up */
            continue;
        }
        got[from] = m;
        rd[from] = x;
        left--;
    }
    return FT_OK;
out:
    for (uint32_t r = 0; r < c->world; r++)
        if (got[r]) {
            nng_msg_free(got[r]);
            got[r] = NULL;
        }
    return rc;
}

static int nng_batch(ft_cluster *c, uint32_t seq, size_t m,
                     const ft_buf *payload)
{
    ft_buf *b = &c->msg;
    cl_head(b, CL_BATCH, 0, seq);
    ft_buf_put_u32(b, (uint32_t)m);
    ft_buf_put_u32(b, (uint32_t)payload->len);
    ft_buf_put_u8(b, 1);
    if (ft_buf_append(b, payload->data, payload->len) != FT_OK)
        return FT_ENOMEM;
    for (uint32_t r = 1; r < c->world; r++)
        if (cl_send(c, r, b) != FT_OK) {
            cl_mark_down(c, r, "cannot send it the batch");
            return FT_ECONN;
        }
    return FT_OK;
}

/* nng_lists: the coordinator gathers every rank's lists of step t, puts
 * them with its own in c->all (shard order) and sends that to every rank;
 * a rank sends its lists and waits for c->all. */
static int nng_lists(ft_cluster *c, uint32_t seq, uint32_t t, size_t len)
{
    size_t need = (size_t)c->S * len;
    if (need > c->all_cap) {
        uint64_t *p = realloc(c->all, need * sizeof *p);
        if (p == NULL)
            return FT_ENOMEM;
        c->all = p;
        c->all_cap = need;
    }
    ft_buf *b = &c->msg;
    char why[160];
    if (c->rank != 0) {
        cl_head(b, CL_LISTS, c->rank, seq);
        ft_buf_put_u32(b, t);
        ft_buf_put_u32(b, (uint32_t)len);
        for (uint32_t j = 0; j < c->count; j++) {
            uint64_t *send, *recv;
            size_t l;
            fti_engine_step_buffers(c->eng[j], &send, &recv, &l);
            ft_buf_append(b, send, l * 8);
        }
        if (b->data == NULL || cl_send(c, 0, b) != FT_OK)
            return FT_ECONN;
        nng_msg *m;
        cl_rd rd;
        int rc = wait_msg(c, 0, CL_ALL, seq, &m, &rd, why, sizeof why);
        if (rc != FT_OK) {
            FT_LOGF(FT_LOG_WARN, "cluster: rank %u: batch %u step %u: %s",
                    c->rank, seq, t, why);
            return rc;
        }
        uint32_t tt = cl_u32(&rd), l = cl_u32(&rd);
        if (tt != t || l != len || rd.len - rd.pos != need * 8) {
            nng_msg_free(m);
            return FT_EPROTO;
        }
        memcpy(c->all, rd.p + rd.pos, need * 8);
        nng_msg_free(m);
    } else {
        for (uint32_t j = 0; j < c->count; j++) {
            uint64_t *send, *recv;
            size_t l;
            fti_engine_step_buffers(c->eng[j], &send, &recv, &l);
            memcpy(c->all + (size_t)(c->first + j) * len, send, len * 8);
        }
        nng_msg *got[FT_CLUSTER_MAX_RANKS];
        cl_rd rd[FT_CLUSTER_MAX_RANKS];
        int rc = gather_msgs(c, CL_LISTS, seq, got, rd, t);
        if (rc != FT_OK)
            return rc;
        for (uint32_t r = 1; r < c->world; r++) {
            uint32_t tt = cl_u32(&rd[r]), l = cl_u32(&rd[r]);
            size_t n = (size_t)c->r[r].count * len;
            if (rc == FT_OK &&
                (tt != t || l != len || rd[r].len - rd[r].pos != n * 8)) {
                cl_mark_down(c, r, "sent malformed lists (step %u)", t);
                rc = FT_ECONN;
            }
            if (rc == FT_OK)
                memcpy(c->all + (size_t)c->r[r].first * len,
                       rd[r].p + rd[r].pos, n * 8);
            nng_msg_free(got[r]);
        }
        if (rc != FT_OK)
            return rc;
        cl_head(b, CL_ALL, 0, seq);
        ft_buf_put_u32(b, t);
        ft_buf_put_u32(b, (uint32_t)len);
        if (ft_buf_append(b, c->all, need * 8) != FT_OK)
            return FT_ENOMEM;
        for (uint32_t r = 1; r < c->world; r++)
            if (cl_send(c, r, b) != FT_OK) {
                cl_mark_down(c, r, "cannot send it the lists (step %u)", t);
                return FT_ECONN;
            }
    }
    for (uint32_t j = 0; j < c->count; j++) {
        uint64_t *send, *recv;
        size_t l;
        fti_engine_step_buffers(c->eng[j], &send, &recv, &l);
        memcpy(recv, c->all, need * 8);
    }
    return FT_OK;
}

/* nng_hits: a rank sends its encoded hits; the coordinator decodes every
 * rank's into c->part. */
static int nng_hits(ft_cluster *c, uint32_t seq,
                    const fti_prepared *const *reqs, size_t m)
{
    ft_buf *b = &c->msg;
    if (c->rank != 0) {
        cl_head(b, CL_HITS, c->rank, seq);
        if (cl_put_hits(c, b, m) != FT_OK)
            return FT_ENOMEM;
        return cl_send(c, 0, b);
    }
    nng_msg *got[FT_CLUSTER_MAX_RANKS];
    cl_rd rd[FT_CLUSTER_MAX_RANKS];
    int rc = gather_msgs(c, CL_HITS, seq, got, rd, UINT32_MAX);
    if (rc != FT_OK)
        return rc;
    for (uint32_t r = 1; r < c->world; r++) {
        if (rc == FT_OK) {
            rc = cl_get_hits(c, r, &rd[r], reqs, m);
            if (rc == FT_EPROTO) {
                cl_mark_down(c, r, "sent malformed hits");
                rc = FT_ECONN;
            }
        }
        nng_msg_free(got[r]);
    }
    return rc;
}

static const cl_xport nng_xport = {"nng", nng_batch, nng_lists, nng_hits};

const cl_xport *cl_transport(const ft_cluster *c)
{
    return c->nccl ? cl_nccl_transport() : &nng_xport;
}

/* ---- the batch: the steps, every rank in lockstep ---- */

/* run_local runs this rank's engines over the prepared requests: begin,
 * Tmax steps of expand, exchange, keep, then its local hits (values
 * attached) in c->part. */
struct local_x {
    ft_cluster *c;
    const cl_xport *x;
    uint32_t seq;
};

static int local_lists(void *arg, uint32_t t, size_t len)
{
    struct local_x *l = arg;
    return l->x->lists(l->c, l->seq, t, len);
}

static int local_settle(void *arg)
{
    return cl_nccl_settle(((struct local_x *)arg)->c);
}

static int run_local(ft_cluster *c, uint32_t seq,
                     const fti_prepared *const *reqs, size_t m)
{
    struct local_x l = {c, cl_transport(c), seq};
    fti_steps_xchg x = {.exchange = local_lists, .settle = local_settle,
                        .arg = &l};
    int erc = FT_OK;
    int rc = fti_steps_run(c->eng, c->count, c->first, c->S, reqs, m,
                           &c->part[(size_t)c->first * FTI_ENGINE_CHUNK], &x,
                           &erc);
    if (erc != FT_OK) {
        c->engine_rc = erc;
        return erc;
    }
    if (rc != FT_OK)
        return rc;
    uint64_t base0 = 0;
    for (uint32_t j = 0; j < c->count; j++)
        for (size_t i = 0; i < m; i++) {
            ft_result *p = &c->part[(c->first + j) * FTI_ENGINE_CHUNK + i];
            if (p->status == FT_OK)
                fti_attach_values(p, &c->idx[j], &base0, 1);
        }
    return FT_OK;
}

/* fail_all gives every result of the chunk the error. */
static void fail_all(ft_result *const *res, size_t m, int code,
                     const char *msg)
{
    for (size_t i = 0; i < m; i++) {
        res[i]->n = 0;
        res[i]->status = code;
        snprintf(res[i]->error, sizeof res[i]->error, "%s", msg);
    }
}

/* abort_batch tells the ranks still up to give batch seq up. */
static void abort_batch(ft_cluster *c, uint32_t seq)
{
    ft_buf b;
    ft_buf_init(&b);
    cl_head(&b, CL_ABORT, 0, seq);
    for (uint32_t r = 1; r < c->world; r++) {
        pthread_mutex_lock(&c->mu);
        int up = c->r[r].up;
        pthread_mutex_unlock(&c->mu);
        if (up)
            cl_send(c, r, &b);
    }
    ft_buf_free(&b);
}

static int run_chunk(ft_cluster *c, const ft_request *const *rq,
                     const fti_prepared *const *reqs, ft_result *const *res,
                     size_t m)
{
    char why[240];
    if (ft_cluster_down(c, why, sizeof why)) {
        char msg[160];
        snprintf(msg, sizeof msg, "cluster: %.140s", why);
        fail_all(res, m, FT_ECONN, msg);
        return FT_OK;
    }
    uint32_t seq = ++c->seq;
    if (seq == 0)
        seq = ++c->seq;
    ft_buf payload;
    ft_buf_init(&payload);
    int rc = put_requests(&payload, rq, m);
    /* The batch reads the socket: the keeper lets go of it meanwhile. */
    pthread_mutex_lock(&c->run_mu);
    if (rc == FT_OK)
        rc = cl_transport(c)->batch(c, seq, m, &payload);
    ft_buf_free(&payload);
    c->engine_rc = FT_OK;
    if (rc == FT_OK)
        rc = run_local(c, seq, reqs, m);
    if (rc == FT_OK)
        rc = cl_transport(c)->hits(c, seq, reqs, m);
    if (rc != FT_OK)
        abort_batch(c, seq);
    /* Every rank that took part answered just now (the heartbeat is not
     * answered during a batch). */
    uint64_t now = fti_now_ms();
    pthread_mutex_lock(&c->mu);
    for (uint32_t r = 1; r < c->world; r++)
        if (c->r[r].up)
            c->r[r].seen_ms = now;
    pthread_mutex_unlock(&c->mu);
    pthread_mutex_unlock(&c->run_mu);
    if (rc != FT_OK) {
        if (c->engine_rc != FT_OK) {
            pthread_mutex_lock(&c->mu);
            c->local_failed = 1;
            pthread_mutex_unlock(&c->mu);
            rc = c->engine_rc;
            fail_all(res, m, rc, "engine: cluster rank 0 failed");
            return rc == FT_ENOMEM ? FT_OK : rc;
        }
        if (!ft_cluster_down(c, why, sizeof why))
            snprintf(why, sizeof why, "the batch failed: %s",
                     ft_strerror(rc));
        char msg[160];
        snprintf(msg, sizeof msg, "cluster: %.140s", why);
        fail_all(res, m, rc == FT_ENOMEM ? FT_ENOMEM : FT_ECONN, msg);
        return FT_OK;
    }
    const ft_result *parts[FT_MAX_SHARDS > 4096 ? 4096 : FT_MAX_SHARDS];
    for (size_t i = 0; i < m; i++) {
        for (uint32_t s = 0; s < c->S && s < 4096; s++)
            parts[s] = &c->part[(size_t)s * FTI_ENGINE_CHUNK + i];
        fti_merge_parts(res[i], parts, c->base, c->S, reqs[i]->results);
    }
    return FT_OK;
}

static int cluster_search(ft_cluster *c, const ft_request *reqs, size_t n,
                          ft_result *res, int mode);

/* fit_one runs one batch that fti_steps_fit cut. */
struct fit_arg {
    ft_cluster *c;
    const ft_request *const *q;
    const fti_prepared *const *p;
    ft_result *const *res;
};

static int fit_one(void *arg, const size_t *ix, size_t k)
{
    struct fit_arg *a = arg;
    const ft_request *bq[FTI_ENGINE_CHUNK];
    const fti_prepared *bp[FTI_ENGINE_CHUNK];
    ft_result *br[FTI_ENGINE_CHUNK];
    for (size_t j = 0; j < k; j++) {
        bq[j] = a->q[ix[j]];
        bp[j] = a->p[ix[j]];
        br[j] = a->res[ix[j]];
    }
    return run_chunk(a->c, bq, bp, br, k);
}

int ft_cluster_search_batch(ft_cluster *c, const ft_request *reqs, size_t n,
                            ft_result *res)
{
    return cluster_search(c, reqs, n, res, FTI_ADMIT_FULL);
}

static int cluster_search(ft_cluster *c, const ft_request *reqs, size_t n,
                          ft_result *res, int mode)
{
    if (c->rank != 0 || c->S > 4096 || ops_failed(c))
        return FT_ESTATE;
    fti_prep **pool = fti_prep_pool();
    if (pool == NULL)
        return FT_ENOMEM;
    const fti_prepared *vp[FTI_ENGINE_CHUNK];
    ft_result *vres[FTI_ENGINE_CHUNK];
    const ft_request *vq[FTI_ENGINE_CHUNK];
    size_t i = 0;
    while (i < n) {
        size_t m = fti_admit_chunk(pool, reqs, n, &i, c->eo.max_beam, res,
                                   vp, vres, NULL, mode);
        if (m == 0)
            continue;
        for (size_t j = 0; j < m; j++)
            vq[j] = &reqs[vres[j] - res];
        /* GPU engines take what fits their slots (steps.h). */
        struct fit_arg a = {c, vq, vp, vres};
        int rc = fti_steps_fit(&c->eo, vp, m, fit_one, &a);
        if (rc != FT_OK)
            return rc;
    }
    return FT_OK;
}

/* send_fail tells the coordinator that this rank failed batch seq. */
static void send_fail(ft_cluster *c, uint32_t seq, int code, const char *msg)
{
    ft_buf b;
    ft_buf_init(&b);
    cl_head(&b, CL_FAIL, c->rank, seq);
    ft_buf_put_u32(&b, (uint32_t)code);
    ft_buf_put_u32(&b, (uint32_t)strlen(msg));
    ft_buf_append(&b, msg, strlen(msg));
    cl_send(c, 0, &b);
    ft_buf_free(&b);
}

/* serve_batch runs one batch the coordinator announced. */
static int serve_batch(ft_cluster *c, uint32_t seq, cl_rd *rd)
{
    uint32_t m = cl_u32(rd), bytes = cl_u32(rd);
    uint8_t inl = cl_u8(rd);
    if (rd->bad || m == 0 || m > FTI_ENGINE_CHUNK) {
        send_fail(c, seq, FT_EPROTO, "malformed batch");
        return FT_OK;
    }
    int rc;
    if (inl) {
        if (rd->len - rd->pos != bytes) {
            send_fail(c, seq, FT_EPROTO, "malformed batch");
            return FT_OK;
        }
        rc = get_requests(c, rd->p + rd->pos, bytes, m);
    } else {
        ft_buf pl;
        ft_buf_init(&pl);
        rc = cl_nccl_batch_recv(c, bytes, &pl);
        if (rc == FT_OK)
            rc = get_requests(c, pl.data, pl.len, m);
        ft_buf_free(&pl);
    }
    fti_prep **pool = fti_prep_pool();
    const fti_prepared *vp[FTI_ENGINE_CHUNK];
    char e[160];
    for (uint32_t i = 0; rc == FT_OK && i < m; i++) {
        if (pool == NULL) {
            rc = FT_ENOMEM;
            break;
        }
        if (pool[i] == NULL && (rc = fti_prep_create(&pool[i])) != FT_OK)
            break;
        if (ft_request_validate(&c->rq[i], 0, e, sizeof e) != FT_OK) {
            rc = FT_EPROTO;
            break;
        }
        rc = fti_request_prepare(&vp[i], pool[i], &c->rq[i]);
    }
    if (rc != FT_OK) {
        send_fail(c, seq, rc, "cannot decode the batch");
        return FT_OK; /* the coordinator fails the batch */
    }
    c->engine_rc = FT_OK;
    rc = run_local(c, seq, vp, m);
    if (rc == FT_OK)
        rc = cl_transport(c)->hits(c, seq, vp, m);
    if (rc == FT_OK)
        return FT_OK;
    if (c->engine_rc != FT_OK) {
        snprintf(e, sizeof e, "its engines failed: %s",
                 ft_strerror(c->engine_rc));
        send_fail(c, seq, c->engine_rc, e);
        FT_LOGF(FT_LOG_ERROR, "cluster: rank %u: batch %u: %s", c->rank, seq,
                e);
        return c->engine_rc == FT_ENOMEM ? FT_OK : c->engine_rc;
    }
    if (rc == FT_ESHUTDOWN)
        return rc;
    FT_LOGF(FT_LOG_WARN, "cluster: rank %u: batch %u given up: %s", c->rank,
            seq, ft_strerror(rc));
    return is_lost(c) ? FT_ECONN : FT_OK;
}

int ft_cluster_serve(ft_cluster *c)
{
    if (c->rank == 0)
        return FT_ESTATE;
    for (;;) {
        if (is_lost(c)) {
            if (bye_queued(c)) {
                FT_LOGF(FT_LOG_INFO, "cluster: rank %u: the coordinator "
                        "left", c->rank);
                return FT_OK;
            }
            FT_LOGF(FT_LOG_ERROR, "cluster: rank %u: the coordinator's "
                    "connection was lost", c->rank);
            return FT_ECONN;
        }
        if (stop_asked(c))
            return FT_ESHUTDOWN;
        nng_msg *m;
        int type;
        uint32_t from, seq;
        cl_rd rd;
        if (c->pending) {
            /* A BATCH kept by wait_msg: its header was checked there. */
            m = c->pending;
            c->pending = NULL;
            rd = (cl_rd){nng_msg_body(m), nng_msg_len(m), 0, 0};
            cl_u32(&rd);
            type = cl_u8(&rd);
            cl_u8(&rd);
            cl_u8(&rd);
            cl_u8(&rd);
            from = cl_u32(&rd);
            seq = cl_u32(&rd);
        } else if (cl_recv(c, &m, &type, &from, &seq, &rd) != FT_OK) {
            continue;
        }
        int rc = FT_OK;
        if (type == CL_BYE) {
            nng_msg_free(m);
            FT_LOGF(FT_LOG_INFO, "cluster: rank %u: the coordinator left",
                    c->rank);
            return FT_OK;
        }
        if (type == CL_PING) {
            ft_buf b;
            ft_buf_init(&b);
            cl_head(&b, CL_PONG, c->rank, 0);
            if (b.data)
                cl_send(c, 0, &b);
            ft_buf_free(&b);
        }
        if (type == CL_REJOIN)
            c->rejoin = 1;
        if (type == CL_BATCH)
            rc = serve_batch(c, seq, &rd);
        nng_msg_free(m);
        if (c->slow_ms)
            nng_msleep((nng_duration)c->slow_ms);
        if (rc == FT_OK && c->rejoin) {
            /* The coordinator took this rank out (it missed the heartbeat
             * or a batch): it registers again, as at the start. */
            c->rejoin = 0;
            FT_LOGF(FT_LOG_WARN, "cluster: rank %u: the coordinator took "
                    "it out; registering again", c->rank);
            char e[512];
            rc = join_rank(c, e, sizeof e);
            if (rc != FT_OK) {
                FT_LOGF(FT_LOG_ERROR, "%s", e);
                return rc == FT_ESHUTDOWN ? FT_OK : rc;
            }
            FT_LOGF(FT_LOG_INFO, "cluster: rank %u: serving again", c->rank);
            continue;
        }
        if (rc == FT_ESHUTDOWN) {
            FT_LOGF(FT_LOG_INFO, "cluster: rank %u: the coordinator left",
                    c->rank);
            return FT_OK;
        }
        if (rc != FT_OK)
            return rc;
    }
}

/* ---- the coordinator's searcher ---- */

static int ops_search(void *arg, const ft_request *reqs, size_t n,
                      ft_result *res)
{
    return ft_cluster_search_batch(arg, reqs, n, res);
}

/* A rank that is down is not an engine failure of the coordinator: its
 * requests get FT_ECONN naming the rank, and health says so. */
static int ops_failed(void *arg)
{
    ft_cluster *c = arg;
    pthread_mutex_lock(&c->mu);
    int f = c->local_failed;
    pthread_mutex_unlock(&c->mu);
    return f;
}
static const char *ops_note(void *arg) { return ft_cluster_note(arg); }
static void ops_close(void *arg) { ft_cluster_close(arg); }

static int ops_search_validated(void *arg, const ft_request *reqs, size_t n,
                                ft_result *res)
{
    return cluster_search(arg, reqs, n, res, FTI_ADMIT_TRUSTED);
}

static const ft_searcher_ops cluster_ops = {ops_search, ops_failed, ops_note,
                                            ops_close, ops_search_validated};

int ft_searcher_open_cluster(ft_searcher **out, ft_cluster *c)
{
    return ft_searcher_open_ops(out, &cluster_ops, c, c->eo.kind);
}
