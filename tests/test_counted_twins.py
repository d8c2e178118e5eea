"""Counted regions of the same structure share their local tables (issue #12, part 24).

A JSON schema with many ``maxLength`` strings builds one body per property, so each used
to pay its own local table (``CountedRegions._shape``). A family whose body is the same
subtree as an earlier family's (node for node, leaves a constant apart), with the same
exit classes and build counter against its bounds, now takes the earlier family's shapes
(:meth:`CountedRegions._twin_shape`). Checked here against the plain construction of the
same shape (table, boundary, state after the repetition), and the masks against the plain
trie walk, on both vocabularies; bodies followed by different bytes or with different
minimum lengths at the build counter must not be paired.
"""

from __future__ import annotations

import numpy as np
import pytest

from hf_constrained.automaton import LazyDFA
from hf_constrained.counted_region import CountedRegions
from hf_constrained.json_schema import schema_to_regex
from hf_constrained.vocabulary import Vocabulary
from test_region_counted import _compare, _prefix_states


def _object(props, required=None):
    return schema_to_regex({"type": "object", "properties": props, "required": required or list(props),
                            "additionalProperties": False}, whitespace="")


def _s(**kw):
    return {"type": "string", **kw}


# (pattern, texts, how many families at least take a twin's shapes)
CASES = [
    (_object({"a": _s(maxLength=12), "b": _s(maxLength=30), "c": _s(maxLength=12), "d": _s(maxLength=200)}),
     ['{"a":"abc","b":"' + "wörd " * 5 + '","c":"x\\"y","d":"' + "é" * 60 + '"}'], 3),
    (_object({"a": _s(minLength=2, maxLength=9), "b": _s(minLength=2, maxLength=40), "c": _s(maxLength=40)}),
     ['{"a":"ab","b":"abcd\\u00e9","c":""}', '{"a":"xy\\n","b":"' + "q" * 39 + '","c":"z"}'], 1),
    (schema_to_regex({"type": "array", "items": {"type": "object", "properties": {
        "k": _s(maxLength=20), "v": _s(maxLength=20)}, "required": ["k", "v"]}, "maxItems": 3}, whitespace=""),
     ['[{"k":"a","v":"b"},{"k":"' + "c" * 19 + '","v":"dé"}]'], 1),
    # the same body before different bytes: the exits differ, no twin
    (r'(?:x[a-z ]{0,40}"|y[a-z ]{0,40}!)', ['xab cd"', 'yab cd!', 'y' + "a" * 40 + "!"], 0),
    # the same body, one with a minimum its first character does not reach: no twin
    (r'(?:x[a-z ]{3,40}"|y[a-z ]{0,40}")', ['xab cd"', 'yab"', 'x' + "a" * 40 + '"'], 0),
]


def _families(dfa, texts):
    regions = CountedRegions(dfa)
    states = _prefix_states(dfa, texts)
    located = sum(regions.locate(q) is not None for q in states)
    fams = [f for f in regions._families.values() if f is not None]
    return regions, states, located, fams


@pytest.mark.parametrize("case", range(len(CASES)))
def test_twin_shapes_equal_their_own(case):
    """Every shape a family took from its twin equals the one it would have built."""
    pattern, texts, min_twins = CASES[case]
    dfa = LazyDFA.from_patterns([pattern])
    regions, states, located, fams = _families(dfa, texts)
    assert located >= len(states) // 3
    twins = [f for f in fams if f.twin is not None]
    assert len(twins) >= min_twins
    if min_twins == 0:
        assert not twins
    checked = 0
    for fam in twins:
        for local, shape in fam.shapes.items():
            if shape is None:
                continue
            plain = regions._shape(fam, local)
            assert plain is not None
            assert np.array_equal(plain.table, shape.table), pattern
            assert plain.boundary == shape.boundary and plain.after_state == shape.after_state
            assert (shape.lo, shape.hi) == (fam.lo, fam.hi)
            checked += 1
    assert checked >= min_twins


@pytest.mark.parametrize("tok_name", ["deepseek", "mistral"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_masks_with_twins_equal_plain_walk(tok_name, case, request):
    tok = request.getfixturevalue(tok_name)
    vocab = Vocabulary.from_tokenizer(tok)
    pattern, texts, _ = CASES[case]
    dfa = LazyDFA.from_patterns([pattern], strip_leading_space=vocab.strip_leading_space)
    states = _prefix_states(dfa, texts)
    used = _compare(dfa, vocab, tok.eos_token_id, states, np.random.default_rng(case), extra=10)
    assert used >= len(states) // 3


def test_twins_skip_the_local_tables(deepseek):
    """The second and later strings of one body build no local table from a local set
    their twin has one for (the boundary: every string's first character)."""
    vocab = Vocabulary.from_tokenizer(deepseek)
    pattern, texts, _ = CASES[0]
    dfa = LazyDFA.from_patterns([pattern], strip_leading_space=vocab.strip_leading_space)
    regions = CountedRegions(dfa)
    built = []
    shape = regions._shape
    regions._shape = lambda fam, local: built.append((fam.r, local)) or shape(fam, local)
    for q in _prefix_states(dfa, texts):
        regions.locate(q)
    fams = [f for f in regions._families.values() if f is not None]
    assert len(fams) == 4 and sum(f.twin is not None for f in fams) == 3
    for fam in fams:
        assert ((fam.r, fam.bkeys) in built) == (fam.twin is None)
        assert fam.shapes[fam.bkeys] is not None
