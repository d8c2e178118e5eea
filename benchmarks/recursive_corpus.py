"""``JSONProcessor(max_recursion_depth=None)`` (the grammar route) over the JSONSchemaBench corpus.

    python benchmarks/recursive_corpus.py [--root DIR] [--every K] [--samples N] [--limit S] [--out TSV]

For each schema file of ``--root`` (default ``../shared/data/jsonschemabench``; ``--every K``
keeps every K-th file of each dataset, sorted by name), does what ``JSONProcessor(schema, tok,
max_recursion_depth=None)`` does before it looks at a tokenizer: converts the schema into rules
(:func:`~hf_constrained.json_schema.recursive.schema_rules`); a schema that needs a grammar (a
recursive ``$ref`` or a free-form value) becomes a :class:`~hf_constrained.grammar.CFG` and a
:class:`~hf_constrained.grammar.GrammarConstraint` over the 256 single bytes, any other schema
goes to the regex route (``schema_to_regex(shared=True)``). Each accepted schema then gets
``--samples`` random documents: for a grammar, a walk over allowed bytes to EOS (any allowed
byte for a while, then closing bytes first: ``test_json_recursive.random_document``); for a
regex, a random match (``test_json_schema.random_match``). Every document must ``json.loads``
and validate with ``jsonschema`` under the schema's own draft (``$schema``; 2020-12 without it),
format checker included: ``invalid`` must stay 0. Refusals are counted by reason; a schema that
takes more than ``--limit`` seconds (conversion, construction and walks together) is counted
as ``timeout``; a walk that does not reach EOS within its step budget is counted apart
(``no end``: the walk's heuristic, not a wrong document). ``--out`` writes one line per schema.
``--first-mask K`` then times ``JSONProcessor(schema, deepseek, max_recursion_depth=None)`` plus
its first call for every K-th grammar-route schema (``json_corpus.first_mask_times``).
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import json_corpus  # noqa: E402  (puts the repository and tests/ on sys.path)

from hf_constrained.errors import ConstraintError, SchemaError  # noqa: E402


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def run_one(schema, samples: int, vocab, seed: int = 0) -> dict:
    """Route, outcome and document counts for one schema (the grammar route's decision)."""
    from hf_constrained.grammar import GrammarConstraint
    from hf_constrained.json_schema import schema_to_regex
    from hf_constrained.json_schema.recursive import rules_to_cfg, schema_rules
    from test_json_recursive import random_document

    out = {"route": None, "reason": None, "docs": 0, "invalid": 0, "no_end": 0, "example": None}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rules = schema_rules(schema)
            if rules.recursive:
                out["route"] = "grammar"
                g = rules_to_cfg(rules)
                out["rules"] = len(g.rules)
                c = GrammarConstraint(g, vocab, eos_token_id=0, cache_dir=False)
                out["shared"] = sum(k.startswith("shared:") for k in rules.rules)
                out["recursive_ref"] = any(k == "" or k.startswith("/") for k in rules.placeholders)
            else:
                out["route"] = "regex"
                regex = schema_to_regex(schema, shared=True)
    except SchemaError as exc:
        out["route"], out["reason"] = "refused", json_corpus.refusal_reason(str(exc))
        return out
    except ConstraintError as exc:                      # grammar limits (GrammarLimitError...)
        out["route"], out["reason"] = "refused", f"{type(exc).__name__}: {str(exc)[:50]}"
        return out
    if out["route"] == "regex":
        bad = json_corpus.check_documents(schema, regex, samples, seed)
        out["docs"], out["invalid"] = samples, len(bad)
        if bad:
            out["example"] = bad[0]
        return out
    cls = json_corpus.draft_validator(schema)
    v = cls(schema, format_checker=cls.FORMAT_CHECKER)
    rng = random.Random(seed)
    for _ in range(samples):
        try:
            text = random_document(c, rng, budget=80, limit=4000)
        except AssertionError as exc:              # a walk too long, or a dead end (a wrong mask)
            if str(exc).startswith("no end"):
                out["no_end"] += 1
                continue
            text, errors = str(exc)[:200], ["the walk reached a state with no allowed byte"]
        else:
            try:
                errors = [e.message for e in v.iter_errors(json.loads(text))]
            except ValueError as exc:
                errors = [f"json: {exc}"]
        out["docs"] += 1
        if errors:
            out["invalid"] += 1
            out["example"] = out["example"] or (text[:200], errors[0][:200])
    return out


def table(rows: dict) -> str:
    lines = ["| dataset | schemas | grammar route | of which `$ref` recursion | regex route | refused | "
             "timeout | documents | invalid | walks without end |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    tot = Counter()
    for ds, c in rows.items():
        tot.update(c)
        lines.append(f"| {ds} | {c['n']} | {c['grammar']} | {c['recursive_ref']} | {c['regex']} | {c['refused']} | "
                     f"{c['timeout']} | {c['docs']} | {c['invalid']} | {c['no_end']} |")
    c = tot
    lines.append(f"| **total** | **{c['n']}** | **{c['grammar']}** | **{c['recursive_ref']}** | **{c['regex']}** | "
                 f"**{c['refused']}** | **{c['timeout']}** | **{c['docs']}** | **{c['invalid']}** | **{c['no_end']}** |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=str(json_corpus.DEFAULT_ROOT))
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--limit", type=float, default=30.0, help="seconds per schema")
    ap.add_argument("--out", help="write one tab-separated line per schema here")
    ap.add_argument("--first-mask", type=int, default=0, metavar="K",
                    help="also time schema -> first mask on DeepSeek 129k for every K-th grammar-route schema")
    args = ap.parse_args(argv)
    corpus = json_corpus.load_corpus(Path(args.root), args.every)
    from test_json_recursive import byte_vocab

    vocab = byte_vocab()
    signal.signal(signal.SIGALRM, _alarm)
    rows: dict = {}
    reasons: Counter = Counter()
    invalid, times, grammars = [], [], []
    log = open(args.out, "w", encoding="utf-8") if args.out else None
    t_all = time.perf_counter()
    for ds, name, schema in corpus:
        c = rows.setdefault(ds, Counter())
        c["n"] += 1
        t0 = time.perf_counter()
        signal.setitimer(signal.ITIMER_REAL, args.limit)
        try:
            r = run_one(schema, args.samples, vocab)
        except _Timeout:
            r = {"route": "timeout", "reason": f"over {args.limit:g} s"}
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        dt = time.perf_counter() - t0
        c[r["route"]] += 1
        if r["route"] == "grammar":
            times.append(dt)
            grammars.append((ds, name, schema, None))
            c["recursive_ref"] += bool(r.get("recursive_ref"))
        if r["route"] == "refused":
            reasons[r["reason"]] += 1
        for k in ("docs", "invalid", "no_end"):
            c[k] += r.get(k, 0)
        if r.get("invalid"):
            invalid.append((ds, name, r["example"]))
        if log:
            extra = {k: r[k] for k in ("rules", "shared", "docs", "invalid", "no_end") if k in r}
            print(ds, name, f"{dt:.2f}", r["route"], r.get("reason") or "", json.dumps(extra), sep="\t",
                  file=log, flush=True)
    print(table(rows))
    print(f"\n{len(corpus)} schemas (every {args.every}), {args.samples} documents each, "
          f"{args.limit:g} s per schema, in {time.perf_counter() - t_all:.0f} s")
    if times:
        times.sort()
        print(f"grammar route, per schema (conversion + construction + walks): median "
              f"{times[len(times) // 2]:.2f} s, max {times[-1]:.1f} s")
    print("refusal reasons: " + ", ".join(f"{k} {v}" for k, v in reasons.most_common(20)))
    if args.first_mask and grammars:
        first = sorted(json_corpus.first_mask_times(grammars[::args.first_mask], max_recursion_depth=None))
        print(f"schema -> first mask (JSONProcessor(max_recursion_depth=None), DeepSeek 129k, disk cache off) "
              f"over {len(first)} grammar-route schemas: p50 {first[len(first) // 2] * 1e3:.0f} ms, "
              f"p90 {first[int(0.9 * len(first))] * 1e3:.0f} ms, max {first[-1] * 1e3:.0f} ms")
    for ds, name, (text, err) in invalid[:20]:
        print(f"INVALID {ds}/{name}: {text[:120]!r}: {err[:200]}")
    return 1 if invalid else 0


if __name__ == "__main__":
    sys.exit(main())
