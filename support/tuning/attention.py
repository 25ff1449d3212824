"""Attention in a Cosmos 3 decoder layer as the cookbook's switches compute it: the rotated queries, keys and values
of the text and the generation tokens, and an attention processor that leaves the kernel to a subclass
(FlashAttention-4, FP8 attention, context parallelism). It imports nothing else of `tuning`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    from diffusers.models.transformers.transformer_cosmos3 import _rotate_half

    # The same expression as Cosmos3AttnProcessor, so cached and recomputed keys agree bit for bit.
    return x * cos.unsqueeze(1) + _rotate_half(x) * sin.unsqueeze(1)


def text_queries_keys_values(attn: Any, und: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    """One attention module's rotated text queries and keys, the rotated text keys as the generation tokens see them
    (through `k_norm_und_for_gen`, where the model has it), and the text values."""
    query = rope(attn.norm_q(attn.to_q(und).view(-1, attn.num_attention_heads, attn.head_dim)), cos, sin)
    key = attn.norm_k(attn.to_k(und).view(-1, attn.num_key_value_heads, attn.head_dim))
    value = attn.to_v(und).view(-1, attn.num_key_value_heads, attn.head_dim)
    if attn.k_norm_und_for_gen is None:
        key = rope(key, cos, sin)
        return query, key, key, value
    return query, rope(key, cos, sin), rope(attn.k_norm_und_for_gen(key), cos, sin), value


def generation_queries_keys_values(attn: Any, gen: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    """The generation tokens' rotated queries and keys, and their values, in one attention module."""
    query = attn.norm_added_q(attn.add_q_proj(gen).view(-1, attn.num_attention_heads, attn.head_dim))
    key = attn.norm_added_k(attn.add_k_proj(gen).view(-1, attn.num_key_value_heads, attn.head_dim))
    value = attn.add_v_proj(gen).view(-1, attn.num_key_value_heads, attn.head_dim)
    return rope(query, cos, sin), rope(key, cos, sin), value


def attention_of(processor: Any) -> Any:
    """The grouped-query attention a layer's processor runs, as a function of `[tokens, heads, head_dim]` query, key
    and value (and `is_causal`): the processor's own `attend` where it has one (FlashAttention-4, the several-GPU
    runner's context parallelism), else diffusers' dispatch with the backend the processor holds (PyTorch's SDPA
    unless `set_attention_backend` chose another)."""
    own = getattr(processor, "attend", None)
    if own is not None:
        return own

    def dispatched(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *, is_causal: bool) -> torch.Tensor:
        from diffusers.models.attention_dispatch import dispatch_attention_fn

        out = dispatch_attention_fn(
            query.unsqueeze(0),
            key.unsqueeze(0),
            value.unsqueeze(0),
            is_causal=is_causal,
            enable_gqa=True,
            backend=processor._attention_backend,
            parallel_config=processor._parallel_config,
        )
        return out.squeeze(0)

    return dispatched


def attend(attn: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *, is_causal: bool):
    """Grouped-query attention over `[tokens, heads, head_dim]` with the kernel of `attn`'s processor."""
    return attention_of(attn.processor)(query, key, value, is_causal=is_causal)


class OwnKernelAttnProcessor:
    """`Cosmos3AttnProcessor`'s computation with the attention itself left to `attend` (over `[tokens, heads,
    head_dim]`). A subclass brings its own kernel to one pipeline through diffusers' public `attn.set_processor`,
    so nothing that other pipelines in the process share is changed (FlashAttention-4, context parallelism)."""

    _attention_backend = None
    _parallel_config = None

    def attend(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *, is_causal: bool) -> torch.Tensor:
        raise NotImplementedError

    def __call__(self, attn: Any, und_seq: torch.Tensor, gen_seq: torch.Tensor, rotary_emb: tuple[torch.Tensor, ...]):
        import torch

        cos_und, sin_und, cos_gen, sin_gen = rotary_emb
        text_query, text_key, text_key_for_generation, text_value = text_queries_keys_values(
            attn, und_seq, cos_und, sin_und
        )
        query, key, value = generation_queries_keys_values(attn, gen_seq, cos_gen, sin_gen)
        text_out = self.attend(text_query, text_key, text_value, is_causal=True)
        generation_out = self.attend(
            query, torch.cat([text_key_for_generation, key]), torch.cat([text_value, value]), is_causal=False
        )
        return attn.to_out(text_out.flatten(-2, -1)), attn.to_add_out(generation_out.flatten(-2, -1))
