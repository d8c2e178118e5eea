"""Two CPU processes under ``torch.distributed`` (gloo), launched with
``python -m torch.distributed.run`` on a free port of 127.0.0.1.

One launch serves both tests: each rank generates for its share of the
prompts (data parallel), then both ranks build the same processor at the same
moment with a shared on-disk index cache (``cache_dir=``), reporting where
their index came from.
"""

import json
import os
import re
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORLD = 2

PROMPTS = ["Date:", "E-mail:", "City:", "Code:"]
PATTERNS = [
    r"(19|20)[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])",
    r"[a-z]{3,8}@[a-z]{3,8}\.(com|org|net)",
    r"Paris|London|Tokyo|New York|Berlin",
    r"[A-Z]{3}-[0-9]{4}",
]
SAMPLES = 3
CACHE_PATTERN = r"[a-z]{2,6}-[0-9]{2,4}( [A-Z][a-z]{1,5})?"

WORKER = textwrap.dedent('''
    import json, os, re, sys, traceback
    import torch
    import torch.distributed as dist
    from hf_constrained import RegexProcessor, offline

    prompts, patterns, samples, cache_pattern = json.loads(sys.argv[1])
    out_dir, cache_dir = sys.argv[2], sys.argv[3]
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    report = {"rank": rank, "world": world, "pid": os.getpid()}

    tok = offline.local_tokenizer()
    model = offline.tiny_model(tok, seed=0)  # same seed on every rank: same weights

    # 1. data parallel: this rank's share of the prompts, one pattern each
    try:
        mine = list(range(rank, len(prompts), world))
        proc = RegexProcessor([patterns[i] for i in mine], tok,
                              eos_token_id=model.generation_config.eos_token_id)
        inputs = tok([prompts[i] for i in mine], return_tensors="pt", padding=True)
        torch.manual_seed(rank)
        out = model.generate(**inputs, logits_processor=[proc], do_sample=True,
                             num_return_sequences=samples, max_new_tokens=40,
                             pad_token_id=tok.pad_token_id)
        report["share"] = {str(i): [[s.text, s.finished] for s in g.sequences]
                           for i, g in zip(mine, proc.generations(out))}
    except Exception:
        report["share_error"] = traceback.format_exc()
    gathered = [None] * world
    dist.all_gather_object(gathered, sorted(report.get("share", {})))
    report["all_shares"] = gathered

    # 2. the same processor on both ranks at the same moment, one shared cache directory
    dist.barrier()
    try:
        proc = RegexProcessor(cache_pattern, tok, eos_token_id=model.generation_config.eos_token_id,
                              cache_dir=cache_dir)
        report["index_source"] = proc.index_source
        report["fingerprint"] = proc.vocab.fingerprint
        out = model.generate(**tok(["Key:"], return_tensors="pt"), logits_processor=[proc],
                             do_sample=True, num_return_sequences=2, max_new_tokens=40,
                             pad_token_id=tok.pad_token_id)
        report["cache_texts"] = [[s.text, s.finished] for s in proc.generations(out)[0].sequences]
    except Exception:
        report["cache_error"] = traceback.format_exc()

    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(report, f)
    dist.barrier()
    dist.destroy_process_group()
''')


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dist")
    worker = tmp / "worker.py"
    worker.write_text(WORKER)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = "1"
    env["HF_CONSTRAINED_CACHE"] = "0"  # part 1 without the disk cache; part 2 passes cache_dir=
    payload = json.dumps([PROMPTS, PATTERNS, SAMPLES, CACHE_PATTERN])
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={WORLD}", "--nnodes=1",
           "--master_addr=127.0.0.1", f"--master_port={free_port()}",
           str(worker), payload, str(tmp), str(tmp / "cache")]
    r = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = []
    for rank in range(WORLD):
        path = tmp / f"rank{rank}.json"
        assert path.exists(), f"rank {rank} wrote no report\n{r.stderr[-3000:]}"
        out.append(json.loads(path.read_text()))
    return out


def test_each_rank_generates_valid_output_for_its_share(reports):
    covered = []
    for rank, rep in enumerate(reports):
        assert rep["rank"] == rank and rep["world"] == WORLD
        assert "share_error" not in rep, rep["share_error"]
        expected = list(range(rank, len(PROMPTS), WORLD))
        assert sorted(int(i) for i in rep["share"]) == expected
        for i, seqs in rep["share"].items():
            assert len(seqs) == SAMPLES
            for text, finished in seqs:
                assert finished, (rank, i, text)
                assert re.fullmatch(PATTERNS[int(i)], text), (rank, i, text)
        covered += expected
    assert sorted(covered) == list(range(len(PROMPTS)))
    assert reports[0]["pid"] != reports[1]["pid"]
    # every rank saw every other rank's share through the gloo all_gather
    for rep in reports:
        assert rep["all_shares"] == [sorted(r["share"]) for r in reports]


def test_index_built_once(reports):
    """With a shared cache_dir, exactly one process builds the index; the other
    loads it from disk or waits for the builder. (Needs RegexProcessor's
    ``cache_dir=`` argument and ``index_source`` attribute.)"""
    for rep in reports:
        assert "cache_error" not in rep, rep["cache_error"]
    assert reports[0]["fingerprint"] == reports[1]["fingerprint"]
    sources = sorted(rep["index_source"] for rep in reports)
    assert sources.count("built") == 1, sources
    other = [s for s in sources if s != "built"]
    assert len(other) == 1 and other[0] in ("disk", "waited"), sources
    for rep in reports:
        for text, finished in rep["cache_texts"]:
            assert finished and re.fullmatch(CACHE_PATTERN, text), text
