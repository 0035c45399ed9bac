"""test_vllm.py - flashtrie.vllm's batch-level logits processor, driven the
way vLLM's v1 engine drives one, against stand-ins of vLLM's documented
interface.

vLLM is not installed here (nor on the GPU host), so the test puts minimal
modules in sys.modules before importing flashtrie.vllm: `vllm`
(SamplingParams with extra_args) and `vllm.v1.sample.logits_processor`
(LogitsProcessor, BatchUpdate, MoveDirectionality, AdapterLogitsProcessor
and process_dict_updates), written from vLLM's interface.py, the
AdapterLogitsProcessor of its __init__.py, and docs/design/
logits_processors.md.  `Engine` below plays vLLM's persistent batch as that
document models it: finished requests are replaced by new ones in
increasing index order (Add), the rest removed (Remove), the batch
condensed by unidirectional moves from the highest filled slot to the
lowest empty one, then reordered by swaps; update_state gets the resulting
BatchUpdate (None when nothing changed), then apply gets [batch, V]
logits, and the sampled tokens are appended to the requests' output lists
(which the processor holds by reference).

Checked: every constrained row's allowed columns are exactly a brute-force
walk over the library's keys (EOS where the generated part is a key,
only EOS after EOS, at a leaf, or off the library), its allowed values
untouched, every other row bit for bit the input; over random sequences of
adds (fresh, resumed with outputs, with a flashtrie_prefix), removals,
condensing moves and swaps, two libraries, a vocabulary map and no EOS;
greedy decoding and a beam search (each hypothesis a request, forks added
with their outputs) never leave the library, and the beam search finds
the brute-force best key; the former per-request processor (through the
stand-in AdapterLogitsProcessor) gives the same logits.  With a CUDA
device (the GPU host), a processor on cuda:0 gives the CPU one's logits.

`python3 test_vllm.py --bench` times apply() per step (not a test).
Environment: FT_BIN, FLASHTRIE_LIB (tests/python/CMakeLists.txt sets both).
"""
import importlib
import math
import sys
import time
import types

import numpy as np
import pytest

import torch  # Debian python3-torch: ops/setup.sh must install it

from trie_lib import Lib, build, make_keys, remove_standins

V = 40                  # model vocabulary: 0 pad, 1 EOS, 2 BOS, 3.. tokens
EOS, BOS = 1, 2
EOS_B = 35              # library B's EOS
EOS_TOK = 5             # an EOS that is also a key token (a bad map, still exact)

# ---- stand-ins of vLLM's documented interface --------------------------------

VLLM_SRC = '''
class SamplingParams:
    """vllm.SamplingParams: the fields a logits processor reads."""
    def __init__(self, n=1, temperature=1.0, max_tokens=16, extra_args=None,
                 **kw):
        self.n, self.temperature, self.max_tokens = n, temperature, max_tokens
        self.extra_args = extra_args
        for k, v in kw.items():
            setattr(self, k, v)
'''

LP_SRC = '''
import inspect
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum, auto
from functools import partial

import torch

from vllm import SamplingParams


class MoveDirectionality(Enum):
    # One-way i1->i2 req move within batch
    UNIDIRECTIONAL = auto()
    # Two-way i1<->i2 req swap within batch
    SWAP = auto()


RemovedRequest = int
AddedRequest = tuple  # (index, SamplingParams, prompt_tok_ids, output_tok_ids)
MovedRequest = tuple  # (index 1, index 2, MoveDirectionality)


@dataclass(frozen=True)
class BatchUpdate:
    batch_size: int
    removed: Sequence
    added: Sequence
    moved: Sequence


class LogitsProcessor(ABC):
    @classmethod
    def validate_params(cls, sampling_params: SamplingParams):
        return None

    @abstractmethod
    def __init__(self, vllm_config, device: torch.device,
                 is_pin_memory: bool) -> None:
        raise NotImplementedError

    @abstractmethod
    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    @abstractmethod
    def is_argmax_invariant(self) -> bool:
        raise NotImplementedError

    def needs_output_token_ids(self) -> bool:
        return False

    @abstractmethod
    def update_state(self, batch_update) -> None:
        raise NotImplementedError


def process_dict_updates(req_entries, batch_update, new_state):
    if not batch_update:
        return False
    updated = False
    for index, params, prompt_tok_ids, output_tok_ids in batch_update.added:
        if (state := new_state(params, prompt_tok_ids, output_tok_ids)) is not None:
            req_entries[index] = state
            updated = True
        elif req_entries.pop(index, None) is not None:
            updated = True
    if req_entries:
        for index in batch_update.removed:
            if req_entries.pop(index, None):
                updated = True
        for a_index, b_index, direct in batch_update.moved:
            a_entry = req_entries.pop(a_index, None)
            b_entry = req_entries.pop(b_index, None)
            if a_entry is not None:
                req_entries[b_index] = a_entry
                updated = True
            if b_entry is not None:
                updated = True
                if direct == MoveDirectionality.SWAP:
                    req_entries[a_index] = b_entry
    return updated


class AdapterLogitsProcessor(LogitsProcessor):
    def __init__(self, vllm_config, device, is_pin_memory):
        self.req_info = {}

    @abstractmethod
    def new_req_logits_processor(self, params):
        raise NotImplementedError

    def _new_state(self, params, prompt_ids, output_ids):
        if req_lp := self.new_req_logits_processor(params):
            args = [prompt_ids, output_ids] if (len(
                inspect.signature(req_lp).parameters) == 3) else [output_ids]
            return partial(req_lp, *args)
        return None

    def update_state(self, batch_update):
        process_dict_updates(self.req_info, batch_update, self._new_state)

    def apply(self, logits):
        if self.req_info:
            for req_idx, req_lp in self.req_info.items():
                req_logits = logits[req_idx]
                new_logits = req_lp(req_logits)
                if new_logits is not req_logits:
                    logits[req_idx] = new_logits
        return logits
'''

STANDIN_NAMES = ["vllm", "vllm.v1", "vllm.v1.sample",
                 "vllm.v1.sample.logits_processor"]


def install_standins():
    saved = {n: sys.modules.get(n) for n in STANDIN_NAMES}
    mods = {n: types.ModuleType(n) for n in STANDIN_NAMES}
    for n in STANDIN_NAMES:
        sys.modules[n] = mods[n]
    exec(compile(VLLM_SRC, "<vllm stand-in>", "exec"), mods["vllm"].__dict__)
    mods["vllm"].v1 = mods["vllm.v1"]
    mods["vllm.v1"].sample = mods["vllm.v1.sample"]
    mods["vllm.v1.sample"].logits_processor = mods["vllm.v1.sample.logits_processor"]
    lp = mods["vllm.v1.sample.logits_processor"]
    exec(compile(LP_SRC, "<vllm.v1.sample.logits_processor stand-in>", "exec"),
         lp.__dict__)
    return saved


@pytest.fixture(scope="module")
def vl():
    """vl: (flashtrie.vllm imported over the stand-ins, the stand-in
    logits_processor module, the stand-in vllm module)."""
    saved = install_standins()
    import flashtrie.vllm as fv
    fv = importlib.reload(fv)
    yield fv, sys.modules["vllm.v1.sample.logits_processor"], sys.modules["vllm"]
    remove_standins(saved)
    importlib.reload(fv)


# ---- libraries ----------------------------------------------------------------

@pytest.fixture(scope="module")
def libs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("vllm")
    a_keys = make_keys(11, 60, 3, 12)
    b_keys = make_keys(12, 40, 3, 30, maxlen=4)
    c_keys = make_keys(13, 30, 3, 20, maxlen=4)         # model ids
    assert any(k[:i] in set(a_keys) for k in a_keys for i in range(1, len(k))), \
        "library A has no key that is a prefix of another"
    vocab = np.full(V, 0xFFFFFFFF, dtype=np.uint64)
    vocab[3:20] = np.arange(3, 20) + 1000              # model id j -> 1000 + j
    vpath = str(tmp / "vocab.npy")
    np.save(vpath, vocab)
    A = Lib(build(tmp, "a", a_keys), a_keys, EOS)
    B = Lib(build(tmp, "b", b_keys), b_keys, EOS_B)
    C = Lib(build(tmp, "c", [tuple(t + 1000 for t in k) for k in c_keys]),
            c_keys, EOS, vocab_path=vpath)
    return {"A": A, "B": B, "C": C}


# ---- the persistent batch ------------------------------------------------------

class Req:
    def __init__(self, params, lib=None, eos="lib", prefix=(), out=None,
                 max_tokens=7):
        self.params = params
        self.prompt = [BOS, 5]
        self.out = [] if out is None else list(out)
        self.lib, self.eos, self.prefix = lib, eos, list(prefix)
        self.max_tokens = max_tokens

    def allowed(self):
        return self.lib.allowed(self.prefix + self.out, self.eos)

    def the_eos(self):
        return self.lib.eos if self.eos == "lib" else self.eos


class Engine:
    """Engine plays vLLM's persistent batch (docs/design/logits_processors.md,
    "How the vLLM engine builds the BatchUpdate data structure")."""

    def __init__(self, procs, lp, rng):
        self.procs, self.lp, self.rng = procs, lp, rng
        self.batch = []
        self.updates = 0

    def step(self, finished, new, swaps=0):
        lp = self.lp
        removed, added, moved = [], [], []
        free = sorted(i for i, r in enumerate(self.batch) if r in finished)
        for r in new:
            if free:
                i = free.pop(0)
                self.batch[i] = r
            else:
                self.batch.append(r)
                i = len(self.batch) - 1
            added.append((i, r.params, r.prompt, r.out))
        for i in free:
            self.batch[i] = None
            removed.append(i)
        while None in self.batch:
            e = self.batch.index(None)
            h = max(i for i, r in enumerate(self.batch) if r is not None) \
                if any(r is not None for r in self.batch) else -1
            if h < e:
                del self.batch[e:]
                break
            self.batch[e], self.batch[h] = self.batch[h], None
            moved.append((h, e, lp.MoveDirectionality.UNIDIRECTIONAL))
        for _ in range(swaps):
            if len(self.batch) < 2:
                break
            i, j = (int(x) for x in self.rng.choice(len(self.batch), 2,
                                                    replace=False))
            self.batch[i], self.batch[j] = self.batch[j], self.batch[i]
            moved.append((i, j, lp.MoveDirectionality.SWAP))
        bu = None
        if removed or added or moved:
            bu = lp.BatchUpdate(batch_size=len(self.batch),
                                removed=sorted(removed, reverse=True),
                                added=added, moved=moved)
            self.updates += 1
        for p in self.procs:
            p.update_state(bu)

    def logits(self, proc, x):
        return proc.apply(x)


def check_rows(batch, x, y):
    """check_rows: y (processed) against x (input) row by row."""
    for r, req in enumerate(batch):
        if req.lib is None:
            assert torch.equal(y[r], x[r]), "unconstrained row %d changed" % r
            continue
        want = req.allowed()
        fin = torch.isfinite(y[r])
        got = set(int(c) for c in torch.nonzero(fin).flatten())
        assert got == want, (r, req.prefix + req.out, sorted(got), sorted(want))
        assert torch.equal(y[r][fin], x[r][fin])
        assert bool((y[r][~fin] == -math.inf).all())


def new_request(fv, vllm, libs, rng, kind=None):
    kind = kind or rng.choice(["A", "A", "B", "C", "none", "plain",
                               "A-noeos", "A-resumed", "A-prefix", "B-dead",
                               "A-eostok"])
    SP = vllm.SamplingParams
    A, B, C = libs["A"], libs["B"], libs["C"]
    if kind == "none":
        return Req(SP(max_tokens=5))
    if kind == "plain":
        return Req(SP(max_tokens=5, extra_args={"other_arg": 3}))
    if kind in ("A", "B", "C"):
        L = libs[kind]
        return Req(SP(extra_args=L.args()), L)
    if kind == "A-noeos":
        return Req(SP(extra_args=A.args(eos=None)), A, eos=None)
    if kind == "A-eostok":
        return Req(SP(extra_args=A.args(eos=EOS_TOK)), A, eos=EOS_TOK)
    if kind == "A-resumed":                   # preempted: outputs so far
        k = A.keys[int(rng.integers(len(A.keys)))]
        return Req(SP(extra_args=A.args()), A, out=k[:int(rng.integers(1, len(k) + 1))])
    if kind == "A-prefix":                    # part of the key in the prompt
        k = A.keys[int(rng.integers(len(A.keys)))]
        cut = int(rng.integers(0, len(k) + 1))
        return Req(SP(extra_args=A.args(flashtrie_prefix=list(k[:cut]))), A,
                   prefix=k[:cut])
    if kind == "B-dead":                      # resumed off the library
        return Req(SP(extra_args=B.args()), B, out=[39, 38])
    raise AssertionError(kind)


def sample(req, row, rng):
    """sample: a token of the processed row (a random allowed one)."""
    fin = torch.nonzero(torch.isfinite(row)).flatten().tolist()
    if not fin:
        return int(rng.integers(V))
    return int(rng.choice(fin))


# ---- tests ----------------------------------------------------------------------

def test_interface(vl, libs):
    fv, lp, vllm = vl
    assert issubclass(fv.FlashTrieLogitsProcessor, lp.LogitsProcessor)
    assert issubclass(fv.FlashTriePerRequestLogitsProcessor,
                      lp.AdapterLogitsProcessor)
    cfg = types.SimpleNamespace(scheduler_config=types.SimpleNamespace(max_num_seqs=8))
    p = fv.FlashTrieLogitsProcessor(cfg, torch.device("cpu"), False)
    assert p.is_argmax_invariant() is False
    assert p.needs_output_token_ids() is False
    SP = vllm.SamplingParams
    A = libs["A"]
    fv.FlashTrieLogitsProcessor.validate_params(SP())
    fv.FlashTrieLogitsProcessor.validate_params(SP(extra_args={"x": 1}))
    fv.FlashTrieLogitsProcessor.validate_params(SP(extra_args=A.args()))
    for bad, field in [({"flashtrie_index": 7}, "flashtrie_index"),
                       ({"flashtrie_index": A.path + ".missing"}, "flashtrie_index"),
                       (A.args(flashtrie_eos="2"), "flashtrie_eos"),
                       (A.args(flashtrie_eos=-1), "flashtrie_eos"),
                       (A.args(flashtrie_vocab=3), "flashtrie_vocab"),
                       (A.args(flashtrie_prefix=[3, -1]), "flashtrie_prefix")]:
        with pytest.raises(ValueError, match=field):
            fv.FlashTrieLogitsProcessor.validate_params(SP(extra_args=bad))
    r = Req(SP(extra_args=A.args()), A)
    p.update_state(lp.BatchUpdate(batch_size=1, removed=[],
                                  added=[(0, r.params, r.prompt, r.out)], moved=[]))
    assert p.needs_output_token_ids() is True
    p.update_state(lp.BatchUpdate(batch_size=0, removed=[0], added=[], moved=[]))
    assert p.needs_output_token_ids() is False
    x = torch.randn(3, V)
    assert torch.equal(p.apply(x.clone()), x)          # nothing constrained


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_batches_exact_masks(vl, libs, seed):
    fv, lp, vllm = vl
    rng = np.random.default_rng(seed)
    cfg = types.SimpleNamespace(scheduler_config=types.SimpleNamespace(max_num_seqs=4))
    proc = fv.FlashTrieLogitsProcessor(cfg, torch.device("cpu"), False)
    old = fv.FlashTriePerRequestLogitsProcessor(cfg, torch.device("cpu"), False)
    eng = Engine([proc, old], lp, rng)
    finished = set()
    kinds = set()
    for step in range(80):
        new = [new_request(fv, vllm, libs, rng)
               for _ in range(int(rng.integers(0, 4)) if step else 6)]
        eng.step(finished, new, swaps=int(rng.integers(0, 3)))
        finished = set()
        if not eng.batch:
            continue
        x = torch.randn(len(eng.batch), V)
        y = proc.apply(x.clone())
        check_rows(eng.batch, x, y)
        if not any(r.prefix for r in eng.batch):
            assert torch.equal(old.apply(x.clone()), y), "per-request form differs"
        for r, req in enumerate(eng.batch):
            tok = sample(req, y[r], rng)
            req.out.append(tok)
            kinds.add("eos" if req.lib is not None and tok == req.the_eos() else "tok")
            if (req.lib is not None and tok == req.the_eos()) or \
                    len(req.out) >= req.max_tokens or rng.random() < 0.04:
                finished.add(req)
    assert eng.updates > 20 and kinds == {"eos", "tok"}
    assert proc.state.shape[0] >= 4


def test_eos_rules(vl, libs):
    fv, lp, vllm = vl
    A = libs["A"]
    SP = vllm.SamplingParams
    inner = next(k for k in A.keys if any(j[:len(k)] == k and len(j) > len(k)
                                          for j in A.keys))
    leaf = next(k for k in A.keys if not any(j[:len(k)] == k and len(j) > len(k)
                                             for j in A.keys))
    cases = [  # (outputs, eos, allowed)
        (list(inner), EOS, A.allowed(inner)),
        (list(leaf), EOS, {EOS}),
        (list(leaf), None, set()),
        (list(inner) + [EOS], EOS, {EOS}),
        (list(inner) + [EOS, EOS], EOS, {EOS}),
        ([], EOS, set(A.kids[()])),
        ([39], EOS, {EOS}),
        ([39], None, set()),
        ([], EOS_TOK, set(A.kids[()])),
        ([EOS_TOK], EOS_TOK, {EOS_TOK}),
    ]
    assert EOS_TOK in A.kids[()] and (EOS_TOK,) in A.prefixes
    assert EOS in A.allowed(inner) and len(A.allowed(inner)) > 1
    proc = fv.FlashTrieLogitsProcessor(None, "cpu", False)
    added = []
    for i, (out, eos, _) in enumerate(cases):
        extra = A.args(eos=eos)
        added.append((i, SP(extra_args=extra), [BOS], list(out)))
    proc.update_state(lp.BatchUpdate(batch_size=len(cases), removed=[],
                                     added=added, moved=[]))
    x = torch.randn(len(cases), V)
    y = proc.apply(x.clone())
    for i, (out, eos, want) in enumerate(cases):
        got = set(torch.nonzero(torch.isfinite(y[i])).flatten().tolist())
        assert got == want, (out, eos, got, want)
    # the usual step: EOS after a key, then only EOS
    for i, (out, eos, _) in enumerate(cases):
        added[i][3].append(EOS if eos is not None else 3)
    y = proc.apply(x.clone())
    assert set(torch.nonzero(torch.isfinite(y[0])).flatten().tolist()) == {EOS}
    # bf16 logits
    proc2 = fv.FlashTrieLogitsProcessor(None, "cpu", False)
    proc2.update_state(lp.BatchUpdate(batch_size=1, removed=[], moved=[],
                                      added=[(0, SP(extra_args=A.args()), [], list(inner))]))
    xb = torch.randn(1, V).to(torch.bfloat16)
    yb = proc2.apply(xb.clone())
    assert yb.dtype == torch.bfloat16
    assert set(torch.nonzero(torch.isfinite(yb[0])).flatten().tolist()) == A.allowed(inner)


def test_placeholder_token_raises(vl, libs):
    fv, lp, vllm = vl
    A = libs["A"]
    proc = fv.FlashTrieLogitsProcessor(None, "cpu", False)
    out = []
    proc.update_state(lp.BatchUpdate(batch_size=1, removed=[], moved=[], added=[
        (0, vllm.SamplingParams(extra_args=A.args()), [BOS], out)]))
    proc.apply(torch.randn(1, V))
    out.append(-1)                      # async scheduling's placeholder
    with pytest.raises(ValueError, match="placeholder"):
        proc.apply(torch.randn(1, V))


def test_trierows_unpackings_and_growth(vl, libs):
    """TrieRows directly: the host (numpy) and device-style (torch)
    unpackings of the mask give the same masks, for all rows and for named
    rows, and a TrieRows opened for 2 rows grows to 23."""
    from flashtrie.ar import Index, TrieRows
    A = libs["A"]
    idx = Index(A.path)
    rng = np.random.default_rng(5)
    seqs = [()] + [k[:int(rng.integers(0, len(k) + 1))] for k in A.keys[:18]] + \
        [(39,), (3, 39, 4)] + [k + (EOS,) for k in A.keys[:2]]
    n = len(seqs)
    ways = []
    for host in (True, False):
        tr = TrieRows(idx, rows=2, eos=EOS)
        tr.host_unpack = host
        st = torch.zeros(n, dtype=torch.int64)
        for k in range(max(len(q) for q in seqs)):
            st = tr.advance(st, torch.tensor([q[k] if k < len(q) else -1
                                              for q in seqs]))
        m = tr.allowed(st, V)
        assert tr.capacity >= n
        for r, q in enumerate(seqs):
            got = set(torch.nonzero(m[r]).flatten().tolist())
            assert got == A.allowed(q), (q, got)
        x = torch.randn(n + 3, V)
        rows = torch.tensor([n + 2 - r for r in range(n)])  # reversed, 3 left out
        y = tr.constrain(x.clone(), st, rows)
        for r in range(n):
            assert torch.equal(torch.isfinite(y[n + 2 - r]), m[r])
        assert torch.equal(y[:3], x[:3])         # rows not named
        z = tr.constrain(x[:n].clone(), st)
        assert torch.equal(torch.isfinite(z), m)
        ways.append((m, torch.isfinite(y), torch.isfinite(z)))
    assert all(torch.equal(a, b) for a, b in zip(ways[0], ways[1]))


def test_cuda_equals_cpu(vl, libs):
    """On a CUDA device (the GPU host): the processor on cuda:0 gives the
    CPU processor's logits over a random batch sequence."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device here: the GPU host runs this test")
    fv, lp, vllm = vl
    rng = np.random.default_rng(17)
    cpu = fv.FlashTrieLogitsProcessor(None, torch.device("cpu"), False)
    gpu = fv.FlashTrieLogitsProcessor(None, torch.device("cuda:0"), True)
    eng = Engine([cpu, gpu], lp, rng)
    finished = set()
    for step in range(40):
        eng.step(finished, [new_request(fv, vllm, libs, rng)
                            for _ in range(int(rng.integers(0, 4)) if step else 6)],
                 swaps=int(rng.integers(0, 3)))
        finished = set()
        if not eng.batch:
            continue
        x = torch.randn(len(eng.batch), V)
        y = cpu.apply(x.clone())
        check_rows(eng.batch, x, y)
        assert torch.equal(gpu.apply(x.cuda()).cpu(), y)
        for r, req in enumerate(eng.batch):
            req.out.append(sample(req, y[r], rng))
            if (req.lib is not None and req.out[-1] == req.the_eos()) or \
                    len(req.out) >= req.max_tokens:
                finished.add(req)


# ---- decoding through the processor --------------------------------------------

def fake_logits(seq, salt=0):
    h = abs(hash((tuple(int(x) for x in seq), salt))) % (2 ** 32)
    return np.random.default_rng(h).normal(0, 2, V).astype(np.float32)


def log_softmax(x):
    x = x.astype(np.float64)
    m = x.max()
    return x - (m + np.log(np.exp(x - m).sum()))


def test_greedy_decoding_stays_inside(vl, libs):
    fv, lp, vllm = vl
    rng = np.random.default_rng(9)
    proc = fv.FlashTrieLogitsProcessor(None, "cpu", False)
    eng = Engine([proc], lp, rng)
    pending = [new_request(fv, vllm, libs, rng, kind)
               for kind in ["A", "B", "C", "none"] * 10]
    done, finished = [], set()
    while pending or eng.batch:
        new, pending = pending[:5], pending[5:]
        eng.step(finished, new, swaps=1)
        finished = set()
        if not eng.batch:
            continue
        x = torch.tensor(np.stack([fake_logits(r.prompt + r.out) for r in eng.batch]))
        y = proc.apply(x.clone())
        check_rows(eng.batch, x, y)
        for r, req in enumerate(eng.batch):
            req.out.append(int(torch.argmax(y[r])))
            if (req.lib is not None and req.out[-1] == req.the_eos()) or \
                    len(req.out) >= req.max_tokens:
                finished.add(req)
                done.append(req)
    cons = [r for r in done if r.lib is not None]
    assert len(cons) == 30
    for r in cons:
        eos = r.the_eos()
        assert eos in r.out, r.out
        assert tuple(r.out[:r.out.index(eos)]) in r.lib.keyset, r.out


def test_beam_search_finds_best_key(vl, libs):
    """Each hypothesis is a request; a hypothesis that forks is added again
    with its outputs so far (the processor catches up on them)."""
    fv, lp, vllm = vl
    A = libs["A"]
    SP = vllm.SamplingParams
    nb = len(A.keys) + 2
    for salt in range(3):
        rng = np.random.default_rng(salt)
        proc = fv.FlashTrieLogitsProcessor(None, "cpu", False)
        eng = Engine([proc], lp, rng)
        first = Req(SP(extra_args=A.args()), A)
        first.score = 0.0
        eng.step(set(), [first])
        done = []
        for t in range(7):
            x = torch.tensor(np.stack([log_softmax(fake_logits(r.prompt + r.out, salt))
                                       for r in eng.batch]).astype(np.float32))
            y = proc.apply(x.clone())
            check_rows(eng.batch, x, y)
            cand = []
            for r, req in enumerate(eng.batch):
                for tok in torch.nonzero(torch.isfinite(y[r])).flatten().tolist():
                    cand.append((req.score + float(y[r, tok]), r, tok))
            cand.sort(key=lambda c: (-c[0], c[1], c[2]))
            keep, used, new = [], set(), []
            for sc, r, tok in cand:
                parent = eng.batch[r]
                if tok == EOS:
                    done.append((tuple(parent.out), sc))
                    continue
                if len(keep) >= nb:
                    continue
                if r not in used:
                    used.add(r)
                    keep.append((parent, tok, sc, False))
                else:
                    keep.append((parent, tok, sc, True))
            nxt_new = []
            for parent, tok, sc, fork in keep:
                if fork:
                    q = Req(SP(extra_args=A.args()), A, out=parent.out + [tok])
                    q.score = sc
                    nxt_new.append(q)
            for parent, tok, sc, fork in keep:
                if not fork:
                    parent.out.append(tok)
                    parent.score = sc
            finished = set(eng.batch) - {k[0] for k in keep if not k[3]}
            if not keep:
                break
            eng.step(finished, nxt_new, swaps=1)
        assert done
        for key, _ in done:
            assert key in A.keyset, key
        best = max(done, key=lambda d: d[1])
        brute = None
        for k in A.keys:
            seq, sc = [BOS, 5], 0.0
            for tok in list(k) + [EOS]:
                sc += float(np.float32(log_softmax(fake_logits(seq, salt))[tok]))
                seq.append(tok)
            if brute is None or sc > brute[1]:
                brute = (k, sc)
        assert best[0] == brute[0]
        assert abs(best[1] - brute[1]) < 1e-4


# ---- timing (python3 test_vllm.py --bench INDEX ROWS V) ---------------------------

def bench(index, rows=256, width=32768, steps=8, passes=3):
    """bench times apply() per step on the CPU, rows constrained rows of
    width columns decoding along random walks of the library (a row whose
    walk ended takes EOS = width - 1): the batch form and the former
    per-request form.  One untimed pass first (sessions, buffers, the
    index), then passes over other walks; the per-request form's prefix
    cache keeps what earlier passes saw, as a server's would."""
    saved = install_standins()
    import flashtrie.vllm as fv
    fv = importlib.reload(fv)
    lp = sys.modules["vllm.v1.sample.logits_processor"]
    SP = sys.modules["vllm"].SamplingParams
    from flashtrie.ar import Index
    idx = Index(index)

    def walks_for(seed):
        rng = np.random.default_rng(seed)
        walks = []
        for r in range(rows):
            node, path = 0, []
            for d in range(steps):
                kids = idx.children(node)
                if len(kids) == 0:
                    break
                t = int(kids[int(rng.integers(len(kids)))])
                path.append(t)
                node = idx.child(node, t)
            walks.append(path)
        return walks

    all_walks = [walks_for(s) for s in range(passes + 1)]
    cfg = types.SimpleNamespace(scheduler_config=types.SimpleNamespace(max_num_seqs=rows))
    extra = {"flashtrie_index": index, "flashtrie_eos": width - 1}
    x = torch.randn(rows, width)
    res = {}
    for name, cls in [("batch", fv.FlashTrieLogitsProcessor),
                      ("per-request", fv.FlashTriePerRequestLogitsProcessor)]:
        by_depth = {}
        for p, walks in enumerate(all_walks):
            proc = cls(cfg, torch.device("cpu"), False)
            outs = [[] for _ in range(rows)]
            proc.update_state(lp.BatchUpdate(batch_size=rows, removed=[], moved=[],
                              added=[(i, SP(extra_args=extra), [], outs[i])
                                     for i in range(rows)]))
            for s in range(max(len(w) for w in walks) + 1):
                xs = x.clone()
                t0 = time.perf_counter()
                proc.apply(xs)
                dt = time.perf_counter() - t0
                if p:
                    by_depth.setdefault(s, []).append(dt)
                for i in range(rows):
                    outs[i].append(walks[i][s] if s < len(walks[i]) else width - 1)
                proc.update_state(None)
        res[name] = by_depth
        per = [float(np.median(v)) for _, v in sorted(by_depth.items())]
        print("%-12s rows %d V %d: apply ms per step (median of %d passes), "
              "step 0..%d: %s; mean %.2f ms" % (
                  name, rows, width, passes, len(per) - 1,
                  " ".join("%.1f" % (1e3 * t) for t in per), 1e3 * np.mean(per)))
    remove_standins(saved)
    return res


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--bench":
        bench(sys.argv[2], *(int(a) for a in sys.argv[3:5]))
    else:
        print("usage: test_vllm.py --bench INDEX [ROWS [V]]")
