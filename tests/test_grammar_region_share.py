"""Lexical regions shared between parse positions (``_GrammarIndex._region``): a string's
body at a new position takes the region of an earlier one with the same lexer states, and
its masks equal the masks of the unshared search and of the brute-force oracle."""

import numpy as np
import pytest

from hf_constrained.constraint import DEAD
from hf_constrained.grammar.constraint import GrammarConstraint

from test_grammar_masks import JSON, brute_force_allowed

DOCS = ['{"name": "Ada Lovelace", "born": 1815, "tags": ["math", "poetry"], "alive": false}',
        '[1, 2.5, -3e2, {"a": null, "b": true}, "x\\n y", []]',
        '{"items": [1, 2, 3], "ok": {"id": 2, "tag": "q"}, "total": -2.5e-3}']


def _constraint(tok, share):
    c = GrammarConstraint(JSON, tok)
    c.index.SHARE_REGIONS = share
    return c


def _true_region_table(a, states):
    """The local table of ``states`` from the automaton's own (whole) rows."""
    lut = {s: i for i, s in enumerate(states)}
    rows = []
    for s in states:
        a.expand(s)
        rows.append([lut.get(int(t), -1) if t != DEAD else -1 for t in a.table[s].tolist()])
    return np.array(rows, dtype=np.int64)


@pytest.mark.parametrize("tok_name", ["deepseek", "mistral"])
def test_shared_regions_give_the_unshared_masks(tok_name, request):
    """Token by token through JSON documents: the same allowed ids and acceptance with and
    without sharing (configurations compared by content: their ids differ), and sharing used."""
    tok = request.getfixturevalue(tok_name)
    on, off = _constraint(tok, True), _constraint(tok, False)
    for doc in DOCS:
        ids = tok.encode(doc, add_special_tokens=False)
        q_on, q_off = int(on.starts[0]), int(off.starts[0])
        for t in ids:
            a_on, a_off = on.allowed_ids(q_on), off.allowed_ids(q_off)
            assert a_on.tolist() == a_off.tolist(), (doc, tok.decode(ids[:ids.index(t)]))
            assert t in set(a_on.tolist())
            assert bool(on.automaton.accepting[q_on]) == bool(off.automaton.accepting[q_off])
            q_on = int(on.advance(np.array([q_on]), np.array([t]))[0])
            q_off = int(off.advance(np.array([q_off]), np.array([t]))[0])
        assert on.accepting(np.array([q_on]))[0] and off.accepting(np.array([q_off]))[0]
    assert on.index.shared_regions >= 4 and off.index.shared_regions == 0


def test_shared_region_tables_are_the_automatons(deepseek):
    """A shared region's states are where the automaton goes (its local table equals the one
    read from the states' whole rows), its first state is the configuration asked for, and
    the mask equals the brute-force oracle's."""
    c = _constraint(deepseek, True)
    a = c.automaton
    first = c.state_of_text('{"a": "')        # a key's and a value's string body: searched
    c.allowed_ids(c.state_of_text('{"a'))
    c.allowed_ids(first)
    checked = 0
    for text in ('{"a": "x", "', '{"a": "x", "b": "', '[{"k": 1}, "', '[["', '{"a": ["x", "'):
        q = c.state_of_text(text)
        before = c.index.shared_regions
        got = c.index._region(q)
        assert got is not None and int(got[0][0]) == q
        checked += c.index.shared_regions > before   # else the first region of its kind: searched
        states, table = got
        assert np.array_equal(_true_region_table(a, states.tolist()), table.astype(np.int64)), text
        assert c.allowed_ids(q).tolist() == brute_force_allowed(c, q)
    assert checked >= 3


def test_a_configuration_of_another_shape_is_not_shared(deepseek):
    """Configurations with a boundary node (a value's start) or lanes from two slots find
    their region, if any, by the search."""
    c = _constraint(deepseek, True)
    a = c.automaton
    for text in ('{"a": ', '[1, ', '{"a": 12'):
        q = c.state_of_text(text)
        assert c.index._pure_shape(q) is None or len({sl for sl, _ in a.thread_pairs(a._closed_key(q)[1])}) == 1
        c.allowed_ids(q)
    assert c.index.shared_regions == 0
    q = c.state_of_text('["ab')
    slot, key = c.index._pure_shape(q)
    assert key[2] == tuple(st for _, st in a.thread_pairs(a._closed_key(q)[1]))


def test_pure_region_search_finds_the_plain_search_region(deepseek):
    """In the JSON grammar the search over lexemes in progress alone finds every state of the
    region that the plain search (which expands every state within three bytes) finds, more
    where the plain search's 48 candidates ran out on states after the closing quote (any
    region gives the same mask), its table is the automaton's, and it expands fewer rows."""
    from hf_constrained.region import find_region

    c = _constraint(deepseek, True)
    a = c.automaton
    found = 0
    for text in ('{"', '["', '{"a": "', '["x\\', '["x\\n'):
        q = c.state_of_text(text)
        shape = c.index._pure_shape(q)
        assert shape is not None, text
        before = int(a.expanded[:a.num_states].sum())
        got = c.index._pure_region(q, shape[0])
        pure_rows = int(a.expanded[:a.num_states].sum()) - before
        plain = find_region(a, q, c.index.REGION_MIN_LOOPS, c.index.REGION_DEPTH, c.index.REGION_STATES)
        plain_rows = int(a.expanded[:a.num_states].sum()) - before
        if got is None:                    # inside an escape: no loops, no region either way
            assert plain is None, text
            continue
        found += 1
        states, table = got
        assert set(plain[0].tolist()) <= set(states.tolist()) and int(states[0]) == q, text
        assert np.array_equal(_true_region_table(a, states.tolist()), table.astype(np.int64)), text
        if len(states) == len(plain[0]):
            assert states.tolist() == plain[0].tolist() and np.array_equal(table, plain[1]), text
        assert plain_rows > pure_rows or pure_rows == 0, text
    assert found >= 4
