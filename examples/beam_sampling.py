"""Beam sampling (do_sample=True with num_beams > 1): 4 beams, 4 returned -> a 4 x 3 grid.

    python examples/beam_sampling.py                            # offline, tiny random model
    python examples/beam_sampling.py --model Qwen/Qwen2.5-0.5B-Instruct
"""

import sys

import torch
from _common import PATTERNS, PROMPTS, check, encode, load, parse_args, print_grid, verdict

from hf_constrained import RegexProcessor

NUM_BEAMS = 4


def main() -> int:
    args = parse_args(__doc__)
    tok, model = load(args)
    proc = RegexProcessor(PATTERNS, tok, eos_token_id=model.generation_config.eos_token_id)
    torch.manual_seed(args.seed)
    with torch.no_grad():
        out = model.generate(**encode(tok, PROMPTS, model.device), logits_processor=[proc],
                             do_sample=True, temperature=1.0, num_beams=NUM_BEAMS,
                             num_return_sequences=NUM_BEAMS, max_new_tokens=args.max_new_tokens,
                             pad_token_id=tok.pad_token_id)
    grid, failures = check(proc.generations(out), PATTERNS)
    print_grid(grid, PROMPTS, title="beam")
    return verdict(failures, NUM_BEAMS * len(PROMPTS))


if __name__ == "__main__":
    sys.exit(main())
