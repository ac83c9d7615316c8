"""KG-Translator constrained decoding through vLLM (issue 18 item 2; docs/methods.md §3(a) steps 3-4):
the kgrag V1 logits processor inside `vllm serve` makes 100 % of 100 questions' entities head
entities and every relation a substring of that entity's hyperrelations; the same random model
without it is mostly invalid; structured outputs are the fallback; a LoRA adapter is served.

Marker `vllm` (make test-vllm); the server is the session fixture of tests/vllm_lane.py."""

from __future__ import annotations

import json
import random
import time

import pytest
from vllm_lane import served_vllm_version

from kgrag_plugins.methods.translator.constraints import ConstraintIndex
from kgrag_plugins.methods.translator.vllm_backend import (
    VLLMConstrainedBackend,
    choose_backend,
    export_constraints,
    processor_loaded,
)
from kgrag_plugins.models.llm import LLMResponseError

pytestmark = pytest.mark.vllm

ALPHA, BETA = 2, 2
_RESULTS: dict[str, dict] = {}


_TEMPLATES: list[str] = []


@pytest.fixture(scope="module", autouse=True)
def _templates(question_templates):
    _TEMPLATES[:] = question_templates


@pytest.fixture(scope="module")
def constraints(kg_index, tiny_model):
    _path, tok = tiny_model
    ci = ConstraintIndex.from_index(kg_index, tok)
    return ci, export_constraints(ci)


def questions(ci: ConstraintIndex, n: int, seed: int = 0) -> list[str]:
    names = list(ci.names_by_entity("forward")) + ["Paris", "the capital of France"]
    rng = random.Random(seed)
    return [rng.choice(_TEMPLATES).format(rng.choice(names)) for _ in range(n)]


def client(server):
    return server.client(timeout=120, deadline=300)


@pytest.fixture(scope="module")
def write_results(vllm_server, vllm_report_dir):
    """Writes the figures measured so far to vllm-cpu-translator.json in pytest's temp dir."""
    version = served_vllm_version(vllm_server)

    def write():
        body = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "vllm_version": version}
        body |= {"alpha": ALPHA, "beta": BETA, **_RESULTS}
        (vllm_report_dir / "vllm-cpu-translator.json").write_text(json.dumps(body, indent=2) + "\n")

    return write


def _share(good: int, total: int) -> float | None:
    """``good / total`` from counted replies; None when nothing was counted (never a made-up 1.0)."""
    return round(good / total, 3) if total else None


def test_processor_detected_and_chosen(vllm_server, kg_index, tiny_model):
    _path, tok = tiny_model
    assert vllm_server.has_logits_processor("kgrag_plugins.models.vllm_logits:KGTranslatorLogitsProcessor")
    assert processor_loaded(client(vllm_server)), "the probe must see the forced tokens"
    backend = choose_backend(kg_index, vllm_server, tokenizer=tok)
    assert isinstance(backend, VLLMConstrainedBackend) and backend.mode == "processor"
    backend = choose_backend(kg_index, client(vllm_server), tokenizer=tok)
    assert isinstance(backend, VLLMConstrainedBackend) and backend.mode == "processor"


def test_bad_request_args_are_refused(vllm_server, constraints):
    _ci, path = constraints
    backend = VLLMConstrainedBackend(client(vllm_server), path)
    payload = {"kgrag_index": str(path), "kgrag_stage": "bogus"}
    from kgrag_plugins.methods.translator.vllm_backend import _post_completions

    with pytest.raises(LLMResponseError, match="400"):
        _post_completions(backend.llm, {"prompt": "x", "max_tokens": 2, "vllm_xargs": payload})
    with pytest.raises(LLMResponseError, match="400"):
        missing = {"kgrag_index": "/nonexistent.json", "kgrag_stage": "entity"}
        _post_completions(backend.llm, {"prompt": "x", "max_tokens": 2, "vllm_xargs": missing})


def _clues(backend, qs):
    t0 = time.perf_counter()
    ents = backend._map(backend.entity_candidates, [(q, ALPHA, "forward") for q in qs])
    t_ent = time.perf_counter() - t0
    items = [(q, e) for q, es in zip(qs, ents) for e in es]
    t0 = time.perf_counter()
    rels = backend._map(backend.relation_candidates, [(q, e, BETA, "forward") for q, e in items])
    return ents, items, rels, t_ent, time.perf_counter() - t0


def test_processor_makes_every_clue_valid_over_100_questions(vllm_server, constraints, write_results):
    ci, path = constraints
    heads = set(ci.names_by_entity("forward"))
    backend = VLLMConstrainedBackend(client(vllm_server), path, mode="processor")
    qs = questions(ci, 100)
    ents, items, rels, t_ent, t_rel = _clues(backend, qs)
    n_rel = sum(len(rs) for rs in rels)
    bad_ents = [e for es in ents for e in es if e not in heads]
    bad = [(e, r) for (_q, e), rs in zip(items, rels) for r in rs if not ci.is_valid(e, r)]
    _RESULTS["processor"] = {
        "questions": len(qs),
        "entities": len(items),
        "entities_valid_share": _share(len(items) - len(bad_ents), len(items)),
        "relations": n_rel,
        "relations_valid_share": _share(n_rel - len(bad), n_rel),
        "entity_seconds": round(t_ent, 2),
        "relation_seconds": round(t_rel, 2),
    }
    write_results()
    assert all(es for es in ents), "every question gets at least one entity"
    assert not bad_ents, bad_ents[:5]
    assert all(rs for rs in rels), "every entity has hyperrelations, so relations are decoded"
    assert not bad, bad[:5]


def test_without_processor_most_outputs_are_invalid(vllm_server, constraints, write_results):
    ci, path = constraints
    heads = set(ci.names_by_entity("forward"))
    backend = VLLMConstrainedBackend(client(vllm_server), path, mode="none")
    qs = questions(ci, 100)
    t0 = time.perf_counter()
    ents = backend._map(backend.entity_candidates, [(q, ALPHA, "forward") for q in qs])
    t_ent = time.perf_counter() - t0
    flat = [e for es in ents for e in es]
    n_valid_ent = sum(e in heads for e in flat)
    # relations for real entities, so only the relation constraint is missing
    names = sorted(heads)
    items = [(q, names[i % len(names)]) for i, q in enumerate(qs[:30])]
    rels = backend._map(backend.relation_candidates, [(q, e, BETA, "forward") for q, e in items])
    flat_rel = [(e, r) for (_q, e), rs in zip(items, rels) for r in rs]
    n_valid_rel = sum(ci.is_valid(e, r) for e, r in flat_rel)
    assert flat and flat_rel
    valid_ent, valid_rel = _share(n_valid_ent, len(flat)), _share(n_valid_rel, len(flat_rel))
    assert valid_ent <= 0.5 and valid_rel <= 0.5, (valid_ent, valid_rel)
    # the filtered protocol drops them
    assert all(e in heads for es in backend.entities_batch(qs[:5], ALPHA) for e in es)
    _RESULTS["no_processor"] = {
        "questions": len(qs),
        "entities": len(flat),
        "entities_valid_share": valid_ent,
        "relations": len(flat_rel),
        "relations_valid_share": valid_rel,
        "entity_seconds": round(t_ent, 2),
    }
    write_results()


def test_structured_outputs_fallback(vllm_server, kg_index, constraints, write_results):
    ci, _path = constraints
    heads = set(ci.names_by_entity("forward"))
    # a plain client of the server: the probe is not consulted when the server says "no processor"
    backend = choose_backend(kg_index, _NoProcessor(vllm_server))
    assert isinstance(backend, VLLMConstrainedBackend) and backend.mode == "structured"
    qs = questions(ci, 10, seed=3)
    t0 = time.perf_counter()
    ents, items, rels, _te, _tr = _clues(backend, qs)
    secs = time.perf_counter() - t0
    n_rel = sum(len(r) for r in rels)
    bad_ents = [e for es in ents for e in es if e not in heads]
    bad = [(e, r) for (_q, e), rs in zip(items, rels) for r in rs if not ci.is_valid(e, r)]
    _RESULTS["structured"] = {
        "questions": len(qs),
        "entities": len(items),
        "entities_valid_share": _share(len(items) - len(bad_ents), len(items)),
        "relations": n_rel,
        "relations_valid_share": _share(n_rel - len(bad), n_rel),
        "seconds": round(secs, 2),
    }
    write_results()
    assert all(es for es in ents) and not bad_ents, bad_ents[:5]
    assert any(rels)
    assert not bad, bad[:5]


class _NoProcessor:
    """The same server as seen by a caller that started it without --logits-processors."""

    def __init__(self, server):
        self._server = server
        self.model = server.model

    def has_logits_processor(self, fqcn: str) -> bool:
        return False

    def client(self):
        return client(self._server)


def test_lora_adapter_served_and_requested_by_name(vllm_server, lora_adapter, constraints, write_results):
    import httpx

    _adapter, how = lora_adapter
    ids = [m["id"] for m in httpx.get(f"{vllm_server.base_url}/models", timeout=10).json()["data"]]
    assert "tiny-lora" in ids and "tiny" in ids
    lora = vllm_server.client(model="tiny-lora", default_max_tokens=8, timeout=120, deadline=300)
    reply = lora.complete("Where was Hank Snow born?")
    assert isinstance(reply, str) and lora.usage["completion_tokens"] >= 1
    with pytest.raises(LLMResponseError, match="404|400"):
        vllm_server.client(model="no-such-adapter", default_max_tokens=4).complete("x")
    # the adapter and the logits processor together
    ci, path = constraints
    backend = VLLMConstrainedBackend(client(vllm_server), path, lora="tiny-lora")
    heads = set(ci.names_by_entity("forward"))
    ents = backend.entities_batch(questions(ci, 5, seed=7), ALPHA)
    assert all(es for es in ents) and all(e in heads for es in ents for e in es)
    _RESULTS["lora"] = {"adapter_from": how}
    write_results()
