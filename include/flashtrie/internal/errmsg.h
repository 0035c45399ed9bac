/*
 * errmsg.h - the one error-message helper.  Every fallible function of
 * the code base returns an ft_err code and writes one line naming what is
 * wrong and where into a caller's optional buffer (errbuf, errlen); this
 * is how it writes it.  Ground floor: header-only, uses nothing but libc.
 *
 *   fti_errf(errbuf, errlen, "%s: line %zu: bad token", path, line);
 *   FT_RETURN_ERROR_IF(n > max, FT_ELIMIT, "T = %u exceeds %u", n, max);
 */
#ifndef FTI_ERRMSG_H
#define FTI_ERRMSG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/* fti_verrf writes a formatted message into buf (len bytes, always NUL
 * terminated); a NULL buf or a zero len writes nothing. */
static inline void fti_verrf(char *buf, size_t len, const char *fmt, va_list ap)
{
    if (buf == NULL || len == 0)
        return;
    vsnprintf(buf, len, fmt, ap);
}

/* fti_oneline replaces control characters in the message buf with '?', so
 * that a message quoting its input (a newline inside a string of a config
 * file or a request) stays one line. */
static inline void fti_oneline(char *buf)
{
    for (unsigned char *p = (unsigned char *)buf; p != NULL && *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            *p = '?';
}

/* fti_errf is fti_verrf with its arguments inline. */
static inline void fti_errf(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline void fti_errf(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fti_verrf(buf, len, fmt, ap);
    va_end(ap);
}

/* FT_RETURN_ERROR_IF returns err from the enclosing function, with the
 * message in its errbuf/errlen, when cond holds. */
#define FT_RETURN_ERROR_IF(cond, err, ...)                                    \
    do {                                                                      \
        if (cond) {                                                           \
            fti_errf(errbuf, errlen, __VA_ARGS__);                            \
            return (err);                                                     \
        }                                                                     \
    } while (0)

#endif /* FTI_ERRMSG_H */
