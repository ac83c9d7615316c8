"""Knowledge-graph embeddings for the Know³-RAG verifier (Know³-RAG §3.2 Eq. 2, App. A; docs/methods.md §5(a)).

The paper scores triples with a ComplEx model (LibKGE's Wikidata5M checkpoint). Here a small
torch implementation of ComplEx, RotatE, TransE and DistMult is trained on an index's own graph
(docs/kge.md has the design and the measured figures):

* **Reciprocal relations**: every triple ``(h, r, t)`` also trains ``(t, r^-1, h)``; relation rows
  ``0..R-1`` are the KG's relations and ``R..2R-1`` their inverses.
* **Sampled softmax** (cross-entropy) per query ``(h, r, ·)``: the true tail against sampled tails
  of the same relation (type-consistent negatives) and uniform entities, with the log-Q correction
  so it follows the full 1-N softmax; N3 regularisation (Lacroix et al. 2018) for the bilinear
  models. PyKEEN's 1-N (LCWA) loop was measured ~30x slower per epoch on MetaQA (docs/kge.md).
* **Scores** are the mean of both directions, ``(s(h, r, t) + s(t, r^-1, h)) / 2`` (``directions="both"``);
  higher = more plausible. Distance models use the Euclidean distance (``-||q - t||_2``) so that
  all-entity scoring is a matrix product.

Nothing is pickled: :meth:`KGEModel.save` writes ``weights.pt`` (a dict of two tensors, read back
with ``torch.load(weights_only=True)``) and ``kge.json`` (id maps, config, relation canonicalisation,
graph fingerprint), atomically. This module knows no index: it trains on string triples or on a
graph's arrays (:class:`TripleGraph`); ``kgrag_plugins.index.kge.kge_for_index`` keeps one in an
index's live generation (``gen-<id>/kge/``), so a graph change (``add_passages``) invalidates it.

PyKEEN (extra ``kge``) is not needed by this implementation (the tests check the four scoring
functions against PyKEEN's interaction modules when it is installed); docs/kge.md says why.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import pickle
import shutil
import time
import uuid
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Protocol, Sequence

import numpy as np

from .kge_eval import MODELS, KnownTails, RowScorer, split_holdout
from .kge_train import fit_embeddings

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

FORMAT_VERSION = 2
#: Formats :meth:`KGEModel.load` reads (1: before the held-out triples were stored).
READABLE_FORMATS = (1, 2)
#: ``"~r"`` names the reciprocal of relation ``r`` (the inverse-step notation of FRAG chains).
INVERSE_PREFIX = "~"
#: Label of the pooled rare relations of a canonicalised (corpus) graph.
POOLED_RELATION = "related_to"
#: Canonical relations with fewer triples than this are pooled into :data:`POOLED_RELATION`.
MIN_RELATION_COUNT = 3
#: Training defaults (chosen by measurement on MetaQA, docs/kge.md).
DEFAULTS: dict[str, Any] = {
    "model": "complex",
    "dim": 256,
    "epochs": 5,
    "lr": 0.1,
    "batch_size": 1024,
    "negatives": 1024,
    "type_negatives": 0.5,
    "reg": 1e-2,
    "patience": 2,
    "valid_max": 2000,
    "directions": "both",
    "in_batch": False,
    "logq": True,
    "full_softmax": False,
}


def auto_threads() -> int:
    """Torch CPU threads for training: torch's setting, lowered to the cores left idle by the
    1-minute load average (at least 1). On a CPU shared with other jobs, 2 threads made each
    step several times slower than 1 (docs/kge.md)."""
    import torch

    cores = os.cpu_count() or 1
    try:
        idle = cores - os.getloadavg()[0]
    except (AttributeError, OSError):  # pragma: no cover - no load average (Windows)
        return torch.get_num_threads()
    return max(1, min(torch.get_num_threads(), int(idle)))


# --------------------------------------------------------------------------- relation canonicalisation
@lru_cache(maxsize=1)
def _tagger():
    from .._spacy import load_pipeline

    return load_pipeline(exclude=["parser", "ner", "senter"])


def _canonical_doc(doc) -> str:
    toks = [t for t in doc if t.is_alpha]
    verbs = [i for i, t in enumerate(toks) if t.pos_ == "VERB"]
    nouns = [i for i, t in enumerate(toks) if t.pos_ in ("NOUN", "PROPN")]
    start = verbs[0] if verbs else (nouns[0] if nouns else None)
    if start is None:
        adps = [t for t in toks if t.pos_ == "ADP"]
        if adps:
            return adps[0].lower_
        aux = [t for t in toks if t.pos_ == "AUX"]
        return aux[0].lemma_.lower() if aux else POOLED_RELATION
    head = toks[start].lemma_.lower()
    prep = next((t.lower_ for t in toks[start + 1 :] if t.pos_ == "ADP"), None)
    return f"{head}_{prep}" if prep else head


def canonical_relations(texts: Sequence[str], *, batch_size: int = 512) -> list[str]:
    """:func:`canonical_relation` of many strings (one spaCy pass over the distinct ones)."""
    distinct = list(dict.fromkeys(texts))
    clean = [" ".join(t.replace("#", " ").replace("_", " ").split()) for t in distinct]
    out: dict[str, str] = {}
    nlp = _tagger()
    for raw, doc in zip(distinct, nlp.pipe(clean, batch_size=batch_size)):
        out[raw] = _canonical_doc(doc)
    return [out[t] for t in texts]


@lru_cache(maxsize=65_536)
def canonical_relation(text: str) -> str:
    """Free-text corpus relation -> KGE relation label (docs/kge.md "Relation canonicalisation").

    Rule (spaCy tagger + lemmatiser, ``##`` entity placeholders dropped): the lemma of the first
    verb plus the first preposition after it (``"was born in"`` -> ``"bear_in"``, ``"directed by"``
    -> ``"direct_by"``); with no verb the first noun, again plus a following preposition
    (``"is the capital of"`` -> ``"capital_of"``); else the first preposition, else the lemma of an
    auxiliary (``"is"`` -> ``"be"``), else :data:`POOLED_RELATION`.
    """
    return canonical_relations([text])[0]


def looks_free_text(relations: Sequence[str], num_triples: int) -> bool:
    """Heuristic for raw triples with no builder information: many distinct relation labels
    relative to the triples (more than 20 and over 10 % of the triples) or labels that are
    phrases (a median of 3 or more words). MetaQA (9 / 134k), FB15k-237 (237 / 272k) and
    Wikidata5M (822 / 21M) stay curated."""
    if not relations:
        return False
    many = len(relations) > 20 and len(relations) > 0.1 * max(num_triples, 1)
    words = float(np.median([len(r.replace("_", " ").split()) for r in relations]))
    return many or words >= 3


def relation_map(
    labels: Sequence[str], counts: Sequence[int], *, min_count: int = MIN_RELATION_COUNT
) -> dict[str, str]:
    """KG relation label -> canonical KGE label; canonical labels with fewer than ``min_count``
    triples in all are pooled into :data:`POOLED_RELATION`."""
    canon = canonical_relations(list(labels))
    total: dict[str, int] = {}
    for c, n in zip(canon, counts):
        total[c] = total.get(c, 0) + int(n)
    return {lab: (c if total[c] >= min_count else POOLED_RELATION) for lab, c in zip(labels, canon)}


# --------------------------------------------------------------------------- graph input, fingerprints
class TripleGraph(Protocol):
    """What the KGE reads of a graph (an index's ``KnowledgeGraph`` has it): entity ids and
    relation labels by row, and ``(heads, relations, tails)`` as row-index arrays."""

    @property
    def entity_ids(self) -> Sequence[str]: ...

    @property
    def relations(self) -> Sequence[str]: ...

    def triple_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...


def graph_fingerprint(graph: TripleGraph) -> str:
    """Number of triples plus a hash of the entity ids, relation labels and triple arrays."""
    h = hashlib.sha256()
    h.update("\x1f".join(graph.entity_ids).encode("utf-8"))
    h.update(b"\x1e" + "\x1f".join(graph.relations).encode("utf-8") + b"\x1e")
    arrays = graph.triple_arrays()
    for a in arrays:
        h.update(np.ascontiguousarray(a, dtype=np.int32).tobytes())
    return f"{len(arrays[0])}:{h.hexdigest()[:16]}"


def triples_fingerprint(triples: Sequence[tuple[str, str, str]]) -> str:
    h = hashlib.sha256()
    for t in triples:
        h.update(("\x1f".join(t) + "\x1e").encode("utf-8"))
    return f"{len(triples)}:{h.hexdigest()[:16]}"


# --------------------------------------------------------------------------- the model
class KGEModel:
    """A trained KG embedding: scores ``(head, relation, tail)`` by KG ids and relation labels.

    Higher scores are more plausible. Relations are the KG's labels; a canonicalised (corpus)
    model maps them through its stored map, and an unseen free-text relation through
    :func:`canonical_relation` (falling back to the pooled label).
    """

    def __init__(
        self,
        model_name: str,
        entity_ids: Sequence[str],
        relation_ids: Sequence[str],
        entity_weights: "torch.Tensor | np.ndarray",
        relation_weights: "torch.Tensor | np.ndarray",
        *,
        relation_map: dict[str, str] | None = None,
        canonicalize: bool = False,
        directions: str = "both",
        config: dict[str, Any] | None = None,
        fingerprint: str | None = None,
        report: dict[str, Any] | None = None,
        valid_rows: "np.ndarray | None" = None,
    ) -> None:
        import torch

        if model_name not in MODELS:
            raise ValueError(f"unknown KGE model {model_name!r}; expected one of {', '.join(MODELS)}")
        self.model_name = model_name
        self.entity_ids = list(entity_ids)
        self.relation_ids = list(relation_ids)
        self._E = torch.as_tensor(entity_weights, dtype=torch.float32).detach().cpu().contiguous()
        self._R = torch.as_tensor(relation_weights, dtype=torch.float32).detach().cpu().contiguous()
        if self._E.shape[0] != len(self.entity_ids) or self._R.shape[0] != 2 * len(self.relation_ids):
            raise ValueError(
                f"weights do not match the id maps: {tuple(self._E.shape)} entity rows for "
                f"{len(self.entity_ids)} ids, {tuple(self._R.shape)} relation rows for 2 x {len(self.relation_ids)}"
            )
        self.dim = int(self._E.shape[1])
        self.relation_map = dict(relation_map or {})
        self.canonicalize = bool(canonicalize)
        self.directions = directions
        self.config = dict(config or {})
        self.fingerprint = fingerprint
        self.report = dict(report or {})
        #: The held-out triples (KGE rows ``[N, 3]``) the training validated on and never fitted;
        #: ``None`` for a model saved before they were stored (format 1). Used to calibrate θ_0.
        self.valid_rows = None if valid_rows is None else np.asarray(valid_rows, dtype=np.int64).reshape(-1, 3)
        self._eidx = {e: i for i, e in enumerate(self.entity_ids)}
        self._ridx = {r: i for i, r in enumerate(self.relation_ids)}
        self._scorer = RowScorer(model_name, self._E, self._R, len(self.relation_ids), directions)

    # ------------------------------------------------------------------ id maps
    @property
    def num_entities(self) -> int:
        return len(self.entity_ids)

    @property
    def num_relations(self) -> int:
        return len(self.relation_ids)

    def entity_row(self, e: str) -> int | None:
        return self._eidx.get(e)

    def relation_row(self, r: str) -> int | None:
        """Row of a KG relation label (through the canonicalisation map), or ``None``. ``"~r"``
        (the inverse-step notation of FRAG chains) is the reciprocal relation, row ``R + row(r)``."""
        i = self._ridx.get(r)
        if i is not None:
            return i
        if isinstance(r, str) and r.startswith(INVERSE_PREFIX) and len(r) > 1:
            j = self.relation_row(r[1:])
            return None if j is None or j >= self.num_relations else j + self.num_relations
        if r in self.relation_map:
            return self._ridx.get(self.relation_map[r])
        if self.canonicalize and isinstance(r, str) and r.strip():
            c = canonical_relation(r)
            return self._ridx.get(c, self._ridx.get(POOLED_RELATION))
        return None

    def has_entity(self, e: str) -> bool:
        return e in self._eidx

    def has_relation(self, r: str) -> bool:
        return self.relation_row(r) is not None

    # ------------------------------------------------------------------ scoring by rows
    def score_all_rows(
        self, h: "torch.Tensor", r: "torch.Tensor", lo: int = 0, hi: int | None = None
    ) -> "torch.Tensor":
        """Scores ``[B, hi - lo]`` of entity rows ``lo:hi`` as tails of ``(h[i], r[i], ·)`` (relation
        rows; ``R..2R-1`` are the inverses)."""
        return self._scorer.score_all(h, r, lo, hi)

    def score_candidates_rows(self, h: Any, r: Any, cand: Any) -> np.ndarray:
        """Scores ``[B, C]`` (float32) of the entity rows ``cand`` as tails of each ``(h[i], r[i], ·)``."""
        import torch

        h, r, cand = (torch.as_tensor(np.asarray(x), dtype=torch.long) for x in (h, r, cand))
        return self._scorer.score_candidates(h, r, cand).numpy().astype(np.float32)

    def score_rows(self, h: Any, r: Any, t: Any) -> np.ndarray:
        """Scores of row triples (``t`` may be ``[B]`` or ``[B, K]``); float32."""
        import torch

        h, r, t = (torch.as_tensor(np.asarray(x), dtype=torch.long) for x in (h, r, t))
        return self._scorer.score_pairs(h, r, t).numpy().astype(np.float32)

    # ------------------------------------------------------------------ public scoring API
    def _rows(self, h: str, r: str, t: str | None = None) -> tuple[int, int, int] | None:
        hi, ri = self._eidx.get(h), self.relation_row(r)
        ti = self._eidx.get(t) if t is not None else 0
        if hi is None or ri is None or ti is None:
            return None
        return hi, ri, ti

    def score(self, h: str, r: str, t: str) -> float | None:
        """KGE(h, r, t), higher = more plausible; ``None`` when an id is unknown."""
        rows = self._rows(h, r, t)
        if rows is None:
            return None
        return float(self.score_rows([rows[0]], [rows[1]], [rows[2]])[0])

    def score_many(self, triples: Sequence[tuple[str, str, str]]) -> np.ndarray:
        """Scores of many triples (float32), ``nan`` where an id is unknown."""
        out = np.full(len(triples), np.nan, dtype=np.float32)
        rows = [self._rows(*tr) for tr in triples]
        ok = [i for i, x in enumerate(rows) if x is not None]
        if ok:
            arr = np.array([rows[i] for i in ok], dtype=np.int64)
            for s in range(0, len(arr), 65_536):
                part = arr[s : s + 65_536]
                out[np.array(ok[s : s + 65_536])] = self.score_rows(part[:, 0], part[:, 1], part[:, 2])
        return out

    def score_tails(self, h: str, r: str) -> np.ndarray | None:
        """Scores of every entity row as the tail of ``(h, r, ·)`` (float32), or ``None``."""
        import torch

        rows = self._rows(h, r)
        if rows is None:
            return None
        return self.score_all_rows(torch.tensor([rows[0]]), torch.tensor([rows[1]]))[0].numpy().astype(np.float32)

    def predict_tails(self, h: str, r: str, k: int = 10, *, exclude: Iterable[str] = ()) -> list[tuple[str, float]]:
        """The ``k`` best tails of ``(h, r, ·)`` (``exclude``: ids left out, e.g. known tails)."""
        sc = self.score_tails(h, r)
        if sc is None or k <= 0:
            return []
        sc = sc.copy()
        drop = [self._eidx[e] for e in exclude if e in self._eidx]
        if drop:
            sc[drop] = -np.inf
        k = min(k, int(np.isfinite(sc).sum()))
        top = np.argpartition(-sc, k - 1)[:k] if k < len(sc) else np.arange(len(sc))
        top = top[np.argsort(-sc[top], kind="stable")][:k]
        return [(self.entity_ids[i], float(sc[i])) for i in top]

    def predict_relations(self, h: str, k: int = 3) -> list[tuple[str, float]]:
        """Relations ranked for head ``h`` by their best tail score ``max_t KGE(h, r, t)`` (KGE labels)."""
        import torch

        hi = self._eidx.get(h)
        if hi is None or k <= 0 or not self.num_relations:
            return []
        m = self.num_relations
        best = torch.full((m,), -math.inf)
        for lo in range(0, self.num_entities, 65_536):
            sc = self.score_all_rows(torch.full((m,), hi, dtype=torch.long), torch.arange(m), lo, lo + 65_536)
            best = torch.maximum(best, sc.max(1).values)
        order = torch.argsort(best, descending=True)[:k].tolist()
        return [(self.relation_ids[i], float(best[i])) for i in order]

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, triples: np.ndarray, known: KnownTails, *, progress: bool = False) -> dict[str, float]:
        """Filtered MRR / Hits@1/3/10 over head and tail prediction of row triples ``[N, 3]``
        (``known``: every true triple, :class:`~.kge_eval.KnownTails`)."""
        return self._scorer.evaluate(triples, known, progress=progress)

    # ------------------------------------------------------------------ persistence
    def save(self, directory: str | Path) -> Path:
        """Write ``weights.pt`` (tensors only) and ``kge.json`` atomically into ``directory``."""
        import torch

        target = Path(directory)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
        old = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.old")
        try:
            tmp.mkdir()
            tensors = {"entity": self._E, "relation": self._R}
            if self.valid_rows is not None:
                tensors["valid"] = torch.as_tensor(self.valid_rows, dtype=torch.int64)
            torch.save(tensors, tmp / "weights.pt")
            meta = {
                "format_version": FORMAT_VERSION,
                "model_name": self.model_name,
                "dim": self.dim,
                "directions": self.directions,
                "canonicalize": self.canonicalize,
                "config": self.config,
                "fingerprint": self.fingerprint,
                "report": self.report,
                "entity_ids": self.entity_ids,
                "relation_ids": self.relation_ids,
                "relation_map": self.relation_map,
            }
            with open(tmp / "kge.json", "w", encoding="utf-8") as f:
                json.dump(meta, f, ensure_ascii=False)
                f.flush()
                os.fsync(f.fileno())
            if target.exists():
                os.replace(target, old)
            os.replace(tmp, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.rmtree(old, ignore_errors=True)
        return target

    @classmethod
    def load(cls, directory: str | Path) -> "KGEModel":
        """Read a model written by :meth:`save` (``torch.load(weights_only=True)``: no pickle)."""
        import torch

        d = Path(directory)
        if not (d / "kge.json").is_file() or not (d / "weights.pt").is_file():
            raise FileNotFoundError(f"no KGE model in {d} (expected kge.json and weights.pt)")
        try:
            meta = json.loads((d / "kge.json").read_text(encoding="utf-8"))
            weights = torch.load(d / "weights.pt", map_location="cpu", weights_only=True)
        except (json.JSONDecodeError, UnicodeDecodeError, RuntimeError, EOFError, pickle.UnpicklingError) as e:
            raise ValueError(f"KGE model in {d} is corrupt ({e}); train it again with `kgrag train kge`") from None
        if meta.get("format_version") not in READABLE_FORMATS:
            raise ValueError(f"KGE model in {d} has format {meta.get('format_version')!r}, expected {FORMAT_VERSION}")
        valid = weights.get("valid")
        return cls(
            meta["model_name"],
            meta["entity_ids"],
            meta["relation_ids"],
            weights["entity"],
            weights["relation"],
            relation_map=meta.get("relation_map"),
            canonicalize=meta.get("canonicalize", False),
            directions=meta.get("directions", "both"),
            config=meta.get("config"),
            fingerprint=meta.get("fingerprint"),
            report=meta.get("report"),
            valid_rows=None if valid is None else valid.numpy(),
        )

    def __repr__(self) -> str:
        return (
            f"KGEModel({self.model_name}, dim={self.dim}, entities={self.num_entities}, "
            f"relations={self.num_relations}, directions={self.directions!r})"
        )


# --------------------------------------------------------------------------- training
def _encode(
    triples: "Sequence[tuple[str, str, str]] | TripleGraph", entity_ids: Sequence[str] | None
) -> tuple[list[str], list[str], np.ndarray, str]:
    """Entity ids, relation labels, ``[N, 3]`` int64 rows and a fingerprint of the input."""
    if hasattr(triples, "triple_arrays"):  # a graph (TripleGraph): its arrays, no string triples
        h, r, t = triples.triple_arrays()
        idx = np.stack([h, r, t], axis=1).astype(np.int64) if len(h) else np.zeros((0, 3), np.int64)
        return triples.entity_ids, triples.relations, idx, graph_fingerprint(triples)
    ents = list(entity_ids) if entity_ids is not None else []
    eidx = {e: i for i, e in enumerate(ents)}
    if len(eidx) != len(ents):
        raise ValueError("entity_ids must be distinct")
    ridx: dict[str, int] = {}
    rows = np.zeros((len(triples), 3), dtype=np.int64)
    for i, tr in enumerate(triples):
        if len(tr) != 3:
            raise ValueError(f"triple {i} is not (head, relation, tail): {tr!r}")
        h, r, t = (str(x) for x in tr)
        for e in (h, t):
            if e not in eidx:
                if entity_ids is not None:
                    raise ValueError(f"triple {i} names entity {e!r}, which is not in entity_ids")
                eidx[e] = len(ents)
                ents.append(e)
        rows[i] = (eidx[h], ridx.setdefault(r, len(ridx)), eidx[t])
    return ents, list(ridx), rows, triples_fingerprint(triples)


def train_kge(
    triples: "Sequence[tuple[str, str, str]] | TripleGraph",
    *,
    model: str = DEFAULTS["model"],
    dim: int = DEFAULTS["dim"],
    epochs: int = DEFAULTS["epochs"],
    lr: float = DEFAULTS["lr"],
    batch_size: int = DEFAULTS["batch_size"],
    seed: int = 0,
    valid_fraction: float = 0.05,
    patience: int = DEFAULTS["patience"],
    device: str | None = None,
    progress: bool = True,
    negatives: int = DEFAULTS["negatives"],
    type_negatives: float = DEFAULTS["type_negatives"],
    reg: float = DEFAULTS["reg"],
    valid_max: int = DEFAULTS["valid_max"],
    directions: str = DEFAULTS["directions"],
    optimizer: str = "adagrad",
    canonicalize: bool | None = None,
    min_relation_count: int = MIN_RELATION_COUNT,
    entity_ids: Sequence[str] | None = None,
    time_budget: float | None = None,
    threads: int | str | None = "auto",
    in_batch: bool = DEFAULTS["in_batch"],
    logq: bool = DEFAULTS["logq"],
    pool_below: int = 0,
    full_softmax: bool = DEFAULTS["full_softmax"],
) -> tuple[KGEModel, dict[str, Any]]:
    """Train a KG embedding on ``triples`` (string triples, or a graph: :class:`TripleGraph`).

        ``valid_fraction`` of the triples (at most ``valid_max``, entities kept covered) is held out
        for early stopping on filtered MRR (``patience`` epochs without improvement); the best epoch's
        weights are kept. ``canonicalize`` (default: :func:`looks_free_text`) maps free-text relations
        with :func:`canonical_relation`. ``device``: ``"cuda"`` when torch sees one, else ``"cpu"``.
        ``threads``: torch CPU threads while training (``"auto"``: :func:`auto_threads`; ``None``: torch's
        setting). ``pool_below``: relations with fewer (directed) training queries than this share mixed
    batches (:func:`~kgrag_plugins.models.kge_train.fit_embeddings`; 0: one relation per batch).
    ``full_softmax``: score each query against every entity (1-N; ``negatives`` is then unused).
    ``time_budget``: stop after
        the epoch that passes this many seconds. Returns the model and a report (timings, history,
        validation MRR, sizes).
    """
    import torch

    if threads == "auto":
        dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
        threads = auto_threads() if dev == "cpu" else None
    if threads is not None:
        old = torch.get_num_threads()
        torch.set_num_threads(max(1, int(threads)))
        try:
            return train_kge(
                triples, model=model, dim=dim, epochs=epochs, lr=lr, batch_size=batch_size, seed=seed,
                valid_fraction=valid_fraction, patience=patience, device=device, progress=progress,
                negatives=negatives, type_negatives=type_negatives, reg=reg, valid_max=valid_max,
                directions=directions, optimizer=optimizer, canonicalize=canonicalize,
                min_relation_count=min_relation_count, entity_ids=entity_ids, time_budget=time_budget,
                in_batch=in_batch, logq=logq, pool_below=pool_below, full_softmax=full_softmax, threads=None,
            )  # fmt: skip
        finally:
            torch.set_num_threads(old)

    if model not in MODELS:
        raise ValueError(f"unknown KGE model {model!r}; expected one of {', '.join(MODELS)}")
    for key, val in (("dim", dim), ("epochs", epochs), ("batch_size", batch_size), ("negatives", negatives)):
        if isinstance(val, bool) or not isinstance(val, int) or val < 1:
            raise ValueError(f"{key} must be a positive integer, got {val!r}")
    if not 0.0 <= valid_fraction < 1.0:
        raise ValueError(f"valid_fraction must be in [0, 1), got {valid_fraction!r}")
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    t0 = time.perf_counter()
    ents, labels, idx, fingerprint = _encode(triples, entity_ids)
    if not len(idx):
        raise ValueError("no triples to train a KG embedding on")
    if canonicalize is None:
        canonicalize = looks_free_text(labels, len(idx))
    rmap: dict[str, str] = {}
    rels = labels
    if canonicalize:
        counts = np.bincount(idx[:, 1], minlength=len(labels))
        rmap = relation_map(labels, counts.tolist(), min_count=min_relation_count)
        rels = list(dict.fromkeys(rmap[lab] for lab in labels))
        ridx = {r: i for i, r in enumerate(rels)}
        remap = np.array([ridx[rmap[lab]] for lab in labels], dtype=np.int64)
        idx = np.unique(np.stack([idx[:, 0], remap[idx[:, 1]], idx[:, 2]], axis=1), axis=0)
    cfg = {
        "model": model,
        "dim": dim,
        "epochs": epochs,
        "lr": lr,
        "batch_size": batch_size,
        "negatives": negatives,
        "type_negatives": type_negatives,
        "reg": reg,
        "patience": patience,
        "valid_fraction": valid_fraction,
        "valid_max": valid_max,
        "directions": directions,
        "optimizer": optimizer,
        "seed": seed,
        "in_batch": in_batch,
        "logq": logq,
        **({"pool_below": int(pool_below)} if pool_below else {}),
        **({"full_softmax": True} if full_softmax else {}),
    }
    vmask = split_holdout(idx, valid_fraction, seed=seed, max_count=valid_max)
    train_idx, valid_idx = idx[~vmask], idx[vmask]
    log.info(
        "training KGE %s d%d on %d triples (%d valid), %d entities, %d relations, device %s",
        model, dim, len(train_idx), len(valid_idx), len(ents), len(rels), device,
    )  # fmt: skip
    E, R, info = fit_embeddings(
        train_idx, valid_idx, len(ents), len(rels), cfg,
        seed=seed, device=device, progress=progress, time_budget=time_budget,
    )  # fmt: skip
    report = {
        **{k: cfg[k] for k in ("model", "dim", "lr", "epochs", "batch_size", "negatives", "reg", "patience")},
        "optimizer": cfg["optimizer"],
        "full_softmax": bool(full_softmax),
        **info,
        "device": device,
        "threads": torch.get_num_threads() if device == "cpu" else None,
        "num_train_triples": int(len(train_idx)),
        "num_valid_triples": int(len(valid_idx)),
        "num_entities": len(ents),
        "num_relations": len(rels),
        "num_kg_relations": len(labels),
        "canonicalize": bool(canonicalize),
        "total_seconds": round(time.perf_counter() - t0, 1),
    }
    kge = KGEModel(
        model, ents, rels, E, R,
        relation_map=rmap, canonicalize=bool(canonicalize), directions=directions,
        config=cfg, fingerprint=fingerprint, report={k: v for k, v in report.items() if k != "history"},
        valid_rows=valid_idx,
    )  # fmt: skip
    return kge, report
