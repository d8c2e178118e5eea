"""hf_constrained.json_schema against the official JSON-Schema-Test-Suite.

For every test-case schema of ``draft2020-12/*.json``:

* the converter either returns a regex or raises ``SchemaError`` (any other
  exception fails the test);
* an accepted schema's regex uses the engine dialect, and 20 random matches
  all ``json.loads`` and validate (``Draft202012Validator`` + format checker);
* soundness: any serialisation of a test instance that matches the regex is
  valid;
* completeness: every instance that is valid -- for the suite *and* for the
  oracle above, which asserts ``format`` -- is *representable*: some compact
  serialisation of it (``separators=(",", ":")``, ``ensure_ascii=False``,
  any key order) fully matches.  The exceptions are listed in
  ``UNREPRESENTABLE`` with the documented reason; a listed instance that
  does match fails the test, so the list cannot go stale.

The suite lives outside the repository, in ``<repo>/../shared/data/
json-schema-test-suite``; the tests are skipped when it is absent.
"""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path

import pytest

from hf_constrained.json_schema import FORMATS, SchemaError, schema_to_regex, suite_table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_json_schema import (  # noqa: E402
    assert_dialect, random_match, serialisations, validator,
)

SUITE_ROOT = (Path(__file__).resolve().parents[1].parent / "shared" / "data"
              / "json-schema-test-suite" / "draft2020-12")
SKIP_REASON = f"JSON-Schema-Test-Suite not found at {SUITE_ROOT}"
SAMPLES_PER_SCHEMA = 20

# Reasons (see the module docstring of hf_constrained.json_schema).
CLOSED = "objects that declare properties are generated closed (no extra members)"
PATTERN_ONLY = ("members matched only by patternProperties are not emitted "
                "when additionalProperties is false")
ALL_PATTERNS = ("extra members' values must satisfy every patternProperties "
                "schema (and additionalProperties)")
UNEVALUATED = ("unevaluated* is handled conservatively: members/items not "
               "owned by the keyword's own subtree must satisfy it")
INTEGRAL_FLOAT = "integers are generated without fraction (1, never 1.0)"
DEPTH = ("nesting beyond max_recursion_depth / ANY_VALUE_MAX_DEPTH is "
         "not generated")

NEGATION = ("the negation of a oneOf branch / if condition is under-approximated "
            "(see json_schema/negation.py)")

BINARY_MULTIPLES = ("decimal multipleOf steps generate their binary-fraction multiples within "
                    "2**53 float exactness (see json_schema/numbers.py)")

UNREPRESENTABLE = {
    ("multipleOf.json", "by small number", "0.0075 is multiple of 0.0001"): BINARY_MULTIPLES,
    ("multipleOf.json", "small multiple of large integer",
     "any integer is a multiple of 1e-8"): BINARY_MULTIPLES,
    ("additionalProperties.json", "additionalProperties being false does not allow other properties",
     "patternProperties are not additional properties"): PATTERN_ONLY,
    ("additionalProperties.json", "non-ASCII pattern with additionalProperties",
     "matching the pattern is valid"): PATTERN_ONLY,
    ("additionalProperties.json", "additionalProperties are allowed by default",
     "additional properties are allowed"): CLOSED,
    ("anyOf.json", "anyOf complex types", "both anyOf valid (complex)"): CLOSED,
    ("dependentSchemas.json", "dependent subschema incompatible with root",
     "matches dependency"): CLOSED,
    ("oneOf.json", "oneOf", "second oneOf valid"): NEGATION,
    ("format.json", "hostname format", "invalid hostname string is only an annotation by default"):
        "hostname is generated as a subset every checker accepts (fqdn's included)",
    ("dependentSchemas.json", "dependent subschema incompatible with root",
     "no dependency"): CLOSED,
    ("not.json", "forbidden property", "property absent"): CLOSED,
    ("properties.json", "object properties validation",
     "doesn't invalidate other properties"): CLOSED,
    ("patternProperties.json", "multiple simultaneous patternProperties are validated",
     "a single valid match is valid"): ALL_PATTERNS,
    ("patternProperties.json", "multiple simultaneous patternProperties are validated",
     "multiple matches is valid"): ALL_PATTERNS,
    ("patternProperties.json", "regexes are not anchored by default and are case sensitive",
     "non recognized members are ignored"): ALL_PATTERNS,
    ("patternProperties.json", "regexes are not anchored by default and are case sensitive",
     "regexes are case sensitive"): ALL_PATTERNS,
    ("patternProperties.json", "patternProperties with boolean schemas",
     "object with property matching schema true is valid"): ALL_PATTERNS,
    ("properties.json", "properties, patternProperties, additionalProperties interaction",
     "patternProperty validates nonproperty"): ALL_PATTERNS,
    ("type.json", "integer type matches integers",
     "a float with zero fractional part is an integer"): INTEGRAL_FLOAT,
    ("unevaluatedItems.json", "unevaluatedItems with nested unevaluatedItems",
     "with additional items"): UNEVALUATED,
    ("unevaluatedItems.json", "unevaluatedItems can see annotations from if without then and else",
     "valid in case if is evaluated"): UNEVALUATED,
    ("unevaluatedProperties.json", "unevaluatedProperties with adjacent patternProperties",
     "with no unevaluated properties"): UNEVALUATED,
    ("unevaluatedProperties.json", "unevaluatedProperties with nested patternProperties",
     "with no additional properties"): UNEVALUATED,
    ("unevaluatedProperties.json", "unevaluatedProperties with nested unevaluatedProperties",
     "with nested unevaluated properties"): UNEVALUATED,
    ("unevaluatedProperties.json", "unevaluatedProperties with anyOf",
     "when two match and has no unevaluated properties"): UNEVALUATED,
    ("unevaluatedProperties.json",
     "nested unevaluatedProperties, outer false, inner true, properties outside",
     "with nested unevaluated properties"): UNEVALUATED,
    ("unevaluatedProperties.json",
     "nested unevaluatedProperties, outer false, inner true, properties inside",
     "with nested unevaluated properties"): UNEVALUATED,
    ("unevaluatedProperties.json",
     "unevaluatedProperties can see annotations from if without then and else",
     "valid in case if is evaluated"): UNEVALUATED,
    ("unevaluatedProperties.json", "unevaluatedProperties + single cyclic ref",
     "Deep nested is valid"): DEPTH,
    ("uniqueItems.json", "uniqueItems=false validation",
     "unique array of nested objects is valid"): DEPTH,
    ("uniqueItems.json", "uniqueItems=false validation",
     "non-unique array of nested objects is valid"): DEPTH,
}


def _suite_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.json")) if directory.is_dir() else []


def _case_params():
    files = _suite_files(SUITE_ROOT)
    if not files:
        return [pytest.param(None, None, None, marks=pytest.mark.skip(reason=SKIP_REASON),
                             id="suite-missing")]
    params = []
    for path in files:
        for index, case in enumerate(json.loads(path.read_text(encoding="utf-8"))):
            params.append(pytest.param(path.name, index, case, id=f"{path.stem}-{index}"))
    return params


_REFUSAL_MESSAGE = re.compile(r"keyword '[^']+' at /|invalid schema at /|schema at /: ")


@pytest.mark.parametrize("filename,index,case", _case_params())
def test_suite_case(filename, index, case):
    schema = case["schema"]
    try:
        regex = schema_to_regex(schema)
    except SchemaError as exc:
        assert _REFUSAL_MESSAGE.search(str(exc)), str(exc)
        for test in case["tests"]:
            assert (filename, case["description"], test["description"]) not in UNREPRESENTABLE
        return
    assert_dialect(regex)
    compiled = re.compile(regex)
    oracle = validator(schema)
    rng = random.Random(f"{filename}-{index}")
    for _ in range(SAMPLES_PER_SCHEMA):
        text = random_match(regex, rng)
        doc = json.loads(text)
        errors = [e.message for e in oracle.iter_errors(doc)]
        assert not errors, (text, errors)
    for test in case["tests"]:
        data = test["data"]
        matched = [s for s in serialisations(data) if compiled.fullmatch(s)]
        if matched:
            assert oracle.is_valid(data), (test["description"], matched[0])
        key = (filename, case["description"], test["description"])
        if key in UNREPRESENTABLE:
            assert not matched, f"{key} is representable now: remove it from UNREPRESENTABLE"
        elif test["valid"] and oracle.is_valid(data):
            assert matched, (test["description"], json.dumps(data))


@pytest.mark.skipif(not SUITE_ROOT.is_dir(), reason=SKIP_REASON)
def test_unrepresentable_keys_exist():
    known = set()
    for path in _suite_files(SUITE_ROOT):
        for case in json.loads(path.read_text(encoding="utf-8")):
            for test in case["tests"]:
                known.add((path.name, case["description"], test["description"]))
    assert set(UNREPRESENTABLE) <= known


@pytest.mark.skipif(not (SUITE_ROOT / "optional" / "format").is_dir(), reason=SKIP_REASON)
@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_optional_format_suite_is_sound(fmt):
    """Format-asserting tests: no invalid string may match."""
    cases = json.loads((SUITE_ROOT / "optional" / "format" / f"{fmt}.json").read_text("utf-8"))
    matched_valid = 0
    for case in cases:
        regex = re.compile(schema_to_regex(case["schema"]))
        for test in case["tests"]:
            data = test["data"]
            hit = any(regex.fullmatch(s) for s in serialisations(data))
            if not test["valid"]:
                assert not hit, (fmt, test["description"], data)
            matched_valid += hit
    assert matched_valid > 0


@pytest.mark.skipif(not SUITE_ROOT.is_dir(), reason=SKIP_REASON)
def test_suite_table():
    table = suite_table(SUITE_ROOT)
    lines = table.splitlines()
    assert lines[0].startswith("| file | schemas | accepted | refused | errors |")
    rows = [line.split("|")[1:-1] for line in lines[2:-1]]
    assert len(rows) == len(_suite_files(SUITE_ROOT))
    total = [int(x.strip().strip("*")) for x in lines[-1].split("|")[2:-1]]
    assert total[0] == total[1] + total[2] and total[3] == 0
    assert total[1] > total[0] // 2


@pytest.mark.skipif(not SUITE_ROOT.is_dir(), reason=SKIP_REASON)
def test_engine_accepts_suite_regexes():
    """Every accepted schema's regex compiles with the package's own engine
    and its start state is alive."""
    automaton = pytest.importorskip("hf_constrained.automaton")
    checked = 0
    for path in _suite_files(SUITE_ROOT):
        for case in json.loads(path.read_text(encoding="utf-8")):
            try:
                regex = schema_to_regex(case["schema"])
            except SchemaError:
                continue
            dfa = automaton.LazyDFA.from_patterns([regex])
            assert dfa.starts[0] != automaton.DEAD, (path.name, case["description"])
            checked += 1
    assert checked > 100
