"""Row tracking: which constraint state each row of each ``generate()`` call is in.

A row of ``input_ids`` is the previous step's row ``parent`` plus one token.
``parent`` is found on the device by hashing the prefixes and is then
*verified* by comparing the prefix exactly, so beam-search reordering and
assisted-decoding rollbacks are followed exactly. One small tensor (parents,
verified flags, last tokens) crosses to the host per step: the only
synchronisation. Rows that fail verification are recomputed from their tokens.
One row whose prefix is the previous step's ids (the most common call) skips the
hashing: one exact comparison verifies it and the token is the last column
(:meth:`Run._advance_one`, recording exactly what the general path would).

Every ``generate()`` call gets its own :class:`Run`; :class:`Calls` finds the
run a processor call belongs to, so any number of calls (in any threads) can
share one processor:

* inside ``generate()`` a run is keyed by the call's ``GenerationConfig``
  (a per-call copy, held by weak reference: the run's tracking state is
  dropped when the call ends);
* when :func:`hf_internals._find_generation_config` finds none (called outside
  ``generate()``, or a transformers version whose stack it cannot read), a run
  is the most recent one whose prompt columns the rows repeat exactly and
  whose length they extend by at most one token: tracking by tokens. That
  costs one more synchronisation per step, masks a copy of the scores, and
  counts prompts from runs of identical rows.

Each run leaves a small :class:`Record` (prompt ids, prompt length, prompts,
start states) that ``decode()`` matches an output against.

>>> import torch
>>> from hf_constrained.constraint import Constraint
>>> class AnyTwo(Constraint):      # any two tokens of 0..9, then EOS (0)
...     starts, eos_token_ids, vocab_size = np.array([1]), np.array([0]), 10
...     def advance(self, states, tokens):
...         return np.where(states == 3, FINISHED, np.where(states > 0, states + 1, states))
>>> calls = Calls()
>>> prompt = torch.tensor([[5, 6], [5, 6]])
>>> run, new = calls.run_for(prompt, None, lambda: Run(AnyTwo(), prompt, None, num_prompts=1))
>>> new, run.start_states.tolist()
(True, [1, 1])
>>> step = torch.tensor([[5, 6, 7], [5, 6, 8]])
>>> calls.run_for(step, None, None)[0] is run, run.advance(step).tolist()
(True, [2, 2])
"""

from __future__ import annotations

import collections
import threading
import weakref

import numpy as np
import torch

from .constraint import DEAD, FINISHED, UNKNOWN, checked_states
from .errors import GenerationConflictError

_HASH_SEED = 0x5EED
_PARENT_0 = np.zeros(1, dtype=np.int64)  # the one-row step's parents (shared: read only)
_PARENT_0.flags.writeable = False
_pow_cache: dict = {}
_pow_lock = threading.Lock()


def _powers(n: int, device: torch.device) -> torch.Tensor:
    """At least ``n + 1`` fixed random int64 multipliers on ``device`` (shared, grown on demand)."""
    pw = _pow_cache.get(device)
    if pw is None or pw.shape[0] <= n:
        with _pow_lock:
            pw = _pow_cache.get(device)
            if pw is None or pw.shape[0] <= n:
                g = torch.Generator().manual_seed(_HASH_SEED)
                size = max(n, 256) * 2
                pw = torch.randint(-(2 ** 62), 2 ** 62, (size,), generator=g, dtype=torch.long).to(device)
                _pow_cache[device] = pw
    return pw


def _hash(ids: torch.Tensor, pw: torch.Tensor) -> torch.Tensor:
    return (ids * pw[: ids.shape[1]]).sum(1)


def count_prompts(input_ids: torch.Tensor, config, num_patterns: int, per_prompt: bool,
                  owner: str = "the processor") -> int:
    """Number of prompts in a call's first ``input_ids``.

    Exact inside ``generate()``: rows / ``num_beams`` (beam search) or rows /
    ``num_return_sequences``. Without a config, one plus the number of
    changes between adjacent rows (identical adjacent prompts merge). With one
    pattern per prompt it must be ``num_patterns``.

    >>> count_prompts(torch.tensor([[1], [1], [2], [2]]), None, 1, False)
    2
    >>> count_prompts(torch.tensor([[1], [2], [3]]), None, 2, True, "RegexProcessor")
    Traceback (most recent call last):
    ...
    hf_constrained.errors.GenerationConflictError: RegexProcessor got 2 patterns but generate() was given 3 prompts (3 rows); pass exactly one pattern per prompt
    """
    rows = input_ids.shape[0]
    if config is not None:
        # generate() expands each prompt into num_beams rows (beam search)
        # or num_return_sequences rows (everything else), consecutively.
        beams = int(getattr(config, "num_beams", 1) or 1)
        expand = beams if beams > 1 else int(getattr(config, "num_return_sequences", 1) or 1)
        n = rows // expand if rows % expand == 0 else None
    elif rows == 1:  # the one-row call: no device work
        n = 1
    else:
        same = (input_ids[1:] == input_ids[:-1]).all(1).cpu().numpy()
        n = 1 + int((~same).sum())
    if per_prompt:
        if n is not None and n != num_patterns:
            raise GenerationConflictError(
                f"{owner} got {num_patterns} patterns but generate() was given "
                f"{n} prompts ({rows} rows); pass exactly one pattern per prompt")
        if rows % num_patterns:
            raise GenerationConflictError(
                f"{owner} got {num_patterns} patterns but generate() has {rows} rows, "
                "which is not a multiple; pass exactly one pattern per prompt")
        return num_patterns
    return n if n else 1


class _LazyRowHash:
    """``last_hash``: the row hashes of the last ``input_ids``. A one-row step leaves
    them pending (``_pending``: those ids) and they are computed here the first time
    they are read; setting ``last_hash`` drops any pending ids."""

    __slots__ = ()

    @property
    def last_hash(self):
        h, ids = self._last_hash, self._pending
        if h is None and ids is not None:
            h = self._last_hash = _hash(ids, _powers(ids.shape[1], ids.device))
            self._pending = None
        return h

    @last_hash.setter
    def last_hash(self, h):
        self._last_hash, self._pending = h, None


class Record(_LazyRowHash):
    """What ``decode()`` needs of a call once it is over (small: no per-step state).

    ``prompt_ids`` are the call's first ``input_ids`` (rows x prompt_len, on
    the call's device); ``prompt_starts`` the start state of each prompt;
    ``max_len`` the longest ``input_ids`` seen (an output is at most one token longer);
    ``last_hash`` the row hashes of the last ``input_ids`` (see :meth:`identifies`).

    >>> rec = Record(torch.tensor([[5, 6], [5, 6]]), 1, np.array([1]))
    >>> rec.matches(torch.tensor([[5, 6, 7], [5, 6, 8]])), rec.matches(torch.tensor([[5, 9, 7], [5, 6, 8]]))
    (True, False)
    """

    __slots__ = ("prompt_ids", "prompt_len", "num_prompts", "prompt_starts", "max_len", "_last_hash",
                 "_pending", "hash_len", "weights", "in_order", "__weakref__")

    def __init__(self, prompt_ids: torch.Tensor, num_prompts: int, prompt_starts: np.ndarray,
                 in_order: bool = False):
        # in_order: a generate() call that never reorders its rows (no beams), so its
        # output is its last rows plus one token: identifies() is then exact (identifies_surely)
        self.in_order = in_order
        self.prompt_ids = prompt_ids
        self.prompt_len = prompt_ids.shape[1]
        self.num_prompts = num_prompts
        self.prompt_starts = prompt_starts
        self.max_len = self.prompt_len
        self._last_hash = None
        self._pending = None  # the last ids, while their hash is not computed yet (one-row steps)
        self.hash_len = 0
        self.weights = None  # a weights.WeightTracker with track_weights=True (issue 14)

    def hash_later(self, ids: torch.Tensor) -> None:
        """The last ``input_ids`` are ``ids``: their hashes are computed when read."""
        self._last_hash, self._pending, self.hash_len = None, ids, ids.shape[1]

    def identifies(self, seqs: torch.Tensor) -> bool:
        """Are ``seqs`` this call's rows plus one token? (Sampling and greedy outputs:
        rows are not reordered.) Compares 64-bit random-multiplier hashes of the rows
        with the last step's, after :meth:`matches` compared the prompt columns exactly."""
        rows, width = seqs.shape
        h = self.last_hash
        if h is None or rows != len(h) or width != self.hash_len + 1:
            return False
        head = seqs[:, : self.hash_len].to(h.device)
        return bool(torch.equal(_hash(head, _powers(self.hash_len, h.device)), h))

    def identifies_surely(self, seqs: torch.Tensor) -> bool:
        """Is :meth:`identifies` conclusive for ``seqs``? For a call that keeps its rows in
        order (sampling, greedy, assisted), an output as wide as its last step plus one must be
        its rows: when the hashes differ it came from another call with the same prompts."""
        rows, width = seqs.shape
        return (self.in_order and width == self.hash_len + 1 and self.last_hash is not None
                and rows == len(self.last_hash))

    def matches(self, seqs: torch.Tensor) -> bool:
        """Could ``seqs`` (an output of generate()) come from this call? Its prompt
        columns must equal this call's prompts, group by group, exactly."""
        rows, width = seqs.shape
        p, n = self.prompt_len, self.num_prompts
        if not (p < width <= self.max_len + 1) or rows % n:
            return False
        head = seqs[:, :p].to(self.prompt_ids.device)
        if rows == self.prompt_ids.shape[0]:
            return bool(torch.equal(head, self.prompt_ids))
        if self.prompt_ids.shape[0] % n:
            return False
        # beam search returns fewer rows (explicit sizes: p is 0 after inputs_embeds)
        firsts = self.prompt_ids.view(n, self.prompt_ids.shape[0] // n, p)[:, :1]
        return bool((head.view(n, rows // n, p) == firsts).all())

    def starts_for(self, num_prompts: int):
        """Start state of each of ``num_prompts`` prompts (a tuple), or None when this
        call's prompts, each with its own pattern, do not split that way."""
        if len(self.prompt_starts) == num_prompts:
            return tuple(self.prompt_starts.tolist())
        if len(np.unique(self.prompt_starts)) == 1:
            return (int(self.prompt_starts[0]),) * num_prompts
        return None

    def row_starts(self, rows: int, num_prompts: int) -> np.ndarray:
        """Start state of each of ``rows`` output rows split into ``num_prompts`` prompts."""
        starts = self.starts_for(num_prompts)
        if starts is not None:
            return np.asarray(starts, dtype=np.int64)[np.arange(rows) // (rows // num_prompts)]
        raise GenerationConflictError(
            f"num_prompts={num_prompts} does not match the {len(self.prompt_starts)} prompts, "
            "each with its own pattern, of this call; pass the number of prompts you gave generate()")


def _same_prompts(prompts: torch.Tensor, known: torch.Tensor) -> bool:
    """Do the prompt columns of a step belong to the call whose prompts are ``known``?

    Row for row, or else every row holds one of the call's prompts: transformers < 4.48
    refills the rows of a beam-search prompt that is done with copies of row 0 (its
    ``BeamSearchScorer`` takes beam index 0 for them), and those rows are then followed
    from their new parent like any reordered beam.

    >>> _same_prompts(torch.tensor([[1], [1]]), torch.tensor([[1], [2]]))
    True
    >>> _same_prompts(torch.tensor([[3], [1]]), torch.tensor([[1], [2]]))
    False
    """
    if torch.equal(prompts, known):
        return True
    return bool((prompts[:, None, :] == known[None]).all(-1).any(1).all())


class Run(_LazyRowHash):
    """Tracking state of one generate() call.

    ``hist[g] = (parent row in hist[g-1] or -1, state)`` for generated length ``g``.

    >>> from hf_constrained.constraint import Constraint
    >>> class One(Constraint):
    ...     starts, eos_token_ids, vocab_size = np.array([1]), np.array([0]), 4
    >>> Run(One(), torch.tensor([[3, 3], [3, 3]]), None, num_prompts=1).start_states.tolist()
    [1, 1]
    """

    def __init__(self, constraint, input_ids: torch.Tensor, config, *, num_prompts: int,
                 per_prompt: bool = False, inplace: bool = False, length_guards=(), banning=(), starts=None):
        self.constraint = constraint
        self.config_ref = weakref.ref(config) if config is not None else None
        rows, length = input_ids.shape
        self.rows, self.prompt_len, self.num_prompts = rows, length, num_prompts
        starts = np.asarray(constraint.starts if starts is None else starts, dtype=np.int64)
        prompt_starts = starts if per_prompt else np.repeat(starts[:1], num_prompts)
        if rows == 1:  # (one prompt: with a pattern per prompt, count_prompts checked there is one)
            self.start_states = prompt_starts[:1].copy()
        elif per_prompt:  # count_prompts checked that the rows split evenly
            self.start_states = prompt_starts[np.arange(rows) // (rows // num_prompts)].astype(np.int64)
        else:
            self.start_states = np.full(rows, starts[0], dtype=np.int64)
        # one copy of the prompt: the record's prompt ids are the first last_ids (never
        # written in place: each step replaces last_ids with a copy of its own ids)
        self.last_ids = input_ids.clone()
        self._row = None  # bytes of last_ids' one row on CPU, once read (see _prev_row)
        self._prompt_row = None  # and of the prompt's (see same_prompts)
        in_order = config is not None and int(getattr(config, "num_beams", 1) or 1) == 1
        self.record = Record(self.last_ids, num_prompts, prompt_starts, in_order)
        self.hist = [(None, self.start_states.copy())]
        self._last_hash = None  # row hashes of last_ids (None when a step skipped tokens)
        self._pending = None  # last_ids while their hash is not computed yet (one-row steps)
        self.inplace = inplace
        # Min-length processors only ban EOS: their conflicts are checked exactly
        # on the host. Any other banning processor needs a look at the scores.
        self.length_guards = list(length_guards)
        self.banning = list(banning)
        self.only_banned: dict = {}  # (state, banned ids) -> every allowed token is banned
        self.weights = None  # weights.WeightTracker (track_weights=True, issue 14)
        self.w_step = None  # (log-weights so far on the device, host parent rows, host last tokens)

    @property
    def prompt_ids(self) -> torch.Tensor:
        return self.record.prompt_ids

    @property
    def last_hash(self):
        """:class:`_LazyRowHash`'s, handing a hash computed here to the record when it
        waits for the same ids' (a one-row step pends both): hashed once, not twice."""
        ids = self._pending
        h = _LazyRowHash.last_hash.fget(self)
        rec = self.record
        if ids is not None and rec._pending is ids:
            rec._last_hash, rec._pending = h, None
        return h

    last_hash = last_hash.setter(_LazyRowHash.last_hash.fset)

    def continues(self, input_ids: torch.Tensor, by_tokens: bool = True) -> bool:
        """Shape test: can ``input_ids`` be a later step of this call? Tracked by
        tokens, a step adds at most one token; within one GenerationConfig any
        longer ``input_ids`` continue (rows whose ancestry is unknown are recomputed)."""
        rows, length = input_ids.shape
        if rows != self.rows or length <= self.prompt_len or input_ids.device != self.last_ids.device:
            return False
        return not by_tokens or length <= self.last_ids.shape[1] + 1

    def lost_rows(self, input_ids: torch.Tensor) -> bool:
        """Are ``input_ids`` fewer rows than this call's last step, each one of its rows (plus
        one token)? (A loop outside generate() that dropped finished rows.)"""
        rows, length = input_ids.shape
        prev = self.last_ids
        width = prev.shape[1]
        if rows >= prev.shape[0] or length not in (width, width + 1) or length <= self.prompt_len \
                or input_ids.device != prev.device:
            return False  # (at the prompt's length it is a new call: the same prompts again)
        same = (input_ids[:, None, :width] == prev[None, :, :]).all(-1)  # (rows, previous rows)
        return bool(same.any(1).all())

    def same_prompts(self, input_ids: torch.Tensor) -> bool:
        """:func:`_same_prompts` of the prompt columns of ``input_ids`` (of :meth:`continues`'
        shape) and this call's prompts; one row on CPU compares their bytes (no torch op)."""
        if self.rows == 1 and input_ids.is_cpu and input_ids.dtype == self.last_ids.dtype:
            prompt = self._prompt_row
            if prompt is None:
                prompt = self._prompt_row = self.prompt_ids.numpy()[0].tobytes()
            return input_ids.numpy()[0, : self.prompt_len].tobytes() == prompt
        return _same_prompts(input_ids[:, : self.prompt_len], self.prompt_ids)

    def close(self) -> None:
        """The call is over: keep only what ``tracked_states()`` reports (and the
        record's hashes, computed now if a one-row step left them: the record keeps no ids)."""
        self.hist = self.hist[-1:]
        self.only_banned = {}
        self.record.last_hash  # noqa: B018 (computes a pending hash, drops the ids)

    def _record(self, g: int, parents: np.ndarray, states: np.ndarray, input_ids: torch.Tensor):
        """Remember the rows of the call at generated length ``g`` (forgetting longer ones)."""
        del self.hist[g:]
        while len(self.hist) < g:  # lengths never seen: unknown ancestry
            self.hist.append((np.full(self.rows, -1), np.full(self.rows, UNKNOWN)))
        self.hist.append((parents, states))
        self.last_ids, self._row = input_ids.clone(), None
        self.last_hash = self.record.last_hash = None  # hash of last_ids, set by the caller when it has it
        self.record.max_len = max(self.record.max_len, input_ids.shape[1])

    def ancestors(self, parent: np.ndarray, k: int, rows: bool = False) -> np.ndarray:
        """States at generated length ``k`` of the previous step's rows ``parent``
        (``rows=True``: their row indices at ``k``, -1 if unknown)."""
        idx = parent.copy()
        for j in range(len(self.hist) - 1, k, -1):
            par = self.hist[j][0]
            if par is None:
                return np.full(len(idx), -1 if rows else UNKNOWN)
            bad = idx < 0
            idx = np.where(bad, -1, par[np.where(bad, 0, idx)])
        if rows:
            return idx
        states = self.hist[k][1]
        return np.where(idx < 0, UNKNOWN, states[np.where(idx < 0, 0, idx)])

    def advance(self, input_ids: torch.Tensor) -> np.ndarray:
        """States of the rows of ``input_ids``, a later step of this call."""
        if input_ids.shape[0] == 1 and self.weights is None:
            states = self._advance_one(input_ids)
            if states is not None:
                return states
        return self._advance_rows(input_ids)

    def _advance_one(self, input_ids: torch.Tensor):
        """The one-row step whose prefix is exactly the previous step's ids (the
        most common call): verified by one exact comparison, no parent search; the
        new token is the last column. Records what :meth:`_advance_rows` would
        (parent 0, the same states and row hash). None when it is not that step:
        a rollback, a changed prefix, an unknown ancestry (the general path)."""
        prev = self.last_ids
        length = input_ids.shape[1]
        k = length - 1 - self.prompt_len
        hist = self.hist
        if prev.shape != (1, length - 1) or len(hist) != k + 1 or prev.dtype != input_ids.dtype:
            return None
        row = None
        if input_ids.is_cpu:  # no synchronisation to save: direct reads, on
            row = input_ids.numpy()[0]  # the bytes of the rows (no torch op: this is ~1 us)
            if row[:-1].tobytes() != self._prev_row():
                return None
            last = int(row[-1])
        else:  # one small packet to the host, as on the general path
            packet = torch.stack([(input_ids[0, :-1] == prev[0]).all().long(), input_ids[0, -1]]).cpu()
            if not bool(packet[0]):
                return None
            last = int(packet[1])
        state = hist[k][1]
        if state[0] == UNKNOWN:
            return None
        states = checked_states(self.constraint, self.constraint.advance(state.copy(), np.array([last], dtype=np.int64)), 1)
        # what _record(k + 1, [0], states, input_ids) records, on attributes: the row hash
        # (what the general path records) is read only by a later general step and by
        # decode(): computed then, from the ids, not on every token
        hist.append((_PARENT_0, states))
        ids = self.last_ids = input_ids.clone()
        self._row = row.tobytes() if row is not None else None  # (the same values as ids)
        self._last_hash, self._pending = None, ids
        rec = self.record
        rec.hash_later(ids)
        if length > rec.max_len:
            rec.max_len = length
        return states

    def _prev_row(self) -> bytes:
        """The bytes of ``last_ids``' one row (on CPU), read once per step."""
        row = self._row
        if row is None:
            row = self._row = self.last_ids.numpy()[0].tobytes()
        return row

    def _advance_rows(self, input_ids: torch.Tensor) -> np.ndarray:
        """:meth:`advance` for any rows: parents found by row hashes, then verified."""
        rows, length = input_ids.shape
        p = self.prompt_len
        k = length - 1 - p
        prev = self.last_ids
        if k > prev.shape[1] - p:
            if self.weights is not None:  # no parents: weights unknown
                self.w_step = (torch.full((rows,), float("nan"), device=input_ids.device), None, None)
            return self.from_scratch(input_ids, np.ones(rows, bool), np.zeros(rows, np.int64))
        pw = _powers(length, input_ids.device)
        new_prefix = input_ids[:, : length - 1]
        old_prefix = prev[:, : length - 1]
        hn = _hash(new_prefix, pw)
        # usual step: the new prefix is the whole previous step, whose hash we kept
        hp = self.last_hash if length - 1 == prev.shape[1] and self.last_hash is not None else _hash(old_prefix, pw)
        eq = hn[:, None] == hp[None, :]
        ar = torch.arange(rows, device=input_ids.device)
        same = torch.zeros(rows, dtype=torch.bool, device=input_ids.device)
        m = min(rows, prev.shape[0])
        same[:m] = eq[ar[:m], ar[:m]]
        parent = torch.where(same, ar, eq.to(torch.int8).argmax(1))
        verified = eq.any(1) & (new_prefix == old_prefix[parent]).all(1)
        usual = prev.shape[1] == length - 1
        w_base = self.weights.carry(k + 1, parent, verified) if self.weights is not None and usual else None
        packet = torch.cat([parent, verified.long(), input_ids[:, -1]]).cpu().numpy()
        parent_h, ver_h, last_h = packet[:rows], packet[rows: 2 * rows].astype(bool), packet[2 * rows:]
        anc = self.ancestors(np.where(ver_h, parent_h, -1), k)
        unknown = anc == UNKNOWN
        if self.weights is not None:
            self._carry_weights(w_base, k, np.where(ver_h, parent_h, -1), unknown, usual, last_h)
        states = checked_states(self.constraint, self.constraint.advance(np.where(unknown, DEAD, anc), last_h), rows)
        if unknown.any():
            states = self.from_scratch(input_ids, unknown, states, record=False)
        self._record(k + 1, np.where(unknown, -1, parent_h), states, input_ids)
        self.last_hash = self.record.last_hash = hn + input_ids[:, -1] * pw[length - 1]
        self.record.hash_len = length
        return states

    def _carry_weights(self, w_base, k: int, parent: np.ndarray, unknown: np.ndarray, usual: bool, last_h):
        """Log-weights so far of this step's rows (issue 14): device-gathered along the
        parents on the usual step; on a rollback, from the rows of the step at ``k``."""
        w_rows = np.where(unknown, -1, parent if usual else self.ancestors(parent, k, rows=True))
        if w_base is None:  # rollback (assisted decoding): rows found on the host
            w_base = self.weights.rollback_base(k + 1, w_rows)
        elif unknown.any():  # rare: ancestry lost, weight unknown
            w_base = torch.where(torch.from_numpy(~unknown).to(w_base.device), w_base, float("nan"))
        self.w_step = (w_base, w_rows, last_h)

    def from_scratch(self, input_ids, which: np.ndarray, states: np.ndarray, record: bool = True) -> np.ndarray:
        """Recompute the state of rows ``which`` from their generated tokens (rare path)."""
        rows, length = input_ids.shape
        idx = np.nonzero(which)[0]
        gen = input_ids[torch.from_numpy(idx).to(input_ids.device), self.prompt_len:].cpu().numpy()
        states = states.copy()
        states[idx] = self.constraint.walk(self.start_states[idx], gen)
        if record:
            self._record(length - self.prompt_len, np.full(rows, -1), states, input_ids)
        return states

    def states_from_tokens(self, input_ids: torch.Tensor) -> np.ndarray:
        """Every row's state recomputed from scratch from its generated tokens."""
        gen = input_ids[:, self.prompt_len:].cpu().numpy()
        return self.constraint.walk(self.start_states[: gen.shape[0]], gen)


class Calls:
    """The runs of one processor: finds (or starts) the run of each processor call,
    and the call an output came from.

    Thread-safe; a lock guards the run tables, never a step's work.
    ``keep`` bounds the records kept for ``decode()`` and the runs tracked by tokens.

    >>> calls = Calls()
    >>> calls.last() is None
    True
    >>> calls.find(torch.zeros(1, 3))
    Traceback (most recent call last):
    ...
    hf_constrained.errors.GenerationConflictError: decode() needs a generate() call that used this processor first
    """

    def __init__(self, keep: int = 256, keep_by_tokens: int = 32):
        self._lock = threading.Lock()
        self._live: dict = {}  # id(GenerationConfig) -> Run, dropped when the config dies
        self._by_tokens: collections.deque = collections.deque(maxlen=keep_by_tokens)
        self._records: collections.deque = collections.deque(maxlen=keep)
        self._local = threading.local()  # .last: the last run this thread touched
        self._last = None  # weakref to the last run any thread started

    def has_run(self, config) -> bool:
        """True when this generate() call (its ``GenerationConfig``) already has a run."""
        run = self._live.get(id(config))
        return run is not None and run.config_ref() is config

    def run_for(self, input_ids: torch.Tensor, config, make):
        """``(run, is_new)`` for this processor call; ``make()`` builds a new run."""
        if config is not None:
            key = id(config)
            run = self._live.get(key)
            if run is not None and run.config_ref() is config and run.continues(input_ids, by_tokens=False):
                self._local.last = run
                return run, False
            run = make()
            with self._lock:
                old = self._live.get(key)
                if old is not None:
                    old.close()
                self._live[key] = run
                self._records.append(run.record)
            weakref.finalize(config, self._close, key, weakref.ref(run))
        else:
            with self._lock:
                runs = list(self._by_tokens)
            for run in reversed(runs):  # the most recent first: usually the one
                if run.continues(input_ids) and run.same_prompts(input_ids):
                    self._local.last = run
                    return run, False
            for run in reversed(runs):
                if run.lost_rows(input_ids):
                    raise GenerationConflictError(
                        f"these {input_ids.shape[0]} rows continue {run.rows} rows this processor was "
                        "called with, with rows dropped; outside generate() each step "
                        "must pass every row of the previous one plus one token (a finished row is "
                        "only allowed pad/EOS: keep it), or the rest would start the pattern again")
            run = make()
            with self._lock:
                if len(self._by_tokens) == self._by_tokens.maxlen:
                    self._by_tokens[0].close()
                self._by_tokens.append(run)
                self._records.append(run.record)
        self._local.last = run
        self._last = weakref.ref(run)
        return run, True

    def live(self) -> int:
        """How many generate() calls have a run here now (their generation config is alive)."""
        with self._lock:
            return len(self._live)

    def _close(self, key: int, run_ref) -> None:
        with self._lock:
            run = run_ref()
            if run is not None and self._live.get(key) is run:
                del self._live[key]
            if run is not None:
                run.close()

    def last(self):
        """The last run this thread took part in (else the last one started), or None."""
        run = getattr(self._local, "last", None)
        if run is None and self._last is not None:
            run = self._last()
        return run

    def find(self, seqs: torch.Tensor, num_prompts=None) -> Record:
        """The record of the call ``seqs`` came from; a clear error when none or
        several calls that would decode it differently match."""
        with self._lock:
            records = list(reversed(self._records))
        if not records:
            raise GenerationConflictError("decode() needs a generate() call that used this processor first")
        found = [rec for rec in records if rec.matches(seqs)]
        if any(rec.prompt_len for rec in found):
            # a call given inputs_embeds alone has no prompt columns, so it matches any output
            # of a fitting width: a call whose prompt columns this output holds is the one
            found = [rec for rec in found if rec.prompt_len]
        if len(found) > 1:  # several calls with these prompts: the one whose rows these are
            exact = [rec for rec in found if rec.identifies(seqs)]
            # none identifies them: drop the calls for which that is conclusive
            found = exact or [rec for rec in found if not rec.identifies_surely(seqs)]
        ways = {}
        for rec in found:
            n = int(num_prompts) if num_prompts is not None else rec.num_prompts
            ways.setdefault((rec.prompt_len, n, rec.starts_for(n) or id(rec)), rec)
        if not found:
            raise GenerationConflictError(
                f"this output ({seqs.shape[0]} rows x {seqs.shape[1]} tokens) matches none of the last "
                f"{len(records)} generate() calls on this processor (their prompt columns differ, or "
                "it is longer than those calls ran); pass the exact output of a generate() call that "
                "used this processor")
        if len(ways) > 1:
            desc = "; ".join(f"prompt length {p}, {n} prompts" for p, n, _ in ways)
            fix = ("pass num_prompts= with the number of prompts you gave generate(), or use one "
                   "processor per such call") if len({p for p, _, _ in ways}) == 1 else (
                "one call's prompt is the start of the other's output (a continuation): use one "
                "processor per such call")
            raise GenerationConflictError(
                f"this output matches {len(found)} generate() calls on this processor that would "
                f"decode it differently ({desc}): {fix}")
        return found[0]
