"""The converter's arrays and objects."""

from __future__ import annotations

import json
import re
from typing import Optional

from . import limits
from .keys import _join_members, _key_excluding
from .regex_text import _alt, _concat, _json_text, _lit, _repeat
from ..errors import SchemaError
from .schemas import _ARRAY_KEYWORDS, _OBJECT_KEYWORDS, _ptr, _unsupported


class _ContainersMixin:
    """:class:`~.converter._Converter`'s arrays and objects."""

    # -- arrays ---------------------------------------------------------------

    def _array(self, flat: list) -> Optional[str]:
        if not any(set(s) & _ARRAY_KEYWORDS for s, _, _ in flat):
            return self.any_container("array")
        mins = self._collect(flat, "minItems")
        maxs = self._collect(flat, "maxItems")
        m = max([int(v) for v, _ in mins], default=0)
        n = min([int(v) for v, _ in maxs], default=None)
        unique = None
        for s, p, _ in flat:
            if s.get("uniqueItems", False) and not (n is not None and n <= 1) and unique is None:
                unique = _ptr(p, "uniqueItems")
            if "contains" in s and not (s.get("minContains") == 0
                                        and "maxContains" not in s):
                raise _unsupported("contains", _ptr(p, "contains"))
        if n is not None and m > n:
            return None
        if unique is not None:
            return self._unique_array(flat, m, n, unique)
        k = max([len(s["prefixItems"]) for s, _, _ in flat if "prefixItems" in s],
                default=0)
        uneval = self._unevaluated(flat, "unevaluatedItems")

        def element(i: Optional[int]) -> list:
            """Parts constraining item ``i`` (None: items beyond k)."""
            parts = []
            for s, p, lin in flat:
                pre = s.get("prefixItems", [])
                if i is not None and i < len(pre):
                    parts.append(self.part(pre[i], _ptr(p, "prefixItems", i)))
                elif "items" in s:
                    parts.append(self.part(s["items"], _ptr(p, "items")))
            for (u, up, ulin), owner_parts in uneval:
                owned = any("items" in s or (i is not None and i < len(s.get("prefixItems", [])))
                            for s, _, _ in owner_parts)
                if not owned:
                    parts.append(self.part(u, up))
            return parts

        elems = []
        for i in range(k if n is None else min(k, n)):
            r = self.convert_or_any(element(i))
            if r is None:
                break
            elems.append(r)
        tail = None
        if len(elems) == k and (n is None or n > k):
            tail = self.convert_or_any(element(None))
        max_len = n if tail is not None else min(len(elems), n if n is not None else len(elems))
        if max_len is not None and m > max_len:
            return None
        sep = self.ws + "," + self.ws

        def rest(i: int) -> Optional[str]:
            """Continuation after ``i`` items (each item preceded by sep)."""
            if i < len(elems):
                opts = [""] if i >= m else []
                if max_len is None or i < max_len:
                    opts.append(_concat(sep, elems[i], rest(i + 1)))
                return _alt(opts)
            if tail is None:
                return "" if i >= m else None
            if i == 0:
                return None  # unreachable: the first item has no separator
            lo = max(0, m - i)
            hi = None if max_len is None else max_len - i
            return _repeat(sep + tail, lo, hi)

        first = None
        if max_len is None or max_len >= 1:
            if elems:
                first = _concat(elems[0], rest(1))
            elif tail is not None:
                first = _concat(tail, rest(1))
        # rest() calls itself through its closure cell: a reference cycle that only the cyclic
        # collector would free, after walking everything allocated since (issue #12, part 23)
        del rest
        return self._container("\\[", "\\]", first, m == 0)

    def _unique_array(self, flat: list, m: int, n: Optional[int], ptr: str) -> Optional[str]:
        """An array with ``uniqueItems`` whose items have few possible values: each value
        at most once, in the order the schema lists them (so every valid *set* of items is
        generated, in one order: a subset of the valid arrays), ``m`` to ``n`` of them.
        Refused (as before) when the items may take other values, or with ``prefixItems``
        or ``unevaluatedItems``."""
        if any("prefixItems" in s or s.get("unevaluatedItems", True) not in (True, {})
               for s, _, _ in flat):
            raise _unsupported("uniqueItems", ptr, "next to prefixItems or unevaluatedItems")
        parts = [self.part(s["items"], _ptr(p, "items")) for s, p, _ in flat if "items" in s]
        values = self._few_item_values(parts, ptr)
        if values is None:
            raise _unsupported("uniqueItems", ptr)
        hi = len(values) if n is None else min(n, len(values))
        if m > hi:  # fewer distinct values than minItems
            return None
        sep = self.ws + "," + self.ws
        texts = [self.literal(v) for v in values]
        k = len(texts)
        memo: dict = {}

        def seq(i: int, need: int, room: int, first: bool) -> Optional[str]:
            """Items i.. in order, ``need`` to ``room`` of them; ``first``: none written yet."""
            room = min(room, k - i)
            if need > room:
                return None
            if i == k:
                return ""
            key = (i, need, room, first)
            if key in memo:
                return memo[key]
            take = None
            if room > 0:
                rest = seq(i + 1, max(need - 1, 0), room - 1, False)
                if rest is not None:
                    take = ("" if first else sep) + texts[i] + rest
            skip = seq(i + 1, need, room, first)
            if take is not None and skip is not None and not first and \
                    (max(need - 1, 0), min(room - 1, k - i - 1)) == (need, min(room, k - i - 1)):
                out = _repeat(sep + texts[i], 0, 1) + skip  # both go on the same way: factored
            else:
                out = _alt([x for x in (take, skip) if x is not None])
            if len(out) > limits.MAX_REGEX_TEXT:
                raise _unsupported("uniqueItems", ptr, f"{k} possible values with these item "
                                   "counts make the regex too large")
            memo[key] = out
            return out

        body = seq(0, max(m, 1), hi, True) if hi >= 1 else None
        return self._container("\\[", "\\]", body or None, m == 0)

    def _few_item_values(self, parts: list, ptr: str) -> Optional[list]:
        """The distinct JSON values valid against every item part when one of them allows only
        a few (``enum``, ``const``, ``type`` boolean or null), in its order; None otherwise."""
        candidates = None
        for part in parts:
            candidates = self._finite_values(part[0])  # const / enum
            if candidates is None:
                s = self._deref(part[0])
                candidates = {"boolean": [True, False], "null": [None]}.get(s.get("type")) \
                    if isinstance(s, dict) else None
            if candidates is not None:
                break
        if candidates is None or not parts:
            return None
        values, seen = [], set()
        for v in candidates:
            key = _json_key(v)
            if key in seen or not all(self.is_valid(part[0], v, "uniqueItems", ptr) for part in parts):
                continue
            seen.add(key)
            values.append(v)
        if len(values) > limits.MAX_UNIQUE_VALUES:
            raise _unsupported("uniqueItems", ptr, f"the items have {len(values)} possible values, "
                               f"more than MAX_UNIQUE_VALUES={limits.MAX_UNIQUE_VALUES}")
        return values

    def _unevaluated(self, flat: list, keyword: str) -> list:
        """For each part with ``unevaluated*`` (other than true): that
        keyword's (schema, ptr, lineage) and the parts of its subtree."""
        out = []
        for s, p, lin in flat:
            u = s.get(keyword, True)
            if u is True or u == {}:
                continue
            subtree = [q for q in flat if q.lineage[:len(lin)] == lin]
            out.append(((u, _ptr(p, keyword), lin), subtree))
        return out

    # -- objects --------------------------------------------------------------

    def _object(self, flat: list) -> Optional[str]:
        if not any(set(s) & _OBJECT_KEYWORDS for s, _, _ in flat):
            return self.any_container("object")
        names: list = []
        for s, _, _ in flat:
            for name in s.get("properties", {}):
                if name not in names:
                    names.append(name)
        required: list = []
        for s, _, _ in flat:
            for name in s.get("required", []):
                if name not in required:
                    required.append(name)
        for name in required:
            if name not in names:
                names.append(name)
        uneval = self._unevaluated(flat, "unevaluatedProperties")

        def owns(parts: list, name: Optional[str]) -> bool:
            for s, _, _ in parts:
                if "additionalProperties" in s:
                    return True
                if name is not None and (name in s.get("properties", {}) or any(
                        re.search(pat, name) for pat in s.get("patternProperties", {}))):
                    return True
            return False

        def member_parts(name: Optional[str]) -> Optional[list]:
            """Parts constraining the value of ``name`` (None: an extra
            name matching no declared property or pattern)."""
            parts = []
            for s, p, _ in flat:
                matched = False
                props = s.get("properties", {})
                if name is not None and name in props:
                    parts.append(self.part(props[name], _ptr(p, "properties", name)))
                    matched = True
                for pat, sub in s.get("patternProperties", {}).items():
                    if name is not None and re.search(pat, name):
                        parts.append(self.part(sub, _ptr(p, "patternProperties", pat)))
                        matched = True
                if not matched and "additionalProperties" in s:
                    parts.append(self.part(s["additionalProperties"],
                                           _ptr(p, "additionalProperties")))
                pn = s.get("propertyNames", True)
                if name is not None and pn is not True and not self.is_valid(
                        pn, name, "propertyNames", _ptr(p, "propertyNames")):
                    parts.append(self.part(False, _ptr(p, "propertyNames")))
            for (u, up, _), subtree in uneval:
                if not owns(subtree, name):
                    parts.append(self.part(u, up))
            return parts

        ws = self.ws
        members = []
        single = None  # one non-empty part (an empty one adds no member part: what a bare
        # $ref leaves), no patterns, no propertyNames, no unevaluated*: each member's parts as
        # member_parts() gives them, without its loops
        full = [q for q in flat if q.schema] if not uneval else ()
        if len(full) == 1:
            s, p, _ = full[0]
            if not s.get("patternProperties") and s.get("propertyNames", True) is True:
                single = s.get("properties", {})
                extra_ptr = _ptr(p, "additionalProperties") if "additionalProperties" in s else None
                props_ptr = _ptr(p, "properties")
        for name in names:
            if single is None:
                parts = member_parts(name)
            elif name in single:
                parts = [self.part(single[name], _ptr(props_ptr, name))]
            elif extra_ptr is not None:
                parts = [self.part(s["additionalProperties"], extra_ptr)]
            else:
                parts = []
            value = self.convert(parts) if parts else self.any_value()
            if value is None:
                if name in required:
                    return None
                continue
            key = _lit(_json_text(name))
            members.append((key + ws + ":" + ws + value, name in required))

        extra = self._extra_member(flat, names, member_parts)
        limit = self._property_limit(flat, members, extra)
        if limit == -1:
            return None
        if limit == 0:
            extra = None
        sep = ws + "," + ws
        declared, empty_ok = _join_members(members, sep)
        # minProperties 1: any non-empty selection (an object with a member has >= 1 key)
        nonempty = any(int(v) == 1 for v, _ in self._collect(flat, "minProperties"))
        if extra is None:
            return self._container("\\{", "\\}", declared, empty_ok and not nonempty)
        more = _repeat(sep + extra, 0, None if limit is None else limit - 1)
        alts = [None if declared is None else declared + more]
        if empty_ok:
            alts.append(extra + more)
        return self._container("\\{", "\\}", _alt(alts), empty_ok and not nonempty)

    def _extra_member(self, flat: list, names: list, member_parts) -> Optional[str]:
        """Regex for one extra ``"key": value`` member, or None when the
        converter does not emit extra members.

        Extra members are emitted for explicitly open objects
        (``additionalProperties`` true or a schema) and for free-form
        objects (no ``properties`` anywhere).  Their keys avoid the declared
        names (or, without declared names, satisfy ``propertyNames``); their
        values satisfy ``additionalProperties`` *and every*
        ``patternProperties`` schema, which is valid whatever the key
        matches.
        """
        explicit = [s["additionalProperties"] for s, _, _ in flat
                    if "additionalProperties" in s]
        if any(a is False for a in explicit):
            return None
        declares = any("properties" in s for s, _, _ in flat)
        if not explicit and declares:
            return None
        key_parts = [self.part(s["propertyNames"], _ptr(p, "propertyNames"))
                     for s, p, _ in flat
                     if s.get("propertyNames", True) not in (True, {})]
        patterns = [(pat, _ptr(p, "patternProperties"))
                    for s, p, _ in flat for pat in s.get("patternProperties", {})]
        if key_parts:
            if names:
                return None  # cannot intersect with "not a declared name"
            key = self.convert(key_parts + [self.part({"type": "string"}, "")])
            if key is None:
                return None
        elif patterns and not explicit and not declares:
            # an object with only patternProperties (a map, pydantic's dict[constr(pattern=...), X])
            # is generated closed, as objects without additionalProperties are: keys match a pattern
            key = self._pattern_keys(patterns)
        else:
            key = _key_excluding(names)
        value_parts = member_parts(None)
        for s, p, _ in flat:
            for pat, sub in s.get("patternProperties", {}).items():
                value_parts.append(self.part(sub, _ptr(p, "patternProperties", pat)))
        value = self.convert_or_any(value_parts)
        if value is None:
            return None
        return key + self.ws + ":" + self.ws + value

    def _pattern_keys(self, patterns: list) -> str:
        """A key matching one of ``patterns`` (``(pattern, pointer)``), or any key where a
        pattern cannot be converted (the schema allows any key: then as before)."""
        try:
            key = self.convert([self.part({"type": "string", "anyOf": [{"pattern": pat} for pat, _ in patterns]},
                                          patterns[0][1])])
        except SchemaError:
            key = None
        return key if key is not None else _key_excluding([])

    def _property_limit(self, flat: list, members: list, extra) -> Optional[int]:
        """Check minProperties/maxProperties.

        Accepted when trivially satisfied, or -- for maxProperties -- when
        the object only has extra members (their number is then capped;
        duplicate keys can only lower the count).  Returns the cap on the
        number of extra members (None: no cap), or -1 if no object fits.
        """
        n_required = sum(1 for _, req in members if req)
        n_max = None if extra is not None else len(members)
        for value, ptr in self._collect(flat, "minProperties"):
            if int(value) > max(n_required, 1):
                raise _unsupported("minProperties", ptr)
        limit = None
        for value, ptr in self._collect(flat, "maxProperties"):
            value = int(value)
            if n_max is not None and value >= n_max:
                continue
            if value < n_required:
                return -1
            if members:
                raise _unsupported("maxProperties", ptr)
            limit = value if limit is None else min(limit, value)
        return limit


def _json_key(value) -> str:
    """Equal for JSON-equal values (``1`` and ``1.0``; never ``true`` and ``1``): what
    ``uniqueItems`` compares."""
    def canon(v):
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, list):
            return [canon(x) for x in v]
        if isinstance(v, dict):
            return {k: canon(x) for k, x in v.items()}
        return v
    return json.dumps(canon(value), sort_keys=True)
