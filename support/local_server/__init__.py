"""The vLLM-Omni side: request fields and error handling around the HTTP calls, launch commands for a real
server, and starting the real one (`serve`, and `local_server` for the notebook)."""
