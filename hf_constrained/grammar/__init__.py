"""Context-free grammars: Lark or GBNF text -> CFG -> interned Earley nodes ->
a byte-level configuration automaton -> token masks (see ``GrammarConstraint``)."""

from .cfg import CFG, GrammarError, from_lark
from .earley import GrammarLimitError, Parser
from .constraint import GrammarConstraint, load_grammar
from .gbnf import gbnf_to_cfg, gbnf_to_lark
from .lexeme_ends import GrammarWarning
from .processor import GrammarProcessor

__all__ = ["CFG", "GrammarConstraint", "GrammarError", "GrammarLimitError", "GrammarProcessor", "GrammarWarning",
           "Parser",
           "from_lark", "gbnf_to_cfg", "gbnf_to_lark", "load_grammar"]
