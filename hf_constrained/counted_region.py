"""Counted lexical regions: the body of a string with a length bound, ``(body){lo,hi}``.

The automaton keeps one counter per counted repetition, so every counter value of
``"(char){0,50}"`` is its own DFA state, and a token of up to 128 bytes walked from
the first character reaches every counter value and UTF-8 state in between: walking
the trie determinises about a thousand states (10+ ms), and each later character
walks the whole trie again. Here the counter is taken out of the walk instead.

Inside the repetition ``r`` (child ``K``) the automaton's positions only carry the
counter ``c`` of ``r``: their transitions never read it (:class:`~hf_constrained.
forest._Forest`), except when a copy of ``K`` completes, which leads to the
*boundary* ``first(K, c + 1)`` (if ``c + 1 < hi``) plus the positions after ``r``
(if ``c + 1 >= lo``). So the states of one repetition are (local position set,
``c``) pairs with a local transition table independent of ``c``: each byte moves
to another local set with the same ``c`` (inside a character), completes a copy
(back to the boundary, ``c + 1``), leaves ``r`` from the boundary (the closing
quote, the same positions for every ``c``) or dies. :class:`CountedWalk` walks the
vocabulary's trie once per such table, counting the completed copies of each token,
and the mask at counter ``c`` is then a prefix of the tokens sorted by that count
plus the tokens that leave ``r`` at an allowed count (their rest is walked once, from
the positions after ``r``). Only a committed token's own path is determinised.

:meth:`CountedRegions.locate` recognises such states. Anything it cannot match to
this model exactly (a body that can also end a copy and go on in it, such as
``(a|ab){0,9}``, bytes that could both stay in and leave the body, calls of shared
definitions inside the body, unbounded or nullable bodies) is left to the plain walk.
A repetition whose body is the same subtree as an earlier one's (a schema's many
``maxLength`` strings), with the same exit bytes, takes that one's local tables (its
*twin*, :meth:`CountedRegions._pair`) instead of building its own.

>>> from hf_constrained.automaton import LazyDFA
>>> dfa = LazyDFA.from_patterns([r'"[a-z]{0,40}"'])
>>> regions = CountedRegions(dfa)
>>> q = dfa.walk(dfa.starts[0], b'"ab')
>>> shape, c, rest = regions.locate(q)
>>> c, len(rest), shape.lo, shape.hi, shape.boundary   # two letters read; the boundary is local state 0
(2, 0, 0, 40, 0)
>>> by_byte = shape.table
>>> int(by_byte[0, ord("a")]) == DONE, int(by_byte[0, ord('"')]) == EXIT, int(by_byte[0, ord("A")]) == DEAD_CODE
(True, True, True)
>>> regions.locate(dfa.starts[0]) is None  # the opening quote: not inside the repetition
True
>>> dfa = LazyDFA.from_patterns([r'(?:a"[a-z]{0,40}"|b"[a-z]{0,30}")'])
>>> regions = CountedRegions(dfa)
>>> s1, s2 = (regions.locate(dfa.walk(dfa.starts[0], p))[0] for p in (b'a"', b'b"'))
>>> s1.table is s2.table, (s1.hi, s2.hi), s1.after_state != s2.after_state  # a twin: own bounds and exit
(True, (40, 30), True)
"""

from __future__ import annotations

import threading

import numpy as np

from .constraint import pack_ids
from .forest import _REF, END
from .region import ExitForest, RegionWalk, shared_walk

#: local table codes besides local state indices: dies, leaves the repetition, completes a copy
DEAD_CODE, EXIT, DONE = -1, -2, -3
_PACK_LOCK = threading.Lock()


class CountedWalk:
    """The trie walk of one counted region's local table, shared by every state (of
    any processor on the same vocabulary) with the same table over bytes.

    ``ids_by_need``/``need``: the tokens that stay inside, sorted by the copies of
    the body they need (completed copies, plus one when the token ends inside a
    character); ``exit_nodes``/``exit_n``: the trie nodes where a path leaves the
    repetition from the boundary (ascending) and the copies completed before;
    ``tok_exit_n``: per token id, the copies completed before it leaves (-1: none);
    ``forest``: the exits' subtries merged per byte read, for a wide body (else None).

    >>> from hf_constrained.automaton import LazyDFA
    >>> from hf_constrained.vocabulary import Vocabulary
    >>> vocab = Vocabulary.from_token_bytes([bytes([b]) for b in range(256)] + [b"ab", b'a",'])
    >>> dfa = LazyDFA.from_patterns([r'"[a-z]{0,40}",'])
    >>> shape, c, _ = CountedRegions(dfa).locate(dfa.walk(dfa.starts[0], b'"'))
    >>> walk = CountedWalk.build(vocab, shape.table, shape.boundary)
    >>> int(walk.need[walk.ids_by_need == 256][0]), int(walk.tok_exit_n[257])  # "ab": 2 copies; 'a",': leaves after 1
    (2, 1)
    """

    #: packed prefixes kept per walk (16 KB each for 129k tokens)
    PACKED_KEPT = 64

    @classmethod
    def shared(cls, vocab, table: np.ndarray, boundary: int) -> "CountedWalk":
        """The walk of local table ``table`` (over bytes, start state 0) on ``vocab``."""
        key = ("counted", boundary, table.shape[0], table.tobytes())
        return shared_walk(vocab, key, lambda: cls.build(vocab, table, boundary))

    @classmethod
    def build(cls, v, table: np.ndarray, boundary: int) -> "CountedWalk":
        """Walk the byte trie of vocabulary ``v`` from local state 0 of ``table``."""
        k = table.shape[0]
        out, gone = k, k + 1  # absorbing: dead, and "left the repetition" (count frozen)
        t = table.astype(np.int32)
        nxt = np.full((k + 2, 256), out, dtype=np.int32)
        nxt[:k] = np.where(t >= 0, t, np.where(t == DONE, boundary, np.where(t == EXIT, gone, out)))
        nxt[gone] = gone
        inc = np.zeros((k + 2, 256), dtype=np.int16)
        inc[:k] = t == DONE
        nxt, inc = nxt.ravel(), inc.ravel()
        ds = v.depth_start
        local = np.full(v.num_nodes, out, dtype=np.int32)
        local[0] = 0
        count = np.zeros(v.num_nodes, dtype=np.int16)  # copies completed on the path (< 2**15 bytes)
        parent, node_byte = v.node_parent, v.node_byte
        for d in range(1, len(ds) - 1):
            a, b = int(ds[d]), int(ds[d + 1])
            par = parent[a:b]
            idx = local.take(par)
            idx *= 256
            idx += node_byte[a:b]
            cur = nxt.take(idx)
            local[a:b] = cur
            cnt = count.take(par)
            cnt += inc.take(idx)
            count[a:b] = cnt
            if not (cur != out).any():
                break
        self = cls()
        end = local[v.term_node]
        inside = end < k
        need = count[v.term_node][inside].astype(np.int64) + (end[inside] != boundary)
        order = np.argsort(need, kind="stable")
        self.ids_by_need = v.term_ids[inside][order].astype(np.int32)
        self.need = need[order]
        left = end == gone
        self.tok_exit_n = np.full(int(v.term_ids.max()) + 1 if len(v.term_ids) else 0, -1, dtype=np.int16)
        self.tok_exit_n[v.term_ids[left]] = count[v.term_node][left]
        is_gone = local == gone
        first_gone = is_gone.copy()
        first_gone[1:] &= ~is_gone[parent[1:]]
        self.exit_nodes = np.flatnonzero(first_gone)
        self.exit_n = count[self.exit_nodes]
        self._packed: dict = {}
        # A wide body (a JSON string's characters) leaves on a few bytes (the closing quote),
        # after which every exit on the same byte is in the same automaton state: the exits'
        # subtries merged per byte (as a lexical region's, :class:`~hf_constrained.region.
        # ExitForest`) are walked instead of each subtrie. A narrow body (``[a-z0-9]{1,20}``)
        # leaves on most bytes and its exits hold much of the trie: merging costs more than it saves.
        wide = len(self.ids_by_need) >= RegionWalk.MIN_SHARE * len(v.term_ids)
        self.forest = ExitForest(v, self.exit_nodes, v.node_byte[self.exit_nodes].astype(np.int64)) \
            if wide and len(self.exit_nodes) else None
        return self

    def packed_upto(self, width: int, most: int) -> np.ndarray:
        """Packed bits (``width`` wide) of the inside tokens that need at most ``most`` copies."""
        cnt = int(np.searchsorted(self.need, most, side="right"))
        key = (width, cnt)
        got = self._packed.get(key)
        if got is None:
            got = pack_ids(self.ids_by_need[:cnt], width)
            with _PACK_LOCK:  # walks are shared by every thread of a vocabulary
                if len(self._packed) >= self.PACKED_KEPT:
                    self._packed.pop(next(iter(self._packed)))
                self._packed[key] = got
        return got


class CountedShape:
    """One counted repetition's local table from one start (local state 0): ``table``
    over bytes (local state, or :data:`DEAD_CODE`, :data:`EXIT`, :data:`DONE`),
    ``boundary`` (the local state of a copy's start), the bounds ``lo``/``hi``, and
    ``after_state``: the DFA state of the positions after the repetition, which every
    exit continues from. ``exits`` is filled by the index: (token ids that leave and
    end live, the copies each completes before leaving)."""

    def __init__(self, table, boundary, lo, hi, after_state):
        self.table, self.boundary, self.lo, self.hi = table, boundary, lo, hi
        self.after_state = after_state
        self.exits = None


class _Family:
    """The states of one counted repetition ``r`` with outer counters ``outer`` and
    call stack ``stack``; local sets are computed at one real counter value ``c``."""

    def __init__(self, dfa, r, outer, stack, c):
        self.dfa, self.r, self.outer, self.stack, self.c = dfa, r, outer, stack, c
        forest = dfa._forest
        self.kid, self.lo, self.hi = forest.kids[r][0], forest.lo[r], forest.hi[r]
        self.i = len(outer)
        self.bkeys = self.after_pids = self.after_state = None
        self.twin = None  # (an earlier family of the same structure, leaf offset to it): see CountedRegions
        self._inside: dict = {}
        self._bound: dict = {}
        self._moves: dict = {}
        self.shapes: dict = {}

    def inside(self, leaf: int) -> bool:
        """Whether ``leaf`` lies under ``r`` in the same tree."""
        got = self._inside.get(leaf)
        if got is None:
            parent, node = self.dfa._forest.parent, leaf
            while node >= 0 and node != self.r:
                node = parent[node]
            got = self._inside[leaf] = node == self.r
        return got

    def local_keys(self, pids, c, partial=False):
        """Local keys ``(leaf, byte, inner counters)`` of positions ``pids`` at counter
        ``c`` of ``r``, or None when one of them is not such a position; with
        ``partial``, ``(keys, set of the pids that are)`` instead."""
        keys, i, outer, stack = self.dfa._pos_keys, self.i, self.outer, self.stack
        out, used = [], set()
        for pid in pids:
            pos = keys[pid]
            if pos is not END:
                leaf, k, ctx, st = pos
                if st == stack and len(ctx) > i and ctx[i] == c and ctx[:i] == outer and self.inside(leaf):
                    out.append((leaf, k, ctx[i + 1:]))
                    used.add(pid)
                    continue
            if not partial:
                return None
        return (frozenset(out), used) if partial else frozenset(out)

    def boundary_pids(self, c: int) -> frozenset:
        """The positions of the boundary at counter ``c`` (``c <= hi``)."""
        got = self._bound.get(c)
        if got is None:
            dfa = self.dfa
            got = set(self.after_pids) if c >= self.lo else set()
            if c < self.hi:
                got.update(dfa._pos(p) for p in dfa._forest.first(self.kid, self.outer + (c,), self.stack))
            got = self._bound[c] = frozenset(got)
        return got

    def moves(self, local: frozenset):
        """``[(first class, end class, kind, local set or None)]`` of a local set at the
        build counter, kind a local set's code or DONE/DEAD_CODE; None when a class
        mixes kinds (not a counted region)."""
        got = self._moves.get(local, False)
        if got is not False:
            return got
        dfa, c = self.dfa, self.c
        pre, stack = self.outer + (c,), self.stack
        trips = []
        for leaf, k, inner in local:
            trips.extend(dfa._row(dfa._pos((leaf, k, pre + inner, stack))))
        cuts = sorted({x for clo, chi, _ in trips for x in (clo, chi + 1)})
        at = {x: j for j, x in enumerate(cuts)}
        segs = [set() for _ in range(max(len(cuts) - 1, 0))]
        for clo, chi, ts in trips:
            for j in range(at[clo], at[chi + 1]):
                segs[j].update(ts)
        done = self.boundary_pids(c + 1)
        got = []
        for j, ts in enumerate(segs):
            if not ts:
                continue
            keys = self.local_keys(ts, c)
            if keys is not None and keys == self.bkeys:
                got = None  # a copy's start reached without completing one: not this model
                break
            if keys is not None:
                got.append((cuts[j], cuts[j + 1], "mid", keys))
            elif ts == done:
                got.append((cuts[j], cuts[j + 1], "done", None))
            else:
                got = None
                break
        self._moves[local] = got
        return got


class CountedRegions:
    """Finds the counted region of DFA states (one per automaton; see the module doc)."""

    #: bytes of the boundary that complete a copy at once (a string body's characters)
    MIN_LOOPS = 16
    #: local states of one repetition at most
    MAX_STATES = 48

    def __init__(self, dfa):
        self.dfa = dfa
        self._families: dict = {}  # (r, outer, stack) -> _Family, or None: not a region
        self._twins: dict = {}  # structure key (see _structure) -> (first family with it, first node)

    def locate(self, q: int):
        """``(shape, c, rest)``: the counted region of state ``q``, its counter value
        and the positions of ``q`` outside it (a frozenset, often empty: a state's
        tokens are those of either part), or None when ``q`` is not inside one (the
        caller walks it plainly)."""
        dfa = self.dfa
        members, strip = dfa._keys[q]
        if strip or not members:
            return None
        keys, forest, tried = dfa._pos_keys, dfa._forest, set()
        for pid in members:
            pos = keys[pid]
            if pos is END or not pos[2]:
                continue
            leaf, _, ctx, stack = pos
            path = forest.counted_path(leaf, stack)
            for i in range(len(path) - 1, -1, -1):
                cand = (path[i], ctx[:i], stack)
                if cand in tried:
                    continue
                tried.add(cand)
                fam = self._family(cand, ctx[i])
                if fam is None:
                    continue
                got = self._state(fam, members, ctx[i])
                if got is not None:
                    return got
        return None

    def _family(self, cand, c):
        fam = self._families.get(cand, False)
        if fam is False:
            fam = self._families[cand] = self._build_family(*cand, c)
        return fam

    def _build_family(self, r, outer, stack, c):
        dfa = self.dfa
        forest = dfa._forest
        if forest.hi[r] is None or forest.nullable[forest.kids[r][0]]:
            return None
        fam = _Family(dfa, r, outer, stack, c)
        after = forest.after(r, outer, stack)
        for p in after:  # positions after r must never look like positions inside it
            if p is not END and p[3] == stack and fam.inside(p[0]):
                return None
        fam.after_pids = frozenset(0 if p is END else dfa._pos(p) for p in after)
        first = [dfa._pos(p) for p in forest.first(fam.kid, outer + (c,), stack)]
        fam.bkeys = fam.local_keys(first, c)
        if not fam.bkeys:
            return None
        # the classes that leave r from the boundary; none of them may also stay inside
        fam.exit_classes = np.zeros(dfa.n_classes, dtype=bool)
        for pid in fam.after_pids:
            if pid:
                for clo, chi, _ in dfa._row(pid):
                    fam.exit_classes[clo:chi + 1] = True
        structure = self._structure(fam)
        if self._pair(fam, structure):  # the same body as a family that passed the checks below
            return fam
        moves = fam.moves(fam.bkeys)
        if moves is None:
            return None
        bc = dfa.byte_class
        n_done = sum(int(np.count_nonzero((bc >= clo) & (bc < chi))) for clo, chi, kind, _ in moves
                     if kind == "done")
        if n_done < self.MIN_LOOPS:
            return None
        for clo, chi, _, _ in moves:
            if fam.exit_classes[clo:chi].any():
                return None
        if structure is not None:
            self._twins.setdefault(structure[1], (fam, structure[0]))
        return fam

    def _structure(self, fam):
        """``(first node, key)`` of the subtree of ``fam.r``, or None when it is not one
        contiguous run of forest nodes without calls. Two families with equal keys read
        the same bytes the same way, node for node, with node ids a constant apart (the
        forest builds a subtree's nodes in one run, children first): the same body
        (kinds, leaf tries, bounds, child offsets) and exit classes. The repetition's own
        bounds are left out (a shape holds at every counter value: that is what it is
        kept for) but for where the build counter stands against them, which decides
        what a completed copy leads to."""
        f = self.dfa._forest
        r, nodes, todo = fam.r, [], [fam.r]
        while todo:
            n = todo.pop()
            if f.kind[n] == _REF:
                return None
            nodes.append(n)
            todo.extend(f.kids[n])
        first = min(nodes)
        if len(nodes) != r - first + 1:
            return None
        sig = tuple((f.kind[n], f.trie[n], f.lo[n], f.hi[n], f.counted[n], f.nullable[n],
                     f.slot[n], tuple(k - first for k in f.kids[n]))
                    for n in range(first, r))  # r itself: its bounds only through the flags below
        c, lo, hi = fam.c, fam.lo, fam.hi
        # what a copy completed at the build counter leads to (the boundary's make-up)
        flags = (tuple(k - first for k in f.kids[r]), c >= lo, c + 1 >= lo, c + 1 < hi)
        return first, (sig, flags, fam.exit_classes.tobytes())

    def _pair(self, fam, structure) -> bool:
        """Whether ``fam`` has a twin: an earlier family of this automaton with the same
        ``structure`` (:meth:`_structure`) that passed :meth:`_build_family`'s checks,
        which ``fam`` then passes too (they read its body's moves: the same), and whose
        shapes ``fam`` takes instead of building its own (see :meth:`_state`). A JSON
        schema's many ``maxLength`` strings are one body each, built apart: without this
        each pays its own boundary moves and local tables (~0.3 ms)."""
        if structure is None:
            return False
        first, key = structure
        twin = self._twins.get(key)
        if twin is None:
            return False
        other, other_first = twin
        delta = first - other_first
        if frozenset((leaf - delta, k, inner) for leaf, k, inner in fam.bkeys) != other.bkeys:
            return False
        fam.twin = (other, delta)
        return True

    def _state(self, fam, members, c):
        """``(shape, c, rest)``: the members of ``fam`` at counter ``c`` in DFA state
        ``members`` form a state of the model (local set, ``c``), ``rest`` the others."""
        local, part = fam.local_keys(members, c, partial=True)
        if not local:
            return None
        if local == fam.bkeys and c >= fam.lo:
            if not fam.after_pids <= members:
                return None
            part |= fam.after_pids
        shape = fam.shapes.get(local, False)
        if shape is False:
            shape = self._twin_shape(fam, local)
            if shape is None:
                shape = self._shape(fam, local)
            fam.shapes[local] = shape
        return None if shape is None else (shape, c, members - part)

    def _twin_shape(self, fam, local):
        """The shape from local set ``local`` of ``fam``'s twin's shape from the same
        local set (leaves moved by the offset), or None when there is none yet: the same
        local table and boundary, with ``fam``'s own state after the repetition."""
        if fam.twin is None:
            return None
        other, delta = fam.twin
        theirs = other.shapes.get(frozenset((leaf - delta, k, inner) for leaf, k, inner in local))
        if theirs is None:
            return None
        if fam.after_state is None:
            fam.after_state = self.dfa._intern(fam.after_pids, False)
        return CountedShape(theirs.table, theirs.boundary, fam.lo, fam.hi, fam.after_state)

    def _shape(self, fam, start):
        """Breadth-first local table from local set ``start`` (None: too large)."""
        dfa = self.dfa
        order, at, rows = [start], {start: 0}, []
        j = 0
        while j < len(order):
            local = order[j]
            j += 1
            moves = fam.moves(local)
            if moves is None:
                return None
            row = np.full(dfa.n_classes, DEAD_CODE, dtype=np.int16)
            for clo, chi, kind, keys in moves:
                if kind == "done":
                    keys = fam.bkeys
                code_of = at.get(keys)
                if code_of is None:
                    if len(order) >= self.MAX_STATES:
                        return None
                    code_of = at[keys] = len(order)
                    order.append(keys)
                row[clo:chi] = DONE if kind == "done" else code_of
            if local == fam.bkeys:
                row[fam.exit_classes] = EXIT
            rows.append(row)
        if fam.after_state is None:
            fam.after_state = dfa._intern(fam.after_pids, False)
        table = np.stack(rows)[:, dfa.byte_class]
        return CountedShape(table, at[fam.bkeys], fam.lo, fam.hi, fam.after_state)
