"""The byte-level grammar recognizer against a brute-force prefix oracle and Lark's Earley parser."""

import itertools

import pytest

from hf_constrained.constraint import DEAD
from hf_constrained.grammar.cfg import from_lark
from hf_constrained.grammar.configs import ConfigAutomaton

from grammar_oracle import lark_accepts, lark_parser, prefixes, sentences

# (name, grammar, alphabet, longest prefix checked M, sentence length bound N): N is large
# enough that every viable prefix of length <= M has a completion of length <= N.
CASES = [
    ("brackets", 'start: "(" start ")" start | "[" start "]" start |', "()[]", 6, 12),
    ("arith", """
        ?start: sum
        ?sum: sum "+" product | product
        ?product: product "*" atom | atom
        ?atom: NUMBER | "(" sum ")"
        NUMBER: /[0-9]+/
     """, "1+*()", 5, 11),
    ("ambiguous", 'start: start "+" start | start start | "a" |', "a+", 7, 9),
    ("json", r"""
        ?start: value
        ?value: object | array | STRING | "1" | "true"
        array: "[" [value ("," value)*] "]"
        object: "{" [pair ("," pair)*] "}"
        pair: STRING ":" value
        STRING: /"[a]*"/
        %ignore " "
     """, '{}[]":,1 ', 3, 8),
    ("sql", r"""
        start: "S" cols "F" NAME ("W" cond)?
        cols: "*" | NAME ("," NAME)*
        cond: NAME "=" (NAME | NUM) | cond "&" cond
        NAME: /a+/
        NUM: /[0-9]/
     """, "SFW*,=&a1", 5, 9),
    ("right_rec_lexing", 'start: A start | A\nA: /a+/', "ab", 8, 8),
    ("names", 'start: NAME+\nNAME: /[ab]+/\n%ignore " "', "ab ", 6, 7),
]


def _viable_strings(auto, start, alphabet, m):
    """Every string of length <= m over alphabet with its configuration (DEAD pruned)."""
    out = {"": start}
    frontier = [("", start)]
    for _ in range(m):
        nxt = []
        for s, q in frontier:
            for ch in alphabet:
                q2 = auto.walk(q, ch.encode())
                if q2 != DEAD:
                    out[s + ch] = q2
                    nxt.append((s + ch, q2))
        frontier = nxt
    return out


@pytest.mark.parametrize("name,text,alphabet,m,n", CASES, ids=[c[0] for c in CASES])
def test_prefixes_and_sentences_match_brute_force(name, text, alphabet, m, n):
    sents = sentences(text, alphabet, n)
    assert sents, "oracle found no sentence: the test grammar is wrong"
    auto = ConfigAutomaton([from_lark(text)])
    start = auto.starts[0]
    viable = _viable_strings(auto, start, alphabet, m)
    want = {p for p in prefixes(sents) if len(p) <= m}
    assert set(viable) == want, (sorted(set(viable) - want)[:5], sorted(want - set(viable))[:5])
    for s, q in viable.items():
        assert bool(auto.accepting[q]) == (s in sents), s
    # and the oracle agrees with Lark's own Earley parser
    lp = lark_parser(text)
    for s in itertools.islice(sorted(sents, key=lambda x: (len(x), x)), 0, 400, 3):
        assert lark_accepts(lp, s), s
    for s in sorted(set(viable) - sents)[:100]:
        assert not lark_accepts(lp, s), s


def test_left_recursive_list_reuses_configurations():
    auto = ConfigAutomaton([from_lark('start: "[" item ("," item)* "]"\nitem: "x"')])
    q1 = auto.walk(auto.starts[0], b"[x,x,")
    q2 = auto.walk(q1, b"x,x,")
    assert q1 == q2 != DEAD
    n = auto.num_states
    assert auto.walk(q2, b"x,x,x,") == q1 and auto.num_states == n  # no new configuration
