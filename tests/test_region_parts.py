"""States that hold a string body next to other positions (a literal key beside any
key) take their mask as the union of the body's (through its lexical region) and the
rest's (``TokenIndex._part_bits``, ``region.region_part``): exactly the plain walk's,
over the whole DeepSeek and Mistral vocabularies."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hf_constrained.automaton import LazyDFA
from hf_constrained.index import TokenIndex
from hf_constrained.json_schema import schema_to_regex
from hf_constrained.region import region_part
from hf_constrained.vocabulary import Vocabulary

SCHEMA = {"type": "object", "properties": {
    "campaign": {"type": "string"}, "campaignId": {"type": "integer"},
    "clientType": {"type": "string", "maxLength": 40}, "tags": {"type": "array", "items": {"type": "string"}}},
    "additionalProperties": {"type": "string"}}
DOCS = [{"campaign": "spring é", "campaignId": 7, "clientType": "web", "tags": ["a", "b\\c"]},
        {"campaignX": "x", "cl": "y", "zz\"q": "z", "tagsAndMore": "t"}]
CASES = [
    (schema_to_regex(SCHEMA, whitespace=""), [json.dumps(d, ensure_ascii=False, separators=(",", ":")) for d in DOCS]),
    (r'"(?:key|kettle|[^"\\]*)"!', ['"kettle"!', '"keyboard"!', '"ke é"!']),
]


def _prefix_states(dfa, texts):
    states = []
    for text in texts:
        q = dfa.starts[0]
        for b in text.encode():
            states.append(int(q))
            q = dfa.step(q, b)
            assert q > 0, text
        states.append(int(q))
    return list(dict.fromkeys(states))


@pytest.mark.parametrize("tok_name", ["deepseek", "mistral"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_part_masks_equal_plain_walk(tok_name, case, request):
    tok = request.getfixturevalue(tok_name)
    vocab = Vocabulary.from_tokenizer(tok)
    pattern, texts = CASES[case]
    dfa = LazyDFA.from_patterns([pattern], strip_leading_space=vocab.strip_leading_space)
    parts = TokenIndex(dfa, vocab, [tok.eos_token_id])
    plain = TokenIndex(dfa, vocab, [tok.eos_token_id])
    split = 0
    for q in _prefix_states(dfa, texts):
        split += parts._region(q) is None and region_part(dfa, q, {}) is not None
        got = parts.bits(q)
        want, succ = plain._compute_mask(q)
        assert np.array_equal(got, want), (q, texts)
        assert np.array_equal(parts.successors(q), succ)
    assert split >= 3  # key states with literal alternatives went part by part


def test_mask_is_the_union_of_the_parts(deepseek):
    """The split itself: the body part alone has a region, and a token allowed from q
    is allowed from one of the parts."""
    vocab = Vocabulary.from_tokenizer(deepseek)
    dfa = LazyDFA.from_patterns([CASES[1][0]], strip_leading_space=vocab.strip_leading_space)
    index = TokenIndex(dfa, vocab, [deepseek.eos_token_id])
    q = dfa.walk(dfa.starts[0], b'"ke')
    part = region_part(dfa, q, {})
    a, b = dfa._intern(part, False), dfa._intern(dfa._keys[q][0] - part, False)
    assert index._region(q) is None and index._region(a) is not None
    ids = set(index.allowed(q).tolist())
    assert ids == set(index.allowed(a).tolist()) | set(index.allowed(b).tolist())
    assert 0 < len(index.allowed(b)) < 1000 < len(ids)  # the literals' part is small
