"""The parser's shortcuts of issue #12, part 30: a group is parsed by ``group()`` straight from
``concatenation()``, ``quantifiers()`` runs only when a quantifier character follows, and a
``(?&name)`` call skips the group cache. Trees and errors are those of the general path
(``atom()`` then ``quantifiers()``), here spelt out, and languages those of ``re`` (positions of errors as main's parser gives them)."""

from __future__ import annotations

import random
import re

import pytest

from hf_constrained.errors import RegexSyntaxError, UnsupportedRegexError
from hf_constrained.regex_parser import _Parser, parse

A, B = ("cls", ((97, 97),)), ("cls", ((98, 98),))
AB = ("cat", (A, B))


@pytest.mark.parametrize("pattern, tree", [
    ("(?:ab)", AB),
    ("(?:ab)*", ("rep", AB, 0, None)),
    ("(?:ab)+?", ("rep", AB, 1, None)),
    ("(?:ab){2}", ("rep", AB, 2, 2)),
    ("(?:ab){,}", ("rep", AB, 0, None)),
    ("(?:ab){", ("cat", (AB, ("cls", ((123, 123),))))),
    ("(?:ab){x}", ("cat", (AB, ("cls", ((123, 123),)), ("cls", ((120, 120),)), ("cls", ((125, 125),))))),
    ("(?:a)(?:b)?", ("cat", (A, ("rep", B, 0, 1)))),
    ("(?:a)(?#c)*", ("rep", A, 0, None)),
    ("a(?:b)", AB),
])
def test_groups_and_their_quantifiers(pattern, tree):
    assert parse(pattern) == tree


@pytest.mark.parametrize("pattern, tree", [
    ("(?(DEFINE)(?P<d>ab))(?&d)", ("def", (("d", AB),), ("ref", "d"))),
    ("(?(DEFINE)(?P<d>ab))(?&d)*", ("def", (("d", AB),), ("rep", ("ref", "d"), 0, None))),
    ("(?(DEFINE)(?P<d>ab))(?&d){2}(?&d)?", ("def", (("d", AB),), ("cat", (("rep", ("ref", "d"), 2, 2),
                                                                          ("rep", ("ref", "d"), 0, 1))))),
    ("(?(DEFINE)(?P<d>a)(?P<e>(?&d)b))(?:(?&e)|(?&d))",
     ("def", (("d", A), ("e", ("cat", (("ref", "d"), B)))), ("alt", (("ref", "e"), ("ref", "d"))))),
])
def test_calls(pattern, tree):
    assert parse(pattern) == tree


@pytest.mark.parametrize("pattern, error, where", [
    ("(?&d)", RegexSyntaxError, 1),                              # no definitions: an unknown extension
    ("(?(DEFINE)(?P<d>a))(?&e)", UnsupportedRegexError, 19),      # not defined
    ("(?(DEFINE)(?P<d>(?&d)))b", UnsupportedRegexError, 16),      # not defined yet
    ("(?(DEFINE)(?P<d>a))(?&d)**", RegexSyntaxError, 25),         # multiple repeat
    ("(?:a)**", RegexSyntaxError, 6),
    ("(?:a)*+", UnsupportedRegexError, 6),                       # possessive
    ("(?:a){2,1}", RegexSyntaxError, 6),
])
def test_errors(pattern, error, where):
    with pytest.raises(error) as info:
        parse(pattern)
    assert info.value.pos == where, (info.value, info.value.pos)


def test_calls_outside_a_define_group_are_refused_as_before():
    """Without a leading (?(DEFINE)...) a (?&name) is not a call, whatever the cache holds."""
    parser = _Parser("(?:x)(?&x)")
    parser.subroutines = True
    with pytest.raises(RegexSyntaxError, match="unknown extension"):
        parser.parse()


PIECES = ["a", "b", "(?:a|b)", "(?:ab)", "(?:a(?:b)?)", "(?:)", "(?#c)", "[ab]", "\\.", "{"]
QUANTS = ["", "", "*", "+", "?", "{2}", "{1,3}", "*?", "{,2}", "??"]


@pytest.mark.parametrize("seed", range(6))
def test_random_patterns_match_as_re(seed):
    """Random concatenations of groups, comments and quantifiers: same acceptance as ``re``
    (or an error where ``re`` has one)."""
    rng = random.Random(seed)
    from hf_constrained.automaton import LazyDFA
    for _ in range(150):
        out = []
        for _ in range(rng.randint(1, 5)):
            piece, quant = rng.choice(PIECES), rng.choice(QUANTS)
            out.append(piece + ("" if piece in ("{", "(?#c)") else quant))
        pattern = "".join(out)
        try:
            compiled = re.compile(pattern)
        except re.error:
            with pytest.raises((RegexSyntaxError, UnsupportedRegexError)):
                parse(pattern)
            continue
        dfa = LazyDFA([parse(pattern)])
        for _ in range(20):
            text = "".join(rng.choice("ab.{") for _ in range(rng.randint(0, 6)))
            assert dfa.fullmatch(text.encode()) == bool(compiled.fullmatch(text)), (pattern, text)
