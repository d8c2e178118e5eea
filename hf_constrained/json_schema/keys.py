"""Object members and keys: joining optional members, keys that differ from given names."""

from __future__ import annotations

from functools import lru_cache
from typing import Optional

from ..regex_parser import normalize_ranges
from .charsets import _ALL, _CANON_CHAR, _encode_charset, _subtract
from .regex_text import _alt, _repeat
from .tokens import STRING

#: plain ASCII (printable, no quote or backslash): one byte, no escape
_PLAIN_ASCII = ((0x20, 0x21), (0x23, 0x5B), (0x5D, 0x7E))


#: an object with more members than this joins them in chunks (:func:`_join_members`)
JOIN_FLAT = 150
#: members (or chunks) per chunk
JOIN_CHUNK = 64


def _join_members(members: list, sep: str) -> tuple[Optional[str], bool]:
    """Comma-joined, order-preserving selections of ``members``.

    ``members`` is a list of ``(regex, required)``.  Returns the regex for
    the non-empty selections that contain every required member (None if
    there are no members) and whether the empty selection is allowed.  The
    size is linear: with ``H`` the selections of the members so far, an
    optional member ``P`` gives ``(?:H(?:,P)?|P)`` and a required one
    ``(?:H,)?P`` (``H(?:,P)?`` / ``H,P`` once a required member was seen).

    That nests one group per member, and the regex parser refuses more than 200 nested
    groups, so past :data:`JOIN_FLAT` members they are joined in chunks of
    :data:`JOIN_CHUNK`, and the chunks' selections are joined the same way as members
    (required when the chunk's own selection cannot be empty): a selection of members is
    the selections within each chunk, with a separator between non-empty ones. Nesting is
    then about ``JOIN_CHUNK`` per level of chunks, and the size at most doubles per level.

    >>> import re; r, e = _join_members([("a", False), ("b", True), ("c", False)], ",")
    >>> [s for s in ["a", "b", "c", "a,b", "b,c", "a,b,c", "a,c", "b,a"] if re.fullmatch(r, s)], e
    (['b', 'a,b', 'b,c', 'a,b,c'], False)
    """
    if len(members) > JOIN_FLAT:
        chunks = [_join_members(members[i:i + JOIN_CHUNK], sep) for i in range(0, len(members), JOIN_CHUNK)]
        return _join_members([(regex, not empty_ok) for regex, empty_ok in chunks], sep)
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
    often converted at many places).

    A key that is not a name either leaves the names' trie (a trie path, then a
    character no name continues with there, then anything) or stops inside it at
    a node that is not a name. The ``anything`` tail is written once, after the
    leaving character, and so are the characters that no name contains (``S``:
    besides the names' own characters, everything outside plain ASCII): a key
    leaves by one of those from any trie path ``P``, so ``P S`` is one piece
    and only the plain-ASCII leaving classes are per node. Each piece written at
    every node instead (``other anything | c (...)``, the same language) would
    be its own copy, and the automaton would keep one state per copy and UTF-8
    byte (1,301 states for one corpus schema's key start instead of about 130).

    >>> import re
    >>> from hf_constrained.json_schema.keys import _CANON_CHAR, _keys_excluding, _repeat
    >>> r = _keys_excluding(("a", "ab", "b"))
    >>> [bool(re.fullmatch(r, s)) for s in ['"a"', '"ab"', '"b"', '"abc"', '""', '"c"', '"ba"']]
    [False, False, False, True, True, True, True]
    >>> r.count(_repeat(_CANON_CHAR, 0, None))  # the tail, once
    1
    """
    trie: dict = {}
    for name in names:
        node = trie
        for ch in name:
            node = node.setdefault(ch, {})
        node[None] = True
    own = normalize_ranges([*_PLAIN_ASCII, *((ord(c), ord(c)) for name in names for c in name)])
    shared = _subtract(_ALL, own)          # characters no name has: they leave the trie anywhere

    def leave(node: dict) -> Optional[str]:
        """From ``node``: a trie path, then one of ``own`` that leaves the trie there."""
        children = sorted(k for k in node if k is not None)
        rest = _subtract(own, normalize_ranges((ord(c), ord(c)) for c in children))
        alts = [_encode_charset(rest) if rest else None]
        alts += [_encode_charset(((ord(c), ord(c)),)) + down
                 for c in children if (down := leave(node[c])) is not None]
        return _alt(alts)

    def path(node: dict) -> str:
        """From ``node``: any trie path (the empty one included)."""
        return _alt([""] + [_encode_charset(((ord(c), ord(c)),)) + path(node[c])
                            for c in sorted(k for k in node if k is not None)])

    def inside(node: dict) -> Optional[str]:
        """From ``node``: a trie path that stops at a node that is not a name (None: none)."""
        alts = [] if None in node else [""]
        for c in sorted(k for k in node if k is not None):
            rest = inside(node[c])
            if rest is not None:
                alts.append(_encode_charset(((ord(c), ord(c)),)) + rest)
        return _alt(alts) if alts else None

    off = _alt([leave(trie), path(trie) + _encode_charset(shared) if shared else None])
    return '"' + _alt([off + _repeat(_CANON_CHAR, 0, None), inside(trie)]) + '"'
