/*
 * driver.c - runs a fuzz target without libFuzzer: every file of the seed
 * corpus as it is, then a fixed number of deterministic mutations (bit
 * flips, byte changes, inserts, deletes, truncations, splices).  A crash,
 * an abort or a sanitizer report fails the test; the same seed and count
 * always run the same inputs, so a failure reproduces.
 *   usage: fuzz_X CORPUS_DIR [MUTATIONS] [SEED]
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

/* A target may add seeds of its own (e.g. a real index built in-process). */
int ft_fuzz_seed(uint8_t **data, size_t *size) __attribute__((weak));

typedef struct buf {
    uint8_t *p;
    size_t n;
} buf;

static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int load(const char *path, buf *b)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    b->p = malloc((size_t)n + 1);
    b->n = fread(b->p, 1, (size_t)n, f);
    fclose(f);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR [MUTATIONS] [SEED]\n", argv[0]);
        return 2;
    }
    long muts = argc > 2 ? atol(argv[2]) : 2000;
    uint64_t s = argc > 3 ? strtoull(argv[3], NULL, 10) : 1;
    buf seeds[256];
    int ns = 0;
    DIR *d = opendir(argv[1]);
    if (d == NULL) {
        fprintf(stderr, "%s: cannot open corpus %s\n", argv[0], argv[1]);
        return 2;
    }
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d)) != NULL && ns < 255) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", argv[1], e->d_name);
        if (load(path, &seeds[ns]) == 0)
            ns++;
    }
    closedir(d);
    if (ft_fuzz_seed && ft_fuzz_seed(&seeds[ns].p, &seeds[ns].n) == 0)
        ns++;
    if (ns == 0) {
        fprintf(stderr, "%s: empty corpus\n", argv[0]);
        return 2;
    }
    for (int i = 0; i < ns; i++)
        LLVMFuzzerTestOneInput(seeds[i].p, seeds[i].n);
    uint8_t *m = NULL;
    size_t cap = 0;
    for (long it = 0; it < muts; it++) {
        const buf *b = &seeds[rnd(&s) % (uint64_t)ns];
        size_t n = b->n;
        if (cap < 2 * n + 64) {
            cap = 2 * n + 64;
            m = realloc(m, cap);
        }
        memcpy(m, b->p, n);
        int steps = 1 + (int)(rnd(&s) % 4);
        for (int k = 0; k < steps; k++) {
            size_t at = n ? (size_t)(rnd(&s) % n) : 0;
            switch (rnd(&s) % 7) {
            case 0: if (n) m[at] ^= (uint8_t)(1u << (rnd(&s) % 8)); break;
            case 1: if (n) m[at] = (uint8_t)rnd(&s); break;
            case 2: /* an interesting byte */
                if (n) {
                    static const uint8_t v[] = {0, '\t', '\n', ' ', '-', '.', 'e',
                                                '9', '"', ',', ']', 0xff};
                    m[at] = v[rnd(&s) % sizeof v];
                }
                break;
            case 3: /* insert */
                if (n + 1 < cap) {
                    memmove(m + at + 1, m + at, n - at);
                    m[at] = (uint8_t)rnd(&s);
                    n++;
                }
                break;
            case 4: /* delete */
                if (n) {
                    memmove(m + at, m + at + 1, n - at - 1);
                    n--;
                }
                break;
            case 5: n = at; break; /* truncate */
            case 6: { /* splice a piece of another seed */
                const buf *o = &seeds[rnd(&s) % (uint64_t)ns];
                if (o->n == 0)
                    break;
                size_t from = (size_t)(rnd(&s) % o->n);
                size_t len = (size_t)(rnd(&s) % (o->n - from)) + 1;
                if (at + len > cap)
                    len = cap - at;
                memcpy(m + at, o->p + from, len);
                if (at + len > n)
                    n = at + len;
                break;
            }
            }
        }
        LLVMFuzzerTestOneInput(m, n);
    }
    printf("%s: %d seeds, %ld mutations: ok\n", argv[0], ns, muts);
    free(m);
    for (int i = 0; i < ns; i++)
        free(seeds[i].p);
    return 0;
}
