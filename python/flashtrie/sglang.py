"""flashtrie.sglang - an SGLang custom logit processor that keeps requests
inside a FlashTrie library, the whole batch per call.

SGLang applies a CustomLogitProcessor to the logits of the requests that
name it: __call__(logits, custom_param_list) gets those requests' rows and,
per row, the request's custom_params dict, into which the server puts the
request itself under "__req__" (its output_ids are the generated tokens).
Start the server with --enable-custom-logit-processor and send:

    from flashtrie.sglang import FlashTrieLogitProcessor
    sampling_params = {"max_new_tokens": 16, "custom_params": {
        "flashtrie_index": "/srv/library.fti", "flashtrie_eos": 2}}
    requests.post(url + "/generate", json={"input_ids": prompt,
        "sampling_params": sampling_params,
        "custom_logit_processor": FlashTrieLogitProcessor.to_str()})

Each call gathers the rows whose params name a library, advances their trie
nodes by the tokens their requests generated since the last call (one walk
call for all of them, ft_ar_walk: TrieRows.walk) and masks them
with one mask call (ft_ar_mask; for float32, float16 and bfloat16
logits ft_ar_constrain, which also writes the -inf), on the logits' device; rows of one
library (index, vocabulary, EOS) share the calls.  SGLang builds processor
objects from to_str() as it forms batches, so the nodes are not kept in
the processor: they live in a table per library and device (a tensor of
int64 node ids on the device, a slot per request, found by the request's
rid), which hands slots of requests that stopped coming to new ones (such
a request, if it comes back, is walked again from the root).

A row whose params carry "flashtrie_output_ids" uses those instead of
__req__.output_ids (for callers that keep the generated tokens
themselves); with "flashtrie_rid" they keep a slot too, else they are
walked from the root at every call.  EOS, token ids, flashtrie_vocab and
flashtrie_prefix as flashtrie.vllm.  More rows than params (speculative
decoding) raise ValueError.  output_ids must hold the last sampled token
when the processor is called.
"""
from __future__ import annotations

import threading
from typing import Dict, List

from .ar import TrieRows
from .vllm import (KEY_INDEX, _rows_for, _to_device, catch_up, joined,
                   prefix_of, spec_of)

try:
    from sglang.srt.sampling.custom_logit_processor import \
        CustomLogitProcessor as _Base
except Exception:  # pragma: no cover - SGLang is optional
    import json

    class _Base:  # the shape of SGLang's base, for import without SGLang
        @classmethod
        def to_str(cls) -> str:
            return json.dumps({"callable": cls.__module__ + "." + cls.__name__})


class _Slot:
    __slots__ = ("slot", "done", "seen")

    def __init__(self, slot):
        self.slot, self.done, self.seen = slot, 0, 0


class RowTable:
    """RowTable is the nodes of one library's rows on one device: a tensor
    of slots and, per request key, its slot and how many of its tokens the
    slot's node has taken."""

    def __init__(self, tr: TrieRows, device, slots: int = 64):
        import torch
        self.tr = tr
        self.device = device
        self.state = torch.zeros(slots, dtype=torch.int64, device=device)
        self.free: List[int] = list(range(slots - 1, -1, -1))
        self.keys: Dict[object, _Slot] = {}
        self.calls = 0

    def _take(self) -> int:
        if not self.free:
            # slots of requests absent from this call, longest absent first
            idle = sorted((s.seen, k) for k, s in self.keys.items()
                          if s.seen < self.calls)
            for _, k in idle[:max(1, len(self.keys) // 2)]:
                self.free.append(self.keys.pop(k).slot)
        if not self.free:
            import torch
            n = self.state.shape[0]
            self.state = torch.cat([self.state, torch.zeros_like(self.state)])
            self.free = list(range(2 * n - 1, n - 1, -1))
        return self.free.pop()

    def slots(self, keys: List[object]) -> List[_Slot]:
        """slots returns the _Slot of each key (distinct keys), new ones
        at the root having taken no token."""
        self.calls += 1
        for k in keys:                       # not handed away below
            s = self.keys.get(k)
            if s is not None:
                s.seen = self.calls
        out, fresh = [], []
        for k in keys:
            s = self.keys.get(k)
            if s is None:
                s = _Slot(self._take())
                s.seen = self.calls
                self.keys[k] = s
                fresh.append(s.slot)
            out.append(s)
        if fresh:
            self.state[_to_device(fresh, self.device, _PIN)] = 0
        return out


TABLE_SLOTS = 64     # a table's first slots (it grows when more rows come)
_PIN = True          # host ints reach a GPU from pinned memory (no stream wait)
_TABLES: Dict[tuple, RowTable] = {}
_LOCK = threading.Lock()


def _table(spec, device) -> RowTable:
    key = (spec, str(device))
    with _LOCK:
        t = _TABLES.get(key)
        if t is None:
            t = RowTable(_rows_for(spec, device, TABLE_SLOTS), device,
                         TABLE_SLOTS)
            _TABLES[key] = t
        return t


def _request_of(params):
    """_request_of returns a row's (key, generated tokens)."""
    pre = prefix_of(params)
    ids = params.get("flashtrie_output_ids")
    if ids is not None:
        return params.get("flashtrie_rid"), joined(pre, ids)
    req = params.get("__req__")
    if req is None:
        raise ValueError("custom_params: no __req__ (is this SGLang?) and no "
                         "flashtrie_output_ids")
    rid = getattr(req, "rid", None)
    key = rid if rid is not None else ("id", id(req))
    return key, joined(pre, req.output_ids)


class FlashTrieLogitProcessor(_Base):
    """FlashTrieLogitProcessor: see the module's docstring."""

    def __call__(self, logits, custom_param_list=None):
        if not custom_param_list:
            return logits
        if logits.shape[0] != len(custom_param_list):
            raise ValueError("logits: %d rows for %d requests (speculative "
                             "decoding is not supported)" %
                             (logits.shape[0], len(custom_param_list)))
        groups: Dict[tuple, list] = {}
        for i, params in enumerate(custom_param_list):
            spec = spec_of(params) if params else None
            if spec is None:
                continue
            key, ids = _request_of(params)
            groups.setdefault(spec, []).append((i, key, ids))
        import torch
        for spec, rows in groups.items():
            t = _table(spec, logits.device)
            n = len(rows)
            # rows with a key keep a slot; a key's second row in one call
            # and rows without a key are walked from the root
            first, keys = {}, []
            for j, (_, k, _) in enumerate(rows):
                if k is not None and k not in first:
                    first[k] = j
                    keys.append(k)
            kept = list(first.values())
            slots = t.slots(keys)
            cur = torch.zeros(n, dtype=torch.int64, device=logits.device)
            done = [0] * n
            if kept:
                slot_t = _to_device([s.slot for s in slots], logits.device, _PIN)
                kept_t = _to_device(kept, logits.device, _PIN)
                cur[kept_t] = t.state.index_select(0, slot_t)
                for j, s in zip(kept, slots):
                    done[j] = s.done
            new = catch_up(t.tr, cur, [ids for _, _, ids in rows], done, _PIN)
            if kept:
                t.state.index_copy_(0, slot_t, new.index_select(0, kept_t))
                for j, s in zip(kept, slots):
                    s.done = done[j]
            at = [i for i, _, _ in rows]
            if at[-1] - at[0] == n - 1:               # a run of rows: a view
                t.tr.constrain(logits[at[0]:at[-1] + 1], new)
            else:
                t.tr.constrain(logits, new, _to_device(at, logits.device, _PIN))
        return logits


__all__ = ["FlashTrieLogitProcessor", "RowTable", "KEY_INDEX"]
