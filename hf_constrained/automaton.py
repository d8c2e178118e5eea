"""Byte-level automata: syntax tree -> positions with counters -> lazily determinised DFA.

No NFA is materialised. An NFA state is a *position*: a character class of
the syntax tree, the bytes of the current UTF-8 character read so far, and one
counter per enclosing counted repetition, so ``[a-z]{1,64}`` costs one leaf
and a counter rather than 64 copies. Positions and the DFA states (sets of
positions) are both created on first use: a state's row of transitions is
computed the first time something walks out of it, so the cost follows what
generation visits, not the size of the pattern (a JSON Schema regex can expand
to 10^5 copies and have an astronomically large full DFA). Several patterns
share one automaton, each with its own start state, so a batch with one
pattern per prompt still uses a single transition table.

States are small integers. State ``0`` is the dead state (no match possible
any more). Every other state can still reach a full match, because subtrees
with an empty language are pruned before any position exists.

>>> dfa = LazyDFA.from_patterns([r"ab|ac"])
>>> s = dfa.walk(dfa.starts[0], b"a")
>>> dfa.is_accepting(dfa.walk(s, b"c")), dfa.walk(s, b"x")
(True, 0)
"""

from __future__ import annotations

import functools

import numpy as np

from ._gc import gc_paused
from .errors import EmptyLanguageError, StateLimitError
from .regex_parser import parse

DEFAULT_MAX_STATES = 200_000
DEFAULT_MAX_NFA_STATES = 1_000_000
#: the DFA states together may hold this many positions per allowed position
#: (``max_nfa_states``): bounds the memory of the state sets (about 30 bytes each)
MEMBERS_PER_POSITION = 8
from .constraint import DEAD  # noqa: E402  (one definition of the special states)


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


# ---------------------------------------------------------------- positions
# The NFA is never built. Its states are *positions*: a character class of the
# syntax tree (a leaf), how many bytes of the current character were read, and
# one counter per enclosing counted repetition. ``x{1000}`` is one leaf and a
# counter, not a thousand copies, so the work follows what is visited, not the
# size of the expanded pattern (large JSON Schemas expand to 10^5..10^6 copies).
_CLS, _CAT, _ALT, _REP, _REF = range(5)
END = ("end",)  # the position "the match is complete"
#: a subtree met again is built once as an implicit definition when it has this many nodes
SHARE_MIN_NODES = 4
_UNSEEN, _PLAIN = object(), object()  # _Forest._shared: not built yet / built at each place


def _repeated(tree) -> set:
    """``id`` of each concatenation, alternation or repetition that occurs more than once in
    ``tree`` as the same object. The walk enters each object once, so the parts of a
    repeated subtree count once (its copies are calls of one definition), unless they
    also occur elsewhere.

    >>> t = ("cat", (("alt", (("cls", ((97, 97),)), ("cls", ((98, 98),)))),) * 2)
    >>> _repeated(t) == {id(t[1][0])}
    True
    """
    seen, again, todo = set(), set(), [tree]
    pop, push, extend, mark = todo.pop, todo.append, todo.extend, seen.add
    while todo:
        node = pop()
        kind = node[0]
        if kind == "cls":  # most nodes: leaves first
            continue
        if kind == "cat" or kind == "alt" or kind == "rep":
            i = id(node)
            if i in seen:
                again.add(i)
                continue
            mark(i)
            if kind == "rep":
                push(node[1])  # one child
            else:
                extend(node[1])
        elif kind == "def":
            push(node[2])
            extend(body for _, body in node[1])
    return again


class _Forest:
    """The patterns' syntax trees as flat arrays, with the first/follow sets of
    a Glushkov automaton extended by repetition counters.

    Subtrees with an empty language are pruned while building, so every
    position can still reach the end of its pattern: a non-empty set of
    positions is never a dead state.

    A shared definition (``(?(DEFINE)...)``, a ``"def"`` tree) is built once;
    a call is a ``_REF`` node whose ``target`` is the definition's root, and a
    position inside a definition carries the *stack* of calls that led there
    (call nodes, outermost first) next to its counters, so leaving the
    definition continues after the right call. Calls are not recursive, so
    stacks are bounded and the automaton stays finite.

    With ``share`` (the default) a subtree that the parse tree holds more than once
    (the same object: the parser gives equal groups one tree, and a JSON Schema's regex
    repeats a string's or a number's group hundreds of times) becomes such a definition
    too, built once and called from each place, when it has at least
    :data:`SHARE_MIN_NODES` nodes and no counted repetition encloses the place (the
    counted regions of ``counted_region.py`` read a copy's body as one tree). The
    positions differ (a call stack instead of a copy's nodes) but correspond one to one,
    in the same order, so the DFA is the same, state for state
    (``tests/test_automaton_share.py``); only the build is smaller (issue #12).
    """

    def __init__(self, share: bool = True):
        self.kind: list[int] = []
        self.kids: list[tuple] = []
        self.parent: list[int] = []
        self.slot: list[int] = []      # index among the parent's children
        self.nullable: list[bool] = []
        self.lo: list[int] = []
        self.hi: list = []
        self.counted: list[bool] = []  # a repetition whose copies must be counted
        self.trie: list[int] = []      # leaf -> index into self.tries
        self.target: list[int] = []    # _REF -> root of the called definition
        self.is_def: list[bool] = []   # the root of a shared definition
        self.tries: list[list[list[tuple[int, int, int]]]] = []
        self._trie_ids: dict = {}
        self._first: dict = {}
        self._after: dict = {}
        self._paths: dict = {}
        self.share = share
        self._again: set = set()
        self._shared: dict = {}
        self._counting = 0  # counted repetitions around the subtree being built
        # noted while building, written by _finish: (rep, lo, hi, counted), (call, root),
        # definitions' roots, nodes with children (ascending)
        self._made_reps: list = []
        self._made_refs: list = []
        self._made_defs: list = []
        self._inner: list = []
        self._leaf_tid: dict = {}

    # Building (issue #12, part 23). A node is appended to the four lists the build reads
    # (kind, kids, nullable, trie); the other seven (parent, slot, lo, hi, counted, target,
    # is_def) are their defaults for most nodes (70% are leaves), so add() fills them at
    # its end (_finish), in bulk, from the few non-default values noted while building.
    # The lists are those of one node at a time (tests/test_automaton_build.py compares
    # them with main's builder, tests/forest_reference.py).
    def _node(self, kind, kids=(), nullable=False) -> int:
        """A concatenation or alternation (or the empty string ``_CAT, ()``)."""
        nid = len(self.kind)
        self.kind.append(kind)
        self.kids.append(tuple(kids))
        self.nullable.append(nullable)
        self.trie.append(-1)
        if kids:
            self._inner.append(nid)
        return nid

    def _rep(self, k: int, lo: int, hi, counted: bool) -> int:
        nid = len(self.kind)
        self.kind.append(_REP)
        self.kids.append((k,))
        self.nullable.append(lo == 0)
        self.trie.append(-1)
        self._inner.append(nid)
        self._made_reps.append((nid, lo, hi, counted))
        return nid

    def _ref(self, root: int) -> int:
        """A call of the definition whose root is ``root``."""
        nid = len(self.kind)
        self.kind.append(_REF)
        self.kids.append(())
        self.nullable.append(self.nullable[root])
        self.trie.append(-1)
        self._made_refs.append((nid, root))
        return nid

    def _leaf(self, trie: int) -> int:
        nid = len(self.kind)
        self.kind.append(_CLS)
        self.kids.append(())
        self.nullable.append(False)
        self.trie.append(trie)
        return nid

    def _leaves(self, tries: list, out: list) -> None:
        """``_leaf`` for each of ``tries`` in turn, in bulk; the new ids go to ``out``."""
        m = len(tries)
        nid = len(self.kind)
        if m == 1:
            self.kind.append(_CLS)
            self.kids.append(())
            self.nullable.append(False)
            self.trie.append(tries[0])
            out.append(nid)
            return
        self.kind += [_CLS] * m
        self.kids += [()] * m
        self.nullable += [False] * m
        self.trie += tries
        out.extend(range(nid, nid + m))

    def _finish(self) -> None:
        """The seven lists the build does not write, for the nodes added since the last call."""
        m = len(self.kind) - len(self.parent)
        self.parent += [-1] * m
        self.slot += [0] * m
        self.lo += [0] * m
        self.hi += [None] * m
        self.counted += [False] * m
        self.target += [-1] * m
        self.is_def += [False] * m
        lo, hi, counted, target, is_def = self.lo, self.hi, self.counted, self.target, self.is_def
        for nid, a, b, c in self._made_reps:
            lo[nid] = a
            hi[nid] = b
            counted[nid] = c
        for nid, root in self._made_refs:
            target[nid] = root
        for nid in self._made_defs:
            is_def[nid] = True
        parent, slot, kids = self.parent, self.slot, self.kids
        for nid in self._inner:  # ascending, as the nodes were made: a later parent wins
            ks = kids[nid]
            if len(ks) == 1:  # a repetition's child: slot 0 already
                parent[ks[0]] = nid
                continue
            j = 0
            for k in ks:
                parent[k] = nid
                slot[k] = j
                j += 1
        self._made_reps, self._made_refs, self._made_defs, self._inner = [], [], [], []

    def add(self, tree):
        """Add one pattern; return its root node, or None if its language is empty."""
        # Subtrees met more than once (the same parse-tree object: the parser gives equal
        # groups one tree) are built once, as implicit definitions with a call at each place
        self._again = _repeated(tree) if self.share else set()
        self._shared = {}  # id(subtree) -> its definition's root, None or _PLAIN
        self._leaf_tid = {}  # id(leaf) -> trie id (the tree keeps its leaves alive meanwhile)
        try:
            if tree[0] != "def":
                return self._build(tree, {})
            scope: dict = {}  # name -> root of the built definition (None: empty language)
            for name, body in tree[1]:
                root = self._build(body, scope)  # always a new node without a parent
                if root is not None:
                    self._made_defs.append(root)
                scope[name] = root
            return self._build(tree[2], scope)
        finally:
            self._again, self._shared, self._leaf_tid = set(), {}, {}
            self._finish()

    def _tid_of(self, leaf) -> int:
        """The trie of a leaf with a non-empty class, remembered by the leaf object for this
        ``add`` (the parser gives each literal character one object: no ranges hashed)."""
        tid = self._trie_ids.get(leaf[1])
        if tid is None:
            tid = self._leaf_trie(leaf[1])
        self._leaf_tid[id(leaf)] = tid
        return tid

    def _leaf_trie(self, ranges) -> int:
        tid = self._trie_ids.get(ranges)
        if tid is None:
            nodes: list = [[]]
            children: dict = {}
            for seq in utf8_sequences(ranges):
                cur = 0
                for k, (lo, hi) in enumerate(seq):
                    if k == len(seq) - 1:
                        nodes[cur].append((lo, hi, -1))
                    else:
                        key = (cur, lo, hi)
                        if key not in children:
                            children[key] = len(nodes)
                            nodes.append([])
                            nodes[cur].append((lo, hi, children[key]))
                        cur = children[key]
            tid = self._trie_ids[ranges] = len(self.tries)
            self.tries.append(nodes)
        return tid

    def _build(self, node, scope):
        if node[0] == "cls":
            if not node[1]:
                return None
            tid = self._trie_ids.get(node[1])
            return self._leaf(tid if tid is not None else self._leaf_trie(node[1]))
        if id(node) in self._again and not self._counting:
            got = self._shared.get(id(node), _UNSEEN)
            if got is _UNSEEN:  # the first place: build it, a definition if worth one
                start = len(self.kind)
                got = self._build_plain(node, scope)
                if got is not None and (len(self.kind) - start < SHARE_MIN_NODES
                                        or self.kind[got] in (_CLS, _REF) or not self.kids[got]):
                    self._shared[id(node)] = _PLAIN
                    return got
                self._shared[id(node)] = got
                if got is not None:
                    self._made_defs.append(got)
            elif got is _PLAIN:
                return self._build_plain(node, scope)
            if got is None:
                return None
            return self._ref(got)
        return self._build_plain(node, scope)

    def _build_plain(self, node, scope):
        kind = node[0]
        if kind == "ref":
            root = scope[node[1]]
            if root is None:
                return None
            return self._ref(root)
        if kind == "cls":
            if not node[1]:
                return None
            return self._leaf(self._leaf_trie(node[1]))
        if kind == "cat":
            kids = []
            run = []  # the leaves read since the last other item
            leaf_tid = self._leaf_tid
            known = leaf_tid.get
            for item in node[1]:
                tid = known(id(item))
                if tid is not None:  # most items: a leaf (a literal run: many), added in bulk
                    run.append(tid)
                    continue
                head = item[0]
                if head == "cls":
                    if not item[1]:
                        self._leaves(run, kids)
                        return None
                    run.append(self._tid_of(item))
                    continue
                if run:
                    self._leaves(run, kids)
                    run = []
                if head == "rep" and item[1][0] == "cls" and item[1][1] and item[3] != 0:
                    # a repeated leaf (JSON's " ?", "[0-9]*"): what _build gives it, inline (a
                    # repeated object would be built plainly there too: two nodes at most)
                    _, leaf, lo, hi = item
                    tid = known(id(leaf))
                    k = self._leaf(tid if tid is not None else self._tid_of(leaf))
                    if lo == 1 and hi == 1:
                        kids.append(k)
                    else:
                        kids.append(self._rep(k, lo, hi, (hi is not None and hi >= 2) or (hi is None and lo >= 2)))
                    continue
                k = self._build(item, scope)
                if k is None:
                    return None
                if not (self.kind[k] == _CAT and not self.kids[k]):  # drop empty strings
                    kids.append(k)
            if run:
                self._leaves(run, kids)
            if len(kids) == 1:
                return kids[0]
            nullable = self.nullable
            return self._node(_CAT, kids, all([nullable[k] for k in kids]))
        if kind == "alt":
            kids = [k for k in (self._build(item, scope) for item in node[1]) if k is not None]
            if not kids:
                return None
            if len(kids) == 1:
                return kids[0]
            nullable = self.nullable
            return self._node(_ALT, kids, any([nullable[k] for k in kids]))
        _, item, lo, hi = node
        # no calls inside a counted repetition: counted_region.py reads a copy's body
        # as one tree (these bounds hold for every repetition that may be counted)
        counting = lo >= 2 or (hi is not None and hi >= 2)
        self._counting += counting
        try:
            k = self._build(item, scope)
        finally:
            self._counting -= counting
        if k is None or hi == 0:
            return self._node(_CAT, (), True) if lo == 0 else None
        if self.nullable[k]:
            lo = 0  # empty copies can make up any minimum: only non-empty copies are counted
        if lo == 1 and hi == 1:
            return k
        counted = (hi is not None and hi >= 2) or (hi is None and lo >= 2)
        return self._rep(k, lo, hi, counted)

    def valid_position(self, leaf: int, k: int, ctx: tuple, stack: tuple = ()) -> bool:
        """Whether ``(leaf, k, ctx, stack)`` is a position of these trees (for cache files)."""
        if not (0 <= leaf < len(self.kind)) or self.kind[leaf] != _CLS:
            return False
        if not 0 <= k < len(self.tries[self.trie[leaf]]):
            return False
        reps = self.counted_path(leaf, stack)
        if reps is None or len(reps) != len(ctx):
            return False
        for r, c in zip(reps, ctx):
            if not 0 <= c < (self.hi[r] if self.hi[r] is not None else self.lo[r]):
                return False
        return True

    def counted_path(self, leaf: int, stack: tuple):
        """The counted repetitions around ``leaf`` (called through ``stack``), outermost
        first: the repetition of each counter of a position. None when ``stack`` is not
        the chain of calls that leads from ``leaf``'s definition to a pattern's root."""
        key = (leaf, stack)
        if key in self._paths:
            return self._paths[key]
        reps, node, calls = [], leaf, list(stack)
        while True:
            p = self.parent[node]
            while p >= 0:
                if self.counted[p]:
                    reps.append(p)
                node, p = p, self.parent[p]
            if not self.is_def[node]:
                got = None if calls else tuple(reversed(reps))
                break
            call = calls.pop() if calls else -1
            if not (0 <= call < len(self.kind)) or self.kind[call] != _REF or self.target[call] != node:
                got = None
                break
            node = call
        self._paths[key] = got
        return got

    # Positions are (leaf, byte index within the character's UTF-8 trie, counters,
    # calls of shared definitions).
    def first(self, nid: int, ctx: tuple, stack: tuple = ()) -> tuple:
        """Positions that can read the first character of node ``nid``."""
        key = (nid, ctx, stack)
        got = self._first.get(key)
        if got is not None:
            return got
        kind = self.kind[nid]
        if kind == _CLS:
            got = ((nid, 0, ctx, stack),)
        elif kind == _REP:
            got = self.first(self.kids[nid][0], ctx + (0,) if self.counted[nid] else ctx, stack)
        elif kind == _REF:
            got = self.first(self.target[nid], ctx, stack + (nid,))
        elif kind == _CAT and self.kids[nid] and not self.nullable[self.kids[nid][0]]:
            got = self.first(self.kids[nid][0], ctx, stack)  # the same tuple: already distinct
        else:
            out: list = []
            for k in self.kids[nid]:
                out.extend(self.first(k, ctx, stack))
                if kind == _CAT and not self.nullable[k]:
                    break
            got = tuple(dict.fromkeys(out))
        self._first[key] = got
        return got

    def after(self, nid: int, ctx: tuple, stack: tuple = ()) -> tuple:
        """Positions (and possibly END) that can follow a completed node ``nid``."""
        key = (nid, ctx, stack)
        got = self._after.get(key)
        if got is not None:
            return got
        p = self.parent[nid]
        out: list = []
        # Fast paths return a tuple that is already distinct (the same one as below).
        if p >= 0 and self.kind[p] == _ALT:
            got = self._after[key] = self.after(p, ctx, stack)
            return got
        if p >= 0 and self.kind[p] == _CAT:
            kids = self.kids[p]
            nxt = self.slot[nid] + 1
            if nxt < len(kids) and not self.nullable[kids[nxt]]:
                got = self._after[key] = self.first(kids[nxt], ctx, stack)
                return got
        if p < 0:
            if stack:  # the end of a shared definition: continue after its call
                out.extend(self.after(stack[-1], ctx, stack[:-1]))
            else:
                out.append(END)
        elif self.kind[p] == _CAT:
            for k in self.kids[p][self.slot[nid] + 1:]:
                out.extend(self.first(k, ctx, stack))
                if not self.nullable[k]:
                    break
            else:
                out.extend(self.after(p, ctx, stack))
        elif self.kind[p] == _ALT:
            out.extend(self.after(p, ctx, stack))
        elif self.counted[p]:
            lo, hi, done, outer = self.lo[p], self.hi[p], ctx[-1] + 1, ctx[:-1]
            if hi is None or done < hi:  # another copy; unbounded counters saturate at lo - 1
                out.extend(self.first(nid, outer + ((done if hi is not None else min(done, lo - 1)),), stack))
            if done >= lo:
                out.extend(self.after(p, outer, stack))
        else:  # x?, x*, x+: at most one distinguishable copy
            if self.hi[p] is None:
                out.extend(self.first(nid, ctx, stack))
            out.extend(self.after(p, ctx, stack))
        got = self._after[key] = tuple(dict.fromkeys(out))
        return got


# ---------------------------------------------------------------- lazy DFA
class LazyDFA:
    """A DFA over byte classes whose states are determinised on first use.

    ``table[state, byte_class[b]]`` is the next state, ``-1`` while the row is
    not computed yet (:meth:`expand` fills it). ``starts[i]`` is the start state
    of the i-th pattern. A DFA state is a set of positions (see :class:`_Forest`).

    With ``strip_leading_space=True`` the start states accept one extra leading
    space byte that is dropped before matching; this models tokenizers whose
    ``decode`` strips the first space of the text (SentencePiece ``▁Word``).

    ``max_states`` bounds the DFA states and ``max_nfa_states`` the distinct
    positions (leaf, byte, counters) materialised; both are only reached as
    generation walks, and raise :class:`StateLimitError`.

    ``share_subtrees=False`` builds a copy of a repeated subtree at each place instead
    of one shared definition (see :class:`_Forest`): the same automaton, a larger build.

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
                    "positions (nested counted repetitions such as (a{0,1000}){0,1000} track many "
                    "counter combinations at once); simplify the pattern or raise max_nfa_states"
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
