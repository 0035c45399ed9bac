"""hf_overhead.py INDEX [V] [NEW] - what flashtrie.hf.TrieLogitsProcessor
adds to a Hugging Face generate() step (docs/BENCHMARKS.md "Autoregressive
steps").

A randomly initialised GPT-2-small-shaped model (12 layers, 768 wide,
vocabulary V + 2: ids 0..V-1 are library tokens, V is EOS, V + 1 BOS) on
the GPU, bf16; beam search of 8 beams.  Prints the model's generate() time
per new token without the processor, the processor's own time per call on
8 rows that follow library keys (the device synchronised after each
batch of calls, not after each), and their ratio.

Then the like-for-like figure: generate() of 1 and of NEW new tokens
(default 4) in three forms, rounds alternating: with the processor (and
eos_token_id EOS, which it allows at a key's end), without it but with
the same eos_token_id (the same generate() call less the constraint:
transformers adds its EOS stopping criterion and finished-beam checks
for an eos id), with a processor that changes nothing (what
transformers' handling of any processor costs), and without either; the time per new token is the
median over the rounds of (t(NEW) - t(1)) / (NEW - 1), which leaves the
prompt's forward pass out, and paired: the median over the rounds of
each round's ratio of two forms (the forms' order turns each round).  The processor's own calls inside those
generate() runs are timed too (host wall time of each call: generate()
waits for the device every step, so that is what a call adds).  Every key of
INDEX must be at least NEW tokens long (the semantic-id library of
ops/bench/ar_sem_ids.py: exactly 4): the processor allows EOS only at a
key's end, so both runs make exactly the same number of steps.  Last, it
checks that every sequence generated with the processor is a library
prefix or key.
"""
import sys
import time

import numpy as np
import torch
from transformers import GPT2Config, GPT2LMHeadModel, LogitsProcessorList

from flashtrie.ar import Index
from flashtrie.hf import TrieLogitsProcessor

from bench_pkg import sample_keys

idx = Index(sys.argv[1], verify=False)
V = int(sys.argv[2]) if len(sys.argv) > 2 else 32768
EOS, BOS = V, V + 1
torch.manual_seed(0)
cfg = GPT2Config(vocab_size=V + 2, n_layer=12, n_embd=768, n_head=12,
                 n_positions=64, bos_token_id=BOS, eos_token_id=EOS,
                 pad_token_id=EOS)
model = GPT2LMHeadModel(cfg).cuda().to(torch.bfloat16).eval()
prompt = torch.tensor([[BOS]], device="cuda")
NEW, NB = 8, 8


def gen(lp, eos, new=NEW):
    """gen times one generate() of new tokens: (seconds, sequences)."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.no_grad():
        out = model.generate(prompt, num_beams=NB, max_new_tokens=new,
                             do_sample=False, logits_processor=lp,
                             eos_token_id=eos, pad_token_id=EOS,
                             length_penalty=0.0)
    torch.cuda.synchronize()
    return time.perf_counter() - t0, out


gen(LogitsProcessorList(), None)  # warm-up
base = min(gen(LogitsProcessorList(), None)[0] for _ in range(3)) / NEW
print("generate without processor: %.1f us per new token (%d beams)" %
      (base * 1e6, NB))

# the processor alone: 8 rows along library keys, scores on the GPU
rows = sample_keys(idx, NB, np.random.default_rng(1), depth=4)
L = min(len(s) for s in rows)
ids = torch.tensor([[BOS] + s[:L] for s in rows], device="cuda")
scores = torch.randn(NB, V + 2, device="cuda", dtype=torch.float32)
proc = TrieLogitsProcessor(idx, eos_token_id=EOS, prompt_len=1)
proc(ids, scores)
torch.cuda.synchronize()
n = 50
t0 = time.perf_counter()
for _ in range(n):
    out = proc(ids, scores)
torch.cuda.synchronize()
per = (time.perf_counter() - t0) / n
print("processor call (rows walked whole on the device): %.1f us; %.1f%% "
      "of a token" % (per * 1e6, 100 * per / base))

NEWL = int(sys.argv[3]) if len(sys.argv) > 3 else 4
ROUNDS = 25


class Timed(TrieLogitsProcessor):
    """the processor, its calls' host wall time summed in spent"""
    spent = 0.0

    def __call__(self, input_ids, scores):
        t0 = time.perf_counter()
        out = super().__call__(input_ids, scores)
        Timed.spent += time.perf_counter() - t0
        return out


class Null:
    """a processor that changes nothing: what transformers' own handling
    of a logits processor costs"""

    def __call__(self, input_ids, scores):
        return scores


def form(name):
    """form is generate()'s processors and eos id for a form's name"""
    if name == "with":
        return LogitsProcessorList([Timed(idx, eos_token_id=EOS)]), EOS
    if name == "null":
        return LogitsProcessorList([Null()]), EOS
    return LogitsProcessorList(), (EOS if name == "eos" else None)


FORMS = ("plain", "eos", "null", "with")
per = {k: [] for k in FORMS}
whole = {k: [] for k in FORMS}
calls = []
outs = []
gen(*form("with"), NEWL)  # warm-up of the processor's session
for r in range(ROUNDS):
    # the forms' order turns each round: none is always first or last
    for name in FORMS[r % len(FORMS):] + FORMS[:r % len(FORMS)]:
        t1, _ = gen(*form(name), 1)
        Timed.spent = 0.0
        tn, out = gen(*form(name), NEWL)
        if name == "with":
            outs.append(out)
            calls.append(Timed.spent / NEWL)
        # the eos form too: no early EOS, so as many steps as the others
        assert out.shape[1] == 1 + NEWL, (name, out.shape)
        per[name].append((tn - t1) / (NEWL - 1))
        whole[name].append(tn)
m = {k: float(np.median(per[k])) for k in FORMS}
w = {k: float(np.median(whole[k])) for k in FORMS}
c = float(np.median(calls))
print("generate, %d vs 1 new tokens, %d rounds, median per new token: "
      "with processor %.1f us; without, same eos_token_id %.1f us: %+.1f%% "
      "(like for like); without, no eos_token_id %.1f us: %+.1f%%" %
      (NEWL, ROUNDS, m["with"] * 1e6, m["eos"] * 1e6,
       100 * (m["with"] - m["eos"]) / m["eos"], m["plain"] * 1e6,
       100 * (m["with"] - m["plain"]) / m["plain"]))
print("whole generate() of %d new tokens (a new processor each, its first "
      "call included), median: with %.2f ms; same eos_token_id %.2f ms: "
      "%+.1f%%; no eos_token_id %.2f ms: %+.1f%%" %
      (NEWL, w["with"] * 1e3, w["eos"] * 1e3,
       100 * (w["with"] - w["eos"]) / w["eos"], w["plain"] * 1e3,
       100 * (w["with"] - w["plain"]) / w["plain"]))


def paired(a, b):
    """the median over the rounds of form a's time per new token against
    form b's in the same round (the host's drift between rounds cancels)"""
    return 100 * float(np.median([x / y - 1 for x, y in zip(per[a], per[b])]))


print("paired by round (median of each round's ratio): with processor "
      "against same eos_token_id %+.1f%%, against a processor that changes "
      "nothing %+.1f%%; that one against none %+.1f%%" %
      (paired("with", "eos"), paired("with", "null"), paired("null", "eos")))
print("a processor that changes nothing (same eos_token_id): %.1f us per "
      "new token, %+.1f%% against none; ours against it: %+.1f%%" %
      (m["null"] * 1e6, 100 * (m["null"] - m["eos"]) / m["eos"],
       100 * (m["with"] - m["null"]) / m["null"]))
print("the processor's calls inside generate(), median per new token: "
      "%.1f us (%.1f%% of a token with it)" %
      (c * 1e6, 100 * c / m["with"]))
for out in outs:
    for s in out[:, 1:].tolist():
        key = s[:s.index(EOS)] if EOS in s else s
        node = idx.walk(key)
        assert node is not None, s
print("hf_overhead: sequences are library prefixes/keys: ok")
