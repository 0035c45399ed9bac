/*
 * cluster_impl.h - what cluster.c and cluster_nccl.c share: the cluster's
 * state, the message reader and the transport interface.
 */
#ifndef FT_CLUSTER_IMPL_H
#define FT_CLUSTER_IMPL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>

#include <nng/nng.h>

#include "flashtrie/internal/buf.h"
#include "cluster.h"

enum { CL_REG = 1, CL_SESSION, CL_REFUSE, CL_BATCH, CL_LISTS, CL_ALL,
       CL_HITS, CL_FAIL, CL_ABORT, CL_BYE, CL_PING, CL_PONG, CL_REJOIN,
       CL_LAST = CL_REJOIN };

/* cl_rd reads a received message; bad is set once a read runs past it. */
typedef struct cl_rd {
    const unsigned char *p;
    size_t len, pos;
    int bad;
} cl_rd;

typedef struct cl_rank {
    uint32_t first, count; /* its shards */
    nng_pipe pipe;         /* coordinator: its connection */
    int joined;            /* coordinator: registered */
    int up;                /* coordinator: serving (after the session) */
    char why[200];         /* why it is down */
    uint64_t seen_ms;      /* coordinator: when it last answered (down:
                            * when it was last told to rejoin) */
} cl_rank;

/* cl_xport is one transport of a running batch's exchanges; every rank
 * calls each in the same order (lockstep).  batch: rank 0's requests
 * reach every rank (rank 0 calls it; ranks receive its announcement in
 * their loop); lists: step t's per-shard lists of every rank land in every
 * local engine's recv, in shard order; hits: every rank's local hits
 * reach rank 0's c->part. */
typedef struct cl_xport {
    const char *name;
    int (*batch)(ft_cluster *c, uint32_t seq, size_t m, const ft_buf *payload);
    int (*lists)(ft_cluster *c, uint32_t seq, uint32_t t, size_t len);
    int (*hits)(ft_cluster *c, uint32_t seq, const fti_prepared *const *reqs,
                size_t m);
} cl_xport;

struct ft_cluster {
    uint32_t rank, world, S;
    uint32_t first, count;     /* this rank's shards */
    const ft_library *lib;
    ft_engine_opts eo;
    ft_engine **eng;           /* [count] */
    const ft_index **idx;      /* [count] */
    uint64_t *base;            /* [S]: key index of each shard's first key */
    uint64_t msum;             /* XXH3-64 of the manifest file */
    cl_rank *r;                /* [world] */
    char url[512];
    char secret[256];     /* the shared secret of REG ("": none) */
    size_t max_msg;       /* NNG_OPT_RECVMAXSZ: the largest message */
    nng_socket sock;
    int sock_open;
    pthread_mutex_t mu;        /* r[].joined/up/why/pipe, running, lost */
    int running;               /* the session started */
    pthread_mutex_t run_mu;    /* rank 0: who reads the socket: a batch
                                * or, while idle, the keeper */
    pthread_t keeper;          /* rank 0: heartbeats and rejoins */
    int keeper_on;
    int rejoin;                /* ranks: told to register again */
    nng_msg *pending;          /* ranks: a BATCH that came during another */
    int lost;                  /* ranks: the coordinator's connection went */
    uint32_t slow_ms;          /* ranks: ft_cluster_opts.test_slow_ms */
    int local_failed;          /* rank 0's own engines failed */
    int bye_sent;
    int closing;               /* ft_cluster_close under way */
    int engine_rc;             /* a local engine's failure in this batch */
    uint32_t join_ms, step_ms;
    ft_cluster_stop_fn stop;
    void *stop_arg;
    uint32_t seq;              /* the batch under way */
    ft_result *part;           /* [S * FTI_ENGINE_CHUNK] local hits */
    uint64_t *all;             /* nng: every shard's list of a step */
    size_t all_cap;
    ft_buf msg;                /* the message being built */
    ft_buf reqbuf;             /* ranks: the batch's grids */
    ft_request *rq;            /* ranks: the batch's requests */
    int nccl;                  /* the NCCL transport is in use */
    int has_id;
    unsigned char nccl_id[128];
    void *nx;                  /* cluster_nccl.c's state */
    char xdown[200];           /* the transport broke (NCCL aborted): why */
    char note[320];
};

int cl_get(cl_rd *r, void *p, size_t n);
uint8_t cl_u8(cl_rd *r);
uint32_t cl_u32(cl_rd *r);
uint64_t cl_u64(cl_rd *r);
void cl_head(ft_buf *b, int type, uint32_t rank, uint32_t seq);
const char *cl_type_name(int t);
int cl_send(ft_cluster *c, uint32_t r, const ft_buf *b);
int cl_recv(ft_cluster *c, nng_msg **out, int *type, uint32_t *from,
            uint32_t *seq, cl_rd *rd);
void cl_mark_down(ft_cluster *c, uint32_t r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* cl_put_hits appends this rank's local hits of m requests (HITS body). */
int cl_put_hits(ft_cluster *c, ft_buf *b, size_t m);
/* cl_get_hits decodes rank r's HITS body into c->part. */
int cl_get_hits(ft_cluster *c, uint32_t r, cl_rd *rd,
                const fti_prepared *const *reqs, size_t m);

/* cluster_nccl.c: the NCCL transport (GPU ranks).  In a build without
 * NCCL, GPU ranks are refused at open and the rest are no-ops. */
/* cl_nccl_session_id makes the unique id rank 0 hands out (GPU ranks). */
int cl_nccl_session_id(ft_cluster *c, char *errbuf, size_t errlen);
/* cl_nccl_open joins the communicator after the session (GPU ranks). */
int cl_nccl_open(ft_cluster *c, char *errbuf, size_t errlen);
void cl_nccl_close(ft_cluster *c);
/* cl_nccl_settle waits (bounded) for the steps' exchanges to complete
 * before the results are read; a peer that never comes aborts the
 * communicator (FT_ECONN). */
int cl_nccl_settle(ft_cluster *c);
/* cl_nccl_batch_recv receives a batch payload of bytes by broadcast. */
int cl_nccl_batch_recv(ft_cluster *c, uint32_t bytes, ft_buf *out);
const cl_xport *cl_nccl_transport(void);
const cl_xport *cl_transport(const ft_cluster *c);

#endif /* FT_CLUSTER_IMPL_H */
