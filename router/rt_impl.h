/*
 * rt_impl.h - the private helpers of router/: error-buffer formatting.
 * router/ sees only the public headers and the host+device headers of
 * shard/device; these few macros are its own.
 */
#ifndef FT_RT_IMPL_H
#define FT_RT_IMPL_H

#include <stdio.h>

/* RT_ERRF writes a formatted message into an optional error buffer. */
#define RT_ERRF(buf, len, ...)                                                \
    do {                                                                      \
        if ((buf) != NULL && (len) > 0)                                       \
            snprintf((buf), (len), __VA_ARGS__);                              \
    } while (0)

/* RT_RETURN_ERROR_IF returns err after writing the message to errbuf when
 * cond holds.  Expects errbuf/errlen in scope. */
#define RT_RETURN_ERROR_IF(cond, err, ...)                                    \
    do {                                                                      \
        if (cond) {                                                           \
            RT_ERRF(errbuf, errlen, __VA_ARGS__);                             \
            return (err);                                                     \
        }                                                                     \
    } while (0)

#endif /* FT_RT_IMPL_H */
