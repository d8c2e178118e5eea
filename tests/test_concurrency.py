"""One processor shared by concurrent generate() calls from several threads.

Every thread checks its own outputs independently of the processor (decoding the
rows itself with the prompt length it knows) and that ``decode()`` returns that
call's grid, even though other calls on the same processor ran in between.
"""

import re
import threading

import regex
import torch

from engine_checks import in_threads
from hf_constrained import RegexProcessor

PATTERN = r"[a-z]{2,6}-\d{2,4}"
PER_PROMPT = [r"[a-z]{2,6}-\d{2,4}", r"(yes|no|maybe)!"]
WORDS = ["alpha", "beta", "gamma delta", "one two three", "x", "quick brown fox jumps", "Paris", "1999"]


def own_texts(tok, out, prompt_len, per):
    """[sample][prompt] texts decoded here, without the processor."""
    seqs = out.sequences if hasattr(out, "sequences") else out
    texts = []
    for row in seqs[:, prompt_len:].tolist():
        ids = []
        for t in row:
            if t == tok.eos_token_id:
                break
            ids.append(t)
        while ids and ids[-1] == tok.pad_token_id:
            ids.pop()
        texts.append(tok.decode(ids, skip_special_tokens=True))
    n = len(texts) // per
    return [[texts[p * per + s] for p in range(n)] for s in range(per)], texts


def squeeze(grid):
    if len(grid) == 1 and len(grid[0]) == 1:
        return grid[0][0]
    if len(grid[0]) == 1:
        return [r[0] for r in grid]
    if len(grid) == 1:
        return grid[0]
    return grid


def run_threads(tok, model, proc, patterns, threads=8, rounds=20):
    errors, checked = [], []
    barrier = threading.Barrier(threads)

    def worker(i):
        try:
            barrier.wait()
            for r in range(rounds):
                k = (i + r) % 4
                if patterns is None:  # one pattern: vary the number of prompts too
                    n_prompts = 1 + (i + r) % 3
                else:
                    n_prompts = len(patterns)
                # thread and round in the text: no two calls share a prompt (see
                # test_tracking for calls that do)
                prompts = [f"t{i} r{r} " + " ".join(WORDS[(i * 3 + r + j) % len(WORDS)]
                                                    for _ in range(1 + (i + j) % 3))
                           for j in range(n_prompts)]
                inputs = tok(prompts, return_tensors="pt", padding=True)
                mode = [dict(do_sample=True, num_return_sequences=1 + i % 3),
                        dict(num_beams=2 + i % 2, num_return_sequences=2),
                        dict(do_sample=False),
                        dict(num_beams=2, do_sample=True, num_return_sequences=1)][k]
                with torch.no_grad():
                    out = model.generate(**inputs, logits_processor=[proc], max_new_tokens=10, **mode)
                per = mode.get("num_return_sequences", 1)
                grid, flat = own_texts(tok, out, inputs["input_ids"].shape[1], per)
                assert proc.decode(out) == squeeze(grid), (i, r, mode)
                for row, text in enumerate(flat):
                    pat = PATTERN if patterns is None else patterns[row // per]
                    ended = (out[row, inputs["input_ids"].shape[1]:] == tok.eos_token_id).any()
                    if ended:
                        assert re.fullmatch(pat, text), (i, r, text)
                    else:
                        assert regex.fullmatch(pat, text.rstrip("\ufffd"), partial=True), (i, r, text)
                checked.append(len(flat))
        except Exception as e:  # reported in the main thread
            errors.append((i, repr(e)))
            barrier.abort()

    in_threads(worker, threads)
    assert not errors, errors[:3]
    assert len(checked) == threads * rounds


def test_eight_threads_one_pattern(local_tok, local_model):
    proc = RegexProcessor(PATTERN, local_tok, cache_dir=False)
    run_threads(local_tok, local_model, proc, None)
    assert len(proc._calls._live) == 0  # every call's tracking state was dropped


def test_eight_threads_pattern_per_prompt(local_tok, local_model):
    proc = RegexProcessor(PER_PROMPT, local_tok, cache_dir=False)
    run_threads(local_tok, local_model, proc, PER_PROMPT)


def test_engine_grows_consistently_from_many_threads(deepseek):
    """Threads walk random allowed tokens on one fresh RegexConstraint (so the DFA
    and the masks are created concurrently); every mask equals the one a second
    constraint computes alone for the same tokens."""
    from engine_checks import grow_from_threads

    from hf_constrained import RegexConstraint

    pattern = r"[a-z]{1,6}(-[0-9]{1,3}){0,4}@[a-z]{2,5}\.(com|org|net)( [A-Z][a-z]{0,8}){0,3}"
    shared = grow_from_threads(lambda: RegexConstraint.from_tokenizer([pattern], deepseek), walks=6, steps=12)
    assert shared.num_states == len(set(shared.dfa._keys))  # no state interned twice
