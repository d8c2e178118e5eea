"""Strings under ``pattern`` + ``format`` + ``minLength``/``maxLength``, and anchors anywhere.

Oracles, independent of the code under test:

* ``jsonschema.Draft202012Validator`` (format checker on) on the *decoded* string;
* Python's ``re.search`` / ``re.fullmatch`` for patterns and trees;
* brute force over every string up to a few characters of a small alphabet.

Both directions are checked where the conversion is exact: every valid string's
canonical JSON text matches the produced regex, and every JSON text that matches
(canonical or not: ``\\u00e9``, ``\\/``...) decodes to a valid string.
"""

from __future__ import annotations

import itertools
import json
import random
import re

import pytest
from jsonschema import Draft202012Validator

from hf_constrained.json_schema import SchemaError, _class, _emit, schema_to_regex
from hf_constrained.json_schema.strings import (
    ANY, NOTHING, TooComplex, alt, cat, length_range, rep, restrict_length, search_tree,
)
from hf_constrained.regex_parser import parse, parse_alternatives

CHECKER = Draft202012Validator.FORMAT_CHECKER


def _strings(alphabet: str, max_len: int):
    for n in range(max_len + 1):
        for t in itertools.product(alphabet, repeat=n):
            yield "".join(t)


def _valid(schema: dict, s: str) -> bool:
    return Draft202012Validator(schema, format_checker=CHECKER).is_valid(s)


def _check_exact(schema: dict, alphabet: str, max_len: int, extra=()) -> int:
    """Brute force: regex(canonical text) == validator(decoded) for all strings."""
    validator = Draft202012Validator(schema, format_checker=CHECKER)
    try:
        regex = re.compile(schema_to_regex(schema))
    except SchemaError as exc:  # an empty language: then nothing may be valid
        assert "no JSON value" in str(exc)
        assert not any(map(validator.is_valid, _strings(alphabet, max_len))), schema
        return 0
    seen = 0
    # \d, \w, \s (and negations) generate ASCII only: exact on ASCII, sound beyond
    shorthand = re.search(r"\\[dDwWsS]", schema.get("pattern", ""))
    for s in itertools.chain(_strings(alphabet, max_len), extra):
        ok = validator.is_valid(s)
        got = bool(regex.fullmatch(json.dumps(s, ensure_ascii=False)))
        if shorthand and not s.isascii():
            assert ok or not got, (schema, s)
        else:
            assert got == ok, (schema, s, ok)
        seen += ok
        # other spellings of the same string are never accepted if invalid
        if not ok:
            assert not regex.fullmatch(json.dumps(s)), (schema, s)
    return seen


def _sample(regex: str, rng: random.Random, n: int = 200):
    from test_json_schema import random_match

    return [random_match(regex, rng, max_extra=6) for _ in range(n)]


def _check_sound(schema: dict, n: int = 300, seed: int = 0) -> None:
    """Random documents drawn from the regex decode and validate."""
    regex = schema_to_regex(schema)
    validator = Draft202012Validator(schema, format_checker=CHECKER)
    for text in _sample(regex, random.Random(seed), n):
        doc = json.loads(text)
        assert validator.is_valid(doc), (schema, text)


# ---------------------------------------------------------------------------
# restrict_length on random trees, against brute force
# ---------------------------------------------------------------------------

A, B = ("cls", ((97, 97),)), ("cls", ((98, 98),))
AB = ("cls", ((97, 98),))


def _random_tree(rng: random.Random, depth: int = 0):
    r = rng.random()
    if depth > 3 or r < 0.3:
        return rng.choice([A, B, AB])
    if r < 0.55:
        return cat([_random_tree(rng, depth + 1) for _ in range(rng.randint(2, 4))])
    if r < 0.75:
        return alt([_random_tree(rng, depth + 1) for _ in range(rng.randint(2, 3))])
    m = rng.randint(0, 2)
    n = rng.choice([None, m, m + 1, m + 2])
    return rep(_random_tree(rng, depth + 1), m, n)


def _regex(tree) -> str:
    return _emit(tree, _class) if tree != NOTHING else None


@pytest.mark.parametrize("nest", [False, True])
@pytest.mark.parametrize("seed", range(40))
def test_restrict_length_random_trees(seed, nest, monkeypatch):
    if nest:  # exercise the nested form (normally from 8 lengths on) on small budgets
        import hf_constrained.json_schema.strings as strings

        monkeypatch.setattr(strings, "NEST_FROM", 0)
        monkeypatch.setattr(strings, "NEST_BLOCK", 2)
    rng = random.Random(seed)
    checked = 0
    for _ in range(15):
        tree = _random_tree(rng)
        lo = rng.randint(0, 4)
        hi = rng.choice([None, lo, lo + 1, lo + 3])
        original = _regex(tree)
        try:
            out = restrict_length(tree, lo, hi)
        except TooComplex:
            continue
        got = _regex(out)
        want_re = re.compile(original) if original is not None else None
        got_re = re.compile(got) if got is not None else None
        for s in _strings("ab", 7):
            want = bool(want_re and want_re.fullmatch(s)) and lo <= len(s) <= (hi if hi is not None else 99)
            assert bool(got_re and got_re.fullmatch(s)) == want, (tree, lo, hi, s)
        checked += 1
    assert checked >= 10


def test_restrict_length_rules():
    # fixed-length copies: the counts move
    assert restrict_length(rep(cat([A, B]), 0, None), 3, 7) == rep(cat([A, B]), 2, 3)
    # empty intersection
    assert restrict_length(rep(A, 5, 9), 0, 4) == NOTHING
    # several variable pieces, absorbed by an adjacent unbounded class
    t = cat([rep(A, 1, None), rep(AB, 0, None)])  # a+[ab]* == a[ab]*
    assert restrict_length(t, 0, 3) == cat([A, rep(AB, 0, 2)])
    # every match already fits: unchanged
    assert restrict_length(rep(A, 2, 3), 1, 5) == rep(A, 2, 3)
    assert length_range(restrict_length(cat([rep(A, 0, None), B, rep(AB, 0, 3)]), 2, 4)) == (2, 4)


def test_restrict_length_refuses_what_would_explode():
    word = rep(AB, 1, None)
    many = cat([word, B, word, A, word, B, word])  # four unbounded pieces share 300 characters
    with pytest.raises(TooComplex):
        restrict_length(many, 0, 300)


# ---------------------------------------------------------------------------
# search_tree: anchors anywhere, against re.search
# ---------------------------------------------------------------------------

def _random_pattern(rng: random.Random, depth: int = 0) -> str:
    r = rng.random()
    if depth > 2 or r < 0.3:
        return rng.choice(["a", "b", "[ab]", "^", "$", "a", "b"])
    if r < 0.55:
        return "".join(_random_pattern(rng, depth + 1) for _ in range(rng.randint(2, 3)))
    if r < 0.75:
        return "(" + "|".join(_random_pattern(rng, depth + 1) for _ in range(rng.randint(2, 3))) + ")"
    inner = _random_pattern(rng, depth + 1)
    return "(?:" + inner + ")" + rng.choice(["*", "+", "?", "{2}", "{0,2}", "{1,3}"])


@pytest.mark.parametrize("seed", range(30))
def test_search_tree_random_patterns(seed):
    rng = random.Random(seed)
    checked = 0
    for _ in range(20):
        pattern = _random_pattern(rng)
        try:
            compiled = re.compile(pattern)
            tree = search_tree(parse_alternatives(pattern, anchor_nodes=True))
        except (re.error, TooComplex):
            continue
        except Exception as exc:  # the parser refuses what re refuses
            if type(exc).__name__ in ("RegexSyntaxError",):
                continue
            raise
        got = _regex(tree)
        got_re = re.compile(got) if got is not None else None
        for s in _strings("ab", 5):
            want = compiled.search(s) is not None
            assert bool(got_re and got_re.fullmatch(s)) == want, (pattern, s)
        checked += 1
    assert checked >= 10


@pytest.mark.parametrize("pattern", [
    "^a$|^b$", "(^x)", "^(?:a|b)$", "(^$)|(^[ab]{2}$)", "^([^,]|$)", "(^a)|b$",
    "^(/?((\\.{2})|([a-z0-9\\-]*))($|/))*$", "a(^|b)", "(a|^)b", "(b$|a)+",
    "a^b", "^(^a)$", "a$b", "(?:^|a){3}b", "b(?:a|$){2,3}", "(?:^a|b)+$", "(?:^|a)*b(?:$|a)+",
])
def test_anchor_patterns_exact(pattern):
    schema = {"type": "string", "pattern": pattern}
    _check_exact(schema, "ab/.,x", 4)


@pytest.mark.parametrize("pattern", ["x(^|$)*y|(^a|b$)*", "(?:(^a|b$)x?){1,3}", "(^|$)(a|$)+"])
def test_both_anchor_kinds_in_repeated_groups_exact(pattern):
    _check_exact({"type": "string", "pattern": pattern}, "abx", 4)


# ---------------------------------------------------------------------------
# pattern + minLength / maxLength, exact, with escapes
# ---------------------------------------------------------------------------

EXTRA = ['"', "\\", "é", '"\\é', "a\\b", 'a"b', "\u00e9\u00e9", "ab\u2028"]


@pytest.mark.parametrize("pattern,lo,hi,alphabet", [
    ("^[0-9a-z-]*$", 2, 3, "a-0_"),
    ("[ab]{3}", 3, 3, "abc"),
    ("^I[a-z0-9-_]+$", 0, 3, "Ia-_"),
    ("^[a-z][a-z0-9_\\-]*[a-z0-9]$", 2, 4, "a0_-"),
    ("^[A-Za-z][A-Za-z0-9_]*", 1, 3, "a0_-"),         # unanchored end
    ("^[a ]+\\.[a]+$", 1, 11, "a."),                  # nested form (10 lengths)
    ("[a-z0-9_.-]+", 2, 4, "a.!\""),                   # contains-match
    ("^\\S+@\\S+$", 3, 4, "a@ \\"),
    ("^(?:\\S+\\s+){0,2}\\S+$", 0, 4, "a \""),
    ("^(\\d+\\.\\d+.*)$", 0, 5, "1.a"),
    ("^[0-9]{1,2}-?[0-9]{1,2}-?[0-9]$", 3, 4, "1-"),
    ("^([a-z]+):([a-z.]+)?:([a-z]+)$", 0, 5, "a:."),
    ("^(jpg|jpeg|png);[a-z]*$", 0, 6, "jpegn;"),
    ("^([\\w/-]|[\\w-][\\w/-]*[\\w-])$", 0, 3, "a/-é"),
    ("é+|\\\\+|\"+", 2, 3, "é\\\"a"),
    ("", 2, 3, "aé\""),
    ("^$|^ab", 1, 3, "ab"),
])
def test_pattern_with_lengths_exact(pattern, lo, hi, alphabet):
    schema = {"type": "string", "pattern": pattern, "minLength": lo, "maxLength": hi}
    assert _check_exact(schema, alphabet, hi + 1, EXTRA) > 0
    _check_sound(schema)


def test_pattern_with_min_length_only():
    schema = {"type": "string", "pattern": "^[AC]+-[AC]*$", "minLength": 4}
    _check_exact(schema, "AC-", 6)
    _check_sound(schema)


def test_empty_intersection_is_empty_language():
    with pytest.raises(SchemaError, match="no JSON value"):
        schema_to_regex({"type": "string", "pattern": "^[a-z]{5}$", "maxLength": 3})


def test_large_budget_many_pieces_refused_with_reason():
    schema = {"type": "string", "maxLength": 146,
              "pattern": "^([a-z0-9-]+):([a-z0-9\\.-]+):([a-z0-9-]+)?:([a-z0-9-]+)$"}
    with pytest.raises(SchemaError, match=r"maxLength.*short enough \(.*\)"):
        schema_to_regex(schema)


def test_json_length_counts_decoded_characters():
    # "é" is one character whether written raw or as \u00e9; '"' is one too.
    regex = re.compile(schema_to_regex({"type": "string", "pattern": "^[é\"a]+$", "maxLength": 2}))
    assert regex.fullmatch('"é\\""')
    assert regex.fullmatch('"aé"')
    assert not regex.fullmatch('"aéa"')


# ---------------------------------------------------------------------------
# format + lengths
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("fmt,lo,hi", [
    ("time", 0, 12), ("date-time", 21, 25), ("ipv4", 0, 9), ("hostname", 0, 9), ("ipv4", 12, 20),
])
def test_format_with_lengths(fmt, lo, hi):
    schema = {"type": "string", "format": fmt, "minLength": lo, "maxLength": hi}
    try:
        regex = schema_to_regex(schema)
    except SchemaError as exc:
        pytest.fail(f"refused: {exc}")
    validator = Draft202012Validator(schema, format_checker=CHECKER)
    for text in _sample(regex, random.Random(1), 300):
        assert validator.is_valid(json.loads(text)), text
        assert lo <= len(json.loads(text)) <= hi


# ---------------------------------------------------------------------------
# cap_length (formats' documented subset), intersect (pattern ∩ format)
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(20))
def test_cap_length_is_a_subset_within_the_bound(seed):
    from hf_constrained.json_schema.string_formats import cap_length

    rng = random.Random(seed)
    for _ in range(15):
        tree = _random_tree(rng)
        hi = rng.randint(0, 6)
        out = cap_length(tree, hi)
        original, got = _regex(tree), _regex(out)
        if got is None:
            continue
        assert length_range(out)[1] is not None and length_range(out)[1] <= hi
        for s in _strings("ab", 7):
            if re.fullmatch(got, s):
                assert re.fullmatch(original, s) and len(s) <= hi, (tree, hi, s)


@pytest.mark.parametrize("fmt,pattern", [
    ("[ab]+c?", "^ab"), ("[ab]+c?", "bc$"), ("[ab]+c?", "^a.*c$"), ("[ab]+c?", "^(ab|b)"),
    ("a[ab]*", "^[ab]{2}$"), ("[ab]*c[ab]*", "c"), ("(ab)+", "^aba.*bab$"), ("[abc]{1,4}", "^ab|ca$"),
])
def test_intersect_exact(fmt, pattern):
    from hf_constrained.json_schema.string_formats import intersect

    ftree = parse(fmt)
    ptree = search_tree(parse_alternatives(pattern, anchor_nodes=True))
    out = intersect(ptree, ftree, lambda t: re.fullmatch(fmt, t) is not None)
    assert out is not None
    got = _regex(out)
    for s in _strings("abc", 7):
        want = bool(re.fullmatch(fmt, s) and re.search(pattern, s))
        assert bool(got is not None and re.fullmatch(got, s)) == want, (fmt, pattern, s)


@pytest.mark.parametrize("schema,members", [
    ({"format": "uri", "pattern": "^https?://"}, ["http://a.io", "https://x.org/p?q#f"]),
    ({"format": "uri", "pattern": "^(wss?|wss?\\+unix)://"}, ["ws+unix://h.io:80", "wss://h.io"]),
    ({"format": "uri", "pattern": "^https://img\\.example\\.com/i/.*?(no-image)?\\.(gif|jpg)$"},
     ["https://img.example.com/i/x.gif", "https://img.example.com/i/.jpg"]),
    ({"format": "email", "pattern": "^.*?@.*.*$", "minLength": 3}, ["a@b.io"]),
    ({"format": "email", "maxLength": 1024}, ["a@b.io", "a.b@c.d.io"]),
    ({"format": "uri", "minLength": 1, "maxLength": 255}, ["http://a.io"]),
    ({"format": "email", "maxLength": 8}, ["a@b.io", "ab@c.io"]),
])
def test_format_with_pattern_or_length(schema, members):
    schema = {"type": "string", **schema}
    _check_sound(schema, n=300)
    regex = re.compile(schema_to_regex(schema))
    for m in members:
        assert regex.fullmatch(json.dumps(m)), m


def test_format_pattern_unsupported_shape_refused():
    with pytest.raises(SchemaError, match="pattern cannot be combined with format 'date-time'"):
        schema_to_regex({"type": "string", "format": "date-time", "pattern": "\\d{4}-\\d\\d"})


def test_module_examples_run():
    """strings.py / string_formats.py are subpackage modules, which tests/test_doctests.py does not collect."""
    import doctest

    import hf_constrained.json_schema.string_formats as formats
    import hf_constrained.json_schema.strings as strings

    for module, least in ((strings, 15), (formats, 5)):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted >= least, (module.__name__, result)
