"""flashtrie._lib - loads libflashtrie_client and declares its functions.

The structs mirror include/flashtrie.h and include/flashtrie_client.h
field for field (ctypes applies the same C alignment rules), so the
library is used as it is, with no compiled extension.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os

ENV = "FLASHTRIE_CLIENT_LIB"


class Request(ctypes.Structure):
    """ft_request of include/flashtrie.h."""

    _fields_ = [
        ("T", ctypes.c_uint32),
        ("K", ctypes.c_uint32),
        ("tokens", ctypes.POINTER(ctypes.c_uint32)),
        ("logp", ctypes.POINTER(ctypes.c_float)),
        ("beam", ctypes.c_uint32),
        ("results", ctypes.c_uint32),
        ("theta_tok", ctypes.c_float),
        ("theta_sent", ctypes.c_float),
        ("alpha", ctypes.c_double),
    ]


class Hit(ctypes.Structure):
    """ft_hit of include/flashtrie.h."""

    _fields_ = [
        ("len", ctypes.c_uint32),
        ("tok_off", ctypes.c_uint32),
        ("value", ctypes.c_uint64),
        ("score", ctypes.c_double),
        ("sigma", ctypes.c_float),
        ("order", ctypes.c_uint32),
        ("key_index", ctypes.c_uint64),
    ]


class Result(ctypes.Structure):
    """ft_result of include/flashtrie.h."""

    _fields_ = [
        ("n", ctypes.c_uint32),
        ("cap_hits", ctypes.c_uint32),
        ("cap_tokens", ctypes.c_uint32),
        ("hits", ctypes.POINTER(Hit)),
        ("tokens", ctypes.POINTER(ctypes.c_uint32)),
        ("status", ctypes.c_int),
        ("error", ctypes.c_char * 160),
    ]


class ClientOpts(ctypes.Structure):
    """ft_client_opts of include/flashtrie_client.h."""

    _fields_ = [
        ("timeout_ms", ctypes.c_int),
        ("connect_wait_ms", ctypes.c_int),
        ("deadline_ms", ctypes.c_uint32),
        ("tls_ca", ctypes.c_char_p),
        ("tls_cert", ctypes.c_char_p),
        ("tls_key", ctypes.c_char_p),
        ("tls_server_name", ctypes.c_char_p),
        ("tls_insecure", ctypes.c_int),
        ("reconnect_wait_ms", ctypes.c_int),
        ("recv_max_bytes", ctypes.c_size_t),
        ("checksum", ctypes.c_int),
        ("connections", ctypes.c_int),
        ("coalesce", ctypes.c_int),
    ]


class Columns(ctypes.Structure):
    """ft_client_columns of include/flashtrie_client.h: where
    ft_client_results_columns writes (column pointers as addresses)."""

    _fields_ = [
        ("rows", ctypes.c_uint32),
        ("width", ctypes.c_uint32),
        ("n", ctypes.c_void_p),
        ("status", ctypes.c_void_p),
        ("tokens", ctypes.c_void_p),
        ("len", ctypes.c_void_p),
        ("value", ctypes.c_void_p),
        ("score", ctypes.c_void_p),
        ("sigma", ctypes.c_void_p),
        ("tokens_stride", ctypes.c_size_t),
        ("len_stride", ctypes.c_size_t),
        ("value_stride", ctypes.c_size_t),
        ("score_stride", ctypes.c_size_t),
        ("sigma_stride", ctypes.c_size_t),
    ]


class RequestAddr(ctypes.Structure):
    """ft_request with its grid pointers as plain addresses (ints): set
    from an array's address with no ctypes.cast."""

    _fields_ = [
        ("T", ctypes.c_uint32),
        ("K", ctypes.c_uint32),
        ("tokens", ctypes.c_void_p),
        ("logp", ctypes.c_void_p),
        ("beam", ctypes.c_uint32),
        ("results", ctypes.c_uint32),
        ("theta_tok", ctypes.c_float),
        ("theta_sent", ctypes.c_float),
        ("alpha", ctypes.c_double),
    ]


class GridCall(ctypes.Structure):
    """ft_client_grid_call of include/flashtrie_client.h (pointers as
    addresses)."""

    _fields_ = [
        ("client", ctypes.c_void_p),
        ("grids", RequestAddr),
        ("n", ctypes.c_size_t),
        ("errbuf", ctypes.c_void_p),
        ("errlen", ctypes.c_size_t),
        ("cols", Columns),
        ("results", ctypes.c_void_p),
        ("max_hits", ctypes.c_uint32),
        ("max_len", ctypes.c_uint32),
        ("failed", ctypes.c_uint32),
        ("first_status", ctypes.c_uint32),
    ]


def _install_prefix(here):
    """_install_prefix returns the prefix a package installed at
    PREFIX/lib*/pythonX.Y/{site,dist}-packages/flashtrie lives in (where
    "cmake --install" into the same prefix put libflashtrie_client), or
    None for a package elsewhere (a source tree)."""
    pkgs = os.path.dirname(here)
    if os.path.basename(pkgs) not in ("site-packages", "dist-packages"):
        return None
    pydir = os.path.dirname(pkgs)
    if not os.path.basename(pydir).startswith("python"):
        return None
    return os.path.dirname(os.path.dirname(pydir))


def _candidates():
    """_candidates yields the places to load the library from, in order:
    $FLASHTRIE_CLIENT_LIB, a copy next to this package, the library
    directories of the prefix the package is installed in (lib, lib64,
    lib/<multiarch>), the system's search path (ldconfig's cache and
    $LD_LIBRARY_PATH)."""
    env = os.environ.get(ENV)
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    for pattern in ("libflashtrie_client.so", "libflashtrie_client.so.*",
                    "libflashtrie_client.dylib"):
        for path in sorted(glob.glob(os.path.join(here, pattern))):
            yield path
    prefix = _install_prefix(here)
    if prefix:
        for libdir in ("lib", "lib64", os.path.join("lib", "*")):
            for name in ("libflashtrie_client.so.0",
                         "libflashtrie_client.so",
                         "libflashtrie_client.dylib"):
                for path in sorted(glob.glob(
                        os.path.join(prefix, libdir, name))):
                    yield path
    found = ctypes.util.find_library("flashtrie_client")
    if found:
        yield found


def _declare(lib):
    c_int, c_size_t, c_char_p, c_void_p = (ctypes.c_int, ctypes.c_size_t,
                                           ctypes.c_char_p, ctypes.c_void_p)
    P = ctypes.POINTER
    sig = {
        "ft_client_opts_init": (None, [P(ClientOpts)]),
        "ft_client_connect": (c_int, [P(c_void_p), c_char_p, P(ClientOpts),
                                      c_char_p, c_size_t]),
        "ft_client_close": (None, [c_void_p]),
        "ft_client_search": (c_int, [c_void_p, P(Request), c_size_t,
                                     P(c_void_p), c_char_p, c_size_t]),
        "ft_client_results_count": (c_size_t, [c_void_p]),
        "ft_client_results_get": (P(Result), [c_void_p, c_size_t]),
        "ft_client_results_free": (None, [c_void_p]),
        "ft_client_ping": (c_int, [c_void_p, c_char_p, c_size_t]),
        # The INFO text is a malloc'ed char *: declared as a void pointer
        # so that ctypes does not convert (and lose) it before it is freed.
        "ft_client_info": (c_int, [c_void_p, P(c_void_p), c_char_p,
                                   c_size_t]),
        "ft_client_text_free": (None, [c_void_p]),
        "ft_client_reload": (c_int, [c_void_p, c_char_p, c_char_p, c_size_t]),
        # The array form, on the hot path of every search: pointers are
        # passed as plain addresses (ints), which ctypes converts fastest.
        "ft_client_search_grids": (c_int, [c_void_p, c_void_p, c_size_t,
                                           c_void_p, c_char_p, c_size_t]),
        "ft_client_results_shape": (c_size_t, [c_void_p, c_size_t,
                                               c_size_t, c_void_p,
                                               c_void_p]),
        "ft_client_results_columns": (c_int, [c_void_p, c_size_t, c_size_t,
                                              c_void_p, c_char_p, c_size_t]),
        # The same in two calls of one argument (a ft_client_grid_call's
        # address): the fewest crossings per search.
        "ft_client_grid_search": (c_int, [c_void_p]),
        "ft_client_grid_columns": (c_int, [c_void_p]),
    }
    for name, (res, args) in sig.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    return lib


_LIB = None
_LIB_ERROR = None


def load():
    """load returns the loaded library (once per process), or raises
    OSError saying where it looked and why each place failed."""
    global _LIB, _LIB_ERROR
    if _LIB is not None:
        return _LIB
    tried = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s: %s" % (path, e))
            continue
        try:
            _LIB = _declare(lib)
        except AttributeError as e:
            tried.append("%s: not the FlashTrie client library (%s)"
                         % (path, e))
            continue
        return _LIB
    where = "; ".join(tried) if tried else (
        "not next to the package (%s) and not on the system's search path"
        % os.path.dirname(os.path.abspath(__file__)))
    raise OSError("flashtrie: cannot load libflashtrie_client: %s (set %s "
                  "to the built libflashtrie_client.so)" % (where, ENV))


def path_of(lib) -> str:
    """path_of returns the file the library was loaded from."""
    return lib._name
