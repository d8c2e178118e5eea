"""On-disk cache for tokenizer preparation and token indexes.

* Location: ``cache_dir=`` argument, else the ``HF_CONSTRAINED_CACHE``
  environment variable (``0`` turns caching off), else
  ``$XDG_CACHE_HOME/hf_constrained`` (``~/.cache/hf_constrained``).
* Format: one numpy ``.npy`` byte array per file, loaded with
  ``allow_pickle=False`` (loading can never run code), holding a JSON header
  (the format version, the full key, each array's dtype, shape and offset, and
  the CRC-32 of the data bytes) and the plain numeric arrays' bytes (see
  :func:`save`). A file that is corrupted (the checksum is verified before any
  array is used), truncated, from another version or for another key is ignored
  and rebuilt.
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
import time
import warnings
import zlib
from pathlib import Path

import numpy as np

FORMAT_VERSION = 7  # 5: one .npy byte array per file; 6: automaton positions numbered over shared subtrees;
#                    7: the header holds the CRC-32 of the data bytes
ENV = "HF_CONSTRAINED_CACHE"
#: how long (seconds) a builder waits for another process's lock on a cache file before it builds
#: without it (with a warning): a holder that hangs or sleeps must not hang every other process
LOCK_WAIT_S = 60.0

try:  # POSIX advisory locks; elsewhere builds may duplicate but stay correct
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None


def resolve_cache_dir(cache_dir=None) -> Path | None:
    """The cache folder to use, or None when caching is off.

    A path names the folder (``~`` expanded); ``None`` or ``True`` the default
    (``HF_CONSTRAINED_CACHE``, else ``~/.cache/hf_constrained``); ``False`` or an
    empty string turn caching off, as ``HF_CONSTRAINED_CACHE=""`` or ``=0`` do.

    >>> resolve_cache_dir("/tmp/x"), resolve_cache_dir(False), resolve_cache_dir("")
    (PosixPath('/tmp/x'), None, None)
    """
    if cache_dir is False:
        return None
    if cache_dir is not None and cache_dir is not True:
        if not isinstance(cache_dir, (str, os.PathLike)):
            raise TypeError(f"cache_dir must be a folder path, True or None (the default folder) or False "
                            f"(no disk cache), not {type(cache_dir).__name__} {cache_dir!r}")
        if isinstance(cache_dir, str) and not cache_dir.strip():
            return None
        return Path(cache_dir).expanduser()
    env = os.environ.get(ENV)
    if env is not None:
        if env.strip().lower() in ("", "0", "false", "off", "no"):
            return None
        return Path(env).expanduser()
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


_ALIGN = 16  # each array's offset in the file's byte array: aligned views


def save(path: Path, key: str, arrays: dict) -> bool:
    """Atomically write ``arrays`` under ``key``. Returns False if the disk refused.

    The file is one ``.npy`` byte array (:func:`np.save`, never pickled): an
    8-byte length, a JSON header (format, key, each array's name, dtype,
    shape and offset, and ``crc32`` of the data bytes: ~0.2 ms per MB to check,
    where a flipped byte in a stored mask would otherwise be trusted), then the
    arrays' bytes, each aligned. One ``np.load`` of
    one array reads it back, where an ``.npz`` costs a zip member per array
    (about 60 µs each: what made a warm disk-cache start slower than a cold one).

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "x.npy"
    >>> save(path, "k", {"a": np.arange(3)}), load(path, "k")["a"].tolist(), load(path, "other")
    (True, [0, 1, 2], None)
    """
    path = Path(path)
    table, parts, at, crc = [], [], 0, 0
    for name, a in arrays.items():
        a = np.asarray(a)
        if not a.flags.c_contiguous:
            a = a.copy(order="C")  # (np.ascontiguousarray would make a 0-d array 1-d)
        if a.dtype.hasobject or a.dtype.fields is not None:
            raise ValueError(f"cache array {name!r} has dtype {a.dtype}: only plain numeric arrays are stored")
        aligned = -(-at // _ALIGN) * _ALIGN
        crc = zlib.crc32(a.reshape(-1).view(np.uint8), zlib.crc32(bytes(aligned - at), crc))  # pad, data
        table.append([name, a.dtype.str, list(a.shape), aligned])
        parts.append((aligned, a))
        at = aligned + a.nbytes
    header = json.dumps({"format": FORMAT_VERSION, "key": key, "arrays": table, "crc32": crc}).encode()
    lead = 8 + len(header)
    lead = -(-lead // _ALIGN) * _ALIGN
    blob = np.zeros(lead + at, dtype=np.uint8)
    blob[:8] = np.frombuffer(len(header).to_bytes(8, "little"), dtype=np.uint8)
    blob[8: 8 + len(header)] = np.frombuffer(header, dtype=np.uint8)
    for off, a in parts:
        blob[lead + off: lead + off + a.nbytes] = a.reshape(-1).view(np.uint8)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = _temp_file(path)
        try:
            with os.fdopen(fd, "wb") as f:
                np.save(f, blob, allow_pickle=False)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return True
    except OSError:
        return False


def _temp_file(path: Path):
    """A new file next to ``path`` (its descriptor and name) with the permissions any file the
    user creates gets (0o666 under the umask; ``tempfile.mkstemp`` makes 0o600 files, which other
    users of a shared cache folder cannot read)."""
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{os.getpid()}.{os.urandom(6).hex()}.tmp"
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                           0o666), str(tmp)
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name next to {path}")


def load(path: Path, key: str) -> dict | None:
    """Arrays stored under ``key`` at ``path``, or None if absent/corrupt/foreign.

    The arrays are views of the one array read (writable, aligned).

    >>> load(Path("/nonexistent/x.npy"), "k") is None
    True
    """
    try:
        blob = np.load(path, allow_pickle=False)
        if blob.dtype != np.uint8 or blob.ndim != 1 or blob.size < 8:
            return None
        n = int.from_bytes(blob[:8].tobytes(), "little")
        if not 0 < n <= blob.size - 8:
            return None
        header = json.loads(blob[8: 8 + n].tobytes().decode())
        if not isinstance(header, dict) or header.get("format") != FORMAT_VERSION or header.get("key") != key:
            return None
        lead = -(-(8 + n) // _ALIGN) * _ALIGN
        if zlib.crc32(blob[lead:]) != header.get("crc32"):
            return None  # a changed byte anywhere in the data: never trust a stored mask
        out = {}
        for name, dtype, shape, off in header["arrays"]:
            dtype = np.dtype(dtype)
            if dtype.hasobject or dtype.fields is not None:
                return None
            size = dtype.itemsize * math.prod(shape)
            lo = lead + int(off)
            if off < 0 or lo + size > blob.size:
                return None
            out[name] = blob[lo: lo + size].view(dtype).reshape(shape)
        return out
    except Exception:  # missing, truncated, not .npy, bad header, foreign layout...
        return None


@contextlib.contextmanager
def locked(path: Path, wait_s: float | None = None):
    """Exclusive advisory lock on ``path.lock``; yields True if we had to wait, False if not,
    None if another holder kept it past ``wait_s`` (default :data:`LOCK_WAIT_S`) seconds: then
    it warns and goes on without the lock (files are renamed into place whole, so the worst
    case is a duplicated build).

    >>> import tempfile
    >>> with locked(Path(tempfile.mkdtemp()) / "x.npy") as waited:
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
            limit = LOCK_WAIT_S if wait_s is None else wait_s
            waited = _wait_for_lock(fd, limit)
            if waited is None:
                warnings.warn(f"{path}.lock is still held by another process after "
                              f"{limit:g} s; going on without "
                              "it (set hf_constrained.cache.LOCK_WAIT_S to wait longer)",
                              RuntimeWarning, stacklevel=3)
        yield waited
    finally:
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


def _wait_for_lock(fd: int, wait_s: float):
    """Poll for the lock on ``fd`` (1 ms, doubling to 50 ms between tries) for up to ``wait_s``
    seconds: True once held, None if the time ran out."""
    deadline, pause = time.monotonic() + wait_s, 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            time.sleep(min(pause, left))
            pause = min(2 * pause, 0.05)


def file_name(key: str) -> str:
    """The file name part for a cache ``key``: its first 40 characters when it is a hex digest
    (the built-in engines' keys), else 40 of its SHA-256, so that any string an engine picks
    (a ``/``, a long readable key whose start other keys share) names one file in the folder.

    >>> file_name("ab" * 32) == "ab" * 20, len(file_name("my/engine")), "/" in file_name("my/engine")
    (True, 40, False)
    """
    if len(key) >= 40 and all(c in "0123456789abcdef" for c in key):
        return key[:40]
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:40]


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
        if key is not None and not isinstance(key, str):
            raise TypeError(f"{type(constraint).__name__}.cache_key() must return a string or None, "
                            f"not {type(key).__name__} {key!r}")
        self.key = key
        self.path = Path(cache_dir) / f"index-{file_name(key)}.npy" if key is not None else None
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
