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

>>> from transformers import AutoTokenizer                   # doctest: +SKIP
>>> vocab = Vocabulary.from_tokenizer(AutoTokenizer.from_pretrained("gpt2"))  # doctest: +SKIP
>>> vocab.token_bytes[vocab.token_id("Ġthe")]                 # doctest: +SKIP
b' the'
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import warnings
import weakref

import numpy as np

from .errors import UnsupportedTokenizerError

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


def _decoder_spec(tokenizer) -> dict | None:
    backend = getattr(tokenizer, "backend_tokenizer", None) or getattr(tokenizer, "_tokenizer", None)
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


def _piece_decoder(tokenizer):
    """Return (piece -> bytes|None function, strip_leading_space) for ``tokenizer``."""
    spec = _decoder_spec(tokenizer)
    if spec is None:
        raise UnsupportedTokenizerError(
            f"{type(tokenizer).__name__} has no fast (tokenizers) backend with a decoder; "
            "load it with use_fast=True or pass a PreTrainedTokenizerFast"
        )
    parts = _flatten(spec)
    kinds = [p.get("type") for p in parts]
    if kinds == ["ByteLevel"]:
        def piece_bytes(piece: str):
            try:
                return bytes(_BYTE_DECODER[c] for c in piece)
            except KeyError:
                return None
        return piece_bytes, False

    replace_from, strip, byte_fallback = None, False, False
    for p in parts:
        t = p.get("type")
        if t == "Replace" and p.get("content") == " ":
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

    def piece_bytes(piece: str):
        if byte_fallback:
            m = _BYTE_FALLBACK.match(piece)
            if m:
                return bytes([int(m.group(1), 16)])
        return piece.replace(replace_from, " ").encode("utf-8")
    return piece_bytes, strip


class Vocabulary:
    """Token bytes and their trie, for one tokenizer. Build with :meth:`from_tokenizer`."""

    _cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()

    def __init__(self, token_bytes: list, *, strip_leading_space: bool = False,
                 eos_token_ids=(), name: str = ""):
        self.token_bytes = token_bytes
        self.size = len(token_bytes)
        self.strip_leading_space = strip_leading_space
        self.default_eos_ids = tuple(eos_token_ids)
        self.name = name
        self._build_trie()
        h = hashlib.sha256()
        h.update(b"strip" if strip_leading_space else b"keep")
        for i, b in enumerate(token_bytes):
            if b is not None:
                h.update(i.to_bytes(4, "little") + len(b).to_bytes(2, "little") + b)
        self.fingerprint = h.hexdigest()[:32]

    # -- construction ---------------------------------------------------
    @classmethod
    def from_tokenizer(cls, tokenizer, *, verify: bool = True) -> "Vocabulary":
        """Build (or fetch from the per-process cache) the vocabulary of ``tokenizer``."""
        try:
            cached = cls._cache.get(tokenizer)
        except TypeError:
            cached = None
        if cached is not None:
            return cached
        piece_bytes, strip = _piece_decoder(tokenizer)
        size = len(tokenizer)
        token_bytes: list = [None] * size
        banned = set(getattr(tokenizer, "all_special_ids", []) or [])
        banned.update(getattr(tokenizer, "added_tokens_decoder", {}).keys())
        for piece, idx in tokenizer.get_vocab().items():
            if idx >= size or idx in banned:
                continue
            b = piece_bytes(piece)
            if b:
                token_bytes[idx] = b
        eos = getattr(tokenizer, "eos_token_id", None)
        vocab = cls(token_bytes, strip_leading_space=strip,
                    eos_token_ids=() if eos is None else (eos,),
                    name=getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__)
        if getattr(tokenizer, "clean_up_tokenization_spaces", False):
            warnings.warn(
                "this tokenizer has clean_up_tokenization_spaces=True, so tokenizer.decode() may "
                "remove spaces the constraint produced; decode with clean_up_tokenization_spaces=False "
                "(RegexProcessor.decode does)", stacklevel=3)
        if verify:
            vocab.verify_against(tokenizer)
        try:
            cls._cache[tokenizer] = vocab
        except TypeError:
            pass
        return vocab

    def verify_against(self, tokenizer, samples: int = 256, seed: int = 0) -> None:
        """Check our byte mapping against ``tokenizer.decode`` on random token pairs."""
        rng = random.Random(seed)
        ids = [i for i, b in enumerate(self.token_bytes) if b is not None]
        if not ids:
            raise UnsupportedTokenizerError("the tokenizer has no usable (non-special) tokens")
        for _ in range(samples):
            pair = [rng.choice(ids), rng.choice(ids)]
            raw = b"".join(self.token_bytes[i] for i in pair)
            try:
                expected = raw.decode("utf-8")
            except UnicodeDecodeError:
                continue
            if self.strip_leading_space and expected.startswith(" "):
                expected = expected[1:]
            got = tokenizer.decode(pair, skip_special_tokens=True, clean_up_tokenization_spaces=False)
            if got != expected:
                raise UnsupportedTokenizerError(
                    f"tokenizer.decode({pair}) gives {got!r} but the token bytes spell {expected!r}; "
                    "this tokenizer's decoding cannot be mapped to bytes exactly"
                )

    def _build_trie(self):
        """Breadth-first byte trie over the distinct token byte strings (vectorised)."""
        uniq = sorted({b for b in self.token_bytes if b is not None})
        if not uniq:
            raise UnsupportedTokenizerError("the tokenizer has no usable (non-special) tokens")
        lens = np.fromiter((len(b) for b in uniq), dtype=np.int64, count=len(uniq))
        n = len(uniq)
        lmax = int(lens.max())
        flat = np.frombuffer(b"".join(uniq), dtype=np.uint8)
        offs = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lens, out=offs[1:])
        # Padded matrix, filled column by column (memory n * lmax bytes).
        mat = np.zeros((n, lmax), dtype=np.uint8)
        pos = np.arange(lmax)
        rows = np.repeat(np.arange(n), lens)
        cols = np.arange(len(flat)) - np.repeat(offs[:-1], lens)
        mat[rows, cols] = flat
        # Longest common prefix with the previous string in sorted order.
        lcp = np.zeros(n, dtype=np.int64)
        if n > 1:
            minlen = np.minimum(lens[1:], lens[:-1])
            mism = (mat[1:] != mat[:-1]) | (pos[None, :] >= minlen[:, None])
            lcp[1:] = mism.argmax(axis=1)
        node_byte = [np.zeros(1, np.uint8)]
        parent = [np.full(1, -1, np.int64)]
        node_of = np.zeros(n, dtype=np.int64)  # node at the current depth, per string
        next_id = 1
        active = np.arange(n)
        for d in range(1, lmax + 1):
            active = active[lens[active] >= d]
            if len(active) == 0:
                break
            new = lcp[active] < d
            ids = next_id + np.cumsum(new) - 1
            parent.append(node_of[active][new])
            node_byte.append(mat[active[new], d - 1])
            node_of[active] = ids
            next_id += int(new.sum())
        del mat
        self.node_byte = np.concatenate(node_byte)
        par = np.concatenate(parent)
        n_nodes = len(par)
        self.num_nodes = n_nodes
        nodes = np.arange(n_nodes)
        self.child_start = (np.searchsorted(par[1:], nodes, "left") + 1).astype(np.int64)
        self.child_end = (np.searchsorted(par[1:], nodes, "right") + 1).astype(np.int64)
        # Terminal token ids per node (several ids may spell the same bytes).
        index_of = {b: i for i, b in enumerate(uniq)}
        tid = np.array([i for i, b in enumerate(self.token_bytes) if b is not None], dtype=np.int64)
        u = np.fromiter((index_of[self.token_bytes[i]] for i in tid), dtype=np.int64, count=len(tid))
        term_node = node_of[u]
        order = np.argsort(term_node, kind="stable")
        self.term_ids = tid[order]
        sorted_nodes = term_node[order]
        self.term_start = np.searchsorted(sorted_nodes, nodes, "left")
        self.term_end = np.searchsorted(sorted_nodes, nodes, "right")
        # Per token id: where its bytes live in ``flat`` (length 0 = not generatable).
        self.flat = flat
        self.tok_off = np.zeros(self.size, dtype=np.int64)
        self.tok_len = np.zeros(self.size, dtype=np.int64)
        self.tok_off[tid] = offs[u]
        self.tok_len[tid] = lens[u]
        single = {b[0] for b in uniq if len(b) == 1}
        self.full_byte_coverage = len(single) == 256

    def token_id(self, piece_bytes_or_str) -> int:
        b = piece_bytes_or_str.encode() if isinstance(piece_bytes_or_str, str) else piece_bytes_or_str
        for i, tb in enumerate(self.token_bytes):
            if tb == b:
                return i
        raise KeyError(b)
