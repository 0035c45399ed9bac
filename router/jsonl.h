/*
 * jsonl.h - the JSON Lines codec of SPEC section 7: one request per input
 * line, one result (or error) line per request.
 *
 * Choices SPEC leaves open (docs/cli.md repeats them):
 *  - Unknown fields are rejected: "<name>: unknown field".
 *  - "id" is optional; a string or a JSON integer (int64 range); it is
 *    echoed back first in the answer line, and left out when absent.
 *  - theta_tok / theta_sent may round to -inf or +inf as binary32 (only
 *    NaN is invalid for them in SPEC section 3); logp may not.
 *  - Grid bounds (T, K) and value ranges are checked by ft_request_validate,
 *    so the parser and the engines report the same strings.
 *  - An infinite score or sigma (possible only with huge positive log-probs)
 *    is printed as 1e999 / -1e999, which strtod reads back as +-inf.
 *  - Integer literals beyond int64 are JSON syntax errors for the parser
 *    underneath (jansson): "json: too big integer ...".
 */
#ifndef FT_JSONL_H
#define FT_JSONL_H

#include <stdio.h>

#include "flashtrie.h"

/* ft_jsonl_req is one parsed request line.  The parser owns the grid and id
 * buffers and reuses them for the next line: init once, parse many. */
typedef struct ft_jsonl_req {
    ft_request req;   /* points into tokens / logp below */
    uint32_t *tokens;
    float *logp;
    size_t cap;       /* elements of tokens and logp */
    int has_id;
    int id_is_str;
    long long id_int;
    char *id_str;     /* NUL-terminated; may hold \u0000-free UTF-8 */
    size_t id_len, id_cap;
} ft_jsonl_req;

void ft_jsonl_req_init(ft_jsonl_req *q);
void ft_jsonl_req_free(ft_jsonl_req *q);

/* ft_jsonl_parse parses one request line (len bytes, no newline needed).
 * On a bad line it returns FT_EREQUEST with "<field>: <reason>" in errbuf
 * (field "json" for syntax errors); q->has_id then tells whether an id
 * could still be read, to echo it in the error line.  FT_ENOMEM when out
 * of memory. */
int ft_jsonl_parse(ft_jsonl_req *q, const char *line, size_t len,
                   char *errbuf, size_t errlen);

/* ft_jsonl_write_result writes the answer line (with '\n') for a request:
 * the hits of res when res->status is FT_OK, else {"error": res->error}.
 * q may be NULL (no id).  Returns FT_EIO when the stream fails. */
int ft_jsonl_write_result(FILE *f, const ft_jsonl_req *q, const ft_result *res);

/* ft_jsonl_write_error writes {"id": ..., "error": "<error>"} and '\n'. */
int ft_jsonl_write_error(FILE *f, const ft_jsonl_req *q, const char *error);

#endif /* FT_JSONL_H */
