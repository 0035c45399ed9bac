"""test_sglang.py - flashtrie.sglang's batched custom logit processor,
driven the way SGLang drives one, against a stand-in of SGLang's documented
interface.

SGLang is not installed here (nor on the GPU host), so the test puts a
minimal `sglang.srt.sampling.custom_logit_processor` in sys.modules before
importing flashtrie.sglang: CustomLogitProcessor (abstract
__call__(logits, custom_param_list), to_str() / from_str(), which builds a
new processor object from the string as SGLang does when it forms a
batch; SGLang serialises with dill, the stand-in with pickle, which also
names an importable class by reference).  `apply` below is SGLang's
sampler step (apply_custom_logit_processor): for each processor string of
the batch, the rows whose requests name it, `logits[mask] =
processor(logits[mask], [custom_params[i] for i in rows])`, each request's
custom_params holding the request under "__req__" (rid, origin_input_ids,
output_ids).

Checked: the allowed columns of every row that names a library are
exactly a brute-force walk over the keys, over steps where requests come
and go, the batch is reordered, processor objects are new at every step,
other requests use another processor or none (their rows bit for bit
unchanged); tables that must evict and grow; flashtrie_output_ids rows;
greedy decoding stays inside the library.
Environment: FT_BIN, FLASHTRIE_LIB (tests/python/CMakeLists.txt sets both).
"""
import importlib
import math
import sys
import types

import numpy as np
import pytest

import torch  # Debian python3-torch: ops/setup.sh must install it

from trie_lib import Lib, build, make_keys, remove_standins

V = 40
EOS, BOS = 1, 2

CLP_SRC = '''
import json
import pickle
from abc import ABC, abstractmethod
from functools import lru_cache
from typing import Any, Dict, List, Optional

import torch


@lru_cache(maxsize=None)
def _cache_from_str(json_str: str):
    data = json.loads(json_str)
    return pickle.loads(bytes.fromhex(data["callable"]))


class CustomLogitProcessor(ABC):
    @abstractmethod
    def __call__(self, logits: torch.Tensor,
                 custom_param_list: Optional[List[Dict[str, Any]]] = None
                 ) -> torch.Tensor:
        raise NotImplementedError

    @classmethod
    def to_str(cls) -> str:
        return json.dumps({"callable": pickle.dumps(cls).hex()})

    @classmethod
    def from_str(cls, json_str: str):
        return _cache_from_str(json_str)()


class DisallowedTokensLogitsProcessor(CustomLogitProcessor):
    def __call__(self, logits, custom_param_list=None):
        disallowed_token_ids = custom_param_list[0]["token_ids"]
        logits[..., disallowed_token_ids] = -float("inf")
        return logits
'''

NAMES = ["sglang", "sglang.srt", "sglang.srt.sampling",
         "sglang.srt.sampling.custom_logit_processor"]


@pytest.fixture(scope="module")
def sg():
    saved = {n: sys.modules.get(n) for n in NAMES}
    mods = {n: types.ModuleType(n) for n in NAMES}
    for n in NAMES:
        sys.modules[n] = mods[n]
    mods["sglang"].srt = mods["sglang.srt"]
    mods["sglang.srt"].sampling = mods["sglang.srt.sampling"]
    clp = mods["sglang.srt.sampling.custom_logit_processor"]
    mods["sglang.srt.sampling"].custom_logit_processor = clp
    exec(compile(CLP_SRC, "<custom_logit_processor stand-in>", "exec"), clp.__dict__)
    import flashtrie.sglang as fs
    fs = importlib.reload(fs)
    yield fs, clp
    remove_standins(saved)
    importlib.reload(fs)


@pytest.fixture(scope="module")
def libs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sglang")
    out = []
    for name, seed, n, eos in [("a", 21, 50, EOS), ("b", 22, 30, 39)]:
        keys = make_keys(seed, n, 3, 14)
        out.append(Lib(build(tmp, name, keys), keys, eos))
    return out


class Req:
    """Req: the fields of SGLang's Req a processor reads."""
    n = 0

    def __init__(self, lib, processor, params):
        Req.n += 1
        self.rid = "req-%d" % Req.n
        self.origin_input_ids = [BOS, 7]
        self.output_ids = []
        self.lib, self.processor = lib, processor
        self.custom_params = dict(params) if params is not None else None
        if self.custom_params is not None:
            self.custom_params["__req__"] = self


def apply(clp, batch, logits):
    """apply is SGLang's apply_custom_logit_processor over the batch."""
    procs = {}
    for i, r in enumerate(batch):
        if r.processor is not None:
            if r.processor not in procs:
                procs[r.processor] = (clp.CustomLogitProcessor.from_str(r.processor),
                                      torch.zeros(len(batch), dtype=torch.bool))
            procs[r.processor][1][i] = True
    params = [r.custom_params for r in batch]
    for _, (processor, mask) in procs.items():
        idx = mask.nonzero(as_tuple=True)[0]
        logits[mask] = processor(logits[mask], [params[i] for i in idx])
    return logits


def check(batch, x, y):
    for r, req in enumerate(batch):
        if req.lib is None:
            if req.custom_params and "token_ids" in req.custom_params:
                z = x[r].clone()                  # the other processor's row
                z[req.custom_params["token_ids"]] = -math.inf
                assert torch.equal(y[r], z), r
            else:
                assert torch.equal(y[r], x[r]), r
            continue
        fin = torch.isfinite(y[r])
        got = set(torch.nonzero(fin).flatten().tolist())
        want = req.lib.allowed(req.output_ids)
        assert got == want, (req.output_ids, sorted(got), sorted(want))
        assert torch.equal(y[r][fin], x[r][fin])


def new_req(fs, clp, libs, rng):
    kind = rng.choice(["a", "a", "b", "none", "other", "noindex"])
    ours = fs.FlashTrieLogitProcessor.to_str()
    if kind in ("a", "b"):
        L = libs[0] if kind == "a" else libs[1]
        return Req(L, ours, {"flashtrie_index": L.path, "flashtrie_eos": L.eos})
    if kind == "none":
        return Req(None, None, None)
    if kind == "other":
        return Req(None, clp.DisallowedTokensLogitsProcessor.to_str(),
                   {"token_ids": [3, 4]})
    return Req(None, ours, {"unrelated": 1})        # names us, no library


@pytest.mark.parametrize("slots", [64, 3])
def test_random_batches_exact_masks(sg, libs, slots):
    fs, clp = sg
    fs.TABLE_SLOTS = slots
    fs._TABLES.clear()
    rng = np.random.default_rng(slots)
    running = []
    absent = []                      # requests paused for a while
    for step in range(70):
        running += [new_req(fs, clp, libs, rng) for _ in range(int(rng.integers(0, 4)))]
        if absent and rng.random() < 0.3:
            running.append(absent.pop(0))
        if running and rng.random() < 0.15:      # paused (retracted)
            absent.append(running.pop(int(rng.integers(len(running)))))
        rng.shuffle(running)
        if not running:
            continue
        x = torch.randn(len(running), V)
        y = apply(clp, running, x.clone())
        check(running, x, y)
        keep = []
        for r, req in enumerate(running):
            fin = torch.nonzero(torch.isfinite(y[r])).flatten().tolist()
            tok = int(rng.choice(fin)) if fin else int(rng.integers(V))
            req.output_ids.append(tok)
            if not ((req.lib is not None and tok == req.lib.eos) or
                    len(req.output_ids) >= 7 or rng.random() < 0.03):
                keep.append(req)
        running = keep
    t = fs._TABLES[((libs[0].path, None, libs[0].eos), "cpu")]
    if slots == 3:
        assert t.state.shape[0] > 3                # grew
    fs.TABLE_SLOTS = 64


def test_output_ids_rows_and_errors(sg, libs):
    fs, clp = sg
    A = libs[0]
    p = fs.FlashTrieLogitProcessor()
    k = max(A.keys, key=len)
    rows = [{"flashtrie_index": A.path, "flashtrie_eos": A.eos,
             "flashtrie_output_ids": list(k[:i])} for i in range(len(k) + 1)]
    rows.append({"flashtrie_index": A.path, "flashtrie_eos": A.eos,
                 "flashtrie_prefix": list(k[:2]), "flashtrie_output_ids": [],
                 "want": list(k[:2])})
    rows.append({"flashtrie_index": A.path, "flashtrie_eos": A.eos,
                 "flashtrie_output_ids": list(k[:1]), "flashtrie_rid": "x"})
    rows.append(None)
    for _ in range(2):                       # twice: the rid row is kept
        x = torch.randn(len(rows), V)
        y = p(x.clone(), rows)
        for i, prm in enumerate(rows):
            if prm is None:
                assert torch.equal(y[i], x[i])
                continue
            got = set(torch.nonzero(torch.isfinite(y[i])).flatten().tolist())
            assert got == A.allowed(prm.get("want", prm["flashtrie_output_ids"]))
        rows[-2]["flashtrie_output_ids"] = list(k[:2])
    with pytest.raises(ValueError, match="__req__"):
        p(torch.randn(1, V), [{"flashtrie_index": A.path}])
    with pytest.raises(ValueError, match="speculative"):
        p(torch.randn(2, V), [{"flashtrie_index": A.path, "flashtrie_output_ids": []}])
    assert p(x, None) is x and p(x, []) is x


def fake_logits(seq):
    h = abs(hash(tuple(int(t) for t in seq))) % (2 ** 32)
    return np.random.default_rng(h).normal(0, 2, V).astype(np.float32)


def test_greedy_decoding_stays_inside(sg, libs):
    fs, clp = sg
    rng = np.random.default_rng(4)
    ours = fs.FlashTrieLogitProcessor.to_str()
    reqs = [Req(L, ours, {"flashtrie_index": L.path, "flashtrie_eos": L.eos})
            for L in libs * 8]
    running, done = list(reqs), []
    while running:
        rng.shuffle(running)
        x = torch.tensor(np.stack([fake_logits(r.origin_input_ids + r.output_ids)
                                   for r in running]))
        y = apply(clp, running, x.clone())
        check(running, x, y)
        keep = []
        for r, req in enumerate(running):
            req.output_ids.append(int(torch.argmax(y[r])))
            if req.output_ids[-1] == req.lib.eos or len(req.output_ids) >= 8:
                done.append(req)
            else:
                keep.append(req)
        running = keep
    for r in done:
        assert r.lib.eos in r.output_ids, r.output_ids
        assert tuple(r.output_ids[:r.output_ids.index(r.lib.eos)]) in r.lib.keyset
