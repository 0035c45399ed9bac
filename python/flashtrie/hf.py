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

Each call finds every row's place in the trie with one walk over its
generated tokens (ft_ar_walk) and the allowed tokens with one mask call
(ft_ar_mask), on the scores' device when it is a CUDA device (a GPU
session) and on the CPU otherwise; for float32, float16 or bfloat16
scores one ft_ar_constrain writes the new scores from the mask (no bool
mask, no masked_fill).  No host wait on a GPU, nothing kept
between calls but the session's buffers (generate() reorders its beams
between calls without telling a processor, so the rows are walked whole:
a row of L generated tokens is L child lookups, on the device).
"""
from __future__ import annotations

import math
import threading
from typing import Dict, Optional, Tuple

import numpy as np

from .ar import DEAD, DONE, Index, Session, TrieRows, _torch, vocab_u32

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


# The TrieRows of this thread's processors, by (index, device, vocabulary,
# EOS): a GPU session copies the library to the device when it opens
# (~13 ms for a 77 MB index on the H200), and generate() is given a new
# processor per call, so processors of one thread share it; threads keep
# their own (a session serves one caller at a time).  At most _KEEP kept.
_TLS = threading.local()
_KEEP = 4


def _thread_rows(index: Index, device, vocab, eos, n: int) -> TrieRows:
    import torch
    device = torch.device(device)
    vkey = None if vocab is None else (len(vocab), hash(vocab.tobytes()))
    key = (id(index), str(device), vkey, eos)
    cache = getattr(_TLS, "rows", None)
    if cache is None:
        cache = _TLS.rows = {}
    hit = cache.get(key)
    if hit is not None and hit[0] is index and (
            vocab is None or np.array_equal(hit[1].vocab, vocab)):
        cache[key] = cache.pop(key)          # most recent last
        return hit[1]
    r = TrieRows(index, rows=max(n, 1), device=device, vocab=vocab, eos=eos)
    cache[key] = (index, r)
    while len(cache) > _KEEP:
        cache.pop(next(iter(cache)))
    return r


def _one_id(name: str, v) -> Optional[int]:
    """_one_id is v (None, an id, or a list, array or tensor of one id)
    as an int; ValueError naming it for several ids (generation configs
    may list several EOS ids; the walk and the mask take one) or no
    integer."""
    if v is None:
        return None
    a = np.asarray(v.tolist() if hasattr(v, "tolist") else v).reshape(-1)
    if a.size != 1 or a.dtype.kind not in "iu":
        raise ValueError("%s: expected one integer id, got %r" % (name, v))
    return int(a[0])


def _same_rows(input_ids, scores):
    """_same_rows raises ValueError unless scores is [rows, vocab] and
    input_ids [rows, length] with the same rows (a mask of fewer rows
    would be broadcast over the scores, or fail inside torch)."""
    si, ss = tuple(input_ids.shape), tuple(scores.shape)
    if len(ss) != 2:
        raise ValueError("scores: expected [rows, vocab], got shape %r" %
                         (ss,))
    if len(si) != 2 or si[0] != ss[0]:
        raise ValueError("input_ids: expected [%d, length] for scores of "
                         "shape %r, got shape %r" % (ss[0], ss, si))


class TrieLogitsProcessor(_Base):
    """TrieLogitsProcessor is a transformers LogitsProcessor (see the
    module's docstring).  eos_token_id: the id allowed once a row spells a
    whole key (None: rows end only by length; a list or tensor of one id
    is that id, several are refused); pad_token_id: allowed (with
    EOS) after a row has ended.  Rows that left the library (a step this
    processor did not constrain) may take EOS only."""

    def __init__(self, index: Index, eos_token_id: Optional[int] = None,
                 vocab=None, pad_token_id: Optional[int] = None,
                 prompt_len: Optional[int] = None):
        self.index = index
        self.eos = _one_id("eos_token_id", eos_token_id)
        self.pad = _one_id("pad_token_id", pad_token_id)
        self.vocab = None if vocab is None else vocab_u32(vocab)
        self.prompt_len = prompt_len
        self._fixed_prompt = prompt_len is not None
        self._rows: Optional[TrieRows] = None      # torch input
        self._session: Optional[Session] = None    # numpy input
        self._cols: Dict[int, np.ndarray] = {}

    def reset(self):
        """reset forgets the prompt width (for the next generate call)."""
        if not self._fixed_prompt:
            self.prompt_len = None

    def _start(self, ids) -> int:
        if self.prompt_len is None:
            self.prompt_len = int(ids.shape[1])
        return self.prompt_len

    def _trie_rows(self, n: int, device) -> TrieRows:
        r = self._rows
        if r is None or r.device != device:
            r = _thread_rows(self.index, device, self.vocab, self.eos, n)
            self._rows = r
        return r

    def disallowed(self, input_ids, width: int):
        """disallowed returns bool [rows, width] (torch, on input_ids'
        device): True where a row may not take the column.  A view of a
        buffer that the next call reuses."""
        rows = self._trie_rows(int(input_ids.shape[0]), input_ids.device)
        state = rows.walk(input_ids, self._start(input_ids))
        bad = rows._disallowed(state, width)
        if self.pad is not None and 0 <= self.pad < width:
            bad[:, self.pad] &= state != TrieRows.DONE
        return bad

    def _vocab_cols(self, width: int) -> Optional[np.ndarray]:
        """the library token of each of width columns (numpy input)"""
        if self.vocab is None:
            return None
        v = self._cols.get(width)
        if v is None:
            v = np.full(width, 0xFFFFFFFF, dtype=np.uint32)
            k = min(width, len(self.vocab))
            v[:k] = self.vocab[:k]
            self._cols[width] = v
        return v

    def _allowed_np(self, ids: np.ndarray, width: int) -> np.ndarray:
        rows = ids.shape[0]
        s = self._session
        if s is None or s.beam < rows or s.max_width < width:
            s = Session(self.index, beam=max(rows, 1), max_width=max(width, 1))
            self._session = s
        state = s.walk(ids, self._start(ids), self.eos, self.vocab)
        s.set_nodes(np.where(state >= 0, state, 0))
        eos = self.eos if self.eos is not None and 0 <= self.eos < width \
            else None
        m = s.mask(width, vocab=self._vocab_cols(width), eos=eos)[:rows]
        ended, dead = state == DONE, state == DEAD
        m[ended | dead] = False
        if eos is not None:
            m[ended | dead, eos] = True
        if self.pad is not None and 0 <= self.pad < width:
            m[ended, self.pad] = True
        return m

    def allowed(self, input_ids, width: int, device=None):
        """allowed returns the bool mask [rows, width] of the tokens each
        row may take next (numpy for numpy input, else a torch tensor on
        input_ids' device)."""
        if isinstance(input_ids, np.ndarray):
            return self._allowed_np(input_ids, width)
        return ~self.disallowed(input_ids, width)

    def __call__(self, input_ids, scores):
        if isinstance(scores, np.ndarray):
            input_ids = np.asarray(input_ids)
        _same_rows(input_ids, scores)
        if isinstance(scores, np.ndarray):
            m = self._allowed_np(input_ids, scores.shape[1])
            return np.where(m, scores, -np.inf).astype(scores.dtype)
        input_ids = input_ids.to(scores.device)
        rows = self._trie_rows(int(input_ids.shape[0]), input_ids.device)
        if not rows.native(scores):
            bad = self.disallowed(input_ids, scores.shape[1])
            return scores.masked_fill(bad, -math.inf)
        # the library writes the masked rows (one call, no bool mask), the
        # walk's states straight into the mask's beams
        state = rows._walk_here(input_ids, self._start(input_ids))
        out = rows._constrain(scores, state, _torch().empty_like(scores))
        if self.pad is not None and 0 <= self.pad < scores.shape[1]:
            done = state == TrieRows.DONE
            out[:, self.pad] = _torch().where(done, scores[:, self.pad],
                                              out[:, self.pad])
        return out
