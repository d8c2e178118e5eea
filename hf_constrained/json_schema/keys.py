"""Object members and keys: joining optional members, keys that differ from given names."""

from __future__ import annotations

from functools import lru_cache
from typing import Optional

from ..regex_parser import normalize_ranges
from .charsets import _ALL, _CANON_CHAR, _encode_charset, _subtract
from .regex_text import _alt, _repeat
from .tokens import STRING


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
