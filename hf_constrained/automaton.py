"""Byte-level automata: syntax tree -> UTF-8 byte NFA -> lazily determinised DFA.

The DFA is built on demand: a state's row of transitions is computed the first
time something walks out of it, so the cost follows what generation visits,
not the size of the pattern (a JSON Schema regex can have an astronomically
large full DFA). Several patterns share one automaton, each with its own start
state, so a batch with one pattern per prompt still uses a single transition
table.

States are small integers. State ``0`` is the dead state (no match possible
any more). Every other state can still reach a full match, because NFA states
that cannot reach the accepting state are pruned before determinisation.

>>> dfa = LazyDFA.from_patterns([r"ab|ac"])
>>> s = dfa.walk(dfa.starts[0], b"a")
>>> dfa.is_accepting(dfa.walk(s, b"c")), dfa.walk(s, b"x")
(True, 0)
"""

from __future__ import annotations

import functools

import numpy as np

from .errors import EmptyLanguageError, StateLimitError
from .regex_parser import parse

DEFAULT_MAX_STATES = 200_000
DEFAULT_MAX_NFA_STATES = 1_000_000
DEAD = 0


# ---------------------------------------------------------------- UTF-8 ranges
_UTF8_BOUNDS = ((0, 0x7F), (0x80, 0x7FF), (0x800, 0xFFFF), (0x10000, 0x10FFFF))


def _encode_len(cp: int) -> int:
    return 1 if cp < 0x80 else 2 if cp < 0x800 else 3 if cp < 0x10000 else 4


def _split_utf8(lo: int, hi: int, out: list):
    """Append byte-range sequences whose union encodes exactly [lo, hi]."""
    n = _encode_len(lo)
    for i in range(1, n):
        m = (1 << (6 * i)) - 1
        if lo & ~m != hi & ~m:
            if lo & m != 0:
                _split_utf8(lo, lo | m, out)
                _split_utf8((lo | m) + 1, hi, out)
                return
            if hi & m != m:
                _split_utf8(lo, (hi & ~m) - 1, out)
                _split_utf8(hi & ~m, hi, out)
                return
    a, b = chr(lo).encode("utf-8"), chr(hi).encode("utf-8")
    out.append(tuple(zip(a, b)))


@functools.lru_cache(maxsize=4096)
def utf8_sequences(ranges: tuple) -> tuple:
    """Byte-range sequences (tuples of ``(lo, hi)`` per byte) for code-point ranges.

    >>> utf8_sequences(((0x61, 0x62), (0xE9, 0xE9)))
    (((97, 98),), ((195, 195), (169, 169)))
    """
    out: list = []
    for lo, hi in ranges:
        for blo, bhi in _UTF8_BOUNDS:
            a, b = max(lo, blo), min(hi, bhi)
            if a <= b:
                _split_utf8(a, b, out)
    return tuple(out)


# ---------------------------------------------------------------- NFA
def estimate_size(node) -> int:
    """Upper bound on the NFA states :class:`NFA` creates for ``node``."""
    kind = node[0]
    if kind == "cls":
        return sum(len(seq) for seq in utf8_sequences(node[1])) + 1
    if kind in ("cat", "alt"):
        return sum(estimate_size(x) for x in node[1]) + len(node[1]) + 1
    _, item, lo, hi = node
    copies = (lo + 1) if hi is None else max(hi, 1)
    return estimate_size(item) * copies + copies + 2


class NFA:
    """Thompson NFA over bytes with epsilon edges; one accepting state."""

    def __init__(self):
        self.eps: list[list[int]] = []
        self.trans: list[list[tuple[int, int, int]]] = []
        self.starts: list[int] = []
        self.accept = self.new()

    def new(self) -> int:
        self.eps.append([])
        self.trans.append([])
        return len(self.eps) - 1

    def add(self, node):
        """Add one pattern's tree; return its start state."""
        s = self.new()
        self._build(node, s, self.accept)
        self.starts.append(s)
        return s

    def _build(self, node, s: int, e: int):
        # Contract: adds paths s -> e spelling node's language and never adds an
        # edge into s or out of e, so callers may share s and e safely.
        kind = node[0]
        if kind == "cls":
            children: dict = {}
            for seq in utf8_sequences(node[1]):
                cur = s
                for k, (lo, hi) in enumerate(seq):
                    if k == len(seq) - 1:
                        self.trans[cur].append((lo, hi, e))
                    else:
                        key = (cur, lo, hi)
                        if key not in children:
                            children[key] = self.new()
                            self.trans[cur].append((lo, hi, children[key]))
                        cur = children[key]
        elif kind == "cat":
            items = node[1]
            if not items:
                self.eps[s].append(e)
                return
            cur = s
            for item in items[:-1]:
                nxt = self.new()
                self._build(item, cur, nxt)
                cur = nxt
            self._build(items[-1], cur, e)
        elif kind == "alt":
            for item in node[1]:
                a = self.new()
                self.eps[s].append(a)
                self._build(item, a, e)
        else:
            _, item, lo, hi = node
            cur = s
            for _ in range(lo):
                nxt = self.new()
                self._build(item, cur, nxt)
                cur = nxt
            if hi is None:
                a, b = self.new(), self.new()
                self.eps[cur].append(a)
                self.eps[a].append(e)
                self._build(item, a, b)
                self.eps[b].append(a)
            else:
                for _ in range(hi - lo):
                    a, nxt = self.new(), self.new()
                    self.eps[cur].append(a)
                    self.eps[a].append(e)
                    self._build(item, a, nxt)
                    cur = nxt
                self.eps[cur].append(e)

    def coreachable(self) -> np.ndarray:
        """Mask of states from which the accepting state can be reached."""
        n = len(self.eps)
        rev: list[list[int]] = [[] for _ in range(n)]
        for s in range(n):
            for t in self.eps[s]:
                rev[t].append(s)
            for _, _, t in self.trans[s]:
                rev[t].append(s)
        ok = np.zeros(n, dtype=bool)
        ok[self.accept] = True
        stack = [self.accept]
        while stack:
            t = stack.pop()
            for s in rev[t]:
                if not ok[s]:
                    ok[s] = True
                    stack.append(s)
        return ok


# ---------------------------------------------------------------- lazy DFA
class LazyDFA:
    """A DFA over byte classes whose states are determinised on first use.

    ``table[state, byte_class[b]]`` is the next state, ``-1`` while the row is
    not computed yet (:meth:`expand` fills it). ``starts[i]`` is the start state
    of the i-th pattern.

    With ``strip_leading_space=True`` the start states accept one extra leading
    space byte that is dropped before matching; this models tokenizers whose
    ``decode`` strips the first space of the text (SentencePiece ``▁Word``).
    """

    def __init__(self, nfa: NFA, *, strip_leading_space: bool = False,
                 max_states: int = DEFAULT_MAX_STATES):
        self.max_states = int(max_states)
        self.strip_leading_space = bool(strip_leading_space)
        self._accept = nfa.accept
        ok = nfa.coreachable()
        bounds = {0, 256}
        for trs in nfa.trans:
            for lo, hi, _ in trs:
                bounds.add(lo)
                bounds.add(hi + 1)
        if strip_leading_space:
            bounds.update((0x20, 0x21))
        edges = sorted(bounds)
        self.byte_class = np.zeros(256, dtype=np.int32)
        for c in range(len(edges) - 1):
            self.byte_class[edges[c]:edges[c + 1]] = c
        self.n_classes = len(edges) - 1
        self._space_class = int(self.byte_class[0x20])
        bc = self.byte_class
        # Transitions in class ids, restricted to useful (co-reachable) targets.
        self._ctrans = [
            [(int(bc[lo]), int(bc[hi]), t) for lo, hi, t in trs if ok[t]] if ok[s] else []
            for s, trs in enumerate(nfa.trans)
        ]
        self._eps = [[t for t in es if ok[t]] if ok[s] else [] for s, es in enumerate(nfa.eps)]
        self._important = np.array([bool(c) for c in self._ctrans], dtype=bool)
        self._important[self._accept] = True
        self._ok = ok
        cap = 64
        self.table = np.full((cap, self.n_classes), -1, dtype=np.int32)
        self.accepting = np.zeros(cap, dtype=bool)
        self.expanded = np.zeros(cap, dtype=bool)
        self._keys: list = []
        self._ids: dict = {}
        self._raw_cache: dict = {}
        dead = self._intern(frozenset(), False)
        assert dead == DEAD
        self.table[DEAD] = DEAD
        self.expanded[DEAD] = True
        self.starts = []
        for s in nfa.starts:
            closure = self._closure((s,)) if ok[s] else frozenset()
            if not closure:
                self.starts.append(DEAD)
            else:
                self.starts.append(self._intern(closure, self.strip_leading_space))

    @classmethod
    def from_patterns(cls, patterns, *, max_states: int = DEFAULT_MAX_STATES,
                      max_nfa_states: int = DEFAULT_MAX_NFA_STATES,
                      strip_leading_space: bool = False) -> "LazyDFA":
        """Parse and compile ``patterns`` (a list of regex strings) into one DFA.

        Raises :class:`EmptyLanguageError` if a pattern matches nothing and
        :class:`StateLimitError` if its NFA would exceed ``max_nfa_states``.
        """
        nfa = NFA()
        total = 0
        for p in patterns:
            tree = parse(p)
            total += estimate_size(tree)
            if total > max_nfa_states:
                raise StateLimitError(
                    f"the pattern {_short(p)} expands to more than max_nfa_states="
                    f"{max_nfa_states} automaton states (large counted repetitions such as "
                    "{1000} multiply); reduce the repetition bounds or raise max_nfa_states"
                )
            nfa.add(tree)
        dfa = cls(nfa, strip_leading_space=strip_leading_space, max_states=max_states)
        for p, s in zip(patterns, dfa.starts):
            if s == DEAD:
                raise EmptyLanguageError(f"the pattern {_short(p)} matches no string at all")
        return dfa

    # -- determinisation ---------------------------------------------
    def _closure(self, raw) -> frozenset:
        seen = set(raw)
        stack = list(raw)
        eps = self._eps
        while stack:
            s = stack.pop()
            for t in eps[s]:
                if t not in seen:
                    seen.add(t)
                    stack.append(t)
        imp = self._important
        return frozenset(s for s in seen if imp[s])

    def _intern(self, key_set: frozenset, strip: bool) -> int:
        key = (key_set, strip)
        sid = self._ids.get(key)
        if sid is not None:
            return sid
        sid = len(self._keys)
        if sid >= self.max_states:
            raise StateLimitError(
                f"the automaton needs more than max_states={self.max_states} states "
                "(patterns such as (a|b)*a(a|b){30} blow up when determinised); "
                "simplify the pattern or raise max_states"
            )
        if sid >= len(self.table):
            grow = len(self.table)
            self.table = np.concatenate([self.table, np.full((grow, self.n_classes), -1, np.int32)])
            self.accepting = np.concatenate([self.accepting, np.zeros(grow, bool)])
            self.expanded = np.concatenate([self.expanded, np.zeros(grow, bool)])
        self._keys.append(key)
        self._ids[key] = sid
        self.accepting[sid] = self._accept in key_set
        return sid

    def _target(self, raw: frozenset) -> int:
        sid = self._raw_cache.get(raw)
        if sid is None:
            closure = self._closure(raw)
            sid = self._intern(closure, False) if closure else DEAD
            self._raw_cache[raw] = sid
        return sid

    def expand(self, sid: int) -> None:
        """Compute the transition row of state ``sid`` (idempotent)."""
        if self.expanded[sid]:
            return
        nfa_set, strip = self._keys[sid]
        targets: list = [None] * self.n_classes
        for s in nfa_set:
            for clo, chi, t in self._ctrans[s]:
                for c in range(clo, chi + 1):
                    if targets[c] is None:
                        targets[c] = {t}
                    else:
                        targets[c].add(t)
        row = np.zeros(self.n_classes, dtype=np.int32)
        for c, raw in enumerate(targets):
            if raw:
                row[c] = self._target(frozenset(raw))
        if strip:
            row[self._space_class] = self._intern(nfa_set, False)
        self.table[sid] = row
        self.expanded[sid] = True

    def expand_many(self, sids) -> None:
        for s in np.unique(np.asarray(sids)):
            if not self.expanded[s]:
                self.expand(int(s))

    def explore(self, limit: int) -> bool:
        """Determinise breadth-first from the starts, at most ``limit`` states.

        Returns True if the whole automaton fits (every state expanded).
        """
        frontier = list(dict.fromkeys(self.starts))
        seen = set(frontier)
        i = 0
        while i < len(frontier):
            if i >= limit:
                return False
            s = frontier[i]
            i += 1
            self.expand(s)
            for t in np.unique(self.table[s]):
                t = int(t)
                if t not in seen:
                    seen.add(t)
                    frontier.append(t)
        return True

    # -- persistence -----------------------------------------------------
    def export_states(self) -> dict:
        """Plain arrays describing every state found so far (for the disk cache)."""
        n = self.num_states
        members = [np.array(sorted(k[0]), dtype=np.int64) for k in self._keys]
        sizes = np.fromiter((len(m) for m in members), dtype=np.int64, count=n)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        return {
            "dfa_members": np.concatenate(members) if n else np.zeros(0, np.int64),
            "dfa_offsets": offsets,
            "dfa_strip": np.array([k[1] for k in self._keys], dtype=bool),
            "dfa_table": self.table[:n].copy(),
            "dfa_expanded": self.expanded[:n].copy(),
            "dfa_byte_class": self.byte_class.copy(),
        }

    def import_states(self, arrays: dict) -> np.ndarray:
        """Add the states of :meth:`export_states` output (same patterns) to this DFA.

        Returns the map from the exported state ids to ours. State ids differ
        between processes (lazy discovery order), so states are matched by their
        NFA state sets, which are deterministic for the same patterns.
        """
        if not np.array_equal(arrays["dfa_byte_class"], self.byte_class):
            raise ValueError("cached automaton was built from different patterns")
        offsets, members, strip = arrays["dfa_offsets"], arrays["dfa_members"], arrays["dfa_strip"]
        n = len(offsets) - 1
        mapping = np.empty(n, dtype=np.int64)
        for i in range(n):
            key_set = frozenset(members[offsets[i]:offsets[i + 1]].tolist())
            mapping[i] = DEAD if not key_set else self._intern(key_set, bool(strip[i]))
        table, expanded = arrays["dfa_table"], arrays["dfa_expanded"]
        for i in np.nonzero(expanded)[0]:
            ours = mapping[i]
            if not self.expanded[ours]:
                self.table[ours] = mapping[table[i]]
                self.expanded[ours] = True
        return mapping

    # -- queries -------------------------------------------------------
    @property
    def num_states(self) -> int:
        return len(self._keys)

    def is_accepting(self, sid: int) -> bool:
        return bool(self.accepting[sid])

    def step(self, sid: int, byte: int) -> int:
        if not self.expanded[sid]:
            self.expand(sid)
        return int(self.table[sid, self.byte_class[byte]])

    def walk(self, sid: int, data: bytes) -> int:
        """State after reading ``data`` from ``sid`` (``DEAD`` once dead)."""
        for b in data:
            if sid == DEAD:
                return DEAD
            sid = self.step(sid, b)
        return sid

    def fullmatch(self, data: bytes, pattern_index: int = 0) -> bool:
        return self.is_accepting(self.walk(self.starts[pattern_index], data))


def _short(p: str) -> str:
    return repr(p) if len(p) <= 80 else repr(p[:77] + "...")
