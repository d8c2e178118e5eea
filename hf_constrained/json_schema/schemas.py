"""Schema tables and walking: keyword sets, JSON pointers, refusals, subschema
walk, ``$id`` URIs, loading, and the conjunct (:class:`_Part`) and type kinds
the converter works with."""

from __future__ import annotations

import json
import re
from typing import Any, Iterator, NamedTuple, Optional
from urllib.parse import urldefrag, urljoin

from ..errors import SchemaError

_ANNOTATIONS = frozenset({
    "title", "description", "default", "examples", "$schema", "$id",
    "$comment", "deprecated", "readOnly", "writeOnly", "$anchor",
    "$dynamicAnchor", "discriminator", "$defs", "definitions",
})

_HANDLED = frozenset({
    "type", "enum", "const", "properties", "required", "additionalProperties",
    "patternProperties", "propertyNames", "unevaluatedProperties",
    "unevaluatedItems", "items", "prefixItems", "minItems", "maxItems",
    "minLength", "maxLength", "pattern", "format", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "anyOf", "oneOf", "allOf",
    "$ref", "not", "if", "then", "else",
})

# Keywords the converter cannot enforce in general; they are only accepted
# when the schema excludes the JSON type they apply to, or when trivially
# satisfied (checked by the type converters).
_TYPE_SPECIFIC = {
    "uniqueItems": "array", "contains": "array", "minContains": "array",
    "maxContains": "array",
    "dependentRequired": "object", "dependentSchemas": "object",
    "minProperties": "object", "maxProperties": "object",
    "multipleOf": "number",
    "contentEncoding": "string", "contentMediaType": "string",
    "contentSchema": "string",
}

_ARRAY_KEYWORDS = frozenset({
    "items", "prefixItems", "minItems", "maxItems", "uniqueItems",
    "contains", "minContains", "maxContains", "unevaluatedItems"})
_OBJECT_KEYWORDS = frozenset({
    "properties", "required", "additionalProperties", "patternProperties",
    "propertyNames", "unevaluatedProperties", "minProperties",
    "maxProperties", "dependentRequired", "dependentSchemas"})

_HINTS = {
    "uniqueItems": "the regex cannot force array items to be distinct unless the items have "
                   "few possible values (an enum, const or boolean item schema); remove it, "
                   "or set maxItems to 1",
    "contains": "the regex cannot express 'some item matches'; use "
                "prefixItems to place the required item instead",
    "multipleOf": "remove it, or enumerate the allowed values with enum",
    "minProperties": "make enough properties required instead",
    "maxProperties": "declare the properties and set additionalProperties: "
                     "false instead",
    "dependentRequired": "make the properties unconditionally required or "
                         "split the schema into anyOf alternatives",
    "dependentSchemas": "split the schema into anyOf alternatives",
    "if": "rewrite the condition as anyOf alternatives",
    "not": "only `not` with a boolean or a `type`-only schema is supported; "
           "express the allowed values positively",
    "$dynamicRef": "replace it with a plain local $ref",
    "contentEncoding": "remove it (the regex cannot produce encoded content)",
    "contentMediaType": "remove it (the regex cannot produce encoded content)",
    "contentSchema": "remove it (the regex cannot produce encoded content)",
}
_DEFAULT_HINT = ("remove it or rewrite the schema with supported keywords "
                 "(see the hf_constrained.json_schema module docstring)")


def _ptr(base: str, *tokens: Any) -> str:
    """Append JSON pointer tokens (escaping ``~`` and ``/``)."""
    for t in tokens:
        t = str(t)
        base += "/" + (t.replace("~", "~0").replace("/", "~1") if "~" in t or "/" in t else t)
    return base


def _unsupported(keyword: str, pointer: str, why: str = "") -> SchemaError:
    hint = _HINTS.get(keyword, _DEFAULT_HINT)
    why = f" ({why})" if why else ""
    return SchemaError(f"unsupported keyword {keyword!r} at {pointer or '/'}"
                       f"{why}: {hint}")


def _refuse(keyword: str, pointer: str, message: str) -> SchemaError:
    return SchemaError(f"cannot honour keyword {keyword!r} at "
                       f"{pointer or '/'}: {message}")


_SCHEMA_MAP_KEYWORDS = ("properties", "patternProperties", "$defs",
                        "definitions", "dependentSchemas")
_SCHEMA_KEYWORDS = ("additionalProperties", "items", "contains",
                    "propertyNames", "not", "if", "then", "else",
                    "unevaluatedItems", "unevaluatedProperties",
                    "contentSchema")
_SCHEMA_LIST_KEYWORDS = ("allOf", "anyOf", "oneOf", "prefixItems")
#: Every keyword that holds subschemas (a schema with none of them is a leaf of the walks).
_SUBSCHEMA_KEYWORDS = frozenset(_SCHEMA_MAP_KEYWORDS + _SCHEMA_KEYWORDS + _SCHEMA_LIST_KEYWORDS)


def _subschemas(schema: Any, pointer: str) -> Iterator[tuple[Any, str]]:
    """Direct subschemas of ``schema`` with their pointers."""
    if not isinstance(schema, dict):
        return
    for kw in _SCHEMA_MAP_KEYWORDS:
        if isinstance(schema.get(kw), dict):
            for name, sub in schema[kw].items():
                yield sub, _ptr(pointer, kw, name)
    for kw in _SCHEMA_KEYWORDS:
        if kw in schema:
            yield schema[kw], _ptr(pointer, kw)
    for kw in _SCHEMA_LIST_KEYWORDS:
        if isinstance(schema.get(kw), list):
            for i, sub in enumerate(schema[kw]):
                yield sub, _ptr(pointer, kw, i)


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def _join_uri(base: str, ref: str) -> str:
    """``ref`` resolved against ``base`` (also for ``urn:`` bases, which
    :func:`urllib.parse.urljoin` does not join).

    >>> _join_uri("urn:x", "#/a"), _join_uri("http://e.com/a/b.json", "c.json#f")
    ('urn:x#/a', 'http://e.com/a/c.json#f')
    """
    if ref.startswith("#"):
        return urldefrag(base)[0] + ref
    if _SCHEME.match(ref) or not base:
        return ref
    return urljoin(base, ref)


def _nested(schema: Any) -> list:
    """All subschemas, in :func:`_walk`'s order, without their pointers (one loop, no
    generators: the converter and ``keep_ref_targets`` walk whole schemas several times).

    >>> from hf_constrained.json_schema.schemas import _nested, _walk
    >>> s = {"properties": {"a": {"items": True}}, "anyOf": [{"not": {}}]}
    >>> _nested(s) == [sub for sub, _ in _walk(s)]
    True
    """
    out, stack = [], [schema]
    while stack:
        s = stack.pop()
        out.append(s)
        if isinstance(s, dict) and not s.keys().isdisjoint(_SUBSCHEMA_KEYWORDS):
            kids = []
            for kw in _SCHEMA_MAP_KEYWORDS:
                v = s.get(kw)
                if isinstance(v, dict):
                    kids.extend(v.values())
            for kw in _SCHEMA_KEYWORDS:
                if kw in s:
                    kids.append(s[kw])
            for kw in _SCHEMA_LIST_KEYWORDS:
                v = s.get(kw)
                if isinstance(v, list):
                    kids.extend(v)
            kids.reverse()
            stack.extend(kids)
    return out


def _walk(schema: Any, pointer: str = "") -> Iterator[tuple[Any, str]]:
    """All subschemas (pre-order, including ``schema`` itself)."""
    yield schema, pointer
    for sub, p in _subschemas(schema, pointer):
        yield from _walk(sub, p)


# ---------------------------------------------------------------------------
# Schema loading
# ---------------------------------------------------------------------------


def _load(schema: Any) -> Any:
    """Accept a dict / bool, a JSON string, or a pydantic model class."""
    if isinstance(schema, (dict, bool)):
        return _json_numbers_checked(schema)
    if isinstance(schema, (str, bytes)):
        try:
            return _json_numbers_checked(json.loads(schema))
        except ValueError as exc:
            if isinstance(exc, SchemaError):
                raise
            raise SchemaError(f"schema string is not valid JSON: {exc}") from None
    method = getattr(schema, "model_json_schema", None)
    if callable(method):
        return _json_numbers_checked(method())
    adapter = pydantic_adapter(schema)
    if adapter is not None:
        return _json_numbers_checked(adapter.json_schema())
    raise TypeError("schema must be a dict, a bool, a JSON string, a pydantic model class, a "
                    f"pydantic TypeAdapter or a pydantic dataclass, not {type(schema).__name__}")


def pydantic_adapter(schema: Any):
    """``schema`` as a pydantic ``TypeAdapter`` (``json_schema()``, ``validate_json()``) when it
    is one or a pydantic dataclass; None otherwise (pydantic is not imported for other values)."""
    if callable(getattr(schema, "json_schema", None)) and callable(getattr(schema, "validate_json", None)) \
            and not isinstance(schema, type):
        return schema
    if isinstance(schema, type) and getattr(schema, "__pydantic_validator__", None) is not None \
            and hasattr(schema, "__dataclass_fields__"):
        import pydantic

        return pydantic.TypeAdapter(schema)
    return None


def _json_numbers_checked(root: Any) -> Any:
    """``root``, refused when it holds a float JSON cannot write (NaN, Infinity: Python's
    ``json.loads`` reads them, and a dict may hold them) or contains itself. A ``const: NaN``
    became the regex ``NaN``, whose text no JSON parser reads back, and ``maximum: inf``
    an OverflowError. The check is ``json.dumps`` (C; ~20 µs for a median corpus schema);
    only a refusal walks the schema for the pointer.

    >>> from hf_constrained.json_schema.schemas import _json_numbers_checked
    >>> _json_numbers_checked({"enum": [1, float("inf")]})
    Traceback (most recent call last):
    ...
    hf_constrained.errors.SchemaError: schema at /enum/1: inf is not a JSON number (JSON has no NaN or Infinity); use a finite number, or leave the keyword out
    """
    try:
        json.dumps(root, allow_nan=False)
    except TypeError:
        pass      # not JSON data (a set, an object): the converter names what it cannot read
    except ValueError as exc:
        found = _non_finite(root, "", set())
        if found is None:
            raise SchemaError(f"schema at /: {exc} (a dict or list that contains itself); "
                              "a schema must be a tree, use $ref for a shared part") from None
        pointer, value = found
        raise SchemaError(f"schema at {pointer or '/'}: {value!r} is not a JSON number (JSON has no "
                          "NaN or Infinity); use a finite number, or leave the keyword out") from None
    return root


def _non_finite(node: Any, pointer: str, seen: set):
    """``(pointer, value)`` of the first NaN or infinite float in ``node``, else None."""
    if isinstance(node, float):
        return None if node == node and node not in (float("inf"), float("-inf")) else (pointer, node)
    if isinstance(node, (dict, list)):
        if id(node) in seen:
            return None
        seen.add(id(node))
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for k, v in items:
            got = _non_finite(v, f"{pointer}/{str(k).replace('~', '~0').replace('/', '~1')}", seen)
            if got is not None:
                return got
    return None


# ---------------------------------------------------------------------------
# The converter
# ---------------------------------------------------------------------------


def _literal_prefix(pattern: Any) -> Optional[str]:
    """Text every string matching ``pattern`` (``re.search``) starts with, for a
    pattern ``^literal...`` without ``|``; None otherwise.

    >>> _literal_prefix("^https?://"), _literal_prefix("^git://x"), _literal_prefix("a|^b")
    ('http', 'git://x', None)
    """
    if not isinstance(pattern, str) or not pattern.startswith("^") or "|" in pattern:
        return None
    m = re.match(r"[^.^$*+?{}\[\]\\|()]*", pattern[1:])
    text = m.group(0)
    if pattern[1 + len(text):2 + len(text)] in ("*", "+", "?", "{"):
        text = text[:-1]  # the last character is quantified
    return text or None


_TOO_MANY = object()  # a oneOf branch whose negated siblings distribute too far


class _Part(NamedTuple):
    """One conjunct of the schema being converted.

    ``lineage`` identifies where the part came from: a part flattened out of
    part P (through ``$ref``, ``allOf``, ``anyOf``...) has P's lineage as a
    prefix; this is what ``unevaluated*`` needs.
    """

    schema: Any
    ptr: str
    lineage: tuple


_KINDS = ("null", "boolean", "object", "array", "string", "integer", "fraction")


def _type_kinds(t: str) -> set:
    return {"number": {"integer", "fraction"}}.get(t, {t})


def _json_type_kinds(value: Any) -> set:
    """Kinds of a JSON value ("fraction" = non-integral number)."""
    if value is None:
        return {"null"}
    if isinstance(value, bool):
        return {"boolean"}
    if isinstance(value, int):
        return {"integer"}
    if isinstance(value, float):
        return {"integer"} if value.is_integer() else {"fraction"}
    if isinstance(value, str):
        return {"string"}
    if isinstance(value, list):
        return {"array"}
    return {"object"}
