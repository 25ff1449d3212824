"""One rank of a parallel run: `torchrun --nproc-per-node N -m tuning.several_gpus --model ...`."""

from tuning.several_gpus.runner import main

main()
