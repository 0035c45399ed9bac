#!/usr/bin/env python3
"""ar_mutate.py SEED < requests.jsonl > requests2.jsonl

Makes generated requests harder for "flashtrie search --ar": shuffles each
row's proposals (the step must order them itself, ties by input place),
rounds log-probs to a coarse grid (ties in logp and in sigma, across beams
and within one beam), and varies every the specification parameter (beam, results,
theta_tok, theta_sent, alpha) per line, all seeded."""
import json
import random
import sys

rng = random.Random(int(sys.argv[1]))
for line in sys.stdin:
    q = json.loads(line)
    for t in range(len(q["tokens"])):
        pairs = list(zip(q["tokens"][t], q["logp"][t]))
        rng.shuffle(pairs)
        step = rng.choice([0.25, 0.5, 1.0, 0.0])
        if step:
            pairs = [(k, round(v / step) * step) for k, v in pairs]
        elif rng.random() < 0.5:
            # huge and tiny magnitudes: sigma + rho rounds (equal sigmas
            # from different rho)
            pairs = [(k, v * 1e-7 if rng.random() < 0.5 else v - 1e7)
                     for k, v in pairs]
        q["tokens"][t] = [k for k, _ in pairs]
        q["logp"][t] = [v for _, v in pairs]
    q["beam"] = rng.choice([1, 2, 3, 5, 8, 17, 64, 300])
    if rng.random() < 0.7:
        q["results"] = rng.choice([1, 2, 4, 10, 50, 500])
    else:
        q.pop("results", None)
    for f, vals in (("theta_tok", [-1.0, -2.5, -5, -1e30]),
                    ("theta_sent", [-2.0, -4.0, -8.5, -20.0, -1e30])):
        if rng.random() < 0.5:
            q[f] = rng.choice(vals)
        else:
            q.pop(f, None)
    q["alpha"] = rng.choice([0.0, 0.5, 1.0, 2.5, 10.0])
    print(json.dumps(q))
