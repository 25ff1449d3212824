"""The cookbook's own speed and memory switches for the Diffusers pipeline (`speed`, `attention`, `flash_attention`,
`fp8`), applied by name (`pipelines`), the notebooks' calls for code without a notebook (`lessons`), and several GPUs
(`several_gpus`). Only make_it_fast_with_diffusers.ipynb, the benchmarks and the tests import it."""
