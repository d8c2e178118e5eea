"""Structured output on top of :class:`RegexProcessor`: JSON Schemas, Pydantic
models and fixed choices.

Both processors are thin layers: they turn the schema or the choices into a
regex (:mod:`hf_constrained.json_schema`) and add :meth:`parse`, which returns
parsed values shaped ``(samples, batch)`` like :meth:`RegexProcessor.decode`.
A sample cut off by ``max_new_tokens`` comes back as a :class:`Truncated`
marker instead of raising in the middle of the list, and a document a Pydantic model
refuses (a rule its JSON Schema does not carry) as a :class:`Rejected` marker.

>>> from hf_constrained import offline
>>> tok = offline.local_tokenizer()
>>> model = offline.tiny_model(tok)
>>> schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
>>> proc = JSONProcessor(schema, tok, cache_dir=False)
>>> out = model.generate(**tok(["JSON:"], return_tensors="pt"), logits_processor=[proc],
...                      do_sample=True, num_return_sequences=3, max_new_tokens=12)
>>> values = proc.parse(out)          # e.g. [{'ok': True}, {'ok': False}, Truncated(text='{"ok":tr')]
>>> all(v["ok"] in (True, False) if v else isinstance(v, Truncated) for v in values)
True
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from .json_schema import choice_regex, schema_to_regex
from .json_schema.schemas import pydantic_adapter
from .output import squeeze_grid, to_grid
from .processor import RegexProcessor


@dataclass(frozen=True)
class Truncated:
    """A sample that ``max_new_tokens`` cut off before it was complete.

    ``text`` is the partial text (a valid prefix). It is falsy, so
    ``[v for v in values if v]`` keeps the complete ones.

    >>> [v for v in [{"ok": True}, Truncated('{"o')] if v]
    [{'ok': True}]
    """

    text: str

    def __bool__(self) -> bool:
        return False


@dataclass(frozen=True)
class Rejected:
    """A complete document that the Pydantic model refused (``model_validate_json``).

    The mask follows the model's JSON Schema, and some of a model's rules are not in it: an
    ``HttpUrl`` exports ``format: uri`` (any scheme, ``ftp://x`` included), ``dict[int, str]``
    keys are any strings. ``text`` is the document (valid under the schema), ``error`` Pydantic's
    ``ValidationError``. It is falsy, like :class:`Truncated`.

    >>> r = Rejected('{"url":"ftp://x"}', ValueError("URL scheme should be 'http' or 'https'"))
    >>> bool(r), r.text
    (False, '{"url":"ftp://x"}')
    """

    text: str
    error: Exception

    def __bool__(self) -> bool:
        return False


def _is_model_class(obj) -> bool:
    return isinstance(obj, type) and hasattr(obj, "model_json_schema") and hasattr(obj, "model_validate_json")


def _json_validator(schema):
    """Pydantic's ``validate_json`` for a model class, a ``TypeAdapter`` or a pydantic
    dataclass; None for a plain schema (parsed with ``json.loads``)."""
    if _is_model_class(schema):
        return schema.model_validate_json
    if isinstance(schema, (dict, bool, str, bytes)):
        return None
    adapter = pydantic_adapter(schema)
    return adapter.validate_json if adapter is not None else None


class _ParsingProcessor(RegexProcessor):
    def _parse_one(self, text: str, prompt: int):
        raise NotImplementedError

    def parse(self, out, *, num_prompts: int | None = None):
        """Parsed values shaped ``(samples, batch)``; samples cut off before they were a full
        match are :class:`Truncated` (a full match without room left for EOS is a result), and
        documents a Pydantic model refuses are :class:`Rejected`."""
        gens = self.generations(out, num_prompts=num_prompts)
        flat = []
        for g in gens:
            for s in g.sequences:
                complete = s.finished or self._full_match(s.token_ids, g.prompt_index)
                flat.append(self._parse_one(s.text, g.prompt_index) if complete else Truncated(s.text))
        return squeeze_grid(to_grid(flat, len(gens)))

    def _full_match(self, token_ids: list, prompt: int) -> bool:
        """Whether a sample cut off before EOS already is a full match (then it is a result)."""
        starts = self.constraint.starts
        start = starts[prompt if len(starts) > 1 else 0]
        state = self.constraint.walk(np.array([start]), np.array([token_ids], dtype=np.int64).reshape(1, -1))
        return bool(self.constraint.accepting(state)[0])


class JSONProcessor(_ParsingProcessor):
    """Constrain generation to JSON documents valid under a JSON Schema.

    Args:
        schema_or_schemas: a schema (dict, JSON string, Pydantic model class, ``TypeAdapter``
            or pydantic dataclass)
            for every prompt, or a list with one per prompt.
        tokenizer: the model's tokenizer.
        whitespace: regex for the whitespace allowed between JSON tokens
            (default: compact, see :func:`schema_to_regex`).
        strict: refuse keywords and formats the schema's draft does not define
            instead of ignoring them as annotations.
        max_recursion_depth: how often a recursive ``$ref`` is unrolled in the regex (default 3);
            None: a recursive schema, or one with free-form values (``{}``...), becomes a grammar
            with no depth limit (:mod:`hf_constrained.json_schema.recursive`; slower per step, masks
            not cached on disk). A schema with neither stays on the regex path either way.
        **kwargs: passed to :class:`RegexProcessor` (``eos_token_id``, ``cache_dir``...).

    :meth:`parse` returns dicts (or what Pydantic's validation returns for a model class, a
    ``TypeAdapter`` or a pydantic dataclass).

    >>> from hf_constrained import offline
    >>> tok = offline.local_tokenizer()
    >>> proc = JSONProcessor([{"type": "integer"}, {"enum": ["a", "b"]}], tok, cache_dir=False)
    >>> out = offline.tiny_model(tok).generate(**tok(["x", "y"], return_tensors="pt", padding=True),
    ...                                        logits_processor=[proc], max_new_tokens=8)
    >>> a, b = proc.parse(out)
    >>> (not a or isinstance(a, int)) and (not b or b in ("a", "b"))
    True

    A recursive schema with ``max_recursion_depth=None`` is a grammar, nested to any depth:

    >>> tree = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}},
    ...         "additionalProperties": False}
    >>> proc = JSONProcessor(tree, tok, max_recursion_depth=None, cache_dir=False)
    >>> type(proc.constraint).__name__
    'GrammarConstraint'
    >>> proc.constraint.state_of_text('{"kids":[' * 20 + "{}" + "]}" * 20) > 0
    True
    """

    def __init__(self, schema_or_schemas, tokenizer, *, whitespace=None, strict=False, max_recursion_depth=3,
                 **kwargs):
        schemas = list(schema_or_schemas) if isinstance(schema_or_schemas, (list, tuple)) else [schema_or_schemas]
        per_prompt = isinstance(schema_or_schemas, (list, tuple))
        self.schemas = schemas
        self._validators = [_json_validator(s) for s in schemas]  # pydantic's, per schema (or None)
        if max_recursion_depth is None:  # recursive schemas as grammars (json_schema/recursive.py)
            from .json_schema.recursive import _init_grammar_route
            regexes = _init_grammar_route(self, schemas, per_prompt, tokenizer, whitespace, kwargs, strict=strict)
            if regexes is None:
                return
        else:
            # shared definitions: a $ref used in many places is parsed and built once
            regexes = [schema_to_regex(s, whitespace=whitespace, max_recursion_depth=max_recursion_depth,
                                       strict=strict, shared=True) for s in schemas]
        super().__init__(regexes if per_prompt else regexes[0], tokenizer, **kwargs)

    def _parse_one(self, text: str, prompt: int):
        validate = self._validators[prompt if len(self._validators) > 1 else 0]
        if validate is not None:
            try:
                return validate(text)
            except ValueError as e:  # pydantic.ValidationError: a rule the schema does not carry
                return Rejected(text, e)
        return json.loads(text)


class ChoiceProcessor(_ParsingProcessor):
    """Constrain generation to exactly one of a list of strings.

    ``choices_or_per_prompt_choices`` is a list of strings for every prompt, or
    a list of such lists, one per prompt. :meth:`parse` returns the chosen strings.

    >>> from hf_constrained import offline
    >>> tok = offline.local_tokenizer()
    >>> proc = ChoiceProcessor(["Paris", "London", "Tokyo"], tok, cache_dir=False)
    >>> out = offline.tiny_model(tok).generate(**tok(["City:"], return_tensors="pt"), logits_processor=[proc],
    ...                                        num_beams=3, num_return_sequences=3, max_new_tokens=8)
    >>> set(proc.parse(out)) <= {"Paris", "London", "Tokyo"}
    True
    """

    def __init__(self, choices_or_per_prompt_choices, tokenizer, **kwargs):
        if isinstance(choices_or_per_prompt_choices, (str, bytes)):   # list("abc") is a, b, c
            raise TypeError(f"choices must be a list of strings, not one string: pass "
                            f"[{choices_or_per_prompt_choices!r}] for that single choice")
        choices = list(choices_or_per_prompt_choices)
        if not choices:
            raise ValueError("ChoiceProcessor needs at least one choice")
        per_prompt = all(isinstance(c, (list, tuple)) for c in choices)
        if not per_prompt and not all(isinstance(c, str) for c in choices):
            raise TypeError("choices must be a list of strings or a list of lists of strings")
        if per_prompt and not all(isinstance(x, str) for c in choices for x in c):
            raise TypeError("choices must be a list of strings or a list of lists of strings")
        self.choices = [list(c) for c in choices] if per_prompt else [choices]
        regexes = [choice_regex(c) for c in self.choices]
        super().__init__(regexes if per_prompt else regexes[0], tokenizer, **kwargs)

    def _parse_one(self, text: str, prompt: int):
        return text
