"""Constrained decoding backends (docs/methods.md §3(a) steps 3-4, §7): a tiny random-weight Llama with
a tokenizer trained here on the test corpus; with constraints every clue is valid, without them
the same model produces invalid strings. The projection backend with a ScriptedLLM."""

from __future__ import annotations

import json
import random
import time

import pytest
from tiny_llm import tiny_llama

from kgrag_plugins.index.parsekg import ParseKG
from kgrag_plugins.methods.translator.constraints import ConstraintIndex
from kgrag_plugins.methods.translator.decoding import (
    HFConstrainedBackend,
    ProjectionBackend,
    TranslationBackend,
    allowed_tokens_fn,
    clue_prompt,
)
from kgrag_plugins.models.llm import ScriptedLLM

HEADS = [
    "Barack Obama",
    "Hank Snow",
    "Johnny Cash",
    "Marie Curie",
    "Ada Lovelace",
    "Alan Turing",
    "Nikola Tesla",
    "Grace Hopper",
    "Elvis Presley",
    "Frida Kahlo",
    "Pablo Picasso",
    "Jane Austen",
]
TAILS = [
    "Honolulu",
    "Liverpool",
    "Kingsland",
    "Warsaw",
    "London",
    "Paris",
    "Smiljan",
    "Mexico City",
    "1914",
    "Nobel Prize",
]
TEMPLATES = [
    "## was born in ##.",
    "## recorded more than ## albums.",
    "## moved to ## in ##.",
    "## won the ## for physics.",
    "## served as president of ##.",
    "## worked with ## on the analytical engine.",
    "## painted a portrait in ##.",
]
QUESTIONS = [
    "Where was {} born?",
    "What did {} win?",
    "Who worked with {}?",
    "When did {} move to a new city?",
    "How many albums did {} record?",
    "What is {} known for?",
]


def build_parsekg(seed: int = 0) -> ParseKG:
    rng = random.Random(seed)
    kg = ParseKG()
    for i, head in enumerate(HEADS):
        for t in rng.sample(TEMPLATES, 3):
            tail = rng.choice(TAILS)
            text = t.replace("##", head, 1).replace("##", tail)
            kg.add_sentence(f"p{i}", text, t, [head], [tail])
    # the tails also appear as heads of nothing: reverse direction only
    return kg


@pytest.fixture(scope="session")
def tiny_lm():
    """A byte-level BPE tokenizer trained on the corpus and a 2-layer random Llama (seconds on CPU)."""
    kg = build_parsekg()
    texts = [kg.sentence(s) for s in range(kg.num_sentences)] + HEADS + TAILS
    texts += [clue_prompt(q.format(h)) for q in QUESTIONS for h in HEADS]
    model, hf_tok = tiny_llama(texts, vocab_size=400, hidden_size=64, num_heads=1, head_dim=64, max_positions=1024)
    return model.eval(), hf_tok, kg


def random_questions(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [rng.choice(QUESTIONS).format(rng.choice(HEADS + TAILS)) for _ in range(n)]


def _decode_all(backend, questions, alpha=3, beta=2):
    ents = backend.entities_batch(questions, alpha)
    items = [(q, e) for q, es in zip(questions, ents) for e in es]
    rels = backend.relations_batch(items, beta)
    return ents, items, rels


def test_decoding_constrained_every_clue_is_valid(tiny_lm):
    model, tok, kg = tiny_lm
    ci = ConstraintIndex(kg, tok)
    backend = HFConstrainedBackend(model, tok, ci)
    assert isinstance(backend, TranslationBackend)
    questions = random_questions(20, seed=1)
    ents, items, rels = _decode_all(backend, questions)
    assert all(es for es in ents), "every question gets at least one entity"
    assert all(e in HEADS for es in ents for e in es)
    assert sum(len(es) for es in ents) >= 2 * len(questions)  # alpha=3 beams give distinct names
    assert all(r for r in rels)
    for (_q, e), rs in zip(items, rels):
        for r in rs:
            assert ci.is_valid(e, r), (e, r)


def test_decoding_unconstrained_same_model_is_invalid(tiny_lm):
    model, tok, kg = tiny_lm
    ci = ConstraintIndex(kg, tok)
    backend = HFConstrainedBackend(model, tok, ci, constrained=False, max_entity_tokens=8)
    questions = random_questions(10, seed=2)
    ents, items, rels = _decode_all(backend, questions, alpha=2, beta=1)
    names = [e for es in ents for e in es]
    bad_e = [e for e in names if e not in HEADS]
    assert bad_e, f"an untrained model should not hit entity names by chance: {names}"
    # the relation stage is fed real entity names so only the span constraint is tested
    items = [(q, HEADS[i % len(HEADS)]) for i, q in enumerate(questions)]
    rels = backend.relations_batch(items, 1)
    bad_r = [r for (_q, e), rs in zip(items, rels) for r in rs if not ci.is_valid(e, r)]
    assert bad_r


def test_decoding_constrained_120_questions(tiny_lm):
    model, tok, kg = tiny_lm
    ci = ConstraintIndex(kg, tok)
    backend = HFConstrainedBackend(model, tok, ci)
    questions = random_questions(120, seed=3)
    t0 = time.perf_counter()
    ents, items, rels = _decode_all(backend, questions)
    assert all(e in HEADS for es in ents for e in es) and all(es for es in ents)
    assert all(ci.is_valid(e, r) for (_q, e), rs in zip(items, rels) for r in rs)
    assert len(items) >= len(questions)
    print(json.dumps({"questions": len(questions), "clues": sum(map(len, rels)), "s": time.perf_counter() - t0}))
    # reverse direction: entities that are tails, spans of their in-hyperrelations
    rev = backend.entities_batch(questions[:5], 2, direction="reverse")
    assert all(e in TAILS for es in rev for e in es) and all(rev)
    for q, es in zip(questions[:5], rev):
        for e in es:
            assert all(ci.is_valid(e, r, "reverse") for r in backend.relations(q, e, 2, direction="reverse"))


def test_decoding_hook_and_unknown_entity(tiny_lm):
    model, tok, kg = tiny_lm
    ci = ConstraintIndex(kg, tok)
    step = allowed_tokens_fn(ci, "relation", entity="Hank Snow")
    assert step([]) and tok.eos_token_id not in step([])  # an empty span cannot end
    assert step([tok.eos_token_id]) == [tok.eos_token_id]
    backend = HFConstrainedBackend(model, tok, ci)
    assert backend.relations("Where?", "Nobody Known", 3) == []
    with pytest.raises(ValueError, match="stage"):
        allowed_tokens_fn(ci, "tail")


# --------------------------------------------------------------------------- projection backend

NAMES = {h: h for h in HEADS + TAILS}


def test_decoding_projection_maps_near_misses_and_drops_garbage():
    kg = build_parsekg()
    ci = ConstraintIndex(kg, lambda s: [], names=NAMES)
    obama, snow = ci.hyperrelations("Barack Obama")[0], ci.hyperrelations("Hank Snow")[0]
    near = snow.rstrip(".").replace("## ", "", 1).replace("e", "a", 1)  # e.g. "wos born in ##"
    reply = "\n".join(
        [
            f"1. barack obama@@{obama.upper()}",  # case + numbering: exact after normalisation
            f"Hank Snw@@{near}",  # fuzzy entity, fuzzy relation window
            "Zzyzx Qwerty@@flew to the moon",  # garbage entity: dropped
        ]
    )
    llm = ScriptedLLM(lambda msgs: reply)
    b = ProjectionBackend(llm, kg, names=NAMES)
    assert isinstance(b, TranslationBackend)
    ents = b.entities("Who was the president?", 3)
    assert ents[:2] == ["Barack Obama", "Hank Snow"] and "Zzyzx Qwerty" not in ents
    for e in ents:
        for r in b.relations("Who was the president?", e, 3):
            assert ci.is_valid(e, r), (e, r)
    assert b.relations("Who was the president?", "Barack Obama", 3) == [obama]
    (span,) = b.relations("Who was the president?", "Hank Snow", 3)
    assert span in snow and span != near and len(span.split()) >= len(near.split()) - 1
    assert len(llm.calls) == 1  # the reply is reused for the relation stage
    assert b.project_relation("Hank Snow", "completely unrelated words here") is None
    assert b.project_entity("") is None and b.project_entity("Marie Curi") == "Marie Curie"


def test_decoding_projection_garbage_reply_gives_nothing():
    kg = build_parsekg()
    llm = ScriptedLLM(["@@@ ### !!!", "nothing useful"])
    b = ProjectionBackend(llm, kg, names=NAMES)
    assert b.entities("Where was Hank Snow born?", 3) == []
    assert b.errors and b.errors[0]["step"] == "translator.clue_translation"


def test_decoding_projection_embedding_tier():
    class Emb:  # maps a synonym onto the entity name: only an embedding can bridge it
        def embed(self, texts):
            import numpy as np

            return np.array([[1.0, 0.0] if t in ("Lady Lovelace", "Ada Lovelace") else [0.0, 1.0] for t in texts])

    kg = build_parsekg()
    b = ProjectionBackend(ScriptedLLM([]), kg, names=NAMES, embedder=Emb(), fuzzy_cutoff=0.95)
    assert b.project_entity("Lady Lovelace") == "Ada Lovelace"


def test_decoding_projection_vllm_choice_sends_candidates():
    class VLLMish(ScriptedLLM):
        def __init__(self, replies):
            super().__init__(replies)
            self.extra_body: dict = {}
            self.bodies: list = []

        def complete(self, prompt, **kw):
            self.bodies.append(dict(self.extra_body))
            return super().complete(prompt, **kw)

    kg = build_parsekg()
    llm = VLLMish(["Hank Snow", "Jane Austen", "Hank Snow@@was born in"])
    b = ProjectionBackend(llm, kg, names=NAMES, vllm_choice=True)
    assert b.entities("Where was Hank Snow born?", 2) == ["Hank Snow", "Jane Austen"]
    first = llm.bodies[0]["structured_outputs"]["choice"]
    assert sorted(first) == sorted(HEADS)
    assert "Hank Snow" not in llm.bodies[1]["structured_outputs"]["choice"]  # chosen ones are removed
    assert llm.extra_body == {}  # the client itself is not mutated
