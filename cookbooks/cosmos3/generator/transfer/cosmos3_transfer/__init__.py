"""The transfer family's own code, beside its notebooks: each control's settings and the controls' checks
(`transfer_settings`), and vLLM-Omni's noise schedule for diffusers' modular transfer pipeline (`schedules`). What
other families share is in `helpers`."""
