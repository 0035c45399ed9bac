/*
 * ar_rules.h - the rules of one autoregressive step (include/flashtrie.h,
 * "Autoregressive steps"), written once for the CPU step (shard/ar_step.c)
 * and the CUDA step (kernels/ft_ar_step.cu), like nav.h and rules.h.
 *
 * Order.  A beam candidate is the child of the beam of rank r reached by
 * entry j of its row with log-prob rho.  docs/specification.md section 4 orders the next
 * beam by (sigma desc, r asc, k asc), k the entry's place in its row
 * stable-sorted by logp descending; within one row that is (rho desc,
 * j asc).  So a candidate's key is the pair
 *
 *     (ft_sigma_key(sigma), tail),  tail = r << 52 | ft_sigma_key(rho) << 20 | j
 *
 * compared lexicographically, ascending; a completed key's is
 * (ft_score_key(score), tail) (the specification's order (t, r, k) within one step).
 * Rows are at most FT_AR_MAX_WIDTH entries wide and ranks below 4096, so
 * the tail packs without loss, and no two candidates of a step share it.
 * When every beam reads the same row (a NAR grid's row t), the step makes
 * exactly the specification's choices.
 *
 * Normalisation.  A log-softmax over a row (the whole row, or only the
 * entries that label a child of the beam's node) must give the same bits
 * on the host and on the device, so it uses its own exps (binary32, one
 * per entry) and log (binary64, one per row), with explicitly rounded
 * operations (FT_FADD / FT_FMUL / FT_FFMA / FT_DADD / FT_DMUL / FT_DDIV,
 * no contraction) and fixed summation shapes.
 *
 * Over the allowed entries: L = FT_AR_LANES (256) lanes in binary64, lane
 * l sums the terms ft_ar_term(x, mx) of the allowed entries j = l, l + L,
 * ... in ascending j, then the lanes are added pairwise, neighbours first
 * (p[l] += p[l + h] for every l that is a multiple of 2h, h = 1, 2, 4,
 * ..., L/2: ft_ar_lanes_sum); mx the allowed entries' maximum.
 *
 * Over the whole row (read once, in parts that need not wait for each
 * other): the row is cut into parts of FT_AR_PART (8,192) entries, part
 * q holding entries 8192 q .. 8192 q + 8191.  A part has its own maximum
 * m_q (NaN if it holds a NaN) and its own sum s_q of ft_ar_row_term(x,
 * m_q) = exp(max(x - m_q, -86)) (ft_ar_expr, within 1 ulp) over its
 * entries: the part's chunks of 8 neighbouring entries (chunk c: entries
 * 8c .. 8c + 7 of the part) are each summed pairwise in binary32
 * ((e0 + e1) + (e2 + e3)) + ((e4 + e5) + (e6 + e7)) (ft_ar_chunk_sum;
 * an entry past the row's end is 0), chunk c widened into lane c % 256 of
 * FT_AR_PART_LANES binary64 lanes in ascending c, then the lanes' pairwise
 * tree (ft_ar_lanes_sum).  The row (ft_ar_parts_lse): a part with a NaN or
 * a +inf makes the lse NaN (nothing is taken); else M = max m_q, no
 * maximum (M = -inf) when every entry is -inf; else the total is the
 * pairwise tree over the parts (to a power of two) of s_q *
 * ft_ar_row_term(m_q, M) in binary64 (0 for a part whose entries are all
 * -inf).  On the device a part is one CTA of 256 threads, thread t the
 * chunks t, t + 256, t + 512, t + 768: four 16-byte loads of a bf16 row.
 *
 *   lse = M + log(total),  rho = (float)((double)x - lse)
 */
#ifndef FT_AR_RULES_H
#define FT_AR_RULES_H

#include <math.h>
#include <stdint.h>

#include "rules.h"

#if defined(__CUDA_ARCH__)
#define FT_DADD(a, b) __dadd_rn((a), (b))
#define FT_DSUB(a, b) __dsub_rn((a), (b))
#define FT_DDIV(a, b) __ddiv_rn((a), (b))
#define FT_D2F(a) __double2float_rn(a)
#define FT_FSUB(a, b) __fsub_rn((a), (b))
#define FT_FMUL(a, b) __fmul_rn((a), (b))
#define FT_FFMA(a, b, c) __fmaf_rn((a), (b), (c))
#else
#define FT_DADD(a, b) ((double)((a) + (b)))
#define FT_DSUB(a, b) ((double)((a) - (b)))
#define FT_DDIV(a, b) ((double)((a) / (b)))
#define FT_D2F(a) ((float)(a))
#define FT_FSUB(a, b) ((float)((a) - (b)))
#define FT_FMUL(a, b) ((float)((a) * (b)))
#define FT_FFMA(a, b, c) fmaf((a), (b), (c))
#endif

/* The widest row a step reads (the tail's j field) and the summation
 * lanes of a normalisation. */
#define FT_AR_MAX_WIDTH (1u << 20)
#define FT_AR_LANES 256u
#define FT_AR_PART 8192u
#define FT_AR_PART_LANES 256u
#define FT_AR_MAX_PARTS (FT_AR_MAX_WIDTH / FT_AR_PART)

/* Input forms, dtypes and normalisations: the values of
 * include/flashtrie.h's FT_AR_IN_* and FT_AR_NORM_* (ar_step.c asserts it). */
#define FT_ARR_SPARSE 0
#define FT_ARR_DENSE 1
#define FT_ARR_F32 0
#define FT_ARR_F16 1
#define FT_ARR_BF16 2
#define FT_ARR_NORM_NONE 0
#define FT_ARR_NORM_FULL 1
#define FT_ARR_NORM_ALLOWED 2

/* ft_ar_tail packs (r, rho, j). */
FT_HD uint64_t ft_ar_tail(uint32_t r, float rho, uint32_t j)
{
    return ((uint64_t)r << 52) | ((uint64_t)ft_sigma_key(rho) << 20) | j;
}

FT_HD uint32_t ft_ar_tail_rank(uint64_t tail) { return (uint32_t)(tail >> 52); }
FT_HD uint32_t ft_ar_tail_entry(uint64_t tail)
{
    return (uint32_t)tail & (FT_AR_MAX_WIDTH - 1u);
}

/* ft_ar_before says whether key (a1, a2) comes before (b1, b2). */
FT_HD int ft_ar_before(uint64_t a1, uint64_t a2, uint64_t b1, uint64_t b2)
{
    return a1 < b1 || (a1 == b1 && a2 < b2);
}

/* ft_bf16_to_f32 and ft_f16_to_f32 widen exactly (integer code only). */
FT_HD float ft_bf16_to_f32(uint16_t h) { return ft_f32_of_bits((uint32_t)h << 16); }

FT_HD float ft_f16_to_f32(uint16_t h)
{
    /* without branches (the GPU widens the entries of a row side by
     * side): a subnormal m 2^-24 is 2^-14 (1 + m/1024) - 2^-14, exactly */
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    uint32_t nrm = sign | ((e + 112u) << 23) | (m << 13);
    uint32_t inf = sign | 0x7f800000u | (m << 13); /* inf, NaN */
    float sub = FT_FSUB(ft_f32_of_bits(0x38800000u | (m << 13)), 6.103515625e-05f);
    uint32_t subu = sign | ft_bits_of_f32(sub); /* +-0 too */
    return ft_f32_of_bits(e == 0x1fu ? inf : e != 0 ? nrm : subu);
}

/* ft_ar_load reads entry j of a dense row of the given dtype. */
FT_HD float ft_ar_load(const void *row, int dtype, uint64_t j)
{
    if (dtype == FT_ARR_F32)
        return ((const float *)row)[j];
    uint16_t h = ((const uint16_t *)row)[j];
    return dtype == FT_ARR_BF16 ? ft_bf16_to_f32(h) : ft_f16_to_f32(h);
}

FT_HD double ft_d_of_bits(uint64_t u)
{
    union {
        uint64_t u;
        double d;
    } c;
    c.u = u;
    return c.d;
}

FT_HD uint64_t ft_bits_of_d(double d)
{
    union {
        double d;
        uint64_t u;
    } c;
    c.d = d;
    return c.u;
}


/* ft_ar_expf is exp(d) for d <= 0 in binary32 (NaN passes through),
 * within 2 ulp of the true value, the same bits everywhere: d = n ln2 + f
 * (ln2 split in two, Cody and Waite: n ln2's high part is exact),
 * |f| <= ln2 / 2 + a little, the degree-7 Taylor polynomial of f (its
 * remainder is below 2^-27) by Estrin's scheme with fused multiply-adds
 * (one rounding each, on every IEEE machine: fmaf on the host, __fmaf_rn
 * on the GPU; a chain of 4 dependent operations), scaled by 2^n.  Below
 * -86 it is 0: such a term is under 2^-124 of the largest term of its
 * row, exp(0) = 1, which a binary64 sum of at most 2^20 terms cannot see,
 * and 2^n stays a normal number.  No branch: NaN and d < -86 compute on 0
 * and are chosen at the end (the GPU runs a lane's exps side by side).
 * binary32 on purpose: a whole-row normalisation computes one exp per
 * entry (2^28 of them for 1,024 beams of 262,144 columns), and binary32
 * runs at twice the rate of binary64 on the GPU (far more on most) with a
 * quarter of the registers; the terms are added in binary64. */
FT_HD float ft_ar_expf(float d)
{
    int nan = d != d, low = d < -86.0f;
    float z = (nan | low) ? 0.0f : d;
    /* z / ln 2 + 1.5 * 2^23, rounded once, has z / ln 2 rounded to an
     * integer n (to nearest, ties to even: |z / ln 2 - n| <= 1/2 + 2^-23,
     * -124 <= n <= 0) in its low bits: no conversion; taking 1.5 * 2^23
     * off again gives n exactly */
    float t = FT_FFMA(z, 1.44269504f, 12582912.0f);
    float nf = FT_FSUB(t, 12582912.0f);
    float f = FT_FFMA(nf, -0.693359375f, z);
    f = FT_FFMA(nf, 2.12194440e-4f, f);
    float f2 = FT_FMUL(f, f), f4 = FT_FMUL(f2, f2);
    /* 1/k! as a_k + a_(k+1) f, k = 0, 2, 4, 6 */
    float b0 = FT_FADD(1.0f, f);
    float b1 = FT_FFMA(0.166666667f, f, 0.5f);
    float b2 = FT_FFMA(0.00833333333f, f, 0.0416666667f);
    float b3 = FT_FFMA(0.000198412698f, f, 0.00138888889f);
    float c0 = FT_FFMA(b1, f2, b0);
    float c1 = FT_FFMA(b3, f2, b2);
    float p = FT_FFMA(c1, f4, c0);
    /* p 2^n: t's bits are 0x4B400000 + n, so shifted left by 23 they are
     * n << 23 (mod 2^32), which added to p's bits (p in [0.7, 1.42])
     * scales it by 2^n; the result is a normal number (n >= -124), the
     * value a multiply by 2^n rounds to, with one integer multiply-add */
    float r = ft_f32_of_bits(ft_bits_of_f32(p) + (ft_bits_of_f32(t) << 23));
    return nan ? d : low ? 0.0f : r;
}

/* ft_ar_term is one entry's term of a normalisation: exp(x - mx), the
 * difference and the exp in binary32, widened for the binary64 sum. */
FT_HD double ft_ar_term(float x, float mx)
{
    return (double)ft_ar_expf(FT_FSUB(x, mx));
}

/* ft_ar_expr is exp(d) for -86 <= d <= 0 in binary32, within 1 ulp of the
 * true value (checked on every 31st binary32 of [-86, 0] by ar_step_test):
 * the reduction of ft_ar_expf (n = d / ln 2 rounded to an integer by
 * adding 1.5 * 2^23, f = d - n ln 2 with ln 2 in two parts), then a
 * degree-6 polynomial for exp(f) on |f| <= 0.3467, minimax in relative
 * error (2^-29; coefficients by Remez, rounded to binary32), by Horner's
 * scheme with fused multiply-adds, scaled by 2^n on its bits.  The whole
 * row's exp: 13 operations an entry where ft_ar_expf takes about 20 (its
 * Estrin scheme and its NaN and underflow selects; here the caller clamps
 * d at -86 and a NaN never reaches it). */
FT_HD float ft_ar_expr(float d)
{
    float t = FT_FFMA(d, 1.44269504f, 12582912.0f);
    float nf = FT_FSUB(t, 12582912.0f);
    float f = FT_FFMA(nf, -0.693359375f, d);
    f = FT_FFMA(nf, 2.12194440e-4f, f);
    float p = FT_FFMA(0.00138368085f, f, 0.00837484561f);
    p = FT_FFMA(p, f, 0.0416682288f);
    p = FT_FFMA(p, f, 0.166664198f);
    p = FT_FFMA(p, f, 0.499999911f);
    p = FT_FFMA(p, f, 1.0f);
    p = FT_FFMA(p, f, 1.0f);
    return ft_f32_of_bits(ft_bits_of_f32(p) + (ft_bits_of_f32(t) << 23));
}

/* ft_ar_row_term is one entry's term of a whole-row normalisation against
 * its part's maximum m (x <= m, both not NaN): exp(max(x - m, -86)).  An
 * entry of -inf adds exp(-86) (about 4.5e-38): nothing a sum holding its
 * part's exp(0) = 1 can see. */
FT_HD float ft_ar_row_term(float x, float m)
{
    float d = FT_FSUB(x, m);
    return ft_ar_expr(d > -86.0f ? d : -86.0f);
}

/* ft_ar_chunk_sum adds a chunk's 8 terms pairwise in binary32. */
FT_HD float ft_ar_chunk_sum(const float *e)
{
    return FT_FADD(FT_FADD(FT_FADD(e[0], e[1]), FT_FADD(e[2], e[3])),
                   FT_FADD(FT_FADD(e[4], e[5]), FT_FADD(e[6], e[7])));
}

/* ft_ar_nan_max is the larger of a and b, NaN if either is NaN. */
FT_HD float ft_ar_nan_max(float a, float b)
{
    if (a != a || b != b)
        return a + b;
    return a > b ? a : b;
}

/* ft_ar_part_spoils says whether a part's maximum m (ft_ar_nan_max over
 * its entries) makes the row's lse NaN: the part holds a NaN or a +inf. */
FT_HD int ft_ar_part_spoils(float m)
{
    return m != m || m > 3.40282346638528859812e+38f;
}

/* ft_ar_parts is the number of parts of a row of width entries. */
FT_HD uint32_t ft_ar_parts(uint32_t width)
{
    return (width + FT_AR_PART - 1) / FT_AR_PART;
}

/* ft_ar_log is log(s) for s >= 1 (NaN and +inf pass through): s = 2^e m,
 * m in [sqrt(1/2), sqrt(2)), log m = 2 atanh((m - 1) / (m + 1)). */
FT_HD double ft_ar_log(double s)
{
    if (s != s || s > 1.7976931348623157e308)
        return s;
    uint64_t b = ft_bits_of_d(s);
    int64_t e = (int64_t)((b >> 52) & 0x7ffu) - 1023;
    double m = ft_d_of_bits((b & 0x000fffffffffffffull) | 0x3ff0000000000000ull);
    if (m > 1.4142135623730951) {
        m = FT_DMUL(m, 0.5);
        e++;
    }
    double f = FT_DDIV(FT_DSUB(m, 1.0), FT_DADD(m, 1.0));
    double f2 = FT_DMUL(f, f);
    double p = 1.0 / 25.0;
    for (int i = 23; i >= 1; i -= 2)
        p = FT_DADD(FT_DMUL(p, f2), FT_DDIV(1.0, (double)i));
    double lm = FT_DMUL(FT_DMUL(2.0, f), p);
    return FT_DADD(FT_DMUL((double)e, 6.93147180369123816490e-01),
                   FT_DADD(lm, FT_DMUL((double)e, 1.90821492927058770002e-10)));
}

/* ft_ar_lanes_sum adds n (a power of two) lanes' partial sums in place,
 * pairwise with neighbours first (the device does the same in registers,
 * shuffles and shared memory), and returns the total.  Lanes past a row's
 * end hold +0, which adds nothing: a caller may pass the lanes up to the
 * row's width rounded up to a power of two instead of all of them (the
 * same bits). */
FT_HD double ft_ar_lanes_sum(double *p, uint32_t n)
{
    for (uint32_t h = 1; h < n; h <<= 1)
        for (uint32_t l = 0; l + h < n; l += 2 * h)
            p[l] = FT_DADD(p[l], p[l + h]);
    return p[0];
}

/* ft_ar_lanes_used is the lanes of n that a row of width entries fills,
 * rounded up to a power of two (at least 1): ft_ar_lanes_sum over them is
 * its sum over all n. */
FT_HD uint32_t ft_ar_lanes_used(uint32_t width, uint32_t n)
{
    uint32_t u = 1;
    while (u < width && u < n)
        u <<= 1;
    return u;
}

/* ft_ar_norm applies a row's lse to one entry. */
FT_HD float ft_ar_norm(float x, double lse)
{
    return FT_D2F(FT_DSUB((double)x, lse));
}

/* ft_ar_takes says whether an entry of normalised log-prob rho may extend
 * a beam: rho > theta_tok and rho finite.  NaN fails every comparison, -inf
 * fails theta_tok (the least threshold is -inf), and +inf is refused here:
 * no log-prob is +inf, and one would make every later sigma of its beam
 * +inf (a NAR request refuses a non-finite logp at the door; a step, which
 * has no door, never takes one).  A row normalised over entries holding
 * +inf gets a NaN lse and takes nothing, as torch's log_softmax gives NaN
 * there. */
FT_HD int ft_ar_takes(float rho, float theta_tok)
{
    return rho > theta_tok && rho <= 3.40282346638528859812e+38f;
}

/* ft_ar_lse finishes a normalisation: the maximum and the lane total. */
FT_HD double ft_ar_lse(float mx, double total)
{
    return FT_DADD((double)mx, ft_ar_log(total));
}

/* ft_ar_parts_lse finishes a whole-row normalisation from its n parts'
 * maxima m and sums s (n at most FT_AR_MAX_PARTS): 0 when the row has no
 * maximum (every entry -inf), else 1 with *lse (NaN when a part holds a
 * NaN or a +inf).  z (FT_AR_MAX_PARTS doubles) is scratch. */
FT_HD int ft_ar_parts_lse(const float *m, const double *s, uint32_t n,
                          double *z, double *lse)
{
    float mx = -INFINITY;
    for (uint32_t q = 0; q < n; q++) {
        if (ft_ar_part_spoils(m[q])) {
            *lse = NAN;
            return 1;
        }
        if (m[q] > mx)
            mx = m[q];
    }
    if (!(mx > -INFINITY))
        return 0;
    uint32_t u = ft_ar_lanes_used(n, FT_AR_MAX_PARTS);
    for (uint32_t q = 0; q < u; q++)
        z[q] = q < n && m[q] > -INFINITY
                   ? FT_DMUL(s[q], (double)ft_ar_row_term(m[q], mx))
                   : 0.0;
    *lse = ft_ar_lse(mx, ft_ar_lanes_sum(z, u));
    return 1;
}

#endif /* FT_AR_RULES_H */
