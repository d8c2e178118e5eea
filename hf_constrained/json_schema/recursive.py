"""Recursive JSON Schemas as context-free grammars (``max_recursion_depth=None``).

The regex converter unrolls a recursive ``$ref`` up to ``max_recursion_depth``
times. Here, instead, a ``$ref`` whose target is already being expanded on the
current path becomes a *placeholder* (one private-use character standing for
the target's language), and every such target is converted once more as a rule
of its own. Each rule's regex text is then parsed (:mod:`hf_constrained.regex_parser`)
and turned into a :class:`~hf_constrained.grammar.CFG`: every placeholder-free,
non-nullable subtree stays one regex terminal (matched by the lazy byte DFA),
and the structure around the placeholders (concatenation, alternation,
repetition) becomes rules. The result has no depth limit.

Free-form values (``{}``, ``true``, ``additionalProperties: true``, untyped
items, ``{"type": "array"}`` without item keywords...) are references to one
shared rule ``json_value`` (and ``json_array`` / ``json_object``), written
with the regex route's whitespace, number and string conventions, so they
nest to any depth too (the regex route stops at ``ANY_VALUE_MAX_DEPTH``).
When the text of the rules would exceed ``MAX_REGEX_TEXT``, the conversion
is redone with the converter's shared definitions (as
:func:`~hf_constrained.json_schema.schema_to_regex` does), and each
definition becomes a rule (``shared_dN``): the grammar is the size of the
shared regex, not of the plain one.

A recursive ``$ref`` must stand alone: next to sibling assertions, or inside
an ``allOf`` with other assertions, the conjunction of a recursive language
with something else is not context-free in general, and it is refused with a
:class:`~hf_constrained.errors.SchemaError` naming the ``$ref``'s pointer.

>>> tree = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}},
...         "required": ["kids"], "additionalProperties": False}
>>> rules = schema_rules(tree, whitespace="")
>>> list(rules.rules)                         # one rule: the root, referring to itself
['']
>>> g = schema_to_grammar(tree, whitespace="")
>>> g.nonterminals[g.start]
'start'
>>> from hf_constrained.grammar import GrammarConstraint
>>> from hf_constrained.vocabulary import Vocabulary
>>> vocab = Vocabulary.from_token_bytes([None] + [bytes([b]) for b in range(256)])
>>> c = GrammarConstraint(g, vocab, eos_token_id=0)
>>> deep = '{"kids":[' * 6 + '{"kids":[]}' + ']}' * 6
>>> bool(c.accepting([c.state_of_text(deep)])[0]), c.state_of_text('{"kids":[{"kids":[]]') > 0
(True, False)
>>> free = schema_to_grammar({"type": "object", "properties": {"data": {}}}, whitespace="")
>>> c = GrammarConstraint(free, vocab, eos_token_id=0)
>>> bool(c.accepting([c.state_of_text('{"data":' + '[{"a":' * 9 + 'null' + '}]' * 9 + '}')])[0])
True
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple, Optional

from .._gc import gc_paused
from ..errors import SchemaError, nested_too_deeply
from ..grammar.cfg import CFG, Counted, productive_nonterminals
from ..regex_parser import parse as parse_regex
from . import schema_to_regex
from .charsets import _class
from .converter import _Converter, _TextLimit
from .drafts import canonical, check_metaschema, detect_draft
from .limits import WHITESPACE
from .patterns import _emit, _length_range, _whitespace_regex
from .schemas import _ANNOTATIONS, _load, _Part

#: Placeholders are single code points of Supplementary Private Use Area-B,
#: away from its ends; a schema that mentions any code point of that area (as
#: a character or a ``\\U0010xxxx`` escape) is refused, so a placeholder can
#: never be confused with text the schema asks for.
_PLACEHOLDER_BASE = 0x100001
_PLACEHOLDER_LAST = 0x10FFFE
_RESERVED = re.compile("[\U00100000-\U0010FFFF]|\\\\U0010[0-9A-Fa-f]{4}")


def _reserved_code_point(root: Any):
    """The first code point (or ``\\U0010xxxx`` escape) of the placeholders' range that the
    loaded schema mentions, as a match, or None (:func:`schema_rules` refuses such a schema)."""
    return _RESERVED.search(json.dumps(root, ensure_ascii=False))


#: Rule keys that are not JSON pointers (a pointer is ``""`` or starts with ``/``):
#: the free-form value rules, and ``shared:dN`` for the converter's shared definitions.
ANY_VALUE, ANY_ARRAY, ANY_OBJECT = "any value", "any array", "any object"
_SHARED = "shared:"
_RULE_NAMES = {"": "start", ANY_VALUE: "json_value", ANY_ARRAY: "json_array", ANY_OBJECT: "json_object"}


class SchemaRules(NamedTuple):
    """Regex text per rule, placeholders included.

    A rule's key is the JSON pointer of a recursive ``$ref`` target (``""``
    for the root), :data:`ANY_VALUE` / :data:`ANY_ARRAY` / :data:`ANY_OBJECT`
    (free-form values, nested to any depth), or ``"shared:dN"`` (a shared
    definition, made when the plain text would exceed ``MAX_REGEX_TEXT``).
    ``placeholders`` maps a rule's key to the character standing for it in
    the other rules' text. ``recursive`` is False when no rule refers to
    itself (no ``$ref`` recursed and no value is free-form): then the schema
    needs no grammar (:func:`schema_to_regex` gives the same language).
    """

    rules: dict
    placeholders: dict

    @property
    def recursive(self) -> bool:
        return any(not k.startswith(_SHARED) for k in self.placeholders)


class _Recursion:
    """The converter's hook (``_Converter.recursion``): markers and placeholders."""

    def __init__(self):
        self.placeholders: dict = {}   # target pointer -> placeholder character
        self.pending: list = []        # targets whose rule is still to convert
        self.targets: dict = {}        # target pointer -> its schema
        self.texts: dict = {}          # rule key -> regex text, for rules not converted from a target

    def marker(self, rest: dict, target: Any, tptr: str, ref_ptr: str, lineage: tuple) -> _Part:
        """A ``$ref`` at ``ref_ptr`` to ``tptr``, which is being expanded on this path."""
        siblings = sorted(set(rest) - _ANNOTATIONS)
        if siblings:
            raise SchemaError(
                f"keyword '$ref' at {ref_ptr}: a recursive reference (to {tptr or '#'}) next to "
                f"other keywords ({', '.join(siblings)}) is not supported with "
                "max_recursion_depth=None; move the siblings into the referenced schema, or use a "
                "finite max_recursion_depth")
        self.targets.setdefault(tptr, target)
        return _Part({"$recursive": tptr, "$at": ref_ptr}, ref_ptr, lineage)

    def collapse(self, flat: list) -> Optional[str]:
        """Placeholder text when the flattened conjunction is one recursive ``$ref``
        (annotations aside); None when there is no recursive ``$ref`` in it."""
        marks = [q for q in flat if "$recursive" in q.schema]
        if not marks:
            return None
        others = [q for q in flat if "$recursive" not in q.schema and set(q.schema) - _ANNOTATIONS]
        if len(marks) > 1 or others:
            what = (f"assertions at {others[0].ptr or '/'} ({', '.join(sorted(set(others[0].schema) - _ANNOTATIONS))})"
                    if others else f"another recursive reference at {marks[1].schema['$at']}")
            raise SchemaError(
                f"keyword '$ref' at {marks[0].schema['$at']}: a recursive reference combined (allOf or "
                f"siblings) with {what} is not supported with max_recursion_depth=None; put the "
                "recursive reference alone in its position, or use a finite max_recursion_depth")
        tptr = marks[0].schema["$recursive"]
        if tptr not in self.placeholders:
            self._allocate(tptr, marks[0].schema["$at"])
            self.pending.append(tptr)
        return self.placeholders[tptr]

    def _allocate(self, key: str, ptr: str) -> str:
        cp = _PLACEHOLDER_BASE + len(self.placeholders)
        if cp > _PLACEHOLDER_LAST:
            raise SchemaError(f"schema at {ptr or '/'}: too many grammar rules (recursive reference "
                              "targets and shared definitions); use a finite max_recursion_depth")
        self.placeholders[key] = chr(cp)
        return self.placeholders[key]

    def direct(self, key: str, text, ptr: str = "") -> str:
        """Placeholder of rule ``key`` whose regex text is ``text()`` (called once, after
        the placeholder exists, so the text may refer to the rule itself)."""
        if key not in self.placeholders:
            self._allocate(key, ptr)
            self.texts[key] = text()
        return self.placeholders[key]


class _RuleConverter(_Converter):
    """The regex converter writing free-form values and shared definitions as rule
    references (placeholders of ``recursion``, a :class:`_Recursion`)."""

    def __init__(self, root: Any, whitespace: str, max_depth: int, recursion: _Recursion):
        super().__init__(root, whitespace, max_depth)
        self.recursion = recursion

    # the regex route's texts, one level each: the nested values and containers in them
    # are these overrides, i.e. references to the rules themselves (any depth)
    def any_value(self, depth: Optional[int] = None) -> str:
        return self.recursion.direct(ANY_VALUE, lambda: super(_RuleConverter, self).any_value(1))

    def any_container(self, kind: str, depth: Optional[int] = None) -> str:
        return self.recursion.direct(ANY_ARRAY if kind == "array" else ANY_OBJECT,
                                     lambda: super(_RuleConverter, self).any_container(kind, 1))

    def _shared(self, text: str, ptr: str) -> str:
        call = super()._shared(text, ptr)      # the regex route's naming and size cap
        return self.recursion.direct(_SHARED + call[3:-1], lambda: text, ptr)


class _NeedsRules(Exception):
    """A recursive ``$ref`` or a free-form value: the schema needs :func:`schema_rules`."""


class _Stop:
    """``_Converter.recursion`` hook of :class:`_RegexUnlessRules`: a recursive ``$ref`` stops it."""

    def marker(self, *args):
        raise _NeedsRules()

    def collapse(self, flat: list) -> None:
        return None  # never a marker in ``flat``: marker() raised first


class _RegexUnlessRules(_Converter):
    """The regex route's converter, stopped where :class:`_RuleConverter` would make a rule that
    counts as recursion (a recursive ``$ref``, ``any_value``, ``any_container``). Until then both
    run the same code on the same subschemas, so finishing proves ``schema_rules(...).recursive``
    False, and the text is ``schema_to_regex(..., shared=True)``'s."""

    def __init__(self, root: Any, whitespace: str, max_depth: int):
        super().__init__(root, whitespace, max_depth)
        self.recursion = _Stop()

    def any_value(self, depth: Optional[int] = None) -> str:
        raise _NeedsRules()

    def any_container(self, kind: str, depth: Optional[int] = None) -> str:
        raise _NeedsRules()


def _regex_unless_rules(schema: Any, whitespace: Optional[str], strict: bool) -> Optional[str]:
    """``schema_to_regex(schema, shared=True)`` when the schema has neither recursion nor
    free-form values (the one conversion ``max_recursion_depth=None`` then needs); None when it
    has, and on any error (the caller's ``schema_rules`` then runs and reports it as before)."""
    try:
        root = _load(schema)
        if _reserved_code_point(root):
            return None  # schema_rules' error
        from . import _schema_regex
        return _schema_regex(root, whitespace, 3, strict, True, _RegexUnlessRules)
    except Exception:  # _NeedsRules, or an error schema_rules reports (its own wording)
        return None


def schema_rules(schema: Any, *, whitespace: Optional[str] = None, strict: bool = False) -> SchemaRules:
    """Convert a schema into regex text per rule, recursion left as placeholders.

    Arguments are those of :func:`~hf_constrained.json_schema.schema_to_regex`
    (without a depth). Raises :class:`SchemaError` as it does, and for a
    recursive ``$ref`` that does not stand alone.

    >>> linked = {"$defs": {"node": {"type": "object", "properties": {"next": {"anyOf": [
    ...     {"type": "null"}, {"$ref": "#/$defs/node"}]}}, "required": ["next"],
    ...     "additionalProperties": False}}, "$ref": "#/$defs/node"}
    >>> r = schema_rules(linked, whitespace="")
    >>> sorted(r.rules), r.recursive
    (['', '/$defs/node'], True)
    >>> from hf_constrained.json_schema import schema_to_regex
    >>> r = schema_rules({"type": "integer", "maximum": 9})
    >>> r.recursive, r.rules[""] == schema_to_regex({"type": "integer", "maximum": 9})
    (False, True)
    """
    with nested_too_deeply(SchemaError, "the schema"):
        return _schema_rules(schema, whitespace, strict)


def _schema_rules(schema: Any, whitespace: Optional[str], strict: bool) -> SchemaRules:
    root = _load(schema)
    m = _reserved_code_point(root)
    if m:
        raise SchemaError(f"schema at /: it mentions the code point {m.group()!r} of Supplementary "
                          "Private Use Area-B (U+100000..U+10FFFF), which max_recursion_depth=None "
                          "reserves for its rule placeholders; use a finite max_recursion_depth")
    ws = _whitespace_regex(WHITESPACE if whitespace is None else whitespace)
    check_metaschema(root)
    canon, draft4 = canonical(root, strict=strict), detect_draft(root)[0] == "draft4"
    with gc_paused():
        try:
            rules, hook, conv = _convert_rules(canon, ws, draft4, share=False)
        except _TextLimit:      # as schema_to_regex: large subschemas written once, as rules
            rules, hook, conv = _convert_rules(canon, ws, draft4, share=True)
    if rules[""] is None and not hook.placeholders:
        if conv.empty_reasons:  # as schema_to_regex: why a oneOf had no branch to generate
            raise SchemaError(conv.empty_reasons[0])
        raise SchemaError("schema at /: no JSON value satisfies the "
                          "schema (as far as the converter can generate)")
    rules.update(hook.texts)
    return SchemaRules({k: rules[k] for k in [""] + [k for k in hook.placeholders if k != ""]},
                       dict(hook.placeholders))


def _convert_rules(canon: Any, ws: str, draft4: bool, share: bool) -> tuple:
    hook = _Recursion()
    conv = _RuleConverter(canon, ws, 3, hook)
    conv.integral_floats = not draft4
    conv.share = share
    rules: dict = {}
    todo = [("", conv.root)]
    while todo:
        tptr, target = todo.pop()
        conv.ref_counts.clear()
        conv.ref_counts[tptr] = 1
        rules[tptr] = conv.convert([conv.part(target, tptr)])
        for t in hook.pending:
            if t not in rules and all(t != p for p, _ in todo):
                todo.append((t, hook.targets[t]))
        hook.pending.clear()
    return rules, hook, conv


# ---------------------------------------------------------------- regex trees -> CFG
class _Builder:
    """Rules of a :class:`CFG` from regex trees whose placeholder characters are rule references."""

    def __init__(self, rule_of_cp: dict):
        self.rule_of_cp = rule_of_cp        # placeholder code point -> nonterminal id
        self.nonterminals: list = []
        self.rules: list = []
        self.patterns: list = []
        self.term_id: dict = {}
        self._has: dict = {}                # id(node) -> contains a placeholder
        self._seq: dict = {}                # id(node) -> symbols (None: empty language)
        self._keep: list = []               # nodes memoised by id stay alive

    def nonterminal(self, name: str) -> int:
        self.nonterminals.append(name)
        return len(self.nonterminals) - 1

    def fresh(self) -> int:
        return self.nonterminal(f"_r{len(self.nonterminals)}")

    def _rule_of(self, alts: list) -> int:
        """A new nonterminal with the alternatives ``alts`` (for :class:`~..grammar.cfg.Counted`)."""
        nt = self.fresh()
        self.rules += [(nt, a) for a in alts]
        return nt

    def terminal(self, regex: str) -> int:
        if regex not in self.term_id:
            self.term_id[regex] = len(self.patterns)
            self.patterns.append(regex)
        return -1 - self.term_id[regex]

    def has_placeholder(self, node) -> bool:
        key = id(node)
        if key not in self._has:
            kind = node[0]
            if kind == "cls":
                r = node[1]
                v = len(r) == 1 and r[0][0] == r[0][1] and r[0][0] in self.rule_of_cp
            elif kind == "rep":
                v = self.has_placeholder(node[1])
            else:
                v = any(self.has_placeholder(n) for n in node[1])
            self._has[key] = v
            self._keep.append(node)
        return self._has[key]

    def seq(self, node) -> Optional[tuple]:
        """Symbols deriving the language of ``node`` (None: it is empty)."""
        key = id(node)
        if key not in self._seq:
            self._seq[key] = self._build(node)
            self._keep.append(node)
        return self._seq[key]

    def _build(self, node) -> Optional[tuple]:
        kind = node[0]
        if not self.has_placeholder(node):
            text = _emit(node, _class)
            if text is None:
                return None
            if text == "":
                return ()
            if _length_range(node)[0] > 0:
                return (self.terminal(text),)
            # nullable: a terminal may not match "", so break it up (leaves are never nullable)
            children = node[1] if kind != "rep" else None
        elif kind != "rep" and kind != "cls":
            children = self._runs(node[1], kind)
        if kind == "cls":
            return (self.rule_of_cp[node[1][0][0]],)
        if kind == "cat":
            out: list = []
            for part in children:
                s = self.seq(part)
                if s is None:
                    return None
                out.extend(s)
            return tuple(out)
        if kind == "alt":
            alts = [s for s in (self.seq(p) for p in children) if s is not None]
            if not alts:
                return None
            if len(alts) == 1:
                return alts[0]
            nt = self.fresh()
            for s in dict.fromkeys(alts):
                self.rules.append((nt, s))
            return (nt,)
        _, item, lo, hi = node
        s = self.seq(item)
        if s is None:
            return () if lo == 0 else None
        if not s or hi == 0:
            return ()
        if len(s) == 1:
            unit = s[0]
        else:
            unit = self.fresh()
            self.rules.append((unit, s))
        counted = Counted(self._rule_of)
        if hi is None:
            tail = self.fresh()                     # tail: ε | tail unit (left-recursive list)
            self.rules += [(tail, ()), (tail, (tail, unit))]
            return counted.exactly((unit,), lo) + (tail,)
        if not counted.inline(hi - lo):             # O(log) rules for a large count
            return counted.exactly((unit,), lo) + counted.up_to((unit,), hi - lo)
        chain: tuple = ()
        for _ in range(hi - lo):                    # c_k: ε | unit c_{k-1}
            nt = self.fresh()
            self.rules += [(nt, ()), (nt, (unit,) + chain)]
            chain = (nt,)
        return counted.exactly((unit,), lo) + chain

    def _runs(self, items: tuple, kind: str) -> list:
        """``items`` with each maximal run of placeholder-free items joined into one node
        (adjacent ones for a concatenation, all of them for an alternation)."""
        out, run = [], []
        for n in items:
            if self.has_placeholder(n):
                if run:
                    out.append(run[0] if len(run) == 1 else (kind, tuple(run)))
                    run = []
                out.append(n)
            else:
                run.append(n)
        if run:
            out.append(run[0] if len(run) == 1 else (kind, tuple(run)))
        return out


def rules_to_cfg(rules: SchemaRules) -> CFG:
    """The :class:`CFG` of :func:`schema_rules`' output (start rule ``start``: the root).

    >>> g = rules_to_cfg(schema_rules({"type": "array", "items": {"$ref": "#"}}, whitespace=""))
    >>> g.nonterminals[0], sorted(g.patterns)
    ('start', [',', '\\\\[', '\\\\]'])
    """
    b = _Builder({})
    nt_of = {"": b.nonterminal("start")}
    for key in rules.rules:
        if key != "":
            nt_of[key] = b.nonterminal(_RULE_NAMES.get(key) or (
                key.replace(":", "_") if key.startswith(_SHARED) else "ref:" + key))
    b.rule_of_cp = {ord(ch): nt_of[ptr] for ptr, ch in rules.placeholders.items()}
    for ptr, text in rules.rules.items():
        if text is None:
            continue                                # an empty target: its rule has no production
        s = b.seq(parse_regex(text))
        if s is not None:
            b.rules.append((nt_of[ptr], s))
    return _prune(b, rules)


def _prune(b: _Builder, rules: SchemaRules) -> CFG:
    """Drop the productions that derive no finite text (a recursion without a base case)."""
    productive = productive_nonterminals(b.rules)
    if 0 not in productive:
        cut = next((k for k in rules.placeholders if k == "" or k.startswith("/")), "")
        raise SchemaError(f"keyword '$ref' to {cut or '#'}: the schema has no finite instance (every "
                          "alternative recurses); give the recursion a non-recursive alternative")
    kept = [(lhs, rhs) for lhs, rhs in b.rules
            if lhs in productive and all(s < 0 or s in productive for s in rhs)]
    terms = [f"T{i}" for i in range(len(b.patterns))]
    return CFG(list(b.nonterminals), terms, list(b.patterns), kept, 0, []).check()


def schema_to_grammar(schema: Any, *, whitespace: Optional[str] = None, strict: bool = False) -> CFG:
    """A JSON Schema as a :class:`CFG` whose sentences are the documents the schema's
    regex conversion allows, recursion unrolled to any depth.

    Also works for a non-recursive schema (one rule; the same language as
    :func:`schema_to_regex`).

    >>> g = schema_to_grammar({"type": "array", "items": {"$ref": "#"}}, whitespace="")
    >>> len(g.rules) > 1, g.patterns[:1]
    (True, ['\\\\['])
    """
    with nested_too_deeply(SchemaError, "the schema"):
        return rules_to_cfg(schema_rules(schema, whitespace=whitespace, strict=strict))


# ---------------------------------------------------------------- JSONProcessor(max_recursion_depth=None)
_GRAMMAR_KWARGS = ("eos_token_id", "cache_dir", "mask_layout", "track_weights",
                   "max_configs", "max_threads", "max_items", "max_nodes")


def _init_grammar_route(proc, schemas: list, per_prompt: bool, tokenizer, whitespace, kwargs: dict, *,
                        strict: bool = False):
    """``JSONProcessor(..., max_recursion_depth=None)``: when some schema recurses, set ``proc``
    up on a :class:`~hf_constrained.grammar.GrammarConstraint` (every schema as a grammar) and
    return None; otherwise return the schemas' regexes for the regex path."""
    regexes = [_regex_unless_rules(s, whitespace, strict) for s in schemas]
    if all(r is not None for r in regexes):         # neither recursion nor free-form values:
        return regexes                              # the default route's regexes, converted once
    converted = [schema_rules(s, whitespace=whitespace, strict=strict) for s in schemas]
    if not any(r.recursive for r in converted):     # the default route's regexes (shared, as there)
        return [schema_to_regex(s, whitespace=whitespace, strict=strict, shared=True) for s in schemas]
    from ..grammar.constraint import GrammarConstraint
    from ..processor import ConstrainedProcessor
    from .. import cache as disk

    bad = sorted(set(kwargs) - set(_GRAMMAR_KWARGS))
    if bad:
        raise TypeError(f"JSONProcessor(max_recursion_depth=None) builds a grammar for a recursive "
                        f"schema; {', '.join(bad)} only apply to the regex path (accepted here: "
                        f"{', '.join(_GRAMMAR_KWARGS)})")
    opts = dict(kwargs)
    track = bool(opts.pop("track_weights", False))
    layout = opts.pop("mask_layout", None)
    cache_dir = disk.resolve_cache_dir(opts.pop("cache_dir", None)) or False
    grammars = [rules_to_cfg(r) for r in converted]
    constraint = GrammarConstraint(grammars if per_prompt else grammars[0], tokenizer,
                                   cache_dir=cache_dir, warm=False, **opts)
    # states and masks in the disk cache too (first masks computed there unless the file has them)
    ConstrainedProcessor.__init__(proc, constraint, tokenizer, mask_layout=layout, per_prompt=per_prompt,
                                  cache_dir=cache_dir, track_weights=track)
    proc.heal_prompt, proc.healed = False, None  # RegexProcessor's token healing: regex path only
    return None
