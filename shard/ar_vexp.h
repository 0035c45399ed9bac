/*
 * ar_vexp.h - ar_rules.h's ft_ar_term eight at a time, for the CPU step's
 * whole-row normalisation (ar_step.c): the same operations in the same
 * order on each element, so the same bits as the scalar function (and as
 * the GPU's).  GCC vector extensions: eight floats, which a plain x86-64
 * build runs as pairs of SSE2 operations and an AVX2 build as one; the
 * one conversion (a float to a double) is the scalar code's, which SSE2
 * has (the rounding of q to an integer is an add).  ar_step_test
 * compares it with ft_ar_term.
 */
#ifndef FT_AR_VEXP_H
#define FT_AR_VEXP_H

#include <stdint.h>
#include <string.h>

#include "flashtrie/internal/ar_rules.h"

/* Vectors passed by value: GCC notes that their ABI differs with and
 * without AVX; every function here is inlined, so nothing crosses it. */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wpsabi"
#elif defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

typedef float ft_v8f __attribute__((vector_size(32)));
typedef int32_t ft_v8i __attribute__((vector_size(32)));
typedef uint32_t ft_v8u __attribute__((vector_size(32)));
typedef double ft_v4d __attribute__((vector_size(32)));
typedef float ft_v4f __attribute__((vector_size(16)));

static inline __attribute__((always_inline)) ft_v8f ft_v8f_of(ft_v8i u)
{
    ft_v8f f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline __attribute__((always_inline)) ft_v8i ft_v8i_of(ft_v8f f)
{
    ft_v8i u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* ft_v8f_fma is fmaf of each element: one vfmadd where the caller is
 * compiled for FMA (ar_step.c's AVX2 + FMA clone), else fmaf each (the
 * same bits: a fused multiply-add has one rounding). */
static inline __attribute__((always_inline)) ft_v8f ft_v8f_fma(ft_v8f a,
                                                               ft_v8f b,
                                                               ft_v8f c)
{
    ft_v8f r;
    for (int i = 0; i < 8; i++)
        r[i] = __builtin_fmaf(a[i], b[i], c[i]);
    return r;
}

/* ft_ar_expf8 is ft_ar_expf of each element of d (d <= 0 or NaN). */
static inline __attribute__((always_inline)) ft_v8f ft_ar_expf8(ft_v8f d)
{
    const ft_v8f one = {1, 1, 1, 1, 1, 1, 1, 1};
    ft_v8i nan = d != d, low = d < -86.0f;
    /* lanes that return d or 0 compute on 0 (no overflow, no NaN) */
    ft_v8f x = ft_v8f_of(ft_v8i_of(d) & ~(nan | low));
    ft_v8f t = ft_v8f_fma(x, one * 1.44269504f, one * 12582912.0f);
    ft_v8f nf = t - 12582912.0f;
    ft_v8f f = ft_v8f_fma(nf, one * -0.693359375f, x);
    f = ft_v8f_fma(nf, one * 2.12194440e-4f, f);
    ft_v8f f2 = f * f, f4 = f2 * f2;
    ft_v8f b0 = 1.0f + f;
    ft_v8f b1 = ft_v8f_fma(one * 0.166666667f, f, one * 0.5f);
    ft_v8f b2 = ft_v8f_fma(one * 0.00833333333f, f, one * 0.0416666667f);
    ft_v8f b3 = ft_v8f_fma(one * 0.000198412698f, f, one * 0.00138888889f);
    ft_v8f c0 = ft_v8f_fma(b1, f2, b0);
    ft_v8f c1 = ft_v8f_fma(b3, f2, b2);
    ft_v8f p = ft_v8f_fma(c1, f4, c0);
    /* p 2^n by adding t's bits shifted left by 23 to p's (ft_ar_expf) */
    ft_v8u pu, tu;
    memcpy(&pu, &p, sizeof pu);
    memcpy(&tu, &t, sizeof tu);
    pu += tu << 23;
    ft_v8f res;
    memcpy(&res, &pu, sizeof res);
    ft_v8i keep = ~(nan | low);
    return ft_v8f_of((ft_v8i_of(res) & keep) | (ft_v8i_of(d) & nan));
}

/* ft_ar_terms8 is ft_ar_term(x[i], mx) of each element, as two vectors
 * of four doubles (elements 0-3, then 4-7). */
static inline __attribute__((always_inline)) void
ft_ar_terms8(ft_v8f x, float mx, ft_v4d *lo, ft_v4d *hi)
{
    ft_v8f e = ft_ar_expf8(x - mx);
    ft_v4f a = {e[0], e[1], e[2], e[3]}, b = {e[4], e[5], e[6], e[7]};
    *lo = __builtin_convertvector(a, ft_v4d);
    *hi = __builtin_convertvector(b, ft_v4d);
}

#endif /* FT_AR_VEXP_H */
