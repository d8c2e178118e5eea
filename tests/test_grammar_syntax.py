"""The tested Lark and GBNF syntax subsets, each against an independent oracle."""

import random
import re

import pytest

from hf_constrained.grammar import GrammarError, from_lark, gbnf_to_lark
from hf_constrained.grammar.configs import ConfigAutomaton

from grammar_oracle import lark_accepts, lark_parser

LARK_FEATURES = r"""
start: item+ _sep? -> top
?item: KW ~ 1..2 | pair{NUM} | word | (LOW "-")* big
pair{x}: "(" x "," x ")"
_sep: ":"
word.2: LOW ~ 2
!big: "Z" | "Q"
LOW: "a".."c"
KW: "go"i
%import common.INT -> NUM
%ignore " "
%extend item: "zz"
%override _sep: ";"
"""


def _accepts(auto, s):
    q = auto.walk(auto.starts[0], s.encode())
    return bool(auto.accepting[q]) if q else False


def _strings(rng, alphabet, sentences, n=2500):
    out = set(sentences)
    for _ in range(n):
        out.add("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 7))))
    for s in sentences:  # near misses
        for _ in range(20):
            i = rng.randrange(len(s) + 1)
            out.add(s[:i] + rng.choice(alphabet) + s[i:])
            out.add(s[:i] + s[i + 1:])
    return sorted(out)


def test_lark_features_agree_with_lark():
    sents = ["go", "GOgo", "(1,23)", "ab", "a-b-Z", "Q", "zz", "go (1,2);", " ab  ca ; ", "gO Z zz"]
    assert not lark_accepts(lark_parser(LARK_FEATURES), "go:")  # %override replaced ":"
    lp = lark_parser(LARK_FEATURES)
    auto = ConfigAutomaton([from_lark(LARK_FEATURES)])
    for s in sents:
        assert lark_accepts(lp, s), s
    rng = random.Random(0)
    n_true = 0
    for s in _strings(rng, "goGO(1,2)abc-ZQz;: ", sents):
        want = lark_accepts(lp, s)
        assert _accepts(auto, s) == want, s
        n_true += want
    assert n_true >= len(sents)


GBNF = r"""
# a comment line
root ::= greeting ws name{1,2} tail?   # trailing comment
greeting ::= "hi" | "h\x65llo"
   | "yo\u00e9"
ws ::= [ \t]+
name ::= [A-Z] [a-z]{2,} | [^a-zA-Z0-9 \t\n!]
tail ::= ( "!"{2}
           | "?" ) | .
"""
GBNF_REGEX = r"(hi|hello|yoé)[ \t]+([A-Z][a-z]{2,}|[^a-zA-Z0-9 \t\n!]){1,2}(!!|\?|[\s\S])?"


def test_gbnf_features_agree_with_an_equivalent_regex():
    auto = ConfigAutomaton([from_lark(gbnf_to_lark(GBNF))])
    sents = ["hi Bob", "hello\tAnn!!", "yoé Zed#?", "hi %%", "hi Abc\n"]
    rng = random.Random(1)
    for s in _strings(rng, "hieloyé \tABbn%#!?\n", sents, n=3000):
        assert _accepts(auto, s) == bool(re.fullmatch(GBNF_REGEX, s)), repr(s)


@pytest.mark.parametrize("text,needle", [
    ('root ::= [z-a]', "reversed"),
    ('root ::= "a"{3,1}', "max below min"),
    ('root ::= "a" )', "unexpected"),
    ('root ::= "abc', "unterminated string"),
    ('root ::= "\\q"', "unknown escape"),
    ('root ::= "a"\nroot ::= "b"', "defined twice"),
])
def test_gbnf_errors(text, needle):
    with pytest.raises(GrammarError, match=needle):
        from_lark(gbnf_to_lark(text))
