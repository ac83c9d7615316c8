"""PropertyGraphParseKG: KG-Translator's ParseKG kept in the graph database beside the graph.

KG-Translator (paper §3) reads the :class:`~kgrag_plugins.index.parsekg.ParseKG` (sentences,
their masked hyperrelation, head/tail entity roles), not the triple graph. Here that ParseKG
lives in the same database as :class:`~.kg.PropertyGraphKG`'s entities, so the translator runs
against data other processes share:

* ``(:KgSentence {sid, text, pid, hid})`` per sentence (``pid``: its passage, ``hid``: its
  hyperrelation), ``(:KgHyper {hid, text})`` per hyperrelation, and
  ``(:KgSentence)-[:KG_ROLE {role, pe, ri}]->(entity)`` per head (``role`` 0) or tail (1) role;
  ``pe`` / ``ri`` are the ParseKG's entity and role positions, which keep its orders exact.
* **fetched once** (the translator embeds or scans all of them anyway): the hyperrelation
  texts, the head and tail entity sets, the counts;
* **pushed down per question**: an entity's roles with their sentences (one query for the
  entity, cached), a sentence's text, passage and roles.

The object answers the read methods of ``ParseKG`` that the translator calls, in the same
orders, so :class:`~kgrag_plugins.methods.graphdb.DBTranslatorRetriever` returns the in-memory Evidence
(tests/index/test_graphdb_translator.py). Load the graph first (``PropertyGraphKG.load``
clears the entity nodes, and with them the roles), then the ParseKG. Reads are cached per
object: after reloading the database, make a new one.
"""

from __future__ import annotations

import json
import logging
import time
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..parsekg import HEAD, TAIL, ParseKG
from .kg import BATCH, PropertyGraphKG

log = logging.getLogger("kgrag_plugins.index.graphdb")

#: Entities whose roles are kept in memory (each: a few sentences with their texts).
ROLE_CACHE = 4096

_SETUP = {
    "kuzu": (
        "CREATE NODE TABLE IF NOT EXISTS KgSentence(sid INT64, text STRING, pid STRING, hid INT64, PRIMARY KEY(sid))",
        "CREATE NODE TABLE IF NOT EXISTS KgHyper(hid INT64, text STRING, PRIMARY KEY(hid))",
        "CREATE REL TABLE IF NOT EXISTS KG_ROLE(FROM KgSentence TO Entity, role INT64, pe INT64, ri INT64)",
    ),
    "falkordb": (
        "CREATE INDEX FOR (n:KgSentence) ON (n.sid)",
        "CREATE INDEX FOR (n:KgHyper) ON (n.hid)",
    ),
    "neo4j": (
        "CREATE INDEX kgrag_sentence_sid IF NOT EXISTS FOR (n:KgSentence) ON (n.sid)",
        "CREATE INDEX kgrag_hyper_hid IF NOT EXISTS FOR (n:KgHyper) ON (n.hid)",
    ),
}
_CLEAR = (  # the marker first: a clear cut short leaves no ParseKG that reads as loaded
    "MATCH (m:KgMeta {key: 'parsekg'}) DELETE m",
    "MATCH (s:KgSentence) DETACH DELETE s",
    "MATCH (h:KgHyper) DELETE h",
)
_SENTENCE = "s.sid AS sid, s.text AS text, s.pid AS pid, s.hid AS hid"


class PropertyGraphParseKG:
    """A ParseKG in the database of ``kg`` (same store, same statistics); see the module docstring."""

    def __init__(self, kg: PropertyGraphKG) -> None:
        self.kg = kg
        self._entity = kg.dialect.entity
        self._reset()
        kg.on_server_lost.append(self._reset)  # a restarted server may hold other data

    def _reset(self) -> None:
        self._meta: dict[str, int] | None = None
        self._hyper: list[str] | None = None
        self._pools: dict[int, list[str]] = {}
        self._roles: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
        self._sent: dict[int, dict[str, Any]] = {}
        self._sent_roles: dict[int, list[dict[str, Any]]] = {}

    # ------------------------------------------------------------------ load
    def load(self, parsekg: ParseKG, *, batch: int = BATCH) -> dict[str, float]:
        """Write ``parsekg`` (sentences, hyperrelations, roles) with batched ``UNWIND``
        statements, replacing any ParseKG already there; the graph must be loaded (every
        role's entity must exist). Returns counts and seconds."""
        t0 = time.perf_counter()
        kg, name = self.kg, self.kg.dialect.name
        ents = parsekg.entity_ids
        pe = {e: i for i, e in enumerate(ents)}
        table = kg.entity_table()
        missing = [e for e in ents if e not in table]
        if missing:
            raise ValueError(
                f"{len(missing)} ParseKG entities are not in the {name} database (e.g. {missing[:3]}): "
                "load the index's graph with PropertyGraphKG.load before its ParseKG"
            )
        kg.setup(_SETUP[name])
        for stmt in _CLEAR:
            kg._run(stmt)
        sents = [
            {"sid": s, "text": parsekg.sentence(s), "pid": parsekg.passage_of(s), "hid": parsekg.hyper_of(s)}
            for s in range(parsekg.num_sentences)
        ]
        kg._bulk(
            "UNWIND $rows AS r CREATE (:KgSentence {sid: r.sid, text: r.text, pid: r.pid, hid: r.hid})", sents, batch
        )
        hypers = [{"hid": h, "text": parsekg.hyperrelation(h)} for h in range(parsekg.num_hyperrelations)]
        kg._bulk("UNWIND $rows AS r CREATE (:KgHyper {hid: r.hid, text: r.text})", hypers, batch)
        t1 = time.perf_counter()
        roles = [{"s": s, "e": e, "role": r, "pe": pe[e], "ri": i} for i, (s, e, r) in enumerate(parsekg.roles())]
        if name == "kuzu":  # COPY looks both endpoints up by primary key (see dialects.py)
            stmt = "COPY KG_ROLE FROM (UNWIND $rows AS r RETURN r.s, r.e, r.role, r.pe, r.ri)"
        else:
            stmt = (
                f"UNWIND $rows AS r MATCH (s:KgSentence {{sid: r.s}}), (e:{self._entity} {{id: r.e}}) "
                "CREATE (s)-[:KG_ROLE {role: r.role, pe: r.pe, ri: r.ri}]->(e)"
            )
        kg._bulk(stmt, roles, batch)
        meta = {"sentences": len(sents), "hyperrelations": len(hypers), "entities": len(ents), "roles": len(roles)}
        kg._run(kg.dialect.set_meta, {"key": "parsekg", "value": json.dumps(meta)})
        self._reset()
        t2 = time.perf_counter()
        out = {**meta, "sentences_s": t1 - t0, "roles_s": t2 - t1, "total_s": t2 - t0}
        log.info("loaded %r into %s: %s", parsekg, name, out)
        return out

    # ------------------------------------------------------------------ fetched once
    def _counts(self) -> dict[str, int]:
        if self._meta is None:
            rows = self.kg._run(self.kg.dialect.get_meta, {"key": "parsekg"})
            if not rows:
                raise ValueError(
                    f"no ParseKG in this {self.kg.dialect.name} database: load one with PropertyGraphParseKG.load"
                )
            self._meta = dict(json.loads(rows[0]["value"]))
        return self._meta

    @property
    def num_sentences(self) -> int:
        return int(self._counts()["sentences"])

    @property
    def num_hyperrelations(self) -> int:
        return int(self._counts()["hyperrelations"])

    def hyperrelation(self, hyper_id: int) -> str:
        if self._hyper is None:
            rows = self.kg._run("MATCH (h:KgHyper) RETURN h.hid AS hid, h.text AS text")
            self._hyper = [x["text"] for x in sorted(rows, key=lambda x: x["hid"])]
        return self._hyper[hyper_id]

    def _pool(self, role: int) -> list[str]:
        if role not in self._pools:
            rows = self.kg._run(
                f"MATCH (s:KgSentence)-[r:KG_ROLE]->(e:{self._entity}) WHERE r.role = $role "
                "RETURN DISTINCT r.pe AS pe, e.id AS id",
                {"role": role},
            )
            self._pools[role] = [x["id"] for x in sorted(rows, key=lambda x: x["pe"])]
        return list(self._pools[role])

    def head_entities(self) -> list[str]:
        """Entity ids that head at least one hyperrelation (ParseKG order)."""
        return self._pool(HEAD)

    def tail_entities(self) -> list[str]:
        """Entity ids that are the tail of at least one hyperrelation (ParseKG order)."""
        return self._pool(TAIL)

    def counts(self) -> dict[str, int]:
        c = self._counts()
        return {
            "sentences": int(c["sentences"]),
            "hyperrelations": int(c["hyperrelations"]),
            "head_entities": len(self.head_entities()),
            "roles": int(c["roles"]),
        }

    # ------------------------------------------------------------------ pushed down
    def _roles_of(self, entity_id: str) -> list[dict[str, Any]]:
        """The entity's roles with their sentences (role order), one query, cached."""
        got = self._roles.get(entity_id)
        if got is not None:
            self._roles.move_to_end(entity_id)
            return got
        roles = self.kg.dialect.by_entity("(s:KgSentence)-[r:KG_ROLE]->{a}", f"r.role AS role, r.ri AS ri, {_SENTENCE}")
        rows = self.kg._read_entities(roles, [entity_id])
        rows.sort(key=lambda x: x["ri"])
        for x in rows:
            self._sent.setdefault(int(x["sid"]), x)
        self._roles[entity_id] = rows
        if len(self._roles) > ROLE_CACHE:
            self._roles.popitem(last=False)
        return rows

    def _hypers_with(self, entity_id: str, role: int) -> list[int]:
        return list(dict.fromkeys(int(x["hid"]) for x in self._roles_of(entity_id) if x["role"] == role))

    def out_hyperrelations(self, entity_id: str) -> list[int]:
        """Ids of hyperrelations in which ``entity_id`` is a head entity (R+), corpus order."""
        return self._hypers_with(entity_id, HEAD)

    def in_hyperrelations(self, entity_id: str) -> list[int]:
        """Ids of hyperrelations in which ``entity_id`` is a tail entity (R-), corpus order."""
        return self._hypers_with(entity_id, TAIL)

    def sentences_of(self, hyper_id: int, entity_id: str | None = None, role: str | None = None) -> list[int]:
        """Sentences of ``hyper_id`` (where ``entity_id`` takes part, as ``role`` when given)."""
        if entity_id is not None:
            roles = (HEAD, TAIL) if role is None else (HEAD if role == "head" else TAIL,)
            rows = self._roles_of(entity_id)
            return sorted({int(x["sid"]) for x in rows if x["role"] in roles and int(x["hid"]) == hyper_id})
        rows = self.kg._run(f"MATCH (s:KgSentence) WHERE s.hid = $h RETURN {_SENTENCE}", {"h": int(hyper_id)})
        for x in rows:
            self._sent.setdefault(int(x["sid"]), x)
        return sorted(int(x["sid"]) for x in rows)

    def _sentence_rows(self, sids: Iterable[int]) -> list[dict[str, Any]]:
        sids = [int(s) for s in sids]
        need = [s for s in dict.fromkeys(sids) if s not in self._sent]
        if need:
            for x in self.kg._read(f"UNWIND $ids AS x MATCH (s:KgSentence {{sid: x}}) RETURN {_SENTENCE}", need):
                self._sent[int(x["sid"])] = x
        missing = [s for s in sids if s not in self._sent]
        if missing:
            raise IndexError(f"no sentence {missing[0]} in the database's ParseKG")
        return [self._sent[s] for s in sids]

    def sentence(self, sentence_id: int) -> str:
        return self._sentence_rows([sentence_id])[0]["text"]

    def passage_of(self, sentence_id: int) -> str:
        return self._sentence_rows([sentence_id])[0]["pid"]

    def passages_of(self, sentence_ids: int | Iterable[int]) -> list[str]:
        """Passage ids containing the given sentence(s), first-seen order, no duplicates."""
        if isinstance(sentence_ids, (int, np.integer)):
            sentence_ids = [int(sentence_ids)]
        return list(dict.fromkeys(x["pid"] for x in self._sentence_rows(sentence_ids)))

    def _entities_in(self, sentence_id: int, role: int) -> list[str]:
        s = int(sentence_id)
        if s not in self._sent_roles:
            rows = self.kg._read(
                f"UNWIND $ids AS x MATCH (s:KgSentence {{sid: x}})-[r:KG_ROLE]->(e:{self._entity}) "
                "RETURN r.role AS role, r.ri AS ri, e.id AS id",
                [s],
            )
            self._sent_roles[s] = sorted(rows, key=lambda x: x["ri"])
        return [x["id"] for x in self._sent_roles[s] if x["role"] == role]

    def heads_of(self, sentence_id: int) -> list[str]:
        return self._entities_in(sentence_id, HEAD)

    def tails_of(self, sentence_id: int) -> list[str]:
        return self._entities_in(sentence_id, TAIL)

    def __repr__(self) -> str:
        return f"PropertyGraphParseKG({self.kg.dialect.name})"
