"""The first mask of a processor (issue #12): the start state's walk reads the byte
classes of the trie levels it visits only, and the id / mask readers of the packed
bits take the fast (bool) paths; masks and successors stay bit-for-bit."""

import numpy as np
import pytest

from hf_constrained.automaton import LazyDFA
from hf_constrained.constraint import FINISHED
from hf_constrained.index import TokenIndex
from hf_constrained.vocabulary import Vocabulary

PATTERNS = [
    r'[ ]?\{"name": "[^"\\]{0,12}", "age": (0|[1-9][0-9]{0,2})\}',  # restrictive start
    r"[a-z ]{1,8}\.?",                                                # permissive start
    r"(é|中文|😀|naïve)+ ?x?",
]


def _index(tok, pattern, **attrs):
    vocab = Vocabulary.from_tokenizer(tok)
    dfa = LazyDFA.from_patterns([pattern], strip_leading_space=vocab.strip_leading_space)
    dfa.explore(200)
    index = TokenIndex(dfa, vocab, [tok.eos_token_id], pad_token_id=tok.pad_token_id)
    for k, v in attrs.items():
        setattr(index, k, v)
    return dfa, index


@pytest.mark.parametrize("tok_name", ["deepseek", "mistral"])
def test_level_gather_equals_whole_trie_gather(tok_name, request):
    # per-level classes (small dense levels) and the whole trie's classes give the
    # same masks and successors in every state
    tok = request.getfixturevalue(tok_name)
    for pattern in PATTERNS:
        dfa, per_level = _index(tok, pattern, DENSE_LEVEL_GATHER=10**9, CLASS_TRIE_AFTER=10**9)
        _, whole = _index(tok, pattern, DENSE_LEVEL_GATHER=-1, CLASS_TRIE_AFTER=10**9)
        for q in range(1, min(dfa.num_states, 120)):
            assert np.array_equal(per_level.bits(q), whole.bits(q)), (pattern, q)
            assert np.array_equal(per_level.successors(q), whole.successors(q)), (pattern, q)
        assert per_level._node_cls is None and whole._node_cls is not None


def test_restrictive_start_skips_the_whole_trie_gather(deepseek):
    # `[ ]?\{...`: its walk goes dense only on the first byte level (the root is one
    # node), which must not gather the classes of all 274k trie nodes
    dfa, index = _index(deepseek, PATTERNS[0])
    ids = index.allowed(dfa.starts[0])
    assert index._node_cls is None
    texts = {deepseek.decode([int(t)]) for t in ids}
    assert {"{", " {"} <= texts and all(' {"name'.startswith(t) or '{"name'.startswith(t) for t in texts)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_allowed_and_allowed_mask_read_the_packed_bits(deepseek, pattern):
    # allowed / allowed_mask / mask_bytes against a plain reading of bits()
    dfa, index = _index(deepseek, pattern)
    for q in [FINISHED] + list(range(1, min(dfa.num_states, 30))):
        bits = index.bits(q)
        plain = [i for i in range(8 * len(bits)) if bits[i >> 3] >> (i & 7) & 1]
        assert index.allowed(q).tolist() == plain
        assert index.allowed(q).dtype == np.int32
        for width in (len(deepseek), 8 * len(bits) + 13, 100):
            mask = index.allowed_mask(q, width)
            assert mask.dtype == bool and len(mask) == width
            assert np.flatnonzero(mask).tolist() == [i for i in plain if i < width]
            assert np.array_equal(np.unpackbits(index.mask_bytes(q, width), bitorder="little")[:width], mask)
