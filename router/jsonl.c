/*
 * jsonl.c - SPEC section 7's request parser and result writer (jsonl.h).
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ft_impl.h"
#include "jsonl.h"

void ft_jsonl_req_init(ft_jsonl_req *q)
{
    memset(q, 0, sizeof *q);
    ft_request_init(&q->req);
}

void ft_jsonl_req_free(ft_jsonl_req *q)
{
    free(q->tokens);
    free(q->logp);
    free(q->id_str);
    memset(q, 0, sizeof *q);
}

#define FAIL(...)                                                             \
    do {                                                                      \
        fti_errf(errbuf, errlen, __VA_ARGS__);                                \
        rc = FT_EREQUEST;                                                     \
        goto out;                                                             \
    } while (0)

/* read_id takes the optional id first, so that later faults can echo it. */
static int read_id(ft_jsonl_req *q, json_t *id, char *errbuf, size_t errlen)
{
    if (json_is_integer(id)) {
        q->has_id = 1;
        q->id_is_str = 0;
        q->id_int = (long long)json_integer_value(id);
        return FT_OK;
    }
    if (json_is_string(id)) {
        size_t n = json_string_length(id);
        if (n + 1 > q->id_cap) {
            char *p = realloc(q->id_str, n + 1);
            if (p == NULL)
                return FT_ENOMEM;
            q->id_str = p;
            q->id_cap = n + 1;
        }
        memcpy(q->id_str, json_string_value(id), n + 1);
        q->id_len = n;
        q->has_id = 1;
        q->id_is_str = 1;
        return FT_OK;
    }
    fti_errf(errbuf, errlen, "id: must be a string or an integer");
    return FT_EREQUEST;
}

/* grid_shape checks that v is an array of equally long arrays. */
static int grid_shape(json_t *v, const char *name, size_t *T, size_t *K,
                      char *errbuf, size_t errlen)
{
    if (!json_is_array(v)) {
        fti_errf(errbuf, errlen, "%s: must be an array of arrays", name);
        return FT_EREQUEST;
    }
    *T = json_array_size(v);
    *K = 0;
    for (size_t t = 0; t < *T; t++) {
        json_t *row = json_array_get(v, t);
        if (!json_is_array(row)) {
            fti_errf(errbuf, errlen, "%s: position %zu: must be an array", name,
                 t);
            return FT_EREQUEST;
        }
        size_t k = json_array_size(row);
        if (t == 0)
            *K = k;
        else if (k != *K) {
            fti_errf(errbuf, errlen,
                 "%s: position %zu has %zu proposals, position 0 has %zu",
                 name, t, k, *K);
            return FT_EREQUEST;
        }
    }
    return FT_OK;
}

/* read_count reads beam or results: a JSON integer in 1..FT_MAX_BEAM. */
static int read_count(json_t *v, const char *name, uint32_t max, uint32_t *out,
                      char *errbuf, size_t errlen)
{
    if (!json_is_integer(v)) {
        fti_errf(errbuf, errlen, "%s: must be an integer", name);
        return FT_EREQUEST;
    }
    json_int_t x = json_integer_value(v);
    if (x < 1 || x > (json_int_t)max) {
        fti_errf(errbuf, errlen, "%s: must be 1..%u, got %lld", name, max,
             (long long)x);
        return FT_EREQUEST;
    }
    *out = (uint32_t)x;
    return FT_OK;
}

static int read_theta(json_t *v, const char *name, float *out, char *errbuf,
                      size_t errlen)
{
    if (!json_is_number(v)) {
        fti_errf(errbuf, errlen, "%s: must be a number", name);
        return FT_EREQUEST;
    }
    *out = (float)json_number_value(v); /* binary64, then binary32 */
    return FT_OK;
}

/* has_minus_zero_int tells whether the text holds the integer literal -0
 * (outside strings or not: a false positive only costs a second parse). */
static int has_minus_zero_int(const char *s, size_t len)
{
    for (size_t i = 0; i + 1 < len; i++)
        if (s[i] == '-' && s[i + 1] == '0' &&
            (i + 2 == len || !strchr("0123456789.eE", s[i + 2])))
            return 1;
    return 0;
}

int ft_jsonl_parse(ft_jsonl_req *q, const char *line, size_t len,
                   char *errbuf, size_t errlen)
{
    int rc = FT_OK;
    json_t *real = NULL;
    json_error_t jerr;
    q->has_id = 0;
    ft_request_init(&q->req);
    json_t *root = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        if (len == 0 || strspn(line, " \t\r\n") == len)
            fti_errf(errbuf, errlen, "json: empty line");
        else
            fti_errf(errbuf, errlen, "json: %s at column %d", jerr.text,
                 jerr.column);
        return FT_EREQUEST;
    }
    if (!json_is_object(root))
        FAIL("json: a request must be an object");
    /* jansson reads the integer literal -0 as the integer 0, losing the
     * sign strtod keeps; when the line has one, the numbers (not the
     * integer checks) come from a second tree read all as binary64. */
    if (has_minus_zero_int(line, len))
        real = json_loadb(line, len, JSON_DECODE_INT_AS_REAL, NULL);
    json_t *nums = real ? real : root;
    json_t *id = json_object_get(root, "id");
    if (id != NULL && (rc = read_id(q, id, errbuf, errlen)) != FT_OK)
        goto out;
    /* Unknown fields first: a misspelt "beam" must not pass as default. */
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        static const char *const known[] = {"id", "tokens", "logp", "beam",
                                            "results", "theta_tok",
                                            "theta_sent", "alpha"};
        int ok = 0;
        for (size_t i = 0; i < sizeof known / sizeof known[0] && !ok; i++)
            ok = strcmp(key, known[i]) == 0;
        if (!ok)
            FAIL("%s: unknown field", key);
    }
    json_t *jt = json_object_get(root, "tokens");
    json_t *jl = json_object_get(root, "logp");
    if (jt == NULL)
        FAIL("tokens: missing");
    if (jl == NULL)
        FAIL("logp: missing");
    size_t T, K, T2, K2;
    if ((rc = grid_shape(jt, "tokens", &T, &K, errbuf, errlen)) ||
        (rc = grid_shape(jl, "logp", &T2, &K2, errbuf, errlen)))
        goto out;
    if (T != T2 || K != K2)
        FAIL("logp: shape %zux%zu does not match tokens %zux%zu", T2, K2, T,
             K);
    /* Bounds are the validator's, but do not allocate past them. */
    if (T > FT_MAX_T)
        FAIL("tokens: the grid must have 1..%u positions, got %zu", FT_MAX_T,
             T);
    if (K > FT_MAX_K)
        FAIL("tokens: each position must have 1..%u proposals, got %zu",
             FT_MAX_K, K);
    if (T * K > q->cap) {
        size_t n = T * K;
        uint32_t *a = realloc(q->tokens, n * sizeof *a);
        if (a == NULL) {
            rc = FT_ENOMEM;
            goto out;
        }
        q->tokens = a;
        float *b = realloc(q->logp, n * sizeof *b);
        if (b == NULL) {
            rc = FT_ENOMEM;
            goto out;
        }
        q->logp = b;
        q->cap = n;
    }
    for (size_t t = 0; t < T; t++) {
        json_t *rt = json_array_get(jt, t), *rl = json_array_get(jl, t);
        json_t *rn = json_array_get(json_object_get(nums, "logp"), t);
        for (size_t k = 0; k < K; k++) {
            json_t *x = json_array_get(rt, k);
            if (!json_is_integer(x))
                FAIL("tokens: position %zu, proposal %zu: not an integer", t,
                     k);
            json_int_t v = json_integer_value(x);
            if (v < 0 || v > 4294967295ll)
                FAIL("tokens: position %zu, proposal %zu: %lld is not in "
                     "0..4294967295", t, k, (long long)v);
            q->tokens[t * K + k] = (uint32_t)v;
            json_t *y = json_array_get(rl, k);
            if (!json_is_number(y))
                FAIL("logp: position %zu, proposal %zu: not a number", t, k);
            float f = (float)json_number_value(real ? json_array_get(rn, k) : y);
            if (!isfinite(f))
                FAIL("logp: position %zu, proposal %zu: not finite", t, k);
            q->logp[t * K + k] = f;
        }
    }
    q->req.T = (uint32_t)T;
    q->req.K = (uint32_t)K;
    q->req.tokens = q->tokens;
    q->req.logp = q->logp;
    if ((val = json_object_get(root, "beam")) != NULL &&
        (rc = read_count(val, "beam", FT_MAX_BEAM, &q->req.beam, errbuf,
                         errlen)))
        goto out;
    if ((val = json_object_get(root, "results")) != NULL &&
        (rc = read_count(val, "results", FT_MAX_RESULTS, &q->req.results,
                         errbuf, errlen)))
        goto out;
    if ((val = json_object_get(root, "theta_tok")) != NULL &&
        (rc = read_theta(json_object_get(nums, "theta_tok"), "theta_tok",
                         &q->req.theta_tok, errbuf, errlen)))
        goto out;
    if ((val = json_object_get(root, "theta_sent")) != NULL &&
        (rc = read_theta(json_object_get(nums, "theta_sent"), "theta_sent",
                         &q->req.theta_sent, errbuf, errlen)))
        goto out;
    if ((val = json_object_get(root, "alpha")) != NULL) {
        if (!json_is_number(val))
            FAIL("alpha: must be a number");
        q->req.alpha = json_number_value(json_object_get(nums, "alpha"));
    }
out:
    json_decref(real);
    json_decref(root);
    if (rc == FT_ENOMEM)
        fti_errf(errbuf, errlen, "request: out of memory");
    return rc;
}

/* ---- writing ---- */

/* put_str writes s as a JSON string: quotes, backslashes and control
 * characters escaped, other bytes (valid UTF-8 from the parser) as is. */
static void put_str(FILE *f, const char *s, size_t n)
{
    putc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        case '\b': fputs("\\b", f); break;
        case '\f': fputs("\\f", f); break;
        default:
            if (c < 0x20 || c == 0x7f)
                fprintf(f, "\\u%04x", c);
            else
                putc(c, f);
        }
    }
    putc('"', f);
}

static void put_id(FILE *f, const ft_jsonl_req *q)
{
    if (q == NULL || !q->has_id)
        return;
    fputs("\"id\": ", f);
    if (q->id_is_str)
        put_str(f, q->id_str, q->id_len);
    else
        fprintf(f, "%lld", q->id_int);
    fputs(", ", f);
}

/* put_double prints x so that strtod gives back the same bits. */
static void put_double(FILE *f, double x, int digits)
{
    if (isinf(x))
        fputs(x > 0 ? "1e999" : "-1e999", f);
    else
        fprintf(f, "%.*g", digits, x);
}

int ft_jsonl_write_error(FILE *f, const ft_jsonl_req *q, const char *error)
{
    putc('{', f);
    put_id(f, q);
    fputs("\"error\": ", f);
    put_str(f, error, strlen(error));
    fputs("}\n", f);
    return ferror(f) ? FT_EIO : FT_OK;
}

int ft_jsonl_write_result(FILE *f, const ft_jsonl_req *q, const ft_result *res)
{
    if (res->status != FT_OK)
        return ft_jsonl_write_error(
            f, q, res->error[0] ? res->error : ft_strerror(res->status));
    putc('{', f);
    put_id(f, q);
    fputs("\"results\": [", f);
    for (uint32_t i = 0; i < res->n; i++) {
        const ft_hit *h = &res->hits[i];
        fputs(i ? ", {\"tokens\": [" : "{\"tokens\": [", f);
        for (uint32_t j = 0; j < h->len; j++)
            fprintf(f, j ? ", %" PRIu32 : "%" PRIu32,
                    res->tokens[h->tok_off + j]);
        fprintf(f, "], \"value\": %" PRIu64 ", \"score\": ", h->value);
        put_double(f, h->score, 17);
        fputs(", \"sigma\": ", f);
        put_double(f, (double)h->sigma, 9);
        putc('}', f);
    }
    fputs("]}\n", f);
    return ferror(f) ? FT_EIO : FT_OK;
}
