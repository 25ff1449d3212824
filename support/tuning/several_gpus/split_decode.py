"""The Wan VAE decode split across ranks by rows: each rank decodes a horizontal strip, rank 0 gets the video.

At 720p the decode takes 11.6 s on one H200, 6% of a `fast` run on one GPU and more of a parallel one, where every
other rank would wait for it. The decoder is convolutional, with one exception: every convolution sees one row above
and below each output row, and its per-pixel layers see nothing around them. So each rank decodes its latent rows,
and before each convolution fetches the rows it needs from its neighbours (a halo) instead of padding with zeros:
the result is the one-GPU decode's, row for row. The decoder's single spatial attention (in its middle block, at
the latent resolution, where it is cheap) sees whole frames: every rank gathers them, runs it, and keeps its rows.
The strips are gathered on rank 0 at the end; the other ranks get their own strip back, which they do not use.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from diffusers import Cosmos3OmniPipeline


def row_split(rows: int, parts: int) -> list[int]:
    """`rows` latent rows shared out as evenly as possible, the first ranks taking one more."""
    from helpers.errors import InvalidSettingError

    if rows < parts:
        raise InvalidSettingError(
            f"{rows} latent rows cannot be split across {parts} ranks: use fewer GPUs or a larger size."
        )
    return [rows // parts + (1 if i < rows % parts else 0) for i in range(parts)]


class SplitDecode:
    """One rank's part of the split decode, installed on the VAE by `enable`."""

    def __init__(self, group: Any):
        import torch.distributed as dist

        self.group = group
        self.size = dist.get_world_size(group)
        self.rank = dist.get_rank(group)
        self.rows: list[int] = []  # latent rows of every rank while a decode runs; empty otherwise

    def _scale(self, x: torch.Tensor) -> int:
        """How many rows of `x` each latent row has become at this depth of the decoder."""
        return x.shape[-2] // self.rows[self.rank]

    def halo(self, x: torch.Tensor, width: int) -> torch.Tensor:
        """`x` with `width` rows of each neighbour's strip above and below it (zeros at the frame's edges)."""
        import torch
        import torch.distributed as dist

        if width == 0:
            return x
        edges = torch.cat([x[..., :width, :], x[..., -width:, :]], dim=-2).contiguous()
        everyone = [torch.empty_like(edges) for _ in range(self.size)]
        dist.all_gather(everyone, edges, group=self.group)
        zeros = torch.zeros_like(edges[..., :width, :])
        above = everyone[self.rank - 1][..., width:, :] if self.rank > 0 else zeros
        below = everyone[self.rank + 1][..., :width, :] if self.rank < self.size - 1 else zeros
        return torch.cat([above, x, below], dim=-2)

    def whole(self, x: torch.Tensor, to: int | None = None) -> torch.Tensor | None:
        """Every rank's strip of `x`, top to bottom: on every rank, or on rank `to` only (None elsewhere)."""
        import torch
        import torch.distributed as dist

        scale = self._scale(x)
        tallest = max(self.rows) * scale
        mine = x.contiguous()
        if mine.shape[-2] < tallest:
            pad = mine.new_zeros(*mine.shape[:-2], tallest - mine.shape[-2], mine.shape[-1])
            mine = torch.cat([mine, pad], dim=-2)
        strips = [torch.empty_like(mine) for _ in range(self.size)] if to is None or to == self.rank else None
        if to is None:
            dist.all_gather(strips, mine, group=self.group)
        else:
            dist.gather(mine, strips, dst=dist.get_global_rank(self.group, to), group=self.group)
            if strips is None:
                return None
        return torch.cat([strip[..., : rows * scale, :] for strip, rows in zip(strips, self.rows, strict=True)], dim=-2)

    def mine(self, x: torch.Tensor) -> torch.Tensor:
        """This rank's rows of a whole frame."""
        scale = x.shape[-2] // sum(self.rows)
        start = sum(self.rows[: self.rank]) * scale
        return x[..., start : start + self.rows[self.rank] * scale, :]

    def causal_conv3d(self, conv: Any, x: torch.Tensor, cache_x: torch.Tensor | None = None) -> torch.Tensor:
        """`WanCausalConv3d.forward` with the neighbours' rows in place of the zero padding above and below."""
        import torch
        import torch.nn.functional as F

        padding = list(conv._padding)  # (left, right, top, bottom, past frames, 0)
        if cache_x is not None and padding[4] > 0:
            x = torch.cat([cache_x.to(x.device), x], dim=2)
            padding[4] -= cache_x.shape[2]
        x = self.halo(x, padding[2])
        padding[2] = padding[3] = 0
        return torch.nn.Conv3d.forward(conv, F.pad(x, padding))

    def conv2d(self, conv: Any, x: torch.Tensor) -> torch.Tensor:
        """A zero-padded `nn.Conv2d`, with the neighbours' rows in place of the padding above and below."""
        import torch.nn.functional as F

        rows, columns = conv.padding
        x = self.halo(x, rows)
        return F.conv2d(x, conv.weight, conv.bias, conv.stride, (0, columns), conv.dilation, conv.groups)

    def whole_frame(self, forward: Any, x: torch.Tensor) -> torch.Tensor:
        """A layer that sees whole frames (the decoder's attention): run on gathered frames, keep this rank's rows."""
        return self.mine(forward(self.whole(x)))

    def decode(self, decode: Any, z: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        """The VAE's `decode` of this rank's latent rows; the whole video on rank 0."""
        from diffusers.models.autoencoders.vae import DecoderOutput

        self.rows = row_split(z.shape[-2], self.size)
        start = sum(self.rows[: self.rank])
        try:
            strip = decode(z[..., start : start + self.rows[self.rank], :]).sample
            video = self.whole(strip, to=0)
        finally:
            self.rows = []
        sample = video if self.rank == 0 else strip
        return DecoderOutput(sample=sample) if kwargs.get("return_dict", True) else (sample,)


def _split_only_while_decoding(split: SplitDecode, layer: Any, split_forward: Any) -> None:
    plain = layer.forward

    @functools.wraps(plain)
    def forward(*args: Any, **kwargs: Any) -> Any:
        return split_forward(*args, **kwargs) if split.rows else plain(*args, **kwargs)

    layer.forward = forward


def enable(pipe: Cosmos3OmniPipeline, group: Any) -> SplitDecode:
    """Split the VAE decode of `pipe` across the ranks of `group` (every rank must decode each video).

    Raises for a decoder with a layer whose reach across rows it does not know, rather than decode wrong rows.
    """
    import torch
    from diffusers.models.autoencoders.autoencoder_kl_wan import WanAttentionBlock, WanCausalConv3d

    from helpers.errors import InvalidSettingError

    split = SplitDecode(group)
    vae = pipe.vae
    for name, layer in vae.decoder.named_modules():
        if isinstance(layer, WanAttentionBlock):
            _split_only_while_decoding(split, layer, functools.partial(split.whole_frame, layer.forward))
        elif isinstance(layer, WanCausalConv3d):
            if layer.stride[1:] != (1, 1) or layer._padding[2] != (layer.kernel_size[1] - 1) // 2:
                raise InvalidSettingError(f"The split VAE decode does not know the rows {name} reads.")
            _split_only_while_decoding(split, layer, functools.partial(split.causal_conv3d, layer))
        elif isinstance(layer, torch.nn.Conv2d) and layer.kernel_size[0] > 1:
            if layer.stride[0] != 1 or layer.padding_mode != "zeros" or layer.padding[0] != layer.kernel_size[0] // 2:
                raise InvalidSettingError(f"The split VAE decode does not know the rows {name} reads.")
            _split_only_while_decoding(split, layer, functools.partial(split.conv2d, layer))
    if getattr(vae, "use_tiling", False):
        raise InvalidSettingError("The split VAE decode replaces tiled decoding: leave 'vae_tiling' off.")
    vae.decode = functools.partial(split.decode, vae.decode)
    return split
