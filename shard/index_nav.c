/*
 * index_nav.c - the public node-by-node navigation of an opened index
 * (ft_index_children and friends), a thin layer over nav.h for code that
 * must not see the trie's layout: the workload generator, bindings.
 */
#include "trie.h"

/* The private part of ft_node_children holds the high-label bookkeeping of
 * ft_child_range, so a label costs what it costs the engines. */
static ft_child_range range_of(const ft_node_children *ch)
{
    ft_child_range cr = {ch->first, ch->count, ch->priv_[0], ch->priv_[1]};
    return cr;
}

int ft_index_children(ft_node_children *ch, const ft_index *idx, uint64_t node)
{
    if (ch == NULL || idx == NULL || node >= idx->trie.view.n_nodes)
        return FT_EINVAL;
    ft_child_range cr =
        node == FT_NODE_ROOT ? idx->root : ft_children(&idx->trie.view, node);
    ch->node = node;
    ch->first = cr.first;
    ch->count = cr.deg;
    ch->priv_[0] = cr.hstart;
    ch->priv_[1] = cr.hbase;
    return FT_OK;
}

uint32_t ft_index_child_label(const ft_index *idx,
                              const ft_node_children *ch, uint64_t i)
{
    if (idx == NULL || ch == NULL)
        return 0;
    ft_child_range cr = range_of(ch);
    return ft_child_label(&idx->trie.view, &cr, cr.first + i);
}

int ft_index_child_find(uint64_t *i, const ft_index *idx,
                        const ft_node_children *ch, uint32_t tok)
{
    if (idx == NULL || ch == NULL)
        return FT_EINVAL;
    if (ch->count == 0)
        return FT_ENOTFOUND;
    ft_child_range cr = range_of(ch);
    uint64_t c = ft_find_child(&idx->trie.view, &cr, tok);
    if (c == FT_NONE)
        return FT_ENOTFOUND;
    if (i)
        *i = c - cr.first;
    return FT_OK;
}

int ft_index_node_value(uint64_t *value, const ft_index *idx, uint64_t node)
{
    if (idx == NULL || node >= idx->trie.view.n_nodes)
        return FT_EINVAL;
    if (node == FT_NODE_ROOT ||
        !(ft_node_flags(&idx->trie.view, node) & FT_TERMINAL))
        return FT_ENOTFOUND;
    if (value)
        *value = ft_trie_value(&idx->trie, node);
    return FT_OK;
}
