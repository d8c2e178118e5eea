"""What each token id spells, in bytes, and a trie over those bytes.

A :class:`Vocabulary` is built once per tokenizer (and cached per process).
It knows:

* ``token_bytes[i]``: the bytes token ``i`` adds to the decoded text, or
  ``None`` for tokens that must never be generated under a constraint
  (special and added tokens, tokens that decode to nothing);
* ``strip_leading_space``: whether ``decode`` drops one leading space of the
  text (SentencePiece: a first ``▁Word`` decodes as ``Word``);
* a byte trie in flat numpy arrays, numbered breadth-first so every node's
  children are contiguous; :mod:`hf_constrained.index` walks it level by
  level, vectorised, for every automaton state.

Supported decoders: byte-level BPE (GPT-2, Llama 3, Qwen, DeepSeek...) and
SentencePiece-style ``▁`` pieces with ``<0xNN>`` byte fallback (Llama 2,
Mistral...). Anything else raises
:class:`~hf_constrained.errors.UnsupportedTokenizerError`.

>>> from hf_constrained.offline import local_tokenizer
>>> tok = local_tokenizer()                      # byte-level BPE, trained in memory
>>> vocab = Vocabulary.from_tokenizer(tok, cache_dir=False)
>>> vocab.token_bytes[tok.convert_tokens_to_ids("Ġthe")]
b' the'
>>> vocab.strip_leading_space
False
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import warnings
import weakref

import numpy as np

from . import cache as disk
from .errors import GenerationConflictError, UnsupportedTokenizerError

_BYTE_FALLBACK = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(
        range(ord("®"), ord("ÿ") + 1)
    )
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


_BYTE_DECODER = {c: b for b, c in bytes_to_unicode().items()}


def _token_ids(value, what: str) -> list:
    """``value`` (an id, a list of ids, a numpy array or a tensor of them) as a list of ints.

    >>> _token_ids(np.int64(3), "x"), _token_ids([1, np.int32(2)], "x")
    ([3], [1, 2])
    """
    if hasattr(value, "tolist") and not isinstance(value, (list, tuple)):
        value = value.tolist()  # numpy scalars and arrays, tensors (0-d too)
    items = value if isinstance(value, (list, tuple, set, frozenset, range)) else [value]
    out = []
    for v in items:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{what} must be a token id (an int) or a list of them, not {value!r}")
        out.append(int(v))
    return out


def _backend(tokenizer):
    """The ``tokenizers.Tokenizer`` behind a fast tokenizer, or None."""
    return getattr(tokenizer, "backend_tokenizer", None) or getattr(tokenizer, "_tokenizer", None)


def _decoder_spec(tokenizer) -> dict | None:
    backend = _backend(tokenizer)
    if backend is None or backend.decoder is None:
        return None
    return json.loads(backend.decoder.__getstate__())


def _flatten(spec: dict) -> list[dict]:
    if spec.get("type") == "Sequence":
        out = []
        for d in spec.get("decoders", []):
            out.extend(_flatten(d))
        return out
    return [spec]


_FAST_FIX = ("load the fast tokenizer instead: AutoTokenizer.from_pretrained(name) (use_fast=True is "
             "the default), or convert this one with transformers.PreTrainedTokenizerFast(tokenizer_object="
             "transformers.convert_slow_tokenizer.convert_slow_tokenizer(tokenizer))")


def _sentencepiece_bytes(byte_fallback: bool, replace_from: str = "\u2581"):
    def piece_bytes(piece: str):
        if byte_fallback:
            m = _BYTE_FALLBACK.match(piece)
            if m:
                return bytes([int(m.group(1), 16)])
        return piece.replace(replace_from, " ").encode("utf-8")
    return piece_bytes


def _slow_sentencepiece(tokenizer):
    """(piece -> bytes, strip_leading_space) of a slow SentencePiece tokenizer (``sp_model``).

    Pieces spell their text with ``▁`` for a space and ``<0xNN>`` for byte
    fallback. Whether ``decode`` drops the first space is read off the
    tokenizer itself (a lone ``▁Word`` token). Slow tokenizers' first-space
    handling differs from the fast ones' in corner cases, which
    :meth:`Vocabulary.verify_against` probes; a tokenizer that fails is refused.
    """
    sp = tokenizer.sp_model
    n = sp.get_piece_size()
    byte_fallback = any(sp.IsByte(i) for i in range(min(n, 512)))
    probe = None
    for i in range(n):
        piece = sp.IdToPiece(i)
        if len(piece) >= 2 and piece[0] == "\u2581" and piece[1].isalpha() and not sp.IsControl(i):
            probe = i
            break
    if probe is None:
        raise UnsupportedTokenizerError(
            f"{type(tokenizer).__name__} is a slow SentencePiece tokenizer without any '▁Word' piece; "
            f"cannot tell how its decode() treats spaces; {_FAST_FIX}")
    text = tokenizer.decode([probe], skip_special_tokens=True, clean_up_tokenization_spaces=False)
    strip = not text.startswith(" ")
    return _sentencepiece_bytes(byte_fallback), strip


def _piece_decoder(tokenizer):
    """Return (decoder kind, piece -> bytes function or None, strip_leading_space)."""
    spec = _decoder_spec(tokenizer)
    if spec is None:
        if getattr(tokenizer, "sp_model", None) is not None:
            piece_bytes, strip = _slow_sentencepiece(tokenizer)
            return "sentencepiece-slow", piece_bytes, strip
        if _backend(tokenizer) is not None:  # a fast tokenizer whose tokenizers backend has no decoder
            raise UnsupportedTokenizerError(
                f"{type(tokenizer).__name__} is a fast tokenizer whose tokenizers backend has no "
                "decoder (backend_tokenizer.decoder is None), so what its tokens spell is unknown; "
                "set one (e.g. tokenizers.decoders.ByteLevel() for a byte-level BPE, "
                "decoders.Metaspace() for SentencePiece pieces)")
        raise UnsupportedTokenizerError(
            f"{type(tokenizer).__name__} is a slow tokenizer without a SentencePiece model or a fast "
            f"(tokenizers) backend, so its tokens cannot be mapped to bytes; {_FAST_FIX}"
        )
    parts = _flatten(spec)
    kinds = [p.get("type") for p in parts]
    if kinds == ["ByteLevel"]:
        return "bytelevel", None, False  # decoded all at once by _bytelevel_arrays

    replace_from, strip, byte_fallback = None, False, False
    for p in parts:
        t = p.get("type")
        spaces = t == "Metaspace" or (t == "Replace" and p.get("content") == " ")
        if spaces and replace_from is not None:  # one rule per piece: a second one was silently dropped
            raise UnsupportedTokenizerError(
                f"unsupported tokenizer decoder chain {kinds}: more than one step turns "
                "characters into spaces; cannot map tokens to bytes")
        if t == "Replace" and spaces:
            replace_from = p["pattern"].get("String")
        elif t == "ByteFallback":
            byte_fallback = True
        elif t == "Fuse":
            pass
        elif t == "Strip":
            if p.get("content") != " " or p.get("stop", 0) != 0 or p.get("start", 0) > 1:
                raise UnsupportedTokenizerError(f"unsupported Strip decoder settings {p}")
            strip = p.get("start", 0) == 1
        elif t == "Metaspace":
            replace_from = p.get("replacement", "▁")
            strip = p.get("prepend_scheme", "always") != "never" and p.get("add_prefix_space", True)
        else:
            raise UnsupportedTokenizerError(
                f"unsupported tokenizer decoder {t!r} (decoder chain {kinds}); hf_constrained "
                "supports byte-level BPE and SentencePiece-style (▁ + <0xNN> byte fallback) tokenizers"
            )
    if replace_from is None:
        raise UnsupportedTokenizerError(
            f"unsupported tokenizer decoder chain {kinds}: cannot map tokens to bytes"
        )
    return "sentencepiece", _sentencepiece_bytes(byte_fallback, replace_from), strip


def _metaspace_first_token_suspects(tokenizer, pieces: list, usable: np.ndarray) -> list:
    """Ids whose text as the *first* token of a decode differs from our first-space rule.

    A tokenizers ``Metaspace`` decoder drops every replacement character (``▁``) of the
    first token and keeps a literal space, while the rule drops one leading space byte:
    ``"▁of▁the"`` decodes as ``"ofthe"``, a piece ``" a"`` as ``" a"`` (we would say
    ``"a"``). Found from the pieces themselves, so one such piece among many tokens
    is not missed by a sample; :meth:`Vocabulary.verify_against` probes them.
    """
    spec = _decoder_spec(tokenizer)
    if spec is None:
        return []
    metas = [p for p in _flatten(spec) if p.get("type") == "Metaspace"
             and p.get("prepend_scheme", "always") != "never" and p.get("add_prefix_space", True)]
    if not metas:
        return []
    rep = metas[-1].get("replacement", "\u2581")
    out = []
    for i, (piece, ok) in enumerate(zip(pieces, usable)):
        if not ok or not piece or (rep not in piece[1:] and not piece.startswith(" ")):
            continue
        ours = piece.replace(rep, " ")
        ours = ours[1:] if ours.startswith(" ") else ours
        if ours != piece.replace(rep, ""):
            out.append(i)
    return out


_BYTELEVEL_LUT = np.full(max(map(ord, _BYTE_DECODER)) + 1, -1, dtype=np.int16)
for _c, _b in _BYTE_DECODER.items():
    _BYTELEVEL_LUT[ord(_c)] = _b


def _pieces(tokenizer, size: int) -> list:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        get = backend.id_to_token
        return [get(i) for i in range(size)]
    return tokenizer.convert_ids_to_tokens(list(range(size)))


def _bytelevel_arrays(pieces: list, usable: np.ndarray):
    """Vectorised GPT-2 byte decoding of all pieces at once: (flat, offsets, lengths).

    The pieces are joined, viewed as UTF-32 code points and mapped through a
    lookup table; a piece with a character outside the byte alphabet is dropped.
    """
    n = len(pieces)
    texts = [p if (ok and p) else "" for p, ok in zip(pieces, usable)]
    lens = np.fromiter(map(len, texts), dtype=np.int64, count=n)
    cps = np.frombuffer("".join(texts).encode("utf-32-le"), dtype=np.uint32)
    vals = np.full(len(cps), -1, dtype=np.int16)
    inside = cps < len(_BYTELEVEL_LUT)
    vals[inside] = _BYTELEVEL_LUT[cps[inside]]
    bad = vals < 0
    if bad.any():  # rare: pieces outside the byte alphabet (never generated)
        owner = np.repeat(np.arange(n), lens)
        drop = np.zeros(n, dtype=bool)
        drop[owner[bad]] = True
        keep = ~drop[owner]
        vals = vals[keep]
        lens = np.where(drop, 0, lens)
    offs = np.zeros(n, dtype=np.int64)
    np.cumsum(lens[:-1], out=offs[1:])
    return vals.astype(np.uint8), offs, lens


def link_trie(trie, parent: np.ndarray, token_ids: np.ndarray, node_of: np.ndarray) -> None:
    """Set the child ranges and terminal arrays of a breadth-first trie.

    ``parent`` is non-decreasing (nodes numbered depth by depth, siblings
    sorted), so each node's children are contiguous; token ``token_ids[i]``
    ends at node ``node_of[i]``. Sets ``child_start``/``child_end`` and
    ``term_ids``/``term_node`` (sorted by node) with ``term_start``/``term_end``.
    """
    n = len(parent)
    counts = np.bincount(parent[1:], minlength=n)
    trie.child_end = np.cumsum(counts) + 1
    trie.child_start = trie.child_end - counts
    if (node_of[1:] >= node_of[:-1]).all():  # already by node (the class trie's case)
        trie.term_ids, trie.term_node = token_ids, node_of
    else:
        order = np.argsort(node_of, kind="stable")
        trie.term_ids = token_ids[order]
        trie.term_node = node_of[order]
    tcounts = np.bincount(node_of, minlength=n)
    trie.term_end = np.cumsum(tcounts)
    trie.term_start = trie.term_end - tcounts


class Vocabulary:
    """Token bytes and their trie, for one tokenizer. Build with :meth:`from_tokenizer`."""

    _cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()

    _TRIE_ARRAYS = ("node_byte", "node_parent", "depth_start", "child_start", "child_end",
                    "term_ids", "term_node", "term_start", "term_end")

    def __init__(self, flat: np.ndarray, tok_off: np.ndarray, tok_len: np.ndarray, *,
                 strip_leading_space: bool = False, eos_token_ids=(), name: str = "", trie: dict | None = None):
        self.flat = np.ascontiguousarray(flat, dtype=np.uint8)
        self.tok_off = np.asarray(tok_off, dtype=np.int64)
        self.tok_len = np.asarray(tok_len, dtype=np.int64)
        self.size = len(self.tok_len)
        self.strip_leading_space = bool(strip_leading_space)
        self.default_eos_ids = tuple(eos_token_ids)
        self.name = name
        self._token_bytes = None
        h = hashlib.sha256()
        h.update(b"strip" if strip_leading_space else b"keep")
        h.update(self.tok_len.tobytes())
        h.update(self.flat[: int(self.tok_off[-1] + self.tok_len[-1]) if self.size else 0].tobytes())
        self.fingerprint = h.hexdigest()[:32]
        self.source = "built"
        if trie is None:
            self._build_trie()
        else:
            for k in self._TRIE_ARRAYS:
                setattr(self, k, trie[k])
            self.num_nodes = len(self.node_byte)
            self.full_byte_coverage = bool(trie["full_byte_coverage"])

    def eos_ids(self, eos_token_id=None) -> list:
        """The EOS ids to use: ``eos_token_id`` (an id or a list of ids), else the tokenizer's.

        A given id that is a text token is refused: the masks would offer it as text where the
        pattern goes on, generation would stop on it there, and its text would stay in the output.

        >>> vocab = Vocabulary.from_token_bytes([None, b"a", None], eos_token_ids=(2,))
        >>> vocab.eos_ids(), vocab.eos_ids(0), vocab.eos_ids([0, 2])
        ([2], [0], [0, 2])
        >>> vocab.eos_ids([0, 1])
        Traceback (most recent call last):
        ...
        hf_constrained.errors.GenerationConflictError: eos_token_id 1 is the text token b'a': generation stops on it wherever it is sampled, in the middle of a match too, and leaves its text in the output; pass only end-of-sequence (special) tokens as eos_token_id: the pattern decides where the text ends (write the text into the pattern if the output should end with it)
        """
        if eos_token_id is None:
            return list(self.default_eos_ids)
        ids = _token_ids(eos_token_id, "eos_token_id")
        for e in ids:
            if e < 0:
                raise GenerationConflictError(
                    f"eos_token_id {e} is negative; token ids count from 0 (a negative one would "
                    "index from the end of the scores: a text token)")
            if e < len(self.tok_len) and self.tok_len[e] > 0:
                raise GenerationConflictError(
                    f"eos_token_id {e} is the text token {self.token_bytes[e]!r}: generation stops on "
                    "it wherever it is sampled, in the middle of a match too, and leaves its text in the "
                    "output; pass only end-of-sequence (special) tokens as eos_token_id: the pattern "
                    "decides where the text ends (write the text into the pattern if the output should "
                    "end with it)")
        return ids

    def export(self) -> dict:
        out = {k: getattr(self, k) for k in self._TRIE_ARRAYS}
        out.update(flat=self.flat, tok_off=self.tok_off, tok_len=self.tok_len,
                   full_byte_coverage=np.array(self.full_byte_coverage))
        return out

    @classmethod
    def from_token_bytes(cls, token_bytes: list, **kwargs) -> "Vocabulary":
        """Build from a list giving each token id's bytes (``None`` = never generate)."""
        data = [b or b"" for b in token_bytes]
        lens = np.fromiter(map(len, data), dtype=np.int64, count=len(data))
        offs = np.zeros(len(data), dtype=np.int64)
        np.cumsum(lens[:-1], out=offs[1:])
        return cls(np.frombuffer(b"".join(data), dtype=np.uint8), offs, lens, **kwargs)

    @property
    def token_bytes(self) -> list:
        """Per token id, its bytes or ``None`` (built on first use; for tests and tools)."""
        if self._token_bytes is None:
            data = self.flat.tobytes()
            self._token_bytes = [data[o:o + n] if n else None
                                 for o, n in zip(self.tok_off.tolist(), self.tok_len.tolist())]
        return self._token_bytes

    # -- construction ---------------------------------------------------
    @classmethod
    def from_tokenizer(cls, tokenizer, *, verify: bool = True, cache_dir=None) -> "Vocabulary":
        """Build (or fetch from the per-process or disk cache) the vocabulary of ``tokenizer``.

        ``cache_dir``: see :func:`hf_constrained.cache.resolve_cache_dir`.
        """
        try:
            cached = cls._cache.get(tokenizer)
        except TypeError:
            cached = None
        if cached is not None:
            return cached
        kind, piece_bytes, strip = _piece_decoder(tokenizer)
        size = len(tokenizer)
        pieces = _pieces(tokenizer, size)
        if None in pieces:
            # unused ids below len(tokenizer): len() counts the ids, so some lie beyond it
            # (a vocabulary with gaps); they are text tokens the tokenizer produces too
            top = max(tokenizer.get_vocab().values(), default=-1) + 1
            if top > size:
                size = top
                pieces = _pieces(tokenizer, size)
        usable = np.array([p is not None for p in pieces], dtype=bool)
        banned = set(getattr(tokenizer, "all_special_ids", []) or [])
        banned.update(getattr(tokenizer, "added_tokens_decoder", {}).keys())
        banned = [b for b in banned if 0 <= b < size]
        usable[banned] = False
        eos = getattr(tokenizer, "eos_token_id", None)
        meta = dict(strip_leading_space=strip, eos_token_ids=() if eos is None else (eos,),
                    name=getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__)
        folder = disk.resolve_cache_dir(cache_dir)
        key = path = None
        if folder is not None:
            # the decoder chain too: verify_against() checks it and a disk hit skips that check
            # (two tokenizers with the same pieces and different decoders differ)
            decoder = json.dumps(_decoder_spec(tokenizer), sort_keys=True)
            key = disk.digest("vocab", kind, strip, size, "\x00".join(p if p is not None else "\x01" for p in pieces),
                              np.nonzero(~usable)[0], decoder, type(tokenizer).__name__,
                              bool(getattr(tokenizer, "clean_up_tokenization_spaces", False)))
            path = folder / f"vocab-{key[:40]}.npy"
            arrays = disk.load(path, key)
            if arrays is not None:
                vocab = cls(arrays["flat"], arrays["tok_off"], arrays["tok_len"], trie=arrays, **meta)
                vocab.source = "disk"
                cls._remember(tokenizer, vocab)
                return vocab
        if kind == "bytelevel":
            flat, offs, lens = _bytelevel_arrays(pieces, usable)
        else:
            data = [piece_bytes(p) if ok else b"" for p, ok in zip(pieces, usable)]
            lens = np.fromiter(map(len, data), dtype=np.int64, count=size)
            offs = np.zeros(size, dtype=np.int64)
            np.cumsum(lens[:-1], out=offs[1:])
            flat = np.frombuffer(b"".join(data), dtype=np.uint8)
        vocab = cls(flat, offs, lens, **meta)
        if getattr(tokenizer, "clean_up_tokenization_spaces", False):
            warnings.warn(
                "this tokenizer has clean_up_tokenization_spaces=True, so tokenizer.decode() may "
                "remove spaces the constraint produced; decode with clean_up_tokenization_spaces=False "
                "(RegexProcessor.decode does)", stacklevel=3)
        if verify:
            vocab.verify_against(tokenizer, extra=[[i] for i in _metaspace_first_token_suspects(
                tokenizer, pieces, usable)[:4]])
        if path is not None:
            disk.save(path, key, vocab.export())
        cls._remember(tokenizer, vocab)
        return vocab

    @classmethod
    def _remember(cls, tokenizer, vocab):
        try:
            cls._cache[tokenizer] = vocab
        except TypeError:
            pass

    def _edge_pairs(self, limit: int = 4) -> list:
        """Token pairs where first-space rules differ between decoders: a text that
        starts with a lone space, two spaces or a space byte, followed by a token
        with and one without a leading space."""
        lens = self.tok_len
        first = np.where(lens > 0, self.flat[np.minimum(self.tok_off, max(len(self.flat) - 1, 0))], 0)
        second = np.where(lens > 1, self.flat[np.minimum(self.tok_off + 1, max(len(self.flat) - 1, 0))], 0)
        spacey = np.flatnonzero((lens > 0) & (first == 0x20) & ((lens == 1) | (second == 0x20)))[:limit]
        spaced = np.flatnonzero((lens > 1) & (first == 0x20) & (second > 0x20) & (second < 0x7F))[:limit]
        plain = np.flatnonzero((lens > 0) & (first > 0x20) & (first < 0x7F))[:limit]
        pairs = [[int(a)] for a in spacey]
        pairs += [[int(a), int(b)] for a in spacey for b in list(spaced) + list(plain)]
        # (first tokens a Metaspace decoder reads otherwise, "▁of▁the", " a": found from the
        # pieces, :func:`_metaspace_first_token_suspects`, and probed by from_tokenizer)
        return pairs

    def verify_against(self, tokenizer, samples: int = 64, seed: int = 0, extra=()) -> None:
        """Check our byte mapping against ``tokenizer.decode``: corner cases of the
        first-space rule (:meth:`_edge_pairs`), the token id lists ``extra``, then random
        token pairs."""
        rng = random.Random(seed)
        ids = np.nonzero(self.tok_len > 0)[0].tolist()
        if not ids:
            raise UnsupportedTokenizerError("the tokenizer has no usable (non-special) tokens")
        pairs = self._edge_pairs() + [list(p) for p in extra]
        pairs += [[rng.choice(ids), rng.choice(ids)] for _ in range(samples)]
        for pair in pairs:
            raw = b"".join(self.flat[self.tok_off[i]:self.tok_off[i] + self.tok_len[i]].tobytes() for i in pair)
            try:
                expected = raw.decode("utf-8")
            except UnicodeDecodeError:
                continue
            if self.strip_leading_space and expected.startswith(" "):
                expected = expected[1:]
            got = tokenizer.decode(pair, skip_special_tokens=True, clean_up_tokenization_spaces=False)
            if got != expected:
                tokens = tokenizer.convert_ids_to_tokens(pair)
                fix = (f"; {_FAST_FIX}" if _decoder_spec(tokenizer) is None else "")
                raise UnsupportedTokenizerError(
                    f"{type(tokenizer).__name__}.decode({pair}) (tokens {tokens}) gives {got!r} but the "
                    f"token bytes spell {expected!r}; this tokenizer's decoding cannot be mapped to "
                    f"bytes exactly{fix}"
                )

    def _build_trie(self):
        """Breadth-first byte trie over all token byte strings (vectorised, per depth).

        Nodes at depth ``d`` are the distinct (parent, byte) pairs, numbered in
        sorted order, so each node's children are contiguous and the parent
        array is non-decreasing.
        """
        lens, offs, flat = self.tok_len, self.tok_off, self.flat
        tid = np.nonzero(lens > 0)[0]
        if len(tid) == 0:
            raise UnsupportedTokenizerError("the tokenizer has no usable (non-special) tokens")
        node_of = np.zeros(len(tid), dtype=np.int64)
        tl, to = lens[tid], offs[tid]
        node_byte = [np.zeros(1, np.uint8)]
        parent = [np.full(1, -1, np.int64)]
        next_id = 1
        active = np.arange(len(tid))
        d = 0
        while True:
            d += 1
            active = active[tl[active] >= d]
            if len(active) == 0:
                break
            key = node_of[active] * 256 + flat[to[active] + d - 1]
            # ``active`` is kept sorted by key, so the keys of the previous depth
            # are already grouped: a stable sort only reorders within groups.
            order = np.argsort(key, kind="stable")
            active, key = active[order], key[order]
            first = np.empty(len(key), dtype=bool)
            first[0] = True
            np.not_equal(key[1:], key[:-1], out=first[1:])
            uniq = key[first]
            parent.append(uniq >> 8)
            node_byte.append((uniq & 255).astype(np.uint8))
            node_of[active] = next_id + np.cumsum(first) - 1
            next_id += len(uniq)
        self.node_byte = np.concatenate(node_byte)
        par = np.concatenate(parent)
        self.node_parent = par
        # nodes are numbered depth by depth: depth d is [depth_start[d], depth_start[d+1])
        self.depth_start = np.cumsum([0] + [len(x) for x in parent])
        self.num_nodes = len(par)
        link_trie(self, par, tid, node_of)
        singles = flat[to[tl == 1]]
        self.full_byte_coverage = len(np.unique(singles)) == 256
