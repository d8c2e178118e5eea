"""Construction leaves no cyclic garbage (issue #12, part 23). ``schema_to_regex`` and
``LazyDFA.from_patterns`` pause the cyclic collector; whatever they leave in reference cycles
is freed only by the next collection, which then walks everything allocated meanwhile (1-3 ms
for a Kubernetes-sized schema). Recursive closures (``_array``'s ``rest``, the resource index's
``visit``) are released explicitly, so everything dies by reference counting."""

from __future__ import annotations

import gc

import pytest

from hf_constrained import schema_to_regex
from hf_constrained.automaton import LazyDFA

SCHEMAS = [
    {"type": "array", "items": {"type": "integer"}, "minItems": 1},
    {"type": "array", "prefixItems": [{"type": "string"}, {"type": "boolean"}], "items": False},
    {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "number"}, "maxItems": 3}}},
    {"$id": "https://example.com/root", "type": "object",
     "properties": {"x": {"$ref": "#/$defs/x"}}, "$defs": {"x": {"$anchor": "x", "type": "integer"}}},
]


def _garbage(fn) -> int:
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        fn()
        return gc.collect()
    finally:
        if was:
            gc.enable()


@pytest.mark.parametrize("shared", [True, None])
@pytest.mark.parametrize("schema", SCHEMAS)
def test_schema_to_regex_leaves_no_cycles(schema, shared):
    schema_to_regex(schema, shared=shared)  # per-process caches filled first
    assert _garbage(lambda: schema_to_regex(schema, shared=shared)) == 0


def test_from_patterns_leaves_no_cycles():
    regex = schema_to_regex(SCHEMAS[2], shared=True)
    assert _garbage(lambda: LazyDFA.from_patterns([regex])) == 0
