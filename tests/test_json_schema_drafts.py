"""Drafts 04 to 2020-12 and unknown keywords (hf_constrained.json_schema.drafts).

Every accepted schema here is checked by sampling documents from its regex and
validating them with the jsonschema validator of the schema's *own* draft.
"""

from __future__ import annotations

import json
import random
import re
import sys
import warnings
from pathlib import Path

import pytest
from jsonschema import Draft7Validator, Draft202012Validator
from jsonschema.validators import validator_for

from hf_constrained.json_schema import SchemaError, schema_to_regex
from hf_constrained.json_schema.drafts import canonical, detect_draft, draft_validator, near_miss

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_json_schema import random_match, serialisations  # noqa: E402

D4 = "http://json-schema.org/draft-04/schema#"
D6 = "http://json-schema.org/draft-06/schema#"
D7 = "http://json-schema.org/draft-07/schema#"
D2019 = "https://json-schema.org/draft/2019-09/schema"


def own_validator(schema):
    cls = draft_validator(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def samples(schema, n: int = 40, seed: int = 0, **kwargs) -> list:
    """Random documents of the schema's regex, each validated under its own draft."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        regex = schema_to_regex(schema, **kwargs)
    v = own_validator(schema)
    rng = random.Random(seed)
    docs = []
    for _ in range(n):
        text = random_match(regex, rng)
        doc = json.loads(text)
        errors = [e.message for e in v.iter_errors(doc)]
        assert not errors, (text, errors)
        docs.append(doc)
    return docs


def accepts(schema, value, **kwargs) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        regex = schema_to_regex(schema, whitespace="", **kwargs)
    return any(re.fullmatch(regex, s) for s in serialisations(value))


def test_detect_draft():
    assert detect_draft({"$schema": D4}) == ("draft4", True)
    assert detect_draft({"$schema": "http://json-schema.org/draft-04/schema"}) == ("draft4", True)
    assert detect_draft({"$schema": D2019}) == ("draft2019-09", True)
    assert detect_draft({"$schema": "http://example.com/custom"}) == ("lenient", False)
    assert detect_draft(True) == ("lenient", False)
    assert validator_for({"$schema": D6}) is draft_validator({"$schema": D6})
    # Lenient: the newest draft whose meta-schema accepts the schema.
    assert draft_validator({"items": [{}]}).__name__ == "Draft201909Validator"
    assert draft_validator({"minimum": 1, "exclusiveMinimum": True}).__name__ == "Draft4Validator"


@pytest.mark.parametrize("schema", [
    {"type": "integer", "javaType": "Long", "x-kubernetes-group-version-kind": [{}]},
    {"type": "object", "self": {"vendor": "x"}, "properties": {"a": {"type": "string",
                                                                      "_format": "date"}}},
    {"type": "string", "contentEncoding": "base64", "contentMediaType": "image/png"},
    {"type": "array", "items": {"type": "boolean"}, "_uniqueItems": True, "links": []},
    {"$schema": D4, "type": "string", "const": "only draft 06+ asserts const"},
    {"$schema": D7, "type": "object", "unevaluatedProperties": False},
])
def test_unknown_keywords_are_annotations(schema):
    samples(schema)


def test_unknown_keyword_changes_nothing():
    assert (schema_to_regex({"type": "integer", "minimum": 3, "foo": {"type": "string"}})
            == schema_to_regex({"type": "integer", "minimum": 3}))
    # draft 04 has no `const`: any string validates, so any string is generated
    assert accepts({"$schema": D4, "type": "string", "const": "a"}, "b")
    assert not accepts({"type": "string", "const": "a"}, "b")


@pytest.mark.parametrize("schema,keyword,pointer", [
    ({"type": "integer", "javaType": "Long"}, "javaType", "/javaType"),
    ({"properties": {"a": {"_format": "date"}}}, "_format", "/properties/a/_format"),
    ({"$schema": D4, "type": "string", "const": "a"}, "const", "/const"),
])
def test_strict_refuses_unknown_keywords(schema, keyword, pointer):
    with pytest.raises(SchemaError) as info:
        schema_to_regex(schema, strict=True)
    assert f"{keyword!r} at {pointer}" in str(info.value)
    assert "strict=False" in str(info.value)


def test_strict_refuses_unknown_formats_and_lenient_ignores_them():
    with pytest.raises(SchemaError, match="format 'int64' at /format"):
        schema_to_regex({"type": "string", "format": "int64"}, strict=True)
    samples({"type": "string", "format": "int64", "maxLength": 3})
    # draft 04's checker does not assert `date`: it is an annotation there
    assert accepts({"$schema": D4, "type": "string", "format": "date"}, "not a date")


def test_strict_keeps_annotations_and_real_keywords():
    schema = {"$schema": D7, "title": "t", "description": "d", "default": 1, "examples": [1],
              "$comment": "c", "readOnly": True, "definitions": {}, "$id": "urn:x",
              "x-vendor": 1, "type": "integer"}
    assert schema_to_regex(schema, strict=True) == schema_to_regex({"type": "integer"})


def test_near_miss_warns_once_per_keyword_with_pointer():
    schema = {"type": "object", "properties": {
        "a": {"type": "string", "minlength": 3},
        "b": {"type": "string", "minlength": 4},
        "c": {"type": "object", "additonalProperties": False}}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        schema_to_regex(schema)
    messages = sorted(str(w.message) for w in caught)
    assert len(messages) == 2, messages
    assert "'additonalProperties' at /properties/c/additonalProperties" in messages[0]
    assert "'additionalProperties'" in messages[0]
    assert "'minlength' at /properties/a/minlength (and 1 more places)" in messages[1]
    assert "'minLength'" in messages[1]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        schema_to_regex({"type": "string", "title": "x", "javaType": "y", "name": "z"})


def test_near_miss_warning_names_the_callers_line(local_tok):
    """The warning points at the user's call (this file), not at a line inside the package,
    whichever entry point and however many package frames lie between."""
    from hf_constrained import JSONProcessor

    schema = {"type": "string", "minlength": 3}
    for call in (lambda: schema_to_regex(schema),
                 lambda: JSONProcessor(schema, local_tok, cache_dir=False),
                 lambda: JSONProcessor(schema, local_tok, cache_dir=False, max_recursion_depth=None)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        near = [w for w in caught if "minlength" in str(w.message)]
        assert len(near) == 1, [str(w.message) for w in caught]
        assert near[0].filename == __file__, near[0].filename


def test_near_miss():
    kws = {"minLength", "maxLength", "additionalProperties", "enum", "type", "not", "format"}
    assert near_miss("MinLength", kws) == "minLength"
    assert near_miss("maxLenght", kws) == "maxLength"
    assert near_miss("_format", kws) == "format"
    assert near_miss("additionalPropertis", kws) == "additionalProperties"
    for word in ("name", "note", "types_", "id", "formats_x", "example"):
        assert near_miss(word, kws) is None, word


# -- draft 04 -------------------------------------------------------------------

def test_draft4_boolean_exclusive_bounds():
    schema = {"$schema": D4, "type": "integer", "minimum": 0, "exclusiveMinimum": True,
              "maximum": 5, "exclusiveMaximum": True}
    docs = samples(schema)
    assert set(docs) <= {1, 2, 3, 4}
    for n in range(-2, 8):
        assert accepts(schema, n) == (0 < n < 5), n
    schema = {"$schema": D4, "type": "number", "minimum": 0, "exclusiveMinimum": False}
    assert accepts(schema, 0) and not accepts(schema, -1)
    samples({"$schema": D4, "type": "number", "minimum": 0.5, "exclusiveMinimum": True})
    # lenient reading: the boolean form is draft 04's
    assert canonical({"maximum": 3, "exclusiveMaximum": True}) == {"exclusiveMaximum": 3}


def test_draft4_integer_excludes_integral_floats():
    # draft 04: 1.0 is not an integer, so enum/const never write it with a fraction
    schema = {"$schema": D4, "type": "integer", "enum": [1, 2.0]}
    assert sorted(samples(schema)) and not accepts(schema, 1.0) and accepts(schema, 2)
    assert accepts({"type": "integer", "enum": [1]}, 1.0)  # 2020-12: 1.0 is an integer


def test_draft4_id_is_the_base_uri():
    schema = {"$schema": D4, "id": "http://example.com/root.json",
              "definitions": {"a": {"id": "#item", "type": "integer", "maximum": 3}},
              "properties": {
                  "x": {"$ref": "#item"},
                  "y": {"id": "http://example.com/other.json", "type": "object",
                        "definitions": {"b": {"type": "boolean"}},
                        "properties": {"z": {"$ref": "#/definitions/b"}},
                        "required": ["z"]}},
              "required": ["x", "y"], "type": "object"}
    docs = samples(schema)
    assert all(isinstance(d["y"]["z"], bool) for d in docs)
    # a relative id that lands on a resource without the referenced fragment: refused
    with pytest.raises(SchemaError, match=r"'\$ref' at /properties/y/properties/z/\$ref"):
        schema_to_regex({"$schema": D4, "properties": {"y": {
            "id": "/properties/y", "properties": {"z": {"$ref": "#/definitions/b"}}}},
            "definitions": {"b": {}}})
    # outside draft 04, `id` is just an annotation
    samples({"$schema": D7, "properties": {"y": {"id": "/properties/y", "properties": {
        "z": {"$ref": "#/definitions/b"}}}}, "definitions": {"b": {"type": "null"}}})


# -- arrays ---------------------------------------------------------------------

@pytest.mark.parametrize("draft", [D4, D6, D7, D2019, None])
def test_items_array_and_additional_items(draft):
    schema = {"type": "array", "items": [{"type": "integer"}, {"type": "string"}],
              "additionalItems": {"type": "boolean"}}
    if draft:
        schema["$schema"] = draft
    samples(schema)
    assert accepts(schema, [1, "a", True, False]) and accepts(schema, [1])
    assert not accepts(schema, [1, "a", 3]) and not accepts(schema, ["a"])
    closed = dict(schema, additionalItems=False)
    assert accepts(closed, [1, "a"]) and not accepts(closed, [1, "a", True])
    # additionalItems next to a schema `items` asserts nothing
    open_ = dict(schema, items={"type": "integer"})
    assert accepts(open_, [1, 2, 3]) and not accepts(open_, [True])


# -- $ref siblings --------------------------------------------------------------

def test_ref_siblings_per_draft():
    defs = {"definitions": {"s": {"type": "string"}}}
    for draft in (D4, D6, D7):  # siblings of $ref are ignored
        schema = dict(defs, **{"$schema": draft, "$ref": "#/definitions/s", "maxLength": 2})
        assert accepts(schema, "abcdef"), draft
        samples(schema)
    for draft in (D2019, None):  # siblings apply
        schema = dict(defs, **{"$ref": "#/definitions/s", "maxLength": 2})
        if draft:
            schema["$schema"] = draft
        assert accepts(schema, "ab") and not accepts(schema, "abcdef"), draft
        samples(schema)


# -- dependencies ---------------------------------------------------------------

@pytest.mark.parametrize("draft", [D4, D7, None])
def test_dependencies_both_forms(draft):
    schema = {"type": "object",
              "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
                             "c": {"type": "string"}},
              "dependencies": {"a": ["b"], "c": {"required": ["a"]}}}
    if draft:
        schema["$schema"] = draft
    docs = samples(schema, n=80)
    assert any("a" in d for d in docs) and any("a" not in d for d in docs)
    # lenient reading honours `dependencies`, as drafts 04-07 do
    v = own_validator(schema) if draft else Draft7Validator(schema)
    for value in ({}, {"b": 1}, {"a": 1}, {"a": 1, "b": 2}, {"c": "x"}, {"a": 1, "b": 1, "c": "x"}):
        assert accepts(schema, value) == v.is_valid(value), value


def test_dependencies_ignored_from_2019_09():
    schema = {"$schema": D2019, "type": "object", "properties": {"a": {}, "b": {}},
              "dependencies": {"a": ["b"]}}
    assert accepts(schema, {"a": 1})


def test_embedded_resource_refs_resolve_against_their_own_id():
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "urn:root",
              "$defs": {"list": {"$id": "http://example.com/list.json", "type": "array",
                                 "maxItems": 2, "items": {"$ref": "#/$defs/leaf"},
                                 "$defs": {"leaf": {"type": "integer"}}},
                        "leaf": {"type": "string"}},
              "$ref": "http://example.com/list.json"}
    docs = samples(schema)
    assert any(docs) and all(isinstance(x, int) for d in docs for x in d)
    # and "#" inside a resource is that resource
    nested = {"$defs": {"a": {"$id": "a.json", "type": "array", "items": {"$ref": "#"}}},
              "$ref": "a.json", "$id": "http://example.com/root.json"}
    samples(nested)


def test_dependent_required_and_schemas_exhaustive():
    import itertools

    schema = {"type": "object",
              "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
                             "c": {"type": "integer"}},
              "dependentRequired": {"a": ["b"], "b": ["c"]},
              "dependentSchemas": {"c": {"properties": {"a": {"maximum": 0}}}}}
    samples(schema, n=80)
    v = Draft202012Validator(schema)
    names = ["a", "b", "c"]
    for k in range(4):
        for keys in itertools.combinations(names, k):
            for vals in itertools.product([-1, 1], repeat=k):
                value = dict(zip(keys, vals))
                assert accepts(schema, value) == v.is_valid(value), value
    with pytest.raises(SchemaError, match="invalid schema at /dependentRequired/a"):
        schema_to_regex({"dependentRequired": {"a": "b"}, "$schema": D2019})


def test_json_processor_passes_strict(local_tok):
    from hf_constrained import JSONProcessor

    schema = {"type": "integer", "maximum": 3, "javaType": "Long"}
    JSONProcessor(schema, local_tok)
    with pytest.raises(SchemaError, match="'javaType' at /javaType"):
        JSONProcessor(schema, local_tok, strict=True)


def test_edit_distance_cut_off_is_exact():
    """The distance stops early once two rows reach the cap (issue #12, part 9): the same
    values as the full optimal-string-alignment table, for near and far words."""
    import random

    from hf_constrained.json_schema.drafts import _edit_distance

    def full(a, b):
        d = [[max(i, j) if min(i, j) == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
        for i in range(1, len(a) + 1):
            for j in range(1, len(b) + 1):
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
                if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                    d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
        return d[-1][-1]

    rng = random.Random(5)
    words = ["additionalProperties", "minLength", "maxLength", "patternProperties", "items", "$ref"]
    for _ in range(1500):
        a = rng.choice(words) if rng.random() < 0.5 else "".join(rng.choice("abcmin") for _ in range(rng.randint(0, 12)))
        b = list(rng.choice(words))
        for _ in range(rng.randint(0, 4)):  # a few random edits
            k = rng.randrange(len(b) + 1)
            op = rng.randrange(3)
            if op == 0:
                b.insert(k, rng.choice("abcmin"))
            elif b and k < len(b):
                b[k:k + 1] = [] if op == 1 else [rng.choice("abcmin")]
        b = "".join(b)
        for cap in (1, 2, 3, 5):
            assert _edit_distance(a, b, cap) == min(full(a, b), cap), (a, b, cap)


_SUITE = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "json-schema-test-suite"


@pytest.mark.skipif(not _SUITE.is_dir(), reason=f"JSON-Schema-Test-Suite not found at {_SUITE}")
def test_nested_is_the_walk_without_pointers():
    """``_nested`` (the converter's and keep_ref_targets' whole-schema loop, issue #12 part 9)
    gives the same subschema objects in the same order as the generator walk."""
    from hf_constrained.json_schema.schemas import _nested, _walk

    n = 0
    for path in sorted(_SUITE.glob("draft*/*.json")):
        for case in json.loads(path.read_text(encoding="utf-8")):
            got, want = _nested(case["schema"]), [s for s, _ in _walk(case["schema"])]
            assert len(got) == len(want) and all(a is b for a, b in zip(got, want)), (path, case["description"])
            n += len(got)
    assert n > 3000
