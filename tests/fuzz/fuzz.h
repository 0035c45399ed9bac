/*
 * fuzz.h - one fuzz target per parser, each a LLVMFuzzerTestOneInput.
 * Built with -DFT_FUZZ=ON (clang, -fsanitize=fuzzer,address) they are
 * libFuzzer binaries; otherwise driver.c turns each into a deterministic
 * regression test over its seed corpus and mutations of it (CTest).
 */
#ifndef FT_FUZZ_H
#define FT_FUZZ_H
#include <stddef.h>
#include <stdint.h>

#include "flashtrie.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* fuzz_count_key is an ft_index_prefix callback counting keys into the
 * uint64_t at arg. */
static inline int fuzz_count_key(const uint32_t *t, size_t n, uint64_t v,
                                 void *arg)
{
    (void)t;
    (void)n;
    (void)v;
    ++*(uint64_t *)arg;
    return 0;
}

/* fuzz_walk is what fuzz_check_key checks a walk of all keys with: the
 * index walked, or the library when lib is set; keys seen so far; set
 * once a key walked did not look up to the value the walk gave. */
typedef struct fuzz_walk {
    const ft_index *idx;
    const ft_library *lib;
    uint64_t n;
    int bad;
} fuzz_walk;

/* fuzz_check_key is an ft_index_prefix / ft_library_prefix callback: it
 * counts the key and looks it up again in the fuzz_walk at arg (the round
 * trip of a key through the trie). */
static inline int fuzz_check_key(const uint32_t *t, size_t n, uint64_t v,
                                 void *arg)
{
    fuzz_walk *w = (fuzz_walk *)arg;
    uint64_t got;
    int rc = w->lib ? ft_library_lookup(&got, w->lib, t, n)
                    : ft_index_lookup(&got, w->idx, t, n);
    if (rc != FT_OK || got != v)
        w->bad = 1;
    w->n++;
    return 0;
}

#ifdef FT_FUZZ_DRIVER
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* fuzz_same_as_file checks, in the regression runs (driver.c), that the
 * file open agrees with the memory open the targets use: size bytes at
 * data written to a file and opened with ft_index_open (flags) must give
 * rc and, after the file's name, the message that ft_index_open_mem gave
 * (mem_err, which starts with name).  Every 8th input: files are slow. */
static inline void fuzz_same_as_file(const uint8_t *data, size_t size,
                                     unsigned flags, int rc,
                                     const char *mem_err, const char *name)
{
    static unsigned calls;
    if (calls++ % 8 != 0)
        return;
    char path[64], err[512] = "";
    snprintf(path, sizeof path, "/tmp/ft_fuzz_same_%d.idx", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(data, 1, size, f) != size || fclose(f) != 0)
        abort();
    ft_index *idx;
    int frc = ft_index_open(&idx, path, flags, err, sizeof err);
    unlink(path);
    if (frc == FT_OK)
        ft_index_close(idx);
    size_t pl = strlen(path), nl = strlen(name);
    if (frc != rc ||
        (rc != FT_OK && (strncmp(err, path, pl) != 0 ||
                         strcmp(err + pl, mem_err + nl) != 0))) {
        fprintf(stderr, "file open: %d '%s', memory open: %d '%s'\n", frc,
                err, rc, mem_err);
        abort();
    }
}
#else
#define fuzz_same_as_file(data, size, flags, rc, mem_err, name) ((void)0)
#endif
#endif
