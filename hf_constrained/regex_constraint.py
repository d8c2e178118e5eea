"""``RegexConstraint``: the regex engine (``LazyDFA`` + ``TokenIndex``) behind the
:class:`~hf_constrained.constraint.Constraint` interface.

States are the automaton's DFA state ids (``DEAD`` is 0; they are interned, so
masks are cached per state). The automaton and the index grow lazily and are
shared by every ``generate()`` call on a processor: one re-entrant lock (the
index's) is held where DFA states are determinised and where masks are
computed, never around a whole step.

>>> from hf_constrained import offline
>>> rc = RegexConstraint.from_tokenizer([r"(yes|no)!"], offline.local_tokenizer())
>>> tok = offline.local_tokenizer()
>>> q = rc.walk(rc.starts, np.array([tok.encode("yes", add_special_tokens=False)]))
>>> [tok.decode([t]) for t in rc.allowed_ids(int(q[0]))]
['!']
>>> rc.accepting(rc.walk(q, np.array([tok.encode("!", add_special_tokens=False)]))).tolist()
[True]
"""

from __future__ import annotations

import time

import numpy as np

from . import cache as disk
from .automaton import DEFAULT_MAX_NFA_STATES, DEFAULT_MAX_STATES, MEMBERS_PER_POSITION, LazyDFA
from .constraint import Constraint
from .errors import GenerationConflictError
from .forest import _ALT, _CAT, _CLS, _REP
from .index import TokenIndex
from .vocabulary import Vocabulary

_PROBE_STATES = 128
#: forests larger than this are probed plainly: the walk of growth_bounds() over
#: their nodes (about 0.25 us each) would cost more than it can save
PROBE_BOUND_NODES = 2500


class RegexConstraint(Constraint):
    """Regexes (Python ``re`` syntax, ``fullmatch``) over a tokenizer's vocabulary.

    Args:
        patterns: one regex per start state (duplicates share one).
        vocab: the :class:`~hf_constrained.vocabulary.Vocabulary` of the tokenizer.
        eos_token_ids: ids that end a match.
        pad_token_id: allowed after EOS (generate() pads finished rows).
        max_states, max_nfa_states: limits of the automaton (see ``RegexProcessor``).

    >>> from hf_constrained import offline
    >>> rc = RegexConstraint.from_tokenizer([r"[0-9]+", r"[0-9]+"], offline.local_tokenizer())
    >>> rc.starts.tolist() == [rc.starts[0]] * 2, rc.num_states > 1
    (True, True)
    """

    def __init__(self, patterns, vocab: Vocabulary, eos_token_ids, *, pad_token_id=None,
                 max_states: int = DEFAULT_MAX_STATES, max_nfa_states: int = DEFAULT_MAX_NFA_STATES,
                 strip_leading_space: bool | None = None):
        patterns = list(patterns)
        self.patterns = patterns
        self.vocab = vocab
        self.eos_token_ids = np.array(sorted(set(int(e) for e in eos_token_ids)), dtype=np.int64)
        if not len(self.eos_token_ids):
            raise GenerationConflictError(
                "the tokenizer has no EOS token; pass eos_token_id= (e.g. "
                "model.generation_config.eos_token_id)")
        self.pad_token_id = pad_token_id
        self.vocab_size = vocab.size
        self.distinct = list(dict.fromkeys(patterns))
        self.dfa = LazyDFA.from_patterns(self.distinct, max_states=max_states, max_nfa_states=max_nfa_states,
                                         strip_leading_space=vocab.strip_leading_space
                                         if strip_leading_space is None else bool(strip_leading_space))
        # Probe the first states now so a pattern whose automaton is immediately
        # larger than max_states fails at construction, not inside generate()
        # (only as far as it could still fail: see probe()).
        probe(self.dfa, min(int(max_states) + 1, _PROBE_STATES))
        self.index = TokenIndex(self.dfa, vocab, self.eos_token_ids.tolist(), pad_token_id=pad_token_id)
        self._lock = self.index.lock
        start_of = {p: s for p, s in zip(self.distinct, self.dfa.starts)}
        self.starts = np.array([start_of[p] for p in patterns], dtype=np.int64)

    @classmethod
    def from_tokenizer(cls, patterns, tokenizer, *, eos_token_id=None, cache_dir=False, **kwargs):
        """Build from a Hugging Face tokenizer (EOS defaults to the tokenizer's)."""
        vocab = Vocabulary.from_tokenizer(tokenizer, cache_dir=cache_dir)
        return cls(patterns, vocab, vocab.eos_ids(eos_token_id), pad_token_id=getattr(tokenizer, "pad_token_id", None), **kwargs)

    def mid_text_starts(self):
        """The start states without the tokenizer's first-space rule (see ``Constraint``)."""
        if not self.vocab.strip_leading_space:
            return self.starts
        with self._lock:
            return np.array([self.dfa.unstripped(s) for s in self.starts.tolist()], dtype=np.int64)

    # ------------------------------------------------------------ transitions
    def advance(self, states, tokens):
        return self.index.next_states(states, tokens)

    def walk(self, states, tokens):
        return self.index.walk_tokens(states, np.asarray(tokens, dtype=np.int64))

    def accepting(self, states):
        states = np.asarray(states, dtype=np.int64)
        out = np.zeros(len(states), dtype=bool)
        live = states > 0
        out[live] = self.dfa.accepting[states[live]]
        return out

    # ------------------------------------------------------------ masks
    def allowed_ids(self, state):
        with self._lock:
            return self.index.allowed(int(state))

    def allowed_mask(self, state, width):
        with self._lock:
            return self.index.allowed_mask(int(state), int(width))

    def allowed_bits(self, state, width):
        with self._lock:
            bits = self.index.mask_bytes(int(state), int(width))
        if width % 8:
            bits[-1] &= (1 << (width % 8)) - 1
        return bits

    def packed_allowed(self, state, width):
        """The index's stored packed mask of ``state`` itself, cut to ``ceil(width / 8)``
        bytes through a read-only view (no 16 KB copy per new state); a read-only copy
        only where it must differ (a width beyond the stored bits, or bits set at and
        beyond a width that is not a multiple of 8). Its masks never change once stored.

        >>> from hf_constrained import offline
        >>> rc = RegexConstraint.from_tokenizer([r"[ab]+"], offline.local_tokenizer())
        >>> bits = rc.packed_allowed(int(rc.starts[0]), 64)
        >>> np.shares_memory(bits, rc.index.bits(int(rc.starts[0]))), bits.flags.writeable
        (True, False)
        """
        with self._lock:
            stored = self.index.bits(int(state))
        n, tail = (int(width) + 7) // 8, int(width) % 8
        if n > len(stored) or (tail and stored[n - 1] >> tail):
            bits = self.allowed_bits(state, width)
        else:
            bits = stored[:n]  # (a view: its flag is its own, the index's array is untouched)
        bits.flags.writeable = False
        return bits

    def banned_bits(self, state, width):
        with self._lock:
            return ~self.index.mask_bytes(int(state), int(width))

    def successors(self, state):
        with self._lock:
            return self.index.successors(int(state))

    def precompute(self, max_states: int | None = None, max_seconds: float | None = None) -> bool:
        """Masks of every reachable state now (breadth-first); True when complete."""
        deadline = None if max_seconds is None else time.monotonic() + max_seconds
        with self._lock:
            return self.index.precompute(max_states=max_states, deadline=deadline)

    def warm(self) -> None:
        """Compute the masks of the start states (the first mask of each pattern).
        FINISHED's (EOS and pad) is left for the first step that has a finished row."""
        with self._lock:  # the packed masks only: the id lists are not needed yet
            for s in set(self.starts.tolist()):
                self.index.bits(int(s))

    @property
    def num_states(self) -> int:
        return self.dfa.num_states

    @property
    def num_masks(self) -> int:
        """Masks computed so far."""
        return self.index.num_computed

    # ------------------------------------------------------------ disk cache
    def cache_key(self):
        return disk.digest("index", self.vocab.fingerprint, self.distinct, self.eos_token_ids.tolist(),
                           self.pad_token_id, self.dfa.strip_leading_space)

    def cache_revision(self):
        return (self.dfa.num_states, self.index.num_computed)

    def export_state(self) -> dict:
        with self._lock:
            return {**self.dfa.export_states(), **self.index.export_masks()}

    def import_state(self, arrays: dict) -> bool:
        with self._lock:
            try:
                mapping = self.dfa.import_states(arrays)
                self.index.import_masks(arrays, mapping)
            except (ValueError, KeyError, IndexError):
                return False  # foreign or inconsistent file: ignore it, it gets rewritten
        return True


# ---------------------------------------------------------------- the probe
def _leaf_tries(dfa):
    """Per leaf trie of ``dfa``'s forest, the lists ``(nodes, final classes, inner entries)``:
    its node count, the classes of its final bytes (bits of an int) and the classes that
    lead into its inner nodes (a count), which :func:`growth_bounds` and
    :func:`quick_bounds` both start from."""
    cls = dfa._class_list
    sizes, fins, inners = [], [], []
    for nodes in dfa._forest.tries:
        fin = inner = 0
        for edges in nodes:
            for blo, bhi, tgt in edges:
                a, b = cls[blo], cls[bhi]
                if tgt < 0:
                    fin |= ((1 << (b + 1)) - 1) ^ ((1 << a) - 1)
                else:
                    inner += b - a + 1
        sizes.append(len(nodes))
        fins.append(fin)
        inners.append(inner)
    return sizes, fins, inners


def growth_bounds(dfa, max_entries: int | None = None):
    """``(positions, entries)``: upper bounds, from ``dfa``'s syntax trees alone, on
    the pattern positions the automaton can ever hold (END included), and on the
    positions that the new states of one :meth:`LazyDFA.expand` hold together.

    *Positions.* A position is ``(leaf, trie node, counters, calls)``: a leaf has
    as many as its UTF-8 trie has nodes, times its *contexts*: the counter values
    (``0 .. hi-1``, or ``0 .. lo-1`` for an unbounded counter, which saturates) of
    each counted repetition around it, summed over the chains of calls that reach
    its definition. Contexts are counted top-down (a node's parent, or a
    definition's calls, have larger ids: children and definitions are built first).

    *Entries.* Expanding a state cuts the byte classes into disjoint segments and
    interns one set per segment; every position in the set of a segment is
    *entered* on each of its classes, in particular on its first one. So the new
    states of one expansion hold together at most ``sum over classes c of E(c)``
    positions, ``E(c)`` being the positions that some transition on ``c`` can
    enter. END is entered on at most every class (``n_classes``); a position at
    trie node ``k > 0`` only on the classes of the one edge into ``k``; a position
    at a leaf's root (its first byte) only on the last byte of a character that
    can precede the leaf: the classes ``inmask(leaf)``, computed as a Glushkov
    follow relation over leaves (``last`` masks bottom-up, ``inmask`` top-down:
    the first child of a concatenation gets its parent's, each next one the
    previous child's ``last``, plus that child's own ``inmask`` when it may be
    empty; a repetition that may repeat (``hi`` unbounded or at least 2) adds its
    child's ``last``; a call passes its ``inmask`` to the definition, whose
    ``last`` is the call's; a one-leaf definition is counted per call). The
    start states exist already and are no expansion's new states. Unreached
    nodes (subtrees pruned while building) count as roots, which only
    over-counts. ``tests/test_probe.py`` checks both bounds against the explored
    automaton (equal to its counts where there are no counters or definitions).

    Returns None as soon as ``entries`` exceeds ``max_entries``.

    >>> dfa = LazyDFA.from_patterns([r"ab|c"])  # classes: <a, a, b, c, >c
    >>> growth_bounds(dfa)  # END, a, b, c; END on 5 classes, a on none, b after a, c on none
    (4, 6)
    """
    f = dfa._forest
    kind, kids, parent, nullable, trie, target = f.kind, f.kids, f.parent, f.nullable, f.trie, f.target
    sizes, fins, inners = _leaf_tries(dfa)
    fins.append(0)  # trie -1: not a leaf
    n = len(kind)
    last = [fins[t] for t in trie]  # classes of a node's last byte; leaves done, the rest bottom-up
    inner_nodes = [i for i, t in enumerate(trie) if t < 0]  # ascending: children first
    for i in inner_nodes:
        k = kind[i]
        if k == _CAT:
            acc = 0
            for c in reversed(kids[i]):
                acc |= last[c]
                if not nullable[c]:
                    break
            last[i] = acc
        elif k == _ALT:
            acc = 0
            for c in kids[i]:
                acc |= last[c]
            last[i] = acc
        elif k == _REP:
            last[i] = last[kids[i][0]]
        else:  # _REF
            last[i] = last[target[i]]
    ctx, inmask = [0] * n, [0] * n
    positions, entries = 1, dfa.n_classes
    for i, p in enumerate(parent):
        if p < 0 and not f.is_def[i]:  # a pattern's root (or a pruned subtree: over-counts)
            ctx[i] = 1
            if trie[i] >= 0:
                positions += sizes[trie[i]]
                entries += inners[trie[i]]
    counted, lo, hi = f.counted, f.lo, f.hi
    # Top-down over the inner nodes; a leaf has one parent, so what it receives is
    # final there and it is counted at once. A node ``c`` entered in ``m`` contexts
    # after the classes ``cur``: a leaf is counted at once (its positions, and its
    # entries: the classes into its root plus those into its inner trie nodes), an
    # inner node (or definition) receives them. (Written out inline: this loop is
    # most of the probe's cost at the median schema.)
    for i in reversed(inner_nodes):
        m = ctx[i]
        if not m:
            continue
        k, cur = kind[i], inmask[i]
        if k == _CAT:
            for c in kids[i]:
                t = trie[c]
                if t >= 0:
                    positions += m * sizes[t]
                    entries += m * (cur.bit_count() + inners[t])
                else:
                    ctx[c] += m
                    inmask[c] |= cur
                cur = (last[c] | cur) if nullable[c] else last[c]
        elif k == _ALT:
            bits = cur.bit_count()
            for c in kids[i]:
                t = trie[c]
                if t >= 0:
                    positions += m * sizes[t]
                    entries += m * (bits + inners[t])
                else:
                    ctx[c] += m
                    inmask[c] |= cur
        else:
            if k == _REP:
                c = kids[i][0]
                if counted[i]:
                    m *= hi[i] if hi[i] is not None else lo[i]
                if hi[i] is None or hi[i] >= 2:
                    cur |= last[c]
            else:  # _REF: the definition is entered where the call is (a one-leaf
                c = target[i]  # definition: its positions called from here)
            t = trie[c]
            if t >= 0:
                positions += m * sizes[t]
                entries += m * (cur.bit_count() + inners[t])
            else:
                ctx[c] += m
                inmask[c] |= cur
        if max_entries is not None and entries > max_entries:
            return None
    return positions, entries


def quick_bounds(dfa):
    """``(positions, high, low)``: :func:`growth_bounds` without the follow masks. The
    positions are the same; the entries are bounded from both sides, ``low <= entries
    <= high``. A leaf's root is entered on the classes ``inmask(leaf)``, known here only
    right after a non-nullable leaf in a concatenation (a key's characters: that leaf's
    ``last``, its final bytes' classes); elsewhere ``high`` counts all ``n_classes`` and
    ``low`` none. One top-down pass counting contexts: :func:`probe` takes it first and
    needs the exact bound only where ``high`` is too large to skip the walk at once and
    ``low`` not so large that the exact bound would be given up (about half the cost of
    :func:`growth_bounds` at the median schema).

    >>> dfa = LazyDFA.from_patterns([r"ab|c"])  # END on 5 classes, b after a; a and c: 0 or 5
    >>> quick_bounds(dfa), growth_bounds(dfa)
    ((4, 16, 6), (4, 6))
    """
    f = dfa._forest
    kind, kids, parent, nullable, trie, target = f.kind, f.kids, f.parent, f.nullable, f.trie, f.target
    sizes, fins, inners = _leaf_tries(dfa)
    fins = [fin.bit_count() for fin in fins]  # final bytes' classes, a count
    n_classes = dfa.n_classes
    n = len(kind)
    ctx = [0] * n
    positions, entries, unknown = 1, n_classes, 0  # unknown: leaf roots entered on classes not counted
    is_def = f.is_def
    inner_nodes = []
    for i, t in enumerate(trie):
        if t < 0:
            inner_nodes.append(i)
        if parent[i] < 0 and not is_def[i]:  # as growth_bounds
            ctx[i] = 1
            if t >= 0:
                positions += sizes[t]
                entries += inners[t]
    counted, lo, hi = f.counted, f.lo, f.hi
    for i in reversed(inner_nodes):
        m = ctx[i]
        if not m:
            continue
        k = kind[i]
        if k == _CAT:
            bits = -1  # the classes the next child is entered after (-1: not known)
            for c in kids[i]:
                t = trie[c]
                if t >= 0:
                    positions += m * sizes[t]
                    if bits < 0:
                        unknown += m
                        entries += m * inners[t]
                    else:
                        entries += m * (bits + inners[t])
                    bits = -1 if nullable[c] else fins[t]
                else:
                    ctx[c] += m
                    bits = -1
        else:  # an alternation's children, a repetition's child, a reference's target
            if k == _ALT:
                cs = kids[i]
            elif k == _REP:
                cs = kids[i][:1]
                if counted[i]:
                    m *= hi[i] if hi[i] is not None else lo[i]
            else:  # _REF
                cs = (target[i],)
            for c in cs:  # entered on classes not known here
                t = trie[c]
                if t >= 0:
                    positions += m * sizes[t]
                    unknown += m
                    entries += m * inners[t]
                else:
                    ctx[c] += m
    return positions, entries + unknown * n_classes, entries


def probe(dfa, limit: int) -> bool:
    """``dfa.explore(limit)`` as far as it could still raise :class:`StateLimitError`.

    The same breadth-first walk, with the same errors where it raises, but it stops
    once the expansions left (at most ``limit`` minus those done) provably cannot
    reach a limit, by :func:`growth_bounds`: an expansion interns at most one new
    state per segment of byte classes plus the unstripped copy of a start state
    (``n_classes + 1``), and its new states hold at most ``entries`` positions
    together (plus a start's members for that copy); every position it creates is
    a member of one of them. The bounds are only computed for forests of at most
    :data:`PROBE_BOUND_NODES` nodes (beyond, the walk over them costs more than the
    probe), and given up once ``entries`` is too large to skip the probe. Returns
    True when it stopped early (or at once: a pattern far from every limit skips
    the probe), False when it walked as far as ``explore`` would have.

    >>> dfa = LazyDFA.from_patterns([r'\\{"a":[0-9]+\\}'])
    >>> probe(dfa, 128), int(dfa.expanded[:dfa.num_states].sum())  # far from the limits: only DEAD
    (True, 1)
    >>> dfa = LazyDFA.from_patterns([r"(a|b)*a(a|b){12}"], max_states=64)
    >>> probe(dfa, 65)
    Traceback (most recent call last):
    ...
    hf_constrained.errors.StateLimitError: the automaton needs more than max_states=64 states (patterns such as (a|b)*a(a|b){30} blow up when determinised); simplify the pattern or raise max_states
    """
    starts = list(dict.fromkeys(dfa.starts))
    copies = sum(len(dfa._keys[s][0]) for s in starts) if dfa.strip_leading_space else 0
    max_states, max_positions = dfa.max_states, dfa.max_nfa_states
    max_members = MEMBERS_PER_POSITION * max_positions
    bounds = None
    grow = dfa.n_classes + 1
    if len(dfa._forest.kind) <= PROBE_BOUND_NODES:
        # the loop's first test, on quick_bounds(): it passes only where it passes on
        # growth_bounds() (the same positions, no fewer entries), whose entries then stay
        # under max_entries; over max_entries on the low bound, growth_bounds() would
        # give up (None) itself
        max_entries = (max_members - dfa._members - copies) // max(int(limit), 1)
        positions, entries, low = quick_bounds(dfa)
        if (starts and limit >= 1 and dfa.num_states + limit * grow <= max_states
                and dfa._members + limit * entries + copies <= max_members
                and min(positions, len(dfa._pos_keys) + limit * entries) <= max_positions):
            return True
        if low <= max_entries:
            bounds = growth_bounds(dfa, max_entries=max_entries)
    positions, entries = bounds if bounds is not None else (0, 0)
    frontier, seen = starts, set(starts)
    expand = dfa.expand
    i = 0
    while i < len(frontier):
        if i >= limit:
            return False
        left = limit - i
        if (bounds is not None and dfa.num_states + left * grow <= max_states
                and dfa._members + left * entries + copies <= max_members
                and min(positions, len(dfa._pos_keys) + left * entries) <= max_positions):
            return True
        s = frontier[i]
        i += 1
        expand(s)
        for t in sorted(set(dfa.table[s].tolist())):  # as explore()
            if t not in seen:
                seen.add(t)
                frontier.append(t)
    return False
