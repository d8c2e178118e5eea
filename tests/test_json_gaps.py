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


# ---------------------------------------------------------------------------
# multipleOf
# ---------------------------------------------------------------------------


def _valid_numbers(schema, texts):
    v = _validator(schema)
    return [t for t in texts if v.is_valid(json.loads(t))]


_INTS = [str(n) for n in range(-1200, 1201)]


@pytest.mark.parametrize("k", [1, 2, 4, 5, 10, 20, 25, 50, 100, 125, 1000, 1.0, 10.0, 25.0])
@pytest.mark.parametrize("bounds", [{}, {"minimum": -317, "maximum": 1000},
                                    {"exclusiveMinimum": 0, "exclusiveMaximum": 600},
                                    {"minimum": 7.5, "maximum": 1100.25}])
@pytest.mark.parametrize("typ", ["integer", "number"])
def test_multiple_of_integral_step_is_exact_on_integers(k, bounds, typ):
    """Integral steps dividing a power of ten: the regex accepts exactly the integers
    that jsonschema accepts (over [-1200, 1200]), and no non-integer text."""
    schema = {"type": typ, "multipleOf": k, **bounds}
    if not _valid_numbers(schema, _INTS):  # (0, 600) has no multiple of 1000
        with pytest.raises(SchemaError, match="no JSON value"):
            schema_to_regex(schema)
        return
    regex = check_samples(schema)
    assert [t for t in _INTS if re.fullmatch(regex, t)] == _valid_numbers(schema, _INTS)
    assert not any(re.fullmatch(regex, t) for t in ("00", "05", "1.0", "1e3", "-"))


@pytest.mark.parametrize("k", [3, 7, 12, 64, 0.3, 1.5])
def test_multiple_of_other_steps_are_enumerated_when_bounded(k):
    schema = {"type": "number", "multipleOf": k, "minimum": -40, "maximum": 61}
    regex = check_samples(schema)
    grid = [str(n) for n in range(-50, 70)] + [f"{n / 10:.1f}" for n in range(-500, 700)]
    got = [t for t in grid if re.fullmatch(regex, t)]
    assert got and set(got) <= set(_valid_numbers(schema, grid))
    if k == int(k):  # integral steps: every integral multiple in range
        assert got == [str(n) for n in range(-40, 62) if n % k == 0]
    with pytest.raises(SchemaError, match=r"keyword 'multipleOf' at /multipleOf: .*minimum and maximum"):
        schema_to_regex({"type": "number", "multipleOf": k})
    with pytest.raises(SchemaError, match=r"'multipleOf' at /multipleOf: the bounds leave .* MAX_ENUMERATED"):
        schema_to_regex({"type": "integer", "multipleOf": k, "minimum": 0, "maximum": 10**6})


_DECIMALS = sorted({f"{n / 1000:.3f}".rstrip("0").rstrip(".") for n in range(-3000, 3001)} - {"-0"})


@pytest.mark.parametrize("k", [0.5, 0.25, 0.1, 0.01, 0.05, 0.001, 0.125])
@pytest.mark.parametrize("bounds", [{}, {"minimum": 0, "maximum": 2.5},
                                    {"exclusiveMinimum": -1.25, "exclusiveMaximum": 1}])
def test_multiple_of_decimal_step_is_the_binary_subset(k, bounds):
    """Decimal steps: every match validates with jsonschema (whose float test rejects
    e.g. 0.07 for 0.01), and the matches are exactly the multiples of the binary unit
    (0.01 -> 0.25) within the bounds."""
    from fractions import Fraction
    from decimal import Decimal

    schema = {"type": "number", "multipleOf": k, **bounds}
    regex = check_samples(schema)
    got = [t for t in _DECIMALS if re.fullmatch(regex, t)]
    assert set(got) <= set(_valid_numbers(schema, _DECIMALS))
    step = Fraction(Decimal(repr(k)))
    unit = step
    while unit.denominator % 5 == 0:
        unit *= 5
    v = _validator({k2: v2 for k2, v2 in schema.items() if k2 != "multipleOf"})
    want = [t for t in _DECIMALS if (Fraction(Decimal(t)) / unit).denominator == 1
            and v.is_valid(json.loads(t))]
    assert got == want
    int_regex = schema_to_regex({**schema, "type": "integer"})
    assert [t for t in _DECIMALS if re.fullmatch(int_regex, t)] == [t for t in want if "." not in t]


def test_multiple_of_large_values_stay_float_exact():
    """Float steps: values beyond 2**53 (where instance / k rounds) are not generated;
    an integer step keeps exact integer arithmetic and stays unbounded."""
    regex = schema_to_regex({"type": "number", "multipleOf": 0.01})
    assert re.fullmatch(regex, str(2**53 // 100)) and not re.fullmatch(regex, str(2**53 // 100 + 1))
    regex = schema_to_regex({"type": "number", "multipleOf": 10.0})
    assert re.fullmatch(regex, str(2**53 - 2)) and not re.fullmatch(regex, str(2**53 + 8))
    regex = schema_to_regex({"type": "integer", "multipleOf": 10})
    assert re.fullmatch(regex, "1" + "0" * 30) and not re.fullmatch(regex, "1" * 30)


def test_multiple_of_combinations_refused_clearly():
    with pytest.raises(SchemaError, match=r"'multipleOf' at /allOf/1/multipleOf: several different"):
        schema_to_regex({"allOf": [{"multipleOf": 5}, {"multipleOf": 2}], "type": "integer"})
    assert schema_to_regex({"allOf": [{"multipleOf": 5}, {"multipleOf": 5}], "type": "integer",
                            "minimum": 0, "maximum": 12}) == "(?:(?:0|5)|10)"


def test_gap_module_doctests():
    import doctest

    from hf_constrained.json_schema import negation, numbers, refs

    for module in (numbers, refs, negation):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0 and result.attempted > 0, module.__name__
