"""CFG parallelism: the conditional pass of classifier-free guidance on one rank, the unconditional on another.

Each step the pipeline calls its transformer twice, "cond" then "uncond", and combines the two predictions. Here
both ranks of a CFG pair run the full pipeline on the same latents, but at the "cond" call each computes only its
own pass, at the same time; the two predictions are then swapped, so that both ranks return the conditional one
now and the unconditional one at the "uncond" call, which computes nothing. The pipeline's own guidance combine and
scheduler step then run on identical numbers on both ranks, so their latents stay identical with no further
exchange, and equal to one process's up to the numerical noise of splitting the work.

How the second rank runs the unconditional pass at the "cond" call: its pipeline is handed the two tokenized prompts
in swapped order, so the inputs it packs for its "cond" call are exactly those of the unconditional pass. Each rank
keeps its pass's state under one cache context name for the whole run (rank 1's "cond" context holds the negative
prompt), so switches keyed on that name, like the text key/value cache, stay consistent.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from diffusers import Cosmos3OmniPipeline


def _swapped_prompts(pipe: Cosmos3OmniPipeline) -> None:
    tokenize = pipe.tokenize_prompt

    @functools.wraps(tokenize)
    def tokenize_negative_first(*args: Any, **kwargs: Any) -> tuple[list[int], list[int]]:
        cond, uncond = tokenize(*args, **kwargs)
        # Without guidance there is no unconditional pass, and every rank runs the conditional one.
        return (uncond, cond) if pipe.do_classifier_free_guidance else (cond, uncond)

    pipe.tokenize_prompt = tokenize_negative_first


def _swap(predictions: tuple[Any, ...], group: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """(rank 0's, rank 1's) transformer outputs, from this rank's: each is (vision, sound, action) lists or None."""
    import torch
    import torch.distributed as dist

    first: list[Any] = []
    second: list[Any] = []
    for items in predictions:
        if items is None:
            first.append(None)
            second.append(None)
            continue
        pairs = []
        for tensor in items:
            mine = tensor.contiguous()
            both = [torch.empty_like(mine) for _ in range(2)]
            dist.all_gather(both, mine, group=group)
            pairs.append(both)
        first.append([pair[0] for pair in pairs])
        second.append([pair[1] for pair in pairs])
    return tuple(first), tuple(second)


class CfgParallel:
    """Installed on one pipeline by `enable`: runs this rank's guidance pass and swaps predictions with its pair."""

    def __init__(self, pipe: Cosmos3OmniPipeline, group: Any):
        self.pipe = pipe
        self.group = group
        self.context: str | None = None
        self.unconditional: tuple[Any, ...] | None = None
        self.forward = pipe.transformer.forward
        self.cache_context = pipe.transformer.cache_context

    @contextlib.contextmanager
    def named_context(self, name: str, **kwargs: Any) -> Iterator[None]:
        """The transformer's `cache_context`, noting which pass the pipeline is asking for."""
        self.context = name
        try:
            with self.cache_context(name, **kwargs):
                yield
        finally:
            self.context = None

    def forward_this_rank(self, *args: Any, **kwargs: Any) -> Any:
        """The transformer's forward as the pipeline sees it: "cond" computes and swaps, "uncond" hands back."""
        if not self.pipe.do_classifier_free_guidance or self.context not in ("cond", "uncond"):
            return self.forward(*args, **kwargs)
        if self.context == "uncond":
            if self.unconditional is None:
                raise RuntimeError("CFG parallelism: the unconditional pass was asked for before the conditional one.")
            unconditional, self.unconditional = self.unconditional, None
            return unconditional
        if kwargs.get("return_dict", True):
            raise RuntimeError("CFG parallelism swaps the pipeline's tuple outputs; call with return_dict=False.")
        conditional, self.unconditional = _swap(tuple(self.forward(*args, **kwargs)), self.group)
        return conditional


def enable(pipe: Cosmos3OmniPipeline, group: Any) -> CfgParallel:
    """Make this pipeline one of a CFG pair: rank 0 of `group` computes the conditional pass, rank 1 the other.

    Install it last, over every other switch: it wraps the transformer's forward as the pipeline calls it.
    """
    import torch.distributed as dist

    parallel = CfgParallel(pipe, group)
    if dist.get_rank(group) == 1:
        _swapped_prompts(pipe)
    pipe.transformer.cache_context = parallel.named_context
    pipe.transformer.forward = parallel.forward_this_rank
    return parallel
