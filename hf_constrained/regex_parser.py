"""Parse a Python ``re`` pattern into a small syntax tree over Unicode code points.

The tree has four node kinds, all plain tuples so that they hash and compare:

* ``("cls", ranges)`` – one character from ``ranges``, a sorted tuple of
  disjoint inclusive code-point ranges ``(lo, hi)`` (surrogates excluded);
* ``("cat", items)`` – concatenation;
* ``("alt", items)`` – alternation;
* ``("rep", item, min, max)`` – repetition, ``max`` is ``None`` for unbounded.

The semantics are those of Python's ``re`` with a ``str`` pattern and no
flags, under ``re.fullmatch``: ``\\d``, ``\\w`` and ``\\s`` are the Unicode
classes ``re`` uses, ``.`` is any character but ``\\n``. Constructs a finite
automaton cannot honour (backreferences, lookaround, word boundaries, inline
flags, possessive quantifiers, anchors in the middle) raise
:class:`~hf_constrained.errors.UnsupportedRegexError` naming the construct and
its position; malformed patterns raise
:class:`~hf_constrained.errors.RegexSyntaxError` with the position.

>>> parse("a|b")
('alt', (('cls', ((97, 97),)), ('cls', ((98, 98),))))
>>> parse("[0-9]{2}")
('rep', ('cls', ((48, 57),)), 2, 2)
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata

from .errors import RegexSyntaxError, UnsupportedRegexError

MAX_CP = sys.maxunicode  # 0x10FFFF
_SURROGATES = (0xD800, 0xDFFF)
EMPTY = ("cat", ())


def normalize_ranges(ranges) -> tuple:
    """Sort, merge and strip surrogates from a list of ``(lo, hi)`` ranges."""
    out = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1][1] = hi
        else:
            out.append([lo, hi])
    result = []
    s_lo, s_hi = _SURROGATES
    for lo, hi in out:
        if hi < s_lo or lo > s_hi:
            result.append((lo, hi))
            continue
        if lo < s_lo:
            result.append((lo, s_lo - 1))
        if hi > s_hi:
            result.append((s_hi + 1, hi))
    return tuple(result)


def negate_ranges(ranges) -> tuple:
    """Complement of ``ranges`` within all Unicode scalar values."""
    out, prev = [], 0
    for lo, hi in normalize_ranges(ranges):
        if lo > prev:
            out.append((prev, lo - 1))
        prev = hi + 1
    if prev <= MAX_CP:
        out.append((prev, MAX_CP))
    return normalize_ranges(out)


@functools.lru_cache(maxsize=None)
def _unicode_class(kind: str) -> tuple:
    """Ranges of ``\\d``, ``\\w`` or ``\\s`` exactly as Python's ``re`` sees them."""
    every = "".join(map(chr, range(0, _SURROGATES[0]))) + "".join(
        map(chr, range(_SURROGATES[1] + 1, MAX_CP + 1))
    )
    members = re.findall("\\" + kind, every)
    cps = sorted(ord(c) for c in members)
    ranges, start, prev = [], None, None
    for cp in cps:
        if start is None:
            start = prev = cp
        elif cp == prev + 1:
            prev = cp
        else:
            ranges.append((start, prev))
            start = prev = cp
    if start is not None:
        ranges.append((start, prev))
    return normalize_ranges(ranges)


def _shorthand(letter: str) -> tuple:
    base = _unicode_class(letter.lower())
    return negate_ranges(base) if letter.isupper() else base


DOT = negate_ranges([(10, 10)])
_SIMPLE_ESCAPES = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11}


class _Parser:
    def __init__(self, pattern: str):
        self.p = pattern
        self.i = 0
        self.depth = 0

    # -- helpers -------------------------------------------------------
    def error(self, msg: str, pos: int | None = None):
        raise RegexSyntaxError(msg, self.p, self.i if pos is None else pos)

    def unsupported(self, construct: str, pos: int, hint: str = ""):
        raise UnsupportedRegexError(construct, self.p, pos, hint)

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.p[j] if j < len(self.p) else ""

    def eof(self) -> bool:
        return self.i >= len(self.p)

    # -- grammar -------------------------------------------------------
    def parse(self):
        node = self.alternation(top=True)
        if not self.eof():
            if self.peek() == ")":
                self.error("unbalanced parenthesis")
            self.error(f"unexpected {self.peek()!r}")
        return node

    def alternation(self, top: bool = False):
        options = [self.concatenation(top)]
        while self.peek() == "|":
            self.i += 1
            options.append(self.concatenation(top))
        return options[0] if len(options) == 1 else ("alt", tuple(options))

    def concatenation(self, top: bool):
        items = []
        start = self.i
        while not self.eof() and self.peek() not in "|)":
            pos = self.i
            c = self.peek()
            if c in "^$" or (c == "\\" and self.peek(1) in ("A", "Z")):
                self._anchor(c if c != "\\" else "\\" + self.peek(1), pos, top, start)
                continue
            atom = self.atom()
            atom = self.quantifiers(atom)
            items.append(atom)
        return items[0] if len(items) == 1 else ("cat", tuple(items))

    def _anchor(self, token: str, pos: int, top: bool, start: int):
        self.i += len(token)
        at_start = token in ("^", "\\A")
        if top and at_start and pos == start:
            return  # no-op under fullmatch
        if top and not at_start and (self.eof() or self.peek() == "|"):
            return  # no-op under fullmatch
        where = "at the start" if at_start else "at the end"
        self.unsupported(
            f"anchor {token!r}",
            pos,
            f"anchors are only allowed {where} of the whole pattern "
            "(the match is always a full match); remove it",
        )

    def quantifiers(self, atom):
        seen = False
        while True:
            pos = self.i
            c = self.peek()
            if c and c in "*+?":
                self.i += 1
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
            elif c == "{":
                q = self._counted()
                if q is None:
                    return atom
                lo, hi = q
            else:
                return atom
            if seen:
                self.error("multiple repeat", pos)
            if atom is None:
                self.error("nothing to repeat", pos)
            seen = True
            if self.peek() == "?":
                self.i += 1  # lazy: same language
            elif self.peek() == "+":
                self.unsupported(
                    "possessive quantifier", self.i, "use a plain quantifier instead"
                )
            atom = ("rep", atom, lo, hi)

    def _counted(self):
        m = re.compile(r"\{(\d*)(,?)(\d*)\}").match(self.p, self.i)
        if not m or (m.group(1) == "" and m.group(2) == ""):
            return None  # a literal '{' in Python
        lo = int(m.group(1)) if m.group(1) else 0
        hi = (int(m.group(3)) if m.group(3) else None) if m.group(2) else lo
        if hi is not None and hi < lo:
            self.error("min repeat greater than max repeat")
        self.i = m.end()
        return lo, hi

    def atom(self):
        c = self.peek()
        pos = self.i
        if c in "*+?":
            self.error("nothing to repeat")
        if c == "{" and self._counted_lookahead():
            self.error("nothing to repeat")
        if c == "(":
            return self.group()
        if c == "[":
            return ("cls", self.char_class())
        if c == ".":
            self.i += 1
            return ("cls", DOT)
        if c == "\\":
            return self.escape(in_class=False)
        self.i += 1
        del pos
        return ("cls", ((ord(c), ord(c)),))

    def _counted_lookahead(self) -> bool:
        m = re.compile(r"\{(\d*)(,?)(\d*)\}").match(self.p, self.i)
        return bool(m) and not (m.group(1) == "" and m.group(2) == "")

    def group(self):
        pos = self.i
        self.i += 1
        if self.peek() == "?":
            kind = self.p[self.i : self.i + 4]
            if kind.startswith("?:"):
                self.i += 2
            elif kind.startswith("?P<"):
                end = self.p.find(">", self.i)
                if end < 0:
                    self.error("missing >, unterminated name")
                name = self.p[self.i + 3 : end]
                if not name.isidentifier():
                    self.error(f"bad character in group name {name!r}")
                self.i = end + 1
            elif kind.startswith("?P="):
                self.unsupported("backreference (?P=...)", pos, "a finite automaton cannot match repeated text")
            elif kind.startswith("?#"):
                end = self.p.find(")", self.i)
                if end < 0:
                    self.error("missing ), unterminated comment")
                self.i = end + 1
                return EMPTY
            elif kind.startswith("?=") or kind.startswith("?!"):
                self.unsupported(f"lookahead ({kind[:2]}...)", pos)
            elif kind.startswith("?<=") or kind.startswith("?<!"):
                self.unsupported(f"lookbehind ({kind[:3]}...)", pos)
            elif kind.startswith("?>"):
                self.unsupported("atomic group (?>...)", pos, "use a plain group (?:...)")
            elif kind.startswith("?("):
                self.unsupported("conditional group (?(...)...)", pos)
            elif re.match(r"\?[aiLmsux-]", kind):
                self.unsupported(
                    "inline flag group (?" + re.match(r"\?([aiLmsux-]*)", self.p[self.i:]).group(1) + ")",
                    pos,
                    "spell the flag's effect out in the pattern (e.g. [aA] for case-insensitivity)",
                )
            else:
                self.error("unknown extension " + repr("(" + kind[:2]), pos)
        self.depth += 1
        if self.depth > 200:
            self.error("too deeply nested")
        inner = self.alternation(top=False)
        self.depth -= 1
        if self.peek() != ")":
            self.error("missing ), unterminated subpattern", pos)
        self.i += 1
        return inner

    def escape(self, in_class: bool):
        pos = self.i
        self.i += 1
        if self.eof():
            self.error("bad escape (end of pattern)", pos)
        c = self.p[self.i]
        self.i += 1
        if c in "dDwWsS":
            return ("set", _shorthand(c)) if in_class else ("cls", _shorthand(c))
        if c == "b" and not in_class:
            self.unsupported("word boundary \\b", pos)
        if c == "B" and not in_class:
            self.unsupported("non-boundary \\B", pos)
        if c in "AZ":
            if in_class:
                self.error(f"bad escape \\{c}", pos)
            self.unsupported(f"anchor '\\{c}'", pos, "anchors are only allowed at the very start/end")
        if c in _SIMPLE_ESCAPES:
            cp = _SIMPLE_ESCAPES[c]
        elif c == "x":
            cp = self._hex(2, pos)
        elif c == "u":
            cp = self._hex(4, pos)
        elif c == "U":
            cp = self._hex(8, pos)
            if cp > MAX_CP:
                self.error(f"bad escape \\U{cp:08x}", pos)
        elif c == "N":
            m = re.compile(r"\{([^}]*)\}").match(self.p, self.i)
            if not m:
                self.error("missing {", pos)
            try:
                cp = ord(unicodedata.lookup(m.group(1)))
            except KeyError:
                self.error(f"undefined character name {m.group(1)!r}", pos)
            self.i = m.end()
        elif c == "0":
            digits = re.compile(r"[0-7]{0,2}").match(self.p, self.i).group(0)
            self.i += len(digits)
            cp = int("0" + digits, 8)
        elif c.isdigit():
            m = re.compile(r"[0-7]{2}").match(self.p, self.i)
            if c in "01234567" and m:
                cp = int(c + m.group(0), 8)
                self.i = m.end()
                if cp > 0o377:
                    self.error(f"octal escape value \\{c}{m.group(0)} outside of range 0-0o377", pos)
            elif in_class:
                self.error(f"bad escape \\{c}", pos)
            else:
                self.unsupported(f"backreference \\{c}", pos, "a finite automaton cannot match repeated text")
        elif c.isascii() and c.isalpha():
            self.error(f"bad escape \\{c}", pos)
        else:
            cp = ord(c)
        if in_class:
            return ("char", cp)
        return ("cls", ((cp, cp),))

    def _hex(self, n: int, pos: int) -> int:
        digits = self.p[self.i : self.i + n]
        if len(digits) != n or not all(d in "0123456789abcdefABCDEF" for d in digits):
            self.error(f"incomplete escape \\{self.p[pos + 1]}{digits}", pos)
        self.i += n
        return int(digits, 16)

    def char_class(self) -> tuple:
        pos = self.i
        self.i += 1
        negated = False
        if self.peek() == "^":
            negated = True
            self.i += 1
        ranges = []
        first = True
        while True:
            if self.eof():
                self.error("unterminated character set", pos)
            c = self.peek()
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            lo = self._class_item()
            if lo[0] == "set":
                ranges.extend(lo[1])
                continue
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                dash = self.i
                self.i += 1
                hi = self._class_item()
                if hi[0] == "set":
                    self.error("bad character range", dash - 1)
                if hi[1] < lo[1]:
                    self.error("bad character range", dash - 1)
                ranges.append((lo[1], hi[1]))
            else:
                ranges.append((lo[1], lo[1]))
        result = negate_ranges(ranges) if negated else normalize_ranges(ranges)
        return result

    def _class_item(self):
        c = self.peek()
        if c == "\\":
            return self.escape(in_class=True)
        self.i += 1
        return ("char", ord(c))


def parse(pattern: str):
    """Parse ``pattern`` into the syntax tree described in the module docstring."""
    if not isinstance(pattern, str):
        raise TypeError(f"a regex pattern must be a str, not {type(pattern).__name__}")
    return _Parser(pattern).parse()
