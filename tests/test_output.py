"""Output shaping ((samples, batch) grids) and log-probabilities, on hand-made tensors
and on real generate() outputs."""

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from hf_constrained import GenerationConflictError, RegexProcessor
from hf_constrained.output import (build_generations, generated_ids, reshape_samples, squeeze_grid,
                                   to_grid, token_logprobs)


def test_reshape_samples_is_prompt_major():
    rows = torch.arange(12).reshape(6, 2)  # 3 prompts x 2 samples
    grid = reshape_samples(rows, 3)
    assert grid.shape == (2, 3, 2)
    for s in range(2):
        for p in range(3):
            assert torch.equal(grid[s, p], rows[p * 2 + s])
    assert reshape_samples(torch.arange(3), 3).shape == (1, 3)  # singletons kept
    with pytest.raises(GenerationConflictError, match="cannot split 5 output rows evenly into 2"):
        reshape_samples(torch.arange(5), 2)
    with pytest.raises(GenerationConflictError):
        reshape_samples(torch.arange(4), 0)


def test_grid_and_squeeze():
    items = [f"p{p}s{s}" for p in range(2) for s in range(3)]
    grid = to_grid(items, 2)
    assert grid == [["p0s0", "p1s0"], ["p0s1", "p1s1"], ["p0s2", "p1s2"]]
    assert squeeze_grid(grid) is grid
    assert squeeze_grid(to_grid(["a", "b", "c"], 1)) == ["a", "b", "c"]
    assert squeeze_grid(to_grid(["a", "b", "c"], 3)) == ["a", "b", "c"]
    assert squeeze_grid(to_grid(["a"], 1)) == "a"
    with pytest.raises(GenerationConflictError, match="pass num_prompts="):
        to_grid(items, 4)


def test_generated_ids_eos_and_padding():
    seqs = torch.tensor([
        [9, 9, 4, 5, 2, 1, 1],   # EOS kept, what follows dropped
        [9, 9, 4, 1, 1, 1, 1],   # no EOS: trailing pads dropped
        [9, 9, 4, 5, 6, 7, 8],   # cut off: all kept
        [9, 9, 3, 2, 2, 2, 2],   # a second EOS id
    ])
    assert generated_ids(seqs, 2, [2, 3], pad_token_id=1) == [[4, 5, 2], [4], [4, 5, 6, 7, 8], [3]]
    # pad == eos: the first EOS ends the row
    assert generated_ids(torch.tensor([[9, 4, 1, 1]]), 1, [1], pad_token_id=1) == [[4, 1]]
    # no pad id: nothing stripped
    assert generated_ids(torch.tensor([[9, 4, 1, 1]]), 1, [2], pad_token_id=None) == [[4, 1, 1]]


def test_token_logprobs_follow_rows_and_beams():
    gen = torch.Generator().manual_seed(0)
    scores = tuple(torch.randn(3, 6, generator=gen) for _ in range(3))
    ids = [[1, 2, 3], [4, 5], [0, 1, 2, 3]]  # the last row is longer than the scores
    lp = token_logprobs(SimpleNamespace(scores=scores), ids)
    for r, row in enumerate(ids):
        want = [torch.log_softmax(scores[t][r], -1)[tok].item() for t, tok in enumerate(row[:3])]
        assert lp[r] == pytest.approx(want)
    beam_indices = torch.tensor([[2, 0, -1], [1, 1, 1], [0, 2, 1]])
    lpb = token_logprobs(SimpleNamespace(scores=scores, beam_indices=beam_indices), ids)
    assert lpb[0] == pytest.approx([torch.log_softmax(scores[0][2], -1)[1].item(),
                                    torch.log_softmax(scores[1][0], -1)[2].item()])  # stops at -1
    assert lpb[1] == pytest.approx([torch.log_softmax(scores[t][1], -1)[tok].item() for t, tok in enumerate([4, 5])])
    assert token_logprobs(SimpleNamespace(scores=None), ids) is None
    assert token_logprobs(torch.zeros(2, 2), ids) is None  # a plain tensor has no scores
    # masked scores: -inf tokens get no mass, allowed ones renormalise
    masked = (torch.tensor([[0.0, float("-inf"), 0.0]]),)
    assert token_logprobs(SimpleNamespace(scores=masked), [[2]])[0][0] == pytest.approx(math.log(0.5))


def test_build_generations():
    gens = build_generations([[1, 2], [3], [4], [5, 6]], ["a", "b", "c", "d"], [True, False, True, True],
                             [[-1.0, -2.0], [-0.5], [0.0], [-1.0, -1.0]], 2)
    assert [g.prompt_index for g in gens] == [0, 1]
    assert [g.texts for g in gens] == [["a", "b"], ["c", "d"]]
    assert gens[0].sequences[0].logprob == -3.0 and gens[0].sequences[1].truncated
    no_lp = build_generations([[1]], ["a"], [True], None, 1)
    assert no_lp[0].sequences[0].logprobs is None and no_lp[0].sequences[0].logprob is None
    with pytest.raises(GenerationConflictError, match="cannot split 3 output rows evenly into 2"):
        build_generations([[1]] * 3, ["a"] * 3, [True] * 3, None, 2)


def test_generations_logprobs_are_the_constrained_distribution(local_tok, local_model):
    proc = RegexProcessor(r"(yes|no|maybe)", local_tok, cache_dir=False)
    torch.manual_seed(0)
    inputs = local_tok(["Q:", "Another Q:"], return_tensors="pt", padding=True)
    out = local_model.generate(**inputs, logits_processor=[proc], do_sample=True, num_return_sequences=3,
                               max_new_tokens=6, output_scores=True, return_dict_in_generate=True)
    p = inputs["input_ids"].shape[1]
    gens = proc.generations(out)
    assert len(gens) == 2 and all(len(g.sequences) == 3 for g in gens)
    for g in gens:
        for s_i, s in enumerate(g.sequences):
            r = g.prompt_index * 3 + s_i
            assert s.token_ids == out.sequences[r, p: p + len(s.token_ids)].tolist()
            want = [torch.log_softmax(out.scores[t][r].float(), -1)[tok].item() for t, tok in enumerate(s.token_ids)]
            assert s.logprobs == pytest.approx(want) and np.isfinite(s.logprobs).all()
            assert s.logprob == pytest.approx(sum(want))
            # the constrained distribution: banned tokens hold no probability
            allowed = torch.isfinite(out.scores[0][r])
            assert allowed.sum() < len(local_tok) and torch.softmax(out.scores[0][r], -1)[~allowed].sum() == 0


@pytest.mark.parametrize("mode", [dict(), dict(do_sample=True, num_return_sequences=3),
                                  dict(num_beams=2), dict(num_beams=3, num_return_sequences=2),
                                  dict(num_beams=2, do_sample=True)],
                         ids=["greedy", "samples", "beam", "beam-2-of-3", "beam-sampling"])
def test_decode_after_inputs_embeds(local_tok, mode):
    """generate(inputs_embeds=...) hands the processor no prompt columns: decode() of a
    beam output (fewer rows than the call ran) crashed in a reshape of 0 columns, and a
    later input_ids call's output matched the embeds call too (0 prompt columns match
    anything), so its decode() raised a conflict that num_prompts= could not settle."""
    import re

    import regex

    from hf_constrained.offline import tiny_model

    local_tok.padding_side = "left"
    model = tiny_model(local_tok, "llama")
    pattern = r"(19|20)[0-9]{2}-[0-9]{2}-[0-9]{2}"
    proc = RegexProcessor(pattern, local_tok)
    inputs = local_tok(["Date:", "Year"], return_tensors="pt", padding=True)
    embeds = model.get_input_embeddings()(inputs["input_ids"])
    torch.manual_seed(0)
    out = model.generate(inputs_embeds=embeds, attention_mask=inputs["attention_mask"],
                         logits_processor=[proc], max_new_tokens=16, **mode)
    texts = proc.decode(out)
    samples = mode.get("num_return_sequences", 1)
    grid = texts if samples > 1 else [texts]
    assert len(grid) == samples and all(len(row) == 2 for row in grid)
    assert all(re.fullmatch(pattern, t) for row in grid for t in row), texts
    # a later beam call (rows reordered), short enough to fit the embeds call's length
    later = model.generate(**inputs, logits_processor=[proc], max_new_tokens=2, num_beams=2)
    assert later.shape[1] <= out.shape[1] + 1       # what made the embeds call match it
    assert proc.decode(later, num_prompts=2) == proc.decode(later)
    assert len(proc.decode(later)) == 2
    assert all(regex.fullmatch(pattern, t, partial=True) for t in proc.decode(later))
