/*
 * fuzz_index.c - bytes as an index file: ft_index_open must refuse every
 * damaged file with a named error (checksums on) and never crash.  The
 * bytes go through ft_index_open_mem, which runs the very checks of
 * ft_index_open (shard/index_file.c: one parse after the mapping) on a
 * buffer, so no input costs a file and a mapping.  A file
 * it accepts must agree with itself: the walk of all keys finds as many as
 * the header counts, and every key walked looks up to the value the walk
 * gave (the round trip of a key through the trie).  The seeds are real
 * indexes (corpus/index/, and one built in-process for the driver), so
 * mutations reach every header and table check.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flashtrie.h"
#include "fuzz.h"
#include "trie.h"

/* The name the messages must carry, standing for the file's path. */
#define NAME "fuzz.idx"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of exactly the input's size, aligned as a mapping is, so
     * that ASan catches a read one byte past the end (a mapping would
     * hide it up to the page's end). */
    void *buf;
    if (posix_memalign(&buf, 64, size ? size : 1) != 0)
        abort();
    memcpy(buf, data, size);
    ft_index *idx;
    char err[512] = "";
    int rc = ft_index_open_mem(&idx, buf, size, NAME, 0, err, sizeof err);
    fuzz_same_as_file(data, size, 0, rc, err, NAME);
    if (rc == FT_OK) {
        enum { LIMIT = 100000 };
        ft_index_info info;
        ft_index_info_init(&info);
        fuzz_walk w = {idx, NULL, 0, 0};
        uint64_t seen;
        if (ft_index_info_get(&info, idx) != FT_OK ||
            info.file_bytes != size ||
            ft_index_prefix(&seen, idx, NULL, 0, LIMIT, fuzz_check_key,
                            &w) != FT_OK ||
            w.bad || (info.keys <= LIMIT && w.n != info.keys))
            abort();
        ft_index_close(idx);
    } else if ((rc != FT_EFORMAT && rc != FT_ETRUNC && rc != FT_ECHECKSUM &&
                rc != FT_EVERSION) || strncmp(err, NAME ": ", 10) != 0) {
        abort(); /* a refusal names the file */
    }
    free(buf);
    return 0;
}

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
