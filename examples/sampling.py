"""Sampling: 7 samples for each of 3 prompts, 3 different patterns -> a 7 x 3 grid.

    python examples/sampling.py                                 # offline, tiny random model
    python examples/sampling.py --model Qwen/Qwen2.5-0.5B-Instruct

temperature / top_k / top_p act on the constrained distribution: the mask is
applied first, so every sample matches whatever the sampling settings.
"""

import sys

import torch
from _common import PATTERNS, PROMPTS, check, encode, load, parse_args, print_grid, verdict

from hf_constrained import RegexProcessor

NUM_SAMPLES = 7


def main() -> int:
    args = parse_args(__doc__)
    tok, model = load(args)
    proc = RegexProcessor(PATTERNS, tok, eos_token_id=model.generation_config.eos_token_id)
    torch.manual_seed(args.seed)
    with torch.no_grad():
        out = model.generate(**encode(tok, PROMPTS, model.device), logits_processor=[proc],
                             do_sample=True, temperature=0.9, top_k=50, top_p=0.95,
                             num_return_sequences=NUM_SAMPLES, max_new_tokens=args.max_new_tokens,
                             pad_token_id=tok.pad_token_id)
    texts = proc.decode(out)  # nested list [sample][prompt]: 7 x 3
    assert len(texts) == NUM_SAMPLES and all(len(row) == len(PROMPTS) for row in texts)
    grid, failures = check(proc.generations(out), PATTERNS)
    print_grid(grid, PROMPTS)
    return verdict(failures, NUM_SAMPLES * len(PROMPTS))


if __name__ == "__main__":
    sys.exit(main())
