"""Regular rules read as single lexemes (grammar/regular.py) keep the language exactly.

Each grammar is checked three ways: the sentences up to a length, by brute force over a small
alphabet, against the oracle built from Lark's own compilation of the ORIGINAL text
(grammar_oracle.sentences) and against Lark's Earley parser on longer random strings; the live
prefixes of the rewritten and the unrewritten automata; and GrammarConstraint masks, with and
without the rewrite, along every token path of a small vocabulary.
"""

import itertools
import random
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from hf_constrained.grammar import GrammarError

from hf_constrained.grammar import from_lark, gbnf_to_lark
from hf_constrained.grammar.configs import ConfigAutomaton
from hf_constrained.grammar.constraint import GrammarConstraint
from hf_constrained.grammar.regular import regular_lexemes
from hf_constrained.vocabulary import Vocabulary

from grammar_oracle import lark_accepts, lark_parser, prefixes, sentences

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from grammar_peers import ARITH_GBNF, JSON_GBNF  # noqa: E402

LOWERCASE = r"""
start: expr
expr: expr "+" term | term
term: number | name | "(" expr ")"
number: DIGIT+ ("." DIGIT+)?
name: LETTER (LETTER | DIGIT)*
DIGIT: "0".."1"
LETTER: "a".."b"
"""

NESTED = r"""
start: item ("," item)* ";"? | "<" start ">"
item: ("a" "b"? | "c")+ ("d" ("a" | "b"?)*)? | right | mixed
right: "b" right | "c" "a"
mixed: "a" mixed | mixed "d" | ","
"""

COUNTED = r"""
start: z | x ~ 3 | "(" start ")" | y
z: "a" ~ 2..5 ("b" "c"?) ~ 0..3
y: "b" "b" ("d" "d")?
x: "c" | "d" "d"
"""

# number/name are rules: with %ignore " ", "1 0" is ONE number (the gap sits between DIGITs)
IGNORED = r"""
start: expr
expr: expr "+" term | term
term: number | name | "(" expr ")" | tail | "(" "+" name ")"
number: DIGIT+ ("." DIGIT+)?
name: LETTER (LETTER | DIGIT)*
tail: "a" "," tail | "," "1"
DIGIT: "0".."1"
LETTER: "a".."b"
%ignore " "
%ignore /#a?#/
"""

# nullable regular rules inside recursive ones, and a nullable regular start
NULLABLE = r"""
start: "(" start ")" opt | opt "," opt | "(" pad | "<" start opt start
opt: "a"? "b"* | "c" ~ 0..2
pad: sp "b"? sp "c"?
sp: "a"?
"""
# right spines in kept rules (un -> "-" un: one nested parser node per "-" unless read as one
# lexeme, regular.py's _spine): several alphas, a nullable piece inside one, a non-regular
# alternative that ends with un, and (SPINE_IGNORED) %ignore gaps and a nullable un
SPINE = r"""
start: un | start "+" un
un: "-" un | "!" "?" un | "~" ws un | atom | "(" start ")" un
atom: "x" | "[" start "]"
ws: " "?
"""
SPINE_IGNORED = r"""
start: un ";" | "(" start ")"
un: "-" un | "!" "-" un | atom?
atom: "x" | "[" start "]"
%ignore " "
"""
ALL_REGULAR = r"""
start: ("a" | "b" "c")* "d"? ("e" ~ 1..2)?
"""

GBNF_ARITH = gbnf_to_lark(ARITH_GBNF)
GBNF_JSON = gbnf_to_lark(JSON_GBNF)

CASES = {  # name: (Lark text, alphabet, max sentence length)
    "gbnf_arith": (GBNF_ARITH, "10.+*(-) ", 6),
    "gbnf_json": (GBNF_JSON, '[]{}"a1-.,:e ', 5),
    "lowercase": (LOWERCASE, "01.ab+()", 6),
    "nested": (NESTED, "abcd,;<>", 6),
    "counted": (COUNTED, "abcd()", 8),
    "ignored": (IGNORED, "01.a+,( #", 6),
    "nullable": (NULLABLE, "abc(),<", 7),
    "all_regular": (ALL_REGULAR, "abcde", 7),
    "spine": (SPINE, "-!?~ x[]+(", 6),
    "spine_ignored": (SPINE_IGNORED, "-! x[];(", 7),
}


def live(auto: ConfigAutomaton, alphabet: str, n: int) -> dict:
    """Every live prefix of length <= n over ``alphabet`` -> whether it is a sentence."""
    start = auto.starts[0]
    out, frontier = {"": bool(auto.accepting[start])}, [("", start)]
    for _ in range(n):
        nxt = []
        for s, q in frontier:
            for ch in alphabet:
                r = auto.walk(q, ch.encode())
                if r:
                    out[s + ch] = bool(auto.accepting[r])
                    nxt.append((s + ch, r))
        frontier = nxt
    return out


def _random_strings(rng, alphabet, sents, n):
    out = set()
    for _ in range(400):
        out.add("".join(rng.choice(alphabet) for _ in range(rng.randint(n + 1, n + 6))))
    longer = sorted(s for s in sents if len(s) >= n - 2)
    for _ in range(400):  # long sentences and near misses, built from short ones
        if not longer:
            break
        a, b = rng.choice(longer), rng.choice(longer)
        i = rng.randrange(len(a) + 1)
        out |= {a[:i] + b + a[i:], a + b, a[:i] + rng.choice(alphabet) + a[i:]}
    return sorted(out)


@pytest.mark.parametrize("name", sorted(CASES))
def test_rewrite_keeps_the_language(name):
    text, alphabet, n = CASES[name]
    plain, rewritten = from_lark(text, regular=False), from_lark(text)
    assert rewritten != plain  # the rewrite happened (each grammar has a regular rule)
    want = sentences(text, alphabet, n)
    assert want, name
    new, old = live(ConfigAutomaton([rewritten]), alphabet, n), live(ConfigAutomaton([plain]), alphabet, n)
    assert new == old  # the same live prefixes, and the same sentences among them
    assert {s for s, ok in new.items() if ok} == want  # = Lark's language (oracle on the original text)
    assert prefixes(want) <= set(new)
    lp = lark_parser(text)
    auto = ConfigAutomaton([rewritten])
    for s in _random_strings(random.Random(name), alphabet, want, n):
        q = auto.walk(auto.starts[0], s.encode())
        assert bool(q and auto.accepting[q]) == lark_accepts(lp, s), repr(s)


def _vocab(alphabet):
    chars = sorted(set(alphabet))
    multi = ["".join(p) for p in itertools.product(chars, repeat=2)][::3]
    multi += ["".join(p) for p in itertools.product(chars, repeat=3)][::17]
    return Vocabulary.from_token_bytes([None] + [bytes([b]) for b in range(256)] + [m.encode() for m in multi])


@pytest.mark.parametrize("name", ["gbnf_arith", "gbnf_json", "lowercase", "ignored", "nullable", "counted",
                                  "spine", "spine_ignored"])
def test_masks_equal_with_and_without_rewrite(name):
    text, alphabet, _ = CASES[name]
    vocab = _vocab(alphabet)
    on = GrammarConstraint(text, vocab, eos_token_id=0, cache_dir=False)
    off = GrammarConstraint(from_lark(text, regular=False), vocab, eos_token_id=0, cache_dir=False)
    assert on.grammars[0] != off.grammars[0]
    rng = random.Random(name)
    pairs, seen, checked = [(int(on.starts[0]), int(off.starts[0]))], set(), 0
    while pairs and checked < 120:
        a, b = pairs.pop(rng.randrange(len(pairs)))
        if (a, b) in seen:
            continue
        seen.add((a, b))
        ids = on.allowed_ids(a)
        assert np.array_equal(ids, off.allowed_ids(b)), [vocab.token_bytes[t] for t in ids]
        checked += 1
        for t in rng.sample(ids.tolist(), min(8, len(ids))):
            if t:  # EOS (id 0) ends the row
                pairs.append((int(on.walk(np.array([a]), np.array([[t]]))[0]),
                              int(off.walk(np.array([b]), np.array([[t]]))[0])))
    assert checked >= 30


def test_what_is_rewritten():
    g = from_lark(GBNF_ARITH)
    lex = dict(zip(g.terminals, g.patterns))
    assert lex["r6_number"] == r"[0-9]+(?:\.[0-9]+)?"  # the rule's name, its language as one regex
    assert "r6_number" not in g.nonterminals and "r1_sum" in g.nonterminals  # recursion is kept
    # a run of regular symbols inside a kept rule is one lexeme too (ws [+-] ws)
    assert lex["r4_ws __ANON_0 r4_ws"] == r"\ ?[\+\-]\ ?"
    j = from_lark(GBNF_JSON)
    assert {"r3_number", "r4_string"} <= set(j.terminals) and "r5_array" in j.nonterminals
    # with %ignore the gaps are written into the regex: "1 0" and "1#a#0" are one number
    ig = from_lark(IGNORED)
    auto = ConfigAutomaton([ig])
    for s in ["1 0", "1#a#0.1", " 1 . 0 + a 1 ", "(a0 1)", "a, a ,, 1", "( + a )"]:
        q = auto.walk(auto.starts[0], s.encode())
        assert q and auto.accepting[q], s
    assert "LPAR PLUS name RPAR" not in ig.terminals  # runs: by default not with %ignore
    assert "LPAR PLUS name RPAR" in regular_lexemes(from_lark(IGNORED, regular=False), runs=True).terminals
    # nullable, between two kept symbols: N -> T | ε with T non-empty (terminals must not match "")
    nl = from_lark(NULLABLE)
    i = nl.nonterminals.index("opt")
    assert sorted(rhs for lhs, rhs in nl.rules if lhs == i) == [(), (-1 - nl.terminals.index("opt"),)]
    assert from_lark(ALL_REGULAR).nonterminals == ["start"]


def test_right_spines_are_one_lexeme():
    """``atom -> "-" atom`` nests one parser node per "-" (the node after each one is new: its
    item's origin is the previous one), so a 64-dash token made a mask walk create 64 nodes and
    configurations at every parse position where a number may start. Read as a prefix lexeme
    ``-+`` of atom's other alternatives, a run of dashes stays in one configuration."""
    g = from_lark(GBNF_ARITH)
    lex = dict(zip(g.terminals, g.patterns))
    assert lex["(__ANON_2)+ r6_number"] == r"\-+[0-9]+(?:\.[0-9]+)?"   # merged with the run after it
    assert lex["(__ANON_2)+ __ANON_3 r4_ws"] == r"\-+\(\ ?"
    auto = ConfigAutomaton([g])
    q = auto.walk(auto.starts[0], b"1+(-")
    nodes, configs = auto.parser.num_nodes, auto.num_states
    q2 = auto.walk(q, b"-" * 200)
    assert q2 and auto.num_states - configs <= 2 and auto.parser.num_nodes == nodes
    assert auto.accepting[auto.walk(q2, b"2)")] and not auto.accepting[auto.walk(q2, b"2")]
    # the alternatives' own rules stay (no prefix), the non-regular one that ends with un too
    sp = from_lark(SPINE)
    un = sp.nonterminals.index("un")
    alts = [[sp.terminals[-1 - s] if s < 0 else sp.nonterminals[s] for s in rhs] for lhs, rhs in sp.rules
            if lhs == un]
    assert ["atom"] in alts and ["(MINUS | BANG QMARK | TILDE ws)+", "atom"] in alts
    assert ["LPAR", "start", "RPAR", "un"] in alts and not any(a[-1:] == ["un"] and len(a) == 2 for a in alts)
    ig = from_lark(SPINE_IGNORED)
    rx = re.compile(dict(zip(ig.terminals, ig.patterns))["(MINUS | BANG MINUS)+"])   # %ignore gaps inside
    assert all(rx.fullmatch(w) for w in ["-", "!-", "- ! -", "-  -!  -"])
    assert not any(rx.fullmatch(w) for w in ["", "!", "- ", " -", "-!"])


@pytest.mark.parametrize("runs", [True, False])
def test_runs_forced_or_off_keep_the_language(runs):
    """Runs of regular symbols in kept rules, forced on with %ignore (their gaps written into
    the regex) and off without it: the same language either way."""
    for name in ("ignored", "gbnf_arith"):
        text, alphabet, n = CASES[name]
        plain = from_lark(text, regular=False)
        g = regular_lexemes(plain, runs=runs)
        assert any(" " in t for t in g.terminals) == runs  # run terminals are named by their symbols
        assert live(ConfigAutomaton([g]), alphabet, n) == live(ConfigAutomaton([plain]), alphabet, n)


def test_size_limit_keeps_rules_and_language():
    text, alphabet, n = CASES["counted"]
    plain = from_lark(text, regular=False)
    small = regular_lexemes(plain, max_regex=12)  # x (in the run "x x x") and y fit, z's regex does not
    assert "z" in small.nonterminals and {"x x x", "y"} <= set(small.terminals) and len(small.rules) > 1
    assert all(len(p) <= 12 for p in small.patterns)
    assert regular_lexemes(plain, max_regex=1) == plain  # nothing fits: the grammar unchanged
    want = sentences(text, alphabet, n)
    got = live(ConfigAutomaton([small]), alphabet, n)
    assert {s for s, ok in got.items() if ok} == want


def test_unembeddable_and_nullable_terminals_are_left_alone():
    # an anchored terminal regex is refused (it was left alone here, and its anchor then
    # dropped); a nullable one is the engine's error to report (with its name), not hidden
    # inside a rule's regex
    with pytest.raises(GrammarError, match="anchors"):
        from_lark('start: a "x"\na: /^b/ "c"', regular=True)
    g = from_lark('start: "(" start ")" | a\na: /b*/ "c"')
    assert "a" in g.nonterminals
    with pytest.raises(Exception, match="matches the empty string"):
        ConfigAutomaton([g])


def test_mutually_recursive_rules_are_kept():
    g = from_lark('start: a\na: "x" b | "y"\nb: "z" a')
    assert set(g.nonterminals) >= {"a", "b"}
    assert {s for s, ok in live(ConfigAutomaton([g]), "xyz", 5).items() if ok} == {"y", "xzy", "xzxzy"}


def test_terminal_errors_are_not_hidden_inside_a_rule_regex():
    """A terminal that can match nothing is the engine's error to report, with its name; the
    rewrite leaves the rules using it alone instead of embedding it into a larger regex."""
    text = 'start: "(" start ")" | a\na: "x" | "y" EMPTY\nEMPTY: /[^\\x00-\\U0010ffff]/'
    g = from_lark(text)
    assert "a" in g.nonterminals and "EMPTY" in g.terminals
    with pytest.raises(Exception, match="EMPTY"):
        ConfigAutomaton([g])


def test_deep_rules_are_kept_not_a_recursion_error():
    """A rule whose prefix-factored regex nests deeper than Python's recursion limit is kept as
    rules (its alternatives' runs still become lexemes), quickly."""
    import time
    from hf_constrained.grammar.cfg import CFG
    k = 1100
    rules = [(0, (-3, 0, -4)), (0, (1,))] + [(1, (-1,) * i + (-2,)) for i in range(1, k + 1)]
    g = CFG(["start", "x"], ["A", "B", "LPAR", "RPAR"], ["a", "b", r"\(", r"\)"], rules, 0).check()
    t = time.perf_counter()
    r = regular_lexemes(g)
    assert time.perf_counter() - t < 20
    assert "x" in r.nonterminals and len(r.rules) == k + 2
    assert {"ab", "aab", "a{1100}b"} <= set(r.patterns)  # each alternative one lexeme


def test_module_doctests():
    import doctest

    from hf_constrained.grammar import regular
    result = doctest.testmod(regular)
    assert result.attempted > 0 and result.failed == 0
