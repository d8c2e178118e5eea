"""Token index: which tokens each automaton state allows, computed on demand.

For a state ``q`` the allowed tokens are those whose bytes lead from ``q`` to
a live (non-dead) state; EOS is allowed iff ``q`` is accepting. The walk is
done once per state, level by level over the vocabulary's byte trie with numpy
(work proportional to the live trie nodes, no Python loop over tokens), and
the result is cached as a packed bitmask.

A state inside a JSON string is walked through its lexical region
(:mod:`hf_constrained.region`): the tokens that stay in the string body are
walked once per vocabulary, only those that leave it are walked per state.
Another permissive state that moves like one of those on most first bytes (a
state inside a key name, under ``additionalProperties``) takes that state's
walk and walks again only the subtries where the two differ
(:mod:`hf_constrained.neighbour`).

>>> from hf_constrained.vocabulary import Vocabulary
>>> vocab = Vocabulary.from_token_bytes([bytes([b]) for b in range(256)] + [b"12", b"ab", None])
>>> dfa = LazyDFA.from_patterns([r"[0-9]+"])
>>> index = TokenIndex(dfa, vocab, eos_token_ids=[258])
>>> index.allowed(dfa.starts[0]).tolist()             # the ten digits and "12"; no EOS yet
[48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 256]
>>> q = int(index.next_states([dfa.starts[0]], [256])[0])
>>> index.allowed(q).tolist()[-2:]                    # a match: EOS may follow
[256, 258]
"""

from __future__ import annotations

import threading
import time
import weakref

import numpy as np

from .automaton import DEAD, LazyDFA
from .counted_region import CountedRegions, CountedWalk
from .errors import EmptyLanguageError, StateLimitError
from .neighbour import Neighbours, _spans
from .region import RegionWalk, find_region
from .vocabulary import Vocabulary, link_trie

from .constraint import FINISHED, pack_ids, packed_ids  # noqa: E402  (a row that emitted EOS: only EOS/pad may follow)


def harvest_levels(v, a0: int, run: list, out_ids: list, out_states: list) -> None:
    """The tokens ending at the consecutive dense trie levels in ``run`` (the states of
    their nodes, level by level from the node index ``a0``): their ids and states, dead
    ones dropped, appended to ``out_ids`` / ``out_states``; ``run`` is emptied."""
    cur = np.concatenate(run) if len(run) > 1 else run[0]
    t0, t1 = int(v.term_start[a0]), int(v.term_end[a0 + len(cur) - 1])
    if t1 > t0:
        st = cur[v.term_node[t0:t1] - a0]
        keep = st != DEAD
        out_ids.append(v.term_ids[t0:t1][keep])
        out_states.append(st[keep])
    run.clear()


def _parent_relative(trie) -> np.ndarray:
    """Per node, its parent's index within the parent's depth (what the dense walk gathers with)."""
    ds = trie.depth_start
    depth_of = np.repeat(np.arange(len(ds) - 1), np.diff(ds))
    return trie.node_parent - ds[np.maximum(depth_of - 1, 0)]


class ClassTrie:
    """The vocabulary trie with bytes replaced by the automaton's byte classes.

    Tokens whose bytes fall in the same classes walk the automaton
    identically, so siblings with equal classes are merged (level by level,
    vectorised): for a JSON Schema regex the 274k-node DeepSeek trie shrinks
    to about half, and every per-state walk with it. Same array layout as
    :class:`~hf_constrained.vocabulary.Vocabulary`'s trie plus ``node_cls``.
    """

    def __init__(self, vocab: Vocabulary, byte_class: np.ndarray):
        for _ in self.steps(vocab, byte_class):
            pass

    @classmethod
    def incremental(cls, vocab: Vocabulary, byte_class: np.ndarray):
        """``(trie, steps)``: the trie is complete once the generator ``steps`` is
        exhausted; each step builds one trie level (or links the trie at the end)
        and yields the byte-trie nodes it handled, so a caller can spread the
        10-20 ms of a 129k-token build over several calls.

        >>> from hf_constrained.vocabulary import Vocabulary
        >>> vocab = Vocabulary.from_token_bytes([bytes([b]) for b in range(256)] + [b"ab", b"ac", None])
        >>> bc = LazyDFA.from_patterns([r"a[bc]"]).byte_class
        >>> trie, steps = ClassTrie.incremental(vocab, bc)
        >>> sum(1 for _ in steps), trie.num_nodes == ClassTrie(vocab, bc).num_nodes < vocab.num_nodes
        (3, True)
        """
        self = cls.__new__(cls)
        return self, self.steps(vocab, byte_class)

    def steps(self, vocab: Vocabulary, byte_class: np.ndarray):
        """Build the trie level by level (see :meth:`incremental`)."""
        n_classes = int(byte_class.max()) + 1
        node_cls = byte_class[vocab.node_byte].astype(np.int64)
        ds = vocab.depth_start
        qnode = np.zeros(vocab.num_nodes, dtype=np.int64)  # byte-trie node -> class-trie node
        parents, classes, starts = [np.full(1, -1, np.int64)], [np.zeros(1, np.int64)], [0, 1]
        next_id = 1
        for d in range(1, len(ds) - 1):
            a, b = int(ds[d]), int(ds[d + 1])
            key = qnode[vocab.node_parent[a:b]] * n_classes + node_cls[a:b]
            first = np.empty(len(key), dtype=bool)
            first[0] = True
            if (key[1:] >= key[:-1]).all():
                # Byte classes are byte ranges and siblings are sorted by byte, so
                # without merged parents the keys come sorted: no sort.
                np.not_equal(key[1:], key[:-1], out=first[1:])
                uniq, inv = key[first], np.cumsum(first) - 1
            else:
                # Merged parents interleave their children's classes; the keys stay
                # sorted by parent, nearly sorted overall: a stable (run-aware) sort.
                perm = np.argsort(key, kind="stable")
                sk = key[perm]
                np.not_equal(sk[1:], sk[:-1], out=first[1:])
                uniq = sk[first]
                inv = np.empty(len(key), dtype=np.int64)
                inv[perm] = np.cumsum(first) - 1
            qnode[a:b] = next_id + inv
            parents.append(uniq // n_classes)
            classes.append(uniq % n_classes)
            next_id += len(uniq)
            starts.append(next_id)
            yield b - a
        par = np.concatenate(parents)
        self.node_parent = par
        self.node_cls = np.concatenate(classes).astype(np.int32)
        self.depth_start = np.array(starts, dtype=np.int64)
        self.num_nodes = len(par)
        link_trie(self, par, vocab.term_ids, qnode[vocab.term_node])
        yield len(vocab.term_ids)


#: vocabulary -> :func:`_parent_relative` of its byte trie
_BYTE_REL: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
class TokenIndex:
    """Lazily computed per-state token masks and token-level transitions."""

    def __init__(self, dfa: LazyDFA, vocab: Vocabulary, eos_token_ids, *, pad_token_id=None):
        self.dfa = dfa
        self.vocab = vocab
        self.eos_ids = np.array(sorted(set(int(e) for e in eos_token_ids)), dtype=np.int64)
        if len(self.eos_ids) == 0:
            raise ValueError("at least one EOS token id is needed")
        self.pad_token_id = pad_token_id
        # held where DFA states are determinised (and by RegexConstraint where masks are
        # computed); lookups of states already built take no lock
        self.lock = threading.RLock()
        self._node_cls = None  # per byte-trie node, its byte class (see node_cls)
        self._class_trie: ClassTrie | None = None
        self._class_build = None  # (trie, steps) while the class trie is being built
        self._dense_nodes = 0  # byte-trie nodes walked densely so far (see CLASS_TRIE_AFTER)
        self._byte_rel = _BYTE_REL.get(vocab)
        if self._byte_rel is None:  # per vocabulary, not per processor (part of the first mask)
            self._byte_rel = _BYTE_REL[vocab] = _parent_relative(vocab)
        self._bits: dict[int, np.ndarray] = {}  # state -> packed allowed-token bits
        self._succ: dict[int, np.ndarray] = {}  # state -> states its allowed tokens lead to
        self._live: np.ndarray | None = None  # token-level liveness (partial vocabularies)
        self._is_eos = np.zeros(max(vocab.size, int(self.eos_ids.max()) + 1), dtype=bool)
        self._is_eos[self.eos_ids] = True
        self._byte_class = dfa.byte_class.tolist()
        # bytes a token walk reads at most (+1: the first-space rule of start states)
        self._max_token_bytes = int(vocab.tok_len.max()) + 1 if vocab.size else 1
        self._representative = getattr(dfa, "mask_representative", None)  # a LazyDFA's
        self._counted = CountedRegions(dfa) if isinstance(dfa, LazyDFA) else None
        self._near = Neighbours(self) if isinstance(dfa, LazyDFA) else None  # see _mask_near
        if not vocab.full_byte_coverage:
            self._compute_token_liveness()

    # -- walking -----------------------------------------------------------
    @property
    def node_cls(self) -> np.ndarray:
        """The byte class of every byte-trie node, computed on the first dense walk
        (a 274k-element gather, about 0.2 ms: sparse walks, such as the start state's
        first mask, read the classes of the nodes they visit only)."""
        if self._node_cls is None:
            self._node_cls = self.dfa.byte_class.take(self.vocab.node_byte)
        return self._node_cls

    def _classes(self, node_cls, nodes) -> np.ndarray:
        """Classes of trie ``nodes`` (an index array or a slice; ``node_cls`` None:
        byte-trie nodes, from their bytes)."""
        if node_cls is not None:
            return node_cls[nodes]
        return self.dfa.byte_class.take(self.vocab.node_byte[nodes])

    def _lookup(self, states: np.ndarray, classes: np.ndarray) -> np.ndarray:
        """``table[states, classes]``, expanding the rows not computed yet.

        One ``take`` from the flat table (about 4x faster than a 2-D fancy index
        over a whole trie level), in int32 while the table's size allows it.
        """
        dfa = self.dfa
        if dfa.table.size >= 2 ** 31:
            states = states.astype(np.int64)
        flat = states * dfa.n_classes
        flat += classes
        cur = dfa.table.ravel().take(flat)
        if len(cur) and cur.min() < 0:  # cells not computed yet hold -1
            miss = cur < 0
            self._fill(states[miss], classes[miss])
            cur = dfa.table.ravel().take(flat)
        return cur

    def _fill(self, states: np.ndarray, classes: np.ndarray) -> None:
        """Compute the missing cells ``table[states, classes]``: here their whole rows."""
        with self.lock:
            if len(states) > self.FILL_ROWS:
                self.dfa.expand_many(states)
                return
            dfa = self.dfa  # a few rows (a sparse level): ascending, as expand_many, without np.unique
            for s in sorted(set(states.tolist())):
                if not dfa.expanded[s]:
                    dfa.expand(s)

    #: a sparse level of one live node reads its children as one slice of the level and
    #: their states as one gather from its state's row, expanded whole (:meth:`_children_one`;
    #: False: the general path, which the tests compare it with, and what an automaton that
    #: fills single cells needs: the grammar's index)
    ONE_NODE = True

    #: at most this many cells to fill are expanded on Python ints (``expand_many`` sorts
    #: with ``np.unique``: a few µs per sparse level of a first visit)
    FILL_ROWS = 64

    #: byte-trie nodes walked densely (by permissive states outside a lexical
    #: region, such as a string with a maxLength), in whole tries, before the class
    #: trie is built: it takes 10-25 ms for 129k tokens and then saves about a third
    #: of each dense walk, so it is built only when that pays off (or for
    #: :meth:`precompute`); building it at the fifth mask put a 10-25 ms step into
    #: every generation
    CLASS_TRIE_AFTER = 32

    #: byte-trie nodes of the class trie's construction done per mask (about 1-2 ms),
    #: so that building it never puts one long step into a generation
    CLASS_TRIE_STEP_NODES = 40_000

    #: a dense level of at most this many byte-trie nodes reads its nodes' classes
    #: alone: the first byte level of every walk is dense (the root is one node), and
    #: the whole trie's classes (:attr:`node_cls`, ~0.25 ms at 129k tokens) would
    #: make the start state's first mask cost ten times its walk
    DENSE_LEVEL_GATHER = 4096

    def _build_class_trie(self, budget: int | None) -> None:
        """Advance the class trie's construction by about ``budget`` nodes (None: finish)."""
        if self._class_build is None:
            self._class_build = ClassTrie.incremental(self.vocab, self.dfa.byte_class)
        trie, steps = self._class_build
        done = 0
        for n in steps:
            done += n
            if budget is not None and done >= budget:
                return
        self._class_trie, self._class_rel, self._class_build = trie, _parent_relative(trie), None

    def _walk_structure(self):
        if self._class_trie is None and self._dense_nodes >= self.CLASS_TRIE_AFTER * self.vocab.num_nodes:
            self._build_class_trie(self.CLASS_TRIE_STEP_NODES)
        if self._class_trie is not None:
            return self._class_trie, self._class_trie.node_cls, self._class_rel
        return self.vocab, self._node_cls, self._byte_rel

    def _walk_trie(self, q: int):
        """All (token id, next state) pairs with a live next state from ``q``
        (through the state's lexical region when it has one, see :meth:`_region`)."""
        got = self._walk_region(q)
        return got if got is not None else self._walk_all(q)

    def _walk_all(self, q: int):
        """All (token id, next state) pairs with a live next state from ``q``.

        Level by level over the trie. A level is walked *sparsely* (only the
        children of live nodes) while few nodes are live, and *densely* (every
        node of the depth, two gathers) once many are: restrictive states cost
        little, permissive ones (inside a JSON string) cost a few gathers per
        trie node instead of a dozen numpy calls per frontier.
        """
        v, node_cls, parent_rel = self._walk_structure()
        ds = v.depth_start
        dsl = ds.tolist()  # the level bounds as Python ints (several reads per level)
        n_depths = len(ds) - 1
        out_ids, out_states = [], []
        run: list = []  # states of consecutive dense levels, whose tokens are read at once

        def harvest():
            if run:
                harvest_levels(v, dsl[d0], run, out_ids, out_states)

        # level 0: the root, sparse
        nodes = np.zeros(1, dtype=np.int64)
        states = np.array([q], dtype=self.dfa.table.dtype)
        seen_n: list = []  # live nodes (and their states) of the sparse levels
        seen_s: list = []
        dense = None  # state per node of the current depth when walking densely
        for d in range(1, n_depths):
            a, b = dsl[d], dsl[d + 1]
            if dense is None and len(nodes) * 4 > a - dsl[d - 1]:
                dense = np.zeros(a - dsl[d - 1], dtype=states.dtype)
                dense[nodes - dsl[d - 1]] = states
            if dense is not None:
                if v is self.vocab:
                    self._dense_nodes += b - a
                    if node_cls is None and b - a > self.DENSE_LEVEL_GATHER:
                        node_cls = self.node_cls
                ps = dense.take(parent_rel[a:b])
                cur = self._lookup(ps, self._classes(node_cls, slice(a, b)))  # int32 states, no widening pass
                if not run:
                    d0 = d
                run.append(cur)
                n_live = np.count_nonzero(cur)
                if n_live == 0:
                    break
                if n_live * 8 < b - a:  # back to sparse
                    harvest()
                    live = cur.nonzero()[0]
                    nodes, states, dense = live + a, cur[live], None
                else:
                    dense = cur
                continue
            nodes, states = self._children(v, node_cls, nodes, states)
            if len(nodes) == 0:
                break
            seen_n.append(nodes)
            seen_s.append(states)
        harvest()
        return self._walk_result(v, seen_n, seen_s, out_ids, out_states)

    def _walk_result(self, v, seen_n: list, seen_s: list, out_ids: list, out_states: list):
        """A walk's (token ids, states): the dense levels' harvests in ``out_ids`` /
        ``out_states`` plus the tokens of all sparse levels (``seen_n``/``seen_s``), read at once."""
        if seen_n:
            ids, states = self._tokens_at(v, seen_n, seen_s)
            out_ids.append(ids)
            out_states.append(states)
        if not out_ids:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return np.concatenate(out_ids), np.concatenate(out_states).astype(np.int64)

    def _children(self, v, node_cls, nodes: np.ndarray, states: np.ndarray):
        """The live children of trie ``nodes`` (in ``states``) and their states."""
        if len(nodes) == 1 and self.ONE_NODE:  # most sparse levels of a first visit
            return self._children_one(v, node_cls, nodes.item(0), states.item(0))
        cs = v.child_start[nodes]
        counts = v.child_end[nodes] - cs
        child = _spans(cs, counts)
        nxt = self._lookup(states.repeat(counts), self._classes(node_cls, child))
        keep = nxt.nonzero()[0]  # DEAD is 0
        return child[keep], nxt[keep]

    def _children_one(self, v, node_cls, node: int, s: int):
        """:meth:`_children` of one node in one state: its children are one range of
        the level, read as slices, and their states one gather from ``s``'s row (the
        row expanded first when it is not computed yet, as :meth:`_fill` does for a
        few cells that read -1: a :class:`LazyDFA` computes rows whole)."""
        cs, ce = v.child_start.item(node), v.child_end.item(node)
        if ce <= cs:
            return np.zeros(0, np.int64), np.zeros(0, self.dfa.table.dtype)
        dfa = self.dfa
        if not dfa.expanded[s]:
            with self.lock:
                if not dfa.expanded[s]:
                    dfa.expand(s)
        nxt = dfa.table[s].take(self._classes(node_cls, slice(cs, ce)))
        keep = nxt.nonzero()[0]  # DEAD is 0
        return keep + cs, nxt[keep]

    @staticmethod
    def _tokens_at(v, nodes: list, states: list):
        """(token ids, states) of the tokens ending at the (node lists, state lists)."""
        nodes = np.concatenate(nodes) if len(nodes) > 1 else nodes[0]
        states = np.concatenate(states) if len(states) > 1 else states[0]
        ts = v.term_start[nodes]
        tcount = v.term_end[nodes] - ts
        has = tcount.nonzero()[0]
        tcount = tcount[has]
        return v.term_ids[_spans(ts[has], tcount)], states[has].repeat(tcount)

    # -- lexical regions ------------------------------------------------------
    #: a state with at least this many bytes looping back to itself (a string
    #: body, free text) is walked through its lexical region
    REGION_MIN_LOOPS = 16
    #: bounds of the region search: transitions deep, states
    REGION_DEPTH, REGION_STATES = 3, 48

    def _region(self, q: int):
        """``(states, local table)`` of the lexical region of ``q``, or None
        (see :func:`hf_constrained.region.find_region`)."""
        return find_region(self.dfa, q, self.REGION_MIN_LOOPS, self.REGION_DEPTH, self.REGION_STATES)

    def _walk_region(self, q: int):
        """:meth:`_walk_all` for a state with a lexical region, or None without one.

        Tokens that stay inside the region come from the region's shared walk
        (their next state is the region state they end in); tokens that leave it
        are walked from where they leave, sparsely.
        """
        parts = self._region_parts(q)
        if parts is None:
            return None
        walk, states, more_ids, more_states = parts
        return np.concatenate([walk.ids, more_ids]), np.concatenate([states[walk.end], more_states])

    def _region_parts(self, q: int):
        """``(shared region walk, region states, ids, next states of the tokens that
        leave the region)`` for ``q``, or None when ``q`` has no (useful) region."""
        region = self._region(q)
        if region is None:
            return None
        states, table = region
        # Over bytes, not this automaton's classes, the local table means the same in
        # every processor: the walk of a JSON string body is done once per vocabulary.
        by_byte = table[:, self.dfa.byte_class]
        walk = RegionWalk.shared(self.vocab, by_byte)
        if walk is None:
            return None
        more_ids, more_states = walk.exit_walk(self, states)  # the exits, merged per (state, byte)
        return walk, states, more_ids, more_states

    def _mask_near(self, q: int):
        """``(packed bits without EOS, successors)`` of ``q`` from a neighbouring
        state's walk (:class:`hf_constrained.neighbour.Neighbours`), or None."""
        return self._near.mask(q) if self._near is not None and q > 0 else None

    @property
    def near_walks(self) -> int:
        """Masks computed so far from a neighbour's walk."""
        return self._near.walks if self._near is not None else 0

    def _walk_from(self, v, node_cls, nodes: np.ndarray, states: np.ndarray):
        """(token id, next state) pairs at and below trie ``nodes`` (ascending, any
        depths) reached in ``states``: a sparse walk, level by level (a counted region's
        exits, once per repetition; a lexical region's exits, walked once per state, take
        :class:`~hf_constrained.region.ExitForest` instead, which the tests compare with this)."""
        ds = v.depth_start
        depth = np.searchsorted(ds, nodes, side="right") - 1
        seen_n, seen_s = [], []
        cur_n, cur_s = nodes[:0], states[:0]
        i, n = 0, len(nodes)
        d = int(depth[0]) if n else len(ds)
        while d < len(ds) - 1:
            j = i + int(np.searchsorted(depth[i:], d, side="right"))
            if j > i:  # walks that start at this depth
                cur_n = np.concatenate([cur_n, nodes[i:j]])
                cur_s = np.concatenate([cur_s, states[i:j]])
                i = j
            if len(cur_n):
                seen_n.append(cur_n)
                seen_s.append(cur_s)
                cur_n, cur_s = self._children(v, node_cls, cur_n, cur_s)
                d += 1
            elif i < n:
                d = int(depth[i])
            else:
                break
        if not seen_n:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        ids, st = self._tokens_at(v, seen_n, seen_s)
        return ids, st.astype(np.int64)

    def _reachable(self, successors):
        """Live states reachable from the start states, breadth-first, each
        yielded once; ``successors(q)`` is called when the walk resumes after ``q``."""
        frontier = [s for s in dict.fromkeys(self.dfa.starts) if s != DEAD]
        seen = set(frontier)
        for q in frontier:  # the list grows while it is iterated
            yield q
            for t in successors(q).tolist():
                if t not in seen:
                    seen.add(t)
                    frontier.append(t)

    def _compute_token_liveness(self):
        """For vocabularies that cannot spell every byte: keep only tokens that
        lead to states from which a full match is still spellable."""
        succ: dict[int, np.ndarray] = {}
        for _ in self._reachable(lambda q: succ.setdefault(q, np.unique(self._walk_trie(q)[1]))):
            pass
        live = {q for q in succ if self.dfa.accepting[q]}
        changed = True
        while changed:
            changed = False
            for q, u in succ.items():
                if q not in live and any(int(t) in live for t in u):
                    live.add(q)
                    changed = True
        arr = np.zeros(self.dfa.num_states, dtype=bool)
        arr[list(live)] = True
        self._live = arr
        for p, s in enumerate(self.dfa.starts):
            if s == DEAD or not arr[s]:
                raise EmptyLanguageError(
                    f"pattern #{p} cannot be spelled with this tokenizer's vocabulary "
                    "(some bytes it needs have no token)")

    # -- public --------------------------------------------------------------
    def bits(self, q: int) -> np.ndarray:
        """Allowed tokens of state ``q`` as a packed little-endian bitmask (cached).

        Masks are stored packed (16 KB per state for 129k tokens) so a full
        index of a JSON Schema regex stays small on the host.
        """
        got = self._bits.get(q)
        if got is not None:
            return got
        if self._live is None and q > 0 and self._representative is not None:
            # states that differ only in counters no token can bring to a bound (a long
            # counted string) allow the same tokens: one mask for them all
            rep = self._representative(q, self._max_token_bytes)
            if rep != q:
                packed = self._bits[q] = self.bits(rep)
                return packed
        packed = self._counted_bits(q) if q > 0 and self._live is None and self._counted is not None \
            else None
        if packed is None:
            packed, succ = self._compute_mask(q)  # the one place where masks are walked
            if succ is not None:
                self._succ[q] = succ
        self._bits[q] = packed
        return packed

    def _counted_bits(self, q: int):
        """The mask of a state inside a counted string (``(body){lo,hi}``), from the
        shared walk of its counted region, without determinising the counter values
        its tokens reach; None when ``q`` has no counted region
        (see :mod:`hf_constrained.counted_region`). Its successors are walked only
        if asked for (:meth:`successors`)."""
        with self.lock:  # may create positions and states (the one after the repetition, parts)
            got = self._counted.locate(q)
            if got is None:
                return None
            shape, c, rest = got
            if rest:  # other positions too (a literal key next to a counted one): split q
                members = self.dfa._keys[q][0]
                parts = self.dfa._intern(members - rest, False), self.dfa._intern(rest, False)
        if rest:  # the sets of positions a token leads to are the union of the parts'
            return self.bits(parts[0]) | self.bits(parts[1])
        self._walk_structure()  # a class trie that pays goes on being built (a level per mask)
        walk = CountedWalk.shared(self.vocab, shape.table, shape.boundary)
        width = self._bits_width()
        packed = walk.packed_upto(width, shape.hi - c).copy()
        if shape.exits is None:
            shape.exits = self._counted_exits(walk, shape)
        ids, n = shape.exits
        keep = (n >= shape.lo - c) & (n <= shape.hi - c)
        if self.dfa.accepting[q]:
            ids, keep = np.concatenate([ids, self.eos_ids]), np.concatenate([keep, np.ones(len(self.eos_ids), bool)])
        if keep.any():
            packed |= pack_ids(ids[keep], width)
        if not packed.any():
            return None  # cannot happen for a live state: the plain walk raises
        return packed

    def _counted_exits(self, walk, shape):
        """(token ids, copies completed before leaving) of the tokens that leave a
        counted region and end in a live state: walked once, from the state after the
        repetition, which is the same for every counter value."""
        dfa, nodes, forest = self.dfa, walk.exit_nodes, walk.forest
        with self.lock:
            dfa.expand(shape.after_state)
        if forest is not None:  # every exit on one byte continues in one state: merged per byte
            roots = dfa.table[shape.after_state].take(dfa.byte_class.take(forest.keys))
            ids, _ = forest.walk(self, roots)
        else:
            nxt = dfa.table[shape.after_state, self._classes(self._node_cls, nodes)].astype(np.int64)
            live = nxt != DEAD
            ids, _ = self._walk_from(self.vocab, self._node_cls, nodes[live], nxt[live])
        return ids, walk.tok_exit_n[ids].astype(np.int64)

    def _compute_mask(self, q: int):
        """``(packed allowed bits, distinct successor states or None)`` of state ``q``."""
        width = self._bits_width()
        if q == DEAD or q == FINISHED:
            ids = self.eos_ids
            if self.pad_token_id is not None and q == FINISHED:
                ids = np.append(ids, self.pad_token_id)
            return pack_ids(ids, width), None
        parts = self._region_parts(q) if self._live is None else None
        if parts is not None:  # the region's tokens are shared, packed once
            walk, states, ids, nxt = parts
            # only the few exit tokens (and EOS) are set bit by bit: no 129k-wide pass
            packed = walk.packed_bits(width).copy()
            if self.dfa.accepting[q]:
                ids = np.concatenate([ids, self.eos_ids])
            np.bitwise_or.at(packed, ids >> 3, (1 << (ids & 7)).astype(np.uint8))
            if not packed.any():  # cannot happen for live states; guard against silent NaNs
                raise StateLimitError(f"internal error: state {q} allows no token")
            return packed, np.unique(np.concatenate([states[walk.end_set], nxt]))
        else:
            near = self._mask_near(q) if self._live is None else None
            if near is not None:  # a neighbour's mask with the tokens that differ changed
                packed, succ = near
                if self.dfa.accepting[q]:
                    np.bitwise_or.at(packed, self.eos_ids >> 3, (1 << (self.eos_ids & 7)).astype(np.uint8))
                if not packed.any():
                    raise StateLimitError(f"internal error: state {q} allows no token")
                return packed, succ
            ids, nxt = self._walk_all(q) if self._live is None else self._walk_trie(q)
            if self._live is not None:  # covers every reachable state (explored eagerly)
                keep = self._live[nxt]
                ids, nxt = ids[keep], nxt[keep]
        seen = np.zeros(self.dfa.num_states, dtype=bool)
        seen[nxt] = True
        if self.dfa.accepting[q]:
            ids = np.concatenate([ids, self.eos_ids])
        packed = pack_ids(ids, width)
        if not packed.any():  # cannot happen for live states; guard against silent NaNs
            raise StateLimitError(f"internal error: state {q} allows no token")
        return packed, np.flatnonzero(seen)

    def allowed(self, q: int) -> np.ndarray:
        """Sorted token ids allowed after reaching state ``q`` (EOS included iff accepting)."""
        return packed_ids(self.bits(q)).astype(np.int32)

    def allowed_mask(self, q: int, width: int) -> np.ndarray:
        """Bool mask of :meth:`allowed` over ``width`` logits (ids beyond the vocabulary: False)."""
        unpacked = np.unpackbits(self.bits(q), bitorder="little").view(bool)  # a fresh array: no copy
        if width <= len(unpacked):
            return unpacked[:width]
        return np.concatenate([unpacked, np.zeros(width - len(unpacked), dtype=bool)])

    def mask_bytes(self, q: int, width: int) -> np.ndarray:
        """Packed little-endian bitmask (``ceil(width/8)`` bytes) of :meth:`allowed`."""
        bits, n = self.bits(q), (width + 7) // 8  # (bits(q) is shared: a copy)
        if n <= len(bits):
            return bits[:n].copy()
        out = np.zeros(n, dtype=np.uint8)
        out[: len(bits)] = bits
        return out

    def successors(self, q: int) -> np.ndarray:
        """Distinct states that one allowed (non-EOS) token leads to from ``q``."""
        got = self._succ.get(q)
        if got is None:  # not walked yet (a shared or imported mask): walk now
            packed, got = self._compute_mask(q)
            self._bits.setdefault(q, packed)
            self._succ[q] = got
        return got

    def precompute(self, max_states: int | None = None, deadline: float | None = None) -> bool:
        """Compute masks breadth-first over token transitions from the start states.

        Stops after ``max_states`` masks or at ``time.monotonic() >= deadline``.
        Returns True when every state a token sequence can reach has its mask,
        so generation will not compute any more.
        """
        self._dense_nodes = max(self._dense_nodes, self.CLASS_TRIE_AFTER * self.vocab.num_nodes)  # many walks ahead
        if self._class_trie is None:
            self._build_class_trie(None)
        for i, _ in enumerate(self._reachable(self.successors)):
            if (max_states is not None and i >= max_states) or (
                    deadline is not None and time.monotonic() >= deadline):
                return False
        return True

    @property
    def num_computed(self) -> int:
        return len(self._bits)

    def _bits_width(self) -> int:
        top = max(self.vocab.size, int(self.eos_ids.max()) + 1,
                  (self.pad_token_id + 1) if self.pad_token_id is not None else 0)
        return ((top + 7) // 8) * 8

    def export_masks(self) -> dict:
        """Packed masks of every state computed so far (for the disk cache)."""
        states = sorted(s for s in self._bits if s > 0)
        rows = [self._bits[s] for s in states]
        return {"idx_states": np.array(states, dtype=np.int64),
                "idx_bits": np.stack(rows) if rows else np.zeros((0, self._bits_width() // 8), np.uint8)}

    def import_masks(self, arrays: dict, mapping: np.ndarray) -> None:
        """Adopt masks exported by :meth:`export_masks` (``mapping``: their ids -> ours)."""
        if arrays["idx_bits"].shape[1] != self._bits_width() // 8:
            raise ValueError("cached masks were built for a different vocabulary width")
        for s, bits in zip(arrays["idx_states"].tolist(), arrays["idx_bits"]):
            self._bits.setdefault(int(mapping[s]), bits)

    def walk_tokens(self, states: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """States after feeding each row of ``tokens`` (rows x steps) from ``states``.

        Vectorised over rows, one :meth:`next_states` per column; ``-1`` pads a
        short row (a finished row stays finished, any other row becomes dead).
        """
        cur = np.asarray(states, dtype=np.int64).copy()
        for j in range(tokens.shape[1]):
            cur = self.next_states(cur, tokens[:, j])
        return cur

    def next_states(self, states: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """Vectorised token-level transition for many rows at once."""
        states = np.asarray(states, dtype=np.int64)
        tokens = np.asarray(tokens, dtype=np.int64)
        if len(states) == 1:  # one row (the most common call): scalar walk, no array passes
            return np.array([self._next_one(int(states[0]), int(tokens[0]))], dtype=np.int64)
        v = self.vocab
        out = np.full(len(states), DEAD, dtype=np.int64)
        in_vocab = (tokens >= 0) & (tokens < v.size)
        is_eos = np.zeros(len(tokens), dtype=bool)
        ok_e = (tokens >= 0) & (tokens < len(self._is_eos))
        is_eos[ok_e] = self._is_eos[tokens[ok_e]]
        finished = states == FINISHED
        # EOS (and pad after EOS) finish the row; EOS from a non-accepting state is dead.
        acc = np.zeros(len(states), dtype=bool)
        live_rows = states > 0
        acc[live_rows] = self.dfa.accepting[states[live_rows]]
        out[is_eos & acc] = FINISHED
        out[finished] = FINISHED
        walk = live_rows & ~is_eos & in_vocab
        if walk.any():
            rows = np.nonzero(walk)[0]
            tok = tokens[rows]
            lens = v.tok_len[tok]
            cur = states[rows]
            lmax = int(lens.max())
            offs = v.tok_off[tok]
            for j in range(lmax):
                act = (j < lens) & (cur != DEAD)
                if not act.any():
                    break
                cls = self.dfa.byte_class[v.flat[offs[act] + j]]
                cur[act] = self._lookup(cur[act], cls)
            cur[lens == 0] = DEAD
            out[rows] = cur
        return out

    def _next_one(self, s: int, t: int) -> int:
        """:meth:`next_states` of one row, on Python ints (same rules)."""
        if s == FINISHED:
            return FINISHED
        if s <= 0:
            return DEAD
        if 0 <= t < len(self._is_eos) and self._is_eos[t]:
            return FINISHED if self.dfa.accepting[s] else DEAD
        v = self.vocab
        if not 0 <= t < v.size or v.tok_len[t] == 0:
            return DEAD
        off = int(v.tok_off[t])
        byte_class, table = self._byte_class, self.dfa.table
        for b in v.flat[off: off + int(v.tok_len[t])].tobytes():
            nxt = table.item(s, byte_class[b])
            if nxt < 0:  # row not computed yet
                with self.lock:  # states are determinised under the index's lock
                    self.dfa.expand(s)
                table = self.dfa.table
                nxt = table.item(s, byte_class[b])
            if nxt == DEAD:
                return DEAD
            s = nxt
        return s
