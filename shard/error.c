/* error.c - ft_strerror and error-buffer formatting. */
#include "ft_impl.h"

const char *ft_strerror(int err)
{
    switch (err) {
    case FT_OK: return "ok";
    case FT_ENOMEM: return "out of memory";
    case FT_EINVAL: return "invalid argument";
    case FT_EIO: return "input/output error";
    case FT_EPARSE: return "malformed keys input";
    case FT_EFORMAT: return "not a FlashTrie index or damaged index";
    case FT_ECHECKSUM: return "index section checksum mismatch";
    case FT_EVERSION: return "unsupported index format version";
    case FT_ETRUNC: return "index file truncated";
    case FT_ELIMIT: return "limit exceeded";
    case FT_ENOTFOUND: return "not found";
    case FT_EREQUEST: return "invalid search request";
    case FT_ENODEV: return "no usable GPU";
    case FT_ECUDA: return "CUDA error";
    case FT_ENCCL: return "NCCL error";
    case FT_ENOTSUP: return "not supported";
    case FT_EBUSY: return "busy";
    case FT_EINTERNAL: return "internal error";
    case FT_ESTATE: return "invalid state";
    case FT_EPROTO: return "malformed message";
    case FT_EDEADLINE: return "deadline exceeded";
    case FT_ETIMEDOUT: return "timed out";
    case FT_ECONN: return "connection failed";
    case FT_EPERM: return "not permitted";
    case FT_ECONFIG: return "invalid configuration";
    case FT_ESHUTDOWN: return "server shutting down";
    case FT_EMANIFEST: return "bad shard manifest";
    default: return "unknown error";
    }
}

const char *ft_err_name(int err)
{
    /* Indexed by value: ft_err's values are stable and dense. */
    static const char *const names[] = {
        "FT_OK",        "FT_ENOMEM",    "FT_EINVAL",    "FT_EIO",
        "FT_EPARSE",    "FT_EFORMAT",   "FT_ECHECKSUM", "FT_EVERSION",
        "FT_ETRUNC",    "FT_ELIMIT",    "FT_ENOTFOUND", "FT_EREQUEST",
        "FT_ENODEV",    "FT_ECUDA",     "FT_ENCCL",     "FT_ENOTSUP",
        "FT_EBUSY",     "FT_EINTERNAL", "FT_ESTATE",    "FT_EPROTO",
        "FT_EDEADLINE", "FT_ETIMEDOUT", "FT_ECONN",     "FT_EPERM",
        "FT_ECONFIG",   "FT_ESHUTDOWN", "FT_EMANIFEST"};
    _Static_assert(sizeof names / sizeof names[0] == FT_EMANIFEST + 1,
                   "ft_err_name: one name per ft_err");
    if (err < 0 || (size_t)err >= sizeof names / sizeof names[0])
        return NULL;
    return names[err];
}
