"""Structured output on top of :class:`RegexProcessor`: JSON Schemas, Pydantic
models and fixed choices.

Both processors are thin layers: they turn the schema or the choices into a
regex (:mod:`hf_constrained.json_schema`) and add :meth:`parse`, which returns
parsed values shaped ``(samples, batch)`` like :meth:`RegexProcessor.decode`.
A sample cut off by ``max_new_tokens`` comes back as a :class:`Truncated`
marker instead of raising in the middle of the list.

>>> schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
>>> proc = JSONProcessor(schema, tokenizer)                   # doctest: +SKIP
>>> out = model.generate(**inputs, logits_processor=[proc], num_return_sequences=3)  # doctest: +SKIP
>>> proc.parse(out)                                           # doctest: +SKIP
[{'ok': True}, {'ok': False}, Truncated(text='{"ok":tr')]
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from .json_schema import choice_regex, schema_to_regex
from .output import squeeze_grid, to_grid
from .processor import RegexProcessor


@dataclass(frozen=True)
class Truncated:
    """A sample that ``max_new_tokens`` cut off before it was complete.

    ``text`` is the partial text (a valid prefix). It is falsy, so
    ``[v for v in values if v]`` keeps the complete ones.
    """

    text: str

    def __bool__(self) -> bool:
        return False


def _is_model_class(obj) -> bool:
    return isinstance(obj, type) and hasattr(obj, "model_json_schema") and hasattr(obj, "model_validate_json")


class _ParsingProcessor(RegexProcessor):
    def _parse_one(self, text: str, prompt: int):
        raise NotImplementedError

    def parse(self, out, *, num_prompts: int | None = None):
        """Parsed values shaped ``(samples, batch)``; truncated samples are :class:`Truncated`."""
        gens = self.generations(out, num_prompts=num_prompts)
        flat = []
        for g in gens:
            for s in g.sequences:
                flat.append(self._parse_one(s.text, g.prompt_index) if s.finished else Truncated(s.text))
        return squeeze_grid(to_grid(flat, len(gens)))


class JSONProcessor(_ParsingProcessor):
    """Constrain generation to JSON documents valid under a JSON Schema.

    Args:
        schema_or_schemas: a schema (dict, JSON string or Pydantic model class)
            for every prompt, or a list with one per prompt.
        tokenizer: the model's tokenizer.
        whitespace: regex for the whitespace allowed between JSON tokens
            (default: compact, see :func:`schema_to_regex`).
        strict: refuse keywords and formats the schema's draft does not define
            instead of ignoring them as annotations.
        **kwargs: passed to :class:`RegexProcessor` (``eos_token_id``, ``cache_dir``...).

    :meth:`parse` returns dicts (or Pydantic instances when a model class was given).
    """

    def __init__(self, schema_or_schemas, tokenizer, *, whitespace=None, strict=False, **kwargs):
        schemas = list(schema_or_schemas) if isinstance(schema_or_schemas, (list, tuple)) else [schema_or_schemas]
        per_prompt = isinstance(schema_or_schemas, (list, tuple))
        self.schemas = schemas
        regexes = [schema_to_regex(s, whitespace=whitespace, strict=strict) for s in schemas]
        super().__init__(regexes if per_prompt else regexes[0], tokenizer, **kwargs)

    def _parse_one(self, text: str, prompt: int):
        schema = self.schemas[prompt if len(self.schemas) > 1 else 0]
        if _is_model_class(schema):
            return schema.model_validate_json(text)
        return json.loads(text)


class ChoiceProcessor(_ParsingProcessor):
    """Constrain generation to exactly one of a list of strings.

    ``choices_or_per_prompt_choices`` is a list of strings for every prompt, or
    a list of such lists, one per prompt. :meth:`parse` returns the chosen strings.
    """

    def __init__(self, choices_or_per_prompt_choices, tokenizer, **kwargs):
        choices = list(choices_or_per_prompt_choices)
        if not choices:
            raise ValueError("ChoiceProcessor needs at least one choice")
        per_prompt = all(isinstance(c, (list, tuple)) for c in choices)
        if not per_prompt and not all(isinstance(c, str) for c in choices):
            raise TypeError("choices must be a list of strings or a list of lists of strings")
        self.choices = [list(c) for c in choices] if per_prompt else [choices]
        regexes = [choice_regex(c) for c in self.choices]
        super().__init__(regexes if per_prompt else regexes[0], tokenizer, **kwargs)

    def _parse_one(self, text: str, prompt: int):
        return text
