"""Regexes accepted in ``pattern`` and ``whitespace``: parsing (:mod:`..regex_parser`),
re-emitting a tree, sizes, the ``format`` trees and the whitespace regex."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Callable, Optional

from ..errors import RegexSyntaxError, UnsupportedRegexError
from ..regex_parser import negate_ranges, normalize_ranges, parse as parse_regex, parse_alternatives
from .charsets import _CANON_CHAR, _JSON_SPECIAL, Intervals, _class, _encode_charset, _intersect, _subtract
from .regex_text import _MAX_CP, _alt, _concat, _group, _is_atom, _repeat
from .string_formats import cap_length
from .strings import TooComplex, _alphabet, length_range, restrict_length
from .tokens import ALL_FORMATS

# Python's Unicode-aware shorthand classes, as (subset, superset) pairs: a
# class uses the subset, a negated class removes the superset, so the
# resulting set is always contained in what Python's ``re`` would match.
_NON_ASCII: Intervals = ((0x80, _MAX_CP),)
_DIGIT_LO: Intervals = ((0x30, 0x39),)
_WORD_LO: Intervals = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
_SPACE_LO: Intervals = ((0x09, 0x0D), (0x20, 0x20))
_SPACE_HI: Intervals = ((0x09, 0x0D), (0x1C, 0x20)) + _NON_ASCII
_CLASSES = {
    "d": (_DIGIT_LO, _DIGIT_LO + _NON_ASCII),
    "w": (_WORD_LO, _WORD_LO + _NON_ASCII),
    "s": (_SPACE_LO, _SPACE_HI),
}
for _k in "dws":
    _lo, _hi = _CLASSES[_k]
    _CLASSES[_k.upper()] = (negate_ranges(_hi), negate_ranges(_lo))


def _parse_regex(pattern: str, anchor_nodes: bool = False) -> list:
    """Top-level alternatives ``(tree, anchored_start, anchored_end)`` of a
    user regex, shorthand classes approximated by ASCII (see ``_CLASSES``);
    ``anchor_nodes``: other anchors become tree nodes (see regex_parser).

    Raises :class:`RegexSyntaxError` / :class:`UnsupportedRegexError`.
    """
    alternatives = parse_alternatives(pattern, _CLASSES, anchor_nodes=anchor_nodes)
    # Escape pairs, scanned left to right (only a comment can fool this, and
    # then only into refusing).
    for m in re.finditer(r"\\(.)", pattern, re.S):
        if m.group(1) in "AZN":
            raise UnsupportedRegexError(
                f"escape '\\{m.group(1)}'", pattern, m.start(),
                "use ^ or $ for anchors, the character itself for \\N{...}")
    return alternatives


#: (min, max) number of characters matched by a tree (max None: unbounded)
_length_range = length_range


def _emit(node, charset: Callable[[Intervals], Optional[str]]) -> Optional[str]:
    """Regex text (None: empty language) for a regex_parser tree."""
    kind = node[0]
    if kind == "cls":
        return charset(node[1]) if node[1] else None
    if kind == "cat":
        return _concat(*[_emit(n, charset) for n in node[1]])
    if kind == "alt":
        return _alt([_emit(n, charset) for n in node[1]])
    inner = _emit(node[1], charset)
    lo, hi = node[2], node[3]
    if inner is None:
        return "" if lo == 0 else None
    return _repeat(inner, lo, hi)


def _node_size(node, defs: Optional[dict] = None) -> int:
    kind = node[0]
    if kind == "cls":
        return 1
    if kind == "def":
        sizes: dict = {}
        for name, body in node[1]:
            sizes[name] = _node_size(body, sizes)
        return _node_size(node[2], sizes)
    if kind == "ref":
        return defs[node[1]]
    if kind in ("cat", "alt"):
        return sum(_node_size(n, defs) for n in node[1])
    copies = node[2] + 1 if node[3] is None else max(node[3], 1)
    return _node_size(node[1], defs) * copies


@lru_cache(maxsize=4096)
def expanded_size(regex: str) -> int:
    """Character positions of ``regex`` with counted repetitions expanded:
    what an engine that unrolls ``x{m,n}`` into copies would have to build.

    >>> expanded_size("a[bc]{3}"), expanded_size("(?:ab|c)*"), expanded_size("(?(DEFINE)(?P<d>ab))(?&d){2}")
    (4, 3, 4)
    """
    return _node_size(parse_regex(regex))


def _translate_pattern(pattern: str):
    """Translate a JSON Schema ``pattern`` (searched, Python ``re``
    semantics) into a regex over canonical JSON string *content*.

    Returns ``(regex or None, min_len, max_len)``.
    """
    out, ranges = [], []
    anywhere = _repeat(_CANON_CHAR, 0, None)
    for tree, start, end in _parse_regex(pattern):
        r = _emit(tree, _encode_charset)
        if r is None:
            continue
        lo, hi = _length_range(tree)
        if not start:
            r, hi = anywhere + r, None
        if not end:
            r, hi = r + anywhere, None
        out.append(r)
        ranges.append((lo, hi))
    if not out:
        return None, 0, 0
    his = [b for _, b in ranges]
    return _alt(out), min(a for a, _ in ranges), None if None in his else max(his)


def _capped(tree, lo: int, hi: int):
    """A format's documented subset under ``maxLength`` (see cap_length)."""
    try:
        tree = restrict_length(cap_length(tree, hi), lo, hi)
    except TooComplex:
        return None
    return None if _emit(tree, _encode_charset) is None else tree


def _format_tree(fmt: str):
    """The tree of ``ALL_FORMATS[fmt]`` over decoded characters, or None when its
    text uses characters that JSON escapes (then text and content differ)."""
    try:
        tree = parse_regex(ALL_FORMATS[fmt])
    except (RegexSyntaxError, UnsupportedRegexError):
        return None
    used: list = []
    _alphabet(tree, used)
    return None if _intersect(normalize_ranges(used), _JSON_SPECIAL) else tree


_JSON_WS: Intervals = ((9, 10), (13, 13), (32, 32))


def _whitespace_regex(ws: str) -> str:
    """Validate/normalise the ``whitespace`` argument into the dialect."""
    def fail(why: str):
        raise ValueError(f"invalid whitespace pattern {ws!r}: {why}") from None

    def charset(iv: Intervals) -> Optional[str]:
        if _subtract(iv, _JSON_WS):
            fail("it may only match JSON whitespace (space, \\t, \\n, \\r); "
                 "note \\s is wider")
        return _class(iv)

    try:
        alternatives = _parse_regex(ws)
    except (RegexSyntaxError, UnsupportedRegexError) as exc:
        fail(str(exc))
    if any(start or end for _, start, end in alternatives):
        fail("anchors are not allowed")
    trees = tuple(tree for tree, _, _ in alternatives)
    r = _emit(trees[0] if len(trees) == 1 else ("alt", trees), charset)
    if r is None:
        raise ValueError(f"whitespace pattern {ws!r} matches nothing")
    return _group(r) if r and "|" in r and not _is_atom(r) else r
