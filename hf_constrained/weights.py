"""Importance weights that undo the bias of token-by-token masking.

Masking renormalises the model's next-token distribution over the allowed
tokens at every step, so a constrained sample is drawn from

    q(x) = prod_t p(x_t | x_<t) / Z_t,   Z_t = sum of p(v | x_<t) over the allowed tokens v,

not from the model's distribution restricted to the language, p(x | x in L).
It favours prefixes whose continuations the model finds unlikely. Each
finished sample has importance weight ``p(x) / q(x) = prod_t Z_t``; the
processor adds ``log Z_t`` per row on the device (``track_weights=True``) and
:func:`resample` turns a batch of weighted samples into draws from p(x | L)
(self-normalised importance resampling: consistent as the number of samples
per prompt grows).

``Z_t`` is the mass under the scores the processor sees. The weights are exact
for p(x | L) when nothing after the processor changes the distribution before
sampling: ``do_sample=True``, no beams, no ``top_k`` / ``top_p`` / ``min_p`` /
``typical_p`` / ``epsilon_cutoff`` / ``eta_cutoff`` / ``top_h`` / watermarking.
A ``temperature`` after the processor is folded in exactly (the target is then
the product of the tempered next-token distributions restricted to L, which is
what unconstrained sampling at that temperature draws from). Processors that
run *before* ours (``repetition_penalty``, ``min_new_tokens``...) change the
scores the processor sees; the target is then that modified distribution.
:func:`weight_setting` reads the configuration and says which case holds.

>>> import math
>>> gens = [Generation(0, [Sequence([1], "a", True, log_weight=math.log(0.9)),
...                        Sequence([2], "b", True, log_weight=math.log(0.1))])]
>>> [round(w, 2) for w in normalized_weights(gens[0])]
[0.9, 0.1]
>>> drawn = resample(gens, 1000, seed=0)[0]
>>> 850 < drawn.texts.count("a") < 950
True
>>> round(effective_sample_size(gens[0]), 3)     # 1 / (0.9**2 + 0.1**2)
1.22
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import torch

from .hf_internals import _in_assisted_decoding
from .output import Generation, Sequence  # noqa: F401 (Sequence: the module example)

# Processors after ours that leave the sampling distribution unchanged.
_NO_OP_AFTER = {"LogitNormalization"}
# Processors after ours that change it, and the generate() setting behind each.
_WARPERS = {
    "TopKLogitsWarper": "top_k",
    "TopPLogitsWarper": "top_p",
    "MinPLogitsWarper": "min_p",
    "TypicalLogitsWarper": "typical_p",
    "EpsilonLogitsWarper": "epsilon_cutoff",
    "EtaLogitsWarper": "eta_cutoff",
    "TopHLogitsWarper": "top_h",
    "WatermarkLogitsProcessor": "watermarking_config",
    "SynthIDTextWatermarkLogitsProcessor": "watermarking_config",
}


@dataclass(frozen=True)
class WeightSetting:
    """What the tracked weights of one ``generate()`` call are exact for.

    ``exact``: the weights turn the samples into draws from the target
    distribution restricted to the language. ``temperature``: folded into
    ``Z_t`` (1.0 when none). ``reasons``: the settings that make them inexact
    (the weights are then relative to the scores at the processor).
    ``modified_by``: settings that ran before the processor and so changed the
    target (the model's distribution *with* them applied).

    >>> WeightSetting(True, 0.7, (), ("repetition_penalty",)).describe()
    'exact for the model distribution (temperature 0.7, with repetition_penalty applied) restricted to the language'
    >>> WeightSetting(False, 1.0, ("top_k=50",)).describe()
    'relative to the scores at the processor, not exact: top_k=50'
    """

    exact: bool
    temperature: float = 1.0
    reasons: tuple = ()
    modified_by: tuple = field(default=())

    def describe(self) -> str:
        if not self.exact:
            return "relative to the scores at the processor, not exact: " + "; ".join(self.reasons)
        parts = [] if self.temperature == 1.0 else [f"temperature {self.temperature:g}"]
        if self.modified_by:
            parts.append("with " + ", ".join(self.modified_by) + " applied")
        extra = f" ({', '.join(parts)})" if parts else ""
        return f"exact for the model distribution{extra} restricted to the language"


def weight_setting(processors, proc, config, width: int | None = None) -> WeightSetting:
    """Read one ``generate()`` configuration: are the weights of ``proc`` exact?

    ``processors`` is the ``LogitsProcessorList`` that calls ``proc`` (None when
    called directly), ``config`` the call's ``GenerationConfig`` (None outside
    generate()), ``width`` the number of logits (a ``top_k`` at least that large
    is a no-op).

    >>> from transformers import GenerationConfig, TemperatureLogitsWarper, TopKLogitsWarper
    >>> me = object()
    >>> weight_setting([me, TemperatureLogitsWarper(0.5)], me, GenerationConfig(do_sample=True)).temperature
    0.5
    >>> weight_setting([me, TopKLogitsWarper(5)], me, GenerationConfig(do_sample=True), width=100).reasons
    ('top_k=5',)
    >>> weight_setting([me, TopKLogitsWarper(50)], me, GenerationConfig(do_sample=True), width=10).exact
    True
    >>> weight_setting([me], me, GenerationConfig(num_beams=4)).reasons
    ('do_sample=False: the outputs are not samples (greedy or beam search)', 'num_beams=4: beam search selects rows')
    """
    reasons, before, temperature = [], [], 1.0
    if config is None:
        reasons.append("called outside generate(): the sampling settings are unknown")
    else:
        if not getattr(config, "do_sample", False):
            reasons.append("do_sample=False: the outputs are not samples (greedy or beam search)")
        beams = int(getattr(config, "num_beams", 1) or 1)
        if beams > 1:
            reasons.append(f"num_beams={beams}: beam search selects rows")
        if (getattr(config, "assistant_model", None) is not None or getattr(config, "prompt_lookup_num_tokens", None)
                or getattr(config, "assistant_early_exit", None) is not None or _in_assisted_decoding()):
            reasons.append("assisted decoding: not verified for weights")
    plist = list(processors) if processors is not None else [proc]
    at = next((i for i, p in enumerate(plist) if p is proc), None)
    if at is None:
        plist, at = [proc], 0
    for p in plist[:at]:
        before.append(_setting_name(p))
    for p in plist[at + 1:]:
        name = type(p).__name__
        if name == "TemperatureLogitsWarper":
            temperature *= float(p.temperature)
        elif name in _NO_OP_AFTER:
            continue
        elif name == "TopKLogitsWarper" and width is not None and int(p.top_k) >= width:
            continue
        elif name in _WARPERS:
            reasons.append(f"{_WARPERS[name]}={_warper_value(p)}")
        else:
            reasons.append(f"{name} runs after the processor")
    return WeightSetting(not reasons, temperature, tuple(reasons), tuple(before))


def _warper_value(p):
    for attr in ("top_k", "top_p", "min_p", "mass", "epsilon", "top_h"):
        if hasattr(p, attr):
            v = getattr(p, attr)
            return v.item() if isinstance(v, torch.Tensor) else v
    return "set"


def _setting_name(p) -> str:
    from .hf_internals import _BANNING  # the generate() setting behind each banning processor

    names = {"RepetitionPenaltyLogitsProcessor": "repetition_penalty",
             "EncoderRepetitionPenaltyLogitsProcessor": "encoder_repetition_penalty",
             "UnbatchedClassifierFreeGuidanceLogitsProcessor": "guidance_scale",
             "ClassifierFreeGuidanceLogitsProcessor": "guidance_scale",
             "TemperatureLogitsWarper": "temperature (before the processor)", **_BANNING}
    return names.get(type(p).__name__, type(p).__name__)


# ---------------------------------------------------------------- per step (device)
_CHUNK = 1 << 22  # CPU: elements per temporary (16 MB), below glibc's largest mmap threshold


def _lse(scores: torch.Tensor, temperature: float) -> torch.Tensor:
    """Row-wise ``logsumexp(scores / temperature)``, as ``max(s) - max(log_softmax(s))``.

    The fused ``log_softmax`` kernel is 3-4x faster on CPU than
    ``torch.logsumexp``, which takes a slow path on the ``-inf`` of masked
    scores; the two maxima are cheap reductions. Exact up to float32 rounding
    of the maximum (about 1e-6 for logits near 30). On CPU the rows go in
    chunks so that the temporaries are reused instead of page-faulted in.
    """
    rows, width = scores.shape
    step = rows if scores.device.type != "cpu" else max(1, _CHUNK // max(width, 1))
    parts = []
    for i in range(0, rows, step):
        s = scores[i: i + step].float()
        if temperature != 1.0:
            s = s / temperature
        parts.append(s.amax(-1) - torch.log_softmax(s, -1).amax(-1))
    return parts[0] if len(parts) == 1 else torch.cat(parts)


def log_mass_before(scores: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """``logsumexp`` of each row of the scores the processor receives (call it
    before masking in place), at the folded-in ``temperature``."""
    return _lse(scores, temperature)


def log_mass(before: torch.Tensor, masked: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """``log Z_t`` per row: the log of the probability mass the allowed tokens had.

    >>> s = torch.log(torch.tensor([[0.5, 0.3, 0.2]]))
    >>> m = s.masked_fill(torch.tensor([[False, True, False]]), float("-inf"))
    >>> round(log_mass(log_mass_before(s), m).exp().item(), 4)
    0.7
    >>> t = torch.log(torch.tensor([[0.5, 0.3, 0.2]])) * 2         # temperature 0.5 undoes the *2
    >>> round(log_mass(log_mass_before(t, 2.0), t.masked_fill(m.isinf(), float("-inf")), 2.0).exp().item(), 4)
    0.7
    """
    return _lse(masked, temperature) - before


class WeightTracker:
    """Per row of one ``generate()`` call, the running sum of ``log Z_t`` on the
    logits' device, carried along the shell's row tracking.

    ``acc[g]`` holds, for each row of the call at generated length ``g``, the
    log-weight of its tokens *plus* the ``log Z`` of the distribution its next
    token is drawn from. ``last[g]`` / ``parents[g]`` are the host copies of the
    rows' last tokens and parent rows the shell already has; :meth:`lookup`
    uses them to find, for any token sequence, a tracked row with exactly
    those tokens (a weight is a function of the tokens alone).

    The shell calls :meth:`carry` (device-only gather along its device parent
    index), :meth:`add` after masking, and :meth:`record` once the host knows
    the parents.

    Two rows, two steps; at the second step beam search swapped them::

        >>> tr = WeightTracker(2, "cpu", WeightSetting(True))
        >>> s0 = torch.log(torch.tensor([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0]]))
        >>> m0 = s0.clone(); m0[:, 1] = float("-inf")            # token 1 banned: Z = 0.5
        >>> tr.record(0, tr.add(torch.zeros(2), log_mass_before(s0), m0, np.array([True, True])), None, None)
        >>> base = tr.carry(1, torch.tensor([1, 0]), torch.tensor([True, True]))
        >>> s1 = torch.log(torch.tensor([[0.25, 0.75, 0.0], [0.9, 0.1, 0.0]]))
        >>> m1 = s1.clone(); m1[:, 1] = float("-inf")            # Z = 0.25 and 0.9
        >>> tr.record(1, tr.add(base, log_mass_before(s1), m1, np.array([True, True])), [1, 0], [0, 0])
        >>> [round(math.exp(w), 3) for w in tr.lookup([[0, 2], [0, 2]], 2)]   # 0.5 * 0.25 (row 0 at step 1)
        [0.125, 0.125]
    """

    def __init__(self, rows: int, device, setting: WeightSetting | None = None):
        self.rows, self.device, self.setting = rows, device, setting
        self.acc: list = []
        self.parents: list = []
        self.last: list = []

    def carry(self, g: int, parent: torch.Tensor, verified: torch.Tensor) -> torch.Tensor:
        """Log-weights so far of the rows at generated length ``g`` whose parents
        (device tensor, rows of the previous call) the shell found; NaN where
        unverified. Usual step only (the previous call was at ``g - 1``)."""
        prev = self.acc[g - 1] if 0 < g <= len(self.acc) else None
        if prev is None:
            return torch.full((len(parent),), float("nan"), device=parent.device)
        return torch.where(verified, prev[parent.clamp(0, len(prev) - 1)], float("nan"))

    def rollback_base(self, g: int, host_rows: np.ndarray) -> torch.Tensor:
        """Log-weights so far from rows ``host_rows`` of the call at ``g - 1``
        (-1: unknown -> NaN). Rare path (assisted-decoding rollbacks)."""
        prev = self.acc[g - 1] if 0 < g <= len(self.acc) else None
        if prev is None:
            return torch.full((len(host_rows),), float("nan"), device=self.device)
        idx = torch.from_numpy(np.maximum(host_rows, 0)).to(prev.device)
        out = prev[idx]
        return torch.where(torch.from_numpy(host_rows >= 0).to(prev.device), out, float("nan"))

    def add(self, base: torch.Tensor, before: torch.Tensor, masked: torch.Tensor,
            live: np.ndarray) -> torch.Tensor:
        """``base + log Z`` on live rows (finished and dead rows add nothing)."""
        lz = log_mass(before, masked, self.setting.temperature)
        live_dev = torch.from_numpy(live).to(masked.device, non_blocking=True)
        return base + torch.where(live_dev, lz, torch.zeros_like(lz))

    def record(self, g: int, acc: torch.Tensor, parents, last):
        """Remember the rows of the call at generated length ``g`` (forgetting longer ones)."""
        for lst in (self.acc, self.parents, self.last):
            del lst[g:]
            while len(lst) < g:
                lst.append(None)
        self.acc.append(acc)
        self.parents.append(None if parents is None else np.asarray(parents))
        self.last.append(None if last is None else np.asarray(last))

    def lookup(self, gen: list, per_out: int) -> list:
        """Log-weight of each generated id list (output rows prompt-major,
        ``per_out`` per prompt): that of a tracked row with the same tokens at
        the call where its last token was drawn; NaN when none was tracked."""
        out = np.full(len(gen), np.nan)
        if not self.acc or self.acc[0] is None:
            return out.tolist()
        n_prompts = max(1, len(gen) // max(per_out, 1))
        per_in = self.rows // n_prompts if self.rows % n_prompts == 0 else self.rows
        lens = np.array([len(ids) for ids in gen])
        width = int(lens.max(initial=0))
        toks = np.full((len(gen), width), -1, dtype=np.int64)
        for o, ids in enumerate(gen):
            toks[o, : len(ids)] = ids
        o_prompt = np.arange(len(gen)) // max(per_out, 1)
        match = o_prompt[:, None] == (np.arange(self.rows) // per_in)[None, :]
        want = {}  # generated length -> output rows whose last token was drawn there
        for o, n in enumerate(lens.tolist()):
            if n > 0:
                want.setdefault(n - 1, []).append(o)
            else:
                out[o] = 0.0
        for g in range(width):
            if g > 0:
                par, last = (self.parents[g], self.last[g]) if g < len(self.parents) else (None, None)
                if par is None or last is None:
                    break
                ok = par >= 0
                step = np.zeros((len(gen), len(par)), dtype=bool)
                step[:, ok] = match[:, par[ok]]
                match = step & (last[None, :] == toks[:, g - 1][:, None])
            if g in want and g < len(self.acc) and self.acc[g] is not None:
                os_ = np.array(want[g])
                hit = match[os_].any(1)
                row = match[os_].argmax(1)
                vals = self.acc[g].float().cpu().numpy()
                out[os_[hit]] = vals[row[hit]]
        return out.tolist()


# ---------------------------------------------------------------- after generation
def _log_weights(gen: Generation, finished_only: bool = True) -> np.ndarray:
    lw = []
    for s in gen.sequences:
        if s.log_weight is None:
            raise ValueError(
                f"prompt {gen.prompt_index}: a sequence has no log_weight; build the processor with "
                "track_weights=True and pass generate()'s output to proc.generations()")
        ok = s.finished or not finished_only
        lw.append(float(s.log_weight) if ok and not math.isnan(s.log_weight) else -math.inf)
    return np.array(lw, dtype=np.float64)


def normalized_weights(gen: Generation) -> list:
    """Self-normalised importance weights of ``gen``'s finished sequences (sum 1;
    truncated sequences get 0, since a prefix is not an element of the language)."""
    lw = _log_weights(gen)
    if not np.isfinite(lw).any():
        raise ValueError(
            f"prompt {gen.prompt_index}: none of its {len(lw)} sequences finished with a finite weight; "
            "raise max_new_tokens so that samples end with EOS, or draw more samples")
    w = np.exp(lw - lw.max())
    return (w / w.sum()).tolist()


def effective_sample_size(gen: Generation) -> float:
    """Kish's effective sample size ``(sum w)^2 / sum w^2`` of ``gen``'s weights:
    how many unweighted samples the weighted ones are worth."""
    w = np.array(normalized_weights(gen))
    return float(1.0 / np.square(w).sum())


def resample(generations: list, k: int, seed=None) -> list:
    """Draw ``k`` sequences per prompt, with replacement, in proportion to the
    normalised importance weights (self-normalised importance resampling).

    ``generations`` is what ``proc.generations(out)`` returned for a processor
    built with ``track_weights=True``. Only finished sequences can be drawn.
    Returns new :class:`Generation` objects (same ``prompt_index``) holding the
    drawn :class:`Sequence` objects. Warns when the weights of a call were not
    exact (see :class:`WeightSetting`). As the number of samples per prompt
    grows, the drawn sequences follow p(x | x in L).
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive int (sequences to draw per prompt), not {k!r}")
    if isinstance(generations, Generation):
        generations = [generations]
    if isinstance(generations, (str, bytes, dict)) or not hasattr(generations, "__iter__") or \
            isinstance(generations, torch.Tensor):
        generations = [generations]  # reported below with what it is
    generations = list(generations)
    for gen in generations:
        if not isinstance(gen, Generation):
            raise TypeError(
                f"resample() takes proc.generations(out) (a list of Generation), not a "
                f"{type(gen).__name__}: call resample(proc.generations(out), k) with generate()'s output")
    rng = np.random.default_rng(seed)
    result, inexact = [], set()
    for gen in generations:
        setting = getattr(gen, "weight_setting", None)
        if setting is not None and not setting.exact:
            inexact.add(setting.describe())
        w = np.array(normalized_weights(gen))
        picks = rng.choice(len(w), size=int(k), replace=True, p=w)
        result.append(Generation(prompt_index=gen.prompt_index,
                                 sequences=[gen.sequences[i] for i in picks.tolist()]))
    for why in sorted(inexact):
        warnings.warn(f"resampling with weights that are {why}", stacklevel=2)
    return result


__all__ = ["WeightSetting", "weight_setting", "log_mass", "log_mass_before", "WeightTracker",
           "normalized_weights", "effective_sample_size", "resample"]
