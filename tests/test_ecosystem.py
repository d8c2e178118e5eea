"""RegexProcessor inside the rest of transformers: pipelines, streamers,
GenerationConfig objects and device_map="auto" models.

Tiny random-weight models with the real DeepSeek (byte-level BPE) and Mistral
(SentencePiece) tokenizers; everything offline and fast.
"""

import re
import threading

import pytest
import torch
from transformers import GenerationConfig, TextIteratorStreamer, TextStreamer, pipeline

from hf_constrained import RegexProcessor, offline

PATTERN = r"[0-9]{3}-[a-z]{2}"
# Every token spells at least one byte, so a 6-character match plus EOS needs at
# most 7 tokens: with this budget every row finishes and must fullmatch.
MAX_NEW = 16


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """Tiny models gain nothing from more threads, and idle OpenMP workers spinning
    on a busy 2-core machine cost several times the work itself."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def _cache_in_tmp(monkeypatch, tmp_path_factory):
    """Index caches of these tests go to a temporary folder, not ~/.cache."""
    monkeypatch.setenv("HF_CONSTRAINED_CACHE", str(tmp_path_factory.getbasetemp() / "ecosystem_cache"))


@pytest.fixture(params=["deepseek", "mistral"])
def tok_model(request):
    tok = request.getfixturevalue(request.param)
    model = request.getfixturevalue(f"{request.param}_model")
    return tok, model


def _proc(tok, model, pattern=PATTERN):
    return RegexProcessor(pattern, tok, eos_token_id=model.generation_config.eos_token_id)


# ----------------------------------------------------------------- pipeline
def test_pipeline_samples_match(tok_model):
    tok, model = tok_model
    proc = _proc(tok, model)
    pipe = pipeline("text-generation", model=model, tokenizer=tok, device=model.device)  # keep it in place
    torch.manual_seed(0)
    # Two prompts: the pipeline calls generate() once per prompt; the processor
    # notices each new call by itself.
    res = pipe(["Code:", "Another, longer prompt:"], logits_processor=[proc], num_return_sequences=3,
               do_sample=True, max_new_tokens=MAX_NEW, return_full_text=False)
    assert len(res) == 2
    for per_prompt in res:
        assert len(per_prompt) == 3
        for r in per_prompt:
            assert re.fullmatch(PATTERN, r["generated_text"]), r


def test_pipeline_single_prompt_greedy(local_tok, local_model):
    proc = _proc(local_tok, local_model, r"(yes|no), because [a-z]{2,5}")
    pipe = pipeline("text-generation", model=local_model, tokenizer=local_tok, device=local_model.device)
    res = pipe("Question:", logits_processor=[proc], do_sample=False, max_new_tokens=24,
               return_full_text=False)
    assert len(res) == 1
    assert re.fullmatch(r"(yes|no), because [a-z]{2,5}", res[0]["generated_text"])


# ----------------------------------------------------------------- streamers
def test_text_iterator_streamer(tok_model):
    tok, model = tok_model
    proc = _proc(tok, model)
    streamer = TextIteratorStreamer(tok, skip_prompt=True, skip_special_tokens=True, timeout=60)
    inputs = tok(["Code:"], return_tensors="pt")
    result = {}

    def run():
        try:
            torch.manual_seed(1)
            result["out"] = model.generate(**inputs, logits_processor=[proc], streamer=streamer,
                                           do_sample=True, max_new_tokens=MAX_NEW,
                                           pad_token_id=tok.pad_token_id)
        except BaseException as exc:  # surface errors of the thread in the test
            result["error"] = exc
            streamer.end()

    thread = threading.Thread(target=run)
    thread.start()
    streamed = "".join(piece for piece in streamer)
    thread.join(60)
    assert "error" not in result, result.get("error")
    final = proc.decode(result["out"])
    assert streamed == final
    assert re.fullmatch(PATTERN, final), final


def test_text_streamer_stdout(tok_model, capsys):
    tok, model = tok_model
    proc = _proc(tok, model)
    streamer = TextStreamer(tok, skip_prompt=True, skip_special_tokens=True)
    inputs = tok(["Code:"], return_tensors="pt")
    capsys.readouterr()
    out = model.generate(**inputs, logits_processor=[proc], streamer=streamer, do_sample=False,
                         max_new_tokens=MAX_NEW, pad_token_id=tok.pad_token_id)
    printed = capsys.readouterr().out
    final = proc.decode(out)
    assert re.fullmatch(PATTERN, final), final
    assert printed == final + "\n"  # TextStreamer ends the stream with a newline


# ----------------------------------------------------------------- GenerationConfig
def test_generation_config_object(tok_model):
    tok, model = tok_model
    proc = _proc(tok, model)
    cfg = GenerationConfig(do_sample=True, num_return_sequences=4, max_new_tokens=MAX_NEW, top_k=50,
                           temperature=0.8, pad_token_id=tok.pad_token_id,
                           eos_token_id=model.generation_config.eos_token_id)
    inputs = tok(["Code:"], return_tensors="pt")
    torch.manual_seed(2)
    out = model.generate(**inputs, generation_config=cfg, logits_processor=[proc])
    texts = proc.decode(out)
    assert len(texts) == 4
    assert all(re.fullmatch(PATTERN, t) for t in texts), texts


def test_generation_config_batch_per_prompt_patterns(local_tok, local_model):
    """The number of prompts comes from the GenerationConfig object: 3 patterns x 4 samples."""
    pats = [r"[0-9]{2}", r"[a-z]{3}", r"(Paris|Rome)"]
    proc = RegexProcessor(pats, local_tok, eos_token_id=local_model.generation_config.eos_token_id)
    cfg = GenerationConfig(do_sample=True, num_return_sequences=4, max_new_tokens=12,
                           pad_token_id=local_tok.pad_token_id,
                           eos_token_id=local_model.generation_config.eos_token_id)
    inputs = local_tok(["A:", "Bb bb:", "The city of"], return_tensors="pt", padding=True)
    torch.manual_seed(3)
    out = local_model.generate(**inputs, generation_config=cfg, logits_processor=[proc])
    grid = proc.decode(out)
    assert len(grid) == 4 and all(len(row) == 3 for row in grid)
    for row in grid:
        for pat, text in zip(pats, row):
            assert re.fullmatch(pat, text), (pat, text)
    gens = proc.generations(out)
    assert all(s.finished for g in gens for s in g.sequences)


def test_model_generation_config_defaults(local_tok):
    """Settings stored on model.generation_config (no kwargs at the call) are honoured."""
    model = offline.tiny_model(local_tok, seed=5)
    model.generation_config.do_sample = True
    model.generation_config.num_return_sequences = 3
    model.generation_config.max_new_tokens = 12
    proc = RegexProcessor([r"[0-9]{4}", r"[a-z]{2}"], local_tok)
    inputs = local_tok(["Year:", "Two letters:"], return_tensors="pt", padding=True)
    torch.manual_seed(4)
    out = model.generate(**inputs, logits_processor=[proc])
    grid = proc.decode(out)
    assert len(grid) == 3
    for row in grid:
        assert re.fullmatch(r"[0-9]{4}", row[0]) and re.fullmatch(r"[a-z]{2}", row[1]), row


# ----------------------------------------------------------------- device_map="auto"
@pytest.mark.parametrize("tok_name", ["local_tok", "deepseek"])
def test_device_map_auto(tmp_path, request, tok_name):
    """A model placed by accelerate (device_map="auto"): the masks live on the logits' device."""
    pytest.importorskip("accelerate")
    from transformers import AutoModelForCausalLM

    tok = request.getfixturevalue(tok_name)
    offline.tiny_model(tok).save_pretrained(tmp_path)
    model = AutoModelForCausalLM.from_pretrained(tmp_path, device_map="auto")
    proc = RegexProcessor(PATTERN, tok, eos_token_id=model.generation_config.eos_token_id)
    seen = []

    class Spy:  # runs after the constraint: records where the masked logits live
        def __call__(self, input_ids, scores):
            seen.append((scores.device, bool(torch.isfinite(scores).any(-1).all())))
            return scores

    inputs = tok(["Code:", "Longer prompt here:"], return_tensors="pt", padding=True).to(model.device)
    torch.manual_seed(5)
    out = model.generate(**inputs, logits_processor=[proc, Spy()], do_sample=True, num_return_sequences=2,
                         max_new_tokens=MAX_NEW, pad_token_id=tok.pad_token_id)
    grid = proc.decode(out)
    assert len(grid) == 2 and all(len(row) == 2 for row in grid)
    assert all(re.fullmatch(PATTERN, t) for row in grid for t in row), grid
    assert seen and all(dev == out.device for dev, _ in seen)
    assert all(finite for _, finite in seen)
    assert proc._masks is not None and proc._masks.device == seen[-1][0]
