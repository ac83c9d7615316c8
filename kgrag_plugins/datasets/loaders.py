"""Benchmark loaders for the normalised data under ``KGRAG_DATA_DIR`` (default ``~/.cache/kgrag/data``).

Schema (see ``SOURCES.md`` in the data directory): ``<set>/questions.jsonl`` rows carry ``id``,
``question``, ``answers`` (list, first = gold, then aliases), ``supporting_titles``,
``supporting_passage_ids``, ``type``, ``hops`` plus per-dataset extras; ``<set>/corpus.jsonl`` rows
are ``{"id", "title", "text"}``. Every field a :class:`Question` has no slot for is kept in
``Question.metadata`` (e.g. ``candidate_passage_ids``, ``source``, ``qtype``, ``evidences``,
``question_decomposition``, ``answers_reachable_in_kb``, ``candidate_paths``).

:func:`load_corpus_jsonl` and :func:`load_questions_jsonl` also work on users' own files. Files are
UTF-8 (a leading byte-order mark is accepted); blank lines are ignored. Every problem with a line
raises :class:`CorpusFormatError` (a ``ValueError``) with a one-line ``"FILE:LINE: reason"`` message:
bytes that are not UTF-8, invalid JSON, a row that is not an object, a missing or mistyped field,
a duplicate id.
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
    "CorpusFormatError",
    "Question",
    "Dataset",
    "DATASETS",
    "ALIASES",
    "load_dataset",
    "load_corpus_jsonl",
    "load_questions_jsonl",
    "bundled_file",
    "sample_corpus",
    "sample_questions",
]


class CorpusFormatError(ValueError):
    """A malformed corpus or question file: ``"FILE:LINE: reason"``; ``path`` and ``line`` attributes."""

    def __init__(self, message: str, *, path: str | Path | None = None, line: int | None = None):
        super().__init__(message)
        self.path = str(path) if path is not None else None
        self.line = line


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
    from ..config import data_dir_hint

    path = Path(path)
    root = path if what == "data directory" else next((q for q in path.parents if (q / "SOURCES.md").exists()), None)
    return FileNotFoundError(f"benchmark {what} not found: {path}; {data_dir_hint(root or path.parent)}")


def _iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, row)`` for each non-blank line; 1-based line numbers.

    Lines are decoded one at a time so that bad bytes are reported with their line; a UTF-8
    byte-order mark at the start of the file is skipped.
    """
    path = Path(path)
    if not path.is_file():
        raise _missing(path)

    def fail(lineno: int, reason: str) -> CorpusFormatError:
        return CorpusFormatError(f"{path}:{lineno}: {reason}", path=path, line=lineno)

    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise fail(
                    lineno,
                    f"not valid UTF-8 (byte 0x{raw[e.start]:02x} at column {e.start + 1}); "
                    "re-encode the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)",
                ) from None
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise fail(lineno, f"malformed JSON line: {e}; write one JSON object per line") from None
            except (ValueError, RecursionError) as e:  # over-long integers, absurd nesting
                detail = (str(e).splitlines() or [""])[0][:120]
                raise fail(lineno, f"malformed JSON line: {type(e).__name__}: {detail}") from None
            if not isinstance(row, dict):
                raise fail(lineno, f"expected a JSON object, got {type(row).__name__}")
            yield lineno, row


def _error(where: str, reason: str) -> CorpusFormatError:
    path, _, line = where.rpartition(":")
    return CorpusFormatError(f"{where}: {reason}", path=path, line=int(line) if line.isdigit() else None)


def _scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)


def _id(row: dict[str, Any], where: str, what: str) -> str:
    value = row.get("id")
    if value is None or value == "":
        raise _error(where, f"{what} has no 'id'")
    if not _scalar(value):
        raise _error(where, f"{what} field 'id' must be a string, got {type(value).__name__}")
    return str(value)


def _str_list(value: Any, where: str, name: str) -> list[str]:
    if value is None:
        return []
    if _scalar(value):
        return [str(value)]
    if isinstance(value, (list, tuple)):
        bad = next((v for v in value if not _scalar(v)), None)
        if bad is not None:
            raise _error(where, f"field {name!r} must hold strings, got a {type(bad).__name__}")
        return [str(v) for v in value]
    raise _error(where, f"field {name!r} must be a string or a list, got {type(value).__name__}")


def _hops(value: Any, where: str) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        m = re.fullmatch(r"\s*(\d{1,6})\s*(?:-?hops?)?\s*", value, flags=re.IGNORECASE)
        if m:
            return int(m.group(1))
    raise _error(where, f"field 'hops' must be an integer, got {value!r:.60}")


def _opt_str(row: dict[str, Any], name: str, where: str) -> str | None:
    """An optional string field (numbers are accepted and converted)."""
    value = row.get(name)
    if value is None or isinstance(value, str):
        return value
    if _scalar(value):
        return str(value)
    raise _error(where, f"field {name!r} must be a string, got {type(value).__name__}")


def load_corpus_jsonl(path: str | Path) -> list[Passage]:
    """Read ``{"id", "title", "text", ...}`` lines into :class:`Passage` objects.

    ``title`` defaults to ``""``; extra fields go to ``metadata`` (a ``metadata`` object is merged
    in). Empty texts are kept (index builds skip them with a warning). Raises
    :class:`CorpusFormatError` (``"FILE:LINE: reason"``) for bytes that are not UTF-8, malformed
    JSON, a missing or mistyped ``id``/``text``/``title``/``metadata`` or a duplicate id;
    ``FileNotFoundError`` if the file is missing.
    """
    path = Path(path)
    passages: list[Passage] = []
    seen: dict[str, int] = {}
    for lineno, row in _iter_jsonl(path):
        where = f"{path}:{lineno}"
        pid = _id(row, where, "passage")
        text = row.get("text")
        if text is None:
            raise _error(where, f"passage {pid!r} has no 'text'")
        if not isinstance(text, str):
            raise _error(where, f"passage {pid!r}: field 'text' must be a string, got {type(text).__name__}")
        if pid in seen:
            raise _error(where, f"duplicate passage id {pid!r} (first on line {seen[pid]}); ids must be unique")
        seen[pid] = lineno
        title = _opt_str(row, "title", where) or ""
        meta = row.get("metadata")
        if meta is not None and not isinstance(meta, dict):
            raise _error(where, f"passage {pid!r}: field 'metadata' must be an object, got {type(meta).__name__}")
        metadata = {k: v for k, v in row.items() if k not in ("id", "title", "text", "metadata")}
        metadata.update(meta or {})
        passages.append(Passage(id=pid, text=text, title=title, metadata=metadata))
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
    ``int`` (``"2"`` / ``"2hop"`` accepted). Unknown fields go to ``metadata``. Raises
    :class:`CorpusFormatError` (``"FILE:LINE: reason"``) for undecodable or malformed rows,
    mistyped fields or duplicate ids.
    """
    path = Path(path)
    questions: list[Question] = []
    seen: dict[str, int] = {}
    for lineno, row in _iter_jsonl(path):
        where = f"{path}:{lineno}"
        qid = _id(row, where, "question")
        if not isinstance(row.get("question"), str):
            raise _error(where, f"question {qid!r} has no 'question' string")
        if qid in seen:
            raise _error(where, f"duplicate question id {qid!r} (first on line {seen[qid]}); ids must be unique")
        seen[qid] = lineno
        extra = {k: v for k, v in row.items() if k not in _QUESTION_FIELDS}
        if "answers" in row:
            answers = _str_list(row["answers"], where, "answers")
        elif "answer" in row:
            answers = _str_list(extra.pop("answer"), where, "answer")
        else:
            raise _error(where, f"question {qid!r} has no 'answers'")
        questions.append(
            Question(
                id=qid,
                question=row["question"],
                answers=answers,
                supporting_passage_ids=_str_list(row.get("supporting_passage_ids"), where, "supporting_passage_ids"),
                supporting_titles=_str_list(row.get("supporting_titles"), where, "supporting_titles"),
                hops=_hops(row.get("hops"), where),
                type=_opt_str(row, "type", where) or "",
                topic_entity=_opt_str(row, "topic_entity", where),
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


def bundled_file(filename: str) -> Any:
    """A context manager giving the path of a file bundled in ``kgrag_plugins/data``."""
    from importlib import resources

    return resources.as_file(resources.files("kgrag_plugins") / "data" / filename)


def sample_corpus() -> list[Passage]:
    """The bundled demo passages (``kgrag_plugins/data/sample_corpus.jsonl``)."""
    with bundled_file("sample_corpus.jsonl") as p:
        return load_corpus_jsonl(p)


def sample_questions() -> list[Question]:
    """The bundled demo questions, with gold passage ids (``sample_questions.jsonl``)."""
    with bundled_file("sample_questions.jsonl") as p:
        return load_questions_jsonl(p)


def _sample(root: Path, name: str) -> Dataset:
    """The bundled demo sample (``kgrag_plugins/data``): needs no data directory."""
    return Dataset(name, sample_questions(), sample_corpus())


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


def load_dataset(
    name: str, data_dir: str | Path | None = None, limit: int | None = None, *, slice_corpus: bool = False
) -> Dataset:
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

    ``limit`` keeps the first N questions; the corpus stays whole unless ``slice_corpus``, which
    keeps only the kept questions' candidate paragraphs (``candidate_passage_ids``, plus any gold
    passage): each split's corpus is built that way, as the union of its questions' candidates
    (HippoRAG's construction), so a slice is the same benchmark at a smaller size. A dataset whose
    questions carry no candidates cannot be sliced (``ValueError``).
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
    if slice_corpus:
        _slice_corpus(ds)
    return ds


def _slice_corpus(ds: Dataset) -> None:
    """Keep the passages the questions list as candidates or gold (corpus order kept)."""
    if ds.corpus is None:
        raise ValueError(f"{ds.name} has no passage corpus to slice")
    keep: set[str] = set()
    for q in ds.questions:
        cands = q.metadata.get("candidate_passage_ids")
        if not isinstance(cands, list):
            raise ValueError(
                f"{ds.name}: question {q.id!r} lists no candidate_passage_ids, so its corpus slice is undefined; "
                "run without slice_corpus (--slice-corpus)"
            )
        keep.update(map(str, cands))
        keep.update(q.supporting_passage_ids)
    ds.corpus = [p for p in ds.corpus if p.id in keep]
