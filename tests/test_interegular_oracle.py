"""A second, independent oracle: interegular's own FSM (the declared dependency).

interegular determinises over characters, with its own parser; our engine
determinises lazily over UTF-8 bytes. On patterns inside interegular's (ASCII
shorthand) subset both must accept exactly the same strings.
"""

import random

import interegular
import pytest

from hf_constrained.automaton import LazyDFA

PATTERNS = [
    r"[a-c]{2}x?",
    r"(ab|a)(c|bcd)*",
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}",
    r"(é|中文|😀)+x?",
    r"[^ab]{1,3}",
    r'"([^"\\]|\\["\\nt])*"',
    r"(a|b)*a(a|b){3}",
    r"-?(0|[1-9][0-9]*)(\.[0-9]+)?",
]
ALPHABET = "abcdx0123456789-.é中文😀\"\\ nt"


@pytest.mark.parametrize("pattern", PATTERNS)
def test_same_language_as_interegular(pattern):
    fsm = interegular.parse_pattern(pattern).to_fsm()
    dfa = LazyDFA.from_patterns([pattern])
    rng = random.Random(pattern)
    samples = [""] + ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 8))) for _ in range(3000)]
    # plus strings interegular itself generates from the language
    gen = fsm.strings()
    for _ in range(300):
        try:
            # interegular yields a marker for "any other character": use one
            samples.append("".join(c if isinstance(c, str) else "z" for c in next(gen)))
        except StopIteration:
            break
    accepted = 0
    for s in samples:
        ours = dfa.fullmatch(s.encode("utf-8"))
        assert ours == fsm.accepts(s), (pattern, s)
        accepted += ours
    assert accepted > 0
