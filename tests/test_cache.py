"""The disk cache: keyed, atomic, never unpickles, ignores bad files, shared by processes."""

import multiprocessing as mp
import os
import re

import numpy as np
import pytest
import torch

from hf_constrained import RegexProcessor, cache
from hf_constrained.vocabulary import Vocabulary

PAT = r"[a-z]{1,8}@[a-z]{1,6}\.(com|org)"


def fresh(tok, pattern=PAT, **kw):
    Vocabulary._cache.clear()
    return RegexProcessor(pattern, tok, **kw)


def test_resolve_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_CONSTRAINED_CACHE", "0")
    assert cache.resolve_cache_dir() is None
    monkeypatch.setenv("HF_CONSTRAINED_CACHE", str(tmp_path))
    assert cache.resolve_cache_dir() == tmp_path
    assert cache.resolve_cache_dir(tmp_path / "x") == tmp_path / "x"
    assert cache.resolve_cache_dir(False) is None
    # an empty path is off, as the empty variable is (it wrote into the current folder);
    # ~ is the home folder (it made a folder named "~"); a non-path is a clear TypeError
    assert cache.resolve_cache_dir("") is None and cache.resolve_cache_dir("  ") is None
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.resolve_cache_dir("~/hfc") == tmp_path / "home" / "hfc"
    monkeypatch.setenv("HF_CONSTRAINED_CACHE", "~/hfc-env")
    assert cache.resolve_cache_dir() == tmp_path / "home" / "hfc-env"
    monkeypatch.setenv("HF_CONSTRAINED_CACHE", "")
    assert cache.resolve_cache_dir() is None
    for bad in (0, 1, 2.5, ["/tmp"]):
        with pytest.raises(TypeError, match="cache_dir must be a folder path"):
            cache.resolve_cache_dir(bad)
    monkeypatch.delenv("HF_CONSTRAINED_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.resolve_cache_dir() == tmp_path / "xdg" / "hf_constrained"


def test_disabled_by_env_writes_nothing(monkeypatch, tmp_path, local_tok):
    monkeypatch.setenv("HF_CONSTRAINED_CACHE", "0")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    proc = fresh(local_tok)
    assert proc.cache_dir is None and proc.index_source == "built"
    assert not any(tmp_path.rglob("*.npy"))


def test_roundtrip_and_reload(tmp_path, deepseek, deepseek_model):
    proc = fresh(deepseek, cache_dir=tmp_path)
    assert proc.index_source == "built" and proc.vocab.source == "built"
    out = deepseek_model.generate(**deepseek(["x"], return_tensors="pt"), logits_processor=[proc],
                                  do_sample=True, num_return_sequences=3, max_new_tokens=20)
    proc.save_index()
    again = fresh(deepseek, cache_dir=tmp_path)
    assert again.index_source == "disk" and again.vocab.source == "disk"
    assert again.index.num_computed >= proc.index.num_computed - 1
    # reloaded masks equal freshly computed ones, state by state (matched by content)
    for text in ["", "ab", "abc@", "abc@de.", "abc@de.co"]:
        a = proc.dfa.walk(proc.dfa.starts[0], text.encode())
        b = again.dfa.walk(again.dfa.starts[0], text.encode())
        assert np.array_equal(proc.index.allowed(a), again.index.allowed(b)), text
    # and generation with the reloaded index is valid
    torch.manual_seed(1)
    out = deepseek_model.generate(**deepseek(["x"], return_tensors="pt"), logits_processor=[again],
                                  do_sample=True, num_return_sequences=3, max_new_tokens=20)
    assert all(re.fullmatch(PAT, t) for t in again.decode(out))


@pytest.mark.parametrize("damage", ["truncate", "garbage", "foreign", "pickle"])
def test_bad_files_are_ignored_and_rebuilt(tmp_path, local_tok, damage):
    proc = fresh(local_tok, cache_dir=tmp_path)
    path = proc._cache_path
    assert path.exists()
    if damage == "truncate":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        path.write_bytes(os.urandom(4096))
    elif damage == "foreign":
        cache.save(path, "some-other-key", {"x": np.arange(3)})
    else:
        # an object array needs pickle to load: it must never be unpickled
        with open(path, "wb") as f:
            np.savez(f, __header__=np.frombuffer(b'{"format": 2, "key": "k"}', np.uint8),
                     evil=np.array([object()], dtype=object))
    again = fresh(local_tok, cache_dir=tmp_path)
    assert again.index_source == "built"
    assert cache.load(path, again._cache_key) is not None  # rewritten


def test_load_never_allows_pickle(tmp_path):
    path = tmp_path / "x.npy"
    with open(path, "wb") as f:
        np.savez(f, __header__=np.frombuffer(b'{"format": 2, "key": "k"}', np.uint8),
                 evil=np.array([{"a": 1}], dtype=object))
    assert cache.load(path, "k") is None


def test_key_depends_on_pattern_and_tokenizer(tmp_path, local_tok, mistral):
    a = fresh(local_tok, cache_dir=tmp_path)
    b = fresh(local_tok, r"[0-9]+", cache_dir=tmp_path)
    c = fresh(mistral, cache_dir=tmp_path)
    assert len({a._cache_path, b._cache_path, c._cache_path}) == 3
    assert b.index_source == "built" and c.index_source == "built"


def _worker(args):
    folder, i = args
    from hf_constrained import RegexProcessor, offline
    tok = offline.local_tokenizer()
    proc = RegexProcessor(rf"[a-z]{{1,{3 + i % 2}}}@x\.(com|org)", tok, cache_dir=folder)
    # grow the index differently in each process, then merge into the shared file
    for text in ["a", "ab", "abc@", "abc@x.", f"{'a' * (1 + i % 3)}@x.c"]:
        s = proc.dfa.walk(proc.dfa.starts[0], text.encode())
        if s:
            proc.index.allowed(s)
    proc.save_index()
    return proc.index_source


def test_concurrent_writers_keep_a_valid_file(tmp_path, local_tok):
    ctx = mp.get_context("spawn")
    with ctx.Pool(4) as pool:
        sources = pool.map(_worker, [(str(tmp_path), i) for i in range(8)])
    assert sources.count("built") == 2  # one build per distinct pattern, the rest reuse it
    for pattern in (r"[a-z]{1,3}@x\.(com|org)", r"[a-z]{1,4}@x\.(com|org)"):
        proc = fresh(local_tok, pattern, cache_dir=tmp_path)
        assert proc.index_source == "disk"
        s = proc.dfa.walk(proc.dfa.starts[0], b"abc@x.")
        assert proc.index.num_computed >= 4
        assert proc.index.allowed(s).size > 0


@pytest.mark.skipif(cache.fcntl is None, reason="no POSIX advisory locks on this platform")
def test_a_lock_held_too_long_is_given_up_with_a_warning(tmp_path, local_tok, monkeypatch):
    """A holder that hangs must not hang every other builder: after LOCK_WAIT_S the build goes
    on without the lock and warns; a holder that lets go in time is waited for."""
    import fcntl
    import threading

    monkeypatch.setattr(cache, "LOCK_WAIT_S", 0.3)
    proc = fresh(local_tok, cache_dir=tmp_path)  # only to learn the file's name
    path = proc._cache.path
    os.remove(path)
    holder = os.open(str(path) + ".lock", os.O_RDWR | os.O_CREAT)  # another open file: its own lock
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)
        with pytest.warns(RuntimeWarning, match=r"still held by another process after 0.3 s"):
            again = fresh(local_tok, cache_dir=tmp_path)
        assert again.index_source == "built" and os.path.exists(path)
        os.remove(path)
        threading.Timer(0.1, fcntl.flock, (holder, fcntl.LOCK_UN)).start()
        with cache.locked(path) as waited:  # let go after 0.1 s: waited for, no warning
            assert waited is True
    finally:
        os.close(holder)


def test_cache_files_get_the_umask_permissions(tmp_path, local_tok):
    """Files are created as any file the user makes (0o666 under the umask), so a cache folder
    shared by a group stays readable; tempfile.mkstemp's 0o600 made it private to one user."""
    old = os.umask(0o022)
    try:
        proc = fresh(local_tok, cache_dir=tmp_path)
    finally:
        os.umask(old)
    files = [p for p in tmp_path.iterdir() if p.suffix == ".npy"]
    assert proc._cache.path in files and len(files) >= 2  # the index and the vocabulary
    assert {oct(p.stat().st_mode & 0o777) for p in files} == {oct(0o644)}
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
