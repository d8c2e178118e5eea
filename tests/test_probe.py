"""The constructor's probe (``regex_constraint.probe``) stops, or is skipped, only
where it provably cannot fail: the bounds of ``growth_bounds`` hold on every
expansion (exactly, where the analysis is exact), construction raises exactly where
``LazyDFA.explore`` raises, with the same message, and lexical regions, masks and
successors do not depend on whether the probe ran (``region.find_region`` expands
the candidates it looks at)."""

import random

import numpy as np
import pytest

from hf_constrained import StateLimitError, schema_to_regex
from hf_constrained import regex_constraint as rc_module
from hf_constrained.automaton import DEAD, LazyDFA
from hf_constrained.region import find_region
from hf_constrained.regex_constraint import RegexConstraint, growth_bounds, probe
from hf_constrained.vocabulary import Vocabulary

#: without counters or shared definitions: the analysis is exact (see test below)
PLAIN = [r"ab|c", r"(ab)*", r"(a|bc)*d?", r"x(é|中文|😀)+y", r'"[^"\\]*"', r"[0-9]+(\.[0-9]+)?(e[+-]?[0-9]+)?",
         r'\{("a":[0-9]+|"bb":(true|false))(,"c":"[^"]*")?\}', r"(a?b?)*c", r"((a|)b)+", r".", r"(\s|x)*!"]
#: counters, nested counters, shared definitions (one-leaf and larger), pruned subtrees
COUNTED = [r"[a-z]{0,40}!", r"(?:[ab]{0,9}){0,9}c(a|b)*a(a|b){8}", r"(ab){2,5}|c{3,}", r'"[^"]{2,30}"',
           r"(?(DEFINE)(?P<d>[0-9]))(?&d)-(?&d){2,3}",
           r"(?(DEFINE)(?P<d0>\[(?:[0-9]+(?:,[0-9]+)*)?\])(?P<d1>\{\"k\":(?&d0)\}))\[(?&d1)(?:,(?&d1)){0,3}\]",
           r"a(?:b[^\s\S])?c", r"(x{0}|y)z"]


def _random_pattern(rng: random.Random, depth: int = 0, counted: bool = False) -> str:
    atoms = ["a", "b", "é", "[ab]", "[^a]", "[0-9]", '"', "中"]
    r = rng.random()
    if depth >= 3 or r < 0.35:
        return rng.choice(atoms)
    if r < 0.6:
        return "".join(_random_pattern(rng, depth + 1, counted) for _ in range(rng.randint(2, 3)))
    if r < 0.75:
        return "(?:" + "|".join(_random_pattern(rng, depth + 1, counted) for _ in range(rng.randint(2, 3))) + ")"
    ops = ["*", "+", "?"] + (["{2,4}", "{0,3}", "{3,}", "{2}"] if counted else [])
    return "(?:" + _random_pattern(rng, depth + 1, counted) + ")" + rng.choice(ops)


def _entered(dfa) -> int:
    """Over every expanded state: sum over classes of the positions (END left out)
    that some transition on that class enters (what ``entries`` bounds; the
    tokenizer's first space, a start's unstripped copy, is bounded apart)."""
    n = dfa.num_states
    strip = np.array([k[1] for k in dfa._keys], dtype=bool)
    total = 0
    for c in range(dfa.n_classes):
        rows = dfa.expanded[:n] & ~strip if c == dfa._space_class else dfa.expanded[:n]
        targets = {int(t) for t in dfa.table[:n, c][rows].tolist() if t > DEAD}
        total += len(set().union(*(dfa._keys[t][0] for t in targets)) - {0})
    return total


def _expand_all(dfa, limit=3000):
    """Breadth-first expansion checking the per-expansion bounds; returns the states."""
    positions, entries = growth_bounds(dfa)
    copies = sum(len(dfa._keys[s][0]) for s in set(dfa.starts)) if dfa.strip_leading_space else 0
    frontier = list(dict.fromkeys(dfa.starts))
    seen = set(frontier)
    i = 0
    while i < len(frontier) and i < limit:
        s = frontier[i]
        i += 1
        states, members = dfa.num_states, dfa._members
        dfa.expand(s)
        assert dfa.num_states - states <= dfa.n_classes + 1
        assert dfa._members - members <= entries + copies
        assert len(dfa._pos_keys) <= positions
        for t in sorted(set(dfa.table[s].tolist())):
            if t not in seen:
                seen.add(t)
                frontier.append(t)
    return i >= len(frontier)


@pytest.mark.parametrize("pattern", PLAIN)
@pytest.mark.parametrize("strip", [False, True])
def test_bounds_are_exact_without_counters(pattern, strip):
    """Counter-free, without definitions: every position is reachable and the follow
    relation over leaves is the automaton's, so the bounds are the counts themselves."""
    dfa = LazyDFA.from_patterns([pattern], strip_leading_space=strip)
    positions, entries = growth_bounds(dfa)
    assert _expand_all(dfa)
    assert len(dfa._pos_keys) == positions
    assert _entered(dfa) == entries - dfa.n_classes  # END counted on every class by the bound


@pytest.mark.parametrize("seed", range(60))
def test_bounds_are_exact_on_random_plain_patterns(seed):
    pattern = _random_pattern(random.Random(seed))
    dfa = LazyDFA.from_patterns([pattern])
    positions, entries = growth_bounds(dfa)
    assert _expand_all(dfa), pattern
    assert (len(dfa._pos_keys), _entered(dfa)) == (positions, entries - dfa.n_classes), pattern


@pytest.mark.parametrize("pattern", COUNTED + [_random_pattern(random.Random(s), counted=True) for s in range(40)])
@pytest.mark.parametrize("strip", [False, True])
def test_bounds_hold_with_counters_and_definitions(pattern, strip):
    dfa = LazyDFA.from_patterns([pattern], strip_leading_space=strip)
    positions, entries = growth_bounds(dfa)
    _expand_all(dfa)
    assert len(dfa._pos_keys) <= positions and _entered(dfa) <= entries - dfa.n_classes


def test_bounds_hold_on_json_schema_regexes():
    schemas = [{"type": "object", "properties": {"a": {"type": "string", "maxLength": 5},
                                                 "b": {"type": "array", "items": {"type": "integer"}, "maxItems": 3}},
                "required": ["a"]},
               {"$defs": {"p": {"type": "object", "properties": {"x": {"type": "number"}}}},
                "type": "array", "items": {"$ref": "#/$defs/p"}, "minItems": 2}]
    for schema in schemas:
        dfa = LazyDFA.from_patterns([schema_to_regex(schema, shared=True)])
        positions, entries = growth_bounds(dfa)
        _expand_all(dfa, limit=400)
        assert len(dfa._pos_keys) <= positions and _entered(dfa) <= entries - dfa.n_classes


def _limits(pattern, limit=128):
    """(states, positions, members) after the unlimited ``explore(limit)``."""
    dfa = LazyDFA.from_patterns([pattern])
    dfa.explore(limit)
    return dfa.num_states, len(dfa._pos_keys), dfa._members


def _outcome(build):
    try:
        build()
    except StateLimitError as e:
        return str(e)
    return None


@pytest.mark.parametrize("pattern", [r"(a|b)*a(a|b){12}", r"(?:[ab]{0,9}){0,9}c(a|b)*a(a|b){8}",
                                     r'\{"a":"[^"]{0,20}"(,"b":[0-9]{1,3})?\}', r"[0-9]{2,6}x"])
def test_construction_fails_exactly_where_the_probe_fails(local_tok, pattern):
    """At and around each limit (the exact counts the full probe reaches), the
    constructor raises iff ``explore`` raises, with the same message: a bound that
    skipped a probe which would fail makes the construction succeed here."""
    vocab = Vocabulary.from_tokenizer(local_tok)
    states, positions, members = _limits(pattern)
    cases = [{"max_states": m} for m in (states - 1, states, states + 1, 2 * states, 127, 128)]
    cases += [{"max_nfa_states": m} for m in (positions - 1, positions, positions + 1, 2 * positions,
                                              -(-members // 8) - 1, -(-members // 8), -(-members // 8) + 1)]
    failed = 0
    for kwargs in cases:
        if min(kwargs.values()) < 2:
            continue
        limit = min(kwargs.get("max_states", 10**9) + 1, 128)
        want = _outcome(lambda: LazyDFA.from_patterns([pattern], **kwargs).explore(limit))
        got = _outcome(lambda: RegexConstraint([pattern], vocab, [local_tok.eos_token_id], **kwargs))
        assert got == want, kwargs
        failed += want is not None
    assert failed >= 2  # the edges were reached


def test_probe_stops_early_only_after_it_can_no_longer_fail():
    """The walk is explore()'s (a prefix of its states, in its order) and stops as
    soon as the bound holds; with a tight max_states it runs as far as explore."""
    pattern = r"(a|b)*a(a|b){6}"
    full = LazyDFA.from_patterns([pattern])
    full.explore(128)
    for max_states, early in ((10**6, True), (full.num_states, False)):
        dfa = LazyDFA.from_patterns([pattern], max_states=max_states)
        assert probe(dfa, 128) is early
        n = dfa.num_states
        assert dfa._keys == full._keys[:n]
        assert (dfa.table[:n][dfa.expanded[:n]] == full.table[:n][dfa.expanded[:n]]).all()


def test_large_forests_probe_plainly(monkeypatch):
    monkeypatch.setattr(rc_module, "PROBE_BOUND_NODES", 0)
    dfa = LazyDFA.from_patterns([r'\{"a":[0-9]+\}'])
    assert probe(dfa, 128) is False  # (this automaton is smaller than 128 states)
    ref = LazyDFA.from_patterns([r'\{"a":[0-9]+\}'])
    assert ref.explore(128) is True and ref.num_states == dfa.num_states


# ---------------------------------------------------------------- regions do not depend on the probe
REGION_PATTERNS = [r'"[^"\\]*"', r'\["(?:[^"\\]|\\.)*"(?:,"(?:[^"\\]|\\.)*")*\]', r'\{"k":"[^"\\]*"(?:,"k2":"[^"]*")?\}',
                   r'\{"a":"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt])*","b":(?:[a-z]+|[0-9]+)\}']


def _content(dfa, s):
    """A state as its pattern positions (ids of states and positions follow discovery order)."""
    members, strip = dfa._keys[int(s)]
    return frozenset(dfa._pos_keys[p] for p in members), strip


def _region_by_content(dfa, q):
    got = find_region(dfa, q)
    if got is None:
        return None
    states, table = got
    return [_content(dfa, s) for s in states], table.tolist()


@pytest.mark.parametrize("pattern", REGION_PATTERNS)
def test_find_region_does_not_depend_on_prior_expansion(pattern):
    rng = np.random.default_rng(0)
    for _ in range(3):
        texts = [b"", b'"', b'["', b'{"a":"', b'"ab', b'"\xc3', b'"\xe4\xb8', b'["x","', b'{"a":"q","b":', b'{"k":"', b'{"k":"x","k2":"']
        fresh, explored = LazyDFA.from_patterns([pattern]), LazyDFA.from_patterns([pattern])
        explored.explore(int(rng.integers(20, 400)))
        regions = 0
        for text in texts:
            a, b = fresh.walk(fresh.starts[0], text), explored.walk(explored.starts[0], text)
            assert (a == DEAD) == (b == DEAD)
            if a == DEAD:
                continue
            assert _content(fresh, a) == _content(explored, b)
            ra, rb = _region_by_content(fresh, a), _region_by_content(explored, b)
            assert ra == rb, text
            regions += ra is not None
        assert regions


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"type": "string"}, "n": {"type": "integer"}}, "required": ["a", "n"]},
    {"type": "array", "items": {"type": "string", "maxLength": 8}, "minItems": 1},
])
def test_masks_successors_and_regions_equal_with_and_without_the_probe(deepseek, monkeypatch, schema):
    """A constraint that skips the probe and one that runs it in full (the bound
    walk switched off) give the same masks, successors (by state content) and
    regions along a document."""
    import json
    vocab = Vocabulary.from_tokenizer(deepseek)
    regex = schema_to_regex(schema, shared=True)
    skipped = RegexConstraint([regex], vocab, [deepseek.eos_token_id])
    assert int(skipped.dfa.expanded[:skipped.dfa.num_states].sum()) == 1  # only DEAD: the probe was skipped
    monkeypatch.setattr(rc_module, "PROBE_BOUND_NODES", 0)
    probed = RegexConstraint([regex], vocab, [deepseek.eos_token_id])
    assert probed.dfa.num_states > skipped.dfa.num_states
    doc = {"a": "héllo \"x\"", "n": 42} if schema["type"] == "object" else ["ab", "中文", "x\\y"]
    ids = deepseek.encode(json.dumps(doc, ensure_ascii=False), add_special_tokens=False)
    qa, qb = skipped.starts[:1], probed.starts[:1]
    for t in ids + [None]:
        a, b = int(qa[0]), int(qb[0])
        assert _content(skipped.dfa, a) == _content(probed.dfa, b)
        assert np.array_equal(skipped.allowed_ids(a), probed.allowed_ids(b))
        sa, sb = skipped.successors(a), probed.successors(b)
        if sa is not None or sb is not None:
            assert len(sa) == len(sb)
            assert {_content(skipped.dfa, s) for s in sa} == {_content(probed.dfa, s) for s in sb}
        assert _region_by_content(skipped.dfa, a) == _region_by_content(probed.dfa, b)
        if t is None:
            break
        qa, qb = skipped.advance(qa, np.array([t])), probed.advance(qb, np.array([t]))
    assert skipped.accepting(qa).tolist() == probed.accepting(qb).tolist() == [True]
