/* gen.h - what "flashtrie gen", "flashtrie bench" and "flashtrie
 * loadtest" share over the workload generator (workload.h); defined in
 * cmd_gen.c.  Private to daemon/bench/. */
#ifndef FT_BENCH_GEN_H
#define FT_BENCH_GEN_H

#include <stddef.h>
#include <stdio.h>

#include "flashtrie.h"
#include "workload.h"

/* ft_cli_build_temp builds an index from a keys file into a new temporary
 * file whose name goes to path (the caller unlinks it). */
int ft_cli_build_temp(char *path, size_t pathlen, const char *keys,
                      ft_build_stats *st, char *errbuf, size_t errlen);

/* ft_cli_req_opt parses one request-shaping option (--T, --K, --head,
 * --results, --theta-tok, --theta-sent, --alpha; getopt codes T K H R a b
 * A) of command cmd ("flashtrie bench", which starts its messages);
 * returns 1 when c was one, -1 on a bad value, 0 otherwise. */
int ft_cli_req_opt(const char *cmd, int c, const char *arg,
                   ft_wl_req_opts *o);
/* ft_cli_print_key_stats prints a generated library's shape. */
void ft_cli_print_key_stats(FILE *f, const ft_wl_keys_stats *st);

/* ft_cli_file_sink writes generator output to the FILE * in arg. */
int ft_cli_file_sink(const void *buf, size_t len, void *arg);

#endif
