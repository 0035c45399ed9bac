/*
 * jsonl.h - the JSON Lines codec of docs/specification.md section 7: one
 * request per input line, one result (or error) line per request.  The CLI, the
 * server and the client share it; it reads and writes byte buffers, never a
 * FILE *.
 *
 * Choices docs/specification.md leaves open (docs/search-cli.md repeats them):
 *  - "id" is optional: a JSON string, or a JSON integer of any length
 *    (the line's cap bounds it) and any value; an integer id is echoed
 *    back exactly as written (its digits kept, "-0" stays "-0").  It is echoed first in the answer line, also
 *    in error lines whenever it could be read (a later fault, even a JSON
 *    syntax error after it, does not lose it); left out when absent.
 *  - Errors read "<field>: <reason>", grid faults with their position;
 *    syntax errors are "json: <reason> near '<text>' at column <n>" (n
 *    counts bytes from 1), an empty or blank line is "json: empty line", a
 *    line over the size cap "json: line longer than <cap> bytes".
 *  - When a line has several faults, a JSON syntax error wins; otherwise
 *    the first fault in reading order (left to right) is reported, and the
 *    checks that need the whole line (missing fields, shapes of tokens and
 *    logp that differ) come last.
 *  - theta_tok / theta_sent may be (or round to) -inf or +inf as binary32
 *    (docs/specification.md section 3 forbids only NaN, which JSON cannot
 *    write); logp may not.  Numbers of any length read as strtod reads them.
 *  - Range rules shared with ft_request_validate (T, K, beam, results) give
 *    the validator's exact strings; the parser does not run the validator
 *    (duplicate tokens, alpha's range and the server's beam cap are its).
 *  - An infinite score or sigma (possible only with huge positive log-probs)
 *    is printed as 1e999 / -1e999, which strtod reads back as +-inf.
 */
#ifndef FT_JSONL_H
#define FT_JSONL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "flashtrie/internal/buf.h"
#include "flashtrie.h"

/* FT_JSONL_MAX_LINE_DEFAULT is the default line-size cap: 64 MiB holds a
 * full 64 x 4096 grid written with 17 significant digits many times over. */
#define FT_JSONL_MAX_LINE_DEFAULT ((size_t)64 << 20)

/* ft_jsonl_req is one parsed request line.  The parser owns the grid and id
 * buffers and reuses them for the next line: init once, parse many.  The
 * grid buffers never grow past FT_MAX_T * FT_MAX_K elements, whatever the
 * line holds. */
typedef struct ft_jsonl_req {
    ft_request req;   /* points into tokens / logp below */
    uint32_t *tokens;
    float *logp;
    size_t cap;       /* elements of tokens and logp */
    /* max_line is the line-size cap in bytes (a trailing "\n" or "\r\n"
     * not counted); init sets FT_JSONL_MAX_LINE_DEFAULT, 0 means the same.
     * A longer line is rejected without being parsed; only an "id" in its
     * first max_line bytes is still read, to be echoed. */
    size_t max_line;
    int has_id;
    int id_is_str;    /* 1: a string id, 0: an integer id */
    /* id_str holds a string id's bytes (UTF-8, may hold NUL: use id_len)
     * or an integer id's text as written; NUL-terminated either way.  A
     * request built by hand (not parsed) may give an integer id by
     * id_int alone, with id_len 0: the encoders then print id_int. */
    char *id_str;
    size_t id_len, id_cap;
    int id_int_ok;    /* an integer id that fits int64: its value below */
    long long id_int;
} ft_jsonl_req;

void ft_jsonl_req_init(ft_jsonl_req *q);
void ft_jsonl_req_free(ft_jsonl_req *q);

/* ft_jsonl_parse parses one request line: exactly len bytes, which need no
 * NUL and no newline (a trailing newline is allowed); it never reads past
 * line + len.  On a bad line it returns FT_EREQUEST with "<field>:
 * <reason>" in errbuf (field "json" for syntax errors); q->has_id then
 * tells whether an id could still be read, to echo it in the error line.
 * FT_ENOMEM when out of memory ("request: out of memory"). */
int ft_jsonl_parse(ft_jsonl_req *q, const char *line, size_t len,
                   char *errbuf, size_t errlen);

/* ft_jsonl_encode_result appends the answer line (with '\n') for a request
 * to out: the hits of res when res->status is FT_OK, else {"error":
 * res->error}.  q may be NULL (no id).  FT_ENOMEM when out of memory; out
 * is then as it was before the call (no partial line). */
int ft_jsonl_encode_result(ft_buf *out, const ft_jsonl_req *q,
                           const ft_result *res);

/* ft_jsonl_encode_error appends {"id": ..., "error": "<error>"} and '\n'
 * (the id only when q has one).  Bytes of error that are not UTF-8 are
 * written as U+FFFD, so the line is always valid JSON.  FT_ENOMEM as
 * above. */
int ft_jsonl_encode_error(ft_buf *out, const ft_jsonl_req *q,
                          const char *error);

/* ft_jsonl_write_result and ft_jsonl_write_error are the encoders above
 * written straight to a stream, for tools that write files (the MARISA
 * baseline in ops/bench); FT_EIO when the stream fails, FT_ENOMEM. */
int ft_jsonl_write_result(FILE *f, const ft_jsonl_req *q, const ft_result *res);
int ft_jsonl_write_error(FILE *f, const ft_jsonl_req *q, const char *error);

#endif /* FT_JSONL_H */
