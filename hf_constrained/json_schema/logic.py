"""The converter's logic: ``enum``/``const`` filtering, dependencies, ``anyOf``/``oneOf``
distribution, negation (``not``, overlapping ``oneOf``) and disjointness."""

from __future__ import annotations

from typing import Any, Optional

from ..errors import SchemaError
from . import limits
from .negation import negate
from .regex_text import _alt
from .schemas import (_ANNOTATIONS, _KINDS, _TOO_MANY, _json_type_kinds, _literal_prefix, _Part, _ptr,
                      _refuse, _type_kinds)


class _LogicMixin:
    """:class:`~.converter._Converter`'s ``enum``/``const``, ``dependent*``, ``anyOf``/``oneOf`` and
    negation methods (they use the converter's state and its other methods)."""

    def _finite(self, parts: list, part: _Part) -> Optional[str]:
        """enum/const: keep the listed values that validate against all
        (unflattened) parts, so every sibling keyword is honoured exactly."""
        s, p, _ = part
        if "const" in s:
            values, kw = [s["const"]], "const"
        else:
            values, kw = s["enum"], "enum"
        kept = [v for v in values
                if all(self.is_valid(q.schema, v, kw, _ptr(p, kw)) for q in parts)]
        return _alt([self.literal(v) for v in kept])

    def _dependency(self, flat: list, index: int, keyword: str) -> Optional[str]:
        """One ``dependentRequired``/``dependentSchemas`` entry ``name: dep``,
        split exactly into two alternatives: ``name`` absent, or ``name``
        present and ``dep`` holds (required names / the dependent schema)."""
        s, p, lin = flat[index]
        deps = dict(s[keyword])
        name, dep = next(iter(deps.items()))
        del deps[name]
        rest = dict(s)
        if deps:
            rest[keyword] = deps
        else:
            del rest[keyword]
        dptr = _ptr(p, keyword, name)
        base = flat[:index] + [_Part(rest, p, lin)] + flat[index + 1:]
        if keyword == "dependentRequired":
            if not isinstance(dep, list) or not all(isinstance(n, str) for n in dep):
                raise _refuse(keyword, dptr, "must be an array of property names")
            if not dep:
                return self.convert(base)
            present = [self.part({"required": [name] + dep}, dptr, lin)]
        else:
            present = [self.part({"required": [name]}, dptr, lin), self.part(dep, dptr, lin)]
        absent_schema = {"properties": {name: False}}
        if not any("properties" in q.schema for q in flat):
            # a free-form object stays open: extra names still avoid `name`
            absent_schema["additionalProperties"] = True
        absent = [self.part(absent_schema, dptr, lin)]
        return _alt([self.convert(base + absent), self.convert(base + present)])

    def _distribute(self, flat: list, index: int, keyword: str) -> Optional[str]:
        s, p, lin = flat[index]
        branches = s[keyword]
        rest = dict(s)
        rest.pop(keyword)
        base = flat[:index] + [_Part(rest, p, lin)] + flat[index + 1:]
        alts = []
        for i, b in enumerate(branches):
            parts = base + [self.part(b, _ptr(p, keyword, i), lin)]
            if keyword == "oneOf" and self.has_unevaluated:
                if i == 0:  # negated branches would count as evaluating
                    self._check_disjoint(branches, _ptr(p, keyword))
            elif keyword == "oneOf":
                # exactly one branch: conjoin, for every other branch that is not
                # provably disjoint from this one, a separator (a sub-language of
                # this branch that excludes it) or its negation
                alts.append(self._one_of_branch(base, branches, i, _ptr(p, keyword), lin))
                continue
            if parts is not None:
                alts.append(self.convert(parts))
        if keyword == "oneOf" and not self.has_unevaluated:
            if any(a is _TOO_MANY for a in alts) and not any(isinstance(a, str) for a in alts):
                i = alts.index(_TOO_MANY)
                self.empty_reasons.append(str(_refuse(
                    "oneOf", _ptr(p, keyword),
                    f"branch {i} overlaps the other branches and negating them gives "
                    f"more than MAX_NEGATION_ALTERNATIVES={limits.MAX_NEGATION_ALTERNATIVES} "
                    "alternatives; use anyOf if overlapping is acceptable, or make the "
                    "branches disjoint (a required property with different const values)")))
                return None
            alts = [a for a in alts if a is not _TOO_MANY]
        if keyword == "oneOf" and not any(a is not None for a in alts) and branches:
            # empty here: an optional property / array item / anyOf branch using it is
            # simply not generated; if the whole schema is left empty, run() says why
            self.empty_reasons.append(str(_refuse(
                "oneOf", _ptr(p, keyword), "no branch could be generated so that the other "
                "branches fail (their negation is not expressible); use anyOf if overlapping "
                "is acceptable, or make the branches disjoint (different types, or a required "
                "property with different const values)")))
        return _alt(alts)

    def _one_of_branch(self, base: list, branches: list, i: int, ptr: str, lin: tuple):
        """Regex of branch ``i`` of a oneOf restricted so that every other branch
        fails (None: nothing left; ``_TOO_MANY``: negations distribute too far).
        Tried with separators first, then with negations only."""
        b = branches[i]
        result = None
        for separate in (True, False):
            parts = base + [self.part(b, _ptr(ptr, i), lin)]
            combos, used = 1, False
            for j, other in enumerate(branches):
                if j == i:
                    continue
                sep = self._separator(b, other, ptr)
                if sep is True:
                    continue
                jptr = _ptr(ptr, j)
                if separate and sep is not None:
                    parts.append(self.part(sep, jptr, lin))
                    used = True
                    continue
                neg = self.negation(other, jptr)
                if neg is False:
                    parts = None
                    break
                parts.append(self.part(neg, jptr, lin))
                combos *= _alternatives(neg)
                if combos > limits.MAX_NEGATION_ALTERNATIVES:
                    parts = _TOO_MANY
                    break
            if parts is _TOO_MANY:
                result = result if isinstance(result, str) else _TOO_MANY
            elif parts is not None:
                result = self.convert(parts)
            if isinstance(result, str) or not used:
                return result
        return result

    def negation(self, schema: Any, ptr: str) -> Any:
        """A schema whose instances all fail ``schema`` (see negation.py)."""
        def resolve(ref: str):
            try:
                return self.resolve(ref, _ptr(ptr, "$ref"))[0]
            except SchemaError:
                return None

        return negate(schema, resolve)

    # -- oneOf disjointness -------------------------------------------------

    def _deref(self, schema: Any, depth: int = 0) -> Any:
        """Follow a top-level ``$ref`` chain of a schema (best effort)."""
        while isinstance(schema, dict) and "$ref" in schema and depth < 32:
            siblings = set(schema) - _ANNOTATIONS - {"$ref"}
            if siblings:
                break
            if not self.one_resource:
                break
            try:
                schema, _ = self.resolve(schema["$ref"], "/$ref")
            except SchemaError:
                break
            depth += 1
        return schema

    def _possible_kinds(self, schema: Any, depth: int = 0) -> set:
        """Superset of the kinds of instances valid against ``schema``."""
        if schema is False:
            return set()
        if not isinstance(schema, dict) or depth > 32:
            return set(_KINDS)
        kinds = set(_KINDS)
        if "type" in schema:
            ts = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
            kinds &= set().union(*[_type_kinds(t) for t in ts])
        if "const" in schema:
            kinds &= _json_type_kinds(schema["const"])
        if isinstance(schema.get("enum"), list):
            kinds &= set().union(set(), *[_json_type_kinds(v) for v in schema["enum"]])
        if "$ref" in schema and self.one_resource:
            try:
                target, _ = self.resolve(schema["$ref"], "/$ref")
                kinds &= self._possible_kinds(target, depth + 1)
            except SchemaError:
                pass
        for sub in schema.get("allOf", []):
            kinds &= self._possible_kinds(sub, depth + 1)
        for kw in ("anyOf", "oneOf"):
            if kw in schema:
                kinds &= set().union(*[self._possible_kinds(b, depth + 1)
                                       for b in schema[kw]])
        return kinds

    def _finite_values(self, schema: Any) -> Optional[list]:
        schema = self._deref(schema)
        if isinstance(schema, dict):
            if "const" in schema:
                return [schema["const"]]
            if isinstance(schema.get("enum"), list):
                return list(schema["enum"])
        return None

    def _excludes(self, a: Any, b: Any, ptr: str) -> bool:
        """True if no value valid for ``a`` can be valid for ``b``,
        provided ``a`` has a finite set of values."""
        values = self._finite_values(a)
        if values is None:
            return False
        return not any(self.is_valid(a, v, "oneOf", ptr) and
                       self.is_valid(b, v, "oneOf", ptr) for v in values)

    def _disjoint(self, a: Any, b: Any, ptr: str, depth: int = 0) -> bool:
        if not (self._possible_kinds(a) & self._possible_kinds(b)):
            return True
        if self._excludes(a, b, ptr) or self._excludes(b, a, ptr):
            return True
        da, db = self._deref(a), self._deref(b)
        if not (isinstance(da, dict) and isinstance(db, dict)):
            return False
        if depth < 8:  # a bare union (pydantic's nested discriminated union) is disjoint from
            for x, y in ((da, db), (db, da)):  # b when each of its branches is
                union = _bare_union(x)
                if union is not None and all(self._disjoint(u, y, ptr, depth + 1) for u in union):
                    return True
        if self._possible_kinds(da) | self._possible_kinds(db) != {"object"}:
            return False
        common = set(da.get("required", [])) & set(db.get("required", []))
        pa, pb = da.get("properties", {}), db.get("properties", {})
        for name in sorted(common):
            if name in pa and name in pb and (
                    self._excludes(pa[name], pb[name], ptr)
                    or self._excludes(pb[name], pa[name], ptr)):
                return True
        return False

    def _separator(self, a: Any, b: Any, ptr: str) -> Any:
        """A schema ``S`` such that no instance of ``a`` ∧ ``S`` is valid for ``b``:
        True when ``a`` and ``b`` are disjoint already, None when none is known.

        ``S`` requires a property ``name`` (so the instance is an object that has
        it) where ``a`` and ``b`` give ``name`` disjoint const/enum values, or where
        ``b`` forbids ``name`` (``properties: {name: false}``, or
        ``additionalProperties: false`` without ``name`` and without
        ``patternProperties``), or forbids a property that ``b`` requires and ``a``
        does not.  Both facts hold for every instance of ``a`` ∧ ``S``,
        whatever else ``a`` and ``b`` say, since top-level keywords are conjuncts.
        """
        if self._disjoint(a, b, ptr):
            return True
        da, db = self._deref(a), self._deref(b)
        if not (isinstance(da, dict) and isinstance(db, dict)):
            return None
        xa, xb = _literal_prefix(da.get("pattern")), _literal_prefix(db.get("pattern"))
        if xa is not None and xb is not None and not (xa.startswith(xb) or xb.startswith(xa)):
            return {"type": "string"}  # strings matching both would start with both prefixes
        pa, pb = da.get("properties", {}), db.get("properties", {})
        if not (isinstance(pa, dict) and isinstance(pb, dict)):
            return None
        for name in pa:
            if name in pb and pa[name] is not False and (
                    self._excludes(pa[name], pb[name], ptr) or self._excludes(pb[name], pa[name], ptr)):
                return {"type": "object", "required": [name]}
        req = da.get("required") if isinstance(da.get("required"), list) else []
        closed = db.get("additionalProperties") is False and not db.get("patternProperties")
        for name in list(dict.fromkeys(req + list(pa))):
            if not isinstance(name, str) or pa.get(name) is False:
                continue
            if pb.get(name) is False or (closed and name not in pb):
                return {"type": "object", "required": [name]}
        for name in db.get("required") if isinstance(db.get("required"), list) else []:
            if isinstance(name, str) and name not in req:  # a may omit what b requires
                return {"type": "object", "properties": {name: False}}
        return None

    def _check_disjoint(self, branches: list, ptr: str) -> None:
        for i in range(len(branches)):
            for j in range(i + 1, len(branches)):
                if not self._disjoint(branches[i], branches[j], ptr):
                    raise _refuse(
                        "oneOf", ptr, f"cannot prove that branches {i} and {j} "
                        "never both match (different types, disjoint "
                        "const/enum values or a required discriminator "
                        "property with disjoint const/enum values are "
                        "recognised); use anyOf if overlapping is acceptable")


def _bare_union(schema: dict) -> Optional[list]:
    """The branches of a schema that is only an ``anyOf`` or a ``oneOf`` (besides annotations):
    its instances are among the branches' instances. None for any other schema."""
    rest = set(schema) - _ANNOTATIONS
    if len(rest) == 1:
        (kw,) = rest
        if kw in ("anyOf", "oneOf") and isinstance(schema[kw], list):
            return schema[kw]
    return None


def _alternatives(schema: Any) -> int:
    """How many alternatives flattening ``schema`` distributes into (anyOf sums,
    allOf multiplies; nested values are converted separately and do not count)."""
    if not isinstance(schema, dict):
        return 1
    n = 1
    if isinstance(schema.get("anyOf"), list):
        n = sum(_alternatives(b) for b in schema["anyOf"]) or 1
    for sub in schema.get("allOf", []) if isinstance(schema.get("allOf"), list) else []:
        n *= _alternatives(sub)
    return n
