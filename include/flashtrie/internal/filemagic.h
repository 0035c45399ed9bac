/*
 * filemagic.h - whether a file starts with one of the project's 8-byte
 * magics ("FLSHTRIE" an index, "FTSHARDS" a shard manifest), for the
 * callers that choose what to do with a path before opening it.
 */
#ifndef FT_INTERNAL_FILEMAGIC_H
#define FT_INTERNAL_FILEMAGIC_H

#include <stdio.h>
#include <string.h>

/* fti_file_has_magic: 1 when the file at path can be read and its first
 * 8 bytes are magic; else 0. */
static inline int fti_file_has_magic(const char *path, const char magic[8])
{
    char head[8];
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return 0;
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    return n == sizeof head && memcmp(head, magic, 8) == 0;
}

#endif /* FT_INTERNAL_FILEMAGIC_H */
