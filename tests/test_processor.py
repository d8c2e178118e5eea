"""End-to-end guarantees of RegexProcessor under every generate() mode.

Outputs are checked with ``re.fullmatch`` (finished rows) and the ``regex``
module's partial matching (rows cut off by max_new_tokens). Tracked states are
compared with states recomputed from the tokens.
"""

import re

import numpy as np
import pytest
import regex
import torch

from hf_constrained import GenerationConflictError, RegexProcessor, reshape_samples
from hf_constrained.index import FINISHED
from hf_constrained.offline import tiny_model

DATE = r"\d{4}-\d{2}-\d{2}"
EMAIL = r"[a-z]{1,8}@[a-z]{1,6}\.(com|org)"
UNI = r"(é|中文|😀|ß){1,4}"
CITY = r"(Paris|London|Tokyo|New York|Berlin|Madrid|Rome)"


def gen_texts(proc, out):
    """Per row: (decoded generated text, finished) — independent of proc.decode."""
    seqs = out.sequences if hasattr(out, "sequences") else out
    p = proc._run.prompt_len
    res = []
    eos = set(proc.eos_token_ids)
    for row in seqs[:, p:].tolist():
        ids, finished = [], False
        for t in row:
            if t in eos:
                finished = True
                break
            ids.append(t)
        if not finished:
            while ids and ids[-1] == proc.pad_token_id:
                ids.pop()
        res.append((proc.tokenizer.decode(ids, skip_special_tokens=True), finished))
    return res


def assert_valid(proc, out, patterns, per_row=None):
    """Finished rows fullmatch; truncated rows are prefixes of a match."""
    rows = gen_texts(proc, out)
    for r, (text, finished) in enumerate(rows):
        pat = patterns[per_row(r)] if per_row else patterns
        if finished:
            assert re.fullmatch(pat, text), (r, text, pat)
        else:
            clean = text.rstrip("\ufffd")  # a token boundary may split a character
            assert regex.fullmatch(pat, clean, partial=True), (r, text, pat)
    return rows


def assert_tracking_exact(proc):
    ids, tracked = proc.tracked_states()
    recomputed = proc.states_from_tokens(ids)
    assert np.array_equal(tracked, recomputed)


def batch(tok, prompts):
    return tok(prompts, return_tensors="pt", padding=True)


# ------------------------------------------------------------------ modes
@pytest.mark.parametrize("mode", [
    dict(do_sample=False),
    dict(do_sample=True, temperature=0.7, top_k=50, top_p=0.9, num_return_sequences=4),
    dict(do_sample=True, num_return_sequences=5),
    dict(num_beams=4, num_return_sequences=2),
    dict(num_beams=3, do_sample=True, num_return_sequences=3),
], ids=["greedy", "sampling-warpers", "samples", "beam", "beam-sampling"])
def test_modes_deepseek(deepseek, deepseek_model, mode):
    torch.manual_seed(1)
    proc = RegexProcessor(DATE, deepseek)
    inputs = batch(deepseek, ["The date is", "x"])
    out = deepseek_model.generate(**inputs, logits_processor=[proc], max_new_tokens=24, **mode)
    rows = assert_valid(proc, out, DATE)
    assert sum(f for _, f in rows) >= 1
    n = mode.get("num_return_sequences", 1)
    assert out.shape[0] == 2 * n
    assert_tracking_exact(proc)


def test_three_prompts_seven_samples_three_patterns(deepseek, deepseek_model):
    torch.manual_seed(0)
    pats = [DATE, EMAIL, CITY]
    proc = RegexProcessor(pats, deepseek)
    inputs = batch(deepseek, ["Date:", "An e-mail address, please:", "City"])
    out = deepseek_model.generate(**inputs, logits_processor=[proc], do_sample=True,
                                  num_return_sequences=7, max_new_tokens=40)
    texts = proc.decode(out)
    assert len(texts) == 7 and all(len(row) == 3 for row in texts)
    for s in range(7):
        for b in range(3):
            assert re.fullmatch(pats[b], texts[s][b]), (s, b, texts[s][b])
    grid = reshape_samples(out, 3)
    assert grid.shape[:2] == (7, 3)
    assert torch.equal(grid[2, 1], out[1 * 7 + 2])


def test_beam_search_four_beams_two_returned(deepseek, deepseek_model):
    pats = [DATE, EMAIL]
    proc = RegexProcessor(pats, deepseek)
    inputs = batch(deepseek, ["Date:", "Mail"])
    out = deepseek_model.generate(**inputs, logits_processor=[proc], num_beams=4,
                                  num_return_sequences=2, max_new_tokens=40,
                                  return_dict_in_generate=True, output_scores=True)
    texts = proc.decode(out)
    assert len(texts) == 2 and all(len(r) == 2 for r in texts)
    for s in range(2):
        for b in range(2):
            assert re.fullmatch(pats[b], texts[s][b]), texts[s][b]
    scores = reshape_samples(out.sequences_scores, 2)
    assert scores.shape == (2, 2)
    assert_tracking_exact(proc)


def test_assisted_generation_with_assistant_model(deepseek, deepseek_model):
    assistant = tiny_model(deepseek, "llama", seed=7)
    for sample in (False, True):
        torch.manual_seed(3)
        proc = RegexProcessor(EMAIL, deepseek)
        out = deepseek_model.generate(**batch(deepseek, ["Mail:"]), logits_processor=[proc],
                                      assistant_model=assistant, do_sample=sample, max_new_tokens=30)
        rows = assert_valid(proc, out, EMAIL)
        assert rows[0][1]
        assert_tracking_exact(proc)


@pytest.mark.parametrize("sample", [False, True], ids=["greedy", "sampling"])
def test_assistant_with_another_tokenizer(local_tok, local_model, mistral, sample, monkeypatch):
    """Universal assisted generation (an assistant with its own tokenizer, tokenizer= and
    assistant_tokenizer=): transformers hands our processor to the draft model's generate(),
    with Mistral ids and scores. Those calls once started the run on the draft's prompt,
    so the main model's rows were tracked with the wrong prompt length: greedy emitted pad
    then EOS (an empty text), and sampling raised about a vocabulary that does not fit.
    The draft is left unmasked now; the main model's verification keeps the constraint."""
    cg = pytest.importorskip("transformers.generation.candidate_generator")
    if not hasattr(cg, "AssistedCandidateGeneratorDifferentTokenizers"):
        pytest.skip("this transformers has no universal assisted generation")
    cache = getattr(cg, "AssistantVocabTranslatorCache", None)
    if cache is not None:  # transformers keys it by the tokenizers alone: a fresh assistant needs a fresh one
        import weakref
        monkeypatch.setattr(cache, "_cache", weakref.WeakKeyDictionary())
    assistant = tiny_model(mistral, "llama", seed=3)
    pattern = r"[0-9]{2}-[0-9]{2}"
    for seed in range(2):
        torch.manual_seed(seed)
        proc = RegexProcessor(pattern, local_tok, cache_dir=False)
        out = local_model.generate(**batch(local_tok, ["Date:"]), logits_processor=[proc], assistant_model=assistant,
                                   tokenizer=local_tok, assistant_tokenizer=mistral, do_sample=sample,
                                   max_new_tokens=12)
        rows = assert_valid(proc, out, pattern)
        assert rows[0][1], rows
        assert re.fullmatch(pattern, proc.decode(out))
        assert_tracking_exact(proc)


def test_prompt_lookup_decoding(deepseek, deepseek_model):
    proc = RegexProcessor(DATE, deepseek)
    prompt = "dates 2024-01-02 and 1999-12-31 and 2024-01-0"
    out = deepseek_model.generate(**batch(deepseek, [prompt]), logits_processor=[proc],
                                  prompt_lookup_num_tokens=3, max_new_tokens=20)
    rows = assert_valid(proc, out, DATE)
    assert rows[0][1]
    assert_tracking_exact(proc)


def test_mistral_modes_and_non_ascii(mistral, mistral_model):
    pats = [UNI, r"[A-Z][a-z]{2,6} (é|中文)", CITY]
    for mode in (dict(do_sample=True, num_return_sequences=4), dict(num_beams=3, num_return_sequences=2)):
        torch.manual_seed(5)
        proc = RegexProcessor(pats, mistral)
        inputs = batch(mistral, ["Write:", "Name and word:", "A city"])
        out = mistral_model.generate(**inputs, logits_processor=[proc], max_new_tokens=30, **mode)
        n = mode["num_return_sequences"]
        assert_valid(proc, out, pats, per_row=lambda r: r // n)
        assert_tracking_exact(proc)


def test_sentencepiece_leading_space_rule(mistral, mistral_model):
    """A first '▁Word' token decodes without its space; the mask models that."""
    proc = RegexProcessor(r"Paris|Rome", mistral)
    paris = mistral.convert_tokens_to_ids("▁Paris")
    start = torch.tensor([[1, 5, 6]])
    scores = torch.zeros(1, len(mistral))
    masked = proc(start, scores)
    assert torch.isfinite(masked[0, paris])  # "▁Paris" decodes as "Paris"
    assert mistral.decode([paris]) == "Paris"
    # after it, EOS is allowed: "Paris" is complete
    step2 = proc(torch.tensor([[1, 5, 6, paris]]), torch.zeros(1, len(mistral)))
    assert torch.isfinite(step2[0, mistral.eos_token_id])
    # a leading space in the pattern needs the extra (stripped) space first
    proc2 = RegexProcessor(r" x", mistral)
    m = proc2(torch.tensor([[1, 5]]), torch.zeros(1, len(mistral)))
    x_tok = mistral.convert_tokens_to_ids("▁x")
    assert not torch.isfinite(m[0, x_tok])  # would decode to "x", not " x"
    assert torch.isfinite(m[0, mistral.convert_tokens_to_ids("▁▁x")]) or torch.isfinite(
        m[0, mistral.convert_tokens_to_ids("▁")])


def test_left_padded_batch_of_different_lengths(deepseek, deepseek_model):
    prompts = ["a", "a much longer prompt with many more tokens in it", "mid length one"]
    pats = [DATE, CITY, EMAIL]
    proc = RegexProcessor(pats, deepseek)
    inputs = batch(deepseek, prompts)
    assert (inputs["attention_mask"] == 0).any()
    torch.manual_seed(2)
    out = deepseek_model.generate(**inputs, logits_processor=[proc], do_sample=True,
                                  num_return_sequences=2, max_new_tokens=40)
    assert_valid(proc, out, pats, per_row=lambda r: r // 2)


# ------------------------------------------------------------------ vocabulary edge cases
def test_several_eos_ids_and_wide_logits(deepseek):
    model = tiny_model(deepseek, "llama", vocab_size=len(deepseek) + 77, seed=3)
    extra_eos = deepseek.convert_tokens_to_ids("<｜▁pad▁｜>")
    eos = [deepseek.eos_token_id, extra_eos]
    model.generation_config.eos_token_id = eos
    proc = RegexProcessor(CITY, deepseek, eos_token_id=model.generation_config.eos_token_id)
    torch.manual_seed(0)
    out = model.generate(**batch(deepseek, ["City:"]), logits_processor=[proc], do_sample=True,
                         num_return_sequences=6, max_new_tokens=20)
    texts = proc.decode(out)
    assert all(re.fullmatch(CITY, t) for t in texts), texts
    # masks: ids beyond the tokenizer never allowed; both EOS ids allowed after a full match
    width = len(deepseek) + 77
    first = proc(torch.tensor([[5, 6]]), torch.zeros(1, width))
    assert torch.isneginf(first[0, len(deepseek):]).all()
    rome = deepseek.encode("Rome", add_special_tokens=False)
    ids = torch.tensor([[5, 6] + rome])
    last = proc(ids, torch.zeros(1, width))
    assert torch.isfinite(last[0, eos]).all()


def test_special_and_added_tokens_never_allowed(deepseek):
    proc = RegexProcessor(r"[^x]*", deepseek)  # almost anything goes
    masked = proc(torch.tensor([[5]]), torch.zeros(1, len(deepseek)))
    specials = sorted(set(deepseek.all_special_ids) | set(deepseek.added_tokens_decoder))
    allowed = torch.isfinite(masked[0])
    for t in specials:
        if t in proc.eos_token_ids:
            assert allowed[t]  # "" is a full match of [^x]*
        else:
            assert not allowed[t], deepseek.convert_ids_to_tokens(t)


@pytest.mark.parametrize("mode", [dict(), dict(do_sample=True, num_return_sequences=2), dict(num_beams=3)],
                         ids=["greedy", "samples", "beams"])
def test_generate_eos_that_is_a_text_token_is_refused(local_tok, local_model, mode):
    """generate(eos_token_id=[eos, <a text token>]) stopped rows on that token in the middle of
    a match (`[a-z]{1,4}\\.[a-z]{1,4}` gave 'risx.'), and decode() returned those non-matches."""
    dot = local_tok.convert_tokens_to_ids(".")
    proc = RegexProcessor(r"[a-z]{1,4}\.[a-z]{1,4}", local_tok, cache_dir=False)
    with pytest.raises(GenerationConflictError, match=rf"eos_token_id {dot}, the text token b'\.'"):
        local_model.generate(**batch(local_tok, ["A:", "Bb:"]), logits_processor=[proc], max_new_tokens=12,
                             eos_token_id=[local_tok.eos_token_id, dot], **mode)
    # special ids the processor does not end with are fine (it never allows them)
    out = local_model.generate(**batch(local_tok, ["A:", "Bb:"]), logits_processor=[proc], max_new_tokens=12,
                               eos_token_id=[local_tok.eos_token_id, local_tok.pad_token_id], **mode)
    assert_valid(proc, out, r"[a-z]{1,4}\.[a-z]{1,4}")


def test_generate_eos_without_the_processors_eos_warns(local_tok, local_model):
    """generate() stopping on other ids than the processor's EOS: finished rows go on emitting
    EOS/pad to max_new_tokens (still valid, decode() cuts them), and a warning says why."""
    proc = RegexProcessor(r"(ab|cd)", local_tok, cache_dir=False)
    with pytest.warns(UserWarning, match="none of which this processor ends matches with"):
        out = local_model.generate(**batch(local_tok, ["A:"]), logits_processor=[proc], max_new_tokens=8,
                                   eos_token_id=local_tok.pad_token_id)
    assert out.shape[1] - proc._run.prompt_len == 8  # not stopped by the processor's EOS
    assert proc.decode(out) in ("ab", "cd")


def test_pad_equals_eos(local_tok):
    from transformers import PreTrainedTokenizerFast
    tok = PreTrainedTokenizerFast(tokenizer_object=local_tok.backend_tokenizer, eos_token="<|endoftext|>",
                                  pad_token="<|endoftext|>", padding_side="left")
    model = tiny_model(tok, "gpt2", seed=4)
    proc = RegexProcessor(r"(yes|no|maybe)", tok)
    torch.manual_seed(0)
    out = model.generate(**tok(["Q?", "Another question?"], return_tensors="pt", padding=True),
                         logits_processor=[proc], do_sample=True, num_return_sequences=4, max_new_tokens=12)
    texts = proc.decode(out)
    assert len(texts) == 4 and len(texts[0]) == 2
    assert all(re.fullmatch(r"(yes|no|maybe)", t) for row in texts for t in row), texts


def test_top_k_1_and_tiny_top_p_still_valid(deepseek, deepseek_model):
    for kw in (dict(top_k=1), dict(top_p=0.01)):
        proc = RegexProcessor(DATE, deepseek)
        out = deepseek_model.generate(**batch(deepseek, ["d"]), logits_processor=[proc], do_sample=True,
                                      num_return_sequences=3, max_new_tokens=20, **kw)
        assert all(re.fullmatch(DATE, t) for t in proc.decode(out))


# ------------------------------------------------------------------ conflicts
def test_min_new_tokens_longer_than_any_match(deepseek, deepseek_model):
    proc = RegexProcessor(r"(yes|no)", deepseek)
    with pytest.raises(GenerationConflictError, match="min_new_tokens"):
        deepseek_model.generate(**batch(deepseek, ["?"]), logits_processor=[proc], do_sample=True,
                                min_new_tokens=10, max_new_tokens=20)


def test_bad_words_banning_everything_allowed(deepseek, deepseek_model):
    proc = RegexProcessor(r"[0-9]", deepseek)
    digits = [[deepseek.convert_tokens_to_ids(str(d))] for d in range(10)]
    with pytest.raises(GenerationConflictError, match="bad_words_ids"):
        deepseek_model.generate(**batch(deepseek, ["?"]), logits_processor=[proc],
                                bad_words_ids=digits, max_new_tokens=5)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_finished_rows_keep_a_score_under_no_repeat_ngram(local_tok, seed):
    """pad_token = eos_token with no_repeat_ngram_size=2: once a sample has finished, its
    (EOS, EOS) bigram is banned, which left the finished row all -inf and raised a
    GenerationConflictError naming it (or, unchecked, NaNs in sampling). Finished rows get
    a finite pad score back; the live rows' conflict check stays."""
    from transformers import PreTrainedTokenizerFast
    tok = PreTrainedTokenizerFast(tokenizer_object=local_tok.backend_tokenizer, eos_token="<|endoftext|>",
                                  pad_token="<|endoftext|>", padding_side="left")
    model = tiny_model(tok, "llama", seed=seed)
    pattern = r"Paris|Rome|(19|20)[0-9]{2}-[0-9]{2}-[0-9]{2}"
    proc = RegexProcessor(pattern, tok)
    torch.manual_seed(seed)
    inputs = batch(tok, ["Answer:", "Q"])
    inputs.pop("token_type_ids", None)              # (transformers 4.x returns them; llama refuses them)
    out = model.generate(**inputs, logits_processor=[proc], do_sample=True,
                         num_return_sequences=6, no_repeat_ngram_size=2, max_new_tokens=20)
    rows = assert_valid(proc, out, pattern)
    assert sum(finished for _, finished in rows) >= 2, rows   # some rows finished early


def test_pattern_list_length_mismatch_names_both_numbers(deepseek, deepseek_model):
    proc = RegexProcessor([DATE, EMAIL], deepseek)
    with pytest.raises(GenerationConflictError, match=r"2 patterns.*3 prompts"):
        deepseek_model.generate(**batch(deepseek, ["a", "b", "c"]), logits_processor=[proc],
                                max_new_tokens=5)


# ------------------------------------------------------------------ reuse, shapes, results
def test_reuse_across_calls_and_new_call_detection(deepseek, deepseek_model):
    proc = RegexProcessor(CITY, deepseek)
    torch.manual_seed(0)
    out1 = deepseek_model.generate(**batch(deepseek, ["City:"]), logits_processor=[proc], max_new_tokens=3)
    # the next call's prompt is the (unfinished) previous output: a new call, a fresh match
    out2 = deepseek_model.generate(input_ids=out1, attention_mask=torch.ones_like(out1),
                                   logits_processor=[proc], max_new_tokens=12)
    assert proc._run.prompt_len == out1.shape[1]
    text = proc.decode(out2)
    assert re.fullmatch(CITY, text) or regex.fullmatch(CITY, text, partial=True)
    out3 = deepseek_model.generate(**batch(deepseek, ["a", "bb", "ccc"]), logits_processor=[proc],
                                   do_sample=True, num_return_sequences=2, max_new_tokens=12)
    texts = proc.decode(out3)
    assert len(texts) == 2 and len(texts[0]) == 3
    assert_tracking_exact(proc)


def test_decode_shapes(deepseek, deepseek_model):
    proc = RegexProcessor(CITY, deepseek)
    one = deepseek_model.generate(**batch(deepseek, ["x"]), logits_processor=[proc], max_new_tokens=12)
    assert isinstance(proc.decode(one), str)
    seven = deepseek_model.generate(**batch(deepseek, ["x"]), logits_processor=[proc], do_sample=True,
                                    num_return_sequences=7, max_new_tokens=12, return_dict_in_generate=True)
    texts = proc.decode(seven)
    assert isinstance(texts, list) and len(texts) == 7 and all(isinstance(t, str) for t in texts)
    assert proc.decode(seven.sequences) == texts
    three = deepseek_model.generate(**batch(deepseek, ["a", "b", "c"]), logits_processor=[proc],
                                    max_new_tokens=12)
    assert len(proc.decode(three)) == 3
    # identical prompts next to each other are still counted right inside generate()
    same = deepseek_model.generate(**batch(deepseek, ["same", "same"]), logits_processor=[proc],
                                   do_sample=True, num_return_sequences=3, max_new_tokens=12)
    grid = proc.decode(same)
    assert len(grid) == 3 and len(grid[0]) == 2
    assert len(proc.decode(same, num_prompts=1)) == 6


def test_generations_with_logprobs(deepseek, deepseek_model):
    proc = RegexProcessor(CITY, deepseek)
    torch.manual_seed(0)
    out = deepseek_model.generate(**batch(deepseek, ["a", "b"]), logits_processor=[proc], do_sample=True,
                                  num_return_sequences=3, max_new_tokens=3, output_scores=True,
                                  return_dict_in_generate=True)
    gens = proc.generations(out)
    assert len(gens) == 2 and all(len(g.sequences) == 3 for g in gens)
    for g in gens:
        for s in g.sequences:
            assert len(s.logprobs) == len(s.token_ids)
            assert all(np.isfinite(s.logprobs)) and s.logprob == pytest.approx(sum(s.logprobs))
            if s.finished:
                assert re.fullmatch(CITY, s.text)
            else:
                assert s.truncated and regex.fullmatch(CITY, s.text, partial=True)
    assert any(s.truncated for g in gens for s in g.sequences)  # 3 tokens cannot spell "New York" + EOS
    beams = deepseek_model.generate(**batch(deepseek, ["a"]), logits_processor=[proc], num_beams=3,
                                    num_return_sequences=2, max_new_tokens=12, output_scores=True,
                                    return_dict_in_generate=True)
    gens = proc.generations(beams)
    assert len(gens) == 1 and len(gens[0].sequences) == 2
    for s in gens[0].sequences:
        assert s.finished and re.fullmatch(CITY, s.text)
        assert all(np.isfinite(s.logprobs))


def test_dead_and_finished_rows_never_all_masked(deepseek):
    proc = RegexProcessor(r"ab", deepseek)
    a = deepseek.convert_tokens_to_ids("a")
    z = deepseek.convert_tokens_to_ids("z")
    eos = deepseek.eos_token_id
    proc(torch.tensor([[7], [7], [7]]), torch.zeros(3, len(deepseek)))
    out = proc(torch.tensor([[7, a], [7, z], [7, eos]]), torch.zeros(3, len(deepseek)))
    assert torch.isfinite(out).any(-1).all()
    ids, states = proc.tracked_states()
    assert states[1] == 0 and states[2] == 0  # 'z' and a premature EOS are dead
    assert states[0] > 0
    b = deepseek.convert_tokens_to_ids("b")
    proc(torch.tensor([[7, a, b], [7, z, eos], [7, eos, eos]]), torch.zeros(3, len(deepseek)))
    out = proc(torch.tensor([[7, a, b, eos], [7, z, eos, eos], [7, eos, eos, eos]]),
               torch.zeros(3, len(deepseek)))
    assert list(proc.tracked_states()[1]) == [FINISHED, 0, 0]
    assert torch.isfinite(out[:, eos]).all()


def test_raw_logits_are_left_untouched(deepseek, deepseek_model):
    """With output_logits=True generate keeps the logits it hands us: mask a copy."""
    proc = RegexProcessor(DATE, deepseek)
    out = deepseek_model.generate(**batch(deepseek, ["d"]), logits_processor=[proc], max_new_tokens=4,
                                  output_logits=True, output_scores=True, return_dict_in_generate=True)
    assert torch.isfinite(out.logits[0]).all()
    assert torch.isneginf(out.scores[0]).sum() > 100_000


def test_min_new_tokens_within_the_match_is_fine(deepseek, deepseek_model):
    """A minimum the pattern can satisfy is no conflict (checked exactly on the host)."""
    proc = RegexProcessor(r"[a-z]( [a-z]){7}", deepseek)
    torch.manual_seed(0)
    out = deepseek_model.generate(**batch(deepseek, ["?"]), logits_processor=[proc], do_sample=True,
                                  num_return_sequences=3, min_new_tokens=4, max_new_tokens=30)
    assert all(re.fullmatch(r"[a-z]( [a-z]){7}", t) for t in proc.decode(out))
    assert proc._run.length_guards and not proc._run.banning  # no extra synchronisation


# ------------------------------------------------------------------ precompute
# (the CPU sparse mask tests moved to tests/test_masks.py, run on both layouts)
def live_masks(proc) -> int:
    return sum(1 for s in proc.index._bits if s > 0)  # (FINISHED, -1, gets one at the first call)


def test_precompute_then_generation_builds_no_mask(deepseek, deepseek_model, tmp_path):
    pattern = r"(yes|no|maybe)[.!]( [0-9]{1,2})?"
    proc = RegexProcessor(pattern, deepseek, cache_dir=tmp_path)
    assert proc.precompute() is True
    done = live_masks(proc)
    # every state a token sequence reaches has a mask, and only those: compare with
    # the token-level closure computed independently from next_states
    reach, frontier = {proc.dfa.starts[0]}, [proc.dfa.starts[0]]
    while frontier:
        q = frontier.pop()
        allowed = proc.index.allowed(q)
        allowed = allowed[~np.isin(allowed, proc.eos_token_ids)]
        for t in set(proc.index.next_states(np.full(len(allowed), q), allowed).tolist()) - reach:
            reach.add(t)
            frontier.append(t)
    assert live_masks(proc) == done == len(reach)
    out = deepseek_model.generate(**batch(deepseek, ["A:", "B:"]), logits_processor=[proc],
                                  do_sample=True, num_return_sequences=8, max_new_tokens=8)
    assert live_masks(proc) == done
    for text in np.ravel(proc.decode(out)):
        assert regex.fullmatch(pattern, text, partial=True)
    # a fresh processor finds them all in the disk cache
    again = RegexProcessor(pattern, deepseek, cache_dir=tmp_path)
    assert again.index_source == "disk" and live_masks(again) == done
    assert again.precompute() is True and live_masks(again) == done


def test_precompute_limits(deepseek):
    proc = RegexProcessor(r"[a-z]{1,300}@x", deepseek, cache_dir=False)
    assert proc.precompute(max_states=5) is False
    assert live_masks(proc) <= 6
    assert proc.precompute(max_seconds=0) is False


def test_scores_narrower_than_the_text_ids_are_refused(local_tok, deepseek):
    """Logits narrower than the ids that spell text (a tokenizer of another model) were
    masked silently to the narrower width; now the error names both counts. Wider logits
    (padded embedding rows) and logits narrower by special tokens only work."""
    proc = RegexProcessor(r"(yes|no)", local_tok, cache_dir=False)
    ids = torch.tensor([[1, 2]])
    with pytest.raises(GenerationConflictError, match=r"the scores have 100 columns .* ids up to \d+ .*resize_token_embeddings"):
        proc(ids, torch.zeros(1, 100))
    for tok in (local_tok, deepseek):
        text_ids = np.flatnonzero(RegexProcessor(r"(yes|no)", tok, cache_dir=False).vocab.tok_len)
        for width in (int(text_ids[-1]) + 1, len(tok), len(tok) + 64):
            out = RegexProcessor(r"(yes|no)", tok, cache_dir=False)(ids, torch.zeros(1, width))
            assert out.shape == (1, width) and torch.isfinite(out).any()
    assert int(text_ids[-1]) + 1 < len(deepseek)   # DeepSeek's special tokens come last



def test_every_eos_id_beyond_the_scores_is_refused(local_tok):
    """An EOS added to the tokenizer but not to the model lies past the logits: a finished row
    was left with no finite score (sampling then failed inside torch); now the error says so.
    One EOS id inside the width is enough."""
    import copy

    tok = copy.deepcopy(local_tok)
    width = len(tok)
    tok.add_special_tokens({"eos_token": "<|myeos|>"})
    assert tok.eos_token_id == width
    proc = RegexProcessor(r"ab|cd", tok, cache_dir=False)
    with pytest.raises(GenerationConflictError, match=rf"every EOS id \({width}\) lies beyond them"):
        proc(torch.tensor([[1, 2]]), torch.zeros(1, width))
    ok = RegexProcessor(r"ab|cd", tok, cache_dir=False, eos_token_id=[local_tok.eos_token_id, width])
    assert torch.isfinite(ok(torch.tensor([[1, 2]]), torch.zeros(1, width))).any()

def test_called_with_wrong_shapes(local_tok):
    proc = RegexProcessor(r"(yes|no)", local_tok, cache_dir=False)
    for ids, scores in ((torch.tensor([1, 2]), torch.zeros(len(local_tok))),
                        (torch.tensor([[1, 2]]), torch.zeros(2, len(local_tok)))):
        with pytest.raises(GenerationConflictError, match="input_ids \\(rows, length\\) and scores"):
            proc(ids, scores)


def test_eos_token_id_forms(local_tok):
    """An id as a numpy int or a 0-d tensor is an id; a negative one (it indexed the last column,
    a text token, as EOS) and a bool are refused."""
    eos = local_tok.eos_token_id
    for e in (np.int64(eos), torch.tensor(eos), [np.int32(eos)], torch.tensor([eos])):
        assert RegexProcessor(r"[a-z]{2}", local_tok, eos_token_id=e, cache_dir=False).eos_token_ids == [eos]
    for e in (-1, [eos, -1]):
        with pytest.raises(GenerationConflictError, match=r"eos_token_id -1 is negative"):
            RegexProcessor(r"[a-z]{2}", local_tok, eos_token_id=e, cache_dir=False)
    with pytest.raises(TypeError, match=r"eos_token_id must be a token id \(an int\) or a list of them, not True"):
        RegexProcessor(r"[a-z]{2}", local_tok, eos_token_id=True, cache_dir=False)


@pytest.mark.parametrize("layout", ["packed", "sparse"])
def test_scores_that_require_grad_are_masked_and_backpropagate(local_tok, local_model, layout):
    """A decoding loop of one's own without torch.no_grad(): the sparse layout's several-row path
    used index_select(out=...), which autograd refuses."""
    ids = local_tok(["Code:"], return_tensors="pt")["input_ids"].repeat(2, 1)
    logits = local_model(ids).logits[:, -1]
    assert logits.requires_grad
    proc = RegexProcessor(r"[a-z]{2}[0-9]{3}", local_tok, cache_dir=False, mask_layout=layout)
    out = proc(ids, logits)
    allowed = torch.isfinite(out)
    assert allowed.sum(1).tolist() == [allowed[0].sum().item()] * 2 and allowed[0].sum() > 0
    logits.retain_grad()
    out[allowed].sum().backward()
    assert torch.equal(logits.grad != 0, allowed)


def test_processors_refuse_pickling_and_copying_with_a_reason(local_tok):
    import copy
    import pickle

    from hf_constrained import ChoiceProcessor, GrammarProcessor, JSONProcessor

    for proc in (RegexProcessor(r"[0-9]{3}", local_tok, cache_dir=False),
                 JSONProcessor({"type": "integer"}, local_tok, cache_dir=False),
                 ChoiceProcessor(["yes", "no"], local_tok, cache_dir=False),
                 GrammarProcessor('start: "a"+', local_tok, cache_dir=False)):
        for fn in (copy.deepcopy, copy.copy, pickle.dumps):
            with pytest.raises(TypeError, match=rf"{type(proc).__name__} cannot be pickled or copied: .*in each process"):
                fn(proc)
