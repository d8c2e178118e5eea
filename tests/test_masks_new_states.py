"""New states of the CPU layout (issue #12, part 15): the shortcuts that store a new
state's id list are pinned to independent oracles.

* ``_id_list`` (packed bits -> the shorter of the allowed / banned id lists, read as
  64-bit words) against ``np.flatnonzero`` of the unpacked bits, through each of its
  branches (a few words, nonzero bytes, dense, banned), at widths that cut words and bytes;
* a table built one state at a time through ``row()`` (the one-row step: no batch
  arrays) against one built in a single batch and one built from bool masks, with the
  steps and row arrays grown several times, steps written on the host (numpy view) or
  through torch (the accelerator path), and against the engine's masks;
* the same table filled from several threads at once.
"""

import threading

import numpy as np
import pytest
import torch

from hf_constrained import RegexConstraint
from hf_constrained import masks as masks_module
from hf_constrained.constraint import FINISHED
from engine_checks import in_threads
from hf_constrained.masks import SparseMasks, _id_list
from test_masks_packed_store import _MaskOnly  # the engine with its packed reader hidden

WIDTHS = [1, 7, 8, 9, 63, 64, 65, 127, 128, 129, 1000, 4097, 128815, 129280, 129357]


def _oracle(allowed: np.ndarray):
    keep = 2 * int(allowed.sum()) <= len(allowed)
    return keep, np.flatnonzero(allowed if keep else ~allowed)


def _cases(width, rng):
    """Allowed masks over ``width`` ids that take every branch of ``_id_list``."""
    yield np.zeros(width, bool)
    yield np.ones(width, bool)
    # at 129k: 0.0001 a few nonzero words, 0.002 many words with few nonzero bytes,
    # 0.02-0.49 dense, 0.51-0.9999 banned lists (from dense to a few words)
    for frac in (0.0001, 0.002, 0.02, 0.2, 0.49, 0.5, 0.51, 0.8, 0.98, 0.9999):
        yield rng.random(width) < frac
    m = np.zeros(width, bool)
    m[-1] = True  # the last id alone (the tail of the last word)
    yield m
    yield ~m
    if width > 200:  # a few clustered runs: few words, many bits in each
        m = np.zeros(width, bool)
        for a in rng.integers(0, width - 70, 4):
            m[a: a + 64] = True
        yield m
        yield ~m


@pytest.mark.parametrize("width", WIDTHS)
def test_id_list_equals_flatnonzero(width):
    rng = np.random.default_rng(width)
    for allowed in _cases(width, rng):
        bits = np.packbits(allowed, bitorder="little")
        keep, ids = _id_list(bits.copy(), width)
        want_keep, want = _oracle(allowed)
        assert bool(keep) == want_keep, (width, int(allowed.sum()))
        assert ids.dtype == np.int64 and np.array_equal(ids, want), (width, int(allowed.sum()), keep)


def test_id_list_ignores_nothing_below_the_width_and_clears_beyond_it():
    # a banned list is the zero bits *below* the width: padding bits beyond it never count
    for width in (9, 63, 65, 129357):
        allowed = np.ones(width, bool)
        allowed[::3] = False
        keep, ids = _id_list(np.packbits(allowed, bitorder="little"), width)
        assert not keep and np.array_equal(ids, np.arange(0, width, 3))


@pytest.mark.parametrize("width", [64, 129, 1000, 4097, 129280])
def test_id_list_few_words_path_at_its_bounds(width):
    """The Python-int listing of a handful of ids (``_FEW_WORDS`` nonzero words holding at
    most ``_FEW_IDS`` bits) at and around both bounds, bits at both ends of their words."""
    rng = np.random.default_rng(width)
    words_max, ids_max = masks_module._FEW_WORDS, masks_module._FEW_IDS
    n_words = (width + 63) // 64
    for k in sorted({1, 2, words_max - 1, words_max, words_max + 1}):
        for n in sorted({k, ids_max - 1, ids_max, ids_max + 1, 2 * k}):
            if k > n_words or n < k or n > 64 * k or n > width:
                continue
            at = np.sort(rng.choice(n_words, k, replace=False))
            ids = set((at * 64).tolist())  # bit 0 of each word
            if n > k:
                ids.add(int(min(at[-1] * 64 + 63, width - 1)))  # the last bit of the last word
            spare = [i for w in at.tolist() for i in range(w * 64, min(w * 64 + 64, width)) if i not in ids]
            if len(spare) < n - len(ids):  # (the last word is short)
                continue
            ids |= set(rng.choice(spare, max(0, n - len(ids)), replace=False).tolist())
            allowed = np.zeros(width, bool)
            allowed[sorted(ids)] = True
            keep, got = _id_list(np.packbits(allowed, bitorder="little"), width)
            want_keep, want = _oracle(allowed)
            assert bool(keep) == want_keep and got.dtype == np.int64, (width, k, n)
            assert np.array_equal(got, want), (width, k, n)


PATTERNS = [r'[ ]?\{"name": "[^"\\]{0,12}", "tags": \[("[a-z]{1,4}"(, )?){0,3}\]\}', r"[^\n]{0,20}",
            r"(yes|no|maybe)[.!]"]


@pytest.fixture(scope="module")
def engine(deepseek):
    return RegexConstraint.from_tokenizer(PATTERNS, deepseek)


def _states(rc, depth=4, fan=6):
    states, cur = [], set(rc.starts.tolist())
    for _ in range(depth):
        states += sorted(cur)
        cur = {int(t) for s in cur for t in rc.successors(s)[:fan]} - set(states)
    return states


def _same_tables(a: SparseMasks, b: SparseMasks, states):
    """Equal masks state by state (rows may be numbered differently)."""
    for s in [FINISHED] + list(states):
        ra, rb = a.row(s), b.row(s)
        assert bool(a.keep[ra]) == bool(b.keep[rb]), s
        assert a.count[ra] == b.count[rb], s
        assert torch.equal(a.row_ids(ra), b.row_ids(rb)), s
        st, n = int(a.start[ra]), int(a.count[ra])
        assert torch.equal(torch.cumsum(a.steps[st: st + n], 0), a.row_ids(ra)), s  # the steps themselves


@pytest.mark.parametrize("host_steps", [True, False])
@pytest.mark.parametrize("width_delta", [0, -3, 5])
def test_one_at_a_time_equals_batch_and_bool_path(deepseek, engine, monkeypatch, host_steps, width_delta):
    monkeypatch.setattr(SparseMasks, "HOST_STEPS", host_steps)
    monkeypatch.setattr(SparseMasks, "STEPS_RESERVE", 64)  # grow the steps many times
    width = len(deepseek) + width_delta
    states = _states(engine, depth=5, fan=8)  # over 64: the row arrays grow too
    one = SparseMasks(engine, width, "cpu")
    assert (one._steps_host is not None) == host_steps
    for s in sorted(states):  # the one-row step: rows added by row(), one by one, in the
        one.row(s)  # order a batch adds them (np.unique), so that the tables are identical
    batch = SparseMasks(engine, width, "cpu")
    batch.host_rows(np.array(states))
    slow = SparseMasks(_MaskOnly(engine), width, "cpu")
    slow.host_rows(np.array(states))
    assert one.used == batch.used == slow.used == len(states) + 1
    assert one.used > 64 and len(one.start) > 64
    for name in ("start", "count", "first", "last", "keep"):  # same order: identical tables
        assert np.array_equal(getattr(one, name)[: one.used], getattr(batch, name)[: batch.used]), name
        assert np.array_equal(getattr(one, name)[: one.used], getattr(slow, name)[: slow.used]), name
    assert torch.equal(one.steps[: one.num_steps], slow.steps[: slow.num_steps])
    assert one.keep[: one.used].any() and not one.keep[: one.used].all()  # both kinds of list
    _same_tables(one, slow, states)
    for s in states:  # and the engine's masks, the ids beyond the width left out
        r = one.row(s)
        allowed = engine.allowed_mask(s, width)
        assert np.array_equal(one.row_ids(r).numpy(), np.flatnonzero(allowed if one.keep[r] else ~allowed))


def test_masked_scores_after_growth_equal_a_dense_reference(deepseek, engine, monkeypatch):
    """Scores masked one row at a time and all rows at once, tables grown from tiny reserves."""
    monkeypatch.setattr(SparseMasks, "STEPS_RESERVE", 16)
    width = len(deepseek)
    states = _states(engine)
    table = SparseMasks(engine, width, "cpu")
    scores = torch.randn(len(states), width)
    ninf = torch.tensor(float("-inf"))
    for i, s in enumerate(states):
        want = torch.where(torch.from_numpy(engine.allowed_mask(s, width)), scores[i], ninf)
        assert torch.equal(table.apply(scores[i: i + 1].clone(), np.array([s]), inplace=True)[0], want)
        assert torch.equal(table.apply(scores[i: i + 1], np.array([s]), inplace=False)[0], want)
    fresh = SparseMasks(engine, width, "cpu")
    got = fresh.apply(scores.clone(), np.array(states), inplace=True)
    for i, s in enumerate(states):
        assert torch.equal(got[i], torch.where(torch.from_numpy(engine.allowed_mask(s, width)), scores[i], ninf))


def test_rows_added_from_several_threads(deepseek, engine, monkeypatch):
    monkeypatch.setattr(SparseMasks, "STEPS_RESERVE", 32)
    width = len(deepseek)
    states = _states(engine, depth=5, fan=8)
    for s in states:  # the engine's masks first: the threads race on the table only
        engine.allowed_bits(s, width)
    table = SparseMasks(engine, width, "cpu")
    errors, barrier = [], threading.Barrier(4)

    def work(seed):
        try:
            order = np.random.default_rng(seed).permutation(states).tolist()
            barrier.wait()
            for s in order:
                r = table.row(s)
                allowed = engine.allowed_mask(s, width)
                want = np.flatnonzero(allowed if table.keep[r] else ~allowed)
                if not np.array_equal(table.row_ids(r).numpy(), want):
                    errors.append(s)
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    in_threads(work, 4)
    assert not errors, errors[:3]
    assert table.used == len(set(states)) + 1  # each state stored once
    reference = SparseMasks(_MaskOnly(engine), width, "cpu")
    reference.host_rows(np.array(states))
    _same_tables(table, reference, states)


class _Everything:
    """State 1 allows every id (an empty banned list), state 2 only id 3; EOS is 0."""

    starts, eos_token_ids, pad_token_id, vocab_size, cacheable = np.array([1]), np.array([0]), None, 200, True

    def __init__(self, packed):
        self.packed = packed

    def allowed_mask(self, state, width):
        mask = np.zeros(width, bool)
        if state == 1:
            mask[: self.vocab_size] = True
        elif state == 2:
            mask[3] = True
        else:
            mask[0] = True
        return mask

    def allowed_bits(self, state, width):
        return np.packbits(self.allowed_mask(state, width), bitorder="little") if self.packed else None


@pytest.mark.parametrize("packed", [True, False])
def test_an_empty_list(packed):
    table = SparseMasks(_Everything(packed), 200, "cpu")
    r1, r2 = table.row(1), table.row(2)
    assert not table.keep[r1] and table.count[r1] == 0 and (table.first[r1], table.last[r1]) == (0, 0)
    assert table.keep[r2] and table.row_ids(r2).tolist() == [3]
    scores = torch.randn(2, 200)
    assert torch.equal(table.apply(scores[:1].clone(), np.array([1]), inplace=True), scores[:1])
    both = table.apply(scores.clone(), np.array([1, 2]), inplace=True)
    assert torch.equal(both[0], scores[0]) and torch.isfinite(both[1]).nonzero()[:, 0].tolist() == [3]
