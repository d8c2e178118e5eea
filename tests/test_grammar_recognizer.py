"""The byte-level grammar recognizer against a brute-force prefix oracle and Lark's Earley parser."""

import itertools
import random

import numpy as np

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



# the README's "Semantics": under %ignore nothing separates lexemes, so keywords and names may
# abut (also where one longest match would read them as one: "selectabc"), as for Lark's own Earley
# parser; a required separator in the rules says otherwise
ABUTTING = 'start: SELECT NAME FROM NAME\nSELECT: "select"i\nFROM: "from"i\nNAME: /[a-z]+/\n%ignore " "'
SEPARATED = ('start: SELECT _SP NAME _SP FROM _SP NAME\nSELECT: "select"i\nFROM: "from"i\n'
             'NAME: /[a-z]+/\n_SP: / +/')


@pytest.mark.parametrize("text, runs_together", [(ABUTTING, True), (SEPARATED, False)])
def test_lexemes_abut_unless_the_rules_separate_them(text, runs_together):
    auto, oracle = ConfigAutomaton([from_lark(text)]), lark_parser(text)
    for s in ["SELECT abc FROM t", "SELECTabc FROM t", "SELECT abc FROMt", "SELECT abcFROM t", "selectabc from t"]:
        q = auto.walk(auto.starts[0], s.encode())
        ours = bool(q != DEAD and auto.accepting[q])
        assert ours == lark_accepts(oracle, s), s
        assert ours == (runs_together or s == "SELECT abc FROM t"), s

# ---------------------------------------------------------------- the engine's shortcuts
# Grammars with nullable tails, unit cycles and ambiguity, where the shortcuts of the engine
# (prediction closures computed once per nonterminal, acceptance after a scan without the
# closure, configurations whose lexemes are merged only when expanded) could go wrong.
SHORTCUT_GRAMMARS = [(c[1], c[2]) for c in CASES] + [
    ('start: a b c\na: "x" a |\nb: "y" |\nc: a b |', "xy"),                              # nullable tails
    ('start: a\na: b | "x" | "x" a\nb: a | "y" c\nc: |', "xy"),                             # unit cycle a <-> b
    ('?start: e\n?e: e "+" e | e e | "(" e ")" | "1" | o\no: |', "1+()"),                  # nullable, ambiguous
    ('start: "s" q ";"?\nq: w w*\nw: /[a-z]+/ | "select"i | "sel"i\n%ignore " "', "seLct ;"),  # keywords vs names
]


def _naive_closure(p, kernel):
    """Earley closure by the textbook rules, item by item (the oracle for Parser._close)."""
    from hf_constrained.grammar.earley import SELF
    items, stack = set(kernel), list(kernel)
    while stack:
        r, d, o = stack.pop()
        rhs = p.rhs[r]
        new = []
        if d < len(rhs) and rhs[d] >= 0:
            new = [(r2, 0, SELF) for r2 in p.rules_of[rhs[d]]]
            if p.nullable[rhs[d]]:
                new.append((r, d + 1, o))
        elif d == len(rhs) and o != SELF:
            new = [(r2, d2 + 1, node_of(p, o, o2)) for r2, d2, o2 in p.items[o]
                   if d2 < len(p.rhs[r2]) and p.rhs[r2][d2] == p.lhs[r]]
        for it in new:
            if it not in items:
                items.add(it)
                stack.append(it)
    open_items = {it for it in items if it[1] < len(p.rhs[it[0]])}
    accept = any(r in p.start_rules for r, d, _ in items if d == len(p.rhs[r]))
    expect = {-1 - p.rhs[r][d] for r, d, _ in open_items if p.rhs[r][d] < 0}
    return open_items, accept, expect


def node_of(p, node, origin):
    from hf_constrained.grammar.earley import SELF
    return node if origin == SELF else origin


@pytest.mark.parametrize("text,alphabet", SHORTCUT_GRAMMARS)
def test_parser_shortcuts_equal_textbook_earley(text, alphabet):
    """Every node the automaton builds while all strings up to 5 characters are read equals the
    textbook closure of its kernel (items, acceptance, expected terminals), and
    ``scan_accepts(node, t)`` equals the acceptance of the scanned node, for every
    (node, expected terminal) pair. The grammars are taken as written (``regular=False``):
    the regular-rule rewrite makes some of them one lexeme, with no parser node to check."""
    auto = ConfigAutomaton([from_lark(text, regular=False)])
    viable = _viable_strings(auto, auto.starts[0], alphabet, 5)
    for q in viable.values():
        auto.expand(q)
    p = auto.parser
    for kernel, nid in list(p._closure.items()):
        items, accept, expect = _naive_closure(p, kernel)
        assert set(p.items[nid]) == items and p.accepting(nid) == accept, kernel
        assert set(p.expected(nid)) == expect, kernel
    pairs = [(n, t) for n in range(p.num_nodes) for t in p.expected(n)]
    assert len(pairs) >= 2
    want = {(n, t): p.accepting(p.scan(n, t)) for n, t in pairs}
    for order in (pairs, pairs[::-1], random.Random(0).sample(pairs, len(pairs))):
        p._acc_syms.clear()   # kept per node: every order computes them in another order
        for n, t in order:
            assert p.scan_accepts(n, t) == want[n, t], (n, p.terminal_names[t])


@pytest.mark.parametrize("text,alphabet", SHORTCUT_GRAMMARS)
def test_pending_configurations_match_their_closed_content(text, alphabet):
    """A configuration whose lexemes are merged lazily accepts iff its closed content does,
    shares its row and mask with the first configuration of that content, and walking the
    same strings again creates nothing new."""
    auto = ConfigAutomaton([from_lark(text)])
    viable = _viable_strings(auto, auto.starts[0], alphabet, 5)
    pending = 0
    for s, q in viable.items():
        boundary, threads, strip, rest = auto._closed_key(q)
        assert bool(auto.accepting[q]) == any(auto.parser.accepting(n) for n in boundary), s
        rep = auto.mask_representative(q, 8)
        assert auto._closed_key(rep) == (boundary, threads, strip, ()) and rest == ()
        auto.expand(q)
        auto.expand(rep)
        assert np.array_equal(auto.table[q], auto.table[rep]), s
        pending += bool(auto._keys[q][3])
    assert pending > 0  # the lazy path was exercised
    n = auto.num_states
    assert _viable_strings(auto, auto.starts[0], alphabet, 5) == viable and auto.num_states == n


@pytest.mark.parametrize("text,alphabet", SHORTCUT_GRAMMARS)
def test_per_configuration_objects_leave_the_cyclic_collector(text, alphabet):
    """What the automaton keeps per configuration and per parser node (keys, closed keys,
    merges, lanes, plans, waiting lists, node keys) is made of ints and tuples only, so Python's cyclic
    collector stops tracking it (a frozenset or list stays tracked for life and makes every
    later full pass over the process longer), and keys are canonical (sorted, no repeats), so
    equal content still gets one id. A tuple leaves the collector on a pass that finds its
    items untracked: nested tuples (key > threads > pair) take one pass per level."""
    import gc
    auto = ConfigAutomaton([from_lark(text, regular=False)])
    viable = _viable_strings(auto, auto.starts[0], alphabet, 5)
    for q in list(viable.values())[::2]:
        auto.mask_representative(q, 8)
        auto.expand(q)
    p = auto.parser
    for _ in range(3):
        gc.collect()
    kept = {"keys": auto._keys, "closed": [c for c in auto._closed if c is not None],
            "merge keys": list(auto._merge), "lanes": list(auto._lanes.values()),
            "kernels": list(p._closure), "node keys": list(p._ids) + list(p._ids_accepting),
            "slot ids": [auto._slot_ids], "scans": [p._scan], "accept symbols": [p._acc_syms],
            "plans": list(auto._plans.values()),
            "waiting": [w for w in p._waiting + p._waiting_all if w is not None]}
    assert kept["keys"] and kept["closed"] and kept["waiting"] and kept["node keys"]
    for what, objs in kept.items():
        tracked = [o for o in objs if gc.is_tracked(o)]
        assert not tracked, (what, tracked[:2])
    for boundary, threads, strip, pending in auto._keys:
        for part in (boundary, threads, pending):
            assert list(part) == sorted(set(part)), part
    assert len(set(auto._keys)) == len(auto._keys)
    # what a walk creates that is never tracked at all (ints, dicts of ints), or is one object
    # where it was two or three: slots, accept symbols, scans; a closed key without pending
    # lexemes is the configuration's own key; a node's lanes and a row's plan are flat tuples
    assert p._acc_syms and p._scan and all(type(x) is int for x in [*auto._slots, *p._acc_syms.values()])
    assert all(auto._closed[c] is auto._keys[c] for c in range(auto.num_states) if not auto._keys[c][3])
    assert all(type(x) is int for lanes in auto._lanes.values() for x in lanes)
    assert all(type(x) is int for pl in auto._plans.values() for x in pl[:-4])


@pytest.mark.parametrize("text,alphabet", SHORTCUT_GRAMMARS)
def test_new_configurations_leave_the_collector_in_its_young_generations(text, alphabet):
    """What a walk creates per configuration (keys, closed keys) and per lexer step (its
    columns) is untracked by the passes of the collector's two young generations, so it never
    reaches the oldest one, whose growth starts a full pass over every object of the process
    (~150 ms with torch loaded). A tuple leaves on a pass that finds its items untracked, one
    nesting level per pass: keys are tuples of int tuples (pairs packed in one int,
    ``filling.pack``) and columns tuples of flat int tuples (``lexer.moves``), two levels, where tuples
    of pairs and of 4-tuples made three."""
    import gc
    auto = ConfigAutomaton([from_lark(text, regular=False)])
    was = gc.isenabled()
    gc.collect()                    # the automaton's tables are in the oldest generation now
    n0, moves0 = auto.num_states, set(auto._moves)
    gc.disable()                    # what the walk creates waits in the youngest generation
    try:
        viable = _viable_strings(auto, auto.starts[0], alphabet, 5)
        for q in list(viable.values())[::2]:
            auto.mask_representative(q, 8)
            auto.expand(q)
        gc.collect(0)               # a pass of the youngest generation, then of the middle one:
        gc.collect(1)               # what is still tracked moves on to the oldest
    finally:
        if was:
            gc.enable()
    new = {"keys": auto._keys[n0:], "closed keys": [c for c in auto._closed[n0:] if c is not None],
           "lexer columns": [cols for k, (_, cols) in auto._moves.items() if k not in moves0]}
    assert all(new.values()), {k: len(v) for k, v in new.items()}
    for what, objs in new.items():
        tracked = [o for o in objs if gc.is_tracked(o)]
        assert not tracked, (what, len(tracked), len(objs), tracked[:2])
