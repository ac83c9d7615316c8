"""Benchmark loaders for the normalised data under ``KGRAG_DATA_DIR`` (default ``../shared/data``).

Schema (see ``SOURCES.md`` in the data directory): ``<set>/questions.jsonl`` rows carry ``id``,
``question``, ``answers`` (list, first = gold, then aliases), ``supporting_titles``,
``supporting_passage_ids``, ``type``, ``hops`` plus per-dataset extras; ``<set>/corpus.jsonl`` rows
are ``{"id", "title", "text"}``. Every field a :class:`Question` has no slot for is kept in
``Question.metadata`` (e.g. ``candidate_passage_ids``, ``source``, ``qtype``, ``evidences``,
``question_decomposition``, ``answers_reachable_in_kb``, ``candidate_paths``).

:func:`load_corpus_jsonl` and :func:`load_questions_jsonl` also work on users' own files.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import data_dir as default_data_dir
from ..types import Passage

__all__ = [
    "Question",
    "Dataset",
    "DATASETS",
    "ALIASES",
    "load_dataset",
    "load_corpus_jsonl",
    "load_questions_jsonl",
]


@dataclass
class Question:
    """One benchmark question. ``metadata`` keeps every other field of the source row."""

    id: str
    question: str
    answers: list[str]
    supporting_passage_ids: list[str] = field(default_factory=list)
    supporting_titles: list[str] = field(default_factory=list)
    hops: int | None = None
    type: str = ""
    topic_entity: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class Dataset:
    """Questions plus the passage corpus to retrieve from (``None`` for KGQA sets).

    ``kb_path`` points at a KG file for KGQA sets (MetaQA ``kb.txt``: ``subject|relation|object``).
    """

    name: str
    questions: list[Question]
    corpus: list[Passage] | None
    kb_path: Path | None = None

    def corpus_hash(self) -> str | None:
        """Stable content hash of the corpus (sha256 hex, first 16 chars); ``None`` without a corpus.

        Same as :func:`kgrag_plugins.index.store.corpus_hash` (order-independent).
        """
        if self.corpus is None:
            return None
        from ..index.store import corpus_hash

        return corpus_hash(self.corpus)

    def passages_by_id(self) -> dict[str, Passage]:
        """``{passage.id: passage}`` (empty without a corpus)."""
        return {p.id: p for p in self.corpus or []}


# --------------------------------------------------------------------------- JSONL readers


def _missing(path: Path, what: str = "file") -> FileNotFoundError:
    return FileNotFoundError(
        f"benchmark {what} not found: {path}. Set KGRAG_DATA_DIR to the benchmark data directory "
        f"(the one containing SOURCES.md; default ../shared/data) or pass data_dir=..."
    )


def _iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, row)`` for each non-blank line; 1-based line numbers."""
    path = Path(path)
    if not path.is_file():
        raise _missing(path)
    with path.open("r", encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{lineno}: malformed JSON line: {e}") from None
            if not isinstance(row, dict):
                raise ValueError(f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}")
            yield lineno, row


def _str_list(value: Any, where: str, name: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (str, int, float)):
        return [str(value)]
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    raise ValueError(f"{where}: field {name!r} must be a string or a list, got {type(value).__name__}")


def _hops(value: Any, where: str) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValueError(f"{where}: field 'hops' must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-?hops?)?\s*", value, flags=re.IGNORECASE)
        if m:
            return int(m.group(1))
    raise ValueError(f"{where}: field 'hops' must be an integer, got {value!r}")


def load_corpus_jsonl(path: str | Path) -> list[Passage]:
    """Read ``{"id", "title", "text", ...}`` lines into :class:`Passage` objects.

    ``title`` defaults to ``""``; extra fields go to ``metadata`` (a ``metadata`` object is merged
    in). Raises ``ValueError`` naming file and line for malformed JSON, a missing ``id``/``text`` or
    a duplicate id, ``FileNotFoundError`` if the file is missing.
    """
    path = Path(path)
    passages: list[Passage] = []
    seen: dict[str, int] = {}
    for lineno, row in _iter_jsonl(path):
        where = f"{path}:{lineno}"
        if row.get("id") in (None, ""):
            raise ValueError(f"{where}: passage has no 'id'")
        pid = str(row["id"])
        text = row.get("text")
        if text is None:
            raise ValueError(f"{where}: passage {pid!r} has no 'text'")
        if not isinstance(text, str):
            raise ValueError(f"{where}: passage {pid!r}: 'text' must be a string")
        if pid in seen:
            raise ValueError(f"{where}: duplicate passage id {pid!r} (first on line {seen[pid]})")
        seen[pid] = lineno
        title = row.get("title") or ""
        metadata = {k: v for k, v in row.items() if k not in ("id", "title", "text", "metadata")}
        if isinstance(row.get("metadata"), dict):
            metadata.update(row["metadata"])
        passages.append(Passage(id=pid, text=text, title=str(title), metadata=metadata))
    return passages


_QUESTION_FIELDS = (
    "id",
    "question",
    "answers",
    "supporting_passage_ids",
    "supporting_titles",
    "hops",
    "type",
    "topic_entity",
)


def load_questions_jsonl(path: str | Path) -> list[Question]:
    """Read question lines into :class:`Question` objects.

    Required: ``id``, ``question``, ``answers`` (a list, or one string which becomes a 1-element
    list; an ``answer`` field is accepted when ``answers`` is absent). ``hops`` is normalised to
    ``int`` (``"2"`` / ``"2hop"`` accepted). Unknown fields go to ``metadata``. Raises ``ValueError``
    naming file and line for malformed rows or duplicate ids.
    """
    path = Path(path)
    questions: list[Question] = []
    seen: dict[str, int] = {}
    for lineno, row in _iter_jsonl(path):
        where = f"{path}:{lineno}"
        if row.get("id") in (None, ""):
            raise ValueError(f"{where}: question has no 'id'")
        qid = str(row["id"])
        if not isinstance(row.get("question"), str):
            raise ValueError(f"{where}: question {qid!r} has no 'question' string")
        if qid in seen:
            raise ValueError(f"{where}: duplicate question id {qid!r} (first on line {seen[qid]})")
        seen[qid] = lineno
        extra = {k: v for k, v in row.items() if k not in _QUESTION_FIELDS}
        if "answers" in row:
            answers = _str_list(row["answers"], where, "answers")
        elif "answer" in row:
            answers = _str_list(extra.pop("answer"), where, "answer")
        else:
            raise ValueError(f"{where}: question {qid!r} has no 'answers'")
        topic = row.get("topic_entity")
        questions.append(
            Question(
                id=qid,
                question=row["question"],
                answers=answers,
                supporting_passage_ids=_str_list(row.get("supporting_passage_ids"), where, "supporting_passage_ids"),
                supporting_titles=_str_list(row.get("supporting_titles"), where, "supporting_titles"),
                hops=_hops(row.get("hops"), where),
                type=str(row.get("type") or ""),
                topic_entity=str(topic) if topic is not None else None,
                metadata=extra,
            )
        )
    return questions


# --------------------------------------------------------------------------- named datasets


def _dir(root: Path, sub: str) -> Path:
    d = root / sub
    if not d.is_dir():
        raise _missing(d, "directory")
    return d


def _simple(sub: str) -> Callable[[Path, str], Dataset]:
    def load(root: Path, name: str) -> Dataset:
        d = _dir(root, sub)
        return Dataset(name, load_questions_jsonl(d / "questions.jsonl"), load_corpus_jsonl(d / "corpus.jsonl"))

    return load


def _questions_only(sub: str) -> Callable[[Path, str], Dataset]:
    def load(root: Path, name: str) -> Dataset:
        d = _dir(root, sub)
        return Dataset(name, load_questions_jsonl(d / "questions.jsonl"), None)

    return load


def _metaqa(hops: tuple[int, ...]) -> Callable[[Path, str], Dataset]:
    def load(root: Path, name: str) -> Dataset:
        d = _dir(root, "metaqa")
        kb = d / "kb.txt"
        if not kb.is_file():
            raise _missing(kb)
        questions: list[Question] = []
        for h in hops:
            questions += load_questions_jsonl(d / f"questions_{h}hop.jsonl")
        return Dataset(name, questions, None, kb_path=kb)

    return load


#: Source prefix of the 100 HippoRAG MuSiQue sample questions in ``musique/questions.jsonl``.
HIPPORAG_SOURCE_PREFIX = "OSU-NLP-Group/HippoRAG"


def _musique_hipporag(root: Path, name: str) -> Dataset:
    d = _dir(root, "musique")
    questions = [
        q
        for q in load_questions_jsonl(d / "questions.jsonl")
        if str(q.metadata.get("source", "")).startswith(HIPPORAG_SOURCE_PREFIX)
    ]
    openie = d / "openie_hipporag_gpt35_1890.jsonl"
    keep = {str(row["passage_id"]) for _, row in _iter_jsonl(openie) if "passage_id" in row}
    corpus = [p for p in load_corpus_jsonl(d / "corpus.jsonl") if p.id in keep]
    missing = keep - {p.id for p in corpus}
    if missing:
        raise ValueError(
            f"{openie}: {len(missing)} passage_id(s) not in {d / 'corpus.jsonl'} "
            f"(e.g. {sorted(missing)[:3]}); the data directory is inconsistent"
        )
    return Dataset(name, questions, corpus)


def _twowiki_dev1000(root: Path, name: str) -> Dataset:
    d = _dir(root, "2wikimultihopqa")
    corpus = load_corpus_jsonl(d / "hipporag_dev1000_corpus" / "corpus.jsonl")
    ids = {p.id for p in corpus}
    questions = [
        q
        for q in load_questions_jsonl(d / "questions.jsonl")
        if q.supporting_passage_ids and all(pid in ids for pid in q.supporting_passage_ids)
    ]
    return Dataset(name, questions, corpus)


def _sample(root: Path, name: str) -> Dataset:
    """The bundled demo sample (``kgrag_plugins/data``): needs no data directory."""
    from importlib import resources

    data = resources.files("kgrag_plugins") / "data"
    with (
        resources.as_file(data / "sample_corpus.jsonl") as corpus,
        resources.as_file(data / "sample_questions.jsonl") as questions,
    ):
        return Dataset(name, load_questions_jsonl(questions), load_corpus_jsonl(corpus))


_LOADERS: dict[str, Callable[[Path, str], Dataset]] = {
    "sample": _sample,
    "musique": _simple("musique"),
    "hotpotqa": _simple("hotpotqa"),
    "2wikimultihopqa": _simple("2wikimultihopqa"),
    "popqa": _simple("popqa"),
    "metaqa": _metaqa((1, 2, 3)),
    "metaqa-1hop": _metaqa((1,)),
    "metaqa-2hop": _metaqa((2,)),
    "metaqa-3hop": _metaqa((3,)),
    "webqsp": _questions_only("webqsp"),
    "musique-hipporag": _musique_hipporag,
    "2wikimultihopqa-dev1000": _twowiki_dev1000,
}

#: Names accepted by :func:`load_dataset` (aliases in :data:`ALIASES`).
DATASETS: tuple[str, ...] = tuple(_LOADERS)

#: Short names mapped to their canonical dataset name.
ALIASES: dict[str, str] = {"2wiki": "2wikimultihopqa", "hotpot": "hotpotqa"}


def load_dataset(name: str, data_dir: str | Path | None = None, limit: int | None = None) -> Dataset:
    """Load a named benchmark from ``data_dir`` (default :func:`kgrag_plugins.config.data_dir`).

    * ``sample``: the bundled multi-hop demo sample (what ``kgrag demo`` runs); no data directory needed.
    * ``musique``, ``hotpotqa``, ``2wikimultihopqa`` (alias ``2wiki``), ``popqa``: questions + the
      split's ``corpus.jsonl``.
    * ``metaqa`` (1-3 hops pooled), ``metaqa-1hop`` / ``-2hop`` / ``-3hop``: KGQA, ``corpus=None``,
      ``kb_path=metaqa/kb.txt``.
    * ``webqsp``: questions only (``candidate_paths`` in metadata), ``corpus=None``.
    * ``musique-hipporag``: the 100 HippoRAG MuSiQue sample questions with the 1,890 passages that
      HippoRAG's GPT-3.5 OpenIE file covers.
    * ``2wikimultihopqa-dev1000``: 2Wiki questions whose gold passages all lie in the HippoRAG
      dev-1000 corpus (6,119 passages), with that corpus.

    ``limit`` keeps the first N questions; the corpus is always whole.
    """
    key = ALIASES.get(name.strip().lower(), name.strip().lower())
    if key not in _LOADERS:
        valid = ", ".join(list(DATASETS) + [f"{a} (= {t})" for a, t in ALIASES.items()])
        raise ValueError(f"unknown dataset {name!r}; valid names: {valid}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be a non-negative integer or None, got {limit!r}")
    root = Path(data_dir).expanduser() if data_dir is not None else default_data_dir()
    if key != "sample" and not root.is_dir():
        raise _missing(root, "data directory")
    ds = _LOADERS[key](root, key)
    if limit is not None:
        ds.questions = ds.questions[:limit]
    return ds
