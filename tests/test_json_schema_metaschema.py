"""The meta-schema fast path (hf_constrained.json_schema.metaschema) is sound: whenever
``surely_valid`` says True, jsonschema's own meta-schema validation (with the format
checker, as ``check_schema`` runs it) finds no error. Checked on real-world schemas, on
the JSON-Schema-Test-Suite's schemas and on many mutations of both that break one
keyword's value; and it does answer True for most real-world schemas (or it saves nothing)."""

from __future__ import annotations

import copy
import doctest
import json
import random
from pathlib import Path

import pytest

from hf_constrained.json_schema import SchemaError, metaschema, schema_to_regex
from hf_constrained.json_schema.drafts import _meta_validator, check_metaschema, detect_draft
from hf_constrained.json_schema.metaschema import surely_valid

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
CORPUS = DATA / "jsonschemabench"
SUITE = DATA / "json-schema-test-suite"
DATASETS = ["Github_trivial", "Github_easy", "Github_medium", "Github_hard", "Glaiveai2K",
            "Kubernetes", "Snowplow", "WashingtonPost"]
BAD_VALUES = [None, -1, 1.5, 0, "x", "(", [], ["x", "x"], [1, 1], {}, {"a": 1}, True, False,
              ["string", "nope"], [{}], {"type": 3}, "#/a#b", "not a uri reference\\"]


def _draft(schema) -> str:
    d = detect_draft(schema)[0]
    return "draft2020-12" if d == "lenient" else d


def _jsonschema_valid(schema, draft: str) -> bool:
    return next(_meta_validator(draft, True).iter_errors(schema), None) is None


def _corpus(n: int) -> list:
    if not CORPUS.is_dir():
        pytest.skip(f"no JSONSchemaBench corpus at {CORPUS}")
    out = []
    for d in DATASETS:
        for path in sorted((CORPUS / d).glob("*.json"))[:n]:
            try:
                out.append(json.loads(path.read_text()))
            except (ValueError, UnicodeDecodeError):
                pass
    return out


def _suite() -> list:
    if not SUITE.is_dir():
        pytest.skip(f"no JSON-Schema-Test-Suite at {SUITE}")
    out = []
    for folder, uri in (("draft4", "http://json-schema.org/draft-04/schema#"),
                        ("draft2020-12", "https://json-schema.org/draft/2020-12/schema")):
        for path in sorted((SUITE / folder).rglob("*.json")):
            for case in json.loads(path.read_text()):
                schema = case["schema"]
                out.append(schema)
                if isinstance(schema, dict) and "$schema" not in schema:
                    out.append({"$schema": uri, **schema})
    return out


def _subschema_slots(schema, out: list, path=()) -> list:
    """Paths of every dict inside ``schema`` (subschemas and keyword values alike)."""
    if isinstance(schema, dict):
        out.append(path)
        for k, v in schema.items():
            _subschema_slots(v, out, path + (k,))
    elif isinstance(schema, list):
        for i, v in enumerate(schema):
            _subschema_slots(v, out, path + (i,))
    return out


def _mutations(schema, rng: random.Random, count: int):
    """Copies of ``schema`` with one keyword's value replaced by a (likely) bad one."""
    slots = _subschema_slots(schema, [])
    for _ in range(count):
        path = rng.choice(slots)
        new = copy.deepcopy(schema)
        node = new
        for p in path:
            node = node[p]
        if node and rng.random() < 0.8:
            key = rng.choice(sorted(node, key=str))
        else:
            key = rng.choice(["type", "required", "enum", "minLength", "pattern", "items", "$ref",
                              "exclusiveMinimum", "dependencies", "$id", "multipleOf", "allOf"])
        node[key] = copy.deepcopy(rng.choice(BAD_VALUES))
        yield new


def _assert_sound(schemas, rng, mutations_each: int) -> tuple:
    proven = checked = 0
    for schema in schemas:
        for s in [schema, *_mutations(schema, rng, mutations_each)] if isinstance(schema, dict) else [schema]:
            draft = _draft(s)
            if draft not in ("draft2020-12", "draft4"):
                continue
            checked += 1
            if surely_valid(s, draft):
                proven += 1
                assert _jsonschema_valid(s, draft), json.dumps(s)[:500]
    return proven, checked


def test_sound_on_the_corpus_and_its_mutations():
    rng = random.Random(0)
    schemas = _corpus(25)
    proven, checked = _assert_sound(schemas, rng, mutations_each=12)
    assert checked > 1500 and proven > 0.2 * checked
    # the unmutated real-world schemas: nearly all of them take the fast path
    plain = [s for s in schemas if _draft(s) in ("draft2020-12", "draft4") and _jsonschema_valid(s, _draft(s))]
    assert sum(surely_valid(s, _draft(s)) for s in plain) > 0.9 * len(plain)


def test_sound_on_the_test_suite_and_its_mutations():
    rng = random.Random(1)
    proven, checked = _assert_sound(_suite(), rng, mutations_each=3)
    assert checked > 1000 and proven > 0.2 * checked


@pytest.mark.parametrize("schema, draft", [
    ({"type": "object", "required": []}, "draft4"),                  # minItems 1 in draft 04
    ({"type": "strin"}, "draft2020-12"),
    ({"type": ["string", "string"]}, "draft2020-12"),
    ({"minLength": -1}, "draft2020-12"),
    ({"minLength": 1.0}, "draft4"),                                   # not an int (also not proven)
    ({"pattern": "("}, "draft2020-12"),
    ({"patternProperties": {"(": {}}}, "draft2020-12"),
    ({"exclusiveMinimum": True}, "draft4"),                           # needs "minimum"
    ({"exclusiveMinimum": True}, "draft2020-12"),                     # a number in 2020-12
    ({"items": [{}]}, "draft2020-12"),                                # an array is draft 04's form
    ({"properties": {"a": True}}, "draft4"),                          # no boolean schemas in 04
    ({"enum": ["a", "a"]}, "draft4"),
    ({"$id": "x#y"}, "draft2020-12"),
    ({"$vocabulary": {}}, "draft2020-12"),                            # not covered: not proven
    ({"allOf": []}, "draft2020-12"),
    ({"multipleOf": 0}, "draft2020-12"),
])
def test_not_proven(schema, draft):
    assert not surely_valid(schema, draft)


def test_invalid_schemas_still_raise_with_the_same_message():
    # the fast path only skips jsonschema for valid schemas: errors are jsonschema's
    with pytest.raises(SchemaError, match=r"invalid schema at /properties/a/minLength .*-1"):
        schema_to_regex({"type": "object", "properties": {"a": {"type": "string", "minLength": -1}}})
    with pytest.raises(SchemaError, match=r"invalid schema at /required \(Draft4 meta-schema\)"):
        check_metaschema({"$schema": "http://json-schema.org/draft-04/schema#", "required": []})


def test_other_meta_schemas_turn_it_off(monkeypatch):
    schema = {"type": "string"}
    assert surely_valid(schema, "draft2020-12")
    metaschema._checker.cache_clear()
    monkeypatch.setitem(metaschema._DIGESTS, "draft2020-12", "0" * 64)
    try:
        assert not surely_valid(schema, "draft2020-12")
        assert not surely_valid(schema, "draft7")  # no rules for this draft
    finally:
        metaschema._checker.cache_clear()


def test_doctests():
    assert doctest.testmod(metaschema).failed == 0
