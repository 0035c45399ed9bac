/* buf.c - the growable byte buffer of buf.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "flashtrie.h"

void ft_buf_init(ft_buf *b)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

void ft_buf_free(ft_buf *b)
{
    free(b->data);
    ft_buf_init(b);
}

int ft_buf_reserve(ft_buf *b, size_t n)
{
    if (n > SIZE_MAX - b->len - 1)
        return FT_ENOMEM;
    size_t need = b->len + n + 1; /* room for a trailing NUL */
    if (need <= b->cap)
        return FT_OK;
    size_t c = b->cap ? b->cap : 256;
    while (c < need)
        c = c > SIZE_MAX / 2 ? need : c * 2;
    unsigned char *p = realloc(b->data, c);
    if (p == NULL)
        return FT_ENOMEM;
    b->data = p;
    b->cap = c;
    return FT_OK;
}

int ft_buf_append(ft_buf *b, const void *p, size_t n)
{
    if (ft_buf_reserve(b, n) != FT_OK)
        return FT_ENOMEM;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
    return FT_OK;
}

int ft_buf_vprintf(ft_buf *b, const char *fmt, va_list ap)
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

int ft_buf_printf(ft_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = ft_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

int ft_buf_put_u8(ft_buf *b, uint8_t v) { return ft_buf_append(b, &v, 1); }

int ft_buf_put_u16(ft_buf *b, uint16_t v)
{
    unsigned char x[2] = {(unsigned char)v, (unsigned char)(v >> 8)};
    return ft_buf_append(b, x, 2);
}

int ft_buf_put_u32(ft_buf *b, uint32_t v)
{
    unsigned char x[4];
    for (int i = 0; i < 4; i++)
        x[i] = (unsigned char)(v >> (8 * i));
    return ft_buf_append(b, x, 4);
}

int ft_buf_put_u64(ft_buf *b, uint64_t v)
{
    unsigned char x[8];
    for (int i = 0; i < 8; i++)
        x[i] = (unsigned char)(v >> (8 * i));
    return ft_buf_append(b, x, 8);
}

int ft_buf_put_f32(ft_buf *b, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    return ft_buf_put_u32(b, u);
}

int ft_buf_put_f64(ft_buf *b, double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    return ft_buf_put_u64(b, u);
}
