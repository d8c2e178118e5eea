"""Shared definitions: ``(?(DEFINE)(?P<d>...))`` + ``(?&d)`` from the parser, through the
automaton, to JSON Schemas whose plain regex would exceed ``MAX_REGEX_TEXT``.

Oracles: the ``regex`` module (which reads the same syntax) by brute force over a small
alphabet; the plain (``shared=False``) conversion of the same schema, compared state by
state; ``jsonschema`` on documents drawn from the shared form and generated end to end.
"""

from __future__ import annotations

import itertools
import json
import random
import warnings

import numpy as np
import pytest
import regex as regex_module

from hf_constrained.automaton import LazyDFA
from hf_constrained.errors import RegexSyntaxError, UnsupportedRegexError
from hf_constrained.json_schema import MAX_REGEX_TEXT, SchemaError, schema_to_regex
from hf_constrained.regex_parser import parse

from test_json_schema import random_match

PATTERNS = [
    r"(?(DEFINE)(?P<d>[ab]{1,3})(?P<e>(?&d)x(?&d)?))(?:(?&e),){0,2}(?&d)|y(?&e)*",
    r"(?(DEFINE)(?P<n>(?:a|)))(?&n)b(?&n)",                # nullable definition
    r"(?(DEFINE)(?P<n>[ab]))(?:(?&n)c){2,3}",              # call inside a counted repetition
    r"(?(DEFINE)(?P<a>a{2})(?P<b>(?&a)|b)(?P<c>(?&b)(?&b)))(?&c)(?:,(?&c))*",  # nested calls
    r"(?(DEFINE)(?P<z>[^\x00-\U0010ffff]))a(?&z)?|b",     # an empty-language definition
    r"(?(DEFINE)(?P<a>[ab]{1,2})(?P<b>(?&a))(?P<c>(?&b)))(?:(?&c)x){0,3}(?&b)",  # calls of calls
    r"(?(DEFINE)(?P<r>(?&q))(?P<q>a))b",                   # (a syntax error: q is called before it is defined)
]


def _brute(pattern: str, alphabet: str = "abxy,c", max_len: int = 7):
    dfa = LazyDFA.from_patterns([pattern])
    rx = regex_module.compile(pattern)
    for n in range(max_len + 1):
        for t in itertools.product(alphabet, repeat=n):
            s = "".join(t)
            assert dfa.fullmatch(s.encode()) == bool(rx.fullmatch(s)), (pattern, s)
    return dfa


def test_parse_tree():
    assert parse("(?(DEFINE)(?P<d>[ab]))(?&d)-(?&d)") == (
        "def", (("d", ("cls", ((97, 98),))),),
        ("cat", (("ref", "d"), ("cls", ((45, 45),)), ("ref", "d"))))


@pytest.mark.parametrize("pattern", PATTERNS[:-1])
def test_automaton_matches_regex_module(pattern):
    _brute(pattern)


def test_masks_only_lead_to_live_states():
    """Every non-dead state can still reach a match (the invariant the token masks rely on)."""
    dfa = LazyDFA.from_patterns([PATTERNS[0]])
    assert dfa.explore(10_000)
    n = dfa.num_states
    accepting = {s for s in range(1, n) if dfa.accepting[s]}
    live = set(accepting)
    changed = True
    while changed:
        changed = False
        for s in range(1, n):
            if s not in live and any(int(t) in live for t in dfa.table[s]):
                live.add(s)
                changed = True
    assert live == set(range(1, n))


@pytest.mark.parametrize("pattern,error,what", [
    ("(?(DEFINE)(?P<r>(?&q))(?P<q>a))b", UnsupportedRegexError, "(?&q)"),
    ("(?(DEFINE)(?P<d>(?&d)))a", UnsupportedRegexError, "recursive"),
    ("(?(DEFINE)(?P<d>a)", RegexSyntaxError, "unterminated (?(DEFINE)"),
    ("(?(DEFINE)(?P<d>a)(?P<d>b))c", RegexSyntaxError, "redefinition"),
    ("(?(DEFINE)(?:a))b", RegexSyntaxError, "named groups"),
    ("a(?(DEFINE)(?P<d>a))", UnsupportedRegexError, "conditional group"),
    ("(?&d)", RegexSyntaxError, "unknown extension"),  # as re says without a DEFINE group
])
def test_bad_definitions_are_named(pattern, error, what):
    with pytest.raises(error) as e:
        parse(pattern)
    assert what in str(e.value)


def test_cache_round_trip_keeps_call_stacks():
    pattern = PATTERNS[3]
    a = LazyDFA.from_patterns([pattern])
    a.explore(1000)
    arrays = a.export_states()
    b = LazyDFA.from_patterns([pattern])
    mapping = b.import_states(arrays)
    for s in range(a.num_states):
        assert a.accepting[s] == b.accepting[mapping[s]]
        if a.expanded[s]:
            assert np.array_equal(mapping[a.table[s]], b.table[mapping[s]])
    # a position whose call stack does not lead back to the pattern is refused
    bad = dict(arrays)
    pos = arrays["dfa_positions"].copy()
    offs = arrays["dfa_position_offsets"]
    i = next(i for i in range(len(offs) - 1)
             if offs[i + 1] - offs[i] > 3 + pos[offs[i] + 2])  # a position with a call
    pos[offs[i + 1] - 1] = 0  # node 0 is not a call
    bad["dfa_positions"] = pos
    with pytest.raises(ValueError):
        LazyDFA.from_patterns([pattern]).import_states(bad)


# ------------------------------------------------------------------ JSON Schema
POINT = {"type": "object", "properties": {k: {"type": "number"} for k in "xyz"},
         "required": ["x"]}
SHAPE = {"type": "object", "properties": {
    "kind": {"enum": ["line", "ring"]}, "points": {"type": "array", "items": POINT, "maxItems": 9},
    "label": {"type": "string", "maxLength": 20}}, "required": ["kind"]}
LAYER = {"type": "object", "properties": {k: {"type": "array", "items": SHAPE} for k in "abcdef"}}
MAP = {"type": "object", "properties": {k: LAYER for k in "ABCDEFGH"}, "required": ["A"]}
BIG = {"type": "object", "properties": {k: MAP for k in ("north", "south", "east", "west")}}


def _same_language(p: str, q: str, limit: int = 3000) -> int:
    """Walk the two automata side by side (breadth first, at most ``limit`` pairs):
    the same bytes must lead to accepting / dead states in both."""
    a, b = LazyDFA.from_patterns([p]), LazyDFA.from_patterns([q])
    seen = {(a.starts[0], b.starts[0])}
    frontier = list(seen)
    while frontier and len(seen) < limit:
        nxt = []
        for s, t in frontier:
            assert a.accepting[s] == b.accepting[t]
            for byte in range(256):
                u, v = a.step(s, byte), b.step(t, byte)
                assert (u == 0) == (v == 0), (s, t, byte)
                if u and (u, v) not in seen:
                    seen.add((u, v))
                    nxt.append((u, v))
        frontier = nxt
    return len(seen)


def test_big_schema_is_shared_not_refused():
    with pytest.raises(SchemaError, match="MAX_REGEX_TEXT"):
        schema_to_regex(BIG, shared=False)
    r = schema_to_regex(BIG)
    assert r.startswith("(?(DEFINE)") and len(r) < MAX_REGEX_TEXT // 10
    rng = random.Random(0)
    from jsonschema import Draft202012Validator
    v = Draft202012Validator(BIG)
    for _ in range(20):
        doc = json.loads(random_match(r, rng))
        assert not list(v.iter_errors(doc))


@pytest.mark.parametrize("schema", [SHAPE, LAYER, {"anyOf": [SHAPE, POINT]},
                                    {"type": "array", "items": LAYER, "minItems": 1}])
def test_shared_and_plain_conversions_agree(schema):
    plain, shared = schema_to_regex(schema, shared=False), schema_to_regex(schema, shared=True)
    assert shared.startswith("(?(DEFINE)")
    if len(plain) > 5000:
        assert len(shared) < len(plain) / 2
    assert _same_language(plain, shared) > 100


def test_small_schemas_keep_plain_text():
    assert schema_to_regex(SHAPE) == schema_to_regex(SHAPE, shared=False)


def test_generate_with_a_shared_schema(deepseek, deepseek_model):
    import torch

    from hf_constrained import JSONProcessor
    from jsonschema import Draft202012Validator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        proc = JSONProcessor(BIG, deepseek)
    inputs = deepseek(["Map:", "Layers:"], return_tensors="pt", padding=True)
    torch.manual_seed(0)
    v = Draft202012Validator(BIG)
    for mode in (dict(do_sample=True, num_return_sequences=3), dict(num_beams=3, num_return_sequences=2)):
        out = deepseek_model.generate(**inputs, logits_processor=[proc], max_new_tokens=40, **mode)
        for row in proc.generations(out):
            for seq in row.sequences:
                tokens = deepseek(seq.text, add_special_tokens=False)["input_ids"]
                if seq.finished:
                    assert not list(v.iter_errors(json.loads(seq.text))), seq.text
                else:  # a cut-off row is a prefix of a document: the automaton is still alive
                    state = proc.constraint.walk(proc.constraint.starts[:1], np.array([tokens]))
                    assert int(state[0]) != 0, seq.text
