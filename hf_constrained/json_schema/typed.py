"""The converter's typed conversion: which JSON types remain, numbers and strings."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from fractions import Fraction
from typing import Any, Optional

from ..errors import RegexSyntaxError, UnsupportedRegexError
from ..regex_parser import MAX_GROUP_DEPTH
from ..regex_parser import parse as parse_regex
from . import limits
from .charsets import _encode_charset
from .numbers import MultipleOfError, multiple_of_regex
from .patterns import _capped, _emit, _format_tree, _parse_regex, _translate_pattern
from .ranges import _split_decimal, decimal_range_regex, integer_range_regex
from .regex_text import _alt, _repeat
from .schemas import _ANNOTATIONS, _HANDLED, _KINDS, _TYPE_SPECIFIC, _ptr, _refuse, _type_kinds, _unsupported
from .string_formats import intersect
from .strings import TooComplex, length_range, restrict_length, search_tree
from .tokens import _FORMAT_LENGTHS, ALL_FORMATS, BOOLEAN, INTEGER, NULL, NUMBER, STRING_CHAR


def _group_nesting(regex: str) -> int:
    """How deep the groups of ``regex`` (this converter's dialect) nest: 2 for
    ``(?:a|(?:b[(]\\(c))``, whose class and escape open no group."""
    depth = deepest = 0
    i, in_class = 0, False
    while i < len(regex):
        c = regex[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif c == ")":
            depth -= 1
        i += 1
    return deepest


def _plain_digits(v) -> str:
    """A bound's decimal text without exponent (``1e308``: 309 digits)."""
    return format(Decimal(repr(v)) if isinstance(v, float) else Decimal(v), "f")


class _TypedMixin:
    """:class:`~.converter._Converter`'s dispatch on the remaining JSON types, numbers and strings."""

    def _typed(self, flat: list) -> Optional[str]:
        for s, p, _ in flat:
            for kw in s:
                if kw not in _ANNOTATIONS and kw not in _HANDLED and kw not in _TYPE_SPECIFIC:
                    raise _unsupported(kw, _ptr(p, kw))
        kinds = self._kinds(flat)
        alts = []
        if "null" in kinds:
            alts.append(NULL)
        if "boolean" in kinds:
            alts.append(BOOLEAN)
        if "integer" in kinds:
            alts.append(self._numeric(flat, "fraction" in kinds))
        if "string" in kinds:
            alts.append(self._string(flat))
        if "array" in kinds:
            alts.append(self._array(flat))
        if "object" in kinds:
            alts.append(self._object(flat))
        return _alt(alts)

    def _kinds(self, flat: list) -> set:
        kinds = set(_KINDS)
        for s, p, _ in flat:
            if "type" in s:
                ts = s["type"] if isinstance(s["type"], list) else [s["type"]]
                kinds &= set().union(*[_type_kinds(t) for t in ts])
            if "not" in s:
                kinds -= self._not_kinds(s["not"], _ptr(p, "not"))
        if "fraction" in kinds and "integer" not in kinds:
            ptr = next(_ptr(p, "not") for s, p, _ in flat if "not" in s)
            raise _unsupported("not", ptr, "non-integral numbers only")
        return kinds

    @staticmethod
    def _simple_not(sub: Any) -> bool:
        """``not`` that only removes JSON types (handled by :meth:`_kinds`)."""
        if sub is True or sub is False:
            return True
        return isinstance(sub, dict) and set(sub) <= _ANNOTATIONS | {"type"} and (
            "type" not in sub or "integer" not in (
                sub["type"] if isinstance(sub["type"], list) else [sub["type"]])
            or "number" in (sub["type"] if isinstance(sub["type"], list) else [sub["type"]]))

    def _not_kinds(self, sub: Any, ptr: str) -> set:
        """Kinds excluded by ``not: sub``."""
        if sub is False:
            return set()
        if sub is True:
            return set(_KINDS)
        if isinstance(sub, dict) and set(sub) <= _ANNOTATIONS | {"type"}:
            if "type" not in sub:
                return set(_KINDS)
            ts = sub["type"] if isinstance(sub["type"], list) else [sub["type"]]
            return set().union(*[_type_kinds(t) for t in ts])
        raise _unsupported("not", ptr)

    @staticmethod
    def _collect(flat: list, keyword: str) -> list:
        return [(s[keyword], _ptr(p, keyword)) for s, p, _ in flat if keyword in s]

    # -- numbers --------------------------------------------------------------

    def _numeric(self, flat: list, fraction: bool) -> Optional[str]:
        regex = self._numeric_text(flat, fraction)
        # (at most as deep as it has groups: the character scan only for a regex with that many)
        nesting = _group_nesting(regex) if regex is not None and regex.count("(") > MAX_GROUP_DEPTH else 0
        if nesting > MAX_GROUP_DEPTH:  # what regex_parser reads at most
            # a bound with hundreds of significant digits (1e308 as an integer bound, 5e-324)
            bounds = [b for kw in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")
                      for b in self._collect(flat, kw) if not isinstance(b[0], bool)]
            if not bounds:  # (no other numeric keyword nests this deep; kept exact all the same)
                steps = self._collect(flat, "multipleOf")
                ptr = steps[0][1] if steps else _ptr(flat[0][1], "type")
                raise _refuse(ptr.rsplit("/", 1)[-1], ptr, f"its exact regex would nest "
                              f"{nesting} groups deep (the regex engine reads at most {MAX_GROUP_DEPTH})")
            v, ptr = max(bounds, key=lambda b: len(_plain_digits(b[0])))
            raise _refuse(ptr.rsplit("/", 1)[-1], ptr, f"the exact regex for bound {v!r} would nest "
                          f"{nesting} groups deep (the regex engine reads at most "
                          f"{MAX_GROUP_DEPTH}); use a bound with fewer digits (a float bound "
                          "such as 1e308 is its exact binary value, 309 digits; an integer "
                          "literal 10**308 is not)")
        return regex

    def _numeric_text(self, flat: list, fraction: bool) -> Optional[str]:
        lowers = [(v, False, ptr) for v, ptr in self._collect(flat, "minimum")]
        lowers += [(v, True, ptr) for v, ptr in self._collect(flat, "exclusiveMinimum")]
        uppers = [(v, False, ptr) for v, ptr in self._collect(flat, "maximum")]
        uppers += [(v, True, ptr) for v, ptr in self._collect(flat, "exclusiveMaximum")]
        steps = self._collect(flat, "multipleOf")
        if steps:
            if len({(type(v), v) for v, _ in steps}) > 1:
                raise _refuse("multipleOf", steps[1][1], "several different multipleOf "
                              "values cannot be combined; keep one (their least common multiple)")
            try:
                return multiple_of_regex(steps[0][0], [(v, x) for v, x, _ in lowers],
                                         [(v, x) for v, x, _ in uppers], not fraction)
            except MultipleOfError as exc:
                raise _refuse("multipleOf", steps[0][1], str(exc)) from None
        if not fraction:
            lo = hi = None
            for v, strict, _ in lowers:
                b = math.floor(Fraction(v)) + 1 if strict else math.ceil(Fraction(v))
                lo = b if lo is None else max(lo, b)
            for v, strict, _ in uppers:
                b = math.ceil(Fraction(v)) - 1 if strict else math.floor(Fraction(v))
                hi = b if hi is None else min(hi, b)
            if lo is None and hi is None:
                return INTEGER
            return integer_range_regex(lo, hi)
        if not lowers and not uppers:
            return NUMBER
        lo = max(lowers, key=lambda b: (Fraction(b[0]), b[1])) if lowers else None
        hi = min(uppers, key=lambda b: (Fraction(b[0]), -b[1])) if uppers else None
        chosen = [b for b in (lo, hi) if b is not None]
        decimals = {}
        for v, strict, ptr in chosen:
            keyword = ptr.rsplit("/", 1)[-1]
            if abs(v) > limits._MAX_EXACT_FLOAT_INT:
                raise _refuse(keyword, ptr, f"|{v}| > 2**53: decimal text and "
                              "binary floats disagree; use type integer")
            if isinstance(v, int) or v.is_integer():
                decimals[ptr] = Decimal(int(v))
            else:
                decimals[ptr] = Decimal(repr(v))
        budget = None
        if any(strict for _, strict, _ in chosen):
            budget = max([limits.NUMBER_FRACTION_DIGITS] +
                         [len(_split_decimal(abs(decimals[ptr]))[1])
                          for _, _, ptr in chosen])
            for v, strict, ptr in chosen:
                if strict and 2 * math.ulp(float(v)) >= 10.0 ** -budget:
                    raise _refuse(ptr.rsplit("/", 1)[-1], ptr, f"exclusive "
                                  f"bound {v} is too large to be honoured "
                                  "exactly under float rounding")
        return decimal_range_regex(
            None if lo is None else decimals[lo[2]], bool(lo and lo[1]),
            None if hi is None else decimals[hi[2]], bool(hi and hi[1]),
            budget)

    # -- strings --------------------------------------------------------------

    def _string(self, flat: list) -> Optional[str]:
        for kw in ("contentEncoding", "contentMediaType", "contentSchema"):
            for _, ptr in self._collect(flat, kw):
                raise _unsupported(kw, ptr)
        mins = [(int(v), ptr) for v, ptr in self._collect(flat, "minLength")]
        maxs = [(int(v), ptr) for v, ptr in self._collect(flat, "maxLength")]
        lo, lo_ptr = max(mins, default=(0, None))
        hi, hi_ptr = min(maxs) if maxs else (None, None)
        if hi is not None and lo > hi:
            return None
        patterns = {}
        for pat, ptr in self._collect(flat, "pattern"):
            patterns.setdefault(pat, ptr)
        formats = {}
        for fmt, ptr in self._collect(flat, "format"):
            formats.setdefault(fmt, ptr)
        for fmt, ptr in formats.items():
            if fmt not in ALL_FORMATS:
                raise _refuse("format", ptr, f"format {fmt!r} is not supported "
                              f"(supported: {', '.join(ALL_FORMATS)}); use pattern")
        if len(formats) > 1:
            raise _refuse("format", list(formats.values())[1],
                          "several different formats cannot be combined")
        if len(patterns) > 1:
            raise _refuse("pattern", list(patterns.values())[1],
                          "several different patterns cannot be intersected; "
                          "combine them into one pattern")
        both = bool(patterns and formats)
        if patterns:
            (pat, ptr), = patterns.items()
        if formats:
            (fmt, _), = formats.items()
            content = ALL_FORMATS[fmt]
            fmin, fmax = _FORMAT_LENGTHS.get(fmt) or length_range(parse_regex(content))
        if patterns:
            anchor_error = "unsupported anchors"
            try:
                content, fmin, fmax = _translate_pattern(pat)
            except UnsupportedRegexError as exc:
                if not exc.construct.startswith("anchor"):
                    raise _refuse("pattern", ptr, str(exc)) from None
                content, fmin, fmax = None, -1, 0  # anchors inside: the tree path below
                anchor_error = exc
            except RegexSyntaxError as exc:
                raise _refuse("pattern", ptr, str(exc)) from None
            if content is None and fmin == 0:
                return None
        if not patterns and not formats:
            return '"' + _repeat(STRING_CHAR, lo, hi) + '"'
        if not both and lo <= fmin and (hi is None or (fmax is not None and hi >= fmax)):
            return '"' + content + '"'  # every match already fits
        # Trees over decoded characters: intersect, restrict to lo..hi, exactly.
        tree = _format_tree(fmt) if formats else None
        if patterns:
            try:
                ptree = search_tree(_parse_regex(pat, anchor_nodes=True))
            except TooComplex as exc:
                raise _refuse("pattern", ptr, f"{anchor_error} ({exc})") from None
            except (UnsupportedRegexError, RegexSyntaxError) as exc:
                # e.g. a backreference after a mid-pattern anchor: "(a)$\1"
                raise _refuse("pattern", ptr, str(exc)) from None
            if both:
                tree = None if tree is None else intersect(
                    ptree, tree, lambda text: re.fullmatch(ALL_FORMATS[fmt], text) is not None)
                if tree is None:
                    raise _refuse("pattern", ptr, f"pattern cannot be combined with format "
                                  f"{fmt!r} (only literal prefixes/suffixes, or a character "
                                  "every such string contains, are intersected)")
            else:
                tree = ptree
            fmin, fmax = length_range(tree)
        why = ""
        if tree is not None:
            try:
                tree = restrict_length(tree, lo, hi)
            except TooComplex as exc:
                why = f" ({exc})"
                tree = None if not formats or hi is None else _capped(tree, lo, hi)
        if tree is None:
            if lo > fmin:
                raise _refuse("minLength", lo_ptr, "cannot be combined with "
                              "format/pattern unless every match is long enough"
                              + why)
            raise _refuse("maxLength", hi_ptr, "cannot be combined with "
                          "format/pattern unless every match is short enough" + why)
        content = _emit(tree, _encode_charset)
        return None if content is None else '"' + content + '"'
