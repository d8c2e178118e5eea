"""The shell's one-row fast path (issue 12) is pinned to the general path.

Tracking: a one-row step whose prefix is the previous step's ids is verified by
one exact comparison instead of row hashes; every other step (rollback, changed
prefix, skipped tokens, unknown ancestry) takes the general path. Masks: one
row is masked with a ready id list (sparse) or a sliced table row (packed).
Each is checked against the general path and an independent oracle (the
constraint's walk from scratch, a dense reference mask), bit for bit."""

import re

import numpy as np
import pytest
import regex
import torch

from hf_constrained import RegexProcessor, hf_internals
from hf_constrained.constraint import FINISHED
from hf_constrained.masks import LAYOUTS, SparseMasks, make_masks
from hf_constrained.offline import tiny_model
from hf_constrained.regex_constraint import RegexConstraint
from hf_constrained.tracking import Run, _hash, _powers

# an accelerator, when there is one, runs the same checks (the one-packet branch of tracking)
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
KEY_VALUE = r"[a-z]{1,4}=[^;]{0,40};"  # [a-z]: allowed list shorter; [^;]: banned list shorter


@pytest.fixture(scope="module")
def kv(deepseek):
    return RegexConstraint.from_tokenizer([KEY_VALUE], deepseek)


def _steps(kv, rng, n, prompt):
    """``n`` one-row input_ids: mostly one allowed token more, sometimes a rollback,
    a changed earlier token, two tokens at once, a banned token or EOS."""
    gen, out = [], []
    for _ in range(n):
        u = rng.random()
        if u < 0.1 and len(gen) > 1:  # rollback by 1-3 tokens (assisted decoding)
            del gen[-int(rng.integers(1, min(3, len(gen)) + 1)):]
        elif u < 0.18 and gen:  # an earlier token differs: same length + 1, not a continuation
            gen[int(rng.integers(len(gen)))] = int(rng.integers(1, 20000))
            gen.append(int(rng.integers(1, 20000)))
        else:
            for _ in range(2 if u > 0.95 else 1):  # sometimes two tokens at once
                state = int(kv.walk(kv.starts[:1], np.array([gen], dtype=np.int64))[0] if gen else kv.starts[0])
                allowed = kv.allowed_ids(state if state > 0 else FINISHED)
                gen.append(int(rng.choice(allowed)) if rng.random() > 0.05 else 0)  # 0: never allowed
        out.append(torch.tensor([prompt + gen]))
    return out


def _same_record(a: Run, b: Run):
    assert len(a.hist) == len(b.hist)
    for (pa, sa), (pb, sb) in zip(a.hist[1:], b.hist[1:]):
        assert np.array_equal(pa, pb) and np.array_equal(sa, sb)
    assert torch.equal(a.last_ids, b.last_ids)
    assert (a.last_hash is None) == (b.last_hash is None)
    if a.last_hash is not None:
        assert torch.equal(a.last_hash, b.last_hash)
    assert (a.record.hash_len, a.record.max_len) == (b.record.hash_len, b.record.max_len)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("seed", range(4))
def test_tracking_fast_path_equals_general_path(kv, seed, device):
    """Random one-row walks with rollbacks, changed prefixes and skips: the fast path
    records exactly what the general path records, and both agree with a walk from scratch."""
    rng = np.random.default_rng(seed)
    prompt = [7, 8, 9]
    start = torch.tensor([prompt], device=device)
    fast = Run(kv, start, None, num_prompts=1)
    slow = Run(kv, start, None, num_prompts=1)
    taken, one = [], fast._advance_one

    def spy(ids):
        res = one(ids)
        taken.append(res is not None)
        return res

    fast._advance_one = spy
    for ids in _steps(kv, rng, 80, prompt):
        ids = ids.to(device)
        got, ref = fast.advance(ids), slow._advance_rows(ids)
        assert np.array_equal(got, ref)
        assert np.array_equal(got, kv.walk(kv.starts[:1], ids[:, len(prompt):].cpu().numpy()))
        _same_record(fast, slow)
        if fast.last_hash is not None:  # (a step that skipped tokens keeps none, on both paths)
            assert torch.equal(fast.last_hash, _hash(ids, _powers(ids.shape[1], ids.device)))  # the definition
    assert fast.record.identifies(torch.cat([ids, ids[:, -1:]], 1))  # what decode() relies on
    assert sum(taken) > 40 and not all(taken)  # both paths really ran


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("seed", range(3))
def test_row_hash_left_to_its_first_read(kv, seed, device):
    """A one-row step leaves the row hash to be computed when read (by a later general
    step, by decode()). Not read between steps, the general steps that follow fast ones
    still find their parents (the records, parents included, equal the general path's),
    and a closed run's record holds the hash, not the ids."""
    rng = np.random.default_rng(100 + seed)
    prompt = [7, 8, 9]
    start = torch.tensor([prompt], device=device)
    fast = Run(kv, start, None, num_prompts=1)
    slow = Run(kv, start, None, num_prompts=1)
    for ids in _steps(kv, rng, 80, prompt):
        ids = ids.to(device)
        assert np.array_equal(fast.advance(ids), slow._advance_rows(ids))
    _same_record(fast, slow)
    if slow.last_hash is not None:  # (none after a step that skipped tokens, on both paths)
        assert fast.record.identifies(torch.cat([ids, ids[:, -1:]], 1))
    fast.advance(torch.cat([ids, ids[:, -1:]], 1))  # a fast step (or not), its hash unread
    slow._advance_rows(torch.cat([ids, ids[:, -1:]], 1))
    fast.close()
    assert fast.record._pending is None
    assert (fast.record.last_hash is None) == (slow.record.last_hash is None)
    if slow.record.last_hash is not None:
        assert torch.equal(fast.record.last_hash, slow.record.last_hash)


def test_row_hash_of_a_fast_step_computed_once(monkeypatch, kv):
    """The run and its record both wait for a fast step's row hash: the first read
    (a later general step, ``close()``) computes it once for both."""
    from hf_constrained import tracking

    prompt = [7, 8, 9]
    token = int(kv.allowed_ids(int(kv.starts[0]))[0])
    hashed, real = [], tracking._hash
    monkeypatch.setattr(tracking, "_hash", lambda ids, pw: hashed.append(ids) or real(ids, pw))
    for read in ("run", "close"):
        hashed.clear()
        run = Run(kv, torch.tensor([prompt]), None, num_prompts=1)
        ids = torch.tensor([prompt + [token]])
        assert run._advance_one(ids) is not None and run.record._pending is not None
        h = run.last_hash if read == "run" else (run.close(), run.record.last_hash)[1]
        assert run.record._pending is None and len(hashed) == 1
        assert torch.equal(run.record.last_hash, h) and torch.equal(h, real(ids, _powers(4, ids.device)))
        if read == "run":
            assert run.record.last_hash is run.last_hash


def test_changed_prefix_is_not_taken_as_a_continuation(deepseek):
    """Same length + 1 but an earlier token differs: the state comes from the new tokens.
    Were the comparison skipped, the row would continue from the old state (here: dead)."""
    engine = RegexConstraint.from_tokenizer([r"(ab|cd)!"], deepseek)
    a, b, c, d = (deepseek.convert_tokens_to_ids(t) for t in "abcd")
    run = Run(engine, torch.tensor([[1]]), None, num_prompts=1)
    run.advance(torch.tensor([[1, a]]))
    state = run.advance(torch.tensor([[1, c, d]]))
    assert state[0] > 0 and state[0] == engine.walk(engine.starts[:1], np.array([[c, d]]))[0]
    assert engine.advance(engine.walk(engine.starts[:1], np.array([[a]])), np.array([d]))[0] <= 0
    assert run.hist[-1][0].tolist() == [-1]  # recomputed from its tokens, no parent


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_one_row_calls_by_tokens_keep_their_runs(monkeypatch, deepseek, kv, dtype):
    """Outside generate() (tracked by tokens), one-row calls of two prompts of the same
    length, interleaved: each call continues its own prompt's run (found by the prompt's
    bytes), takes the fast path after the first step, and masks its own state."""
    proc = RegexProcessor(KEY_VALUE, deepseek, cache_dir=False)
    width = len(deepseek)
    rng = np.random.default_rng(5)
    prompts, gens, runs = ([7, 8, 9], [7, 8, 10]), ([], []), [None, None]
    taken, one = [], Run._advance_one

    def spy(self, ids):
        res = one(self, ids)
        taken.append(res is not None)
        return res

    for step in range(24):
        for p in (0, 1):
            gen = gens[p]
            state = int(kv.walk(kv.starts[:1], np.array([gen], dtype=np.int64))[0]) if gen else int(kv.starts[0])
            out = proc(torch.tensor([prompts[p] + gen], dtype=dtype), torch.zeros(1, width))
            allowed = torch.from_numpy(kv.allowed_mask(state if state > 0 else FINISHED, width))
            assert torch.equal(torch.isfinite(out[0]), allowed), (step, p)
            if runs[p] is None:
                runs[p] = proc._run
            assert proc._run is runs[p], (step, p)  # its own run, not the other prompt's
            gen.append(int(rng.choice(kv.allowed_ids(state))) if state > 0 else 0)
            if step == 0 and p == 1:
                monkeypatch.setattr(Run, "_advance_one", spy)
    assert runs[0] is not runs[1] and len(taken) == 46 and all(taken)


def _walk_states(kv, rng, steps):
    states, q = [], int(kv.starts[0])
    for _ in range(steps):
        states.append(q)
        allowed = kv.allowed_ids(q if q > 0 else FINISHED)
        q = int(kv.advance(np.array([q]), np.array([rng.choice(allowed) if rng.random() > 0.05 else 0]))[0])
    return states + [0, FINISHED]


def _bits(t):
    return t.view(torch.int16 if t.element_size() == 2 else torch.int32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("pad", [0, 77], ids=["tokenizer-width", "padded-width"])
def test_one_row_masks_equal_general_path(deepseek, kv, layout, dtype, pad, device):
    """One row (contiguous or not, in place or not) equals row 0 of a two-row call of the
    general path and a dense reference, bit for bit; in-place semantics are kept."""
    width = len(deepseek) + pad
    table = make_masks(layout, kv, width, torch.device(device))
    gen = torch.Generator().manual_seed(1)
    kinds = set()
    for s in _walk_states(kv, np.random.default_rng(2), 30):
        base = (torch.randn(1, width, generator=gen) * 5).to(dtype).to(device)
        allowed = torch.from_numpy(kv.allowed_mask(s if s > 0 else FINISHED, width))[None].to(device)
        ref = base.masked_fill(~allowed, float("-inf"))
        two = table.apply(base.repeat(2, 1), np.array([s, s]), True)[:1]
        for inplace in (True, False):
            for contiguous in (True, False):
                scores = base.clone() if contiguous else base.repeat_interleave(2, 1)[:, ::2]
                assert scores.is_contiguous() == contiguous and torch.equal(scores, base)
                out = table.apply(scores, np.array([s]), inplace)
                assert torch.equal(_bits(out), _bits(ref)) and torch.equal(_bits(out), _bits(two))
                assert out.is_contiguous() or layout == "packed"  # sparse: a contiguous copy
                if inplace and (contiguous or layout == "packed"):
                    assert out.data_ptr() == scores.data_ptr()
                else:
                    assert out.data_ptr() != scores.data_ptr() and torch.equal(_bits(scores), _bits(base))
        if layout == "sparse":
            kinds.add(bool(table.keep[table.row(s)]))
    assert layout == "packed" or kinds == {True, False}  # allowed and banned lists both ran


def test_sparse_id_cache_limit(monkeypatch, deepseek, kv):
    """Past the cache limit, a row's ids are rebuilt from the gaps: the same masks."""
    width = len(deepseek)
    cached = make_masks("sparse", kv, width, torch.device("cpu"))
    monkeypatch.setattr(SparseMasks, "IDS_CACHE_BYTES", 0)
    uncached = make_masks("sparse", kv, width, torch.device("cpu"))
    for s in _walk_states(kv, np.random.default_rng(3), 20):
        base = torch.randn(1, width)
        a = cached.apply(base.clone(), np.array([s]), True)
        b = uncached.apply(base.clone(), np.array([s]), True)
        assert torch.equal(a, b)
        r = uncached.row(s)
        assert torch.equal(uncached.row_ids(r), torch.from_numpy(np.flatnonzero(
            kv.allowed_mask(s if s > 0 else FINISHED, width) == bool(uncached.keep[r]))))
    assert cached._ids and not uncached._ids


@pytest.mark.parametrize("mode", ["greedy", "assistant"])
def test_one_row_generate_takes_the_fast_path(monkeypatch, deepseek, deepseek_model, mode):
    """Inside generate() (one row; with an assistant model, rollbacks too): outputs match,
    the tracked states equal a recomputation, and the fast path did the usual steps."""
    proc = RegexProcessor(r"[a-z]{2,6}-\d{2,4}", deepseek, cache_dir=False)
    calls, one = [], Run._advance_one

    def spy(self, ids):
        calls.append(one(self, ids))
        return calls[-1]

    monkeypatch.setattr(Run, "_advance_one", spy)
    kw = dict(assistant_model=tiny_model(deepseek, "llama", seed=7)) if mode == "assistant" else {}
    inputs = deepseek(["Code: ab-12 cd-345"], return_tensors="pt")
    assert hf_internals._find_generation_config() is None
    out = deepseek_model.generate(**inputs, logits_processor=[proc], max_new_tokens=12, do_sample=False, **kw)
    assert proc._run.config_ref is not None and proc._run.inplace
    text = proc.decode(out)
    if deepseek.eos_token_id in out[0, inputs["input_ids"].shape[1]:].tolist():
        assert re.fullmatch(r"[a-z]{2,6}-\d{2,4}", text), text
    else:
        assert regex.fullmatch(r"[a-z]{2,6}-\d{2,4}", text, partial=True), text
    ids, tracked = proc.tracked_states()
    assert np.array_equal(tracked, proc.states_from_tokens(ids))
    assert sum(c is not None for c in calls) >= 1


def test_nonzero_of_short_and_long_lists():
    """The word-wise search of short id lists equals np.flatnonzero (any width, any density)."""
    from hf_constrained.masks import _nonzero

    rng = np.random.default_rng(4)
    for width in (1, 7, 8, 63, 64, 1001, 129280, 129357):
        for frac in (0.0, 0.001, 0.01, 0.2, 0.9):
            mask = rng.random(width) < frac
            mask[rng.integers(width)] = rng.random() < 0.5  # the last word, the tail
            for m in (mask, mask[::-1], ~mask):
                got = _nonzero(m, int(np.count_nonzero(m)))
                assert got.dtype == np.int64 and np.array_equal(got, np.flatnonzero(m))
