"""The converter's literal and free-form values (``const``/``enum`` text, ``{}``)."""

from __future__ import annotations

import json
from typing import Any, Optional

from ..errors import SchemaError
from . import limits
from .regex_text import _alt, _json_text, _lit, _repeat
from .tokens import BOOLEAN, NULL, NUMBER, STRING


class _ValuesMixin:
    """:class:`~.converter._Converter`'s literal and free-form values."""

    def literal(self, value: Any) -> str:
        """Regex for one JSON value (whitespace allowed between tokens)."""
        ws = self.ws
        if value is None:
            return "null"
        if value is True:
            return "true"
        if value is False:
            return "false"
        if isinstance(value, (int, float)):
            forms = [json.dumps(value)]
            if isinstance(value, float) and value.is_integer():
                forms = [str(int(value))] + (forms if self.integral_floats else [])
            if isinstance(value, int) and self.integral_floats:
                try:
                    if float(value) == value:
                        forms.append(json.dumps(float(value)))
                except OverflowError:
                    pass
            return _alt([_lit(f) for f in forms])
        if isinstance(value, str):
            return _lit(_json_text(value))
        if isinstance(value, list):
            if not value:
                return "\\[" + ws + "\\]"
            inner = (ws + "," + ws).join(self.literal(v) for v in value)
            return "\\[" + ws + inner + ws + "\\]"
        if isinstance(value, dict):
            if not value:
                return "\\{" + ws + "\\}"
            members = [_lit(_json_text(k)) + ws + ":" + ws
                       + self.literal(v) for k, v in value.items()]
            return "\\{" + ws + (ws + "," + ws).join(members) + ws + "\\}"
        raise SchemaError(f"not a JSON value: {value!r}")

    def any_value(self, depth: Optional[int] = None) -> str:
        """Any JSON value, containers nested at most ``depth`` deep
        (default ``min(max_recursion_depth, ANY_VALUE_MAX_DEPTH)``)."""
        if depth is None:
            depth = min(self.max_depth, limits.ANY_VALUE_MAX_DEPTH)
        alts = [NULL, BOOLEAN, NUMBER, STRING]
        if depth > 0:
            alts += [self.any_container("array", depth),
                     self.any_container("object", depth)]
        return _alt(alts)

    def any_container(self, kind: str, depth: Optional[int] = None) -> str:
        """An array or object of unconstrained values, nested at most
        ``depth`` containers deep (itself included)."""
        if depth is None:
            depth = min(self.max_depth, limits.ANY_VALUE_MAX_DEPTH)
        key = (kind, depth)
        if key not in self._any_cache:
            v = self.any_value(depth - 1)
            sep = self.ws + "," + self.ws
            if kind == "object":
                v = STRING + self.ws + ":" + self.ws + v
            open_, close = ("\\[", "\\]") if kind == "array" else ("\\{", "\\}")
            self._any_cache[key] = self._container(
                open_, close, v + _repeat(sep + v, 0, None), True)
        return self._any_cache[key]

    def _container(self, open_: str, close: str, nonempty: Optional[str],
                   empty_ok: bool) -> Optional[str]:
        ws = self.ws
        if nonempty is None:
            return open_ + ws + close if empty_ok else None
        inner = nonempty + ws
        if empty_ok:
            inner = _repeat(inner, 0, 1)
        return open_ + ws + inner + close

    def convert_or_any(self, parts: list) -> Optional[str]:
        return self.convert(parts) if parts else self.any_value()
