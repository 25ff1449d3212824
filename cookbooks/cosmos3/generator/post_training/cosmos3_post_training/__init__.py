"""The post-training cookbook's own code, beside its notebooks: the settings of a fine-tune (`settings`), a folder of
training clips (`clips`), what the training loop stands on (`training`: each clip's packed inputs, the saved state)
and a trained adapter as others use it (`adapters`: its card, its copy under vLLM-Omni's names)."""
