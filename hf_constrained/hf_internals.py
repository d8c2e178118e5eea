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


def _generation_context():
    """``(generation_config, foreign_draft)`` for a processor call, in one walk of the stack.

    ``generation_config``: that of the outermost running ``transformers`` generate() call on
    this thread (the frame of a function named ``generate`` defined in a ``transformers``
    module, local ``generation_config``; 4.46 to 5.x have both, tested per version in
    ``tests/test_compat.py``). None when called outside generate(), or when a version has no
    such frame or local: the processor then treats each call by its tokens alone (a new
    generate() call is detected from the rows, the number of prompts is inferred from runs of
    identical rows, scores are never masked in place).

    ``foreign_draft``: True when called by the draft model's own generate() in universal
    assisted generation (``assistant_model=`` with a different tokenizer, ``tokenizer=`` and
    ``assistant_tokenizer=``): transformers hands the main call's logits processors to the
    draft model, whose ids and scores are in the *assistant's* vocabulary (its LM head even
    pruned to the shared tokens when sampling). Masking them with this tokenizer's masks is
    meaningless, and tracking them started the call's run on the draft's prompt ids. The
    draft needs no constraint: the main model verifies every token with its own (masked)
    scores, so a draft token the pattern rejects is never accepted. Found as a
    ``get_candidates`` / ``_generate_candidates`` frame of an
    ``AssistedCandidateGeneratorDifferentTokenizers`` (4.46 to 5.x; its subclass
    ``UniversalSpeculativeDecodingGenerator`` too).
    """
    f = sys._getframe(1)
    found, foreign = None, False
    while f is not None:
        name = f.f_code.co_name
        if name == "generate":
            if str(f.f_globals.get("__name__", "")).startswith("transformers"):
                found = f
        elif name in _CANDIDATE_FRAMES and not foreign:
            owner = f.f_locals.get("self")
            foreign = owner is not None and any(
                c.__name__ == "AssistedCandidateGeneratorDifferentTokenizers" for c in type(owner).__mro__)
        f = f.f_back
    return (found.f_locals.get("generation_config") if found is not None else None), foreign


_CANDIDATE_FRAMES = frozenset(("_generate_candidates", "get_candidates"))


def _find_generation_config():
    """The ``generation_config`` of :func:`_generation_context`."""
    return _generation_context()[0]


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

    Looks at the ``LogitsProcessorList`` that is calling us (the nearest
    ``__call__`` frame whose ``self`` is a list holding ``proc``; the same on
    4.46 to 5.x, tested per version). Returns ``[]`` when we are called directly,
    first, or from anything that is not such a list (an unknown version):
    then no conflict with other processors is checked, nothing else changes.
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


def _forced_first_token(proc, config):
    """The token id a ``ForcedBOSTokenLogitsProcessor`` forces at this step, or None.

    transformers adds that processor for ``forced_bos_token_id`` (mBART, NLLB, M2M100 and
    BART checkpoints set it: the target language's code, ``<s>``); at a sequence length of 1
    (an encoder-decoder's decoder start token) it sets every score but that token's to -inf,
    whichever processors run before or after it. Returns the id when ``config`` sets it and
    the list calling ``proc`` holds such a processor for it (same on 4.46 to 5.x, tested per
    version); None otherwise (outside generate(), no such processor, an unknown version).
    """
    forced = getattr(config, "forced_bos_token_id", None) if config is not None else None
    if forced is None:
        return None
    owner = _processor_list(proc)
    if owner is None or not any(type(p).__name__ == "ForcedBOSTokenLogitsProcessor"
                                and getattr(p, "bos_token_id", None) == forced for p in owner):
        return None
    return int(forced)


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


def _has_legacy_beam_sampling() -> bool:
    """True on transformers < 4.48, whose beam sampling needs :func:`_legacy_beam_sampling_guard`."""
    import transformers

    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return (major, minor) < (4, 48)


LEGACY_BEAM_SAMPLING = _has_legacy_beam_sampling()


def _legacy_beam_sampling_guard() -> bool:
    """Keep transformers' pre-4.48 beam sampling from crashing on constrained rows.

    Root cause (transformers 4.46/4.47 ``GenerationMixin._beam_search`` with
    ``do_sample=True``): each step draws ``2 * num_beams`` candidates per prompt
    with ``torch.multinomial`` *without replacement* over all beams' scores.
    When the constraint leaves fewer tokens than that with non-zero probability
    (``(yes|no)``: 3 tokens, then EOS only), multinomial also returns
    zero-probability candidates, whose score is -inf, and ``BeamSearchScorer``
    keeps them as running beams with beam score -inf. Once every running beam of
    a prompt has -inf (its valid hypotheses are all finished), the next step's
    softmax over that prompt's row is all NaN and ``torch.multinomial`` raises
    "probability tensor contains either `inf`, `nan` or element < 0". Such a
    prompt has nothing valid left to generate: it is finished.

    Called by the processor at each step; on that code path it marks such
    prompts done in the running ``beam_scorer`` (transformers then pads them and
    leaves their running beams out of the result) and sets their beam scores to
    0 so this step's softmax is finite (the draws for a done prompt are
    discarded). Device-side, no synchronisation. Returns True when it found the
    legacy beam-sampling frame, False elsewhere (newer transformers, other
    modes, called outside generate()), where it does nothing.
    """
    f = _transformers_frame("_beam_search")
    if f is None:
        return False
    local = f.f_locals
    scorer, beam_scores = local.get("beam_scorer"), local.get("beam_scores")
    if not local.get("do_sample") or scorer is None or not isinstance(beam_scores, torch.Tensor):
        return False
    done = getattr(scorer, "_done", None)
    if not isinstance(done, torch.Tensor) or beam_scores.dim() != 1 or beam_scores.numel() % done.numel():
        return False
    per = beam_scores.numel() // done.numel()
    dead = torch.isneginf(beam_scores.view(done.numel(), per)).all(1)
    done |= dead.to(done.device)
    beam_scores.masked_fill_(dead.repeat_interleave(per), 0.0)
    return True


def _transformers_4() -> bool:
    import transformers

    return transformers.__version__.startswith("4.")


_TRANSFORMERS_4 = _transformers_4()  # read once: the first call of every processor asks


def _in_slicing_pipeline() -> bool:
    """True when called from a transformers 4.x ``TextGenerationPipeline``.

    Those pipelines (4.46 to 4.57) return the new text as
    ``decode(prompt + generated)[len(decode(prompt)):]``: the generated part is
    decoded in the middle of the text, so a SentencePiece tokenizer's "first
    ``▁`` decodes without its space" rule does not apply to it, and a first
    ``▁944`` comes back as ``' 944'``. transformers 5 decodes only the generated
    tokens (the rule applies, as for ``tokenizer.decode(generated_ids)``).
    False outside a pipeline and on transformers 5.
    """
    if not _TRANSFORMERS_4:
        return False
    f = sys._getframe(1)
    while f is not None:
        if f.f_globals.get("__name__") == "transformers.pipelines.text_generation":
            return True
        f = f.f_back
    return False


def _transformers_frame(name: str):
    """The innermost running frame of a function ``name`` defined in a ``transformers`` module
    (called from within it, e.g. through generate()), or None."""
    f = sys._getframe(2)
    while f is not None:
        if f.f_code.co_name == name and str(f.f_globals.get("__name__", "")).startswith("transformers"):
            return f
        f = f.f_back
    return None


def _in_assisted_decoding() -> bool:
    """True when called from transformers' ``_assisted_decoding`` (a draft model, the same
    model's early exit, prompt lookup: 4.46 to 5.x). On 5.x the draft model is a generate()
    argument, not a field of the ``GenerationConfig``, so the config alone does not tell."""
    return _transformers_frame("_assisted_decoding") is not None
