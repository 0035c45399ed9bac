#!/usr/bin/env python3
"""hf_proc_bench.py INDEX [--rows 8,64,256,1024] [--vocab 32768]
       [--device cpu|cuda] [--decodes 5] [--baseline DIR]

What flashtrie.hf.TrieLogitsProcessor costs per generate() step, on
torch tensors as generate() hands them over, without a model: each
decode is a fresh processor (one per generate() call) called at the
depths 0 .. D of its rows (D: the keys' length), rows following library
keys and reordered at every step (as a beam search reorders its beams),
scores [rows, V + 2] float32 (V: EOS, V + 1: BOS; the prompt is BOS).
Prints the mean time per call over the decodes' steps, per depth and
overall, and the floor: scores.masked_fill of a fixed bool mask of the
same shape, what a processor that returns new scores through torch's
masked_fill pays (on a CPU most of a call: allocating and writing
[rows, V + 2] floats; the library's constrain writes them without a bool
mask, and can come in under it).  --baseline DIR times another copy of the package (e.g.
`git archive REV python/flashtrie | tar -x -C DIR --strip-components=1`)
in the same run, call for call, as base.  Then TrieRows.advance (the vLLM
and SGLang adapters' step) down the same rows' keys, one token a call:
the best decode's time per call; and TrieRows.constrain (their mask,
applied in place to a [rows, V + 2] float32 logits tensor) at the rows'
last nodes, the best of --decodes calls.

Environment: FLASHTRIE_LIB (libflashtrie.so), PYTHONPATH=python.
"""
import argparse
import importlib
import time

import numpy as np
import torch

from flashtrie.ar import Index
from flashtrie.hf import TrieLogitsProcessor

from bench_pkg import import_baseline, sample_keys


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("index")
    ap.add_argument("--rows", default="8,64,256,1024")
    ap.add_argument("--vocab", type=int, default=32768)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--decodes", type=int, default=5)
    ap.add_argument("--baseline", metavar="DIR")
    a = ap.parse_args()
    dev = torch.device(a.device)
    idx = Index(a.index, verify=False)
    V = a.vocab
    EOS, BOS = V, V + 1
    procs = {"ours": TrieLogitsProcessor}
    index = {"ours": idx}
    ar_mod = {"ours": importlib.import_module("flashtrie.ar")}
    if a.baseline:
        base = import_baseline(a.baseline, "hf_proc_bench")
        importlib.import_module("flashtrie_base.hf")
        procs["base"] = base.hf.TrieLogitsProcessor
        index["base"] = base.ar.Index(a.index, verify=False)
        ar_mod["base"] = base.ar
    rng = np.random.default_rng(5)
    print("hf_proc_bench: %s, V = %d, device %s, %d decodes per case" %
          (a.index, V, dev, a.decodes))
    for R in (int(x) for x in a.rows.split(",")):
        keys = sample_keys(idx, R, rng)
        D = min(len(k) for k in keys)
        scores = torch.randn(R, V + 2, device=dev, dtype=torch.float32)
        # each step's rows, reordered: ids[d] is [R, 1 + d]
        steps = []
        for d in range(D + 1):
            perm = rng.permutation(R)
            ids = torch.tensor([[BOS] + keys[p][:d] for p in perm],
                               dtype=torch.int64).reshape(R, 1 + d).to(dev)
            steps.append(ids)
        per = {name: np.zeros(D + 1) for name in list(procs) + ["floor"]}
        fixed = torch.rand(R, V + 2, device=dev) < 0.99
        for rep in range(a.decodes + 1):          # the first: warm-up
            for d in range(D + 1):     # what any out-of-place mask pays
                sync(dev)
                t0 = time.perf_counter()
                scores.masked_fill(fixed, -float("inf"))
                sync(dev)
                if rep:
                    per["floor"][d] += (time.perf_counter() - t0) / a.decodes
            for name, cls in procs.items():
                proc = cls(index[name], eos_token_id=EOS)
                for d, ids in enumerate(steps):
                    sync(dev)
                    t0 = time.perf_counter()
                    out = proc(ids, scores)
                    sync(dev)
                    dt = time.perf_counter() - t0
                    if rep:
                        per[name][d] += dt / a.decodes
                    if rep == 0 and d == D:     # every row allows EOS only
                        ok = torch.isfinite(out)
                        assert ok[:, EOS].all() and int(ok.sum()) == R, name
        floor = per["floor"].mean()
        for name in per:
            depth = " ".join("%.1f" % (x * 1e6) for x in per[name])
            print("rows %5d  %-5s mean per call %9.1f us (%+9.1f over the "
                  "floor)   by depth (us): %s" %
                  (R, name, per[name].mean() * 1e6,
                   (per[name].mean() - floor) * 1e6, depth))
        if "base" in per:
            b, o = per["base"].mean() - floor, per["ours"].mean() - floor
            print("rows %5d  base / ours: %.2fx; over the floor %s" %
                  (R, per["base"].mean() / per["ours"].mean(),
                   "%.2fx" % (b / o) if b > 0 and o > 0 else
                   "base %+.1f us, ours %+.1f us" % (b * 1e6, o * 1e6)))
        # TrieRows.advance (vLLM's and SGLang's step): the rows down their
        # keys one token a call, D calls a decode
        toks = [torch.tensor([k[d] for k in keys], device=dev)
                for d in range(D)]
        adv = {}
        for name in procs:
            mod = ar_mod[name]
            tr = mod.TrieRows(index[name], rows=R, device=dev, eos=EOS)
            best = None
            for rep in range(a.decodes + 1):
                st = torch.zeros(R, dtype=torch.int64, device=dev)
                sync(dev)
                t0 = time.perf_counter()
                for t in toks:
                    st = tr.advance(st, t)
                sync(dev)
                dt = (time.perf_counter() - t0) / D
                if rep:
                    best = dt if best is None else min(best, dt)
            if name == "ours":      # the rows are at their keys' nodes
                want = [index[name].walk(k[:D]) for k in keys]
                assert st.cpu().tolist() == want
            adv[name] = best
            print("rows %5d  %-5s TrieRows.advance %9.1f us a call (best "
                  "decode)" % (R, name, best * 1e6))
            # TrieRows.constrain (their mask, in place) at the rows' nodes
            lg = scores.clone()
            tr.constrain(lg, st)
            best = None
            for rep in range(a.decodes):
                lg.copy_(scores)
                sync(dev)
                t0 = time.perf_counter()
                tr.constrain(lg, st)
                sync(dev)
                dt = time.perf_counter() - t0
                best = dt if best is None else min(best, dt)
            print("rows %5d  %-5s TrieRows.constrain %7.1f us a call, in "
                  "place (best of %d)" % (R, name, best * 1e6, a.decodes))


if __name__ == "__main__":
    main()
