"""Independent oracles for the grammar tests (no code shared with hf_constrained.grammar).

``sentences(grammar_text, alphabet, n)``: every sentence of length <= n over
``alphabet``, by dynamic programming over lengths on the Lark grammar's
compiled rules, with terminal languages enumerated by ``re.fullmatch`` and
``%ignore`` lexemes inserted where the scannerless semantics allows them, each
ending anywhere its regex matches: the engine's reading of an ignored terminal
it may cut anywhere (``grammar/lexeme_ends.py``'s CUT, what the tests that use this
oracle ignore); comments, which end where Lark's match does, are checked against
Lark itself (``test_grammar_lexeme_ends.py``).
"""

from __future__ import annotations

import regex

from lark import Lark
from lark.load_grammar import load_grammar


def _matches(pattern: str, flags: int, alphabet: str, n: int) -> set:
    """Non-empty strings <= n over alphabet that fullmatch ``pattern`` (``regex`` partial
    matching prunes every string that is not a prefix of a match)."""
    rx = regex.compile(pattern, flags)
    out, frontier = set(), [""]
    for _ in range(n):
        nxt = []
        for s in frontier:
            for ch in alphabet:
                w = s + ch
                if rx.fullmatch(w, partial=True):
                    nxt.append(w)
                    if rx.fullmatch(w):
                        out.add(w)
        frontier = nxt
    return out


def sentences(text: str, alphabet: str, n: int, start: str = "start") -> set:
    g, _ = load_grammar(text, "<g>", [], False)
    terms, rules, ignore = g.compile([start], set())
    lang = {t.name: _matches(t.pattern.to_regexp(), regex.IGNORECASE if "i" in t.pattern.flags else 0,
                             alphabet, n) for t in terms}
    ign = set().union(*(lang[i] for i in ignore)) if ignore else set()
    # IG[k]: concatenations of ignored lexemes of total length k (k = 0: the empty string)
    ig = [{""}] + [set() for _ in range(n)]
    for k in range(1, n + 1):
        for s in ign:
            if len(s) <= k:
                ig[k] |= {s + r for r in ig[k - len(s)]}

    def with_ws(words):  # ignored lexemes before a terminal
        out = set()
        for w in words:
            for k in range(0, n - len(w) + 1):
                out |= {r + w for r in ig[k]}
        return out
    tl = {name: with_ws(v) for name, v in lang.items()}
    by = {}
    for r in rules:
        by.setdefault(r.origin.name, []).append([s.name for s in r.expansion])
    L = {nt: set() for nt in by}  # all strings <= n derived

    def seq(symbols):
        cur = {""}
        for s in symbols:
            part = tl[s] if s in tl else L[s]
            cur = {a + b for a in cur for b in part if len(a) + len(b) <= n}
            if not cur:
                break
        return cur
    changed = True
    while changed:
        changed = False
        for nt, alts in by.items():
            for alt in alts:
                new = seq(alt) - L[nt]
                if new:
                    L[nt] |= new
                    changed = True
    return {a + r for a in L[start] for k in range(n + 1) for r in ig[k] if len(a) + len(r) <= n}


def prefixes(sents) -> set:
    return {s[:i] for s in sents for i in range(len(s) + 1)}


def lark_parser(text: str, start: str = "start") -> Lark:
    return Lark(text, parser="earley", lexer="dynamic_complete", start=start)


def lark_accepts(parser: Lark, s: str) -> bool:
    try:
        parser.parse(s)
        return True
    except RuntimeError as e:   # Lark 1.3 found more than one complete parse and refuses to pick
        return "multiple start symbol items" in str(e)
    except Exception:
        return False
