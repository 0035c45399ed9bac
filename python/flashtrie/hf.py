"""flashtrie.hf - keep Hugging Face generate() inside a FlashTrie library.

    from transformers import LogitsProcessorList
    from flashtrie.ar import Index
    from flashtrie.hf import TrieLogitsProcessor
    proc = TrieLogitsProcessor(Index("library.fti"), eos_token_id=tok.eos_token_id)
    out = model.generate(input_ids, num_beams=8, logits_processor=LogitsProcessorList([proc]))

At every step each row of input_ids (a beam of generate's beam search, or
a sample) may only take a token that extends its generated part to a prefix
of a library key, or EOS once that part is a whole key.  The generated part
starts after the prompt: the width of input_ids at the processor's first
call (use one processor per generate() call, or call reset()).

Token ids.  Column j of the scores (the model's token id j) stands for
library token vocab[j] (vocab: an array of the model's vocabulary size);
without vocab, model id j is library token j.  Model ids that are no
library token (EOS, padding, the rest of a text vocabulary) should map to a
value no key holds (0xFFFFFFFF).

The allowed tokens of the rows come from the library's mask form
(ft_ar_mask), on the device of the scores when it is a CUDA device (a GPU
session) and on the CPU otherwise; each row's trie node is kept from the
last call (one child lookup per row and step).
"""
from __future__ import annotations

import math
from typing import Dict, Optional, Tuple

import numpy as np

from .ar import Index, Session

try:  # subclass transformers' base class when it is there (duck-typed if not)
    from transformers import LogitsProcessor as _Base
except Exception:  # pragma: no cover - transformers is optional
    _Base = object


class PrefixWalker:
    """PrefixWalker maps generated token-id sequences to trie nodes (None:
    no key starts so), caching every prefix it has seen."""

    def __init__(self, index: Index, vocab=None):
        self.index = index
        self.vocab = None if vocab is None else np.asarray(vocab, dtype=np.uint64)
        self._nodes: Dict[Tuple[int, ...], Optional[int]] = {(): 0}
        self._kids: Dict[int, np.ndarray] = {}

    def lib_token(self, model_id: int) -> int:
        if self.vocab is None:
            return int(model_id)
        if not 0 <= model_id < len(self.vocab):
            return -1
        return int(self.vocab[model_id])

    def node(self, ids) -> Optional[int]:
        key = tuple(int(x) for x in ids)
        if key in self._nodes:
            return self._nodes[key]
        parent = self.node(key[:-1])
        u = None
        if parent is not None:
            t = self.lib_token(key[-1])
            u = self.index.child(parent, t) if 0 <= t <= 0xFFFFFFFF else None
        self._nodes[key] = u
        return u

    def allowed_columns(self, node: int, width: int) -> np.ndarray:
        """allowed_columns returns the model columns < width that extend
        node (sorted)."""
        cols = self._kids.get(node)
        if cols is None:
            labels = self.index.children(node).astype(np.uint64)
            if self.vocab is None:
                cols = labels.astype(np.int64)
            else:
                cols = np.nonzero(np.isin(self.vocab, labels))[0].astype(np.int64)
            self._kids[node] = cols
        return cols[cols < width]


class TrieLogitsProcessor(_Base):
    """TrieLogitsProcessor is a transformers LogitsProcessor (see the
    module's docstring).  eos_token_id: the id allowed once a row spells a
    whole key (None: rows end only by length); pad_token_id: allowed (with
    EOS) after a row has ended."""

    def __init__(self, index: Index, eos_token_id: Optional[int] = None,
                 vocab=None, pad_token_id: Optional[int] = None,
                 prompt_len: Optional[int] = None):
        self.index = index
        self.eos = eos_token_id
        self.pad = pad_token_id
        self.vocab = vocab
        self.walker = PrefixWalker(index, vocab)
        self.prompt_len = prompt_len
        self._fixed_prompt = prompt_len is not None
        self._session: Optional[Session] = None
        self._vocab_dev = None

    def reset(self):
        """reset forgets the prompt width (for the next generate call)."""
        if not self._fixed_prompt:
            self.prompt_len = None

    def _session_for(self, rows: int, width: int, device) -> Session:
        s = self._session
        dev = "cuda:%d" % device.index if getattr(device, "type", "") == "cuda" \
            else "cpu"
        if s is None or s.beam < rows or s.device != dev or s.max_width < width:
            s = Session(self.index, beam=max(rows, 1), max_width=max(width, 1),
                        device=dev)
            self._session = s
            self._vocab_dev = None
            if self.vocab is not None:
                v = np.asarray(self.vocab, dtype=np.uint64)
                v = np.where(v > 0xFFFFFFFF, 0xFFFFFFFF, v).astype(np.uint32)
                if s.gpu:
                    import torch
                    self._vocab_dev = torch.as_tensor(v.astype(np.int32),
                                                      device=dev)
                else:
                    self._vocab_dev = v
        return s

    def allowed(self, input_ids, width: int, device=None):
        """allowed returns the bool mask [rows, width] of the tokens each
        row may take next (numpy for numpy input, else a torch tensor on
        device)."""
        is_np = isinstance(input_ids, np.ndarray)
        ids = input_ids if is_np else input_ids.detach().cpu().numpy()
        rows = ids.shape[0]
        if self.prompt_len is None:
            self.prompt_len = ids.shape[1]
        gen = ids[:, self.prompt_len:]
        nodes, dead, ended = [], [], []
        for r in range(rows):
            seq = list(gen[r])
            if self.eos is not None and self.eos in seq:
                nodes.append(0)
                ended.append(r)
                continue
            u = self.walker.node(seq)
            if u is None:
                nodes.append(0)
                dead.append(r)
            else:
                nodes.append(u)
        s = self._session_for(rows, width, device if not is_np else None)
        s.set_nodes(nodes)
        eos = self.eos if self.eos is not None and self.eos < width else None
        m = s.mask(width, vocab=self._vocab_dev, eos=eos)[:rows]
        fix = dead + ended
        if fix:
            m[fix] = False
            for col in (self.eos, self.pad):
                if col is not None and col < width:
                    if ended:
                        m[ended, col] = True
                    if dead and col == self.eos:
                        m[dead, col] = True
        if not is_np and not s.gpu:
            import torch
            m = torch.as_tensor(m, device=device)
        return m

    def __call__(self, input_ids, scores):
        if isinstance(scores, np.ndarray):
            m = self.allowed(input_ids, scores.shape[1])
            return np.where(m, scores, -np.inf).astype(scores.dtype)
        m = self.allowed(input_ids, scores.shape[1], scores.device)
        return scores.masked_fill(~m, -math.inf)
