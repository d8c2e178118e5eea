"""Walks from a neighbour (``hf_constrained.neighbour``): a state's (token, next state)
pairs, mask and successors taken from another state's walk equal its plain trie walk,
bit for bit, over the whole DeepSeek (129k) and Mistral (32k) vocabularies: on the key
states of schemas with many names and ``additionalProperties`` / ``patternProperties``,
on corpus schemas, and for arbitrary pairs of states of random regexes."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from hf_constrained.automaton import LazyDFA
from hf_constrained.index import TokenIndex
from hf_constrained.json_schema import schema_to_regex
from hf_constrained.neighbour import PreOrder, Reference, differences, mask_near, walk_near
from hf_constrained.vocabulary import Vocabulary

CORPUS = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "jsonschemabench"

NAMES = ["camera", "camel", "city", "country", "name", "number", "address", "zip", "id",
         "identifier", "createdAt", "created_by", "url", "urls", "type", "typeName"]


def _object(extra, names=NAMES):
    return {"type": "object", "properties": {n: {"type": "integer"} for n in names}, **extra}


SCHEMAS = [  # (schema, valid documents: known names in their order, then other keys)
    (_object({"additionalProperties": True}),
     ['{"camera":1,"camel":2,"zip":7,"camxyz":3,"ca":4,"c":5,"x":6,"zipper":8}',
      '{"identifier":1,"urls":6,"typeNam":5,"idé":2,"id\\n":3,"日本":4,"url\\u001f":7}']),
    (_object({"additionalProperties": {"type": "string", "maxLength": 20}}),
     ['{"number":3,"createdAt":1,"created_by":2,"createdA":"x","createdX":"yz","numbe":"é"}']),
    (_object({"patternProperties": {"^x-": {"type": "boolean"}}, "additionalProperties": True}),
     ['{"city":1,"country":2,"x-camera":true,"x-":false,"x-日本":true}']),
    # names with non-ASCII, quote, backslash and control characters
    (_object({"additionalProperties": True}, names=["日本", "日本語", 'a"b', "a\\b", "tab\t", "é", "éa"]),
     ['{"日本":1,"日本語":2,"a\\"b":4,"a\\\\b":5,"tab\\t":7,"é":8,"éa":9,"日x":3,"ab":6,"éb":0}']),
]


def _prefix_states(dfa, texts):
    states = []
    for text in texts:
        q = dfa.starts[0]
        for b in text.encode():
            states.append(int(q))
            q = dfa.step(q, b)
            if q <= 0:
                break
        states.append(int(q))
    return list(dict.fromkeys(s for s in states if s > 0))


def _compare(dfa, vocab, eos, states, rng, extra=3):
    """Masks and successors of ``bits`` (neighbour walks on) against the plain walk of
    the same automaton, for ``states`` and states reached by random allowed tokens from
    them; returns how many masks came from a neighbour."""
    index = TokenIndex(dfa, vocab, [eos])
    plain = TokenIndex(dfa, vocab, [eos])
    plain._near = None
    todo = list(states)
    for q in states:
        ids = index.allowed(q)
        ids = ids[ids != eos]
        for t in rng.choice(ids, size=min(extra, len(ids)), replace=False):
            todo.append(int(index.next_states(np.array([q]), np.array([t]))[0]))
    for q in dict.fromkeys(todo):
        if q <= 0:
            continue
        got = index.bits(q)
        want, succ = plain._compute_mask(q)
        assert np.array_equal(got, want), (q, dfa._keys[q])
        assert np.array_equal(index.successors(q), succ), q
    return index.near_walks


@pytest.mark.parametrize("tok_name", ["deepseek", "mistral"])
@pytest.mark.parametrize("case", range(len(SCHEMAS)))
def test_key_masks_from_a_neighbour_equal_plain_walk(tok_name, case, request):
    tok = request.getfixturevalue(tok_name)
    vocab = Vocabulary.from_tokenizer(tok)
    schema, texts = SCHEMAS[case]
    dfa = LazyDFA.from_patterns([schema_to_regex(schema, whitespace="")],
                                strip_leading_space=vocab.strip_leading_space)
    assert all(dfa.fullmatch(text.encode()) for text in texts)
    states = _prefix_states(dfa, texts)
    used = _compare(dfa, vocab, tok.eos_token_id, states, np.random.default_rng(case))
    assert used >= len(states) // 4  # the states inside key names did take the shortcut


def _corpus_schemas(n=4):
    """Corpus object schemas with at least 8 properties and other keys allowed."""
    if not CORPUS.is_dir():
        pytest.skip(f"JSONSchemaBench corpus not found at {CORPUS}")
    out = []
    for path in sorted(CORPUS.glob("*/*.json")):
        try:
            schema = json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError):
            continue
        props = schema.get("properties") if isinstance(schema, dict) else None
        if (isinstance(props, dict) and len(props) >= 8 and schema.get("additionalProperties", True) is not False
                and len(path.read_bytes()) < 20_000):
            try:
                regex = schema_to_regex(schema, shared=True)
            except Exception:  # noqa: BLE001 (schemas the converter refuses are not the point here)
                continue
            out.append((path.name, sorted(props), regex))
            if len(out) >= n:
                break
    return out


@pytest.mark.parametrize("tok_name", ["deepseek", "mistral"])
def test_corpus_key_states_equal_plain_walk(tok_name, request):
    """Real schemas: the states after ``{"`` and inside every prefix of each property name
    (and one byte past it), where the key automaton allows nearly every token."""
    tok = request.getfixturevalue(tok_name)
    vocab = Vocabulary.from_tokenizer(tok)
    used = 0
    for i, (_name, props, regex) in enumerate(_corpus_schemas()):
        dfa = LazyDFA.from_patterns([regex], strip_leading_space=vocab.strip_leading_space)
        texts = ['{"' + p + 'q' for p in props[:12]]
        states = _prefix_states(dfa, texts)
        used += _compare(dfa, vocab, tok.eos_token_id, states, np.random.default_rng(i), extra=2)
    assert used >= 20


def _random_regex(rng: random.Random, depth=0) -> str:
    atoms = ["a", "b", "ab", "é", "日本", " ", r"\.", "[a-z]", "[^ab]", "[a-c0-9]", '[^"\\\\]', ".", r"\d"]
    if depth > 2 or rng.random() < 0.35:
        return rng.choice(atoms)
    kind = rng.random()
    if kind < 0.4:
        return "".join(_random_regex(rng, depth + 1) for _ in range(rng.randint(2, 3)))
    if kind < 0.7:
        return "(?:" + "|".join(_random_regex(rng, depth + 1) for _ in range(rng.randint(2, 3))) + ")"
    return "(?:" + _random_regex(rng, depth + 1) + ")" + rng.choice(["*", "+", "?", "{0,3}", "{2,5}"])


def _sorted_pairs(ids, states):
    order = np.lexsort((states, ids))
    return ids[order], states[order]


@pytest.mark.parametrize("tok_name", ["mistral", "deepseek"])
def test_any_pair_of_states_gives_the_plain_walk(tok_name, request):
    """Exact for every pair (s, r), not just close neighbours: the walk of s from r's
    walk (pairs), and its mask and successors from r's :class:`Reference`."""
    tok = request.getfixturevalue(tok_name)
    vocab = Vocabulary.from_tokenizer(tok)
    layout = PreOrder.shared(vocab)
    rng = random.Random(12)
    checked = 0
    for _ in range(6 if tok_name == "deepseek" else 12):
        pattern = _random_regex(rng) + "(?:" + _random_regex(rng) + ")*!"
        dfa = LazyDFA.from_patterns([pattern], strip_leading_space=vocab.strip_leading_space)
        dfa.explore(40)
        index = TokenIndex(dfa, vocab, [tok.eos_token_id])
        index._near = None
        states = [q for q in range(1, dfa.num_states) if dfa.expanded[q]]
        walks = {q: index._walk_all(q) for q in states}
        width = index._bits_width()
        for s in rng.sample(states, min(6, len(states))):
            for r in rng.sample(states, min(3, len(states))):
                ids, st = walks[s]
                got = walk_near(index, s, r, layout.scatter(*walks[r]), budget=10 ** 9)
                assert all(np.array_equal(a, b) for a, b in zip(_sorted_pairs(*got), _sorted_pairs(ids, st))), \
                    (pattern, s, r)
                packed, succ = mask_near(index, s, r, Reference(layout, *walks[r], width), budget=10 ** 9)
                hit = np.zeros(width, dtype=bool)
                hit[ids] = True
                assert np.array_equal(packed, np.packbits(hit, bitorder="little")), (pattern, s, r)
                assert np.array_equal(succ, np.unique(st)), (pattern, s, r)
                checked += 1
    assert checked >= 50


def test_preorder_subtries_are_contiguous_ranges(mistral):
    vocab = Vocabulary.from_tokenizer(mistral)
    layout = PreOrder.shared(vocab)
    tb = vocab.token_bytes
    assert sorted(layout.ids.tolist()) == sorted(i for i, b in enumerate(tb) if b)
    assert np.array_equal(layout.ids[layout.pos[layout.ids]], layout.ids)

    def path(n):
        out = []
        while n > 0:
            out.append(int(vocab.node_byte[n]))
            n = int(vocab.node_parent[n])
        return bytes(out[::-1])

    rng = np.random.default_rng(0)
    for n in [0, *rng.integers(1, vocab.num_nodes, 150).tolist()]:
        prefix = path(n)
        below = {i for i, b in enumerate(tb) if b and b.startswith(prefix)}
        a = int(layout.start[n])
        assert set(layout.ids[a:a + int(layout.sub[n])].tolist()) == below, n
        assert set(layout.ids[a:a + int(layout.own[n])].tolist()) == {i for i in below if tb[i] == prefix}
    assert int(layout.first_byte.sum()) == layout.num_tokens


def test_budget_and_restrictive_states_fall_back_to_the_plain_walk(deepseek):
    vocab = Vocabulary.from_tokenizer(deepseek)
    schema, texts = SCHEMAS[0]
    dfa = LazyDFA.from_patterns([schema_to_regex(schema, whitespace="")],
                                strip_leading_space=vocab.strip_leading_space)
    index = TokenIndex(dfa, vocab, [deepseek.eos_token_id])
    q = dfa.walk(dfa.starts[0], b'{"cam')
    body = dfa.walk(dfa.starts[0], b'{"xyz')
    assert differences(index, q, body, budget=1) is None
    assert differences(index, q, body, budget=10 ** 9) is not None
    index._near.BUDGET = 0
    plain = TokenIndex(dfa, vocab, [deepseek.eos_token_id])
    plain._near = None
    for s in _prefix_states(dfa, texts[:1]):
        assert np.array_equal(index.bits(s), plain._compute_mask(s)[0])
    assert index.near_walks == 0 and len(index._near) > 0  # looked, then walked plainly
    restrictive = dfa.walk(dfa.starts[0], b'{"camera":')
    assert index._mask_near(restrictive) is None


def test_references_are_bounded(deepseek):
    vocab = Vocabulary.from_tokenizer(deepseek)
    schema, texts = SCHEMAS[0]
    dfa = LazyDFA.from_patterns([schema_to_regex(schema, whitespace="")],
                                strip_leading_space=vocab.strip_leading_space)
    index = TokenIndex(dfa, vocab, [deepseek.eos_token_id])
    index._near.REFS = 1
    for s in _prefix_states(dfa, texts):
        index.bits(s)
    assert len(index._near) == 1 and index.near_walks > 10


@pytest.mark.parametrize("tok_name", ["deepseek", "mistral"])
def test_documents_own_tokens_are_never_masked(tok_name, request):
    tok = request.getfixturevalue(tok_name)
    vocab = Vocabulary.from_tokenizer(tok)
    for schema, texts in SCHEMAS:
        dfa = LazyDFA.from_patterns([schema_to_regex(schema, whitespace="")],
                                    strip_leading_space=vocab.strip_leading_space)
        index = TokenIndex(dfa, vocab, [tok.eos_token_id])
        for text in texts:
            q = np.array([dfa.starts[0]])
            for t in tok.encode(text, add_special_tokens=False) + [tok.eos_token_id]:
                bits = index.bits(int(q[0]))
                assert (bits[t >> 3] >> (t & 7)) & 1, (text, t)
                q = index.next_states(q, np.array([t]))
            assert q[0] == -1
        assert index.near_walks > 0


def test_accepting_state_from_a_neighbour_sets_every_eos_bit(mistral):
    """An accepting state whose mask comes from a neighbour gets all EOS ids, two of
    them in the same byte of the packed mask."""
    vocab = Vocabulary.from_tokenizer(mistral)
    e = ((vocab.size + 7) // 8) * 8
    dfa = LazyDFA.from_patterns([r"(?:ab|[a-z ]*)"], strip_leading_space=vocab.strip_leading_space)
    index = TokenIndex(dfa, vocab, [e, e + 1, mistral.eos_token_id])
    plain = TokenIndex(dfa, vocab, [e, e + 1, mistral.eos_token_id])
    plain._near = None
    q = dfa.walk(dfa.starts[0], b"a")
    assert dfa.accepting[q]
    got = index.bits(q)
    assert index.near_walks == 1
    assert np.array_equal(got, plain._compute_mask(q)[0])
    assert {e, e + 1, mistral.eos_token_id} <= set(index.allowed(q).tolist())
