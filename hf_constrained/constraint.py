"""The constraint interface: what the per-step ``generate()`` shell drives.

A *constraint* is an engine that knows a formal language over token ids. The
shell (``processor``) knows nothing about regexes, DFAs or grammars: it keeps
one engine state per row of the batch, advances rows by the token each one
took, and asks the engine for the token mask of every state it sees. Any
engine that implements :class:`Constraint` (the regex engine ``LazyDFA`` +
``TokenIndex``, a grammar, a fixed set of strings) plugs into the same shell
and gets every generation mode (samples, beams, assisted decoding), row
tracking, disk caching and ``(samples, batch)`` output for free.

States
------
A state is a Python/numpy ``int64``:

* ``> 0``: a live state, *interned* by the engine: the same id always stands
  for the same configuration (a DFA state, a parser configuration), so the
  shell may cache the mask of a state id for as long as the engine lives.
  Ids are small, dense and allocated on first use (``1, 2, 3, ...``): the shell's
  mask tables have one row per id up to the largest seen, so this is required
  (hash-like ids would allocate tables of that size).
* :data:`DEAD` (``0``): no continuation; its rows share :data:`FINISHED`'s mask
  (EOS and the pad id), so that a mask is never all ``-inf`` (a correctly masked
  row never gets here).
* :data:`FINISHED` (``-1``): EOS was emitted in an accepting state; EOS and the
  pad token are allowed (generate() pads finished rows).
* :data:`UNKNOWN` (``-2``): used by the shell's row tracking only, never
  passed to an engine.

Contract (what an implementation must guarantee)
------------------------------------------------
* ``allowed_mask(q, width)[t]`` is True iff token ``t`` keeps the text a prefix
  of some string of the language that can still be completed *with this
  vocabulary*; an EOS id is allowed iff ``q`` accepts. Ids ``>= vocab size``
  (a model vocabulary padded larger) are never allowed: the shell does not mask
  them itself. A live state allows at least one token (the shell raises a
  ``ConstraintError`` naming ``allowed_ids`` for a state that allows none).
  ``allowed_ids`` returns non-negative integer ids (checked by the default
  ``allowed_mask``); an ``allowed_bits`` that an engine overrides must be exactly
  the same set, packed little-endian in ``ceil(width / 8)`` uint8 bytes (the shape
  and dtype are checked, the bit order cannot be), and is read by the CPU (sparse)
  layout only.
* ``advance(states, tokens)`` is the token-level transition, vectorised over
  rows and deterministic, and returns an ``int64`` array with one state per row
  (checked each step: anything else raises an error naming ``advance``); a token
  that ``allowed_mask`` bans leads to
  :data:`DEAD`; EOS from an accepting state leads to :data:`FINISHED`; a
  finished row stays finished whatever follows (padding); a dead row stays dead.
* Every method may be called from several threads at once (one processor
  serving concurrent ``generate()`` calls). Engines grow shared tables lazily;
  they take their own lock where states or masks are *created*, not around
  every call.
* Disk caching needs all of :meth:`~Constraint.cache_key` (any string: the file
  name is derived from it), :meth:`~Constraint.export_state`,
  :meth:`~Constraint.import_state` and a :meth:`~Constraint.cache_revision` (or
  :attr:`~Constraint.num_states`) that grows as states are added; ``import_state``
  is also called at every save, while other threads may be generating, with a
  file another process wrote (whose state ids may differ from this one's).
* Optional hook: ``warm()`` computes the start states' masks at construction (and
  puts them in the disk cache); without it the shell asks ``allowed_ids`` of each
  start state once.

Minimal example: a finite set of token sequences (what ``tests`` use to prove
the shell is engine-agnostic)::

    >>> import numpy as np
    >>> class Words(Constraint):
    ...     '''Exactly one of a few token-id sequences, then EOS (id 0).'''
    ...     def __init__(self, seqs, vocab_size):
    ...         self.prefixes = {(): 1}                     # prefix -> state id
    ...         for s in seqs:
    ...             for i in range(1, len(s) + 1):
    ...                 self.prefixes.setdefault(tuple(s[:i]), len(self.prefixes) + 1)
    ...         self.of = {v: k for k, v in self.prefixes.items()}
    ...         self.words = {tuple(s) for s in seqs}
    ...         self.starts = np.array([1])
    ...         self.eos_token_ids = np.array([0])
    ...         self.pad_token_id = None
    ...         self.vocab_size = vocab_size
    ...     def accepting(self, states):
    ...         return np.array([self.of.get(int(q)) in self.words for q in states])
    ...     def advance(self, states, tokens):
    ...         out = []
    ...         for q, t in zip(states.tolist(), tokens.tolist()):
    ...             if q == FINISHED or (q > 0 and t == 0 and self.of[q] in self.words):
    ...                 out.append(FINISHED)
    ...             elif q > 0:
    ...                 out.append(self.prefixes.get(self.of[q] + (t,), DEAD))
    ...             else:
    ...                 out.append(DEAD)
    ...         return np.array(out, dtype=np.int64)
    ...     def allowed_ids(self, q):
    ...         if q <= 0:
    ...             return np.array([0], dtype=np.int32)
    ...         p = self.of[q]
    ...         nxt = {k[-1] for k in self.prefixes if len(k) == len(p) + 1 and k[:-1] == p}
    ...         return np.array(sorted(nxt | ({0} if p in self.words else set())), dtype=np.int32)
    >>> c = Words([[5, 6], [5, 7, 8]], vocab_size=10)
    >>> c.allowed_ids(c.advance(c.starts, np.array([5]))[0]).tolist()
    [6, 7]
    >>> c.walk(c.starts, np.array([[5, 6, 0]])).tolist() == [FINISHED]
    True
    >>> c.allowed_mask(1, 12).nonzero()[0].tolist()
    [5]
"""

from __future__ import annotations

import threading

import numpy as np

DEAD = 0
FINISHED = -1


def packed_words(bits: np.ndarray):
    """``(bits, words, nonzero)``: packed ``bits`` (uint8) padded with zero bytes to whole
    64-bit words (a copy only when their length is not a multiple of 8), their uint64
    view and the indices of its nonzero words (one pass over ``len(bits) / 8`` words).

    >>> b, w, nz = packed_words(np.array([0, 0, 0, 0, 0, 0, 0, 0, 1], dtype=np.uint8))
    >>> len(b), nz.tolist()
    (16, [1])
    """
    if len(bits) % 8:
        bits = np.concatenate([bits, np.zeros(8 - len(bits) % 8, dtype=np.uint8)])
    words = bits.view(np.uint64)
    # (through a bool array: numpy's nonzero scans bools with SIMD, 64-bit words one by one)
    return bits, words, words.astype(bool).nonzero()[0]


def set_bit_ids(bits: np.ndarray, nz: np.ndarray, sel: np.ndarray) -> np.ndarray:
    """Sorted int64 positions of the set bits of ``bits`` (from :func:`packed_words`),
    given its nonzero words ``nz`` and their bytes ``sel`` (``words[nz].view(np.uint8)``):
    a few words are unpacked whole, more only at their nonzero bytes, and over half the
    bytes set one pass unpacks them all. O(ids) beyond the word scan: a first mask lists
    a handful of ids out of 129k.

    >>> bits, words, nz = packed_words(np.packbits(np.arange(70) % 33 == 1, bitorder="little"))
    >>> set_bit_ids(bits, nz, words[nz].view(np.uint8)).tolist()
    [1, 34, 67]
    """
    if len(nz) <= 32:  # a few words: unpack them whole
        pos = np.flatnonzero(np.unpackbits(sel, bitorder="little").view(bool))
        return (nz[pos >> 6] << 6) | (pos & 63)
    nzb = sel.astype(bool).nonzero()[0]  # else their nonzero bytes only (a bool scan)
    if 2 * len(nzb) > len(bits):  # dense: one pass over all the bits
        return np.flatnonzero(np.unpackbits(bits, bitorder="little").view(bool))
    byte = (nz[nzb >> 3] << 3) | (nzb & 7)
    pos = np.flatnonzero(np.unpackbits(sel[nzb], bitorder="little").view(bool))
    return (byte[pos >> 3] << 3) | (pos & 7)


def packed_ids(bits: np.ndarray) -> np.ndarray:
    """Sorted int64 positions of the set bits of little-endian packed ``bits``, read as
    64-bit words (:func:`set_bit_ids`; the shell's id lists use the same listing).

    >>> packed_ids(np.packbits(np.arange(20) % 7 == 3, bitorder="little")).tolist()
    [3, 10, 17]
    """
    bits, words, nz = packed_words(bits)
    return set_bit_ids(bits, nz, words[nz].view(np.uint8))


_SCRATCH = threading.local()  # per thread: a reused bool row for pack_ids


def pack_ids(ids: np.ndarray, width: int) -> np.ndarray:
    """Little-endian packed bits, ``ceil(width / 8)`` bytes, with the bits of ``ids``
    set (the inverse of :func:`packed_ids`). The ids are set in a bool row kept per
    thread and cleared again afterwards: a fresh 129k-wide row per new state cost
    more in first-touched pages than its packing.

    >>> pack_ids(np.array([3, 10, 17]), 20).tolist(), packed_ids(pack_ids(np.array([0, 19]), 20)).tolist()
    ([8, 4, 2], [0, 19])
    """
    row = getattr(_SCRATCH, "row", None)
    if row is None or len(row) < width:
        row = _SCRATCH.row = np.zeros(width if row is None else max(width, 2 * len(row)), dtype=bool)
    hit = row[:width]
    try:
        hit[ids] = True
        packed = np.packbits(hit, bitorder="little")
    except BaseException:  # (an id out of range: the row stays clear for the next call)
        hit.fill(False)
        raise
    if len(ids) * 64 < width:  # few ids: clear just those
        hit[ids] = False
    else:
        hit.fill(False)
    return packed


UNKNOWN = -2


def checked_states(engine, states, rows: int) -> np.ndarray:
    """What ``engine.advance`` returned for ``rows`` rows, as the shell needs it: an ``int64``
    array of that many states, each a live id (``> 0``), :data:`DEAD` or :data:`FINISHED`.
    Integer arrays and lists of ints are taken as int64; anything else is refused with an
    error naming the engine's ``advance`` (one type test on the usual step).

    >>> checked_states(None, [3, -1], 2).dtype
    dtype('int64')
    >>> checked_states(None, np.array([1.0]), 1)
    Traceback (most recent call last):
    ...
    TypeError: NoneType.advance must return an int64 array of states, one per row; it returned a float64 array of shape (1,)
    """
    if type(states) is not np.ndarray or states.dtype != np.int64 or states.shape != (rows,):
        got = np.asarray(states)
        if got.ndim != 1 or len(got) != rows or (got.size and got.dtype.kind not in "iu"):
            raise TypeError(f"{type(engine).__name__}.advance must return an int64 array of states, one "
                            f"per row; it returned a {got.dtype} array of shape {got.shape}"
                            + (f" for {rows} rows" if got.ndim == 1 and len(got) != rows else ""))
        states = got.astype(np.int64)
    if rows and (int(states[0]) < FINISHED if rows == 1 else int(states.min()) < FINISHED):
        bad = int(states.min())
        raise ValueError(f"{type(engine).__name__}.advance returned the state {bad}: states are live "
                         f"ids (> 0), DEAD (0) or FINISHED (-1)")
    return states


class Constraint:
    """Base class of constraint engines. Subclasses set the attributes below and
    implement :meth:`advance`, :meth:`accepting` and :meth:`allowed_ids`; the
    other methods have correct (if slower) defaults built on those three.

    Attributes (set by the subclass):
        starts: ``int64`` array, the start state of each pattern/grammar, in the
            order the user gave them (one per prompt, or a single one).
        eos_token_ids: ``int64`` array of the ids that end a match.
        pad_token_id: the tokenizer's pad id, or None; allowed after EOS.
        vocab_size: number of token ids the tokenizer defines.
        cacheable: True when the mask of a state id never changes (the shell
            then keeps device-side masks per state id). An engine whose ids
            are not interned, or whose masks change over time, sets False and
            the shell asks every step (``advance`` stays deterministic).

    The shell reads no other attribute (an engine's own ``vocab`` is its own
    business; the built-in engines' :class:`~hf_constrained.vocabulary.Vocabulary`
    is used only to check the logits' width).

    >>> class Even(Constraint):         # state 1 forever: even ids only, EOS is 0
    ...     starts, eos_token_ids, vocab_size = np.array([1]), np.array([0]), 10
    ...     def allowed_ids(self, q):     # (DEAD and FINISHED: EOS only, no pad id)
    ...         return np.arange(0, 10, 2, dtype=np.int32) if q > 0 else np.array([0], np.int32)
    >>> Even().allowed_mask(1, 12).nonzero()[0].tolist()
    [0, 2, 4, 6, 8]
    """

    starts: np.ndarray
    eos_token_ids: np.ndarray
    pad_token_id = None
    vocab_size: int
    cacheable = True

    # ---------------------------------------------------------------- required
    def advance(self, states: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """States after each row's ``states[i]`` takes ``tokens[i]`` (``int64`` arrays)."""
        raise NotImplementedError

    def accepting(self, states: np.ndarray) -> np.ndarray:
        """Bool array: does each live state accept (may EOS follow)? False for DEAD/FINISHED."""
        raise NotImplementedError

    def allowed_ids(self, state: int) -> np.ndarray:
        """Sorted ``int32`` token ids allowed in ``state``, EOS included iff it accepts.
        DEAD allows EOS only; FINISHED allows EOS and the pad id."""
        raise NotImplementedError

    # ---------------------------------------------------------------- defaults
    def walk(self, states: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """States after feeding each row of ``tokens`` (rows x steps) from ``states``.
        ``-1`` pads a short row: a finished row stays finished, a live row dies."""
        cur = np.asarray(states, dtype=np.int64).copy()
        tokens = np.asarray(tokens, dtype=np.int64)
        for j in range(tokens.shape[1]):
            col = tokens[:, j]
            pad = col < 0
            nxt = checked_states(self, self.advance(cur, np.where(pad, 0, col)), len(cur)) \
                if (~pad).any() else cur.copy()
            cur = np.where(pad, np.where(cur == FINISHED, FINISHED, DEAD), nxt)
        return cur

    def allowed_mask(self, state: int, width: int) -> np.ndarray:
        """Bool mask over ``width`` logits of :meth:`allowed_ids` (ids beyond it: False)."""
        mask = np.zeros(width, dtype=bool)
        ids = np.asarray(self.allowed_ids(state))
        if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
            raise TypeError(f"{type(self).__name__}.allowed_ids({state}) must return a 1-d array of "
                            f"integer token ids, not {ids.dtype} of shape {ids.shape}")
        if ids.size and int(ids.min()) < 0:  # (a negative index would allow a token from the end)
            raise ValueError(f"{type(self).__name__}.allowed_ids({state}) returned a negative token id "
                             f"({int(ids.min())}); ids are 0 .. vocab_size - 1")
        mask[ids[ids < width]] = True
        return mask

    def allowed_bits(self, state: int, width: int):
        """Packed little-endian bits (``ceil(width / 8)`` bytes, those at and beyond
        ``width`` clear) of the allowed ids, a fresh array, or None where the engine has
        no packed form ready (the default: the CPU layout then reads :meth:`allowed_mask`)."""
        return None

    def packed_allowed(self, state: int, width: int):
        """:meth:`allowed_bits` for readers that only read: the same bytes, read-only
        (writing raises), maybe the engine's own stored mask (no copy per new state),
        or None. Default: :meth:`allowed_bits`'s array, made read-only.

        >>> class Odd(Constraint):
        ...     def allowed_bits(self, q, width):
        ...         return np.packbits(np.arange(width) % 2 == 1, bitorder="little")
        >>> bits = Odd().packed_allowed(1, 16)
        >>> bits.tolist(), bits.flags.writeable
        ([170, 170], False)
        """
        bits = self.allowed_bits(state, width)
        if isinstance(bits, np.ndarray):  # (anything else: the shell refuses it, naming allowed_bits)
            bits.flags.writeable = False
        return bits

    def banned_bits(self, state: int, width: int) -> np.ndarray:
        """Packed little-endian bits (``ceil(width / 8)`` bytes) of the *banned* ids:
        the layout the accelerator masking kernel reads."""
        return np.packbits(~self.allowed_mask(state, ((width + 7) // 8) * 8), bitorder="little")

    def mid_text_starts(self) -> np.ndarray:
        """Start states for text decoded in the middle of a longer sequence (transformers
        4.x pipelines decode prompt + generation, then slice the prompt's text off), where
        tokenizer rules that hold only at the start of a decode (SentencePiece drops a first
        space) do not apply. Default: :attr:`starts`."""
        return self.starts

    def successors(self, state: int) -> np.ndarray:
        """Distinct live states one allowed non-EOS token leads to (for ``precompute``).
        Engines that cannot enumerate them raise NotImplementedError."""
        raise NotImplementedError

    @property
    def num_states(self) -> int:
        """Live states created so far (diagnostics, disk-cache bookkeeping)."""
        return 0

    # ---------------------------------------------------------------- disk cache
    def cache_key(self):
        """A string that identifies this engine's language, vocabulary and EOS/pad ids,
        or None when its states cannot be stored (then nothing is cached)."""
        return None

    def export_state(self) -> dict:
        """Arrays (name -> numpy array) that :meth:`import_state` can merge back."""
        return {}

    def cache_revision(self):
        """A value that changes whenever there is more to save (the disk cache
        rewrites its file only then); by default :attr:`num_states`."""
        return self.num_states

    def import_state(self, arrays: dict) -> bool:
        """Merge what :meth:`export_state` wrote (maybe by another process). Returns
        False, changing nothing, for a foreign or inconsistent file."""
        return False
