"""Parser nodes in the disk cache: :class:`NodeCache`, the half of
:class:`~.earley.Parser` that writes nodes as plain arrays and reads them back.

Node ids differ between processes (nodes are interned in discovery order), so
a node is stored by its content: its open items ``(rule, dot, origin)``, with
origins as rows of the same arrays (``-1`` for :data:`~.earley.SELF`), its
acceptance and its grammar; reading them back interns each by that content.

>>> from hf_constrained.grammar.cfg import from_lark
>>> from hf_constrained.grammar.earley import Parser
>>> g = [from_lark('start: "(" start ")" | "x"', regular=False)]
>>> p = Parser(g)
>>> n = p.scan(p.scan(p.start_nodes[0], 0), 0)            # after "(("
>>> arrays, position = p.export_nodes([n])
>>> len(arrays["gp_offsets"]) - 1                            # n and the nodes its items point back to
3
>>> q = Parser(g)                                            # another process's parser
>>> int(q.import_nodes(arrays)[position[n]]) == q.scan(q.scan(q.start_nodes[0], 0), 0)
True
"""

from __future__ import annotations

import numpy as np

#: the origin of an item predicted at its own node (:mod:`.earley` uses it from here)
SELF = -1


class NodeCache:
    """Export and import of interned Earley nodes (a mixin of :class:`~.earley.Parser`: it
    reads the parser's ``items``, ``rhs``, ``_accept``, ``grammar`` and interns with ``_node``)."""

    def export_nodes(self, nodes) -> tuple:
        """``(arrays, position)`` describing ``nodes`` and the nodes their items point back
        to (for the disk cache): each node's open items as ``(rule, dot, origin or -1
        for SELF)`` rows, its acceptance and grammar; ``position[node]`` is a node's row.
        Origins always name earlier nodes, so :meth:`import_nodes` rebuilds them in order."""
        need, stack = set(nodes), list(nodes)
        while stack:
            for _, _, o in self.items[stack.pop()]:
                if o != SELF and o not in need:
                    need.add(o)
                    stack.append(o)
        order = sorted(need)
        position = {n: i for i, n in enumerate(order)}
        rows = [(r, d, -1 if o == SELF else position[o]) for n in order for r, d, o in self.items[n]]
        offsets = np.zeros(len(order) + 1, dtype=np.int64)
        np.cumsum([len(self.items[n]) for n in order], out=offsets[1:])
        return ({"gp_items": np.array(rows, dtype=np.int64).reshape(-1, 3), "gp_offsets": offsets,
                 "gp_accept": np.array([self._accept[n] for n in order], dtype=bool),
                 "gp_grammar": np.array([self.grammar[n] for n in order], dtype=np.int64)}, position)

    def import_nodes(self, arrays: dict) -> np.ndarray:
        """Add the nodes of :meth:`export_nodes` output (same grammars); returns the map
        from their ids to ours. Raises ``ValueError`` (adding nothing) for arrays that
        do not describe nodes of these grammars."""
        items, offsets = arrays["gp_items"], arrays["gp_offsets"].tolist()
        accept, grammar = arrays["gp_accept"].tolist(), arrays["gp_grammar"].tolist()
        n = len(offsets) - 1
        if items.ndim != 2 or items.shape[1] != 3 or len(accept) != n or len(grammar) != n or n < 0:
            raise ValueError("cached parser nodes are malformed")
        if self.num_nodes + n > self.max_nodes:
            raise ValueError("cached parser nodes exceed max_nodes")
        rhs_of, n_rules, n_g = self.rhs, len(self.rhs), len(self.start_rules)
        rows = items.tolist()
        keys = []  # validated before anything is interned
        for i in range(n):
            its = rows[offsets[i]:offsets[i + 1]]
            if not 0 <= grammar[i] < n_g:
                raise ValueError("cached parser nodes are for other grammars")
            expect = set()
            for r, d, o in its:
                if not (0 <= r < n_rules and 0 <= d < len(rhs_of[r]) and -1 <= o < i):
                    raise ValueError("cached parser nodes are for other grammars")
                if rhs_of[r][d] < 0:
                    expect.add(-1 - rhs_of[r][d])
            keys.append((its, bool(accept[i]), grammar[i], expect))
        mapping = np.empty(n, dtype=np.int64)
        for i, (its, acc, g, expect) in enumerate(keys):
            key = (frozenset((r, d, SELF if o < 0 else int(mapping[o])) for r, d, o in its), acc)
            mapping[i] = self._node(key, g, expect)
        return mapping
