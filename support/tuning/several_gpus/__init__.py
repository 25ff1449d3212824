"""The Diffusers route on several GPUs: one Cosmos 3 pipeline per process, launched with `torchrun`.

- `layout`: how many processes, and how they split the work: CFG-parallel (the conditional and unconditional passes
  of classifier-free guidance on different ranks) times Ulysses context parallelism (each pass's tokens split
  across ranks);
- `cfg_parallel`, `context_parallel`, `split_decode`: what each rank installs on its pipeline;
- `runner`: the process `torchrun` starts (`python -m tuning.several_gpus`): it loads the pipeline as
  the Diffusers
  notebook does, generates, and rank 0 writes the run folder and its manifest;
- `launch`: for the notebook: the `torchrun` command of a request, what a machine with too few GPUs lacks, and
  running the command while streaming its output.

Importing the package loads nothing; torch is imported when a function needs it.
"""
