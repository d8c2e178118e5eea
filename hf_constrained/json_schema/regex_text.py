"""Writing regex text: literals, groups, repetitions, alternations."""

from __future__ import annotations

import json
import re
from json.encoder import encode_basestring as _encode_basestring  # what json.dumps uses
from typing import Optional

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
    if _PLAIN.fullmatch(text):  # most names and values: printable ASCII, no metacharacter
        return text
    return "".join(_char(ord(c)) for c in text)


def _json_text(value) -> str:
    """``json.dumps(value, ensure_ascii=False)``, for a string without building an encoder.

    >>> _json_text('a"é'), _json_text(1)
    ('"a\\\\"é"', '1')
    """
    if value.__class__ is str:
        return _encode_basestring(value)
    return json.dumps(value, ensure_ascii=False)


_PLAIN = re.compile(r"[ !\"#%&',\-/0-9:;<=>@A-Z_`a-z~]*")  # what _char leaves as it is


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


# The largest count a ``{m,n}`` may hold for Python's ``re`` (``re._constants.MAXREPEAT`` - 1 on
# CPython 3.11). A count at or above it is written as nested repetitions of ``_BLOCK`` copies, the
# same language, so the text stays readable by ``re`` (the package's own parser reads either).
_RE_MAX_COUNT = 2 ** 32 - 2
_BLOCK = 10 ** 9


def _repeat(r: str, lo: int, hi: Optional[int]) -> str:
    """``r`` repeated ``lo`` to ``hi`` (None: unbounded) times.

    >>> _repeat("a", 0, None), _repeat("ab", 1, 1), _repeat("a", 2, 5)
    ('a*', 'ab', 'a{2,5}')
    >>> import re; big = _repeat("a", 10 ** 30, None)  # past re's largest count: nested
    >>> big, bool(re.compile(big))
    ('(?:(?:(?:a{1000000000}){1000000000}){1000000000}){1000}a*', True)
    """
    if hi is not None and hi == 0 or r == "":
        return ""
    if hi == 1 and lo == 1:
        return r
    atom = _group(r)
    if lo > _RE_MAX_COUNT or hi is not None and hi > _RE_MAX_COUNT:
        return _exactly(atom, lo) + (atom + "*" if hi is None else _up_to(atom, hi - lo))
    if hi is None:
        q = "*" if lo == 0 else "+" if lo == 1 else f"{{{lo},}}"
    elif lo == hi:
        q = f"{{{lo}}}"
    elif (lo, hi) == (0, 1):
        q = "?"
    else:
        q = f"{{{lo},{hi}}}"
    return atom + q


def _exactly(atom: str, n: int) -> str:
    """The atom ``atom`` exactly ``n`` times, with no count above :data:`_BLOCK`.

    >>> _repeat("a", 5 * 10 ** 9 + 3, 5 * 10 ** 9 + 3)  # via _exactly
    '(?:a{1000000000}){5}a{3}'
    """
    if n <= _BLOCK:
        return "" if n == 0 else atom if n == 1 else f"{atom}{{{n}}}"
    q, r = divmod(n, _BLOCK)
    return _exactly(f"(?:{atom}{{{_BLOCK}}})", q) + _exactly(atom, r)


def _up_to(atom: str, n: int) -> str:
    """The atom ``atom`` 0 to ``n`` times, with no count above :data:`_BLOCK`: below ``q`` whole
    blocks of ``_BLOCK`` copies plus fewer than a block, or ``q`` blocks plus at most the rest.

    >>> _repeat("a", 0, 5 * 10 ** 9 + 3)  # via _up_to
    '(?:(?:a{1000000000}){0,4}a{0,999999999}|(?:a{1000000000}){5}a{0,3})'
    """
    if n <= _BLOCK:
        return "" if n == 0 else f"{atom}?" if n == 1 else f"{atom}{{0,{n}}}"
    q, r = divmod(n, _BLOCK)
    block = f"(?:{atom}{{{_BLOCK}}})"
    return (f"(?:{_up_to(block, q - 1)}{atom}{{0,{_BLOCK - 1}}}"
            f"|{_exactly(block, q)}{_up_to(atom, r)})")


def _alt(alternatives) -> Optional[str]:
    """Alternation of the non-None ``alternatives``; None if there is none.

    The result never has a top-level ``|``, so it can be concatenated.

    >>> _alt(["a", "b", None, "a"]), _alt(["", "ab"]), _alt([None])
    ('(?:a|b)', '(?:ab)?', None)
    """
    if alternatives.__class__ is list and len(alternatives) == 1:
        return alternatives[0]  # what the steps below give for one (None, "" or a text)
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
    if isinstance(choices, (str, bytes)):  # list("yes") would be the choices y, e, s
        raise TypeError(f"choice_regex() takes a list of strings, not one string: "
                        f"choice_regex([{choices!r}])")
    choices = list(choices)
    if not choices:
        raise ValueError("choice_regex() needs at least one choice")
    bad = next((c for c in choices if not isinstance(c, str)), None)
    if bad is not None:
        raise TypeError(f"choice_regex() choices must be strings, not {type(bad).__name__} ({bad!r}); "
                        "convert them with str() (for JSON values use JSONProcessor with an enum)")
    return _alt([_lit(c) for c in choices])
