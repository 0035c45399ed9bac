/*
 * serve_cluster.h - the cluster ranks of "flashtrie serve"
 * (serve_cluster.c).
 */
#ifndef FT_SERVE_CLUSTER_H
#define FT_SERVE_CLUSTER_H

#include <stddef.h>

#include "serve_priv.h"

/* srv_cluster_gen (rank 0) opens its shards, waits for every rank and
 * makes the generation whose searcher is the cluster (srv->cluster is
 * set).  sfd is the server's signalfd: SIGTERM gives the wait up. */
int srv_cluster_gen(server *srv, int sfd, ft_gen **out, char *err,
                    size_t errlen);
/* srv_cluster_worker (ranks above 0) joins and serves until the
 * coordinator leaves or SIGTERM; returns the exit status. */
int srv_cluster_worker(server *srv, int sfd);

#endif /* FT_SERVE_CLUSTER_H */
