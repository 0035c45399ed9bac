/*
 * serve.h - what serve.c provides to the other files of "flashtrie
 * serve" (cmd_serve itself is in commands.h): the reload of the index and
 * INFO's config section.  serve.c holds options, start-up, the settings'
 * apply hooks, signals, reload and drain.
 */
#ifndef FT_SERVE_H
#define FT_SERVE_H

#include <stddef.h>

#include "flashtrie/internal/buf.h"
#include "ft_config.h"
#include "serve_priv.h"

/* srv_reload_req is one RELOAD frame's request to the reload worker. */
typedef struct srv_reload_req srv_reload_req;
struct srv_reload_req {
    char path[FT_CONFIG_PATH_MAX]; /* "": the index served now */
    /* done is called once, when the reload ended (rc FT_OK: msg
     * "reloaded ..."; else msg "reload: refused: ...") or was abandoned
     * because the server shuts down (FT_ESHUTDOWN), on the worker or on
     * the main thread; rq belongs to the caller again from then on. */
    void (*done)(srv_reload_req *rq, int rc, const char *msg);
    void *arg;
};

/* srv_reload_start hands rq to the reload worker: the index is opened and
 * checked there, away from nng's threads and the signal thread, and
 * swapped in on success.  FT_OK: rq->done will be called.  Otherwise
 * done is not called and errbuf says why: FT_EBUSY "reload: one already
 * running (PATH, N.N s so far); retry when it ends", FT_ESHUTDOWN while
 * draining, FT_ENOTSUP in a cluster. */
int srv_reload_start(server *srv, srv_reload_req *rq, char *errbuf,
                     size_t errlen);

/* srv_config_dump appends INFO's config section to out: the settings the
 * table shows in INFO, as of the start or the last reload. */
int srv_config_dump(server *srv, ft_buf *out);

#endif /* FT_SERVE_H */
