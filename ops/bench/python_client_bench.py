#!/usr/bin/env python3
"""python_client_bench.py - what the Python client adds to the C client, per
call, against a running `flashtrie serve`.

    PYTHONPATH=python FLASHTRIE_CLIENT_LIB=build/router/libflashtrie_client.so \\
        /usr/bin/python3 ops/bench/python_client_bench.py \\
        --url ipc:///tmp/ft.sock --requests r.jsonl [--calls 2000] \\
        [--batch 32] [--baseline DIR]

r.jsonl holds docs/specification.md section 7 request lines (`flashtrie gen
requests` writes them; ops/bench/daemon_bench.sh makes a library and one).
Each case sends the same requests in turn, interleaved round by round (in
a shuffled order each time, the batches in a loop of their own) so that
load from elsewhere hits every case alike:

  c.ping          ft_client_ping through ctypes (nng's round trip)
  c.search        ft_client_search through ctypes on prepared ft_request
                  structs, results freed unread: the C client's own cost
  py.search       Client.search: numpy grids in, a list of Hit out
  py.search_arr   Client.search(as_array=True): a structured array out
  py.arrays       Client.search_arrays on a (1, T, K) grid: arrays out
and, with --batch B, the same per request for B requests per frame
(c.search_bB, py.arrays_bB, py.batch_bB: search_batch's lists of Hit).

--baseline DIR adds the same Python cases (named base.*) for another copy
of the package, DIR/flashtrie (e.g. the last release's:
`git archive main python/flashtrie | tar -x -C DIR --strip-components=1`),
imported under another name in this process, so that before and after
are measured in one run against the same server and load.

Three figures per case.  p50: the median wall time of a call.  paired:
the median, over the calls, of (this case - c.search) on the same request
in the same round: what the case adds to the C client, with the server's
and the machine's noise mostly cancelled.  outside-C: the median time a
call spends outside the C search call itself (its wall time less the time
inside ft_client_search / ft_client_search_grids, timed by a wrapper in a
second pass): the Python cost alone, independent of the server; cpu: the
same in the thread's CPU time (time.thread_time), which a loaded machine's
preemptions do not inflate.  The C case's outside-C is the ctypes
crossing and the timer itself.  replay: the median time of a call
whose C search hands back an answer recorded before (the same bytes the
server sent), in a third pass: the client's own work with warm caches and
no server at all, the steadiest of the three on a busy machine.

--calls-only CASE:N makes N real calls (after one warm-up call per
request) and prints nothing: under `valgrind --tool=callgrind
--separate-threads=yes` the calling thread's count holds the C client's
own work too (the same for every package), none of the replay's stubs
(FT_ICOUNT=calls ops/bench/python_client_icount.sh).

--replay-only CASE:N replays N calls of one case and prints nothing; run
under `valgrind --tool=cachegrind --cache-sim=no` at two N, the
difference of the two "I refs" over the difference of the Ns is the
case's instructions per call: a count that the machine's load does not
move (ops/bench/python_client_icount.sh does it).  A
benchmark, not a
test: ctest does not run it.
"""
import argparse
import ctypes
import json
import os
import random
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "python"))
import flashtrie  # noqa: E402
from bench_pkg import import_baseline  # noqa: E402
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


def fill(q, tok, lp, r):
    """fill sets one ft_request for the raw C calls (grids kept alive by
    the caller)."""
    p = fc._Params(r.get("beam", 100), r.get("results"),
                   r.get("theta_tok", -float("inf")),
                   r.get("theta_sent", -float("inf")), r.get("alpha", 1.0))
    p.fill(q, tok.shape[0], tok.shape[1], tok.ctypes.data, lp.ctypes.data)


class Inner:
    """Inner wraps a ctypes search function and keeps the time of its last
    call (the time inside C)."""

    def __init__(self, fn):
        self.fn, self.t, self.cpu = fn, 0.0, 0.0

    def __call__(self, *a):
        c0 = time.thread_time()
        t0 = time.perf_counter()
        try:
            return self.fn(*a)
        finally:
            self.t = time.perf_counter() - t0
            self.cpu = time.thread_time() - c0


class LibProxy:
    """LibProxy stands for a client's CDLL with ft_client_search timed by
    Inner (for a package whose Client calls self._lib.ft_client_search)."""

    def __init__(self, lib, inner):
        self._real, self.ft_client_search = lib, inner

    def __getattr__(self, name):
        return getattr(self._real, name)


def instrument(cli):
    """instrument puts an Inner around the C search calls of a Client
    (either generation of the package) and returns it."""
    if hasattr(cli, "_grid_search"):     # every case timed here uses it
        inner = Inner(cli._grid_search)
        cli._grid_search = inner
        return inner
    if hasattr(cli, "_search_grids"):    # the package before ft_client_grid_call
        inner = Inner(cli._search_grids)
        cli._search_grids = inner
        return inner
    inner = Inner(cli._lib.ft_client_search)
    cli._lib = LibProxy(cli._lib, inner)
    return inner


class Replay:
    """Replay stands for a Client's C search call: recording, it makes the
    real call and keeps the answer (the Client's frees are held off);
    replaying, it hands the kept answer back at once.  What a replayed
    call costs is the client's own work, with no server and no wait."""

    def __init__(self, cli):
        self.cli, self.store, self.key, self.recording = cli, {}, None, True
        if hasattr(cli, "_grid_search"):
            # ft_client_grid_search's outputs (results, max_hits, max_len,
            # failed, first_status: 24 bytes) recorded and written back
            # with one memmove; ft_client_grid_columns replayed as the
            # ft_client_results_columns it makes, without the free.
            real, GC = cli._grid_search, _lib.GridCall
            off, size = GC.results.offset, ctypes.sizeof(GC) - \
                GC.results.offset
            ocols, cols = GC.cols.offset, cli._columns
            memmove, cur = ctypes.memmove, [None, 0]

            def grid_search(addr):
                if self.recording:
                    rc = real(addr)
                    c = GC.from_address(addr)
                    cur[0], cur[1] = c.results, c.n
                    self.store[self.key] = (ctypes.string_at(addr + off,
                                                             size), c.n)
                    return rc
                blob, cur[1] = self.store[self.key]
                memmove(addr + off, blob, size)
                cur[0] = GC.from_address(addr).results
                return 0

            def grid_columns(addr):
                return cols(cur[0], 0, cur[1], addr + ocols, None, 0)
            self.free = lambda blob: cli._free(
                ctypes.c_void_p.from_buffer_copy(blob[0][:8]).value)
            cli._grid_search = grid_search
            cli._grid_columns = grid_columns
            cli._free = lambda res: None
        elif hasattr(cli, "_search_grids"):
            real = cli._search_grids

            def search_grids(h, q, n, out, err, errlen):
                p = ctypes.c_void_p.from_address(out)
                if self.recording:
                    rc = real(h, q, n, out, err, errlen)
                    self.store[self.key] = p.value
                    return rc
                p.value = self.store[self.key]
                return 0
            self.free = cli._free
            cli._search_grids = search_grids
            cli._free = lambda res: None
        else:                               # the package before issue 35
            real = cli._call

            def call(reqs, n, keep):
                if self.recording:
                    self.store[self.key] = real(reqs, n, keep)
                return self.store[self.key]
            lib = cli._lib
            self.free = lib.ft_client_results_free
            cli._call = call
            cli._lib = LibProxy(lib, lib.ft_client_search)
            cli._lib.ft_client_results_free = lambda res: None

    def close(self):
        for res in self.store.values():
            self.free(res)
        self.store.clear()


def py_cases(tag, mod, url, grids, reqs, batch):
    """py_cases returns the (name, fn, client) cases of one package."""
    cli = mod.Client(url, timeout=30)

    def search(i):
        t, l = grids[i]
        cli.search(t, l, **kwargs_of(reqs[i]))

    def search_arr(i):
        t, l = grids[i]
        cli.search(t, l, as_array=True, **kwargs_of(reqs[i]))

    def arrays(i):
        t, l = grids[i]
        cli.search_arrays(t[None], l[None], **kwargs_of(reqs[i]))

    out = [(tag + ".search", search, cli), (tag + ".search_arr", search_arr,
                                            cli),
           (tag + ".arrays", arrays, cli)]
    if batch is not None:
        bt, bl, kw, B = batch

        def arrays_b(i):
            cli.search_arrays(bt, bl, **kw)

        def batch_b(i):
            cli.search_batch(bt, bl, **kw)
        out += [(tag + ".arrays_b%d" % B, arrays_b, cli),
                (tag + ".batch_b%d" % B, batch_b, cli)]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--requests", required=True)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--limit", type=int, default=256)
    ap.add_argument("--baseline", metavar="DIR",
                    help="a directory holding another flashtrie package "
                    "to time beside this one")
    ap.add_argument("--replay-only", metavar="CASE:N",
                    help="only replay N calls of one py.* or base.* case "
                    "and print nothing: for counting instructions under "
                    "valgrind --tool=cachegrind")
    ap.add_argument("--calls-only", metavar="CASE:N",
                    help="only make N real calls of one case and print "
                    "nothing: for counting the calling thread's "
                    "instructions under valgrind --tool=callgrind "
                    "--separate-threads=yes (no replay stubs in them)")
    a = ap.parse_args()

    reqs = load(a.requests, a.limit)
    grids = [(np.ascontiguousarray(r["tokens"], dtype=np.uint32),
              np.ascontiguousarray(r["logp"], dtype=np.float32))
             for r in reqs]
    creqs = []
    for (tok, lp), r in zip(grids, reqs):
        q = (_lib.Request * 1)()
        fill(q[0], tok, lp, r)
        creqs.append(q)
    ccli = flashtrie.Client(a.url, timeout=30)
    lib, h = ccli._lib, ccli._h
    err = ctypes.create_string_buffer(1024)
    c_inner = Inner(lib.ft_client_search)

    def c_ping(i):
        if lib.ft_client_ping(h, err, 1024) != 0:
            raise RuntimeError(err.value)

    def c_search(i):
        res = ctypes.c_void_p()
        if c_inner(h, creqs[i], 1, ctypes.byref(res), err, 1024) != 0:
            raise RuntimeError(err.value)
        lib.ft_client_results_free(res)

    # Batches of B requests of one shape (the first request's), for the
    # per-request cost of a frame of B.
    B = max(1, min(a.batch, len(reqs)))
    shape = grids[0][0].shape
    same = [i for i, g in enumerate(grids) if g[0].shape == shape][:B]
    batch = None
    cases = [("c.ping", c_ping, None), ("c.search", c_search, None)]
    if len(same) == B and B > 1:
        bt = np.stack([grids[i][0] for i in same])
        bl = np.stack([grids[i][1] for i in same])
        kw = kwargs_of(reqs[same[0]])
        cb = (_lib.Request * B)()
        for j, i in enumerate(same):
            fill(cb[j], bt[j], bl[j], dict(kw))
        batch = (bt, bl, kw, B)

        def c_batch(i):
            res = ctypes.c_void_p()
            if c_inner(h, cb, B, ctypes.byref(res), err, 1024) != 0:
                raise RuntimeError(err.value)
            lib.ft_client_results_free(res)
        cases.append(("c.search_b%d" % B, c_batch, None))
    cases += py_cases("py", flashtrie, a.url, grids, reqs, batch)
    if a.baseline:
        cases += py_cases("base", import_baseline(a.baseline, "python_client_bench"), a.url, grids,
                          reqs, batch)

    if a.calls_only:
        name, _, count = a.calls_only.rpartition(":")
        found = [f for n, f, cli in cases if n == name]
        if not found or not count.isdigit():
            sys.exit("python_client_bench: --calls-only %s: expected "
                     "CASE:N with CASE one of %s" % (a.calls_only, ", ".join(
                         n for n, _, _ in cases)))
        for k in range(len(reqs) + int(count)):
            found[0](k % len(reqs))
        return

    if a.replay_only:
        name, _, count = a.replay_only.rpartition(":")
        found = [(f, cli) for n, f, cli in cases if n == name and cli]
        if not found or not count.isdigit():
            sys.exit("python_client_bench: --replay-only %s: expected "
                     "CASE:N with CASE one of %s" % (a.replay_only, ", ".join(
                         n for n, _, cli in cases if cli)))
        f, cli = found[0]
        rp = Replay(cli)
        for i in range(len(reqs)):
            rp.key = i
            f(i)
        rp.recording = False
        for k in range(int(count)):
            rp.key = k % len(reqs)
            f(rp.key)
        rp.close()
        return

    for _, f, _ in cases:   # warm up
        for i in range(min(20, len(reqs))):
            f(i)
    rounds = max(1, a.calls // len(reqs))
    rng = random.Random(1)

    def each_call(names, times):
        """each_call yields (name, f, i) for every call of a pass: the
        single requests' cases and the batches' in two loops of their own
        (a batch leaves the server and the machine busy for a while after
        it), each round in a shuffled order, so that no case always
        follows the same other."""
        for group in ([c for c in cases if "_b" not in c[0]],
                      [c for c in cases if "_b" in c[0]]):
            group = [c for c in group if c[0] in names]
            for r in range(times):
                for i in range(len(reqs)):
                    rng.shuffle(group)
                    for name, f, _ in group:
                        yield name, f, i

    wall = {name: [] for name, _, _ in cases}
    for name, f, i in each_call(wall, rounds):
        t0 = time.perf_counter()
        f(i)
        wall[name].append((time.perf_counter() - t0) * 1e6)
    # The second pass: the time outside the C search call.
    inner = {}
    for name, f, cli in cases:
        if name == "c.ping":
            continue
        if cli is None:
            inner[name] = c_inner
        elif id(cli) not in inner:
            inner[id(cli)] = instrument(cli)
            inner[name] = inner[id(cli)]
        else:
            inner[name] = inner[id(cli)]
    outside = {name: [] for name in wall if name in inner}
    outcpu = {name: [] for name in wall if name in inner}
    for name, f, i in each_call(outside, max(1, rounds // 2)):
        c0 = time.thread_time()
        t0 = time.perf_counter()
        f(i)
        d = time.perf_counter() - t0
        c = time.thread_time() - c0
        outside[name].append((d - inner[name].t) * 1e6)
        outcpu[name].append((c - inner[name].cpu) * 1e6)
    # The third pass: the client's own work, the C search replayed.
    replays, replayed = {}, {}
    for name, f, cli in cases:
        if cli is None:
            continue
        rp = replays.get(id(cli))
        if rp is None:
            rp = replays[id(cli)] = Replay(cli)
        for i in range(len(reqs)):
            rp.key = (name, i)
            f(i)
        replayed[name] = []
    for rp in replays.values():
        rp.recording = False
    clients = {name: cli for name, _, cli in cases}
    for name, f, i in each_call(replayed, max(1, rounds // 2)):
        replays[id(clients[name])].key = (name, i)
        t0 = time.perf_counter()
        f(i)
        replayed[name].append((time.perf_counter() - t0) * 1e6)
    for rp in replays.values():
        rp.close()

    print("python_client_bench: %s, %d requests (T=%d, K=%d), %d calls per "
          "case, numpy %s, python %s" % (a.url, len(reqs), shape[0],
                                         shape[1], len(wall["c.ping"]),
                                         np.__version__,
                                         sys.version.split()[0]))
    print("%-16s %9s %9s %9s %11s %10s %10s %9s" % (
        "case", "p50 us", "mean us", "per req", "paired us", "outside-C",
        "cpu", "replay"))
    for name, _, _ in cases:
        v = wall[name]
        per = B if "_b" in name else 1
        base = wall["c.search_b%d" % B if per > 1 else "c.search"]
        paired = statistics.median(x - y for x, y in zip(v, base)) \
            if not name.startswith("c.") else 0.0
        out = "%10.1f %10.1f" % (statistics.median(outside[name]),
                                 statistics.median(outcpu[name])) \
            if name in outside else "%10s %10s" % ("-", "-")
        out += " %9.1f" % statistics.median(replayed[name]) \
            if name in replayed else " %9s" % "-"
        print("%-16s %9.1f %9.1f %9.1f %+11.1f %s" % (
            name, statistics.median(v), statistics.fmean(v),
            statistics.median(v) / per, paired, out))
    ccli.close()


if __name__ == "__main__":
    main()
