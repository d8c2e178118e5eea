"""A processor's first call and its constructor, made cheaper (issue #12, part 19): each
shortcut against the general path it skips."""

import numpy as np
import pytest
import torch
import transformers

from hf_constrained import RegexProcessor, hf_internals
from hf_constrained.errors import GenerationConflictError
from hf_constrained.tracking import Calls, Run, count_prompts


def test_count_prompts_of_one_row_skips_the_device_but_not_the_checks(monkeypatch):
    one = torch.tensor([[5, 6, 7]])
    monkeypatch.setattr(torch.Tensor, "cpu", lambda self: pytest.fail("a device copy for one row"))
    assert count_prompts(one, None, 1, False) == 1
    assert count_prompts(one, None, 1, True) == 1
    with pytest.raises(GenerationConflictError, match="got 2 patterns but generate\\(\\) was given 1 prompts"):
        count_prompts(one, None, 2, True)
    monkeypatch.undo()
    # two rows still compare their rows
    assert count_prompts(torch.tensor([[5, 6], [5, 7]]), None, 1, False) == 2
    assert count_prompts(torch.tensor([[5, 6], [5, 6]]), None, 1, False) == 1
    assert count_prompts(torch.tensor([[5, 6], [5, 7]]), None, 2, True) == 2


def test_the_record_keeps_the_prompt_while_the_run_steps(local_tok):
    proc = RegexProcessor(r"[ab]{1,6}", local_tok, cache_dir=False)
    a, b = (local_tok.convert_tokens_to_ids(t) for t in ("a", "b"))
    prompt = torch.tensor([[3, 4]])
    ids = prompt.clone()
    width = len(local_tok)
    for t in (a, b, a, b):
        proc(ids, torch.zeros(1, width))
        ids = torch.cat([ids, torch.tensor([[t]])], 1)
    run = proc._run
    assert torch.equal(run.record.prompt_ids, prompt)
    got_ids, states = proc.tracked_states()
    got_ids.fill_(99)  # a copy: the run's own ids are not the caller's to write
    assert torch.equal(run.last_ids[:, :2], prompt) and int(run.last_ids[0, -1]) == a
    assert np.array_equal(states, proc.states_from_tokens(ids[:, :-1]))
    # decode() finds the call by its prompt columns
    assert proc.decode(ids) == "abab"


def test_the_record_and_the_first_ids_are_not_the_callers_tensor():
    class One:
        starts = np.array([1])
    ids = torch.tensor([[1, 2]])
    run = Run(One(), ids, None, num_prompts=1)
    ids.fill_(0)
    assert run.record.prompt_ids.tolist() == [[1, 2]] and run.last_ids.tolist() == [[1, 2]]
    calls = Calls()
    got, new = calls.run_for(torch.tensor([[1, 2]]), None, lambda: run)
    assert new and got is run


def test_transformers_major_version_read_once():
    assert hf_internals._TRANSFORMERS_4 == transformers.__version__.startswith("4.")
    assert hf_internals._in_slicing_pipeline() is False  # called from a test, never a pipeline


# ---------------------------------------------------------------- row 0 (FINISHED) written lazily
from hf_constrained.constraint import DEAD, FINISHED  # noqa: E402
from hf_constrained.masks import make_masks  # noqa: E402


class _Spy:
    """An engine that counts the masks asked of it (and can be slow on FINISHED)."""

    def __init__(self, engine, delay=0.0):
        self.engine, self.asked, self.delay = engine, [], delay
        for name in ("starts", "eos_token_ids", "pad_token_id", "vocab_size"):
            setattr(self, name, getattr(engine, name))

    def _ask(self, s):
        self.asked.append(int(s))
        if s == FINISHED and self.delay:
            import time
            time.sleep(self.delay)

    def allowed_bits(self, s, width):
        self._ask(s)
        return self.engine.allowed_bits(s, width)

    def allowed_mask(self, s, width):
        self._ask(s)
        return self.engine.allowed_mask(s, width)

    def banned_bits(self, s, width):
        self._ask(s)
        return self.engine.banned_bits(s, width)


def _reference(engine, states, width):
    out = torch.zeros(len(states), width)
    for i, s in enumerate(states):
        allowed = np.zeros(width, bool)
        allowed[[int(e) for e in engine.eos_token_ids if e < width]] = True
        if s <= 0 and engine.pad_token_id is not None:  # dead rows share FINISHED's row
            allowed[engine.pad_token_id] = True
        if s > 0:
            allowed = engine.allowed_mask(s, width)
        out[i, torch.from_numpy(~allowed)] = float("-inf")
    return out


@pytest.fixture
def engine_and_states(local_tok):
    proc = RegexProcessor(r"(ab|cd){1,3}!", local_tok, cache_dir=False)
    c = proc.constraint
    states, cur = [int(c.starts[0])], [int(c.starts[0])]
    for _ in range(3):
        cur = sorted({int(t) for s in cur for t in c.successors(s)} - set(states))
        states += cur
    return c, states


@pytest.mark.parametrize("layout", ["sparse", "packed"])
def test_finished_row_is_written_when_first_needed(engine_and_states, layout):
    c, states = engine_and_states
    width = c.vocab_size + 3
    spy = _Spy(c)
    table = make_masks(layout, spy, width, "cpu")
    for s in states:  # one-row steps of live states never need row 0
        out = table.apply(torch.zeros(1, width), np.array([s]), True)
        assert torch.equal(out, _reference(c, [s], width)), s
    assert FINISHED not in spy.asked
    # a finished row, then a dead one, alone and among live rows: row 0 written once
    for batch in ([FINISHED], [DEAD], [states[1], FINISHED, DEAD, states[0]]):
        out = table.apply(torch.zeros(len(batch), width), np.array(batch), False)
        assert torch.equal(out, _reference(c, batch, width)), batch
    assert spy.asked.count(FINISHED) == 1
    # a fresh table whose first step has several rows, one finished
    spy2 = _Spy(c)
    t2 = make_masks(layout, spy2, width, "cpu")
    batch = [states[2], FINISHED, states[2]]
    assert torch.equal(t2.apply(torch.zeros(3, width), np.array(batch), True), _reference(c, batch, width))
    assert spy2.asked.count(FINISHED) == 1


@pytest.mark.parametrize("layout", ["sparse", "packed"])
def test_finished_row_written_once_from_many_threads(engine_and_states, layout):
    import threading

    c, states = engine_and_states
    width = c.vocab_size
    spy = _Spy(c, delay=0.05)
    table = make_masks(layout, spy, width, "cpu")
    table.row(states[0])
    outs, barrier = [None] * 6, threading.Barrier(6)

    def work(i):
        barrier.wait()
        batch = [FINISHED] if i % 2 else [states[0], DEAD]
        outs[i] = (batch, table.apply(torch.zeros(len(batch), width), np.array(batch), False))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert spy.asked.count(FINISHED) == 1
    for batch, out in outs:
        assert torch.equal(out, _reference(c, batch, width)), batch


def test_construction_and_first_call_compute_no_finished_mask(local_tok):
    proc = RegexProcessor(r"(yes|no)!", local_tok, cache_dir=False)
    index = proc.constraint.index
    assert int(proc.constraint.starts[0]) in index._bits and FINISHED not in index._bits
    proc(torch.tensor([[3]]), torch.zeros(1, len(local_tok)))
    assert FINISHED not in index._bits
    # a finished row computes it, and its mask is EOS and pad only
    masks = proc._masks
    out = masks.apply(torch.zeros(1, len(local_tok)), np.array([FINISHED]), True)
    allowed = set(torch.isfinite(out[0]).nonzero()[:, 0].tolist())
    assert allowed == {local_tok.eos_token_id, local_tok.pad_token_id} - {None} and FINISHED in index._bits
