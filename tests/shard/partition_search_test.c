/*
 * partition_search_test.c - what ft_split writes, opened through its
 * manifest and searched by a shard group, answers exactly as one engine
 * over the unsharded index and as the reference of
 * docs/specification.md section 4 (section 6), for 1, 2, 3, 5 and 8 shards.
 */
#include "partition_util.h"

static void run_lib(uint64_t seed, const su_lib_params *lp, uint32_t nreq,
                    const char *dir)
{
    uint64_t s = seed;
    char path[1200], mpath[1200], err[1024];
    snprintf(path, sizeof path, "%s/all.idx", dir);
    snprintf(mpath, sizeof mpath, "%s/lib.ftm", dir);
    su_cases c;
    su_cases_make(&c, &s, lp, nreq, 8, 32, 40, path, 1);
    static const uint32_t counts[] = {1, 2, 3, 5, 8};
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
        uint32_t ns = counts[ci];
        if (ns > c.idx->root.deg)
            break;
        FT_PASS(pu_split(c.idx, mpath, ns, 0, 2, err, sizeof err));
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
        fti_group *g;
        FT_PASS(fti_group_open(&g, sh, ns, &o, err, sizeof err));
        FT_PASS(fti_group_search_batch(g, c.batch, nreq, c.res));
        char what[120];
        snprintf(what, sizeof what, "seed %llu shards %u",
                 (unsigned long long)seed, ns);
        su_check_all(&c, c.res, NULL, what);
        fti_group_close(g);
        ft_manifest_close(mf);
    }
    su_cases_free(&c);
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
