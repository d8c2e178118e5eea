"""The converter's memo: a conjunction converted once is not converted again.

A ``$ref`` target used in many places (Kubernetes' ``ObjectMeta``...) used to be
converted at every use, with everything below it: 1,241 conversions for one
Kubernetes schema (``kb_1007``), 188 of them different.  :class:`_Memo` keeps
each conversion's result, keyed by what the conversion reads:

* the flattened conjunction: per non-empty part its keywords with their values
  (subschemas, and lists or dicts holding them, by identity: the memo keeps them
  alive, so an identity is never reused; scalars and lists of scalars by value
  and class, as ``True == 1``; floats by ``repr``, as ``-0.0 == 0.0``; dicts of such
  scalars, like the ``{name: false}`` a oneOf separator or a ``dependentRequired`` split
  makes anew each time, by their items in order) and, when
  it has a subschema, its JSON pointer (the base URI of a ``$ref`` below, and the
  pointers in ``cuts`` and ``empty_reasons``, come from it).  A part without
  subschemas converts the same wherever it is (``{"type": "string"}``: one
  conversion for all).  An empty part (``{}``, what is left of
  ``{"$ref": ...}`` once resolved) constrains nothing and is left out, so
  every use of a target shares one key;
* the ``ref_counts`` entries the conversion read (the recursion depth at each
  ``$ref`` decides where a recursion is cut): a result is reused only where all
  of them are what they were, so recursive targets get one entry per depth.

Reusing a result replays what converting again would do to the converter's
state: the conversion count (``MAX_CONVERSIONS``: where it would be exceeded,
the conversion is made again, so it fails at the same place with the same
message), the ``cuts`` and ``empty_reasons`` it appended and the reads.  Shared
definitions need nothing: the texts of the first conversion are defined
already.  Errors are never stored: a conversion that raises raises each time.
The output is byte-for-byte that of converting every time.
"""

from __future__ import annotations

from itertools import repeat

from . import limits

_MISS = object()  # recall(): no stored conversion applies
_BY_VALUE = frozenset({str, int, bool, type(None)})  # compared by value and class (True == 1)
_ZEROS = repeat(0)  # the default of each ref_counts.get (map stops at the targets' end)


class _Memo:
    """Conversions of one :class:`~.converter._Converter`, by conjunction (see the module
    docstring).  The converter calls :meth:`key`, :meth:`recall` and, after a conversion that
    :meth:`recall` did not answer, :meth:`mark` before and :meth:`remember` after it.

    >>> from hf_constrained.json_schema import schema_to_regex
    >>> from hf_constrained.json_schema.converter import _Converter
    >>> point = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
    >>> schema = {"$defs": {"p": point}, "type": "array",
    ...           "prefixItems": [{"$ref": "#/$defs/p"}, {"$ref": "#/$defs/p"}], "items": False}
    >>> conv = _Converter(schema, "", 3)
    >>> conv.run() == schema_to_regex(schema, whitespace="")
    True
    >>> conv.conversions, conv.memo.hits   # the second use of p and its "x" are not converted again
    (6, 1)
    """

    def __init__(self):
        self.entries: dict = {}  # key -> [(result, (targets, depths), conversions, cuts, reasons, reads, flat)]
        self.hits = 0

    @staticmethod
    def key(flat: list) -> tuple:
        """The key of a flattened conjunction: per non-empty part, its pointer (None when
        every value is a scalar or a list of scalars: no subschema, so nothing depends on where
        the part is) and its (keyword, ...) items."""
        key = []
        for s, ptr, _ in flat:
            if s:
                at = len(key)
                key.append(None)
                for k, v in s.items():
                    c = v.__class__
                    if c in _BY_VALUE:
                        key.append((k, c, v))
                    elif c is list and all(x.__class__ in _BY_VALUE for x in v):
                        key.append((k, c, tuple(v), tuple(x.__class__ for x in v)))
                    elif c is float:
                        key.append((k, c, repr(v)))
                    elif c is dict and all(x.__class__ in _BY_VALUE for x in v.values()) and all(
                            x.__class__ is str for x in v):
                        # a map of scalars (the {name: false} of a separator or negation, made
                        # anew each time): by value, in order, with the classes and the place
                        key.append((k, c, tuple(v.items()), tuple(x.__class__ for x in v.values())))
                        key[at] = ptr
                    else:  # a subschema (or a list, dict of them...): by identity, kept alive
                        key.append((k, id(v)))
                        key[at] = ptr
        return tuple(key)

    def recall(self, conv, key: tuple):
        """The stored result for ``key`` valid at ``conv``'s recursion depths (its effects on
        ``conv`` replayed), or ``_MISS``."""
        get = conv.ref_counts.get
        for result, (targets, depths), conversions, cuts, reasons, reads, _ in self.entries.get(key, ()):
            if tuple(map(get, targets, _ZEROS)) == depths:  # every depth read is as it was
                if conv.conversions + conversions > limits.MAX_CONVERSIONS:
                    return _MISS  # convert again: the limit is hit where it would be
                conv.conversions += conversions
                conv.cuts.extend(cuts)
                conv.empty_reasons.extend(reasons)
                conv.reads.append(reads)
                self.hits += 1
                return result
        return _MISS

    @staticmethod
    def mark(conv) -> tuple:
        """Where ``conv``'s logs stand before a conversion."""
        return len(conv.reads), conv.conversions, len(conv.cuts), len(conv.empty_reasons)

    def remember(self, conv, key: tuple, mark: tuple, result, flat: list) -> None:
        """Store ``result``, converted since ``mark``, for ``key``."""
        at, conversions, cuts, reasons = mark
        log = conv.reads
        reads: set = set()
        for r in log[at:]:  # a target pointer, or the reads of a nested conversion
            if r.__class__ is str:
                reads.add(r)
            else:
                reads |= r
        reads = frozenset(reads)
        log[at:] = [reads]  # the enclosing conversion reads these once, not again one by one
        # the depths as they were at the start (nested conversions restored theirs), missing
        # ones 0 (as ref_counts[t] reads them), beside their targets in one order
        targets = tuple(reads)
        deps = (targets, tuple(map(conv.ref_counts.get, targets, _ZEROS)))
        self.entries.setdefault(key, []).append(
            (result, deps, conv.conversions - conversions, tuple(conv.cuts[cuts:]),
             tuple(conv.empty_reasons[reasons:]), reads, flat))
