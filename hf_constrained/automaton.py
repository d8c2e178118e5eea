"""Byte-level automata: syntax tree -> positions with counters -> lazily determinised DFA.

No NFA is materialised. An NFA state is a *position*: a character class of
the syntax tree, the bytes of the current UTF-8 character read so far, and one
counter per enclosing counted repetition, so ``[a-z]{1,64}`` costs one leaf
and a counter rather than 64 copies (the positions, their syntax-tree nodes and
first/follow sets are :mod:`hf_constrained.forest`'s; this module determinises
them). Positions and the DFA states (sets of positions) are both created on
first use: a state's row of transitions is computed the first time something
walks out of it, so the cost follows what generation visits, not the size of
the pattern (a JSON Schema regex can expand to 10^5 copies and have an
astronomically large full DFA). Several patterns share one automaton, each
with its own start state, so a batch with one pattern per prompt still uses a
single transition table.

States are small integers. State ``0`` is the dead state (no match possible
any more). Every other state can still reach a full match, because subtrees
with an empty language are pruned before any position exists.

>>> dfa = LazyDFA.from_patterns([r"ab|ac"])
>>> s = dfa.walk(dfa.starts[0], b"a")
>>> dfa.is_accepting(dfa.walk(s, b"c")), dfa.walk(s, b"x")
(True, 0)
"""

from __future__ import annotations

import numpy as np

from ._gc import gc_paused
from .errors import EmptyLanguageError, StateLimitError
from .forest import END, _Forest
from .regex_parser import parse

DEFAULT_MAX_STATES = 200_000
DEFAULT_MAX_NFA_STATES = 1_000_000
#: the DFA states together may hold this many positions per allowed position
#: (``max_nfa_states``): bounds the memory of the state sets (about 30 bytes each)
MEMBERS_PER_POSITION = 8
from .constraint import DEAD  # noqa: E402  (one definition of the special states)


# ---------------------------------------------------------------- lazy DFA
class LazyDFA:
    """A DFA over byte classes whose states are determinised on first use.

    ``table[state, byte_class[b]]`` is the next state, ``-1`` while the row is
    not computed yet (:meth:`expand` fills it). ``starts[i]`` is the start state
    of the i-th pattern. A DFA state is a set of positions (see
    :class:`~hf_constrained.forest._Forest`).

    With ``strip_leading_space=True`` the start states accept one extra leading
    space byte that is dropped before matching; this models tokenizers whose
    ``decode`` strips the first space of the text (SentencePiece ``▁Word``).

    ``max_states`` bounds the DFA states and ``max_nfa_states`` the distinct
    positions (leaf, byte, counters) materialised; both are only reached as
    generation walks, and raise :class:`StateLimitError`.

    ``share_subtrees=False`` builds a copy of a repeated subtree at each place instead
    of one shared definition (see :class:`~hf_constrained.forest._Forest`): the same
    automaton, a larger build.

    >>> tree = parse("(?:ab|cd)x(?:ab|cd)")
    >>> a, b = LazyDFA([tree]), LazyDFA([tree], share_subtrees=False)
    >>> len(a._forest.kind) < len(b._forest.kind), a.explore(100), b.explore(100)
    (True, True, True)
    >>> a.num_states == b.num_states and bool((a.table[:a.num_states] == b.table[:b.num_states]).all())
    True
    """

    def __init__(self, trees, *, strip_leading_space: bool = False,
                 max_states: int = DEFAULT_MAX_STATES, max_nfa_states: int = DEFAULT_MAX_NFA_STATES,
                 share_subtrees: bool = True):
        self.max_states = int(max_states)
        self.max_nfa_states = int(max_nfa_states)
        self.strip_leading_space = bool(strip_leading_space)
        forest = self._forest = _Forest(share=share_subtrees)
        roots = [forest.add(t) for t in trees]
        bounds = {0, 256}
        for trie in forest.tries:
            for trs in trie:
                for lo, hi, _ in trs:
                    bounds.add(lo)
                    bounds.add(hi + 1)
        if strip_leading_space:
            bounds.update((0x20, 0x21))
        edges = sorted(bounds)
        self.byte_class = np.repeat(np.arange(len(edges) - 1, dtype=np.int32), np.diff(edges))
        self.n_classes = len(edges) - 1
        self._space_class = int(self.byte_class[0x20])
        self._class_list = self.byte_class.tolist()
        self._trie_edges: dict = {}  # (leaf trie, node) -> _class_edges
        self._pos_ids: dict = {END: 0}
        self._pos_keys: list = [END]
        self._pos_rows: list = [()]
        self._after_ids: dict = {}
        cap = 64
        self.table = np.full((cap, self.n_classes), -1, dtype=np.int32)
        self.accepting = np.zeros(cap, dtype=bool)
        self.expanded = np.zeros(cap, dtype=bool)
        self._keys: list = []
        self._ids: dict = {}
        self._members = 0  # positions held by all DFA states together (memory guard)
        self._reps: dict = {}  # (state, depth) -> mask_representative
        dead = self._intern(frozenset(), False)
        assert dead == DEAD
        self.table[DEAD] = DEAD
        self.expanded[DEAD] = True
        self.starts = []
        for r in roots:
            if r is None:
                self.starts.append(DEAD)
                continue
            members = [self._pos(p) for p in forest.first(r, (), ())]
            if forest.nullable[r]:
                members.append(0)
            self.starts.append(self._intern(frozenset(members), self.strip_leading_space))

    @classmethod
    def from_patterns(cls, patterns, *, max_states: int = DEFAULT_MAX_STATES,
                      max_nfa_states: int = DEFAULT_MAX_NFA_STATES,
                      strip_leading_space: bool = False) -> "LazyDFA":
        """Parse and compile ``patterns`` (a list of regex strings) into one DFA.

        Raises :class:`EmptyLanguageError` if a pattern matches nothing.
        """
        with gc_paused():
            trees = [parse(p) for p in patterns]
            dfa = cls(trees, strip_leading_space=strip_leading_space, max_states=max_states,
                      max_nfa_states=max_nfa_states)
            # the trees die now, by reference counting: alive when the collector is enabled
            # again, the first collection would walk each of their tuples (issue #12, part 23)
            del trees
        for p, s in zip(patterns, dfa.starts):
            if s == DEAD:
                raise EmptyLanguageError(f"the pattern {_short(p)} matches no string at all")
        return dfa

    # -- positions -------------------------------------------------------
    def _pos(self, key) -> int:
        pid = self._pos_ids.get(key)
        if pid is None:
            pid = len(self._pos_keys)
            if pid >= self.max_nfa_states:
                raise StateLimitError(
                    f"the automaton needs more than max_nfa_states={self.max_nfa_states} pattern "
                    "positions (a very long pattern, e.g. hundreds of thousands of choices, or nested "
                    "counted repetitions such as (a{0,1000}){0,1000}, which track many counter "
                    "combinations at once); simplify the pattern or raise max_nfa_states"
                )
            self._pos_ids[key] = pid
            self._pos_keys.append(key)
            self._pos_rows.append(None)
        return pid

    def _row(self, pid: int):
        """``(first class, last class, target positions)`` triples of one position."""
        row = self._pos_rows[pid]
        if row is None:
            leaf, k, ctx, stack = self._pos_keys[pid]
            tid = self._forest.trie[leaf]
            edges = self._trie_edges.get((tid, k))
            if edges is None:
                edges = self._trie_edges[(tid, k)] = self._class_edges(tid, k)
            row = []
            after = None
            for clo, chi, tgt in edges:
                if tgt >= 0:
                    targets = (self._pos((leaf, tgt, ctx, stack)),)
                else:
                    if after is None:
                        after = self._after_ids.get((leaf, ctx, stack))
                        if after is None:
                            after = tuple(self._pos(p) if p is not END else 0
                                          for p in self._forest.after(leaf, ctx, stack))
                            self._after_ids[(leaf, ctx, stack)] = after
                    targets = after
                row.append((clo, chi, targets))
            row = self._pos_rows[pid] = tuple(row)
        return row

    def _class_edges(self, tid: int, k: int) -> tuple:
        """One node of a leaf's UTF-8 trie over byte classes: ``(first class, last class,
        next node or -1)``, in the trie's order (shared by every position at that node)."""
        bc = self._class_list
        return tuple((bc[lo], bc[hi], tgt) for lo, hi, tgt in self._forest.tries[tid][k])

    # -- determinisation ---------------------------------------------
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
            table = np.empty((2 * grow, self.n_classes), dtype=np.int32)  # each byte written once
            table[:grow] = self.table
            table[grow:] = -1
            self.table = table
            self.accepting = np.concatenate([self.accepting, np.zeros(grow, bool)])
            self.expanded = np.concatenate([self.expanded, np.zeros(grow, bool)])
        self._members += len(key_set)
        if self._members > MEMBERS_PER_POSITION * self.max_nfa_states:
            raise StateLimitError(
                f"the automaton's {sid} states hold more than {MEMBERS_PER_POSITION} x "
                f"max_nfa_states={self.max_nfa_states} pattern positions in total (many large "
                "states, e.g. from nested counted repetitions); simplify the pattern or raise max_nfa_states"
            )
        self._keys.append(key)
        self._ids[key] = sid
        self.accepting[sid] = 0 in key_set
        return sid

    def unstripped(self, sid: int) -> int:
        """The state with the same pattern positions as ``sid`` but without the tokenizer's
        first-space rule (``strip_leading_space``), for text decoded mid-sequence.

        >>> dfa = LazyDFA.from_patterns([r" ?[0-9]+"], strip_leading_space=True)
        >>> dfa.unstripped(dfa.unstripped(dfa.starts[0])) == dfa.unstripped(dfa.starts[0])
        True
        """
        return self._intern(self._keys[sid][0], False)

    def mask_representative(self, sid: int, depth: int) -> int:
        """A state that reads exactly the same byte strings of at most ``depth`` bytes as
        ``sid`` (so it allows the same tokens when no token is longer), with every
        counter that such a string cannot bring to a bound replaced by one value.

        Reading ``depth`` bytes completes at most ``depth`` copies of a repetition, so
        a counter ``c`` of ``x{lo,hi}`` only matters through ``lo - c`` and ``hi - c``
        clamped to ``depth + 1``: ``c >= lo`` with ``hi - c > depth`` behaves as ``lo``,
        ``lo - c > depth`` as ``0``. The states of a long counted string
        (``[a-z]{0,1000}``) then share one token mask instead of one each.

        >>> dfa = LazyDFA.from_patterns([r"[a-z]{0,1000}!"])
        >>> s5, s6 = dfa.walk(dfa.starts[0], b"abcde"), dfa.walk(dfa.starts[0], b"abcdef")
        >>> s5 != s6, dfa.mask_representative(s5, 8) == dfa.mask_representative(s6, 8)
        (True, True)
        >>> near_end = dfa.walk(dfa.starts[0], b"a" * 995)  # 5 letters left: kept
        >>> dfa.mask_representative(near_end, 8) == near_end
        True
        """
        key = (sid, depth)
        got = self._reps.get(key)
        if got is not None:
            return got
        members, strip = self._keys[sid]
        forest, out, changed = self._forest, [], False
        for pid in members:
            pos = self._pos_keys[pid]
            if pos is not END and pos[2]:
                leaf, k, ctx, stack = pos
                new = []
                for r, c in zip(forest.counted_path(leaf, stack), ctx):
                    lo, hi = forest.lo[r], forest.hi[r]
                    if lo - c > depth:
                        c = 0
                    elif c >= lo and hi is not None and hi - c > depth:
                        c = lo
                    new.append(c)
                new = tuple(new)
                if new != ctx:
                    pid = self._pos((leaf, k, new, stack))
                    changed = True
            out.append(pid)
        got = self._intern(frozenset(out), strip) if changed else sid
        self._reps[key] = got
        return got

    def expand(self, sid: int) -> None:
        """Compute the transition row of state ``sid`` (idempotent)."""
        if self.expanded[sid]:
            return
        members, strip = self._keys[sid]
        # The members' (first class, last class, targets) triples cut the classes into
        # segments with one target set each: one set union and one intern per segment,
        # not per byte class (a string body's one ASCII range spans dozens of classes).
        trips = []
        for p in members:
            trips.extend(self._row(p))
        row = np.zeros(self.n_classes, dtype=np.int32)
        if len(trips) == 1:
            clo, chi, ts = trips[0]
            row[clo:chi + 1] = self._intern(frozenset(ts), False)
        elif trips:
            cuts = sorted({c for clo, chi, _ in trips for c in (clo, chi + 1)})
            at = {c: i for i, c in enumerate(cuts)}
            segs: list = [None] * (len(cuts) - 1)
            for clo, chi, ts in trips:
                for i in range(at[clo], at[chi + 1]):
                    got = segs[i]
                    if got is None:
                        segs[i] = ts
                    elif type(got) is set:
                        got.update(ts)
                    else:
                        segs[i] = set(got).union(ts)
            intern = self._intern
            for i, raw in enumerate(segs):
                if raw is not None:
                    row[cuts[i]:cuts[i + 1]] = intern(frozenset(raw), False)
        if strip:
            row[self._space_class] = self._intern(members, False)
        self.table[sid] = row
        self.expanded[sid] = True

    def expand_many(self, sids) -> None:
        expanded, expand = self.expanded, self.expand
        for s in np.unique(np.asarray(sids)).tolist():
            if not expanded[s]:
                expand(s)

    def explore(self, limit: int) -> bool:
        """Determinise breadth-first from the starts, at most ``limit`` states.

        Returns True if the whole automaton fits (every state expanded).
        """
        frontier = list(dict.fromkeys(self.starts))
        seen = set(frontier)
        expand = self.expand
        i = 0
        while i < len(frontier):
            if i >= limit:
                return False
            s = frontier[i]
            i += 1
            expand(s)
            # successors in ascending order, read on Python ints (an np.unique per state
            # was a third of a constructor's 128-state probe)
            for t in sorted(set(self.table[s].tolist())):
                if t not in seen:
                    seen.add(t)
                    frontier.append(t)
        return True

    # -- persistence -----------------------------------------------------
    def export_states(self) -> dict:
        """Plain arrays describing every state found so far (for the disk cache).

        Positions are written as ``[leaf, byte, n, *counters, *calls]`` with
        ``n`` counters (END as ``[-1]``): node numbers follow the patterns, so
        they mean the same in any process.
        """
        n = self.num_states
        codes = [[-1] if key is END else [key[0], key[1], len(key[2]), *key[2], *key[3]]
                 for key in self._pos_keys]
        pos_offsets = np.zeros(len(codes) + 1, dtype=np.int64)
        np.cumsum([len(c) for c in codes], out=pos_offsets[1:])
        members = [np.array(sorted(k[0]), dtype=np.int64) for k in self._keys]
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum([len(m) for m in members], out=offsets[1:])
        return {
            "dfa_positions": np.array([x for c in codes for x in c], dtype=np.int64),
            "dfa_position_offsets": pos_offsets,
            "dfa_members": np.concatenate(members) if n else np.zeros(0, np.int64),
            "dfa_offsets": offsets,
            "dfa_strip": np.array([k[1] for k in self._keys], dtype=bool),
            "dfa_table": self.table[:n].copy(),
            "dfa_expanded": self.expanded[:n].copy(),
            "dfa_byte_class": self.byte_class.copy(),
        }

    def import_states(self, arrays: dict) -> np.ndarray:
        """Add the states of :meth:`export_states` output (same patterns) to this DFA.

        Returns the map from the exported state ids to ours. State and position
        ids differ between processes (lazy discovery order), so both are
        matched by content.
        """
        if not np.array_equal(arrays["dfa_byte_class"], self.byte_class):
            raise ValueError("cached automaton was built from different patterns")
        codes, pos_offsets = arrays["dfa_positions"].tolist(), arrays["dfa_position_offsets"].tolist()
        keys = []  # all validated before anything is interned
        for i in range(len(pos_offsets) - 1):
            code = codes[pos_offsets[i]:pos_offsets[i + 1]]
            if code == [-1]:
                keys.append(END)
            elif len(code) >= 3 and 0 <= code[2] <= len(code) - 3 and self._forest.valid_position(
                    code[0], code[1], tuple(code[3:3 + code[2]]), tuple(code[3 + code[2]:])):
                keys.append((code[0], code[1], tuple(code[3:3 + code[2]]), tuple(code[3 + code[2]:])))
            else:
                raise ValueError("cached automaton was built from different patterns")
        pos_map = np.array([0 if key is END else self._pos(key) for key in keys], dtype=np.int64)
        offsets, members, strip = arrays["dfa_offsets"], arrays["dfa_members"], arrays["dfa_strip"]
        n = len(offsets) - 1
        mapping = np.empty(n, dtype=np.int64)
        for i in range(n):
            key_set = frozenset(pos_map[members[offsets[i]:offsets[i + 1]]].tolist())
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
