"""Ulysses context parallelism for the Cosmos 3 transformer, on its `_cp_shard_fn` / `_cp_gather_fn` seams.

Each rank of a context group keeps a contiguous 1/N of each token stream (text, generation) through the decoder
layers. Everything in a layer except attention acts on one token at a time, so it runs on the local tokens.
Attention needs every token: an all-to-all trades tokens for heads (each rank then holds the whole sequence for 1/N
of the heads), the attention runs as on one GPU, and a second all-to-all trades back. After the last layer the
streams are gathered whole on every rank, so the transformer's outputs are the same everywhere.

Why our own attention rather than diffusers' Ulysses: diffusers' context-parallel attention refuses causal and
grouped-query attention, and Cosmos 3 uses both (its text stream is causal; Nano has 32 query heads and 8 key/value
heads).

Padding: each stream is padded at its end to a multiple of N. The text stream's attention is causal, so padding at
its end is never seen by a real token; the generation tokens' keys lose their padding after the all-to-all. No mask
is needed, so FlashAttention-4 (which takes none) keeps working.

Key/value heads: the heads are split N ways. With fewer key/value heads than N (the tiny checkpoint has 1), or a
count N does not divide, each is repeated first, so that every rank holds the key/value heads its query heads use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from helpers.errors import InvalidSettingError
from tuning import attention

if TYPE_CHECKING:
    import torch
    from diffusers import Cosmos3OmniPipeline


@dataclass(frozen=True)
class Streams:
    """Lengths of the two token streams in the current forward: real, and padded to a multiple of the degree."""

    text: int = 0
    text_padded: int = 0
    generation: int = 0
    generation_padded: int = 0


class ContextParallel:
    """One rank's share of a context group: sharding, gathering, and attention over the whole sequence."""

    def __init__(self, group: Any, kv_heads: int):
        import torch.distributed as dist

        self.group = group
        self.size = dist.get_world_size(group)
        self.rank = dist.get_rank(group)
        self.kv_repeat = self.size // math.gcd(kv_heads, self.size)
        self.streams = Streams()

    def _padded(self, length: int) -> int:
        return -(-length // self.size) * self.size

    def _local(self, x: torch.Tensor, padded: int) -> torch.Tensor:
        import torch

        if padded > x.shape[0]:
            x = torch.cat([x, x.new_zeros(padded - x.shape[0], *x.shape[1:])])
        share = padded // self.size
        return x[self.rank * share : (self.rank + 1) * share]

    def shard(self, und: torch.Tensor, gen: torch.Tensor, rotary: tuple[torch.Tensor, ...]):
        """`_cp_shard_fn`: this rank's tokens of each stream, and their rotary embeddings."""
        text, generation = und.shape[0], gen.shape[0]
        self.streams = Streams(text, self._padded(text), generation, self._padded(generation))
        cos_und, sin_und, cos_gen, sin_gen = rotary
        s = self.streams
        return (
            self._local(und, s.text_padded),
            self._local(gen, s.generation_padded),
            (
                self._local(cos_und, s.text_padded),
                self._local(sin_und, s.text_padded),
                self._local(cos_gen, s.generation_padded),
                self._local(sin_gen, s.generation_padded),
            ),
        )

    def _whole(self, x: torch.Tensor, length: int) -> torch.Tensor:
        import torch
        import torch.distributed as dist

        x = x.contiguous()
        parts = [torch.empty_like(x) for _ in range(self.size)]
        dist.all_gather(parts, x, group=self.group)
        return torch.cat(parts)[:length]

    def gather(self, und: torch.Tensor, gen: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """`_cp_gather_fn`: both streams whole and unpadded, as the transformer's output head indexes them."""
        return self._whole(und, self.streams.text), self._whole(gen, self.streams.generation)

    def _all_to_all(self, x: torch.Tensor) -> torch.Tensor:
        """Block i of dim 0 goes to rank i; block i of the result came from rank i."""
        import torch.distributed._functional_collectives as funcol

        out = funcol.all_to_all_single(x.flatten(), None, None, self.group)
        # Under compilation the result is a plain (fake) tensor; in eager mode it is waited on here.
        if isinstance(out, funcol.AsyncCollectiveTensor):
            out = out.wait()
        return out.view(x.shape)

    def _heads_to_ranks(self, x: torch.Tensor) -> torch.Tensor:
        """[local tokens, heads, dim] -> [all tokens (rank by rank), heads / N, dim]."""
        tokens, heads, dim = x.shape
        x = x.reshape(tokens, self.size, heads // self.size, dim).transpose(0, 1).contiguous()
        return self._all_to_all(x).reshape(self.size * tokens, heads // self.size, dim)

    def _tokens_to_ranks(self, x: torch.Tensor) -> torch.Tensor:
        """The inverse of `_heads_to_ranks`: [all tokens, heads / N, dim] -> [local tokens, heads, dim]."""
        tokens, heads, dim = x.shape
        x = self._all_to_all(x.reshape(self.size, tokens // self.size, heads, dim).contiguous())
        return x.transpose(0, 1).reshape(tokens // self.size, self.size * heads, dim)

    def _real_keys(self, x: torch.Tensor) -> torch.Tensor:
        """Generation-pass keys or values, rank by rank [text share, generation share], as one unpadded sequence."""
        import torch

        s = self.streams
        text_share = s.text_padded // self.size
        x = x.reshape(self.size, -1, *x.shape[1:])
        text = x[:, :text_share].reshape(-1, *x.shape[2:])[: s.text]
        generation = x[:, text_share:].reshape(-1, *x.shape[2:])[: s.generation]
        return torch.cat([text, generation])

    def attend(
        self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *, is_causal: bool, kernel: Any
    ) -> torch.Tensor:
        """Attention over the whole sequence for this rank's tokens, each `[tokens, heads, head_dim]`.

        Causal: the text stream attending to itself. Otherwise: generation queries over keys that are, on every
        rank, its text share followed by its generation share (as `Cosmos3AttnProcessor` and the text cache
        concatenate them). `kernel` (`attention.attention_of`) computes it once the tokens are gathered.
        """
        s = self.streams
        expected = (s.text_padded if is_causal else s.text_padded + s.generation_padded) // self.size
        if key.shape[0] != expected:
            raise RuntimeError(
                f"Context parallelism expected {expected} local keys ({s}), got {key.shape[0]}: the attention was "
                "called outside the sharded transformer forward."
            )
        if self.kv_repeat > 1:
            key = key.repeat_interleave(self.kv_repeat, dim=1)
            value = value.repeat_interleave(self.kv_repeat, dim=1)
        query, key, value = (self._heads_to_ranks(t) for t in (query, key, value))
        if not is_causal:
            key, value = self._real_keys(key), self._real_keys(value)
        return self._tokens_to_ranks(kernel(query, key, value, is_causal=is_causal))


class UlyssesAttnProcessor(attention.OwnKernelAttnProcessor):
    """`Cosmos3AttnProcessor`'s computation on local tokens, with attention over the whole sequence.

    `kernel` is the attention the layer ran before (`attention.attention_of`): PyTorch's SDPA, or FlashAttention-4 under
    `SPEED="fast"`; it runs once the tokens are gathered.
    """

    def __init__(self, parallel: ContextParallel, kernel: Any):
        self.parallel = parallel
        self.kernel = kernel

    def attend(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *, is_causal: bool):
        return self.parallel.attend(query, key, value, is_causal=is_causal, kernel=self.kernel)


def enable(pipe: Cosmos3OmniPipeline, group: Any) -> ContextParallel:
    """Split the transformer's tokens across the ranks of `group` (Ulysses), on every decoder layer.

    Install it after the speed switches: each layer's attention keeps the kernel `SPEED` chose.
    """
    transformer = pipe.transformer
    heads = transformer.config.num_attention_heads
    parallel = ContextParallel(group, transformer.config.num_key_value_heads)
    if heads % parallel.size:
        allowed = [n for n in range(1, heads + 1) if heads % n == 0]
        raise InvalidSettingError(
            f"The context degree {parallel.size} must divide the model's {heads} attention heads: use one of "
            f"{allowed} (with CFG 2, GPUS is twice that)."
        )
    for layer in transformer.layers:
        attn = layer.self_attn
        attn.set_processor(UlyssesAttnProcessor(parallel, attention.attention_of(attn.processor)))
    transformer._cp_shard_fn = parallel.shard
    transformer._cp_gather_fn = parallel.gather
    return parallel
