"""hf_constrained: make every sample and every beam of Hugging Face ``generate()``
match a regular expression (and JSON Schemas / choices built on it).

Data flow, one module per noun::

    pattern --regex_parser--> syntax tree --forest--> positions --automaton--> lazy byte-level DFA
    tokenizer --vocabulary--> token bytes + trie
    DFA + vocabulary --index--> per-state token masks
    DFA + index --regex_constraint--> RegexConstraint (a constraint engine)
    constraint --processor--> ConstrainedProcessor (a transformers LogitsProcessor):
        tracking (per-call row states), masks (packed / sparse layouts), hf_internals
    output ids --output--> (samples, batch) texts / Generation objects

Any engine implementing :class:`~hf_constrained.constraint.Constraint` runs
under the same shell (``ConstrainedProcessor``); ``RegexProcessor``,
``JSONProcessor`` and ``ChoiceProcessor`` are that shell on the regex engine.
"""

from .errors import (
    ConstraintError,
    EmptyLanguageError,
    GenerationConflictError,
    RegexSyntaxError,
    StateLimitError,
    UnsupportedRegexError,
    UnsupportedTokenizerError,
)
from . import cache
from .output import Generation, Sequence, reshape_samples
from .constraint import Constraint
from .processor import ConstrainedProcessor, RegexProcessor
from .regex_constraint import RegexConstraint
from .json_schema import SchemaError, choice_regex, schema_to_regex
from .structured import ChoiceProcessor, JSONProcessor, Rejected, Truncated
from .grammar import GrammarConstraint, GrammarError, GrammarLimitError, GrammarProcessor, GrammarWarning
from .weights import resample

__version__ = "0.1.0"

__all__ = [
    "ConstrainedProcessor",
    "Constraint",
    "RegexConstraint",
    "RegexProcessor",
    "GrammarProcessor",
    "GrammarConstraint",
    "GrammarError",
    "GrammarLimitError",
    "GrammarWarning",
    "JSONProcessor",
    "ChoiceProcessor",
    "Rejected",
    "Truncated",
    "schema_to_regex",
    "choice_regex",
    "SchemaError",
    "reshape_samples",
    "Generation",
    "Sequence",
    "resample",
    "ConstraintError",
    "EmptyLanguageError",
    "GenerationConflictError",
    "RegexSyntaxError",
    "StateLimitError",
    "UnsupportedRegexError",
    "UnsupportedTokenizerError",
]
