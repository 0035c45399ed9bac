/*
 * buf.h - a growable byte buffer: what the codecs (JSON lines, binary
 * frames) and the text reports (INFO, config dumps) encode into, so that
 * the CLI, the server and the client share one encoder and none of them
 * needs a FILE *.  Ground floor: header-only, uses nothing but libc and the
 * error codes of flashtrie.h.
 */
#ifndef FT_BUF_H
#define FT_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashtrie.h"

typedef struct ft_buf {
    unsigned char *data; /* len bytes in use, cap allocated; NUL after len
                          * whenever cap > len (ft_buf_printf keeps one) */
    size_t len;
    size_t cap;
} ft_buf;

/* ft_buf_init makes b empty without allocating. */
static inline void ft_buf_init(ft_buf *b)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

/* ft_buf_free releases b's memory and leaves it empty. */
static inline void ft_buf_free(ft_buf *b)
{
    free(b->data);
    ft_buf_init(b);
}

/* ft_buf_reserve makes room for n more bytes (and a trailing NUL).
 * FT_ENOMEM if it cannot. */
static inline int ft_buf_reserve(ft_buf *b, size_t n)
{
    if (n > SIZE_MAX - b->len - 1)
        return FT_ENOMEM;
    size_t need = b->len + n + 1;
    if (need <= b->cap)
        return FT_OK;
    size_t c = b->cap ? b->cap : 256;
    while (c < need)
        c = c > SIZE_MAX / 2 ? need : c * 2;
    unsigned char *p = (unsigned char *)realloc(b->data, c);
    if (p == NULL)
        return FT_ENOMEM;
    b->data = p;
    b->cap = c;
    return FT_OK;
}

/* ft_buf_append appends n bytes. */
static inline int ft_buf_append(ft_buf *b, const void *p, size_t n)
{
    if (ft_buf_reserve(b, n) != FT_OK)
        return FT_ENOMEM;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
    return FT_OK;
}

/* ft_buf_vprintf appends formatted text (no NUL counted in len). */
static inline int ft_buf_vprintf(ft_buf *b, const char *fmt, va_list ap)
{
    va_list aq;
    va_copy(aq, ap);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, aq);
    va_end(aq);
    if (n < 0)
        return FT_EINVAL;
    if ((size_t)n < sizeof small)
        return ft_buf_append(b, small, (size_t)n);
    if (ft_buf_reserve(b, (size_t)n) != FT_OK)
        return FT_ENOMEM;
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return FT_OK;
}

/* ft_buf_printf appends formatted text (no NUL counted in len). */
static inline int ft_buf_printf(ft_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline int ft_buf_printf(ft_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = ft_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

/* Little-endian appends of fixed-width integers and floats. */
static inline int ft_buf_put_u8(ft_buf *b, uint8_t v) { return ft_buf_append(b, &v, 1); }

static inline int ft_buf_put_u16(ft_buf *b, uint16_t v)
{
    unsigned char x[2] = {(unsigned char)v, (unsigned char)(v >> 8)};
    return ft_buf_append(b, x, 2);
}

static inline int ft_buf_put_u32(ft_buf *b, uint32_t v)
{
    unsigned char x[4];
    for (int i = 0; i < 4; i++)
        x[i] = (unsigned char)(v >> (8 * i));
    return ft_buf_append(b, x, 4);
}

static inline int ft_buf_put_u64(ft_buf *b, uint64_t v)
{
    unsigned char x[8];
    for (int i = 0; i < 8; i++)
        x[i] = (unsigned char)(v >> (8 * i));
    return ft_buf_append(b, x, 8);
}

static inline int ft_buf_put_f32(ft_buf *b, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    return ft_buf_put_u32(b, u);
}

static inline int ft_buf_put_f64(ft_buf *b, double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    return ft_buf_put_u64(b, u);
}

#endif /* FT_BUF_H */
