/*
 * fuzz_keys.c - a keys file (text or .ftk, chosen by the first byte) through
 * the builder with and without --skip-invalid and a tiny memory budget (so
 * sorted runs spill), then the index it built is opened and walked.  A
 * build either succeeds or fails with FT_EPARSE / FT_ELIMIT and a message
 * naming the file: never a crash.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flashtrie.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    int binary = data[0] & 1;
    char in[64], out[64];
    snprintf(in, sizeof in, "/tmp/ft_fuzz_keys_%d%s", (int)getpid(),
             binary ? ".ftk" : ".txt");
    snprintf(out, sizeof out, "/tmp/ft_fuzz_keys_%d.idx", (int)getpid());
    FILE *f = fopen(in, "wb");
    if (f == NULL)
        abort();
    fwrite(data + 1, 1, size - 1, f);
    fclose(f);
    for (int skip = 0; skip < 2; skip++) {
        ft_build_opts o;
        ft_build_opts_init(&o);
        o.input = in;
        o.output = out;
        o.skip_invalid = skip;
        o.threads = 2;
        /* A tiny budget spills runs; the other one keeps everything in
         * memory without the default budget's 256 MiB read block, which
         * would cost most of each run's time. */
        o.max_memory = skip ? 1 << 16 : 16 << 20;
        o.max_key_len = 8;
        char err[512] = "";
        ft_build_stats st;
        ft_build_stats_init(&st);
        int rc = ft_build(&st, &o, err, sizeof err);
        if (rc == FT_EPARSE && (skip || strstr(err, in) == NULL))
            abort(); /* skip mode never fails on content; errors name the file */
        if (rc != FT_OK && rc != FT_EPARSE)
            abort();
        if (rc != FT_OK)
            continue;
        ft_index *idx;
        if (ft_index_open(&idx, out, 0, err, sizeof err) != FT_OK)
            abort();
        uint64_t seen = 0, n = 0;
        if (ft_index_prefix(&seen, idx, NULL, 0, 0, fuzz_count_key, &n) != FT_OK ||
            n != st.keys)
            abort();
        ft_index_close(idx);
        unlink(out);
    }
    unlink(in);
    return 0;
}
