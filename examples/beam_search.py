"""Beam search: 4 beams per prompt, the best 2 returned -> a 2 x 3 grid.

    python examples/beam_search.py                              # offline, tiny random model
    python examples/beam_search.py --model Qwen/Qwen2.5-0.5B-Instruct

Every beam is constrained, so every returned beam matches; beam scores come
back per (returned beam, prompt) with reshape_samples.
"""

import sys

import torch
from _common import PATTERNS, PROMPTS, check, encode, load, parse_args, print_grid, verdict

from hf_constrained import RegexProcessor, reshape_samples

NUM_BEAMS, NUM_RETURN = 4, 2


def main() -> int:
    args = parse_args(__doc__)
    tok, model = load(args)
    proc = RegexProcessor(PATTERNS, tok, eos_token_id=model.generation_config.eos_token_id)
    with torch.no_grad():
        out = model.generate(**encode(tok, PROMPTS, model.device), logits_processor=[proc],
                             num_beams=NUM_BEAMS, num_return_sequences=NUM_RETURN, do_sample=False,
                             max_new_tokens=args.max_new_tokens, pad_token_id=tok.pad_token_id,
                             return_dict_in_generate=True, output_scores=True)
    scores = reshape_samples(out.sequences_scores, len(PROMPTS))  # (returned beams, prompts)
    print("beam scores (returned beam, prompt):")
    print(scores)
    grid, failures = check(proc.generations(out), PATTERNS)
    print_grid(grid, PROMPTS, title="beam")
    return verdict(failures, NUM_RETURN * len(PROMPTS))


if __name__ == "__main__":
    sys.exit(main())
