"""Parse a Python ``re`` pattern into a small syntax tree over Unicode code points.

The tree has four node kinds, all plain tuples so that they hash and compare:

* ``("cls", ranges)`` – one character from ``ranges``, a sorted tuple of
  disjoint inclusive code-point ranges ``(lo, hi)`` (surrogates excluded);
* ``("cat", items)`` – concatenation;
* ``("alt", items)`` – alternation;
* ``("rep", item, min, max)`` – repetition, ``max`` is ``None`` for unbounded;
* ``("ref", name)`` – a call of a shared definition (see below).

A pattern may start with ``(?(DEFINE)(?P<name>...)...)``: named definitions,
each called as ``(?&name)`` later in the definitions or in the pattern (the
syntax of the ``regex`` module and PCRE). :func:`parse` then returns
``("def", ((name, tree), ...), root)``. Calls are not recursive (a definition
may only call those defined before it), so the language stays regular; the
automaton builds each definition once, however often it is called, which
keeps large JSON Schemas (one ``$ref`` used in many places) small.

The semantics are those of Python's ``re`` with a ``str`` pattern and no
flags, under ``re.fullmatch``: ``\\d``, ``\\w`` and ``\\s`` are the Unicode
classes ``re`` uses, ``.`` is any character but ``\\n``. Constructs a finite
automaton cannot honour (backreferences, lookaround, word boundaries, inline
flags, possessive quantifiers, anchors in the middle) raise
:class:`~hf_constrained.errors.UnsupportedRegexError` naming the construct and
its position; malformed patterns raise
:class:`~hf_constrained.errors.RegexSyntaxError` with the position.
:func:`parse_alternatives` also reports which top-level alternatives were
anchored (for ``re.search`` semantics).

>>> parse("a|b")
('alt', (('cls', ((97, 97),)), ('cls', ((98, 98),))))
>>> parse("[0-9]{2}")
('rep', ('cls', ((48, 57),)), 2, 2)
>>> parse("(?(DEFINE)(?P<d>[ab]))(?&d)-(?&d)")
('def', (('d', ('cls', ((97, 98),))),), ('cat', (('ref', 'd'), ('cls', ((45, 45),)), ('ref', 'd'))))
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata

from .errors import RegexSyntaxError, UnsupportedRegexError

MAX_CP = sys.maxunicode  # 0x10FFFF
#: groups nested deeper than this are a RegexSyntaxError ("too deeply nested"), never a RecursionError
MAX_GROUP_DEPTH = 200
_SURROGATES = (0xD800, 0xDFFF)
EMPTY = ("cat", ())
_COMMENT = ("comment",)  # returned by group() for (?#...); never in a tree
# Python's re only takes ASCII digits in counted repetitions ("a{\u0661}" is
# literal text there).
_COUNTED = re.compile(r"\{([0-9]*)(,?)([0-9]*)\}")
_END_ANCHORS = re.compile(r"(?:\$|\\Z)*(?=\||\Z)")
_DEFINE = "(?(DEFINE)"
# Parsing speed (issue #12: 10-100k-character regexes from JSON Schemas). A character
# that is not one of these is a literal atom; an escape of one of ``_ESCAPED_LITERAL``
# (ASCII punctuation and space) is the literal character itself.
_NOT_PLAIN = frozenset("\\[(.*+?{^$|)")
_QUANTIFIER_START = frozenset("*+?{")
_SIMPLE_QUANTIFIERS = {"*": (0, None), "+": (1, None), "?": (0, 1)}
_PLAIN_RUN = re.compile(r"[^\\\[(.*+?{^$|)]+")
_ESCAPED_LITERAL = frozenset("!\"#%&'()*+,-./:;<=>?@[\\]^_`{|}~ $")
# The text a character class most likely spans: a cache key only, a parse stores
# its result under it when it consumed exactly that text (see ``char_class``).
_CLASS_TEXT = re.compile(r"\[\^?\]?(?:[^\\\]]|\\.)*\]", re.S)
_HEX = re.compile(r"[0-9a-fA-F]*")
_CACHE_MAX = 4096
_CLASS_CACHE: dict = {}  # class text -> ranges, for parsers without shorthand overrides
_LITERALS: dict = {}     # code point -> ("cls", ranges)
_CHAR_NODES: dict = {}   # character -> the same node
_OPTIONAL: dict = {}     # character -> its ("rep", node, 0, 1): JSON's " ?"


def normalize_ranges(ranges) -> tuple:
    """Sort, merge and strip surrogates from a list of ``(lo, hi)`` ranges."""
    if isinstance(ranges, (list, tuple)) and len(ranges) == 1:  # one literal: the same, faster
        (lo, hi), = ranges
        if hi < _SURROGATES[0] or lo > _SURROGATES[1]:
            return ((lo, hi),)
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
    def __init__(self, pattern: str, classes=None, groups: bool = True):
        self.p = pattern
        self.i = 0
        # group text -> (tree, deepest nesting it was parsed at): a JSON regex repeats whole
        # groups (a string value's body, a number) hundreds of times; None: off
        self._groups: dict | None = {} if groups else None
        # a cached group's text up to its first ")" (escaped or not) -> the cached texts
        # that start so (see group())
        self._by_head: dict = {}
        self.depth = 0
        self.names: set = set()
        self.classes = classes or {}
        # [start anchored, end anchored] per top-level alternative
        self.anchored: list = []
        self.repeated_anchors = False  # accept "^^a" / "a$$" (parse_alternatives)
        self.subroutines = False  # accept a leading (?(DEFINE)...) and (?&name) calls (parse)
        self.defined: set = set()  # definitions callable so far
        self.has_defs = False  # the pattern started with (?(DEFINE)...): (?&name) is a call
        self.anchor_nodes = False  # other anchors: ("anchor", "^"/"$") nodes, not errors

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
        defs = None
        if self.subroutines and self.p.startswith(_DEFINE):
            defs = self.definitions()
        node = self.alternation(top=True)
        if not self.eof():
            if self.peek() == ")":
                self.error("unbalanced parenthesis")
            self.error(f"unexpected {self.peek()!r}")
        return node if defs is None else ("def", defs, node)

    def definitions(self) -> tuple:
        """``(?(DEFINE)(?P<name>...)...)`` at the start: the named definitions, in order."""
        start = 0
        self.has_defs = True
        self.i = len(_DEFINE)
        self.depth += 1
        defs = []
        while self.peek() == "(":
            pos = self.i
            if not self.p.startswith("(?P<", pos):
                self.error("a (?(DEFINE)...) group may only hold named groups (?P<name>...)", pos)
            self.i += 4
            name = self._group_name()
            self.depth += 1
            body = self.alternation(top=False)
            self.depth -= 1
            if self.peek() != ")":
                self.error("missing ), unterminated subpattern", pos)
            self.i += 1
            defs.append((name, body))
            self.defined.add(name)
        if self.peek() != ")":
            self.error("missing ), unterminated (?(DEFINE)...) group", start)
        self.i += 1
        self.depth -= 1
        return tuple(defs)

    def _group_name(self) -> str:
        """Read ``name>`` at ``self.i`` (just after ``(?P<``); check and register it."""
        name_pos = self.i
        end = self.p.find(">", name_pos)
        if end < 0:
            if name_pos == len(self.p):
                self.error("missing group name", name_pos)
            self.error("missing >, unterminated name", name_pos)
        name = self.p[name_pos:end]
        if not name:
            self.error("missing group name", name_pos)
        if not name.isidentifier():
            self.error(f"bad character in group name {name!r}", name_pos)
        if name in self.names:
            self.error(f"redefinition of group name {name!r}", name_pos)
        self.names.add(name)
        self.i = end + 1
        return name

    def call(self, pos: int):
        """``(?&name)``: a call of a definition made earlier in ``(?(DEFINE)...)``."""
        end = self.p.find(")", pos)
        name = self.p[pos + 3:end] if end > 0 else ""
        if name not in self.defined:
            self.unsupported(
                f"subroutine call (?&{name})", pos,
                "it must call a group defined earlier in the leading (?(DEFINE)...) group "
                "(recursive calls are not regular: use GrammarProcessor for recursion)")
        self.i = end + 1
        return ("ref", name)

    def alternation(self, top: bool = False):
        options = [self.concatenation(top)]
        p, n = self.p, len(self.p)
        while self.i < n and p[self.i] == "|":
            self.i += 1
            options.append(self.concatenation(top))
        return options[0] if len(options) == 1 else ("alt", tuple(options))

    def concatenation(self, top: bool):
        if top:
            self.anchored.append([False, False])
        items = []
        start = self.i
        last_quantified = False
        p, n = self.p, len(self.p)
        while self.i < n:
            pos = self.i
            c = p[pos]
            if c == "|" or c == ")":
                break
            # fast path: a literal (or an escaped punctuation character) not followed by a
            # quantifier is one atom, exactly as atom() + quantifiers() would give it
            if c not in _NOT_PLAIN:
                end = _PLAIN_RUN.match(p, pos).end()
                quantified = end < n and p[end] in _QUANTIFIER_START
                if quantified:
                    end -= 1  # the run's last character is quantified: not in the run
                if end > pos:
                    run = p[pos:end]
                    nodes = list(map(_CHAR_NODES.get, run))  # one C-level pass per run
                    items += nodes if None not in nodes else map(_char_node, run)
                    self.i = end
                    last_quantified = False
                # one literal and "?" with no other quantifier after it (JSON's " ?"), right
                # after the run or alone: what atom() + quantifiers() would give ("?" then
                # "?", "+", "*" or "{": the general path, at the next turn)
                if quantified and p[end + 1] == "?" and (end + 2 >= n or p[end + 2] not in _QUANTIFIER_START):
                    optional = _OPTIONAL.get(p[end])
                    items.append(optional if optional is not None else _optional(p[end]))
                    self.i = end + 2
                    last_quantified = True
                    continue
                if end > pos:
                    continue
            elif c == "\\" and pos + 1 < n and p[pos + 1] in _ESCAPED_LITERAL:
                if pos + 2 >= n or p[pos + 2] not in _QUANTIFIER_START:
                    items.append(_literal(ord(p[pos + 1])))
                    self.i = pos + 2
                    last_quantified = False
                    continue
            if c in "^$" or (c == "\\" and pos + 1 < n and p[pos + 1] in "AZ"):
                anchor = self._anchor(c if c != "\\" else "\\" + self.peek(1), pos, top, start)
                if isinstance(anchor, tuple):
                    items.append(anchor)
                elif anchor and self.repeated_anchors:
                    start = self.i
                continue
            atom = self.group() if c == "(" else self.atom()  # atom() would call group()
            if atom is _COMMENT:
                # Like re, a comment adds no item: a quantifier right after it
                # applies to the item before it ("a(?#x)*" is "a*").
                if not self._at_quantifier():
                    continue
                if not items:
                    self._nothing_to_repeat()
                atom = items.pop()
                quantified = self.quantifiers(atom, seen=last_quantified)
            elif self.i < n and p[self.i] in _QUANTIFIER_START:
                quantified = self.quantifiers(atom)
            else:  # what quantifiers() returns when no quantifier follows
                quantified = atom
            last_quantified = quantified is not atom
            items.append(quantified)
        return items[0] if len(items) == 1 else ("cat", tuple(items))

    def _at_quantifier(self) -> bool:
        c = self.peek()
        return (c != "" and c in "*+?") or (c == "{" and self._counted_lookahead())

    def _nothing_to_repeat(self):
        pos = self.i
        if self.peek() == "{":
            self._counted()  # like re, report "{2,1}" before "nothing to repeat"
        self.error("nothing to repeat", pos)

    def _anchor(self, token: str, pos: int, top: bool, start: int):
        self.i += len(token)
        if self._at_quantifier():
            self._nothing_to_repeat()
        at_start = token in ("^", "\\A")
        if top and at_start and pos == start:
            self.anchored[-1][0] = True
            return True  # no-op under fullmatch
        if top and not at_start and (
            self.eof() or self.peek() == "|"
            or (self.repeated_anchors and _END_ANCHORS.match(self.p, self.i))
        ):
            self.anchored[-1][1] = True
            return False  # no-op under fullmatch
        if self.anchor_nodes:
            return ("anchor", "^" if at_start else "$")
        where = "at the start" if at_start else "at the end"
        self.unsupported(
            f"anchor '{token}'",
            pos,
            f"anchors are only allowed {where} of the whole pattern "
            "(the match is always a full match); remove it",
        )

    def quantifiers(self, atom, seen: bool = False):
        p, n = self.p, len(self.p)
        while True:
            pos = self.i
            c = p[pos] if pos < n else ""
            if c in _SIMPLE_QUANTIFIERS:
                self.i += 1
                lo, hi = _SIMPLE_QUANTIFIERS[c]
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
            c = p[self.i] if self.i < n else ""
            if c == "?":
                self.i += 1  # lazy: same language
            elif c == "+":
                self.unsupported(
                    "possessive quantifier", self.i, "use a plain quantifier instead"
                )
            atom = ("rep", atom, lo, hi)

    def _counted(self):
        m = _COUNTED.match(self.p, self.i)
        if not m or (m.group(1) == "" and m.group(2) == ""):
            return None  # a literal '{' in Python
        lo = int(m.group(1)) if m.group(1) else 0
        hi = (int(m.group(3)) if m.group(3) else None) if m.group(2) else lo
        if hi is not None and hi < lo:
            self.error("min repeat greater than max repeat", self.i + 1)
        self.i = m.end()
        return lo, hi

    def atom(self):
        c = self.p[self.i]  # never at the end: concatenation() calls it on a character
        if c == "(":
            return self.group()
        pos = self.i
        if c in "*+?" or (c == "{" and self._counted_lookahead()):
            self._nothing_to_repeat()
        if c == "[":
            return ("cls", self.char_class())
        if c == ".":
            self.i += 1
            return ("cls", DOT)
        if c == "\\":
            return self.escape(in_class=False)
        self.i += 1
        del pos
        return _literal(ord(c))

    def _counted_lookahead(self) -> bool:
        m = _COUNTED.match(self.p, self.i)
        return bool(m) and not (m.group(1) == "" and m.group(2) == "")

    def group(self):
        pos = self.i
        if self.has_defs and self.p.startswith("(?&", pos):
            return self.call(pos)  # a call is never cached (below): straight to it
        cache = self._groups
        head = None
        if cache is not None:
            # the same text parses to the same tree anywhere: a group's parse reads nothing
            # after its ")", names are never cached, calls only refer to earlier definitions
            # (those stay defined), and the nesting limit holds at no deeper a level. A
            # cached text T that stands here holds the first ")" after here (T ends in one),
            # so T starts with this head: the texts under it are the only candidates (at
            # most one of them stands here: a group's text is never a proper prefix of
            # another's, as its parse would have stopped there)
            close = self.p.find(")", pos)
            if close >= 0:
                head = self.p[pos:close + 1]
                for text in self._by_head.get(head, ()):
                    if self.p.startswith(text, pos):
                        got = cache[text]
                        if self.depth <= got[1]:
                            self.i = pos + len(text)
                            return got[0]
                        break
        names = len(self.names)
        self.i += 1
        if self.p.startswith("?", self.i):
            kind = self.p[self.i : self.i + 4]
            if kind.startswith("?:"):
                self.i += 2
            elif kind.startswith("?P<"):
                self.i += 3
                self._group_name()
            elif kind.startswith("?&") and self.has_defs:
                return self.call(pos)
            elif kind.startswith("?P="):
                self.unsupported("backreference (?P=...)", pos, "a finite automaton cannot match repeated text")
            elif kind.startswith("?#"):
                end = self.p.find(")", self.i)
                if end < 0:
                    self.error("missing ), unterminated comment", pos)
                self.i = end + 1
                return _COMMENT
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
            elif kind in ("?", "?P", "?<"):
                self.error("unexpected end of pattern", len(self.p))
            else:
                ext = kind[:3] if kind[:2] in ("?P", "?<") else kind[:2]
                self.error("unknown extension " + ext, self.i)
        self.depth += 1
        if self.depth > MAX_GROUP_DEPTH:
            self.error("too deeply nested")
        inner = self.alternation(top=False)
        self.depth -= 1
        if not self.p.startswith(")", self.i):
            self.error("missing ), unterminated subpattern", pos)
        self.i += 1
        if cache is not None and len(self.names) == names:  # no named group inside
            text = self.p[pos:self.i]
            if text not in cache:
                self._by_head.setdefault(head, []).append(text)
            cache[text] = (inner, self.depth)
        return inner

    def escape(self, in_class: bool):
        pos = self.i
        self.i += 1
        if self.eof():
            self.error("bad escape (end of pattern)", pos)
        c = self.p[self.i]
        self.i += 1
        if c in "dDwWsS":
            subset, superset = self.classes.get(c) or (_shorthand(c),) * 2
            return ("set", subset, superset) if in_class else ("cls", subset)
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
            if self.peek() != "{":
                self.error("missing {")
            self.i += 1
            end = self.p.find("}", self.i)
            if end == self.i or (end < 0 and self.eof()):
                self.error("missing character name")
            if end < 0:
                self.error("missing }, unterminated name")
            name = self.p[self.i : end]
            try:
                cp = ord(unicodedata.lookup(name))
            except (KeyError, TypeError):  # TypeError: a named sequence
                self.error(f"undefined character name {name!r}", pos)
            self.i = end + 1
        elif c == "0":
            digits = re.compile(r"[0-7]{0,2}").match(self.p, self.i).group(0)
            self.i += len(digits)
            cp = int("0" + digits, 8)
        elif in_class and c in "1234567":
            # in a class there are no backreferences: up to 3 octal digits
            digits = c + re.compile(r"[0-7]{0,2}").match(self.p, self.i).group(0)
            self.i = pos + 1 + len(digits)
            cp = int(digits, 8)
            if cp > 0o377:
                self.error(f"octal escape value \\{digits} outside of range 0-0o377", pos)
        elif c in "0123456789":  # only ASCII digits: "\\\u0661" is a literal
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
        return _literal(cp)

    def _hex(self, n: int, pos: int) -> int:
        digits = self.p[self.i : self.i + n]
        if len(digits) != n or _HEX.match(digits).end() != n:
            self.error(f"incomplete escape \\{self.p[pos + 1]}{digits}", pos)
        self.i += n
        return int(digits, 16)

    def char_class(self) -> tuple:
        # The ranges depend only on the class's own text (and self.classes): a class
        # text parsed before (most of a JSON Schema's classes repeat) is looked up.
        cache = _CLASS_CACHE if not self.classes else None
        m = _CLASS_TEXT.match(self.p, self.i) if cache is not None else None
        if m is not None:
            hit = cache.get(m.group())
            if hit is not None:
                self.i = m.end()
                return hit
        ranges = self._char_class()
        if m is not None and self.i == m.end():
            if len(cache) >= _CACHE_MAX:
                cache.clear()
            cache[m.group()] = ranges
        return ranges

    def _char_class(self) -> tuple:
        pos = self.i
        self.i += 1
        negated = False
        if self.peek() == "^":
            negated = True
            self.i += 1
        ranges, removed = [], []  # what the class adds / what a negation removes
        first = True
        while True:
            if self.eof():
                self.error("unterminated character set", pos)
            c = self.peek()
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            item = self.i
            lo = self._class_item()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.i += 1
                hi = self._class_item()
                # like re: a shorthand (\\d...) cannot end a range, nor start one
                if lo[0] == "set" or hi[0] == "set" or hi[1] < lo[1]:
                    self.error(f"bad character range {self.p[item:self.i]}", item)
                ranges.append((lo[1], hi[1]))
                removed.append((lo[1], hi[1]))
            elif lo[0] == "set":
                ranges.extend(lo[1])
                removed.extend(lo[2])
            else:
                ranges.append((lo[1], lo[1]))
                removed.append((lo[1], lo[1]))
        return negate_ranges(removed) if negated else normalize_ranges(ranges)

    def _class_item(self):
        c = self.peek()
        if c == "\\":
            return self.escape(in_class=True)
        self.i += 1
        return ("char", ord(c))


def _literal(cp: int):
    """One code point; a lone surrogate, which UTF-8 cannot spell, gives ``("cls", ())``."""
    node = _LITERALS.get(cp)
    if node is None:
        node = ("cls", normalize_ranges([(cp, cp)]))
        if len(_LITERALS) < _CACHE_MAX:
            _LITERALS[cp] = node
    return node


def _optional(ch: str):
    """``("rep", literal, 0, 1)``, one object per character (as ``_char_node``; trees are
    compared by value, and the automaton builds a repeated leaf at each place)."""
    node = ("rep", _char_node(ch), 0, 1)
    if len(_OPTIONAL) < _CACHE_MAX:
        _OPTIONAL[ch] = node
    return node


def _char_node(ch: str):
    """``_literal(ord(ch))``, remembered by character (literal runs look them up in bulk)."""
    node = _CHAR_NODES.get(ch)
    if node is None:
        node = _literal(ord(ch))
        if len(_CHAR_NODES) < _CACHE_MAX:
            _CHAR_NODES[ch] = node
    return node


def parse(pattern: str):
    """Parse ``pattern`` into the syntax tree described in the module docstring."""
    if not isinstance(pattern, str):
        raise TypeError(f"a regex pattern must be a str, not {type(pattern).__name__}")
    parser = _Parser(pattern)
    parser.subroutines = True
    return parser.parse()


def split_definitions(pattern: str) -> tuple:
    """``(definitions, rest)``: the leading ``(?(DEFINE)...)`` group of ``pattern`` ("" if it has
    none) and the pattern after it, for a caller that puts text in front of the pattern.

    >>> split_definitions("(?(DEFINE)(?P<d>[)]|b))(?&d)x|y"), split_definitions("ab")
    (('(?(DEFINE)(?P<d>[)]|b))', '(?&d)x|y'), ('', 'ab'))
    """
    if not pattern.startswith(_DEFINE):
        return "", pattern
    parser = _Parser(pattern)
    parser.subroutines = True
    parser.definitions()
    return pattern[: parser.i], pattern[parser.i:]


def parse_alternatives(pattern: str, classes=None, anchor_nodes: bool = False) -> list:
    """Parse ``pattern`` as :func:`parse` does, one entry per top-level alternative.

    Each entry is ``(tree, anchored_start, anchored_end)``: whether that
    alternative began with ``^``/``\\A`` or ended with ``$``/``\\Z`` (which
    :func:`parse` drops, being no-ops under ``re.fullmatch``; they matter
    under ``re.search``). Unlike :func:`parse`, repeated anchors (``^^a``,
    ``a$$``, valid in ``re``) are accepted.

    ``classes`` optionally overrides the shorthand classes: it maps a letter
    of ``dDwWsS`` to ``(subset, superset)`` ranges; ``\\d`` or ``[\\d]`` uses
    the subset and a negated class ``[^\\d]`` removes the superset, so a
    caller can under-approximate Python's Unicode-wide classes.

    With ``anchor_nodes``, an anchor elsewhere than at the start/end of a
    top-level alternative becomes a zero-width node ``("anchor", "^")`` /
    ``("anchor", "$")`` in the tree instead of an error.

    >>> parse_alternatives("^a|b$")
    [(('cls', ((97, 97),)), True, False), (('cls', ((98, 98),)), False, True)]
    """
    if not isinstance(pattern, str):
        raise TypeError(f"a regex pattern must be a str, not {type(pattern).__name__}")
    parser = _Parser(pattern, classes)
    parser.repeated_anchors = True  # valid in re, and the same as one
    parser.anchor_nodes = anchor_nodes
    tree = parser.parse()
    branches = tree[1] if len(parser.anchored) > 1 else (tree,)
    return [(t, start, end) for t, (start, end) in zip(branches, parser.anchored)]
