"""Grammar benchmarks (offline, 129k DeepSeek tokenizer, CPU).

    python benchmarks/grammar_bench.py [--steps 24] [--json-out FILE]

1. text -> first mask of a ~120-rule SQL SELECT subset, as a user experiences it (the
   tokenizer's Vocabulary is built once beforehand, as every processor of a process shares it):
   ``cold`` (disk cache off: Lark reads the text, lexer DFA, parser, configuration automaton,
   first mask), ``in_process`` (a second processor for the same text: the read grammar is
   memoised) and ``disk`` (a new process whose disk cache holds the read grammar and the
   states: measured inside a child process, from the text to the first mask);
2. processor time per generate() step, JSON-like arrays as a grammar vs the same
   language as a regex, at 1 and 64 sampled rows (median over steps and 3 repeats);
3. p99 of the processor's per-call time at one row (grammar path), in generate() and
   replaying real JSON documents token by token through a fresh processor (``cold``: every
   state new) and the same processor again (``warm``).
The peers (xgrammar, transformers-cfg) are compared in ``grammar_peers.py``.
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hf_constrained import GrammarProcessor, RegexProcessor, offline, schema_to_regex  # noqa: E402
from hf_constrained.vocabulary import Vocabulary  # noqa: E402

FUNCS = ["count", "sum", "avg", "min", "max", "lower", "upper", "length", "abs", "round", "coalesce",
         "trim", "substr", "replace", "now", "date", "year", "month", "day", "cast"]
KEYWORDS = ["select", "distinct", "from", "where", "and", "or", "not", "group", "by", "having", "order",
            "asc", "desc", "limit", "offset", "as", "join", "left", "right", "inner", "outer", "on",
            "in", "is", "null", "like", "between", "union", "all", "exists", "case", "when", "then",
            "else", "end", "true", "false"]


def sql_grammar() -> str:
    kw = "\n".join(f'{k.upper()}: "{k}"i' for k in KEYWORDS)
    funcs = " | ".join(f'"{f}"i' for f in FUNCS)
    return rf"""
start: query ";"?
query: select_core (UNION ALL? select_core)* [order_by] [limit]
select_core: SELECT DISTINCT? result_columns FROM sources [where] [group_by] [having]
result_columns: result_column ("," result_column)*
result_column: "*" | NAME "." "*" | expr [AS? NAME]
sources: source (join)*
source: NAME [AS? NAME] | "(" query ")" AS? NAME
join: (LEFT OUTER? | RIGHT OUTER? | INNER)? JOIN source ON expr
where: WHERE expr
group_by: GROUP BY expr ("," expr)*
having: HAVING expr
order_by: ORDER BY order_item ("," order_item)*
order_item: expr (ASC | DESC)?
limit: LIMIT INT (OFFSET INT)?
?expr: expr OR conj | conj
?conj: conj AND neg | neg
?neg: NOT neg | cmp
?cmp: sum CMP sum | sum IS NOT? NULL | sum NOT? IN "(" (expr ("," expr)* | query) ")"
    | sum NOT? LIKE STRING | sum NOT? BETWEEN sum AND sum | EXISTS "(" query ")" | sum
?sum: sum ADD product | product
?product: product MUL unary | unary
?unary: "-" unary | atom
?atom: literal | column_ref | func_call | case_expr | "(" expr ")" | "(" query ")"
literal: INT | DECIMAL | STRING | NULL | TRUE | FALSE
column_ref: NAME ("." NAME)?
func_call: FUNC "(" (DISTINCT? expr ("," expr)* | "*")? ")" | CAST "(" expr AS NAME ")"
case_expr: CASE (WHEN expr THEN expr)+ (ELSE expr)? END
FUNC: {funcs}
CMP: "=" | "<>" | "!=" | "<" | "<=" | ">" | ">="
ADD: "+" | "-" | "||"
MUL: "*" | "/" | "%"
STRING: /'([^'\n]|'')*'/
NAME: /[a-z_][a-z0-9_]*/ | /"[^"\n]+"/
CAST: "cast"i
{kw}
%import common.INT
%import common.DECIMAL
%import common.WS
%ignore WS
"""


ARRAY_GRAMMAR = r"""
start: "[" [ws num (ws "," ws num)*] ws "]"
ws: " "?
num: /-?(0|[1-9][0-9]{0,8})/
"""
# any JSON value, with the lexemes and optional single spaces of schema_to_regex({}) (whose
# regex stops at nesting depth 3: the same language up to that depth)
JSON_GRAMMAR = r"""
?start: value
?value: "null" | "true" | "false" | NUMBER | STRING | array | object
array: "[" ws "]" | "[" ws value (ws "," ws value)* ws "]"
object: "{" ws "}" | "{" ws pair (ws "," ws pair)* ws "}"
pair: STRING ws ":" ws value
ws: " "?
NUMBER: /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/
STRING: /"(?:[^"\\\x00-\x1f\ud800-\udfff]|\\["\\\/bfnrt]|\\u(?:[0-9a-cA-Ce-fE-F][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}))*"/
"""
ARRAY_REGEX = r"\[( ?-?(0|[1-9][0-9]{0,8})( ?, ?-?(0|[1-9][0-9]{0,8}))*)? ?\]"


class Timed:
    def __init__(self, proc):
        self.proc, self.times = proc, []

    def __call__(self, input_ids, scores):
        t = time.perf_counter()
        out = self.proc(input_ids, scores)
        self.times.append(time.perf_counter() - t)
        return out


def per_step(make, tok, model, rows, steps, repeats=3):
    meds, all_times = [], []
    for r in range(repeats):
        proc = make()
        timed = Timed(proc)
        torch.manual_seed(r)
        model.generate(**tok(["Data:"], return_tensors="pt"), logits_processor=[timed], do_sample=True,
                       num_return_sequences=rows, max_new_tokens=steps, pad_token_id=tok.pad_token_id)
        meds.append(statistics.median(timed.times[1:] or timed.times))
        all_times.extend(timed.times[1:])
    return statistics.median(meds) * 1e3, all_times


#: JSON documents within nesting depth 2 (the depth of schema_to_regex({})'s any-value regex),
#: replayed token by token
JSON_DOCS = ['{"name": "Ada Lovelace", "born": 1815, "tags": ["math", "poetry"], "alive": false}',
             '[1, 2.5, -3e2, {"a": null, "b": true}, "x\\n y", []]',
             '{"items": [1, 2, 3], "ok": {"id": 2, "tag": "q"}, "total": -2.5e-3}']


def p99(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.99 * (len(xs) - 1))))]


def replay(proc, tok, docs):
    """Per-call times of ``proc`` fed each document's tokens (then EOS), one row."""
    times = []
    prompt = tok(["Data:"], return_tensors="pt")["input_ids"]
    scores = torch.zeros(1, len(tok))
    for d in docs:
        cur = prompt
        for t in tok.encode(d, add_special_tokens=False) + [tok.eos_token_id]:
            s = scores.clone()
            t0 = time.perf_counter()
            out = proc(cur, s)
            times.append(time.perf_counter() - t0)
            if not out[0, t] > -1e30:
                raise AssertionError(f"the document's own token {t} was masked out in {d!r}")
            cur = torch.cat([cur, torch.tensor([[t]])], 1)
    return times


CHILD = r"""
import sys, tempfile, time
sys.path.insert(0, sys.argv[1])
from hf_constrained import GrammarProcessor, offline
from hf_constrained.vocabulary import Vocabulary
tok = offline.deepseek_tokenizer()
Vocabulary.from_tokenizer(tok, cache_dir=sys.argv[2])
text = open(sys.argv[3]).read()
t = time.perf_counter()
GrammarProcessor(text, tok, cache_dir=sys.argv[2])
print((time.perf_counter() - t) * 1e3)
"""


def disk_first_mask(text, runs=3):
    """Median text -> first mask (ms) in new processes whose disk cache holds this text."""
    import subprocess
    import tempfile
    root = str(Path(__file__).resolve().parents[1])
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "grammar.lark"
        path.write_text(text)
        cmd = [sys.executable, "-c", CHILD, root, d, str(path)]
        subprocess.run(cmd, check=True, capture_output=True)   # fills the cache
        times = [float(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.split()[-1])
                 for _ in range(runs)]
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--json-out")
    args = ap.parse_args()
    torch.set_num_threads(1)
    tok = offline.deepseek_tokenizer()
    Vocabulary.from_tokenizer(tok)
    model = offline.tiny_model(tok)
    res = {}
    from hf_constrained.grammar.cfg import from_lark
    g = sql_grammar()
    res["sql_rules"] = len(from_lark(g).rules)
    reads, firsts, cold, warm = [], [], [], []
    for _ in range(7):
        t = time.perf_counter()
        cfg = from_lark(g)           # Lark reads the text; EBNF expanded, terminals checked
        t1 = time.perf_counter()
        GrammarProcessor(cfg, tok, cache_dir=False)   # lexer DFA, parser, configuration automaton, first mask
        reads.append((t1 - t) * 1e3)
        firsts.append((time.perf_counter() - t1) * 1e3)
        cold.append(reads[-1] + firsts[-1])
        t = time.perf_counter()
        GrammarProcessor(g, tok, cache_dir=False)     # the same text again: read grammar memoised
        warm.append((time.perf_counter() - t) * 1e3)
    res["sql_read_grammar_ms_median"] = statistics.median(reads)
    res["sql_first_mask_ms_median"] = statistics.median(firsts)
    res["sql_first_mask_ms_all"] = [round(x, 1) for x in firsts]
    res["sql_text_to_first_mask_ms_cold_median"] = statistics.median(cold)
    res["sql_text_to_first_mask_ms_in_process_median"] = statistics.median(warm)
    res["sql_text_to_first_mask_ms_disk_median"] = disk_first_mask(g)
    pairs = {"json": (JSON_GRAMMAR, schema_to_regex({})), "int_array": (ARRAY_GRAMMAR, ARRAY_REGEX)}
    for name, (grammar, pattern) in pairs.items():
        for rows in (1, 64):
            gm, gt = per_step(lambda: GrammarProcessor(grammar, tok, cache_dir=False), tok, model, rows, args.steps)
            rm, rt = per_step(lambda: RegexProcessor(pattern, tok, cache_dir=False), tok, model, rows, args.steps)
            res[f"{name}_grammar_ms_per_step_{rows}"] = gm
            res[f"{name}_regex_ms_per_step_{rows}"] = rm
            res[f"{name}_ratio_{rows}"] = gm / rm
            if rows == 1:
                for k, ts in (("grammar", gt), ("regex", rt)):
                    ts.sort()
                    res[f"{name}_{k}_p99_ms_1row"] = ts[int(0.99 * (len(ts) - 1))] * 1e3
    for kind, make in (("grammar", lambda: GrammarProcessor(JSON_GRAMMAR, tok, cache_dir=False)),
                       ("regex", lambda: RegexProcessor(schema_to_regex({}), tok, cache_dir=False))):
        proc = make()
        for phase in ("cold", "warm"):
            ts = replay(proc, tok, JSON_DOCS)
            res[f"json_replay_{kind}_{phase}_median_ms"] = statistics.median(ts) * 1e3
            res[f"json_replay_{kind}_{phase}_p99_ms"] = p99(ts) * 1e3
    print(json.dumps(res, indent=1))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
