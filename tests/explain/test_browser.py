"""The explain HTML in a real browser (issue 17 item 7): headless Chromium (Debian's ``chromium``
package; ``make browser`` installs it) driven by Playwright pointed at the system binary (no browser
download). Each view (an entity's neighbourhood, the activated subgraph, KG-Translator's clues: the
files ``kgrag show-graph`` and ``kgrag ask --draw x.html`` write) must load with no console error and
show every node label: rendered text with a non-empty box inside the drawing, not hidden."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

#: where the Debian / Ubuntu packages put the real binary (``/usr/bin/chromium`` is a shell wrapper)
_CANDIDATES = ("/usr/lib/chromium/chromium", "/usr/lib/chromium-browser/chromium-browser")


def chromium_path() -> str | None:
    """``KGRAG_CHROMIUM`` if set, else the system Chromium (``None`` when there is none)."""
    if os.environ.get("KGRAG_CHROMIUM"):
        return os.environ["KGRAG_CHROMIUM"]
    for path in _CANDIDATES:
        if os.access(path, os.X_OK):
            return path
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    exe = chromium_path()
    assert exe, "no Chromium found: run `make browser` (apt-get install chromium) or set KGRAG_CHROMIUM"
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, headless=True, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


def render(browser, path: Path) -> dict:
    """Open ``path``; return console messages, page errors and every node label's box."""
    page = browser.new_page(viewport={"width": 1600, "height": 1400})
    messages: list[tuple[str, str]] = []
    page.on("console", lambda m: messages.append((m.type, m.text)))
    page.on("pageerror", lambda e: messages.append(("pageerror", str(e))))
    try:
        page.goto(path.resolve().as_uri(), wait_until="load")
        labels = page.eval_on_selector_all(
            "svg g.node text",
            """els => els.map(e => {
                const r = e.getBoundingClientRect(), s = getComputedStyle(e);
                const svg = e.ownerSVGElement.getBoundingClientRect();
                return {text: e.textContent, w: r.width, h: r.height, visibility: s.visibility,
                        display: s.display, opacity: Number(s.opacity), fill: s.fill,
                        inside: r.left >= svg.left - 1 && r.right <= svg.right + 1
                                && r.top >= svg.top - 1 && r.bottom <= svg.bottom + 1};
            })""",
        )
        title = page.title()
        heading = page.inner_text("h1")
    finally:
        page.close()
    return {"messages": messages, "labels": labels, "title": title, "heading": heading}


def assert_readable(result: dict, expected_names: list[str]) -> None:
    errors = [m for m in result["messages"] if m[0] in ("error", "pageerror", "warning")]
    assert not errors, errors
    assert result["title"] and result["heading"]
    labels = result["labels"]
    assert labels, "no node labels in the picture"
    for lab in labels:
        assert lab["text"].strip(), lab
        assert lab["w"] > 1 and lab["h"] > 1, lab
        assert lab["visibility"] == "visible" and lab["display"] != "none" and lab["opacity"] > 0.5, lab
        assert lab["fill"] not in ("none", "rgba(0, 0, 0, 0)"), lab
        assert lab["inside"], f"label drawn outside the picture: {lab}"
    shown = {lab["text"] for lab in labels}
    for name in expected_names:
        assert any(s == name or (s.endswith("…") and name.startswith(s[:-1])) for s in shown), (name, shown)


def test_neighbourhood_html(browser, sample_mentions_index, tmp_path):
    from kgrag_plugins.explain import draw_neighbourhood

    out = tmp_path / "curie.html"
    info = draw_neighbourhood(sample_mentions_index.graph, "Marie Curie", out, hops=1, max_nodes=25)
    result = render(browser, out)
    assert len(result["labels"]) == info["nodes"]
    assert_readable(result, ["Marie Curie"])


def test_activated_subgraph_html(browser, sample_mentions_index, tmp_path):
    from kgrag_plugins.explain import draw_trace
    from kgrag_plugins.methods.activation import ActivationRetriever

    ev = ActivationRetriever(sample_mentions_index).retrieve(
        "Which river flows through the city where Marie Curie was born?", k=5
    )
    out = tmp_path / "activation.html"
    info = draw_trace(sample_mentions_index, ev.trace, out, max_nodes=30)  # what `kgrag ask --draw` writes
    result = render(browser, out)
    assert len(result["labels"]) == info["nodes"] > 1
    assert_readable(result, info["seeds"])


def test_translator_clues_html(browser, sample_corpus, sample_mentions_index, tmp_path):
    from kgrag_plugins.explain import draw_trace
    from kgrag_plugins.index.store import KnowledgeIndex
    from kgrag_plugins.methods.translator import TranslatorRetriever

    passages = sample_corpus[:12]
    index = KnowledgeIndex.build(
        passages, tmp_path / "index", builder="parsekg", embedder=sample_mentions_index.embedder, progress=False
    )
    try:
        ev = TranslatorRetriever(index).retrieve("Which river flows through the city where Marie Curie was born?", k=5)
        assert ev.trace.get("clues"), "the translator found no clue to draw"
        out = tmp_path / "clues.html"
        info = draw_trace(index, ev.trace, out)
        result = render(browser, out)
        assert len(result["labels"]) == info["nodes"]
        assert_readable(result, info["entities"])
    finally:
        index.close()


def test_a_broken_page_is_caught(browser, tmp_path):
    """The checks can fail: a script error, a hidden label and a label outside the drawing."""
    page = tmp_path / "broken.html"
    page.write_text(
        "<!DOCTYPE html><html><head><title>t</title></head><body><h1>h</h1>"
        '<svg width="200" height="100"><g class="node"><text x="10" y="20">Shown</text></g>'
        '<g class="node"><text x="10" y="40" style="visibility:hidden">Hidden</text></g>'
        '<g class="node"><text x="900" y="60">Outside</text></g></svg>'
        "<script>undefinedFunction()</script></body></html>",
        encoding="utf-8",
    )
    result = render(browser, page)
    assert any(kind == "pageerror" for kind, _ in result["messages"])
    with pytest.raises(AssertionError):
        assert_readable(result, ["Shown"])
    result["messages"] = []
    by_text = {lab["text"]: lab for lab in result["labels"]}
    assert by_text["Shown"]["inside"] and by_text["Shown"]["visibility"] == "visible"
    assert by_text["Hidden"]["visibility"] == "hidden"
    assert not by_text["Outside"]["inside"]


def test_frag_paths_html(browser, sample_mentions_index, tmp_path):
    from kgrag_plugins.explain import draw_paths
    from kgrag_plugins.methods.frag import FRAGRetriever

    ev = FRAGRetriever(sample_mentions_index).retrieve(
        "Which river flows through the city where Marie Curie was born?", k=5
    )
    out = tmp_path / "paths.html"
    info = draw_paths(ev.facts, out, graph=sample_mentions_index.graph, max_paths=6)
    assert info["paths"] >= 1 and info["answers"]
    result = render(browser, out)
    assert len(result["labels"]) == info["nodes"]
    assert_readable(result, ["Marie Curie", *info["answers"][:2]])


def test_verifier_scores_html(browser, tmp_path):
    from kgrag_plugins.explain import draw_verification

    check = {  # the shape of KGVerifier.check / the verifier node's "verification"
        "score": 0.06,
        "threshold": 0.17,
        "decision": "accept",
        "source": "generation",
        "triples": [
            {"head": "marie curie", "relation": "was born in", "tail": "warsaw", "score": 0.0},
            {"head": "warsaw", "relation": "lies on", "tail": "vistula", "score": 0.12},
            {"head": "warsaw", "relation": "capital of", "tail": "poland", "score": None},
        ],
    }
    out = tmp_path / "verifier.html"
    info = draw_verification(check, out)
    assert (info["nodes"], info["edges"], info["decision"]) == (4, 3, "accept")
    result = render(browser, out)
    assert "score 0.060 vs θ 0.170 -> accept" in result["heading"]
    assert_readable(result, ["marie curie", "warsaw", "vistula", "poland"])
    html = out.read_text(encoding="utf-8")
    assert "lies on · 0.12" in html and "capital of · unscored" in html
