/*
 * jsonl_test.c - the JSON Lines codec against docs/specification.md section 7:
 * what the parser accepts and rejects (with the exact message and the id
 * echoed), numbers read exactly as strtod reads them, bounded reading (every
 * prefix of a valid line, a line-size cap, early shape checks that allocate no
 * more than one grid), and result lines that parse back to the identical
 * binary values.  Every line is parsed from a heap copy of exactly its
 * length, with no NUL after it, so that a sanitizer build catches any read
 * past the length.
 */
#include <jansson.h>
#include <math.h>
#include <sys/resource.h>
#include <time.h>

#include "flashtrie/internal/bits.h"
#include "flashtrie/internal/buf.h"
#include "ft_test.h"
#include "jsonl.h"

static ft_jsonl_req q;

/* parse parses n bytes of line from a heap copy of exactly n bytes. */
static int parse(ft_jsonl_req *r, const char *line, size_t n, char *err,
                 size_t errlen)
{
    char *c = malloc(n ? n : 1);
    FT_CHECK(c != NULL);
    memcpy(c, line, n);
    int rc = ft_jsonl_parse(r, c, n, err, errlen);
    free(c);
    return rc;
}

static void ok(const char *line)
{
    char err[192] = "";
    int rc = parse(&q, line, strlen(line), err, sizeof err);
    if (rc != FT_OK)
        fprintf(stderr, "rejected '%s': %s\n", line, err);
    FT_PASS(rc);
}

static void bad(const char *line, const char *want)
{
    char err[192] = "";
    FT_FAIL(parse(&q, line, strlen(line), err, sizeof err), FT_EREQUEST);
    FT_CHECK_STR(err, want);
}

/* bad_id is bad, and the id (its text as echoed) was read. */
static void bad_id(const char *line, const char *want, const char *id)
{
    bad(line, want);
    if (!q.has_id)
        fprintf(stderr, "no id read from '%s'\n", line);
    FT_CHECK(q.has_id);
    FT_CHECK_STR(q.id_str, id);
}

/* no_id is bad, and no id was read. */
static void no_id(const char *line, const char *want)
{
    bad(line, want);
    FT_CHECK(!q.has_id);
}

/* error_line is the error line the codec answers for a rejected line. */
static void error_line(const char *line, const char *want)
{
    char err[192] = "";
    FT_FAIL(parse(&q, line, strlen(line), err, sizeof err), FT_EREQUEST);
    ft_buf b;
    ft_buf_init(&b);
    FT_PASS(ft_jsonl_encode_error(&b, &q, err));
    FT_CHECK_STR((const char *)b.data, want);
    ft_buf_free(&b);
}

/* G is a minimal valid grid, to build lines around one field. */
#define G "\"tokens\": [[1]], \"logp\": [[0]]"

/* docs/specification.md section 7: every JSON number for logp, theta_tok and
 * theta_sent is read as binary64 (integers of any length, and numbers beyond
 * binary64's range as +-inf) then rounded to binary32; alpha stays binary64. */
static void spec7_numbers(void)
{
    ok("{\"tokens\": [[1, 2]], \"logp\": [[-100000000000000000000, -1]]}");
    FT_CHECK_EQ_U64(fti_f2u(q.logp[0]), fti_f2u((float)-1e20));
    FT_CHECK_EQ_U64(fti_f2u(q.logp[1]), fti_f2u(-1.0f));
    ok("{\"tokens\": [[1]], \"logp\": [[-123456789012345678901234567890123456789]]}");
    FT_CHECK_EQ_U64(
        fti_f2u(q.logp[0]),
        fti_f2u((float)strtod("-123456789012345678901234567890123456789",
                              NULL)));
    bad_id("{\"id\": 4, \"tokens\": [[1, 2]], \"logp\": [[0, 1e400]]}",
           "logp: position 0, proposal 1: not finite", "4");
    bad_id("{\"tokens\": [[1], [2]], \"logp\": [[0], [-1e400]], \"id\": \"z\"}",
           "logp: position 1, proposal 0: not finite", "z");
    bad("{\"tokens\": [[1]], \"logp\": [[-1000000000000000000000000000000000000000]]}",
        "logp: position 0, proposal 0: not finite");
    error_line("{\"id\": 4, \"tokens\": [[1]], \"logp\": [[1e400]]}",
               "{\"id\": 4, \"error\": \"logp: position 0, proposal 0: not finite\"}\n");
    /* the thresholds: -inf and +inf are legal */
    static const char *const th[] = {"theta_tok", "theta_sent"};
    for (int i = 0; i < 2; i++) {
        char line[256];
        const float *v = i ? &q.req.theta_sent : &q.req.theta_tok;
        snprintf(line, sizeof line, "{%s, \"%s\": -1e400}", G, th[i]);
        ok(line);
        FT_CHECK(isinf(*v) && *v < 0);
        snprintf(line, sizeof line, "{%s, \"%s\": 1e400}", G, th[i]);
        ok(line);
        FT_CHECK(isinf(*v) && *v > 0);
        snprintf(line, sizeof line, "{%s, \"%s\": -100000000000000000000}", G,
                 th[i]);
        ok(line);
        FT_CHECK_EQ_U64(fti_f2u(*v), fti_f2u((float)-1e20));
        snprintf(line, sizeof line, "{%s, \"%s\": 1e-400}", G, th[i]);
        ok(line);
        FT_CHECK_EQ_U64(fti_f2u(*v), 0);
        snprintf(line, sizeof line, "{%s, \"%s\": -0.0e5}", G, th[i]);
        ok(line);
        FT_CHECK_EQ_U64(fti_f2u(*v), 0x80000000u);
    }
    /* alpha: binary64, not rounded to binary32; its range is the
     * validator's */
    ok("{" G ", \"alpha\": 0.1}");
    FT_CHECK_EQ_U64(fti_d2u(q.req.alpha), fti_d2u(0.1));
    ok("{" G ", \"alpha\": 100000000000000000000}");
    FT_CHECK(q.req.alpha == 1e20);
    ok("{" G ", \"alpha\": 1e400}");
    FT_CHECK(isinf(q.req.alpha) && q.req.alpha > 0);
    char err[192];
    FT_FAIL(ft_request_validate(&q.req, 0, err, sizeof err), FT_EREQUEST);
    FT_CHECK_STR(err, "alpha: must be 0..10, got inf");
    ok("{" G ", \"alpha\": -1e400}");
    FT_CHECK(isinf(q.req.alpha) && q.req.alpha < 0);
    ok("{" G ", \"alpha\": 1e-400}");
    FT_CHECK_EQ_U64(fti_d2u(q.req.alpha), 0);
    ok("{" G ", \"alpha\": 4.9406564584124654e-324}");
    FT_CHECK_EQ_U64(fti_d2u(q.req.alpha), 1);
    ok("{" G ", \"alpha\": 1E+0}");
    FT_CHECK(q.req.alpha == 1.0);
}

/* Tokens and counts are JSON integers: no fraction, no exponent. */
static void spec7_integers(void)
{
    bad("{\"tokens\": [[100000000000000000000]], \"logp\": [[0]]}",
        "tokens: position 0, proposal 0: 100000000000000000000 is not in "
        "0..4294967295");
    bad("{\"tokens\": [[0, 1e0]], \"logp\": [[0, 0]]}",
        "tokens: position 0, proposal 1: not an integer");
    bad("{\"tokens\": [[0, 1E2]], \"logp\": [[0, 0]]}",
        "tokens: position 0, proposal 1: not an integer");
    bad("{\"tokens\": [[true]], \"logp\": [[0]]}",
        "tokens: position 0, proposal 0: not an integer");
    bad("{\"tokens\": [[[1]]], \"logp\": [[0]]}",
        "tokens: position 0, proposal 0: not an integer");
    ok("{\"tokens\": [[-0, 4294967295]], \"logp\": [[0, 0]]}");
    FT_CHECK_EQ_U64(q.tokens[0], 0);
    FT_CHECK_EQ_U64(q.tokens[1], 4294967295u);
    bad("{\"tokens\": [[-4294967295]], \"logp\": [[0]]}",
        "tokens: position 0, proposal 0: -4294967295 is not in 0..4294967295");
    static const char *const counts[] = {"beam", "results"};
    for (int i = 0; i < 2; i++) {
        char line[256], want[128];
        static const char *const notint[] = {"1.0", "1e2", "1E+2", "2.5",
                                             "\"2\"", "null", "[2]", "{}"};
        for (size_t j = 0; j < sizeof notint / sizeof notint[0]; j++) {
            snprintf(line, sizeof line, "{\"id\": 1, %s, \"%s\": %s}", G,
                     counts[i], notint[j]);
            snprintf(want, sizeof want, "%s: must be an integer", counts[i]);
            bad_id(line, want, "1");
        }
        snprintf(line, sizeof line, "{%s, \"%s\": 100000000000000000000}", G,
                 counts[i]);
        snprintf(want, sizeof want,
                 "%s: must be 1..4096, got 100000000000000000000", counts[i]);
        bad(line, want);
        snprintf(line, sizeof line, "{%s, \"%s\": -1}", G, counts[i]);
        snprintf(want, sizeof want, "%s: must be 1..4096, got -1", counts[i]);
        bad(line, want);
        snprintf(line, sizeof line, "{%s, \"%s\": 4096}", G, counts[i]);
        ok(line);
        FT_CHECK_EQ_U64(i ? q.req.results : q.req.beam, 4096);
    }
    /* a long literal is quoted cut */
    bad("{" G ", \"beam\": 1234567890123456789012345678901234567890123456789012345}",
        "beam: must be 1..4096, got "
        "123456789012345678901234567890123456789012345678...");
}

/* Unknown fields and fields given twice name the field; the id is echoed
 * wherever it stands in the line. */
static void spec7_fields(void)
{
    static const char *const dup[] = {
        "\"tokens\": [[2]]", "\"logp\": [[1]]", "\"beam\": 1",
        "\"results\": 1", "\"theta_tok\": 0", "\"theta_sent\": 0",
        "\"alpha\": 1"};
    static const char *const name[] = {"tokens", "logp", "beam", "results",
                                       "theta_tok", "theta_sent", "alpha"};
    for (int i = 0; i < 7; i++) {
        char line[256], want[64];
        snprintf(want, sizeof want, "%s: given twice", name[i]);
        snprintf(line, sizeof line, "{%s, \"id\": \"d\", %s, %s}", G, dup[i],
                 dup[i]);
        bad_id(line, want, "d");
        /* the second one only is extra: tokens/logp are in G already */
        if (i < 2) {
            snprintf(line, sizeof line, "{%s, %s, \"id\": 8}", G, dup[i]);
            bad_id(line, want, "8");
        }
    }
    bad_id("{\"id\": 1, \"id\": 2, " G "}", "id: given twice", "1");
    bad_id("{\"colour\": \"red\", " G ", \"id\": 12}", "colour: unknown field",
           "12");
    bad_id("{\"id\": \"x\", " G ", \"Beam\": 2}", "Beam: unknown field", "x");
    bad("{" G ", \"\": 2}", ": unknown field");
    bad("{" G ", \"a\\u0000b\": 2}", "a?b: unknown field");
    bad("{" G ", \"abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghij\": 0}",
        "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuv...: unknown field");
    /* names compare after decoding escapes */
    ok("{" G ", \"be\\u0061m\": 7}");
    FT_CHECK_EQ_U64(q.req.beam, 7);
    bad("{" G ", \"beam\": 7, \"be\\u0061m\": 7}", "beam: given twice");
    /* order is free: logp before tokens, id last */
    ok("{\"alpha\": 2, \"logp\": [[-1, -2]], \"tokens\": [[5, 6]], \"id\": 1}");
    FT_CHECK_EQ_U64(q.tokens[1], 6);
    FT_CHECK_EQ_U64(fti_f2u(q.logp[1]), fti_f2u(-2.0f));
    FT_CHECK(q.req.alpha == 2.0 && q.has_id && q.id_int_ok && q.id_int == 1);
    /* the first fault in reading order is reported */
    bad("{\"beam\": 0, \"tokens\": [[1.5]], \"logp\": [[0]]}",
        "beam: must be 1..4096, got 0");
    bad("{\"tokens\": [[1.5]], \"logp\": [[0]], \"beam\": 0}",
        "tokens: position 0, proposal 0: not an integer");
    bad("{\"tokens\": [[1, 2], [3, 4, 5]], \"logp\": [[0, 0], [0, 0, 0]]}",
        "tokens: position 1 has 3 proposals, position 0 has 2");
    bad("{\"tokens\": [[1, 2]], \"logp\": [[0, 0], 7]}",
        "logp: position 1: must be an array");
    bad("{\"tokens\": [[1]], \"logp\": {}}", "logp: must be an array of arrays");
    bad("{}", "tokens: missing");
    /* blank lines are rejected requests: one answer per line */
    no_id("", "json: empty line");
    no_id(" ", "json: empty line");
    no_id(" \t \r\n", "json: empty line");
    no_id("\n", "json: empty line");
    error_line("   ", "{\"error\": \"json: empty line\"}\n");
    /* a trailing newline (as getline leaves it) is allowed */
    ok("{" G "}\n");
    ok("{" G "}\r\n");
}

/* The id: a string, or an integer echoed exactly as written. */
static void spec7_ids(void)
{
    ok("{\"id\": -0, " G "}");
    FT_CHECK(q.has_id && !q.id_is_str && q.id_int_ok && q.id_int == 0);
    FT_CHECK_STR(q.id_str, "-0");
    ok("{\"id\": 18446744073709551615, " G "}");
    FT_CHECK(q.has_id && !q.id_is_str && !q.id_int_ok);
    FT_CHECK_STR(q.id_str, "18446744073709551615");
    ok("{\"id\": 9223372036854775807, " G "}");
    FT_CHECK(q.id_int_ok && q.id_int == INT64_MAX);
    ok("{\"id\": -9223372036854775808, " G "}");
    FT_CHECK(q.id_int_ok && q.id_int == INT64_MIN);
    ok("{\"id\": 9223372036854775808, " G "}");
    FT_CHECK(!q.id_int_ok);
    /* 64 characters, 65, 1000: all echoed as written */
    char line[512], id[80];
    memset(id, '9', 64);
    id[64] = 0;
    snprintf(line, sizeof line, "{\"id\": %s, " G "}", id);
    ok(line);
    FT_CHECK_STR(q.id_str, id);
    ft_result res;
    FT_PASS(ft_result_alloc(&res, 1, 1));
    res.status = FT_OK;
    ft_buf b;
    ft_buf_init(&b);
    FT_PASS(ft_jsonl_encode_result(&b, &q, &res));
    char want[512];
    snprintf(want, sizeof want, "{\"id\": %s, \"results\": []}\n", id);
    FT_CHECK_STR((const char *)b.data, want);
    id[0] = '-';
    snprintf(line, sizeof line, "{\"id\": %s, " G "}", id);
    ok(line);
    FT_CHECK_STR(q.id_str, id);
    snprintf(line, sizeof line, "{\"id\": -%s, " G "}", id + 1);
    ok(line);
    snprintf(line, sizeof line, "{\"id\": -9%s, " G "}", id + 1);
    ok(line);
    FT_CHECK(strlen(q.id_str) == 65 && strncmp(q.id_str, "-99", 3) == 0);
    {
        /* an integer id of any length is echoed as written (SPEC §7: a
         * string or integer id is echoed back) */
        char big[1200], bline[1400], bwant[1400];
        memset(big, '7', 1000);
        big[0] = '1';
        big[1000] = 0;
        snprintf(bline, sizeof bline, "{\"id\": %s, " G "}", big);
        ok(bline);
        FT_CHECK(q.has_id && !q.id_is_str && !q.id_int_ok);
        FT_CHECK_STR(q.id_str, big);
        ft_buf bb;
        ft_buf_init(&bb);
        FT_PASS(ft_jsonl_encode_result(&bb, &q, &res));
        snprintf(bwant, sizeof bwant, "{\"id\": %s, \"results\": []}\n", big);
        FT_CHECK_STR((const char *)bb.data, bwant);
        ft_buf_free(&bb);
    }
    no_id("{\"id\": 1e2, " G "}", "id: must be a string or an integer");
    no_id("{\"id\": 1.0, " G "}", "id: must be a string or an integer");
    no_id("{\"id\": [1], " G "}", "id: must be a string or an integer");
    no_id("{\"id\": true, " G "}", "id: must be a string or an integer");
    /* every rejection echoes an id that could be read: after a syntax
     * error too, and however the id was written */
    error_line("{\"id\": -0, \"tokens\": [[1]], \"logp\": [[0]], \"beam\": 0}",
               "{\"id\": -0, \"error\": \"beam: must be 1..4096, got 0\"}\n");
    error_line("{\"id\": 7, \"tokens\": [[1]], ",
               "{\"id\": 7, \"error\": \"json: string or '}' expected, but "
               "the line ends after column 27\"}\n");
    error_line("{\"id\": \"a\\tb\", \"tokens\": [[1]], \"logp\": [[0]]} x",
               "{\"id\": \"a\\tb\", \"error\": \"json: end of file expected "
               "near 'x' at column 48\"}\n");
    /* an id built by hand (by tools) as id_int alone */
    ft_jsonl_req h;
    ft_jsonl_req_init(&h);
    h.has_id = 1;
    h.id_int = -42;
    b.len = 0;
    FT_PASS(ft_jsonl_encode_error(&b, &h, "x: y"));
    FT_CHECK_STR((const char *)b.data, "{\"id\": -42, \"error\": \"x: y\"}\n");
    ft_buf_free(&b);
    ft_result_free(&res);
}

/* Strings: the exact JSON grammar, escapes, surrogate pairs and UTF-8. */
static void spec7_strings(void)
{
    ok("{\"id\": \"\\ud83d\\ude00\\u00e9\\/\\b\\f\\n\\r\\t\\\"\\\\\", " G "}");
    FT_CHECK_EQ_U64(q.id_len, 4 + 2 + 8);
    FT_CHECK(!memcmp(q.id_str, "\xf0\x9f\x98\x80\xc3\xa9/\b\f\n\r\t\"\\", 14));
    ok("{\"id\": \"a\\u0000b\", " G "}");
    FT_CHECK_EQ_U64(q.id_len, 3);
    FT_CHECK(!memcmp(q.id_str, "a\0b", 4));
    ok("{\"id\": \"\xe2\x82\xac\xf4\x8f\xbf\xbf\", " G "}"); /* U+20AC, U+10FFFF */
    FT_CHECK_EQ_U64(q.id_len, 7);
    ok("{\"id\": \"\", " G "}");
    FT_CHECK(q.has_id && q.id_is_str && q.id_len == 0);
    no_id("{\"id\": \"\\ud83d\", " G "}",
          "json: lone high surrogate in a \\u escape near '\\ud83d' at "
          "column 14");
    no_id("{\"id\": \"\\ude00x\", " G "}",
          "json: lone low surrogate in a \\u escape near '\\ude00' at "
          "column 14");
    no_id("{\"id\": \"\\ud83d\\u0041\", " G "}",
          "json: lone high surrogate in a \\u escape near '\\ud83d' "
          "at column 14");
    no_id("{\"id\": \"\\u12g4\", " G "}",
          "json: invalid \\u escape near '\\u12g4' at column 14");
    no_id("{\"id\": \"\\x\", " G "}",
          "json: invalid escape near '\\x' at column 10");
    no_id("{\"id\": \"a\tb\", " G "}",
          "json: control character in a string near '\\x09' at column 10");
    no_id("{\"id\": \"\xc0\xaf\", " G "}", /* overlong '/' */
          "json: invalid UTF-8 in a string near '\\xc0' at column 9");
    no_id("{\"id\": \"\xed\xa0\x80\", " G "}", /* a surrogate in UTF-8 */
          "json: invalid UTF-8 in a string near '\\xed' at column 9");
    no_id("{\"id\": \"\xf4\x90\x80\x80\", " G "}", /* past U+10FFFF */
          "json: invalid UTF-8 in a string near '\\xf4' at column 9");
    no_id("{\"id\": \"\xe2\x82\", " G "}",
          "json: invalid UTF-8 in a string near '\\xe2' at column 9");
    no_id("{\"id\": \"abc", "json: unterminated string, but the line ends "
          "after column 11");
    /* the encoder writes any byte that is not UTF-8 as U+FFFD */
    ft_buf b;
    ft_buf_init(&b);
    FT_PASS(ft_jsonl_encode_error(&b, NULL, "a\xff\xe2\x82\xac\x7f\x01"));
    FT_CHECK_STR((const char *)b.data,
                 "{\"error\": \"a\\ufffd\xe2\x82\xac\\u007f\\u0001\"}\n");
    ft_buf_free(&b);
}

/* Syntax errors: "json: <what> near '<text>' at column <n>". */
static void spec7_syntax(void)
{
    no_id("{", "json: string or '}' expected, but the line ends after "
          "column 1");
    no_id("{\"tokens\"", "json: ':' expected, but the line ends after column 9");
    no_id("{\"tokens\" 1", "json: ':' expected near '1' at column 11");
    no_id("{\"tokens\": [[1]] \"logp\": [[0]]}",
          "json: ',' or '}' expected near '\"logp\"' at column 23");
    no_id("{\"tokens\": [[1]],}", "json: string or '}' expected near '}' at "
          "column 18");
    no_id("{\"tokens\": [[01]], \"logp\": [[0]]}",
          "json: invalid number near '01' at column 15");
    no_id("{\"tokens\": [[1]], \"logp\": [[-]]}",
          "json: invalid number near '-' at column 29");
    no_id("{\"tokens\": [[1]], \"logp\": [[.5]]}",
          "json: invalid token near '.5' at column 30");
    no_id("{\"tokens\": [[1]], \"logp\": [[1.]]}",
          "json: invalid number near '1.' at column 30");
    no_id("{\"tokens\": [[1]], \"logp\": [[1e]]}",
          "json: invalid number near '1e' at column 30");
    no_id("{\"tokens\": [[1]], \"logp\": [[-Infinity]]}",
          "json: invalid number near '-Infinity' at column 37");
    no_id("{\"tokens\": [[1]], \"logp\": [[0,]]}",
          "json: invalid token near ']' at column 31");
    no_id("{\"tokens\": [[1]], \"logp\": [[0]}",
          "json: ',' or ']' expected near '}' at column 31");
    no_id("{\"tokens\": [[1]], \"logp\": [[0]], \"x\": nul}",
          "json: invalid token near 'nul' at column 41");
    no_id("{\"tokens\": [[1]], \"logp\": [[0]]}}",
          "json: end of file expected near '}' at column 33");
    no_id("{\"tokens\": [[1]], \"logp\": [[0]]}\x01",
          "json: end of file expected near '\\x01' at column 33");
    no_id("\"x\"", "json: a request must be an object");
    no_id("null", "json: a request must be an object");
    no_id("[1", "json: ',' or ']' expected, but the line ends after column 2");
    no_id("{\"a\": 1} \n x", "json: end of file expected near 'x' at column 12");
    /* NUL bytes are bytes like any other, not an end */
    static const char nul[] = "{\"tokens\": [[1]], \"logp\": [[0]]}\0";
    char err[192];
    FT_FAIL(parse(&q, nul, sizeof nul - 1, err, sizeof err), FT_EREQUEST);
    FT_CHECK_STR(err, "json: end of file expected near '\\x00' at column 33");
    /* nesting is bounded (in values the schema rejects anyway) */
    char deep[600];
    size_t n = (size_t)snprintf(deep, sizeof deep, "{\"x\": ");
    for (int i = 0; i < 200; i++)
        deep[n++] = '[';
    deep[n] = 0;
    no_id(deep, "json: nesting too deep near '[' at column 134");
    n = (size_t)snprintf(deep, sizeof deep, "{\"x\": ");
    for (int i = 0; i < 100; i++)
        deep[n++] = '[';
    for (int i = 0; i < 100; i++)
        deep[n++] = ']';
    snprintf(deep + n, sizeof deep - n, ", " G "}");
    no_id(deep, "x: unknown field");
}

/* maxrss_kb is the peak resident size of this process. */
static long maxrss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* Bounded reading: prefixes of valid lines, the line-size cap, early shape
 * checks. */
static void bounded(void)
{
    static const char *const lines[] = {
        "{\"id\": \"a\\u00e9\\ud83d\\ude00\", \"tokens\": [[1, 70000], [3, 4]], "
        "\"logp\": [[-0.5, -1e-3], [-2E+1, -100000000000000000000]], "
        "\"beam\": 30, \"results\": 4, \"theta_tok\": -1e400, "
        "\"theta_sent\": -200, \"alpha\": 1.0}",
        "{\"id\": -12, \"tokens\": [[1]], \"logp\": [[0]], \"x\": {\"a\": "
        "[true, false, null, \"s\", 1.5e3, {}]}}",
        "  {\"logp\": [[0]] , \"tokens\" : [ [ 7 ] ] }  "};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        size_t n = strlen(lines[i]);
        char err[192];
        int rc = parse(&q, lines[i], n, err, sizeof err);
        FT_CHECK(rc == FT_OK || (i == 1 && !strcmp(err, "x: unknown field")));
        /* every strict prefix is rejected (the object never closes), with
         * a message, and never read past */
        size_t close = (size_t)(strrchr(lines[i], '}') - lines[i]) + 1;
        for (size_t k = 0; k < n; k++) {
            int all_ws = 1;
            for (size_t j = 0; j < k; j++)
                all_ws &= lines[i][j] == ' ';
            err[0] = 0;
            rc = parse(&q, lines[i], k, err, sizeof err);
            if (k >= close) { /* only trailing spaces are missing */
                FT_PASS(rc);
                continue;
            }
            FT_CHECK_EQ_U64(rc, FT_EREQUEST);
            if (all_ws)
                FT_CHECK_STR(err, "json: empty line");
            else
                FT_CHECK(strncmp(err, "json: ", 6) == 0);
        }
    }

    /* the line-size cap: the terminator is not counted; over it, only an
     * id in the first max_line bytes is read */
    ft_jsonl_req c;
    ft_jsonl_req_init(&c);
    FT_CHECK_EQ_U64(c.max_line, 64u << 20);
    const char *l = "{\"id\": 5, \"tokens\": [[1]], \"logp\": [[0]]}";
    size_t n = strlen(l); /* 41 */
    char line[128], err[192];
    c.max_line = n;
    snprintf(line, sizeof line, "%s\r\n", l);
    FT_PASS(parse(&c, line, n + 2, err, sizeof err));
    snprintf(line, sizeof line, "%s ", l);
    FT_FAIL(parse(&c, line, n + 1, err, sizeof err), FT_EREQUEST);
    FT_CHECK_STR(err, "json: line longer than 41 bytes");
    FT_CHECK(c.has_id && !strcmp(c.id_str, "5"));
    c.max_line = 8; /* the id is cut: not read */
    FT_FAIL(parse(&c, l, n, err, sizeof err), FT_EREQUEST);
    FT_CHECK_STR(err, "json: line longer than 8 bytes");
    FT_CHECK(!c.has_id);
    c.max_line = 9; /* the id is whole */
    FT_FAIL(parse(&c, l, n, err, sizeof err), FT_EREQUEST);
    FT_CHECK(c.has_id && !strcmp(c.id_str, "5"));
    ft_jsonl_req_free(&c);

    /* early shape checks: past 4096 proposals or 64 positions nothing more
     * is stored, and the message has the whole count */
    ft_buf b;
    ft_buf_init(&b);
    FT_PASS(ft_buf_printf(&b, "{\"tokens\": [["));
    for (int k = 0; k < 5000; k++)
        FT_PASS(ft_buf_printf(&b, k ? ", %d" : "%d", k));
    FT_PASS(ft_buf_printf(&b, "]], \"logp\": [[0]], \"id\": 3}"));
    ft_jsonl_req_init(&c);
    FT_FAIL(parse(&c, (const char *)b.data, b.len, err, sizeof err),
            FT_EREQUEST);
    FT_CHECK_STR(err, "tokens: each position must have 1..4096 proposals, "
                 "got 5000");
    FT_CHECK(c.has_id && c.id_int == 3);
    FT_CHECK(c.cap <= 4096);
    ft_jsonl_req_free(&c);
    b.len = 0;
    FT_PASS(ft_buf_printf(&b, "{\"tokens\": [[1, 2]], \"logp\": [[0, 0]"));
    for (int t = 1; t < 70; t++)
        FT_PASS(ft_buf_printf(&b, ", [0, 0]"));
    FT_PASS(ft_buf_printf(&b, "]}"));
    ft_jsonl_req_init(&c);
    FT_FAIL(parse(&c, (const char *)b.data, b.len, err, sizeof err),
            FT_EREQUEST);
    FT_CHECK_STR(err, "logp: the grid must have 1..64 positions, got 70");
    FT_CHECK(c.cap <= 64 * 2);
    ft_jsonl_req_free(&c);
    /* the largest grid fits exactly */
    b.len = 0;
    FT_PASS(ft_buf_printf(&b, "{\"tokens\": ["));
    for (int t = 0; t < 64; t++) {
        FT_PASS(ft_buf_printf(&b, t ? ", [" : "["));
        for (int k = 0; k < 4096; k++)
            FT_PASS(ft_buf_printf(&b, k ? ", %d" : "%d", k));
        FT_PASS(ft_buf_printf(&b, "]"));
    }
    FT_PASS(ft_buf_printf(&b, "], \"logp\": ["));
    for (int t = 0; t < 64; t++) {
        FT_PASS(ft_buf_printf(&b, t ? ", [" : "["));
        for (int k = 0; k < 4096; k++)
            FT_PASS(ft_buf_printf(&b, k ? ", -%d.5" : "-%d.5", k));
        FT_PASS(ft_buf_printf(&b, "]"));
    }
    FT_PASS(ft_buf_printf(&b, "]}"));
    ft_jsonl_req_init(&c);
    FT_PASS(parse(&c, (const char *)b.data, b.len, err, sizeof err));
    FT_CHECK(c.req.T == 64 && c.req.K == 4096 && c.cap == 64 * 4096);
    FT_CHECK(c.tokens[63 * 4096 + 4095] == 4095 &&
             c.logp[63 * 4096 + 4095] == -4095.5f);
    FT_PASS(ft_request_validate(&c.req, 0, err, sizeof err));
    ft_jsonl_req_free(&c);
    /* a 60 MB row (12 million tokens): refused in bounded time, and the
     * peak memory grows by far less than the line (jansson's tree took
     * 20 bytes per token) */
    size_t big = 12u << 20;
    b.len = 0;
    FT_PASS(ft_buf_reserve(&b, big * 5 + 64));
    FT_PASS(ft_buf_printf(&b, "{\"id\": \"big\", \"tokens\": [["));
    for (size_t k = 0; k < big; k++)
        FT_PASS(ft_buf_append(&b, k ? ", 77" : "77", k ? 4 : 2));
    FT_PASS(ft_buf_printf(&b, "]], \"logp\": [[0]]}"));
    ft_jsonl_req_init(&c);
    long rss0 = maxrss_kb();
    clock_t t0 = clock();
    FT_FAIL(ft_jsonl_parse(&c, (const char *)b.data, b.len, err, sizeof err),
            FT_EREQUEST);
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    long grown = maxrss_kb() - rss0;
    FT_CHECK_STR(err, "tokens: each position must have 1..4096 proposals, "
                 "got 12582912");
    FT_CHECK(c.has_id && !strcmp(c.id_str, "big"));
    FT_CHECK(c.cap <= 4096);
    if (grown > 4096 || secs > 5)
        fprintf(stderr, "60 MB row: +%ld KiB peak, %.2f s\n", grown, secs);
    FT_CHECK(grown <= 4096);
    FT_CHECK(secs <= 5);
    ft_jsonl_req_free(&c);
    ft_buf_free(&b);
}

/* rnd_lit appends a random JSON number literal (long ones included) to s. */
static size_t rnd_lit(char *s, uint64_t *seed)
{
    size_t n = 0;
    uint64_t r = ft_test_rand(seed);
    if (r & 1)
        s[n++] = '-';
    size_t nint = (size_t)((r >> 1) % 8 == 0 ? ft_test_rand(seed) % 1200
                                              : 1 + (r >> 4) % 20);
    size_t zeros = (r >> 9) % 5 == 0 ? (size_t)(ft_test_rand(seed) % 900) : 0;
    if (nint == 0 || zeros) {
        s[n++] = '0';
        nint = 0;
    }
    for (size_t i = 0; i < nint; i++)
        s[n++] = (char)('0' + (i == 0 ? 1 + ft_test_rand(seed) % 9
                                      : ft_test_rand(seed) % 10));
    if ((r >> 13) & 1 || zeros) {
        s[n++] = '.';
        for (size_t i = 0; i < zeros; i++)
            s[n++] = '0';
        size_t nf = 1 + (size_t)((r >> 14) % 4 == 0 ? ft_test_rand(seed) % 1200
                                                     : ft_test_rand(seed) % 25);
        for (size_t i = 0; i < nf; i++)
            s[n++] = (char)('0' + ft_test_rand(seed) % 10);
    }
    if ((r >> 17) & 1)
        n += (size_t)sprintf(s + n, "e%s%d", (r >> 18) & 1 ? "-" : "+",
                             (int)(ft_test_rand(seed) % 700));
    s[n] = 0;
    return n;
}

/* check_alpha parses lit as alpha and compares the bits with strtod's. */
static void check_alpha(const char *lit)
{
    static char line[8192];
    snprintf(line, sizeof line, "{" G ", \"alpha\": %s}", lit);
    ok(line);
    double want = strtod(lit, NULL);
    if (fti_d2u(q.req.alpha) != fti_d2u(want))
        fprintf(stderr, "alpha %s: %.17g, strtod %.17g\n", lit, q.req.alpha,
                want);
    FT_CHECK_EQ_U64(fti_d2u(q.req.alpha), fti_d2u(want));
}

/* Numbers read as strtod reads them, bit for bit, long ones included:
 * random literals, and halfway cases between two doubles written with
 * 1000 more digits (the sticky digit decides). */
static void strtod_equal(void)
{
    uint64_t seed = 7;
    static char lit[4096];
    for (int i = 0; i < 20000; i++) {
        rnd_lit(lit, &seed);
        check_alpha(lit);
    }
    static const double bases[] = {1.0, 0.1, 3.0e300, 2.2250738585072014e-308,
                                   4.9406564584124654e-324, 1.7976931348623157e308,
                                   123456.789};
    for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++) {
        double x = bases[i];
        /* the exact midpoint of x and its predecessor, in long double (64
         * bits of mantissa), printed exactly */
        long double mid = ((long double)x + (long double)nextafter(x, 0)) / 2;
        int m = snprintf(lit, 900, "%.790Le", mid);
        FT_CHECK(m > 0 && m < 900);
        /* move the exponent out, leaving the digits: d.ddd...e±X */
        char *e = strchr(lit, 'e');
        char ex[16];
        snprintf(ex, sizeof ex, "%s", e);
        /* exactly halfway, then a hair above and below */
        char *d = e;
        for (int z = 0; z < 1000; z++)
            *d++ = '0';
        strcpy(d, ex);
        check_alpha(lit);
        d[-1] = '1';
        check_alpha(lit);
    }
    /* short literals (the fast path): up to 17 digits, exponents around
     * the exact powers of ten */
    for (int i = 0; i < 200000; i++) {
        uint64_t r = ft_test_rand(&seed);
        int nd = 1 + (int)(r % 17), dot = (int)((r >> 5) % (nd + 1));
        size_t n = 0;
        if ((r >> 10) & 1)
            lit[n++] = '-';
        if (dot == 0)
            lit[n++] = '0';
        for (int j = 0; j < nd; j++) {
            if (j == dot && dot > 0)
                lit[n++] = '.';
            else if (j == 0 && dot == 0)
                lit[n++] = '.';
            lit[n++] = (char)('0' + (j == 0 && dot > 0 ? 1 + ft_test_rand(&seed) % 9
                                                       : ft_test_rand(&seed) % 10));
        }
        if ((r >> 11) & 1)
            n += (size_t)sprintf(lit + n, "e%d", (int)((r >> 12) % 61) - 30);
        lit[n] = 0;
        check_alpha(lit);
    }
    check_alpha("9007199254740993");      /* 2^53 + 1: 16 digits, strtod */
    check_alpha("123456789012345e22");    /* the largest fast exponent */
    check_alpha("123456789012345e-22");
    check_alpha("-0.000");
    check_alpha("0e-5");
    /* exponents far out, balanced by long digit runs */
    char *p = lit;
    p += sprintf(p, "0.");
    for (int z = 0; z < 1500; z++)
        *p++ = '0';
    sprintf(p, "15e1500");
    check_alpha(lit); /* 1.5 */
    p = lit;
    *p++ = '1';
    for (int z = 0; z < 1500; z++)
        *p++ = '0';
    sprintf(p, "e-1500");
    check_alpha(lit); /* 1 */
    check_alpha("1e99999999999999999999");
    check_alpha("1e-99999999999999999999");
    check_alpha("-0e99999999999999999999");
}

/* encoder_tests: ids as echoed, and nothing left behind by an encoder. */
static void encoder_tests(ft_result *res)
{
    ft_buf b;
    ft_buf_init(&b);
    res->n = 1;
    res->hits[0] = (ft_hit){1, 0, 0, INFINITY, -INFINITY, 0, 0};
    res->tokens[0] = 0;
    res->status = FT_OK;
    FT_PASS(ft_jsonl_encode_result(&b, NULL, res));
    FT_CHECK_STR((const char *)b.data,
                 "{\"results\": [{\"tokens\": [0], \"value\": 0, \"score\": "
                 "1e999, \"sigma\": -1e999}]}\n");
    b.len = 0;
    res->status = FT_EREQUEST;
    snprintf(res->error, sizeof res->error, "tokens: missing");
    FT_PASS(ft_jsonl_encode_result(&b, NULL, res));
    FT_CHECK_STR((const char *)b.data, "{\"error\": \"tokens: missing\"}\n");
    res->status = FT_OK;
    ft_buf_free(&b);
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
    FT_CHECK_EQ_U64(fti_f2u(q.logp[0]), fti_f2u((float)0.1)); /* via binary64 */
    FT_CHECK_EQ_U64(fti_f2u(q.logp[1]), 0x80000000u);     /* -0 */
    FT_CHECK_EQ_U64(fti_f2u(q.logp[2]), 0);               /* underflow to 0 */
    FT_CHECK(q.req.theta_sent == -200.0f && q.req.alpha == 0.1);
    FT_CHECK(q.has_id && q.id_is_str && !strcmp(q.id_str, "x"));
    ok("{\"tokens\": [[1, 2]], \"logp\": [[-0, 0]], \"theta_sent\": -0}");
    FT_CHECK_EQ_U64(fti_f2u(q.logp[0]), 0x80000000u);
    FT_CHECK_EQ_U64(fti_f2u(q.logp[1]), 0);
    FT_CHECK_EQ_U64(fti_f2u(q.req.theta_sent), 0x80000000u);
    ok("{\"id\": -12, \"tokens\": [[1]], \"logp\": [[0]]}");
    FT_CHECK(q.has_id && !q.id_is_str && q.id_int == -12);
    /* double rounding: the binary64 value first, then binary32 */
    ok("{\"tokens\": [[1]], \"logp\": [[1.00000005960464477539062500001]]}");
    FT_CHECK_EQ_U64(fti_f2u(q.logp[0]), fti_f2u((float)1.0000000596046448));
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
    /* docs/specification.md section 7: a field given twice names the field (was
     * jansson's "json: duplicate object key near '"beam"' at column 50") */
    bad("{\"tokens\": [[1]], \"logp\": [[0]], \"beam\": 2, \"beam\": 3}",
        "beam: given twice");
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

    spec7_numbers();
    spec7_integers();
    spec7_fields();
    spec7_ids();
    spec7_strings();
    spec7_syntax();
    bounded();
    strtod_equal();

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
        ft_buf out;
        ft_buf_init(&out);
        FT_PASS(ft_jsonl_encode_result(&out, round % 2 ? &id : NULL, &res));
        char *buf = (char *)out.data;
        size_t blen = out.len;
        FT_CHECK(blen > 0 && buf[blen - 1] == '\n');
        FT_CHECK(memchr(buf, '\n', blen) == buf + blen - 1);
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
            json_t *sc = json_object_get(h, "score");
            FT_CHECK_EQ_U64(fti_d2u(json_number_value(sc)),
                            fti_d2u(w->score));
            json_t *sg = json_object_get(h, "sigma");
            FT_CHECK_EQ_U64(fti_f2u((float)json_number_value(sg)),
                            fti_f2u(w->sigma));
        }
        json_decref(o);
        ft_buf_free(&out);
        ft_jsonl_req_free(&id);
    }
    /* an error line with an id, and the line format itself */
    ft_buf out;
    ft_buf_init(&out);
    ok("{\"id\": 3, \"tokens\": [[1]], \"logp\": [[0]]}");
    FT_PASS(ft_jsonl_encode_error(&out, &q, "beam: must be 1..4096, got 0"));
    res.n = 1;
    res.hits[0] = (ft_hit){2, 0, 18446744073709551615ull, -1.5, -2.5f, 0, 0};
    res.tokens[0] = 7;
    res.tokens[1] = 4294967295u;
    FT_PASS(ft_jsonl_encode_result(&out, &q, &res));
    res.n = 0;
    FT_PASS(ft_jsonl_encode_result(&out, NULL, &res));
    FT_CHECK_STR((const char *)out.data,
                 "{\"id\": 3, \"error\": \"beam: must be 1..4096, got 0\"}\n"
                 "{\"id\": 3, \"results\": [{\"tokens\": [7, 4294967295], "
                 "\"value\": 18446744073709551615, \"score\": -1.5, "
                 "\"sigma\": -2.5}]}\n"
                 "{\"results\": []}\n");
    ft_buf_free(&out);
    encoder_tests(&res);
    ft_result_free(&res);
    ft_jsonl_req_free(&q);
    printf("jsonl_test: ok\n");
    return 0;
}
