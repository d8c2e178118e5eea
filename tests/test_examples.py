"""Every example script runs offline and exits 0 (each verifies its own outputs).

Interpreter start-up (importing torch and transformers) costs more than any
example, so the single-process examples run one after the other in ONE
subprocess, each executed as ``__main__`` from its file with its own
``sys.argv`` (exactly what ``python examples/NAME.py ARGS`` runs), with its exit
status and output recorded. ``distributed.py`` runs for real under
``python -m torch.distributed.run --nproc_per_node=2`` at the same time.

They use the small in-memory tokenizer (``--tokenizer local``) to stay fast;
``greedy.py`` also runs with its default tokenizer (DeepSeek when installed).
"""

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


RUNS = {  # name -> (script, arguments)
    "greedy": ("greedy", ["--tokenizer", "local"]),
    "sampling": ("sampling", ["--tokenizer", "local"]),
    "beam_search": ("beam_search", ["--tokenizer", "local"]),
    "beam_sampling": ("beam_sampling", ["--tokenizer", "local"]),
    "assisted": ("assisted", ["--tokenizer", "local"]),
    "greedy-default-tokenizer": ("greedy", []),
    "grammar": ("grammar", []),
}

EXPECT = {  # a line each example prints when all its outputs match
    "greedy": "OK: all 3 outputs match",
    "greedy-default-tokenizer": "OK: all 3 outputs match",
    "sampling": "OK: all 21 outputs match",
    "beam_search": "OK: all 6 outputs match",
    "beam_sampling": "OK: all 12 outputs match",
    "assisted": "OK: all 12 outputs match",
    "grammar": "all outputs valid",
    "distributed": "OK: 42 of 42 outputs from 2 process(es) (gloo)",
}

RUNNER = """
import contextlib, io, json, runpy, sys, time, traceback
examples, runs = sys.argv[1], json.loads(sys.argv[2])
sys.path.insert(0, examples)
for name, (script, args) in runs.items():
    path = f"{examples}/{script}.py"
    sys.argv = [path, *args]
    buf = io.StringIO()
    t0 = time.perf_counter()
    code = 0
    with contextlib.redirect_stdout(buf):
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            print(traceback.format_exc())
            code = 99
    print(json.dumps({"name": name, "code": code, "seconds": time.perf_counter() - t0,
                      "out": buf.getvalue()}), flush=True)
"""


@pytest.fixture(scope="module", autouse=True)
def results(tmp_path_factory):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONIOENCODING"] = "utf-8"
    env["OMP_NUM_THREADS"] = "1"  # several interpreters share few cores
    env["CUDA_VISIBLE_DEVICES"] = ""  # offline CPU run, gloo backend
    env["HF_CONSTRAINED_CACHE"] = str(tmp_path_factory.mktemp("examples_cache"))
    opts = dict(cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8")
    dist = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--nnodes=1",
                             "--master_addr=127.0.0.1", f"--master_port={_free_port()}",
                             str(EXAMPLES / "distributed.py"), "--tokenizer", "local"], **opts)
    runner = subprocess.Popen([sys.executable, "-c", RUNNER, str(EXAMPLES), json.dumps(RUNS)], **opts)
    try:
        out, err = runner.communicate(timeout=300)
        res = {}
        for line in out.splitlines():
            if line.startswith("{"):
                r = json.loads(line)
                res[r["name"]] = r
        for name in RUNS:
            res.setdefault(name, {"name": name, "code": None, "seconds": 0.0,
                                  "out": f"no result; runner exit {runner.returncode}\n{err[-3000:]}"})
        out, err = dist.communicate(timeout=300)
        res["distributed"] = {"name": "distributed", "code": dist.returncode, "seconds": None,
                              "out": out + "\n" + err[-3000:]}
        yield res
    finally:
        for p in (dist, runner):
            if p.poll() is None:
                p.kill()
                p.communicate()


@pytest.mark.parametrize("name", list(EXPECT))
def test_example_runs_offline_and_verifies(results, name):
    r = results[name]
    assert r["code"] == 0, f"{name} exited {r['code']}\n{r['out'][-4000:]}"
    assert EXPECT[name] in r["out"], r["out"][-3000:]
    assert "MISMATCH" not in r["out"]
    assert "UNTRAINED RANDOM WEIGHTS" in r["out"]  # says plainly that the text is meaningless


def test_examples_are_all_covered():
    scripts = {p.stem for p in EXAMPLES.glob("*.py") if not p.stem.startswith("_")}
    assert scripts == {script for script, _ in RUNS.values()} | {"distributed"}


# ----------------------------------------------------------------- README code
def _readme_block(marker: str) -> str:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)
    found = [b for b in blocks if marker in b]
    assert found, f"no README python block contains {marker!r}"
    return found[0]


def test_readme_headline_example_is_true_as_written(deepseek, deepseek_model):
    """The first example, run as written: every one of the 7 x 3 cells fullmatches."""
    import torch

    code = _readme_block("texts[s][b] fullmatches patterns[b]")
    ns = {"tokenizer": deepseek, "model": deepseek_model}
    torch.manual_seed(0)
    exec(code, ns)
    texts, patterns = ns["texts"], ns["patterns"]
    assert len(texts) == 7 and all(len(row) == 3 for row in texts)
    for row in texts:
        for pat, text in zip(patterns, row):
            assert re.fullmatch(pat, text), (pat, text)
    assert all(s.finished for g in ns["proc"].generations(ns["out"]) for s in g.sequences)


def test_readme_generation_modes_block_runs(local_tok, local_model):
    """The "Usage by generation mode" block, assisted generation included, runs as written."""
    import torch

    from hf_constrained import offline

    code = _readme_block("# beam sampling")
    ns = {"tok": local_tok, "model": local_model, "draft_model": offline.tiny_model(local_tok, seed=1)}
    from transformers.generation import candidate_generator

    if hasattr(candidate_generator, "AssistedCandidateGeneratorDifferentTokenizers"):
        pytest.importorskip("mistral_common")
        ns["other_tok"] = offline.mistral_tokenizer()  # a draft with another tokenizer
        ns["other_draft"] = offline.tiny_model(ns["other_tok"], seed=2)
    else:  # no universal assisted generation in this transformers: the block without it
        cut = code.index("# an assistant with its own tokenizer")
        code = code[:cut] + code[code.index("texts = proc.decode(out)", cut):]
    torch.manual_seed(0)
    exec(code, ns)
    text = ns["texts"]
    assert isinstance(text, str) and re.fullmatch(r"[0-9]{0,4}(-[0-9]{0,2}){0,2}", text), text
