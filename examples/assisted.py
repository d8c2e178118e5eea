"""Assisted decoding: a draft model (assistant_model=) and prompt lookup (prompt_lookup_num_tokens=).

    python examples/assisted.py                                 # offline: two tiny random models
    python examples/assisted.py --model Qwen/Qwen2.5-1.5B-Instruct --assistant Qwen/Qwen2.5-0.5B-Instruct

The draft proposes several tokens, the main model verifies them and the
constraint masks the main model's logits. Drafted tokens that the main model
rejects are rolled back; the processor follows the rollback from the tokens
themselves. transformers runs assisted decoding one prompt at a time
(batch size 1, num_return_sequences=1), so the prompts are looped over.
"""

import sys

import torch
from _common import PATTERNS, PROMPTS, check, encode, load, parse_args, print_grid, verdict

from hf_constrained import RegexProcessor, offline


def add_assistant(parser):
    parser.add_argument("--assistant", default=None,
                        help="draft model for --model (same tokenizer); default: prompt lookup only")


def main() -> int:
    args = parse_args(__doc__, add_assistant)
    # transformers' assisted decoding trips over its own deprecation warning
    # (generation_config plus keyword arguments, passed internally): mute it.
    from transformers.utils import logging as hf_logging
    hf_logging.set_verbosity_error()
    tok, model = load(args)
    if args.model is None:
        assistant = offline.tiny_model(tok, seed=1).to(model.device).eval()  # same tokenizer, other weights
    elif args.assistant:
        from transformers import AutoModelForCausalLM

        assistant = AutoModelForCausalLM.from_pretrained(args.assistant).to(model.device).eval()
    else:
        assistant = None
        print("no --assistant given: only prompt lookup decoding runs")
    modes = {}
    if assistant is not None:
        modes["draft model, greedy"] = dict(assistant_model=assistant, do_sample=False)
        modes["draft model, sampling"] = dict(assistant_model=assistant, do_sample=True)
    modes["prompt lookup, greedy"] = dict(prompt_lookup_num_tokens=3, do_sample=False)
    modes["prompt lookup, sampling"] = dict(prompt_lookup_num_tokens=3, do_sample=True)

    torch.manual_seed(args.seed)
    failures = total = 0
    eos = model.generation_config.eos_token_id
    for name, kwargs in modes.items():
        row = []
        for prompt, pattern in zip(PROMPTS, PATTERNS):
            proc = RegexProcessor(pattern, tok, eos_token_id=eos)
            with torch.no_grad():
                out = model.generate(**encode(tok, [prompt], model.device), logits_processor=[proc],
                                     max_new_tokens=args.max_new_tokens, pad_token_id=tok.pad_token_id,
                                     **kwargs)
            cells, bad = check(proc.generations(out), [pattern])
            row.append(cells[0][0])
            failures += bad
            total += 1
        print(f"\n== {name}")
        print_grid([row], PROMPTS)
    return verdict(failures, total)


if __name__ == "__main__":
    sys.exit(main())
