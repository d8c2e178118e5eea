"""Exact operations on :mod:`~hf_constrained.regex_parser` trees for JSON strings.

A JSON Schema string is constrained by ``pattern`` (searched, anchors
anywhere), ``format`` and ``minLength``/``maxLength`` (counted in decoded
characters).  These functions work on regex trees over *decoded* characters,
before they are encoded to JSON text, and are exact: the language of the
result is exactly what the docstring says, or :class:`TooComplex` is raised.

* :func:`search_tree` -- the set of strings that a pattern *matches
  somewhere* (``re.search`` / ECMA-262), with ``^``/``$`` allowed anywhere;
* :func:`restrict_length` -- ``L(tree)`` intersected with the strings of
  ``lo..hi`` characters.

>>> from hf_constrained.regex_parser import parse_alternatives
>>> t = search_tree(parse_alternatives("[a-z]+", anchor_nodes=True))
>>> length_range(t)
(1, None)
>>> length_range(restrict_length(t, 2, 3))
(2, 3)
"""

from __future__ import annotations

import bisect
from typing import Optional

from ..regex_parser import MAX_CP, normalize_ranges

#: The empty language and the empty string, as trees.
NOTHING = ("cls", ())
EPSILON = ("cat", ())
#: Any character (what an unanchored side of a pattern allows).
ANY = ("cls", normalize_ranges([(0, MAX_CP)]))

#: Most class leaves a length restriction may produce (beyond it: TooComplex).
MAX_RESTRICTED_SIZE = 4000
#: Most work (class leaves built, intermediate results included) per restriction.
MAX_WORK = 100_000
#: Most lengths of one piece that a restriction enumerates.
MAX_ENUMERATED = 600
#: Enumerating more lengths of a leading ``C{m,n}`` than this nests them in
#: blocks of :data:`NEST_BLOCK` (small automaton states instead of one
#: alternative per length).
NEST_FROM = 8
NEST_BLOCK = 16
#: Most lengths nested that way.
MAX_NESTED = 2048
#: Most copies a variable-length repetition is unrolled into.
MAX_UNROLL = 4


class TooComplex(ValueError):
    """The exact result would be too large (the message says why)."""


# ---------------------------------------------------------------------------
# Constructors (simplify as they build) and measures
# ---------------------------------------------------------------------------


def cat(items) -> tuple:
    """Concatenation, flattened; ``NOTHING`` absorbs, ``EPSILON`` vanishes.

    >>> cat([EPSILON, ("cls", ((97, 97),))]), cat([("cls", ((97, 97),)), NOTHING])
    (('cls', ((97, 97),)), ('cls', ()))
    """
    out = []
    for x in items:
        if x == NOTHING:
            return NOTHING
        if x[0] == "cat":
            out.extend(x[1])
        else:
            out.append(x)
    return out[0] if len(out) == 1 else ("cat", tuple(out))


def alt(items) -> tuple:
    """Alternation, flattened and deduplicated; ``NOTHING`` vanishes.

    >>> alt([NOTHING, EPSILON, EPSILON])
    ('cat', ())
    """
    out = []
    for x in items:
        for y in (x[1] if x[0] == "alt" else (x,)):
            if y != NOTHING and y not in out:
                out.append(y)
    if not out:
        return NOTHING
    return out[0] if len(out) == 1 else ("alt", tuple(out))


def rep(x, m: int, n: Optional[int]) -> tuple:
    """``x{m,n}`` (n None: unbounded), simplified.

    >>> rep(NOTHING, 0, None), rep(("cls", ((97, 97),)), 1, 1)
    (('cat', ()), ('cls', ((97, 97),)))
    """
    if n is not None and n < m:
        return NOTHING
    if n == 0 or x == EPSILON:
        return EPSILON
    if x == NOTHING:
        return EPSILON if m == 0 else NOTHING
    if (m, n) == (1, 1):
        return x
    return ("rep", x, m, n)


def length_range(node) -> tuple:
    """(min, max) characters matched by ``node`` (max None: unbounded).

    >>> length_range(("rep", ("cls", ((97, 98),)), 2, None))
    (2, None)
    """
    kind = node[0]
    if kind == "cls":
        return (1, 1) if node[1] else (0, 0)
    if kind == "anchor":
        return 0, 0
    if kind == "cat":
        lo, hi = 0, 0
        for n in node[1]:
            a, b = length_range(n)
            lo += a
            hi = None if hi is None or b is None else hi + b
        return lo, hi
    if kind == "alt":
        ranges = [length_range(n) for n in node[1]]
        his = [b for _, b in ranges]
        return min(a for a, _ in ranges), None if None in his else max(his)
    a, b = length_range(node[1])
    m, n = node[2], node[3]
    if n == 0 or b == 0:
        return 0, 0
    return a * m, None if n is None or b is None else b * n


def is_empty(node) -> bool:
    """True if ``node`` (anchor-free) matches nothing at all.

    >>> is_empty(cat([ANY, NOTHING])), is_empty(rep(NOTHING, 0, 1))
    (True, False)
    """
    kind = node[0]
    if kind == "cls":
        return not node[1]
    if kind == "cat":
        return any(is_empty(n) for n in node[1])
    if kind == "alt":
        return all(is_empty(n) for n in node[1])
    if kind == "rep":
        return node[2] > 0 and is_empty(node[1])
    return False


def nullable(node) -> bool:
    """True if ``node`` (anchor-free) matches the empty string.

    >>> nullable(rep(ANY, 0, 3)), nullable(ANY)
    (True, False)
    """
    kind = node[0]
    if kind == "cls":
        return False
    if kind == "cat":
        return all(nullable(n) for n in node[1])
    if kind == "alt":
        return any(nullable(n) for n in node[1])
    return node[2] == 0 or nullable(node[1])


def _alphabet(node, out: list) -> None:
    if node[0] == "cls":
        out.extend(node[1])
    elif node[0] == "rep":
        _alphabet(node[1], out)
    elif node[0] in ("cat", "alt"):
        for n in node[1]:
            _alphabet(n, out)


def _within(node, ranges: tuple) -> bool:
    """True if every character ``node`` can use lies in ``ranges``."""
    used: list = []
    _alphabet(node, used)
    starts = [a for a, _ in ranges]
    for a, b in normalize_ranges(used):
        i = bisect.bisect_right(starts, a) - 1
        if i < 0 or ranges[i][1] < b:
            return False
    return True


def size(node) -> int:
    """Class leaves of ``node`` (counted repetitions not unrolled).

    >>> size(rep(cat([ANY, ANY]), 5, 9))
    2
    """
    if node[0] == "cls":
        return 1
    if node[0] == "rep":
        return size(node[1])
    if node[0] == "cat" or node[0] == "alt":
        return sum(size(n) for n in node[1])
    return 0


# ---------------------------------------------------------------------------
# Anchors anywhere: re.search / ECMA-262 semantics on a tree
# ---------------------------------------------------------------------------


def _has_anchor(node, which: str = "") -> bool:
    if node[0] == "anchor":
        return not which or node[1] == which
    if node[0] == "rep":
        return _has_anchor(node[1], which)
    if node[0] in ("cat", "alt"):
        return any(_has_anchor(n, which) for n in node[1])
    return False


def _at_edge(node, which: str, rev: bool) -> tuple:
    """Split ``node`` by where it starts (``rev``: ends) relative to the edge.

    Returns ``(edge_nonempty, edge_empty, inner)``: the strings matched when
    the node starts at the string's start (``rev``: ends at its end) and
    consumes something / nothing, and the strings matched when it starts
    (ends) elsewhere.  Anchors ``which`` hold only at the edge; the other
    anchor kind is refused if it would need to be decided here.
    """
    kind = node[0]
    if not _has_anchor(node):
        if kind == "cls":
            return node, NOTHING, node
        if not nullable(node):
            return node, NOTHING, node
    if kind == "anchor":
        if node[1] == which:
            return NOTHING, EPSILON, NOTHING
        return NOTHING, node, node  # the other kind: zero-width, decided later
    if kind == "cls":
        return node, NOTHING, node
    if kind == "alt":
        parts = [_at_edge(n, which, rev) for n in node[1]]
        ne, em, inner = (alt(p[i] for p in parts) for i in range(3))
        return ne, _condition(em), inner
    if kind == "cat":
        items = list(node[1])
        if rev:
            items.reverse()
        # fold from the edge: (nonempty from edge, empty from edge, inner)
        ne, em, inner = NOTHING, EPSILON, EPSILON
        for x in items:
            x_ne, x_em, x_in = _at_edge(x, which, rev)
            pieces_ne = [_join(ne, x_in, rev), _join(em, x_ne, rev)]
            ne = alt(pieces_ne)
            em = _condition(_join(em, x_em, rev))
            inner = _join(inner, x_in, rev)
        return ne, em, inner
    # rep
    x, m, n = node[1], node[2], node[3]
    x_ne, x_em, x_in = _at_edge(x, which, rev)
    inner = rep(x_in, m, n)
    if x_em == NOTHING:
        ne = _join(x_ne, rep(x_in, max(m - 1, 0), None if n is None else n - 1), rev)
        em = EPSILON if m == 0 else NOTHING
    elif x_em == EPSILON:
        # empty iterations at the edge may fill the count (see the module doc)
        ne = _join(x_ne, rep(x_in, 0, None if n is None else n - 1), rev)
        em = EPSILON
    else:  # empty at the edge only if the other anchor holds there: never
        # before a nonempty iteration (e.g. '$' at the start of a nonempty string)
        ne = _join(x_ne, rep(x_in, max(m - 1, 0), None if n is None else n - 1), rev)
        em = EPSILON if m == 0 else x_em
    return ne, em, inner


def _condition(t):
    """A zero-width tree (``EPSILON``, ``NOTHING``, anchors) as ``EPSILON``
    (always), ``NOTHING`` (never) or the one anchor it then needs."""
    def ev(x):  # (always empty, empty when the anchor holds)
        kind = x[0]
        if kind == "anchor":
            return False, True
        if kind == "cls":
            return False, False
        if kind == "cat":
            parts = [ev(y) for y in x[1]]
            return all(p[0] for p in parts), all(p[1] for p in parts)
        if kind == "alt":
            parts = [ev(y) for y in x[1]]
            return any(p[0] for p in parts), any(p[1] for p in parts)
        return ev(x[1]) if x[2] else (True, True)

    anchors = [y for y in _anchors(t)]
    always, when = ev(t)
    if always:
        return EPSILON
    if when and anchors:
        if len(set(anchors)) > 1:
            raise TooComplex("'^' and '$' in one repeated group")
        return anchors[0]
    return NOTHING


def _anchors(t):
    if t[0] == "anchor":
        yield t
    elif t[0] == "rep":
        yield from _anchors(t[1])
    elif t[0] in ("cat", "alt"):
        for y in t[1]:
            yield from _anchors(y)


def _join(a, b, rev: bool):
    return cat((b, a) if rev else (a, b))


def _from_edge(tree, which: str, anchored: bool, rev: bool):
    """The strings ``tree`` matches starting (``rev``: ending) anywhere, or at
    the edge only when ``anchored``; anchors ``which`` resolved."""
    ne, em, inner = _at_edge(tree, which, rev)
    at_edge = alt((ne, em))
    if anchored:
        return at_edge
    return alt((at_edge, _join(rep(ANY, 1, None), inner, rev)))


def search_tree(alternatives) -> tuple:
    """Strings in which some top-level alternative matches somewhere.

    ``alternatives`` is :func:`~hf_constrained.regex_parser.parse_alternatives`
    output (with ``anchor_nodes=True``): ``^`` holds only at the string's
    start and ``$`` only at its end (ECMA-262; Python's ``$`` also matches
    before a final newline, a superset).  Raises :class:`TooComplex` when
    both anchor kinds sit in one repeated group.

    >>> from hf_constrained.regex_parser import parse_alternatives
    >>> t = search_tree(parse_alternatives("(^a$)|(^b)", anchor_nodes=True))
    >>> t == alt([("cls", ((97, 97),)), cat([("cls", ((98, 98),)), rep(ANY, 0, None)])])
    True
    """
    out = []
    for tree, start, end in alternatives:
        if not _has_anchor(tree):
            out.append(cat([EPSILON if start else rep(ANY, 0, None), tree,
                            EPSILON if end else rep(ANY, 0, None)]))
            continue
        if _has_anchor(tree, "^"):
            tree = _from_edge(tree, "^", start, rev=False)
        elif not start:
            tree = cat([rep(ANY, 0, None), tree])
        if _has_anchor(tree, "$"):
            tree = _from_edge(tree, "$", end, rev=True)
        elif not end:
            tree = cat([tree, rep(ANY, 0, None)])
        out.append(tree)
    return alt(out)


# ---------------------------------------------------------------------------
# Length restriction
# ---------------------------------------------------------------------------


def restrict_length(node, lo: int, hi: Optional[int], limit: int = MAX_RESTRICTED_SIZE) -> tuple:
    """``L(node)`` intersected with the strings of ``lo``..``hi`` characters.

    Exact; ``node`` must be anchor-free.  Raises :class:`TooComplex` when the
    result would exceed ``limit`` class leaves (several unbounded pieces
    sharing a large budget, a variable-length repetition repeated many times).

    >>> a = ("cls", ((97, 97),)); b = ("cls", ((98, 98),))
    >>> restrict_length(("rep", a, 0, None), 2, 4)
    ('rep', ('cls', ((97, 97),)), 2, 4)
    >>> restrict_length(cat([rep(a, 0, 1), rep(b, 1, None)]), 0, 1)
    ('cls', ((98, 98),))
    """
    budget = [MAX_WORK]
    out = _restrict(node, lo, hi, budget)
    if size(out) > limit:
        raise TooComplex(f"the exact length restriction would have {size(out)} "
                         f"character classes, more than {limit}")
    return out


def _spend(budget: list, node) -> None:
    budget[0] -= size(node)
    if budget[0] < 0:
        raise TooComplex("the exact length restriction would be too large")


def _restrict(node, lo: int, hi: Optional[int], budget: list):
    lo = max(lo, 0)
    if hi is not None and hi < lo:
        return NOTHING
    a, b = length_range(node)
    if (b is not None and b < lo) or (hi is not None and a > hi):
        return NOTHING
    if a >= lo and (hi is None or (b is not None and b <= hi)):
        return node
    kind = node[0]
    if kind == "alt":
        return alt([_restrict(n, lo, hi, budget) for n in node[1]])
    if kind == "cat":
        return _restrict_cat(list(node[1]), lo, hi, budget)
    if kind == "rep":
        return _restrict_rep(node, lo, hi, budget)
    raise TooComplex(f"cannot restrict the length of {kind!r}")


def _restrict_rep(node, lo: int, hi: Optional[int], budget: list):
    x, m, n = node[1], node[2], node[3]
    xa, xb = length_range(x)
    if xa == xb:  # every copy has the same length k > 0 (else the range check returned)
        k = xa
        m2 = max(m, -(-lo // k))
        n2 = n if hi is None else (hi // k if n is None else min(n, hi // k))
        return rep(x, m2, n2)
    if hi is not None and xa > 0:
        cap = hi // xa
        n = cap if n is None else min(n, cap)
    if n is None or n > MAX_UNROLL:
        raise TooComplex("a repeated group of variable length would have to be unrolled")
    options = [cat([x] * c) for c in range(m, n + 1)]
    _spend(budget, cat([x] * n))
    return alt([_restrict(o, lo, hi, budget) for o in options])


def _absorb(items: list) -> list:
    """Drop what an adjacent ``D{k,}`` absorbs: a nullable piece whose
    characters all lie in ``D``, and the extra copies of ``x{m,n}`` (so
    ``[0-9]+.*`` becomes ``[0-9].*``).  The language is unchanged."""
    changed = True
    while changed:
        changed = False
        for i, x in enumerate(items):
            for j in (i - 1, i + 1):
                if not 0 <= j < len(items):
                    continue
                y = items[j]
                if not (y[0] == "rep" and y[1][0] == "cls" and y[3] is None):
                    continue
                if x is y or not _within(x, y[1][1]):
                    continue
                if nullable(x):
                    del items[i]
                    changed = True
                    break
                if x[0] == "rep" and x[3] != x[2]:
                    items[i] = rep(x[1], x[2], x[2])
                    changed = True
                    break
            if changed:
                break
    return items


def _restrict_cat(items: list, lo: int, hi: Optional[int], budget: list):
    flat = []
    for x in items:
        flat.extend(x[1] if x[0] == "cat" else (x,))
    items = _absorb(flat)
    ranges = [length_range(x) for x in items]
    var = [i for i, (a, b) in enumerate(ranges) if a != b]
    total_lo = sum(a for a, _ in ranges)
    total_hi = None if any(b is None for _, b in ranges) else sum(b for _, b in ranges)
    if (total_hi is not None and total_hi < lo) or (hi is not None and total_lo > hi):
        return NOTHING
    if len(var) <= 1:
        if not var:
            return cat(items)
        i = var[0]
        fixed = total_lo - ranges[i][0]
        piece = _restrict(items[i], lo - fixed, None if hi is None else hi - fixed, budget)
        return cat(items[:i] + [piece] + items[i + 1:])
    # Several pieces of variable length: fix the length of the piece with the
    # fewest relevant lengths, one alternative per length, and recurse.
    best = first = None
    for i in var:
        a, b = ranges[i]
        omin = total_lo - a
        omax = None if total_hi is None or b is None else total_hi - b
        if hi is None:  # only a lower bound: lengths from lo - omin on are free
            free = (max(a, lo - omin), b)
            top = free[0] - 1
        else:
            top = hi - omin if b is None else min(b, hi - omin)
            zlo = max(a, lo - omin)
            zhi = None if omax is None or hi is None else min(top, hi - omax)
            free = (zlo, zhi) if zhi is not None and zlo <= zhi else None
        count = sum(1 for l in range(a, top + 1) if not _free(free, l))
        if best is None or count < best[0]:
            best = (count, i, a, top, free)
        if first is None:
            first = (count, i, a, top, free)
    count, i, a, top, free = best
    if first[0] > NEST_FROM and items[first[1]][0] == "rep" and items[first[1]][1][0] == "cls":
        count, i, a, top, free = first
        nested = True
    else:
        nested = False
    if count > (MAX_NESTED if nested else MAX_ENUMERATED):
        raise TooComplex("too many ways to share the length between the pattern's pieces")
    if nested:
        return _nested(items, i, a, top, free, lo, hi, budget)
    branches = []
    if free is not None:
        piece = _restrict(items[i], free[0], free[1], budget)
        branches.append(cat(items[:i] + [piece] + items[i + 1:]))
    for l in range(a, top + 1):
        if _free(free, l):
            continue
        piece = _restrict(items[i], l, l, budget)
        if is_empty(piece):
            continue
        branch = _restrict_cat(items[:i] + [piece] + items[i + 1:], lo, hi, budget)
        _spend(budget, branch)
        branches.append(branch)
    return alt(branches)


def _free(zone, l: int) -> bool:
    return zone is not None and zone[0] <= l and (zone[1] is None or l <= zone[1])


def _nested(items: list, i: int, a: int, top: int, free, lo: int, hi: Optional[int], budget: list):
    """``items[i]`` is ``C{m,n}``, every item before it has a fixed length:
    the union over lengths ``l`` of ``prefix C{l} rest_l`` written as
    ``prefix C{l0} (alts | C{k} (alts | C{k'} (...)))``, one nesting level per
    :data:`NEST_BLOCK` lengths, so that a state of the automaton holds few
    positions.  ``rest_l`` is the rest restricted to the remaining budget."""
    c = items[i][1]
    fixed = sum(length_range(x)[0] for x in items[:i])
    rest = items[i + 1:]
    segments = []  # (first length, last length or None, what follows), ascending
    for l in range(a, top + 1):
        if _free(free, l):
            continue
        r = _restrict_cat(rest, lo - fixed - l, None if hi is None else hi - fixed - l, budget) \
            if rest else (EPSILON if lo - fixed <= l and (hi is None or l <= hi - fixed) else NOTHING)
        if not is_empty(r):
            _spend(budget, r)
            segments.append((l, l, r))
    if free is not None:
        segments.append((free[0], free[1], cat(rest)))
        segments.sort(key=lambda seg: seg[0])
    if not segments:
        return NOTHING
    groups = [segments[k:k + NEST_BLOCK] for k in range(0, len(segments), NEST_BLOCK)]
    tail, tail_base = NOTHING, None
    for group in reversed(groups):
        base = group[0][0]
        options = [cat([rep(c, l0 - base, None if l1 is None else l1 - base), r])
                   for l0, l1, r in group]
        if tail_base is not None:
            options.append(cat([rep(c, tail_base - base, tail_base - base), tail]))
        tail, tail_base = alt(options), base
    return cat(items[:i] + [rep(c, tail_base, tail_base), tail])
