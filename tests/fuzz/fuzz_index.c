/*
 * fuzz_index.c - bytes as an index file: ft_index_open must refuse every
 * damaged file with a named error (checksums on) and never crash; a file it
 * accepts is walked.  The seed is a real index built in-process, so
 * mutations reach every header and table check.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "flashtrie.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/ft_fuzz_index_%d.idx", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        abort();
    fwrite(data, 1, size, f);
    fclose(f);
    ft_index *idx;
    char err[512];
    int rc = ft_index_open(&idx, path, 0, err, sizeof err);
    if (rc == FT_OK) {
        uint64_t seen, n = 0, v;
        ft_index_prefix(&seen, idx, NULL, 0, 1000, fuzz_count_key, &n);
        uint32_t k[2] = {1, 2};
        ft_index_lookup(&v, idx, k, 2);
        ft_index_close(idx);
    } else if (rc != FT_EFORMAT && rc != FT_ETRUNC && rc != FT_ECHECKSUM &&
               rc != FT_EVERSION) {
        abort();
    }
    unlink(path);
    return 0;
}

#include "trie.h"

/* ft_fuzz_seed builds a small real index in memory: the mutations start
 * from a valid header, table and sections. */
int ft_fuzz_seed(uint8_t **data, size_t *size)
{
    static const uint32_t keys[][3] = {{1, 0, 0}, {1, 2, 0}, {1, 2, 3},
                                       {1, 70000, 0}, {9, 0, 0}};
    static const uint32_t lens[] = {1, 2, 3, 2, 1};
    ft_tb *tb;
    ft_trie t;
    char path[64];
    snprintf(path, sizeof path, "/tmp/ft_fuzz_seed_%d.idx", (int)getpid());
    if (ft_tb_create(&tb) != FT_OK)
        return -1;
    for (int i = 0; i < 5; i++)
        if (ft_tb_add(tb, keys[i], lens[i], (uint64_t)i << 40) != FT_OK)
            return -1;
    if (ft_tb_finish(tb, 64, &t) != FT_OK ||
        ft_trie_write(&t, path, NULL, 0) != FT_OK)
        return -1;
    ft_tb_destroy(tb);
    ft_trie_free(&t);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return -1;
    fseek(f, 0, SEEK_END);
    *size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    *data = malloc(*size);
    *size = fread(*data, 1, *size, f);
    fclose(f);
    unlink(path);
    return 0;
}
