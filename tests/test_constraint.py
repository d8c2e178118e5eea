"""A second engine, a finite set of token sequences written directly against the
Constraint interface, driven by the unchanged shell (ConstrainedProcessor) through
samples, beams, beam sampling and assisted generation, with both mask layouts."""

import numpy as np
import pytest
import torch

from hf_constrained import ConstrainedProcessor, Constraint
from hf_constrained.constraint import DEAD, FINISHED
from hf_constrained.offline import tiny_model

FRUIT = ["apple", "banana split", "cherry", "kiwi kiwi kiwi"]
CITIES = ["Paris", "Rome", "New York", "Tokyo"]


class Words(Constraint):
    """One of a few token-id sequences per start (one start per word list), then EOS."""

    def __init__(self, lists, eos, pad, vocab_size):
        self.prefix_of = {}  # state -> (list index, token prefix)
        self.state_of = {}
        self.words = set()
        for i, seqs in enumerate(lists):
            self._state((i, ()))
            for s in seqs:
                for k in range(1, len(s) + 1):
                    self._state((i, tuple(s[:k])))
                self.words.add((i, tuple(s)))
        self.starts = np.array([self.state_of[(i, ())] for i in range(len(lists))], dtype=np.int64)
        self.eos_token_ids = np.array([eos])
        self.pad_token_id = pad
        self.vocab_size = vocab_size
        self.eos = eos

    def _state(self, key):
        if key not in self.state_of:
            self.state_of[key] = len(self.state_of) + 1
            self.prefix_of[self.state_of[key]] = key
        return self.state_of[key]

    def accepting(self, states):
        return np.array([self.prefix_of.get(int(q)) in self.words for q in states], dtype=bool)

    def advance(self, states, tokens):
        out = []
        for q, t in zip(np.asarray(states).tolist(), np.asarray(tokens).tolist()):
            if q == FINISHED:
                out.append(FINISHED)
            elif q > 0 and t == self.eos:
                out.append(FINISHED if self.prefix_of[q] in self.words else DEAD)
            elif q > 0:
                i, p = self.prefix_of[q]
                out.append(self.state_of.get((i, p + (t,)), DEAD))
            else:
                out.append(DEAD)
        return np.array(out, dtype=np.int64)

    def allowed_ids(self, q):
        if q == FINISHED:
            return np.array(sorted({self.eos, self.pad_token_id}), dtype=np.int32)
        if q <= 0:
            return np.array([self.eos], dtype=np.int32)
        i, p = self.prefix_of[q]
        nxt = {k[1][-1] for k in self.state_of if k[0] == i and len(k[1]) == len(p) + 1 and k[1][:-1] == p}
        if (i, p) in self.words:
            nxt.add(self.eos)
        return np.array(sorted(nxt), dtype=np.int32)


def words(tok, *lists, cacheable=True):
    enc = [[tok.encode(w, add_special_tokens=False) for w in ws] for ws in lists]
    w = Words(enc, tok.eos_token_id, tok.pad_token_id, len(tok))
    w.cacheable = cacheable
    return w


MODES = {
    "samples": dict(do_sample=True, num_return_sequences=5),
    "beams": dict(num_beams=3, num_return_sequences=2),
    "beam-sampling": dict(num_beams=3, do_sample=True, num_return_sequences=3),
    "greedy": dict(do_sample=False),
}


@pytest.mark.parametrize("layout", ["packed", "sparse"])
@pytest.mark.parametrize("mode", list(MODES))
def test_word_engine_under_the_shell(local_tok, local_model, layout, mode):
    proc = ConstrainedProcessor(words(local_tok, FRUIT, CITIES), local_tok, mask_layout=layout)
    assert proc.per_prompt
    torch.manual_seed(0)
    out = local_model.generate(**local_tok(["Fruit:", "City:"], return_tensors="pt", padding=True),
                               logits_processor=[proc], max_new_tokens=20, **MODES[mode])
    gens = proc.generations(out)
    assert [g.prompt_index for g in gens] == [0, 1]
    finished = 0
    for g, allowed in zip(gens, (FRUIT, CITIES)):
        assert len(g.sequences) == MODES[mode].get("num_return_sequences", 1)
        for s in g.sequences:
            if s.finished:
                finished += 1
                assert s.text in allowed, (s.text, allowed)
            else:  # cut off by max_new_tokens: a prefix of a word
                assert any(w.startswith(s.text) for w in allowed), (s.text, allowed)
    assert finished >= 2
    ids, tracked = proc.tracked_states()
    assert np.array_equal(tracked, proc.states_from_tokens(ids))


def test_word_engine_assisted(local_tok, local_model):
    assistant = tiny_model(local_tok, "llama", seed=7)
    proc = ConstrainedProcessor(words(local_tok, FRUIT + CITIES), local_tok)
    for sample in (False, True):
        torch.manual_seed(1)
        out = local_model.generate(**local_tok(["Say:"], return_tensors="pt"), logits_processor=[proc],
                                   assistant_model=assistant, do_sample=sample, max_new_tokens=20)
        assert proc.generations(out)[0].sequences[0].finished
        assert proc.decode(out) in FRUIT + CITIES
        ids, tracked = proc.tracked_states()
        assert np.array_equal(tracked, proc.states_from_tokens(ids))


def test_uncacheable_engine_gets_fresh_masks(local_tok, local_model):
    """cacheable=False: the shell keeps no per-state mask table and asks every step.

    Two prompts with one word each, of different lengths: the first row finishes
    while the second goes on, so FINISHED is needed at several steps (the shell
    asks for it only when a step has a finished row) and must be asked each time."""
    engine = words(local_tok, ["Rome"], ["kiwi kiwi kiwi"], cacheable=False)
    asked = []
    real = engine.allowed_mask
    engine.allowed_mask = lambda q, w: asked.append(q) or real(q, w)
    proc = ConstrainedProcessor(engine, local_tok, mask_layout="sparse")
    out = local_model.generate(**local_tok(["City:", "Fruit:"], return_tensors="pt", padding=True),
                               logits_processor=[proc], do_sample=False, max_new_tokens=30)
    assert [t.strip() for t in proc.decode(out)] == ["Rome", "kiwi kiwi kiwi"]
    steps_with_a_finished_row = len(local_tok.encode("kiwi kiwi kiwi", add_special_tokens=False)) - \
        len(local_tok.encode("Rome", add_special_tokens=False))
    assert steps_with_a_finished_row >= 2
    assert asked.count(FINISHED) >= steps_with_a_finished_row and proc._tables == {}


def test_base_class_defaults(local_tok):
    w = words(local_tok, ["Paris"])
    paris = local_tok.encode("Paris", add_special_tokens=False)
    eos, pad = local_tok.eos_token_id, local_tok.pad_token_id
    # walk: -1 pads a short row; finished rows stay finished, live rows die
    seqs = np.array([paris + [eos, pad], paris[:1] + [-1] * (len(paris) + 1)])
    assert w.walk(w.starts[[0, 0]], seqs).tolist() == [FINISHED, DEAD]
    width = len(local_tok) + 5
    mask = w.allowed_mask(int(w.starts[0]), width)
    assert mask.nonzero()[0].tolist() == [paris[0]] and mask.shape == (width,)
    bits = np.unpackbits(w.banned_bits(int(w.starts[0]), width), bitorder="little")[:width]
    assert np.array_equal(bits.astype(bool), ~mask)
    assert set(w.allowed_ids(FINISHED).tolist()) == {eos, pad}
    with pytest.raises(NotImplementedError):
        w.successors(1)
    assert w.cache_key() is None and w.import_state({}) is False and w.export_state() == {}
    with pytest.raises(NotImplementedError):
        Constraint().advance(np.zeros(1), np.zeros(1))


@pytest.mark.parametrize("width", [8, 20, 1000, 129_280])
def test_pack_ids_equals_packbits_and_leaves_its_row_clear(width):
    """``pack_ids`` (a per-thread bool row, cleared after each call) equals packing a
    fresh row, call after call: few ids (cleared one by one), many (cleared whole),
    none, and after a call that failed on an id out of range."""
    from hf_constrained.constraint import pack_ids, packed_ids

    rng = np.random.default_rng(width)

    def plain(ids):
        hit = np.zeros(width, dtype=bool)
        hit[ids] = True
        return np.packbits(hit, bitorder="little")

    for n in [0, 1, 3, width // 64 + 1, width // 2, width]:
        for _ in range(3):
            ids = rng.choice(width, size=min(n, width), replace=False).astype(np.int64)
            got = pack_ids(ids, width)
            assert got.dtype == np.uint8 and np.array_equal(got, plain(ids))
            assert packed_ids(got).tolist() == sorted(ids.tolist())
    with pytest.raises(IndexError):
        pack_ids(np.array([1, width + 5]), width)
    assert not pack_ids(np.zeros(0, dtype=np.int64), width).any()  # the failed call left nothing set


def test_pack_ids_rows_are_per_thread():
    """Threads packing at once never see each other's bits."""
    from engine_checks import in_threads

    from hf_constrained.constraint import pack_ids

    width, errors = 50_000, []

    def work(seed):
        rng = np.random.default_rng(seed)
        try:
            for _ in range(300):
                ids = rng.choice(width, size=int(rng.integers(1, 2000)), replace=False)
                hit = np.zeros(width, dtype=bool)
                hit[ids] = True
                if not np.array_equal(pack_ids(ids, width), np.packbits(hit, bitorder="little")):
                    errors.append(seed)
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    in_threads(work, 4)
    assert not errors, errors[:3]


@pytest.mark.parametrize("layout", ["packed", "sparse"])
def test_engine_may_have_its_own_vocab_attribute(local_tok, local_model, layout):
    """``vocab`` is not part of the Constraint contract: an engine that keeps its own
    (a list of token strings, a dict) is not mistaken for the built-in Vocabulary."""
    engine = words(local_tok, ["Rome", "Paris"])
    engine.vocab = local_tok.get_vocab()
    proc = ConstrainedProcessor(engine, local_tok, mask_layout=layout)
    out = local_model.generate(**local_tok(["City:"], return_tensors="pt"), logits_processor=[proc],
                               do_sample=False, max_new_tokens=10)
    assert proc.decode(out) in ("Rome", "Paris")


@pytest.mark.parametrize("layout", ["packed", "sparse"])
def test_allowed_ids_of_the_wrong_kind_are_refused_by_name(local_tok, layout):
    """The default allowed_mask never turns a negative id into a token counted from the
    end of the vocabulary (a silent wrong mask), and names allowed_ids for ids that are
    not integers (instead of numpy's indexing error); a list of ints is accepted."""
    from hf_constrained.masks import make_masks

    engine = words(local_tok, ["Rome"])
    start, base = int(engine.starts[0]), engine.allowed_ids
    width = len(local_tok)
    engine.allowed_ids = lambda q: base(q).tolist()
    assert engine.allowed_mask(start, width).nonzero()[0].tolist() == base(start).tolist()
    for bad, err in [(lambda q: np.append(base(q), -1), ValueError),
                     (lambda q: base(q).astype(np.float32), TypeError),
                     (lambda q: np.isin(np.arange(width), base(q)), TypeError)]:
        engine.allowed_ids = bad
        with pytest.raises(err, match=r"Words\.allowed_ids"):
            make_masks(layout, engine, width, torch.device("cpu")).apply(
                torch.zeros(1, width), np.array([start]), inplace=True)


@pytest.mark.parametrize("rows", [1, 2])
def test_advance_results_are_checked_by_name(local_tok, local_model, rows):
    """What advance returns is checked on every step, one row or several: a list of ints
    is taken, a float array, one state too few or a state below FINISHED (which the
    masks would silently treat as finished) raise an error naming Words.advance instead
    of an IndexError deep in the row tracking."""
    inputs = local_tok(["City:", "A longer prompt:"][:rows], return_tensors="pt", padding=True)

    def generate(advance):
        engine = words(local_tok, ["Rome", "Paris", "New York"])
        real = engine.advance
        engine.advance = lambda s, t: advance(real(s, t))
        proc = ConstrainedProcessor(engine, local_tok)
        out = local_model.generate(**inputs, logits_processor=[proc], do_sample=True,
                                   num_return_sequences=2, max_new_tokens=10)
        return proc, out

    proc, out = generate(lambda st: st.tolist())
    assert all(s.text in ("Rome", "Paris", "New York") for g in proc.generations(out) for s in g.sequences
               if s.finished)
    for advance, err in [(lambda st: st.astype(np.float64), TypeError), (lambda st: st[:-1], TypeError),
                         (lambda st: np.where(st > 1, -5, st), ValueError)]:
        with pytest.raises(err, match=r"Words\.advance"):
            generate(advance)


@pytest.mark.parametrize("layout", ["packed", "sparse"])
@pytest.mark.parametrize("empty_in", ["live", "finished"])
def test_a_mask_with_no_token_is_refused_by_name(local_tok, local_model, layout, empty_in):
    """A state whose mask allows nothing (against the contract) would leave its rows all
    -inf: greedy search then silently takes id 0 (EOS here) and sampling fails inside torch
    on NaNs. The mask tables refuse it with an error naming the engine's allowed_ids."""
    from hf_constrained.errors import ConstraintError

    engine = words(local_tok, ["kiwi kiwi kiwi"])
    base, start = engine.allowed_ids, int(engine.starts[0])
    if empty_in == "live":
        engine.allowed_ids = lambda q: np.zeros(0, np.int32) if q > start else base(q)
        inputs = local_tok(["Fruit:"], return_tensors="pt")
    else:  # two prompts, rows finish at different steps: the FINISHED row is needed
        engine = words(local_tok, ["Rome"], ["kiwi kiwi kiwi"])
        base = engine.allowed_ids
        engine.allowed_ids = lambda q: np.zeros(0, np.int32) if q == FINISHED else base(q)
        inputs = local_tok(["City:", "Fruit:"], return_tensors="pt", padding=True)
    proc = ConstrainedProcessor(engine, local_tok, mask_layout=layout)
    for kw in (dict(do_sample=False), dict(do_sample=True, num_return_sequences=2)):
        with pytest.raises(ConstraintError, match=r"Words\.allowed_ids\(-?\d+\) allows no token"):
            local_model.generate(**inputs, logits_processor=[proc], max_new_tokens=20, **kw)


def test_any_cache_key_string_names_one_file_in_the_folder(local_tok, tmp_path):
    """cache_key() is documented as "a string": a readable key with a '/' stays in the cache
    folder, keys that share their first 40 characters get their own files, and a key that
    is not a string is refused naming cache_key (not "'int' object is not subscriptable")."""
    def engine(key):
        w = words(local_tok, ["Rome"])
        w.cache_key = lambda: key
        return w

    prefix = "my-word-list-engine/for-the-local-tokenizer/v1/"
    paths = [ConstrainedProcessor(engine(prefix + name), local_tok, cache_dir=tmp_path)._cache_path
             for name in ("fruit", "cities")]
    assert paths[0] != paths[1] and all(p.parent == tmp_path for p in paths)
    assert sorted(p.name for p in tmp_path.glob("index-*.npy")) == sorted(p.name for p in paths)
    with pytest.raises(TypeError, match=r"Words\.cache_key"):
        ConstrainedProcessor(engine(12345), local_tok, cache_dir=tmp_path)


def test_allowed_bits_of_the_wrong_shape_are_refused_by_name(local_tok):
    """The CPU layout reads an engine's allowed_bits as they are: a bool mask instead of packed
    bits failed inside torch ("INDICES element is out of DATA bounds"), one byte too few silently
    banned the last 8 ids. Both are refused, naming allowed_bits."""
    from hf_constrained.masks import make_masks

    engine = words(local_tok, ["Rome"])
    start, width = int(engine.starts[0]), len(local_tok)
    good = engine.allowed_mask(start, width)
    for bad in (good, np.packbits(good, bitorder="little")[:-1], list(np.packbits(good, bitorder="little"))):
        engine.allowed_bits = lambda q, w, bad=bad: bad
        with pytest.raises(TypeError, match=r"Words\.allowed_bits\(\d+, 544\) must return 68 uint8 bytes"):
            make_masks("sparse", engine, width, torch.device("cpu")).apply(
                torch.zeros(1, width), np.array([start]), inplace=True)
    engine.allowed_bits = lambda q, w: np.packbits(engine.allowed_mask(q, w), bitorder="little")
    out = make_masks("sparse", engine, width, torch.device("cpu")).apply(torch.zeros(1, width), np.array([start]),
                                                                         inplace=False)
    assert torch.isfinite(out[0]).nonzero()[:, 0].tolist() == engine.allowed_ids(start).tolist()
