"""On-disk cache for tokenizer preparation and token indexes.

* Location: ``cache_dir=`` argument, else the ``HF_CONSTRAINED_CACHE``
  environment variable (``0`` turns caching off), else
  ``$XDG_CACHE_HOME/hf_constrained`` (``~/.cache/hf_constrained``).
* Format: numpy ``.npz`` files of plain numeric arrays, loaded with
  ``allow_pickle=False`` (loading can never run code), plus a JSON header
  holding the format version and the full key. A file that is corrupted,
  truncated, from another version or for another key is ignored and rebuilt.
* Writes go to a temporary file in the same folder and are renamed into place
  (atomic); an advisory lock file serialises builders across processes so a
  second process waits for the first one's build instead of duplicating it.

>>> d = resolve_cache_dir(False) is None
>>> d
True
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import struct
import tempfile
from pathlib import Path

import numpy as np

FORMAT_VERSION = 4
ENV = "HF_CONSTRAINED_CACHE"

try:  # POSIX advisory locks; elsewhere builds may duplicate but stay correct
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None


def resolve_cache_dir(cache_dir=None) -> Path | None:
    """The cache folder to use, or None when caching is off.

    >>> resolve_cache_dir("/tmp/x"), resolve_cache_dir(False)
    (PosixPath('/tmp/x'), None)
    """
    if cache_dir is False:
        return None
    if cache_dir is not None and cache_dir is not True:
        return Path(cache_dir)
    env = os.environ.get(ENV)
    if env is not None:
        if env.strip().lower() in ("", "0", "false", "off", "no"):
            return None
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hf_constrained"


def digest(*parts) -> str:
    """Stable hex key for strings/bytes/ints/lists (with the format version mixed in).

    >>> digest("index", [1, 2]) == digest("index", [1, 2]) != digest("index", [2, 1])
    True
    """
    h = hashlib.sha256(f"hf_constrained-cache-v{FORMAT_VERSION}".encode())
    for p in parts:
        if isinstance(p, (bytes, bytearray, memoryview)):
            b = bytes(p)
        elif isinstance(p, np.ndarray):
            b = p.tobytes()
        else:
            b = json.dumps(p, sort_keys=True, ensure_ascii=False).encode()
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def save(path: Path, key: str, arrays: dict) -> bool:
    """Atomically write ``arrays`` under ``key``. Returns False if the disk refused.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "x.npz"
    >>> save(path, "k", {"a": np.arange(3)}), load(path, "k")["a"].tolist(), load(path, "other")
    (True, [0, 1, 2], None)
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        header = json.dumps({"format": FORMAT_VERSION, "key": key}).encode()
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(f, __header__=np.frombuffer(header, dtype=np.uint8), **arrays)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return True
    except OSError:
        return False


_NPY_HEADER = re.compile(rb"\{'descr': '([<>|=]?[biuf]\d+)', 'fortran_order': False, 'shape': \(([0-9, ]*)\), \}")


def _read_stored_npz(data) -> dict | None:
    """The arrays of an ``.npz`` that :func:`np.savez` wrote (uncompressed members,
    little ``.npy`` headers), read straight from the bytes: one file read instead of
    ``np.load``'s zip and per-member header parsing (about 60 µs per array, the
    whole warm disk-cache path's excess over building). Numeric dtypes only; None
    for anything else (a compressed or ZIP64 file, an object or structured array,
    damage), which the caller then hands to ``np.load``.

    >>> import io
    >>> buf = io.BytesIO()
    >>> np.savez(buf, a=np.arange(3), b=np.ones((2, 2), np.uint8))
    >>> {k: v.tolist() for k, v in _read_stored_npz(bytearray(buf.getvalue())).items()}
    {'a': [0, 1, 2], 'b': [[1, 1], [1, 1]]}
    """
    end = len(data) - 22  # the end-of-central-directory record, no comment
    if end < 0 or data[end: end + 4] != b"PK\x05\x06":
        return None
    count, cd_size, cd_at = struct.unpack_from("<HII", data, end + 10)
    out, at = {}, cd_at
    for _ in range(count):
        if data[at: at + 4] != b"PK\x01\x02":
            return None
        method, csize, usize, nlen, elen, clen = struct.unpack_from("<H8xIIHHH", data, at + 10)
        local = struct.unpack_from("<I", data, at + 42)[0]
        name = bytes(data[at + 46: at + 46 + nlen]).decode("utf-8", "replace")
        at += 46 + nlen + elen + clen
        if method != 0 or csize != usize or usize == 0xFFFFFFFF or not name.endswith(".npy") \
                or data[local: local + 4] != b"PK\x03\x04":
            return None
        lnlen, lelen = struct.unpack_from("<HH", data, local + 26)
        lo = local + 30 + lnlen + lelen
        hi = lo + usize
        if hi > len(data) or data[lo: lo + 6] != b"\x93NUMPY":
            return None
        if data[lo + 6] == 1:
            hlen, head = struct.unpack_from("<H", data, lo + 8)[0], lo + 10
        else:
            hlen, head = struct.unpack_from("<I", data, lo + 8)[0], lo + 12
        m = _NPY_HEADER.match(bytes(data[head: head + hlen]))
        if m is None:
            return None
        dtype = np.dtype(m.group(1).decode())
        shape = tuple(int(x) for x in m.group(2).split(b",") if x.strip())
        n = math.prod(shape)
        if head + hlen + n * dtype.itemsize != hi:
            return None
        arr = np.frombuffer(data, dtype=dtype, count=n, offset=head + hlen).reshape(shape)
        out[name[:-4]] = arr if arr.flags.aligned else arr.copy()  # (members start anywhere)
    return out


def load(path: Path, key: str) -> dict | None:
    """Arrays stored under ``key`` at ``path``, or None if absent/corrupt/foreign.

    >>> load(Path("/nonexistent/x.npz"), "k") is None
    True
    """
    try:
        with open(path, "rb") as f:  # one read; the arrays are views of this (writable) buffer
            data = bytearray(os.fstat(f.fileno()).st_size)
            if f.readinto(data) != len(data):
                return None
    except OSError:
        return None
    try:
        arrays = _read_stored_npz(data)
    except (struct.error, ValueError, IndexError, TypeError):  # damage: np.load decides
        arrays = None
    if arrays is not None and "__header__" in arrays:
        try:
            header = json.loads(arrays.pop("__header__").tobytes().decode())
        except ValueError:
            return None
        if not isinstance(header, dict) or header.get("format") != FORMAT_VERSION or header.get("key") != key:
            return None
        return arrays
    try:  # anything the fast reader does not take (it never unpickles either)
        with np.load(path, allow_pickle=False) as z:
            header = json.loads(bytes(z["__header__"]).decode())
            if header.get("format") != FORMAT_VERSION or header.get("key") != key:
                return None
            return {k: z[k] for k in z.files if k != "__header__"}
    except Exception:  # missing, truncated, not a zip, bad header, object arrays...
        return None


@contextlib.contextmanager
def locked(path: Path):
    """Exclusive advisory lock on ``path.lock``; yields True if we had to wait.

    >>> import tempfile
    >>> with locked(Path(tempfile.mkdtemp()) / "x.npz") as waited:
    ...     waited
    False
    """
    path = Path(path)
    if fcntl is None:
        yield False
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(str(path) + ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield False
        return
    waited = False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            waited = True
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield waited
    finally:
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


class ConstraintCache:
    """The disk file of one constraint's states and masks (any engine with a
    ``cache_key()``): loaded at construction, merged and rewritten after calls.

    ``source`` is ``"disk"``, ``"waited"`` (another process was building it) or
    ``"built"``.

    >>> ConstraintCache(object(), None).save()   # caching off: nothing to write
    False
    """

    def __init__(self, constraint, cache_dir):
        self.constraint = constraint
        key = constraint.cache_key() if cache_dir is not None and hasattr(constraint, "cache_key") else None
        self.key = key
        self.path = Path(cache_dir) / f"index-{key[:40]}.npz" if key is not None else None
        self.source = "built"
        self._saved = None

    def _revision(self):
        return self.constraint.cache_revision()

    def _merge(self) -> bool:
        arrays = load(self.path, self.key)
        return arrays is not None and self.constraint.import_state(arrays)

    def load_or_build(self, build) -> str:
        """Load the file, or run ``build()`` (the first masks) and store them.

        The lock makes a second process wait for the first one's build
        (``"waited"``) rather than duplicating it. A file that is already there
        is read without it (files are renamed into place whole).
        """
        if self.path is None:
            build()
        elif self._merge():
            self.source = "disk"
        else:
            with locked(self.path) as waited:
                if self._merge():
                    self.source = "waited" if waited else "disk"
                else:
                    build()
                    save(self.path, self.key, self.constraint.export_state())
                    self.source = "built"
        self._saved = self._revision() if self.path is not None else None
        return self.source

    def save(self) -> bool:
        """Merge what the file holds now and write everything computed so far.
        Returns True if something was written."""
        if self.path is None:
            return False
        now = self._revision()
        if now == self._saved:
            return False
        with locked(self.path):
            self._merge()
            ok = save(self.path, self.key, self.constraint.export_state())
        self._saved = self._revision()
        return ok
