"""Regex trees of regular rules, and the regex text they are written as.

:mod:`.regular` turns each regular nonterminal into a tree over the grammar's
terminals and other regular nonterminals: ``("t", terminal)``, ``("n",
nonterminal)``, ``("ne", nonterminal)`` (its language without the empty
string), ``("seq", items)``, ``("alt", items)`` and ``("rep", item, lo, hi)``
(``hi`` None: unbounded). The helpers here build them flat (:func:`_seq`,
:func:`_alt`), simplify them without changing the language (shared prefixes of
alternatives factored out, repeated pieces counted: :func:`_simplify`), and
:class:`RegexWriter` computes nullability, the non-empty part, and the regex
text (in the project's Python-``re`` dialect, groups only where precedence
needs them), refusing text longer than its limit.

>>> w = RegexWriter(["a", "b", "[0-9]"], max_regex=100)
>>> a, b, d = ("t", 0), ("t", 1), ("t", 2)
>>> w.render(_simplify(_alt([_seq([a, b]), _seq([a, a, b]), _seq([a, a, a, b])])))[0]
'a(?:b|a(?:b|ab))'
>>> w.render(_simplify(_alt([_seq([d] * 3), _seq([d] * 4), _seq([d] * 5)])))[0]
'[0-9]{3,5}'
>>> w.render(w.nonempty(("rep", d, 0, 4)))[0]
'[0-9][0-9]{0,3}'
"""

from __future__ import annotations

import re

EPS = ("seq", ())
_ATOM, _QUANT, _SEQ, _ALT = 0, 1, 2, 3
_BARE = re.compile(r"[A-Za-z0-9]|\\[^A-Za-z0-9]|\\[dDsSwW]|\.|\[(?:[^\]\\\[]|\\.)+\]", re.DOTALL)


class _TooBig(Exception):
    pass


class RegexWriter:
    """Nullability, non-empty parts and regex text of trees over terminals ``patterns``
    (regexes) and the regular nonterminals in ``tree``; :meth:`render` raises ``_TooBig``
    past ``max_regex`` characters."""

    def __init__(self, patterns, max_regex: int):
        self.patterns, self.max = patterns, int(max_regex)
        self.tree: dict = {}        # regular nonterminal -> regex tree
        self.text: dict = {}        # (nonterminal, nonempty?) -> (regex text, precedence)
        self.nullable: dict = {}
        self._ne: dict = {}

    def is_nullable(self, t) -> bool:
        kind = t[0]
        if kind in ("t", "ne"):
            return False
        if kind == "n":
            return self.nullable[t[1]]
        if kind == "seq":
            return all(self.is_nullable(x) for x in t[1])
        if kind == "alt":
            return any(self.is_nullable(x) for x in t[1])
        return t[2] == 0 or self.is_nullable(t[1])  # rep x lo hi

    def nonempty(self, t):
        """A tree for ``L(t) \\ {ε}``, or None when that is empty."""
        kind = t[0]
        if not self.is_nullable(t):
            return t
        if kind == "n":
            return ("ne", t[1])
        if kind == "seq":
            if not t[1]:
                return None
            head, rest = t[1][0], _seq(t[1][1:])
            alts = []
            ne_head = self.nonempty(head)
            if ne_head is not None:
                alts.append(_seq([ne_head, rest]))
            ne_rest = self.nonempty(rest) if len(t[1]) > 1 else None
            if ne_rest is not None:
                alts.append(ne_rest)
            return _alt(alts) if alts else None
        if kind == "alt":
            alts = [x for x in (self.nonempty(x) for x in t[1]) if x is not None]
            return _alt(alts) if alts else None
        x = t[1]
        ne_x = self.nonempty(x)
        if ne_x is None:
            return None
        hi = t[3]
        if hi == 1:
            return ne_x
        return _seq([ne_x, ("rep", x, 0, None if hi is None else hi - 1)])

    def render(self, t) -> tuple:
        """(regex text, precedence) of a tree; raises _TooBig past ``max_regex``."""
        kind = t[0]
        if kind == "t":
            p = self.patterns[t[1]]
            out = (p, _ATOM) if _BARE.fullmatch(p) else (f"(?:{p})", _ATOM)
        elif kind in ("n", "ne"):
            key = (t[1], kind == "ne")
            if key not in self.text:
                tree = self.tree[t[1]] if kind == "n" else self._nonempty_of(t[1])
                self.text[key] = self.render(tree)
            out = self.text[key]
        elif kind == "seq":
            if not t[1]:
                out = ("", _SEQ)
            else:
                out = ("".join(_wrap(self.render(x), _SEQ) for x in t[1]), _SEQ)
        elif kind == "alt":
            alts = [x for x in t[1] if x != EPS]
            body = (alts[0] if len(alts) == 1 else ("alt", tuple(alts)))
            if len(alts) < len(t[1]):
                out = (_wrap(self.render(body), _ATOM) + "?", _QUANT)
            else:
                out = ("|".join(_wrap(self.render(x), _ALT) for x in alts), _ALT)
        else:
            inner = _wrap(self.render(t[1]), _ATOM)
            lo, hi = t[2], t[3]
            q = ("*" if lo == 0 else "+" if lo == 1 else f"{{{lo},}}") if hi is None else (
                "?" if (lo, hi) == (0, 1) else f"{{{lo}}}" if lo == hi else f"{{{lo},{hi}}}")
            if lo == hi and len(inner) * lo <= len(inner) + len(q):  # "bb", not "b{2}"
                out = (inner * lo, _SEQ)
            else:
                out = (inner + q, _QUANT)
        if len(out[0]) > self.max:
            raise _TooBig
        return out

    def _nonempty_of(self, n: int):
        if n not in self._ne:
            self._ne[n] = self.nonempty(self.tree[n])
        return self._ne[n]


def _seq(items) -> tuple:
    flat = []
    for x in items:
        flat.extend(x[1] if x[0] == "seq" else (x,))
    return flat[0] if len(flat) == 1 else ("seq", tuple(flat))


def _alt(items) -> tuple:
    flat, seen = [], set()
    for x in items:
        for y in (x[1] if x[0] == "alt" else (x,)):
            if y not in seen:
                seen.add(y)
                flat.append(y)
    return flat[0] if len(flat) == 1 else ("alt", tuple(flat))


def _simplify(t) -> tuple:
    """Factor prefixes shared by alternatives (one trie over them: linear in their size),
    count repeated pieces; the same language."""
    kind = t[0]
    if kind in ("t", "n"):
        return t
    if kind == "rep":
        return (kind, _simplify(t[1])) + t[2:]
    if kind == "seq":
        return _runs([_simplify(x) for x in t[1]])
    root: dict = {}
    for a in t[1]:
        node = root
        for x in (a[1] if a[0] == "seq" else (a,)):
            node = node.setdefault(_simplify(x), {})
        node[None] = None  # an alternative ends here
    return _from_trie(root)


def _from_trie(node: dict) -> tuple:
    alts = []
    for head, child in node.items():
        if head is None:
            alts.append(EPS)
            continue
        path = [head]
        while len(child) == 1 and None not in child:  # a path without branches
            (h, child), = child.items()
            path.append(h)
        tail = EPS if list(child) == [None] else _from_trie(child)
        alts.append(_runs(path + (list(tail[1]) if tail[0] == "seq" else [tail])))
    return _optional_chain(_alt(alts))


def _runs(items) -> tuple:
    """``x x x`` -> ``x{3}``; ``x{a,b} x{c,d}`` -> ``x{a+c,b+d}`` (sums of intervals)."""
    out = []
    for x in items:
        x = ("rep", x, 1, 1) if x[0] != "rep" else x
        if out and out[-1][1] == x[1]:
            prev = out.pop()
            hi = None if prev[3] is None or x[3] is None else prev[3] + x[3]
            x = ("rep", x[1], prev[2] + x[2], hi)
        out.append(x)
    return _seq([x[1] if x[2:] == (1, 1) else x for x in out])


def _optional_chain(t) -> tuple:
    """``(x)?`` -> ``x{0,1}`` and ``(x{1,m})?`` -> ``x{0,m}``, so that the prefix-factored
    ``x{3} | x{4} | x{5}`` (``x x x (x (x)?)?``) counts up to ``x{3,5}``."""
    if t[0] != "alt" or len(t[1]) != 2 or EPS not in t[1]:
        return t
    body = t[1][0] if t[1][1] == EPS else t[1][1]
    if body[0] == "rep" and body[2] <= 1:
        return ("rep", body[1], 0, body[3])
    if body[0] in ("seq", "alt"):
        return t
    return ("rep", body, 0, 1)


def _wrap(rendered, level: int) -> str:
    """Regex text usable where precedence ``level`` is needed (a group when it binds looser)."""
    text, prec = rendered
    return f"(?:{text})" if prec > level else text
