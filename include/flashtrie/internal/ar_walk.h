/*
 * ar_walk.h - one row of ft_ar_walk (include/flashtrie.h): from the root
 * of the trie through the model ids a row has taken, written once for the
 * CPU session (shard/ar_step.c) and the CUDA kernel (kernels/ft_ar_step.cu).
 */
#ifndef FT_AR_WALK_H
#define FT_AR_WALK_H

#include <stdint.h>

#include "nav.h"

/* include/flashtrie.h's FT_AR_DEAD and FT_AR_DONE (ar_step.c asserts it). */
#define FT_ARW_DEAD (-1)
#define FT_ARW_DONE (-2)

/* ft_arw_state says whether a beam's node (uint64) is one of those two
 * states: ft_ar_mask gives such a beam eos alone (CPU and GPU). */
FT_HD int ft_arw_state(uint64_t node)
{
    return node == (uint64_t)(int64_t)FT_ARW_DEAD ||
           node == (uint64_t)(int64_t)FT_ARW_DONE;
}

/* ft_ar_walk_row returns the state of a row that was at from (a node, or
 * FT_ARW_DEAD / FT_ARW_DONE) after len more model ids: FT_ARW_DONE when
 * from is, or one of the ids is eos (eos >= 0); else FT_ARW_DEAD when from
 * is, or is no node (n_nodes and above, other negatives: what the GPU
 * cannot report), or a token labels no child of the node before it (an
 * id outside the vocabulary, or outside 0..0xFFFFFFFF without one, labels
 * nothing); else the node reached.  ctab: the trie's child table
 * (ft_ctab_decode), or NULL: each node's range from the trie itself. */
FT_HD int64_t ft_ar_walk_row(const ft_trie_view *t, const uint64_t *ctab,
                             int64_t from, const int64_t *ids, uint32_t len,
                             const uint32_t *vocab, uint32_t vocab_len,
                             int64_t eos)
{
    if (from == FT_ARW_DONE)
        return FT_ARW_DONE;
    int dead = from < 0 || (uint64_t)from >= t->n_nodes;
    uint64_t u = dead ? 0 : (uint64_t)from;
    for (uint32_t i = 0; i < len; i++) {
        int64_t id = ids[i];
        if (eos >= 0 && id == eos)
            return FT_ARW_DONE;
        if (dead)
            continue; /* an eos further on still ends the row */
        uint32_t tok;
        if (vocab != 0) {
            if (id < 0 || (uint64_t)id >= vocab_len) {
                dead = 1;
                continue;
            }
            tok = vocab[id];
        } else {
            if (id < 0 || id > (int64_t)0xFFFFFFFFll) {
                dead = 1;
                continue;
            }
            tok = (uint32_t)id;
        }
        ft_child_range cr =
            ctab ? ft_ctab_decode(ctab[2 * u], ctab[2 * u + 1],
                                  ctab[2 * u + 2], ctab[2 * u + 3])
                 : ft_children(t, u);
        uint64_t c = cr.deg ? ft_find_child(t, &cr, tok) : FT_NONE;
        if (c == FT_NONE)
            dead = 1;
        else
            u = c;
    }
    return dead ? FT_ARW_DEAD : (int64_t)u;
}

#endif /* FT_AR_WALK_H */
