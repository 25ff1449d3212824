"""`torchrun --nproc-per-node N -m parallel_diffusers --model ... --gpus N`: one rank of a parallel run."""

from parallel_diffusers.runner import main

main()
