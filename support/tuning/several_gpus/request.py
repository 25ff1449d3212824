"""One parallel run, as the notebook asks for it and as the runner's command line carries it.

The fields are the Diffusers notebook's parameters (MODEL, MODES, PRESET, TIER, ASPECT_RATIO, SPEED, SEED,
OUTPUT_DIR, IMAGE, VIDEO, GUARDRAILS) plus how many GPUs to use and how to split the work. `arguments()` writes a
request as command-line flags and `Request.parse` reads them back, so the launcher and the runner cannot disagree.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass

from cosmos3_audiovisual import modes
from helpers import models, speeds
from helpers.audiovisual_settings import AudiovisualSettings
from helpers.errors import InvalidSettingError
from helpers.settings import check_guardrails
from tuning.several_gpus.layout import Degrees, degrees_for

# The SPEED values that run on several GPUs: the exact ones, whose switches give the same output as one GPU, up to
# noise. `turbo`'s step caching decides per rank whether to skip work, which would desynchronise the ranks; the memory
# values tile the VAE decode, which the split decode replaces, and are for one small GPU anyway.
PARALLEL_SPEEDS: tuple[str, ...] = speeds.exact_values()
DEVICES: tuple[str, ...] = ("auto", "cuda", "cpu")
# "split": every rank decodes a strip of rows (`split_decode`); "rank0": rank 0 decodes alone.
DECODES: tuple[str, ...] = ("split", "rank0")


@dataclass(frozen=True)
class Request:
    """What to generate, where, and how to split it (`cfg`/`context` None: chosen from `gpus`)."""

    model: str = models.DEFAULT_MODEL
    gpus: int = 2
    cfg: int | None = None
    context: int | None = None
    modes: str = "t2v"
    preset: str = "draft"
    tiers: str = ""  # TIER; empty (or 0): the preset's size; several, comma-separated (256,480): every mode at each
    aspect_ratio: str = ""
    speed: str = "fast"
    seed: int = 0
    output_dir: str = "outputs"
    guardrails: str = "auto"
    image: str = ""
    video: str = ""
    device: str = "auto"  # "cuda": one GPU per process (NCCL); "cpu": processes on CPU cores (gloo); "auto": either
    num_frames: int | None = None  # None: the preset's
    steps: int | None = None  # None: the preset's
    warmup_steps: int = 0  # an untimed generation of this many steps first, for each size (compilation, tuning)
    decode: str = "split"
    progress: bool = False  # rank 0's progress bars
    publish: str = ""  # where rank 0 writes the run folder's path, as JSON (the launcher sets it)

    @property
    def degrees(self) -> Degrees:
        return degrees_for(self.gpus, self.cfg, self.context)

    def settings(self) -> list[tuple[str, AudiovisualSettings]]:
        """(output name, settings) of every generation, in order: each mode, at each tier."""
        given = [t.strip() for t in self.tiers.split(",") if t.strip()]
        if any(not t.isdigit() for t in given):
            raise InvalidSettingError(f"TIER={self.tiers!r}: give tiers as numbers, comma-separated (256, 480, 720).")
        tiers = [int(t) for t in given] or [0]
        overrides = {
            "seed": self.seed,
            "aspect_ratio": self.aspect_ratio,
            "num_frames": self.num_frames,
            "num_inference_steps": self.steps,
        }
        named = []
        for tier in tiers:
            for mode, s in modes.settings_for_modes(self.modes, self.preset, tier=tier, **overrides).items():
                named.append((f"{mode}_{tier}" if len(tiers) > 1 else mode, s))
        return named

    def check(self) -> Request:
        """Raise `InvalidSettingError` for anything wrong that can be seen before a process starts."""
        degrees = self.degrees
        self.settings()
        speeds.switches(self.speed, "tuning")
        check_guardrails(self.guardrails)
        if degrees.world_size > 1 and self.speed not in PARALLEL_SPEEDS:
            raise InvalidSettingError(
                f"SPEED={self.speed!r} does not run on several GPUs: use one of {', '.join(map(repr, PARALLEL_SPEEDS))}"
                " (`fast` keeps the same output up to noise), or GPUS=1."
            )
        for name, value, allowed in (("device", self.device, DEVICES), ("decode", self.decode, DECODES)):
            if value not in allowed:
                choices = ", ".join(map(repr, allowed))
                raise InvalidSettingError(f"{name}={value!r} is not allowed: use one of {choices}.")
        if self.warmup_steps < 0:
            raise InvalidSettingError(f"warmup_steps={self.warmup_steps} is not allowed: use 0 (none) or more.")
        return self

    def device_type(self) -> str:
        """ "cuda" or "cpu": `device`, with "auto" decided by whether this machine has a CUDA GPU."""
        import torch

        if self.device == "auto":
            return "cuda" if torch.cuda.is_available() else "cpu"
        return self.device

    def arguments(self, shown: frozenset[str] | None = None) -> list[str]:
        """The request as the runner's command-line flags (`--name value`; a true flag alone; None left out).

        With `shown`, a field at its default value is left out unless named in `shown`.
        """
        args: list[str] = []
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if shown is not None and field.name not in shown and value == field.default:
                continue
            flag = "--" + field.name.replace("_", "-")
            if isinstance(value, bool):
                args += [flag] if value else []
            elif value is not None:
                args += [flag, str(value)]
        return args

    @classmethod
    def parse(cls, argv: list[str] | None = None) -> Request:
        """The request that `arguments()` wrote (unknown flags are an error)."""
        parser = argparse.ArgumentParser(prog="python -m tuning.several_gpus", description=__doc__)
        for field in dataclasses.fields(cls):
            flag = "--" + field.name.replace("_", "-")
            if field.type == "bool":
                parser.add_argument(flag, action="store_true", dest=field.name)
            else:
                kind = int if field.type.startswith("int") else str
                parser.add_argument(flag, type=kind, default=field.default, dest=field.name)
        return cls(**vars(parser.parse_args(argv))).check()
