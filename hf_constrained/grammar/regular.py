"""Regular rules read as single lexemes: a :class:`~.cfg.CFG` rewrite that keeps the language.

The grammar engine consults its Earley parser only at lexeme boundaries, so a
grammar is fast when its lexemes are long. GBNF makes every literal and
character class a terminal of its own, and Lark grammars often spell numbers
or names as rules (``number: DIGIT+``), so the parser runs at every byte.
:func:`regular_lexemes` replaces each *maximal regular* nonterminal by one
terminal whose regex is the nonterminal's language.

**Which rules.** Nonterminals are taken bottom-up over the strongly connected
components of the rule graph. ``N`` is *regular* when it is alone in its
component, every other nonterminal in its alternatives is regular, and each
alternative uses ``N`` at most once, only as its first symbol (``N -> N β``,
how Lark expands ``x*``/``x+``), only as its last (``N -> α N``), or alone
(``N -> N``, which adds nothing). With ``γ`` the alternatives without ``N``::

    L(N) = (α1|α2|...)* (γ1|γ2|...) (β1|β2|...)*

(induction on derivations: each use of a recursive alternative prepends an
``α`` or appends a ``β``, independently of the others, until a ``γ`` ends it).
Alternatives become concatenations, terminals their own regexes, regular
nonterminals their regexes; prefixes shared by alternatives are factored out
and repeated pieces counted (``x{3}``, ``x{0,5}``, what ``~ n..m`` expands to; the trees
and their regex text: :mod:`.regex_tree`).
A regular ``N`` is *maximal* when a rule that is kept (or the start) uses it;
only those get terminals (named ``N``: error messages keep the rule's name),
the others live on inside their regexes. In a kept rule, a run of two or more
adjacent regular symbols (terminals, regular nonterminals) that cannot be empty
as a whole becomes one terminal too (``ws [+-] ws`` in ``sum: product (ws [+-]
ws product)*``; named by its symbols), by the same argument: the run derives
exactly the concatenations of its pieces' languages. A kept ``N`` with *right spine*
alternatives ``N -> α N`` (``α`` a non-nullable run of regular symbols; ``atom: "-" atom``)
gets the prefix terminal ``P = (α1|α2|...)+`` instead: ``N -> P γ | γ`` for each other
alternative ``γ`` (which may use ``N`` anywhere: ``N -> "(" x ")" N`` is one), the same
language by the argument above (a derivation of ``N`` applies spine alternatives ``k >= 0``
times, then a ``γ``), and done with or without ``%ignore`` (``P`` is one terminal). Each
``α`` read nested the parser one node deeper (the item ``N -> α . N`` has the previous
node as origin), so a token of 64 dashes made every mask walk there create 64 new parser
nodes and configurations; as one lexeme they stay in one configuration. By default runs are merged
only in grammars without ``%ignore``: with it every run's regex repeats the
ignored lexemes' regex between its pieces (``AS WS* NAME``, ``NAME WS* AS WS*
NAME``, ...), which made the lexer's construction (its regexes are parsed up
front) cost more than the parser steps saved (the SQL subset of
``benchmarks/grammar_bench.py``: first mask 10 ms with rules only, 21 with
runs). A regex longer than ``max_regex`` characters, or nested deeper than
Python's recursion limit, is not built: its nonterminal is kept as rules (its
regular parts still become terminals), so the rewrite never blows up.

**Nullable rules.** Terminals must not match the empty string, so a nullable
regular ``N`` keeps two rules, ``N -> T`` and ``N -> ε``, with ``T`` the
regex of ``L(N) \\ {ε}`` (built on the tree: ``ne(a b) = ne(a) b | ne(b)`` if
``a`` is nullable, ``ne(x{0,n}) = ne(x) x{0,n-1}``, ...); a non-nullable one
is replaced by ``T`` in every rule that uses it. A terminal whose own regex is
nullable or matches nothing (the engine refuses it later, with its name) or
that cannot be embedded in a larger regex (anchors, named groups) makes the
rules that use it non-regular.

**%ignore.** The language is scannerless: a text is a sentence iff it is
``g0 w1 g1 w2 ... wk gk`` with ``w1 ... wk`` matches of the terminals of a
derivation and every ``gi`` a concatenation of ignored lexemes (``I*``, ``I``
the alternation of the ``%ignore`` regexes). So the regex of a rule puts
``I*`` between any two adjacent pieces (``a I* b``; ``(α I*)* γ (I* β)*``).
Exactness: (1) every derivation of ``N`` with ignored text between its lexemes
matches ``T``, by construction; (2) a match of ``T`` is such a derivation's
text, with possibly extra ``I*`` before its first or after its last lexeme
(where a piece was empty), and the engine allows ignored lexemes before and
after every lexeme anyway (and at the text's ends), so every sentence of the
rewritten grammar is a sentence of the original; a match of ``T`` made only of
ignored lexemes needs ``N`` nullable, whose ``ε`` alternative then derives it.
Lexing ambiguity inside ``T`` costs nothing: its regex is compiled to a DFA.

>>> from hf_constrained.grammar.cfg import from_lark
>>> g = from_lark('start: "(" start ")" | num\\nnum: DIGIT+ ("." DIGIT+)?\\nDIGIT: "0".."9"')
>>> dict(zip(g.terminals, g.patterns))["num"]
'[0-9]+(?:\\\\.[0-9]+)?'
>>> len(g.rules), len(from_lark('start: "(" start ")" | num\\nnum: DIGIT+ ("." DIGIT+)?\\nDIGIT: "0".."9"',
...                                regular=False).rules)
(2, 6)
"""

from __future__ import annotations

import re

from ..errors import RegexSyntaxError, UnsupportedRegexError
from ..regex_parser import parse as parse_regex, parse_alternatives
from .regex_tree import RegexWriter, _TooBig, _alt, _seq, _simplify
from .lexeme_ends import CUT, ignore_modes

#: the longest regex (characters) one rewritten rule may get
DEFAULT_MAX_REGEX = 4000

#: a concatenation of ASCII letters/digits, escaped punctuation and non-negated classes without
#: \\u/\\U/\\N escapes or surrogates: never empty, never nullable, no anchors or groups
_SIMPLE = re.compile(r"(?:[A-Za-z0-9]|\\[^A-Za-z0-9\ud800-\udfff]|\[(?!\^)(?:[^\]\\\[\ud800-\udfff]|\\[^uUN])+\])+")


def regular_lexemes(cfg, max_regex: int = DEFAULT_MAX_REGEX, runs=None):
    """``cfg`` with its maximal regular nonterminals replaced by terminals (see the module
    docstring); ``cfg`` itself when nothing is regular.

    ``runs``: also merge runs of regular symbols inside kept rules (None, the default: only
    in grammars without ``%ignore``, where a run's regex is no longer than its pieces').

    >>> from hf_constrained.grammar.cfg import from_lark
    >>> g = from_lark('start: "a"+ "b"?', regular=False)
    >>> r = regular_lexemes(g)
    >>> r.terminals, r.patterns, r.rules
    (['start'], ['a+b?'], [(0, (-1,))])
    """
    from .cfg import CFG
    return _Rewrite(cfg, max_regex, runs).run(CFG)


class _Rewrite(RegexWriter):
    def __init__(self, cfg, max_regex, runs=None):
        super().__init__(cfg.patterns, max_regex)
        self.cfg = cfg
        self.runs = not cfg.ignore if runs is None else bool(runs)
        self.alts: dict = {}
        for lhs, rhs in cfg.rules:
            self.alts.setdefault(lhs, []).append(rhs)
        reach = cfg.reachable()
        self.reach = set(reach)
        ign = [("t", t) for t in cfg.ignore]
        self.gap = ("rep", _alt(ign), 0, None) if ign else None
        self.term_ok = [self._embeddable(p) for p in cfg.patterns]
        for t in cfg.shortest:      # a lexeme that ends at its first match: not inside a regex
            self.term_ok[t] = False

    # ------------------------------------------------------------ classification
    @staticmethod
    def _embeddable(pattern: str) -> bool:
        """A terminal regex that means the same inside a larger regex and whose own errors
        (empty string, empty language: the engine names the terminal) cannot be hidden there:
        no anchors (no-ops under fullmatch, errors in the middle), definitions or named groups."""
        if _SIMPLE.fullmatch(pattern):  # literals and plain classes (GBNF): no parse needed
            return True
        try:
            branches = parse_alternatives(pattern)
            rx = re.compile(pattern)
        except (RegexSyntaxError, UnsupportedRegexError, re.error):
            return False
        return not (rx.fullmatch("") is not None or rx.groupindex or any(a or b for _, a, b in branches)
                    or any(t[0] == "def" for t, _, _ in branches) or all(_empty(t) for t, _, _ in branches))

    def _sccs(self):
        """Strongly connected components of the reachable nonterminals, callees first (Tarjan)."""
        index, low, stack, on, out = {}, {}, [], set(), []
        succ = {n: sorted({s for rhs in self.alts.get(n, ()) for s in rhs if s >= 0}) for n in self.reach}
        for root in sorted(self.reach):
            if root in index:
                continue
            work = [(root, 0)]
            while work:
                v, i = work.pop()
                if i == 0:
                    index[v] = low[v] = len(index)
                    stack.append(v)
                    on.add(v)
                if i < len(succ[v]):
                    work.append((v, i + 1))
                    w = succ[v][i]
                    if w not in index:
                        work.append((w, 0))
                    elif w in on:
                        low[v] = min(low[v], index[w])
                    continue
                if work:
                    u = work[-1][0]
                    low[u] = min(low[u], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    out.append(comp)
        return out

    def _seq(self, symbols) -> tuple:
        items = []
        for s in symbols:
            if items and self.gap is not None:
                items.append(self.gap)
            items.append(s[1] if isinstance(s, tuple) else ("t", -1 - s) if s < 0 else ("n", s))
        return _seq(items)

    def _name(self, s) -> str:
        return s[2] if isinstance(s, tuple) else self.cfg.terminals[-1 - s] if s < 0 else self.cfg.nonterminals[s]

    def _spine(self, n: int) -> list:
        """The alternatives of kept ``n`` with its right spine read as one lexeme: rules ``n -> α n``
        (``α`` regular, never empty) become a prefix ``P = α (gap α)*`` of the others, ``n -> P γ
        | γ`` for each other alternative ``γ`` (the module docstring); each alternative a list of
        symbols, ``P`` as ``("spine", tree, name)``. Unchanged without such rules."""
        alts = self.alts.get(n, [])
        alpha, gamma = [], []
        for rhs in alts:
            if len(rhs) >= 2 and rhs[-1] == n and rhs.count(n) == 1 and all(
                    (s < 0 and self.term_ok[-1 - s]) or s in self.tree for s in rhs[:-1]):
                alpha.append(rhs[:-1])
            elif list(rhs) != [n]:
                gamma.append(list(rhs))
        if not alpha or not gamma:
            return [list(rhs) for rhs in alts]
        a = _alt([self._seq(x) for x in alpha])
        tree = _simplify(_seq([a, ("rep", _seq([self.gap, a]) if self.gap else a, 0, None)]))
        try:
            if self.is_nullable(tree):
                return [list(rhs) for rhs in alts]
            self.render(tree)
        except (_TooBig, RecursionError):
            return [list(rhs) for rhs in alts]
        head = ("spine", tree, "(" + " | ".join(" ".join(self._name(s) for s in x) for x in alpha) + ")+")
        return [alt for g in gamma for alt in ([head] + g, g)]

    def _classify(self, n: int):
        """The regex tree of ``n`` if it is regular (its callees already classified), else None."""
        alpha, beta, gamma = [], [], []
        for rhs in self.alts.get(n, ()):
            if any(s < 0 and not self.term_ok[-1 - s] for s in rhs):
                return None
            if any(s >= 0 and s != n and s not in self.tree for s in rhs):
                return None
            k = rhs.count(n)
            if k == 0:
                gamma.append(self._seq(rhs))
            elif k > 1:
                return None
            elif len(rhs) == 1:
                continue  # N -> N
            elif rhs[0] == n:
                beta.append(self._seq(rhs[1:]))
            elif rhs[-1] == n:
                alpha.append(self._seq(rhs[:-1]))
            else:
                return None
        if not gamma:
            return None
        g = self.gap
        parts = []
        if alpha:
            parts.append(("rep", _seq([_alt(alpha)] + ([g] if g else [])), 0, None))
        parts.append(_alt(gamma))
        if beta:
            parts.append(("rep", _seq(([g] if g else []) + [_alt(beta)]), 0, None))
        return _seq(parts)

    # ------------------------------------------------------------ rewrite
    def run(self, CFG):
        cfg = self.cfg
        if not all(self.term_ok[t] for t in cfg.ignore):
            return cfg  # an ignored lexeme that cannot sit inside a regex: no gaps to write
        if cfg.ignore and any(m != CUT for m in ignore_modes(cfg.patterns, cfg.ignore, cfg.terminals,
                                                             refuse=False).values()):
            return cfg  # one that ends only where Lark's match does (a comment): not inside a regex
        for comp in self._sccs():
            if len(comp) != 1:
                continue
            n = comp[0]
            try:  # a tree nested past Python's recursion limit is too big as well
                tree = self._classify(n)
                if tree is None:
                    continue
                self.tree[n] = tree = _simplify(tree)
                self.nullable[n] = self.is_nullable(tree)
                self.render(("n", n))
                if self.nullable[n]:
                    if self._nonempty_of(n) is None:
                        raise _TooBig  # only the empty string: keep the rule (N -> ε)
                    self.render(("ne", n))
            except (_TooBig, RecursionError):
                self.tree.pop(n, None)
                self.text.pop((n, False), None)
                self.text.pop((n, True), None)
                continue
        keep = [n for n in sorted(self.reach) if n not in self.tree]
        segments = {n: [self._segments(rhs) for rhs in self._spine(n)] for n in keep}
        items = [x for segs in segments.values() for rhs in segs for x in rhs]
        if not self.tree and not any(x[0] == "run" for x in items):
            return cfg
        users = {x[1] for x in items if x[0] == "sym" and x[1] in self.tree}
        if cfg.start in self.tree:
            users.add(cfg.start)
        lexeme = {}                 # maximal regular nonterminal -> new terminal's regex
        for n in users:
            lexeme[n] = self.text[(n, self.nullable[n])][0]
        # kept nonterminals: the unregular ones, the start, and nullable maximal ones (N -> T | ε)
        kept = keep + sorted(n for n in users if n == cfg.start or self.nullable[n])
        nt_id = {n: i for i, n in enumerate([cfg.start] + [n for n in kept if n != cfg.start])}
        names, pats, tid = [], [], {}
        taken = set(cfg.terminals)

        def term(key, name, pat):
            if key not in tid:
                while name in taken and key[0] != "t":
                    name += "_"
                taken.add(name)
                tid[key] = len(names)
                names.append(name)
                pats.append(pat)
            return -1 - tid[key]

        def item(x):
            if x[0] == "run":
                return term(("r", x[1]), x[2], x[3])
            s = x[1]
            if s < 0:
                return term(("t", s), cfg.terminals[-1 - s], cfg.patterns[-1 - s])
            if s in nt_id:
                return nt_id[s]
            return term(("n", s), cfg.nonterminals[s], lexeme[s])
        rules = []
        for n in nt_id:
            if n in lexeme:
                rules.append((nt_id[n], (term(("n", n), cfg.nonterminals[n], lexeme[n]),)))
                if self.nullable[n]:
                    rules.append((nt_id[n], ()))
            else:
                rules.extend((nt_id[n], tuple(item(x) for x in rhs)) for rhs in segments[n])
        ignore = [-1 - term(("t", -1 - t), cfg.terminals[t], cfg.patterns[t]) for t in cfg.ignore]
        for key, i in tid.items():
            if key[0] != "t":
                try:
                    parse_regex(pats[i])
                except (RegexSyntaxError, UnsupportedRegexError):  # pragma: no cover - by construction
                    return cfg
        nts = [None] * len(nt_id)
        for n, i in nt_id.items():
            nts[i] = cfg.nonterminals[n]
        if ignore and any(m != CUT for m in ignore_modes(pats, ignore, names, refuse=False).values()):
            # a new lexeme may start with a gap (a nullable piece before it: '(x)?(?:NEWLINE)*z'), so
            # an ignored terminal that no original terminal could continue may now be followed by
            # what continues it: it would no longer end anywhere (the reading the gaps inside the
            # regexes rest on), or could not be followed at all; keep the rules as they are
            return cfg
        shortest = [tid[("t", -1 - t)] for t in cfg.shortest if ("t", -1 - t) in tid]
        return CFG(nts, names, pats, rules, 0, ignore, shortest)

    def _segments(self, rhs) -> list:
        """A kept rule's symbols, each maximal run of two or more regular ones (terminals and
        regular nonterminals) that cannot be empty as one ``("run", tree, name, regex)``."""
        out, run = [], []

        def flush():
            if len(run) >= 2 and self.runs:
                tree = _simplify(self._seq(run))
                if not self.is_nullable(tree):
                    try:
                        rx = self.render(tree)[0]
                    except (_TooBig, RecursionError):
                        rx = None
                    if rx is not None:
                        out.append(("run", tree, " ".join(self._name(s) for s in run), rx))
                        run.clear()
                        return
            out.extend(("run", s[1], s[2], self.render(s[1])[0]) if isinstance(s, tuple) else ("sym", s)
                       for s in run)
            run.clear()
        for s in rhs:
            if isinstance(s, tuple) or (s < 0 and self.term_ok[-1 - s]) or s in self.tree:
                run.append(s)
            else:
                flush()
                out.append(("sym", s))
        flush()
        return out


def _empty(t) -> bool:
    """Whether a :mod:`~hf_constrained.regex_parser` tree matches nothing at all."""
    kind = t[0]
    if kind == "cls":
        return not t[1]
    if kind == "cat":
        return any(_empty(x) for x in t[1])
    if kind == "alt":
        return all(_empty(x) for x in t[1])
    if kind == "rep":
        return t[2] > 0 and _empty(t[1])
    return False
