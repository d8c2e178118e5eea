"""Context-free grammars: Lark or GBNF text -> CFG -> interned Earley nodes ->
a byte-level configuration automaton -> token masks (see ``GrammarConstraint``)."""

from .cfg import CFG, GrammarError, from_lark
from .earley import GrammarLimitError, Parser

__all__ = ["CFG", "GrammarError", "GrammarLimitError", "Parser", "from_lark"]
