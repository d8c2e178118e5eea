"""The disk cache's reader (issue #12, part 19): files that ``np.savez`` wrote are read
from their bytes (one read, no zip or ``.npy`` header parsing by numpy), equal to what
``np.load`` gives; anything else falls back to ``np.load``; a file already there is read
without the build lock."""

import io
import os

import numpy as np
import pytest

from hf_constrained import RegexProcessor, cache
from hf_constrained.vocabulary import Vocabulary

ARRAYS = {
    "i8": np.arange(7, dtype=np.int64) - 3,
    "i4_2d": np.arange(12, dtype=np.int32).reshape(3, 4),
    "u1": np.frombuffer(os.urandom(33), dtype=np.uint8),
    "b1": np.array([True, False, True]),
    "f4": np.linspace(0, 1, 5, dtype=np.float32),
    "big_endian": np.arange(4, dtype=">i4"),
    "empty": np.zeros(0, dtype=np.int64),
    "empty_2d": np.zeros((2, 0, 3), dtype=np.uint16),
    "scalar": np.uint8(7),
    "wide": np.arange(70_000, dtype=np.int64),  # past 64 KiB: the .npy header's own layout unchanged
}


def _npz(compressed=False, **arrays) -> bytes:
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **arrays)
    return buf.getvalue()


def test_fast_reader_equals_np_load():
    data = _npz(**ARRAYS)
    got = cache._read_stored_npz(bytearray(data))
    assert got is not None, "np.savez files must take the fast path"
    with np.load(io.BytesIO(data), allow_pickle=False) as ref:
        assert sorted(got) == sorted(ref.files)
        for k in ref.files:
            assert got[k].dtype == ref[k].dtype and got[k].shape == ref[k].shape, k
            assert np.array_equal(got[k], ref[k]), k
            assert got[k].flags.writeable, k  # as np.load's arrays
            assert got[k].flags.aligned, k


@pytest.mark.parametrize("case", ["compressed", "object", "structured", "fortran"])
def test_what_the_fast_reader_does_not_take_goes_to_np_load(case):
    if case == "compressed":
        data = _npz(compressed=True, a=np.arange(5))
    elif case == "object":
        data = _npz(a=np.array([{"x": 1}], dtype=object))
    elif case == "structured":
        data = _npz(a=np.zeros(2, dtype=[("x", "<i4"), ("y", "<f8")]))
    else:
        data = _npz(a=np.asfortranarray(np.arange(6).reshape(2, 3)))
    assert cache._read_stored_npz(bytearray(data)) is None


def test_damaged_files_are_refused(tmp_path):
    path = tmp_path / "x.npz"
    cache.save(path, "k", {"a": np.arange(10), "b": np.ones((3, 3), np.uint8)})
    good = path.read_bytes()
    assert cache.load(path, "k") is not None
    for cut in range(0, len(good), 7):  # every truncation
        path.write_bytes(good[:cut])
        assert cache.load(path, "k") is None, cut
    # a member's shape grown in its .npy header: sizes no longer agree
    bad = good.replace(b"'shape': (10,)", b"'shape': (11,)")
    assert bad != good
    path.write_bytes(bad)
    assert cache._read_stored_npz(bytearray(bad)) is None and cache.load(path, "k") is None
    path.write_bytes(good)
    assert cache.load(path, "other") is None and cache.load(path, "k")["a"].tolist() == list(range(10))


def test_saved_files_are_read_without_np_load(tmp_path, monkeypatch):
    path = tmp_path / "x.npz"
    arrays = {k: v for k, v in ARRAYS.items() if k != "scalar"}
    assert cache.save(path, "key", arrays)

    def no_np_load(*a, **k):
        raise AssertionError("np.load used for a file np.savez wrote")

    monkeypatch.setattr(cache.np, "load", no_np_load)
    got = cache.load(path, "key")
    assert sorted(got) == sorted(arrays)
    for k, v in arrays.items():
        assert got[k].dtype == v.dtype and np.array_equal(got[k], v), k


def test_warm_processor_reads_the_file_without_the_lock(tmp_path, monkeypatch, local_tok):
    Vocabulary._cache.clear()
    built = RegexProcessor(r"[a-z]{1,5}@x\.(com|org)", local_tok, cache_dir=tmp_path)
    assert built.index_source == "built"

    def no_lock(path):
        raise AssertionError("the build lock taken for a file that is there")

    monkeypatch.setattr(cache, "locked", no_lock)
    again = RegexProcessor(r"[a-z]{1,5}@x\.(com|org)", local_tok, cache_dir=tmp_path)
    assert again.index_source == "disk"
    s = int(again.constraint.starts[0])
    assert np.array_equal(again.constraint.allowed_ids(s), built.constraint.allowed_ids(int(built.constraint.starts[0])))
