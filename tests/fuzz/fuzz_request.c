/*
 * fuzz_request.c - a request line through the docs/specification.md section 7
 * parser, the validator and, when accepted, the CPU engine over a small
 * built-in index with prefix keys and tokens on both sides of 2^16: whatever
 * the bytes, nothing may crash, hang or read out of bounds, and an accepted
 * request must give a result that fits its buffers.  The input is copied to a
 * buffer of exactly its size (no NUL after it), so that a sanitizer build
 * catches any read past the length; every answer line (result or error)
 * must be one line of valid JSON, an object, with the id echoed.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flashtrie/internal/buf.h"
#include "flashtrie.h"
#include "fuzz.h"
#include "jsonl.h"
#include "trie.h"

static ft_index *g_idx;
static ft_engine *g_eng;
static ft_jsonl_req g_q;
static ft_result g_res;
static ft_buf g_out;

static void setup(void)
{
    static const uint32_t keys[][4] = {
        {1, 0, 0, 0}, {1, 2, 0, 0}, {1, 2, 3, 0}, {1, 70000, 0, 0},
        {5, 6, 7, 8}, {70000, 1, 0, 0}, {4294967295u, 0, 0, 0}};
    static const uint32_t lens[] = {1, 2, 3, 2, 4, 2, 1};
    ft_tb *tb;
    ft_trie t;
    char path[] = "/tmp/ft_fuzz_req_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0 || ft_tb_create(&tb) != FT_OK)
        abort();
    close(fd);
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
        if (ft_tb_add(tb, keys[i], lens[i], i * 10) != FT_OK)
            abort();
    if (ft_tb_finish(tb, 64, &t) != FT_OK ||
        ft_trie_write(&t, path, NULL, 0) != FT_OK)
        abort();
    ft_tb_destroy(tb);
    ft_trie_free(&t);
    if (ft_index_open(&g_idx, path, 0, NULL, 0) != FT_OK)
        abort();
    unlink(path);
    ft_engine_opts o;
    ft_engine_opts_init(&o);
    o.threads = 1;
    if (ft_engine_open(&g_eng, g_idx, &o, NULL, 0) != FT_OK)
        abort();
    ft_jsonl_req_init(&g_q);
    /* a small cap, so that mutations reach the over-long-line path */
    g_q.max_line = 4096;
    ft_buf_init(&g_out);
    if (ft_result_alloc(&g_res, FT_MAX_RESULTS, FT_MAX_T) != FT_OK)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (g_eng == NULL)
        setup();
    char err[256] = "";
    char *line = malloc(size ? size : 1);
    if (line == NULL)
        abort();
    if (size)
        memcpy(line, data, size);
    int rc = ft_jsonl_parse(&g_q, line, size, err, sizeof err);
    free(line);
    g_out.len = 0;
    if (rc != FT_OK) {
        if (rc != FT_EREQUEST || err[0] == 0)
            abort();
        if (ft_jsonl_encode_error(&g_out, &g_q, err) != FT_OK)
            abort();
    } else {
        rc = ft_engine_search(g_eng, &g_q.req, &g_res);
        if (rc != FT_OK && rc != FT_EREQUEST)
            abort();
        if (rc == FT_OK) {
            uint32_t nres = g_q.req.results ? g_q.req.results : g_q.req.beam;
            if (g_res.n > nres)
                abort();
            for (uint32_t i = 1; i < g_res.n; i++)
                if (g_res.hits[i].score > g_res.hits[i - 1].score)
                    abort();
        }
        if (ft_jsonl_encode_result(&g_out, &g_q, &g_res) != FT_OK)
            abort();
    }
    /* exactly one line, and JSON: an object whose id is the request's */
    if (g_out.len == 0 || g_out.data[g_out.len - 1] != '\n' ||
        memchr(g_out.data, '\n', g_out.len) != g_out.data + g_out.len - 1)
        abort();
    json_error_t je;
    json_t *o = json_loadb((const char *)g_out.data, g_out.len,
                           JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL |
                               JSON_ALLOW_NUL, &je);
    if (!json_is_object(o))
        abort();
    json_t *id = json_object_get(o, "id");
    if ((id != NULL) != (g_q.has_id != 0))
        abort();
    if (id != NULL && g_q.id_is_str &&
        (json_string_length(id) != g_q.id_len ||
         memcmp(json_string_value(id), g_q.id_str, g_q.id_len) != 0))
        abort();
    json_decref(o);
    return 0;
}
