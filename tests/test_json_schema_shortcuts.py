"""The converter's construction shortcuts of issue #12, part 30 (benchmarks/README.md, "Time to
first mask, part 5") give what the plain steps give:

* ``_flatten`` appends a part with nothing to expand as it is, and a bare ``{"$ref": ...}``
  without copying it; ``_object`` writes each member's parts directly when one part is not
  empty and has no patterns, propertyNames or unevaluated* (texts of main at f3bb47f, by
  SHA-256, for schemas that take each path and each way around it);
* local ``#...`` references against the empty base skip urllib, giving its answer;
* keep_ref_targets skips its walk when every ``$ref`` the rewrite wrote resolves;
* the rewrite's pointers are written out only for messages, and say the same;
* the meta-schema check takes a fragment-only ``$ref`` as a URI-reference without the checker
  only where the checker says so;
* ``_alt`` of one alternative is that alternative.
"""

from __future__ import annotations

import copy
import hashlib
import random
import warnings
from urllib.parse import unquote, urldefrag

import pytest

from hf_constrained.errors import SchemaError
from hf_constrained.json_schema import refs as refs_module
from hf_constrained.json_schema import schema_to_regex
from hf_constrained.json_schema.converter import _Converter
from hf_constrained.json_schema.drafts import _canonical, canonical, check_metaschema
from hf_constrained.json_schema.metaschema import _LOCAL_REF, _checker, surely_valid
from hf_constrained.json_schema.regex_text import _alt
from hf_constrained.json_schema.schemas import _join_uri

P = {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "string", "maxLength": 2}}, "required": ["x"]}
CASES = {
    "bare_ref": {"$defs": {"p": P}, "type": "object", "properties": {"a": {"$ref": "#/$defs/p"}, "b": {"$ref": "#/$defs/p"}}},
    "ref_with_siblings": {"$defs": {"p": P}, "type": "object", "properties": {"a": {"$ref": "#/$defs/p", "required": ["y"]}}},
    "allOf_beside": {"type": "object", "properties": {"a": {"type": "integer"}}, "allOf": [{"required": ["a"]}, {"properties": {"b": {"type": "boolean"}}}]},
    "if_then_else": {"type": "object", "properties": {"k": {"enum": ["x", "y"]}, "v": {"type": "integer"}},
                     "if": {"properties": {"k": {"const": "x"}}, "required": ["k"]}, "then": {"required": ["v"]}, "else": {"properties": {"v": {"maximum": 3}}}},
    "bool_if": {"type": "string", "if": True, "then": {"maxLength": 1}, "else": {"minLength": 3}},
    "then_without_if": {"type": "integer", "then": {"maximum": 1}, "else": {"minimum": 5}},
    "not_type": {"not": {"type": ["string", "object", "array", "boolean", "number"]}},
    "not_schema": {"type": "integer", "minimum": 0, "maximum": 9, "not": {"enum": [3, 4]}},
    "pattern_properties": {"$defs": {"p": P}, "type": "object", "properties": {"a": {"$ref": "#/$defs/p"}, "ab": {"type": "integer"}},
                           "patternProperties": {"^a": {"type": "integer", "minimum": 1}}, "additionalProperties": False},
    "property_names": {"type": "object", "properties": {"ab": {"type": "integer"}}, "propertyNames": {"maxLength": 1}},
    "additional_schema": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a", "z"], "additionalProperties": {"type": "boolean"}},
    "additional_false_required": {"type": "object", "properties": {"a": {"type": "null"}}, "required": ["a", "z"], "additionalProperties": False},
    "required_only": {"type": "object", "required": ["q", "r"]},
    "two_parts": {"$defs": {"p": P}, "allOf": [{"$ref": "#/$defs/p"}, {"properties": {"x": {"maximum": 5}}}]},
    "ref_to_ref": {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/c"}, "c": {"type": "boolean"}}, "type": "array", "items": {"$ref": "#/$defs/a"}, "maxItems": 2},
    "recursive": {"$defs": {"n": {"type": "object", "properties": {"v": {"type": "integer"}, "k": {"$ref": "#/$defs/n"}}, "required": ["v"]}}, "$ref": "#/$defs/n"},
    "escaped_pointer": {"$defs": {"a/b": {"type": "integer"}, "c~d": {"type": "null"}}, "type": "array", "prefixItems": [{"$ref": "#/$defs/a~1b"}, {"$ref": "#/$defs/c~0d"}], "items": False},
    "unevaluated_required": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a", "z"], "unevaluatedProperties": {"type": "boolean"}},
    "unevaluated": {"type": "object", "properties": {"a": {"type": "integer"}}, "unevaluatedProperties": False},
    "dropped_keyword_ref": {"type": "object", "properties": {"t": {"$ref": "#/team"}}, "team": {"type": "integer", "minimum": 2, "maximum": 3}},
    "dependent": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "dependentRequired": {"a": ["b"]}},
    "one_of": {"oneOf": [{"type": "object", "properties": {"k": {"const": 1}}, "required": ["k"]}, {"type": "object", "properties": {"k": {"const": 2}}, "required": ["k"]}]},
}

# schema_to_regex(case, whitespace="", shared=True) on main at f3bb47f: SHA-256 of the text,
# or the error
EXPECTED = {
    "bare_ref": "5a86614ac719f5ec000e796772c9705d93e5383d11e0203e34af46a6b4d4dcf7",
    "ref_with_siblings": "b95dc6e5cf9906db5e4ddc7b62dbbf0474363f10aab1260a600305d44a97eb41",
    "allOf_beside": "114ad8f42381efc2147f1d9fe3de8e83205cdf135fc0ceb17a6d6e167b8ef19a",
    "if_then_else": "8476629cb05d0029d60b16ddebf37194e26a5517d358f33ce6aa6b275f71a665",
    "bool_if": "8b524ff6544bbd1dd5d98e0856fda688045e766a37a2c39a9e1e52e696fae8ff",
    "then_without_if": "cee3d1d56e7d267cb4d6358d5cb97774815b6652efab54ac60827435381cf7e1",
    "not_type": "74234e98afe7498fb5daf1f36ac2d78acc339464f950703b8c019892f982b90b",
    "not_schema": "778219d2dadaf96563e9debe35957458bcba3ef1c96e702ce8164b74c10b98c9",
    "pattern_properties": "ccca2c60de0f85a02e62a243af9b4d6d6f3701ccecacffed3a6bed7dd0fdb259",
    "property_names": "87057d4caa0d38a06f71ae2c7cf619c33d46e3704a74bc765d3a2edc87f75f08",
    "additional_schema": "3669404ba2bfafb3d2cd94ff2ac82ad2d60263fa8bbf6841c12cbba79a01dd76",
    "additional_false_required": "SchemaError: schema at /: no JSON value satisfies the schema (as far as the converter can generate)",
    "required_only": "f98998eb4026a7de01183e0d4af709afa6ba144621ae90f6033ea0e428ed034b",
    "two_parts": "0d5478b71c637fc19960ac209028bafa207cce21e26b0e3d74e53b01e3f67b34",
    "ref_to_ref": "bcc4dbf78ac439616993a40623d8d442cdba851012761f416c24f55d455655be",
    "recursive": "4aed724ce58c50f734e22bc924b11656aee3b59a64fa5cacab65fe72cb1a664e",
    "escaped_pointer": "e2468c2471effc5e82acb679f0a339a31577b9b3abdb35dd49f4007b7d56eea1",
    "unevaluated_required": "58a23069d60a8b142ee761ea532559f9b9f3f0d36c9f35998cfd03588913c088",
    "unevaluated": "dd8a42b5ab23ac152301333bb56eca2435a9537aad604ccae6f91de681b2b767",
    "dropped_keyword_ref": "da31bb68f57d0901531304351e09074fc518d6fdd550b1b132295cd1ac368905",
    "dependent": "4071d5d8207a75ead9dea5b9052ce2614afe657a8b47883a6b96802a89d764d6",
    "one_of": "54c10181e56f671c2f521f89a0b3a248f7310acd783f051beae295736a45e357",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_texts_are_mains(name):
    """Each flattening and member path (and the ways around them) writes main's text."""
    try:
        text = schema_to_regex(copy.deepcopy(CASES[name]), whitespace="", shared=True)
    except SchemaError as exc:
        assert f"SchemaError: {exc}" == EXPECTED[name]
        return
    assert hashlib.sha256(text.encode()).hexdigest() == EXPECTED[name]


@pytest.mark.parametrize("name", sorted(CASES))
def test_conversion_leaves_the_schema_as_it_was(name):
    """The parts appended as they are (no copy) are never written into."""
    canon = canonical(copy.deepcopy(CASES[name]))
    before = copy.deepcopy(canon)
    conv = _Converter(canon, "", 3)
    try:
        conv.run()
    except SchemaError:
        pass
    assert canon == before


def _urllib_resolution(ref: str, base: str):
    """What ``_resolve_uri`` computed before its shortcut: (uri, fragment)."""
    uri, frag = urldefrag(_join_uri(base, ref))
    return uri, unquote(frag)


@pytest.mark.parametrize("seed", range(4))
def test_local_refs_resolve_as_urllib_reads_them(seed):
    """Random '#...' references (tabs, newlines, '#', '%', '?'...) against the empty base: the
    same target or the same refusal as resolving through urllib."""
    rng = random.Random(seed)
    chars = ["a", "b", "/", "#", "%", "%41", "?", " ", "\t", "\n", "\r", "~0", "~1", "é", "\x00"]
    defs = {}
    for _ in range(300):
        ref = "#/$defs/" + "".join(rng.choice(chars) for _ in range(rng.randint(0, 4)))
        uri, frag = _urllib_resolution(ref, "")
        key = frag.split("/")[2].replace("~1", "/").replace("~0", "~") if frag.count("/") == 2 else None
        if key is not None:
            defs.setdefault(key, {"const": len(defs)})
    schema = {"$defs": defs}
    rng = random.Random(seed)
    for _ in range(300):
        ref = "#/$defs/" + "".join(rng.choice(chars) for _ in range(rng.randint(0, 4)))
        conv = _Converter(schema, "", 3, indexed=False)
        plain = _Converter(schema, "", 3, indexed=False)
        plain._resolve_uri = lambda r, b, p, conv=plain: _Converter._resolve_uri(conv, r, b + "", p)

        def outcome(c):
            try:
                return ("ok", c._resolve_uri(ref, "", "/$ref"))
            except SchemaError as exc:
                return ("error", str(exc))

        uri, frag = _urllib_resolution(ref, "")
        got = outcome(conv)
        if uri == "" and frag.startswith("/"):
            tokens = [t.replace("~1", "/").replace("~0", "~") for t in frag.split("/")[1:]]
            target = schema
            for t in tokens:
                target = target.get(t) if isinstance(target, dict) else None
            if target is not None:
                assert got[0] == "ok" and got[1][0] is target, (ref, got)
                continue
        assert got[0] == "error", (ref, got)


def test_a_tab_in_a_local_ref_is_removed_as_urllib_removes_it():
    """urllib drops tabs and newlines from a URL: '#/$defs/a<TAB>b' is '#/$defs/ab' there."""
    schema = {"$defs": {"ab": {"const": 1}, "a\tb": {"const": 2}}}
    conv = _Converter(schema, "", 3, indexed=False)
    assert conv.resolve("#/$defs/a\tb", "/$ref") == (schema["$defs"]["ab"], "/$defs/ab")
    assert conv.resolve("#/$defs/ab", "/$ref") == (schema["$defs"]["ab"], "/$defs/ab")


def test_ref_targets_kept_only_when_needed(monkeypatch):
    """A $ref into a dropped keyword is still re-attached; when every $ref resolves in the
    rewritten schema, its walk is not made and the schema is the same."""
    walks = []
    real = refs_module._nested
    monkeypatch.setattr(refs_module, "_nested", lambda s: walks.append(1) or real(s))
    raw = {"type": "object", "properties": {"t": {"$ref": "#/team"}, "u": {"$ref": "#/$defs/u"}},
           "team": {"type": "integer", "javaType": "Team"}, "$defs": {"u": {"type": "null"}}}
    assert canonical(raw) == {"type": "object", "properties": {"t": {"$ref": "#/$defs/ref~1team"},
                              "u": {"$ref": "#/$defs/u"}},
                              "$defs": {"u": {"type": "null"}, "ref/team": {"type": "integer"}}}
    assert walks
    walks.clear()
    fine = {"type": "object", "properties": {"u": {"$ref": "#/$defs/u"}, "v": {"$ref": "#/$defs/a%20b"}},
            "$defs": {"u": {"type": "null"}, "a b": {"type": "integer"}}}
    assert canonical(fine) == fine and not walks


@pytest.mark.parametrize("name", sorted(CASES) + ["content", "nested_id"])
def test_rewrite_same_with_and_without_the_walk(name, monkeypatch):
    """The rewritten schema is the same whether keep_ref_targets may skip its walk or not."""
    schema = {"content": {"type": "string", "contentSchema": {"$ref": "#/team"}, "team": {"type": "integer"}},
              "nested_id": {"properties": {"a": {"$id": "http://x/a.json", "$ref": "#/team"}}, "team": {"type": "null"}},
              }.get(name) or CASES[name]
    fast = _canonical(copy.deepcopy(schema), False)
    real = refs_module.keep_ref_targets
    monkeypatch.setattr("hf_constrained.json_schema.drafts.keep_ref_targets",
                        lambda raw, canon, rewrite, refs=None: real(raw, canon, rewrite))
    assert _canonical(copy.deepcopy(schema), False) == fast


def test_rewrite_messages_name_the_place():
    """Strict errors and near-miss warnings name the pointer the rewrite no longer writes out
    for every subschema."""
    schema = {"type": "object", "properties": {"a/b": {"type": "array", "items": {
        "allOf": [{"type": "string"}, {"type": "string", "maxLenght": 2, "x~y": 1}]}}}}
    with pytest.raises(SchemaError, match="unknown keyword 'maxLenght' at /properties/a~1b/items/allOf/1/maxLenght"):
        _canonical(copy.deepcopy(schema), True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _canonical(copy.deepcopy(schema), False)
    assert any("'maxLenght' at /properties/a~1b/items/allOf/1/maxLenght" in str(w.message) for w in caught)
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"d": {"items": [
        {"type": "integer", "format": "nope"}]}}}
    with pytest.raises(SchemaError, match="unknown format 'nope' at /definitions/d/prefixItems/0/format"):
        _canonical(draft7, True)


@pytest.mark.parametrize("seed", range(3))
def test_local_ref_shortcut_agrees_with_the_checker(seed):
    """Every reference the shortcut takes is one the format checker accepts; the others are
    still asked (an invalid one makes the schema not surely valid)."""
    check = _checker("draft2020-12")
    rng = random.Random(seed)
    chars = "#/aZ09-._~!$&'()*+,;=:@?%[] \"<>\\^`{|}\té"
    taken = 0
    for _ in range(3000):
        ref = "#" + "".join(rng.choice(chars) for _ in range(rng.randint(0, 8)))
        if _LOCAL_REF(ref):
            taken += 1
            assert check.format(ref, "uri-reference"), ref
        assert surely_valid({"$ref": ref}, "draft2020-12") == bool(check.format(ref, "uri-reference"))
    assert taken > 300
    for bad in ("#/a b", "#/a%zz", "#/a#b", "#/a\\b", "#/é"):
        assert not _LOCAL_REF(bad)


def test_invalid_ref_still_refused():
    with pytest.raises(SchemaError, match="meta-schema"):
        check_metaschema({"$schema": "https://json-schema.org/draft/2020-12/schema", "$ref": "#/a b"})


def test_alt_of_one():
    assert _alt([None]) is None and _alt([""]) == "" and _alt(["ab"]) == "ab"
    assert _alt(iter(["a"])) == "a" and _alt(("a", "")) == "a?" and _alt(["a", "a"]) == "a"
