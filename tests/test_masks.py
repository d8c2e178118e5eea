"""Both mask layouts (packed bits for accelerators, sparse id lists for CPU) on CPU:
bit-identical masked scores against a dense reference, on random states and
logits widths (padded vocabularies included), and an end-to-end generate per layout."""

import re

import numpy as np
import pytest
import regex
import torch

from hf_constrained import RegexProcessor
from hf_constrained.constraint import FINISHED
from hf_constrained.masks import LAYOUTS, PackedMasks, SparseMasks, default_layout, make_masks

KEY_VALUE = r"[a-z]{1,4}=[^;]{0,40};"  # [a-z]: allowed list shorter; [^;]: banned list shorter


def _walk_states(proc, rows, steps, seed):
    """Per step, the states of ``rows`` random token walks (EOS only once accepting,
    so rows finish; a few rows are sent dead with a token the state bans)."""
    rng = np.random.default_rng(seed)
    states = np.full(rows, proc._starts[0], dtype=np.int64)
    out = [states]
    for _ in range(steps):
        tokens = np.empty(rows, dtype=np.int64)
        for r, s in enumerate(states):
            allowed = proc.index.allowed(int(s if s > 0 else FINISHED))
            tokens[r] = rng.choice(allowed) if rng.random() > 0.05 else 0  # 0: BOS, never allowed
        states = proc.index.next_states(states, tokens)
        out.append(states)
    return out


def _dense_reference(proc, scores, states):
    # dead rows share the finished rows' mask (EOS and pad), so no row is ever all -inf
    allowed = np.stack([proc.index.allowed_mask(int(s) if s > 0 else FINISHED, scores.shape[-1])
                        for s in states])
    return scores.masked_fill(~torch.from_numpy(allowed), float("-inf"))


@pytest.fixture(scope="module")
def kv_proc(deepseek):
    return RegexProcessor(KEY_VALUE, deepseek, cache_dir=False)


@pytest.fixture(scope="module")
def walk(kv_proc):
    walk = _walk_states(kv_proc, rows=24, steps=14, seed=1)
    assert (walk[-1] == FINISHED).any() and (walk[-1] == 0).any()
    return walk


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("inplace", [True, False])
@pytest.mark.parametrize("pad", [0, 77], ids=["tokenizer-width", "padded-width"])
def test_both_layouts_equal_dense_reference(deepseek, kv_proc, walk, dtype, inplace, pad):
    width = len(deepseek) + pad
    tables = {name: make_masks(name, kv_proc.constraint, width, torch.device("cpu")) for name in LAYOUTS}
    kinds = set()
    gen = torch.Generator().manual_seed(0)
    for states in walk:
        base = (torch.randn(len(states), width, generator=gen) * 5).to(dtype)
        ref = _dense_reference(kv_proc, base, states)
        outs = {}
        for name, table in tables.items():
            scores = base.clone()
            out = table.apply(scores, states, inplace)
            assert out.dtype == dtype and out.shape == scores.shape
            assert torch.equal(out, ref), name
            if inplace:
                assert out.data_ptr() == scores.data_ptr()
            else:
                assert torch.equal(scores, base) and out.data_ptr() != scores.data_ptr()
            assert torch.isneginf(out[:, len(deepseek):]).all()
            outs[name] = out
        # bit-identical, not just equal as floats (-0.0 / NaN payloads)
        assert torch.equal(outs["packed"].view(torch.int16 if dtype != torch.float32 else torch.int32),
                           outs["sparse"].view(torch.int16 if dtype != torch.float32 else torch.int32))
        sparse = tables["sparse"]
        kinds |= set(sparse.keep[sparse.host_rows(states)].tolist())
    assert kinds == {True, False}  # both sparse list kinds were exercised


def test_random_widths_and_states(deepseek, kv_proc, walk):
    """Widths that are no multiple of 8, padded by a few or many ids; rows in random order."""
    rng = np.random.default_rng(7)
    all_states = np.concatenate(walk)
    for extra in (1, 3, 5, 8, 13, 200):
        width = len(deepseek) + extra
        tables = [make_masks(name, kv_proc.constraint, width, "cpu") for name in LAYOUTS]
        for _ in range(3):
            states = rng.choice(all_states, size=int(rng.integers(1, 40)))
            base = torch.from_numpy(rng.standard_normal((len(states), width)).astype(np.float32))
            ref = _dense_reference(kv_proc, base, states)
            for table in tables:
                assert torch.equal(table.apply(base.clone(), states, True), ref), (table.name, width)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_uniform_steps_and_strided_scores(deepseek, layout):
    """Steps where every row stores an allowed list, or every row a banned list,
    or only dead/finished rows; and logits that are a strided view."""
    proc = RegexProcessor(KEY_VALUE, deepseek, cache_dir=False)
    width = len(deepseek)
    eq = deepseek.convert_tokens_to_ids("=")
    start = int(proc._starts[0])
    key = int(proc.index.next_states([start], [deepseek.convert_tokens_to_ids("ab")])[0])
    value = int(proc.index.next_states([key], [eq])[0])
    masks = make_masks(layout, proc.constraint, width, "cpu")
    for inplace in (True, False):
        for states in ([start] * 5, [value] * 5, [0, FINISHED, 0], [value, start, 0, key, FINISHED, value]):
            states = np.array(states, dtype=np.int64)
            big = torch.randn(len(states), 2, width)
            scores = big[:, 1, :]  # not contiguous, as logits[:, -1, :] without a copy
            before = scores.clone()
            out = masks.apply(scores, states, inplace)
            assert torch.equal(out, _dense_reference(proc, before, states))
            assert torch.isfinite(out).any(-1).all()
    if layout == "sparse":
        assert masks.keep[masks.host_rows(np.array([start, key]))].all()  # allowed lists
        assert not masks.keep[masks.host_rows(np.array([value]))].any()  # banned list


def test_layout_selection(deepseek):
    assert default_layout(torch.device("cpu")) == "sparse"
    assert default_layout(torch.device("meta")) == "packed"
    with pytest.raises(ValueError, match="mask_layout must be 'packed' or 'sparse'"):
        RegexProcessor(r"a", deepseek, cache_dir=False, mask_layout="dense")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_generate_end_to_end_per_layout(deepseek, deepseek_model, layout):
    pats = [r"\d{4}-\d{2}-\d{2}", r"[a-z]{1,8}@[a-z]{1,6}\.(com|org)"]
    proc = RegexProcessor(pats, deepseek, cache_dir=False, mask_layout=layout)
    torch.manual_seed(0)
    inputs = deepseek(["Date:", "Mail:"], return_tensors="pt", padding=True)
    out = deepseek_model.generate(**inputs, logits_processor=[proc], do_sample=True,
                                  num_return_sequences=3, max_new_tokens=30)
    assert isinstance(proc._masks, {"packed": PackedMasks, "sparse": SparseMasks}[layout])
    finished = 0
    for g in proc.generations(out):
        for s in g.sequences:
            if s.finished:
                finished += 1
                assert re.fullmatch(pats[g.prompt_index], s.text), s.text
            else:
                assert regex.fullmatch(pats[g.prompt_index], s.text, partial=True), s.text
    assert finished >= 3
    ids, tracked = proc.tracked_states()
    assert np.array_equal(tracked, proc.states_from_tokens(ids))
    beams = deepseek_model.generate(**inputs, logits_processor=[proc], num_beams=3,
                                    num_return_sequences=2, max_new_tokens=30)
    texts = proc.decode(beams)
    assert all(re.fullmatch(pats[b], texts[s][b]) for s in range(2) for b in range(2)), texts
