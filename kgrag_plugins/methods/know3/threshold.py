"""The answer threshold θ_t of Know³-RAG's adaptive retrieval (paper §4.2; docs/methods.md §5(b), §8.1).

An answer with verifier score ``s_t`` (lower = more consistent with the KG) is output at turn
``t`` when ``s_t < θ_t`` or ``t = T``. The paper's formula survives only as extracted text,
"θ_t = θ_0 · c / (1 + e^{1 − θ_0 t})", and no threshold code was released (docs/methods.md
§8.1). Two schedules are offered:

- ``"logistic-ramp-as-extracted"``: exactly that expression. With the paper's c = 128 it is
  *large*: θ_0 = 2 gives θ_0 = 68.8, θ_1 = 187.2, θ_2 = 243.9 (each ≥ 34·θ_0); θ_0 = 0.01 gives
  0.344, 0.347, 0.349. Against a calibrated θ_0 (a score of known-true triples) the ramp accepts
  practically every answer at turn 0, so it is not our default.
- ``"constant"`` (default): θ_t = θ_0 for every t (the forced output at T still bounds the loop).

θ_0: the paper's per-model/dataset values (App. Table 6, :data:`PAPER_THETA0`, usable with
:meth:`ThresholdSchedule.paper`) belong to the paper's Wikidata5M ComplEx scores and do not
transfer to another KGE's scale; our default is **calibrated**: θ_0 = the ``percentile`` (90)
of the verifier's scores over known-true triples of the index's KG
(:meth:`~kgrag_plugins.methods.know3.scoring.TripleVerifier.calibrate`), i.e. "an answer is
accepted when its triples look at least as consistent as 90 % of the KG's own facts".
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["DEFAULT_C", "DEFAULT_PERCENTILE", "MAX_TURNS", "PAPER_THETA0", "SCHEDULES", "ThresholdSchedule"]

#: Schedule names.
SCHEDULES = ("constant", "logistic-ramp-as-extracted")
#: The paper's constant c (§5.3) and maximum turn T.
DEFAULT_C = 128.0
MAX_TURNS = 2
#: Percentile of known-true triple scores used as the calibrated θ_0.
DEFAULT_PERCENTILE = 90.0

#: App. Table 6: θ_0 per (dataset, QA model).
PAPER_THETA0: dict[tuple[str, str], float] = {
    ("hotpotqa", "glm4-9b"): 10.0,
    ("hotpotqa", "qwen2.5-32b"): 1.0,
    ("hotpotqa", "gpt-4o-mini"): 13.0,
    ("2wikimultihopqa", "glm4-9b"): 2.0,
    ("2wikimultihopqa", "qwen2.5-32b"): 0.2,
    ("2wikimultihopqa", "gpt-4o-mini"): 2.0,
    ("popqa", "glm4-9b"): 0.1,
    ("popqa", "qwen2.5-32b"): 0.02,
    ("popqa", "gpt-4o-mini"): 0.01,
}
_DATASET_ALIASES = {"2wiki": "2wikimultihopqa", "hotpot": "hotpotqa"}


@dataclass(frozen=True)
class ThresholdSchedule:
    """θ_t for t = 0 … ``max_turns``; ``source`` says where θ_0 came from (for the trace)."""

    theta0: float
    kind: str = "constant"
    c: float = DEFAULT_C
    max_turns: int = MAX_TURNS
    source: str = "given"

    def __post_init__(self) -> None:
        if self.kind not in SCHEDULES:
            raise ValueError(f"unknown threshold schedule {self.kind!r}; choose one of {SCHEDULES}")
        if not math.isfinite(self.theta0):
            raise ValueError(f"theta0 must be a finite number, got {self.theta0!r}")
        if isinstance(self.max_turns, bool) or not isinstance(self.max_turns, int) or self.max_turns < 0:
            raise ValueError(f"max_turns must be an int >= 0, got {self.max_turns!r}")

    def theta(self, t: int) -> float:
        """θ_t (``constant``: θ_0; ``logistic-ramp-as-extracted``: θ_0 · c / (1 + e^{1 − θ_0 t}))."""
        if t < 0:
            raise ValueError(f"turn must be >= 0, got {t}")
        if self.kind == "constant":
            return float(self.theta0)
        x = 1.0 - self.theta0 * t
        if x > 700:  # exp overflow: the ramp is ~0 there
            return 0.0
        return float(self.theta0 * self.c / (1.0 + math.exp(x)))

    def accept(self, score: float | None, t: int) -> bool:
        """Output the answer at turn ``t``? ``t >= max_turns`` always; a ``None`` score (nothing
        verifiable) never before T."""
        if t >= self.max_turns:
            return True
        return score is not None and score < self.theta(t)

    def values(self) -> list[float]:
        """θ_0 … θ_T."""
        return [round(self.theta(t), 6) for t in range(self.max_turns + 1)]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "thetas": self.values()}

    @classmethod
    def paper(
        cls, dataset: str, model: str, *, kind: str = "logistic-ramp-as-extracted", **kw: Any
    ) -> "ThresholdSchedule":
        """θ_0 from App. Table 6 (``dataset``: hotpotqa, 2wikimultihopqa, popqa; ``model``:
        glm4-9b, qwen2.5-32b, gpt-4o-mini), with the as-extracted ramp unless ``kind`` says otherwise."""
        key = (_DATASET_ALIASES.get(dataset.lower(), dataset.lower()), model.lower())
        if key not in PAPER_THETA0:
            raise ValueError(f"no θ_0 in App. Table 6 for {key}; known: {sorted(PAPER_THETA0)}")
        return cls(PAPER_THETA0[key], kind=kind, source=f"paper:{key[0]}/{key[1]}", **kw)

    @classmethod
    def calibrated(
        cls, verifier: Any, *, percentile: float = DEFAULT_PERCENTILE, kind: str = "constant", **kw: Any
    ) -> "ThresholdSchedule":
        """θ_0 = ``verifier.calibrate(percentile)`` (scores of true KG triples, held out from the
        KGE's training when it kept them). A percentile at the score's floor (the same-type rank
        is 0 for the best triple) is raised to the next float above it, so that an answer whose
        triples score the best possible value passes ``s < θ_0``; at the floor itself none could."""
        theta0 = float(verifier.calibrate(percentile=percentile))
        if theta0 <= 0.0 and getattr(verifier, "method", None) == "type_rank":
            theta0 = math.nextafter(0.0, 1.0)
        src = getattr(verifier, "calibration_source", None)
        return cls(theta0, kind=kind, source=f"calibrated:p{percentile:g}" + (f":{src}" if src else ""), **kw)
