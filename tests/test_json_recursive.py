"""Recursive JSON Schemas as grammars: ``JSONProcessor(schema, tok, max_recursion_depth=None)``.

Oracles: ``jsonschema`` (documents validate), the tokenizer's own encodings of
valid documents (never masked out, EOS allowed at the end), and the regex route
(for non-recursive schemas, and for recursive ones well inside the regex's
depth, both routes allow exactly the same tokens).
"""

from __future__ import annotations

import json
import random
import re
import warnings
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from hf_constrained.constraint import FINISHED
from hf_constrained.errors import SchemaError
from hf_constrained.grammar import GrammarConstraint
from hf_constrained.json_schema import schema_to_regex
from hf_constrained.json_schema.recursive import schema_rules, schema_to_grammar
from hf_constrained.regex_constraint import RegexConstraint
from hf_constrained.structured import JSONProcessor, Truncated

CORPUS = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "jsonschemabench"

TREE = {"type": "object",
        "properties": {"v": {"type": "integer", "minimum": 0, "maximum": 99},
                       "kids": {"type": "array", "items": {"$ref": "#"}, "maxItems": 3}},
        "required": ["v", "kids"], "additionalProperties": False}
LINKED = {"$defs": {"node": {"type": "object",
                             "properties": {"val": {"enum": ["a", "b", 1]},
                                            "next": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/node"}]}},
                             "required": ["val", "next"], "additionalProperties": False}},
          "$ref": "#/$defs/node"}
# mutual recursion: an expression is a number or an operation whose args are expressions
MUTUAL = {"$defs": {"expr": {"anyOf": [{"type": "integer"}, {"$ref": "#/$defs/op"}]},
                    "op": {"type": "object",
                           "properties": {"op": {"enum": ["+", "*"]},
                                          "args": {"type": "array", "items": {"$ref": "#/$defs/expr"},
                                                   "minItems": 1}},
                           "required": ["op", "args"], "additionalProperties": False}},
          "$ref": "#/$defs/expr"}
# recursion at the top of an array, and an optional property
NESTED = {"type": "array", "items": {"anyOf": [{"type": "boolean"}, {"$ref": "#"}]}}
OPTIONAL = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 4},
                                             "child": {"$ref": "#"}},
            "additionalProperties": False}


def tree(depth: int, rng: random.Random):
    kids = [tree(depth - 1, rng) for _ in range(rng.randint(1, 2))] if depth else []
    return {"v": rng.randint(0, 99), "kids": kids}


def linked(depth: int, rng: random.Random):
    node = None
    for _ in range(depth + 1):
        node = {"val": rng.choice(["a", "b", 1]), "next": node}
    return node


def expr(depth: int, rng: random.Random):
    if depth == 0:
        return rng.randint(-50, 50)
    return {"op": rng.choice("+*"), "args": [expr(depth - 1, rng) for _ in range(rng.randint(1, 2))]}


def nested(depth: int, rng: random.Random):
    return [nested(depth - 1, rng) if depth else rng.choice([True, False])] + ([True] if rng.random() < 0.5 else [])


def optional(depth: int, rng: random.Random):
    out = {"name": rng.choice(["", "ab", "x y"])}
    if depth:
        out["child"] = optional(depth - 1, rng)
    return out


CASES = {"tree": (TREE, tree), "linked": (LINKED, linked), "mutual": (MUTUAL, expr),
         "nested": (NESTED, nested), "optional": (OPTIONAL, optional)}
DEEP = 7  # the regex path's default max_recursion_depth is 3


def compact(doc) -> str:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


def spaced(doc) -> str:
    return json.dumps(doc, ensure_ascii=False)  # ", " and ": ": the default whitespace allows one space


def walk_encoding(constraint, tok, text: str):
    """Walk the tokenizer's encoding of ``text``: each token allowed, EOS allowed at the end."""
    ids = tok(text, add_special_tokens=False)["input_ids"]
    state = int(constraint.starts[0])
    for i, t in enumerate(ids):
        assert t in set(constraint.allowed_ids(state).tolist()), (text, i, tok.decode(ids[: i + 1]))
        state = int(constraint.advance(np.array([state]), np.array([t]))[0])
        assert state > 0, (text, i)
    eos = constraint.eos_token_ids[0]
    assert eos in set(constraint.allowed_ids(state).tolist()), text
    assert int(constraint.advance(np.array([state]), np.array([eos]))[0]) == FINISHED


def text_state(constraint, text: str) -> int:
    return constraint.state_of_text(text)


@pytest.fixture(scope="module")
def grammars(deepseek):
    return {name: GrammarConstraint(schema_to_grammar(schema), deepseek) for name, (schema, _) in CASES.items()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_deep_documents_accepted(name, grammars, deepseek):
    schema, make = CASES[name]
    c = grammars[name]
    rng = random.Random(name)
    regex = re.compile(schema_to_regex(schema))         # the default depth, for contrast
    for depth in (0, 1, DEEP, DEEP + 3):
        doc = make(depth, rng)
        jsonschema.validate(doc, schema)
        for text in (compact(doc), spaced(doc)):
            walk_encoding(c, deepseek, text)
            if depth >= DEEP:
                assert not regex.fullmatch(text), "the regex path should cut this depth off"


@pytest.mark.parametrize("name", sorted(CASES))
def test_invalid_deep_documents_refused(name, grammars):
    """A violation nested deep inside is refused where it happens (the text dies or cannot end)."""
    schema, make = CASES[name]
    c = grammars[name]
    doc = make(DEEP, random.Random(1))
    text = compact(doc)
    # break the innermost leaf: the last value literal before the closing brackets
    m = list(re.finditer(r'(true|false|-?\d+|"[^"]*"|null)', text))[-1]
    bad = [text[: m.start()] + '"zz"' + text[m.end():], text[: m.start()] + "{}" + text[m.end():]]
    for b in bad:
        try:
            ok = jsonschema.Draft202012Validator(schema).is_valid(json.loads(b))
        except json.JSONDecodeError:
            ok = False
        if ok:
            continue
        q = text_state(c, b)
        assert q == 0 or not c.accepting([q])[0], b
    assert text_state(c, text + "]") == 0
    assert text_state(c, text[:-1]) > 0 and not c.accepting([text_state(c, text[:-1])])[0]


def test_mistral_encodings(mistral):
    """SentencePiece with byte fallback: the tokenizer's encodings are allowed too."""
    c = GrammarConstraint(schema_to_grammar(MUTUAL), mistral)
    rng = random.Random(3)
    for depth in (1, DEEP):
        walk_encoding(c, mistral, compact(expr(depth, rng)))
    strings = {"$defs": {"node": {**LINKED["$defs"]["node"], "properties": {
        "val": {"type": "string"}, "next": LINKED["$defs"]["node"]["properties"]["next"]}}},
        "$ref": "#/$defs/node"}
    doc = {"val": "é€", "next": {"val": "日本", "next": {"val": "", "next": None}}}
    jsonschema.validate(doc, strings)
    walk_encoding(GrammarConstraint(schema_to_grammar(strings), mistral), mistral, compact(doc))


# ------------------------------------------------------------------ mask agreement with the regex route
NON_RECURSIVE = [
    ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "array", "items": {"type": "string"},
                                                                        "maxItems": 2}},
      "required": ["a"]},
     [{"a": 12}, {"a": -3, "b": ["x", "yz"]}, {"a": 0, "b": []}]),
    ({"anyOf": [{"type": "null"}, {"enum": ["red", "green"]}, {"type": "number", "minimum": 0}]},
     [None, "green", 3.25, 0]),
    ({"$defs": {"p": {"type": "object", "properties": {"x": {"type": "boolean"}}, "required": ["x"],
                      "additionalProperties": False}},
      "type": "array", "items": {"$ref": "#/$defs/p"}, "minItems": 1},
     [[{"x": True}], [{"x": False}, {"x": True}]]),
    ({"type": "string", "pattern": "^[a-c]+-[0-9]{2}$"}, ["ab-12", "c-00"]),
]


def agree_along(a, b, tok, text: str):
    ids = tok(text, add_special_tokens=False)["input_ids"]
    qa, qb = int(a.starts[0]), int(b.starts[0])
    for i, t in enumerate(ids + [a.eos_token_ids[0]]):
        ma, mb = a.allowed_ids(qa), b.allowed_ids(qb)
        assert np.array_equal(ma, mb), (text, i, len(ma), len(mb))
        if i == len(ids):
            break
        qa = int(a.advance(np.array([qa]), np.array([t]))[0])
        qb = int(b.advance(np.array([qb]), np.array([t]))[0])
        assert qa > 0 and qb > 0


@pytest.mark.parametrize("k", range(len(NON_RECURSIVE)))
def test_grammar_and_regex_routes_agree(k, deepseek):
    schema, docs = NON_RECURSIVE[k]
    assert not schema_rules(schema).recursive
    g = GrammarConstraint(schema_to_grammar(schema), deepseek)
    r = RegexConstraint.from_tokenizer([schema_to_regex(schema)], deepseek, cache_dir=False)
    for doc in docs:
        jsonschema.validate(doc, schema)
        for text in (compact(doc), spaced(doc)):
            agree_along(g, r, deepseek, text)


@pytest.mark.parametrize("name", ["tree", "linked", "mutual"])
def test_recursive_agrees_with_a_deep_regex_when_shallow(name, deepseek):
    """Within the regex's depth (a shallow document, the regex unrolled 5 times), the grammar
    allows exactly what the regex allows: the rules are the unrolled regex, not an approximation."""
    schema, make = CASES[name]
    g = GrammarConstraint(schema_to_grammar(schema), deepseek)
    r = RegexConstraint.from_tokenizer([schema_to_regex(schema, max_recursion_depth=5)], deepseek, cache_dir=False)
    rng = random.Random(7)
    for depth in (0, 1):
        agree_along(g, r, deepseek, compact(make(depth, rng)))


# ------------------------------------------------------------------ generate()
MODES = {"greedy": {}, "sampling": {"do_sample": True, "num_return_sequences": 3},
         "beams": {"num_beams": 3, "num_return_sequences": 2},
         "beam-sampling": {"num_beams": 2, "do_sample": True}}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_generate_validates(mode, deepseek, deepseek_model):
    import torch

    torch.manual_seed(0)
    proc = JSONProcessor([TREE, MUTUAL], deepseek, max_recursion_depth=None, cache_dir=False)
    assert isinstance(proc.constraint, GrammarConstraint)
    inputs = deepseek(["Tree:", "Expression:"], return_tensors="pt", padding=True)
    out = deepseek_model.generate(**inputs, logits_processor=[proc], max_new_tokens=48,
                                  pad_token_id=deepseek.pad_token_id or deepseek.eos_token_id, **MODES[mode])
    values = proc.parse(out)
    values = [values] if not isinstance(values, list) else values
    grid = values if isinstance(values[0], list) else [values]
    gens = proc.generations(out)
    complete = 0
    for row in grid:
        for prompt, v in enumerate(row):
            schema = [TREE, MUTUAL][prompt]
            if isinstance(v, Truncated):
                q = proc.constraint.state_of_text(v.text, prompt)
                assert q > 0, v.text          # a cut-off row is a prefix of a sentence
            else:
                jsonschema.validate(v, schema)
                complete += 1
    assert sum(len(g.sequences) for g in gens) == sum(len(r) for r in grid)
    if mode == "greedy":
        assert complete + sum(isinstance(v, Truncated) for r in grid for v in r) == 2


BYTES = None


def byte_constraint(schema):
    from hf_constrained.vocabulary import Vocabulary

    global BYTES
    if BYTES is None:
        BYTES = Vocabulary.from_token_bytes([None] + [bytes([b]) for b in range(256)])
    return GrammarConstraint(schema_to_grammar(schema), BYTES, eos_token_id=0)


_CLOSING = [0] + [1 + ord(c) for c in ']}0tfn"']
_IN_STRING = [1 + ord('"')]


def _in_string(text: bytes) -> bool:
    inside = escaped = False
    for b in text:
        if escaped:
            escaped = False
        elif inside and b == 0x5C:
            escaped = True
        elif b == 0x22:
            inside = not inside
    return inside


def random_document(c, rng: random.Random, prefix: bytes = b"", budget: int = 60, limit: int = 3000) -> str:
    """A random walk over the byte vocabulary: any allowed byte for ``budget`` steps, then
    EOS or closing bytes first. Returns the text once EOS was chosen."""
    state = c.state_of_text(prefix)
    text = bytearray(prefix)
    for step in range(limit):
        allowed = c.allowed_ids(state).tolist()
        assert allowed, text
        pick = None
        if step >= budget:
            order = _IN_STRING if _in_string(text) else _CLOSING
            pick = next((t for t in order if t in allowed), None)
        if pick is None:
            pick = rng.choice(allowed)
        if pick == 0:
            return text.decode("utf-8")
        text.append(pick - 1)
        state = int(c.advance(np.array([state]), np.array([pick]))[0])
        assert state > 0
    raise AssertionError(f"no end after {limit} steps: {bytes(text)[:200]!r}")


@pytest.mark.parametrize("name", sorted(CASES))
def test_random_walks_validate(name):
    """Documents drawn at random from the grammar (any allowed byte) validate."""
    schema = CASES[name][0]
    c = byte_constraint(schema)
    rng = random.Random(name)
    for _ in range(15):
        jsonschema.validate(json.loads(random_document(c, rng)), schema)


def test_walks_deeper_than_the_regex():
    """From a prefix six levels deep, every completion validates: nesting the regex path cuts off."""
    prefix = '{"op":"+","args":[' * 6
    assert not re.compile(schema_to_regex(MUTUAL)).fullmatch(prefix + "1" + "]}" * 6)
    c = byte_constraint(MUTUAL)
    rng = random.Random(5)
    for _ in range(10):
        text = random_document(c, rng, prefix.encode(), budget=20)
        assert text.startswith(prefix)
        jsonschema.validate(json.loads(text), MUTUAL)


def test_non_recursive_stays_on_the_regex_path(local_tok):
    proc = JSONProcessor({"type": "integer"}, local_tok, max_recursion_depth=None, cache_dir=False)
    assert isinstance(proc.constraint, RegexConstraint)
    proc = JSONProcessor(TREE, local_tok, cache_dir=False)          # the default: a regex, depth 3
    assert isinstance(proc.constraint, RegexConstraint)


def test_depth_is_passed_to_the_regex_path(local_tok):
    shallow = JSONProcessor(TREE, local_tok, max_recursion_depth=1, cache_dir=False)
    deep = JSONProcessor(TREE, local_tok, max_recursion_depth=2, cache_dir=False)
    assert shallow.patterns[0] == schema_to_regex(TREE, max_recursion_depth=1)
    assert deep.patterns[0] == schema_to_regex(TREE, max_recursion_depth=2) != shallow.patterns[0]


def test_whitespace_option(deepseek):
    g = GrammarConstraint(schema_to_grammar(TREE, whitespace=""), deepseek)
    doc = tree(3, random.Random(0))
    walk_encoding(g, deepseek, compact(doc))
    assert g.state_of_text(spaced(doc)) == 0


# ------------------------------------------------------------------ errors
@pytest.mark.parametrize("schema, pointer", [
    ({"type": "object", "properties": {"c": {"$ref": "#", "maxProperties": 1}}}, "/properties/c/$ref"),
    ({"type": "object", "properties": {"c": {"allOf": [{"$ref": "#"}, {"required": ["c"]}]}}},
     "/properties/c/allOf/0/$ref"),
    ({"$defs": {"a": {"type": "array", "items": {"$ref": "#/$defs/a", "minItems": 1}}}, "$ref": "#/$defs/a"},
     "/$defs/a/items/$ref"),
])
def test_recursion_with_siblings_is_refused(schema, pointer, local_tok):
    with pytest.raises(SchemaError, match=re.escape(pointer)):
        schema_to_grammar(schema)
    with pytest.raises(SchemaError, match=re.escape(pointer)):
        JSONProcessor(schema, local_tok, max_recursion_depth=None, cache_dir=False)


def test_recursion_without_base_case(local_tok):
    schema = {"type": "object", "properties": {"c": {"$ref": "#"}}, "required": ["c"]}
    with pytest.raises(SchemaError, match="no finite instance"):
        schema_to_grammar(schema)


def test_reserved_code_points_refused():
    with pytest.raises(SchemaError, match="Private Use Area-B"):
        schema_to_grammar({"const": "\U00100005", "$defs": {}})
    with pytest.raises(SchemaError, match="Private Use Area-B"):
        schema_to_grammar({"type": "string", "pattern": "\\U0010abcd"})


def test_regex_only_options_refused(local_tok):
    with pytest.raises(TypeError, match="heal_prompt"):
        JSONProcessor(TREE, local_tok, max_recursion_depth=None, heal_prompt=True)


# ------------------------------------------------------------------ the corpus
CORPUS_FILES = ["Github_easy/o58637.json", "Github_easy/o21858.json", "Github_medium/o27787.json",
                "Github_medium/o5462.json"]


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"JSONSchemaBench corpus not found at {CORPUS}")
@pytest.mark.parametrize("path", CORPUS_FILES)
def test_corpus_recursive_schemas(path):
    """Recursive schemas of JSONSchemaBench: accepted as grammars, random documents validate
    under the schema's own draft (format checker included)."""
    from hf_constrained.json_schema.drafts import draft_validator

    schema = json.loads((CORPUS / path).read_text(encoding="utf-8"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert schema_rules(schema).recursive
        c = byte_constraint(schema)
    cls = draft_validator(schema)
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    rng = random.Random(path)
    for _ in range(10):
        doc = json.loads(random_document(c, rng))
        assert validator.is_valid(doc), (path, doc)


def test_corpus_deep_tree():
    """Github_easy/o58637 (a tree with children {"$ref": "#"}): a tree 8 levels deep is accepted."""
    path = CORPUS / "Github_easy/o58637.json"
    if not path.is_file():
        pytest.skip(f"JSONSchemaBench corpus not found at {CORPUS}")
    schema = json.loads(path.read_text(encoding="utf-8"))
    doc: dict = {"node": {"info": "leaf"}}
    for _ in range(8):
        doc = {"node": {"info": "x"}, "children": [doc, {"children": []}]}
    jsonschema.validate(doc, schema)
    c = byte_constraint(schema)
    q = c.state_of_text(compact(doc))
    assert q > 0 and c.accepting([q])[0]
    assert not re.compile(schema_to_regex(schema)).fullmatch(compact(doc))


@pytest.mark.parametrize("lo, hi", [(2, 3), (2, None), (0, 2)])
def test_counted_repetition_around_recursion(lo, hi):
    """minItems/maxItems on a recursive array become counted repetitions around the rule
    reference: exactly the allowed lengths are accepted, at every depth."""
    schema = {"type": "array", "items": {"anyOf": [{"type": "null"}, {"$ref": "#"}]}, "minItems": lo}
    if hi is not None:
        schema["maxItems"] = hi
    c = byte_constraint(schema)

    def nest(n: int, depth: int):
        inner = [None] * n
        for _ in range(depth):
            inner = [inner] + [None] * (n - 1) if n else []
        return inner

    for depth in (0, 1, 5):
        for n in range(0, 6):
            if depth and n == 0:
                continue
            doc = nest(n, depth)
            valid = jsonschema.Draft202012Validator(schema).is_valid(doc)
            q = c.state_of_text(compact(doc))
            assert (q > 0 and bool(c.accepting([q])[0])) == valid, (lo, hi, depth, n, compact(doc))


def test_module_doctests():
    import doctest

    from hf_constrained.json_schema import recursive

    result = doctest.testmod(recursive, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 8 and result.failed == 0, result


def test_strict_reaches_the_grammar_route(local_tok):
    """strict=True refuses an annotation keyword on the grammar route too; without it the
    keyword is ignored and the recursive schema becomes a grammar."""
    tree = {"type": "object", "javaType": "Tree",
            "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}, "additionalProperties": False}
    with pytest.raises(SchemaError, match="javaType"):
        JSONProcessor(tree, local_tok, max_recursion_depth=None, strict=True, cache_dir=False)
    proc = JSONProcessor(tree, local_tok, max_recursion_depth=None, cache_dir=False)
    assert isinstance(proc.constraint, GrammarConstraint)
