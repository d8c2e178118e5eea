"""The converter's resource index skipped when the canonical rewrite saw no ``$id``, anchor or
``unevaluated*`` keyword (issue #12, part 21): the shortcut must give what the walk gives."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from hf_constrained import SchemaError, schema_to_regex
from hf_constrained.json_schema.converter import _Converter
from hf_constrained.json_schema.drafts import _canonical, canonical

_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
_SUITE = _DATA / "json-schema-test-suite"
_CORPUS = _DATA / "jsonschemabench"

# Each has something the index must see, at a place only the walk finds.
_INDEXED = [
    {"properties": {"a": {"$id": "http://x.test/a.json", "type": "integer"}}},
    {"items": {"$anchor": "item", "type": "string"}},
    {"$defs": {"d": {"$dynamicAnchor": "meta"}}},
    {"anyOf": [{"unevaluatedProperties": False}]},
    {"allOf": [{"properties": {"b": True}, "unevaluatedItems": False}]},
    {"$schema": "http://json-schema.org/draft-04/schema#", "properties": {"a": {"id": "a.json"}}},
    {"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"f": {"$id": "#foo"}}},
    {"dependencies": {"a": {"properties": {"b": {"$id": "b.json"}}}}},
    {"properties": {"t": {"$ref": "#/team"}}, "team": {"not": {"$anchor": "t"}}},  # keep_ref_targets
]


def _full(canon):
    """The index as the walk builds it."""
    return _Converter(canon, "", 3)


def _trivial(conv) -> bool:
    return (conv.resources.keys() == {""} and not conv.anchors and not conv.has_unevaluated
            and set(conv.base_of.values()) <= {""} and conv.one_resource)


@pytest.mark.parametrize("schema", _INDEXED)
def test_what_the_index_needs_is_seen(schema):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        canon, indexed = _canonical(schema, False)
    assert indexed, "an $id/anchor/unevaluated* subschema must keep the resource index walk"
    assert not _trivial(_full(canon))


def _schemas():
    if _SUITE.is_dir():
        for path in sorted(_SUITE.glob("draft*/*.json")):
            for case in json.loads(path.read_text(encoding="utf-8")):
                yield case["schema"]
    if _CORPUS.is_dir():
        for path in sorted(_CORPUS.glob("*/*.json"))[::8]:
            try:
                yield json.loads(path.read_text(encoding="utf-8"))
            except ValueError:
                continue


@pytest.mark.skipif(not _SUITE.is_dir(), reason=f"JSON-Schema-Test-Suite not found at {_SUITE}")
def test_shortcut_index_is_the_walked_one():
    """Whenever the rewrite says "not indexed", the walk finds one resource, no anchors and no
    unevaluated*: the shortcut's answers (and ``_base`` of every pointer) are the walk's."""
    plain = indexed = 0
    for schema in _schemas():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                canon, flag = _canonical(schema, False)
            except (SchemaError, RecursionError):
                continue
        full = _full(canon)
        if flag:
            indexed += 1
            continue
        plain += 1
        assert _trivial(full), schema
        fast = _Converter(canon, "", 3, indexed=False)
        assert (fast.resources, fast.anchors, fast.one_resource, fast.has_unevaluated) == (
            full.resources, full.anchors, full.one_resource, full.has_unevaluated)
        for ptr in full.base_of:
            assert fast._base(ptr) == full._base(ptr) == ""
    assert plain > 100 and indexed > 20, (plain, indexed)


def test_plain_schema_skips_the_walk(monkeypatch):
    """The shortcut is taken: no $id/anchor/unevaluated* -> no index walk, same regex."""
    schema = {"type": "object", "properties": {"a": {"$ref": "#/$defs/n"}}, "$defs": {"n": {"type": "integer"}}}
    want = schema_to_regex(schema)

    def walk(self):
        raise AssertionError("resource index walked")

    monkeypatch.setattr(_Converter, "_index_resources", walk)
    assert schema_to_regex(schema) == want
    with pytest.raises(AssertionError, match="walked"):  # an $id still walks
        schema_to_regex({"properties": {"a": {"$id": "a.json", "type": "integer"}}})


def test_nested_id_still_resolves():
    schema = {"type": "object", "required": ["a"],
              "properties": {"a": {"$ref": "http://x.test/n.json"}},
              "$defs": {"n": {"$id": "http://x.test/n.json", "type": "boolean"}}}
    assert schema_to_regex(schema, whitespace="") == '\\{"a":(?:true|false)\\}'
    assert canonical(schema) == _canonical(schema, False)[0]
