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


class _Bodies:
    """States 1 and 2: the same mostly-allowed mask (separate arrays); 3: another one;
    4: a few ids. Packed bits only through allowed_bits."""

    starts, eos_token_ids, pad_token_id, vocab_size = np.array([1]), np.array([0]), None, 1000

    def allowed_mask(self, q, width):
        m = np.zeros(width, bool)
        if q in (1, 2):
            m[: self.vocab_size] = np.arange(self.vocab_size) % 7 != 3
        elif q == 3:
            m[: self.vocab_size] = np.arange(self.vocab_size) % 5 != 1
        else:
            m[[0, 9, 700]] = True
        return m

    def allowed_bits(self, q, width):
        return np.packbits(self.allowed_mask(q, width), bitorder="little")


@pytest.mark.parametrize("budget", [8 << 20, 0])
def test_banned_lists_reused_by_content(monkeypatch, budget):
    """States with the same bits share one banned list (listed once); different bits
    never do; with no budget nothing is kept and every list is listed."""
    monkeypatch.setattr(SparseMasks, "BANNED_CACHE_BYTES", budget)
    engine, width = _Bodies(), 1003
    calls = []
    real = masks_module.set_bit_ids
    monkeypatch.setattr(masks_module, "set_bit_ids", lambda *a: calls.append(1) or real(*a))
    table = SparseMasks(engine, width, "cpu")
    rows = [table.row(q) for q in (1, 3, 2, 4, 1)]
    assert len(set(rows)) == 4
    for q, r in zip((1, 3, 2, 4), rows):
        allowed = engine.allowed_mask(q, width)
        want = np.flatnonzero(allowed if table.keep[r] else ~allowed)
        assert np.array_equal(table.row_ids(r).numpy(), want), q
        assert table.keep[r] == (q == 4)
    assert len(calls) == (2 if budget else 3)  # state 2's list found, not listed, within budget
    assert len(table._banned.lists) == (2 if budget else 0)
    scores = torch.randn(3, width)
    out = table.apply(scores.clone(), np.array([1, 2, 3]), inplace=True)
    for i, q in enumerate((1, 2, 3)):
        allowed = torch.from_numpy(engine.allowed_mask(q, width))
        assert torch.equal(out[i][allowed], scores[i][allowed]) and torch.isinf(out[i][~allowed]).all()


def test_json_walk_table_equals_mask_path(deepseek):
    """A JSON walk whose string bodies repeat (the reuse above, on the regex engine)."""
    from hf_constrained import JSONProcessor
    schema = {"type": "object", "properties": {k: {"type": "string"} for k in "abcd"},
              "required": list("abcd")}
    rc = JSONProcessor(schema, deepseek, cache_dir=False).constraint
    doc = '{"a": "x y", "b": "hello", "c": "zz top", "d": "w"}'
    states, s = [], rc.starts.copy()
    for t in deepseek.encode(doc, add_special_tokens=False):
        states.append(int(s[0]))
        s = rc.advance(s, np.array([t]))
    assert int(s[0]) > 0
    width = len(deepseek)
    fast, slow = SparseMasks(rc, width, "cpu"), SparseMasks(_MaskOnly(rc), width, "cpu")
    for q in states:  # one at a time, as the one-row step stores them
        fast.row(q), slow.row(q)
    assert len(fast._banned.lists) < sum(1 for q in set(states) if not fast.keep[fast.row(q)])
    for name in ("start", "count", "first", "last", "keep"):
        assert np.array_equal(getattr(fast, name)[: fast.used], getattr(slow, name)[: slow.used]), name
    assert torch.equal(fast.steps[: fast.num_steps], slow.steps[: slow.num_steps])
