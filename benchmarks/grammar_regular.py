"""Regular rules read as single lexemes: per-call time before / after, back to back (offline, CPU).

    python benchmarks/grammar_regular.py [--steps 32] [--seeds 5] [--eos-boost 0] [--json-out FILE]

The GBNF arithmetic and JSON grammars of ``grammar_peers.py`` (GBNF makes every literal and
character class a terminal, so without the rewrite the parser runs at every byte), the 129k
DeepSeek tokenizer and the random-weight tiny Llama, one row. ``before``: the grammar read
with ``from_lark(..., regular=False)``; ``after``: as ``GrammarProcessor`` reads it (regular
rules rewritten). For every seed both variants run one after the other (the order
alternating), each on a fresh processor with the disk cache off, so both meet the same new
configurations:

* ``build``: a read grammar -> processor with its start mask; ``first call``: its first call;
* ``sampled``: ``generate(do_sample=True)``, per call median / p99 over all seeds (first call
  excluded); the EOS logit gets ``--eos-boost`` (default 0: random rows run all ``--steps``);
  rows that ended with EOS are parsed by Lark's Earley parser on the original grammar, and both
  variants must sample the same texts (their masks are the same);
* ``replayed``: fixed documents fed token by token (``grammar_bench.replay``, which also checks
  that the document's own tokens are never masked out), per call median / p99;
* ``first mask``: build time (median of 7) for these grammars and the SQL subsets (Lark with
  ``%ignore``, the issue's first-mask target; GBNF), and two SQL queries replayed on the GBNF
  SQL grammar (a limit error is reported as the result).
"""

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hf_constrained import GrammarProcessor, offline  # noqa: E402
from hf_constrained.grammar import from_lark, gbnf_to_lark  # noqa: E402
from grammar_bench import JSON_DOCS, Timed, p99, replay, sql_grammar  # noqa: E402
from grammar_peers import ARITH_GBNF, JSON_GBNF, PROMPT, BoostEOS, checker, outputs, sql_gbnf  # noqa: E402

GRAMMARS = {"arith": ARITH_GBNF, "json": JSON_GBNF}
DOCS = {"arith": ["12*(3.5-40)/-7+(1+2)*3", "((1)) + -2.25 * (60 - 7.125)", "-(-(9.75))/(3+4)*100"],
        "json": JSON_DOCS}


def run(cfg, tok, model, steps, seed, boost):
    t = time.perf_counter()
    proc = GrammarProcessor(cfg, tok, cache_dir=False)
    build = time.perf_counter() - t
    timed = Timed(proc)
    inputs = tok([PROMPT], return_tensors="pt")
    torch.manual_seed(seed)
    out = model.generate(**inputs, logits_processor=[BoostEOS(tok.eos_token_id, boost), timed], do_sample=True,
                         max_new_tokens=steps, pad_token_id=tok.pad_token_id)
    return build, timed.times, outputs(out, inputs["input_ids"].shape[1], tok)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--eos-boost", type=float, default=0.0,
                    help="added to the EOS logit (grammar_peers uses 10: rows then end after a few tokens)")
    ap.add_argument("--json-out")
    args = ap.parse_args()
    torch.set_num_threads(1)
    tok = offline.deepseek_tokenizer()
    model = offline.tiny_model(tok)
    GrammarProcessor('start: "a"', tok, cache_dir=False)  # vocabulary and imports, untimed
    res = {"load_before": os.getloadavg()}
    for name, gbnf in GRAMMARS.items():
        lark_text = gbnf_to_lark(gbnf)
        valid = checker(name, gbnf)
        variants = {"before": from_lark(lark_text, start="start", regular=False),
                    "after": from_lark(lark_text, start="start")}
        acc = {v: {"build": [], "first": [], "calls": [], "texts": [], "valid": 0, "finished": 0, "replay": []}
               for v in variants}
        for seed in range(args.seeds):
            order = list(variants) if seed % 2 == 0 else list(variants)[::-1]
            for v in order:
                build, times, texts = run(variants[v], tok, model, args.steps, seed, args.eos_boost)
                a = acc[v]
                a["replay"].extend(replay(GrammarProcessor(variants[v], tok, cache_dir=False), tok, DOCS[name]))
                a["build"].append(build)
                a["first"].append(times[0])
                a["calls"].extend(times[1:])
                a["texts"].append([t for t, _ in texts])
                fin = [t for t, f in texts if f]
                a["finished"] += len(fin)
                a["valid"] += sum(map(valid, fin))
        g = variants
        res[name] = {v: {"rules": len(g[v].rules), "terminals": len(g[v].terminals),
                         "build_ms": statistics.median(a["build"]) * 1e3,
                         "first_call_ms": statistics.median(a["first"]) * 1e3,
                         "call_ms_median": statistics.median(a["calls"]) * 1e3, "call_ms_p99": p99(a["calls"]) * 1e3,
                         "calls": len(a["calls"]), "eos_valid": f"{a['valid']}/{a['finished']}",
                         "replay_ms_median": statistics.median(a["replay"]) * 1e3,
                         "replay_ms_p99": p99(a["replay"]) * 1e3, "replay_calls": len(a["replay"])}
                     for v, a in acc.items()}
        res[name]["same_texts"] = acc["before"]["texts"] == acc["after"]["texts"]
        print(name, json.dumps(res[name]), flush=True)
    res["first_mask_ms"] = {}
    for name, text in (("arith", gbnf_to_lark(ARITH_GBNF)), ("json", gbnf_to_lark(JSON_GBNF)),
                       ("sql (Lark, %ignore)", sql_grammar()), ("sql (GBNF)", gbnf_to_lark(sql_gbnf()))):
        variants = {"before": from_lark(text, regular=False), "after": from_lark(text)}
        ts = {v: [] for v in variants}
        for i in range(7):
            for v in (list(variants) if i % 2 == 0 else list(variants)[::-1]):
                t = time.perf_counter()
                GrammarProcessor(variants[v], tok, cache_dir=False)
                ts[v].append((time.perf_counter() - t) * 1e3)
        res["first_mask_ms"][name] = {v: {"ms": statistics.median(ts[v]), "rules": len(variants[v].rules),
                                          "terminals": len(variants[v].terminals)} for v in variants}
    queries = ["SELECT a, b FROM t WHERE a > 1 AND b < 2 ORDER BY a DESC LIMIT 10",
               "select count(*) from users u join orders o on u.id = o.uid group by u.name"]
    text = gbnf_to_lark(sql_gbnf())
    res["sql_gbnf_replay"] = {}
    for v, cfg in (("before", from_lark(text, regular=False)), ("after", from_lark(text))):
        try:
            ts = replay(GrammarProcessor(cfg, tok, cache_dir=False), tok, queries)
            res["sql_gbnf_replay"][v] = f"{statistics.median(ts) * 1e3:.1f} / {p99(ts) * 1e3:.0f} ms"
        except Exception as e:  # the limits are part of the result
            res["sql_gbnf_replay"][v] = f"{type(e).__name__}: {str(e)[:90]}"
    res["load_after"] = os.getloadavg()
    print("| grammar | rules / terminals | build | first call | sampled, per call median / p99 | "
          "replayed documents, per call median / p99 | EOS outputs valid |")
    print("|---|---|---|---|---|---|---|")
    for name in GRAMMARS:
        for v in ("before", "after"):
            r = res[name][v]
            print(f"| {name}, {v} | {r['rules']} / {r['terminals']} | {r['build_ms']:.1f} ms | "
                  f"{r['first_call_ms']:.1f} ms | {r['call_ms_median']:.2f} / {r['call_ms_p99']:.2f} ms | "
                  f"{r['replay_ms_median']:.2f} / {r['replay_ms_p99']:.2f} ms | {r['eos_valid']} |")
    print("\n| grammar | before: rules / terminals, first mask | after: rules / terminals, first mask |")
    print("|---|---|---|")
    for name, r in res["first_mask_ms"].items():
        b, a = r["before"], r["after"]
        print(f"| {name} | {b['rules']} / {b['terminals']}, {b['ms']:.1f} ms | {a['rules']} / {a['terminals']}, "
              f"{a['ms']:.1f} ms |")
    print(f"\nSQL (GBNF), replaying {len(queries)} queries, per call median / p99: "
          f"before {res['sql_gbnf_replay']['before']}; after {res['sql_gbnf_replay']['after']}")
    print(f"same sampled texts before/after: {[res[n]['same_texts'] for n in GRAMMARS]}; "
          f"load average before {res['load_before'][0]:.1f}, after {res['load_after'][0]:.1f}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
