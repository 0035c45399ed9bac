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
import re
import threading
import warnings
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Union

import numpy as np

from . import _lib
from .errors import FT_ESTATE, StateError, error_for

MAX_T = 64            # positions per request (the wire format's limit)
MAX_K = 4096          # proposals per position
MAX_BATCH = 1024      # requests per SEARCH frame
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


# The layout of ft_hit (include/flashtrie.h) as a numpy dtype, built once:
# results are read with np.frombuffer over the C memory, never through
# np.ctypeslib.as_array, which parses a PEP 3118 format on every call.
_HIT_DTYPE = np.dtype({
    "names": ["len", "tok_off", "value", "score", "sigma", "order",
              "key_index"],
    "formats": [np.uint32, np.uint32, np.uint64, np.float64, np.float32,
                np.uint32, np.uint64],
    "offsets": [getattr(_lib.Hit, f).offset for f in
                ("len", "tok_off", "value", "score", "sigma", "order",
                 "key_index")],
    "itemsize": ctypes.sizeof(_lib.Hit)})
_HIT_SIZE = _HIT_DTYPE.itemsize
_U32_DTYPE = np.dtype(np.uint32)
_F32_DTYPE = np.dtype(np.float32)
_EMPTY_U32 = np.zeros(0, dtype=np.uint32)


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


def _c_array(addr: int, count: int, dtype: np.dtype) -> np.ndarray:
    """_c_array is a read-only view of count elements of dtype at addr (C
    memory that outlives the view's use): no copy, no format parsing."""
    if count == 0:
        return np.zeros(0, dtype=dtype)
    raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(addr)
    return np.frombuffer(raw, dtype=dtype)


def _text(buf) -> str:
    return buf.value.decode("utf-8", "replace")


def _uint(name: str, v: Any, lo: int = 0, hi: int = _U32) -> int:
    """_uint reads an integer argument that the wire format carries as a
    u32; the protocol's own ranges are the server's to check."""
    if isinstance(v, (float, np.floating)):
        raise TypeError("%s: must be an integer, got %r" % (name, v))
    try:
        i = operator.index(v)
    except TypeError:
        raise TypeError("%s: must be an integer, got %s"
                        % (name, type(v).__name__)) from None
    if i < lo or i > hi:
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


def _shape(a: np.ndarray) -> str:
    return str(tuple(int(d) for d in a.shape))


def _grids(tokens: Any, logp: Any, ndim: int, where: str):
    """_grids checks and converts one request's grids (ndim 2: (T, K)) or a
    batch's (ndim 3: (b, T, K)) into C-contiguous uint32 and float32
    arrays.  Every fault is raised here, before anything is sent."""
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
    # The fast path: grids already uint32 and float32, C-contiguous, are
    # sent from where they are (no conversion, no copy).
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
        self.beam = _uint("beam", beam)
        if results is None:
            self.results = 0      # the wire's "absent": as many as beam
        else:
            self.results = _uint("results", results, 1)
        # float32 on the wire, rounded to nearest as strtod-then-binary32
        # rounds a JSON number.
        self.theta_tok = float(np.float32(_real("theta_tok", theta_tok)))
        self.theta_sent = float(np.float32(_real("theta_sent", theta_sent)))
        self.alpha = _real("alpha", alpha)

    def fill(self, r: _lib.Request, T: int, K: int, tok_addr: int,
             lp_addr: int) -> None:
        r.T, r.K = T, K
        r.tokens = ctypes.cast(tok_addr, ctypes.POINTER(ctypes.c_uint32))
        r.logp = ctypes.cast(lp_addr, ctypes.POINTER(ctypes.c_float))
        r.beam, r.results = self.beam, self.results
        r.theta_tok, r.theta_sent, r.alpha = (self.theta_tok,
                                              self.theta_sent, self.alpha)


def _hits_of(res: _RawResult):
    """_hits_of returns one result's hits (an array of _HIT_DTYPE) and the
    tokens they index (uint32), as views of the C results."""
    n = res.n
    hits = _c_array(res.hits, n, _HIT_DTYPE)
    if n == 0:
        return hits, _EMPTY_U32
    end = hits["tok_off"].astype(np.int64) + hits["len"]
    return hits, _c_array(res.tokens, int(end.max()), _U32_DTYPE)


def _padded(hits: np.ndarray, toks: np.ndarray, width: int) -> np.ndarray:
    """_padded is the (n, width) matrix of the hits' tokens, zero padded,
    gathered in one vectorised step."""
    n = hits.shape[0]
    if n == 0 or width == 0:
        return np.zeros((n, width), dtype=np.uint32)
    lens = hits["len"].astype(np.int64)
    col = np.arange(width, dtype=np.int64)
    idx = hits["tok_off"].astype(np.int64)[:, None] + col[None, :]
    keep = col[None, :] < lens[:, None]
    np.minimum(idx, toks.shape[0] - 1, out=idx)
    out = toks[idx]
    out[~keep] = 0
    return out


def _convert(res: _RawResult, as_array: bool):
    """_convert copies one ft_result's hits into Python objects (or a
    structured array) before the C results are freed."""
    n = res.n
    if n == 0:
        return np.zeros(0, dtype=hit_dtype(1)) if as_array else []
    hits, toks = _hits_of(res)
    if as_array:
        width = int(hits["len"].max())
        out = np.empty(n, dtype=hit_dtype(width))
        out["tokens"] = _padded(hits, toks, width)
        out["len"] = hits["len"]
        out["value"] = hits["value"]
        out["score"] = hits["score"]
        out["sigma"] = hits["sigma"]
        return out
    tl = toks.tolist()
    return [Hit(tuple(tl[o:o + ln]), v, s, g) for o, ln, v, s, g in zip(
        hits["tok_off"].tolist(), hits["len"].tolist(),
        hits["value"].tolist(), hits["score"].tolist(),
        hits["sigma"].tolist())]


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


Grid = Union[np.ndarray, Sequence]


class Client:
    """Client(url, timeout=10.0, tls=None, deadline=None, connect_wait=False,
    reconnect_wait=1.0, recv_max_bytes=None) connects to a FlashTrie server
    ("flashtrie serve") at url: tcp://, ipc:// or tls+tcp://.

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
    allows); a larger one drops the connection.
    """

    def __init__(self, url: str, timeout: float = 10.0,
                 tls: Union[TLS, Dict[str, Any], None] = None,
                 deadline: Optional[float] = None,
                 connect_wait: bool = False,
                 reconnect_wait: float = 1.0,
                 recv_max_bytes: Optional[int] = None):
        self._lib = _lib.load()
        # ft_client_results_get returning a plain address: a _RawResult
        # is then read in place (from_address), no pointer object made.
        self._get = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p,
                                     ctypes.c_size_t)(
            ("ft_client_results_get", self._lib))
        self._cv = threading.Condition()
        self._busy = 0
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
        t = None
        if tls is not None:
            t = TLS(**tls) if isinstance(tls, dict) else tls
            if not isinstance(t, TLS):
                raise TypeError("tls: must be a flashtrie.TLS or a dict, got "
                                "%s" % type(tls).__name__)
            enc = [None if v is None else str(v).encode() for v in t[:3]]
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
        rc = self._lib.ft_client_connect(ctypes.byref(h), url.encode(),
                                         ctypes.byref(opts), err, _ERRLEN)
        if rc != 0:
            raise error_for(rc, _text(err))
        self._h = h
        self._closed = False

    # ---- lifetime ----

    def close(self) -> None:
        """close waits for the calls in flight, then closes the connection.
        Closing twice is harmless."""
        with self._cv:
            if self._closed:
                return
            self._closed = True
            while self._busy:
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
        with self._cv:
            if self._closed:
                raise StateError(FT_ESTATE, "client: closed")
            self._busy += 1
            return self._h

    def _leave(self):
        with self._cv:
            self._busy -= 1
            if self._busy == 0:
                self._cv.notify_all()

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
        p = _Params(beam, results, theta_tok, theta_sent, alpha)
        reqs = (_lib.Request * 1)()
        p.fill(reqs[0], tok.shape[0], tok.shape[1], tok.ctypes.data,
               lp.ctypes.data)
        out = self._run(reqs, 1, (tok, lp), as_array, "raise", False)
        return out[0]

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
            b, T, K = tok.shape
            reqs = (_lib.Request * b)()
            for i in range(b):
                p.fill(reqs[i], T, K, tok.ctypes.data + i * T * K * 4,
                       lp.ctypes.data + i * T * K * 4)
            return self._run(reqs, b, (tok, lp), as_array, errors, True)
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
            p.fill(reqs[i], tok.shape[0], tok.shape[1], tok.ctypes.data,
                   lp.ctypes.data)
        return self._run(reqs, len(grids), keep, as_array, errors,
                         True)

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
        and errors[i] say why."""
        tok, lp = _grids(tokens, logp, 3, "")
        p = _Params(beam, results, theta_tok, theta_sent, alpha)
        b, T, K = tok.shape
        reqs = (_lib.Request * b)()
        for i in range(b):
            p.fill(reqs[i], T, K, tok.ctypes.data + i * T * K * 4,
                   lp.ctypes.data + i * T * K * 4)
        res = self._call(reqs, b, (tok, lp))
        try:
            parts, status, errs = [], np.zeros(b, dtype=np.int32), []
            for i in range(b):
                r = _RawResult.from_address(self._get(res, i))
                if r.status != 0:
                    status[i] = r.status
                    errs.append(error_for(r.status, r.error.decode(
                        "utf-8", "replace"), i))
                    parts.append(None)
                    continue
                errs.append(None)
                h, t = _hits_of(r)
                parts.append((h, t))
            R = max((h.shape[0] for h, _ in filter(None, parts)), default=0)
            L = max((int(h["len"].max()) for h, _ in filter(None, parts)
                     if h.shape[0]), default=0)
            n = np.zeros(b, dtype=np.uint32)
            out_tok = np.zeros((b, R, L), dtype=np.uint32)
            out_len = np.zeros((b, R), dtype=np.uint32)
            out_val = np.zeros((b, R), dtype=np.uint64)
            out_score = np.zeros((b, R), dtype=np.float64)
            out_sigma = np.zeros((b, R), dtype=np.float32)
            for i, part in enumerate(parts):
                if part is None or part[0].shape[0] == 0:
                    continue
                h, t = part
                m = h.shape[0]
                n[i] = m
                out_tok[i, :m] = _padded(h, t, L)
                out_len[i, :m] = h["len"]
                out_val[i, :m] = h["value"]
                out_score[i, :m] = h["score"]
                out_sigma[i, :m] = h["sigma"]
            return BatchResult(n, out_tok, out_len, out_val, out_score,
                               out_sigma, status, errs)
        finally:
            self._lib.ft_client_results_free(res)

    def _call(self, reqs, n: int, keep):
        """_call sends n requests (whose grids keep holds alive until the
        call returns) and returns the C results (ft_client_results_free
        them)."""
        err = ctypes.create_string_buffer(_ERRLEN)
        res = ctypes.c_void_p()
        h = self._enter()
        try:
            rc = self._lib.ft_client_search(h, reqs, n, ctypes.byref(res),
                                            err, _ERRLEN)
        finally:
            self._leave()
        del keep
        if rc != 0:
            raise error_for(rc, _text(err))
        return res

    def _run(self, reqs, n: int, keep, as_array: bool, errors: str,
             batch: bool):
        """_run sends n requests (whose grids keep holds alive) and
        converts the answers; errors of a batch's requests carry their
        index."""
        res = self._call(reqs, n, keep)
        try:
            out = []
            for i in range(n):
                r = _RawResult.from_address(self._get(res, i))
                if r.status != 0:
                    e = error_for(r.status, r.error.decode("utf-8",
                                                           "replace"),
                                  i if batch else None)
                    if errors == "raise":
                        raise e
                    out.append(e)
                    continue
                out.append(_convert(r, as_array))
            return out
        finally:
            self._lib.ft_client_results_free(res)

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
        err = ctypes.create_string_buffer(_ERRLEN)
        h = self._enter()
        try:
            rc = self._lib.ft_client_reload(
                h, None if path is None else str(path).encode(), err,
                _ERRLEN)
        finally:
            self._leave()
        if rc != 0:
            raise error_for(rc, _text(err))
        return _text(err)
