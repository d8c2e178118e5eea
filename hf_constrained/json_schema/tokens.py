"""Regex building blocks: JSON tokens and string formats (the regex dialect of
:mod:`hf_constrained.json_schema`)."""

from __future__ import annotations

from .formats import FORMAT_LENGTHS, IPV6, MORE_FORMATS, uri_reference

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

_O = _OCTET
_IPV4_NETWORK = (rf"(?:{IPV4}(?:/32)?|{_O}\.{_O}\.{_O}\.0/24|{_O}\.{_O}\.0\.0/16|{_O}\.0\.0\.0/8"
                 r"|0\.0\.0\.0/0)")
_IPV6_NETWORK = rf"(?:{IPV6})(?:/128)?"
_IPV4_INTERFACE = rf"{IPV4}(?:/(?:3[0-2]|[12]?[0-9]))?"
_IPV6_INTERFACE = rf"(?:{IPV6})(?:/(?:12[0-8]|1[01][0-9]|[1-9]?[0-9]))?"

#: Formats Pydantic writes that no JSON Schema draft defines, so no format checker
#: asserts them and the schema allows any string there; generated as a subset of
#: what Pydantic's type accepts (instead of ignored, which made nearly every such
#: document one Pydantic refuses). ``uuidN``: version N, RFC 4122 variant (Python's
#: ``UUID.version`` is None for other variants); networks: the address alone, ``/32``
#: (``/128``) and the whole-octet prefixes, which have no host bits set.
PYDANTIC_FORMATS = {
    **{f"uuid{v}": rf"[0-9a-fA-F]{{8}}-[0-9a-fA-F]{{4}}-{v}[0-9a-fA-F]{{3}}-[89abAB][0-9a-fA-F]{{3}}"
                   r"-[0-9a-fA-F]{12}" for v in range(1, 9)},
    "ipvanyaddress": rf"(?:{IPV4}|{IPV6})",
    "ipv4network": _IPV4_NETWORK,
    "ipv6network": _IPV6_NETWORK,
    "ipvanynetwork": rf"(?:{_IPV4_NETWORK}|{_IPV6_NETWORK})",
    "ipv4interface": _IPV4_INTERFACE,
    "ipv6interface": _IPV6_INTERFACE,
    "ipvanyinterface": rf"(?:{_IPV4_INTERFACE}|{_IPV6_INTERFACE})",
}
#: Every format the converter generates: the JSON Schema ones and Pydantic's.
ALL_FORMATS = {**FORMATS, **PYDANTIC_FORMATS}

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
    **{f"uuid{v}": (36, 36) for v in range(1, 9)},
    "ipvanyaddress": (2, 45),
    "ipv4network": (7, 18), "ipv4interface": (7, 18),
    "ipv6network": (2, 49), "ipv6interface": (2, 49),
    "ipvanynetwork": (2, 49), "ipvanyinterface": (2, 49),
}
