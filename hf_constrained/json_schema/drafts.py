"""Read a schema of any draft (04 to 2020-12) into one canonical 2020-12 form.

The converter only knows draft 2020-12.  :func:`canonical` rewrites a schema of
another draft into the 2020-12 schema with the same meaning, and drops what is
an annotation for the schema's draft:

* ``$schema`` selects the draft (04, 06, 07, 2019-09, 2020-12).  Without it,
  or with an unknown one, the schema is read *leniently*: every keyword that
  any draft asserts is honoured, each in the form it is written in (``items``
  as an array is a tuple, a boolean ``exclusiveMinimum`` is the draft-04
  modifier, ``dependencies`` is honoured), and ``$ref`` siblings apply.
* Draft-04 ``id`` is the base URI (``$id``); a fragment-only ``id``/``$id``
  (``"#foo"``, drafts 04-07) is an anchor (``$anchor``).
* Draft-04 boolean ``exclusiveMinimum``/``exclusiveMaximum`` become the
  numeric 2020-12 keywords.
* ``items`` as an array becomes ``prefixItems``, and ``additionalItems``
  becomes ``items``; ``additionalItems`` next to a schema ``items`` (or in
  2020-12) asserts nothing and is dropped.
* ``dependencies`` (drafts 04-07 and lenient) becomes ``dependentRequired``
  (array values) and ``dependentSchemas`` (schema values).
* Drafts 04-07: the siblings of ``$ref`` are ignored, as those drafts say.
* Keywords that the draft does not define are annotations and are dropped
  (``strict=True`` refuses them instead).  One that is a near miss of a real
  assertion keyword (``minlength``, ``additonalProperties``) gets one
  ``warnings.warn`` naming it and its JSON pointer.
* A ``format`` that no format checker of the draft asserts is an annotation
  and is dropped (``strict=True`` refuses it).

Containers reached only by ``$ref`` (``definitions``, ``$defs``) keep their
place, so JSON-pointer references resolve as before.

>>> canonical({"$schema": "http://json-schema.org/draft-04/schema#",
...            "type": "number", "minimum": 0, "exclusiveMinimum": True, "javaType": "x"})
{'type': 'number', 'exclusiveMinimum': 0}
>>> canonical({"items": [{"type": "string"}], "additionalItems": False})
{'prefixItems': [{'type': 'string'}], 'items': False}
"""

from __future__ import annotations

import functools
import os
import re
import sys
import warnings
from typing import Any, Optional

from ..errors import SchemaError
from .metaschema import surely_valid
from .refs import keep_ref_targets
from .schemas import _ptr as _pointer
from .tokens import PYDANTIC_FORMATS

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _caller_stacklevel() -> int:
    """The ``stacklevel`` for a ``warnings.warn`` made by the caller of this function that
    names the first frame outside the package: the user's ``schema_to_regex(...)`` or
    ``JSONProcessor(...)`` line, however many of the package's frames lie between."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    return level


__all__ = ["DRAFTS", "canonical", "detect_draft", "draft_validator"]

#: Draft name -> (``$schema`` URI without trailing ``#``, jsonschema class name).
DRAFTS = {
    "draft4": ("http://json-schema.org/draft-04/schema", "Draft4Validator"),
    "draft6": ("http://json-schema.org/draft-06/schema", "Draft6Validator"),
    "draft7": ("http://json-schema.org/draft-07/schema", "Draft7Validator"),
    "draft2019-09": ("https://json-schema.org/draft/2019-09/schema", "Draft201909Validator"),
    "draft2020-12": ("https://json-schema.org/draft/2020-12/schema", "Draft202012Validator"),
}
_BY_URI = {uri.split("://", 1)[1]: name for name, (uri, _) in DRAFTS.items()}
_ORDER = ("draft2020-12", "draft2019-09", "draft7", "draft6", "draft4")
LENIENT = "lenient"


# Known annotation / structural keywords per draft (never refused by strict).
_ANNOTATIONS = {
    "title", "description", "default", "examples", "$schema", "$comment",
    "deprecated", "readOnly", "writeOnly", "definitions", "$defs", "$id",
    "$anchor", "$dynamicAnchor", "$recursiveAnchor", "$vocabulary",
    "contentEncoding", "contentMediaType", "contentSchema", "id",
    "discriminator",  # OpenAPI; pydantic emits it next to oneOf
}

#: Formats a jsonschema FormatChecker asserts per draft once its optional
#: format packages are installed (jsonschema's _format.py).
_COMMON_FORMATS = {"email", "idn-email", "ipv4", "ipv6", "hostname", "uri",
                   "date-time", "regex"}
FORMATS_BY_DRAFT = {
    "draft4": _COMMON_FORMATS,
    "draft6": _COMMON_FORMATS | {"uri-reference", "json-pointer", "uri-template"},
}
FORMATS_BY_DRAFT["draft7"] = FORMATS_BY_DRAFT["draft6"] | {
    "idn-hostname", "iri", "iri-reference", "time", "date", "relative-json-pointer"}
FORMATS_BY_DRAFT["draft2019-09"] = FORMATS_BY_DRAFT["draft7"] | {"duration", "uuid"}
FORMATS_BY_DRAFT["draft2020-12"] = FORMATS_BY_DRAFT["draft2019-09"]
FORMATS_BY_DRAFT[LENIENT] = FORMATS_BY_DRAFT["draft2020-12"]


def _validator_class(name: str):
    import jsonschema.validators as v

    return getattr(v, DRAFTS[name][1])


@functools.lru_cache(maxsize=None)
def _keywords(draft: str) -> frozenset:
    """Keywords that assert (or apply subschemas) in ``draft`` (a fixed set per draft: made once)."""
    if draft == LENIENT:
        out = set()
        for name in DRAFTS:
            out |= _keywords(name)
        return frozenset(out)
    out = set(_validator_class(draft).VALIDATORS)
    if draft == "draft4":  # modifiers that draft 04's minimum/maximum read
        out |= {"exclusiveMinimum", "exclusiveMaximum"}
    if "if" in out:
        out |= {"then", "else"}
    if "dependentRequired" in out:  # 2019-09 and later
        out |= {"minContains", "maxContains"}
    return frozenset(out)


def detect_draft(schema: Any) -> tuple[str, bool]:
    """``(draft name, explicit)``: the draft ``$schema`` names, or the lenient reading.

    >>> detect_draft({"$schema": "http://json-schema.org/draft-07/schema#"})
    ('draft7', True)
    >>> detect_draft({"type": "string"})
    ('lenient', False)
    """
    uri = schema.get("$schema") if isinstance(schema, dict) else None
    if isinstance(uri, str):
        key = uri.split("://", 1)[-1].rstrip("#")
        if key in _BY_URI:
            return _BY_URI[key], True
    return LENIENT, False


def draft_validator(schema: Any):
    """The jsonschema validator class for ``schema``'s draft.

    Lenient reading: the newest draft whose meta-schema accepts the schema
    (2020-12 when none does).
    """
    draft, _ = detect_draft(schema)
    if draft != LENIENT:
        return _validator_class(draft)
    return _lenient_draft(schema)[0]


def _lenient_draft(schema: Any, check_formats: bool = False) -> tuple:
    """``(class, valid)``: the newest draft whose meta-schema accepts ``schema``
    (2020-12 when none does); with ``check_formats``, ``valid`` says whether it also
    does with that draft's format checker (a meta-schema pass over a large schema
    costs ~100 ms, so the check that picks the draft is also the one that validates)."""
    for name in _ORDER:
        if check_formats and _meta_validator(name, True).is_valid(schema):
            return _validator_class(name), True  # valid with formats, so also without: no newer draft was
        if _meta_validator(name, False).is_valid(schema):
            return _validator_class(name), False
    return _validator_class("draft2020-12"), False


@functools.lru_cache(maxsize=None)
def _meta_validator(name: str, formats: bool):
    """A validator of ``name``'s meta-schema (with its format checker or none), built once:
    building one costs up to ~0.4 ms, more than checking a small schema with it. Validators
    are immutable, so one serves every thread."""
    cls = _validator_class(name)
    if formats:  # what ``cls.check_schema`` builds
        meta_cls = _jsonschema().validators.validator_for(cls.META_SCHEMA, default=cls)
        return meta_cls(cls.META_SCHEMA, format_checker=meta_cls.FORMAT_CHECKER)
    return cls(cls.META_SCHEMA)


def _jsonschema():
    import jsonschema
    import jsonschema.validators

    return jsonschema


def check_metaschema(schema: Any, draft: Optional[str] = None, at: str = "") -> None:
    """Raise :class:`SchemaError` if ``schema`` is invalid for its draft
    (lenient: for every draft). ``draft`` and ``at``: a subschema at pointer ``at``
    of a document of that draft (a ``$ref`` target the meta-schema does not reach)."""
    from jsonschema.exceptions import SchemaError as JsError

    if draft is None:
        draft, _ = detect_draft(schema)
    # the lenient reading's first question is 2020-12 with formats, and its usual answer
    if surely_valid(schema, "draft2020-12" if draft == LENIENT else draft):
        return
    if draft == LENIENT:
        cls, valid = _lenient_draft(schema, check_formats=True)
        if valid:
            return
        draft = next(name for name in _ORDER if _validator_class(name) is cls)
    else:
        cls = _validator_class(draft)
    # what cls.check_schema(schema) does, with the meta-schema's validator built once
    for error in _meta_validator(draft, True).iter_errors(schema):
        exc = JsError.create_from(error)
        path = at + "".join("/" + str(t).replace("~", "~0").replace("/", "~1") for t in exc.path)
        where = f", read for the $ref target {at}, where the document's check does not reach" if at else ""
        raise SchemaError(f"invalid schema at {path or '/'} ({cls.__name__[:-9]} "
                          f"meta-schema{where}): {exc.message}") from None


def _edit_distance(a: str, b: str, cap: int = 3) -> int:
    """Damerau-Levenshtein distance (optimal string alignment), capped."""
    if abs(len(a) - len(b)) >= cap:
        return cap
    prev2, prev = None, list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if (prev2 is not None and i > 1 and j > 1 and a[i - 1] == b[j - 2]
                    and a[i - 2] == b[j - 1]):
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if i > 1 and min(cur) >= cap and min(prev) >= cap:
            return cap  # every later cell comes from these two rows: none gets below cap
        prev2, prev = prev, cur
    return min(prev[-1], cap)


def near_miss(word: str, keywords) -> Optional[str]:
    """The assertion keyword ``word`` is probably a misspelling of, or None.

    Same letters in another case, or one edit away from a keyword of at
    least 4 letters (two edits from one of at least 10).

    >>> near_miss("minlength", {"minLength"}), near_miss("additonalProperties", {"additionalProperties"})
    ('minLength', 'additionalProperties')
    >>> near_miss("name", {"enum", "type"}) is None
    True
    """
    low = word.lower().lstrip("_$")
    for kw in sorted(keywords):
        if kw.startswith("$") and not word.startswith("$") and low == kw[1:].lower():
            return kw
        if low == kw.lower():
            return kw
        if len(kw) >= 4:
            d = _edit_distance(word, kw)
            if d <= 1 or (d <= 2 and len(kw) >= 10):
                return kw
    return None


def _ptr(base: Any, *tokens: Any) -> str:
    """``base`` (a pointer, or a :class:`_Canon` pointer: ``(parent, token, ...)``) with
    ``tokens`` appended, escaped (:func:`schemas._ptr`)."""
    if base.__class__ is tuple:
        base = _ptr(*base)
    return _pointer(base, *tokens)


_ANCHOR = re.compile(r"[A-Za-z_][-A-Za-z0-9._]*\Z")
#: The keywords :meth:`_Canon._rewrite` reads: a schema with none of them is left as it is.
_REWRITTEN = frozenset({"exclusiveMinimum", "exclusiveMaximum", "items", "additionalItems", "dependencies",
                        "format", "properties", "patternProperties", "dependentSchemas",
                        "additionalProperties", "contains", "propertyNames", "not", "if", "then", "else",
                        "unevaluatedItems", "unevaluatedProperties", "allOf", "anyOf", "oneOf",
                        "prefixItems"})
#: The keywords :meth:`_Converter._index_resources` looks for (``_Canon.indexed`` says if any is left).
_INDEXED = frozenset({"$id", "$anchor", "$dynamicAnchor", "unevaluatedProperties", "unevaluatedItems"})


class _Canon:
    def __init__(self, draft: str, explicit: bool, strict: bool):
        self.draft = draft
        self.keywords = _keywords(draft)
        self.formats = FORMATS_BY_DRAFT[draft]
        self.ref_overrides = explicit and draft in ("draft4", "draft6", "draft7")
        self.strict = strict
        self.misses: dict = {}
        self.guesses: dict = {}  # unknown keyword -> near_miss(): one edit-distance scan per word
        # Whether some rewritten subschema holds an _INDEXED keyword.  Every subschema of the
        # output that the converter walks is one that schema() returned (the subschema
        # keywords the converter walks, except $defs/definitions and the dropped
        # contentSchema, are all in _REWRITTEN), so False means the converter's resource
        # index is the trivial one: one resource, no anchors, no unevaluated*.
        self.indexed = False
        # The $ref values of the rewritten subschemas, in the order made. They are all that
        # keep_ref_targets' walk of the output can find (it walks the subschema keywords, which
        # all go through schema(), except contentSchema: None once one is kept, so that the
        # walk runs)
        self.refs: list | None = []

    def schema(self, s: Any, ptr: Any) -> Any:
        """The rewrite of ``s`` found at ``ptr``: a JSON pointer, or ``(parent, token, ...)``
        (what :func:`_ptr` makes a pointer of: written out only for a message)."""
        if not isinstance(s, dict):
            return s
        out: dict = {}
        kws = self.keywords
        for k, v in s.items():
            if k in kws:
                out[k] = v
            elif k in ("definitions", "$defs") and isinstance(v, dict):
                out[k] = {n: self.schema(sub, (ptr, k, n)) for n, sub in v.items()}
            elif k in _ANNOTATIONS or k.startswith("x-"):
                continue
            elif self.strict:
                raise SchemaError(
                    f"unknown keyword {k!r} at {_ptr(ptr, k)} (strict=True refuses "
                    f"keywords that {self.draft} does not define): remove it or pass strict=False")
            else:
                if k not in self.guesses:
                    self.guesses[k] = near_miss(k, kws)
                guess = self.guesses[k]
                if guess is not None:
                    self.misses.setdefault((k, guess), []).append(_ptr(ptr, k))
        idkw = "id" if self.draft == "draft4" else "$id"
        ident = s.get(idkw)
        if isinstance(ident, str) and ident:
            if ident.startswith("#"):
                if _ANCHOR.match(ident[1:]) and self.draft in ("draft4", "draft6", "draft7"):
                    out["$anchor"] = ident[1:]
            else:
                out["$id"] = ident
        for k in ("$anchor", "$dynamicAnchor"):
            if k in s and self.draft in ("draft2019-09", "draft2020-12", LENIENT):
                out[k] = s[k]
        if self.ref_overrides and "$ref" in out:
            out = {k: v for k, v in out.items() if k in ("$ref", "definitions", "$defs")}
        if self.draft == LENIENT and out.get("minContains") == 0:
            out["minContains"] = 1  # drafts 06/07 require `contains` regardless
        if not self.indexed and not out.keys().isdisjoint(_INDEXED):
            self.indexed = True
        if self.refs is not None:
            if "$ref" in out:
                self.refs.append(out["$ref"])
            if "contentSchema" in out:
                self.refs = None
        return self._rewrite(out, ptr)

    def _rewrite(self, out: dict, ptr: Any) -> dict:
        if out.keys().isdisjoint(_REWRITTEN):  # a leaf ({"type": "string"}...): nothing below applies
            return out
        sub = self.schema
        for kw, base in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            if isinstance(out.get(kw), bool):
                flag = out.pop(kw)
                if flag and base in out:
                    out[kw] = out.pop(base)
        if isinstance(out.get("items"), list):
            if "prefixItems" in out:
                raise SchemaError(f"keyword 'items' at {_ptr(ptr, 'items')}: an array "
                                  "'items' next to 'prefixItems' mixes two drafts; keep one")
            out["prefixItems"] = out.pop("items")
            if "additionalItems" in out:
                out["items"] = out.pop("additionalItems")
        else:
            out.pop("additionalItems", None)
        deps = out.pop("dependencies", None)
        if isinstance(deps, dict):
            for name, dep in deps.items():
                if isinstance(dep, list):
                    req = out.setdefault("dependentRequired", {})
                    req[name] = list(dict.fromkeys(list(req.get(name, [])) + dep))
                else:
                    schemas = out.setdefault("dependentSchemas", {})
                    schemas[name] = dep if name not in schemas else {"allOf": [schemas[name], dep]}
        fmt = out.get("format")
        if isinstance(fmt, str) and fmt not in self.formats and (self.strict or fmt not in PYDANTIC_FORMATS):
            if self.strict:
                raise SchemaError(
                    f"unknown format {fmt!r} at {_ptr(ptr, 'format')} (strict=True refuses "
                    f"formats that no {self.draft} format checker asserts): remove it or "
                    "pass strict=False")
            del out["format"]
        # Recurse into subschema positions.
        for kw in ("properties", "patternProperties", "dependentSchemas"):
            if isinstance(out.get(kw), dict):
                out[kw] = {n: sub(v, (ptr, kw, n)) for n, v in out[kw].items()}
        for kw in ("additionalProperties", "items", "contains", "propertyNames", "not",
                   "if", "then", "else", "unevaluatedItems", "unevaluatedProperties"):
            if kw in out:
                out[kw] = sub(out[kw], (ptr, kw))
        for kw in ("allOf", "anyOf", "oneOf", "prefixItems"):
            if isinstance(out.get(kw), list):
                out[kw] = [sub(v, (ptr, kw, i)) for i, v in enumerate(out[kw])]
        return out

    def warn(self) -> None:
        for (k, guess), ptrs in self.misses.items():
            more = f" (and {len(ptrs) - 1} more places)" if len(ptrs) > 1 else ""
            warnings.warn(
                f"schema keyword {k!r} at {ptrs[0]}{more} is not a {self.draft} keyword and is "
                f"ignored, as validators ignore it; did you mean {guess!r}?",
                UserWarning, stacklevel=_caller_stacklevel())


def canonical(schema: Any, *, strict: bool = False) -> Any:
    """The 2020-12 schema with the meaning of ``schema`` under its own draft
    (see the module docstring).  Warns once per near-miss keyword."""
    return _canonical(schema, strict)[0]


def _canonical(schema: Any, strict: bool) -> tuple[Any, bool]:
    """``(canonical(schema), indexed)``: ``indexed`` is False when no subschema of the result
    has ``$id``, ``$anchor``, ``$dynamicAnchor`` or ``unevaluated*`` (the converter then skips
    its resource index walk).

    >>> _canonical({"properties": {"a": {"$id": "a.json"}}}, False)[1], _canonical({"type": "string"}, False)[1]
    (True, False)
    """
    draft, explicit = detect_draft(schema)
    c = _Canon(draft, explicit, strict)
    out = c.schema(schema, "")

    def target(sub: Any, pointer: str) -> Any:
        # a $ref into a keyword of the document's own (dropped, annotation) is read as a schema
        # by validators, but the document's meta-schema never looked there: check it now
        check_metaschema(sub, draft, pointer)
        return c.schema(sub, pointer)

    out = keep_ref_targets(schema, out, target, c.refs)  # $refs into dropped keywords (rewritten by c too)
    c.warn()
    return out, c.indexed
