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


def byte_vocab():
    """The 256 single bytes as tokens 1..256, EOS 0."""
    from hf_constrained.vocabulary import Vocabulary

    global BYTES
    if BYTES is None:
        BYTES = Vocabulary.from_token_bytes([None] + [bytes([b]) for b in range(256)])
    return BYTES


def byte_constraint(schema, whitespace=None):
    return GrammarConstraint(schema_to_grammar(schema, whitespace=whitespace), byte_vocab(), eos_token_id=0)


_CLOSING = [0] + [1 + ord(c) for c in ']},0tfn"']  # a comma before digits: numbers end
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


def test_empty_one_of_names_its_keyword():
    """A oneOf with no branch to generate: the same message as on the regex route."""
    schema = {"type": "object", "properties": {"d": {"oneOf": [{"type": "integer"}, {"type": "integer"}]}},
              "required": ["d"]}
    with pytest.raises(SchemaError, match="keyword 'oneOf' at /properties/d/oneOf") as regex_route:
        schema_to_regex(schema)
    with pytest.raises(SchemaError, match="keyword 'oneOf' at /properties/d/oneOf") as grammar_route:
        schema_rules(schema)
    assert str(grammar_route.value) == str(regex_route.value)


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


@pytest.mark.parametrize("linear", [None, 1])
@pytest.mark.parametrize("lo, hi", [(2, 3), (2, None), (0, 2), (3, 9), (40, 43), (0, 10 ** 7), (41, None)])
def test_counted_repetition_around_recursion(lo, hi, linear, monkeypatch):
    """minItems/maxItems on a recursive array become counted repetitions around the rule
    reference: exactly the allowed lengths are accepted, at every depth, with copies and
    optional copies written out (``LINEAR``) or in O(log) rules (large counts, or ``linear=1``),
    where ``maxItems: 10000000`` was refused for its ten million rules."""
    if linear is not None:
        import hf_constrained.grammar.cfg as cfg
        monkeypatch.setattr(cfg, "LINEAR", linear)
    schema = {"type": "array", "items": {"anyOf": [{"type": "null"}, {"$ref": "#"}]}, "minItems": lo}
    if hi is not None:
        schema["maxItems"] = hi
    assert len(schema_to_grammar(schema).rules) < 200
    c = byte_constraint(schema)

    def nest(n: int, depth: int):
        inner = [None] * n
        for _ in range(depth):
            inner = [inner] + [None] * (n - 1) if n else []
        return inner

    sizes = sorted({*range(0, 6), *range(max(lo - 2, 0), lo + 3), *([] if hi is None else range(max(hi - 2, 0), min(hi, 60) + 3))})
    for depth in (0, 1, 5):
        for n in sizes:
            if depth and n == 0:
                continue
            doc = nest(n, depth)
            valid = jsonschema.Draft202012Validator(schema).is_valid(doc)
            q = c.state_of_text(compact(doc))
            assert (q > 0 and bool(c.accepting([q])[0])) == valid, (lo, hi, depth, n, compact(doc))


def test_huge_min_items_without_max_takes_few_rules():
    """minItems: 10000000 with no maxItems wrote the ten million required copies into one
    rule; now the required copies are counted in O(log) rules.  Short arrays stay live
    prefixes that are not accepted."""
    schema = {"type": "array", "items": {"anyOf": [{"type": "null"}, {"$ref": "#"}]}, "minItems": 10 ** 7}
    rules = schema_to_grammar(schema).rules
    assert len(rules) < 200 and sum(len(rhs) for _, rhs in rules) < 1000
    c = byte_constraint(schema)
    for n in (1, 3, 40):
        q = c.state_of_text(compact([None] * n)[:-1])      # open: more items may follow
        assert q > 0
        closed = c.state_of_text(compact([None] * n))      # too short to close
        assert closed <= 0 or not bool(c.accepting([closed])[0])


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


# ------------------------------------------------------------------ free-form values, any depth
# free-form positions: {} and true, an array without item keywords, untyped items, additionalProperties: true
FREE = {"type": "object",
        "properties": {"id": {"type": "integer"}, "data": {}, "tags": {"type": "array"},
                       "list": {"type": "array", "items": {}, "maxItems": 3},
                       "extra": {"type": "object", "properties": {"k": {"type": "string"}},
                                 "additionalProperties": True}},
        "required": ["id", "data"], "additionalProperties": False}
FREE_TREE = {"type": "object", "properties": {"meta": True, "kids": {"type": "array", "items": {"$ref": "#"}}},
             "required": ["meta", "kids"], "additionalProperties": False}
_SCALARS = [None, True, False, 0, -17, 3.25, 1e-7, -2.5e+30, "", "a b", "é\"\\/\n€", "日本"]


def any_json(depth: int, rng: random.Random):
    """A JSON value whose containers nest exactly ``depth`` deep (0: a scalar)."""
    if depth == 0:
        return rng.choice(_SCALARS)
    inner = [any_json(depth - 1, rng)] + [any_json(rng.randint(0, depth - 1), rng)
                                           for _ in range(rng.randint(0, 2))]
    if rng.random() < 0.5:
        return inner
    return {rng.choice(["x", "", "k ey", "ü"]) + str(i): v for i, v in enumerate(inner)}


def free_docs(depth: int, rng: random.Random) -> list:
    """(schema, document) pairs with a value ``depth`` deep in each kind of free-form position."""
    deep = lambda: any_json(depth, rng)  # noqa: E731
    node: dict = {"meta": deep(), "kids": []}
    for _ in range(3):
        node = {"meta": rng.choice(_SCALARS), "kids": [node, {"meta": deep(), "kids": []}]}
    return [(True, deep()), ({}, deep()), ({"type": "array", "items": {}}, [deep(), 1]),
            ({"type": "object"}, {"a": deep()}),
            (FREE, {"id": 1, "data": deep()}), (FREE, {"id": 2, "data": 0, "tags": [deep(), deep()]}),
            (FREE, {"id": 3, "data": [], "list": [deep()], "extra": {"k": "v", "z": deep()}}),
            (FREE_TREE, node)]


@pytest.fixture(scope="module")
def free_grammars(deepseek):
    cache: dict = {}

    def get(schema):
        key = json.dumps(schema, sort_keys=True)
        if key not in cache:
            assert schema_rules(schema).recursive          # a free-form value: a rule of its own
            cache[key] = GrammarConstraint(schema_to_grammar(schema), deepseek)
        return cache[key]
    return get


def test_free_form_values_nest_to_any_depth(free_grammars, deepseek):
    """Values nested 5 deep in every kind of free-form position: the tokenizer's encodings walk
    through (EOS at the end); the regex route stops at ANY_VALUE_MAX_DEPTH=2."""
    rng = random.Random(5)
    for schema, doc in free_docs(5, rng):
        jsonschema.validate(doc, schema)
        c = free_grammars(schema)
        for text in (compact(doc), spaced(doc)) if schema is FREE_TREE else (compact(doc),):
            walk_encoding(c, deepseek, text)
        assert not re.compile(schema_to_regex(schema)).fullmatch(compact(doc))


def test_free_form_keeps_each_positions_constraints():
    """Deep free-form values are only offered where the schema leaves the value free."""
    c = byte_constraint(FREE)
    deep = compact(any_json(6, random.Random(0)))
    bad = ['{"id":' + deep + ',"data":1}',                         # id is an integer
           '{"id":1,"data":1,"extra":{"k":' + deep + '}}',         # k is a string
           '{"id":1,"data":1,"list":[1,2,3,' + deep + ']}',        # maxItems 3
           '{"id":1,"data":' + deep + ',"other":1}',               # additionalProperties: false
           '{"id":1,"data":' + deep[:-1] + '}']                    # not a JSON value
    for text in bad:
        q = c.state_of_text(text)
        assert q == 0 or not c.accepting([q])[0], text
    good = '{"id":1,"data":1,"list":[1,2,' + deep + '],"extra":{"k":"","q":' + deep + '}}'
    jsonschema.validate(json.loads(good), FREE)
    q = c.state_of_text(good)
    assert q > 0 and c.accepting([q])[0]


def _nesting(text: str) -> int:
    """Deepest bracket nesting of ``text`` (outside strings)."""
    depth = most = 0
    inside = escaped = False
    for ch in text:
        if escaped:
            escaped = False
        elif inside:
            escaped, inside = ch == "\\", ch != '"'
        elif ch == '"':
            inside = True
        elif ch in "[{":
            depth += 1
            most = max(most, depth)
        elif ch in "]}":
            depth -= 1
    return most


def test_any_value_brute_force_against_a_deep_regex(monkeypatch):
    """Every string over a small alphabet, up to length 6, whose brackets nest at most 4 deep:
    the grammar of ``{}`` keeps it alive iff the regex route's any-value regex, raised to depth
    4, partially matches it, and accepts it iff the regex matches it (the same conventions)."""
    import regex as regex_module

    from hf_constrained.json_schema import limits

    monkeypatch.setattr(limits, "ANY_VALUE_MAX_DEPTH", 4)
    oracle = regex_module.compile(schema_to_regex({}, max_recursion_depth=4))
    c = byte_constraint({})
    alphabet = '[]{}":, 10-.'
    ids = np.array([1 + ord(ch) for ch in alphabet])
    frontier, seen = [("", int(c.starts[0]))], 0
    for _ in range(6):
        states = c.advance(np.repeat([q for _, q in frontier], len(ids)), np.tile(ids, len(frontier)))
        accepting = c.accepting(states)
        nxt = []
        for k, q in enumerate(states.tolist()):
            t = frontier[k // len(ids)][0] + alphabet[k % len(ids)]
            if _nesting(t) > 4:
                continue                                    # beyond the oracle's depth
            alive = oracle.fullmatch(t, partial=True) is not None
            assert (q > 0) == alive, t
            if alive:
                assert bool(accepting[k]) == (oracle.fullmatch(t) is not None), t
                nxt.append((t, q))
            seen += 1
        frontier = nxt
    assert seen > 10_000 and any(_nesting(t) == 4 for t, _ in frontier)


@pytest.mark.parametrize("schema", [FREE, {"type": "array", "items": {}, "maxItems": 2}])
def test_free_form_agrees_with_a_deep_regex_when_shallow(schema, deepseek, monkeypatch):
    """Free-form values nested at most once, against the regex route raised to free-form depth 4
    (a DeepSeek token opens at most 3 brackets, so the regex's depth is never reached along
    the way): both allow exactly the same tokens at every step, whitespace and numbers included."""
    from hf_constrained.json_schema import limits

    g = GrammarConstraint(schema_to_grammar(schema), deepseek)
    monkeypatch.setattr(limits, "ANY_VALUE_MAX_DEPTH", 4)
    r = RegexConstraint.from_tokenizer([schema_to_regex(schema, max_recursion_depth=4)], deepseek,
                                       cache_dir=False)
    rng = random.Random(11)
    docs = ([{"id": 5, "data": any_json(1, rng), "tags": [any_json(1, rng), -0.5], "extra": {"k": "",
                                                                                          "w": any_json(1, rng)}},
             {"id": -1, "data": any_json(0, rng), "list": [any_json(1, rng)]}]
            if schema is FREE else [[any_json(1, rng), 2e5], []])
    for doc in docs:
        jsonschema.validate(doc, schema)
        for text in (compact(doc), spaced(doc)):
            agree_along(g, r, deepseek, text)


@pytest.mark.parametrize("schema", [True, FREE, FREE_TREE], ids=["true", "free", "free-tree"])
def test_free_form_random_walks_validate(schema):
    c = byte_constraint(schema)
    rng = random.Random(str(schema)[:40])
    for _ in range(15):
        jsonschema.validate(json.loads(random_document(c, rng)), schema)
    prefix = '{"id":1,"data":' + '[{"a":' * 6 if schema is FREE else ('[{"":' * 6 if schema is True else None)
    if prefix:
        for _ in range(8):
            text = random_document(c, rng, prefix.encode(), budget=15)
            assert text.startswith(prefix)
            jsonschema.validate(json.loads(text), schema)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_generate_free_form_validates(mode, deepseek, deepseek_model):
    import torch

    torch.manual_seed(1)
    proc = JSONProcessor([FREE, FREE_TREE], deepseek, max_recursion_depth=None, cache_dir=False)
    assert isinstance(proc.constraint, GrammarConstraint)
    inputs = deepseek(["Record:", "Tree:"], return_tensors="pt", padding=True)
    out = deepseek_model.generate(**inputs, logits_processor=[proc], max_new_tokens=40,
                                  pad_token_id=deepseek.pad_token_id or deepseek.eos_token_id, **MODES[mode])
    values = proc.parse(out)
    grid = values if isinstance(values[0], list) else [values]
    for row in grid:
        for prompt, v in enumerate(row):
            if isinstance(v, Truncated):
                assert proc.constraint.state_of_text(v.text, prompt) > 0, v.text
            else:
                jsonschema.validate(v, [FREE, FREE_TREE][prompt])


def test_free_form_goes_to_the_grammar_route(local_tok):
    proc = JSONProcessor({"type": "object"}, local_tok, max_recursion_depth=None, cache_dir=False)
    assert isinstance(proc.constraint, GrammarConstraint)
    assert proc.constraint.state_of_text('{"a":' * 10 + "1" + "}" * 10) > 0


# ------------------------------------------------------------------ shared definitions as rules
def _layered(recursive: bool) -> dict:
    """Objects of arrays of objects, four ways at every level: the plain regex text grows
    4x per level, past MAX_REGEX_TEXT; written once per level it is small."""
    level: dict = {"type": "object", "properties": {f"c{i}": {"type": "number"} for i in range(4)},
                   "required": ["c0"], "additionalProperties": False}
    for _ in range(3):
        level = {"type": "array", "maxItems": 2,
                 "items": {"type": "object", "properties": dict.fromkeys("abcd", level),
                           "additionalProperties": False}}
    if not recursive:
        return level
    return {"type": "object", "properties": {"big": level, "next": {"anyOf": [{"type": "null"}, {"$ref": "#"}]}},
            "required": ["next"], "additionalProperties": False}


def test_shared_definitions_become_rules():
    from hf_constrained.json_schema import MAX_REGEX_TEXT

    schema = _layered(True)
    with pytest.raises(SchemaError, match="MAX_REGEX_TEXT"):
        schema_to_regex(schema, shared=False)               # the plain text is too large
    r = schema_rules(schema)
    shared = [k for k in r.rules if k.startswith("shared:")]
    assert shared and r.recursive
    assert sum(len(t) for t in r.rules.values()) < 5_000 < MAX_REGEX_TEXT
    g = schema_to_grammar(schema)
    assert sum(n.startswith("shared_") for n in g.nonterminals) == len(shared) and len(g.rules) < 500
    c = byte_constraint(schema)
    rng = random.Random(2)
    for _ in range(10):
        jsonschema.validate(json.loads(random_document(c, rng, budget=150, limit=20_000)), schema)
    doc: dict = {"next": None}
    for _ in range(7):
        doc = {"big": [{"a": [{"b": [{"c": {"c0": 1, "c3": -2.5}}]}], "d": []}], "next": doc}
    jsonschema.validate(doc, schema)
    q = c.state_of_text(compact(doc))
    assert q > 0 and c.accepting([q])[0]


def test_shared_rules_agree_with_the_shared_regex():
    """Non-recursive and large: the grammar of the shared rules and the regex route's shared
    regex allow the same bytes along random documents (the same language, split differently)."""
    schema = _layered(False)
    assert not schema_rules(schema).recursive
    c = byte_constraint(schema)
    r = RegexConstraint([schema_to_regex(schema)], byte_vocab(), [0])
    rng = random.Random(4)
    for _ in range(5):
        text = random_document(c, rng, budget=120, limit=20_000).encode()
        jsonschema.validate(json.loads(text), schema)
        qa, qb = int(c.starts[0]), int(r.starts[0])
        for i, b in enumerate(list(text) + [None]):
            assert np.array_equal(c.allowed_ids(qa), r.allowed_ids(qb)), (text[:i], i)
            if b is None:
                break
            qa = int(c.advance(np.array([qa]), np.array([b + 1]))[0])
            qb = int(r.advance(np.array([qb]), np.array([b + 1]))[0])


def test_large_non_recursive_stays_on_the_regex_route(local_tok):
    proc = JSONProcessor(_layered(False), local_tok, max_recursion_depth=None, cache_dir=False)
    assert isinstance(proc.constraint, RegexConstraint)
    assert proc.patterns[0] == schema_to_regex(_layered(False), shared=True)


def _count_conversions(monkeypatch) -> list:
    """Every converter made (the regex route's, schema_rules' and the route check's) appends."""
    from hf_constrained.json_schema.converter import _Converter

    made, init = [], _Converter.__init__

    def counting(self, *args, **kwargs):
        made.append(type(self).__name__)
        init(self, *args, **kwargs)

    monkeypatch.setattr(_Converter, "__init__", counting)
    return made


NO_RULES = [{"type": "integer", "maximum": 9},
            {"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}, "b": {"enum": [1, "x"]}},
             "required": ["a"], "additionalProperties": False},
            {"$defs": {"p": {"type": "array", "items": {"type": "number"}, "maxItems": 2}},
             "type": "object", "properties": {"x": {"$ref": "#/$defs/p"}, "y": {"$ref": "#/$defs/p"}},
             "additionalProperties": False}]


@pytest.mark.parametrize("k", range(len(NO_RULES) + 1))
def test_regex_route_converts_once(k, monkeypatch, local_tok):
    """max_recursion_depth=None, a schema with neither recursion nor free-form values: one
    conversion (it used to convert twice: schema_rules, then schema_to_regex), the same regex."""
    schema = NO_RULES[k] if k < len(NO_RULES) else _layered(False)
    expected = schema_to_regex(schema, shared=True)
    made = _count_conversions(monkeypatch)
    proc = JSONProcessor(schema, local_tok, max_recursion_depth=None, cache_dir=False)
    assert isinstance(proc.constraint, RegexConstraint)
    assert proc.patterns == [expected]
    assert len(made) == 1, made
    made.clear()
    assert JSONProcessor(schema, local_tok, cache_dir=False).patterns == [expected]  # the default route
    assert len(made) == 1, made


@pytest.mark.parametrize("schema", [TREE, LINKED, MUTUAL, NESTED, OPTIONAL, {"type": "object"},
                                    {"type": "array", "items": {"type": "array"}},
                                    {"properties": {"a": {}}, "required": ["a"]},
                                    _layered(True)], ids=lambda s: json.dumps(s)[:40])
def test_route_check_stops_at_recursion_and_free_form_values(schema, monkeypatch, local_tok):
    """The route check gives up at a recursive $ref or a free-form value (schema_rules then makes
    the grammar, as before); without that stop these would wrongly stay on the regex route."""
    from hf_constrained.json_schema.recursive import _regex_unless_rules

    assert schema_rules(schema).recursive
    assert _regex_unless_rules(schema, None, False) is None
    made = _count_conversions(monkeypatch)
    proc = JSONProcessor(schema, local_tok, max_recursion_depth=None, cache_dir=False)
    assert isinstance(proc.constraint, GrammarConstraint)
    assert made[0] == "_RegexUnlessRules" and "_RuleConverter" in made and "_Converter" not in made


def test_route_check_leaves_errors_to_schema_rules(monkeypatch, local_tok):
    """An error in the route check is not raised from there: schema_rules reports it, worded as before."""
    for schema, needle in [({"const": "\U00100005"}, "Private Use Area-B"),
                           ({"type": "integer", "minimum": 5, "maximum": 1}, "no JSON value"),
                           ({"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}, "required": ["a"]},
                            "nowhere")]:
        with pytest.raises(SchemaError) as before:
            schema_rules(schema)
        assert needle in str(before.value)
        with pytest.raises(SchemaError) as now:
            JSONProcessor(schema, local_tok, max_recursion_depth=None, cache_dir=False)
        assert str(now.value) == str(before.value)


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"JSONSchemaBench corpus not found at {CORPUS}")
def test_corpus_schema_refused_for_size_before():
    """Github_hard/o43046 (recursive through /definitions/item): its rules without shared
    definitions exceed MAX_REGEX_TEXT (main refused it on this route); with them it is a grammar
    and random documents validate under its draft."""
    from hf_constrained.json_schema import _TextLimit, _whitespace_regex, canonical, WHITESPACE
    from hf_constrained.json_schema.drafts import draft_validator
    from hf_constrained.json_schema.recursive import _convert_rules

    schema = json.loads((CORPUS / "Github_hard/o43046.json").read_text(encoding="utf-8"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(_TextLimit):
            _convert_rules(canonical(schema), _whitespace_regex(WHITESPACE), False, share=False)
        r = schema_rules(schema)
        assert "/definitions/item" in r.placeholders and any(k.startswith("shared:") for k in r.rules)
        c = byte_constraint(schema)
    cls = draft_validator(schema)
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    rng = random.Random(43046)
    for _ in range(10):
        doc = json.loads(random_document(c, rng, budget=120, limit=20_000))
        assert validator.is_valid(doc), doc


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"JSONSchemaBench corpus not found at {CORPUS}")
def test_corpus_benchmark_subset(capsys):
    """benchmarks/recursive_corpus.py on every 300th schema: runs, and no drawn document is invalid."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import recursive_corpus

    assert recursive_corpus.main(["--every", "300", "--samples", "3", "--limit", "60"]) == 0
    out = capsys.readouterr().out
    assert "| **total** |" in out and "INVALID" not in out


def test_free_form_mistral_and_whitespace(mistral):
    """SentencePiece with byte fallback walks deep free-form values too; whitespace="" makes
    the json_value rule compact (a space inside the deep value is refused)."""
    doc = {"id": 7, "data": any_json(5, random.Random(9)), "extra": {"k": "é", "日": [[[{"a": None}]]]}}
    jsonschema.validate(doc, FREE)
    walk_encoding(GrammarConstraint(schema_to_grammar(FREE), mistral), mistral, compact(doc))
    c = byte_constraint(FREE, whitespace="")
    q = c.state_of_text(compact(doc))
    assert q > 0 and c.accepting([q])[0]
    inner = compact(doc).replace('[[[{"a":null}]]]', '[[[{"a": null}]]]')
    assert inner != compact(doc) and c.state_of_text(inner) == 0
