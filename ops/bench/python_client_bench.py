#!/usr/bin/env python3
"""python_client_bench.py - what the Python client adds to the C client, per
call at b = 1, against a running `flashtrie serve`.

    PYTHONPATH=python FLASHTRIE_CLIENT_LIB=build/libflashtrie_client.so \\
        python3 ops/bench/python_client_bench.py --url ipc:///tmp/ft.sock \\
        --requests r.jsonl [--calls 2000] [--batch 32]

r.jsonl holds docs/specification.md section 7 request lines (`flashtrie gen
requests` writes them; ops/bench/daemon_bench.sh makes a library and one).
Each case sends the same requests in turn, interleaved round by round so
that load from elsewhere hits every case alike, and prints the p50 and
mean microseconds per call:

  c.ping          ft_client_ping through ctypes (nng's round trip)
  c.search        ft_client_search through ctypes on prepared ft_request
                  structs, results freed unread: the C client's own cost
  py.search       Client.search: numpy grids in, a list of Hit out
  py.search_arr   Client.search(as_array=True): a structured array out
  py.arrays       Client.search_arrays on a (1, T, K) grid: arrays out
and, with --batch B, the same per request for B requests per frame
(c.search and py.arrays).  It also times the two ways of reading a
result's hits as numpy: np.ctypeslib.as_array (a PEP 3118 format parsed
every call) against np.frombuffer over a cached dtype (what the client
does now).  A benchmark, not a test: ctest does not run it.
"""
import argparse
import ctypes
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "python"))
import flashtrie  # noqa: E402
from flashtrie import _lib, client as fc  # noqa: E402


def load(path, limit):
    reqs = []
    with open(path) as f:
        for line in f:
            if line.strip():
                reqs.append(json.loads(line))
            if len(reqs) >= limit:
                break
    if not reqs:
        sys.exit("python_client_bench: %s: no requests" % path)
    return reqs


def kwargs_of(r):
    return {k: r[k] for k in ("beam", "results", "theta_tok", "theta_sent",
                              "alpha") if k in r}


def c_requests(grids, params):
    """ft_request structs for the raw C calls (grids kept alive by the
    caller)."""
    out = []
    for (tok, lp), r in zip(grids, params):
        q = (_lib.Request * 1)()
        p = fc._Params(r.get("beam", 100), r.get("results"),
                       r.get("theta_tok", -float("inf")),
                       r.get("theta_sent", -float("inf")),
                       r.get("alpha", 1.0))
        p.fill(q[0], tok.shape[0], tok.shape[1], tok.ctypes.data,
               lp.ctypes.data)
        out.append(q)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--requests", required=True)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--limit", type=int, default=256)
    a = ap.parse_args()

    reqs = load(a.requests, a.limit)
    grids = [(np.ascontiguousarray(r["tokens"], dtype=np.uint32),
              np.ascontiguousarray(r["logp"], dtype=np.float32))
             for r in reqs]
    creqs = c_requests(grids, reqs)
    cli = flashtrie.Client(a.url, timeout=30)
    lib, h = cli._lib, cli._h
    err = ctypes.create_string_buffer(1024)

    def c_ping(i):
        if lib.ft_client_ping(h, err, 1024) != 0:
            raise RuntimeError(err.value)

    def c_search(i):
        res = ctypes.c_void_p()
        if lib.ft_client_search(h, creqs[i], 1, ctypes.byref(res), err,
                                1024) != 0:
            raise RuntimeError(err.value)
        lib.ft_client_results_free(res)

    def py_search(i):
        t, l = grids[i]
        cli.search(t, l, **kwargs_of(reqs[i]))

    def py_search_arr(i):
        t, l = grids[i]
        cli.search(t, l, as_array=True, **kwargs_of(reqs[i]))

    def py_arrays(i):
        t, l = grids[i]
        cli.search_arrays(t[None], l[None], **kwargs_of(reqs[i]))

    cases = [("c.ping", c_ping), ("c.search", c_search),
             ("py.search", py_search), ("py.search_arr", py_search_arr),
             ("py.arrays", py_arrays)]
    # Batches of B requests of one shape (the first request's), for the
    # per-request cost of a frame of B.
    B = max(1, min(a.batch, len(reqs)))
    shape = grids[0][0].shape
    same = [i for i, g in enumerate(grids) if g[0].shape == shape][:B]
    if len(same) == B and B > 1:
        bt = np.stack([grids[i][0] for i in same])
        bl = np.stack([grids[i][1] for i in same])
        kw = kwargs_of(reqs[same[0]])
        cb = (_lib.Request * B)()
        p = fc._Params(kw.get("beam", 100), kw.get("results"),
                       kw.get("theta_tok", -float("inf")),
                       kw.get("theta_sent", -float("inf")),
                       kw.get("alpha", 1.0))
        T, K = shape
        for j in range(B):
            p.fill(cb[j], T, K, bt.ctypes.data + j * T * K * 4,
                   bl.ctypes.data + j * T * K * 4)

        def c_batch(i):
            res = ctypes.c_void_p()
            if lib.ft_client_search(h, cb, B, ctypes.byref(res), err,
                                    1024) != 0:
                raise RuntimeError(err.value)
            lib.ft_client_results_free(res)

        def py_batch(i):
            cli.search_arrays(bt, bl, **kw)

        cases += [("c.search_b%d" % B, c_batch),
                  ("py.arrays_b%d" % B, py_batch)]

    times = {name: [] for name, _ in cases}
    for f in (fn for _, fn in cases):   # warm up
        for i in range(min(20, len(reqs))):
            f(i)
    rounds = max(1, a.calls // len(reqs))
    for r in range(rounds):
        for i in range(len(reqs)):
            for name, f in cases:
                t0 = time.perf_counter()
                f(i)
                times[name].append((time.perf_counter() - t0) * 1e6)

    print("python_client_bench: %s, %d requests (T=%d, K=%d), %d calls per "
          "case, numpy %s, python %s" % (a.url, len(reqs), shape[0],
                                         shape[1], len(times["c.ping"]),
                                         np.__version__,
                                         sys.version.split()[0]))
    base = statistics.median(times["c.search"])
    for name, _ in cases:
        v = times[name]
        per = B if "_b" in name else 1
        p50 = statistics.median(v)
        extra = ""
        if name.startswith("py.") and per == 1:
            extra = "  (+%.1f us over c.search)" % (p50 - base)
        print("%-16s p50 %8.1f us  mean %8.1f us  per request %8.1f us%s"
              % (name, p50, statistics.fmean(v), p50 / per, extra))

    # Reading hits as numpy: the old way against the new, on one answer.
    res = ctypes.c_void_p()
    i = max(range(len(reqs)), key=lambda k: len(cli.search(
        grids[k][0], grids[k][1], **kwargs_of(reqs[k]))))
    if lib.ft_client_search(h, creqs[i], 1, ctypes.byref(res), err,
                            1024) == 0:
        r = lib.ft_client_results_get(res, 0).contents
        raw = fc._RawResult.from_address(cli._get(res, 0))
        n = r.n
        k = 2000
        t0 = time.perf_counter()
        for _ in range(k):
            np.ctypeslib.as_array(r.hits, shape=(n,))
        t1 = time.perf_counter()
        for _ in range(k):
            fc._c_array(raw.hits, n, fc._HIT_DTYPE)
        t2 = time.perf_counter()
        print("hits as numpy (%d hits): np.ctypeslib.as_array %.1f us, "
              "np.frombuffer on the cached dtype %.1f us"
              % (n, (t1 - t0) / k * 1e6, (t2 - t1) / k * 1e6))
        lib.ft_client_results_free(res)
    cli.close()


if __name__ == "__main__":
    main()
