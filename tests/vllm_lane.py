"""Session fixtures of the vLLM lane (tests/vllm, `make test-vllm`), registered by tests/conftest.py
(a second conftest.py would shadow the root one's `from conftest import ...`).

One `vllm serve` for the whole vLLM lane (issue 18): a random tiny Llama (head_dim 64: the CPU
attention kernel rejects smaller heads) with a tokenizer trained here, served from .venv-vllm with
the translator's logits processor and a LoRA adapter, so `make test-vllm` starts a single server.

The ParseKG index is a real KnowledgeIndex (spaCy parse, builder="parsekg") of a small hand corpus."""

from __future__ import annotations

from pathlib import Path

import pytest
from small_corpus import SMALL

from kgrag_plugins.types import Passage

CORPUS = [
    *SMALL,
    Passage(
        "curie",
        "Marie Curie was a physicist and chemist. Curie won the Nobel Prize in Physics in 1903. "
        "She was born in Warsaw.",
        "Marie Curie",
    ),
    Passage(
        "lovelace",
        "Ada Lovelace worked with Charles Babbage on the Analytical Engine. Lovelace was born in London.",
        "Ada Lovelace",
    ),
    Passage(
        "turing",
        "Alan Turing studied mathematics at Cambridge. Turing was born in London in 1912.",
        "Alan Turing",
    ),
    Passage(
        "tesla",
        "Nikola Tesla was born in Smiljan. Tesla moved to New York in 1884 and worked for Thomas Edison.",
        "Nikola Tesla",
    ),
    Passage(
        "kahlo",
        "Frida Kahlo painted self-portraits in Mexico City. Kahlo married Diego Rivera in 1929.",
        "Frida Kahlo",
    ),
]

_TEXTS = [
    "Paris is the capital of France. Berlin is the capital of Germany.",
    "The knowledge graph links entities with relations such as capital_of and born_in.",
] * 20

QUESTION_TEMPLATES = [
    "Where was {} born?",
    "Who did {} work with?",
    "What did {} win?",
    "When did {} move?",
    "Whom did {} marry?",
]


@pytest.fixture(scope="session")
def question_templates() -> list[str]:
    return list(QUESTION_TEMPLATES)


@pytest.fixture(scope="session")
def vllm_report_dir(tmp_path_factory) -> Path:
    """Where the lane's tests write their JSON reports: pytest's temp dir, never the checkout
    (docs/benchmarks holds reports of benchmark commands, not of test runs)."""
    return tmp_path_factory.mktemp("vllm-reports")


def served_vllm_version(server) -> str:
    """The vLLM version the running server reports (``GET /version``), not a typed-in string."""
    import httpx

    root = server.base_url.removesuffix("/v1")
    resp = httpx.get(f"{root}/version", timeout=10)
    resp.raise_for_status()
    version = resp.json()["version"]
    assert isinstance(version, str) and version, resp.text
    return version


def server_settings(server) -> dict:
    """The settings the server was started with, read from the VLLMServer object."""
    return {
        "enforce_eager": server.enforce_eager or "--enforce-eager" in server.extra_args,
        "dtype": server.dtype,
        "max_model_len": server.max_model_len,
        "logits_processors": list(server.logits_processors),
        "lora_modules": sorted(server.lora_modules),
    }


def model_shape(path) -> dict:
    """The served model's shape, read from its saved ``config.json``."""
    import json

    cfg = json.loads((Path(path) / "config.json").read_text())
    keys = ("model_type", "num_hidden_layers", "hidden_size", "num_attention_heads", "head_dim", "vocab_size")
    return {k: cfg.get(k) for k in keys}


@pytest.fixture(scope="session")
def kg_index(tmp_path_factory):
    from kgrag_plugins.index.store import KnowledgeIndex

    return KnowledgeIndex.build(CORPUS, tmp_path_factory.mktemp("vllm-kg") / "idx", builder="parsekg", progress=False)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory, kg_index):
    """``(path, tokenizer)`` of the random tiny Llama, saved for vLLM."""
    from tiny_llm import tiny_llama

    from kgrag_plugins.methods.translator.decoding import clue_prompt

    kg = kg_index.parsekg
    names = [kg_index.graph.name_of(e) for e in kg.head_entities()]
    texts = _TEXTS + [p.text for p in CORPUS] + names
    texts += [clue_prompt(t.format(n)) for t in QUESTION_TEMPLATES for n in names]
    path = tmp_path_factory.mktemp("tiny-llama")
    model, tok = tiny_llama(texts, vocab_size=512, hidden_size=128, num_heads=2, max_positions=512)
    tok.chat_template = (
        "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}"
    )
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path, tok


@pytest.fixture(scope="session")
def lora_adapter(tmp_path_factory, tiny_model):
    """A LoRA adapter of the tiny model from the SFT recipe (2 steps on a few clue examples); peft
    directly when the recipe has no ``lora=`` option."""
    import inspect

    path, _tok = tiny_model
    out = tmp_path_factory.mktemp("lora")
    from kgrag_plugins.train import translator as recipe

    if "lora" in inspect.signature(recipe.train_translator).parameters:
        examples = recipe_examples(recipe)
        recipe.train_translator(
            examples,
            str(path),
            out,
            lora=True,
            lora_r=8,
            max_steps=2,
            batch_size=2,
            per_device_batch_size=2,
            max_length=512,
            use_cpu=True,
            progress=False,
        )
        adapter = next((p.parent for p in sorted(out.rglob("adapter_config.json"))), None)
        assert adapter is not None, "train_translator(lora=True) saved no adapter_config.json"
        return adapter, "sft-recipe"
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    peft = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"]))
    peft.save_pretrained(out)
    return out, "peft"


def recipe_examples(recipe):
    """A few SFT examples (prompt ❶ -> ``ENTITY@@ RELATION``) in the recipe's own type."""
    from kgrag_plugins.methods.translator.constraints import format_clue
    from kgrag_plugins.methods.translator.decoding import clue_prompt

    rows = [
        ("Where was Hank Snow born?", "Hank Snow", "was born in", "Liverpool"),
        ("Where was Barack Obama born?", "Barack Obama", "was born in", "Honolulu"),
        ("What did Marie Curie win?", "Marie Curie", "won the Nobel Prize", "Nobel Prize"),
        ("Where was Alan Turing born?", "Alan Turing", "was born in", "London"),
    ]
    return [
        recipe.SFTExample(
            prompt=clue_prompt(q),
            completion=format_clue(h, r),
            question=q,
            head=h,
            relation=r,
            tail=t,
            window=r,
            passage_id="test",
        )
        for q, h, r, t in rows
    ]


@pytest.fixture(scope="session")
def vllm_server(tiny_model, lora_adapter):
    """The one server: translator logits processor + the LoRA adapter as model "tiny-lora"."""
    from kgrag_plugins.models.vllm import VLLMServer, find_vllm
    from kgrag_plugins.models.vllm_logits import FQCN

    if find_vllm() is None:
        pytest.fail("no vllm executable: run `make .venv-vllm`")
    path, _tok = tiny_model
    adapter, _how = lora_adapter
    srv = VLLMServer(
        str(path),
        served_model_name="tiny",
        max_model_len=512,
        dtype="bfloat16",
        lora_modules={"tiny-lora": str(adapter)},
        logits_processors=[FQCN],
        extra_args=["--enforce-eager"],
        log_file=Path(path) / "vllm.log",
        startup_timeout=600,
    )
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()
