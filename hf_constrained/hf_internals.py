"""Everything that reads transformers' internals: the running generate() call's
``GenerationConfig`` (found on the call stack) and the processors that run
before ours in its ``LogitsProcessorList``.

These are private details of transformers; every supported version is tested,
and each function documents what it returns when a version does not expose
what it looks for.
"""

from __future__ import annotations

import sys

import torch


def _find_generation_config():
    """The ``generation_config`` of the outermost running ``transformers`` generate()
    call on this thread, or None when called outside generate()."""
    f = sys._getframe(2)
    found = None
    while f is not None:
        if f.f_code.co_name == "generate" and str(f.f_globals.get("__name__", "")).startswith("transformers"):
            found = f
        f = f.f_back
    if found is None:
        return None
    return found.f_locals.get("generation_config")


# generate() settings behind the processors that may set scores to -inf
_BANNING = {
    "MinLengthLogitsProcessor": "min_length",
    "MinNewTokensLengthLogitsProcessor": "min_new_tokens",
    "NoBadWordsLogitsProcessor": "bad_words_ids",
    "NoRepeatNGramLogitsProcessor": "no_repeat_ngram_size",
    "EncoderNoRepeatNGramLogitsProcessor": "encoder_no_repeat_ngram_size",
    "SuppressTokensLogitsProcessor": "suppress_tokens",
    "SuppressTokensAtBeginLogitsProcessor": "begin_suppress_tokens",
    "PrefixConstrainedLogitsProcessor": "prefix_allowed_tokens_fn",
    "ForcedBOSTokenLogitsProcessor": "forced_bos_token_id",
    "ForcedEOSTokenLogitsProcessor": "forced_eos_token_id",
    "SequenceBiasLogitsProcessor": "sequence_bias",
}
_FINITE = {"RepetitionPenaltyLogitsProcessor", "EncoderRepetitionPenaltyLogitsProcessor",
           "TemperatureLogitsWarper", "UnbatchedClassifierFreeGuidanceLogitsProcessor",
           "ClassifierFreeGuidanceLogitsProcessor", "LogitNormalization"}


def _processors_before(proc) -> list:
    """The processors that run before ``proc`` and may set scores to -inf.

    Looks at the ``LogitsProcessorList`` that is calling us; empty when we are
    called directly or first.
    """
    f = sys._getframe(1)
    while f is not None and f.f_code.co_name != "__call__":
        f = f.f_back
    while f is not None and f.f_locals.get("self") is proc:
        f = f.f_back
    owner = f.f_locals.get("self") if f is not None else None
    if not isinstance(owner, list) or not any(p is proc for p in owner):
        return []
    before = []
    for p in owner:
        if p is proc:
            break
        if type(p).__name__ not in _FINITE:
            before.append(p)
    return before


def _processor_list(proc):
    """The ``LogitsProcessorList`` (a list) that is calling ``proc``, or None when
    ``proc`` is called directly."""
    f = sys._getframe(1)
    while f is not None:
        owner = f.f_locals.get("self")
        if isinstance(owner, list) and any(p is proc for p in owner):
            return owner
        f = f.f_back
    return None


def _length_guard_ban(p, length: int):
    """EOS ids a min-length processor bans at this sequence length (None if inactive or unknown)."""
    name = type(p).__name__
    if name == "MinLengthLogitsProcessor":
        active = length < int(p.min_length)
    elif name == "MinNewTokensLengthLogitsProcessor":
        active = length - int(p.prompt_length_to_skip) < int(p.min_new_tokens)
    else:
        return None
    eos = p.eos_token_id
    eos = eos.tolist() if isinstance(eos, torch.Tensor) else eos
    eos = [eos] if isinstance(eos, int) else list(eos)
    return frozenset(int(e) for e in eos) if active else frozenset()
