"""Token healing (issue 14) on both tokenizer families, with samples and beams.

Oracles: a brute-force scan of the whole vocabulary for tokens that could span
the boundary; the tokenizer's own encoding of prompt + completion (its tokens
after the kept prompt must be accepted by the healed constraint); and
``tokenizer.decode`` of kept prompt + generated ids, whose text after the
original prompt must ``re.fullmatch`` the pattern.
"""

from __future__ import annotations

import copy
import re

import numpy as np
import pytest
import torch

from hf_constrained import RegexProcessor
from hf_constrained.constraint import FINISHED
from hf_constrained.errors import ConstraintError, GenerationConflictError
from hf_constrained.healing import heal_count, heal_inputs
from hf_constrained.vocabulary import Vocabulary

PROMPTS = ["Date: ", "Name: Jo", "The year is 20", "Café", "中文", "Hello  ", "x = ["]


def _spanning_starts(tokens: list, data: bytes) -> set:
    """Brute force: positions a where some token starts with data[a:] and is longer."""
    out = set()
    for a in range(len(data)):
        suffix = data[a:]
        if any(t is not None and len(t) > len(suffix) and t.startswith(suffix) for t in tokens):
            out.add(a)
    return out


@pytest.mark.parametrize("family", ["deepseek", "mistral"])
def test_no_vocabulary_token_spans_the_healed_boundary(family, request):
    tok = request.getfixturevalue(family)
    vocab = Vocabulary.from_tokenizer(tok)
    tokens = vocab.token_bytes
    for prompt in PROMPTS:
        ids = tok(prompt, add_special_tokens=False)["input_ids"]
        k = heal_count(vocab, ids)
        pieces = [tokens[i] for i in ids]
        data = b"".join(pieces)
        s = len(b"".join(pieces[: len(ids) - k]))  # byte offset of the healed boundary
        starts = _spanning_starts(tokens, data)
        assert all(a >= s for a in starts), (prompt, k, sorted(starts))  # every spanning token is regenerated
        if k:  # and k is the fewest tokens that achieves it
            s_less = len(b"".join(pieces[: len(ids) - k + 1]))
            assert any(a < s_less for a in starts) or 0x80 <= data[s_less] < 0xC0, (prompt, k)
        data[s:].decode("utf-8")  # whole characters


def test_special_and_template_tokens_are_never_dropped(deepseek, local_tok):
    vocab = Vocabulary.from_tokenizer(deepseek)
    bos = deepseek.bos_token_id
    ids = deepseek(" ", add_special_tokens=False)["input_ids"]
    assert heal_count(vocab, [bos] + ids) == len(ids)  # the space goes, BOS stays
    assert heal_count(vocab, [bos]) == 0
    with pytest.raises(ConstraintError, match="every token of a prompt"):
        heal_inputs(deepseek, {"input_ids": torch.tensor([ids])})
    # a chat template's generation prompt ("\nAssistant: ", plain text here) is protected
    tok = copy.deepcopy(local_tok)
    tok.chat_template = ("{% for m in messages %}User: {{ m['content'] }}{% endfor %}"
                         "{% if add_generation_prompt %}\nAssistant: {% endif %}")
    chat = tok.apply_chat_template([{"role": "user", "content": "When?"}], add_generation_prompt=True,
                                   tokenize=False)
    lv = Vocabulary.from_tokenizer(tok)
    plain = tok(chat, add_special_tokens=False)["input_ids"]
    assert heal_count(lv, plain) > 0  # without the template it would heal into "Assistant: "
    healed = heal_inputs(tok, tok([chat], return_tensors="pt", add_special_tokens=False))
    assert healed.dropped == [0] and healed.prefixes == [""]
    healed = heal_inputs(tok, tok([chat + "Date: "], return_tensors="pt", add_special_tokens=False))
    assert healed.dropped[0] > 0 and healed.prefixes[0].endswith(" ") and "Assistant" not in healed.prefixes[0]


@pytest.mark.parametrize("family", ["deepseek", "mistral"])
def test_the_tokenizers_own_encoding_of_the_healed_text_is_accepted(family, request):
    """encode(prompt + completion): its tokens after the kept prompt, then EOS,
    are a full match of the healed constraint (they were masked out before
    healing whenever a token spans the boundary)."""
    tok = request.getfixturevalue(family)
    cases = [("Date: ", r"(19|20)\d\d-[01]\d", "2024-03"), ("Name: Jo", r"[a-z]+", "hn"),
             ("x = [", r"[0-9, ]+\]", "1, 2]"), ("Hello ", r"[a-z ]+", "world"),
             ("The year is 20", r"[0-9]{2}", "24")]
    proc = RegexProcessor([p for _, p, _ in cases], tok, heal_prompt=True, cache_dir=False)
    enc = tok([c[0] for c in cases], return_tensors="pt", padding=True, add_special_tokens=False)
    inputs = proc.heal(enc)
    spanned = 0
    for r, (prompt, pattern, completion) in enumerate(cases):
        kept = inputs["input_ids"][r][inputs["attention_mask"][r].bool()].tolist()
        full = tok(prompt + completion, add_special_tokens=False)["input_ids"]
        if full[: len(kept)] != kept:
            continue  # the tokenizer re-segments the kept part: nothing to compare
        rest = full[len(kept):] + [proc.eos_token_ids[0]]
        end = proc.constraint.walk(proc.constraint.starts[r: r + 1], np.array([rest]))
        assert end[0] == FINISHED, (prompt, completion, [proc.vocab.token_bytes[t] for t in rest])
        orig = tok(prompt, add_special_tokens=False)["input_ids"]
        spanned += full[: len(orig)] != orig  # the natural tokenization crosses the prompt end
    assert spanned >= 2


def _check_outputs(tok, proc, orig, inputs, out, patterns, rows_per_prompt):
    texts = proc.decode(out, num_prompts=len(patterns))
    flat = [t for row in texts for t in row] if isinstance(texts[0], list) else texts
    gens = [s for g in proc.generations(out) for s in g.sequences]
    p_len = inputs["input_ids"].shape[1]
    finished = 0
    for r, seq in enumerate(gens):
        b = r // rows_per_prompt
        kept = inputs["input_ids"][b][inputs["attention_mask"][b].bool()].tolist()
        original = orig["input_ids"][b][orig["attention_mask"][b].bool()].tolist()
        gen = [t for t in out[r, p_len:].tolist()]
        gen = gen[: len(seq.token_ids)]
        whole = tok.decode(kept + gen, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        start = tok.decode(original, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        if seq.finished:
            finished += 1
            assert whole.startswith(start), (whole, start)
            after = whole[len(start):]
            assert re.fullmatch(patterns[b], after), (after, patterns[b])
            assert seq.text == after
    assert finished >= len(gens) // 2
    assert sorted(flat) == sorted(s.text for s in gens)


@pytest.mark.parametrize("family", ["deepseek", "mistral"])
@pytest.mark.parametrize("mode", ["samples", "beams"])
def test_generation_with_healing_matches_after_the_original_prompt(family, mode, request):
    tok = request.getfixturevalue(family)
    model = request.getfixturevalue(f"{family}_model")
    patterns = [r"(19|20)[0-9]{2}-[01][0-9]", r"[A-Z][a-z]{1,6}", r"[0-9]{2}"]
    proc = RegexProcessor(patterns, tok, heal_prompt=True, cache_dir=False, track_weights=True)
    orig = tok(["Date: ", "Name: Jo", "The year is 20"], return_tensors="pt", padding=True)
    inputs = proc.heal(orig)
    assert proc.healed.prefixes[:2] == [" ", " Jo"]
    torch.manual_seed(0)
    if mode == "samples":
        out = model.generate(**inputs, logits_processor=[proc], do_sample=True, num_return_sequences=4,
                             max_new_tokens=16, top_k=0)
        per = 4
    else:
        out = model.generate(**inputs, logits_processor=[proc], num_beams=3, num_return_sequences=2,
                             max_new_tokens=16)
        per = 2
    _check_outputs(tok, proc, orig, inputs, out, patterns, per)
    seqs = [s for g in proc.generations(out) for s in g.sequences]
    assert all(s.log_weight is not None and s.log_weight < 0 for s in seqs if s.finished)
    assert all(not (s.log_weight > 1e-6) for s in seqs)  # a mass is at most 1 (nan only if untracked)


def test_heal_needs_opt_in_and_a_heal_call(deepseek, deepseek_model):
    proc = RegexProcessor(r"[0-9]+", deepseek, cache_dir=False)
    with pytest.raises(GenerationConflictError, match="heal_prompt=True"):
        proc.heal(deepseek(["Date: "], return_tensors="pt"))
    proc = RegexProcessor(r"[0-9]+", deepseek, heal_prompt=True, cache_dir=False)
    with pytest.raises(GenerationConflictError, match=r"proc\.heal\(inputs\)"):
        deepseek_model.generate(**deepseek(["Date: "], return_tensors="pt"), logits_processor=[proc],
                                max_new_tokens=2)
    with pytest.raises(ConstraintError, match="2 patterns for 1 healed prompts"):
        RegexProcessor(["a", "b"], deepseek, heal_prompt=True, cache_dir=False).heal(
            deepseek(["Date: "], return_tensors="pt"))


def test_readme_section_examples_run(deepseek, capsys):
    """The python blocks of the README's "Faithful samples" section run as written (offline)."""
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    text = readme.split("## Faithful samples", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 2
    for block in blocks:
        scope: dict = {}
        torch.manual_seed(0)
        exec(compile(block, "README.md (Faithful samples)", "exec"), scope)
    printed = capsys.readouterr().out
    assert "exact for the model distribution" in printed and "[' ', '20']" in printed
    import regex  # partial matching: a text max_new_tokens cut off is a prefix of a match

    assert all(regex.fullmatch(r"(19|20)[0-9]{2}-[01][0-9]", t, partial=True)
               for row in scope["texts"] for t in row)


def test_healing_a_pattern_with_shared_definitions(deepseek, deepseek_model):
    """The healed text goes after a leading (?(DEFINE)...) group (which JSONProcessor writes for
    a subschema used twice), not in front of it, where the parser refused the group."""
    import json

    import regex
    from jsonschema import Draft202012Validator

    from hf_constrained import JSONProcessor

    item = {"type": "object", "additionalProperties": False, "required": ["x"],
            "properties": {f"f{i}": {"type": "integer"} for i in range(12)} | {"x": {"type": "boolean"}}}
    schema = {"type": "object", "additionalProperties": False, "required": ["a", "b"],
              "properties": {"a": item, "b": item}}
    pattern = r"(?(DEFINE)(?P<d>[0-9]{2}))(?&d)-(?&d)|x"
    for proc, check in [
            (RegexProcessor(pattern, deepseek, heal_prompt=True, cache_dir=False),
             lambda t: regex.fullmatch(pattern, t)),
            (JSONProcessor(schema, deepseek, heal_prompt=True, cache_dir=False),
             lambda t: Draft202012Validator(schema).is_valid(json.loads(t)))]:
        orig = deepseek(["Answer: "], return_tensors="pt")
        inputs = proc.heal(orig)
        assert proc.healed.prefixes == [" "]
        assert proc.patterns[0].startswith("(?(DEFINE)") and proc.patterns[0].count("\\ ") >= 1
        torch.manual_seed(0)
        out = deepseek_model.generate(**inputs, logits_processor=[proc], do_sample=True, top_k=0,
                                      num_return_sequences=3, max_new_tokens=120)
        for seq in proc.generations(out)[0].sequences:
            if seq.finished:
                assert check(seq.text), seq.text


@pytest.mark.parametrize("family,text", [("deepseek", "Say emoji 😀"), ("mistral", "Price 価")])
def test_a_prompt_cut_inside_a_character_is_a_clear_error(family, text, request):
    """Truncation can cut a prompt between the byte tokens of one character; healing cannot
    write those bytes as text, and says so (it raised a bare UnicodeDecodeError)."""
    tok = request.getfixturevalue(family)
    n = len(tok(text)["input_ids"])
    cut = tok([text], return_tensors="pt", truncation=True, max_length=n - 1)
    proc = RegexProcessor(r"[a-z]+", tok, heal_prompt=True, cache_dir=False)
    with pytest.raises(ConstraintError, match=r"prompt 0 ends inside a UTF-8 character .*at a character boundary"):
        proc.heal(cut)


def test_generate_with_the_original_inputs_after_heal_is_refused(deepseek, deepseek_model):
    """heal() returns the shortened inputs; passing the original ones regenerated the healed text
    after a prompt that still held it, and decode() hid it. Samples, beams and assisted
    generation with the healed inputs go through."""
    proc = RegexProcessor(r"[0-9]{4}", deepseek, heal_prompt=True, cache_dir=False)
    for prompts in (["Year: "], ["Year: ", "Hello world, the year"]):
        orig = deepseek(prompts, return_tensors="pt", padding=True)
        inputs = proc.heal(orig)
        with pytest.raises(GenerationConflictError, match=r"is not what heal\(\) returned"):
            deepseek_model.generate(**orig, logits_processor=[proc], max_new_tokens=6)
        for kw in ({"num_beams": 2, "num_return_sequences": 2}, {"do_sample": True, "num_return_sequences": 3}):
            out = deepseek_model.generate(**inputs, logits_processor=[proc], max_new_tokens=6, **kw)
            assert all(re.fullmatch(r"[0-9]{4}", s.text) for g in proc.generations(out) for s in g.sequences
                       if s.finished)
    inputs = proc.heal(deepseek(["Year: "], return_tensors="pt"))
    out = deepseek_model.generate(**inputs, logits_processor=[proc], max_new_tokens=6,
                                  assistant_model=deepseek_model)
    assert re.fullmatch(r"[0-9]{4}", proc.decode(out))


def test_heal_takes_the_input_ids_alone(deepseek):
    proc = RegexProcessor(r"[0-9]{4}", deepseek, heal_prompt=True, cache_dir=False)
    ids = deepseek(["Year: "], return_tensors="pt")["input_ids"]
    inputs = proc.heal(ids)
    assert inputs["input_ids"].tolist() == [ids[0, :-1].tolist()] and proc.healed.prefixes == [" "]
    assert proc.heal(ids[0].tolist())["input_ids"].tolist() == inputs["input_ids"].tolist()
    with pytest.raises(TypeError, match="takes the tokenizer's output"):
        proc.heal("Year: ")


def test_heal_while_another_thread_generates_is_refused(local_tok, local_model):
    """heal() rebuilds the processor for its prompts; during another thread's generate() that
    restarted the running call's pattern (a silent violation): it is refused, and the running
    call still matches."""
    import threading

    from transformers import LogitsProcessor

    pattern = r"(19|20)[0-9]{2}-[01][0-9]"
    proc = RegexProcessor(pattern, local_tok, heal_prompt=True, cache_dir=False)
    paused, go = threading.Event(), threading.Event()

    class PauseAtStep3(LogitsProcessor):  # makes the interleaving deterministic
        n = 0

        def __call__(self, ids, scores):
            self.n += 1
            if self.n == 3:
                paused.set()
                go.wait(10)
            return scores

    res = {}

    def run():
        inputs = proc.heal(local_tok(["Date: "], return_tensors="pt"))
        out = local_model.generate(**inputs, logits_processor=[proc, PauseAtStep3()], max_new_tokens=16,
                                   pad_token_id=local_tok.pad_token_id)
        res["text"] = proc.decode(out)

    t = threading.Thread(target=run)
    t.start()
    assert paused.wait(30)
    try:
        with pytest.raises(GenerationConflictError, match=r"while a generate\(\) call is using this processor"):
            proc.heal(local_tok(["The year is 20"], return_tensors="pt"))
    finally:
        go.set()
        t.join(60)
    assert re.fullmatch(pattern, res["text"]), res
    proc.heal(local_tok(["The year is 20"], return_tensors="pt"))  # once it is over: fine
