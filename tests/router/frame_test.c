/*
 * frame_test.c - the binary wire protocol (router/frame.h): every type
 * round-trips byte for byte (encode, decode, encode), defaults follow the
 * field mask, the limits hold at their maxima, every malformed frame gets
 * FT_EPROTO with its exact message, every truncation fails cleanly, and
 * random byte flips never crash (and, when a flipped frame still decodes,
 * it re-encodes to exactly those bytes).
 *
 *   usage: frame_test [GOLDEN_DIR]     run the tests; the seeds must equal
 *                                     the files in GOLDEN_DIR byte for byte
 *          frame_test --corpus DIR    write the fuzz seed corpus into DIR
 */
#include <math.h>
#include <stdint.h>

#include <xxhash.h>

#include "flashtrie/internal/bits.h"
#include "frame.h"
#include "ft_test.h"

static ft_buf B, B2;
static ft_frame_msg M;
static char err[1200];

/* ---- helpers ----------------------------------------------------------- */

static uint32_t rd32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static void wr32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void wr16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

/* fix makes the length and checksum fields agree with a frame of len
 * bytes again, after a test changed it on purpose. */
static void fix(unsigned char *p, size_t len)
{
    wr32(p + 24, (uint32_t)(len - 32));
    if (rd32(p + 8) & FT_FRAME_F_CHECKSUM)
        wr32(p + 28, XXH32(p + 32, len - 32, XXH32(p, 28, 0)));
}

/* roundtrip decodes the frame in B (copied to an odd address, so that
 * nothing may rely on the input's alignment) and checks that re-encoding
 * the decoded message gives the same bytes. */
static void roundtrip(uint32_t max_batch)
{
    unsigned char *odd = malloc(B.len + 1);
    FT_CHECK(odd != NULL);
    memcpy(odd + 1, B.data, B.len);
    int rc = ft_frame_decode(&M, odd + 1, B.len, max_batch, err, sizeof err);
    if (rc != FT_OK)
        fprintf(stderr, "decode: %s\n", err);
    FT_PASS(rc);
    free(odd);
    B2.len = 0;
    FT_PASS(ft_frame_encode(&B2, &M));
    FT_CHECK_EQ_U64(B2.len, B.len);
    FT_CHECK(memcmp(B2.data, B.data, B.len) == 0);
}

/* bad expects the bytes p[0..len) to be rejected with code and message. */
static void bad_at(int line, const void *p, size_t len, int code,
                   const char *want)
{
    err[0] = 0;
    int rc = ft_frame_decode(&M, p, len, 4, err, sizeof err);
    if (rc != code || strcmp(err, want) != 0) {
        fprintf(stderr, "line %d: got %d '%s'\n  want %d '%s'\n", line, rc,
                err, code, want);
        exit(1);
    }
}
#define BAD(p, len, want) bad_at(__LINE__, (p), (len), FT_EPROTO, (want))

/* bad32_at sets the 32-bit field at off of the frame f of len bytes to v,
 * makes the length and checksum agree again and expects want. */
static void bad32_at(int line, unsigned char *f, size_t len, size_t off,
                     uint32_t v, const char *want)
{
    wr32(f + off, v);
    fix(f, len);
    bad_at(line, f, len, FT_EPROTO, want);
}
#define BAD32(f, len, off, v, want)                                           \
    bad32_at(__LINE__, (f), (len), (off), (v), (want))

/* field32 is one 32-bit field of a frame set to a value it may not hold,
 * and the message that names it. */
typedef struct field32 {
    size_t off;
    uint32_t v;
    const char *want;
} field32;

/* bad_fresh checks each of c[0..n) on a fresh frame that make writes. */
static void bad_fresh(size_t (*make)(unsigned char *), unsigned char *f,
                      const field32 *c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        bad32_at(__LINE__, f, make(f), c[i].off, c[i].v, c[i].want);
}

/* A small random grid pool for requests. */
static uint32_t g_tok[8 * 64 * 4096];
static float g_logp[8 * 64 * 4096];

static void rand_req(ft_request *q, uint64_t *s, size_t slot, uint32_t maxT,
                     uint32_t maxK)
{
    ft_request_init(q);
    q->T = 1 + (uint32_t)(ft_test_rand(s) % maxT);
    q->K = 1 + (uint32_t)(ft_test_rand(s) % maxK);
    uint32_t *tk = g_tok + slot * 64 * 4096;
    float *lp = g_logp + slot * 64 * 4096;
    for (size_t i = 0; i < (size_t)q->T * q->K; i++) {
        tk[i] = (uint32_t)ft_test_rand(s);
        uint32_t bits = (uint32_t)ft_test_rand(s); /* NaNs too: not our job */
        memcpy(&lp[i], &bits, 4);
    }
    q->tokens = tk;
    q->logp = lp;
    uint64_t pick = ft_test_rand(s);
    if (pick & 1)
        q->beam = 1 + (uint32_t)(ft_test_rand(s) % 4096);
    if (pick & 2)
        q->results = 1 + (uint32_t)(ft_test_rand(s) % 4096);
    if (pick & 4)
        q->theta_tok = -(float)(ft_test_rand(s) % 100);
    if (pick & 8)
        q->theta_sent = -(float)(ft_test_rand(s) % 1000);
    if (pick & 16)
        q->alpha = (double)(ft_test_rand(s) % 1000) / 100.0;
}

static void rand_res(ft_result *r, uint64_t *s)
{
    r->n = 0;
    r->status = FT_OK;
    r->error[0] = 0;
    if (ft_test_rand(s) % 4 == 0) {
        r->status = FT_EREQUEST;
        snprintf(r->error, sizeof r->error, "beam: must be 1..4096, got %u",
                 (unsigned)(ft_test_rand(s) % 100000));
        return;
    }
    r->n = (uint32_t)(ft_test_rand(s) % 6);
    uint32_t off = 0;
    for (uint32_t i = 0; i < r->n; i++) {
        ft_hit *h = &r->hits[i];
        h->len = 1 + (uint32_t)(ft_test_rand(s) % 8);
        h->tok_off = off;
        for (uint32_t j = 0; j < h->len; j++)
            r->tokens[off + j] = (uint32_t)ft_test_rand(s);
        off += h->len;
        h->value = ft_test_rand(s);
        uint64_t db = ft_test_rand(s);
        uint32_t fb = (uint32_t)ft_test_rand(s);
        memcpy(&h->score, &db, 8);
        memcpy(&h->sigma, &fb, 4);
    }
}

static int same_req(const ft_request *a, const ft_request *b)
{
    size_t n = (size_t)a->T * a->K;
    return a->T == b->T && a->K == b->K && a->beam == b->beam &&
           a->results == b->results &&
           fti_f2u(a->theta_tok) == fti_f2u(b->theta_tok) &&
           fti_f2u(a->theta_sent) == fti_f2u(b->theta_sent) &&
           fti_d2u(a->alpha) == fti_d2u(b->alpha) &&
           memcmp(a->tokens, b->tokens, n * 4) == 0 &&
           memcmp(a->logp, b->logp, n * 4) == 0;
}

static int same_res(const ft_result *a, const ft_result *b)
{
    if (a->status != b->status || a->n != b->n)
        return 0;
    if (a->status != FT_OK)
        return strcmp(a->error, b->error) == 0;
    for (uint32_t i = 0; i < a->n; i++) {
        const ft_hit *x = &a->hits[i], *y = &b->hits[i];
        if (x->len != y->len || x->value != y->value ||
            fti_d2u(x->score) != fti_d2u(y->score) ||
            fti_f2u(x->sigma) != fti_f2u(y->sigma) ||
            memcmp(a->tokens + x->tok_off, b->tokens + y->tok_off,
                   x->len * 4) != 0)
            return 0;
    }
    return 1;
}

/* ---- round trips ------------------------------------------------------- */

static void test_search(void)
{
    uint32_t tk[6] = {1, 2, 3, 70000, 4294967295u, 0};
    float lp[6] = {-1, -2, -0.5f, 0, -0.0f, -3};
    ft_request q;
    ft_request_init(&q);
    q.T = 2;
    q.K = 3;
    q.tokens = tk;
    q.logp = lp;

    /* all defaults: mask 0, fields zero on the wire, defaults decoded */
    B.len = 0;
    FT_PASS(ft_frame_encode_search(&B, 77, 250, &q, NULL, 1));
    FT_CHECK_EQ_U64(B.len, 32 + 8 + 40 + 6 * 8);
    FT_CHECK(memcmp(B.data, "FTRP\x01\x00\x01\x00\x01\x00\x00\x00", 12) == 0);
    FT_CHECK_EQ_U64(rd32(B.data + 12), 250);
    FT_CHECK_EQ_U64(rd32(B.data + 16), 77);
    FT_CHECK_EQ_U64(rd32(B.data + 24), 8 + 40 + 48);
    for (int i = 52; i < 80; i++)
        FT_CHECK(B.data[i] == 0);
    FT_CHECK(ft_frame_is_binary(B.data, B.len));
    roundtrip(0);
    FT_CHECK_EQ_U64(M.hdr.type, FT_FRAME_SEARCH);
    FT_CHECK_EQ_U64(M.hdr.id, 77);
    FT_CHECK_EQ_U64(M.hdr.deadline_ms, 250);
    FT_CHECK_EQ_U64(M.count, 1);
    FT_CHECK_EQ_U64(M.masks[0], 0);
    FT_CHECK(same_req(&M.reqs[0], &q));
    FT_CHECK_EQ_U64(M.reqs[0].beam, FT_DEFAULT_BEAM);
    FT_CHECK_EQ_U64(M.reqs[0].results, 0);
    FT_CHECK(isinf(M.reqs[0].theta_tok) && M.reqs[0].theta_tok < 0);
    FT_CHECK(isinf(M.reqs[0].theta_sent) && M.reqs[0].theta_sent < 0);
    FT_CHECK(M.reqs[0].alpha == 1.0);
    FT_CHECK((uintptr_t)M.reqs[0].tokens % 4 == 0);
    FT_CHECK((uintptr_t)M.reqs[0].logp % 4 == 0);
    FT_CHECK(M.reqs[0].tokens != tk);
    FT_PASS(ft_request_validate(&M.reqs[0], 0, err, sizeof err));

    /* every field given */
    q.beam = 7;
    q.results = 3;
    q.theta_tok = -20;
    q.theta_sent = -0.0f;
    q.alpha = 0.0;
    FT_CHECK_EQ_U64(ft_frame_mask_of(&q), FT_FRAME_HAS_ALL);
    B.len = 0;
    FT_PASS(ft_frame_encode_search(&B, 1, 0, &q, NULL, 1));
    roundtrip(0);
    FT_CHECK_EQ_U64(M.masks[0], FT_FRAME_HAS_ALL);
    FT_CHECK(same_req(&M.reqs[0], &q));
    /* The client's way: the exact size first, then the frame written
     * into a message of that size: the same bytes; the same errors. */
    {
        size_t size = 0;
        FT_PASS(ft_frame_search_size(&q, NULL, 1, &size));
        FT_CHECK_EQ_U64(size, B.len);
        unsigned char *direct = malloc(size);
        FT_CHECK(direct != NULL);
        FT_PASS(ft_frame_encode_search_to(direct, size, 1, 0,
                                          FT_FRAME_F_CHECKSUM, &q, NULL, 1));
        FT_CHECK(memcmp(direct, B.data, size) == 0);
        FT_FAIL(ft_frame_encode_search_to(direct, size + 1, 1, 0,
                                          FT_FRAME_F_CHECKSUM, &q, NULL, 1),
                FT_EINVAL);
        FT_FAIL(ft_frame_encode_search_to(direct, size, 1, 0, 0x2u, &q, NULL,
                                          1), FT_EINVAL);
        /* Without the checksum (the client on ipc://): the same bytes but
         * the flags word and the checksum field, both 0; it decodes to the
         * same request. */
        FT_PASS(ft_frame_encode_search_to(direct, size, 1, 0, 0, &q, NULL,
                                          1));
        FT_CHECK(memcmp(direct, B.data, 8) == 0);
        FT_CHECK_EQ_U64(rd32(direct + 8), 0);
        FT_CHECK(memcmp(direct + 12, B.data + 12, 16) == 0);
        FT_CHECK_EQ_U64(rd32(direct + 28), 0);
        FT_CHECK(memcmp(direct + 32, B.data + 32, size - 32) == 0);
        {
            ft_frame_msg M2;
            ft_frame_msg_init(&M2);
            FT_PASS(ft_frame_decode(&M2, direct, size, 4, err, sizeof err));
            FT_CHECK_EQ_U64(M2.hdr.flags, 0);
            FT_CHECK(same_req(&M2.reqs[0], &q));
            ft_frame_msg_free(&M2);
        }
        free(direct);
        ft_request big = q;
        big.K = FT_MAX_K + 1;
        FT_FAIL(ft_frame_search_size(&big, NULL, 1, &size), FT_ELIMIT);
        big = q;
        big.tokens = NULL;
        FT_FAIL(ft_frame_search_size(&big, NULL, 1, &size), FT_EINVAL);
        uint32_t bad = 0x80;
        FT_FAIL(ft_frame_search_size(&q, &bad, 1, &size), FT_EINVAL);
        FT_FAIL(ft_frame_search_size(&q, NULL, 0, &size), FT_EINVAL);
    }

    /* an explicit mask wins: a field given at its default value stays
     * given; one left out is sent as zero and decodes to its default */
    ft_request_init(&q);
    q.T = 2;
    q.K = 3;
    q.tokens = tk;
    q.logp = lp;
    q.results = 9;
    uint32_t mask = FT_FRAME_HAS_BEAM | FT_FRAME_HAS_ALPHA;
    B.len = 0;
    FT_PASS(ft_frame_encode_search(&B, 2, 0, &q, &mask, 1));
    FT_CHECK_EQ_U64(rd32(B.data + 52), 100);  /* beam sent */
    FT_CHECK_EQ_U64(rd32(B.data + 56), 0);    /* results not sent */
    roundtrip(0);
    FT_CHECK_EQ_U64(M.masks[0], mask);
    FT_CHECK_EQ_U64(M.reqs[0].results, 0);
    FT_CHECK_EQ_U64(M.reqs[0].beam, 100);

    /* results given as 0: only the wire can say it, the fault check does */
    ft_request_init(&q);
    q.T = 1;
    q.K = 1;
    q.tokens = tk;
    q.logp = lp;
    mask = FT_FRAME_HAS_RESULTS;
    B.len = 0;
    FT_PASS(ft_frame_encode_search(&B, 3, 0, &q, &mask, 1));
    roundtrip(0);
    FT_FAIL(ft_frame_search_fault(&M, 0, err, sizeof err), FT_EREQUEST);
    FT_CHECK_STR(err, "results: must be 1..4096, got 0");
    FT_FAIL(ft_frame_search_fault(&M, 1, err, sizeof err), FT_EINVAL);
    mask = 0;
    B.len = 0;
    FT_PASS(ft_frame_encode_search(&B, 3, 0, &q, &mask, 1));
    roundtrip(0);
    FT_PASS(ft_frame_search_fault(&M, 0, err, sizeof err));

    /* empty grids pass framing; the validator names them later */
    ft_request_init(&q);
    B.len = 0;
    FT_PASS(ft_frame_encode_search(&B, 4, 0, &q, NULL, 1));
    FT_CHECK_EQ_U64(B.len, 32 + 8 + 40);
    roundtrip(0);
    FT_CHECK_EQ_U64(M.reqs[0].T, 0);
    FT_FAIL(ft_request_validate(&M.reqs[0], 0, err, sizeof err), FT_EREQUEST);
    FT_CHECK_STR(err, "tokens: the grid must have 1..64 positions, got 0");

    /* random batches, and the decoder's storage reused across them */
    uint64_t s = 7;
    ft_request reqs[8];
    for (int round = 0; round < 300; round++) {
        size_t n = 1 + ft_test_rand(&s) % 8;
        for (size_t i = 0; i < n; i++)
            rand_req(&reqs[i], &s, i, 6, round % 10 ? 8 : 300);
        B.len = 0;
        uint64_t id = ft_test_rand(&s);
        FT_PASS(ft_frame_encode_search(&B, id, (uint32_t)round, reqs, NULL, n));
        roundtrip(8);
        FT_CHECK_EQ_U64(M.count, n);
        FT_CHECK_EQ_U64(M.hdr.id, id);
        for (size_t i = 0; i < n; i++) {
            FT_CHECK(same_req(&M.reqs[i], &reqs[i]));
            FT_CHECK_EQ_U64(M.masks[i], ft_frame_mask_of(&reqs[i]));
        }
        /* the decoded parts encode back to the same bytes too */
        B2.len = 0;
        FT_PASS(ft_frame_encode_search(&B2, id, (uint32_t)round, M.reqs,
                                       M.masks, M.count));
        FT_CHECK(B2.len == B.len && memcmp(B2.data, B.data, B.len) == 0);
    }

    /* maxima: a 64 x 4096 grid, and a batch at the caller's limit */
    rand_req(&reqs[0], &s, 0, 1, 1);
    reqs[0].T = FT_MAX_T;
    reqs[0].K = FT_MAX_K;
    for (size_t i = 0; i < (size_t)FT_MAX_T * FT_MAX_K; i++) {
        g_tok[i] = (uint32_t)i;
        g_logp[i] = -(float)i;
    }
    B.len = 0;
    FT_PASS(ft_frame_encode_search(&B, 5, 0, reqs, NULL, 1));
    FT_CHECK_EQ_U64(B.len, 32 + 8 + 40 + 64 * 4096 * 8);
    roundtrip(1);
    FT_CHECK(same_req(&M.reqs[0], &reqs[0]));
    for (int i = 1; i < 8; i++)
        reqs[i] = reqs[0];
    B.len = 0;
    FT_PASS(ft_frame_encode_search(&B, 6, 0, reqs, NULL, 8));
    roundtrip(8);
    FT_CHECK_EQ_U64(M.count, 8);
    for (int i = 0; i < 8; i++)
        FT_CHECK(same_req(&M.reqs[i], &reqs[0]));
    BAD(B.data, B.len,
        "search.count: 8 requests, the batch limit is 1..4 at byte 32");

    /* encoder argument checks leave the buffer as it was */
    size_t before = B.len;
    reqs[0].T = FT_MAX_T + 1;
    FT_FAIL(ft_frame_encode_search(&B, 0, 0, reqs, NULL, 1), FT_ELIMIT);
    reqs[0].T = 1;
    reqs[0].K = FT_MAX_K + 1;
    FT_FAIL(ft_frame_encode_search(&B, 0, 0, reqs, NULL, 1), FT_ELIMIT);
    reqs[0].K = 1;
    reqs[0].tokens = NULL;
    FT_FAIL(ft_frame_encode_search(&B, 0, 0, reqs, NULL, 1), FT_EINVAL);
    reqs[0].tokens = g_tok;
    mask = 0x20;
    FT_FAIL(ft_frame_encode_search(&B, 0, 0, reqs, &mask, 1), FT_EINVAL);
    FT_FAIL(ft_frame_encode_search(&B, 0, 0, reqs, NULL, 0), FT_EINVAL);
    FT_CHECK_EQ_U64(B.len, before);
}

/* test_inplace: a SEARCH decoded from an aligned buffer points into it
 * (no copy), one at an odd address is copied, the last grid may end
 * exactly at the frame's end, one byte short is refused at either
 * alignment, and ft_frame_msg_trim gives a large copy's pool back. */
static void test_inplace(void)
{
    static const uint32_t tok0[6] = {7, 9, 11, 7, 8, 9};
    static const float lp0[6] = {-0.5f, -1.0f, -2.0f, -0.25f, -0.75f, -3.0f};
    static const uint32_t tok1[1] = {42};
    static const float lp1[1] = {-0.125f};
    ft_request q[2];
    ft_request_init(&q[0]);
    ft_request_init(&q[1]);
    q[0].T = 2;
    q[0].K = 3;
    q[0].tokens = tok0;
    q[0].logp = lp0;
    q[1].T = 1;
    q[1].K = 1;
    q[1].tokens = tok1;
    q[1].logp = lp1;
    B.len = 0;
    FT_PASS(ft_frame_encode_search(&B, 5, 0, q, NULL, 2));
    /* header 32, count and reserved 8, request headers 40 each, grids 8
     * bytes per element: 32 + 8 + 40 + 48 + 40 + 8 */
    FT_CHECK_EQ_U64(B.len, 176);
    for (size_t shift = 0; shift < 4; shift++) {
        unsigned char *raw = malloc(B.len + 8), *p = raw + shift;
        FT_CHECK(raw != NULL && ((uintptr_t)raw & 7u) == 0);
        memcpy(p, B.data, B.len);
        FT_PASS(ft_frame_decode(&M, p, B.len, 4, err, sizeof err));
        FT_CHECK_EQ_U64(M.count, 2);
        FT_CHECK(M.inplace == (shift == 0));
        if (shift == 0) {
            FT_CHECK((const unsigned char *)M.reqs[0].tokens == p + 80);
            FT_CHECK((const unsigned char *)M.reqs[0].logp == p + 104);
            FT_CHECK((const unsigned char *)M.reqs[1].tokens == p + 168);
            /* the last grid ends exactly at the frame's end */
            FT_CHECK((const unsigned char *)(M.reqs[1].logp + 1) ==
                     p + B.len);
        } else {
            FT_CHECK(M.grid_cap > 0);
        }
        FT_CHECK(memcmp(M.reqs[0].tokens, tok0, sizeof tok0) == 0);
        FT_CHECK(memcmp(M.reqs[0].logp, lp0, sizeof lp0) == 0);
        FT_CHECK(M.reqs[1].tokens[0] == 42 && M.reqs[1].logp[0] == -0.125f);
        /* one byte short, the header made to agree */
        fix(p, B.len - 1);
        bad_at(__LINE__, p, B.len - 1, FT_EPROTO,
               "search[1]: truncated: the 1x1 grid needs 8 bytes, 7 left "
               "at byte 168");
        ft_frame_msg_trim(&M, 0);
        FT_CHECK(M.grid_cap == 0 && M.grid_tok == NULL && M.count == 0);
        free(raw);
    }
}

static void test_result(void)
{
    ft_result res[6];
    for (int i = 0; i < 6; i++)
        FT_PASS(ft_result_alloc(&res[i], 8, 8));
    /* one hit, drawn byte by byte */
    res[0].n = 1;
    res[0].status = FT_OK;
    res[0].hits[0] = (ft_hit){.len = 2, .tok_off = 0, .value = 42,
                              .score = -1.5, .sigma = -2.5f};
    res[0].tokens[0] = 5;
    res[0].tokens[1] = 70000;
    B.len = 0;
    FT_PASS(ft_frame_encode_result(&B, 99, res, 1));
    FT_CHECK_EQ_U64(B.len, 32 + 8 + 16 + 24 + 8);
    FT_CHECK_EQ_U64(rd32(B.data + 6) & 0xffff, FT_FRAME_RESULT);
    FT_CHECK_EQ_U64(rd32(B.data + 40), 0);  /* status */
    FT_CHECK_EQ_U64(rd32(B.data + 48), 1);  /* hits */
    FT_CHECK_EQ_U64(rd32(B.data + 52), 2);  /* tokens */
    FT_CHECK_EQ_U64(rd32(B.data + 56), 2);  /* len */
    FT_CHECK_EQ_U64(rd32(B.data + 60), fti_f2u(-2.5f));
    FT_CHECK_EQ_U64(rd32(B.data + 64), 42);
    FT_CHECK_EQ_U64(rd32(B.data + 84), 70000);
    roundtrip(0);
    FT_CHECK_EQ_U64(M.count, 1);
    FT_CHECK(same_res(&M.res[0], &res[0]));

    /* an error result and an empty one */
    res[0].status = FT_EREQUEST;
    snprintf(res[0].error, sizeof res[0].error,
             "logp: position 3, proposal 1: not finite");
    res[1].n = 0;
    res[1].status = FT_OK;
    B.len = 0;
    FT_PASS(ft_frame_encode_result(&B, 1, res, 2));
    FT_CHECK_EQ_U64(B.len, 32 + 8 + 16 + strlen(res[0].error) + 16);
    roundtrip(0);
    FT_CHECK_EQ_U64(M.count, 2);
    FT_CHECK_EQ_U64(M.res[0].status, FT_EREQUEST);
    FT_CHECK_STR(M.res[0].error, res[0].error);
    FT_CHECK_EQ_U64(M.res[0].n, 0);
    FT_CHECK_EQ_U64(M.res[1].status, FT_OK);
    FT_CHECK_EQ_U64(M.res[1].n, 0);
    FT_CHECK_STR(M.res[1].error, "");

    /* random batches, decoded both ways */
    uint64_t s = 11;
    ft_result into[6];
    for (int i = 0; i < 6; i++)
        FT_PASS(ft_result_alloc(&into[i], 8, 8));
    for (int round = 0; round < 500; round++) {
        size_t n = 1 + ft_test_rand(&s) % 6;
        for (size_t i = 0; i < n; i++)
            rand_res(&res[i], &s);
        B.len = 0;
        FT_PASS(ft_frame_encode_result(&B, (uint64_t)round, res, n));
        roundtrip(6);
        FT_CHECK_EQ_U64(M.count, n);
        for (size_t i = 0; i < n; i++)
            FT_CHECK(same_res(&M.res[i], &res[i]));
        ft_frame_hdr h;
        uint32_t got = 0;
        FT_PASS(ft_frame_decode_result_into(&h, into, 6, &got, B.data, B.len,
                                            err, sizeof err));
        FT_CHECK_EQ_U64(got, n);
        FT_CHECK_EQ_U64(h.id, (uint64_t)round);
        for (size_t i = 0; i < n; i++)
            FT_CHECK(same_res(&into[i], &res[i]));
        B2.len = 0;
        FT_PASS(ft_frame_encode_result(&B2, (uint64_t)round, into, n));
        FT_CHECK(B2.len == B.len && memcmp(B2.data, B.data, B.len) == 0);
        /* The server's way: the exact size first, then the frame written
         * into a buffer of that size: the same bytes. */
        size_t size = 0;
        FT_PASS(ft_frame_result_size(res, n, &size));
        FT_CHECK_EQ_U64(size, B.len);
        unsigned char *direct = malloc(size);
        FT_CHECK(direct != NULL);
        FT_PASS(ft_frame_encode_result_to(direct, size, (uint64_t)round,
                                          FT_FRAME_F_CHECKSUM, res, n));
        FT_CHECK(memcmp(direct, B.data, size) == 0);
        memset(direct, 0xa5, size); /* and without measuring again */
        FT_PASS(ft_frame_encode_result_sized(direct, size, (uint64_t)round,
                                             FT_FRAME_F_CHECKSUM, res, n));
        FT_CHECK(memcmp(direct, B.data, size) == 0);
        FT_FAIL(ft_frame_encode_result_to(direct, size - 1, (uint64_t)round,
                                          FT_FRAME_F_CHECKSUM, res, n),
                FT_EINVAL);
        FT_FAIL(ft_frame_encode_result_to(direct, size, (uint64_t)round, 0x4u,
                                          res, n), FT_EINVAL);
        /* The answer to a request without a checksum: flags and checksum
         * 0, the rest the same bytes; decoded into the same results. */
        FT_PASS(ft_frame_encode_result_to(direct, size, (uint64_t)round, 0,
                                          res, n));
        FT_CHECK_EQ_U64(rd32(direct + 8), 0);
        FT_CHECK_EQ_U64(rd32(direct + 28), 0);
        FT_CHECK(memcmp(direct + 12, B.data + 12, 16) == 0);
        FT_CHECK(memcmp(direct + 32, B.data + 32, size - 32) == 0);
        {
            uint32_t got2 = 0;
            ft_frame_hdr h2;
            FT_PASS(ft_frame_decode_result_into(&h2, into, 6, &got2, direct,
                                                size, err, sizeof err));
            FT_CHECK_EQ_U64(got2, n);
            FT_CHECK_EQ_U64(h2.flags, 0);
            for (size_t i = 0; i < n; i++)
                FT_CHECK(same_res(&into[i], &res[i]));
        }
        free(direct);
    }

    /* the caller's buffers must fit: FT_ELIMIT */
    res[0].status = FT_OK;
    res[0].n = 3;
    for (uint32_t i = 0; i < 3; i++) {
        res[0].hits[i] = (ft_hit){.len = 2, .tok_off = 2 * i};
        res[0].tokens[2 * i] = res[0].tokens[2 * i + 1] = i;
    }
    res[1].status = FT_OK;
    res[1].n = 0;
    B.len = 0;
    FT_PASS(ft_frame_encode_result(&B, 1, res, 2));
    uint32_t got = 7;
    FT_FAIL(ft_frame_decode_result_into(NULL, into, 1, &got, B.data, B.len,
                                        err, sizeof err), FT_ELIMIT);
    FT_CHECK_STR(err, "result.count: 2 results, room for 1 at byte 32");
    FT_CHECK_EQ_U64(got, 0);
    ft_result small[2];
    FT_PASS(ft_result_alloc(&small[0], 2, 4));
    FT_PASS(ft_result_alloc(&small[1], 2, 4));
    FT_FAIL(ft_frame_decode_result_into(NULL, small, 2, &got, B.data, B.len,
                                        err, sizeof err), FT_ELIMIT);
    FT_CHECK_STR(err, "result[0].hits: 3 exceed the buffer's 2 at byte 48");
    small[0].cap_hits = 3;
    small[0].cap_tokens = 4;
    FT_FAIL(ft_frame_decode_result_into(NULL, small, 2, &got, B.data, B.len,
                                        err, sizeof err), FT_ELIMIT);
    FT_CHECK_STR(err, "result[0].tokens: 6 exceed the buffer's 4 at byte 52");
    small[0].cap_hits = 2;
    ft_result_free(&small[0]);
    ft_result_free(&small[1]);
    B.len = 0;
    FT_PASS(ft_frame_encode_pong(&B, 5));
    FT_FAIL(ft_frame_decode_result_into(NULL, into, 6, &got, B.data, B.len,
                                        err, sizeof err), FT_EPROTO);
    FT_CHECK_STR(err, "type: PONG where RESULT was expected at byte 6");

    /* maxima: 4096 hits of 255 tokens */
    ft_result big;
    FT_PASS(ft_result_alloc(&big, FT_MAX_RESULTS, FT_MAX_KEY_LEN_LIMIT));
    big.n = FT_MAX_RESULTS;
    big.status = FT_OK;
    for (uint32_t i = 0; i < big.n; i++) {
        big.hits[i] = (ft_hit){.len = 255, .tok_off = 255 * i, .value = i,
                               .score = -(double)i, .sigma = -(float)i};
        for (uint32_t j = 0; j < 255; j++)
            big.tokens[255 * i + j] = i * 255 + j;
    }
    B.len = 0;
    FT_PASS(ft_frame_encode_result(&B, 1, &big, 1));
    FT_CHECK_EQ_U64(B.len, 32 + 8 + 16 + 4096 * (24 + 255 * 4));
    roundtrip(1);
    FT_CHECK(same_res(&M.res[0], &big));

    /* encoder argument checks */
    size_t before = B.len;
    big.n = FT_MAX_RESULTS + 1;
    FT_FAIL(ft_frame_encode_result(&B, 1, &big, 1), FT_ELIMIT);
    {
        size_t sz;
        FT_FAIL(ft_frame_result_size(&big, 1, &sz), FT_ELIMIT);
    }
    big.n = 1;
    big.hits[0].len = 0;
    FT_FAIL(ft_frame_encode_result(&B, 1, &big, 1), FT_EINVAL);
    big.hits[0].len = 256;
    FT_FAIL(ft_frame_encode_result(&B, 1, &big, 1), FT_EINVAL);
    big.hits[0].len = 2;
    big.hits[0].tok_off = big.cap_tokens - 1;
    FT_FAIL(ft_frame_encode_result(&B, 1, &big, 1), FT_EINVAL);
    big.status = -1;
    FT_FAIL(ft_frame_encode_result(&B, 1, &big, 1), FT_EINVAL);
    FT_CHECK_EQ_U64(B.len, before);
    ft_result_free(&big);
    for (int i = 0; i < 6; i++) {
        ft_result_free(&res[i]);
        ft_result_free(&into[i]);
    }
}

static void test_small_types(void)
{
    /* ERROR */
    B.len = 0;
    FT_PASS(ft_frame_encode_error(&B, 12, FT_EPROTO, "magic: bad at byte 0"));
    FT_CHECK_EQ_U64(B.len, 32 + 8 + 20);
    roundtrip(0);
    FT_CHECK_EQ_U64(M.hdr.type, FT_FRAME_ERROR);
    FT_CHECK_EQ_U64(M.hdr.id, 12);
    FT_CHECK_EQ_U64(M.status, FT_EPROTO);
    FT_CHECK_STR(M.text, "magic: bad at byte 0");
    FT_FAIL(ft_frame_encode_error(&B, 1, FT_OK, "x"), FT_EINVAL);
    /* a message over the limit is cut visibly, on a character boundary */
    char longmsg[2000];
    memset(longmsg, 'a', sizeof longmsg);
    longmsg[1020] = (char)0xc3; /* "é" across the cut */
    longmsg[1021] = (char)0xa9;
    longmsg[sizeof longmsg - 1] = 0;
    B.len = 0;
    FT_PASS(ft_frame_encode_error(&B, 1, FT_EINTERNAL, longmsg));
    roundtrip(0);
    FT_CHECK_EQ_U64(M.text_len, 1020 + 3);
    FT_CHECK(memcmp(M.text + 1020, "...", 4) == 0);
    memset(longmsg, 'b', FT_FRAME_MAX_MSG);
    longmsg[FT_FRAME_MAX_MSG] = 0;
    B.len = 0;
    FT_PASS(ft_frame_encode_error(&B, 1, FT_EINTERNAL, longmsg));
    roundtrip(0);
    FT_CHECK_STR(M.text, longmsg);
    B.len = 0;
    FT_PASS(ft_frame_encode_error(&B, 1, 999, NULL)); /* unknown codes pass */
    roundtrip(0);
    FT_CHECK_EQ_U64(M.status, 999);
    FT_CHECK_STR(M.text, "");

    /* INFO, INFO_REPLY */
    B.len = 0;
    FT_PASS(ft_frame_encode_info(&B, 3));
    FT_CHECK_EQ_U64(B.len, 32);
    roundtrip(0);
    FT_CHECK_EQ_U64(M.hdr.type, FT_FRAME_INFO);
    FT_CHECK_STR(M.text, "");
    const char *info = "# Server\nversion:0.1.0\nkeys:7\n";
    B.len = 0;
    FT_PASS(ft_frame_encode_info_reply(&B, 3, info, strlen(info)));
    roundtrip(0);
    FT_CHECK_STR(M.text, info);
    char *huge = malloc(FT_FRAME_MAX_TEXT + 1);
    FT_CHECK(huge != NULL);
    memset(huge, 'x', FT_FRAME_MAX_TEXT + 1);
    B.len = 0;
    FT_PASS(ft_frame_encode_info_reply(&B, 3, huge, FT_FRAME_MAX_TEXT));
    roundtrip(0);
    FT_CHECK_EQ_U64(M.text_len, FT_FRAME_MAX_TEXT);
    FT_FAIL(ft_frame_encode_info_reply(&B, 3, huge, FT_FRAME_MAX_TEXT + 1),
            FT_ELIMIT);
    /* a hand-made frame one byte over the limit */
    ft_buf_put_u8(&B, 'x');
    fix(B.data, B.len);
    BAD(B.data, B.len,
        "info_reply.text: 1048577 bytes exceed 1048576 at byte 32");
    free(huge);
    FT_FAIL(ft_frame_encode_info_reply(&B, 3, "a\0b", 3), FT_EINVAL);

    /* PING, PONG */
    B.len = 0;
    FT_PASS(ft_frame_encode_ping(&B, 0xffffffffffffffffull));
    roundtrip(0);
    FT_CHECK_EQ_U64(M.hdr.type, FT_FRAME_PING);
    FT_CHECK_EQ_U64(M.hdr.id, 0xffffffffffffffffull);
    B.len = 0;
    FT_PASS(ft_frame_encode_pong(&B, 8));
    roundtrip(0);
    FT_CHECK_EQ_U64(M.hdr.type, FT_FRAME_PONG);
    FT_FAIL(ft_frame_check_request(&M.hdr, err, sizeof err), FT_EPROTO);
    FT_CHECK_STR(err, "type: PONG is a reply, not a request at byte 6");
    B.len = 0;
    FT_PASS(ft_frame_encode_ping(&B, 8));
    roundtrip(0);
    FT_PASS(ft_frame_check_request(&M.hdr, err, sizeof err));

    /* RELOAD, RELOAD_REPLY */
    B.len = 0;
    FT_PASS(ft_frame_encode_reload(&B, 4, "/srv/index/new.fti"));
    roundtrip(0);
    FT_CHECK_EQ_U64(M.hdr.type, FT_FRAME_RELOAD);
    FT_CHECK_STR(M.text, "/srv/index/new.fti");
    B.len = 0;
    FT_PASS(ft_frame_encode_reload(&B, 4, NULL));
    FT_CHECK_EQ_U64(B.len, 32);
    roundtrip(0);
    FT_CHECK_STR(M.text, "");
    char path[FT_FRAME_MAX_PATH + 2];
    memset(path, 'p', sizeof path);
    path[FT_FRAME_MAX_PATH] = 0;
    B.len = 0;
    FT_PASS(ft_frame_encode_reload(&B, 4, path));
    roundtrip(0);
    path[FT_FRAME_MAX_PATH] = 'p';
    path[FT_FRAME_MAX_PATH + 1] = 0;
    FT_FAIL(ft_frame_encode_reload(&B, 4, path), FT_ELIMIT);
    B.len = 0;
    FT_PASS(ft_frame_encode_reload_reply(&B, 4, FT_OK, "reloaded: 7 keys"));
    roundtrip(0);
    FT_CHECK_EQ_U64(M.hdr.type, FT_FRAME_RELOAD_REPLY);
    FT_CHECK_EQ_U64(M.status, FT_OK);
    FT_CHECK_STR(M.text, "reloaded: 7 keys");
    B.len = 0;
    FT_PASS(ft_frame_encode_reload_reply(&B, 4, FT_EFORMAT,
                                         "new.fti: not a FlashTrie index"));
    roundtrip(0);
    FT_CHECK_EQ_U64(M.status, FT_EFORMAT);

    /* names and the JSON-or-frame test */
    FT_CHECK_STR(ft_frame_type_name(FT_FRAME_RELOAD_REPLY), "RELOAD_REPLY");
    FT_CHECK_STR(ft_frame_type_name(7), "unknown");
    FT_CHECK(!ft_frame_is_binary("{\"tokens\": []}", 14));
    FT_CHECK(!ft_frame_is_binary("  {", 3));
    FT_CHECK(!ft_frame_is_binary("", 0));
    FT_CHECK(ft_frame_is_binary("F", 1));
}

/* ---- malformed frames -------------------------------------------------- */

static void test_header_errors(void)
{
    unsigned char f[256];
    B.len = 0;
    FT_PASS(ft_frame_encode_ping(&B, 0x1122334455667788ull));
    memcpy(f, B.data, 32);

    BAD("{\"tokens\": [[1]], \"logp\": [[0]]}", 30,
        "magic: expected \"FTRP\", got bytes 7b 22 74 6f at byte 0");
    BAD("FX", 2, "magic: expected \"FTRP\", got bytes 46 58 at byte 0");
    BAD("FTR", 3, "header: truncated: 3 bytes of the 32-byte header at byte 3");
    BAD(f, 0, "header: truncated: 0 bytes of the 32-byte header at byte 0");
    BAD(f, 31, "header: truncated: 31 bytes of the 32-byte header at byte 31");
    /* a newer version: named, and the id is still known for the ERROR */
    wr16(f + 4, 2);
    BAD(f, 32, "version: 2 is not spoken here (speaks 1) at byte 4");
    FT_CHECK_EQ_U64(M.hdr.id, 0x1122334455667788ull);
    BAD(f, 6, "version: 2 is not spoken here (speaks 1) at byte 4");
    FT_CHECK_EQ_U64(M.hdr.id, 0);
    wr16(f + 4, 0);
    BAD(f, 32, "version: 0 is not spoken here (speaks 1) at byte 4");
    wr16(f + 4, 1);
    wr16(f + 6, 0x0009);
    fix(f, 32);
    BAD(f, 32, "type: unknown type 0x0009 at byte 6");
    FT_CHECK_EQ_U64(M.hdr.id, 0x1122334455667788ull);
    wr16(f + 6, FT_FRAME_PING);
    BAD32(f, 32, 8, 0x7, "flags: unknown bits 0x6 at byte 8");
    wr32(f + 8, FT_FRAME_F_CHECKSUM);
    fix(f, 32);
    wr32(f + 24, 4);
    BAD(f, 32, "length: payload of 4 bytes declared, 0 follow the header at "
               "byte 24");
    fix(f, 32);
    f[32] = 0;
    BAD(f, 33, "length: payload of 0 bytes declared, 1 follow the header at "
               "byte 24");
    wr32(f + 24, 0xffffffffu);
    BAD(f, 32, "length: payload of 4294967295 bytes declared, 0 follow the "
               "header at byte 24");
    fix(f, 32);
    uint32_t good = rd32(f + 28);
    wr32(f + 28, good ^ 1);
    char want[128];
    snprintf(want, sizeof want,
             "checksum: 0x%08x does not match the frame's 0x%08x at byte 28",
             good ^ 1, good);
    BAD(f, 32, want);
}

/* test_checksum_optional: the checksum is optional, a clear flag means a
 * zero field. */
static void test_checksum_optional(void)
{
    unsigned char f[64];
    B.len = 0;
    FT_PASS(ft_frame_encode_ping(&B, 1));
    memcpy(f, B.data, 32);
    wr32(f + 8, 0);
    wr32(f + 28, 0xdeadbeefu);
    BAD(f, 32, "checksum: 0xdeadbeef set without the checksum flag at byte 28");
    wr32(f + 28, 0);
    FT_PASS(ft_frame_decode(&M, f, 32, 0, err, sizeof err));
    FT_CHECK_EQ_U64(M.hdr.flags, 0);
    /* and it re-encodes without one */
    B2.len = 0;
    FT_PASS(ft_frame_encode(&B2, &M));
    FT_CHECK(B2.len == 32 && memcmp(B2.data, f, 32) == 0);
}

/* A SEARCH frame of two 1x2 requests to break in known places. */
static size_t search2(unsigned char *f)
{
    static uint32_t tk[2] = {1, 2};
    static float lp[2] = {-1, -2};
    ft_request q[2];
    ft_request_init(&q[0]);
    q[0].T = 1;
    q[0].K = 2;
    q[0].tokens = tk;
    q[0].logp = lp;
    q[0].beam = 5;
    q[1] = q[0];
    B.len = 0;
    FT_PASS(ft_frame_encode_search(&B, 21, 0, q, NULL, 2));
    memcpy(f, B.data, B.len);
    return B.len; /* 32 + 8 + 2 * (40 + 16) = 152 */
}

static void test_search_errors(void)
{
    unsigned char f[4096];
    size_t n = search2(f);
    FT_CHECK_EQ_U64(n, 152);
    FT_PASS(ft_frame_decode(&M, f, n, 4, err, sizeof err));
    BAD32(f, n, 32, 0,
          "search.count: 0 requests, the batch limit is 1..4 at byte 32");
    BAD32(f, n, 32, 5,
          "search.count: 5 requests, the batch limit is 1..4 at byte 32");
    BAD32(f, n, 32, 3,
          "search.count: 3 requests need at least 120 bytes, 112 left at "
          "byte 40");
    wr32(f + 32, 2);
    /* request 0's grid swallows part of request 1 */
    BAD32(f, n, 48, 5,
          "search[1]: truncated: 40 bytes needed, 32 left at byte 120");
    wr32(f + 48, 2);
    BAD32(f, n, 32, 4,
          "search.count: 4 requests need at least 160 bytes, 112 left at "
          "byte 40");
    BAD32(f, n, 32, 1,
          "payload: 56 trailing bytes after the last request at byte 96");
    const field32 fresh[] = {
        {36, 1, "search.reserved: 0x00000001, must be 0 at byte 36"},
        {96, 0x40, "search[1].mask: unknown bits 0x40 at byte 96"},
        {100, 65, "search[1].T: 65 exceeds 64 at byte 100"},
        {104, 4097, "search[1].K: 4097 exceeds 4096 at byte 104"},
        {104, 3, "search[1]: truncated: the 1x3 grid needs 24 bytes, 16 "
                 "left at byte 136"},
        /* counts that would overflow: limits first */
        {100, 0xffffffffu, "search[1].T: 4294967295 exceeds 64 at byte 100"},
        /* beam sent, mask says left out */
        {40, 0, "search[0].beam: 0x5 sent although the mask leaves it out "
                "at byte 52"},
        {56, 3, "search[0].results: 0x3 sent although the mask leaves it "
                "out at byte 56"},
        {60, fti_f2u(-1.0f), "search[0].theta_tok: 0xbf800000 sent although "
                             "the mask leaves it out at byte 60"},
        {64, 1, "search[0].theta_sent: 0x1 sent although the mask leaves "
                "it out at byte 64"},
        {68, 9, "search[0].reserved: 0x00000009, must be 0 at byte 68"},
    };
    bad_fresh(search2, f, fresh, sizeof fresh / sizeof fresh[0]);
    n = search2(f);
    f[79] = 0x3f;
    fix(f, n);
    BAD(f, n, "search[0].alpha: 0x3f00000000000000 sent although the mask "
              "leaves it out at byte 72");
    n = search2(f);
    f[n] = 0;
    fix(f, n + 1);
    BAD(f, n + 1, "payload: 1 trailing bytes after the last request at byte "
                  "152");
    n = search2(f);
    fix(f, 36);
    BAD(f, 36, "search: truncated: 8 bytes needed, 4 left at byte 32");
}

/* A RESULT frame: an error result, then one with two hits. */
static size_t result2(unsigned char *f)
{
    ft_result r[2];
    FT_PASS(ft_result_alloc(&r[0], 4, 4));
    FT_PASS(ft_result_alloc(&r[1], 4, 4));
    r[0].status = FT_EREQUEST;
    strcpy(r[0].error, "beam: x"); /* 7 bytes */
    r[1].status = FT_OK;
    r[1].n = 2;
    r[1].hits[0] = (ft_hit){.len = 1, .tok_off = 0, .value = 3};
    r[1].hits[1] = (ft_hit){.len = 2, .tok_off = 1, .value = 4};
    r[1].tokens[0] = 9;
    r[1].tokens[1] = 8;
    r[1].tokens[2] = 7;
    B.len = 0;
    FT_PASS(ft_frame_encode_result(&B, 22, r, 2));
    memcpy(f, B.data, B.len);
    ft_result_free(&r[0]);
    ft_result_free(&r[1]);
    /* 32 + 8 + (16 + 7) + (16 + 24 + 4 + 24 + 8) = 139; result[1] at 63,
     * its hits at 79 and 107 */
    return B.len;
}

static void test_result_errors(void)
{
    unsigned char f[4096];
    size_t n = result2(f);
    FT_CHECK_EQ_U64(n, 139);
    FT_PASS(ft_frame_decode(&M, f, n, 4, err, sizeof err));
    FT_CHECK_EQ_U64(M.res[1].hits[1].value, 4);
    FT_CHECK_EQ_U64(M.res[1].tokens[M.res[1].hits[1].tok_off + 1], 7);
    BAD32(f, n, 32, 0,
          "result.count: 0 results, the batch limit is 1..4 at byte 32");
    BAD32(f, n, 32, 9,
          "result.count: 9 results, the batch limit is 1..4 at byte 32");
    BAD32(f, n, 32, 3,
          "result[2]: truncated: 16 bytes needed, 0 left at byte 139");
    const field32 fresh[] = {
        {36, 2, "result.reserved: 0x00000002, must be 0 at byte 36"},
        {40, 0x80000000u, "result[0].status: 2147483648 is not an error "
                          "code at byte 40"},
        {44, 160, "result[0].message: 160 bytes exceed 159 at byte 44"},
        {48, 1, "result[0].hits: 1 with status 11 at byte 48"},
        {44, 100, "result[0]: truncated: 100 bytes needed, 83 left at "
                  "byte 56"},
        {75, 600, "result[1].tokens: 600 for 2 hits of at most 255 tokens "
                  "at byte 75"},
        {75, 4, "result[1]: truncated: 64 bytes needed, 60 left at byte 79"},
        {107, 1, "result[1].tokens: 3 declared, the hits hold 2 at byte 75"},
    };
    bad_fresh(result2, f, fresh, sizeof fresh / sizeof fresh[0]);
    n = result2(f);
    wr32(f + 44, 200);
    BAD32(f, n, 40, 0, "result[0].message: 200 bytes exceed 159 at byte 44");
    BAD32(f, n, 44, 7, "result[0].message: 7 bytes with status 0 at byte 44");
    n = result2(f);
    f[58] = 0;
    fix(f, n);
    BAD(f, n, "result[0].message: NUL byte at byte 58");
    n = result2(f);
    BAD32(f, n, 71, 4097, "result[1].hits: 4097 exceed 4096 at byte 71");
    wr32(f + 71, 0xffffffffu);
    BAD32(f, n, 75, 0xffffffffu,
          "result[1].hits: 4294967295 exceed 4096 at byte 71");
    n = result2(f);
    wr32(f + 75, 2);
    f[n] = 0;
    fix(f, n);
    BAD(f, n, "result[1].hit[1].len: 2 tokens overrun the 2 declared at byte "
              "107");
    n = result2(f);
    BAD32(f, n, 79, 0, "result[1].hit[0].len: 0 is not 1..255 at byte 79");
    BAD32(f, n, 79, 256, "result[1].hit[0].len: 256 is not 1..255 at byte 79");
    /* fewer tokens in the hits than declared: the rest is not hits */
    n = result2(f);
    wr32(f + 107, 1);
    BAD32(f, n, 75, 2,
          "payload: 4 trailing bytes after the last result at byte 135");
    n = result2(f);
    f[n] = 1;
    fix(f, n + 1);
    BAD(f, n + 1, "payload: 1 trailing bytes after the last result at byte "
                  "139");
}

static void test_other_errors(void)
{
    unsigned char f[8192];
    B.len = 0;
    FT_PASS(ft_frame_encode_error(&B, 1, FT_EPROTO, "abc"));
    size_t n = B.len;
    memcpy(f, B.data, n);
    BAD32(f, n, 32, 0, "error.code: 0 is not an error code at byte 32");
    BAD32(f, n, 32, 0x80000000u,
          "error.code: 2147483648 is not an error code at byte 32");
    wr32(f + 32, FT_EPROTO);
    BAD32(f, n, 36, 1025, "error.message: 1025 bytes exceed 1024 at byte 36");
    BAD32(f, n, 36, 4,
          "error.message: truncated: 4 bytes declared, 3 left at byte 40");
    BAD32(f, n, 36, 2,
          "payload: 1 trailing bytes after the message at byte 42");
    wr32(f + 36, 3);
    f[41] = 0;
    fix(f, n);
    BAD(f, n, "error.message: NUL byte at byte 41");
    fix(f, 36);
    BAD(f, 36, "error: truncated: 8 bytes needed, 4 left at byte 32");
    B.len = 0;
    FT_PASS(ft_frame_encode_reload_reply(&B, 1, FT_OK, NULL));
    memcpy(f, B.data, B.len);
    BAD32(f, B.len, 32, 0xfffffffeu,
          "reload_reply.status: 4294967294 is not an error code at byte 32");
    /* types without a payload */
    static const struct {
        int (*enc)(ft_buf *, uint64_t);
        const char *want;
    } empty[] = {
        {ft_frame_encode_ping, "payload: 2 bytes, a PING carries none at byte 32"},
        {ft_frame_encode_pong, "payload: 2 bytes, a PONG carries none at byte 32"},
        {ft_frame_encode_info, "payload: 2 bytes, a INFO carries none at byte 32"},
    };
    for (size_t i = 0; i < sizeof empty / sizeof empty[0]; i++) {
        B.len = 0;
        FT_PASS(empty[i].enc(&B, 1));
        memcpy(f, B.data, 32);
        f[32] = f[33] = 'x';
        fix(f, 34);
        BAD(f, 34, empty[i].want);
    }
    B.len = 0;
    FT_PASS(ft_frame_encode_reload(&B, 1, "a/b"));
    memcpy(f, B.data, B.len);
    f[33] = 0;
    fix(f, B.len);
    BAD(f, B.len, "reload.path: NUL byte at byte 33");
    memset(f + 32, 'p', FT_FRAME_MAX_PATH + 1);
    fix(f, 32 + FT_FRAME_MAX_PATH + 1);
    BAD(f, 32 + FT_FRAME_MAX_PATH + 1,
        "reload.path: 4096 bytes exceed 4095 at byte 32");
}

/* ---- every truncation, random flips ------------------------------------ */

typedef struct seed {
    const char *name;
    unsigned char *p;
    size_t n;
} seed;

static seed seeds[32];
static int nseeds;

static void add_seed(const char *name)
{
    FT_CHECK(nseeds < 32);
    seeds[nseeds].name = name;
    seeds[nseeds].p = malloc(B.len);
    FT_CHECK(seeds[nseeds].p != NULL);
    memcpy(seeds[nseeds].p, B.data, B.len);
    seeds[nseeds].n = B.len;
    nseeds++;
}

/* make_seeds builds one small valid frame of every type (and variants):
 * the inputs of the truncation and flip tests and the fuzz corpus. */
static void make_seeds(void)
{
    uint64_t s = 3;
    ft_request q[3];
    rand_req(&q[0], &s, 0, 3, 3);
    ft_request_init(&q[1]);
    q[1].T = 1;
    q[1].K = 1;
    q[1].tokens = g_tok + 64 * 4096;
    q[1].logp = g_logp + 64 * 4096;
    rand_req(&q[2], &s, 2, 2, 4);
    q[2].beam = 3;
    q[2].theta_sent = -7;
    B.len = 0;
    FT_PASS(ft_frame_encode_search(&B, 1, 100, q, NULL, 1));
    add_seed("search1.bin");
    B.len = 0;
    FT_PASS(ft_frame_encode_search(&B, 2, 0, q, NULL, 3));
    add_seed("search3.bin");
    uint32_t all = FT_FRAME_HAS_ALL;
    B.len = 0;
    FT_PASS(ft_frame_encode_search(&B, 3, 0, &q[1], &all, 1));
    add_seed("search_mask.bin");
    ft_result r[3];
    for (int i = 0; i < 3; i++) {
        FT_PASS(ft_result_alloc(&r[i], 8, 8));
        rand_res(&r[i], &s);
    }
    r[0].status = FT_OK;
    r[1].status = FT_EREQUEST;
    strcpy(r[1].error, "alpha: must be 0..10, got 11");
    r[2].status = FT_OK;
    r[2].n = 0;
    B.len = 0;
    FT_PASS(ft_frame_encode_result(&B, 4, r, 3));
    add_seed("result3.bin");
    B.len = 0;
    FT_PASS(ft_frame_encode_result(&B, 5, r, 1));
    add_seed("result1.bin");
    for (int i = 0; i < 3; i++)
        ft_result_free(&r[i]);
    B.len = 0;
    FT_PASS(ft_frame_encode_error(&B, 6, FT_EPROTO,
                                  "magic: expected \"FTRP\" at byte 0"));
    add_seed("error.bin");
    B.len = 0;
    FT_PASS(ft_frame_encode_info(&B, 7));
    add_seed("info.bin");
    B.len = 0;
    FT_PASS(ft_frame_encode_info_reply(&B, 7, "keys:7\nshards:1\n", 16));
    add_seed("info_reply.bin");
    B.len = 0;
    FT_PASS(ft_frame_encode_ping(&B, 8));
    add_seed("ping.bin");
    B.len = 0;
    FT_PASS(ft_frame_encode_pong(&B, 8));
    add_seed("pong.bin");
    B.len = 0;
    FT_PASS(ft_frame_encode_reload(&B, 9, "/tmp/x.fti"));
    add_seed("reload.bin");
    B.len = 0;
    FT_PASS(ft_frame_encode_reload_reply(&B, 9, FT_EFORMAT, "x.fti: bad"));
    add_seed("reload_reply.bin");
    /* without the optional checksum, so that mutations reach the payload */
    B.len = 0;
    FT_PASS(ft_frame_encode_search(&B, 10, 0, &q[2], NULL, 1));
    wr32(B.data + 8, 0);
    wr32(B.data + 28, 0);
    add_seed("search_nosum.bin");
    B.len = 0;
    FT_PASS(ft_frame_encode_result(&B, 11, &(ft_result){0}, 1));
    wr32(B.data + 8, 0);
    wr32(B.data + 28, 0);
    add_seed("result_nosum.bin");
}

static void test_truncations(void)
{
    unsigned char *f = malloc(1 << 16);
    FT_CHECK(f != NULL);
    for (int i = 0; i < nseeds; i++) {
        const seed *sd = &seeds[i];
        FT_PASS(ft_frame_decode(&M, sd->p, sd->n, 8, err, sizeof err));
        uint16_t type = (uint16_t)(sd->p[6] | sd->p[7] << 8);
        for (size_t n = 0; n < sd->n; n++) {
            /* as cut: the header or its length field disagrees */
            memcpy(f, sd->p, n);
            int rc = ft_frame_decode(&M, f, n, 8, err, sizeof err);
            if (rc != FT_EPROTO) {
                fprintf(stderr, "%s cut at %zu: %d\n", sd->name, n, rc);
                exit(1);
            }
            /* cut with the length (and checksum) made to agree: a text
             * payload is still a text, anything structured must fail */
            if (n < 32)
                continue;
            fix(f, n);
            rc = ft_frame_decode(&M, f, n, 8, err, sizeof err);
            int text = type == FT_FRAME_INFO_REPLY || type == FT_FRAME_RELOAD;
            if (text ? rc != FT_OK : rc != FT_EPROTO) {
                fprintf(stderr, "%s cut at %zu, length fixed: %d %s\n",
                        sd->name, n, rc, err);
                exit(1);
            }
        }
    }
    free(f);
}

static void test_flips(void)
{
    uint64_t s = 12345;
    unsigned char *f = malloc(1 << 16);
    FT_CHECK(f != NULL);
    long decoded = 0;
    for (int it = 0; it < 200000; it++) {
        const seed *sd = &seeds[ft_test_rand(&s) % (uint64_t)nseeds];
        memcpy(f, sd->p, sd->n);
        int flips = 1 + (int)(ft_test_rand(&s) % 3);
        for (int k = 0; k < flips; k++) {
            size_t at = ft_test_rand(&s) % sd->n;
            if (ft_test_rand(&s) % 2)
                f[at] ^= (unsigned char)(1u << (ft_test_rand(&s) % 8));
            else
                f[at] = (unsigned char)ft_test_rand(&s);
        }
        /* half the time the checksum is made right again, so that flips
         * reach the payload decoders instead of stopping at the header */
        if (it % 2 && (rd32(f + 24) == sd->n - 32))
            fix(f, sd->n);
        int rc = ft_frame_decode(&M, f, sd->n, 8, err, sizeof err);
        FT_CHECK(rc == FT_OK || rc == FT_EPROTO);
        if (rc == FT_EPROTO) {
            FT_CHECK(strstr(err, " at byte ") != NULL);
            continue;
        }
        decoded++;
        B2.len = 0;
        FT_PASS(ft_frame_encode(&B2, &M));
        FT_CHECK(B2.len == sd->n && memcmp(B2.data, f, sd->n) == 0);
    }
    FT_CHECK(decoded > 1000); /* the flips did reach the payloads */
    free(f);
}

static int write_corpus(const char *dir)
{
    for (int i = 0; i < nseeds; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, seeds[i].name);
        FILE *fp = fopen(path, "wb");
        if (fp == NULL || fwrite(seeds[i].p, 1, seeds[i].n, fp) != seeds[i].n) {
            fprintf(stderr, "cannot write %s\n", path);
            return 1;
        }
        fclose(fp);
    }
    printf("wrote %d seeds to %s\n", nseeds, dir);
    return 0;
}

/* check_golden compares the seeds with the committed corpus: the wire
 * format of version 1 must not change by accident. */
static void check_golden(const char *dir)
{
    for (int i = 0; i < nseeds; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, seeds[i].name);
        FILE *fp = fopen(path, "rb");
        if (fp == NULL) {
            fprintf(stderr, "golden %s: cannot open\n", path);
            exit(1);
        }
        unsigned char g[1024];
        size_t n = fread(g, 1, sizeof g, fp);
        fclose(fp);
        if (n != seeds[i].n || memcmp(g, seeds[i].p, n) != 0) {
            fprintf(stderr, "golden %s: the encoder's bytes differ (%zu "
                    "bytes, file %zu)\n", path, seeds[i].n, n);
            exit(1);
        }
    }
}

int main(int argc, char **argv)
{
    ft_buf_init(&B);
    ft_buf_init(&B2);
    ft_frame_msg_init(&M);
    make_seeds();
    if (argc == 3 && strcmp(argv[1], "--corpus") == 0)
        return write_corpus(argv[2]);
    if (argc == 2)
        check_golden(argv[1]);
    test_search();
    test_inplace();
    test_result();
    test_small_types();
    test_header_errors();
    test_checksum_optional();
    test_search_errors();
    test_result_errors();
    test_other_errors();
    test_truncations();
    test_flips();
    ft_frame_msg_free(&M);
    ft_buf_free(&B);
    ft_buf_free(&B2);
    for (int i = 0; i < nseeds; i++)
        free(seeds[i].p);
    printf("frame_test: ok\n");
    return 0;
}
