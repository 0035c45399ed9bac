/*
 * bits.h - the bit patterns of floats and doubles, as the wire formats
 * carry them (f32 and f64 fields are their IEEE 754 bits, little-endian).
 * Ground floor: header-only, uses nothing but libc.
 *
 * fti_f2u(f) is the bits of a float and fti_u2f(u) the float of bits;
 * fti_d2u / fti_u2d the same for doubles.  memcpy, not a union or a cast
 * of pointers, so that no aliasing rule is broken; compilers make it one
 * move.
 */
#ifndef FTI_BITS_H
#define FTI_BITS_H

#include <stdint.h>
#include <string.h>

/* FTI_BITCAST defines name(x), the value of type to with the bytes of x. */
#define FTI_BITCAST(name, to, from)                                           \
    static inline to name(from x)                                             \
    {                                                                         \
        _Static_assert(sizeof(to) == sizeof(from), #name ": sizes differ");  \
        to y;                                                                 \
        memcpy(&y, &x, sizeof y);                                             \
        return y;                                                             \
    }

FTI_BITCAST(fti_f2u, uint32_t, float)
FTI_BITCAST(fti_u2f, float, uint32_t)
FTI_BITCAST(fti_d2u, uint64_t, double)
FTI_BITCAST(fti_u2d, double, uint64_t)

#endif
