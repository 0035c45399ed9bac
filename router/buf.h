/*
 * buf.h - a growable byte buffer: what the codecs (JSON lines, binary
 * frames) encode into, so that the CLI, the server and the client share one
 * encoder and none of them needs a FILE *.
 */
#ifndef FT_BUF_H
#define FT_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ft_buf {
    unsigned char *data; /* len bytes in use, cap allocated; NUL after len
                          * whenever cap > len (ft_buf_printf keeps one) */
    size_t len;
    size_t cap;
} ft_buf;

/* ft_buf_init makes b empty without allocating. */
void ft_buf_init(ft_buf *b);
/* ft_buf_free releases b's memory and leaves it empty. */
void ft_buf_free(ft_buf *b);
/* ft_buf_reserve makes room for n more bytes.  FT_ENOMEM if it cannot. */
int ft_buf_reserve(ft_buf *b, size_t n);
/* ft_buf_append appends n bytes. */
int ft_buf_append(ft_buf *b, const void *p, size_t n);
/* ft_buf_printf appends formatted text (no NUL counted in len). */
int ft_buf_printf(ft_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int ft_buf_vprintf(ft_buf *b, const char *fmt, va_list ap);
/* Little-endian appends of fixed-width integers and floats. */
int ft_buf_put_u8(ft_buf *b, uint8_t v);
int ft_buf_put_u16(ft_buf *b, uint16_t v);
int ft_buf_put_u32(ft_buf *b, uint32_t v);
int ft_buf_put_u64(ft_buf *b, uint64_t v);
int ft_buf_put_f32(ft_buf *b, float v);
int ft_buf_put_f64(ft_buf *b, double v);

#endif /* FT_BUF_H */
