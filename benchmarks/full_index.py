"""Time and memory of a *full* token index (every automaton state) for one pattern.

hf_constrained builds states lazily; this measures the worst case where every
state of the pattern's automaton gets its mask, on the 129k DeepSeek tokenizer.

    python benchmarks/full_index.py            # the issue's JSON schema regex
    python benchmarks/full_index.py --regex '[a-z0-9._%+-]{1,20}@[a-z0-9.-]{1,20}\\.[a-z]{2,6}'
"""

from __future__ import annotations

import argparse
import json
import time
import tracemalloc

SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"},
    "email": {"type": "string", "format": "email"},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3},
    "active": {"type": "boolean"}}, "required": ["name", "age", "active"]}


def json_regex() -> tuple[str, str]:
    try:
        from outlines_core.json_schema import build_regex_from_schema
        return build_regex_from_schema(json.dumps(SCHEMA)), "outlines_core.build_regex_from_schema"
    except ImportError:
        from hf_constrained import schema_to_regex
        return schema_to_regex(SCHEMA), "hf_constrained.schema_to_regex"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--regex", help="pattern (default: the issue's JSON schema regex)")
    args = ap.parse_args()
    from hf_constrained import offline
    from hf_constrained.automaton import LazyDFA
    from hf_constrained.index import TokenIndex
    from hf_constrained.vocabulary import Vocabulary

    pattern, source = (args.regex, "--regex") if args.regex else json_regex()
    tok = offline.deepseek_tokenizer()
    vocab = Vocabulary.from_tokenizer(tok, cache_dir=False)
    def build():
        t0 = time.perf_counter()
        dfa = LazyDFA.from_patterns([pattern])
        dfa.explore(10**6)
        t1 = time.perf_counter()
        index = TokenIndex(dfa, vocab, [tok.eos_token_id])
        for s in range(1, dfa.num_states):
            index.bits(s)
        return dfa, index, t0, t1, time.perf_counter()

    dfa, _, t0, t1, t2 = build()         # timed without tracing
    tracemalloc.start()                  # then once more for the memory
    kept = build()  # noqa: F841 (alive while measured)
    current, peak = tracemalloc.get_traced_memory()
    print(f"pattern: {len(pattern)} chars from {source}")
    print(f"states: {dfa.num_states}; determinise all: {(t1 - t0) * 1e3:.0f} ms; "
          f"masks for all: {(t2 - t1) * 1e3:.0f} ms; total {(t2 - t0) * 1e3:.0f} ms")
    print(f"host memory of automaton + index: {current / 1e6:.1f} MB (peak {peak / 1e6:.1f} MB); "
          f"packed device masks would take {dfa.num_states * ((vocab.size + 7) // 8) / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
