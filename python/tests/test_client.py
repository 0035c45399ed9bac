"""test_client.py - the Python client against live "flashtrie serve" servers.

The servers listen on ipc:// in a temporary folder and on a free
tcp://127.0.0.1 port, and are stopped with SIGTERM (their exit status and
drain line are checked).  Answers are compared with "flashtrie search" on
the same requests, floats exactly.

Environment: FT_BIN names the flashtrie program, FLASHTRIE_CLIENT_LIB the
built libflashtrie_client.so (tests/python/CMakeLists.txt sets both).
"""
import ctypes
import json
import math
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import flashtrie

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "tests", "data")
BIN = os.environ.get("FT_BIN", "")

T, K = 6, 12


def run(*args, stdin=None):
    p = subprocess.run([BIN] + list(args), input=stdin, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, "flashtrie %s: exit %d: %s" % (
        args[0], p.returncode, p.stderr[-2000:])
    return p.stdout


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """Server runs "flashtrie serve ARGS" with its log in a file; start()
    returns once a client's ping is answered."""

    def __init__(self, tmp, name, index, urls, *extra):
        self.log_path = os.path.join(tmp, name + ".log")
        self.urls = urls
        args = [BIN, "serve", "--index", index, "--engine", "cpu",
                "--threads", "2"]
        for u in urls:
            args += ["--listen", u]
        self.args = args + list(extra)
        self.proc = None

    def start(self, tls=None):
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.args, stderr=self.log,
                                     stdout=subprocess.DEVNULL)
        with flashtrie.Client(self.urls[0], timeout=0.5, tls=tls,
                              connect_wait=True) as c:
            for _ in range(60):
                assert self.proc.poll() is None, "serve exited %d: %s" % (
                    self.proc.returncode, self.tail())
                try:
                    c.ping()
                    return self
                except (flashtrie.TimeoutError, flashtrie.ConnectionError):
                    pass
        raise AssertionError("serve never answered a ping: " + self.tail())

    def tail(self):
        with open(self.log_path) as f:
            return f.read()[-3000:]

    def stop(self):
        """stop sends SIGTERM and checks the clean drain."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=30)
        self.log.close()
        assert rc == 0, "serve exited %d after SIGTERM: %s" % (rc,
                                                               self.tail())
        assert "drained: every request answered" in self.tail()

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    assert BIN and os.access(BIN, os.X_OK), "FT_BIN must name flashtrie"
    tmp = str(tmp_path_factory.mktemp("ft"))
    keys = os.path.join(tmp, "keys.txt")
    big = os.path.join(tmp, "big.fti")
    small = os.path.join(tmp, "small.fti")
    run("gen", "keys", "--n", "3000", "--seed", "7", "--output", keys)
    run("build", "--input", keys, "--output", big)
    run("build", "--input", os.path.join(DATA, "cli_keys.txt"), "--output",
        small)
    reqs = run("gen", "requests", "--index", big, "--n", "40", "--beam",
               "16", "--results", "5", "--seed", "3", "--T", str(T), "--K",
               str(K))
    e = {"tmp": tmp, "big": big, "small": small,
         "info": run("info", big),
         "requests": [json.loads(l) for l in reqs.splitlines()]}
    ipc = "ipc://%s/sock" % tmp
    tcp = "tcp://127.0.0.1:%d" % free_port()
    admin = "ipc://%s/admin" % tmp
    srv = Server(tmp, "main", big, [ipc, tcp], "--admin-listen", admin)
    srv.start()
    e["server"], e["urls"], e["admin"] = srv, [ipc, tcp], admin
    yield e
    try:
        srv.stop()
    finally:
        srv.kill()


@pytest.fixture(params=["ipc", "tcp"])
def client(env, request):
    url = env["urls"][0 if request.param == "ipc" else 1]
    with flashtrie.Client(url, timeout=20) as c:
        yield c


def expected(index, reqs):
    """expected runs flashtrie search over reqs (dicts) and returns its
    answers, parsed."""
    lines = "".join(json.dumps(r) + "\n" for r in reqs)
    out = run("search", "--index", index, "--engine", "cpu", stdin=lines)
    got = [json.loads(l) for l in out.splitlines()]
    assert len(got) == len(reqs)
    return got


PARAMS = ("beam", "results", "theta_tok", "theta_sent", "alpha")


def kwargs_of(req):
    return {k: req[k] for k in PARAMS if k in req}


def check_hits(hits, want):
    """check_hits compares a list of Hit with one answer of flashtrie
    search: tokens, values and both floats bit for bit."""
    assert "error" not in want, want
    w = want["results"]
    assert len(hits) == len(w)
    for h, x in zip(hits, w):
        assert isinstance(h, flashtrie.Hit)
        assert h.tokens == tuple(x["tokens"])
        assert h.value == x["value"]
        # score is printed %.17g (binary64 round-trips), sigma %.9g
        # (binary32 round-trips once rounded back to binary32).
        assert h.score == x["score"]
        assert h.sigma == float(np.float32(x["sigma"]))
        assert type(h.value) is int and type(h.score) is float


def small_requests():
    """Requests over tests/data/cli_keys.txt: answered ones of several
    shapes and parameters, and ones the server's validator rejects."""
    return [
        {"tokens": [[1, 7], [2, 5], [3, 4]],
         "logp": [[-0.5, -1], [-0.25, -0.5], [-1, -0.5]], "beam": 4},
        {"tokens": [[1, 7], [2, 8]], "logp": [[-1, -1], [-0.5, -0.5]],
         "beam": 1, "results": 3, "alpha": 0},
        {"tokens": [[1], [2], [3]], "logp": [[-0.1], [-0.2], [-0.3]],
         "beam": 3, "theta_sent": -0.25},
        {"tokens": [[7, 1, 9]], "logp": [[-0.3, -0.2, -5]], "beam": 2,
         "theta_tok": -1.0, "alpha": 2.5},
        {"tokens": [[1, 1]], "logp": [[-1, -2]]},
        {"tokens": [[1]], "logp": [[-1]], "beam": 0},
        {"tokens": [[1]], "logp": [[-1]], "beam": 5000},
        {"tokens": [[1]], "logp": [[-1]], "alpha": 10.5},
        {"tokens": [[1]], "logp": [[-1]], "beam": 2, "results": 5000},
        {"tokens": [[1]], "logp": [[1e39]]},
    ]


# ---- answers ----

def test_search_matches_cli(env, client):
    reqs = env["requests"]
    want = expected(env["big"], reqs)
    for r, w in zip(reqs, want):
        hits = client.search(np.array(r["tokens"]), np.array(r["logp"]),
                             **kwargs_of(r))
        check_hits(hits, w)
    # Inputs given as lists and as other dtypes are converted the same way.
    r = reqs[0]
    hits = client.search(r["tokens"], r["logp"], **kwargs_of(r))
    check_hits(hits, want[0])
    hits = client.search(np.array(r["tokens"], dtype=np.int64),
                         np.array(r["logp"], dtype=np.float64),
                         **kwargs_of(r))
    check_hits(hits, want[0])


def test_checksum_choice(env, client):
    """checksum=True/False/None gives the same answers on ipc:// and
    tcp:// (the server mirrors the request's checksum flag); anything but
    a bool or None is refused before connecting."""
    reqs = env["requests"][:6]
    want = expected(env["big"], reqs)
    for choice in (True, False, None):
        with flashtrie.Client(client.url, timeout=20, checksum=choice) as c:
            for r, w in zip(reqs, want):
                check_hits(c.search(r["tokens"], r["logp"], **kwargs_of(r)),
                           w)
    with pytest.raises(TypeError) as ei:
        flashtrie.Client(client.url, checksum=1)
    assert str(ei.value) == "checksum: must be None, True or False, got int"


def test_small_index_and_rejections(env, tmp_path):
    """A server on the small index answers as flashtrie search does, and a
    request the server rejects raises RequestError with its message."""
    url = "ipc://%s/small.sock" % tmp_path
    srv = Server(str(tmp_path), "small", env["small"], [url]).start()
    try:
        reqs = small_requests()
        want = expected(env["small"], reqs)
        rejected = 0
        with flashtrie.Client(url) as c:
            for r, w in zip(reqs, want):
                args = (np.array(r["tokens"]), np.array(r["logp"]))
                if "error" in w:
                    rejected += 1
                    with pytest.raises(flashtrie.RequestError) as ei:
                        c.search(*args, **kwargs_of(r))
                    assert ei.value.code == 11
                    assert ei.value.name == "FT_EREQUEST"
                    assert ei.value.message == w["error"]
                    assert ei.value.index is None
                    assert str(ei.value) == w["error"] + " (FT_EREQUEST)"
                else:
                    check_hits(c.search(*args, **kwargs_of(r)), w)
            assert rejected == 6
            # NaN cannot be written in JSON; the server's validator names it.
            with pytest.raises(flashtrie.RequestError) as ei:
                c.search([[1]], [[-1]], theta_tok=math.nan)
            assert ei.value.message.startswith("theta_tok: ")
            with pytest.raises(flashtrie.RequestError) as ei:
                c.search([[1]], [[math.nan]])
            assert ei.value.message == \
                "logp: position 0, proposal 0: not finite"
    finally:
        srv.stop()


def test_as_array(env, client):
    r = env["requests"][1]
    hits = client.search(r["tokens"], r["logp"], **kwargs_of(r))
    arr = client.search(r["tokens"], r["logp"], as_array=True,
                        **kwargs_of(r))
    assert len(hits) > 1
    L = max(len(h.tokens) for h in hits)
    assert arr.dtype == flashtrie.hit_dtype(L)
    assert arr.shape == (len(hits),)
    for h, a in zip(hits, arr):
        n = int(a["len"])
        assert tuple(a["tokens"][:n].tolist()) == h.tokens
        assert not a["tokens"][n:].any()
        assert int(a["value"]) == h.value
        assert float(a["score"]) == h.score
        assert float(a["sigma"]) == h.sigma
    # A request with no answer gives an empty array and an empty list.
    assert client.search([[999999999]], [[-1]]) == []
    assert client.search([[999999999]], [[-1]], as_array=True).shape == (0,)


def test_batch(env, client):
    reqs = env["requests"][:32]
    want = expected(env["big"], reqs)
    tok = np.array([r["tokens"] for r in reqs], dtype=np.uint32)
    lp = np.array([r["logp"] for r in reqs], dtype=np.float32)
    assert tok.shape == (32, T, K)
    got = client.search_batch(tok, lp, beam=16, results=5)
    assert len(got) == 32
    for g, w in zip(got, want):
        check_hits(g, w)
    # As lists of grids, and as (tokens, logp) pairs of different shapes.
    got = client.search_batch(list(tok), list(lp), beam=16, results=5)
    for g, w in zip(got, want):
        check_hits(g, w)
    mixed = [(r["tokens"][:t], r["logp"][:t]) for r, t in
             zip(reqs[:6], (1, 2, 3, 4, 5, 6))]
    mixed.append(([[reqs[6]["tokens"][0][0]]], [[-0.5]]))
    got = client.search_batch(mixed, beam=16, results=5)
    want = expected(env["big"], [{"tokens": t, "logp": l, "beam": 16,
                                  "results": 5} for t, l in mixed])
    for g, w in zip(got, want):
        check_hits(g, w)
    arrs = client.search_batch(mixed, beam=16, results=5, as_array=True)
    for a, w in zip(arrs, want):
        assert [int(x) for x in a["value"]] == \
            [x["value"] for x in w["results"]]


def test_batch_with_a_rejected_request(env, client):
    r = env["requests"]
    bad = [list(row) for row in r[2]["tokens"]]
    bad[3][5] = bad[3][4]
    pairs = [(r[0]["tokens"], r[0]["logp"]), (bad, r[2]["logp"]),
             (r[1]["tokens"], r[1]["logp"])]
    want = expected(env["big"], [{"tokens": t, "logp": l, "beam": 16}
                                 for t, l in pairs])
    assert "error" in want[1]
    with pytest.raises(flashtrie.RequestError) as ei:
        client.search_batch(pairs, beam=16)
    assert ei.value.index == 1
    assert ei.value.message == want[1]["error"]
    assert str(ei.value) == "request 1: %s (FT_EREQUEST)" % want[1]["error"]
    got = client.search_batch(pairs, beam=16, errors="return")
    check_hits(got[0], want[0])
    assert isinstance(got[1], flashtrie.RequestError)
    assert got[1].message == want[1]["error"] and got[1].index == 1
    check_hits(got[2], want[2])


def test_search_arrays(env, client):
    """search_arrays: (B, T, K) in, arrays out, the same answers as
    search_batch; a rejected request has its status and error, no raise;
    uint32/float32 C-contiguous grids are sent from where they are."""
    reqs = env["requests"][:16]
    tok = np.array([r["tokens"] for r in reqs], dtype=np.uint32)
    lp = np.array([r["logp"] for r in reqs], dtype=np.float32)
    # The grids of the fast path are the caller's arrays, not copies.
    gt, gl = flashtrie.client._grids(tok, lp, 3, "")
    assert gt is tok and gl is lp
    gt, gl = flashtrie.client._grids(tok[0], lp[0], 2, "")
    assert np.shares_memory(gt, tok) and np.shares_memory(gl, lp)
    want = client.search_batch(tok, lp, beam=16, results=5)
    got = client.search_arrays(tok, lp, beam=16, results=5)
    assert isinstance(got, flashtrie.BatchResult)
    B = len(reqs)
    assert got.n.shape == (B,) and got.status.shape == (B,)
    R = int(got.n.max())
    assert got.len.shape == (B, R) and got.tokens.shape[:2] == (B, R)
    for i, w in enumerate(want):
        assert got.status[i] == 0 and got.errors[i] is None
        assert got.n[i] == len(w)
        for j, h in enumerate(w):
            n = int(got.len[i, j])
            assert tuple(got.tokens[i, j, :n].tolist()) == h.tokens
            assert not got.tokens[i, j, n:].any()
            assert int(got.value[i, j]) == h.value
            assert float(got.score[i, j]) == h.score
            assert float(got.sigma[i, j]) == h.sigma
        assert not got.len[i, len(w):].any()
    # Other dtypes are converted as search() converts them.
    got2 = client.search_arrays(tok.astype(np.int64), lp.astype(np.float64),
                                beam=16, results=5)
    assert (got2.value == got.value).all() and (got2.n == got.n).all()
    # A request the server rejects: its status, its error, no exception.
    bad = tok.copy()
    bad[1, 0, 1] = bad[1, 0, 0]
    got3 = client.search_arrays(bad, lp, beam=16, results=5)
    assert got3.status[1] == 11 and got3.n[1] == 0
    assert isinstance(got3.errors[1], flashtrie.RequestError)
    assert got3.errors[1].index == 1
    assert "appears twice" in got3.errors[1].message
    assert got3.status[0] == 0 and got3.n[0] == got.n[0]


def test_search_arrays_layout(env, client):
    """BatchResult's arrays: C-contiguous, their dtypes, writable, and
    separate (views of one block, none overlapping another)."""
    reqs = env["requests"][:3]
    tok = np.array([r["tokens"] for r in reqs], dtype=np.uint32)
    lp = np.array([r["logp"] for r in reqs], dtype=np.float32)
    got = client.search_arrays(tok, lp, beam=16, results=5)
    want = [np.uint32, np.uint32, np.uint32, np.uint64, np.float64,
            np.float32, np.int32]
    arrays = list(got[:7])
    for a, dt in zip(arrays, want):
        assert a.dtype == dt and a.flags.c_contiguous and a.flags.writeable
    for i, a in enumerate(arrays):
        for b in arrays[i + 1:]:
            assert not np.shares_memory(a, b)
    keep = [a.copy() for a in arrays]
    got.value[:] = 7
    for a, k in zip(arrays, keep):
        if a is not got.value:
            assert np.array_equal(a, k)
    # No hits at all: R = L = 0.
    none = client.search_arrays(np.full((2, 1, 1), 999999999, np.uint32),
                                np.full((2, 1, 1), -1, np.float32))
    assert none.n.tolist() == [0, 0] and none.tokens.shape == (2, 0, 0)
    assert none.value.shape == (2, 0) and none.status.tolist() == [0, 0]


def test_parameters_between_calls(env, client):
    """The parameters set in a call are the ones sent, whatever the calls
    before it sent (a thread's request template is reused): changed
    values, numpy scalars, and a 0-d array changed in place."""
    r = env["requests"][5]
    variants = [{"beam": 16, "results": 5}, {"beam": 4},
                {"beam": 16, "results": 5, "alpha": 0.5},
                {"beam": 16, "theta_tok": -3.0},
                {"beam": 16, "theta_sent": -9.0}, {"beam": 16}]
    want = expected(env["big"], [dict(tokens=r["tokens"], logp=r["logp"],
                                      **v) for v in variants])
    tok = np.array(r["tokens"], dtype=np.uint32)
    lp = np.array(r["logp"], dtype=np.float32)
    for _ in range(2):
        for v, w in zip(variants, want):
            check_hits(client.search(tok, lp, **v), w)
    check_hits(client.search(tok, lp, beam=np.uint16(4)), want[1])
    check_hits(client.search(tok, lp, beam=np.int64(16), results=np.int8(5),
                             alpha=np.float32(0.5)), want[2])
    beam = np.array(16)
    check_hits(client.search(tok, lp, beam=beam), want[5])
    beam[()] = 4
    check_hits(client.search(tok, lp, beam=beam), want[1])
    # A refused parameter leaves the next call's own parameters in force.
    with pytest.raises(TypeError):
        client.search(tok, lp, beam=4.0)
    check_hits(client.search(tok, lp, beam=16), want[5])


def test_read_only_grids(env, client):
    """Read-only grids (np.frombuffer over bytes) are sent as they are,
    with the same answers."""
    reqs = env["requests"][:4]
    want = expected(env["big"], reqs)
    for r, w in zip(reqs, want):
        tok = np.frombuffer(np.array(r["tokens"], np.uint32).tobytes(),
                            np.uint32).reshape(T, K)
        lp = np.frombuffer(np.array(r["logp"], np.float32).tobytes(),
                           np.float32).reshape(T, K)
        assert not tok.flags.writeable and not lp.flags.writeable
        check_hits(client.search(tok, lp, **kwargs_of(r)), w)
    bt = np.frombuffer(np.array([r["tokens"] for r in reqs],
                                np.uint32).tobytes(), np.uint32)
    bl = np.frombuffer(np.array([r["logp"] for r in reqs],
                                np.float32).tobytes(), np.float32)
    got = client.search_arrays(bt.reshape(4, T, K), bl.reshape(4, T, K),
                               **kwargs_of(reqs[0]))
    assert got.n.tolist() == [len(w["results"]) for w in want]
    assert got.value[0, :got.n[0]].tolist() == \
        [x["value"] for x in want[0]["results"]]


class _Sub(np.ndarray):
    pass


def test_forms_interleaved_and_grid_kinds(env, client):
    """One thread's calls switch between the forms (list, as_array of
    different key widths, search_arrays, search_batch) with the same
    answers as each alone; grids that miss the fast path (an ndarray
    subclass, a uint32 dtype that is not numpy's own object, Fortran
    order, lists) answer as plain uint32/float32 arrays do."""
    reqs = env["requests"][:6]
    want = expected(env["big"], reqs)
    for rnd in range(2):
        for r, w in zip(reqs, want):
            tok = np.array(r["tokens"], np.uint32)
            lp = np.array(r["logp"], np.float32)
            kw = kwargs_of(r)
            check_hits(client.search(tok, lp, **kw), w)
            arr = client.search(tok, lp, as_array=True, **kw)
            assert arr.dtype == flashtrie.hit_dtype(
                max(len(x["tokens"]) for x in w["results"]))
            assert arr["value"].tolist() == [x["value"] for x in
                                             w["results"]]
            got = client.search_arrays(tok[None], lp[None], **kw)
            assert got.n.tolist() == [len(w["results"])]
            assert got.value[0].tolist() == arr["value"].tolist()
            assert got.tokens[0].tolist() == arr["tokens"].tolist()
            odd = [(tok.view(_Sub), lp.view(_Sub)),
                   (tok.astype(np.dtype(np.uint32, metadata={"m": 1})),
                    lp.astype(np.dtype(np.float32, metadata={"m": 1}))),
                   (np.asfortranarray(tok), np.asfortranarray(lp)),
                   (r["tokens"], r["logp"])]
            for t, l in odd:
                check_hits(client.search(t, l, **kw), w)
                a2 = client.search(t, l, as_array=True, **kw)
                assert a2.tobytes() == arr.tobytes()
            b = client.search_batch(tok[None], lp[None], **kw)
            check_hits(b[0], w)


def test_close_while_searching(env):
    """close() from another thread while four threads search: each call
    either answers or raises StateError (client: closed), close() returns
    once the calls in flight are done, and nothing else happens."""
    reqs = env["requests"]
    want = expected(env["big"], reqs[:8])
    for _ in range(3):
        c = flashtrie.Client(env["urls"][0], timeout=20)
        outcomes, errors = [], []
        go = threading.Event()

        def work(k):
            go.wait()
            try:
                for i in range(200):
                    j = (k + i) % 8
                    r = reqs[j]
                    try:
                        if i % 3 == 0:
                            check_hits(c.search(r["tokens"], r["logp"],
                                                **kwargs_of(r)), want[j])
                        elif i % 3 == 1:
                            c.search(r["tokens"], r["logp"], as_array=True,
                                     **kwargs_of(r))
                        else:
                            c.search_arrays(np.array([r["tokens"]]),
                                            np.array([r["logp"]]),
                                            **kwargs_of(r))
                        outcomes.append(1)
                    except flashtrie.StateError as e:
                        assert e.message == "client: closed"
                        outcomes.append(0)
                        return
            except BaseException as e:  # reported by the main thread
                errors.append(e)
        ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in ts:
            t.start()
        go.set()
        time.sleep(0.05)
        c.close()
        assert c.closed
        for t in ts:
            t.join(timeout=60)
        assert not errors, errors[0]
        assert not any(t.is_alive() for t in ts)
        with pytest.raises(flashtrie.StateError):
            c.search(reqs[0]["tokens"], reqs[0]["logp"])


def test_array_form_entry_points(env, client):
    """ft_client_search_grids, ft_client_results_shape and
    ft_client_results_columns, called as a C program would: the answers of
    ft_client_search, and each fault refused with its code and message,
    nothing written."""
    lib = flashtrie._lib.load()
    fc = flashtrie.client
    reqs = env["requests"][:3]
    tok = np.array([r["tokens"] for r in reqs], dtype=np.uint32)
    lp = np.array([r["logp"] for r in reqs], dtype=np.float32)
    tmpl = fc._RawRequest(T, K, tok.ctypes.data, lp.ctypes.data, 16, 5,
                          -math.inf, -math.inf, 1.0)
    err = ctypes.create_string_buffer(1024)
    res = ctypes.c_void_p()
    h = client._h

    def grids(q, n):
        return lib.ft_client_search_grids(h, ctypes.addressof(q), n,
                                          ctypes.addressof(res), err, 1024)

    def hits_of(r, i):
        x = lib.ft_client_results_get(r, i).contents
        return [(tuple(x.tokens[x.hits[j].tok_off:x.hits[j].tok_off +
                                x.hits[j].len]), x.hits[j].value,
                 x.hits[j].score, x.hits[j].sigma) for j in range(x.n)]

    assert grids(tmpl, 3) == 0
    one = ctypes.c_void_p()
    reqs1 = (flashtrie._lib.Request * 3)()
    for i in range(3):
        fc._Params(16, 5, -math.inf, -math.inf, 1.0).fill(
            reqs1[i], T, K, tok[i].ctypes.data, lp[i].ctypes.data)
    assert lib.ft_client_search(h, reqs1, 3, ctypes.byref(one), err,
                                1024) == 0
    try:
        want = [hits_of(one, i) for i in range(3)]
        assert [hits_of(res, i) for i in range(3)] == want
        assert all(1 <= len(w) <= 5 for w in want)
        R = max(len(w) for w in want)
        L = max(len(h[0]) for w in want for h in w)
        mh, ml = ctypes.c_uint32(99), ctypes.c_uint32(99)
        shape = lib.ft_client_results_shape
        assert shape(res, 0, 3, ctypes.addressof(mh),
                     ctypes.addressof(ml)) == 3
        assert (mh.value, ml.value) == (R, L)
        assert shape(res, 1, 1, ctypes.addressof(mh), None) == 1
        assert mh.value == len(want[1])
        assert shape(res, 2, 5, None, ctypes.addressof(ml)) == 1
        assert ml.value == max(len(h[0]) for h in want[2])
        assert shape(res, 3, 1, ctypes.addressof(mh),
                     ctypes.addressof(ml)) == 0
        assert (mh.value, ml.value) == (0, 0)
        # Columns as separate (count, rows, ...) arrays, one row spare.
        n = np.zeros(3, np.uint32)
        st = np.full(3, 7, np.int32)
        ct = np.full((3, R + 1, L), 0xAB, np.uint32)
        cl = np.full((3, R + 1), 0xAB, np.uint32)
        cv = np.full((3, R + 1), 0xAB, np.uint64)
        cs = np.full((3, R + 1), 5.0, np.float64)
        cg = np.full((3, R + 1), 5.0, np.float32)
        cols = flashtrie._lib.Columns(R + 1, L, n.ctypes.data, st.ctypes.data,
                                      ct.ctypes.data, cl.ctypes.data,
                                      cv.ctypes.data, cs.ctypes.data,
                                      cg.ctypes.data)
        before = [a.copy() for a in (n, st, ct, cl, cv, cs, cg)]

        def columns(first, count, c=cols):
            return lib.ft_client_results_columns(res, first, count,
                                                 ctypes.addressof(c), err,
                                                 1024)

        def unchanged():
            return all(np.array_equal(a, b) for a, b in
                       zip((n, st, ct, cl, cv, cs, cg), before))

        assert columns(2, 2) == 2 and unchanged()
        assert err.value.decode() == "columns: results 2..4 asked, 3 held"
        small = flashtrie._lib.Columns.from_buffer_copy(cols)
        small.rows = R - 1
        assert columns(0, 3, small) == 2 and unchanged()
        k = next(k for k in range(3) if len(want[k]) == R)
        assert err.value.decode() == \
            "columns: result %d has %d hits, rows holds %d" % (k, R, R - 1)
        narrow = flashtrie._lib.Columns.from_buffer_copy(cols)
        narrow.width = L - 1
        k, j = next((k, j) for k in range(3) for j, x in enumerate(want[k])
                    if len(x[0]) == L)
        assert columns(0, 3, narrow) == 2 and unchanged()
        assert err.value.decode() == \
            "columns: result %d, hit %d: a key of %d tokens, width holds " \
            "%d" % (k, j, L, L - 1)
        assert columns(0, 3) == 0
        assert n.tolist() == [len(w) for w in want] and st.tolist() == [0] * 3
        for i, w in enumerate(want):
            for j, (ktok, val, score, sigma) in enumerate(w):
                assert tuple(ct[i, j, :len(ktok)].tolist()) == ktok
                assert not ct[i, j, len(ktok):].any()
                assert (cl[i, j], cv[i, j], cs[i, j]) == (len(ktok), val,
                                                          score)
                assert float(cg[i, j]) == sigma
            # slots past the hits: zero in every column
            for a in (ct, cl, cv, cs, cg):
                assert not a[i, len(w):].any()
        # Faults of the grids themselves.
        for f, v, msg in [("T", 65, "search: grids: T 65 exceeds 64"),
                          ("K", 4097, "search: grids: K 4097 exceeds 4096")]:
            bad = fc._RawRequest.from_buffer_copy(tmpl)
            setattr(bad, f, v)
            assert grids(bad, 1) == 9 and err.value.decode() == msg
            assert res.value is None
        assert grids(tmpl, 0) == 2
        assert err.value.decode() == "search: expected 1..1024 requests, " \
            "got 0"
        assert grids(tmpl, 1025) == 2
        assert lib.ft_client_search_grids(h, None, 1, ctypes.addressof(res),
                                          err, 1024) == 2
        assert err.value.decode() == "search: grids is NULL"
        assert lib.ft_client_results_columns(None, 0, 1,
                                             ctypes.addressof(cols), err,
                                             1024) == 2
        assert err.value.decode() == "columns: results is NULL"
    finally:
        lib.ft_client_results_free(res)
        lib.ft_client_results_free(one)


@pytest.mark.parametrize("connections,coalesce", [(1, 0), (3, 0), (1, 2)])
def test_threads_share_a_client(env, connections, coalesce):
    """threads on one client, each answer exact: over one connection,
    three, and one whose calls share frames (coalesce)"""
    reqs = env["requests"]
    want = expected(env["big"], reqs)
    errors = []
    with flashtrie.Client(env["urls"][0], timeout=20,
                          connections=connections, coalesce=coalesce) as c:
        def work(k):
            try:
                for i in range(k, len(reqs), 4):
                    check_hits(c.search(reqs[i]["tokens"], reqs[i]["logp"],
                                        **kwargs_of(reqs[i])), want[i])
            except BaseException as e:  # reported by the main thread
                errors.append(e)
        ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(timeout=60)
    assert not errors, errors[0]
    assert not any(t.is_alive() for t in ts)


@pytest.mark.parametrize("coalesce", [None, 0])
def test_default_client_coalesces(env, tmp_path, coalesce):
    """32 threads' lone searches at once on one Client, against a server
    that holds every batch 20 ms: by default (coalesce=16) 16 leave alone
    and the calls made meanwhile share messages; with coalesce=0 each is
    a message of its own.  Every answer exact either way."""
    url = "ipc://%s/held.sock" % tmp_path
    srv = Server(str(tmp_path), "held", env["big"], [url],
                 "--test-delay-us", "20000")
    srv.start()
    try:
        reqs = env["requests"][:32]
        want = expected(env["big"], reqs)
        kw = {} if coalesce is None else {"coalesce": coalesce}
        errors = []
        go = threading.Barrier(len(reqs))
        with flashtrie.Client(url, timeout=20, **kw) as c:
            before = messages(c)

            def work(i):
                try:
                    go.wait()
                    check_hits(c.search(reqs[i]["tokens"], reqs[i]["logp"],
                                        **kwargs_of(reqs[i])), want[i])
                except BaseException as e:  # reported by the main thread
                    errors.append(e)
            ts = [threading.Thread(target=work, args=(i,))
                  for i in range(len(reqs))]
            for t in ts:
                t.start()
            for t in ts:
                t.join(timeout=60)
            sent = messages(c) - before - 1  # less the INFO before
        assert not errors, errors[0]
        assert not any(t.is_alive() for t in ts)
        if coalesce is None:
            assert 17 <= sent <= 31, sent
        else:
            assert sent == 32
    finally:
        srv.stop()


# ---- faults found before sending ----

def messages(c):
    return c.info_dict()["requests"]["messages"]


def test_bad_arguments_refused_before_sending(env):
    ok_t, ok_l = np.array([[1, 2]]), np.array([[-1.0, -2.0]])
    cases = [
        ((np.array([1, 2]), np.array([-1.0, -2.0])), {}, ValueError,
         "tokens: expected a 2-D array of shape (T, K), got shape (2,)"),
        ((np.zeros((2, 2, 2), int), np.zeros((2, 2, 2))), {}, ValueError,
         "tokens: expected a 2-D array of shape (T, K), got shape (2, 2, 2)"),
        ((ok_t, np.array([[-1.0, -2.0, -3.0]])), {}, ValueError,
         "logp: shape (1, 3) does not match tokens (1, 2)"),
        ((np.zeros((0, 3), int), np.zeros((0, 3))), {}, ValueError,
         "tokens: T (positions) must be 1..64, got 0"),
        ((np.zeros((65, 1), int), np.zeros((65, 1))), {}, ValueError,
         "tokens: T (positions) must be 1..64, got 65"),
        ((np.zeros((1, 4097), int), np.zeros((1, 4097))), {}, ValueError,
         "tokens: K (proposals) must be 1..4096, got 4097"),
        ((np.array([[1.0, 2.0]]), ok_l), {}, TypeError,
         "tokens: must be integers convertible to uint32, got dtype float64"),
        (([["a", "b"]], ok_l), {}, TypeError,
         "tokens: must be integers convertible to uint32, got dtype <U1"),
        ((ok_t, np.array([[1j, 2j]])), {}, TypeError,
         "logp: must be real numbers convertible to float32, got dtype "
         "complex128"),
        ((np.array([[1, -3]]), ok_l), {}, ValueError,
         "tokens: position 0, proposal 1: -3 is not a uint32"),
        ((np.array([[1], [2 ** 32]]), np.array([[-1.0], [-1.0]])), {},
         ValueError, "tokens: position 1, proposal 0: 4294967296 is not a "
         "uint32"),
        ((ok_t, ok_l), {"beam": 2.0}, TypeError,
         "beam: must be an integer, got 2.0"),
        # Counts that cannot be sent get the server's message (results 0
        # would read as absent there); 0 < n < 2^32 goes to the server.
        ((ok_t, ok_l), {"beam": -1}, ValueError,
         "beam: must be 1..4096, got -1"),
        ((ok_t, ok_l), {"beam": 2 ** 32}, ValueError,
         "beam: must be 1..4096, got 4294967296"),
        ((ok_t, ok_l), {"results": 0}, ValueError,
         "results: must be 1..4096, got 0"),
        ((ok_t, ok_l), {"results": -1}, ValueError,
         "results: must be 1..4096, got -1"),
        ((ok_t, ok_l), {"results": 2 ** 32}, ValueError,
         "results: must be 1..4096, got 4294967296"),
        ((ok_t, ok_l), {"alpha": "1"}, TypeError,
         "alpha: must be a real number, got str"),
        ((ok_t, ok_l), {"theta_tok": None}, TypeError,
         "theta_tok: must be a real number, got NoneType"),
    ]
    with flashtrie.Client(env["urls"][0]) as c:
        before = messages(c)
        for args, kw, exc, msg in cases:
            with pytest.raises(exc) as ei:
                c.search(*args, **kw)
            assert str(ei.value) == msg
            assert not isinstance(ei.value, flashtrie.Error)
        batch = [
            ((np.zeros((1025, 1, 1), int), np.zeros((1025, 1, 1))), {},
             ValueError, "batch: must hold 1..1024 requests, got 1025"),
            ((np.zeros((2, 1, 1), int), np.zeros((2, 1, 2))), {},
             ValueError, "logp: shape (2, 1, 2) does not match tokens "
             "(2, 1, 1)"),
            ((np.zeros((1, 1), int), np.zeros((1, 1))), {}, ValueError,
             "tokens: expected a 3-D array of shape (b, T, K), got shape "
             "(1, 1)"),
            (([[[1]], [[2]]], [[[-1]]]), {}, ValueError,
             "search_batch: 2 token grids but 1 logp grids"),
            (([([[1]], [[-1]]), ([[1.5]], [[-1]])],), {}, TypeError,
             "request 1: tokens: must be integers convertible to uint32, "
             "got dtype float64"),
            (([([[1]], [[-1]]), [[1]]],), {}, TypeError,
             "request 1: expected a (tokens, logp) pair, got list"),
            (([],), {}, ValueError, "batch: must hold 1..1024 requests, "
             "got 0"),
            ((np.zeros((1, 1, 1), int),), {}, TypeError,
             "search_batch: logp missing (give tokens and logp, or a list "
             "of (tokens, logp) pairs)"),
            (([([[1]], [[-1]])],), {"errors": "ignore"}, ValueError,
             'errors: must be "raise" or "return", got \'ignore\''),
        ]
        for args, kw, exc, msg in batch:
            with pytest.raises(exc) as ei:
                c.search_batch(*args, **kw)
            assert str(ei.value) == msg
        # Only the INFO calls themselves reached the server.
        assert messages(c) == before + 1
    for kw, exc, msg in [
            ({"timeout": 0}, ValueError,
             "timeout: must be a positive number of seconds, got 0"),
            ({"deadline": -1}, ValueError,
             "deadline: must be a positive number of seconds, got -1"),
            ({"tls": 3}, TypeError,
             "tls: must be a flashtrie.TLS or a dict, got int"),
            ({"reconnect_wait": -1}, ValueError,
             "reconnect_wait: must be a positive number of seconds, got -1"),
            ({"recv_max_bytes": 0}, ValueError,
             "recv_max_bytes: must be 1..9223372036854775807, got 0"),
            ({"connections": 0}, ValueError,
             "connections: must be 1..64, got 0"),
            ({"connections": 65}, ValueError,
             "connections: must be 1..64, got 65"),
            ({"coalesce": -1}, ValueError,
             "coalesce: must be 0..64, got -1"),
            ({"coalesce": 65}, ValueError,
             "coalesce: must be 0..64, got 65")]:
        with pytest.raises(exc) as ei:
            flashtrie.Client(env["urls"][0], **kw)
        assert str(ei.value) == msg


# ---- errors from the server and the connection ----

def test_connection_errors(env, tmp_path):
    url = "ipc://%s/nobody.sock" % tmp_path
    with pytest.raises(flashtrie.ConnectionError) as ei:
        flashtrie.Client(url)
    assert ei.value.code == 22 and ei.value.name == "FT_ECONN"
    assert ei.value.message.startswith(url + ": cannot connect: ")
    assert isinstance(ei.value, ConnectionError)  # the builtin too
    with flashtrie.Client(url, timeout=0.2, connect_wait=True) as c:
        t0 = time.monotonic()
        with pytest.raises(flashtrie.TimeoutError) as ei:
            c.ping()
        assert time.monotonic() - t0 < 5
        assert ei.value.code == 21
        assert ei.value.message == url + ": no answer to PING within 200 ms"
        assert isinstance(ei.value, TimeoutError)
    with pytest.raises(flashtrie.Error) as ei:
        flashtrie.Client("nonsense://x")
    assert ei.value.code == 2 and ei.value.message.startswith("nonsense://x")
    # an empty URL and an address that is none are the caller's mistakes
    # (FT_EINVAL, named), not a failed connection (": Invalid argument",
    # and ConnectionError for a port past 65535, before)
    for u, msg in [("", "connect: url is empty (expected tcp://, tls+tcp:// "
                        "or ipc://)"),
                   ("tcp://127.0.0.1:99999", "tcp://127.0.0.1:99999: not a "
                    "valid address: Address invalid")]:
        with pytest.raises(flashtrie.Error) as ei:
            flashtrie.Client(u)
        assert not isinstance(ei.value, ConnectionError)
        assert ei.value.name == "FT_EINVAL" and ei.value.message == msg
    c = flashtrie.Client(env["urls"][0])
    c.close()
    c.close()
    assert c.closed
    with pytest.raises(flashtrie.StateError) as ei:
        c.ping()
    assert ei.value.message == "client: closed" and ei.value.code == 18


def test_reload_not_allowed(env, client):
    with pytest.raises(flashtrie.PermissionError) as ei:
        client.reload()
    assert ei.value.code == 23
    assert isinstance(ei.value, PermissionError)
    assert ei.value.message


def test_text_arguments(env, tmp_path):
    """The C library reads a URL or a path up to its first NUL: one inside
    it is refused, not cut (a reload of the file before it was answered
    "reloaded"); a reload path may be bytes or a PathLike, sent as the
    path itself (bytes went out as "b'...'")."""
    url = env["urls"][0]
    with pytest.raises(ValueError) as ei:
        flashtrie.Client(url + "\0x")
    assert str(ei.value) == "url: NUL byte at byte %d of %r" % (
        len(url), url + "\0x")
    with pytest.raises(ValueError) as ei:
        flashtrie.Client("tls+tcp://127.0.0.1:1",
                         tls=flashtrie.TLS(ca="ca.pem\0"))
    assert str(ei.value) == "tls.ca: NUL byte at byte 6 of 'ca.pem\\x00'"
    with pytest.raises(TypeError) as ei:
        flashtrie.Client("tls+tcp://127.0.0.1:1",
                         tls=flashtrie.TLS(ca="ca.pem", server_name=5))
    assert str(ei.value) == "tls.server_name: must be a str, got int"
    admin = "ipc://%s/admin.sock" % tmp_path
    srv = Server(str(tmp_path), "reload", env["small"], [admin],
                 "--admin-reload")
    srv.args[srv.args.index("--listen")] = "--admin-listen"
    srv.start()
    try:
        with flashtrie.Client(admin) as c:
            before = c.info_dict()["index"]["generation"]
            with pytest.raises(ValueError) as ei:
                c.reload(env["small"] + "\0junk")
            assert str(ei.value) == "path: NUL byte at byte %d of %r" % (
                len(env["small"]), env["small"] + "\0junk")
            with pytest.raises(TypeError) as ei:
                c.reload(7)
            assert str(ei.value) == \
                "path: must be a str, bytes or os.PathLike, got int"
            assert c.info_dict()["index"]["generation"] == before
            missing = os.path.join(str(tmp_path), "none.fti")
            with pytest.raises(flashtrie.Error) as ei:
                c.reload(missing.encode())
            assert ei.value.message == \
                "reload: refused: %s: cannot open: No such file or " \
                "directory" % missing
            assert c.reload(pathlib.Path(env["small"])).startswith(
                "reloaded %s: generation " % env["small"])
    finally:
        srv.stop()


def test_busy_deadline_shutdown_closed(env, tmp_path):
    """A slow server (every batch sleeps 400 ms) with a queue of one:
    BUSY, DEADLINE, SHUTDOWN while it drains, then a stopped server."""
    url = "ipc://%s/slow.sock" % tmp_path
    srv = Server(str(tmp_path), "slow", env["big"], [url], "--queue-depth",
                 "1", "--max-batch", "1", "--test-delay-us", "400000")
    srv.start()
    try:
        r = env["requests"][0]
        want = expected(env["big"], [r])[0]
        with flashtrie.Client(url, timeout=20) as c:
            # Two requests in one message never fit a queue of one.
            with pytest.raises(flashtrie.LimitError) as ei:
                c.search_batch([(r["tokens"], r["logp"])] * 2)
            assert ei.value.code == 9
            assert ei.value.message == \
                "count: 2 requests in one frame exceed the queue depth 1"
            # One request runs (400 ms), one waits in the queue: a third
            # finds it full.
            done = []
            ts = [threading.Thread(target=lambda: done.append(c.search(
                r["tokens"], r["logp"], **kwargs_of(r)))) for _ in range(2)]
            for t in ts:
                t.start()
                time.sleep(0.1)
            with pytest.raises(flashtrie.BusyError) as ei:
                c.search(r["tokens"], r["logp"], **kwargs_of(r))
            assert ei.value.code == 16
            assert ei.value.message.startswith("queue: full")
            for t in ts:
                t.join(timeout=30)
            assert len(done) == 2
            for hits in done:
                check_hits(hits, want)
            assert c.info_dict()["queue"]["busy_rejections"] == 1
        with flashtrie.Client(url, timeout=20, deadline=0.02) as c:
            with pytest.raises(flashtrie.DeadlineError) as ei:
                c.search(r["tokens"], r["logp"], **kwargs_of(r))
            assert ei.value.code == 20
            assert ei.value.message.startswith("deadline: passed ")
        # A short timeout: once the server is gone, c's calls wait for it.
        c = flashtrie.Client(url, timeout=3)
        slow = {}
        t = threading.Thread(target=lambda: slow.update(
            hits=c.search(r["tokens"], r["logp"], **kwargs_of(r))))
        t.start()
        time.sleep(0.1)
        srv.proc.send_signal(signal.SIGTERM)
        shut = None
        for _ in range(20):
            time.sleep(0.05)
            try:
                c.search(r["tokens"], r["logp"], **kwargs_of(r))
            except flashtrie.ShutdownError as e:
                shut = e
                break
        assert shut is not None, "no SHUTDOWN while draining"
        assert shut.code == 25 and shut.message
        t.join(timeout=30)
        check_hits(slow["hits"], want)   # the one in flight is answered
        assert srv.proc.wait(timeout=30) == 0
        assert "drained: every request answered" in srv.tail()
        # The server is gone: the open client fails with ConnectionError
        # once its reconnect wait (1 s) is over, it does not hang; one that
        # never connected waits its timeout for a server.
        t0 = time.monotonic()
        with pytest.raises(flashtrie.ConnectionError) as ei:
            c.search(r["tokens"], r["logp"])
        assert time.monotonic() - t0 < 8
        assert ei.value.message.startswith(
            url + ": connection lost: SEARCH not sent (no server for ")
        c.close()
        c2 = flashtrie.Client(url, timeout=1, connect_wait=True)
        with pytest.raises(flashtrie.TimeoutError) as ei:
            c2.search(r["tokens"], r["logp"])
        assert ei.value.message == url + ": no answer to SEARCH within 1000 ms"
        c2.close()
    finally:
        srv.kill()


def test_lost_connection(env, tmp_path):
    """A server killed with a call in flight, gone, then back at the same
    address: the call fails at once with ConnectionError naming the lost
    connection (not TimeoutError after 20 s); new calls fail after the
    reconnect wait; the same Client is answered once the server is back."""
    url = "tcp://127.0.0.1:%d" % free_port()
    slow = Server(str(tmp_path), "slow", env["big"], [url], "--max-batch", "1",
                  "--test-delay-us", "2000000").start()
    r = env["requests"][0]
    want = expected(env["big"], [r])[0]
    c = flashtrie.Client(url, timeout=20)
    c0 = flashtrie.Client(url, timeout=20, reconnect_wait=0)
    try:
        got = {}

        def call():
            t0 = time.monotonic()
            try:
                c.search(r["tokens"], r["logp"], **kwargs_of(r))
            except flashtrie.Error as e:
                got["e"] = e
            got["s"] = time.monotonic() - t0

        t = threading.Thread(target=call)
        t.start()
        time.sleep(0.3)
        slow.kill()
        t.join(timeout=30)
        e = got["e"]
        assert isinstance(e, flashtrie.ConnectionError), repr(e)
        assert isinstance(e, ConnectionError)      # the builtin too
        assert e.code == 22 and e.name == "FT_ECONN"
        assert e.message == url + ": connection lost: no answer to SEARCH"
        assert got["s"] < 8
        time.sleep(0.2)
        t0 = time.monotonic()
        with pytest.raises(flashtrie.ConnectionError) as ei:
            c.ping()
        assert 0.9 < time.monotonic() - t0 < 8
        assert ei.value.message.startswith(
            url + ": connection lost: PING not sent (no server for ")
        t0 = time.monotonic()
        with pytest.raises(flashtrie.ConnectionError) as ei:
            c0.search(r["tokens"], r["logp"])
        assert time.monotonic() - t0 < 0.9
        assert ei.value.message.startswith(
            url + ": connection lost: SEARCH not sent (no server for ")
        # Back at the same address: the same clients are answered.
        back = Server(str(tmp_path), "back", env["big"], [url]).start()
        try:
            check_hits(c.search(r["tokens"], r["logp"], **kwargs_of(r)),
                       want)
            # c0 does not wait: it is answered once its own dialer is back
            # (within its 200 ms backoff).
            for _ in range(50):
                try:
                    c0.ping()
                    break
                except flashtrie.ConnectionError:
                    time.sleep(0.02)
            c0.ping()
        finally:
            back.stop()
    finally:
        c.close()
        c0.close()
        slow.kill()


def test_recv_max_bytes(env, client):
    """A reply above recv_max_bytes drops the connection: ConnectionError;
    a small reply (PONG) still comes once the client has reconnected."""
    r = env["requests"][0]
    with flashtrie.Client(client.url, timeout=20, recv_max_bytes=64) as c:
        with pytest.raises(flashtrie.ConnectionError) as ei:
            c.search(r["tokens"], r["logp"], **kwargs_of(r))
        assert ei.value.message == \
            client.url + ": connection lost: no answer to SEARCH"
        c.ping()


def test_tls(env, tmp_path):
    """tls+tcp:// with a self-signed certificate made by the openssl CLI:
    answers as over ipc; a wrong server name gets no answer."""
    cert, key = str(tmp_path / "cert.pem"), str(tmp_path / "key.pem")
    p = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
         "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out",
         cert, "-days", "2", "-subj", "/CN=localhost", "-addext",
         "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    url = "tls+tcp://127.0.0.1:%d" % free_port()
    srv = Server(str(tmp_path), "tls", env["big"], [url], "--tls-cert", cert,
                 "--tls-key", key)
    tls = flashtrie.TLS(ca=cert, server_name="localhost")
    srv.start(tls=tls)
    try:
        reqs = env["requests"][:8]
        want = expected(env["big"], reqs)
        with flashtrie.Client(url, tls={"ca": cert,
                                        "server_name": "localhost"}) as c:
            for r, w in zip(reqs, want):
                check_hits(c.search(r["tokens"], r["logp"], **kwargs_of(r)),
                           w)
        # A wrong server name: the failed handshake is named, at connect
        # or (connect_wait) on the first call, not after the timeout.
        host = url[len("tls+tcp://"):]
        why = ("(the server's certificate was not accepted, or the peer "
               "does not speak TLS)")
        bad = flashtrie.TLS(ca=cert, server_name="not-this-host")
        with pytest.raises(flashtrie.ConnectionError) as ei:
            flashtrie.Client(url, timeout=10, tls=bad)
        assert ei.value.message == "%s: TLS handshake with %s failed: " \
            "Cryptographic error %s" % (url, host, why)
        with flashtrie.Client(url, timeout=10, tls=bad,
                              connect_wait=True) as c:
            t0 = time.monotonic()
            with pytest.raises(flashtrie.ConnectionError) as ei:
                c.ping()
            assert time.monotonic() - t0 < 8
            assert ei.value.message == "%s: TLS handshake with %s failed " \
                "%s" % (url, host, why)
        # No CA: refused, unless insecure (then a warning says so).
        for tls in (None, flashtrie.TLS(server_name="localhost")):
            with pytest.raises(flashtrie.Error) as ei:
                flashtrie.Client(url, tls=tls)
            assert ei.value.code == 2
            assert ei.value.message == (
                "%s: TLS: no CA to verify the server with: give tls_ca, or "
                "set tls_insecure to connect without verifying the server"
                % url)
        with pytest.warns(UserWarning) as rec:
            c = flashtrie.Client(url, tls={"insecure": True})
        assert str(rec[0].message) == (
            "flashtrie: %s: TLS with insecure=True: the server's "
            "certificate is not verified" % url)
        with c:
            check_hits(c.search(reqs[0]["tokens"], reqs[0]["logp"],
                                **kwargs_of(reqs[0])), want[0])
    finally:
        srv.stop()


# ---- info ----

def test_info(env, client):
    text = client.info()
    assert text.startswith("# server\n")
    d = client.info_dict()
    # A plain listener: the operational sections and the limits; no pid,
    # paths, addresses or settings (issue 39).
    assert set(d) >= {"server", "index", "engines", "queue", "requests",
                      "limits"}
    assert "config" not in d
    assert "pid" not in d["server"] and "path" not in d["index"]
    assert not [k for k in d["server"] if k.startswith("listener.")]
    assert env["tmp"] not in text
    assert d["limits"]["max_message_bytes"] == 67108864
    keys = [l for l in env["info"].splitlines() if l.startswith("keys: ")]
    assert keys == ["keys: 3000"]
    assert d["index"]["keys"] == 3000
    assert d["server"]["version"] == "0.1.0"
    assert d["server"]["draining"] == 0
    assert isinstance(d["server"]["uptime_s"], float)
    assert d["engines"]["engine.0.kind"] == "cpu"
    # The admin listener: all of it.
    with flashtrie.Client(env["admin"]) as a:
        d = a.info_dict()
    assert d["index"]["path"] == env["big"]
    assert d["server"]["pid"] == env["server"].proc.pid
    assert d["config"]["engine"] == "cpu (cli)"
    listeners = [v for k, v in d["server"].items()
                 if k.startswith("listener.")]
    assert listeners == env["urls"] + [env["admin"] + " admin"]
    assert flashtrie.parse_info("# a\nx: 1\ny: -2.5\nz: q r\n\n# b\n") == \
        {"a": {"x": 1, "y": -2.5, "z": "q r"}, "b": {}}


def test_library_not_found(tmp_path):
    pkg = os.path.dirname(os.path.dirname(flashtrie.__file__))
    env = dict(os.environ, FLASHTRIE_CLIENT_LIB=str(tmp_path / "none.so"),
               PYTHONPATH=pkg)
    p = subprocess.run([sys.executable, "-c",
                        "import flashtrie; flashtrie.Client('ipc:///x')"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 1
    assert "OSError: flashtrie: cannot load libflashtrie_client: %s" % (
        tmp_path / "none.so") in p.stderr
    assert "set FLASHTRIE_CLIENT_LIB" in p.stderr


def test_codes_match_the_header():
    """The Python table of ft_err is the enum of include/flashtrie.h."""
    with open(os.path.join(HERE, "..", "..", "include", "flashtrie.h")) as f:
        text = f.read()
    body = text[text.index("typedef enum ft_err {"):]
    body = body[:body.index("} ft_err;")]
    enum = {int(v): k for k, v in re.findall(r"(FT_[A-Z]+) = (\d+)", body)}
    assert enum == flashtrie.CODES
    assert len(enum) >= 27
