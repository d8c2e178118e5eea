"""Every docstring example of the package runs, offline (local tokenizer, tiny models
from ``hf_constrained.offline``), as part of the suite."""

import doctest
import importlib
import pkgutil

import numpy as np
import pytest
import torch

import hf_constrained

MODULES = sorted(m.name for m in pkgutil.iter_modules(hf_constrained.__path__, "hf_constrained.")
                 if m.name != "hf_constrained.__main__") + ["hf_constrained"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_CONSTRAINED_CACHE", str(tmp_path))  # examples never write to ~/.cache
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = finder.find(module, name, globs={**vars(module), "np": np, "torch": torch})
    torch.manual_seed(0)
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed (see output)"


def test_my_modules_have_runnable_examples():
    """The shell's modules show an example for every public class and function, none skipped."""
    for name in ["constraint", "regex_constraint", "processor", "tracking", "masks", "output", "cache",
                 "structured"]:
        module = importlib.import_module(f"hf_constrained.{name}")
        source = open(module.__file__, encoding="utf-8").read()
        assert "+SKIP" not in source, name
        for attr, obj in vars(module).items():
            if attr.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                continue
            if callable(obj):
                tests = doctest.DocTestFinder(recurse=False).find(obj, attr, globs={})
                assert any(t.examples for t in tests), f"{name}.{attr} has no example"
