/*
 * result.c - result buffers (ft_result) and the assembly of engine hits.
 */
#include "search.h"

int ft_result_alloc(ft_result *res, uint32_t max_hits, uint32_t max_len)
{
    if (res == NULL)
        return FT_EINVAL;
    memset(res, 0, sizeof *res);
    if (max_hits == 0)
        max_hits = 1;
    if (max_len == 0)
        max_len = FT_MAX_T;
    /* cap_tokens is a uint32_t: a product past it would wrap to a
     * capacity that is not the buffer's. */
    if ((uint64_t)max_hits * max_len > UINT32_MAX) {
        snprintf(res->error, sizeof res->error,
                 "result: %u hits of %u tokens exceed %u token slots",
                 max_hits, max_len, UINT32_MAX);
        res->status = FT_ELIMIT;
        return FT_ELIMIT;
    }
    res->hits = calloc(max_hits, sizeof *res->hits);
    res->tokens = calloc((size_t)max_hits * max_len, sizeof *res->tokens);
    if (res->hits == NULL || res->tokens == NULL) {
        ft_result_free(res);
        return FT_ENOMEM;
    }
    res->cap_hits = max_hits;
    res->cap_tokens = max_hits * max_len;
    return FT_OK;
}

void ft_result_free(ft_result *res)
{
    if (res == NULL)
        return;
    free(res->hits);
    free(res->tokens);
    memset(res, 0, sizeof *res);
}

int fti_result_put(ft_result *res, uint64_t key_index, uint32_t order,
                   double score, float sigma, const uint32_t *toks,
                   uint32_t len)
{
    uint32_t off = res->n ? res->hits[res->n - 1].tok_off +
                                res->hits[res->n - 1].len
                          : 0;
    if (res->n >= res->cap_hits || len > res->cap_tokens ||
        off > res->cap_tokens - len)
        return FT_ELIMIT;
    ft_hit *h = &res->hits[res->n++];
    h->len = len;
    h->tok_off = off;
    h->value = 0;
    h->score = score;
    h->sigma = sigma;
    h->order = order;
    h->key_index = key_index;
    memcpy(res->tokens + off, toks, len * sizeof *toks);
    return FT_OK;
}

void fti_result_fail(ft_result *res, int status, const char *msg)
{
    res->n = 0;
    res->status = status;
    snprintf(res->error, sizeof res->error, "%s", msg);
}
