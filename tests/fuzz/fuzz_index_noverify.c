/*
 * fuzz_index_noverify.c - bytes as an index file opened with
 * FT_OPEN_NO_VERIFY (no section checksums, as for files too large to hash
 * at every start), then used the way the server uses one: info, a prefix
 * walk, lookups, node navigation and a CPU-engine search.  Without the
 * checksums every damaged byte reaches the navigation code, so this is
 * where the structural checks at open and the bounded navigation must
 * hold: a damaged file may be refused or may give wrong answers, but
 * nothing may crash, hang or read outside the mapping.  The bytes are
 * opened from memory (ft_index_open_mem: ft_index_open's checks without
 * a file per input) in a buffer of exactly their size.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashtrie.h"
#include "fuzz.h"
#include "trie.h"

static ft_result g_res;
static int g_ready;

/* search runs one request whose proposals are the root's first labels and
 * a few fixed tokens, so the beam walks real paths of the damaged trie. */
static void search(const ft_index *idx)
{
    enum { T = 3, K = 6 };
    uint32_t tok[T * K];
    float lp[T * K];
    static const uint32_t fixed[] = {1, 2, 3, 9, 70000};
    uint32_t labels[K] = {0};
    uint32_t nl = 0;
    ft_node_children ch;
    if (ft_index_children(&ch, idx, FT_NODE_ROOT) == FT_OK)
        for (uint64_t i = 0; i < ch.count && nl < 3; i++)
            labels[nl++] = ft_index_child_label(idx, &ch, i);
    for (int t = 0; t < T; t++)
        for (int k = 0; k < K; k++) {
            tok[t * K + k] = k < (int)nl ? labels[k] : fixed[(k + t) % 5];
            lp[t * K + k] = -0.5f * (float)(k + 1);
        }
    ft_request req;
    ft_request_init(&req);
    req.T = T;
    req.K = K;
    req.tokens = tok;
    req.logp = lp;
    req.beam = 4;
    ft_engine_opts o;
    ft_engine_opts_init(&o);
    o.threads = 1;
    ft_engine *eng;
    if (ft_engine_open(&eng, idx, &o, NULL, 0) != FT_OK)
        return;
    ft_engine_search(eng, &req, &g_res);
    ft_engine_close(eng);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_ready) {
        if (ft_result_alloc(&g_res, 64, 16) != FT_OK)
            abort();
        ft_log_set_level(FT_LOG_ERROR);
        g_ready = 1;
    }
    /* Exactly the input's size, aligned as a mapping is: ASan sees a read
     * one byte past the end, which a mapping hides up to its page's end. */
    void *buf;
    if (posix_memalign(&buf, 64, size ? size : 1) != 0)
        abort();
    memcpy(buf, data, size);
    ft_index *idx;
    char err[512] = "";
    int rc = ft_index_open_mem(&idx, buf, size, "fuzz.idx", FT_OPEN_NO_VERIFY,
                               err, sizeof err);
    fuzz_same_as_file(data, size, FT_OPEN_NO_VERIFY, rc, err, "fuzz.idx");
    if (rc != FT_OK) {
        free(buf);
        return 0;
    }
    ft_index_info info;
    ft_index_info_init(&info);
    ft_index_info_get(&info, idx);
    uint64_t seen, n = 0, v;
    ft_index_prefix(&seen, idx, NULL, 0, 1000, fuzz_count_key, &n);
    static const uint32_t k[][2] = {{1, 2}, {9, 0}, {1, 70000}};
    for (int i = 0; i < 3; i++)
        ft_index_lookup(&v, idx, k[i], 2);
    /* Every node the root's first children lead to, one level down. */
    ft_node_children ch, sub;
    if (ft_index_children(&ch, idx, FT_NODE_ROOT) == FT_OK)
        for (uint64_t i = 0; i < ch.count && i < 8; i++) {
            ft_index_node_value(&v, idx, ch.first + i);
            if (ft_index_children(&sub, idx, ch.first + i) == FT_OK &&
                sub.count > 0) {
                uint64_t at;
                ft_index_child_find(&at, idx, &sub,
                                    ft_index_child_label(idx, &sub, 0));
            }
        }
    search(idx);
    ft_index_close(idx);
    free(buf);
    return 0;
}
