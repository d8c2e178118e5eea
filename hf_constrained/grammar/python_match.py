"""Where Python's ``re.match`` ends a terminal's match, decided exactly.

Lark's Earley lexers match a terminal at a position with ``re.match`` and then
try the truncations of that match (``lexer="dynamic_complete"``). Python's
``re`` is a backtracking matcher: it returns the first match in its order of
alternatives and repetition counts, not the longest, so ``/[0-9]+|[0-9]+\\.[0-9]+/``
reads ``1.5`` as ``1`` and Lark's parser never takes ``1.5`` as that terminal,
while the regex (under ``re.fullmatch``, the engine's reading) matches it.

:func:`first_match_miss` decides, for a regex, whether some string of its
language is one that ``re.match`` does not read whole (a *miss*), and returns
the shortest one. Where there is none, ``re.match`` on any text finds its
longest match, and its truncations find every shorter one, so Lark's ends of
the terminal are all the ends ``re.fullmatch`` allows (proof: a backtracking
match tries paths in one fixed priority order; a path of a match ``q`` that is
found on ``q`` alone is tried on any longer text too, and every path before it
fails within ``q``, so the first match on the longer text is at least as long).

The decision runs Python's semantics as a Pike VM: threads (positions of a
Thompson automaton built from ``re``'s own parse of the pattern) in priority
order, those after the first thread that reaches the end of the pattern
dropped; a string of the language is a miss iff, after reading it, no thread
reached the end in the last step. The VM's states, paired with the plain set
of positions (whether the string is in the language), are explored
breadth-first over the character classes the pattern distinguishes.

>>> first_match_miss(r"[0-9]+|[0-9]+\\.[0-9]+"), first_match_miss(r"[0-9]+\\.[0-9]+|[0-9]+")
('0.0', None)
>>> first_match_miss("a|ab"), first_match_miss("ab|a"), first_match_miss("a*?b")
('ab', None, None)
"""

from __future__ import annotations

import functools
import re
from re import _parser as sre

from ..regex_parser import DOT, MAX_CP, _shorthand, negate_ranges, normalize_ranges

#: positions of the Thompson automaton (counted repetitions unrolled) and VM states explored;
#: past either, :func:`first_match_miss` says nothing (returns None)
MAX_NODES = 5_000
MAX_VM_STATES = 20_000

_CATEGORY = {sre.CATEGORY_DIGIT: "d", sre.CATEGORY_NOT_DIGIT: "D", sre.CATEGORY_SPACE: "s",
             sre.CATEGORY_NOT_SPACE: "S", sre.CATEGORY_WORD: "w", sre.CATEGORY_NOT_WORD: "W"}
#: flags that change what the parse means (MULTILINE only changes anchors, VERBOSE only the parse)
_FLAGS = sre.SRE_FLAG_IGNORECASE | sre.SRE_FLAG_DOTALL | sre.SRE_FLAG_ASCII | sre.SRE_FLAG_LOCALE


class Undecided(Exception):
    """:func:`first_match_miss` cannot tell: the pattern uses what it does not model."""


@functools.lru_cache(maxsize=1024)
def _miss(pattern: str):
    try:
        vm = _PikeVM(sre.parse(pattern))
        miss = vm.search()
    except (Undecided, re.error, RecursionError, OverflowError) as e:
        return e if isinstance(e, Undecided) else Undecided(str(e))
    if miss is not None:
        m = re.match(pattern, miss)
        if not (m is None or m.end() < len(miss)):
            return Undecided(f"the model of re disagrees with re on {miss!r}")
    return miss


def first_match_miss(pattern: str) -> str | None:
    """The shortest string of ``pattern``'s language that ``re.match(pattern, s)`` does not
    read whole, or None where there is none. Raises :class:`Undecided` for a pattern that
    uses what this does not model: anchors, lookaround, backreferences, inline flags, a
    repetition of something that matches the empty string (``re`` stops such loops by rules
    of its own), or more than the limits above. Each miss is checked with ``re`` itself."""
    got = _miss(pattern)
    if isinstance(got, Undecided):
        raise got
    return got


class _PikeVM:
    def __init__(self, parsed):
        if parsed.state.flags & _FLAGS:
            raise Undecided("inline flags")       # a global (?i), (?s), (?a): not modelled
        self.kind: list = []      # node -> "c" (a character), "s" (split: first, then second), "e", "m"
        self.arg: list = []       # "c": (char set, next); "s": [first, second]; "e": next
        sets: list = []
        self.match = self._node("m", None)
        self.start = self._seq(list(parsed), self.match, sets)
        self._classes(sets)

    # ------------------------------------------------------------ Thompson automaton
    def _node(self, kind, arg) -> int:
        if len(self.kind) >= MAX_NODES:
            raise Undecided
        self.kind.append(kind)
        self.arg.append(arg)
        return len(self.kind) - 1

    def _seq(self, items, nxt: int, sets) -> int:
        for op, av in reversed(items):
            nxt = self._item(op, av, nxt, sets)
        return nxt

    def _char(self, ranges, nxt, sets) -> int:
        ranges = normalize_ranges(list(ranges))
        sets.append(ranges)
        return self._node("c", [len(sets) - 1, nxt])

    def _item(self, op, av, nxt: int, sets) -> int:
        if op is sre.LITERAL:
            return self._char([(av, av)], nxt, sets)
        if op is sre.NOT_LITERAL:
            return self._char(negate_ranges([(av, av)]), nxt, sets)
        if op is sre.ANY:
            return self._char(DOT, nxt, sets)
        if op is sre.IN:
            return self._char(_in_ranges(av), nxt, sets)
        if op is sre.SUBPATTERN:
            if av[1] or av[2]:
                raise Undecided("inline flags")
            return self._seq(list(av[3]), nxt, sets)
        if op is sre.BRANCH:
            starts = [self._seq(list(alt), nxt, sets) for alt in av[1]]
            out = starts[-1]
            for s in reversed(starts[:-1]):
                out = self._node("s", [s, out])
            return out
        if op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
            lo, hi, body = av
            greedy = op is sre.MAX_REPEAT
            if (hi == sre.MAXREPEAT or hi > 1) and body.getwidth()[0] == 0:
                raise Undecided("a repetition of something that matches the empty string")
            body = list(body)
            if hi == sre.MAXREPEAT:
                loop = self._node("s", [None, None])
                first = self._seq(body, loop, sets)
                self.arg[loop] = [first, nxt] if greedy else [nxt, first]
                out = loop
            else:
                out = nxt
                for _ in range(hi - lo):
                    first = self._seq(body, out, sets)
                    out = self._node("s", [first, nxt] if greedy else [nxt, first])
            for _ in range(lo):
                out = self._seq(body, out, sets)
            return out
        raise Undecided(f"{op} (anchors, lookaround, backreferences, atomic groups...)")

    def _classes(self, sets) -> None:
        """Character classes: maximal groups of code points every set treats alike, each a
        bitmask of the sets that hold it, with a representative character."""
        bits: dict = {}                       # distinct set -> bitmask of the sets equal to it
        for i, ranges in enumerate(sets):
            bits[ranges] = bits.get(ranges, 0) | 1 << i
        bounds = {0, MAX_CP + 1}
        for ranges in bits:
            for lo, hi in ranges:
                bounds.add(lo)
                bounds.add(hi + 1)
        bounds = sorted(bounds)
        index = {b: j for j, b in enumerate(bounds)}
        masks = [0] * (len(bounds) - 1)       # segment [bounds[j], bounds[j + 1]) -> mask
        for ranges, bit in bits.items():
            for lo, hi in ranges:
                for j in range(index[lo], index[hi + 1]):
                    masks[j] |= bit
        sig: dict = {}
        for a, mask in zip(bounds, masks):
            if 0xD800 <= a <= 0xDFFF:
                continue                      # surrogates: never text
            sig.setdefault(mask, a)
        self.classes = [(mask, chr(rep)) for mask, rep in sig.items() if mask]

    # ------------------------------------------------------------ the VM
    def _closure(self, starts, cut: bool) -> tuple:
        """``(character nodes in priority order, whether the end was reached)`` from ``starts``
        (in priority order); ``cut``: drop what comes after the first end (Python's order)."""
        out, seen, matched = [], set(), False
        stack = list(reversed(starts))
        kind, arg = self.kind, self.arg
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            k = kind[n]
            if k == "c":
                out.append(n)
            elif k == "s":
                stack.append(arg[n][1])
                stack.append(arg[n][0])
            elif k == "m":
                matched = True
                if cut:
                    break
        return tuple(out), matched

    def _step(self, threads, mask: int) -> list:
        arg = self.arg
        return [arg[t][1] for t in threads if mask >> arg[t][0] & 1]

    def search(self):
        """The shortest miss, breadth-first over pairs (VM threads, all positions)."""
        vm0, _ = self._closure([self.start], True)
        full0, _ = self._closure([self.start], False)
        start = (vm0, frozenset(full0))
        parent = {start: None}
        frontier = [start]
        while frontier:
            nxt = []
            for state in frontier:
                vm, full = state
                for mask, rep in self.classes:
                    f2, accepts = self._closure(self._step(full, mask), False)
                    if not f2 and not accepts:
                        continue
                    v2, matched = self._closure(self._step(vm, mask), True)
                    if accepts and not matched:
                        text = [rep]
                        s = state
                        while parent[s] is not None:
                            s, ch = parent[s]
                            text.append(ch)
                        return "".join(reversed(text))
                    key = (v2, frozenset(f2))
                    if key not in parent:
                        if len(parent) >= MAX_VM_STATES:
                            raise Undecided
                        parent[key] = (state, rep)
                        nxt.append(key)
            frontier = nxt
        return None


def _in_ranges(items) -> tuple:
    """The code point ranges of an ``IN`` item list of ``re._parser``."""
    out, negate = [], False
    for op, av in items:
        if op is sre.NEGATE:
            negate = True
        elif op is sre.LITERAL:
            out.append((av, av))
        elif op is sre.RANGE:
            out.append(av)
        elif op is sre.CATEGORY and av in _CATEGORY:
            out.extend(_shorthand(_CATEGORY[av]))
        else:
            raise Undecided
    ranges = normalize_ranges(out)
    return negate_ranges(ranges) if negate else ranges


__all__ = ["Undecided", "first_match_miss"]
