"""``RegexConstraint``: the regex engine (``LazyDFA`` + ``TokenIndex``) behind the
:class:`~hf_constrained.constraint.Constraint` interface.

States are the automaton's DFA state ids (``DEAD`` is 0; they are interned, so
masks are cached per state). The automaton and the index grow lazily and are
shared by every ``generate()`` call on a processor: one re-entrant lock (the
index's) is held where DFA states are determinised and where masks are
computed, never around a whole step.

>>> from hf_constrained import offline
>>> rc = RegexConstraint.from_tokenizer([r"(yes|no)!"], offline.local_tokenizer())
>>> tok = offline.local_tokenizer()
>>> q = rc.walk(rc.starts, np.array([tok.encode("yes", add_special_tokens=False)]))
>>> [tok.decode([t]) for t in rc.allowed_ids(int(q[0]))]
['!']
>>> rc.accepting(rc.walk(q, np.array([tok.encode("!", add_special_tokens=False)]))).tolist()
[True]
"""

from __future__ import annotations

import time

import numpy as np

from . import cache as disk
from .automaton import DEFAULT_MAX_NFA_STATES, DEFAULT_MAX_STATES, LazyDFA
from .constraint import FINISHED, Constraint
from .errors import GenerationConflictError
from .index import TokenIndex
from .vocabulary import Vocabulary

_PROBE_STATES = 128


class RegexConstraint(Constraint):
    """Regexes (Python ``re`` syntax, ``fullmatch``) over a tokenizer's vocabulary.

    Args:
        patterns: one regex per start state (duplicates share one).
        vocab: the :class:`~hf_constrained.vocabulary.Vocabulary` of the tokenizer.
        eos_token_ids: ids that end a match.
        pad_token_id: allowed after EOS (generate() pads finished rows).
        max_states, max_nfa_states: limits of the automaton (see ``RegexProcessor``).

    >>> from hf_constrained import offline
    >>> rc = RegexConstraint.from_tokenizer([r"[0-9]+", r"[0-9]+"], offline.local_tokenizer())
    >>> rc.starts.tolist() == [rc.starts[0]] * 2, rc.num_states > 1
    (True, True)
    """

    def __init__(self, patterns, vocab: Vocabulary, eos_token_ids, *, pad_token_id=None,
                 max_states: int = DEFAULT_MAX_STATES, max_nfa_states: int = DEFAULT_MAX_NFA_STATES,
                 strip_leading_space: bool | None = None):
        patterns = list(patterns)
        self.patterns = patterns
        self.vocab = vocab
        self.eos_token_ids = np.array(sorted(set(int(e) for e in eos_token_ids)), dtype=np.int64)
        if not len(self.eos_token_ids):
            raise GenerationConflictError(
                "the tokenizer has no EOS token; pass eos_token_id= (e.g. "
                "model.generation_config.eos_token_id)")
        self.pad_token_id = pad_token_id
        self.vocab_size = vocab.size
        self.distinct = list(dict.fromkeys(patterns))
        self.dfa = LazyDFA.from_patterns(self.distinct, max_states=max_states, max_nfa_states=max_nfa_states,
                                         strip_leading_space=vocab.strip_leading_space
                                         if strip_leading_space is None else bool(strip_leading_space))
        # Probe the first states now so a pattern whose automaton is immediately
        # larger than max_states fails at construction, not inside generate().
        self.dfa.explore(min(int(max_states) + 1, _PROBE_STATES))
        self.index = TokenIndex(self.dfa, vocab, self.eos_token_ids.tolist(), pad_token_id=pad_token_id)
        self._lock = self.index.lock
        start_of = {p: s for p, s in zip(self.distinct, self.dfa.starts)}
        self.starts = np.array([start_of[p] for p in patterns], dtype=np.int64)

    @classmethod
    def from_tokenizer(cls, patterns, tokenizer, *, eos_token_id=None, cache_dir=False, **kwargs):
        """Build from a Hugging Face tokenizer (EOS defaults to the tokenizer's)."""
        vocab = Vocabulary.from_tokenizer(tokenizer, cache_dir=cache_dir)
        return cls(patterns, vocab, vocab.eos_ids(eos_token_id), pad_token_id=getattr(tokenizer, "pad_token_id", None), **kwargs)

    def mid_text_starts(self):
        """The start states without the tokenizer's first-space rule (see ``Constraint``)."""
        if not self.vocab.strip_leading_space:
            return self.starts
        with self._lock:
            return np.array([self.dfa.unstripped(s) for s in self.starts.tolist()], dtype=np.int64)

    # ------------------------------------------------------------ transitions
    def advance(self, states, tokens):
        return self.index.next_states(states, tokens)

    def walk(self, states, tokens):
        return self.index.walk_tokens(states, np.asarray(tokens, dtype=np.int64))

    def accepting(self, states):
        states = np.asarray(states, dtype=np.int64)
        out = np.zeros(len(states), dtype=bool)
        live = states > 0
        out[live] = self.dfa.accepting[states[live]]
        return out

    # ------------------------------------------------------------ masks
    def allowed_ids(self, state):
        with self._lock:
            return self.index.allowed(int(state))

    def allowed_mask(self, state, width):
        with self._lock:
            return self.index.allowed_mask(int(state), int(width))

    def allowed_bits(self, state, width):
        with self._lock:
            bits = self.index.mask_bytes(int(state), int(width))
        if width % 8:
            bits[-1] &= (1 << (width % 8)) - 1
        return bits

    def banned_bits(self, state, width):
        with self._lock:
            return ~self.index.mask_bytes(int(state), int(width))

    def successors(self, state):
        with self._lock:
            return self.index.successors(int(state))

    def precompute(self, max_states: int | None = None, max_seconds: float | None = None) -> bool:
        """Masks of every reachable state now (breadth-first); True when complete."""
        deadline = None if max_seconds is None else time.monotonic() + max_seconds
        with self._lock:
            return self.index.precompute(max_states=max_states, deadline=deadline)

    def warm(self) -> None:
        """Compute the masks of the start states (the first mask of each pattern)."""
        with self._lock:  # the packed masks only: the id lists are not needed yet
            for s in set(self.starts.tolist()):
                self.index.bits(int(s))
            self.index.bits(FINISHED)

    @property
    def num_states(self) -> int:
        return self.dfa.num_states

    @property
    def num_masks(self) -> int:
        """Masks computed so far."""
        return self.index.num_computed

    # ------------------------------------------------------------ disk cache
    def cache_key(self):
        return disk.digest("index", self.vocab.fingerprint, self.distinct, self.eos_token_ids.tolist(),
                           self.pad_token_id, self.dfa.strip_leading_space)

    def cache_revision(self):
        return (self.dfa.num_states, self.index.num_computed)

    def export_state(self) -> dict:
        with self._lock:
            return {**self.dfa.export_states(), **self.index.export_masks()}

    def import_state(self, arrays: dict) -> bool:
        with self._lock:
            try:
                mapping = self.dfa.import_states(arrays)
                self.index.import_masks(arrays, mapping)
            except (ValueError, KeyError, IndexError):
                return False  # foreign or inconsistent file: ignore it, it gets rewritten
        return True
