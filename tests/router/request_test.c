/*
 * request_test.c - ft_request_validate against every rule of
 * docs/specification.md section 3: each violation gives FT_EREQUEST and exactly
 * the expected message, and the same message comes back through
 * ft_engine_search on a CPU engine.
 */
#include <float.h>
#include <math.h>

#include "search_util.h"

static uint32_t toks[FT_MAX_T * FT_MAX_K + FT_MAX_K];
static float lps[FT_MAX_T * FT_MAX_K + FT_MAX_K];

static ft_request base(uint32_t T, uint32_t K)
{
    ft_request q;
    ft_request_init(&q);
    q.T = T;
    q.K = K;
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t k = 0; k < K; k++) {
            toks[t * K + k] = k * 7 + 1;
            lps[t * K + k] = -(float)k;
        }
    q.tokens = toks;
    q.logp = lps;
    return q;
}

static ft_engine *eng;
static ft_result res;

/* A check for fti_engine_run_checked: counts its calls, fails one result. */
static void ck_fail(void *arg)
{
    struct ck {
        int calls;
        ft_result *fail;
    } *c = arg;
    c->calls++;
    c->fail->status = FT_EREQUEST;
    snprintf(c->fail->error, sizeof c->fail->error, "failed by the check");
}

static void reject(const ft_request *q, uint32_t max_beam, const char *want)
{
    char err[160] = "";
    FT_FAIL(ft_request_validate(q, max_beam, err, sizeof err), FT_EREQUEST);
    FT_CHECK_STR(err, want);
    if (max_beam == 0) { /* the engine reports the same */
        FT_FAIL(ft_engine_search(eng, q, &res), FT_EREQUEST);
        FT_CHECK_STR(res.error, want);
        FT_CHECK_EQ_U64(res.n, 0);
    }
}

static void accept(const ft_request *q, uint32_t max_beam)
{
    char err[160] = "";
    int rc = ft_request_validate(q, max_beam, err, sizeof err);
    if (rc != FT_OK)
        fprintf(stderr, "unexpected: %s\n", err);
    FT_PASS(rc);
}

/* The row scans run in blocks of 8 and then one by one (request.c): an
 * inf or a nan at every position of row 1, for K around the block size,
 * is the one named; the largest, smallest and subnormal floats and -0 are
 * finite.  And preparation keeps a row where it is exactly when no
 * proposal beats the one before it: one out of order at every position
 * makes a sorted copy. */
static void row_scans(void)
{
    const uint32_t Ks[] = {1, 2, 7, 8, 9, 15, 16, 17, 100, 1000};
    const float bad[] = {INFINITY, -INFINITY, NAN, -NAN};
    const float fine[] = {FLT_MAX, -FLT_MAX, FLT_MIN, -FLT_MIN, 1e-45f,
                          -1e-45f, -0.0f};
    char want[96];
    fti_prep *prep;
    FT_PASS(fti_prep_create(&prep));
    for (size_t i = 0; i < sizeof Ks / sizeof Ks[0]; i++) {
        uint32_t K = Ks[i];
        for (uint32_t k = 0; k < K; k++) {
            for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
                ft_request q = base(2, K);
                lps[K + k] = bad[b];
                char err[160] = "";
                FT_FAIL(ft_request_validate(&q, 0, err, sizeof err),
                        FT_EREQUEST);
                snprintf(want, sizeof want,
                         "logp: position 1, proposal %u: not finite", k);
                FT_CHECK_STR(err, want);
            }
            for (size_t f = 0; f < sizeof fine / sizeof fine[0]; f++) {
                ft_request q = base(2, K);
                lps[K + k] = fine[f];
                accept(&q, 0);
            }
            ft_request q = base(2, K);
            const fti_prepared *pp;
            FT_PASS(fti_request_prepare(&pp, prep, &q));
            FT_CHECK(pp->logp == q.logp && pp->tok == q.tokens);
            if (k == 0)
                continue;
            lps[K + k] = lps[K + k - 1] + 0.5f; /* beats the one before */
            FT_PASS(fti_request_prepare(&pp, prep, &q));
            FT_CHECK(pp->logp != q.logp && pp->tok != q.tokens);
            for (uint32_t j = 1; j < K; j++)
                FT_CHECK(pp->logp[K + j] <= pp->logp[K + j - 1]);
            FT_CHECK_EQ_U64(pp->tok[K + k - 1], q.tokens[K + k]);
        }
    }
    /* The F table at alpha = 1 is the library's pow's, bit for bit, at
     * every length (alpha volatile: gcc folds pow(x, 1.0) to x). */
    volatile double one = 1.0;
    ft_request q = base(FT_MAX_T, 1);
    const fti_prepared *pp;
    FT_PASS(fti_request_prepare(&pp, prep, &q));
    FT_CHECK(pp->F[0] == 1.0);
    for (uint32_t d = 1; d <= FT_MAX_T; d++) {
        double want = pow(6.0 / (5.0 + (double)d), one);
        FT_CHECK(memcmp(&pp->F[d], &want, sizeof want) == 0);
    }
    fti_prep_destroy(prep);
}

/* Randomized rows against a quadratic reference: the first proposal k
 * whose token an earlier proposal holds, and that earlier one, in the
 * exact message; rows without one accepted.  Tokens drawn from small
 * ranges (many duplicates), from multiples of the table's size (all
 * hashing alike: long probe runs) and at random; K up to FT_MAX_K. */
static void dup_random(void)
{
    uint64_t s = 1234;
    int n_dup = 0, n_ok = 0;
    for (int c = 0; c < 3000; c++) {
        uint32_t T = 1 + (uint32_t)(ft_test_rand(&s) % 3);
        uint32_t K = 1 + (uint32_t)(ft_test_rand(&s) % 64);
        if (c % 10 == 0)
            K = 1 + (uint32_t)(ft_test_rand(&s) % FT_MAX_K);
        uint32_t kind = (uint32_t)(ft_test_rand(&s) % 3);
        uint64_t span = kind == 0 ? 2ull * K + 1 : 1ull << 32;
        ft_request q = base(T, K);
        for (uint32_t i = 0; i < T * K; i++) {
            uint64_t r = ft_test_rand(&s) % span;
            toks[i] = kind == 1 ? (uint32_t)(r << 14) : (uint32_t)r;
        }
        if (kind != 0 && ft_test_rand(&s) % 2) { /* one planted pair */
            uint32_t t = (uint32_t)(ft_test_rand(&s) % T);
            uint32_t a = (uint32_t)(ft_test_rand(&s) % K);
            uint32_t b = (uint32_t)(ft_test_rand(&s) % K);
            toks[t * K + b] = toks[t * K + a];
        }
        char want[160] = "";
        for (uint32_t t = 0; t < T && !want[0]; t++) {
            const uint32_t *tk = toks + (size_t)t * K;
            for (uint32_t k = 1; k < K && !want[0]; k++)
                for (uint32_t j = 0; j < k; j++)
                    if (tk[j] == tk[k]) {
                        snprintf(want, sizeof want,
                                 "tokens: position %u: token %u appears "
                                 "twice (proposals %u and %u)",
                                 t, tk[k], j, k);
                        break;
                    }
        }
        char err[160] = "";
        int rc = ft_request_validate(&q, 0, err, sizeof err);
        if (want[0]) {
            FT_CHECK_EQ_U64((uint64_t)rc, (uint64_t)FT_EREQUEST);
            FT_CHECK_STR(err, want);
            n_dup++;
        } else {
            if (rc != FT_OK)
                fprintf(stderr, "case %d: unexpected: %s\n", c, err);
            FT_PASS(rc);
            n_ok++;
        }
    }
    /* both kinds of rows occur, or the test proves nothing */
    FT_CHECK(n_dup > 100 && n_ok > 100);
}

int main(void)
{
    char path[] = "/tmp/ft_request_test_XXXXXX";
    int fd = mkstemp(path);
    FT_CHECK(fd >= 0);
    close(fd);
    su_key k = {1, {1}, 5};
    ft_index *idx;
    su_build(&k, 1, path, &idx);
    ft_engine_opts o;
    ft_engine_opts_init(&o);
    o.threads = 2;
    char err[256];
    FT_PASS(ft_engine_open(&eng, idx, &o, err, sizeof err));
    FT_PASS(ft_result_alloc(&res, FT_MAX_RESULTS, FT_MAX_T));

    ft_request q = base(1, 1);
    accept(&q, 0);
    q = base(64, 4096);
    accept(&q, 0);
    q = base(0, 3);
    reject(&q, 0, "tokens: the grid must have 1..64 positions, got 0");
    q = base(65, 3);
    reject(&q, 0, "tokens: the grid must have 1..64 positions, got 65");
    q = base(2, 0);
    reject(&q, 0, "tokens: each position must have 1..4096 proposals, got 0");
    q = base(2, 4097);
    reject(&q, 0,
           "tokens: each position must have 1..4096 proposals, got 4097");
    q = base(2, 3);
    q.tokens = NULL;
    reject(&q, 0, "tokens: missing");
    q = base(2, 3);
    q.logp = NULL;
    reject(&q, 0, "logp: missing");
    q = base(2, 3);
    q.beam = 0;
    reject(&q, 0, "beam: must be 1..4096, got 0");
    q.beam = 4097;
    reject(&q, 0, "beam: must be 1..4096, got 4097");
    q.beam = 4096;
    accept(&q, 0);
    q.beam = 101;
    reject(&q, 100, "beam: 101 exceeds this server's cap of 100");
    q.beam = 100;
    accept(&q, 100);
    q = base(2, 3);
    q.results = 4097;
    reject(&q, 0, "results: must be 1..4096, got 4097");
    q.results = 4096;
    accept(&q, 0);
    q = base(2, 3);
    q.theta_tok = NAN;
    reject(&q, 0, "theta_tok: not a number");
    q.theta_tok = INFINITY; /* valid: nothing passes */
    accept(&q, 0);
    q = base(2, 3);
    q.theta_sent = NAN;
    reject(&q, 0, "theta_sent: not a number");
    q = base(2, 3);
    q.alpha = -0.1;
    reject(&q, 0, "alpha: must be 0..10, got -0.10000000000000001");
    q.alpha = 10.5;
    reject(&q, 0, "alpha: must be 0..10, got 10.5");
    q.alpha = NAN;
    reject(&q, 0, "alpha: must be 0..10, got nan");
    q.alpha = 0;
    accept(&q, 0);
    q.alpha = 10;
    accept(&q, 0);
    q = base(3, 5);
    lps[2 * 5 + 4] = INFINITY;
    reject(&q, 0, "logp: position 2, proposal 4: not finite");
    q = base(3, 5);
    lps[1 * 5 + 0] = NAN;
    reject(&q, 0, "logp: position 1, proposal 0: not finite");
    q = base(3, 5);
    lps[0] = -INFINITY;
    reject(&q, 0, "logp: position 0, proposal 0: not finite");
    q = base(3, 5);
    toks[2 * 5 + 3] = toks[2 * 5 + 1];
    reject(&q, 0,
           "tokens: position 2: token 8 appears twice (proposals 1 and 3)");
    q = base(1, 4096); /* the same token at different positions is fine */
    accept(&q, 0);
    /* The search checks duplicates late (while its engine runs): the
     * first fault in the specification's order is still the one said. */
    q = base(3, 5);
    toks[0 * 5 + 2] = toks[0 * 5 + 0]; /* a duplicate in row 0 */
    lps[2 * 5 + 1] = NAN;              /* not finite in row 2 */
    reject(&q, 0,
           "tokens: position 0: token 1 appears twice (proposals 0 and 2)");
    q = base(3, 5);
    lps[0 * 5 + 3] = INFINITY;         /* not finite in row 0 */
    toks[1 * 5 + 4] = toks[1 * 5 + 1]; /* a duplicate in row 1 */
    reject(&q, 0, "logp: position 0, proposal 3: not finite");
    q = base(3, 5);
    toks[1 * 5 + 4] = toks[1 * 5 + 1];
    q.alpha = 11; /* a field fault before any row */
    reject(&q, 0, "alpha: must be 0..10, got 11");
    /* a rejected request does not poison its batch neighbours */
    ft_request qs[3] = {base(1, 2), base(1, 2), base(1, 2)};
    qs[1].beam = 0;
    ft_result rs[3];
    for (int i = 0; i < 3; i++)
        FT_PASS(ft_result_alloc(&rs[i], 100, 1));
    toks[0] = 1; /* the key */
    FT_PASS(ft_engine_search_batch(eng, qs, 3, rs));
    FT_CHECK_EQ_U64(rs[0].status, FT_OK);
    FT_CHECK_EQ_U64(rs[0].n, 1);
    FT_CHECK_EQ_U64(rs[0].hits[0].value, 5);
    FT_CHECK_EQ_U64(rs[1].status, FT_EREQUEST);
    FT_CHECK_STR(rs[1].error, "beam: must be 1..4096, got 0");
    FT_CHECK_EQ_U64(rs[2].status, FT_OK);
    FT_CHECK_EQ_U64(rs[2].n, 1);
    /* a duplicate in the middle of a batch: its own error, the others
     * answered (the check runs while the engine works) */
    ft_request qd[3] = {base(1, 3), base(1, 3), base(1, 3)};
    toks[0] = 1;
    static uint32_t dtoks[3] = {1, 15, 1};
    static float dlps[3] = {0, -1, -2};
    qd[1].tokens = dtoks;
    qd[1].logp = dlps;
    FT_PASS(ft_engine_search_batch(eng, qd, 3, rs));
    FT_CHECK_EQ_U64(rs[0].status, FT_OK);
    FT_CHECK_EQ_U64(rs[0].n, 1);
    FT_CHECK_EQ_U64(rs[0].hits[0].value, 5);
    FT_CHECK_EQ_U64(rs[1].status, FT_EREQUEST);
    FT_CHECK_EQ_U64(rs[1].n, 0);
    FT_CHECK_STR(rs[1].error,
                 "tokens: position 0: token 1 appears twice (proposals 0 "
                 "and 2)");
    FT_CHECK_EQ_U64(rs[2].status, FT_OK);
    FT_CHECK_EQ_U64(rs[2].n, 1);
    /* a result buffer too small is the request's error, not a crash */
    ft_request big = base(1, 2);
    big.beam = 200;
    FT_FAIL(ft_engine_search(eng, &big, &rs[0]), FT_ELIMIT);
    /* ... unless the request is refused first: a duplicate is said */
    big.tokens = dtoks;
    big.logp = dlps;
    big.K = 3;
    FT_FAIL(ft_engine_search(eng, &big, &rs[0]), FT_EREQUEST);
    FT_CHECK_STR(rs[0].error,
                 "tokens: position 0: token 1 appears twice (proposals 0 "
                 "and 2)");
    /* fti_engine_run_checked: the check runs once; a result it fails keeps
     * its status and message and gets no hits; the others are answered */
    {
        fti_prep *pp[2] = {NULL, NULL};
        const fti_prepared *pq[2];
        ft_request a = base(1, 2);
        toks[0] = 1;
        for (int i = 0; i < 2; i++) {
            FT_PASS(fti_prep_create(&pp[i]));
            FT_PASS(fti_request_prepare(&pq[i], pp[i], &a));
        }
        ft_result *pr[2] = {&rs[0], &rs[1]};
        struct ck {
            int calls;
            ft_result *fail;
        } ck = {0, &rs[1]};
        FT_PASS(fti_engine_run_checked(eng, pq, pr, 2, ck_fail, &ck));
        FT_CHECK_EQ_U64(ck.calls, 1);
        FT_CHECK_EQ_U64(rs[0].status, FT_OK);
        FT_CHECK_EQ_U64(rs[0].n, 1);
        FT_CHECK_EQ_U64(rs[1].status, FT_EREQUEST);
        FT_CHECK_EQ_U64(rs[1].n, 0);
        FT_CHECK_STR(rs[1].error, "failed by the check");
        /* a NULL check is fti_engine_run */
        FT_PASS(fti_engine_run_checked(eng, pq, pr, 2, NULL, NULL));
        FT_CHECK_EQ_U64(rs[1].status, FT_OK);
        FT_CHECK_EQ_U64(rs[1].n, 1);
        FT_FAIL(fti_engine_run_checked(eng, pq, pr, FTI_ENGINE_CHUNK + 1, NULL,
                                       NULL),
                FT_EINVAL);
        for (int i = 0; i < 2; i++)
            fti_prep_destroy(pp[i]);
    }
    for (int i = 0; i < 3; i++)
        ft_result_free(&rs[i]);

    dup_random();
    row_scans();

    ft_result_free(&res);
    ft_engine_close(eng);
    ft_index_close(idx);
    unlink(path);
    printf("request_test: ok\n");
    return 0;
}
