"""Mask walks split by lexeme: the lexer's part shared, the parser's part per configuration.

A configuration (:mod:`.configs`) is a set of *lanes*: lexemes in progress (a slot, i.e. the
parser node it started at and its terminal, and the terminal's lexer DFA state). The
language after a configuration is the union of its lanes' languages (a merged Earley node
is the union of its scans: :meth:`~.earley.Parser.scan_accepts`), so a token is allowed
iff one lane lets it through, and a lane lets a token through iff

* the token's bytes stay inside the lane's lexeme (its lexer state stays live): this
  depends on the lexer state alone, not on the parser, and is walked over the vocabulary
  trie once per ``(lexer state, trie node)`` (:class:`LexWalk`) and shared by every
  configuration, of any parse position, with that lexeme in progress; or
* the lexeme ends inside the token (its lexer state accepts at a trie node ``a``) and the
  rest of the token is allowed after that lexeme: by the configuration ``B`` of the ended
  lexeme alone (:meth:`LaneMasks._spawn`: the parser node after scanning it, or for an
  ``%ignore`` lexeme the node it started at), walked with the configuration automaton
  from ``a``'s children that ``B`` lets through (few: the bytes that may follow an
  identifier are rarely inside tokens), or, where many of ``a``'s children go on (after a
  space, every word), split into ``B``'s lanes again at ``a``, whose walks are shared too.

So an identifier, a string or a number in progress costs one shared walk per lexer state
instead of one configuration per trie node per parse position. The masks are the plain
walk's, bit for bit (``tests/test_grammar_lanes.py`` against the plain walk and brute force).

>>> from hf_constrained.vocabulary import Vocabulary
>>> from hf_constrained.grammar.constraint import GrammarConstraint
>>> vocab = Vocabulary.from_token_bytes([None] + [bytes([b]) for b in range(256)] + [b"ab", b"b,", b"b, a"])
>>> c = GrammarConstraint('start: NAME ("," " "? NAME)*\\nNAME: /[a-z]+/', vocab, eos_token_id=0)
>>> q = c.state_of_text("x, a")
>>> ids = c.index.lane_masks.allowed_ids(q)
>>> sorted(vocab.token_bytes[t] for t in ids if vocab.token_bytes[t] and len(vocab.token_bytes[t]) > 1)
[b'ab', b'b,', b'b, a']
"""

from __future__ import annotations

import numpy as np

from ..constraint import DEAD


class LexWalk:
    """The lexer-only walk of one lexer state from one trie node, over the byte trie.

    ``ids``: the tokens strictly below the node whose bytes keep the lexer state live;
    ``acc_child`` / ``acc_cls`` / ``acc_par``: the children of the trie nodes (strictly
    below) where the state accepts (a lexeme may end there), their byte classes, and the
    accepting node each is a child of."""

    __slots__ = ("ids", "acc_child", "acc_cls", "acc_par")

    def __init__(self, lexer, vocab, node_cls, state: int, node: int):
        nodes = np.array([node], dtype=np.int64)
        states = np.array([state], dtype=np.int64)
        seen_n, seen_s, ac, ap = [], [], [], []
        table, accepting, expanded = lexer.table, lexer.accepting, lexer.expanded
        while True:
            cs = vocab.child_start[nodes]
            counts = vocab.child_end[nodes] - cs
            total = int(counts.sum())
            if total == 0:
                break
            child = np.repeat(cs - np.cumsum(counts) + counts, counts) + np.arange(total)
            ps = np.repeat(states, counts)
            todo = np.unique(states)
            todo = todo[~expanded[todo]]
            if len(todo):
                lexer.expand_many(todo)
                table, accepting, expanded = lexer.table, lexer.accepting, lexer.expanded
            nxt = table[ps, node_cls[child]].astype(np.int64)
            keep = np.flatnonzero(nxt != DEAD)
            if len(keep) == 0:
                break
            nodes, states = child[keep], nxt[keep]
            seen_n.append(nodes)
            acc = np.flatnonzero(accepting[states])
            if len(acc):
                an = nodes[acc]
                cs = vocab.child_start[an]
                cnt = vocab.child_end[an] - cs
                n = int(cnt.sum())
                if n:
                    ac.append(np.repeat(cs - np.cumsum(cnt) + cnt, cnt) + np.arange(n))
                    ap.append(np.repeat(an, cnt))
        if seen_n:
            allnodes = np.concatenate(seen_n)
            ts = vocab.term_start[allnodes]
            tc = vocab.term_end[allnodes] - ts
            has = np.flatnonzero(tc)
            ts, tc = ts[has], tc[has]
            n = int(tc.sum())
            self.ids = vocab.term_ids[np.repeat(ts - np.cumsum(tc) + tc, tc) + np.arange(n)].astype(np.int64)
        else:
            self.ids = np.zeros(0, np.int64)
        self.acc_child = np.concatenate(ac) if ac else np.zeros(0, np.int64)
        self.acc_par = np.concatenate(ap) if ap else np.zeros(0, np.int64)
        self.acc_cls = node_cls[self.acc_child].astype(np.int64)


class LaneMasks:
    """Token masks of a :class:`~.configs.ConfigAutomaton`'s configurations, lane by lane
    (see the module docstring); the caller holds the automaton's lock."""

    #: accepting trie nodes with more children than this that the ended lexeme's
    #: configuration lets through are split into its lanes (walks shared) instead of
    #: walked with the configuration automaton
    SPLIT_CHILDREN = 16
    #: shared lexer walks kept (past it the memo restarts)
    MEMO = 20_000

    def __init__(self, automaton, index):
        self.a = automaton
        self.index = index
        self.vocab = index.vocab
        self._walks: dict = {}      # (lexer state, trie node) -> LexWalk
        self._spawns: dict = {}     # slot -> (config B, live classes, lanes of B grouped by state)
        self._node_cls = None

    def _walk(self, state: int, node: int) -> LexWalk:
        key = (state, node)
        got = self._walks.get(key)
        if got is None:
            if self._node_cls is None:
                self._node_cls = self.a.byte_class.take(self.vocab.node_byte).astype(np.int64)
            if len(self._walks) >= self.MEMO:
                self._walks.clear()
            got = self._walks[key] = LexWalk(self.a.lexer, self.vocab, self._node_cls, state, node)
        return got

    def _spawn(self, slot: int) -> tuple:
        """``(B, live, lanes)`` for a lexeme of ``slot`` that ends: ``B`` the configuration
        of that end alone (what :meth:`~.configs.ConfigAutomaton._fill_column` interns for
        it), ``live[k]`` whether ``B`` reads byte class ``k``, ``lanes`` its lanes as
        ``(lexer state, slots)`` pairs."""
        got = self._spawns.get(slot)
        if got is None:
            a = self.a
            node, term, ign = a._slots[slot]
            b = a._intern((node,), (), False) if ign else a._intern((), (), False, ((node, term),))
            a.expand(b)
            live = a.table[b] != DEAD
            got = self._spawns[slot] = (b, live, _group(self._lanes(b)))
        return got

    def _lanes(self, cid: int) -> list:
        boundary, threads, _ = self.a._closed_key(cid)
        lanes = list(threads)
        for n in boundary:
            slots, states = self.a._node_lanes(n)
            lanes.extend(zip(slots, states))
        return lanes

    def pays(self, cid: int) -> bool:
        """Whether ``cid``'s lanes are in two lexer states or more (with one, the plain
        walk's configurations are one per lexer state: nothing to share)."""
        return len({s for _, s in self._lanes(cid)}) > 1

    def may_loop(self, cid: int, min_bytes: int) -> bool:
        """False when ``cid`` cannot loop back to itself on ``min_bytes`` bytes (so it has no
        lexical region); True when it might (a necessary condition, checked on its lanes)."""
        a = self.a
        boundary, threads, _ = a._closed_key(cid)
        lex = a.lexer
        cond = np.ones(a.n_classes, dtype=bool)
        ts = np.array([s for _, s in threads], dtype=np.int64)
        if len(ts):
            lex.expand_many(ts)
            cond &= (lex.table[ts] == ts[:, None]).all(0)
        bs = [s for n in boundary for s in a._node_lanes(n)[1]]
        if bs:
            bs = np.array(bs, dtype=np.int64)
            lex.expand_many(bs)
            m = lex.table[bs]
            cond &= ((m == DEAD) | np.isin(m, ts) | lex.accepting[m]).all(0)
        return int(np.count_nonzero(cond[a.byte_class])) >= min_bytes

    def allowed_ids(self, cid: int) -> np.ndarray:
        """Token ids (not EOS) whose bytes lead from configuration ``cid`` to a live one."""
        chunks, small_n, small_s = [], [], []
        table = None
        work = [(0, s, slots) for s, slots in _group(self._lanes(cid))]
        split = set()
        while work:
            node, state, slots = work.pop()
            w = self._walk(state, node)
            if len(w.ids):
                chunks.append(w.ids)
            if not len(w.acc_child):
                continue
            for sl in slots:
                b, live, lanes = self._spawn(sl)
                sel = np.flatnonzero(live[w.acc_cls])
                if not len(sel):
                    continue
                if len(sel) > self.SPLIT_CHILDREN:
                    par, cnt = np.unique(w.acc_par[sel], return_counts=True)
                    big = par[cnt > self.SPLIT_CHILDREN]
                    if len(big):
                        for p in big.tolist():
                            if (p, sl) not in split:
                                split.add((p, sl))
                                work.extend((p, s2, sl2) for s2, sl2 in lanes)
                        sel = sel[~np.isin(w.acc_par[sel], big)]
                        if not len(sel):
                            continue
                table = self.a.table
                small_n.append(w.acc_child[sel])
                small_s.append(table[b, w.acc_cls[sel]].astype(np.int64))
        if small_n:
            nodes, states = np.concatenate(small_n), np.concatenate(small_s)
            order = np.argsort(nodes, kind="stable")
            ids, _ = self.index._walk_from(self.vocab, self.index._node_cls, nodes[order], states[order])
            chunks.append(ids)
        return np.concatenate(chunks) if chunks else np.zeros(0, np.int64)


def _group(lanes) -> list:
    """``[(lexer state, slots)]`` of ``(slot, lexer state)`` lanes, one entry per state."""
    by: dict = {}
    for sl, s in lanes:
        by.setdefault(s, []).append(sl)
    return [(s, tuple(dict.fromkeys(sls))) for s, sls in by.items()]
