"""Lexemes end where Lark's re.match ends them (grammar/lexeme_ends.py, grammar/python_match.py):
%ignore'd comments, lazy terminals, terminals re.match reads short; against Lark's Earley parser
and against re itself."""

import itertools
import random
import re
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from hf_constrained import GrammarError, GrammarProcessor, GrammarWarning
from hf_constrained.constraint import DEAD
from hf_constrained.grammar.cfg import from_lark
from hf_constrained.grammar.configs import ConfigAutomaton
from hf_constrained.grammar.constraint import GrammarConstraint
from hf_constrained.grammar.lexeme_ends import CUT, LONGEST, SHORTEST, ignore_modes
from hf_constrained.grammar.python_match import Undecided, first_match_miss

from grammar_oracle import lark_accepts, lark_parser, prefixes
from test_grammar_masks import _states_along, brute_force_allowed
from test_grammar_processor import BoostEOS, check
from test_grammar_recognizer import _viable_strings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from grammar_bench import JSON_COMMENTS  # noqa: E402  (JSON values with // and /* */ comments ignored)

SH = r"""
start: "[" [item ("," item)*] "]"
item: "1"
%ignore /#[^\n]*/
%ignore "\n"
"""
C_COMMENT = r"""
start: "a" ("b" "a")*
%import common.C_COMMENT
%ignore C_COMMENT
"""
WS_BEFORE_SPACE = r"""
start: "a" B
B: / b/
%ignore / +/
"""
UNENDED = r"""
start: "x" "y"
%ignore /#[^\n]*/
"""
ONE_IGNORE = r"""
start: "[" "1"* "]"
%ignore /([ \n]|#[^\n]*)+/
"""
LAZY_STRING = r"""
start: STRING ("," STRING)*
STRING: /".*?"/
"""
WS_AND_CPP = r"""
start: NUMBER ("+" NUMBER)*
NUMBER: /[0-9]+/
%import common.WS
%import common.CPP_COMMENT
%ignore WS
%ignore CPP_COMMENT
"""

# (name, grammar, alphabet, sentence length bound n, prefix length m whose completions fit in n,
#  sentences, texts that are no sentence because an ignored match runs on (or stops) where Lark's does)
CASES = [
    ("sh_comment", SH, "[]1,#\n", 6, 3, ["[#\n1]", "[1]#", "[1,#,\n1]"], ["[#1]", "[1#]", "[1,#\n]"]),
    ("c_comment_shortest", C_COMMENT, "ab/*", 7, 3, ["a/**/ba", "a/*/*/", "/**/a"], ["a/**/*/", "a/*a*/*/"]),
    ("space_before_a_spaced_terminal", WS_BEFORE_SPACE, "ab ", 6, 3, ["a b", " a b", "a b  "], ["a  b"]),
    ("comment_nothing_may_end", UNENDED, "xy#\n", 5, 3, ["xy", "xy#x", "xy#"], ["x#y", "x#\ny", "xy#\n"]),
    ("ws_and_cpp_comment", WS_AND_CPP, "1+/ \n", 6, 3, ["1//+1", "1//\n+1", "1 +//\n1"], ["1+//1", "1+// 2"]),
    ("one_ignore_for_both", ONE_IGNORE, "[]1# \n", 6, 3, ["[ # x\n1]", "[]#]"], ["[#]", "[# \n#1]"]),
    ("lazy_terminal_shortest", LAZY_STRING, '"a,', 6, 3, ['"a"', '"a","b"', '","'], ['"a"b"', '"a,"b"', '"""']),
]


@pytest.mark.parametrize("name,text,alphabet,n,m,good,bad", CASES, ids=[c[0] for c in CASES])
def test_sentences_and_prefixes_are_larks(name, text, alphabet, n, m, good, bad):
    """Every string up to n characters: a sentence here iff Lark's Earley parser takes it; a
    live prefix (up to m) iff it starts a Lark sentence of at most n characters."""
    lp = lark_parser(text)
    for s in good:
        assert lark_accepts(lp, s), s
    for s in bad:
        assert not lark_accepts(lp, s), s   # the texts a cut-anywhere reading of %ignore took
    sents = {"".join(w) for k in range(n + 1) for w in itertools.product(alphabet, repeat=k)
             if lark_accepts(lp, "".join(w))}
    auto = ConfigAutomaton([from_lark(text)])
    viable = _viable_strings(auto, auto.starts[0], alphabet, n)
    ours = {s for s, q in viable.items() if auto.accepting[q]}
    assert ours == sents, (sorted(ours - sents)[:5], sorted(sents - ours)[:5])
    want = {p for p in prefixes(sents) if len(p) <= m}
    live = {s for s in viable if len(s) <= m}
    assert live == want, (sorted(live - want)[:5], sorted(want - live)[:5])
    for s in good + bad:
        q = auto.walk(auto.starts[0], s.encode())
        assert (q != DEAD and bool(auto.accepting[q])) == (s in good), s


def test_a_comment_that_only_a_newline_ends_is_dead_where_nothing_may_start_with_one():
    auto = ConfigAutomaton([from_lark(UNENDED)])
    assert auto.walk(auto.starts[0], b"x#") == DEAD           # only "y" may come, and it would be comment
    q = auto.walk(auto.starts[0], b"xy#abc")
    assert q != DEAD and auto.accepting[q]                   # the comment runs to the end


@pytest.mark.parametrize("pattern,others,mode", [
    (r"#[^\n]*", ["x"], LONGEST),
    (r"\/\/[^\n]*", ["[0-9]+"], LONGEST),
    (r"/\*(.|\n)*?\*/", ["x"], SHORTEST),
    (r"(?:[ \t\x0c\r\n])+", [r"\w+", '"[^"]*"'], CUT),      # nothing starts with whitespace
    (r"(?:[ \t\x0c\r\n])+", [" b"], LONGEST),               # a terminal does
    (r"\s+", [r"\w+"], CUT),
    (r"(?:(?:\r)?\n)+", ["x"], CUT),
    (r" ", [" b"], CUT),                                     # prefix-free: one match
    (r"ab", ["b"], CUT),
    (r"([ \t\n]|#[^\n]*)+", ["[a-z]+"], LONGEST),      # not deterministic, but re.match takes the longest
])
def test_modes(pattern, others, mode):
    assert ignore_modes([pattern] + others, [0], ["I"] + [f"T{i}" for i in range(len(others))]) == {0: mode}


@pytest.mark.parametrize("pattern,others,needle", [
    (r"(?:(?:\r)?\n)+", ["\n"], "can go on through text that is no match"),
    (r"\s+", ["."], "can go on through text that is no match"),
    (r"a|ab", ["x"], "may stop before the longest match"),
    (r"(\s|#[^\n]*)+", ["x"], "can go on through text that is no match"),     # U+0085 vs U+0080
    (r"(?:[ \t]|//[^\n]*)+", ["[0-9]"], "can go on through text that is no match"),  # ' /' then '1'?
    (r"a(b|bc)*?c", ["x"], "a lazy quantifier other than"),
])
def test_ignored_terminals_that_cannot_be_followed_are_refused(pattern, others, needle):
    with pytest.raises(GrammarError, match=re.escape(needle)) as e:
        ignore_modes([pattern] + others, [0], ["MYIGNORE", "T"])
    assert "%ignore MYIGNORE" in str(e.value)


def test_an_inline_ignore_is_named_by_its_regex():
    with pytest.raises(GrammarError, match=r"^an inline %ignore \(regex '\(\?:\(\?:\\r\)\?\\n\)\+'\)"):
        ConfigAutomaton([from_lark('start: "a" NL\nNL: "\\n"\n%ignore /(?:(?:\\r)?\\n)+/')])


def test_refused_at_construction(deepseek):
    text = 'start: "a" NL "b"\nNL: "\\n"\n%import common.NEWLINE\n%ignore NEWLINE'
    with pytest.raises(GrammarError, match="%ignore NEWLINE"):
        GrammarProcessor(text, deepseek)


@pytest.mark.parametrize("pattern,lazy", [(r"#[^\n]*", False), (r"\/\/[^\n]*", False), (r"(?:[ \t\x0c\r\n])+", False),
                                          (r"\s+", False), (r"(?:(?:\r)?\n)+", False), (r"(?:(?:\ |\t))+", False),
                                          (r"/\*(.|\n)*?\*/", True)])
def test_where_python_ends_the_match(pattern, lazy):
    """What the modes rest on: re.match takes the longest match of the patterns read as
    LONGEST or CUT, and the shortest of the lazy one (texts drawn over their characters)."""
    rng = random.Random(0)
    rx = re.compile(pattern)
    chars = "#/*\n\r \taé\u0085\u00a0"
    for _ in range(3000):
        s = "".join(rng.choice(chars) for _ in range(rng.randint(1, 8)))
        ends = [k for k in range(1, len(s) + 1) if rx.fullmatch(s, 0, k)]
        m = rx.match(s)
        assert (m.end() if m else None) == ((min(ends) if lazy else max(ends)) if ends else None), (pattern, s)


def test_comments_are_not_written_into_regular_rules():
    """The regular-rule rewrite writes ignored lexemes into its regexes only where any cut is
    Lark's (whitespace): a comment inside a regex would end wherever the regex lets it."""
    ws = 'start: NUMBER ("+" NUMBER)*\nNUMBER: /[0-9]+/\n%import common.WS\n%ignore WS'
    assert len(from_lark(ws).rules) < len(from_lark(ws, regular=False).rules)
    assert from_lark(WS_AND_CPP).rules == from_lark(WS_AND_CPP, regular=False).rules


COMMENTED = ['[1, // two, 3\n 4]', '{"a": /* x */ 1, "b": [true /* y */]} // end', '/**/[/* */null]']


@pytest.mark.parametrize("tok_name", ["deepseek", "mistral"])
def test_real_vocabulary_masks_with_comments(tok_name, request):
    tok = request.getfixturevalue(tok_name)
    c = GrammarConstraint(JSON_COMMENTS, tok)
    lp = lark_parser(JSON_COMMENTS)
    rng = random.Random(0)
    for text in COMMENTED:
        assert lark_accepts(lp, text), text
        ids, states = _states_along(c, tok, text)           # the tokenizer's own encoding is allowed
        assert c.accepting(np.array([states[-1]]))[0], text
        for q in rng.sample(states, 3):                     # whole vocabulary vs one token at a time
            assert c.allowed_ids(q).tolist() == brute_force_allowed(c, q)
    q = c.state_of_text("[1, // two, 3")
    assert not c.accepting(np.array([q]))[0]                 # the comment runs on: "3]" would be in it
    a = c.automaton
    assert a.walk(q, b"]") != DEAD and not a.accepting[a.walk(q, b"]")]   # still a comment
    assert a.accepting[a.walk(q, b"\n4]")]


def test_generated_rows_with_comments_parse_with_lark(deepseek, deepseek_model):
    torch.manual_seed(0)
    inputs = deepseek(["A:", "List:"], return_tensors="pt", padding=True)
    proc = GrammarProcessor(WS_AND_CPP, deepseek)
    finished = 0
    for seed in range(3):
        torch.manual_seed(seed)
        out = deepseek_model.generate(**inputs, logits_processor=[proc, BoostEOS(deepseek.eos_token_id, 3.0)],
                                      max_new_tokens=12, return_dict_in_generate=True, do_sample=True,
                                      num_return_sequences=4)
        finished += check(proc, out, [lark_parser(WS_AND_CPP)])
    assert finished > 0


# ---------------------------------------------------------------- scanned terminals: re.match
@pytest.mark.parametrize("text,name,miss,refused", [
    ('start: NUM\nNUM: /[0-9]+|[0-9]+\\.[0-9]+/', "NUM", "'0.0' as '0'", "1.5"),
    ('start: A "c"\nA: /a|ab/', "A", "'ab' as 'a'", "abc"),
    ('start: KW+\nKW: /(?:in|int)/', "KW", "'int' as 'in'", "int"),
    ('start: LAZY "b"\nLAZY: /a{1,3}?/', "LAZY", "'aa' as 'a' (a lazy quantifier stops it early", "aab"),
])
def test_terminals_that_re_match_reads_short_are_refused(text, name, miss, refused):
    """Lark's parser never takes '1.5' as /[0-9]+|[0-9]+\\.[0-9]+/ (re.match stops at the
    first alternative), so a grammar that relies on it is refused, naming the terminal and a
    text it misreads (Lark refuses ``refused``, which re.fullmatch's reading would take)."""
    with pytest.raises(GrammarError, match=re.escape(miss)) as e:
        from_lark(text)
    assert f"terminal {name} " in str(e.value)
    assert not lark_accepts(lark_parser(text), refused)
    auto = ConfigAutomaton([from_lark(text.replace("?/", "/"), regular=False)]) if name == "LAZY" else None
    if auto is not None:                  # made greedy, the terminal reads it whole, as Lark does
        q = auto.walk(auto.starts[0], refused.encode())
        assert q != DEAD and auto.accepting[q] and lark_accepts(lark_parser(text.replace("?/", "/")), refused)


def test_longer_alternative_first_is_read_as_lark_reads_it():
    text = 'start: NUM ("," NUM)*\nNUM: /[0-9]+\\.[0-9]+|[0-9]+/'
    auto, lp = ConfigAutomaton([from_lark(text)]), lark_parser(text)
    for s in ["1.5", "1", "1.5,2", "12.25,3,4.0", "1.", "1,.5"]:
        q = auto.walk(auto.starts[0], s.encode())
        assert (q != DEAD and bool(auto.accepting[q])) == lark_accepts(lp, s), s


def test_lark_common_terminals_are_all_read():
    """Every terminal of Lark's common.lark is accepted; the lazy ones end at their first match."""
    import os
    import lark
    path = os.path.join(os.path.dirname(lark.__file__), "grammars", "common.lark")
    names = re.findall(r"^([A-Z_][A-Z_0-9]*)\s*:", open(path).read(), re.M)
    assert len(names) > 20
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # each one decided: no GrammarWarning
        shortest = {n for n in names if from_lark(f"start: {n}\n%import common.{n}", regular=False).shortest}
    assert shortest == {"C_COMMENT", "_STRING_INNER"}


def test_a_terminal_the_model_cannot_decide_is_read_with_a_warning():
    with pytest.warns(GrammarWarning, match=r"terminal X \(regex '\(a\|b\?\)\+c'\): cannot tell"):
        g = from_lark('start: X\nX: /(a|b?)+c/')
    auto = ConfigAutomaton([g])
    q = auto.walk(auto.starts[0], b"abbac")
    assert q != DEAD and auto.accepting[q]


def test_first_match_ends_are_not_written_into_regular_rules():
    g = from_lark(LAZY_STRING)
    assert '".*?"' in g.patterns and g.shortest == [g.patterns.index('".*?"')]


def _random_regex(rng, d=0):
    r = rng.random()
    if d > 3 or r < 0.3:
        return rng.choice(["a", "b", "[ab]", ".", "[^a]", "\\n"])
    if r < 0.55:
        return _random_regex(rng, d + 1) + _random_regex(rng, d + 1)
    if r < 0.75:
        return "(?:" + _random_regex(rng, d + 1) + "|" + _random_regex(rng, d + 1) + ")"
    return "(?:" + _random_regex(rng, d + 1) + ")" + rng.choice(["*", "+", "?", "*?", "+?", "??", "{1,2}", "{0,2}?", "{2}"])


def test_first_match_miss_against_re():
    """The model of re's backtracking order against re itself: a miss it returns is one (it
    checks), and where it finds none, no string up to 4 characters over the patterns'
    characters is one; where one exists it finds one at most as long."""
    rng = random.Random(0)
    decided = found = 0
    for _ in range(400):
        p = _random_regex(rng)
        try:
            ours = first_match_miss(p)
        except Undecided:
            continue
        decided += 1
        rx, brute = re.compile(p), None
        for w in ("".join(t) for k in range(1, 5) for t in itertools.product("ab\n", repeat=k)):
            if rx.fullmatch(w) and rx.match(w).end() < len(w):
                brute = w
                break
        if ours is not None:
            assert rx.fullmatch(ours) and rx.match(ours).end() < len(ours), (p, ours)
            found += 1
        if brute is not None:
            assert ours is not None and len(ours) <= len(brute), (p, brute, ours)
        elif ours is not None:
            assert len(ours) > 4 or any(ch not in "ab\n" for ch in ours), (p, ours)
    assert decided > 300 and found > 100


@pytest.mark.parametrize("pattern", [r"(?i)a|Ab", r"(?s).|\n\n", r"(?a)\w|é\w", "a{99999999999}", r"a(?=b)", r"(a)\1"])
def test_first_match_miss_undecided(pattern):
    """What the model of re does not cover is Undecided, never a wrong None: a global flag
    changes what the parse means ((?i)a|Ab misses 'ab'), a count past re's limit, lookaround,
    backreferences."""
    with pytest.raises(Undecided):
        first_match_miss(pattern)


def test_first_match_miss_on_unicode_classes():
    """Unicode classes (hundreds of ranges) are split into character classes once per distinct
    set: a hostname label's regex is decided (it has no miss), as is its misordered twin."""
    assert first_match_miss(r"[^\W_](?:\w|-){0,61}[^\W_]") is None
    assert first_match_miss(r"\w|\w\w") == "00"


@pytest.mark.parametrize("text", [
    'start: sign NUMBER\nsign: "-"?\n%import common.NUMBER\n%import common.NEWLINE\n%ignore NEWLINE',
    'start: w "z"\nw: "x"? "y"?\n%ignore /\\s+/',
    'start: w "z"\nw: "x"? "y"?\n%ignore /(ab)+/',
    'start: w "z"\nw: "x"? "y"?\n%ignore / +/',
])
def test_the_regular_rewrite_keeps_every_ignored_terminal_ending_anywhere(text):
    """A rewritten lexeme that may start with a gap ('(x)?(?:NEWLINE)*z') may start with what
    continues an ignored terminal, which no terminal of the grammar did: the rewrite is kept
    only where every ignored terminal still ends anywhere (the reading its gaps rest on); the
    default refused what regular=False reads (found by a probe)."""
    lp = lark_parser(text)
    for regular in (True, False):
        auto = ConfigAutomaton([from_lark(text, regular=regular)])
        for s in ["z", "-1", "\nz", "x\n\ny", "xz", " z", "x y z", "ababz", "xabz", "abxabyz", "\n-\n1\n", "  x  z "]:
            q = auto.walk(auto.starts[0], s.encode())
            assert (q != DEAD and bool(auto.accepting[q])) == lark_accepts(lp, s), (regular, s)


def test_the_oracle_counts_a_text_with_two_complete_parses_as_a_sentence():
    """Lark 1.3 raises RuntimeError ('multiple start symbol items') where a text has two
    complete parses (here one terminal, or another terminal and an ignored comment): that text
    is a sentence, and the recognizer says so."""
    text = 'start: T0 | T1\nT0: /a.*?x/\nT1: /[^\\/]/\n%ignore /#[^\\n]*/'
    assert lark_accepts(lark_parser(text), "a#x")
    auto = ConfigAutomaton([from_lark(text)])
    q = auto.walk(auto.starts[0], b"a#x")
    assert q != DEAD and auto.accepting[q]
