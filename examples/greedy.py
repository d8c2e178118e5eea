"""Greedy decoding: one output per prompt, each prompt with its own pattern.

    python examples/greedy.py                                   # offline, tiny random model
    python examples/greedy.py --model Qwen/Qwen2.5-0.5B-Instruct

Greedy decoding under a constraint picks, at every step, the most likely token
among those that can still lead to a match.
"""

import sys

import torch
from _common import PATTERNS, PROMPTS, check, encode, load, parse_args, print_grid, verdict

from hf_constrained import RegexProcessor


def main() -> int:
    args = parse_args(__doc__)
    tok, model = load(args)
    # One pattern per prompt, in prompt order.
    proc = RegexProcessor(PATTERNS, tok, eos_token_id=model.generation_config.eos_token_id)
    with torch.no_grad():
        out = model.generate(**encode(tok, PROMPTS, model.device), logits_processor=[proc],
                             do_sample=False, max_new_tokens=args.max_new_tokens,
                             pad_token_id=tok.pad_token_id)
    print("proc.decode(out) =", proc.decode(out))  # 3 strings: 1 sample x 3 prompts
    grid, failures = check(proc.generations(out), PATTERNS)
    print_grid(grid, PROMPTS)
    return verdict(failures, len(PROMPTS))


if __name__ == "__main__":
    sys.exit(main())
