/*
 * jsonl_test.c - the JSON Lines codec against SPEC section 7: what the
 * parser accepts and rejects (with the exact message), and result lines
 * that parse back to the identical binary values.
 */
#include <jansson.h>
#include <math.h>

#include "ft_test.h"
#include "jsonl.h"

static ft_jsonl_req q;

static void ok(const char *line)
{
    char err[192] = "";
    int rc = ft_jsonl_parse(&q, line, strlen(line), err, sizeof err);
    if (rc != FT_OK)
        fprintf(stderr, "rejected '%s': %s\n", line, err);
    FT_PASS(rc);
}

static void bad(const char *line, const char *want)
{
    char err[192] = "";
    FT_FAIL(ft_jsonl_parse(&q, line, strlen(line), err, sizeof err),
            FT_EREQUEST);
    FT_CHECK_STR(err, want);
}

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static uint64_t d2u(double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

int main(void)
{
    ft_jsonl_req_init(&q);
    /* defaults and a full request */
    ok("{\"tokens\": [[1, 2]], \"logp\": [[-1, -2]]}");
    FT_CHECK_EQ_U64(q.req.T, 1);
    FT_CHECK_EQ_U64(q.req.K, 2);
    FT_CHECK_EQ_U64(q.req.beam, 100);
    FT_CHECK_EQ_U64(q.req.results, 0);
    FT_CHECK(isinf(q.req.theta_tok) && q.req.theta_tok < 0);
    FT_CHECK(isinf(q.req.theta_sent) && q.req.theta_sent < 0);
    FT_CHECK(q.req.alpha == 1.0);
    FT_CHECK(!q.has_id);
    ok("{\"id\": \"x\", \"tokens\": [[4294967295, 0], [3, 4]], \"logp\": "
       "[[0.1, -0], [1e-50, -3.4028235e38]], \"beam\": 4096, \"results\": 1, "
       "\"theta_tok\": -20, \"theta_sent\": -2e2, \"alpha\": 0.1}");
    FT_CHECK_EQ_U64(q.req.T, 2);
    FT_CHECK_EQ_U64(q.tokens[0], 4294967295u);
    FT_CHECK_EQ_U64(f2u(q.logp[0]), f2u((float)0.1)); /* via binary64 */
    FT_CHECK_EQ_U64(f2u(q.logp[1]), 0x80000000u);     /* -0 */
    FT_CHECK_EQ_U64(f2u(q.logp[2]), 0);               /* underflow to 0 */
    FT_CHECK(q.req.theta_sent == -200.0f && q.req.alpha == 0.1);
    FT_CHECK(q.has_id && q.id_is_str && !strcmp(q.id_str, "x"));
    ok("{\"tokens\": [[1, 2]], \"logp\": [[-0, 0]], \"theta_sent\": -0}");
    FT_CHECK_EQ_U64(f2u(q.logp[0]), 0x80000000u);
    FT_CHECK_EQ_U64(f2u(q.logp[1]), 0);
    FT_CHECK_EQ_U64(f2u(q.req.theta_sent), 0x80000000u);
    ok("{\"id\": -12, \"tokens\": [[1]], \"logp\": [[0]]}");
    FT_CHECK(q.has_id && !q.id_is_str && q.id_int == -12);
    /* double rounding: the binary64 value first, then binary32 */
    ok("{\"tokens\": [[1]], \"logp\": [[1.00000005960464477539062500001]]}");
    FT_CHECK_EQ_U64(f2u(q.logp[0]), f2u((float)1.0000000596046448));
    /* thetas may round to infinity (only NaN is invalid for them) */
    ok("{\"tokens\": [[1]], \"logp\": [[0]], \"theta_tok\": -1e39}");
    FT_CHECK(isinf(q.req.theta_tok));
    /* shapes that the validator, not the parser, rejects */
    ok("{\"tokens\": [], \"logp\": []}");
    FT_CHECK_EQ_U64(q.req.T, 0);
    ok("{\"tokens\": [[], []], \"logp\": [[], []]}");
    FT_CHECK_EQ_U64(q.req.K, 0);

    bad("{\"tokens\": [[1.0]], \"logp\": [[0]]}",
        "tokens: position 0, proposal 0: not an integer");
    bad("{\"tokens\": [[1e2]], \"logp\": [[0]]}",
        "tokens: position 0, proposal 0: not an integer");
    bad("{\"tokens\": [[2, -1]], \"logp\": [[0, 0]]}",
        "tokens: position 0, proposal 1: -1 is not in 0..4294967295");
    bad("{\"tokens\": [[4294967296]], \"logp\": [[0]]}",
        "tokens: position 0, proposal 0: 4294967296 is not in 0..4294967295");
    bad("{\"tokens\": [[\"1\"]], \"logp\": [[0]]}",
        "tokens: position 0, proposal 0: not an integer");
    bad("{\"tokens\": [[1]], \"logp\": [[1e39]]}",
        "logp: position 0, proposal 0: not finite");
    bad("{\"tokens\": [[1], [2]], \"logp\": [[0], [-3.5e38]]}",
        "logp: position 1, proposal 0: not finite");
    bad("{\"tokens\": [[1]], \"logp\": [[null]]}",
        "logp: position 0, proposal 0: not a number");
    bad("{\"logp\": [[0]]}", "tokens: missing");
    bad("{\"tokens\": [[1]]}", "logp: missing");
    bad("{\"tokens\": [1], \"logp\": [[0]]}",
        "tokens: position 0: must be an array");
    bad("{\"tokens\": 1, \"logp\": [[0]]}",
        "tokens: must be an array of arrays");
    bad("{\"tokens\": [[1, 2], [3]], \"logp\": [[0, 0], [0]]}",
        "tokens: position 1 has 1 proposals, position 0 has 2");
    bad("{\"tokens\": [[1, 2]], \"logp\": [[0, 0], [0, 0]]}",
        "logp: shape 2x2 does not match tokens 1x2");
    bad("{\"tokens\": [[1, 2]], \"logp\": [[0]]}",
        "logp: shape 1x1 does not match tokens 1x2");
    bad("{\"tokens\": [[1]], \"logp\": [[0]], \"beam\": 2, \"beam\": 3}",
        "json: duplicate object key near '\"beam\"' at column 50");
    bad("{\"tokens\": [[1]], \"logp\": [[0]], \"bema\": 2}",
        "bema: unknown field");
    bad("{\"tokens\": [[1]], \"logp\": [[0]], \"beam\": 2.0}",
        "beam: must be an integer");
    bad("{\"tokens\": [[1]], \"logp\": [[0]], \"beam\": 0}",
        "beam: must be 1..4096, got 0");
    bad("{\"tokens\": [[1]], \"logp\": [[0]], \"beam\": 4097}",
        "beam: must be 1..4096, got 4097");
    bad("{\"tokens\": [[1]], \"logp\": [[0]], \"results\": 0}",
        "results: must be 1..4096, got 0");
    bad("{\"tokens\": [[1]], \"logp\": [[0]], \"results\": 1e1}",
        "results: must be an integer");
    bad("{\"tokens\": [[1]], \"logp\": [[0]], \"theta_tok\": \"-1\"}",
        "theta_tok: must be a number");
    bad("{\"tokens\": [[1]], \"logp\": [[0]], \"alpha\": true}",
        "alpha: must be a number");
    bad("{\"id\": 1.5, \"tokens\": [[1]], \"logp\": [[0]]}",
        "id: must be a string or an integer");
    bad("{\"id\": null, \"tokens\": [[1]], \"logp\": [[0]]}",
        "id: must be a string or an integer");
    bad("[1]", "json: a request must be an object");
    bad("", "json: empty line");
    bad("  ", "json: empty line");
    bad("{\"tokens\": [[1]], \"logp\": [[NaN]]}",
        "json: invalid token near 'NaN' at column 31");
    bad("{\"tokens\": [[1]], \"logp\": [[0]]} x",
        "json: end of file expected near 'x' at column 34");
    /* the id survives a later fault, to be echoed */
    bad("{\"id\": 9, \"tokens\": [[1.5]], \"logp\": [[0]]}",
        "tokens: position 0, proposal 0: not an integer");
    FT_CHECK(q.has_id && q.id_int == 9);

    /* result lines parse back bit for bit */
    ft_result res;
    FT_PASS(ft_result_alloc(&res, 64, 4));
    uint64_t s = 42;
    for (int round = 0; round < 2000; round++) {
        res.n = (uint32_t)(ft_test_rand(&s) % 5);
        res.status = FT_OK;
        uint32_t off = 0;
        for (uint32_t i = 0; i < res.n; i++) {
            ft_hit *h = &res.hits[i];
            h->len = 1 + (uint32_t)(ft_test_rand(&s) % 4);
            h->tok_off = off;
            for (uint32_t j = 0; j < h->len; j++)
                res.tokens[off + j] = (uint32_t)ft_test_rand(&s);
            off += h->len;
            h->value = ft_test_rand(&s);
            uint64_t db = ft_test_rand(&s);
            uint32_t fb = (uint32_t)ft_test_rand(&s);
            memcpy(&h->score, &db, 8);
            memcpy(&h->sigma, &fb, 4);
            if (!isfinite(h->score) || !isfinite(h->sigma) || round % 7 == 0) {
                h->score = -(double)(ft_test_rand(&s) % 1000) / 7.0;
                h->sigma = -(float)(ft_test_rand(&s) % 1000) / 7.0f;
            }
            if (round % 11 == 0) {
                h->score = -0.0;
                h->sigma = -0.0f;
            }
        }
        ft_jsonl_req id;
        ft_jsonl_req_init(&id);
        const char *idtxt = "{\"id\": \"q\\\"\\\\\\n\\u0001\\u00e9\", "
                            "\"tokens\": [[1]], \"logp\": [[0]]}";
        FT_PASS(ft_jsonl_parse(&id, idtxt, strlen(idtxt), NULL, 0));
        char *buf = NULL;
        size_t blen = 0;
        FILE *f = open_memstream(&buf, &blen);
        FT_PASS(ft_jsonl_write_result(f, round % 2 ? &id : NULL, &res));
        fclose(f);
        FT_CHECK(blen > 0 && buf[blen - 1] == '\n');
        json_error_t je;
        /* as binary64 throughout, as strtod reads (u64 values exceed
         * jansson's int64, and "-0" must stay negative) */
        json_t *o = json_loads(buf, JSON_REJECT_DUPLICATES |
                                        JSON_DECODE_INT_AS_REAL, &je);
        if (o == NULL)
            fprintf(stderr, "%s: %s\n", buf, je.text);
        FT_CHECK(o != NULL);
        if (round % 2) {
            FT_CHECK_STR(json_string_value(json_object_get(o, "id")),
                         id.id_str);
        } else {
            FT_CHECK(json_object_get(o, "id") == NULL);
        }
        json_t *rs = json_object_get(o, "results");
        FT_CHECK_EQ_U64(json_array_size(rs), res.n);
        for (uint32_t i = 0; i < res.n; i++) {
            json_t *h = json_array_get(rs, i);
            const ft_hit *w = &res.hits[i];
            FT_CHECK_EQ_U64(json_object_size(h), 4);
            json_t *tk = json_object_get(h, "tokens");
            FT_CHECK_EQ_U64(json_array_size(tk), w->len);
            for (uint32_t j = 0; j < w->len; j++)
                FT_CHECK_EQ_U64(json_number_value(json_array_get(tk, j)),
                                res.tokens[w->tok_off + j]);
            /* values are u64: compare the digits, jansson's ints are signed */
            char vtxt[32];
            snprintf(vtxt, sizeof vtxt, "\"value\": %llu,",
                     (unsigned long long)w->value);
            FT_CHECK(strstr(buf, vtxt) != NULL);
            FT_CHECK_EQ_U64(d2u(json_number_value(json_object_get(h, "score"))),
                            d2u(w->score));
            json_t *sg = json_object_get(h, "sigma");
            FT_CHECK_EQ_U64(f2u((float)json_number_value(sg)), f2u(w->sigma));
        }
        json_decref(o);
        free(buf);
        ft_jsonl_req_free(&id);
    }
    /* an error line with an id, and the line format itself */
    char *buf = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&buf, &blen);
    ok("{\"id\": 3, \"tokens\": [[1]], \"logp\": [[0]]}");
    FT_PASS(ft_jsonl_write_error(f, &q, "beam: must be 1..4096, got 0"));
    res.n = 1;
    res.hits[0] = (ft_hit){2, 0, 18446744073709551615ull, -1.5, -2.5f};
    res.tokens[0] = 7;
    res.tokens[1] = 4294967295u;
    FT_PASS(ft_jsonl_write_result(f, &q, &res));
    res.n = 0;
    FT_PASS(ft_jsonl_write_result(f, NULL, &res));
    fclose(f);
    FT_CHECK_STR(buf,
                 "{\"id\": 3, \"error\": \"beam: must be 1..4096, got 0\"}\n"
                 "{\"id\": 3, \"results\": [{\"tokens\": [7, 4294967295], "
                 "\"value\": 18446744073709551615, \"score\": -1.5, "
                 "\"sigma\": -2.5}]}\n"
                 "{\"results\": []}\n");
    free(buf);
    ft_result_free(&res);
    ft_jsonl_req_free(&q);
    printf("jsonl_test: ok\n");
    return 0;
}
