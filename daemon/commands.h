/* commands.h - the flashtrie subcommands.  Each returns the process exit
 * status: 0 success, 1 failure of the work, 2 unusable arguments. */
#ifndef FT_COMMANDS_H
#define FT_COMMANDS_H

int cmd_build(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_lookup(int argc, char **argv);
int cmd_search(int argc, char **argv);

/* ft_cli_parse_u64 parses a whole decimal string; 0 on success. */
int ft_cli_parse_u64(const char *s, unsigned long long *out);
/* ft_cli_parse_tokens parses "1 2 3" (spaces) into toks; returns the count
 * or -1 on a bad token, -2 when more than cap tokens. */
int ft_cli_parse_tokens(const char *s, unsigned *toks, int cap);

#endif
