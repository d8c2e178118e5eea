"""Unit tests for hf_constrained.json_schema (pure Python, no torch).

Oracles used here are independent of the converter:

* ``random_match`` -- a small random generator driven by Python's own regex
  parser (``re._parser``), used to draw strings from produced regexes;
* ``hypothesis.strategies.from_regex`` (Unicode semantics) for the building
  blocks, when hypothesis is installed;
* ``jsonschema.Draft202012Validator`` with its format checker, plus stdlib
  parsers (``datetime``, ``uuid``, ``ipaddress``...) for formats.
"""

from __future__ import annotations

import datetime as dt
import doctest
import functools
import ipaddress
import itertools
import json
import random
import re
import sys
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Literal, Optional, Union
from urllib.parse import urlsplit

import numpy as np
import pytest
from jsonschema import Draft202012Validator

import hf_constrained.json_schema as js
from hf_constrained import regex_parser
from hf_constrained.json_schema import (
    BOOLEAN, DATE, INTEGER, IPV4, NULL, NUMBER, STRING, SchemaError,
    choice_regex, quoted, schema_to_regex,
)

try:  # Python >= 3.11
    import re._constants as sre_c
    import re._parser as sre_parse
except ImportError:  # pragma: no cover - older Pythons
    import sre_constants as sre_c
    import sre_parse

try:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover
    given = None

FORMAT_CHECKER = Draft202012Validator.FORMAT_CHECKER

# ---------------------------------------------------------------------------
# Test helpers (also imported by test_json_schema_suite.py)
# ---------------------------------------------------------------------------

_POOL = [chr(c) for c in range(0x20, 0x7F)] + list(
    "\t\n\r\x00\x1f\x7f\x85\xa0é中😀\u2028٣ǅ")
_CATEGORY_RE = {
    sre_c.CATEGORY_DIGIT: r"\d", sre_c.CATEGORY_NOT_DIGIT: r"\D",
    sre_c.CATEGORY_WORD: r"\w", sre_c.CATEGORY_NOT_WORD: r"\W",
    sre_c.CATEGORY_SPACE: r"\s", sre_c.CATEGORY_NOT_SPACE: r"\S",
}


def _in_class(items, ch: str) -> bool:
    negate, hit = False, False
    for op, av in items:
        if op is sre_c.NEGATE:
            negate = True
        elif op is sre_c.LITERAL:
            hit |= ord(ch) == av
        elif op is sre_c.RANGE:
            hit |= av[0] <= ord(ch) <= av[1]
        elif op is sre_c.CATEGORY:
            hit |= bool(re.fullmatch(_CATEGORY_RE[av], ch))
        else:
            raise NotImplementedError(op)
    return hit != negate


def _random_char(rng: random.Random) -> str:
    if rng.random() < 0.8:
        return rng.choice(_POOL)
    while True:
        cp = rng.randrange(0x110000)
        if not 0xD800 <= cp <= 0xDFFF:
            return chr(cp)


def _pick(items, rng: random.Random) -> str:
    negated = any(op is sre_c.NEGATE for op, _ in items)
    if not negated and rng.random() < 0.7:
        op, av = rng.choice(items)
        if op is sre_c.LITERAL:
            return chr(av)
        if op is sre_c.RANGE:
            lo, hi = av
            while True:
                top = min(hi, lo + 300) if rng.random() < 0.7 else hi
                cp = rng.randint(lo, top)
                if not 0xD800 <= cp <= 0xDFFF:
                    return chr(cp)
    for _ in range(20000):
        ch = _random_char(rng)
        if _in_class(items, ch):
            return ch
    raise AssertionError(f"cannot draw a character from {items}")


@functools.lru_cache(maxsize=128)
def _parsed(regex: str):
    return sre_parse.parse(regex)


def _random_tree_match(pattern: str, rng: random.Random, max_extra: int) -> str:
    """A random match of a ``(?(DEFINE)...)`` pattern (which ``re`` cannot read), drawn
    from this package's parse tree and checked with the ``regex`` module."""
    import regex as regex_module

    tree, dfa = _parsed_definitions(pattern)
    defs = dict(tree[1])
    out: list[str] = []

    def gen(node) -> None:
        kind = node[0]
        if kind == "cls":
            ranges = node[1]
            small = [r for r in ranges if r[0] < 0x80] if rng.random() < 0.8 else []
            lo, hi = rng.choice(small or list(ranges))
            out.append(chr(rng.randint(lo, min(hi, lo + 300) if rng.random() < 0.7 else hi)))
        elif kind == "cat":
            for n in node[1]:
                gen(n)
        elif kind == "alt":
            gen(rng.choice(node[1]))
        elif kind == "ref":
            gen(defs[node[1]])
        else:
            _, sub, lo, hi = node
            top = lo + max_extra if hi is None else min(hi, lo + max_extra)
            n = lo
            while n < top and rng.random() < 0.6:
                n += 1
            for _ in range(n):
                gen(sub)

    gen(tree[2])
    text = "".join(out)
    if len(pattern) <= 20_000:  # the regex module runs out of memory on larger ones
        assert regex_module.fullmatch(pattern, text), (pattern[:200], text)
    else:
        assert dfa.fullmatch(text.encode()), (pattern[:200], text)
    return text


@functools.lru_cache(maxsize=8)
def _parsed_definitions(pattern: str):
    from hf_constrained.automaton import LazyDFA
    from hf_constrained.regex_parser import parse

    return parse(pattern), (LazyDFA.from_patterns([pattern]) if len(pattern) > 20_000 else None)


def random_match(regex: str, rng: random.Random, max_extra: int = 4) -> str:
    """A random string fully matching ``regex`` (unbounded repetitions are
    cut at ``max_extra`` extra iterations)."""
    if regex.startswith("(?(DEFINE)"):
        return _random_tree_match(regex, rng, max_extra)
    out: list[str] = []

    def gen(seq) -> None:
        for op, av in seq:
            if op is sre_c.LITERAL:
                out.append(chr(av))
            elif op is sre_c.NOT_LITERAL:
                out.append(_pick([(sre_c.NEGATE, None), (sre_c.LITERAL, av)], rng))
            elif op is sre_c.ANY:
                out.append(_pick([(sre_c.NEGATE, None), (sre_c.LITERAL, 10)], rng))
            elif op is sre_c.IN:
                out.append(_pick(av, rng))
            elif op is sre_c.BRANCH:
                gen(rng.choice(av[1]))
            elif op is sre_c.SUBPATTERN:
                gen(av[-1])
            elif op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT):
                lo, hi, sub = av
                top = lo + max_extra if hi is sre_c.MAXREPEAT else min(hi, lo + max_extra)
                n = lo
                while n < top and rng.random() < 0.6:
                    n += 1
                for _ in range(n):
                    gen(sub)
            else:
                raise NotImplementedError(op)

    gen(_parsed(regex))
    text = "".join(out)
    assert re.fullmatch(regex, text), (regex, text)
    return text


_FORBIDDEN_OPS = {
    sre_c.AT, sre_c.ASSERT, sre_c.ASSERT_NOT, sre_c.GROUPREF,
    sre_c.GROUPREF_EXISTS, sre_c.CATEGORY,
}
for _name in ("ATOMIC_GROUP", "POSSESSIVE_REPEAT", "GROUPREF_IGNORE"):
    if hasattr(sre_c, _name):
        _FORBIDDEN_OPS.add(getattr(sre_c, _name))


def assert_dialect(regex: str) -> None:
    """The regex only uses the dialect the engine accepts."""
    tree = sre_parse.parse(regex)
    assert not tree.state.flags & ~sre_c.SRE_FLAG_UNICODE, regex[:200]

    def walk(seq) -> None:
        for op, av in seq:
            assert op not in _FORBIDDEN_OPS, (op, regex[:200])
            if op is sre_c.IN:
                for iop, _ in av:
                    assert iop is not sre_c.CATEGORY, regex[:200]
            elif op is sre_c.BRANCH:
                for branch in av[1]:
                    walk(branch)
            elif op is sre_c.SUBPATTERN:
                assert not av[1] and not av[2], "inline flags"
                walk(av[-1])
            elif op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT):
                walk(av[2])

    walk(tree)
    # No \U escapes (the engine only knows \xHH and \uXXXX).
    assert not re.search(r"(?<!\\)(?:\\\\)*\\U", regex)


def serialisations(value, limit: int = 720) -> list[str]:
    """Compact serialisations of ``value`` with every key order."""

    def variants(v):
        if isinstance(v, dict):
            items = list(v.items())
            orders = itertools.permutations(items) if len(items) <= 5 else [items]
            for order in orders:
                subs = [list(itertools.islice(variants(x), 6)) for _, x in order]
                for vals in itertools.product(*subs):
                    yield "{" + ",".join(
                        json.dumps(k, ensure_ascii=False) + ":" + s
                        for (k, _), s in zip(order, vals)) + "}"
        elif isinstance(v, list):
            subs = [list(itertools.islice(variants(x), 6)) for x in v]
            for vals in itertools.product(*subs):
                yield "[" + ",".join(vals) + "]"
        else:
            yield json.dumps(v, ensure_ascii=False)

    return list(itertools.islice(variants(value), limit))


def validator(schema) -> Draft202012Validator:
    return Draft202012Validator(schema, format_checker=FORMAT_CHECKER)


def check_samples(schema, n: int = 30, seed: int = 0, **kwargs) -> str:
    """Convert, check the dialect, and validate ``n`` random matches."""
    regex = schema_to_regex(schema, **kwargs)
    assert_dialect(regex)
    v = validator(schema if not hasattr(schema, "model_json_schema")
                  else schema.model_json_schema())
    rng = random.Random(seed)
    for _ in range(n):
        text = random_match(regex, rng)
        doc = json.loads(text)
        errors = [e.message for e in v.iter_errors(doc)]
        assert not errors, (text, errors)
    return regex


def matches(regex: str, value) -> bool:
    return any(re.fullmatch(regex, s) for s in serialisations(value))


def refusal(schema, **kwargs) -> str:
    with pytest.raises(SchemaError) as info:
        schema_to_regex(schema, **kwargs)
    return str(info.value)


# ---------------------------------------------------------------------------
# Building blocks
# ---------------------------------------------------------------------------

def _format_ok(fmt: str, text: str) -> bool:
    """Stdlib oracle + jsonschema's format checker (when it has one)."""
    text = json.loads('"' + text + '"')  # the content is JSON text (``regex`` has escapes)
    if fmt in FORMAT_CHECKER.checkers and not FORMAT_CHECKER.conforms(text, fmt):
        return False
    if fmt == "date":
        return dt.date.fromisoformat(text).isoformat() == text
    if fmt == "date-time":  # RFC 3339 allows lowercase t / z; fromisoformat does not
        return dt.datetime.fromisoformat(text.upper()).tzinfo is not None
    if fmt == "time":
        return dt.time.fromisoformat(text.upper()).tzinfo is not None
    if fmt == "uuid":
        return str(uuid.UUID(text)) == text.lower()
    if fmt == "ipv4":
        return str(ipaddress.IPv4Address(text)) == text
    if fmt == "email":
        local, _, domain = text.rpartition("@")
        return bool(local) and "." in domain and ".." not in text
    if fmt == "hostname":  # RFC 1123 labels, fqdn's rules: >= 2 labels, <= 253, alphabetic TLD
        labels = text.split(".")
        return (len(text) <= 253 and len(labels) >= 2 and labels[-1].isalpha() and all(
            re.fullmatch(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?", x) for x in labels))
    if fmt == "uri":
        parts = urlsplit(text)
        return bool(parts.scheme and (parts.netloc or parts.scheme in ("mailto", "urn")))
    # the other formats (tests/test_json_gaps.py): jsonschema's checker is the oracle
    return fmt in FORMAT_CHECKER.checkers


@pytest.mark.parametrize("fmt", sorted(js.FORMATS))
def test_format_samples_validate(fmt):
    regex = js.FORMATS[fmt]
    assert_dialect(regex)
    rng = random.Random(fmt)
    for _ in range(300):
        text = random_match(regex, rng)
        assert _format_ok(fmt, text), text
        doc = json.loads(quoted_text := '"' + text + '"')
        assert validator({"type": "string", "format": fmt}).is_valid(doc), quoted_text


@pytest.mark.parametrize("fmt,good,bad", [
    ("date", ["2024-02-29", "2000-02-29", "0001-01-01", "1999-12-31"],
     ["2023-02-29", "1900-02-29", "0000-01-01", "2024-13-01", "2024-04-31",
      "2024-1-01", "24-01-01"]),
    ("time", ["23:59:59Z", "00:00:00.123456+05:30", "12:00:00-23:59"],
     ["24:00:00Z", "12:00:00", "12:60:00Z", "12:00:00.1234567Z"]),
    ("date-time", ["2024-02-29T12:00:00Z"], ["2024-02-30T12:00:00Z",
                                             "2024-02-29 12:00:00Z"]),
    ("uuid", ["123e4567-e89b-12d3-a456-426614174000"],
     ["123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400"]),
    ("ipv4", ["0.0.0.0", "255.255.255.255", "192.168.1.10"],
     ["256.0.0.1", "01.2.3.4", "1.2.3", "1.2.3.4.5"]),
    ("email", ["a@b.cd", "first.last+tag@mail.example.org"],
     ["a@b", "@b.cd", "a..b@c.de", "a@-b.cd"]),
    ("uri", ["https://example.com/a/b?x=1&y=%20#frag", "ftp://h:21"],
     ["example.com", "http://", "http://a b"]),
    ("hostname", ["example.com", "a-b.c0.example.org", "x1.io"],
     ["localhost", "-a.com", "a-.com", "a..com", "a.b1", "a_b.com", "a.com."]),
])
def test_format_examples(fmt, good, bad):
    regex = js.FORMATS[fmt]
    for text in good:
        assert re.fullmatch(regex, text), text
        assert _format_ok(fmt, text)
    for text in bad:
        assert not re.fullmatch(regex, text), text


def test_date_exhaustive_month_days():
    years = ["0001", "0004", "0100", "0400", "1900", "2000", "2023", "2024", "9999"]
    for year in years:
        for month in range(0, 14):
            for day in range(0, 33):
                text = f"{year}-{month:02d}-{day:02d}"
                try:
                    dt.date.fromisoformat(text)
                    ok = True
                except ValueError:
                    ok = False
                assert bool(re.fullmatch(DATE, text)) == ok, text


@pytest.mark.parametrize("name,kind", [
    ("INTEGER", int), ("NUMBER", (int, float)), ("BOOLEAN", bool),
    ("NULL", type(None)), ("STRING", str),
])
def test_json_token_samples(name, kind):
    regex = getattr(js, name)
    assert_dialect(regex)
    rng = random.Random(name)
    for _ in range(300):
        value = json.loads(random_match(regex, rng))
        assert isinstance(value, kind)


def test_token_examples():
    assert all(re.fullmatch(INTEGER, s) for s in ["0", "-0", "7", "-120"])
    assert not any(re.fullmatch(INTEGER, s) for s in ["01", "+1", "1.0", ""])
    assert all(re.fullmatch(NUMBER, s) for s in ["0", "-1.5", "2e10", "3.25E-7"])
    assert not any(re.fullmatch(NUMBER, s) for s in ["1.", ".5", "01", "1e"])
    assert re.fullmatch(STRING, r'"a\"b\\c\u00e9\n/"')
    assert not re.fullmatch(STRING, '"a"b"')
    assert not re.fullmatch(STRING, '"\n"')
    assert not re.fullmatch(STRING, r'"\ud83d\ude00"'), "surrogate escapes"
    assert re.fullmatch(STRING, '"😀"')
    assert re.fullmatch(BOOLEAN, "true") and re.fullmatch(NULL, "null")


if given is not None:
    _HYP = settings(max_examples=60, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))

    @pytest.mark.parametrize("name", ["INTEGER", "NUMBER", "BOOLEAN", "NULL", "STRING"])
    def test_tokens_hypothesis(name):
        @_HYP
        @given(st.from_regex(getattr(js, name), fullmatch=True))
        def run(text):
            json.loads(text)

        run()

    @pytest.mark.parametrize("fmt", sorted(js.FORMATS))
    def test_formats_hypothesis(fmt):
        @_HYP
        @given(st.from_regex(js.FORMATS[fmt], fullmatch=True))
        def run(text):
            assert _format_ok(fmt, text), text

        run()

    def test_string_length_hypothesis():
        regex = schema_to_regex({"type": "string", "minLength": 2, "maxLength": 4})

        @_HYP
        @given(st.from_regex(regex, fullmatch=True))
        def run(text):
            assert 2 <= len(json.loads(text)) <= 4

        run()


def test_quoted_and_choice_regex():
    assert re.fullmatch(quoted(IPV4), '"10.0.0.1"')
    regex = choice_regex(["a.b", "c|d", "(x)", "日本", 'q"', "new\nline", ""])
    assert_dialect(regex)
    for c in ["a.b", "c|d", "(x)", "日本", 'q"', "new\nline", ""]:
        assert re.fullmatch(regex, c)
    for c in ["axb", "c", "d", "x", "(x"]:
        assert not re.fullmatch(regex, c)
    with pytest.raises(ValueError):
        choice_regex([])



def test_choice_regex_refuses_a_string_and_non_strings():
    with pytest.raises(TypeError, match=r"not one string: choice_regex\(\['yes'\]\)"):
        choice_regex("yes")  # it wrote (?:y|e|s)
    with pytest.raises(TypeError, match=r"choices must be strings, not int \(1\)"):
        choice_regex([1, 2])

def test_module_doctests():
    result = doctest.testmod(js)
    assert result.failed == 0 and result.attempted > 10


# ---------------------------------------------------------------------------
# Integer and decimal ranges
# ---------------------------------------------------------------------------

def _int_strings(lo: int, hi: int) -> list[str]:
    extra = ["-0", "00", "01", "-01", "+1", "", "-", "1.0"]
    return [str(n) for n in range(lo, hi + 1)] + extra


def test_integer_range_exhaustive_small():
    candidates = _int_strings(-130, 130)
    values = list(range(-25, 26, 3)) + [-100, -99, -10, -9, -1, 0, 1, 9, 10, 99, 100]
    for lo in values + [None]:
        for hi in values + [None]:
            regex = js.integer_range_regex(lo, hi)
            if lo is not None and hi is not None and lo > hi:
                assert regex is None
                continue
            compiled = re.compile(regex)
            for s in candidates:
                try:
                    n = int(s)
                    canonical = str(n) == s
                except ValueError:
                    canonical = False
                expect = canonical and (lo is None or n >= lo) and (hi is None or n <= hi)
                assert bool(compiled.fullmatch(s)) == expect, (lo, hi, s)


def test_integer_range_example_exhaustive():
    regex = schema_to_regex({"type": "integer", "minimum": -37, "maximum": 1234})
    assert_dialect(regex)
    for n in range(-3000, 3000):
        assert bool(re.fullmatch(regex, str(n))) == (-37 <= n <= 1234), n


def test_integer_range_random_big():
    rng = random.Random(1)
    for _ in range(300):
        a = rng.randint(-10 ** rng.randint(1, 15), 10 ** rng.randint(1, 15))
        b = a + rng.randint(0, 10 ** rng.randint(0, 15))
        lo = None if rng.random() < 0.1 else a
        hi = None if rng.random() < 0.1 else b
        compiled = re.compile(js.integer_range_regex(lo, hi))
        probes = {a, b, a - 1, b + 1, 0, -1, 1}
        probes |= {rng.randint(a - 10**6, b + 10**6) for _ in range(30)}
        probes |= {rng.randint(-10**17, 10**17) for _ in range(10)}
        for n in probes:
            expect = (lo is None or n >= lo) and (hi is None or n <= hi)
            assert bool(compiled.fullmatch(str(n))) == expect, (lo, hi, n)


@pytest.mark.parametrize("schema,lo,hi", [
    ({"minimum": 1.5, "maximum": 4.2}, 2, 4),
    ({"exclusiveMinimum": 2, "exclusiveMaximum": 7}, 3, 6),
    ({"exclusiveMinimum": 2.5, "maximum": 3}, 3, 3),
    ({"minimum": -1e3}, -1000, None),
])
def test_integer_bounds_from_schema(schema, lo, hi):
    regex = schema_to_regex({"type": "integer", **schema})
    for n in range(-1200, 50):
        assert bool(re.fullmatch(regex, str(n))) == ((lo is None or n >= lo)
                                                    and (hi is None or n <= hi))


def _decimal_candidates(rng: random.Random, around: list[Decimal]) -> list[str]:
    out = []
    for d in around:
        for delta in ("0", "0.1", "-0.1", "0.01", "-0.000001", "0.0000001", "1", "-1"):
            out.append(d + Decimal(delta))
    for _ in range(60):
        out.append(Decimal(rng.randint(-3000, 3000)) / Decimal(10 ** rng.randint(0, 4)))
    texts = []
    for d in out:
        t = format(d, "f")
        texts.append(t)
        if "." not in t:
            texts += [t + ".0", t + ".000"]
        else:
            texts.append(t + "00")
    return texts + ["-0", "-0.0", "01.5", "1.", ".5", "1e3"]


def test_decimal_range_random():
    rng = random.Random(2)
    canonical = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?")
    for _ in range(250):
        bounds = sorted(Decimal(rng.randint(-2000, 2000)) / Decimal(10 ** rng.randint(0, 3))
                        for _ in range(2))
        lo = None if rng.random() < 0.15 else bounds[0]
        hi = None if rng.random() < 0.15 else bounds[1]
        lo_x, hi_x = rng.random() < 0.5, rng.random() < 0.5
        budget = rng.choice([None, 3, 6])
        regex = js.decimal_range_regex(lo, lo_x, hi, hi_x, budget)
        if regex is None:
            assert lo is not None and hi is not None and (lo > hi or lo == hi and (lo_x or hi_x))
            continue
        assert_dialect(regex)
        compiled = re.compile(regex)
        for text in _decimal_candidates(rng, [b for b in (lo, hi) if b is not None]):
            ok = bool(canonical.fullmatch(text)) and not text.startswith("-0") or \
                bool(re.fullmatch(r"-0\.[0-9]*[1-9][0-9]*", text))
            if ok:
                d = Decimal(text)
                frac = text.partition(".")[2]
                ok = ((lo is None or (d > lo if lo_x else d >= lo))
                      and (hi is None or (d < hi if hi_x else d <= hi))
                      and (budget is None or len(frac) <= budget))
            assert bool(compiled.fullmatch(text)) == ok, (lo, lo_x, hi, hi_x, budget, text)


@pytest.mark.parametrize("schema", [
    {"type": "number", "minimum": 0},
    {"type": "number", "exclusiveMinimum": 0},
    {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
    {"type": "number", "minimum": -2.5, "maximum": 3.75},
    {"type": "number", "exclusiveMaximum": 0.1},
    {"type": "number", "minimum": 0.1, "exclusiveMaximum": 0.3},
    {"type": "number", "maximum": -1e-5},
    {"type": ["integer", "number"], "exclusiveMinimum": 100, "maximum": 1e6},
])
def test_number_bounds_samples(schema):
    regex = check_samples(schema, n=200)
    if schema.get("minimum") == 0 and len(schema) == 2:
        assert not re.fullmatch(regex, "-1") and re.fullmatch(regex, "0.5")


def test_number_bound_refusals():
    assert "'minimum'" in refusal({"type": "number", "minimum": 2**60})
    msg = refusal({"type": "number", "exclusiveMinimum": 1e12 + 0.5})
    assert "'exclusiveMinimum' at /exclusiveMinimum" in msg
    # integer type: any bound is exact
    assert re.fullmatch(schema_to_regex({"type": "integer", "minimum": 2**60}), str(2**60))


@pytest.mark.parametrize("schema, keyword", [
    ({"type": "integer", "maximum": 1.7976931348623157e308}, "maximum"),   # Double.MAX_VALUE
    ({"type": "integer", "minimum": 3, "exclusiveMaximum": 1e308}, "exclusiveMaximum"),
    ({"type": "number", "minimum": 5e-324}, "minimum"),                    # Double.MIN_VALUE
    ({"type": "number", "exclusiveMaximum": 0.3, "maximum": 1e-300}, "maximum"),
    ({"type": "number", "exclusiveMaximum": 1e308, "multipleOf": 100}, "exclusiveMaximum"),
])
def test_bounds_with_hundreds_of_digits_are_refused_not_unreadable(schema, keyword):
    """A bound whose exact regex nests deeper than the regex engine reads (200 groups) is
    refused with its pointer; it used to convert to a regex that JSONProcessor then failed
    to read (RegexSyntaxError "too deeply nested")."""
    assert f"'{keyword}' at /{keyword}" in refusal(schema)
    # round bounds of the same size stay exact
    for big in ({"type": "integer", "maximum": 10**308}, {"type": "number", "minimum": 1e-100}):
        regex_parser.parse(schema_to_regex(big))


# ---------------------------------------------------------------------------
# Strings
# ---------------------------------------------------------------------------

def test_string_lengths_count_escapes_as_one_char():
    regex = schema_to_regex({"type": "string", "minLength": 2, "maxLength": 3})
    assert_dialect(regex)
    for text, ok in [('"ab"', True), ('"a"', False), ('"\\n"', False),
                     ('"\\n\\t"', True), ('"a\\u0041"', True), ('"abcd"', False),
                     ('"\\ud83d\\ude00"', False), ('"😀😀"', True),
                     ('"a\\"b"', True), ('"\\\\\\\\"', True)]:
        assert bool(re.fullmatch(regex, text)) == ok, text
        if ok:
            assert 2 <= len(json.loads(text)) <= 3
    check_samples({"type": "string", "minLength": 3, "maxLength": 5}, n=200)



def test_counts_past_re_s_limit_are_nested_with_the_same_counts(monkeypatch):
    """A count at or above ``re``'s MAXREPEAT (2**32 - 1) is written as nested repetitions, so the
    text still compiles; with the limit and block lowered to small numbers, every (lo, hi) matches
    exactly the counts lo..hi (``re`` is the oracle)."""
    from hf_constrained.json_schema import regex_text

    for schema in ({"type": "string", "maxLength": 10 ** 30}, {"type": "string", "minLength": 2 ** 33},
                   {"type": "array", "minItems": 2 ** 32 - 1, "maxItems": 2 ** 40}):
        regex = schema_to_regex(schema)
        re.compile(regex)  # OverflowError "the repetition number is too large" before
        assert_dialect(regex)
    long_ok = schema_to_regex({"type": "string", "maxLength": 10 ** 30})
    assert re.fullmatch(long_ok, '"' + "x" * 5000 + '"') and re.fullmatch(long_ok, '""')
    assert not re.fullmatch(schema_to_regex({"type": "string", "minLength": 2 ** 33}), '"' + "x" * 99 + '"')

    monkeypatch.setattr(regex_text, "_RE_MAX_COUNT", 4)
    monkeypatch.setattr(regex_text, "_BLOCK", 3)
    for lo in range(0, 30):
        for hi in [None, *range(max(lo, 1), 31)]:
            text = regex_text._repeat("a", lo, hi)
            got = [n for n in range(0, 40) if re.fullmatch(text, "a" * n)]
            want = list(range(lo, 40 if hi is None else hi + 1))
            assert got == want, (lo, hi, text)
            if lo > 4 or hi is not None and hi > 4:
                assert all(int(c) <= 3 for c in re.findall(r"\d+", text)), text  # counts <= _BLOCK


@pytest.mark.parametrize("pattern,good,bad", [
    ("^[a-z]{2,4}$", ["ab", "abcd"], ["a", "abcde", "aB"]),
    ("abc", ["abc", "xxabcxx"], ["ab", "acb"]),
    ("^a|b$", ["a", "axx", "xxb", "b"], ["xa", "bx"]),
    ('^"q"\\\\$', ['"q"\\'], ['q']),
    (r"^\d+(\.\d\d)?$", ["1", "12.50"], ["1.5", "x", "١"]),
    # negated Unicode categories are approximated by ASCII (é is not emitted)
    (r"^[^\d\s]+$", ["abc", "a!\x08"], ["a1", "a b", "é", "a\x1c"]),
    (r"^\D\W\S$", ["a!b"], ["1!b", "aab"]),
    ("^.{3}$", ["abc", 'a"b', "a\\b"], ["ab", "a\nb"]),
    (r"^\x41\u00e9[\]\-^]$", ["Aé]", "Aé-", "Aé^"], ["Aéx"]),
    ("^(?:ab|cd)*$", ["", "abcd", "cdab"], ["abc"]),
    ("^(?P<x>a)b?$", ["a", "ab"], ["b"]),
    ("^a{,2}$", ["", "a", "aa"], ["aaa"]),
    ("^a{2}$", ["aa"], ["a"]),
    ("^x{}$", ["x{}"], ["x"]),
    ("^[\n\t\x01]$", ["\n", "\t", "\x01"], [" "]),
])
def test_pattern_translation(pattern, good, bad):
    schema = {"type": "string", "pattern": pattern}
    regex = check_samples(schema, n=60)
    for s in good:
        assert re.search(pattern, s)
        assert re.fullmatch(regex, json.dumps(s, ensure_ascii=False)), s
    for s in bad:
        assert not re.fullmatch(regex, json.dumps(s, ensure_ascii=False)), s


@pytest.mark.parametrize("pattern", [
    "(?=a)b", "(?!a)b", "(?<=a)b", r"(a)\1", r"\bword",
    "(?i)abc", "a++", r"\Aa", r"\N{DIGIT ONE}", "(?>a)",
    # the same constructs next to a mid-pattern anchor (the anchor-tree path)
    r"(a)$\1", r"a$(?=b)", r"\Za", r"b^\ba",
])  # anchors anywhere ("a^b", "^(^a)$") are exact now: tests/test_json_strings.py
def test_pattern_refusals(pattern):
    msg = refusal({"properties": {"p": {"type": "string", "pattern": pattern}}})
    assert "'pattern' at /properties/p/pattern" in msg


def test_pattern_with_lengths():
    check_samples({"type": "string", "pattern": "^[a-z]{2,4}$", "minLength": 1,
                   "maxLength": 4})
    # exact length restrictions (more in tests/test_json_strings.py)
    check_samples({"type": "string", "pattern": "^[a-z]+$", "maxLength": 4})
    assert "no JSON value" in refusal({"type": "string", "format": "uuid", "minLength": 37})
    check_samples({"type": "string", "format": "date", "minLength": 10, "maxLength": 10})
    assert "'pattern'" in refusal({"allOf": [{"pattern": "a"}, {"pattern": "b"}],
                                   "type": "string"})
    check_samples({"type": "string", "format": "ipv6"})  # refused before issue #11
    # a format is irrelevant when strings are excluded
    assert schema_to_regex({"type": "integer", "format": "hostname"}) == INTEGER


@pytest.mark.parametrize("fmt", sorted(js.FORMATS))
def test_format_schemas(fmt):
    check_samples({"type": "string", "format": fmt}, n=50)


# ---------------------------------------------------------------------------
# Objects
# ---------------------------------------------------------------------------

def test_optional_properties_commas_exhaustive():
    for required in ([], ["a"], ["b"], ["c"], ["a", "c"], ["a", "b", "c"]):
        schema = {"type": "object", "required": required, "properties": {
            k: {"type": "integer", "minimum": 0, "maximum": 9} for k in "abc"}}
        regex = schema_to_regex(schema, whitespace="")
        assert_dialect(regex)
        v = validator(schema)
        for r in range(4):
            for keys in itertools.combinations("abc", r):
                text = json.dumps({k: 1 for k in keys}, separators=(",", ":"))
                assert bool(re.fullmatch(regex, text)) == v.is_valid(json.loads(text)), text
        for text in ['{,"a":1}', '{"a":1,}', '{"a":1,,"b":1}', '{"b":1"c":1}',
                     '{"b":1,"a":1}']:
            assert not re.fullmatch(regex, text), text


def test_object_whitespace_and_order():
    schema = {"type": "object", "properties": {"x": {"type": "null"}, "y": {"type": "boolean"}},
              "required": ["y"]}
    regex = schema_to_regex(schema)
    assert re.fullmatch(regex, '{ "x" : null , "y" : true }')
    assert re.fullmatch(regex, '{"y":false}')
    assert not re.fullmatch(regex, '{  "y":false}')
    assert not re.fullmatch(regex, '{"y":false,"x":null}')
    check_samples(schema)


def test_additional_properties_schema_never_collides():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "ab": {"type": "null"}},
              "additionalProperties": {"type": "string"}}
    regex = check_samples(schema, n=200)
    assert matches(regex, {"a": 1, "b": "x"})
    assert matches(regex, {"b": "x", "abc": "y", "": "z"})
    assert not matches(regex, {"a": "x"})
    assert not matches(regex, {"ab": "x"})
    assert not re.fullmatch(regex, '{"a":1,"a":"x"}')
    assert not re.fullmatch(regex, '{"\\u0061":"x"}'), "non-canonical escape of a declared name"


def test_closed_and_open_objects():
    closed = {"type": "object", "properties": {"a": {"type": "integer"}}}
    assert not matches(schema_to_regex(closed), {"a": 1, "b": 2})
    free = check_samples({"type": "object"}, n=100)
    assert matches(free, {"x": [1, "s"], "y": {"z": None}})
    assert not matches(free, {"x": [1, {"y": None}]}), "nested beyond ANY_VALUE_MAX_DEPTH"
    opened = check_samples({"properties": {"a": {"type": "integer"}},
                            "additionalProperties": True}, n=100)
    assert matches(opened, {"a": 1, "b": [True]})
    assert not matches(schema_to_regex({"additionalProperties": False,
                                        "type": "object"}), {"a": 1})
    assert "no JSON value" in refusal({"type": "object", "required": ["a"],
                                       "additionalProperties": False})


def test_required_undeclared_property():
    schema = {"type": "object", "properties": {"a": {"type": "null"}}, "required": ["b"],
              "additionalProperties": {"type": "integer"}}
    regex = check_samples(schema, n=100)
    assert matches(regex, {"b": 3}) and not matches(regex, {"a": None})


def test_pattern_properties_and_property_names():
    schema = {"type": "object", "properties": {"foo": {}, "bar": {}},
              "patternProperties": {"^f": {"type": "integer"}},
              "propertyNames": {"maxLength": 3}}
    regex = check_samples(schema, n=100)
    assert matches(regex, {"foo": 1, "bar": "x"}) and not matches(regex, {"foo": "x"})
    check_samples({"type": "object", "propertyNames": {"pattern": "^[a-c]+$"}}, n=100)
    check_samples({"patternProperties": {"a": {"type": "string"}, "b": {"minLength": 2}},
                   "type": "object"}, n=100)


def test_max_properties_on_free_form_objects():
    regex = check_samples({"type": "object", "maxProperties": 2,
                           "additionalProperties": {"type": "integer"}}, n=100)
    assert matches(regex, {"a": 1, "b": 2}) and not matches(regex, {"a": 1, "b": 2, "c": 3})
    assert schema_to_regex({"type": "object", "maxProperties": 0}, whitespace="") == r"\{\}"


def test_property_counts():
    schema = {"type": "object", "properties": {"a": {}, "b": {}}, "required": ["a"],
              "minProperties": 1, "maxProperties": 2}
    check_samples(schema)
    assert "'minProperties' at /minProperties" in refusal({**schema, "minProperties": 2})
    assert "'maxProperties' at /maxProperties" in refusal({**schema, "maxProperties": 1})


def test_unevaluated_properties():
    schema = {"type": "object", "allOf": [{"properties": {"a": {"type": "integer"}}}],
              "properties": {"b": {"type": "string"}}, "unevaluatedProperties": False}
    regex = check_samples(schema, n=100)
    assert matches(regex, {"a": 1, "b": "x"})
    schema = {"$ref": "#/$defs/base", "properties": {"c": {"type": "null"}},
              "required": ["x", "c"], "unevaluatedProperties": False,
              "$defs": {"base": {"properties": {"x": {"type": "integer"}}}}}
    assert matches(check_samples(schema), {"x": 1, "c": None})
    # `b` is only declared in a sibling branch: the converter drops it
    schema = {"allOf": [{"properties": {"b": {}}}, {"properties": {"a": {}},
                                                     "unevaluatedProperties": False}]}
    regex = check_samples(schema, n=100)
    assert not matches(regex, {"b": 1})
    check_samples({"type": "array", "prefixItems": [{"type": "integer"}],
                   "allOf": [{"prefixItems": [True, {"type": "string"}]}],
                   "unevaluatedItems": False}, n=100)


# ---------------------------------------------------------------------------
# Arrays
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("schema", [
    {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 2}},
    {"type": "array", "items": {"type": "boolean"}, "minItems": 2, "maxItems": 3},
    {"type": "array", "prefixItems": [{"type": "integer", "minimum": 0, "maximum": 2},
                                      {"type": "boolean"}]},
    {"type": "array", "prefixItems": [{"type": "boolean"}], "items": False},
    {"type": "array", "prefixItems": [{"type": "boolean"}, {"type": "null"}],
     "items": {"type": "integer", "minimum": 0, "maximum": 1}, "minItems": 1, "maxItems": 4},
    {"type": "array", "prefixItems": [{"type": "boolean"}, False], "minItems": 0},
    {"type": "array", "maxItems": 0},
    {"type": "array", "items": {"enum": [0, 1]}, "uniqueItems": True, "maxItems": 1},
])
def test_arrays_exhaustive(schema):
    regex = schema_to_regex(schema, whitespace="")
    assert_dialect(regex)
    v = validator(schema)
    atoms = [0, 1, 2, True, None]
    for n in range(6):
        for items in itertools.product(atoms, repeat=n):
            text = json.dumps(list(items), separators=(",", ":"))
            assert bool(re.fullmatch(regex, text)) == v.is_valid(list(items)), text
    check_samples(schema)


def test_array_refusals():
    assert "'uniqueItems' at /properties/t/uniqueItems" in refusal(
        {"properties": {"t": {"type": "array", "uniqueItems": True}}})
    assert "'contains' at /contains" in refusal({"type": "array", "contains": {}})
    # a large bound is a counter, not a refusal
    assert len(check_samples({"type": "array", "maxItems": 20000}, n=3)) < 20000


# ---------------------------------------------------------------------------
# enum / const / combinators
# ---------------------------------------------------------------------------

def test_enum_and_const():
    schema = {"enum": ["a\"b", 1, 2.5, None, [1, {"k": "v"}], {"x": [True]}, 1.0]}
    regex = check_samples(schema, n=100)
    for value in schema["enum"]:
        assert matches(regex, value)
    assert matches(regex, 1.0) and matches(regex, 1)
    assert not matches(regex, "ab") and not matches(regex, 2)
    # siblings filter the values exactly, whatever keyword they use
    schema = {"enum": [[1, 1], [1, 2], "x", 3], "uniqueItems": True, "type": "array"}
    assert matches(regex := check_samples(schema), [1, 2])
    assert not matches(regex, [1, 1]) and not matches(regex, 3)
    assert check_samples({"const": {"a": [1, 2]}}, whitespace="") == \
        r'\{"a":\[(?:1|1\.0),(?:2|2\.0)\]\}'
    assert "no JSON value" in refusal({"const": 5, "type": "string"})


def test_all_of_merging():
    schema = {"allOf": [
        {"type": ["integer", "string"], "minimum": 3},
        {"type": "integer", "maximum": 7},
        {"exclusiveMaximum": 6, "properties": {"ignored": {}}},
    ]}
    regex = schema_to_regex(schema)
    assert [n for n in range(20) if re.fullmatch(regex, str(n))] == [3, 4, 5]
    schema = {"allOf": [
        {"properties": {"a": {"type": "integer"}}, "required": ["a"]},
        {"properties": {"a": {"minimum": 5}, "b": {"type": "string", "maxLength": 2}}},
        {"properties": {"b": {"minLength": 1}}, "required": ["b"]},
    ]}
    regex = check_samples(schema, n=100)
    assert matches(regex, {"a": 5, "b": "x"}) and not matches(regex, {"a": 4, "b": "x"})
    assert not matches(regex, {"a": 5, "b": ""})
    # additionalProperties: false of one part forbids names declared elsewhere
    schema = {"allOf": [{"properties": {"a": {}}, "additionalProperties": False},
                        {"properties": {"b": {}}}]}
    assert not matches(check_samples(schema), {"b": 1})
    with pytest.raises(SchemaError, match="no JSON value"):
        schema_to_regex({"allOf": [{"type": "string"}, {"type": "integer"}]})


def test_any_of_and_one_of():
    regex = check_samples({"anyOf": [{"type": "integer", "maximum": 3},
                                     {"type": "string", "maxLength": 1}],
                           "minimum": 0})
    assert matches(regex, 2) and matches(regex, "x") and not matches(regex, -1)
    check_samples({"oneOf": [{"type": "string"}, {"type": "null"}]})
    check_samples({"oneOf": [{"const": "a"}, {"enum": ["b", "c"]}]})
    check_samples({"oneOf": [
        {"type": "object", "properties": {"kind": {"const": "x"}, "v": {"type": "integer"}},
         "required": ["kind"]},
        {"type": "object", "properties": {"kind": {"enum": ["y", "z"]}}, "required": ["kind"]},
    ]})
    # overlapping branches: each is generated with the others negated
    regex = check_samples({"oneOf": [{"type": "integer"}, {"minimum": 2}]})
    assert matches(regex, 1) and not matches(regex, 2) and matches(regex, "x")
    msg = refusal({"oneOf": [{"type": "integer"}, {"type": "number"}]})
    assert "'oneOf' at /oneOf" in msg and "anyOf" in msg


def test_not_and_if():
    regex = check_samples({"not": {"type": ["string", "object", "array"]}})
    assert matches(regex, None) and not matches(regex, "x")
    regex = check_samples({"not": {"const": 1}})
    assert matches(regex, "x") and not matches(regex, 1)
    check_samples({"if": True, "then": {"type": "integer"}, "else": {"type": "string"}})
    check_samples({"if": {"type": "integer"}})
    regex = check_samples({"if": {"type": "integer"}, "then": {"minimum": 1}})
    assert matches(regex, 1) and not matches(regex, 0) and matches(regex, "s")


# ---------------------------------------------------------------------------
# References and recursion
# ---------------------------------------------------------------------------

TREE = {
    "$defs": {"node": {"type": "object", "properties": {
        "value": {"type": "integer"},
        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
        "required": ["value"], "additionalProperties": False}},
    "$ref": "#/$defs/node",
}


def _depth(doc) -> int:
    return 1 + max((_depth(c) for c in doc.get("children", [])), default=0)


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_recursive_schema_depth(depth):
    regex = check_samples(TREE, n=50, max_recursion_depth=depth)
    assert matches(regex, {"value": 1, "children": []})
    nested = {"value": 1}
    for _ in range(depth - 1):
        nested = {"value": 1, "children": [nested]}
    assert matches(regex, nested)
    assert not matches(regex, {"value": 0, "children": [nested]})
    rng = random.Random(0)
    assert max(_depth(json.loads(random_match(regex, rng))) for _ in range(200)) <= depth


@pytest.mark.parametrize("flat, chunk", [(150, 64), (3, 2), (4, 3), (2, 2)])
def test_object_members_joined_in_chunks_keep_their_language(monkeypatch, flat, chunk):
    """Past ``JOIN_FLAT`` members, ``_join_members`` joins chunks of members like members:
    with the thresholds lowered, every ordered selection of up to 9 members (random required
    ones) matches iff it is non-empty and holds every required member, no other order matches,
    and the empty flag is right."""
    from hf_constrained.json_schema import keys
    monkeypatch.setattr(keys, "JOIN_FLAT", flat)
    monkeypatch.setattr(keys, "JOIN_CHUNK", chunk)
    rng = random.Random(flat * 10 + chunk)
    for n in range(1, 10):
        for _ in range(3):
            req = [rng.random() < 0.25 for _ in range(n)]
            regex, empty_ok = keys._join_members([(f"m{i}", r) for i, r in enumerate(req)], ",")
            compiled = re.compile(regex)
            assert empty_ok == (not any(req))
            for mask in range(1 << n):
                picked = [i for i in range(n) if mask >> i & 1]
                want = bool(picked) and all(i in picked for i in range(n) if req[i])
                text = ",".join(f"m{i}" for i in picked)
                assert bool(compiled.fullmatch(text)) == want, (n, req, text)
                if len(picked) > 1:
                    swapped = picked[:]
                    swapped[0], swapped[1] = swapped[1], swapped[0]
                    assert not compiled.fullmatch(",".join(f"m{i}" for i in swapped))


def test_objects_with_hundreds_of_optional_properties_convert():
    """Joining members nested one group per member, so an object of ~200 optional properties
    was refused ("invalid regex ... too deeply nested"); chunks keep the nesting bounded."""
    schema = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(1000)},
              "required": ["p5", "p700"], "additionalProperties": False}
    rx = schema_to_regex(schema, whitespace="")
    for doc in ({"p5": 1, "p700": 2}, {"p0": 0, "p5": 1, "p64": 3, "p700": 2, "p999": 9}):
        assert re.fullmatch(rx, json.dumps(doc, separators=(",", ":")))
    for doc in ({"p5": 1}, {"p700": 2, "p5": 1}, {"p5": 1, "p700": 2, "p1000": 0}):
        assert not re.fullmatch(rx, json.dumps(doc, separators=(",", ":")))


@pytest.mark.parametrize("schema, pointer", [
    ({"const": float("nan")}, "/const"),
    ({"enum": ["a", float("inf")]}, "/enum/1"),
    ({"type": "number", "maximum": float("inf")}, "/maximum"),
    ('{"properties": {"a/b": {"minimum": -Infinity}}}', "/properties/a~1b/minimum"),
])
def test_non_finite_numbers_are_refused_with_their_pointer(schema, pointer):
    """NaN and Infinity are not JSON: ``const: NaN`` became the regex ``NaN`` (a document no
    JSON parser reads), ``maximum: inf`` an OverflowError. Both routes refuse them by pointer."""
    from hf_constrained.json_schema.recursive import schema_to_grammar
    for convert in (schema_to_regex, schema_to_grammar):
        with pytest.raises(SchemaError, match=f"schema at {re.escape(pointer)}: .* is not a JSON number"):
            convert(schema)


def test_a_schema_that_contains_itself_is_refused():
    schema = {"type": "object"}
    schema["properties"] = {"x": schema}
    with pytest.raises(SchemaError, match="contains itself.*\\$ref"):
        schema_to_regex(schema)


def test_schema_nested_too_deeply_is_a_schema_error():
    """A schema nested past what the converter's recursion allows is refused with a
    SchemaError that says so, on the regex and the grammar routes (a bare RecursionError
    before); 100 levels convert."""
    from hf_constrained.json_schema.recursive import schema_to_grammar

    def nested(depth):
        s = {"type": "integer"}
        for _ in range(depth):
            s = {"type": "array", "items": s}
        return s
    value = 1
    for _ in range(100):
        value = [value]
    import regex   # (a large schema's regex shares definitions: (?(DEFINE)...) syntax)
    assert regex.fullmatch(schema_to_regex(nested(100), whitespace=""), json.dumps(value, separators=(",", ":")))
    assert schema_to_grammar(nested(100)).rules
    deep = nested(3 * sys.getrecursionlimit())
    for convert in (schema_to_regex, schema_to_grammar):
        with pytest.raises(SchemaError, match="the schema is nested too deeply.*sys.setrecursionlimit"):
            convert(deep)


def test_recursion_refusals_and_refs():
    msg = refusal({"$ref": "#"})
    assert "'$ref' at /$ref" in msg and "max_recursion_depth" in msg
    msg = refusal({"$defs": {"a": {"type": "array", "minItems": 1,
                                   "items": {"$ref": "#/$defs/a"}}}, "$ref": "#/$defs/a"})
    assert "'$ref'" in msg
    assert "'$ref' at /properties/x/$ref" in refusal(
        {"properties": {"x": {"$ref": "http://example.com/s.json"}}})
    assert "'$ref'" in refusal({"$ref": "other.json#/a"})
    assert "'$ref'" in refusal({"$ref": "#/$defs/missing"})
    check_samples({"definitions": {"a~/b": {"type": "integer"}, "c%d": {"type": "null"}},
                   "properties": {"x": {"$ref": "#/definitions/a~0~1b"},
                                  "y": {"$ref": "#/definitions/c%25d"}}})
    check_samples({"$id": "http://example.com/root.json",
                   "$defs": {"a": {"$anchor": "foo", "type": "integer"}},
                   "properties": {"x": {"$ref": "#foo"},
                                  "y": {"$ref": "http://example.com/root.json#/$defs/a"}}})
    check_samples({"$ref": "#/$defs/a", "maximum": 3,
                   "$defs": {"a": {"type": "integer", "minimum": 1}}})


def test_boolean_schemas():
    regex = check_samples(True, n=100)
    assert matches(regex, {"a": [1, "x", None]})
    assert "no JSON value" in refusal(False)
    check_samples({"properties": {"a": True, "b": False}})


# ---------------------------------------------------------------------------
# Refusals, annotations, limits, inputs
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("schema,keyword,pointer", [
    ({"type": "array", "uniqueItems": True}, "uniqueItems", "/uniqueItems"),
    ({"properties": {"items": {"type": "array", "uniqueItems": True}}},
     "uniqueItems", "/properties/items/uniqueItems"),
    ({"type": "array", "contains": {"type": "integer"}}, "contains", "/contains"),
    ({"type": "number", "multipleOf": 3}, "multipleOf", "/multipleOf"),
    ({"type": "object", "minProperties": 2}, "minProperties", "/minProperties"),
    ({"properties": {"a": {}, "b": {}}, "maxProperties": 1}, "maxProperties",
     "/maxProperties"),
    ({"type": "array", "contains": {}, "minContains": 0, "maxContains": 1}, "contains",
     "/contains"),
    ({"items": {"$dynamicRef": "#x"}}, "$dynamicRef", "/items/$dynamicRef"),
    ({"anyOf": [{"type": "integer", "multipleOf": 3}]}, "multipleOf", "/anyOf/0/multipleOf"),
    ({"$ref": "http://example.com/schema"}, "$ref", "/$ref"),
])
def test_refusals_name_keyword_and_pointer(schema, keyword, pointer):
    msg = refusal(schema)
    assert f"'{keyword}' at {pointer}" in msg, msg
    assert ": " in msg  # followed by a hint


def test_type_specific_keywords_ignored_for_other_types():
    for schema in ({"type": "string", "uniqueItems": True},
                   {"type": "integer", "minProperties": 3},
                   {"type": "array", "multipleOf": 2},
                   {"type": "boolean", "contains": {}},
                   {"type": "array", "uniqueItems": False},
                   {"type": "object", "dependentRequired": {}}):
        check_samples(schema, n=20)


def test_annotations_are_ignored():
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "urn:x",
              "title": "t", "description": "d", "default": 1, "examples": [1],
              "$comment": "c", "deprecated": True, "readOnly": True, "writeOnly": False,
              "type": "integer"}
    assert schema_to_regex(schema) == INTEGER


def test_large_bounds_stay_counted_repetitions():
    # Bounds are not unrolled (the automaton counts), so large ones are accepted
    # and the regex text stays small.
    props = {f"p{i}": {"type": "string", "maxLength": 3000} for i in range(3)}
    regex = check_samples({"type": "object", "properties": props}, n=3)
    assert len(regex) < 1000 and "{0,3000}" in regex
    regex = check_samples({"type": "array", "maxItems": 3000,
                           "items": {"type": "string", "maxLength": 3}}, n=3)
    assert len(regex) < 1000
    check_samples({"type": "string", "minLength": 8000}, n=2)
    check_samples({"type": "string", "maxLength": 5000}, n=3)
    check_samples({"allOf": [{"maxItems": 400}, {"maxItems": 300}],
                   "items": {"type": "integer"}}, n=3)
    from hf_constrained.automaton import DEAD, LazyDFA
    dfa = LazyDFA.from_patterns([schema_to_regex({"type": "string", "minLength": 3000,
                                                  "maxLength": 3001})])
    state = dfa.walk(dfa.starts[0], b'"' + b"x" * 3000)
    assert state != DEAD and not dfa.is_accepting(state)
    assert dfa.is_accepting(dfa.walk(state, b'"'))
    assert dfa.walk(state, b'x"x') == DEAD


def test_invalid_inputs():
    with pytest.raises(SchemaError, match="invalid schema"):
        schema_to_regex({"type": "strin"})
    with pytest.raises(SchemaError, match="not valid JSON"):
        schema_to_regex("{nope")
    with pytest.raises(TypeError):
        schema_to_regex(42)
    with pytest.raises(ValueError):
        schema_to_regex({}, max_recursion_depth=0)


def test_json_string_input():
    assert schema_to_regex('{"type": "integer", "minimum": 0, "maximum": 12}') == \
        "(?:[0-9]|1[0-2])"


def test_whitespace_option():
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}},
              "required": ["a"]}
    regex = check_samples(schema, whitespace=r"[ \n]{0,2}")
    assert re.fullmatch(regex, '{\n"a" :\n [ 1,\n2 ]\n}')
    compact = schema_to_regex(schema, whitespace="")
    assert re.fullmatch(compact, '{"a":[1,2]}') and not re.fullmatch(compact, '{"a": [1]}')
    for bad in (r"\s*", "x?", "^ ", "(?= )"):
        with pytest.raises(ValueError):
            schema_to_regex(schema, whitespace=bad)


def test_output_is_small_for_typical_schema():
    schema = {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 40},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "email": {"type": "string", "format": "email"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5}},
        "required": ["name", "age"]}
    assert len(check_samples(schema)) < 3000


def test_many_optional_properties_stay_linear():
    props = {f"p{i}": {"type": "string", "maxLength": 50} for i in range(40)}
    regex = check_samples({"type": "object", "properties": props}, n=10)
    # each member appears at most twice (not once per earlier optional member)
    assert js.expanded_size(regex) < 2 * 40 * (50 * 13 + 20)


# ---------------------------------------------------------------------------
# pydantic input
# ---------------------------------------------------------------------------

pydantic = pytest.importorskip("pydantic")


class Address(pydantic.BaseModel):
    street: str = pydantic.Field(max_length=30)
    zip_code: str = pydantic.Field(pattern=r"^[0-9]{5}$")


class Cat(pydantic.BaseModel):
    pet_type: Literal["cat"]
    lives: int = pydantic.Field(ge=0, le=9)


class Dog(pydantic.BaseModel):
    pet_type: Literal["dog"]
    good: bool = True


class Person(pydantic.BaseModel):
    name: str
    age: int = pydantic.Field(gt=0, lt=130)
    height: float = pydantic.Field(ge=0)
    email: Optional[str] = None
    birthday: dt.date
    id: uuid.UUID
    addresses: list[Address] = pydantic.Field(default_factory=list, max_length=3)
    pet: Union[Cat, Dog] = pydantic.Field(discriminator="pet_type")
    role: Literal["admin", "user"] = "user"
    scores: dict[str, int] = {}


class Node(pydantic.BaseModel):
    value: int
    children: list["Node"] = []


def test_pydantic_models():
    rng = random.Random(3)
    for model in (Person, Node):
        regex = check_samples(model, n=40)
        for _ in range(40):
            model.model_validate_json(random_match(regex, rng))
    person = Person(name="Ann \"A\"", age=30, height=1.7, birthday=dt.date(2000, 2, 29),
                    id=uuid.uuid4(), pet=Cat(pet_type="cat", lives=3),
                    addresses=[Address(street="Main", zip_code="12345")],
                    scores={"x": 1})
    compact = person.model_dump_json()
    assert re.fullmatch(schema_to_regex(Person), compact), compact


# ---------------------------------------------------------------------------
# Random schemas (soundness of keyword combinations)
# ---------------------------------------------------------------------------

_NAMES = ["a", "b", "ab", "é", 'x"y', "a/b"]


def _random_scalar(rng: random.Random) -> dict:
    kind = rng.choice(["integer", "number", "string", "boolean", "null"])
    schema: dict = {"type": kind}
    if kind in ("integer", "number"):
        for kw in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            if rng.random() < 0.3:
                schema[kw] = rng.choice([rng.randint(-20, 20),
                                         round(rng.uniform(-20, 20), rng.randint(0, 3))])
    if kind == "string":
        if rng.random() < 0.3:
            schema["minLength"] = rng.randint(0, 3)
        if rng.random() < 0.3:
            schema["maxLength"] = rng.randint(0, 5)
        if rng.random() < 0.2:
            schema["pattern"] = rng.choice(["^a+$", "b", '^[a-c"\\\\]{1,3}$', "x|^y", r"\d"])
        elif rng.random() < 0.15:
            schema["format"] = rng.choice(sorted(js.FORMATS))
    if rng.random() < 0.2:
        del schema["type"]
    return schema


def _random_schema(rng: random.Random, depth: int = 0):
    r = rng.random()
    if depth > 2 or r < 0.35:
        return _random_scalar(rng)
    if r < 0.4:
        return rng.choice([True, False, {}])
    if r < 0.5:
        values = [1, 1.0, "a", None, [1], {"a": 1}, True, 2.5, 'é"', [], {}]
        return {"enum": rng.sample(values, rng.randint(1, 4)), **_random_scalar(rng)}
    if r < 0.7:
        schema: dict = {"type": "object"} if rng.random() < 0.8 else {}
        names = rng.sample(_NAMES, rng.randint(0, 3))
        if names:
            schema["properties"] = {n: _random_schema(rng, depth + 1) for n in names}
        if rng.random() < 0.5:
            schema["required"] = rng.sample(_NAMES, rng.randint(0, 2))
        if rng.random() < 0.4:
            schema["additionalProperties"] = rng.choice(
                [False, True, _random_schema(rng, depth + 1)])
        if rng.random() < 0.15:
            schema["patternProperties"] = {rng.choice(["^a", "b"]): _random_schema(rng, depth + 1)}
        if rng.random() < 0.1:
            schema["propertyNames"] = rng.choice([{"maxLength": 1}, {"enum": ["a", "c"]}])
        if rng.random() < 0.15:
            schema["unevaluatedProperties"] = rng.choice([False, _random_schema(rng, depth + 1)])
        if rng.random() < 0.1:
            schema["maxProperties"] = rng.randint(0, 3)
        return schema
    if r < 0.85:
        schema = {"type": "array"} if rng.random() < 0.8 else {}
        if rng.random() < 0.5:
            schema["prefixItems"] = [_random_schema(rng, depth + 1) for _ in range(rng.randint(1, 2))]
        if rng.random() < 0.6:
            schema["items"] = _random_schema(rng, depth + 1)
        if rng.random() < 0.3:
            schema["minItems"] = rng.randint(0, 3)
        if rng.random() < 0.3:
            schema["maxItems"] = rng.randint(0, 4)
        if rng.random() < 0.15:
            schema["unevaluatedItems"] = rng.choice([False, _random_schema(rng, depth + 1)])
        return schema
    keyword = rng.choice(["anyOf", "oneOf", "allOf", "allOf", "not", "$ref", "if"])
    if keyword == "not":
        return {"not": rng.choice([{"type": rng.choice(["string", "null", "object"])}, False])}
    if keyword == "$ref":
        return {"$ref": "#/$defs/" + rng.choice(["s", "t"]), **_random_scalar(rng)}
    if keyword == "if":
        return {"if": rng.choice([True, False]), "then": _random_schema(rng, depth + 1),
                "else": _random_schema(rng, depth + 1)}
    schema = {keyword: [_random_schema(rng, depth + 1) for _ in range(rng.randint(1, 3))]}
    if rng.random() < 0.5:
        schema.update(_random_scalar(rng))
    return schema


def test_random_schemas_are_sound():
    rng = random.Random(12345)
    accepted = 0
    for i in range(150):
        schema = _random_schema(rng)
        if isinstance(schema, dict):
            schema = {**schema, "$defs": {
                "s": _random_schema(random.Random(i), 2),
                "t": {"type": "object", "properties": {"n": {"$ref": "#/$defs/t"},
                                                       "v": {"type": "integer"}}}}}
        try:
            check_samples(schema, n=10, seed=i)
            accepted += 1
        except SchemaError as exc:
            assert " at /" in str(exc)
    assert accepted > 80


def test_exponentially_growing_schema_is_refused_fast():
    """Nested arrays double the plain regex text per level: without shared definitions
    it is refused quickly, never OOM; with them (the default) the text stays linear."""
    import time

    import regex as regex_module

    schema = {"type": "integer"}
    for _ in range(40):
        schema = {"type": "array", "items": schema}
    t0 = time.perf_counter()
    with pytest.raises(SchemaError, match="MAX_REGEX_TEXT"):
        schema_to_regex(schema, shared=False)
    assert time.perf_counter() - t0 < 10
    r = schema_to_regex(schema)
    assert r.startswith("(?(DEFINE)") and len(r) < 40_000
    deep = "[" * 40 + "1,2" + "]" * 40
    assert regex_module.fullmatch(r, deep) and not regex_module.fullmatch(r, "[" * 39 + "1" + "]" * 39)


# ---------------------------------------------------------------------------
# scale: a Kubernetes-like schema (counted repetitions stay counters)
# ---------------------------------------------------------------------------

K8S_SCHEMA = Path(__file__).resolve().parent.parent / "benchmarks" / "data" / "k8s_deployment_like.json"


def test_kubernetes_like_schema_end_to_end(deepseek):
    from hf_constrained import JSONProcessor

    schema = json.loads(K8S_SCHEMA.read_text())
    proc = JSONProcessor(schema, deepseek, cache_dir=False)
    regex = proc.patterns[0]
    assert js.expanded_size(regex) > 100_000  # what an unrolling engine would build
    v = validator(schema)
    rng = random.Random(3)
    start = proc.dfa.starts[0]
    for _ in range(4):
        text = random_match(regex, rng, max_extra=2)
        assert not list(v.iter_errors(json.loads(text)))
        ids = deepseek.encode(text, add_special_tokens=False)
        states = proc.index.walk_tokens(np.array([start]), np.array([ids]))
        assert proc.dfa.is_accepting(int(states[0]))
        state = start
        for t in ids[:40]:  # the tokenizer's own encoding is never masked out
            assert t in set(proc.index.allowed(state).tolist())
            state = int(proc.index.walk_tokens(np.array([state]), np.array([[t]]))[0])
        for bad in (text[:-1], "[" + text[1:], text + "}"):
            assert not proc.dfa.fullmatch(bad.encode())


def test_limits_set_on_the_package_reach_the_converter(monkeypatch):
    """The limits live in ``json_schema.limits`` (read when used); setting one on the package,
    as users and older code do, must change the conversion, and undoing it must restore it."""
    import hf_constrained.json_schema as js
    from hf_constrained.json_schema import limits
    deep = '{"a":[[1]]}'                                              # 3 containers
    assert re.fullmatch(schema_to_regex({}), deep) is None          # 2 containers deep by default
    with monkeypatch.context() as m:
        m.setattr(js, "ANY_VALUE_MAX_DEPTH", 3)
        assert limits.ANY_VALUE_MAX_DEPTH == 3 and js.ANY_VALUE_MAX_DEPTH == 3
        assert re.fullmatch(schema_to_regex({}), deep)
        m.setattr(js, "MAX_REGEX_TEXT", 50)
        with pytest.raises(SchemaError, match="MAX_REGEX_TEXT=50"):
            schema_to_regex({"type": "object", "properties": {"a": {}}}, shared=False)
    assert limits.ANY_VALUE_MAX_DEPTH == js.ANY_VALUE_MAX_DEPTH == 2
    assert re.fullmatch(schema_to_regex({}), deep) is None


def _keys_excluding_per_node(names):
    """The textbook form: at every trie node, stop (if not a name) | leave, then anything |
    go down a child. ``_keys_excluding`` writes the same language with one shared tail."""
    from hf_constrained.json_schema.charsets import _ALL, _CANON_CHAR, _encode_charset, _subtract
    from hf_constrained.json_schema.regex_text import _alt, _repeat
    from hf_constrained.regex_parser import normalize_ranges
    trie: dict = {}
    for name in names:
        node = trie
        for ch in name:
            node = node.setdefault(ch, {})
        node[None] = True

    def walk(node):
        children = sorted(k for k in node if k is not None)
        alts = [] if None in node else [""]
        used = normalize_ranges((ord(c), ord(c)) for c in children)
        alts.append(_encode_charset(_subtract(_ALL, used)) + _repeat(_CANON_CHAR, 0, None))
        alts += [_encode_charset(((ord(c), ord(c)),)) + walk(node[c]) for c in children]
        return _alt(alts)
    return '"' + walk(trie) + '"'


@pytest.mark.parametrize("seed", range(12))
def test_keys_excluding_is_the_complement_of_the_names(seed):
    """Any key except the names: every JSON-encoded key over a small alphabet (non-ASCII, a
    quote, a backslash and a control character included, up to 3 characters, plus random longer
    ones and the names' neighbours) matches iff it is not a name, and the per-node form agrees."""
    from hf_constrained.json_schema.keys import _keys_excluding
    rng = random.Random(seed)
    alphabet = "ab\u00e9\"\\\n\u4e2d"
    names = sorted({"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 4)))
                    for _ in range(rng.randint(1, 7))})
    new = re.compile(_keys_excluding(tuple(names)))
    old = re.compile(_keys_excluding_per_node(names))
    keys = ["".join(p) for n in range(4) for p in itertools.product(alphabet, repeat=n)]
    keys += ["".join(rng.choice(alphabet) for _ in range(rng.randint(4, 9))) for _ in range(300)]
    keys += [n + c for n in names for c in alphabet] + [n[:-1] for n in names if n]
    for key in keys:
        text = json.dumps(key, ensure_ascii=False)
        want = key not in names
        assert bool(new.fullmatch(text)) == want, (names, key)
        assert bool(old.fullmatch(text)) == want, (names, key)
    for text in ['"\\u0061"', '"\\/"', '"a', 'a"', '"\\"']:  # other spellings agree too
        assert bool(new.fullmatch(text)) == bool(old.fullmatch(text)), (names, text)


def test_keys_excluding_shares_its_tail_in_the_automaton(deepseek):
    """Written with one tail and one piece for the characters no name has, the first mask of a
    key start (40 names, the 129k vocabulary) determinises a fraction of the states the per-node
    form does (one per node, tail copy and UTF-8 byte, up to the token depth): 219 vs 2,942."""
    from hf_constrained.automaton import LazyDFA
    from hf_constrained.index import TokenIndex
    from hf_constrained.json_schema.keys import _keys_excluding
    from hf_constrained.vocabulary import Vocabulary
    vocab = Vocabulary.from_tokenizer(deepseek)
    names = ("id name type description version created updated status owner email url tags items "
             "count value data meta config user group role title body source target path size date "
             "time key label color width height format mode state level parent children").split()
    counts, masks = [], []
    for regex in (_keys_excluding(tuple(sorted(names))), _keys_excluding_per_node(names)):
        dfa = LazyDFA.from_patterns([regex + ":"])
        index = TokenIndex(dfa, vocab, [deepseek.eos_token_id])
        masks.append(index.bits(dfa.walk(dfa.starts[0], b'"')).copy())
        counts.append(dfa.num_states)
    assert np.array_equal(masks[0], masks[1])
    assert counts[0] * 4 < counts[1], counts


def test_pydantic_formats_are_generated_as_values_pydantic_accepts():
    """Pydantic writes formats no draft defines (uuid4, ipv4network...): they were dropped as
    annotations, so almost every document had a string Pydantic refuses (0 of 100 for UUID4).
    Any string is valid under the schema, so these subsets are sound; Pydantic accepts each."""
    pydantic = pytest.importorskip("pydantic")
    from pydantic import networks

    from hf_constrained.json_schema import _FORMAT_LENGTHS, _length_range, parse_regex
    from hf_constrained.json_schema.tokens import PYDANTIC_FORMATS

    types = {"uuid1": pydantic.UUID1, "uuid3": pydantic.UUID3, "uuid4": pydantic.UUID4, "uuid5": pydantic.UUID5,
             "ipvanyaddress": networks.IPvAnyAddress, "ipv4network": ipaddress.IPv4Network,
             "ipv6network": ipaddress.IPv6Network, "ipvanynetwork": networks.IPvAnyNetwork,
             "ipv4interface": ipaddress.IPv4Interface, "ipv6interface": ipaddress.IPv6Interface,
             "ipvanyinterface": networks.IPvAnyInterface}
    rng = random.Random(0)
    for fmt, t in types.items():
        adapter = pydantic.TypeAdapter(t)
        schema = adapter.json_schema()
        assert schema["format"] == fmt
        regex = schema_to_regex(schema)
        assert regex != schema_to_regex({"type": "string"}), fmt  # honoured, not dropped
        assert _FORMAT_LENGTHS[fmt] == _length_range(parse_regex(PYDANTIC_FORMATS[fmt]))
        for _ in range(150):
            adapter.validate_json(random_match(regex, rng))
    assert re.fullmatch(schema_to_regex({"type": "string", "format": "uuid4"}),
                        '"123e4567-e89b-42d3-a456-426614174000"')
    assert not re.fullmatch(schema_to_regex({"type": "string", "format": "uuid4"}),
                            '"123e4567-e89b-42d3-c456-426614174000"')  # not the RFC 4122 variant
    with pytest.raises(SchemaError, match="unknown format 'uuid4'"):
        schema_to_regex({"type": "string", "format": "uuid4"}, strict=True)


@pytest.mark.parametrize("schema", [
    {"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": True},
    {"type": "array", "items": {"enum": ["a", "b", "c", "d"]}, "uniqueItems": True, "minItems": 2, "maxItems": 3},
    {"type": "array", "items": {"type": "boolean"}, "uniqueItems": True, "minItems": 1},
    {"type": "array", "items": {"enum": [1, 1.0, True, "x", 2, {"k": [1]}], "type": ["integer", "object"]},
     "uniqueItems": True, "maxItems": 2},
    {"type": "array", "items": {"$ref": "#/$defs/c"}, "uniqueItems": True, "$defs": {"c": {"enum": [None, 0, "0"]}}},
], ids=["enum", "bounds", "boolean", "equal-values-and-types", "ref"])
def test_unique_items_over_few_values(schema):
    """uniqueItems with an enum/const/boolean item schema: every generated array is valid, and
    every valid set of items is generated (in the schema's order; other orders are not)."""
    regex = schema_to_regex(schema)
    check = validator(schema)
    items = schema["items"]
    pool = items.get("enum") or schema.get("$defs", {}).get("c", {}).get("enum") or [True, False]
    generated, valid = set(), set()
    for r in range(0, 5):
        for combo in itertools.permutations(pool, r):
            text = json.dumps(list(combo), separators=(",", ":"))
            key = frozenset(json.dumps(v, sort_keys=True) for v in combo)  # the set, any order
            if check.is_valid(list(combo)):
                valid.add(key)
            if re.fullmatch(regex, text) is not None:
                assert check.is_valid(list(combo)), text
                generated.add(key)
    assert valid <= generated and generated


def test_unique_items_refusals_and_limits():
    with pytest.raises(SchemaError, match=r"'uniqueItems' at /uniqueItems.*few possible values"):
        schema_to_regex({"type": "array", "items": {"type": "string"}, "uniqueItems": True})
    with pytest.raises(SchemaError, match="next to prefixItems"):
        schema_to_regex({"type": "array", "prefixItems": [{"const": 1}], "items": {"enum": [2, 3]},
                         "uniqueItems": True})
    with pytest.raises(SchemaError, match="MAX_UNIQUE_VALUES"):
        schema_to_regex({"type": "array", "items": {"enum": list(range(100))}, "uniqueItems": True})
    with pytest.raises(SchemaError, match="no JSON value"):  # 2 distinct items of 1 possible value
        schema_to_regex({"type": "array", "items": {"const": "a"}, "uniqueItems": True, "minItems": 2})
    assert re.fullmatch(schema_to_regex({"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": True}),
                        '["a","b"]') and not re.fullmatch(
        schema_to_regex({"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": True}), '["b","a"]')


def test_pydantic_sets_of_enums():
    """set[Enum] and frozenset[Literal] export uniqueItems; they were refused."""
    import enum
    from typing import Literal

    pydantic = pytest.importorskip("pydantic")

    class Color(str, enum.Enum):
        RED = "red"
        GREEN = "green"
        BLUE = "blue"

    class Paint(pydantic.BaseModel):
        colors: set[Color]
        sizes: frozenset[Literal[1, 2, 3]] = frozenset()

    regex = schema_to_regex(Paint)
    rng = random.Random(0)
    for _ in range(100):
        Paint.model_validate_json(random_match(regex, rng))
    assert re.fullmatch(regex, '{"colors":["red","blue"],"sizes":[1,3]}')


def test_an_object_with_only_pattern_properties_gets_keys_matching_them():
    """A map with key patterns (pydantic's dict[constr(pattern=...), X]) and no properties or
    additionalProperties is generated closed: its keys match a pattern (they were any key, which
    the schema allows and pydantic refuses: 64% of its documents); a pattern that cannot be
    converted leaves keys free, as before."""
    schema = {"type": "object", "patternProperties": {"^x": {"type": "integer"}, "y$": {"type": "integer"}}}
    regex = check_samples(schema, n=100)
    rng = random.Random(1)
    for _ in range(100):
        assert all(k.startswith("x") or k.endswith("y") for k in json.loads(random_match(regex, rng)))
    assert matches(regex, {"x1": 1, "ay": 2}) and not matches(regex, {"z": 1})
    free = schema_to_regex({"type": "object", "patternProperties": {"(a)\\1": {"type": "integer"}}})
    assert matches(free, {"z": 1})
    pydantic = pytest.importorskip("pydantic")

    class Tags(pydantic.BaseModel):
        counts: dict[pydantic.constr(pattern="^x"), int]

    regex = schema_to_regex(Tags)
    for _ in range(100):
        Tags.model_validate_json(random_match(regex, rng))
