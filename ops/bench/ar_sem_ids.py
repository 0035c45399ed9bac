#!/usr/bin/env python3
"""ar_sem_ids.py OUT [N] - the semantic-id library of docs/BENCHMARKS.md
"Autoregressive steps": N (default 10,000,000) distinct random items of 4
levels x 256 codes; level l's code c is token 256 l + c.  Written as .ftk
records (u32 4, then the 4 tokens), in random order, for
`flashtrie build --input OUT`.  Needs numpy."""
import sys

import numpy as np

out = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000_000
rng = np.random.default_rng(37)
# 1% spare draws cover the collisions among 2^32 codes (~12k at 10M)
ids = np.unique(rng.integers(0, 2**32, size=int(n * 1.01), dtype=np.uint64))
ids = rng.permutation(ids)[:n]
rec = np.empty((len(ids), 5), dtype=np.uint32)
rec[:, 0] = 4
for l in range(4):
    code = (ids >> np.uint64(8 * (3 - l))) & np.uint64(255)
    rec[:, 1 + l] = code.astype(np.uint32) + 256 * l
rec.tofile(out)
print("ar_sem_ids:", len(ids), "items")
