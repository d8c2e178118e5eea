"""Shaping generate() output as (samples, batch) and richer per-sequence results.

transformers lays out the rows of a batched ``generate()`` prompt-major: the
``n`` samples (or returned beams) of prompt 0 first, then those of prompt 1,
and so on. These helpers turn that flat layout into ``(n_samples, n_batch, ...)``.

>>> import torch
>>> rows = torch.arange(6)            # 2 prompts x 3 samples, prompt-major
>>> reshape_samples(rows, 2)
tensor([[0, 3],
        [1, 4],
        [2, 5]])
>>> squeeze_grid([["a", "b"]]), squeeze_grid([["a"], ["b"]]), squeeze_grid([["a"]])
(['a', 'b'], ['a', 'b'], 'a')
>>> generated_ids(torch.tensor([[9, 4, 2, 1], [9, 5, 1, 1]]), 1, eos_token_ids=[2], pad_token_id=1)
[[4, 2], [5]]
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .errors import GenerationConflictError


def reshape_samples(tensor: torch.Tensor, num_prompts: int) -> torch.Tensor:
    """Reshape a per-row tensor ``(num_prompts * n, ...)`` to ``(n, num_prompts, ...)``.

    Works for token ids, ``sequences_scores`` or any tensor whose first
    dimension enumerates generate's output rows. Singleton dimensions are kept.

    >>> reshape_samples(torch.zeros(6, 4), 3).shape
    torch.Size([2, 3, 4])
    """
    rows = tensor.shape[0]
    if num_prompts <= 0 or rows % num_prompts:
        raise GenerationConflictError(
            f"cannot split {rows} output rows evenly into {num_prompts} prompts; "
            "pass the number of prompts you gave generate()")
    n = rows // num_prompts
    return tensor.reshape(num_prompts, n, *tensor.shape[1:]).transpose(0, 1)


def to_grid(items: list, num_prompts: int) -> list:
    """Flat prompt-major list -> nested list ``[sample][prompt]``.

    >>> to_grid(["a0", "a1", "b0", "b1"], 2)
    [['a0', 'b0'], ['a1', 'b1']]
    """
    rows = len(items)
    if num_prompts <= 0 or rows % num_prompts:
        raise GenerationConflictError(
            f"cannot split {rows} output rows evenly into {num_prompts} prompts; "
            "pass num_prompts= with the number of prompts you gave generate()")
    n = rows // num_prompts
    return [[items[p * n + s] for p in range(num_prompts)] for s in range(n)]


def squeeze_grid(grid: list):
    """Drop singleton dimensions of a ``[sample][prompt]`` grid.

    1 x 1 gives the item, n x 1 a list over samples, 1 x b a list over prompts.

    >>> squeeze_grid([["a0", "b0"], ["a1", "b1"]])
    [['a0', 'b0'], ['a1', 'b1']]
    """
    n, b = len(grid), len(grid[0]) if grid else 0
    if n == 1 and b == 1:
        return grid[0][0]
    if b == 1:
        return [row[0] for row in grid]
    if n == 1:
        return list(grid[0])
    return grid


@dataclass
class Sequence:
    """One sample or one returned beam.

    ``token_ids`` are the generated ids without padding (the EOS is kept if one
    was emitted); ``text`` is what ``tokenizer.decode(..., skip_special_tokens=True)``
    shows. ``finished`` is True when the sequence ended with EOS in an accepting
    state (a full match); ``truncated`` when ``max_new_tokens`` cut it off before
    that (its text is then a valid prefix of a match). ``logprobs`` (one per
    token id) and ``logprob`` (their sum) are filled when generate was called
    with ``output_scores=True, return_dict_in_generate=True``. ``log_weight``
    (processors built with ``track_weights=True``) is the sum over steps of the
    log of the probability mass the allowed tokens had: the log importance
    weight ``log p(x) - log q(x)`` that :func:`hf_constrained.resample` uses.

    >>> s = Sequence(token_ids=[4, 2], text="4", finished=False)
    >>> s.truncated
    True
    """

    token_ids: list
    text: str
    finished: bool
    logprobs: list | None = None
    logprob: float | None = None
    log_weight: float | None = None

    @property
    def truncated(self) -> bool:
        return not self.finished


@dataclass
class Generation:
    """All sequences generated for one prompt (``prompt_index`` in batch order).
    ``weight_setting`` (with ``track_weights=True``): what the sequences'
    ``log_weight`` are exact for, a :class:`hf_constrained.weights.WeightSetting`.

    >>> Generation(0, [Sequence([4], "x", True), Sequence([5], "y", True)]).texts
    ['x', 'y']
    """

    prompt_index: int
    sequences: list = field(default_factory=list)
    weight_setting: object = None

    @property
    def texts(self) -> list:
        return [s.text for s in self.sequences]


def generated_ids(seqs: torch.Tensor, prompt_len: int, eos_token_ids, pad_token_id=None) -> list:
    """Per output row: the generated ids up to and including the first EOS; a row
    without EOS loses its trailing pad ids (generate() pads finished rows).

    >>> generated_ids(torch.tensor([[7, 3, 2, 0], [7, 3, 0, 0]]), 1, eos_token_ids=[2], pad_token_id=0)
    [[3, 2], [3]]
    """
    eos = {int(e) for e in eos_token_ids}
    rows = []
    for row in seqs[:, prompt_len:].tolist():
        ids = []
        for t in row:
            ids.append(t)
            if t in eos:
                break
        if ids and ids[-1] not in eos and pad_token_id is not None:
            while ids and ids[-1] == pad_token_id:
                ids.pop()
        rows.append(ids)
    return rows


def token_logprobs(out, gen: list):
    """Per row of ``gen`` (as from :func:`generated_ids`), the log-probability of
    each token under the scores generate() returned (``output_scores=True``),
    following ``beam_indices`` for beam search; None without scores.

    >>> from types import SimpleNamespace
    >>> scores = (torch.tensor([[0.0, 0.0], [0.0, float("-inf")]]),)   # step 0, rows 0 and 1
    >>> token_logprobs(SimpleNamespace(scores=scores), [[1], [0]])
    [[-0.6931471824645996], [0.0]]
    """
    scores = getattr(out, "scores", None)
    if not scores:
        return None
    beam_indices = getattr(out, "beam_indices", None)
    cache: dict = {}
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
            key = (t, row)
            if key not in cache:
                cache[key] = torch.log_softmax(scores[t][row].float(), -1)
            lps.append(float(cache[key][tok]))
        result.append(lps)
    return result


def build_generations(gen: list, texts: list, finished: list, logprobs, num_prompts: int,
                      log_weights=None, weight_setting=None) -> list:
    """One :class:`Generation` per prompt from prompt-major per-row results.

    >>> g = build_generations([[4, 2], [5]], ["x", "y"], [True, False], None, 1)
    >>> [(s.text, s.finished) for s in g[0].sequences]
    [('x', True), ('y', False)]
    """
    if num_prompts <= 0 or len(gen) % num_prompts:
        raise GenerationConflictError(
            f"cannot split {len(gen)} output rows evenly into {num_prompts} prompts; "
            "pass num_prompts= with the number of prompts you gave generate()")
    per = len(gen) // num_prompts
    result = []
    for p in range(num_prompts):
        g = Generation(prompt_index=p, weight_setting=weight_setting)
        for s in range(per):
            r = p * per + s
            lp = logprobs[r] if logprobs is not None else None
            g.sequences.append(Sequence(token_ids=gen[r], text=texts[r], finished=bool(finished[r]),
                                        logprobs=lp, logprob=None if lp is None else float(sum(lp)),
                                        log_weight=None if log_weights is None else log_weights[r]))
        result.append(g)
    return result
