"""Walks from a neighbour: a new state's token walk from one already done.

Inside a key name under ``additionalProperties`` the automaton is in a state
that allows nearly every string token, and each prefix of each known name is a
different state, so each would pay a full walk of the vocabulary's trie. Yet
for all but a few first bytes such a state ``s`` moves exactly where the plain
key body ``r`` moves: once the walks of ``s`` and ``r`` reach the same state
at a trie node, every token below that node ends in the same state from both.

So ``walk(s)`` is ``walk(r)`` with the subtries where the two walks differ
walked again from ``s`` (:func:`walk_near`): a sparse walk of the pairs
``(state from s, state from r)`` that stops wherever they meet. The tokens of
a subtrie are one contiguous range in the trie's pre-order
(:class:`PreOrder`), so a reference walk is kept as one array of next states
in that order, and the subtries ``s`` does not reach are cleared by ranges.
The result is exact: the same (token, next state) pairs as the plain walk.

>>> import numpy as np
>>> from hf_constrained.automaton import LazyDFA
>>> from hf_constrained.index import TokenIndex
>>> from hf_constrained.vocabulary import Vocabulary
>>> vocab = Vocabulary.from_token_bytes([bytes([b]) for b in range(256)] + [b"ab", b"abc", b"xy", None])
>>> dfa = LazyDFA.from_patterns([r"(ab|[a-z][a-z]*)!"])
>>> index = TokenIndex(dfa, vocab, eos_token_ids=[260])
>>> s, r = dfa.walk(dfa.starts[0], b"a"), dfa.walk(dfa.starts[0], b"x")
>>> ids, st = index._walk_all(r)
>>> ref = PreOrder.shared(vocab).scatter(ids, st)
>>> near = walk_near(index, s, r, ref, budget=10_000)
>>> plain = index._walk_all(s)
>>> sorted(zip(*map(np.ndarray.tolist, near))) == sorted(zip(*map(np.ndarray.tolist, plain)))
True
>>> packed, succ = mask_near(index, s, r, Reference(PreOrder.shared(vocab), ids, st, 264), budget=10_000)
>>> np.array_equal(packed, index._compute_mask(s)[0]), np.array_equal(succ, np.unique(plain[1]))
(True, True)
"""

from __future__ import annotations

import weakref

import numpy as np

from .constraint import DEAD, pack_ids

#: vocabulary -> its PreOrder
_LAYOUTS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _spans(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenation of ``range(starts[i], starts[i] + counts[i])`` for all i (vectorised;
    the index's sparse walks use it too)."""
    # (array methods, not the np.* wrappers: a sparse walk calls this once per trie level)
    ends = counts.cumsum()
    if len(ends) == 0:
        return np.zeros(0, dtype=np.int64)
    out = np.arange(int(ends[-1]), dtype=np.int64)
    out += (starts - ends + counts).repeat(counts)
    return out


class PreOrder:
    """The vocabulary's tokens in the pre-order of its byte trie.

    ``start[n]``: position of the first token at or below node ``n``; ``own[n]``:
    tokens ending at ``n`` (they come first); ``sub[n]``: tokens at or below
    ``n``; ``ids``: token id at each position; ``pos``: position of each token id
    (-1: not in the trie); ``first_byte``: tokens whose first byte is each byte.

    >>> from hf_constrained.vocabulary import Vocabulary
    >>> v = Vocabulary.from_token_bytes([b"a", b"b", b"ab", b"ba", b"abc"])
    >>> p = PreOrder(v)
    >>> [v.token_bytes[i] for i in p.ids.tolist()]   # depth first: a subtrie is one range
    [b'a', b'ab', b'abc', b'b', b'ba']
    >>> int(p.first_byte[ord("a")]), int(p.first_byte[ord("b")])
    (3, 2)
    """

    def __init__(self, v):
        n, ds = v.num_nodes, v.depth_start
        own = (v.term_end - v.term_start).astype(np.int64)
        sub = own.copy()
        kids = (v.child_end - v.child_start) > 0
        for d in range(len(ds) - 2, 0, -1):  # bottom-up: a node's tokens are its own + its children's
            a, b = int(ds[d]), int(ds[d + 1])
            pa, pb = int(ds[d - 1]), int(ds[d])
            has = np.flatnonzero(kids[pa:pb]) + pa  # parents, in order; their children are contiguous
            sub[has] += np.add.reduceat(sub[a:b], v.child_start[has] - a)
        start = np.zeros(n, dtype=np.int64)
        for d in range(1, len(ds) - 1):  # top-down: after the parent's own tokens and earlier siblings
            a, b = int(ds[d]), int(ds[d + 1])
            par = v.node_parent[a:b]
            before = np.cumsum(sub[a:b]) - sub[a:b]
            before -= before[v.child_start[par] - a]
            start[a:b] = start[par] + own[par] + before
        # int32 (half the memory: about 4.3 MB for DeepSeek's 274k nodes and 129k tokens)
        self.start, self.own, self.sub = start.astype(np.int32), own.astype(np.int32), sub.astype(np.int32)
        term_pos = start[v.term_node] + (np.arange(len(v.term_node)) - v.term_start[v.term_node])
        self.ids = np.empty(len(term_pos), dtype=np.int32)
        self.ids[term_pos] = v.term_ids
        self.pos = np.full(v.size, -1, dtype=np.int32)
        self.pos[v.term_ids] = term_pos
        root_kids = np.arange(int(v.child_start[0]), int(v.child_end[0]))
        self.first_byte = np.zeros(256, dtype=np.int64)
        self.first_byte[v.node_byte[root_kids]] = sub[root_kids]
        self.num_tokens = len(term_pos)

    @classmethod
    def shared(cls, vocab) -> "PreOrder":
        """The layout of ``vocab``, built once per vocabulary (5 ms for 129k tokens)."""
        got = _LAYOUTS.get(vocab)
        if got is None:
            got = _LAYOUTS[vocab] = cls(vocab)
        return got

    def scatter(self, ids: np.ndarray, states: np.ndarray) -> np.ndarray:
        """A walk's (token id, next state) pairs as next states in pre-order (0: dead)."""
        arr = np.zeros(self.num_tokens, dtype=np.int32)
        arr[self.pos[ids]] = states
        return arr


class Reference:
    """A walk kept to walk neighbours from: next state of every token in pre-order
    (``state_arr``, 0: dead), its packed token bits (no EOS) and its distinct next
    states with the number of tokens leading to each (``succ``, ``counts``).

    >>> from hf_constrained.vocabulary import Vocabulary
    >>> v = Vocabulary.from_token_bytes([b"a", b"b", b"ab"])
    >>> ref = Reference(PreOrder(v), np.array([0, 2]), np.array([5, 7]), 8)
    >>> ref.state_arr.tolist(), ref.packed.tolist(), ref.succ.tolist(), ref.counts.tolist()
    ([5, 7, 0], [5], [5, 7], [1, 1])
    """

    def __init__(self, layout: PreOrder, ids: np.ndarray, states: np.ndarray, width: int):
        self.state_arr = layout.scatter(ids, states)
        self.packed = pack_ids(ids, width)
        counts = np.bincount(states)
        self.succ = np.flatnonzero(counts)
        self.counts = counts[self.succ]

    @classmethod
    def from_region(cls, layout: PreOrder, walk, states, more_ids, more_states, width: int):
        """The reference of a state with a lexical region, from the region's shared walk
        (``walk``, :class:`~hf_constrained.region.RegionWalk`: its tokens' end states,
        bits and counts are kept on it once per vocabulary) and the state's exits."""
        k = len(states)
        pre_end = getattr(walk, "pre_end", None)
        if pre_end is None:  # per region walk: the region state each pre-order position ends in
            pre_end = np.full(layout.num_tokens, 127, dtype=np.int8)
            pre_end[layout.pos[walk.ids]] = walk.end
            walk.end_counts = np.bincount(walk.end, minlength=k)
            walk.pre_end = pre_end  # last: other threads test for it (RegionWalks are shared)
        self = cls.__new__(cls)
        lut = np.zeros(128, dtype=np.int32)
        lut[:k] = states
        self.state_arr = lut.take(pre_end)
        self.state_arr[layout.pos[more_ids]] = more_states
        self.packed = walk.packed_bits(width).copy()
        if len(more_ids):
            np.bitwise_or.at(self.packed, more_ids >> 3, (1 << (more_ids & 7)).astype(np.uint8))
        counts = np.bincount(np.concatenate([states, more_states]),
                             weights=np.concatenate([walk.end_counts, np.ones(len(more_states))]))
        self.succ = np.flatnonzero(counts)
        self.counts = counts[self.succ].astype(np.int64)
        return self


def differences(index, s: int, r: int, budget: int):
    """``(positions, next states)``: the pre-order positions (:class:`PreOrder`)
    where the walk of ``s`` differs from the walk of ``r`` and what ``s`` gives
    there (0: dead), or None when more than ``budget`` trie nodes differ.

    A sparse walk of the pairs (state from ``s``, state from ``r``) that drops a
    trie node where the two meet (every token below it ends in the same state
    from both) and clears the subtrie of a node where ``s`` dies.

    >>> from hf_constrained.automaton import LazyDFA
    >>> from hf_constrained.index import TokenIndex
    >>> from hf_constrained.vocabulary import Vocabulary
    >>> v = Vocabulary.from_token_bytes([bytes([b]) for b in range(256)] + [b"ab", None])
    >>> dfa = LazyDFA.from_patterns([r"[ab]c*|bd"])
    >>> index = TokenIndex(dfa, v, eos_token_ids=[257])
    >>> a, b = dfa.walk(dfa.starts[0], b"a"), dfa.walk(dfa.starts[0], b"b")
    >>> pos, new = differences(index, b, a, budget=1000)   # b also allows "d"
    >>> [v.token_bytes[int(PreOrder.shared(v).ids[p])] for p in pos], (new > 0).tolist()
    ([b'd'], [True])
    """
    v, layout = index.vocab, PreOrder.shared(index.vocab)
    nodes = np.zeros(1, dtype=np.int64)
    ss = np.array([s], dtype=index.dfa.table.dtype)
    rs = np.array([r], dtype=index.dfa.table.dtype)
    set_at, set_n, set_to = [], [], []  # ranges of positions to overwrite, and the state they get
    walked = 0
    while len(nodes) and s != r:
        cs = v.child_start[nodes]
        counts = v.child_end[nodes] - cs
        child = _spans(cs, counts)
        walked += len(child)
        if walked > budget:
            return None
        cls = index._classes(index._node_cls, child)
        sc = index._lookup(ss.repeat(counts), cls)
        rc = index._lookup(rs.repeat(counts), cls)
        differ = (sc != rc).nonzero()[0]  # where they meet, r's walk below is s's
        child, sc, rc = child[differ], sc[differ], rc[differ]
        dead = sc == DEAD
        if dead.any():  # s dies there: none of the subtrie's tokens
            k = child[dead]
            set_at.append(layout.start[k])
            set_n.append(layout.sub[k])
            set_to.append(np.zeros(len(k), dtype=sc.dtype))
            live = ~dead
            child, sc, rc = child[live], sc[live], rc[live]
        set_at.append(layout.start[child])  # the tokens ending here get s's state
        set_n.append(layout.own[child])
        set_to.append(sc)
        nodes, ss, rs = child, sc, rc
    if not set_at:
        return np.zeros(0, np.int64), np.zeros(0, np.int32)
    n = np.concatenate(set_n)
    return _spans(np.concatenate(set_at), n), np.repeat(np.concatenate(set_to), n)


def walk_near(index, s: int, r: int, ref: np.ndarray, budget: int):
    """(token ids, next states) of every token with a live next state from ``s``,
    from the walk ``ref`` of state ``r`` (:meth:`PreOrder.scatter`); None when the
    two walks differ on more than ``budget`` trie nodes (then walk ``s`` plainly).

    Exact for any two states of ``index.dfa``: only the subtries where the states
    reached from ``s`` and from ``r`` differ are walked again.
    """
    got = differences(index, s, r, budget)
    if got is None:
        return None
    arr = ref.copy()
    arr[got[0]] = got[1]
    keep = np.flatnonzero(arr)
    return PreOrder.shared(index.vocab).ids[keep], arr[keep].astype(np.int64)


def mask_near(index, s: int, r: int, ref: Reference, budget: int):
    """``(packed token bits, sorted distinct next states)`` of ``s`` (EOS not
    included) from the :class:`Reference` walk of ``r``, or None as in
    :func:`walk_near`: the same answer with work in proportion to the tokens
    whose next state differs, not to the vocabulary."""
    got = differences(index, s, r, budget)
    if got is None:
        return None
    pos, new = got
    packed = ref.packed.copy()
    if len(pos) == 0:
        return packed, ref.succ.copy()
    ids = PreOrder.shared(index.vocab).ids[pos]
    byte, bit = ids >> 3, (1 << (ids & 7)).astype(np.uint8)
    np.bitwise_and.at(packed, byte, ~bit)
    live = new != DEAD
    np.bitwise_or.at(packed, byte[live], bit[live])
    old = ref.state_arr[pos]
    gone, n_gone = np.unique(old[old != DEAD], return_counts=True)
    at = np.searchsorted(ref.succ, gone)
    kept = np.ones(len(ref.succ), dtype=bool)
    kept[at[n_gone == ref.counts[at]]] = False  # every token that led there now differs
    succ = np.union1d(ref.succ[kept], new[live])
    return packed, succ.astype(np.int64)


class Neighbours:
    """The walks from a neighbour of one :class:`~hf_constrained.index.TokenIndex`:
    which state to walk from, and the reference walks kept (bounded).

    The neighbour of a new state is the cheapest, weighted by the tokens under each
    first byte where the two rows differ, of the references kept and of the state's
    most common successor; a successor becomes a reference only when it has a
    lexical region (its own walk is then the region's shared walk plus its exits).

    >>> from hf_constrained.automaton import LazyDFA
    >>> from hf_constrained.index import TokenIndex
    >>> from hf_constrained.vocabulary import Vocabulary
    >>> vocab = Vocabulary.from_token_bytes([bytes([b]) for b in range(256)] + [b"ab", b"abc", b"xy", None])
    >>> dfa = LazyDFA.from_patterns([r'"(?:ab|[^"b][^"]*)"'])
    >>> index = TokenIndex(dfa, vocab, eos_token_ids=[260])
    >>> s = dfa.walk(dfa.starts[0], b'"a')          # like the body [^"]*, except after "b"
    >>> packed, succ = index._near.mask(s)
    >>> index._near.walks, np.array_equal(packed, index._compute_mask(s)[0])
    (1, True)
    """

    #: reference walks kept (0.5 MB each for 129k tokens), oldest dropped first
    REFS = 4
    #: a neighbour is used when the tokens under the first bytes where its row and the
    #: state's row differ are at most this share of the vocabulary
    MAX_SHARE = 0.5
    #: states whose live first bytes hold less than this share of the vocabulary's
    #: tokens are walked plainly (sparse: cheaper than looking for a neighbour)
    MIN_LIVE = 0.25
    #: trie nodes a walk from a neighbour may visit, as a share of the trie's (plus
    #: 1,024: the root's children alone are up to 256), before it gives up for the
    #: plain walk
    BUDGET = 0.25

    def __init__(self, index):
        self.index = index
        self.refs: dict = {}  # state -> Reference, most recently used last
        self.walks = 0  # masks computed from a neighbour
        self._weight = None  # per byte class, tokens whose first byte is in it

    def __len__(self) -> int:
        return len(self.refs)

    def mask(self, q: int):
        """``(packed bits without EOS, sorted successors)`` of state ``q`` from a
        neighbour's walk, or None (no neighbour worth it: walk ``q`` plainly)."""
        index = self.index
        dfa = index.dfa
        if not dfa.expanded[q]:
            with index.lock:
                dfa.expand(q)
        layout = PreOrder.shared(index.vocab)
        w = self._weight
        if w is None:
            w = self._weight = np.bincount(dfa.byte_class, weights=layout.first_byte, minlength=dfa.n_classes)
        row = dfa.table[q]
        if float(w[row != DEAD].sum()) < self.MIN_LIVE * layout.num_tokens:
            return None  # a restrictive state: its plain walk is sparse and cheap
        vals, inv = np.unique(row, return_inverse=True)
        mass = np.bincount(inv, weights=w)
        mass[(vals == DEAD) | (vals == q)] = -1
        top = int(vals[int(np.argmax(mass))]) if mass.max() > 0 else DEAD
        best, best_cost = DEAD, self.MAX_SHARE * layout.num_tokens
        with index.lock:  # the references are shared by the threads using this index
            for r in [*self.refs, top]:
                if r == DEAD or r == q:
                    continue
                if not dfa.expanded[r]:
                    dfa.expand(r)
                cost = float(w[row != dfa.table[r]].sum())
                if cost <= best_cost:
                    best, best_cost = r, cost
            if best == DEAD:
                return None
            ref = self.refs.pop(best, None)
            if ref is None:
                parts = index._region_parts(best)
                if parts is None:
                    return None
                ref = Reference.from_region(layout, *parts, index._bits_width())
                while len(self.refs) >= self.REFS:
                    del self.refs[next(iter(self.refs))]
            self.refs[best] = ref
        budget = int(self.BUDGET * index.vocab.num_nodes) + 1024 if self.BUDGET > 0 else 0
        got = mask_near(index, q, best, ref, budget)
        if got is not None:
            self.walks += 1
        return got
