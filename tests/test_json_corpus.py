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
MIN_ACCEPTED = 0.955
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


E2E_SCHEMAS = 30


@pytest.mark.parametrize("mode", [dict(do_sample=True, num_return_sequences=2),
                                  dict(num_beams=2, num_return_sequences=2)],
                         ids=["samples", "beams"])
def test_end_to_end_on_corpus_schemas(results, deepseek, deepseek_model, mode):
    """30 accepted corpus schemas (the smallest regexes, one prompt each, one batch):
    every finished document validates under its own draft."""
    import json

    import torch

    from hf_constrained import JSONProcessor

    accepted = sorted((len(r[3]), r[0], r[1], r[2]) for r in results if r[3] is not None)
    step = max(1, len(accepted) // (4 * E2E_SCHEMAS))
    chosen = [x[3] for x in accepted[:4 * E2E_SCHEMAS:step]][:E2E_SCHEMAS]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        proc = JSONProcessor(chosen, deepseek)
    inputs = deepseek([f"JSON {i}:" for i in range(len(chosen))], return_tensors="pt", padding=True)
    torch.manual_seed(0)
    out = deepseek_model.generate(**inputs, logits_processor=[proc], max_new_tokens=32, **mode)
    finished = 0
    for row in proc.generations(out):
        schema = chosen[row.prompt_index]
        cls = draft_validator(schema)
        v = cls(schema, format_checker=cls.FORMAT_CHECKER)
        for seq in row.sequences:
            if seq.finished:
                finished += 1
                doc = json.loads(seq.text)
                assert not list(v.iter_errors(doc)), (schema, seq.text)
    assert finished >= 2  # the check above must have run
