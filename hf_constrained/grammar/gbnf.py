"""llama.cpp GBNF grammar text -> :class:`~.cfg.CFG` (:func:`gbnf_to_cfg`), or -> the equivalent
Lark grammar text (:func:`gbnf_to_lark`: what the tests give Lark's own Earley parser, the oracle).

Supported: ``name ::= ...`` rules (``root`` is the start), string literals
with ``\\n \\r \\t \\\\ \\" \\xHH \\uHHHH \\UHHHHHHHH`` escapes, character
classes ``[a-z]`` / ``[^...]``, ``.`` (any character), grouping, ``|``,
``*``, ``+``, ``?``, ``{m}``, ``{m,}``, ``{m,n}``, ``#`` comments. A rule ends
at a line break unless the line break follows ``::=`` or ``|``, sits inside
parentheses (as in llama.cpp), or the next line starts with ``|``. Every literal and class becomes a regex
terminal, so a GBNF grammar is lexed character by character as its
semantics demand.

>>> print(gbnf_to_lark('root ::= "a" [0-9]+ | x\\nx ::= "b"{2}'))
start: /a/ (/[0-9]/)+ | r1_x
r1_x: (/b/) ~ 2
<BLANKLINE>

:func:`gbnf_to_cfg` expands the same reading into rules itself, without Lark: reading text
with Lark costs a one-time ~100 ms per process (Lark builds the parser of its own grammar
language) and ~20 ms for a 100-rule grammar, where this takes a few. EBNF is expanded as Lark
expands it: a group's alternatives and an optional item are distributed into the rule's
alternatives while they stay few (:data:`DISTRIBUTE`), else they get a rule of their own;
``x*`` and ``x+`` get a left-recursive rule (``N -> x | N x``); ``x{m,n}`` is ``m`` copies then
nested optional ones (past :data:`.cfg.LINEAR` of either, O(log) rules: :class:`.cfg.Counted`).
Then :func:`.regular.regular_lexemes` reads the regular rules as lexemes, as for
Lark text. The tests check that both routes give the same language (and Lark's Earley parser
on the Lark text is their oracle).

>>> g = gbnf_to_cfg('root ::= "(" root ")" | [0-9]+')
>>> len(g.rules), sorted(g.patterns)
(2, ['[0-9]+', '\\\\(', '\\\\)'])
"""

from __future__ import annotations

import re

from .cfg import CFG, Counted, GrammarError, checked_regex

_NAME = re.compile(r"[A-Za-z0-9_-]+")
_ESC = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]", "-": "-", "^": "^"}


def _rx_char(cp: int) -> str:
    """One code point as a regex atom that is safe inside ``/.../`` and ``[...]``."""
    ch = chr(cp)
    if ch.isascii() and ch.isalnum():
        return ch
    if 0x20 <= cp < 0x7F:  # ASCII punctuation: escaped (Lark turns \xHH into the raw character)
        return "\\" + ch
    if cp < 0x100:
        return f"\\x{cp:02x}"
    if cp < 0x10000:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"


# The reading, as a tree of tuples:
#   ("lit", code points)  ("cls", negated, ((lo, hi), ...))  ("any",)  ("ref", GBNF name, rule name)
#   ("group", alt)  ("rep", node, op, lo, hi)  (op "*", "+", "?" or "{"; hi None: unbounded)
#   ("seq", items)  ("alt", seqs)
_ANY = ("any",)


class _Reader:
    def __init__(self, text: str):
        self.text, self.i = text, 0
        self.names: dict = {}
        self.used: dict = {}

    def error(self, msg: str):
        line = self.text.count("\n", 0, self.i) + 1
        col = self.i - (self.text.rfind("\n", 0, self.i) + 1) + 1
        raise GrammarError(f"GBNF syntax error at line {line}, column {col}: {msg}", line, col)

    def space(self, newline_ok: bool):
        t = self.text
        while self.i < len(t):
            c = t[self.i]
            if c == "#":
                while self.i < len(t) and t[self.i] != "\n":
                    self.i += 1
            elif c in " \t" or (newline_ok and c in "\r\n"):
                self.i += 1
            else:
                break

    def rule_name(self, name: str) -> str:
        if name not in self.names:
            self.names[name] = "start" if name == "root" else f"r{len(self.names) + 1}_" + re.sub(
                r"[^a-z0-9_]", "_", name.lower())
        return self.names[name]

    def char(self) -> int:
        t = self.text
        if self.i >= len(t):
            self.error("unexpected end of grammar")
        c = t[self.i]
        if c != "\\":
            self.i += 1
            return ord(c)
        e = t[self.i + 1:self.i + 2]
        if e in "xuU" and e:
            n = {"x": 2, "u": 4, "U": 8}[e]
            digits = t[self.i + 2:self.i + 2 + n]
            if len(digits) != n or not re.fullmatch(r"[0-9A-Fa-f]+", digits):
                self.error(f"bad \\{e} escape (needs {n} hex digits)")
            if int(digits, 16) > 0x10FFFF:
                self.error(f"\\{e}{digits} is past the last Unicode code point (U+10FFFF)")
            self.i += 2 + n
            return int(digits, 16)
        if e in _ESC:
            self.i += 2
            return ord(_ESC[e])
        self.error(f"unknown escape \\{e}")

    def literal(self) -> tuple:
        self.i += 1
        cps = []
        while True:
            if self.i >= len(self.text) or self.text[self.i] == "\n":
                self.error("unterminated string literal")
            if self.text[self.i] == '"':
                self.i += 1
                break
            cps.append(self.char())
        return ("lit", tuple(cps))

    def char_class(self) -> tuple:
        self.i += 1
        neg = self.text.startswith("^", self.i)
        if neg:
            self.i += 1
        parts = []
        while True:
            if self.i >= len(self.text):
                self.error("unterminated character class")
            if self.text[self.i] == "]":
                self.i += 1
                break
            lo = self.char()
            hi = lo
            if self.text.startswith("-", self.i) and not self.text.startswith("-]", self.i):
                self.i += 1
                hi = self.char()
                if hi < lo:
                    self.error(f"character range {chr(lo)!r}-{chr(hi)!r} is reversed")
            parts.append((lo, hi))
        if not parts and not neg:
            self.error("empty character class")
        return ("cls", neg, tuple(parts))

    def sequence(self, nested: bool, rule: str) -> tuple:
        items = []
        t = self.text
        while self.i < len(t):
            c = t[self.i]
            start = self.i
            if c == '"':
                atom = self.literal()
            elif c == "[":
                atom = self.char_class()
            elif c == ".":
                self.i += 1
                atom = _ANY
            elif c == "(":
                self.i += 1
                self.space(True)
                atom = ("group", self.alternatives(True, rule))
                if not t.startswith(")", self.i):
                    self.error("expected ')'")
                self.i += 1
            elif _NAME.match(t, self.i) and not t.startswith("::=", self.i):
                m = _NAME.match(t, self.i)
                j = self.i
                self.i = m.end()
                save = self.i
                self.space(True)
                if t.startswith("::=", self.i):  # the next rule starts here
                    self.i = j
                    break
                self.i = save
                self.used.setdefault(m.group(0), (rule, j))
                atom = ("ref", m.group(0), self.rule_name(m.group(0)))
            else:
                break
            self.space(nested)
            while self.i < len(t) and t[self.i] in "*+?{":
                if atom == ("lit", ()):
                    self.i = start
                    self.error("nothing to repeat (empty literal)")
                op = t[self.i]
                if op == "{":
                    m = re.compile(r"\{\s*(\d+)\s*(,\s*(\d*)\s*)?\}").match(t, self.i)
                    if not m:
                        self.error("bad repetition {m,n}")
                    lo, comma, hi = int(m.group(1)), m.group(2), m.group(3)
                    self.i = m.end()
                    if comma is not None and hi and int(hi) < lo:
                        self.error(f"repetition {{{lo},{hi}}}: max below min")
                    atom = ("rep", atom, op, lo, lo if comma is None else (int(hi) if hi else None))
                else:
                    self.i += 1
                    atom = ("rep", atom, op, int(op == "+"), 1 if op == "?" else None)
                self.space(nested)
            items.append(atom)
        return ("seq", tuple(items))

    def alternatives(self, nested: bool, rule: str) -> tuple:
        alts = [self.sequence(nested, rule)]
        while True:
            save = self.i
            self.space(True)  # a line that starts with '|' continues the rule
            if not self.text.startswith("|", self.i):
                self.i = save
                break
            self.i += 1
            self.space(True)
            alts.append(self.sequence(nested, rule))
        return ("alt", tuple(alts))

    def grammar(self) -> list:
        """The rules, ``[(rule name, alt), ...]`` in the text's order (``root``'s is ``start``)."""
        rules, defined = [], {}
        t = self.text
        self.space(True)
        while self.i < len(t):
            m = _NAME.match(t, self.i)
            if not m:
                self.error("expected a rule name")
            name = m.group(0)
            self.i = m.end()
            self.space(False)
            if not t.startswith("::=", self.i):
                self.error(f"expected '::=' after rule name {name!r}")
            if name in defined:
                self.error(f"rule {name!r} is defined twice")
            defined[name] = True
            self.i += 3
            self.space(True)
            body = self.alternatives(False, name)
            self.space(False)
            if self.i < len(t) and t[self.i] not in "\r\n":
                self.error(f"unexpected {t[self.i]!r}")
            rules.append((self.rule_name(name), body))
            self.space(True)
        for name, (rule, pos) in self.used.items():
            if name not in defined:
                self.i = pos
                line = t.count("\n", 0, pos) + 1
                raise GrammarError(f"undefined rule {name!r} (used in rule {rule!r}, line {line})", line)
        if "root" not in defined:
            raise GrammarError("the GBNF grammar has no 'root' rule (the start rule); define 'root ::= ...'")
        return rules


def _regex(node: tuple) -> str:
    """The project-dialect regex of a literal (non-empty), a class or ``.``."""
    if node[0] == "lit":
        return "".join(_rx_char(c) for c in node[1])
    if node[0] == "cls":
        return "[" + "^" * node[1] + "".join(
            _rx_char(lo) if lo == hi else f"{_rx_char(lo)}-{_rx_char(hi)}" for lo, hi in node[2]) + "]"
    return "[\\x00-\\U0010ffff]"


def _lark(node: tuple) -> str:
    """Lark text of a node of the reading."""
    kind = node[0]
    if kind == "lit":
        return "/" + _regex(node) + "/" if node[1] else ""
    if kind in ("cls", "any"):
        return "/" + _regex(node) + "/"
    if kind == "ref":
        return node[2]
    if kind == "group":
        return "(" + _lark(node[1]) + ")"
    if kind == "seq":
        return " ".join(x for x in map(_lark, node[1]) if x)
    if kind == "alt":
        return " | ".join(map(_lark, node[1]))
    _, inner, op, lo, hi = node
    atom = _lark(inner)
    if op != "{":  # one group already, else parenthesised (Lark refuses stacked operators: x*?)
        return f"{atom}{op}" if inner[0] == "group" else f"({atom}){op}"
    if hi == lo:
        return f"({atom}) ~ {lo}"
    if hi is not None:
        return f"({atom}) ~ {lo}..{hi}"
    return f"(({atom}) ~ {lo} ({atom})*)" if lo else f"({atom})*"


#: a group's alternatives or an optional item are distributed into the rule's alternatives
#: (as Lark does) while the rule keeps at most this many alternatives from it; beyond, the
#: piece gets a rule of its own (Lark multiplies them out: ``x? y? z? ...`` doubles each time)
DISTRIBUTE = 16


class _Builder:
    """Rules of a :class:`~.cfg.CFG` from the reading (see the module docstring)."""

    def __init__(self):
        self.nts, self.nt_of = [], {}
        self.terms, self.patterns, self.term_of = [], [], {}
        self.rules = []

    def nonterminal(self, name: str) -> int:
        if name not in self.nt_of:
            self.nt_of[name] = len(self.nts)
            self.nts.append(name)
        return self.nt_of[name]

    def fresh(self, alts: list, parent: str, kind: str) -> int:
        n = self.nonterminal(f"__{parent}_{kind}_{len(self.nts)}")
        self.rules.extend((n, a) for a in alts)
        return n

    def terminal(self, node: tuple, rule: str) -> int:
        rx = _regex(node)
        if rx not in self.term_of:
            checked_regex(f"rule {rule}", rx)
            self.term_of[rx] = len(self.terms)
            self.terms.append(f"__{rule.upper()}_{len(self.terms)}")
            self.patterns.append(rx)
        return -1 - self.term_of[rx]

    def symbol(self, alts: list, rule: str, kind: str) -> tuple:
        """One symbol for the alternatives ``alts`` (a rule of their own unless already one)."""
        if len(alts) == 1 and len(alts[0]) == 1:
            return alts[0]
        return (self.fresh(alts, rule, kind),)

    def alts(self, node: tuple, rule: str) -> list:
        """The alternatives (tuples of symbols) ``node`` contributes to a rule of ``rule``."""
        kind = node[0]
        if kind == "lit" and not node[1]:
            return [()]
        if kind in ("lit", "cls", "any"):
            return [(self.terminal(node, rule),)]
        if kind == "ref":
            return [(self.nonterminal(node[2]),)]
        if kind == "group":
            return self.alts(node[1], rule)
        if kind == "alt":
            return list(dict.fromkeys(a for seq in node[1] for a in self.alts(seq, rule)))
        if kind == "seq":
            out = [()]
            for item in node[1]:
                more = self.alts(item, rule)
                if len(out) * len(more) > DISTRIBUTE:
                    more = [self.symbol(more, rule, "group")]
                    if len(out) > DISTRIBUTE // 2:
                        out = [self.symbol(out, rule, "group")]
                out = [a + b for a in out for b in more]
            return list(dict.fromkeys(out))
        _, inner, _, lo, hi = node
        x = self.alts(inner, rule)
        if hi is None:   # x{lo,}: lo - 1 copies, then x+ (N -> x | N x); x*: N or nothing
            one = self.symbol(x, rule, "item")
            n = self.fresh([one], rule, "star")
            self.rules.append((n, (n,) + one))
            return self._times([one], lo - 1, lo - 1, rule, [(n,)]) if lo else [(), (n,)]
        return self._times(x, lo, hi, rule, [()])

    def _times(self, x: list, lo: int, hi: int, rule: str, tail: list) -> list:
        """``x{lo,hi}`` followed by ``tail``."""
        if lo == hi == 0:
            return tail
        if hi <= 8 and len(x) ** max(hi, 1) * len(tail) <= DISTRIBUTE:   # (no power of a large hi)
            out = []
            for k in range(lo, hi + 1):
                seqs = [()]
                for _ in range(k):
                    seqs = [a + b for a in seqs for b in x]
                out += [a + b for a in seqs for b in tail]
            return list(dict.fromkeys(out))
        one = self.symbol(x, rule, "item")
        counted = Counted(lambda alts: self.fresh(alts, rule, "count"))
        if counted.inline(hi - lo):
            opt = [()]   # (hi - lo) optional copies, nested: O -> ε | x O'
            for _ in range(hi - lo):
                opt = [(), one + self.symbol(opt, rule, "opt")] if opt != [()] else [(), one]
        else:
            opt = [counted.up_to(one, hi - lo)]
        rest = [a + b for a in opt for b in tail] if len(opt) * len(tail) <= DISTRIBUTE else \
            [self.symbol(opt, rule, "opt") + self.symbol(tail, rule, "rest")]
        return [counted.exactly(one, lo) + r for r in dict.fromkeys(rest)]


def gbnf_to_cfg(text: str, regular: bool = True):
    """Read GBNF text into a checked :class:`~.cfg.CFG` (start = ``root``), without Lark;
    ``regular=True`` reads regular rules as lexemes (:func:`.regular.regular_lexemes`)."""
    if not isinstance(text, str):
        raise TypeError("the grammar must be a string of GBNF text")
    b = _Builder()
    b.nonterminal("start")
    for name, body in _Reader(text).grammar():
        lhs = b.nonterminal(name)
        b.rules.extend((lhs, a) for a in b.alts(body, name))
    cfg = CFG(b.nts, b.terms, b.patterns, b.rules, 0, []).check()
    if regular:
        from .regular import regular_lexemes
        cfg = regular_lexemes(cfg).check()
    return cfg


def gbnf_to_lark(text: str) -> str:
    """Translate GBNF text to equivalent Lark text (start rule ``start`` = GBNF ``root``)."""
    if not isinstance(text, str):
        raise TypeError("the grammar must be a string of GBNF text")
    return "".join(f"{name}: {_lark(body)}\n" for name, body in _Reader(text).grammar())
