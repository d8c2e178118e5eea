"""States that differ only in counters no token can bring to a bound share one mask
(``LazyDFA.mask_representative``): every shared mask equals the mask walked for the
state itself, on a small vocabulary (short tokens, so counters are often shared) and on
the 129k DeepSeek vocabulary (128-byte tokens, long counted strings)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from hf_constrained.automaton import LazyDFA
from hf_constrained.index import TokenIndex
from hf_constrained.vocabulary import Vocabulary

PATTERNS = [
    r"[a-c]{0,40}!",
    r"(?:[ab]{2,30},){1,25}c",
    r"x[a-c]{5,50}(?:y[ab]{0,20}){0,12}",
    r"(?:a|bb){3,}c{0,33}",
    r"(?(DEFINE)(?P<s>[ab]{0,25}))(?&s)-(?:(?&s)\.){0,9}",
]


def _small_vocab():
    """Every byte (so no token-level liveness pass, which would disable sharing) and
    words of up to 4 letters, so counters 5 or more away from a bound are shared."""
    words = [bytes(t) for n in (2, 3, 4) for t in itertools.product(b"abcxy!,-.", repeat=n)]
    return Vocabulary.from_token_bytes([b"<eos>"] + [bytes([i]) for i in range(256)] + words[:3000])


def _check_all_states(dfa, vocab, eos, limit=400):
    shared = TokenIndex(dfa, vocab, [eos])
    plain = TokenIndex(dfa, vocab, [eos])
    plain.dfa = dfa
    seen, frontier, aliased = set(), [int(s) for s in dfa.starts], 0
    while frontier and len(seen) < limit:
        q = frontier.pop(0)
        if q in seen or q <= 0:
            continue
        seen.add(q)
        got = shared.bits(q)
        want, succ = plain._compute_mask(q)
        assert np.array_equal(got, want), q
        aliased += shared._bits[q] is shared._bits.get(dfa.mask_representative(q, shared._max_token_bytes)) \
            and dfa.mask_representative(q, shared._max_token_bytes) != q
        frontier.extend(int(t) for t in succ)
    return aliased


@pytest.mark.parametrize("pattern", PATTERNS)
def test_shared_masks_equal_walked_masks(pattern):
    vocab = _small_vocab()
    dfa = LazyDFA.from_patterns([pattern])
    aliased = _check_all_states(dfa, vocab, 0)
    assert aliased > 0  # the test exercises shared masks


def test_successors_are_the_states_own(pattern=PATTERNS[0]):
    vocab = _small_vocab()
    dfa = LazyDFA.from_patterns([pattern])
    idx = TokenIndex(dfa, vocab, [0])
    q = dfa.walk(dfa.starts[0], b"abcab")
    assert dfa.mask_representative(q, idx._max_token_bytes) != q
    idx.bits(q)
    ids = idx.allowed(q)
    want = {int(idx.next_states(np.array([q]), np.array([t]))[0]) for t in ids if t != 0}
    assert set(idx.successors(q).tolist()) == want - {0}


def test_long_counted_string_on_deepseek(deepseek):
    from hf_constrained.json_schema import schema_to_regex
    from hf_constrained.regex_constraint import RegexConstraint

    schema = {"type": "object", "properties": {"note": {"type": "string", "maxLength": 2000}},
              "required": ["note"], "additionalProperties": False}
    rc = RegexConstraint.from_tokenizer([schema_to_regex(schema, whitespace="")], deepseek)
    plain = TokenIndex(rc.dfa, rc.vocab, rc.eos_token_ids.tolist(), pad_token_id=rc.pad_token_id)
    text = '{"note":"' + "The quick brown fox jumps over the lazy dog. " * 6
    ids = deepseek(text, add_special_tokens=False)["input_ids"]
    q, reps = int(rc.starts[0]), set()
    for t in ids:
        q = int(rc.advance(np.array([q]), np.array([t]))[0])
        assert q > 0
        got = rc.index.bits(q)
        want, _ = plain._compute_mask(q)
        assert np.array_equal(got, want)
        reps.add(rc.dfa.mask_representative(q, rc.index._max_token_bytes))
    assert len(reps) < len(ids) / 2  # inside the string the masks are shared
