"""Every structured step with the real SmolLM2-135M-Instruct in-process: with constraints on, each
structured reply is constrained and valid (a missing model fails with the command to run)."""

from __future__ import annotations

import pytest

from kgrag_plugins.eval.structured_steps import STEPS, RecordingLLM, run_step, samples

N_SAMPLES = 2


@pytest.fixture(scope="module")
def llm() -> RecordingLLM:
    from kgrag_plugins.models.local_models import resolve_model

    try:
        resolve_model("smollm2")  # converts on first use (~30 s)
    except FileNotFoundError as exc:
        pytest.fail(f"SmolLM2 is not installed: {exc} (run `kgrag models prepare smollm2`)")
    from kgrag_plugins.models.local_llm import TransformersLLM

    return RecordingLLM(TransformersLLM("smollm2", deadline=120))


@pytest.fixture(scope="module")
def step_samples(sample_mentions_index):
    from kgrag_plugins.datasets.loaders import load_dataset

    return samples(load_dataset("sample"), sample_mentions_index, N_SAMPLES)


#: the default run covers each kind of constraint (chat JSON, choice, regex, Self-Ask's format); the
#: other steps (the same constraint kinds, longer replies) run in ``make test-slow``
HEAVY = {"reasoning", "decompose", "translator.decompose", "triple_selection", "write_note", "augment"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in HEAVY else n for n in STEPS])
def test_structured_step_replies_are_constrained_and_valid(name: str, llm: RecordingLLM, step_samples) -> None:
    for sample in step_samples:
        replies = run_step(name, llm, sample)
        if name == "triple_selection" and not replies:
            continue  # no candidate triple for this question: no LLM call
        assert replies, f"{name}: no structured reply recorded"
        assert all(constrained for _, _, constrained in replies), replies
        assert all(valid for _, valid, _ in replies), f"{name}: invalid constrained reply {replies}"
