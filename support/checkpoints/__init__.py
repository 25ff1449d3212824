"""MODEL resolved to a checkpoint folder for `from_pretrained` and `vllm serve`: the random-weight checkpoints built
here (`random_weights`, `fp8`), a folder on this machine, or a Hugging Face id downloaded once (`hub`); `resolver`
decides which and checks everything that can fail before anything is built or downloaded."""

from checkpoints.resolver import Checkpoint, check, choose_device, resolve

__all__ = ["Checkpoint", "check", "choose_device", "resolve"]
