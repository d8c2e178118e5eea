"""Convert a JSON Schema (Draft 2020-12) into one regular expression.

The produced regular expression describes a set of JSON *documents*: every
string that fully matches it parses with :func:`json.loads` and validates
against the schema (``jsonschema.Draft202012Validator`` with its format
checker).  The converter never guesses: a keyword that it cannot honour
exactly makes it raise :class:`SchemaError`, naming the keyword and its JSON
pointer.

Public API
==========

* :func:`schema_to_regex` -- the converter.
* :class:`SchemaError` -- raised for schemas the converter refuses.
* :func:`choice_regex` -- alternation of literal strings.
* :func:`integer_range_regex` / :func:`decimal_range_regex` -- exact numeric
  ranges; :func:`expanded_size` -- how large the regex would be with its
  counted repetitions unrolled (informational: the automaton keeps counters).
* Building blocks (module constants, all in the regex dialect below):

  - JSON tokens: :data:`INTEGER`, :data:`NUMBER`, :data:`BOOLEAN`,
    :data:`NULL`, :data:`STRING` (a complete JSON string literal, quotes
    included) and :data:`STRING_CHAR` (one character of a string's body);
  - string formats (the *content* of the string, without the quotes):
    :data:`DATE`, :data:`TIME`, :data:`DATE_TIME`, :data:`UUID`,
    :data:`EMAIL`, :data:`IPV4`, :data:`URI` (more in :mod:`.formats` and
    :data:`FORMATS`).  Use :func:`quoted` to turn one into a JSON string token.

* :func:`suite_table` / ``python -m hf_constrained.json_schema --suite-table
  DIR`` -- markdown table of accepted / refused schemas of a
  JSON-Schema-Test-Suite directory.

Regex dialect
=============

The output only uses: literals; the escapes ``\\.`` ``\\\\`` ``\\"`` ``\\n``
``\\t`` ``\\xHH`` ``\\uXXXX`` (and a backslash before other regex
metacharacters); character classes ``[...]`` / ``[^...]`` with ranges;
quantifiers ``* + ? {m} {m,} {m,n}``; non-capturing groups ``(?:...)`` and
``|``.  No anchors, lookaround, backreferences, inline flags, ``\\d`` or
``\\w``.  Characters above U+FFFF (rare; only from user ``pattern``/``const``
text) are written as raw characters.  It is meant for ``re.fullmatch``.

What is generated (the "representable" instances)
=================================================

The language of the regex is a *subset* of the valid instances:

* Whitespace between tokens matches the ``whitespace`` pattern (default
  :data:`WHITESPACE` = ``[ ]?``: at most one space); none before or after the
  document.
* Object members come in schema order: declared ``properties`` in order of
  appearance (across ``allOf``/``$ref`` parts, in order), then names that are
  ``required`` but not declared, then -- if emitted at all -- extra members.
  Optional properties may be omitted.
* Extra (undeclared) members are emitted only when the object is explicitly
  open (``additionalProperties`` is ``true`` or a schema) or is free-form
  (no ``properties`` and no ``additionalProperties``).  An object that
  declares ``properties`` but says nothing about ``additionalProperties`` is
  generated *closed*.  Extra keys never equal a declared name (or, when no
  name is declared, they satisfy ``propertyNames``); extra values satisfy
  ``additionalProperties`` and *every* ``patternProperties`` schema, which is
  valid whichever patterns the key matches.
* Numbers: ``integer`` values are written without fraction or exponent;
  ``number`` values use :data:`NUMBER` when unbounded, and when bounded they
  have no exponent (and, with exclusive bounds, at most
  :data:`NUMBER_FRACTION_DIGITS` fractional digits, so that float rounding
  cannot land on the excluded bound).  ``-0`` is never generated for bounded
  numbers.
* Strings: raw characters except ``"``, ``\\``, controls and surrogates, plus
  JSON escapes (``\\uXXXX`` escapes never denote surrogates, so one escape is
  one character and ``minLength``/``maxLength`` count exactly).  Strings
  constrained by ``pattern`` use the canonical ``json.dumps`` escapes only.
* ``pattern`` has Python ``re`` search semantics (as in ``jsonschema``):
  ``^``/``$`` may stand anywhere (``(^a$)|b``, ``(x|$)``) and hold only at the
  string's start/end (ECMA-262; Python's ``$`` also accepts a final newline,
  which is not generated); an unanchored side allows any text.
  ``minLength``/``maxLength`` next to ``pattern``/``format`` restrict the
  pattern's tree exactly (:mod:`.strings`), or are refused with the reason
  when the exact result would be too large; only for a ``format`` is a
  documented subset used then (each variable part gets a share of the
  budget).  ``pattern`` next to ``format`` is intersected when the pattern
  is literal prefixes/suffixes around ``.*``, finite, or ``.*c.*`` with
  ``c`` in every string of the format.  ``\\d``,
  ``\\w``, ``\\s`` generate ASCII only, and their negations (``\\D``,
  ``[^\\d]``...) generate ASCII only too (Python's classes are Unicode-wide).
  Lookaround, backreferences, ``\\b``, inline flags, possessive quantifiers
  and atomic groups are refused.
* Unconstrained values (``{}``, ``true``, missing ``items``...) are arbitrary
  JSON values nested at most ``min(max_recursion_depth,``
  :data:`ANY_VALUE_MAX_DEPTH` ``)`` containers deep.
* ``const``/``enum`` values are written as compact JSON in their given key
  order; an integral number may also be written as ``1`` / ``1.0``.

Drafts and annotations
======================

The schema is first rewritten into 2020-12 form by :mod:`.drafts` (``$schema``
selects the draft; without it the reading is lenient).  Keywords that the
draft does not define are annotations and are ignored (``strict=True``
refuses them); ``not``, overlapping ``oneOf`` and ``if``/``then``/``else``
go through :mod:`.negation` (sound, not complete); ``dependentRequired`` /
``dependentSchemas`` and ``minProperties: 1`` are exact.  Where this
docstring says a keyword is refused below, those paragraphs win.

Supported keywords
==================

``type``, ``enum``, ``const``, ``properties``, ``required``,
``additionalProperties``, ``patternProperties``, ``propertyNames``,
``unevaluatedProperties`` / ``unevaluatedItems`` (conservatively: members
or items that the keyword's own subtree does not evaluate must satisfy it),
``maxProperties`` (free-form objects), ``items``, ``prefixItems``,
``minItems``, ``maxItems``, ``minLength``, ``maxLength``, ``pattern``,
``format`` (date, time, date-time, uuid, email, idn-email, hostname,
idn-hostname, ipv4, ipv6, uri, uri-reference, iri, iri-reference,
uri-template, json-pointer, relative-json-pointer, duration, regex: every
format jsonschema's checkers assert; see :mod:`.formats` for the subsets),
``minimum``,
``maximum``, ``exclusiveMinimum``, ``exclusiveMaximum``, ``multipleOf`` (see
:mod:`.numbers`: exact for integral steps dividing a power of ten, the binary
subset for decimal steps, enumerated otherwise when bounded), ``anyOf``,
``oneOf`` (each branch conjoined, per overlapping sibling, with a *separator* --
a required property whose values differ or that the sibling forbids, or an
incompatible anchored ``pattern`` prefix -- or else the sibling's negation;
a branch that cannot be separated is left out), ``allOf`` (merged exactly),
``not`` (boolean or ``type``-only), ``if`` with a boolean condition,
``$ref`` (local: ``#``, ``#/json/pointer``, ``#anchor``), ``$defs``,
``definitions`` and boolean schemas.  Annotations are ignored:
``title``, ``description``, ``default``, ``examples``, ``$schema``, ``$id``,
``$comment``, ``deprecated``, ``readOnly``, ``writeOnly``, ``$anchor``,
``$dynamicAnchor`` and OpenAPI's ``discriminator`` (pydantic emits it next to
``oneOf``).  Keywords that only apply to a JSON type that the schema excludes
(``uniqueItems`` under ``"type": "string"``...) are ignored, as are
trivially satisfied ones (``uniqueItems: false``, ``minProperties: 0``,
``contains`` with ``minContains: 0``...).

When ``enum`` or ``const`` is present, the finite set of values is filtered
with ``jsonschema`` against the complete schema, so *every* sibling keyword is
honoured exactly. ``uniqueItems`` over items with few possible values (an ``enum``,
``const`` or boolean item schema, at most ``MAX_UNIQUE_VALUES``) generates each value at
most once, in the schema's order: every valid set of items, in one order.

Everything else (``uniqueItems`` over other items, ``contains``, ``dependentRequired``,
``dependentSchemas``, ``minProperties``/``maxProperties`` when not trivial,
``if``/``then``/``else``, general ``not``, ``$dynamicRef``,
remote ``$ref``, an embedded ``$id`` resource containing ``$ref``, unknown
formats and keywords...) raises :class:`SchemaError`.  So do ``number``
bounds beyond 2**53 and exclusive ``number`` bounds so large that float
rounding could reach them (``integer`` bounds are always exact), several
different ``pattern`` on one string, ``pattern``/``format`` combinations
and length bounds beyond what is described above, a ``oneOf`` none of
whose branches can be separated from its siblings (where it is required),
``multipleOf`` steps without digit structure on unbounded values (see
:mod:`.numbers`), and schemas that admit no value.

Size limits: bounds such as ``maxLength: 100000`` or ``maxItems: 5000`` stay
counted repetitions (the automaton tracks them with counters, so they cost
nothing up front); the regex *text* may hold at most :data:`MAX_REGEX_TEXT`
characters (deeply nested containers multiply it); recursive ``$ref`` are
expanded ``max_recursion_depth`` times along one path, beyond which the
recursive alternative is simply not offered (an optional property is left
out, an array stops growing, an ``anyOf`` branch is dropped...).  If nothing
is left, :class:`SchemaError` is raised.

Layout
======

This package is the public face; the work is done, along the flow, by:

* :mod:`.drafts` (any draft -> 2020-12, with :mod:`.refs` and
  :mod:`.metaschema`), then :mod:`.schemas` (keyword tables, JSON pointers,
  refusals, walking, loading, the conjuncts the converter works on);
* :mod:`.converter` (``_Converter``: entry point, shared definitions, ``$ref``
  resolution, flattening) with its concerns as mixins: :mod:`.logic`
  (``enum``/``const``, ``dependent*``, ``anyOf``/``oneOf``, negation, via
  :mod:`.negation`), :mod:`.values` (literals, free-form values),
  :mod:`.typed` (types, numbers, strings) and :mod:`.containers` (arrays,
  objects, with :mod:`.keys`);
* regex text: :mod:`.limits`, :mod:`.tokens` (JSON tokens, formats; more in
  :mod:`.formats`), :mod:`.regex_text`, :mod:`.charsets`, :mod:`.patterns`
  (``pattern``/``whitespace`` trees; lengths in :mod:`.strings` and
  :mod:`.string_formats`), :mod:`.ranges` (integer/decimal ranges) and
  :mod:`.numbers` (``multipleOf``);
* :mod:`.recursive` (``max_recursion_depth=None``: rules of a grammar) and
  :mod:`.suite` (the test-suite table and the command line).
"""

from __future__ import annotations

import sys
import types
from decimal import Decimal
from typing import Any, Optional

from .._gc import gc_paused
from ..errors import SchemaError, nested_too_deeply
from ..regex_parser import parse as parse_regex
# the submodules, and the names that tests, recursive.py and the examples below import from here
from . import (charsets, containers, converter, keys, limits, logic, memo, patterns, ranges, regex_text,
               schemas, suite, tokens, typed, values)
from .charsets import _MAX_CP, _class, _encode_charset
from .converter import _Converter, _TextLimit
from .drafts import _canonical, canonical, check_metaschema, detect_draft
from .keys import _join_members, _key_excluding
from .limits import (ANY_VALUE_MAX_DEPTH, MAX_CONVERSIONS, MAX_NEGATION_ALTERNATIVES, MAX_REGEX_TEXT,
                     MAX_UNIQUE_VALUES, NUMBER_FRACTION_DIGITS, SHARE_MIN_TEXT, WHITESPACE)
from .patterns import _emit, _length_range, _whitespace_regex, expanded_size
from .ranges import _nonneg_int_range, _same_length, decimal_range_regex, integer_range_regex
from .regex_text import _alt, _char, _json_text, _lit, _repeat, choice_regex, quoted
from .schemas import _ANNOTATIONS, _join_uri, _literal_prefix, _load, _Part
from .suite import main, suite_table
from .tokens import (_FORMAT_LENGTHS, BOOLEAN, DATE, DATE_TIME, EMAIL, FORMATS, HOSTNAME, INTEGER, IPV4,
                     NULL, NUMBER, STRING, STRING_CHAR, TIME, URI, UUID)

__all__ = [
    "ANY_VALUE_MAX_DEPTH",
    "decimal_range_regex",
    "expanded_size",
    "integer_range_regex",
    "BOOLEAN",
    "DATE",
    "DATE_TIME",
    "EMAIL",
    "FORMATS",
    "HOSTNAME",
    "INTEGER",
    "IPV4",
    "MAX_CONVERSIONS",
    "MAX_NEGATION_ALTERNATIVES",
    "MAX_REGEX_TEXT",
    "MAX_UNIQUE_VALUES",
    "SHARE_MIN_TEXT",
    "NULL",
    "NUMBER",
    "NUMBER_FRACTION_DIGITS",
    "STRING",
    "STRING_CHAR",
    "TIME",
    "URI",
    "UUID",
    "WHITESPACE",
    "SchemaError",
    "choice_regex",
    "quoted",
    "schema_to_regex",
    "suite_table",
]


# ---------------------------------------------------------------------------
# Public entry point
# ---------------------------------------------------------------------------


def schema_to_regex(schema: Any, *, whitespace: Optional[str] = None,
                    max_recursion_depth: int = 3, strict: bool = False,
                    shared: Optional[bool] = None) -> str:
    """Convert a JSON Schema into a regex whose matches all validate.

    :param schema: a dict or bool (the schema), a JSON string, a pydantic
        model class (its ``model_json_schema()`` is used), a pydantic ``TypeAdapter`` or a
        pydantic dataclass (its ``json_schema()``).
    :param whitespace: regex for the whitespace allowed between JSON tokens;
        it may only match JSON whitespace (space, ``\\t``, ``\\n``,
        ``\\r``).  Default :data:`WHITESPACE` (``[ ]?``: none or one
        space).  Use ``""`` for strictly compact output.
    :param max_recursion_depth: how many times one ``$ref`` target may be
        active along a path (>= 1).  Deeper recursive alternatives are not
        offered.
    :param strict: refuse keywords (and ``format`` values) that the
        schema's draft does not define, instead of ignoring them as
        annotations (see :mod:`hf_constrained.json_schema.drafts`).
    :param shared: write every converted subschema of at least
        :data:`SHARE_MIN_TEXT` characters once, as a definition of a leading
        ``(?(DEFINE)(?P<d0>...)...)`` group, called as ``(?&d0)`` where it is
        used.  That syntax is the ``regex`` module's (and PCRE's); this
        package's engine reads it and builds each definition once, but
        Python's ``re`` does not.  ``None`` (default): only when the plain
        regex would exceed :data:`MAX_REGEX_TEXT` (large schemas that use one
        ``$ref`` in many places); ``False``: never (such schemas are refused).
    :raises SchemaError: the schema uses something that cannot be honoured
        exactly (the message names the keyword and its JSON pointer), is
        invalid, or admits no generatable value.

    >>> schema_to_regex({"type": "integer", "minimum": 0, "maximum": 12})
    '(?:[0-9]|1[0-2])'
    >>> schema_to_regex({"type": "object", "properties": {"a": {"type": "boolean"}},
    ...                  "required": ["a"]}, whitespace="")
    '\\\\{"a":(?:true|false)\\\\}'
    >>> schema_to_regex({"enum": ["red", "green", 1]})
    '(?:"red"|"green"|(?:1|1\\\\.0))'
    >>> point = {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}}
    >>> line = {"type": "array", "items": point}
    >>> big = schema_to_regex({"type": "object", "properties": {"a": line, "b": line}}, shared=True)
    >>> plain = schema_to_regex({"type": "object", "properties": {"a": line, "b": line}})
    >>> big.startswith("(?(DEFINE)(?P<d0>"), big.count("(?&d0)") > 1, len(big) < len(plain) / 2
    (True, True, True)
    >>> import regex
    >>> bool(regex.fullmatch(big, '{"a":[{"x":1}],"b":[]}'))
    True
    """
    with nested_too_deeply(SchemaError, "the schema"):
        return _schema_regex(_load(schema), whitespace, max_recursion_depth, strict, shared, _Converter)


def _schema_regex(root: Any, whitespace: Optional[str], max_recursion_depth: int, strict: bool,
                  shared: Optional[bool], converter: type) -> str:
    """:func:`schema_to_regex` of a loaded schema, converted by ``converter`` (``_Converter``, or
    recursive.py's subclass that stops at the first recursive ``$ref`` or free-form value)."""
    ws = _whitespace_regex(limits.WHITESPACE if whitespace is None else whitespace)
    if not isinstance(max_recursion_depth, int) or max_recursion_depth < 1:
        raise ValueError("max_recursion_depth must be an integer >= 1")

    def convert(share: bool) -> str:
        conv = converter(canon, ws, max_recursion_depth, indexed) if converter is _Converter else \
            converter(canon, ws, max_recursion_depth)
        # Draft 04 counts 1.0 as a number but not as an integer: write integral values bare.
        conv.integral_floats = not draft4
        conv.share = share
        return conv.run()

    with gc_paused():  # the rewrite allocates a dict per subschema too: no collection meanwhile
        check_metaschema(root)
        (canon, indexed), draft4 = _canonical(root, strict), detect_draft(root)[0] == "draft4"
        if shared is None:
            try:
                regex = convert(False)
            except _TextLimit:
                regex = convert(True)
        else:
            regex = convert(bool(shared))
        # the rewritten copy dies now, by reference counting: alive when the collector is
        # enabled again, the first collection would walk each of its dicts (issue #12, part 23)
        del canon
    return regex


# The moved modules' examples run with this package's doctests (tests/test_doctests.py
# collects top-level modules only; the examples use the names imported above).
__test__ = {f"{m.__name__.rsplit('.', 1)[1]}.{name}": obj
            for m in (regex_text, charsets, patterns, ranges, schemas, keys, logic, values, typed,
                      containers, converter, memo, suite)
            for name, obj in vars(m).items()
            if getattr(obj, "__module__", None) == m.__name__ and ">>>" in (obj.__doc__ or "")}


class _Package(types.ModuleType):
    """This package's module type: setting a limit on the package
    (``hf_constrained.json_schema.MAX_REGEX_TEXT = 10**6``, or ``monkeypatch.setattr``)
    also sets it in :mod:`.limits`, where the converter reads it when it uses it."""

    def __setattr__(self, name: str, value) -> None:
        if name in _LIMITS:
            setattr(limits, name, value)
        super().__setattr__(name, value)


_LIMITS = frozenset(n for n in vars(limits) if n.isupper() and not n.startswith("_"))
sys.modules[__name__].__class__ = _Package
