"""Command line: ``hf-constrained demo`` and ``hf-constrained generate``.

``hf-constrained demo`` runs fully offline (a tokenizer trained in memory and a
tiny random-weight model) and shows a (samples, batch) grid in which every
entry matches its prompt's pattern.

``hf-constrained generate --model NAME (--regex R | --json-schema FILE | --choice A B C | --grammar FILE) PROMPT...``
loads any causal LM with ``transformers`` and prints constrained generations,
grouped per prompt, or as JSON with ``--json``.

Errors the user can fix (bad pattern, bad arguments, a model that does not
load, a conflicting generate() setting) are printed as one ``error: ...`` line
on stderr with exit status 2.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import threading
import time
from contextlib import contextmanager

EXIT_USAGE = 2
EXIT_INTERNAL = 1
# below it the scores divided by the temperature can overflow to inf (then NaN probabilities);
# such a temperature samples the most likely token anyway: --greedy
MIN_TEMPERATURE = 1e-6
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a Unix tool killed by a closed pipe reports

DEMO_PROMPTS = ["Date:", "Email:", "City:"]
DEMO_PATTERNS = [
    r"(19|20)[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])",
    r"[a-z]{3,8}@[a-z]{3,8}\.(com|org|net)",
    r"Paris|London|Tokyo|New York|Berlin",
]
REAL_MODEL_HINT = (
    "hf-constrained generate --model Qwen/Qwen2.5-0.5B-Instruct --chat -n 3 "
    "--regex '(19|20)[0-9]{2}-[0-9]{2}-[0-9]{2}' \"When did the Berlin Wall fall? Answer with a date.\""
)


class CLIError(Exception):
    """A problem the user can fix; printed as one ``error:`` line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse, but errors are one ``error: ...`` line (no usage block)."""

    def error(self, message):
        raise CLIError(f"{message} (see: {self.prog} --help)")


# ----------------------------------------------------------------- helpers
def _one_line(exc: BaseException, limit: int = 400) -> str:
    """The message of ``exc`` on one line: its first line, continued while it ends
    with a colon (so "...from one of:" keeps what follows), at most ``limit`` characters."""
    lines = [ln.strip() for ln in (str(exc).strip() or type(exc).__name__).splitlines() if ln.strip()]
    text = lines[0]
    for more in lines[1:]:
        if not text.endswith(":") or len(text) >= limit:
            break
        text += " " + more
    return text if len(text) <= limit else text[: limit - 3] + "..."


@contextmanager
def _progress(msg: str, quiet: bool = False):
    """``msg... done in 1.2s`` on stderr; on a terminal the elapsed time ticks.

    Yields a dict; a ``"note"`` put there is appended to the final message.
    """
    info = {}
    if quiet:
        yield info
        return
    start = time.perf_counter()
    tty = hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
    stop = threading.Event()
    ticker = None
    if tty:
        def tick():
            while not stop.wait(0.25):
                sys.stderr.write(f"\r{msg}... {time.perf_counter() - start:.1f}s")
                sys.stderr.flush()
        sys.stderr.write(f"{msg}...")
        sys.stderr.flush()
        ticker = threading.Thread(target=tick, daemon=True)
        ticker.start()
    else:
        print(f"{msg}...", file=sys.stderr, flush=True)
    ok = False
    try:
        yield info
        ok = True
    finally:
        stop.set()
        if ticker is not None:
            ticker.join()
        elapsed = time.perf_counter() - start
        end = f"done in {elapsed:.1f}s" if ok else f"failed after {elapsed:.1f}s"
        if ok and info.get("note"):
            end += f" ({info['note']})"
        if tty:
            sys.stderr.write(f"\r{msg}... {end}\n")
            sys.stderr.flush()
        else:
            print(f"  {end}", file=sys.stderr, flush=True)


def _quote(text: str) -> str:
    """A text as a JSON string literal: whitespace and control characters stay visible."""
    return json.dumps(text, ensure_ascii=False)


def _show(text: str) -> str:
    """A text as is when that is unambiguous, else quoted (empty, edge spaces, control chars)."""
    if not text or text != text.strip() or any(not c.isprintable() for c in text):
        return _quote(text)
    return text


def _marks():
    """(check, cross) symbols that the terminal's encoding can print."""
    enc = getattr(sys.stdout, "encoding", None) or "ascii"
    try:
        "✓✗".encode(enc)
        return "✓", "✗"
    except (UnicodeEncodeError, LookupError):
        return "OK", "FAIL"


def _safe_stdout():
    try:
        sys.stdout.reconfigure(errors="backslashreplace")
    except (AttributeError, ValueError):
        pass


def _drop_stdout():
    """Point stdout at /dev/null so the interpreter's final flush into a closed pipe
    does not print "Exception ignored ... BrokenPipeError"."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # not a real file (e.g. captured in tests)
        pass


def _quiet_transformers():
    try:
        import warnings

        from transformers.utils import logging as hf_logging
        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        warnings.filterwarnings("ignore", module="transformers")
    except Exception:  # pragma: no cover - logging is cosmetic
        pass


# ----------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = _Parser(
        prog="hf-constrained",
        description="Constrain Hugging Face generate() to a regex, JSON Schema or choice list: "
                    "every sample, every beam.",
        epilog="Start with `hf-constrained demo` (offline, a few seconds).")
    parser.add_argument("--version", action="version", version=f"hf-constrained {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{demo,generate}", parser_class=_Parser)

    demo = sub.add_parser(
        "demo", help="offline demo: 3 prompts x 7 samples, one pattern per prompt",
        description="Offline demo with an untrained random-weight model: the text is meaningless, "
                    "but every sample matches its prompt's pattern.")
    demo.add_argument("-n", "--num-samples", type=int, default=7, metavar="N",
                      help="samples per prompt (default 7)")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")

    gen = sub.add_parser(
        "generate", help="constrained generation with any causal LM",
        description="Generate text that matches a regex, a JSON Schema or one of a list of choices.",
        epilog="Put prompts before --choice, or after `--`: "
               "hf-constrained generate --model M --choice yes no -- \"Is it raining?\"")
    gen.add_argument("prompts", nargs="*", metavar="PROMPT", help="one or more prompts (a batch)")
    gen.add_argument("--model", "-m", required=True, metavar="NAME_OR_DIR",
                     help="hub model name or local directory (from save_pretrained)")
    what = gen.add_mutually_exclusive_group(required=True)
    what.add_argument("--regex", "-r", action="append", metavar="REGEX",
                      help="regex (Python re syntax) every output must fullmatch; give it once for all "
                           "prompts or once per prompt, in prompt order")
    what.add_argument("--json-schema", metavar="FILE",
                      help="JSON Schema file (`-` reads stdin); outputs are JSON documents that validate")
    what.add_argument("--choice", nargs="+", action="extend", metavar="CHOICE",
                      help="outputs are exactly one of these strings")
    what.add_argument("--grammar", metavar="FILE",
                      help="context-free grammar file (Lark syntax, or GBNF with --syntax gbnf; `-` reads "
                           "stdin); outputs are sentences of the grammar")
    gen.add_argument("--syntax", choices=["lark", "gbnf"], default=None,
                     help="syntax of the --grammar file (default lark)")
    gen.add_argument("--prompt", "-p", action="append", default=[], metavar="PROMPT", dest="more_prompts",
                     help="a prompt (repeatable; an alternative to positional prompts)")
    gen.add_argument("-n", "--num-samples", type=int, default=1, metavar="N",
                     help="outputs per prompt (samples, or returned beams with --beams); default 1")
    gen.add_argument("--beams", type=int, default=1, metavar="B", help="beam search with B beams")
    mode = gen.add_mutually_exclusive_group()
    mode.add_argument("--sample", dest="sample", action="store_true", default=None,
                      help="sample (default when -n > 1 without --beams)")
    mode.add_argument("--greedy", dest="sample", action="store_false",
                      help="no sampling: greedy, or plain beam search with --beams")
    gen.add_argument("--temperature", type=float, default=None)
    gen.add_argument("--top-k", type=int, default=None)
    gen.add_argument("--top-p", type=float, default=None)
    gen.add_argument("--max-new-tokens", type=int, default=128, metavar="N", help="default 128")
    gen.add_argument("--seed", type=int, default=None, help="random seed for reproducible sampling")
    gen.add_argument("--chat", action="store_true",
                     help="wrap each prompt in the tokenizer's chat template (instruct models)")
    gen.add_argument("--device", default=None,
                     help="cpu, cuda, cuda:1, mps, or auto (device_map='auto', needs accelerate); "
                          "default: cuda if available, else cpu")
    gen.add_argument("--dtype", default=None, choices=["auto", "float32", "float16", "bfloat16"],
                     help="model weights dtype (default: transformers' default)")
    gen.add_argument("--trust-remote-code", action="store_true", help="passed to from_pretrained")
    cache = gen.add_mutually_exclusive_group()
    cache.add_argument("--cache-dir", default=None, metavar="DIR",
                       help="index cache folder (default: $HF_CONSTRAINED_CACHE, else ~/.cache/hf_constrained)")
    cache.add_argument("--no-cache", action="store_true", help="do not read or write the index cache")
    gen.add_argument("--json", action="store_true",
                     help='machine-readable output: {"shape": [samples, prompts], "results": '
                          '[[{"text": ..., "complete": ...}, ...], ...]}')
    gen.add_argument("--quiet", "-q", action="store_true", help="no progress messages on stderr")
    return parser


# ----------------------------------------------------------------- patterns
def _patterns_from_args(args, num_prompts: int) -> list:
    """One regex per prompt."""
    if args.regex:
        pats = list(args.regex)
        if len(pats) == 1:
            return pats * num_prompts
        if len(pats) != num_prompts:
            raise CLIError(f"--regex was given {len(pats)} times for {num_prompts} prompts; "
                           "give it once (for every prompt) or once per prompt")
        return pats
    if args.choice:
        choices = list(dict.fromkeys(args.choice))
        return ["|".join(re.escape(c) for c in choices)] * num_prompts
    # JSON Schema
    try:
        from .json_schema import schema_to_regex
    except ImportError as exc:
        raise CLIError(f"--json-schema is not available in this installation ({_one_line(exc)})") from exc
    path = args.json_schema
    raw = _read_input(path, "JSON Schema file")
    try:
        schema = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise CLIError(f"{path!r} is not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise CLIError(f"{path!r} is nested too deeply for Python's JSON reader (recursion limit "
                       f"{sys.getrecursionlimit()})") from exc
    try:
        pattern = schema_to_regex(schema)
    except (ValueError, TypeError) as exc:  # SchemaError is a ValueError
        raise CLIError(f"cannot use the JSON Schema {path!r}: {_one_line(exc)}") from exc
    except ImportError as exc:  # the converter validates schemas with the jsonschema package
        raise CLIError(f"--json-schema needs the {exc.name or 'jsonschema'!r} package: "
                       f"pip install {exc.name or 'jsonschema'}") from exc
    return [pattern] * num_prompts


def _read_input(path: str, what: str) -> str:
    """The text of file ``path`` (``-``: standard input); a one-line CLIError naming ``what`` if unreadable."""
    try:
        if path == "-":
            return sys.stdin.read()
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise CLIError(f"cannot read the {what} {path!r}: {exc.strerror or _one_line(exc)}") from exc
    except UnicodeDecodeError as exc:
        raise CLIError(f"the {what} {path!r} is not UTF-8 text (byte {exc.start}: "
                       f"{exc.object[exc.start:exc.start + 1]!r}); save it as UTF-8") from exc


def _grammar_from_args(args) -> str:
    """The --grammar file's text, read and checked (syntax, rules, terminals) before any model loads."""
    from .grammar import GrammarError, load_grammar

    path = args.grammar
    text = _read_input(path, "grammar file")
    try:
        load_grammar(text, syntax=args.syntax)
    except GrammarError as exc:
        raise CLIError(f"cannot use the grammar {path!r}: {_one_line(exc)}") from exc
    return text


def _check_patterns(patterns: list) -> None:
    """Compile the patterns without a tokenizer so a bad regex fails before any model loads."""
    from .automaton import LazyDFA

    LazyDFA.from_patterns(list(dict.fromkeys(patterns)))


# ----------------------------------------------------------------- generate
def _pick_device(requested):
    import torch

    if requested:
        if requested != "auto" and _device_type(requested) == "meta":
            raise CLIError("--device meta holds no weights or values to generate with; use cpu, "
                           "cuda, mps or auto")
        return requested
    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"


def _device_type(requested: str):
    import torch

    try:
        return torch.device(requested).type
    except (RuntimeError, ValueError):
        return None  # not a device name: from_pretrained / .to() report it


def _check_utf8_arguments(argv) -> None:
    """Arguments the shell passed as bytes that are not UTF-8 arrive with lone surrogates
    (Python's surrogateescape); nothing downstream can encode them."""
    for arg in argv:
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError as e:
            byte = ord(arg[e.start]) - 0xDC00 if 0xDC80 <= ord(arg[e.start]) <= 0xDCFF else None
            what = f"the byte 0x{byte:02x}" if byte is not None else f"the code point U+{ord(arg[e.start]):04X}"
            shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            raise CLIError(f"the argument {shown!r} is not "
                           f"UTF-8 text ({what} at position {e.start}); pass UTF-8 (check the "
                           "terminal's encoding) or put the text in a UTF-8 file") from None


# ----------------------------------------------------------------- model location
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "tokenizer_config.json", "spiece.model")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


def _check_model_dir(path: str, shown: str) -> None:
    """A local directory must hold what from_pretrained reads: say what is missing."""
    files = set(os.listdir(path))
    if "config.json" not in files:
        raise CLIError(f"could not load {shown!r}: the directory has no config.json, so it is not a saved "
                       "model; save one there with model.save_pretrained(DIR) and tokenizer.save_pretrained(DIR)")
    if not files.intersection(_TOKENIZER_FILES):
        raise CLIError(f"could not load the tokenizer of {shown!r}: the directory has no tokenizer files "
                       f"({', '.join(_TOKENIZER_FILES[:3])}...); save them there with tokenizer.save_pretrained(DIR)")


def _hub_reachable(timeout: float = 3.0) -> bool:
    """Whether a TCP connection to the hub endpoint (``HF_ENDPOINT``) opens within ``timeout``."""
    import socket
    from urllib.parse import urlparse

    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    port = url.port or (80 if url.scheme == "http" else 443)
    try:
        with socket.create_connection((url.hostname or "", port), timeout=timeout):
            return True
    except OSError:
        return False


def _in_hub_cache(repo: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - a dependency of transformers
        return False
    found = try_to_load_from_cache(repo, "config.json")
    return isinstance(found, str)


def _resolve_model(model: str) -> tuple:
    """``(directory or hub id, local_files_only)`` to load, or a one-line CLIError in a few seconds.

    An existing directory is used as is (with or without ``./``); a path-like
    name that does not exist is an error; a hub id must be in the local cache or
    the hub must be reachable (else transformers retries for most of a minute).
    """
    path = os.path.expanduser(model)
    if os.path.isdir(path):
        _check_model_dir(path, model)
        return path, False
    if model.startswith(("~", ".", "/", "\\")) or os.path.isabs(model) or not _HUB_ID.match(model):
        raise CLIError(f"no such model directory: {model!r} (and it is not a hub model name such as "
                       "'Qwen/Qwen2.5-0.5B-Instruct')")
    offline = any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
                  for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))
    cached = _in_hub_cache(model)
    if offline and not cached:
        raise CLIError(f"{model!r} is not in the local Hugging Face cache and HF_HUB_OFFLINE is set: "
                       "download it once with network access, or pass a local directory (from save_pretrained)")
    if offline or _hub_reachable():
        return model, False
    if cached:
        return model, True  # no network: what the cache holds, without minutes of retries
    endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    raise CLIError(f"cannot reach the Hugging Face hub ({endpoint}) to download {model!r}: pass a local "
                   "directory (from save_pretrained), or set HF_HUB_OFFLINE=1 to use the models "
                   "already in the cache")


def _load(args):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    device = _pick_device(args.device)
    name, local_only = _resolve_model(args.model)
    common = {"trust_remote_code": True} if args.trust_remote_code else {}
    if local_only:
        common["local_files_only"] = True
    try:
        with _progress(f"loading tokenizer {args.model}", args.quiet):
            tok = AutoTokenizer.from_pretrained(name, **common)
    except Exception as exc:
        raise CLIError(f"could not load the tokenizer of {args.model!r}: {_one_line(exc)}") from exc
    kwargs = dict(common)
    if args.dtype:
        kwargs["dtype" if _transformers_at_least(4, 56) else "torch_dtype"] = (
            "auto" if args.dtype == "auto" else getattr(torch, args.dtype))
    if device == "auto":
        kwargs["device_map"] = "auto"
    try:
        with _progress(f"loading model {args.model}", args.quiet):
            config = AutoConfig.from_pretrained(name, **common)
            # an encoder-decoder (T5, BART, mBART...) as a whole: AutoModelForCausalLM would
            # refuse T5 and load BART's decoder alone, without the encoder that reads the prompt
            auto = AutoModelForSeq2SeqLM if getattr(config, "is_encoder_decoder", False) else AutoModelForCausalLM
            model = auto.from_pretrained(name, config=config, **kwargs)
            if device != "auto":
                model = model.to(device)
            model.eval()
    except Exception as exc:
        raise CLIError(f"could not load the model {args.model!r}: {_one_line(exc)}") from exc
    tok.padding_side = "left"
    if tok.pad_token is None:
        if tok.eos_token is None:
            raise CLIError(f"the tokenizer of {args.model!r} has neither a pad nor an EOS token")
        tok.pad_token = tok.eos_token
    # Our decode() never cleans up spaces; keep tokenizer.decode consistent with it.
    if getattr(tok, "clean_up_tokenization_spaces", False):
        tok.clean_up_tokenization_spaces = False
    return tok, model


def _transformers_at_least(major: int, minor: int) -> bool:
    import transformers

    m = re.match(r"(\d+)\.(\d+)", transformers.__version__)
    return bool(m) and (int(m.group(1)), int(m.group(2))) >= (major, minor)


def _encode_prompts(tok, prompts: list, chat: bool, device):
    if chat:
        if not getattr(tok, "chat_template", None):
            raise CLIError("--chat: this tokenizer has no chat template; drop --chat")
        texts = [tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                         add_generation_prompt=True) for p in prompts]
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    else:
        enc = tok(prompts, return_tensors="pt", padding=True)
    if enc["input_ids"].shape[1] == 0:
        raise CLIError("the prompt is empty and this tokenizer adds no start token, so the model "
                       "would get no input; give a non-empty prompt")
    return {k: v.to(device) for k, v in enc.items() if k in ("input_ids", "attention_mask")}


def _generation_kwargs(args) -> dict:
    n, beams = args.num_samples, args.beams
    if n < 1:
        raise CLIError("-n must be at least 1")
    if beams < 1:
        raise CLIError("--beams must be at least 1")
    if args.max_new_tokens < 1:
        raise CLIError("--max-new-tokens must be at least 1")
    if beams > 1 and n > beams:
        raise CLIError(f"-n {n} asks for more outputs than --beams {beams} keeps; use -n <= --beams")
    sample = args.sample
    if sample is None:
        sample = n > 1 and beams == 1
    if not sample and beams == 1 and n > 1:
        raise CLIError(f"--greedy with -n {n} would give {n} identical outputs; "
                       "use --sample or --beams")
    if not sample and any(v is not None for v in (args.temperature, args.top_k, args.top_p)):
        raise CLIError("--temperature/--top-k/--top-p need sampling; add --sample")
    if args.temperature is not None and not MIN_TEMPERATURE <= args.temperature < math.inf:
        raise CLIError(f"--temperature must be a finite number of at least {MIN_TEMPERATURE:g} (got "
                       f"{args.temperature}); for the most likely output use --greedy")
    if args.top_k is not None and args.top_k < 1:
        raise CLIError(f"--top-k must be at least 1 (got {args.top_k})")
    if args.top_p is not None and not 0 < args.top_p <= 1:
        raise CLIError(f"--top-p must be in (0, 1] (got {args.top_p})")
    _check_seed(args.seed)
    kw = dict(max_new_tokens=args.max_new_tokens, num_return_sequences=n, do_sample=sample)
    if beams > 1:
        kw["num_beams"] = beams
    if sample:
        for name in ("temperature", "top_k", "top_p"):
            if getattr(args, name) is not None:
                kw[name] = getattr(args, name)
    return kw


def _check_seed(seed) -> None:
    if seed is not None and not 0 <= seed < 2 ** 32:
        raise CLIError(f"--seed must be between 0 and 2**32 - 1 (got {seed})")


def cmd_generate(args) -> int:
    prompts = list(args.prompts) + list(args.more_prompts)
    if not prompts:
        raise CLIError("no prompt given; pass prompts as arguments (before --choice, or after `--`) "
                       "or with --prompt")
    if args.syntax is not None and not args.grammar:
        raise CLIError(f"--syntax {args.syntax} names the syntax of a --grammar file; there is none")
    args.syntax = args.syntax or "lark"
    gen_kwargs = _generation_kwargs(args)
    if args.grammar:
        grammar = _grammar_from_args(args)
        patterns = [f"<grammar {args.grammar}>"] * len(prompts)
    else:
        grammar = None
        patterns = _patterns_from_args(args, len(prompts))
        _check_patterns(patterns)

    _quiet_transformers()
    import torch

    from .processor import RegexProcessor

    tok, model = _load(args)
    device = model.device if args.device == "auto" else _pick_device(args.device)
    inputs = _encode_prompts(tok, prompts, args.chat, device)
    eos = model.generation_config.eos_token_id
    distinct = list(dict.fromkeys(patterns))
    proc_kwargs = {"eos_token_id": eos}
    if args.no_cache:
        proc_kwargs["cache_dir"] = False
    elif args.cache_dir:
        proc_kwargs["cache_dir"] = args.cache_dir
    with _progress(f"building index for {len(tok):,}-token vocabulary", args.quiet) as info:
        if grammar is not None:
            from .grammar import GrammarProcessor

            proc = GrammarProcessor(grammar, tok, syntax=args.syntax, **proc_kwargs)
        else:
            proc = RegexProcessor(distinct[0] if len(distinct) == 1 else patterns, tok, **proc_kwargs)
        source = getattr(proc, "index_source", None)
        if source in ("disk", "waited"):
            info["note"] = "loaded from the disk cache"
    if args.seed is not None:
        from transformers import set_seed
        set_seed(args.seed)
    plural = lambda k, word: f"{k} {word}{'s' if k != 1 else ''}"  # noqa: E731
    what = f"{plural(args.num_samples, 'output')} for each of {plural(len(prompts), 'prompt')}"
    with _progress(f"generating {what}", args.quiet), torch.no_grad():
        out = model.generate(**inputs, logits_processor=[proc], pad_token_id=tok.pad_token_id,
                             **gen_kwargs)
    gens = proc.generations(out, num_prompts=len(prompts))
    n = len(gens[0].sequences)
    if args.json:
        result = {
            "model": args.model,
            "shape": [n, len(prompts)],
            "prompts": prompts,
            "patterns": patterns,
            "results": [[{"text": g.sequences[s].text, "complete": bool(g.sequences[s].finished)}
                         for g in gens] for s in range(n)],
        }
        print(json.dumps(result, ensure_ascii=False, indent=2))
        return 0
    width = len(str(n))
    for p, g in enumerate(gens):
        if p:
            print()
        print(f"prompt {p + 1}/{len(prompts)}: {_quote(prompts[p])}")
        for s, seq in enumerate(g.sequences):
            note = "" if seq.finished else "   (truncated by --max-new-tokens: a prefix of a match)"
            print(f"  {s + 1:>{width}}. {_show(seq.text)}{note}")
    return 0


# ----------------------------------------------------------------- demo
def _table(header: list, rows: list) -> list:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    fmt = lambda cells: "  ".join(f"{str(c):<{w}}" for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return [fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows]


def cmd_demo(args) -> int:
    if args.num_samples < 1:
        raise CLIError("-n must be at least 1")
    _check_seed(args.seed)
    _quiet_transformers()
    import torch

    from . import offline
    from .processor import RegexProcessor

    started = time.perf_counter()
    torch.set_num_threads(1)  # a 32-wide model: more threads only add overhead
    tok = offline.local_tokenizer()
    model = offline.tiny_model(tok, seed=args.seed)
    proc = RegexProcessor(DEMO_PATTERNS, tok, eos_token_id=model.generation_config.eos_token_id)
    inputs = tok(DEMO_PROMPTS, return_tensors="pt", padding=True)
    torch.manual_seed(args.seed)
    with torch.no_grad():
        out = model.generate(**inputs, logits_processor=[proc], do_sample=True,
                             num_return_sequences=args.num_samples, max_new_tokens=48,
                             pad_token_id=tok.pad_token_id)
    grid = proc.generations(out)
    n, b = args.num_samples, len(DEMO_PROMPTS)
    ok_mark, bad_mark = _marks()

    print("hf-constrained demo: one RegexProcessor, 3 prompts x "
          f"{n} samples, a different pattern for each prompt.")
    print("Offline: a tiny model with UNTRAINED RANDOM WEIGHTS and a small tokenizer trained in memory.")
    print("The text is meaningless; only the format is guaranteed.\n")
    print("  prompt   pattern")
    for prompt, pat in zip(DEMO_PROMPTS, DEMO_PATTERNS):
        print(f"  {prompt:<8} {pat}")
    print()
    header = ["sample"] + list(DEMO_PROMPTS)
    rows, good = [], 0
    for s in range(n):
        row = [str(s + 1)]
        for p in range(b):
            text = grid[p].sequences[s].text
            ok = grid[p].sequences[s].finished and re.fullmatch(DEMO_PATTERNS[p], text) is not None
            good += ok
            row.append(f"{text} {ok_mark if ok else bad_mark}")
        rows.append(row)
    for line in _table(header, rows):
        print("  " + line)
    print(f"\n  grid shape (samples, batch) = ({n}, {b}): proc.decode(out)[sample][prompt]")
    total = n * b
    if good == total:
        print(f"{ok_mark} all {total} outputs fullmatch their prompt's pattern (checked with re.fullmatch)")
    else:
        print(f"{bad_mark} {total - good} of {total} outputs do NOT fullmatch their pattern: this is a bug, "
              "please report it")
    print(f"  ({time.perf_counter() - started:.1f}s)\n")
    print("The same in Python:")
    print("  proc = RegexProcessor([date_re, email_re, city_re], tokenizer)")
    print("  out = model.generate(**tokenizer(prompts, return_tensors='pt', padding=True),")
    print("                       logits_processor=[proc], do_sample=True, num_return_sequences=7)")
    print("  proc.decode(out)   # 7 x 3 grid of strings\n")
    print("With a real model (downloads it from the Hugging Face hub):")
    print(f"  {REAL_MODEL_HINT}")
    return 0 if good == total else 1


# ----------------------------------------------------------------- main
def main(argv=None) -> int:
    """Entry point of the ``hf-constrained`` console script and ``python -m hf_constrained``."""
    _safe_stdout()
    argv = sys.argv[1:] if argv is None else list(argv)
    traceback_wanted = bool(os.environ.get("HF_CONSTRAINED_TRACEBACK"))
    try:
        _check_utf8_arguments(argv)
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        if args.command == "demo":
            return cmd_demo(args)
        return cmd_generate(args)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `hf-constrained demo | head -2`: the reader has gone; stop quietly
        _drop_stdout()
        return EXIT_BROKEN_PIPE
    except CLIError as exc:
        if traceback_wanted:
            raise
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:
        from .errors import ConstraintError

        if traceback_wanted:
            raise
        if isinstance(exc, ConstraintError):
            print(f"error: {_one_line(exc)}", file=sys.stderr)
            return EXIT_USAGE
        print(f"error: unexpected {type(exc).__name__}: {_one_line(exc)} "
              "(set HF_CONSTRAINED_TRACEBACK=1 to see the traceback)", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
