"""What a `MODEL` string names, decided in one place for the Diffusers notebooks and the local vLLM-Omni server:
one of the cookbook's offline checkpoints, a folder on this machine, or a Hugging Face id."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from checkpoints import NANO_VARIANTS, TINY_VARIANTS


class Source(StrEnum):
    OFFLINE = "offline"  # "tiny", "nano-random" and their variants: built here, never downloaded
    LOCAL = "local"  # a folder, or a name written as a path (which may not exist: the caller says so)
    HUB = "hub"  # `name` or `owner/name`, with an optional `@revision`


def looks_like_a_path(model: str) -> bool:
    """A Hugging Face id is `name` or `owner/name`; anything written as a path is one, existing or not (Windows
    separators included)."""
    return model.startswith((".", "/", "~", "\\")) or "\\" in model or model.count("/") > 1 or model.endswith("/")


def source_of(model: str) -> Source:
    if model in TINY_VARIANTS or model in NANO_VARIANTS:
        return Source.OFFLINE
    if looks_like_a_path(model) or Path(model).expanduser().exists():
        return Source.LOCAL
    return Source.HUB
