"""Per-call tracking: the run of each processor call, the fallback when the
GenerationConfig cannot be found, and decode() finding the call an output came from."""

import gc
import re

import numpy as np
import pytest
import regex
import torch

from hf_constrained import GenerationConflictError, RegexProcessor, hf_internals
from hf_constrained.offline import tiny_model
from hf_constrained.tracking import count_prompts

PAT = r"[a-z]{2,6}-\d{2,4}"
CITY = r"(Paris|London|Tokyo|Rome)"


def check(proc, tok, out, pats, per):
    """Finished rows fullmatch, others are prefixes; decode() agrees with a decode done here."""
    seqs = out.sequences if hasattr(out, "sequences") else out
    p = proc._run.prompt_len
    finished = 0
    texts = []
    for r, row in enumerate(seqs[:, p:].tolist()):
        ids = row[: row.index(tok.eos_token_id)] if tok.eos_token_id in row else row
        while ids and ids[-1] == tok.pad_token_id:
            ids = ids[:-1]
        text = tok.decode(ids, skip_special_tokens=True)
        texts.append(text)
        pat = pats[r // per] if isinstance(pats, list) else pats
        if tok.eos_token_id in row:
            finished += 1
            assert re.fullmatch(pat, text), text
        else:
            assert regex.fullmatch(pat, text.rstrip("\ufffd"), partial=True), text
    ids, tracked = proc.tracked_states()
    assert np.array_equal(tracked, proc.states_from_tokens(ids))
    got = proc.decode(out)
    n = len(texts) // per
    grid = [[texts[q * per + s] for q in range(n)] for s in range(per)]
    flat = [t for row in (got if isinstance(got, list) else [got]) for t in (row if isinstance(row, list) else [row])]
    assert sorted(flat) == sorted(texts) and (n == 1 or per == 1 or got == grid)
    return finished


MODES = [
    dict(do_sample=False),
    dict(do_sample=True, num_return_sequences=4),
    dict(num_beams=3, num_return_sequences=2),
    dict(num_beams=3, do_sample=True, num_return_sequences=2),
    dict(prompt_lookup_num_tokens=3, do_sample=False),
    "assistant",
]


@pytest.mark.parametrize("mode", MODES, ids=["greedy", "samples", "beams", "beam-sampling", "prompt-lookup",
                                             "assistant"])
def test_every_mode_without_generation_config(monkeypatch, deepseek, deepseek_model, mode):
    """A transformers version where the stack walk finds nothing: tracked by tokens."""
    calls = []
    monkeypatch.setattr(hf_internals, "_generation_context", lambda: (calls.append(1), False))
    pats = [PAT, CITY]
    proc = RegexProcessor(pats, deepseek, cache_dir=False)
    inputs = deepseek(["Code: ab-12 cd-345", "City"], return_tensors="pt", padding=True)
    kw = dict(assistant_model=tiny_model(deepseek, "llama", seed=7)) if mode == "assistant" else mode
    if mode == "assistant" or "prompt_lookup_num_tokens" in mode:  # batch size 1 only
        pats, inputs = PAT, deepseek(["Code: ab-12 cd-345 ef-67"], return_tensors="pt")
        proc = RegexProcessor(pats, deepseek, cache_dir=False)
    torch.manual_seed(0)
    runs = []
    for _ in range(2):  # twice: the second call must not continue the first one's run
        out = deepseek_model.generate(**inputs, logits_processor=[proc], max_new_tokens=16, **kw)
        per = kw.get("num_return_sequences", 1)
        check(proc, deepseek, out, pats, per)
        assert not proc._run.inplace  # no config: the scores generate() keeps are never touched
        runs.append(proc._run)
    assert calls  # the fallback was really taken
    # (with an assistant, its first call at the prompt length starts a run that the
    # main model's first call, at the same length, replaces)
    assert runs[0] is not runs[1] and runs[1].prompt_len == inputs["input_ids"].shape[1]


def test_decode_of_an_earlier_call(deepseek, deepseek_model):
    proc = RegexProcessor(CITY, deepseek, cache_dir=False)
    torch.manual_seed(0)
    a = deepseek_model.generate(**deepseek(["x", "yy"], return_tensors="pt", padding=True),
                                logits_processor=[proc], do_sample=True, num_return_sequences=3, max_new_tokens=8)
    b = deepseek_model.generate(**deepseek(["a longer prompt"], return_tensors="pt"),
                                logits_processor=[proc], num_beams=2, max_new_tokens=8)
    ta = proc.decode(a)
    assert len(ta) == 3 and all(len(row) == 2 for row in ta)
    assert isinstance(proc.decode(b), str)
    assert proc.decode(a) == ta


def test_same_prompts_different_grids(deepseek, deepseek_model):
    """Two calls with the same prompt text: sampled outputs are told apart by their rows;
    beam outputs that would decode differently raise until num_prompts= settles it."""
    proc = RegexProcessor(CITY, deepseek, cache_dir=False)
    one = deepseek(["same"], return_tensors="pt")
    two = deepseek(["same", "same"], return_tensors="pt")
    torch.manual_seed(0)
    a = deepseek_model.generate(**one, logits_processor=[proc], do_sample=True, num_return_sequences=4,
                                max_new_tokens=8)
    b = deepseek_model.generate(**two, logits_processor=[proc], do_sample=True, num_return_sequences=2,
                                max_new_tokens=8)
    assert len(proc.decode(a)) == 4 and isinstance(proc.decode(a)[0], str)
    grid = proc.decode(b)
    assert len(grid) == 2 and len(grid[0]) == 2
    long = RegexProcessor(r"[a-z]{40}", deepseek, cache_dir=False)  # no beam finishes early
    c = deepseek_model.generate(**one, logits_processor=[long], num_beams=4, num_return_sequences=4,
                                max_new_tokens=6)
    d = deepseek_model.generate(**two, logits_processor=[long], num_beams=2, num_return_sequences=2,
                                max_new_tokens=6)
    assert c.shape == d.shape
    for out in (c, d):
        with pytest.raises(GenerationConflictError, match="would decode it differently.*num_prompts="):
            long.decode(out)
    assert len(long.decode(c, num_prompts=1)) == 4
    assert len(long.decode(d, num_prompts=2)) == 2


def test_unknown_output_is_a_clear_error(deepseek, deepseek_model):
    proc = RegexProcessor(CITY, deepseek, cache_dir=False)
    with pytest.raises(GenerationConflictError, match="needs a generate"):
        proc.decode(torch.zeros(1, 3, dtype=torch.long))
    with pytest.raises(GenerationConflictError, match="no generate"):
        proc.tracked_states()
    deepseek_model.generate(**deepseek(["x"], return_tensors="pt"), logits_processor=[proc], max_new_tokens=3)
    with pytest.raises(GenerationConflictError, match="matches none of the last 1 generate"):
        proc.decode(torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(TypeError, match="GenerateOutput"):
        proc.decode("text")


def test_finished_calls_are_dropped(deepseek, deepseek_model):
    proc = RegexProcessor(CITY, deepseek, cache_dir=False)
    proc._calls._records = type(proc._calls._records)(maxlen=3)
    for i in range(5):
        deepseek_model.generate(**deepseek([f"p{i}"], return_tensors="pt"), logits_processor=[proc],
                                do_sample=True, num_return_sequences=2, max_new_tokens=4)
    gc.collect()
    assert proc._calls._live == {}  # the GenerationConfig copies died: their runs went with them
    assert len(proc._calls._records) == 3
    assert len(proc._run.hist) == 1  # the last run keeps only what tracked_states() reports


def test_count_prompts():
    cfg = type("Cfg", (), {"num_beams": 4, "num_return_sequences": 2})()
    assert count_prompts(torch.zeros(8, 3), cfg, 1, False) == 2
    assert count_prompts(torch.tensor([[1], [1], [2]]), None, 1, False) == 2
    with pytest.raises(GenerationConflictError, match=r"2 patterns.*3 prompts"):
        count_prompts(torch.zeros(12, 3), cfg, 2, True, "P")
    with pytest.raises(GenerationConflictError, match="not a multiple"):
        count_prompts(torch.zeros(7, 3), cfg, 2, True, "P")


class _Cfg:
    num_beams = 1
    num_return_sequences = 1
    output_logits = False


def test_steps_that_skip_tokens(monkeypatch, deepseek):
    """Within one GenerationConfig a longer jump stays in the call (its rows are
    recomputed from their tokens); tracked by tokens it starts a new call."""
    proc = RegexProcessor(r"\d{4}-\d{2}-\d{2}", deepseek, cache_dir=False)
    digits = deepseek.encode("2024-01-02", add_special_tokens=False)
    assert len(digits) >= 4
    cfg = _Cfg()
    monkeypatch.setattr(hf_internals, "_generation_context", lambda: (cfg, False))
    width = len(deepseek)
    prompt = [5, 6]
    proc(torch.tensor([prompt]), torch.zeros(1, width))
    proc(torch.tensor([prompt + digits[:1]]), torch.zeros(1, width))
    run = proc._run
    out = proc(torch.tensor([prompt + digits[:4]]), torch.zeros(1, width))
    assert proc._run is run and run.prompt_len == 2
    ids, tracked = proc.tracked_states()
    assert np.array_equal(tracked, proc.states_from_tokens(ids)) and tracked[0] > 0
    allowed = set(torch.isfinite(out[0]).nonzero()[:, 0].tolist())
    assert allowed == set(proc.index.allowed(int(tracked[0])).tolist())
    monkeypatch.setattr(hf_internals, "_generation_context", lambda: (None, False))
    proc(torch.tensor([prompt]), torch.zeros(1, width))
    proc(torch.tensor([prompt + digits[:1]]), torch.zeros(1, width))
    by_tokens = proc._run
    proc(torch.tensor([prompt + digits[:4]]), torch.zeros(1, width))
    assert proc._run is not by_tokens and proc._run.prompt_len == 2 + 4


def test_a_beam_output_is_not_given_a_later_sampled_call_with_the_same_prompt(local_tok, local_model):
    """Both calls' prompt columns match the beam output, and the beam call cannot identify its
    reordered rows; the sampled call keeps its rows in order, so an output as wide as its own
    that is not its rows is not its output (its weights and setting were returned for A)."""
    from hf_constrained import RegexProcessor

    proc = RegexProcessor(r"[a-z]{30}", local_tok, track_weights=True, cache_dir=False)
    inp = local_tok(["Answer:"], return_tensors="pt")
    common = dict(logits_processor=[proc], max_new_tokens=4, return_dict_in_generate=True,
                  pad_token_id=local_tok.pad_token_id)
    torch.manual_seed(0)
    out_a = local_model.generate(**inp, num_beams=3, num_return_sequences=2, **common)
    before = proc.generations(out_a)[0]
    out_b = local_model.generate(**inp, do_sample=True, top_k=0, num_return_sequences=2, **common)
    after = proc.generations(out_a)[0]
    assert [s.log_weight for s in after.sequences] == [s.log_weight for s in before.sequences]
    assert not any(np.isnan(s.log_weight) for s in after.sequences)
    assert after.weight_setting.describe() == before.weight_setting.describe()
    assert "beam" in before.weight_setting.describe()
    assert proc.generations(out_b)[0].weight_setting.exact  # and B still finds B


def test_a_continuation_that_matches_an_output_says_so(local_tok, local_model):
    from hf_constrained import RegexProcessor
    from hf_constrained.errors import GenerationConflictError

    proc = RegexProcessor(r"[a-z]{30}", local_tok, cache_dir=False)
    inp = local_tok(["Word:"], return_tensors="pt")
    p = inp["input_ids"].shape[1]
    out = local_model.generate(**inp, logits_processor=[proc], num_beams=3, max_new_tokens=6,
                               pad_token_id=local_tok.pad_token_id)
    cont = out[:, : p + 1]
    local_model.generate(input_ids=cont, attention_mask=torch.ones_like(cont), logits_processor=[proc],
                         max_new_tokens=6, pad_token_id=local_tok.pad_token_id)
    with pytest.raises(GenerationConflictError, match=r"\(a continuation\): use one processor per such call"):
        proc.decode(out)


def test_a_loop_outside_generate_that_drops_rows_is_told_so(local_tok):
    """Outside generate() rows are tracked by their tokens, a step at a time; a loop that drops
    finished rows made the rest start the pattern again (a silent violation): it is an error.
    The same prompts again, with fewer rows, are a new call."""
    proc = RegexProcessor(r"ab|cd", local_tok, cache_dir=False)
    a, c = local_tok.convert_tokens_to_ids("a"), local_tok.convert_tokens_to_ids("c")

    def allowed(ids):
        s = proc(ids, torch.zeros(ids.shape[0], len(local_tok)))
        return [local_tok.convert_ids_to_tokens(torch.nonzero(r > -1e30).flatten().tolist()) for r in s]

    prompt = local_tok(["Q:", "Q:"], return_tensors="pt")["input_ids"]
    assert allowed(prompt) == [["a", "c"], ["a", "c"]]
    ids = torch.cat([prompt, torch.tensor([[a], [c]])], 1)
    assert allowed(ids) == [["b"], ["d"]]
    for dropped in (ids[1:], torch.cat([ids[1:], torch.tensor([[local_tok.convert_tokens_to_ids("d")]])], 1)):
        with pytest.raises(GenerationConflictError, match=r"these 1 rows continue 2 rows .* with rows dropped"):
            allowed(dropped)
    assert allowed(prompt[:1]) == [["a", "c"]]  # a new call with one of the prompts
