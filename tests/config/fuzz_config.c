/*
 * fuzz_config.c - any bytes through the configuration loader: nothing may
 * crash or read out of bounds; a refused file gives exactly one line that
 * starts with its name; an accepted one dumps, and every setting's value
 * reads back through ft_config_set to the same text (the command line and
 * the file agree on every value).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashtrie/internal/buf.h"
#include "ft_config.h"
#include "fuzz.h"

static ft_config g_cfg, g_back;
/* The dump and value buffers live across inputs (zeroed is empty). */
static ft_buf g_dump, g_a, g_b;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of exactly the input and its NUL: ASan catches a read past
     * the end of the text. */
    char *text = malloc(size + 1);
    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = 0;
    char err[2048] = "";
    int rc = ft_config_load_string(&g_cfg, text, "fuzz.conf", err, sizeof err);
    free(text);
    if (rc != FT_OK) {
        if (rc != FT_ECONFIG || strncmp(err, "fuzz.conf", 9) != 0 ||
            strchr(err, '\n') != NULL) {
            fprintf(stderr, "bad refusal %d: '%s'\n", rc, err);
            abort();
        }
        return 0;
    }
    if (ft_config_validate(&g_cfg, err, sizeof err) != FT_OK &&
        strchr(err, '\n') != NULL)
        abort();
    ft_buf *a = &g_a, *b = &g_b;
    g_dump.len = 0;
    if (ft_config_dump(&g_cfg, &g_dump) != FT_OK)
        abort();
    ft_config_init(&g_back);
    for (int i = 0; i < FT_CONFIG_NSETTINGS; i++) {
        const ft_config_row *r = &ft_config_rows[i];
        a->len = b->len = 0;
        if (ft_config_value(r, &g_cfg, a) || ft_buf_append(a, "", 0))
            abort();
        if (ft_config_set(&g_back, r->name, (char *)a->data,
                          FT_CONFIG_SRC_CLI_AT, err, sizeof err) != FT_OK) {
            fprintf(stderr, "%s = '%s' does not read back: %s\n", r->name,
                    (char *)a->data, err);
            abort();
        }
        if (ft_config_value(r, &g_back, b) || ft_buf_append(b, "", 0) ||
            strcmp((char *)a->data, (char *)b->data) != 0)
            abort();
    }
    return 0;
}
