/*
 * ar_vexp.h - ar_rules.h's ft_ar_exp four at a time, for the CPU step's
 * whole-row normalisation (ar_step.c): the same operations in the same
 * order on each element, so the same bits as the scalar function (and as
 * the GPU's).  GCC vector extensions: four doubles, which a plain x86-64
 * build runs as pairs of SSE2 operations and an AVX2 build as one.  The
 * two conversions of the scalar code (q - 1/2 truncated to an integer, and
 * 2^n built from n) are done without int64 conversions, which SSE2 and
 * AVX2 lack: truncation of y <= 0 is ceil(y), the integer nearest y plus
 * one where that lies below y; 2^n's bits come from n + 1023 placed in a
 * mantissa by adding 2^52.  ar_step_test compares it with ft_ar_exp.
 */
#ifndef FT_AR_VEXP_H
#define FT_AR_VEXP_H

#include <stdint.h>
#include <string.h>

#include "flashtrie/internal/ar_rules.h"

/* Four doubles passed by value: GCC notes that their ABI differs with and
 * without AVX; every function here is inlined, so nothing crosses it. */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wpsabi"
#elif defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

typedef double ft_v4d __attribute__((vector_size(32)));
typedef int64_t ft_v4l __attribute__((vector_size(32)));

static inline __attribute__((always_inline)) ft_v4d ft_v4d_of(ft_v4l u)
{
    ft_v4d d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static inline __attribute__((always_inline)) ft_v4l ft_v4l_of(ft_v4d d)
{
    ft_v4l u;
    memcpy(&u, &d, sizeof u);
    return u;
}

/* ft_ar_exp4 is ft_ar_exp of each element of d (d <= 0 or NaN). */
static inline __attribute__((always_inline)) ft_v4d ft_ar_exp4(ft_v4d d)
{
    const ft_v4d zero = {0.0, 0.0, 0.0, 0.0};
    ft_v4l nan = d != d, low = d < -708.0;
    /* lanes that return d or 0 compute on 0 (no overflow, no NaN) */
    ft_v4d x = ft_v4d_of(ft_v4l_of(d) & ~(nan | low));
    ft_v4d q = x * 1.4426950408889634;
    ft_v4d y = q - 0.5;
    /* y in (-1023, -1/2]: r the nearest integer, nf = ceil(y) = trunc(y) */
    const double big = 6755399441055744.0; /* 2^52 + 2^51 */
    ft_v4d r = (y + big) - big;
    ft_v4d nf = r + ft_v4d_of((r < y) & ft_v4l_of(zero + 1.0));
    ft_v4d f = x - nf * 6.93147180369123816490e-01;
    f = f - nf * 1.90821492927058770002e-10;
    ft_v4d f2 = f * f, f4 = f2 * f2, f8 = f4 * f4;
    ft_v4d b0 = 1.0 + f;
    ft_v4d b1 = 0.5 + (1.0 / 6.0) * f;
    ft_v4d b2 = 1.0 / 24.0 + (1.0 / 120.0) * f;
    ft_v4d b3 = 1.0 / 720.0 + (1.0 / 5040.0) * f;
    ft_v4d b4 = 1.0 / 40320.0 + (1.0 / 362880.0) * f;
    ft_v4d b5 = 1.0 / 3628800.0 + (1.0 / 39916800.0) * f;
    ft_v4d b6 = 1.0 / 479001600.0 + (1.0 / 6227020800.0) * f;
    ft_v4d c0 = b0 + b1 * f2;
    ft_v4d c1 = b2 + b3 * f2;
    ft_v4d c2 = b4 + b5 * f2;
    ft_v4d d0 = c0 + c1 * f4;
    ft_v4d d1 = c2 + b6 * f4;
    ft_v4d p = d0 + d1 * f8;
    /* 2^n: n + 1023 in 1..1023, exact; + 2^52 puts it in the low bits */
    ft_v4l k = ft_v4l_of((nf + 1023.0) + 4503599627370496.0) -
               ft_v4l_of(zero + 4503599627370496.0);
    ft_v4d res = p * ft_v4d_of(k << 52);
    ft_v4l keep = ~(nan | low);
    return ft_v4d_of((ft_v4l_of(res) & keep) | (ft_v4l_of(d) & nan));
}

#endif /* FT_AR_VEXP_H */
