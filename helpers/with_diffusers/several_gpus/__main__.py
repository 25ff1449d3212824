"""`torchrun --nproc-per-node N -m helpers.with_diffusers.several_gpus --model ... --gpus N`: one rank of a parallel run."""

from helpers.with_diffusers.several_gpus.runner import main

main()
