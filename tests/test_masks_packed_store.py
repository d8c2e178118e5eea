"""The CPU layout reads a regex engine's packed bits (``Constraint.allowed_bits``)
instead of a 129k-wide bool mask per new state (issue #12): its table must be
exactly the one the bool-mask path builds, at any width."""

import numpy as np
import pytest
import torch

from hf_constrained import RegexConstraint
from hf_constrained.constraint import FINISHED, packed_ids
from hf_constrained import masks as masks_module
from hf_constrained.masks import SparseMasks, bit_count


class _MaskOnly:
    """The engine with its packed reader hidden: SparseMasks takes the bool-mask path."""

    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def allowed_bits(self, state, width):
        return None


def test_packed_ids_equal_flatnonzero():
    rng = np.random.default_rng(12)
    for n in (0, 1, 7, 8, 9, 100, 2000, 16160):
        for density in (0.0, 0.001, 0.05, 0.5, 1.0):
            bits = np.packbits(rng.random(n) < density, bitorder="little")
            want = np.flatnonzero(np.unpackbits(bits, bitorder="little"))
            got = packed_ids(bits)
            assert got.dtype == np.int64 and np.array_equal(got, want), (n, density)


def test_bit_count_with_and_without_numpy_bitwise_count(monkeypatch):
    """numpy >= 1.24 is declared; ``np.bitwise_count`` only exists from numpy 2.0."""
    rng = np.random.default_rng(3)
    arrays = [rng.integers(0, 256, n, dtype=np.uint8) for n in (0, 1, 5, 16160)]
    arrays += [a[: len(a) // 8 * 8].view(np.uint64) for a in arrays]  # 64-bit words too
    want = [int(np.unpackbits(a.view(np.uint8)).sum()) for a in arrays]
    assert [bit_count(a) for a in arrays] == want
    monkeypatch.delattr(np, "bitwise_count", raising=False)
    assert not hasattr(masks_module.np, "bitwise_count")
    assert [bit_count(a) for a in arrays] == want


@pytest.mark.parametrize("width_delta", [0, -3, 5, 64])
def test_packed_store_equals_mask_store(deepseek, width_delta):
    rc = RegexConstraint.from_tokenizer(
        [r'[ ]?\{"name": "[^"\\]{0,12}", "tags": \[("[a-z]{1,4}"(, )?){0,3}\]\}', r"[^\n]{0,20}"], deepseek)
    width = len(deepseek) + width_delta
    assert rc.allowed_bits(int(rc.starts[0]), width) is not None
    states, cur = [FINISHED], set(rc.starts.tolist())
    for _ in range(4):  # a few states deep: restrictive (kept ids) and permissive (banned ids) ones
        states += sorted(cur)
        cur = {int(t) for s in cur for t in rc.successors(s)[:6]} - set(states)
    fast, slow = SparseMasks(rc, width, "cpu"), SparseMasks(_MaskOnly(rc), width, "cpu")
    fast.host_rows(np.array(states[1:])), slow.host_rows(np.array(states[1:]))
    assert fast.used == slow.used == len(set(states))
    assert fast.keep[: fast.used].any() and not fast.keep[: fast.used].all()  # both kinds of list
    for name in ("start", "count", "first", "last", "keep"):
        assert np.array_equal(getattr(fast, name)[: fast.used], getattr(slow, name)[: slow.used]), name
    assert torch.equal(fast.steps[: fast.num_steps], slow.steps[: slow.num_steps])
    for s in states:  # and the masks are the engine's, ids beyond the width left out
        r = fast.row(s)
        ids = fast.row_ids(r).numpy()
        allowed = rc.allowed_mask(s, width)
        assert np.array_equal(ids, np.flatnonzero(allowed if fast.keep[r] else ~allowed))


def test_allowed_bits_is_a_fresh_array(deepseek):
    # the layout inverts it in place for a banned list: the index's masks must not change
    rc = RegexConstraint.from_tokenizer([r"[^\n]{0,20}"], deepseek)
    s = int(rc.starts[0])
    before = rc.index.bits(s).copy()
    SparseMasks(rc, len(deepseek), "cpu").row(s)
    assert np.array_equal(rc.index.bits(s), before)
    bits = rc.allowed_bits(s, len(deepseek))
    bits[:] = 0
    assert np.array_equal(rc.index.bits(s), before)


@pytest.mark.parametrize("width", [2, 3, 9, 100])
def test_allowed_bits_clear_beyond_the_width(deepseek, width):
    # DeepSeek's EOS is 1 and its pad 2: at width 2 the finished row keeps EOS only
    rc = RegexConstraint.from_tokenizer([r"[0-9a-z ]{1,5}"], deepseek)
    for s in (FINISHED, int(rc.starts[0])):
        bits = rc.allowed_bits(s, width)
        assert len(bits) == (width + 7) // 8
        assert np.array_equal(packed_ids(bits), np.flatnonzero(rc.allowed_mask(s, width)))
        fast, slow = SparseMasks(rc, width, "cpu"), SparseMasks(_MaskOnly(rc), width, "cpu")
        r = fast.row(s)
        assert r == slow.row(s) and fast.keep[r] == slow.keep[r]
        assert torch.equal(fast.row_ids(r), slow.row_ids(r))


@pytest.mark.parametrize("width_delta", [0, -8, -3, 5, 64])
def test_packed_allowed_reads_the_stored_bits_read_only(deepseek, width_delta):
    """The CPU layout's reader: allowed_bits' bytes, read-only, the index's own stored
    mask (no copy) where the width allows it; writing through it fails loudly."""
    rc = RegexConstraint.from_tokenizer([r"[^\n]{0,20}", r"[0-9]{1,3}"], deepseek)
    width = len(deepseek) + width_delta
    for s in [FINISHED] + rc.starts.tolist():
        stored, before = rc.index.bits(s), rc.index.bits(s).copy()
        bits = rc.packed_allowed(s, width)
        assert np.array_equal(bits, rc.allowed_bits(s, width)), s
        assert not bits.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            bits[0] = 0
        with pytest.raises(ValueError, match="read-only"):
            np.invert(bits, out=bits)
        if width_delta in (0, -8):  # whole bytes within the stored mask: a view of it
            assert np.shares_memory(bits, stored)
        assert np.array_equal(rc.index.bits(s), before)


def test_a_banned_list_from_the_stored_bits_leaves_them_unchanged(deepseek):
    # most tokens allowed at the start: the layout lists the banned ids from inverted bits
    rc = RegexConstraint.from_tokenizer([r"[^\n]{0,20}"], deepseek)
    s = int(rc.starts[0])
    before = rc.index.bits(s).copy()
    table = SparseMasks(rc, len(deepseek), "cpu")
    r = table.row(s)
    assert not table.keep[r] and table.count[r] > 0
    assert np.array_equal(rc.index.bits(s), before)
    assert np.array_equal(table.row_ids(r).numpy(), np.flatnonzero(~rc.allowed_mask(s, len(deepseek))))


def test_default_packed_allowed_is_allowed_bits_read_only():
    from hf_constrained.constraint import Constraint

    class Few(Constraint):
        starts, eos_token_ids, vocab_size = np.array([1]), np.array([0]), 20

        def allowed_ids(self, q):
            return np.array([0, 5, 19], dtype=np.int32)

        def allowed_bits(self, q, width):
            return np.packbits(self.allowed_mask(q, width), bitorder="little")

    bits = Few().packed_allowed(1, 20)
    assert packed_ids(bits).tolist() == [0, 5, 19] and not bits.flags.writeable
    assert Constraint.packed_allowed(Few.__new__(Constraint), 1, 20) is None  # no packed form
    table = SparseMasks(Few(), 20, "cpu")
    assert table.row_ids(table.row(1)).tolist() == [0, 5, 19]
