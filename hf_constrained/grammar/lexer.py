"""The grammar's lexer: all terminals in one lazy byte DFA, and its step for lanes.

A configuration (:mod:`.configs`) holds *lanes*, lexemes in progress, each in a
state of one :class:`~hf_constrained.automaton.LazyDFA` that has a start state
per terminal (:func:`terminal_dfa`). Reading a byte moves every lane at once:
:func:`lexer_step` computes, for a tuple of lane states, which byte classes
act alike on all of them (the distinct columns of the lanes x classes table)
and, per such column, each live lane's next state, whether it accepts (its
lexeme may end) and whether it goes on (may read more). :func:`lexer_steps`
does the same for many tuples in one numpy pass (a fill of the configuration
table meets ~10 new tuples at once, and one step alone is mostly numpy's
per-call overhead on a small matrix).

>>> dfa = terminal_dfa(["ab", "a+"], ["AB", "AS"])
>>> a, b = int(dfa.byte_class[ord("a")]), int(dfa.byte_class[ord("b")])
>>> inv, columns = lexer_step(dfa, lambda s: bool(dfa.table[s].any()), tuple(dfa.starts))
>>> [(lane, accepts, goes_on) for lane, _, accepts, goes_on in columns[inv[a]]]
[(0, False, True), (1, True, True)]
>>> columns[inv[b]]
()
>>> [len(c) for c in lexer_steps(dfa, lambda s: bool(dfa.table[s].any()), [tuple(dfa.starts)])[0][1]] == [
...     len(c) for c in columns]
True
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


def lexer_step(lexer: LazyDFA, goes_on, states: tuple) -> tuple:
    """:meth:`~.filling.CellFilling._lexer_moves` for one tuple of lexer states (``goes_on``: whether
    a state reads on)."""
    st = np.array(states, dtype=np.int64)
    lexer.expand_many(st)
    moves = lexer.table[st]                            # lanes x classes
    cols, inv = distinct_columns(moves)
    ci, li = np.nonzero(cols)                          # the live (column, lane) pairs
    vals = cols[ci, li]
    uv, uinv = np.unique(vals, return_inverse=True)
    goes = np.array([goes_on(v) for v in uv.tolist()], dtype=bool)[uinv.reshape(-1)]
    acc = lexer.accepting[vals]
    columns = [[] for _ in range(len(cols))]
    for c, i, s2, a, g in zip(ci.tolist(), li.tolist(), vals.tolist(), acc.tolist(), goes.tolist()):
        columns[c].append((i, s2, a, g))
    return np.asarray(inv).reshape(-1), tuple([tuple(c) for c in columns])


def lexer_steps(lexer: LazyDFA, goes_on, tuples: list) -> list:
    """:func:`lexer_step` of each tuple of lexer states in ``tuples`` (non-empty ones), in
    one numpy pass over all their lanes: the same distinct columns in the same order (a
    hash per column, sorted within each tuple, verified exactly; a tuple whose check fails,
    or longer than the hash, takes :func:`lexer_step`)."""
    lens = np.array([len(t) for t in tuples], dtype=np.int64)
    n_t, k_max = len(tuples), int(lens.max())
    if k_max > len(_MIX):
        return [lexer_step(lexer, goes_on, t) for t in tuples]
    st = np.fromiter((s for t in tuples for s in t), dtype=np.int64, count=int(lens.sum()))
    lexer.expand_many(st)
    moves = lexer.table[st].astype(np.int64)          # all lanes x classes
    off = np.zeros(n_t, dtype=np.int64)
    np.cumsum(lens[:-1], out=off[1:])
    tid = np.repeat(np.arange(n_t), lens)             # the tuple of each lane
    local = np.arange(len(st)) - off[tid]             # its index in the tuple
    h = np.add.reduceat(moves * _MIX[local][:, None], off, axis=0)   # tuples x classes (wraps)
    srt = np.argsort(h, axis=1, kind="stable")        # as np.unique: by hash, first column first
    rows = np.arange(n_t)[:, None]
    hs = h[rows, srt]
    first = np.ones(h.shape, dtype=bool)
    first[:, 1:] = hs[:, 1:] != hs[:, :-1]
    gid = np.cumsum(first, axis=1) - 1
    inv = np.empty_like(gid)
    inv[rows, srt] = gid                              # each class's distinct column, per tuple
    n_d = gid[:, -1] + 1
    g_off = np.zeros(n_t, dtype=np.int64)
    np.cumsum(n_d[:-1], out=g_off[1:])
    reps = srt[first]                                 # each distinct column's first class
    rep = reps[g_off[:, None] + inv]                  # tuples x classes
    ok = np.logical_and.reduceat((moves[np.arange(len(st))[:, None], rep[tid]] == moves).all(axis=1), off)
    # the distinct columns' entries, group by group (tuple, then column), lane by lane
    g_t = np.repeat(np.arange(n_t), n_d)              # the tuple of each distinct column
    g_len = lens[g_t]
    g_start = np.zeros(len(g_t), dtype=np.int64)
    np.cumsum(g_len[:-1], out=g_start[1:])
    e_g = np.repeat(np.arange(len(g_t)), g_len)
    e_i = np.arange(len(e_g)) - g_start[e_g]
    vals = moves[off[g_t][e_g] + e_i, reps[e_g]]
    live = vals != 0
    e_g, e_i, vals = e_g[live], e_i[live], vals[live]
    uv, uinv = np.unique(vals, return_inverse=True)
    goes = np.array([goes_on(v) for v in uv.tolist()], dtype=bool)[uinv.reshape(-1)]
    acc = lexer.accepting[vals]
    entries = list(zip(e_i.tolist(), vals.tolist(), acc.tolist(), goes.tolist()))
    ends = np.cumsum(np.bincount(e_g, minlength=len(g_t))).tolist()
    columns = [tuple(entries[a:b]) for a, b in zip([0] + ends[:-1], ends)]
    out = []
    for t, (o, d, good) in enumerate(zip(g_off.tolist(), n_d.tolist(), ok.tolist())):
        out.append((inv[t], tuple(columns[o:o + d])) if good else lexer_step(lexer, goes_on, tuples[t]))
    return out


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
