"""flashtrie.vllm - a vLLM (v1 engine) logits processor that keeps requests
inside a FlashTrie library, the whole batch per step.

    from vllm import LLM, SamplingParams
    from flashtrie.vllm import FlashTrieLogitsProcessor
    llm = LLM(model=..., logits_processors=[FlashTrieLogitsProcessor])
    # or: vllm serve ... --logits-processors flashtrie.vllm:FlashTrieLogitsProcessor
    sp = SamplingParams(max_tokens=16, extra_args={
        "flashtrie_index": "/srv/library.fti",   # index file, on the server
        "flashtrie_eos": 2,                       # optional: the EOS id
        "flashtrie_vocab": "/srv/vocab.npy",      # optional: model id -> token
        "flashtrie_prefix": [])                   # optional: key tokens in the prompt

FlashTrieLogitsProcessor is a batch-level vllm.v1.sample.logits_processor
.LogitsProcessor: vLLM builds one per engine (__init__(vllm_config, device,
is_pin_memory)), tells it the batch's changes (update_state: removed,
added, moved), and hands it the logits of the whole batch (apply).  Each
constrained row's trie node is an int64 of one tensor on the engine's
device, indexed by the row's place in the batch; moves and swaps permute
it there.  At apply, the token each row took since the last step (the last
entry of the request's output_tok_ids, a live list) advances the nodes of
all constrained rows with one walk call (ft_ar_walk: TrieRows.walk),
and one mask call (ft_ar_mask) gives the allowed columns of all of them;
the rows' logits outside it become -inf (for float32, float16 and
bfloat16 logits one ft_ar_constrain does both).  Rows of requests that do not set
flashtrie_index are not touched.  Requests of different libraries (index,
vocabulary, EOS) are grouped: one advance and one mask per group.

The generated tokens (not the prompt) spell the key.  Once a row's tokens
are a whole key, EOS is allowed (with the key's continuations); once EOS is
taken, or the key has no continuation, only EOS is.  Token ids map to
library tokens as flashtrie.hf documents (flashtrie_vocab: a .npy file or a
list; without it model id j is library token j).  flashtrie_prefix names
tokens of the key that precede the output (in the prompt: an engine's beam
search that sends each beam as a new request).

Under async scheduling needs_output_token_ids() asks vLLM for the real
output tokens while a constrained request is in the batch; a -1
placeholder still there at apply raises ValueError.  This is the V1 model
runner's interface (vLLM 0.32 documents another one for Model Runner V2,
its default there: flashtrie.vllm_mrv2.FlashTrieLogitsProcessorV2 is that
one; this one needs VLLM_USE_V2_MODEL_RUNNER=0 on such releases).
Speculative decoding is not supported (vLLM refuses custom processors
with it).

FlashTriePerRequestLogitsProcessor is the former per-request form (an
AdapterLogitsProcessor walking the trie in Python one row at a time), kept
for comparison; FlashTrieLogitsProcessor, the name vLLM is given, is the
batch form now.
"""
from __future__ import annotations

import math
import os
import threading
from functools import lru_cache
from typing import Dict, List, Optional

import numpy as np

from .ar import Index, TrieRows, vocab_u32
from .hf import PrefixWalker

try:
    from vllm.v1.sample.logits_processor import LogitsProcessor as _Base
    from vllm.v1.sample.logits_processor import MoveDirectionality
except Exception:  # pragma: no cover - vLLM is optional
    import enum

    class _Base:  # the shape of vLLM's base, for import without vLLM
        @classmethod
        def validate_params(cls, sampling_params):
            return None

    class MoveDirectionality(enum.Enum):
        UNIDIRECTIONAL = enum.auto()
        SWAP = enum.auto()

try:
    from vllm.v1.sample.logits_processor import AdapterLogitsProcessor as _AdapterBase
except Exception:  # pragma: no cover - vLLM is optional
    class _AdapterBase:
        def __init__(self, vllm_config=None, device=None, is_pin_memory=False):
            self.device = device

KEY_INDEX, KEY_EOS, KEY_VOCAB = "flashtrie_index", "flashtrie_eos", "flashtrie_vocab"
KEY_PREFIX = "flashtrie_prefix"


# ---- libraries, shared by the processors of a process ---------------------

_LOCK = threading.Lock()
_INDEXES: Dict[str, Index] = {}
_VOCABS: Dict[object, Optional[np.ndarray]] = {}


def _index(path: str) -> Index:
    with _LOCK:
        idx = _INDEXES.get(path)
        if idx is None:
            idx = Index(path)
            _INDEXES[path] = idx
        return idx


def _vocab_key(v):
    """_vocab_key names a vocabulary argument: None, a path, or a list."""
    if v is None:
        return None
    if isinstance(v, (str, bytes, os.PathLike)):
        return ("path", os.fsdecode(v))
    return ("list", tuple(int(x) for x in v))


def _vocab(key):
    if key is None:
        return None
    with _LOCK:
        v = _VOCABS.get(key)
        if v is None:
            v = vocab_u32(key[1] if key[0] == "path" else np.array(key[1]))
            _VOCABS[key] = v
        return v


def spec_of(args) -> Optional[tuple]:
    """spec_of returns a request's library (index path, vocabulary key,
    eos) from its extra_args / custom_params dict, or None when it does
    not name one.  Bad values raise ValueError naming the field."""
    if not args:
        return None
    path = args.get(KEY_INDEX)
    if path is None or path == "":
        return None
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError("%s: expected a path string, got %r" % (KEY_INDEX, path))
    eos = args.get(KEY_EOS)
    if eos is not None and (isinstance(eos, bool) or not isinstance(eos, int)
                            or not 0 <= eos <= 0xFFFFFFFF):
        raise ValueError("%s: expected a token id, got %r" % (KEY_EOS, eos))
    voc = args.get(KEY_VOCAB)
    if voc is not None and not isinstance(voc, (str, os.PathLike, list, tuple)):
        raise ValueError("%s: expected a .npy path or a list, got %r" %
                         (KEY_VOCAB, type(voc).__name__))
    return (os.fsdecode(path), _vocab_key(voc), eos)


def prefix_of(args) -> list:
    """prefix_of returns a request's flashtrie_prefix: generated tokens that
    precede its output (they are part of its prompt, as when an engine's
    beam search sends each beam as a new request), [] by default."""
    pre = (args or {}).get(KEY_PREFIX)
    if pre is None:
        return []
    if not isinstance(pre, (list, tuple)) or any(
            isinstance(t, bool) or not isinstance(t, int) or t < 0 for t in pre):
        raise ValueError("%s: expected a list of token ids" % KEY_PREFIX)
    return list(pre)


class Joined:
    """Joined is prefix + a live list, read as one sequence (len, [i])."""
    __slots__ = ("pre", "out")

    def __init__(self, pre, out):
        self.pre, self.out = pre, out

    def __len__(self):
        return len(self.pre) + len(self.out)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return (list(self.pre) + list(self.out))[i]
        n = len(self.pre)
        if i < 0:
            i += n + len(self.out)
        return self.pre[i] if i < n else self.out[i - n]


def joined(pre, out):
    return Joined(pre, out) if pre else out


def _rows_for(spec, device, rows: int) -> TrieRows:
    """_rows_for returns the TrieRows of a library on a device (one per
    process and library: its session holds the library on the device)."""
    key = (spec, str(device))
    with _LOCK:
        tr = _ROWS.get(key)
    if tr is None:
        tr = TrieRows(_index(spec[0]), rows=rows, device=device,
                      vocab=_vocab(spec[1]), eos=spec[2])
        with _LOCK:
            tr = _ROWS.setdefault(key, tr)
    return tr


_ROWS: Dict[tuple, TrieRows] = {}


# ---- the tokens rows took since their last step -----------------------------

def _to_device(values: List, device, pin: bool, dtype=None):
    """_to_device copies host ints (a list, or a list of equal lists) to a
    tensor on device (int64, or dtype) without waiting: from pinned memory
    (a pageable copy would wait for the stream), unless pin is False
    (vLLM's is_pin_memory: no pinning)."""
    import torch
    t = torch.tensor(values, dtype=dtype or torch.int64)
    if torch.device(device).type == "cpu":
        return t
    if pin:
        t = t.pin_memory()
    return t.to(device, non_blocking=True)


def catch_up(tr: TrieRows, state, outs: List, done: List[int], pin: bool):
    """catch_up advances state (the rows' nodes, a tensor [n]) by the
    tokens each row's output list gained since done[i] of them were taken
    (done is updated), all rows in one walk call: usually one token a row;
    a row that gained more (added with outputs, a resumed request) takes
    them all in the same call; a row whose list got shorter starts again
    from the root.  A negative token (an unfilled placeholder) raises
    ValueError."""
    n = len(outs)
    lens = [len(o) for o in outs]
    delta = [a - b for a, b in zip(lens, done)]
    if n == 0 or (max(delta) == 0 and min(delta) == 0):
        return state
    if min(delta) < 0:
        again = [i for i in range(n) if delta[i] < 0]
        state = state.clone()
        state[_to_device(again, state.device, pin)] = 0
        for i in again:
            done[i], delta[i] = 0, lens[i]
    if min(delta) == 1 and max(delta) == 1:     # the usual step
        toks = [[o[-1]] for o in outs]
        low = min(t[0] for t in toks)
        steps = None
    else:
        m = max(delta)
        toks = [outs[i][done[i]:] + [0] * (m - delta[i]) for i in range(n)]
        low = min([min(outs[i][done[i]:]) for i in range(n) if delta[i] > 0])
        import torch
        steps = _to_device(delta, state.device, pin, torch.int32)
    if low < 0:
        raise ValueError("output token ids: %d is no token id (an unfilled "
                         "placeholder?)" % low)
    state = tr.walk(_to_device(toks, state.device, pin), state=state,
                    lens=steps)
    done[:] = lens
    return state


# ---- the batch-level processor ----------------------------------------------

class _Row:
    __slots__ = ("spec", "out", "done")

    def __init__(self, spec, out):
        self.spec, self.out, self.done = spec, out, 0


class FlashTrieLogitsProcessor(_Base):
    """FlashTrieLogitsProcessor: see the module's docstring."""

    def __init__(self, vllm_config, device, is_pin_memory: bool):
        import torch
        self.device = torch.device(device)
        self.pin = bool(is_pin_memory)
        sched = getattr(vllm_config, "scheduler_config", None)
        self.max_rows = int(getattr(sched, "max_num_seqs", 0) or 256)
        self.state = torch.zeros(self.max_rows, dtype=torch.int64,
                                 device=self.device)
        self.rows: Dict[int, _Row] = {}     # batch index -> constrained request
        self._plan = None                   # [(TrieRows, indices, tensor)]

    @classmethod
    def validate_params(cls, sampling_params):
        spec = spec_of(getattr(sampling_params, "extra_args", None))
        if spec is not None:
            prefix_of(sampling_params.extra_args)
            if not os.path.isfile(spec[0]):
                raise ValueError("%s: no index file %s" % (KEY_INDEX, spec[0]))

    def is_argmax_invariant(self) -> bool:
        return False  # it changes which token is the argmax

    def needs_output_token_ids(self) -> bool:
        # the real tokens, not async scheduling's placeholders
        return bool(self.rows)

    def _grow(self, n: int):
        import torch
        if n > self.state.shape[0]:
            extra = torch.zeros(max(n, 2 * self.state.shape[0]) -
                                self.state.shape[0], dtype=torch.int64,
                                device=self.device)
            self.state = torch.cat([self.state, extra])

    def update_state(self, batch_update):
        if batch_update is None:
            return
        top = max([batch_update.batch_size] +
                  [i + 1 for i in batch_update.removed] +
                  [a[0] + 1 for a in batch_update.added] +
                  [max(m[0], m[1]) + 1 for m in batch_update.moved])
        self._grow(top)
        for i in batch_update.removed:
            self.rows.pop(i, None)
        fresh = []
        for index, params, _prompt, out in batch_update.added:
            extra = getattr(params, "extra_args", None)
            spec = spec_of(extra)
            if spec is None:
                self.rows.pop(index, None)
            else:
                self.rows[index] = _Row(spec, joined(prefix_of(extra), out))
                fresh.append(index)
        if fresh:
            self.state[_to_device(fresh, self.device, self.pin)] = 0
        if batch_update.moved:
            src = list(range(top))
            for a, b, how in batch_update.moved:
                ra, rb = self.rows.pop(a, None), self.rows.pop(b, None)
                if ra is not None:
                    self.rows[b] = ra
                if how == MoveDirectionality.SWAP:
                    if rb is not None:
                        self.rows[a] = rb
                    src[a], src[b] = src[b], src[a]
                else:
                    src[b] = src[a]
            perm = _to_device(src, self.device, self.pin)
            self.state[:top] = self.state.index_select(0, perm)
        self._plan = None

    def _make_plan(self):
        groups: Dict[tuple, List[int]] = {}
        for i in sorted(self.rows):
            groups.setdefault(self.rows[i].spec, []).append(i)
        self._plan = [(_rows_for(spec, self.device, self.max_rows), idx,
                       _to_device(idx, self.device, self.pin),
                       [self.rows[i] for i in idx])
                      for spec, idx in groups.items()]

    def apply(self, logits):
        if not self.rows:
            return logits
        if self._plan is None:
            self._make_plan()
        for tr, idx, idx_t, rows in self._plan:
            cur = self.state.index_select(0, idx_t)
            done = [r.done for r in rows]
            new = catch_up(tr, cur, [r.out for r in rows], done, self.pin)
            for r, d in zip(rows, done):
                r.done = d
            if new is not cur:
                self.state.index_copy_(0, idx_t, new)
            if idx[-1] - idx[0] == len(idx) - 1:     # a run of rows: a view
                tr.constrain(logits[idx[0]:idx[-1] + 1], new)
            else:
                tr.constrain(logits, new, idx_t)
        return logits


# ---- the former per-request form (one row at a time, on the host) ---------

@lru_cache(maxsize=16)
def _walker(path: str, vocab_path):
    vocab = None if vocab_path is None else np.load(vocab_path)
    return PrefixWalker(Index(path), vocab)


def constrain_row(walker: PrefixWalker, output_ids, logits, eos=None):
    """constrain_row masks one logits row (a torch tensor) in place to the
    tokens that keep output_ids inside the library and returns it."""
    import torch
    width = logits.shape[-1]
    ids = list(output_ids)
    if eos is not None and eos in ids:
        keep = torch.tensor([eos], device=logits.device)
    else:
        u = walker.node(ids)
        cols = np.empty(0, dtype=np.int64) if u is None else \
            walker.allowed_columns(u, width)
        if eos is not None and eos < width and (u is None or (
                u != 0 and walker.index.value(u) is not None)):
            cols = np.append(cols, eos)
        keep = torch.as_tensor(cols, device=logits.device)
    masked = torch.full_like(logits, -math.inf)
    if keep.numel():
        masked[keep] = logits[keep]
    logits.copy_(masked)
    return logits


class FlashTriePerRequestLogitsProcessor(_AdapterBase):
    """The per-request form (vLLM's AdapterLogitsProcessor): each row is
    walked and masked on the host, one at a time.  Slower; kept for
    comparison (FlashTrieLogitsProcessor is the batch form)."""

    def is_argmax_invariant(self) -> bool:
        return False

    @classmethod
    def validate_params(cls, params):
        spec_of(getattr(params, "extra_args", None))

    def new_req_logits_processor(self, params):
        extra = getattr(params, "extra_args", None) or {}
        path = extra.get(KEY_INDEX)
        if not path:
            return None
        walker = _walker(path, extra.get(KEY_VOCAB))
        eos = extra.get(KEY_EOS)

        def fn(output_ids, logits):
            return constrain_row(walker, output_ids, logits, eos)

        return fn
