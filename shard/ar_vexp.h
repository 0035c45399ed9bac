/*
 * ar_vexp.h - ar_rules.h's exps eight at a time, for the CPU step's
 * normalisations (ar_step.c): the same operations in the same order on
 * each element, so the same bits as the scalar functions (and as the
 * GPU's).  GCC vector extensions: eight floats, which a plain x86-64
 * build runs as pairs of SSE2 operations and an AVX2 build as one; the
 * one conversion (a float to a double) is the scalar code's, which SSE2
 * has (the rounding of q to an integer is an add).  ar_step_test
 * compares them with the scalar functions.
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

/* ft_ar_expr8 is ft_ar_expr of each element of d (-86 <= d <= 0). */
static inline __attribute__((always_inline)) ft_v8f ft_ar_expr8(ft_v8f d)
{
    const ft_v8f one = {1, 1, 1, 1, 1, 1, 1, 1};
    ft_v8f t = ft_v8f_fma(d, one * 1.44269504f, one * 12582912.0f);
    ft_v8f nf = t - 12582912.0f;
    ft_v8f f = ft_v8f_fma(nf, one * -0.693359375f, d);
    f = ft_v8f_fma(nf, one * 2.12194440e-4f, f);
    ft_v8f p = ft_v8f_fma(one * 0.00138368085f, f, one * 0.00837484561f);
    p = ft_v8f_fma(p, f, one * 0.0416682288f);
    p = ft_v8f_fma(p, f, one * 0.166664198f);
    p = ft_v8f_fma(p, f, one * 0.499999911f);
    p = ft_v8f_fma(p, f, one);
    p = ft_v8f_fma(p, f, one);
    ft_v8u pu, tu;
    memcpy(&pu, &p, sizeof pu);
    memcpy(&tu, &t, sizeof tu);
    pu += tu << 23;
    ft_v8f res;
    memcpy(&res, &pu, sizeof res);
    return res;
}

/* ft_ar_row_terms8 is ft_ar_row_term(x[i], m) of each element. */
static inline __attribute__((always_inline)) ft_v8f ft_ar_row_terms8(ft_v8f x,
                                                                     float m)
{
    const ft_v8f lo = {-86, -86, -86, -86, -86, -86, -86, -86};
    ft_v8f d = x - m;
    ft_v8i keep = d > lo;
    return ft_ar_expr8(ft_v8f_of((ft_v8i_of(d) & keep) | (ft_v8i_of(lo) & ~keep)));
}

/* ft_ar_chunk_sums8 is ft_ar_chunk_sum of each of 8 chunks e[0..7] (8
 * terms each), as one vector: the same pairs, level by level. */
static inline __attribute__((always_inline)) ft_v8f
ft_ar_chunk_sums8(const ft_v8f *e)
{
#define FT_EV(a, b) __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14)
#define FT_OD(a, b) __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15)
    ft_v8f p01 = FT_EV(e[0], e[1]) + FT_OD(e[0], e[1]);
    ft_v8f p23 = FT_EV(e[2], e[3]) + FT_OD(e[2], e[3]);
    ft_v8f p45 = FT_EV(e[4], e[5]) + FT_OD(e[4], e[5]);
    ft_v8f p67 = FT_EV(e[6], e[7]) + FT_OD(e[6], e[7]);
    ft_v8f q03 = FT_EV(p01, p23) + FT_OD(p01, p23);
    ft_v8f q47 = FT_EV(p45, p67) + FT_OD(p45, p67);
    return FT_EV(q03, q47) + FT_OD(q03, q47);
#undef FT_EV
#undef FT_OD
}

#endif /* FT_AR_VEXP_H */
