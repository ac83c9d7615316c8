"""A tiny random-weight Llama and a byte-level BPE tokenizer trained on the given texts, built in
seconds on CPU (no weights exist on these machines): shared by the decoding and SFT tests."""

from __future__ import annotations

from collections.abc import Iterable


def tiny_llama(
    texts: Iterable[str],
    *,
    vocab_size: int,
    hidden_size: int,
    num_heads: int,
    max_positions: int,
    head_dim: int | None = None,
):
    """``(model, tokenizer)``: a 2-layer ``LlamaForCausalLM`` (seed 0, intermediate = 2 x hidden) and a
    ``PreTrainedTokenizerFast`` with ``<eos>`` / ``<pad>``, trained on ``texts``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<eos>", "<pad>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(texts, trainer)
    hf_tok = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", pad_token="<pad>")
    torch.manual_seed(0)
    extra = {"head_dim": head_dim} if head_dim is not None else {}
    cfg = LlamaConfig(
        vocab_size=len(hf_tok),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=2,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        max_position_embeddings=max_positions,
        eos_token_id=hf_tok.eos_token_id,
        pad_token_id=hf_tok.pad_token_id,
        bos_token_id=None,
        **extra,
    )
    return LlamaForCausalLM(cfg), hf_tok
