"""A fast, sound pre-check of a schema against its draft's meta-schema.

``jsonschema`` checks a schema against the 2020-12 meta-schema at about 15 µs per
meta-schema keyword it evaluates (seven vocabularies, each reached through a
``$dynamicRef``): 1-2 ms for a ten-property schema, 100-200 ms for a Kubernetes one.
:func:`surely_valid` proves validity for the common case with plain Python
checks, one per keyword, for Draft 2020-12 (the lenient reading's first and
usual answer) and Draft 04. It never says ``True`` for a schema the meta-schema
rejects: every keyword a meta-schema constrains is either checked exactly as
that meta-schema states it, more strictly (integers must be ``int``, numbers
``int`` or ``float``, ``enum`` uniqueness only for strings or integers), or
makes it answer ``False`` ("not proven"), and the caller then asks
``jsonschema``. Keywords no meta-schema names are unconstrained there. The
rules are written for the bundled meta-schemas of ``jsonschema-specifications``
whose digests are in :data:`_DIGESTS`; with other ones it always answers ``False``.

>>> surely_valid({"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}}},
...              "draft2020-12")
True
>>> surely_valid({"type": "object", "required": []}, "draft4")   # draft 04: minItems 1
False
>>> surely_valid({"pattern": "("}, "draft2020-12")                # not a regex: ask jsonschema
False
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from typing import Any, Callable

_SIMPLE_TYPES = frozenset(["array", "boolean", "integer", "null", "number", "object", "string"])
_ANCHOR = re.compile(r"^[A-Za-z_][-A-Za-z0-9._]*$")
_ID_2020 = re.compile(r"^[^#]*#?$")
_V2020 = "https://json-schema.org/draft/2020-12/"
# A fragment-only reference of RFC 3986 fragment characters without percent-escapes
# ("#/definitions/io.k8s.api.core.v1.PodSpec"): a URI-reference (relative-ref = an empty path
# and "#" fragment, fragment = *( pchar / "/" / "?" )) for any checker of that format, so the
# checker is not asked (most $refs; 0.4 ms of a Kubernetes schema's 0.7 ms check)
_LOCAL_REF = re.compile(r"#[A-Za-z0-9\-._~!$&'()*+,;=:@/?]*\Z").match
# sha256 of the bundled meta-schema documents the rules below were written for
_DIGESTS = {
    "draft2020-12": "969e9dedb9dd9e845b8f050b3f136cd595761ca3512165457afeae22d549ef32",
    "draft4": "537b865a74dd34bfc5aa831f33e6dc0d279d2126b88a56297ed6f71257dfa7bd",
}


def _int(v: Any) -> bool:
    return type(v) is int and v >= 0


def _num(v: Any) -> bool:
    return type(v) is int or type(v) is float


def _str(v: Any) -> bool:
    return type(v) is str


def _bool(v: Any) -> bool:
    return type(v) is bool


def _any(v: Any) -> bool:
    return True


def _string_array(v: Any, nonempty: bool) -> bool:
    return (type(v) is list and (len(v) > 0 or not nonempty) and all(type(x) is str for x in v)
            and len(set(v)) == len(v))


def _type(v: Any) -> bool:
    if type(v) is str:
        return v in _SIMPLE_TYPES
    return (type(v) is list and len(v) > 0 and all(type(x) is str and x in _SIMPLE_TYPES for x in v)
            and len(set(v)) == len(v))


class _Check:
    """The rules of one draft; ``schema(s)`` is True when ``s`` is surely valid."""

    def __init__(self, draft: str, checker):
        self.draft = draft
        self.checker = checker  # the format checker jsonschema's meta-validation uses
        new = draft == "draft2020-12"
        sch, schs, obj = self.schema, self.schema_array, self.schema_object
        rules: dict[str, Callable[[Any], bool]] = {
            "title": _str, "description": _str, "default": _any, "format": _str,
            "maximum": _num, "minimum": _num,
            "maxLength": _int, "minLength": _int, "maxItems": _int, "minItems": _int,
            "maxProperties": _int, "minProperties": _int, "uniqueItems": _bool,
            "pattern": self.regex, "type": _type,
            "required": lambda v: _string_array(v, nonempty=not new),
            "multipleOf": lambda v: _num(v) and v > 0,
            "properties": obj, "definitions": obj, "patternProperties": obj,
            "allOf": schs, "anyOf": schs, "oneOf": schs, "not": sch,
            "dependencies": self.dependencies,
        }
        if new:
            rules.update({
                "$id": lambda v: _str(v) and self.format(v, "uri-reference") and bool(_ID_2020.search(v)),
                "$schema": lambda v: _str(v) and self.format(v, "uri"),
                "$ref": lambda v: _str(v) and (_LOCAL_REF(v) is not None or self.format(v, "uri-reference")),
                "$dynamicRef": lambda v: _str(v) and self.format(v, "uri-reference"),
                "$anchor": lambda v: _str(v) and bool(_ANCHOR.search(v)),
                "$dynamicAnchor": lambda v: _str(v) and bool(_ANCHOR.search(v)),
                "$comment": _str, "$defs": obj,
                "prefixItems": schs, "items": sch, "contains": sch, "additionalProperties": sch,
                "propertyNames": sch, "if": sch, "then": sch, "else": sch, "dependentSchemas": obj,
                "patternProperties": lambda v: obj(v) and all(self.regex(k) for k in v),
                "contentEncoding": _str, "contentMediaType": _str, "contentSchema": sch,
                "deprecated": _bool, "readOnly": _bool, "writeOnly": _bool,
                "examples": lambda v: type(v) is list,
                "unevaluatedItems": sch, "unevaluatedProperties": sch,
                "const": _any, "enum": lambda v: type(v) is list,
                "exclusiveMaximum": _num, "exclusiveMinimum": _num,
                "maxContains": _int, "minContains": _int,
                "dependentRequired": lambda v: type(v) is dict and all(
                    _string_array(x, nonempty=False) for x in v.values()),
            })
        else:  # draft 04
            rules.update({
                "id": _str, "$schema": _str,
                "exclusiveMaximum": _bool, "exclusiveMinimum": _bool,
                "additionalItems": lambda v: _bool(v) or sch(v),
                "additionalProperties": lambda v: _bool(v) or sch(v),
                "items": lambda v: sch(v) or schs(v),
                "enum": self.enum4,
            })
        self.rules = rules
        self.known = frozenset(_known_keywords(draft))

    def format(self, value: str, name: str) -> bool:
        return self.checker is None or self.checker.conforms(value, name)

    def regex(self, v: Any) -> bool:
        return _str(v) and self.format(v, "regex")

    def schema(self, s: Any) -> bool:
        if type(s) is bool:
            return self.draft == "draft2020-12"
        if type(s) is not dict:
            return False
        rules, known = self.rules, self.known
        for k, v in s.items():
            rule = rules.get(k)
            if rule is not None:
                if not rule(v):
                    return False
            elif k in known:
                return False  # a keyword these rules do not cover: not proven
        if self.draft == "draft4":  # the meta-schema's dependencies
            if ("exclusiveMaximum" in s and "maximum" not in s) or (
                    "exclusiveMinimum" in s and "minimum" not in s):
                return False
        return True

    def schema_array(self, v: Any) -> bool:
        return type(v) is list and len(v) > 0 and all(self.schema(x) for x in v)

    def schema_object(self, v: Any) -> bool:
        return type(v) is dict and all(self.schema(x) for x in v.values())

    def dependencies(self, v: Any) -> bool:
        if type(v) is not dict:
            return False
        for dep in v.values():
            if type(dep) is list:
                if not _string_array(dep, nonempty=self.draft == "draft4"):
                    return False
            elif not self.schema(dep):
                return False
        return True

    @staticmethod
    def enum4(v: Any) -> bool:
        if type(v) is not list or not v:
            return False
        if all(type(x) is str for x in v) or all(type(x) is int for x in v):
            return len(set(v)) == len(v)
        return False


def _documents(draft: str) -> list:
    """The meta-schema documents of ``draft`` as jsonschema resolves them."""
    from jsonschema import validators

    if draft == "draft4":
        return [validators.Draft4Validator.META_SCHEMA]
    from jsonschema_specifications import REGISTRY

    root = validators.Draft202012Validator.META_SCHEMA
    return [root] + [REGISTRY.contents(_V2020 + part["$ref"]) for part in root["allOf"]]


def _known_keywords(draft: str) -> set:
    out: set = set()
    for doc in _documents(draft):
        out |= set(doc.get("properties", {}))
    return out


def _digest(draft: str) -> str:
    text = json.dumps(_documents(draft), sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


@functools.lru_cache(maxsize=None)
def _checker(draft: str) -> _Check | None:
    from .drafts import _meta_validator

    if draft not in _DIGESTS:
        return None
    try:
        if _digest(draft) != _DIGESTS[draft]:
            return None  # other meta-schemas than the rules were written for
    except Exception:  # noqa: BLE001 (a jsonschema without these resources)
        return None
    return _Check(draft, _meta_validator(draft, True).format_checker)


def surely_valid(schema: Any, draft: str) -> bool:
    """True only if ``schema`` is valid under ``draft``'s meta-schema, checked with that
    draft's format checker (as ``check_schema`` does); False: not proven, ask jsonschema."""
    check = _checker(draft)
    if check is None:
        return False
    try:
        return check.schema(schema)
    except RecursionError:
        return False
