"""Limits and defaults of the JSON Schema -> regex converter.

The converter reads each of them from this module when it uses it, so setting
one here (``monkeypatch.setattr(limits, "ANY_VALUE_MAX_DEPTH", 4)`` in a test)
changes it; :mod:`hf_constrained.json_schema` re-exports their values.
"""

from __future__ import annotations

#: Default whitespace allowed between JSON tokens: at most one space.
WHITESPACE = r"[ ]?"

#: Cap on the regex *text* while it is being built (checked at every subschema),
#: so schemas whose regex grows exponentially are refused fast.
MAX_REGEX_TEXT = 400_000

#: Converted subschemas at least this long become shared definitions
#: (``(?(DEFINE)(?P<dN>...))``, called as ``(?&dN)``) when the plain regex
#: would exceed :data:`MAX_REGEX_TEXT`: one ``$ref`` target used in many places
#: is then written once (the automaton builds it once too).
SHARE_MIN_TEXT = 256

#: Most alternatives that the negated other branches of one ``oneOf`` branch
#: may distribute into (each is converted): beyond it the oneOf is refused
#: rather than converted in exponential time.
MAX_NEGATION_ALTERNATIVES = 64

#: Most conversions of (sub)schema conjunctions one schema may need; beyond it
#: the schema is refused instead of taking unbounded time.
MAX_CONVERSIONS = 200_000

#: Maximal container nesting of unconstrained values (``{}``/``true``).
ANY_VALUE_MAX_DEPTH = 2

#: Fraction digits allowed in ``number`` values with an exclusive bound.
NUMBER_FRACTION_DIGITS = 6

# Bounds on ``number`` beyond this magnitude are refused: above it, decimal
# text and binary floats no longer agree on the integers.
_MAX_EXACT_FLOAT_INT = 2**53

#: ``uniqueItems`` is generated only for items with at most this many possible values
#: (an ``enum``/``const``/boolean item schema, distinct items in the schema's order);
#: the regex grows with its square. Other ``uniqueItems`` arrays are refused.
MAX_UNIQUE_VALUES = 64
