"""Constraint indexes against brute force (docs/methods.md §7): the entity trie and the relation span
index on random token sequences (hypothesis), and the ParseKG-level ConstraintIndex."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kgrag_plugins.index.parsekg import ParseKG
from kgrag_plugins.methods.translator.constraints import (
    ConstraintIndex,
    SpanIndex,
    TokenTrie,
    format_clue,
    parse_clue,
)

TOK = st.integers(min_value=0, max_value=12)  # a small alphabet so prefixes collide often
SEQS = st.lists(st.lists(TOK, min_size=1, max_size=10), min_size=0, max_size=8)
END = 99


def brute_trie(seqs, prefix):
    n = len(prefix)
    return {s[n] for s in seqs if len(s) > n and list(s[:n]) == list(prefix)}


def brute_span(seqs, prefix, max_len, end):
    if not prefix:
        out = {t for s in seqs for t in s}
        return out or {end}
    if len(prefix) >= max_len:
        return {end}
    n, out = len(prefix), {end}
    for s in seqs:
        for j in range(len(s) - n):
            if list(s[j : j + n]) == list(prefix):
                out.add(s[j + n])
    return out


@settings(max_examples=200, deadline=None)
@given(SEQS, st.data())
def test_constraints_trie_matches_brute_force(seqs, data):
    trie = TokenTrie((s, i) for i, s in enumerate(seqs))
    # prefixes of stored sequences (hits) and random ones (mostly misses)
    pool = [s[: data.draw(st.integers(0, len(s)))] for s in seqs] + [data.draw(st.lists(TOK, max_size=6))]
    for prefix in pool:
        assert trie.allowed_next(prefix) == brute_trie(seqs, prefix)
    for i, s in enumerate(seqs):
        assert i in trie.values(s)
    assert len(trie) == len({tuple(s) for s in seqs})


@settings(max_examples=200, deadline=None)
@given(SEQS, st.integers(1, 6), st.data())
def test_constraints_span_index_matches_brute_force(seqs, max_len, data):
    idx = SpanIndex(seqs, end_id=END, max_len=max_len)
    pool = [data.draw(st.lists(TOK, max_size=7))]
    for s in seqs:  # every substring start, random length: mostly hits
        a = data.draw(st.integers(0, len(s) - 1))
        pool.append(s[a : a + data.draw(st.integers(0, len(s) - a))])
    for prefix in pool:
        assert idx.allowed_next(prefix) == brute_span(seqs, prefix, max_len, END), prefix
        hit = any(list(s[j : j + len(prefix)]) == list(prefix) for s in seqs for j in range(len(s) - len(prefix) + 1))
        assert idx.contains(prefix) == (bool(prefix) and hit)


@settings(max_examples=100, deadline=None)
@given(SEQS, st.data())
def test_constraints_span_walk_only_yields_substrings(seqs, data):
    """Following allowed_next from the empty prefix until END never leaves the substring set."""
    idx = SpanIndex(seqs, end_id=END, max_len=16)
    prefix: list[int] = []
    while True:
        nxt = sorted(idx.allowed_next(prefix))
        t = data.draw(st.sampled_from(nxt))
        if t == END:
            break
        prefix.append(t)
        assert idx.contains(prefix)
    assert len(prefix) <= 16


# --------------------------------------------------------------------------- over a ParseKG


class WordTokenizer:
    """Whitespace tokenizer with a growing vocabulary (a stand-in for a real tokenizer)."""

    eos_token_id = 0

    def __init__(self):
        self.vocab = {"<eos>": 0}

    def encode(self, text, add_special_tokens=False):
        return [self.vocab.setdefault(w, len(self.vocab)) for w in text.replace("@@", " @@ ").split()]


def small_kg():
    kg = ParseKG()
    kg.add_sentence("p1", "Obama was born in Honolulu.", "## was born in ##.", ["e:obama"], ["e:hon"])
    kg.add_sentence(
        "p1", "Obama served as president of the United States.", "## served as president of ##.", ["e:obama"], ["e:us"]
    )
    kg.add_sentence("p2", "Hank Snow was born in Liverpool.", "## was born in ##.", ["e:snow"], ["e:liv"])
    kg.add_sentence(
        "p3", "In 1914 Snow met Cash in Liverpool.", "In ## ## met ## in ##.", ["e:snow"], ["e:1914", "e:cash", "e:liv"]
    )
    return kg


NAMES = {
    "e:obama": "Barack Obama",
    "e:snow": "Hank Snow",
    "e:hon": "Honolulu",
    "e:us": "United States",
    "e:liv": "Liverpool",
    "e:cash": "Johnny Cash",
    "e:1914": "1914",
}


def test_constraints_index_entities_and_relations():
    tok = WordTokenizer()
    ci = ConstraintIndex(small_kg(), tok, names=NAMES)
    assert set(ci.names_by_entity()) == {"Barack Obama", "Hank Snow"}
    barack, hank = tok.encode("Barack")[0], tok.encode("Hank")[0]
    assert ci.entity_allowed_next([]) == {barack, hank}
    assert ci.entity_allowed_next(tok.encode("Barack")) == set(tok.encode("Obama"))
    assert ci.entity_allowed_next(tok.encode("Johnny")) == set()  # a tail only, not an entry
    # R+ of Hank Snow: two hyperrelations; any start position; end always allowed once non-empty
    assert ci.hyperrelations("Hank Snow") == ["## was born in ##.", "In ## ## met ## in ##."]
    nxt = ci.relation_allowed_next("Hank Snow", tok.encode("in"))
    assert nxt == set(tok.encode("##.")) | {0}  # "born in ##." and "met ## in ##." ("In" differs)
    assert ci.relation_allowed_next("Hank Snow", tok.encode("##")) == set(tok.encode("was ## met in")) | {0}
    assert ci.relation_allowed_next("Hank Snow", tok.encode("served")) == {0}  # Obama's, not Snow's
    assert ci.is_valid("Barack Obama", "served as president") and not ci.is_valid("Hank Snow", "served as")
    # reverse direction: tails and R-
    assert "Liverpool" in ci.names_by_entity("reverse")
    assert ci.hyperrelations("Liverpool", "reverse") == ["## was born in ##.", "In ## ## met ## in ##."]
    assert ci.relation_allowed_next("Nobody", []) == {0}
    # the 16-token cap
    long = ConstraintIndex(small_kg(), tok, names=NAMES, max_relation_tokens=2)
    assert long.relation_allowed_next("Hank Snow", tok.encode("was born")) == {0}


def test_constraints_relation_tokens_use_leading_space_convention():
    """Hyperrelations are tokenised as " " + text, so a span after "@@ " has the ids of the full text."""
    seen = []

    def enc(text):
        seen.append(text)
        return [ord(c) for c in text]

    ci = ConstraintIndex(small_kg(), enc, names=NAMES, end_id=0)
    ci.relation_index("Barack Obama")
    assert " ## was born in ##." in seen
    assert format_clue("Barack Obama", "was born in") == "Barack Obama@@ was born in"
    assert parse_clue("Barack Obama@@ was born in") == ("Barack Obama", "was born in")
    assert parse_clue("no separator") is None and parse_clue("@@ only relation") is None


def test_constraints_real_tokenizer_spans_decode_to_substrings():
    """With a byte-level BPE tokenizer every allowed walk decodes to a substring of a hyperrelation."""
    import random

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    kg = small_kg()
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        [kg.sentence(s) for s in range(kg.num_sentences)] + list(NAMES.values()),
        trainers.BpeTrainer(
            vocab_size=300, special_tokens=["<eos>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    ci = ConstraintIndex(kg, tok, names=NAMES, end_id=tok.token_to_id("<eos>"))
    rng = random.Random(0)
    for _ in range(200):
        ent = rng.choice(["Barack Obama", "Hank Snow"])
        prefix: list[int] = []
        while True:
            t = rng.choice(sorted(ci.relation_allowed_next(ent, prefix)))
            if t == ci.end_id:
                break
            prefix.append(t)
        text = tok.decode(prefix).strip()
        if text:
            assert ci.is_valid(ent, text), (ent, text)
    trie = ci.entity_trie()
    assert trie.values(tok.encode("Hank Snow", add_special_tokens=False).ids) == ["Hank Snow"]
