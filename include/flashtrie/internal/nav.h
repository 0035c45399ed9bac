/*
 * nav.h - trie navigation shared by the CPU engine and the CUDA kernels.
 *
 * Everything here is a static inline function over a plain ft_trie_view,
 * written once in a subset of C that both the C compiler and nvcc accept, so
 * the CPU engine and the GPU kernels walk the trie with the same code.
 *
 * Layout (docs/index-format.md has the full picture):
 *  - Nodes are numbered in BFS order, children of a node in ascending label
 *    order; the root is node 0.  Consequently the children of any node have
 *    consecutive ids.
 *  - LOUDS bits: "10" for a super root, then for each node in BFS order
 *    deg(v) one-bits followed by one zero-bit.  Zero number v+1 ends node v's
 *    block, so node v's children start at bit select0(v) + 1 and the first
 *    child's id is select0(v) - v.
 *  - rank directories hold, for every 512-bit block, the number of one bits
 *    before it, two blocks to a u64: the count before the even block in the
 *    high 40 bits, the even block's own count in the low 24 (so 2^40 bits
 *    at most; blocks are one 64-byte cache line).
 *  - select0 hints: entry j is the block holding zero number j*512; one extra
 *    entry holds the last block.
 *  - labels: the low 16 bits of every node's label in a u16 array; the high
 *    bits (label >> 16, non-zero) bit-packed aside for the nodes that need
 *    them, in node order, located by rank over a one-bit-per-node vector.
 *    Because children are sorted, the children that need high bits form the
 *    tail of each child range, so a child search needs two ranks per node,
 *    not one per probe.
 *  - node flags: two bits per node, bit 0 "ends a key", bit 1 "has children".
 *
 * Damaged files: ft_index_open always checks the directories (rank, select0
 * hints) against each other and the header's counts, but without checksums
 * a flipped bit inside the LOUDS bits or the labels goes unseen.  So every
 * position computed here is bounded: select0 never scans past the block its
 * hints name, a child range never passes n_nodes, a high-label index never
 * passes high_nodes.  A damaged file may give wrong answers, never a read
 * outside its arrays.  The bounds are single compares on values already in
 * registers, taken the same way on every sane file.
 */
#ifndef FT_NAV_H
#define FT_NAV_H

#include <stdint.h>

#if defined(__CUDACC__)
#define FT_HD __host__ __device__ __forceinline__
#else
#define FT_HD static inline
#endif

#define FT_NONE UINT64_MAX
#define FT_BLOCK_BITS 512u
#define FT_SELECT_SAMPLE 512u

/* ft_trie_view is the read-only trie as both engines see it: pointers into
 * host memory (a mapped file) or into device memory. */
typedef struct ft_trie_view {
    const uint64_t *louds;      /* LOUDS bit vector */
    const uint64_t *louds_rank; /* rank directory (ft_rank_block) */
    const uint32_t *louds_sel0; /* select0 hints */
    const uint16_t *label_lo;   /* low 16 label bits, one per node */
    const uint64_t *high;       /* one bit per node: label >= 65536 */
    const uint64_t *high_rank;  /* rank directory over high */
    const uint64_t *label_hi;   /* packed label >> 16, hi_bits wide */
    const uint64_t *flags;      /* two bits per node */
    uint64_t n_nodes;
    uint64_t louds_bits;
    uint32_t hi_bits;
    uint32_t pad_;
    uint64_t high_nodes; /* entries of label_hi: bounds its indexes */
} ft_trie_view;

/* ft_child_range is a node's children as the search needs them. */
typedef struct ft_child_range {
    uint64_t first;  /* id of the first child */
    uint64_t deg;    /* number of children */
    uint64_t hstart; /* first child whose label needs high bits */
    uint64_t hbase;  /* index of hstart's high part in label_hi */
} ft_child_range;

FT_HD uint32_t ft_popc64(uint64_t x)
{
#if defined(__CUDA_ARCH__)
    return (uint32_t)__popcll(x);
#else
    return (uint32_t)__builtin_popcountll(x);
#endif
}

FT_HD uint32_t ft_ctz64(uint64_t x)
{
#if defined(__CUDA_ARCH__)
    return (uint32_t)(__ffsll((long long)x) - 1);
#else
    return (uint32_t)__builtin_ctzll(x);
#endif
}

/* ft_select64 returns the position of the r-th (0-based) one bit of x;
 * x must have more than r one bits. */
FT_HD uint32_t ft_select64(uint64_t x, uint32_t r)
{
#if defined(__CUDA_ARCH__)
    uint32_t lo = (uint32_t)x;
    uint32_t c = (uint32_t)__popc(lo);
    if (r < c)
        return (uint32_t)__fns(lo, 0, (int)r + 1);
    return 32u + (uint32_t)__fns((uint32_t)(x >> 32), 0, (int)(r - c) + 1);
#else
    uint32_t base = 0;
    uint32_t c = ft_popc64(x & 0xffffffffull);
    if (r >= c) {
        r -= c;
        x >>= 32;
        base = 32;
    }
    c = ft_popc64(x & 0xffffull);
    if (r >= c) {
        r -= c;
        x >>= 16;
        base += 16;
    }
    c = ft_popc64(x & 0xffull);
    if (r >= c) {
        r -= c;
        x >>= 8;
        base += 8;
    }
    for (;;) {
        if (x & 1u) {
            if (r == 0)
                return base;
            r--;
        }
        x >>= 1;
        base++;
    }
#endif
}

/* ft_bit_get reads bit i of a bit vector. */
FT_HD uint32_t ft_bit_get(const uint64_t *bits, uint64_t i)
{
    return (uint32_t)((bits[i >> 6] >> (i & 63u)) & 1u);
}

/* ft_rank_block returns the number of one bits before 512-bit block b. */
FT_HD uint64_t ft_rank_block(const uint64_t *rank, uint64_t b)
{
    uint64_t e = rank[b >> 1];
    return (e >> 24) + ((b & 1u) ? (e & 0xffffffu) : 0u);
}

/* ft_rank1 counts the one bits of bits[0, pos). */
FT_HD uint64_t ft_rank1(const uint64_t *bits, const uint64_t *rank,
                        uint64_t pos)
{
    uint64_t block = pos >> 9;
    uint64_t r = ft_rank_block(rank, block);
    uint64_t w = block << 3;
    uint64_t end = pos >> 6;
    for (; w < end; w++)
        r += ft_popc64(bits[w]);
    if (pos & 63u)
        r += ft_popc64(bits[end] & ((1ull << (pos & 63u)) - 1u));
    return r;
}

/* ft_select0 returns the position of zero number i (0-based). */
FT_HD uint64_t ft_select0(const ft_trie_view *v, uint64_t i)
{
    uint64_t j = i / FT_SELECT_SAMPLE;
    uint64_t lo = v->louds_sel0[j];
    uint64_t hi = v->louds_sel0[j + 1];
    /* Find the last block whose zeros-before count is <= i. */
    while (lo < hi) {
        uint64_t mid = (lo + hi + 1) >> 1;
        uint64_t zeros = mid * FT_BLOCK_BITS - ft_rank_block(v->louds_rank, mid);
        if (zeros <= i)
            lo = mid;
        else
            hi = mid - 1;
    }
    uint64_t rem = i - (lo * FT_BLOCK_BITS - ft_rank_block(v->louds_rank, lo));
    /* With directory and bits in agreement the zero lies in block lo.  A
     * damaged LOUDS word (or a rank entry off by less than the checks at
     * open can see) could send the scan on past the vector: stop at the
     * block's end and answer its last bit, a position inside the vector. */
    uint64_t w = lo << 3, wend = w + 8u;
    for (; w < wend; w++) {
        uint64_t inv = ~v->louds[w];
        uint32_t c = ft_popc64(inv);
        if (rem < c)
            return (w << 6) + ft_select64(inv, (uint32_t)rem);
        rem -= c;
    }
    return (w << 6) - 1u;
}

/* ft_next_zero returns the position of the first zero bit at or after pos.
 * It ends inside the vector because the spare block after the last bit is
 * zero (checked when a file is opened). */
FT_HD uint64_t ft_next_zero(const uint64_t *bits, uint64_t pos)
{
    uint64_t w = pos >> 6;
    uint64_t word = ~bits[w] & (~0ull << (pos & 63u));
    while (word == 0)
        word = ~bits[++w];
    return (w << 6) + ft_ctz64(word);
}

/* ft_ctab_decode is a node's child range from its two child-table
 * entries (ft_gk_ctab_build, kernels/ft_kernels.h): a0, a1 = node u's
 * (its first child, the high labels before it), b0, b1 = node u + 1's.
 * The same range ft_children computes; the builder checked every node. */
FT_HD ft_child_range ft_ctab_decode(uint64_t a0, uint64_t a1, uint64_t b0,
                                    uint64_t b1)
{
    ft_child_range cr;
    cr.first = a0;
    cr.deg = b0 - a0;
    if (cr.deg == 0) {
        cr.hstart = cr.first;
        cr.hbase = 0;
    } else {
        cr.hstart = cr.first + cr.deg - (b1 - a1);
        cr.hbase = a1;
    }
    return cr;
}

/* ft_children computes node v's child range.  deg is 0 for a leaf. */
FT_HD ft_child_range ft_children(const ft_trie_view *t, uint64_t v)
{
    ft_child_range cr;
    uint64_t start = ft_select0(t, v) + 1;
    uint64_t end;
    /* Most nodes have few children: scan a couple of words, else select. */
    uint64_t w0 = start >> 6;
    uint64_t word = ~t->louds[w0] & (~0ull << (start & 63u));
    if (word != 0) {
        end = (w0 << 6) + ft_ctz64(word);
    } else {
        word = ~t->louds[w0 + 1];
        if (word != 0)
            end = ((w0 + 1) << 6) + ft_ctz64(word);
        else
            end = ft_select0(t, v + 1);
    }
    cr.first = start - v - 1;
    cr.deg = end - start;
    /* A sane range lies in [1, n_nodes]; a damaged one (wrapped below zero
     * or past the last node) is read as a leaf whose children would start
     * at n_nodes, so callers that use first as a boundary stay inside. */
    if (cr.first > t->n_nodes || cr.deg > t->n_nodes - cr.first) {
        cr.first = t->n_nodes;
        cr.deg = 0;
    }
    if (cr.deg == 0) {
        cr.hstart = cr.first;
        cr.hbase = 0;
        return cr;
    }
    uint64_t hb = ft_rank1(t->high, t->high_rank, cr.first);
    uint64_t he = ft_rank1(t->high, t->high_rank, cr.first + cr.deg);
    uint64_t nh = he - hb;
    /* Damaged high bits or directory: more high children than children,
     * or high parts past label_hi.  Search them all as low labels. */
    if (nh > cr.deg || he > t->high_nodes) {
        nh = 0;
        hb = 0;
    }
    cr.hstart = cr.first + cr.deg - nh;
    cr.hbase = hb;
    return cr;
}

/* ft_packed_get reads element i of an array of width-bit fields (width
 * 1..64) packed little-endian into u64 words. */
FT_HD uint64_t ft_packed_get(const uint64_t *words, uint32_t width, uint64_t i)
{
    if (width == 0)
        return 0;
    uint64_t pos = i * width;
    uint64_t w = pos >> 6;
    uint32_t off = (uint32_t)(pos & 63u);
    uint64_t x = words[w] >> off;
    if (off + width > 64u)
        x |= words[w + 1] << (64u - off);
    if (width < 64u)
        x &= (1ull << width) - 1u;
    return x;
}

/* ft_label returns node u's full 32-bit label (u >= 1). */
FT_HD uint32_t ft_label(const ft_trie_view *t, uint64_t u)
{
    uint32_t lo = t->label_lo[u];
    if (!ft_bit_get(t->high, u))
        return lo;
    uint64_t r = ft_rank1(t->high, t->high_rank, u);
    if (r >= t->high_nodes) /* damaged: label_hi has a spare word at 0 */
        r = 0;
    return lo | ((uint32_t)ft_packed_get(t->label_hi, t->hi_bits, r) << 16);
}

/* ft_find_child returns the child of the range labelled tok, or FT_NONE.
 * Labels below 65536 live in [first, hstart) and are searched as u16;
 * the others in [hstart, first+deg) with their packed high parts. */
FT_HD uint64_t ft_find_child(const ft_trie_view *t, const ft_child_range *cr,
                             uint32_t tok)
{
    if (tok < 65536u) {
        uint64_t lo = cr->first, hi = cr->hstart; /* [lo, hi) */
        uint16_t key = (uint16_t)tok;
        while (lo < hi) {
            uint64_t mid = lo + ((hi - lo) >> 1);
            uint16_t l = t->label_lo[mid];
            if (l < key)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < cr->hstart && t->label_lo[lo] == key)
            return lo;
        return FT_NONE;
    }
    uint64_t lo = cr->hstart, hi = cr->first + cr->deg;
    while (lo < hi) {
        uint64_t mid = lo + ((hi - lo) >> 1);
        uint32_t l = t->label_lo[mid] |
                     ((uint32_t)ft_packed_get(t->label_hi, t->hi_bits,
                                              cr->hbase + (mid - cr->hstart))
                      << 16);
        if (l < tok)
            lo = mid + 1;
        else if (l > tok)
            hi = mid;
        else
            return mid;
    }
    return FT_NONE;
}

/* ft_child_label returns the label of child u of a range (u in range). */
FT_HD uint32_t ft_child_label(const ft_trie_view *t, const ft_child_range *cr,
                              uint64_t u)
{
    uint32_t lo = t->label_lo[u];
    if (u < cr->hstart)
        return lo;
    return lo | ((uint32_t)ft_packed_get(t->label_hi, t->hi_bits,
                                         cr->hbase + (u - cr->hstart))
                 << 16);
}

/* ft_term_rank counts the terminal nodes before node u: the index of u's
 * value.  term_rank is the rank directory over the terminal flag bits (the
 * even bits of the two-bit node flags). */
FT_HD uint64_t ft_term_rank(const uint64_t *flags, const uint64_t *term_rank,
                            uint64_t u)
{
    const uint64_t m = 0x5555555555555555ull;
    uint64_t pos = 2 * u;
    uint64_t block = pos >> 9;
    uint64_t r = ft_rank_block(term_rank, block);
    uint64_t w = block << 3, end = pos >> 6;
    for (; w < end; w++)
        r += ft_popc64(flags[w] & m);
    if (pos & 63u)
        r += ft_popc64(flags[end] & m & ((1ull << (pos & 63u)) - 1u));
    return r;
}

/* ft_node_flags returns node u's two flag bits (FT_TERMINAL, FT_HAS_CHILD). */
#define FT_TERMINAL 1u
#define FT_HAS_CHILD 2u
FT_HD uint32_t ft_node_flags(const ft_trie_view *t, uint64_t u)
{
    return (uint32_t)((t->flags[u >> 5] >> ((u & 31u) * 2u)) & 3u);
}

#endif /* FT_NAV_H */
