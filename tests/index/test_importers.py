"""Curated-KG importers (kgrag_plugins.index.importers): real staged files, malformed inputs, Wikidata5M scale."""

from __future__ import annotations

import csv
import gzip
import importlib.util
import json
import random
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from kgrag_plugins.index.importers import (
    FORMATS,
    KGFormatError,
    LoadReport,
    load_kg,
    load_metaqa_kb,
    load_openie_jsonl,
    load_triples_tsv,
    load_wikidata5m,
    normalize_entity_key,
)

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "benchmarks" / "wikidata5m_scale.py"


def _bench():
    spec = importlib.util.spec_from_file_location("wikidata5m_scale", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _out(g, eid):
    return {(nb, rel) for nb, rel, d in g.neighbors(eid, "out")}


# --------------------------------------------------------------------------- real staged data


def test_metaqa_kb_real(data_dir):
    kb = data_dir / "metaqa" / "kb.txt"
    sources = (data_dir / "SOURCES.md").read_text(encoding="utf-8")
    assert "130,312 unique triples" in sources and "42,856 entities" in sources
    g, rep = load_kg(kb, "metaqa", progress=False)
    assert (rep.triples, rep.entities) == (130_312, 42_856)
    assert (g.num_triples, g.num_entities) == (130_312, 42_856)
    assert rep.skipped == 0 and rep.format == "metaqa" and rep.lines == 130_312
    lines = kb.read_text(encoding="utf-8").splitlines()
    inception = [ln.split("|") for ln in lines if ln.startswith("Inception|")]
    assert len(inception) > 5
    out = _out(g, "Inception")
    for s, r, o in inception:
        assert (o, r) in out
    for ln in random.Random(0).sample(lines, 200):
        s, r, o = ln.split("|")
        assert (o, r) in _out(g, s)
        assert g.name_of(s) == s
    assert len(g.relations) == len({ln.split("|")[1] for ln in lines})


def test_twowiki_tsv_real(data_dir):
    path = data_dir / "2wikimultihopqa" / "kg_evidence_triples.tsv"
    g, rep = load_kg(path, "tsv", progress=False)
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    header, rows = rows[0], rows[1:]
    assert header[:4] == ["question_id", "subject", "relation", "object"]
    assert rep.skipped == 0 and rep.lines == len(rows) + 1
    assert rep.triples + rep.duplicates == len(rows)

    def has_id(x):
        return x not in ("", "date_information")

    name_ids = defaultdict(set)
    for _, s, _, o, si, oi in rows:
        for n, i in ((s, si), (o, oi)):
            if has_id(i):
                name_ids[n].add(i)

    def eid(name, i):
        if has_id(i):
            return i
        ids = name_ids.get(name, set())
        return next(iter(ids)) if len(ids) == 1 else name

    for _, s, r, o, si, oi in rows:
        h, t = eid(s, si), eid(o, oi)
        assert (t, r) in _out(g, h)
        ent = g.entity(h)
        assert s == ent.name or s in ent.aliases
    assert rep.triples == len({(eid(s, si), r, eid(o, oi)) for _, s, r, o, si, oi in rows})
    # a Wikidata id with several surface names keeps one name and the others as aliases
    qnames = {i: set() for i in {x for row in rows for x in row[4:] if x.startswith("Q")}}
    for _, s, _, o, si, oi in rows:
        for n, i in ((s, si), (o, oi)):
            if i.startswith("Q"):
                qnames[i].add(n)
    multi = [i for i, ns in qnames.items() if len(ns) > 1]
    assert multi
    for i in multi:
        e = g.entity(i)
        assert {e.name, *e.aliases} == qnames[i]
    # literals (no id) are entities named by themselves
    lit = next(o for _, _, _, o, _, oi in rows if oi == "date_information" and o not in name_ids)
    assert g.entity(lit).name == lit


def test_openie_real(data_dir):
    path = data_dir / "musique" / "openie_hipporag_gpt35_1890.jsonl"
    g, rep = load_kg(path, "openie", progress=False)
    recs = [json.loads(ln) for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    valid = [
        (r["passage_id"], t)
        for r in recs
        for t in r["triples"]
        if isinstance(t, list) and len(t) == 3 and all(isinstance(x, str) and x.strip() for x in t)
    ]
    n_all = sum(len(r["triples"]) for r in recs)
    assert rep.triples + rep.duplicates == len(valid)
    assert rep.skipped == n_all - len(valid) > 0
    assert set(g.passage_ids) == {r["passage_id"] for r in recs}
    assert g.num_triples == rep.triples
    sources = {(t.head, t.relation, t.tail): set(t.source_ids) for t in g.triples()}
    for pid, (h, r, t) in valid:
        key = (normalize_entity_key(h), r.strip(), normalize_entity_key(t))
        assert pid in sources[key]
    for rec in recs[:300]:
        for name in [rec["title"], *rec["entities"]]:
            assert rec["passage_id"] in g.passages_of(normalize_entity_key(name))


# --------------------------------------------------------------------------- OpenIE details


def test_openie_case_variants_merge_and_links(tmp_path):
    rows = [
        {
            "passage_id": "p1",
            "title": "Hank Snow",
            "entities": ["Hank Snow", "Canada"],
            "triples": [["Hank Snow", "born in", "Canada"], ["Hank Snow", "genre"], ["", "x", "y"]],
        },
        {
            "passage_id": "p2",
            "title": "Grand Ole Opry",
            "entities": ["hank snow", " Hank  Snow.", "Grand Ole Opry"],
            "triples": [["hank snow", "performed at", "Grand Ole Opry"], ["HANK SNOW", "born in", "canada"]],
        },
        {"passage_id": "p3", "title": "Empty Page", "entities": [], "triples": []},
    ]
    p = _write(tmp_path / "oie.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")
    g, rep = load_openie_jsonl(p, progress=False)
    assert "hank snow" in g
    e = g.entity("hank snow")
    assert e.name == "Hank Snow" and set(e.aliases) == {"hank snow", "Hank  Snow.", "HANK SNOW"}
    assert g.passages_of("hank snow") == ["p1", "p2"]
    assert g.passages_of("canada") == ["p1", "p2"]
    assert g.passages_of("empty page") == ["p3"]  # the title entity is created and linked
    assert set(g.passage_ids) == {"p1", "p2", "p3"}
    assert rep.triples == 2 and rep.duplicates == 1 and rep.skipped == 2
    born = next(t for t in g.triples() if t.relation == "born in")
    assert (born.head, born.tail, sorted(born.source_ids)) == ("hank snow", "canada", ["p1", "p2"])
    assert all("oie.jsonl:1:" in x for x in rep.skipped_examples)
    # malformed triples are always skipped, also in raise mode
    _, rep2 = load_openie_jsonl(p, progress=False, on_error="raise")
    assert rep2.skipped == 2


def test_openie_invalid_json(tmp_path):
    good = json.dumps({"passage_id": "a", "title": "A", "entities": ["B"], "triples": [["A", "r", "B"]]})
    other = json.dumps({"passage_id": "c", "title": "C", "entities": [], "triples": [["A", "r", "B"]]})
    p = _write(tmp_path / "bad.jsonl", f"{good}\n{{not json\n\n{other}\n[1, 2]\n")
    with pytest.raises(KGFormatError, match=r"bad\.jsonl:2: invalid JSON") as ei:
        load_kg(p, "openie", on_error="raise", progress=False)
    assert ei.value.line == 2 and ei.value.path.endswith("bad.jsonl")
    g, rep = load_kg(p, "openie", progress=False)
    assert rep.skipped == 2 and rep.lines == 5
    assert rep.skipped_examples[0].endswith("bad.jsonl:2: invalid JSON (Expecting property name enclosed in "
                                            "double quotes at column 2): '{not json'")  # fmt: skip
    assert "bad.jsonl:5: expected a JSON object" in rep.skipped_examples[1]
    assert g.num_triples == 1 and g.triple(0).source_ids == ["a", "c"]


# --------------------------------------------------------------------------- MetaQA malformed


def test_metaqa_bad_separator_raise_and_skip(tmp_path):
    good = [f"Film {i}|directed_by|Person {i}" for i in range(10)]
    p = _write(tmp_path / "kb.txt", "\n".join(good + ["Film X\tdirected_by\tPerson X", "A|b", "A||c"]) + "\n")
    with pytest.raises(KGFormatError) as ei:
        load_metaqa_kb(p, on_error="raise", progress=False)
    msg = str(ei.value)
    assert f"{p}:11:" in msg and "subject|relation|object" in msg and "tab-separated" in msg
    g, rep = load_metaqa_kb(p, progress=False)
    assert rep.skipped == 3 and rep.triples == 10 and g.num_entities == 20
    assert [x.split(": ")[0] for x in rep.skipped_examples] == [f"{p}:11", f"{p}:12", f"{p}:13"]
    assert "got 2 '|'-separated fields" in rep.skipped_examples[1]
    assert "an empty relation" in rep.skipped_examples[2]


def test_metaqa_mostly_bad_suggests_tsv(tmp_path):
    rows = [f"Film {i}\tdirected_by\tPerson {i}" for i in range(30)] + ["A|b|c"]
    p = _write(tmp_path / "triples.tsv", "\n".join(rows) + "\n")
    with pytest.raises(KGFormatError, match=r"does not look like a MetaQA kb\.txt.*did you mean format='tsv'"):
        load_kg(p, "metaqa", progress=False)  # skip mode still refuses
    g, rep = load_kg(p, "tsv", progress=False)
    assert rep.triples == 30 and rep.skipped == 1


def test_empty_files(tmp_path):
    for fmt in ("metaqa", "tsv", "openie", "wikidata5m"):
        p = _write(tmp_path / f"empty_{fmt}.txt", "")
        with pytest.raises(KGFormatError, match=rf"no triples in .*empty_{fmt}\.txt \(the file is empty\)"):
            load_kg(p, fmt, progress=False)
    p = _write(tmp_path / "blank.txt", "\n\n  \n")
    with pytest.raises(KGFormatError, match="no triples in"):
        load_kg(p, "metaqa", progress=False)


def test_missing_file_and_unknown_format(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        load_kg(tmp_path / "nope.txt", "metaqa")
    with pytest.raises(ValueError, match="unknown KG format 'rdf'"):
        load_kg(tmp_path, "rdf")
    with pytest.raises(ValueError, match="on_error"):
        load_kg(_write(tmp_path / "x.txt", "a|b|c\n"), "metaqa", on_error="ignore")
    assert FORMATS == ("metaqa", "tsv", "openie", "wikidata5m")


# --------------------------------------------------------------------------- TSV


def test_tsv_two_columns_and_headers(tmp_path):
    p = _write(tmp_path / "t.tsv", "head\trelation\ttail\nA\tr1\tB\nC\tr2\nB\tr1\tC\n")
    with pytest.raises(KGFormatError, match=r"t\.tsv:3: expected at least 3 tab-separated columns .* got 2"):
        load_triples_tsv(p, on_error="raise", progress=False)
    g, rep = load_triples_tsv(p, progress=False)
    assert rep.skipped == 1 and rep.triples == 2 and rep.lines == 4
    assert _out(g, "A") == {("B", "r1")}
    # no header: the first three columns; extra columns are ignored
    q = _write(tmp_path / "n.tsv", "A\tr1\tB\textra\nB\tr2\tC\n")
    g, rep = load_triples_tsv(q, progress=False)
    assert rep.triples == 2 and _out(g, "B") == {("C", "r2")}
    # explicit columns by index, header forced off
    g, _ = load_triples_tsv(q, columns=(2, 1, 0), header=False, progress=False)
    assert _out(g, "B") == {("A", "r1")}
    # header=True without recognisable names needs columns=
    with pytest.raises(KGFormatError, match="pass columns"):
        load_triples_tsv(q, header=True, progress=False)


def test_tsv_id_columns_and_aliases(tmp_path):
    text = (
        "subject\trelation\tobject\tsubject_wikidata\tobject_wikidata\n"
        "Paris\tcapital of\tFrance\tQ90\tQ142\n"
        "paris, France\tlocated in\tEurope\tQ90\t\n"
        "Paris\tfounded\t3rd century BC\tQ90\tdate_information\n"
        "France\tmember of\tEU\t\tQ458\n"
    )
    g, rep = load_triples_tsv(_write(tmp_path / "ids.tsv", text), progress=False)
    assert g.entity("Q90").name == "Paris" and g.entity("Q90").aliases == ["paris, France"]
    assert _out(g, "Q90") == {("Q142", "capital of"), ("Europe", "located in"), ("3rd century BC", "founded")}
    # "France" without an id on line 5 is the Q142 entity seen on line 2
    assert _out(g, "Q142") == {("Q458", "member of")} and "France" not in g
    assert g.entity("Q458").name == "EU" and rep.entities == 5


# --------------------------------------------------------------------------- Wikidata5M


def _w5m_small(d: Path, *, n_ent=300, n_trip=1000, seed=0, crlf=False):
    """A small Wikidata5M set written here; returns what was written for checking."""
    rng = random.Random(seed)
    qids = [f"Q{q}" for q in rng.sample(range(1, 100_000), n_ent)]
    names = {q: f"Entity {q[1:]}" for q in qids}
    aliases = {q: [f"alias {k} of {q}" for k in range(rng.randint(0, 3))] for q in qids}
    descs = {q: f"description of {q}: " + "x" * rng.randint(20, 60) for q in qids[::2]}
    pids = [f"P{p}" for p in rng.sample(range(1, 5000), 20)]
    rnames = {p: f"relation {p[1:]}" for p in pids}
    triples = [(rng.choice(qids[:50] + qids), rng.choice(pids), rng.choice(qids)) for _ in range(n_trip - 20)]
    triples += rng.sample(triples, 20)  # duplicates
    rng.shuffle(triples)
    nl = "\r\n" if crlf else "\n"
    files = {
        "entities": "".join(f"{q}\t{names[q]}" + "".join(f"\t{a}" for a in aliases[q]) + nl for q in qids),
        "relations": "".join(f"{p}\t{rnames[p]}\t{rnames[p]} alias{nl}" for p in pids),
        "triples": "".join(f"{h}\t{r}\t{t}{nl}" for h, r, t in triples),
        "descriptions": "".join(f"{q}\t{t}{nl}" for q, t in descs.items()),
    }
    paths = {k: _write(d / f"{k}.txt", v) for k, v in files.items()}
    return paths, qids, names, aliases, descs, rnames, triples


@pytest.mark.parametrize("chunk_bytes,dense", [(1 << 20, True), (1000, True), (1 << 20, False), (1000, False)])
def test_wikidata5m_small_set(tmp_path, monkeypatch, chunk_bytes, dense):
    import kgrag_plugins.index.importers.wikidata5m as load_mod

    # dense id -> row table vs np.searchsorted over the sorted ids
    monkeypatch.setattr(load_mod, "_DENSE_FACTOR", 10**6 if dense else -(10**6))
    paths, qids, names, aliases, descs, rnames, triples = _w5m_small(tmp_path, crlf=not dense)
    g, rep = load_wikidata5m(
        paths["entities"],
        paths["relations"],
        paths["triples"],
        paths["descriptions"],
        progress=False,
        chunk_bytes=chunk_bytes,
    )
    uniq = set(triples)
    assert (rep.lines, rep.triples, rep.duplicates, rep.skipped) == (1000, len(uniq), 1000 - len(uniq), 0)
    assert rep.entities == len(qids) == g.num_entities and rep.relations == 20
    expect = defaultdict(set)
    for h, r, t in uniq:
        expect[h].add((t, rnames[r]))
    for q in qids:
        e = g.entity(q)
        assert (e.name, e.aliases, e.description) == (names[q], aliases[q], descs.get(q, ""))
        assert _out(g, q) == expect[q]
    assert sorted(g.relations) == sorted(rnames.values())


def test_wikidata5m_unknown_entity_and_bad_lines(tmp_path):
    ent = _write(tmp_path / "e.txt", "Q1\tOne\nQ2\tTwo\tDeux\nQ3\tThree\n")
    rel = _write(tmp_path / "r.txt", "P31\tinstance of\tis a\n")
    tri = _write(tmp_path / "t.txt", "Q1\tP31\tQ2\nQ2\tP31\tQ99\nQ3\tP31\nQ3\tP31\tQ1\n\nQ3\tP7\tQ1\n")
    with pytest.raises(KGFormatError, match=r"t\.txt:2: unknown tail entity 'Q99'") as ei:
        load_wikidata5m(ent, rel, tri, on_error="raise", progress=False)
    assert ei.value.line == 2
    g, rep = load_wikidata5m(ent, rel, tri, progress=False)
    assert (rep.triples, rep.skipped, rep.lines) == (2, 3, 6)
    assert [x.split(": ")[0] for x in rep.skipped_examples] == [f"{tri}:2", f"{tri}:3", f"{tri}:6"]
    assert "expected 3 tab-separated fields" in rep.skipped_examples[1]
    assert "unknown relation 'P7'" in rep.skipped_examples[2]
    assert "Q99" not in g and g.entity("Q2").aliases == ["Deux"]
    assert _out(g, "Q3") == {("Q1", "instance of")}


def test_wikidata5m_irregular_entity_and_description_files(tmp_path):
    ent = tmp_path / "e.txt"
    ent.write_bytes(
        "\ufeffQ1\tOne\tUno\n\nQ2\tTwo\nQ1\tOne again\tUno\nX-7\tSeven\nX-7\tSieben\n\tno id\n".encode()
        + b"Q3\t\xff\xfe\nQ4\nQ5\tFive\t\tFive\tfive\n"
    )
    rel = _write(tmp_path / "r.txt", "P1\tlinks to\n")
    tri = _write(tmp_path / "t.txt", "Q1\tP1\tQ2\nX-7\tP1\tQ4\nQ5\tP1\tQ1\n")
    desc = _write(
        tmp_path / "d.txt",
        "Q1\tfirst\twith a tab\nQ1\tsecond (ignored)\nX-7\tseven desc\nQ999\tnot in the graph\n"
        f"Q5\t{'x' * 100}\ngarbage without a tab\n",
    )
    with pytest.raises(KGFormatError, match=r"e\.txt:7: empty id"):
        load_wikidata5m(ent, rel, tri, desc, on_error="raise", progress=False)
    g, rep = load_wikidata5m(ent, rel, tri, desc, progress=False, max_description_chars=50)
    assert g.entity_ids == ["Q1", "Q2", "X-7", "Q4", "Q5"]
    assert g.entity("Q1").aliases == ["Uno", "One again"] and g.entity("X-7").aliases == ["Sieben"]
    assert g.entity("Q4").name == "Q4" and g.entity("Q5").aliases == ["five"]
    assert g.entity("Q1").description == "first\twith a tab" and g.entity("X-7").description == "seven desc"
    assert g.entity("Q5").description == "x" * 50 and g.entity("Q2").description == ""
    assert rep.skipped == 3 and rep.triples == 3
    assert [x.split(": ")[0] for x in rep.skipped_examples] == [f"{ent}:7", f"{ent}:8", f"{desc}:6"]
    assert _out(g, "X-7") == {("Q4", "links to")}


def test_wikidata5m_without_entity_file_and_odd_ids(tmp_path):
    tri = _write(tmp_path / "t.txt.gz", "")
    with gzip.open(tri, "wt", encoding="utf-8") as f:
        f.write("Q10\tP1\tQ20\r\nQ007\tP1\tQ10\nwd:Q5\tP2\tQ20\nQ20\tP1\tQ10\nQ10\tP1\tQ20\n")
    g, rep = load_kg(tri, "wikidata5m", progress=False)
    assert sorted(g.entity_ids) == ["Q007", "Q10", "Q20", "wd:Q5"]
    assert g.entity("Q10").name == "Q10" and sorted(g.relations) == ["P1", "P2"]
    assert _out(g, "Q10") == {("Q20", "P1")} and _out(g, "Q007") == {("Q10", "P1")}
    assert _out(g, "wd:Q5") == {("Q20", "P2")}
    assert (rep.triples, rep.duplicates, rep.skipped) == (4, 1, 0)


def test_wikidata5m_directory_and_generator(tmp_path):
    bench = _bench()
    man = bench.generate(tmp_path, n_entities=3000, n_relations=50, n_triples=20_000, seed=3)
    assert set(man["bytes"]) == {bench.ENTITY_FILE, bench.RELATION_FILE, bench.TRIPLE_FILE, bench.TEXT_FILE}
    g, rep = load_kg(tmp_path, "wikidata5m", progress=False)
    assert isinstance(rep, LoadReport) and rep.to_dict()["format"] == "wikidata5m"
    assert (rep.entities, rep.relations, rep.lines) == (3000, 50, 20_000)
    assert rep.triples == man["n_unique_triples"] and rep.duplicates == 20_000 - man["n_unique_triples"] > 0
    assert rep.skipped == 0
    first = (tmp_path / bench.ENTITY_FILE).read_text(encoding="utf-8").splitlines()[0].split("\t")
    e = g.entity(first[0])
    assert e.name == first[1] and e.aliases == first[2:]
    assert 40 <= len(e.description) <= 80
    deg = np.diff(g.adjacency("in").indptr)
    assert deg.max() > 20 * max(1.0, float(np.median(deg)))  # power-law-ish: hubs


# --------------------------------------------------------------------------- scale (slow)


@pytest.mark.slow
def test_wikidata5m_full_scale(tmp_path):
    """The 21M-triple / 4.6M-entity synthetic release loads in < 8 GB peak RSS (takes minutes)."""
    out, files = tmp_path / "result.json", tmp_path / "w5m"
    try:  # the ~1.2 GB of synthetic files go under tmp_path (not /tmp/kgrag_w5m) and are removed after
        subprocess.run([sys.executable, str(BENCH), "--out-dir", str(files), "--json", str(out)], check=True)
    finally:
        shutil.rmtree(files, ignore_errors=True)
    res = json.loads(out.read_text())
    print(json.dumps({k: v for k, v in res.items() if k != "report"}, indent=1))
    assert res["n_entities"] == 4_600_000 and res["n_triples"] == 21_000_000
    assert res["graph"]["entities"] == res["n_entities"]
    assert res["graph"]["triples"] == res["n_unique_triples"]
    assert res["report"]["duplicates"] == res["n_triples"] - res["n_unique_triples"]
    assert res["report"]["skipped"] == 0
    assert res["peak_rss_mb"] < 8000
