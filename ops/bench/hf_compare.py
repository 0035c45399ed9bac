"""hf_compare.py FLASHTRIE_BIN [N_KEYS] - the constraint's cost per decode
step, FlashTrie against transformers' PrefixConstrainedLogitsProcessor over
a Python dict trie (issue 37's ">= 100x" goal; docs/BENCHMARKS.md section 8).

Builds N_KEYS random keys (lengths 2-6 over 32,768 tokens) as a FlashTrie
index and as a dict trie, then times on the GPU, for 256 rows (32 prompts
x 8 beams) whose generated parts follow library keys, with scores
[256, 32,770]: (a) PrefixConstrainedLogitsProcessor with a dict-trie
prefix_allowed_tokens_fn, (b) flashtrie.hf.TrieLogitsProcessor, (c) the
mask form alone (Session.set_nodes + Session.mask on the GPU).  Prints
microseconds per call and the ratios.  Not run yet at the time of writing.
"""
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
from transformers.generation.logits_process import \
    PrefixConstrainedLogitsProcessor

from flashtrie.ar import Index, Session
from flashtrie.hf import TrieLogitsProcessor

BIN = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
V, EOS, BOS, ROWS, NB = 32768, 32768, 32769, 256, 8
rng = np.random.default_rng(0)
keys = {tuple(int(x) for x in rng.integers(0, V, size=int(rng.integers(2, 7))))
        for _ in range(N)}
tmp = tempfile.mkdtemp()
with open(tmp + "/k.txt", "w") as f:
    for k in keys:
        f.write(" ".join(map(str, k)) + "\n")
subprocess.run([BIN, "build", "--input", tmp + "/k.txt", "--output",
                tmp + "/k.ft", "--quiet"], check=True)
idx = Index(tmp + "/k.ft", verify=False)
trie = {}
for k in keys:
    node = trie
    for t in k:
        node = node.setdefault(t, {})
    node[EOS] = {}

klist = list(keys)
rows = [klist[int(i)] for i in rng.integers(0, len(klist), size=ROWS)]
depth = 1
ids = torch.tensor([[BOS] + list(r[:depth]) for r in rows], device="cuda")
scores = torch.randn(ROWS, V + 2, device="cuda")


def allowed_fn(batch_id, input_ids):
    node = trie
    for t in input_ids.tolist()[1:]:
        node = node.get(t)
        if node is None:
            return [EOS]
    return list(node.keys())


def timeit(fn, n=20):
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e6


hf = PrefixConstrainedLogitsProcessor(allowed_fn, NB)
ours = TrieLogitsProcessor(idx, eos_token_id=EOS, prompt_len=1)
sess = Session(idx, beam=ROWS, max_width=V + 2, device="cuda")
nodes = [idx.walk(r[:depth]) for r in rows]
t_hf = timeit(lambda: hf(ids, scores.clone()))
t_ours = timeit(lambda: ours(ids, scores.clone()))
t_mask = timeit(lambda: (sess.set_nodes(nodes), sess.mask(V + 2, eos=EOS)))
print("keys %d, rows %d, V %d, depth %d" % (len(keys), ROWS, V, depth))
print("HF PrefixConstrainedLogitsProcessor (dict trie): %10.1f us" % t_hf)
print("flashtrie TrieLogitsProcessor:                   %10.1f us  (%.1fx)" %
      (t_ours, t_hf / t_ours))
print("flashtrie mask form alone:                       %10.1f us  (%.1fx)" %
      (t_mask, t_hf / t_mask))
