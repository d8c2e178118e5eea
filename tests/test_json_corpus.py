"""schema_to_regex over the JSONSchemaBench corpus (``../shared/data/jsonschemabench``).

* every schema of the folder is converted: at least ``MIN_ACCEPTED`` of them are
  accepted, and no refusal names a keyword that is an annotation for the
  schema's draft (anything jsonschema's validator of that draft does not assert);
* for a deterministic subset (every ``EVERY``-th file of each dataset, sorted by
  name, to keep CI within a few minutes on 2 cores), ``DOCS`` random documents
  drawn from each accepted schema's regex parse and validate with ``jsonschema``
  under the schema's own draft, format checker included.  The full run (all
  accepted schemas, 20 documents each) is ``python benchmarks/json_corpus.py``.

Skipped, with a message, when the folder is missing.
"""

from __future__ import annotations

import re
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import json_corpus  # noqa: E402

from hf_constrained.json_schema import SchemaError, schema_to_regex  # noqa: E402
from hf_constrained.json_schema.drafts import detect_draft, draft_validator  # noqa: E402

CORPUS = json_corpus.DEFAULT_ROOT
MIN_ACCEPTED = 0.88
EVERY = 12
DOCS = 20

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(),
                                reason=f"JSONSchemaBench corpus not found at {CORPUS}")


@pytest.fixture(scope="module")
def results():
    corpus = json_corpus.load_corpus(CORPUS)
    out = []
    for ds, name, schema in corpus:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out.append((ds, name, schema, schema_to_regex(schema), None))
        except SchemaError as exc:
            out.append((ds, name, schema, None, str(exc)))
    return out


def test_corpus_acceptance(results):
    accepted = sum(r[3] is not None for r in results)
    assert len(results) >= 4000
    assert accepted / len(results) >= MIN_ACCEPTED, (accepted, len(results))


_NAMED = re.compile(r"keyword '([^']+)'")


def test_no_refusal_for_an_annotation(results):
    bad = []
    for ds, name, schema, _, err in results:
        if err is None:
            continue
        m = _NAMED.search(err)
        if not m or m.group(1) in ("$ref", "format"):
            continue
        draft, explicit = detect_draft(schema)
        keywords = set(draft_validator(schema).VALIDATORS) if explicit else None
        kw = m.group(1)
        if keywords is not None and kw not in keywords | {
                "exclusiveMinimum", "exclusiveMaximum", "then", "else", "minContains",
                "maxContains", "prefixItems", "dependentRequired", "dependentSchemas"}:
            bad.append((ds, name, err[:150]))
    assert not bad, bad[:10]


def test_corpus_documents_validate(results):
    subset = {(ds, name) for ds, name, _ in json_corpus.load_corpus(CORPUS, EVERY)}
    checked, unsound = 0, []
    for ds, name, schema, regex, _ in results:
        if regex is None or (ds, name) not in subset:
            continue
        checked += 1
        bad = json_corpus.check_documents(schema, regex, DOCS)
        if bad:
            unsound.append((ds, name, bad[0][0][:200], str(bad[0][1])[:200]))
    assert checked >= 300
    assert not unsound, unsound[:5]
