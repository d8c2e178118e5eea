"""The grammar modules' docstring examples run (offline)."""

import doctest

import pytest

from hf_constrained.grammar import cfg, configs, constraint, earley, gbnf, processor


@pytest.mark.parametrize("mod", [cfg, configs, constraint, earley, gbnf, processor], ids=lambda m: m.__name__)
def test_module_doctests(mod):
    result = doctest.testmod(mod)
    assert result.attempted > 0 and result.failed == 0
