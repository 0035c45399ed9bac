"""flashtrie.vllm - a vLLM (v1 engine) logits processor that keeps requests
inside a FlashTrie library.

vLLM v1 loads custom logits processors at start-up and applies them to
the whole batch each step; per-request processors are written as an
AdapterLogitsProcessor whose new_req_logits_processor(params) returns a
function (output_ids, logits_row) -> logits_row, or None for requests that
do not ask for it.  This one is enabled per request by SamplingParams
extra_args:

    from vllm import LLM, SamplingParams
    from flashtrie.vllm import FlashTrieLogitsProcessor
    llm = LLM(model=..., logits_processors=[FlashTrieLogitsProcessor])
    sp = SamplingParams(max_tokens=16, extra_args={
        "flashtrie_index": "/srv/library.fti",   # index file
        "flashtrie_eos": 2,                       # optional: EOS id
        "flashtrie_vocab": None})                 # optional: .npy of vocab

output_ids are the request's generated tokens (the prompt is not part of
the key); token ids map to library tokens as flashtrie.hf documents.  The
per-row work is one child lookup and, per distinct trie node, one list of
children (cached), so a row costs a few microseconds on the host.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from .ar import Index
from .hf import PrefixWalker

try:
    from vllm.v1.sample.logits_processor import AdapterLogitsProcessor as _Base
except Exception:  # pragma: no cover - vLLM is optional
    class _Base:  # the shape of vLLM's base, for import without vLLM
        def __init__(self, vllm_config=None, device=None, is_pin_memory=False):
            self.device = device


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


class FlashTrieLogitsProcessor(_Base):
    """FlashTrieLogitsProcessor: see the module's docstring."""

    def is_argmax_invariant(self) -> bool:
        return False  # it changes which token is the argmax

    @classmethod
    def validate_params(cls, params):
        extra = getattr(params, "extra_args", None) or {}
        path = extra.get("flashtrie_index")
        if path is not None and not isinstance(path, str):
            raise ValueError("flashtrie_index: expected a path string")

    def new_req_logits_processor(self, params):
        extra = getattr(params, "extra_args", None) or {}
        path = extra.get("flashtrie_index")
        if not path:
            return None
        walker = _walker(path, extra.get("flashtrie_vocab"))
        eos = extra.get("flashtrie_eos")

        def fn(output_ids, logits):
            return constrain_row(walker, output_ids, logits, eos)

        return fn
