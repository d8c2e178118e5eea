r"""String formats beyond the RFC 3339 / UUID / e-mail / IPv4 / URI basics.

Each constant is the regex of a format's string *content* (the JSON text
between the quotes, so a backslash in the value is written ``\\`` there).
Every string it matches passes ``jsonschema``'s ``FormatChecker`` for that
format once the checker packages of the test extra are installed (``fqdn``,
``idna``, ``jsonpointer``, ``isoduration``, ``uri-template``,
``rfc3986-validator``, ``rfc3987-syntax``).  Where the format is regular and
small the language is exact; otherwise it is a documented subset:

* :data:`IPV6` -- exact: RFC 4291 text forms (``::`` compression, an
  embedded dotted quad), either case, no zone id, as ``ipaddress`` reads them.
* :data:`URI_REFERENCE` -- a URI (:data:`~hf_constrained.json_schema.URI`)
  or a relative reference: ``//host[:port]/path``, ``/path``, or a path whose
  first segment has no ``:``; optional ``?query`` and ``#fragment``; the
  empty string.  ``iri`` / ``iri-reference`` use the same (ASCII) languages.
* :data:`JSON_POINTER` -- exact up to escapes: ``/``-separated tokens of raw
  characters, ``~0``/``~1`` escapes; :data:`RELATIVE_JSON_POINTER` -- a
  non-negative integer (no ``0`` followed by a digit, as the checker reads
  it) then ``#`` or a JSON pointer.
* :data:`DURATION` -- ISO 8601 ``PnYnMnDTnHnMnS`` (each part optional, at
  least one, at most 6 digits each) or ``PnW``.
* :data:`URI_TEMPLATE` -- RFC 6570 level 4: unreserved/reserved literals and
  expressions ``{op var[:n|*],...}``.
* :data:`REGEX` -- a subset of regex syntax valid in Python ``re`` and in
  ECMA-262 (``u`` mode): literals, ``.``, escapes of ``\d \w \s`` (and
  negations) and of metacharacters, classes of letters/digits/ranges
  ``a-z A-Z 0-9``, quantifiers ``* + ? {n} {n,} {0,m} {1,m}`` (optionally
  lazy), ``^``/``$``, alternation and groups ``(...)``/``(?:...)`` nested
  at most two deep.
* :data:`IDN_HOSTNAME` -- ASCII host names whose labels have no ``--``
  (so never the IDNA-forbidden ``ab--`` or ``xn--`` forms), 2 to 5 labels.

>>> import re
>>> bool(re.fullmatch(IPV6, "2001:db8::ff00:42:8329")), bool(re.fullmatch(IPV6, "1::2::3"))
(True, False)
>>> bool(re.fullmatch(RELATIVE_JSON_POINTER, "1/a~1b")), bool(re.fullmatch(DURATION, "P1Y2MT3S"))
(True, True)
"""

from __future__ import annotations

__all__ = ["DURATION", "FORMAT_LENGTHS", "IDN_HOSTNAME", "IPV6", "JSON_POINTER",
           "MORE_FORMATS", "REGEX", "RELATIVE_JSON_POINTER", "URI_REFERENCE", "URI_TEMPLATE"]

_H16 = r"[0-9A-Fa-f]{1,4}"
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_IPV4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}"
_LS32 = rf"(?:{_H16}:{_H16}|{_IPV4})"


def _head(n: int) -> str:
    """Up to ``n + 1`` hextets before ``::`` (``h16:`` repeated, then ``h16``), or none."""
    return rf"(?:(?:{_H16}:){{0,{n}}}{_H16})?" if n else rf"(?:{_H16})?"


#: RFC 4291 IPv6 address text, exactly the forms ``ipaddress.IPv6Address`` reads
#: (no zone id).
IPV6 = "(?:" + "|".join(
    [rf"(?:{_H16}:){{6}}{_LS32}", rf"::(?:{_H16}:){{5}}{_LS32}"]
    + [_head(j) + "::" + (rf"(?:{_H16}:){{{4 - j}}}" if j < 4 else "") + _LS32 for j in range(5)]
    + [_head(5) + "::" + _H16, _head(6) + "::"]) + ")"

_PCHAR = r"(?:[A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2})"
_PCHAR_NC = r"(?:[A-Za-z0-9._~!$&'()*+,;=@-]|%[0-9A-Fa-f]{2})"   # no ':'
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST = rf"{_LABEL}(?:\.{_LABEL})*"
_TAIL = rf"(?:\?(?:{_PCHAR}|[/?])*)?(?:#(?:{_PCHAR}|[/?])*)?"
_RELATIVE = (rf"(?://{_HOST}(?::[0-9]{{1,5}})?(?:/{_PCHAR}*)*"
             rf"|/(?:{_PCHAR}+(?:/{_PCHAR}*)*)?"
             rf"|{_PCHAR_NC}+(?:/{_PCHAR}*)*)?{_TAIL}")


def uri_reference(uri: str) -> str:
    """A URI (the ``uri`` format's regex) or a relative reference."""
    return f"(?:{uri}|{_RELATIVE})"


_TOKEN = r'(?:[^/~"\\\x00-\x1f\ud800-\udfff]|~[01])'

#: RFC 6901 JSON pointer (raw characters; ``~`` only as ``~0``/``~1``).
JSON_POINTER = rf"(?:/{_TOKEN}*)*"

#: Relative JSON pointer as jsonschema's checker reads it.
RELATIVE_JSON_POINTER = rf"(?:0|[1-9]+0?)(?:#|{JSON_POINTER})"

_N = "[0-9]{1,6}"
_DATE_PART = rf"(?:{_N}Y(?:{_N}M)?(?:{_N}D)?|{_N}M(?:{_N}D)?|{_N}D)"
_TIME_PART = rf"T(?:{_N}H(?:{_N}M)?(?:{_N}S)?|{_N}M(?:{_N}S)?|{_N}S)"

#: ISO 8601 duration (subset: integral parts of at most 6 digits).
DURATION = rf"P(?:{_N}W|{_DATE_PART}(?:{_TIME_PART})?|{_TIME_PART})"

_VARSPEC = r"[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*(?::[1-9][0-9]{0,2}|\*)?"

#: RFC 6570 URI template (subset: ASCII literals, no percent-encoding).
URI_TEMPLATE = (rf"(?:[A-Za-z0-9._~!$&()*+,;=:@/?#\[\]-]"
                rf"|\{{[+#./;?&]?{_VARSPEC}(?:,{_VARSPEC})*\}})*")

_QUANT = r"(?:[*+?]|\{[0-9]{1,2},?\}|\{[01],[1-9][0-9]?\})\??"
_ESC = r"\\\\(?:[dDwWsS.*+?()\[\]{}|^$/]|\\\\)"   # a backslash is \\ in JSON text
_CLASS_ITEM = rf"(?:a-z|A-Z|0-9|[A-Za-z0-9_ .,:;@#%=!<>'/]|{_ESC})"
_ATOM = rf"(?:[A-Za-z0-9 _,:;<>=!@#%&'/~-]|\.|{_ESC}|\[\^?{_CLASS_ITEM}+\])"


def _regex_syntax(depth: int) -> str:
    atom = _ATOM
    if depth:
        atom = rf"(?:{_ATOM}|\((?:\?:)?{_regex_syntax(depth - 1)}\))"
    piece = rf"(?:{atom}(?:{_QUANT})?|[$^])"
    return rf"{piece}*(?:\|{piece}*)*"


#: Regular expressions (a subset valid in Python ``re`` and ECMA-262).
REGEX = _regex_syntax(2)

_IDN_LABEL = r"[A-Za-z0-9]{1,20}(?:-[A-Za-z0-9]{1,20}){0,2}"

#: Internationalised host name (subset: ASCII labels without ``--``).
IDN_HOSTNAME = rf"(?:{_IDN_LABEL}\.){{1,4}}[A-Za-z]{{2,20}}"

#: Formats added here -> content regex (``uri-reference``, ``iri`` and
#: ``iri-reference`` are built from the URI regex by the package).
MORE_FORMATS = {
    "ipv6": IPV6,
    "json-pointer": JSON_POINTER,
    "relative-json-pointer": RELATIVE_JSON_POINTER,
    "duration": DURATION,
    "uri-template": URI_TEMPLATE,
    "regex": REGEX,
    "idn-hostname": IDN_HOSTNAME,
}

#: (shortest, longest) content of each format above (None: unbounded).
FORMAT_LENGTHS = {
    "ipv6": (2, 45),
    "json-pointer": (0, None),
    "relative-json-pointer": (1, None),
    "duration": (3, 44),
    "uri-template": (0, None),
    "regex": (0, None),
    "idn-hostname": (4, 272),
    "uri-reference": (0, None),
    "iri": (5, None),
    "iri-reference": (0, None),
    "idn-email": (6, None),
}
