/*
 * jsonl.c - docs/specification.md section 7's request parser and result encoder
 * (jsonl.h).
 *
 * The parser is a small validating reader for this one fixed schema, not a
 * general JSON library: jansson (used here before) builds the whole tree
 * before any check, so a 200 MB line cost gigabytes before its first row
 * was refused, and it cannot represent 1e400 or a 20-digit integer, both of
 * which docs/specification.md section 7 reads as strtod does.  This reader
 * walks the bytes once, bounded by the length it is given (it never needs a
 * NUL), checks the exact JSON grammar (RFC 8259: string escapes, \u surrogate
 * pairs, UTF-8, number syntax) and the schema as it goes, and stores at most
 * FT_MAX_T x FT_MAX_K grid elements: past a fault it only checks syntax.
 * Numbers are read by strtod on a bounded, NUL-terminated copy of their
 * text.  Nothing is left for jansson in this file (string escaping on
 * output is a dozen lines), so it does not use it.
 */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashtrie/internal/errmsg.h"
#include "rt_impl.h"
#include "jsonl.h"

void ft_jsonl_req_init(ft_jsonl_req *q)
{
    memset(q, 0, sizeof *q);
    ft_request_init(&q->req);
    q->max_line = FT_JSONL_MAX_LINE_DEFAULT;
}

void ft_jsonl_req_free(ft_jsonl_req *q)
{
    free(q->tokens);
    free(q->logp);
    free(q->id_str);
    memset(q, 0, sizeof *q);
}

/* ---- the reader ---- */

/* Nesting deeper than this (only possible inside values the schema rejects
 * anyway) is a syntax error, so that skipping a value cannot exhaust the
 * stack. */
#define MAX_DEPTH 128
/* Number literals up to this many bytes go to strtod as they are; longer
 * ones are first reduced (num_long) to a string strtod rounds the same. */
#define NUM_DIRECT 800
/* NUM_SIG significant digits, then one sticky digit, decide the rounding
 * of any decimal to binary64: every boundary between two roundings (a
 * halfway point, the overflow and underflow limits) has at most 767. */
#define NUM_SIG 800
/* Error messages quote at most this many bytes of the input. */
#define QUOTE_MAX 48

enum { F_ID, F_TOKENS, F_LOGP, F_BEAM, F_RESULTS, F_THETA_TOK, F_THETA_SENT,
       F_ALPHA, F_COUNT };
static const char *const field_names[F_COUNT] = {
    "id", "tokens", "logp", "beam", "results", "theta_tok", "theta_sent",
    "alpha"};

typedef struct rd {
    const unsigned char *s, *p, *end; /* the line, the cursor, its end */
    ft_jsonl_req *q;
    int fault;   /* a request fault is recorded (or reserved): store no more */
    int nomem;
    char msg[256];  /* the request fault */
    char smsg[256]; /* the syntax error, which wins over msg */
    int syntax;
    int cut;     /* the line was cut at the size cap: end is not its end */
    int seen[F_COUNT];
    size_t T[2], K[2]; /* rows and row 0's length of tokens / logp */
} rd;

typedef struct num {
    const unsigned char *a; /* the literal's text */
    size_t n;
    int is_int;             /* no fraction, no exponent */
} num;

static int is_ws(unsigned c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int is_digit(unsigned c)
{
    return c >= '0' && c <= '9';
}

static int is_alnum(unsigned c)
{
    return is_digit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
}

static void ws(rd *r)
{
    while (r->p < r->end && is_ws(*r->p))
        r->p++;
}

/* fault records the request's first fault; later ones are dropped. */
static void fault(rd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fault(rd *r, const char *fmt, ...)
{
    if (r->fault)
        return;
    r->fault = 1;
    va_list ap;
    va_start(ap, fmt);
    fti_verrf(r->msg, sizeof r->msg, fmt, ap);
    va_end(ap);
}

/* set_msg fills a fault reserved earlier (whose text needs a count known
 * only at the end of an array). */
static void set_msg(rd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_msg(rd *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fti_verrf(r->msg, sizeof r->msg, fmt, ap);
    va_end(ap);
}

/* quote copies up to QUOTE_MAX bytes of [a, a+n) into out for a message:
 * control bytes become '?', a cut never splits a UTF-8 sequence, and "..."
 * marks one. */
static void quote(char *out, const unsigned char *a, size_t n)
{
    size_t m = n;
    if (m > QUOTE_MAX) {
        m = QUOTE_MAX;
        while (m > 0 && (a[m] & 0xc0) == 0x80)
            m--;
    }
    for (size_t i = 0; i < m; i++)
        out[i] = a[i] < 0x20 || a[i] == 0x7f ? '?' : (char)a[i];
    strcpy(out + m, m < n ? "..." : "");
}

/* syn records a syntax error at `at`, quoting the token that starts there
 * (a run of letters, digits and number signs, a string, an escape, or one
 * byte) and
 * the column of its last byte, as jansson did. */
static int syn(rd *r, const unsigned char *at, const char *what)
{
    if (r->syntax)
        return -1;
    r->syntax = 1;
    if (at >= r->end) {
        snprintf(r->smsg, sizeof r->smsg,
                 "json: %s, but the line ends after column %zu", what,
                 (size_t)(r->end - r->s));
        return -1;
    }
    const unsigned char *e = at + 1;
    if (is_alnum(*at) || *at == '-' || *at == '+' || *at == '.') {
        while (e < r->end && (is_alnum(*e) || *e == '-' || *e == '+' ||
                              *e == '.'))
            e++;
    } else if (*at == '\\') { /* an escape: \uXXXX or \c */
        e = at + (at + 1 < r->end && at[1] == 'u' ? 6 : 2);
        if (e > r->end)
            e = r->end;
    } else if (*at == '"') {
        while (e < r->end && *e != '"')
            e += *e == '\\' && e + 1 < r->end ? 2 : 1;
        if (e < r->end)
            e++;
    }
    char tok[QUOTE_MAX * 4 + 8];
    if (e == at + 1 && (*at < 0x20 || *at >= 0x7f))
        snprintf(tok, sizeof tok, "\\x%02x", *at);
    else
        quote(tok, at, (size_t)(e - at));
    snprintf(r->smsg, sizeof r->smsg, "json: %s near '%s' at column %zu",
             what, tok, (size_t)(e - r->s));
    return -1;
}

/* utf8_len is the length of the valid UTF-8 sequence at a[0..n), or 0:
 * no overlong forms, no surrogates, nothing past U+10FFFF. */
static size_t utf8_len(const unsigned char *a, size_t n)
{
    unsigned c = a[0];
    if (c < 0x80)
        return 1;
    size_t len;
    unsigned lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0;
        else if (c == 0xed)
            hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;
    } else
        return 0;
    if (n < len || a[1] < lo || a[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if ((a[i] & 0xc0) != 0x80)
            return 0;
    return len;
}

/* A string's decoded bytes go to a sink: nowhere, a fixed buffer (field
 * names: only their first bytes matter), or the request's id buffer. */
typedef struct sink {
    unsigned char *fix;
    size_t fix_cap;
    ft_jsonl_req *id; /* grow q->id_str */
    size_t len;       /* decoded length, also past fix_cap */
} sink;

static int sink_put(rd *r, sink *k, const unsigned char *b, size_t n)
{
    if (k == NULL)
        return 0;
    if (k->id != NULL) {
        ft_jsonl_req *q = k->id;
        if (k->len + n + 1 > q->id_cap) {
            size_t c = q->id_cap ? q->id_cap : 64;
            while (c < k->len + n + 1)
                c *= 2;
            char *p = realloc(q->id_str, c);
            if (p == NULL) {
                r->nomem = 1;
                return -1;
            }
            q->id_str = p;
            q->id_cap = c;
        }
        memcpy(q->id_str + k->len, b, n);
    } else {
        for (size_t i = 0; i < n && k->len + i < k->fix_cap; i++)
            k->fix[k->len + i] = b[i];
    }
    k->len += n;
    return 0;
}

static int hex4(const unsigned char *a, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = a[i], d;
        if (is_digit(c))
            d = c - '0';
        else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
            d = (c | 0x20) - 'a' + 10;
        else
            return -1;
        v = v << 4 | d;
    }
    *out = v;
    return 0;
}

/* scan_string reads the string at r->p (on its opening quote), checking
 * escapes and UTF-8, and sends its decoded bytes to k. */
static int scan_string(rd *r, sink *k)
{
    r->p++;
    for (;;) {
        const unsigned char *run = r->p;
        while (r->p < r->end && *r->p >= 0x20 && *r->p < 0x80 &&
               *r->p != '"' && *r->p != '\\')
            r->p++;
        if (sink_put(r, k, run, (size_t)(r->p - run)))
            return -1;
        if (r->p >= r->end)
            return syn(r, r->end, "unterminated string");
        unsigned c = *r->p;
        if (c == '"') {
            r->p++;
            return 0;
        }
        if (c < 0x20)
            return syn(r, r->p, "control character in a string");
        if (c >= 0x80) {
            size_t n = utf8_len(r->p, (size_t)(r->end - r->p));
            if (n == 0)
                return syn(r, r->p, "invalid UTF-8 in a string");
            if (sink_put(r, k, r->p, n))
                return -1;
            r->p += n;
            continue;
        }
        /* a backslash */
        const unsigned char *esc = r->p;
        if (r->end - r->p < 2)
            return syn(r, r->end, "unterminated string");
        unsigned char e = r->p[1], out[4];
        size_t on = 1;
        r->p += 2;
        switch (e) {
        case '"': out[0] = '"'; break;
        case '\\': out[0] = '\\'; break;
        case '/': out[0] = '/'; break;
        case 'b': out[0] = '\b'; break;
        case 'f': out[0] = '\f'; break;
        case 'n': out[0] = '\n'; break;
        case 'r': out[0] = '\r'; break;
        case 't': out[0] = '\t'; break;
        case 'u': {
            unsigned u, lo;
            if (r->end - r->p < 4 || hex4(r->p, &u))
                return syn(r, esc, "invalid \\u escape");
            r->p += 4;
            if (u >= 0xdc00 && u <= 0xdfff)
                return syn(r, esc, "lone low surrogate in a \\u escape");
            if (u >= 0xd800 && u <= 0xdbff) {
                if (r->end - r->p < 6 || r->p[0] != '\\' || r->p[1] != 'u' ||
                    hex4(r->p + 2, &lo) || lo < 0xdc00 || lo > 0xdfff)
                    return syn(r, esc, "lone high surrogate in a \\u escape");
                r->p += 6;
                u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
            }
            if (u < 0x80) {
                out[0] = (unsigned char)u;
            } else if (u < 0x800) {
                out[0] = (unsigned char)(0xc0 | u >> 6);
                out[1] = (unsigned char)(0x80 | (u & 0x3f));
                on = 2;
            } else if (u < 0x10000) {
                out[0] = (unsigned char)(0xe0 | u >> 12);
                out[1] = (unsigned char)(0x80 | (u >> 6 & 0x3f));
                out[2] = (unsigned char)(0x80 | (u & 0x3f));
                on = 3;
            } else {
                out[0] = (unsigned char)(0xf0 | u >> 18);
                out[1] = (unsigned char)(0x80 | (u >> 12 & 0x3f));
                out[2] = (unsigned char)(0x80 | (u >> 6 & 0x3f));
                out[3] = (unsigned char)(0x80 | (u & 0x3f));
                on = 4;
            }
            break;
        }
        default:
            return syn(r, esc, "invalid escape");
        }
        if (sink_put(r, k, out, on))
            return -1;
    }
}

/* scan_number reads the number at r->p: -?(0|[1-9][0-9]*)(.[0-9]+)?
 * ([eE][+-]?[0-9]+)?, followed by something that cannot continue it. */
static int scan_number(rd *r, num *out)
{
    const unsigned char *a = r->p, *p = a, *end = r->end;
    out->is_int = 1;
    if (p < end && *p == '-')
        p++;
    if (p >= end || !is_digit(*p))
        return syn(r, a, "invalid number");
    if (*p == '0')
        p++;
    else
        while (p < end && is_digit(*p))
            p++;
    if (p < end && *p == '.') {
        out->is_int = 0;
        p++;
        if (p >= end || !is_digit(*p))
            return syn(r, a, "invalid number");
        while (p < end && is_digit(*p))
            p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        out->is_int = 0;
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        if (p >= end || !is_digit(*p))
            return syn(r, a, "invalid number");
        while (p < end && is_digit(*p))
            p++;
    }
    /* "01", "1.5.2", "2x": the next byte may not glue onto the number */
    if (p < end && (is_alnum(*p) || *p == '.' || *p == '-' || *p == '+'))
        return syn(r, a, "invalid number");
    out->a = a;
    out->n = (size_t)(p - a);
    r->p = p;
    return 0;
}

/* num_long reads a number literal too long to copy as is, as strtod would
 * read it: 0.<digits>e<exponent> with its first NUM_SIG significant digits
 * and a sticky 1 for any non-zero digit after them, the exponent (which can
 * be millions away after leading zeros or a long integer part) clamped
 * where the result is surely infinite or zero. */
static double num_long(const unsigned char *a, size_t n)
{
    size_t i = 0;
    int neg = 0;
    if (a[0] == '-') {
        neg = 1;
        i = 1;
    }
    size_t ib = i;
    while (i < n && is_digit(a[i]))
        i++;
    size_t ie = i, fb = i, fe = i;
    if (i < n && a[i] == '.') {
        fb = ++i;
        while (i < n && is_digit(a[i]))
            i++;
        fe = i;
    }
    long long ex = 0;
    if (i < n && (a[i] == 'e' || a[i] == 'E')) {
        int eneg = 0;
        i++;
        if (a[i] == '+' || a[i] == '-')
            eneg = a[i++] == '-';
        for (; i < n; i++)
            if (ex < 1000000000ll) /* beyond this only inf or 0 remain */
                ex = ex * 10 + (a[i] - '0');
        if (eneg)
            ex = -ex;
    }
    char buf[NUM_SIG + 40];
    size_t o = 0, sig = 0, nint = ie - ib, ndig = nint + (fe - fb);
    long long lead = -1;
    int sticky = 0;
    if (neg)
        buf[o++] = '-';
    buf[o++] = '0';
    buf[o++] = '.';
    for (size_t j = 0; j < ndig; j++) {
        unsigned char d = j < nint ? a[ib + j] : a[fb + (j - nint)];
        if (lead < 0) {
            if (d == '0')
                continue;
            lead = (long long)j;
        }
        if (sig < NUM_SIG) {
            buf[o++] = (char)d;
            sig++;
        } else if (d != '0') {
            sticky = 1;
            break;
        }
    }
    if (lead < 0)
        return neg ? -0.0 : 0.0;
    long long e10 = (long long)nint - lead + ex; /* value = 0.D * 10^e10 */
    if (e10 > 400)
        return neg ? -HUGE_VAL : HUGE_VAL;
    if (e10 < -400)
        return neg ? -0.0 : 0.0;
    if (sticky)
        buf[o++] = '1';
    snprintf(buf + o, sizeof buf - o, "e%lld", e10);
    return strtod(buf, NULL);
}

/* num_fast gives the value of a literal with at most 15 significant
 * digits m and a decimal exponent e with |e| <= 22 as one binary64
 * multiplication or division of two exact operands (m < 2^53, 10^e exact):
 * rounded once, so exactly strtod's result (Clinger's fast path), at a
 * fraction of its cost; model output is mostly such numbers.  0 when the
 * literal does not qualify (or binary64 arithmetic is not evaluated in
 * binary64 on this target). */
static int num_fast(const num *x, double *out)
{
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0
    static const double p10[23] = {
        1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
        1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    const unsigned char *p = x->a, *end = x->a + x->n;
    int neg = 0, nd = 0;
    long e = 0;
    uint64_t m = 0;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    for (; p < end && is_digit(*p); p++)
        if (nd || *p != '0') {
            if (++nd > 15)
                return 0;
            m = m * 10 + (*p - '0');
        }
    if (p < end && *p == '.')
        for (p++; p < end && is_digit(*p); p++) {
            if (nd || *p != '0') {
                if (++nd > 15)
                    return 0;
                m = m * 10 + (*p - '0');
            }
            e--;
        }
    if (p < end) { /* the exponent */
        int eneg = 0;
        long ex = 0;
        p++;
        if (*p == '+' || *p == '-')
            eneg = *p++ == '-';
        for (; p < end; p++)
            if (ex < 100000)
                ex = ex * 10 + (*p - '0');
        e += eneg ? -ex : ex;
    }
    double v;
    if (m == 0)
        v = 0.0;
    else if (e >= 0 && e <= 22)
        v = (double)m * p10[e];
    else if (e < 0 && e >= -22)
        v = (double)m / p10[-e];
    else
        return 0;
    *out = neg ? -v : v;
    return 1;
#else
    (void)x;
    (void)out;
    return 0;
#endif
}

/* num_value is the literal's binary64 value, as strtod reads it. */
static double num_value(const num *x)
{
    double v;
    if (num_fast(x, &v))
        return v;
    if (x->n > NUM_DIRECT)
        return num_long(x->a, x->n);
    char buf[NUM_DIRECT + 1];
    memcpy(buf, x->a, x->n);
    buf[x->n] = 0;
    return strtod(buf, NULL);
}

/* num_u32 reads an integer literal as a u32; -1 when out of range. */
static int num_u32(const num *x, uint32_t *out)
{
    const unsigned char *a = x->a;
    size_t n = x->n;
    if (a[0] == '-') {
        if (n == 2 && a[1] == '0') { /* -0 is the integer 0 */
            *out = 0;
            return 0;
        }
        return -1;
    }
    if (n > 10)
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = v * 10 + (a[i] - '0');
    if (v > 4294967295u)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

static int skip_value(rd *r, int depth);

/* literal_len is the length of the true, false or null at r->p, or 0. */
static size_t literal_len(const rd *r)
{
    const unsigned char *a = r->p, *p = a;
    while (p < r->end && is_alnum(*p))
        p++;
    size_t n = (size_t)(p - a);
    if ((n == 4 && !memcmp(a, "true", 4)) || (n == 5 && !memcmp(a, "false", 5)) ||
        (n == 4 && !memcmp(a, "null", 4)))
        return n;
    return 0;
}

/* literal reads true, false or null; anything else is an invalid token. */
static int literal(rd *r)
{
    size_t n = literal_len(r);
    if (n == 0)
        return syn(r, r->p, "invalid token");
    r->p += n;
    return 0;
}

/* next_elem steps past what follows an element of an array (close ']')
 * or object (close '}'): 1 after a ',' (another element comes), 0 after the
 * closing bracket, -1 with a syntax error for anything else. */
static int next_elem(rd *r, unsigned char close)
{
    ws(r);
    if (r->p < r->end && *r->p == ',') {
        r->p++;
        ws(r);
        return 1;
    }
    if (r->p < r->end && *r->p == close) {
        r->p++;
        return 0;
    }
    return syn(r, r->p, close == ']' ? "',' or ']' expected"
                                     : "',' or '}' expected");
}

/* skip_container checks an array's (close ']') or an object's (close '}')
 * syntax without keeping it: one walk, with a "key": before each member of
 * an object. */
static int skip_container(rd *r, int depth, unsigned char close)
{
    r->p++;
    ws(r);
    if (r->p < r->end && *r->p == close) {
        r->p++;
        return 0;
    }
    for (;;) {
        if (close == '}') {
            if (r->p >= r->end || *r->p != '"')
                return syn(r, r->p, "string expected");
            if (scan_string(r, NULL))
                return -1;
            ws(r);
            if (r->p >= r->end || *r->p != ':')
                return syn(r, r->p, "':' expected");
            r->p++;
            ws(r);
        }
        if (skip_value(r, depth + 1))
            return -1;
        int more = next_elem(r, close);
        if (more <= 0)
            return more;
    }
}

static int skip_value(rd *r, int depth)
{
    if (r->p >= r->end)
        return syn(r, r->p, "a value expected");
    if (depth >= MAX_DEPTH)
        return syn(r, r->p, "nesting too deep");
    unsigned c = *r->p;
    num x;
    if (c == '"')
        return scan_string(r, NULL);
    if (c == '[')
        return skip_container(r, depth, ']');
    if (c == '{')
        return skip_container(r, depth, '}');
    if (c == '-' || is_digit(c))
        return scan_number(r, &x);
    return literal(r);
}

/* value_kind peeks at the next value: 'n'umber, '"', '[', '{' or 'l' for
 * anything else (a literal, or an invalid token skip_value reports). */
static int value_kind(const rd *r)
{
    if (r->p >= r->end)
        return 'l';
    unsigned c = *r->p;
    if (c == '-' || is_digit(c))
        return 'n';
    if (c == '"' || c == '[' || c == '{')
        return (int)c;
    return 'l';
}

/* grow makes room for n elements of both grids, never past a full grid. */
static int grow(rd *r, size_t n)
{
    ft_jsonl_req *q = r->q;
    if (n <= q->cap)
        return 0;
    size_t c = q->cap ? q->cap : 64;
    while (c < n)
        c *= 2;
    if (c > (size_t)FT_MAX_T * FT_MAX_K)
        c = (size_t)FT_MAX_T * FT_MAX_K;
    uint32_t *a = realloc(q->tokens, c * sizeof *a);
    if (a == NULL) {
        r->nomem = 1;
        return -1;
    }
    q->tokens = a;
    float *b = realloc(q->logp, c * sizeof *b);
    if (b == NULL) {
        r->nomem = 1;
        return -1;
    }
    q->logp = b;
    q->cap = c;
    return 0;
}

/* read_cell reads tokens[t][k] (g = 0) or logp[t][k] (g = 1) and stores it
 * at element i when store is set. */
static int read_cell(rd *r, int g, size_t t, size_t k, int store, size_t i)
{
    int kind = value_kind(r);
    if (kind != 'n') {
        if (g == 0)
            fault(r, "tokens: position %zu, proposal %zu: not an integer", t, k);
        else
            fault(r, "logp: position %zu, proposal %zu: not a number", t, k);
        return skip_value(r, 2);
    }
    num x;
    if (scan_number(r, &x))
        return -1;
    if (r->fault)
        return 0;
    if (g == 0) {
        uint32_t v;
        if (!x.is_int) {
            fault(r, "tokens: position %zu, proposal %zu: not an integer", t, k);
        } else if (num_u32(&x, &v)) {
            char lit[QUOTE_MAX + 4];
            quote(lit, x.a, x.n);
            fault(r, "tokens: position %zu, proposal %zu: %s is not in "
                  "0..4294967295", t, k, lit);
        } else if (store) {
            if (grow(r, i + 1))
                return -1;
            r->q->tokens[i] = v;
        }
    } else {
        float f = (float)num_value(&x); /* binary64, then binary32 */
        if (!isfinite(f)) {
            fault(r, "logp: position %zu, proposal %zu: not finite", t, k);
        } else if (store) {
            if (grow(r, i + 1))
                return -1;
            r->q->logp[i] = f;
        }
    }
    return 0;
}

/* read_grid reads tokens or logp: an array of at most FT_MAX_T rows of
 * equal length, at most FT_MAX_K each.  Past a bound it stops storing
 * (the fault is reserved then) and only counts, so that the message can
 * give the whole count. */
static int read_grid(rd *r, int g)
{
    const char *name = g ? "logp" : "tokens";
    if (value_kind(r) != '[') {
        fault(r, "%s: must be an array of arrays", name);
        return skip_value(r, 1);
    }
    r->p++;
    ws(r);
    size_t t = 0, K0 = 0;
    int over_t = 0;
    if (r->p < r->end && *r->p == ']') {
        r->p++;
        r->T[g] = r->K[g] = 0;
        return 0;
    }
    for (;; t++) {
        if (t == FT_MAX_T && !r->fault)
            over_t = r->fault = 1;
        if (value_kind(r) != '[') {
            fault(r, "%s: position %zu: must be an array", name, t);
            if (skip_value(r, 2))
                return -1;
        } else {
            r->p++;
            ws(r);
            size_t k = 0;
            int over_k = 0, ragged = 0;
            if (r->p < r->end && *r->p == ']') {
                r->p++;
            } else {
                for (;; k++) {
                    if (!r->fault && ((t == 0 && k == FT_MAX_K) ||
                                      (t > 0 && k == K0))) {
                        r->fault = 1;
                        if (t == 0)
                            over_k = 1;
                        else
                            ragged = 1;
                    }
                    int store = !r->fault;
                    if (read_cell(r, g, t, k, store, t * K0 + k))
                        return -1;
                    int more = next_elem(r, ']');
                    if (more < 0)
                        return -1;
                    if (more == 0) {
                        k++;
                        break;
                    }
                }
            }
            if (over_k)
                set_msg(r, "%s: each position must have 1..%u proposals, "
                        "got %zu", name, FT_MAX_K, k);
            if (t == 0)
                K0 = k;
            else if (ragged)
                set_msg(r, "%s: position %zu has %zu proposals, position 0 "
                        "has %zu", name, t, k, K0);
            else if (k < K0)
                fault(r, "%s: position %zu has %zu proposals, position 0 has "
                      "%zu", name, t, k, K0);
        }
        int more = next_elem(r, ']');
        if (more < 0)
            return -1;
        if (more == 0) {
            t++;
            break;
        }
    }
    if (over_t)
        set_msg(r, "%s: the grid must have 1..%u positions, got %zu", name,
                FT_MAX_T, t);
    r->T[g] = t;
    r->K[g] = K0;
    return 0;
}

/* read_count reads beam or results: a JSON integer in 1..max. */
static int read_count(rd *r, const char *name, uint32_t max, uint32_t *out)
{
    num x;
    if (value_kind(r) != 'n') {
        fault(r, "%s: must be an integer", name);
        return skip_value(r, 1);
    }
    if (scan_number(r, &x))
        return -1;
    uint32_t v;
    if (!x.is_int) {
        fault(r, "%s: must be an integer", name);
    } else if (num_u32(&x, &v) || v < 1 || v > max) {
        char lit[QUOTE_MAX + 4];
        quote(lit, x.a, x.n);
        fault(r, "%s: must be 1..%u, got %s", name, max, lit);
    } else {
        *out = v;
    }
    return 0;
}

/* read_real reads theta_tok, theta_sent (f32 set) or alpha (f64 set). */
static int read_real(rd *r, const char *name, float *f32, double *f64)
{
    num x;
    if (value_kind(r) != 'n') {
        fault(r, "%s: must be a number", name);
        return skip_value(r, 1);
    }
    if (scan_number(r, &x))
        return -1;
    double d = num_value(&x);
    if (f32)
        *f32 = (float)d; /* binary64, then binary32 */
    else
        *f64 = d;
    return 0;
}

/* read_id reads the id whatever faults came before, to echo it. */
static int read_id(rd *r)
{
    ft_jsonl_req *q = r->q;
    int kind = value_kind(r);
    if (kind == '"') {
        sink k = {NULL, 0, q, 0};
        if (scan_string(r, &k))
            return -1;
        if (sink_put(r, &k, (const unsigned char *)"", 1))
            return -1;
        q->id_len = k.len - 1;
        q->id_is_str = 1;
        q->has_id = 1;
        return 0;
    }
    if (kind != 'n') {
        fault(r, "id: must be a string or an integer");
        return skip_value(r, 1);
    }
    num x;
    if (scan_number(r, &x))
        return -1;
    if (!x.is_int) {
        fault(r, "id: must be a string or an integer");
        return 0;
    }
    if (r->cut && r->p == r->end) /* its digits may go on past the cut */
        return syn(r, r->end, "cut");
    sink k = {NULL, 0, q, 0};
    if (sink_put(r, &k, x.a, x.n) || sink_put(r, &k, (const unsigned char *)"", 1))
        return -1;
    q->id_len = x.n;
    q->id_is_str = 0;
    q->has_id = 1;
    /* id_int for callers that want the value; the text is what is echoed */
    int neg = x.a[0] == '-';
    unsigned long long v = 0, lim = neg ? 9223372036854775808ull
                                        : 9223372036854775807ull;
    q->id_int_ok = 1;
    for (size_t i = neg; i < x.n && q->id_int_ok; i++) {
        unsigned d = x.a[i] - '0';
        if (v > (lim - d) / 10)
            q->id_int_ok = 0;
        else
            v = v * 10 + d;
    }
    q->id_int = !q->id_int_ok ? 0
                : neg ? (v ? -(long long)(v - 1) - 1 : 0)
                      : (long long)v;
    return 0;
}

/* read_request reads the top-level object. */
static int read_request(rd *r)
{
    if (r->p >= r->end || *r->p != '{') {
        /* jansson's words, which the tests and users already know */
        if (value_kind(r) == 'l' && literal_len(r) == 0)
            return syn(r, r->p, "'[' or '{' expected");
        if (skip_value(r, 0))
            return -1;
        ws(r);
        if (r->p < r->end)
            return syn(r, r->p, "end of file expected");
        fault(r, "json: a request must be an object");
        return 0;
    }
    r->p++;
    ws(r);
    if (r->p < r->end && *r->p == '}') {
        r->p++;
    } else {
        for (;;) {
            if (r->p >= r->end || *r->p != '"')
                return syn(r, r->p, "string or '}' expected");
            unsigned char name[QUOTE_MAX + 1];
            sink k = {name, sizeof name, NULL, 0};
            if (scan_string(r, &k))
                return -1;
            ws(r);
            if (r->p >= r->end || *r->p != ':')
                return syn(r, r->p, "':' expected");
            r->p++;
            ws(r);
            int f = 0;
            while (f < F_COUNT && !(strlen(field_names[f]) == k.len &&
                                    !memcmp(field_names[f], name, k.len)))
                f++;
            int rc;
            if (f == F_COUNT) {
                char shown[QUOTE_MAX * 2];
                /* a name longer than QUOTE_MAX bytes is cut with "..." */
                quote(shown, name, k.len < sizeof name ? k.len : sizeof name);
                fault(r, "%s: unknown field", shown);
                rc = skip_value(r, 1);
            } else if (r->seen[f]++) {
                fault(r, "%s: given twice", field_names[f]);
                rc = skip_value(r, 1);
            } else {
                ft_request *req = &r->q->req;
                switch (f) {
                case F_ID: rc = read_id(r); break;
                case F_TOKENS: rc = read_grid(r, 0); break;
                case F_LOGP: rc = read_grid(r, 1); break;
                case F_BEAM:
                    rc = read_count(r, "beam", FT_MAX_BEAM, &req->beam);
                    break;
                case F_RESULTS:
                    rc = read_count(r, "results", FT_MAX_RESULTS, &req->results);
                    break;
                case F_THETA_TOK:
                    rc = read_real(r, "theta_tok", &req->theta_tok, NULL);
                    break;
                case F_THETA_SENT:
                    rc = read_real(r, "theta_sent", &req->theta_sent, NULL);
                    break;
                default: rc = read_real(r, "alpha", NULL, &req->alpha); break;
                }
            }
            if (rc)
                return -1;
            int more = next_elem(r, '}');
            if (more < 0)
                return -1;
            if (more == 0)
                break;
        }
    }
    ws(r);
    if (r->p < r->end)
        return syn(r, r->p, "end of file expected");
    return 0;
}

int ft_jsonl_parse(ft_jsonl_req *q, const char *line, size_t len,
                   char *errbuf, size_t errlen)
{
    rd r;
    memset(&r, 0, sizeof r);
    if (line == NULL) /* no bytes: do no arithmetic on a null pointer */
        line = "";
    r.s = r.p = (const unsigned char *)line;
    r.end = r.s + len;
    r.q = q;
    q->has_id = 0;
    q->id_is_str = 0;
    q->id_int_ok = 0;
    q->id_int = 0;
    q->id_len = 0;
    ft_request_init(&q->req);
    size_t max = q->max_line ? q->max_line : FT_JSONL_MAX_LINE_DEFAULT;
    size_t n = len; /* the line without its terminator */
    if (n > 0 && line[n - 1] == '\n')
        n--;
    if (n > 0 && line[n - 1] == '\r')
        n--;
    if (n > max) {
        /* Too long to parse; its first max bytes may still hold the id. */
        fault(&r, "json: line longer than %zu bytes", max);
        r.end = r.s + max;
        r.cut = 1;
        ws(&r);
        read_request(&r);
        r.syntax = 0;
    } else {
        ws(&r);
        if (r.p == r.end) {
            RT_ERRF(errbuf, errlen, "json: empty line");
            return FT_EREQUEST;
        }
        if (read_request(&r) == 0 && !r.fault) {
            if (!r.seen[F_TOKENS])
                fault(&r, "tokens: missing");
            else if (!r.seen[F_LOGP])
                fault(&r, "logp: missing");
            else if (r.T[0] != r.T[1] || r.K[0] != r.K[1])
                fault(&r, "logp: shape %zux%zu does not match tokens %zux%zu",
                      r.T[1], r.K[1], r.T[0], r.K[0]);
        }
    }
    if (r.nomem) {
        RT_ERRF(errbuf, errlen, "request: out of memory");
        return FT_ENOMEM;
    }
    if (r.syntax || r.fault) {
        RT_ERRF(errbuf, errlen, "%s", r.syntax ? r.smsg : r.msg);
        return FT_EREQUEST;
    }
    q->req.T = (uint32_t)r.T[0];
    q->req.K = (uint32_t)r.K[0];
    q->req.tokens = q->tokens;
    q->req.logp = q->logp;
    return FT_OK;
}

/* ---- encoding ---- */

/* put_str appends s as a JSON string: quotes, backslashes and control
 * characters escaped, valid UTF-8 as is, any other byte as U+FFFD. */
static int put_str(ft_buf *b, const char *s, size_t n)
{
    const unsigned char *a = (const unsigned char *)s;
    int rc = ft_buf_append(b, "\"", 1);
    size_t i = 0;
    while (rc == FT_OK && i < n) {
        size_t run = i;
        while (run < n && a[run] >= 0x20 && a[run] < 0x7f && a[run] != '"' &&
               a[run] != '\\')
            run++;
        if (run > i) {
            rc = ft_buf_append(b, a + i, run - i);
            i = run;
            continue;
        }
        unsigned c = a[i];
        size_t u8 = c >= 0x80 ? utf8_len(a + i, n - i) : 0;
        char esc[8];
        switch (c) {
        case '"': rc = ft_buf_append(b, "\\\"", 2); break;
        case '\\': rc = ft_buf_append(b, "\\\\", 2); break;
        case '\n': rc = ft_buf_append(b, "\\n", 2); break;
        case '\r': rc = ft_buf_append(b, "\\r", 2); break;
        case '\t': rc = ft_buf_append(b, "\\t", 2); break;
        case '\b': rc = ft_buf_append(b, "\\b", 2); break;
        case '\f': rc = ft_buf_append(b, "\\f", 2); break;
        default:
            if (u8 > 0) {
                rc = ft_buf_append(b, a + i, u8);
                i += u8 - 1;
            } else if (c >= 0x80) {
                rc = ft_buf_append(b, "\\ufffd", 6);
            } else {
                snprintf(esc, sizeof esc, "\\u%04x", c);
                rc = ft_buf_append(b, esc, 6);
            }
        }
        i++;
    }
    if (rc == FT_OK)
        rc = ft_buf_append(b, "\"", 1);
    return rc;
}

static int put_id(ft_buf *b, const ft_jsonl_req *q)
{
    if (q == NULL || !q->has_id)
        return FT_OK;
    int rc = ft_buf_append(b, "\"id\": ", 6);
    if (rc == FT_OK && q->id_is_str)
        rc = put_str(b, q->id_str, q->id_len);
    else if (rc == FT_OK && q->id_len > 0)
        rc = ft_buf_append(b, q->id_str, q->id_len); /* as written */
    else if (rc == FT_OK)
        rc = ft_buf_printf(b, "%lld", q->id_int); /* built by hand */
    if (rc == FT_OK)
        rc = ft_buf_append(b, ", ", 2);
    return rc;
}

/* put_u64 appends v in decimal. */
static int put_u64(ft_buf *b, uint64_t v)
{
    char d[24];
    size_t i = sizeof d;
    do {
        d[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return ft_buf_append(b, d + i, sizeof d - i);
}

/* put_real appends x so that strtod gives back the same bits: 17
 * significant digits for a binary64, 9 for a binary32; infinities as
 * 1e999 / -1e999, which strtod reads as +-inf; NaN (no engine gives one)
 * as null, JSON having no NaN. */
static int put_real(ft_buf *b, double x, int digits)
{
    if (isnan(x))
        return ft_buf_append(b, "null", 4);
    if (isinf(x))
        return x > 0 ? ft_buf_append(b, "1e999", 5)
                     : ft_buf_append(b, "-1e999", 6);
    char d[40];
    int n = snprintf(d, sizeof d, "%.*g", digits, x);
    return ft_buf_append(b, d, (size_t)n);
}

/* undo drops a partial line after a failed append. */
static int undo(ft_buf *out, size_t len0)
{
    out->len = len0;
    if (out->data != NULL)
        out->data[len0] = 0;
    return FT_ENOMEM;
}

int ft_jsonl_encode_error(ft_buf *out, const ft_jsonl_req *q, const char *error)
{
    size_t len0 = out->len;
    if (ft_buf_append(out, "{", 1) || put_id(out, q) ||
        ft_buf_append(out, "\"error\": ", 9) ||
        put_str(out, error, strlen(error)) || ft_buf_append(out, "}\n", 2))
        return undo(out, len0);
    return FT_OK;
}

int ft_jsonl_encode_result(ft_buf *out, const ft_jsonl_req *q,
                           const ft_result *res)
{
    if (res->status != FT_OK)
        return ft_jsonl_encode_error(
            out, q, res->error[0] ? res->error : ft_strerror(res->status));
    size_t len0 = out->len;
    if (ft_buf_append(out, "{", 1) || put_id(out, q) ||
        ft_buf_append(out, "\"results\": [", 12))
        return undo(out, len0);
    for (uint32_t i = 0; i < res->n; i++) {
        const ft_hit *h = &res->hits[i];
        if (ft_buf_append(out, i ? ", {\"tokens\": [" : "{\"tokens\": [",
                          i ? 14 : 12))
            return undo(out, len0);
        for (uint32_t j = 0; j < h->len; j++)
            if ((j && ft_buf_append(out, ", ", 2)) ||
                put_u64(out, res->tokens[h->tok_off + j]))
                return undo(out, len0);
        if (ft_buf_append(out, "], \"value\": ", 12) ||
            put_u64(out, h->value) ||
            ft_buf_append(out, ", \"score\": ", 11) ||
            put_real(out, h->score, 17) ||
            ft_buf_append(out, ", \"sigma\": ", 11) ||
            put_real(out, (double)h->sigma, 9) || ft_buf_append(out, "}", 1))
            return undo(out, len0);
    }
    if (ft_buf_append(out, "]}\n", 3))
        return undo(out, len0);
    return FT_OK;
}

/* ---- FILE * wrappers ---- */

/* write_line writes what one encoder call appended. */
static int write_line(FILE *f, ft_buf *b, int rc)
{
    if (rc == FT_OK && fwrite(b->data, 1, b->len, f) != b->len)
        rc = FT_EIO;
    ft_buf_free(b);
    return rc;
}

int ft_jsonl_write_result(FILE *f, const ft_jsonl_req *q, const ft_result *res)
{
    ft_buf b;
    ft_buf_init(&b);
    return write_line(f, &b, ft_jsonl_encode_result(&b, q, res));
}

int ft_jsonl_write_error(FILE *f, const ft_jsonl_req *q, const char *error)
{
    ft_buf b;
    ft_buf_init(&b);
    return write_line(f, &b, ft_jsonl_encode_error(&b, q, error));
}
