"""Token masks of visited constraint states, kept on the logits' device: one class per layout.

Both layouts give every visited state a table row (``row_of``); row 0 holds the
mask of :data:`~hf_constrained.constraint.FINISHED` (EOS and pad only) and is
shared by dead and finished rows, so no row is ever entirely ``-inf``. Row 0 is
written the first time a step has such a row (most calls never have one; a
processor's first call has none). Ids
beyond the tokenizer's vocabulary (a model vocabulary padded larger) are never
allowed. The masks come from the constraint (``allowed_mask`` /
``banned_bits``), so any engine gets both layouts.

* :class:`PackedMasks` (``"packed"``, the default on accelerators): a dense
  row of *banned* bits per state (16 KB for 129k tokens), gathered and unpacked
  in the masking kernel for one dense ``masked_fill``.
* :class:`SparseMasks` (``"sparse"``, the default on CPU): a dense pass over
  rows x width is what costs there, so each row keeps only the shorter of its
  allowed and its banned ids. One row is masked with its list kept ready as
  an int64 tensor: a single ``index_fill_`` (banned) or ``index_copy_`` (allowed).

Both produce bit-identical masked scores (``tests/test_masks.py``). Tables
grow from several threads at once: a lock is taken where rows are *added*;
a step whose states all have rows reads without locking.

>>> import torch
>>> from hf_constrained.constraint import Constraint
>>> class Even(Constraint):            # state 1: every even id of 10 is allowed (EOS = 0)
...     starts, eos_token_ids, vocab_size = np.array([1]), np.array([0]), 10
...     def allowed_ids(self, q):
...         return np.arange(0, 10, 2, dtype=np.int32) if q > 0 else np.array([0], np.int32)
>>> scores = torch.zeros(2, 12)
>>> for layout in ("packed", "sparse"):
...     masks = make_masks(layout, Even(), 12, torch.device("cpu"))
...     out = masks.apply(scores.clone(), np.array([1, 0]), inplace=True)
...     print(layout, torch.isfinite(out).nonzero()[:, 1].tolist())
packed [0, 2, 4, 6, 8, 0]
sparse [0, 2, 4, 6, 8, 0]
"""

from __future__ import annotations

import threading

import numpy as np
import torch

from .constraint import FINISHED, Constraint, packed_words, set_bit_ids
from .errors import StateLimitError

LAYOUTS = ("packed", "sparse")

#: set bits per byte value, for numpy < 2.0 (which has no ``np.bitwise_count``)
_BYTE_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.int64)


def bit_count(bits: np.ndarray) -> int:
    """Set bits in an unsigned integer array (``np.bitwise_count`` where numpy has it,
    >= 2.0; a byte table else).

    >>> bit_count(np.array([0b1011, 0xFF, 0], dtype=np.uint8)), bit_count(np.array([2**64 - 1], dtype=np.uint64))
    (11, 64)
    """
    count = getattr(np, "bitwise_count", None)
    return int(count(bits).sum()) if count is not None else int(_BYTE_POPCOUNT[bits.view(np.uint8)].sum())


def default_layout(device: torch.device) -> str:
    """``"sparse"`` on CPU, ``"packed"`` on accelerators.

    >>> default_layout(torch.device("cpu"))
    'sparse'
    """
    return "sparse" if torch.device(device).type == "cpu" else "packed"


def _grown(buf, need: int):
    """``buf`` (tensor or array) with room for at least ``need`` leading entries;
    doubles its length so that appends cost amortised O(1) copies."""
    if need <= len(buf):
        return buf
    size = (max(need, 2 * len(buf), 16),) + tuple(buf.shape[1:])
    if isinstance(buf, torch.Tensor):  # only the leading entries are ever read: no zero fill
        grown = torch.empty(size, dtype=buf.dtype, device=buf.device)
    else:
        grown = np.zeros(size, dtype=buf.dtype)
    grown[: len(buf)] = buf
    return grown


def _nonzero(mask: np.ndarray, n: int) -> np.ndarray:
    """Sorted int64 indices of the ``n`` True entries of the bool ``mask``. A short
    list is found through the nonzero 8-byte words (``np.flatnonzero`` reads every byte).

    >>> _nonzero(np.arange(21) % 10 == 3, 2).tolist()
    [3, 13]
    """
    if n * 64 > len(mask):
        return np.flatnonzero(mask)
    mask = np.ascontiguousarray(mask)
    head = len(mask) // 8 * 8
    words = mask[:head].view(np.uint64).astype(bool).nonzero()[0]  # (bools: numpy's SIMD scan)
    r, c = np.nonzero(mask[:head].reshape(-1, 8)[words])
    ids = words[r] * 8 + c
    if head == len(mask):
        return ids
    return np.concatenate([ids, np.flatnonzero(mask[head:]) + head])


# _id_list lists at most this many allowed ids, in at most this many nonzero words, on
# Python ints (cheaper than numpy's calls for a handful; most new states of a JSON walk)
_FEW_WORDS, _FEW_IDS = 16, 24


def _word_bits(at: list, vals: list, n: int) -> np.ndarray:
    """Sorted int64 positions of the ``n`` set bits of the 64-bit words ``vals`` (Python
    ints) at word indices ``at`` (ascending), lowest bit first.

    >>> _word_bits([0, 2], [0b1001, 1 << 63], 3).tolist()
    [0, 3, 191]
    """
    out = np.empty(n, dtype=np.int64)
    i = 0
    for w, v in zip(at, vals):
        base = w << 6
        while v:
            low = v & -v
            out[i] = base | (low.bit_length() - 1)
            i += 1
            v ^= low
    return out


def _id_list(bits: np.ndarray, width: int, banned: dict | None = None):
    """``(keep, ids)`` of a state from its packed allowed ``bits`` (little-endian,
    ``ceil(width / 8)`` bytes, those at and beyond ``width`` clear; only read, never written):
    its sorted int64 allowed ids when they are at most half of ``width`` (``keep``),
    else its banned ids below ``width``. Reads the bits as 64-bit words and unpacks
    only the nonzero ones: O(width / 64) plus O(ids), no 129k-wide pass.

    >>> bits = np.packbits(np.arange(20) % 7 == 3, bitorder="little")
    >>> keep, ids = _id_list(bits, 20)
    >>> bool(keep), ids.tolist()
    (True, [3, 10, 17])
    >>> keep, ids = _id_list(np.packbits(np.arange(20) % 7 != 3, bitorder="little"), 19)
    >>> bool(keep), ids.tolist()                    # mostly allowed: the banned ids below 19
    (False, [3, 10, 17])

    ``banned`` (a :class:`_Lists`): banned lists listed before, by their bits; a state
    with the same bits as an earlier one reuses its list (the same string body in many
    states of a JSON walk: ~3 µs for the key against ~20-40 µs for ~3,000 ids).
    """
    bits, words, nz = packed_words(bits)
    if len(nz) <= _FEW_WORDS:  # the usual new state: a handful of allowed ids
        vals = words[nz].tolist()
        n = sum(v.bit_count() for v in vals)
        if n <= _FEW_IDS and 2 * n <= width:
            return True, _word_bits(nz.tolist(), vals, n)
    vals = words[nz]
    keep = 128 * len(nz) <= width or 2 * bit_count(vals) <= width  # (counted in words)
    sel = vals.view(np.uint8)
    if not keep:  # the banned ids: the zero bits below the width
        if banned is not None:
            key = bits.tobytes()
            ids = banned.lists.get(key)
            if ids is None:
                ids = banned.add(key, _id_list(bits, width)[1])
            return False, ids
        bits = np.invert(bits)  # (a fresh array: ``bits`` may be the engine's, read-only)
        words = bits.view(np.uint64)
        bits[(width + 7) // 8:] = 0
        if width % 8:
            bits[width // 8] &= (1 << (width % 8)) - 1
        nz = words.astype(bool).nonzero()[0]
        sel = words[nz].view(np.uint8)
    return keep, set_bit_ids(bits, nz, sel)


class _Lists:
    """Id lists by a key (bytes), kept while their keys and ids fit in ``budget`` bytes
    (then no more are added). Lists are shared by the rows that find them: never written.

    >>> lists = _Lists(100)
    >>> a = lists.add(b"k" * 60, np.arange(3))          # 60 + 24 bytes: kept
    >>> lists.lists[b"k" * 60] is a, len(lists.add(b"j" * 60, np.arange(3))), len(lists.lists)
    (True, 3, 1)
    """

    def __init__(self, budget: int):
        self.lists, self.room = {}, int(budget)

    def add(self, key: bytes, ids: np.ndarray) -> np.ndarray:
        size = len(key) + ids.nbytes
        if size <= self.room:
            self.lists[key] = ids
            self.room -= size
        return ids


def _no_token(engine, state: int, width: int):
    """The error for a state whose mask allows no token below ``width``: every score of its
    rows would be -inf (greedy search then takes id 0, sampling fails on NaNs). None where the
    width is below the engine's ``vocab_size`` (tests cut the logits).

    >>> str(_no_token(None, 3, 10)).split(":")[0]
    'NoneType.allowed_ids(3) allows no token among the 10 columns of the scores'
    """
    from .errors import ConstraintError

    if width < int(getattr(engine, "vocab_size", 0) or 0):
        return None  # logits narrower than the vocabulary cut the mask: _check_width's concern
    what = ("FINISHED must allow EOS (and the pad id)" if state == FINISHED else
            "DEAD must allow EOS" if state <= 0 else
            "a live state allows at least one token (EOS iff it accepts); a configuration with no "
            "continuation is DEAD, which advance() returns for the token that leads there")
    return ConstraintError(f"{type(engine).__name__}.allowed_ids({state}) allows no token among the {width} "
                           f"columns of the scores: {what} (the Constraint contract)")


def _bans_all(banned: np.ndarray, width: int) -> bool:
    """Do the packed little-endian ``banned`` bits ban every id below ``width``?

    >>> _bans_all(np.array([255, 3], np.uint8), 10), _bans_all(np.array([255, 1], np.uint8), 10)
    (True, False)
    """
    full, rem = divmod(width, 8)
    if not (banned[:full] == 255).all():
        return False
    return rem == 0 or int(banned[full]) & ((1 << rem) - 1) == (1 << rem) - 1


class MaskLayout:
    """Shared part of the layouts: the state -> table row map, grown under a lock.

    Subclasses implement :meth:`_store` (write the rows of new states) and
    :meth:`apply` (mask a step's scores). Writers publish a row in ``row_of``
    only after its storage is written, so lock-free readers never see a
    half-built row.

    >>> from hf_constrained import offline, RegexConstraint
    >>> engine = RegexConstraint.from_tokenizer([r"[ab]+"], offline.local_tokenizer())
    >>> masks = make_masks("sparse", engine, 1000, "cpu")
    >>> masks.host_rows(np.array([0, -1, int(engine.starts[0])])).tolist()   # dead/finished share row 0
    [0, 0, 1]
    """

    name = ""

    def __init__(self, constraint, width: int, device: torch.device):
        self.constraint, self.width, self.device = constraint, int(width), torch.device(device)
        self._lock = threading.Lock()
        self.row_of = np.full(64, -1, dtype=np.int64)  # state -> table row (slot 0: dead/finished)
        self.used = 1  # row 0 is FINISHED's, written when a step first needs it
        self._finished = False

    def _need_finished(self) -> None:
        """Write row 0 (FINISHED: EOS and pad) unless it is written already; every
        reader of row 0 calls this first (one attribute test once it is there)."""
        with self._lock:
            if not self._finished:
                self._store([FINISHED], 0)
                self._finished = True  # published after the row is written

    def _add(self, states: list) -> None:
        base = self.used
        self._store(states, base)
        self.used = base + len(states)
        top = max(states) + 1
        row_of = self.row_of
        if top > len(row_of):
            row_of = np.full(max(top, 2 * len(row_of)), -1, dtype=np.int64)
            row_of[: len(self.row_of)] = self.row_of
        for i, s in enumerate(states):
            if s > 0:
                row_of[s] = base + i
        self.row_of = row_of

    def _store(self, states: list, base: int) -> None:
        raise NotImplementedError

    def host_rows(self, states: np.ndarray) -> np.ndarray:
        """Table rows for ``states`` (dead and finished share row 0), adding unseen states."""
        states = np.asarray(states, dtype=np.int64)
        if not self._finished and (states <= 0).any():
            self._need_finished()
        row_of = self.row_of
        seen = np.unique(states[states > 0])
        known = seen < len(row_of)
        known[known] = row_of[seen[known]] >= 0
        if not known.all():
            with self._lock:
                row_of = self.row_of  # another thread may have added them meanwhile
                new = [s for s in seen[~known].tolist() if s >= len(row_of) or row_of[s] < 0]
                if new:
                    self._add(new)
                row_of = self.row_of
        return np.where(states > 0, row_of[np.maximum(states, 0)], 0)

    def row(self, state: int) -> int:
        """:meth:`host_rows` of one state, on Python ints (the one-row step)."""
        if state <= 0:
            if not self._finished:
                self._need_finished()
            return 0
        row_of = self.row_of
        if state < len(row_of):
            r = int(row_of[state])
            if r >= 0:
                return r
        with self._lock:  # a new state: added directly, no array passes
            row_of = self.row_of  # another thread may have added it meanwhile
            if state < len(row_of):
                r = int(row_of[state])
                if r >= 0:
                    return r
            r = self.used
            self._store([state], r)
            self.used = r + 1
            if state >= len(row_of):
                row_of = np.full(max(state + 1, 2 * len(row_of)), -1, dtype=np.int64)
                row_of[: len(self.row_of)] = self.row_of
            row_of[state] = r  # published after the row is written
            self.row_of = row_of
            return r

    def _to_device(self, host: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(host).to(self.device, non_blocking=True)

    def apply(self, scores: torch.Tensor, states: np.ndarray, inplace: bool) -> torch.Tensor:
        """``scores`` (rows x width) with every token banned in each row's state set to -inf;
        in place when ``inplace`` (and the layout can), else on a copy."""
        raise NotImplementedError


class PackedMasks(MaskLayout):
    """Packed banned bits per state, one gather + unpack + ``masked_fill`` per step.

    >>> from hf_constrained import offline, RegexConstraint
    >>> tok = offline.local_tokenizer()
    >>> engine = RegexConstraint.from_tokenizer([r"[ab]+"], tok)
    >>> masks = PackedMasks(engine, len(tok), "cpu")
    >>> banned = masks.banned(torch.tensor([0]))           # row 0: after EOS
    >>> sorted(set(range(len(tok))) - set(banned[0].nonzero()[:, 0].tolist())) == sorted(
    ...     {tok.eos_token_id, tok.pad_token_id})
    True
    """

    name = "packed"

    def __init__(self, constraint, width: int, device: torch.device):
        # Rows hold the *banned* tokens so the masking kernel needs no negation.
        self.table = torch.zeros((0, (int(width) + 7) // 8), dtype=torch.uint8, device=device)
        self.shifts = torch.arange(8, dtype=torch.uint8, device=device)
        super().__init__(constraint, width, device)

    def _store(self, states: list, base: int) -> None:
        if len(states) == 1:  # the one-row step's new state: no stacking
            host = self.constraint.banned_bits(states[0], self.width)[None]
        else:
            host = np.stack([self.constraint.banned_bits(s, self.width) for s in states])
        for s, row in zip(states, host):
            err = _no_token(self.constraint, s, self.width) if _bans_all(row, self.width) else None
            if err is not None:
                raise err
        table = _grown(self.table, base + len(states))
        table[base: base + len(states)] = torch.from_numpy(host).to(self.device)
        self.table = table

    def banned(self, rows) -> torch.Tensor:
        """Bool mask (rows x width) of the banned tokens of table ``rows`` (a device
        index tensor, or a slice: one row needs no index copied to the device)."""
        if not self._finished and not isinstance(rows, slice):  # an index may name row 0
            self._need_finished()  # (a slice comes from row(), which wrote it if it is 0)
        sel = self.table[rows]
        bits = (sel.unsqueeze(-1) >> self.shifts) & 1
        return bits.view(sel.shape[0], -1)[:, : self.width].bool()

    def apply(self, scores, states, inplace):
        if len(states) == 1:
            r = self.row(int(states[0]))
            banned = self.banned(slice(r, r + 1))
        else:
            banned = self.banned(self._to_device(self.host_rows(states)))
        if inplace:
            return scores.masked_fill_(banned, float("-inf"))
        return scores.masked_fill(banned, float("-inf"))


class SparseMasks(MaskLayout):
    """Per state the shorter of its allowed (``keep``) and its banned id lists, in CSR form.

    ``steps`` is one flat int32 tensor and table row ``r`` owns
    ``steps[start[r]: start[r] + count[r]]``, its sorted ids stored as
    differences (first id, then gaps; ``first`` and ``last`` hold its first and
    last id on the host) so that one cumulative sum turns a step's segments
    into flat score indices. Banned ids are set to -inf; for an allowed list
    the allowed scores are saved, the row is filled with -inf and the saved
    scores are written back.

    >>> from hf_constrained import offline, RegexConstraint
    >>> tok = offline.local_tokenizer()
    >>> engine = RegexConstraint.from_tokenizer([r"a|b"], tok)
    >>> masks = SparseMasks(engine, len(tok), "cpu")
    >>> out = masks.apply(torch.zeros(1, len(tok)), engine.starts, inplace=True)
    >>> tok.decode(torch.isfinite(out[0]).nonzero()[:, 0].tolist()), bool(masks.keep[1])  # an allowed list
    ('ab', True)
    """

    name = "sparse"

    def __init__(self, constraint, width: int, device: torch.device):
        super().__init__(constraint, width, device)
        # on CPU the steps are a numpy array's memory (written without torch calls)
        on_host = self.HOST_STEPS and self.device.type == "cpu"
        self._steps_host = np.zeros(0, dtype=np.int32) if on_host else None
        self.steps = torch.from_numpy(self._steps_host) if on_host else torch.zeros(
            0, dtype=torch.int32, device=device)  # gaps < 2**31
        self.num_steps = 0
        # 64 rows to start with; row 0 (FINISHED) empty until written: the same in every table
        self.start, self.count, self.first, self.last = (np.zeros(64, dtype=np.int64) for _ in range(4))
        self.keep = np.zeros(64, dtype=bool)
        self._local = threading.local()  # scratch buffers, one set per thread
        self._ids: dict = {}  # table row -> its ids as an int64 device tensor (one-row steps)
        self._ids_bytes = 0
        self._ids_limit = self.IDS_CACHE_BYTES  # fixed when the table is made
        self._banned = _Lists(self.BANNED_CACHE_BYTES)  # banned lists by their packed bits

    # On CPU new states' steps are written through a numpy view of their memory
    # (False: through torch, as on an accelerator; tests compare the two).
    HOST_STEPS = True

    # Room for this many steps (256 KB: the steps of a median corpus walk, ~30k, fit) is
    # reserved at the first store, so that a walk's first states add theirs without copies;
    # then the steps double. (A 4 MB reserve cost 12-70 us at a table's first store: numpy
    # maps it and advises huge pages.)
    STEPS_RESERVE = 1 << 16

    def _grow_rows(self, need: int) -> None:
        """Room for ``need`` table rows in the host arrays (doubling; rows beyond
        ``used`` are never read, so no zero fill)."""
        size = max(need, 2 * len(self.start), 64)
        grown = []
        for a in (self.start, self.count, self.first, self.last, self.keep):
            g = np.empty(size, dtype=a.dtype)
            g[: len(a)] = a
            grown.append(g)
        self.start, self.count, self.first, self.last, self.keep = grown

    def _list(self, s: int):
        """``(keep, ids)`` of state ``s``: its sorted int64 allowed ids when they are at
        most half of the width, else its banned ids."""
        c = self.constraint  # (an engine's own stored bits, read-only; other objects: a copy)
        bits = c.packed_allowed(s, self.width) if isinstance(c, Constraint) else c.allowed_bits(s, self.width)
        if bits is not None:  # packed (16 KB at 129k): no 129k-wide pass per new state
            if not (isinstance(bits, np.ndarray) and bits.dtype == np.uint8 and bits.shape == ((self.width + 7) // 8,)):
                got = f"{bits.dtype} of shape {bits.shape}" if isinstance(bits, np.ndarray) else type(bits).__name__
                raise TypeError(f"{type(c).__name__}.allowed_bits({s}, {self.width}) must return "
                                f"{(self.width + 7) // 8} uint8 bytes (the allowed ids' bits, little-endian: "
                                f"np.packbits(mask, bitorder='little')), not {got}")
            k, ids = _id_list(bits, self.width, self._banned)
        else:
            allowed = self.constraint.allowed_mask(s, self.width)
            n = int(np.count_nonzero(allowed))
            k = 2 * n <= self.width
            ids = _nonzero(allowed, n) if k else _nonzero(~allowed, self.width - n)
        err = _no_token(c, s, self.width) if k and not len(ids) else None
        if err is not None:
            raise err
        return k, ids

    def _room(self, num_steps: int, need: int):
        """``(steps, host)`` with room for ``num_steps`` steps (the current ones copied
        when they grow; not yet published) and the row arrays grown for ``need`` rows."""
        if num_steps >= 2**31:  # positions in steps are int32 (about 8 GB of ids)
            raise StateLimitError(
                f"the CPU masks of the {need} constraint states visited hold more than 2**31 "
                "token ids; lower max_states or use fewer, simpler patterns per processor")
        if need > len(self.start):  # published by the caller, with the rows written
            self._grow_rows(need)
        host = self._steps_host  # on CPU: the steps' own memory, written in place
        if num_steps <= self.steps.shape[0]:  # (a tensor's len() is a Python call)
            return self.steps, host
        size = max(num_steps, 2 * self.steps.shape[0], self.STEPS_RESERVE)  # no zero fill: only
        if host is not None:  # the leading entries are ever read
            host = np.empty(size, dtype=np.int32)
            host[: self.num_steps] = self._steps_host[: self.num_steps]
            return torch.from_numpy(host), host
        steps = torch.empty(size, dtype=torch.int32, device=self.device)
        steps[: self.num_steps] = self.steps[: self.num_steps]
        return steps, None

    def _store(self, states: list, base: int) -> None:
        if len(states) == 1:
            return self._store_one(states[0], base)
        need = base + len(states)
        lists = [self._list(s) for s in states]
        num_steps = self.num_steps + sum(len(ids) for _, ids in lists)
        steps, host = self._room(num_steps, need)
        start, count, first, last, keep = self.start, self.count, self.first, self.last, self.keep
        at = self.num_steps
        # first id, then differences: straight into the steps on CPU, else one copy to the device
        gaps = host[at: num_steps] if host is not None else np.empty(num_steps - at, dtype=np.int32)
        for r, (k, ids) in enumerate(lists, base):
            n = len(ids)
            keep[r], start[r], count[r] = k, at, n
            first[r], last[r] = (ids[0], ids[-1]) if n else (0, 0)
            if n:
                g = gaps[at - self.num_steps: at - self.num_steps + n]
                g[0] = ids[0]
                np.subtract(ids[1:], ids[:-1], out=g[1:], casting="unsafe")
            at += n
        if host is None and len(gaps):
            steps[self.num_steps: num_steps] = torch.from_numpy(gaps).to(self.device)
        self.steps, self._steps_host, self.num_steps = steps, host, num_steps

    def _store_one(self, state: int, r: int) -> None:
        """:meth:`_store` of one state (the one-row step's new state, and row 0): its list
        is also kept ready as an int64 tensor (:meth:`row_ids`) before its first use."""
        k, ids = self._list(state)
        n, at = len(ids), self.num_steps
        steps, host = self._room(at + n, r + 1)
        if n:
            g = host[at: at + n] if host is not None else np.empty(n, dtype=np.int32)
            g[0] = ids[0]
            np.subtract(ids[1:], ids[:-1], out=g[1:], casting="unsafe")
            if host is None:
                steps[at: at + n] = torch.from_numpy(g).to(self.device)
            self.first[r], self.last[r] = ids[0], ids[-1]
        else:
            self.first[r] = self.last[r] = 0
        self.keep[r], self.start[r], self.count[r] = k, at, n
        self.steps, self._steps_host, self.num_steps = steps, host, at + n
        if self._ids_bytes + 8 * n <= self._ids_limit:  # (under the table's lock, like every _store)
            ready = torch.from_numpy(ids)
            self._ids[r] = ready if self.device.type == "cpu" else ready.to(self.device)
            self._ids_bytes += 8 * n

    def _scratch(self, name: str, n: int, dtype: torch.dtype) -> torch.Tensor:
        """A reused buffer of ``n`` elements (per thread): fresh multi-megabyte tensors
        every step would cost more in page faults than the masking itself."""
        scratch = self._local.__dict__
        buf = scratch.get(name)
        if buf is None or len(buf) < n or buf.dtype != dtype:
            size = max(n, 2 * len(buf)) if buf is not None and buf.dtype == dtype else n
            buf = scratch[name] = torch.empty(size, dtype=dtype, device=self.device)
        return buf[:n]

    def _flat_index(self, score_rows: np.ndarray, rows: np.ndarray) -> torch.Tensor:
        """Flat indices, into contiguous ``rows x width`` scores, of the ids listed
        by table ``rows`` for score rows ``score_rows``: one segment per row.

        Positions in ``steps`` go up by one inside a segment and jump at its
        start (a cumulative sum); the gathered steps, with each segment's first
        one replaced by the distance from the previous segment's last index,
        sum up (a second one) to the indices. Valid until the next call.
        """
        count = self.count[rows]
        nonempty = count > 0
        count, rows, score_rows = count[nonempty], rows[nonempty], score_rows[nonempty]
        if not len(count):
            return torch.zeros(0, dtype=torch.int64, device=self.device)
        at = np.cumsum(count) - count  # where each segment starts in the output
        start = self.start[rows]
        pos_jump = start.copy()
        pos_jump[1:] -= start[:-1] + count[:-1] - 1
        offset = score_rows * self.width
        idx_jump = offset + self.first[rows]
        idx_jump[1:] -= offset[:-1] + self.last[rows[:-1]]
        small = self._to_device(np.stack([at, pos_jump, idx_jump]))
        total = int(at[-1] + count[-1])
        pos = self._scratch("pos", total, torch.int32).fill_(1)  # positions in steps: < 2**31
        pos[small[0]] = small[1].int()
        gaps = torch.index_select(self.steps, 0, pos.cumsum_(0), out=self._scratch("gaps", total, torch.int32))
        idx = self._scratch("idx", total, torch.int64).copy_(gaps)
        idx[small[0]] = small[2]
        return idx.cumsum_(0)

    # Ready int64 id lists for one-row steps are kept up to this many bytes per
    # table (the value when the table is made); rows beyond it rebuild theirs from
    # ``steps`` (one cumulative sum).
    IDS_CACHE_BYTES = 64 << 20
    # Banned lists kept for reuse by content (keys and ids, ~40 KB each at 129k ids:
    # about 200 distinct string bodies), then only read
    BANNED_CACHE_BYTES = 8 << 20

    def row_ids(self, r: int) -> torch.Tensor:
        """Sorted ids (int64, on the device) listed by table row ``r``.

        >>> from hf_constrained import offline, RegexConstraint
        >>> tok = offline.local_tokenizer()
        >>> engine = RegexConstraint.from_tokenizer([r"a|b"], tok)
        >>> masks = SparseMasks(engine, len(tok), "cpu")
        >>> tok.decode(masks.row_ids(masks.row(int(engine.starts[0]))).tolist())
        'ab'
        """
        if r == 0 and not self._finished:
            self._need_finished()
        ids = self._ids.get(r)
        if ids is None:
            start, count = int(self.start[r]), int(self.count[r])
            ids = torch.cumsum(self.steps[start: start + count], 0, dtype=torch.int64)  # gaps -> ids
            if self._ids_bytes + 8 * count <= self._ids_limit:
                with self._lock:
                    if r not in self._ids:
                        self._ids[r] = ids
                        self._ids_bytes += 8 * count
        return ids

    def _apply_one(self, scores, state: int, inplace: bool):
        """:meth:`apply` of one row: a single ``index_fill_`` of its banned ids, or
        its allowed scores saved, the row filled with -inf and written back; off
        place, an allowed list is written into a fresh -inf row (no copy of the scores)."""
        r = self.row(state)
        ids, ninf = self.row_ids(r), float("-inf")
        own = inplace and scores.is_contiguous()
        if self.keep[r]:
            vals = scores.index_select(1, ids)  # (along the columns: no row view made)
            if own:
                out = scores.fill_(ninf)
            else:
                out = torch.full(scores.shape, ninf, dtype=scores.dtype, device=scores.device)
            out.index_copy_(1, ids, vals)
            return out
        out = scores if own else scores.clone(memory_format=torch.contiguous_format)
        out.index_fill_(1, ids, ninf)
        return out

    def apply(self, scores, states, inplace):
        if len(states) == 1:
            return self._apply_one(scores, int(states[0]), inplace)
        return self._apply_rows(scores, states, inplace)

    def _apply_rows(self, scores, states, inplace):
        if not (inplace and scores.is_contiguous()):
            scores = scores.clone(memory_format=torch.contiguous_format)
        rows = self.host_rows(states)
        keep = self.keep[rows]
        flat, ninf = scores.view(-1), float("-inf")
        kept = np.flatnonzero(keep)
        if len(kept):
            idx = self._flat_index(kept, rows[kept])
            vals = torch.index_select(flat, 0, idx) if scores.requires_grad else \
                torch.index_select(flat, 0, idx, out=self._scratch("vals", len(idx), scores.dtype))  # (autograd refuses out=)
            if len(kept) == len(rows):
                scores.fill_(ninf)
            else:
                scores.index_fill_(0, self._to_device(kept), ninf)
            flat.index_copy_(0, idx, vals)
        dropped = np.flatnonzero(~keep)
        if len(dropped):
            flat.index_fill_(0, self._flat_index(dropped, rows[dropped]), ninf)
        return scores


_CLASSES = {"packed": PackedMasks, "sparse": SparseMasks}


def make_masks(layout: str, constraint, width: int, device) -> MaskLayout:
    """The mask table of ``layout`` (``"packed"`` or ``"sparse"``) for ``constraint``.

    >>> make_masks("dense", None, 8, "cpu")
    Traceback (most recent call last):
    ...
    ValueError: mask_layout must be 'packed' or 'sparse' (or None for the device's default), not 'dense'
    """
    cls = _CLASSES.get(layout)
    if cls is None:
        raise ValueError(f"mask_layout must be 'packed' or 'sparse' (or None for the device's "
                         f"default), not {layout!r}")
    vocab = getattr(constraint, "vocab", None)  # the built-in engines' Vocabulary (a third-party
    if not hasattr(vocab, "tok_len"):  # engine's own ``vocab`` attribute is none of our business)
        vocab = None
    _check_width(vocab, int(width),
                 np.asarray(getattr(constraint, "eos_token_ids", ()), dtype=np.int64).reshape(-1))
    return cls(constraint, width, device)


def _check_width(vocab, width: int, eos_ids: np.ndarray) -> None:
    """Refuse logits narrower than the ids that spell text: the masks would then be cut to a
    vocabulary the model does not have (a tokenizer for another model; tokens added to the
    tokenizer but not to the model), and a row whose allowed tokens all lie beyond the width
    would be left with none. Narrower by special tokens only (a pad token added to the
    tokenizer) is fine: those are never allowed, except EOS, of which one must fit."""
    from .errors import GenerationConflictError

    if len(eos_ids) and int(eos_ids.min()) >= width:
        raise GenerationConflictError(
            f"the scores have {width} columns (the model's vocabulary), but every EOS id "
            f"({', '.join(map(str, sorted(eos_ids.tolist())))}) lies beyond them: a finished row would "
            "be left with no token (a token added to the tokenizer but not to the model); call "
            "model.resize_token_embeddings(len(tokenizer)), or pass eos_token_id= an id the model has")
    if vocab is None:
        return
    last = getattr(vocab, "_last_text_id", None)
    if last is None:
        text_ids = np.flatnonzero(vocab.tok_len)
        last = vocab._last_text_id = int(text_ids[-1]) if len(text_ids) else -1
    if width <= last:
        raise GenerationConflictError(
            f"the scores have {width} columns (the model's vocabulary), but the tokenizer spells "
            f"text with ids up to {last} ({vocab.size} ids): the masks would not fit this model. "
            "Use the model's own tokenizer; after adding tokens to it, call "
            "model.resize_token_embeddings(len(tokenizer))")
