"""The int8 recipe of :class:`~kgrag_plugins.models.embed_onnx.OnnxEmbedder`: outlier channels kept in fp32.

Dynamic int8 quantisation scales each matmul's input with one range for the whole tensor. BERT's
hidden states carry a few *outlier channels* (in MiniLM one or two per LayerNorm and GELU output,
up to 17x the median channel's largest value), so that one range leaves the ordinary channels a
few int8 levels each. That was the first recipe's error (``int8-v1``: mean cosine 0.993 to torch MiniLM
on 1,000 MuSiQue titles, 0.995 on 300 passages), and activation's MuSiQue R@5 lost 1.33 points to it.

Recipe ``int8`` (v2), after ORT's BERT fusions:

1. **Calibrate** once on the bundled sample corpus (titles and passages, no benchmark data): run the
   fp32 graph and record each linear layer input's largest absolute value per channel.
2. **Split** every linear layer ``y = x W`` into ``(x * mask) W + x[:, idx] W[idx]``, where ``idx``
   are the input's :data:`OUTLIER_CHANNELS` largest channels and ``mask`` zeroes them. The small
   second matmul stays fp32; layers sharing an input (query, key, value) share the mask and gather.
3. **Quantise** the main matmuls with ``quantize_dynamic`` (per-channel int8 weights, as before), now
   on inputs without their outliers. The word-embedding table stays fp32 (a lookup: it costs no
   time, and quantising it was the other measurable error).

Mean cosine to torch MiniLM 0.9993 / 0.9991 (1,000 MuSiQue titles / 300 passages) at about 9 %
more CPU time than ``int8-v1``; measured recall and speed in docs/embeddings.md.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

import numpy as np

#: Input channels per linear layer computed in fp32 (the largest by calibrated magnitude).
OUTLIER_CHANNELS = 2


def calibration_texts() -> list[str]:
    """The bundled sample corpus's titles and ``title\\ntext`` passages (what calibration runs on)."""
    from importlib import resources

    texts: list[str] = []
    raw = (resources.files("kgrag_plugins") / "data" / "sample_corpus.jsonl").read_text(encoding="utf-8")
    for line in raw.splitlines():
        if line.strip():
            row = json.loads(line)
            texts += [row["title"], f"{row['title']}\n{row['text']}"]
    return texts


def _linear_nodes(model: Any) -> list[Any]:
    """MatMul nodes whose second input is a weight (an initializer): the linear layers."""
    weights = {i.name for i in model.graph.initializer}
    return [n for n in model.graph.node if n.op_type == "MatMul" and n.input[1] in weights]


def channel_absmax(
    model_file: Path, encode: Callable[[str], dict[str, np.ndarray]], texts: list[str]
) -> dict[str, np.ndarray]:
    """Largest ``|x|`` per channel of every linear layer's input ``x`` over ``texts`` (fp32 run)."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    model = onnx.load(str(model_file))
    inputs = sorted({n.input[0] for n in _linear_nodes(model)})
    for name in inputs:
        model.graph.output.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds_ok = {i.name for i in session.get_inputs()}
    out: dict[str, np.ndarray] = {}
    for text in texts:
        feeds = {k: v for k, v in encode(text).items() if k in feeds_ok}
        for name, x in zip(inputs, session.run(inputs, feeds)):
            m = np.abs(x).reshape(-1, x.shape[-1]).max(0)
            out[name] = m if name not in out else np.maximum(out[name], m)
    return out


def split_outliers(src: Path, dst: Path, absmax: dict[str, np.ndarray], k: int = OUTLIER_CHANNELS) -> list[str]:
    """Write ``src`` with every linear layer split into a masked main matmul and an fp32 matmul over
    the input's ``k`` outlier channels (step 2 above); returns the outlier matmuls' names (the ones
    ``quantize_dynamic`` must leave alone)."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(src))
    weights = {i.name: i for i in model.graph.initializer}
    by_input: dict[str, list[Any]] = defaultdict(list)
    for node in _linear_nodes(model):
        by_input[node.input[0]].append(node)
    first = {group[0].name: (x, group) for x, group in by_input.items()}
    replaced = {n.name for group in by_input.values() for n in group}
    nodes, fp32_nodes, new_inits = [], [], []
    for node in model.graph.node:
        if node.name in first:
            x, group = first[node.name]
            p = x.replace("/", "_")
            idx = np.sort(np.argsort(-absmax[x], kind="stable")[:k]).astype(np.int64)
            mask = np.ones(absmax[x].shape[0], np.float32)
            mask[idx] = 0.0
            new_inits += [numpy_helper.from_array(mask, p + "_mask"), numpy_helper.from_array(idx, p + "_idx")]
            nodes += [
                helper.make_node("Mul", [x, p + "_mask"], [p + "_xn"], name=p + "_mask_mul"),
                helper.make_node("Gather", [x, p + "_idx"], [p + "_xo"], axis=-1, name=p + "_outlier_gather"),
            ]
            for lin in group:
                q = lin.name.replace("/", "_")
                w = numpy_helper.to_array(weights[lin.input[1]]).astype(np.float32)
                new_inits += [
                    numpy_helper.from_array(w * mask[:, None], q + "_wn"),
                    numpy_helper.from_array(w[idx], q + "_wo"),
                ]
                nodes += [
                    helper.make_node("MatMul", [p + "_xn", q + "_wn"], [q + "_yn"], name=q + "_main"),
                    helper.make_node("MatMul", [p + "_xo", q + "_wo"], [q + "_yo"], name=q + "_outliers"),
                    helper.make_node("Add", [q + "_yn", q + "_yo"], list(lin.output), name=q + "_sum"),
                ]
                fp32_nodes.append(q + "_outliers")
        elif node.name not in replaced:
            nodes.append(node)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    model.graph.initializer.extend(new_inits)
    used = {i for n in model.graph.node for i in n.input}
    keep = [i for i in model.graph.initializer if i.name in used]
    del model.graph.initializer[:]
    model.graph.initializer.extend(keep)
    onnx.save(model, str(dst))
    return fp32_nodes


def dynamic_int8(src: Path, out: Path, **options: Any) -> None:
    """``quantize_dynamic`` with per-channel int8 weights, the step both recipes share (``int8-v1``
    calls it on the fused graph alone; ``options`` narrow what is quantised)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(
        str(src),
        str(out),
        weight_type=QuantType.QInt8,
        per_channel=True,
        extra_options={"DefaultTensorType": 1},  # FLOAT: fused ops defeat shape inference
        **options,
    )


def quantize_outlier_aware(fused: Path, out: Path, encode: Callable[[str], dict[str, np.ndarray]]) -> None:
    """Steps 1-3 above: ``fused`` (an ORT-fused fp32 BERT) -> ``out`` (recipe ``int8``)."""
    absmax = channel_absmax(fused, encode, calibration_texts())
    split = out.with_name(out.stem + "-split.onnx")
    try:
        keep_fp32 = split_outliers(fused, split, absmax)
        # not the embedding table's Gather; not the outlier matmuls
        dynamic_int8(split, out, op_types_to_quantize=["MatMul"], nodes_to_exclude=keep_fp32)
    finally:
        split.unlink(missing_ok=True)
