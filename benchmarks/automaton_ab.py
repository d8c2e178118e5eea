"""Same-process A/B of state creation (``LazyDFA.explore``) between two copies of the package.

    git archive main | tar -x -C /tmp/main      # the reference copy, once
    python benchmarks/automaton_ab.py --ref /tmp/main/hf_constrained [--repeats 7]
    python benchmarks/automaton_ab.py --ref hf_constrained              # control: the same code twice

On a shared machine two runs of a benchmark minutes apart differ by 10-20 %; this script
imports the reference ``automaton`` (under another package name) next to this checkout's and
alternates them regex by regex (order flipped each time), CPU time, keeping each regex's
fastest run, so slow drifts of the load hit both sides. Workloads, all with the first-space
rule: the processor's probe (``explore(128)``) of the first ``--schemas`` corpus schemas that
``schema_to_regex`` accepts, and ``explore(3000)`` of the four schemas whose key starts are
the slowest first visits (issue #12, parts 11 and 13). Both sides parse with this checkout's
``regex_parser``, and the tables are compared, so only the automaton differs. Run the control
first: differences under its spread are noise.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from corpus_files import CORPUS, Timeout, install_alarm, round_robin  # noqa: E402
from reference_copy import import_reference  # noqa: E402

KEY_STARTS = ["Github_medium/o10505.json", "Snowplow/sp_114_Normalized.json",
              "Snowplow/sp_116_Normalized.json", "Snowplow/sp_120_Normalized.json"]


def _regexes(n: int) -> list:
    import signal

    from hf_constrained import SchemaError, schema_to_regex

    install_alarm()
    out = []
    for path in round_robin(CORPUS):
        if len(out) >= n:
            break
        signal.alarm(5)
        try:
            out.append(schema_to_regex(json.loads(path.read_text()), shared=True))
        except (SchemaError, RecursionError, ValueError, TypeError, KeyError, UnicodeDecodeError, Timeout):
            pass
        finally:
            signal.alarm(0)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", type=Path, required=True, help="the reference copy's hf_constrained folder")
    ap.add_argument("--schemas", type=int, default=150)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    import numpy as np

    import hf_constrained.automaton as ours
    from hf_constrained import schema_to_regex
    from hf_constrained.regex_parser import parse

    ref = import_reference(args.ref, "hfc_ref.automaton")
    probe = [parse(r) for r in _regexes(args.schemas)]
    keys = [parse(schema_to_regex(json.loads((CORPUS / name).read_text()), shared=True)) for name in KEY_STARTS]
    gc.disable()
    clock = time.process_time_ns
    for label, trees, limit in ((f"probe explore(128), {len(probe)} regexes", probe, 128),
                                ("key starts explore(3000), 4 regexes", keys, 3000)):
        best = {"ref": [float("inf")] * len(trees), "ours": [float("inf")] * len(trees)}
        for rep in range(args.repeats):
            for i, tree in enumerate(trees):
                sides = [("ref", ref), ("ours", ours)]
                tables = []
                for name, mod in sides if (rep + i) % 2 else sides[::-1]:
                    dfa = mod.LazyDFA([tree], strip_leading_space=True)
                    t0 = clock()
                    dfa.explore(limit)
                    best[name][i] = min(best[name][i], clock() - t0)
                    tables.append(dfa.table[:dfa.num_states])
                if not np.array_equal(*tables):
                    print(f"{label}: regex {i} gives different automata")
                    return 1
        a, b = sum(best["ref"]), sum(best["ours"])
        print(f"{label}: sum of per-regex minima, ref {a / 1e6:.1f} ms, this checkout {b / 1e6:.1f} ms "
              f"({b / a - 1:+.1%})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
