"""The cookbook's own speed and memory switches for the Diffusers pipeline (`patches`, `attention`,
`flash_attention`, `fp8`), applied by name (`pipelines`), the notebooks' calls run from their tagged cells for code
without a notebook (`notebook_calls`), and several GPUs (`several_gpus`). Only make_it_fast_with_diffusers.ipynb, the
benchmarks and the tests import it."""
