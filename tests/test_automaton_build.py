"""The forest builder (issue #12, part 23): ``_Forest`` writes four node lists while it
builds and the other seven at the end of ``add``, and builds a repeated leaf (``" ?"``,
``"[0-9]*"``) inline. The forest must be main's node for node: the 11 lists, the tries and
the roots equal to those of ``tests/forest_reference.py`` (main's builder at 1567814), with
shared subtrees and without, on hand-made patterns and on corpus regexes; so the automaton
(which reads nothing else of the forest) is the same."""

from __future__ import annotations

import pytest

from hf_constrained.automaton import LazyDFA
from hf_constrained.forest import _Forest
from hf_constrained.regex_parser import parse
from corpus import corpus_files, corpus_regexes
from forest_reference import ReferenceForest

LISTS = ("kind", "kids", "parent", "slot", "nullable", "lo", "hi", "counted", "trie", "target", "is_def")

PATTERNS = [
    r"a ?b ?",                                   # repeated leaves in a concatenation
    r"x?",                                       # ... alone
    r"(?:a?|b{0,1}|c{1}|d{1,1}|e{2}|f{0,}|g{3,}|h{2,5}|i{0,0}|j{0}k)",
    r"[0-9]*[a-z]+[A-Z]{0,3}\.?(?:q*)*",
    r"(?:ab ?){2,4}(?:ab ?){2,4}c ?",            # a shared group under a counter and outside
    r"(?:[^\x00-\x7f] ?|ab)(?:[^\x00-\x7f] ?|ab)",
    r"(?:(?:a|b)(?:c|d))?(?:(?:a|b)(?:c|d))?(?:)(?:(?:a|b)(?:c|d))?",
    r"(?(DEFINE)(?P<s>(?:[a-c]|\\n)*)(?P<o>\{ ?(?:\"(?&s)\" ?: ?(?:[0-9]|\"(?&s)\"))? ?\}))"
    r"\[ ?(?:(?:(?&o)|(?:x[0-9]y)+) ?, ?)*(?:(?&o)|(?:x[0-9]y)+) ?\]",
    r"(?(DEFINE)(?P<d>(?:ab|cd)))(?:ab|cd)x(?&d)(?:y(?&d))?(?&d) ?",
    r"a\ud800?b",                                # a lone surrogate: an empty class, repeated
    r"a(?:\ud800|c)d\ud800{0,2}e?",
    r"ab\ud800c",                                # an empty class in a literal run: no language
    '"(?:[^"\\\\]|\\\\.)*" ?: ?(?:true|false|-?[0-9]+)(?: ?, ?"(?:[^"\\\\]|\\\\.)*" ?: ?(?:true|false))*',
]


def _build(cls, trees, share):
    f = cls(share=share)
    roots = [f.add(t) for t in trees]
    return f, roots


def _assert_same(trees, share):
    ours, roots = _build(_Forest, trees, share)
    ref, ref_roots = _build(ReferenceForest, trees, share)
    assert roots == ref_roots
    for name in LISTS:
        assert getattr(ours, name) == getattr(ref, name), name
    assert ours.tries == ref.tries


@pytest.mark.parametrize("share", [True, False])
@pytest.mark.parametrize("pattern", PATTERNS)
def test_forest_is_mains(pattern, share):
    _assert_same([parse(pattern)], share)


@pytest.mark.parametrize("share", [True, False])
def test_several_patterns_in_one_forest(share):
    """``add`` twice: the second pattern's nodes are finished too, the first's kept."""
    _assert_same([parse(p) for p in PATTERNS[:9]], share)


def test_hand_made_trees_with_shared_repeated_leaves():
    """The same ``("rep", leaf, ...)`` object in several places (the parser makes a new one
    each time; a caller's tree may not)."""
    leaf = ("cls", ((97, 97),))
    opt, star, two = ("rep", leaf, 0, 1), ("rep", leaf, 0, None), ("rep", leaf, 2, 2)
    body = ("cat", (opt, leaf, star, two, opt))
    tree = ("cat", (body, ("alt", (body, opt, star)), ("rep", body, 0, 3), opt))
    for share in (True, False):
        _assert_same([tree], share)


def test_corpus_forests_are_mains():
    """Every 8th corpus file the converter takes (the regexes of ``JSONProcessor``)."""
    regexes = corpus_regexes(corpus_files(step=8))
    if not regexes:
        pytest.skip("corpus missing: ../shared/data/jsonschemabench")
    assert len(regexes) > 300
    for path, regex in regexes:
        tree = parse(regex)
        for share in (True, False):
            _assert_same([tree], share)


def test_automaton_reads_the_finished_forest():
    """The DFA built on the new forest: its start and a walk (a smoke check that nothing
    reads a list before ``_finish`` wrote it)."""
    dfa = LazyDFA([parse(PATTERNS[-1])])
    s = dfa.walk(dfa.starts[0], b'"k" : true , "j":false')
    assert dfa.is_accepting(s)
