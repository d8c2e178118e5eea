"""Grammar states and read grammars in the disk cache: a second process (or a fresh
processor) reuses them and produces the same masks as a constraint built from scratch."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hf_constrained import GrammarProcessor
from hf_constrained import cache as disk
from hf_constrained.grammar import constraint as gconstraint
from hf_constrained.grammar.cfg import CFG, from_lark
from hf_constrained.grammar.constraint import GrammarConstraint, load_grammar

ROOT = Path(__file__).resolve().parents[1]

GRAMMAR = r"""
?start: value
?value: "null" | NUMBER | STRING | array | object
array: "[" [value ("," value)*] "]"
object: "{" [pair ("," pair)*] "}"
pair: STRING ":" value
NUMBER: /-?(0|[1-9][0-9]*)/
STRING: /"[a-z ]*"/
%ignore " "
"""
TEXTS = ['{"a": [1, {"b": null}], "cd": "x y"}', '[[[-12, "q"]], {}]']

# runs in a fresh process: prints where the states came from and the masks along TEXTS
CHILD = r"""
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from hf_constrained import GrammarProcessor, offline
tok = offline.local_tokenizer()
proc = GrammarProcessor(sys.argv[2], tok, cache_dir=sys.argv[3])
c = proc.constraint
masks = []
for text in json.loads(sys.argv[4]):
    q = c.starts.copy()
    for t in tok.encode(text, add_special_tokens=False):
        masks.append(c.allowed_ids(int(q[0])).tolist())
        q = c.advance(q, np.array([t]))
    masks.append(c.allowed_ids(int(q[0])).tolist())
proc.save_index()
print(json.dumps({"source": proc.index_source, "configs": c.num_states, "masks": masks}))
"""


def masks_along(constraint, tok, texts):
    out = []
    for text in texts:
        q = constraint.starts.copy()
        for t in tok.encode(text, add_special_tokens=False):
            out.append(constraint.allowed_ids(int(q[0])).tolist())
            q = constraint.advance(q, np.array([t]))
        out.append(constraint.allowed_ids(int(q[0])).tolist())
    return out


def run_child(tmp_path, texts):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    got = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), GRAMMAR, str(tmp_path), json.dumps(texts)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert got.returncode == 0, got.stderr[-2000:]
    return json.loads(got.stdout.strip().splitlines()[-1])


def test_second_process_reuses_states_and_masks(tmp_path, local_tok):
    reference = masks_along(GrammarConstraint(GRAMMAR, local_tok, cache_dir=False), local_tok, TEXTS)
    first = run_child(tmp_path, TEXTS)
    assert first["source"] == "built"
    assert list(tmp_path.glob("index-*.npy")) and list(tmp_path.glob("grammar-*.npy"))
    second = run_child(tmp_path, TEXTS)
    assert second["source"] == "disk"
    assert first["masks"] == second["masks"] == reference
    # the byte-level configurations between token states are not stored: the second
    # process rebuilt only those along the texts' tokens, not the vocabulary walks
    assert second["configs"] < first["configs"]


def test_fresh_processor_adopts_masks_without_walking(tmp_path, local_tok, monkeypatch):
    proc = GrammarProcessor(GRAMMAR, local_tok, cache_dir=tmp_path)
    reference = masks_along(proc.constraint, local_tok, TEXTS)
    assert proc.save_index()
    walked = []
    from hf_constrained.index import TokenIndex
    real = TokenIndex._compute_mask
    monkeypatch.setattr(TokenIndex, "_compute_mask", lambda self, q: walked.append(q) or real(self, q))
    again = GrammarProcessor(GRAMMAR, local_tok, cache_dir=tmp_path)
    assert again.index_source == "disk"
    assert masks_along(again.constraint, local_tok, TEXTS) == reference
    assert walked == []  # every mask along the texts came from the file


def test_foreign_or_corrupt_state_file_is_ignored(tmp_path, local_tok):
    proc = GrammarProcessor(GRAMMAR, local_tok, cache_dir=tmp_path)
    reference = masks_along(proc.constraint, local_tok, TEXTS)
    proc.save_index()
    path, key = proc._cache_path, proc._cache_key
    arrays = disk.load(path, key)
    arrays["gc_threads"] = arrays["gc_threads"] + 10 ** 6  # terminals/nodes out of range
    assert disk.save(path, key, arrays)
    fresh = GrammarProcessor(GRAMMAR, local_tok, cache_dir=tmp_path)
    assert fresh.index_source == "built"
    assert masks_along(fresh.constraint, local_tok, TEXTS) == reference
    path.write_bytes(b"not a zip file")
    assert GrammarProcessor(GRAMMAR, local_tok, cache_dir=tmp_path).index_source == "built"


def test_cache_key_names_grammar_vocabulary_and_eos(local_tok):
    a = GrammarConstraint(GRAMMAR, local_tok, cache_dir=False)
    assert a.cache_key() == GrammarConstraint(GRAMMAR, local_tok, cache_dir=False).cache_key()
    assert a.cache_key() != GrammarConstraint(GRAMMAR.replace('"null"', '"nil"'), local_tok,
                                              cache_dir=False).cache_key()
    assert a.cache_key() != GrammarConstraint(GRAMMAR, local_tok, cache_dir=False, eos_token_id=1).cache_key()  # (the pad id: special)
    assert a.cache_key() != GrammarConstraint([GRAMMAR, 'start: "x"'], local_tok, cache_dir=False).cache_key()


def test_read_grammar_comes_from_disk(tmp_path, monkeypatch):
    text = 'start: "a" start | B\nB: /b+/\n%ignore " "'
    cfg = load_grammar(text, cache_dir=tmp_path)
    assert list(tmp_path.glob("grammar-*.npy"))
    gconstraint._read.cache_clear()

    def no_lark(*a, **k):
        raise AssertionError("Lark was asked to read a cached grammar")
    monkeypatch.setattr(gconstraint, "from_lark", no_lark)
    again = load_grammar(text, cache_dir=tmp_path)
    assert again == cfg and again is not cfg
    gconstraint._read.cache_clear()


def test_cfg_json_round_trip_and_bad_input():
    g = from_lark(r'''
?start: STRING | start "," start
STRING: /"(?:[^"\\\ud800-\udfff]|\\.)*"/
%ignore " "
''')
    assert CFG.from_json(g.to_json()) == g
    assert g.digest() == CFG.from_json(g.to_json()).digest()
    for bad in ("[]", '{"nonterminals": ["s"]}', json.dumps({**json.loads(g.to_json()), "start": 7})):
        with pytest.raises(ValueError, match="not a serialised grammar"):
            CFG.from_json(bad)


def test_recursive_json_grammar_route_uses_the_disk_cache(tmp_path, local_tok):
    from hf_constrained import JSONProcessor
    tree = {"type": "object", "properties": {"t": {"type": "string"}, "kids": {"type": "array", "items": {"$ref": "#"}}},
            "required": ["t", "kids"], "additionalProperties": False}
    doc = ['{"t": "a", "kids": [{"t": "b", "kids": [{"t": "c", "kids": []}]}]}']
    first = JSONProcessor(tree, local_tok, max_recursion_depth=None, cache_dir=tmp_path)
    assert first.index_source == "built"
    reference = masks_along(first.constraint, local_tok, doc)
    assert first.save_index()
    again = JSONProcessor(tree, local_tok, max_recursion_depth=None, cache_dir=tmp_path)
    assert again.index_source == "disk"
    assert masks_along(again.constraint, local_tok, doc) == reference
    off = JSONProcessor(tree, local_tok, max_recursion_depth=None, cache_dir=False)
    assert off.index_source == "built" and masks_along(off.constraint, local_tok, doc) == reference


def test_precompute_finite_and_bounded(local_tok, monkeypatch):
    from hf_constrained.index import TokenIndex
    finite = GrammarProcessor('start: ("yes" | "no" | "maybe") ("!" | ".")?', local_tok, cache_dir=False)
    assert finite.precompute() is True
    computed = finite.constraint.index.num_computed
    walked = []
    real = TokenIndex._compute_mask
    monkeypatch.setattr(TokenIndex, "_compute_mask", lambda self, q: walked.append(q) or real(self, q))
    for text in ["yes!", "no.", "maybe", "ma"]:
        masks_along(finite.constraint, local_tok, [text])
    assert walked == [] and finite.constraint.index.num_computed == computed
    monkeypatch.undo()
    recursive = GrammarProcessor('start: "(" start ")" | "x"', local_tok, cache_dir=False)
    assert recursive.precompute(max_states=15) is False
    assert recursive.constraint.index.num_computed >= 15
    # precomputed masks are the lazily computed ones
    lazy = GrammarConstraint('start: "(" start ")" | "x"', local_tok, cache_dir=False)
    assert masks_along(recursive.constraint, local_tok, ["((x))"]) == masks_along(lazy, local_tok, ["((x))"])


def test_export_while_other_threads_create_states(local_tok):
    """export_state (run after each generate() call) while other threads create states and
    masks: never an error, and what it wrote imports into masks equal to a fresh engine's."""
    import threading
    c = GrammarConstraint(GRAMMAR, local_tok, cache_dir=False)
    stop, errors, exports = threading.Event(), [], []

    def grow(i):
        try:
            rng = np.random.default_rng(i)
            for _ in range(8):
                q = c.starts.copy()
                for _ in range(10):
                    allowed = c.allowed_ids(int(q[0]))
                    live = allowed[~np.isin(allowed, c.eos_token_ids)]
                    if not len(live):
                        break
                    q = c.advance(q, np.array([int(rng.choice(live))]))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(repr(e))

    def export():
        try:
            while not stop.is_set():
                exports.append(c.export_state())
        except Exception as e:  # pragma: no cover - reported below
            errors.append(repr(e))

    exporter = threading.Thread(target=export)
    exporter.start()
    workers = [threading.Thread(target=grow, args=(i,)) for i in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    stop.set()
    exporter.join()
    assert not errors, errors[:3]
    exports.append(c.export_state())
    fresh = GrammarConstraint(GRAMMAR, local_tok, cache_dir=False, warm=False)
    assert fresh.import_state(exports[-1])
    lazy = GrammarConstraint(GRAMMAR, local_tok, cache_dir=False)
    assert masks_along(fresh, local_tok, TEXTS) == masks_along(lazy, local_tok, TEXTS)
    # every stored mask equals the mask recomputed from the configuration it was stored with
    other = GrammarConstraint(GRAMMAR, local_tok, cache_dir=False, warm=False)
    arrays = exports[len(exports) // 2]
    mapping = other.automaton.import_states(arrays)
    for s, bits in list(zip(arrays["idx_states"].tolist(), arrays["idx_bits"]))[:25]:
        assert np.array_equal(other.index._compute_mask(int(mapping[s]))[0], bits)


def test_file_beyond_this_engines_limits_is_ignored(local_tok):
    big = GrammarConstraint(GRAMMAR, local_tok, cache_dir=False)
    masks_along(big, local_tok, TEXTS)
    arrays = big.export_state()
    n = len(arrays["gc_ids"])
    for limits in ({"max_configs": n - 1}, {"max_nodes": 2}):
        small = GrammarConstraint(GRAMMAR, local_tok, cache_dir=False, warm=False, **limits)
        assert small.import_state(arrays) is False   # refused, never an exception
    ok = GrammarConstraint(GRAMMAR, local_tok, cache_dir=False, warm=False)
    assert ok.import_state(arrays) is True
    assert masks_along(ok, local_tok, TEXTS) == masks_along(big, local_tok, TEXTS)
