/*
 * ft_kernels.h - the contract between the GPU engine's host side
 * (shard/gpu_engine.c, C11) and the device code (kernels/\*.cu).
 *
 * Only plain structs and C-callable launchers live here.  Every struct that
 * crosses the host/device boundary has its size and field offsets pinned by
 * static asserts, so a change on one side cannot silently shift the other.
 *
 * One launch answers a batch of requests.  The host packs, per request, a
 * descriptor (ft_gk_req), the proposal rows cut at keff (tokens and logp, k
 * after the stable sort), and a zeroed per-step counter block into one
 * input region that travels in one copy; the kernel writes each request's
 * results into its part of one output region that travels back in one copy.
 * Arenas (candidates, beams, history, hash tables) belong to slots that are
 * allocated once at engine open; a request rides in one slot.
 */
#ifndef FT_KERNELS_H
#define FT_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "flashtrie/internal/nav.h"
#include "flashtrie/internal/forest.h"

#ifdef __cplusplus
#define FT_GK_STATIC_ASSERT(c, m) static_assert(c, m)
extern "C" {
#else
#define FT_GK_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif

#define FT_GK_MAX_T 64u
#define FT_GK_LIST_MAX 4096u /* most beams or results one request keeps */
#define FT_GK_WARP_ITEM 32u  /* proposals or children per expansion item */
#define FT_GK_LANE_PROPS 2u  /* items one warp may expand at once */

/* ft_gk_slot holds one slot's device arenas (device pointers). */
typedef struct ft_gk_slot {
    uint64_t *cand_key;     /* next candidates: ft_cand_key */
    uint64_t *cand_node;    /* next candidates: trie node */
    ft_child_range *cand_cr;/* next candidates: child range (phase A) */
    uint32_t *cand_kcut;    /* next candidates: theta_sent cut at t+1 */
    uint64_t *term_key;     /* terminal candidates of one step: ft_cand_key */
    uint64_t *term_node;    /* terminal candidates: trie node */
    ft_child_range *beam_cr;/* beam's child range, [bmax] */
    float *beam_sigma;      /* [bmax] */
    uint32_t *beam_kcut;    /* proposals that pass theta_sent, [bmax] */
    uint32_t *beam_cstart;  /* first expansion item of the beam, [bmax] */
    uint32_t *hist;         /* [t * bmax + rank] = parent rank << 16 | k */
    void *run[2];           /* running best results, ft_gk_hit [4096] each */
    uint64_t *hash;         /* token -> k tables, one per position */
    float *hash_lp;         /* beside each entry of hash, the log-prob of
                             * its (t, k): the expansion loads it with the
                             * entry instead of after it */
    uint32_t *beam_rank;    /* steps: global rank of local beam j, [bmax];
                             * NULL in the all-T kernel (rank = j) */
    uint32_t *sel_idx;      /* steps: candidate index of local best j */
    uint32_t *gsel;         /* grid selection of the next (0) and terminal
                             * (1) list: FT_GK_GSEL_WORDS each (per pass a
                             * 256-bin histogram, then the survivor count) */
    uint64_t *surv_key;     /* its survivors' keys, FT_GK_LIST_MAX per list */
    uint32_t *surv_idx;     /* and their candidate indexes */
    uint32_t *r1_cs;        /* lazy launches: a step's first round, beam
                             * j's first item in the numbering by the
                             * cuts from theta, [bmax + 1] (the last: the
                             * round's items); gk_r1_setup */
    uint32_t *r1_kc;        /* and beam j's cut at theta, [bmax] */
    uint64_t cap_cand;      /* entries of cand_* and of term_* */
    uint32_t bmax;          /* beams the slot holds */
    uint32_t tmax;          /* positions the slot holds */
} ft_gk_slot;

FT_GK_STATIC_ASSERT(sizeof(ft_gk_slot) == 192, "ft_gk_slot layout");

/* Lazy launches of at most this many requests take first rounds
 * (ft_gk_params.r1): the kernel marks those that need a second round in
 * a bit map of this many bits in shared memory. */
#define FT_GK_R1_LAZY_MAX 8192u

/* Grid selection arena of one list: FT_GK_GSEL_PASSES histograms of 256
 * bins, then the survivor counter (padded to 128 bytes). */
#define FT_GK_GSEL_PASSES 8u
#define FT_GK_GSEL_NSURV (FT_GK_GSEL_PASSES * 256u)
#define FT_GK_GSEL_WORDS (FT_GK_GSEL_NSURV + 32u)

/* ft_gk_hit is one kept terminal candidate. */
typedef struct ft_gk_hit {
    uint64_t skey;  /* ft_score_key(score) */
    uint64_t node;
    double score;
    float sigma;
    uint32_t order; /* ft_order(t, r, k) */
} ft_gk_hit;

FT_GK_STATIC_ASSERT(sizeof(ft_gk_hit) == 32, "ft_gk_hit layout");
FT_GK_STATIC_ASSERT(offsetof(ft_gk_hit, sigma) == 24, "ft_gk_hit layout");

/* Per request and step counters (zeroed by the host, in the input). */
typedef struct ft_gk_step {
    uint32_t n_next;  /* next candidates appended */
    uint32_t n_term;  /* terminal candidates appended */
    uint32_t n_beam;  /* beams entering this step (set by the step before) */
    uint32_t n_items; /* expansion items of this step */
    uint32_t n_run;   /* running results after this step */
    uint32_t err;     /* step 0 only: an arena overflowed (a bug) */
    uint32_t n_sel;   /* steps: local best next candidates (<= B) */
    uint32_t r1;      /* ft_sigma_key(theta) when this step ran a first
                       * round (ft_gk_params.r1), else 0 */
} ft_gk_step;

FT_GK_STATIC_ASSERT(sizeof(ft_gk_step) == 32, "ft_gk_step layout");

/* ft_gk_out_head starts each request's output: then n ft_gk_out_hit, then
 * n * T tokens (hit j's tokens at j * T). */
typedef struct ft_gk_out_head {
    uint32_t n;     /* results */
    uint32_t err;   /* non-zero: an arena overflowed (a bug); no result */
} ft_gk_out_head;

typedef struct ft_gk_out_hit {
    uint64_t rank;  /* terminal rank of the node: the value's index */
    uint64_t value; /* the key's value where the launch has the values on
                     * the device (ft_gk_params.values, a forest's trees'
                     * values), else 0 and the host attaches it */
    double score;
    float sigma;
    uint32_t order;
    uint32_t len;
    uint32_t pad_;
} ft_gk_out_hit;

FT_GK_STATIC_ASSERT(sizeof(ft_gk_out_head) == 8, "ft_gk_out_head layout");
FT_GK_STATIC_ASSERT(sizeof(ft_gk_out_hit) == 40, "ft_gk_out_hit layout");

/* ft_gk_req describes one request of a batch (lives in device memory). */
typedef struct ft_gk_req {
    uint32_t T, B, n;       /* positions, beam width, results */
    float theta_sent;
    uint32_t rows_total;    /* row[T] */
    uint32_t kcut0;         /* root proposals passing theta_sent */
    uint32_t items0;        /* expansion items of step 0 */
    uint32_t xoff;          /* steps: offset of the request's keys in the
                             * exchange lists (sum of earlier beams) */
    ft_child_range root;    /* the root's children */
    uint32_t keff[FT_GK_MAX_T];      /* proposals with logp > theta_tok */
    uint32_t row[FT_GK_MAX_T + 1];   /* first element of position t's row */
    uint32_t hoff[FT_GK_MAX_T];      /* hash table of position t in slot */
    uint32_t hmask[FT_GK_MAX_T];     /* its size - 1 (a power of two) */
    uint32_t pad1_[3];
    double F[FT_GK_MAX_T + 1];       /* length normalisation, host pow */
    double pad2_;
    const uint32_t *tok;    /* rows: tok[row[t] + k] */
    const float *logp;      /* rows: logp[row[t] + k] */
    ft_gk_step *steps;      /* [T] */
    ft_gk_out_head *out;    /* then hits, then tokens */
    ft_gk_slot slot;
} ft_gk_req;

FT_GK_STATIC_ASSERT(offsetof(ft_gk_req, root) == 32, "ft_gk_req layout");
FT_GK_STATIC_ASSERT(offsetof(ft_gk_req, F) % 8 == 0, "ft_gk_req layout");
FT_GK_STATIC_ASSERT(sizeof(ft_gk_req) % 16 == 0, "ft_gk_req layout");

/* ft_gk_lists is a second set of a slot's step lists: a launch of one
 * request with fused steps (ft_gk_params.fuse) keeps step t's candidate
 * lists and grid-selection counters in its slot when t is even and here
 * when t is odd, so that step t + 1's expansion can fill its lists while
 * a slower CTA still reads step t's. */
typedef struct ft_gk_lists {
    uint64_t *cand_key, *cand_node;
    ft_child_range *cand_cr;
    uint32_t *cand_kcut;
    uint64_t *term_key, *term_node;
    uint32_t *gsel;
    uint32_t *pad_;
} ft_gk_lists;

FT_GK_STATIC_ASSERT(sizeof(ft_gk_lists) == 64, "ft_gk_lists layout");

/* A slot's step lists as one ft_gk_lists: the kernel's even steps, and
 * the second set the host lends a fused launch. */
FT_HD ft_gk_lists ft_gk_lists_of(const ft_gk_slot *s)
{
    ft_gk_lists l;
    l.cand_key = s->cand_key;
    l.cand_node = s->cand_node;
    l.cand_cr = s->cand_cr;
    l.cand_kcut = s->cand_kcut;
    l.term_key = s->term_key;
    l.term_node = s->term_node;
    l.gsel = s->gsel;
    l.pad_ = NULL;
    return l;
}

/* A forest (issue 36): the tries of a shard group whose shards share one
 * GPU, searched by one launch of the search kernel as if they were one
 * trie whose root's children are the union of the shards' (the shards
 * split the library by first token, so those never collide).  A node of
 * shard s travels through the kernel as (s << FT_GK_TREE_SHIFT) | its
 * node id in shard s: a child range's first and hstart carry the same
 * bits, so first + j is child j of shard s.  Per shard, what the kernel
 * reads of it (device pointers: the trie's view, its child table and
 * map, its terminal-rank directory) and the global key index of its first
 * key (the group's key base), which the terminal rank is offset by. */
#define FT_GK_TREE_SHIFT FT_FOREST_TREE_SHIFT
#define FT_GK_TREE_MASK FT_FOREST_TREE_MASK
#define FT_GK_FOREST_MAX FT_FOREST_MAX
/* The forest's root map (ft_gk_params.root_map with forest): label ->
 * (shard << FT_GK_ROOT_SHIFT) | the child's node id in its shard (> 0:
 * the root is node 0), 0 if no shard has it (include/flashtrie/internal/
 * forest.h). */
#define FT_GK_ROOT_SHIFT FT_FOREST_ROOT_SHIFT
#define FT_GK_ROOT_MASK FT_FOREST_ROOT_MASK

typedef struct ft_gk_tree {
    ft_trie_view view;
    const uint64_t *ctab;      /* or NULL */
    const uint64_t *cmap;      /* or NULL */
    uint64_t cmap_mask;
    const uint64_t *term_rank;
    uint64_t key_base;
    uint32_t cmap_min;
    uint32_t value_bits;       /* with values */
    const uint64_t *values;    /* the tree's values (value_bits each, by
                                * its own key index), or NULL */
} ft_gk_tree;

FT_GK_STATIC_ASSERT(sizeof(ft_gk_tree) == sizeof(ft_trie_view) + 56,
                    "ft_gk_tree layout");

/* ft_gk_params is the kernel's one argument, passed by value. */
typedef struct ft_gk_params {
    ft_trie_view view;      /* device pointers */
    ft_gk_req *reqs;        /* [nreq] */
    uint32_t nreq;
    uint32_t epoch;         /* hash table generation, 1 .. 2^20-1 */
    uint64_t *prof;         /* FT_GK_PROFILE builds: clock64 marks, or NULL */
    const uint64_t *term_rank; /* terminal flags before each 256 nodes */
    uint32_t lazy;          /* 1: child ranges of the selected beams only,
                             * by the selecting CTA (throughput); 0: of every
                             * next candidate, by the whole grid (latency) */
    uint32_t root_n;        /* entries of root_map (0: no map) */
    const uint32_t *root_map; /* label -> 1 + index among the root's
                               * children, 0 if none: one load for step 0 */
    uint32_t gsel_min;      /* a list longer than this (and than its limit)
                             * is selected by the whole grid */
    uint32_t gsel_cap;      /* the grid's radix passes stop once at most
                             * max(limit, gsel_cap) keys survive; 0: the
                             * smallest power of two >= limit */
    uint32_t eager_max;     /* in a launch of few requests, the first this
                             * many next candidates of a step get their
                             * child range in the expansion */
    uint32_t spread;        /* 1: every list selected by many CTAs
                             * (gk_select_spread): not lazy, every short
                             * list within FT_GK_LIST_MAX, every next
                             * candidate's range eager or from the grid
                             * selection */
    const uint64_t *ctab;   /* child table (ft_gk_ctab_build), or NULL:
                             * ft_children from the succinct trie */
    const uint64_t *cmap;   /* child map (ft_gk_cmap_build), or NULL */
    uint64_t cmap_mask;     /* its entries - 1 */
    uint32_t cmap_min;      /* nodes with this many children are in it */
    uint32_t pair_items;    /* a step of at least this many expansion
                             * items takes them two at a time (0: one per
                             * warp of the grid) */
    uint32_t in_n16;        /* with in_src: 16-byte words of the input */
    uint32_t r1;            /* a launch of one request (spread) or a
                             * lazy one: a step whose proposals come to
                             * at least twice r1 x max(B, n) first
                             * expands only the best ~r1 x max(B, n) of
                             * them, the rest only if those were not
                             * enough, if the step has at least r1_items
                             * expansion items (per request); 0: never */
    const void *in_src;     /* NULL: the host copied the input region to
                             * reqs; else the pinned host input region as
                             * the device sees it (mapped): the kernel
                             * copies in_n16 words of it to reqs first */
    uint32_t fuse;          /* 1 (a spread launch of one request): one grid
                             * barrier a step, every CTA but the last
                             * fuse_term selecting the next list on its
                             * own and expanding the next step from it
                             * while those merge the terminal list; step
                             * t's lists in alt when t is odd */
    uint32_t fuse_term;     /* CTAs that merge the terminal lists */
    ft_gk_lists alt;
    uint32_t r1_items;      /* see r1 */
    uint32_t done_seq;      /* see done */
    uint32_t *done_ctr;     /* with done: a device word, 0 between
                             * launches, that counts the CTAs out */
    uint32_t *done;         /* NULL, or a word of mapped pinned host memory
                             * that the last CTA to finish sets to
                             * done_seq once every CTA's writes (the
                             * results, to mapped memory too) are visible
                             * to the host: the host spins on it instead of
                             * waiting for the kernel's end to reach the
                             * stream */
    uint32_t local_max;     /* with fuse: a long next list of at most this
                             * many candidates (<= eager_max) is narrowed
                             * by each CTA that selects it, alone, not by
                             * the grid (gk_local_narrow); 0: never */
    uint32_t pf_ranges;     /* bits 0-1, 1 / 2: the expansion prefetches
                             * to L2 / L1 the child table entries of every
                             * child it examines, with the child's flags,
                             * when the launch computes the new beams'
                             * ranges (gk_eager); bit 2: and the first
                             * label and flag lines of every new beam's
                             * children to L2 (gk_pf_next).  The engine
                             * sets 6 (ft_engine_opts.prefetch) or 0; the
                             * other levels were measured against 6
                             * (docs/BENCHMARKS.md 3m) and stay for such
                             * comparisons */
    uint32_t local_cache;   /* with local_max: the first this many places
                             * of such a list each CTA keeps in shared
                             * memory for its passes (capped at what fits,
                             * GK_LCACHE: 7,170 places); the
                             * rest it reads through L2 each pass */
    uint32_t nforest;       /* with forest: its trees */
    const ft_gk_tree *forest; /* NULL, or the trees of a forest (device
                             * memory, [nforest]): then view, ctab, cmap
                             * and term_rank are not read, and root_map
                             * is the forest's (FT_GK_ROOT_SHIFT) */
    const uint64_t *root_tab; /* with forest and no root_map (root_n 0):
                             * the forest's root children sorted by label,
                             * root_cnt pairs (label, node with its tree's
                             * bits), searched by step 0 */
    uint32_t root_cnt;
    uint32_t value_bits;    /* with values */
    const uint64_t *values; /* the keys' values (value_bits each, by key
                             * index) for the results, or NULL: the host
                             * attaches them (a forest's are its trees') */
} ft_gk_params;

FT_GK_STATIC_ASSERT(sizeof(ft_gk_params) == sizeof(ft_trie_view) + 256,
                    "ft_gk_params layout");

/* ft_gk_xparams is the step kernel's second argument: the exchange
 * buffers of a shard group (device memory) and which phases to run.
 * send[xoff .. xoff + B) gets request's local best B next keys of step t,
 * sorted and padded with FT_KEY_NONE; recv[s * len + xoff ..] holds shard
 * s's list of step t - 1 (this shard's own too), read by the keep. */
typedef struct ft_gk_xparams {
    uint64_t *send;         /* [len] */
    const uint64_t *recv;   /* [nshards * len] */
    uint64_t len;
    uint32_t shard, nshards;
    uint32_t t;             /* the step to expand */
    uint32_t keep;          /* 1: first keep step t - 1 from recv */
} ft_gk_xparams;

FT_GK_STATIC_ASSERT(sizeof(ft_gk_xparams) == 40, "ft_gk_xparams layout");

/* ft_gk_kxparams is the second argument of the shard kernel
 * (ft_gk_xstep_kernel, issue 36): one persistent cooperative launch per
 * shard, all sharing one GPU, that runs every step of a batch and
 * exchanges the shards' lists in device memory.  Step t's lists are at
 * list[t & 1] (shard s's at + s * len, as fti_engine_gpu_bind_lists
 * lays them out); after writing its list every CTA of every shard
 * arrives at *ctr and waits until it reaches base + (t + 1) * total (the
 * CTAs of all shards' launches), bounded by timeout clock64 cycles: a
 * wait that runs out (or sees *err) sets *err and the shard's *abort,
 * and the launch stops at its next step (the caller then redoes the
 * batch another way). */
typedef struct ft_gk_kxparams {
    uint64_t *list[2];            /* [nshards * len] each */
    unsigned long long *ctr;      /* arrivals, never reset between batches */
    uint32_t *err;                /* set by a wait that ran out */
    uint32_t *abort;              /* this shard's: its CTAs stop */
    uint32_t *herr;               /* mapped host word: set with *err */
    unsigned long long *prof;     /* NULL, or this shard's timeline (CTA 0,
                                   * %globaltimer ns): [0] the start,
                                   * [1 + 4t] step t's arrival at the
                                   * meeting, [2 + 4t] its departure,
                                   * [3 + 4t] the end of its keep (t > 0),
                                   * [4 + 4t] of its expansion */
    unsigned long long base;      /* *ctr before this batch */
    unsigned long long timeout;   /* clock64 cycles */
    uint64_t len;
    uint32_t shard, nshards;
    uint32_t tmax;                /* steps of the batch */
    uint32_t total;               /* CTAs of every shard's launch */
    uint32_t spread;              /* 0: one CTA a list; 1: lists selected
                                   * by many CTAs where that is cheaper,
                                   * 2: always (search/shard.cuh,
                                   * gk_shard_select_spread); not 0 only
                                   * where the unsharded engine would
                                   * spread (ft_gk_params.spread), and
                                   * the launch then takes all of
                                   * gk_smem */
    uint32_t early;               /* 1: the beams built before the
                                   * meeting, the keep by every CTA
                                   * (search/shard.cuh); at most
                                   * FT_GK_EARLY_MAX requests */
} ft_gk_kxparams;

/* The most requests of a shard kernel's batch with early beams: every CTA
 * keeps every request. */
#define FT_GK_EARLY_MAX 3u
/* The fewest CTAs that select one list together in a shard kernel
 * (ft_gk_kxparams.spread 1; search/shard.cuh, gk_spread_wide). */
#define FT_GK_SPREAD_MIN_G 32u

FT_GK_STATIC_ASSERT(sizeof(ft_gk_kxparams) == 104, "ft_gk_kxparams layout");

/* ft_gk_nxparams is the third argument of the NCCL device-API shard
 * kernel (ft_gk_nstep_kernel, kernels/search/xnccl.cuh, issue 36): the
 * shards of a group on several GPUs of one host, one NCCL rank (and one
 * persistent launch) per GPU, exchange their lists through NCCL symmetric
 * memory.  Every rank's window (an ncclMemAlloc buffer registered with
 * ncclCommWindowRegister, NCCL_WIN_COLL_SYMMETRIC) has the same layout,
 * at these byte offsets: the inbox (nranks u64 words: word r holds the
 * last step signal of rank r), the words (u32: the abandon word, which a
 * wait that ran out sets on every rank; this rank's CTA counter; this
 * rank's abort word) and the two step lists (list[t & 1], shard s's at s
 * * len keys, as fti_engine_gpu_bind_lists lays them out).  At step t
 * every CTA writes its requests' lists into its own window and, through
 * LSA pointers (ncclGetLsaPointer), into every peer's; the last CTA of
 * the rank to arrive stores seq + t + 1 into word `rank` of every rank's
 * inbox (a release store at system scope); every CTA then waits, bounded
 * by the kxparams' timeout, until every word of its own inbox holds seq
 * + t + 1.  The kxparams' ctr, err, abort and list are not used (the
 * window holds them); herr, prof, timeout, len, shard, nshards and tmax
 * are. */
typedef struct ft_gk_nxparams {
    void *win;               /* this rank's ncclWindow_t */
    unsigned long long seq;  /* every inbox word before this batch */
    uint64_t inbox;          /* byte offsets in every rank's window */
    uint64_t words;
    uint64_t list[2];
    uint32_t rank, nranks;   /* this rank's place in the LSA team, its size
                              * (rank == the kxparams' shard) */
} ft_gk_nxparams;

FT_GK_STATIC_ASSERT(sizeof(ft_gk_nxparams) == 56, "ft_gk_nxparams layout");

/* ft_gk_sel_key and friends: expansion path choice shared by host (step 0)
 * and device.  The hash path (iterate children, look proposals up) is taken
 * when the beam has fewer children than passing proposals; position 0 has
 * no table (it is built during step 0). */
/* The hash path (lanes take a beam's children and look their labels up in
 * the position's token -> k table) or the proposal path (lanes take
 * proposals and binary-search the beam's children): the same candidates
 * either way.  A binary search is a chain of ~log2(deg) dependent loads
 * (two per step above label 65535), a hash lookup two: the hash path
 * wins until the children outnumber the passing proposals several times
 * (FT_GK_HASH_FACTOR, docs/gpu-engine.md). */
#ifndef FT_GK_HASH_FACTOR
#define FT_GK_HASH_FACTOR 4u
#endif
FT_HD uint32_t ft_gk_use_hash(uint32_t t, uint64_t deg, uint32_t kcut)
{
    return t > 0 && deg < (uint64_t)kcut * FT_GK_HASH_FACTOR;
}

FT_HD uint32_t ft_gk_items(uint32_t t, uint64_t deg, uint32_t kcut)
{
    uint64_t len = ft_gk_use_hash(t, deg, kcut) ? deg : kcut;
    if (deg == 0)
        len = 0;
    return (uint32_t)((len + FT_GK_WARP_ITEM - 1) / FT_GK_WARP_ITEM);
}

/* ft_gk_config reports the launch shape: threads per block, dynamic shared
 * memory and the cooperative grid (occupancy x SMs) on the current
 * device.  Returns a cudaError_t as int (0 = success). */
int ft_gk_config(int *grid, int *block, size_t *smem);

/* The profile marks (P.prof, FT_GK_PROFILE builds): 4 clock64 marks a
 * step from slot 0, then from FT_GK_PROF_LEN request 0's next and
 * terminal list lengths, 2 a step; FT_GK_PROF_WORDS in all. */
#define FT_GK_PROF_LEN 512u
#define FT_GK_PROF_WORDS (FT_GK_PROF_LEN + 2u * FT_GK_MAX_T)
/* Profile builds, launches that do not fuse: %globaltimer (ns, one clock
 * for every SM) at FT_GK_PROF_GT + 0 the first CTA's entry (atomicMin;
 * the host sets it to ~0 before the launch), + 1 the last CTA's entry, + 2
 * the last CTA's end of step 0's expansion, + 3 of the token tables
 * (gk_build_hash), + 4 CTA 0's first mark, + 5 the last CTA's exit
 * (atomicMax; the host zeroes them). */
#define FT_GK_PROF_GT (FT_GK_PROF_LEN - 8u)
FT_GK_STATIC_ASSERT(4u * FT_GK_MAX_T + 2u <= FT_GK_PROF_GT,
                    "profile marks overlap the list lengths");

#ifdef FT_GK_PROFILE
/* ft_gk_prof_sub copies the selection's finer clock64 marks (profile
 * builds only; kernels/search/profile.cuh says which). */
int ft_gk_prof_sub(uint64_t *out, size_t n);
/* The chain profile of fused launches: zeroed before a launch, taken
 * after it, and at the end handed line by line to emit (the engine logs
 * them; kernels/search/profile.cuh says what they hold). */
int ft_gk_prof_chain_reset(void *stream);
int ft_gk_prof_chain_take(uint32_t T, uint32_t ne, uint32_t grid);
void ft_gk_prof_chain_print(int khz, void (*emit)(const char *line));
#endif

/* ft_gk_graphs holds one engine's launch graphs: per instance of the
 * search kernel a CUDA graph of its one cooperative kernel node, made at
 * its first launch; each launch then sets the node's parameters and
 * launches the graph (on the H200 ~2.5 us sooner at the GPU than
 * cudaLaunchCooperativeKernel, docs/BENCHMARKS.md 3k).  If a graph cannot
 * be made, the launches fall back to cudaLaunchCooperativeKernel. */
typedef struct ft_gk_graphs ft_gk_graphs;

/* ft_gk_graphs_new returns a set with every instance's graph made for the
 * launch shape (ft_gk_config's) on the current device, so that no search
 * pays for making one; NULL if out of memory (then launch without), a
 * set that launches plainly if the graphs cannot be made.
 * ft_gk_graphs_free frees one (NULL: nothing), on the device it was made
 * on. */
ft_gk_graphs *ft_gk_graphs_new(int grid, int block, size_t smem);
void ft_gk_graphs_free(ft_gk_graphs *gs);

/* ft_gk_launch launches the search kernel for a batch on stream (a
 * cudaStream_t), through gs's graphs (gs NULL: a plain cooperative
 * launch).  Returns a cudaError_t as int. */
int ft_gk_launch(const ft_gk_params *p, int grid, int block, size_t smem,
                 void *stream, ft_gk_graphs *gs);

/* ft_gk_ctab_build fills the child table ctab (2 x (n_nodes + 1) words,
 * device memory) of the trie view: per node its first child and the high
 * labels before that child, so that a child range is two adjacent loads
 * instead of a chain of select/rank misses.  It then checks every node's
 * range from the table against ft_children and stores the number that
 * differ (0 for a sound trie; the caller drops the table otherwise) in
 * *bad.  Synchronous.  Returns a cudaError_t as int. */
int ft_gk_ctab_build(const ft_trie_view *view, uint64_t *ctab,
                     unsigned long long *bad, void *stream);

/* The child map: for every node but the root with at least min_deg
 * children, an open-addressing table (2 words an entry: key, child index)
 * from key = first child << 32 | label to the child's index in its
 * parent's range; empty entries are all ones.  Only for tries of fewer
 * than 2^32 - 1 nodes.  ft_gk_cmap_count stores the entries it needs in
 * *entries; ft_gk_cmap_build fills cmap (mask + 1 entries, set to all
 * ones by the caller) and then looks every child up again, storing the
 * number that fail (0 for a sound trie; the caller drops the map
 * otherwise) in *bad.  ctab may be NULL.  Synchronous.  Return a
 * cudaError_t as int. */
int ft_gk_cmap_count(const ft_trie_view *view, const uint64_t *ctab,
                     uint32_t min_deg, unsigned long long *entries,
                     void *stream);
int ft_gk_cmap_build(const ft_trie_view *view, const uint64_t *ctab,
                     uint64_t *cmap, uint64_t mask, uint32_t min_deg,
                     unsigned long long *bad, void *stream);

/* ft_gk_step_config is ft_gk_config for the step kernel. */
int ft_gk_step_config(int *grid, int *block, size_t *smem);

/* ft_gk_step_launch enqueues one decode step of a shard group's batch:
 * (keep t - 1 from recv when x->keep,) expand step t, select the local best
 * B into send and merge the terminal candidates into the running results
 * (in the request's last step: backtrace and write the output).  One
 * cooperative launch.  Returns a cudaError_t as int. */
int ft_gk_step_launch(const ft_gk_params *p, const ft_gk_xparams *x,
                      int grid, int block, size_t smem, void *stream);

/* ft_gk_xstep_config is ft_gk_config for the shard kernel (every CTA
 * the GPU holds at once: the shards' launches share them). */
int ft_gk_xstep_config(int *grid, int *block, size_t *smem);

/* ft_gk_xstep_launch enqueues all steps of a shard's batch in one
 * cooperative launch (ft_gk_kxparams); the other shards' launches must
 * run at the same time (their grids together within
 * ft_gk_xstep_config's).  Returns a cudaError_t as int. */
int ft_gk_xstep_launch(const ft_gk_params *p, const ft_gk_kxparams *k,
                       int grid, int block, size_t smem, void *stream);

/* ft_gk_nstep_config is ft_gk_config for the NCCL device-API shard
 * kernel; cudaErrorNotSupported (as int) in a build without it (no
 * nccl_device.h of NCCL 2.28 or later at build time). */
int ft_gk_nstep_config(int *grid, int *block, size_t *smem);

/* ft_gk_nstep_launch enqueues all steps of a rank's batch in one
 * cooperative launch of the NCCL device-API shard kernel (k and nx);
 * grid is cut to what the kernel can hold at once on the current device.
 * Every rank's launch must run at the same time.  Returns a cudaError_t
 * as int. */
int ft_gk_nstep_launch(const ft_gk_params *p, const ft_gk_kxparams *k,
                       const ft_gk_nxparams *nx, int grid, int block,
                       size_t smem, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* FT_KERNELS_H */
