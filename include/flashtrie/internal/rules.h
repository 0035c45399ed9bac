/*
 * rules.h - docs/specification.md section 4's search rules, written once for
 * the CPU engine, the GPU engine's host side and the CUDA kernels (host+device,
 * like nav.h): the packed candidate keys and their order, the theta_sent cut,
 * the score, and the backtrace of a hit's tokens through the beam history.
 *
 * Keys.  A beam candidate (child u of the entry of rank r, reached through
 * proposal k at step t) is ordered by (sigma desc, r asc, k asc).  Packed
 * into one u64 that sorts ascending in that order:
 *
 *     ft_cand_key = sigma key (32) | r (16) | k (16)
 *
 * r is the entry's rank in the *global* beam (all shards together), so
 * keys of different shards compare as the specification's order does and no two
 * candidates of one step share a key: a step-0 candidate (r = 0) is
 * identified by k, which names one token and so one child of the root, and
 * a later entry lives in exactly one shard.  A terminal candidate is
 * ordered by (score desc, order asc) with order = (t, r, k) packed into 30
 * bits by ft_order; the pair (ft_score_key(score), order) is its key.
 *
 * Floating point: sigma is one binary32 addition per token (FT_FADD: the
 * round-to-nearest intrinsic on the device, a plain addition on the host,
 * where shard/ and router/ compile with -ffp-contract=off) and score one
 * binary64 multiplication (FT_DMUL).
 */
#ifndef FT_RULES_H
#define FT_RULES_H

#include <stdint.h>

#include "nav.h"

#if defined(__CUDA_ARCH__)
#define FT_FADD(a, b) __fadd_rn((a), (b))
#define FT_DMUL(a, b) __dmul_rn((a), (b))
#else
#define FT_FADD(a, b) ((float)((a) + (b)))
#define FT_DMUL(a, b) ((double)((a) * (b)))
#endif

/* Limits the packing relies on: ranks and proposal indexes below 4096
 * (12 bits in an order, 16 in a candidate key), positions below 64. */
#define FT_RULES_MAX_RANK 4096u
#define FT_RULES_MAX_K 4096u
#define FT_RULES_MAX_T 64u

/* ft_bits_of_f32 and ft_f32_of_bits: a binary32's bits and back. */
FT_HD uint32_t ft_bits_of_f32(float f)
{
    union {
        uint32_t u;
        float f;
    } c;
    c.f = f;
    return c.u;
}

FT_HD float ft_f32_of_bits(uint32_t u)
{
    union {
        uint32_t u;
        float f;
    } c;
    c.u = u;
    return c.f;
}

/* ft_f32_order maps a binary32 to a u32 that sorts ascending when it
 * does (-0 just below +0; a finite value's is never 0); ft_f32_of_order
 * inverts it. */
FT_HD uint32_t ft_f32_order(float f)
{
    uint32_t u = ft_bits_of_f32(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

FT_HD float ft_f32_of_order(uint32_t v)
{
    return ft_f32_of_bits((v & 0x80000000u) ? (v & 0x7fffffffu) : ~v);
}

/* ft_sigma_key maps a binary32 sigma to a u32 that sorts ascending when
 * sigma sorts descending (+0 and -0 map alike). */
FT_HD uint32_t ft_sigma_key(float sigma)
{
    return ~ft_f32_order(sigma + 0.0f); /* -0 becomes +0 */
}

/* ft_sigma_of_key inverts ft_sigma_key (a -0 comes back as +0, which adds
 * and multiplies the same). */
FT_HD float ft_sigma_of_key(uint32_t skey)
{
    return ft_f32_of_order(~skey);
}

/* ft_cand_key packs docs/specification.md section 4's beam order (sigma desc, r
 * asc, k asc) into one u64 that sorts ascending. */
FT_HD uint64_t ft_cand_key(float sigma, uint32_t r, uint32_t k)
{
    return ((uint64_t)ft_sigma_key(sigma) << 32) | ((uint64_t)r << 16) | k;
}

/* FT_KEY_NONE pads candidate lists: it sorts after every real key (a real
 * key's rank and k fields are below 4096). */
#define FT_KEY_NONE UINT64_MAX

FT_HD float ft_cand_sigma(uint64_t key)
{
    return ft_sigma_of_key((uint32_t)(key >> 32));
}

FT_HD uint32_t ft_cand_rank(uint64_t key)
{
    return (uint32_t)(key >> 16) & 0xffffu;
}

FT_HD uint32_t ft_cand_k(uint64_t key) { return (uint32_t)key & 0xffffu; }

/* ft_hist_entry is what the beam history keeps for an entry of the next
 * beam: its parent's rank and its proposal (the key's low 32 bits). */
FT_HD uint32_t ft_hist_entry(uint64_t key) { return (uint32_t)key; }

/* ft_score_key maps a binary64 score to a u64 ascending for descending
 * score. */
FT_HD uint64_t ft_score_key(double score)
{
    union {
        double d;
        uint64_t u;
    } c;
    c.d = score + 0.0;
    uint64_t u = c.u;
    u = (u & 0x8000000000000000ull) ? ~u : (u | 0x8000000000000000ull);
    return ~u;
}

/* ft_order packs a terminal candidate's order (t, r, k), t < 64 and
 * r, k < 4096, into 30 bits that compare as the tuple does. */
FT_HD uint32_t ft_order(uint32_t t, uint32_t r, uint32_t k)
{
    return (t << 24) | (r << 12) | k;
}

FT_HD uint32_t ft_order_t(uint32_t order) { return order >> 24; }
FT_HD uint32_t ft_order_r(uint32_t order) { return (order >> 12) & 0xfffu; }
FT_HD uint32_t ft_order_k(uint32_t order) { return order & 0xfffu; }

/* ft_hit_before says whether terminal candidate a comes before b in the
 * result order (score desc, order asc), given their score keys. */
FT_HD int ft_hit_before(uint64_t skey_a, uint32_t order_a, uint64_t skey_b,
                        uint32_t order_b)
{
    return skey_a < skey_b || (skey_a == skey_b && order_a < order_b);
}

/* ft_score is docs/specification.md section 4's score: one binary64
 * multiplication of the widened sigma by F[len] (computed on the host with
 * pow). */
FT_HD double ft_score(float sigma, double F)
{
    return FT_DMUL((double)sigma, F);
}

/* ft_kcut counts the proposals k (a prefix of the row, sorted by logp
 * descending) for which sigma + logp[k] > theta_sent.  Exact because
 * binary32 addition rounds monotonically: sigma + logp[k] does not increase
 * with k, so the passing proposals are a prefix.  When the last proposal
 * passes, all do (one addition instead of a search: the common case of
 * theta_sent = -inf). */
FT_HD uint32_t ft_kcut(const float *lp, uint32_t keff, float sigma,
                       float theta_sent)
{
    if (keff == 0 || FT_FADD(sigma, lp[keff - 1]) > theta_sent)
        return keff;
    uint32_t lo = 0, hi = keff - 1; /* lp[hi] fails */
    while (lo < hi) {
        uint32_t mid = (lo + hi) >> 1;
        if (FT_FADD(sigma, lp[mid]) > theta_sent)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* ft_backtrace writes the tokens of the terminal candidate with the given
 * order into out[0 .. t] and returns its length t + 1.  hist holds, for
 * every step s < t and every entry of rank r of the beam after step s, the
 * entry's ft_hist_entry (parent rank << 16 | k) at hist[s * hstride + r];
 * position s's proposals (after the sort) are tok[row[s] + k]. */
FT_HD uint32_t ft_backtrace(uint32_t *out, uint32_t order,
                            const uint32_t *hist, uint64_t hstride,
                            const uint32_t *tok, const uint32_t *row)
{
    uint32_t t = ft_order_t(order), r = ft_order_r(order);
    out[t] = tok[row[t] + ft_order_k(order)];
    for (uint32_t s = t; s > 0; s--) {
        uint32_t e = hist[(uint64_t)(s - 1) * hstride + r];
        out[s - 1] = tok[row[s - 1] + (e & 0xffffu)];
        r = e >> 16;
    }
    return t + 1;
}

#endif /* FT_RULES_H */
