/* cli.h - what the subcommands share (cli.c): the parsers of their option
 * values and the split that "flashtrie split" and "flashtrie build
 * --shards" both run.  It includes no subcommand's header, and every
 * subcommand may include it. */
#ifndef FT_CLI_H
#define FT_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "flashtrie.h"

/* ft_cli_parse_u64 parses a whole decimal string; 0 on success. */
int ft_cli_parse_u64(const char *s, unsigned long long *out);
/* ft_cli_parse_tokens parses "1 2 3" (spaces) into toks; returns the count
 * or -1 on a bad token, -2 when more than cap tokens. */
int ft_cli_parse_tokens(const char *s, unsigned *toks, int cap);

/* ft_cli_parse_bytes reads a byte count with an optional K, M or G suffix
 * (powers of 1024); 0 on success. */
int ft_cli_parse_bytes(const char *s, unsigned long long *out);

/* ft_cli_parse_f64 parses a whole decimal float (inf allowed); 0 on success. */
int ft_cli_parse_f64(const char *s, double *out);
/* ft_cli_parse_u32 parses an integer in lo..hi for option opt of command
 * cmd ("flashtrie query"), printing "cmd: opt: expected an integer in
 * lo..hi, got 'S'" when it is not; 0 on success. */
int ft_cli_parse_u32(const char *cmd, const char *opt, const char *s,
                     uint32_t lo, uint32_t hi, uint32_t *out);

/* ft_cli_parse_count parses a whole decimal integer (positive: not 0) for
 * option opt of command cmd, printing "cmd: opt: expected a positive
 * integer, got 'S'" (or "an integer") when it is not; 0 on success. */
int ft_cli_parse_count(const char *cmd, const char *opt, const char *s,
                       int positive, unsigned long long *out);

/* ft_cli_split writes the index at index_path as shards plus a manifest at
 * output (shards > 0: that many; else as few as fit shard_bytes each) and
 * prints the summary unless quiet; returns the exit status. */
int ft_cli_split(const char *cmd, const char *index_path, const char *output,
                 uint32_t shards, uint64_t shard_bytes, int threads,
                 int no_verify, int quiet);

#endif
