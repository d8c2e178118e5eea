"""Earley parser configurations, interned so that rows and beams share them.

The parser is consulted only at lexeme boundaries. A *node* is the Earley set
at a boundary: a set of items ``(rule, dot, origin)`` where ``origin`` is the
id of the node at which the rule started, or :data:`SELF` for rules predicted
at this very node. Origins are node ids, never text positions, so a node is
identified by its content alone: two boundaries whose items (and, through the
origin ids, whose whole pending stacks) are equal get the same id, whatever
text led there. Left-recursive lists (``items: items "," item``) return to the
same node after every element, and beams that parse the same prefix share
every node instead of copying charts.

Ambiguous, left-recursive and nullable grammars are handled by Earley's
algorithm with the Aycock-Horspool rule for nullable symbols (predicting a
nullable ``B`` also moves the dot over it), so the closure of a node needs
only its own items and the nodes its items point back to.

Several grammars live in one :class:`Parser` (one start rule each), so a batch
with one grammar per prompt uses one node table.

>>> from hf_constrained.grammar.cfg import from_lark
>>> p = Parser([from_lark('start: start "a" | "a"', regular=False)])
>>> n0 = p.start_nodes[0]
>>> [p.terminal_names[t] for t in p.expected(n0)]
['A']
>>> n1 = p.scan(n0, p.expected(n0)[0])
>>> p.accepting(n1), p.scan(n1, p.expected(n1)[0]) == n1     # left recursion: the same node
(True, True)
"""

from __future__ import annotations

from ..errors import StateLimitError
from .node_cache import SELF, NodeCache


#: items one node may hold: a row whose configuration grows past this (e.g. a
#: highly ambiguous grammar whose open items multiply with the text length)
#: fails with GrammarLimitError instead of exhausting memory
DEFAULT_MAX_ITEMS = 20_000
#: distinct nodes one parser may create
DEFAULT_MAX_NODES = 500_000
#: all nodes together hold at most this many items per allowed item of one node (memory guard:
#: a row whose nodes grow linearly would otherwise use quadratic memory before one node is full)
ITEMS_PER_NODE_LIMIT = 50


def _symbol_bit(x: int) -> int:
    """The bit of grammar symbol ``x`` in a node's accept symbols: ``2x`` for a nonterminal,
    ``2t + 1`` for terminal ``t`` (symbol ``-1 - t``).

    >>> _symbol_bit(3), _symbol_bit(-1), _symbol_bit(-3)
    (6, 1, 5)
    """
    return 2 * x if x >= 0 else -2 * x - 1


class GrammarLimitError(StateLimitError):
    """A parser configuration (or the table of them) grew past its documented limit."""


class Parser(NodeCache):
    """Interned Earley nodes for one or more :class:`~hf_constrained.grammar.cfg.CFG`.

    Terminal ids are global across the grammars (``terminal_patterns[t]``);
    identical regexes share an id. ``start_nodes[g]`` is grammar ``g``'s
    initial node, ``ignore[g]`` its ``%ignore`` terminals.
    """

    def __init__(self, grammars, *, max_items: int = DEFAULT_MAX_ITEMS, max_nodes: int = DEFAULT_MAX_NODES):
        self.max_items, self.max_nodes = int(max_items), int(max_nodes)
        self.terminal_patterns: list = []
        self.terminal_names: list = []
        pat_id: dict = {}
        self.lhs, self.rhs = [], []
        self.rules_of: list = []
        self.ignore: list = []
        self.start_rules: list = []
        self.nt_names: list = []
        for g in grammars:
            base = len(self.rules_of)
            self.rules_of.extend([] for _ in g.nonterminals)
            self.nt_names.extend(g.nonterminals)
            tmap = []
            for name, pat in zip(g.terminals, g.patterns):
                if pat not in pat_id:
                    pat_id[pat] = len(self.terminal_patterns)
                    self.terminal_patterns.append(pat)
                    self.terminal_names.append(name)
                tmap.append(pat_id[pat])

            def sym(s):
                return base + s if s >= 0 else -1 - tmap[-1 - s]
            # augmented start rule: S' -> start (S' never appears on a right-hand side)
            aug = len(self.rules_of)
            self.rules_of.append([])
            self.nt_names.append(f"<start of grammar {len(self.start_rules)}>")
            self._add_rule(aug, (base + g.start,))
            self.start_rules.append(len(self.lhs) - 1)
            for lhs, rhs in g.rules:
                self._add_rule(base + lhs, tuple(sym(s) for s in rhs))
            self.ignore.append(tuple(sorted({tmap[t] for t in g.ignore})))
        self.nullable = self._nullable()
        self._start_set = frozenset(self.start_rules)
        # tail_nullable[r][d]: every symbol of rule r from position d on is nullable (an item
        # with its dot there completes within the closure, by Aycock-Horspool moves)
        self._tail_nullable = [self._tails(rhs) for rhs in self.rhs]
        self._predict: dict = {}    # nonterminal -> its prediction closure (see _predicted)
        self._ids: dict = {}        # open items (sorted tuple) -> node, for nodes that do not accept
        self._ids_accepting: dict = {}   # the same for nodes that accept
        self._total_items = 0
        self.items: list = []       # node -> tuple of its open items (dot before a symbol)
        self.grammar: list = []     # node -> grammar index
        self._expect: list = []     # node -> tuple of terminal ids after a dot
        self._accept: list = []
        self._waiting: list = []    # node -> explicit {symbol: (advanced items)} (lazy)
        self._waiting_all: list = []   # node -> {symbol: all of them} (with _waiting)
        self._shared: dict = {}     # a node's expected terminals or block roots -> one tuple of them
        self._parts: list = []      # node -> its items that are no prediction block, or None
        self._roots: list = []      # node -> the roots of its prediction blocks (with _parts)
        self._closure: dict = {}    # kernel (sorted tuple of items) -> node
        self._scan: dict = {}       # node << 32 | terminal -> node (ints: never tracked by the collector)
        self._acc_syms: dict = {}   # node -> _accept_symbols
        self.start_nodes = [self._close(((r, 0, SELF),), g)
                            for g, r in enumerate(self.start_rules)]

    def _add_rule(self, lhs: int, rhs: tuple):
        self.lhs.append(lhs)
        self.rhs.append(rhs)
        self.rules_of[lhs].append(len(self.lhs) - 1)

    def _nullable(self) -> list:
        null = [False] * len(self.rules_of)
        changed = True
        while changed:
            changed = False
            for lhs, rhs in zip(self.lhs, self.rhs):
                if not null[lhs] and all(s >= 0 and null[s] for s in rhs):
                    null[lhs] = changed = True
        return null

    # ---------------------------------------------------------------- nodes
    def _waiting_on(self, node: int, sym: int) -> tuple:
        """The items of ``node`` waiting on ``sym``, advanced over it, origins made concrete
        (built per symbol: those of the node's prediction blocks come from the blocks)."""
        ex = self._waiting[node]
        if ex is None:
            ex = {}
            parts = self._parts[node]
            rhs_of = self.rhs
            for r, d, o in (parts if parts is not None else self.items[node]):
                ex.setdefault(rhs_of[r][d], []).append((r, d + 1, node if o == SELF else o))
            # tuples of int tuples, no lists: the cyclic collector stops tracking them (two
            # lists of dicts, no pair per node: one object less in its youngest generation)
            ex = self._waiting[node] = {k: tuple(v) for k, v in ex.items()}
            self._waiting_all[node] = {}
        done = self._waiting_all[node]
        got = done.get(sym)
        if got is None:
            got = ex.get(sym, ())
            if self._parts[node] is not None:
                extra = [(r, d1, node) for root in self._roots[node] for r, d1 in self._predict[root][3].get(sym, ())]
                if extra:
                    got = got + tuple(extra)
            done[sym] = got
        return got

    def _tails(self, rhs: tuple) -> list:
        out = [True] * (len(rhs) + 1)
        for d in range(len(rhs) - 1, -1, -1):
            out[d] = out[d + 1] and rhs[d] >= 0 and self.nullable[rhs[d]]
        return out

    def _predicted(self, s: int) -> tuple:
        """``(open items, expected terminals, nonterminals, {symbol: ((rule, dot + 1), ...)} of
        the items waiting on a symbol, [(symbol, left-hand side)] of the items whose rest after
        that symbol is nullable)`` that predicting nonterminal ``s`` adds to any node: the
        rules of ``s`` and, transitively, of every nonterminal after one of their dots (dots
        moved over nullable symbols), all with origin :data:`SELF`. It is the same at every node, so it is computed once per nonterminal: a closure then visits
        only the items that point back to earlier nodes. A predicted item that completes (a
        nullable rule) needs no completion step: Aycock-Horspool moved the predicting dot."""
        got = self._predict.get(s)
        if got is None:
            rhs_of, rules_of, nullable = self.rhs, self.rules_of, self.nullable
            items, expect, nts = set(), set(), {s}
            stack = [(r, 0, SELF) for r in rules_of[s]]
            items.update(stack)
            while stack:
                r, d, o = stack.pop()
                rhs = rhs_of[r]
                if d == len(rhs):
                    continue
                x = rhs[d]
                if x < 0:
                    expect.add(-1 - x)
                    continue
                new = [(r2, 0, SELF) for r2 in rules_of[x]] if x not in nts else []
                nts.add(x)
                if nullable[x]:
                    new.append((r, d + 1, o))
                for it in new:
                    if it not in items:
                        items.add(it)
                        stack.append(it)
            open_items = frozenset(it for it in items if it[1] < len(rhs_of[it[0]]))
            wait: dict = {}
            for r, d, _ in open_items:
                wait.setdefault(rhs_of[r][d], []).append((r, d + 1))
            completes = [(rhs_of[r][d], self.lhs[r]) for r, d, _ in open_items if self._tail_nullable[r][d + 1]]
            got = self._predict[s] = (open_items, frozenset(expect), frozenset(nts),
                                      {k: tuple(v) for k, v in wait.items()}, completes)
        return got

    def _close(self, kernel: tuple, grammar: int) -> int:
        got = self._closure.get(kernel)
        if got is not None:
            return got
        items = set(kernel)     # items reached one by one (kernel, completions, nullable moves)
        stack = list(kernel)
        rhs_of, nullable, predicted = self.rhs, self.nullable, self._predicted
        expect = set()
        done_nts = set()        # nonterminals whose prediction closure is in `bulk`
        bulk = []               # prediction closures (frozensets of SELF items)
        roots = []              # the nonterminals they were predicted from
        accept = False
        n_bulk = 0
        while stack:
            r, d, o = stack.pop()
            rhs = rhs_of[r]
            new = ()
            if d < len(rhs):
                s = rhs[d]
                if s >= 0:
                    if s not in done_nts:
                        p_items, p_expect, p_nts = predicted(s)[:3]
                        done_nts |= p_nts
                        bulk.append(p_items)
                        roots.append(s)
                        expect |= p_expect
                        n_bulk += len(p_items)
                    if nullable[s]:
                        new = ((r, d + 1, o),)
                else:
                    expect.add(-1 - s)
            else:
                if o != SELF:  # complete: advance what waited at the origin (SELF: Aycock-Horspool did)
                    new = self._waiting_on(o, self.lhs[r])
                if r in self._start_set:
                    accept = True
            for it in new:
                if it not in items:
                    items.add(it)
                    stack.append(it)
            if len(items) + n_bulk > self.max_items:  # n_bulk may count an item twice: merge, recount
                merged = frozenset().union(*bulk)
                bulk, n_bulk = [merged], len(merged)
                if len(items) + n_bulk > self.max_items:
                    raise GrammarLimitError(
                        f"a parser configuration holds more than max_items={self.max_items} Earley items "
                        "(a highly ambiguous grammar whose open parses multiply with the text length, or "
                        "rules with tens of thousands of alternatives open at one position); make the "
                        "grammar less ambiguous, write a long list of literals as one terminal regex, or "
                        "raise max_items")
        # completed items have done their work (their completions are in the set):
        # the future depends only on the open items and on acceptance
        explicit = frozenset(it for it in items if it[1] < len(rhs_of[it[0]]))
        key = (explicit.union(*bulk), accept)
        nid = self._node(key, grammar, expect, tuple(explicit), tuple(roots))
        self._closure[kernel] = nid
        return nid

    def _node(self, key: tuple, grammar: int, expect, parts=None, roots=()) -> int:
        """The id of the node ``(open items, accept)``, interned on first sight. Keyed by
        the items as a sorted tuple, not a frozenset: a frozenset stays tracked by the cyclic
        collector for life (one per node, each reaching its oldest generation), a tuple of
        int tuples is untracked by its first passes. Accepting and other nodes are kept in two
        tables, so the items tuple is the key itself (no pair per node for the collector's
        youngest generation); ``parts`` (the node's items that are no prediction block) and
        ``roots`` (the blocks' nonterminals) are kept in two lists for the same reason."""
        items = tuple(sorted(key[0]))
        ids = self._ids_accepting if key[1] else self._ids
        nid = ids.get(items)
        if nid is None:
            nid = len(self.items)
            if nid >= self.max_nodes:
                raise GrammarLimitError(
                    f"the grammar needs more than max_nodes={self.max_nodes} parser configurations; "
                    "raise max_nodes or simplify the grammar")
            self._total_items += len(key[0])
            if self._total_items > ITEMS_PER_NODE_LIMIT * self.max_items:
                raise GrammarLimitError(
                    f"the parser's {nid} configurations hold more than {ITEMS_PER_NODE_LIMIT} x "
                    f"max_items={self.max_items} Earley items in total (a highly ambiguous grammar); "
                    "make the grammar less ambiguous or raise max_items")
            ids[items] = nid
            self.items.append(items)
            self.grammar.append(grammar)
            expect = tuple(sorted(expect))      # nodes share these: one tuple per content
            self._expect.append(self._shared.setdefault(expect, expect))
            self._accept.append(key[1])
            self._waiting.append(None)
            self._waiting_all.append(None)
            self._parts.append(parts)
            self._roots.append(self._shared.setdefault(roots, roots))
        return nid

    # ---------------------------------------------------------------- queries
    def expected(self, node: int) -> tuple:
        """Terminal ids that may come next at ``node`` (without its ``%ignore`` terminals)."""
        return self._expect[node]

    def accepting(self, node: int) -> bool:
        """Whether the text up to this boundary is a sentence."""
        return self._accept[node]

    def scan_kernel(self, node: int, terminal: int) -> tuple:
        """Items of ``node`` advanced over ``terminal`` (origins made concrete)."""
        return tuple(self._waiting_on(node, -1 - terminal))

    def scan_accepts(self, node: int, terminal: int) -> bool:
        """Whether the text is a sentence after one ``terminal`` lexeme read at ``node``:
        ``accepting(scan(node, terminal))``, without building the scanned node.

        A closure's items only complete along chains of completions from its kernel
        (predicted items complete by Aycock-Horspool moves, which complete nothing), so
        this follows those chains alone: an advanced item whose rest is nullable completes
        its rule at the rule's origin node, advancing what waits there. Nodes that a mask
        walk reaches but no token continues from (the ends of tokens) need no closure.
        Acceptance of a merge is the ``any`` of its scans' (a closure of a union is the
        union of the closures)."""
        return bool(self._accept_symbols(node) >> (2 * terminal + 1) & 1)   # the bit of symbol -1 - terminal

    def _accept_symbols(self, node: int) -> int:
        """The symbols whose reading at ``node`` completes the start rule, kept per node as
        one int of bits (:func:`_symbol_bit`): an int is never tracked by the cyclic collector,
        where a frozenset was tracked for life (one per node reaching its oldest generation;
        as a tuple, membership made the SQL GBNF and JSON replays 3-4% slower).

        ``X`` is one iff an item of ``node`` waits on ``X`` with a nullable rest and is the
        start rule, or its rule's left-hand side is an accept symbol of the item's origin
        (an earlier node; ``node`` itself for items predicted here: a fixed point). Origins
        are computed first, without recursion (nesting may be deep)."""
        got = self._acc_syms.get(node)
        if got is not None:
            return got
        todo = [node]
        while todo:
            n = todo[-1]
            if n in self._acc_syms:
                todo.pop()
                continue
            parts = self._parts[n]
            missing = [o for _, _, o in (parts if parts is not None else self.items[n])
                       if o != SELF and o not in self._acc_syms]
            if missing:
                todo.extend(dict.fromkeys(missing))
                continue
            todo.pop()
            self._acc_syms[n] = self._accept_symbols_of(n)
        return self._acc_syms[node]

    def _accept_symbols_of(self, n: int) -> int:
        tails, lhs, rhs_of, starts, acc = self._tail_nullable, self.lhs, self.rhs, self._start_set, self._acc_syms
        out, local = set(), []       # local: (symbol, lhs) of items predicted here
        parts = self._parts[n]
        for r, d, o in (parts if parts is not None else self.items[n]):
            if not tails[r][d + 1]:
                continue
            x = rhs_of[r][d]
            if r in starts or (o != SELF and acc[o] >> (2 * lhs[r]) & 1):   # lhs[r] accepts at o
                out.add(x)
            elif o == SELF:
                local.append((x, lhs[r]))
        if parts is not None:
            for root in self._roots[n]:
                local.extend(self._predict[root][4])
        changed = bool(local)
        while changed:
            changed = False
            for x, a in local:
                if a in out and x not in out:
                    out.add(x)
                    changed = True
        bits = 0
        for x in out:
            bits |= 1 << _symbol_bit(x)
        return bits

    def scan(self, node: int, terminal: int) -> int:
        """The node after one ``terminal`` lexeme read at ``node``."""
        key = node << 32 | terminal
        got = self._scan.get(key)
        if got is None:
            got = self._scan[key] = self.merge(((node, terminal),))
        return got

    def merge(self, scans) -> int:
        """One node for several ``(node, terminal)`` lexemes ending at the same place
        (Earley's merge: the union of their items, closed)."""
        kernel = []
        for node, t in scans:
            kernel.extend(self.scan_kernel(node, t))
        if not kernel:
            raise ValueError("no item of these nodes expects these terminals")
        # the kernel as a sorted tuple (a key of _closure), not a frozenset: the cyclic collector
        # stops tracking a tuple of int tuples, a frozenset stays tracked for life
        return self._close(tuple(sorted(set(kernel))), self.grammar[scans[0][0]])

    @property
    def num_nodes(self) -> int:
        return len(self.items)
