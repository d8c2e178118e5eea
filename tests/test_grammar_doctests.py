"""The grammar modules' docstring examples run (offline)."""

import doctest

import pytest

from hf_constrained.grammar import (cfg, configs, constraint, earley, filling, gbnf, lexeme_ends, lexer, node_cache,
                                    processor, python_match, regex_tree, shared_regions)


MODULES = [cfg, configs, constraint, earley, filling, gbnf, lexeme_ends, lexer, node_cache, processor, python_match,
           regex_tree, shared_regions]


@pytest.mark.parametrize("mod", MODULES, ids=lambda m: m.__name__)
def test_module_doctests(mod):
    result = doctest.testmod(mod)
    assert result.attempted > 0 and result.failed == 0
