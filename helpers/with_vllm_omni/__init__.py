"""The vLLM-Omni side: request fields and error handling around the HTTP calls, launch commands for a real
server, and the launcher of the local stand-in."""
