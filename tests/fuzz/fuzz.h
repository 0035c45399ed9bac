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
#endif
