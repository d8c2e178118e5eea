"""The disk cache's file format (issue #12, part 19): one ``.npy`` byte array per file
(one ``np.load``, where an ``.npz`` paid a zip member per array), arrays read back equal,
writable and aligned; damaged, foreign and old files refused; a file already there is
read without the build lock."""

import io
import json
import math
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


def test_round_trip_keeps_dtype_shape_values(tmp_path):
    path = tmp_path / "x.npy"
    assert cache.save(path, "key", ARRAYS)
    got = cache.load(path, "key")
    assert sorted(got) == sorted(ARRAYS)
    for k, v in ARRAYS.items():
        v = np.asarray(v)
        assert got[k].dtype == v.dtype and got[k].shape == v.shape, k
        assert np.array_equal(got[k], v), k
        assert got[k].flags.writeable, k  # as np.load's arrays
        assert got[k].flags.aligned, k


def test_one_array_read_by_numpy(tmp_path):
    """The file is one plain .npy byte array: numpy reads it without pickling."""
    path = tmp_path / "x.npy"
    cache.save(path, "key", {"a": np.arange(4), "b": np.ones(3, np.uint8)})
    blob = np.load(path, allow_pickle=False)
    assert blob.dtype == np.uint8 and blob.ndim == 1
    calls = []
    real = np.load
    orig = cache.np.load

    def counting(*a, **k):
        calls.append(a)
        return real(*a, **k)

    cache.np.load = counting
    try:
        assert cache.load(path, "key")["a"].tolist() == [0, 1, 2, 3]
    finally:
        cache.np.load = orig
    assert len(calls) == 1


@pytest.mark.parametrize("case", ["object", "structured"])
def test_only_plain_numeric_arrays_are_stored(tmp_path, case):
    a = np.array([{"x": 1}], dtype=object) if case == "object" else np.zeros(2, dtype=[("x", "<i4")])
    with pytest.raises(ValueError, match="only plain numeric arrays"):
        cache.save(tmp_path / "x.npy", "k", {"a": a})


def test_damaged_or_foreign_files_are_refused(tmp_path):
    path = tmp_path / "x.npy"
    cache.save(path, "k", {"a": np.arange(10), "b": np.ones((3, 3), np.uint8)})
    good = path.read_bytes()
    assert cache.load(path, "k") is not None
    for cut in range(0, len(good), 7):  # every truncation
        path.write_bytes(good[:cut])
        assert cache.load(path, "k") is None, cut
    # an array's shape grown in the header: it no longer fits the bytes stored
    bad = good.replace(b'"b", "|u1", [3, 3]', b'"b", "|u1", [3, 9]')
    assert bad != good
    path.write_bytes(bad)
    assert cache.load(path, "k") is None
    # an old-format .npz, a foreign .npy, a pickled object array: refused, never unpickled
    buf = io.BytesIO()
    np.savez(buf, __header__=np.frombuffer(b'{"format": 5, "key": "k"}', np.uint8), a=np.arange(3))
    for other in (buf.getvalue(),):
        path.write_bytes(other)
        assert cache.load(path, "k") is None
    np.save(path, np.arange(5, dtype=np.int64))
    assert cache.load(path, "k") is None
    with open(path, "wb") as f:
        np.save(f, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    assert cache.load(path, "k") is None
    path.write_bytes(good)
    assert cache.load(path, "other") is None and cache.load(path, "k")["a"].tolist() == list(range(10))


def test_any_changed_data_byte_is_refused(tmp_path):
    """Each byte of the arrays' data, changed: the header still reads, so only the
    header's CRC-32 of the data tells (before it, a flipped mask byte was trusted)."""
    path = tmp_path / "x.npy"
    cache.save(path, "k", {"a": np.arange(10), "b": np.arange(9, dtype=np.uint8).reshape(3, 3)})
    good = bytearray(path.read_bytes())
    data_len = 10 * 8 + 9
    start = len(good) - data_len         # the data is the file's tail (.npy pads its own header)
    for i in range(start, len(good)):
        bad = bytearray(good)
        bad[i] ^= 0x10
        path.write_bytes(bytes(bad))
        assert cache.load(path, "k") is None, i
    path.write_bytes(bytes(good))
    assert cache.load(path, "k")["b"].tolist() == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]


@pytest.mark.parametrize("which", ["index", "vocab"])
def test_flipped_bytes_in_a_cache_file_are_rebuilt(tmp_path, local_tok, which):
    """A cache file whose data bytes changed (a stored mask row set to all ones, the
    vocabulary's token bytes overwritten) is rebuilt, never used: the masks equal an
    uncached build's."""
    pattern = r"[0-9]{3}"
    Vocabulary._cache.clear()                          # so that the vocabulary is stored too
    RegexProcessor(pattern, local_tok, cache_dir=tmp_path)
    (path,) = tmp_path.glob(f"{which}-*.npy")
    blob = np.load(path)
    n = int.from_bytes(blob[:8].tobytes(), "little")
    header = json.loads(blob[8: 8 + n].tobytes())
    lead = -(-(8 + n) // 16) * 16
    arrays = {name: (dtype, shape, off) for name, dtype, shape, off in header["arrays"]}
    dtype, shape, off = arrays["idx_bits" if which == "index" else "flat"]
    data = blob[lead + off: lead + off + np.dtype(dtype).itemsize * math.prod(shape)]
    if which == "index":
        data[: shape[1]] = 0xFF                        # the first stored mask: every token allowed
    else:
        data[(data >= ord("0")) & (data <= ord("9"))] = ord("x")   # token bytes: no digits left
        for other in tmp_path.glob("index-*.npy"):
            other.unlink()                             # so that the index is built on the vocabulary
    np.save(path, blob)
    Vocabulary._cache.clear()
    again = RegexProcessor(pattern, local_tok, cache_dir=tmp_path)
    if which == "index":
        assert again.index_source == "built"
    Vocabulary._cache.clear()                          # (the reference reads no file)
    ref = RegexProcessor(pattern, local_tok, cache_dir=False)
    c, r = again.constraint, ref.constraint
    frontier = [(int(c.starts[0]), int(r.starts[0]))]
    for _ in range(4):                                 # every reachable state, token by token
        step = []
        for qa, qr in frontier:
            ids = r.allowed_ids(qr)
            assert np.array_equal(c.allowed_ids(qa), ids)
            text_ids = np.setdiff1d(ids, r.eos_token_ids)
            if len(text_ids):
                step += zip(c.advance(np.full(len(text_ids), qa), text_ids).tolist(),
                            r.advance(np.full(len(text_ids), qr), text_ids).tolist())
        frontier = sorted(set(step))
    assert not frontier                                # three digits, then only EOS


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
