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


@pytest.mark.parametrize("draft", [None, "http://json-schema.org/draft-04/schema#"])
def test_ref_target_outside_the_keywords_is_checked_against_the_meta_schema(draft):
    """The meta-schema never reaches a subschema kept under a keyword of the document's own:
    an invalid one reached by a $ref ("allOf": null) escaped as a TypeError from the
    converter (jsonschema itself fails on it with an AttributeError or TypeError)."""
    for bad, word in [({"type": "string", "allOf": None}, "allOf"), ({"minimum": "x"}, "minimum"),
                      ({"properties": 1.5}, "properties")]:
        schema = {"properties": {"t": {"$ref": "#/mine/t"}}, "mine": {"t": bad}}
        if draft:
            schema["$schema"] = draft
        with pytest.raises(SchemaError, match=f"/mine/t/{word}.*read for the \\$ref target /mine/t"):
            schema_to_regex(schema)
    ok = {"properties": {"t": {"$ref": "#/mine/t"}}, "mine": {"t": {"type": "integer"}}, "required": ["t"]}
    assert matches(check_samples(ok, whitespace=""), {"t": 3})


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


@pytest.mark.parametrize("k", [1e-20, 1e-22, 1e-25, 1e-100, 1e-300])
def test_multiple_of_tiny_decimal_step_lists_its_few_exact_values(k):
    """A tiny decimal step (unit 2**-d) leaves few multiples within the float-exact
    range: they are listed, not the 2**d binary residues (1e-100 raised OverflowError,
    1e-28 took minutes)."""
    import time

    t0 = time.perf_counter()
    regex = check_samples({"type": "number", "multipleOf": k})
    assert time.perf_counter() - t0 < 5
    assert re.fullmatch(regex, "0")
    regex = check_samples({"type": "number", "multipleOf": k, "minimum": 0, "maximum": 1})
    assert re.fullmatch(regex, "0") and not re.fullmatch(regex, "-0.5")


def test_multiple_of_combinations_refused_clearly():
    with pytest.raises(SchemaError, match=r"'multipleOf' at /allOf/1/multipleOf: several different"):
        schema_to_regex({"allOf": [{"multipleOf": 5}, {"multipleOf": 2}], "type": "integer"})
    assert schema_to_regex({"allOf": [{"multipleOf": 5}, {"multipleOf": 5}], "type": "integer",
                            "minimum": 0, "maximum": 12}) == "(?:(?:0|5)|10)"


def test_gap_module_doctests():
    import doctest

    from hf_constrained.json_schema import formats, negation, numbers, refs

    for module in (numbers, refs, negation, formats):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0 and result.attempted > 0, module.__name__


# ---------------------------------------------------------------------------
# formats
# ---------------------------------------------------------------------------

from hf_constrained.json_schema import FORMATS, _FORMAT_LENGTHS, _length_range, parse_regex  # noqa: E402
from hf_constrained.json_schema import formats as fm  # noqa: E402

_CHECKED = ("ipv6", "uri-reference", "iri", "iri-reference", "idn-email", "idn-hostname",
            "json-pointer", "relative-json-pointer", "duration", "uri-template", "regex",
            "uri", "date-time", "time", "hostname")


def test_checker_packages_installed():
    """The oracles below need the checker packages of the test extra."""
    missing = [f for f in _CHECKED if f not in FormatChecker().checkers]
    assert not missing, f"install the test extra (jsonschema format checkers for {missing})"


@pytest.mark.parametrize("fmt", _CHECKED)
def test_format_strings_pass_the_checker(fmt):
    """Random strings of the format's regex pass jsonschema's FormatChecker, in every
    draft that asserts the format."""
    regex = FORMATS[fmt]
    rng = random.Random(fmt)
    checker = Draft202012Validator.FORMAT_CHECKER  # FormatChecker() has draft 3's 'time'
    for _ in range(2000):
        value = json.loads('"' + random_match(regex, rng) + '"')
        assert checker.conforms(value, fmt), (fmt, value)
    for draft in ("http://json-schema.org/draft-07/schema#",
                  "https://json-schema.org/draft/2020-12/schema"):
        check_samples({"$schema": draft, "type": "string", "format": fmt}, n=40)


@pytest.mark.parametrize("fmt", [f for f in FORMATS if f != "regex"])
def test_format_length_table(fmt):
    assert _FORMAT_LENGTHS[fmt] == _length_range(parse_regex(FORMATS[fmt]))


def _ipv6_ok(text: str) -> bool:
    import ipaddress

    try:
        return not ipaddress.IPv6Address(text).scope_id
    except ValueError:
        return False


def test_ipv6_is_exact():
    """Against ipaddress on random strings over the address alphabet and on
    structured candidates (hextets, empty parts, dotted quads, leading zeros)."""
    rng = random.Random(6)
    compiled = re.compile(FORMATS["ipv6"])
    candidates = ["".join(rng.choice("0aF:::.1") for _ in range(rng.randrange(1, 20)))
                  for _ in range(60000)]
    pieces = ["", "0", "ffff", "1a2", "12345", "1.2.3.4", "01.2.3.4", "256.1.1.1", "Ab"]
    candidates += [":".join(rng.choice(pieces) for _ in range(rng.randrange(2, 11)))
                   for _ in range(60000)]
    candidates += ["::", "::1", "1::", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8",
                   "::ffff:1.2.3.4", "1:2:3:4:5:6:1.2.3.4", "fe80::1%eth0", "1:2:3:4:5:6:7:8:9"]
    wrong = [c for c in candidates if bool(compiled.fullmatch(c)) != _ipv6_ok(c)]
    assert not wrong, wrong[:5]
    assert sum(map(_ipv6_ok, candidates)) > 1000


def test_format_examples_and_widened_subsets():
    yes = {"uri": ["mailto:a.b@example.org", "urn:isbn:0451450523", "https://x.io/a?b#c"],
           "date-time": ["2024-02-29t12:00:00z", "2024-02-29T12:00:00.5+01:00"],
           "uri-reference": ["", "a/b", "/a/b?x#y", "#frag", "//host.io/p", "../x"],
           "json-pointer": ["", "/", "/a~0b/c~1d/0"],
           "relative-json-pointer": ["0", "1/a", "10#", "2"],
           "duration": ["P1Y2M3DT4H5M6S", "PT0S", "P3W", "P1D"],
           "uri-template": ["http://x.io/{user}/{+path}{?q,lang}", "{a:3}{b*}"],
           "regex": ["^[a-z]+$", "(a|b)*c", "\\\\d{2,}", "(?:x(y)?)+?"],
           "idn-hostname": ["example.com", "a-b.c-d.io"]}
    no = {"uri": ["a/b", "mailto:", "urn:x"],
          "uri-reference": ["a:b/c", "a b", "%zz"],
          "json-pointer": ["a", "/~2", "/~"],
          "relative-json-pointer": ["", "01", "-1/a", "1a", "00#"],
          "duration": ["P", "PT", "P1Y1W", "1D", "P1H"],
          "regex": ["(", "a**", "[z-a]", "*", "\\\\"],
          "idn-hostname": ["ab--c.com", "xn--ab.com", "-a.com"]}
    checker = Draft202012Validator.FORMAT_CHECKER  # FormatChecker() has draft 3's 'time'
    for fmt, texts in yes.items():
        for t in texts:
            assert re.fullmatch(FORMATS[fmt], t), (fmt, t)
            assert checker.conforms(json.loads('"' + t + '"'), fmt), (fmt, t)
    for fmt, texts in no.items():
        for t in texts:
            assert not re.fullmatch(FORMATS[fmt], t), (fmt, t)


def test_regex_format_values_compile():
    """Every regex-format value compiles with Python's re (and stays in the ECMA subset:
    no lookaround, named groups, inline flags or possessive quantifiers)."""
    rng = random.Random(11)
    warnings.simplefilter("error")  # e.g. FutureWarning: possible set operation "[&&]"
    for _ in range(5000):
        value = json.loads('"' + random_match(fm.REGEX, rng, max_extra=3) + '"')
        re.compile(value)
        i = 0
        while i < len(value):  # outside escapes, "(?" only opens "(?:"
            if value[i] == "\\":
                i += 2
                continue
            assert not value.startswith("(?", i) or value.startswith("(?:", i), value
            i += 1


# ---------------------------------------------------------------------------
# oneOf: separators (a sub-language of a branch that excludes another branch)
# ---------------------------------------------------------------------------


def check_one_of(schema, pointer=("oneOf",), n=80, expect=None):
    """Sampled documents validate and match exactly one branch of the oneOf at
    ``pointer`` (applied to the document itself); ``expect`` branch indices must occur."""
    regex = check_samples(schema, n=n, whitespace="")
    node = schema
    for tok in pointer:
        node = node[tok]
    v = _validator(schema)
    rng = random.Random(1)
    seen = set()
    for _ in range(n):
        doc = json.loads(random_match(regex, rng))
        hits = [i for i, b in enumerate(node) if v.evolve(schema=b).is_valid(doc)]
        assert len(hits) == 1, (doc, hits)
        seen.add(hits[0])
    assert expect is None or set(expect) <= seen, seen
    return regex


def test_one_of_discriminator_without_required():
    """Branches that only differ by a property's const (no `required`): an object
    without it matches every branch, so each branch is generated with it required."""
    schema = {"type": "object", "oneOf": [
        {"properties": {"shape": {"const": "circle"}, "r": {"type": "number"}}},
        {"properties": {"shape": {"enum": ["square", "rect"]}, "w": {"type": "integer"}}},
        {"properties": {"shape": {"const": "triangle"}}}]}
    regex = check_one_of(schema, expect=[0, 1, 2])
    assert matches(regex, {"shape": "circle", "r": 1})
    assert not matches(regex, {})  # valid for all three branches: not oneOf
    assert not _validator(schema).is_valid({})


def test_one_of_property_forbidden_by_a_closed_branch():
    schema = {"oneOf": [
        {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False},
        {"type": "object", "properties": {"b": {"type": "string"}}, "required": ["b"]},
        {"type": "object", "properties": {"c": {"type": "boolean"}, "b": False}, "required": ["c"]}]}
    check_one_of(schema, expect=[0, 1, 2])


def test_one_of_enum_negation_outside_the_values():
    """oneOf [enum, {}] holds for the values outside the enum: strings longer than the
    longest value, numbers beyond the extremes, the other boolean."""
    for typ, enum in (("string", ["", "window"]), ("integer", [3, 7]), ("boolean", [True])):
        schema = {"type": typ, "oneOf": [{"enum": enum}, {}]}
        regex = check_one_of(schema, expect=[1])
        assert not any(matches(regex, e) for e in enum)


def test_one_of_still_refused_when_nothing_separates():
    with pytest.raises(SchemaError, match=r"'oneOf' at /oneOf: no branch could be generated"):
        schema_to_regex({"type": "string", "oneOf": [{"pattern": "a"}, {"pattern": "b"}]})


def test_one_of_that_no_branch_satisfies_drops_only_its_optional_property():
    """A oneOf nothing can satisfy (identical branches: every value matches both or
    neither) under an optional property: the property is left out; required: refused."""
    never = {"type": "string", "oneOf": [{"minLength": 1}, {"minLength": 1}]}
    schema = {"type": "object", "properties": {"a": never, "b": {"type": "integer"}}}
    regex = check_samples(schema, whitespace="")
    assert matches(regex, {"b": 1}) and not matches(regex, {"a": "x", "b": 1})
    with pytest.raises(SchemaError, match=r"'oneOf' at /properties/a/oneOf: no branch could"):
        schema_to_regex({**schema, "required": ["a"]})


def test_one_of_anchored_patterns_with_incompatible_prefixes():
    schema = {"oneOf": [{"type": "string", "pattern": "^https?://"},
                        {"type": "string", "pattern": "^git://"}]}
    check_one_of(schema, expect=[0, 1])
    # untyped: non-strings match both patterns, so only strings are generated
    regex = check_one_of({"oneOf": [{"pattern": "^ab"}, {"pattern": "^b[0-9]?$"}]},
                         expect=[0, 1])
    assert not matches(regex, 1) and not matches(regex, None)
    with pytest.raises(SchemaError, match="no branch could"):  # "^a" and "^ab" overlap
        schema_to_regex({"type": "string", "oneOf": [{"pattern": "^a"}, {"pattern": "^ab"}]})


def test_enum_negation_with_huge_numbers_does_not_refuse():
    regex = check_one_of({"oneOf": [{"enum": [1e300, "a"]}, {"type": ["number", "string"]}]},
                         expect=[1])
    assert not matches(regex, "a")


def test_one_of_branch_omits_what_a_sibling_requires():
    """GeoJSON-like: the last branch's discriminator is a typo (`emum`, ignored), so it
    overlaps the seven others, whose seven negations distribute too far; it is generated
    without their required `coordinates` instead (and they without its `geometries`)."""
    kinds = ["Point", "Line", "Polygon", "MultiPoint", "MultiLine", "MultiPolygon", "Box"]
    branches = [{"type": "object", "required": ["type", "coordinates"],
                 "properties": {"type": {"enum": [k]}, "coordinates": {"type": "array"}}}
                for k in kinds]
    branches.append({"type": "object", "required": ["type", "geometries"],
                     "properties": {"type": {"type": "string", "emum": ["Coll"]},
                                    "geometries": {"type": "array"}}})
    check_one_of({"oneOf": branches}, n=300, expect=range(8))
