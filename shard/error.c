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

