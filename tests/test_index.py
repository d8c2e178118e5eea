"""The token masks are exact: compared over the whole vocabulary with an
independent oracle (the ``regex`` module's partial matching), and the
tokenizer's own encoding of strings from the language is never masked out."""

import re
import warnings

import numpy as np
import pytest
import regex
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hf_constrained import EmptyLanguageError, RegexProcessor, StateLimitError, UnsupportedTokenizerError
from hf_constrained.automaton import DEAD, LazyDFA
from hf_constrained.index import TokenIndex
from hf_constrained.vocabulary import Vocabulary

PATTERNS = [
    r"\d{4}-\d{2}-\d{2}",
    r"[a-z0-9._%+-]{1,20}@[a-z0-9.-]{1,20}\.[a-z]{2,6}",
    r"\{\"name\": \"[^\"\\]{0,12}\", \"age\": (0|[1-9][0-9]{0,2})\}",
    r"(é|中文|😀|naïve)+ ?x?",
    r"(Paris|London|New York|Rome)",
    r"-?(0|[1-9][0-9]*)(\.[0-9]+)?",
]
PREFIXES = {
    0: ["", "2", "2024-", "2024-01-3"],
    1: ["", "a", "bob.", "bob@mail", "bob@mail.co"],
    2: ["", "{\"name\": \"Ad", "{\"name\": \"Ada\", \"age\": 4"],
    3: ["", "中", "中文", "naïve "],
    4: ["", "New", "New ", "Ro"],
    5: ["", "-", "0", "12.", "12.5"],
}


def oracle_allowed(pattern, prefix_text, vocab, strip_first_space):
    """Token ids whose bytes keep the decoded text a prefix of a match (complete UTF-8 only)."""
    rx = regex.compile(pattern)
    prefix = prefix_text.encode()
    allowed, skipped = set(), set()
    for t, b in enumerate(vocab.token_bytes):
        if b is None:
            continue
        raw = prefix + b
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            skipped.add(t)
            continue
        if strip_first_space and text.startswith(" "):
            text = text[1:]
        if rx.fullmatch(text, partial=True) is not None:
            allowed.add(t)
    return allowed, skipped


def state_after(proc, text):
    """Walk the automaton over the bytes of a prefix as the tokenizer would decode it."""
    s = proc.dfa.starts[0]
    return proc.dfa.walk(s, text.encode())


@pytest.mark.parametrize("pi", range(len(PATTERNS)))
def test_masks_match_regex_oracle_deepseek(deepseek, pi):
    check_masks(deepseek, pi)


@pytest.mark.parametrize("pi", [0, 3, 4])
def test_masks_match_regex_oracle_mistral(mistral, pi):
    check_masks(mistral, pi)


def check_masks(tok, pi):
    pattern = PATTERNS[pi]
    proc = RegexProcessor(pattern, tok)
    vocab = proc.vocab
    for prefix in PREFIXES[pi]:
        q = state_after(proc, prefix)
        if vocab.strip_leading_space and prefix:
            # the first token's space is stripped: walk the real (unstripped) bytes
            q = proc.dfa.walk(proc.dfa.starts[0], (" " + prefix).encode())
        assert q != DEAD, prefix
        got = set(proc.index.allowed(q).tolist())
        want, skipped = oracle_allowed(pattern, prefix, vocab, vocab.strip_leading_space and not prefix)
        eos = set(proc.eos_token_ids)
        full = re.fullmatch(pattern, prefix) is not None
        assert (eos <= got) == full, prefix
        got -= eos
        got_complete = got - skipped
        assert got_complete == want, (prefix, sorted(got_complete ^ want)[:10])
        # a token leaving an incomplete character must at least extend to a live state
        for t in list(got & skipped)[:50]:
            assert proc.dfa.walk(q, vocab.token_bytes[t]) != DEAD


def feed(proc, ids, width, eos):
    """Feed a token sequence through the processor one step at a time."""
    prompt = [eos]  # any prompt works; use a one-token prompt
    seq = torch.tensor([prompt])
    out = proc(seq, torch.zeros(1, width))
    for t in ids:
        assert torch.isfinite(out[0, t]), f"token {t} masked"
        seq = torch.cat([seq, torch.tensor([[t]])], 1)
        out = proc(seq, torch.zeros(1, width))
    return out


@pytest.mark.parametrize("pi", range(len(PATTERNS)))
def test_tokenizer_encodings_never_masked(deepseek, mistral, pi):
    pattern = PATTERNS[pi]
    procs = [RegexProcessor(pattern, deepseek), RegexProcessor(pattern, mistral)]

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.from_regex(pattern, fullmatch=True))
    def check(s):
        for tok, proc in zip((deepseek, mistral), procs):
            ids = tok.encode(s, add_special_tokens=False)
            if tok.decode(ids) != s:
                continue  # the tokenizer itself does not round-trip this string
            out = feed(proc, ids, len(tok), tok.eos_token_id)
            assert torch.isfinite(out[0, tok.eos_token_id]), s

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check()


def test_multi_pattern_index_shares_one_automaton(deepseek):
    proc = RegexProcessor([PATTERNS[0], PATTERNS[4], PATTERNS[0]], deepseek)
    assert proc.dfa.starts[0] != proc.dfa.starts[1]
    assert proc._starts[0] == proc._starts[2]
    digits = set(proc.index.allowed(proc._starts[0]).tolist())
    cities = set(proc.index.allowed(proc._starts[1]).tolist())
    assert deepseek.convert_tokens_to_ids("2") in digits - cities
    assert deepseek.convert_tokens_to_ids("Paris") in cities - digits


def test_next_states_vectorised_matches_walk(deepseek):
    proc = RegexProcessor(PATTERNS[2], deepseek)
    text = '{"name": "Ada", "age": 42}'
    ids = deepseek.encode(text, add_special_tokens=False)
    state = np.array([proc.dfa.starts[0]])
    for t in ids:
        state = proc.index.next_states(state, np.array([t]))
    assert proc.dfa.is_accepting(int(state[0]))
    assert proc.dfa.walk(proc.dfa.starts[0], text.encode()) == int(state[0])


# ------------------------------------------------------------------ construction errors
def test_pattern_the_vocabulary_cannot_spell():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.train_from_iterator(["abc abc cab bca"] * 3, trainer=trainers.BpeTrainer(
        vocab_size=40, special_tokens=["<eos>"], show_progress=False))
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<eos>")
    vocab = Vocabulary.from_tokenizer(tok)
    assert not vocab.full_byte_coverage
    with pytest.raises(EmptyLanguageError, match="cannot be spelled"):
        RegexProcessor(r"abz", tok)
    proc = RegexProcessor(r"(ab|az)c", tok)  # 'az' is a dead end for this vocabulary
    allowed = proc.index.allowed(proc.dfa.starts[0])
    assert all(b"z" not in vocab.token_bytes[t] for t in allowed if vocab.token_bytes[t])


def test_empty_language_and_state_limit(deepseek):
    with pytest.raises(EmptyLanguageError):
        RegexProcessor(r"a[^\s\S]b", deepseek)
    # Counted repetitions are counters, not copies: this is small ...
    proc = RegexProcessor(r"(a{1000}){1000}", deepseek)
    assert proc.dfa.num_states < 1000  # one per length of the longest all-"a" token
    allowed = proc.index.allowed(proc.dfa.starts[0])
    vocab = proc.index.vocab
    assert len(allowed) and all(set(vocab.token_bytes[t]) == {ord("a")} for t in allowed)
    # ... and the limit on positions still stops a pattern that tracks many counters at once.
    with pytest.raises(StateLimitError, match="max_nfa_states=50"):
        RegexProcessor(r"(?:[ab]{0,50}){0,50}c", deepseek, max_nfa_states=50)
    with pytest.raises(StateLimitError, match="max_states=64"):
        RegexProcessor(r"(a|b)*a(a|b){12}", deepseek, max_states=64)  # caught at construction
    proc = RegexProcessor(r"(a|b)*a(a|b){12}", deepseek, max_states=300)
    with pytest.raises(StateLimitError, match="max_states=300"):
        proc.dfa.explore(10_000)  # ... or when generation would materialise too many


def test_unsupported_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(models.WordPiece({"[UNK]": 0, "a": 1, "##b": 2, "[SEP]": 3}, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tk.decoder = decoders.WordPiece()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="[SEP]", unk_token="[UNK]")
    with pytest.raises(UnsupportedTokenizerError, match="WordPiece"):
        RegexProcessor("ab", tok)


def test_no_eos_is_a_clear_error():
    from hf_constrained.offline import local_tokenizer
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_object=local_tokenizer().backend_tokenizer)
    from hf_constrained import GenerationConflictError
    with pytest.raises(GenerationConflictError, match="eos_token_id"):
        RegexProcessor("ab", tok)
    assert RegexProcessor("ab", tok, eos_token_id=0).eos_token_ids == [0]


def test_index_building_is_lazy(deepseek):
    """A pattern whose full DFA is huge still gets its first mask quickly."""
    proc = RegexProcessor(r"(a|b)*a(a|b){40}", deepseek)
    allowed = proc.index.allowed(proc.dfa.starts[0])
    assert len(allowed) > 0
    assert proc.dfa.num_states < 5000


@pytest.mark.parametrize("tok_name", ["deepseek", "mistral"])
def test_class_trie_walk_equals_byte_trie_walk(tok_name, request):
    # The class trie (bytes merged by automaton byte class) must give exactly the
    # masks and successor states the byte trie gives, for every state.
    tok = request.getfixturevalue(tok_name)
    vocab = Vocabulary.from_tokenizer(tok)
    for pattern in [PATTERNS[0], r'\{"name":"[^"\\]{0,12}","age":(0|[1-9][0-9]{0,3})\}', r"[a-z ]{1,8}\.?"]:
        dfa = LazyDFA.from_patterns([pattern], strip_leading_space=vocab.strip_leading_space)
        dfa.explore(300)  # (\d is Unicode: not all of it fits, a sample of states is enough)
        by_bytes = TokenIndex(dfa, vocab, [tok.eos_token_id])
        by_bytes.CLASS_TRIE_AFTER = 10**9
        by_class = TokenIndex(dfa, vocab, [tok.eos_token_id])
        by_class.CLASS_TRIE_AFTER = 0
        for q in range(1, dfa.num_states):
            ids_b, nxt_b = by_bytes._walk_trie(q)
            ids_c, nxt_c = by_class._walk_trie(q)
            ob, oc = np.argsort(ids_b), np.argsort(ids_c)
            assert np.array_equal(ids_b[ob], ids_c[oc]) and np.array_equal(nxt_b[ob], nxt_c[oc])
            assert np.array_equal(by_bytes.bits(q), by_class.bits(q))
        assert by_class._class_trie is not None and by_bytes._class_trie is None
        assert by_class._class_trie.num_nodes < vocab.num_nodes


REGION_PATTERNS = [
    # JSON object with free strings (body, UTF-8 continuations, escapes) and a bounded one
    r'\{"name":"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*","tag":"[a-z]{0,6}",'
    r'"note":"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt])*"\}',
    r"[^\n]{0,40}\n[a-zé ]*!",   # free text, then a second region with a multi-byte letter
]


@pytest.mark.parametrize("tok_name", ["deepseek", "mistral"])
def test_region_walk_equals_plain_walk(tok_name, request):
    # States inside a string body are walked through their lexical region (a
    # shared walk of the tokens that stay in the body plus a sparse walk of the
    # ones that leave it): exactly the pairs, masks and successors of the plain walk.
    from hf_constrained import region as index_module
    tok = request.getfixturevalue(tok_name)
    vocab = Vocabulary.from_tokenizer(tok)
    used = 0
    for pattern in REGION_PATTERNS:
        dfa = LazyDFA.from_patterns([pattern], strip_leading_space=vocab.strip_leading_space)
        dfa.explore(400)
        plain = TokenIndex(dfa, vocab, [tok.eos_token_id])
        plain.REGION_MIN_LOOPS = 10**9
        by_region = TokenIndex(dfa, vocab, [tok.eos_token_id])
        for q in range(1, min(dfa.num_states, 400)):
            got = by_region._walk_region(q)
            ids_p, nxt_p = plain._walk_trie(q)
            if got is not None:
                used += 1
                ids_r, nxt_r = got
                o_r, o_p = np.lexsort((nxt_r, ids_r)), np.lexsort((nxt_p, ids_p))
                assert np.array_equal(ids_r[o_r], ids_p[o_p]) and np.array_equal(nxt_r[o_r], nxt_p[o_p]), q
            assert np.array_equal(by_region.bits(q), plain.bits(q)), q
            assert np.array_equal(by_region.successors(q), plain.successors(q)), q
    assert used >= 3  # the three body states did go through their regions
    assert len(index_module._REGION_WALKS[vocab]) >= 2


def test_region_walks_are_shared_between_processors(deepseek):
    """Two schemas' string bodies share one region walk (keyed over bytes, not classes)."""
    from hf_constrained import region as index_module
    from hf_constrained import JSONProcessor
    vocab = Vocabulary.from_tokenizer(deepseek)
    index_module._REGION_WALKS.pop(vocab, None)
    walks = []
    for schema in ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                   {"type": "array", "items": {"type": "string"}, "minItems": 1}):
        proc = JSONProcessor(schema, deepseek)
        q = proc.dfa.walk(proc.dfa.starts[0], b'{"a":"' if "properties" in schema else b'["')
        assert proc.index._region_parts(q) is not None
        walks.append(dict(index_module._REGION_WALKS[vocab]))
        text = '{"a":"héllo \\"x\\""}' if "properties" in schema else '["héllo \\"x\\""]'
        ids = deepseek.encode(text, add_special_tokens=False)
        feed(proc, ids, len(deepseek), deepseek.eos_token_id)  # the real encoding is never masked
    assert walks[0].keys() <= walks[1].keys() and len(walks[1]) == len(walks[0])


def test_one_row_next_states_equals_batch(deepseek):
    """The scalar one-row path of next_states follows the vectorised rules exactly
    (EOS, finished and dead rows, out-of-vocabulary ids, tokens with no bytes)."""
    proc = RegexProcessor(PATTERNS[2], deepseek)
    index, dfa = proc.index, proc.dfa
    text = '{"name": "Ada", "age": 42}'
    seen = [dfa.walk(dfa.starts[0], text[:i].encode()) for i in range(len(text) + 1)]
    rng = np.random.default_rng(0)
    states = np.array(seen + [DEAD, -1] * 4, dtype=np.int64)
    special = [deepseek.eos_token_id, -5, len(deepseek) + 3, int(np.flatnonzero(index.vocab.tok_len == 0)[0])]
    for _ in range(40):
        tokens = rng.integers(0, len(deepseek), len(states))
        tokens[rng.random(len(states)) < 0.2] = rng.choice(special)
        allowed = [index.allowed(int(s)) if s > 0 else [] for s in states]
        for i, a in enumerate(allowed):  # mostly allowed tokens, so that rows stay alive
            if len(a) and rng.random() < 0.6:
                tokens[i] = rng.choice(a)
        batch = index.next_states(states, tokens)
        one = np.array([index.next_states(states[i:i + 1], tokens[i:i + 1])[0] for i in range(len(states))])
        assert np.array_equal(batch, one)
        assert (batch > 0).sum() >= 5


def test_module_doctests():
    import doctest
    from hf_constrained import index as index_module
    from hf_constrained import region as region_module
    for mod in (index_module, region_module):
        result = doctest.testmod(mod)
        assert result.failed == 0 and result.attempted >= 4, mod.__name__


def test_class_trie_is_built_only_when_it_pays(deepseek):
    """A few permissive first visits stay on the byte trie (building the class trie
    takes longer than they do); precompute(), which walks every state, builds it."""
    proc = RegexProcessor(r'"[^"]{0,30}"', deepseek)  # a counted string: no lexical region
    index, dfa = proc.index, proc.dfa
    q = dfa.walk(dfa.starts[0], b'"ab')
    assert index._region(q) is None and len(index.allowed(q)) > 100_000  # dense walk
    assert index._class_trie is None
    index.precompute(max_states=3)
    assert index._class_trie is not None


def test_class_trie_is_built_a_level_at_a_time(deepseek):
    """Once it pays, the class trie is built over several masks (about
    CLASS_TRIE_STEP_NODES byte-trie nodes each, never one 10-20 ms step), gives the
    same arrays as a one-shot build, and the masks walked meanwhile are exact."""
    from hf_constrained.index import ClassTrie
    vocab = Vocabulary.from_tokenizer(deepseek)
    dfa = LazyDFA.from_patterns([r'"[^"]{0,40}"'], strip_leading_space=vocab.strip_leading_space)
    index = TokenIndex(dfa, vocab, [deepseek.eos_token_id])
    plain = TokenIndex(dfa, vocab, [deepseek.eos_token_id])
    plain.CLASS_TRIE_AFTER = 10**9
    index.CLASS_TRIE_AFTER = 0
    q, masks = dfa.walk(dfa.starts[0], b'"'), 0
    while index._class_trie is None:
        assert index._region(q) is None
        assert np.array_equal(index.bits(q), plain.bits(q))
        masks += 1
        q = dfa.walk(q, b"x")
        assert masks < 40
    # 274k nodes, at least 40k per mask (a whole level), one more mask to link
    assert masks >= vocab.num_nodes // (index.CLASS_TRIE_STEP_NODES + 50_000)
    whole = ClassTrie(vocab, dfa.byte_class)
    for name in ("node_parent", "node_cls", "depth_start", "child_start", "child_end",
                 "term_ids", "term_node", "term_start", "term_end"):
        assert np.array_equal(getattr(index._class_trie, name), getattr(whole, name)), name
    for _ in range(3):  # and on the finished class trie
        q = dfa.walk(q, b"y")
        assert np.array_equal(index.bits(q), plain.bits(q))
