/*
 * search/ctab.cuh - the kernels that fill and check the child table and
 * the child map, once per trie at engine open (launched by
 * kernels/ft_launch.cu through the declarations in search/entry.h).
 *
 * Included last in ft_search.cu, where these kernels always stood: the
 * position of a kernel in the translation unit sets its place in the
 * cubin's symbol table, and keeping it keeps the cubin's metadata as it
 * was, not only the machine code.
 */
#ifndef FT_SEARCH_CTAB_CUH
#define FT_SEARCH_CTAB_CUH

/* ---- the child table --------------------------------------------------- */

__global__ void gk_ctab_fill(const ft_trie_view V, uint64_t *T)
{
    uint64_t n = V.n_nodes;
    for (uint64_t u = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; u <= n;
         u += (uint64_t)gridDim.x * blockDim.x) {
        /* Past the last node: its children end at n (the high labels
         * before n likewise), which closes the last node's range. */
        uint64_t first = u < n ? ft_children(&V, u).first : n;
        T[2 * u] = first;
        T[2 * u + 1] = ft_rank1(V.high, V.high_rank, first);
    }
}

__global__ void gk_ctab_check(const ft_trie_view V, const uint64_t *T,
                              unsigned long long *bad)
{
    uint64_t n = V.n_nodes;
    unsigned long long mine = 0;
    for (uint64_t u = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; u < n;
         u += (uint64_t)gridDim.x * blockDim.x) {
        ft_child_range a = ft_children(&V, u), b = ft_ctab_range(T, u);
        mine += a.first != b.first || a.deg != b.deg ||
                a.hstart != b.hstart || a.hbase != b.hbase;
    }
    if (mine)
        atomicAdd(bad, mine);
}

__global__ void gk_cmap_count_k(const ft_trie_view V, const uint64_t *T,
                                uint32_t min_deg, unsigned long long *out)
{
    uint64_t n = V.n_nodes;
    unsigned long long mine = 0;
    for (uint64_t u = 1 + blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
         u < n; u += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t d = gk_range_of(V, T, u).deg;
        mine += d >= min_deg ? d : 0;
    }
    if (mine)
        atomicAdd(out, mine);
}

/* check = 0: insert every child of the nodes in the map (a warp a node);
 * check = 1: look each up again and count those not found where they
 * belong, and (when filling) keys met twice: labels of one node repeat
 * only in a damaged trie. */
__global__ void gk_cmap_fill_k(const ft_trie_view V, const uint64_t *T,
                               uint64_t *M, uint64_t mask, uint32_t min_deg,
                               int check, unsigned long long *bad)
{
    uint64_t n = V.n_nodes;
    uint32_t lane = threadIdx.x & 31u;
    uint64_t nw = (uint64_t)gridDim.x * (blockDim.x >> 5);
    unsigned long long mine = 0;
    for (uint64_t u = 1 + (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / 32;
         u < n; u += nw) {
        ft_child_range cr = gk_range_of(V, T, u);
        if (cr.deg < min_deg)
            continue;
        for (uint64_t j = lane; j < cr.deg; j += 32) {
            uint32_t label = ft_child_label(&V, &cr, cr.first + j);
            uint64_t key = (cr.first << 32) | label;
            if (check) {
                mine += gk_cmap_find(M, mask, cr, label) != cr.first + j;
                continue;
            }
            uint64_t h = gk_cmap_hash(key) & mask;
            for (;;) {
                unsigned long long old = atomicCAS(
                    (unsigned long long *)&M[2 * h], ~0ull,
                    (unsigned long long)key);
                if (old == ~0ull) {
                    M[2 * h + 1] = j;
                    break;
                }
                if (old == key) {
                    mine++;
                    break;
                }
                h = (h + 1) & mask;
            }
        }
    }
    if (mine)
        atomicAdd(bad, mine);
}

#endif /* FT_SEARCH_CTAB_CUH */
