"""``$ref`` targets that sit under keywords the canonical rewrite drops.

Real schemas often keep shared definitions under a keyword of their own
(``"#/resourceDefinitions/storageAccounts"``, ``"#/team"``) instead of
``definitions``.  Such keywords are annotations, so :func:`.drafts.canonical`
drops them; but a ``$ref`` pointing there still resolves for every validator
(``jsonschema`` reads the target as a schema of the document's draft).
:func:`keep_ref_targets` puts each such target back, canonicalised, under the
root's ``$defs`` and points the ``$ref`` at it, so the converter resolves what
the validator resolves.  A pointer that resolves in neither document is left
alone (the converter then refuses it, as a validator would fail on it).

>>> from hf_constrained.json_schema.drafts import canonical
>>> raw = {"type": "object", "properties": {"t": {"$ref": "#/team"}},
...        "team": {"type": "integer", "javaType": "Team"}}
>>> canonical(raw)
{'type': 'object', 'properties': {'t': {'$ref': '#/$defs/ref~1team'}}, '$defs': {'ref/team': {'type': 'integer'}}}
"""

from __future__ import annotations

from typing import Any, Callable, Optional
from urllib.parse import quote, unquote

from .schemas import _nested  # the converter's subschema walk

__all__ = ["keep_ref_targets"]

_MISSING = object()


def _lookup(doc: Any, pointer: str) -> Any:
    """The value at JSON pointer ``pointer`` (``"/a/0"``) of ``doc``, or ``_MISSING``."""
    target = doc
    for tok in pointer.split("/")[1:]:
        tok = tok.replace("~1", "/").replace("~0", "~")
        if isinstance(target, dict) and tok in target:
            target = target[tok]
        elif isinstance(target, list) and tok.isdigit() and int(tok) < len(target):
            target = target[int(tok)]
        else:
            return _MISSING
    return target


def _escape(token: str) -> str:
    return quote(token.replace("~", "~0").replace("/", "~1"), safe="~!$&'()*+,;=:@")


def keep_ref_targets(raw: Any, canon: Any, rewrite: Callable[[Any, str], Any],
                     refs: Optional[list] = None) -> Any:
    """Re-attach to ``canon`` the ``$ref`` targets that only ``raw`` has.

    ``rewrite(schema, pointer)`` canonicalises one raw subschema.  Only local
    JSON-pointer references (``#/...``) of a document that is one resource
    (no nested ``$id``) are handled; ``canon`` is updated in place and
    returned.  ``refs``, when given, holds (at least) every ``$ref`` value the walk of
    ``canon`` can find: when each local one resolves in ``canon`` (most schemas), there is
    nothing to re-attach and the walk is not made.
    """
    if not isinstance(raw, dict) or not isinstance(canon, dict):
        return canon
    if refs is not None and all(_lookup(canon, unquote(ref[1:])) is not _MISSING
                                for ref in set(r for r in refs if r.__class__ is str and r.startswith("#/"))):
        return canon  # the walk below would find each $ref present and change nothing
    todo = _nested(canon)  # one walk: the check below, then the $refs to visit
    if any(isinstance(s, dict) and "$id" in s for s in todo[1:]):
        return canon
    defs = canon.get("$defs") if isinstance(canon.get("$defs"), dict) else None
    names: dict = {}  # raw pointer -> $defs name
    present: set = set()  # $ref texts found in canon (it only grows: found stays found)
    while todo:
        s = todo.pop()
        ref = s.get("$ref") if isinstance(s, dict) else None
        if not isinstance(ref, str) or not ref.startswith("#/") or ref in present:
            continue
        pointer = unquote(ref[1:])
        if _lookup(canon, pointer) is not _MISSING:
            present.add(ref)
            continue
        name: Optional[str] = names.get(pointer)
        if name is None:
            target = _lookup(raw, pointer)
            if target is _MISSING or not isinstance(target, (dict, bool)):
                continue
            if defs is None:
                defs = canon.setdefault("$defs", {})
            name = "ref" + pointer
            while name in defs:
                name += "_"
            names[pointer] = name
            defs[name] = rewrite(target, pointer)
            todo.extend(_nested(defs[name]))
        s["$ref"] = "#/$defs/" + _escape(name)
    return canon
