"""The exit forest of a lexical region (``RegionWalk.exit_walk``): the tokens that leave
a string body, walked over the subtries below the region's exits merged per (region
state left, byte read), give exactly the (token, next state) pairs of walking every exit
node's subtrie, and the masks and successors of the plain trie walk, over the whole
DeepSeek (129k) and Mistral (32k) vocabularies: on string bodies of hand-written JSON
regexes and of corpus schemas (every region state among the first states explored)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from hf_constrained.automaton import DEAD, LazyDFA
from hf_constrained.index import TokenIndex
from hf_constrained.json_schema import schema_to_regex
from hf_constrained.region import RegionWalk
from hf_constrained.vocabulary import Vocabulary

CORPUS = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "jsonschemabench"

STR = r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"'
PATTERNS = [
    # strings followed by different keys, an array of strings, a string before a number
    r'\{"name":' + STR + r',"tags":\[(?:' + STR + r'(?:,' + STR + r')*)?\],"n":[0-9]{1,3}\}',
    # a string that ends the document, and one with a narrower body (no escapes, ASCII only)
    r'\{"a":"[ -!#-\[\]-~]*","b":' + STR + r'\}',
    # free text without quotes: exits on newline only
    r"[^\n]{0,40}\n[a-zé ]*!",
]


def _sorted_pairs(ids, states):
    order = np.lexsort((states, ids))
    return ids[order], states[order]


def _exit_subtries(index, walk, states):
    """The walk the exit forest replaces: every exit node's subtrie, from where it leaves."""
    dfa = index.dfa
    nxt = dfa.table[states[walk.exit_from], dfa.byte_class[index.vocab.node_byte[walk.exit_nodes]]]
    live = nxt != DEAD
    return index._walk_from(index.vocab, None, walk.exit_nodes[live], nxt[live].astype(np.int64))


def _check_regions(dfa, vocab, eos, n_states):
    """Compare every region state among the first ``n_states``; returns how many there were."""
    index = TokenIndex(dfa, vocab, [eos])
    plain = TokenIndex(dfa, vocab, [eos])
    plain.REGION_MIN_LOOPS = 10**9  # no regions: the plain trie walk
    plain._near = None
    used = 0
    for q in range(1, min(dfa.num_states, n_states)):
        parts = index._region_parts(q)
        if parts is None:
            continue
        used += 1
        walk, states, ids, nxt = parts
        want = _sorted_pairs(*_exit_subtries(index, walk, states))
        got = _sorted_pairs(ids, nxt)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), q
        ids_r, nxt_r = _sorted_pairs(*index._walk_region(q))
        ids_p, nxt_p = _sorted_pairs(*plain._walk_all(q))
        assert np.array_equal(ids_r, ids_p) and np.array_equal(nxt_r, nxt_p), q
        assert np.array_equal(index.bits(q), plain.bits(q)), q
        assert np.array_equal(index.successors(q), plain.successors(q)), q
    return used


@pytest.mark.parametrize("tok_name", ["deepseek", "mistral"])
def test_exit_forest_equals_exit_subtries_and_plain_walk(tok_name, request):
    tok = request.getfixturevalue(tok_name)
    vocab = Vocabulary.from_tokenizer(tok)
    used = 0
    for pattern in PATTERNS:
        dfa = LazyDFA.from_patterns([pattern], strip_leading_space=vocab.strip_leading_space)
        dfa.explore(300)
        used += _check_regions(dfa, vocab, tok.eos_token_id, 300)
    assert used >= 6  # name, two array items, a, b, the free text (and their UTF-8 states)


def _corpus_regexes(n=6):
    """Corpus schemas with string properties (small files, round the datasets' order)."""
    if not CORPUS.is_dir():
        pytest.skip(f"JSONSchemaBench corpus not found at {CORPUS}")
    out = []
    for path in sorted(CORPUS.glob("*/*.json")):
        if len(path.read_bytes()) > 20_000:
            continue
        try:
            schema = json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError):
            continue
        props = schema.get("properties") if isinstance(schema, dict) else None
        if not isinstance(props, dict) or not any(isinstance(p, dict) and p.get("type") == "string"
                                                   for p in props.values()):
            continue
        try:
            with warnings.catch_warnings():  # near-miss keywords in the corpus: not the point here
                warnings.simplefilter("ignore")
                out.append(schema_to_regex(schema, shared=True))
        except Exception:  # noqa: BLE001 (schemas the converter refuses are not the point here)
            continue
        if len(out) >= n:
            break
    return out


@pytest.mark.parametrize("tok_name", ["deepseek", "mistral"])
def test_corpus_string_states_equal_plain_walk(tok_name, request):
    tok = request.getfixturevalue(tok_name)
    vocab = Vocabulary.from_tokenizer(tok)
    used = 0
    for regex in _corpus_regexes():
        dfa = LazyDFA.from_patterns([regex], strip_leading_space=vocab.strip_leading_space)
        dfa.explore(250)
        used += _check_regions(dfa, vocab, tok.eos_token_id, 250)
    assert used >= 10


def test_exit_forest_is_small_and_merged(deepseek):
    """The forest holds every token below an exit once, in fewer nodes than the subtries."""
    vocab = Vocabulary.from_tokenizer(deepseek)
    dfa = LazyDFA.from_patterns([PATTERNS[0]])
    dfa.explore(100)
    index = TokenIndex(dfa, vocab, [deepseek.eos_token_id])
    q = dfa.walk(dfa.starts[0], b'{"name":"')
    walk, states, _, _ = index._region_parts(q)
    assert isinstance(walk, RegionWalk)
    f = walk.forest
    roots = index._lookup(states[f.keys // 256].astype(dfa.table.dtype), dfa.byte_class.take(f.keys % 256))
    live = np.flatnonzero(roots)
    assert 0 < len(live) < len(f.keys) // 4  # a few of the exits' groups are live (the closing quote)
    t = f.trees(live)
    assert f.trees(live) is t  # built once, kept
    assert len(np.unique(t.ids)) == len(t.ids)  # each token once
    subtrie_nodes = 0
    nodes = walk.exit_nodes[np.isin(f.group_of, live)]
    while len(nodes):
        subtrie_nodes += len(nodes)
        nodes = np.concatenate([np.arange(vocab.child_start[n], vocab.child_end[n]) for n in nodes.tolist()])
    assert len(t.parent) < subtrie_nodes
    ds = t.depth_start
    assert ds[1] == len(live) and (t.parent[ds[1]:] < np.repeat(ds[1:-1], np.diff(ds[1:]))).all()
