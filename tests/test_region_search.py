"""``find_region``'s search (the candidates that reach the state again, their local
table) against a plain reference: the fixpoint over the candidates' whole rows that
``find_region`` used before it walked the candidates' edges backwards. Same states, in
the same order, and the same table, on hand-written JSON regexes, random automata and
corpus schemas (every state among the first explored, with and without ``admit``)."""

from __future__ import annotations


import numpy as np
import pytest

from hf_constrained.automaton import DEAD, LazyDFA
from hf_constrained.region import find_region
from corpus import CORPUS, corpus_files, corpus_regexes

STR = r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"'
PATTERNS = [
    r'\{"name":' + STR + r',"tags":\[(?:' + STR + r'(?:,' + STR + r')*)?\],"n":[0-9]{1,3}\}',
    r'\{"a":"[ -!#-\[\]-~]*","b":' + STR + r'\}',
    r"[^\n]{0,40}\n[a-zé ]*!",
    r'"(?:[^"\\]|\\.)*"|[a-z]+[0-9]*',
    r'(?:[a-c]+x|[a-c]*y)*z',  # loops whose states reach each other through other loops
]


def reference_find_region(dfa, q, min_loops=16, depth=3, max_states=48, admit=None):
    """The plain search: expand the candidates ring by ring, then grow the set of
    candidates that reach ``q`` over the whole rows until it stops changing."""
    def row(s):
        if not dfa.expanded[s]:
            dfa.expand(s)
        return dfa.table[s]

    if np.count_nonzero(row(q)[dfa.byte_class] == q) < min_loops:
        return None
    order, at, frontier = [q], {q: 0}, [q]
    for _ in range(depth):
        nxt = []
        for s in frontier:
            for t in dict.fromkeys(row(s).tolist()):  # targets by first byte class
                if t != DEAD and t not in at and len(order) < max_states and (admit is None or admit(t)):
                    at[t] = len(order)
                    order.append(t)
                    nxt.append(t)
        frontier = nxt
    for s in frontier:
        row(s)
    cand = np.array(order, dtype=np.int64)
    rows = dfa.table[cand]
    lut = np.full(dfa.num_states, -1, dtype=np.int64)
    lut[cand] = np.arange(len(cand))
    local = np.where(rows > 0, lut[np.maximum(rows, 0)], -1)
    inside = np.zeros(len(cand), dtype=bool)
    inside[0] = True
    while True:
        grown = inside | ((local >= 0) & inside[np.maximum(local, 0)]).any(1)
        if (grown == inside).all():
            break
        inside = grown
    keep = np.flatnonzero(inside)
    renum = np.full(len(cand), -1, dtype=np.int64)
    renum[keep] = np.arange(len(keep))
    return cand[keep], np.where(local >= 0, renum[np.maximum(local, 0)], -1)[keep].astype(np.int16)


def _check(dfa, n_states, **kw):
    """Compare on every state among the first ``n_states``; returns the regions found."""
    found = 0
    for q in range(1, min(dfa.num_states, n_states)):
        got, want = find_region(dfa, q, **kw), reference_find_region(dfa, q, **kw)
        assert (got is None) == (want is None), q
        if got is None:
            continue
        found += 1
        assert got[0].dtype == want[0].dtype and got[1].dtype == want[1].dtype == np.int16
        assert np.array_equal(got[0], want[0]), q
        assert np.array_equal(got[1], want[1]), q
    return found


@pytest.mark.parametrize("pattern", PATTERNS)
def test_search_equals_reference_on_json_regexes(pattern):
    dfa = LazyDFA.from_patterns([pattern])
    dfa.explore(400)
    found = _check(dfa, 400, min_loops=2) + _check(dfa, 400)
    found += _check(dfa, 400, min_loops=2, depth=6, max_states=12)  # the candidate cap cuts rings
    found += _check(dfa, 400, min_loops=2, admit=lambda t: t % 3 != 0)
    assert found


def test_search_equals_reference_on_random_automata():
    rng = np.random.default_rng(12)
    atoms = ["[a-c]", "[^ab]", "x", "(?:ab|c)", "[a-z]", "é", "[0-9]"]
    found = 0
    for _ in range(60):
        def rx(d):
            if d == 0 or rng.random() < 0.3:
                return atoms[rng.integers(len(atoms))]
            a, b = rx(d - 1), rx(d - 1)
            return [f"(?:{a}|{b})", f"{a}{b}", f"(?:{a})*", f"(?:{a}){{1,3}}"][rng.integers(4)]
        dfa = LazyDFA.from_patterns([rx(4) + "!"])
        dfa.explore(60)
        found += _check(dfa, 60, min_loops=1, depth=int(rng.integers(1, 5)), max_states=int(rng.integers(2, 30)))
    assert found > 30


def test_search_equals_reference_on_corpus_schemas():
    if not CORPUS.is_dir():
        pytest.skip(f"corpus not found at {CORPUS} (../shared/data/jsonschemabench)")
    found = 0
    for _, regex in corpus_regexes(corpus_files(step=97, limit=14)):
        dfa = LazyDFA.from_patterns([regex])
        dfa.explore(250)
        found += _check(dfa, 250)
    assert found >= 10
