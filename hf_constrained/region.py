"""Lexical regions: the part of a token mask that many automaton states share.

Inside a JSON string the automaton loops on one *body* state, leaves it for a
few bytes (a UTF-8 continuation, an escape) and comes back. Almost every token
(126k of DeepSeek's 129k) stays inside that little group of states, which is
the same for every string of every schema. Walking the vocabulary's trie for
each such state is the slowest part of a first visit; instead the walk inside
the region is done once per vocabulary (:class:`RegionWalk`) and each state
only walks the few tokens that leave the region (:mod:`hf_constrained.index`).

:func:`find_region` finds a state's region; its local table, written over bytes,
is the key of the shared walk:

>>> import numpy as np
>>> from hf_constrained.automaton import LazyDFA
>>> dfa = LazyDFA.from_patterns([r'"[^"\\\\]*"'])
>>> body = dfa.walk(dfa.starts[0], b'"')
>>> states, table = find_region(dfa, body)
>>> int(states[0]) == body, table.shape[0]  # the body, then the states inside its UTF-8 characters
(True, 19)
>>> int(table[0, dfa.byte_class[ord("a")]]), int(table[0, dfa.byte_class[ord('"')]])
(0, -1)
>>> find_region(dfa, dfa.starts[0]) is None  # the opening quote: no loop
True
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

from .constraint import DEAD, pack_ids
from .neighbour import _spans

#: vocabulary -> {region table over bytes: RegionWalk, or None (not worth it)}
_REGION_WALKS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_REGION_LOCK = threading.Lock()
#: vocabulary -> shared walks built so far (benchmarks tell a shape's first use by it)
_WALKS_BUILT: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _row(dfa, s: int) -> np.ndarray:
    if not dfa.expanded[s]:
        dfa.expand(s)
    return dfa.table[s]


def find_region(dfa, q: int, min_loops: int = 16, depth: int = 3, max_states: int = 48, admit=None):
    """The lexical region of state ``q``, or None when ``q`` has none.

    A state with at least ``min_loops`` bytes looping back to itself has one:
    the states within ``depth`` transitions of ``q`` (at most ``max_states``
    looked at) from which ``q`` can be reached again. Every candidate looked at
    is expanded first, so the region depends only on the automaton, not on which
    states earlier walks (or the constructor's probe) happened to expand.
    Returns ``(states, table)``:
    the region's states in a canonical order (``q`` first, then breadth-first,
    targets by first byte class) and their transitions as a local ``int16``
    table over byte classes (region index, or -1 for "leaves the region").
    ``admit`` (a predicate on states, default all): only states it admits become
    candidates; the others are neither looked at nor expanded.
    """
    row = _row(dfa, q)
    if np.count_nonzero(row[dfa.byte_class] == q) < min_loops:
        return None
    order, at, frontier = [q], {q: 0}, [q]
    targets = []  # per candidate (in order), its distinct live targets
    for _ in range(depth):
        nxt = []
        for s in frontier:
            # targets by first byte class: dict keys keep first occurrence order
            ts = dict.fromkeys(_row(dfa, s).tolist())
            ts.pop(DEAD, None)
            targets.append(ts)
            for t in ts:
                if t not in at and len(order) < max_states and (admit is None or admit(t)):
                    at[t] = len(order)
                    order.append(t)
                    nxt.append(t)
        frontier = nxt
    for s in frontier:  # the last ring was only discovered, not expanded
        targets.append(dict.fromkeys(_row(dfa, s).tolist()))
    # The candidates that reach q through candidates: backwards from q over the
    # candidates' edges (on Python ints: a few hundred edges, no per-ring array passes).
    into = [[] for _ in order]
    for i, ts in enumerate(targets):
        for t in ts:
            j = at.get(t)
            if j is not None:
                into[j].append(i)
    inside = [False] * len(order)
    inside[0] = True
    todo = [0]
    while todo:
        for i in into[todo.pop()]:
            if not inside[i]:
                inside[i] = True
                todo.append(i)
    keep = np.array([order[i] for i in range(len(order)) if inside[i]], dtype=np.int64)
    # the kept rows, each target replaced by its index among the kept states (-1: outside)
    rows = dfa.table[keep]
    srt = np.argsort(keep)
    pos = np.searchsorted(keep, rows, sorter=srt)
    np.minimum(pos, len(keep) - 1, out=pos)
    idx = srt[pos]
    table = np.where(keep[idx] == rows, idx, -1).astype(np.int16)
    return keep, table


class RegionWalk:
    """The trie walk inside one lexical region, shared by every state (of any
    processor on the same vocabulary) whose region has the same table over bytes.

    ``ids``/``end``: the tokens whose bytes never leave the region, and the region
    state each ends in (``end_set``: the distinct ones); ``exit_nodes``/``exit_from``:
    the byte-trie nodes where a path leaves it (ascending), and the region state
    just before; ``packed``: width -> packed bits of ``ids``.

    ``forest``: the subtries below the exits, merged per (region state left, byte
    read), which lead to one automaton state (:class:`ExitForest`, :meth:`exit_walk`):
    a state walks a few hundred forest nodes instead of the subtries of each exit.
    """

    #: below this share of the vocabulary inside the region, the plain walk is cheaper
    MIN_SHARE = 0.25
    #: region walks kept per vocabulary (about 1 MB each for 129k tokens), oldest dropped first
    PER_VOCABULARY = 32

    @classmethod
    def shared(cls, vocab, by_byte: np.ndarray):
        """The walk of the region with local table ``by_byte`` (over bytes) on
        ``vocab``'s trie, built on first use; None when it is not worth it."""
        key = (by_byte.shape[0], by_byte.tobytes())
        return shared_walk(vocab, key, lambda: cls.build(vocab, by_byte))

    @classmethod
    def build(cls, v, table: np.ndarray):
        """Walk the byte trie of vocabulary ``v`` inside the region whose local
        transitions over bytes are ``table`` (region index, -1 = leaves it)."""
        k = table.shape[0]
        # "outside" is an absorbing extra state, so each trie level is two gathers
        flat = np.full((k + 1, 256), k, dtype=np.int32)
        flat[:k] = np.where(table >= 0, table, k)
        flat = flat.ravel()
        ds = v.depth_start
        local = np.full(v.num_nodes, k, dtype=np.int32)
        local[0] = 0
        parent, node_byte = v.node_parent, v.node_byte
        for d in range(1, len(ds) - 1):
            a, b = int(ds[d]), int(ds[d + 1])
            cur = local.take(parent[a:b])
            cur *= 256
            cur += node_byte[a:b]
            cur = flat.take(cur)  # takes: about twice as fast as fancy indexing per level
            local[a:b] = cur
            if not (cur < k).any():
                break
        exits = np.flatnonzero(local[1:] == k) + 1
        exit_from = local[parent[exits]]
        leaving = exit_from < k
        end = local[v.term_node]
        keep = end < k
        if np.count_nonzero(keep) < cls.MIN_SHARE * len(keep):
            return None
        self = cls()
        self.ids = v.term_ids[keep].astype(np.int32)
        self.end = end[keep]
        self.end_set = np.unique(self.end)
        self.packed: dict = {}
        self.exit_nodes = exits[leaving]
        self.exit_from = exit_from[leaving].astype(np.int64)
        self.forest = ExitForest(v, self.exit_nodes, self.exit_from * 256 + v.node_byte[self.exit_nodes])
        return self

    def packed_bits(self, width: int) -> np.ndarray:
        """Packed bits (``width`` wide) of the tokens that stay in the region, made once
        per width (shared: callers copy before adding a state's own bits)."""
        got = self.packed.get(width)
        if got is None:
            got = self.packed[width] = pack_ids(self.ids, width)
        return got

    def exit_walk(self, index, states: np.ndarray):
        """``(token ids, next states)`` of the tokens that leave the region and end in
        a live state, for a state whose region states are ``states`` (in the order of
        :func:`find_region`): the same pairs as walking every exit node's subtrie from
        where it leaves (see :class:`ExitForest`)."""
        f = self.forest
        roots = index._lookup(states[f.keys // 256].astype(index.dfa.table.dtype),
                              index.dfa.byte_class.take(f.keys % 256))
        return f.walk(index, roots)


class ExitForest:
    """The subtries below some trie nodes (``exit_nodes``: never below one another),
    merged per group: every exit node of a group is reached in the same automaton
    state (``group_key``: equal keys, same group), so the nodes reached by the same
    bytes after an exit of one group are one tree node, in the same state.

    :meth:`walk` gives the (token, next state) pairs of walking each exit node's
    subtrie from its state, with one gather per level over the merged trees of the
    groups reached in a live state only (a string body's closing quote: a few hundred
    nodes) instead of a sparse walk per depth of the vocabulary's trie. The merged
    trees are built on first use, per set of live groups (:class:`_Trees`), and kept:
    the forest is shared like the walk that holds it. ``keys``: the groups' keys,
    ascending.

    >>> from hf_constrained.vocabulary import Vocabulary
    >>> v = Vocabulary.from_token_bytes([b'a"', b'b"', b'a",', b'b",', b'b"}', b'"'])
    >>> quotes = np.flatnonzero((v.node_byte == ord('"')) & (v.node_parent > 0))  # after a or b
    >>> f = ExitForest(v, quotes, np.zeros(len(quotes), np.int64))  # one group
    >>> t = f.trees(np.array([0]))
    >>> len(f.keys), len(t.parent), [v.token_bytes[i] for i in t.ids[t.node == 0]]
    (1, 3, [b'a"', b'b"'])
    """

    #: sets of live groups whose merged trees are kept, oldest dropped first
    KEPT = 16

    def __init__(self, v, exit_nodes: np.ndarray, group_key: np.ndarray):
        self.v = v
        self.keys, self.group_of = np.unique(group_key, return_inverse=True)
        self.exit_nodes = exit_nodes
        self._trees: dict = {}

    def trees(self, groups: np.ndarray) -> "_Trees":
        """The merged trees of ``groups`` (ascending group indices), built on first use."""
        key = groups.tobytes()
        got = self._trees.get(key)
        if got is None:
            got = _Trees(self.v, self.exit_nodes, self.group_of, len(self.keys), groups)
            with _REGION_LOCK:  # forests are shared by every thread of a vocabulary
                while len(self._trees) >= self.KEPT:
                    self._trees.pop(next(iter(self._trees)))
                self._trees[key] = got
        return got

    def walk(self, index, roots: np.ndarray):
        """``(token ids, next states)`` of the tokens at or below the exit nodes with a
        live next state, the exit nodes of group ``g`` being reached in state
        ``roots[g]``; states are read through ``index._lookup`` (so they are
        determinised, and a subclass's ``_fill`` hook runs, as in any walk)."""
        groups = np.flatnonzero(roots)  # DEAD is 0: the subtries of dead groups hold no token
        if len(groups) == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        t = self.trees(groups)
        dfa = index.dfa
        st = np.zeros(len(t.parent), dtype=dfa.table.dtype)
        ds = t.depth_start
        st[:ds[1]] = roots[groups]
        byte_class = dfa.byte_class
        for j in range(1, len(ds) - 1):
            a, b = ds[j], ds[j + 1]
            ps = st.take(t.parent[a:b])
            live = np.flatnonzero(ps)  # only the children of live nodes are looked up
            if len(live) == 0:
                break
            st[a + live] = index._lookup(ps[live], byte_class.take(t.byte[a + live]))
        nxt = st.take(t.node)
        keep = np.flatnonzero(nxt)
        return t.ids[keep], nxt[keep].astype(np.int64)


class _Trees:
    """The merged trees of some groups of an :class:`ExitForest`: roots ``0 ..
    len(groups)-1`` (the groups, in order); ``parent``/``byte``: per tree node, its
    parent and the byte read (roots: -1 / 0), numbered by depth below the exit
    (``depth_start``); ``ids``/``node``: every token at or below those groups' exit
    nodes and its tree node."""

    def __init__(self, v, exit_nodes, group_of, n_groups: int, groups):
        root = np.full(n_groups, -1, dtype=np.int64)
        root[groups] = np.arange(len(groups))
        at_exit = root[group_of]
        mine = at_exit >= 0
        fid = np.full(v.num_nodes, -1, dtype=np.int64)  # trie node -> tree node
        nodes = exit_nodes[mine]
        fid[nodes] = at_exit[mine]
        g = len(groups)
        parents, bytes_, starts = [np.full(g, -1, np.int64)], [np.zeros(g, np.uint8)], [0, g]
        seen = [nodes]
        while len(nodes):  # breadth-first by depth below the exits
            cs = v.child_start[nodes]
            nodes = _spans(cs, v.child_end[nodes] - cs)
            if len(nodes) == 0:
                break
            k = fid.take(v.node_parent[nodes]) * 256 + v.node_byte[nodes]
            uniq, inv = np.unique(k, return_inverse=True)
            fid[nodes] = starts[-1] + inv
            parents.append(uniq // 256)
            bytes_.append((uniq % 256).astype(np.uint8))
            starts.append(starts[-1] + len(uniq))
            seen.append(nodes)
        self.parent = np.concatenate(parents)
        self.byte = np.concatenate(bytes_)
        self.depth_start = starts
        nodes = np.concatenate(seen)  # the tokens of the visited trie nodes only
        ts = v.term_start[nodes]
        cnt = v.term_end[nodes] - ts
        has = np.flatnonzero(cnt)
        self.ids = v.term_ids[_spans(ts[has], cnt[has])].astype(np.int64)
        self.node = np.repeat(fid[nodes[has]], cnt[has])


def shared_walk(vocab, key, build):
    """The per-vocabulary walk stored under ``key``, from ``build()`` on first use
    (shared by every processor and thread of ``vocab``; the oldest of more than
    :attr:`RegionWalk.PER_VOCABULARY` walks is dropped)."""
    walk = _REGION_WALKS.get(vocab, {}).get(key, False)
    if walk is False:
        with _REGION_LOCK:
            walks = _REGION_WALKS.setdefault(vocab, {})
            walk = walks.get(key, False)
            if walk is False:
                walk = walks[key] = build()
                _WALKS_BUILT[vocab] = _WALKS_BUILT.get(vocab, 0) + 1
                while len(walks) > RegionWalk.PER_VOCABULARY:
                    del walks[next(iter(walks))]
    return walk
