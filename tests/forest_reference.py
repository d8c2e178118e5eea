"""The forest builder of main at 1567814 (before issue #12 part 23), kept as the oracle of
``tests/test_automaton_build.py``: the leaner builder in ``forest._Forest`` must give the
same 11 node lists, tries and roots. Only the building methods are replaced; everything
else (``_leaf_trie``, ``first``, ``after``...) is the current ``_Forest``'s."""

from __future__ import annotations

from hf_constrained.forest import _ALT, _CAT, _CLS, _PLAIN, _REF, _REP, _UNSEEN, SHARE_MIN_NODES, _Forest


def _repeated(tree) -> set:  # main's
    """``id`` of each concatenation, alternation or repetition that occurs more than once in
    ``tree`` as the same object. The walk enters each object once, so the parts of a
    repeated subtree count once (its copies are calls of one definition), unless they
    also occur elsewhere.

    >>> t = ("cat", (("alt", (("cls", ((97, 97),)), ("cls", ((98, 98),)))),) * 2)
    >>> _repeated(t) == {id(t[1][0])}
    True
    """
    seen, again, todo = set(), set(), [tree]
    while todo:
        node = todo.pop()
        kind = node[0]
        if kind == "def":
            todo.append(node[2])
            todo.extend(body for _, body in node[1])
            continue
        if kind != "cat" and kind != "alt" and kind != "rep":
            continue
        i = id(node)
        if i in seen:
            again.add(i)
            continue
        seen.add(i)
        if kind == "rep":
            todo.append(node[1])
        else:
            todo.extend(node[1])
    return again


class ReferenceForest(_Forest):
    """``_Forest`` with main's building methods."""

    def _node(self, kind, kids=(), nullable=False, lo=0, hi=None, counted=False, trie=-1,
              target=-1) -> int:
        nid = len(self.kind)
        self.kind.append(kind)
        self.kids.append(tuple(kids))
        self.parent.append(-1)
        self.slot.append(0)
        self.nullable.append(nullable)
        self.lo.append(lo)
        self.hi.append(hi)
        self.counted.append(counted)
        self.trie.append(trie)
        self.target.append(target)
        self.is_def.append(False)
        for j, k in enumerate(kids):
            self.parent[k] = nid
            self.slot[k] = j
        return nid

    def _leaf(self, trie: int) -> int:
        """``_node(_CLS, trie=trie)`` without the keyword and child handling (most nodes are leaves)."""
        nid = len(self.kind)
        self.kind.append(_CLS)
        self.kids.append(())
        self.parent.append(-1)
        self.slot.append(0)
        self.nullable.append(False)
        self.lo.append(0)
        self.hi.append(None)
        self.counted.append(False)
        self.trie.append(trie)
        self.target.append(-1)
        self.is_def.append(False)
        return nid

    def _leaves(self, tries: list, out: list) -> None:
        """``_leaf`` for each of ``tries`` in turn, in bulk; the new ids go to ``out``."""
        m = len(tries)
        if m < 3:
            out.extend([self._leaf(t) for t in tries])
            return
        nid = len(self.kind)
        self.kind += [_CLS] * m
        self.kids += [()] * m
        self.parent += [-1] * m
        self.slot += [0] * m
        self.nullable += [False] * m
        self.lo += [0] * m
        self.hi += [None] * m
        self.counted += [False] * m
        self.trie += tries
        self.target += [-1] * m
        self.is_def += [False] * m
        out.extend(range(nid, nid + m))

    def add(self, tree):
        """Add one pattern; return its root node, or None if its language is empty."""
        # Subtrees met more than once (the same parse-tree object: the parser gives equal
        # groups one tree) are built once, as implicit definitions with a call at each place
        self._again = _repeated(tree) if self.share else set()
        self._shared = {}  # id(subtree) -> its definition's root, None or _PLAIN
        try:
            if tree[0] != "def":
                return self._build(tree, {})
            scope: dict = {}  # name -> root of the built definition (None: empty language)
            for name, body in tree[1]:
                root = self._build(body, scope)  # always a new node without a parent
                if root is not None:
                    self.is_def[root] = True
                scope[name] = root
            return self._build(tree[2], scope)
        finally:
            self._again, self._shared = set(), {}

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
                    self.is_def[got] = True
            elif got is _PLAIN:
                return self._build_plain(node, scope)
            if got is None:
                return None
            return self._node(_REF, (), self.nullable[got], 0, None, False, -1, got)
        return self._build_plain(node, scope)

    def _build_plain(self, node, scope):
        kind = node[0]
        if kind == "ref":
            root = scope[node[1]]
            if root is None:
                return None
            return self._node(_REF, (), self.nullable[root], 0, None, False, -1, root)
        if kind == "cls":
            if not node[1]:
                return None
            return self._leaf(self._leaf_trie(node[1]))
        if kind == "cat":
            kids = []
            trie_ids, run = self._trie_ids, []  # run: the leaves read since the last other item
            for item in node[1]:
                if item[0] == "cls":  # most items: a leaf (a literal run: many), added in bulk
                    if not item[1]:
                        self._leaves(run, kids)
                        return None
                    tid = trie_ids.get(item[1])
                    run.append(tid if tid is not None else self._leaf_trie(item[1]))
                    continue
                if run:
                    self._leaves(run, kids)
                    run = []
                k = self._build(item, scope)
                if k is None:
                    return None
                if not (self.kind[k] == _CAT and not self.kids[k]):  # drop empty strings
                    kids.append(k)
            if run:
                self._leaves(run, kids)
            if len(kids) == 1:
                return kids[0]
            return self._node(_CAT, kids, all([self.nullable[k] for k in kids]))
        if kind == "alt":
            kids = [k for k in (self._build(item, scope) for item in node[1]) if k is not None]
            if not kids:
                return None
            if len(kids) == 1:
                return kids[0]
            return self._node(_ALT, kids, any([self.nullable[k] for k in kids]))
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
        return self._node(_REP, (k,), lo == 0, lo, hi, counted)
