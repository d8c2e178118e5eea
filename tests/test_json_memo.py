"""The converter's shortcuts (issue #12, part 17): the memo of conversions (json_schema/memo.py),
the ``$ref`` resolution cache, the plain-text path of ``_lit``, the string path of
``_json_text`` and the near-miss guess made once per word.

Oracle: the same converter with the shortcut off (``_Converter.MEMO = False``: every
conjunction converted at every use, as before) must give the same text, the same error and
the same converter state; escapes against the per-character ``_char``; ``json.dumps``.
"""

from __future__ import annotations

import json
import random
import warnings
from pathlib import Path

import pytest
import regex as regex_module

from hf_constrained.json_schema import SchemaError, canonical, limits, schema_to_regex
from hf_constrained.json_schema.converter import _Converter
from hf_constrained.json_schema.regex_text import _char, _json_text, _lit

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "jsonschemabench"

POINT = {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "number"}},
         "required": ["x"], "additionalProperties": False}
TREE = {"$defs": {"node": {"type": "object", "properties": {
    "v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
    "required": ["v"], "additionalProperties": False}}, "$ref": "#/$defs/node"}
MUTUAL = {"$defs": {
    "a": {"type": "object", "properties": {"b": {"$ref": "#/$defs/b"}, "n": {"type": "null"}},
          "additionalProperties": False},
    "b": {"type": "array", "items": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "boolean"}]}, "maxItems": 2}},
    "type": "object", "properties": {"one": {"$ref": "#/$defs/a"}, "two": {"$ref": "#/$defs/b"},
                                     "three": {"$ref": "#/$defs/a"}}, "additionalProperties": False}
# the same definition reached at different recursion depths from different places
DEPTHS = {"$defs": {"list": {"type": "object", "properties": {
    "next": {"$ref": "#/$defs/list"}, "alt": {"$ref": "#/$defs/other"}}, "additionalProperties": False},
    "other": {"type": "object", "properties": {"l": {"$ref": "#/$defs/list"}}, "additionalProperties": False}},
    "type": "object", "properties": {"p": {"$ref": "#/$defs/list"}, "q": {"$ref": "#/$defs/other"}},
    "additionalProperties": False}
SCALARS = {"type": "object", "properties": {
    "int": {"const": 1}, "bool": {"const": True}, "float": {"const": 1.0},
    "neg_zero": {"const": -0.0}, "zero": {"const": 0.0}, "ints": {"enum": [1, 0]},
    "bools": {"enum": [True, False]}, "s1": {"type": "string", "maxLength": 1},
    "s2": {"type": "string", "maxLength": 2}}, "additionalProperties": False}
ONE_OF = {"$defs": {"pet": {"oneOf": [
    {"type": "object", "properties": {"kind": {"const": "cat"}, "lives": {"type": "integer"}},
     "required": ["kind"], "additionalProperties": False},
    {"type": "object", "properties": {"kind": {"const": "dog"}, "good": {"type": "boolean"}},
     "required": ["kind"], "additionalProperties": False}]}},
    "type": "array", "prefixItems": [{"$ref": "#/$defs/pet"}, {"$ref": "#/$defs/pet"}],
    "items": {"$ref": "#/$defs/pet"}}
DEPENDENT = {"$defs": {"d": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
                             "dependentRequired": {"a": ["b"]}, "additionalProperties": False}},
             "type": "object", "properties": {"x": {"$ref": "#/$defs/d"}, "y": {"$ref": "#/$defs/d"},
                                              "z": {"allOf": [{"$ref": "#/$defs/d"}, {"required": ["a"]}]}},
             "additionalProperties": False}
# one $ref text, two resources: it must resolve against each one's base URI
BASES = {"$id": "http://e.com/root.json", "type": "object", "properties": {
    "a": {"$id": "http://e.com/a/", "type": "object",
          "properties": {"v": {"$ref": "item.json"}}, "additionalProperties": False,
          "$defs": {"item": {"$id": "http://e.com/a/item.json", "type": "integer"}}},
    "b": {"$id": "http://e.com/b/", "type": "object",
          "properties": {"v": {"$ref": "item.json"}}, "additionalProperties": False,
          "$defs": {"item": {"$id": "http://e.com/b/item.json", "type": "boolean"}}}},
    "required": ["a", "b"], "additionalProperties": False}
# a recursion with no finite instance: the cut message names the first cut
ENDLESS = {"$defs": {"e": {"type": "object", "properties": {"e": {"$ref": "#/$defs/e"}}, "required": ["e"]}},
           "type": "array", "prefixItems": [{"$ref": "#/$defs/e"}, {"$ref": "#/$defs/e"}], "minItems": 2}
# a oneOf nothing can be generated for (its branches overlap, patterns cannot be negated),
# under two optional properties: each use records why it came out empty
NO_BRANCH = {"$defs": {"either": {"oneOf": [{"type": "string", "pattern": "a"},
                                            {"type": "string", "pattern": "b"}]}},
             "type": "object", "properties": {"x": {"$ref": "#/$defs/either"}, "y": {"$ref": "#/$defs/either"},
                                              "n": {"type": "null"}}, "additionalProperties": False}
WIDE = {"$defs": {"p": POINT}, "type": "object",
        "properties": {f"k{i}": {"$ref": "#/$defs/p"} for i in range(30)}, "additionalProperties": False}

# oneOf separators and dependentRequired splits make {name: false} maps anew each time (part 21)
FORBID = {"$defs": {"v": {"type": "object", "oneOf": [
    {"properties": {"a": {"type": "integer"}, "b": False}, "required": ["a"]},
    {"properties": {"a": {"type": "string"}, "c": {"const": 1}}, "required": ["b"]}],
    "dependentRequired": {"a": ["c"], "c": ["a"]}}},
    "type": "object", "properties": {"x": {"$ref": "#/$defs/v"}, "y": {"$ref": "#/$defs/v"},
                                     "b": {"type": "null"}}, "dependentRequired": {"x": ["y"]},
    "oneOf": [{"required": ["x"]}, {"properties": {"x": False}}]}

SCHEMAS = {"point": POINT, "tree": TREE, "mutual": MUTUAL, "depths": DEPTHS, "scalars": SCALARS,
           "one_of": ONE_OF, "dependent": DEPENDENT, "bases": BASES, "endless": ENDLESS, "no_branch": NO_BRANCH,
           "wide": WIDE, "forbid": FORBID}


def _convert(schema, memo: bool, monkeypatch, depth: int = 3, shared: bool = False):
    """(text or error message, the converter) with the memo on or off."""
    monkeypatch.setattr(_Converter, "MEMO", memo)
    conv = _Converter(canonical(schema), "", depth)
    conv.share = shared
    try:
        out = conv.run()
    except SchemaError as exc:
        out = f"SchemaError: {exc}"
    monkeypatch.undo()
    return out, conv


@pytest.mark.parametrize("name", SCHEMAS)
@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("shared", [False, True])
def test_memo_gives_what_converting_every_time_gives(name, depth, shared, monkeypatch):
    """Text (or error), definitions, cuts, empty reasons and conversion count: all as without it."""
    plain, off = _convert(SCHEMAS[name], False, monkeypatch, depth, shared)
    memo, on = _convert(SCHEMAS[name], True, monkeypatch, depth, shared)
    assert memo == plain
    assert (on.definitions, on.cuts, on.empty_reasons, on.conversions) == \
        (off.definitions, off.cuts, off.empty_reasons, off.conversions)
    assert off.memo is None and on.memo is not None


def test_memo_converts_a_target_once(monkeypatch):
    """30 uses of one definition: converted once (the conversions counted are still 30 uses')."""
    _, conv = _convert(WIDE, True, monkeypatch)
    stored = sum(len(v) for v in conv.memo.entries.values())
    assert conv.memo.hits >= 29 and stored <= 5, (conv.memo.hits, stored)
    _, narrow = _convert({**WIDE, "properties": {"k0": {"$ref": "#/$defs/p"}}}, True, monkeypatch)
    assert sum(len(v) for v in narrow.memo.entries.values()) == stored


def test_memo_keeps_recursion_depths_apart(monkeypatch):
    """A recursive target converted at several depths: one entry per depth, each text right."""
    for schema in (TREE, DEPTHS, MUTUAL):
        text, conv = _convert(schema, True, monkeypatch)
        assert text == _convert(schema, False, monkeypatch)[0]
        assert any(len(v) > 1 for v in conv.memo.entries.values())  # the same key, several depths
    tree = schema_to_regex(TREE, whitespace="", max_recursion_depth=2)
    assert regex_module.fullmatch(tree, '{"v":1,"kids":[{"v":2}]}')
    assert not regex_module.fullmatch(tree, '{"v":1,"kids":[{"v":2,"kids":[{"v":3}]}]}')


def test_memo_tells_values_of_different_types_apart(monkeypatch):
    """1 / true / 1.0 and -0.0 / 0.0 are equal in Python but written differently."""
    text, _ = _convert(SCALARS, True, monkeypatch)
    assert text == _convert(SCALARS, False, monkeypatch)[0]
    rx = schema_to_regex(SCALARS, whitespace="")
    doc = {"int": 1, "bool": True, "float": 1.0, "neg_zero": -0.0, "zero": 0.0, "ints": 0,
           "bools": False, "s1": "a", "s2": "ab"}
    assert regex_module.fullmatch(rx, json.dumps(doc, separators=(",", ":")))
    for key, bad in [("int", "true"), ("bool", "1"), ("zero", "-0.0"), ("neg_zero", "0.0"),
                     ("bools", "0"), ("ints", "false"), ("s1", '"ab"')]:
        text = json.dumps(doc, separators=(",", ":")).replace(
            f'"{key}":{json.dumps(doc[key])}', f'"{key}":{bad}')
        assert not regex_module.fullmatch(rx, text), key


def test_memo_hits_the_conversion_limit_where_converting_every_time_does(monkeypatch):
    """MAX_CONVERSIONS counts the conversions a reused result stands for: the same limit, the
    same message, where it would fail without the memo (and success just below it)."""
    _, off = _convert(WIDE, False, monkeypatch)
    needed = off.conversions
    for limit in (needed - 1, needed // 2, needed):
        monkeypatch.setattr(limits, "MAX_CONVERSIONS", limit)
        outs = []
        for memo in (False, True):
            monkeypatch.setattr(_Converter, "MEMO", memo)
            conv = _Converter(canonical(WIDE), "", 3)
            try:
                outs.append(conv.run())
            except SchemaError as exc:
                outs.append(str(exc))
        monkeypatch.undo()
        assert outs[0] == outs[1], limit
        assert ("MAX_CONVERSIONS" in outs[0]) == (limit < needed)


def test_memo_never_stores_an_error(monkeypatch):
    """A definition that fails fails at every use (the message names the first use)."""
    bad = {"$defs": {"u": {"type": "array", "uniqueItems": True}}, "type": "object",
           "properties": {"a": {"$ref": "#/$defs/u"}, "b": {"$ref": "#/$defs/u"}}}
    assert _convert(bad, True, monkeypatch)[0] == _convert(bad, False, monkeypatch)[0]
    assert "uniqueItems" in _convert(bad, True, monkeypatch)[0]


def test_resolution_uses_each_base_uri(monkeypatch):
    """One "$ref": "item.json" in two resources resolves twice (the cache key has the base)."""
    rx = schema_to_regex(BASES, whitespace="")
    assert regex_module.fullmatch(rx, '{"a":{"v":1},"b":{"v":true}}')
    assert not regex_module.fullmatch(rx, '{"a":{"v":true},"b":{"v":1}}')
    conv = _Converter(canonical(BASES), "", 3)
    conv.run()
    assert sorted(ptr for _, ptr in conv._targets.values()) == ["/properties/a/$defs/item", "/properties/b/$defs/item"]


def test_memo_keys_a_part_with_subschemas_by_place(monkeypatch):
    """One dict object at two places (possible in a schema given to the converter as it is)
    under two base URIs: its "$ref" resolves differently at each, so it is converted at each."""
    inner = {"type": "object", "properties": {"v": {"$ref": "item.json"}}, "additionalProperties": False}
    schema = {"$id": "http://e.com/root.json", "type": "object", "properties": {
        "a": {"$id": "http://e.com/a/", "properties": {"w": inner}, "required": ["w"],
              "$defs": {"item": {"$id": "http://e.com/a/item.json", "type": "integer"}}},
        "b": {"$id": "http://e.com/b/", "properties": {"w": inner}, "required": ["w"],
              "$defs": {"item": {"$id": "http://e.com/b/item.json", "type": "boolean"}}}},
        "required": ["a", "b"], "additionalProperties": False}
    texts = []
    for memo in (False, True):
        monkeypatch.setattr(_Converter, "MEMO", memo)
        texts.append(_Converter(schema, "", 3).run())
    assert texts[0] == texts[1]
    assert regex_module.fullmatch(texts[1], '{"a":{"w":{"v":1}},"b":{"w":{"v":true}}}')
    assert not regex_module.fullmatch(texts[1], '{"a":{"w":{"v":1}},"b":{"w":{"v":1}}}')


def test_lit_plain_text_path_matches_per_character_escapes():
    rng = random.Random(0)
    singles = [chr(cp) for cp in range(0x3000)] + [chr(cp) for cp in (0xFFFF, 0x10000, 0x10FFFF)]
    texts = singles + ["".join(rng.choice(singles[:0x100]) for _ in range(rng.randint(0, 12)))
                       for _ in range(2000)]
    for text in texts:
        assert _lit(text) == "".join(_char(ord(c)) for c in text), repr(text)


def test_json_text_is_json_dumps():
    for value in ["", "plain", 'q"b\\s', "\x00\x1f\x7f", "é\u2028\U0001F600", "\ud800", 1, 1.5, None, True,
                  [1, "a"], {"k": "v"}]:
        assert _json_text(value) == json.dumps(value, ensure_ascii=False)


def test_near_miss_warning_names_every_place_once():
    """The guess is made once per unknown word; the warning still counts every place."""
    schema = {"type": "object", "properties": {
        f"p{i}": {"type": "string", "maxlength": 3, "minimun": 1, "colour": "red"} for i in range(5)}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        canonical(schema)
    messages = sorted(str(w.message) for w in caught)
    assert len(messages) == 2, messages
    assert "'maxlength' at /properties/p0/maxlength (and 4 more places)" in messages[0]
    assert "did you mean 'maxLength'" in messages[0]
    assert "'minimun' at /properties/p0/minimun (and 4 more places)" in messages[1]
    assert "did you mean 'minimum'" in messages[1]


def test_validity_answers_tell_value_classes_apart():
    """is_valid() remembers scalar answers per schema, value and class: 1 and true differ."""
    for values, kept in [([1, True], "(?:1|1\\.0)"), ([True, 1], "(?:1|1\\.0)"), ([False, 0], "(?:0|0\\.0)"),
                         ([0, False], "(?:0|0\\.0)")]:
        assert schema_to_regex({"type": "integer", "enum": values}) == kept, values
    assert schema_to_regex({"type": "boolean", "enum": [1, True, 0, False]}) == "(?:true|false)"


def test_validity_answers_never_outlive_their_schema():
    """An answer is kept with its schema: a new schema at a freed one's address is checked anew."""
    conv = _Converter({}, "", 3)
    for i in range(300):
        assert conv.is_valid({"const": i}, i, "enum", "/enum")
        assert not conv.is_valid({"const": i + 1}, i, "enum", "/enum")


INNER = {"items": [{"type": "string"}]}  # draft-07 tuple form: rewritten wherever it is a subschema
INNER_OUT = {"prefixItems": [{"type": "string"}]}


@pytest.mark.parametrize("schema, expected", [
    ({"minimum": 1, "exclusiveMinimum": True}, {"exclusiveMinimum": 1}),
    ({"maximum": 1, "exclusiveMaximum": True}, {"exclusiveMaximum": 1}),
    (INNER, INNER_OUT),
    ({"additionalItems": False}, {}),
    ({"dependencies": {"a": ["b"]}}, {"dependentRequired": {"a": ["b"]}}),
    ({"format": "no-such-format"}, {}),
    *[({kw: {"x": INNER}}, {kw: {"x": INNER_OUT}})
      for kw in ("properties", "patternProperties", "dependentSchemas")],
    *[({kw: INNER}, {kw: INNER_OUT})
      for kw in ("additionalProperties", "contains", "propertyNames", "not", "if", "then", "else",
                 "unevaluatedItems", "unevaluatedProperties")],
    *[({kw: [INNER]}, {kw: [INNER_OUT]}) for kw in ("allOf", "anyOf", "oneOf", "prefixItems")],
    ({"items": INNER}, {"items": INNER_OUT}),
], ids=lambda v: json.dumps(v)[:50])
def test_rewrite_reaches_every_keyword_it_rewrites(schema, expected):
    """The rewrite skips schemas without any keyword it reads (most leaves): every keyword it
    reads is one of those, so each rewrite below still happens."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert canonical(schema) == expected


def test_ref_targets_kept_at_every_use():
    """keep_ref_targets looks a present target up once; a dropped one is re-attached once and
    every "$ref" to it is pointed there."""
    raw = {"type": "object", "$defs": {"n": {"type": "null"}},
           "properties": {"a": {"$ref": "#/team"}, "b": {"$ref": "#/$defs/n"}, "c": {"$ref": "#/team"},
                          "d": {"$ref": "#/$defs/n"}, "e": {"items": {"$ref": "#/team"}}},
           "team": {"type": "integer", "javaType": "Team"}}
    canon = canonical(raw)
    props = canon["properties"]
    assert [props[k]["$ref"] for k in "abcd"] + [props["e"]["items"]["$ref"]] == \
        ["#/$defs/ref~1team", "#/$defs/n", "#/$defs/ref~1team", "#/$defs/n", "#/$defs/ref~1team"]
    assert canon["$defs"] == {"n": {"type": "null"}, "ref/team": {"type": "integer"}}
    rx = schema_to_regex(raw, whitespace="")
    assert regex_module.fullmatch(rx, '{"a":1,"b":null,"c":2,"e":[3]}')
    assert not regex_module.fullmatch(rx, '{"c":"x"}')


def test_memo_keys_maps_of_scalars_by_value():
    """{name: false} made twice is one key (a oneOf separator, a dependentRequired split); other
    names, values or value classes, or another order, are other keys."""
    from hf_constrained.json_schema.memo import _Memo
    from hf_constrained.json_schema.schemas import _Part

    def key(props, ptr="/p"):
        return _Memo.key([_Part({"type": "object", "properties": props}, ptr, (1,))])

    assert key({"a": False}) == key(dict(a=False))
    assert len({key({"a": False}), key({"a": True}), key({"b": False}), key({"a": 0}), key({"a": None}),
                key({"a": False, "b": False}), key({"b": False, "a": False}), key({"a": False}, "/q"),
                key({"a": {}})}) == 9


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"JSONSchemaBench corpus not found at {CORPUS}")
def test_memo_reuses_oneof_dependency_conjunctions(monkeypatch):
    """Github_medium o11667 (oneOf + dependencies): 95 conversions stored, not 121 (its
    separators' {name: false} keyed by identity), the same text as without the memo."""
    schema = json.loads((CORPUS / "Github_medium" / "o11667.json").read_text())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text, conv = _convert(schema, True, monkeypatch, shared=True)
        assert text == _convert(schema, False, monkeypatch, shared=True)[0]
    assert sum(len(v) for v in conv.memo.entries.values()) <= 95
