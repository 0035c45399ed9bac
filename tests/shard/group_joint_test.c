/*
 * group_joint_test.c - the joint steps of a CPU shard group
 * (fti_engines_step_*, shard/cpu_engine.c) against the unsharded engine,
 * bit for bit (docs/specification.md section 6): a step split both ways
 * (merged, one piece per request over every shard; and by (shard,
 * request) pairs, seeded with the finished shards' lists), forced through
 * the first engine's split and left to the engine, on 1, 2 and 3 workers,
 * over 1 to 5 shards, with the shards' matching (binary search or merge)
 * mixed, in batches of 1, 2, 3 and all that mix requests whose beams all
 * live in one shard, requests that leave a shard without a candidate from
 * some step on, narrow beams over tied proposals spread over every shard,
 * a beam wider than the candidates, and random requests.
 */
#include <unistd.h>

#include "cpu_engine.h"
#include "search_util.h"

#define NTOK 12  /* first tokens 1..NTOK */
#define NK 12     /* proposals per position of the designed requests */
#define MAXN 32  /* requests */

static uint64_t n_checks;

/* lib_keys makes the library: under each first token 1..NTOK-1 forty keys
 * of 1..6 tokens over 1..8, under NTOK only NTOK and NTOK x (nothing
 * deeper: that shard runs out of candidates at step 2). */
static su_key *lib_keys(uint64_t *s, size_t *n)
{
    su_key *k = calloc(NTOK * 40 + 16, sizeof *k);
    FT_CHECK(k != NULL);
    size_t m = 0;
    for (uint32_t f = 1; f < NTOK; f++)
        for (int i = 0; i < 40; i++) {
            su_key *x = &k[m];
            x->len = 1 + (uint32_t)(ft_test_rand(s) % 6);
            x->t[0] = f;
            for (uint32_t j = 1; j < x->len; j++)
                x->t[j] = 1 + (uint32_t)(ft_test_rand(s) % 8);
            x->value = m * 3 + 7;
            m++;
        }
    k[m].len = 1;
    k[m].t[0] = NTOK;
    k[m].value = m * 3 + 7;
    m++;
    for (uint32_t a = 1; a <= 4; a++) {
        k[m].len = 2;
        k[m].t[0] = NTOK;
        k[m].t[1] = a;
        k[m].value = m * 3 + 7;
        m++;
    }
    *n = m;
    return k;
}

/* A designed request: T rows of NK distinct tokens and their logp. */
typedef struct dreq {
    uint32_t tok[8 * NK];
    float lp[8 * NK];
} dreq;

/* row fills row t of d with first (a token list, 0-ended) and then the
 * tokens 100, 101, ... (in no key), logp from lp0 down in steps of step
 * (step 0: all tied). */
static void row(dreq *d, uint32_t t, const uint32_t *first, float lp0,
                float step)
{
    uint32_t k = 0;
    for (; first && first[k] && k < NK; k++)
        d->tok[t * NK + k] = first[k];
    for (uint32_t x = 100; k < NK; k++, x++)
        d->tok[t * NK + k] = x;
    for (k = 0; k < NK; k++)
        d->lp[t * NK + k] = lp0 - step * (float)k;
}

static void req_set(ft_request *r, dreq *d, uint32_t T, uint32_t beam)
{
    ft_request_init(r);
    r->T = T;
    r->K = NK;
    r->tokens = d->tok;
    r->logp = d->lp;
    r->beam = beam;
}

/* designed fills the designed requests into r (and d), returns how many. */
static uint32_t designed(ft_request *r, dreq *d)
{
    static const uint32_t one[] = {1, 2, 0}, deep[] = {1, 2, 3, 4, 5, 6, 7,
                                                       8, 0};
    static const uint32_t starve[] = {NTOK, 3, 7, 11, 0},
                          all[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, NTOK,
                                   0},
                          tied[] = {4, 3, 2, 1, 8, 7, 6, 5, 0};
    uint32_t n = 0;
    /* (a) every beam in the shard of first tokens 1 and 2 */
    row(&d[n], 0, one, -0.5f, 0.25f);
    for (uint32_t t = 1; t < 5; t++)
        row(&d[n], t, deep, -0.1f, 0.3f);
    req_set(&r[n], &d[n], 5, 4);
    n++;
    /* (b) the best first token's shard (NTOK) has beams at step 2 but no
     * candidate there, nor after */
    row(&d[n], 0, starve, -0.1f, 0.5f);
    for (uint32_t t = 1; t < 4; t++)
        row(&d[n], t, deep, -0.2f, 0.2f);
    req_set(&r[n], &d[n], 4, 6);
    n++;
    /* (c) beams of 1 and 2 over every first token, all tied at step 0,
     * tied in pairs after */
    for (uint32_t b = 1; b <= 2; b++) {
        row(&d[n], 0, all, -1.0f, 0.0f);
        for (uint32_t t = 1; t < 6; t++) {
            row(&d[n], t, tied, -0.5f, 0.0f);
            for (uint32_t k = 0; k < NK; k++)
                d[n].lp[t * NK + k] = -0.5f - 0.25f * (float)(k / 2);
        }
        req_set(&r[n], &d[n], 6, b);
        n++;
    }
    /* (d) a beam wider than all the candidates */
    row(&d[n], 0, all, -0.3f, 0.1f);
    for (uint32_t t = 1; t < 6; t++)
        row(&d[n], t, deep, -0.3f, 0.1f);
    req_set(&r[n], &d[n], 6, 512);
    r[n].results = 300;
    n++;
    /* (e) as (c) with a beam of 3 and fewer results than beam */
    row(&d[n], 0, all, -1.0f, 0.0f);
    for (uint32_t t = 1; t < 6; t++)
        row(&d[n], t, tied, -0.5f, 0.125f);
    req_set(&r[n], &d[n], 6, 3);
    r[n].results = 2;
    n++;
    return n;
}

/* split_at opens ns shards of the sorted distinct keys[0..m), shard j
 * holding the first tokens from 1 + j * NTOK / ns on. */
static void split_at(const su_key *keys, size_t m, size_t ns, const char *dir,
                     ft_index **sh)
{
    size_t at = 0;
    for (size_t j = 0; j < ns; j++) {
        uint32_t hi = 1 + (uint32_t)((j + 1) * NTOK / ns);
        size_t e = at;
        while (e < m && (j + 1 == ns || keys[e].t[0] < hi))
            e++;
        su_key *part = calloc(e - at + 1, sizeof *part);
        FT_CHECK(part != NULL);
        memcpy(part, keys + at, (e - at) * sizeof *part);
        char path[600];
        snprintf(path, sizeof path, "%s/joint%zu.idx", dir, j);
        FT_CHECK(su_build(part, e - at, path, &sh[j]) == e - at);
        free(part);
        at = e;
    }
    FT_CHECK(at == m);
}

static void results_new(ft_result *res, const ft_request *r, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        FT_PASS(ft_result_alloc(&res[i], FT_MAX_RESULTS, r[i].T));
}

int main(void)
{
    char dir[] = "/tmp/ft_group_joint_XXXXXX";
    FT_CHECK(mkdtemp(dir) != NULL);
    uint64_t s = 77;
    size_t m0;
    su_key *keys = lib_keys(&s, &m0);
    char path[600];
    snprintf(path, sizeof path, "%s/all.idx", dir);
    ft_index *all;
    size_t m = su_build(keys, m0, path, &all); /* sorts, dedupes */

    /* the requests: designed, then random ones over the library */
    ft_request req[MAXN];
    static dreq d[MAXN];
    uint32_t n = designed(req, d);
    su_lib_params lp = {0, m, 6};
    su_case cs[MAXN];
    uint32_t nd = n;
    for (; n < 20; n++) {
        su_make_request(&cs[n], &s, keys, m, &lp, NTOK + 1,
                        1 + (uint32_t)(ft_test_rand(&s) % 7),
                        1 + (uint32_t)(ft_test_rand(&s) % NK),
                        1 + (uint32_t)(ft_test_rand(&s) % 16));
        req[n] = cs[n].req;
    }
    for (uint32_t i = 0; i < n; i++)
        FT_PASS(ft_request_validate(&req[i], 0, NULL, 0));

    /* the unsharded engine's answers */
    ft_engine_opts o;
    ft_engine_opts_init(&o);
    o.threads = 1;
    ft_engine *eng;
    FT_PASS(ft_engine_open(&eng, all, &o, NULL, 0));
    static ft_result want[MAXN], got[MAXN];
    results_new(want, req, n);
    results_new(got, req, n);
    FT_PASS(ft_engine_search_batch(eng, req, n, want));
    ft_engine_close(eng);
    /* every designed request finds keys (the random ones may not) */
    for (uint32_t i = 0; i < n; i++)
        FT_CHECK(want[i].status == FT_OK && (i >= nd || want[i].n > 0));

    static const ft_cpu_split splits[] = {FT_CPU_SPLIT_AUTO,
                                          FT_CPU_SPLIT_REQUESTS,
                                          FT_CPU_SPLIT_BEAMS};
    static const uint32_t widths[] = {1, 2, 3, MAXN};
    for (size_t ns = 1; ns <= 5; ns++) {
        ft_index *sh[5];
        split_at(keys, m, ns, dir, sh);
        for (int threads = 1; threads <= 3; threads++)
            for (size_t si = 0; si < 3; si++)
                for (int mixed = 0; mixed < 2; mixed++) {
                    o.threads = threads;
                    fti_group *g;
                    char err[256] = "";
                    FT_PASS(fti_group_open(&g, (const ft_index *const *)sh, ns,
                                           &o, err, sizeof err));
                    for (size_t j = 0; j < ns; j++)
                        FT_PASS(ft_cpu_engine_tune(
                            fti_group_engine(g, j),
                            mixed ? (j % 2 ? FT_CPU_MATCH_MERGE
                                           : FT_CPU_MATCH_BSEARCH)
                                  : FT_CPU_MATCH_AUTO,
                            splits[si]));
                    for (size_t wi = 0; wi < 4; wi++) {
                        /* the batches in a shuffled order */
                        uint32_t perm[MAXN];
                        su_rand_perm(&s, perm, n);
                        ft_request pr[MAXN];
                        ft_result pres[MAXN];
                        for (uint32_t i = 0; i < n; i++) {
                            pr[i] = req[perm[i]];
                            pres[i] = got[perm[i]];
                        }
                        su_run_widths(NULL, g, pr, n, widths[wi], pres);
                        for (uint32_t i = 0; i < n; i++) {
                            uint32_t c = perm[i];
                            if (!su_same_full(&pres[i], &want[c], 0)) {
                                fprintf(stderr,
                                        "group_joint_test: request %u (%s) "
                                        "differs from the unsharded engine: "
                                        "%zu shards, %d threads, split %d, "
                                        "%s matching, batch %u (status "
                                        "%d/%d, hits %u/%u)\n",
                                        c, c < nd ? "designed" : "random", ns,
                                        threads, (int)splits[si],
                                        mixed ? "mixed" : "auto",
                                        widths[wi], pres[i].status,
                                        want[c].status, pres[i].n, want[c].n);
                                return 1;
                            }
                            n_checks++;
                        }
                    }
                    fti_group_close(g);
                }
        for (size_t j = 0; j < ns; j++)
            ft_index_close(sh[j]);
    }
    for (uint32_t i = 0; i < n; i++) {
        ft_result_free(&want[i]);
        ft_result_free(&got[i]);
    }
    for (uint32_t i = nd; i < n; i++) {
        free(cs[i].tok);
        free(cs[i].lp);
    }
    ft_index_close(all);
    free(keys);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    FT_CHECK(system(cmd) == 0);
    printf("group_joint_test: ok, %llu answers equal to the unsharded "
           "engine's\n", (unsigned long long)n_checks);
    return 0;
}
