/* util.c - growable arrays, bit vectors, rank/select directories, packing. */
#include "ft_impl.h"

#include <time.h>
#include <unistd.h>

int fti_vec_reserve(fti_vec *v, size_t esz, size_t n)
{
    if (v->len + n <= v->cap)
        return FT_OK;
    size_t cap = v->cap ? v->cap : 16;
    while (cap < v->len + n)
        cap *= 2;
    void *p = realloc(v->data, cap * esz);
    if (p == NULL)
        return FT_ENOMEM;
    v->data = p;
    v->cap = cap;
    return FT_OK;
}

void fti_vec_free(fti_vec *v)
{
    free(v->data);
    v->data = NULL;
    v->len = v->cap = 0;
}

static int bits_grow(fti_bits *b, uint64_t nbits)
{
    uint64_t need = (nbits + 63) / 64 + 1;
    if (need <= b->cap)
        return FT_OK;
    uint64_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap *= 2;
    uint64_t *p = realloc(b->words, cap * sizeof(uint64_t));
    if (p == NULL)
        return FT_ENOMEM;
    memset(p + b->cap, 0, (cap - b->cap) * sizeof(uint64_t));
    b->words = p;
    b->cap = cap;
    return FT_OK;
}

int fti_bits_push(fti_bits *b, uint32_t bit)
{
    if ((b->n >> 6) + 1 >= b->cap && bits_grow(b, b->n + 1))
        return FT_ENOMEM;
    if (bit)
        b->words[b->n >> 6] |= 1ull << (b->n & 63);
    b->n++;
    return FT_OK;
}

int fti_bits_push_run(fti_bits *b, uint32_t bit, uint64_t count)
{
    if (count == 0)
        return FT_OK;
    if (bits_grow(b, b->n + count))
        return FT_ENOMEM;
    if (!bit) {
        b->n += count; /* words beyond n are kept zero */
        return FT_OK;
    }
    while (count > 0) {
        uint32_t off = (uint32_t)(b->n & 63);
        uint64_t take = 64 - off < count ? 64 - off : count;
        uint64_t m = take == 64 ? ~0ull : ((1ull << take) - 1) << off;
        b->words[b->n >> 6] |= m;
        b->n += take;
        count -= take;
    }
    return FT_OK;
}

int fti_bits_append(fti_bits *dst, const fti_bits *src)
{
    if (src->n == 0)
        return FT_OK;
    if (bits_grow(dst, dst->n + src->n))
        return FT_ENOMEM;
    uint32_t off = (uint32_t)(dst->n & 63);
    uint64_t nw = (src->n + 63) / 64;
    uint64_t base = dst->n >> 6;
    for (uint64_t i = 0; i < nw; i++) {
        uint64_t w = src->words[i];
        if (i == nw - 1 && (src->n & 63))
            w &= (1ull << (src->n & 63)) - 1;
        dst->words[base + i] |= w << off;
        if (off)
            dst->words[base + i + 1] |= w >> (64 - off);
    }
    dst->n += src->n;
    return FT_OK;
}

void fti_bits_free(fti_bits *b)
{
    free(b->words);
    memset(b, 0, sizeof *b);
}

uint64_t fti_bits_words(uint64_t nbits)
{
    return ((nbits + FT_BLOCK_BITS - 1) / FT_BLOCK_BITS + 1) * 8;
}

uint64_t fti_rank_entries(uint64_t nbits) { return nbits / FT_BLOCK_BITS + 2; }

uint64_t fti_rank_words(uint64_t nbits)
{
    return (fti_rank_entries(nbits) + 1) / 2;
}

void fti_rank_set(uint64_t *rank, uint64_t b, uint64_t acc)
{
    /* Even blocks come first (callers write blocks in ascending order from
     * an even one), so the odd block stores its difference to the even. */
    if ((b & 1) == 0)
        rank[b >> 1] = acc << 24;
    else
        rank[b >> 1] |= acc - (rank[b >> 1] >> 24);
}

uint64_t fti_sel0_entries(uint64_t nzeros)
{
    return (nzeros + FT_SELECT_SAMPLE - 1) / FT_SELECT_SAMPLE + 1;
}

void fti_rank_build(uint64_t *rank, const uint64_t *words, uint64_t nbits,
                    uint64_t mask)
{
    uint64_t n = fti_rank_entries(nbits);
    uint64_t acc = 0;
    uint64_t nw = fti_bits_words(nbits);
    for (uint64_t b = 0; b < n; b++) {
        fti_rank_set(rank, b, acc);
        for (uint64_t w = b * 8; w < b * 8 + 8 && w < nw; w++)
            acc += (uint64_t)__builtin_popcountll(words[w] & mask);
    }
}

void fti_sel0_build(uint32_t *sel, const uint64_t *words,
                    const uint64_t *rank, uint64_t nbits, uint64_t nzeros)
{
    uint64_t nblocks = (nbits + FT_BLOCK_BITS - 1) / FT_BLOCK_BITS;
    uint64_t nh = fti_sel0_entries(nzeros) - 1;
    uint64_t b = 0;
    (void)words;
    for (uint64_t j = 0; j < nh; j++) {
        uint64_t target = j * FT_SELECT_SAMPLE;
        /* advance to the last block whose zeros-before <= target */
        while (b + 1 < nblocks &&
               (b + 1) * FT_BLOCK_BITS - ft_rank_block(rank, b + 1) <= target)
            b++;
        sel[j] = (uint32_t)b;
    }
    sel[nh] = (uint32_t)(nblocks ? nblocks - 1 : 0);
}

uint32_t fti_bits_needed(uint64_t maxval)
{
    uint32_t w = 0;
    while (w < 64 && (maxval >> w) != 0)
        w++;
    return w;
}

uint64_t fti_packed_words(uint64_t n, uint32_t width)
{
    return (n * width + 63) / 64 + 1;
}

void fti_packed_set(uint64_t *words, uint32_t width, uint64_t i, uint64_t v)
{
    if (width == 0)
        return;
    if (width < 64)
        v &= (1ull << width) - 1;
    uint64_t pos = i * width;
    uint64_t w = pos >> 6;
    uint32_t off = (uint32_t)(pos & 63);
    words[w] |= v << off;
    if (off + width > 64)
        words[w + 1] |= v >> (64 - off);
}
