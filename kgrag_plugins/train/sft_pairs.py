"""KG-Translator's SFT pairs (App. F.1) as records: :class:`SFTExample`, written and read as JSONL
(``OUT/sft_data.jsonl``; ``kgrag train translator --sft-data FILE`` trains on such a file)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Sequence

__all__ = ["SFTExample", "load_sft_data", "save_sft_data"]


@dataclass(frozen=True)
class SFTExample:
    """One training pair: ``prompt`` (prompt ❶) -> ``completion`` (``ENTITY@@ RELATION``)."""

    prompt: str
    completion: str
    question: str
    head: str
    relation: str
    tail: str
    window: str
    passage_id: str
    source: str = ""

    def to_record(self) -> dict[str, str]:
        return asdict(self)


def save_sft_data(examples: Sequence[SFTExample], path: str | Path) -> Path:
    """Write the pairs as JSONL (``prompt``, ``completion`` and the provenance fields)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for ex in examples:
            f.write(json.dumps(ex.to_record(), ensure_ascii=False) + "\n")
    return path


def load_sft_data(path: str | Path) -> list[SFTExample]:
    """The :class:`SFTExample` pairs of a JSONL written by
    :func:`save_sft_data` (a run's ``OUT/sft_data.jsonl``), so a machine without the
    benchmark data (a GPU box) trains on pairs built elsewhere. A line that is not a JSON object
    with ``prompt`` and ``completion`` is a ``ValueError`` naming the line."""
    names = {f.name for f in fields(SFTExample)}
    out: list[SFTExample] = []
    with Path(path).open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{n}: not JSON ({e.msg})") from None
            if not isinstance(rec, dict) or not all(
                isinstance(rec.get(k), str) and rec[k] for k in ("prompt", "completion")
            ):
                raise ValueError(f"{path}:{n}: an SFT pair needs non-empty string 'prompt' and 'completion'")
            kept = {k: str(v) for k, v in rec.items() if k in names}
            out.append(SFTExample(**{k: kept.get(k, "") for k in names}))
    if not out:
        raise ValueError(f"{path}: no SFT pairs")
    return out
