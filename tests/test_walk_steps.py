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
