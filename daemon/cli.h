/* cli.h - what the subcommands share (cli.c): the parsers of their option
 * values and the split that "flashtrie split" and "flashtrie build
 * --shards" both run.  It includes no subcommand's header, and every
 * subcommand may include it. */
#ifndef FT_CLI_H
#define FT_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "flashtrie.h"

/* ft_cli_out is a command's output file.  A path that is no file yet or
 * a regular file is written aside (PATH.tmp.<pid> beside it) and renamed
 * into place by ft_cli_out_close(o, 1), so that a command that fails
 * leaves nothing under the name (nor a half of what was there);
 * "-" is stdout, and anything else (a device, a pipe) is written
 * directly. */
typedef struct ft_cli_out {
    FILE *f;
    const char *path;
    char tmp[4096]; /* the file written aside; "" when written directly */
} ft_cli_out;
/* ft_cli_out_open opens o for path with fopen's mode; 0, or -1 with errno
 * set (the message is the caller's). */
int ft_cli_out_open(ft_cli_out *o, const char *path, const char *mode);
/* ft_cli_out_close flushes and closes o; with ok it moves the file into
 * place, without it removes what was written aside.  0, or -1 with errno
 * set when ok and writing, closing or renaming failed. */
int ft_cli_out_close(ft_cli_out *o, int ok);

/* ft_cli_getline is getline(3) on f that tells a read error from the end
 * of the input: the line's length, or -1 with *err 0 at the end and *err
 * the error (errno; EIO where it gave none) when f could not be read or
 * the line had no memory. */
ssize_t ft_cli_getline(char **buf, size_t *cap, FILE *f, int *err);

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
