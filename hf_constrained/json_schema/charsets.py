"""Character sets as sorted tuples of inclusive code point intervals, and their
regex text (classes, and JSON-string-encoded characters)."""

from __future__ import annotations

from typing import Optional

from ..regex_parser import normalize_ranges
from .regex_text import _CLASS_META, _MAX_CP, _alt, _char

Intervals = tuple  # tuple[tuple[int, int], ...]


# Sorting/merging is regex_parser.normalize_ranges (which also drops
# surrogates); the complement here spans *all* code points, surrogates
# included, as the text of a negated class ``[^...]`` does.


def _complement(iv: Intervals) -> Intervals:
    out, nxt = [], 0
    for a, b in iv:
        if a > nxt:
            out.append((nxt, a - 1))
        nxt = b + 1
    if nxt <= _MAX_CP:
        out.append((nxt, _MAX_CP))
    return tuple(out)


def _subtract(a: Intervals, b: Intervals) -> Intervals:
    return _intersect(a, _complement(b))


def _intersect(a: Intervals, b: Intervals) -> Intervals:
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def _class(iv: Intervals) -> Optional[str]:
    """A character class (or single char) for the non-empty set ``iv``.

    >>> _class(((48, 57),)), _class(((97, 97),)), _class(((0, 0x21), (0x23, _MAX_CP)))
    ('[0-9]', 'a', '[^"]')
    """
    if not iv:
        return None
    if len(iv) == 1 and iv[0][0] == iv[0][1]:
        return _char(iv[0][0])

    def body(ivs: Intervals) -> str:
        parts = []
        for a, b in ivs:
            if a == b:
                parts.append(_char(a, _CLASS_META))
            elif b == a + 1:
                parts.append(_char(a, _CLASS_META) + _char(b, _CLASS_META))
            else:
                parts.append(_char(a, _CLASS_META) + "-" + _char(b, _CLASS_META))
        return "".join(parts)

    pos = "[" + body(iv) + "]"
    comp = _complement(iv)
    if comp:
        neg = "[^" + body(comp) + "]"
        if len(neg) < len(pos) or iv[-1][1] > 0xFFFF >= comp[-1][1]:
            return neg
    return pos


_ALL: Intervals = ((0, _MAX_CP),)
_JSON_SPECIAL: Intervals = ((0, 0x1F), (0x22, 0x22), (0x5C, 0x5C))
_SHORT_ESCAPES = {0x22: '\\\\"', 0x5C: "\\\\\\\\", 0x08: "\\\\b", 0x0C: "\\\\f",
                  0x0A: "\\\\n", 0x0D: "\\\\r", 0x09: "\\\\t"}


def _encode_charset(iv: Intervals) -> Optional[str]:
    """Regex for the canonical JSON encoding (``json.dumps``) of one
    character of ``iv`` inside a string literal.  Surrogates are dropped.

    >>> _encode_charset(((0x0A, 0x0A), (0x61, 0x62)))
    '(?:[ab]|\\\\\\\\n)'
    """
    plain = normalize_ranges(_subtract(iv, _JSON_SPECIAL))  # no surrogates
    alts = [_class(plain)] if plain else []
    special = _intersect(iv, _JSON_SPECIAL)
    low: list[int] = []
    for a, b in special:
        for cp in range(a, b + 1):
            if cp in _SHORT_ESCAPES:
                alts.append(_SHORT_ESCAPES[cp])
            else:
                low.append(cp)
    for hi_digit in (0, 1):
        digits = [cp & 0xF for cp in low if cp >> 4 == hi_digit]
        if digits:
            cls = _class(normalize_ranges((d, d) for d in (ord(f"{x:x}") for x in digits)))
            alts.append(f"\\\\u00{hi_digit}{cls}")
    return _alt(alts)


#: Any character, canonically encoded (for pattern translation and keys).
_CANON_CHAR = _encode_charset(_ALL)
