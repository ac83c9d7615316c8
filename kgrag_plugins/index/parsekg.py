"""ParseKG: the sentence-level hypergraph of KG-Translator §3.2 (docs/methods.md §3(a) step 1).

Every sentence ``s`` of the corpus gives one hyperrelation ``r_s``: the sentence text with its
entity mentions masked as ``##``. Its entities split into **head** entities (syntactic subject,
``nsubj``/``nsubjpass``, of a type not in ``EXCLUDED_HEAD_TYPES``) and **tail** entities (all
others), and the hyperedge points heads -> tails. Identical masked texts share one
hyperrelation id, so ``sentences_of(h)`` may return several sentences.

Queries: :meth:`out_hyperrelations` (R+ of an entity: it is a head), :meth:`in_hyperrelations`
(R-: it is a tail), :meth:`sentences_of`, :meth:`passages_of`. Entity ids are the ids of the
:class:`~kgrag_plugins.index.graph.KnowledgeGraph` built alongside.
"""

from __future__ import annotations

import json
from array import array
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

EXCLUDED_HEAD_TYPES = frozenset(
    {"DATE", "QUANTITY", "PERCENT", "TIME", "LANGUAGE", "MONEY", "ORDINAL", "NORP", "CARDINAL"}
)
HEAD, TAIL = 0, 1


class ParseKG:
    """Sentences, hyperrelations and head/tail roles; columnar, persisted next to the graph."""

    def __init__(self) -> None:
        self._passage_ids: list[str] = []
        self._pidx: dict[str, int] = {}
        self._sent_text: list[str] = []
        self._sent_passage = array("i")
        self._sent_hyper = array("i")
        self._hyper: list[str] = []
        self._hidx: dict[str, int] = {}
        self._ents: list[str] = []
        self._eidx: dict[str, int] = {}
        self._role_sent = array("i")
        self._role_ent = array("i")
        self._role = array("b")
        self._cache: dict[str, object] = {}

    # ------------------------------------------------------------------ building
    def add_sentence(
        self, passage_id: str, text: str, hyperrelation: str, heads: Sequence[str], tails: Sequence[str]
    ) -> int:
        """Record one sentence with its masked text and head/tail entity ids; returns its id."""
        p = self._pidx.get(passage_id)
        if p is None:
            p = self._pidx[passage_id] = len(self._passage_ids)
            self._passage_ids.append(passage_id)
        h = self._hidx.get(hyperrelation)
        if h is None:
            h = self._hidx[hyperrelation] = len(self._hyper)
            self._hyper.append(hyperrelation)
        s = len(self._sent_text)
        self._sent_text.append(text)
        self._sent_passage.append(p)
        self._sent_hyper.append(h)
        for role, ids in ((HEAD, heads), (TAIL, tails)):
            for eid in dict.fromkeys(ids):
                e = self._eidx.get(eid)
                if e is None:
                    e = self._eidx[eid] = len(self._ents)
                    self._ents.append(eid)
                self._role_sent.append(s)
                self._role_ent.append(e)
                self._role.append(role)
        self._cache.clear()
        return s

    # ------------------------------------------------------------------ queries
    @property
    def num_sentences(self) -> int:
        return len(self._sent_text)

    @property
    def num_hyperrelations(self) -> int:
        return len(self._hyper)

    def _by_entity(self) -> dict[tuple[int, int], list[int]]:
        if "by_entity" not in self._cache:
            idx: dict[tuple[int, int], list[int]] = {}
            for s, e, r in zip(self._role_sent, self._role_ent, self._role):
                idx.setdefault((e, r), []).append(s)
            self._cache["by_entity"] = idx
        return self._cache["by_entity"]  # type: ignore[return-value]

    def _by_sentence(self) -> dict[int, list[tuple[int, int]]]:
        if "by_sentence" not in self._cache:
            idx: dict[int, list[tuple[int, int]]] = {}
            for s, e, r in zip(self._role_sent, self._role_ent, self._role):
                idx.setdefault(s, []).append((e, r))
            self._cache["by_sentence"] = idx
        return self._cache["by_sentence"]  # type: ignore[return-value]

    def _sentences_with(self, entity_id: str, role: int) -> list[int]:
        e = self._eidx.get(entity_id)
        return [] if e is None else self._by_entity().get((e, role), [])

    def out_hyperrelations(self, entity_id: str) -> list[int]:
        """Ids of hyperrelations in which ``entity_id`` is a head entity (R+), corpus order."""
        return list(dict.fromkeys(self._sent_hyper[s] for s in self._sentences_with(entity_id, HEAD)))

    def in_hyperrelations(self, entity_id: str) -> list[int]:
        """Ids of hyperrelations in which ``entity_id`` is a tail entity (R-), corpus order."""
        return list(dict.fromkeys(self._sent_hyper[s] for s in self._sentences_with(entity_id, TAIL)))

    def hyperrelation(self, hyper_id: int) -> str:
        return self._hyper[hyper_id]

    def sentences_of(self, hyper_id: int, entity_id: str | None = None, role: str | None = None) -> list[int]:
        """Sentences whose hyperrelation is ``hyper_id``; optionally only those where
        ``entity_id`` takes part (as ``role`` "head"/"tail" when given) -- clue tracing, Eq. 8."""
        if entity_id is not None:
            roles = (HEAD, TAIL) if role is None else (HEAD if role == "head" else TAIL,)
            cands = sorted({s for r in roles for s in self._sentences_with(entity_id, r)})
            return [s for s in cands if self._sent_hyper[s] == hyper_id]
        if "by_hyper" not in self._cache:
            idx: dict[int, list[int]] = {}
            for s, h in enumerate(self._sent_hyper):
                idx.setdefault(h, []).append(s)
            self._cache["by_hyper"] = idx
        return list(self._cache["by_hyper"].get(hyper_id, []))  # type: ignore[union-attr]

    def sentence(self, sentence_id: int) -> str:
        return self._sent_text[sentence_id]

    def passage_of(self, sentence_id: int) -> str:
        return self._passage_ids[self._sent_passage[sentence_id]]

    def passages_of(self, sentence_ids: int | Iterable[int]) -> list[str]:
        """Passage ids containing the given sentence(s), first-seen order, no duplicates."""
        if isinstance(sentence_ids, (int, np.integer)):
            sentence_ids = [int(sentence_ids)]
        return list(dict.fromkeys(self.passage_of(s) for s in sentence_ids))

    def heads_of(self, sentence_id: int) -> list[str]:
        return [self._ents[e] for e, r in self._by_sentence().get(sentence_id, []) if r == HEAD]

    def tails_of(self, sentence_id: int) -> list[str]:
        return [self._ents[e] for e, r in self._by_sentence().get(sentence_id, []) if r == TAIL]

    def head_entities(self) -> list[str]:
        """Entity ids that head at least one hyperrelation (the set C_H of Eq. 4)."""
        return [self._ents[e] for e in sorted({e for (e, r) in self._by_entity() if r == HEAD})]

    def tail_entities(self) -> list[str]:
        """Entity ids that are the tail of at least one hyperrelation (have an R⁻; the pool of
        reverse translation, App. J)."""
        return [self._ents[e] for e in sorted({e for (e, r) in self._by_entity() if r == TAIL})]

    @property
    def entity_ids(self) -> list[str]:
        """Entity ids in ParseKG order (first role first; the order of :meth:`head_entities`)."""
        return list(self._ents)

    def hyper_of(self, sentence_id: int) -> int:
        """The hyperrelation id of a sentence."""
        return int(self._sent_hyper[sentence_id])

    def roles(self) -> list[tuple[int, str, int]]:
        """Every ``(sentence id, entity id, role)`` in role order (role 0: head, 1: tail)."""
        return [(int(s), self._ents[e], int(r)) for s, e, r in zip(self._role_sent, self._role_ent, self._role)]

    def counts(self) -> dict[str, int]:
        return {
            "sentences": self.num_sentences,
            "hyperrelations": self.num_hyperrelations,
            "head_entities": len(self.head_entities()),
            "roles": len(self._role),
        }

    # ------------------------------------------------------------------ updates
    def remove_passages(self, passage_ids: Iterable[str], removed_entities: Iterable[str] = ()) -> None:
        """Drop the sentences of these passages (and roles of removed entities)."""
        gone_p = {self._pidx[p] for p in passage_ids if p in self._pidx}
        gone_e = {self._eidx[e] for e in removed_entities if e in self._eidx}
        if not gone_p and not gone_e:
            return
        sp = np.frombuffer(self._sent_passage, dtype=np.int32) if len(self._sent_passage) else np.zeros(0, np.int32)
        skeep = ~np.isin(sp, list(gone_p)) if gone_p else np.ones(len(sp), bool)
        srow = np.cumsum(skeep) - 1
        old = (self._sent_text, list(self._sent_passage), list(self._sent_hyper))
        pkeep = [p for p in range(len(self._passage_ids)) if p not in gone_p]
        prow = {o: n for n, o in enumerate(pkeep)}
        self._passage_ids = [self._passage_ids[p] for p in pkeep]
        self._pidx = {p: i for i, p in enumerate(self._passage_ids)}
        keep_s = np.flatnonzero(skeep)
        self._sent_text = [old[0][s] for s in keep_s]
        self._sent_passage = array("i", [prow[old[1][s]] for s in keep_s])
        self._sent_hyper = array("i", [old[2][s] for s in keep_s])
        rs, re_, rr = list(self._role_sent), list(self._role_ent), list(self._role)
        self._role_sent, self._role_ent, self._role = array("i"), array("i"), array("b")
        for s, e, r in zip(rs, re_, rr):
            if skeep[s] and e not in gone_e:
                self._role_sent.append(int(srow[s]))
                self._role_ent.append(e)
                self._role.append(r)
        self._cache.clear()

    # ------------------------------------------------------------------ persistence
    def save(self, directory: str | Path) -> None:
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        meta = {
            "passage_ids": self._passage_ids,
            "sentences": self._sent_text,
            "hyperrelations": self._hyper,
            "entities": self._ents,
        }
        (d / "parsekg.json").write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
        np.savez(
            d / "parsekg.npz",
            sent_passage=np.frombuffer(self._sent_passage, np.int32)
            if len(self._sent_passage)
            else np.zeros(0, np.int32),
            sent_hyper=np.frombuffer(self._sent_hyper, np.int32) if len(self._sent_hyper) else np.zeros(0, np.int32),
            role_sent=np.frombuffer(self._role_sent, np.int32) if len(self._role_sent) else np.zeros(0, np.int32),
            role_ent=np.frombuffer(self._role_ent, np.int32) if len(self._role_ent) else np.zeros(0, np.int32),
            role=np.frombuffer(self._role, np.int8) if len(self._role) else np.zeros(0, np.int8),
        )

    @classmethod
    def load(cls, directory: str | Path) -> "ParseKG":
        d = Path(directory)
        kg = cls()
        try:
            meta = json.loads((d / "parsekg.json").read_text(encoding="utf-8"))
            with np.load(d / "parsekg.npz") as z:
                arrays = {k: z[k] for k in z.files}
            kg._passage_ids = meta["passage_ids"]
            kg._pidx = {p: i for i, p in enumerate(kg._passage_ids)}
            kg._sent_text = meta["sentences"]
            kg._hyper = meta["hyperrelations"]
            kg._hidx = {h: i for i, h in enumerate(kg._hyper)}
            kg._ents = meta["entities"]
            kg._eidx = {e: i for i, e in enumerate(kg._ents)}
            kg._sent_passage = array("i", arrays["sent_passage"].astype(np.int32).tobytes())
            kg._sent_hyper = array("i", arrays["sent_hyper"].astype(np.int32).tobytes())
            kg._role_sent = array("i", arrays["role_sent"].astype(np.int32).tobytes())
            kg._role_ent = array("i", arrays["role_ent"].astype(np.int32).tobytes())
            kg._role = array("b", arrays["role"].astype(np.int8).tobytes())
        except FileNotFoundError as e:
            raise ValueError(f"ParseKG in {d} is incomplete: missing {Path(e.filename).name}") from e
        except (ValueError, KeyError, TypeError, RecursionError) as e:  # JSONDecodeError is a ValueError
            raise ValueError(f"ParseKG in {d} is corrupt: {type(e).__name__}: {e}") from e
        return kg

    def __repr__(self) -> str:
        return f"ParseKG(sentences={self.num_sentences}, hyperrelations={self.num_hyperrelations})"
