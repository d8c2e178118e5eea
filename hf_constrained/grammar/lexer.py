"""The grammar's lexer: all terminals in one lazy byte DFA, and its step for lanes.

A configuration (:mod:`.configs`) holds *lanes*, lexemes in progress, each in a
state of one :class:`~hf_constrained.automaton.LazyDFA` that has a start state
per terminal (:func:`terminal_dfa`). Reading a byte moves every lane at once:
:func:`lexer_step` computes, for a tuple of lane states, which byte classes
act alike on all of them (the distinct columns of the lanes x classes table)
and, per such column, each live lane's next state, whether it accepts (its
lexeme may end) and whether it goes on (may read more), as one flat tuple of ints (four per live
lane: read it with :func:`moves`).

>>> dfa = terminal_dfa(["ab", "a+"], ["AB", "AS"])
>>> a, b = int(dfa.byte_class[ord("a")]), int(dfa.byte_class[ord("b")])
>>> inv, columns = lexer_step(dfa, lambda s: bool(dfa.table[s].any()), tuple(dfa.starts))
>>> [(lane, accepts, goes_on) for lane, _, accepts, goes_on in moves(columns[inv[a]])]   # flags 0/1
[(0, 0, 1), (1, 1, 1)]
>>> columns[inv[b]]
()
"""

from __future__ import annotations

import numpy as np

from ..automaton import LazyDFA
from ..errors import EmptyLanguageError
from .cfg import GrammarError

_MIX = np.random.default_rng(0x5EED).integers(1, 2 ** 62, size=4096, dtype=np.int64) | 1


def distinct_columns(moves: np.ndarray):
    """``(distinct columns as rows, index of each column's distinct one)`` of a lanes x
    classes matrix: a 1-D hash per column, verified exactly (``np.unique(axis=0)`` is
    several times slower on these small matrices)."""
    k = moves.shape[0]
    if k <= len(_MIX):
        h = moves.T.astype(np.int64) @ _MIX[:k]          # wraps around: a hash, checked below
        _, first, inv = np.unique(h, return_index=True, return_inverse=True)
        inv = np.asarray(inv).reshape(-1)
        if np.array_equal(moves[:, first[inv]], moves):
            return moves[:, first].T, inv
    cols, inv = np.unique(moves.T, axis=0, return_inverse=True)
    return cols, np.asarray(inv).reshape(-1)


#: a lanes x classes table of at most this many cells is stepped on Python ints
#: (:func:`_small_step`): there the numpy path's dozen calls cost more than its work (~30 µs a step;
#: the Python step costs ~10 µs at 64 cells, ~25 at 512, ~55 at 1024-2048 where numpy reads ~40)
SMALL_STEP = 1024


#: step the lexer from each lane state's live cells (:func:`_sparse_step`); False: from the
#: lanes x classes table (:func:`_small_step` up to ``SMALL_STEP`` cells, else :func:`_numpy_step`)
SPARSE_STEP = True


def lexer_step(lexer: LazyDFA, goes_on, states: tuple, live_rows: dict | None = None,
               column_memo: dict | None = None) -> tuple:
    """:meth:`~.filling.CellFilling._lexer_moves` for one tuple of lexer states (``goes_on``: whether
    a state reads on; ``live_rows``, ``column_memo``: the memos of :func:`_sparse_step`)."""
    if SPARSE_STEP and live_rows is not None:
        return _sparse_step(lexer, goes_on, states, live_rows, column_memo)
    st = np.array(states, dtype=np.int64)
    lexer.expand_many(st)
    moves = lexer.table[st]                            # lanes x classes
    return (_small_step if moves.size <= SMALL_STEP else _numpy_step)(lexer, goes_on, moves)


def _numpy_step(lexer: LazyDFA, goes_on, moves: np.ndarray) -> tuple:
    """:func:`lexer_step` of a lanes x classes table ``moves``, vectorised."""
    cols, inv = distinct_columns(moves)
    ci, li = np.nonzero(cols)                          # the live (column, lane) pairs
    vals = cols[ci, li]
    uv, uinv = np.unique(vals, return_inverse=True)
    goes = np.array([goes_on(v) for v in uv.tolist()], dtype=bool)[uinv.reshape(-1)]
    acc = lexer.accepting[vals]
    # (lane, next state, accepts, goes on) of each live (column, lane), flat: np.nonzero lists
    # them column by column
    flat = np.stack([li, vals, acc, goes], axis=1).astype(np.int64).ravel().tolist()
    ends = (np.cumsum(np.bincount(ci, minlength=len(cols))) * 4).tolist()
    columns, a = [], 0
    for b in ends:
        columns.append(tuple(flat[a:b]))
        a = b
    return np.asarray(inv).reshape(-1), tuple(columns)


def _small_step(lexer: LazyDFA, goes_on, moves: np.ndarray) -> tuple:
    """:func:`lexer_step` of a small lanes x classes table on Python ints: the same column of
    every byte class (columns numbered in order of first use, not by hash: a column's
    number only links the classes that share it).

    >>> dfa = terminal_dfa(["ab", "a+"], ["AB", "AS"])
    >>> st = np.array(dfa.starts)
    >>> dfa.expand_many(st)
    >>> goes_on = lambda s: bool(dfa.table[s].any())
    >>> small, full = _small_step(dfa, goes_on, dfa.table[st]), _numpy_step(dfa, goes_on, dfa.table[st])
    >>> all(small[1][small[0][k]] == full[1][full[0][k]] for k in range(dfa.n_classes))
    True
    """
    index: dict = {}
    inv = []
    for col in zip(*moves.tolist()):                   # the next state of every lane, per class
        j = index.get(col)
        if j is None:
            j = index[col] = len(index)
        inv.append(j)
    acc, flags, columns = lexer.accepting, {}, []
    for col in index:
        flat = []
        for i, s2 in enumerate(col):
            if s2:
                f = flags.get(s2)
                if f is None:
                    f = flags[s2] = (int(acc[s2]), int(goes_on(s2)))
                flat += (i, s2, *f)
        columns.append(tuple(flat))
    return np.array(inv, dtype=np.intp), tuple(columns)


def live_row(lexer: LazyDFA, goes_on, s: int) -> tuple:
    """The live cells of lexer state ``s``'s row, flat ``(class, next state, accepts, goes on,
    ...)`` (ints: the collector stops tracking the tuple on its first pass)."""
    if not lexer.expanded[s]:
        lexer.expand(s)
    acc, out = lexer.accepting, []
    for k, t in enumerate(lexer.table[s].tolist()):
        if t:
            out += (k, t, int(acc[t]), int(goes_on(t)))
    return tuple(out)


def _sparse_step(lexer: LazyDFA, goes_on, states: tuple, live_rows: dict, column_memo: dict | None = None) -> tuple:
    """:func:`lexer_step` from the lanes' live cells alone (``live_rows``: lexer state ->
    :func:`live_row`, kept by the caller: a cell's flags are read once per lexer state, not
    once per step). A grammar's lanes are mostly terminals that go on with one or two byte
    classes (a keyword's next letter), so the cells that are not dead are a few per lane,
    where the lanes x classes table has ~20 x 100: this costs about half of the numpy step.
    The same columns as :func:`_small_step` (numbered by first use), each a column's live
    lanes in lane order. ``column_memo`` (column -> itself), when given, makes equal columns
    of different steps one tuple: a SQL replay's 3k steps hold ~85k columns, ~13k distinct,
    each a tuple the cyclic collector would pass over once.

    >>> dfa = terminal_dfa(["ab", "a+"], ["AB", "AS"])
    >>> st = np.array(dfa.starts)
    >>> dfa.expand_many(st)
    >>> goes_on = lambda s: bool(dfa.table[s].any())
    >>> sparse = _sparse_step(dfa, goes_on, tuple(dfa.starts), {})
    >>> small = _small_step(dfa, goes_on, dfa.table[st])
    >>> all(sparse[1][sparse[0][k]] == small[1][small[0][k]] for k in range(dfa.n_classes))
    True
    """
    cols = [[] for _ in range(lexer.n_classes)]
    for i, s in enumerate(states):
        row = live_rows.get(s)
        if row is None:
            row = live_rows[s] = live_row(lexer, goes_on, s)
        it = iter(row)
        for k, t, a, g in zip(it, it, it, it):
            cols[k] += (i, t, a, g)
    index: dict = {}
    inv = []
    for c in cols:
        key = tuple(c)                         # the column itself: (lane, next, accepts, goes on)...
        j = index.get(key)
        if j is None:
            j = index[key] = len(index)
        inv.append(j)
    columns = tuple(index) if column_memo is None else tuple([column_memo.setdefault(c, c) for c in index])
    return np.array(inv, dtype=np.intp), columns


def moves(column: tuple):
    """``(lane, next state, accepts, goes on)`` of each live lane of a column of
    :func:`lexer_step`. A column is a flat tuple of ints, which the cyclic collector stops
    tracking on its first pass (a tuple of 4-tuples took two, so a SQL replay's ~190k moves
    were still tracked when the next young generation's pass came).

    >>> list(moves((0, 7, 1, 0, 2, 9, 0, 1)))
    [(0, 7, 1, 0), (2, 9, 0, 1)]
    """
    it = iter(column)
    return zip(it, it, it, it)


def terminal_dfa(patterns, names) -> LazyDFA:
    """One lazy DFA with a start state per terminal regex of ``patterns`` (named ``names``);
    a terminal whose regex matches nothing is a :class:`~.cfg.GrammarError` naming it."""
    try:
        return LazyDFA.from_patterns(patterns)
    except EmptyLanguageError:
        for name, pat in zip(names, patterns):
            try:
                LazyDFA.from_patterns([pat])
            except EmptyLanguageError as e:
                raise GrammarError(f"terminal {name}: {e}; the grammar can never use it") from e
        raise
