"""One row, one token per call: per-step latency and its tail, next to llguidance.

    python benchmarks/step_latency.py [--schemas 150] [--json-out FILE] [--markdown]

For real-world JSON Schemas (``../shared/data/jsonschemabench``, those
``schema_to_regex`` accepts, taken round-robin over its datasets in file order)
a valid document is generated from the schema (:func:`instance`), validated with
``jsonschema`` (format checker on) and with the automaton, tokenized with the
129k DeepSeek tokenizer and walked token by token, single-threaded, three ways:

* **engine**: ``TokenIndex.bits(q)`` (the state's packed mask; lazily computed on
  the first visit) and ``TokenIndex.next_states`` (commit one token);
* **processor**: a whole ``JSONProcessor.__call__`` at one row, as a user calls it
  outside ``generate()`` (``input_ids`` one token longer per call, fresh float32
  scores); only public API, so it keeps measuring whatever the shell becomes;
* **llguidance** (when installed): ``LLMatcher`` mask into a numpy buffer, and
  ``consume_token``.

Each walk runs twice on the same object: the first pass computes masks lazily
("first visit"), the second finds them cached ("steady"). The machine may be
shared: every schema is run ``--repeats`` times from the same starting caches
(fresh processor, fresh matcher) and each step keeps its fastest run. Time to first mask
is schema -> first mask; for hf_constrained it is split into convert
(``schema_to_regex``), parse (``regex_parser.parse``), automaton (``LazyDFA``: forest
and start states), probe (the processor's ``probe``: its 128-state ``explore``,
stopped or skipped once no state limit can be reached), vocabulary (the
processor's per-process cached ``Vocabulary``), index (``TokenIndex``) and first mask
(the start state's mask), and measured whole as ``JSONProcessor(...)`` + its first call.
The engine's first visits over 1 ms are sorted by cause (DFA states created, a shared walk's
first use, dense trie walk, walk from a neighbour, lexical region, counted region) and the
slowest are listed; ``--json-out`` also keeps each step's details and (schema, step).
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import signal
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from corpus_files import CORPUS, Timeout, install_alarm, round_robin  # noqa: E402


# ----------------------------------------------------------------- documents
class _NoInstance(Exception):
    pass


_FORMATS = {"date-time": "2024-05-17T10:20:30Z", "date": "2024-05-17", "time": "10:20:30Z",
            "email": "ada@example.com", "uuid": "123e4567-e89b-12d3-a456-426614174000",
            "uri": "https://example.com/a/b", "ipv4": "192.168.0.1", "ipv6": "::1",
            "hostname": "example.com", "uri-reference": "/a/b"}
_WORDS = ["alpha", "beta", "name", "value", "Paris", "data", "item", "open", "status", "x"]


def instance(schema, root, rng, depth=0):
    """A JSON value meant to satisfy ``schema`` (checked by the caller, not trusted)."""
    if depth > 12:
        raise _NoInstance("too deep")
    if schema is True or schema == {}:
        return "x"
    if schema is False or not isinstance(schema, dict):
        raise _NoInstance("false schema")
    if "$ref" in schema:
        ref = schema["$ref"]
        if not ref.startswith("#"):
            raise _NoInstance("remote $ref")
        target = root
        for part in [p for p in ref[1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            target = target[int(part)] if isinstance(target, list) else target[part]
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        return instance({**target, **rest} if isinstance(target, dict) and rest else target, root, rng, depth + 1)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return rng.choice(schema["enum"])
    if "allOf" in schema:
        merged = {k: v for k, v in schema.items() if k != "allOf"}
        for part in schema["allOf"]:
            while isinstance(part, dict) and "$ref" in part and part["$ref"].startswith("#"):
                part = instance_ref(part["$ref"], root)
            if isinstance(part, dict):
                for k, v in part.items():
                    if k == "properties":
                        merged["properties"] = {**merged.get("properties", {}), **v}
                    elif k == "required":
                        merged["required"] = list(merged.get("required", [])) + list(v)
                    else:
                        merged.setdefault(k, v)
        return instance(merged, root, rng, depth + 1)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            base = {k: v for k, v in schema.items() if k != key}
            opt = rng.choice(schema[key])
            return instance({**base, **opt} if isinstance(opt, dict) else opt, root, rng, depth + 1)
    t = schema.get("type")
    if isinstance(t, list):
        t = rng.choice([x for x in t if x != "null"] or t)
    if t is None:
        t = ("object" if "properties" in schema or "additionalProperties" in schema else
             "array" if "items" in schema else "string")
    if t == "object":
        props = schema.get("properties", {}) or {}
        req = list(schema.get("required", []) or [])
        out = {}
        for name, sub in props.items():
            if name in req or rng.random() < 0.6:
                out[name] = instance(sub, root, rng, depth + 1)
        for name in req:
            if name not in out:
                out[name] = instance(schema.get("additionalProperties", {}) or {}, root, rng, depth + 1)
        return out
    if t == "array":
        lo = int(schema.get("minItems", 0))
        hi = int(schema.get("maxItems", lo + 3))
        n = rng.randint(min(max(lo, 1), hi), min(hi, lo + 3)) if hi >= lo else lo
        prefix = schema.get("prefixItems") or (schema["items"] if isinstance(schema.get("items"), list) else [])
        items = schema.get("items") if isinstance(schema.get("items"), dict) else schema.get("additionalItems", {})
        out = [instance(prefix[i] if i < len(prefix) else (items or {}), root, rng, depth + 1) for i in range(n)]
        if schema.get("uniqueItems") and len({json.dumps(x, sort_keys=True) for x in out}) < len(out):
            out = out[:1]
        return out
    if t == "string":
        if "format" in schema and schema["format"] in _FORMATS:
            return _FORMATS[schema["format"]]
        if "pattern" in schema:
            raise _NoInstance("pattern")
        lo = int(schema.get("minLength", 0))
        hi = int(schema.get("maxLength", max(lo, 12)))
        word = " ".join(rng.choice(_WORDS) for _ in range(3))
        while len(word) < lo:
            word += " " + rng.choice(_WORDS)
        return word[: max(lo, min(hi, len(word)))]
    if t in ("integer", "number"):
        lo = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        lo = lo if isinstance(lo, (int, float)) and not isinstance(lo, bool) else 0
        hi = schema.get("maximum", schema.get("exclusiveMaximum", lo + 1000))
        hi = hi if isinstance(hi, (int, float)) and not isinstance(hi, bool) else lo + 1000
        v = rng.randint(int(np.ceil(lo)) + 1, max(int(np.floor(hi)) - 1, int(np.ceil(lo)) + 1))
        m = schema.get("multipleOf")
        if isinstance(m, int) and m > 0:
            v = (v // m) * m
        return v if t == "integer" or rng.random() < 0.5 else v + 0.25
    if t == "boolean":
        return rng.random() < 0.5
    if t == "null":
        return None
    raise _NoInstance(f"type {t!r}")


def instance_ref(ref, root):
    target = root
    for part in [p for p in ref[1:].split("/") if p]:
        target = target[part.replace("~1", "/").replace("~0", "~")]
    return target




def corpus(n: int, seed: int, tok, max_tokens: int, root: Path = CORPUS):
    """``n`` (name, schema, regex, document, token ids) from the corpus, round-robin."""
    import jsonschema
    from hf_constrained import SchemaError, schema_to_regex
    from hf_constrained.automaton import LazyDFA

    out, stats = [], {"refused": 0, "no_document": 0, "tried": 0}
    install_alarm()
    for path in round_robin(root):
        if len(out) >= n:
            break
        stats["tried"] += 1
        try:
            schema = json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError):
            continue
        signal.alarm(5)
        try:
            regex = schema_to_regex(schema, shared=True)  # as JSONProcessor does
        except (SchemaError, RecursionError, ValueError, TypeError, KeyError, Timeout):
            stats["refused"] += 1
            continue
        finally:
            signal.alarm(0)
        rng = random.Random(f"{seed}:{path.name}")
        doc = None
        signal.alarm(5)
        try:
            cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
            val = cls(schema, format_checker=cls.FORMAT_CHECKER)
            dfa = LazyDFA.from_patterns([regex])
            for _ in range(20):
                try:
                    value = instance(schema, schema, rng)
                except (_NoInstance, KeyError, IndexError, TypeError, ValueError, RecursionError):
                    continue
                text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
                if val.is_valid(value) and dfa.fullmatch(text.encode()):
                    doc = text
                    break
        except Exception:  # noqa: BLE001 (a schema jsonschema itself cannot handle)
            doc = None
        finally:
            signal.alarm(0)
        if doc is None:
            stats["no_document"] += 1
            continue
        ids = tok.encode(doc, add_special_tokens=False)
        if tok.decode(ids) != doc or len(ids) > max_tokens:
            stats["no_document"] += 1
            continue
        out.append((f"{path.parent.name}/{path.name}", schema, regex, doc, ids))
    return out, stats


# ----------------------------------------------------------------- walks
def _ns(t0):
    return time.perf_counter_ns() - t0


def _installed(name):
    from importlib.metadata import PackageNotFoundError, version
    try:
        version(name)
        return True
    except PackageNotFoundError:
        return False


def _timed(fn, *args):
    t0 = time.perf_counter_ns()
    fn(*args)
    return _ns(t0)


def _process_caches(vocab):
    """A function that puts hf_constrained's per-process caches (shared by all
    processors of a vocabulary) back to how they are now, so that every repeat
    of a schema starts from the same state (internal; a no-op if they move).

    Its ``settle()``, called once the schema's runs are done, leaves the caches as one
    run of the schema would: what was there plus the walks its runs built. Without it
    the caches stay as the last ``fresh()`` left them, the state before the schema,
    whenever a ``fresh()`` comes last (llguidance's repeats, which build nothing): the
    next schemas then rebuild the same walks and count each as a shape's first use
    again (part 22's "50"; issue #12, part 29)."""
    def noop():
        return None
    noop.settle = noop
    try:
        from hf_constrained import region
    except ImportError:
        return noop
    shared = getattr(region, "_REGION_WALKS", None)
    if shared is None:
        return noop
    before = dict(shared.get(vocab, {}))
    built = dict(before)

    def fresh():
        built.update(shared.get(vocab, {}))
        shared[vocab] = dict(before)

    def settle():
        built.update(shared.get(vocab, {}))
        keep = getattr(getattr(region, "RegionWalk", None), "PER_VOCABULARY", len(built))
        shared[vocab] = dict(list(built.items())[-keep:])  # the library drops the oldest too
    fresh.settle = settle
    return fresh


def best(repeats, fresh, run, first=None):
    """Element-wise minimum over ``repeats`` runs of ``run()`` (a tuple of ints and
    per-step lists), each started from ``fresh()``: the machine is shared, and the
    minimum of independent runs drops the steps that other processes delayed."""
    results = [first] if first is not None else []
    for _ in range(repeats):
        fresh()
        results.append(run())
    out = []
    for parts in zip(*results):
        if isinstance(parts[0], list) and parts[0] and isinstance(parts[0][0], tuple):
            out.append(parts[0])  # per-step details: the same in every run
        elif isinstance(parts[0], list):
            out.append([min(x) for x in zip(*parts)])
        else:
            out.append(min(parts))
    return out


def deepseek_corpus(n: int):
    """``(tokenizer, vocabulary, documents)``: the 129k DeepSeek tokenizer, its vocabulary
    and :func:`corpus`'s first ``n`` documents (warnings of the conversions silenced), what
    the engine-level scripts next to this one walk."""
    import warnings

    from hf_constrained import offline
    from hf_constrained.vocabulary import Vocabulary

    tok = offline.deepseek_tokenizer()
    vocab = Vocabulary.from_tokenizer(tok, cache_dir=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        docs, _ = corpus(n, 0, tok, 600, CORPUS)
    return tok, vocab, docs


def fresh_engine(regex: str, vocab, eos: int):
    """``(LazyDFA, TokenIndex)`` of ``regex`` as :class:`RegexConstraint` builds them (with its
    probe), the start state's mask computed."""
    from hf_constrained.automaton import LazyDFA
    from hf_constrained.index import TokenIndex
    from hf_constrained.regex_constraint import _PROBE_STATES, probe
    from hf_constrained.regex_parser import parse

    dfa = LazyDFA([parse(regex)], strip_leading_space=vocab.strip_leading_space)
    probe(dfa, _PROBE_STATES)
    index = TokenIndex(dfa, vocab, [eos])
    index.bits(dfa.starts[0])
    return dfa, index


def engine_walk(regex, ids, vocab, eos, tok=None):
    """Engine level: (phases of the first mask, first-pass masks, steady masks, commits,
    first-pass step details) in ns. Phases: parse, automaton, probe, vocabulary, index,
    first mask; details per step: (DFA states created, dense trie nodes walked, region,
    walks from a neighbour, shared walks built)."""
    from hf_constrained.automaton import LazyDFA
    from hf_constrained.index import TokenIndex
    from hf_constrained.regex_constraint import _PROBE_STATES, probe
    from hf_constrained.regex_parser import parse
    from hf_constrained.vocabulary import Vocabulary

    t0 = time.perf_counter_ns()
    tree = parse(regex)
    t1 = time.perf_counter_ns()
    dfa = LazyDFA([tree], strip_leading_space=vocab.strip_leading_space)
    t2 = time.perf_counter_ns()
    probe(dfa, _PROBE_STATES)  # as RegexConstraint.__init__: stopped or skipped once it cannot fail
    t3 = time.perf_counter_ns()
    if tok is not None:
        Vocabulary.from_tokenizer(tok, cache_dir=False)  # what the processor does (cached per process)
    t4 = time.perf_counter_ns()
    index = TokenIndex(dfa, vocab, [eos])
    t5 = time.perf_counter_ns()
    index.bits(dfa.starts[0])
    t6 = time.perf_counter_ns()
    phases = (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5)
    first, steady, commit, detail = [], [], [], []
    for pass_times in (first, steady):
        q = np.array([dfa.starts[0]], dtype=np.int64)
        for t in ids + [eos]:
            n0, d0, w0 = dfa.num_states, index._dense_nodes, getattr(index, "near_walks", 0)
            b0 = _shared_walks(vocab)
            t0 = time.perf_counter_ns()
            bits = index.bits(int(q[0]))
            pass_times.append(_ns(t0))
            if pass_times is first:
                detail.append((dfa.num_states - n0, index._dense_nodes - d0, _region_kind(index, int(q[0])),
                               getattr(index, "near_walks", 0) - w0, _shared_walks(vocab) - b0))
            if not (bits[t >> 3] >> (t & 7)) & 1:
                raise AssertionError(f"token {t} of a valid document masked")
            tok_ = np.array([t], dtype=np.int64)
            t0 = time.perf_counter_ns()
            q = index.next_states(q, tok_)
            commit.append(_ns(t0))
        if q[0] != -1:
            raise AssertionError("valid document did not finish")
    return (*phases, first, steady, commit, detail)


def _shared_walks(vocab):
    """Shared walks (region and counted-region shapes) built so far for ``vocab`` in this
    process (internal; 0 if the cache moves): a step that builds one is a shape's first use."""
    try:
        from hf_constrained import region
        return getattr(region, "_WALKS_BUILT", {}).get(vocab, 0)
    except ImportError:
        return 0


def _region_kind(index, q):
    """"region" (a string body's lexical region), "counted" (a counted string's, where
    the index has them) or "" (none), for a state whose mask is already computed."""
    if q <= 0:
        return ""
    if index._region(q) is not None:
        return "region"
    counted = getattr(index, "_counted", None)
    return "counted" if counted is not None and counted.locate(q) is not None else ""


def processor_walk(schema, ids, tok, width):
    """Processor level: (time to first mask, first-pass calls, steady calls) in ns."""
    import torch
    from hf_constrained import JSONProcessor

    eos = tok.eos_token_id
    prompt = torch.tensor([[eos]])
    t0 = time.perf_counter_ns()
    proc = JSONProcessor(schema, tok, cache_dir=False)
    out = proc(prompt, torch.zeros(1, width))
    ttfm = _ns(t0)
    scores = torch.randn(len(ids) + 1, width)
    seqs = torch.tensor([[eos] + ids + [eos]])
    passes = []
    for p in range(2):
        times = []
        if p:
            out = proc(prompt, scores[0:1].clone())
        for i, t in enumerate(ids + [eos]):
            if not torch.isfinite(out[0, t]):
                raise AssertionError(f"processor masked token {t} of a valid document")
            inp = seqs[:, : i + 2]
            s = scores[i: i + 1].clone()
            t0 = time.perf_counter_ns()
            out = proc(inp, s)
            times.append(_ns(t0))
        passes.append(times[:-1])  # the call after EOS only masks a finished row
    return ttfm, passes[0], passes[1]


def llguidance_walk(schema, ids, lltok, eos, words):
    """llguidance: (time to first mask or None if refused, first masks, steady masks, commits)."""
    import llguidance

    buf = np.zeros(words, dtype=np.int32)
    ptr, size = buf.ctypes.data, buf.nbytes
    t0 = time.perf_counter_ns()
    grammar = llguidance.LLMatcher.grammar_from_json_schema(schema)
    m = llguidance.LLMatcher(lltok, grammar, log_level=0)
    m.unsafe_compute_mask_ptr(ptr, size)
    ttfm = _ns(t0)
    if m.is_error():
        return None, [], [], []
    first, steady, commit = [], [], []
    for p, masks in enumerate((first, steady)):
        if p:
            m.reset()
        for i, t in enumerate(ids + [eos]):
            if i or p:
                t0 = time.perf_counter_ns()
                m.unsafe_compute_mask_ptr(ptr, size)
                masks.append(_ns(t0))
            if not (buf[t >> 5] >> (t & 31)) & 1:
                return "rejects", first, steady, commit  # llguidance's JSON differs (e.g. formats)
            t0 = time.perf_counter_ns()
            ok = m.consume_token(t)
            commit.append(_ns(t0))
            if not ok:
                return "rejects", first, steady, commit
    return ttfm, first, steady, commit


def llguidance_steps(first, commit):
    """Per step of the first pass: commit of the previous token + the new mask."""
    return [c + m for c, m in zip(commit, first)]


# ----------------------------------------------------------------- report
def slow_visits(first, detail, where, top=8):
    """Lines on the engine's slow first visits: why (DFA states created, dense walk,
    region) and the slowest few."""
    kinds = {}
    for ns, (new, dense, region, near, built) in zip(first, detail):
        if ns >= 1e6:
            k = ("creates > 100 DFA states" if new > 100 else "a shared walk's first use" if built
                 else "string body (lexical region)" if region == "region"
                 else "counted string (counted region)" if region == "counted"
                 else "dense trie walk, no region" if dense else "walk from a neighbour" if near
                 else "sparse walk")
            kinds.setdefault(k, []).append(ns)
    out = [f"**Engine first visits over 1 ms**: {sum(map(len, kinds.values()))} of {len(first)} steps", "",
           "| cause | steps | p50 | max |", "|---|---:|---:|---:|"]
    out += [f"| {k} | {len(v)} | {fmt(q(v, 50))} | {fmt(max(v))} |" for k, v in sorted(kinds.items())]
    out += ["", "| slowest first visits | step | mask | DFA states created | dense trie nodes | region |",
            "|---|---:|---:|---:|---:|---|"]
    for i in sorted(range(len(first)), key=lambda i: -first[i])[:top]:
        new, dense, region, near, built = detail[i]
        region = region or ("neighbour" if near else "")
        out.append(f"| {where[i][0]} | {where[i][1]} | {fmt(first[i])} | {new} | {dense} | {region} |")
    return out


def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else float("nan")


def fmt(ns):
    if ns != ns:
        return "–"
    us = ns / 1e3
    return f"{us:.0f} µs" if us < 1000 else f"{us / 1e3:.1f} ms"


def row(label, xs, pcts=(50, 90, 99, 100)):
    return f"| {label} | " + " | ".join(fmt(q(xs, p)) for p in pcts) + f" | {len(xs)} |"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schemas", type=int, default=150)
    ap.add_argument("--corpus", type=Path, default=CORPUS, help="folder with JSONSchemaBench datasets")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-tokens", type=int, default=600, help="skip documents longer than this")
    ap.add_argument("--repeats", type=int, default=3,
                    help="runs per schema (each from the same caches); per step the fastest is kept")
    ap.add_argument("--no-llguidance", action="store_true")
    ap.add_argument("--no-processor", action="store_true")
    ap.add_argument("--json-out")
    args = ap.parse_args()

    import torch
    torch.set_num_threads(1)
    from hf_constrained import offline
    from hf_constrained import schema_to_regex
    from hf_constrained.vocabulary import Vocabulary

    tok = offline.deepseek_tokenizer()
    vocab = Vocabulary.from_tokenizer(tok, cache_dir=False)
    eos, width = tok.eos_token_id, len(tok)
    lltok = None
    if not args.no_llguidance:
        try:
            import llguidance
            import llguidance.hf
            lltok = llguidance.hf.from_tokenizer(tok)
        except ImportError:
            print("llguidance not installed: skipped (pip install llguidance)")
    t0 = time.perf_counter()
    docs, stats = corpus(args.schemas, args.seed, tok, args.max_tokens, args.corpus)
    print(f"{len(docs)} schemas with a valid document ({stats}); "
          f"{sum(len(d[4]) for d in docs)} tokens; corpus built in {time.perf_counter() - t0:.0f} s",
          flush=True)

    R = {k: [] for k in ("convert", "parse", "automaton", "probe", "vocabulary", "index", "first_mask",
                         "e_first", "e_steady", "e_commit", "e_detail", "e_where",
                         "p_ttfm", "p_first", "p_steady", "l_ttfm", "l_first", "l_steady", "l_commit",
                         "l_step")}
    ll_rejects = []
    gc.disable()
    for n, (name, schema, regex, doc, ids) in enumerate(docs):
        fresh = _process_caches(vocab)
        conv, = best(args.repeats, fresh, lambda: (_timed(lambda: schema_to_regex(schema, shared=True)),))
        R["convert"].append(conv)
        *phases, f, s, c, det = best(args.repeats, fresh, lambda: engine_walk(regex, ids, vocab, eos, tok))
        for key, ns in zip(("parse", "automaton", "probe", "vocabulary", "index", "first_mask"), phases):
            R[key].append(ns)
        R["e_detail"] += det
        R["e_where"] += [(name, i) for i in range(len(f))]
        R["e_first"] += f
        R["e_steady"] += s
        R["e_commit"] += c
        if not args.no_processor:
            ttfm, f, s = best(args.repeats, fresh, lambda: processor_walk(schema, ids, tok, width))
            R["p_ttfm"].append(ttfm)
            R["p_first"] += f
            R["p_steady"] += s
        if lltok is not None:
            got = llguidance_walk(schema, ids, lltok, eos, (width + 31) // 32)
            if isinstance(got[0], int):
                ttfm, f, s, c = best(args.repeats - 1, fresh, lambda: llguidance_walk(
                    schema, ids, lltok, eos, (width + 31) // 32), first=got)
                R["l_ttfm"].append(ttfm)
                R["l_first"] += f
                R["l_steady"] += s
                R["l_commit"] += c
                R["l_step"] += llguidance_steps(f, c)
            else:
                ll_rejects.append(name)
        fresh.settle()
        gc.collect()
        if n % 25 == 24:
            print(f"  {n + 1} schemas walked", flush=True)
    gc.enable()
    scores = torch.randn(1, width)
    mask = torch.zeros(1, width, dtype=torch.bool)
    mask[0, ::3] = True
    apply = []
    for _ in range(200):
        s = scores.clone()
        t0 = time.perf_counter_ns()
        s.masked_fill_(mask, float("-inf"))
        apply.append(_ns(t0))

    from importlib.metadata import version
    libs = ", ".join(f"{p} {version(p)}" for p in ("torch", "numpy", "llguidance") if _installed(p))
    hdr = "| | p50 | p90 | p99 | max | n |\n|---|---:|---:|---:|---:|---:|"
    lines = [f"{libs}; one thread; each step: fastest of {args.repeats} runs", "",
             f"{len(docs)} schemas, {sum(len(d[4]) + 1 for d in docs)} steps (document tokens + EOS); "
             f"llguidance refused or rejected the document of {len(ll_rejects)}: {ll_rejects[:5]}", "",
             "**Whole call at one row** (hf_constrained: `JSONProcessor.__call__`: find the row, "
             "commit its token, mask, apply; llguidance: commit + mask, not applied)", "", hdr,
             row("hf_constrained, first visit", R["p_first"]),
             row("hf_constrained, steady", R["p_steady"]),
             row("llguidance commit + mask, first pass", R["l_step"]),
             row("`masked_fill_` of one 129k float32 row (apply cost)", apply), "",
             "**Engine**", "", hdr,
             row("`TokenIndex.bits`, first pass (lazy)", R["e_first"]),
             row("`TokenIndex.bits`, steady", R["e_steady"]),
             row("`TokenIndex.next_states` (commit)", R["e_commit"]),
             row("llguidance mask, first pass", R["l_first"]),
             row("llguidance mask, steady (after reset)", R["l_steady"]),
             row("llguidance `consume_token`", R["l_commit"]), "",
             "**Time to first mask** (per schema)", "", hdr,
             row("hf_constrained `JSONProcessor(...)` + first call", R["p_ttfm"]),
             row("  convert (`schema_to_regex`)", R["convert"]),
             row("  parse (`regex_parser.parse`)", R["parse"]),
             row("  automaton (`LazyDFA(trees)`: forest, start states)", R["automaton"]),
             row("  probe (`probe`: `explore` up to 128 states, stopped once it cannot fail)", R["probe"]),
             row("  vocabulary (`Vocabulary.from_tokenizer`, cached per process)", R["vocabulary"]),
             row("  index (`TokenIndex(...)`)", R["index"]),
             row("  first mask (start state's `bits`)", R["first_mask"]),
             row("llguidance grammar + `LLMatcher` + first mask", R["l_ttfm"]), "",
             *slow_visits(R["e_first"], R["e_detail"], R["e_where"])]
    print("\n".join(lines))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"schemas": [d[0] for d in docs], "stats": stats,
                                                   "llguidance_rejects": ll_rejects,
                                                   "ns": {k: v for k, v in R.items() if k not in ("e_detail", "e_where")},
                                                   "first_visit_detail": R["e_detail"],
                                                   "first_visit_where": R["e_where"], "apply_ns": apply}))


if __name__ == "__main__":
    main()
