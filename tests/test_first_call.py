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
