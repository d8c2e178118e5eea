"""Grammar text -> :class:`CFG`, the internal context-free grammar.

A :class:`CFG` has *terminals* (regexes in the project's Python-``re``
dialect; string literals are escaped into regexes), *rules* (a nonterminal
and a tuple of symbols: ``>= 0`` is a nonterminal id, ``< 0`` is terminal
``-1 - sym``), the ``%ignore`` terminals (allowed, any number of times,
before, between and after the lexemes) and the start symbol.

Lark grammar text is read with the ``lark`` package: it expands EBNF
(``*``, ``+``, ``?``, ``[ ]``, ``~ n..m``), inlines ``?rule``/templates,
resolves ``%import common.X`` and joins terminals built from other terminals;
what it leaves is checked here. Terminal and rule priorities, ``!``/``_``
tree shaping and aliases change parse trees, not the language, and are
ignored. The language is *scannerless*: a text is a sentence iff it splits
into terminal matches (under ``re.fullmatch``) and ignored lexemes that the
rules derive; lazy quantifiers therefore read like greedy ones. An ignored
lexeme is the match Lark's ``re.match`` finds where it starts (a comment runs
to its line's end), and a terminal that Lark's ``re.match`` reads as its first
match (a lazy ``/".*?"/``) ends there: :mod:`.lexeme_ends`.

>>> g = from_lark('start: "(" start ")" | "x"')
>>> g.nonterminals, [g.patterns[-1 - s] if s < 0 else g.nonterminals[s] for s in g.rules[0][1]]
(['start'], ['\\\\(', 'start', '\\\\)'])
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import dataclass, field

from ..errors import ConstraintError, RegexSyntaxError, UnsupportedRegexError
from ..regex_parser import parse as parse_regex, parse_alternatives


class GrammarError(ConstraintError):
    """The grammar text is invalid or uses something the grammar engine cannot honour.

    ``line``/``column`` (1-based) locate syntax errors when known.
    """

    def __init__(self, msg: str, line: int | None = None, column: int | None = None):
        self.line, self.column = line, column
        super().__init__(msg)


def productive_nonterminals(rules) -> set:
    """Nonterminals that derive some finite string, given ``(lhs, symbols)`` rules whose
    terminal symbols are negative (a least fixpoint).

    >>> sorted(productive_nonterminals([(0, (1, -1)), (1, (-2,)), (2, (2,))]))
    [0, 1]
    """
    productive: set = set()
    changed = True
    while changed:
        changed = False
        for lhs, rhs in rules:
            if lhs not in productive and all(s < 0 or s in productive for s in rhs):
                productive.add(lhs)
                changed = True
    return productive


@dataclass
class CFG:
    """A context-free grammar over terminal regexes (see the module docstring)."""

    nonterminals: list            # id -> name
    terminals: list               # terminal id -> name
    patterns: list                # terminal id -> regex (Python re dialect, fullmatch)
    rules: list                   # (lhs nonterminal id, tuple of symbols)
    start: int                    # nonterminal id
    ignore: list = field(default_factory=list)  # terminal ids
    #: terminal ids that end at their first match (Lark reads a lazy ``".*?"`` so: :mod:`.lexeme_ends`)
    shortest: list = field(default_factory=list)

    def check(self) -> "CFG":
        """Raise :class:`GrammarError` for unproductive rules; return self."""
        productive = productive_nonterminals(self.rules)
        if self.start not in productive:
            raise GrammarError(
                f"the grammar's language is empty: the start rule {self.nonterminals[self.start]!r} "
                "derives no finite string (every alternative refers back to a rule without a base case)")
        bad = [self.nonterminals[i] for i in self.reachable() if i not in productive]
        if bad:
            raise GrammarError(
                f"unproductive rule {bad[0]!r}: it derives no finite string (every alternative refers "
                "back to itself or to another unproductive rule); add a non-recursive alternative"
                + (f" (also: {', '.join(map(repr, bad[1:5]))})" if len(bad) > 1 else ""))
        return self

    def to_json(self) -> str:
        """The grammar as JSON text (for the disk cache; :meth:`from_json` reads it back).

        >>> g = from_lark('start: "a" start | "b"')
        >>> CFG.from_json(g.to_json()) == g
        True
        """
        return json.dumps({"nonterminals": self.nonterminals, "terminals": self.terminals,
                           "patterns": self.patterns, "rules": [[lhs, list(rhs)] for lhs, rhs in self.rules],
                           "start": self.start, "ignore": self.ignore,
                           "shortest": self.shortest})  # ASCII: lone surrogates survive

    @classmethod
    def from_json(cls, text: str) -> "CFG":
        """Read :meth:`to_json` output; raises ``ValueError`` for anything else."""
        try:
            d = json.loads(text)
            nts, terms, pats = list(map(str, d["nonterminals"])), list(map(str, d["terminals"])), list(
                map(str, d["patterns"]))
            rules = [(int(lhs), tuple(int(x) for x in rhs)) for lhs, rhs in d["rules"]]
            start, ignore = int(d["start"]), [int(t) for t in d["ignore"]]
            shortest = [int(t) for t in d.get("shortest", [])]
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"not a serialised grammar: {e}") from e
        if len(terms) != len(pats) or not 0 <= start < len(nts) or any(
                not 0 <= lhs < len(nts) or any(not -len(terms) <= x < len(nts) for x in rhs) for lhs, rhs in rules
        ) or any(not 0 <= t < len(terms) for t in ignore + shortest):
            raise ValueError("not a serialised grammar: ids out of range")
        return cls(nts, terms, pats, rules, start, ignore, shortest)

    def digest(self) -> str:
        """A stable hex digest of the grammar's content (part of disk-cache keys)."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()

    def reachable(self) -> list:
        seen, stack = {self.start}, [self.start]
        by_lhs: dict = {}
        for lhs, rhs in self.rules:
            by_lhs.setdefault(lhs, []).append(rhs)
        while stack:
            for rhs in by_lhs.get(stack.pop(), ()):
                for s in rhs:
                    if s >= 0 and s not in seen:
                        seen.add(s)
                        stack.append(s)
        return sorted(seen)


# ---------------------------------------------------------------- terminals
#: common.lark's ESCAPED_STRING uses a lookbehind; this is the same lexeme
#: (what Lark's lexer cuts), written without it.
_LOOKBEHIND_FREE = {
    r'".*?(?<!\\)(\\\\)*?"': r'"(?:[^"\\\n]|\\.)*"',
    r'.*?(?<!\\)(\\\\)*?': r'(?:[^\\\n]|\\.)*',
}


@functools.cache
def _cased_chars() -> str:
    """Every code point that has a case (``_sre.unicode_iscased``, what ``re`` consults: 2,927
    on Python 3.11), built once per process (~30 ms): the only candidates, besides a character
    itself, that ``re.IGNORECASE`` can match for a character."""
    try:
        from _sre import unicode_iscased as cased
    except ImportError:  # pragma: no cover - CPython has it; full mappings are a superset
        def cased(cp):
            c = chr(cp)
            return c.lower() != c or c.upper() != c
    return "".join(chr(cp) for cp in range(0x110000) if cased(cp))


@functools.lru_cache(maxsize=4096)
def _fold_class(ch: str) -> str:
    """A regex class for ``ch`` under Python's ``re.IGNORECASE`` (str patterns): what ``re``
    itself matches among the cased code points.

    >>> _fold_class("k"), _fold_class("σ"), _fold_class("1")
    ('[Kk\u212a]', '[Σςσ]', '1')
    """
    rx = re.compile(re.escape(ch), re.IGNORECASE)
    same = sorted(set(rx.findall(_cased_chars())) | {ch})
    if len(same) == 1:
        return re.escape(ch)
    return "[" + "".join(re.escape(c) for c in same) + "]"


def _unfold_ignorecase(rx: str, name: str) -> str:
    """Rewrite Lark's ``(?i:literal)`` groups into explicit character classes."""
    out, i = [], 0
    while i < len(rx):
        if rx.startswith("(?i:", i):
            j, parts = i + 4, []
            while j < len(rx) and rx[j] != ")":
                c = rx[j]
                if c == "\\":
                    esc = rx[j:j + 2]
                    lit = re.fullmatch(r"\\([^A-Za-z0-9])", esc)
                    parts.append(_fold_class(lit.group(1)) if lit else esc)
                    j += 2
                    continue
                if c in "[(|*+?{.^$":
                    raise GrammarError(
                        f"terminal {name}: the case-insensitive flag 'i' is supported on string literals "
                        f"only, not on the regex {rx!r}; spell the cases out ([Ss][Ee]...)")
                parts.append(_fold_class(c))
                j += 1
            out.append("(?:" + "".join(parts) + ")")
            i = j + 1
        elif rx[i] == "\\":
            out.append(rx[i:i + 2])
            i += 2
        else:
            out.append(rx[i])
            i += 1
    return "".join(out)


def terminal_regex(name: str, pattern) -> str:
    """The project-dialect regex of one compiled Lark terminal (raises :class:`GrammarError`)."""
    rx = pattern.to_regexp()
    flags = set(pattern.flags)
    # to_regexp already wrapped the value in (?f:...) for each flag, for string literals and
    # regexes alike: /abc/i reads (?i:abc), as "abc"i does (wrapping it again refused every /.../i)
    flags.discard("i")
    if flags:
        raise GrammarError(f"terminal {name}: regex flags {sorted(flags)} are not supported "
                           "(only 'i'); rewrite the regex without them")
    for k, v in _LOOKBEHIND_FREE.items():
        rx = rx.replace(k, v)
    if "(?i:" in rx:
        rx = _unfold_ignorecase(rx, name)
    return checked_regex(f"terminal {name}", rx)


def checked_regex(where: str, rx: str) -> str:
    """``rx`` if the regex engine reads it, else :class:`GrammarError` naming ``where``."""
    try:
        parse_regex(rx)
        # (parse drops start/end anchors; parse_alternatives reports them: read again only
        # when the text could hold one)
        anchored = ("^" in rx or "$" in rx or "\\A" in rx or "\\Z" in rx) and any(
            start or end for _, start, end in parse_alternatives(rx))
    except (RegexSyntaxError, UnsupportedRegexError) as e:
        raise GrammarError(f"{where}: {e} (regex {rx!r})") from e
    if anchored:  # a no-op for a whole pattern, not for a lexeme inside a text: Lark honours it
        raise GrammarError(f"{where}: anchors (^, $, \\A, \\Z) are not supported in a grammar's "
                           f"terminals (regex {rx!r}): a lexeme is matched inside the text, where an "
                           "anchor would restrict where it may stand; remove it")
    return rx


# ---------------------------------------------------------------- Lark
#: ``x{m,n}`` with up to this many copies (``m``) and optional copies (``n - m``) is
#: expanded inline, as copies and a chain of nested optionals; past it, in O(log) rules
#: (:class:`Counted`)
LINEAR = 32


class Counted:
    """``x{k}`` and ``x{0,k}`` of a symbol in O(log k) rules, for the builders that expand
    counted repetition themselves (GBNF text, recursive JSON Schemas); Lark expands its own
    ``~ n..m``. Copies and nested optionals made a rule of ``k`` symbols and ``k`` rules
    (``x{0,10000000}`` ran out of memory). ``new_rule`` takes alternatives (tuples of symbols)
    and returns a new nonterminal with them; ``P_j`` (``2**j`` copies) is ``P_{j-1} P_{j-1}``.

    >>> alts_of = []                         # nonterminal i's alternatives: alts_of[i]
    >>> c = Counted(lambda alts: alts_of.append(alts) or len(alts_of) - 1)
    >>> c.exactly((-1,), 40), alts_of[:2]    # 40 = 8 + 32: P_3 P_5 (P_0: terminal 0 itself)
    ((2, 4), [[(-1, -1)], [(0, 0)]])
    >>> c.up_to((-1,), 10 ** 7), len(alts_of)
    ((68,), 69)
    """

    def __init__(self, new_rule):
        self.new_rule = new_rule
        self._powers: dict = {}     # symbol -> its powers of two
        self._up: dict = {}         # (symbol, level, bound) -> symbol

    def power(self, one: tuple, j: int) -> tuple:
        """A symbol for ``2**j`` copies of the symbol ``one``."""
        powers = self._powers.setdefault(one, [one])
        while len(powers) <= j:
            powers.append((self.new_rule([powers[-1] * 2]),))
        return powers[j]

    @staticmethod
    def inline(k: int) -> bool:
        """Whether ``k`` copies (or optional copies) are few enough to write out."""
        return k <= LINEAR

    def exactly(self, one: tuple, k: int) -> tuple:
        """Symbols for ``k`` copies of ``one``: inline up to :data:`LINEAR`, else one power of
        two per set bit of ``k``."""
        if self.inline(k):
            return one * k
        return tuple(s for j in range(k.bit_length()) if k >> j & 1 for s in self.power(one, j))

    def up_to(self, one: tuple, k: int, j: int = 0) -> tuple:
        """A symbol for ``P_j{0,k}`` (``()`` for ``k = 0``), unambiguous (each length has one
        parse). With ``y = P_j``: ``y{0,2m+1} -> y? (yy){0,m}`` (the length's parity decides
        ``y?``), and ``y{0,2m} -> (yy){0,m} | y (yy){0,m-1}`` (even lengths, then odd ones).
        A level needs the bounds ``m`` and ``m - 1`` at most: two rules per level."""
        if k == 0:
            return ()
        key = (one, j, k)
        got = self._up.get(key)
        if got is None:
            y, m = self.power(one, j), k >> 1
            odd = self.up_to(one, m - (not k & 1), j + 1)
            alts = [self.up_to(one, m, j + 1), y + odd]
            got = self._up[key] = (self.new_rule(list(dict.fromkeys(alts))),)
        return got


#: Lark multiplies out the optional items and inline groups of one alternative (``"a"? "b"? ...``
#: is 2^n alternatives, 30 of them exhaust memory). Before Lark does, a sequence whose product
#: would pass this many alternatives gets its largest such items as rules of their own (the
#: same language; the GBNF reader's ``DISTRIBUTE`` does the same).
LARK_DISTRIBUTE = 256
#: the most alternatives a template rule (``name{x}: ...``, expanded by Lark where used, so its
#: items are not hoisted) may multiply out to
LARK_TEMPLATE_ALTERNATIVES = 4096


def _hoist_multiplying_items(grammar) -> None:
    """Give the items of a sequence whose alternatives would multiply past :data:`LARK_DISTRIBUTE`
    rules of their own in ``grammar`` (Lark's ``Grammar`` before ``compile``, changed in place);
    a template whose expansion would pass :data:`LARK_TEMPLATE_ALTERNATIVES` is refused.

    >>> from lark.load_grammar import load_grammar
    >>> g, _ = load_grammar('start: ' + ' '.join(f'"{c}"?' for c in 'abcdefghij'), "<g>", [], False)
    >>> _hoist_multiplying_items(g); sorted(str(name) for name, *_ in g.rule_defs)
    ['__start_hoisted_0', '__start_hoisted_1', 'start']
    >>> len(g.compile(["start"], set())[1])  # 2^8 + 2 + 2 alternatives, not 2^10
    260
    """
    from lark import Tree
    from lark.grammar import NonTerminal
    from lark.load_grammar import REPEAT_BREAK_THRESHOLD, RuleOptions

    added = []

    def alternatives(node, hoist) -> int:
        """How many alternatives Lark makes of ``node`` (an upper bound: it removes duplicates),
        after hoisting (``hoist(item)`` returns the reference that replaces ``item``; None in
        templates)."""
        if not isinstance(node, Tree):
            return 1
        kind, kids = node.data, node.children
        if kind == "expansions":
            return sum(alternatives(k, hoist) for k in kids)
        if kind == "expansion":
            counts = [alternatives(k, hoist) for k in kids]
            total = 1
            for c in counts:
                total *= c
            while total > LARK_DISTRIBUTE and hoist is not None:
                i = max(range(len(counts)), key=counts.__getitem__)
                kids[i] = hoist(kids[i])
                total //= counts[i]
                counts[i] = 1
            return total
        if kind == "alias":
            return alternatives(kids[0], hoist)
        if kind == "maybe":
            return alternatives(kids[0], hoist) + 1
        if kind == "expr":
            inner, op = alternatives(kids[0], hoist), str(kids[1])
            if op == "?":
                return inner + 1
            if op in ("*", "+"):  # a recursive rule of its own, and the empty alternative
                return 2 if op == "*" else 1
            lo, hi = int(kids[2]), int(kids[-1])
            if hi >= REPEAT_BREAK_THRESHOLD:  # Lark splits it into rules of a few alternatives
                return 2
            n = sum(inner ** k for k in range(lo, hi + 1))  # each of lo..hi copies multiplies
            if n > LARK_DISTRIBUTE and hoist is not None:
                kids[0], n = hoist(kids[0]), hi - lo + 1
            return n
        return 1

    for name, params, tree, _options in list(grammar.rule_defs):
        if params:
            n = alternatives(tree, None)
            if n > LARK_TEMPLATE_ALTERNATIVES:
                raise GrammarError(
                    f"the template rule {str(name)!r} multiplies out to {n} alternatives (its optional "
                    f"items and groups; the limit is {LARK_TEMPLATE_ALTERNATIVES}): give those "
                    "items rules of their own (an optional item x: 'x_opt: x |')")
            continue

        def hoist(item, name=name):
            new = f"__{name}_hoisted_{sum(1 for n, _ in added if n == name)}"
            added.append((name, (new, (), Tree("expansions", [Tree("expansion", [item])]),
                                 RuleOptions())))
            return Tree("value", [NonTerminal(new)])

        alternatives(tree, hoist)
    grammar.rule_defs.extend(rule for _, rule in added)


def _lark_location(e: Exception):
    line, col = getattr(e, "line", None), getattr(e, "column", None)
    if line is None:
        m = re.search(r"line (\d+) col(?:umn)? (\d+)", str(e))
        if m:
            line, col = int(m.group(1)), int(m.group(2))
    return line, col


def from_lark(text: str, start: str = "start", regular: bool = True) -> CFG:
    """Read Lark grammar text into a checked :class:`CFG`.

    With ``regular=True`` (the default) rules whose language is regular are read as
    single lexemes (:func:`.regular.regular_lexemes`: the same language, fewer parser
    steps); ``regular=False`` keeps every rule as Lark expanded it.

    >>> g = from_lark('''
    ... ?start: sum
    ... ?sum: sum "+" NUMBER | NUMBER
    ... %import common.NUMBER
    ... %import common.WS
    ... %ignore WS
    ... ''')
    >>> g.terminals, g.rules                      # start is regular: one lexeme
    (['start', 'WS'], [(0, (-1,))])
    >>> g = from_lark('?start: sum \\n?sum: sum "+" NUMBER | NUMBER \\n%import common.NUMBER', regular=False)
    >>> sorted(g.terminals), len(g.rules)
    (['NUMBER', 'PLUS'], 3)
    """
    try:
        import lark
        from lark.load_grammar import load_grammar
    except ImportError as e:  # pragma: no cover - lark is a dependency
        raise ImportError("grammars need the 'lark' package: pip install 'lark>=1.1'") from e
    if not isinstance(text, str):
        raise TypeError("the grammar must be a string of Lark (or GBNF, syntax='gbnf') text")
    if not isinstance(start, str):
        raise TypeError(f"start must be the name of one rule (a str), not {start!r}")
    declared = re.search(r"^[ \t]*%declare\b[^\n]*?\b([a-z_][a-z_0-9]*)\b", text, re.M)
    if declared:  # a rule name (lowercase): Lark itself fails on it in an internal
        raise GrammarError(f"%declare of the rule {declared.group(1)!r} is not supported (%declare "
                           "names terminals that a custom lexer provides); define the rule")
    try:
        grammar, _ = load_grammar(text, "<grammar>", [], False)
        _hoist_multiplying_items(grammar)
        lark_terms, lark_rules, ignore_names = grammar.compile([start], set())
    except lark.exceptions.VisitError as e:  # Lark failed inside one construct of the text
        what = e.obj.data if isinstance(e.obj, lark.Tree) else e.rule
        parts = " ".join(str(t) for t in e.obj.scan_values(lambda _: True)) \
            if isinstance(e.obj, lark.Tree) else str(e.obj)
        hint = ": a range joins two single characters (\"a\"..\"z\")" if what == "range" else \
            f": {e.orig_exc}" if str(e.orig_exc) else ""
        raise GrammarError(f"grammar error in the {what} {parts}{hint}") from e
    except lark.exceptions.LarkError as e:
        line, col = _lark_location(e)
        where = f" at line {line}, column {col}" if line is not None else ""
        msg = str(e).strip()
        if "used but not defined" in msg:
            raise GrammarError(f"undefined rule or terminal: {msg}", line, col) from e
        raise GrammarError(f"grammar error{where}: {msg}", line, col) from e
    except (OSError, AssertionError) as e:   # Lark's import of a grammar file it did not find
        detail = getattr(e, "filename", None) or str(e)
        raise GrammarError(f"%import of a grammar that is not one of Lark's bundled grammars (common, "
                           f"unicode, python, lark) is not supported ({detail}); paste the rules it "
                           "should bring into the grammar text") from None
    if not any(r.origin.name == start for r in lark_rules):
        raise GrammarError(f"the grammar has no start rule {start!r}: define '{start}: ...' "
                           "(or pass start= the name of the top rule)")
    term_of = {t.name: t for t in lark_terms}
    patterns, names, tid_of = [], [], {}
    nt_id: dict = {}
    rules = []

    def term(name: str) -> int:
        if name not in tid_of:
            t = term_of.get(name)
            if t is None:
                raise GrammarError(f"terminal {name} has no definition (unsupported Lark feature "
                                   "%declare, which needs a custom lexer); define it with a regex")
            tid_of[name] = len(names)
            names.append(name)
            patterns.append(terminal_regex(name, t.pattern))
        return tid_of[name]

    def nonterm(name: str) -> int:
        if name not in nt_id:
            nt_id[name] = len(nt_id)
        return nt_id[name]

    nonterm(start)
    for r in lark_rules:
        lhs = nonterm(str(r.origin.name))
        rhs = tuple(-1 - term(s.name) if s.is_term else nonterm(str(s.name)) for s in r.expansion)
        rules.append((lhs, rhs))
    ignore = [term(n) for n in ignore_names]
    nts = [None] * len(nt_id)
    for k, v in nt_id.items():
        nts[v] = k
    from .lexeme_ends import scanned_shortest
    scanned = sorted({-1 - x for _, rhs in rules for x in rhs if x < 0})
    cfg = CFG(nts, names, patterns, rules, nt_id[start], ignore,
              scanned_shortest(patterns, names, scanned)).check()
    if regular:
        from .regular import regular_lexemes
        cfg = regular_lexemes(cfg).check()
    return cfg
