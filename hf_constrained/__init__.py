"""hf_constrained: make every sample and every beam of Hugging Face ``generate()``
match a regular expression (and JSON Schemas / choices built on it).

Data flow, one module per noun::

    pattern --regex_parser--> syntax tree --automaton--> lazy byte-level DFA
    tokenizer --vocabulary--> token bytes + trie
    DFA + vocabulary --index--> per-state token masks
    masks --processor--> RegexProcessor (a transformers LogitsProcessor)
    output ids --output--> (samples, batch) texts / Generation objects
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
from .processor import RegexProcessor
from .json_schema import SchemaError, choice_regex, schema_to_regex
from .structured import ChoiceProcessor, JSONProcessor, Truncated
from .weights import resample

__version__ = "0.1.0"

__all__ = [
    "RegexProcessor",
    "JSONProcessor",
    "ChoiceProcessor",
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
