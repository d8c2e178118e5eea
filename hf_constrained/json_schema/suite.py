"""JSON-Schema-Test-Suite summary and the ``python -m hf_constrained.json_schema`` command."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Optional

from ..errors import SchemaError


def suite_table(path: Any) -> str:
    """Markdown table: per test-suite file, schemas accepted / refused.

    ``path`` is a directory of JSON-Schema-Test-Suite files (e.g.
    ``.../draft2020-12``; only its top-level ``*.json`` files) or one file.
    A schema that raises anything but :class:`SchemaError` is counted in the
    ``errors`` column (which should stay 0).
    """
    from . import schema_to_regex  # the package's entry point (imported late: no cycle)
    path = Path(path)
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    lines = ["| file | schemas | accepted | refused | errors |",
             "|---|---:|---:|---:|---:|"]
    totals = [0, 0, 0, 0]
    for f in files:
        cases = json.loads(f.read_text(encoding="utf-8"))
        counts = [len(cases), 0, 0, 0]
        for case in cases:
            try:
                schema_to_regex(case["schema"])
                counts[1] += 1
            except SchemaError:
                counts[2] += 1
            except Exception:  # noqa: BLE001 - reported, not hidden
                counts[3] += 1
        totals = [a + b for a, b in zip(totals, counts)]
        lines.append(f"| {f.name} | " + " | ".join(map(str, counts)) + " |")
    lines.append("| **total** | " + " | ".join(f"**{t}**" for t in totals) + " |")
    return "\n".join(lines)


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hf_constrained.json_schema",
        description="Convert a JSON Schema file to a regex, or summarise a "
                    "JSON-Schema-Test-Suite directory.")
    parser.add_argument("schema", nargs="?", help="schema file to convert")
    parser.add_argument("--suite-table", metavar="PATH",
                        help="print the accepted/refused markdown table")
    parser.add_argument("--whitespace", default=None)
    parser.add_argument("--max-recursion-depth", type=int, default=3)
    from . import schema_to_regex  # the package's entry point (imported late: no cycle)
    args = parser.parse_args(argv)
    if args.suite_table:
        print(suite_table(args.suite_table))
        return 0
    if not args.schema:
        parser.error("give a schema file or --suite-table PATH")
    text = Path(args.schema).read_text(encoding="utf-8")
    try:
        print(schema_to_regex(text, whitespace=args.whitespace,
                              max_recursion_depth=args.max_recursion_depth))
    except SchemaError as exc:
        print(f"SchemaError: {exc}", file=sys.stderr)
        return 1
    return 0
