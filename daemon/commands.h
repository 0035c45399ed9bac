/* commands.h - the flashtrie subcommands.  Each returns the process exit
 * status: 0 success, 1 failure of the work, 2 unusable arguments.  The
 * helpers they share are cli.h's (included here for them); those of gen,
 * bench and loadtest alone are daemon/bench/gen.h's. */
#ifndef FT_COMMANDS_H
#define FT_COMMANDS_H

#include <stddef.h>
#include <stdint.h>

#include "cli.h"
#include "flashtrie.h"

int cmd_build(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_lookup(int argc, char **argv);
int cmd_search(int argc, char **argv);

/* "flashtrie search --ar" (cmd_search_ar.c): a request answered by the
 * autoregressive step API, one step at a time. */
typedef struct ft_cli_ar ft_cli_ar;
int ft_cli_ar_open(ft_cli_ar **out, const ft_index *idx, int dense,
                   ft_engine_kind kind, uint32_t threads, char *err,
                   size_t errlen);
void ft_cli_ar_close(ft_cli_ar *a);
const char *ft_cli_ar_note(const ft_cli_ar *a);
/* ft_cli_ar_search answers req into res (a rejected request: res->status
 * and res->error); an error return means the session failed. */
int ft_cli_ar_search(ft_cli_ar *a, const ft_request *req, uint32_t max_beam,
                     ft_result *res);
int cmd_gen(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_split(int argc, char **argv);
int cmd_check_config(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_query(int argc, char **argv);
int cmd_loadtest(int argc, char **argv);

#endif
