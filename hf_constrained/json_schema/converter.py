"""The JSON Schema -> regex converter: entry point, shared definitions, ``$ref``
resolution and flattening of a conjunction into parts."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Optional
from urllib.parse import unquote, urldefrag

from ..errors import SchemaError
from . import limits
from .containers import _ContainersMixin
from .logic import _LogicMixin
from .memo import _MISS, _Memo
from .schemas import (_ANNOTATIONS, _SUBSCHEMA_KEYWORDS, _join_uri, _Part, _ptr, _refuse, _subschemas,
                      _unsupported)
from .typed import _TypedMixin
from .values import _ValuesMixin


_SCALARS = frozenset({str, int, float, bool, type(None)})
# no tab, CR or LF (urllib removes them from a URL): a local "#..." $ref is its own fragment
_URL_SAFE = re.compile(r"[^\t\r\n]*\Z").match
_new_part = tuple.__new__  # _new_part(_Part, (schema, ptr, lineage)) is _Part(schema, ptr, lineage)
# The keywords _flatten expands or drops: a part with none of them is appended unchanged (the
# same dict: no conversion writes into a part's schema; those that change one copy it first)
_FLATTENED = frozenset({"$ref", "allOf", "if", "then", "else", "not"})


class _TextLimit(SchemaError):
    """The regex text outgrew :data:`MAX_REGEX_TEXT` (``schema_to_regex`` retries with shared definitions)."""


class _Converter(_LogicMixin, _ValuesMixin, _TypedMixin, _ContainersMixin):
    """Converts one (canonical, 2020-12) schema: ``run()`` gives the regex text.

    The mixins hold the logic (:mod:`.logic`), values (:mod:`.values`), types
    and scalars (:mod:`.typed`) and containers (:mod:`.containers`)."""

    MEMO = True  # reuse conversions (:class:`_Memo`); recursive.py's rule converter does not

    def __init__(self, root: Any, whitespace: str, max_depth: int, indexed: bool = True):
        self.root = root
        self.ws = whitespace
        self.max_depth = max_depth
        self.ref_counts: Counter = Counter()
        self.cuts: list[str] = []
        self.empty_reasons: list[str] = []  # why a subschema came out empty (oneOf)
        self.recursion = None  # recursive.py's hook (max_recursion_depth=None): see _flatten
        self._ids = 0
        self.reads: list = []  # the ref_counts entries read, in order (see _Memo)
        self._targets: dict = {}  # (ref, base URI) -> resolve()'s (target, pointer)
        self._checked: dict = {}  # is_valid() of scalar values: (id, class, value) -> (schema, answer)
        self._validator = None
        self._any_cache: dict = {}
        self.integral_floats = True
        self.conversions = 0
        self.share = False             # write large subschemas once, as (?(DEFINE)...) definitions
        self.definitions: dict = {}    # definition text -> name, in definition order
        self.definition_text = 0
        # unevaluated* depend on which subschemas *evaluated* a member: the
        # negation-based rewrites of oneOf/not/if would change that
        self.has_unevaluated = False  # any subschema with unevaluated*: set by _index_resources
        self.plain = not indexed  # no $id/anchor/unevaluated* anywhere (drafts._canonical): one base URI, ""
        if self.plain:  # what _index_resources finds for such a schema, without its walk
            self.resources, self.anchors, self.base_of = {"": (root, "")}, {}, {"": ""}
            self.base_uri, self.one_resource = "", True
        else:
            self._index_resources()
        # conversions already made (see _Memo); lineage matters to unevaluated*: none then
        self.memo = _Memo() if self.MEMO and not self.has_unevaluated else None

    # -- entry point ------------------------------------------------------

    def run(self) -> str:
        self.ref_counts[""] = 1
        result = self.convert([self.part(self.root, "")])
        if result is None:
            if self.empty_reasons and not self.cuts:  # a oneOf no branch could be generated for
                raise SchemaError(self.empty_reasons[0])
            if self.cuts:
                raise SchemaError(
                    f"keyword '$ref' at {self.cuts[0]}: the schema has no "
                    f"finite instance within max_recursion_depth="
                    f"{self.max_depth}; raise max_recursion_depth or give "
                    "the recursion a non-recursive alternative")
            raise SchemaError("schema at /: no JSON value satisfies the "
                              "schema (as far as the converter can generate)")
        if not self.definitions:
            return result
        defs = {name: text for text, name in self.definitions.items()}
        last = f"d{len(defs) - 1}"
        if result == f"(?&{last})":  # the root's own definition: write it in place
            result = defs.pop(last)
            if not defs:
                return result
        return "(?(DEFINE)" + "".join(f"(?P<{n}>{t})" for n, t in defs.items()) + ")" + result

    def _shared(self, text: str, ptr: str) -> str:
        """A call of the definition holding ``text`` (made on first use)."""
        name = self.definitions.get(text)
        if name is None:
            self.definition_text += len(text)
            if self.definition_text > limits.MAX_REGEX_TEXT:
                raise SchemaError(
                    f"schema at {ptr or '/'}: the regex text exceeds MAX_REGEX_TEXT="
                    f"{limits.MAX_REGEX_TEXT} characters even with shared definitions; lower "
                    "max_recursion_depth, bound the nesting or simplify the schema")
            name = self.definitions[text] = f"d{len(self.definitions)}"
        return f"(?&{name})"

    def part(self, schema: Any, ptr: str, lineage: tuple = ()) -> _Part:
        self._ids += 1
        return _new_part(_Part, (schema, ptr, lineage + (self._ids,)))  # _Part(...), no Python-level __new__

    # -- references ---------------------------------------------------------

    def _index_resources(self) -> None:
        """Base URI of every subschema, the resources (``$id``) and anchors."""
        self.resources: dict = {}   # absolute URI (no fragment) -> (schema, ptr)
        self.anchors: dict = {}     # (URI, name) -> (schema, ptr)
        self.base_of: dict = {}     # subschema pointer -> base URI

        def visit(schema: Any, ptr: str, base: str) -> None:
            if not isinstance(schema, dict):
                return
            if isinstance(schema.get("$id"), str):
                base = urldefrag(_join_uri(base, schema["$id"]))[0]
                self.resources.setdefault(base, (schema, ptr))
            self.base_of[ptr] = base
            for kw in ("$anchor", "$dynamicAnchor"):
                if isinstance(schema.get(kw), str):
                    self.anchors.setdefault((base, schema[kw]), (schema, ptr))
            if "unevaluatedProperties" in schema or "unevaluatedItems" in schema:
                self.has_unevaluated = True
            if not schema.keys().isdisjoint(_SUBSCHEMA_KEYWORDS):  # a leaf has none: most schemas
                for sub, p in _subschemas(schema, ptr):
                    visit(sub, p, base)

        self.resources[""] = (self.root, "")
        visit(self.root, "", "")
        del visit  # it calls itself through its closure cell (and holds self): no cycle left
        self.base_uri = self.base_of.get("", "")
        # Best-effort helpers (oneOf proofs) resolve from the root only: safe
        # when the document is one resource.
        self.one_resource = len({b for b in self.base_of.values()}) <= 1

    def _base(self, ptr: str) -> str:
        if self.plain:
            return ""
        while ptr not in self.base_of and ptr:
            ptr = ptr.rsplit("/", 1)[0]
        return self.base_of.get(ptr, self.base_uri)

    def resolve(self, ref: Any, ptr: str) -> tuple[Any, str]:
        """Resolve a ``$ref`` found at ``ptr`` (the keyword's pointer) against
        the base URI there; returns (target, target pointer)."""
        if not isinstance(ref, str):
            raise _refuse("$ref", ptr, "$ref must be a string")
        base = "" if self.plain else self._base(ptr.rsplit("/", 1)[0])  # _base's answer when plain
        found = self._targets.get((ref, base))  # the same $ref at many places: URI work once
        if found is None:
            found = self._targets[(ref, base)] = self._resolve_uri(ref, base, ptr)
        return found

    def _resolve_uri(self, ref: str, base: str, ptr: str) -> tuple[Any, str]:
        """:meth:`resolve` against the base URI ``base`` (raises naming ``ptr``)."""
        if not base and ref.startswith("#") and _URL_SAFE(ref):  # what the URI functions give
            uri, frag = "", ref[1:]                                 # for these (most refs)
        else:
            uri, frag = urldefrag(_join_uri(base, ref))
        if uri not in self.resources:
            raise _refuse("$ref", ptr, f"only references into this document ('#', "
                          f"'#/...', '#anchor', or a subschema's $id) are supported, not "
                          f"{ref!r} (resolved to {uri!r}); inline the referenced schema "
                          "under $defs")
        resource, rptr = self.resources[uri]
        frag = unquote(frag)
        if frag and not frag.startswith("/"):
            if (uri, frag) not in self.anchors:
                raise _refuse("$ref", ptr, f"anchor {frag!r} not found in {uri or 'the root'}")
            return self.anchors[(uri, frag)]
        target: Any = resource
        tokens = frag.split("/")[1:] if frag else []
        clean = []
        for tok in tokens:
            tok = tok.replace("~1", "/").replace("~0", "~")
            clean.append(tok)
            if isinstance(target, dict) and tok in target:
                target = target[tok]
            elif isinstance(target, list) and tok.isdigit() and int(tok) < len(target):
                target = target[int(tok)]
            else:
                raise _refuse("$ref", ptr, f"reference {ref!r} does not resolve")
        return target, _ptr(rptr, *clean)

    # -- validation oracle (for enum/const and oneOf) -----------------------

    def is_valid(self, schema: Any, value: Any, keyword: str, ptr: str) -> bool:
        if self._validator is None:
            from jsonschema import Draft202012Validator

            self._validator = Draft202012Validator(
                self.root, format_checker=Draft202012Validator.FORMAT_CHECKER)
        # the same enum value against the same schema again (oneOf proofs, a reused target's
        # enum...): answered once; values by class and value (True == 1), composite ones not kept
        key = (id(schema), value.__class__, repr(value) if value.__class__ is float else value) \
            if value.__class__ in _SCALARS else None
        known = self._checked.get(key)
        if known is not None and known[0] is schema:  # the entry keeps schema alive: an id is not reused
            return known[1]
        try:
            valid = self._validator.evolve(schema=schema).is_valid(value)
        except Exception as exc:  # unresolvable remote refs etc.
            raise _refuse(keyword, ptr, f"values cannot be checked against "
                          f"the schema: {type(exc).__name__}: {exc}") from None
        if key is not None:
            self._checked[key] = (schema, valid)
        return valid

    # -- conversion -----------------------------------------------------------

    def convert(self, parts: list) -> Optional[str]:
        """Regex for the conjunction of ``parts`` (None: empty language)."""
        self.conversions += 1
        if self.conversions > limits.MAX_CONVERSIONS:
            raise SchemaError(
                f"schema at {parts[0].ptr or '/'}: converting it needs more than "
                f"MAX_CONVERSIONS={limits.MAX_CONVERSIONS} subschema conversions (many overlapping "
                "oneOf/anyOf/dependencies multiply); lower max_recursion_depth or simplify it")
        entered: list[str] = []
        try:
            flat: list = []
            for p in parts:
                if not self._flatten(p, flat, entered):
                    return None
            if self.recursion is not None and (hit := self.recursion.collapse(flat)) is not None:
                return hit  # the conjunction is one recursive $ref: its rule's placeholder
            memo = self.memo
            if memo is not None:
                key = memo.key(flat)
                hit = memo.recall(self, key)
                if hit is not _MISS:
                    return hit
                mark = memo.mark(self)
            result = self._convert_flat(flat, parts)
            # Nested containers repeat their item regex, so text can double per
            # level: stop early, before the exact (slower) size check at the end.
            if self.share and result is not None and len(result) >= limits.SHARE_MIN_TEXT:
                result = self._shared(result, parts[0].ptr)
            if result is not None and len(result) > limits.MAX_REGEX_TEXT:
                raise _TextLimit(
                    f"schema at {parts[0].ptr or '/'}: the regex text exceeds "
                    f"MAX_REGEX_TEXT={limits.MAX_REGEX_TEXT} characters (deeply nested arrays/objects "
                    "multiply it); lower max_recursion_depth, bound the nesting or simplify the schema")
            if memo is not None:
                memo.remember(self, key, mark, result, flat)
            return result
        finally:
            for t in entered:
                self.ref_counts[t] -= 1

    def _flatten(self, part: _Part, out: list, entered: list) -> bool:
        """Expand ``$ref``, ``allOf`` and boolean ``if`` into ``out``.

        Returns False if the conjunction is known to be empty."""
        s, p, lin = part
        if s is True:
            return True
        if s is False:
            return False
        if not isinstance(s, dict):
            raise SchemaError(f"schema at {p or '/'} must be an object or a boolean")
        if s.keys().isdisjoint(_FLATTENED):  # nothing to expand (most parts): the part as it is
            out.append(part)
            return True
        # a bare {"$ref": ...} leaves nothing once resolved: no copy of it
        rest = {} if len(s) == 1 and "$ref" in s else dict(s)
        if "$ref" in s:
            rest.pop("$ref", None)
            target, tptr = self.resolve(s["$ref"], _ptr(p, "$ref"))
            self.reads.append(tptr)  # what follows depends on ref_counts[tptr] (see _Memo)
            if self.recursion is not None and self.ref_counts[tptr]:  # recursion -> a grammar rule
                out.append(self.recursion.marker(rest, target, tptr, _ptr(p, "$ref"), lin))
                return True
            if self.ref_counts[tptr] >= self.max_depth:
                self.cuts.append(_ptr(p, "$ref"))
                return False
            self.ref_counts[tptr] += 1
            entered.append(tptr)
            if not self._flatten(self.part(target, tptr, lin), out, entered):
                return False
        if "allOf" in rest:
            for i, sub in enumerate(rest.pop("allOf")):
                if not self._flatten(self.part(sub, _ptr(p, "allOf", i), lin), out, entered):
                    return False
        if "if" in rest:
            cond = rest["if"]
            if cond is True or cond is False:
                branch = "then" if cond else "else"
                rest.pop("if")
                if branch in rest:
                    sub = self.part(rest[branch], _ptr(p, branch), lin)
                    if not self._flatten(sub, out, entered):
                        return False
            elif ("then" in rest or "else" in rest) and self.has_unevaluated:
                raise _unsupported("if", _ptr(p, "if"), "conditional subschemas with a "
                                   "non-boolean 'if' next to unevaluated* keywords")
            elif "then" in rest or "else" in rest:
                # (if ∧ then) ∨ (¬if ∧ else), ¬if under-approximated
                rest.pop("if")
                then, else_ = rest.pop("then", True), rest.pop("else", True)
                neg = self.negation(cond, _ptr(p, "if"))
                branches = [{"allOf": [cond, then]}]
                if neg is not False:
                    branches.append({"allOf": [neg, else_]})
                out.append(self.part({"anyOf": branches}, _ptr(p, "if"), lin))
            else:
                rest.pop("if")  # `if` alone constrains nothing
        if "not" in rest and not self._simple_not(rest["not"]) and not self.has_unevaluated:
            neg = self.negation(rest.pop("not"), _ptr(p, "not"))
            if neg is False or not self._flatten(self.part(neg, _ptr(p, "not"), lin), out, entered):
                return False
        if "if" not in rest:  # then/else without if are ignored by the spec
            rest.pop("then", None)
            rest.pop("else", None)
        out.append(_new_part(_Part, (rest, p, lin)))
        return True

    def _convert_flat(self, flat: list, original: list) -> Optional[str]:
        for part in flat:
            if "enum" in part.schema or "const" in part.schema:
                return self._finite(original, part)
        for i, part in enumerate(flat):
            for kw in ("dependentRequired", "dependentSchemas"):
                if isinstance(part.schema.get(kw), dict) and part.schema[kw]:
                    return self._dependency(flat, i, kw)
        for i, part in enumerate(flat):
            for kw in ("anyOf", "oneOf"):
                if kw in part.schema:
                    return self._distribute(flat, i, kw)
        if all(set(part.schema) <= _ANNOTATIONS for part in flat):
            return self.any_value()
        return self._typed(flat)
