/*
 * partition_search_test.c - what ft_split writes, opened through its
 * manifest and searched by a shard group, answers exactly as one engine
 * over the unsharded index and as the reference of SPEC section 4 (SPEC
 * section 6), for 1, 2, 3, 5 and 8 shards.
 */
#include "partition_util.h"

static void run_lib(uint64_t seed, const su_lib_params *lp, uint32_t nreq,
                    const char *dir)
{
    uint64_t s = seed;
    uint32_t V = 2 + (uint32_t)(ft_test_rand(&s) % 6);
    su_key *keys = su_rand_keys(&s, lp, V);
    char path[1200], mpath[1200], err[1024];
    snprintf(path, sizeof path, "%s/all.idx", dir);
    snprintf(mpath, sizeof mpath, "%s/lib.ftm", dir);
    ft_index *idx;
    size_t m = su_build(keys, lp->nkeys, path, &idx);
    su_node *root = su_node_new();
    for (size_t i = 0; i < m; i++)
        su_insert(root, &keys[i]);
    su_case *cs = calloc(nreq, sizeof *cs);
    ft_request *batch = calloc(nreq, sizeof *batch);
    ft_result *res = calloc(nreq, sizeof *res);
    FT_CHECK(cs && batch && res);
    for (uint32_t i = 0; i < nreq; i++) {
        uint32_t T = 1 + (uint32_t)(ft_test_rand(&s) % 8);
        uint32_t K = 1 + (uint32_t)(ft_test_rand(&s) % 32);
        uint32_t B = 1 + (uint32_t)(ft_test_rand(&s) % 40);
        su_make_request(&cs[i], &s, keys, m, lp, V, T, K, B);
        cs[i].ref = malloc(FT_MAX_RESULTS * sizeof *cs[i].ref);
        cs[i].nref = su_search(root, &cs[i].req, cs[i].ref);
        batch[i] = cs[i].req;
        FT_PASS(ft_result_alloc(&res[i], FT_MAX_RESULTS, cs[i].req.T));
    }
    static const uint32_t counts[] = {1, 2, 3, 5, 8};
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
        uint32_t ns = counts[ci];
        if (ns > idx->root.deg)
            break;
        FT_PASS(pu_split(idx, mpath, ns, 0, 2, err, sizeof err));
        ft_manifest *mf;
        FT_PASS(ft_library_open(&mf, mpath, 0, err, sizeof err));
        FT_CHECK_EQ_U64(mf->n_shards, ns);
        const ft_index *sh[8];
        for (uint32_t j = 0; j < ns; j++)
            sh[j] = mf->shards[j].idx;
        ft_engine_opts o;
        ft_engine_opts_init(&o);
        o.kind = FT_ENGINE_CPU;
        o.threads = 1 + (int)(ft_test_rand(&s) % 2);
        ft_group *g;
        FT_PASS(ft_group_open(&g, sh, ns, &o, err, sizeof err));
        FT_PASS(ft_group_search_batch(g, batch, nreq, res));
        for (uint32_t i = 0; i < nreq; i++) {
            char what[200];
            snprintf(what, sizeof what, "seed %llu case %u shards %u",
                     (unsigned long long)seed, i, ns);
            if (!su_same_result(&res[i], cs[i].ref, cs[i].nref, what))
                exit(1);
        }
        ft_group_close(g);
        ft_manifest_close(mf);
    }
    for (uint32_t i = 0; i < nreq; i++) {
        ft_result_free(&res[i]);
        free(cs[i].tok);
        free(cs[i].lp);
        free(cs[i].ref);
    }
    free(res);
    free(batch);
    free(cs);
    su_free(root);
    ft_index_close(idx);
    free(keys);
}

int main(void)
{
    char dir[1024];
    pu_tmpdir(dir, sizeof dir);
    uint64_t seed = 500;
    for (int i = 0; i < 30; i++) {
        su_lib_params lp = {1 + i % 4, 50 + (size_t)(i * 97 % 800), 1 + i % 6};
        run_lib(seed++, &lp, 10, dir);
    }
    pu_rmdir(dir);
    printf("partition_search_test: ok\n");
    return 0;
}
