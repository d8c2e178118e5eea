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
honoured exactly.

Everything else (``uniqueItems``, ``contains``, ``dependentRequired``,
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
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections import Counter
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache

from .._gc import gc_paused
from ..errors import RegexSyntaxError, SchemaError, UnsupportedRegexError
from .drafts import canonical, check_metaschema, detect_draft
from .formats import FORMAT_LENGTHS, MORE_FORMATS, uri_reference
from .negation import negate
from .numbers import MultipleOfError, multiple_of_regex
from .string_formats import cap_length, intersect
from .strings import (TooComplex, _alphabet, length_range,
                      restrict_length, search_tree)
from ..regex_parser import (
    negate_ranges, normalize_ranges, parse as parse_regex, parse_alternatives,
)
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple, Optional
from urllib.parse import unquote, urldefrag, urljoin

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
# Limits and defaults
# ---------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------
# Building blocks
# ---------------------------------------------------------------------------

#: A JSON integer: ``0``, ``-12``; no leading zeros, no fraction.
INTEGER = r"-?(?:0|[1-9][0-9]*)"

#: A JSON number: integer part, optional fraction, optional exponent.
NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"

#: ``true`` or ``false``.
BOOLEAN = r"(?:true|false)"

#: ``null``.
NULL = r"null"

#: One character of a JSON string body: a raw character (no ``"``, ``\``,
#: control character or lone surrogate), a short escape, or a ``\uXXXX``
#: escape that does not denote a surrogate (so it is exactly one character).
STRING_CHAR = (
    r'(?:[^"\\\x00-\x1f\ud800-\udfff]|\\["\\/bfnrt]'
    r"|\\u(?:[0-9a-cA-Ce-fE-F][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}))"
)

#: A complete JSON string literal, quotes included.
STRING = '"' + STRING_CHAR + '*"'

_YEAR = r"(?:[0-9]{3}[1-9]|[0-9]{2}[1-9]0|[0-9][1-9]00|[1-9]000)"
_LEAP_YEAR = (
    r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])"
    r"|(?:0[48]|[2468][048]|[13579][26])00)"
)
_MONTH_DAY = (
    r"(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    r"|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    r"|02-(?:0[1-9]|1[0-9]|2[0-8]))"
)

#: RFC 3339 ``full-date``: a real calendar date, years 0001-9999, leap years
#: exact (``2024-02-29`` but not ``2023-02-29``).  String content only.
DATE = rf"(?:{_YEAR}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)"

#: RFC 3339 ``full-time``: ``HH:MM:SS``, optional fraction (1-6 digits),
#: mandatory offset ``Z`` (or ``z``, as RFC 3339 allows) or ``+HH:MM``/``-HH:MM``.
#: No leap seconds.
TIME = (
    r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?"
    r"(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
)

#: RFC 3339 ``date-time``: :data:`DATE` ``T`` (or ``t``) :data:`TIME`.
DATE_TIME = DATE + "[Tt]" + TIME

#: RFC 4122 textual UUID (any version, either case).
UUID = (
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}"
    r"-[0-9a-fA-F]{12}"
)

_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = rf"{_LABEL}(?:\.{_LABEL})*"

#: A conservative e-mail address: dot-atom local part of ``[A-Za-z0-9_+-]``,
#: ``@``, a DNS name with at least two labels and an alphabetic TLD.
EMAIL = rf"[A-Za-z0-9_+-]+(?:\.[A-Za-z0-9_+-]+)*@(?:{_LABEL}\.)+[A-Za-z]{{2,63}}"

_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"

#: Dotted-quad IPv4 address without leading zeros.
IPV4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}"

_PCHAR = r"(?:[A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2})"

#: A conservative absolute RFC 3986 URI: ``scheme://host[:port][/path]
#: [?query][#fragment]`` with a DNS host name, ``mailto:`` + :data:`EMAIL`, or
#: ``urn:NID:NSS``.
URI = (
    rf"(?:[A-Za-z][A-Za-z0-9+.-]*://{_HOSTNAME}(?::[0-9]{{1,5}})?"
    rf"(?:/{_PCHAR}*)*(?:\?(?:{_PCHAR}|[/?])*)?(?:#(?:{_PCHAR}|[/?])*)?"
    rf"|mailto:{EMAIL}|urn:[A-Za-z0-9][A-Za-z0-9-]{{0,31}}:{_PCHAR}(?:{_PCHAR}|/)*)"
)

_SHORT_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,18}[A-Za-z0-9])?"

#: A DNS host name, as a subset that every checker accepts (``fqdn``'s
#: included): 2 to 6 labels of at most 20 characters, an alphabetic top-level
#: label, so never more than 125 characters.
HOSTNAME = rf"(?:{_SHORT_LABEL}\.){{1,5}}[A-Za-z]{{2,20}}"

#: Supported ``format`` values -> content regex.
FORMATS = {
    "hostname": HOSTNAME,
    "date": DATE,
    "time": TIME,
    "date-time": DATE_TIME,
    "uuid": UUID,
    "email": EMAIL,
    "ipv4": IPV4,
    "uri": URI,
    "uri-reference": uri_reference(URI),
    "iri": URI,  # every URI is an IRI
    "iri-reference": uri_reference(URI),
    "idn-email": EMAIL,
    **MORE_FORMATS,
}

# (shortest, longest) content length of each format (None: unbounded).
_FORMAT_LENGTHS = {
    "date": (10, 10),
    "time": (9, 21),
    "date-time": (20, 32),
    "uuid": (36, 36),
    "email": (6, None),
    "ipv4": (7, 15),
    "uri": (5, None),
    "hostname": (4, 125),
    **FORMAT_LENGTHS,
}


def quoted(content: str) -> str:
    """Wrap a string-content regex into a JSON string token.

    >>> quoted(UUID).startswith('"[0-9a-fA-F]{8}')
    True
    """
    return '"' + content + '"'


# ---------------------------------------------------------------------------
# Small regex construction helpers
# ---------------------------------------------------------------------------

_META = frozenset(".^$*+?{}[]\\|()")
_CLASS_META = frozenset("\\]^-[")
_MAX_CP = 0x10FFFF


def _char(cp: int, meta: frozenset = _META) -> str:
    """Regex text for the single code point ``cp``.

    >>> _char(ord(".")), _char(10), _char(0xe9)
    ('\\\\.', '\\\\x0a', '\\\\xe9')
    """
    ch = chr(cp)
    if ch in meta:
        return "\\" + ch
    if 0x20 <= cp < 0x7F:
        return ch
    if cp < 0x100:
        return f"\\x{cp:02x}"
    if cp < 0x10000:
        return f"\\u{cp:04x}"
    return ch


def _lit(text: str) -> str:
    """Escape ``text`` so that it matches itself (like ``re.escape``).

    >>> _lit('a.b"c')
    'a\\\\.b"c'
    """
    return "".join(_char(ord(c)) for c in text)


_GROUP_TOKENS = re.compile(r"\\.|\[\^?\]?(?:[^\\\]]|\\.)*\]|[()\[\\]", re.S)


def _atom_end(r: str, i: int) -> int:
    """Index just after the regex atom starting at ``r[i]``."""
    c = r[i]
    if c == "\\":
        nxt = r[i + 1]
        return i + {"x": 4, "u": 6}.get(nxt, 2)
    if c == "[":
        j = i + 1
        if r[j] == "^":
            j += 1
        if r[j] == "]":
            j += 1
        while r[j] != "]":
            j += 2 if r[j] == "\\" else 1
        return j + 1
    if c == "(":
        # the tokens that matter, in order (escapes and classes skipped whole); a
        # lone "[" or "\\" is an unterminated class or escape: r[j] ran off the end
        depth = 0
        for m in _GROUP_TOKENS.finditer(r, i):
            t = m.group()
            if t == "(":
                depth += 1
            elif t == ")":
                depth -= 1
                if depth == 0:
                    return m.end()
            elif t == "[" or t == "\\":
                break
        raise IndexError("string index out of range")  # unbalanced, as r[j] would
    return i + 1


def _is_atom(r: str) -> bool:
    """True if ``r`` is one atom (char, escape, class or group)."""
    if not r or (r[0] == "(" and r[-1] != ")"):
        return False  # a group ends with ")": no need to scan it
    return _atom_end(r, 0) == len(r)


def _group(r: str) -> str:
    """``r`` as a single atom, adding ``(?:...)`` when needed."""
    return r if _is_atom(r) else f"(?:{r})"


def _repeat(r: str, lo: int, hi: Optional[int]) -> str:
    """``r`` repeated ``lo`` to ``hi`` (None: unbounded) times.

    >>> _repeat("a", 0, None), _repeat("ab", 1, 1), _repeat("a", 2, 5)
    ('a*', 'ab', 'a{2,5}')
    """
    if hi is not None and hi == 0 or r == "":
        return ""
    if hi == 1 and lo == 1:
        return r
    atom = _group(r)
    if hi is None:
        q = {0: "*", 1: "+"}.get(lo, f"{{{lo},}}")
    elif lo == hi:
        q = f"{{{lo}}}"
    elif (lo, hi) == (0, 1):
        q = "?"
    else:
        q = f"{{{lo},{hi}}}"
    return atom + q


def _alt(alternatives) -> Optional[str]:
    """Alternation of the non-None ``alternatives``; None if there is none.

    The result never has a top-level ``|``, so it can be concatenated.

    >>> _alt(["a", "b", None, "a"]), _alt(["", "ab"]), _alt([None])
    ('(?:a|b)', '(?:ab)?', None)
    """
    seen = list(dict.fromkeys(a for a in alternatives if a is not None))  # O(n), order kept
    if not seen:
        return None
    rest = [a for a in seen if a != ""]
    if not rest:
        return ""
    if len(rest) == 1:
        return _repeat(rest[0], 0, 1) if "" in seen else rest[0]
    body = "(?:" + "|".join(rest) + ")"  # one atom already: no need to scan it again
    return body + "?" if "" in seen else body


def _concat(*pieces: Optional[str]) -> Optional[str]:
    """Concatenate regex pieces; None (empty language) absorbs."""
    if any(p is None for p in pieces):
        return None
    return "".join(pieces)


def choice_regex(choices: list[str]) -> str:
    """Alternation matching exactly the given literal strings.

    Each string is escaped like :func:`re.escape` (only regex metacharacters
    and non-printable characters are escaped).

    >>> choice_regex(["yes", "no", "a+b"])
    '(?:yes|no|a\\\\+b)'
    >>> import re; bool(re.fullmatch(choice_regex(["x.y"]), "xzy"))
    False
    """
    choices = list(choices)
    if not choices:
        raise ValueError("choice_regex() needs at least one choice")
    return _alt([_lit(c) for c in choices])


# ---------------------------------------------------------------------------
# Character sets (sorted lists of inclusive code point intervals)
# ---------------------------------------------------------------------------

Intervals = tuple  # tuple[tuple[int, int], ...]


# Sorting/merging is regex_parser.normalize_ranges (which also drops
# surrogates); the complement here spans *all* code points, surrogates
# included, as the text of a negated class ``[^...]`` does.


def _complement(iv: Intervals) -> Intervals:
    out, nxt = [], 0
    for a, b in iv:
        if a > nxt:
            out.append((nxt, a - 1))
        nxt = b + 1
    if nxt <= _MAX_CP:
        out.append((nxt, _MAX_CP))
    return tuple(out)


def _subtract(a: Intervals, b: Intervals) -> Intervals:
    return _intersect(a, _complement(b))


def _intersect(a: Intervals, b: Intervals) -> Intervals:
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def _class(iv: Intervals) -> Optional[str]:
    """A character class (or single char) for the non-empty set ``iv``.

    >>> _class(((48, 57),)), _class(((97, 97),)), _class(((0, 0x21), (0x23, _MAX_CP)))
    ('[0-9]', 'a', '[^"]')
    """
    if not iv:
        return None
    if len(iv) == 1 and iv[0][0] == iv[0][1]:
        return _char(iv[0][0])

    def body(ivs: Intervals) -> str:
        parts = []
        for a, b in ivs:
            if a == b:
                parts.append(_char(a, _CLASS_META))
            elif b == a + 1:
                parts.append(_char(a, _CLASS_META) + _char(b, _CLASS_META))
            else:
                parts.append(_char(a, _CLASS_META) + "-" + _char(b, _CLASS_META))
        return "".join(parts)

    pos = "[" + body(iv) + "]"
    comp = _complement(iv)
    if comp:
        neg = "[^" + body(comp) + "]"
        if len(neg) < len(pos) or iv[-1][1] > 0xFFFF >= comp[-1][1]:
            return neg
    return pos


_ALL: Intervals = ((0, _MAX_CP),)
_JSON_SPECIAL: Intervals = ((0, 0x1F), (0x22, 0x22), (0x5C, 0x5C))
_SHORT_ESCAPES = {0x22: '\\\\"', 0x5C: "\\\\\\\\", 0x08: "\\\\b", 0x0C: "\\\\f",
                  0x0A: "\\\\n", 0x0D: "\\\\r", 0x09: "\\\\t"}


def _encode_charset(iv: Intervals) -> Optional[str]:
    """Regex for the canonical JSON encoding (``json.dumps``) of one
    character of ``iv`` inside a string literal.  Surrogates are dropped.

    >>> _encode_charset(((0x0A, 0x0A), (0x61, 0x62)))
    '(?:[ab]|\\\\\\\\n)'
    """
    plain = normalize_ranges(_subtract(iv, _JSON_SPECIAL))  # no surrogates
    alts = [_class(plain)] if plain else []
    special = _intersect(iv, _JSON_SPECIAL)
    low: list[int] = []
    for a, b in special:
        for cp in range(a, b + 1):
            if cp in _SHORT_ESCAPES:
                alts.append(_SHORT_ESCAPES[cp])
            else:
                low.append(cp)
    for hi_digit in (0, 1):
        digits = [cp & 0xF for cp in low if cp >> 4 == hi_digit]
        if digits:
            cls = _class(normalize_ranges((d, d) for d in (ord(f"{x:x}") for x in digits)))
            alts.append(f"\\\\u00{hi_digit}{cls}")
    return _alt(alts)


#: Any character, canonically encoded (for pattern translation and keys).
_CANON_CHAR = _encode_charset(_ALL)


# ---------------------------------------------------------------------------
# Regexes accepted in ``pattern`` and ``whitespace`` (parsed by regex_parser)
# ---------------------------------------------------------------------------


# Python's Unicode-aware shorthand classes, as (subset, superset) pairs: a
# class uses the subset, a negated class removes the superset, so the
# resulting set is always contained in what Python's ``re`` would match.
_NON_ASCII: Intervals = ((0x80, _MAX_CP),)
_DIGIT_LO: Intervals = ((0x30, 0x39),)
_WORD_LO: Intervals = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
_SPACE_LO: Intervals = ((0x09, 0x0D), (0x20, 0x20))
_SPACE_HI: Intervals = ((0x09, 0x0D), (0x1C, 0x20)) + _NON_ASCII
_CLASSES = {
    "d": (_DIGIT_LO, _DIGIT_LO + _NON_ASCII),
    "w": (_WORD_LO, _WORD_LO + _NON_ASCII),
    "s": (_SPACE_LO, _SPACE_HI),
}
for _k in "dws":
    _lo, _hi = _CLASSES[_k]
    _CLASSES[_k.upper()] = (negate_ranges(_hi), negate_ranges(_lo))


def _parse_regex(pattern: str, anchor_nodes: bool = False) -> list:
    """Top-level alternatives ``(tree, anchored_start, anchored_end)`` of a
    user regex, shorthand classes approximated by ASCII (see ``_CLASSES``);
    ``anchor_nodes``: other anchors become tree nodes (see regex_parser).

    Raises :class:`RegexSyntaxError` / :class:`UnsupportedRegexError`.
    """
    alternatives = parse_alternatives(pattern, _CLASSES, anchor_nodes=anchor_nodes)
    # Escape pairs, scanned left to right (only a comment can fool this, and
    # then only into refusing).
    for m in re.finditer(r"\\(.)", pattern, re.S):
        if m.group(1) in "AZN":
            raise UnsupportedRegexError(
                f"escape '\\{m.group(1)}'", pattern, m.start(),
                "use ^ or $ for anchors, the character itself for \\N{...}")
    return alternatives


#: (min, max) number of characters matched by a tree (max None: unbounded)
_length_range = length_range


def _emit(node, charset: Callable[[Intervals], Optional[str]]) -> Optional[str]:
    """Regex text (None: empty language) for a regex_parser tree."""
    kind = node[0]
    if kind == "cls":
        return charset(node[1]) if node[1] else None
    if kind == "cat":
        return _concat(*[_emit(n, charset) for n in node[1]])
    if kind == "alt":
        return _alt([_emit(n, charset) for n in node[1]])
    inner = _emit(node[1], charset)
    lo, hi = node[2], node[3]
    if inner is None:
        return "" if lo == 0 else None
    return _repeat(inner, lo, hi)


def _node_size(node, defs: Optional[dict] = None) -> int:
    kind = node[0]
    if kind == "cls":
        return 1
    if kind == "def":
        sizes: dict = {}
        for name, body in node[1]:
            sizes[name] = _node_size(body, sizes)
        return _node_size(node[2], sizes)
    if kind == "ref":
        return defs[node[1]]
    if kind in ("cat", "alt"):
        return sum(_node_size(n, defs) for n in node[1])
    copies = node[2] + 1 if node[3] is None else max(node[3], 1)
    return _node_size(node[1], defs) * copies


@lru_cache(maxsize=4096)
def expanded_size(regex: str) -> int:
    """Character positions of ``regex`` with counted repetitions expanded:
    what an engine that unrolls ``x{m,n}`` into copies would have to build.

    >>> expanded_size("a[bc]{3}"), expanded_size("(?:ab|c)*"), expanded_size("(?(DEFINE)(?P<d>ab))(?&d){2}")
    (4, 3, 4)
    """
    return _node_size(parse_regex(regex))


def _translate_pattern(pattern: str):
    """Translate a JSON Schema ``pattern`` (searched, Python ``re``
    semantics) into a regex over canonical JSON string *content*.

    Returns ``(regex or None, min_len, max_len)``.
    """
    out, ranges = [], []
    anywhere = _repeat(_CANON_CHAR, 0, None)
    for tree, start, end in _parse_regex(pattern):
        r = _emit(tree, _encode_charset)
        if r is None:
            continue
        lo, hi = _length_range(tree)
        if not start:
            r, hi = anywhere + r, None
        if not end:
            r, hi = r + anywhere, None
        out.append(r)
        ranges.append((lo, hi))
    if not out:
        return None, 0, 0
    his = [b for _, b in ranges]
    return _alt(out), min(a for a, _ in ranges), None if None in his else max(his)


def _capped(tree, lo: int, hi: int):
    """A format's documented subset under ``maxLength`` (see cap_length)."""
    try:
        tree = restrict_length(cap_length(tree, hi), lo, hi)
    except TooComplex:
        return None
    return None if _emit(tree, _encode_charset) is None else tree


def _format_tree(fmt: str):
    """The tree of ``FORMATS[fmt]`` over decoded characters, or None when its
    text uses characters that JSON escapes (then text and content differ)."""
    try:
        tree = parse_regex(FORMATS[fmt])
    except (RegexSyntaxError, UnsupportedRegexError):
        return None
    used: list = []
    _alphabet(tree, used)
    return None if _intersect(normalize_ranges(used), _JSON_SPECIAL) else tree


_JSON_WS: Intervals = ((9, 10), (13, 13), (32, 32))


def _whitespace_regex(ws: str) -> str:
    """Validate/normalise the ``whitespace`` argument into the dialect."""
    def fail(why: str):
        raise ValueError(f"invalid whitespace pattern {ws!r}: {why}") from None

    def charset(iv: Intervals) -> Optional[str]:
        if _subtract(iv, _JSON_WS):
            fail("it may only match JSON whitespace (space, \\t, \\n, \\r); "
                 "note \\s is wider")
        return _class(iv)

    try:
        alternatives = _parse_regex(ws)
    except (RegexSyntaxError, UnsupportedRegexError) as exc:
        fail(str(exc))
    if any(start or end for _, start, end in alternatives):
        fail("anchors are not allowed")
    trees = tuple(tree for tree, _, _ in alternatives)
    r = _emit(trees[0] if len(trees) == 1 else ("alt", trees), charset)
    if r is None:
        raise ValueError(f"whitespace pattern {ws!r} matches nothing")
    return _group(r) if r and "|" in r and not _is_atom(r) else r

# ---------------------------------------------------------------------------
# Integer and decimal ranges
# ---------------------------------------------------------------------------


def _digits(a: int, b: int) -> str:
    """Class for one digit in ``[a, b]``."""
    if a == b:
        return str(a)
    if b == a + 1:
        return f"[{a}{b}]"
    return f"[{a}-{b}]"


def _same_length(x: str, y: str) -> str:
    """Regex for the digit strings of ``len(x)`` between ``x`` and ``y``.

    >>> _same_length("13", "47")
    '(?:1[3-9]|[23][0-9]|4[0-7])'
    """
    if x == y:
        return x
    i = 0
    while x[i] == y[i]:
        i += 1
    prefix, x0, y0 = x[:i], int(x[i]), int(y[i])
    xr, yr = x[i + 1:], y[i + 1:]
    k = len(xr)
    alts = []
    lo_digit, hi_digit = x0, y0
    if xr != "0" * k:
        alts.append(str(x0) + _same_length(xr, "9" * k))
        lo_digit = x0 + 1
    if yr != "9" * k:
        hi_digit = y0 - 1
    if lo_digit <= hi_digit:
        alts.append(_digits(lo_digit, hi_digit) + _repeat("[0-9]", k, k))
    if yr != "9" * k:
        alts.append(str(y0) + _same_length("0" * k, yr))
    return prefix + _alt(alts)


def _nonneg_int_range(a: int, b: Optional[int]) -> Optional[str]:
    """Canonical decimal integers in ``[a, b]`` (``b`` None: unbounded).

    >>> _nonneg_int_range(0, 12)
    '(?:[0-9]|1[0-2])'
    >>> _nonneg_int_range(5, None)
    '(?:[5-9]|[1-9][0-9]+)'
    """
    if b is not None and a > b:
        return None
    la = len(str(a))
    alts = []
    if b is None:
        alts.append(_same_length(str(a), "9" * la))
        alts.append("[1-9]" + _repeat("[0-9]", la, None))
    else:
        lb = len(str(b))
        for n in range(la, lb + 1):
            lo = a if n == la else 10 ** (n - 1)
            hi = b if n == lb else 10**n - 1
            alts.append(_same_length(str(lo), str(hi)))
    return _alt(alts)


def integer_range_regex(lo: Optional[int], hi: Optional[int]) -> Optional[str]:
    """Regex matching exactly the canonical decimal integers in
    ``[lo, hi]`` (None: unbounded on that side); None if the range is empty.

    >>> integer_range_regex(-3, 12)
    '(?:(?:[0-9]|1[0-2])|-[1-3])'
    >>> import re; [n for n in range(-50, 50) if re.fullmatch(integer_range_regex(-37, 4), str(n))] == list(range(-37, 5))
    True
    """
    if lo is not None and hi is not None and lo > hi:
        return None
    alts = []
    if hi is None or hi >= 0:
        alts.append(_nonneg_int_range(0 if lo is None else max(lo, 0), hi))
    if lo is None or lo < 0:
        a = 1 if hi is None or hi >= 0 else -hi
        r = _nonneg_int_range(a, None if lo is None else -lo)
        if r is not None:
            alts.append("-" + r)
    return _alt(alts)


_DEAD = "dead"


def _norm_lo(state):
    """Lower fraction bound state: None (satisfied) or (digits, strict)."""
    if state is None or state == _DEAD:
        return state
    digits, strict = state[0].rstrip("0"), state[1]
    if not digits and not strict:
        return None
    return digits, strict


def _norm_hi(state):
    """Upper fraction bound state: None (satisfied), _DEAD or (digits, strict)."""
    if state is None or state == _DEAD:
        return state
    digits, strict = state[0].rstrip("0"), state[1]
    if not digits and strict:
        return _DEAD
    return digits, strict


def _step_lo(state, d: int):
    if state is None:
        return None
    c = state[0]
    c1 = int(c[0]) if c else 0
    if d > c1:
        return None
    if d < c1:
        return _DEAD
    return _norm_lo((c[1:], state[1]))


def _step_hi(state, d: int):
    if state is None:
        return None
    c = state[0]
    c1 = int(c[0]) if c else 0
    if d < c1:
        return None
    if d > c1:
        return _DEAD
    return _norm_hi((c[1:], state[1]))


def _zero_ok(lo, hi) -> bool:
    return lo is None and hi != _DEAD


@lru_cache(maxsize=None)
def _fraction_digits(lo, hi, budget: Optional[int], nonempty: bool) -> Optional[str]:
    """Digit strings ``d`` (length <= budget) with ``0.d`` within the
    bounds ``lo``/``hi`` (normalised states, see _norm_lo/_norm_hi)."""
    if lo == _DEAD or hi == _DEAD:
        return None
    empty = "" if _zero_ok(lo, hi) and not nonempty else None
    if budget == 0:
        return empty
    if budget is None:  # closed forms for the non-shrinking states
        if lo is None and hi is None:
            return "[0-9]+" if nonempty else "[0-9]*"
        if lo == ("", True) and hi is None:
            return "0*[1-9][0-9]*"
        if lo is None and hi == ("", False):
            return "0+" if nonempty else "0*"
        if lo == ("", True) and hi == ("", False):
            return None
    if lo is None and hi is None:
        return _repeat("[0-9]", 1 if nonempty else 0, budget)
    groups: dict = {}
    for d in range(10):
        key = (_step_lo(lo, d), _step_hi(hi, d))
        if _DEAD not in key:
            groups.setdefault(key, []).append(d)
    alts = [empty]
    nxt = None if budget is None else budget - 1
    for (nlo, nhi), ds in groups.items():
        rest = _fraction_digits(nlo, nhi, nxt, False)
        if rest is not None:
            cls = _digits(ds[0], ds[-1]) if ds == list(range(ds[0], ds[-1] + 1)) \
                else "[" + "".join(map(str, ds)) + "]"
            alts.append(cls + rest)
    return _alt(alts)


def _fraction_suffix(lo, hi, budget: Optional[int]) -> Optional[str]:
    """Optional ``.digits`` suffix whose value is within the bounds."""
    alts = []
    if _zero_ok(lo, hi):
        alts.append("")
    ne = _fraction_digits(lo, hi, budget, True)
    if ne is not None:
        alts.append("\\." + ne)
    return _alt(alts)


def _split_decimal(d: Decimal) -> tuple[int, str]:
    """Non-negative decimal -> (integer part, fraction digits)."""
    text = format(d, "f")
    ip, _, fp = text.partition(".")
    return int(ip), fp.rstrip("0")


def _nonneg_decimal_range(lo: Decimal, lo_x: bool, hi: Optional[Decimal],
                          hi_x: bool, budget: Optional[int]) -> Optional[str]:
    """Non-negative decimals (no exponent) between lo and hi."""
    if hi is not None and (lo > hi or (lo == hi and (lo_x or hi_x))):
        return None
    li, lf = _split_decimal(lo)
    lo_state = _norm_lo((lf, lo_x))
    if hi is not None:
        hi_i, hf = _split_decimal(hi)
        hi_state = _norm_hi((hf, hi_x))
        if li == hi_i:
            return _concat(str(li), _fraction_suffix(lo_state, hi_state, budget))
    alts = [_concat(str(li), _fraction_suffix(lo_state, None, budget))]
    mid = _nonneg_int_range(li + 1, None if hi is None else hi_i - 1)
    if mid is not None:
        alts.append(_concat(mid, _fraction_suffix(None, None, budget)))
    if hi is not None:
        alts.append(_concat(str(hi_i), _fraction_suffix(None, hi_state, budget)))
    return _alt(alts)


def decimal_range_regex(lo: Optional[Decimal], lo_x: bool,
                        hi: Optional[Decimal], hi_x: bool,
                        budget: Optional[int] = None) -> Optional[str]:
    """Regex for JSON numbers without exponent in the given range.

    ``lo_x``/``hi_x`` make a bound exclusive; ``budget`` limits the number
    of fraction digits (None: unlimited).  The comparison is exact on the
    decimal text.

    >>> r = decimal_range_regex(Decimal("-1.5"), False, Decimal(2), True)
    >>> import re; [bool(re.fullmatch(r, s)) for s in ["-1.5", "-1.51", "1.999", "2", "2.0"]]
    [True, False, True, False, False]
    """
    alts = []
    if hi is None or hi > 0 or (hi == 0 and not hi_x):
        if lo is None or lo < 0:
            nlo, nlo_x = Decimal(0), False
        else:
            nlo, nlo_x = lo, lo_x
        alts.append(_nonneg_decimal_range(nlo, nlo_x, hi, hi_x, budget))
    if lo is None or lo < 0:
        if hi is None or hi >= 0:
            mlo, mlo_x = Decimal(0), True
        else:
            mlo, mlo_x = -hi, hi_x
        mhi, mhi_x = (None, False) if lo is None else (-lo, lo_x)
        r = _nonneg_decimal_range(mlo, mlo_x, mhi, mhi_x, budget)
        if r is not None:
            alts.append("-" + _group(r))
    return _alt(alts)


# ---------------------------------------------------------------------------
# Keyword tables
# ---------------------------------------------------------------------------

_ANNOTATIONS = frozenset({
    "title", "description", "default", "examples", "$schema", "$id",
    "$comment", "deprecated", "readOnly", "writeOnly", "$anchor",
    "$dynamicAnchor", "discriminator", "$defs", "definitions",
})

_HANDLED = frozenset({
    "type", "enum", "const", "properties", "required", "additionalProperties",
    "patternProperties", "propertyNames", "unevaluatedProperties",
    "unevaluatedItems", "items", "prefixItems", "minItems", "maxItems",
    "minLength", "maxLength", "pattern", "format", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "anyOf", "oneOf", "allOf",
    "$ref", "not", "if", "then", "else",
})

# Keywords the converter cannot enforce in general; they are only accepted
# when the schema excludes the JSON type they apply to, or when trivially
# satisfied (checked by the type converters).
_TYPE_SPECIFIC = {
    "uniqueItems": "array", "contains": "array", "minContains": "array",
    "maxContains": "array",
    "dependentRequired": "object", "dependentSchemas": "object",
    "minProperties": "object", "maxProperties": "object",
    "multipleOf": "number",
    "contentEncoding": "string", "contentMediaType": "string",
    "contentSchema": "string",
}

_ARRAY_KEYWORDS = frozenset({
    "items", "prefixItems", "minItems", "maxItems", "uniqueItems",
    "contains", "minContains", "maxContains", "unevaluatedItems"})
_OBJECT_KEYWORDS = frozenset({
    "properties", "required", "additionalProperties", "patternProperties",
    "propertyNames", "unevaluatedProperties", "minProperties",
    "maxProperties", "dependentRequired", "dependentSchemas"})

_HINTS = {
    "uniqueItems": "the regex cannot force array items to be distinct; "
                   "remove it, or set maxItems to 1",
    "contains": "the regex cannot express 'some item matches'; use "
                "prefixItems to place the required item instead",
    "multipleOf": "remove it, or enumerate the allowed values with enum",
    "minProperties": "make enough properties required instead",
    "maxProperties": "declare the properties and set additionalProperties: "
                     "false instead",
    "dependentRequired": "make the properties unconditionally required or "
                         "split the schema into anyOf alternatives",
    "dependentSchemas": "split the schema into anyOf alternatives",
    "if": "rewrite the condition as anyOf alternatives",
    "not": "only `not` with a boolean or a `type`-only schema is supported; "
           "express the allowed values positively",
    "$dynamicRef": "replace it with a plain local $ref",
    "contentEncoding": "remove it (the regex cannot produce encoded content)",
    "contentMediaType": "remove it (the regex cannot produce encoded content)",
    "contentSchema": "remove it (the regex cannot produce encoded content)",
}
_DEFAULT_HINT = ("remove it or rewrite the schema with supported keywords "
                 "(see the hf_constrained.json_schema module docstring)")


def _ptr(base: str, *tokens: Any) -> str:
    """Append JSON pointer tokens (escaping ``~`` and ``/``)."""
    for t in tokens:
        base += "/" + str(t).replace("~", "~0").replace("/", "~1")
    return base


def _unsupported(keyword: str, pointer: str, why: str = "") -> SchemaError:
    hint = _HINTS.get(keyword, _DEFAULT_HINT)
    why = f" ({why})" if why else ""
    return SchemaError(f"unsupported keyword {keyword!r} at {pointer or '/'}"
                       f"{why}: {hint}")


def _refuse(keyword: str, pointer: str, message: str) -> SchemaError:
    return SchemaError(f"cannot honour keyword {keyword!r} at "
                       f"{pointer or '/'}: {message}")


_SCHEMA_MAP_KEYWORDS = ("properties", "patternProperties", "$defs",
                        "definitions", "dependentSchemas")
_SCHEMA_KEYWORDS = ("additionalProperties", "items", "contains",
                    "propertyNames", "not", "if", "then", "else",
                    "unevaluatedItems", "unevaluatedProperties",
                    "contentSchema")
_SCHEMA_LIST_KEYWORDS = ("allOf", "anyOf", "oneOf", "prefixItems")


def _subschemas(schema: Any, pointer: str) -> Iterator[tuple[Any, str]]:
    """Direct subschemas of ``schema`` with their pointers."""
    if not isinstance(schema, dict):
        return
    for kw in _SCHEMA_MAP_KEYWORDS:
        if isinstance(schema.get(kw), dict):
            for name, sub in schema[kw].items():
                yield sub, _ptr(pointer, kw, name)
    for kw in _SCHEMA_KEYWORDS:
        if kw in schema:
            yield schema[kw], _ptr(pointer, kw)
    for kw in _SCHEMA_LIST_KEYWORDS:
        if isinstance(schema.get(kw), list):
            for i, sub in enumerate(schema[kw]):
                yield sub, _ptr(pointer, kw, i)


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def _join_uri(base: str, ref: str) -> str:
    """``ref`` resolved against ``base`` (also for ``urn:`` bases, which
    :func:`urllib.parse.urljoin` does not join).

    >>> _join_uri("urn:x", "#/a"), _join_uri("http://e.com/a/b.json", "c.json#f")
    ('urn:x#/a', 'http://e.com/a/c.json#f')
    """
    if ref.startswith("#"):
        return urldefrag(base)[0] + ref
    if _SCHEME.match(ref) or not base:
        return ref
    return urljoin(base, ref)


def _walk(schema: Any, pointer: str = "") -> Iterator[tuple[Any, str]]:
    """All subschemas (pre-order, including ``schema`` itself)."""
    yield schema, pointer
    for sub, p in _subschemas(schema, pointer):
        yield from _walk(sub, p)


# ---------------------------------------------------------------------------
# Schema loading
# ---------------------------------------------------------------------------


def _load(schema: Any) -> Any:
    """Accept a dict / bool, a JSON string, or a pydantic model class."""
    if isinstance(schema, (dict, bool)):
        return schema
    if isinstance(schema, (str, bytes)):
        try:
            return json.loads(schema)
        except ValueError as exc:
            raise SchemaError(f"schema string is not valid JSON: {exc}") from None
    method = getattr(schema, "model_json_schema", None)
    if callable(method):
        return method()
    raise TypeError("schema must be a dict, a bool, a JSON string or a "
                    f"pydantic model class, not {type(schema).__name__}")


# ---------------------------------------------------------------------------
# The converter
# ---------------------------------------------------------------------------


def _literal_prefix(pattern: Any) -> Optional[str]:
    """Text every string matching ``pattern`` (``re.search``) starts with, for a
    pattern ``^literal...`` without ``|``; None otherwise.

    >>> _literal_prefix("^https?://"), _literal_prefix("^git://x"), _literal_prefix("a|^b")
    ('http', 'git://x', None)
    """
    if not isinstance(pattern, str) or not pattern.startswith("^") or "|" in pattern:
        return None
    m = re.match(r"[^.^$*+?{}\[\]\\|()]*", pattern[1:])
    text = m.group(0)
    if pattern[1 + len(text):2 + len(text)] in ("*", "+", "?", "{"):
        text = text[:-1]  # the last character is quantified
    return text or None


_TOO_MANY = object()  # a oneOf branch whose negated siblings distribute too far


class _Part(NamedTuple):
    """One conjunct of the schema being converted.

    ``lineage`` identifies where the part came from: a part flattened out of
    part P (through ``$ref``, ``allOf``, ``anyOf``...) has P's lineage as a
    prefix; this is what ``unevaluated*`` needs.
    """

    schema: Any
    ptr: str
    lineage: tuple


_KINDS = ("null", "boolean", "object", "array", "string", "integer", "fraction")


def _type_kinds(t: str) -> set:
    return {"number": {"integer", "fraction"}}.get(t, {t})


def _json_type_kinds(value: Any) -> set:
    """Kinds of a JSON value ("fraction" = non-integral number)."""
    if value is None:
        return {"null"}
    if isinstance(value, bool):
        return {"boolean"}
    if isinstance(value, int):
        return {"integer"}
    if isinstance(value, float):
        return {"integer"} if value.is_integer() else {"fraction"}
    if isinstance(value, str):
        return {"string"}
    if isinstance(value, list):
        return {"array"}
    return {"object"}


class _TextLimit(SchemaError):
    """The regex text outgrew :data:`MAX_REGEX_TEXT` (``schema_to_regex`` retries with shared definitions)."""


class _Converter:
    def __init__(self, root: Any, whitespace: str, max_depth: int):
        self.root = root
        self.ws = whitespace
        self.max_depth = max_depth
        self.ref_counts: Counter = Counter()
        self.cuts: list[str] = []
        self.empty_reasons: list[str] = []  # why a subschema came out empty (oneOf)
        self.recursion = None  # recursive.py's hook (max_recursion_depth=None): see _flatten
        self._ids = 0
        self._validator = None
        self._any_cache: dict = {}
        self.integral_floats = True
        self.conversions = 0
        self.share = False             # write large subschemas once, as (?(DEFINE)...) definitions
        self.definitions: dict = {}    # definition text -> name, in definition order
        self.definition_text = 0
        self._index_resources()
        # unevaluated* depend on which subschemas *evaluated* a member: the
        # negation-based rewrites of oneOf/not/if would change that
        self.has_unevaluated = any(
            isinstance(sub, dict) and ("unevaluatedProperties" in sub or "unevaluatedItems" in sub)
            for sub, _ in _walk(root))

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
            if self.definition_text > MAX_REGEX_TEXT:
                raise SchemaError(
                    f"schema at {ptr or '/'}: the regex text exceeds MAX_REGEX_TEXT="
                    f"{MAX_REGEX_TEXT} characters even with shared definitions; lower "
                    "max_recursion_depth, bound the nesting or simplify the schema")
            name = self.definitions[text] = f"d{len(self.definitions)}"
        return f"(?&{name})"

    def part(self, schema: Any, ptr: str, lineage: tuple = ()) -> _Part:
        self._ids += 1
        return _Part(schema, ptr, lineage + (self._ids,))

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
            for sub, p in _subschemas(schema, ptr):
                visit(sub, p, base)

        self.resources[""] = (self.root, "")
        visit(self.root, "", "")
        self.base_uri = self.base_of.get("", "")
        # Best-effort helpers (oneOf proofs) resolve from the root only: safe
        # when the document is one resource.
        self.one_resource = len({b for b in self.base_of.values()}) <= 1

    def _base(self, ptr: str) -> str:
        while ptr not in self.base_of and ptr:
            ptr = ptr.rsplit("/", 1)[0]
        return self.base_of.get(ptr, self.base_uri)

    def resolve(self, ref: Any, ptr: str) -> tuple[Any, str]:
        """Resolve a ``$ref`` found at ``ptr`` (the keyword's pointer) against
        the base URI there; returns (target, target pointer)."""
        if not isinstance(ref, str):
            raise _refuse("$ref", ptr, "$ref must be a string")
        uri, frag = urldefrag(_join_uri(self._base(ptr.rsplit("/", 1)[0]), ref))
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
        try:
            return self._validator.evolve(schema=schema).is_valid(value)
        except Exception as exc:  # unresolvable remote refs etc.
            raise _refuse(keyword, ptr, f"values cannot be checked against "
                          f"the schema: {type(exc).__name__}: {exc}") from None

    # -- conversion -----------------------------------------------------------

    def convert(self, parts: list) -> Optional[str]:
        """Regex for the conjunction of ``parts`` (None: empty language)."""
        self.conversions += 1
        if self.conversions > MAX_CONVERSIONS:
            raise SchemaError(
                f"schema at {parts[0].ptr or '/'}: converting it needs more than "
                f"MAX_CONVERSIONS={MAX_CONVERSIONS} subschema conversions (many overlapping "
                "oneOf/anyOf/dependencies multiply); lower max_recursion_depth or simplify it")
        entered: list[str] = []
        try:
            flat: list = []
            for p in parts:
                if not self._flatten(p, flat, entered):
                    return None
            if self.recursion is not None and (hit := self.recursion.collapse(flat)) is not None:
                return hit  # the conjunction is one recursive $ref: its rule's placeholder
            result = self._convert_flat(flat, parts)
            # Nested containers repeat their item regex, so text can double per
            # level: stop early, before the exact (slower) size check at the end.
            if self.share and result is not None and len(result) >= SHARE_MIN_TEXT:
                result = self._shared(result, parts[0].ptr)
            if result is not None and len(result) > MAX_REGEX_TEXT:
                raise _TextLimit(
                    f"schema at {parts[0].ptr or '/'}: the regex text exceeds "
                    f"MAX_REGEX_TEXT={MAX_REGEX_TEXT} characters (deeply nested arrays/objects "
                    "multiply it); lower max_recursion_depth, bound the nesting or simplify the schema")
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
        rest = dict(s)
        if "$ref" in rest:
            target, tptr = self.resolve(rest.pop("$ref"), _ptr(p, "$ref"))
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
        out.append(_Part(rest, p, lin))
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
                    f"more than MAX_NEGATION_ALTERNATIVES={MAX_NEGATION_ALTERNATIVES} "
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
                if combos > MAX_NEGATION_ALTERNATIVES:
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

    def _disjoint(self, a: Any, b: Any, ptr: str) -> bool:
        if not (self._possible_kinds(a) & self._possible_kinds(b)):
            return True
        if self._excludes(a, b, ptr) or self._excludes(b, a, ptr):
            return True
        da, db = self._deref(a), self._deref(b)
        if not (isinstance(da, dict) and isinstance(db, dict)):
            return False
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

    # -- values ---------------------------------------------------------------

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
            return _lit(json.dumps(value, ensure_ascii=False))
        if isinstance(value, list):
            if not value:
                return "\\[" + ws + "\\]"
            inner = (ws + "," + ws).join(self.literal(v) for v in value)
            return "\\[" + ws + inner + ws + "\\]"
        if isinstance(value, dict):
            if not value:
                return "\\{" + ws + "\\}"
            members = [_lit(json.dumps(k, ensure_ascii=False)) + ws + ":" + ws
                       + self.literal(v) for k, v in value.items()]
            return "\\{" + ws + (ws + "," + ws).join(members) + ws + "\\}"
        raise SchemaError(f"not a JSON value: {value!r}")

    def any_value(self, depth: Optional[int] = None) -> str:
        """Any JSON value, containers nested at most ``depth`` deep
        (default ``min(max_recursion_depth, ANY_VALUE_MAX_DEPTH)``)."""
        if depth is None:
            depth = min(self.max_depth, ANY_VALUE_MAX_DEPTH)
        alts = [NULL, BOOLEAN, NUMBER, STRING]
        if depth > 0:
            alts += [self.any_container("array", depth),
                     self.any_container("object", depth)]
        return _alt(alts)

    def any_container(self, kind: str, depth: Optional[int] = None) -> str:
        """An array or object of unconstrained values, nested at most
        ``depth`` containers deep (itself included)."""
        if depth is None:
            depth = min(self.max_depth, ANY_VALUE_MAX_DEPTH)
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

    # -- typed conversion -----------------------------------------------------

    def _typed(self, flat: list) -> Optional[str]:
        for s, p, _ in flat:
            for kw in s:
                if kw not in _ANNOTATIONS and kw not in _HANDLED and kw not in _TYPE_SPECIFIC:
                    raise _unsupported(kw, _ptr(p, kw))
        kinds = self._kinds(flat)
        alts = []
        if "null" in kinds:
            alts.append(NULL)
        if "boolean" in kinds:
            alts.append(BOOLEAN)
        if "integer" in kinds:
            alts.append(self._numeric(flat, "fraction" in kinds))
        if "string" in kinds:
            alts.append(self._string(flat))
        if "array" in kinds:
            alts.append(self._array(flat))
        if "object" in kinds:
            alts.append(self._object(flat))
        return _alt(alts)

    def _kinds(self, flat: list) -> set:
        kinds = set(_KINDS)
        for s, p, _ in flat:
            if "type" in s:
                ts = s["type"] if isinstance(s["type"], list) else [s["type"]]
                kinds &= set().union(*[_type_kinds(t) for t in ts])
            if "not" in s:
                kinds -= self._not_kinds(s["not"], _ptr(p, "not"))
        if "fraction" in kinds and "integer" not in kinds:
            ptr = next(_ptr(p, "not") for s, p, _ in flat if "not" in s)
            raise _unsupported("not", ptr, "non-integral numbers only")
        return kinds

    @staticmethod
    def _simple_not(sub: Any) -> bool:
        """``not`` that only removes JSON types (handled by :meth:`_kinds`)."""
        if sub is True or sub is False:
            return True
        return isinstance(sub, dict) and set(sub) <= _ANNOTATIONS | {"type"} and (
            "type" not in sub or "integer" not in (
                sub["type"] if isinstance(sub["type"], list) else [sub["type"]])
            or "number" in (sub["type"] if isinstance(sub["type"], list) else [sub["type"]]))

    def _not_kinds(self, sub: Any, ptr: str) -> set:
        """Kinds excluded by ``not: sub``."""
        if sub is False:
            return set()
        if sub is True:
            return set(_KINDS)
        if isinstance(sub, dict) and set(sub) <= _ANNOTATIONS | {"type"}:
            if "type" not in sub:
                return set(_KINDS)
            ts = sub["type"] if isinstance(sub["type"], list) else [sub["type"]]
            return set().union(*[_type_kinds(t) for t in ts])
        raise _unsupported("not", ptr)

    @staticmethod
    def _collect(flat: list, keyword: str) -> list:
        return [(s[keyword], _ptr(p, keyword)) for s, p, _ in flat if keyword in s]

    # -- numbers --------------------------------------------------------------

    def _numeric(self, flat: list, fraction: bool) -> Optional[str]:
        lowers = [(v, False, ptr) for v, ptr in self._collect(flat, "minimum")]
        lowers += [(v, True, ptr) for v, ptr in self._collect(flat, "exclusiveMinimum")]
        uppers = [(v, False, ptr) for v, ptr in self._collect(flat, "maximum")]
        uppers += [(v, True, ptr) for v, ptr in self._collect(flat, "exclusiveMaximum")]
        steps = self._collect(flat, "multipleOf")
        if steps:
            if len({(type(v), v) for v, _ in steps}) > 1:
                raise _refuse("multipleOf", steps[1][1], "several different multipleOf "
                              "values cannot be combined; keep one (their least common multiple)")
            try:
                return multiple_of_regex(steps[0][0], [(v, x) for v, x, _ in lowers],
                                         [(v, x) for v, x, _ in uppers], not fraction)
            except MultipleOfError as exc:
                raise _refuse("multipleOf", steps[0][1], str(exc)) from None
        if not fraction:
            lo = hi = None
            for v, strict, _ in lowers:
                b = math.floor(Fraction(v)) + 1 if strict else math.ceil(Fraction(v))
                lo = b if lo is None else max(lo, b)
            for v, strict, _ in uppers:
                b = math.ceil(Fraction(v)) - 1 if strict else math.floor(Fraction(v))
                hi = b if hi is None else min(hi, b)
            if lo is None and hi is None:
                return INTEGER
            return integer_range_regex(lo, hi)
        if not lowers and not uppers:
            return NUMBER
        lo = max(lowers, key=lambda b: (Fraction(b[0]), b[1])) if lowers else None
        hi = min(uppers, key=lambda b: (Fraction(b[0]), -b[1])) if uppers else None
        chosen = [b for b in (lo, hi) if b is not None]
        decimals = {}
        for v, strict, ptr in chosen:
            keyword = ptr.rsplit("/", 1)[-1]
            if abs(v) > _MAX_EXACT_FLOAT_INT:
                raise _refuse(keyword, ptr, f"|{v}| > 2**53: decimal text and "
                              "binary floats disagree; use type integer")
            if isinstance(v, int) or v.is_integer():
                decimals[ptr] = Decimal(int(v))
            else:
                decimals[ptr] = Decimal(repr(v))
        budget = None
        if any(strict for _, strict, _ in chosen):
            budget = max([NUMBER_FRACTION_DIGITS] +
                         [len(_split_decimal(abs(decimals[ptr]))[1])
                          for _, _, ptr in chosen])
            for v, strict, ptr in chosen:
                if strict and 2 * math.ulp(float(v)) >= 10.0 ** -budget:
                    raise _refuse(ptr.rsplit("/", 1)[-1], ptr, f"exclusive "
                                  f"bound {v} is too large to be honoured "
                                  "exactly under float rounding")
        return decimal_range_regex(
            None if lo is None else decimals[lo[2]], bool(lo and lo[1]),
            None if hi is None else decimals[hi[2]], bool(hi and hi[1]),
            budget)

    # -- strings --------------------------------------------------------------

    def _string(self, flat: list) -> Optional[str]:
        for kw in ("contentEncoding", "contentMediaType", "contentSchema"):
            for _, ptr in self._collect(flat, kw):
                raise _unsupported(kw, ptr)
        mins = [(int(v), ptr) for v, ptr in self._collect(flat, "minLength")]
        maxs = [(int(v), ptr) for v, ptr in self._collect(flat, "maxLength")]
        lo, lo_ptr = max(mins, default=(0, None))
        hi, hi_ptr = min(maxs) if maxs else (None, None)
        if hi is not None and lo > hi:
            return None
        patterns = {}
        for pat, ptr in self._collect(flat, "pattern"):
            patterns.setdefault(pat, ptr)
        formats = {}
        for fmt, ptr in self._collect(flat, "format"):
            formats.setdefault(fmt, ptr)
        for fmt, ptr in formats.items():
            if fmt not in FORMATS:
                raise _refuse("format", ptr, f"format {fmt!r} is not supported "
                              f"(supported: {', '.join(FORMATS)}); use pattern")
        if len(formats) > 1:
            raise _refuse("format", list(formats.values())[1],
                          "several different formats cannot be combined")
        if len(patterns) > 1:
            raise _refuse("pattern", list(patterns.values())[1],
                          "several different patterns cannot be intersected; "
                          "combine them into one pattern")
        both = bool(patterns and formats)
        if patterns:
            (pat, ptr), = patterns.items()
        if formats:
            (fmt, _), = formats.items()
            content = FORMATS[fmt]
            fmin, fmax = _FORMAT_LENGTHS.get(fmt) or length_range(parse_regex(content))
        if patterns:
            anchor_error = "unsupported anchors"
            try:
                content, fmin, fmax = _translate_pattern(pat)
            except UnsupportedRegexError as exc:
                if not exc.construct.startswith("anchor"):
                    raise _refuse("pattern", ptr, str(exc)) from None
                content, fmin, fmax = None, -1, 0  # anchors inside: the tree path below
                anchor_error = exc
            except RegexSyntaxError as exc:
                raise _refuse("pattern", ptr, str(exc)) from None
            if content is None and fmin == 0:
                return None
        if not patterns and not formats:
            return '"' + _repeat(STRING_CHAR, lo, hi) + '"'
        if not both and lo <= fmin and (hi is None or (fmax is not None and hi >= fmax)):
            return '"' + content + '"'  # every match already fits
        # Trees over decoded characters: intersect, restrict to lo..hi, exactly.
        tree = _format_tree(fmt) if formats else None
        if patterns:
            try:
                ptree = search_tree(_parse_regex(pat, anchor_nodes=True))
            except TooComplex as exc:
                raise _refuse("pattern", ptr, f"{anchor_error} ({exc})") from None
            if both:
                tree = None if tree is None else intersect(
                    ptree, tree, lambda text: re.fullmatch(FORMATS[fmt], text) is not None)
                if tree is None:
                    raise _refuse("pattern", ptr, f"pattern cannot be combined with format "
                                  f"{fmt!r} (only literal prefixes/suffixes, or a character "
                                  "every such string contains, are intersected)")
            else:
                tree = ptree
            fmin, fmax = length_range(tree)
        why = ""
        if tree is not None:
            try:
                tree = restrict_length(tree, lo, hi)
            except TooComplex as exc:
                why = f" ({exc})"
                tree = None if not formats or hi is None else _capped(tree, lo, hi)
        if tree is None:
            if lo > fmin:
                raise _refuse("minLength", lo_ptr, "cannot be combined with "
                              "format/pattern unless every match is long enough"
                              + why)
            raise _refuse("maxLength", hi_ptr, "cannot be combined with "
                          "format/pattern unless every match is short enough" + why)
        content = _emit(tree, _encode_charset)
        return None if content is None else '"' + content + '"'

    # -- arrays ---------------------------------------------------------------

    def _array(self, flat: list) -> Optional[str]:
        if not any(set(s) & _ARRAY_KEYWORDS for s, _, _ in flat):
            return self.any_container("array")
        mins = self._collect(flat, "minItems")
        maxs = self._collect(flat, "maxItems")
        m = max([int(v) for v, _ in mins], default=0)
        n = min([int(v) for v, _ in maxs], default=None)
        for s, p, _ in flat:
            if s.get("uniqueItems", False) and not (n is not None and n <= 1):
                raise _unsupported("uniqueItems", _ptr(p, "uniqueItems"))
            if "contains" in s and not (s.get("minContains") == 0
                                        and "maxContains" not in s):
                raise _unsupported("contains", _ptr(p, "contains"))
        if n is not None and m > n:
            return None
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
        return self._container("\\[", "\\]", first, m == 0)

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
        for name in names:
            value = self.convert_or_any(member_parts(name))
            if value is None:
                if name in required:
                    return None
                continue
            key = _lit(json.dumps(name, ensure_ascii=False))
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
        if key_parts:
            if names:
                return None  # cannot intersect with "not a declared name"
            key = self.convert(key_parts + [self.part({"type": "string"}, "")])
            if key is None:
                return None
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


def _join_members(members: list, sep: str) -> tuple[Optional[str], bool]:
    """Comma-joined, order-preserving selections of ``members``.

    ``members`` is a list of ``(regex, required)``.  Returns the regex for
    the non-empty selections that contain every required member (None if
    there are no members) and whether the empty selection is allowed.  The
    size is linear: with ``H`` the selections of the members so far, an
    optional member ``P`` gives ``(?:H(?:,P)?|P)`` and a required one
    ``(?:H,)?P`` (``H(?:,P)?`` / ``H,P`` once a required member was seen).

    >>> import re; r, e = _join_members([("a", False), ("b", True), ("c", False)], ",")
    >>> [s for s in ["a", "b", "c", "a,b", "b,c", "a,b,c", "a,c", "b,a"] if re.fullmatch(r, s)], e
    (['b', 'a,b', 'b,c', 'a,b,c'], False)
    """
    joined: Optional[str] = None
    seen_required = False
    for member, required in members:
        if joined is None:
            joined = member
        elif required:
            joined = (joined + sep if seen_required
                      else _repeat(joined + sep, 0, 1)) + member
        else:
            with_member = joined + _repeat(sep + member, 0, 1)
            joined = with_member if seen_required else _alt([with_member, member])
        seen_required |= required
    return joined, not seen_required


def _key_excluding(names: list) -> str:
    """JSON string token for any key except the given ``names``.

    >>> import re; r = _key_excluding(["a", "ab"])
    >>> [bool(re.fullmatch(r, s)) for s in ['"a"', '"ab"', '"b"', '"abc"', '""']]
    [False, False, True, True, True]
    """
    if not names:
        return STRING
    return _keys_excluding(tuple(sorted(set(names))))


@lru_cache(maxsize=1024)
def _keys_excluding(names: tuple) -> str:
    """:func:`_key_excluding` of sorted distinct ``names`` (the same object schema is
    often converted at many places)."""
    trie: dict = {}
    for name in names:
        node = trie
        for ch in name:
            node = node.setdefault(ch, {})
        node[None] = True
    anything = _repeat(_CANON_CHAR, 0, None)

    def walk(node: dict) -> str:
        children = sorted(k for k in node if k is not None)
        alts = [] if None in node else [""]
        used = normalize_ranges((ord(c), ord(c)) for c in children)
        other = _encode_charset(_subtract(_ALL, used))
        alts.append(other + anything)
        for c in children:
            alts.append(_encode_charset(((ord(c), ord(c)),)) + walk(node[c]))
        return _alt(alts)

    return '"' + walk(trie) + '"'


# ---------------------------------------------------------------------------
# Public entry point
# ---------------------------------------------------------------------------


def schema_to_regex(schema: Any, *, whitespace: Optional[str] = None,
                    max_recursion_depth: int = 3, strict: bool = False,
                    shared: Optional[bool] = None) -> str:
    """Convert a JSON Schema into a regex whose matches all validate.

    :param schema: a dict or bool (the schema), a JSON string, or a pydantic
        model class (its ``model_json_schema()`` is used).
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
    root = _load(schema)
    ws = _whitespace_regex(WHITESPACE if whitespace is None else whitespace)
    if not isinstance(max_recursion_depth, int) or max_recursion_depth < 1:
        raise ValueError("max_recursion_depth must be an integer >= 1")
    check_metaschema(root)
    canon, draft4 = canonical(root, strict=strict), detect_draft(root)[0] == "draft4"

    def convert(share: bool) -> str:
        conv = _Converter(canon, ws, max_recursion_depth)
        # Draft 04 counts 1.0 as a number but not as an integer: write integral values bare.
        conv.integral_floats = not draft4
        conv.share = share
        return conv.run()

    with gc_paused():
        if shared is None:
            try:
                return convert(False)
            except _TextLimit:
                return convert(True)
        return convert(bool(shared))


# ---------------------------------------------------------------------------
# JSON-Schema-Test-Suite summary
# ---------------------------------------------------------------------------


def suite_table(path: Any) -> str:
    """Markdown table: per test-suite file, schemas accepted / refused.

    ``path`` is a directory of JSON-Schema-Test-Suite files (e.g.
    ``.../draft2020-12``; only its top-level ``*.json`` files) or one file.
    A schema that raises anything but :class:`SchemaError` is counted in the
    ``errors`` column (which should stay 0).
    """
    path = Path(path)
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    lines = ["| file | schemas | accepted | refused | errors |",
             "|---|---:|---:|---:|---:|"]
    totals = [0, 0, 0, 0]
    for f in files:
        cases = json.loads(f.read_text(encoding="utf-8"))
        counts = [len(cases), 0, 0, 0]
        for case in cases:
            try:
                schema_to_regex(case["schema"])
                counts[1] += 1
            except SchemaError:
                counts[2] += 1
            except Exception:  # noqa: BLE001 - reported, not hidden
                counts[3] += 1
        totals = [a + b for a, b in zip(totals, counts)]
        lines.append(f"| {f.name} | " + " | ".join(map(str, counts)) + " |")
    lines.append("| **total** | " + " | ".join(f"**{t}**" for t in totals) + " |")
    return "\n".join(lines)


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hf_constrained.json_schema",
        description="Convert a JSON Schema file to a regex, or summarise a "
                    "JSON-Schema-Test-Suite directory.")
    parser.add_argument("schema", nargs="?", help="schema file to convert")
    parser.add_argument("--suite-table", metavar="PATH",
                        help="print the accepted/refused markdown table")
    parser.add_argument("--whitespace", default=None)
    parser.add_argument("--max-recursion-depth", type=int, default=3)
    args = parser.parse_args(argv)
    if args.suite_table:
        print(suite_table(args.suite_table))
        return 0
    if not args.schema:
        parser.error("give a schema file or --suite-table PATH")
    text = Path(args.schema).read_text(encoding="utf-8")
    try:
        print(schema_to_regex(text, whitespace=args.whitespace,
                              max_recursion_depth=args.max_recursion_depth))
    except SchemaError as exc:
        print(f"SchemaError: {exc}", file=sys.stderr)
        return 1
    return 0

