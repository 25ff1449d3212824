"""One rank of a parallel run: `torchrun --nproc-per-node N -m helpers.with_diffusers.several_gpus --model ...`."""

from helpers.with_diffusers.several_gpus.runner import main

main()
