/* version.c - ft_version: the version of the linked library, which the
 * build generates from the project version (flashtrie_version.h). */
#include "flashtrie.h"

void ft_version(int *major, int *minor, int *patch)
{
    if (major)
        *major = FT_VERSION_MAJOR;
    if (minor)
        *minor = FT_VERSION_MINOR;
    if (patch)
        *patch = FT_VERSION_PATCH;
}

const char *ft_version_string(void)
{
    return FT_VERSION_STRING;
}
