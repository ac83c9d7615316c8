"""An in-process transformers LLM behind the package's LLM protocol (``--llm local:MODEL``).

:class:`TransformersLLM` loads a causal LM with transformers (any folder, ``.gguf`` file or known
name :func:`~kgrag_plugins.models.local_models.resolve_model` accepts, e.g. ``"smollm2"``) and
answers ``complete(prompt, stop=, max_tokens=, temperature=, schema=)``:

* the tokenizer's chat template, greedy decoding by default (``temperature > 0`` samples);
* stop strings cut the reply (and stop generation early);
* one total deadline per call (``KGRAG_LLM_DEADLINE``, default 30 s): generation stops at it and the
  call raises :class:`~kgrag_plugins.models.llm.LLMTimeoutError`, as the HTTP client does;
* ``schema`` (:class:`~kgrag_plugins.models.structured.OutputSchema`): a logits processor keeps
  every generated token inside the schema's regex (``outlines_core`` builds the token automaton;
  one per regex, cached), and end-of-sequence is allowed only where the regex may end;
* :meth:`complete_logprobs` returns token log-probabilities with the top alternatives (Self-RAG's
  critique scores);
* prompts longer than the model's context keep their head and tail around a marker
  (``[... N characters cut to fit the model's context ...]``), never a silent cut.

Calls are serialised by a lock (one generation at a time: a 2-core CPU gains nothing from two).
``usage`` counts calls and prompt / completion tokens like the HTTP client.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import time
from collections.abc import Iterator
from typing import Any

from ..config import DEFAULT_LLM_DEADLINE, env_number, progress_enabled
from .breaker import LLMResponseError, LLMTimeoutError
from .logprobs import DEFAULT_TOP_LOGPROBS, Completion, TokenLogprob
from .messages import Message, to_messages, truncate_at_stop
from .structured import OutputSchema
from .usage import report_usage

__all__ = ["TransformersLLM"]

logger = logging.getLogger(__name__)

_CUT_MARKER = "\n[... {n} characters cut to fit the model's context ...]\n"


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level BPE alphabet, character -> byte."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def token_bytes(tokenizer: Any) -> dict[bytes, list[int]]:
    """Every ordinary token's bytes -> its ids (byte-level BPE or SentencePiece vocabularies;
    special tokens are left out)."""
    vocab: dict[str, int] = tokenizer.get_vocab()
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    dec = _byte_decoder()
    byte_level = sum(all(c in dec for c in t) for t in list(vocab)[:2000]) > 1600
    out: dict[bytes, list[int]] = {}
    for tok, i in vocab.items():
        if i in special:
            continue
        if byte_level:
            try:
                b = bytes(dec[c] for c in tok)
            except KeyError:
                continue
        elif len(tok) == 6 and tok.startswith("<0x") and tok.endswith(">"):
            b = bytes([int(tok[3:5], 16)])
        else:
            b = tok.replace("\u2581", " ").encode("utf-8")
        if b:
            out.setdefault(b, []).append(i)
    return out


class _SchemaProcessor:
    """A transformers logits processor: only tokens that keep the reply inside the regex (batch of 1)."""

    def __init__(self, index: Any, prompt_len: int, eos_ids: list[int]) -> None:
        self.index, self.prompt_len, self.eos_ids = index, prompt_len, eos_ids
        self.state: Any = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        generated = input_ids.shape[1] - self.prompt_len
        if self.state is None:
            self.state = self.index.get_initial_state()
        elif generated > 0:
            nxt = self.index.get_next_state(self.state, int(input_ids[0, -1]))
            self.state = nxt if nxt is not None else self.state
        allowed = list(self.index.get_allowed_tokens(self.state) or [])
        if not allowed:  # a dead end cannot happen with a consistent index; end the reply instead
            allowed = self.eos_ids
        mask = torch.full_like(scores, -math.inf)
        mask[:, allowed] = 0.0
        return scores + mask


@contextlib.contextmanager
def _quiet_hf_bars() -> Iterator[None]:
    """transformers' "Loading weights" bar only where ours may show (:func:`progress_enabled`)."""
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    if not progress_enabled(True):
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


class TransformersLLM:
    """A local transformers model as an :class:`~kgrag_plugins.models.llm.LLM` (module docstring).

    ``model``: a known name (``"smollm2"``), a model folder or a ``.gguf`` file. ``structured``:
    enforce :class:`~kgrag_plugins.models.structured.OutputSchema` s (default on; off measures the
    unconstrained model). ``threads``: torch intra-op threads (default: torch's).
    """

    def __init__(
        self,
        model: str = "smollm2",
        *,
        deadline: float | None = None,
        default_max_tokens: int = 256,
        default_temperature: float = 0.0,
        structured: bool = True,
        threads: int | None = None,
        dtype: str = "float32",
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from .local_models import resolve_model

        deadline = env_number("LLM_DEADLINE", DEFAULT_LLM_DEADLINE) if deadline is None else float(deadline)
        if not deadline > 0:
            raise ValueError(f"deadline must be > 0 seconds, got {deadline}")
        if default_max_tokens < 1:
            raise ValueError(f"default_max_tokens must be >= 1, got {default_max_tokens}")
        self.path = resolve_model(model)
        self.model_name = str(model)
        if threads:
            torch.set_num_threads(int(threads))
        t0 = time.perf_counter()
        self.tokenizer = AutoTokenizer.from_pretrained(self.path)
        with _quiet_hf_bars():
            self.model = AutoModelForCausalLM.from_pretrained(self.path, dtype=getattr(torch, dtype))
        self.model.eval()
        if self.tokenizer.chat_template is None:
            raise ValueError(f"{self.path} has no chat template: TransformersLLM needs an instruct model")
        self.deadline = deadline
        self.default_max_tokens = int(default_max_tokens)
        self.default_temperature = float(default_temperature)
        self.structured = bool(structured)
        self.context = int(getattr(self.model.config, "max_position_embeddings", 2048) or 2048)
        eos = self.model.generation_config.eos_token_id
        self.eos_ids = [int(e) for e in (eos if isinstance(eos, list) else [eos]) if e is not None] or [
            int(self.tokenizer.eos_token_id)
        ]
        self.usage: dict[str, int] = {"prompt_tokens": 0, "completion_tokens": 0, "calls": 0}
        self._lock = threading.Lock()
        self._vocab: Any = None
        self._indexes: dict[str, Any] = {}
        logger.info("loaded %s in-process from %s (%.1fs)", model, self.path, time.perf_counter() - t0)

    def __repr__(self) -> str:
        return f"TransformersLLM(model={self.model_name!r}, structured={self.structured}, deadline={self.deadline})"

    @property
    def supports_schema(self) -> bool:
        """Whether :class:`OutputSchema` s are enforced (``structured``)."""
        return self.structured

    # -- prompt

    def _input_ids(self, prompt: str | list[Message], max_new: int, raw: bool = False) -> Any:
        if raw:  # a plain prompt string, no chat template (``/v1/completions``)
            ids = self.tokenizer(str(prompt), return_tensors="pt")["input_ids"]
            if ids.shape[1] > self.context - max_new - 8:
                raise LLMResponseError(f"raw prompt of {ids.shape[1]} tokens does not fit the context {self.context}")
            return ids
        messages = to_messages(prompt)
        budget = self.context - max_new - 8
        ids = self._chat_ids(messages)
        if ids.shape[1] <= budget:
            return ids
        # keep the head and tail of the longest message around a marker (never a silent cut)
        longest = max(range(len(messages)), key=lambda i: len(messages[i]["content"]))
        text = messages[longest]["content"]
        over = ids.shape[1] - budget
        cut = min(len(text) - 1, int(over * 4.5) + 64)  # ~4 characters a token, with margin
        while cut < len(text):
            head = (len(text) - cut) // 2
            messages[longest] = {
                **messages[longest],
                "content": text[:head] + _CUT_MARKER.format(n=cut) + text[head + cut :],
            }
            ids = self._chat_ids(messages)
            if ids.shape[1] <= budget:
                logger.warning("prompt of %d tokens cut by %d characters to fit %d", ids.shape[1], cut, self.context)
                return ids
            cut = min(len(text), cut * 2)
        raise LLMResponseError(f"prompt does not fit the model's context of {self.context} tokens")

    def _chat_ids(self, messages: list[Message]) -> Any:
        """The chat template applied to ``messages``, with the assistant turn opened (token ids, 1 x n)."""
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")
        return ids["input_ids"] if hasattr(ids, "keys") else ids

    def _index(self, schema: OutputSchema) -> Any:
        from outlines_core import Index, Vocabulary

        rx = schema.to_regex()
        idx = self._indexes.get(rx)
        if idx is None:
            if self._vocab is None:
                self._vocab = Vocabulary(self.eos_ids[0], token_bytes(self.tokenizer))
            t0 = time.perf_counter()
            idx = Index(rx, self._vocab)
            logger.debug("compiled schema %s in %.2fs", schema.name, time.perf_counter() - t0)
            if len(self._indexes) > 64:
                self._indexes.pop(next(iter(self._indexes)))
            self._indexes[rx] = idx
        return idx

    # -- generation

    def _generate(
        self,
        prompt: str | list[Message],
        stop: list[str] | None,
        max_tokens: int | None,
        temperature: float | None,
        schema: OutputSchema | None,
        top_logprobs: int = 0,
        raw: bool = False,
    ) -> tuple[str, list[TokenLogprob]]:
        import torch
        from transformers import LogitsProcessorList

        started = time.monotonic()
        max_new = int(max_tokens or self.default_max_tokens)
        temperature = self.default_temperature if temperature is None else float(temperature)
        with self._lock:
            ids = self._input_ids(prompt, max_new, raw)
            processors = LogitsProcessorList()
            if schema is not None and self.structured:
                processors.append(_SchemaProcessor(self._index(schema), ids.shape[1], self.eos_ids))
            left = self.deadline - (time.monotonic() - started)
            if left <= 0:
                raise LLMTimeoutError(
                    f"local LLM {self.model_name}: no time left within the {self.deadline:g}s deadline"
                )
            kwargs: dict[str, Any] = dict(
                max_new_tokens=max_new,
                logits_processor=processors,
                max_time=left,
                pad_token_id=self.eos_ids[0],
                eos_token_id=self.eos_ids,
                return_dict_in_generate=True,
                output_scores=top_logprobs > 0,
            )
            if temperature > 0:
                kwargs.update(do_sample=True, temperature=temperature, top_p=1.0, top_k=0)
            else:
                kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
            if stop and schema is None:
                kwargs.update(stop_strings=[s for s in stop if s], tokenizer=self.tokenizer)
            with torch.inference_mode():
                out = self.model.generate(ids, attention_mask=torch.ones_like(ids), **kwargs)
            new = out.sequences[0, ids.shape[1] :]
            ended = len(new) > 0 and int(new[-1]) in self.eos_ids
            text = self.tokenizer.decode(new, skip_special_tokens=True)
            tokens: list[TokenLogprob] = []
            if top_logprobs > 0:
                for pos, step_scores in enumerate(out.scores):
                    lp = torch.log_softmax(step_scores[0].float(), dim=-1)
                    tid = int(new[pos])
                    top = torch.topk(lp, min(top_logprobs, lp.shape[-1]))
                    alts = {self.tokenizer.decode([int(i)]): float(v) for v, i in zip(top.values, top.indices)}
                    piece = self.tokenizer.decode([tid])
                    alts.setdefault(piece, float(lp[tid]))
                    tokens.append(TokenLogprob(piece, float(lp[tid]), alts))
            self.usage["calls"] += 1
            self.usage["prompt_tokens"] += int(ids.shape[1])
            self.usage["completion_tokens"] += int(len(new))
            report_usage(int(ids.shape[1]), int(len(new)))
        cut = truncate_at_stop(text, stop)
        elapsed = time.monotonic() - started
        if not ended and len(new) < max_new and cut == text and elapsed >= self.deadline * 0.98:
            raise LLMTimeoutError(
                f"local LLM {self.model_name} got no complete reply within its {self.deadline:g}s deadline "
                f"(KGRAG_LLM_DEADLINE) after {len(new)} tokens"
            )
        return cut, tokens

    def complete(
        self,
        prompt: str | list[Message],
        *,
        stop: list[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        schema: OutputSchema | None = None,
    ) -> str:
        """The model's reply (see the class docstring)."""
        return self._generate(prompt, stop, max_tokens, temperature, schema)[0]

    async def acomplete(
        self,
        prompt: str | list[Message],
        *,
        stop: list[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        schema: OutputSchema | None = None,
    ) -> str:
        """Async :meth:`complete` (runs in a worker thread)."""
        return await asyncio.to_thread(
            self.complete, prompt, stop=stop, max_tokens=max_tokens, temperature=temperature, schema=schema
        )

    def complete_logprobs(
        self,
        prompt: str | list[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        top_logprobs: int = DEFAULT_TOP_LOGPROBS,
        raw: bool = False,
        schema: OutputSchema | None = None,
    ) -> Completion:
        """A :class:`~kgrag_plugins.models.logprobs.Completion` with each token's log-probability
        and its ``top_logprobs`` alternatives. ``raw=True`` sends ``prompt`` (a string) without
        the chat template, as ``/v1/completions`` does. With ``schema`` the alternatives are those
        the schema allows (the scores after its logits processor)."""
        if raw and not isinstance(prompt, str):
            raise TypeError("raw=True needs a prompt string")
        text, tokens = self._generate(prompt, None, max_tokens, temperature, schema, max(1, top_logprobs), raw)
        return Completion(text, tokens)
