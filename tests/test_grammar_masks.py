"""GrammarConstraint masks over whole vocabularies against brute-force oracles."""

import itertools
import random

import numpy as np
import pytest

from hf_constrained.constraint import DEAD, FINISHED
from hf_constrained.grammar.constraint import GrammarConstraint
from hf_constrained.vocabulary import Vocabulary

from grammar_oracle import lark_accepts, lark_parser, prefixes, sentences

JSON = r"""
?start: value
?value: object | array | string | SIGNED_NUMBER | "true" | "false" | "null"
array: "[" [value ("," value)*] "]"
object: "{" [pair ("," pair)*] "}"
pair: string ":" value
string: ESCAPED_STRING
%import common.ESCAPED_STRING
%import common.SIGNED_NUMBER
%import common.WS
%ignore WS
"""

ARITH = r"""
?start: sum
?sum: sum "+" product | sum "-" product | product
?product: product "*" atom | product "/" atom | atom
?atom: NUMBER | "-" atom | "(" sum ")"
%import common.NUMBER
%import common.WS_INLINE
%ignore WS_INLINE
"""

SQL = r"""
start: select_stmt ";"?
select_stmt: SELECT [DISTINCT] columns FROM table [where] [order] [limit]
columns: "*" | column ("," column)*
column: NAME ["." NAME] [AS NAME] | func "(" (NAME | "*") ")" [AS NAME]
func: COUNT | SUM | MAX | MIN
table: NAME [AS? NAME]
where: WHERE cond
?cond: cond OR conj | conj
?conj: conj AND pred | pred
?pred: operand OP operand | "(" cond ")" | NOT pred
?operand: NAME ["." NAME] | NUMBER | STRING
order: ORDER BY NAME [ASC | DESC]
limit: LIMIT INT
OP: "=" | "<" | ">" | "<=" | ">=" | "<>"
STRING: /'[^'\n]*'/
SELECT: "select"i
DISTINCT: "distinct"i
FROM: "from"i
WHERE: "where"i
AS: "as"i
AND: "and"i
OR: "or"i
NOT: "not"i
ORDER: "order"i
BY: "by"i
ASC: "asc"i
DESC: "desc"i
LIMIT: "limit"i
COUNT: "count"i
SUM: "sum"i
MAX: "max"i
MIN: "min"i
NAME: /[a-z_][a-z0-9_]*/
%import common.NUMBER
%import common.INT
%import common.WS
%ignore WS
"""

SENTENCES = {
    "json": ['{"a": [1, -2.5e3, true, null], "b\\"c": {"é中": "x😀"}}', "[]", ' [ {} , [ [ ] ] ] ',
             '{"key":"value","n":[0,1,2]}'],
    "arith": ["1+2*3", "(1 + 2) * -3.5 / 4", "((((7))))", "1-2-3*4/5"],
    "sql": ["SELECT * FROM users;", "select name, count(*) as n from t u where a = 1 and (b < 'x' or not c >= 2.5) order by n desc limit 10",
            "SELECT DISTINCT a.b FROM x AS y WHERE a<>b"],
}
GRAMMARS = {"json": JSON, "arith": ARITH, "sql": SQL}


def brute_force_allowed(c, q):
    """Token ids whose bytes keep configuration q live, one token at a time (the oracle)."""
    a = c.automaton
    out = []
    for t, b in enumerate(c.vocab.token_bytes):
        if b is not None and a.walk(q, b) != DEAD:
            out.append(t)
    if a.accepting[q]:
        out.extend(int(e) for e in c.eos_token_ids)
    return sorted(set(out))


# ---------------------------------------------------------------- small synthetic vocabulary
def small_vocab(alphabet):
    toks = [None] + [bytes([b]) for b in range(256)]
    toks += ["".join(p).encode() for k in (2, 3) for p in itertools.product(alphabet, repeat=k)]
    return Vocabulary.from_token_bytes(toks)


@pytest.mark.parametrize("text,alphabet,m,top,n", [
    ('start: "(" start ")" start | "[" start "]" start |', "()[]", 3, 5, 10),
    ('?start: s\n?s: s "+" p | p\n?p: p "*" a | a\n?a: /[0-9]+/ | "(" s ")"', "1+*()", 3, 5, 11),
    ('start: start "+" start | start start | "a" |', "a+", 5, 7, 8),
])
def test_small_vocabulary_masks_equal_prefix_oracle(text, alphabet, m, top, n):
    """Over a vocabulary of all bytes plus every 2- and 3-character string of the alphabet:
    allowed iff prefix + token is a prefix of a sentence (brute-force language up to n; every
    viable prefix up to ``top`` characters has a completion within n)."""
    vocab = small_vocab(alphabet)
    c = GrammarConstraint(text, vocab, eos_token_id=0)
    sents = sentences(text, alphabet, n)
    pre = prefixes(sents)
    checked = 0
    for w in sorted(p for p in pre if len(p) <= m):
        q = c.state_of_text(w)
        assert q != DEAD, w
        allowed = set(c.allowed_ids(q).tolist())
        for t, b in enumerate(vocab.token_bytes):
            if b is None:
                continue
            s = w + b.decode("latin-1")
            if len(s) <= top and all(ch in alphabet for ch in s):
                assert (t in allowed) == (s in pre), (w, s)
                checked += 1
        assert (0 in allowed) == (w in sents), w
    assert checked > 100


# ---------------------------------------------------------------- real tokenizers
def _states_along(c, tok, text):
    ids = tok.encode(text, add_special_tokens=False)
    states = [int(c.starts[0])]
    for t in ids:
        assert t in set(c.allowed_ids(states[-1]).tolist()), (text, tok.decode(ids[:len(states)]))
        states.append(int(c.advance(np.array([states[-1]]), np.array([t]))[0]))
    return ids, states


@pytest.mark.parametrize("name", ["json", "arith", "sql"])
@pytest.mark.parametrize("tok_name", ["deepseek", "mistral"])
def test_real_vocabulary_masks_are_exact(name, tok_name, request):
    tok = request.getfixturevalue(tok_name)
    c = GrammarConstraint(GRAMMARS[name], tok)
    lp = lark_parser(GRAMMARS[name])
    rng = random.Random(0)
    for text in SENTENCES[name]:
        assert lark_accepts(lp, text), text
        ids, states = _states_along(c, tok, text)            # the tokenizer's own encoding is allowed
        assert c.accepting(np.array([states[-1]]))[0], text
        eos = int(c.eos_token_ids[0])
        assert eos in set(c.allowed_ids(states[-1]).tolist())
        assert c.walk(c.starts, np.array([ids + [eos]]))[0] == FINISHED
        for q in rng.sample(states, 2):                      # whole vocabulary vs one token at a time
            assert c.allowed_ids(q).tolist() == brute_force_allowed(c, q)


def test_tokens_crossing_lexeme_boundaries_and_split_characters(deepseek):
    c = GrammarConstraint(JSON, deepseek)
    q = c.state_of_text('{"a')
    allowed = {c.vocab.token_bytes[t] for t in c.allowed_ids(q).tolist() if c.vocab.token_bytes[t]}
    assert b'":' in allowed or b'":"' in allowed or b'":[' in allowed      # ends STRING, reads ':' ...
    assert b'"}' not in allowed and b'",' not in allowed                     # a key needs its value
    # a character split across tokens: the first byte of a 3-byte character keeps the string open
    q = c.state_of_text('["')
    first = bytes([0xE4])
    t = c.vocab.token_bytes.index(first)
    assert t in set(c.allowed_ids(q).tolist())
    q2 = int(c.advance(np.array([q]), np.array([t]))[0])
    assert q2 != DEAD and not c.accepting(np.array([q2]))[0]
    assert c.automaton.walk(q2, b"\xb8\xad\"]") != DEAD and c.automaton.accepting[c.automaton.walk(q2, b"\xb8\xad\"]")]
    assert c.automaton.walk(q2, b'"') == DEAD  # a lone lead byte cannot end the string


def test_mask_walks_restore_the_garbage_collector():
    """Mask walks pause Python's collector and restore its setting, also when a limit fails."""
    import gc

    from hf_constrained.grammar import GrammarLimitError

    vocab = small_vocab("ab")
    c = GrammarConstraint('start: ("a" | "b")+', vocab, eos_token_id=0)
    assert gc.isenabled()
    c.allowed_ids(c.state_of_text("a"))
    assert gc.isenabled()
    gc.disable()
    try:
        c.allowed_ids(c.state_of_text("ab"))
        assert not gc.isenabled()
    finally:
        gc.enable()
    tight = GrammarConstraint('start: "a" start "b" | "b"', vocab, eos_token_id=0, max_configs=4, warm=False)
    with pytest.raises(GrammarLimitError):
        tight.allowed_ids(int(tight.starts[0]))
    assert gc.isenabled()


def test_construction_reads_the_grammar_with_the_collector_paused(monkeypatch):
    """Reading the text (Lark's load_grammar), building the automaton and the first mask run
    with Python's collector paused: that burst of allocations otherwise set off a full pass over
    the whole process (~100 ms with a 129k tokenizer loaded: ``grammar_bench.py``'s first grammar
    in a new process). The setting comes back after, also when the text is refused."""
    import gc

    from hf_constrained.grammar import GrammarError
    from hf_constrained.grammar import constraint as gmod

    seen = {}
    read, build = gmod.from_lark, gmod.ConfigAutomaton.__init__

    def spy(label, fn):
        def run(*a, **k):
            seen.setdefault(label, []).append(gc.isenabled())
            return fn(*a, **k)
        return run
    monkeypatch.setattr(gmod, "from_lark", spy("read", read))
    monkeypatch.setattr(gmod.ConfigAutomaton, "__init__", spy("automaton", build))
    bits = gmod.TokenIndex.bits

    def walk(index, q, *a, **k):   # a mask computed, not one read back
        if int(q) not in index._bits:
            seen.setdefault("walk", []).append(gc.isenabled())
        return bits(index, q, *a, **k)
    monkeypatch.setattr(gmod.TokenIndex, "bits", walk)
    vocab = small_vocab("ab")
    assert gc.isenabled()
    c = GrammarConstraint('start: ("a" | "b")+ "a" "b"?  // a text not read before in this process', vocab,
                          eos_token_id=0)
    assert seen == {"read": [False], "automaton": [False], "walk": [False]}, seen
    allowed = c.allowed_ids(int(c.starts[0])).tolist()
    assert gc.isenabled() and {c.vocab.token_bytes[t][:1] for t in allowed} == {b"a", b"b"}
    seen.clear()
    with pytest.raises(GrammarError):
        GrammarConstraint('start: "a" undefined_rule', vocab, eos_token_id=0)
    assert seen["read"] == [False] and gc.isenabled()
    gc.disable()   # a caller's own setting is kept
    try:
        GrammarConstraint('start: "b"+ "a"', vocab, eos_token_id=0)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_cells_filled_lazily_and_lexical_regions_are_exact(deepseek):
    """Mask walks fill only the transition cells they read (most of a row stays unfilled),
    a state inside a JSON string is walked through its lexical region (whose rows are then
    whole), and both give the brute-force masks (``walk`` fills rows whole)."""
    c = GrammarConstraint(JSON, deepseek)
    a = c.automaton
    states = [c.state_of_text(t) for t in ('{"a": [1, ', '{"k": "abc', '["x\\\\', '[{"a": nul')]
    regions = 0
    for q in states:
        allowed = c.allowed_ids(q).tolist()
        regions += c.index._region(q) is not None
        assert allowed == brute_force_allowed(c, q)
    assert regions >= 2
    table = a.table[:a.num_states]
    assert (table < 0).any() and not a.expanded[:a.num_states].all()
    assert all((table[s] >= 0).all() for s in np.flatnonzero(a.expanded[:a.num_states]))


def test_region_state_with_a_partly_filled_row():
    """A lexical region's last state (three bytes into an escape) whose row an earlier walk
    filled in part: the region walk reads its rows directly, so they are filled whole first
    (a cell left unfilled would read as a next state of -1)."""
    vocab = Vocabulary.from_token_bytes([None] + [bytes([b]) for b in range(256)]
                                        + [b'"\\xyz', b'\\xyz', b'ab"]', b'\\xyzq', b'\\xya'])
    c = GrammarConstraint('start: "[" STRING "]"\nSTRING: /"([^"\\\\]|\\\\xyz)*"/', vocab, eos_token_id=0)
    a = c.automaton
    start = c.state_of_text("[")
    c.allowed_ids(start)                   # reads '"\xyz' through the escape, cell by cell
    cell = lambda s, ch: int(a.table[s, a.byte_class[ord(ch)]])  # noqa: E731  (no filling)
    q = cell(start, '"')
    e3 = cell(cell(cell(q, "\\"), "x"), "y")
    assert e3 > 0 and cell(e3, "z") == q and (a.table[e3] < 0).any()   # partly filled
    assert c.allowed_ids(q).tolist() == brute_force_allowed(c, q)
    region = c.index._region(q)
    assert region is not None and e3 in region[0].tolist()


@pytest.mark.parametrize("name", ["arith", "json"])
def test_small_frontiers_stepped_on_python_ints(name, deepseek, monkeypatch):
    """The grammar index steps sparse trie levels of at most SMALL_FRONTIER live nodes on Python
    ints (_GrammarIndex._walk_all, lists kept from one level to the next): the same masks,
    successors and configuration ids as the numpy walk (SMALL_FRONTIER = 0: the base
    TokenIndex._walk_all) on every state along the sentences, and the brute-force masks on some.
    The numpy step is left to the wide levels (and to those over the children's budget)."""
    from hf_constrained.index import TokenIndex
    fast, slow = GrammarConstraint(GRAMMARS[name], deepseek), GrammarConstraint(GRAMMARS[name], deepseek)
    slow.index.SMALL_FRONTIER = 0
    calls = {id(fast.index): [], id(slow.index): []}
    step = TokenIndex._children
    monkeypatch.setattr(TokenIndex, "_children", lambda self, v, nc, n, s: (
        calls[id(self)].append(len(n)), step(self, v, nc, n, s))[1])
    rng, oracle = random.Random(1), []
    for text in SENTENCES[name]:
        _, states = _states_along(fast, deepseek, text)
        _, states_slow = _states_along(slow, deepseek, text)
        assert states == states_slow
        for q in states:
            assert np.array_equal(fast.index.bits(q), slow.index.bits(q)), (text, q)
            assert np.array_equal(fast.index.successors(q), slow.index.successors(q))
        oracle.append(rng.choice(states[1:]))
    assert fast.automaton.num_states == slow.automaton.num_states
    # the base's count of densely walked trie nodes (when to build the class trie) is kept
    assert fast.index._dense_nodes == slow.index._dense_nodes
    for q in oracle:   # last: the brute force fills whole rows, creating configurations
        assert fast.allowed_ids(q).tolist() == brute_force_allowed(fast, q)
    small = fast.index.SMALL_FRONTIER
    narrow = sum(1 for n in calls[id(slow.index)] if n <= small)
    assert narrow > 100 and max(calls[id(fast.index)]) > small
    assert sum(1 for n in calls[id(fast.index)] if n <= small) * 10 < narrow   # over budget only


@pytest.mark.parametrize("name", ["arith", "json", "sql"])
def test_walk_on_lists_equals_the_base_walk(name, deepseek):
    """_GrammarIndex._walk_all gives the (token, next state) pairs of TokenIndex._walk_all,
    from every state along the sentences (walked first by the base, so both read the same
    cells), also where it steps levels that the base walks densely (few live nodes deep in
    the trie) on lists."""
    from hf_constrained.index import TokenIndex
    c = GrammarConstraint(GRAMMARS[name], deepseek)
    checked = 0
    for text in SENTENCES[name]:
        _, states = _states_along(c, deepseek, text)
        for q in dict.fromkeys(states):
            if c.index._region(q) is not None:
                continue
            base_ids, base_st = TokenIndex._walk_all(c.index, q)
            ids, st = c.index._walk_all(q)
            assert len(ids) == len(base_ids)
            assert sorted(zip(ids.tolist(), st.tolist())) == sorted(zip(base_ids.tolist(), base_st.tolist())), (text, q)
            checked += 1
    assert checked > 5


def test_walk_on_lists_keeps_the_base_dense_count():
    """A level the base walks densely (its depth has few trie nodes) stepped on lists, after
    which the base goes back to sparse (few live nodes in a wide depth): the count of densely
    walked nodes (which decides when the class trie is built) and the masks stay the base's."""
    import string
    punct = [b"ab" + bytes([c]) for c in b"!#$%&*+,.:;<=>?@^_|~"]
    extra = [b"ab", b"cd", b"abc", b"abcd", b"abcde", b"cd!"] + punct
    vocab = Vocabulary.from_token_bytes([None] + [bytes([b]) for b in range(256)] + extra)
    grammar = "start: WORD\nWORD: /[%s]+/" % (string.ascii_letters + string.digits)
    fast, slow = (GrammarConstraint(grammar, vocab, eos_token_id=0, warm=False) for _ in range(2))
    slow.index.SMALL_FRONTIER = 0
    for text in ("", "a", "ab", "xyz"):
        qf, qs = fast.state_of_text(text), slow.state_of_text(text)
        assert qf == qs and np.array_equal(fast.index.bits(qf), slow.index.bits(qs)), text
        assert fast.index._dense_nodes == slow.index._dense_nodes, text
    assert fast.allowed_ids(fast.state_of_text("ab")).tolist() == brute_force_allowed(fast, fast.state_of_text("ab"))


@pytest.mark.parametrize("name", ["arith", "json", "sql"])
def test_small_fill_batches_sorted_on_python_ints(name, deepseek):
    """ConfigAutomaton.fill sorts a batch of at most FILL_SMALL cells on Python ints instead of
    np.unique: cells are filled in the same (ascending) order, so the states along the
    sentences, their masks and the number of configurations equal those with numpy alone."""
    fast, slow = GrammarConstraint(GRAMMARS[name], deepseek), GrammarConstraint(GRAMMARS[name], deepseek)
    slow.automaton.FILL_SMALL = -1
    sizes = []
    fill = type(fast.automaton).fill
    fast.automaton.fill = lambda c, k: (sizes.append(len(c)), fill(fast.automaton, c, k))
    for text in SENTENCES[name]:
        _, states = _states_along(fast, deepseek, text)
        assert _states_along(slow, deepseek, text)[1] == states
        for q in states:
            assert np.array_equal(fast.index.bits(q), slow.index.bits(q)), (text, q)
    assert fast.automaton.num_states == slow.automaton.num_states
    assert np.array_equal(fast.automaton.table[:fast.automaton.num_states], slow.automaton.table[:slow.automaton.num_states])
    assert sum(1 for n in sizes if 1 < n <= fast.automaton.FILL_SMALL) > 3


def test_small_frontiers_filling_new_cells():
    """Long narrow tokens ("((((", "-(-(", "1))") whose walks reach new configurations deep in
    the trie, where the Python step fills the cells it reads: the masks of the numpy step and
    of the brute force, at every state of a breadth-first exploration."""
    deep = [c * k for c in ("(", "(-", "1)") for k in range(2, 9)] + ["1" + ")" * k for k in range(2, 9)]
    vocab = Vocabulary.from_token_bytes([None] + [bytes([b]) for b in range(256)] + [d.encode() for d in deep])
    fast, slow = (GrammarConstraint(ARITH, vocab, eos_token_id=0, warm=False) for _ in range(2))
    slow.index.SMALL_FRONTIER = 0
    filled = []
    fill = type(fast.index)._fill
    fast.index._fill = lambda s, c: (filled.append(len(s)), fill(fast.index, s, c))
    frontier, seen = [int(fast.starts[0])], set()
    while frontier and len(seen) < 60:
        q = frontier.pop(0)
        if q in seen:
            continue
        seen.add(q)
        assert np.array_equal(fast.index.bits(q), slow.index.bits(q)), q
        frontier.extend(fast.index.successors(q).tolist()[:6])
    assert fast.automaton.num_states == slow.automaton.num_states
    assert len(seen) == 60 and sum(filled) > 50
    for q in sorted(seen)[::6]:
        assert fast.allowed_ids(q).tolist() == brute_force_allowed(fast, q)


def _assert_same_columns(n_classes, step, reference, states):
    """Two lexer steps ``(class -> column index, columns)`` give every byte class the same column."""
    assert len(step[0]) == len(reference[0]) == n_classes
    for k in range(n_classes):
        assert step[1][step[0][k]] == reference[1][reference[0][k]], (states, k)


def _assert_same_walks(name, vocab, automaton, along, masks):
    """A fresh constraint (built under the caller's monkeypatched switches) walks the sentences
    through the same states, with the same masks and as many configurations as ``automaton``."""
    slow = GrammarConstraint(GRAMMARS[name], vocab)
    assert [_states_along(slow, vocab, text)[1] for text in SENTENCES[name]] == along
    for text, states, ms in zip(SENTENCES[name], along, masks):
        for q, m in zip(states, ms):
            assert np.array_equal(slow.index.bits(q), m), (text, q)
    assert slow.automaton.num_states == automaton.num_states


@pytest.mark.parametrize("name", ["arith", "json", "sql"])
def test_small_lexer_steps_on_python_ints(name, deepseek, monkeypatch):
    """The lexer steps a lanes x classes table of at most SMALL_STEP cells on Python ints
    (lexer._small_step): every lexer step a walk along the sentences asked for gives each byte
    class the same column (lanes, next states, accepts, goes on) as the numpy step, and with
    the numpy step alone (SMALL_STEP = 0) the same states, masks and configurations (both
    with the table steps: SPARSE_STEP = False)."""
    from hf_constrained.grammar import lexer
    monkeypatch.setattr(lexer, "SPARSE_STEP", False)
    fast = GrammarConstraint(GRAMMARS[name], deepseek)
    along = [_states_along(fast, deepseek, text)[1] for text in SENTENCES[name]]
    masks = [[fast.index.bits(q) for q in states] for states in along]
    a = fast.automaton
    sizes = []
    for states in a._moves:
        st = np.array(states, dtype=np.int64)
        moves = a.lexer.table[st]
        sizes.append(moves.size)
        small, full = lexer._small_step(a.lexer, a._goes_on, moves), lexer._numpy_step(a.lexer, a._goes_on, moves)
        _assert_same_columns(a.lexer.n_classes, small, full, states)
    assert sum(s <= lexer.SMALL_STEP for s in sizes) > 10
    monkeypatch.setattr(lexer, "SMALL_STEP", 0)
    _assert_same_walks(name, deepseek, a, along, masks)


@pytest.mark.parametrize("name", ["arith", "json", "sql"])
@pytest.mark.parametrize("tok_name", ["deepseek", "mistral"])
def test_row_bookkeeping_of_cell_filling(name, tok_name, request):
    """A lexer step's classes per column (``filling.column_classes``, the cells one column
    fills) are ``inv == col``; a configuration is ``expanded`` exactly when its whole row is
    filled, and ``_left`` counts the columns still to fill of each partly filled row (the count
    replaced a row-wide check per cell; Mistral's leading-space rule fills one cell per
    start state at planning). Expanding the partly filled rows keeps every cell computed so far."""
    tok = request.getfixturevalue(tok_name)
    c = GrammarConstraint(GRAMMARS[name], tok)
    for text in SENTENCES[name]:
        _states_along(c, tok, text)
    a = c.automaton
    assert a._steps and a._left
    for inv, columns, classes in a._steps.values():
        assert len(classes) == len(columns)
        for col, got in enumerate(classes):
            assert np.array_equal(np.atleast_1d(got), np.flatnonzero(inv == col))
    table = a.table[:a.num_states]
    assert np.array_equal(a.expanded[:a.num_states], (table >= 0).all(axis=1))
    assert set(a._left) <= set(a._plans)
    for cid, left in a._left.items():
        plan = a._plans[cid]
        assert left == len(set(plan[-3][a.table[cid] < 0].tolist())) > 0, cid   # plan[-3]: each class's column
    partly = sorted(a._left)[:40]
    before = a.table[partly].copy()
    for cid in partly:
        a.expand(cid)
    after = a.table[partly]
    assert (after >= 0).all() and a.expanded[partly].all() and not set(partly) & set(a._left)
    assert np.array_equal(after[before >= 0], before[before >= 0])


def test_row_bookkeeping_with_a_leading_space_column_of_its_own():
    """The leading-space rule (SentencePiece) fills the space's cell when a start state is
    planned; where the space is a column of its own, that column is not left to fill."""
    vocab = Vocabulary.from_token_bytes([None] + [bytes([b]) for b in range(256)] + [b" a", b"ba"],
                                        strip_leading_space=True)
    c = GrammarConstraint('start: " " "a" | "b" start?', vocab, eos_token_id=0)
    a = c.automaton
    q = int(c.starts[0])
    assert c.allowed_ids(q).tolist() == brute_force_allowed(c, q) == [1 + ord(" "), 1 + ord("b")]
    a.expand(q)
    plan_space = a.table[q, a._space_class]
    assert a.expanded[q] and plan_space == a._intern(*a._closed_key(q)[:2], False) and not a._left
    assert np.array_equal(a.expanded[:a.num_states], (a.table[:a.num_states] >= 0).all(axis=1))


@pytest.mark.parametrize("name", ["arith", "json", "sql"])
def test_sparse_lexer_steps_equal_the_table_steps(name, deepseek, monkeypatch):
    """The lexer step from the lanes' live cells (lexer._sparse_step, the default) gives every
    byte class the same column (lanes, next states, accepts, goes on) as the numpy step over the
    lanes x classes table, on every lane tuple a walk along the sentences asked for (equal
    columns of different steps shared as one tuple); and with
    the table steps (SPARSE_STEP = False) the same states, masks and configurations."""
    from hf_constrained.grammar import lexer
    fast = GrammarConstraint(GRAMMARS[name], deepseek)
    along = [_states_along(fast, deepseek, text)[1] for text in SENTENCES[name]]
    masks = [[fast.index.bits(q) for q in states] for states in along]
    a = fast.automaton
    assert len(a._moves) > 10
    cols = [c for _, cs in a._moves.values() for c in cs]   # equal columns are one tuple (column_memo)
    assert len({id(c) for c in cols}) == len(set(cols)) < len(cols)
    for states in a._moves:
        st = np.array(states, dtype=np.int64)
        sparse = lexer._sparse_step(a.lexer, a._goes_on, states, {})
        full = lexer._numpy_step(a.lexer, a._goes_on, a.lexer.table[st])
        _assert_same_columns(a.lexer.n_classes, sparse, full, states)
    monkeypatch.setattr(lexer, "SPARSE_STEP", False)
    _assert_same_walks(name, deepseek, a, along, masks)
