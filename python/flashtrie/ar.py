"""flashtrie.ar - the autoregressive step API of libflashtrie in Python.

    import numpy as np, flashtrie.ar as ar
    idx = ar.Index("library.fti")
    s = ar.Session(idx, beam=8, device="cpu")       # or device="cuda"
    s.reset()                                        # (where a new session starts)
    for t in range(max_len):
        rows = model_logprobs(s.beams())            # [live beams, V]
        out = s.step(rows)                          # dense rows, column j = token j
        hits += out.hits                             # keys completed this step
        if out.count == 0: break

A CPU session takes and returns numpy arrays; a GPU session takes torch
tensors on its device (or any object with __cuda_array_interface__) and
returns torch tensors, and enqueues on torch's current stream without
waiting (torch stays optional: it is imported only for GPU sessions).
The rules are include/flashtrie.h's ("Autoregressive steps") and
docs/autoregressive.md's; results are the same bits on the CPU and the GPU.

The library file is found as $FLASHTRIE_LIB, a libflashtrie.so next to this
package, or the system's search path.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import math
import operator
import os
from typing import Any, List, NamedTuple, Optional

import numpy as np

ENV = "FLASHTRIE_LIB"

FORM_SPARSE, FORM_DENSE = 0, 1
DTYPES = {"float32": 0, "float16": 1, "bfloat16": 2}
NORMS = {None: 0, "none": 0, "row": 1, "allowed": 2}

P = ctypes.POINTER
u32p, u64p, f32p, f64p = (P(ctypes.c_uint32), P(ctypes.c_uint64),
                          P(ctypes.c_float), P(ctypes.c_double))


class _Opts(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("kind", ctypes.c_int),
                ("device", ctypes.c_int), ("beam", ctypes.c_uint32),
                ("results", ctypes.c_uint32), ("theta_tok", ctypes.c_float),
                ("theta_sent", ctypes.c_float), ("alpha", ctypes.c_double),
                ("max_width", ctypes.c_uint32), ("threads", ctypes.c_uint32)]


class _Beams(ctypes.Structure):
    _fields_ = [("count", ctypes.c_void_p), ("node", ctypes.c_void_p),
                ("sigma", ctypes.c_void_p), ("len", ctypes.c_void_p),
                ("parent", ctypes.c_void_p), ("entry", ctypes.c_void_p),
                ("token", ctypes.c_void_p)]


class _Hits(ctypes.Structure):
    _fields_ = [("count", ctypes.c_void_p), ("parent", ctypes.c_void_p),
                ("entry", ctypes.c_void_p), ("token", ctypes.c_void_p),
                ("len", ctypes.c_void_p), ("key_index", ctypes.c_void_p),
                ("value", ctypes.c_void_p), ("score", ctypes.c_void_p),
                ("sigma", ctypes.c_void_p)]


class _Input(ctypes.Structure):
    _fields_ = [("form", ctypes.c_int), ("dtype", ctypes.c_int),
                ("norm", ctypes.c_int), ("width", ctypes.c_uint32),
                ("stride", ctypes.c_uint64), ("ids", ctypes.c_void_p),
                ("logp", ctypes.c_void_p), ("vocab", ctypes.c_void_p)]


class _Children(ctypes.Structure):
    _fields_ = [("node", ctypes.c_uint64), ("first", ctypes.c_uint64),
                ("count", ctypes.c_uint64), ("priv_", ctypes.c_uint64 * 2)]


def _candidates():
    env = os.environ.get(ENV)
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    for pattern in ("libflashtrie.so", "libflashtrie.so.*"):
        for path in sorted(glob.glob(os.path.join(here, pattern))):
            yield path
    found = ctypes.util.find_library("flashtrie")
    if found:
        yield found


_LIB = None


def load():
    """load returns libflashtrie (once per process) or raises OSError
    saying where it looked."""
    global _LIB
    if _LIB is not None:
        return _LIB
    tried = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
            break
        except OSError as e:
            tried.append("%s: %s" % (path, e))
    else:
        raise OSError("libflashtrie not found (set %s): %s" %
                      (ENV, "; ".join(tried) or "nowhere to look"))
    c_int, c_size_t, c_char_p, c_void_p = (ctypes.c_int, ctypes.c_size_t,
                                           ctypes.c_char_p, ctypes.c_void_p)
    sig = {
        "ft_strerror": (c_char_p, [c_int]),
        "ft_index_open": (c_int, [P(c_void_p), c_char_p, ctypes.c_uint,
                                  c_char_p, c_size_t]),
        "ft_index_close": (None, [c_void_p]),
        "ft_index_children": (c_int, [P(_Children), c_void_p, ctypes.c_uint64]),
        "ft_index_child_label": (ctypes.c_uint32, [c_void_p, P(_Children),
                                                   ctypes.c_uint64]),
        "ft_index_child_find": (c_int, [u64p, c_void_p, P(_Children),
                                        ctypes.c_uint32]),
        "ft_index_node_value": (c_int, [u64p, c_void_p, ctypes.c_uint64]),
        "ft_ar_opts_init": (None, [P(_Opts)]),
        "ft_ar_open": (c_int, [P(c_void_p), c_void_p, P(_Opts), c_char_p,
                               c_size_t]),
        "ft_ar_close": (None, [c_void_p]),
        "ft_ar_kind": (c_int, [c_void_p]),
        "ft_ar_error": (c_char_p, [c_void_p]),
        "ft_ar_configure": (c_int, [c_void_p, ctypes.c_uint32, ctypes.c_uint32,
                                    ctypes.c_float, ctypes.c_float,
                                    ctypes.c_double]),
        "ft_ar_reset": (c_int, [c_void_p, P(_Beams), c_void_p]),
        "ft_ar_step": (c_int, [c_void_p, P(_Beams), P(_Input), P(_Beams),
                               P(_Hits), c_void_p]),
        "ft_ar_mask": (c_int, [c_void_p, P(_Beams), ctypes.c_uint32, c_void_p,
                               ctypes.c_uint32, c_void_p, c_void_p]),
        "ft_ar_constrain": (c_int, [c_void_p, P(_Beams), P(_Input),
                                    ctypes.c_uint32, ctypes.c_uint32,
                                    c_void_p, c_void_p, c_void_p]),
        "ft_ar_walk": (c_int, [c_void_p, c_void_p, ctypes.c_uint32,
                               ctypes.c_uint32, ctypes.c_uint64, c_void_p,
                               c_void_p, c_void_p, ctypes.c_uint32,
                               ctypes.c_int64, c_void_p, c_void_p]),
        "ft_ar_topk": (c_int, [c_void_p, P(_Beams), P(_Input), ctypes.c_uint32,
                               c_void_p, c_void_p, c_void_p, c_void_p]),
    }
    for name, (res, args) in sig.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    _LIB = lib
    return lib


class Error(Exception):
    """Error is a failed libflashtrie call: code (ft_err) and message."""

    def __init__(self, code: int, message: str):
        super().__init__("%s (%d): %s" % (load().ft_strerror(code).decode(),
                                          code, message))
        self.code = code


NODE_ROOT = 0
FT_ESTATE = 18


def _open_handle(h, what: str):
    """_open_handle returns h, or raises Error(FT_ESTATE) once what (an
    index or a session) was closed: the library must never see a freed
    or NULL handle."""
    if not h:
        raise Error(FT_ESTATE, "%s: closed" % what)
    return h


class Index:
    """Index is an opened index file (read-only; any number of sessions)."""

    def __init__(self, path: str, verify: bool = True):
        lib = load()
        self._h = ctypes.c_void_p()
        err = ctypes.create_string_buffer(512)
        rc = lib.ft_index_open(ctypes.byref(self._h), os.fsencode(path),
                               0 if verify else 1, err, len(err))
        if rc:
            raise Error(rc, err.value.decode(errors="replace"))

    def close(self):
        if self._h:
            load().ft_index_close(self._h)
            self._h = ctypes.c_void_p()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def handle(self):
        """handle is the ft_index pointer; Error (FT_ESTATE) once closed."""
        return _open_handle(self._h, "index")

    def child(self, node: int, token: int) -> Optional[int]:
        """child returns the child of node labelled token, or None."""
        lib = load()
        ch = _Children()
        if lib.ft_index_children(ctypes.byref(ch), self.handle(), node):
            raise Error(2, "node %d: out of range" % node)
        i = ctypes.c_uint64()
        if lib.ft_index_child_find(ctypes.byref(i), self._h, ctypes.byref(ch),
                                   token & 0xFFFFFFFF) or token < 0:
            return None
        return ch.first + i.value

    def children(self, node: int) -> np.ndarray:
        """children returns node's child labels (ascending, uint32)."""
        lib = load()
        ch = _Children()
        if lib.ft_index_children(ctypes.byref(ch), self.handle(), node):
            raise Error(2, "node %d: out of range" % node)
        return np.array([lib.ft_index_child_label(self._h, ctypes.byref(ch), i)
                         for i in range(ch.count)], dtype=np.uint32)

    def first_child(self, node: int) -> Optional[int]:
        """first_child returns node's child of the smallest label, or None
        (a leaf)."""
        ch = _Children()
        if load().ft_index_children(ctypes.byref(ch), self.handle(), node):
            raise Error(2, "node %d: out of range" % node)
        return ch.first if ch.count else None

    def value(self, node: int) -> Optional[int]:
        """value returns the value of the key node ends, or None."""
        v = ctypes.c_uint64()
        rc = load().ft_index_node_value(ctypes.byref(v), self.handle(), node)
        return v.value if rc == 0 else None

    def walk(self, tokens) -> Optional[int]:
        """walk returns the node that spells tokens from the root, or None."""
        node = NODE_ROOT
        for t in tokens:
            node = self.child(node, int(t))
            if node is None:
                return None
        return node


class Hit(NamedTuple):
    parent: int     # rank of the beam the key extends (before the step)
    entry: int      # entry of that beam's row
    token: int      # the key's last token
    length: int
    key_index: int
    value: int
    score: float
    sigma: float


class StepOut(NamedTuple):
    count: int              # live beams after the step
    parent: Any             # [count] rank of each new beam's parent
    token: Any              # [count] token it took
    sigma: Any              # [count]
    hits: List[Hit]         # keys completed at this step, best first


def _torch():
    import torch  # GPU sessions only
    return torch


def _c_strides(shape, itemsize: int):
    """_c_strides is the byte strides of a C-contiguous array of shape."""
    st, n = [], itemsize
    for d in reversed(shape):
        st.append(n)
        n *= int(d)
    return tuple(reversed(st))


def _ptr(x, name: str = "array") -> int:
    """_ptr is the address of x's first element; ValueError naming x
    (name) when its elements are not contiguous in row-major order (the
    library reads them so)."""
    if x is None:
        return 0
    if isinstance(x, np.ndarray):
        if not x.flags["C_CONTIGUOUS"]:
            raise ValueError("%s: not C-contiguous (strides %r for shape "
                             "%r)" % (name, x.strides, x.shape))
        return x.ctypes.data
    if hasattr(x, "data_ptr"):
        if not x.is_contiguous():
            raise ValueError("%s: not contiguous (strides %r for shape %r)" %
                             (name, tuple(x.stride()), tuple(x.shape)))
        return x.data_ptr()
    if hasattr(x, "__cuda_array_interface__"):
        cai = x.__cuda_array_interface__
        st, shape = cai.get("strides"), tuple(cai["shape"])
        c = _c_strides(shape, np.dtype(cai["typestr"]).itemsize)
        if st is not None and any(d > 1 and a != b for d, a, b in
                                  zip(shape, st, c)):
            raise ValueError("%s: not C-contiguous (strides %r for shape "
                             "%r)" % (name, tuple(st), shape))
        return cai["data"][0]
    raise TypeError("%s: expected a numpy array or a tensor, got %r" %
                    (name, type(x)))


def _where(x) -> Optional[str]:
    """_where is the device of x's memory: "cpu" for numpy, torch's device
    for a tensor ("cuda:0", "meta"), None for another object in CUDA
    memory (__cuda_array_interface__, device unknown)."""
    if isinstance(x, np.ndarray):
        return "cpu"
    if hasattr(x, "data_ptr") and hasattr(x, "device"):
        return str(x.device)
    if hasattr(x, "__cuda_array_interface__"):
        return None
    return "cpu"


_RAW = []


def _raw_stream():
    """_raw_stream is torch._C._cuda_getCurrentRawStream (a device
    index -> the current stream's address), or None where this torch has
    no such function."""
    if not _RAW:
        _RAW.append(getattr(_torch()._C, "_cuda_getCurrentRawStream", None))
    return _RAW[0]


def _dtype_name(x) -> str:
    if isinstance(x, np.ndarray):
        return str(x.dtype)
    s = str(x.dtype)                       # torch.float32, torch.bfloat16
    return s.split(".")[-1]


def _int(name: str, v, lo: int, hi: int) -> int:
    """_int is v as an int, or ValueError naming it when it is no integer
    or outside lo..hi: ctypes would pass it on wrapped (2**32 + 3 as 3)."""
    try:
        i = operator.index(v)
    except TypeError:
        raise ValueError("%s: expected an integer, got %r" % (name, v)) \
            from None
    if not lo <= i <= hi:
        raise ValueError("%s: %d is outside %d..%d" % (name, i, lo, hi))
    return i


U32 = 0xFFFFFFFF
I64 = (-(1 << 63), (1 << 63) - 1)


def _array(name: str, x):
    """_array is x when it is an array or a tensor (None stays None), else
    TypeError naming it: a list (or any other sequence) has no dtype for
    the library to read it by, nor an address to hand it."""
    if x is not None and (not hasattr(x, "shape") or
                          not hasattr(x, "dtype")):
        raise TypeError("%s: expected a numpy array or a tensor, got %r" %
                        (name, type(x)))
    return x


def _tokens(name: str, x, width: Optional[int] = None):
    """_tokens checks that x (ids or a vocabulary, read as uint32 by the
    library) holds 32-bit integers (uint32, or int32: the same bits, torch
    has no uint32) and, width given, at least width entries."""
    if _array(name, x) is None:
        return None
    dt = _dtype_name(x)
    if dt not in ("uint32", "int32"):
        raise ValueError("%s: expected uint32 library tokens, got %s" %
                         (name, dt))
    if width is not None:
        if len(x.shape) != 1:
            raise ValueError("%s: expected one dimension, got shape %r" %
                             (name, tuple(x.shape)))
        if int(x.shape[0]) < width:
            raise ValueError("%s: %d entries for width %d" %
                             (name, int(x.shape[0]), width))
    return x


class Session:
    """Session is one decoder's trie-constrained beam over an Index.

    beam, results, theta_tok, theta_sent and alpha are docs/specification.md section 3's;
    max_width bounds the rows (K or V).  device "cpu" runs the CPU step on
    numpy arrays; "cuda" or "cuda:N" the GPU step on torch tensors.
    threads: the CPU step's threads (0: the usable cores, at most 64; a
    step of few row entries runs on the caller's thread alone).  A new
    session holds one beam at the root; reset() brings it back there."""

    def __init__(self, index: Index, beam: int = 100, results: int = 0,
                 theta_tok: float = -math.inf, theta_sent: float = -math.inf,
                 alpha: float = 1.0, max_width: int = 4096,
                 device: str = "cpu", threads: int = 0):
        lib = load()
        self.index = index
        o = _Opts()
        lib.ft_ar_opts_init(ctypes.byref(o))
        d = str(device)
        if not (d in ("cpu", "cuda") or
                (d.startswith("cuda:") and d[5:].isdigit())):
            raise ValueError("device: expected 'cpu', 'cuda' or 'cuda:N', "
                             "got %r" % d)
        self.gpu = d.startswith("cuda")
        dev = int(d[5:]) if ":" in d else 0
        o.kind, o.device = (1 if self.gpu else 0), dev
        beam, results, max_width, threads = (
            _int(k, v, 0, U32) for k, v in (
                ("beam", beam), ("results", results),
                ("max_width", max_width), ("threads", threads)))
        o.beam, o.results, o.max_width = beam, results, max_width
        o.threads = threads
        o.theta_tok, o.theta_sent, o.alpha = theta_tok, theta_sent, alpha
        self._h = ctypes.c_void_p()
        err = ctypes.create_string_buffer(512)
        rc = lib.ft_ar_open(ctypes.byref(self._h), index.handle(), ctypes.byref(o),
                            err, len(err))
        if rc:
            raise Error(rc, err.value.decode(errors="replace"))
        self.beam, self.results = beam, results or beam
        self.max_width = max_width
        self.device = "cuda:%d" % dev if self.gpu else "cpu"
        self._dev = dev
        self._state = [self._alloc_beams(), self._alloc_beams()]
        self._hits = self._alloc_hits()
        self._cur = 0
        self._cmask = {}        # width -> constrain's mask scratch
        # A new session holds one beam at the root, as after reset(): a
        # first step on a state of no beam would silently find nothing.
        self.reset()

    # -- memory: numpy on the CPU, torch tensors on the GPU ------------------
    def _zeros(self, n, dtype):
        if self.gpu:
            torch = _torch()
            td = {np.uint32: torch.int32, np.uint64: torch.int64,
                  np.int64: torch.int64, np.float32: torch.float32,
                  np.float64: torch.float64}[dtype]
            return torch.zeros(n, dtype=td, device=self.device)
        return np.zeros(n, dtype=dtype)

    def _alloc_beams(self):
        B = self.beam
        a = dict(count=self._zeros(1, np.uint32), node=self._zeros(B, np.uint64),
                 sigma=self._zeros(B, np.float32), len=self._zeros(B, np.uint32),
                 parent=self._zeros(B, np.uint32), entry=self._zeros(B, np.uint32),
                 token=self._zeros(B, np.uint32))
        s = _Beams(**{k: _ptr(v) for k, v in a.items()})
        return a, s

    def _alloc_hits(self):
        n = self.results
        a = dict(count=self._zeros(1, np.uint32), parent=self._zeros(n, np.uint32),
                 entry=self._zeros(n, np.uint32), token=self._zeros(n, np.uint32),
                 len=self._zeros(n, np.uint32), key_index=self._zeros(n, np.uint64),
                 value=self._zeros(n, np.uint64), score=self._zeros(n, np.float64),
                 sigma=self._zeros(n, np.float32))
        s = _Hits(**{k: _ptr(v) for k, v in a.items()})
        return a, s

    def _stream(self):
        """_stream is the address of torch's current CUDA stream on the
        session's device (None on the CPU): torch's raw-stream getter where
        there is one (what its compiled kernels call; a tenth of
        current_stream's time, which a step pays twice), else
        current_stream().cuda_stream."""
        if not self.gpu:
            return None
        raw = _raw_stream()
        if raw is not None:
            return raw(self._dev)
        return _torch().cuda.current_stream(self.device).cuda_stream

    def handle(self):
        """handle is the ft_ar pointer; Error (FT_ESTATE) once the session
        or its index was closed (the index must outlive the session)."""
        self.index.handle()
        return _open_handle(self._h, "session")

    def _ptr(self, name: str, x) -> int:
        """_ptr is _ptr(x) for an x in the session's memory: host arrays
        for a CPU session, its device's for a GPU session, else
        ValueError naming the argument."""
        if x is None:
            return 0
        self._here(name, x)
        return _ptr(x, name)

    def _here(self, name: str, x):
        """_here raises ValueError naming x when x is not in the
        session's memory."""
        where = _where(x)
        if where is None and not self.gpu:
            raise ValueError("%s: in CUDA memory, the session is on cpu" %
                             name)
        if where is not None and where != self.device:
            raise ValueError("%s: on %s, the session is on %s" %
                             (name, where, self.device))

    def _check(self, rc):
        if rc:
            raise Error(rc, load().ft_ar_error(self._h).decode(errors="replace"))

    def close(self):
        if self._h:
            load().ft_ar_close(self._h)
            self._h = ctypes.c_void_p()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # -- the API ------------------------------------------------------------
    def configure(self, beam: int, results: int = 0, theta_tok=-math.inf,
                  theta_sent=-math.inf, alpha=1.0):
        """configure changes the search parameters (beam <= the opened)."""
        beam, results = _int("beam", beam, 0, U32), \
            _int("results", results, 0, U32)
        self._check(load().ft_ar_configure(self.handle(), beam, results, theta_tok,
                                           theta_sent, alpha))

    def reset(self):
        """reset makes the state one beam at the root."""
        self._cur = 0
        self._check(load().ft_ar_reset(self.handle(), ctypes.byref(self._state[0][1]),
                                       self._stream()))

    def beams(self) -> dict:
        """beams returns the current state's arrays (count, node, sigma,
        len, parent, entry, token), in the session's memory."""
        return self._state[self._cur][0]

    def count(self) -> int:
        return int(self.beams()["count"][0])

    def _input(self, logp, ids=None, norm=None, vocab=None):
        inp = _Input()
        shape = tuple(_array("logp", logp).shape)
        if len(shape) != 2:
            raise ValueError("logp: expected [rows, width], got %r" % (shape,))
        inp.width, inp.stride = shape[1], shape[1]
        try:
            known = norm in NORMS
        except TypeError:           # unhashable (a list): no norm either
            known = False
        if not known:
            raise ValueError("norm: expected None, 'none', 'row' or "
                             "'allowed', got %r" % (norm,))
        inp.norm = NORMS[norm]
        inp.logp = self._ptr("logp", logp)
        if _array("ids", ids) is not None:
            if tuple(ids.shape) != shape:
                raise ValueError("ids: shape %r differs from logp's %r" %
                                 (tuple(ids.shape), shape))
            if _dtype_name(logp) != "float32":
                raise ValueError("sparse rows: logp must be float32")
            if vocab is not None:
                raise ValueError("vocab: only for dense rows (sparse ids "
                                 "are library tokens)")
            inp.form, inp.ids = FORM_SPARSE, self._ptr("ids",
                                                       _tokens("ids", ids))
        else:
            name = _dtype_name(logp)
            if name not in DTYPES:
                raise ValueError("logp: dtype %s; expected float32, float16 or "
                                 "bfloat16" % name)
            inp.form, inp.dtype = FORM_DENSE, DTYPES[name]
            inp.vocab = self._ptr("vocab", _tokens("vocab", vocab, shape[1]))
        if not self.gpu and shape[0] < self.count():
            raise ValueError("logp: %d rows for %d live beams" %
                             (shape[0], self.count()))
        return inp

    def step(self, logp, ids=None, norm=None, vocab=None,
             want_hits: bool = True) -> StepOut:
        """step expands the live beams by their rows: dense logp [rows, V]
        (float32/float16/bfloat16; column j is token vocab[j], or j), or
        sparse ids + logp [rows, K] (uint32 or int32 tokens, float32).  norm is None,
        "row" (log-softmax over the row) or "allowed" (over the beam's
        children).  Returns the new beams (copies: they stay as they are
        after later steps) and the completed keys; on a GPU
        session reading them waits for the device (the state itself stays
        on the device: call step_async to keep the host out)."""
        self.step_async(logp, ids, norm, vocab, want_hits)
        nxt = self.beams()
        n = self.count()
        hits = []
        if want_hits:
            h = self._hits[0]
            nh = int(h["count"][0])
            cols = [h[k][:nh] for k in ("parent", "entry", "token", "len",
                                        "key_index", "value", "score", "sigma")]
            cols = [c.cpu().numpy() if self.gpu else c for c in cols]
            for i in range(nh):
                hits.append(Hit(int(cols[0][i]), int(cols[1][i]), int(cols[2][i]),
                                int(cols[3][i]), int(cols[4][i]),
                                int(cols[5][i]) & 0xFFFFFFFFFFFFFFFF,
                                float(cols[6][i]), float(cols[7][i])))
        # copies: the state's arrays are written again two steps later
        cp = (lambda x: x.clone()) if self.gpu else (lambda x: x.copy())
        return StepOut(n, cp(nxt["parent"][:n]), cp(nxt["token"][:n]),
                       cp(nxt["sigma"][:n]), hits)

    def step_async(self, logp, ids=None, norm=None, vocab=None,
                   want_hits: bool = True):
        """step_async is step without reading anything back: on a GPU
        session it only enqueues on torch's current stream."""
        inp = self._input(logp, ids, norm, vocab)
        cur, nxt = self._state[self._cur], self._state[1 - self._cur]
        self._check(load().ft_ar_step(
            self.handle(), ctypes.byref(cur[1]), ctypes.byref(inp),
            ctypes.byref(nxt[1]),
            ctypes.byref(self._hits[1]) if want_hits else None, self._stream()))
        self._cur = 1 - self._cur

    def mask(self, width: int, vocab=None, eos: Optional[int] = None):
        """mask returns a bool array [beam, width]: True where column j's
        token labels a child of the beam's node (and at eos where the node
        ends a key; eos None or >= width: no such column).  Rows past the
        live beams are False."""
        width = _int("width", width, 0, U32)
        eos = None if eos is None else _int("eos", eos, 0, U32)
        words = (width + 31) // 32
        m = self._zeros(self.beam * words, np.uint32)
        cur = self._state[self._cur]
        vocab = _tokens("vocab", vocab, width)
        self._check(load().ft_ar_mask(self.handle(), ctypes.byref(cur[1]), width,
                                      self._ptr("vocab", vocab),
                                      0xFFFFFFFF if eos is None else eos,
                                      _ptr(m), self._stream()))
        return unpack_mask(m.reshape(self.beam, words), width)

    def constrain(self, logp, vocab=None, eos: Optional[int] = None,
                  out=None):
        """constrain returns the dense rows logp [rows, width] (float32,
        float16 or bfloat16, rows <= beam; row r: beam r's) with -inf
        where mask(width, vocab, eos) is False (rows past the live beams:
        everywhere), written into out (logp's shape and dtype; logp
        itself: in place; None: a new array), one ft_ar_constrain."""
        shape = tuple(_array("logp", logp).shape)
        if len(shape) != 2:
            raise ValueError("logp: expected [rows, width], got %r" % (shape,))
        if out is None:
            out = _torch().empty_like(logp) if self.gpu else np.empty_like(logp)
        if shape[0] == 0:
            return out
        width = _int("width", shape[1], 0, U32)
        vocab = _tokens("vocab", vocab, width)
        m = self._cmask.get(width)
        if m is None:
            m = self._cmask[width] = self._zeros(self.beam * ((width + 31) // 32),
                                                 np.uint32)
        return _constrain(self, self._state[self._cur][1], logp,
                          self._ptr("vocab", vocab), eos, m, out)

    def walk(self, ids, start: int = 0, eos: Optional[int] = None,
             vocab=None, lens=None, state=None):
        """walk returns each row's state after the tokens it took: ids
        [rows, L] (int64 model ids; numpy on a CPU session, a torch tensor
        on the session's device on a GPU session), row r's tokens from
        column start on (lens: uint32 [rows], how many of them; None: all),
        read through vocab (as in step) or as library tokens, from state
        (int64 [rows], as walk returns; None: the root).  A state: the trie
        node reached (>= 0), DONE (-2) once eos is among the tokens, DEAD
        (-1) when a token labels no child (one ft_ar_walk; a GPU session
        does not wait for it)."""
        out = self._zeros(int(_array("ids", ids).shape[0]), np.int64)
        _walk(self, ids, start, eos, vocab, out, lens, state)
        return out

    def set_nodes(self, nodes, sigma=None):
        """set_nodes makes the state beams at the given trie nodes (for
        engines that choose beams themselves and want the mask form).
        sigma: the beams' sigmas, one per node (a scalar or a sigma of
        another length is refused, not spread over the nodes); None
        leaves the sigmas as they were."""
        a = self.beams()
        n = len(nodes)
        if n > self.beam:
            raise ValueError("%d nodes for beam %d" % (n, self.beam))
        if sigma is not None:
            sh = tuple(sigma.shape) if hasattr(sigma, "shape") \
                else np.shape(sigma)
            if sh != (n,):
                raise ValueError("sigma: shape %r differs from nodes' %r" %
                                 (sh, (n,)))
        if self.gpu:
            torch = _torch()
            a["node"][:n] = torch.as_tensor(np.asarray(nodes, dtype=np.int64),
                                            device=self.device)
            a["count"].fill_(n)
        else:
            a["node"][:n] = nodes
            a["count"][0] = n
        if sigma is not None:
            a["sigma"][:n] = sigma


DEAD, DONE = -1, -2     # ft_ar_walk's states (FT_AR_DEAD, FT_AR_DONE)


def _walk_rows(ids, start: int):
    """_walk_rows returns (ids, address of row 0's column start, rows,
    length, row stride in elements) of a 2-D int64 array or tensor whose
    rows are contiguous (a copy when they are not, or not int64)."""
    if len(ids.shape) != 2:
        raise ValueError("ids: expected [rows, length], got shape %r" %
                         (tuple(ids.shape),))
    rows, cols = (int(x) for x in ids.shape)
    if not 0 <= start <= cols:
        raise ValueError("start: %d outside 0..%d (the ids' columns)" %
                         (start, cols))
    if isinstance(ids, np.ndarray):
        if ids.dtype.kind not in "iu":
            raise ValueError("ids: expected integer token ids, got %s" %
                             ids.dtype)
        st = ids.strides
        if ids.dtype != np.int64 or (cols > 1 and st[1] != 8) or \
                st[0] % 8 or (rows > 1 and st[0] < 8 * cols):
            ids = np.ascontiguousarray(ids, dtype=np.int64)
            st = ids.strides
        base, s0, s1 = ids.ctypes.data, st[0] // 8, st[1] // 8
    else:
        torch = _torch()
        if ids.dtype.is_floating_point or ids.dtype.is_complex or \
                ids.dtype == torch.bool:
            raise ValueError("ids: expected integer token ids, got %s" %
                             str(ids.dtype).split(".")[-1])
        if ids.dtype != torch.int64:
            ids = ids.to(torch.int64)
        if (cols > 1 and ids.stride(1) != 1) or \
                (rows > 1 and ids.stride(0) < cols):
            ids = ids.contiguous()
        base, s0, s1 = ids.data_ptr(), ids.stride(0), ids.stride(1)
    n = cols - start
    stride = s0 if rows > 1 else n
    return ids, base + 8 * start * s1, rows, n, stride


def _walk(s: "Session", ids, start: int, eos, vocab, out, lens=None,
          state=None):
    """_walk runs ft_ar_walk of session s into out (int64 [rows], the
    session's memory); vocab: uint32 tokens, lens: uint32 [rows] (int32
    on torch), state: int64 [rows], all in the session's memory."""
    s._here("ids", _array("ids", ids))
    _array("lens", lens)
    _array("state", state)
    ids, addr, rows, n, stride = _walk_rows(ids, start)
    if rows == 0:
        return out
    for name, x in (("lens", lens), ("state", state)):
        if x is not None and tuple(x.shape) != (rows,):
            raise ValueError("%s: expected shape (%d,), got %r" %
                             (name, rows, tuple(x.shape)))
    for name, x in (("lens", lens), ("state", state)):
        if x is not None and not _dtype_name(x).startswith(("int", "uint")):
            raise ValueError("%s: expected integers, got %s" %
                             (name, _dtype_name(x)))
    if lens is not None and not isinstance(lens, np.ndarray) and \
            lens.device.type == "cpu":
        lens = lens.numpy()         # host memory: checked as numpy's are
    if isinstance(lens, np.ndarray):
        if lens.size and lens.min() < 0:
            raise ValueError("lens: expected counts (integers >= 0)")
        if lens.size and lens.max() > n:      # would wrap past 2**32
            r = int(np.argmax(lens > n))
            raise ValueError("lens[%d]: %d exceeds len %d" %
                             (r, int(lens[r]), n))
        lens = np.ascontiguousarray(lens, dtype=np.uint32)
    elif lens is not None and lens.dtype != _torch().int32:
        lens = lens.to(_torch().int32).contiguous()
    if isinstance(state, np.ndarray):
        # (uint64 against a Python int compares as float64: 2**63 + 5
        # would equal 2**63 - 1)
        top = np.uint64(I64[1])
        if state.dtype == np.uint64 and state.size and \
                state.max() > top:        # would wrap to a negative state
            r = int(np.argmax(state > top))
            raise ValueError("state[%d]: %d is outside %d..%d" %
                             (r, int(state[r]), *I64))
        state = np.ascontiguousarray(state, dtype=np.int64)
    elif state is not None and state.dtype != _torch().int64:
        state = state.to(_torch().int64).contiguous()
    vocab = _tokens("vocab", vocab)
    vn = 0 if vocab is None else int(vocab.shape[0])
    s._check(load().ft_ar_walk(s.handle(), addr if n else None, rows, n, stride,
                               s._ptr("lens", lens), s._ptr("state", state),
                               s._ptr("vocab", vocab), vn,
                               -1 if eos is None else _int("eos", eos, *I64),
                               _ptr(out),
                               s._stream()))
    return out


def _constrain(s: "Session", cur, logp, vocab_ptr: int, eos, mask, out):
    """_constrain runs ft_ar_constrain of session s over the beams cur (a
    _Beams) on the dense rows logp [rows, width] into out (logp itself:
    in place), mask (uint32, beam * words) its scratch, vocab_ptr the
    address of the columns' tokens (0: none)."""
    name = _dtype_name(logp)
    if name not in DTYPES:
        raise ValueError("logp: dtype %s; expected float32, float16 or "
                         "bfloat16" % name)
    shape = tuple(logp.shape)
    if _array("out", out) is None or tuple(out.shape) != shape or \
            _dtype_name(out) != name:
        raise ValueError("out: expected %s %r like logp, got %s" % (
            name, shape, "None" if out is None else "%s %r" % (
                _dtype_name(out), tuple(out.shape))))
    inp = _Input()
    inp.form, inp.dtype = FORM_DENSE, DTYPES[name]
    inp.width = inp.stride = shape[1]
    inp.logp, inp.vocab = s._ptr("logp", logp), vocab_ptr
    s._check(load().ft_ar_constrain(
        s.handle(), ctypes.byref(cur), ctypes.byref(inp), shape[0],
        U32 if eos is None else _int("eos", eos, 0, U32), _ptr(mask),
        s._ptr("out", out), s._stream()))
    return out


def unpack_mask(words, width: int):
    """unpack_mask turns [rows, words] uint32 bit rows into bool [rows, width]."""
    if isinstance(words, np.ndarray):
        bits = np.unpackbits(words.view(np.uint8), axis=1, bitorder="little")
        return bits[:, :width].astype(bool)
    torch = _torch()
    shifts = torch.arange(32, device=words.device, dtype=torch.int32)
    bits = (words.unsqueeze(-1) >> shifts) & 1
    return bits.reshape(words.shape[0], -1)[:, :width].bool()


# ---- many independent rows (serving engines) --------------------------------

def vocab_u32(vocab) -> np.ndarray:
    """vocab_u32 turns a model-id -> library-token map (array-like, or the
    path of a .npy file) into uint32, values past u32 as 0xFFFFFFFF."""
    if isinstance(vocab, (str, bytes, os.PathLike)):
        vocab = np.load(vocab)
    v = np.asarray(vocab)
    if v.ndim != 1:
        raise ValueError("vocab: expected one dimension, got shape %r" % (v.shape,))
    v = v.astype(np.int64) if v.dtype.kind in "iub" else v
    if v.dtype.kind not in "iu":
        raise ValueError("vocab: expected integers, got %s" % v.dtype)
    v = np.where((v < 0) | (v > 0xFFFFFFFF), 0xFFFFFFFF, v)
    return v.astype(np.uint32)


def _i32(x):
    """_i32 maps int64 values 0..2^32-1 to int32 with the same low bits."""
    return (x - ((x >> 31) & 1) * (1 << 32)).to(_torch().int32)


class TrieRows:
    """TrieRows keeps independent rows inside a library, the whole batch per
    call, for engines that choose the tokens themselves (vLLM's and
    SGLang's batches): a row's state is one int64 of a tensor the caller
    keeps on its device, a trie node id (>= 0) or DEAD / DONE.

        rows = TrieRows(index, rows=256, device="cuda:0", eos=2)
        state = torch.zeros(n, dtype=torch.int64, device=dev)   # n rows at the root
        rows.constrain(logits, state)                  # mask logits [n, V] in place
        state = rows.advance(state, sampled)           # sampled: model ids [n]

    advance is one ft_ar_walk of one token a row from the rows' states
    (walk: of several, or of whole sequences from the root): every row's
    child at once, one launch on the device, no host wait.  constrain is
    one ft_ar_mask over the rows.  Token ids are model ids: column j of the
    logits is library token vocab[j] (or j), as in flashtrie.hf.

    States: node >= 0 allows its children and, when it ends a key, eos
    (a key that nothing extends: eos only); DONE (eos taken) and DEAD (a
    token that no key continues: the rows were not masked) allow eos only
    (nothing without an eos).  In tokens, a negative id (KEEP) leaves the row as it
    is.  torch is required; rows grows (a new session) when more rows come."""

    DEAD = -1
    DONE = -2
    KEEP = -1

    def __init__(self, index: Index, rows: int = 256, device="cpu",
                 vocab=None, eos: Optional[int] = None):
        torch = _torch()
        self.index = index
        self.device = torch.device(device)
        self.gpu = self.device.type == "cuda"
        if self.gpu and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self.eos = None if eos is None else int(eos)
        self.vocab = None if vocab is None else vocab_u32(vocab)
        self._vocab_dev = None if self.vocab is None else torch.as_tensor(
            self.vocab.astype(np.int64), device=self.device)
        self._vocab32 = None if self.vocab is None else torch.as_tensor(
            self.vocab.view(np.int32), device=self.device)
        self._cols = {}          # width -> (int32 vocab columns, eos)
        # host: numpy unpacking into reused buffers; device: torch ops
        self.host_unpack = not self.gpu
        self._cap = 0
        self._open(max(int(rows), 1))

    def _open(self, cap: int):
        torch = _torch()
        dev = "cuda:%d" % self.device.index if self.gpu else "cpu"
        # The session walks (any length) and masks (any width): its step
        # buffers are never used, so they are sized as small as they go.
        self._s = Session(self.index, beam=cap, results=1, max_width=1,
                          device=dev)
        z = lambda n, dt: torch.zeros(n, dtype=dt, device=self.device)
        i32, i64 = torch.int32, torch.int64

        def beams():
            a = dict(count=z(1, i32), node=z(cap, i64),
                     sigma=z(cap, torch.float32), len=z(cap, i32),
                     parent=z(cap, i32), entry=z(cap, i32), token=z(cap, i32))
            return a, _Beams(**{k: _ptr(v) for k, v in a.items()})

        self._cur = beams()     # the mask's beams: the rows' states
        self._count_n = None    # the count they hold (None: unknown)
        self._masks = {}
        self._full = {}
        self._cap = cap

    def _ensure(self, n: int):
        if n > self._cap:
            self._open(max(n, 2 * self._cap))

    @property
    def capacity(self) -> int:
        return self._cap

    def _stream(self):
        return self._s._stream()

    def _cur_of(self, state, n):
        """_cur_of makes the mask's beams the n rows' states (one copy into
        the beams' own nodes, which the library reads at the opened beam's
        length: a caller's tensor of n could meet the call's output past
        its end; the library's mask gives DONE and DEAD eos alone) and
        returns them; the count is written only when it changes (nothing
        else writes it)."""
        a = self._cur[0]
        if state.data_ptr() != a["node"].data_ptr():   # else _walk_here's
            a["node"][:n].copy_(state)
        if self._count_n != n:
            a["count"].fill_(n)
            self._count_n = n
        return self._cur[1]

    def advance(self, state, tokens):
        """advance returns the rows' states after each took its token
        (model ids, int tensor [n]; negative: no token, the row is kept)."""
        torch = _torch()
        n = int(state.shape[0])
        if n == 0:
            return state
        tok = torch.as_tensor(tokens, device=self.device).to(torch.int64)
        if tuple(tok.shape) != (n,):
            raise ValueError("tokens: expected shape (%d,) (one per row), "
                             "got %r" % (n, tuple(tok.shape)))
        return self.walk(tok.reshape(n, 1), state=state,
                         lens=(tok >= 0).to(torch.int32))

    def _walk_here(self, ids, start: int):
        """_walk_here is walk(ids, start) written into the mask's beams'
        own nodes (no new tensor, no copy for the _constrain that follows;
        the next call's walk overwrites them): a processor's call."""
        n = int(ids.shape[0])
        self._ensure(max(n, 1))
        return self.walk(ids, start, _out=self._cur[0]["node"][:n])

    def walk(self, ids, start: int = 0, state=None, lens=None, _out=None):
        """walk returns the rows' states after the tokens they took: row r
        of ids (model ids [n, L], int64 on the rows' device) from column
        start on (lens: [n] ints, how many of them; None: all), from state
        (a tensor [n] of states; None: the root: whole sequences, what
        generate hands a logits processor).  A node, DONE once eos is
        among the tokens, else DEAD when one of them left the library.
        One ft_ar_walk on the device, no host wait."""
        torch = _torch()
        ids = torch.as_tensor(ids, device=self.device)
        n = int(ids.shape[0])
        # converted (and checked) by _walk; made contiguous here, as the
        # rows' own states may be views (a column, every other row)
        if state is not None:
            state = state.to(device=self.device).contiguous()
        if lens is not None:
            lens = torch.as_tensor(lens, device=self.device).contiguous()
        out = _out if _out is not None else torch.empty(
            n, dtype=torch.int64, device=self.device)
        return _walk(self._s, ids, start, self.eos, self._vocab32, out, lens,
                     state)

    def _columns(self, width: int):
        torch = _torch()
        c = self._cols.get(width)
        if c is None:
            vcols = None
            if self.vocab is not None:
                v = np.full(width, 0xFFFFFFFF, dtype=np.uint32)
                k = min(width, len(self.vocab))
                v[:k] = self.vocab[:k]
                vcols = torch.as_tensor(v.view(np.int32), device=self.device)
            eos = self.eos if self.eos is not None and 0 <= self.eos < width \
                else None
            c = (vcols, eos)
            self._cols[width] = c
        return c

    def _buffers(self, width: int):
        """_buffers returns the mask words [cap * words] of a width and, on
        the host, the disallowed bool buffer [cap, width] (None until
        _disallowed needs it), allocated once and reused per call (fresh
        large host tensors cost page faults; a GPU's temporaries come from
        torch's caching allocator)."""
        torch = _torch()
        b = self._masks.get(width)
        if b is None:
            words = (width + 31) // 32
            m = torch.zeros(self._cap * words, dtype=torch.int32,
                            device=self.device)
            b = self._masks[width] = [m, None]
        return b

    def native(self, logits) -> bool:
        """native says whether the rows' masks are applied to logits by
        the library itself (ft_ar_constrain: one call, no bool mask):
        float32, float16 or bfloat16 rows of adjacent columns, in host or
        device memory; other rows take the mask and torch's masked_fill."""
        return _dtype_name(logits) in DTYPES and logits.is_contiguous()

    def _constrain(self, x, state, out):
        """_constrain writes x [n, width] (native) into out (x itself: in
        place) with -inf where row r's state may not go (one
        ft_ar_constrain) and returns out."""
        n, width = int(x.shape[0]), int(x.shape[1])
        if n == 0:
            return out
        self._ensure(n)
        m = self._buffers(width)[0]
        vcols, eos = self._columns(width)
        cur = self._cur_of(state, n)
        return _constrain(self._s, cur, x, _ptr(vcols), eos, m, out)

    def _disallowed(self, state, width: int):
        """_disallowed returns bool [n, width], True where a row may not
        take the column: a view of a buffer the next call reuses."""
        torch = _torch()
        n = int(state.shape[0])
        self._ensure(max(n, 1))
        words = (width + 31) // 32
        b = self._buffers(width)
        m, bad = b
        if self.host_unpack and bad is None:
            bad = b[1] = np.empty((self._cap, width), dtype=bool)
        vcols, eos = self._columns(width)
        cur = self._cur_of(state, n)
        self._s._check(load().ft_ar_mask(
            self._s.handle(), ctypes.byref(cur), width, _ptr(vcols),
            0xFFFFFFFF if eos is None else eos, _ptr(m), self._stream()))
        if not self.host_unpack:    # bit j of a row: bit j % 8 of byte j // 8
            byts = m[:n * words].view(n, words).view(torch.uint8)
            out = ((byts.unsqueeze(-1) & self._pow2()) == 0).view(
                n, words * 32)[:, :width]
        else:               # numpy's unpacking: several times faster here
            byts = m[:n * words].numpy().view(np.uint8).reshape(n, words * 4)
            bits = np.unpackbits(byts, axis=1, count=width, bitorder="little")
            np.logical_not(bits.view(bool), out=bad[:n])
            out = torch.from_numpy(bad[:n])
        return out

    def _pow2(self):
        p = getattr(self, "_pow2_t", None)
        if p is None:
            torch = _torch()
            p = torch.tensor([1 << i for i in range(8)], dtype=torch.uint8,
                             device=self.device)
            self._pow2_t = p
        return p

    def allowed(self, state, width: int):
        """allowed returns bool [n, width]: the columns each row may take."""
        return ~self._disallowed(state, width)

    def constrain(self, logits, state, rows=None):
        """constrain sets to -inf, in place, the logits each row may not
        take and returns logits: rows (an index tensor on logits' device)
        names the logits rows of the states, in order; None: the first
        rows of logits (all when they are as many as the states).  rows
        in host memory are checked (each a row of logits); on a GPU they
        are taken as given: a check would wait for the device."""
        torch = _torch()
        n = int(state.shape[0])
        shape = tuple(logits.shape)
        if len(shape) != 2:
            raise ValueError("logits: expected [rows, width], got shape %r" %
                             (shape,))
        if rows is None and shape[0] < n:
            raise ValueError("logits: %d rows for %d states" % (shape[0], n))
        if rows is not None and tuple(rows.shape) != (n,):
            raise ValueError("rows: expected shape (%d,) (one per state), "
                             "got %r" % (n, tuple(rows.shape)))
        if rows is not None and n and rows.device.type == "cpu":
            out = (rows < 0) | (rows >= shape[0])
            if bool(out.any()):         # else torch's own IndexError
                r = int(out.nonzero()[0, 0])
                raise ValueError("rows[%d]: %d outside 0..%d (the logits' "
                                 "rows)" % (r, int(rows[r]), shape[0] - 1))
        if n == 0:
            return logits
        width = shape[1]
        if self.native(logits):
            if rows is None:
                self._constrain(logits[:n], state, logits[:n])
            else:           # the named rows, constrained, put back
                x = logits.index_select(0, rows)
                logits.index_copy_(0, rows, self._constrain(x, state, x))
            return logits
        bad = self._disallowed(state, width)
        if rows is None:
            logits[:n].masked_fill_(bad, -math.inf)
            return logits
        # a whole-batch mask (rows not named: False), filled in place
        nb = int(logits.shape[0])
        if not self.host_unpack:
            f = torch.zeros((nb, width), dtype=torch.bool, device=self.device)
        else:
            full = self._full.get(width)
            if full is None or full.shape[0] < nb:
                full = torch.empty((max(nb, self._cap), width),
                                   dtype=torch.bool)
                self._full[width] = full
            f = full[:nb]
            f.zero_()
        f.index_copy_(0, rows, bad)
        logits.masked_fill_(f, -math.inf)
        return logits
