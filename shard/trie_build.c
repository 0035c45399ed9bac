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

#include <pthread.h>

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

/* ---- finishing, in parallel ------------------------------------------- */

/* fin_run calls fn(ctx, i, n) for i in [0, n), each in its own thread but
 * the first, which runs in the caller (so n == 1 costs no thread).  A task
 * whose thread cannot be started runs in the caller too. */
typedef void (*fin_fn)(void *ctx, int i, int n);
typedef struct fin_task {
    fin_fn fn;
    void *ctx;
    int i, n;
} fin_task;

static void *fin_tramp(void *arg)
{
    fin_task *t = arg;
    t->fn(t->ctx, t->i, t->n);
    return NULL;
}

static void fin_run(fin_fn fn, void *ctx, int n)
{
    if (n <= 1) {
        fn(ctx, 0, 1);
        return;
    }
    pthread_t th[n];
    fin_task task[n];
    int ok[n];
    for (int i = 1; i < n; i++) {
        task[i] = (fin_task){fn, ctx, i, n};
        ok[i] = pthread_create(&th[i], NULL, fin_tramp, &task[i]) == 0;
    }
    fn(ctx, 0, n);
    for (int i = 1; i < n; i++) {
        if (ok[i])
            pthread_join(th[i], NULL);
        else
            fn(ctx, i, n);
    }
}

/* Pieces of neighbouring (part, depth) streams meet inside one word of a
 * bit or packed array; only a piece's first and last word can be shared,
 * so those take an atomic OR and every other word a plain one. */
static inline void or_edge(uint64_t *w, uint64_t i, uint64_t first,
                           uint64_t last, uint64_t v)
{
    if (i == first || i == last)
        __atomic_fetch_or(&w[i], v, __ATOMIC_RELAXED);
    else
        w[i] |= v;
}

/* packed_run writes n values of width bits from index i0 on. */
static void packed_run(uint64_t *words, uint32_t width, uint64_t i0,
                       const uint64_t *v, const uint32_t *v32, uint32_t shift,
                       size_t n)
{
    if (width == 0 || n == 0)
        return;
    uint64_t first = i0 * width >> 6, last = ((i0 + n) * width - 1) >> 6;
    uint64_t mask = width < 64 ? (1ull << width) - 1 : ~0ull;
    for (size_t k = 0; k < n; k++) {
        uint64_t x = (v ? v[k] : (uint64_t)(v32[k] >> shift)) & mask;
        uint64_t pos = (i0 + k) * width;
        uint64_t w = pos >> 6;
        uint32_t off = (uint32_t)(pos & 63);
        or_edge(words, w, first, last, x << off);
        if (off + width > 64)
            or_edge(words, w + 1, first, last, x >> (64 - off));
    }
}

/* fin_piece is the nodes of one depth of one part, and where they land. */
typedef struct fin_piece {
    tb_level *l;
    uint64_t node0;  /* first node id */
    uint64_t hi0;    /* high labels before it */
    uint64_t term0;  /* terminals before it */
    uint64_t bit0;   /* LOUDS position of its first block */
    uint64_t nhigh;  /* high labels in it */
} fin_piece;

typedef struct fin_ctx {
    ft_tb *const *parts;
    size_t np;
    int rc;               /* set by the scan on allocation failure */
    uint32_t *maxhi;      /* per part */
    uint64_t *maxval;     /* per part */
    fin_piece *pieces;    /* [part][depth], depths 1..FT_MAX_KEY_LEN_LIMIT */
    fin_piece **order;    /* the pieces to pack, largest first */
    size_t norder;
    int next;             /* next piece in order (atomic) */
    ft_trie *t;
    /* rank building */
    uint64_t *rank;
    const uint64_t *words;
    uint64_t nbits, mask;
    uint64_t *range_sum;  /* per task */
} fin_ctx;

#define FIN_PIECE(c, p, d) (&(c)->pieces[(p) * (FT_MAX_KEY_LEN_LIMIT + 1) + (d)])

/* fin_scan closes a part's open nodes and gathers its per-depth counts. */
static void fin_scan(void *arg, int i, int n)
{
    fin_ctx *c = arg;
    for (size_t p = (size_t)i; p < c->np; p += (size_t)n) {
        ft_tb *tb = c->parts[p];
        uint32_t maxhi = 0;
        uint64_t maxval = 0;
        for (uint32_t d = 1; d <= tb->maxd; d++) {
            tb_level *l = &tb->lv[d];
            if (close_node(l)) {
                c->rc = FT_ENOMEM;
                return;
            }
            const uint32_t *lab = l->labels.data;
            uint64_t nh = 0;
            for (size_t k = 0; k < l->labels.len; k++) {
                uint32_t h = lab[k] >> 16;
                nh += h != 0;
                maxhi = h > maxhi ? h : maxhi;
            }
            FIN_PIECE(c, p, d)->nhigh = nh;
            const uint64_t *val = l->values.data;
            for (size_t k = 0; k < l->values.len; k++)
                maxval = val[k] > maxval ? val[k] : maxval;
        }
        c->maxhi[p] = maxhi;
        c->maxval[p] = maxval;
    }
}

/* pack_piece puts one piece's LOUDS blocks, labels, flags and values in
 * place and frees its streams. */
static void pack_piece(ft_trie *t, fin_piece *pc)
{
    tb_level *l = pc->l;
    uint64_t *louds = t->owned[FT_SEC_LOUDS];
    uint16_t *label_lo = t->owned[FT_SEC_LABEL_LO];
    uint64_t *high = t->owned[FT_SEC_HIGH];
    uint64_t *label_hi = t->owned[FT_SEC_LABEL_HI];
    uint64_t *flags = t->owned[FT_SEC_FLAGS];
    uint64_t *values = t->owned[FT_SEC_VALUES];

    if (l->louds.n > 0) {
        uint64_t first = pc->bit0 >> 6, last = (pc->bit0 + l->louds.n - 1) >> 6;
        uint32_t off = (uint32_t)(pc->bit0 & 63);
        uint64_t nw = (l->louds.n + 63) / 64;
        for (uint64_t k = 0; k < nw; k++) {
            uint64_t w = l->louds.words[k];
            if (k == nw - 1 && (l->louds.n & 63))
                w &= (1ull << (l->louds.n & 63)) - 1;
            or_edge(louds, first + k, first, last, w << off);
            if (off && first + k + 1 <= last)
                or_edge(louds, first + k + 1, first, last, w >> (64 - off));
        }
    }

    size_t n = l->labels.len;
    const uint32_t *lab = l->labels.data;
    const uint8_t *fl = l->flags.data;
    if (n > 0) {
        uint64_t u0 = pc->node0, u1 = pc->node0 + n; /* [u0, u1) */
        uint64_t ff = u0 >> 5, fla = (u1 - 1) >> 5;
        uint64_t hf = u0 >> 6, hla = (u1 - 1) >> 6;
        uint64_t facc = 0, hacc = 0;
        uint64_t fw = ff, hw = hf;
        for (size_t k = 0; k < n; k++) {
            uint64_t u = u0 + k;
            label_lo[u] = (uint16_t)lab[k];
            if ((u >> 5) != fw) {
                or_edge(flags, fw, ff, fla, facc);
                fw = u >> 5;
                facc = 0;
            }
            facc |= (uint64_t)fl[k] << ((u & 31) * 2);
            if ((u >> 6) != hw) {
                if (hacc)
                    or_edge(high, hw, hf, hla, hacc);
                hw = u >> 6;
                hacc = 0;
            }
            if (lab[k] >> 16)
                hacc |= 1ull << (u & 63);
        }
        or_edge(flags, fw, ff, fla, facc);
        if (hacc)
            or_edge(high, hw, hf, hla, hacc);
        if (pc->nhigh > 0) {
            /* Gather the high halves first so the packer sees a dense run. */
            uint32_t hbuf[1024];
            size_t m = 0;
            uint64_t hi = pc->hi0;
            for (size_t k = 0; k < n; k++) {
                if (lab[k] >> 16) {
                    hbuf[m++] = lab[k];
                    if (m == 1024) {
                        packed_run(label_hi, t->view.hi_bits, hi, NULL, hbuf,
                                   16, m);
                        hi += m;
                        m = 0;
                    }
                }
            }
            packed_run(label_hi, t->view.hi_bits, hi, NULL, hbuf, 16, m);
        }
    }
    packed_run(values, t->value_bits, pc->term0, l->values.data, NULL, 0,
               l->values.len);
    fti_bits_free(&l->louds);
    fti_vec_free(&l->labels);
    fti_vec_free(&l->flags);
    fti_vec_free(&l->values);
}

static void fin_pack(void *arg, int i, int n)
{
    fin_ctx *c = arg;
    (void)i;
    (void)n;
    for (;;) {
        int k = __atomic_fetch_add(&c->next, 1, __ATOMIC_RELAXED);
        if ((size_t)k >= c->norder)
            return;
        pack_piece(c->t, c->order[k]);
    }
}

/* Rank directories in parallel: each task owns a range of 512-bit blocks;
 * the first pass counts the ones of its range, the second writes the
 * directory from the prefix of the ranges before it. */
static void rank_range(const fin_ctx *c, int i, int n, uint64_t *b0,
                       uint64_t *b1)
{
    /* Ranges start on even blocks: two blocks share a directory word. */
    uint64_t ne = fti_rank_entries(c->nbits), np = (ne + 1) / 2;
    *b0 = 2 * (np * (uint64_t)i / (uint64_t)n);
    *b1 = 2 * (np * (uint64_t)(i + 1) / (uint64_t)n);
    if (*b1 > ne)
        *b1 = ne;
}

static void rank_count(void *arg, int i, int n)
{
    fin_ctx *c = arg;
    uint64_t b0, b1, acc = 0, nw = fti_bits_words(c->nbits);
    rank_range(c, i, n, &b0, &b1);
    for (uint64_t w = b0 * 8; w < b1 * 8 && w < nw; w++)
        acc += (uint64_t)__builtin_popcountll(c->words[w] & c->mask);
    c->range_sum[i] = acc;
}

static void rank_fill(void *arg, int i, int n)
{
    fin_ctx *c = arg;
    uint64_t b0, b1, acc = 0, nw = fti_bits_words(c->nbits);
    rank_range(c, i, n, &b0, &b1);
    for (int k = 0; k < i; k++)
        acc += c->range_sum[k];
    for (uint64_t b = b0; b < b1; b++) {
        fti_rank_set(c->rank, b, acc);
        for (uint64_t w = b * 8; w < b * 8 + 8 && w < nw; w++)
            acc += (uint64_t)__builtin_popcountll(c->words[w] & c->mask);
    }
}

/* rank_mt is fti_rank_build with up to threads tasks (one below a few
 * thousand blocks, where threads cost more than they save). */
static void rank_mt(fin_ctx *c, uint64_t *rank, const uint64_t *words,
                    uint64_t nbits, uint64_t mask, int threads)
{
    uint64_t ne = fti_rank_entries(nbits);
    int n = ne < 8192 ? 1 : threads;
    if (n == 1) {
        fti_rank_build(rank, words, nbits, mask);
        return;
    }
    c->rank = rank;
    c->words = words;
    c->nbits = nbits;
    c->mask = mask;
    fin_run(rank_count, c, n);
    fin_run(rank_fill, c, n);
}

/* sel0 hints in parallel: hint j is the last block whose zeros-before do
 * not pass j * FT_SELECT_SAMPLE, the same answer fti_sel0_build walks to;
 * each task finds its first block by binary search and walks from there. */
static void sel0_task(void *arg, int i, int n)
{
    fin_ctx *c = arg;
    const ft_trie *t = c->t;
    const uint64_t *rank = t->owned[FT_SEC_LOUDS_RANK];
    uint32_t *sel = t->owned[FT_SEC_LOUDS_SEL0];
    uint64_t nbits = t->view.louds_bits;
    uint64_t nblocks = (nbits + FT_BLOCK_BITS - 1) / FT_BLOCK_BITS;
    uint64_t nh = fti_sel0_entries(t->louds_zeros) - 1;
    uint64_t j0 = nh * (uint64_t)i / (uint64_t)n;
    uint64_t j1 = nh * (uint64_t)(i + 1) / (uint64_t)n;
    if (j0 >= j1)
        return;
    uint64_t target = j0 * FT_SELECT_SAMPLE;
    uint64_t lo = 0, hi = nblocks ? nblocks - 1 : 0; /* answer in [lo, hi] */
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo + 1) / 2;
        if (mid * FT_BLOCK_BITS - ft_rank_block(rank, mid) <= target)
            lo = mid;
        else
            hi = mid - 1;
    }
    uint64_t b = lo;
    for (uint64_t j = j0; j < j1; j++) {
        target = j * FT_SELECT_SAMPLE;
        while (b + 1 < nblocks &&
               (b + 1) * FT_BLOCK_BITS - ft_rank_block(rank, b + 1) <= target)
            b++;
        sel[j] = (uint32_t)b;
    }
}

int ft_tb_finish(ft_tb *tb, uint32_t max_key_len, ft_trie *t)
{
    return ft_tb_finish_parts(&tb, 1, max_key_len, 1, t, NULL);
}

static int piece_larger(const void *a, const void *b)
{
    const fin_piece *x = *(fin_piece *const *)a, *y = *(fin_piece *const *)b;
    size_t nx = x->l->labels.len, ny = y->l->labels.len;
    return nx > ny ? -1 : nx < ny;
}

int ft_tb_finish_parts(ft_tb *const *parts, size_t np, uint32_t max_key_len,
                       int threads, ft_trie *t, double *prof)
{
    memset(t, 0, sizeof *t);
    if (threads < 1)
        threads = 1;
    double t0 = fti_now();
    const size_t NL = FT_MAX_KEY_LEN_LIMIT + 1;
    fin_ctx c;
    memset(&c, 0, sizeof c);
    c.parts = parts;
    c.np = np;
    c.t = t;
    c.maxhi = calloc(np ? np : 1, sizeof *c.maxhi);
    c.maxval = calloc(np ? np : 1, sizeof *c.maxval);
    c.pieces = calloc(np ? np * NL : 1, sizeof *c.pieces);
    c.order = malloc((np ? np * NL : 1) * sizeof *c.order);
    c.range_sum = calloc((size_t)threads, sizeof *c.range_sum);
    int rc = c.maxhi && c.maxval && c.pieces && c.order && c.range_sum
                 ? FT_OK
                 : FT_ENOMEM;

    /* Parts must follow each other under distinct root children. */
    const ft_tb *prevp = NULL;
    for (size_t p = 0; p < np && rc == FT_OK; p++) {
        if (parts[p]->nkeys == 0)
            continue;
        if (prevp) {
            const fti_vec *a = &prevp->lv[1].labels, *b = &parts[p]->lv[1].labels;
            if (((const uint32_t *)b->data)[0] <=
                ((const uint32_t *)a->data)[a->len - 1])
                rc = FT_EINVAL;
        }
        prevp = parts[p];
    }
    if (rc == FT_OK) {
        fin_run(fin_scan, &c, (size_t)threads < np ? threads : (int)np);
        rc = c.rc;
    }

    /* Where every piece lands: depth-major, then part order. */
    uint64_t root_fanout = 0, nkeys = 0, u = 1, hi = 0, term = 0;
    uint64_t bit = 0;
    uint32_t maxd = 0, maxhi = 0;
    uint64_t maxval = 0;
    for (size_t p = 0; p < np && rc == FT_OK; p++) {
        if (parts[p]->nkeys == 0)
            continue;
        root_fanout += parts[p]->lv[0].deg;
        nkeys += parts[p]->nkeys;
        maxd = parts[p]->maxd > maxd ? parts[p]->maxd : maxd;
        maxhi = c.maxhi[p] > maxhi ? c.maxhi[p] : maxhi;
        maxval = c.maxval[p] > maxval ? c.maxval[p] : maxval;
    }
    bit = 2 + root_fanout + 1; /* "10", then the root's block */
    for (uint32_t d = 1; d <= maxd && rc == FT_OK; d++) {
        for (size_t p = 0; p < np; p++) {
            if (parts[p]->nkeys == 0 || d > parts[p]->maxd)
                continue;
            fin_piece *pc = FIN_PIECE(&c, p, d);
            pc->l = &parts[p]->lv[d];
            pc->node0 = u;
            pc->hi0 = hi;
            pc->term0 = term;
            pc->bit0 = bit;
            u += pc->l->labels.len;
            hi += pc->nhigh;
            term += pc->l->values.len;
            bit += pc->l->louds.n;
            if (pc->l->labels.len > 0 || pc->l->louds.n > 0)
                c.order[c.norder++] = pc;
        }
    }
    uint64_t n_nodes = u;
    uint64_t louds_bits = 2 * n_nodes + 1;
    if (rc == FT_OK && (bit != louds_bits || term != nkeys))
        rc = FT_EINTERNAL;
    /* The rank directories hold 40-bit counts (2^39 nodes). */
    if (rc == FT_OK && 2 * louds_bits >= FTI_RANK_MAX_BITS)
        rc = FT_ELIMIT;
    if (rc == FT_OK) {
        t->view.n_nodes = n_nodes;
        t->view.louds_bits = louds_bits;
        t->louds_zeros = n_nodes + 1;
        t->n_keys = nkeys;
        t->root_fanout = root_fanout;
        t->max_depth = maxd;
        t->max_key_len = max_key_len;
        t->high_nodes = hi;
        t->view.hi_bits = fti_bits_needed(maxhi);
        t->value_bits = fti_bits_needed(maxval);
        ft_trie_section_sizes(t);
    }
    double t1 = fti_now();
    for (int s = 0; s < FT_SEC_COUNT && rc == FT_OK; s++) {
        t->owned[s] = xcalloc_words((t->sec_bytes[s] + 7) / 8);
        if (t->owned[s] == NULL)
            rc = FT_ENOMEM;
        t->sec[s] = t->owned[s];
    }
    double t2 = fti_now();
    if (rc == FT_OK) {
        /* The root: its block of ones (one per depth-1 node) and flags. */
        uint64_t *louds = t->owned[FT_SEC_LOUDS];
        louds[0] = 1; /* "10" */
        for (uint64_t k = 2; k < 2 + root_fanout;) {
            if ((k & 63) == 0 && k + 64 <= 2 + root_fanout) {
                louds[k >> 6] = ~0ull;
                k += 64;
            } else {
                louds[k >> 6] |= 1ull << (k & 63);
                k++;
            }
        }
        ((uint64_t *)t->owned[FT_SEC_FLAGS])[0] =
            root_fanout ? FT_HAS_CHILD : 0;
        qsort(c.order, c.norder, sizeof *c.order, piece_larger);
        int n = (size_t)threads < c.norder ? threads : (int)c.norder;
        fin_run(fin_pack, &c, n ? n : 1);
    }
    double t3 = fti_now();
    if (rc == FT_OK) {
        rank_mt(&c, t->owned[FT_SEC_LOUDS_RANK], t->owned[FT_SEC_LOUDS],
                louds_bits, ~0ull, threads);
        int n = fti_sel0_entries(t->louds_zeros) < 8192 ? 1 : threads;
        fin_run(sel0_task, &c, n);
        uint32_t *sel = t->owned[FT_SEC_LOUDS_SEL0];
        uint64_t nblocks = (louds_bits + FT_BLOCK_BITS - 1) / FT_BLOCK_BITS;
        sel[fti_sel0_entries(t->louds_zeros) - 1] =
            (uint32_t)(nblocks ? nblocks - 1 : 0);
        rank_mt(&c, t->owned[FT_SEC_HIGH_RANK], t->owned[FT_SEC_HIGH],
                n_nodes, ~0ull, threads);
        rank_mt(&c, t->owned[FT_SEC_TERM_RANK], t->owned[FT_SEC_FLAGS],
                2 * n_nodes, 0x5555555555555555ull, threads);
    }
    double t4 = fti_now();
    if (prof) {
        prof[FT_PROF_FIN_SCAN] += t1 - t0;
        prof[FT_PROF_FIN_ALLOC] += t2 - t1;
        prof[FT_PROF_FIN_PACK] += t3 - t2;
        prof[FT_PROF_FIN_RANK] += t4 - t3;
    }
    free(c.maxhi);
    free(c.maxval);
    free(c.pieces);
    free(c.order);
    free(c.range_sum);
    if (rc) {
        ft_trie_free(t);
        return rc;
    }
    ft_trie_bind_sections(t); /* sec[] are the owned arrays */
    return FT_OK;
}
