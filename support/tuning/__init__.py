"""The Diffusers side: resolving MODEL, the random-weight checkpoints, the speed and memory switches, and the
`pipe(...)` call for code that runs without a notebook cell."""
