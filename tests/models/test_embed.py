"""Embedders: the bundled MiniLM (real model, offline) and the OpenAI-compatible endpoint."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from kgrag_plugins.models.embed import (
    Embedder,
    OpenAICompatibleEmbedder,
    default_embedder,
    embedder_for_name,
    resolve_embedder,
    torch_embedder,
)


def test_minilm_vectors_are_normalised_and_meaningful():
    emb = default_embedder()
    assert isinstance(emb, Embedder) and emb.dim == 384
    v = emb.embed(["The cat sits on the mat.", "A feline rests on a rug.", "Stock markets fell sharply."])
    assert v.dtype == np.float32 and v.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.3
    assert emb.embed([]).shape == (0, 384)
    assert default_embedder() is emb  # loaded once per process


@pytest.mark.parametrize("choice", ["torch", "onnx-int8"])
def test_a_texts_vector_does_not_depend_on_its_batch(choice):
    """Each text's vector is a function of the text alone: the same embedded alone, in a batch of
    others, in another order, or with another batch size (what a later add, a cached vector and a
    query rely on). ONNX int8 keeps this by embedding one text per pass (dynamic quantisation
    scales a batch's activations together)."""
    emb = resolve_embedder(choice)
    texts = [f"sentence number {i} about rivers and cities" + " and lakes" * i for i in range(10)]
    together = emb.embed(texts)
    alone = np.concatenate([emb.embed([t]) for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    np.testing.assert_allclose(emb.embed(texts[::-1])[::-1], together, atol=1e-5)
    if choice == "torch":  # torch pads a batch without changing its texts' vectors
        old = emb.batch_size
        try:
            emb.batch_size = 3
            np.testing.assert_allclose(emb.embed(texts), together, atol=1e-5)
        finally:
            emb.batch_size = old


def test_default_is_onnx_int8_and_choices_resolve(monkeypatch):
    """New indexes default to MiniLM on ONNX Runtime int8 (onnxruntime is a core dependency);
    ``KGRAG_EMBEDDER`` / ``resolve_embedder`` choose explicitly, and a manifest name maps back."""
    monkeypatch.delenv("KGRAG_EMBEDDER", raising=False)
    emb = default_embedder()
    assert emb.name == "sentence-transformers/all-MiniLM-L6-v2+onnx-int8-v2"
    monkeypatch.setenv("KGRAG_EMBEDDER", "torch")
    assert default_embedder().name == "sentence-transformers/all-MiniLM-L6-v2"
    for choice in ("torch", "onnx", "onnx-int8", "onnx-int8-v1"):
        e = resolve_embedder(choice)
        assert embedder_for_name(e.name) is e
    assert embedder_for_name("my-remote-embedder") is None
    monkeypatch.setenv("KGRAG_EMBEDDER", "gpu-magic")
    choices = "auto, torch, onnx, onnx-int8, onnx-int8-v1"
    with pytest.raises(ValueError, match=f"KGRAG_EMBEDDER='gpu-magic' is not one of {choices}"):
        default_embedder()


class _EmbedHandler(BaseHTTPRequestHandler):
    calls: list = []

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).calls.append(body)
        if body["input"] == ["boom"]:
            self.send_response(500)
            self.end_headers()
            return
        # vector = [len(text), 1, 0]; returned in reverse order to test index sorting
        data = [{"index": i, "embedding": [float(len(t)), 1.0, 0.0]} for i, t in enumerate(body["input"])]
        out = json.dumps({"data": data[::-1]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


def test_openai_compatible_embedder():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _EmbedHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
        emb = OpenAICompatibleEmbedder(url, "tiny-embed", batch_size=2)
        assert emb.dim == 3  # probed with one request
        v = emb.embed(["ab", "abcd", "a"])
        expected = np.array([[2, 1, 0], [4, 1, 0], [1, 1, 0]], dtype=np.float32)
        expected /= np.linalg.norm(expected, axis=1, keepdims=True)
        np.testing.assert_allclose(v, expected, atol=1e-6)
        assert [c["input"] for c in _EmbedHandler.calls[1:]] == [["ab", "abcd"], ["a"]]
        assert all(c["model"] == "tiny-embed" for c in _EmbedHandler.calls)
        with pytest.raises(RuntimeError, match="HTTP 500"):
            emb.embed(["boom"])
    finally:
        srv.shutdown()
        srv.server_close()


def test_openai_compatible_embedder_needs_config(monkeypatch):
    monkeypatch.delenv("KGRAG_EMBED_BASE_URL", raising=False)
    monkeypatch.delenv("KGRAG_EMBED_MODEL", raising=False)
    with pytest.raises(ValueError, match="KGRAG_EMBED_BASE_URL"):
        OpenAICompatibleEmbedder()


def test_small_input_fast_path_gives_encode_vectors():
    emb = torch_embedder()
    texts = ["Where was Marie Curie born?", "a much longer query about the river that flows through Warsaw"]
    fast = emb.embed(texts)  # <= 8 texts: direct forward pass
    ref = emb._model.encode(texts, convert_to_numpy=True, normalize_embeddings=True)
    np.testing.assert_allclose(fast, ref, atol=1e-5)
    many = emb.embed(texts * 5)  # > 8 texts: the batched encode path
    np.testing.assert_allclose(many[:2], fast, atol=1e-5)
