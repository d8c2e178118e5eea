"""What differs between the supported transformers versions (4.46 to 5.x).

Each test runs on whatever transformers is installed; CI runs this file on
4.46.x, the newest 4.57.x and the newest 5.x. Version-specific expectations are
stated per version, so a test fails when a version behaves unlike what the code
assumes.
"""

import re

import pytest
import torch
import transformers
from transformers import GenerationConfig, LogitsProcessor, pipeline

from hf_constrained import RegexProcessor, hf_internals, offline
from hf_constrained.errors import UnsupportedTokenizerError
from hf_constrained.vocabulary import Vocabulary

V4 = transformers.__version__.startswith("4.")
OLD_BEAM_SEARCH = V4 and tuple(int(x) for x in transformers.__version__.split(".")[:2]) < (4, 48)


class _Probe(LogitsProcessor):
    """Runs inside generate(): records what the internals readers see."""

    def __init__(self, after=None):
        self.after, self.seen = after, []

    def __call__(self, input_ids, scores):
        self.seen.append((hf_internals._find_generation_config(), hf_internals._processors_before(self)))
        return scores


# ----------------------------------------------------------------- internals readers
def test_find_generation_config_sees_the_running_call(local_tok, local_model):
    probe = _Probe()
    cfg = GenerationConfig(do_sample=True, num_return_sequences=3, max_new_tokens=3, top_k=7,
                           pad_token_id=local_tok.pad_token_id, eos_token_id=local_tok.eos_token_id)
    torch.manual_seed(0)
    local_model.generate(**local_tok(["a", "bb"], return_tensors="pt", padding=True), generation_config=cfg,
                         logits_processor=[probe])
    assert probe.seen
    for found, _ in probe.seen:
        assert found is not None, transformers.__version__
        assert (found.do_sample, found.num_return_sequences, found.top_k) == (True, 3, 7)
    assert len({id(found) for found, _ in probe.seen}) == 1  # one object for the whole call


def test_find_generation_config_outside_generate_is_none():
    assert hf_internals._find_generation_config() is None
    assert hf_internals._processors_before(_Probe()) == []
    assert hf_internals._legacy_beam_sampling_guard() is False
    assert hf_internals._in_slicing_pipeline() is False


def test_processors_before_lists_generate_built_banning_processors(local_tok, local_model):
    probe = _Probe()
    local_model.generate(**local_tok(["a"], return_tensors="pt"), logits_processor=[probe], max_new_tokens=3,
                         min_new_tokens=2, bad_words_ids=[[5]], pad_token_id=local_tok.pad_token_id)
    names = {type(p).__name__ for p in probe.seen[0][1]}
    assert "MinNewTokensLengthLogitsProcessor" in names and "NoBadWordsLogitsProcessor" in names, names
    assert all(type(p).__name__ in hf_internals._BANNING for p in probe.seen[0][1])


def test_tracking_by_tokens_when_no_config_is_found(monkeypatch, local_tok, local_model):
    """A version where the stack walk finds nothing: the processor tracks rows by
    their tokens alone and every output is still valid and shaped."""
    monkeypatch.setattr(hf_internals, "_generation_context", lambda: (None, False))
    pats = [r"[0-9]{2}-[0-9]{2}", r"(yes|no)"]
    for mode in (dict(do_sample=True, num_return_sequences=3), dict(num_beams=3, num_return_sequences=2),
                 dict(num_beams=3, do_sample=True, num_return_sequences=2)):
        proc = RegexProcessor(pats, local_tok, eos_token_id=local_tok.eos_token_id)
        torch.manual_seed(1)
        out = local_model.generate(**local_tok(["Date:", "Answer:"], return_tensors="pt", padding=True),
                                   logits_processor=[proc], max_new_tokens=16, pad_token_id=local_tok.pad_token_id,
                                   **mode)
        grid = proc.decode(out, num_prompts=2)
        assert len(grid) == mode["num_return_sequences"]
        for row in grid:
            for pat, text in zip(pats, row):
                assert re.fullmatch(pat, text), (mode, pat, text)


# ----------------------------------------------------------------- beam sampling (4.46 crash)
@pytest.mark.parametrize("pattern", [r"(yes|no)", r"[0-9]{2}-[0-9]{2}"])
def test_beam_sampling_few_allowed_tokens(deepseek, deepseek_model, pattern):
    """transformers < 4.48 crashed here in torch.multinomial on every seed (all of a
    prompt's running beams at -inf); every returned beam must match."""
    inputs = deepseek(["Answer:", "Q"], return_tensors="pt", padding=True)
    for seed, n in ((0, 1), (1, 4), (2, 2)):
        proc = RegexProcessor(pattern, deepseek)
        torch.manual_seed(seed)
        out = deepseek_model.generate(**inputs, logits_processor=[proc], num_beams=4, do_sample=True,
                                      num_return_sequences=n, max_new_tokens=12)
        gens = proc.generations(out)
        assert len(gens) == 2 and all(len(g.sequences) == n for g in gens)
        for g in gens:
            for s in g.sequences:
                assert s.finished and re.fullmatch(pattern, s.text), (seed, s.text)


def test_legacy_beam_sampling_guard_marks_dead_prompts_done():
    """The guard on a stand-in for transformers < 4.48's _beam_search frame."""
    class Scorer:
        _done = torch.tensor([False, False])

    ninf = float("-inf")
    beam_scores = torch.tensor([ninf, ninf, -1.0, ninf])  # prompt 0: every beam dead
    frame_globals = {"__name__": "transformers.generation.utils", "guard": hf_internals._legacy_beam_sampling_guard}
    exec("def _beam_search(beam_scorer, beam_scores, do_sample):\n    return guard()\n", frame_globals)
    assert frame_globals["_beam_search"](Scorer, beam_scores, True) is True
    assert Scorer._done.tolist() == [True, False]
    assert beam_scores.tolist() == [0.0, 0.0, -1.0, ninf]
    assert frame_globals["_beam_search"](Scorer, beam_scores, False) is False  # beam search without sampling


@pytest.mark.skipif(not OLD_BEAM_SEARCH, reason="transformers >= 4.48 has a rewritten beam search")
def test_legacy_guard_engages_on_old_beam_sampling(local_tok, local_model, monkeypatch):
    calls = []
    real = hf_internals._legacy_beam_sampling_guard
    monkeypatch.setattr(hf_internals, "_legacy_beam_sampling_guard", lambda: calls.append(real()) or calls[-1])
    proc = RegexProcessor(r"(yes|no)", local_tok)
    torch.manual_seed(0)
    local_model.generate(**local_tok(["Q"], return_tensors="pt"), logits_processor=[proc], num_beams=4,
                         do_sample=True, max_new_tokens=8, pad_token_id=local_tok.pad_token_id)
    assert calls and all(calls)


# ----------------------------------------------------------------- pipelines and SentencePiece spaces
def test_pipeline_first_token_space_rule(mistral, mistral_model):
    """4.x pipelines decode the generation after the prompt (a first '▁9' keeps its
    space), 5.x decodes it alone (the space is dropped): the first mask follows.
    Without the rule on 4.x this pipeline returned ' 944-uh'."""
    first = {}

    class Spy(LogitsProcessor):
        def __call__(self, input_ids, scores):
            first.setdefault("scores", scores.clone())
            return scores

    pattern = r"[0-9]{3}-[a-z]{2}"
    proc = RegexProcessor(pattern, mistral, eos_token_id=mistral_model.generation_config.eos_token_id)
    pipe = pipeline("text-generation", model=mistral_model, tokenizer=mistral, device=mistral_model.device)
    torch.manual_seed(0)
    res = pipe("Code:", logits_processor=[proc, Spy()], do_sample=True, top_k=0, num_return_sequences=8,
               max_new_tokens=16, return_full_text=False)
    assert all(re.fullmatch(pattern, r["generated_text"]) for r in res), res
    spaced = mistral.convert_tokens_to_ids("▁")  # Mistral spells " 944" as "▁", "9", "4", "4"
    plain = mistral.convert_tokens_to_ids("9")
    assert torch.isfinite(first["scores"][0, plain])
    assert bool(torch.isfinite(first["scores"][0, spaced])) is (not V4), transformers.__version__


def test_offline_tokenizers_return_only_model_inputs(local_tok, deepseek, mistral):
    for tok in (local_tok, deepseek, mistral):
        assert set(tok(["a b"])) == {"input_ids", "attention_mask"}, type(tok).__name__


# ----------------------------------------------------------------- slow tokenizers
def _slow_mistral(**kwargs):
    pytest.importorskip("sentencepiece")
    offline.mistral_tokenizer()  # writes the model file
    import glob
    import tempfile

    folder = sorted(glob.glob(f"{tempfile.gettempdir()}/hf_constrained_mistral_v1_*"))[0]
    tok = transformers.LlamaTokenizer.from_pretrained(folder, **kwargs)
    if getattr(tok, "sp_model", None) is None:
        pytest.skip(f"transformers {transformers.__version__} has no slow SentencePiece LlamaTokenizer")
    return tok


def test_slow_sentencepiece_with_inexact_decode_is_refused_naming_the_fix():
    tok = _slow_mistral()
    assert tok.decode([tok.convert_tokens_to_ids("<0x20>")]) == " "  # what the fast one strips
    with pytest.raises(UnsupportedTokenizerError, match="convert_slow_tokenizer") as err:
        Vocabulary.from_tokenizer(tok, cache_dir=False)
    assert "<0x20>" in str(err.value)


def test_slow_sentencepiece_with_exact_decode_is_supported():
    tok = _slow_mistral(legacy=False, add_prefix_space=False)
    vocab = Vocabulary.from_tokenizer(tok, cache_dir=False)
    assert not vocab.strip_leading_space
    for text in ["Hello world", "2024-03-15", "Café 中文 😀", "a  b"]:
        ids = tok.encode(text, add_special_tokens=False)
        assert b"".join(vocab.token_bytes[i] for i in ids).decode() == tok.decode(ids)


# ----------------------------------------------------------------- newcomer items
def test_json_parse_keeps_a_complete_document_cut_before_eos(local_tok, local_model):
    """A full match that ran out of tokens before EOS is a result, not Truncated."""
    from hf_constrained import JSONProcessor
    from hf_constrained.structured import Truncated

    proc = JSONProcessor({"const": 7}, local_tok)
    out = local_model.generate(**local_tok(["Number:"], return_tensors="pt"), logits_processor=[proc],
                               max_new_tokens=1, pad_token_id=local_tok.pad_token_id)
    gen = proc.generations(out)[0].sequences[0]
    assert gen.text == "7" and not gen.finished  # no EOS: max_new_tokens cut it
    assert proc.parse(out) == 7
    proc2 = JSONProcessor({"type": "integer", "minimum": 100, "maximum": 999}, local_tok)
    out = local_model.generate(**local_tok(["Number:"], return_tensors="pt"), logits_processor=[proc2],
                               max_new_tokens=1, pad_token_id=local_tok.pad_token_id)
    assert isinstance(proc2.parse(out), Truncated)  # one token cannot spell three digits here
