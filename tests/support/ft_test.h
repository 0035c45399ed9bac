/*
 * ft_test.h - a tiny test framework: every check names the file and line
 * and the exact values that differed; a failed check ends the test with
 * exit status 1.  GPU tests exit FT_TEST_SKIP (77) when no GPU is found,
 * which CTest reports as skipped.  The functions are compiled once, in
 * ft_test_support (tests/support/ft_test.c).
 */
#ifndef FT_TEST_H
#define FT_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashtrie.h"

#define FT_TEST_SKIP 77

#define FT_CHECK(cond)                                                        \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__,  \
                    #cond);                                                   \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

#define FT_CHECK_EQ_U64(a, b)                                                 \
    do {                                                                      \
        uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b);                      \
        if (a_ != b_) {                                                       \
            fprintf(stderr, "%s:%d: %s == %s failed: %" PRIu64 " != %" PRIu64 \
                    "\n", __FILE__, __LINE__, #a, #b, a_, b_);                \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

#define FT_CHECK_STR(a, b)                                                    \
    do {                                                                      \
        const char *a_ = (a), *b_ = (b);                                      \
        if (strcmp(a_, b_) != 0) {                                            \
            fprintf(stderr, "%s:%d: %s == %s failed:\n  got  '%s'\n  want '%s'\n", \
                    __FILE__, __LINE__, #a, #b, a_, b_);                      \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

/* FT_PASS asserts that expr returns FT_OK. */
#define FT_PASS(expr)                                                         \
    do {                                                                      \
        int rc_ = (expr);                                                     \
        if (rc_ != FT_OK) {                                                   \
            fprintf(stderr, "%s:%d: %s returned %d (%s)\n", __FILE__,         \
                    __LINE__, #expr, rc_, ft_strerror(rc_));                  \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

/* FT_FAIL asserts that expr returns exactly the error code want. */
#define FT_FAIL(expr, want)                                                   \
    do {                                                                      \
        int rc_ = (expr);                                                     \
        if (rc_ != (want)) {                                                  \
            fprintf(stderr, "%s:%d: %s returned %d (%s), want %d (%s)\n",     \
                    __FILE__, __LINE__, #expr, rc_, ft_strerror(rc_), (want), \
                    ft_strerror(want));                                       \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

/* A small deterministic PRNG (splitmix64) for reproducible random cases. */
uint64_t ft_test_rand(uint64_t *s);

/* ft_test_toks_cmp orders token strings lexicographically on u32, a prefix
 * before its extensions (the key order of the builder). */
int ft_test_toks_cmp(const uint32_t *a, uint32_t na,
                     const uint32_t *b, uint32_t nb);

/* ft_test_now returns monotonic seconds, for timings tests print. */
double ft_test_now(void);

/* ft_test_tmpdir makes a fresh folder $TMPDIR/NAME.XXXXXX (TMPDIR unset:
 * /tmp) into dir (len bytes; the test fails when it cannot) and removes
 * it, with everything in it, when the test exits (up to 8 folders). */
void ft_test_tmpdir(char *dir, size_t len, const char *name);

#endif
