/*
 * ft_ar_nav.cuh - trie navigation for the GPU step with a block's loads
 * issued together (kernels/ft_ar_step.cu).  Host and device: ar_nav_test
 * checks every function against nav.h's on the host.
 */
#ifndef FT_AR_NAV_CUH
#define FT_AR_NAV_CUH

#include <stdint.h>

#include "flashtrie/internal/nav.h"

/* ---- Navigation with the loads issued together ----
 *
 * nav.h's rank and select scan a 512-bit block word by word, stopping at
 * the word they need: on the GPU each word is one more dependent trip to
 * L2.  These give the same answers (for the blocks an index file holds:
 * bit vectors are padded to whole blocks plus a spare one, ft_impl.h) but
 * load the block's 8 words at once, then count in registers.  They are
 * __host__ __device__ so that ar_nav_test checks them against nav.h on
 * the host. */
#ifdef __CUDA_ARCH__
#define ARK_LDG(x) __ldg(x)
#else
#define ARK_LDG(x) (*(x))
#endif

__host__ __device__ __forceinline__ void ark_block(const uint64_t *bits,
                                                   uint64_t b, uint64_t x[8])
{
    const uint64_t *q = bits + (b << 3);
#pragma unroll
    for (int k = 0; k < 8; k++)
        x[k] = ARK_LDG(q + k);
}

/* ark_rank1 is ft_rank1 (the ones of bits[0, pos)), masked by m (all
 * ones, or ft_term_rank's even bits). */
__host__ __device__ __forceinline__ uint64_t ark_rank1(const uint64_t *bits,
                                                       const uint64_t *rank,
                                                       uint64_t pos, uint64_t m)
{
    uint64_t x[8];
    uint64_t block = pos >> 9;
    ark_block(bits, block, x);
    uint64_t r = ft_rank_block(rank, block);
    uint32_t o = (uint32_t)(pos & 511u);
#pragma unroll
    for (uint32_t k = 0; k < 8; k++) {
        uint32_t lo = 64u * k;
        if (o >= lo + 64u)
            r += ft_popc64(x[k] & m);
        else if (o > lo)
            r += ft_popc64(x[k] & m & ((1ull << (o - lo)) - 1u));
    }
    return r;
}

/* ark_term_rank is ft_term_rank. */
__host__ __device__ __forceinline__ uint64_t ark_term_rank(const uint64_t *flags,
                                                           const uint64_t *term_rank,
                                                           uint64_t u)
{
    return ark_rank1(flags, term_rank, 2 * u, 0x5555555555555555ull);
}

/* ark_select0 is ft_select0. */
__host__ __device__ __forceinline__ uint64_t ark_select0(const ft_trie_view *v,
                                                         uint64_t i)
{
    uint64_t j = i / FT_SELECT_SAMPLE;
    uint64_t lo = ARK_LDG(&v->louds_sel0[j]);
    uint64_t hi = ARK_LDG(&v->louds_sel0[j + 1]);
    while (lo < hi) {
        uint64_t mid = (lo + hi + 1) >> 1;
        uint64_t zeros = mid * FT_BLOCK_BITS - ft_rank_block(v->louds_rank, mid);
        if (zeros <= i)
            lo = mid;
        else
            hi = mid - 1;
    }
    uint64_t x[8];
    ark_block(v->louds, lo, x);
    uint64_t rem = i - (lo * FT_BLOCK_BITS - ft_rank_block(v->louds_rank, lo));
    uint64_t w = lo << 3;
#pragma unroll
    for (uint32_t k = 0; k < 8; k++) {
        uint64_t inv = ~x[k];
        uint32_t c = ft_popc64(inv);
        if (rem < c)
            return ((w + k) << 6) + ft_select64(inv, (uint32_t)rem);
        rem -= c;
    }
    return ((w + 8) << 6) - 1u;
}

/* ark_children is ft_children. */
__host__ __device__ __forceinline__ ft_child_range ark_children(const ft_trie_view *t,
                                                               uint64_t v)
{
    ft_child_range cr;
    uint64_t start = ark_select0(t, v) + 1;
    uint64_t end;
    uint64_t w0 = start >> 6;
    /* both words at once: the spare block keeps w0 + 1 inside */
    uint64_t a = ARK_LDG(&t->louds[w0]), b = ARK_LDG(&t->louds[w0 + 1]);
    uint64_t word = ~a & (~0ull << (start & 63u));
    if (word != 0) {
        end = (w0 << 6) + ft_ctz64(word);
    } else {
        word = ~b;
        if (word != 0)
            end = ((w0 + 1) << 6) + ft_ctz64(word);
        else
            end = ark_select0(t, v + 1);
    }
    cr.first = start - v - 1;
    cr.deg = end - start;
    if (cr.first > t->n_nodes || cr.deg > t->n_nodes - cr.first) {
        cr.first = t->n_nodes;
        cr.deg = 0;
    }
    if (cr.deg == 0) {
        cr.hstart = cr.first;
        cr.hbase = 0;
        return cr;
    }
    uint64_t hb = ark_rank1(t->high, t->high_rank, cr.first, ~0ull);
    uint64_t he = ark_rank1(t->high, t->high_rank, cr.first + cr.deg, ~0ull);
    uint64_t nh = he - hb;
    if (nh > cr.deg || he > t->high_nodes) {
        nh = 0;
        hb = 0;
    }
    cr.hstart = cr.first + cr.deg - nh;
    cr.hbase = hb;
    return cr;
}

#endif /* FT_AR_NAV_CUH */
