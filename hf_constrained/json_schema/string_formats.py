"""A format's documented subset under a length bound, and ``pattern`` ∩ ``format``.

Tree operations (over decoded characters) used next to :mod:`.strings`:

* :func:`cap_length` -- a sound subset of a format under ``maxLength`` when the
  exact restriction would be too large;
* :func:`intersect` -- a pattern's :func:`~.strings.search_tree` intersected
  with a format's tree, for the pattern shapes it documents;
* :func:`derivative`, :func:`finite_strings` -- the helpers behind them.

>>> from hf_constrained.regex_parser import parse
>>> finite_strings(parse("[ab]c"))
['ac', 'bc']
"""

from __future__ import annotations

import bisect
from typing import Optional

from .strings import (ANY, EPSILON, MAX_RESTRICTED_SIZE, NOTHING, _absorb, _join, _within, alt,
                      cat, is_empty, length_range, nullable, rep, search_tree, size)


def cap_length(node, hi: int) -> tuple:
    """A subset of ``L(node)`` whose strings all have at most ``hi`` characters.

    For a ``format`` under ``maxLength`` when the exact restriction is too large:
    every variable piece gets a fixed share of the budget (a repeated group of
    variable length gets at most 4 copies, fewer when its share would drop below
    twice its shortest copy).  Sound, not complete.

    >>> a = ("cls", ((97, 97),))
    >>> length_range(cap_length(cat([rep(a, 1, None), rep(a, 0, None)]), 9))
    (1, 9)
    """
    a, b = length_range(node)
    if a > hi:
        return NOTHING
    if b is not None and b <= hi:
        return node
    kind = node[0]
    if kind == "alt":
        return alt([cap_length(n, hi) for n in node[1]])
    if kind == "rep":
        x, m, n = node[1], node[2], node[3]
        xa, xb = length_range(x)
        if xa == xb:
            return rep(x, m, hi // xa if n is None else min(n, hi // xa))
        copies = max(m, 1)  # up to 4 copies while each still gets twice its minimum
        while copies < 4 and (n is None or copies < n) and hi // (copies + 1) >= 2 * max(xa, 1):
            copies += 1
        inner = cap_length(x, hi // copies)
        return rep(inner, m, copies) if not is_empty(inner) else (EPSILON if m == 0 else NOTHING)
    if kind != "cat":
        return NOTHING
    items = list(node[1])
    ranges = [length_range(x) for x in items]
    var = [i for i, (lo_, hi_) in enumerate(ranges) if lo_ != hi_]
    allot = {i: ranges[i][0] for i in var}
    spare = hi - sum(lo_ for lo_, _ in ranges)
    while spare > 0:  # equal shares; a bounded piece leaves what it cannot use
        open_ = [i for i in var if ranges[i][1] is None or allot[i] < ranges[i][1]]
        if not open_:
            break
        share = max(spare // len(open_), 1)
        for i in open_:
            room = spare if ranges[i][1] is None else ranges[i][1] - allot[i]
            give = min(share, spare, room)
            allot[i] += give
            spare -= give
            if spare == 0:
                break
    return cat([cap_length(x, allot[i]) if i in allot else x for i, x in enumerate(items)])


def derivative(node, cp: int, rev: bool = False) -> tuple:
    """The strings ``w`` with ``chr(cp) + w`` in ``L(node)`` (``rev``: ``w + chr(cp)``).

    >>> a, b = ("cls", ((97, 97),)), ("cls", ((98, 98),))
    >>> derivative(cat([a, rep(b, 0, None)]), 97)
    ('rep', ('cls', ((98, 98),)), 0, None)
    """
    kind = node[0]
    if kind == "cls":
        i = bisect.bisect_right([r[0] for r in node[1]], cp) - 1
        return EPSILON if i >= 0 and node[1][i][1] >= cp else NOTHING
    if kind == "alt":
        return alt([derivative(n, cp, rev) for n in node[1]])
    if kind == "rep":
        x, m, n = node[1], node[2], node[3]
        if n == 0:
            return NOTHING
        return _join(derivative(x, cp, rev), rep(x, max(m - 1, 0), None if n is None else n - 1), rev)
    items = list(node[1])
    out = []
    for k in range(len(items)):
        if rev:
            j = len(items) - 1 - k
            out.append(cat(items[:j] + [derivative(items[j], cp, rev)]))
        else:
            out.append(cat([derivative(items[k], cp, rev)] + items[k + 1:]))
        if not nullable(items[k if not rev else len(items) - 1 - k]):
            break
    return alt(out)


def finite_strings(node, limit: int = 32) -> Optional[list]:
    """Every string of ``L(node)`` if there are at most ``limit``, else None.

    >>> from hf_constrained.regex_parser import parse
    >>> finite_strings(parse("wss?(-unix)?")), finite_strings(parse("a+"))
    (['ws', 'ws-unix', 'wss', 'wss-unix'], None)
    """
    kind = node[0]
    if kind == "cls":
        count = sum(b - a + 1 for a, b in node[1])
        return None if count > limit else [chr(c) for a, b in node[1] for c in range(a, b + 1)]
    if kind == "alt":
        out: list = []
        for n in node[1]:
            got = finite_strings(n, limit)
            if got is None:
                return None
            out.extend(s for s in got if s not in out)
        return None if len(out) > limit else out
    if kind == "rep":
        if node[3] is None or node[3] > limit:
            return None
        one = finite_strings(node[1], limit)
        if one is None:
            return None
        words, out = [""], set()
        for k in range(node[3] + 1):
            if k >= node[2]:
                out.update(words)
            if len(out) > limit:
                return None
            words = list(dict.fromkeys(p + s for p in words for s in one))
        return sorted(out)
    out = [""]
    for n in node[1]:
        got = finite_strings(n, limit)
        if got is None or len(out) * len(got) > limit * 4:
            return None
        out = list(dict.fromkeys(p + s for p in out for s in got))
    return None if len(out) > limit else out


def _literal(text: str) -> tuple:
    return cat([("cls", ((ord(c), ord(c)),)) for c in text])


def _must_contain(node) -> frozenset:
    """Code points that every string of ``L(node)`` contains."""
    kind = node[0]
    if kind == "cls":
        return frozenset([node[1][0][0]]) if len(node[1]) == 1 and node[1][0][0] == node[1][0][1] else frozenset()
    if kind == "cat":
        return frozenset().union(*[_must_contain(n) for n in node[1]])
    if kind == "alt":
        sets = [_must_contain(n) for n in node[1]]
        return frozenset.intersection(*sets) if sets else frozenset()
    return _must_contain(node[1]) if node[2] > 0 else frozenset()


def intersect(pattern_tree, fmt_tree, member, limit: int = MAX_RESTRICTED_SIZE) -> Optional[tuple]:
    """``L(pattern_tree) ∩ L(fmt_tree)`` when the pattern (a :func:`search_tree`)
    is, per alternative, ``P ANY*``, ``ANY* S``, ``P ANY* S`` or ``P`` with
    ``P``/``S`` finite and small, or ``ANY* c ANY*`` with ``c`` a character
    every format string contains; else None.  ``member(text)`` tells whether
    a string is in the format (for a finite, fully anchored pattern).
    ``D*`` counts as ``ANY*`` when ``D`` holds every character the format uses.

    >>> import re; from hf_constrained.regex_parser import parse, parse_alternatives
    >>> p = search_tree(parse_alternatives("^ab", anchor_nodes=True))
    >>> intersect(p, parse("[ab]+"), lambda t: re.fullmatch("[ab]+", t)) == parse("ab[ab]*")
    True
    """
    anything = rep(ANY, 0, None)
    out = []
    for branch in (pattern_tree[1] if pattern_tree[0] == "alt" else (pattern_tree,)):
        items = _absorb(list(branch[1]) if branch[0] == "cat" else [branch])
        # D* with D holding every character the format uses acts as ANY*
        stars = [i for i, x in enumerate(items) if x == anything or (
            x[0] == "rep" and x[1][0] == "cls" and x[2] == 0 and x[3] is None
            and _within(fmt_tree, x[1][1]))]
        if len(stars) > 1:
            middle = cat(items[stars[0] + 1:stars[-1]])
            if (stars[0] == 0 and stars[-1] == len(items) - 1 and len(stars) == 2
                    and middle[0] == "cls" and len(middle[1]) == 1
                    and middle[1][0][0] == middle[1][0][1]
                    and middle[1][0][0] in _must_contain(fmt_tree)):
                out.append(fmt_tree)
                continue
            return None
        if not stars:
            words = finite_strings(cat(items))
            if words is None:
                return None
            out.extend(_literal(w) for w in words if member(w))
            continue
        prefixes = finite_strings(cat(items[:stars[0]]))
        suffixes = finite_strings(cat(items[stars[0] + 1:]))
        if prefixes is None or suffixes is None or len(prefixes) * len(suffixes) > 32:
            return None
        for p in prefixes:
            dp = fmt_tree
            for ch in p:
                dp = derivative(dp, ord(ch))
            for s in suffixes:
                d = dp
                for ch in reversed(s):
                    d = derivative(d, ord(ch), rev=True)
                if size(d) > limit:
                    return None
                out.append(cat([_literal(p), d, _literal(s)]))
    return alt(out)
