"""JSONProcessor / ChoiceProcessor end to end: every finished sample parses and
validates against its schema, with samples and with beams."""

import json
import re

import jsonschema
import pytest
import torch

from hf_constrained import ChoiceProcessor, JSONProcessor, SchemaError, Truncated, schema_to_regex

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 130},
        "email": {"type": "string", "format": "email"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3},
        "active": {"type": "boolean"},
    },
    "required": ["name", "age", "active"],
}
POINT = {"type": "object", "properties": {"x": {"type": "integer", "minimum": -5, "maximum": 5},
                                          "y": {"enum": ["up", "down", None]}},
         "required": ["x", "y"], "additionalProperties": False}
LIST = {"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 4}
CHOICE = {"anyOf": [{"const": "red"}, {"type": "integer", "minimum": 10, "maximum": 12}]}

VALIDATOR = jsonschema.Draft202012Validator


def check(schema, value):
    VALIDATOR(schema, format_checker=VALIDATOR.FORMAT_CHECKER).validate(value)


@pytest.mark.parametrize("mode", [dict(do_sample=True, num_return_sequences=4),
                                  dict(num_beams=3, num_return_sequences=2)], ids=["samples", "beams"])
def test_json_every_finished_sample_validates(deepseek, deepseek_model, mode):
    schemas = [PERSON, POINT, LIST, CHOICE]
    proc = JSONProcessor(schemas, deepseek)
    inputs = deepseek(["Person:", "Point:", "Flags:", "Colour:"], return_tensors="pt", padding=True)
    torch.manual_seed(0)
    out = deepseek_model.generate(**inputs, logits_processor=[proc], max_new_tokens=60, **mode)
    values = proc.parse(out)
    texts = proc.decode(out)
    n = mode["num_return_sequences"]
    assert len(values) == n and all(len(row) == 4 for row in values)
    finished = 0
    for s in range(n):
        for b, schema in enumerate(schemas):
            v = values[s][b]
            if isinstance(v, Truncated):
                assert v.text == texts[s][b] and not v
                continue
            finished += 1
            assert v == json.loads(texts[s][b])
            check(schema, v)
    assert finished >= n  # the small schemas always finish within 60 tokens


def test_pydantic_model_parse(deepseek, deepseek_model):
    pydantic = pytest.importorskip("pydantic")

    class Point(pydantic.BaseModel):
        x: int = pydantic.Field(ge=0, le=9)
        ok: bool

    proc = JSONProcessor(Point, deepseek)
    torch.manual_seed(1)
    out = deepseek_model.generate(**deepseek(["P"], return_tensors="pt"), logits_processor=[proc],
                                  do_sample=True, num_return_sequences=3, max_new_tokens=40)
    values = proc.parse(out)
    assert len(values) == 3
    assert any(isinstance(v, Point) for v in values)
    for v in values:
        assert isinstance(v, (Point, Truncated))


def test_a_document_the_pydantic_model_refuses_is_a_rejected_marker(deepseek, deepseek_model):
    """HttpUrl exports format: uri, so ftp://x is in the schema's language but the model refuses
    it: parse() gives a falsy Rejected for that sample (the ValidationError aborted the grid)."""
    pydantic = pytest.importorskip("pydantic")
    from transformers import LogitsProcessor

    from hf_constrained import Rejected

    class Site(pydantic.BaseModel):
        url: pydantic.HttpUrl

    class Spell(LogitsProcessor):  # stands in for a model that writes one document per row
        def __init__(self, docs, prompt_len):
            self.ids = [deepseek(d, add_special_tokens=False)["input_ids"] for d in docs]
            self.n = prompt_len

        def __call__(self, input_ids, scores):
            t = input_ids.shape[1] - self.n
            out = torch.full_like(scores, -1e9)
            for r, ids in enumerate(self.ids):
                out[r, ids[t] if t < len(ids) else deepseek.eos_token_id] = 0
            return out

    proc = JSONProcessor(Site, deepseek, cache_dir=False)
    inputs = deepseek(["Site:", "Site:"], return_tensors="pt")
    docs = ['{"url":"ftp://x"}', '{"url":"https://example.com/"}']
    out = deepseek_model.generate(**inputs, logits_processor=[Spell(docs, inputs["input_ids"].shape[1]), proc],
                                  max_new_tokens=24)
    bad, good = proc.parse(out)
    assert isinstance(bad, Rejected) and not bad and bad.text == docs[0]
    assert isinstance(bad.error, pydantic.ValidationError) and "scheme" in str(bad.error)
    assert isinstance(good, Site) and str(good.url) == "https://example.com/"


def test_type_adapters_and_pydantic_dataclasses(local_tok, local_model):
    """A TypeAdapter or a pydantic dataclass is a schema too (they were a TypeError): the
    regex comes from its json_schema(), parse() from its validate_json."""
    pydantic = pytest.importorskip("pydantic")
    from typing import Literal

    from hf_constrained import Rejected

    @pydantic.dataclasses.dataclass
    class Pick:
        name: Literal["ab", "cd"]
        ok: bool

    class Flag(pydantic.BaseModel):
        on: bool

    adapters = [pydantic.TypeAdapter(list[Literal[1, 2]]), Pick, pydantic.TypeAdapter(Flag)]
    proc = JSONProcessor(adapters, local_tok, cache_dir=False)  # one per prompt
    torch.manual_seed(0)
    out = local_model.generate(**local_tok(["a", "b", "c"], return_tensors="pt", padding=True),
                               logits_processor=[proc], do_sample=True, num_return_sequences=4, max_new_tokens=30)
    values, finished = proc.parse(out), 0
    for row in values:
        nums, pick, flag = row
        assert all(isinstance(v, Truncated) or not isinstance(v, Rejected) for v in row)
        assert isinstance(nums, Truncated) or (isinstance(nums, list) and set(nums) <= {1, 2})
        assert isinstance(pick, (Pick, Truncated)) and isinstance(flag, (Flag, Truncated))
        finished += sum(not isinstance(v, Truncated) for v in row)
    assert finished >= 4
    assert schema_to_regex(Pick) == schema_to_regex(pydantic.TypeAdapter(Pick).json_schema())
    with pytest.raises(TypeError, match="pydantic TypeAdapter"):
        JSONProcessor(object(), local_tok)


def test_choices_shared_and_per_prompt(deepseek, deepseek_model):
    cities = ["Paris", "London", "Tokyo", "New York", "Berlin", "Madrid", "Rome"]
    proc = ChoiceProcessor(cities, deepseek)
    out = deepseek_model.generate(**deepseek(["City:"], return_tensors="pt"), logits_processor=[proc],
                                  do_sample=True, num_return_sequences=7, max_new_tokens=10)
    assert all(v in cities for v in proc.parse(out))
    per = ChoiceProcessor([["yes", "no"], ["a.b", "a+b", "(x)"]], deepseek)
    out = deepseek_model.generate(**deepseek(["q1", "q2"], return_tensors="pt", padding=True),
                                  logits_processor=[per], num_beams=2, num_return_sequences=2, max_new_tokens=10)
    values = per.parse(out)
    assert all(row[0] in ("yes", "no") and row[1] in ("a.b", "a+b", "(x)") for row in values)


def test_unsupported_keyword_is_refused_with_pointer(deepseek):
    schema = {"type": "object", "properties": {"items": {"type": "array", "uniqueItems": True}}}
    with pytest.raises(SchemaError, match=r"uniqueItems.*/properties/items/uniqueItems"):
        JSONProcessor(schema, deepseek)


def test_schema_regex_is_a_regex_for_the_processor():
    r = schema_to_regex(POINT)
    assert re.fullmatch(r, '{"x":-5,"y":"up"}')
    assert not re.fullmatch(r, '{"x":6,"y":"up"}')


def test_choices_must_be_lists_of_strings(local_tok):
    """A single string was read as its characters (``ChoiceProcessor("abc")`` allowed a, b
    or c); it and per-prompt lists holding non-strings are refused."""
    with pytest.raises(TypeError, match=r"not one string: pass \['abc'\]"):
        ChoiceProcessor("abc", local_tok, cache_dir=False)
    with pytest.raises(TypeError, match="list of strings"):
        ChoiceProcessor([["a", 1]], local_tok, cache_dir=False)
    assert ChoiceProcessor(["abc"], local_tok, cache_dir=False).choices == [["abc"]]
