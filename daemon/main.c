/* main.c - the flashtrie program: dispatches to its subcommands. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "flashtrie.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} command;

static const command commands[] = {
    {"build", cmd_build, "build an index from a keys file (text or .ftk)"},
    {"split", cmd_split, "cut an index into shards by first token, with a manifest"},
    {"info", cmd_info, "print an index's counts and section sizes"},
    {"lookup", cmd_lookup, "look keys (or prefixes) up in an index"},
    {"search", cmd_search, "answer a JSON Lines file of search requests"},
    {"gen", cmd_gen, "generate a seeded synthetic library or request grids"},
    {"bench", cmd_bench, "measure engine latency and throughput per beam"},
    {"serve", cmd_serve, "serve searches over nng (tcp, ipc, tls) until SIGTERM"},
    {"query", cmd_query, "answer a JSON Lines file of requests through a server"},
    {"check-config", cmd_check_config, "check a serve configuration file and print its settings"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: flashtrie <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n'flashtrie <command> --help' describes a command.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("flashtrie %s\n", FT_VERSION_STRING);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "flashtrie: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
