"""Lexical regions of a grammar's configurations, shared between parse positions.

:class:`SharedRegions` is the half of :class:`~.constraint._GrammarIndex` that finds a
configuration's lexical region (:mod:`hf_constrained.region`: the states a string's body
loops through, whose tokens come from one walk shared per vocabulary). A string body at a
new parse position is a configuration of lexemes in progress that all started at one new
parser node; its region is the region of the body at any earlier position with its node's
slot put in, so it is searched once per terminal and lexer states, and searched over such
configurations only (:meth:`SharedRegions._region`).

>>> from hf_constrained.grammar.constraint import GrammarConstraint
>>> from hf_constrained.vocabulary import Vocabulary
>>> vocab = Vocabulary.from_token_bytes([None] + [bytes([b]) for b in range(256)] + [b'ab', b'"]'])
>>> c = GrammarConstraint('start: v\\nv: STRING | "[" v "]"\\nSTRING: /"[a-z]*"/', vocab, eos_token_id=0)
>>> first, second = c.state_of_text('["'), c.state_of_text('[["')   # a body at two positions
>>> bool(c.index._region(first)[0][0] == first), c.index.shared_regions
(True, 0)
>>> bool(c.index._region(second)[0][0] == second), c.index.shared_regions
(True, 1)
"""

from __future__ import annotations

import numpy as np

from ..region import find_region
from .filling import PAIR_LOW, PAIR_SHIFT, pack


class SharedRegions:
    """Region search and sharing for :class:`~hf_constrained.index.TokenIndex` over a
    :class:`~.configs.ConfigAutomaton` (a mixin: it reads the index's ``dfa`` and region
    bounds, and calls the plain search as ``super()._region``)."""

    def _init_regions(self) -> None:
        self._shared_regions: dict = {}   # _pure_shape key -> (lanes of each region state, local table)
        self.shared_regions = 0           # regions taken from there (for tests)

    #: reuse a lexical region found at another parse position for the same lexemes in progress
    #: (:meth:`_region`; False: always search, as the plain index does)
    SHARE_REGIONS = True

    def _region(self, q: int):
        """The lexical region of ``q``. A configuration with only lexemes in progress, all
        started at one parser node (a string's body: ``"`` read at a new position), has the
        region of any other such configuration with the same lexer states, terminals and
        scan/ignore kind, with its node's slot put in: a byte that ends a lexeme leaves
        the region (its successor has pending scans or a boundary node), one that does not
        gives the configuration of the lanes that go on (:meth:`.filling.CellFilling._fill_column`),
        which depends on the lexer states alone. So after the first such region (whose
        search expands every state within three bytes, ~36 rows and ~60 new configurations
        in the JSON grammar), the next parse position interns its region's states and
        fills only the cells that its exit walk reads (any region gives the same mask:
        :meth:`~hf_constrained.index.TokenIndex._region_parts`)."""
        a = self.dfa
        shape = self._pure_shape(q) if self.SHARE_REGIONS else None
        if shape is not None:
            got = self._shared_regions.get(shape[1])
            if got is not None:
                lanes, table = got
                slot = shape[0]
                states = np.array([a._intern((), tuple([pack(slot, st) for st in ls]), False) for ls in lanes],
                                  dtype=np.int64)
                if int(states[0]) == q:
                    self.shared_regions += 1
                    return states, table
        if shape is not None:
            got = self._pure_region(q, shape[0])
        # a lexical region's search reads its states' rows directly: fill them whole
        while shape is None:
            got = super()._region(q)
            if got is None:
                return None
            todo = [s for s in got[0].tolist() if not a.expanded[s]]
            if not todo:
                break
            for s in todo:
                a.expand(s)
        if got is None:
            return None
        if shape is not None:
            lanes = []
            for s in got[0].tolist():
                other = self._pure_shape(s)
                if other is None or other[0] != shape[0]:
                    return got   # a region with other kinds of states: not shared
                lanes.append(tuple([x & PAIR_LOW for x in a._closed_key(s)[1]]))
            self._shared_regions[shape[1]] = (tuple(lanes), got[1])
        return got

    def _is_pure(self, cid: int, slot: int) -> bool:
        """Whether ``cid`` holds only lexemes in progress from ``slot`` (read from its key:
        a configuration with pending scans is not, and is not closed for asking)."""
        boundary, threads, strip, pending = self.dfa._keys[cid]
        return not (boundary or strip or pending or not threads or slot in self.dfa._longest_slots) and all(
            x >> PAIR_SHIFT == slot for x in threads)

    def _pure_region(self, q: int, slot: int):
        """:func:`~hf_constrained.region.find_region` over the configurations with only
        lexemes in progress from ``slot``: its search expands every candidate within three
        bytes, also those where a lexeme ends (a closing quote and what follows), which can
        never be in a region of this kind that is shared; here they are not candidates and
        stay unexpanded (any region gives the same mask)."""
        return find_region(self.dfa, q, self.REGION_MIN_LOOPS, self.REGION_DEPTH, self.REGION_STATES,
                           admit=lambda t: self._is_pure(t, slot))

    def _pure_shape(self, q: int):
        """``(slot, key)`` of a configuration whose content is only lexemes in progress
        started at one slot (no boundary node, no leading-space strip), else None; ``key``:
        the slot's terminal and kind and the lanes' lexer states."""
        a = self.dfa
        boundary, threads, strip, _ = a._closed_key(q)
        if boundary or strip or not threads:
            return None
        slot = threads[0] >> PAIR_SHIFT
        if any(x >> PAIR_SHIFT != slot for x in threads) or slot in a._longest_slots:
            return None     # (a LONGEST ignored lexeme's successors start its node's lanes)
        _, term, ign = a.slot_parts(slot)
        return slot, (term, ign, tuple([x & PAIR_LOW for x in threads]))
