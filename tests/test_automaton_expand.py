"""``LazyDFA.expand`` (state creation, issue #12 part 13) against a plain determinisation.

The reference below knows nothing of the automaton's position ids, row caches or segment
cuts: a state is a frozenset of position *keys* ``(leaf, byte, counters, calls)``, a
position's transitions come straight from its leaf's UTF-8 trie and the plain Glushkov
follow set (``_reference_after`` of ``test_automaton.py``), and a state's successor on
each byte class is the union over its members, interned class by class in increasing
order (the first-space rule last). The lazy automaton must produce the same states, in
the same discovery order, with the same rows and accepting flags: state ids are part of
the disk cache and of ``benchmarks/regex_digests.py --check``, so any faster way of
creating states (cached rows, segment unions, batched expansion) has to pass this test
for breadth-first exploration and for the arbitrary order of byte-by-byte walks.
"""

import json
import random
from pathlib import Path

import numpy as np
import pytest

from hf_constrained.automaton import LazyDFA
from hf_constrained.forest import END
from test_automaton import PATTERNS, STRIP_PATTERNS, _random_pattern, _reference_after

CORPUS = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "jsonschemabench"


class _PlainDFA:
    """Per-byte-class subset construction over position keys (slow, obviously right)."""

    def __init__(self, dfa: LazyDFA):
        self.f, self.bc = dfa._forest, [int(c) for c in dfa.byte_class]
        self.n, self.space = dfa.n_classes, int(dfa.byte_class[0x20])
        self.keys, self.ids, self.rows = [], {}, {}
        assert self.intern(frozenset(), False) == 0
        # the start states' position keys come from the automaton (its first sets are
        # checked by test_automaton.py); everything after them is built here
        self.starts = [self.intern(frozenset(dfa._pos_keys[p] for p in dfa._keys[s][0]), dfa._keys[s][1])
                       for s in dfa.starts]

    def intern(self, members: frozenset, strip: bool) -> int:
        key = (members, strip)
        if key not in self.ids:
            self.ids[key] = len(self.keys)
            self.keys.append(key)
        return self.ids[key]

    def targets(self, pos, c: int) -> set:
        """Positions reached from position key ``pos`` on byte class ``c``."""
        if pos is END:
            return set()
        leaf, k, ctx, stack = pos
        out = set()
        for lo, hi, tgt in self.f.tries[self.f.trie[leaf]][k]:
            if self.bc[lo] <= c <= self.bc[hi]:
                out.update([(leaf, tgt, ctx, stack)] if tgt >= 0 else _reference_after(self.f, leaf, ctx, stack))
        return out

    def expand(self, sid: int) -> list:
        if sid not in self.rows:
            members, strip = self.keys[sid]
            row = []
            for c in range(self.n):
                got = set().union(*[self.targets(p, c) for p in members])
                row.append(self.intern(frozenset(got), False) if got else 0)
            if strip:
                row[self.space] = self.intern(members, False)
            self.rows[sid] = row
        return self.rows[sid]

    def explore(self, limit: int) -> None:
        """``LazyDFA.explore``'s order: breadth first, successors in increasing id."""
        frontier = list(dict.fromkeys(self.starts))
        seen = set(frontier)
        for i, s in enumerate(frontier):
            if i >= limit:
                return
            for t in sorted(set(self.expand(s))):
                if t not in seen:
                    seen.add(t)
                    frontier.append(t)

    def walk(self, sid: int, data: bytes) -> int:
        for b in data:
            if sid == 0:
                return 0
            sid = self.expand(sid)[self.bc[b]]
        return sid


def _same(dfa: LazyDFA, ref: _PlainDFA, label) -> None:
    """Same states (as position-key sets, in order), same rows, same accepting flags."""
    keys = dfa._pos_keys
    got = [(frozenset(keys[p] for p in members), strip) for members, strip in dfa._keys]
    assert got == ref.keys, label
    n = dfa.num_states
    # the dead state 0 is expanded from the start in LazyDFA, here only once reached
    assert np.nonzero(dfa.expanded[1:n])[0].tolist() == sorted(s - 1 for s in ref.rows if s), label
    for sid, row in ref.rows.items():
        assert dfa.table[sid].tolist() == row, (label, sid)
    acc = [END in members for members, _ in ref.keys]
    assert dfa.accepting[:n].tolist() == acc, label


def _check(patterns, strip: bool, limit: int, walks=(), label=None) -> None:
    dfa = LazyDFA.from_patterns(patterns, strip_leading_space=strip)
    ref = _PlainDFA(dfa)
    dfa.explore(limit)
    ref.explore(limit)
    _same(dfa, ref, label or patterns)
    for data in walks:  # then arbitrary orders of first visits
        for s, r in zip(dfa.starts, ref.starts):
            assert dfa.walk(s, data) == ref.walk(r, data), (label or patterns, data)
    _same(dfa, ref, label or patterns)


@pytest.mark.parametrize("strip", [False, True])
def test_expand_matches_the_plain_construction_on_fixed_patterns(strip):
    rng = random.Random(7)
    alphabet = b'ab"{}:, \\x09\xc3\xa9\xe2\x82\xac0123456789'
    for pattern in PATTERNS + STRIP_PATTERNS:
        walks = [bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) for _ in range(20)]
        _check([pattern], strip, 60, walks)


@pytest.mark.parametrize("seed", range(10))
def test_expand_matches_the_plain_construction_on_random_patterns(seed):
    rng = random.Random(seed)
    alphabet = b"abcx\xc3\xa9"
    for _ in range(8):
        patterns = [_random_pattern(rng) for _ in range(rng.randint(1, 3))]  # several starts
        walks = [bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 10))) for _ in range(30)]
        _check(patterns, rng.random() < 0.5, rng.choice([5, 40, 400]), walks)


@pytest.mark.filterwarnings("ignore::UserWarning")  # lenient-keyword notes of the corpus
def test_expand_matches_the_plain_construction_on_corpus_schemas():
    if not CORPUS.is_dir():
        pytest.skip(f"JSONSchemaBench corpus not found at {CORPUS}")
    from hf_constrained import SchemaError, schema_to_regex

    rng = random.Random(3)
    checked = 0
    for name in ["Github_medium", "Snowplow", "Kubernetes", "Glaiveai2K", "WashingtonPost"]:
        for path in sorted((CORPUS / name).glob("*.json"))[:4]:
            try:
                regex = schema_to_regex(json.loads(path.read_text()), shared=True)
            except (SchemaError, ValueError, RecursionError):
                continue
            # JSON-ish byte strings: the walks reach key names, strings and numbers
            alphabet = b'{}[]":,. -0123456789abcdefghinorstu\\\xc3\xa9'
            walks = [b'{"' + bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 14))) for _ in range(15)]
            _check([regex], True, 80, walks, label=f"{name}/{path.name}")
            checked += 1
    assert checked >= 10
