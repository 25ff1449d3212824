"""The names `MODEL` can take for the random-weight checkpoints this package builds, and where a MODEL comes from.
Data only: `resolver` reads a MODEL string with them."""

from __future__ import annotations

from enum import StrEnum

TINY_MODEL_NAME = "tiny"
NANO_MODEL_NAME = "nano-random"
# The tiny checkpoint and its variants, each a published variant's configuration at toy size: MODEL name -> the
# entry of published.json's "variants" it applies (None: Nano as published, with sound and action heads).
TINY_VARIANTS: dict[str, str | None] = {
    TINY_MODEL_NAME: None,
    "tiny-edge": "edge",
    "tiny-nosound": "nosound",
    "tiny-distilled": "distilled",
    "tiny-fp8": "fp8",
}
# Nano's size: the bf16 checkpoint and the FP8 revision's format (MODEL name -> the variant it applies).
NANO_VARIANTS: dict[str, str | None] = {NANO_MODEL_NAME: None, f"{NANO_MODEL_NAME}-fp8": "fp8"}


class Source(StrEnum):
    RANDOM = "random"  # `tiny`, `nano-random` and their variants: built here with random weights, never downloaded
    LOCAL = "local"  # a folder, or a name written as a path (which may not exist: the resolver says so)
    HUB = "hub"  # `name` or `owner/name`, with an optional `@revision`
