/* main.c - the flashtrie program: dispatches to its subcommands.
 *
 * Besides the commands it answers --help/-h, --version/-V, "help CMD
 * [SUB]" (the same as "CMD [SUB] --help") and "CMD ... --version" (the
 * program's version, whatever the command). */
#include <stdio.h>
#include <stdlib.h>
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
    {"loadtest", cmd_loadtest, "load a loopback server with good, bad and oversize messages, every answer checked"},
    {"check-config", cmd_check_config, "check a serve configuration file and print its settings"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    int w = (int)strlen("help");
    for (size_t i = 0; i < N_COMMANDS; i++)
        if ((int)strlen(commands[i].name) > w)
            w = (int)strlen(commands[i].name);
    fprintf(f, "usage: flashtrie <command> [options]\n"
               "       flashtrie help <command>\n"
               "       flashtrie --help | --version\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-*s  %s\n", w, commands[i].name, commands[i].help);
    fprintf(f, "  %-*s  %s\n", w, "help",
            "describe a command (the same as 'flashtrie <command> --help')");
    fprintf(f, "\noptions:\n"
               "  -h, --help     print this help\n"
               "  -V, --version  print the version (also after any command)\n"
               "\n'flashtrie <command> --help' describes a command; the search"
               " rules are\ndocs/specification.md.\n");
}

static const command *find(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(name, commands[i].name))
            return &commands[i];
    return NULL;
}

static int unknown(const char *name)
{
    fprintf(stderr, "flashtrie: unknown command '%s'\n", name);
    usage(stderr);
    return 2;
}

static int version(void)
{
    printf("flashtrie %s\n", FT_VERSION_STRING);
    return 0;
}

/* finish flushes stdout: a command whose output could not all be written
 * (a full disk, say) exits 1, not 0 with its output cut short.  A command
 * that failed already has said why. */
static int finish(const char *name, int rc)
{
    if ((fflush(stdout) != 0 || ferror(stdout)) && rc == 0) {
        fprintf(stderr, "flashtrie%s%s: cannot write the output\n",
                name ? " " : "", name ? name : "");
        rc = 1;
    }
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        return finish(NULL, 0);
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V"))
        return finish(NULL, version());
    if (!strcmp(argv[1], "help")) {
        /* help [CMD [SUB...]]: CMD [SUB...] --help */
        if (argc < 3) {
            usage(stdout);
            return finish(NULL, 0);
        }
        const command *c = find(argv[2]);
        if (!c)
            return unknown(argv[2]);
        char **av = calloc((size_t)argc, sizeof *av);
        if (!av) {
            fprintf(stderr, "flashtrie: out of memory\n");
            return 1;
        }
        for (int i = 2; i < argc; i++)
            av[i - 2] = argv[i];
        av[argc - 2] = "--help";
        int rc = c->run(argc - 1, av);
        free(av);
        return finish(c->name, rc);
    }
    const command *c = find(argv[1]);
    if (!c)
        return unknown(argv[1]);
    /* CMD ... --version, up to a "--" that ends the options. */
    for (int i = 2; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "--version"))
            return finish(NULL, version());
    return finish(c->name, c->run(argc - 1, argv + 1));
}
