"""The byte-level configuration automaton of a grammar: lexer DFA + Earley nodes.

A *configuration* is what a row has read so far, summarised exactly:

* ``boundary``: the Earley nodes (:mod:`.earley`) of the parses whose last
  lexeme ends exactly here (a new lexeme may start);
* ``threads``: the lexemes in progress, each a *slot* (the node it started at,
  its terminal, scan or ``%ignore``) and the terminal's DFA state after the
  bytes read since that node, packed into one int (:func:`.filling.pack`). All
  terminals are compiled into one :class:`~hf_constrained.automaton.LazyDFA`
  (one start state each) with the project's regex machinery.

Reading a byte steps every thread and starts the terminals the boundary nodes
expect (plus ``%ignore``); a thread whose DFA accepts ends its lexeme: the
parser is consulted (only then) and all lexemes ending at the same byte are
merged into one Earley node, while the thread also goes on (the lexeme may be
longer). An ignored lexeme returns to the node it started at, where Lark's
match ends it (:mod:`.lexeme_ends`: anywhere, only where the next byte stops it,
or at its first match). The merge (an
Earley closure, the costly part) waits until a walk reads on from that
configuration: most configurations a mask walk reaches are where a token ends,
and whether they are sentences is known without it
(:meth:`~.earley.Parser.scan_accepts`). Configurations
are interned to small ids, with a transition table ``table[config, byte
class]`` grown lazily, cell by cell (:meth:`ConfigAutomaton.fill`, in :mod:`.filling`, with the
lexer's step in :mod:`.lexer`: a walk computes only the successors it reads), like the regex :class:`LazyDFA`: that is what
:class:`~hf_constrained.index.TokenIndex` walks over the vocabulary trie,
vectorised, to compute token masks, so tokens that stay inside one lexeme and
tokens that cross lexeme boundaries are both exact.

Every live configuration can be completed into a sentence: terminals have no
dead DFA states, every rule is productive (checked), and the vocabulary must
spell every byte.

>>> from hf_constrained.grammar.cfg import from_lark
>>> a = ConfigAutomaton([from_lark('start: "(" start ")" | "x"')])
>>> q = a.walk(a.starts[0], b"((x)")
>>> bool(a.accepting[q]), bool(a.accepting[a.walk(q, b")")]), a.walk(q, b"x")
(False, True, 0)
"""

from __future__ import annotations

import threading

import numpy as np

from ..constraint import DEAD
from .cfg import GrammarError
from .earley import DEFAULT_MAX_ITEMS, DEFAULT_MAX_NODES, GrammarLimitError, Parser
from .filling import PAIR_LOW, PAIR_SHIFT, CellFilling, _canon, column_classes, pack, unpack
from .lexeme_ends import LONGEST, SHORTEST, ignore_modes, reachable_states
from .lexer import terminal_dfa

DEFAULT_MAX_CONFIGS = 200_000
#: lexemes in progress one configuration may hold (ambiguous lexing multiplies them)
DEFAULT_MAX_THREADS = 10_000


class ConfigAutomaton(CellFilling):
    """Interned grammar configurations with a lazily filled byte-class transition table.

    Duck-types the parts of :class:`~hf_constrained.automaton.LazyDFA` that
    :class:`~hf_constrained.index.TokenIndex` uses (``table``, ``accepting``,
    ``byte_class``, ``starts``, ``expand_many``, ``num_states``,
    ``mask_representative``), plus :meth:`fill` for the index of
    :class:`~.constraint.GrammarConstraint`, which reads cells, not rows.
    """

    def __init__(self, grammars, *, strip_leading_space: bool = False,
                 max_configs: int = DEFAULT_MAX_CONFIGS, max_threads: int = DEFAULT_MAX_THREADS,
                 max_items: int = DEFAULT_MAX_ITEMS, max_nodes: int = DEFAULT_MAX_NODES):
        grammars = list(grammars)
        self.parser = p = Parser(grammars, max_items=max_items, max_nodes=max_nodes)
        self._longest_slots: set = set()    # ignore slots whose lexeme ends only where it stops
        self._shortest_slots: set = set()   # slots (ignore or scan) whose lexeme ends at its first match
        self._ignore_live_memo: dict = {}
        self.max_configs, self.max_threads = int(max_configs), int(max_threads)
        pats = list(p.terminal_patterns)
        if strip_leading_space:
            pats.append(" ")  # gives the space byte a class of its own (never a terminal)
        self.lexer = dfa = terminal_dfa(pats, p.terminal_names)
        self.term_start = np.array(dfa.starts[:len(p.terminal_patterns)], dtype=np.int64)
        self._term_start = self.term_start.tolist()
        for t, s in enumerate(self._term_start):
            if dfa.accepting[s]:
                raise GrammarError(f"terminal {p.terminal_names[t]} matches the empty string "
                                   f"(regex {p.terminal_patterns[t]!r}); terminals must be non-empty: "
                                   "make the terminal non-empty and the rule that uses it optional")
        # how each grammar's %ignore lexemes end (Lark's reading: grammar/lexeme_ends.py)
        term_id = {pat: t for t, pat in enumerate(p.terminal_patterns)}
        self._ignore_mode, self._scan_shortest = [], []
        for g in grammars:
            modes = ignore_modes(g.patterns, g.ignore, g.terminals, lexer=dfa,
                                 starts=[self._term_start[term_id[pat]] for pat in g.patterns]) if g.ignore else {}
            self._ignore_mode.append({term_id[g.patterns[t]]: m for t, m in modes.items()})
            self._scan_shortest.append(frozenset(term_id[g.patterns[t]] for t in g.shortest))
        self.byte_class = dfa.byte_class
        self.n_classes = dfa.n_classes
        no_col = np.zeros(self.n_classes, dtype=np.int64)
        self._no_lanes = (no_col, ((),), column_classes(no_col, 1))
        self._space_class = int(dfa.byte_class[0x20])
        self._lock = threading.RLock()
        self._slot_ids: dict = {}
        self._slots: list = []          # slot -> (node, terminal, is_ignore) packed in one int (_slot)
        self._merge: dict = {}
        self._lanes: dict = {}          # parser node -> (slots, lexer start states)
        self._continues: dict = {}
        self._moves: dict = {}          # lane states -> lexer.lexer_step
        self._steps: dict = {}          # lane states -> _lexer_moves
        self._live_rows: dict = {}      # lexer state -> lexer.live_row
        self._column_memo: dict = {}    # lexer column -> itself (one tuple per distinct column)
        self._left: dict = {}           # cid -> columns still to fill, while its row is partly filled
        self._plans: dict = {}          # cid -> _plan, while its row is partly filled
        self._keys: list = []           # cid -> (boundary, threads, strip, pending scans)
        self._ids: dict = {}
        self._closed: list = []         # cid -> (boundary with its scans merged, threads, strip, ()) or None
        self._by_closed: dict = {}      # closed content -> the first cid with it (its row and mask)
        cap = 64
        self.table = np.full((cap, self.n_classes), -1, dtype=np.int32)
        self.accepting = np.zeros(cap, dtype=bool)
        self.expanded = np.zeros(cap, dtype=bool)
        dead = self._intern((), (), False)
        assert dead == DEAD
        self.table[DEAD] = DEAD
        self.expanded[DEAD] = True
        self.starts = [self._intern((n,), (), bool(strip_leading_space))
                       for n in p.start_nodes]

    # ---------------------------------------------------------------- interning
    def _slot(self, node: int, term: int, ignore: bool) -> int:
        """The id of the slot ``(node, terminal, is_ignore)``. A slot is kept as one int,
        ``pack(node, terminal) << 1 | is_ignore`` (``>> 1``: the packed pending scan,
        ``>> PAIR_SHIFT + 1``: the node), not a tuple: ints are never tracked by the cyclic
        collector (nor is a dict of ints), where each new slot's tuple sat in its youngest
        generation until the next pass (~1k per arithmetic replay of ``grammar_bench.py``)."""
        key = (node << PAIR_SHIFT | term) << 1 | bool(ignore)
        sid = self._slot_ids.get(key)
        if sid is None:
            sid = self._slot_ids[key] = len(self._slots)
            self._slots.append(key)
            g = self.parser.grammar[node]
            mode = self._ignore_mode[g].get(term) if ignore else SHORTEST if term in self._scan_shortest[g] else None
            if mode == LONGEST:
                self._longest_slots.add(sid)
            elif mode == SHORTEST:
                self._shortest_slots.add(sid)
        return sid

    def slot_parts(self, sid: int) -> tuple:
        """``(node, terminal, is_ignore)`` of slot ``sid``."""
        x = self._slots[sid]
        return x >> (PAIR_SHIFT + 1), x >> 1 & PAIR_LOW, bool(x & 1)

    def _intern(self, boundary: tuple, threads: tuple, strip: bool, pending: tuple = ()) -> int:
        """The id of a configuration; ``pending``: ``(node, terminal)`` lexemes that end here
        and are not merged into a parser node yet (:meth:`_closed_key` does it when the
        configuration is expanded or exported: most configurations a mask walk creates are
        where a token ends, and are never expanded).

        ``boundary``, ``threads`` and ``pending`` are sorted tuples of ints without repeats
        (the pairs of the last two packed, :func:`.filling.pack`), never frozensets: the
        cyclic garbage collector stops tracking a tuple of ints after its first pass over it, while a
        frozenset stays tracked for life, so each of the tens of thousands of configurations a
        grammar creates would make every later full pass over the process longer
        (:func:`_canon`). A tuple leaves the collector on a pass that finds its items
        untracked, one nesting level per pass: with pairs as tuples (three levels) every key
        still tracked after the two young generations' passes reached the oldest generation,
        81k objects per SQL replay of ``grammar_bench.py``, enough to start a full pass
        over the whole process (~150 ms) about once per replay."""
        key = (boundary, threads, strip, pending)
        cid = self._ids.get(key)
        if cid is not None:
            return cid
        if not pending:
            cid = self._by_closed.get(key)     # a closed key is a key without pending lexemes
            if cid is not None:
                return cid
        cid = len(self._keys)
        if cid >= self.max_configs:
            raise GrammarLimitError(
                f"the grammar automaton needs more than max_configs={self.max_configs} configurations; "
                "raise max_configs or simplify the grammar")
        if len(threads) > self.max_threads:
            raise GrammarLimitError(
                f"a configuration holds {len(threads)} lexemes in progress, more than "
                f"max_threads={self.max_threads} (terminals that can split the same text in many "
                "ways, e.g. NAME NAME with nothing between, or thousands of terminals possible at one "
                "position, e.g. a rule of that many literal alternatives); make the lexing less "
                "ambiguous, write a long list of literals as one terminal regex, or raise max_threads")
        if cid >= len(self.table):
            grow = len(self.table)
            self.table = np.concatenate([self.table, np.full((grow, self.n_classes), -1, np.int32)])
            self.accepting = np.concatenate([self.accepting, np.zeros(grow, bool)])
            self.expanded = np.concatenate([self.expanded, np.zeros(grow, bool)])
        self._keys.append(key)
        self._ids[key] = cid
        if pending:
            self._closed.append(None)
        else:
            closed = key                # one tuple for both tables
            self._closed.append(closed)
            self._by_closed[closed] = cid
        acc, p = self.parser._accept, self.parser
        self.accepting[cid] = any([acc[n] for n in boundary]) or any(
            [p.scan_accepts(x >> PAIR_SHIFT, x & PAIR_LOW) for x in pending]) or bool(
            self._longest_slots and any([self._ends_text(x) for x in threads]))
        return cid

    def _ends_text(self, thread: int) -> bool:
        """Whether a lexeme in progress (packed slot and lexer state) is an ignored one that
        ends only where it stops (:data:`.lexeme_ends.LONGEST`), has matched, and started at a node
        that accepts: then the text may end here (its match stops at the end)."""
        sl, s = thread >> PAIR_SHIFT, thread & PAIR_LOW
        return (sl in self._longest_slots and bool(self.lexer.accepting[s])
                and bool(self.parser._accept[self._slots[sl] >> (PAIR_SHIFT + 1)]))

    def _ignore_live(self, sl: int, s: int) -> bool:
        """Whether an ignored lexeme of a :data:`.lexeme_ends.LONGEST` slot ``sl``, in lexer state
        ``s``, can still be part of a sentence: it must reach a match after which either the
        text ends (its node accepts) or a lexeme its node may start begins with a byte that
        stops the match (that byte ends the ignored lexeme there). Without this check a
        configuration could live on that no text completes (a comment that only a newline
        ends, where nothing may start with one)."""
        key = sl << PAIR_SHIFT | s
        got = self._ignore_live_memo.get(key)
        if got is None:
            node = self._slots[sl] >> (PAIR_SHIFT + 1)
            got = bool(self.parser._accept[node])
            if not got:
                lanes = self._node_lanes(node)
                lex = self.lexer
                starts = np.array(lanes[len(lanes) >> 1:], dtype=np.int64)
                lex.expand_many(starts)
                firsts = (lex.table[starts] != 0).any(axis=0) if len(starts) else np.zeros(self.n_classes, bool)
                got = any(lex.accepting[d] and bool((firsts & (lex.table[d] == 0)).any())
                          for d in reachable_states(lex, s))
            self._ignore_live_memo[key] = got
        return got

    def _closed_key(self, cid: int) -> tuple:
        """``(boundary, threads, strip, ())`` of ``cid`` with its pending lexemes merged into one
        parser node (Earley's closure, computed here once per configuration): the key of a
        configuration without pending lexemes, so that one with none is its own closed key
        (one tuple for the cyclic collector, not two)."""
        got = self._closed[cid]
        if got is None:
            boundary, threads, strip, pending = self._keys[cid]
            got = self._closed[cid] = (_canon((*boundary, self._merged(pending))), threads, strip, ())
            self._by_closed.setdefault(got, cid)
        return got

    def mask_representative(self, cid: int, depth: int) -> int:
        """The configuration whose mask ``cid`` shares (the first one with the same content:
        a configuration with pending lexemes may close to one that exists);
        :class:`~hf_constrained.index.TokenIndex` asks before walking a new state."""
        with self._lock:
            return self._by_closed[self._closed_key(cid)]

    def _merged(self, scans: tuple) -> int:
        got = self._merge.get(scans)
        if got is None:
            got = self._merge[scans] = (self.parser.scan(*unpack(scans[0])) if len(scans) == 1
                                        else self.parser.merge([unpack(x) for x in scans]))
        return got

    def thread_pairs(self, threads: tuple) -> tuple:
        """``(slot, lexer state)`` of each lexeme in progress of a key's ``threads``."""
        return tuple([unpack(x) for x in threads])

    # ---------------------------------------------------------------- queries
    @property
    def num_states(self) -> int:
        return len(self._keys)

    def step(self, cid: int, byte: int) -> int:
        if not self.expanded[cid]:
            self.expand(cid)
        return int(self.table[cid, self.byte_class[byte]])

    def walk(self, cid: int, data: bytes) -> int:
        """Configuration after reading ``data`` from ``cid`` (``DEAD`` once dead)."""
        for b in data:
            if cid == DEAD:
                return DEAD
            cid = self.step(cid, b)
        return cid

    # ---------------------------------------------------------------- disk cache
    def export_states(self, cids) -> dict:
        """Plain arrays describing configurations ``cids`` (for the disk cache: the
        token-level states whose masks are stored), with the parser nodes and lexer
        states they are made of. The byte-level configurations between them are not
        stored: they are rebuilt, lazily and cheaply, when a token is walked."""
        with self._lock:
            cids = [int(c) for c in cids]
            keys = [self._closed_key(c) for c in cids]
            nodes = {n for k in keys for n in k[0]} | {self.slot_parts(x >> PAIR_SHIFT)[0] for k in keys for x in k[1]}
            out, pos = self.parser.export_nodes(nodes)
            out.update({"lex_" + k: v for k, v in self.lexer.export_states().items()})
            bounds = [sorted(pos[n] for n in k[0]) for k in keys]
            threads = [sorted((pos[(sp := self.slot_parts(sl))[0]], *sp[1:], s) for sl, s in self.thread_pairs(k[1]))
                       for k in keys]
            out["gc_ids"] = np.array(cids, dtype=np.int64)
            out["gc_boundary"] = np.array([x for b in bounds for x in b], dtype=np.int64)
            out["gc_boundary_offsets"] = _offsets(bounds)
            out["gc_threads"] = np.array([t for ts in threads for t in ts], dtype=np.int64).reshape(-1, 4)
            out["gc_thread_offsets"] = _offsets(threads)
            out["gc_strip"] = np.array([k[2] for k in keys], dtype=bool)
            return out

    def import_states(self, arrays: dict) -> np.ndarray:
        """Add the configurations of :meth:`export_states` output (same grammars, any
        process); returns the map from their ids (``gc_ids``) to ours (-1 where none).
        Ids differ between processes (lazy discovery order), so nodes, lexer states and
        configurations are matched by content. Raises ``ValueError`` for a foreign or
        inconsistent file."""
        with self._lock:
            ids = arrays["gc_ids"].tolist()
            b_off, t_off = arrays["gc_boundary_offsets"].tolist(), arrays["gc_thread_offsets"].tolist()
            n = len(ids)
            if len(b_off) != n + 1 or len(t_off) != n + 1 or len(arrays["gc_strip"]) != n or (
                    n and min(ids) < 0) or self.num_states + n > self.max_configs:
                raise ValueError("cached grammar configurations are malformed")
            lex = {k[4:]: v for k, v in arrays.items() if k.startswith("lex_")}
            n_lex = len(lex["dfa_offsets"]) - 1
            bound, thr = arrays["gc_boundary"].tolist(), arrays["gc_threads"].tolist()
            n_nodes, n_terms = len(arrays["gp_offsets"]) - 1, len(self.term_start)
            if (any(not 0 <= x < n_nodes for x in bound)
                    or any(not (0 <= nd < n_nodes and 0 <= t < n_terms and ig in (0, 1) and 0 <= s < n_lex)
                           for nd, t, ig, s in thr)):
                raise ValueError("cached grammar configurations are for other grammars")
            nodes = self.parser.import_nodes(arrays)
            lexmap = self.lexer.import_states(lex)
            strip = arrays["gc_strip"].tolist()
            mapping = np.full(max(ids, default=-1) + 1, -1, dtype=np.int64)
            for i in range(n):
                b = _canon(nodes[bound[b_off[i]:b_off[i + 1]]].tolist())
                ts = _canon([pack(self._slot(int(nodes[nd]), t, bool(ig)), int(lexmap[s]))
                             for nd, t, ig, s in thr[t_off[i]:t_off[i + 1]]])
                mapping[ids[i]] = self._intern(b, ts, bool(strip[i]))
            return mapping

    def describe(self, cid: int) -> dict:
        """The content of a configuration (for tests and debugging)."""
        with self._lock:
            boundary, threads, strip, _ = self._closed_key(cid)
        return {"boundary": sorted(boundary), "threads": sorted(self.thread_pairs(threads)), "strip": strip}


def _offsets(groups) -> np.ndarray:
    out = np.zeros(len(groups) + 1, dtype=np.int64)
    np.cumsum([len(g) for g in groups], out=out[1:])
    return out
