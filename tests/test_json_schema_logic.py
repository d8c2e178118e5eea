"""not / oneOf / if-then-else through schema-level negation (json_schema/negation.py).

Soundness is checked exhaustively over a small universe of JSON values: every
value that some compact serialisation of which matches the regex is valid for
jsonschema.  Completeness is checked where the negation is exact.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from hf_constrained.json_schema import SchemaError, schema_to_regex
from hf_constrained.json_schema.negation import negate

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_json_schema import check_samples, serialisations  # noqa: E402

UNIVERSE = [None, True, False, 0, 1, 2, 3, -1, 1.5, 2.5, "", "a", "ab", "abc", [], [1], [1, 2],
            {}, {"a": 1}, {"b": 1}, {"a": 1, "b": 2}, {"a": "x"}, {"a": "x", "b": "y"},
            {"c": 1}]


def language(schema) -> list:
    regex = schema_to_regex(schema, whitespace="")
    return [v for v in UNIVERSE if any(re.fullmatch(regex, s) for s in serialisations(v))]


def assert_sound(schema, complete: bool = False):
    check_samples(schema, n=40)
    v = Draft202012Validator(schema)
    got = language(schema)
    wrong = [x for x in got if not v.is_valid(x)]
    assert not wrong, wrong
    if complete:
        missing = [x for x in UNIVERSE if v.is_valid(x) and x not in got]
        assert not missing, missing
    return got


NEGATABLE = [
    {"type": "string"}, {"type": ["integer", "null"]}, {"type": "number"},
    {"required": ["a"]}, {"type": "object", "required": ["a", "b"]},
    {"properties": {"a": {"type": "integer"}}}, {"minimum": 2}, {"exclusiveMaximum": 1},
    {"minLength": 2}, {"maxLength": 1}, {"minItems": 1}, {"maxItems": 1},
    {"const": 1}, {"enum": ["a", None]}, {"allOf": [{"type": "string"}, {"maxLength": 1}]},
    {"anyOf": [{"type": "string"}, {"type": "null"}]}, {"not": {"type": "boolean"}},
    {"pattern": "^a"}, {"type": "object", "additionalProperties": False},
]


@pytest.mark.parametrize("schema", NEGATABLE)
def test_negation_is_inside_the_complement(schema):
    neg = negate(schema)
    if neg is False:
        return
    v, nv = Draft202012Validator(schema), Draft202012Validator(neg)
    for x in UNIVERSE:
        assert not (v.is_valid(x) and nv.is_valid(x)), (x, neg)


@pytest.mark.parametrize("schema", [
    {"not": {"type": "string"}}, {"not": {"minimum": 2}}, {"not": {"required": ["a"]}},
    {"not": {"anyOf": [{"type": "string"}, {"type": "array"}]}},
    {"not": {"not": {"type": "integer"}}},
])
def test_not(schema):
    assert_sound(schema)


@pytest.mark.parametrize("schema", [
    {"oneOf": [{"required": ["a"]}, {"required": ["b"]}], "type": "object",
     "properties": {"a": {}, "b": {}}},
    {"oneOf": [{"type": "integer"}, {"minimum": 2}]},
    {"oneOf": [{"type": "string"}, {"maxLength": 2}]},
    {"oneOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
               {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]}]},
    {"oneOf": [{"properties": {"a": {"type": "string"}}}, {"properties": {"a": {"type": "integer"}}}],
     "type": "object"},
])
def test_overlapping_one_of_is_exactly_one(schema):
    got = assert_sound(schema)
    assert got


def test_one_of_exactly_one_required_is_complete():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
              "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}
    got = assert_sound(schema)
    assert {"a": 1} in got and {"b": 1} in got and {"a": 1, "b": 2} not in got


def test_one_of_refusal_when_nothing_is_left():
    with pytest.raises(SchemaError, match="'oneOf' at /oneOf"):
        schema_to_regex({"oneOf": [{"type": "integer"}, {"type": "number"}]})
    with pytest.raises(SchemaError, match="'oneOf' at /properties/x/oneOf"):
        schema_to_regex({"type": "object", "properties": {"x": {"oneOf": [{}, True]}},
                         "required": ["x"]})


@pytest.mark.parametrize("schema", [
    {"if": {"type": "integer"}, "then": {"minimum": 1}, "else": {"type": "string"}},
    {"if": {"required": ["a"]}, "then": {"required": ["b"]}, "type": "object",
     "properties": {"a": {}, "b": {}}},
    {"if": {"properties": {"a": {"const": 1}}, "required": ["a"]},
     "then": {"required": ["b"]}, "else": {"properties": {"b": False}}, "type": "object",
     "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
    {"if": {"minLength": 2}, "else": {"const": "a"}, "type": "string"},
])
def test_if_then_else(schema):
    assert assert_sound(schema)


@pytest.mark.parametrize("schema", [
    {"type": "object", "minProperties": 1},
    {"type": "object", "minProperties": 1, "properties": {"a": {}, "b": {"type": "integer"}}},
    {"type": "object", "minProperties": 1, "properties": {"a": {}},
     "additionalProperties": {"type": "string"}},
])
def test_min_properties_one_is_exact(schema):
    got = assert_sound(schema)
    assert {} not in got and any(isinstance(x, dict) for x in got)


def test_nested_discriminated_union_is_separated():
    """pydantic's nested discriminated union: a oneOf whose branch is itself a bare oneOf (all of
    its branches with kind "k") next to a branch with kind "o". Each inner branch is disjoint from
    the outer sibling, so the outer oneOf needs no negation (it was refused at /oneOf/0/oneOf)."""
    defs = {"I1": {"type": "object", "properties": {"sub": {"const": "s1"}, "kind": {"const": "k"}},
                   "required": ["sub", "kind"]},
            "I2": {"type": "object", "properties": {"sub": {"const": "s2"}, "kind": {"const": "k"},
                                                    "n": {"type": "integer"}},
                   "required": ["sub", "kind"]},
            "O": {"type": "object", "properties": {"kind": {"const": "o"}, "b": {"type": "string"}},
                  "required": ["kind"]}}
    schema = {"$defs": defs, "oneOf": [
        {"discriminator": {"propertyName": "sub"}, "oneOf": [{"$ref": "#/$defs/I1"}, {"$ref": "#/$defs/I2"}]},
        {"$ref": "#/$defs/O"}]}
    regex = check_samples(schema, n=40)
    for doc in ('{"sub":"s1","kind":"k"}', '{"sub":"s2","kind":"k","n":3}', '{"kind":"o","b":"x"}'):
        assert re.fullmatch(regex, doc), doc
    # a bare inner union that overlaps the outer sibling still has to be negated or refused
    assert_sound({"oneOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}, {"minimum": 2}]})
    pydantic = pytest.importorskip("pydantic")
    from typing import Annotated, Literal, Union

    class Inner1(pydantic.BaseModel):
        sub: Literal["s1"]
        kind: Literal["k"]

    class Inner2(pydantic.BaseModel):
        sub: Literal["s2"]
        kind: Literal["k"]

    class Other(pydantic.BaseModel):
        kind: Literal["o"]

    class Owner(pydantic.BaseModel):
        v: Union[Annotated[Union[Inner1, Inner2], pydantic.Field(discriminator="sub")], Other] = \
            pydantic.Field(discriminator="kind")

    regex = check_samples(Owner, n=20)
    assert re.fullmatch(regex, '{"v":{"sub":"s2","kind":"k"}}')
