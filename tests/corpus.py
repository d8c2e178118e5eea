"""The JSONSchemaBench corpus for tests: where it is, and its schemas' regexes.

Tests that use it skip with a clear message when ``../shared`` is missing
(``skip_without_corpus``)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "jsonschemabench"
skip_without_corpus = pytest.mark.skipif(
    not CORPUS.is_dir(), reason=f"JSONSchemaBench corpus not found at {CORPUS} (../shared/data/jsonschemabench)")


def corpus_files(per_dir: int | None = None, step: int = 1, limit: int | None = None) -> list[Path]:
    """Sorted corpus files: the first ``per_dir`` of each folder, then every ``step``-th, at most ``limit``."""
    files = sorted(p for d in sorted(CORPUS.iterdir()) if d.is_dir() for p in sorted(d.glob("*.json"))[:per_dir])
    return files[::step][:limit]


def corpus_regexes(files) -> list[tuple[Path, str]]:
    """``(path, regex)`` for each file the converter takes (``shared=True``, as
    ``JSONProcessor`` makes them; lenient-keyword warnings silenced); refused schemas skipped."""
    from hf_constrained import SchemaError
    from hf_constrained.json_schema import schema_to_regex

    out = []
    for path in files:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out.append((path, schema_to_regex(json.loads(path.read_text(encoding="utf-8")), shared=True)))
        except (SchemaError, ValueError, RecursionError):
            continue
    return out
