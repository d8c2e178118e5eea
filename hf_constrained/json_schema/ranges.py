"""Exact regexes for integer and decimal ranges."""

from __future__ import annotations

from decimal import Decimal
from functools import lru_cache
from typing import Optional

from .regex_text import _alt, _concat, _group, _repeat

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
