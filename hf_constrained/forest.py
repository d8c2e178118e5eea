"""The position forest: the patterns' syntax trees as flat node lists, and the positions
of a Glushkov automaton extended by repetition counters, with their first/follow sets.

No NFA is materialised. An NFA state is a *position* ``(leaf, k, counters, calls)``: a
character class of the syntax tree (a leaf, ``_CLS``), the node ``k`` of that class's
UTF-8 byte trie reached by the bytes of the current character read so far, one counter
per enclosing counted repetition, and the calls of shared definitions that led there. So
``[a-z]{1,64}`` costs one leaf and a counter rather than 64 copies. :class:`_Forest`
builds the nodes (``_CLS``, ``_CAT``, ``_ALT``, ``_REP``, ``_REF``) from
:func:`~hf_constrained.regex_parser.parse` trees, pruning subtrees with an empty language
and building a repeated subtree once, as a definition called from each place, and answers
(memoised) :meth:`_Forest.first`, the positions that can read a node's first character,
and :meth:`_Forest.after`, the positions (and :data:`END`, "the match is complete") that
can follow a completed node.

:class:`~hf_constrained.automaton.LazyDFA` is the lazy determinisation of this forest:
it adds all its patterns to one forest, cuts the bytes into classes at the bounds of the
leaves' tries (``tries``), numbers positions as it meets them (a DFA state is a set of
position numbers), and computes a state's row from its members' trie nodes and, when a
character completes, ``after`` of their leaf. It also reads ``counted_path`` (which
repetition each counter counts: mask representatives) and ``valid_position`` (disk-cache
import). Node numbers follow the patterns, so positions mean the same in any process.

>>> from hf_constrained.regex_parser import parse
>>> f = _Forest()
>>> root = f.add(parse("[a-z]{2,3}!"))   # nodes: [a-z], its repetition, !, the concatenation
>>> f.first(root, ())                    # leaf 0 at its trie's root, counter 0, no calls
((0, 0, (0,), ()),)
>>> f.after(0, (1,))                     # after a second letter: a third one, or the "!"
((0, 0, (2,), ()), (2, 0, (), ()))
>>> f.after(2, ()) == (END,)
True
"""

from __future__ import annotations

import functools


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
