"""Where an ``%ignore``'d lexeme ends: Lark's reading, followed exactly.

Lark's Earley scanner (both dynamic lexers) matches an ignored terminal at a
position with Python's ``re.match`` on the whole text, and the ignored lexeme is
that one match, never a shorter or longer one: with ``%ignore SH_COMMENT``
(``#[^\\n]*``), ``[1, # two, 3]`` is no sentence, since the comment runs to the
end of its line. Every other lexeme ends wherever its regex matches (the
engine's reading, :mod:`.configs`). :func:`ignore_modes` says, per ignored
terminal of a grammar, how the engine ends its lexemes so that the language is
Lark's:

* ``CUT``: wherever its regex matches, as other lexemes. Exact when the terminal
  is *prefix-free* (no match goes on to a longer one, so there is one match),
  or when no lexeme that may follow it can start with a byte that continues one
  of its matches (whitespace, when no terminal starts with whitespace) and the
  terminal is closed under concatenation, or cannot follow itself that way:
  then the one place where a cut can stand is where the match stops anyway.
* ``LONGEST``: only where the match can go no further (the engine keeps the
  lexeme in progress and lets the next lexeme start where the next byte would
  end it, :meth:`.filling.CellFilling._plan`). Needs ``re.match`` to find the
  longest match (:func:`_continuing_ranges`) and every character that
  continues a match to end in a match again (a byte decides; ``(\\r?\\n)+``
  fails: after ``\\n`` an ``\\r`` continues it, and the match may still end
  before it).
* ``SHORTEST``: at its first match (the lexeme stops there): a lazy ``X*?``
  over single characters between fixed text, as in ``C_COMMENT``
  (``/\\*(.|\\n)*?\\*/``), where ``re.match`` takes the first end.

Other ignored terminals are refused with a :class:`~.cfg.GrammarError` that
names them and says why (rather than read another language than Lark's).

>>> ignore_modes(["a", "[ ]+", "#[^\\n]*", r"/\\*(.|\\n)*?\\*/"], [1, 2, 3], ["A", "WS", "COMMENT", "C_COMMENT"])
{1: 'cut', 2: 'longest', 3: 'shortest'}
"""

from __future__ import annotations

import functools
import re
import warnings
from re import _parser as sre  # Python's own reading of a pattern (lark reads widths with it too)

import numpy as np

from ..automaton import LazyDFA
from ..errors import ConstraintError
from ..forest import utf8_sequences
from ..regex_parser import MAX_CP, normalize_ranges, parse

CUT, LONGEST, SHORTEST = "cut", "longest", "shortest"

#: an ignored terminal's DFA is explored up to this many states (ignored terminals are
#: whitespace and comments: a handful); a larger one is refused
MAX_IGNORE_STATES = 2_000
#: positions of an ignored terminal's regex with counted repetitions unrolled, for the
#: determinism check of :func:`_continuing_ranges`
MAX_POSITIONS = 2_000

def ignore_modes(patterns, ignore, names, *, refuse: bool = True, lexer: LazyDFA | None = None,
                 starts=None) -> dict:
    """``{terminal: CUT | LONGEST | SHORTEST}`` for the ignored terminals ``ignore`` of a
    grammar whose terminal regexes are ``patterns`` (named ``names``). ``refuse=False``:
    an ignored terminal that cannot be followed gets None instead of a GrammarError.
    ``lexer``: a DFA of every terminal, terminal ``t`` starting at ``starts[t]`` (the grammar
    engine's): its states are read instead of a DFA of each ignored terminal, and its first
    bytes before any terminal's regex is parsed for its first characters."""
    from .cfg import GrammarError
    ignore = list(dict.fromkeys(ignore))
    info = {t: _ignored(patterns[t]) if lexer is None else _Ignored(patterns[t], lexer, starts[t])
            for t in ignore}
    first_bytes: dict = {}

    def overlaps(ranges, lead, i: int) -> bool:
        """Whether a match of terminal ``i`` may start with a character of ``ranges`` (whose
        first UTF-8 bytes are ``lead``, a mask over bytes, when ``lexer`` is given)."""
        if lexer is not None:
            got = first_bytes.get(i)
            if got is None:
                lexer.expand(starts[i])
                got = first_bytes[i] = (lexer.table[starts[i]] != 0)[lexer.byte_class]
            if not (lead & got).any():
                return False
        return _overlap(ranges, _first_ranges_of(patterns[i]))
    out = {}
    for t in ignore:
        ig = info[t]
        if ig.prefix_free:
            out[t] = CUT
            continue
        problem = None
        if ig.lazy:
            if _shortest_shape(patterns[t]):
                out[t] = SHORTEST
                continue
            problem = ("a lazy quantifier other than one X*? over single characters between fixed "
                       "text (as in C_COMMENT), where Python's re.match takes neither the shortest "
                       "nor the longest match")
        elif ig.extends is None:
            problem = ("re.match may stop before the longest match (it takes the first alternative "
                       "that matches: 'a|ab' reads 'ab' as 'a')")
        if problem is None:
            lead = _lead_mask(ig.extends) if lexer is not None else None
            if not any(overlaps(ig.extends, lead, i) for i in range(len(patterns)) if i != t) and (
                    not overlaps(ig.extends, lead, t) or ig.closed):
                out[t] = CUT
                continue
            if ig.byte_decides:
                out[t] = LONGEST
                continue
            problem = ("a match can go on through text that is no match (as '\\r' after '\\n' in "
                       "(\\r?\\n)+, or the first byte of a character that \\s matches only in part of, "
                       "U+0085 but not U+0080), and lexemes that may follow it start with such "
                       "characters, so where it ends depends on more than the next byte")
        if not refuse:
            out[t] = None
            continue
        raise GrammarError(
            f"{'an inline %ignore' if names[t].startswith('__') else '%ignore ' + names[t]} "
            f"(regex {patterns[t]!r}): Lark ends an ignored lexeme where Python's "
            f"re.match ends, and that cannot be followed here: {problem}. Write it as one %ignore per "
            "simple terminal (whitespace; one comment form, e.g. /#[^\\n]*/), or use it in the rules "
            "instead of ignoring it")
    return out


def reachable_states(dfa: LazyDFA, start: int, limit: int | None = None):
    """The live states of ``dfa`` reachable from ``start`` (itself first), expanding them;
    None past ``limit`` states."""
    states, seen = [start], {0, start}
    for s in states:
        if limit is not None and len(states) > limit:
            return None
        dfa.expand(s)
        for t in set(dfa.table[s].tolist()) - seen:
            seen.add(t)
            states.append(t)
    return states


@functools.lru_cache(maxsize=256)
def _ignored(pattern: str) -> "_Ignored":
    return _Ignored(pattern)


class GrammarWarning(UserWarning):
    """A grammar is read, but a part of Lark's reading of it could not be checked."""


def scanned_shortest(patterns, names, scanned) -> list:
    """The terminals of ``scanned`` (ids into ``patterns``, the terminals a Lark grammar's rules
    use) that Lark's lexer reads as their first match: ``re.match`` reads each match of the
    others whole (:func:`~.python_match.first_match_miss`), so their ends are those of
    ``re.fullmatch``, as the engine reads every lexeme. A terminal ``re.match`` reads short
    otherwise is a :class:`~.cfg.GrammarError` naming it, with a text it misreads.

    >>> scanned_shortest(['"[a-z]*"', '".*?"', "[0-9]+"], ["A", "B", "C"], [0, 1, 2])
    [1]
    >>> from hf_constrained.grammar.cfg import GrammarError
    >>> try:
    ...     scanned_shortest([r"[0-9]+|[0-9]+\\.[0-9]+"], ["NUM"], [0])
    ... except GrammarError as e:
    ...     print(str(e)[:12], "...", str(e)[str(e).index("reads"):][:22])
    terminal NUM ... reads '0.0' as '0' (it
    """
    from .cfg import GrammarError
    from .python_match import Undecided, first_match_miss   # (only where a regex needs it)
    out = []
    for t in scanned:
        pattern = patterns[t]
        lazy = _is_lazy(pattern)
        if not lazy and _continuing_ranges(pattern) is not None:
            continue                        # deterministic and greedy: re.match takes the longest
        try:
            miss = first_match_miss(pattern)
        except Undecided as e:              # not modelled: read as re.fullmatch, and said so
            warnings.warn(f"terminal {names[t]} (regex {pattern!r}): cannot tell whether Lark's lexer "
                          f"(Python's re.match) reads every match of it whole ({e}); it is read as "
                          "re.fullmatch reads it, so Lark's parser may refuse some texts this engine "
                          "writes; a regex without a repeated part that can be empty (write (a|b)* for "
                          "(a|b?)*) is decided", GrammarWarning, stacklevel=3)
            continue
        if miss is None:
            continue
        if _shortest_shape(pattern):
            out.append(t)
            continue
        m = re.match(pattern, miss)
        why, fix = (("a lazy quantifier stops it early, and only one X*? over single characters "
                     "between fixed text (/\".*?\"/) is read as its first match", "make the quantifier "
                     "greedy or write the regex in that form") if lazy else
                    ("it takes the first alternative that matches, not the longest",
                     "put longer alternatives first (e.g. [0-9]+\\.[0-9]+|[0-9]+)"))
        raise GrammarError(
            f"terminal {names[t]} (regex {pattern!r}): Lark's lexer matches a terminal with Python's "
            f"re.match, which reads {miss!r} as {m.group() if m else ''!r} ({why}), so Lark's parser "
            f"refuses texts that the regex matches and this engine would write; {fix}, so that "
            "re.match reads each match of the regex whole")
    return out


class _Ignored:
    """An ignored terminal's own DFA, read once: whether it is prefix-free, the characters
    that continue a match (``extends``, from :func:`_continuing_ranges`), whether it is closed under concatenation (``closed``) and
    whether the first byte of a character decides if it continues a match (``byte_decides``)."""

    def __init__(self, pattern: str, dfa: LazyDFA | None = None, start: int | None = None):
        from .cfg import GrammarError
        if dfa is None:
            dfa = LazyDFA.from_patterns([pattern])
            start = dfa.starts[0]
        self.dfa, self.start = dfa, start
        self.states = states = reachable_states(dfa, start, MAX_IGNORE_STATES)
        if states is None:
            raise GrammarError(f"the ignored terminal {pattern!r} has more than {MAX_IGNORE_STATES} "
                               "DFA states; ignored terminals are whitespace and comments: make it simpler")
        table, acc = dfa.table, dfa.accepting
        classes = set()
        for d in states:
            if acc[d]:
                classes.update(np.nonzero(table[d])[0].tolist())
        self.prefix_free = not classes
        self.lazy = _is_lazy(pattern)
        #: the code point ranges that continue a match (None: re.match may not take the longest)
        self.extends = None if self.lazy else _continuing_ranges(pattern)
        if self.extends is None and not self.lazy and _reads_whole(pattern):
            # re.match takes the longest match (python_match), the regex is not deterministic:
            # every character whose first byte continues a match from an accepting state
            cls = dfa.byte_class
            self.extends = _merge([r for b in range(256) if int(cls[b]) in classes for r in _code_points(b)])

    @functools.cached_property
    def closed(self) -> bool:
        """Whether ``L L ⊆ L``: the language from every accepting state holds the language
        from the start (pairs of states walked together)."""
        dfa = self.dfa
        table, acc, start = dfa.table, dfa.accepting, self.start
        for d in self.states:
            if not acc[d]:
                continue
            seen, todo = {(start, d)}, [(start, d)]
            while todo:
                a, b = todo.pop()
                for x, y in zip(table[a].tolist(), table[b].tolist()):
                    if x and not y or acc[x] and not acc[y]:
                        return False
                    if x and (x, y) not in seen:
                        seen.add((x, y))
                        todo.append((x, y))
        return True

    @functools.cached_property
    def byte_decides(self) -> bool:
        """Whether every character read from an accepting state either dies at its first byte
        or ends in an accepting state (then the byte after a match says if the match ends)."""
        dfa = self.dfa
        table, acc, cls = dfa.table, dfa.accepting, dfa.byte_class
        # lead bytes of one byte class with the same continuations read alike: one check each
        leads = {(int(cls[b]), _continuations(b)) for b in range(256)}
        for d in self.states:
            if not acc[d]:
                continue
            for k, rest in leads:
                e = int(table[d, k])
                if e and not acc[e] and not _all_complete(table, acc, cls, e, rest):
                    return False
        return True


def _continuations(lead: int):
    """The byte ranges of each continuation byte of a UTF-8 character that starts with ``lead``
    (the second byte's range depends on the lead: no overlong or surrogate forms).

    >>> _continuations(0x41), _continuations(0xE0), _continuations(0xC0)
    ((), ((160, 191), (128, 191)), ())
    """
    for seq in _ALL_CHARACTERS:
        if seq[0][0] <= lead <= seq[0][1]:
            return seq[1:]
    return ()


#: the UTF-8 forms of every character, as byte-range sequences (lead byte first)
_ALL_CHARACTERS = utf8_sequences(normalize_ranges([(0, MAX_CP)]))


def _all_complete(table, acc, cls, s: int, rest) -> bool:
    """Whether every byte sequence of the ranges ``rest`` leads from ``s`` to an accepting
    state (through live states)."""
    if not rest:
        return bool(acc[s])
    lo, hi = rest[0]
    nxt = {int(table[s, cls[b]]) for b in range(lo, hi + 1)}
    return 0 not in nxt and all(_all_complete(table, acc, cls, t, rest[1:]) for t in nxt)


def _is_lazy(pattern: str) -> bool:
    """Whether ``pattern`` has a lazy quantifier (``*?``, ``+?``, ``??``, ``{m,n}?``)."""
    return any(op is sre.MIN_REPEAT for op in _ops(sre.parse(pattern)))


def _ops(p):
    """Every opcode of a ``re._parser`` SubPattern, nested ones too."""
    for op, av in p:
        yield op
        for sub in _subpatterns(av):
            yield from _ops(sub)


def _subpatterns(av):
    if isinstance(av, sre.SubPattern):
        yield av
    elif isinstance(av, (tuple, list)):
        for x in av:
            yield from _subpatterns(x)


_CHAR_OPS = (sre.LITERAL, sre.NOT_LITERAL, sre.ANY, sre.IN)


def _single_char(items) -> bool:
    """Whether a SubPattern's items match exactly one character (a literal, a class, ``.``,
    a group of one, or an alternation of such)."""
    items = list(items)
    if len(items) != 1:
        return False
    op, av = items[0]
    if op in _CHAR_OPS:
        return True
    if op is sre.SUBPATTERN:
        return _single_char(av[-1])
    if op is sre.BRANCH:
        return all(_single_char(alt) for alt in av[1])
    return False


def _shortest_shape(pattern: str) -> bool:
    """Whether ``pattern`` is fixed single characters, one lazy ``X*?`` or ``X+?`` over single
    characters, then fixed single characters: then the match ``re.match`` finds is the first
    end (the lazy loop tries its counts in increasing order, and each count gives one end)."""
    items = []

    def flatten(p):
        for op, av in p:
            if op is sre.SUBPATTERN and not any(o is sre.BRANCH for o, _ in av[-1]):
                flatten(av[-1])
            else:
                items.append((op, av))
    flatten(sre.parse(pattern))
    lazy = [i for i, (op, _) in enumerate(items) if op is sre.MIN_REPEAT]
    if len(lazy) != 1:
        return False
    lo, hi, body = items[lazy[0]][1]
    if lo > 1 or hi != sre.MAXREPEAT or not _single_char(body):
        return False
    return all(_single_char([x]) for i, x in enumerate(items) if i != lazy[0])


def _continuing_ranges(pattern: str):
    """The code point ranges that continue a match of ``pattern``, when ``re.match`` finds
    the longest match at every position, else None. It does when the regex is deterministic
    (Glushkov: the positions that may come first, and those that may follow each position,
    match pairwise disjoint characters) with greedy quantifiers only: a backtracking match
    then walks the one path a text allows, and backtracks only to stop where the rest of the
    pattern is empty, from the deepest such point, the longest match. (Lazy patterns are
    :func:`_shortest_shape`'s.) A match ends at one position there, so what continues it is
    what may follow the positions that may come last.

    >>> _continuing_ranges("#[^\\n]*")[:2], _continuing_ranges("[ ]+"), _continuing_ranges("a|ab")
    ([(0, 9), (11, 55295)], [(32, 32)], None)
    """
    try:
        tree = parse(pattern)
    except ConstraintError:
        return None
    g = _Glushkov()
    try:
        _, first, last = g.build(tree)
    except _TooBig:
        return None
    if not (_disjoint(g, first) and all(_disjoint(g, f) for f in g.follow.values())):
        return None
    return _merge([r for p in last for q in g.follow[p] for r in g.ranges[q]])


class _TooBig(Exception):
    pass


class _Glushkov:
    """Positions (leaf classes, counted repetitions unrolled), first sets and follow sets."""

    def __init__(self):
        self.ranges: list = []      # position -> code point ranges
        self.follow: dict = {}      # position -> set of positions

    def build(self, t):
        """``(nullable, first, last)`` of tree ``t`` (adds its positions and follow pairs)."""
        kind = t[0]
        if kind == "cls":
            if len(self.ranges) >= MAX_POSITIONS:
                raise _TooBig
            p = len(self.ranges)
            self.ranges.append(t[1])
            self.follow[p] = set()
            return False, {p}, {p}
        if kind == "cat":
            return self._cat([lambda x=x: self.build(x) for x in t[1]])
        if kind == "alt":
            null, first, last = False, set(), set()
            for x in t[1]:
                n, f, la = self.build(x)
                null, first, last = null or n, first | f, last | la
            return null, first, last
        if kind == "rep":
            body, lo, hi = t[1], t[2], t[3]
            parts = [lambda: self.build(body)] * lo
            if hi is None:
                parts.append(lambda: self._star(body))
            else:
                parts += [lambda: self._optional(body)] * (hi - lo)
            if len(parts) > MAX_POSITIONS:
                raise _TooBig
            return self._cat(parts)
        raise _TooBig   # definitions and calls: not checked

    def _cat(self, parts):
        null, first, last = True, set(), set()
        for build in parts:
            n, f, la = build()
            for p in last:
                self.follow[p] |= f
            if null:
                first = first | f
            last = (last | la) if n else la
            null = null and n
        return null, first, last

    def _star(self, body):
        _, f, la = self.build(body)
        for p in la:
            self.follow[p] |= f
        return True, f, la

    def _optional(self, body):
        _, f, la = self.build(body)
        return True, f, la


def _disjoint(g: _Glushkov, positions) -> bool:
    spans = sorted((lo, hi) for p in positions for lo, hi in g.ranges[p])
    return all(a[1] < b[0] for a, b in zip(spans, spans[1:]))


def _reads_whole(pattern: str) -> bool:
    """Whether ``re.match`` reads every match of ``pattern`` whole (then, on any text, it finds
    the longest match: :mod:`.python_match`)."""
    from .python_match import Undecided, first_match_miss
    try:
        return first_match_miss(pattern) is None
    except Undecided:
        return False


def _code_points(b: int) -> list:
    """The code point ranges of the characters whose UTF-8 form starts with byte ``b``."""
    if b < 0x80:
        return [(b, b)]
    for lead, n, base in ((0xC0, 1, 0x80), (0xE0, 2, 0x800), (0xF0, 3, 0x10000)):
        if lead <= b < lead + (0x20 if n == 1 else 0x10 if n == 2 else 0x08):
            lo = (b - lead) << (6 * n)
            lo, hi = max(lo, base), min(lo + (1 << (6 * n)) - 1, MAX_CP)
            return [(lo, hi)] if lo <= hi else []
    return []


def _lead_mask(ranges) -> np.ndarray:
    """The first UTF-8 bytes of the code points of ``ranges``, as a mask over bytes.

    >>> np.nonzero(_lead_mask([(0x41, 0x42), (0x7F, 0x800)]))[0].tolist() == [65, 66, 127, *range(194, 225)]
    True
    """
    lead = np.zeros(256, dtype=bool)
    for seq in utf8_sequences(tuple(ranges)):
        lead[seq[0][0]:seq[0][1] + 1] = True
    return lead


def _merge(ranges) -> list:
    out = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(hi, out[-1][1]))
        else:
            out.append((lo, hi))
    return out


def _overlap(a, b) -> bool:
    """Whether two merged range lists share a code point."""
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i][1] < b[j][0]:
            i += 1
        elif b[j][1] < a[i][0]:
            j += 1
        else:
            return True
    return False


@functools.lru_cache(maxsize=4096)
def _first_ranges_of(pattern: str) -> tuple:
    """The code point ranges a match of ``pattern`` may start with (all where unknown)."""
    try:
        return tuple(_merge(_first_ranges(parse(pattern))[1]))
    except (ConstraintError, _TooBig):
        return ((0, MAX_CP),)


def _first_ranges(t) -> tuple:
    """``(nullable, code point ranges a match may start with)`` of tree ``t``."""
    kind = t[0]
    if kind == "cls":
        return False, list(t[1])
    if kind == "cat":
        out = []
        for x in t[1]:
            n, f = _first_ranges(x)
            out += f
            if not n:
                return False, out
        return True, out
    if kind == "alt":
        got = [_first_ranges(x) for x in t[1]]
        return any(n for n, _ in got), [r for _, f in got for r in f]
    if kind == "rep":
        if t[3] == 0:
            return True, []
        n, f = _first_ranges(t[1])
        return n or t[2] == 0, f
    raise _TooBig


__all__ = ["CUT", "LONGEST", "SHORTEST", "GrammarWarning", "ignore_modes", "scanned_shortest"]
