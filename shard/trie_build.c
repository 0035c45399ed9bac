/*
 * trie_build.c - one-pass LOUDS construction from keys in sorted order.
 *
 * With children ordered by label, the BFS order of the nodes at depth d is
 * the lexicographic order of the distinct length-d prefixes.  A key that
 * shares lcp tokens with its predecessor therefore creates exactly the nodes
 * of depths lcp+1 .. len, each appended to its depth's streams, and adds one
 * child bit to the LOUDS block of its parent's depth.  The streams of all
 * depths, concatenated, are the index arrays.
 */
#include "trie.h"

typedef struct tb_level {
    fti_bits louds;  /* 1^deg 0 per node of this depth */
    fti_vec labels;  /* u32 per node */
    fti_vec flags;   /* u8 per node */
    fti_vec values;  /* u64 per terminal node */
    int open;        /* a node of this depth still takes children */
    uint64_t deg;    /* children of the open node so far */
} tb_level;

struct ft_tb {
    tb_level lv[FT_MAX_KEY_LEN_LIMIT + 1];
    uint32_t maxd;   /* deepest level used */
    fti_vec prev;    /* u32 tokens of the last key */
    uint64_t nkeys;
};

int ft_tb_create(ft_tb **out)
{
    ft_tb *tb = calloc(1, sizeof *tb);
    if (tb == NULL)
        return FT_ENOMEM;
    tb->lv[0].open = 1; /* the root */
    *out = tb;
    return FT_OK;
}

void ft_tb_destroy(ft_tb *tb)
{
    if (tb == NULL)
        return;
    for (uint32_t d = 0; d <= FT_MAX_KEY_LEN_LIMIT; d++) {
        fti_bits_free(&tb->lv[d].louds);
        fti_vec_free(&tb->lv[d].labels);
        fti_vec_free(&tb->lv[d].flags);
        fti_vec_free(&tb->lv[d].values);
    }
    fti_vec_free(&tb->prev);
    free(tb);
}

uint64_t ft_tb_keys(const ft_tb *tb) { return tb->nkeys; }

static int close_node(tb_level *l)
{
    if (!l->open)
        return FT_OK;
    if (fti_bits_push(&l->louds, 0))
        return FT_ENOMEM;
    if (l->deg > 0 && l->flags.len > 0) /* the root has no flags entry */
        ((uint8_t *)l->flags.data)[l->flags.len - 1] |= FT_HAS_CHILD;
    l->open = 0;
    l->deg = 0;
    return FT_OK;
}

int ft_tb_add(ft_tb *tb, const uint32_t *toks, uint32_t len, uint64_t value)
{
    if (len == 0 || len > FT_MAX_KEY_LEN_LIMIT)
        return FT_EINVAL;
    uint32_t lcp = 0;
    if (tb->nkeys > 0) {
        const uint32_t *p = tb->prev.data;
        uint32_t plen = (uint32_t)tb->prev.len;
        while (lcp < len && lcp < plen && p[lcp] == toks[lcp])
            lcp++;
        if (lcp == len)
            return FT_EINVAL; /* equal to, or a prefix of, the previous key */
        if (lcp < plen && toks[lcp] < p[lcp])
            return FT_EINVAL; /* out of order */
    }
    for (uint32_t d = lcp + 1; d <= len; d++) {
        tb_level *l = &tb->lv[d];
        if (close_node(l))
            return FT_ENOMEM;
        uint8_t f = d == len ? FT_TERMINAL : 0;
        if (FTI_VEC_PUSH(&l->labels, uint32_t, toks[d - 1]) ||
            FTI_VEC_PUSH(&l->flags, uint8_t, f))
            return FT_ENOMEM;
        if (d == len && FTI_VEC_PUSH(&l->values, uint64_t, value))
            return FT_ENOMEM;
        l->open = 1;
        l->deg = 0;
        tb_level *pl = &tb->lv[d - 1];
        if (fti_bits_push(&pl->louds, 1))
            return FT_ENOMEM;
        pl->deg++;
    }
    if (len > tb->maxd)
        tb->maxd = len;
    tb->prev.len = 0;
    if (fti_vec_reserve(&tb->prev, sizeof(uint32_t), len))
        return FT_ENOMEM;
    memcpy(tb->prev.data, toks, len * sizeof(uint32_t));
    tb->prev.len = len;
    tb->nkeys++;
    return FT_OK;
}

static int vec_append(fti_vec *dst, fti_vec *src, size_t esz)
{
    if (src->len == 0)
        return FT_OK;
    if (fti_vec_reserve(dst, esz, src->len))
        return FT_ENOMEM;
    memcpy((char *)dst->data + dst->len * esz, src->data, src->len * esz);
    dst->len += src->len;
    fti_vec_free(src);
    return FT_OK;
}

int ft_tb_append(ft_tb *dst, ft_tb *src)
{
    if (src->nkeys == 0)
        return FT_OK;
    if (dst->nkeys > 0) {
        const uint32_t *a = dst->prev.data;
        /* src's first key is not kept; its first token is the first label
         * of depth 1 in src. */
        const uint32_t *b = src->lv[1].labels.data;
        if (b[0] <= a[0])
            return FT_EINVAL;
    }
    /* dst's open nodes are complete: src starts under another root child.
     * src's open nodes stay open, so keys may still be added after it. */
    for (uint32_t d = 1; d <= dst->maxd; d++)
        if (close_node(&dst->lv[d]))
            return FT_ENOMEM;
    for (uint32_t d = 1; d <= src->maxd; d++) {
        tb_level *a = &dst->lv[d], *b = &src->lv[d];
        if (fti_bits_append(&a->louds, &b->louds) ||
            vec_append(&a->labels, &b->labels, sizeof(uint32_t)) ||
            vec_append(&a->flags, &b->flags, 1) ||
            vec_append(&a->values, &b->values, sizeof(uint64_t)))
            return FT_ENOMEM;
        fti_bits_free(&b->louds);
        a->open = b->open;
        a->deg = b->deg;
        b->open = 0;
        b->deg = 0;
    }
    /* root: src's root ones (its depth-1 nodes) join dst's root block */
    if (fti_bits_push_run(&dst->lv[0].louds, 1, src->lv[0].deg))
        return FT_ENOMEM;
    dst->lv[0].deg += src->lv[0].deg;
    fti_bits_free(&src->lv[0].louds);
    src->lv[0].deg = 0;
    if (src->maxd > dst->maxd)
        dst->maxd = src->maxd;
    dst->prev.len = 0;
    if (fti_vec_reserve(&dst->prev, sizeof(uint32_t), src->prev.len))
        return FT_ENOMEM;
    memcpy(dst->prev.data, src->prev.data, src->prev.len * sizeof(uint32_t));
    dst->prev.len = src->prev.len;
    dst->nkeys += src->nkeys;
    src->nkeys = 0;
    return FT_OK;
}

static void *xcalloc_words(uint64_t n)
{
    return calloc(n ? n : 1, sizeof(uint64_t));
}

int ft_tb_finish(ft_tb *tb, uint32_t max_key_len, ft_trie *t)
{
    memset(t, 0, sizeof *t);
    for (uint32_t d = 1; d <= tb->maxd; d++)
        if (close_node(&tb->lv[d]))
            return FT_ENOMEM;
    uint64_t root_fanout = tb->lv[0].deg;
    if (close_node(&tb->lv[0]))
        return FT_ENOMEM;

    uint64_t n_nodes = 1;
    for (uint32_t d = 1; d <= tb->maxd; d++)
        n_nodes += tb->lv[d].labels.len;
    uint64_t louds_bits = 2 * n_nodes + 1;

    t->view.n_nodes = n_nodes;
    t->view.louds_bits = louds_bits;
    t->louds_zeros = n_nodes + 1;
    t->n_keys = tb->nkeys;
    t->root_fanout = root_fanout;
    t->max_depth = tb->maxd;
    t->max_key_len = max_key_len;

    uint32_t maxhi = 0;
    uint64_t maxval = 0, high_nodes = 0;
    for (uint32_t d = 1; d <= tb->maxd; d++) {
        const uint32_t *lab = tb->lv[d].labels.data;
        for (size_t i = 0; i < tb->lv[d].labels.len; i++) {
            uint32_t h = lab[i] >> 16;
            if (h) {
                high_nodes++;
                if (h > maxhi)
                    maxhi = h;
            }
        }
        const uint64_t *val = tb->lv[d].values.data;
        for (size_t i = 0; i < tb->lv[d].values.len; i++)
            if (val[i] > maxval)
                maxval = val[i];
    }
    t->high_nodes = high_nodes;
    t->view.hi_bits = fti_bits_needed(maxhi);
    t->value_bits = fti_bits_needed(maxval);
    ft_trie_section_sizes(t);
    for (int s = 0; s < FT_SEC_COUNT; s++) {
        t->owned[s] = xcalloc_words((t->sec_bytes[s] + 7) / 8);
        if (t->owned[s] == NULL) {
            ft_trie_free(t);
            return FT_ENOMEM;
        }
        t->sec[s] = t->owned[s];
    }
    uint64_t *louds = t->owned[FT_SEC_LOUDS];
    uint64_t *louds_rank = t->owned[FT_SEC_LOUDS_RANK];
    uint32_t *sel0 = t->owned[FT_SEC_LOUDS_SEL0];
    uint16_t *label_lo = t->owned[FT_SEC_LABEL_LO];
    uint64_t *high = t->owned[FT_SEC_HIGH];
    uint64_t *high_rank = t->owned[FT_SEC_HIGH_RANK];
    uint64_t *label_hi = t->owned[FT_SEC_LABEL_HI];
    uint64_t *flags = t->owned[FT_SEC_FLAGS];
    uint64_t *term_rank = t->owned[FT_SEC_TERM_RANK];
    uint64_t *values = t->owned[FT_SEC_VALUES];

    /* LOUDS: "10", then every depth's segment. */
    fti_bits all = {0};
    if (fti_bits_push(&all, 1) || fti_bits_push(&all, 0)) {
        ft_trie_free(t);
        return FT_ENOMEM;
    }
    for (uint32_t d = 0; d <= tb->maxd; d++) {
        if (fti_bits_append(&all, &tb->lv[d].louds)) {
            fti_bits_free(&all);
            ft_trie_free(t);
            return FT_ENOMEM;
        }
        fti_bits_free(&tb->lv[d].louds);
    }
    if (all.n != louds_bits) {
        fti_bits_free(&all);
        ft_trie_free(t);
        return FT_EINTERNAL;
    }
    memcpy(louds, all.words, ((all.n + 63) / 64) * sizeof(uint64_t));
    fti_bits_free(&all);
    fti_rank_build(louds_rank, louds, louds_bits, ~0ull);
    fti_sel0_build(sel0, louds, louds_rank, louds_bits, t->louds_zeros);

    /* labels, flags, values in node order */
    uint64_t u = 1, hi_i = 0, term_i = 0;
    flags[0] = root_fanout ? FT_HAS_CHILD : 0;
    for (uint32_t d = 1; d <= tb->maxd; d++) {
        tb_level *l = &tb->lv[d];
        const uint32_t *lab = l->labels.data;
        const uint8_t *fl = l->flags.data;
        for (size_t i = 0; i < l->labels.len; i++, u++) {
            label_lo[u] = (uint16_t)lab[i];
            if (lab[i] >> 16) {
                high[u >> 6] |= 1ull << (u & 63);
                fti_packed_set(label_hi, t->view.hi_bits, hi_i++, lab[i] >> 16);
            }
            flags[u >> 5] |= (uint64_t)fl[i] << ((u & 31) * 2);
        }
        const uint64_t *val = l->values.data;
        for (size_t i = 0; i < l->values.len; i++)
            fti_packed_set(values, t->value_bits, term_i++, val[i]);
        fti_vec_free(&l->labels);
        fti_vec_free(&l->flags);
        fti_vec_free(&l->values);
    }
    fti_rank_build(high_rank, high, n_nodes, ~0ull);
    fti_rank_build(term_rank, flags, 2 * n_nodes, 0x5555555555555555ull);
    if (term_i != t->n_keys) {
        ft_trie_free(t);
        return FT_EINTERNAL;
    }

    t->view.louds = louds;
    t->view.louds_rank = louds_rank;
    t->view.louds_sel0 = sel0;
    t->view.label_lo = label_lo;
    t->view.high = high;
    t->view.high_rank = high_rank;
    t->view.label_hi = label_hi;
    t->view.flags = flags;
    t->term_rank = term_rank;
    t->values = values;
    return FT_OK;
}
