"""GrammarProcessor inside generate(): every mode, one grammar or one per prompt; bad input."""

import numpy as np
import pytest
import torch
from transformers import LogitsProcessor

from hf_constrained import GrammarError, GrammarLimitError, GrammarProcessor
from hf_constrained.constraint import DEAD
from hf_constrained.offline import tiny_model
from hf_constrained.grammar import from_lark

from grammar_oracle import lark_accepts, lark_parser
from test_grammar_masks import ARITH, JSON, SQL

NEST = 'start: "(" start ")" | "[" start "]" | "x"'
GRAMMARS = {"nest": NEST, "arith": ARITH, "json": JSON, "sql": SQL}
MODES = {
    "greedy": dict(do_sample=False),
    "sampling": dict(do_sample=True, top_k=50),
    "samples": dict(do_sample=True, num_return_sequences=3),
    "beams": dict(num_beams=3, num_return_sequences=2),
    "beam_sampling": dict(num_beams=3, do_sample=True),
}


class BoostEOS(LogitsProcessor):
    """Runs after the grammar's mask: makes EOS likely wherever the grammar allows it."""

    def __init__(self, eos, by=4.0):
        self.eos, self.by = eos, by

    def __call__(self, input_ids, scores):
        scores[:, self.eos] += self.by
        return scores


def check(proc, out, parsers):
    """EOS rows parse with Lark's Earley parser, cut-off rows are prefixes; tracking exact."""
    finished = 0
    gens = proc.generations(out)
    for b, g in enumerate(gens):
        lp = parsers[b if len(parsers) > 1 else 0]
        for s in g.sequences:
            if s.finished:
                finished += 1
                assert lark_accepts(lp, s.text), s.text
            else:
                grammar_index = b if proc.per_prompt else 0
                q = proc.constraint.walk(proc.constraint.starts[[grammar_index]], np.array([s.token_ids]))[0]
                assert q != DEAD, s.text
    ids, tracked = proc.tracked_states()
    assert np.array_equal(tracked, proc.states_from_tokens(ids))
    return finished


@pytest.mark.parametrize("mode", list(MODES))
def test_every_mode_one_grammar_and_one_per_prompt(mode, deepseek, deepseek_model):
    torch.manual_seed(0)
    prompts = ["A:", "Some longer prompt:", "C"]
    inputs = deepseek(prompts, return_tensors="pt", padding=True)
    total = 0
    for grammars, boost in (([NEST], 0.0), ([NEST], 4.0), ([NEST, ARITH, JSON], 0.0), ([NEST, ARITH, SQL], 3.0)):
        proc = GrammarProcessor(grammars if len(grammars) > 1 else grammars[0], deepseek)
        out = deepseek_model.generate(**inputs, logits_processor=[proc, BoostEOS(deepseek.eos_token_id, boost)],
                                      max_new_tokens=14, return_dict_in_generate=True, **MODES[mode])
        total += check(proc, out, [lark_parser(g) for g in grammars])
        grid = proc.decode(out)
        assert len(grid if MODES[mode].get("num_return_sequences", 1) == 1 else grid[0]) == 3
    assert total > 0


def test_sql_grammar_generates_valid_prefixes_mistral(mistral, mistral_model):
    torch.manual_seed(1)
    proc = GrammarProcessor(SQL, mistral)
    out = mistral_model.generate(**mistral(["Query:"], return_tensors="pt"), logits_processor=[proc],
                                 do_sample=True, num_return_sequences=4, max_new_tokens=16,
                                 return_dict_in_generate=True)
    check(proc, out, [lark_parser(SQL)])


def test_assisted_generation(deepseek, deepseek_model):
    assistant = tiny_model(deepseek, "llama", seed=7)
    for kwargs in (dict(assistant_model=assistant), dict(assistant_model=assistant, do_sample=True),
                   dict(prompt_lookup_num_tokens=3)):
        torch.manual_seed(3)
        proc = GrammarProcessor(NEST, deepseek)
        out = deepseek_model.generate(**deepseek(["(( [x] )) then (["], return_tensors="pt"),
                                      logits_processor=[proc], max_new_tokens=12,
                                      return_dict_in_generate=True, **kwargs)
        check(proc, out, [lark_parser(NEST)])


def test_gbnf_grammar(deepseek, deepseek_model):
    gbnf = 'root ::= "(" root ")" | "[" root "]" | "x"'
    proc = GrammarProcessor(gbnf, deepseek, syntax="gbnf")
    out = deepseek_model.generate(**deepseek(["Q:"], return_tensors="pt"), logits_processor=[proc],
                                  num_beams=2, max_new_tokens=10, return_dict_in_generate=True)
    check(proc, out, [lark_parser(NEST)])


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize("text,syntax,needle", [
    ('start: "a" (\n', "lark", "line 1"),
    ("start: foo\n", "lark", "foo"),
    ('foo: "a"\n', "lark", "start rule"),
    ('start: a | "y"\na: a "x"\n', "lark", "unproductive rule 'a'"),
    ('start: start "x"\n', "lark", "empty"),
    ("start: A\nA: /(?<=a)b/\n", "lark", "terminal A"),
    ("start: A\nA: /a(/\n", "lark", "terminal A"),
    ("%declare FOO\nstart: FOO\n", "lark", "%declare"),
    ("start: A\nA: /ab/s\n", "lark", "flags"),
    ("start: A\nA: /a*/\n", "lark", "empty string"),
    ('root ::= "a" (', "gbnf", "line 1"),
    ("root ::= foo", "gbnf", "undefined rule 'foo'"),
    ('expr ::= "a"', "gbnf", "'root'"),
])
def test_bad_grammars_fail_clearly_at_construction(text, syntax, needle, deepseek):
    with pytest.raises(GrammarError) as e:
        GrammarProcessor(text, deepseek, syntax=syntax)
    assert needle in str(e.value), str(e.value)


def test_syntax_error_has_line_and_column(deepseek):
    with pytest.raises(GrammarError) as e:
        GrammarProcessor('start: "a"\nfoo: "b" )\n', deepseek)
    assert e.value.line == 2 and e.value.column is not None, str(e.value)


def test_unbounded_ambiguity_hits_the_documented_limit(deepseek):
    """``s: s s | "a"``: the open items of a row grow with its length: a clear error, no OOM."""
    proc = GrammarProcessor('start: start start | "a"', deepseek, max_items=300)
    c = proc.constraint
    with pytest.raises(GrammarLimitError, match="max_items=300"):
        c.state_of_text("a" * 400)


def test_configuration_limits_raise(deepseek):
    with pytest.raises(GrammarLimitError, match="max_configs=20"):
        GrammarProcessor(JSON, deepseek, max_configs=20)   # the first mask already needs more
    with pytest.raises(GrammarLimitError, match="max_threads=1"):  # after "a": two lexemes in progress
        # (regular=False: read as one regular rule, A | B would be a single lexeme)
        GrammarProcessor(from_lark('start: A | B\nA: "ab"\nB: "ac"', regular=False), deepseek, max_threads=1)
    GrammarProcessor('start: A | B\nA: "ab"\nB: "ac"', deepseek, max_threads=2)
    many = from_lark("start: " + " | ".join(f'"w{i}"' for i in range(30)), regular=False)
    with pytest.raises(GrammarLimitError, match="max_threads=20 .*literal alternatives"):
        GrammarProcessor(many, deepseek, max_threads=20)   # 30 literals possible at the start


def test_beams_share_interned_configurations(deepseek, deepseek_model):
    """Rows are followed by interned state ids (beams share configurations, nothing is copied):
    tracked states equal those recomputed from the tokens, and rows with equal tokens have equal ids."""
    proc = GrammarProcessor(JSON, deepseek)
    deepseek_model.generate(**deepseek(["J:"], return_tensors="pt"), logits_processor=[proc],
                            num_beams=6, num_return_sequences=6, max_new_tokens=10)
    ids, tracked = proc.tracked_states()
    assert np.array_equal(tracked, proc.states_from_tokens(ids))
    rows = [tuple(r) for r in ids.tolist()]
    for i in range(len(rows)):
        for j in range(len(rows)):
            if rows[i] == rows[j]:
                assert tracked[i] == tracked[j]


def test_packed_mask_layout(deepseek, deepseek_model):
    """The accelerators' layout (banned bits from GrammarConstraint.banned_bits), run on CPU."""
    c_bits = GrammarProcessor(JSON, deepseek).constraint
    q = c_bits.state_of_text('{"a": [1, ')
    width = 129280 + 16
    bits = np.unpackbits(c_bits.banned_bits(q, width), bitorder="little")[:width].astype(bool)
    assert np.array_equal(~bits, c_bits.allowed_mask(q, width))
    torch.manual_seed(5)
    proc = GrammarProcessor(JSON, deepseek, mask_layout="packed")
    out = deepseek_model.generate(**deepseek(["J:"], return_tensors="pt"),
                                  logits_processor=[proc, BoostEOS(deepseek.eos_token_id, 3.0)],
                                  do_sample=True, num_return_sequences=4, max_new_tokens=12,
                                  return_dict_in_generate=True)
    check(proc, out, [lark_parser(JSON)])


def test_grammar_engine_grows_consistently_from_many_threads(deepseek):
    """8 threads walk random allowed tokens on one fresh GrammarConstraint (configurations,
    parser nodes and masks created concurrently); every mask equals the one a second
    constraint computes alone for the same tokens, and no configuration is interned twice."""
    from engine_checks import grow_from_threads

    from hf_constrained import GrammarConstraint

    shared = grow_from_threads(lambda: GrammarConstraint(SQL, deepseek), walks=4, steps=10)
    a = shared.automaton
    assert a.num_states == len(a._ids) and a.parser.num_nodes == len(a.parser._ids) + len(a.parser._ids_accepting)  # none interned twice
