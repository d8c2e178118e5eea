"""Engine first visits with and without a pass over a 129k-wide score row between steps.

    python benchmarks/first_visit_pollution.py [--schemas 40] [--rounds 2]

Walks ``step_latency.py``'s corpus documents through the engine alone (``LazyDFA`` +
``probe`` + ``TokenIndex``; ``bits`` on each state's first visit, ``next_states`` to
commit), timing only the first visits, three ways per round: nothing between steps;
an in-place copy + ``masked_fill_`` + ``argmax`` of one preallocated 129k float32 row
(what masking a row costs the caches, no allocation); the same on a fresh clone (what a
processor called outside ``generate()`` does). Single thread, collector off. It shows
how much of the whole call's first-visit time is the engine's own work slowed by the
data a step touches around it (issue #12).
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import step_latency as sl  # noqa: E402  (the corpus and its generated documents)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schemas", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    tok, vocab, docs = sl.deepseek_corpus(args.schemas)
    eos, width = tok.eos_token_id, len(tok)
    scores = torch.randn(64, width)
    buf, ban = torch.empty(1, width), torch.rand(1, width) > 0.5
    clock = time.perf_counter_ns

    def run(between: str) -> np.ndarray:
        out = []
        for _name, _schema, regex, _doc, ids in docs:
            dfa, index = sl.fresh_engine(regex, vocab, eos)
            q = dfa.starts[0]
            for i, t in enumerate(ids + [eos]):
                row = scores[i % 64: i % 64 + 1]
                if between == "in place":
                    buf.copy_(row)
                    buf.masked_fill_(ban, -1e9)
                    buf.argmax()
                elif between == "clone":
                    s = row.clone()
                    s.masked_fill_(s > 2, -1e9)
                    s.argmax()
                if int(q) not in index._bits:
                    t0 = clock()
                    index.bits(int(q))
                    out.append(clock() - t0)
                q = int(index.next_states(np.array([q]), np.array([t]))[0])
            gc.collect()
        return np.array(out) / 1e3

    gc.disable()
    print(f"{len(docs)} schemas; engine first visits (TokenIndex.bits), wall clock\n")
    print("| round | between steps | first visits | p50 | p90 | p99 |")
    print("|---:|---|---:|---:|---:|---:|")
    for r in range(args.rounds):
        for between in ("nothing", "in place", "clone"):
            us = run(between)
            p50, p90, p99 = np.percentile(us, [50, 90, 99])
            print(f"| {r + 1} | {between} | {len(us)} | {p50:.0f} µs | {p90:.0f} µs | {p99:.0f} µs |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
