/*
 * frame.c - the binary wire protocol of frame.h (docs/protocol.md draws the
 * bytes).  Decoders walk the input with a bounds-checked reader and copy
 * what they keep into storage of the ft_frame_msg; encoders append to an
 * ft_buf and roll it back when they fail.
 */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "flashtrie/internal/bits.h"
#include "frame.h"
#include "rt_impl.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define FRAME_LE 1 /* wire order is host order: bulk arrays are memcpy'd */
#else
#define FRAME_LE 0
#endif

/* ---- little-endian loads and stores ------------------------------------ */

static uint16_t ld16(const unsigned char *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t ld32(const unsigned char *p)
{
#if FRAME_LE
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
#else
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
#endif
}

static uint64_t ld64(const unsigned char *p)
{
    return (uint64_t)ld32(p) | (uint64_t)ld32(p + 4) << 32;
}

static void st16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

/* On a little-endian host the wire order is the host's: one unaligned
 * store (the hits of a RESULT are written word by word). */
static void st32(unsigned char *p, uint32_t v)
{
#if FRAME_LE
    memcpy(p, &v, 4);
#else
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
#endif
}

static void st64(unsigned char *p, uint64_t v)
{
#if FRAME_LE
    memcpy(p, &v, 8);
#else
    st32(p, (uint32_t)v);
    st32(p + 4, (uint32_t)(v >> 32));
#endif
}

/* load32s copies n little-endian 32-bit words (u32 or f32 bits) from the
 * unaligned input into aligned storage. */
static void load32s(void *dst, const unsigned char *src, size_t n)
{
#if FRAME_LE
    memcpy(dst, src, n * 4);
#else
    uint32_t *d = dst;
    for (size_t i = 0; i < n; i++)
        d[i] = ld32(src + 4 * i);
#endif
}

/* copy_key copies a key's n <= FT_MAX_KEY_LEN_LIMIT tokens from the
 * frame.  A memcpy of n * 4 bytes, n known to be small, is expanded by
 * GCC into `rep movsq`, whose start-up cost dwarfs a key of a few tokens
 * (on the 2-core box's EPYC, most of a 1000-hit RESULT's decode): word
 * moves instead, in blocks of four, which the compiler must not turn back
 * into a memcpy. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-loop-distribute-patterns")))
#endif
static void copy_key(uint32_t *d, const unsigned char *s, uint32_t n)
{
    uint32_t k = 0;
#if FRAME_LE
    for (; k + 4 <= n; k += 4)
        memcpy(d + k, s + 4 * k, 16);
#endif
    for (; k < n; k++)
        d[k] = ld32(s + 4 * k);
}

/* ---- errors ------------------------------------------------------------ */

/* fail writes "<what> at byte <off>" and returns code. */
static int fail(int code, char *errbuf, size_t errlen, size_t off,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int fail(int code, char *errbuf, size_t errlen, size_t off,
                const char *fmt, ...)
{
    if (errbuf != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(errbuf, errlen, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < errlen)
            snprintf(errbuf + n, errlen - (size_t)n, " at byte %zu", off);
    }
    return code;
}

/* ---- types ------------------------------------------------------------- */

const char *ft_frame_type_name(uint16_t type)
{
    switch (type) {
    case FT_FRAME_SEARCH: return "SEARCH";
    case FT_FRAME_INFO: return "INFO";
    case FT_FRAME_PING: return "PING";
    case FT_FRAME_RELOAD: return "RELOAD";
    case FT_FRAME_ERROR: return "ERROR";
    case FT_FRAME_RESULT: return "RESULT";
    case FT_FRAME_INFO_REPLY: return "INFO_REPLY";
    case FT_FRAME_PONG: return "PONG";
    case FT_FRAME_RELOAD_REPLY: return "RELOAD_REPLY";
    default: return "unknown";
    }
}

int ft_frame_is_binary(const void *buf, size_t len)
{
    return len > 0 && buf != NULL &&
           ((const unsigned char *)buf)[0] == (unsigned char)FT_FRAME_MAGIC[0];
}

void ft_frame_msg_init(ft_frame_msg *m)
{
    memset(m, 0, sizeof *m);
}

void ft_frame_msg_free(ft_frame_msg *m)
{
    free(m->reqs);
    free(m->masks);
    free(m->res);
    free(m->text);
    free(m->grid_tok);
    free(m->grid_logp);
    free(m->hit_pool);
    free(m->tok_pool);
    ft_frame_msg_init(m);
}

void ft_frame_msg_trim(ft_frame_msg *m, size_t keep)
{
    if (m->grid_cap * 4 > keep) {
        free(m->grid_tok);
        free(m->grid_logp);
        m->grid_tok = NULL;
        m->grid_logp = NULL;
        m->grid_cap = 0;
    }
    if (m->hit_cap * sizeof *m->hit_pool > keep) {
        free(m->hit_pool);
        m->hit_pool = NULL;
        m->hit_cap = 0;
    }
    if (m->tok_cap * 4 > keep) {
        free(m->tok_pool);
        m->tok_pool = NULL;
        m->tok_cap = 0;
    }
    if (m->text_cap > keep) {
        free(m->text);
        m->text = NULL;
        m->text_cap = 0;
        m->text_len = 0;
    }
    m->count = 0;
}

/* ---- header ------------------------------------------------------------ */

int ft_frame_decode_header(ft_frame_hdr *h, const void *buf, size_t len,
                           char *errbuf, size_t errlen)
{
    const unsigned char *p = buf;
    memset(h, 0, sizeof *h);
    if (p == NULL)
        len = 0;
    size_t nm = len < 4 ? len : 4;
    if (nm > 0 && memcmp(p, FT_FRAME_MAGIC, nm) != 0) {
        char got[16] = "";
        for (size_t i = 0, at = 0; i < nm; i++, at = 3 * i - 1)
            snprintf(got + at, sizeof got - at, "%s%02x", i ? " " : "", p[i]);
        return fail(FT_EPROTO, errbuf, errlen, 0,
                    "magic: expected \"" FT_FRAME_MAGIC "\", got bytes %s",
                    got);
    }
    /* The magic, version, type and id never move between versions, so
     * that an ERROR to a frame of another version can echo its id. */
    if (len >= 24)
        h->id = ld64(p + 16);
    if (len >= 8)
        h->type = ld16(p + 6);
    if (len >= 6) {
        h->version = ld16(p + 4);
        if (h->version != FT_FRAME_VERSION)
            return fail(FT_EPROTO, errbuf, errlen, 4,
                        "version: %u is not spoken here (speaks %u)",
                        h->version, FT_FRAME_VERSION);
    }
    if (len < FT_FRAME_HDR_SIZE)
        return fail(FT_EPROTO, errbuf, errlen, len,
                    "header: truncated: %zu bytes of the %u-byte header", len,
                    FT_FRAME_HDR_SIZE);
    if (strcmp(ft_frame_type_name(h->type), "unknown") == 0)
        return fail(FT_EPROTO, errbuf, errlen, 6, "type: unknown type 0x%04x",
                    h->type);
    h->flags = ld32(p + 8);
    if (h->flags & ~FT_FRAME_F_ALL)
        return fail(FT_EPROTO, errbuf, errlen, 8, "flags: unknown bits 0x%x",
                    h->flags & ~FT_FRAME_F_ALL);
    h->deadline_ms = ld32(p + 12);
    h->payload_len = ld32(p + 24);
    size_t have = len - FT_FRAME_HDR_SIZE;
    if ((uint64_t)h->payload_len != (uint64_t)have)
        return fail(FT_EPROTO, errbuf, errlen, 24,
                    "length: payload of %u bytes declared, %zu follow the "
                    "header", h->payload_len, have);
    h->checksum = ld32(p + 28);
    if (h->flags & FT_FRAME_F_CHECKSUM) {
        uint32_t want = XXH32(p + FT_FRAME_HDR_SIZE, have, XXH32(p, 28, 0));
        if (h->checksum != want)
            return fail(FT_EPROTO, errbuf, errlen, 28,
                        "checksum: 0x%08x does not match the frame's 0x%08x",
                        h->checksum, want);
    } else if (h->checksum != 0) {
        return fail(FT_EPROTO, errbuf, errlen, 28,
                    "checksum: 0x%08x set without the checksum flag",
                    h->checksum);
    }
    return FT_OK;
}

/* ---- payload reader ---------------------------------------------------- */

typedef struct rd {
    const unsigned char *p; /* the whole frame */
    size_t len;
    size_t off;             /* next byte to read */
    char *errbuf;
    size_t errlen;
} rd;

static size_t left(const rd *r) { return r->len - r->off; }

static int trailing(rd *r, const char *after)
{
    if (r->off == r->len)
        return FT_OK;
    return fail(FT_EPROTO, r->errbuf, r->errlen, r->off,
                "payload: %zu trailing bytes after %s", left(r), after);
}

/* grow reallocates *p to hold at least n elements of esz bytes, doubling;
 * keep says whether the contents must survive. */
static int grow(void **p, size_t *cap, size_t n, size_t esz, int keep)
{
    if (n <= *cap && *p != NULL)
        return FT_OK;
    size_t c = *cap ? *cap : 16;
    while (c < n)
        c = c > SIZE_MAX / 2 ? n : c * 2;
    if (c > SIZE_MAX / esz)
        return FT_ENOMEM;
    void *q;
    if (keep) {
        q = realloc(*p, c * esz);
    } else {
        free(*p);
        *p = NULL;
        q = malloc(c * esz);
    }
    if (q == NULL) {
        if (!keep)
            *cap = 0;
        return FT_ENOMEM;
    }
    *p = q;
    *cap = c;
    return FT_OK;
}

/* take_text copies n bytes at the reader into m->text (NUL-terminated),
 * rejecting NUL bytes so that the text is a C string. */
static int take_text(ft_frame_msg *m, rd *r, size_t n, const char *field)
{
    const unsigned char *s = r->p + r->off;
    const unsigned char *z = memchr(s, 0, n);
    if (z != NULL)
        return fail(FT_EPROTO, r->errbuf, r->errlen, r->off + (size_t)(z - s),
                    "%s: NUL byte", field);
    if (grow((void **)&m->text, &m->text_cap, n + 1, 1, 0) != FT_OK)
        return FT_ENOMEM;
    memcpy(m->text, s, n);
    m->text[n] = 0;
    m->text_len = n;
    r->off += n;
    return FT_OK;
}

/* ---- SEARCH ------------------------------------------------------------ */

/* dec_head reads the (count, reserved) head of a SEARCH or RESULT
 * payload (what: "search" or "result"; unit: "requests" or "results"):
 * count in 1..max_batch, and at most *room when room is given, reserved 0,
 * and count items of at least item bytes left after it. */
static int dec_head(rd *r, const char *what, const char *unit,
                    uint32_t max_batch, const size_t *room, size_t item,
                    uint32_t *count_out)
{
    char *errbuf = r->errbuf;
    size_t errlen = r->errlen;
    if (left(r) < 8)
        return fail(FT_EPROTO, errbuf, errlen, r->off,
                    "%s: truncated: 8 bytes needed, %zu left", what, left(r));
    uint32_t count = ld32(r->p + r->off), rsv = ld32(r->p + r->off + 4);
    if (count == 0 || count > max_batch)
        return fail(FT_EPROTO, errbuf, errlen, r->off,
                    "%s.count: %u %s, the batch limit is 1..%u", what, count,
                    unit, max_batch);
    if (room != NULL && count > *room)
        return fail(FT_ELIMIT, errbuf, errlen, r->off,
                    "%s.count: %u %s, room for %zu", what, count, unit, *room);
    if (rsv != 0)
        return fail(FT_EPROTO, errbuf, errlen, r->off + 4,
                    "%s.reserved: 0x%08x, must be 0", what, rsv);
    r->off += 8;
    if ((uint64_t)count * item > left(r))
        return fail(FT_EPROTO, errbuf, errlen, r->off,
                    "%s.count: %u %s need at least %llu bytes, %zu left", what,
                    count, unit, (unsigned long long)count * item, left(r));
    *count_out = count;
    return FT_OK;
}

static int dec_search(ft_frame_msg *m, rd *r, uint32_t max_batch)
{
    char *errbuf = r->errbuf;
    size_t errlen = r->errlen;
    uint32_t count = 0; /* set by dec_head on success (for gcc) */
    int hrc = dec_head(r, "search", "requests", max_batch, NULL,
                       FT_FRAME_SEARCH_REQ_SIZE, &count);
    if (hrc != FT_OK)
        return hrc;
    size_t cap = m->req_cap;
    if (grow((void **)&m->reqs, &cap, count, sizeof *m->reqs, 0) != FT_OK)
        return FT_ENOMEM;
    cap = m->req_cap;
    if (grow((void **)&m->masks, &cap, count, sizeof *m->masks, 0) != FT_OK)
        return FT_ENOMEM;
    m->req_cap = (uint32_t)(cap < UINT32_MAX ? cap : UINT32_MAX);
    /* The grids are the bulk of the payload (8 bytes per element).  Every
     * offset of a grid in a SEARCH is a multiple of 4, so when the wire
     * order is the host's and the frame itself is 4-byte aligned (an nng
     * message's body is) the requests point into the frame: no copy, no
     * memory of the decoder's own, and the frame must outlive them.
     * Otherwise one pool of left/8 elements holds them all (one
     * allocation, so the pointers handed out stay valid), given back
     * after a large frame by ft_frame_msg_trim. */
    int inplace = FRAME_LE && ((uintptr_t)(r->p + r->off) & 3u) == 0;
    m->inplace = inplace;
    if (!inplace) {
        size_t gneed = left(r) / 8 + 1;
        cap = m->grid_cap;
        if (grow((void **)&m->grid_tok, &cap, gneed, 4, 0) != FT_OK)
            return FT_ENOMEM;
        cap = m->grid_cap;
        if (grow((void **)&m->grid_logp, &cap, gneed, 4, 0) != FT_OK) {
            free(m->grid_tok);
            m->grid_tok = NULL;
            m->grid_cap = 0;
            return FT_ENOMEM;
        }
        m->grid_cap = cap;
    }
    size_t used = 0;
    for (uint32_t i = 0; i < count; i++) {
        size_t o = r->off;
        if (left(r) < FT_FRAME_SEARCH_REQ_SIZE)
            return fail(FT_EPROTO, errbuf, errlen, o,
                        "search[%u]: truncated: %u bytes needed, %zu left", i,
                        FT_FRAME_SEARCH_REQ_SIZE, left(r));
        const unsigned char *q = r->p + o;
        uint32_t mask = ld32(q), T = ld32(q + 4), K = ld32(q + 8);
        uint32_t beam = ld32(q + 12), results = ld32(q + 16);
        uint32_t tt = ld32(q + 20), ts = ld32(q + 24), pad = ld32(q + 28);
        uint64_t alpha = ld64(q + 32);
        if (mask & ~FT_FRAME_HAS_ALL)
            return fail(FT_EPROTO, errbuf, errlen, o,
                        "search[%u].mask: unknown bits 0x%x", i,
                        mask & ~FT_FRAME_HAS_ALL);
        if (T > FT_MAX_T)
            return fail(FT_EPROTO, errbuf, errlen, o + 4,
                        "search[%u].T: %u exceeds %u", i, T, FT_MAX_T);
        if (K > FT_MAX_K)
            return fail(FT_EPROTO, errbuf, errlen, o + 8,
                        "search[%u].K: %u exceeds %u", i, K, FT_MAX_K);
        /* A field the mask leaves out must be zero, so that one request has
         * one encoding and nothing is silently ignored. */
        static const struct {
            uint32_t bit;
            unsigned at;
            const char *name;
        } opt[] = {{FT_FRAME_HAS_BEAM, 12, "beam"},
                   {FT_FRAME_HAS_RESULTS, 16, "results"},
                   {FT_FRAME_HAS_THETA_TOK, 20, "theta_tok"},
                   {FT_FRAME_HAS_THETA_SENT, 24, "theta_sent"},
                   {FT_FRAME_HAS_ALPHA, 32, "alpha"}};
        for (size_t f = 0; f < sizeof opt / sizeof opt[0]; f++) {
            uint64_t v = opt[f].at == 32 ? alpha : ld32(q + opt[f].at);
            if (!(mask & opt[f].bit) && v != 0)
                return fail(FT_EPROTO, errbuf, errlen, o + opt[f].at,
                            "search[%u].%s: 0x%llx sent although the mask "
                            "leaves it out", i, opt[f].name,
                            (unsigned long long)v);
        }
        if (pad != 0)
            return fail(FT_EPROTO, errbuf, errlen, o + 28,
                        "search[%u].reserved: 0x%08x, must be 0", i, pad);
        r->off += FT_FRAME_SEARCH_REQ_SIZE;
        size_t elems = (size_t)T * K; /* <= 64 * 4096: no overflow */
        if (elems * 8 > left(r))
            return fail(FT_EPROTO, errbuf, errlen, r->off,
                        "search[%u]: truncated: the %ux%u grid needs %zu "
                        "bytes, %zu left", i, T, K, elems * 8, left(r));
        ft_request *req = &m->reqs[i];
        ft_request_init(req);
        req->T = T;
        req->K = K;
        if (mask & FT_FRAME_HAS_BEAM)
            req->beam = beam;
        if (mask & FT_FRAME_HAS_RESULTS)
            req->results = results;
        if (mask & FT_FRAME_HAS_THETA_TOK)
            req->theta_tok = fti_u2f(tt);
        if (mask & FT_FRAME_HAS_THETA_SENT)
            req->theta_sent = fti_u2f(ts);
        if (mask & FT_FRAME_HAS_ALPHA)
            req->alpha = fti_u2d(alpha);
        if (inplace) {
            req->tokens = (const uint32_t *)(const void *)(r->p + r->off);
            req->logp = (const float *)(const void *)(r->p + r->off +
                                                      elems * 4);
        } else {
            load32s(m->grid_tok + used, r->p + r->off, elems);
            load32s(m->grid_logp + used, r->p + r->off + elems * 4, elems);
            req->tokens = m->grid_tok + used;
            req->logp = m->grid_logp + used;
        }
        m->masks[i] = mask;
        used += elems;
        r->off += elems * 8;
    }
    m->count = count;
    return trailing(r, "the last request");
}

/* ---- RESULT ------------------------------------------------------------ */

/* dec_result decodes a RESULT payload either into the pools of m (m set,
 * growing them) or into the caller's results ext[next]. */
static int dec_result(ft_frame_msg *m, ft_result *ext, size_t next, rd *r,
                      uint32_t max_batch, uint32_t *count_out)
{
    char *errbuf = r->errbuf;
    size_t errlen = r->errlen;
    uint32_t count = 0; /* set by dec_head on success (for gcc) */
    int hrc = dec_head(r, "result", "results", max_batch,
                       ext != NULL ? &next : NULL, FT_FRAME_RESULT_REQ_SIZE,
                       &count);
    if (hrc != FT_OK)
        return hrc;
    ft_result *res = ext;
    if (m != NULL) {
        size_t cap = m->res_cap;
        if (grow((void **)&m->res, &cap, count, sizeof *m->res, 0) != FT_OK) {
            m->res_cap = 0;
            return FT_ENOMEM;
        }
        m->res_cap = (uint32_t)(cap < UINT32_MAX ? cap : UINT32_MAX);
        res = m->res;
        /* Size the pools once, from the results' headers (each entry's
         * bytes follow from its counts): one allocation each instead of a
         * doubling chain of copies.  An entry that does not add up ends
         * the walk; the decode below then says what is wrong. */
        size_t o = r->off, th = 0, tt = 0;
        for (uint32_t i = 0; i < count && r->len - o >= FT_FRAME_RESULT_REQ_SIZE;
             i++) {
            const unsigned char *q = r->p + o;
            uint64_t mlen = ld32(q + 4), nh = ld32(q + 8), nt = ld32(q + 12);
            uint64_t bytes = FT_FRAME_RESULT_REQ_SIZE + mlen +
                             nh * FT_FRAME_HIT_SIZE + nt * 4;
            if (nh > FT_MAX_RESULTS || bytes > r->len - o)
                break;
            th += nh;
            tt += nt;
            o += bytes;
        }
        if (grow((void **)&m->hit_pool, &m->hit_cap, th + 1,
                 sizeof *m->hit_pool, 0) != FT_OK ||
            grow((void **)&m->tok_pool, &m->tok_cap, tt + 1,
                 sizeof *m->tok_pool, 0) != FT_OK)
            return FT_ENOMEM;
    }
    size_t hit_used = 0, tok_used = 0;
    for (uint32_t i = 0; i < count; i++) {
        size_t o = r->off;
        if (left(r) < FT_FRAME_RESULT_REQ_SIZE)
            return fail(FT_EPROTO, errbuf, errlen, o,
                        "result[%u]: truncated: %u bytes needed, %zu left", i,
                        FT_FRAME_RESULT_REQ_SIZE, left(r));
        const unsigned char *q = r->p + o;
        uint32_t status = ld32(q), mlen = ld32(q + 4);
        uint32_t nh = ld32(q + 8), nt = ld32(q + 12);
        if (status > INT32_MAX)
            return fail(FT_EPROTO, errbuf, errlen, o,
                        "result[%u].status: %u is not an error code", i,
                        status);
        if (mlen > FT_FRAME_MAX_RESULT_MSG)
            return fail(FT_EPROTO, errbuf, errlen, o + 4,
                        "result[%u].message: %u bytes exceed %u", i, mlen,
                        FT_FRAME_MAX_RESULT_MSG);
        if (status == 0 && mlen != 0)
            return fail(FT_EPROTO, errbuf, errlen, o + 4,
                        "result[%u].message: %u bytes with status 0", i,
                        mlen);
        if (nh > FT_MAX_RESULTS)
            return fail(FT_EPROTO, errbuf, errlen, o + 8,
                        "result[%u].hits: %u exceed %u", i, nh,
                        FT_MAX_RESULTS);
        if (status != 0 && nh != 0)
            return fail(FT_EPROTO, errbuf, errlen, o + 8,
                        "result[%u].hits: %u with status %u", i, nh, status);
        if ((uint64_t)nt > (uint64_t)nh * FT_MAX_KEY_LEN_LIMIT)
            return fail(FT_EPROTO, errbuf, errlen, o + 12,
                        "result[%u].tokens: %u for %u hits of at most %u "
                        "tokens", i, nt, nh, FT_MAX_KEY_LEN_LIMIT);
        r->off += FT_FRAME_RESULT_REQ_SIZE;
        uint64_t need = (uint64_t)mlen + (uint64_t)nh * FT_FRAME_HIT_SIZE +
                        (uint64_t)nt * 4;
        if (need > left(r))
            return fail(FT_EPROTO, errbuf, errlen, r->off,
                        "result[%u]: truncated: %llu bytes needed, %zu left",
                        i, (unsigned long long)need, left(r));
        ft_result *out = &res[i];
        ft_hit *hits;
        uint32_t *toks;
        if (m != NULL) {
            if (grow((void **)&m->hit_pool, &m->hit_cap, hit_used + nh + 1,
                     sizeof *m->hit_pool, 1) != FT_OK ||
                grow((void **)&m->tok_pool, &m->tok_cap, tok_used + nt + 1,
                     sizeof *m->tok_pool, 1) != FT_OK)
                return FT_ENOMEM;
            hits = m->hit_pool + hit_used;
            toks = m->tok_pool + tok_used;
        } else {
            if (nh > out->cap_hits)
                return fail(FT_ELIMIT, errbuf, errlen, o + 8,
                            "result[%u].hits: %u exceed the buffer's %u", i,
                            nh, out->cap_hits);
            if (nt > out->cap_tokens)
                return fail(FT_ELIMIT, errbuf, errlen, o + 12,
                            "result[%u].tokens: %u exceed the buffer's %u", i,
                            nt, out->cap_tokens);
            hits = out->hits;
            toks = out->tokens;
        }
        const unsigned char *s = r->p + r->off;
        const unsigned char *z = memchr(s, 0, mlen);
        if (z != NULL)
            return fail(FT_EPROTO, errbuf, errlen, r->off + (size_t)(z - s),
                        "result[%u].message: NUL byte", i);
        memcpy(out->error, s, mlen);
        out->error[mlen] = 0;
        out->status = (int)status;
        r->off += mlen;
        uint32_t tsum = 0;
        for (uint32_t j = 0; j < nh; j++) {
            size_t ho = r->off;
            const unsigned char *h = r->p + ho;
            uint32_t len = ld32(h);
            if (len < 1 || len > FT_MAX_KEY_LEN_LIMIT)
                return fail(FT_EPROTO, errbuf, errlen, ho,
                            "result[%u].hit[%u].len: %u is not 1..%u", i, j,
                            len, FT_MAX_KEY_LEN_LIMIT);
            if (len > nt - tsum)
                return fail(FT_EPROTO, errbuf, errlen, ho,
                            "result[%u].hit[%u].len: %u tokens overrun the "
                            "%u declared", i, j, len, nt);
            hits[j].len = len;
            hits[j].tok_off = tsum;
            hits[j].sigma = fti_u2f(ld32(h + 4));
            hits[j].value = ld64(h + 8);
            hits[j].score = fti_u2d(ld64(h + 16));
            copy_key(toks + tsum, h + FT_FRAME_HIT_SIZE, len);
            tsum += len;
            r->off += FT_FRAME_HIT_SIZE + (size_t)len * 4;
        }
        if (tsum != nt)
            return fail(FT_EPROTO, errbuf, errlen, o + 12,
                        "result[%u].tokens: %u declared, the hits hold %u", i,
                        nt, tsum);
        out->n = nh;
        if (m != NULL) {
            /* The pools may move as they grow: pointers are set at the
             * end, from these sizes. */
            out->cap_hits = nh;
            out->cap_tokens = nt;
            hit_used += nh;
            tok_used += nt;
        }
    }
    int rc = trailing(r, "the last result");
    if (rc != FT_OK)
        return rc;
    if (m != NULL) {
        hit_used = tok_used = 0;
        for (uint32_t i = 0; i < count; i++) {
            res[i].hits = m->hit_pool + hit_used;
            res[i].tokens = m->tok_pool + tok_used;
            hit_used += res[i].cap_hits;
            tok_used += res[i].cap_tokens;
        }
        m->count = count;
    }
    if (count_out != NULL)
        *count_out = count;
    return FT_OK;
}

/* ---- ERROR, RELOAD_REPLY and the text payloads -------------------------- */

/* dec_coded decodes "u32 code, u32 length, message" (ERROR and
 * RELOAD_REPLY); an ERROR's code may not be 0. */
static int dec_coded(ft_frame_msg *m, rd *r, const char *what, int nonzero)
{
    char field[32];
    if (left(r) < 8)
        return fail(FT_EPROTO, r->errbuf, r->errlen, r->off,
                    "%s: truncated: 8 bytes needed, %zu left", what, left(r));
    uint32_t code = ld32(r->p + r->off), mlen = ld32(r->p + r->off + 4);
    if (code > INT32_MAX || (nonzero && code == 0))
        return fail(FT_EPROTO, r->errbuf, r->errlen, r->off,
                    "%s.%s: %u is not an error code", what,
                    nonzero ? "code" : "status", code);
    if (mlen > FT_FRAME_MAX_MSG)
        return fail(FT_EPROTO, r->errbuf, r->errlen, r->off + 4,
                    "%s.message: %u bytes exceed %u", what, mlen,
                    FT_FRAME_MAX_MSG);
    r->off += 8;
    if (mlen > left(r))
        return fail(FT_EPROTO, r->errbuf, r->errlen, r->off,
                    "%s.message: truncated: %u bytes declared, %zu left", what,
                    mlen, left(r));
    snprintf(field, sizeof field, "%s.message", what);
    int rc = take_text(m, r, mlen, field);
    if (rc != FT_OK)
        return rc;
    m->status = (int)code;
    return trailing(r, "the message");
}

/* dec_text takes the whole payload as text of at most max bytes. */
static int dec_text(ft_frame_msg *m, rd *r, const char *field, size_t max)
{
    if (left(r) > max)
        return fail(FT_EPROTO, r->errbuf, r->errlen, r->off,
                    "%s: %zu bytes exceed %zu", field, left(r), max);
    return take_text(m, r, left(r), field);
}

int ft_frame_decode(ft_frame_msg *m, const void *buf, size_t len,
                    uint32_t max_batch, char *errbuf, size_t errlen)
{
    m->count = 0;
    m->status = 0;
    m->text_len = 0;
    if (m->text != NULL)
        m->text[0] = 0;
    int rc = ft_frame_decode_header(&m->hdr, buf, len, errbuf, errlen);
    if (rc != FT_OK)
        return rc;
    if (max_batch == 0)
        max_batch = FT_FRAME_MAX_BATCH;
    rd r = {buf, len, FT_FRAME_HDR_SIZE, errbuf, errlen};
    switch (m->hdr.type) {
    case FT_FRAME_SEARCH:
        rc = dec_search(m, &r, max_batch);
        break;
    case FT_FRAME_RESULT:
        rc = dec_result(m, NULL, 0, &r, max_batch, NULL);
        break;
    case FT_FRAME_ERROR:
        rc = dec_coded(m, &r, "error", 1);
        break;
    case FT_FRAME_RELOAD_REPLY:
        rc = dec_coded(m, &r, "reload_reply", 0);
        break;
    case FT_FRAME_INFO_REPLY:
        rc = dec_text(m, &r, "info_reply.text", FT_FRAME_MAX_TEXT);
        break;
    case FT_FRAME_RELOAD:
        rc = dec_text(m, &r, "reload.path", FT_FRAME_MAX_PATH);
        break;
    default: /* INFO, PING, PONG: no payload */
        if (left(&r) != 0)
            rc = fail(FT_EPROTO, errbuf, errlen, r.off,
                      "payload: %zu bytes, a %s carries none", left(&r),
                      ft_frame_type_name(m->hdr.type));
        break;
    }
    if (rc != FT_OK)
        m->count = 0;
    if (m->text == NULL && rc == FT_OK) {
        /* Promise a string even for types without text. */
        if (grow((void **)&m->text, &m->text_cap, 1, 1, 0) != FT_OK)
            return FT_ENOMEM;
        m->text[0] = 0;
    }
    return rc;
}

int ft_frame_decode_result_into(ft_frame_hdr *h, ft_result *res, size_t nres,
                                uint32_t *count, const void *buf, size_t len,
                                char *errbuf, size_t errlen)
{
    ft_frame_hdr tmp;
    if (h == NULL)
        h = &tmp;
    if (count != NULL)
        *count = 0;
    int rc = ft_frame_decode_header(h, buf, len, errbuf, errlen);
    if (rc != FT_OK)
        return rc;
    if (h->type != FT_FRAME_RESULT)
        return fail(FT_EPROTO, errbuf, errlen, 6,
                    "type: %s where RESULT was expected",
                    ft_frame_type_name(h->type));
    if (res == NULL && nres > 0)
        return FT_EINVAL;
    rd r = {buf, len, FT_FRAME_HDR_SIZE, errbuf, errlen};
    return dec_result(NULL, res, nres, &r, UINT32_MAX, count);
}

int ft_frame_check_request(const ft_frame_hdr *h, char *errbuf,
                           size_t errlen)
{
    if (!FT_FRAME_IS_REPLY(h->type))
        return FT_OK;
    return fail(FT_EPROTO, errbuf, errlen, 6,
                "type: %s is a reply, not a request",
                ft_frame_type_name(h->type));
}

int ft_frame_search_fault(const ft_frame_msg *m, uint32_t i, char *errbuf,
                          size_t errlen)
{
    if (m->hdr.type != FT_FRAME_SEARCH || i >= m->count)
        return FT_EINVAL;
    RT_RETURN_ERROR_IF((m->masks[i] & FT_FRAME_HAS_RESULTS) &&
                           m->reqs[i].results == 0,
                       FT_EREQUEST, "results: must be 1..%u, got 0",
                       FT_MAX_RESULTS);
    return FT_OK;
}

/* ---- encoders ---------------------------------------------------------- */

/* begin appends a header with zero length and checksum; finish patches
 * them once the payload is in. */
static int begin(ft_buf *b, size_t *start, uint16_t type, uint64_t id,
                 uint32_t deadline_ms, uint32_t flags)
{
    unsigned char h[FT_FRAME_HDR_SIZE] = {0};
    memcpy(h, FT_FRAME_MAGIC, 4);
    st16(h + 4, FT_FRAME_VERSION);
    st16(h + 6, type);
    st32(h + 8, flags);
    st32(h + 12, deadline_ms);
    st64(h + 16, id);
    *start = b->len;
    return ft_buf_append(b, h, sizeof h);
}

static void rollback(ft_buf *b, size_t start)
{
    b->len = start;
    if (b->data != NULL && b->cap > start)
        b->data[start] = 0;
}

static int finish(ft_buf *b, size_t start)
{
    unsigned char *h = b->data + start;
    size_t plen = b->len - start - FT_FRAME_HDR_SIZE;
    if (plen > UINT32_MAX) {
        rollback(b, start);
        return FT_ELIMIT;
    }
    st32(h + 24, (uint32_t)plen);
    if (ld32(h + 8) & FT_FRAME_F_CHECKSUM)
        st32(h + 28, XXH32(h + FT_FRAME_HDR_SIZE, plen, XXH32(h, 28, 0)));
    return FT_OK;
}

#define PUT(expr)                                                             \
    do {                                                                      \
        if ((rc = (expr)) != FT_OK)                                           \
            goto out;                                                         \
    } while (0)

uint32_t ft_frame_mask_of(const ft_request *req)
{
    uint32_t m = 0;
    if (req->beam != FT_DEFAULT_BEAM)
        m |= FT_FRAME_HAS_BEAM;
    if (req->results != 0)
        m |= FT_FRAME_HAS_RESULTS;
    if (fti_f2u(req->theta_tok) != fti_f2u(-INFINITY))
        m |= FT_FRAME_HAS_THETA_TOK;
    if (fti_f2u(req->theta_sent) != fti_f2u(-INFINITY))
        m |= FT_FRAME_HAS_THETA_SENT;
    if (fti_d2u(req->alpha) != fti_d2u(1.0))
        m |= FT_FRAME_HAS_ALPHA;
    return m;
}

/* search_size checks n requests as a SEARCH frame carries them and sets
 * *size to the frame's exact bytes, header included. */
static int search_size(const ft_request *reqs, const uint32_t *masks,
                       size_t n, size_t *size)
{
    if (reqs == NULL || n == 0 || n > UINT32_MAX)
        return FT_EINVAL;
    size_t bytes = FT_FRAME_HDR_SIZE + 8;
    for (size_t i = 0; i < n; i++) {
        const ft_request *q = &reqs[i];
        if (masks != NULL && (masks[i] & ~FT_FRAME_HAS_ALL))
            return FT_EINVAL;
        if (q->T > FT_MAX_T || q->K > FT_MAX_K)
            return FT_ELIMIT;
        size_t elems = (size_t)q->T * q->K; /* <= 64 * 4096 */
        if (elems > 0 && (q->tokens == NULL || q->logp == NULL))
            return FT_EINVAL;
        bytes += FT_FRAME_SEARCH_REQ_SIZE + elems * 8;
        if (bytes - FT_FRAME_HDR_SIZE > UINT32_MAX)
            return FT_ELIMIT;
    }
    *size = bytes;
    return FT_OK;
}

/* store32s writes n 32-bit words (u32, or f32 bits) little-endian. */
static unsigned char *store32s(unsigned char *p, const void *v, size_t n)
{
#if FRAME_LE
    if (n)
        memcpy(p, v, n * 4);
#else
    const uint32_t *w = v;
    for (size_t i = 0; i < n; i++)
        st32(p + 4 * i, w[i]);
#endif
    return p + n * 4;
}

/* write_head writes a frame's header (its checksum left 0) and the
 * payload's count word and reserved word; returns where the first item
 * goes. */
static unsigned char *write_head(unsigned char *dst, uint16_t type,
                                 uint64_t id, uint32_t deadline_ms,
                                 uint32_t flags, size_t n)
{
    unsigned char *h = dst, *p = dst + FT_FRAME_HDR_SIZE;
    memset(h, 0, FT_FRAME_HDR_SIZE);
    memcpy(h, FT_FRAME_MAGIC, 4);
    st16(h + 4, FT_FRAME_VERSION);
    st16(h + 6, type);
    st32(h + 8, flags);
    st32(h + 12, deadline_ms);
    st64(h + 16, id);
    st32(p, (uint32_t)n);
    st32(p + 4, 0);
    return p + 8;
}

/* write_tail writes the payload's length into a frame of size bytes at
 * dst, then the checksum over header and payload when flags ask for it. */
static void write_tail(unsigned char *dst, size_t size, uint32_t flags)
{
    size_t plen = size - FT_FRAME_HDR_SIZE;
    st32(dst + 24, (uint32_t)plen);
    if (flags & FT_FRAME_F_CHECKSUM)
        st32(dst + 28,
             XXH32(dst + FT_FRAME_HDR_SIZE, plen, XXH32(dst, 28, 0)));
}

/* write_search writes the SEARCH frame of n requests that search_size
 * measured (size bytes) into dst, checksum last. */
static void write_search(unsigned char *dst, size_t size, uint64_t id,
                         uint32_t deadline_ms, uint32_t flags,
                         const ft_request *reqs, const uint32_t *masks,
                         size_t n)
{
    unsigned char *p = write_head(dst, FT_FRAME_SEARCH, id, deadline_ms,
                                  flags, n);
    for (size_t i = 0; i < n; i++) {
        const ft_request *q = &reqs[i];
        uint32_t m = masks != NULL ? masks[i] : ft_frame_mask_of(q);
        memset(p, 0, FT_FRAME_SEARCH_REQ_SIZE);
        st32(p, m);
        st32(p + 4, q->T);
        st32(p + 8, q->K);
        if (m & FT_FRAME_HAS_BEAM)
            st32(p + 12, q->beam);
        if (m & FT_FRAME_HAS_RESULTS)
            st32(p + 16, q->results);
        if (m & FT_FRAME_HAS_THETA_TOK)
            st32(p + 20, fti_f2u(q->theta_tok));
        if (m & FT_FRAME_HAS_THETA_SENT)
            st32(p + 24, fti_f2u(q->theta_sent));
        if (m & FT_FRAME_HAS_ALPHA)
            st64(p + 32, fti_d2u(q->alpha));
        p += FT_FRAME_SEARCH_REQ_SIZE;
        size_t elems = (size_t)q->T * q->K;
        p = store32s(p, q->tokens, elems);
        p = store32s(p, q->logp, elems);
    }
    write_tail(dst, size, flags);
}

/* enc_search appends a SEARCH: measured first, then written in place
 * (one reservation, no copy through a buffer of its own). */
static int enc_search(ft_buf *b, uint64_t id, uint32_t deadline_ms,
                      uint32_t flags, const ft_request *reqs,
                      const uint32_t *masks, size_t n)
{
    size_t size;
    if (b == NULL)
        return FT_EINVAL;
    int rc = search_size(reqs, masks, n, &size);
    if (rc != FT_OK)
        return rc;
    if (ft_buf_reserve(b, size) != FT_OK)
        return FT_ENOMEM;
    write_search(b->data + b->len, size, id, deadline_ms, flags, reqs, masks,
                 n);
    b->len += size;
    b->data[b->len] = 0;
    return FT_OK;
}

int ft_frame_search_size(const ft_request *reqs, const uint32_t *masks,
                         size_t n, size_t *size)
{
    return search_size(reqs, masks, n, size);
}

int ft_frame_encode_search_to(void *dst, size_t size, uint64_t id,
                              uint32_t deadline_ms, uint32_t flags,
                              const ft_request *reqs, const uint32_t *masks,
                              size_t n)
{
    size_t want;
    if (dst == NULL)
        return FT_EINVAL;
    int rc = search_size(reqs, masks, n, &want);
    if (rc != FT_OK)
        return rc;
    if (want != size || (flags & ~FT_FRAME_F_ALL))
        return FT_EINVAL;
    write_search(dst, size, id, deadline_ms, flags, reqs, masks, n);
    return FT_OK;
}

int ft_frame_encode_search(ft_buf *b, uint64_t id, uint32_t deadline_ms,
                           const ft_request *reqs, const uint32_t *masks,
                           size_t n)
{
    return enc_search(b, id, deadline_ms, FT_FRAME_F_CHECKSUM, reqs, masks,
                      n);
}

/* result_size checks n results as a RESULT frame carries them and sets
 * *size to the frame's exact bytes, header included. */
static int result_size(const ft_result *res, size_t n, size_t *size)
{
    if (res == NULL || n == 0 || n > UINT32_MAX)
        return FT_EINVAL;
    size_t bytes = FT_FRAME_HDR_SIZE + 8;
    for (size_t i = 0; i < n; i++) {
        const ft_result *r = &res[i];
        if (r->status < 0)
            return FT_EINVAL;
        bytes += FT_FRAME_RESULT_REQ_SIZE;
        if (r->status != FT_OK) {
            bytes += strnlen(r->error, FT_FRAME_MAX_RESULT_MSG);
            continue;
        }
        if (r->n > FT_MAX_RESULTS)
            return FT_ELIMIT;
        if (r->n > r->cap_hits || (r->n > 0 && (r->hits == NULL ||
                                                r->tokens == NULL)))
            return FT_EINVAL;
        for (uint32_t j = 0; j < r->n; j++) {
            const ft_hit *h = &r->hits[j];
            if (h->len < 1 || h->len > FT_MAX_KEY_LEN_LIMIT ||
                (uint64_t)h->tok_off + h->len > r->cap_tokens)
                return FT_EINVAL;
            bytes += FT_FRAME_HIT_SIZE + (size_t)h->len * 4;
        }
    }
    if (bytes - FT_FRAME_HDR_SIZE > UINT32_MAX)
        return FT_ELIMIT;
    *size = bytes;
    return FT_OK;
}

/* write_result writes the RESULT frame of n results that result_size
 * measured (size bytes) into dst: the header, the payload, then the
 * checksum over both when flags ask for it. */
static void write_result(unsigned char *dst, size_t size, uint64_t id,
                         uint32_t deadline_ms, uint32_t flags,
                         const ft_result *res, size_t n)
{
    unsigned char *p = write_head(dst, FT_FRAME_RESULT, id, deadline_ms,
                                  flags, n);
    for (size_t i = 0; i < n; i++) {
        const ft_result *r = &res[i];
        memset(p, 0, FT_FRAME_RESULT_REQ_SIZE);
        st32(p, (uint32_t)r->status);
        if (r->status != FT_OK) {
            size_t mlen = strnlen(r->error, FT_FRAME_MAX_RESULT_MSG);
            st32(p + 4, (uint32_t)mlen);
            p += FT_FRAME_RESULT_REQ_SIZE;
            memcpy(p, r->error, mlen);
            p += mlen;
            continue;
        }
        /* One pass over the hits; the token count, before them on the
         * wire, is written once they are. */
        unsigned char *entry = p;
        uint32_t nt = 0;
        st32(p + 8, r->n);
        p += FT_FRAME_RESULT_REQ_SIZE;
        for (uint32_t j = 0; j < r->n; j++) {
            const ft_hit *x = &r->hits[j];
            st32(p, x->len);
            st32(p + 4, fti_f2u(x->sigma));
            st64(p + 8, x->value);
            st64(p + 16, fti_d2u(x->score));
            p += FT_FRAME_HIT_SIZE;
            p = store32s(p, r->tokens + x->tok_off, x->len);
            nt += x->len; /* <= 4096 * 255 */
        }
        st32(entry + 12, nt);
    }
    write_tail(dst, size, flags);
}

static int enc_result(ft_buf *b, uint64_t id, uint32_t deadline_ms,
                      uint32_t flags, const ft_result *res, size_t n)
{
    size_t size;
    if (b == NULL)
        return FT_EINVAL;
    int rc = result_size(res, n, &size);
    if (rc != FT_OK)
        return rc;
    if (ft_buf_reserve(b, size) != FT_OK)
        return FT_ENOMEM;
    write_result(b->data + b->len, size, id, deadline_ms, flags, res, n);
    b->len += size;
    b->data[b->len] = 0;
    return FT_OK;
}

int ft_frame_result_size(const ft_result *res, size_t n, size_t *size)
{
    return result_size(res, n, size);
}

int ft_frame_encode_result_to(void *dst, size_t size, uint64_t id,
                              uint32_t flags, const ft_result *res, size_t n)
{
    size_t want;
    if (dst == NULL)
        return FT_EINVAL;
    int rc = result_size(res, n, &want);
    if (rc != FT_OK)
        return rc;
    if (want != size || (flags & ~FT_FRAME_F_ALL))
        return FT_EINVAL;
    write_result(dst, size, id, 0, flags, res, n);
    return FT_OK;
}

int ft_frame_encode_result_sized(void *dst, size_t size, uint64_t id,
                                 uint32_t flags, const ft_result *res,
                                 size_t n)
{
    if (dst == NULL || res == NULL || n == 0 || (flags & ~FT_FRAME_F_ALL))
        return FT_EINVAL;
    write_result(dst, size, id, 0, flags, res, n);
    return FT_OK;
}

int ft_frame_encode_result(ft_buf *b, uint64_t id, const ft_result *res,
                           size_t n)
{
    return enc_result(b, id, 0, FT_FRAME_F_CHECKSUM, res, n);
}

/* cut_len is the length of msg to send within max bytes: all of it, or a
 * prefix ending on a UTF-8 character boundary that leaves room for "...". */
static size_t cut_len(const char *msg, size_t len, size_t max, int *cut)
{
    *cut = len > max;
    if (!*cut)
        return len;
    size_t n = max - 3;
    while (n > 0 && ((unsigned char)msg[n] & 0xc0) == 0x80)
        n--;
    return n;
}

/* enc_coded appends ERROR or RELOAD_REPLY: u32 code, u32 length, text. */
static int enc_coded(ft_buf *b, uint16_t type, uint64_t id,
                     uint32_t deadline_ms, uint32_t flags, int code,
                     const char *msg, size_t len)
{
    if (b == NULL || code < 0 || (type == FT_FRAME_ERROR && code == 0) ||
        (msg == NULL && len > 0) || (len > 0 && memchr(msg, 0, len) != NULL))
        return FT_EINVAL;
    int cut;
    size_t n = cut_len(msg, len, FT_FRAME_MAX_MSG, &cut);
    size_t start;
    int rc = begin(b, &start, type, id, deadline_ms, flags);
    if (rc != FT_OK)
        return rc;
    PUT(ft_buf_put_u32(b, (uint32_t)code));
    PUT(ft_buf_put_u32(b, (uint32_t)(n + (cut ? 3 : 0))));
    PUT(ft_buf_append(b, msg, n));
    if (cut)
        PUT(ft_buf_append(b, "...", 3));
    rc = finish(b, start);
out:
    if (rc != FT_OK)
        rollback(b, start);
    return rc;
}

/* enc_text appends a frame whose payload is text (or nothing). */
static int enc_text(ft_buf *b, uint16_t type, uint64_t id,
                    uint32_t deadline_ms, uint32_t flags, const char *text,
                    size_t len, size_t max)
{
    if (b == NULL || (text == NULL && len > 0) ||
        (len > 0 && memchr(text, 0, len) != NULL))
        return FT_EINVAL;
    if (len > max)
        return FT_ELIMIT;
    size_t start;
    int rc = begin(b, &start, type, id, deadline_ms, flags);
    if (rc != FT_OK)
        return rc;
    PUT(ft_buf_append(b, text, len));
    rc = finish(b, start);
out:
    if (rc != FT_OK)
        rollback(b, start);
    return rc;
}

int ft_frame_encode_error(ft_buf *b, uint64_t id, int code, const char *msg)
{
    return enc_coded(b, FT_FRAME_ERROR, id, 0, FT_FRAME_F_CHECKSUM, code, msg,
                     msg ? strlen(msg) : 0);
}

int ft_frame_encode_info(ft_buf *b, uint64_t id)
{
    return enc_text(b, FT_FRAME_INFO, id, 0, FT_FRAME_F_CHECKSUM, NULL, 0, 0);
}

int ft_frame_encode_info_reply(ft_buf *b, uint64_t id, const char *text,
                               size_t len)
{
    return enc_text(b, FT_FRAME_INFO_REPLY, id, 0, FT_FRAME_F_CHECKSUM, text,
                    len, FT_FRAME_MAX_TEXT);
}

int ft_frame_encode_ping(ft_buf *b, uint64_t id)
{
    return enc_text(b, FT_FRAME_PING, id, 0, FT_FRAME_F_CHECKSUM, NULL, 0, 0);
}

int ft_frame_encode_pong(ft_buf *b, uint64_t id)
{
    return enc_text(b, FT_FRAME_PONG, id, 0, FT_FRAME_F_CHECKSUM, NULL, 0, 0);
}

int ft_frame_encode_reload(ft_buf *b, uint64_t id, const char *path)
{
    return enc_text(b, FT_FRAME_RELOAD, id, 0, FT_FRAME_F_CHECKSUM, path,
                    path ? strlen(path) : 0, FT_FRAME_MAX_PATH);
}

int ft_frame_encode_reload_reply(ft_buf *b, uint64_t id, int status,
                                 const char *msg)
{
    return enc_coded(b, FT_FRAME_RELOAD_REPLY, id, 0, FT_FRAME_F_CHECKSUM,
                     status, msg, msg ? strlen(msg) : 0);
}

int ft_frame_encode(ft_buf *b, const ft_frame_msg *m)
{
    const ft_frame_hdr *h = &m->hdr;
    if (h->flags & ~FT_FRAME_F_ALL)
        return FT_EINVAL;
    switch (h->type) {
    case FT_FRAME_SEARCH:
        return enc_search(b, h->id, h->deadline_ms, h->flags, m->reqs,
                          m->masks, m->count);
    case FT_FRAME_RESULT:
        return enc_result(b, h->id, h->deadline_ms, h->flags, m->res,
                          m->count);
    case FT_FRAME_ERROR:
    case FT_FRAME_RELOAD_REPLY:
        return enc_coded(b, h->type, h->id, h->deadline_ms, h->flags,
                         m->status, m->text, m->text_len);
    case FT_FRAME_INFO_REPLY:
        return enc_text(b, h->type, h->id, h->deadline_ms, h->flags, m->text,
                        m->text_len, FT_FRAME_MAX_TEXT);
    case FT_FRAME_RELOAD:
        return enc_text(b, h->type, h->id, h->deadline_ms, h->flags, m->text,
                        m->text_len, FT_FRAME_MAX_PATH);
    case FT_FRAME_INFO:
    case FT_FRAME_PING:
    case FT_FRAME_PONG:
        return enc_text(b, h->type, h->id, h->deadline_ms, h->flags, NULL, 0,
                        0);
    default:
        return FT_EINVAL;
    }
}
