"""Shared subtrees (issue #12, part 18): ``LazyDFA`` builds a subtree that the parse tree
holds more than once (the parser gives equal groups one tree) once, as an implicit
definition called from each place, instead of one copy of its nodes per place. The
automaton must be the one the copies give: the same states in the same order, the same
transitions, acceptance and positions count, and the same token masks and successors;
counted repetitions keep their bodies as one tree (``counted_region.py`` reads them so)."""

from __future__ import annotations


import numpy as np
import pytest

from hf_constrained.automaton import LazyDFA
from hf_constrained.forest import _REF
from hf_constrained.regex_parser import parse
from corpus import CORPUS, corpus_files, corpus_regexes

PATTERNS = [
    r"(?:ab|c[d-f]+)x(?:ab|c[d-f]+)y(?:ab|c[d-f]+)",
    r'\{(?:"k":(?:[0-9]+|"[a-z]*"),?)*(?:"k":(?:[0-9]+|"[a-z]*"),?)\}',
    r"(?:(?:ab|cd)+e){2,4}(?:ab|cd)+",                  # the same group inside and outside a counter
    r"(?:(?:x(?:ab|cd)y)?z)*(?:x(?:ab|cd)y)?(?:é|ü){0,3}(?:x(?:ab|cd)y)?",
    r"(?(DEFINE)(?P<s>(?:[a-c]|\\n)*)(?P<o>\{(?:\"(?&s)\":(?:[0-9]|\"(?&s)\"))?\}))"
    r"\[(?:(?:(?&o)|(?:x[0-9]y)+),)*(?:(?&o)|(?:x[0-9]y)+)\]",
    r"(?:(?:a|b)(?:c|d))?(?:(?:a|b)(?:c|d))?(?:)(?:(?:a|b)(?:c|d))?",   # nullable shared subtrees
    r"(?:[^\x00-\x7f]|ab)(?:[^\x00-\x7f]|ab)(?:[^\x00-\x7f]|ab)",         # multi-byte leaves
    r"(?(DEFINE)(?P<d>(?:ab|cd)))(?:ab|cd)x(?&d)(?:y(?&d))?",              # a definition's body shared
]


def _pair(tree, strip=True):
    return (LazyDFA([tree], strip_leading_space=strip),
            LazyDFA([tree], strip_leading_space=strip, share_subtrees=False))


def _same_automaton(shared, plain, limit):
    shared.explore(limit)
    plain.explore(limit)
    n = shared.num_states
    assert shared.starts == plain.starts
    assert n == plain.num_states
    assert np.array_equal(shared.table[:n], plain.table[:n])
    assert np.array_equal(shared.accepting[:n], plain.accepting[:n])
    assert len(shared._pos_keys) == len(plain._pos_keys)
    assert [len(k[0]) for k in shared._keys] == [len(k[0]) for k in plain._keys]
    for s in range(1, min(n, 60)):  # mask representatives: the same states too
        for depth in (1, 4, 128):
            assert shared.mask_representative(s, depth) == plain.mask_representative(s, depth)


def _corpus_trees(n):
    return [(path.name, parse(regex)) for path, regex in corpus_regexes(corpus_files(n))]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_shared_build_is_the_copied_build(pattern):
    tree = parse(pattern)
    explicit = len(tree[1]) if tree[0] == "def" else 0
    for strip in (False, True):
        shared, plain = _pair(tree, strip)
        assert sum(shared._forest.is_def) > explicit, "nothing was shared"
        assert sum(plain._forest.is_def) == explicit
        _same_automaton(shared, plain, 2000)


def test_shared_forests_are_smaller():
    sizes = [(len(a._forest.kind), len(b._forest.kind)) for a, b in (_pair(parse(p)) for p in PATTERNS)]
    assert sum(a < b for a, b in sizes) >= len(sizes) - 2 and sum(a for a, _ in sizes) < sum(b for _, b in sizes)


def test_counted_repetition_bodies_hold_no_calls():
    """A group repeated inside ``{2,4}`` and outside: shared outside, a plain copy inside."""
    tree = parse(PATTERNS[2])
    f = LazyDFA([tree])._forest
    reps = [i for i, c in enumerate(f.counted) if c]
    assert reps and any(k == _REF and not f.is_def[i] for i, k in enumerate(f.kind))
    for r in reps:
        todo = [r]
        while todo:
            node = todo.pop()
            assert f.kind[node] != _REF, "a call inside a counted repetition"
            todo.extend(f.kids[node])


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"JSONSchemaBench corpus not found at {CORPUS}")
def test_shared_build_on_corpus_regexes():
    """The first corpus schemas' regexes (as JSONProcessor makes them): the same automaton
    over the first 300 states, and most forests smaller."""
    trees = _corpus_trees(4)
    smaller = 0
    for name, tree in trees:
        shared, plain = _pair(tree)
        smaller += len(shared._forest.kind) < len(plain._forest.kind)
        _same_automaton(shared, plain, 300)
    assert len(trees) >= 20 and smaller >= len(trees) // 2, (len(trees), smaller)


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"JSONSchemaBench corpus not found at {CORPUS}")
def test_shared_build_gives_the_same_masks(deepseek):
    """Token masks and successors of the states along valid-looking prefixes and random
    allowed tokens: the shared build's index against the copied build's."""
    from hf_constrained.index import TokenIndex
    from hf_constrained.vocabulary import Vocabulary

    vocab = Vocabulary.from_tokenizer(deepseek)
    eos = [deepseek.eos_token_id]
    rng = np.random.default_rng(18)
    checked = 0
    for name, tree in _corpus_trees(2)[:10] + [(p, parse(p)) for p in PATTERNS[:2]]:
        shared, plain = _pair(tree, vocab.strip_leading_space)
        a, b = TokenIndex(shared, vocab, eos), TokenIndex(plain, vocab, eos)
        q = int(shared.starts[0])
        assert q == int(plain.starts[0])
        for _ in range(25):  # a random walk over allowed tokens
            assert np.array_equal(a.bits(q), b.bits(q)), (name, q)
            assert np.array_equal(a.successors(q), b.successors(q)), (name, q)
            checked += 1
            ids = a.allowed(q)
            ids = ids[ids != eos[0]]
            if not len(ids):
                break
            t = rng.choice(ids)
            qa = int(a.next_states(np.array([q]), np.array([t]))[0])
            assert qa == int(b.next_states(np.array([q]), np.array([t]))[0]), (name, q, t)
            q = qa
            if q <= 0:
                break
    assert checked >= 100
