"""Tests of hf_constrained.automaton against independent oracles.

* full matches: Python's ``re.fullmatch`` on the decoded text;
* prefix liveness (``walk(...) != DEAD``): the ``regex`` module's partial
  matching (``regex.fullmatch(p, s, partial=True)``), restricted to characters
  on which ``re`` and ``regex`` agree about ``\\d``, ``\\w`` and ``\\s``;
* UTF-8: a vectorised encoder checked against ``str.encode`` and Python's
  incremental UTF-8 decoder for byte-level validity.
"""

import functools
import itertools
import random
import re
import time

import numpy as np
import pytest

regex = pytest.importorskip("regex")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from hf_constrained.automaton import DEAD, LazyDFA  # noqa: E402
from hf_constrained.errors import (  # noqa: E402
    EmptyLanguageError,
    RegexSyntaxError,
    StateLimitError,
    UnsupportedRegexError,
)
from hf_constrained.forest import _ALT, _CAT, _CLS, _REF, _REP, END, utf8_sequences  # noqa: E402
from hf_constrained.regex_parser import normalize_ranges  # noqa: E402

PATTERNS = [
    "abc",
    "a|b|c",
    "[a-c]+x",
    "[^a-c]*",
    "[^\\n]{2,3}",
    "é+",
    "中文|中国",
    "😀{1,2}",
    "[😀-😂é]*z",
    "\\d+",
    "\\D\\d",
    "\\w{2}",
    "\\W*",
    "\\s?\\S",
    "a{3}",
    "a{2,4}b",
    "(?:ab){0,3}",
    "a{2,}",
    "(a|bc)*d",
    "((a|b)(c|d)?)+",
    "(|a|bb)c",
    "a(|b)(c|)",
    "a*?b",
    "(ab)+?c",
    "a??b",
    ".",
    ".*é.*",
    "a.b",
    "[.]",
    "x(?:y|z{0,2})*",
    "[\\d\\s]+",
    "[^\\W\\d]+",
    "-?\\d+(?:\\.\\d+)?",
    '"(?:[^"\\\\]|\\\\.)*"',
    "^(a|b)$",
    "\\x41\\u00e9\\U0001F600",
    "[\\u4e00-\\u9fff]{1,3}",
    "(?P<g>ab|c)+",
    "a(?#comment)*b",
    "[]a-]+",
    "",
    "(?:)",
    "\\N{EM DASH}+",
    "(?:a|b)*a(?:a|b){2}",
    "[ -~]{0,5}",
    "\\.\\*\\+\\?",
    "é{2}|e\u0301",
    "[^é中😀]+",
    "[\u07ff-\u0801\uffff\U00010000\U0010ffff]+",
    "(?:[^\\s\\S]|a)b",
    "[^\\s\\S]*x?",
]

# Characters random strings are built from: ASCII, every UTF-8 length and the
# boundaries between lengths, Unicode digits/spaces, combining marks.
MIXED = (
    list("abcdxyz ABCZ019_-.\"\\\t\n\r")
    + ["é", "e", "ê", "中", "文", "国", "😀", "😁", "😂", "😃", "٣", "\u00a0", "\u2028",
       "\x00", "\x7f", "\x80", "\u07ff", "\u0800", "\uffff", "\U00010000", "\U0010ffff",
       "\u0301", "\u2014", "z"]
)


def _agrees(c):
    return all(
        (re.fullmatch(k, c) is None) == (regex.fullmatch(k, c) is None)
        for k in ("\\d", "\\w", "\\s")
    )


@functools.lru_cache(maxsize=None)
def agrees(c):
    return _agrees(c)


def text_agrees(s):
    return all(agrees(c) for c in s)


@functools.lru_cache(maxsize=None)
def dfa_for(patterns, **kw):
    return LazyDFA.from_patterns(list(patterns), **kw)


def re_full(p, s):
    return re.fullmatch(p, s) is not None


# The regex module gets some patterns wrong, so liveness is checked against an
# equivalent pattern (same language under Python's re):
# * partial matching with lazy quantifiers: regex.fullmatch("a*?b", "ax",
#   partial=True) is a match; the greedy pattern is right;
# * regex reads "[^\\s\\S]" as a class that matches "[" (even without partial).
GREEDY = {"a*?b": "a*b", "(ab)+?c": "(ab)+c", "a??b": "a?b"}
LIVENESS_EQUIV = dict(GREEDY, **{"(?:[^\\s\\S]|a)b": "ab", "[^\\s\\S]*x?": "x?"})


def regex_live(p, s):
    return regex.fullmatch(LIVENESS_EQUIV.get(p, p), s, partial=True) is not None


def live(dfa, data, index=0):
    return dfa.walk(dfa.starts[index], data) != DEAD


def check_string(dfa, p, s, index=0, check_prefixes=True):
    """Full match and (optionally) the liveness of every code-point prefix."""
    b = s.encode("utf-8")
    assert dfa.fullmatch(b, index) == re_full(p, s), (p, s)
    if not check_prefixes or not text_agrees(s):
        return
    state = dfa.starts[index]
    for k, c in enumerate(s):
        enc = c.encode("utf-8")
        state = dfa.walk(state, enc)
        expected = regex_live(p, s[: k + 1])
        assert (state != DEAD) == expected, (p, s[: k + 1])
        if state != DEAD:
            # a live prefix: every byte prefix of it is live too
            for j in range(len(enc) - 1):
                assert dfa.walk(dfa.starts[index], s[:k].encode() + enc[: j + 1]) != DEAD
        else:
            break


def random_strings(p, n, seed):
    rng = random.Random(seed)
    alphabet = MIXED + sorted(set(p))
    out = ["", p]
    for _ in range(n):
        out.append("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8))))
    return out


# ---------------------------------------------------------------- sanity of the oracles
def test_oracles_are_sensitive():
    assert regex_live("abc", "ab") and not regex_live("abc", "ax")
    assert regex_live("a{3}", "aa") and not regex_live("a{3}", "aaaa")
    assert not regex_live("a*?b", "ax") and regex_live("a*?b", "aa")
    for p, g in GREEDY.items():
        assert p in PATTERNS and regex.sub(r"([*+?])\?", r"\1", p) == g
    for p, q in LIVENESS_EQUIV.items():  # the substitutes have the same language
        assert p in PATTERNS
        for t in ["", "a", "b", "ab", "x", "xx", "aab", "c", "abc", "(", "["]:
            assert re_full(p, t) == re_full(q, t)
    assert re_full("a|b", "b") and not re_full("a|b", "ab")
    # some characters really disagree between re and regex, so the filter matters
    assert not all(agrees(chr(c)) for c in range(0x80, 0x3000))


def test_docstring_example():
    dfa = LazyDFA.from_patterns([r"ab|ac"])
    s = dfa.walk(dfa.starts[0], b"a")
    assert dfa.is_accepting(dfa.walk(s, b"c"))
    assert dfa.walk(s, b"x") == DEAD
    assert not dfa.is_accepting(s)


# ---------------------------------------------------------------- random differential
@pytest.mark.parametrize("pattern", PATTERNS)
def test_random_strings_match_re_and_regex_partial(pattern):
    dfa = dfa_for((pattern,))
    for s in random_strings(pattern, 250, pattern):
        check_string(dfa, pattern, s)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_matching_strings_and_near_misses(pattern):
    """Strings sampled from the regex with hypothesis, then mutated."""
    dfa = dfa_for((pattern,))
    strat = st.from_regex(pattern, fullmatch=True)
    mutation = st.tuples(
        st.sampled_from(["none", "drop", "insert", "replace", "double", "truncate", "append"]),
        st.integers(0, 64),
        st.sampled_from(MIXED + sorted(set(pattern))),
    )
    hits = []

    @settings(max_examples=25, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(s=strat, mut=mutation)
    def run(s, mut):
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:
            return  # a lone surrogate: cannot be fed as UTF-8
        assert re.fullmatch(pattern, s), "hypothesis produced a non-match"
        assert dfa.fullmatch(s.encode()), (pattern, s)
        hits.append(s)
        op, k, c = mut
        k = k % (len(s) + 1)
        t = {
            "none": s,
            "drop": s[:k] + s[k + 1:],
            "insert": s[:k] + c + s[k:],
            "replace": s[:k] + c + s[k + 1:],
            "double": s + s,
            "truncate": s[:k],
            "append": s + c,
        }[op]
        check_string(dfa, pattern, t)

    run()
    assert hits, "no example was checked"


# ---------------------------------------------------------------- byte level
# Well-formed UTF-8 byte sequences, Unicode Standard table 3-7.
_WELL_FORMED = [
    [(0x00, 0x7F)],
    [(0xC2, 0xDF), (0x80, 0xBF)],
    [(0xE0, 0xE0), (0xA0, 0xBF), (0x80, 0xBF)],
    [(0xE1, 0xEC), (0x80, 0xBF), (0x80, 0xBF)],
    [(0xED, 0xED), (0x80, 0x9F), (0x80, 0xBF)],
    [(0xEE, 0xEF), (0x80, 0xBF), (0x80, 0xBF)],
    [(0xF0, 0xF0), (0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF)],
    [(0xF1, 0xF3), (0x80, 0xBF), (0x80, 0xBF), (0x80, 0xBF)],
    [(0xF4, 0xF4), (0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF)],
]


def _valid_prefix(b):
    """b is a prefix of some well-formed UTF-8 text (Python's incremental
    decoder cannot say: it takes b"\\xed\\xa0" for an unfinished character)."""
    i = 0
    while i < len(b):
        for row in _WELL_FORMED:
            k = 0
            while k < len(row) and i + k < len(b) and row[k][0] <= b[i + k] <= row[k][1]:
                k += 1
            if k == len(row):
                i += k
                break
            if k > 0 and i + k == len(b):
                return True  # an unfinished character
        else:
            return False
    return True


def _valid(b):
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def test_valid_prefix_oracle():
    assert _valid_prefix(b"") and _valid_prefix(b"a\xc3") and _valid_prefix(b"\xf4\x8f\xbf")
    assert not _valid_prefix(b"\xed\xa0") and not _valid_prefix(b"\xe0\x80")
    assert not _valid_prefix(b"\xc3a") and not _valid_prefix(b"\xf4\x90")
    rng = random.Random(1)
    for _ in range(3000):
        text = "".join(rng.choice(MIXED) for _ in range(3)).encode()
        assert all(_valid_prefix(text[:k]) for k in range(len(text) + 1))
        b = bytes(rng.randrange(256) for _ in range(rng.randint(0, 6)))
        if _valid(b):
            assert _valid_prefix(b)
        if _valid_prefix(b) and not _valid(b):
            # then some completion is valid
            assert any(_valid(b + bytes([x]) + b"\x80" * k) for x in range(0x80, 0xC0) for k in range(3))


def test_any_text_accepts_exactly_valid_utf8_up_to_two_bytes():
    dfa = dfa_for(("[\\s\\S]*",))
    start = dfa.starts[0]
    for n in (0, 1, 2):
        for t in itertools.product(range(256), repeat=n):
            b = bytes(t)
            state = dfa.walk(start, b)
            assert (state != DEAD) == _valid_prefix(b), b
            assert dfa.is_accepting(state) == _valid(b), b


def test_any_text_on_random_longer_byte_strings():
    dfa = dfa_for(("[\\s\\S]*",))
    rng = random.Random(7)
    interesting = [0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2,
                   0xDF, 0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5,
                   0xF8, 0xFF]
    for _ in range(6000):
        b = bytes(rng.choice(interesting) for _ in range(rng.randint(1, 5)))
        state = dfa.walk(dfa.starts[0], b)
        assert (state != DEAD) == _valid_prefix(b), b
        assert dfa.is_accepting(state) == _valid(b), b


@pytest.mark.parametrize("pattern", [".", "[^a]", "\\D", "\\W", "\\S", "[^\\n]"])
def test_invalid_utf8_never_matches(pattern):
    dfa = dfa_for((pattern,))
    for b in [b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xe0\x9f\xbf", b"\xed\xa0\x80",
              b"\xed\xbf\xbf", b"\xf0\x80\x80\x80", b"\xf0\x8f\xbf\xbf", b"\xf4\x90\x80\x80",
              b"\xf5\x80\x80\x80", b"\xff", b"\x80", b"\xbf", b"\xc3", b"\xe4\xb8",
              b"\xf0\x9f\x98"]:
        assert not dfa.fullmatch(b), b
    for b in [b"\xc0", b"\xc1", b"\xe0\x80", b"\xed\xa0", b"\xf0\x80", b"\xf4\x90", b"\xf5",
              b"\xff", b"\x80"]:
        assert dfa.walk(dfa.starts[0], b) == DEAD, b
    for c in ["\x00", "\x7f", "\x80", "\u07ff", "\u0800", "\ud7ff", "\ue000", "\uffff",
              "\U00010000", "\U0010ffff", "é", "😀"]:
        assert dfa.fullmatch(c.encode()) == re_full(pattern, c), c


def test_mid_character_liveness_exact():
    """A prefix ending one byte before a character's end is live iff some
    character completing it continues a live prefix (checked with regex)."""
    rng = random.Random(11)
    patterns = ["é+x", "[é-ê]x|ë", "[😀-😂]+", "中文|丫", "[^é]", "\\u07ff|\\u0800",
                "[\\u0780-\\u07c0]b", "a[^\\u0080-\\u00bf]", "[\U0010fff0-\U0010ffff]"]
    for p in patterns:
        dfa = dfa_for((p,))
        chars = sorted({c for c in p if ord(c) >= 0x80} | {"é", "ê", "😁", "中", "\u07ff", "\u0800", "\x80", "\U0010fffe"})
        for _ in range(40):
            s = "".join(rng.choice(chars + ["a", "x", "b"]) for _ in range(rng.randint(0, 3)))
            c = rng.choice(chars)
            enc = c.encode()
            partial = enc[:-1]
            candidates = []
            for last in range(0x80, 0xC0):
                try:
                    candidates.append((partial + bytes([last])).decode())
                except UnicodeDecodeError:
                    pass
            assert c in candidates
            if not text_agrees(s + "".join(candidates)):
                continue
            expected = any(regex_live(p, s + d) for d in candidates)
            got = dfa.walk(dfa.starts[0], s.encode() + partial) != DEAD
            assert got == expected, (p, s, partial)


# ---------------------------------------------------------------- DFA invariants
@pytest.mark.parametrize("pattern", ["(a|bc)*d", "[^a-c]*", ".*é.*", "[😀-😂é]*z", "\\w{2}",
                                     "(?:a|b)*a(?:a|b){2}", '"(?:[^"\\\\]|\\\\.)*"'])
def test_explored_dfa_invariants(pattern):
    dfa = LazyDFA.from_patterns([pattern])
    assert dfa.explore(10_000) is True
    n = dfa.num_states
    assert dfa.expanded[:n].all()
    table = dfa.table[:n]
    assert (table >= 0).all() and (table < n).all()
    assert (table[DEAD] == DEAD).all() and not dfa.is_accepting(DEAD)
    # every non-dead state can still reach an accepting state
    good = set(np.flatnonzero(dfa.accepting[:n]).tolist())
    changed = True
    while changed:
        changed = False
        for s in range(1, n):
            if s not in good and any(int(t) in good for t in table[s]):
                good.add(s)
                changed = True
    assert good == set(range(1, n))
    # exploring again creates nothing new
    assert dfa.explore(10_000) is True and dfa.num_states == n


def test_explore_limit_reports_incomplete():
    dfa = LazyDFA.from_patterns(["(a|b)*a(a|b){5}"])
    assert dfa.explore(5) is False
    assert dfa.explore(10_000) is True
    assert dfa.num_states >= 2 ** 6  # the classic exponential blow-up, all of it


# ---------------------------------------------------------------- several patterns
def test_multi_pattern_each_index_has_its_own_language():
    pats = ["a+", "b+", "a|b", "[ab]*c", "é|中", "\\d{2}", "", "(?:ab)*"]
    dfa = LazyDFA.from_patterns(pats)
    assert len(dfa.starts) == len(pats)
    singles = [LazyDFA.from_patterns([p]) for p in pats]
    rng = random.Random(3)
    alphabet = ["a", "b", "c", "é", "中", "1", "2", " "]
    strings = ["", "a", "b", "c", "ab", "é", "中", "12", "aaa"] + [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 5))) for _ in range(400)
    ]
    for s in strings:
        b = s.encode()
        for i, p in enumerate(pats):
            assert dfa.fullmatch(b, i) == re_full(p, s), (p, s)
            assert dfa.fullmatch(b, i) == singles[i].fullmatch(b)
            assert live(dfa, b, i) == regex_live(p, s), (p, s)
    # not all the same language: some string separates every pair of patterns
    for i, j in itertools.combinations(range(len(pats)), 2):
        assert any(dfa.fullmatch(s.encode(), i) != dfa.fullmatch(s.encode(), j) for s in strings)


def test_same_pattern_twice():
    dfa = LazyDFA.from_patterns(["ab", "ab", "a"])
    assert dfa.fullmatch(b"ab", 0) and dfa.fullmatch(b"ab", 1) and not dfa.fullmatch(b"ab", 2)
    assert dfa.fullmatch(b"a", 2) and not dfa.fullmatch(b"a", 0)


# ---------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "patterns",
    [["[^\\s\\S]"], ["a[^\\s\\S]"], ["[^\\w\\W]+b"], ["\\ud800"], ["a\\udfffb"],
     ["[\\ud800-\\udfff]"], ["(?:[^\\d\\D])+"], ["a", "[^\\s\\S]"], ["[^\\s\\S]", "b"],
     ["(?:[^\\s\\S]x|[^\\d\\D]y)"]],
)
def test_empty_language(patterns):
    with pytest.raises(EmptyLanguageError):
        LazyDFA.from_patterns(patterns)


@pytest.mark.parametrize(
    "pattern,yes,no",
    [("[^\\s\\S]*", "", "a"), ("[^\\s\\S]?a", "a", ""), ("x|[^\\s\\S]", "x", ""),
     ("a|\\ud800", "a", "b"), ("(?:[^\\s\\S]x)?y", "y", "xy"), ("a(?:[^\\s\\S]){0}", "a", "")],
)
def test_partly_empty_patterns_are_fine(pattern, yes, no):
    dfa = LazyDFA.from_patterns([pattern])
    assert dfa.fullmatch(yes.encode()) and not dfa.fullmatch(no.encode())


def test_syntax_and_unsupported_errors_propagate():
    with pytest.raises(RegexSyntaxError):
        LazyDFA.from_patterns(["a", "(b"])
    with pytest.raises(UnsupportedRegexError):
        LazyDFA.from_patterns(["(a)\\1"])


def test_state_limit_when_exploring():
    dfa = LazyDFA.from_patterns(["(a|b)*a(a|b){30}"], max_states=1000)
    with pytest.raises(StateLimitError, match="max_states=1000"):
        dfa.explore(10**9)
    assert dfa.num_states <= 1000


def test_state_limit_when_walking():
    dfa = LazyDFA.from_patterns(["(a|b)*a(a|b){30}"], max_states=300)
    rng = random.Random(5)
    with pytest.raises(StateLimitError):
        for _ in range(200):
            s = bytes(rng.choice(b"ab") for _ in range(40))
            dfa.walk(dfa.starts[0], s)
    assert dfa.num_states <= 300


def test_state_limit_not_hit_when_pattern_is_small():
    dfa = LazyDFA.from_patterns(["(a|b)*a(a|b){30}"], max_states=5000)
    # walking a few strings only determinises what they visit
    assert dfa.fullmatch(b"a" * 31)
    assert dfa.fullmatch(b"b" * 5 + b"a" + b"b" * 30)
    assert not dfa.fullmatch(b"b" * 31)
    assert dfa.num_states < 200


@pytest.mark.parametrize(
    "pattern,small",
    # ``small`` has the same language as ``pattern`` on strings of up to 12 characters
    # (the oracle, the regex module, cannot compile the huge ones).
    [("(?:a{100000}){100000}", "a{20}"), ("(?:(?:a{1000}){1000}){1000}", "a{20}"),
     ("(?:[\\s\\S]{100}){100}", "[\\s\\S]{20}"), ("x{2000}", "x{20}"),
     ("(?:ab|cd){1000,}", "(?:ab|cd){20,}"), ("(?:a{0,100000}){0,100000}", "a*"),
     ("[a-z]{1,100000}@[a-z]{1,100000}", "[a-z]{1,20}@[a-z]{1,20}")],
)
def test_huge_counted_repetitions_are_lazy(pattern, small):
    # Counters, not copies: construction and a first walk cost what they visit.
    t = time.monotonic()
    dfa = LazyDFA.from_patterns([pattern])
    rng = random.Random(0)
    for _ in range(30):
        s = "".join(rng.choice("abcdx@") for _ in range(rng.randrange(13)))
        for k in range(len(s) + 1):
            state = dfa.walk(dfa.starts[0], s[:k].encode())
            assert (state != DEAD) == _partial_ok(small, s[:k]), (pattern, s[:k])
            assert dfa.is_accepting(state) == (re.fullmatch(small, s[:k]) is not None)
    assert time.monotonic() - t < 2.0
    assert dfa.num_states < 500 and len(dfa._pos_keys) < 5000


def _partial_ok(pattern, s):
    return regex.fullmatch(pattern, s, partial=True) is not None


def test_counter_boundaries_exact():
    for pattern in ["x{3}", "x{2,4}", "x{3,}", "(?:xy){2,3}", "(?:x{2}){2,3}", "(?:x?y){2,3}",
                    "(?:x|yz){0,2}z", "(?:(?:x{1,2})y){2}", "(?:x*){3,5}y", "(?:x{2,}y){2,}"]:
        dfa = LazyDFA.from_patterns([pattern])
        for n in range(200):
            s = "".join("xyz"[(n // 3 ** i) % 3] for i in range(n % 7))
            assert dfa.fullmatch(s.encode()) == (re.fullmatch(pattern, s) is not None), (pattern, s)


def test_total_state_size_is_bounded():
    # few positions, but exponentially many DFA states holding them: the sets'
    # total size is capped too (memory), with the same clear error
    dfa = LazyDFA.from_patterns(["(a|b)*a(a|b){17}"], max_nfa_states=200)
    rng = random.Random(1)
    with pytest.raises(StateLimitError, match="max_nfa_states=200"):
        for _ in range(500):
            dfa.walk(dfa.starts[0], bytes(rng.choice(b"ab") for _ in range(40)))
    assert dfa._members <= 8 * 200 + 200


def test_position_limit_raises_while_walking():
    dfa = LazyDFA.from_patterns(["(?:a{0,1000}){0,1000}"], max_nfa_states=2000)
    with pytest.raises(StateLimitError, match="max_nfa_states=2000"):
        dfa.walk(dfa.starts[0], b"a" * 400)
    assert len(dfa._pos_keys) <= 2000


def test_repeat_of_repeat_is_a_syntax_error_like_re():
    with pytest.raises(re.error):
        re.compile("a{100000}{100000}")
    with pytest.raises(RegexSyntaxError):
        LazyDFA.from_patterns(["a{100000}{100000}"])


def test_big_but_allowed_counted_repetition():
    dfa = LazyDFA.from_patterns(["x{200}y?"], max_nfa_states=1000)
    assert dfa.fullmatch(b"x" * 200) and dfa.fullmatch(b"x" * 200 + b"y")
    assert not dfa.fullmatch(b"x" * 199) and not dfa.fullmatch(b"x" * 201)
    assert dfa.walk(dfa.starts[0], b"x" * 201) == DEAD


# ---------------------------------------------------------------- strip_leading_space
def _strip_ref(p, w):
    if w.startswith(" "):
        return re_full(p, w[1:])
    return re_full(p, w)


def _strip_live_ref(p, w):
    if w.startswith(" "):
        return regex_live(p, w[1:])
    return regex_live(p, w)


STRIP_PATTERNS = ["a", " ?a", " a", "\\s*x", "( |b)*", "", " ", "  ", "[ a]{0,3}", "[^ ]+", "é| é", "\\S+ \\S+"]


@pytest.mark.parametrize("pattern", STRIP_PATTERNS)
def test_strip_leading_space_language(pattern):
    dfa = LazyDFA.from_patterns([pattern], strip_leading_space=True)
    plain = dfa_for((pattern,))
    rng = random.Random(pattern)
    strings = ["", " ", "  ", "   ", "a", " a", "  a", "x", " x", "é", " é", "b b", " b b"] + [
        "".join(rng.choice(" ab x\té") for _ in range(rng.randint(0, 6))) for _ in range(300)
    ]
    for w in strings:
        b = w.encode()
        assert dfa.fullmatch(b) == _strip_ref(pattern, w), (pattern, w)
        assert live(dfa, b) == _strip_live_ref(pattern, w), (pattern, w)
        assert plain.fullmatch(b) == re_full(pattern, w)


def test_strip_leading_space_multi_pattern():
    pats = ["a", " b", "c*"]
    dfa = LazyDFA.from_patterns(pats, strip_leading_space=True)
    for w in ["", " ", "a", " a", "  a", " b", "  b", "b", "cc", " cc", "  cc"]:
        for i, p in enumerate(pats):
            assert dfa.fullmatch(w.encode(), i) == _strip_ref(p, w), (p, w)


def test_strip_leading_space_off_by_default():
    dfa = LazyDFA.from_patterns(["a"])
    assert not dfa.fullmatch(b" a")


# ---------------------------------------------------------------- utf8_sequences
_CP = np.arange(0x110000, dtype=np.int64)
_SCALAR = (_CP < 0xD800) | (_CP > 0xDFFF)


def _encode_all():
    cp = _CP
    n = np.where(cp < 0x80, 1, np.where(cp < 0x800, 2, np.where(cp < 0x10000, 3, 4)))
    b = np.zeros((len(cp), 4), dtype=np.int64)
    b[:, 0] = np.select(
        [n == 1, n == 2, n == 3, n == 4],
        [cp, 0xC0 | (cp >> 6), 0xE0 | (cp >> 12), 0xF0 | (cp >> 18)],
    )
    b[:, 1] = np.select(
        [n == 2, n == 3, n == 4],
        [0x80 | (cp & 63), 0x80 | ((cp >> 6) & 63), 0x80 | ((cp >> 12) & 63)],
    )
    b[:, 2] = np.select([n == 3, n == 4], [0x80 | (cp & 63), 0x80 | ((cp >> 6) & 63)])
    b[:, 3] = np.where(n == 4, 0x80 | (cp & 63), 0)
    return n, b


_LEN, _BYTES = _encode_all()
# per encoded length: the code points (scalars only) and their bytes, as uint8
_BY_LEN = {}
for _n in (1, 2, 3, 4):
    _idx = np.flatnonzero((_LEN == _n) & _SCALAR)
    _BY_LEN[_n] = (_idx, np.ascontiguousarray(_BYTES[_idx, :_n].astype(np.uint8).T))


def test_vectorised_encoder_matches_python():
    rng = random.Random(0)
    sample = [0, 0x7F, 0x80, 0x7FF, 0x800, 0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x10FFFF] + [
        rng.randrange(0x110000) for _ in range(3000)
    ]
    for cp in sample:
        if 0xD800 <= cp <= 0xDFFF:
            continue
        enc = chr(cp).encode()
        assert _LEN[cp] == len(enc)
        assert list(_BYTES[cp, : len(enc)]) == list(enc)


_BOUNDARIES = [0, 1, 0x3F, 0x40, 0x7F, 0x80, 0xBF, 0xC0, 0x7FF, 0x800, 0xFFF, 0x1000,
               0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x3FFFF, 0x40000, 0xFFFFF, 0x100000,
               0x10FFFF]


def _random_ranges(rng):
    def point():
        r = rng.random()
        if r < 0.5:
            return min(0x10FFFF, max(0, rng.choice(_BOUNDARIES) + rng.randint(-2, 2)))
        if r < 0.7:
            return rng.randrange(0x800)
        return rng.randrange(0x110000)

    ranges = []
    for _ in range(rng.randint(1, 3)):
        a, b = sorted((point(), point()))
        ranges.append((a, b))
    return normalize_ranges(ranges)


def _check_sequences(ranges):
    seqs = utf8_sequences(ranges)
    inside = np.zeros(0x110000, dtype=bool)
    for lo, hi in ranges:
        inside[lo: hi + 1] = True
    count = np.zeros(0x110000, dtype=np.int64)
    for seq in seqs:
        assert 1 <= len(seq) <= 4
        idx, cols = _BY_LEN[len(seq)]
        m = np.ones(len(idx), dtype=bool)
        for k, (lo, hi) in enumerate(seq):
            assert 0 <= lo <= hi <= 255
            m &= (cols[k] >= lo) & (cols[k] <= hi)
        # the sequence spells exactly the byte strings of the code points it
        # matches: no overlong form, surrogate or value past U+10FFFF
        assert int(np.prod([hi - lo + 1 for lo, hi in seq])) == int(m.sum()), seq
        count[idx[m]] += 1
    assert (count[inside] == 1).all(), ranges
    assert (count[~inside] == 0).all(), ranges


def test_utf8_sequences_examples():
    assert utf8_sequences(((0x61, 0x62), (0xE9, 0xE9))) == (((97, 98),), ((195, 195), (169, 169)))
    assert utf8_sequences(()) == ()
    _check_sequences(((0, 0xD7FF), (0xE000, 0x10FFFF)))
    _check_sequences(((0x80, 0x80),))
    _check_sequences(((0x7F, 0x80), (0x7FF, 0x800), (0xFFFF, 0x10000)))


def test_utf8_sequences_random_ranges_exhaustive():
    rng = random.Random(2024)
    for _ in range(100):
        _check_sequences(_random_ranges(rng))


# ---------------------------------------------------------------- random patterns vs. the regex module
def _random_pattern(rng: random.Random, depth: int = 0) -> str:
    """A random pattern over a/b/c with nested, nullable and counted repetitions."""
    r = rng.random()
    if depth > 3 or r < 0.3:
        return rng.choice(["a", "b", "c", "[ab]", "[^a]", "é", "(?:)"])
    if r < 0.5:
        return "(?:" + "".join(_random_pattern(rng, depth + 1) for _ in range(rng.randint(2, 3))) + ")"
    if r < 0.65:
        return "(?:" + "|".join(_random_pattern(rng, depth + 1) for _ in range(rng.randint(2, 3))) + ")"
    item = "(?:" + _random_pattern(rng, depth + 1) + ")"
    lo = rng.randint(0, 3)
    q = rng.choice(["*", "+", "?", "{%d}" % lo, "{%d,}" % lo, "{%d,%d}" % (lo, lo + rng.randint(0, 3))])
    return item + q


@pytest.mark.parametrize("seed", range(12))
def test_random_counted_patterns_match_regex_module(seed):
    # Positions with counters (nested, nullable, unbounded, {0}) against an
    # independent engine: full matches and live prefixes on every string up to 6.
    rng = random.Random(seed)
    alphabet = ["a", "b", "c", "é"]
    strings = [""] + ["".join(p) for n in range(1, 6) for p in itertools.product(alphabet, repeat=n)]
    for _ in range(6):
        pattern = _random_pattern(rng)
        compiled = regex.compile(pattern)
        dfa = LazyDFA.from_patterns([pattern])
        for s in strings[:: rng.randint(1, 4)]:
            state = dfa.walk(dfa.starts[0], s.encode())
            assert dfa.is_accepting(state) == (compiled.fullmatch(s) is not None), (pattern, s)
            assert (state != DEAD) == (compiled.fullmatch(s, partial=True) is not None), (pattern, s)


def test_import_round_trip_and_foreign_positions_rejected():
    pattern = "(?:[ab]{2,5}c){3,}é?"
    a = LazyDFA.from_patterns([pattern])
    for s in ["ab", "abcaab", "abbcabcabc", "abcabcabcé"]:
        a.walk(a.starts[0], s.encode())
    exported = a.export_states()
    b = LazyDFA.from_patterns([pattern])
    mapping = b.import_states(exported)
    for s in ["", "ab", "abcaab", "abcabcabc", "abcabcabcé", "abx"]:
        sa, sb = a.walk(a.starts[0], s.encode()), b.walk(b.starts[0], s.encode())
        assert (sa == DEAD) == (sb == DEAD) and a.is_accepting(sa) == b.is_accepting(sb)
    assert mapping[a.starts[0]] == b.starts[0]
    codes, offsets = exported["dfa_positions"], exported["dfa_position_offsets"]
    first = next(i for i in range(len(offsets) - 1) if offsets[i + 1] - offsets[i] >= 4)
    lo = offsets[first]
    for field, bad in [(1, 99), (2, 99), (2, -1), (0, 10_000)]:  # byte index, counters, leaf
        tampered = dict(exported, dfa_positions=codes.copy())
        tampered["dfa_positions"][lo + field] = bad
        c = LazyDFA.from_patterns([pattern])
        before = len(c._pos_keys)
        with pytest.raises(ValueError):
            c.import_states(tampered)
        assert len(c._pos_keys) == before  # nothing half-imported


# ---------------------------------------------------------------- follow sets (issue #12, part 6)
def _reference_first(f, nid, ctx, stack=()):
    """The Glushkov first set written plainly (no memo, no fast path)."""
    kind = f.kind[nid]
    if kind == _CLS:
        return ((nid, 0, ctx, stack),)
    if kind == _REP:
        return _reference_first(f, f.kids[nid][0], ctx + (0,) if f.counted[nid] else ctx, stack)
    if kind == _REF:
        return _reference_first(f, f.target[nid], ctx, stack + (nid,))
    out = []
    for k in f.kids[nid]:
        out.extend(_reference_first(f, k, ctx, stack))
        if kind == _CAT and not f.nullable[k]:
            break
    return tuple(dict.fromkeys(out))


def _reference_after(f, nid, ctx, stack=()):
    p, out = f.parent[nid], []
    if p < 0:
        out.extend(_reference_after(f, stack[-1], ctx, stack[:-1]) if stack else [END])
    elif f.kind[p] == _CAT:
        for k in f.kids[p][f.slot[nid] + 1:]:
            out.extend(_reference_first(f, k, ctx, stack))
            if not f.nullable[k]:
                break
        else:
            out.extend(_reference_after(f, p, ctx, stack))
    elif f.kind[p] == _ALT:
        out.extend(_reference_after(f, p, ctx, stack))
    elif f.counted[p]:
        lo, hi, done, outer = f.lo[p], f.hi[p], ctx[-1] + 1, ctx[:-1]
        if hi is None or done < hi:
            out.extend(_reference_first(f, nid, outer + ((done if hi is not None else min(done, lo - 1)),), stack))
        if done >= lo:
            out.extend(_reference_after(f, p, outer, stack))
    else:
        if f.hi[p] is None:
            out.extend(_reference_first(f, nid, ctx, stack))
        out.extend(_reference_after(f, p, ctx, stack))
    return tuple(dict.fromkeys(out))


@pytest.mark.parametrize("pattern", PATTERNS + [
    r'\{"(?:a(?:[^"l]|l[^"p])[^"]*|[^"a][^"]*)" ?: ?[0-9]{1,3}(, ?"b")*\}',
    r"(?(DEFINE)(?P<v>(x|y)z{0,2}))((?&v),){1,3}(?&v)"])
def test_follow_sets_keep_their_order(pattern):
    """``first``/``after`` (with their shortcuts for concatenations and alternatives) give
    the plain Glushkov sets in the same order, and every position's row is the plain one
    (its leaf trie's byte ranges in classes), so the DFA's states and their numbering are
    those of the plain construction, for every position the automaton creates."""
    dfa = LazyDFA.from_patterns([pattern])
    dfa.explore(400)
    f = dfa._forest
    checked = 0
    for pid, pos in enumerate(dfa._pos_keys[1:], start=1):
        leaf, k, ctx, stack = pos
        assert f.after(leaf, ctx, stack) == _reference_after(f, leaf, ctx, stack), pos
        # a position's row: the leaf trie's edges in classes (shared per trie node), its targets
        follow = tuple(dfa._pos(q) if q is not END else 0 for q in _reference_after(f, leaf, ctx, stack))
        plain = tuple((int(dfa.byte_class[lo]), int(dfa.byte_class[hi]),
                       (dfa._pos((leaf, tgt, ctx, stack)),) if tgt >= 0 else follow)
                      for lo, hi, tgt in f.tries[f.trie[leaf]][k])
        assert dfa._row(pid) == plain, pos
        checked += 1
    for (nid, ctx, stack), got in list(f._first.items()):
        assert got == _reference_first(f, nid, ctx, stack)
    assert checked > 0 or len(dfa._pos_keys) == 1  # only END: the empty string
