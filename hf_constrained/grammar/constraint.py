"""GrammarConstraint: a context-free grammar as a :class:`~hf_constrained.constraint.Constraint`.

States are interned configurations of :class:`.configs.ConfigAutomaton`
(parser nodes + lexemes in progress), so the shell caches masks per state id
and rows/beams in the same configuration share everything. Masks come from
:class:`~hf_constrained.index.TokenIndex` walking the vocabulary trie with the
configuration automaton's transition table (vectorised, no loop over tokens):
a token is allowed iff its bytes lead to a live configuration, which is
exactly "the text stays a prefix of a sentence", and every such prefix can be
completed because the vocabulary spells every byte (checked). EOS is allowed
iff the configuration is a sentence.

>>> from hf_constrained.vocabulary import Vocabulary
>>> vocab = Vocabulary.from_token_bytes([None] + [bytes([b]) for b in range(256)] + [b"(x", b"))"])
>>> c = GrammarConstraint('start: "(" start ")" | "x"', vocab, eos_token_id=0)
>>> [vocab.token_bytes[t] for t in c.allowed_ids(int(c.starts[0]))]
[b'(', b'x', b'(x']
>>> q = c.walk(c.starts, np.array([[257, 258]]))        # "(x" then "))": one ")" too many
>>> int(q[0])
0
>>> q = c.walk(c.starts, np.array([[257, ord(")") + 1]]))
>>> c.accepting(q).tolist(), c.allowed_ids(int(q[0])).tolist()
([True], [0])
"""

from __future__ import annotations

import contextlib
import functools
import gc
import threading
import time
from pathlib import Path

import numpy as np

from .. import cache as disk
from ..constraint import Constraint
from ..errors import UnsupportedTokenizerError, nested_too_deeply
from ..index import TokenIndex, harvest_levels
from ..vocabulary import Vocabulary
from .cfg import CFG, GrammarError, from_lark
from .configs import DEFAULT_MAX_CONFIGS, DEFAULT_MAX_THREADS, ConfigAutomaton
from .earley import DEFAULT_MAX_ITEMS, DEFAULT_MAX_NODES, GrammarLimitError
from .gbnf import gbnf_to_cfg
from .shared_regions import SharedRegions

SYNTAXES = ("lark", "gbnf")


def load_grammar(text, syntax: str = "lark", start: str = "start", cache_dir=None) -> CFG:
    """Grammar text (Lark or GBNF) -> checked :class:`CFG`; a CFG passes through.

    Read grammars are kept per process (a CFG is never modified) and, by a digest
    of the text, in the disk cache (``cache_dir``: see
    :func:`hf_constrained.cache.resolve_cache_dir`), so a second processor, or a
    second process, for the same text skips Lark's reading of it.

    >>> load_grammar('root ::= "a"+', syntax="gbnf").nonterminals[0]
    'start'
    >>> load_grammar('start: "a"') is load_grammar('start: "a"')
    True
    """
    if isinstance(text, CFG):
        return text
    if syntax not in SYNTAXES:
        raise ValueError(f"syntax must be one of {SYNTAXES}, not {syntax!r}")
    if not isinstance(text, str):
        raise TypeError(f"a grammar must be {syntax} text (a str), not {type(text).__name__}")
    folder = disk.resolve_cache_dir(cache_dir)
    with nested_too_deeply(GrammarError, f"the {syntax} grammar"):
        return _read(text, syntax, start, str(folder) if folder is not None else None)


#: mixed into the disk-cache keys of read grammars and grammar states: bump it when
#: what they store changes meaning
GRAMMAR_CACHE_VERSION = 6  # 2: read grammars store the regular-rule rewrite (grammar/regular.py);
                           # 3: with right spines as prefix lexemes; 4: GBNF read without Lark;
                           # 5: large GBNF counts in O(log) rules (cfg.Counted);
                           # 6: %ignore lexemes end as Lark ends them (grammar/lexeme_ends.py)


@functools.lru_cache(maxsize=1)
def _lark_version() -> str:
    """lark's version without importing lark (40 ms): a cached grammar needs no Lark at all."""
    import sys
    if "lark" in sys.modules:
        return sys.modules["lark"].__version__
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("lark")
    except PackageNotFoundError:  # pragma: no cover - from_lark then says how to install it
        return "none"


@functools.lru_cache(maxsize=64)
def _read(text: str, syntax: str, start: str, folder) -> CFG:
    reader = _lark_version() if syntax == "lark" else "own"   # (GBNF is read without Lark)
    key = disk.digest("grammar-text", GRAMMAR_CACHE_VERSION, reader, syntax, start, text)
    path = Path(folder) / f"grammar-{key[:40]}.npy" if folder is not None else None
    if path is not None:
        arrays = disk.load(path, key)
        if arrays is not None:
            try:
                return CFG.from_json(bytes(arrays["cfg"]).decode()).check()
            except (KeyError, ValueError, GrammarError):
                pass  # foreign or corrupt: read again and rewrite
    cfg = gbnf_to_cfg(text) if syntax == "gbnf" else from_lark(text, start=start)   # (GBNF: no Lark)
    if path is not None:
        disk.save(path, key, {"cfg": np.frombuffer(cfg.to_json().encode(), dtype=np.uint8)})
    return cfg


def grammar_list(grammar_or_grammars) -> tuple:
    """(list of grammars, per_prompt) from one grammar or a list of them.

    >>> grammar_list('start: "a"')
    (['start: "a"'], False)
    >>> grammar_list(['start: "a"', 'start: "b"'])[1]
    True
    """
    if isinstance(grammar_or_grammars, (str, CFG)):
        return [grammar_or_grammars], False
    if isinstance(grammar_or_grammars, (list, tuple)) and grammar_or_grammars and all(
            isinstance(g, (str, CFG)) for g in grammar_or_grammars):
        return list(grammar_or_grammars), True
    raise TypeError("grammar_or_grammars must be grammar text or a non-empty list of grammar texts")


_GC_LOCK = threading.Lock()
_GC_HOLDERS = [0, False]     # mask walks in progress, whether the collector was on before the first


@contextlib.contextmanager
def _collector_paused():
    """Pause Python's cyclic garbage collector during a mask walk (then restore it).

    A walk that reaches a new region of the grammar creates tens of thousands of small
    tuples (configurations, parser items) that live as long as the automaton; the
    collector's passes over them took a third to a half of such a walk. They form no
    reference cycles, so nothing is left for the collector to find, and they are tuples of
    ints (not frozensets or lists), so the collector stops tracking them after its next
    passes instead of walking them again in every full pass of the process."""
    with _GC_LOCK:
        if _GC_HOLDERS[0] == 0:
            _GC_HOLDERS[1] = gc.isenabled()
            gc.disable()
        _GC_HOLDERS[0] += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _GC_HOLDERS[0] -= 1
            if _GC_HOLDERS[0] == 0 and _GC_HOLDERS[1]:
                gc.enable()


class _GrammarIndex(SharedRegions, TokenIndex):
    """:class:`~hf_constrained.index.TokenIndex` over a :class:`ConfigAutomaton` that fills
    only the transition cells a walk reads (a whole row creates a configuration per byte
    class, most of which no token reaches: 9 in 10 in a SQL walk)."""

    def __init__(self, *args, **kwargs):
        self._init_regions()
        super().__init__(*args, **kwargs)

    def _fill(self, states: np.ndarray, classes: np.ndarray) -> None:
        self.dfa.fill(states, classes)   # under the automaton's lock (and no other)

    #: one-node levels through the general step, whose missing cells go to :meth:`_fill`
    #: (TokenIndex's one-node step expands whole rows, as a LazyDFA computes them)
    ONE_NODE = False

    #: a sparse trie level of at most this many live nodes with at most twice as many children
    #: is stepped on Python ints: a grammar's walks go deep along few nodes (DeepSeek's 64-dash
    #: token, runs of spaces or brackets), where a level's ten numpy calls cost several times the work
    SMALL_FRONTIER = 16

    def _walk_all(self, q: int):
        """:meth:`TokenIndex._walk_all <hf_constrained.index.TokenIndex._walk_all>` with its
        narrow levels stepped on Python lists from one level to the next.

        A grammar's walk goes down long chains of one or two live nodes (DeepSeek's runs of
        ``(``, ``-`` or spaces: ~60 levels per new arithmetic state), where converting each
        level's lists to arrays and back (and the base's dense steps over the deep, small
        depths) cost more than the level's own work. Every level of at most
        ``SMALL_FRONTIER`` live nodes (and ``2 * SMALL_FRONTIER`` children) is stepped on
        lists, also one the base walks densely: a level fills the cells of its live nodes'
        children in one :meth:`_fill` either way (the automaton sorts them), so the cells, their
        order and every configuration id are the base's, and so are the (token, state) pairs
        (the order of tokens differs; masks do not depend on it). The base's count of densely
        walked nodes (which decides when the class trie is built) is kept as the base keeps it."""
        small = self.SMALL_FRONTIER
        if small <= 0:
            return super()._walk_all(q)
        v, node_cls, parent_rel = self._walk_structure()
        dsl = v.depth_start.tolist()
        n_depths = len(dsl) - 1
        dtype = self.dfa.table.dtype
        out_ids, out_states = [], []
        run: list = []
        d0 = 0

        def harvest():
            if run:
                harvest_levels(v, dsl[d0], run, out_ids, out_states)

        cs_item, ce_item = v.child_start.item, v.child_end.item
        bc, nb_item = self._byte_class, getattr(v, "node_byte", None)
        nb_item = nb_item.item if nb_item is not None else None
        room0 = 2 * small
        nodes, states, as_list = [0], [q], True   # level 0: the root, sparse
        seen_n: list = []   # arrays of live nodes (and their states) of the sparse levels
        seen_s: list = []
        fn: list = []       # the nodes and states of the list levels since the last array level
        fs: list = []
        dense = None        # state per node of the previous depth, while walking densely
        base_dense = False  # whether TokenIndex._walk_all walks this level densely
        for d in range(1, n_depths):
            a, b = dsl[d], dsl[d + 1]
            if not base_dense and len(nodes) * 4 > a - dsl[d - 1]:
                base_dense = True
            if base_dense and v is self.vocab:   # as the base counts them (when to build the class trie)
                self._dense_nodes += b - a
                if node_cls is None and b - a > self.DENSE_LEVEL_GATHER:
                    node_cls = self.node_cls
            kids = None
            if dense is None and len(nodes) <= small:   # as _children's step on Python ints
                if not as_list:
                    nodes, states, as_list = nodes.tolist(), states.tolist(), True
                kids, froms = [], []
                room = room0
                for n, s in zip(nodes, states):
                    x, y = cs_item(n), ce_item(n)
                    room -= y - x
                    if room < 0:
                        kids = None
                        break
                    kids += range(x, y)
                    froms += [s] * (y - x)
            if kids is not None:
                if node_cls is None:
                    ks = [bc[nb_item(c)] for c in kids]
                else:
                    nc_item = node_cls.item
                    ks = [nc_item(c) for c in kids]
                item = self.dfa.table.item
                nxt = [item(s, k) for s, k in zip(froms, ks)]
                if -1 in nxt:   # cells not computed yet: filled together, as _children does
                    miss = [(s, k) for s, k, t in zip(froms, ks, nxt) if t < 0]
                    self._fill(np.array([s for s, _ in miss], dtype=np.int64),
                               np.array([k for _, k in miss], dtype=np.int64))
                    item = self.dfa.table.item
                    nxt = [item(s, k) for s, k in zip(froms, ks)]
                if 0 in nxt:   # DEAD is 0
                    kids = [c for c, t in zip(kids, nxt) if t]
                    nxt = [t for t in nxt if t]
                if not kids:
                    break
                if base_dense and len(kids) * 8 < b - a:
                    base_dense = False
                nodes, states = kids, nxt
                fn += kids
                fs += nxt
                continue
            if as_list:
                nodes, states, as_list = np.array(nodes, np.int64), np.array(states, dtype), False
            if base_dense:
                if dense is None:
                    dense = np.zeros(a - dsl[d - 1], dtype=states.dtype)
                    dense[nodes - dsl[d - 1]] = states
                ps = dense.take(parent_rel[a:b])
                cur = self._lookup(ps, self._classes(node_cls, slice(a, b)))
                if not run:
                    d0 = d
                run.append(cur)
                n_live = np.count_nonzero(cur)
                if n_live == 0:
                    break
                if n_live * 8 < b - a:
                    base_dense = False
                if not base_dense or n_live <= small:  # back to sparse
                    harvest()
                    live = cur.nonzero()[0]
                    nodes, states, dense = live + a, cur[live], None
                else:
                    dense = cur
                continue
            nodes, states = TokenIndex._children(self, v, node_cls, nodes, states)
            if len(nodes) == 0:
                break
            if fn:
                seen_n.append(np.array(fn, np.int64))
                seen_s.append(np.array(fs, dtype))
                fn, fs = [], []
            seen_n.append(nodes)
            seen_s.append(states)
        harvest()
        if fn:
            seen_n.append(np.array(fn, np.int64))
            seen_s.append(np.array(fs, dtype))
        return self._walk_result(v, seen_n, seen_s, out_ids, out_states)

    def _children(self, v, node_cls, nodes: np.ndarray, states: np.ndarray):
        if len(nodes) > self.SMALL_FRONTIER:
            return super()._children(v, node_cls, nodes, states)
        starts, ends = v.child_start, v.child_end
        kids, froms = [], []                # each child, and its parent's state
        room = 2 * self.SMALL_FRONTIER
        for n, s in zip(nodes.tolist(), states.tolist()):
            a, b = starts.item(n), ends.item(n)
            room -= b - a
            if room < 0:
                return super()._children(v, node_cls, nodes, states)
            kids += range(a, b)
            froms += [s] * (b - a)
        if node_cls is None:   # classes from the nodes' bytes
            bc, nb = self._byte_class, v.node_byte
            ks = [bc[nb.item(c)] for c in kids]
        else:
            ks = [node_cls.item(c) for c in kids]
        item = self.dfa.table.item
        nxt = [item(s, k) for s, k in zip(froms, ks)]
        if -1 in nxt:   # cells not computed yet: filled together, as TokenIndex._lookup does
            miss = [(s, k) for s, k, t in zip(froms, ks, nxt) if t < 0]
            self._fill(np.array([s for s, _ in miss], dtype=np.int64), np.array([k for _, k in miss], dtype=np.int64))
            item = self.dfa.table.item
            nxt = [item(s, k) for s, k in zip(froms, ks)]
        if 0 in nxt:   # DEAD is 0
            kids = [c for c, t in zip(kids, nxt) if t]
            nxt = [t for t in nxt if t]
        return np.array(kids, dtype=np.int64), np.array(nxt, dtype=self.dfa.table.dtype)


class GrammarConstraint(Constraint):
    """The language of one grammar per prompt (or one for all), over a vocabulary.

    Args:
        grammar_or_grammars: Lark (or GBNF, ``syntax="gbnf"``) text, a :class:`CFG`, or a list.
        tokenizer_or_vocab: a Hugging Face tokenizer or a :class:`Vocabulary`.
        eos_token_id: an id or list of ids (default: the tokenizer's EOS).
        max_configs / max_threads / max_items / max_nodes: the documented limits on the
            configuration table, lexemes in progress per configuration, Earley items per
            parser node and parser nodes; crossing one raises ``GrammarLimitError``.
    """

    def __init__(self, grammar_or_grammars, tokenizer_or_vocab, *, syntax: str = "lark", start: str = "start",
                 eos_token_id=None, pad_token_id=None, max_configs: int = DEFAULT_MAX_CONFIGS,
                 max_threads: int = DEFAULT_MAX_THREADS, max_items: int = DEFAULT_MAX_ITEMS,
                 max_nodes: int = DEFAULT_MAX_NODES, cache_dir=None, warm: bool = True):
        texts, self.per_prompt = grammar_list(grammar_or_grammars)
        if isinstance(tokenizer_or_vocab, Vocabulary):
            vocab = tokenizer_or_vocab
        else:
            vocab = Vocabulary.from_tokenizer(tokenizer_or_vocab, cache_dir=cache_dir)
            if pad_token_id is None:
                pad_token_id = getattr(tokenizer_or_vocab, "pad_token_id", None)
        if not vocab.full_byte_coverage:
            raise UnsupportedTokenizerError(
                "grammar constraints need a vocabulary with a single-byte token for every byte "
                "(byte-level BPE, or SentencePiece with byte fallback); this one lacks some bytes")
        eos = vocab.eos_ids(eos_token_id)
        if not eos:
            raise ValueError("the tokenizer has no EOS token; pass eos_token_id=")
        self.vocab = vocab
        self.texts = texts
        distinct = list(dict.fromkeys(id(t) if isinstance(t, CFG) else t for t in texts))
        by_key = {}
        # Lark's reading of the text and the automaton's tables allocate tens of thousands of
        # objects: with the collector on, that burst can set off a full pass over every object
        # of the process (~80-100 ms with a 129k tokenizer and transformers loaded)
        with _collector_paused():
            for t in texts:
                k = id(t) if isinstance(t, CFG) else t
                if k not in by_key:
                    by_key[k] = load_grammar(t, syntax, start, cache_dir=cache_dir)
            self.grammars = [by_key[k] for k in distinct]
            self.automaton = ConfigAutomaton(self.grammars, strip_leading_space=vocab.strip_leading_space,
                                             max_configs=max_configs, max_threads=max_threads,
                                             max_items=max_items, max_nodes=max_nodes)
        self.index = _GrammarIndex(self.automaton, vocab, eos, pad_token_id=pad_token_id)
        pos = {k: i for i, k in enumerate(distinct)}
        self.starts = np.array([self.automaton.starts[pos[id(t) if isinstance(t, CFG) else t]] for t in texts],
                               dtype=np.int64)
        self.eos_token_ids = self.index.eos_ids
        self.pad_token_id = pad_token_id
        self.vocab_size = vocab.size
        if warm:
            self.warm()

    def warm(self) -> None:
        """Compute the start states' masks (limits fail here: at construction)."""
        for s in set(self.starts.tolist()):
            self.allowed_ids(s)   # (through _ensure: the walk with the collector paused)

    # ---------------------------------------------------------------- Constraint
    def advance(self, states: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        return self.index.next_states(states, tokens)

    def walk(self, states: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        return self.index.walk_tokens(np.asarray(states, dtype=np.int64), np.asarray(tokens, dtype=np.int64))

    def accepting(self, states: np.ndarray) -> np.ndarray:
        states = np.asarray(states, dtype=np.int64)
        out = np.zeros(len(states), dtype=bool)
        live = states > 0
        out[live] = self.automaton.accepting[states[live]]
        return out

    def _ensure(self, state: int) -> int:
        """Create ``state``'s mask under the automaton's lock (so that :meth:`export_state`,
        run after a generate() call, never sees the table of masks change); a mask that
        exists is read without it."""
        state = int(state)
        if state not in self.index._bits:
            with _collector_paused(), self.automaton._lock:
                self.index.bits(state)
        return state

    def allowed_ids(self, state: int) -> np.ndarray:
        return self.index.allowed(self._ensure(state))

    def allowed_mask(self, state: int, width: int) -> np.ndarray:
        return self.index.allowed_mask(self._ensure(state), width)

    def banned_bits(self, state: int, width: int) -> np.ndarray:
        if width % 8:
            return super().banned_bits(state, width)
        return ~self.index.mask_bytes(self._ensure(state), width)

    def successors(self, state: int) -> np.ndarray:
        with _collector_paused(), self.automaton._lock:
            return self.index.successors(int(state))

    @property
    def num_states(self) -> int:
        return self.automaton.num_states

    def precompute(self, max_states: int | None = 1_000, max_seconds: float | None = None) -> bool:
        """Masks of the reachable configurations now, breadth-first over tokens from the
        starts; True when every reachable one has its mask (a grammar with recursion
        reaches infinitely many, so this stops after ``max_states`` masks or ``max_seconds``)."""
        deadline = None if max_seconds is None else time.monotonic() + max_seconds
        with _collector_paused(), self.automaton._lock:
            return self.index.precompute(max_states=max_states, deadline=deadline)

    # ---------------------------------------------------------------- disk cache
    def cache_key(self):
        return disk.digest("grammar-states", GRAMMAR_CACHE_VERSION, self.vocab.fingerprint,
                           [g.digest() for g in self.grammars], self.eos_token_ids.tolist(),
                           self.pad_token_id, bool(self.vocab.strip_leading_space))

    def cache_revision(self):
        return (self.automaton.num_states, self.index.num_computed)

    def export_state(self) -> dict:
        with self.automaton._lock:
            masks = self.index.export_masks()
            return {**self.automaton.export_states(masks["idx_states"]), **masks}

    def import_state(self, arrays: dict) -> bool:
        with self.automaton._lock:
            try:
                mapping = self.automaton.import_states(arrays)
                if (mapping[arrays["idx_states"]] <= 0).any():
                    raise ValueError("a cached mask belongs to no cached configuration")
                self.index.import_masks(arrays, mapping)
            except (ValueError, KeyError, IndexError, GrammarLimitError):
                # foreign or inconsistent file, or more than this engine's limits allow: ignore
                # it (what was adopted is valid content), it gets rewritten
                return False
        return True

    # ---------------------------------------------------------------- helpers
    def state_of_text(self, text, grammar_index: int = 0) -> int:
        """Configuration after ``text`` (str or bytes) from grammar ``grammar_index``'s start."""
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        return self.automaton.walk(int(self.starts[grammar_index]), data)
