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
#endif
