"""flashtrie.vllm_mrv2 - the vLLM logits processor for Model Runner V2
(MRV2: vLLM's default model runner from 0.32 on; flashtrie.vllm's
FlashTrieLogitsProcessor is the one for the V1 runner,
VLLM_USE_V2_MODEL_RUNNER=0).

    from vllm import LLM, SamplingParams
    llm = LLM(model=..., logits_processors=[
        "flashtrie.vllm_mrv2:FlashTrieLogitsProcessorV2"])
    sp = SamplingParams(max_tokens=16, extra_args={
        "flashtrie_index": "/srv/library.fti",   # index file, on the server
        "flashtrie_eos": 2,                       # optional: the EOS id
        "flashtrie_vocab": "/srv/vocab.npy",      # optional: model id -> token
        "flashtrie_prefix": []})                  # optional: key tokens in the prompt

The request options, token ids and EOS rules are flashtrie.vllm's.  MRV2
hands a processor the request state its model runner keeps on the device
(each request slot's committed token ids and prompt length) and, at every
step, the layout of the logits rows (each row's request slot and
position).  So this processor keeps nothing per step: at each apply it
takes, for the rows of constrained requests, the tokens generated since
the prompt (positions prompt_len .. pos of the slot's token ids, gathered
on the device) and walks them from the root, or from the node of
flashtrie_prefix, with one ft_ar_walk per library (each row its own
number of tokens), then masks the rows in place with one ft_ar_mask (for
float32, float16 and bfloat16 logits one ft_ar_constrain).
Rows reordered every step, requests preempted and resumed with their
output, recycled slots: none of it needs following, and nothing waits for
the device (the window's width comes from the host's upper bound of the
sequence lengths).  A row whose tokens left the library (a step this
processor did not constrain) may take EOS only.

Speculative decoding (several rows per request) is refused, at start
when the configuration has it and at apply when rows and requests differ.
Written against vllm.v1.worker.gpu.sample.logits_processor.interface
(LogitsProcRequestState: all_token_ids and prompt_len, read through their
device tensors and prompt_len's host array; LogitsContext:
expanded_idx_mapping, idx_mapping_np, pos, seq_lens_upper_bound_np); vLLM
is not installed where this was written: python/tests/test_vllm_mrv2.py
drives it through a stand-in of that interface.
"""
from __future__ import annotations

from typing import Dict, List, Tuple

import numpy as np

from .ar import DEAD, DONE
from .vllm import _index, _rows_for, _to_device, _vocab, prefix_of, spec_of

try:
    from vllm.v1.worker.gpu.sample.logits_processor.interface import \
        LogitsProcessor as _V2Base
except Exception:  # pragma: no cover - vLLM is optional
    class _V2Base:  # the shape of MRV2's base, for import without vLLM
        def __init__(self, vllm_config=None, req_states=None):
            pass

        @classmethod
        def validate_params(cls, sampling_params):
            return None


def _device_tensor(buf):
    """_device_tensor returns the device tensor of a model-runner buffer
    (a StagedWriteTensor's or UvaBackedTensor's .gpu), or buf itself."""
    for name in ("gpu", "device_tensor"):
        t = getattr(buf, name, None)
        if t is not None:
            return t
    return buf


def _host_array(buf):
    """_host_array returns the host numpy array of a UvaBackedTensor (.np)
    or of a CPU tensor."""
    a = getattr(buf, "np", None)
    if a is not None:
        return a
    return _device_tensor(buf).cpu().numpy()


def _start_state(spec, prefix: List[int]) -> int:
    """_start_state walks flashtrie_prefix through the library on the host:
    the node it leads to, DONE when it holds the EOS, else DEAD."""
    eos = spec[2]
    if eos is not None and eos in prefix:
        return DONE
    idx, voc = _index(spec[0]), _vocab(spec[1])
    node = 0
    for t in prefix:
        if voc is not None:
            t = int(voc[t]) if t < len(voc) else 0xFFFFFFFF
        node = idx.child(node, t)
        if node is None:
            return DEAD
    return node


class FlashTrieLogitsProcessorV2(_V2Base):
    """FlashTrieLogitsProcessorV2: see the module's docstring."""

    def __init__(self, vllm_config, req_states):
        super().__init__(vllm_config, req_states)
        if getattr(vllm_config, "speculative_config", None) is not None:
            raise ValueError("flashtrie: speculative decoding is not "
                             "supported (a request would own several "
                             "logits rows)")
        import torch
        self.req_states = req_states
        self.device = torch.device(req_states.device)
        self.pin = self.device.type == "cuda"
        # slot -> (library spec, start state: the prefix's node)
        self.slots: Dict[int, Tuple[tuple, int]] = {}

    @classmethod
    def validate_params(cls, sampling_params):
        extra = getattr(sampling_params, "extra_args", None)
        if spec_of(extra) is not None:
            prefix_of(extra)

    def add_request(self, req_idx: int, sampling_params) -> bool:
        extra = getattr(sampling_params, "extra_args", None)
        spec = spec_of(extra)
        if spec is None:
            self.slots.pop(req_idx, None)
            return False
        self.slots[req_idx] = (spec, _start_state(spec, prefix_of(extra)))
        return True

    def apply_staged_writes(self) -> None:
        return None

    def _groups(self, slots_np) -> Dict[tuple, List[Tuple[int, int, int]]]:
        """rows of constrained requests by library: (row, slot, start)"""
        groups: Dict[tuple, List[Tuple[int, int, int]]] = {}
        for row, slot in enumerate(slots_np.tolist()):
            e = self.slots.get(slot)
            if e is not None:
                groups.setdefault(e[0], []).append((row, slot, e[1]))
        return groups

    def apply(self, logits, ctx):
        if not self.slots:
            return logits
        import torch
        slots_np = np.asarray(ctx.idx_mapping_np)
        if int(logits.shape[0]) != len(slots_np):
            raise ValueError("flashtrie: %d logits rows for %d requests: one "
                             "row per request (speculative decoding is not "
                             "supported)" % (int(logits.shape[0]),
                                             len(slots_np)))
        groups = self._groups(slots_np)
        if not groups:
            return logits
        tokens = _device_tensor(self.req_states.all_token_ids)
        plen_dev = _device_tensor(self.req_states.prompt_len)
        plen_np = _host_array(self.req_states.prompt_len)
        upper = np.asarray(ctx.seq_lens_upper_bound_np)
        width = int(tokens.shape[1])
        dev, pin = self.device, self.pin
        for spec, members in groups.items():
            tr = _rows_for(spec, dev, len(members))
            rows_l = [m[0] for m in members]
            L = max(0, max(int(upper[r]) - int(plen_np[s])
                           for r, s, _ in members))
            rows_t = _to_device(rows_l, dev, pin)
            slot_t = ctx.expanded_idx_mapping[rows_t].to(torch.int64)
            first = plen_dev[slot_t].to(device=dev, dtype=torch.int64)
            # tokens generated before this row's sample: positions
            # prompt_len .. pos (none at the prompt's last token)
            gen = ctx.pos[rows_t].to(torch.int64) + 1 - first
            lens = gen.clamp(min=0, max=L)
            cols = first.unsqueeze(1) + torch.arange(L, device=dev)
            ids = tokens[slot_t.unsqueeze(1), cols.clamp(max=width - 1)]
            start = _to_device([m[2] for m in members], dev, pin)
            state = tr.walk(ids.to(torch.int64), state=start, lens=lens)
            tr.constrain(logits, state, rows=rows_t)
        return logits
