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
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .errors import GenerationConflictError


def reshape_samples(tensor: torch.Tensor, num_prompts: int) -> torch.Tensor:
    """Reshape a per-row tensor ``(num_prompts * n, ...)`` to ``(n, num_prompts, ...)``.

    Works for token ids, ``sequences_scores`` or any tensor whose first
    dimension enumerates generate's output rows. Singleton dimensions are kept.
    """
    rows = tensor.shape[0]
    if num_prompts <= 0 or rows % num_prompts:
        raise GenerationConflictError(
            f"cannot split {rows} output rows evenly into {num_prompts} prompts; "
            "pass the number of prompts you gave generate()")
    n = rows // num_prompts
    return tensor.reshape(num_prompts, n, *tensor.shape[1:]).transpose(0, 1)


def to_grid(items: list, num_prompts: int) -> list:
    """Flat prompt-major list -> nested list ``[sample][prompt]``."""
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
    ``log_weight`` are exact for, a :class:`hf_constrained.weights.WeightSetting`."""

    prompt_index: int
    sequences: list = field(default_factory=list)
    weight_setting: object = None

    @property
    def texts(self) -> list:
        return [s.text for s in self.sequences]
