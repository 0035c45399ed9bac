/*
 * fuzz_keys.c - a keys file through the builder, then the index it built
 * opened and walked.  The first byte of the input picks the build, the
 * rest is the file:
 *
 *   bit 0: .ftk (binary) or text        bit 1: --skip-invalid or not
 *   bit 2: a tiny memory budget (sorted runs spill to files) or 1 MiB
 *   bit 3: two threads or one
 *
 * so one build per input covers what two fixed builds did before, and
 * libFuzzer learns which bits reach what.  A build either succeeds or
 * fails with FT_EPARSE / FT_ELIMIT and a message naming the file (skip
 * mode never fails on content): never a crash.  A built index must hold
 * exactly stats.keys keys, and every key walked looks up to the value the
 * walk gave.
 *
 * The files live in a private folder on /dev/shm where there is one
 * (tmpfs: the builder's fsync and rename cost nothing there), else /tmp.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flashtrie.h"
#include "fuzz.h"

static char g_dir[64];

static void remove_dir(void) { rmdir(g_dir); }

static void setup(void)
{
    snprintf(g_dir, sizeof g_dir, "/dev/shm/ft_fuzz_keys_XXXXXX");
    if (mkdtemp(g_dir) == NULL) {
        snprintf(g_dir, sizeof g_dir, "/tmp/ft_fuzz_keys_XXXXXX");
        if (mkdtemp(g_dir) == NULL)
            abort();
    }
    atexit(remove_dir);
    ft_log_set_level(FT_LOG_ERROR);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (g_dir[0] == 0)
        setup();
    if (size == 0)
        return 0;
    unsigned mode = data[0];
    int binary = mode & 1, skip = (mode >> 1) & 1, spill = (mode >> 2) & 1;
    char in[96], out[96];
    snprintf(in, sizeof in, "%s/in%s", g_dir, binary ? ".ftk" : ".txt");
    snprintf(out, sizeof out, "%s/out.idx", g_dir);
    FILE *f = fopen(in, "wb");
    if (f == NULL)
        abort();
    if (fwrite(data + 1, 1, size - 1, f) != size - 1 || fclose(f) != 0)
        abort();
    ft_build_opts o;
    ft_build_opts_init(&o);
    o.input = in;
    o.output = out;
    o.skip_invalid = skip;
    o.threads = (mode >> 3) & 1 ? 2 : 1;
    /* A tiny budget (no room for any chunk) spills every chunk as a run;
     * 1 MiB keeps any input of ops/fuzz.sh's -max_len in memory without
     * the default budget's 256 MiB read block (or 16 MiB's 2 MiB one),
     * which would cost most of each run's time under ASan. */
    o.max_memory = spill ? 1 << 16 : 1 << 20;
    o.max_key_len = 8;
    char err[512] = "";
    ft_build_stats st;
    ft_build_stats_init(&st);
    int rc = ft_build(&st, &o, err, sizeof err);
    if (rc == FT_EPARSE && (skip || strstr(err, in) == NULL))
        abort(); /* skip mode never fails on content; errors name the file */
    if (rc != FT_OK && rc != FT_EPARSE)
        abort();
    if (rc == FT_OK) {
        ft_index *idx;
        if (ft_index_open(&idx, out, 0, err, sizeof err) != FT_OK)
            abort();
        fuzz_walk w = {idx, NULL, 0, 0};
        uint64_t seen = 0;
        if (ft_index_prefix(&seen, idx, NULL, 0, 0, fuzz_check_key, &w) !=
                FT_OK ||
            w.bad || w.n != st.keys || ft_index_keys(idx) != st.keys)
            abort();
        ft_index_close(idx);
        unlink(out);
    }
    unlink(in);
    return 0;
}
