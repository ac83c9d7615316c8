"""KG-Translator's clue translation on vLLM (paper §3.3, App. J Alg. 1; docs/methods.md §3(a) steps
3-4, §7), and the automatic choice of a translation backend.

* :func:`export_constraints` writes the self-contained constraint file that the vLLM logits
  processor (:mod:`kgrag_plugins.models.vllm_logits`) reads in the vLLM process (token ids of the
  entity names and of each entity's hyperrelations, plus the texts for validation here).
* :class:`VLLMConstrainedBackend` -- a :class:`~.decoding.TranslationBackend` over a vLLM server
  (``/v1/completions`` through our :class:`~kgrag_plugins.models.llm.OpenAICompatibleLLM`'s retry
  plan) or an offline :class:`~kgrag_plugins.models.vllm.VLLMEngine`. ``mode="processor"`` sends
  ``vllm_xargs`` (``kgrag_index`` / ``kgrag_stage`` / ``kgrag_entity`` / ``kgrag_direction``) so
  the processor masks the logits: every output is valid by construction.
  ``mode="structured"`` (the processor is not loaded) uses vLLM structured outputs: ``choice``
  over the entity names, then after ``ENTITY@@`` a ``regex`` over the word windows of that
  entity's hyperrelations. ``mode="none"`` decodes unconstrained (for comparison). Outputs that
  are not a head entity / a substring of its hyperrelations are dropped by :meth:`entities` /
  :meth:`relations`; ``*_candidates`` return them unfiltered.
* :func:`choose_backend` -- HF constrained for a local transformers model, vLLM + processor when the
  server / engine has it, vLLM structured outputs for other vLLM servers, else unconstrained
  decoding + projection (:class:`~.decoding.ProjectionBackend`).

Decision (docs/methods.md §7; docs/vllm.md): vLLM V1's beam search runs in the API server
one token per request with the beam in the prompt, which a per-request logits processor cannot
follow, so the alpha / beta candidates come from ``n`` samples (``temperature`` 1) ranked
by their cumulative log-probability (before masking), deduplicated, best ``alpha`` / ``beta`` kept.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import logging
import re
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from ...models.llm import LLMError, LLMResponseError, _RetryableFailure
from ...models.messages import snippet
from ...models.usage import llm_call
from ...models.vllm_logits import FORMAT, FQCN, VERSION, TranslatorConstraints
from .constraints import RELATION_PREFIX, SEPARATOR, ConstraintIndex, Direction
from .decoding import ProjectionBackend, clue_prompt

logger = logging.getLogger(__name__)

__all__ = ["VLLMConstrainedBackend", "choose_backend", "export_constraints", "processor_loaded"]

_MODES = ("processor", "structured", "none")


def export_constraints(
    constraints: ConstraintIndex,
    path: str | Path | None = None,
    *,
    directions: Sequence[Direction] = ("forward", "reverse"),
) -> Path:
    """Write the constraint file of ``constraints`` (format ``kgrag-translator-constraints`` v1, see
    :mod:`kgrag_plugins.models.vllm_logits`) and return its path. Default path: a content-hashed
    file under ``<tmp>/kgrag-constraints/`` (the vLLM server must be able to read it)."""
    if constraints.end_id is None:
        raise ValueError("the tokenizer has no eos_token_id; pass end_id= to ConstraintIndex")
    dirs: dict[str, Any] = {}
    for d in directions:
        names = list(constraints.names_by_entity(d))
        dirs[d] = {
            "entities": [[n, list(constraints.encode(n))] for n in names],
            "relations": {n: [list(s) for s in constraints.relation_index(n, d).sequences] for n in names},
            "texts": {n: constraints.hyperrelations(n, d) for n in names},
        }
    data = {
        "format": FORMAT,
        "version": VERSION,
        "eos_id": int(constraints.end_id),
        "separator_ids": list(constraints.encode(SEPARATOR)),
        "max_relation_tokens": constraints.max_relation_tokens,
        "relation_prefix": RELATION_PREFIX,
        "directions": dirs,
    }
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    if path is None:
        digest = hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]
        path = Path(tempfile.gettempdir()) / "kgrag-constraints" / f"{digest}.json"
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    logger.info("translator constraint file: %s (%d bytes)", path, len(text))
    return path


def _is_engine(llm: Any) -> bool:
    return hasattr(llm, "engine") and callable(getattr(llm, "generate", None))


def _post_completions(llm: Any, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """One ``/v1/completions`` request through ``llm``'s retry plan; the choices, by index."""
    url = f"{llm.base_url}/completions"

    def handle(resp: httpx.Response) -> list[dict[str, Any]]:
        if resp.status_code == 429 or resp.status_code >= 500:
            raise _RetryableFailure(f"HTTP {resp.status_code}: {snippet(resp.text)}")
        if resp.status_code >= 300:
            raise LLMResponseError(f"{url} failed with HTTP {resp.status_code}: {snippet(resp.text)}")
        try:
            data = resp.json()
            choices = sorted(data["choices"], key=lambda c: c.get("index", 0))
        except (ValueError, KeyError, TypeError):
            raise _RetryableFailure(f"malformed completions body: {snippet(resp.text)}") from None
        llm._record_usage(data.get("usage"))
        return choices

    return llm._post_planned(time.monotonic(), {"model": llm.model, **payload}, handle, url)


def processor_loaded(llm: Any) -> bool:
    """``True`` when ``llm`` (an OpenAI-compatible client of a vLLM server, a
    :class:`~kgrag_plugins.models.vllm.VLLMServer` or a :class:`~kgrag_plugins.models.vllm.VLLMEngine`)
    runs the translator's logits processor. A server is probed: two 2-token requests with
    ``vllm_xargs={"kgrag_probe_token": t}`` (t = 1, then 2) come back as ``[t, t]`` only when the
    processor forces them."""
    if hasattr(llm, "has_logits_processor"):
        return bool(llm.has_logits_processor(FQCN))
    if _is_engine(llm):
        return FQCN in getattr(llm, "logits_processors", ())
    if not hasattr(llm, "base_url"):
        return False
    for tok in (1, 2):
        payload = {
            "prompt": "probe",
            "max_tokens": 2,
            "temperature": 0.0,
            "ignore_eos": True,
            "return_token_ids": True,
            "vllm_xargs": {"kgrag_probe_token": tok},
        }
        try:
            choices = _post_completions(llm, payload)
        except LLMError as exc:
            logger.info("logits-processor probe failed (%s): not loaded", exc)
            return False
        if not choices or choices[0].get("token_ids") != [tok, tok]:
            return False
    return True


def is_vllm_server(llm: Any) -> bool:
    """``True`` when ``GET {base_url}/models`` reports ``owned_by: vllm``."""
    try:
        resp = httpx.get(f"{llm.base_url}/models", headers=llm._headers(), timeout=min(10.0, llm.timeout))
        return any(m.get("owned_by") == "vllm" for m in resp.json().get("data", []))
    except (httpx.HTTPError, ValueError, AttributeError, TypeError):
        return False


def _windows(text: str, max_words: int) -> list[str]:
    words = text.split()
    return [" ".join(words[i:j]) for i in range(len(words)) for j in range(i + 1, min(len(words), i + max_words) + 1)]


class VLLMConstrainedBackend:
    """Clue translation on a vLLM server / engine (see the module doc).

    ``llm``: an :class:`~kgrag_plugins.models.llm.OpenAICompatibleLLM` of a vLLM server or a
    :class:`~kgrag_plugins.models.vllm.VLLMEngine`; ``constraints``: the path of a constraint file
    (:func:`export_constraints`). ``samples`` per stage default to ``2 * alpha`` / ``2 * beta``;
    ``prompt`` builds the text before the answer (default :func:`~.decoding.clue_prompt` + newline,
    the HF backend's format without a chat template). ``lora``: an adapter name served by the
    server (sent as the model name). ``concurrency``: parallel HTTP requests in the ``*_batch`` calls.
    """

    def __init__(
        self,
        llm: Any,
        constraints: str | Path,
        *,
        mode: str = "processor",
        samples: int | None = None,
        temperature: float = 1.0,
        seed: int | None = None,
        max_entity_tokens: int = 32,
        max_relation_words: int = 16,
        prompt: Callable[[str], str] | None = None,
        lora: str | None = None,
        concurrency: int = 8,
    ) -> None:
        if mode not in _MODES:
            raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")
        self.llm, self.mode = llm, mode
        self.path = str(Path(constraints).resolve())
        with open(self.path, encoding="utf-8") as fh:
            data = json.load(fh)
        self.cons = TranslatorConstraints(data)
        dirs = data.get("directions", {})
        self._texts = {d: v.get("texts", {}) for d, v in dirs.items()}
        self._by_ids = {d: {tuple(ids): name for name, ids in v.get("entities", [])} for d, v in dirs.items()}
        self.samples, self.temperature, self.seed = samples, float(temperature), seed
        self.max_entity_tokens, self.max_relation_words = int(max_entity_tokens), int(max_relation_words)
        self.prompt = prompt or (lambda q: clue_prompt(q) + "\n")
        self.lora, self.concurrency = lora, max(1, int(concurrency))
        self.errors: list[dict[str, Any]] = []

    # ------------------------------------------------------------------ validity
    def is_entity(self, name: str, direction: Direction = "forward") -> bool:
        return name in self._texts.get(direction, {})

    def is_valid(self, entity: str, relation: str, direction: Direction = "forward") -> bool:
        """``relation`` (stripped, non-empty) is a substring of one of ``entity``'s hyperrelations."""
        rel = relation.strip()
        return bool(rel) and any(rel in h for h in self._texts.get(direction, {}).get(entity, []))

    # ------------------------------------------------------------------ sampling
    def _sample(
        self, prompt: str, n: int, max_tokens: int, xargs: dict[str, Any] | None, structured: dict[str, Any] | None
    ) -> list[tuple[str, list[int] | None, float]]:
        """``n`` samples ``(text, token ids, cumulative logprob)``."""
        with llm_call("translator.sample", prompt, llm=self.llm) as call:
            rows = self._sample_rows(prompt, n, max_tokens, xargs, structured)
            call.reply = "".join(t for t, _ids, _s in rows)
        return rows

    def _sample_rows(
        self, prompt: str, n: int, max_tokens: int, xargs: dict[str, Any] | None, structured: dict[str, Any] | None
    ) -> list[tuple[str, list[int] | None, float]]:
        if _is_engine(self.llm):
            rows = self.llm.generate(
                [prompt],
                n=n,
                max_tokens=max_tokens,
                temperature=self.temperature,
                logprobs=0,
                extra_args=xargs,
                structured=structured,
                lora=self.lora,
                seed=self.seed,
            )[0]
            return [(r["text"], r["token_ids"], float(r["cumulative_logprob"] or 0.0)) for r in rows]
        payload: dict[str, Any] = {
            "prompt": prompt,
            "n": n,
            "max_tokens": max_tokens,
            "temperature": self.temperature,
            "logprobs": 0,
            "return_token_ids": True,
        }
        if self.seed is not None:
            payload["seed"] = self.seed
        if self.lora:
            payload["model"] = self.lora
        if xargs:
            payload["vllm_xargs"] = xargs
        if structured:
            payload["structured_outputs"] = structured
        try:
            choices = _post_completions(self.llm, payload)
        except LLMError as exc:
            logger.warning("vLLM translation request failed: %s", exc)
            self.errors.append({"step": "translator.vllm", "kind": "llm_error", "error": str(exc)})
            return []
        out = []
        for c in choices:
            lps = (c.get("logprobs") or {}).get("token_logprobs") or []
            out.append((c.get("text") or "", c.get("token_ids"), float(sum(x for x in lps if x is not None))))
        return out

    @staticmethod
    def _ranked(cands: list[tuple[str, float]], k: int) -> list[str]:
        best: dict[str, float] = {}
        for text, score in cands:
            if text and score > best.get(text, float("-inf")):
                best[text] = score
        return [t for t, _s in sorted(best.items(), key=lambda x: -x[1])][:k]

    def _entity_text(self, text: str, ids: list[int] | None, direction: Direction) -> str:
        if self.mode == "processor" and ids is not None:
            sep = self.cons.sep
            for i in range(len(ids) - len(sep) + 1):
                if ids[i : i + len(sep)] == sep:
                    name = self._by_ids.get(direction, {}).get(tuple(ids[:i]))
                    return text.split(SEPARATOR)[0].strip() if name is None else name
            return ""  # cut by max_tokens before the name completed: dropped (as the HF backend does)
        return text.split(SEPARATOR)[0].strip()

    def entity_candidates(self, question: str, alpha: int, direction: Direction = "forward") -> list[str]:
        """Up to ``alpha`` decoded entity strings, best first, not filtered."""
        alpha = max(1, int(alpha))
        n = self.samples or 2 * alpha
        xargs = structured = None
        if self.mode == "processor":
            xargs = {"kgrag_index": self.path, "kgrag_stage": "entity", "kgrag_direction": direction}
        elif self.mode == "structured":
            names = self.cons.names(direction)
            if not names:
                return []
            structured = {"choice": names}
        budget = self.max_entity_tokens + len(self.cons.sep) + 1
        rows = self._sample(self.prompt(question), n, budget, xargs, structured)
        return self._ranked([(self._entity_text(t, ids, direction), s) for t, ids, s in rows], alpha)

    def relation_candidates(self, question: str, entity: str, beta: int, direction: Direction = "forward") -> list[str]:
        """Up to ``beta`` decoded relation strings for ``entity``, best first, not filtered."""
        beta = max(1, int(beta))
        n = self.samples or 2 * beta
        xargs = structured = None
        if self.mode == "processor":
            xargs = {
                "kgrag_index": self.path,
                "kgrag_stage": "relation",
                "kgrag_entity": entity,
                "kgrag_direction": direction,
            }
        elif self.mode == "structured":
            hypers = self._texts.get(direction, {}).get(entity, [])
            wins = list(dict.fromkeys(w for h in hypers for w in _windows(h, self.max_relation_words)))
            if not wins:
                return []
            structured = {"regex": " ?(?:" + "|".join(re.escape(w) for w in wins) + ")"}
        prompt = self.prompt(question) + entity.strip() + SEPARATOR
        rows = self._sample(prompt, n, self.cons.max_len + 1, xargs, structured)
        return self._ranked([(t.split("\n")[0].strip(), s) for t, _ids, s in rows], beta)

    # ------------------------------------------------------------------ protocol
    def _map(self, fn: Callable[..., list[str]], items: list[tuple[Any, ...]]) -> list[list[str]]:
        if len(items) <= 1 or _is_engine(self.llm):
            return [fn(*it) for it in items]
        with ThreadPoolExecutor(self.concurrency) as pool:  # each in a copy of this context (LLM usage meters)
            return [f.result() for f in [pool.submit(contextvars.copy_context().run, fn, *it) for it in items]]

    def entities_batch(self, questions: Sequence[str], alpha: int, direction: Direction = "forward") -> list[list[str]]:
        """Valid entity names per question (head entities; tails for ``reverse``), best first."""
        cands = self._map(self.entity_candidates, [(q, alpha, direction) for q in questions])
        return [[c for c in cs if self.is_entity(c, direction)] for cs in cands]

    def relations_batch(
        self, items: Sequence[tuple[str, str]], beta: int, direction: Direction = "forward"
    ) -> list[list[str]]:
        """Valid relation spans per ``(question, entity)``, best first."""
        cands = self._map(self.relation_candidates, [(q, e, beta, direction) for q, e in items])
        return [[r for r in rs if self.is_valid(e, r, direction)] for (_q, e), rs in zip(items, cands)]

    def entities(self, question: str, alpha: int, direction: Direction = "forward") -> list[str]:
        return self.entities_batch([question], alpha, direction)[0]

    def relations(self, question: str, entity: str, beta: int, direction: Direction = "forward") -> list[str]:
        return self.relations_batch([(question, entity)], beta, direction)[0]


def choose_backend(
    index: Any,
    llm_or_model: Any,
    *,
    tokenizer: Any = None,
    constraints_path: str | Path | None = None,
    **kwargs: Any,
) -> Any:
    """The best translation backend ``llm_or_model`` supports (docs/vllm.md "fallback order"):

    1. a transformers model (``(model, tokenizer)``, a model with ``tokenizer=``, or a local model
       directory) -> :class:`~.decoding.HFConstrainedBackend`;
    2. a :class:`~kgrag_plugins.models.vllm.VLLMServer` / ``VLLMEngine`` / vLLM client running the
       translator's logits processor -> :class:`VLLMConstrainedBackend` ``mode="processor"`` (the
       constraint file is exported with ``tokenizer``, default the served model's);
    3. another vLLM server -> ``mode="structured"``;
    4. any other LLM -> :class:`~.decoding.ProjectionBackend` (unconstrained + projection).

    ``index``: a KnowledgeIndex built with ``builder="parsekg"``; ``kwargs`` go to the backend.
    """
    from .decoding import HFConstrainedBackend

    model = llm_or_model
    if isinstance(model, tuple) and len(model) == 2:
        model, tokenizer = model
    if isinstance(model, (str, Path)) and (Path(model) / "config.json").is_file():
        return HFConstrainedBackend(str(model), tokenizer, index=index, **kwargs)
    if hasattr(model, "generate") and hasattr(model, "config") and not _is_engine(model):
        return HFConstrainedBackend(model, tokenizer, index=index, **kwargs)
    server = model if hasattr(model, "has_logits_processor") else None
    client = server.client() if server is not None else model
    is_vllm = server is not None or _is_engine(model) or (hasattr(model, "base_url") and is_vllm_server(model))
    if not is_vllm:
        logger.info("translator backend: unconstrained decoding + projection (%s)", type(model).__name__)
        return ProjectionBackend.from_index(index, model, **kwargs)

    def constraint_file() -> Path:
        tok = tokenizer
        if tok is None:
            from transformers import AutoTokenizer

            tok = AutoTokenizer.from_pretrained(getattr(server or model, "model", None))
        return export_constraints(ConstraintIndex.from_index(index, tok), constraints_path)

    if processor_loaded(server or model):
        try:
            path = constraint_file()
        except (OSError, ValueError) as exc:
            logger.warning("no tokenizer for the constraint file (%s): structured outputs instead", exc)
        else:
            logger.info("translator backend: vLLM + kgrag logits processor")
            return VLLMConstrainedBackend(client, path, mode="processor", **kwargs)
    logger.info("translator backend: vLLM structured outputs (choice / regex)")
    # structured outputs need only the names and hyperrelation texts: no tokenizer, placeholder ids
    path = export_constraints(ConstraintIndex.from_index(index, lambda s: [0], end_id=0), constraints_path)
    return VLLMConstrainedBackend(client, path, mode="structured", **kwargs)
