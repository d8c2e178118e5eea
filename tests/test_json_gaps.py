"""Issue #11 gaps: ``$ref`` into dropped keywords, ``multipleOf``, more formats, ``oneOf``.

Every accepted schema is checked against an independent oracle: documents drawn
at random from the produced regex must validate with ``jsonschema`` (format
checker on, the schema's own draft), and where the regex claims to be exact,
enumeration over a range compares it value by value with ``jsonschema``.
"""

from __future__ import annotations

import json
import random
import re
import warnings

import pytest
from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.validators import validator_for

from hf_constrained.json_schema import SchemaError, schema_to_regex
from test_json_schema import random_match


def _validator(schema):
    cls = validator_for(schema, default=Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def check_samples(schema, n: int = 60, seed: int = 0, **kwargs) -> str:
    """Convert ``schema``; ``n`` random documents of its regex must validate."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        regex = schema_to_regex(schema, **kwargs)
    v = _validator(schema)
    rng = random.Random(seed)
    for _ in range(n):
        text = random_match(regex, rng)
        doc = json.loads(text)
        errors = [e.message for e in v.iter_errors(doc)]
        assert not errors, (text, errors[:1])
    return regex


def matches(regex: str, value) -> bool:
    return re.fullmatch(regex, json.dumps(value, separators=(",", ":"))) is not None


# ---------------------------------------------------------------------------
# $ref into keywords that are annotations (dropped by the canonical rewrite)
# ---------------------------------------------------------------------------


def test_ref_into_unknown_keyword_resolves_like_jsonschema():
    schema = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "object", "required": ["team", "res"],
        "properties": {"team": {"$ref": "#/team"},
                       "res": {"$ref": "#/resourceDefinitions/storage"}},
        "team": {"type": "integer", "minimum": 1, "maximum": 3, "javaType": "x"},
        "resourceDefinitions": {"storage": {"type": "object", "required": ["kind"],
                                            "properties": {"kind": {"enum": ["a", "b"]},
                                                           "n": {"$ref": "#/team"}}}},
    }
    regex = check_samples(schema, whitespace="")
    assert matches(regex, {"team": 2, "res": {"kind": "a"}})
    assert not matches(regex, {"team": 4, "res": {"kind": "a"}})
    assert not matches(regex, {"team": 2, "res": {"kind": "c"}})
    assert _validator(schema).is_valid({"team": 2, "res": {"kind": "b", "n": 3}})
    assert matches(regex, {"team": 2, "res": {"kind": "b", "n": 3}})


def test_ref_into_definition_subkeyword_and_escapes():
    schema = {"definitions": {"acts": {"type": "object", "one/commit": {"type": "boolean"}}},
              "properties": {"x": {"$ref": "#/definitions/acts/one~1commit"}},
              "required": ["x"], "additionalProperties": False}
    regex = check_samples(schema, whitespace="")
    assert matches(regex, {"x": True}) and matches(regex, {"x": False})
    assert not matches(regex, {"x": 1})


def test_ref_that_resolves_nowhere_is_refused():
    schema = {"properties": {"x": {"$ref": "#/nowhere"}}}
    with pytest.raises(SchemaError, match=r"'\$ref' at /properties/x/\$ref.*does not resolve"):
        schema_to_regex(schema)
    with pytest.raises(Exception):  # the validator cannot resolve it either
        _validator(schema).is_valid({"x": 1})
