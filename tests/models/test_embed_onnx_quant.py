"""The outlier-aware int8 recipe (models/embed_onnx_quant.py) on a tiny two-layer graph."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from conftest import require_extra

require_extra("onnxruntime", "onnx")
require_extra("onnx", "onnx")

import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from kgrag_plugins.models import embed_onnx_quant as q  # noqa: E402

K, OUTLIER = 16, 5


def _graph(path):
    """x[1, L, 16] -> two linear layers sharing x (like query and key), then a third on their sum."""
    rng = np.random.default_rng(0)
    w1, w2, w3 = (rng.normal(size=s).astype(np.float32) for s in ((K, 8), (K, 8), (8, 4)))
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["y1"], name="lin1"),
        helper.make_node("MatMul", ["x", "w2"], ["y2"], name="lin2"),
        helper.make_node("Add", ["y1", "y2"], ["h"], name="add"),
        helper.make_node("MatMul", ["h", "w3"], ["y"], name="lin3"),
    ]
    g = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, None, K])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, n) for w, n in ((w1, "w1"), (w2, "w2"), (w3, "w3"))],
    )
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def _x(text: str) -> np.ndarray:
    """Activations with one outlier channel (50x the others), seeded by the text."""
    rng = np.random.default_rng(zlib.crc32(text.encode()))
    x = rng.normal(size=(1, 6, K)).astype(np.float32)
    x[..., OUTLIER] *= 50
    return x


def _run(path, x):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


@pytest.fixture()
def tiny(tmp_path):
    _graph(tmp_path / "tiny.onnx")
    return tmp_path / "tiny.onnx"


def test_calibration_finds_the_outlier_channel(tiny):
    absmax = q.channel_absmax(tiny, lambda t: {"x": _x(t), "unused": np.zeros(1)}, ["a", "b", "c"])
    assert set(absmax) == {"x", "h"}  # the inputs of the three linear layers
    assert int(np.argmax(absmax["x"])) == OUTLIER
    expect = np.max([np.abs(_x(t)).reshape(-1, K).max(0) for t in "abc"], axis=0)
    np.testing.assert_allclose(absmax["x"], expect, rtol=1e-6)


def test_split_is_exact_in_fp32_and_shares_the_mask(tiny, tmp_path):
    absmax = q.channel_absmax(tiny, lambda t: {"x": _x(t)}, ["a", "b"])
    out = tmp_path / "split.onnx"
    fp32_nodes = q.split_outliers(tiny, out, absmax, k=2)
    assert len(fp32_nodes) == 3  # one small fp32 matmul per linear layer
    m = onnx.load(str(out))
    ops = [n.op_type for n in m.graph.node]
    assert ops.count("Gather") == 2 and ops.count("Mul") == 2  # x's mask and gather serve lin1 and lin2
    idx = next(numpy_helper.to_array(i) for i in m.graph.initializer if i.name == "x_idx")
    assert OUTLIER in idx.tolist() and len(idx) == 2
    x = _x("new text")
    np.testing.assert_allclose(_run(out, x), _run(tiny, x), rtol=1e-4, atol=1e-4)


def test_outlier_recipe_beats_plain_dynamic_int8(tiny, tmp_path, monkeypatch):
    from onnxruntime.quantization import QuantType, quantize_dynamic

    monkeypatch.setattr(q, "calibration_texts", lambda: [f"t{i}" for i in range(8)])
    q.quantize_outlier_aware(tiny, tmp_path / "v2.onnx", lambda t: {"x": _x(t)})
    assert not (tmp_path / "v2-split.onnx").exists()  # the intermediate file is removed
    quantize_dynamic(str(tiny), str(tmp_path / "v1.onnx"), weight_type=QuantType.QInt8, per_channel=True)
    xs = [_x(f"held-out {i}") for i in range(5)]
    err = {
        name: np.mean([np.abs(_run(tmp_path / f"{name}.onnx", x) - _run(tiny, x)).mean() for x in xs])
        for name in ("v1", "v2")
    }
    assert err["v2"] * 3 < err["v1"], err
    ops = {n.op_type for n in onnx.load(str(tmp_path / "v2.onnx")).graph.node}
    assert "MatMulInteger" in ops and "MatMul" in ops  # int8 main matmuls, fp32 outlier ones


def test_calibration_texts_are_the_bundled_sample():
    texts = q.calibration_texts()
    assert len(texts) >= 100 and "Marie Curie" in texts
    assert any(t.startswith("Marie Curie\n") for t in texts)
