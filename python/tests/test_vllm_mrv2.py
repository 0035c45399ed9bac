"""test_vllm_mrv2.py - flashtrie.vllm_mrv2 (the logits processor for vLLM's
Model Runner V2), driven the way MRV2 drives one, against a stand-in of
its interface.

vLLM is not installed here (nor on the GPU host): the test puts minimal
modules in sys.modules before importing flashtrie.vllm_mrv2: `vllm`
(SamplingParams with extra_args) and
`vllm.v1.worker.gpu.sample.logits_processor.interface` (LogitsProcessor,
LogitsProcRequestState, LogitsContext), written from vLLM's interface.py
for MRV2.  `Runner` plays MRV2's model runner: request slots recycled
through a free list (add_request on the slot each time), every slot's
committed token ids in a [max_num_reqs, max_model_len] tensor and its
prompt length in a buffer with a host array, the batch in a new order at
every step (LogitsContext: each row's slot, position and the host's
upper bound of the sequence length), sampled tokens committed after the
step, and preemption: a request leaves its slot and comes back in another
with its output so far as part of its refill.

Checked: every constrained row's allowed columns are exactly the
brute-force walk over the library's keys (the same model as
test_vllm.py's), its allowed values untouched, every other row bit for
bit the input; two libraries, a vocabulary map, flashtrie_prefix, no
EOS; decoding never leaves the library; speculative decoding is refused
at start and when rows and requests differ; bad request options are
refused by validate_params, naming the field.
Environment: FT_BIN, FLASHTRIE_LIB (tests/python/CMakeLists.txt sets both).
"""
import importlib
import math
import sys
import types

import numpy as np
import pytest

import torch

from test_vllm import (EOS, V, VLLM_SRC, check_rows, libs,  # noqa: F401
                       new_request, sample)
from trie_lib import remove_standins

MRV2_SRC = '''
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class LogitsProcRequestState:
    device: torch.device
    max_num_reqs: int
    vocab_size: int
    all_token_ids: object      # .gpu [max_num_reqs, max_model_len]
    prompt_len: object         # .gpu, .np [max_num_reqs]
    prefill_len: object
    total_len: object


@dataclass(frozen=True)
class LogitsContext:
    expanded_idx_mapping: torch.Tensor
    idx_mapping: torch.Tensor
    idx_mapping_np: np.ndarray
    expanded_local_pos: torch.Tensor
    input_ids: torch.Tensor
    pos: torch.Tensor
    seq_lens_upper_bound_np: np.ndarray


class LogitsProcessor(ABC):
    def __init__(self, vllm_config, req_states):
        pass

    @classmethod
    def validate_params(cls, sampling_params):
        pass

    def add_request(self, req_idx, sampling_params):
        return True

    def apply_staged_writes(self):
        pass

    @abstractmethod
    def apply(self, logits, ctx):
        raise NotImplementedError
'''

NAMES = ["vllm", "vllm.v1", "vllm.v1.worker", "vllm.v1.worker.gpu",
         "vllm.v1.worker.gpu.sample",
         "vllm.v1.worker.gpu.sample.logits_processor",
         "vllm.v1.worker.gpu.sample.logits_processor.interface"]


@pytest.fixture(scope="module")
def v2():
    """v2: (flashtrie.vllm_mrv2 over the stand-ins, the interface
    stand-in, the vllm stand-in)."""
    saved = {n: sys.modules.get(n) for n in NAMES}
    mods = {n: types.ModuleType(n) for n in NAMES}
    for n in NAMES:
        sys.modules[n] = mods[n]
    for parent, child in zip(NAMES, NAMES[1:]):
        setattr(mods[parent], child.rsplit(".", 1)[1], mods[child])
    exec(compile(VLLM_SRC, "<vllm stand-in>", "exec"), mods["vllm"].__dict__)
    itf = mods[NAMES[-1]]
    exec(compile(MRV2_SRC, "<MRV2 interface stand-in>", "exec"), itf.__dict__)
    import flashtrie.vllm as fv
    import flashtrie.vllm_mrv2 as m2
    fv = importlib.reload(fv)
    m2 = importlib.reload(m2)
    assert issubclass(m2.FlashTrieLogitsProcessorV2, itf.LogitsProcessor)
    yield m2, itf, mods["vllm"]
    remove_standins(saved)
    importlib.reload(fv)
    importlib.reload(m2)


class Buf:
    """a model-runner buffer: a device tensor (.gpu) and, for the
    UvaBackedTensor ones, the host array it is the copy of (.np)."""

    def __init__(self, t, host=False):
        self.gpu = t
        if host:
            self.np = t.numpy()


class Buf2(Buf):
    """a UvaBackedTensor on a device: the host array and its device copy
    (refreshed by the runner after each write)."""

    def __init__(self, t, device):
        self.np = t.numpy()
        self.host, self.device = t, device
        self.sync()

    def sync(self):
        self.gpu = self.host.to(self.device)


class Runner:
    """Runner plays MRV2's model runner for one processor (device: where
    the runner's buffers and the logits live)."""

    def __init__(self, itf, proc_cls, slots=8, max_len=24, config=None,
                 device="cpu"):
        self.slots, self.max_len = slots, max_len
        self.dev = torch.device(device)
        self.tokens = torch.zeros((slots, max_len), dtype=torch.int32,
                                  device=self.dev)
        self.plen = torch.zeros(slots, dtype=torch.int32)
        self.plen_buf = Buf(self.plen, True) if self.dev.type == "cpu" \
            else Buf2(self.plen, self.dev)
        self.rs = itf.LogitsProcRequestState(
            device=self.dev, max_num_reqs=slots, vocab_size=V,
            all_token_ids=Buf(self.tokens), prompt_len=self.plen_buf,
            prefill_len=Buf(torch.zeros(slots, dtype=torch.int32), True),
            total_len=Buf(torch.zeros(slots, dtype=torch.int32)))
        self.itf = itf
        self.proc = proc_cls(config or types.SimpleNamespace(), self.rs)
        self.free = list(range(slots))
        self.active = {}        # slot -> Req

    def add(self, req):
        """add puts req (its prompt and any output so far) in a free
        slot, as a (re)fill does."""
        slot = self.free.pop(int(len(self.free) > 1))
        self.proc.add_request(slot, req.params)
        seq = req.prompt + req.out
        assert len(seq) <= self.max_len
        self.tokens[slot, :len(seq)] = torch.tensor(seq, dtype=torch.int32)
        self.tokens[slot, len(seq):] = 7            # stale ids past the end
        self.plen[slot] = len(req.prompt)
        if isinstance(self.plen_buf, Buf2):
            self.plen_buf.sync()
        self.active[slot] = req
        return slot

    def remove(self, slot):
        del self.active[slot]
        self.free.append(slot)

    def context(self, order):
        seq_len = [len(self.active[s].prompt) + len(self.active[s].out)
                   for s in order]
        idx = torch.tensor(order, dtype=torch.int32, device=self.dev)
        return self.itf.LogitsContext(
            expanded_idx_mapping=idx, idx_mapping=idx,
            idx_mapping_np=np.array(order, dtype=np.int32),
            expanded_local_pos=torch.zeros(len(order), dtype=torch.int32),
            input_ids=torch.tensor([(self.active[s].prompt +
                                     self.active[s].out)[-1] for s in order]),
            pos=torch.tensor([n - 1 for n in seq_len], dtype=torch.int32,
                             device=self.dev),
            seq_lens_upper_bound_np=np.array(seq_len, dtype=np.int32))

    def commit(self, slot, tok):
        req = self.active[slot]
        req.out.append(tok)
        self.tokens[slot, len(req.prompt) + len(req.out) - 1] = tok


@pytest.mark.parametrize("seed", range(6))
def test_random_steps_exact_masks(v2, libs, seed):  # noqa: F811
    m2, itf, vllm = v2
    rng = np.random.default_rng(100 + seed)
    run = Runner(itf, m2.FlashTrieLogitsProcessorV2)
    checked = preempted = 0
    for step in range(60):
        while run.free and rng.random() < 0.6:
            run.add(new_request(sys.modules["flashtrie.vllm"], vllm, libs,
                                rng))
        if not run.active:
            continue
        order = [int(s) for s in rng.permutation(sorted(run.active))]
        batch = [run.active[s] for s in order]
        x = torch.randn(len(order), V)
        y = run.proc.apply(x.clone(), run.context(order))
        check_rows(batch, x, y)
        checked += sum(r.lib is not None for r in batch)
        for r, slot in enumerate(order):
            req = run.active[slot]
            tok = sample(req, y[r], rng)
            run.commit(slot, tok)
            done = len(req.out) >= req.max_tokens or (
                req.lib is not None and tok == req.the_eos())
            if done or len(req.prompt) + len(req.out) >= run.max_len:
                run.remove(slot)
            elif rng.random() < 0.08:     # preempted, back with its output
                run.remove(slot)
                run.add(req)
                preempted += 1
    assert checked > 100 and preempted > 2


def test_decoding_stays_inside(v2, libs):  # noqa: F811
    m2, itf, vllm = v2
    A = libs["A"]
    rng = np.random.default_rng(7)
    run = Runner(itf, m2.FlashTrieLogitsProcessorV2)
    from test_vllm import Req
    ended = 0
    for _ in range(40):
        while run.free:
            run.add(Req(vllm.SamplingParams(extra_args=A.args()), A,
                        max_tokens=8))
        order = [int(s) for s in rng.permutation(sorted(run.active))]
        y = run.proc.apply(torch.randn(len(order), V), run.context(order))
        for r, slot in enumerate(order):
            req = run.active[slot]
            tok = int(torch.argmax(y[r]))
            run.commit(slot, tok)
            if tok == EOS:
                assert tuple(req.out[:-1]) in A.keyset, req.out
                ended += 1
                run.remove(slot)
            elif len(req.out) >= req.max_tokens:
                run.remove(slot)
    assert ended > 20


def test_refusals(v2, libs):  # noqa: F811
    m2, itf, vllm = v2
    A = libs["A"]
    SP = vllm.SamplingParams
    with pytest.raises(ValueError, match="speculative decoding is not "
                       "supported"):
        Runner(itf, m2.FlashTrieLogitsProcessorV2,
               config=types.SimpleNamespace(speculative_config=object()))
    run = Runner(itf, m2.FlashTrieLogitsProcessorV2)
    from test_vllm import Req
    s = run.add(Req(SP(extra_args=A.args()), A))
    ctx = run.context([s])
    with pytest.raises(ValueError, match="2 logits rows for 1 requests"):
        run.proc.apply(torch.zeros(2, V), ctx)
    cls = m2.FlashTrieLogitsProcessorV2
    with pytest.raises(ValueError, match="flashtrie_eos: expected a token id"):
        cls.validate_params(SP(extra_args=A.args(eos="x")))
    with pytest.raises(ValueError, match="flashtrie_prefix: expected a list"):
        cls.validate_params(SP(extra_args=A.args(flashtrie_prefix=[-1])))
    cls.validate_params(SP(extra_args={"other": 1}))
    # a slot handed to an unconstrained request no longer masks
    assert run.proc.add_request(s, SP(max_tokens=3)) is False
    x = torch.randn(1, V)
    assert torch.equal(run.proc.apply(x.clone(), ctx), x)
    assert math.isfinite(float(x.sum()))


def test_cuda_equals_cpu(v2, libs):  # noqa: F811
    """With a CUDA device: a runner on cuda:0 and one on the CPU, fed the
    same requests and logits step by step, give the same logits."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    m2, itf, vllm = v2
    rng = np.random.default_rng(31)
    runs = [Runner(itf, m2.FlashTrieLogitsProcessorV2),
            Runner(itf, m2.FlashTrieLogitsProcessorV2, device="cuda:0")]
    from test_vllm import Req
    for step in range(30):
        while runs[0].free and rng.random() < 0.7:
            r = new_request(sys.modules["flashtrie.vllm"], vllm, libs, rng)
            twin = Req(r.params, r.lib, r.eos, r.prefix, r.out, r.max_tokens)
            assert runs[0].add(r) == runs[1].add(twin)
        if not runs[0].active:
            continue
        order = [int(s) for s in rng.permutation(sorted(runs[0].active))]
        x = torch.randn(len(order), V)
        y0 = runs[0].proc.apply(x.clone(), runs[0].context(order))
        y1 = runs[1].proc.apply(x.cuda(), runs[1].context(order)).cpu()
        assert torch.equal(y0, y1), step
        for r, slot in enumerate(order):
            tok = sample(runs[0].active[slot], y0[r], rng)
            for run in runs:
                run.commit(slot, tok)
            req = runs[0].active[slot]
            if len(req.out) >= req.max_tokens or (
                    req.lib is not None and tok == req.the_eos()):
                for run in runs:
                    run.remove(slot)
