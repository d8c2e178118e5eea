"""The byte-level configuration automaton of a grammar: lexer DFA + Earley nodes.

A *configuration* is what a row has read so far, summarised exactly:

* ``boundary``: the Earley nodes (:mod:`.earley`) of the parses whose last
  lexeme ends exactly here (a new lexeme may start);
* ``threads``: the lexemes in progress, each a *slot* (the node it started at,
  its terminal, scan or ``%ignore``) and the terminal's DFA state after the
  bytes read since that node. All terminals are compiled into one
  :class:`~hf_constrained.automaton.LazyDFA` (one start state each) with the
  project's regex machinery.

Reading a byte steps every thread and starts the terminals the boundary nodes
expect (plus ``%ignore``); a thread whose DFA accepts ends its lexeme: the
parser is consulted (only then) and all lexemes ending at the same byte are
merged into one Earley node, while the thread also goes on (the lexeme may be
longer). An ignored lexeme returns to the node it started at. The merge (an
Earley closure, the costly part) waits until a walk reads on from that
configuration: most configurations a mask walk reaches are where a token ends,
and whether they are sentences is known without it
(:meth:`~.earley.Parser.scan_accepts`). Configurations
are interned to small ids, with a transition table ``table[config, byte
class]`` grown lazily, cell by cell (:meth:`ConfigAutomaton.fill`: a walk
computes only the successors it reads), like the regex :class:`LazyDFA`: that is what
:class:`~hf_constrained.index.TokenIndex` walks over the vocabulary trie,
vectorised, to compute token masks, so tokens that stay inside one lexeme and
tokens that cross lexeme boundaries are both exact.

Every live configuration can be completed into a sentence: terminals have no
dead DFA states, every rule is productive (checked), and the vocabulary must
spell every byte.

>>> from hf_constrained.grammar.cfg import from_lark
>>> a = ConfigAutomaton([from_lark('start: "(" start ")" | "x"')])
>>> q = a.walk(a.starts[0], b"((x)")
>>> bool(a.accepting[q]), bool(a.accepting[a.walk(q, b")")]), a.walk(q, b"x")
(False, True, 0)
"""

from __future__ import annotations

import threading

import numpy as np

from ..automaton import LazyDFA
from ..constraint import DEAD
from .cfg import GrammarError
from .earley import DEFAULT_MAX_ITEMS, DEFAULT_MAX_NODES, GrammarLimitError, Parser

DEFAULT_MAX_CONFIGS = 200_000
#: lexemes in progress one configuration may hold (ambiguous lexing multiplies them)
DEFAULT_MAX_THREADS = 10_000


class ConfigAutomaton:
    """Interned grammar configurations with a lazily filled byte-class transition table.

    Duck-types the parts of :class:`~hf_constrained.automaton.LazyDFA` that
    :class:`~hf_constrained.index.TokenIndex` uses (``table``, ``accepting``,
    ``byte_class``, ``starts``, ``expand_many``, ``num_states``,
    ``mask_representative``), plus :meth:`fill` for the index of
    :class:`~.constraint.GrammarConstraint`, which reads cells, not rows.
    """

    def __init__(self, grammars, *, strip_leading_space: bool = False,
                 max_configs: int = DEFAULT_MAX_CONFIGS, max_threads: int = DEFAULT_MAX_THREADS,
                 max_items: int = DEFAULT_MAX_ITEMS, max_nodes: int = DEFAULT_MAX_NODES):
        self.parser = p = Parser(grammars, max_items=max_items, max_nodes=max_nodes)
        self.max_configs, self.max_threads = int(max_configs), int(max_threads)
        pats = list(p.terminal_patterns)
        if strip_leading_space:
            pats.append(" ")  # gives the space byte a class of its own (never a terminal)
        self.lexer = dfa = _terminal_dfa(pats, p.terminal_names)
        self.term_start = np.array(dfa.starts[:len(p.terminal_patterns)], dtype=np.int64)
        self._term_start = self.term_start.tolist()
        for t, s in enumerate(self._term_start):
            if dfa.accepting[s]:
                raise GrammarError(f"terminal {p.terminal_names[t]} matches the empty string "
                                   f"(regex {p.terminal_patterns[t]!r}); terminals must be non-empty: "
                                   "make the terminal non-empty and the rule that uses it optional")
        self.byte_class = dfa.byte_class
        self.n_classes = dfa.n_classes
        self._no_lanes = (np.zeros(self.n_classes, dtype=np.int64), ((),))
        self._space_class = int(dfa.byte_class[0x20])
        self._lock = threading.RLock()
        self._slot_ids: dict = {}
        self._slots: list = []          # slot -> (node, terminal, is_ignore)
        self._merge: dict = {}
        self._lanes: dict = {}          # parser node -> (slots, lexer start states)
        self._continues: dict = {}
        self._moves: dict = {}          # lane states -> _lexer_moves
        self._plans: dict = {}          # cid -> _plan, while its row is partly filled
        self._keys: list = []           # cid -> (boundary, threads, strip, pending scans)
        self._ids: dict = {}
        self._closed: list = []         # cid -> (boundary with its scans merged, threads, strip) or None
        self._by_closed: dict = {}      # closed content -> the first cid with it (its row and mask)
        cap = 64
        self.table = np.full((cap, self.n_classes), -1, dtype=np.int32)
        self.accepting = np.zeros(cap, dtype=bool)
        self.expanded = np.zeros(cap, dtype=bool)
        dead = self._intern((), (), False)
        assert dead == DEAD
        self.table[DEAD] = DEAD
        self.expanded[DEAD] = True
        self.starts = [self._intern((n,), (), bool(strip_leading_space))
                       for n in p.start_nodes]

    # ---------------------------------------------------------------- interning
    def _slot(self, node: int, term: int, ignore: bool) -> int:
        key = (node, term, ignore)
        sid = self._slot_ids.get(key)
        if sid is None:
            sid = self._slot_ids[key] = len(self._slots)
            self._slots.append(key)
        return sid

    def _intern(self, boundary: tuple, threads: tuple, strip: bool, pending: tuple = ()) -> int:
        """The id of a configuration; ``pending``: ``(node, terminal)`` lexemes that end here
        and are not merged into a parser node yet (:meth:`_closed_key` does it when the
        configuration is expanded or exported: most configurations a mask walk creates are
        where a token ends, and are never expanded).

        ``boundary``, ``threads`` and ``pending`` are sorted tuples without repeats (of ints
        and of int pairs), never frozensets: the cyclic garbage collector stops tracking a
        tuple of ints after its first pass over it, while a frozenset stays tracked for
        life, so each of the tens of thousands of configurations a grammar creates would
        make every later full pass over the process longer (:func:`_canon`)."""
        key = (boundary, threads, strip, pending)
        cid = self._ids.get(key)
        if cid is not None:
            return cid
        if not pending:
            cid = self._by_closed.get(key[:3])
            if cid is not None:
                return cid
        cid = len(self._keys)
        if cid >= self.max_configs:
            raise GrammarLimitError(
                f"the grammar automaton needs more than max_configs={self.max_configs} configurations; "
                "raise max_configs or simplify the grammar")
        if len(threads) > self.max_threads:
            raise GrammarLimitError(
                f"a configuration holds {len(threads)} lexemes in progress, more than "
                f"max_threads={self.max_threads} (terminals that can split the same text in many "
                "ways, e.g. NAME NAME with nothing between); make the lexing less ambiguous or raise max_threads")
        if cid >= len(self.table):
            grow = len(self.table)
            self.table = np.concatenate([self.table, np.full((grow, self.n_classes), -1, np.int32)])
            self.accepting = np.concatenate([self.accepting, np.zeros(grow, bool)])
            self.expanded = np.concatenate([self.expanded, np.zeros(grow, bool)])
        self._keys.append(key)
        self._ids[key] = cid
        self._closed.append(None if pending else key[:3])
        if not pending:
            self._by_closed[key[:3]] = cid
        acc, p = self.parser._accept, self.parser
        self.accepting[cid] = any([acc[n] for n in boundary]) or any(
            [p.scan_accepts(n, t) for n, t in pending])
        return cid

    def _closed_key(self, cid: int) -> tuple:
        """``(boundary, threads, strip)`` of ``cid`` with its pending lexemes merged into one
        parser node (Earley's closure, computed here once per configuration)."""
        got = self._closed[cid]
        if got is None:
            boundary, threads, strip, pending = self._keys[cid]
            got = self._closed[cid] = (_canon((*boundary, self._merged(pending))), threads, strip)
            self._by_closed.setdefault(got, cid)
        return got

    def mask_representative(self, cid: int, depth: int) -> int:
        """The configuration whose mask ``cid`` shares (the first one with the same content:
        a configuration with pending lexemes may close to one that exists);
        :class:`~hf_constrained.index.TokenIndex` asks before walking a new state."""
        with self._lock:
            return self._by_closed[self._closed_key(cid)]

    def _goes_on(self, s: int) -> bool:
        """Whether DFA state ``s`` can read another byte (else the lexeme is over)."""
        got = self._continues.get(s)
        if got is None:
            self.lexer.expand(s)
            got = self._continues[s] = bool(self.lexer.table[s].any())
        return got

    def _node_lanes(self, n: int) -> tuple:
        """``(slots, lexer start states)`` of the lexemes that may start at parser node ``n``."""
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
            got = self._lanes[n] = (tuple(slots), tuple(states))
        return got

    def _merged(self, scans: tuple) -> int:
        got = self._merge.get(scans)
        if got is None:
            got = self._merge[scans] = (self.parser.scan(*scans[0]) if len(scans) == 1
                                        else self.parser.merge(scans))
        return got

    # ---------------------------------------------------------------- expansion
    def _plan(self, cid: int) -> tuple:
        """What filling ``cid``'s row needs: ``(canon,)`` for a configuration with the content
        of an earlier one (its cells are copied), else ``(slots, column of each byte class,
        columns, successor of the first space or None)``."""
        got = self._plans.get(cid)
        if got is None:
            got = self._plan_many([cid])[0]
        return got

    def _plan_many(self, cids) -> list:
        """:meth:`_plan` of each of ``cids``, with the lexer steps that none has yet computed
        in one numpy pass (:meth:`_lexer_moves_many`: a fill reads ~10 new lane tuples)."""
        plans, todo = self._plans, []
        for cid in cids:
            if cid in plans:
                continue
            closed = self._closed_key(cid)
            canon = self._by_closed[closed]
            if canon != cid:
                plans[cid] = (canon,)
                continue
            boundary, threads, strip = closed
            slots, states = [], []
            for sl, st in threads:
                slots.append(sl)
                states.append(st)
            for n in boundary:
                ns, nst = self._node_lanes(n)
                slots.extend(ns)
                states.extend(nst)
            todo.append((cid, closed, tuple(slots), tuple(states)))   # tuples: see _intern
        if len(todo) > 1:
            self._lexer_moves_many([t[3] for t in todo])
        for cid, (boundary, threads, strip), slots, states in todo:
            inv, columns = self._lexer_moves(states) if states else self._no_lanes
            strip_to = None
            if strip:  # decode() drops the text's first space: reading it changes nothing
                strip_to = self._intern(boundary, threads, False)
                self.table[cid, self._space_class] = strip_to
            plans[cid] = (slots, inv, columns, strip_to)
        return [plans[c] for c in cids]

    def _fill_column(self, cid: int, col: int, plan: tuple) -> None:
        """The successor of ``cid`` for every byte class of lexer column ``col``."""
        slots, inv, columns, strip_to = plan
        nxt = DEAD
        if columns[col]:
            slot_of = self._slots
            keep, scans, back = [], [], []
            for i, s2, a, g in columns[col]:
                sl = slots[i]
                if a:
                    node, term, ign = slot_of[sl]
                    if ign:
                        back.append(node)
                    else:
                        scans.append((node, term))
                if g:
                    keep.append((sl, s2))
            nxt = self._intern(_canon(back), _canon(keep), False, _canon(scans))
        row = self.table[cid]               # after _intern, which may grow the table
        row[inv == col] = nxt
        if strip_to is not None:
            row[self._space_class] = strip_to

    def _fill_cell(self, cid: int, k: int) -> None:
        plan = self._plan(cid)
        if len(plan) == 1:  # the same content as an earlier configuration: the same cells
            canon = plan[0]
            if self.table[canon, k] < 0:
                self._fill_cell(canon, k)
            self.table[cid] = self.table[canon]
        else:
            self._fill_column(cid, int(plan[1][k]), plan)
        if self.table[cid].min() >= 0:
            self.expanded[cid] = True
            self._plans.pop(cid, None)

    def fill(self, cids, classes) -> None:
        """Compute the cells ``table[cids[i], classes[i]]`` (the others of a row wait until a
        walk reads them: most successors of a configuration lead to no token)."""
        with self._lock:
            n = self.n_classes
            cells = [divmod(f, n) for f in
                     np.unique(np.asarray(cids, dtype=np.int64) * n + np.asarray(classes)).tolist()]
            self._plan_many(list(dict.fromkeys([c for c, _ in cells if not self.expanded[c]])))
            for cid, k in cells:
                if self.table[cid, k] < 0:
                    self._fill_cell(cid, k)

    def expand(self, cid: int) -> None:
        """Compute the whole transition row of configuration ``cid`` (idempotent)."""
        with self._lock:
            if self.expanded[cid]:
                return
            plan = self._plan(cid)
            if len(plan) == 1:
                self.expand(plan[0])
                self.table[cid] = self.table[plan[0]]
            else:
                inv = plan[1]
                for k in range(self.n_classes):
                    if self.table[cid, k] < 0:
                        self._fill_column(cid, int(inv[k]), plan)
            self.expanded[cid] = True
            self._plans.pop(cid, None)

    #: lane-state tuples whose lexer step is kept (see _lexer_moves); past it the memo restarts
    MOVES_MEMO = 50_000

    def _lexer_moves(self, states: tuple) -> tuple:
        """One byte of the lexer for lanes in DFA ``states``: ``(column of each byte class,
        columns)``, a column being the ``(lane, next state, accepts, goes on)`` of its live
        lanes. It depends on the lanes' states alone, and configurations whose nodes expect
        the same terminals share them, so it is kept per tuple (the numpy work of a row)."""
        got = self._moves.get(states)
        if got is None:
            got = _lexer_step(self.lexer, self._goes_on, states)
            if len(self._moves) >= self.MOVES_MEMO:
                self._moves.clear()
            self._moves[states] = got
        return got

    def _lexer_moves_many(self, tuples) -> None:
        """:meth:`_lexer_moves` of every tuple of ``tuples`` not kept yet, in one numpy pass
        (the same output: :func:`_lexer_steps`; a step alone is ~50 µs of numpy calls on a
        small matrix)."""
        new = list(dict.fromkeys([t for t in tuples if t and t not in self._moves]))
        if len(new) < 2:
            return
        if len(self._moves) + len(new) > self.MOVES_MEMO:
            self._moves.clear()
        for states, got in zip(new, _lexer_steps(self.lexer, self._goes_on, new)):
            self._moves[states] = got

    def expand_many(self, cids) -> None:
        for c in np.unique(np.asarray(cids)).tolist():
            if not self.expanded[c]:
                self.expand(c)

    # ---------------------------------------------------------------- queries
    @property
    def num_states(self) -> int:
        return len(self._keys)

    def step(self, cid: int, byte: int) -> int:
        if not self.expanded[cid]:
            self.expand(cid)
        return int(self.table[cid, self.byte_class[byte]])

    def walk(self, cid: int, data: bytes) -> int:
        """Configuration after reading ``data`` from ``cid`` (``DEAD`` once dead)."""
        for b in data:
            if cid == DEAD:
                return DEAD
            cid = self.step(cid, b)
        return cid

    # ---------------------------------------------------------------- disk cache
    def export_states(self, cids) -> dict:
        """Plain arrays describing configurations ``cids`` (for the disk cache: the
        token-level states whose masks are stored), with the parser nodes and lexer
        states they are made of. The byte-level configurations between them are not
        stored: they are rebuilt, lazily and cheaply, when a token is walked."""
        with self._lock:
            cids = [int(c) for c in cids]
            keys = [self._closed_key(c) for c in cids]
            nodes = {n for k in keys for n in k[0]} | {self._slots[sl][0] for k in keys for sl, _ in k[1]}
            out, pos = self.parser.export_nodes(nodes)
            out.update({"lex_" + k: v for k, v in self.lexer.export_states().items()})
            bounds = [sorted(pos[n] for n in k[0]) for k in keys]
            threads = [sorted((pos[self._slots[sl][0]], *self._slots[sl][1:], s) for sl, s in k[1]) for k in keys]
            out["gc_ids"] = np.array(cids, dtype=np.int64)
            out["gc_boundary"] = np.array([x for b in bounds for x in b], dtype=np.int64)
            out["gc_boundary_offsets"] = _offsets(bounds)
            out["gc_threads"] = np.array([t for ts in threads for t in ts], dtype=np.int64).reshape(-1, 4)
            out["gc_thread_offsets"] = _offsets(threads)
            out["gc_strip"] = np.array([k[2] for k in keys], dtype=bool)
            return out

    def import_states(self, arrays: dict) -> np.ndarray:
        """Add the configurations of :meth:`export_states` output (same grammars, any
        process); returns the map from their ids (``gc_ids``) to ours (-1 where none).
        Ids differ between processes (lazy discovery order), so nodes, lexer states and
        configurations are matched by content. Raises ``ValueError`` for a foreign or
        inconsistent file."""
        with self._lock:
            ids = arrays["gc_ids"].tolist()
            b_off, t_off = arrays["gc_boundary_offsets"].tolist(), arrays["gc_thread_offsets"].tolist()
            n = len(ids)
            if len(b_off) != n + 1 or len(t_off) != n + 1 or len(arrays["gc_strip"]) != n or (
                    n and min(ids) < 0) or self.num_states + n > self.max_configs:
                raise ValueError("cached grammar configurations are malformed")
            lex = {k[4:]: v for k, v in arrays.items() if k.startswith("lex_")}
            n_lex = len(lex["dfa_offsets"]) - 1
            bound, thr = arrays["gc_boundary"].tolist(), arrays["gc_threads"].tolist()
            n_nodes, n_terms = len(arrays["gp_offsets"]) - 1, len(self.term_start)
            if (any(not 0 <= x < n_nodes for x in bound)
                    or any(not (0 <= nd < n_nodes and 0 <= t < n_terms and ig in (0, 1) and 0 <= s < n_lex)
                           for nd, t, ig, s in thr)):
                raise ValueError("cached grammar configurations are for other grammars")
            nodes = self.parser.import_nodes(arrays)
            lexmap = self.lexer.import_states(lex)
            strip = arrays["gc_strip"].tolist()
            mapping = np.full(max(ids, default=-1) + 1, -1, dtype=np.int64)
            for i in range(n):
                b = _canon(nodes[bound[b_off[i]:b_off[i + 1]]].tolist())
                ts = _canon([(self._slot(int(nodes[nd]), t, bool(ig)), int(lexmap[s]))
                             for nd, t, ig, s in thr[t_off[i]:t_off[i + 1]]])
                mapping[ids[i]] = self._intern(b, ts, bool(strip[i]))
            return mapping

    def describe(self, cid: int) -> dict:
        """The content of a configuration (for tests and debugging)."""
        with self._lock:
            boundary, threads, strip = self._closed_key(cid)
        return {"boundary": sorted(boundary), "threads": sorted(threads), "strip": strip}


def _canon(xs) -> tuple:
    """The canonical form of a set of ints or int tuples in a configuration key: sorted,
    without repeats, as a tuple (see :meth:`ConfigAutomaton._intern`).

    >>> _canon([3, 1, 3]), _canon([(2, 5), (1, 9), (2, 5)]), _canon([])
    ((1, 3), ((1, 9), (2, 5)), ())
    """
    if len(xs) < 2:
        return tuple(xs)
    return tuple(sorted(set(xs)))


def _offsets(groups) -> np.ndarray:
    out = np.zeros(len(groups) + 1, dtype=np.int64)
    np.cumsum([len(g) for g in groups], out=out[1:])
    return out


_MIX = np.random.default_rng(0x5EED).integers(1, 2 ** 62, size=4096, dtype=np.int64) | 1


def _distinct_columns(moves: np.ndarray):
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


def _lexer_step(lexer: LazyDFA, goes_on, states: tuple) -> tuple:
    """:meth:`ConfigAutomaton._lexer_moves` for one tuple of lexer states (``goes_on``: whether
    a state reads on)."""
    st = np.array(states, dtype=np.int64)
    lexer.expand_many(st)
    moves = lexer.table[st]                            # lanes x classes
    cols, inv = _distinct_columns(moves)
    ci, li = np.nonzero(cols)                          # the live (column, lane) pairs
    vals = cols[ci, li]
    uv, uinv = np.unique(vals, return_inverse=True)
    goes = np.array([goes_on(v) for v in uv.tolist()], dtype=bool)[uinv.reshape(-1)]
    acc = lexer.accepting[vals]
    columns = [[] for _ in range(len(cols))]
    for c, i, s2, a, g in zip(ci.tolist(), li.tolist(), vals.tolist(), acc.tolist(), goes.tolist()):
        columns[c].append((i, s2, a, g))
    return np.asarray(inv).reshape(-1), tuple([tuple(c) for c in columns])


def _lexer_steps(lexer: LazyDFA, goes_on, tuples: list) -> list:
    """:func:`_lexer_step` of each tuple of lexer states in ``tuples`` (non-empty ones), in
    one numpy pass over all their lanes: the same distinct columns in the same order (a
    hash per column, sorted within each tuple, verified exactly; a tuple whose check fails,
    or longer than the hash, takes :func:`_lexer_step`)."""
    lens = np.array([len(t) for t in tuples], dtype=np.int64)
    n_t, k_max = len(tuples), int(lens.max())
    if k_max > len(_MIX):
        return [_lexer_step(lexer, goes_on, t) for t in tuples]
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
        out.append((inv[t], tuple(columns[o:o + d])) if good else _lexer_step(lexer, goes_on, tuples[t]))
    return out


def _terminal_dfa(patterns, names) -> LazyDFA:
    from ..errors import EmptyLanguageError
    try:
        return LazyDFA.from_patterns(patterns)
    except EmptyLanguageError:
        for name, pat in zip(names, patterns):
            try:
                LazyDFA.from_patterns([pat])
            except EmptyLanguageError as e:
                raise GrammarError(f"terminal {name}: {e}; the grammar can never use it") from e
        raise
