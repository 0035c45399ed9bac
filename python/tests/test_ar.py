"""test_ar.py - the autoregressive step API from Python (flashtrie.ar) and
the generate() processor (flashtrie.hf).

- Session.step equals a pure-Python reference of the step's rules on
  random dense rows with ties and -inf holes (beams, completed keys,
  sigmas, scores: exact), and sparse rows give the same as dense ones.
- Session.mask equals the trie's children.
- The processor keeps a beam search, greedy decoding and sampling of a
  fake model inside the library, and a wide beam search under it finds
  the brute-force best key.
- With transformers (and torch): generate(num_beams=...) of a tiny random
  GPT-2 built from a config never leaves the library and finds the
  brute-force best key; skipped, saying so, without them.
- With a CUDA device: a GPU session equals the CPU session (torch).

Environment: FT_BIN (the flashtrie program, to build the index) and
FLASHTRIE_LIB (libflashtrie.so); tests/python/CMakeLists.txt sets both.
"""
import math
import os
import subprocess

import numpy as np
import pytest

from flashtrie.ar import DEAD, DONE, Error, Index, Session, TrieRows, _ptr
from flashtrie.hf import TrieLogitsProcessor

BIN = os.environ.get("FT_BIN", "")
V = 16          # model vocabulary: 0 pad, 1 EOS, 2 BOS, 3..15 key tokens
EOS, PAD, BOS = 1, 0, 2


def make_keys(seed, n=24):
    rng = np.random.default_rng(seed)
    keys = set()
    while len(keys) < n:
        L = int(rng.integers(1, 5))
        keys.add(tuple(int(x) for x in rng.integers(3, V, size=L)))
    return sorted(keys)


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ar")
    keys = make_keys(7)
    txt = tmp / "keys.txt"
    txt.write_text("".join(" ".join(map(str, k)) + "\t%d\n" % (100 + i)
                           for i, k in enumerate(keys)))
    idx_path = str(tmp / "keys.ft")
    subprocess.run([BIN, "build", "--input", str(txt), "--output", idx_path,
                    "--quiet"], check=True, timeout=60)
    idx = Index(idx_path)
    values = {k: 100 + i for i, k in enumerate(keys)}
    yield idx, keys, values
    idx.close()


# ---- a pure-Python reference of one step ---------------------------------

def prefix_set(keys):
    p = set()
    for k in keys:
        for i in range(1, len(k) + 1):
            p.add(k[:i])
    return p


def ref_step(beams, rows, keys, B, n, theta_tok, theta_sent, alpha):
    """beams: list of (prefix tuple, sigma float32).  Returns next beams and
    hits as (prefix, sigma, score) lists, in the step's order."""
    prefixes, keyset = prefix_set(keys), set(keys)
    cands, hits = [], []
    for r, (pre, s) in enumerate(beams):
        for j in range(rows.shape[1]):
            rho = np.float32(rows[r, j])
            if not rho > np.float32(theta_tok):
                continue
            sig = np.float32(s + rho)
            if not sig > np.float32(theta_sent):
                continue
            u = pre + (j,)
            if u not in prefixes:
                continue
            # key order: sigma desc, r asc, rho desc, j asc
            order = (r, -float(rho), j)
            if any(p[:len(u)] == u and len(p) > len(u) for p in prefixes):
                cands.append((-float(sig), order, u, sig))
            if u in keyset:
                sc = float(sig) * (6.0 / (5.0 + len(u))) ** alpha
                hits.append((-sc, order, u, sig, sc))
    cands.sort(key=lambda c: (c[0], c[1]))
    hits.sort(key=lambda h: (h[0], h[1]))
    return ([(c[2], c[3]) for c in cands[:B]],
            [(h[2], h[3], h[4]) for h in hits[:n]])


def rows_for(rng, m, width):
    x = -rng.integers(0, 12, size=(m, width)).astype(np.float32) * 0.5
    x[rng.random((m, width)) < 0.15] = -np.inf
    return x


@pytest.mark.parametrize("B,n,theta_tok,theta_sent,alpha",
                         [(4, 6, -math.inf, -math.inf, 1.0),
                          (1, 2, -3.0, -math.inf, 0.0),
                          (7, 30, -4.0, -6.0, 2.5)])
def test_step_matches_reference(lib, B, n, theta_tok, theta_sent, alpha):
    idx, keys, values = lib
    s = Session(idx, beam=B, results=n, theta_tok=theta_tok,
                theta_sent=theta_sent, alpha=alpha, max_width=V)
    rng = np.random.default_rng(B * 100 + n)
    for trial in range(5):
        s.reset()
        beams = [((), np.float32(0))]
        for t in range(5):
            rows = rows_for(rng, B, V)
            out = s.step(rows)
            want, whits = ref_step(beams, rows, keys, B, n, theta_tok,
                                   theta_sent, alpha)
            assert out.count == len(want)
            got = [(beams[int(p)][0] + (int(tk),), np.float32(sg))
                   for p, tk, sg in zip(out.parent, out.token, out.sigma)]
            assert [g[0] for g in got] == [w[0] for w in want]
            assert [g[1].tobytes() for g in got] == [w[1].tobytes() for w in want]
            assert len(out.hits) == len(whits)
            for h, (pre, sig, sc) in zip(out.hits, whits):
                assert beams[h.parent][0] + (h.token,) == pre
                assert h.value == values[pre] and h.length == len(pre)
                assert np.float32(h.sigma).tobytes() == sig.tobytes()
                assert h.score == sc
            beams = got
            if out.count == 0:
                break


def test_sparse_equals_dense(lib):
    idx, keys, _ = lib
    a = Session(idx, beam=6, results=9, max_width=V)
    b = Session(idx, beam=6, results=9, max_width=V)
    rng = np.random.default_rng(3)
    a.reset()
    b.reset()
    ids = np.tile(np.arange(V, dtype=np.uint32), (6, 1))
    for t in range(5):
        rows = rows_for(rng, 6, V)
        oa = a.step(rows)
        ob = b.step(rows.copy(), ids=ids)
        assert oa.count == ob.count
        assert np.array_equal(oa.parent, ob.parent)
        assert np.array_equal(oa.token, ob.token)
        assert oa.sigma.tobytes() == ob.sigma.tobytes()
        assert oa.hits == ob.hits
        if oa.count == 0:
            break


def test_new_session_starts_at_the_root(lib):
    """A session's first step needs no reset(): it expands the root (the
    same beams and hits as a session reset first), and reset() after steps
    brings back that one root beam."""
    idx, keys, _ = lib
    rng = np.random.default_rng(11)
    rows = rows_for(rng, 1, V)
    fresh = Session(idx, beam=5, results=9, max_width=V)
    assert fresh.count() == 1
    assert fresh.beams()["node"][0] == 0 and fresh.beams()["len"][0] == 0
    assert fresh.beams()["sigma"][0] == 0.0
    reset = Session(idx, beam=5, results=9, max_width=V)
    reset.reset()
    a, b = fresh.step(rows), reset.step(rows.copy())
    nb, nh = ref_step([((), np.float32(0))], rows, keys, 5, 9, -math.inf,
                      -math.inf, 1.0)
    assert a.count == len(nb) > 0
    assert a.token.tolist() == [u[0] for u, _ in nb]
    assert [h.sigma for h in a.hits] == [float(sg) for _, sg, _ in nh]
    assert a.count == b.count and a.hits == b.hits
    assert np.array_equal(a.token, b.token)
    assert a.sigma.tobytes() == b.sigma.tobytes()
    fresh.reset()
    assert fresh.count() == 1 and fresh.beams()["node"][0] == 0


def test_bad_input_names_the_field(lib):
    idx, _, _ = lib
    s = Session(idx, beam=2, max_width=V)
    s.reset()
    with pytest.raises(Exception, match="input.width: must be 1..16"):
        s.step(np.zeros((2, V + 1), dtype=np.float32))
    with pytest.raises(ValueError, match="dtype"):
        s.step(np.zeros((2, V), dtype=np.float64))
    with pytest.raises(Exception, match="threads: must be 0..256, got 300"):
        Session(idx, beam=2, max_width=V, threads=300)


def test_threads_give_the_same_steps(lib):
    """A session of one thread and one of four give the same steps (the
    tiny library's steps stay below the size that shares a call out; the
    C test ar_step_test compares shared-out calls byte for byte)."""
    idx, _, _ = lib
    a = Session(idx, beam=6, results=9, max_width=V, threads=1)
    b = Session(idx, beam=6, results=9, max_width=V, threads=4)
    rng = np.random.default_rng(11)
    a.reset()
    b.reset()
    for t in range(5):
        rows = rows_for(rng, 6, V)
        oa, ob = a.step(rows), b.step(rows.copy())
        assert oa.count == ob.count and oa.hits == ob.hits
        assert oa.sigma.tobytes() == ob.sigma.tobytes()
        if oa.count == 0:
            break


def test_mask_matches_children(lib):
    idx, keys, _ = lib
    s = Session(idx, beam=8, max_width=V)
    prefixes = sorted(prefix_set(keys))[:8]
    nodes = [idx.walk(p) for p in prefixes]
    s.set_nodes(nodes)
    m = s.mask(V, eos=EOS)
    for r, p in enumerate(prefixes):
        want = np.zeros(V, dtype=bool)
        for k in keys:
            if len(k) > len(p) and k[:len(p)] == p:
                want[k[len(p)]] = True
        want[EOS] = p in set(keys)
        assert np.array_equal(m[r], want), p


def test_constrain_is_the_mask_applied(lib):
    """Session.constrain keeps exactly the entries mask() allows, bit for
    bit (NaN, +inf and -0 included), sets the rest to -inf, and leaves
    rows past the live beams all -inf: out of place, into a given array,
    in place, float32 and float16, fewer rows than the beam, and through
    a vocabulary; bad arguments are refused by name."""
    idx, keys, _ = lib
    s = Session(idx, beam=8, max_width=4)          # constrain: any width
    prefixes = sorted(prefix_set(keys))[:6]
    s.set_nodes([idx.walk(p) for p in prefixes])
    rng = np.random.default_rng(5)
    vocab = rng.permutation(V).astype(np.uint32)
    for dt in (np.float32, np.float16):
        for voc in (None, vocab):
            x = rng.normal(0, 3, (8, V)).astype(dt)
            x[0, :4] = [np.nan, np.inf, -0.0, 0.0]
            m = s.mask(V, vocab=voc, eos=EOS)
            want = np.where(m, x, np.array(-np.inf, dtype=dt))
            got = s.constrain(x, vocab=voc, eos=EOS)
            assert got.dtype == dt and got.tobytes() == want.tobytes()
            out = np.zeros_like(x)
            assert s.constrain(x, vocab=voc, eos=EOS, out=out) is out
            assert out.tobytes() == want.tobytes()
            y = x[:5].copy()            # 5 rows of 8: the 6th beam's unread
            assert s.constrain(y, vocab=voc, eos=EOS, out=y) is y
            assert y.tobytes() == want[:5].tobytes()
            assert not np.isfinite(want[6:]).any()
    x = np.zeros((2, V), dtype=np.float32)
    with pytest.raises(ValueError, match="logp: dtype float64"):
        s.constrain(x.astype(np.float64))
    with pytest.raises(ValueError, match="out: expected float32"):
        s.constrain(x, out=np.zeros((3, V), dtype=np.float32))
    with pytest.raises(Error, match="rows: must be 1..8"):
        s.constrain(np.zeros((9, V), dtype=np.float32))
    buf = np.zeros(2 * V + 1, dtype=np.float32)
    with pytest.raises(Error, match="out overlaps input.logp"):
        s.constrain(buf[:2 * V].reshape(2, V), out=buf[1:].reshape(2, V))


# ---- the processor on a fake model ----------------------------------------

def fake_logits(seq, salt=0):
    h = abs(hash((tuple(int(x) for x in seq), salt))) % (2 ** 32)
    return np.random.default_rng(h).normal(0, 2, V).astype(np.float32)


def log_softmax(x):
    x = x.astype(np.float64)
    m = x.max()
    return x - (m + np.log(np.exp(x - m).sum()))


def brute_best(keys, prompt, salt=0):
    best = None
    for k in keys:
        seq, sc = list(prompt), 0.0
        for tok in list(k) + [EOS]:
            sc += log_softmax(fake_logits(seq, salt))[tok]
            seq.append(tok)
        if best is None or sc > best[1]:
            best = (k, sc)
    return best


def beam_search(proc, prompt, num_beams, max_new, salt=0):
    """beam_search is generate()'s beam search in small: log-softmax, the
    processor, the best num_beams continuations; EOS ends a hypothesis."""
    live, done = [(list(prompt), 0.0)], []
    for _ in range(max_new):
        ids = np.array([b[0] for b in live], dtype=np.int64)
        scores = np.stack([log_softmax(fake_logits(b[0], salt)) for b in live])
        scores = proc(ids, scores)
        cand = []
        for r, (seq, sc) in enumerate(live):
            for tok in range(V):
                if np.isfinite(scores[r, tok]):
                    cand.append((sc + scores[r, tok], seq + [tok]))
        cand.sort(key=lambda c: -c[0])
        live = []
        for sc, seq in cand[:2 * num_beams]:
            if seq[-1] == EOS:
                done.append((seq, sc))
            elif len(live) < num_beams:
                live.append((seq, sc))
        if not live:
            break
    return done


def check_beam_search(keys, make_proc, salts):
    """a wide beam_search through make_proc()'s processor stays inside the
    library and finds brute force's best key and score."""
    for salt in range(salts):
        done = beam_search(make_proc(), [BOS], num_beams=len(keys) + 2,
                           max_new=6, salt=salt)
        assert done
        for seq, _ in done:
            assert tuple(seq[1:-1]) in set(keys), seq
        got = max(done, key=lambda d: d[1])
        want = brute_best(keys, [BOS], salt)
        assert tuple(got[0][1:-1]) == want[0]
        assert abs(got[1] - want[1]) < 1e-9


def test_processor_beam_search_is_exact(lib):
    idx, keys, _ = lib
    check_beam_search(keys, lambda: TrieLogitsProcessor(
        idx, eos_token_id=EOS, pad_token_id=PAD), 6)


def test_processor_greedy_and_sampling_stay_inside(lib):
    idx, keys, _ = lib
    rng = np.random.default_rng(5)
    for trial in range(40):
        proc = TrieLogitsProcessor(idx, eos_token_id=EOS, pad_token_id=PAD)
        seqs = [[BOS] for _ in range(4)]
        for step in range(7):
            ids = np.array(seqs, dtype=np.int64)
            sc = np.stack([log_softmax(fake_logits(s, trial)) for s in seqs])
            sc = proc(ids, sc)
            for r in range(4):
                ok = np.isfinite(sc[r])
                assert ok.any()
                if r == 0:
                    tok = int(np.argmax(sc[r]))
                else:
                    p = np.exp(sc[r][ok] - sc[r][ok].max())
                    tok = int(rng.choice(np.nonzero(ok)[0], p=p / p.sum()))
                seqs[r].append(tok)
        for s in seqs:
            gen = s[1:]
            assert EOS in gen, s
            assert tuple(gen[:gen.index(EOS)]) in set(keys), s
            assert all(t in (EOS, PAD) for t in gen[gen.index(EOS):]), s


# ---- the processor on torch tensors (generate's own types) ----------------

def _torch_or_skip():
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        pytest.skip("torch not installed here (%s)" % e)
    return torch


def brute_allowed(keys, gen, lib_of, width, eos, pad):
    """the columns row gen (model ids) may take, from the keys alone:
    lib_of maps a model id to its library token (None: no token)."""
    if eos is not None and eos in gen:
        return {c for c in (eos, pad) if c is not None and c < width}
    toks = [lib_of(t) for t in gen]
    n = len(toks)
    if any(t is None for t in toks) or \
            (n and tuple(toks) not in prefix_set(keys)):    # left the library
        return {eos} if eos is not None and eos < width else set()
    nxt = {k[n] for k in keys if len(k) > n and list(k[:n]) == toks}
    out = {c for c in range(width) if lib_of(c) in nxt}
    if eos is not None and eos < width and n and tuple(toks) in set(keys):
        out.add(eos)
    return out


def random_rows(rng, keys, n, L, eos, pad, model_of):
    """n rows of L generated model ids: along keys, then off them, with
    EOS + PAD endings and rows that leave the library."""
    rows = []
    for r in range(n):
        k = keys[int(rng.integers(len(keys)))]
        row = [model_of(t) for t in k[:L]]
        kind = r % 4
        if kind == 1 and len(row) < L:
            row.append(eos)
        if kind == 2 and row:
            row[int(rng.integers(len(row)))] = int(rng.integers(0, V))
        while len(row) < L:
            row.append(pad if eos in row else int(rng.integers(0, V)))
        rows.append(row[:L])
    return rows


@pytest.mark.parametrize("with_vocab", [False, True])
def test_processor_torch_equals_brute_force(lib, with_vocab):
    """The torch path (ft_ar_walk + the mask, as generate() calls it) and
    the numpy path give brute force's allowed columns, row by row, for
    rows along keys, rows that ended with EOS (then PAD), rows that left
    the library, with a vocabulary (a permutation of the model ids) and
    without; input_ids as int64 and int32, contiguous and a slice; more
    rows than the first call's (the session grows)."""
    torch = _torch_or_skip()
    idx, keys, _ = lib
    rng = np.random.default_rng(21 + with_vocab)
    if with_vocab:
        # model id j -> library token perm[j]; 0..2 (PAD, EOS, BOS) no token
        perm = np.arange(V, dtype=np.int64)
        perm[3:] = 3 + rng.permutation(V - 3)
        vocab = perm.copy()
        vocab[:3] = -1
        # a library index built over library tokens: keys are library
        # tokens; the model spells token t as the id j with perm[j] == t
        model_of = {int(perm[j]): j for j in range(3, V)}.__getitem__
        lib_of = lambda j: int(perm[j]) if 3 <= j < V else None  # noqa: E731
    else:
        vocab = None
        model_of = int
        lib_of = lambda j: j if 0 <= j < V else None  # noqa: E731
    proc_t = TrieLogitsProcessor(idx, eos_token_id=EOS, pad_token_id=PAD,
                                 vocab=vocab, prompt_len=2)
    proc_n = TrieLogitsProcessor(idx, eos_token_id=EOS, pad_token_id=PAD,
                                 vocab=vocab, prompt_len=2)
    checked = 0
    for n, L in ((3, 0), (5, 1), (8, 2), (40, 3), (9, 5), (70, 4)):
        gen = random_rows(rng, keys, n, L, EOS, PAD, model_of)
        ids = np.array([[BOS, 7] + g for g in gen], dtype=np.int64)
        ids = ids.reshape(n, 2 + L)
        for form in range(3):
            # scores of each dtype the library masks itself, and one it
            # does not (float64: the bool mask and masked_fill)
            dt = (torch.float32, torch.bfloat16, torch.float16,
                  torch.float64)[(form + L) % 4]
            scores = torch.randn((n, V)).to(dt)
            t = torch.as_tensor(ids)
            if form == 1:
                t = t.to(torch.int32)
            if form == 2:       # a slice of a wider tensor (strided rows)
                wide = torch.zeros((n, 2 + L + 3), dtype=torch.int64)
                wide[:, :2 + L] = t
                t = wide[:, :2 + L]
            out = proc_t(t, scores)
            got_t = torch.isfinite(out).numpy()
            keep = torch.isfinite(out)
            assert out.dtype == dt and torch.equal(out[keep], scores[keep])
            got_n = proc_n.allowed(ids, V)
            for r in range(n):
                want = brute_allowed(keys, gen[r], lib_of, V, EOS, PAD)
                assert set(np.nonzero(got_t[r])[0].tolist()) == want, \
                    (gen[r], form)
                assert set(np.nonzero(got_n[r])[0].tolist()) == want, gen[r]
                checked += 1
    assert checked > 300


def test_processor_rows_must_match_the_scores(lib):
    """generate hands the processor input_ids [rows, length] and scores
    [rows, vocab] of the same rows.  One row of input_ids with four rows
    of scores had its mask broadcast over all four rows (three rows
    masked by another row's prefix), and more rows failed inside torch;
    both are refused naming the shapes, for torch and numpy, and so are
    TrieRows.constrain's logits with fewer rows than states and rows
    naming no row of the logits."""
    torch = _torch_or_skip()
    idx, keys, _ = lib
    proc = TrieLogitsProcessor(idx, eos_token_id=EOS, prompt_len=1)
    ids = torch.tensor([[BOS, keys[0][0]]])
    for sc in (torch.zeros((4, V)), np.zeros((4, V), dtype=np.float32)):
        with pytest.raises(ValueError) as e:
            proc(ids if isinstance(sc, torch.Tensor) else ids.numpy(), sc)
        assert str(e.value) == ("input_ids: expected [4, length] for scores "
                                "of shape (4, 16), got shape (1, 2)")
    with pytest.raises(ValueError) as e:
        proc(ids.repeat(3, 1), torch.zeros((2, V)))
    assert str(e.value) == ("input_ids: expected [2, length] for scores of "
                            "shape (2, 16), got shape (3, 2)")
    with pytest.raises(ValueError) as e:
        proc(ids, torch.zeros(V))
    assert str(e.value) == "scores: expected [rows, vocab], got shape (16,)"
    for dt in (torch.float32, torch.float64):      # no rows: no scores
        assert tuple(proc(ids[:0], torch.zeros((0, V), dtype=dt)).shape) == \
            (0, V)
    got = torch.isfinite(proc(ids, torch.zeros((1, V))))      # still fine
    assert got[0].tolist() == torch.isfinite(
        proc(ids.repeat(2, 1), torch.zeros((2, V))))[1].tolist()
    tr = TrieRows(idx, rows=2, eos=EOS)
    state = torch.zeros(3, dtype=torch.int64)
    with pytest.raises(ValueError) as e:
        tr.constrain(torch.zeros((2, V)), state)
    assert str(e.value) == "logits: 2 rows for 3 states"
    with pytest.raises(ValueError) as e:
        tr.constrain(torch.zeros((5, V)), state, rows=torch.tensor([4, 0]))
    assert str(e.value) == ("rows: expected shape (3,) (one per state), "
                            "got (2,)")
    with pytest.raises(ValueError) as e:
        tr.constrain(torch.zeros(V), state)
    assert str(e.value) == "logits: expected [rows, width], got shape (16,)"
    # rows naming no row of logits: torch's IndexError ("index_copy_():
    # index 5 is out of bounds for dimension 0 with size 5") before
    for bad, at in (([4, 0, 5], "rows[2]: 5"), ([4, -1, 0], "rows[1]: -1")):
        logits = torch.zeros((5, V))
        with pytest.raises(ValueError) as e:
            tr.constrain(logits, state, rows=torch.tensor(bad))
        assert str(e.value) == "%s outside 0..4 (the logits' rows)" % at
        assert torch.equal(logits, torch.zeros((5, V)))
    got = tr.constrain(torch.zeros((5, V)), state, rows=torch.tensor([4, 0, 2]))
    assert torch.isinf(got[[0, 2, 4]]).any(dim=1).all()
    assert not torch.isinf(got[[1, 3]]).any()


def test_processor_takes_one_eos_id(lib):
    """transformers' generation configs give eos_token_id as an int, a
    list or a tensor: a list crashed the processor inside its session
    cache (TypeError: unhashable type: 'list'); one id in a list or a
    tensor is that id, several ids or a float are refused by name."""
    torch = _torch_or_skip()
    idx, keys, _ = lib
    k = next(k for k in keys if len(k) == 1 or idx.value(idx.walk(k[:1])))
    ids = torch.tensor([[BOS, k[0]]])
    scores = torch.zeros((1, V))
    want = TrieLogitsProcessor(idx, eos_token_id=EOS, prompt_len=1)(
        ids, scores)
    assert bool(torch.isfinite(want[0, EOS]))      # k[:1] is a key
    for eos in ([EOS], torch.tensor([EOS]), np.array([EOS])):
        p = TrieLogitsProcessor(idx, eos_token_id=eos, prompt_len=1)
        assert torch.equal(p(ids, scores), want)
        assert p.allowed(ids.numpy(), V).tolist() == \
            torch.isfinite(want).tolist()
    for eos, shown in (([EOS, PAD], "[1, 0]"), (1.0, "1.0")):
        with pytest.raises(ValueError) as e:
            TrieLogitsProcessor(idx, eos_token_id=eos)
        assert str(e.value) == ("eos_token_id: expected one integer id, "
                                "got %s" % shown)
    with pytest.raises(ValueError) as e:
        TrieLogitsProcessor(idx, eos_token_id=EOS, pad_token_id=[0, 1])
    assert str(e.value) == "pad_token_id: expected one integer id, got [0, 1]"


def test_processor_torch_beam_search_is_exact(lib):
    """beam_search's rows reordered every step (as generate's are) through
    the torch path find the brute-force best key."""
    torch = _torch_or_skip()
    idx, keys, _ = lib

    class OnTorch:
        def __init__(self):
            self.p = TrieLogitsProcessor(idx, eos_token_id=EOS,
                                         pad_token_id=PAD)

        def __call__(self, ids, scores):
            perm = np.random.default_rng(len(ids)).permutation(len(ids))
            inv = np.argsort(perm)
            out = self.p(torch.as_tensor(ids[perm]),
                         torch.as_tensor(scores[perm]))
            return out.numpy()[inv]

    check_beam_search(keys, OnTorch, 4)


def test_walk_lens_and_states_are_not_wrapped_or_truncated(lib):
    """Session.walk and TrieRows.walk took lens of 2**32 + 1 as 1 (cast to
    uint32: the row walked one token) and float lens or states truncated
    (a state of 0.7 walked from the root); lens of a CPU torch tensor
    below 0 were named as 4294967295.  Lens above the row's length, below
    0 and lens or states that are no integers are refused naming them."""
    idx, keys, _ = lib
    s = Session(idx, beam=4, max_width=V)
    rows = np.array([list(keys[0][:1]) + [0], [3, 0]], dtype=np.int64)
    with pytest.raises(ValueError) as e:
        s.walk(rows, lens=np.array([2 ** 32 + 1, 1]))
    assert str(e.value) == "lens[0]: 4294967297 exceeds len 2"
    with pytest.raises(ValueError) as e:
        s.walk(rows, lens=np.array([1, 3], dtype=np.uint64))
    assert str(e.value) == "lens[1]: 3 exceeds len 2"
    with pytest.raises(ValueError) as e:
        s.walk(rows, lens=np.array([1.0, 1.0]))
    assert str(e.value) == "lens: expected integers, got float64"
    with pytest.raises(ValueError) as e:
        s.walk(rows, state=np.array([0.7, 0.0]))
    assert str(e.value) == "state: expected integers, got float64"
    torch = _torch_or_skip()
    t = torch.as_tensor(rows)
    tr = TrieRows(idx, rows=2, device="cpu")
    for walk in (lambda **kw: s.walk(t, **kw), lambda **kw: tr.walk(t, **kw)):
        with pytest.raises(ValueError) as e:
            walk(lens=torch.tensor([1, 2 ** 32 + 1]))
        assert str(e.value) == "lens[1]: 4294967297 exceeds len 2"
        with pytest.raises(ValueError) as e:
            walk(lens=torch.tensor([-1, 1], dtype=torch.int32))
        assert str(e.value) == "lens: expected counts (integers >= 0)"
        with pytest.raises(ValueError) as e:
            walk(lens=torch.tensor([1.0, 1.0]))
        assert str(e.value) == "lens: expected integers, got float32"
        with pytest.raises(ValueError) as e:
            walk(state=torch.tensor([0.7, 0.0]))
        assert str(e.value) == "state: expected integers, got float32"
        one = walk(lens=torch.tensor([1, 1]))
        assert one.tolist() == [idx.walk(keys[0][:1]), idx.walk([3]) or DEAD]


def test_advance_takes_one_token_a_row(lib):
    """TrieRows.advance with another number of tokens than rows failed
    inside torch ("shape '[3, 1]' is invalid for input of size 2"), and
    a [rows, 1] column was taken for lens' shape; both now name tokens."""
    torch = _torch_or_skip()
    idx, keys, _ = lib
    tr = TrieRows(idx, rows=2, device="cpu", eos=EOS)
    state = torch.zeros(3, dtype=torch.int64)
    for tok, shape in (([3, 4], "(2,)"), ([[3], [4], [5]], "(3, 1)")):
        with pytest.raises(ValueError) as e:
            tr.advance(state, torch.tensor(tok))
        assert str(e.value) == ("tokens: expected shape (3,) (one per row), "
                                "got %s" % shape)
    k = keys[0]
    got = tr.advance(state, torch.tensor([k[0], -1, EOS]))
    assert got.tolist() == [idx.walk(k[:1]), 0, DONE]


def test_processors_share_their_session(lib):
    """generate() gets a new processor per call: processors of one thread
    over one library, device, vocabulary and EOS share the session (a GPU
    session copies the library to the device when it opens); another EOS
    or another thread gets its own; answers are unchanged."""
    torch = _torch_or_skip()
    import threading
    idx, keys, _ = lib
    ids = torch.tensor([[BOS, keys[0][0]]])
    scores = torch.zeros((1, V))
    p1 = TrieLogitsProcessor(idx, eos_token_id=EOS, prompt_len=1)
    p2 = TrieLogitsProcessor(idx, eos_token_id=EOS, prompt_len=1)
    p3 = TrieLogitsProcessor(idx, eos_token_id=PAD, prompt_len=1)
    a, b, c = p1(ids, scores), p2(ids, scores), p3(ids, scores)
    assert p1._rows is p2._rows and p3._rows is not p1._rows
    assert torch.equal(a, b) and c.shape == a.shape
    other = []
    t = threading.Thread(target=lambda: other.append(
        (TrieLogitsProcessor(idx, eos_token_id=EOS, prompt_len=1), None)))
    t.start()
    t.join()
    p4 = other[0][0]
    t = threading.Thread(target=lambda: p4(ids, scores))
    t.start()
    t.join()
    assert p4._rows is not p1._rows


def test_walk_states(lib):
    """Session.walk and TrieRows.walk: nodes of the public walk, DONE
    once eos is taken (even after a dead token), DEAD off the library;
    start skips the prompt; a bad shape or start is refused by name."""
    idx, keys, _ = lib
    s = Session(idx, beam=4, max_width=V)
    k = keys[-1]
    rows = np.array([[BOS] + list(k) + [PAD] * (6 - len(k)),
                     [BOS, 0, 0, 0, 0, 0, EOS],
                     [BOS, k[0], 0, 0, 0, 0, 0]], dtype=np.int64)
    L = len(k)
    st = s.walk(rows[:, :1 + L], start=1, eos=EOS)
    assert st[0] == idx.walk(k)
    assert st[1] == DONE if L == 6 else st[1] == DEAD
    assert st[2] == (DEAD if L > 1 else idx.walk(k[:1]))
    st = s.walk(rows, start=1, eos=EOS)
    assert st.tolist()[1] == DONE
    assert s.walk(rows, start=7).tolist() == [0, 0, 0]
    with pytest.raises(ValueError, match="start: 8 outside 0..7"):
        s.walk(rows, start=8)
    with pytest.raises(ValueError, match="ids: expected"):
        s.walk(rows[0])
    with pytest.raises(ValueError, match="ids: expected integer token ids, "
                       "got float64"):
        s.walk(rows.astype(np.float64))
    with pytest.raises(ValueError, match=r"lens: expected shape \(3,\)"):
        s.walk(rows, lens=np.zeros(2, dtype=np.uint32))
    with pytest.raises(ValueError, match=r"lens: expected counts"):
        s.walk(rows, lens=np.array([1, -1, 0]))
    # lens and state of other integer types are converted, not misread
    st = s.walk(rows, start=1, eos=EOS, lens=np.array([L, 2, 1]),
                state=np.zeros(3, dtype=np.int32))
    want = [idx.walk(k), s.walk(rows[1:2, :3], start=1, eos=EOS)[0],
            idx.walk(k[:1])]
    assert st.tolist() == want
    torch = _torch_or_skip()
    tr = TrieRows(idx, rows=2, device="cpu", eos=EOS)
    got = tr.walk(torch.as_tensor(rows), 1)
    assert got.tolist() == s.walk(rows, start=1, eos=EOS).tolist()
    with pytest.raises(ValueError, match="ids: expected integer token ids, "
                       "got float32"):
        tr.walk(torch.zeros((2, 3)))


# ---- transformers ------------------------------------------------------------

def test_hf_generate_tiny_gpt2(lib):
    try:
        import torch
        import transformers
        from transformers import GPT2Config, GPT2LMHeadModel, LogitsProcessorList
    except Exception as e:  # noqa: BLE001
        pytest.skip("transformers/torch not installed here (%s): the GPU "
                    "host runs this test" % e)
    idx, keys, _ = lib
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=V, n_positions=32, n_embd=32, n_layer=2,
                     n_head=2, bos_token_id=BOS, eos_token_id=EOS,
                     pad_token_id=PAD)
    model = GPT2LMHeadModel(cfg).eval()
    prompt = torch.tensor([[BOS, 5]])
    nb = len(keys) + 4
    proc = TrieLogitsProcessor(idx, eos_token_id=EOS, pad_token_id=PAD)
    with torch.no_grad():
        out = model.generate(prompt, num_beams=nb, num_return_sequences=nb,
                             max_new_tokens=6, length_penalty=0.0,
                             do_sample=False, eos_token_id=EOS,
                             pad_token_id=PAD,
                             logits_processor=LogitsProcessorList([proc]),
                             return_dict_in_generate=True, output_scores=True)
    seqs = out.sequences[:, prompt.shape[1]:].tolist()
    for s in seqs:
        assert EOS in s, s
        assert tuple(s[:s.index(EOS)]) in set(keys), s
    # brute force over the library with the same model
    best = None
    with torch.no_grad():
        for k in keys:
            full = torch.tensor([[BOS, 5] + list(k) + [EOS]])
            lp = torch.log_softmax(model(full).logits[0].double(), -1)
            sc = sum(float(lp[prompt.shape[1] - 1 + i, full[0, prompt.shape[1] + i]])
                     for i in range(len(k) + 1))
            if best is None or sc > best[1]:
                best = (k, sc)
    first = seqs[0]
    assert tuple(first[:first.index(EOS)]) == best[0], (first, best,
                                                        transformers.__version__)


def test_gpu_processor_equals_cpu(lib):
    """On a CUDA device: the processor on CUDA tensors (ft_ar_walk and the
    mask on the device) gives the CPU's scores; TrieRows.advance and a
    ragged walk give the CPU's states."""
    torch = _torch_or_skip()
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    idx, keys, _ = lib
    rng = np.random.default_rng(8)
    gen = random_rows(rng, keys, 64, 4, EOS, PAD, int)
    ids = torch.tensor([[BOS] + g for g in gen], dtype=torch.int64)
    scores = torch.randn(64, V)
    pc = TrieLogitsProcessor(idx, eos_token_id=EOS, pad_token_id=PAD)
    pg = TrieLogitsProcessor(idx, eos_token_id=EOS, pad_token_id=PAD)
    for L in range(1, 6):
        want = pc(ids[:, :L], scores)
        got = pg(ids[:, :L].cuda(), scores.cuda()).cpu()
        assert torch.equal(got, want), L
    rc = TrieRows(idx, rows=4, device="cpu", eos=EOS)
    rg = TrieRows(idx, rows=4, device="cuda", eos=EOS)
    sc = torch.zeros(64, dtype=torch.int64)
    sg = sc.cuda()
    for k in range(4):
        tok = ids[:, 1 + k].clone()
        tok[::7] = -1                      # rows that keep their state
        sc, sg = rc.advance(sc, tok), rg.advance(sg, tok.cuda())
        assert sg.cpu().tolist() == sc.tolist(), k
    lens = torch.tensor([r % 5 for r in range(64)], dtype=torch.int32)
    wc = rc.walk(ids, 1, lens=lens)
    wg = rg.walk(ids.cuda(), 1, lens=lens.cuda(), state=torch.zeros(
        64, dtype=torch.int64, device="cuda"))
    assert wg.cpu().tolist() == wc.tolist()


def test_gpu_session_equals_cpu(lib):
    try:
        import torch
    except Exception:  # noqa: BLE001
        pytest.skip("torch not installed here")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    idx, keys, _ = lib
    c = Session(idx, beam=5, results=8, max_width=V, alpha=0.5)
    g = Session(idx, beam=5, results=8, max_width=V, alpha=0.5, device="cuda")
    rng = np.random.default_rng(11)
    c.reset()
    g.reset()
    for t in range(5):
        rows = rows_for(rng, 5, V)
        oc = c.step(rows, norm="row")
        og = g.step(torch.as_tensor(rows, device="cuda").to(torch.bfloat16)
                    .float(), norm="row")
        assert oc.count == og.count
        assert oc.parent.tolist() == og.parent.tolist()
        assert oc.sigma.tobytes() == og.sigma.cpu().numpy().tobytes()
        assert oc.hits == og.hits
        if oc.count == 0:
            break


def test_step_outputs_outlive_later_steps(lib):
    """A step's parent, token and sigma are its own arrays: a decoder keeps
    them to trace its beams back, and two steps later the session writes
    the state they were read from again."""
    idx, _, _ = lib
    s = Session(idx, beam=4, results=4, max_width=V)
    s.reset()
    kept = []
    for t in range(3):
        rows = -np.arange(4 * V, dtype=np.float32).reshape(4, V) / 8
        out = s.step(rows)
        assert out.count > 0
        kept.append((out, out.parent.copy(), out.token.copy(),
                     out.sigma.copy()))
    for out, parent, token, sigma in kept:
        assert out.parent.tolist() == parent.tolist()
        assert out.token.tolist() == token.tolist()
        assert out.sigma.tobytes() == sigma.tobytes()


def test_token_arrays_of_another_type_or_too_short_are_refused(lib):
    """Sparse ids and vocabularies are read as uint32: ids or a vocab of
    int64 or float (read as uint32, other tokens), or a vocab shorter than
    the rows (read past its end), are refused, naming the argument."""
    idx, _, _ = lib
    s = Session(idx, beam=2, max_width=V)
    s.reset()
    lp = np.zeros((1, 2), dtype=np.float32)
    for dt in (np.int64, np.float32, np.uint16):
        with pytest.raises(ValueError,
                           match="ids: expected uint32 .*, got %s" %
                           np.dtype(dt).name):
            s.step(lp, ids=np.array([[3, 4]], dtype=dt))
    rows = np.zeros((1, V), dtype=np.float32)
    with pytest.raises(ValueError, match="vocab: expected uint32 .*, got int64"):
        s.step(rows, vocab=np.arange(V, dtype=np.int64))
    with pytest.raises(ValueError, match="vocab: 3 entries for width 16"):
        s.step(rows, vocab=np.arange(3, dtype=np.uint32))
    with pytest.raises(ValueError, match="vocab: expected uint32 .*, got int64"):
        s.mask(V, vocab=np.arange(V, dtype=np.int64))
    with pytest.raises(ValueError, match="vocab: 3 entries for width 16"):
        s.mask(V, vocab=np.arange(3, dtype=np.uint32))
    with pytest.raises(ValueError, match="vocab: expected uint32 .*, got int64"):
        s.walk(np.array([[3, 4]]), vocab=np.arange(V, dtype=np.int64))
    # int32 (torch has no uint32) and uint32 are the same bits: taken
    kids = idx.children(0)[:2].tolist()
    a = s.step(lp, ids=np.array([kids], dtype=np.uint32))
    s.reset()
    b = s.step(lp, ids=np.array([kids], dtype=np.int32))
    assert a.token.tolist() == b.token.tolist() == kids
    assert s.mask(V, vocab=np.arange(V, dtype=np.int32)).tolist() == \
        s.mask(V).tolist()


def test_sparse_rows_with_a_vocab_are_refused(lib):
    """Sparse ids are library tokens: a vocabulary given with them would
    be ignored (the C API refuses it, input.vocab), so it is refused
    before the step, which leaves the beams as they were."""
    idx, _, _ = lib
    s = Session(idx, beam=2, max_width=V)
    s.reset()
    lp = np.zeros((1, 2), dtype=np.float32)
    kids = np.array([idx.children(0)[:2]], dtype=np.uint32)
    with pytest.raises(ValueError) as e:
        s.step(lp, ids=kids, vocab=np.arange(2, dtype=np.uint32))
    assert str(e.value) == ("vocab: only for dense rows (sparse ids are "
                            "library tokens)")
    assert s.count() == 1
    assert s.step(lp, ids=kids).token.tolist() == kids[0].tolist()


def test_closed_session_or_index_is_refused(lib, tmp_path):
    """A closed session, or a session whose index was closed, raises
    (FT_ESTATE) instead of handing the library a freed handle."""
    idx, _, _ = lib
    rows = np.zeros((1, V), dtype=np.float32)
    s = Session(idx, beam=2, max_width=V)
    s.reset()
    s.close()
    s.close()                                   # idempotent
    calls = [s.reset, lambda: s.step(rows), lambda: s.mask(V),
             lambda: s.walk(np.zeros((1, 2), dtype=np.int64)),
             lambda: s.configure(1)]
    for call in calls:
        with pytest.raises(Exception, match=r"\(18\): session: closed") as e:
            call()
        assert e.value.code == 18
    other = Index(idx_path_of(tmp_path))
    t = Session(other, beam=2, max_width=V)
    other.close()
    for call in (t.reset, lambda: t.step(rows), lambda: t.mask(V)):
        with pytest.raises(Exception, match=r"\(18\): index: closed"):
            call()
    for call in (lambda: other.child(0, 3), lambda: other.children(0),
                 lambda: other.value(0), lambda: Session(other)):
        with pytest.raises(Exception, match=r"\(18\): index: closed"):
            call()


def idx_path_of(tmp_path):
    txt = tmp_path / "k.txt"
    txt.write_text("3 4\t1\n5\t2\n")
    path = str(tmp_path / "k.ft")
    subprocess.run([BIN, "build", "--input", str(txt), "--output", path,
                    "--quiet"], check=True, timeout=60)
    return path


class _DeviceRows:
    """An array in CUDA memory as CuPy or Numba hand one over (only the
    interface: nothing here may read it)."""

    def __init__(self, shape, typestr):
        self.shape = shape
        self.dtype = np.dtype(typestr)
        self.__cuda_array_interface__ = {"data": (0x7f0000001000, False),
                                         "shape": shape, "typestr": typestr,
                                         "version": 2}


def test_arrays_on_another_device_are_refused(lib):
    """A CPU session refuses arrays in CUDA memory (and torch tensors not
    on the CPU) instead of reading device addresses on the host; a device
    that is neither the CPU nor CUDA is refused when the session opens."""
    idx, _, _ = lib
    with pytest.raises(ValueError,
                       match="device: expected 'cpu', 'cuda' or 'cuda:N', "
                             "got 'tpu'"):
        Session(idx, beam=2, max_width=V, device="tpu")
    s = Session(idx, beam=2, max_width=V)
    s.reset()
    with pytest.raises(ValueError, match="logp: in CUDA memory, the session "
                                         "is on cpu"):
        s.step(_DeviceRows((1, V), "<f4"))
    lp = np.zeros((1, 2), dtype=np.float32)
    with pytest.raises(ValueError, match="ids: in CUDA memory, the session "
                                         "is on cpu"):
        s.step(lp, ids=_DeviceRows((1, 2), "<u4"))
    with pytest.raises(ValueError, match="vocab: in CUDA memory, the "
                                         "session is on cpu"):
        s.mask(V, vocab=_DeviceRows((V,), "<u4"))
    try:
        import torch
    except Exception:  # noqa: BLE001
        return
    with pytest.raises(ValueError, match="logp: on meta, the session is on "
                                         "cpu"):
        s.step(torch.zeros((1, V), device="meta"))
    with pytest.raises(ValueError, match="ids: on meta, the session is on "
                                         "cpu"):
        s.walk(torch.zeros((1, 2), dtype=torch.int64, device="meta"))
    assert s.step(torch.zeros((1, V))).count == 2      # CPU tensors: taken


def test_non_contiguous_arrays_are_refused_by_name(lib):
    """The library reads rows, ids and vocabularies in row-major order: a
    strided view is refused naming the argument and its strides, a CUDA
    array interface's strides included (read as if contiguous, they
    would give another array's values)."""
    idx, _, _ = lib
    s = Session(idx, beam=2, max_width=V)
    s.reset()
    rows = np.zeros((1, 2 * V), dtype=np.float32)
    with pytest.raises(ValueError) as e:
        s.step(rows[:, ::2])
    assert str(e.value) == ("logp: not C-contiguous (strides (128, 8) for "
                            "shape (1, 16))")
    lp = np.zeros((1, 2), dtype=np.float32)
    with pytest.raises(ValueError) as e:
        s.step(lp, ids=np.zeros((1, 4), dtype=np.uint32)[:, ::2])
    assert str(e.value) == ("ids: not C-contiguous (strides (16, 8) for "
                            "shape (1, 2))")
    with pytest.raises(ValueError) as e:
        s.mask(V, vocab=np.arange(2 * V, dtype=np.uint32)[::2])
    assert str(e.value) == "vocab: not C-contiguous (strides (8,) for shape (16,))"
    dev = _DeviceRows((2, V), "<f4")
    dev.__cuda_array_interface__["strides"] = (4, 8)
    with pytest.raises(ValueError) as e:
        _ptr(dev, "logp")
    assert str(e.value) == ("logp: not C-contiguous (strides (4, 8) for "
                            "shape (2, 16))")
    dev.__cuda_array_interface__["strides"] = (4 * V, 4)    # contiguous
    assert _ptr(dev, "logp") == 0x7f0000001000
    dev = _DeviceRows((1, V), "<f4")                        # one row: any
    dev.__cuda_array_interface__["strides"] = (12345, 4)
    assert _ptr(dev, "logp") == 0x7f0000001000
    try:
        import torch
    except Exception:  # noqa: BLE001
        return
    with pytest.raises(ValueError) as e:
        s.step(torch.zeros((V, 2)).t())
    assert str(e.value) == ("logp: not contiguous (strides (1, 2) for shape "
                            "(2, 16))")


def test_integers_that_would_wrap_are_refused(lib):
    """ctypes passes a Python int on wrapped to the parameter's width: a
    beam of 2**32 + 4 opened a session of beam 4 (and the Python side
    then allocated 2**32 + 4 beams), a mask's eos of 2**32 + 3 set column
    3 and a walk's eos of 2**64 ended rows at id 0.  Such values, and
    values that are no integers, are refused naming the argument."""
    idx, _, _ = lib
    big = 2 ** 32
    for kw in ("beam", "results", "max_width", "threads"):
        with pytest.raises(ValueError) as e:
            Session(idx, **{kw: big + 4})
        assert str(e.value) == "%s: 4294967300 is outside 0..4294967295" % kw
    with pytest.raises(ValueError) as e:
        Session(idx, beam=-1)
    assert str(e.value) == "beam: -1 is outside 0..4294967295"
    with pytest.raises(ValueError) as e:
        Session(idx, beam=2.5)
    assert str(e.value) == "beam: expected an integer, got 2.5"
    s = Session(idx, beam=2, max_width=V)
    with pytest.raises(ValueError) as e:
        s.configure(big + 1)
    assert str(e.value) == "beam: 4294967297 is outside 0..4294967295"
    with pytest.raises(ValueError) as e:
        s.configure(1, -1)
    assert str(e.value) == "results: -1 is outside 0..4294967295"
    s.reset()
    s.set_nodes([idx.walk(lib[1][0])])        # a node that ends a key
    assert s.mask(V, eos=EOS)[0, EOS]           # no key token: EOS alone
    for eos in (big + EOS, -1):
        with pytest.raises(ValueError) as e:
            s.mask(V, eos=eos)
        assert str(e.value) == "eos: %d is outside 0..4294967295" % eos
    with pytest.raises(ValueError) as e:
        s.mask(big + V)
    assert str(e.value) == "width: 4294967312 is outside 0..4294967295"
    rows = np.array([[3, 0], [4, 0]], dtype=np.int64)
    with pytest.raises(ValueError) as e:
        s.walk(rows, eos=2 ** 64)
    assert str(e.value) == ("eos: 18446744073709551616 is outside "
                            "-9223372036854775808..9223372036854775807")
    assert s.walk(rows, eos=0).tolist() == [DONE, DONE]
    assert s.walk(rows, eos=np.int64(-1)).tolist() == \
        s.walk(rows).tolist()


def test_unknown_norm_is_refused(lib):
    """An unknown norm is refused naming the accepted ones; an unhashable
    one (a list) too, where it raised TypeError: unhashable type."""
    idx, _, _ = lib
    s = Session(idx, beam=2, max_width=V)
    s.reset()
    with pytest.raises(ValueError, match="norm: expected None, 'none', "
                                         "'row' or 'allowed', got 'softmax'"):
        s.step(np.zeros((1, V), dtype=np.float32), norm="softmax")
    with pytest.raises(ValueError) as e:
        s.step(np.zeros((1, V), dtype=np.float32), norm=["row"])
    assert str(e.value) == ("norm: expected None, 'none', 'row' or "
                            "'allowed', got ['row']")
    assert s.count() == 1


def test_set_nodes_takes_one_sigma_per_node(lib):
    """set_nodes(nodes, sigma=[x]) spread the one sigma over every node
    (numpy's broadcast); a sigma of another length than the nodes, or a
    scalar, is refused naming both shapes, and leaves the state as it
    was."""
    idx, keys, _ = lib
    s = Session(idx, beam=4, max_width=V)
    s.reset()
    nodes = [idx.walk(k[:1]) for k in keys[:3]]
    for sigma, shape in (([-1.5], "(1,)"), (np.zeros(4), "(4,)"),
                         (-1.5, "()")):
        with pytest.raises(ValueError) as e:
            s.set_nodes(nodes, sigma=sigma)
        assert str(e.value) == "sigma: shape %s differs from nodes' (3,)" % \
            shape
        assert s.count() == 1 and s.beams()["node"][0] == 0
    s.set_nodes(nodes, sigma=[-1.0, -2.0, -3.0])
    assert s.count() == 3
    assert s.beams()["node"][:3].tolist() == nodes
    assert s.beams()["sigma"][:3].tolist() == [-1.0, -2.0, -3.0]


def test_lists_are_refused_by_name(lib):
    """A Python list where an array is expected failed with
    "AttributeError: 'list' object has no attribute 'shape'" (step's
    logp and ids, walk's ids, lens and state) while mask's vocab was
    refused by name: every entry point now refuses it as mask does,
    naming the argument, before the state changes."""
    idx, _, _ = lib
    s = Session(idx, beam=2, max_width=V)
    s.reset()
    rows = np.zeros((1, V), dtype=np.float32)
    ids = np.array([[3, 4]], dtype=np.int64)
    calls = (("logp", lambda: s.step([[0.0] * V])),
             ("ids", lambda: s.step(np.zeros((1, 2), dtype=np.float32),
                                    ids=[[3, 4]])),
             ("vocab", lambda: s.step(rows, vocab=list(range(V)))),
             ("vocab", lambda: s.mask(V, vocab=list(range(V)))),
             ("ids", lambda: s.walk([[3, 4]])),
             ("lens", lambda: s.walk(ids, lens=[1])),
             ("state", lambda: s.walk(ids, state=[0])),
             ("vocab", lambda: s.walk(ids, vocab=list(range(V)))))
    for name, call in calls:
        with pytest.raises(TypeError) as e:
            call()
        assert str(e.value) == ("%s: expected a numpy array or a tensor, "
                                "got <class 'list'>" % name)
    assert s.count() == 1
    assert s.walk(ids, lens=np.array([1]), state=np.array([0])).tolist() \
        == [idx.walk([3]) or DEAD]


def test_uint64_states_past_int64_are_not_wrapped(lib):
    """A uint64 state of 2**63 + 5 was cast to int64 and reported as the
    negative number it wraps to ('from[0]: -9223372036854775803 is no
    state ...'); it is now refused as given, naming the row."""
    idx, _, _ = lib
    s = Session(idx, beam=2, max_width=V)
    ids = np.array([[3], [4]], dtype=np.int64)
    with pytest.raises(ValueError) as e:
        s.walk(ids, state=np.array([0, 2 ** 63 + 5], dtype=np.uint64))
    assert str(e.value) == ("state[1]: 9223372036854775813 is outside "
                            "-9223372036854775808..9223372036854775807")
    got = s.walk(ids, state=np.zeros(2, dtype=np.uint64))
    assert got.tolist() == [idx.walk([3]) or DEAD, idx.walk([4]) or DEAD]


def test_trie_rows_walk_takes_strided_states_and_lens(lib):
    """TrieRows.walk made its state and lens contiguous (a column of a
    [rows, 2] tensor, every other row); since it left the conversion to
    _walk, an int64 state view (or an int32 lens view on a GPU) was
    refused as 'state: not contiguous'.  Session.walk, which takes the
    session's own arrays, still refuses them by name."""
    torch = _torch_or_skip()
    idx, keys, _ = lib
    tr = TrieRows(idx, rows=2, device="cpu", eos=EOS)
    k = keys[0]
    ids = torch.tensor([[k[0]], [3]])
    want = [idx.walk(k[:1]), idx.walk([3]) or DEAD]
    state = torch.zeros((2, 2), dtype=torch.int64)[:, 0]
    lens = torch.ones((2, 2), dtype=torch.int32)[:, 1]
    assert not state.is_contiguous() and not lens.is_contiguous()
    assert tr.walk(ids, state=state).tolist() == want
    assert tr.walk(ids, lens=lens).tolist() == want
    assert tr.walk(ids, state=state, lens=lens).tolist() == want
    assert tr.advance(state, ids[:, 0]).tolist() == want
