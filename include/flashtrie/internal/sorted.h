/*
 * sorted.h - searches in sorted arrays.  Ground floor: header-only, uses
 * nothing but libc's types.
 *
 * fti_lower_bound_u64(a, n, key) is how many of the sorted a[0..n) are
 * below key (the first place key could go).
 */
#ifndef FTI_SORTED_H
#define FTI_SORTED_H

#include <stddef.h>
#include <stdint.h>

static inline size_t fti_lower_bound_u64(const uint64_t *a, size_t n,
                                         uint64_t key)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

#endif
