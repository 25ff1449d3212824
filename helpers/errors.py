"""Exceptions raised by the cookbook helpers: every one says what went wrong and what to do about it."""

from __future__ import annotations

from collections.abc import Iterable


class CookbookError(Exception):
    """Base class for every error the helpers raise on purpose."""


class InvalidSettingError(CookbookError, ValueError):
    """A preset, mode or generation setting is not one of the allowed values. `parameter` names the notebook
    parameter or keyword at fault, where the check knows it (a spec file maps it to its own field)."""

    def __init__(self, message: str, parameter: str | None = None):
        super().__init__(message)
        self.parameter = parameter


class MediaError(CookbookError):
    """A conditioning image or video is missing or cannot be decoded, or written media is wrong."""


class ModelUnavailableError(CookbookError):
    """`MODEL` is neither a loadable local checkpoint nor a Hugging Face id this machine can fetch."""


class GuardrailsUnavailableError(CookbookError):
    """Guardrails were asked for but `cosmos_guardrail` (or its gated model) is not available."""


class SoundNotSupportedError(CookbookError, ValueError):
    """Sound was asked of a checkpoint that has no sound tokenizer."""


class OutOfMemoryAdviceError(CookbookError, MemoryError):
    """The accelerator ran out of memory; the message names a smaller preset."""


def allowed(values: Iterable[object]) -> str:
    """The allowed values as every refusal lists them: `'a', 'b'`."""
    return ", ".join(repr(v) for v in values)


class StorageError(CookbookError):
    """The output folder is full or cannot be written; what was finished before stays listed."""
