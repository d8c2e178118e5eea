"""The parser's group cache finds a cached group by its head, the text up to the first ")"
after the "(" (issue #12, part 26): the candidates under one head are all tried, a group's
text is taken where it stands whatever escapes, classes or comments hold parentheses, and
the trees and errors are those of a parser without the cache."""

from __future__ import annotations

import pytest

from hf_constrained.errors import RegexSyntaxError
from hf_constrained.regex_parser import _Parser, parse


class _Counting(_Parser):
    """Counts the alternations parsed: the top level plus one per group parsed (not cached)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.parsed = 0

    def alternation(self, top: bool = False):
        self.parsed += 1
        return super().alternation(top)


def _parsed(pattern: str, groups: bool = True):
    parser = _Counting(pattern, groups=groups)
    parser.subroutines = True
    return parser.parse(), parser.parsed - 1


@pytest.mark.parametrize("pattern, parsed", [
    # two cached texts under one head "(?:a(?:b)": the second is found behind the first
    ("(?:a(?:b)c)(?:a(?:b)d)(?:a(?:b)c)(?:a(?:b)d)", 3),
    ("(?:a(?:b)c)(?:a(?:b)d)(?:a(?:b)e)(?:a(?:b)d)(?:a(?:b)c)", 4),
    # escaped and class parentheses are part of the head, as of the text
    (r"(?:\)x)(?:\)y)(?:\)x)(?:\)y)", 2),
    ("(?:[)]a)(?:[)(]b)(?:[)]a)(?:[)(]b)", 2),
    (r"(?:[\)]a)(?:\\)(?:[\)]a)(?:\\)", 2),
    # a comment's parentheses do not hide the groups after it
    ("(?#(x)(?:a)(?:a)(?#)(?:a)", 1),
    # a group first read inside another is taken at the top level, and the other way
    ("((a))(a)((a))", 2),
    ("(?:x|(?:y)+)z(?:x|(?:y)+)(?:y)", 2),
    # a head under which nothing stands here: parsed
    ("(?:ab)(?:ac)(?:ab)", 2),
])
def test_cached_groups_found_by_their_head(pattern, parsed):
    tree, count = _parsed(pattern)
    plain, plain_count = _parsed(pattern, groups=False)
    assert tree == plain == parse(pattern)
    assert count < plain_count  # the cache was used
    assert count == parsed, (pattern, count)


@pytest.mark.parametrize("pattern", ["(?:a)(?:a", "(a)(a", "(?:a)(?:a\\)", "(?:[)]a)(?:[)]a",
                                     "(?:a)(?:a)b)", "(?:a)(?:a){2,1}"])
def test_errors_as_without_the_cache(pattern):
    with pytest.raises(RegexSyntaxError) as plain:
        _parsed(pattern, groups=False)
    with pytest.raises(RegexSyntaxError) as cached:
        parse(pattern)
    assert str(cached.value) == str(plain.value)
