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
#include "serve_priv.h"

/* srv_reload opens the index again (path, or the one served when NULL or
 * ""), swaps it in on success; errbuf says why not otherwise. */
int srv_reload(server *srv, const char *path, char *errbuf, size_t errlen);

/* srv_config_dump appends INFO's config section to out: the settings the
 * table shows in INFO, as of the start or the last reload. */
int srv_config_dump(server *srv, ft_buf *out);

#endif /* FT_SERVE_H */
