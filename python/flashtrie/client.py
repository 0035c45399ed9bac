"""flashtrie.client - the Client class: searches, INFO, PING and RELOAD
over the C client library (include/flashtrie_client.h) through ctypes.

A Client may be shared by many threads: the C handle runs every call on an
nng context of its own, and ctypes releases the GIL while a call waits, so
calls from several threads travel to the server at once.  close() waits
for the calls in flight to return (each is bounded by the timeout) before
it frees the handle, so closing from one thread while another searches is
safe; calls after close() raise StateError.
"""
from __future__ import annotations

import ctypes
import math
import operator
import os
from operator import getitem as _getitem
import re
import struct
import threading
import warnings
from itertools import repeat
from typing import (Any, Dict, List, NamedTuple, Optional, Sequence, Tuple,
                    Union)

import numpy as np

from . import _lib
from .errors import FT_ESTATE, Error, StateError, error_for

MAX_T = 64            # positions per request (the wire format's limit)
MAX_K = 4096          # proposals per position
MAX_BATCH = 1024      # requests per SEARCH frame
_MAX_BEAM = 4096      # beam, 1..4096 (docs/specification.md section 3)
_MAX_RESULTS = 4096   # results, 1..4096
_U32 = 2 ** 32 - 1
_ERRLEN = 1024


class Hit(NamedTuple):
    """Hit is one answer of a search: the key's tokens, its value, its
    score (binary64) and sigma, the sum of its log-probs (binary32,
    widened to a Python float exactly)."""

    tokens: tuple
    value: int
    score: float
    sigma: float


class TLS(NamedTuple):
    """TLS settings of a tls+tcp:// connection: ca (a PEM file to verify the
    server with; required unless insecure), cert (one PEM holding the
    client certificate and its key), server_name (the name checked in the
    server's certificate; None: the URL's host), insecure (True: connect
    without a ca, accepting any server certificate; a warning says so)."""

    ca: Optional[str] = None
    cert: Optional[str] = None
    server_name: Optional[str] = None
    insecure: bool = False


def hit_dtype(max_len: int) -> np.dtype:
    """hit_dtype returns the structured dtype of as_array results: tokens
    padded with zeros to max_len, len the key's true length."""
    return np.dtype([("tokens", np.uint32, (max_len,)), ("len", np.uint32),
                     ("value", np.uint64), ("score", np.float64),
                     ("sigma", np.float32)])


# hit_dtype(width) built once per width (1..255 at most), with the byte
# offsets of its fields, for ft_client_results_columns to write into.
_HIT_DTYPES: Dict[int, Tuple[np.dtype, int, int, int, int, int]] = {}


def _hit_layout(width: int):
    lay = _HIT_DTYPES.get(width)
    if lay is None:
        dt = hit_dtype(width)
        lay = (dt,) + tuple(dt.fields[f][1] for f in
                            ("tokens", "len", "value", "score",
                             "sigma")) + (dt.itemsize,)
        _HIT_DTYPES[width] = lay
    return lay


_U32_DTYPE = np.dtype(np.uint32)
_F32_DTYPE = np.dtype(np.float32)
_U64_DTYPE = np.dtype(np.uint64)
_F64_DTYPE = np.dtype(np.float64)
_I32_DTYPE = np.dtype(np.int32)
_U8_DTYPE = np.dtype(np.uint8)
_ND = np.ndarray


_RawRequest = _lib.RequestAddr   # ft_request, grid pointers as ints


class _RawResult(ctypes.Structure):
    """ft_result with its pointers as plain addresses (ints), so reading
    them builds no ctypes pointer object."""

    _fields_ = [
        ("n", ctypes.c_uint32),
        ("cap_hits", ctypes.c_uint32),
        ("cap_tokens", ctypes.c_uint32),
        ("hits", ctypes.c_void_p),
        ("tokens", ctypes.c_void_p),
        ("status", ctypes.c_int),
        ("error", ctypes.c_char * 160),
    ]


assert ctypes.sizeof(_RawResult) == ctypes.sizeof(_lib.Result)
assert ctypes.sizeof(_RawRequest) == ctypes.sizeof(_lib.Request)
assert all(getattr(_RawRequest, f).offset == getattr(_lib.Request, f).offset
           for f, _ in _lib.Request._fields_)


_c_char_at = ctypes.c_char.from_buffer
_addressof = ctypes.addressof


def _addr(a: np.ndarray) -> int:
    """_addr is the address of a C-contiguous array's first byte.  A
    one-byte ctypes view of a writable array tells it in a third of what
    a.__array_interface__ or a.ctypes.data costs (each builds a dict or a
    helper object); a read-only array is asked the slower way."""
    try:
        return _addressof(_c_char_at(a))
    except (TypeError, ValueError):   # read-only, or no byte at all
        return a.__array_interface__["data"][0]


def _text(buf) -> str:
    return buf.value.decode("utf-8", "replace")


def _uint(name: str, v: Any, lo: int = 0, hi: int = _U32,
          limit: Optional[int] = None) -> int:
    """_uint reads an integer argument that the wire format carries as a
    u32; the protocol's own ranges are the server's to check.  A count
    with a limit (beam, results: 1..limit) that cannot be sent is refused
    with the message the server's validator gives for one out of range."""
    if isinstance(v, (float, np.floating)):
        raise TypeError("%s: must be an integer, got %r" % (name, v))
    try:
        i = operator.index(v)
    except TypeError:
        raise TypeError("%s: must be an integer, got %s"
                        % (name, type(v).__name__)) from None
    if i < lo or i > hi:
        if limit is not None:
            lo, hi = 1, limit
        raise ValueError("%s: must be %d..%d, got %d" % (name, lo, hi, i))
    return i


def _real(name: str, v: Any) -> float:
    if isinstance(v, (bool, np.bool_)) or not isinstance(
            v, (int, float, np.integer, np.floating)):
        raise TypeError("%s: must be a real number, got %s"
                        % (name, type(v).__name__))
    return float(v)


def _seconds_ms(name: str, v: Any, allow_zero: bool) -> int:
    s = _real(name, v)
    if not math.isfinite(s) or s < 0 or (s == 0 and not allow_zero):
        raise ValueError("%s: must be a positive number of seconds, got %r"
                         % (name, v))
    ms = int(math.ceil(s * 1000))
    if ms > 2 ** 31 - 1:
        raise ValueError("%s: at most %d seconds, got %r"
                         % (name, (2 ** 31 - 1) // 1000, v))
    return ms


def _cstr(name: str, v: Any, path: bool = False) -> bytes:
    """_cstr encodes a text argument for the C library, which reads it up
    to its first NUL: one inside it would silently cut it (a reload of
    another file, a dial of another address), so it is refused.  A path
    may be str, bytes or os.PathLike (os.fsencode)."""
    if path:
        try:
            b = os.fsencode(v)
        except TypeError:
            raise TypeError("%s: must be a str, bytes or os.PathLike, got %s"
                            % (name, type(v).__name__)) from None
    elif isinstance(v, str):
        b = v.encode()
    else:
        raise TypeError("%s: must be a str, got %s" % (name, type(v).__name__))
    z = b.find(b"\0")
    if z >= 0:
        raise ValueError("%s: NUL byte at byte %d of %r" % (name, z, v))
    return b


def _shape(a: np.ndarray) -> str:
    return str(tuple(int(d) for d in a.shape))


def _grids(tokens: Any, logp: Any, ndim: int, where: str):
    """_grids checks and converts one request's grids (ndim 2: (T, K)) or a
    batch's (ndim 3: (b, T, K)) into C-contiguous uint32 and float32
    arrays.  Every fault is raised here, before anything is sent."""
    # The fast path first: exact ndarrays, uint32 and float32 (their
    # dtypes are numpy's singletons), C-contiguous, of a shape in range,
    # are sent from where they are (no conversion, no copy).
    if type(tokens) is _ND and type(logp) is _ND and \
            tokens.dtype is _U32_DTYPE and logp.dtype is _F32_DTYPE:
        sh = tokens.shape
        if sh == logp.shape and len(sh) == ndim and \
                0 < sh[-2] <= MAX_T and 0 < sh[-1] <= MAX_K and \
                (ndim == 2 or 0 < sh[0] <= MAX_BATCH) and \
                tokens.flags.c_contiguous and logp.flags.c_contiguous:
            return tokens, logp
    want = "(T, K)" if ndim == 2 else "(b, T, K)"
    tok = np.asarray(tokens)
    lp = np.asarray(logp)
    if tok.ndim != ndim:
        raise ValueError("%stokens: expected a %d-D array of shape %s, got "
                         "shape %s" % (where, ndim, want, _shape(tok)))
    if lp.shape != tok.shape:
        raise ValueError("%slogp: shape %s does not match tokens %s"
                         % (where, _shape(lp), _shape(tok)))
    if ndim == 3 and not 1 <= tok.shape[0] <= MAX_BATCH:
        raise ValueError("%sbatch: must hold 1..%d requests, got %d"
                         % (where, MAX_BATCH, tok.shape[0]))
    T, K = tok.shape[-2], tok.shape[-1]
    # Grids already uint32 and float32, C-contiguous (subclasses, equal
    # dtypes that are other objects) are sent as they are too.
    if tok.dtype == _U32_DTYPE and lp.dtype == _F32_DTYPE and \
            tok.flags.c_contiguous and lp.flags.c_contiguous and \
            1 <= T <= MAX_T and 1 <= K <= MAX_K:
        return tok, lp
    if not 1 <= T <= MAX_T:
        raise ValueError("%stokens: T (positions) must be 1..%d, got %d"
                         % (where, MAX_T, T))
    if not 1 <= K <= MAX_K:
        raise ValueError("%stokens: K (proposals) must be 1..%d, got %d"
                         % (where, MAX_K, K))
    if tok.dtype.kind not in "iu":
        raise TypeError("%stokens: must be integers convertible to uint32, "
                        "got dtype %s" % (where, tok.dtype))
    if lp.dtype.kind not in "fiu":
        raise TypeError("%slogp: must be real numbers convertible to "
                        "float32, got dtype %s" % (where, lp.dtype))
    if tok.dtype != np.uint32:
        bad = (tok < 0) | (tok > _U32)
        if bad.any():
            pos = np.argwhere(bad)[0]
            raise ValueError("%stokens: %s: %d is not a uint32"
                             % (where, _pos(pos), int(tok[tuple(pos)])))
    tok = np.ascontiguousarray(tok, dtype=np.uint32)
    # A log-prob beyond binary32's range becomes inf, as a JSON number
    # does; the server's validator refuses it by position.
    with np.errstate(over="ignore"):
        lp = np.ascontiguousarray(lp, dtype=np.float32)
    return tok, lp


def _pos(pos) -> str:
    p = [int(x) for x in pos]
    s = "position %d, proposal %d" % (p[-2], p[-1])
    return s if len(p) == 2 else "request %d, %s" % (p[0], s)


class _Params:
    """_Params holds one call's search parameters, checked once."""

    __slots__ = ("beam", "results", "theta_tok", "theta_sent", "alpha")

    def __init__(self, beam, results, theta_tok, theta_sent, alpha):
        # Plain ints and floats are taken as they are (the common case,
        # checked in a few operations); anything else goes through the
        # checks and conversions of _uint and _real.
        # Counts the wire carries are sent and checked by the server
        # (beam 0 and 4097 too); results 0 would be read there as absent,
        # so it is refused here, with the server's own message.
        self.beam = beam if type(beam) is int and 0 <= beam <= _U32 \
            else _uint("beam", beam, limit=_MAX_BEAM)
        if results is None:
            self.results = 0      # the wire's "absent": as many as beam
        elif type(results) is int and 1 <= results <= _U32:
            self.results = results
        else:
            self.results = _uint("results", results, 1, limit=_MAX_RESULTS)
        # float32 on the wire: the c_float fields of the request round
        # the binary64 value to nearest (C's conversion, which is what
        # np.float32 does too, and what strtod-then-binary32 does to a
        # JSON number; beyond binary32's range it is +-inf).
        self.theta_tok = theta_tok if type(theta_tok) is float \
            else _real("theta_tok", theta_tok)
        self.theta_sent = theta_sent if type(theta_sent) is float \
            else _real("theta_sent", theta_sent)
        self.alpha = alpha if type(alpha) is float else _real("alpha",
                                                                 alpha)

    def fill(self, r: _lib.Request, T: int, K: int, tok_addr: int,
             lp_addr: int) -> None:
        r.T, r.K = T, K
        r.tokens = ctypes.cast(tok_addr, ctypes.POINTER(ctypes.c_uint32))
        r.logp = ctypes.cast(lp_addr, ctypes.POINTER(ctypes.c_float))
        r.beam, r.results = self.beam, self.results
        r.theta_tok, r.theta_sent, r.alpha = (self.theta_tok,
                                              self.theta_sent, self.alpha)


class BatchResult(NamedTuple):
    """BatchResult is the answer of search_arrays: B requests as arrays.
    n[i] hits for request i (0 when it failed), best first, in rows
    0..n[i] of tokens (B, R, L: R the most hits of any request, L the
    longest key, zero padded), len, value, score and sigma (B, R; zero
    past n[i]).  status[i] is 0, or the error code of a request the
    server rejected, whose Error is errors[i] (None for the others)."""

    n: np.ndarray
    tokens: np.ndarray
    len: np.ndarray
    value: np.ndarray
    score: np.ndarray
    sigma: np.ndarray
    status: np.ndarray
    errors: list


_INT = re.compile(r"-?[0-9]+\Z")
_FLOAT = re.compile(r"-?[0-9]+\.[0-9]+([eE][-+]?[0-9]+)?\Z")


def parse_info(text: str) -> Dict[str, Dict[str, Any]]:
    """parse_info turns INFO's sectioned text ("# section" headers, then
    "key: value" lines) into {section: {key: value}}; values that are
    integers or decimals become int or float, the others stay strings
    (the config section keeps "value (source)" as it is printed)."""
    out: Dict[str, Dict[str, Any]] = {}
    sec: Dict[str, Any] = out.setdefault("", {})
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("# "):
            sec = out.setdefault(line[2:].strip(), {})
            continue
        key, sep, val = line.partition(": ")
        if not sep:
            key, val = line.rstrip(":"), ""
        if _INT.match(val):
            sec[key] = int(val)
        elif _FLOAT.match(val):
            sec[key] = float(val)
        else:
            sec[key] = val
    if not out[""]:
        del out[""]
    return out


# The scratch block of the list form is dropped after a call that needed
# more than this, so that one huge answer does not pin its size.
_SCRATCH_KEEP = 1 << 20
# Parameters cached by identity only when they are of these immutable
# kinds (a 0-d array could change between two calls).
_IMMUTABLE = (int, float, type(None), np.generic)
_UNSET = object()


class _Scratch(threading.local):
    """_Scratch holds one thread's _Slot of a Client (made on the thread's
    first search, for the handle h): one threading.local lookup per call,
    then plain attributes."""

    def __init__(self, h: int):
        self.s = _Slot(h)


class _Slot:
    """_Slot is one thread's reusable ctypes state for a Client's
    searches: the ft_client_grid_call (the handle, the request template:
    shape, grid addresses, parameters; the columns descriptor; the shape
    and results it gets back), the out pointer, the error buffer, the
    shape counters and columns descriptors of the batch path, and the
    block the list form's columns are written to.  A thread runs one call
    at a time, so nothing here is shared; nothing in it outlives a call as
    seen by the caller (answers are copied out)."""

    __slots__ = ("call", "call_addr", "req", "req_addr", "c", "lay", "out",
                 "out_addr", "err", "dims", "dims_addr", "len_addr",
                 "one_n", "one_status", "cols", "cols_addr", "scols",
                 "scols_addr", "cap", "buf", "mv", "base", "key")

    def __init__(self, h: int):
        self.call = _lib.GridCall()
        self.call_addr = ctypes.addressof(self.call)
        self.call.client = h
        self.req = self.call.grids            # a view into call
        self.req_addr = ctypes.addressof(self.req)
        self.c = self.call.cols
        self.lay = -1      # the layout c's strides are set for: see _Slot
        self.out = ctypes.c_void_p()
        self.out_addr = ctypes.addressof(self.out)
        self.err = ctypes.create_string_buffer(_ERRLEN)
        self.call.errbuf = ctypes.addressof(self.err)
        self.call.errlen = _ERRLEN
        self.dims = (ctypes.c_uint32 * 4)()   # max hits, max len, n, status
        d = ctypes.addressof(self.dims)
        self.dims_addr, self.len_addr = d, d + 4
        self.one_n, self.one_status = d + 8, d + 12
        self.cols = _lib.Columns()            # packed columns
        self.cols_addr = ctypes.addressof(self.cols)
        self.scols = _lib.Columns()           # strided: one structured array
        self.scols_addr = ctypes.addressof(self.scols)
        self.scols.n, self.scols.status = self.one_n, self.one_status
        self.cap = 0
        self.buf = self.mv = None
        self.base = 0
        self.key = (_UNSET,) * 5

    def params(self, beam, results, theta_tok, theta_sent, alpha) -> None:
        """params checks a call's parameters and sets them in the request
        template, unless they are the very objects of the last call."""
        key = self.key
        if beam is key[0] and results is key[1] and theta_tok is key[2] \
                and theta_sent is key[3] and alpha is key[4]:
            return
        p = _Params(beam, results, theta_tok, theta_sent, alpha)
        q = self.req
        q.beam, q.results = p.beam, p.results
        q.theta_tok, q.theta_sent, q.alpha = (p.theta_tok, p.theta_sent,
                                              p.alpha)
        args = (beam, results, theta_tok, theta_sent, alpha)
        self.key = args if all(isinstance(a, _IMMUTABLE) for a in args) \
            else (_UNSET,) * 5

    def packed(self) -> None:
        """packed sets c's strides for separate packed columns (lay 0)."""
        c = self.c
        c.tokens_stride = c.len_stride = c.value_stride = c.score_stride = \
            c.sigma_stride = 0
        self.lay = 0

    def records(self, width: int, itemsize: int) -> None:
        """records sets c for one array of hit_dtype(width) (lay width):
        strides of its itemsize, no n and status columns."""
        c = self.c
        c.tokens_stride = c.len_stride = c.value_stride = c.score_stride = \
            c.sigma_stride = itemsize
        c.n = c.status = None
        c.width = width
        self.lay = width

    def block(self, nbytes: int) -> None:
        """block makes the scratch block at least nbytes long."""
        if nbytes > self.cap:
            cap = max(nbytes, 2 * self.cap, 4096)
            self.mv = None
            self.buf = ctypes.create_string_buffer(cap)
            self.base = ctypes.addressof(self.buf)
            self.mv = memoryview(self.buf).cast("B")
            self.cap = cap

    def trim(self) -> None:
        if self.cap > _SCRATCH_KEEP:
            self.mv = self.buf = None
            self.cap = self.base = 0


_tuple_new = tuple.__new__


def _list_offsets(n: int, width: int):
    """_list_offsets: where the list form's columns of n hits (keys of
    width tokens) start in the scratch block: scores, tokens, lengths,
    sigmas, then the count and status words (values at 0)."""
    o1, o2 = 8 * n, 16 * n
    o3 = o2 + n * 4 * width
    o4 = o3 + 4 * n
    return o1, o2, o3, o4, o4 + 4 * n


def _hits_list(columns, s: "_Slot", res: int, i: int, n: int, width: int) -> list:
    """_hits_list copies result i's n >= 1 hits (keys up to width tokens)
    into the scratch block in column form, one C call, and builds the list
    of Hit from it: no numpy, no Python loop over the hits."""
    o1, o2, o3, o4, o5 = _list_offsets(n, width)
    s.block(o5 + 8)
    base, c = s.base, s.cols
    c.rows, c.width = n, width
    c.value, c.score, c.tokens = base, base + o1, base + o2
    c.len, c.sigma = base + o3, base + o4
    c.n, c.status = base + o5, base + o5 + 4
    rc = columns(res, i, 1, s.cols_addr, s.err, _ERRLEN)
    if rc != 0:
        raise error_for(rc, _text(s.err))
    return _list_build(s, n, width, o1, o2, o3, o4, o5)


def _list_build(s: "_Slot", n: int, width: int, o1: int, o2: int, o3: int,
                o4: int, o5: int) -> list:
    """_list_build makes the list of Hit of the n hits whose columns are
    in s's block (values at 0, scores at o1, tokens at o2, lengths at o3,
    sigmas at o4)."""
    mv = s.mv
    values = mv[:o1].cast("Q").tolist()
    scores = mv[o1:o2].cast("d").tolist()
    lens = mv[o3:o4].cast("I").tolist()
    sigmas = mv[o4:o5].cast("f").tolist()
    # Each hit's width uint32 slots (native order, as the C library
    # wrote them) as one tuple, read straight from the block by struct
    # (whose own cache keeps the compiled format), cut to the key's
    # length where it is shorter (k[:len] mapped, no Python loop; a
    # full-length slice is k itself).  The iterator holds the block's
    # memory until the list is built, so the block is trimmed after.
    keys = struct.iter_unpack("=%dI" % width, mv[o2:o3])
    if min(lens) < width:
        keys = map(_getitem, keys, map(slice, lens))
    hits = list(map(_tuple_new, repeat(Hit, n),
                    zip(keys, values, scores, sigmas)))
    s.trim()
    return hits


def _grid_list(gcols, s: "_Slot", n: int, width: int) -> list:
    """_grid_list is _hits_list for the one result of s.call, written by
    ft_client_grid_columns (which frees the results)."""
    o1, o2, o3, o4, o5 = _list_offsets(n, width)
    s.block(o5 + 8)
    if s.lay:
        s.packed()
    base, c = s.base, s.c
    c.rows, c.width = n, width
    c.value, c.score, c.tokens = base, base + o1, base + o2
    c.len, c.sigma = base + o3, base + o4
    c.n, c.status = base + o5, base + o5 + 4
    rc = gcols(s.call_addr)
    if rc != 0:
        raise error_for(rc, _text(s.err))
    return _list_build(s, n, width, o1, o2, o3, o4, o5)


def _grid_array(gcols, s: "_Slot", n: int, width: int) -> np.ndarray:
    """_grid_array is _hits_array for the one result of s.call, written by
    ft_client_grid_columns (which frees the results)."""
    dt, ot, ol, ov, osc, osg, isz = _hit_layout(width)
    out = np.empty(n, dt)
    a = _addr(out)
    if s.lay != width:
        s.records(width, isz)
    c = s.c
    c.rows = n
    c.tokens, c.len, c.value, c.score, c.sigma = (a + ot, a + ol, a + ov,
                                                  a + osc, a + osg)
    rc = gcols(s.call_addr)
    if rc != 0:
        raise error_for(rc, _text(s.err))
    return out


def _hits_array(columns, s: "_Slot", res: int, i: int, n: int,
                width: int) -> np.ndarray:
    """_hits_array writes result i's n >= 1 hits straight into a new
    structured array of hit_dtype(width), one C call."""
    dt, ot, ol, ov, osc, osg, _ = _hit_layout(width)
    out = np.empty(n, dt)
    a = _addr(out)
    c = s.scols
    c.rows, c.width = n, width
    c.tokens, c.len, c.value, c.score, c.sigma = (a + ot, a + ol, a + ov,
                                                  a + osc, a + osg)
    c.tokens_stride = c.len_stride = c.value_stride = c.score_stride = \
        c.sigma_stride = dt.itemsize
    rc = columns(res, i, 1, s.scols_addr, s.err, _ERRLEN)
    if rc != 0:
        raise error_for(rc, _text(s.err))
    return out


Grid = Union[np.ndarray, Sequence]


class Client:
    """Client(url, timeout=10.0, tls=None, deadline=None, connect_wait=False,
    reconnect_wait=1.0, recv_max_bytes=None, checksum=None, connections=1,
    coalesce=16)
    connects to a FlashTrie server ("flashtrie serve") at url: tcp://,
    ipc:// or tls+tcp://.

    timeout: seconds each call waits for its answer.  deadline: seconds
    sent with every search (None: the server's default); a request still
    queued when it passes is answered DeadlineError.  tls: a TLS tuple (or
    a dict with its keys) for tls+tcp://: without a ca it is refused
    (Error, FT_EINVAL) unless insecure=True (then a warning says so).
    connect_wait: False fails at once (ConnectionError) when no server
    listens at url; True keeps dialing in the background, each call
    waiting up to its timeout: for scripts that start a server and wait on
    ping().

    A lost connection fails the calls in flight at once (ConnectionError,
    "connection lost"); a call made while it is lost waits up to
    reconnect_wait seconds (0: not at all) for the server to come back,
    then raises ConnectionError; once the server is back, calls succeed
    again.  recv_max_bytes bounds a reply (None: the largest the protocol
    allows); a larger one drops the connection.  checksum: XXH32 over each
    request frame and its answer; None (auto) sets it on tcp:// and
    tls+tcp:// and leaves it out on ipc:// and inproc://, True always,
    False never.  connections (1..64) is
    how many connections the client opens to the server: threads that
    share one client and call at once each use one that is not busy
    writing (one connection carries one message at a time each way:
    docs/BENCHMARKS.md, "Daemon overhead").  coalesce (0..64, default
    16): searches made at once from several threads share messages once
    N are in flight, the calls that come meanwhile leaving together in
    the next (each still gets its own results; a message the server
    refuses fails every call in it); fewer than N at once each go alone,
    at once.  0: each search is its own message.
    """

    def __init__(self, url: str, timeout: float = 10.0,
                 tls: Union[TLS, Dict[str, Any], None] = None,
                 deadline: Optional[float] = None,
                 connect_wait: bool = False,
                 reconnect_wait: float = 1.0,
                 recv_max_bytes: Optional[int] = None,
                 checksum: Optional[bool] = None,
                 connections: int = 1, coalesce: int = 16):
        self._lib = _lib.load()
        # ft_client_results_get returning a plain address: a _RawResult
        # is then read in place (from_address), no pointer object made.
        self._get = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p,
                                     ctypes.c_size_t)(
            ("ft_client_results_get", self._lib))
        lib = self._lib
        self._grid_search = lib.ft_client_grid_search
        self._grid_columns = lib.ft_client_grid_columns
        self._shape = lib.ft_client_results_shape
        self._columns = lib.ft_client_results_columns
        self._free = lib.ft_client_results_free
        # The calls in flight: one entry each in _inflight (list.append
        # and .pop are atomic), added before _closed is read; close() sets
        # _closed, then waits on _cv until _inflight is empty, so either
        # it sees a call's entry and waits for it or the call sees _closed
        # and does not start.  A call leaving after close() notifies _cv.
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._inflight: List[None] = []
        self._closed = True
        self._h = None
        if not isinstance(url, str):
            raise TypeError("url: must be a str, got %s" % type(url).__name__)
        self.url = url
        self.timeout = timeout
        opts = _lib.ClientOpts()
        self._lib.ft_client_opts_init(ctypes.byref(opts))
        opts.timeout_ms = _seconds_ms("timeout", timeout, False)
        opts.connect_wait_ms = 1 if connect_wait else 0
        if deadline is not None:
            opts.deadline_ms = _seconds_ms("deadline", deadline, False)
        rw = _seconds_ms("reconnect_wait", reconnect_wait, True)
        opts.reconnect_wait_ms = rw if rw > 0 else -1
        if recv_max_bytes is not None:
            opts.recv_max_bytes = _uint("recv_max_bytes", recv_max_bytes, 1,
                                        2 ** 63 - 1)
        if checksum is not None:
            if not isinstance(checksum, bool):
                raise TypeError("checksum: must be None, True or False, got "
                                "%s" % type(checksum).__name__)
            opts.checksum = 1 if checksum else -1
        opts.connections = _uint("connections", connections, 1, 64)
        opts.coalesce = _uint("coalesce", coalesce, 0, 64)
        t = None
        if tls is not None:
            t = TLS(**tls) if isinstance(tls, dict) else tls
            if not isinstance(t, TLS):
                raise TypeError("tls: must be a flashtrie.TLS or a dict, got "
                                "%s" % type(tls).__name__)
            enc = [None if v is None else
                   _cstr("tls." + f, v, f != "server_name")
                   for f, v in zip(t._fields, t[:3])]
            opts.tls_ca, opts.tls_cert, opts.tls_server_name = enc
            opts.tls_key = enc[1]
            opts.tls_insecure = 1 if t.insecure else 0
        # Without a CA the C library refuses tls+tcp:// (Error, FT_EINVAL)
        # unless insecure is set; then it connects, and the caller is told.
        if url.startswith("tls+") and t is not None and t.ca is None \
                and t.insecure:
            warnings.warn("flashtrie: %s: TLS with insecure=True: the "
                          "server's certificate is not verified" % url,
                          stacklevel=2)
        h = ctypes.c_void_p()
        err = ctypes.create_string_buffer(_ERRLEN)
        rc = self._lib.ft_client_connect(ctypes.byref(h), _cstr("url", url),
                                         ctypes.byref(opts), err, _ERRLEN)
        if rc != 0:
            raise error_for(rc, _text(err))
        self._h = h
        self._tls = _Scratch(h.value)
        self._closed = False

    # ---- lifetime ----

    def close(self) -> None:
        """close waits for the calls in flight, then closes the connection.
        Closing twice is harmless."""
        with self._cv:
            if self._closed:
                return
            self._closed = True
            while self._inflight:
                self._cv.wait()
            h, self._h = self._h, None
        self._lib.ft_client_close(h)

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return "flashtrie.Client(%r%s)" % (self.url,
                                           ", closed" if self._closed else "")

    def _enter(self):
        self._inflight.append(None)
        if self._closed:
            self._leave()
            raise StateError(FT_ESTATE, "client: closed")
        return self._h

    def _leave(self):
        self._inflight.pop()
        if self._closed:
            with self._cv:
                self._cv.notify_all()

    def _gsearch(self, s: "_Slot", n: int) -> None:
        """_gsearch runs the search of s.call for its template's n
        requests (grids back to back from its addresses, which the caller
        keeps alive): ft_client_grid_search, one call, which leaves the
        results (s.call.results: ft_client_grid_columns or self._free
        them) and their shape in s.call; raises when it fails."""
        s.call.n = n
        self._enter()
        try:
            rc = self._grid_search(s.call_addr)
        finally:
            self._leave()
        if rc != 0:
            raise error_for(rc, _text(s.err))

    # ---- search ----

    def search(self, tokens: Grid, logp: Grid, beam: int = 100,
               results: Optional[int] = None,
               theta_tok: float = -math.inf, theta_sent: float = -math.inf,
               alpha: float = 1.0, as_array: bool = False):
        """search sends one request: tokens and logp of shape (T, K)
        (proposal k at position t; tokens convertible to uint32, logp to
        float32).  Returns its hits, best first, as a list of Hit, or with
        as_array a structured array of hit_dtype.  A request the server
        rejects raises RequestError with the server's message."""
        tok, lp = _grids(tokens, logp, 2, "")
        s = self._tls.s
        s.params(beam, results, theta_tok, theta_sent, alpha)
        q = s.req
        q.T, q.K = tok.shape
        q.tokens, q.logp = _addr(tok), _addr(lp)
        self._gsearch(s, 1)
        call = s.call
        n = call.max_hits
        try:
            if n:
                if as_array:
                    return _grid_array(self._grid_columns, s, n,
                                       call.max_len)
                return _grid_list(self._grid_columns, s, n, call.max_len)
            if call.failed:
                r = _RawResult.from_address(self._get(call.results, 0))
                raise error_for(r.status, r.error.decode("utf-8",
                                                         "replace"))
        finally:
            if call.results:      # not freed by ft_client_grid_columns
                self._free(call.results)
                call.results = None
        return np.zeros(0, dtype=_hit_layout(1)[0]) if as_array else []

    def search_batch(self, tokens, logp=None, beam: int = 100,
                     results: Optional[int] = None,
                     theta_tok: float = -math.inf,
                     theta_sent: float = -math.inf, alpha: float = 1.0,
                     as_array: bool = False, errors: str = "raise"):
        """search_batch sends b requests in one SEARCH frame: tokens and
        logp of shape (b, T, K); or lists of b (T, K) grids; or, with logp
        left out, one list of b (tokens, logp) pairs (grids of different
        shapes).  The parameters apply to every request.  Returns one
        answer per request, in order, each as search() returns it.  With
        errors="raise" the first rejected request raises its error (its
        index in .index); with errors="return" its place holds the Error.
        """
        if errors not in ("raise", "return"):
            raise ValueError('errors: must be "raise" or "return", got %r'
                             % (errors,))
        p = _Params(beam, results, theta_tok, theta_sent, alpha)
        keep: List[np.ndarray] = []
        if logp is None:
            pairs = list(tokens) if not isinstance(tokens, np.ndarray) \
                else None
            if pairs is None:
                raise TypeError("search_batch: logp missing (give tokens "
                                "and logp, or a list of (tokens, logp) "
                                "pairs)")
            grids = []
            for i, pr in enumerate(pairs):
                if not (isinstance(pr, (tuple, list)) and len(pr) == 2):
                    raise TypeError("request %d: expected a (tokens, logp) "
                                    "pair, got %s" % (i, type(pr).__name__))
                grids.append(pr)
        elif isinstance(tokens, np.ndarray) or isinstance(logp, np.ndarray):
            tok, lp = _grids(tokens, logp, 3, "")
            s = self._tls.s
            s.params(beam, results, theta_tok, theta_sent, alpha)
            q = s.req
            b, q.T, q.K = tok.shape
            q.tokens, q.logp = _addr(tok), _addr(lp)
            self._gsearch(s, b)
            res, s.call.results = s.call.results, None
            return self._answers(s, res, b, as_array, errors)
        else:
            tl, ll = list(tokens), list(logp)
            if len(tl) != len(ll):
                raise ValueError("search_batch: %d token grids but %d logp "
                                 "grids" % (len(tl), len(ll)))
            grids = list(zip(tl, ll))
        if not 1 <= len(grids) <= MAX_BATCH:
            raise ValueError("batch: must hold 1..%d requests, got %d"
                             % (MAX_BATCH, len(grids)))
        reqs = (_lib.Request * len(grids))()
        for i, (t, l) in enumerate(grids):
            tok, lp = _grids(t, l, 2, "request %d: " % i)
            keep += [tok, lp]
            p.fill(reqs[i], tok.shape[0], tok.shape[1], _addr(tok),
                   _addr(lp))
        s = self._tls.s
        err = s.err
        h = self._enter()
        try:
            rc = self._lib.ft_client_search(h, reqs, len(grids),
                                            ctypes.byref(s.out), err,
                                            _ERRLEN)
        finally:
            self._leave()
        del keep
        if rc != 0:
            raise error_for(rc, _text(err))
        return self._answers(s, s.out.value, len(grids), as_array, errors)

    def search_arrays(self, tokens: Any, logp: Any, beam: int = 100,
                      results: Optional[int] = None,
                      theta_tok: float = -math.inf,
                      theta_sent: float = -math.inf,
                      alpha: float = 1.0) -> BatchResult:
        """search_arrays sends B requests in one SEARCH frame: tokens and
        logp of shape (B, T, K) (uint32 and float32, C-contiguous, are
        sent without a copy; others are converted as search() does), and
        returns their answers as arrays (BatchResult): no Python object
        per hit.  A request the server rejects does not raise: its status
        and errors[i] say why.  The arrays of one BatchResult are views
        of one block of memory that they keep alive together."""
        tok, lp = _grids(tokens, logp, 3, "")
        s = self._tls.s
        s.params(beam, results, theta_tok, theta_sent, alpha)
        q = s.req
        b, q.T, q.K = tok.shape
        q.tokens, q.logp = _addr(tok), _addr(lp)
        self._gsearch(s, b)
        call = s.call
        try:
            R, L = call.max_hits, call.max_len
            bR = b * R
            o1 = 8 * bR
            o2 = 2 * o1
            o3 = o2 + 4 * bR * L
            o4 = o3 + 4 * bR
            o5 = o4 + 4 * bR
            o6 = o5 + 4 * b
            block = np.empty(o6 + 4 * b, _U8_DTYPE)
            a = _addr(block)
            if s.lay:
                s.packed()
            c = s.c
            c.rows, c.width = R, L
            c.value, c.score, c.tokens, c.len, c.sigma, c.n, c.status = (
                a, a + o1, a + o2, a + o3, a + o4, a + o5, a + o6)
            errs = [None] * b
            if call.failed:     # their messages, before the results go
                res = call.results
                for i in range(b):
                    r = _RawResult.from_address(self._get(res, i))
                    if r.status != 0:
                        errs[i] = error_for(r.status, r.error.decode(
                            "utf-8", "replace"), i)
            rc = self._grid_columns(s.call_addr)
        finally:
            if call.results:      # not freed by ft_client_grid_columns
                self._free(call.results)
                call.results = None
        if rc != 0:
            raise error_for(rc, _text(s.err))
        nd = np.ndarray
        return _tuple_new(BatchResult, (
            nd((b,), _U32_DTYPE, block, o5),
            nd((b, R, L), _U32_DTYPE, block, o2),
            nd((b, R), _U32_DTYPE, block, o3),
            nd((b, R), _U64_DTYPE, block, 0),
            nd((b, R), _F64_DTYPE, block, o1),
            nd((b, R), _F32_DTYPE, block, o4),
            nd((b,), _I32_DTYPE, block, o6), errs))

    def _answer(self, s: "_Slot", res: int, i: int, as_array: bool,
                index: Optional[int]):
        """_answer converts result i: its list of Hit (or structured array),
        or the Error of a rejected request (returned, not raised; index is
        what its .index says)."""
        self._shape(res, i, 1, s.dims_addr, s.len_addr)
        n = s.dims[0]
        if n:
            if as_array:
                return _hits_array(self._columns, s, res, i, n, s.dims[1])
            return _hits_list(self._columns, s, res, i, n, s.dims[1])
        r = _RawResult.from_address(self._get(res, i))
        if r.status != 0:
            return error_for(r.status, r.error.decode("utf-8", "replace"),
                             index)
        return np.zeros(0, dtype=_hit_layout(1)[0]) if as_array else []

    def _answers(self, s: "_Slot", res: int, n: int, as_array: bool,
                 errors: str) -> list:
        """_answers converts the n results of a batch and frees them; with
        errors="raise" the first rejected request raises."""
        try:
            out = []
            for i in range(n):
                a = self._answer(s, res, i, as_array, i)
                if errors == "raise" and isinstance(a, Error):
                    raise a
                out.append(a)
            return out
        finally:
            self._free(res)

    # ---- admin and health ----

    def ping(self) -> None:
        """ping returns when the server answers a PING; raises
        TimeoutError or ConnectionError otherwise."""
        err = ctypes.create_string_buffer(_ERRLEN)
        h = self._enter()
        try:
            rc = self._lib.ft_client_ping(h, err, _ERRLEN)
        finally:
            self._leave()
        if rc != 0:
            raise error_for(rc, _text(err))

    def info(self) -> str:
        """info returns the server's INFO text (docs/daemon.md)."""
        err = ctypes.create_string_buffer(_ERRLEN)
        text = ctypes.c_void_p()
        h = self._enter()
        try:
            rc = self._lib.ft_client_info(h, ctypes.byref(text), err,
                                          _ERRLEN)
        finally:
            self._leave()
        if rc != 0:
            raise error_for(rc, _text(err))
        try:
            return ctypes.string_at(text).decode("utf-8", "replace")
        finally:
            self._lib.ft_client_text_free(text)

    def info_dict(self) -> Dict[str, Dict[str, Any]]:
        """info_dict returns INFO parsed by parse_info: {section: {key:
        value}}, e.g. info_dict()["index"]["keys"]."""
        return parse_info(self.info())

    def reload(self, path: Optional[str] = None) -> str:
        """reload asks the server to reload its index (path None: the
        configured one); only on an admin listener of a server with
        admin_reload on, else PermissionError.  Returns the server's
        message."""
        p = None if path is None else _cstr("path", path, True)
        err = ctypes.create_string_buffer(_ERRLEN)
        h = self._enter()
        try:
            rc = self._lib.ft_client_reload(h, p, err, _ERRLEN)
        finally:
            self._leave()
        if rc != 0:
            raise error_for(rc, _text(err))
        return _text(err)
