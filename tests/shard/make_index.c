/*
 * make_index.c - a test helper that writes an index with ft_builder,
 * so the CLI tests do not depend on "flashtrie build".  Input: one key per
 * line, tokens separated by spaces, a TAB and a value (required here).
 * usage: make_index KEYS INDEX
 */
#include "search_util.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: make_index KEYS INDEX\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "r");
    FT_CHECK(f != NULL);
    size_t n = 0, cap = 16;
    su_key *keys = malloc(cap * sizeof *keys);
    char buf[4096];
    while (fgets(buf, sizeof buf, f)) {
        if (buf[0] == '\n' || buf[0] == '#')
            continue;
        if (n == cap)
            keys = realloc(keys, (cap *= 2) * sizeof *keys);
        su_key *k = &keys[n++];
        k->len = 0;
        char *p = buf;
        while (*p && *p != '\t' && *p != '\n') {
            FT_CHECK(k->len < SU_MAX_LEN);
            k->t[k->len++] = (uint32_t)strtoul(p, &p, 10);
            while (*p == ' ')
                p++;
        }
        FT_CHECK(*p == '\t');
        k->value = strtoull(p + 1, NULL, 10);
    }
    fclose(f);
    ft_index *idx;
    su_build(keys, n, argv[2], &idx);
    ft_index_close(idx);
    free(keys);
    return 0;
}
