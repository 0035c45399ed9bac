"""trie_lib - the libraries the vLLM and SGLang adapter tests build:
random keys, the index flashtrie builds from them, and the test's own
model of which columns a row may take (test_vllm.py, test_sglang.py)."""
import os
import subprocess
import sys

import numpy as np

BIN = os.environ.get("FT_BIN", "")


def make_keys(seed, n, lo, hi, maxlen=5):
    rng = np.random.default_rng(seed)
    keys = set()
    while len(keys) < n:
        L = int(rng.integers(1, maxlen + 1))
        keys.add(tuple(int(x) for x in rng.integers(lo, hi, size=L)))
    return sorted(keys)


def build(tmp, name, keys):
    """build writes keys as text into tmp and builds NAME.ft from them with
    flashtrie build (FT_BIN); returns the index's path."""
    txt = tmp / (name + ".txt")
    txt.write_text("".join(" ".join(map(str, k)) + "\n" for k in keys))
    path = str(tmp / (name + ".ft"))
    subprocess.run([BIN, "build", "--input", str(txt), "--output", path,
                    "--quiet"], check=True, timeout=60)
    return path


class Lib:
    """Lib is a library as the test sees it: its keys in model ids."""

    def __init__(self, path, keys, eos, vocab_path=None):
        self.path, self.keys, self.eos, self.vocab_path = path, keys, eos, vocab_path
        self.keyset = set(keys)
        self.prefixes = {k[:i] for k in keys for i in range(len(k) + 1)}
        self.kids = {}
        for k in keys:
            for i in range(len(k)):
                self.kids.setdefault(k[:i], set()).add(k[i])

    def allowed(self, seq, eos="lib"):
        """allowed: the columns a row that generated seq may take."""
        eos = self.eos if eos == "lib" else eos
        seq = tuple(seq)
        if eos is not None and eos in seq:
            return {eos}
        if seq not in self.prefixes:
            return set() if eos is None else {eos}
        cols = set(self.kids.get(seq, ()))
        if seq in self.keyset and eos is not None:
            cols.add(eos)
        return cols

    def args(self, eos="lib", **kw):
        a = {"flashtrie_index": self.path}
        e = self.eos if eos == "lib" else eos
        if e is not None:
            a["flashtrie_eos"] = e
        if self.vocab_path is not None:
            a["flashtrie_vocab"] = self.vocab_path
        a.update(kw)
        return a


def remove_standins(saved):
    """remove_standins puts back the sys.modules entries a test replaced
    with stand-in modules (saved: name -> the module before, or None)."""
    for n, m in saved.items():
        if m is None:
            sys.modules.pop(n, None)
        else:
            sys.modules[n] = m
