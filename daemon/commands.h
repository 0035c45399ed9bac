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
int cmd_gen(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_split(int argc, char **argv);
int cmd_check_config(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_query(int argc, char **argv);
int cmd_loadtest(int argc, char **argv);

#endif
