"""Schema-level negation: a schema whose instances all FAIL a given schema.

:func:`negate` returns a schema ``N`` with ``valid(N) ⊆ invalid(S)``: an
*under*-approximation of the complement, so a conjunction ``A ∧ N`` never
admits an instance of ``S``.  That is what makes ``not``, overlapping
``oneOf`` branches (branch *i* conjoined with the negation of every other
branch it may overlap) and the ``else`` side of ``if`` sound.  ``N`` uses only
keywords the converter handles exactly.

The rules follow ``¬(A ∧ B) = ¬A ∨ ¬B``: each keyword of ``S`` that has an
exact (or under-approximated) negation contributes one ``anyOf`` alternative,
and a keyword without one contributes nothing, which only shrinks ``N``:

* ``type``: the other types (``number`` is dropped when ``S`` allows
  integers, as integral numbers would pass ``S``);
* ``required``: an object without one of the names;
* ``properties``: an object whose property fails its schema (recursively);
* ``minimum``/``maximum``/``exclusive*``, ``minLength``/``maxLength``,
  ``minItems``/``maxItems``: a value of that type on the other side;
* ``const``/``enum``: the types none of the values has, strings longer than
  the longest string value, numbers beyond the extreme values, the other boolean;
* ``allOf``: any negated member; ``anyOf``: every member negated;
  ``not X``: ``X``; ``$ref``: the negated target (to a bounded depth).

>>> negate({"type": "object", "required": ["a"]})
{'anyOf': [{'type': ['array', 'boolean', 'null', 'number', 'string']}, {'type': 'object', 'properties': {'a': False}}]}
>>> negate({"type": "integer", "minimum": 3})
{'anyOf': [{'type': ['array', 'boolean', 'null', 'object', 'string']}, {'type': 'number', 'exclusiveMaximum': 3}]}
>>> negate(True), negate(False), negate({"not": {"type": "string"}})
(False, True, {'type': 'string'})
"""

from __future__ import annotations

from typing import Any, Callable, Optional

__all__ = ["negate"]

_TYPES = ("array", "boolean", "null", "number", "object", "string")
_MAX_DEPTH = 8


def _value_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    return "array" if isinstance(v, list) else "object"


def _other_types(types) -> Optional[dict]:
    used = set(types)
    if "integer" in used:
        used.add("number")
    rest = [t for t in _TYPES if t not in used]
    if not rest:
        return None
    return {"type": rest[0] if len(rest) == 1 else rest}


_OPPOSITE = {  # keyword -> (type, opposite keyword, offset)
    "minimum": ("number", "exclusiveMaximum", 0),
    "maximum": ("number", "exclusiveMinimum", 0),
    "exclusiveMinimum": ("number", "maximum", 0),
    "exclusiveMaximum": ("number", "minimum", 0),
    "minLength": ("string", "maxLength", -1),
    "maxLength": ("string", "minLength", 1),
    "minItems": ("array", "maxItems", -1),
    "maxItems": ("array", "minItems", 1),
}


def _outside_values(values: list) -> list:
    """Schemas of values of the listed values' own types that are none of them:
    strings longer than the longest, numbers beyond the extremes, the other boolean.

    >>> _outside_values(["ab", "", 3, 1.5, True])
    [{'type': 'string', 'minLength': 3}, {'type': 'number', 'exclusiveMinimum': 3}, {'type': 'number', 'exclusiveMaximum': 1.5}, {'const': False}]
    """
    out: list = []
    strings = [v for v in values if isinstance(v, str)]
    if strings:
        out.append({"type": "string", "minLength": max(len(v) for v in strings) + 1})
    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if numbers and all(abs(v) <= 10**9 for v in numbers):  # larger exclusive bounds are refused
        out.append({"type": "number", "exclusiveMinimum": max(numbers)})
        out.append({"type": "number", "exclusiveMaximum": min(numbers)})
    bools = {v for v in values if isinstance(v, bool)}
    if len(bools) == 1:
        out.append({"const": not bools.pop()})
    return out


def negate(schema: Any, resolve: Optional[Callable[[str], Any]] = None, depth: int = 0) -> Any:
    """A schema admitting only instances that ``schema`` rejects (see the
    module docstring); ``False`` when no such instance is known.

    ``resolve(ref)`` returns the target of a ``$ref`` (None: not followed).
    """
    if schema is True:
        return False
    if schema is False:
        return True
    if not isinstance(schema, dict) or depth > _MAX_DEPTH:
        return False
    alts: list = []

    def add(alt: Any) -> None:
        if alt is True:
            alts.append({})
        elif alt is not False and alt is not None:
            alts.append(alt)

    if "type" in schema:
        t = schema["type"]
        add(_other_types(t if isinstance(t, list) else [t]))
    values = [schema["const"]] if "const" in schema else schema.get("enum")
    if isinstance(values, list):
        add(_other_types({_value_type(v) for v in values}))
        for alt in _outside_values(values):
            add(alt)
    req = schema.get("required")
    if isinstance(req, list):
        for name in dict.fromkeys(req):
            add({"type": "object", "properties": {name: False}})
    props = schema.get("properties")
    if isinstance(props, dict):
        for name, sub in props.items():
            n = negate(sub, resolve, depth + 1)
            if n is not False:
                add({"type": "object", "required": [name], "properties": {name: n}})
    for kw, (typ, opposite, offset) in _OPPOSITE.items():
        v = schema.get(kw)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            bound = v + offset
            if not (offset < 0 and bound < 0):
                add({"type": typ, opposite: bound})
    for sub in schema.get("allOf", []) if isinstance(schema.get("allOf"), list) else []:
        add(negate(sub, resolve, depth + 1))
    if isinstance(schema.get("anyOf"), list):
        negs = [negate(sub, resolve, depth + 1) for sub in schema["anyOf"]]
        if all(n is not False for n in negs):
            add({"allOf": negs})
    if "not" in schema:
        add(schema["not"])
    if isinstance(schema.get("$ref"), str) and resolve is not None:
        target = resolve(schema["$ref"])
        if target is not None:
            add(negate(target, resolve, depth + 1))
    if not alts:
        return False
    return alts[0] if len(alts) == 1 else {"anyOf": alts}
