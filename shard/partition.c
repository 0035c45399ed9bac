/*
 * partition.c - sizing the root's subtrees, choosing the shard ranges, and
 * writing the shards and their manifest (ft_split).
 */
#include "flashtrie/internal/cores.h"
#include "partition.h"

#include <errno.h>
#include <pthread.h>
#include <unistd.h>

int ft_root_subtrees(ft_subtree **out, uint64_t *n, const ft_index *idx)
{
    const ft_trie *t = &idx->trie;
    const ft_trie_view *v = &t->view;
    uint64_t F = idx->root.deg;
    *out = NULL;
    *n = F;
    ft_subtree *st = calloc(F ? F : 1, sizeof *st);
    /* b[i] is where root child i's nodes of the current depth start, b[F]
     * where the depth's last range ends; hr and tr are the high-label and
     * terminal ranks at those nodes. */
    uint64_t *b = malloc((F + 1) * sizeof *b);
    uint64_t *hr = malloc((F + 1) * sizeof *hr);
    uint64_t *tr = malloc((F + 1) * sizeof *tr);
    if (st == NULL || b == NULL || hr == NULL || tr == NULL) {
        free(st);
        free(b);
        free(hr);
        free(tr);
        return FT_ENOMEM;
    }
    for (uint64_t i = 0; i < F; i++)
        st[i].tok = ft_child_label(v, &idx->root, idx->root.first + i);
    for (uint64_t i = 0; i <= F; i++)
        b[i] = idx->root.first + i;
    /* A damaged unverified file must not make this loop run away: the
     * boundaries stay within the nodes, and there are at most max_depth + 1
     * levels. */
    uint64_t nn = v->n_nodes;
    for (uint32_t level = 0; F > 0 && b[0] < b[F] && level <= t->max_depth;
         level++) {
        for (uint64_t i = 0; i <= F; i++) {
            if (i > 0 && b[i] == b[i - 1]) {
                hr[i] = hr[i - 1];
                tr[i] = tr[i - 1];
                continue;
            }
            hr[i] = ft_rank1(v->high, v->high_rank, b[i]);
            tr[i] = ft_term_rank(v->flags, t->term_rank, b[i]);
        }
        for (uint64_t i = 0; i < F; i++) {
            st[i].nodes += b[i + 1] - b[i];
            st[i].high += hr[i + 1] - hr[i];
            st[i].keys += tr[i + 1] - tr[i];
        }
        /* The children of the nodes [b[i], b[i+1]) are
         * [first_child(b[i]), first_child(b[i+1])), first_child(u) being
         * select0(u) - u; equal boundaries share one select. */
        uint64_t prev_in = FT_NONE, prev_out = 0;
        for (uint64_t i = 0; i <= F; i++) {
            if (b[i] != prev_in) {
                prev_in = b[i];
                prev_out = ft_select0(v, b[i]) - b[i];
                if (prev_out > nn)
                    prev_out = nn;
            }
            b[i] = prev_out;
        }
    }
    free(b);
    free(hr);
    free(tr);
    *out = st;
    return FT_OK;
}

uint64_t ft_shard_trie_bytes(uint64_t nodes, uint64_t high, uint32_t hi_bits)
{
    ft_trie t;
    memset(&t, 0, sizeof t);
    t.view.n_nodes = nodes + 1;
    t.view.louds_bits = 2 * t.view.n_nodes + 1;
    t.louds_zeros = t.view.n_nodes + 1;
    t.high_nodes = high;
    t.view.hi_bits = hi_bits;
    ft_trie_section_sizes(&t);
    return ft_trie_bytes_of(&t);
}

void ft_format_bytes(char *out, size_t len, uint64_t n)
{
    static const char *units[] = {"KB", "MB", "GB", "TB", "PB"};
    if (n < 1024) {
        snprintf(out, len, "%llu bytes", (unsigned long long)n);
        return;
    }
    double x = (double)n / 1024.0;
    int u = 0;
    while (x >= 1024.0 && u < 4) {
        x /= 1024.0;
        u++;
    }
    snprintf(out, len, "%.1f %s", x, units[u]);
}

/* The cost of a range of root children comes from prefix sums, so the
 * partitioner never walks a range twice. */
typedef struct pcost {
    const uint64_t *pn, *ph; /* prefix sums of nodes and high nodes */
    uint64_t F;
    uint32_t hi_bits;
} pcost;

static uint64_t cost(const pcost *c, uint64_t a, uint64_t b)
{
    return ft_shard_trie_bytes(c->pn[b] - c->pn[a], c->ph[b] - c->ph[a],
                               c->hi_bits);
}

/* reach is the largest b in (a, F] whose range [a, b) fits limit; the
 * single child a must fit. */
static uint64_t reach(const pcost *c, uint64_t a, uint64_t limit)
{
    uint64_t lo = a + 1, hi = c->F;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo + 1) / 2;
        if (cost(c, a, mid) <= limit)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* shards_needed counts greedy shards under limit, stopping past max. */
static uint64_t shards_needed(const pcost *c, uint64_t limit, uint64_t max)
{
    uint64_t k = 0;
    for (uint64_t a = 0; a < c->F && k <= max; k++)
        a = reach(c, a, limit);
    return k;
}

void ft_partition_free(ft_partition *p)
{
    free(p->parts);
    p->parts = NULL;
    p->n = 0;
}

int ft_partition_make(ft_partition *p, const ft_index *idx, uint32_t nshards,
                      uint64_t budget, char *errbuf, size_t errlen)
{
    memset(p, 0, sizeof *p);
    FT_RETURN_ERROR_IF(nshards == 0 && budget == 0, FT_EINVAL,
                       "partition: give a shard count or a shard byte budget");
    FT_RETURN_ERROR_IF(nshards > FT_MANIFEST_MAX_SHARDS, FT_EINVAL,
                       "partition: %u shards, at most %u allowed", nshards,
                       FT_MANIFEST_MAX_SHARDS);
    uint64_t F = idx->root.deg;
    FT_RETURN_ERROR_IF(nshards > 0 && F < nshards, FT_ELIMIT,
                       "the root has %llu children (first tokens), fewer than "
                       "the %u shards asked for: top-level partitioning "
                       "cannot make more shards than first tokens",
                       (unsigned long long)F, nshards);
    FT_RETURN_ERROR_IF(F == 0, FT_ELIMIT,
                       "the library is empty: there is nothing to shard");
    ft_subtree *st;
    uint64_t nst;
    int rc = ft_root_subtrees(&st, &nst, idx);
    if (rc)
        return rc;
    uint64_t *pn = malloc((F + 1) * sizeof *pn);
    uint64_t *ph = malloc((F + 1) * sizeof *ph);
    uint64_t *pk = malloc((F + 1) * sizeof *pk);
    if (pn == NULL || ph == NULL || pk == NULL) {
        rc = FT_ENOMEM;
        goto out;
    }
    pn[0] = ph[0] = pk[0] = 0;
    for (uint64_t i = 0; i < F; i++) {
        pn[i + 1] = pn[i] + st[i].nodes;
        ph[i + 1] = ph[i] + st[i].high;
        pk[i + 1] = pk[i] + st[i].keys;
    }
    pcost c = {pn, ph, F, idx->trie.view.hi_bits};
    uint64_t biggest = 0, big_at = 0;
    for (uint64_t i = 0; i < F; i++) {
        uint64_t x = cost(&c, i, i + 1);
        if (x > biggest) {
            biggest = x;
            big_at = i;
        }
    }
    uint64_t limit, n;
    if (nshards > 0) {
        /* The smallest limit under which greedy needs at most nshards:
         * greedy is optimal for contiguous ranges of a monotone cost. */
        uint64_t lo = biggest, hi = cost(&c, 0, F);
        while (lo < hi) {
            uint64_t mid = lo + (hi - lo) / 2;
            if (shards_needed(&c, mid, nshards) <= nshards)
                hi = mid;
            else
                lo = mid + 1;
        }
        limit = lo;
        n = nshards;
    } else {
        if (biggest > budget) {
            char a[32], bb[32];
            ft_format_bytes(a, sizeof a, biggest);
            ft_format_bytes(bb, sizeof bb, budget);
            fti_errf(errbuf, errlen,
                     "first token %u: subtree of %s (%llu bytes) exceeds "
                     "--shard-bytes %s (%llu bytes): top-level partitioning "
                     "cannot split it",
                     st[big_at].tok, a, (unsigned long long)biggest, bb,
                     (unsigned long long)budget);
            rc = FT_ELIMIT;
            goto out;
        }
        limit = budget;
        n = shards_needed(&c, limit, FT_MANIFEST_MAX_SHARDS);
        if (n > FT_MANIFEST_MAX_SHARDS) {
            fti_errf(errbuf, errlen,
                     "--shard-bytes %llu needs more than %u shards",
                     (unsigned long long)budget, FT_MANIFEST_MAX_SHARDS);
            rc = FT_ELIMIT;
            goto out;
        }
    }
    p->parts = calloc(n, sizeof *p->parts);
    if (p->parts == NULL) {
        rc = FT_ENOMEM;
        goto out;
    }
    p->n = (uint32_t)n;
    uint64_t a = 0;
    for (uint64_t s = 0; s < n; s++) {
        /* Close a shard early when only one child per shard is left, so
         * exactly n come out, none empty; single children fit the limit. */
        uint64_t left = n - 1 - s;
        uint64_t b = left == 0 ? F : reach(&c, a, limit);
        if (b > F - left)
            b = F - left;
        ft_part *pt = &p->parts[s];
        pt->c0 = a;
        pt->c1 = b;
        pt->lo = s == 0 ? 0 : st[a].tok;
        pt->hi = s == n - 1 ? UINT32_MAX : st[b].tok - 1;
        pt->keys = pk[b] - pk[a];
        pt->nodes = 1 + pn[b] - pn[a];
        pt->bytes = cost(&c, a, b);
        a = b;
    }
out:
    free(pn);
    free(ph);
    free(pk);
    free(st);
    return rc;
}

/* ---- writing the shards ----------------------------------------------- */

typedef struct split_job {
    const ft_index *idx;
    const ft_part *part;
    ft_manifest_shard *entry;
    char *final;    /* the shard file's name in place */
    char *tmp;      /* where it is written first */
    uint32_t i, n;
    int rc;
    char err[512];
} split_job;

typedef struct split_ctx {
    split_job *jobs;
    uint32_t n;
    uint32_t next; /* taken with __atomic_fetch_add */
} split_ctx;

typedef struct add_ctx {
    ft_tb *tb;
    int rc;
} add_ctx;

static int add_key(const uint32_t *toks, size_t n, uint64_t value, void *arg)
{
    add_ctx *a = arg;
    a->rc = ft_tb_add(a->tb, toks, (uint32_t)n, value);
    return a->rc != FT_OK;
}

static void build_shard(split_job *j)
{
    double t0 = fti_now();
    const ft_index *idx = j->idx;
    const ft_part *pt = j->part;
    add_ctx a = {NULL, FT_OK};
    j->rc = ft_tb_create(&a.tb);
    for (uint64_t c = pt->c0; c < pt->c1 && j->rc == FT_OK; c++) {
        uint32_t tok = ft_child_label(&idx->trie.view, &idx->root,
                                      idx->root.first + c);
        int rc = ft_index_prefix(NULL, idx, &tok, 1, 0, add_key, &a);
        j->rc = a.rc ? a.rc : rc;
    }
    if (j->rc) {
        ft_tb_destroy(a.tb);
        fti_errf(j->err, sizeof j->err, "shard %u: cannot collect its keys: %s",
                 j->i, ft_strerror(j->rc));
        return;
    }
    ft_trie t;
    j->rc = ft_tb_finish(a.tb, idx->trie.max_key_len, &t);
    ft_tb_destroy(a.tb);
    if (j->rc) {
        fti_errf(j->err, sizeof j->err, "shard %u: cannot build its trie: %s",
                 j->i, ft_strerror(j->rc));
        return;
    }
    if (t.n_keys != pt->keys || t.view.n_nodes != pt->nodes) {
        fti_errf(j->err, sizeof j->err,
                 "shard %u: %llu keys and %llu nodes, the partition counted "
                 "%llu and %llu", j->i, (unsigned long long)t.n_keys,
                 (unsigned long long)t.view.n_nodes,
                 (unsigned long long)pt->keys, (unsigned long long)pt->nodes);
        ft_trie_free(&t);
        j->rc = FT_EINTERNAL;
        return;
    }
    j->rc = ft_trie_write(&t, j->tmp, j->err, sizeof j->err);
    ft_trie_free(&t);
    if (j->rc)
        return;
    /* The manifest records what was written, read back from the file. */
    ft_index *si;
    j->rc = ft_index_open(&si, j->tmp, FT_OPEN_NO_VERIFY, j->err,
                          sizeof j->err);
    if (j->rc)
        return;
    ft_manifest_shard *e = j->entry;
    e->lo = pt->lo;
    e->hi = pt->hi;
    e->keys = si->trie.n_keys;
    e->nodes = si->trie.view.n_nodes;
    e->trie_bytes = ft_index_trie_bytes(si);
    e->file_bytes = si->map_len;
    e->checksum = ft_index_head_checksum(si);
    ft_index_close(si);
    char sz[32];
    ft_format_bytes(sz, sizeof sz, e->trie_bytes);
    FT_INFO("split: shard %u of %u: first tokens %u..%u, %llu keys, %llu "
            "nodes, %s of trie, %.2f s", j->i, j->n, e->lo, e->hi,
            (unsigned long long)e->keys, (unsigned long long)e->nodes, sz,
            fti_now() - t0);
}

static void *split_worker(void *arg)
{
    split_ctx *c = arg;
    for (;;) {
        uint32_t k = __atomic_fetch_add(&c->next, 1, __ATOMIC_RELAXED);
        if (k >= c->n)
            return NULL;
        build_shard(&c->jobs[k]);
    }
}

int ft_split(ft_split_stats *st, const ft_index *idx, const ft_split_opts *o,
             char *errbuf, size_t errlen)
{
    ft_split_stats local;
    if (st == NULL)
        st = &local;
    memset(st, 0, sizeof *st);
    double t0 = fti_now();
    FT_RETURN_ERROR_IF(o == NULL || o->output == NULL || o->output[0] == 0,
                       FT_EINVAL, "split: an output path is required");
    FT_RETURN_ERROR_IF(idx == NULL, FT_EINVAL, "split: index is NULL");
    ft_partition p;
    int rc = ft_partition_make(&p, idx, o->shards, o->shard_bytes, errbuf,
                               errlen);
    if (rc)
        return rc;
    uint32_t n = p.n;
    uint64_t most = 0;
    for (uint32_t i = 0; i < n; i++)
        most = p.parts[i].bytes > most ? p.parts[i].bytes : most;
    FT_INFO("split: %u shards, the largest at most %llu trie bytes", n,
            (unsigned long long)most);
    ft_manifest m;
    memset(&m, 0, sizeof m);
    m.n_shards = n;
    m.keys = idx->trie.n_keys;
    m.value_bits = idx->trie.value_bits;
    m.max_key_len = idx->trie.max_key_len;
    m.shards = calloc(n, sizeof *m.shards);
    split_job *jobs = calloc(n, sizeof *jobs);
    const char *slash = strrchr(o->output, '/');
    const char *base = slash ? slash + 1 : o->output;
    rc = m.shards && jobs ? FT_OK : FT_ENOMEM;
    for (uint32_t i = 0; i < n && rc == FT_OK; i++) {
        split_job *j = &jobs[i];
        j->idx = idx;
        j->part = &p.parts[i];
        j->entry = &m.shards[i];
        j->i = i;
        j->n = n;
        size_t fl = strlen(o->output) + 48;
        j->final = malloc(fl);
        j->tmp = malloc(fl + 32);
        m.shards[i].name = malloc(strlen(base) + 48);
        if (j->final == NULL || j->tmp == NULL || m.shards[i].name == NULL) {
            rc = FT_ENOMEM;
            break;
        }
        snprintf(j->final, fl, "%s.shard-%03u-of-%03u.idx", o->output, i, n);
        snprintf(j->tmp, fl + 32, "%s.new.%ld", j->final, (long)getpid());
        snprintf(m.shards[i].name, strlen(base) + 48,
                 "%s.shard-%03u-of-%03u.idx", base, i, n);
    }
    if (rc == FT_OK) {
        int threads = o->threads > 0 ? o->threads : fti_usable_cores();
        if ((uint32_t)threads > n)
            threads = (int)n;
        split_ctx c = {jobs, n, 0};
        pthread_t th[threads > 0 ? threads : 1];
        int started = 0;
        for (int i = 1; i < threads; i++) {
            if (pthread_create(&th[started], NULL, split_worker, &c) != 0)
                break; /* the calling thread does what is left */
            started++;
        }
        split_worker(&c);
        for (int i = 0; i < started; i++)
            pthread_join(th[i], NULL);
        for (uint32_t i = 0; i < n && rc == FT_OK; i++) {
            if (jobs[i].rc) {
                rc = jobs[i].rc;
                fti_errf(errbuf, errlen, "%s: %s", o->output, jobs[i].err);
            }
        }
    }
    /* Every shard is whole: move them into place, then the manifest. */
    for (uint32_t i = 0; i < n && rc == FT_OK; i++) {
        if (rename(jobs[i].tmp, jobs[i].final) != 0) {
            fti_errf(errbuf, errlen, "%s: cannot rename into place: %s",
                     jobs[i].final, strerror(errno));
            rc = FT_EIO;
        }
    }
    if (rc == FT_OK)
        rc = ft_manifest_write(&m, o->output, errbuf, errlen);
    if (rc == FT_ENOMEM && errbuf && errlen && !errbuf[0])
        fti_errf(errbuf, errlen, "%s: out of memory", o->output);
    for (uint32_t i = 0; jobs && i < n; i++) {
        if (jobs[i].tmp)
            unlink(jobs[i].tmp); /* gone already unless the split failed */
        free(jobs[i].tmp);
        free(jobs[i].final);
    }
    if (rc == FT_OK) {
        st->shards = n;
        st->keys = m.keys;
        for (uint32_t i = 0; i < n; i++) {
            st->total_bytes += m.shards[i].trie_bytes;
            if (m.shards[i].trie_bytes > st->max_bytes)
                st->max_bytes = m.shards[i].trie_bytes;
        }
    }
    for (uint32_t i = 0; m.shards && i < n; i++)
        free(m.shards[i].name);
    free(m.shards);
    free(jobs);
    ft_partition_free(&p);
    st->seconds = fti_now() - t0;
    return rc;
}
