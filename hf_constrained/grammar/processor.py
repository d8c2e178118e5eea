"""GrammarProcessor: the generate() shell (:class:`~hf_constrained.processor.ConstrainedProcessor`)
driving a :class:`~.constraint.GrammarConstraint`."""

from __future__ import annotations

from .. import cache as disk
from ..processor import ConstrainedProcessor
from .configs import DEFAULT_MAX_CONFIGS, DEFAULT_MAX_THREADS
from .constraint import GrammarConstraint, grammar_list
from .earley import DEFAULT_MAX_ITEMS, DEFAULT_MAX_NODES


class GrammarProcessor(ConstrainedProcessor):
    r"""Constrain ``generate()`` so that every sample and beam is a sentence of a grammar.

    Args:
        grammar_or_grammars: Lark grammar text (start rule ``start``), GBNF text with
            ``syntax="gbnf"`` (start rule ``root``), or a list with one grammar per prompt.
        tokenizer: the model's tokenizer (byte-level BPE or SentencePiece with byte fallback).
        syntax: ``"lark"`` (default) or ``"gbnf"``.
        start: the Lark start rule.
        eos_token_id: an id or list of ids (default: the tokenizer's EOS).
        max_configs, max_threads, max_items, max_nodes: limits on the configuration table,
            lexemes in progress per configuration, Earley items per parser node and parser
            nodes (``GrammarLimitError`` past one, never an out-of-memory).
        mask_layout: see :class:`~hf_constrained.processor.ConstrainedProcessor`.
        cache_dir: disk cache (None: ``HF_CONSTRAINED_CACHE`` or the default; False: off) of the
            tokenizer's vocabulary, of the read grammar (by a digest of its text) and of the
            configurations and masks built so far (merged in after each ``generate()`` call), so a
            fresh processor or another process starts where this one left off.

    Every row that emitted EOS decodes to a sentence of its grammar; a row cut off
    by ``max_new_tokens`` is a prefix of one. All generation modes are supported
    (sampling, beams, assisted decoding), as for regexes.

    Example (offline, tiny random model)::

        >>> from hf_constrained import offline
        >>> tok = offline.local_tokenizer()
        >>> model = offline.tiny_model(tok)
        >>> proc = GrammarProcessor('start: "(" start ")" | "x"', tok)
        >>> out = model.generate(**tok(["Q:"], return_tensors="pt"), logits_processor=[proc],
        ...                      num_beams=3, num_return_sequences=2, max_new_tokens=12)
        >>> texts = proc.decode(out)
        >>> import re
        >>> all(re.fullmatch(r"\(*x?\)*", t) for t in texts)
        True
    """

    def __init__(self, grammar_or_grammars, tokenizer, *, syntax: str = "lark", start: str = "start",
                 eos_token_id=None, max_configs: int = DEFAULT_MAX_CONFIGS,
                 max_threads: int = DEFAULT_MAX_THREADS, max_items: int = DEFAULT_MAX_ITEMS,
                 max_nodes: int = DEFAULT_MAX_NODES, mask_layout: str | None = None, cache_dir=None):
        _, per_prompt = grammar_list(grammar_or_grammars)
        constraint = GrammarConstraint(grammar_or_grammars, tokenizer, syntax=syntax, start=start,
                                       eos_token_id=eos_token_id, max_configs=max_configs,
                                       max_threads=max_threads, max_items=max_items, max_nodes=max_nodes,
                                       cache_dir=disk.resolve_cache_dir(cache_dir) or False, warm=False)
        super().__init__(constraint, tokenizer, mask_layout=mask_layout, per_prompt=per_prompt,
                         cache_dir=cache_dir)

    grammars = property(lambda self: self.constraint.grammars)
    vocab = property(lambda self: self.constraint.vocab)

    def precompute(self, max_states: int | None = 1_000, max_seconds: float | None = None) -> bool:
        """Compute masks of the configurations generation can reach now (breadth-first over
        tokens), instead of the first time each is visited, and store them in the disk cache.

        A grammar with recursion reaches infinitely many configurations, so this stops after
        ``max_states`` masks (default 1000) or ``max_seconds``; it returns True only when every
        reachable configuration has its mask (a grammar whose language is finite, say).

        >>> from hf_constrained import offline
        >>> tok = offline.local_tokenizer()
        >>> GrammarProcessor('start: ("yes" | "no") "!"?', tok, cache_dir=False).precompute()
        True
        >>> GrammarProcessor('start: "(" start ")" | "x"', tok, cache_dir=False).precompute(max_states=20)
        False
        """
        complete = self.constraint.precompute(max_states=max_states, max_seconds=max_seconds)
        self.save_index()
        return complete
