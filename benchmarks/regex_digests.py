"""Exactness check for converter / parser speed work: digests of what the first
corpus schemas turn into, written once and compared after a change.

    python benchmarks/regex_digests.py --write FILE [--schemas 300]   # before the change
    python benchmarks/regex_digests.py --check FILE                   # after: exit 1 on a difference

``benchmarks/data/regex_digests_7eef3f1.json`` holds the digests of commit 7eef3f1 (before
issue #12's time-to-first-mask work; its automaton code, so a later change to the automaton
itself shows there too).

For each of the first ``--schemas`` files of ``../shared/data/jsonschemabench``
(round-robin over its eight datasets, file order, as ``step_latency.py`` walks them,
refused ones included) it records, for ``shared=True`` and ``shared=False``: the
SHA-256 of ``schema_to_regex``'s output (or of the error's type and message), of the
``regex_parser.parse`` tree's ``repr``, and of the automaton's transition table and
acceptance after a breadth-first ``explore`` of up to 300 states (state ids are
BFS-interned, so equal automata give equal tables).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import signal
import sys
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from corpus_files import CORPUS, Timeout, install_alarm, round_robin  # noqa: E402


def files(n: int, root: Path = CORPUS) -> list:
    """The first ``n`` corpus files, round-robin over the datasets."""
    return list(itertools.islice(round_robin(root, hint=""), n))


def _h(text: str | bytes) -> str:
    return hashlib.sha256(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def digests(path: Path, timeout: int = 180) -> dict:
    """``{"shared": {...}, "plain": {...}}`` of one schema file (see the module docstring)."""
    import numpy as np
    from hf_constrained import schema_to_regex
    from hf_constrained.automaton import LazyDFA
    from hf_constrained.regex_parser import parse

    try:
        schema = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        return {"load": type(exc).__name__}
    out = {}
    for name, shared in (("shared", True), ("plain", False)):
        signal.alarm(timeout)
        try:
            regex = schema_to_regex(schema, shared=shared)
        except Timeout:
            out[name] = {"regex": "timeout"}
            continue
        except Exception as exc:  # noqa: BLE001 (refusals are part of the behaviour)
            out[name] = {"regex": "error " + _h(f"{type(exc).__name__}: {exc}")}
            continue
        finally:
            signal.alarm(0)
        entry = {"regex": _h(regex), "length": len(regex)}
        tree = parse(regex)
        entry["tree"] = _h(repr(tree))
        dfa = LazyDFA([tree])
        try:
            dfa.explore(300)
            n = dfa.num_states
            table = np.ascontiguousarray(dfa.table[:n])
            entry["dfa"] = _h(table.tobytes() + dfa.accepting[:n].tobytes() + dfa.byte_class.tobytes())
        except Exception as exc:  # noqa: BLE001
            entry["dfa"] = "error " + _h(f"{type(exc).__name__}: {exc}")
        out[name] = entry
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schemas", type=int, default=300)
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", type=Path)
    group.add_argument("--check", type=Path)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    install_alarm()
    ref = json.loads(args.check.read_text()) if args.check else None
    names = [f"{p.parent.name}/{p.name}" for p in files(args.schemas, args.corpus)]
    if ref is not None and list(ref) != names:
        print(f"the reference holds other schemas ({len(ref)} vs {len(names)})")
        return 1
    got, bad = {}, []
    for name, path in zip(names, files(args.schemas, args.corpus)):
        got[name] = digests(path)
        if ref is not None and got[name] != ref[name]:
            bad.append(name)
            print(f"DIFFERENT: {name}: {ref[name]} -> {got[name]}")
    if args.write:
        args.write.write_text(json.dumps(got, indent=0))
        print(f"wrote digests of {len(got)} schemas to {args.write}")
        return 0
    accepted = sum(isinstance(g.get("shared"), dict) and "tree" in g["shared"] for g in got.values())
    print(f"{len(got) - len(bad)} of {len(got)} schemas identical ({accepted} accepted with shared=True)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
