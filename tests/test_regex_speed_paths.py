"""The construction-speed shortcuts of issue #12 give exactly what the plain code gives:
the regex parser's literal runs, escaped punctuation and class-text cache (same trees as
the general path, checked against ``re``), its group-text cache (the same trees and errors as
a parser without it), and ``LazyDFA.explore``, the constructor's probe (the same states, in
the same order, as the textbook breadth-first walk)."""

from __future__ import annotations

import random
import re

import pytest

from hf_constrained.automaton import LazyDFA
from hf_constrained.errors import RegexSyntaxError, StateLimitError, UnsupportedRegexError
from hf_constrained.regex_parser import _CLASS_CACHE, _Parser, parse
from corpus import CORPUS, corpus_files, corpus_regexes

PIECES = ["a", "b", "ab", "\\.", "\\-", "\\\\", "\\{", "[a-c]", "[^a]", "[]a]", "[^]b]", "[\\]a]",
          "[\\x41-\\x43]", "[\\d.]", "(?:a|b)", "(?#c)", "{", "}", "]", "a{2}", "a{,}", "é", "\\u00e9"]
QUANTS = ["", "", "*", "+", "?", "{2}", "{1,3}", "*?", "{,2}"]


def _uncached(pattern: str):
    """The tree with the class cache off (a shorthand override no class uses)."""
    parser = _Parser(pattern, classes={"_": None})
    parser.subroutines = True
    return parser.parse()


def _random_pattern(rng: random.Random) -> str:
    out = []
    for _ in range(rng.randint(1, 8)):
        piece = rng.choice(PIECES)
        quant = rng.choice(QUANTS)
        if piece in ("(?#c)", "{") or piece.endswith("}"):
            quant = ""
        out.append(piece + quant)
    return "".join(out)


def _words(rng: random.Random, n: int) -> list:
    alphabet = "ab.-\\{}]Aé0c"
    return [""] + ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6))) for _ in range(n)]


def test_trees_match_the_uncached_parser_and_re():
    rng = random.Random(12)
    words = _words(rng, 300)
    for _ in range(400):
        pattern = _random_pattern(rng)
        try:
            compiled = re.compile(pattern)
        except re.error:
            with pytest.raises(RegexSyntaxError):
                parse(pattern)
            continue
        tree = parse(pattern)
        assert tree == _uncached(pattern) == parse(pattern), pattern  # cached twice, uncached
        dfa = LazyDFA([tree])
        for w in words:
            assert dfa.fullmatch(w.encode()) == bool(compiled.fullmatch(w)), (pattern, w)


@pytest.mark.parametrize("pattern, tree", [
    ("ab*", ("cat", (("cls", ((97, 97),)), ("rep", ("cls", ((98, 98),)), 0, None)))),
    ("ab{2}", ("cat", (("cls", ((97, 97),)), ("rep", ("cls", ((98, 98),)), 2, 2)))),
    ("a\\.+", ("cat", (("cls", ((97, 97),)), ("rep", ("cls", ((46, 46),)), 1, None)))),
    ("ab(?#x)*", ("cat", (("cls", ((97, 97),)), ("rep", ("cls", ((98, 98),)), 0, None)))),
    ("a{", ("cat", (("cls", ((97, 97),)), ("cls", ((123, 123),))))),
    ("[]a][]a]", ("cat", (("cls", ((93, 93), (97, 97))), ("cls", ((93, 93), (97, 97)))))),
])
def test_shortcut_trees(pattern, tree):
    assert parse(pattern) == tree == _uncached(pattern)


def test_class_cache_keeps_errors_and_bounds():
    with pytest.raises(RegexSyntaxError, match="unterminated character set"):
        parse("[a-")
    with pytest.raises(RegexSyntaxError, match="bad character range"):
        parse("[z-a]")
    # an error is never cached ...
    with pytest.raises(RegexSyntaxError, match="bad character range"):
        parse("x[z-a]")  # ... so the same text fails again
    _CLASS_CACHE.clear()
    many = "".join(f"[\\x{i:02x}-\\x7f]" for i in range(0x30, 0x7f))
    assert parse(many) == _uncached(many)


PATTERNS = [r"[ab]c*", r"(a|b)*a(a|b){6}", r"\{\"a\":(?:[0-9]|[1-9][0-9]{1,5})(?:,\"b\":\"[^\"\\]{0,40}\")?\}",
            r"(?(DEFINE)(?P<d0>\[(?:[0-9]+(?:,[0-9]+)*)?\]))\{\"x\":(?&d0),\"y\":(?&d0)\}",
            r"(?:[ab]{0,20}){0,20}c"]


def _textbook_explore(dfa, limit):
    """Breadth-first determinisation with ``np.unique`` successors (the reference)."""
    import numpy as np
    frontier = list(dict.fromkeys(dfa.starts))
    seen = set(frontier)
    i = 0
    while i < len(frontier):
        if i >= limit:
            return False
        s = frontier[i]
        i += 1
        dfa.expand(s)
        for t in np.unique(dfa.table[s]):
            if int(t) not in seen:
                seen.add(int(t))
                frontier.append(int(t))
    return True


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("limit", [1, 5, 128])
@pytest.mark.parametrize("strip", [False, True])
def test_explore_is_the_textbook_walk(pattern, limit, strip):
    a = LazyDFA.from_patterns([pattern], strip_leading_space=strip)
    b = LazyDFA.from_patterns([pattern], strip_leading_space=strip)
    assert a.explore(limit) == _textbook_explore(b, limit)
    n = a.num_states
    assert n == b.num_states and a._keys == b._keys
    assert (a.table[:n] == b.table[:n]).all() and (a.expanded[:n] == b.expanded[:n]).all()


def test_explore_raises_where_the_textbook_walk_raises():
    for kwargs in ({"max_states": 40}, {"max_nfa_states": 60}):
        with pytest.raises(StateLimitError) as ea:
            LazyDFA.from_patterns([r"(?:[ab]{0,9}){0,9}c(a|b)*a(a|b){8}"], **kwargs).explore(128)
        with pytest.raises(StateLimitError) as eb:
            _textbook_explore(LazyDFA.from_patterns([r"(?:[ab]{0,9}){0,9}c(a|b)*a(a|b){8}"], **kwargs), 128)
        assert str(ea.value) == str(eb.value)


# ------------------------------------------------------------------ repeated groups (part 9)
GROUPS = ["(?:a|bc)", "(?:[0-9]+(?:\\.[0-9]+)?)", "(x(?:y|z)*)", "(?:\\((?:a|\\)))", "(?:[()]|\\[)",
          "(?:[]()]b)", "(?:(?#(()a)", "(?:a{2,3}|(?:b|c){,2})", "(?:)"]


def _plain_parse(pattern: str):
    parser = _Parser(pattern, groups=False)
    parser.subroutines = True
    return parser.parse()


def _repeated_group_patterns(rng: random.Random, n: int) -> list:
    out = []
    for _ in range(n):
        parts = [rng.choice(GROUPS) + rng.choice(QUANTS) if rng.random() < 0.7 else _random_pattern(rng)
                 for _ in range(rng.randint(2, 7))]
        body = "".join(parts)
        if rng.random() < 0.3:
            body = "(?(DEFINE)(?P<d0>" + rng.choice(GROUPS) + "))" + body + "(?&d0)"
        out.append(body)
    return out


def test_group_cache_matches_the_plain_parser():
    rng = random.Random(9)
    words = _words(rng, 200) + ["ab" * k for k in range(4)] + ["1.5", "x", "xyz", "bcbc"]
    for pattern in _repeated_group_patterns(rng, 400):
        try:
            expected = _plain_parse(pattern)
        except RegexSyntaxError as e:
            with pytest.raises(RegexSyntaxError) as got:
                parse(pattern)
            assert str(got.value) == str(e)
            continue
        tree = parse(pattern)
        assert tree == expected, pattern
        if "(?(DEFINE)" not in pattern:
            compiled, dfa = re.compile(pattern), LazyDFA([tree])
            for w in words:
                assert dfa.fullmatch(w.encode()) == bool(compiled.fullmatch(w)), (pattern, w)


def test_group_cache_keeps_errors():
    # a named group is never taken from the cache: its name is registered again
    with pytest.raises(RegexSyntaxError, match="redefinition of group name 'a'"):
        parse("(?:(?P<a>x))(?:(?P<a>x))")
    # a group read at one nesting level is not reused deeper, past the limit
    g = "(" * 100 + "a" + ")" * 100
    with pytest.raises(RegexSyntaxError, match="too deeply nested"):
        _plain_parse(g + "(" * 120 + g + ")" * 120)
    with pytest.raises(RegexSyntaxError, match="too deeply nested"):
        parse(g + "(" * 120 + g + ")" * 120)
    assert parse("(" * 60 + g + ")" * 60 + g) == _plain_parse("(" * 60 + g + ")" * 60 + g)
    # a call is only valid after its definition, cached or not
    with pytest.raises(Exception, match="subroutine call"):
        parse("(?(DEFINE)(?P<d0>(?:a))(?P<d1>(?:a)(?&d2))(?P<d2>b))x")


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"JSONSchemaBench corpus not found at {CORPUS}")
def test_group_cache_on_corpus_regexes():
    """The first corpus schemas' regexes (shared definitions, as JSONProcessor makes them):
    the same trees as without the cache, and the cache is used."""
    hits = checked = 0
    for path, regex in corpus_regexes(corpus_files(5)):
        parser = _Parser(regex)
        parser.subroutines = True
        tree = parser.parse()
        assert tree == _plain_parse(regex), path
        hits += len(parser._groups) < regex.count("(")
        checked += 1
    assert checked >= 20 and hits >= checked // 2, (checked, hits)


def _error(pattern):
    """``(type, position, message without the position and pointer)`` of parsing ``pattern``,
    or None when it parses."""
    try:
        parse(pattern)
    except (RegexSyntaxError, UnsupportedRegexError) as e:
        return type(e), e.pos, str(e).split("\n")[0].replace(f"position {e.pos}", "")
    return None


@pytest.mark.parametrize("tail", ["", "b", "??", "?b", "*", "+", "{2}", "{1,3}", "{", "{,}", "{2,1}", "|b",
                                  ")", "?*", "?+", "?{2}", "??*", "(?#c)*"])
@pytest.mark.parametrize("lead", ["", "x", "\\.", "(?:y)", "xy", "\\.xy", "x|y"])
def test_optional_literal_shortcut_is_the_general_path(lead, tail):
    """``a?`` (JSON's `` ?``) is parsed in concatenation() without atom()/quantifiers(): the
    same tree as the general path (``[a]?``: a class always takes it), and the same error
    at the same place, whatever follows."""
    short, general = lead + "a?" + tail, lead + "[a]?" + tail
    expected = _error(general)
    if expected is not None:
        kind, pos, msg = expected
        assert _error(short) == (kind, pos - 2, msg), short
        return
    tree = parse(short)
    assert tree == parse(general), short
    compiled, dfa = re.compile(short), LazyDFA([tree])
    for w in ["", "a", "aa", "x", "xa", ".a", "ya", "ab", "b", "aab", "aaa", "xaa"]:
        assert dfa.fullmatch(w.encode()) == bool(compiled.fullmatch(w)), (short, w)
