"""Documentation links: the method reference is docs/methods.md, and the docs' relative links resolve.

(a) No file of the repository cites the team's internal method notes (the upper-case notes file,
    which users never have); code and docs cite ``docs/methods.md`` instead.
(b) Every relative Markdown link ``](path)`` / ``](path#anchor)`` in README.md, docs/*.md and the
    notebooks' Markdown cells points at an existing file, and an anchor into a Markdown file names
    one of its headings (GitHub's heading slugs). http(s), mailto and pure ``#anchor`` links are
    not checked.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from pathlib import Path
from urllib.parse import unquote

import pytest

REPO = Path(__file__).resolve().parents[1]

#: The internal notes' file name, and the "NOTES §3(b)" / "NOTES 4(d)" citation forms (the name is
#: split so that this file does not match itself).
INTERNAL = re.compile(rb"METHODS" + rb"(?:\.md|\s*(?:\xc2\xa7|\\u00a7)|\s+\d\()")

#: Directories that are not the project's own files (virtual environments, caches, build output).
SKIP_DIRS = {
    ".git",
    ".hypothesis",
    ".pytest_cache",
    ".ruff_cache",
    ".mypy_cache",
    ".kgrag_cache",
    ".langgraph_api",
    ".ipynb_checkpoints",
    "__pycache__",
    "node_modules",
    "bench_out",
    "build",
    "dist",
}


def _skipped(name: str) -> bool:
    return name in SKIP_DIRS or name.startswith(".venv") or name.endswith(".egg-info")


def _project_files():
    for root, dirs, files in os.walk(REPO):
        dirs[:] = sorted(d for d in dirs if not _skipped(d))
        for name in sorted(files):
            yield Path(root) / name


def test_no_file_cites_the_internal_method_notes():
    hits = []
    for path in _project_files():
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if b"\0" in data[:8192]:  # binary
            continue
        for lineno, line in enumerate(data.splitlines(), 1):
            if INTERNAL.search(line):
                hits.append(f"{path.relative_to(REPO)}:{lineno}")
    assert not hits, "cite docs/methods.md instead of the internal notes:\n" + "\n".join(hits)


# --------------------------------------------------------------------------- links and anchors

_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"(`+).*?\1")
_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.I)
_MD_LINK_TEXT = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")


def _prose_lines(text: str):
    """(line number, line) outside fenced code blocks, with inline code spans removed."""
    fenced = False
    for lineno, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield lineno, _CODE_SPAN.sub("", line)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: the rendered text lower-cased, punctuation and symbols
    dropped (letters, marks, digits, ``-``, ``_`` and spaces kept), spaces turned into ``-``."""
    text = _MD_LINK_TEXT.sub(r"\1", heading).replace("`", "").replace("*", "")
    kept = []
    for ch in text.lower():
        cat = unicodedata.category(ch)
        if ch in " -_" or cat[0] in "LM" or cat in ("Nd", "Nl"):
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file (repeated headings get ``-1``, ``-2``, ...), plus
    explicit ``<a name=...>`` / ``<a id=...>`` anchors."""
    found: set[str] = set()
    counts: dict[str, int] = {}
    text = path.read_text(encoding="utf-8")
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        found.update(_HTML_ANCHOR.findall(line))
        m = _HEADING.match(line)
        if m:
            base = slug(m.group(2))
            n = counts.get(base, 0)
            counts[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def broken_links(md: Path, text: str | None = None) -> list[str]:
    """``file:line: target (reason)`` for each relative link of ``md`` (or of ``text``, read as
    if it were that file) that does not resolve."""
    out = []
    text = md.read_text(encoding="utf-8") if text is None else text
    for lineno, line in _prose_lines(text):
        for m in _LINK.finditer(line):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
                continue  # http(s), mailto, ...; anchors inside the same page
            path_part, _, anchor = target.partition("#")
            resolved = (md.parent / unquote(path_part)).resolve()
            where = f"{md.relative_to(REPO)}:{lineno}: {target}"
            if not resolved.exists():
                out.append(f"{where} (no such file)")
            elif anchor and resolved.suffix == ".md" and unquote(anchor).lower() not in anchors(resolved):
                out.append(f"{where} (no heading with that anchor)")
    return out


DOC_PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


@pytest.mark.parametrize("md", DOC_PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(md: Path):
    broken = broken_links(md)
    assert not broken, "broken relative links:\n" + "\n".join(broken)


@pytest.mark.parametrize(
    "notebook", sorted((REPO / "notebooks").glob("*.ipynb")), ids=lambda p: str(p.relative_to(REPO))
)
def test_notebook_links_resolve(notebook: Path):
    """The same check over the notebooks' Markdown cells (line numbers count within the cells)."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    broken = broken_links(notebook, text)
    assert not broken, "broken relative links:\n" + "\n".join(broken)


def test_the_method_reference_covers_every_method():
    heads = anchors(REPO / "docs" / "methods.md")
    for anchor in (
        "1-kg-infused-rag",
        "2-frag",
        "3-kg-translator",
        "4-sa-rag",
        "5-know3-rag",
        "6-agents-and-plug-in-insertion-points",
        "10-the-activation-retriever-ours",
    ):
        assert anchor in heads, anchor


def test_slug_follows_github():
    assert slug("1(a) Pipeline") == "1a-pipeline"
    assert slug("6.1 Self-Ask with and without KG-Infused RAG") == "61-self-ask-with-and-without-kg-infused-rag"
    assert slug("Hop labels: h_min or the dataset's hop count") == "hop-labels-h_min-or-the-datasets-hop-count"
    assert slug("`activation`: the recommended retriever") == "activation-the-recommended-retriever"
    assert slug("Know³ verifier") == "know-verifier"
