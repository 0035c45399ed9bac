/* cmd_config.c - "flashtrie check-config": loads a configuration file the
 * way "flashtrie serve" does, runs every check, and prints the settings
 * with their sources, or the one line saying what is wrong and where.
 *
 * Exit status: 0 when the configuration is usable, 1 when it is not (the
 * error line on stderr), 2 for unusable arguments (a bad flag value
 * included).  --doc prints the
 * settings table as Markdown (docs/config.md holds it). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "flashtrie/internal/buf.h"
#include "commands.h"
#include "ft_config.h"

static const char *usage_text =
    "usage: flashtrie check-config [--no-files] [--index PATH] [--listen URLS]\n"
    "         [--engine auto|cpu|gpu|shards] [--metrics URL] FILE\n"
    "       flashtrie check-config --doc\n"
    "  loads FILE as 'flashtrie serve' would (the flags override it as they\n"
    "  do there), checks it, and prints 'FILE: ok' and every setting with\n"
    "  its value and source (default, file:LINE or cli).  --no-files skips\n"
    "  the check that the index and TLS files exist.  --doc prints the\n"
    "  settings table as Markdown.\n";

/* print_buf writes b to f; 0 on success. */
static int print_buf(FILE *f, const ft_buf *b)
{
    return b->len && fwrite(b->data, 1, b->len, f) != b->len;
}

int cmd_check_config(int argc, char **argv)
{
    enum { OPT_NO_FILES = 1000, OPT_DOC, OPT_FLAG };
    /* The override flags are the table's rows marked for check-config. */
    struct option opts[FT_CONFIG_NSETTINGS + 4] = {
        {"no-files", no_argument, 0, OPT_NO_FILES},
        {"doc", no_argument, 0, OPT_DOC},
        {"help", no_argument, 0, 'h'}};
    int nopt = 3;
    for (int i = 0; i < FT_CONFIG_NSETTINGS; i++)
        if (ft_config_rows[i].flag &&
            (ft_config_rows[i].show & FT_CONFIG_SHOW_CHECK))
            opts[nopt++] = (struct option){
                ft_config_rows[i].flag,
                ft_config_rows[i].flag_arg ? required_argument : no_argument,
                0, OPT_FLAG};
    opts[nopt] = (struct option){0, 0, 0, 0};
    /* Overrides are applied after the file, in the order given. */
    const char *set_name[16], *set_value[16], *set_flag[16];
    int nset = 0, no_files = 0, doc = 0, c, li;
    optind = 1;
    opterr = 1;
    while ((c = getopt_long(argc, argv, "h", opts, &li)) != -1) {
        switch (c) {
        case OPT_NO_FILES: no_files = 1; break;
        case OPT_DOC: doc = 1; break;
        case OPT_FLAG:
            if (nset == 16) {
                fprintf(stderr, "flashtrie check-config: too many overrides\n");
                return 2;
            }
            set_name[nset] = ft_config_find_flag(opts[li].name)->name;
            set_flag[nset] = opts[li].name;
            set_value[nset++] = optarg ? optarg : "true";
            break;
        case 'h': fputs(usage_text, stdout); return 0;
        default: fputs(usage_text, stderr); return 2;
        }
    }
    ft_buf out;
    ft_buf_init(&out);
    if (doc) {
        if (optind != argc || nset || no_files) {
            fputs(usage_text, stderr);
            return 2;
        }
        int bad = ft_config_doc(&out) != FT_OK || print_buf(stdout, &out);
        ft_buf_free(&out);
        return bad ? 1 : 0;
    }
    if (optind + 1 != argc) {
        fprintf(stderr, "flashtrie check-config: expected one FILE\n");
        fputs(usage_text, stderr);
        return 2;
    }
    const char *file = argv[optind];
    static ft_config cfg; /* about 60 KiB: not on the stack */
    char err[2048];
    int rc = ft_config_load(&cfg, file, err, sizeof err);
    /* A bad flag value is a bad argument (2), as it is for serve. */
    for (int i = 0; i < nset && rc == FT_OK; i++)
        if (ft_config_set(&cfg, set_name[i], set_value[i],
                          FT_CONFIG_SRC_CLI_AT, err, sizeof err) != FT_OK) {
            fprintf(stderr, "flashtrie check-config: --%s: %s\n",
                    set_flag[i], err);
            return 2;
        }
    if (rc == FT_OK)
        rc = ft_config_validate(&cfg, err, sizeof err);
    if (rc == FT_OK && !no_files)
        rc = ft_config_check_files(&cfg, err, sizeof err);
    if (rc != FT_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    printf("%s: ok\n", file);
    rc = ft_config_dump(&cfg, &out);
    int bad = rc != FT_OK || print_buf(stdout, &out) || fflush(stdout);
    ft_buf_free(&out);
    return bad ? 1 : 0;
}
