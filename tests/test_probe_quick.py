"""The probe's first, mask-free bound (``regex_constraint.quick_bounds``, issue #12, part 26):
the same positions as ``growth_bounds`` and entries bounded on both sides of its, and the
probe decides, walks and raises exactly as with ``growth_bounds`` alone."""

import random
import warnings

import pytest

from hf_constrained import StateLimitError, schema_to_regex
from hf_constrained import regex_constraint as rc_module
from hf_constrained.automaton import LazyDFA
from hf_constrained.regex_constraint import growth_bounds, probe, quick_bounds
from test_probe import COUNTED, PLAIN, _random_pattern
from corpus import CORPUS, corpus_files, corpus_regexes

MORE = [r"abc|abd", r"a?b", r"(?:ab?c)+", r"x(?:)y", r"(?:[^\s\S]a)?b", r"é中😀", r"(?:a|b)c(?:d|)e",
        r'\{"name":"[^"]*","id":[0-9]+\}', r"(?:\{[ ]?\"k\" ?: ?[0-9]{1,3}\}){2,4}"]
RANDOM = [_random_pattern(random.Random(s), counted=s % 2 == 1) for s in range(80)]


def _check(dfa):
    positions, high, low = quick_bounds(dfa)
    exact = growth_bounds(dfa)
    assert positions == exact[0]
    assert low <= exact[1] <= high
    return exact, (positions, high, low)


@pytest.mark.parametrize("pattern", PLAIN + COUNTED + MORE + RANDOM)
@pytest.mark.parametrize("strip", [False, True])
def test_quick_bounds_around_growth_bounds(pattern, strip):
    _check(LazyDFA.from_patterns([pattern], strip_leading_space=strip))


def test_quick_bounds_are_exact_on_leaves_after_leaves():
    # "abc": b after a, c after b are known; a, a start (entered on nothing), is not
    dfa = LazyDFA.from_patterns(["abc"])
    exact, (positions, high, low) = _check(dfa)
    assert low == exact[1] and high == low + dfa.n_classes
    # an alternative's leaves are not known: the bounds open up
    exact, (positions, high, low) = _check(LazyDFA.from_patterns(["x(?:a|b)"]))
    assert low < exact[1] < high


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"JSONSchemaBench corpus not found at {CORPUS}")
def test_quick_bounds_on_corpus_regexes():
    checked = 0
    for path, regex in corpus_regexes(corpus_files(4)):
        dfa = LazyDFA.from_patterns([regex])
        if len(dfa._forest.kind) <= 3000:
            _check(dfa)
            checked += 1
    assert checked >= 20


def _probed(pattern, monkeypatch, quick, **limits):
    """(probe's result or error, the states it made, which were expanded) with quick_bounds
    as given (None: the probe's own)."""
    with monkeypatch.context() as m:
        if quick is not None:
            m.setattr(rc_module, "quick_bounds", quick)
        try:
            dfa = LazyDFA.from_patterns([pattern], **limits)
        except StateLimitError as e:  # the starts alone are over a limit
            return "construction: " + str(e)
        try:
            got = probe(dfa, min(limits.get("max_states", 10**9) + 1, 128))
        except StateLimitError as e:
            got = str(e)
        n = dfa.num_states
        return got, dfa._keys[:n], dfa.expanded[:n].tolist()


def _no_quick(dfa):
    """A quick bound that never decides: the probe as it was, on growth_bounds alone."""
    positions, _, _ = quick_bounds(dfa)
    return positions, 10**30, 0


@pytest.mark.parametrize("pattern", [r"(a|b)*a(a|b){12}", r"(?:[ab]{0,9}){0,9}c(a|b)*a(a|b){8}",
                                     r'\{"a":"[^"]{0,20}"(,"b":[0-9]{1,3})?\}', r"[0-9]{2,6}x", r"abc|abd",
                                     r'\{"name":"[^"]*","id":[0-9]+\}'])
def test_probe_as_on_growth_bounds_alone(monkeypatch, pattern):
    """At and around the limits (the counts the full walk reaches): the same result or
    error, the same states made and expanded, with the quick bound and without it."""
    full = LazyDFA.from_patterns([pattern])
    full.explore(128)
    states, positions, members = full.num_states, len(full._pos_keys), full._members
    cases = [{}] + [{"max_states": m} for m in (states - 1, states, states + 1, 2 * states, 127, 128, 10**6)]
    cases += [{"max_nfa_states": m} for m in (positions - 1, positions, positions + 1, 4 * positions,
                                              -(-members // 8) - 1, -(-members // 8), -(-members // 8) + 1,
                                              2 * members, 64 * members)]
    outcomes = set()
    for limits in cases:
        if min(limits.values(), default=2) < 2:
            continue
        got = _probed(pattern, monkeypatch, None, **limits)
        assert got == _probed(pattern, monkeypatch, _no_quick, **limits), limits
        outcomes.add(got[0] if not isinstance(got[0], str) else "error")
    assert True in outcomes and len(outcomes) >= 2  # stopped early, and walked or raised


def test_probe_takes_the_quick_bound_first(monkeypatch):
    """Far from the limits, the quick bound decides alone; where its low bound is over the
    budget, growth_bounds (which would give up) is not computed."""
    def fail(*args, **kwargs):
        raise AssertionError("growth_bounds computed")

    monkeypatch.setattr(rc_module, "growth_bounds", fail)
    assert probe(LazyDFA.from_patterns([r'\{"name":"[^"]*","id":[0-9]+\}']), 128) is True
    # a tight member budget: low > max_entries, so the probe walks without bounds
    pattern = r"(?:[ab]{0,9}){0,9}c(a|b)*a(a|b){8}"
    dfa = LazyDFA.from_patterns([pattern], max_nfa_states=60)
    positions, high, low = quick_bounds(dfa)
    assert low > (8 * 60 - dfa._members) // 128
    try:
        assert probe(dfa, 128) is False
    except StateLimitError:
        pass


def test_corpus_probe_as_on_growth_bounds_alone(monkeypatch):
    """The first corpus schemas (as JSONProcessor makes their regexes): the same probe."""
    if not CORPUS.is_dir():
        pytest.skip(f"JSONSchemaBench corpus not found at {CORPUS}")
    checked = 0
    for path, regex in corpus_regexes(corpus_files(8)):
        if len(regex) > 20_000:
            continue
        assert _probed(regex, monkeypatch, None) == _probed(regex, monkeypatch, _no_quick), path
        checked += 1
    assert checked >= 10
