"""``multipleOf``: regexes for the multiples of a step within numeric bounds.

:func:`multiple_of_regex` handles what real schemas use:

* an integral step ``k`` (``1``, ``5``, ``10``, ``25``, ``100``, ``1.0``...)
  that divides a power of ten, ``10**m``: a multiple is any integer whose
  last ``m`` digits are a multiple of ``k``, so the regex is exact (every
  integer multiple within the bounds, written as a plain integer);
* a decimal step ``p / 10**d`` (``0.01``, ``0.5``, ``0.001``...): the
  documented subset of its multiples that are *binary* fractions too
  (``0.01`` -> multiples of ``0.25``; ``0.5`` -> all of them; ``0.001`` ->
  multiples of ``0.125``).  Those are exact floats, so ``jsonschema``'s float
  test ``instance / k`` is exact; a generic decimal multiple is not
  (``0.07 / 0.01 == 7.000000000000001`` fails there);
* any other step with bounds leaving at most :data:`MAX_ENUMERATED`
  multiples: those multiples, enumerated (each one checked with jsonschema's
  own formula).

Anything else is refused.  With a float step, values stay within ``2**53``
(where ``jsonschema``'s float division is exact).

>>> import re
>>> r = multiple_of_regex(25, [(0, False)], [(200, True)], integer_only=True)
>>> [n for n in range(-10, 300) if re.fullmatch(r, str(n))]
[0, 25, 50, 75, 100, 125, 150, 175]
>>> r = multiple_of_regex(0.01, [(0, False)], [(2, False)], integer_only=False)
>>> [t for t in ("0", "0.25", "1.5", "1.75", "2", "0.3", "2.25", "-0.5") if re.fullmatch(r, t)]
['0', '0.25', '1.5', '1.75', '2']
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Optional

from .ranges import integer_range_regex
from .regex_text import _alt, _lit
from .tokens import INTEGER

__all__ = ["MAX_ENUMERATED", "MAX_SUFFIXES", "multiple_of_regex"]

#: Most multiples enumerated one by one for a step without digit structure.
MAX_ENUMERATED = 2000

#: Most residues (last digits, or binary fractions) one alternation may list.
MAX_SUFFIXES = 1000

_FLOAT_EXACT = 2**53

#: Most binary-fraction residues listed for a decimal step (above: enumerated or refused).
_MAX_RESIDUES = 2**16


class MultipleOfError(ValueError):
    """The step cannot be honoured (the message says why)."""


def _step(k) -> Fraction:
    """The step as written (``0.01`` is 1/100, not the binary float)."""
    if isinstance(k, float):
        return Fraction(Decimal(repr(k)))
    return Fraction(k)


def _passes(x: Fraction, k) -> bool:
    """jsonschema's multipleOf test on the float/int that the text of ``x`` parses to."""
    inst = int(x) if x.denominator == 1 else float(x)
    if isinstance(k, float):
        q = inst / k
        return int(q) == q
    return not inst % k


def _bounds(lowers, uppers):
    """Tightest (value, exclusive) bounds as exact Fractions (the binary value of a float)."""
    lo = max(((Fraction(v), x) for v, x in lowers), key=lambda b: (b[0], b[1]), default=None)
    hi = min(((Fraction(v), x) for v, x in uppers), key=lambda b: (b[0], -b[1]), default=None)
    return lo, hi


def _frac_text(r: int, scale: int) -> str:
    """Decimal text of the fraction ``r / scale`` (``scale`` a power of two) without
    trailing zeros, dot included; ``""`` for 0."""
    if not r:
        return ""
    return _exact(Fraction(r, scale))[1:]


def _exact(x: Fraction) -> str:
    """Exact decimal text of a binary fraction (``0.125``, ``-3``), no exponent."""
    if x.denominator == 1:
        return str(x.numerator)
    with localcontext() as ctx:
        ctx.prec = 400
        return format((Decimal(x.numerator) / Decimal(x.denominator)).normalize(), "f")


def _nonneg(lo: int, hi: Optional[int], modulus: int, residues: list, text) -> Optional[str]:
    """Nonnegative integers X in [lo, hi] with X % modulus in ``residues``;
    ``text(i, r)`` writes X = i * modulus + r (its regex-escaped suffix when i > 0)."""
    if hi is not None and lo > hi:
        return None
    alts = []
    i_lo, i_hi = lo // modulus, None if hi is None else hi // modulus

    def one(i: int) -> Optional[str]:
        return _alt([_lit(text(i, r)) for r in residues
                     if lo <= i * modulus + r and (hi is None or i * modulus + r <= hi)])

    alts.append(one(i_lo))
    if i_hi is None or i_hi > i_lo + 1:
        middle = integer_range_regex(i_lo + 1, None if i_hi is None else i_hi - 1)
        tails = _alt([_lit(text(1, r)[1:]) for r in residues])
        if middle is not None and tails is not None:
            alts.append(middle + tails)
    if i_hi is not None and i_hi > i_lo:
        alts.append(one(i_hi))
    return _alt(alts)


def multiple_of_regex(k, lowers: list, uppers: list, integer_only: bool) -> Optional[str]:
    """Regex of (a documented subset of) the numbers that are multiples of ``k``
    and satisfy the bounds; None if there is none.

    ``lowers``/``uppers``: ``(bound, exclusive)`` pairs as written in the schema.
    ``integer_only``: the schema only admits integers.  Raises
    :class:`MultipleOfError` when the step has no supported structure.
    """
    if isinstance(k, bool) or not isinstance(k, (int, float)) or not k > 0 or not math.isfinite(k):
        raise MultipleOfError(f"multipleOf must be a positive number, not {k!r}")
    step = _step(k)
    if step.denominator == 1:
        unit = step                       # integral values: multiples of k
    else:
        # step = p / (2^x 5^y): its multiples that are binary fractions are the
        # multiples of p / 2^x; the integral ones, the multiples of p
        five = 1
        while (step * five).denominator % 5 == 0:
            five *= 5
        unit = step * five
        if integer_only:
            unit = Fraction(unit.numerator)
    lo, hi = _bounds(lowers, uppers)
    bounded = lo is not None and hi is not None
    scale = unit.denominator                          # a power of two
    a = unit.numerator                                # X = x * scale is a multiple of a
    # X range, integers
    x_lo = None if lo is None else (math.floor(lo[0] * scale) + 1 if lo[1] else math.ceil(lo[0] * scale))
    x_hi = None if hi is None else (math.ceil(hi[0] * scale) - 1 if hi[1] else math.floor(hi[0] * scale))
    if isinstance(k, float) or scale > 1:
        limit = _FLOAT_EXACT if step.denominator == 1 else min(
            _FLOAT_EXACT, math.floor(_FLOAT_EXACT * step * scale))
        x_lo = -limit if x_lo is None else max(x_lo, -limit)
        x_hi = limit if x_hi is None else min(x_hi, limit)
        if step.denominator != 1:
            # x / fl(k) = N / (1 + d) rounds to the integer N = x / k when
            # |fl(k) - k| / fl(k) < 2**-54 (half an ulp of N, relative, at worst)
            err = abs(Fraction(float(k)) - step) / Fraction(float(k))
            if err >= Fraction(1, 2**54):
                raise MultipleOfError(f"the float {k!r} is too far from {step} for "
                                      "instance / multipleOf to be exact")
    if x_lo is not None and x_hi is not None and x_lo > x_hi:
        return None
    modulus, m, residues = 1, 0, [0]
    if scale > 1 and a == 1:              # x = i + r / scale, every r
        if scale > MAX_SUFFIXES and (x_hi - x_lo < MAX_ENUMERATED or scale > _MAX_RESIDUES):
            # tiny steps (1e-20: scale 2**20, 1e-100: 2**100) leave few float-exact
            # values: list those, never the 2**d residues (a hang, or OverflowError)
            return _enumerated(k, a, scale, x_lo, x_hi, True)
        modulus, residues = scale, list(range(scale))
    elif scale == 1:
        twos = fives = 0
        rest = a
        while rest % 2 == 0:
            rest, twos = rest // 2, twos + 1
        while rest % 5 == 0:
            rest, fives = rest // 5, fives + 1
        m = max(twos, fives)              # a divides 10**m
        if rest != 1 or 10**m // a > MAX_SUFFIXES:
            return _enumerated(k, a, scale, x_lo, x_hi, bounded)
        modulus, residues = 10**m, list(range(0, 10**m, a))
    else:
        return _enumerated(k, a, scale, x_lo, x_hi, bounded)

    if modulus == 1:                      # every integer in range
        return INTEGER if x_lo is None and x_hi is None else integer_range_regex(x_lo, x_hi)

    def text(i: int, r: int) -> str:
        if scale > 1:
            return str(i) + _frac_text(r, scale)
        if i == 0:
            return str(r)
        return str(i) + (str(r).zfill(m) if m else "")

    alts = [_nonneg(0 if x_lo is None else max(x_lo, 0), x_hi, modulus, residues, text)]
    if x_lo is None or x_lo < 0:
        neg_lo = 1 if x_hi is None or x_hi >= 0 else -x_hi
        body = _nonneg(neg_lo, None if x_lo is None else -x_lo, modulus, residues, text)
        if body is not None:
            alts.append("-" + body)
    return _alt(alts)


def _enumerated(k, a: int, scale: int, x_lo: Optional[int], x_hi: Optional[int],
                bounded: bool) -> Optional[str]:
    if not bounded:
        raise MultipleOfError(f"multiples of {k!r} have no digit structure the regex can "
                              "follow; bound the value with minimum and maximum (at most "
                              f"MAX_ENUMERATED={MAX_ENUMERATED} multiples) or use a step that "
                              "divides a power of ten")
    first, last = -((-x_lo) // a), x_hi // a
    if last - first + 1 > MAX_ENUMERATED:
        raise MultipleOfError(f"the bounds leave {last - first + 1} multiples of {k!r}, more "
                              f"than MAX_ENUMERATED={MAX_ENUMERATED}, and the step has no digit "
                              "structure the regex can follow; narrow the bounds or use a step "
                              "that divides a power of ten")
    texts = []
    for n in range(first, last + 1):
        x = Fraction(n * a, scale)
        if not _passes(x, k):
            continue
        texts.append(_exact(x))
    return _alt([_lit(t) for t in texts])
