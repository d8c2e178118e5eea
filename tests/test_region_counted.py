"""Counted lexical regions (``hf_constrained.counted_region``): every mask taken from a
counted region's shared walk equals the plain trie walk of the same state, bit for bit,
over the whole DeepSeek (129k, 128-byte tokens) and Mistral (32k) vocabularies; bodies
the model does not cover are left to the plain walk."""

from __future__ import annotations

import numpy as np
import pytest

from hf_constrained.automaton import LazyDFA
from hf_constrained.counted_region import CountedRegions
from hf_constrained.index import TokenIndex
from hf_constrained.json_schema import schema_to_regex
from hf_constrained.vocabulary import Vocabulary


def _string(**kw):
    return schema_to_regex({"type": "string", **kw}, whitespace="")


# (pattern, texts whose prefixes are checked); bounds around the 128-byte token depth
CASES = [
    (_string(maxLength=5), ['"abcde"', '"\\n\\u00e9x"']),
    (_string(maxLength=127), ['"' + "ab" * 70, '"\\"q\\\\' + "é" * 10]),
    (_string(maxLength=128), ['"' + "x" * 100 + " " * 30, '"\\u12ab' + "日本" * 5]),
    (_string(minLength=3, maxLength=129), ['"ab\\tcd' + "z" * 130, '"é' + "Ω" * 20]),
    (_string(minLength=120, maxLength=140), ['"' + "hello " * 30]),
    (_string(minLength=2, maxLength=300), ['"' + "The quick brown fox. " * 16]),
    (schema_to_regex({"type": "string", "pattern": "^[a-z0-9 ]+$", "maxLength": 131}), ['"' + "abc 12 " * 20]),
    (r'"[a-zé ]{2,135}"\n', ['"' + "é zé" * 40]),
    (r"[a-z ]{0,130}\.", ["the cat sat on the mat " * 6]),  # from the start state (first-space rule)
    # states that hold a counted string next to other positions (literal keys, overlapping)
    (r'\{"(?:name|kind|[A-Z][a-zA-Z0-9_]{0,60})":[0-9]\}', ['{"name":1}', '{"Kind_of_thing":2}']),
    (r'"(?:abc|[a-z ]{0,70}|[a-c]{2,90}!)"', ['"abcab ab"', '"abcabcab!"']),
    # outer counters (an array of short strings) and a string after another one
    (schema_to_regex({"type": "array", "items": {"type": "string", "maxLength": 9}, "maxItems": 4},
                     whitespace=""), ['["abc","d\\"e","fghij"]']),
    (schema_to_regex({"type": "object", "properties": {"a": {"type": "string", "maxLength": 12},
                                                       "b": {"type": "string", "maxLength": 200}},
                      "required": ["a", "b"], "additionalProperties": False}, whitespace=""),
     ['{"a":"abc","b":"' + "word " * 45]),
]


def _prefix_states(dfa, texts, step=1):
    states = []
    for text in texts:
        data = text.encode()
        q = dfa.starts[0]
        for i in range(len(data) + 1):
            if i % step == 0 or i > len(data) - 3:
                states.append(int(q))
            if i < len(data):
                q = dfa.step(q, data[i])
                if q <= 0:
                    break
    return list(dict.fromkeys(s for s in states if s > 0))


def _compare(dfa, vocab, eos, states, rng, extra=25):
    """Counted masks (``bits``) against the plain walk (``_compute_mask``) for
    ``states`` and for states reached by random allowed tokens from them; returns
    how many went through a counted region."""
    counted = TokenIndex(dfa, vocab, [eos])
    plain = TokenIndex(dfa, vocab, [eos])
    used = 0
    todo = list(states)
    for q in list(states)[:extra]:  # random tokens: mid-character and mid-escape states too
        ids = counted.allowed(q)
        ids = ids[ids != eos]
        for t in rng.choice(ids, size=min(3, len(ids)), replace=False):
            todo.append(int(counted.next_states(np.array([q]), np.array([t]))[0]))
    for q in dict.fromkeys(todo):
        if q <= 0:
            continue
        used += counted._counted.locate(q) is not None
        got = counted.bits(q)
        want, _ = plain._compute_mask(q)
        assert np.array_equal(got, want), (q, dfa._keys[q])
        if used % 7 == 1:
            assert np.array_equal(counted.successors(q), plain._compute_mask(q)[1])
    return used


@pytest.mark.parametrize("tok_name", ["deepseek", "mistral"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_counted_masks_equal_plain_walk(tok_name, case, request):
    tok = request.getfixturevalue(tok_name)
    vocab = Vocabulary.from_tokenizer(tok)
    pattern, texts = CASES[case]
    dfa = LazyDFA.from_patterns([pattern], strip_leading_space=vocab.strip_leading_space)
    states = _prefix_states(dfa, texts)
    used = _compare(dfa, vocab, tok.eos_token_id, states, np.random.default_rng(case))
    assert used >= len(states) // 2  # most states inside the strings went through the region


def test_counted_region_does_not_determinise_the_counter(deepseek):
    """The first character of a short counted string creates a few states, not one per
    counter value and UTF-8 state up to the 128-byte token depth (about 1,300)."""
    vocab = Vocabulary.from_tokenizer(deepseek)
    dfa = LazyDFA.from_patterns([_string(maxLength=100)], strip_leading_space=vocab.strip_leading_space)
    index = TokenIndex(dfa, vocab, [deepseek.eos_token_id])
    q = dfa.walk(dfa.starts[0], b'"')
    n0 = dfa.num_states
    assert index._counted.locate(q) is not None
    assert len(index.allowed(q)) > 100_000
    assert dfa.num_states - n0 < 30
    plain = TokenIndex(dfa, vocab, [deepseek.eos_token_id])
    assert np.array_equal(index.bits(q), plain._compute_mask(q)[0])
    assert dfa.num_states - n0 > 1000  # what the plain walk determinises


@pytest.mark.parametrize("pattern", [
    r'"(?:a|ab){0,40}"',             # a copy can end and go on: mixed counter values
    r'"[a-z]{0,40}[a-z0-9]*"',       # a byte can both stay in the body and leave it
    r'"(?:[a-z]*,){0,40}"',          # a copy's start reached without completing one
    r'"[a-z]{3,}"',                  # unbounded
])
def test_bodies_outside_the_model_use_the_plain_walk(pattern, mistral):
    vocab = Vocabulary.from_tokenizer(mistral)
    dfa = LazyDFA.from_patterns([pattern], strip_leading_space=vocab.strip_leading_space)
    regions = CountedRegions(dfa)
    states = _prefix_states(dfa, ['"abababcd,ab,', '"xyz0'])
    assert all(regions.locate(q) is None for q in states)
    used = _compare(dfa, vocab, mistral.eos_token_id, states, np.random.default_rng(1), extra=5)
    assert used == 0


@pytest.mark.parametrize("tok_name", ["deepseek", "mistral"])
def test_documents_own_tokens_are_never_masked(tok_name, request):
    """Valid documents with counted strings (checked by ``jsonschema``), tokenized by the
    tokenizer itself, walk through a ``JSONProcessor`` with every token allowed."""
    import json

    import jsonschema
    import torch

    from hf_constrained import JSONProcessor

    tok = request.getfixturevalue(tok_name)
    schema = {"type": "object", "properties": {
        "id": {"type": "string", "minLength": 2, "maxLength": 8},
        "note": {"type": "string", "maxLength": 140},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 3}},
        "required": ["id", "note", "tags"], "additionalProperties": False}
    docs = [json.dumps({"id": "a7", "note": 'Größe é "x" \\ \n' + "ok " * 40, "tags": ["日本", "\t"]},
                       ensure_ascii=False, separators=(",", ":")),
            json.dumps({"id": "a\u00e9\\u", "note": "", "tags": []}, separators=(",", ":")),
            '{"id":"abcdefgh","note":"","tags":[]}']
    proc = JSONProcessor(schema, tok, whitespace="")
    for doc in docs:
        jsonschema.validate(json.loads(doc), schema)
        ids = tok.encode(doc, add_special_tokens=False) + [tok.eos_token_id]
        seq = torch.tensor([[tok.eos_token_id]])
        out = proc(seq, torch.zeros(1, len(tok)))
        for t in ids:
            assert torch.isfinite(out[0, t]), f"token {t} of {doc!r} masked"
            seq = torch.cat([seq, torch.tensor([[t]])], 1)
            out = proc(seq, torch.zeros(1, len(tok)))
    assert any(proc.index._counted.locate(q) is not None for q in proc.index._bits)


def test_module_doctests():
    import doctest
    from hf_constrained import counted_region
    result = doctest.testmod(counted_region)
    assert result.failed == 0 and result.attempted >= 5


@pytest.mark.parametrize("tok_name", ["deepseek", "mistral"])
def test_exit_forest_equals_the_exit_subtries(tok_name, request):
    """A wide body's exits through the merged per-byte forest (``CountedWalk.forest``) give
    the same (token, copies completed) pairs as walking every exit node's subtrie; a narrow
    body has no forest (its exits hold much of the trie)."""
    from hf_constrained.counted_region import CountedWalk

    tok = request.getfixturevalue(tok_name)
    vocab = Vocabulary.from_tokenizer(tok)
    with_forest = 0
    for pattern, texts in CASES:
        dfa = LazyDFA.from_patterns([pattern], strip_leading_space=vocab.strip_leading_space)
        index = TokenIndex(dfa, vocab, [tok.eos_token_id])
        for q in _prefix_states(dfa, texts, step=7):
            got = index._counted.locate(q)
            if got is None:
                continue
            shape = got[0]
            walk = CountedWalk.shared(vocab, shape.table, shape.boundary)
            ids, n = index._counted_exits(walk, shape)
            forest, walk.forest = walk.forest, None
            try:
                plain_ids, plain_n = index._counted_exits(walk, shape)
            finally:
                walk.forest = forest
            order, plain_order = np.argsort(ids), np.argsort(plain_ids)
            assert np.array_equal(ids[order], plain_ids[plain_order]), pattern
            assert np.array_equal(n[order], plain_n[plain_order]), pattern
            with_forest += forest is not None
            wide = len(walk.ids_by_need) >= 0.25 * len(vocab.term_ids)
            assert (forest is not None) == wide
    assert with_forest >= 10
    narrow = LazyDFA.from_patterns([r'"[a-f0-9]{1,40}"'])  # hex digits: few tokens stay inside
    got = CountedRegions(narrow).locate(narrow.walk(narrow.starts[0], b'"ab'))
    assert CountedWalk.shared(vocab, got[0].table, got[0].boundary).forest is None
