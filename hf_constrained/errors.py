"""Exceptions raised by hf_constrained.

Every error names the problem and says what to do about it. All of them derive
from :class:`ConstraintError` (a ``ValueError``), so one ``except`` catches them.
"""

import contextlib
import sys


class ConstraintError(ValueError):
    """Base class of every error hf_constrained raises for bad input."""


class RegexSyntaxError(ConstraintError):
    """The pattern is not a valid regular expression.

    ``pos`` is the 0-based character offset of the problem in ``pattern``.
    """

    def __init__(self, msg: str, pattern: str, pos: int):
        self.pattern = pattern
        self.pos = pos
        pointer = f"\n  {pattern}\n  {' ' * pos}^" if len(pattern) <= 200 else ""
        super().__init__(f"invalid regex at position {pos}: {msg}{pointer}")


class UnsupportedRegexError(ConstraintError):
    """The pattern uses a construct a finite automaton cannot honour exactly
    (backreferences, lookaround, anchors in the middle, inline flags...)."""

    def __init__(self, construct: str, pattern: str, pos: int, hint: str = ""):
        self.construct = construct
        self.pattern = pattern
        self.pos = pos
        hint = hint or "rewrite the pattern without it"
        super().__init__(
            f"unsupported regex construct {construct} at position {pos}: {hint}"
        )


class EmptyLanguageError(ConstraintError):
    """The pattern matches no string at all, or none this vocabulary can spell."""


class StateLimitError(ConstraintError):
    """The automaton would grow past its configured size limit."""


class UnsupportedTokenizerError(ConstraintError):
    """The tokenizer's decoding cannot be mapped to bytes exactly."""


class GenerationConflictError(ConstraintError):
    """A ``generate()`` setting or call contradicts the constraint
    (e.g. ``min_new_tokens`` longer than any match, or a list of patterns
    whose length differs from the number of prompts)."""


class SchemaError(ConstraintError):
    """The schema cannot be converted exactly.

    The message names the offending keyword and its JSON pointer, e.g.
    ``cannot honour keyword 'pattern' at /properties/tags/pattern: ...``
    followed by a hint on what to do.
    """


@contextlib.contextmanager
def nested_too_deeply(error: type, what: str):
    """Raise ``error`` (a :class:`ConstraintError` class) naming ``what`` in place of a
    ``RecursionError`` from reading it: the readers and converters recurse on the input's
    nesting, so input nested hundreds of levels deep reaches Python's recursion limit.

    >>> with nested_too_deeply(SchemaError, "the schema"):
    ...     def down(n): return down(n + 1)
    ...     down(0)
    Traceback (most recent call last):
    ...
    hf_constrained.errors.SchemaError: the schema is nested too deeply: reading it reached Python's recursion limit (...); nest it less deeply (move deep parts into rules or definitions), or raise the limit with sys.setrecursionlimit()
    """
    try:
        yield
    except RecursionError:
        raise error(f"{what} is nested too deeply: reading it reached Python's recursion limit "
                    f"({sys.getrecursionlimit()}); nest it less deeply (move deep parts into rules or "
                    "definitions), or raise the limit with sys.setrecursionlimit()") from None
