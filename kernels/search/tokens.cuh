/*
 * search/tokens.cuh - the token -> k hash tables of positions 1..T-1
 * that the expansion reads, built by the search kernel during step 0
 * (gk_build_hash).  The per-trie tables (child table, child map) have
 * kernels of their own, in search/ctab.cuh.
 */
#ifndef FT_SEARCH_TOKENS_CUH
#define FT_SEARCH_TOKENS_CUH

/* Builds the token -> k tables of positions 1..T-1 (during step 0).
 * Entries go to the threads in an order that puts every CTA's warp 0
 * last and interleaves the CTAs: step 0's expansion units (numbered
 * across the CTAs first) sit in warp 0 of the first CTAs, so an insert
 * no longer waits behind a unit in the same warp (BW = 1000: the tables
 * ended 4.4 us after the expansion), and the inserts spread over every
 * SM. */
__device__ void gk_build_hash(const ft_gk_params &P, gk_smem *sm)
{
    uint32_t nt = gridDim.x * blockDim.x;
    /* this thread's place in its CTA with warp 0 rotated to the end */
    uint32_t r = threadIdx.x >= 32u ? threadIdx.x - 32u
                                    : threadIdx.x + blockDim.x - 32u;
    uint32_t gt = r * gridDim.x + blockIdx.x;
    uint64_t acc = 0;
    /* Many requests (sm: a lazy launch): each one's first row and row
     * count read once, by the CTA's threads together, into sm->idx
     * (after the expansion's own use of it), instead of a chain of
     * dependent loads a request in every thread, and each one's first
     * entry by warp 0.  sm->idx: [0, n) first rows, [n, 2n) row counts,
     * [2n, 3n) each request's first entry mod nt (gk_first_units). */
    const uint32_t n = P.nreq;
    const bool stage = sm != NULL && n > 1 && 3 * n <= FT_GK_SORT_MAX;
    if (stage) {
        __syncthreads();
        for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
            const ft_gk_req *q = &P.reqs[i];
            uint32_t base = q->row[1 < q->T ? 1 : q->T];
            sm->idx[i] = base;
            sm->idx[n + i] = q->rows_total - base;
        }
        __syncthreads();
        if (threadIdx.x < 32)
            gk_first_units(n, nt, sm->idx + 2 * n, [&](uint32_t i) {
                return (unsigned long long)sm->idx[n + i];
            });
        __syncthreads();
    }
    for (uint32_t i = 0; i < P.nreq; i++) {
        ft_gk_req *q = &P.reqs[i];
        uint32_t base = stage ? sm->idx[i] : q->row[1 < q->T ? 1 : q->T];
        uint32_t tot = stage ? sm->idx[n + i] : q->rows_total - base;
        if (tot == 0)
            continue;
        uint32_t first = stage ? gk_first_of(gt, sm->idx[2 * n + i], nt)
                               : (uint32_t)((gt + nt - (acc % nt)) % nt);
        for (uint32_t e = first; e < tot; e += nt) {
            uint32_t g = base + e;
            uint32_t lo = 1, hi = q->T; /* last t with row[t] <= g */
            while (hi - lo > 1) {
                uint32_t mid = (lo + hi) >> 1;
                if (q->row[mid] <= g)
                    lo = mid;
                else
                    hi = mid;
            }
            uint32_t t = lo, k = g - q->row[t];
            uint32_t tok = q->tok[g];
            float lpg = q->logp[g];
            uint64_t *tab = q->slot.hash + q->hoff[t];
            uint32_t mask = q->hmask[t];
            uint32_t h = gk_hash(tok) & mask;
            unsigned long long nv = ((unsigned long long)tok << 32) |
                                    ((unsigned long long)P.epoch << 12) | k;
            /* A failed CAS re-examines the value it returned, never a
             * reload (which the SM's L1 could answer with a stale line). */
            unsigned long long e0 = tab[h];
            for (;;) {
                if ((uint32_t)((e0 >> 12) & 0xfffffu) != P.epoch) {
                    unsigned long long old = atomicCAS(
                        (unsigned long long *)&tab[h], e0, nv);
                    if (old == e0) {
                        /* read with the entry (gk_expand_item) */
                        q->slot.hash_lp[q->hoff[t] + h] = lpg;
                        break;
                    }
                    e0 = old; /* someone took it: look again */
                    continue;
                }
                h = (h + 1) & mask;
                e0 = tab[h];
            }
        }
        acc += tot;
    }
}

#endif /* FT_SEARCH_TOKENS_CUH */
