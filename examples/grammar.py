"""Context-free grammars: arithmetic with precedence and a SQL SELECT subset.

    python examples/grammar.py                                   # offline, tiny random model
    python examples/grammar.py --model Qwen/Qwen2.5-0.5B-Instruct

Beam search with two returned beams per prompt, one grammar per prompt. Every
finished output is checked with Lark's own Earley parser; an output cut off by
--max-new-tokens is checked to be a prefix of a sentence. Exits non-zero on a
violation.
"""

import sys

import torch
from _common import encode, load, parse_args
from lark import Lark

from hf_constrained import GrammarProcessor

ARITH = r"""
?start: sum
?sum: sum "+" product | sum "-" product | product
?product: product "*" atom | product "/" atom | atom
?atom: NUMBER | "-" atom | "(" sum ")"
%import common.NUMBER
%ignore " "
"""

SQL = r"""
start: "SELECT " columns " FROM " NAME [" WHERE " cond] [" LIMIT " INT]
columns: "*" | NAME (", " NAME)*
?cond: cond " OR " pred | cond " AND " pred | pred
?pred: NAME OP (NAME | INT | STRING) | "(" cond ")"
OP: "=" | "<" | ">" | "<>"
STRING: /'[a-z ]*'/
NAME: /[a-z_][a-z0-9_]*/
%import common.INT
"""

PROMPTS = ["Compute: ", "Query: "]


def main() -> int:
    args = parse_args(__doc__, max_new_tokens=24)
    tok, model = load(args)
    torch.manual_seed(args.seed)
    grammars = [ARITH, SQL]
    proc = GrammarProcessor(grammars, tok, eos_token_id=model.generation_config.eos_token_id)
    with torch.no_grad():
        out = model.generate(**encode(tok, PROMPTS, model.device), logits_processor=[proc],
                             num_beams=3, num_return_sequences=2, max_new_tokens=args.max_new_tokens,
                             pad_token_id=tok.pad_token_id)
    parsers = [Lark(g, parser="earley", lexer="dynamic_complete") for g in grammars]
    failures = 0
    for b, gen in enumerate(proc.generations(out)):
        for s in gen.sequences:
            if s.finished:
                try:
                    parsers[b].parse(s.text)
                    ok = "sentence"
                except Exception:
                    ok, failures = "NOT A SENTENCE", failures + 1
            else:
                live = proc.constraint.walk(proc.constraint.starts[[b]], [s.token_ids])[0] != 0
                ok = "prefix (cut off)" if live else "NOT A PREFIX"
                failures += not live
            print(f"{PROMPTS[b]!r:14} {s.text!r:60} {ok}")
    print("all outputs valid" if not failures else f"{failures} invalid outputs")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
