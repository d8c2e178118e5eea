"""llama.cpp GBNF grammar text -> Lark grammar text (then read by :func:`.cfg.from_lark`).

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
"""

from __future__ import annotations

import re

from .cfg import GrammarError

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
            self.i += 2 + n
            return int(digits, 16)
        if e in _ESC:
            self.i += 2
            return ord(_ESC[e])
        self.error(f"unknown escape \\{e}")

    def literal(self) -> str:
        self.i += 1
        cps = []
        while True:
            if self.i >= len(self.text) or self.text[self.i] == "\n":
                self.error("unterminated string literal")
            if self.text[self.i] == '"':
                self.i += 1
                break
            cps.append(self.char())
        if not cps:
            return ""
        return "/" + "".join(_rx_char(c) for c in cps) + "/"

    def char_class(self) -> str:
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
            parts.append(_rx_char(lo) if lo == hi else f"{_rx_char(lo)}-{_rx_char(hi)}")
        if not parts and not neg:
            self.error("empty character class")
        return "/[" + ("^" if neg else "") + "".join(parts) + "]/"

    def sequence(self, nested: bool, rule: str) -> str:
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
                atom = "/[\\x00-\\U0010ffff]/"
            elif c == "(":
                self.i += 1
                self.space(True)
                atom = "(" + self.alternatives(True, rule) + ")"
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
                atom = self.rule_name(m.group(0))
            else:
                break
            self.space(nested)
            while self.i < len(t) and t[self.i] in "*+?{":
                if not atom:
                    self.i = start
                    self.error("nothing to repeat (empty literal)")
                op = t[self.i]
                if op == "{":
                    m = re.compile(r"\{\s*(\d+)\s*(,\s*(\d*)\s*)?\}").match(t, self.i)
                    if not m:
                        self.error("bad repetition {m,n}")
                    lo, comma, hi = int(m.group(1)), m.group(2), m.group(3)
                    self.i = m.end()
                    if comma is None:
                        atom = f"({atom}) ~ {lo}"
                    elif hi:
                        if int(hi) < lo:
                            self.error(f"repetition {{{lo},{hi}}}: max below min")
                        atom = f"({atom}) ~ {lo}..{hi}"
                    else:
                        atom = f"(({atom}) ~ {lo} ({atom})*)" if lo else f"({atom})*"
                else:
                    self.i += 1
                    atom = f"({atom}){op}" if atom.startswith("(") is False else f"{atom}{op}"
                self.space(nested)
            if atom:
                items.append(atom)
        return " ".join(items)

    def alternatives(self, nested: bool, rule: str) -> str:
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
        return " | ".join(alts)

    def grammar(self) -> str:
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
            rules.append(f"{self.rule_name(name)}: {body}")
            self.space(True)
        for name, (rule, pos) in self.used.items():
            if name not in defined:
                self.i = pos
                line = t.count("\n", 0, pos) + 1
                raise GrammarError(f"undefined rule {name!r} (used in rule {rule!r}, line {line})", line)
        if "root" not in defined:
            raise GrammarError("the GBNF grammar has no 'root' rule (the start rule); define 'root ::= ...'")
        return "\n".join(rules) + "\n"


def gbnf_to_lark(text: str) -> str:
    """Translate GBNF text to equivalent Lark text (start rule ``start`` = GBNF ``root``)."""
    if not isinstance(text, str):
        raise TypeError("the grammar must be a string of GBNF text")
    return _Reader(text).grammar()
