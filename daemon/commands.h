/* commands.h - the flashtrie subcommands.  Each returns the process exit
 * status: 0 success, 1 failure of the work, 2 unusable arguments. */
#ifndef FT_COMMANDS_H
#define FT_COMMANDS_H

#include <stddef.h>
#include <stdint.h>

#include "flashtrie.h"
#include "workload.h"

int cmd_build(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_lookup(int argc, char **argv);
int cmd_search(int argc, char **argv);

/* "flashtrie search --ar" (cmd_search_ar.c): a request answered by the
 * autoregressive step API, one step at a time. */
typedef struct ft_cli_ar ft_cli_ar;
int ft_cli_ar_open(ft_cli_ar **out, const ft_index *idx, int dense,
                   ft_engine_kind kind, uint32_t max_beam, char *err,
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

/* ft_cli_parse_u64 parses a whole decimal string; 0 on success. */
int ft_cli_parse_u64(const char *s, unsigned long long *out);
/* ft_cli_parse_tokens parses "1 2 3" (spaces) into toks; returns the count
 * or -1 on a bad token, -2 when more than cap tokens. */
int ft_cli_parse_tokens(const char *s, unsigned *toks, int cap);

/* ft_cli_parse_bytes reads a byte count with an optional K, M or G suffix
 * (powers of 1024); 0 on success. */
int ft_cli_parse_bytes(const char *s, unsigned long long *out);
/* ft_cli_split writes the index at index_path as shards plus a manifest at
 * output (shards > 0: that many; else as few as fit shard_bytes each) and
 * prints the summary unless quiet; returns the exit status. */
int ft_cli_split(const char *cmd, const char *index_path, const char *output,
                 uint32_t shards, uint64_t shard_bytes, int threads,
                 int no_verify, int quiet);

/* ft_cli_parse_f64 parses a whole decimal float (inf allowed); 0 on success. */
int ft_cli_parse_f64(const char *s, double *out);
/* ft_cli_parse_u32 parses an integer in lo..hi for option opt, printing a
 * message naming the option when it is not; 0 on success. */
int ft_cli_parse_u32(const char *opt, const char *s, uint32_t lo, uint32_t hi,
                     uint32_t *out);

/* ft_cli_parse_count parses a whole decimal integer (positive: not 0) for
 * option opt of command cmd, printing "cmd: opt: expected a positive
 * integer, got 'S'" (or "an integer") when it is not; 0 on success. */
int ft_cli_parse_count(const char *cmd, const char *opt, const char *s,
                       int positive, unsigned long long *out);

/* ft_cli_build_temp builds an index from a keys file into a new temporary
 * file whose name goes to path (the caller unlinks it). */
int ft_cli_build_temp(char *path, size_t pathlen, const char *keys,
                      ft_build_stats *st, char *errbuf, size_t errlen);

/* ft_cli_req_opt parses one request-shaping option (--T, --K, --head,
 * --results, --theta-tok, --theta-sent, --alpha; getopt codes T K H R a b
 * A); returns 1 when c was one, -1 on a bad value, 0 otherwise. */
int ft_cli_req_opt(int c, const char *arg, ft_wl_req_opts *o);
/* ft_cli_print_key_stats prints a generated library's shape. */
void ft_cli_print_key_stats(FILE *f, const ft_wl_keys_stats *st);

/* ft_cli_file_sink writes generator output to the FILE * in arg. */
int ft_cli_file_sink(const void *buf, size_t len, void *arg);

#endif
