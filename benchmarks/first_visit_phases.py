"""Where the engine's first visits spend their time: state creation by the size of the state.

    python benchmarks/first_visit_phases.py [--schemas 150] [--slow-us 600]

One pass over ``step_latency.py``'s corpus documents (the walk of ``first_visit_ab.py``:
``LazyDFA`` + ``probe`` + ``TokenIndex``, then ``bits`` and ``next_states`` per token), thread
CPU time, collector off. ``LazyDFA.expand`` and the rows of new positions (``LazyDFA._row``
on a position whose row is not computed yet) are wrapped to add up the CPU time spent inside
them during each ``bits`` call, and each expanded state is classed by its number of member
positions. The wrappers cost about 0.3 µs a call, so the shares are a little high; the step
times themselves are those of the wrapped code (compare with ``first_visit_ab.py`` for the
plain times). Printed: the steps by time band, and for the steps over ``--slow-us``: the share
of ``expand`` (all of it, and the new positions' rows inside it) and of states with 1, 2-4
and 5 or more members (issue #12, part 31).
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import step_latency as sl  # noqa: E402  (the corpus and its generated documents)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schemas", type=int, default=150)
    ap.add_argument("--slow-us", type=float, default=600.0)
    args = ap.parse_args(argv)
    from hf_constrained import automaton

    tok, vocab, docs = sl.deepseek_corpus(args.schemas)  # before the wrappers

    clock = time.thread_time_ns
    step = Counter()  # this step's sums
    expand, row = automaton.LazyDFA.expand, automaton.LazyDFA._row

    def timed_expand(self, sid):
        if self.expanded[sid]:
            return
        size = len(self._keys[sid][0])
        cls = "1" if size == 1 else "2-4" if size < 5 else ">=5"
        t0 = clock()
        expand(self, sid)
        dt = clock() - t0
        step["expand"] += dt
        step["expand " + cls] += dt
        step["states " + cls] += 1

    def timed_row(self, pid):
        if self._pos_rows[pid] is not None:
            return self._pos_rows[pid]
        t0 = clock()
        got = row(self, pid)
        step["rows"] += clock() - t0
        step["new positions"] += 1
        return got

    automaton.LazyDFA.expand, automaton.LazyDFA._row = timed_expand, timed_row
    eos = tok.eos_token_id
    steps = []
    gc.disable()
    try:
        for _name, _schema, regex, _doc, ids in docs:
            dfa, index = sl.fresh_engine(regex, vocab, eos)
            q = dfa.starts[0]
            for t in ids + [eos]:
                step.clear()
                t0 = clock()
                index.bits(int(q))
                steps.append((clock() - t0, Counter(step)))
                q = int(index.next_states(np.array([q]), np.array([t]))[0])
            gc.collect()
    finally:
        automaton.LazyDFA.expand, automaton.LazyDFA._row = expand, row
    us = np.array([s[0] for s in steps]) / 1e3
    print(f"{len(docs)} schemas, {len(steps)} steps, thread CPU time (wrapped code): "
          f"p50 {np.percentile(us, 50):.0f} µs, p90 {np.percentile(us, 90):.0f} µs, p99 {np.percentile(us, 99):.0f} µs\n")
    print("| steps | count | mean | in `expand` | new rows | states expanded / step |")
    print("|---|---:|---:|---:|---:|---:|")
    for lo, hi in ((0, 300), (300, args.slow_us), (args.slow_us, 1000), (1000, float("inf"))):
        sel = [s for s in steps if lo <= s[0] / 1e3 < hi]
        if not sel:
            continue
        total = sum(s[0] for s in sel)
        c = sum((s[1] for s in sel), Counter())
        n = sum(c[k] for k in c if k.startswith("states"))
        print(f"| {lo:.0f}-{hi:.0f} µs | {len(sel)} | {total / len(sel) / 1e3:.0f} µs | "
              f"{c['expand'] / total:.0%} | {c['rows'] / total:.0%} | {n / len(sel):.1f} |")
    sel = [s for s in steps if s[0] / 1e3 >= args.slow_us]
    total = sum(s[0] for s in sel)
    c = sum((s[1] for s in sel), Counter())
    print(f"\nsteps >= {args.slow_us:.0f} µs ({len(sel)}, {total / 1e6:.0f} ms), expanded states by members:\n")
    print("| members | states | CPU time in `expand` | share of the steps | per state |")
    print("|---|---:|---:|---:|---:|")
    for cls in ("1", "2-4", ">=5"):
        n, t = c["states " + cls], c["expand " + cls]
        print(f"| {cls} | {n} | {t / 1e6:.0f} ms | {t / max(total, 1):.0%} | {t / max(n, 1) / 1e3:.1f} µs |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
