"""The interactive layer the audiovisual notebooks end with: one `Backend` interface over the Diffusers pipeline and a
vLLM-Omni server (`backends`), the side-by-side comparison (`compare`) and the generation form (`widget`)."""
