"""A/B of the walks from a neighbour (issue #12, part 8) on chosen corpus schemas.

For each schema, a fresh ``TokenIndex`` walks the schema's generated document token by token
(``TokenIndex.bits`` then ``next_states``, as ``step_latency.py``'s engine mode does), with the
neighbour walks on and off (``index._near = None``), alternating; prints, per run, the slowest
step and the whole document's mask time, CPU time (``time.process_time_ns``), collector off.

    python benchmarks/neighbour_ab.py --repeats 3    # default: the four slowest key starts of part 11
    python benchmarks/neighbour_ab.py --repeats 3 --expand   # also the CPU time inside LazyDFA.expand

With ``--expand`` each run also reports the CPU time spent creating DFA states
(``LazyDFA.expand``, timed around each call that computes a row: about 1 us of timer per call
included) during the document and the states created, overall and in the slowest step
(issue #12, part 13).
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import step_latency as sl  # noqa: E402  (the corpus and its generated documents)

SLOWEST = ["Github_medium/o10505.json", "Snowplow/sp_114_Normalized.json",
           "Snowplow/sp_116_Normalized.json", "Snowplow/sp_120_Normalized.json"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", default=SLOWEST, help="corpus schemas (dataset/file.json)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--schemas", type=int, default=150, help="corpus size to draw the names from")
    ap.add_argument("--expand", action="store_true", help="also time LazyDFA.expand")
    args = ap.parse_args()
    from hf_constrained.automaton import LazyDFA
    from hf_constrained.index import TokenIndex
    from hf_constrained.offline import deepseek_tokenizer
    from hf_constrained.regex_constraint import _PROBE_STATES
    from hf_constrained.regex_parser import parse
    from hf_constrained.vocabulary import Vocabulary

    tok = deepseek_tokenizer()
    docs, _ = sl.corpus(args.schemas, 0, tok, 600, sl.CORPUS)
    vocab = Vocabulary.from_tokenizer(tok, cache_dir=False)
    eos = tok.eos_token_id
    spent = [0]  # CPU time inside LazyDFA.expand (rows computed), with --expand
    if args.expand:
        plain = LazyDFA.expand

        def timed(self, sid):
            if self.expanded[sid]:
                return
            t0 = time.process_time_ns()
            try:
                plain(self, sid)
            finally:
                spent[0] += time.process_time_ns() - t0

        LazyDFA.expand = timed
    gc.disable()
    for name, _schema, regex, _doc, ids in docs:
        if name not in args.names:
            continue
        runs: dict = {"on": [], "off": []}
        for mode in ["on", "off"] * args.repeats:
            dfa = LazyDFA([parse(regex)], strip_leading_space=vocab.strip_leading_space)
            dfa.explore(_PROBE_STATES)
            index = TokenIndex(dfa, vocab, [eos])
            if mode == "off":
                index._near = None
            q = np.array([dfa.starts[0]], dtype=np.int64)
            worst = total = 0
            spent[0], worst_exp, worst_new, n0, e0 = 0, 0, 0, dfa.num_states, 0
            for t in ids + [eos]:
                s0, e0 = dfa.num_states, spent[0]
                t0 = time.process_time_ns()
                index.bits(int(q[0]))
                dt = time.process_time_ns() - t0
                if dt > worst:
                    worst_exp, worst_new = spent[0] - e0, dfa.num_states - s0
                worst, total = max(worst, dt), total + dt
                q = index.next_states(q, np.array([t], dtype=np.int64))
            runs[mode].append(f"{worst / 1e6:.1f} / {total / 1e6:.0f} ms" + (
                f" (expand {worst_exp / 1e6:.1f} ms, {worst_new} states / {spent[0] / 1e6:.0f} ms, "
                f"{dfa.num_states - n0} states)" if args.expand else ""))
        print(f"{name}: slowest step / document, neighbour walks on: {', '.join(runs['on'])}; "
              f"off: {', '.join(runs['off'])}", flush=True)


if __name__ == "__main__":
    main()
