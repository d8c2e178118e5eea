"""How the configuration table's cells are computed (the costly part of a mask walk).

:class:`CellFilling` is the half of :class:`~.configs.ConfigAutomaton` that
computes transitions: a configuration's *plan* (its lanes: the lexemes in
progress and those its boundary nodes may start, and the lexer's step for
them, :mod:`.lexer`), then a cell, a byte class's successor, from its plan's
column: lanes that accept end their lexemes (scans, merged into a parser node
later; an ignored lexeme returns to its node), lanes that go on stay. A walk
over the vocabulary trie fills only the cells it reads (:meth:`CellFilling.fill`),
a column at a time (every byte class of the column gets the same successor), and
:meth:`CellFilling.expand` fills a whole row.

>>> from hf_constrained.grammar.cfg import from_lark
>>> from hf_constrained.grammar.configs import ConfigAutomaton
>>> a = ConfigAutomaton([from_lark('start: "a" "b" | "a" "c"')])
>>> q, ka = a.starts[0], int(a.byte_class[ord("a")])
>>> a.fill([q], [ka])
>>> q2 = int(a.table[q, ka])
>>> bool(a.expanded[q]), q2 > 0, int(a.table[q, int(a.byte_class[ord("b")])])   # -1: not computed
(False, True, -1)
>>> a.expand(q2)
>>> [bool(a.accepting[a.step(q2, ord(c))]) for c in "bca"]
[True, True, False]
"""

from __future__ import annotations

import numpy as np

from ..constraint import DEAD
from . import lexer

#: a configuration key's pairs ((slot, lexer state) of a lexeme in progress, (node, terminal)
#: of a pending scan) are packed into one int, ``first << PAIR_SHIFT | second``: sorting the
#: ints sorts the pairs, and a key is then a tuple of tuples of ints, two levels, that the
#: cyclic collector stops tracking within its two young generations (see :meth:`.configs.ConfigAutomaton._intern`)
PAIR_SHIFT = 32
PAIR_LOW = (1 << PAIR_SHIFT) - 1


def pack(first: int, second: int) -> int:
    """One int for the pair ``(first, second)`` of a configuration key (``second`` < 2**32).

    >>> pack(3, 7) == 3 << 32 | 7, unpack(pack(3, 7)), sorted([pack(2, 9), pack(1, 10)]) == [pack(1, 10), pack(2, 9)]
    (True, (3, 7), True)
    """
    return first << PAIR_SHIFT | second


def unpack(x: int) -> tuple:
    """The pair packed by :func:`pack`."""
    return x >> PAIR_SHIFT, x & PAIR_LOW


class CellFilling:
    """Plans and cells of :class:`~.configs.ConfigAutomaton` (a mixin: it reads the
    automaton's interning tables, lexer and parser)."""

    def _goes_on(self, s: int) -> bool:
        """Whether DFA state ``s`` can read another byte (else the lexeme is over)."""
        got = self._continues.get(s)
        if got is None:
            self.lexer.expand(s)
            got = self._continues[s] = bool(self.lexer.table[s].any())
        return got

    def _node_lanes(self, n: int) -> tuple:
        """The slots, then the lexer start states, of the lexemes that may start at parser node
        ``n``, in one flat tuple of ints (half of each: one object for the collector's youngest
        generation, where a pair of tuples made three)."""
        got = self._lanes.get(n)
        if got is None:
            p = self.parser
            slots, states = [], []
            term_start = self._term_start
            for t in p.expected(n):
                slots.append(self._slot(n, t, False))
                states.append(term_start[t])
            for t in p.ignore[p.grammar[n]]:
                slots.append(self._slot(n, t, True))
                states.append(term_start[t])
            got = self._lanes[n] = (*slots, *states)
        return got

    def _plan(self, cid: int) -> tuple:
        """What filling ``cid``'s row needs: ``(canon,)`` for a configuration with the content
        of an earlier one (its cells are copied), else ``(*slots, successor of the first space
        or None, column of each byte class, columns, classes of each column)``, lane ``i``'s slot
        at ``plan[i]`` (one flat tuple: one object for the cyclic collector's youngest generation,
        not two), ``guards`` that of :meth:`_guarded_lanes`; for the latter, ``_left[cid]``
        counts the columns whose cells are still to fill."""
        got = self._plans.get(cid)
        if got is None:
            closed = self._closed_key(cid)
            canon = self._by_closed[closed]
            if canon != cid:
                got = (canon,)
            else:
                boundary, threads, strip, _ = closed
                slots, states = [], []
                for x in threads:                   # packed (slot, lexer state)
                    slots.append(x >> PAIR_SHIFT)
                    states.append(x & PAIR_LOW)
                for n in boundary:
                    lanes = self._node_lanes(n)
                    h = len(lanes) >> 1
                    slots += lanes[:h]
                    states += lanes[h:]
                guards = self._guarded_lanes(threads, slots, states) if self._longest_slots else None
                inv, columns, classes = self._lexer_moves(tuple(states)) if states else self._no_lanes
                left = len(columns)
                strip_to = None
                if strip:  # decode() drops the text's first space: reading it changes nothing
                    strip_to = self._intern(boundary, threads, False)
                    self.table[cid, self._space_class] = strip_to
                    if type(classes[inv[self._space_class]]) is int:   # a column of the space alone
                        left -= 1
                self._left[cid] = left
                got = (*slots, guards, strip_to, inv, columns, classes)   # tuples: see _intern
            self._plans[cid] = got
        return got

    def _guarded_lanes(self, threads: tuple, slots: list, states: list):
        """Add the lanes that start where an ignored lexeme of a :data:`.lexeme_ends.LONGEST` slot
        ends: it has matched (its thread is in an accepting lexer state) and ends only if the
        next byte stops it, so its node's lanes read that byte only in a column where the
        thread is not live. Returns ``{lane: the thread's lane}`` for them (threads are the
        first lanes), or None."""
        guards = None
        longest, acc = self._longest_slots, self.lexer.accepting
        for i, x in enumerate(threads):
            sl = x >> PAIR_SHIFT
            if sl in longest and acc[x & PAIR_LOW]:
                lanes = self._node_lanes(self._slots[sl] >> (PAIR_SHIFT + 1))
                h = len(lanes) >> 1
                if guards is None:
                    guards = {}
                for j in range(len(slots), len(slots) + h):
                    guards[j] = i
                slots += lanes[:h]
                states += lanes[h:]
        return guards

    def _fill_column(self, cid: int, col: int, plan: tuple) -> None:
        """The successor of ``cid`` for every byte class of lexer column ``col`` (then one
        column fewer to fill: the row is complete, ``expanded``, when none is left)."""
        slots, strip_to, columns, classes = plan, plan[-4], plan[-2], plan[-1]   # lane i's slot: plan[i]
        nxt = DEAD
        if columns[col]:
            slot_of = self._slots
            keep, scans, back = [], [], []
            shift, shift1 = PAIR_SHIFT, PAIR_SHIFT + 1
            longest, shortest, guards = self._longest_slots, self._shortest_slots, plan[-5]
            live = set(columns[col][0::4]) if guards is not None else ()
            it = iter(columns[col])                 # flat (lane, next state, accepts, goes on): lexer.moves
            for i, s2, a, g in zip(it, it, it, it):
                if guards is not None and guards.get(i, -1) in live:
                    continue                        # the ignored lexeme before it goes on: no start
                sl = slots[i]
                if a:
                    x = slot_of[sl]                 # pack(node, term) << 1 | ignore: configs._slot
                    if x & 1:
                        if not (g and sl in longest):   # a LONGEST one ends where the next byte stops it
                            back.append(x >> shift1)
                    else:
                        scans.append(x >> 1)        # pack(node, term)
                    if shortest and sl in shortest:
                        g = 0                       # a SHORTEST one ends at its first match
                if g and not (longest and sl in longest and not self._ignore_live(sl, s2)):
                    keep.append(sl << shift | s2)
            nxt = self._intern(_canon(back), _canon(keep), False, _canon(scans))
        row = self.table[cid]               # after _intern, which may grow the table
        row[classes[col]] = nxt             # the column's classes: an int, or an index array
        if strip_to is not None:
            row[self._space_class] = strip_to
        left = self._left[cid] - 1
        if left:
            self._left[cid] = left
        else:                               # the last column: the row is complete
            del self._left[cid]
            self.expanded[cid] = True
            self._plans.pop(cid, None)

    def _fill_cell(self, cid: int, k: int) -> None:
        plan = self._plan(cid)
        if len(plan) == 1:  # the same content as an earlier configuration: the same cells
            canon = plan[0]
            if self.table[canon, k] < 0:
                self._fill_cell(canon, k)
            self.table[cid] = self.table[canon]
            if self.table[cid].min() >= 0:
                self.expanded[cid] = True
                self._plans.pop(cid, None)
        else:
            self._fill_column(cid, int(plan[-3][k]), plan)

    def fill(self, cids, classes) -> None:
        """Compute the cells ``table[cids[i], classes[i]]`` (the others of a row wait until a
        walk reads them: most successors of a configuration lead to no token)."""
        with self._lock:
            n = self.n_classes
            if len(cids) <= self.FILL_SMALL:   # a narrow trie level's few cells: sorted on Python ints
                flats = sorted({c * n + k for c, k in zip(np.asarray(cids).tolist(), np.asarray(classes).tolist())})
            else:
                flats = np.unique(np.asarray(cids, dtype=np.int64) * n + np.asarray(classes)).tolist()
            for flat in flats:
                cid, k = divmod(flat, n)
                if self.table.item(cid, k) < 0:
                    self._fill_cell(cid, k)

    #: at most this many cells to fill are sorted without numpy (``np.unique`` costs ~10 µs)
    FILL_SMALL = 64

    def expand(self, cid: int) -> None:
        """Compute the whole transition row of configuration ``cid`` (idempotent)."""
        with self._lock:
            if self.expanded[cid]:
                return
            plan = self._plan(cid)
            if len(plan) == 1:
                self.expand(plan[0])
                self.table[cid] = self.table[plan[0]]
                self.expanded[cid] = True
                self._plans.pop(cid, None)
            else:
                inv = plan[-3]
                for k in range(self.n_classes):
                    if self.table[cid, k] < 0:
                        self._fill_column(cid, int(inv[k]), plan)   # the last one marks the row expanded
                assert self.expanded[cid], "a row's column count went wrong"

    #: lane-state tuples whose lexer step is kept (see _lexer_moves); past it the memo restarts
    MOVES_MEMO = 50_000

    def _lexer_moves(self, states: tuple) -> tuple:
        """One byte of the lexer for lanes in DFA ``states``: ``(column of each byte class,
        columns, classes of each column)``, a column being the ``(lane, next state, accepts,
        goes on)`` of its live lanes (flat: :func:`.lexer.moves`) and its classes an int (a
        column of one class) or an index array (:func:`column_classes`). It depends on the
        lanes' states alone, and configurations whose nodes expect the same terminals share it,
        so it is kept per tuple (the numpy work of a row; ``_moves`` holds the step itself)."""
        got = self._steps.get(states)
        if got is None:
            inv, columns = step = lexer.lexer_step(self.lexer, self._goes_on, states, self._live_rows,
                                                   self._column_memo)
            got = (inv, columns, column_classes(inv, len(columns)))
            if len(self._steps) >= self.MOVES_MEMO:
                self._steps.clear()
                self._moves.clear()
                self._column_memo.clear()
            self._steps[states] = got
            self._moves[states] = step
        return got

    def expand_many(self, cids) -> None:
        for c in np.unique(np.asarray(cids)).tolist():
            if not self.expanded[c]:
                self.expand(c)


def column_classes(inv: np.ndarray, n_columns: int) -> tuple:
    """The byte classes of each of ``n_columns`` columns, given each class's column ``inv``:
    an int for a column of one class (a scalar store), else an index array (a fancy-index
    store), instead of the row-wide ``inv == col`` comparison per cell.

    >>> column_classes(np.array([1, 0, 1, 2]), 3)
    (1, array([0, 2]), 3)
    """
    order = np.argsort(inv, kind="stable")
    bounds = np.searchsorted(inv[order], np.arange(n_columns + 1)).tolist()
    out = []
    for a, b in zip(bounds, bounds[1:]):
        out.append(int(order[a]) if b - a == 1 else order[a:b])
    return tuple(out)


def _canon(xs) -> tuple:
    """The canonical form of a set of ints or int tuples in a configuration key: sorted,
    without repeats, as a tuple (see :meth:`~.configs.ConfigAutomaton._intern`).

    >>> _canon([3, 1, 3]), _canon([(2, 5), (1, 9), (2, 5)]), _canon([])
    ((1, 3), ((1, 9), (2, 5)), ())
    """
    if len(xs) < 2:
        return tuple(xs)
    return tuple(sorted(set(xs)))
