"""The sparse walks' small steps, against their plain forms: ``_spans`` (the
concatenated ranges every sparse level and walk from a neighbour builds) against
``np.repeat`` + ``np.arange``, and the index's few-row fill (``TokenIndex._fill`` on
Python ints) against ``LazyDFA.expand_many``: the same states created in the same
order, so the same state ids, masks and successors along documents."""

from __future__ import annotations

import numpy as np
import pytest

from hf_constrained.automaton import LazyDFA
from hf_constrained.index import TokenIndex
from hf_constrained.neighbour import _spans
from hf_constrained.vocabulary import Vocabulary


def _plain_spans(starts, counts):
    return np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_spans_equal_repeat_and_arange(dtype):
    rng = np.random.default_rng(3)
    for n in [0, 1, 2, 7, 300]:
        for _ in range(20):
            starts = rng.integers(0, 10_000, n).astype(dtype)
            counts = rng.integers(0, 6, n).astype(dtype)
            got, want = _spans(starts, counts), _plain_spans(starts, counts)
            assert got.dtype == want.dtype == np.int64
            assert np.array_equal(got, want)
    assert _spans(np.array([5, 9]), np.array([0, 0])).tolist() == []
    assert _spans(np.array([5, 9]), np.array([2, 1])).tolist() == [5, 6, 9]


STR = r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"'
PATTERNS = [
    r'\{"name":' + STR + r',"n":[0-9]{1,3}(?:,"tags":\[(?:' + STR + r'(?:,' + STR + r')*)?\])?\}',
    r'\{(?:"id":[0-9]+|"kind":"(?:alpha|beta|gamma)"|' + STR + r':(?:true|false))(?:,' + STR + r':[0-9]+)*\}',
    r"(?:[a-z]+ ){1,4}[0-9]{2,5}(?:\.[0-9]+)?",
]


def _walk(index, dfa, rng, steps):
    """Masks, successors and state count at each step of a random walk over allowed tokens."""
    out, q = [], dfa.starts[0]
    for _ in range(steps):
        bits = index.bits(q)
        out.append((bits.tobytes(), index.successors(q).tolist(), dfa.num_states, [dfa._keys[s] for s in index.successors(q).tolist()]))
        allowed = index.allowed(q)
        allowed = allowed[allowed < index.vocab.size]
        if len(allowed) == 0:
            break
        q = int(index.next_states(np.array([q]), np.array([int(rng.choice(allowed))]))[0])
        if q <= 0:
            break
    return out


@pytest.mark.parametrize("tok_name", ["deepseek", "mistral"])
def test_few_row_fill_creates_the_same_states_as_expand_many(tok_name, request, monkeypatch):
    vocab = Vocabulary.from_tokenizer(request.getfixturevalue(tok_name))
    eos = vocab.size  # one past the vocabulary
    for k, pattern in enumerate(PATTERNS):
        runs = []
        for fill_rows in (TokenIndex.FILL_ROWS, -1):  # -1: every fill through expand_many
            monkeypatch.setattr(TokenIndex, "FILL_ROWS", fill_rows)
            dfa = LazyDFA.from_patterns([pattern], strip_leading_space=vocab.strip_leading_space)
            index = TokenIndex(dfa, vocab, [eos])
            runs.append((_walk(index, dfa, np.random.default_rng(k), 40), list(dfa._keys)))
        (walk_a, keys_a), (walk_b, keys_b) = runs
        assert len(walk_a) > 5
        assert walk_a == walk_b
        assert keys_a == keys_b  # the same states, created in the same order


@pytest.mark.parametrize("tok_name", ["deepseek", "mistral"])
def test_one_node_levels_equal_the_general_sparse_step(tok_name, request, monkeypatch):
    """A sparse level of one live node (``TokenIndex._children_one``: its children as
    one slice, their states as one gather from its row) creates the same states in the
    same order, with the same masks and successors, as the general step; it is used."""
    vocab = Vocabulary.from_tokenizer(request.getfixturevalue(tok_name))
    eos = vocab.size
    used = []
    one = TokenIndex._children_one

    def counted(self, *args):
        used.append(1)
        return one(self, *args)

    monkeypatch.setattr(TokenIndex, "_children_one", counted)
    calls = {True: 0, False: 0}
    for k, pattern in enumerate(PATTERNS):
        runs = []
        for on in (True, False):
            monkeypatch.setattr(TokenIndex, "ONE_NODE", on)
            dfa = LazyDFA.from_patterns([pattern], strip_leading_space=vocab.strip_leading_space)
            index = TokenIndex(dfa, vocab, [eos])
            n0 = len(used)
            runs.append((_walk(index, dfa, np.random.default_rng(k), 40), list(dfa._keys)))
            calls[on] += len(used) - n0
        (walk_a, keys_a), (walk_b, keys_b) = runs
        assert len(walk_a) > 5
        assert walk_a == walk_b
        assert keys_a == keys_b
    assert calls[True] > 10 and calls[False] == 0


def test_one_node_level_cases():
    """``_children_one`` on a childless node, on a state whose row is not computed yet
    (expanded first), and with dead children dropped: as the general step."""
    vocab = Vocabulary.from_token_bytes([bytes([b]) for b in range(256)] + [b"ab", b"ac", b"abc", b"xy", None])
    dfa = LazyDFA.from_patterns([r"a[bc]c?|x"])
    index = TokenIndex(dfa, vocab, eos_token_ids=[vocab.size])
    a = int(vocab.child_start[0]) + ord("a")  # the root's children are the 256 bytes, in order
    s = dfa.starts[0]
    after_a = dfa.walk(s, b"a")
    assert not dfa.expanded[after_a]
    got = index._children_one(vocab, None, a, after_a)
    assert dfa.expanded[after_a]
    index.ONE_NODE = False
    want = index._children(vocab, None, np.array([a]), np.array([after_a], dtype=dfa.table.dtype))
    assert [x.tolist() for x in got] == [x.tolist() for x in want] and len(got[0]) == 2  # "ab", "ac"
    assert got[0].dtype == want[0].dtype and got[1].dtype == want[1].dtype
    leaf = int(vocab.child_start[0]) + ord("q")  # no token starts with "q" beyond "q" itself
    empty = index._children_one(vocab, None, leaf, s)
    assert len(empty[0]) == len(empty[1]) == 0 and empty[1].dtype == dfa.table.dtype
